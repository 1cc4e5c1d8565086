//! The local store's primitives on handles: opening files and directories beneath a handle,
//! reading directories, atomic writes, renames, removals, directory locks and appends. Every
//! call names one entry beneath a directory handle already held, with `O_NOFOLLOW`.
#![expect(clippy::disallowed_types, reason = "the storage module is the one place allowed to touch the disk")]

use std::collections::HashMap;
use std::ffi::CStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{MAX_DEPTH, Node, OpenFile, Seen, TEMPORARY_PREFIX, fstat, identity, io_error, kind_of, stat_of};
use crate::error::Error;
use crate::path::VirtualPath;
use crate::storage::{Kind, Stat};
use crate::text::{agent_text, code};

/// Opens a child directory with `O_NOFOLLOW` (the raw call, for callers with their own errors).
pub(super) fn open_directory_at(directory: &OwnedFd, name: &str) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        directory,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Opens a node as a regular file for reading, without ever blocking (FIFOs, sockets and
/// devices are refused before any open; `O_NONBLOCK` covers a swap during the call).
pub(crate) fn open_node(node: &Node, path: &VirtualPath) -> Result<(OpenFile, Stat), Error> {
    let Some(name) = &node.name else { return Err(Error::not_a_file(path)) };
    match node.seen {
        Seen::Missing => Err(Error::not_found(path)),
        Seen::Stat(stat) => open_file_in(&node.parent, name, stat, path),
        Seen::Listed(Kind::Directory) => Err(Error::not_a_file(path)),
        Seen::Listed(_) => open_entry_file(&node.parent, name, path),
    }
}

/// Opens a node as a directory (a mount root when it has no name), checking that it is the
/// directory resolution saw.
pub(super) fn open_node_directory(node: &Node, path: &VirtualPath) -> Result<Arc<OwnedFd>, Error> {
    let Some(name) = &node.name else { return Ok(node.parent.clone()) };
    let seen = match node.seen {
        Seen::Missing => return Err(Error::not_found(path)),
        Seen::Stat(stat) => Some(stat),
        Seen::Listed(Kind::Directory) => None,
        Seen::Listed(Kind::Special) => return Err(Error::unsupported(path)),
        Seen::Listed(_) => return Err(Error::not_a_directory(path)),
    };
    if let Some(seen) = seen
        && seen.kind != Kind::Directory
    {
        return Err(if seen.kind == Kind::Special { Error::unsupported(path) } else { Error::not_a_directory(path) });
    }
    let (fd, stat) = open_subdirectory(&node.parent, name, path)?;
    if seen.is_some_and(|seen| seen.identity != stat.identity) {
        return Err(Error::changed_during_call(path));
    }
    Ok(Arc::new(fd))
}

/// Opens `name` in `directory` as a regular file; `seen` is its `lstat` from resolution.
pub(super) fn open_file_in(
    directory: &OwnedFd,
    name: &str,
    seen: Stat,
    path: &VirtualPath,
) -> Result<(OpenFile, Stat), Error> {
    match seen.kind {
        Kind::Directory => return Err(Error::not_a_file(path)),
        Kind::Special => return Err(Error::unsupported(path)),
        Kind::Symlink | Kind::File => {}
    }
    // A regular file replaced by another regular file since the `lstat` (an atomic write by
    // someone else) is simply the newer version: confinement came from the parent handle and
    // `O_NOFOLLOW`, and `open_entry_file` refuses anything but a regular file.
    open_entry_file(directory, name, path)
}

/// Opens a directory entry that a walk saw as a regular file, without a separate `lstat`:
/// `O_NOFOLLOW | O_NONBLOCK` keeps a link or FIFO swapped in since from being followed or
/// blocking, and the `fstat` after the open refuses anything that is not a regular file.
pub(crate) fn open_entry_file(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(OpenFile, Stat), Error> {
    let fd = rustix::fs::openat(
        directory,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        Errno::LOOP | Errno::NOENT => Error::changed_during_call(path),
        errno => Error::io(path, io_error(errno)),
    })?;
    let stat = fstat(&fd, path)?;
    match stat.kind {
        Kind::File => Ok((OpenFile(File::from(fd)), stat)),
        Kind::Directory => Err(Error::not_a_file(path)),
        Kind::Symlink | Kind::Special => Err(Error::unsupported(path)),
    }
}

/// Opens a child directory without following links.
pub(super) fn open_subdirectory(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(OwnedFd, Stat), Error> {
    let fd = open_directory_at(directory, name).map_err(|errno| match errno {
        Errno::LOOP | Errno::NOTDIR | Errno::NOENT => Error::changed_during_call(path),
        errno => Error::io(path, io_error(errno)),
    })?;
    let stat = fstat(&fd, path)?;
    Ok((fd, stat))
}

/// One directory entry, with its inode (a cheap first check for a nested mount's root).
#[derive(Debug, Clone)]
pub(super) struct DirEntry {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) inode: u64,
}

/// Reads a directory's entries (not sorted). Names that are not UTF-8 cannot be addressed by
/// a virtual path and are left out.
pub(super) fn read_directory(directory: &OwnedFd, path: &VirtualPath) -> Result<Vec<DirEntry>, Error> {
    read_directory_at_most(directory, path, usize::MAX)
}

/// [`read_directory`], stopping once it has `at_most` entries (the first the directory gives).
pub(super) fn read_directory_at_most(
    directory: &OwnedFd,
    path: &VirtualPath,
    at_most: usize,
) -> Result<Vec<DirEntry>, Error> {
    let mut reader = rustix::fs::Dir::read_from(directory).map_err(|errno| Error::io(path, io_error(errno)))?;
    let mut entries = Vec::new();
    while entries.len() < at_most
        && let Some(entry) = reader.read()
    {
        let entry = entry.map_err(|errno| Error::io(path, io_error(errno)))?;
        let raw: &CStr = entry.file_name();
        let bytes = raw.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(bytes) else {
            continue;
        };
        if name.starts_with(TEMPORARY_PREFIX) {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(directory, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(raw) => stat_of(&raw).kind,
                Err(_) => continue,
            },
            other => kind_of(other),
        };
        entries.push(DirEntry { name: name.to_owned(), kind, inode: entry.ino() });
    }
    Ok(entries)
}

/// `lstat` of a child.
pub(super) fn stat_child(directory: &OwnedFd, name: &str) -> Option<Stat> {
    rustix::fs::statat(directory, name, AtFlags::SYMLINK_NOFOLLOW).ok().map(|raw| stat_of(&raw))
}

/// An exclusive advisory lock on a directory, held while a read-modify-write of one of its
/// entries runs, so that concurrent writers (threads or processes) never lose an update.
pub(crate) struct DirectoryLock {
    _fd: OwnedFd,
}

pub(super) fn lock_directory(directory: &OwnedFd, path: &VirtualPath) -> Result<DirectoryLock, Error> {
    // A fresh open file description: `flock` does not exclude holders of the same one.
    let fd = rustix::fs::openat(directory, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|errno| Error::io(path, io_error(errno)))?;
    rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|errno| Error::io(path, io_error(errno)))?;
    Ok(DirectoryLock { _fd: fd })
}

