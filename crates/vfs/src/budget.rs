//! How long one call may run, and whether its caller still wants the answer.
//!
//! Bounds on bytes and entries keep a call's memory in check; a [`Budget`] keeps its time in
//! check. The walks, the content search (between files and between the chunks of one file),
//! line windows deep in a file, edits and their diffs check it as they go, so a runaway call (a
//! huge tree, a regular expression that is slow on a large file) ends with an error that says
//! what to narrow instead of holding the server. A caller that no longer wants the answer (an
//! MCP client's `notifications/cancelled`) sets the cancel flag and the work stops at the next
//! check. A caller that wants to know how far a long call got gives a progress sink: walks,
//! searches and multi-file reads report to it, at most four times a second.
//!
//! Only a call's `Deadline` calls the sink, and the call waits for the search's helpers (the
//! registry's worker pool) to leave its work before it returns. The deadline serializes the
//! reports, so they reach the sink one at a time and in order, and it is closed before the call
//! returns: what a sink is told is always about a call still running.
//!
//! A thread working for a call holds the call's deadline as its current one
//! ([`Deadline::enter`]: the accessor's thread for the whole call, a pool thread for as long as
//! it helps a search), so that storage that waits on the network (object stores) bounds each
//! request by the call's time and cancel flag without every primitive taking the clock.

use std::cell::RefCell;
use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::changes::CallId;
use crate::error::Error;
use crate::hint::Operation;

/// How far a long call got: a count that grows, the total when it is known, and a line that
/// says what was counted (numbers and fixed wording only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// What is done so far (entries scanned, files searched, files read).
    pub done: u64,
    /// The whole, when known.
    pub total: Option<u64>,
    /// What was counted, like `1200 files searched, 14 matches`.
    pub message: String,
}

/// Where a call's progress goes.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// The time a call may take, a flag its caller sets to cancel it, and where its progress goes.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct Budget {
    time: Option<Duration>,
    cancel: Option<Arc<AtomicBool>>,
    progress: Option<ProgressSink>,
    call: Option<CallId>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Budget")
            .field("time", &self.time)
            .field("cancel", &self.cancel)
            .field("progress", &self.progress.is_some())
            .field("call", &self.call)
            .finish()
    }
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

    /// Reports each call's progress to `sink`: once at the start, then at most four times a
    /// second. Each report's `done` is larger than the one before; no report is made once the
    /// cancel flag is set or after the call has returned, and two reports never overlap.
    #[must_use]
    pub fn with_progress(mut self, sink: ProgressSink) -> Self {
        self.progress = Some(sink);
        self
    }

    /// Files the changes of the calls made with this budget under `call` (the id the host
    /// writes on the call's exchange-log line); without one, each call gets a fresh id.
    #[must_use]
    pub fn with_call(mut self, call: CallId) -> Self {
        self.call = Some(call);
        self
    }

    /// The time limit, if any.
    #[must_use]
    pub fn time(&self) -> Option<Duration> {
        self.time
    }

    /// True once the caller set the cancel flag (for work outside the core, like a command
    /// of the sandbox, that checks it itself).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// Where the caller wants progress reported, if anywhere (for work outside the core,
    /// which keeps the sink's rules itself: at most four reports a second, none after the
    /// call returned or was cancelled).
    #[must_use]
    pub fn progress_sink(&self) -> Option<&ProgressSink> {
        self.progress.as_ref()
    }

    /// The id of the next call made with this budget.
    /// The id of the call this budget was given ([`Budget::with_call`]), if any.
    #[must_use]
    pub fn call_id(&self) -> Option<&CallId> {
        self.call.as_ref()
    }

    pub(crate) fn call(&self) -> CallId {
        self.call.clone().unwrap_or_default()
    }

    /// The clock for one call of `operation`, started now.
    pub(crate) fn start(&self, operation: Operation) -> Deadline {
        self.clock(Some(operation))
    }

    fn clock(&self, operation: Option<Operation>) -> Deadline {
        let started = Instant::now();
        Deadline {
            at: self.time.and_then(|time| started.checked_add(time)),
            seconds: self.time.map_or(0, |time| time.as_secs().max(1)),
            cancel: self.cancel.clone(),
            operation,
            progress: self.progress.clone().map(|sink| Reporter {
                sink,
                reported: AtomicU64::new(NEVER),
                floor: AtomicU64::new(0),
                closed: Mutex::new(false),
            }),
            started,
        }
    }
}

/// Least time between two progress reports.
const REPORT_EVERY: Duration = Duration::from_millis(250);
/// `Reporter::reported` before the first report.
const NEVER: u64 = u64::MAX;

