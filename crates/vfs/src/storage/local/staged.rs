//! Staged writes on a local store: a file's next content is built in a temporary file beside
//! it, at offsets, then committed by one `rename` (or a no-replace rename for a create), or
//! abandoned.
//!
//! A whole-file write (`put`) is the simplest use: stage from empty, write everything at
//! offset 0, commit. The FUSE view of the sandbox issue needs the rest: a program writes a file
//! piece by piece, at offsets, truncates it, and the change must appear whole when the file is
//! closed, never half (readers see the old content or the new). The temporary file carries the
//! reserved prefix (`TEMPORARY_PREFIX`), which resolution and listings never show an agent, and
//! is removed when the stage is dropped without a commit, so nothing is left on failure.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::files;
use super::{Durability, Node, io_error};
use crate::error::Error;
use crate::path::VirtualPath;
use crate::storage::{Kind, NewMode};
use crate::text::agent_text;

/// A file's next content, being built beside it.
pub(crate) struct Staged {
    directory: Arc<OwnedFd>,
    name: String,
    temporary: String,
    file: File,
    /// Whose the file is where it replaces no regular file ([`Staged::keep_owner`]).
    owner: NewOwner,
    len: u64,
    cap: u64,
    durability: Durability,
    committed: bool,
}

impl std::fmt::Debug for Staged {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Staged").field("len", &self.len).field("cap", &self.cap).finish_non_exhaustive()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = rustix::fs::unlinkat(&*self.directory, self.temporary.as_str(), AtFlags::empty());
        }
    }
}

/// Where a stage starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// An empty file.
    Empty,
    /// The place's current content (empty when nothing is there).
    Current,
}

/// Whose a staged file is where it replaces no regular file, when vfs runs as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NewOwner {
    /// The directory's owner's: content an agent or a command wrote ([`NewMode::Masked`]).
    Directory,
    /// The process's, as created: an undo's restore ([`NewMode::Exact`]) of a file that was
    /// someone's, whom the image does not record; the directory's owner may not be allowed to
    /// read it.
    Process,
    /// These (user, group): a file moved by a copy, which keeps its owner as a rename would.
    Of(u32, u32),
}

