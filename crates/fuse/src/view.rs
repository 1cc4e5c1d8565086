//! The FUSE operations, each answered through the agent accessor.
//!
//! Nothing here decides what an agent may do: every answer is a call of the accessor the tools
//! use (routing, visibility, name rules, rights, tree guards, staged writes with their version
//! check), and what it refuses is turned into an `errno` (`errno.rs`). What is here is the
//! shape of a file system: inode numbers (`inodes.rs`), open handles, attributes.
//!
//! Writes: an open for writing records the version of the file it opened (a precondition);
//! its writes go to a staged copy (`vfs::StagedWrite`) that is committed whole at a `flush`
//! (not another process's while the opener holds the file open: a child that inherited the
//! descriptor), at `fsync` or at `release`, under that precondition. A reader, through the
//! view or the tools, sees the old content or the new, never part of a write; a file that
//! changed since the open (a tool, another process, the disk) is not overwritten: the close
//! fails with `ESTALE` (an open that only appended puts its bytes at the end of the file as it
//! is then: `Appends`). A new file is committed empty at `create`, so that it exists for the
//! calls that follow (a rename of an editor's temporary file), and its content at the close.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, KernelConfig,
    LockOwner, OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use vfs::{AgentAccessor, Attributes, EntryKind, Precondition, StageFrom, StagedWrite};

use crate::errno;
use crate::inodes::{Inodes, ROOT};

/// How long the kernel may keep an entry or attributes: changes made beside the view (by the
/// tools, on the disk) show within this.
const TTL: Duration = Duration::from_secs(1);

/// How a file opened for writing is opened: its writes go to the view as they are made, past
/// the kernel's pages of the file (`FOPEN_DIRECT_IO`), which every reader of the file shares.
/// Through the pages, a reader saw what was written before the close that commits it (red
/// team: half a file, and bytes whose commit then failed, which no file ever held); a write
/// past them also drops the pages it covers, so a reader that had them reads the file it
/// opened again. A shared mapping of such a file still goes through the pages (the kernel is
/// told it may: `FUSE_DIRECT_IO_ALLOW_MMAP`), committed at the close as any write.
const WRITING: FopenFlags = FopenFlags::FOPEN_DIRECT_IO;

/// What `statfs` answers: neutral figures, the same on every machine (the host's disk is
/// nobody's business inside the view).
const STATFS_BLOCKS: u64 = 1 << 28;
const BLOCK_SIZE: u32 = 4096;

/// Most files the view holds open for reads at once. A command that opens more (a build
/// opening thousands) gets the rest read by path, so the server never runs out of
/// descriptors for the tools' calls.
const MAX_OPEN_READS: usize = 1024;

/// Most files the view holds open for writing at once. Each written one holds its stage (a
/// temporary file, and its directory's handle): a command that kept tens of thousands open
/// took every descriptor of vfs's, and every tenant's tools failed until it ended. Past it an
/// open for writing is `EMFILE`, as a process's own limit answers.
const MAX_OPEN_WRITES: usize = 1024;

/// Most bytes the entries of open directories take at once. A directory's entries are kept
/// from its open to its close, so that offsets stay stable: up to about 30 MB for one of
/// 100,000 long names, and a command holding 8,000 such opens (the red team's) made the view
/// grow by 5 GB. Past it an open of a directory is `EMFILE`, as a process's own limit
/// answers; one directory can always be opened, since no listing is longer than this.
const MAX_DIRECTORY_BYTES: usize = 64 * 1024 * 1024;

/// `O_TRUNC` in the flags of an open, as Linux numbers it (`asm-generic/fcntl.h`).
const O_TRUNC: i32 = 0o1000;

/// `O_APPEND` in the flags of an open, as Linux numbers it (`asm-generic/fcntl.h`).
const O_APPEND: i32 = 0o2000;

/// How many times a commit of appends begins again on the file as it is then, when other
/// writers keep changing it in between (`View::commit`), before it fails as changed.
const APPEND_ATTEMPTS: usize = 16;

/// The agent's tree as a FUSE file system.
pub(crate) struct View {
    accessor: AgentAccessor,
    /// This view among the process's (for the change feed: `invalidate.rs`).
    id: u64,
    inodes: Arc<Mutex<Inodes>>,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_handle: AtomicU64,
    /// How many handles hold a file open for reading (at most [`MAX_OPEN_READS`]).
    open_reads: AtomicUsize,
    /// How many handles hold a file open for writing (at most [`MAX_OPEN_WRITES`]).
    open_writes: AtomicUsize,
    /// The bytes the entries of open directories take (at most [`MAX_DIRECTORY_BYTES`]).
    directory_bytes: AtomicUsize,
    /// For each inode, what its file was at its last read-only open: an open that finds the
    /// same lets the kernel keep the pages it cached (`FOPEN_KEEP_CACHE`); any other change
    /// (a replacement, a change in place, a write through the view) makes it drop them.
    cached: Mutex<HashMap<u64, vfs::FileStamp>>,
    owner: (u32, u32),
    refusals: Option<crate::RefusalSink>,
    /// Which call a process's change belongs to (the sandbox's `run_command` calls).
    attribution: Option<crate::Attribution>,
    /// A view of a mount no write reaches ([`View::without_open`]).
    without_open: bool,
}