pub(super) fn temporary_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    format!("{TEMPORARY_PREFIX}{:016x}", hasher.finish())
}

/// `fsync`s a directory after one of its entries changed, so that the change survives a crash.
/// By then the change is made and visible, so a failure cannot undo it, and an error would tell
/// the caller that a write or a move failed when it did not (and a retry of a create would then
/// be refused as existing). It is the operator who can act on a disk that cannot sync, so the
/// failure goes to the operator's log, with the virtual path as the crate's logs carry it.
pub(super) fn sync_directory(directory: &OwnedFd, path: &VirtualPath) {
    if let Err(errno) = rustix::fs::fsync(directory) {
        tracing::warn!(
            target: "vfs::storage",
            %path,
            error = %io_error(errno),
            "cannot sync a directory after changing it: the change is made, but may not survive a crash"
        );
    }
}

/// `renameat2(RENAME_NOREPLACE)`, falling back to `linkat` + `unlinkat` where the file system
/// does not support it (both refuse an existing destination atomically).
pub(super) fn rename_no_replace(from_dir: &OwnedFd, from: &str, to_dir: &OwnedFd, to: &str) -> rustix::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        match rustix::fs::renameat_with(from_dir, from, to_dir, to, rustix::fs::RenameFlags::NOREPLACE) {
            Err(Errno::INVAL | Errno::NOSYS) => {}
            other => return other,
        }
    }
    match rustix::fs::statat(from_dir, from, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(raw) if FileType::from_raw_mode(raw.st_mode) == FileType::Directory => {
            // Directories cannot be hard-linked: check, then rename (best effort).
            if rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Err(Errno::EXIST);
            }
            rustix::fs::renameat(from_dir, from, to_dir, to)
        }
        _ => {
            rustix::fs::linkat(from_dir, from, to_dir, to, AtFlags::empty())?;
            rustix::fs::unlinkat(from_dir, from, AtFlags::empty())
        }
    }
}

