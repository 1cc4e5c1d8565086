//! The local store: a directory on this machine, confined by handles.
//!
//! The mount root is opened once by path, in [`LocalRoot::open`]; everything after that is
//! `*at` system calls relative to a directory handle, one component at a time with
//! `O_NOFOLLOW` ([`resolve`]). Symbolic links are read with `readlinkat` and resolved *by us*,
//! lexically, inside the mount's own namespace; a link whose target leaves the mount is refused.
//! Because each step opens a single name beneath a handle already held, a symlink swapped in
//! during the call can make the call fail, never escape. Resolution also knows each directory's
//! identity, which is how physical nesting (a mount lying inside another mount's directory) is
//! honoured however the directory was reached.
//!
//! Modules: `resolve` (paths to places), `files` (the primitives on handles: open, write,
//! rename, remove, lock), `walk` (trees, with handles), `version` (version tokens and their
//! cache). This module holds the root, the node type and the seam's methods.
#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the storage module is the one place allowed to touch the disk"
)]

mod files;
mod keep;
mod resolve;
mod staged;
mod version;
mod walk;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

pub(crate) use files::{DirectoryLock, open_node as open_local, remove_stages, rename};
pub(crate) use keep::KeepDirectory;
pub(crate) use resolve::{open_direct, resolve};
pub(crate) use staged::{Staged, Start};
pub(crate) use version::version_of_bytes;
use version::{VersionCache, version_of_file};

use super::{Capabilities, Entry, Kind, MountTable, NewMode, Opened, PutWhen, Reader, Stat, Visit, WalkFrom, Walked};
use crate::error::Error;
use crate::mount::ConfigError;
use crate::path::VirtualPath;
use crate::spec::MountSpec;
use crate::text::agent_text;

/// What a local directory can do.
pub(crate) const CAPABILITIES: Capabilities = Capabilities {
    links: true,
    hard_links: true,
    special_files: true,
    atomic_rename: true,
    directories: true,
    append: true,
    locks: true,
    identities: true,
    network: false,
};

/// Names of vfs's own temporary files (an atomic write in flight, or one a crash interrupted).
/// They are never listed, walked or resolved: an agent sees only whole files.
pub(crate) const TEMPORARY_PREFIX: &str = ".vfs-tmp-";

/// Most directory levels vfs creates or removes below a mount root.
pub(crate) const MAX_DEPTH: usize = 256;

/// A mount's root directory, opened once.
pub(crate) struct LocalRoot {
    dir: Arc<OwnedFd>,
    identity: (u64, u64),
    /// The canonical physical path (no links, no `.`/`..`), for relations between mounts.
    canonical: PathBuf,
    /// Every spelling of the root the scrub must know: as given (absolute), canonical.
    spellings: Vec<String>,
    /// Whether writes reach stable storage before they are reported.
    sync: bool,
    /// Whether a call may defer those syncs ([`defer_syncs`]): an agent-facing mount's may, an
    /// internal one's (the journal's images) never.
    deferrable: bool,
    /// Content-hash versions of unchanged files, so version guards need not read a file again.
    versions: VersionCache,
}

thread_local! {
    /// True while a call on this thread defers the syncs of agent-facing mounts.
    static DEFERRING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Defers the syncs of the writes to agent-facing local mounts made on this thread until the
/// guard is dropped (which puts back what was before): a call that writes many files (an undo)
/// makes them durable at its end with one `syncfs` of each file system instead of two `fsync`s
/// a file. The writes stay atomic (a temporary file renamed into place); only their
/// durability waits for that `syncfs`.
pub(crate) fn defer_syncs() -> DeferredSyncs {
    DeferredSyncs { before: DEFERRING.with(|deferring| deferring.replace(true)) }
}

/// See [`defer_syncs`].
#[must_use = "the syncs are deferred only while the guard lives"]
pub(crate) struct DeferredSyncs {
    before: bool,
}

impl Drop for DeferredSyncs {
    fn drop(&mut self) {
        DEFERRING.with(|deferring| deferring.set(self.before));
    }
}

/// A directory whose sync a call holds, with the path it was changed for (for the operator's
/// warning, should its sync fail).
pub(crate) type HeldDirectory = (Arc<OwnedFd>, VirtualPath);

thread_local! {
    /// The directories whose syncs the call on this thread holds ([`holding_directory_syncs`]),
    /// with the path each was synced for; `None` when it holds none.
    static HELD: std::cell::RefCell<Option<Vec<HeldDirectory>>> = const { std::cell::RefCell::new(None) };
}

/// How a write to a local store reaches stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// The write syncs nothing: the store does not sync writes, or the call defers them to
    /// one `syncfs` at its end ([`defer_syncs`]).
    Later,
    /// The file, then its directory, synced before the write is reported.
    Now,
    /// The file synced before the write is reported (so that the rename can never leave an
    /// empty file); the directory's sync held by the call ([`holding_directory_syncs`]),
    /// which makes it durable before the call is answered.
    FileNow,
}

