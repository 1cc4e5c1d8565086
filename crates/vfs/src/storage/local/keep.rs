//! Before images kept by hard link: the old inode of a file an operation replaces or removes,
//! linked into a directory of an internal root (the journal's) instead of copied.
//!
//! Every write of a local store commits a new inode by `rename` (`staged`), and never writes
//! into the inode it replaces; a removal only unlinks. So the inode a name held before a
//! change is the exact before image of that change, and a hard link made under the change's
//! lock keeps it for as long as the journal wants, without reading or writing a byte. That is
//! what makes a journal cheap (a 10,000-file delete costs 10,000 links, not 10,000 copies).
//!
//! A link is only a before image when nothing else can write into that inode: a file with
//! other hard links (someone could write through them), or one on another file system (the
//! link is refused), is copied by the caller instead.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType};

use super::{Node, files};
use crate::error::Error;
use crate::path::VirtualPath;

/// What [`KeepDirectory::take_at`] did with a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Moved into the keeper: its size and permission bits.
    Moved { size: u64, mode: u32 },
    /// Not a regular file (or gone): nothing moved.
    Not,
    /// A regular file with other hard links: moving this name would keep no whole image of
    /// what the others share, so nothing moved.
    Linked,
}

/// A directory of a local store that keeps before images by hard link.
#[derive(Debug)]
pub(crate) struct KeepDirectory {
    directory: Arc<OwnedFd>,
    /// The file system commits metadata in the order it was made, so that an `fsync` of any
    /// file on it also makes the links made before durable (or it keeps nothing across a power
    /// loss anyway): [`KeepDirectory::sync`] has nothing to do.
    ordered: bool,
    /// Its virtual path, for the operator's warning should its sync fail.
    path: VirtualPath,
}

/// File systems on which the `fsync` of one file commits every metadata change made before it
/// (one journal, committed in order: ext4 and ext3, xfs), or which keep nothing across a power
/// loss (tmpfs, ramfs). ext2, and ext4 made without a journal, share ext4's number: they are
/// told apart by the kernel's journal for the device ([`has_journal`]).
const ORDERED: [u32; 4] = [
    EXT4,        // ext4, ext3 (and ext2), with a journal only
    0x5846_5342, // xfs
    0x0102_1994, // tmpfs
    0x8584_58F6, // ramfs
];

/// True when `file` lies on a file system of [`ORDERED`]: the `fsync` of any file there makes
/// every metadata change made before it durable (or nothing survives a power loss anyway). An
/// ext4 (or ext3) without a journal shares the number and commits nothing in order: it counts
/// only when the kernel runs a journal for its device ([`has_journal`]).
pub(crate) fn commits_in_order(file: &impl std::os::fd::AsFd) -> bool {
    rustix::fs::fstatfs(file).is_ok_and(|statfs| {
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "magic numbers are 32-bit")]
        let magic = statfs.f_type as u32;
        ORDERED.contains(&magic)
            && (magic != EXT4 || rustix::fs::fstat(file).is_ok_and(|stat| has_journal(stat.st_dev)))
    })
}

const EXT4: u32 = 0xEF53;

/// Whether the kernel runs a journal (jbd2) for the ext4 on device `device`: an entry
/// `<device name>-<journal inode>` in `/proc/fs/jbd2`, the name as `/sys/dev/block` gives it.
/// Asked once a device; anything that cannot be read answers no (each change is then synced
/// on its own, as on any file system not known to commit in order).
fn has_journal(device: u64) -> bool {
    static KNOWN: std::sync::Mutex<Vec<(u64, bool)>> = std::sync::Mutex::new(Vec::new());
    let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&(_, journal)) = known.iter().find(|(seen, _)| *seen == device) {
        return journal;
    }
    let (major, minor) = (rustix::fs::major(device), rustix::fs::minor(device));
    let journal = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).is_ok_and(|uevent| {
        uevent.lines().find_map(|line| line.strip_prefix("DEVNAME=")).is_some_and(|name| {
            let name = name.rsplit('/').next().unwrap_or(name);
            std::fs::read_dir("/proc/fs/jbd2").is_ok_and(|entries| {
                entries.flatten().any(|entry| {
                    entry.file_name().to_str().and_then(|entry| entry.strip_prefix(name)).is_some_and(|rest| {
                        rest.strip_prefix('-')
                            .is_some_and(|inode| !inode.is_empty() && inode.bytes().all(|byte| byte.is_ascii_digit()))
                    })
                })
            })
        })
    });
    known.push((device, journal));
    journal
}

