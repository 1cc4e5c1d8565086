//! The floor under the FUSE view's cost (`docs/performance.md`, "The FUSE view"): a file system
//! that only answers from memory, with the view's library, threads and mount options, and no
//! gate, no disk, no rule. `N` small files `f1.txt`..`fN.txt` (each `file I\n`) in its root.
//! Reading them costs what any FUSE file system that answers `OPEN` must pay on this machine:
//! the kernel's round trips. With `--no-open` it answers `OPEN` with `ENOSYS`, and the kernel
//! sends no `OPEN` or `RELEASE` for its files again (`FUSE_NO_OPEN_SUPPORT`): what the one way
//! around that round trip would give, at the price of having no handle per open file, which
//! the view's staged writes need. Such a file system hears of a close only through `FLUSH`,
//! sent at every close of every file once it answers one: `--flush` answers them (the close a
//! staged write would be committed at), where by default it answers `ENOSYS` and the kernel
//! stops sending them.
//!
//! `cargo run --release -p vfs-fuse --example floor -- MOUNTPOINT [--no-open] [--flush] [--files N]`
//! serves in the foreground until the mount is unmounted (`fusermount3 -u MOUNTPOINT`).
//! `bench/fuse-view` runs it beside the view.
#![expect(clippy::print_stderr, reason = "tooling: a benchmark's helper says why it cannot mount")]

use std::ffi::OsStr;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner, OpenFlags, ReplyAttr, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, Request,
};

/// The entries' and attributes' time-out: the view's.
const TTL: Duration = Duration::from_secs(1);
/// The root directory's inode; file `I` (from 1) is inode `I + 1`.
const ROOT: u64 = 1;

struct Floor {
    files: u64,
    no_open: bool,
    flush: bool,
    started: SystemTime,
}

impl Floor {
    /// File `index`'s content.
    fn content(index: u64) -> String {
        format!("file {index}\n")
    }

    /// The file a name in the root names, by its index.
    fn index_of(&self, name: &OsStr) -> Option<u64> {
        let index: u64 = name.to_str()?.strip_prefix('f')?.strip_suffix(".txt")?.parse().ok()?;
        (1..=self.files).contains(&index).then_some(index)
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, size, perm) = match ino {
            ROOT => (FileType::Directory, 0, 0o555),
            file if (2..=self.files + 1).contains(&file) => {
                (FileType::RegularFile, Self::content(file - 1).len() as u64, 0o444)
            }
            _ => return None,
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: rustix::process::getuid().as_raw(),
            gid: rustix::process::getgid().as_raw(),
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }
}

impl Filesystem for Floor {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent.0 == ROOT).then(|| self.index_of(name)).flatten().and_then(|index| self.attr(index + 1)) {
            Some(attr) => reply.entry(&TTL, &attr, fuser::Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.no_open {
            return reply.error(Errno::ENOSYS);
        }
        // As the view answers a read-only open of a file that has not changed.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_NOFLUSH | FopenFlags::FOPEN_KEEP_CACHE);
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        if self.flush { reply.ok() } else { reply.error(Errno::ENOSYS) }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if !(2..=self.files + 1).contains(&ino.0) {
            return reply.error(Errno::ENOENT);
        }
        let content = Self::content(ino.0 - 1);
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(content.len());
        let end = start.saturating_add(size as usize).min(content.len());
        reply.data(&content.as_bytes()[start..end]);
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        for index in offset + 1..=self.files {
            if reply.add(INodeNo(index + 1), index, FileType::RegularFile, format!("f{index}.txt")) {
                break;
            }
        }
        reply.ok();
    }
}

fn main() -> ExitCode {
    let mut arguments = std::env::args().skip(1);
    let (mut mountpoint, mut no_open, mut flush, mut files) = (None, false, false, 5_000);
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--no-open" => no_open = true,
            "--flush" => flush = true,
            "--files" => {
                let Some(count) = arguments.next().and_then(|count| count.parse().ok()) else {
                    eprintln!("floor: --files takes a number of files");
                    return ExitCode::from(2);
                };
                files = count;
            }
            _ if mountpoint.is_none() => mountpoint = Some(argument),
            _ => {
                eprintln!("floor: usage: floor MOUNTPOINT [--no-open] [--flush] [--files N]");
                return ExitCode::from(2);
            }
        }
    }
    let Some(mountpoint) = mountpoint else {
        eprintln!("floor: usage: floor MOUNTPOINT [--no-open] [--flush] [--files N]");
        return ExitCode::from(2);
    };
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("floor".to_owned()),
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        fuser::MountOption::NoAtime,
    ];
    // As many threads as the view answers with by default.
    config.n_threads = Some(vfs_fuse::FuseOptions::default().threads);
    let floor = Floor { files, no_open, flush, started: SystemTime::now() };
    match fuser::mount(floor, &mountpoint, &config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("floor: cannot serve at {mountpoint}: {error}");
            ExitCode::FAILURE
        }
    }
}