/// Runs `work` holding the directory syncs of its writes to agent-facing local mounts (each
/// write still syncs its file before its rename), and returns them: a caller that next syncs
/// a file of its own on the same file system (the journal's log) makes them durable with that
/// one sync, on a file system that commits in order ([`commits_in_order`]), where the
/// directory's `fsync` and the file's would be two commits of its journal. Holds only on this
/// thread; the writes of other calls sync as before. If `work` panics, what it held is synced
/// at once.
pub(crate) fn holding_directory_syncs<T>(work: impl FnOnce() -> T) -> (T, Vec<HeldDirectory>) {
    /// Puts back what this thread held before; syncs what is still held (the work panicked).
    struct Restore(Option<Vec<HeldDirectory>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let held = HELD.with(|held| held.replace(self.0.take()));
            sync_held(held.unwrap_or_default());
        }
    }
    let restore = Restore(HELD.with(|held| held.replace(Some(Vec::new()))));
    let value = work();
    let held = HELD.with(|held| held.borrow_mut().as_mut().map(std::mem::take)).unwrap_or_default();
    drop(restore);
    (value, held)
}

/// Runs `work` with the directory syncs this thread holds suspended: its writes sync their
/// directories at once. A move across file systems copies in it, since the copy must be
/// durable before the move removes its source (else a crash between the source's removal
/// reaching the disk and the copy's could lose the file).
pub(crate) fn syncing_directories_now<T>(work: impl FnOnce() -> T) -> T {
    /// Puts back what was held, however `work` ends.
    struct Resume(Option<Vec<HeldDirectory>>);
    impl Drop for Resume {
        fn drop(&mut self) {
            HELD.with(|held| *held.borrow_mut() = self.0.take());
        }
    }
    let _resume = Resume(HELD.with(|held| held.borrow_mut().take()));
    work()
}

/// Holds the sync of `directory` (changed for `path`) for the call on this thread, or syncs it
/// now when the call holds none.
fn hold_directory_sync(directory: &Arc<OwnedFd>, path: &VirtualPath) {
    let held = HELD.with(|held| match held.borrow_mut().as_mut() {
        Some(held) => {
            held.push((directory.clone(), path.clone()));
            true
        }
        None => false,
    });
    if !held {
        files::sync_directory(directory, path);
    }
}

/// The directories of `held` that a sync of `synced` does not make durable: all of them
/// without one; else those not on its file system, or all when that file system does not
/// commit in order ([`keep::commits_in_order`]). Each directory once.
pub(crate) fn uncovered(held: Vec<HeldDirectory>, synced: Option<&OpenFile>) -> Vec<HeldDirectory> {
    let covering = synced.and_then(|file| {
        let device = rustix::fs::fstat(&file.0).ok()?.st_dev;
        keep::commits_in_order(&file.0).then_some(device)
    });
    let mut seen = std::collections::HashSet::new();
    held.into_iter()
        .filter(|(directory, _)| {
            let Ok(stat) = rustix::fs::fstat(&**directory) else { return true };
            seen.insert((stat.st_dev, stat.st_ino)) && covering != Some(stat.st_dev)
        })
        .collect()
}

/// Syncs each directory of `held`, one after the other.
pub(crate) fn sync_held(held: Vec<HeldDirectory>) {
    for (directory, path) in held {
        files::sync_directory(&directory, &path);
    }
}

/// Syncs `file` (a log the caller has just appended to, after the changes `held` names) and
/// makes the directories `held` durable with it: the sync stands for those it covers
/// ([`uncovered`]); the others are synced at the same time by the syncer threads
/// ([`syncers`]), so the caller waits for the longest of the syncs, not their sum. Every held directory is synced
/// whether the file's sync succeeds or not.
pub(crate) fn sync_with_held(file: &OpenFile, held: Vec<HeldDirectory>) -> io::Result<()> {
    let rest = uncovered(held, Some(file));
    if rest.is_empty() {
        return file.sync_data();
    }
    let Some(syncers) = syncers() else {
        sync_held(rest);
        return file.sync_data();
    };
    let (done, finished) = std::sync::mpsc::channel();
    let mut sent = 0;
    for directory in rest {
        match syncers.send((directory, done.clone())) {
            Ok(()) => sent += 1,
            Err(std::sync::mpsc::SendError((directory, _))) => sync_held(vec![directory]),
        }
    }
    drop(done);
    let synced = file.sync_data();
    // Every directory is synced before this returns (a syncer that died drops its sender).
    for _ in 0..sent {
        if finished.recv().is_err() {
            break;
        }
    }
    synced
}

/// One directory to sync, and where to say it is done.
type SyncJob = (HeldDirectory, std::sync::mpsc::Sender<()>);

