//! The registry's worker pool: a fixed set of threads that content searches share.
//!
//! A search does not start threads of its own: its calling thread walks the tree and hands
//! each batch of files to up to [`MAX_WORKERS`] of the pool's threads, then waits for them. The
//! pool hands its threads round the calls that want them, so one tenant's long search cannot
//! hold every thread while another's waits: between two files, a thread that sees another
//! call waiting puts its call's work at the back of the queue and takes the one at the front.
//! The threads start with the first search, are woken as each search begins its walk and
//! look for its work a moment before they sleep again ([`LINGER`]), and end once the last
//! handle of the pool is dropped.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, PoisonError};
use std::time::{Duration, Instant};

/// How long a thread woken by a search about to hand out work ([`WorkerPool::rouse`]) keeps
/// looking for it (yielding the core to anything else that runs) before it sleeps again.
/// Waking a sleeping thread on an idle core took about a tenth of a millisecond here, more than
/// a batch of a few large files costs to hand out; woken while the walk runs, the threads take
/// the batch at once.
const LINGER: Duration = Duration::from_millis(1);

/// Most of the pool's threads one call uses at once: a bound on one call's open files and
/// memory, as before the pool.
pub(crate) const MAX_WORKERS: usize = 8;

/// Work of one call, shared by the pool's threads that work on it.
pub(crate) trait Task: Send + Sync + 'static {
    /// Takes and does units of the work until there are none left to take (`Ran::Done`), or
    /// until `others_wait`, asked after each unit done, says another call waits for a thread
    /// (`Ran::Yielded`: the pool will come back to this task). At least one unit is done
    /// before yielding, so calls that take turns all get on.
    fn run(&self, others_wait: &dyn Fn() -> bool) -> Ran;
}

/// How a [`Task::run`] ended.
pub(crate) enum Ran {
    Done,
    Yielded,
}

/// A fixed set of threads that run the per-file work of content searches, shared by every
/// search of the registries it is given to (see [`MountRegistryBuilder::workers`] and
/// [`MountRegistryBuilder::pool`]). Cheap to clone; its threads start with the first search,
/// and end once the last clone is dropped.
///
/// [`MountRegistryBuilder::workers`]: crate::MountRegistryBuilder::workers
/// [`MountRegistryBuilder::pool`]: crate::MountRegistryBuilder::pool
#[derive(Clone)]
pub struct WorkerPool {
    handle: Arc<Handle>,
}

/// What the clones of a pool share; dropping the last one stops the threads.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_all();
    }
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    threads: usize,
    started: Once,
    /// Threads that could be started.
    alive: AtomicUsize,
    /// Tickets waiting in the queue: read without the lock by the threads between two units
    /// (and updated, as `Group::queued`, under it).
    waiting: AtomicUsize,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Ticket>,
    shutdown: bool,
}

/// One thread's share of a call's task.
struct Ticket {
    task: Arc<dyn Task>,
    group: Arc<Group>,
}

/// The shares of one call still queued or running.
struct Group {
    pending: Mutex<usize>,
    done: Condvar,
    /// Of `Shared::waiting`, the tickets of this call: a thread does not pass its turn to
    /// another share of its own call.
    queued: AtomicUsize,
}

impl Group {
    fn finish(&self, count: usize) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        *pending -= count;
        if *pending == 0 {
            self.done.notify_all();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, state: &State) {
        self.waiting.store(state.queue.len(), Ordering::Relaxed);
    }

    /// Takes `group`'s tickets out of the queue; how many.
    fn withdraw(&self, group: &Arc<Group>) -> usize {
        let mut state = self.lock();
        let before = state.queue.len();
        state.queue.retain(|ticket| !Arc::ptr_eq(&ticket.group, group));
        let withdrawn = before - state.queue.len();
        group.queued.fetch_sub(withdrawn, Ordering::Relaxed);
        self.publish(&state);
        withdrawn
    }

    /// A pool thread: takes the ticket at the front, runs it, and puts it at the back if it
    /// yielded, until the pool is dropped.
    fn serve(&self) {
        loop {
            let ticket = {
                let mut state = self.lock();
                let mut woken = false;
                loop {
                    if state.shutdown {
                        return;
                    }
                    if let Some(ticket) = state.queue.pop_front() {
                        ticket.group.queued.fetch_sub(1, Ordering::Relaxed);
                        self.publish(&state);
                        break ticket;
                    }
                    // No work: just woken (by a search about to hand some out), look for it a
                    // moment longer before sleeping again (see `LINGER`).
                    if woken {
                        woken = false;
                        drop(state);
                        let until = Instant::now() + LINGER;
                        while self.waiting.load(Ordering::Relaxed) == 0 && Instant::now() < until {
                            std::thread::yield_now();
                        }
                        state = self.lock();
                        continue;
                    }
                    state = self.wake.wait(state).unwrap_or_else(PoisonError::into_inner);
                    woken = true;
                }
            };
            let others_wait = || self.waiting.load(Ordering::Relaxed) > ticket.group.queued.load(Ordering::Relaxed);
            // A task that panicked lost what it held; the thread stays for the next.
            match catch_unwind(AssertUnwindSafe(|| ticket.task.run(&others_wait))) {
                Ok(Ran::Yielded) => {
                    let mut state = self.lock();
                    ticket.group.queued.fetch_add(1, Ordering::Relaxed);
                    state.queue.push_back(ticket);
                    self.publish(&state);
                }
                Ok(Ran::Done) | Err(_) => {
                    // The task is let go before the call hears that this share is done.
                    let Ticket { task, group } = ticket;
                    drop(task);
                    group.finish(1);
                }
            }
        }
    }
}

