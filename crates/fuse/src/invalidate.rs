//! The kernel's caches, told of the changes the tools make.
//!
//! The kernel keeps a view's entries and attributes for a second (`view.rs`): a change made
//! on the disk shows within that. A change made through vfs (a tool's write, move or delete)
//! is on the registry's change feed; the view subscribes to it and has the kernel drop the
//! entry and the attributes of each path it names at once, so a command sees a tool's change
//! at its next look, not a second later.
//!
//! The feed tells an observer under the change's lock, and asking the kernel to drop an entry
//! takes the lock of its directory, which a request of the view may hold while it waits for
//! the same change: the observer only queues the paths, and a thread of the view's own tells
//! the kernel. When the call that made the changes returns (its locks released), the observer
//! waits for that thread to have told the kernel (a second at most), so that a tool's answer
//! reaches the agent after its change shows in the view. The view's own changes are none of
//! this: the kernel made them itself, and a request of the view waiting on the kernel would
//! wait on itself. The view's threads are told apart by a mark each request sets
//! ([`serving`]). Where the view commits what the kernel did not write (appends put at the end
//! of the file as it is then), it queues the paths all the same, without waiting ([`retold`]).

use std::cell::Cell;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::Duration;

use fuser::{INodeNo, Notifier};
use vfs::{CallId, Change, ChangeObserver, MountRegistry, Subscription};

use crate::inodes::Inodes;
use crate::view::lock;

/// The longest a call's end waits for the kernel to have been told of its changes.
const PATIENCE: Duration = Duration::from_secs(1);

thread_local! {
    /// The view whose request this thread is answering (0: none).
    static SERVING: Cell<u64> = const { Cell::new(0) };
    /// Set while this thread of the view commits content the kernel did not write itself.
    static RETOLD: Cell<bool> = const { Cell::new(false) };
}

/// Runs `commit`, a change of the view's own that the kernel did not make as it is (appends
/// put at the end of the file as it is now, not where the kernel wrote them: `View::commit`),
/// with its paths queued for the kernel to drop as a tool's are; the request does not wait
/// for it (the kernel may hold the file's lock while it waits for this request).
pub(crate) fn retold<T>(commit: impl FnOnce() -> T) -> T {
    RETOLD.with(|retold| retold.set(true));
    let done = commit();
    RETOLD.with(|retold| retold.set(false));
    done
}

/// Marks this thread as one of the view `view`'s (each request of the view calls it).
pub(crate) fn serving(view: u64) {
    SERVING.with(|serving| serving.set(view));
}

fn serves(view: u64) -> bool {
    SERVING.with(Cell::get) == view
}

/// Queues the paths of each change for the invalidating thread.
struct Feed {
    view: u64,
    paths: Mutex<mpsc::Sender<[Option<String>; 2]>>,
    progress: Arc<Progress>,
}

/// How many changes were queued, and how many the thread has told the kernel of.
#[derive(Default)]
struct Progress {
    queued: AtomicU64,
    told: Mutex<u64>,
    moved: Condvar,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Feed")
    }
}

impl ChangeObserver for Feed {
    fn changed(&self, change: &Change<'_>) {
        if serves(self.view) && !RETOLD.with(Cell::get) {
            return;
        }
        let paths = [Some(change.path.as_str().to_owned()), change.to.map(|to| to.as_str().to_owned())];
        self.progress.queued.fetch_add(1, Ordering::SeqCst);
        if lock(&self.paths).send(paths).is_err() {
            // The thread is gone: count the change as told, so that no call waits for it.
            *lock(&self.progress.told) += 1;
        }
    }

    fn call_ended(&self, _call: &CallId) {
        if serves(self.view) {
            return;
        }
        let queued = self.progress.queued.load(Ordering::SeqCst);
        let told = lock(&self.progress.told);
        let _ = self
            .progress
            .moved
            .wait_timeout_while(told, PATIENCE, |told| *told < queued)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// Subscribes to `registry`'s change feed and starts the thread that tells the kernel; both
/// end when the returned subscription is dropped.
pub(crate) fn start(
    registry: &MountRegistry,
    view: u64,
    inodes: Arc<Mutex<Inodes>>,
    notifier: Notifier,
) -> Subscription {
    let (sender, receiver) = mpsc::channel::<[Option<String>; 2]>();
    let progress = Arc::new(Progress::default());
    let subscription =
        registry.subscribe(Arc::new(Feed { view, paths: Mutex::new(sender), progress: progress.clone() }));
    let spawned = std::thread::Builder::new().name("vfs-fuse-inval".to_owned()).spawn(move || {
        for paths in receiver {
            for path in paths.iter().flatten() {
                invalidate(&inodes, &notifier, path);
            }
            *lock(&progress.told) += 1;
            progress.moved.notify_all();
        }
    });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the view's invalidation thread: tools' changes show within a second");
    }
    subscription
}

/// Has the kernel drop its entry for `path` and the attributes and pages of what it held,
/// where the view ever gave it a number (what the kernel never saw, it has not cached).
fn invalidate(inodes: &Mutex<Inodes>, notifier: &Notifier, path: &str) {
    let Some((parent, name)) = path.rsplit_once('/') else { return };
    if name.is_empty() {
        return;
    }
    let parent = if parent.is_empty() { "/" } else { parent };
    let (directory, entry) = {
        let inodes = lock(inodes);
        (inodes.find(parent), inodes.find(path))
    };
    // The kernel answers `ENOENT` for what it no longer holds: nothing to do then.
    if let Some(directory) = directory {
        let _ = notifier.inval_entry(INodeNo(directory), OsStr::new(name));
    }
    if let Some(entry) = entry {
        let _ = notifier.inval_inode(INodeNo(entry), 0, 0);
    }
}