/// Renames `from` to `to` (nodes of local mounts), replacing an existing file at `to` only with
/// `replace`. `None` when the two lie on different file systems and `from` is a file: then
/// the operation copies and deletes. A directory cannot cross file systems: refused.
pub(crate) fn rename(from: &Node, to: &Node, replace: bool, path: &VirtualPath) -> Option<Result<(), Error>> {
    let (Some(from_name), Some(to_name)) = (&from.name, &to.name) else {
        return Some(Err(Error::invalid_argument(agent_text!["cannot move ", code(path), ": it is a mount root"])));
    };
    let result = if replace {
        rustix::fs::renameat(&*from.parent, from_name.as_str(), &*to.parent, to_name.as_str())
    } else {
        rename_no_replace(&from.parent, from_name, &to.parent, to_name)
    };
    let error = match result {
        Ok(()) => {
            sync_directory(&from.parent, path);
            sync_directory(&to.parent, path);
            return Some(Ok(()));
        }
        Err(error) => error,
    };
    Some(Err(match error {
        Errno::XDEV => {
            let is_directory = matches!(from.seen, super::Seen::Stat(stat) if stat.kind == Kind::Directory);
            if !is_directory {
                return None;
            }
            // `path` is the destination (the name a refusal of the rename is about).
            Error::invalid_argument(agent_text![
                "cannot move a directory to ",
                code(path),
                " on another file system; move its files one by one"
            ])
        }
        Errno::EXIST | Errno::NOTEMPTY => Error::already_exists(path),
        Errno::ISDIR | Errno::NOTDIR => Error::invalid_argument(agent_text![
            "cannot move to ",
            code(path),
            ": a file and a directory cannot replace each other"
        ]),
        Errno::INVAL => Error::invalid_argument(agent_text!["cannot move a directory into itself (", code(path), ")"]),
        errno => Error::io(path, io_error(errno)),
    }))
}

/// Gives what was just made in `directory` (a file or a directory, by a handle on it) the
/// owner and group of `directory` where they differ, when vfs runs as root (a container's):
/// so a project's new files and directories are its owner's, not root's. Any other user keeps
/// what its create gave (it may not give a file away, and a group of its own is its choice).
pub(super) fn give_owner(directory: &impl std::os::fd::AsFd, made: &impl std::os::fd::AsFd) {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let (Ok(parent), Ok(new)) = (rustix::fs::fstat(directory), rustix::fs::fstat(made)) else { return };
    let owner = (parent.st_uid != new.st_uid).then(|| rustix::fs::Uid::from_raw(parent.st_uid));
    let group = (parent.st_gid != new.st_gid).then(|| rustix::fs::Gid::from_raw(parent.st_gid));
    if owner.is_some() || group.is_some() {
        let _ = rustix::fs::fchown(made, owner, group);
    }
}

/// Gives the directory `name` just made in `directory` the owner of `directory`
/// ([`give_owner`]), by a handle opened on it without following a link.
pub(super) fn give_directory_owner(directory: &OwnedFd, name: &str) {
    if let Ok(made) = open_directory_at(directory, name) {
        give_made_directory_owner(directory, &made);
    }
}