/// The threads that sync held directories beside a log's sync ([`sync_with_held`]): four,
/// started at the first use and kept, so that a call waits for a wake-up rather than for a
/// thread to start. `None` when no thread could be started (each directory is then synced
/// in turn).
fn syncers() -> Option<&'static std::sync::mpsc::Sender<SyncJob>> {
    static SYNCERS: std::sync::OnceLock<Option<std::sync::mpsc::Sender<SyncJob>>> = std::sync::OnceLock::new();
    SYNCERS
        .get_or_init(|| {
            let (jobs, queue) = std::sync::mpsc::channel::<SyncJob>();
            let queue = Arc::new(std::sync::Mutex::new(queue));
            let mut started = 0;
            for _ in 0..4 {
                let queue = queue.clone();
                let spawned = std::thread::Builder::new().name("vfs-sync".to_owned()).spawn(move || {
                    loop {
                        let job = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
                        let Ok((directory, done)) = job else { return };
                        sync_held(vec![directory]);
                        let _ = done.send(());
                    }
                });
                started += usize::from(spawned.is_ok());
            }
            (started > 0).then_some(jobs)
        })
        .as_ref()
}

/// A place in a local tree: a name in a directory held open, or (without a name) the
/// directory itself, a mount root.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) parent: Arc<OwnedFd>,
    pub(crate) name: Option<String>,
    pub(crate) seen: Seen,
}

/// What resolution or a walk knew of a node.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seen {
    /// Nothing is there.
    Missing,
    /// Its `lstat`.
    Stat(Stat),
    /// A directory listing's type, without a `stat`.
    Listed(Kind),
}

/// An open regular file. The operations read through this type and never name
/// `std::fs::File`, so the static check can keep raw file types inside this module.
#[derive(Debug)]
pub(crate) struct OpenFile(File);

impl OpenFile {
    /// The (user, group) the open file belongs to.
    pub(crate) fn owner(&self) -> Option<(u32, u32)> {
        rustix::fs::fstat(&self.0).ok().map(|stat| (stat.st_uid, stat.st_gid))
    }
}

impl Read for OpenFile {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.0.read(buffer)
    }
}

impl io::Seek for OpenFile {
    fn seek(&mut self, position: io::SeekFrom) -> io::Result<u64> {
        self.0.seek(position)
    }
}

impl Write for OpenFile {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        self.0.write(buffer)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl OpenFile {
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    /// The file's length now.
    pub(crate) fn len(&self) -> io::Result<u64> {
        self.0.metadata().map(|metadata| metadata.len())
    }

    /// Makes sure that at least `ahead / 2` bytes past the file's end are allocated to it: when
    /// the end has come closer than that to `reserved_to` (where this file's last allocation
    /// ended; the caller keeps it, 0 at first), `ahead` bytes are allocated from the end
    /// (`fallocate` keeping the size: readers see no change), or, on a disk without that
    /// much room (`ENOSPC`), the `ahead / 2` promised, and `reserved_to` moves. Appends
    /// within them then need no room the disk may no longer have. Not judged from the blocks
    /// the file has: xfs counts blocks it allocated past the end on its own, and frees them
    /// when the disk fills. A file system that cannot allocate ahead (`EOPNOTSUPP`) reserves
    /// nothing, and that is not an error; a full disk or quota is, as is any other failure.
    pub(crate) fn reserve(&self, ahead: u64, reserved_to: &mut u64) -> io::Result<()> {
        let end = self.len()?;
        if *reserved_to >= end.saturating_add(ahead / 2) {
            return Ok(());
        }
        // `ahead`, so that the next changes need not ask; on a disk without that much, the
        // half that is promised.
        let mut asked = ahead;
        loop {
            match rustix::fs::fallocate(&self.0, rustix::fs::FallocateFlags::KEEP_SIZE, end, asked) {
                // Reserved, or a file system that cannot allocate ahead (not asked again until
                // the file has grown by half of `ahead`).
                Ok(()) | Err(Errno::OPNOTSUPP | Errno::NOSYS | Errno::NODEV | Errno::INVAL | Errno::SPIPE) => {
                    *reserved_to = end.saturating_add(asked);
                    return Ok(());
                }
                Err(Errno::INTR) => {}
                Err(Errno::NOSPC) if asked > ahead / 2 => asked = ahead / 2,
                Err(errno) => return Err(io::Error::from(errno)),
            }
        }
    }

    /// Takes this file's advisory lock (`flock`) for this open file: shared, waiting for an
    /// exclusive holder to let go; or exclusive, at once or not at all (`Ok(false)`: another
    /// open file holds it). Held until [`OpenFile::unlock`] or the file is closed.
    pub(crate) fn lock(&self, exclusive: bool) -> io::Result<bool> {
        if !exclusive {
            // A wait cut by a signal is waited again: a process left without the lock would
            // let another take itself for alone.
            loop {
                match self.0.lock_shared() {
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    other => return other.map(|()| true),
                }
            }
        }
        match self.0.try_lock() {
            Ok(()) => Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => Ok(false),
            Err(std::fs::TryLockError::Error(error)) => Err(error),
        }
    }