impl WorkerPool {
    /// A pool of `threads` threads (at least one).
    #[must_use]
    pub fn new(threads: usize) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            threads: threads.max(1),
            started: Once::new(),
            alive: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
        });
        Self { handle: Arc::new(Handle { shared }) }
    }

    /// A pool of as many threads as the machine runs at once
    /// ([`std::thread::available_parallelism`]).
    #[must_use]
    pub fn with_available_parallelism() -> Self {
        Self::new(std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
    }

    /// The number of threads.
    #[must_use]
    pub fn threads(&self) -> usize {
        self.handle.shared.threads
    }

    /// Starts the threads, once.
    fn start(&self) {
        let shared = &self.handle.shared;
        shared.started.call_once(|| {
            for index in 0..shared.threads {
                let thread = Arc::clone(shared);
                // A pool that cannot start a thread has fewer; one that has none runs each
                // call's work on the call's own thread.
                let started =
                    std::thread::Builder::new().name(format!("vfs-worker-{index}")).spawn(move || thread.serve());
                if started.is_ok() {
                    shared.alive.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }

    /// Wakes the threads (starting them, the first time) to look for work for [`LINGER`]: a call
    /// about to hand out work (a search starting its walk) finds them awake.
    pub(crate) fn rouse(&self) {
        self.start();
        self.handle.shared.wake.notify_all();
    }

    /// Runs `task` on up to `workers` of the pool's threads (fewer when the pool is smaller,
    /// none more than [`MAX_WORKERS`]; they may be busy with other calls' tasks for a file
    /// first) and waits: once this returns, no thread of the pool holds the task.
    pub(crate) fn run(&self, task: &Arc<dyn Task>, workers: usize) {
        self.start();
        let shared = &self.handle.shared;
        let workers = workers.min(shared.alive.load(Ordering::Relaxed)).min(MAX_WORKERS);
        if workers == 0 {
            while let Ran::Yielded = task.run(&|| false) {}
            return;
        }
        let group =
            Arc::new(Group { pending: Mutex::new(workers), done: Condvar::new(), queued: AtomicUsize::new(workers) });
        let mut state = shared.lock();
        for _ in 0..workers {
            state.queue.push_back(Ticket { task: Arc::clone(task), group: Arc::clone(&group) });
        }
        shared.publish(&state);
        drop(state);
        shared.wake.notify_all();
        // The call's clock (`budget::current`): once it stops the call, the shares still
        // queued behind other calls' work are withdrawn (they would only see the clock and
        // end), and the call waits only for the shares a thread is running.
        let deadline = crate::budget::current().filter(|deadline| deadline.bounded());
        let mut pending = group.pending.lock().unwrap_or_else(PoisonError::into_inner);
        while *pending > 0 {
            let Some(deadline) = &deadline else {
                pending = group.done.wait(pending).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            pending = group.done.wait_timeout(pending, STOP_POLL).unwrap_or_else(PoisonError::into_inner).0;
            if *pending > 0 && deadline.check().is_err() {
                drop(pending);
                let withdrawn = shared.withdraw(&group);
                if withdrawn > 0 {
                    group.finish(withdrawn);
                }
                pending = group.pending.lock().unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

/// How often a call waiting for its shares looks at its clock.
const STOP_POLL: Duration = Duration::from_millis(20);

impl Default for WorkerPool {
    /// [`WorkerPool::with_available_parallelism`].
    fn default() -> Self {
        Self::with_available_parallelism()
    }
}

/// Two handles are equal when they are of the same pool (the same threads).
impl PartialEq for WorkerPool {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.handle, &other.handle)
    }
}

impl Eq for WorkerPool {}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("WorkerPool").field("threads", &self.threads()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn on_a_pool_thread() -> bool {
        std::thread::current().name().is_some_and(|name| name.starts_with("vfs-worker-"))
    }

    /// Does `units` units, each once, and counts those done off the pool.
    struct Count {
        units: usize,
        next: AtomicUsize,
        done: AtomicUsize,
        elsewhere: AtomicUsize,
    }

    impl Task for Count {
        fn run(&self, others_wait: &dyn Fn() -> bool) -> Ran {
            loop {
                if self.next.fetch_add(1, Ordering::Relaxed) >= self.units {
                    return Ran::Done;
                }
                std::thread::sleep(Duration::from_micros(50));
                self.done.fetch_add(1, Ordering::Relaxed);
                if !on_a_pool_thread() {
                    self.elsewhere.fetch_add(1, Ordering::Relaxed);
                }
                if others_wait() {
                    return Ran::Yielded;
                }
            }
        }
    }

    #[test]
    fn a_pool_equals_its_clones_only() {
        let pool = WorkerPool::new(2);
        assert_eq!(pool.clone(), pool);
        assert_ne!(WorkerPool::new(2), pool);
    }

    #[test]
    fn every_unit_is_done_once_on_the_pool_and_no_thread_holds_the_task_after_the_call() {
        let pool = WorkerPool::new(3);
        let count = Arc::new(Count {
            units: 200,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            elsewhere: AtomicUsize::new(0),
        });
        let task: Arc<dyn Task> = count.clone();
        pool.run(&task, 8);
        assert_eq!(count.done.load(Ordering::Relaxed), 200);
        assert_eq!(count.elsewhere.load(Ordering::Relaxed), 0);
        drop(task);
        assert_eq!(Arc::strong_count(&count), 1);
    }

    /// The pool's one thread is busy with one call's single long unit (a large file); a second
    /// call whose clock runs out meanwhile does not wait for the thread to come free: its
    /// queued share is withdrawn, it returns with its clock, and its task never ran.
    #[test]
    fn a_call_stopped_by_its_clock_does_not_wait_behind_another_calls_work() {
        struct Long(AtomicBool);
        impl Task for Long {
            fn run(&self, _: &dyn Fn() -> bool) -> Ran {
                std::thread::sleep(Duration::from_secs(2));
                self.0.store(true, Ordering::Relaxed);
                Ran::Done
            }
        }
        let pool = WorkerPool::new(1);
        let long = Arc::new(Long(AtomicBool::new(false)));
        let first = std::thread::spawn({
            let (pool, long) = (pool.clone(), long.clone());
            move || pool.run(&(long as Arc<dyn Task>), 1)
        });
        // The thread has taken the first call's share.
        while pool.handle.shared.waiting.load(Ordering::Relaxed) > 0 || !pool.handle.shared.started.is_completed() {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        let count = Arc::new(Count {
            units: 5,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            elsewhere: AtomicUsize::new(0),
        });
        let deadline =
            Arc::new(crate::Budget::unlimited().with_time(Duration::from_millis(200)).start(crate::Operation::Grep));
        let _entered = deadline.enter();
        let started = Instant::now();
        pool.run(&(count.clone() as Arc<dyn Task>), 1);
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(200) && took < Duration::from_secs(1), "returned after {took:?}");
        assert_eq!(count.done.load(Ordering::Relaxed), 0, "the stopped call's task ran");
        assert!(!long.0.load(Ordering::Relaxed), "the first call's unit was to be still running");
        first.join().unwrap();
        assert!(long.0.load(Ordering::Relaxed));
        assert_eq!(pool.handle.shared.waiting.load(Ordering::Relaxed), 0);
    }

    /// The pool's one thread, busy with one call's long task, turns to another call's task
    /// between two units: the second call finishes while the first still runs.
    #[test]
    fn a_thread_turns_to_a_waiting_call_between_units() {
        struct Endless {
            stop: AtomicBool,
            units: AtomicUsize,
        }
        impl Task for Endless {
            fn run(&self, others_wait: &dyn Fn() -> bool) -> Ran {
                while !self.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                    self.units.fetch_add(1, Ordering::Relaxed);
                    if others_wait() {
                        return Ran::Yielded;
                    }
                }
                Ran::Done
            }
        }
        let pool = WorkerPool::new(1);
        let endless = Arc::new(Endless { stop: AtomicBool::new(false), units: AtomicUsize::new(0) });
        let first = std::thread::spawn({
            let (pool, endless) = (pool.clone(), endless.clone());
            move || pool.run(&(endless as Arc<dyn Task>), 1)
        });
        while endless.units.load(Ordering::Relaxed) < 20 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let count = Arc::new(Count {
            units: 5,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            elsewhere: AtomicUsize::new(0),
        });
        pool.run(&(count.clone() as Arc<dyn Task>), 1);
        assert_eq!((count.done.load(Ordering::Relaxed), count.elsewhere.load(Ordering::Relaxed)), (5, 0));
        assert!(!first.is_finished(), "the first call was to be still running");
        endless.stop.store(true, Ordering::Relaxed);
        first.join().unwrap();
    }
}