impl Staged {
    /// Begins a stage for `node` in its directory: a new temporary file with the permission
    /// bits of `mode`, empty or holding the place's current content (a regular file; a link,
    /// a directory or a special file there is refused). At most `cap` bytes, ever.
    pub(super) fn begin(
        node: &Node,
        start: Start,
        mode: NewMode,
        cap: u64,
        durability: Durability,
        path: &VirtualPath,
    ) -> Result<Self, Error> {
        let Some(name) = &node.name else { return Err(Error::not_a_file(path)) };
        let temporary = files::temporary_name();
        let fd = rustix::fs::openat(
            &*node.parent,
            temporary.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode.bits()),
        )
        .map_err(|errno| match errno {
            // The directory held open was removed since it was found (a delete beside this call).
            Errno::NOENT => Error::changed_during_call(path),
            errno => Error::io(path, io_error(errno)),
        })?;
        if let NewMode::Exact(_) = mode {
            // The umask took bits off at the create; the file is still only this call's. A file
            // system that refuses modes (vfat, some network ones) keeps what the create gave:
            // the content is what matters, and a tree's guard then sees the difference.
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode.bits()));
        }
        let owner = match mode {
            NewMode::Masked(_) => NewOwner::Directory,
            NewMode::Exact(_) => NewOwner::Process,
        };
        let mut staged = Staged {
            directory: node.parent.clone(),
            name: name.clone(),
            temporary,
            file: File::from(fd),
            owner,
            len: 0,
            cap,
            durability,
            committed: false,
        };
        if start == Start::Current
            && let Some(stat) = files::stat_child(&node.parent, name)
        {
            match stat.kind {
                Kind::File => {}
                Kind::Symlink => return Err(Error::symlink(path)),
                Kind::Directory => return Err(Error::not_a_file(path)),
                Kind::Special => return Err(Error::unsupported(path)),
            }
            if stat.size > cap {
                return Err(staged.too_large(stat.size, path));
            }
            let (mut current, _) = files::open_file_in(&node.parent, name, stat, path)?;
            let copied = io::copy(&mut io::Read::take(&mut current.0, cap + 1), &mut staged.file)
                .map_err(|error| Error::io(path, error))?;
            if copied > cap {
                return Err(staged.too_large(copied, path));
            }
            staged.len = copied;
        }
        Ok(staged)
    }

    fn too_large(&self, size: u64, path: &VirtualPath) -> Error {
        Error::too_large(
            Some(path),
            agent_text![format!("the file would have {size} bytes, more than the {}-byte cap", self.cap)],
        )
    }

    /// The staged content's length.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Writes `bytes` at `offset` (past the end, the gap reads as zeros).
    pub(crate) fn write_at(&mut self, offset: u64, bytes: &[u8], path: &VirtualPath) -> Result<(), Error> {
        let end = offset.saturating_add(bytes.len() as u64);
        if end > self.cap {
            return Err(self.too_large(end, path));
        }
        self.file.write_all_at(bytes, offset).map_err(|error| Error::io(path, error))?;
        self.len = self.len.max(end);
        Ok(())
    }

    /// Flushes what is staged so far to stable storage (when the store syncs writes), so that
    /// the commit's own sync has only what follows to write.
    pub(crate) fn sync(&self, path: &VirtualPath) -> Result<(), Error> {
        if self.durability == Durability::Later {
            return Ok(());
        }
        self.file.sync_data().map_err(|error| Error::io(path, error))
    }

    /// Sets the length: cuts the content, or extends it with zeros.
    pub(crate) fn set_len(&mut self, len: u64, path: &VirtualPath) -> Result<(), Error> {
        if len > self.cap {
            return Err(self.too_large(len, path));
        }
        self.file.set_len(len).map_err(|error| Error::io(path, error))?;
        self.len = len;
        Ok(())
    }

    /// `len` bytes from `offset` (the caller keeps them within the content).
    pub(crate) fn read_at(&self, offset: u64, len: usize, path: &VirtualPath) -> Result<Vec<u8>, Error> {
        let mut bytes = vec![0; len];
        self.file.read_exact_at(&mut bytes, offset).map_err(|error| Error::io(path, error))?;
        Ok(bytes)
    }

    /// Appends what `source` yields, within the cap (a copy between stores).
    pub(crate) fn write_from(&mut self, source: &mut dyn io::Read, path: &VirtualPath) -> Result<(), Error> {
        /// How much is copied between two looks at the call's clock.
        const PIECE: u64 = 1 << 20;
        let room = self.cap.saturating_sub(self.len);
        let mut limited = io::Read::take(source, room.saturating_add(1));
        let mut writer = &self.file;
        let deadline = crate::budget::current();
        let mut copied = 0u64;
        loop {
            // A large copy (a move across file systems) ends with the call, as a walk does.
            if let Some(deadline) = &deadline {
                deadline.check()?;
            }
            let piece = io::copy(&mut io::Read::take(&mut limited, PIECE), &mut writer)
                .map_err(|error| Error::io(path, error))?;
            copied += piece;
            if piece < PIECE {
                break;
            }
        }
        if copied > room {
            return Err(self.too_large(self.len.saturating_add(copied), path));
        }
        self.len += copied;
        Ok(())
    }

    /// The file is a copy of one whose owner and group are `(user, group)` (a move across
    /// file systems): it keeps them, replacing a file or not, as the rename it stands for would.
    pub(super) fn owned_by(&mut self, user: u32, group: u32) {
        self.owner = NewOwner::Of(user, group);
    }

    /// Gives the new file the owner and group it should have where the process may give them
    /// (root; anyone else keeps what its create gave): those of a moved file's source
    /// ([`Staged::owned_by`]); else those of the regular file it replaces, as `sed -i` and
    /// editors do, so that a vfs run as root (a container's) leaves a project's files to their
    /// owner, not to root; else, for content written anew, those of the directory it is made in
    /// ([`files::give_owner`]). An undo's restore of a removed file stays the process's: the
    /// image does not say whose it was, and the directory's owner may not be allowed to read
    /// it. Set-user-ID and set-group-ID bits, which `chown` would take off, are never given to
    /// a written file. Called with the directory's lock held, just before the rename.
    fn keep_owner(&self) {
        if let NewOwner::Of(user, group) = self.owner {
            self.give(user, group);
            return;
        }
        match rustix::fs::statat(&*self.directory, self.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(old) if rustix::fs::FileType::from_raw_mode(old.st_mode) == rustix::fs::FileType::RegularFile => {
                self.give(old.st_uid, old.st_gid);
            }
            // Nothing there yet: a file written anew is the directory's owner's.
            Err(_) if self.owner == NewOwner::Directory => files::give_owner(&*self.directory, &self.file),
            // Something else there (the commit refuses it), or a restore.
            Ok(_) | Err(_) => {}
        }
    }

    /// `fchown`s the staged file to `(user, group)`, only the parts that differ.
    fn give(&self, user: u32, group: u32) {
        let Ok(new) = rustix::fs::fstat(&self.file) else { return };
        let owner = (user != new.st_uid).then(|| rustix::fs::Uid::from_raw(user));
        let group = (group != new.st_gid).then(|| rustix::fs::Gid::from_raw(group));
        if owner.is_some() || group.is_some() {
            let _ = rustix::fs::fchown(&self.file, owner, group);
        }
    }

    /// Puts the staged content in the place: replacing what is there, or (without `replace`)
    /// only if nothing is. Synced first when the store syncs writes; the directory after, or by
    /// the call that holds its sync ([`Durability::FileNow`]).
    /// Returns the file, still open, for its version. The caller checks any version guard
    /// before, under the directory's lock.
    pub(super) fn commit(mut self, replace: bool, path: &VirtualPath) -> Result<File, Error> {
        self.keep_owner();
        let flushed = (|| -> io::Result<()> {
            self.file.flush()?;
            if self.durability != Durability::Later {
                self.file.sync_all()?;
            }
            Ok(())
        })();
        flushed.map_err(|error| Error::io(path, error))?;
        let (directory, temporary, name) = (&*self.directory, self.temporary.as_str(), self.name.as_str());
        let renamed = if replace {
            rustix::fs::renameat(directory, temporary, directory, name)
        } else {
            files::rename_no_replace(&self.directory, temporary, &self.directory, name)
        };
        renamed.map_err(|errno| match errno {
            Errno::EXIST => Error::already_exists(path),
            Errno::ISDIR => Error::not_a_file(path),
            Errno::NOENT => Error::changed_during_call(path),
            errno => Error::io(path, io_error(errno)),
        })?;
        self.committed = true;
        match self.durability {
            Durability::Later => {}
            Durability::Now => files::sync_directory(directory, path),
            Durability::FileNow => super::hold_directory_sync(&self.directory, path),
        }
        self.file.try_clone().map_err(|error| Error::io(path, error))
    }
}

