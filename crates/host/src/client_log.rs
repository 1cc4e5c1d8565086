//! The server's own warnings, for the client: MCP `logging` (`notifications/message`).
//!
//! A warning that the server logs while it runs a client's tool call (a panic caught, an
//! exchange log that cannot be written, an object store that fails) is worth telling that
//! client: the model sees why a result looks the way it does. The operator's log (stderr) gets
//! every event with its fields; the client gets only the event's message, a fixed sentence of
//! the code's, passed through its registry's scrub as well, so no physical path can reach it.
//! Events are matched to the call that caused them by the thread that runs the call: an event
//! outside any call (a connection that fails, a shutdown) goes to the operator only.
//!
//! The 2026 revision of the specification deprecates logging (SEP-2577); clients of the
//! 2025-11-25 revision, the one the SDKs negotiate today, still use it.
#![expect(deprecated, reason = "MCP logging is deprecated by SEP-2577, and still what 2025-11-25 clients use")]

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::LoggingLevel;
use tracing::field::{Field, Visit};

/// Where one call's notices go: the session's threshold and a channel to its forwarder.
#[derive(Debug, Clone)]
pub(crate) struct CallLog {
    threshold: Arc<AtomicU8>,
    sender: tokio::sync::mpsc::UnboundedSender<(LoggingLevel, String)>,
}

impl CallLog {
    pub(crate) fn new(
        threshold: Arc<AtomicU8>,
        sender: tokio::sync::mpsc::UnboundedSender<(LoggingLevel, String)>,
    ) -> Self {
        Self { threshold, sender }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CallLog>> = const { RefCell::new(None) };
}

/// Runs `work` with its warnings going to `log` as well as to the operator.
pub(crate) fn within<T>(log: CallLog, work: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|current| current.borrow_mut().take());
        }
    }
    CURRENT.with(|current| *current.borrow_mut() = Some(log));
    let _reset = Reset;
    work()
}

/// The rank of a level, for thresholds: debug 0 … emergency 7.
pub(crate) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The default threshold before the client sets one: warnings and worse.
pub(crate) const DEFAULT_THRESHOLD: u8 = 3;

/// A threshold above every level: no notice is sent.
pub(crate) const SILENT: u8 = 8;

/// The tracing layer that sends a call's warnings and errors to its client. Add it to the
/// process's subscriber (the `vfs` binary does).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientLogLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ClientLogLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        // (The event's metadata, named by its type: no file's.)
        let level = match *tracing::Event::metadata(event).level() {
            tracing::Level::ERROR => LoggingLevel::Error,
            tracing::Level::WARN => LoggingLevel::Warning,
            tracing::Level::INFO => LoggingLevel::Info,
            _ => LoggingLevel::Debug,
        };
        CURRENT.with(|current| {
            let current = current.borrow();
            let Some(log) = current.as_ref() else { return };
            if rank(level) < log.threshold.load(Ordering::Relaxed) {
                return;
            }
            let mut message = Message(None);
            event.record(&mut message);
            if let Some(text) = message.0 {
                let _ = log.sender.send((level, text));
            }
        });
    }
}

/// The event's `message` field, and nothing else.
struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}