    /// Takes this file's advisory lock exclusively, waiting for every other holder to let go
    /// (a wait cut by a signal is waited again).
    pub(crate) fn lock_exclusive(&self) -> io::Result<()> {
        loop {
            match self.0.lock() {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }

    /// Lets go of this file's advisory lock.
    pub(crate) fn unlock(&self) -> io::Result<()> {
        self.0.unlock()
    }

    /// Reads at `offset` without moving the file's position (`pread`): several readers of one
    /// open file need no lock between them.
    pub(crate) fn read_at(&self, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.0, buffer, offset)
    }

    /// What tells this content from any other the path held or will hold: device, inode,
    /// modification and change times, size (a replacement is another inode; a change in place
    /// moves the change time).
    pub(crate) fn stamp(&self) -> io::Result<[u64; 7]> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = self.0.metadata()?;
        Ok([
            metadata.dev(),
            metadata.ino(),
            metadata.mtime().cast_unsigned(),
            metadata.mtime_nsec().cast_unsigned(),
            metadata.ctime().cast_unsigned(),
            metadata.ctime_nsec().cast_unsigned(),
            metadata.size(),
        ])
    }
}

/// A file opened for appending, with the name it was opened by: a log that a compaction may
/// replace (rename another file over the name) asks whether it is still the file named.
#[derive(Debug)]
pub(crate) struct NamedFile {
    pub(crate) file: OpenFile,
    parent: Arc<OwnedFd>,
    name: String,
}

impl NamedFile {
    /// True when the file is no longer the one its name gives: the name was removed, or
    /// another file was renamed over it. Told by device and inode, not by the link count: a
    /// log with a second name (a backup made with hard links) still counts its links after
    /// a compaction replaced the name.
    pub(crate) fn unnamed(&self) -> io::Result<bool> {
        let held = rustix::fs::fstat(&self.file.0).map_err(io_error)?;
        match rustix::fs::statat(&*self.parent, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(named) => Ok((named.st_dev, named.st_ino) != (held.st_dev, held.st_ino)),
            Err(Errno::NOENT) => Ok(true),
            Err(errno) => Err(io_error(errno)),
        }
    }
}

fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Directory,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Special,
    }
}

fn stat_of(raw: &rustix::fs::Stat) -> Stat {
    #[expect(clippy::cast_sign_loss, reason = "sizes and nanoseconds are never negative")]
    Stat {
        kind: kind_of(FileType::from_raw_mode(raw.st_mode)),
        size: raw.st_size as u64,
        modified: (raw.st_mtime, raw.st_mtime_nsec as u32),
        changed: (raw.st_ctime, raw.st_ctime_nsec as u32),
        #[expect(clippy::useless_conversion, reason = "the width differs by platform")]
        identity: Some((u64::from(raw.st_dev), u64::from(raw.st_ino))),
        #[expect(clippy::useless_conversion, reason = "the width differs by platform")]
        mode: u32::from(raw.st_mode),
    }
}

fn io_error(errno: Errno) -> io::Error {
    io::Error::from(errno)
}

fn fstat(fd: &OwnedFd, path: &VirtualPath) -> Result<Stat, Error> {
    rustix::fs::fstat(fd).map(|raw| stat_of(&raw)).map_err(|errno| Error::io(path, io_error(errno)))
}

/// The identity of a stat the local store made (it always has one).
/// The identity of the directory a place lies in, as its lock is taken on it.
pub(crate) fn directory_identity(node: &Node) -> Option<(u64, u64)> {
    rustix::fs::fstat(&*node.parent).ok().map(|raw| identity(&stat_of(&raw)))
}

fn identity(stat: &Stat) -> (u64, u64) {
    stat.identity.unwrap_or_default()
}