#[cfg(test)]
#[expect(clippy::disallowed_methods, reason = "fixture: the tests look at the directory a stage writes in")]
mod tests {
    use super::*;
    use crate::storage::local::Seen;

    /// A directory with `file.txt` holding `content` (if any), and the place of `file.txt`.
    fn place(content: Option<&str>) -> (tempfile::TempDir, Node, VirtualPath) {
        let dir = tempfile::tempdir().unwrap();
        if let Some(content) = content {
            std::fs::write(dir.path().join("file.txt"), content).unwrap();
        }
        let handle = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let node = Node { parent: Arc::new(handle), name: Some("file.txt".to_owned()), seen: Seen::Missing };
        (dir, node, VirtualPath::new("/x/file.txt").unwrap())
    }

    fn names(dir: &tempfile::TempDir) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_stage_writes_at_offsets_sets_the_length_and_appears_whole_at_commit() {
        let (dir, node, path) = place(Some("old content\n"));
        let mut staged =
            Staged::begin(&node, Start::Current, NewMode::Masked(0o644), 1024, Durability::Now, &path).unwrap();
        assert_eq!(staged.len(), 12);
        staged.write_at(0, b"new", &path).unwrap();
        staged.write_at(14, b"end", &path).unwrap();
        assert_eq!(staged.len(), 17);
        // Until the commit, the place holds what it held.
        assert_eq!(std::fs::read(dir.path().join("file.txt")).unwrap(), b"old content\n");
        staged.set_len(16, &path).unwrap();
        staged.commit(true, &path).unwrap();
        assert_eq!(std::fs::read(dir.path().join("file.txt")).unwrap(), b"new content\n\0\0en");
        assert_eq!(names(&dir), ["file.txt"]);
    }