/// One call's clock: when it must end, its cancel flag, and where its progress goes.
pub(crate) struct Deadline {
    at: Option<Instant>,
    seconds: u64,
    cancel: Option<Arc<AtomicBool>>,
    /// `None` for a clock that never runs out.
    operation: Option<Operation>,
    progress: Option<Reporter>,
    started: Instant,
}

/// Where one call's progress goes, and what has gone there.
struct Reporter {
    sink: ProgressSink,
    /// Milliseconds from the call's start to the last report (`NEVER` before the first): the
    /// rate limit, checked without the lock.
    reported: AtomicU64,
    /// The least `done` the next report may carry: one more than the last one sent.
    floor: AtomicU64,
    /// True once the call has returned. Held while the sink runs, so reports go out one at a
    /// time and in order, and a cancel flag a sink sets is seen by the next report.
    closed: Mutex<bool>,
}

impl std::fmt::Debug for Deadline {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Deadline")
            .field("at", &self.at)
            .field("operation", &self.operation)
            .finish_non_exhaustive()
    }
}

impl Deadline {
    /// A clock that never runs out (internal helpers, tests).
    pub(crate) fn never() -> Self {
        Budget::unlimited().clock(None)
    }

    /// `Err` once the call is cancelled or out of time.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.cancelled() {
            return Err(Error::cancelled());
        }
        if let Some(operation) = self.operation
            && self.at.is_some_and(|at| Instant::now() >= at)
        {
            return Err(Error::timed_out(operation, self.seconds));
        }
        Ok(())
    }

    /// [`Deadline::check`] for a call waiting for another call's claim on a place of its `paths`
    /// (ADR 0006): past its time, the answer says what it waited for, not what to narrow.
    pub(crate) fn check_waiting(&self, paths: &[&crate::path::VirtualPath]) -> Result<(), Error> {
        self.check().map_err(|error| match self.operation {
            Some(operation) if error.kind() == crate::ErrorKind::TimedOut => {
                Error::timed_out_waiting(operation, self.seconds, paths)
            }
            _ => error,
        })
    }

    /// The instant the call must end, if any.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.at
    }

    /// True when the call can end early: it has a time limit or a cancel flag.
    pub(crate) fn bounded(&self) -> bool {
        self.at.is_some() || self.cancel.is_some()
    }

    /// Makes this the current thread's deadline ([`current`]) until the guard is dropped,
    /// which puts back the one before.
    pub(crate) fn enter(self: &Arc<Self>) -> Entered {
        let previous = CURRENT.with(|current| current.replace(Some(Arc::clone(self))));
        Entered { previous }
    }

    /// Reports progress: the first time at once, then at most every quarter second, and only a
    /// `done` larger than the last one sent (a worker that counted a little earlier than
    /// another may come second; its report is dropped, not sent out of order). Nothing is sent
    /// once the cancel flag is set or the deadline is closed. `message` is built only when sent.
    ///
    /// Cheap enough to call for every entry or file: a load, a clock read and a compare; the
    /// lock is taken only for a report that goes out.
    pub(crate) fn progress(&self, done: u64, total: Option<u64>, message: impl FnOnce() -> String) {
        let Some(reporter) = &self.progress else { return };
        if done < reporter.floor.load(Ordering::Relaxed) {
            return;
        }
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        let last = reporter.reported.load(Ordering::Relaxed);
        let every = u64::try_from(REPORT_EVERY.as_millis()).unwrap_or(u64::MAX);
        if last != NEVER && now < last.saturating_add(every) {
            return;
        }
        if reporter.reported.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return;
        }
        // A sink that panicked poisoned the lock: it is not called again.
        let Ok(closed) = reporter.closed.lock() else { return };
        if *closed || self.cancelled() || done < reporter.floor.load(Ordering::Relaxed) {
            return;
        }
        reporter.floor.store(done.saturating_add(1), Ordering::Relaxed);
        (reporter.sink)(Progress { done, total, message: message() });
    }

    /// Ends the reports: once this returns, the sink is not running and is never called again.
    /// The accessor closes each call's deadline before the call returns.
    pub(crate) fn close(&self) {
        if let Some(reporter) = &self.progress {
            *reporter.closed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        }
    }

    /// True once the caller has set the cancel flag.
    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|flag| flag.load(Ordering::Relaxed))
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

thread_local! {
    /// The deadline of the call the thread works for, if any ([`Deadline::enter`]).
    static CURRENT: RefCell<Option<Arc<Deadline>>> = const { RefCell::new(None) };
}

/// The deadline of the call the current thread works for, if any.
pub(crate) fn current() -> Option<Arc<Deadline>> {
    CURRENT.with(|current| current.borrow().clone())
}