impl LocalRoot {
    /// Opens the mount root: the only open of a mount's host path, with the operator's
    /// authority.
    pub(crate) fn open(spec: &MountSpec, sync: bool, _authority: crate::AmbientAuthority) -> Result<Self, ConfigError> {
        let root = spec.root().as_str().to_owned();
        let physical = spec.physical().to_owned();
        let fail = |source| ConfigError::Open { root: root.clone(), physical: physical.clone(), source };
        let given = spec.location().and_then(crate::spec::Location::local).unwrap_or(Path::new(spec.physical()));
        let absolute =
            if given.is_absolute() { given.to_path_buf() } else { std::env::current_dir().map_err(fail)?.join(given) };
        match std::fs::metadata(&absolute) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => return Err(ConfigError::NotADirectory { root, physical }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(ConfigError::Missing { root, physical });
            }
            Err(source) => return Err(fail(source)),
        }
        let canonical = std::fs::canonicalize(&absolute).map_err(fail)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = rustix::fs::open(&canonical, flags, Mode::empty()).map_err(|errno| fail(io_error(errno)))?;
        let stat = rustix::fs::fstat(&dir).map_err(|errno| fail(io_error(errno)))?;
        let mut spellings = vec![
            lexical_normal(&absolute).to_string_lossy().into_owned(),
            canonical.to_string_lossy().into_owned(),
            absolute.to_string_lossy().into_owned(),
        ];
        spellings.sort();
        spellings.dedup();
        Ok(Self {
            dir: Arc::new(dir),
            identity: identity(&stat_of(&stat)),
            canonical,
            spellings,
            sync,
            deferrable: false,
            versions: VersionCache::default(),
        })
    }

    /// The canonical directory's components, after a marker no object store's base has.
    pub(crate) fn tree_base(&self) -> Vec<String> {
        std::iter::once("file:".to_owned())
            .chain(self.canonical.components().map(|component| component.as_os_str().to_string_lossy().into_owned()))
            .collect()
    }

    /// The canonical path components of `other` below this root: `Some(empty)` for the same
    /// directory, `None` when `other` does not lie inside this root.
    pub(crate) fn relative_of(&self, other: &LocalRoot) -> Option<Vec<String>> {
        self.relative_of_place(other, &[])
    }

    /// The path components below this root of the canonical host path `place`; `None` when it
    /// does not lie inside this root.
    pub(crate) fn relative_of_path(&self, place: &Path) -> Option<Vec<String>> {
        let rest = place.strip_prefix(&self.canonical).ok()?;
        Some(rest.components().map(|component| component.as_os_str().to_string_lossy().into_owned()).collect())
    }

    /// The canonical path components below this root of the place at `rel` (canonical) below
    /// `other`'s root; `None` when that place does not lie inside this root.
    pub(crate) fn relative_of_place(&self, other: &LocalRoot, rel: &[String]) -> Option<Vec<String>> {
        let place: PathBuf = rel.iter().fold(other.canonical.clone(), |place, name| place.join(name));
        let rest = place.strip_prefix(&self.canonical).ok()?;
        Some(rest.components().map(|component| component.as_os_str().to_string_lossy().into_owned()).collect())
    }

    /// The identities of the directories from this root (exclusive) down to `inner`'s root
    /// (inclusive) when `inner` lies physically inside this root; empty otherwise. Each
    /// directory is opened beneath the previous one with `O_NOFOLLOW`, as resolution would.
    pub(crate) fn chain_to(&self, inner: &LocalRoot) -> Vec<(u64, u64)> {
        let Some(rest) = self.relative_of(inner) else { return Vec::new() };
        let mut identities = Vec::with_capacity(rest.len());
        let mut current = self.dir.clone();
        for name in &rest {
            let Ok(directory) = files::open_directory_at(&current, name) else { return Vec::new() };
            let Ok(stat) = rustix::fs::fstat(&directory) else { return Vec::new() };
            identities.push(identity(&stat_of(&stat)));
            current = Arc::new(directory);
        }
        // The path led somewhere else than the inner root (changed since it was opened).
        if identities.last() != Some(&inner.identity) {
            return Vec::new();
        }
        identities
    }

    /// The root directory's `(device, inode)`.
    pub(crate) fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// Whether each write reaches stable storage before it is reported.
    pub(crate) fn syncs_each_write(&self) -> bool {
        self.sync
    }

    /// Lets a call defer this store's syncs ([`defer_syncs`]): an agent-facing mount's.
    pub(crate) fn allow_deferred_syncs(&mut self) {
        self.deferrable = true;
    }

    /// How this write is synced: not at all when the store does not sync writes or the call
    /// on this thread defers them; else the file at once and the directory with it, or the
    /// directory later when the call holds the directory syncs of a store that lets it.
    pub(crate) fn durability(&self) -> Durability {
        if !self.sync || (self.deferrable && DEFERRING.with(std::cell::Cell::get)) {
            Durability::Later
        } else if self.deferrable && HELD.with(|held| held.borrow().is_some()) {
            Durability::FileNow
        } else {
            Durability::Now
        }
    }

    /// Makes every write to this store's file system reach stable storage: one `syncfs` (for
    /// a store that does not sync each write).
    pub(crate) fn sync_file_system(&self) -> io::Result<()> {
        rustix::fs::syncfs(&*self.dir).map_err(io::Error::from)
    }

    pub(crate) fn spellings(&self) -> &[String] {
        &self.spellings
    }

    pub(crate) fn handle(&self) -> Arc<OwnedFd> {
        self.dir.clone()
    }

    /// The version of a file opened by another route (the single-mount fast path).
    pub(crate) fn version_of_open(
        &self,
        file: &mut OpenFile,
        stat: &Stat,
        path: &VirtualPath,
    ) -> Result<String, Error> {
        version_of_file(&self.versions, file, stat).map_err(|error| Error::io(path, error))
    }

    /// Copies an open file's content to `node` atomically (a move across file systems).
    #[expect(clippy::too_many_arguments, reason = "the place, the content, and the terms of the copy a move makes")]
    pub(crate) fn put_from(
        &self,
        node: &Node,
        source: &mut dyn Read,
        replace: bool,
        mode: NewMode,
        owner: Option<(u32, u32)>,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<u64, Error> {
        let mut staged = Staged::begin(node, Start::Empty, mode, cap, self.durability(), path)?;
        if let Some((user, group)) = owner {
            staged.owned_by(user, group);
        }
        staged.write_from(source, path)?;
        let written = staged.len();
        staged.commit(replace, path)?;
        Ok(written)
    }
}