    #[test]
    fn a_replacement_keeps_the_replaced_files_owner_and_group_and_a_create_takes_the_directorys() {
        use std::os::unix::fs::MetadataExt;
        let (dir, node, path) = place(Some("old"));
        let target = dir.path().join("file.txt");
        if !rustix::process::geteuid().is_root() {
            #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
            {
                eprintln!("SKIPPED: giving a file another owner needs root");
            }
            return;
        }
        std::os::unix::fs::chown(&target, Some(4321), Some(8765)).unwrap();
        let mut staged =
            Staged::begin(&node, Start::Empty, NewMode::Masked(0o644), 1024, Durability::Now, &path).unwrap();
        staged.write_at(0, b"new", &path).unwrap();
        staged.commit(true, &path).unwrap();
        let metadata = std::fs::metadata(&target).unwrap();
        assert_eq!((metadata.uid(), metadata.gid()), (4321, 8765));
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // A create has no file to take them from: the new file is the directory's owner's.
        std::fs::remove_file(&target).unwrap();
        let mut staged =
            Staged::begin(&node, Start::Empty, NewMode::Masked(0o644), 1024, Durability::Now, &path).unwrap();
        staged.write_at(0, b"made", &path).unwrap();
        std::os::unix::fs::chown(dir.path(), Some(1234), Some(5678)).unwrap();
        staged.commit(false, &path).unwrap();
        let metadata = std::fs::metadata(&target).unwrap();
        assert_eq!((metadata.uid(), metadata.gid()), (1234, 5678));
        std::os::unix::fs::chown(dir.path(), Some(0), Some(0)).unwrap();
        std::os::unix::fs::chown(&target, Some(0), Some(0)).unwrap();
        // Only the part that differs is given: a file of root's with another group.
        std::os::unix::fs::chown(&target, None, Some(8765)).unwrap();
        let staged =
            Staged::begin(&node, Start::Current, NewMode::Masked(0o644), 1024, Durability::Now, &path).unwrap();
        staged.commit(true, &path).unwrap();
        let metadata = std::fs::metadata(&target).unwrap();
        assert_eq!((metadata.uid(), metadata.gid()), (0, 8765));
        assert_eq!(std::fs::read(&target).unwrap(), b"made");
    }

    #[test]
    fn a_stage_dropped_without_commit_leaves_the_place_and_no_temporary_file() {
        let (dir, node, path) = place(Some("old"));
        let mut staged =
            Staged::begin(&node, Start::Empty, NewMode::Masked(0o644), 1024, Durability::Now, &path).unwrap();
        staged.write_at(0, b"half of the new content", &path).unwrap();
        assert_eq!(names(&dir).len(), 2, "the stage's temporary file sits beside the target");
        drop(staged);
        assert_eq!(std::fs::read_to_string(dir.path().join("file.txt")).unwrap(), "old");
        assert_eq!(names(&dir), ["file.txt"]);
    }

    #[test]
    fn a_stage_refuses_to_grow_past_its_cap_and_a_create_refuses_an_existing_name() {
        let (dir, node, path) = place(Some("old"));
        let mut staged = Staged::begin(&node, Start::Empty, NewMode::Masked(0o644), 8, Durability::Now, &path).unwrap();
        let error = staged.write_at(4, b"12345", &path).unwrap_err();
        assert_eq!(error.to_string(), "`/x/file.txt`: the file would have 9 bytes, more than the 8-byte cap");
        assert_eq!(staged.set_len(9, &path).unwrap_err().kind(), crate::ErrorKind::TooLarge);
        staged.write_at(0, b"new", &path).unwrap();
        let error = staged.commit(false, &path).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(dir.path().join("file.txt")).unwrap(), "old");
        assert_eq!(names(&dir), ["file.txt"]);
        let error =
            Staged::begin(&node, Start::Current, NewMode::Masked(0o644), 2, Durability::Now, &path).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::TooLarge);
    }

    #[test]
    fn a_stage_from_the_current_content_never_starts_from_a_link() {
        let (dir, node, path) = place(None);
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("file.txt")).unwrap();
        let error =
            Staged::begin(&node, Start::Current, NewMode::Masked(0o644), 1024, Durability::Now, &path).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::Symlink);
        assert_eq!(names(&dir), ["file.txt"]);
    }
}