thread_local! {
    /// The process whose kernel request this thread is answering, for [`View::changing`].
    static ACTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Notes the process a request comes from (one that may change something or be refused).
fn acting(req: &Request) {
    ACTING.set(req.pid());
}

/// An open file or directory.
enum Handle {
    /// Opened for reading only: reads go to the file opened (authorized once, at the open),
    /// as reads of an open file do, even if it is replaced meanwhile.
    Read(vfs::ReadHandle),
    /// Opened for reading while [`MAX_OPEN_READS`] files were held open: reads go through
    /// the gate to the file as it is at each read.
    ReadByPath,
    /// Opened for writing.
    Write(Box<Mutex<Writing>>),
    /// An open directory: its entries as they were at the open, so offsets stay stable.
    Directory(Vec<(u64, FileType, String)>),
}

/// What the entries of an open directory take in memory, counted against
/// [`MAX_DIRECTORY_BYTES`].
fn directory_bytes(entries: &[(u64, FileType, String)]) -> usize {
    entries.iter().map(|(_, _, name)| name.len() + std::mem::size_of::<(u64, FileType, String)>()).sum()
}

/// A file opened for writing.
struct Writing {
    ino: u64,
    /// The version the file must still have when the staged content is committed.
    base: Precondition,
    /// The next content, once something was written (or the open truncated).
    staged: Option<StagedWrite>,
    /// A write or a truncate of this open file that failed (past the write cap, say): what
    /// it staged is dropped, and every later write, flush and close fails the same way, so
    /// that the part written before is never committed as if it were the file.
    failed: Option<Errno>,
    /// Opened with `O_APPEND` (and without `O_TRUNC`), and nothing but appended since: see
    /// [`Appends`].
    appends: Option<Appends>,
    /// The process that opened it (`process_of`): while it holds the file open, a `close`
    /// by another process, one that inherited the descriptor, commits nothing
    /// (`View::flush`).
    opener: Option<u32>,
    /// The opener has closed it (a copy of the descriptor, at least): the next close, by
    /// whichever process, commits.
    opener_closed: bool,
}

/// An open file's appends. Each write goes at the end of what is staged, whatever offset
/// the kernel gives (it reckons the end from a size it may have cached for up to [`TTL`],
/// and another open's writes staged beside this one are in that size: written there, the
/// gap would be committed as zeros). And a commit that finds the file changed since the
/// content was staged from it puts the appended bytes at the end of the file as it is then,
/// as `O_APPEND` writes land, instead of failing: shells appending to one log at once each
/// keep their lines. A truncate through the open ends this (its content is then its own,
/// committed only over the version it opened, as any open's).
#[derive(Clone, Copy)]
struct Appends {
    /// Where this open's appends begin in what is staged: the length of the content it was
    /// staged from.
    from: u64,
}

impl Writing {
    fn new(ino: u64, base: Precondition, append: bool, opener: Option<u32>) -> Self {
        let appends = append.then_some(Appends { from: 0 });
        Writing { ino, base, staged: None, failed: None, appends, opener, opener_closed: false }
    }

    /// Whether the close of a descriptor by `closer` commits: the opener's does, and any
    /// once the opener has closed it or is gone; another process's (a child that inherited
    /// the descriptor) does not while the opener holds the file open and writes on. Where
    /// `/proc` cannot tell, every close commits.
    fn commits_at_close_by(&mut self, closer: Option<u32>) -> bool {
        let (Some(opener), Some(closer)) = (self.opener, closer) else { return true };
        if closer == opener {
            self.opener_closed = true;
        }
        self.opener_closed || closer == opener || process_of(opener) != Some(opener)
    }
}

/// The process (thread group) of the thread `thread` a kernel request came from (the
/// `Tgid` of `/proc/TID/status`); `None` where it cannot be read (the thread is gone, or
/// `/proc` hides it).
#[expect(clippy::disallowed_methods, reason = "tooling: the process table, not an agent's file")]
fn process_of(thread: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{thread}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Tgid:")).and_then(|tgid| tgid.trim().parse().ok())
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" { format!("/{name}") } else { format!("{parent}/{name}") }
}

impl View {
    pub(crate) fn new(
        accessor: AgentAccessor,
        id: u64,
        inodes: Arc<Mutex<Inodes>>,
        owner: (u32, u32),
        refusals: Option<crate::RefusalSink>,
    ) -> Self {
        View {
            accessor,
            id,
            inodes,
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            open_reads: AtomicUsize::new(0),
            open_writes: AtomicUsize::new(0),
            directory_bytes: AtomicUsize::new(0),
            cached: Mutex::new(HashMap::new()),
            owner,
            refusals,
            attribution: None,
            without_open: false,
        }
    }

    /// The view of a mount that no write reaches (mounted read-only): it answers `OPEN` and
    /// `FLUSH` with `ENOSYS`, so the kernel sends neither again, nor `RELEASE`, and reads go
    /// by path, through the gate each time (a handle kept from one read to the next would
    /// outlive the open it was for, and could read a file since renamed to a hidden name). A
    /// file replaced on the disk while it is read may so be read part old, part new. A small file is then read without a round trip to the view when the kernel
    /// holds its pages, which it keeps until the file's size or modification time changes
    /// (`FUSE_AUTO_INVAL_DATA`, seen at the next look after the one-second attribute time-out,
    /// or at once for a change made through vfs: `invalidate.rs`). A handle per open file is
    /// what staged writes need, and a mount that takes no write needs none.
    pub(crate) fn without_open(mut self) -> Self {
        self.without_open = true;
        self
    }

    /// The view with `attribution` telling which call each process's changes belong to.
    pub(crate) fn attributed(mut self, attribution: Option<crate::Attribution>) -> Self {
        self.attribution = attribution;
        self
    }

    /// The accessor for a change requested by the process [`acting`] noted: with the call
    /// the attribution gives it (its changes are then that call's, in the journal as in the
    /// audit), or the view's own accessor, each change a call of its own.
    fn changing(&self) -> std::borrow::Cow<'_, AgentAccessor> {
        let call = self.attribution.as_ref().and_then(|attribution| attribution.call_of(ACTING.get()));
        match call {
            Some(call) => std::borrow::Cow::Owned(self.accessor.with_budget(vfs::Budget::unlimited().with_call(call))),
            None => std::borrow::Cow::Borrowed(&self.accessor),
        }
    }

    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        crate::invalidate::serving(self.id);
        lock(&self.inodes).path(ino.0).ok_or(Errno::ENOENT)
    }

    /// The path of `name` in the directory `parent`; a name that is not UTF-8 names nothing
    /// a virtual path can.
    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        crate::invalidate::serving(self.id);
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        Ok(join(&self.path(parent)?, name))
    }

    fn handle(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        lock(&self.handles).get(&fh.0).cloned()
    }

    /// Takes one of the [`MAX_OPEN_WRITES`] places of a file held open for writing, given back
    /// at its `release` (or by [`View::give_write_back`] when the open fails after).
    fn take_write(&self) -> Result<(), Errno> {
        if self.open_writes.fetch_add(1, Ordering::Relaxed) >= MAX_OPEN_WRITES {
            self.give_write_back();
            return Err(Errno::EMFILE);
        }
        Ok(())
    }

    fn give_write_back(&self) {
        self.open_writes.fetch_sub(1, Ordering::Relaxed);
    }

    /// Takes room for `entries` among the [`MAX_DIRECTORY_BYTES`] of open directories, given
    /// back at its `releasedir`.
    fn take_directory(&self, entries: &[(u64, FileType, String)]) -> Result<(), Errno> {
        let bytes = directory_bytes(entries);
        let held = self.directory_bytes.fetch_add(bytes, Ordering::Relaxed);
        if held > 0 && held + bytes > MAX_DIRECTORY_BYTES {
            self.directory_bytes.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Errno::EMFILE);
        }
        Ok(())
    }

    fn open_handle(&self, handle: Handle) -> FileHandle {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Arc::new(handle));
        FileHandle(fh)
    }

    /// A read-only open: the file opened through the gate once (a directory is `EISDIR`),
    /// or, past [`MAX_OPEN_READS`] files held open, a handle that reads by path. The flags say
    /// whether the kernel may keep what it cached of the file: only when the file is exactly
    /// what the last read-only open found, had not changed for a second then (see
    /// [`vfs::FileStamp::settled`]), and no write of the view is open on it. A read
    /// handle has nothing to do at `close`, so the kernel is told not to send `flush`.
    fn open_for_reading(&self, ino: u64, path: &str) -> Result<(FileHandle, FopenFlags), Errno> {
        if self.open_reads.load(Ordering::Relaxed) >= MAX_OPEN_READS {
            let attributes = self.attributes(path)?;
            if attributes.kind == EntryKind::Directory {
                return Err(Errno::EISDIR);
            }
            self.forget_cached(ino);
            return Ok((self.open_handle(Handle::ReadByPath), FopenFlags::FOPEN_NOFLUSH));
        }
        let file = self.accessor.open_read(path).map_err(|error| self.refused("open", path, &error))?;
        let writer = self.has_writer(ino);
        let keep = match file.stamp() {
            Some(stamp) if stamp.settled() && !writer => lock(&self.cached).insert(ino, stamp) == Some(stamp),
            _ => {
                self.forget_cached(ino);
                false
            }
        };
        self.open_reads.fetch_add(1, Ordering::Relaxed);
        let flags = if writer {
            // Past the pages, whose size is the writer's (what it truncated, or wrote so far):
            // the file opened is read to its own end.
            FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_DIRECT_IO
        } else if keep {
            FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_KEEP_CACHE
        } else {
            FopenFlags::FOPEN_NOFLUSH
        };
        Ok((self.open_handle(Handle::Read(file)), flags))
    }

    /// The kernel's pages of `ino` may no longer be the file's: the next open drops them.
    fn forget_cached(&self, ino: u64) {
        lock(&self.cached).remove(&ino);
    }

    /// True while a handle of the view has `ino` open for writing.
    fn has_writer(&self, ino: u64) -> bool {
        let handles: Vec<Arc<Handle>> = lock(&self.handles).values().cloned().collect();
        handles.iter().any(|handle| matches!(&**handle, Handle::Write(writing) if lock(writing).ino == ino))
    }

    fn attributes(&self, path: &str) -> Result<Attributes, Errno> {
        self.accessor.attributes(path).map_err(|error| self.refused("getattr", path, &error))
    }

    fn file_attr(&self, ino: u64, attributes: &Attributes) -> FileAttr {
        let kind = if attributes.kind == EntryKind::Directory { FileType::Directory } else { FileType::RegularFile };
        let mask = if attributes.writable() { 0o777 } else { 0o555 };
        FileAttr {
            ino: INodeNo(ino),
            size: attributes.size,
            blocks: attributes.size.div_ceil(512),
            atime: attributes.modified,
            mtime: attributes.modified,
            ctime: attributes.changed,
            crtime: attributes.modified,
            kind,
            perm: (attributes.mode & mask) as u16,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.owner.0,
            gid: self.owner.1,
            rdev: 0,
            blksize: BLOCK_SIZE,
            flags: 0,
        }
    }

    /// The attributes of `ino`, with the size of what an open write of it has staged.
    fn current_attr(&self, ino: u64) -> Result<FileAttr, Errno> {
        let path = lock(&self.inodes).path(ino).ok_or(Errno::ENOENT)?;
        let mut attributes = self.attributes(&path)?;
        if let Some(size) = self.staged_size(ino) {
            attributes.size = size;
            attributes.modified = SystemTime::now();
        }
        Ok(self.file_attr(ino, &attributes))
    }

    /// The largest size staged for `ino` by the handles open for writing it (appends of two
    /// opens each stage the file and their own bytes: the kernel reckons the end from this).
    fn staged_size(&self, ino: u64) -> Option<u64> {
        let handles: Vec<Arc<Handle>> = lock(&self.handles).values().cloned().collect();
        handles
            .iter()
            .filter_map(|handle| match &**handle {
                Handle::Write(writing) => {
                    let writing = lock(writing);
                    (writing.ino == ino).then(|| writing.staged.as_ref().map(StagedWrite::len)).flatten()
                }
                _ => None,
            })
            .max()
    }

    /// Refuses a change at `path` with `EROFS` where the rights there are read-only (so that a
    /// shell says "Read-only file system", as for a read-only mount); `Ok` where they allow
    /// writing or the path does not exist yet.
    fn writable(&self, path: &str) -> Result<(), Errno> {
        match self.accessor.attributes(path) {
            Ok(attributes) if !attributes.writable() => Err(Errno::EROFS),
            _ => Ok(()),
        }
    }

    /// The entry made at `path` by a create or mkdir, counted as a kernel lookup.
    fn entry(&self, path: &str) -> Result<(u64, FileAttr), Errno> {
        let attributes = self.attributes(path)?;
        let ino = lock(&self.inodes).number(path, true);
        Ok((ino, self.file_attr(ino, &attributes)))
    }

    /// The precondition of an open for writing: the version the file has now.
    fn base(&self, path: &str) -> Result<Precondition, Errno> {
        let info = self.accessor.info(path).map_err(|error| self.refused("open", path, &error))?;
        Ok(info.version.map_or(Precondition::Any, Precondition::Version))
    }

    /// Commits what `writing` staged, if anything; the next write stages again from the
    /// content committed, with its version as the precondition.
    ///
    /// A commit that fails ends the open file's writing ([`Writing::failed`]): its stage is
    /// gone, and every later write and close fails the same way (a close after a failed
    /// `fsync` said nothing, and a program that did not look at the `fsync` lost its bytes).
    fn commit(&self, writing: &mut Writing) -> Result<(), Errno> {
        let committed = self.put(writing);
        if let Err(errno) = committed {
            writing.failed = Some(errno);
        }
        committed
    }

    /// [`View::commit`], before a failure is kept.
    fn put(&self, writing: &mut Writing) -> Result<(), Errno> {
        crate::invalidate::serving(self.id);
        if let Some(errno) = writing.failed {
            return Err(errno);
        }
        let Some(mut staged) = writing.staged.take() else { return Ok(()) };
        // The file's directory was renamed through the view since the stage began: the
        // content goes where the file is now, judged there (a stage commits only at the path
        // it was made for: `StagedWrite::commit`).
        let now = lock(&self.inodes).path(writing.ino);
        if let Some(now) = now
            && now != staged.path().as_str()
        {
            staged = self.restage(&staged, &now)?;
        }
        for attempt in 1..=APPEND_ATTEMPTS {
            let path = staged.path().as_str().to_owned();
            // Once restaged, the content is not what the kernel wrote: it is told to drop
            // what it holds of the file, as for a tool's change.
            let committed = if attempt == 1 {
                staged.commit_or_keep(&writing.base)
            } else {
                crate::invalidate::retold(|| staged.commit_or_keep(&writing.base))
            };
            match committed {
                Ok(outcome) => {
                    writing.base = outcome.version.map_or(Precondition::Any, Precondition::Version);
                    return Ok(());
                }
                // Changed since it was staged from: the appends go at the end of the file now.
                Err((error, Some(kept)))
                    if error.kind() == vfs::ErrorKind::VersionMismatch && attempt < APPEND_ATTEMPTS =>
                {
                    let Some(appends) = writing.appends else { return Err(self.refused("write", &path, &error)) };
                    writing.base = self.base(&path)?;
                    let mut now = self
                        .changing()
                        .stage_in_place(&path, StageFrom::Current)
                        .map_err(|error| self.refused("write", &path, &error))?;
                    let from = now.len();
                    self.copy_staged(&kept, appends.from, &mut now, from)?;
                    writing.appends = Some(Appends { from });
                    staged = now;
                }
                Err((error, _)) => return Err(self.refused("write", &path, &error)),
            }
        }
        Err(Errno::ESTALE)
    }

    /// Answers a `flush` or an `fsync` of the open file `fh`: what it staged is committed when
    /// `now` says so of it (a file opened for reading has nothing to commit).
    fn commit_open(&self, fh: FileHandle, now: impl FnOnce(&mut Writing) -> bool, reply: ReplyEmpty) {
        if self.without_open {
            return reply.error(Errno::ENOSYS);
        }
        let result = match self.handle(fh) {
            Some(handle) => match &*handle {
                Handle::Write(writing) => {
                    let mut writing = lock(writing);
                    if now(&mut writing) { self.commit(&mut writing) } else { Ok(()) }
                }
                _ => Ok(()),
            },
            None => Err(Errno::EBADF),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    /// A stage at `path` holding what `staged` holds.
    fn restage(&self, staged: &StagedWrite, path: &str) -> Result<StagedWrite, Errno> {
        let refused = |error: &vfs::Error| self.refused("write", path, error);
        let mut moved = self.changing().stage_in_place(path, StageFrom::Empty).map_err(|error| refused(&error))?;
        self.copy_staged(staged, 0, &mut moved, 0)?;
        Ok(moved)
    }

    /// Copies what `from` stages past `start` into `to` at `at`, a mebibyte at a time.
    fn copy_staged(&self, from: &StagedWrite, start: u64, to: &mut StagedWrite, at: u64) -> Result<(), Errno> {
        let path = to.path().as_str().to_owned();
        let refused = |error: &vfs::Error| self.refused("write", &path, error);
        let mut offset = start;
        while offset < from.len() {
            let want = usize::try_from((from.len() - offset).min(1 << 20)).unwrap_or(1 << 20);
            let chunk = from.read_at(offset, want).map_err(|error| refused(&error))?;
            if chunk.is_empty() {
                return Err(Errno::EIO);
            }
            to.write_at(at + (offset - start), &chunk).map_err(|error| refused(&error))?;
            offset += chunk.len() as u64;
        }
        Ok(())
    }

    /// `done` of a write or a truncate of `writing`; a failure ends the open file's writing
    /// ([`Writing::failed`]).
    fn failing(writing: &mut Writing, done: Result<(), Errno>) -> Result<(), Errno> {
        if let Err(errno) = done {
            writing.staged = None;
            writing.failed = Some(errno);
        }
        done
    }

    fn stage(&self, writing: &mut Writing, from: StageFrom) -> Result<(), Errno> {
        if let Some(errno) = writing.failed {
            return Err(errno);
        }
        if writing.staged.is_none() {
            let path = lock(&self.inodes).path(writing.ino).ok_or(Errno::ENOENT)?;
            let staged =
                self.changing().stage_in_place(&path, from).map_err(|error| self.refused("write", &path, &error))?;
            if let Some(appends) = &mut writing.appends {
                appends.from = staged.len();
            }
            writing.staged = Some(staged);
        }
        Ok(())
    }

    fn writing(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        match self.handle(fh) {
            Some(handle) if matches!(&*handle, Handle::Write(_)) => Ok(handle),
            _ => Err(Errno::EBADF),
        }
    }

    fn truncate(&self, ino: u64, size: u64, fh: Option<FileHandle>) -> Result<(), Errno> {
        self.forget_cached(ino);
        if let Some(handle) = fh.and_then(|fh| self.handle(fh))
            && let Handle::Write(writing) = &*handle
        {
            let mut writing = lock(writing);
            self.stage(&mut writing, StageFrom::Current)?;
            writing.appends = None;
            let staged = writing.staged.as_mut().ok_or(Errno::EIO)?;
            let path = staged.path().as_str().to_owned();
            let cut = staged.set_len(size).map_err(|error| self.refused("truncate", &path, &error));
            return Self::failing(&mut writing, cut);
        }
        let path = lock(&self.inodes).path(ino).ok_or(Errno::ENOENT)?;
        let base = self.base(&path)?;
        let mut staged = self
            .changing()
            .stage_in_place(&path, if size == 0 { StageFrom::Empty } else { StageFrom::Current })
            .map_err(|error| self.refused("truncate", &path, &error))?;
        staged.set_len(size).map_err(|error| self.refused("truncate", &path, &error))?;
        staged.commit(&base).map_err(|error| self.refused("truncate", &path, &error))?;
        Ok(())
    }
}

impl View {
    /// Logs a refusal the operator may want to see (not the missing names `ls` and shells
    /// probe for all the time: those only at debug level), tells the refusal sink of it, and
    /// turns it into an `errno`. The message names virtual paths only.
    fn refused(&self, operation: &'static str, path: &str, error: &vfs::Error) -> Errno {
        let errno = errno::of(error);
        if errno == Errno::ENOENT {
            tracing::debug!(target: "vfs::fuse", operation, path, reason = %error, "refused");
            return errno;
        }
        tracing::info!(target: "vfs::fuse", operation, path, reason = %error, "refused");
        if let Some(sink) = &self.refusals {
            let reason = error.to_string();
            let call = self.attribution.as_ref().and_then(|attribution| attribution.call_of(ACTING.get()));
            let refusal = crate::Refusal { operation, path, errno: errno.code(), reason: &reason, call: call.as_ref() };
            sink.tell(&refusal);
        }
        errno
    }
}

impl Filesystem for View {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // An open with `O_TRUNC` comes as one open (staged empty, committed at the close), not
        // as a truncation to nothing followed by an open: a reader never sees the file empty.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_ATOMIC_O_TRUNC);
        // A file open for writing is open past the pages (`WRITING`), and may still be mapped.
        if config.add_capabilities(fuser::InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP).is_err() {
            tracing::warn!(
                target: "vfs::fuse",
                "this kernel cannot map a file open past its pages (Linux 6.6 and later can): a shared mapping of a file open for writing through the view fails with ENODEV"
            );
        }
        if self.without_open {
            // No `OPEN` decides whether pages are kept: the kernel keeps them, and drops them
            // when it sees the file's modification time change.
            config
                .add_capabilities(fuser::InitFlags::FUSE_AUTO_INVAL_DATA | fuser::InitFlags::FUSE_NO_OPEN_SUPPORT)
                .map_err(|_| {
                    std::io::Error::other("the kernel cannot serve files without OPEN or drop changed pages")
                })?;
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        acting(req);
        let result = self.child(parent, name).and_then(|path| {
            let attributes = self.attributes(&path)?;
            let ino = lock(&self.inodes).number(&path, true);
            Ok(self.file_attr(ino, &attributes))
        });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        lock(&self.inodes).forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        acting(req);
        match self.current_attr(ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        acting(req);
        // Modes, owners and times are vfs's (an agent's file is never made a program by its
        // mode): a change of them is accepted and changes nothing, as tools that copy a
        // file's mode onto its replacement (`sed -i`) expect. The size is content.
        let result = (|| {
            let path = self.path(ino)?;
            self.writable(&path)?;
            if let Some(size) = size {
                self.truncate(ino.0, size, fh)?;
            }
            self.current_attr(ino.0)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(errno) => reply.error(errno),
        }
    }

    fn readlink(&self, _req: &Request, _ino: INodeNo, reply: ReplyData) {
        // The view presents an in-mount link as what it names: it has no links to read.
        reply.error(Errno::EINVAL);
    }

    fn mknod(
        &self,
        req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        acting(req);
        reply.error(Errno::EPERM);
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, _mode: u32, _umask: u32, reply: ReplyEntry) {
        acting(req);
        let result = self.child(parent, name).and_then(|path| {
            if self.accessor.attributes(&path).is_ok() {
                return Err(Errno::EEXIST);
            }
            self.writable(&self.path(parent)?)?;
            self.changing().make_directory(&path).map_err(|error| self.refused("mkdir", &path, &error))?;
            self.entry(&path)
        });
        match result {
            Ok((_, attr)) => reply.entry(&TTL, &attr, Generation(0)),
            Err(errno) => reply.error(errno),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        acting(req);
        let result = self.child(parent, name).and_then(|path| {
            // A link is removed, never what it names: judged by the core at the link itself, as
            // `delete_file` judges it (the rights a lookup of it gives are its target's, and a
            // read-only file it names is no reason to refuse).
            if self.accessor.kind_at(&path).map_or(true, |kind| kind != EntryKind::Link) {
                self.writable(&path)?;
            }
            self.changing()
                .delete(&path, false, &Precondition::Any)
                .map_err(|error| self.refused("unlink", &path, &error))?;
            lock(&self.inodes).detach(&path);
            Ok(())
        });
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        acting(req);
        let result = self.child(parent, name).and_then(|path| {
            let attributes = self.attributes(&path)?;
            if attributes.kind != EntryKind::Directory {
                return Err(Errno::ENOTDIR);
            }
            if !attributes.writable() {
                return Err(Errno::EROFS);
            }
            self.changing()
                .delete(&path, false, &Precondition::Any)
                .map_err(|error| self.refused("rmdir", &path, &error))?;
            lock(&self.inodes).detach(&path);
            Ok(())
        });
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn symlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, _target: &Path, reply: ReplyEntry) {
        reply.error(Errno::EPERM);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        acting(req);
        let result = (|| {
            if flags.contains(RenameFlags::RENAME_EXCHANGE) || flags.contains(RenameFlags::RENAME_WHITEOUT) {
                return Err(Errno::EINVAL);
            }
            let from = self.child(parent, name)?;
            let to = self.child(newparent, newname)?;
            self.writable(&from)?;
            self.writable(&to)?;
            self.writable(&self.path(newparent)?)?;
            let at_destination =
                if flags.contains(RenameFlags::RENAME_NOREPLACE) { Precondition::Absent } else { Precondition::Any };
            self.changing()
                .move_path(&from, &to, &Precondition::Any, &at_destination)
                .map_err(|error| self.refused("rename", &from, &error))?;
            lock(&self.inodes).renamed(&from, &to);
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn link(&self, _req: &Request, _ino: INodeNo, _newparent: INodeNo, _newname: &OsStr, reply: ReplyEntry) {
        reply.error(Errno::EPERM);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        acting(req);
        if self.without_open {
            return reply.error(Errno::ENOSYS);
        }
        let result = (|| {
            let path = self.path(ino)?;
            let truncating = flags.0 & O_TRUNC != 0;
            if flags.acc_mode() == OpenAccMode::O_RDONLY && !truncating {
                return self.open_for_reading(ino.0, &path);
            }
            let attributes = self.attributes(&path)?;
            if attributes.kind == EntryKind::Directory {
                return Err(Errno::EISDIR);
            }
            if !attributes.writable() {
                return Err(Errno::EROFS);
            }
            if flags.acc_mode() == OpenAccMode::O_RDONLY {
                // Linux truncates a file opened for reading with `O_TRUNC` where the opener
                // may write (`open(2)`: unspecified by POSIX); a read-only place refuses it
                // above, as for any open that would write.
                self.truncate(ino.0, 0, None)?;
                return self.open_for_reading(ino.0, &path);
            }
            self.take_write()?;
            let writing = (|| -> Result<Writing, Errno> {
                let append = flags.0 & O_APPEND != 0 && !truncating;
                let mut writing = Writing::new(ino.0, self.base(&path)?, append, process_of(req.pid()));
                if truncating {
                    self.stage(&mut writing, StageFrom::Empty)?;
                }
                Ok(writing)
            })()
            .inspect_err(|_| self.give_write_back())?;
            self.forget_cached(ino.0);
            Ok((self.open_handle(Handle::Write(Box::new(Mutex::new(writing)))), WRITING))
        })();
        match result {
            Ok((fh, flags)) => reply.opened(fh, flags),
            Err(errno) => reply.error(errno),
        }
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        acting(req);
        let result = (|| {
            if let Some(handle) = self.handle(fh)
                && let Handle::Write(writing) = &*handle
            {
                let writing = lock(writing);
                if let Some(staged) = &writing.staged {
                    let path = staged.path().as_str().to_owned();
                    return staged.read_at(offset, size as usize).map_err(|error| self.refused("read", &path, &error));
                }
            }
            if let Some(handle) = self.handle(fh)
                && let Handle::Read(file) = &*handle
            {
                return file
                    .read_at(offset, size as usize)
                    .map_err(|error| self.refused("read", file.path().as_str(), &error));
            }
            let path = self.path(ino)?;
            self.accessor.read_at(&path, offset, size as usize).map_err(|error| self.refused("read", &path, &error))
        })();
        match result {
            Ok(bytes) => reply.data(&bytes),
            Err(errno) => reply.error(errno),
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        acting(req);
        let result = self.writing(fh).and_then(|handle| {
            let Handle::Write(writing) = &*handle else { return Err(Errno::EBADF) };
            let mut writing = lock(writing);
            self.stage(&mut writing, StageFrom::Current)?;
            let appending = writing.appends.is_some();
            let staged = writing.staged.as_mut().ok_or(Errno::EIO)?;
            let path = staged.path().as_str().to_owned();
            // An append goes at the end of what is staged, not where the kernel reckons it.
            let offset = if appending { staged.len() } else { offset };
            let written = staged.write_at(offset, data).map_err(|error| self.refused("write", &path, &error));
            Self::failing(&mut writing, written)?;
            Ok(data.len() as u32)
        });
        match result {
            Ok(written) => reply.written(written),
            Err(errno) => reply.error(errno),
        }
    }

    fn flush(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        acting(req);
        // A copy of the descriptor closed by another process (a child that inherited it,
        // closing it at its `exec` or its exit) publishes nothing while the opener writes on.
        self.commit_open(fh, |writing| writing.commits_at_close_by(process_of(req.pid())), reply);
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        acting(req);
        let handle = lock(&self.handles).remove(&fh.0);
        let result = match handle.as_deref() {
            Some(Handle::Write(writing)) => {
                self.give_write_back();
                let mut writing = lock(writing);
                // Whether or not the commit holds, the kernel's pages hold what was written.
                self.forget_cached(writing.ino);
                self.commit(&mut writing)
            }
            Some(Handle::Read(_)) => {
                self.open_reads.fetch_sub(1, Ordering::Relaxed);
                Ok(())
            }
            _ => Ok(()),
        };
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn fsync(&self, req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        acting(req);
        self.commit_open(fh, |_| true, reply);
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        acting(req);
        let result = (|| {
            let path = self.path(ino)?;
            let listing = self.accessor.entries(&path).map_err(|error| self.refused("readdir", &path, &error))?;
            let parent = match path.rsplit_once('/') {
                Some(("", _)) | None => "/".to_owned(),
                Some((parent, _)) => parent.to_owned(),
            };
            let mut inodes = lock(&self.inodes);
            let mut entries = vec![
                (ino.0, FileType::Directory, ".".to_owned()),
                (
                    if ino.0 == ROOT { ROOT } else { inodes.number(&parent, false) },
                    FileType::Directory,
                    "..".to_owned(),
                ),
            ];
            for entry in listing.entries {
                // A name no virtual path can spell (a control character, made beside vfs)
                // could not be looked up: left out, as the tools cannot name it either.
                let child = join(&path, &entry.name);
                if vfs::VirtualPath::new(&child).is_err() {
                    continue;
                }
                let kind = match entry.kind {
                    EntryKind::Directory => FileType::Directory,
                    // A link shows as what it names (a file, for `readdir`; `lookup` tells),
                    // and a special file not at all.
                    EntryKind::File | EntryKind::Link => FileType::RegularFile,
                    EntryKind::Other => continue,
                };
                entries.push((inodes.number(&child, false), kind, entry.name));
            }
            drop(inodes);
            self.take_directory(&entries)?;
            Ok(self.open_handle(Handle::Directory(entries)))
        })();
        match result {
            Ok(fh) => reply.opened(fh, FopenFlags::empty()),
            Err(errno) => reply.error(errno),
        }
    }

    fn readdir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(handle) = self.handle(fh) else { return reply.error(Errno::EBADF) };
        let Handle::Directory(entries) = &*handle else { return reply.error(Errno::EBADF) };
        for (index, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), index as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        let released = lock(&self.handles).remove(&fh.0);
        if let Some(Handle::Directory(entries)) = released.as_deref() {
            self.directory_bytes.fetch_sub(directory_bytes(entries), Ordering::Relaxed);
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(
            STATFS_BLOCKS,
            STATFS_BLOCKS / 2,
            STATFS_BLOCKS / 2,
            1 << 20,
            1 << 19,
            BLOCK_SIZE,
            255,
            BLOCK_SIZE,
        );
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn getxattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        acting(req);
        let result = self.path(ino).and_then(|path| {
            let attributes = self.attributes(&path)?;
            if mask.contains(AccessFlags::W_OK) && !attributes.writable() {
                return Err(Errno::EROFS);
            }
            Ok(())
        });
        match result {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        acting(req);
        if let Err(errno) = self.take_write() {
            return reply.error(errno);
        }
        let result = self.child(parent, name).and_then(|path| {
            // The directory must still be there: a directory removed beside the view is not
            // brought back by a create (nor by the stage, which makes no parents).
            let directory = self.attributes(&self.path(parent)?)?;
            if directory.kind != EntryKind::Directory {
                return Err(Errno::ENOTDIR);
            }
            if !directory.writable() {
                return Err(Errno::EROFS);
            }
            let staged = self
                .changing()
                .stage_in_place(&path, StageFrom::Empty)
                .map_err(|error| self.refused("create", &path, &error))?;
            let outcome =
                staged.commit(&Precondition::Absent).map_err(|error| self.refused("create", &path, &error))?;
            let (ino, attr) = self.entry(&path)?;
            self.forget_cached(ino);
            let base = outcome.version.map_or(Precondition::Any, Precondition::Version);
            let append = flags & O_APPEND != 0;
            let writing = Writing::new(ino, base, append, process_of(req.pid()));
            let fh = self.open_handle(Handle::Write(Box::new(Mutex::new(writing))));
            Ok((attr, fh))
        });
        match result {
            Ok((attr, fh)) => reply.created(&TTL, &attr, Generation(0), fh, WRITING),
            Err(errno) => {
                self.give_write_back();
                reply.error(errno);
            }
        }
    }
}