/// While it lives, a deadline is its thread's current one (see [`Deadline::enter`]).
pub(crate) struct Entered {
    previous: Option<Arc<Deadline>>,
}

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// The I/O error of a read that the call's clock stopped: [`Deadline::io_error`] turns it into
/// the budget's error (for readers that wait on the clock themselves, like an object's ranges).
pub(crate) fn stopped() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, Stopped)
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
            return Err(stopped());
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
    fn progress_is_reported_at_most_four_times_a_second() {
        let seen: Arc<std::sync::Mutex<Vec<Progress>>> = Arc::default();
        let sink = seen.clone();
        let budget = Budget::unlimited().with_progress(Arc::new(move |progress| sink.lock().unwrap().push(progress)));
        let mut clock = budget.start(Operation::Grep);
        clock.progress(1, Some(9), || "1 of 9".to_owned());
        clock.progress(2, Some(9), || unreachable!("built only when sent"));
        // As if the call had been running for a second.
        clock.started -= Duration::from_secs(1);
        clock.progress(3, Some(9), || "3 of 9".to_owned());
        clock.progress(4, Some(9), || unreachable!("built only when sent"));
        let seen = seen.lock().unwrap();
        let expected = [(1, "1 of 9"), (3, "3 of 9")].map(|(done, message)| Progress {
            done,
            total: Some(9),
            message: message.to_owned(),
        });
        assert_eq!(*seen, expected);
    }

    /// A budget whose sink records each report's `done`, with a cancel flag.
    fn recorded() -> (Budget, Arc<AtomicBool>, Arc<Mutex<Vec<u64>>>) {
        let seen: Arc<Mutex<Vec<u64>>> = Arc::default();
        let sink = seen.clone();
        let flag = Arc::new(AtomicBool::new(false));
        let budget = Budget::unlimited()
            .with_cancel_flag(flag.clone())
            .with_progress(Arc::new(move |progress: Progress| sink.lock().unwrap().push(progress.done)));
        (budget, flag, seen)
    }

    /// Reports `done` as if the last report were a second ago, past the rate limit.
    fn later(clock: &mut Deadline, done: u64) {
        clock.started -= Duration::from_secs(1);
        clock.progress(done, None, || done.to_string());
    }

    #[test]
    fn a_report_never_goes_back_and_a_dropped_one_does_not_hold_up_the_next() {
        let (budget, _, seen) = recorded();
        let mut clock = budget.start(Operation::Grep);
        clock.progress(5, None, || "5".to_owned());
        clock.started -= Duration::from_secs(1);
        clock.progress(4, None, || unreachable!("a smaller count is never sent"));
        clock.progress(5, None, || unreachable!("nor an equal one"));
        // The two dropped counts left the quarter second open for the next.
        clock.progress(6, None, || "6".to_owned());
        clock.progress(7, None, || unreachable!("within the quarter second"));
        assert_eq!(*seen.lock().unwrap(), [5, 6]);
    }

    #[test]
    fn nothing_is_reported_once_the_call_is_cancelled_or_closed() {
        let (budget, flag, seen) = recorded();
        let mut clock = budget.start(Operation::Grep);
        later(&mut clock, 1);
        flag.store(true, Ordering::Relaxed);
        later(&mut clock, 2);
        assert_eq!(*seen.lock().unwrap(), [1]);

        let (budget, _, seen) = recorded();
        let mut clock = budget.start(Operation::Grep);
        later(&mut clock, 1);
        clock.close();
        later(&mut clock, 2);
        assert_eq!(*seen.lock().unwrap(), [1]);
    }

    #[test]
    fn a_spent_budget_stops_with_a_hint_and_a_cancel_flag_stops_at_once() {
        let budget = Budget::unlimited().with_time(Duration::ZERO);
        let error = budget.start(Operation::Grep).check().unwrap_err();
        // The hint is a value; the words are the renderer's (here the core's own).
        assert_eq!(error.hint(), Some(crate::Hint::Narrow(Operation::Grep)));
        assert_eq!(
            error.to_string(),
            "`grep` ran past its 1 s time budget and was stopped; narrow it with a deeper path, a glob of names or a more specific pattern"
        );
        let flag = Arc::new(AtomicBool::new(false));
        let budget = Budget::unlimited().with_cancel_flag(flag.clone());
        let clock = budget.start(Operation::Grep);
        assert!(clock.check().is_ok());
        flag.store(true, Ordering::Relaxed);
        assert_eq!(clock.check().unwrap_err().kind(), crate::ErrorKind::Cancelled);
        let mut reader = clock.reader(&b"data"[..]);
        let error = reader.read(&mut [0; 4]).unwrap_err();
        let path = crate::VirtualPath::new("/a").unwrap();
        assert_eq!(clock.io_error(&path, error).kind(), crate::ErrorKind::Cancelled);
    }
}