impl LocalRoot {
    /// Commits a stage of `node` when `when` allows: a version guard is checked first (the
    /// caller holds the directory's lock), a create refuses a name that exists.
    fn commit_staged(&self, node: &Node, staged: Staged, when: &PutWhen, path: &VirtualPath) -> Result<File, Error> {
        let replace = match when {
            PutWhen::Absent => false,
            PutWhen::Any => true,
            PutWhen::Version(expected) => {
                super::Store::check_version(self, node, expected, path)?;
                true
            }
        };
        staged.commit(replace, path)
    }
}

impl super::Store for LocalRoot {
    type Node = Node;
    type Appender = NamedFile;
    type Direct = OpenFile;

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn open_direct(
        &self,
        table: &dyn MountTable,
        components: &[&str],
        path: &VirtualPath,
    ) -> Option<Result<(OpenFile, Stat), Error>> {
        open_direct(self, table, components, path)
    }

    fn info_direct(
        &self,
        table: &dyn MountTable,
        components: &[&str],
        path: &VirtualPath,
    ) -> Option<Result<(Stat, String), Error>> {
        open_direct(self, table, components, path).map(|opened| {
            let (mut file, stat) = opened?;
            self.version_of_open(&mut file, &stat, path).map(|version| (stat, version))
        })
    }

    // The seam's primitives (see `storage::Backend`).

    fn stat(&self, node: &Node, path: &VirtualPath) -> Result<Option<Stat>, Error> {
        match node.seen {
            Seen::Missing => Ok(None),
            Seen::Stat(stat) => Ok(Some(stat)),
            Seen::Listed(_) => self.restat(node, path),
        }
    }

    fn restat(&self, node: &Node, path: &VirtualPath) -> Result<Option<Stat>, Error> {
        match &node.name {
            Some(name) => Ok(files::stat_child(&node.parent, name)),
            None => fstat(&node.parent, path).map(Some),
        }
    }