impl KeepDirectory {
    /// The directory at `node`.
    pub(crate) fn open(node: &Node, path: &VirtualPath) -> Result<Self, Error> {
        let directory = files::open_node_directory(node, path)?;
        let ordered = commits_in_order(&directory);
        Ok(Self { directory, ordered, path: path.clone() })
    }

    /// Links the regular file `node` names into this directory as `name`, when the link is a
    /// true before image (a file of one link, on the same file system). Returns the file's size
    /// and permission bits; `None` when it cannot be kept so, and the caller copies instead.
    pub(crate) fn link(&self, node: &Node, name: &str) -> Option<(u64, u32)> {
        self.link_at(&node.parent, node.name.as_deref()?, name)
    }

    /// [`KeepDirectory::link`] of the entry `file` of `directory`.
    pub(crate) fn link_at(&self, directory: &OwnedFd, file: &str, name: &str) -> Option<(u64, u32)> {
        rustix::fs::linkat(directory, file, &*self.directory, name, AtFlags::empty()).ok()?;
        // Looked at through the new link: a regular file with exactly its own name and ours
        // (a directory cannot be linked; a link or a special file is not an image).
        let kept = rustix::fs::statat(&*self.directory, name, AtFlags::SYMLINK_NOFOLLOW).ok();
        match kept {
            Some(kept) if FileType::from_raw_mode(kept.st_mode) == FileType::RegularFile && kept.st_nlink == 2 => {
                Some((u64::try_from(kept.st_size).unwrap_or(0), kept.st_mode & 0o7777))
            }
            _ => {
                let _ = rustix::fs::unlinkat(&*self.directory, name, AtFlags::empty());
                None
            }
        }
    }

    /// Moves the entry `file` of `directory` into this directory as `name`, when it is a
    /// regular file of one link: a removal that keeps its image in one call (the inode leaves
    /// the tree for the journal). Returns its size and permission bits; `None` (nothing
    /// moved) when it cannot be kept so, and the caller links, copies or removes instead.
    ///
    /// # Errors
    /// The move failed: this directory cannot take the file (removed, full, refused), and a
    /// removal must stop rather than remove a file whose image was not kept.
    pub(crate) fn take_at(&self, directory: &OwnedFd, file: &str, name: &str) -> Result<Taken, rustix::io::Errno> {
        let Ok(before) = rustix::fs::statat(directory, file, AtFlags::SYMLINK_NOFOLLOW) else { return Ok(Taken::Not) };
        if FileType::from_raw_mode(before.st_mode) != FileType::RegularFile {
            return Ok(Taken::Not);
        }
        if before.st_nlink != 1 {
            return Ok(Taken::Linked);
        }
        rustix::fs::renameat_with(directory, file, &*self.directory, name, rustix::fs::RenameFlags::NOREPLACE)?;
        Ok(Taken::Moved { size: u64::try_from(before.st_size).unwrap_or(0), mode: before.st_mode & 0o7777 })
    }

    /// True when `directory` lies on this directory's file system (an entry of it can be
    /// moved or linked here).
    pub(crate) fn same_file_system(&self, directory: &OwnedFd) -> bool {
        match (rustix::fs::fstat(&*self.directory), rustix::fs::fstat(directory)) {
            (Ok(mine), Ok(theirs)) => mine.st_dev == theirs.st_dev,
            _ => false,
        }
    }

    /// Removes the image `name` (an image kept for a change that was then not made).
    /// Appends `line` to the file `name` of this directory, made if it is not there: not
    /// synced (a killed process loses no write it made).
    pub(crate) fn append(&self, name: &str, line: &[u8]) -> Result<(), rustix::io::Errno> {
        use rustix::fs::{Mode, OFlags};
        let file = rustix::fs::openat(
            &*self.directory,
            name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )?;
        let mut written = 0;
        while written < line.len() {
            written += rustix::io::write(&file, &line[written..])?;
        }
        Ok(())
    }

    /// The permission bits of the file `name` of this directory (a file taken keeps its
    /// own), when it is a regular file.
    pub(crate) fn mode(&self, name: &str) -> Option<u32> {
        let stat = rustix::fs::statat(&*self.directory, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        (FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile).then_some(stat.st_mode & 0o7777)
    }

    pub(crate) fn forget(&self, name: &str) {
        let _ = rustix::fs::unlinkat(&*self.directory, name, AtFlags::empty());
    }

    /// This directory, to be synced with the next sync of a file on its file system (the
    /// journal's log), when the links made in it need a sync of their own: `None` where the
    /// file system's order makes that sync commit them.
    pub(crate) fn unordered(&self) -> Option<super::HeldDirectory> {
        (!self.ordered).then(|| (self.directory.clone(), self.path.clone()))
    }
}