/// [`give_owner`] for a directory just made, while it is root's and holds no directory: if
/// another process put a directory of its own at the name since the create, that one is left
/// as it is.
fn give_made_directory_owner(directory: &OwnedFd, made: &OwnedFd) {
    if rustix::fs::fstat(made).is_ok_and(|stat| stat.st_uid == 0 && stat.st_nlink == 2) {
        give_owner(directory, made);
    }
}

/// Creates one directory.
pub(super) fn make_directory(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<bool, Error> {
    match rustix::fs::mkdirat(directory, name, Mode::from_raw_mode(0o777)) {
        Ok(()) => {
            give_directory_owner(directory, name);
            Ok(true)
        }
        Err(Errno::EXIST) => Ok(false),
        Err(errno) => Err(Error::io(path, io_error(errno))),
    }
}

/// Creates the directory `name` with exactly the bits `mode`: made private (`0o700`), then
/// given `mode` through a handle opened on it at once. The caller holds the lock of
/// `directory`, which every move into it and every delete in it takes too, so the handle is
/// to the directory just made. A file system that refuses modes (vfat, some network ones)
/// keeps what the create gave. An undo's restore: the directory stays the process's, as its
/// files do (the image does not say whose it was).
pub(super) fn make_directory_exact(
    directory: &OwnedFd,
    name: &str,
    mode: u32,
    path: &VirtualPath,
) -> Result<crate::storage::MadeDirectory, Error> {
    match rustix::fs::mkdirat(directory, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => {}
        Err(Errno::EXIST) => return Ok(crate::storage::MadeDirectory::Existed),
        // The directory held open was removed since it was found (a delete beside this call).
        Err(Errno::NOENT) => return Err(Error::changed_during_call(path)),
        Err(errno) => return Err(Error::io(path, io_error(errno))),
    }
    let (child, _) = open_subdirectory(directory, name, path)?;
    let _ = rustix::fs::fchmod(&child, Mode::from_raw_mode(mode));
    // What it has now: the kernel drops a set-group-ID bit for a process outside the group.
    let stat = fstat(&child, path)?;
    let made = crate::storage::MadeAs { identity: identity(&stat), born: born(&child), mode: stat.mode & 0o7777 };
    Ok(crate::storage::MadeDirectory::Made(Some(made)))
}

/// When a directory was made, where its file system keeps that (`statx`'s birth time): with
/// its device and inode, what tells it from a directory made later that took the inode number
/// it left.
fn born(directory: &OwnedFd) -> Option<(i64, u32)> {
    let birth = rustix::fs::StatxFlags::BTIME;
    let found = rustix::fs::statx(directory, c"", AtFlags::EMPTY_PATH, birth).ok()?;
    (found.stx_mask & birth.bits() != 0).then_some((found.stx_btime.tv_sec, found.stx_btime.tv_nsec))
}

/// Gives the directory `name` the bits `to` when it is still the one `made` (its device,
/// inode and birth time) and its mode is still the one it was made with (permission, sticky,
/// set-user-ID and set-group-ID bits); `false` otherwise (another directory moved there, a
/// mode set since, none there, a file system that refuses modes). Through a handle opened
/// without following a link.
pub(super) fn finish_directory(
    directory: &OwnedFd,
    name: &str,
    made: &crate::storage::MadeAs,
    to: u32,
    path: &VirtualPath,
) -> Result<bool, Error> {
    let (child, stat) = match open_subdirectory(directory, name, path) {
        Ok(opened) => opened,
        Err(error) if error.kind() == crate::ErrorKind::Changed => return Ok(false),
        Err(error) => return Err(error),
    };
    if identity(&stat) != made.identity || stat.mode & 0o7777 != made.mode || born(&child) != made.born {
        return Ok(false);
    }
    Ok(rustix::fs::fchmod(&child, Mode::from_raw_mode(to)).is_ok())
}

/// Removes a file or a symbolic link (never its target).
pub(super) fn remove_file(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(), Error> {
    rustix::fs::unlinkat(directory, name, AtFlags::empty()).map_err(|errno| match errno {
        Errno::NOENT => Error::not_found(path),
        Errno::ISDIR => Error::not_a_file(path),
        errno => Error::io(path, io_error(errno)),
    })
}

/// Removes an empty directory.
pub(super) fn remove_directory(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(), Error> {
    rustix::fs::unlinkat(directory, name, AtFlags::REMOVEDIR).map_err(|errno| match errno {
        Errno::NOENT => Error::not_found(path),
        Errno::NOTEMPTY | Errno::EXIST => Error::not_empty(path),
        errno => Error::io(path, io_error(errno)),
    })
}

/// Removes a directory tree beneath handles, never following a link (links are unlinked), as
/// `removal` says: each file judged by `check` first, kept by `removal.keep` or removed and
/// told to `removal.took`. Stops at a directory for which `removal.holds_mount` is true (a
/// nested mount's root or a directory on the way to one); the operation checked the top
/// before, so this is a second line.
pub(super) fn remove_tree(
    directory: &OwnedFd,
    name: &str,
    path: &VirtualPath,
    removal: &crate::storage::Removal<'_>,
    check: &dyn Fn(&OwnedFd, &str, &VirtualPath) -> Result<(), Error>,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::too_large(Some(path), "the directory tree is too deep to delete"));
    }
    let keep = removal.keep;
    let (child, stat) = open_subdirectory(directory, name, path)?;
    if (removal.holds_mount)(identity(&stat)) {
        return Err(Error::pinned(path, "delete", None));
    }
    // A directory below the top is an item of the image, with its mode (the top's is the
    // image's own); parents come before children.
    if let Some(keep) = keep
        && depth > 0
    {
        if !path.is_spelled() {
            keep.refused.set(Some(crate::changes::UNSPELLED));
        }
        // Room for its item, and for a record of its own should the removal stop after it
        // is gone (`Context::tell_taken`), as for a file.
        if !(keep.grows)(path) {
            return Err(Error::not_journaled_in_tree(keep.top, path));
        }
        let item = crate::changes::TreeItem { relative: keep.relative(path), content: None, mode: stat.mode & 0o7777 };
        keep.items.borrow_mut().push(item);
    }
    // Every write takes its directory's lock: under it, what `check` judged of a file is what
    // is removed, and no file is created between the last removal and the directory's own
    // (a write that waited for the lock then finds its directory gone).
    let _lock = lock_directory(&child, path)?;
    let mut entries = read_directory(&child, path)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    // The image names of the files this directory's removal may take, drawn and recorded
    // with its mode before the first is taken: a process killed part way leaves images whose
    // record says which file each one was, and in which directory, with which mode.
    let mut drawn: HashMap<String, String> = HashMap::new();
    if let Some(keep) = keep
        && keep.refused.get().is_none()
    {
        let files: Vec<(String, String)> = entries
            .iter()
            .filter(|entry| entry.kind == Kind::File)
            .map(|entry| (entry.name.clone(), keep.keeper.fresh_name(keep.call)))
            .collect();
        keep.keeper.note_taking(keep.call, path, stat.mode & 0o7777, &files);
        drawn.extend(files);
    }
    for entry in entries {
        let entry_path = path.join_trusted(&entry.name);
        if entry.kind == Kind::Directory {
            remove_tree(&child, &entry.name, &entry_path, removal, check, depth + 1)?;
        } else {
            check(&child, &entry.name, &entry_path)?;
            // Kept by moving it into the keeper, the file is removed already.
            let kept = match keep {
                Some(keep) => keep_file(keep, &child, &entry.name, entry.kind, &entry_path, drawn.remove(&entry.name))?,
                None => false,
            };
            if !kept {
                remove_file(&child, &entry.name, &entry_path)?;
                if let Some(took) = removal.took {
                    took(&entry_path);
                }
            }
        }
    }
    remove_temporaries(&child, path)?;
    drop(child);
    remove_directory(directory, name, path).map_err(|error| match error.kind() {
        // Emptied above, so something was made in it meanwhile (a write that created its
        // directory again): not the agent's "pass `recursive`".
        crate::ErrorKind::DirectoryNotEmpty => Error::changed_during_call(path),
        _ => error,
    })?;
    if let Some(took) = removal.took
        && depth > 0
    {
        took(path);
    }
    Ok(())
}

/// Keeps the file `name` of `directory` in the keeping's keeper, as an item of its image, by
/// moving it there (then it is removed, and this returns true); or notes why the image cannot
/// be whole, and the caller removes the file.
///
/// # Errors
/// The journal cannot record the file (`TreeKeeping::grows`), or the keeper could not take
/// it (the journal's images cannot be written): the removal stops here, so that no file goes
/// without its record ([`Error::not_journaled_in_tree`]); the files taken before are its
/// changes.
fn keep_file(
    keep: &crate::storage::TreeKeeping<'_>,
    directory: &OwnedFd,
    name: &str,
    kind: Kind,
    path: &VirtualPath,
    drawn: Option<String>,
) -> Result<bool, Error> {
    if keep.refused.get().is_some() {
        return Ok(false);
    }
    if kind != Kind::File {
        keep.refused.set(Some("it holds a link or a special file"));
        return Ok(false);
    }
    if !path.is_spelled() {
        keep.refused.set(Some(crate::changes::UNSPELLED));
        return Ok(false);
    }
    if !(keep.grows)(path) {
        return Err(Error::not_journaled_in_tree(keep.top, path));
    }
    // The name recorded for it (`TreeKeeping::taking`).
    let kept = drawn.unwrap_or_else(|| keep.keeper.fresh_name(keep.call));
    let taken = keep.keeper.directory.take_at(directory, name, &kept).map_err(|errno| {
        tracing::warn!(
            target: "vfs::journal",
            call = keep.call.as_str(),
            path = path.as_str(),
            error = %errno,
            "a removal stopped: a file could not be moved into the journal's images"
        );
        Error::not_journaled_in_tree(keep.top, path)
    })?;
    let (size, mode) = match taken {
        super::keep::Taken::Moved { size, mode } => (size, mode),
        // Removed without an image, it would leave the whole tree without one (a tree is
        // undone whole or not at all): the removal stops here, and says how to go on.
        super::keep::Taken::Linked => return Err(Error::linked_in_tree(keep.top, path)),
        super::keep::Taken::Not => {
            keep.refused.set(Some("a file in it could not be kept"));
            return Ok(false);
        }
    };
    if size > keep.cap {
        keep.refused.set(Some("a file in it is unreadable or above the write cap"));
    }
    let content = Some(crate::changes::Saved::Kept { name: kept, size });
    keep.items.borrow_mut().push(crate::changes::TreeItem { relative: keep.relative(path), content, mode });
    Ok(true)
}

/// Removes the temporary files of staged writes from a directory a recursive removal has
/// emptied, under its lock, just before the directory itself goes. Listings never show them
/// (`read_directory`), so a stage cut short by a crash would otherwise keep the directory from
/// being removed for good (`ENOTEMPTY`, answered as changed, every time).
///
/// They are vfs's own, never an agent's data: resolution refuses the reserved prefix
/// (`TEMPORARY_PREFIX`), so no agent can make or name one. One may belong to a stage still in
/// flight (a front end's `AgentAccessor::stage`, begun outside the lock); the directory it
/// would be committed into is being removed, and its commit, which renames the temporary file
/// in that directory, then finds the file or the directory gone and fails as changed,
/// creating nothing. A whole-file write stages and commits under this same lock, so none is
/// in flight here. Only regular files are removed: an entry of another kind that merely
/// carries the prefix was made by no vfs, and is left (the directory then stays, as before).
fn remove_temporaries(directory: &OwnedFd, path: &VirtualPath) -> Result<(), Error> {
    let mut reader = rustix::fs::Dir::read_from(directory).map_err(|errno| Error::io(path, io_error(errno)))?;
    let mut temporaries = Vec::new();
    while let Some(entry) = reader.read() {
        let entry = entry.map_err(|errno| Error::io(path, io_error(errno)))?;
        let Ok(name) = std::str::from_utf8(entry.file_name().to_bytes()) else { continue };
        if !name.starts_with(TEMPORARY_PREFIX) {
            continue;
        }
        let regular = match entry.file_type() {
            FileType::RegularFile => true,
            FileType::Unknown => stat_child(directory, name).is_some_and(|stat| stat.kind == Kind::File),
            _ => false,
        };
        if regular {
            temporaries.push(name.to_owned());
        }
    }
    for name in temporaries {
        match rustix::fs::unlinkat(directory, name.as_str(), AtFlags::empty()) {
            // Gone already: its stage was dropped meanwhile.
            Ok(()) | Err(Errno::NOENT) => {}
            Err(errno) => return Err(Error::io(path, io_error(errno))),
        }
    }
    Ok(())
}

/// Removes the temporary files of staged writes from the directory `node` names
/// (`remove_temporaries`): those of stages a killed process began there. For a caller that
/// knows no stage into that directory is in flight.
pub(crate) fn remove_stages(node: &Node, path: &VirtualPath) -> Result<(), Error> {
    let directory = open_node_directory(node, path)?;
    remove_temporaries(&directory, path)
}

/// Opens (creating if needed) a file for appending, never through a link.
pub(super) fn open_append(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<OpenFile, Error> {
    let fd = rustix::fs::openat(
        directory,
        name,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|errno| match errno {
        Errno::LOOP => Error::symlink(path),
        errno => Error::io(path, io_error(errno)),
    })?;
    let stat = fstat(&fd, path)?;
    if stat.kind != Kind::File {
        return Err(Error::unsupported(path));
    }
    Ok(OpenFile(File::from(fd)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps the `WARN` events it sees, as `LEVEL target field=value …` lines.
    #[derive(Default, Clone)]
    struct Warnings(Arc<std::sync::Mutex<Vec<String>>>);

    impl tracing::Subscriber for Warnings {
        fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
            *metadata.level() == tracing::Level::WARN
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            struct Line(String);
            impl tracing::field::Visit for Line {
                fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                    self.0.push_str(&format!(" {}={value:?}", field.name()));
                }
            }
            let mut line = Line(format!("{} {}", event.metadata().level(), event.metadata().target()));
            event.record(&mut line);
            self.0.lock().unwrap().push(line.0);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn a_directory_that_cannot_sync_is_reported_to_the_operator() {
        // `fsync` on /dev/null fails (EINVAL): a stand-in for a directory on a failing disk.
        let null = rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let handle = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let path = VirtualPath::new("/x/file.txt").unwrap();
        let warnings = Warnings::default();
        tracing::subscriber::with_default(warnings.clone(), || {
            sync_directory(&handle, &path);
            sync_directory(&null, &path);
        });
        assert_eq!(
            *warnings.0.lock().unwrap(),
            [
                "WARN vfs::storage message=cannot sync a directory after changing it: the change is made, but may not survive a crash path=/x/file.txt error=Invalid argument (os error 22)"
            ],
            "one warning, for the descriptor that cannot sync, naming only the virtual path"
        );
    }

    /// Held directory syncs are never lost: those of a call whose work panicked are synced
    /// when the hold ends, and those dropped without a covering sync when dropped. A
    /// descriptor that cannot sync shows each sync as a warning.
    #[test]
    fn held_directory_syncs_are_synced_when_the_work_panics_or_they_are_dropped() {
        let null = Arc::new(rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).unwrap());
        let panicked = VirtualPath::new("/x/panicked.txt").unwrap();
        let dropped = VirtualPath::new("/x/dropped.txt").unwrap();
        let warnings = Warnings::default();
        tracing::subscriber::with_default(warnings.clone(), || {
            let outcome = std::panic::catch_unwind(|| {
                super::super::holding_directory_syncs(|| {
                    super::super::hold_directory_sync(&null, &panicked);
                    panic!("the work fails");
                })
            });
            assert!(outcome.is_err());
            let ((), held) =
                super::super::holding_directory_syncs(|| super::super::hold_directory_sync(&null, &dropped));
            assert_eq!(warnings.0.lock().unwrap().len(), 1, "held, not synced yet");
            drop(crate::HeldSyncs::new(held));
        });
        let paths: Vec<String> = warnings
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|line| line.split(" path=").nth(1).and_then(|rest| rest.split(' ').next()).unwrap_or("").to_owned())
            .collect();
        assert_eq!(paths, ["/x/panicked.txt", "/x/dropped.txt"]);
    }
}