    fn open_file(&self, node: &Node, _first: Option<u64>, path: &VirtualPath) -> Result<Opened<'_>, Error> {
        let (file, stat) = files::open_node(node, path)?;
        Ok(Opened { reader: Reader::Local(file), size: stat.size, token: None, first: None })
    }

    fn read_all(&self, node: &Node, cap: u64, path: &VirtualPath) -> Result<(Vec<u8>, Option<String>, Stat), Error> {
        let (file, stat) = files::open_node(node, path)?;
        if stat.size > cap {
            return Err(too_large(path, stat.size, cap));
        }
        let mut bytes = Vec::with_capacity(stat.size as usize);
        file.take(cap + 1).read_to_end(&mut bytes).map_err(|error| Error::io(path, error))?;
        if bytes.len() as u64 > cap {
            return Err(Error::too_large(Some(path), agent_text![format!("the file grew past the {cap}-byte cap")]));
        }
        let token = version_of_bytes(&bytes);
        Ok((bytes, token, stat))
    }

    fn version(&self, node: &Node, path: &VirtualPath) -> Result<Option<String>, Error> {
        let (mut file, stat) = files::open_node(node, path)?;
        version_of_file(&self.versions, &mut file, &stat).map(Some).map_err(|error| Error::io(path, error))
    }

    fn list(
        &self,
        table: &dyn MountTable,
        mount: usize,
        node: &Node,
        path: &VirtualPath,
        at_most: usize,
    ) -> Result<Vec<Entry>, Error> {
        let directory = files::open_node_directory(node, path)?;
        let entries = files::read_directory_at_most(&directory, path, at_most)?;
        Ok(entries
            .into_iter()
            .filter(|entry| !walk::hidden_entry(table, mount, &directory, entry))
            .map(|entry| Entry { name: entry.name, kind: entry.kind })
            .collect())
    }

    fn walk(
        &self,
        from: &WalkFrom<'_>,
        node: &Node,
        visit: &mut dyn FnMut(&Visit<'_>) -> super::Flow,
    ) -> Result<Walked, Error> {
        let directory = files::open_node_directory(node, from.path)?;
        walk::walk(from, &directory, visit)
    }

    /// Reads the file `name` in the directory `node`, when it is a regular file of at most
    /// `cap` bytes; `None` otherwise (absent, too large, unreadable).
    fn read_child(&self, node: &Node, name: &str, cap: u64, path: &VirtualPath) -> Option<Vec<u8>> {
        let directory = files::open_node_directory(node, path).ok()?;
        let stat = files::stat_child(&directory, name)?;
        if stat.kind != Kind::File || stat.size > cap {
            return None;
        }
        let (file, _) = files::open_entry_file(&directory, name, path).ok()?;
        let mut bytes = Vec::new();
        file.take(cap).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    fn check_version(&self, node: &Node, expected: &str, path: &VirtualPath) -> Result<(), Error> {
        let Some(name) = &node.name else { return Err(Error::not_a_file(path)) };
        let Some(stat) = files::stat_child(&node.parent, name) else {
            return Err(Error::version_mismatch(path, "none (the file does not exist)"));
        };
        let (mut file, stat) = files::open_file_in(&node.parent, name, stat, path)?;
        let current = version_of_file(&self.versions, &mut file, &stat).map_err(|error| Error::io(path, error))?;
        if current == expected { Ok(()) } else { Err(Error::version_mismatch(path, &current)) }
    }

    fn put(
        &self,
        node: &Node,
        bytes: &[u8],
        when: &PutWhen,
        mode: NewMode,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error> {
        // A whole-file write is a stage written at offset 0 and committed.
        let mut staged = Staged::begin(node, Start::Empty, mode, bytes.len() as u64, self.durability(), path)?;
        staged.write_at(0, bytes, path)?;
        self.commit_staged(node, staged, when, path)?;
        Ok(version_of_bytes(bytes))
    }

    fn stage(
        &self,
        node: &Node,
        start: Start,
        mode: NewMode,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<super::Staged, Error> {
        Staged::begin(node, start, mode, cap, self.durability(), path).map(super::Staged::Local)
    }

    fn commit(
        &self,
        node: &Node,
        staged: super::Staged,
        when: &PutWhen,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error> {
        #[cfg_attr(
            not(feature = "s3"),
            expect(clippy::infallible_destructuring_match, reason = "without object storage a stage is local")
        )]
        let staged = match staged {
            super::Staged::Local(staged) => staged,
            // A stage of another store: resolution never hands one here (a bug).
            #[cfg(feature = "s3")]
            super::Staged::Object(_) => return Err(Error::changed_during_call(path)),
        };
        let mut file = OpenFile(self.commit_staged(node, staged, when, path)?);
        let stat =
            rustix::fs::fstat(&file.0).map(|raw| stat_of(&raw)).map_err(|errno| Error::io(path, io_error(errno)))?;
        version_of_file(&self.versions, &mut file, &stat).map(Some).map_err(|error| Error::io(path, error))
    }

    fn make_directory(&self, node: &Node, path: &VirtualPath) -> Result<bool, Error> {
        let Some(name) = &node.name else { return Ok(false) };
        files::make_directory(&node.parent, name, path)
    }

    fn make_directory_exact(&self, node: &Node, mode: u32, path: &VirtualPath) -> Result<super::MadeDirectory, Error> {
        let Some(name) = &node.name else { return Ok(super::MadeDirectory::Existed) };
        files::make_directory_exact(&node.parent, name, mode, path)
    }

    fn finish_directory(
        &self,
        node: &Node,
        made: Option<&super::MadeAs>,
        to: u32,
        path: &VirtualPath,
    ) -> Result<bool, Error> {
        let (Some(name), Some(made)) = (&node.name, made) else { return Ok(false) };
        files::finish_directory(&node.parent, name, made, to, path)
    }

    fn remove(&self, node: &Node, kind: Kind, removal: &super::Removal<'_>, path: &VirtualPath) -> Result<(), Error> {
        let Some(name) = &node.name else {
            return Err(Error::invalid_argument(agent_text![
                "cannot delete ",
                crate::text::code(path),
                ": it is a mount root"
            ]));
        };
        match kind {
            Kind::Directory if removal.recursive => {
                // Read before delete: a file is removed only at the version the caller saw,
                // judged under its directory's lock (held by `remove_tree`).
                let check = |directory: &OwnedFd, name: &str, path: &VirtualPath| -> Result<(), Error> {
                    let Some(judge) = removal.judge else { return Ok(()) };
                    let Some(stat) = files::stat_child(directory, name) else { return Ok(()) };
                    if stat.kind != Kind::File {
                        return Ok(());
                    }
                    let (mut file, stat) = files::open_file_in(directory, name, stat, path)?;
                    let current =
                        version_of_file(&self.versions, &mut file, &stat).map_err(|error| Error::io(path, error))?;
                    judge(path, Some(&current))
                };
                files::remove_tree(&node.parent, name, path, removal, &check, 0)
            }
            Kind::Directory => files::remove_directory(&node.parent, name, path),
            Kind::File | Kind::Symlink | Kind::Special => files::remove_file(&node.parent, name, path),
        }
    }

    fn lock(&self, node: &Node, path: &VirtualPath) -> Result<super::Lock, Error> {
        files::lock_directory(&node.parent, path).map(super::Lock::Local)
    }

    fn open_append(&self, node: &Node, path: &VirtualPath) -> Result<NamedFile, Error> {
        let Some(name) = &node.name else { return Err(Error::not_a_file(path)) };
        let file = files::open_append(&node.parent, name, path)?;
        Ok(NamedFile { file, parent: Arc::clone(&node.parent), name: name.clone() })
    }

    /// `renameat2` between the two places' directories (`files::rename`); `None` where the
    /// kernel cannot (another file system).
    fn rename(
        &self,
        from: &Node,
        to: &Node,
        _target: &Self,
        replace: bool,
        path: &VirtualPath,
    ) -> Option<Result<(), Error>> {
        rename(from, to, replace, path)
    }
}

fn too_large(path: &VirtualPath, size: u64, cap: u64) -> Error {
    Error::too_large(Some(path), agent_text![format!("the file has {size} bytes, more than the {cap}-byte cap")])
}

/// `/a/./b/../c` → `/a/c` without touching the disk (for the spelling as given).
fn lexical_normal(path: &Path) -> PathBuf {
    let mut output = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                output.pop();
            }
            other => output.push(other.as_os_str()),
        }
    }
    output
}

