//! SIGTERM and SIGINT for the commands that change files: `vfs call`, `vfs undo` and `vfs serve`
//! over stdio.
//!
//! With the default action a signal ends the process wherever it is. A recursive delete with
//! the journal on moves its files into the journal one by one and writes its entry at the end:
//! cut in the middle (Ctrl-C, an MCP host or a service manager stopping the server), the
//! files it had moved were kept under names no entry tells, and undo could not put them back.
//! So the first signal asks the work in progress to stop where it safely can (a call's cancel
//! flag: a read stops, a write not yet made is not made, a delete that has begun finishes, an
//! undo stops between two entries) and the process ends once it has; a second signal ends it
//! at once (exit 130), as the one who sends it then asks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::output;

/// The exit status of a process ended by a second signal (as a shell reports Ctrl-C).
const SECOND_SIGNAL: i32 = 130;

/// SIGTERM, SIGINT and SIGHUP, listened for (their default action is off while this lives).
/// SIGHUP (the terminal the process runs in closed) stops as SIGTERM does: by its default
/// action it ended a daemon in the middle of a journaled tree delete (red team).
pub(crate) struct Signals {
    terminate: Signal,
    interrupt: Signal,
    hangup: Signal,
}

impl Signals {
    /// Listens for both; call it within a Tokio runtime.
    pub(crate) fn listen() -> anyhow::Result<Self> {
        let listen = |kind| signal(kind).context("cannot listen for SIGTERM, SIGINT and SIGHUP");
        Ok(Self {
            terminate: listen(SignalKind::terminate())?,
            interrupt: listen(SignalKind::interrupt())?,
            hangup: listen(SignalKind::hangup())?,
        })
    }

    /// The next SIGTERM, SIGINT or SIGHUP.
    pub(crate) async fn next(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
            _ = self.hangup.recv() => {}
        }
    }

    /// After the first signal (which the caller has waited for and acted on): says `what`
    /// happens now on stderr, then ends the process at the next signal.
    pub(crate) async fn then_end_at_the_next(mut self, what: &str) {
        output::status(&format!("vfs: {what}; a second SIGTERM or Ctrl-C stops at once"));
        self.next().await;
        output::status("vfs: stopped at once by a second signal");
        std::process::exit(SECOND_SIGNAL);
    }
}

/// From now on, the first SIGTERM or SIGINT sets the flag returned (and says `what` happens
/// now on stderr); a second ends the process at once. Listened for on a thread of its own,
/// for commands that run their work on the main thread; listening has begun when this returns.
pub(crate) fn flag_on_first_signal(what: &'static str) -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    let (ready, listening) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    std::thread::Builder::new()
        .name("vfs-signals".to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_io().build() {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = ready.send(Err(anyhow::Error::new(error).context("cannot start the async runtime")));
                    return;
                }
            };
            runtime.block_on(async move {
                let mut signals = match Signals::listen() {
                    Ok(signals) => signals,
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                let _ = ready.send(Ok(()));
                signals.next().await;
                set.store(true, Ordering::SeqCst);
                signals.then_end_at_the_next(what).await;
            });
        })
        .context("cannot start a thread")?;
    listening.recv().context("cannot listen for SIGTERM, SIGINT and SIGHUP")??;
    Ok(flag)
}
