//! How long one call may run, and whether its caller still wants the answer.
//!
//! Bounds on bytes and entries keep a call's memory in check; a [`Budget`] keeps its time in
//! check. The walks, the content search (between files and between the chunks of one file),
//! line windows deep in a file, edits and their diffs check it as they go, so a runaway call (a
//! huge tree, a regular expression that is slow on a large file) ends with an error that says
//! what to narrow instead of holding the server. A caller that no longer wants the answer (an
//! MCP client's `notifications/cancelled`) sets the cancel flag and the work stops at the next
//! check.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::Error;

/// The time a call may take and a flag its caller sets to cancel it. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    time: Option<Duration>,
    cancel: Option<Arc<AtomicBool>>,
}

impl Budget {
    /// No time limit and no cancel flag.
    #[must_use]
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Ends each call that runs longer than `time`.
    #[must_use]
    pub fn with_time(mut self, time: Duration) -> Self {
        self.time = Some(time);
        self
    }

    /// Ends each call once `flag` is set.
    #[must_use]
    pub fn with_cancel_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// The time limit, if any.
    #[must_use]
    pub fn time(&self) -> Option<Duration> {
        self.time
    }

    /// The clock for one call of `operation`, started now.
    pub(crate) fn start(&self, operation: &'static str) -> Deadline {
        Deadline {
            at: self.time.and_then(|time| Instant::now().checked_add(time)),
            seconds: self.time.map_or(0, |time| time.as_secs().max(1)),
            cancel: self.cancel.clone(),
            operation,
        }
    }
}

/// One call's clock: when it must end, and its cancel flag.
#[derive(Debug, Clone)]
pub(crate) struct Deadline {
    at: Option<Instant>,
    seconds: u64,
    cancel: Option<Arc<AtomicBool>>,
    operation: &'static str,
}

impl Deadline {
    /// A clock that never runs out (internal helpers, tests).
    pub(crate) fn never() -> Self {
        Budget::unlimited().start("")
    }

    /// `Err` once the call is cancelled or out of time.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.cancel.as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed)) {
            return Err(Error::cancelled());
        }
        if self.at.is_some_and(|at| Instant::now() >= at) {
            return Err(Error::timed_out(self.operation, self.seconds, hint(self.operation)));
        }
        Ok(())
    }

    /// The instant the call must end, if any.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// Wraps a reader so that each read checks the clock first.
    pub(crate) fn reader<R: Read>(&self, inner: R) -> Timed<'_, R> {
        Timed { inner, deadline: self }
    }

    /// Turns an I/O error into the budget's error when the clock stopped the read, else into
    /// the ordinary one.
    pub(crate) fn io_error(&self, path: &crate::VirtualPath, error: io::Error) -> Error {
        if error.get_ref().is_some_and(<dyn std::error::Error + Send + Sync>::is::<Stopped>) {
            return self.check().err().unwrap_or_else(|| Error::io(path, error));
        }
        Error::io(path, error)
    }
}

/// What to narrow, per operation, for the out-of-time message.
fn hint(operation: &str) -> &'static str {
    match operation {
        "grep" => "narrow it with `path`, `include` or a more specific pattern",
        "directory_tree" => "pass a smaller `maxDepth`, `excludePatterns` or a deeper `path`",
        "search_files" => "search below a deeper `path`, or with a more specific pattern",
        "read_text_file" | "read_multiple_files" => "read a window nearer the start (`head`, or `offset` and `limit`)",
        "edit_file" => "make fewer or smaller edits",
        _ => "narrow the request",
    }
}

/// The marker inside an I/O error that a [`Timed`] reader stopped.
#[derive(Debug)]
struct Stopped;

impl std::fmt::Display for Stopped {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("the call's time budget ran out")
    }
}

impl std::error::Error for Stopped {}

/// A reader that checks its call's clock before each read.
pub(crate) struct Timed<'d, R> {
    inner: R,
    deadline: &'d Deadline,
}

impl<R: Read> Read for Timed<'_, R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        if self.deadline.check().is_err() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, Stopped));
        }
        self.inner.read(buffer)
    }
}

impl<R: io::Seek> io::Seek for Timed<'_, R> {
    fn seek(&mut self, position: io::SeekFrom) -> io::Result<u64> {
        self.inner.seek(position)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spent_budget_stops_with_a_hint_and_a_cancel_flag_stops_at_once() {
        let budget = Budget::unlimited().with_time(Duration::ZERO);
        let error = budget.start("grep").check().unwrap_err();
        assert_eq!(
            error.to_string(),
            "`grep` ran past its 1 s time budget and was stopped; narrow it with `path`, `include` or a more specific pattern"
        );
        let flag = Arc::new(AtomicBool::new(false));
        let budget = Budget::unlimited().with_cancel_flag(flag.clone());
        let clock = budget.start("grep");
        assert!(clock.check().is_ok());
        flag.store(true, Ordering::Relaxed);
        assert_eq!(clock.check().unwrap_err().kind(), crate::ErrorKind::Cancelled);
        let mut reader = clock.reader(&b"data"[..]);
        let error = reader.read(&mut [0; 4]).unwrap_err();
        let path = crate::VirtualPath::new("/a").unwrap();
        assert_eq!(clock.io_error(&path, error).kind(), crate::ErrorKind::Cancelled);
    }
}