/// How many directory handles one batch of work (a content search's batch of files) may hold
/// open: an eighth of the process's open-file limit, between 16 and 4,096, so that several
/// calls at once stay well inside it.
pub(crate) fn descriptor_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
        usize::try_from(limit / 8).unwrap_or(usize::MAX).clamp(16, 4096)
    })
}

/// Raises the process's soft open-file limit to its hard limit (at most 1,048,576), as servers
/// that walk large trees for several callers at once do. Returns the limit in force.
pub(crate) fn raise_open_file_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let current = getrlimit(Resource::Nofile);
    let wanted = current.maximum.unwrap_or(1 << 20).min(1 << 20);
    if current.current.is_some_and(|soft| soft < wanted)
        && setrlimit(Resource::Nofile, Rlimit { current: Some(wanted), maximum: current.maximum }).is_ok()
    {
        return wanted;
    }
    current.current.unwrap_or(u64::MAX)
}

/// The process's umask, read once: from `/proc/self/status` (Linux 4.7 and later), else by
/// the system call, which sets it, so it is set to the narrowest (`0o077`) for that instant:
/// a file another thread creates meanwhile gets fewer bits, never more.
pub(crate) fn process_umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        #[expect(clippy::disallowed_methods, reason = "the process's own status, not a mount's file")]
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let listed = status
            .lines()
            .find_map(|line| line.strip_prefix("Umask:"))
            .and_then(|value| u32::from_str_radix(value.trim(), 8).ok());
        listed.unwrap_or_else(|| {
            let found = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
            rustix::process::umask(found);
            found.bits()
        }) & 0o777
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log's sync stands for the held directory syncs on its own file system when that
    /// file system commits in order, and for none elsewhere: without a sync, or after the sync
    /// of a file on another file system, each held directory is synced, and each directory once.
    #[test]
    fn a_sync_stands_for_the_held_directory_syncs_of_its_own_ordered_file_system_only() {
        let open = |path: &Path| {
            Arc::new(
                rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
                    .expect("the directory"),
            )
        };
        let path = VirtualPath::new("/w/a.txt").expect("a path");
        // tmpfs keeps nothing across a power loss: it counts as ordered, wherever it is.
        let shm = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm (tmpfs)");
        let here = open(shm.path());
        let sub = shm.path().join("sub");
        std::fs::create_dir(&sub).expect("a subdirectory");
        let held = vec![(here.clone(), path.clone()), (open(&sub), path.clone()), (here.clone(), path.clone())];
        let log = OpenFile(File::create(shm.path().join("log")).expect("a log"));
        assert!(keep::commits_in_order(&log.0), "tmpfs is in order");
        assert_eq!(uncovered(held.clone(), Some(&log)).len(), 0, "the log's own file system");
        assert_eq!(uncovered(held.clone(), None).len(), 2, "no sync: each directory, once");
        // A directory on another file system than the log's (a tmpfs of its own, or the disk).
        let disk = tempfile::tempdir().expect("a temp dir");
        let elsewhere = vec![(open(disk.path()), path.clone())];
        let other = rustix::fs::fstat(&*elsewhere[0].0).expect("stat").st_dev;
        assert_ne!(other, rustix::fs::fstat(&log.0).expect("stat").st_dev, "the test needs two file systems");
        assert_eq!(uncovered(elsewhere.clone(), Some(&log)).len(), 1, "another file system");
        let proc = OpenFile(File::open("/proc/self/stat").expect("a file of procfs"));
        assert_eq!(uncovered(held.clone(), Some(&proc)).len(), 2, "a file system not in order");
        sync_with_held(&log, held).expect("the log and the directories synced");
        sync_with_held(&log, elsewhere).expect("the log, and the other directory beside it");
    }

    /// An ext4 counts as in order only with a journal the kernel runs: where the temp dir is
    /// on an ext4, the answer agrees with `/proc/fs/jbd2` (an ext4 made without a journal,
    /// like this machine's disk, is not in order).
    #[test]
    fn an_ext4_commits_in_order_only_with_a_journal() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = File::create(dir.path().join("f")).expect("a file");
        let statfs = rustix::fs::fstatfs(&file).expect("statfs");
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "magic numbers are 32-bit")]
        let magic = statfs.f_type as u32;
        let journals = std::fs::read_dir("/proc/fs/jbd2").map_or(0, Iterator::count);
        if magic == 0xEF53 && journals == 0 {
            assert!(!keep::commits_in_order(&file), "an ext4 without any journal running is not in order");
        }
        if magic == 0xEF53 && keep::commits_in_order(&file) {
            assert!(journals > 0, "in order only with a journal running");
        }
    }
}
