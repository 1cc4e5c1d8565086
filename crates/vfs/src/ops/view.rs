//! What a file-system front end asks that the tools do not: a path's attributes without
//! hashing its content, bytes at an offset, and every entry of a directory.
//!
//! A FUSE view answers `getattr` for every file `ls -l` or `git status` touches, and reads in
//! pieces of a few hundred kilobytes: `get_file_info` (which hashes the content for its version)
//! and the line-window reads of the tools fit neither. These are the same operations made
//! through the gate, with the same routing, name rules and rights, so the view cannot see what
//! a tool could not.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::time::{Duration, SystemTime};

use super::{Context, EntryKind, Listing};
use crate::error::Error;
use crate::gate;
use crate::path::VirtualPath;
use crate::storage::local::OpenFile;
use crate::storage::{Kind, Reader};

/// Most entries one directory shows through a view: a directory with more shows the first
/// ones by name (the tools' listings stop much earlier, at [`Limits::entries`](crate::Limits)).
pub const VIEW_ENTRIES: usize = 100_000;

/// Most bytes one [`AgentAccessor::read_at`](crate::AgentAccessor::read_at) returns.
pub const VIEW_READ_BYTES: usize = 4 * 1024 * 1024;

/// A path's attributes as a file-system view presents them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// A file or a directory (a mount root, and a virtual parent of roots, are directories).
    pub kind: EntryKind,
    /// Size in bytes (0 for a directory).
    pub size: u64,
    /// Last modification (the epoch for a virtual directory).
    pub modified: SystemTime,
    /// Last status change (object stores repeat the modification time).
    pub changed: SystemTime,
    /// The permission bits the store holds (`0o555` for a virtual directory); a view takes
    /// the write bits away where the rights do not allow writing.
    pub mode: u32,
    /// The rights at the path: `ro`, `rw` or `rwnd` (`ro` above the mounts, and where a name
    /// rule keeps the path read-only: `**/*.md:ro`, the default `.git`).
    pub rights: &'static str,
}

impl Attributes {
    /// True when the rights at the path allow writing (`rw` or `rwnd`).
    #[must_use]
    pub fn writable(&self) -> bool {
        self.rights != "ro"
    }
}

fn time((seconds, nanos): (i64, u32)) -> SystemTime {
    let whole = Duration::from_secs(seconds.unsigned_abs());
    let base = if seconds >= 0 { SystemTime::UNIX_EPOCH + whole } else { SystemTime::UNIX_EPOCH - whole };
    base + Duration::from_nanos(u64::from(nanos))
}

/// A file a view opened for reading (see [`Context::open_read`]).
#[derive(Debug)]
pub(crate) struct ViewFile {
    pub(crate) path: VirtualPath,
    /// The size at the open.
    pub(crate) size: u64,
    /// The file opened, when its store keeps local files.
    pub(crate) file: Option<OpenFile>,
    /// What the file was at the open, when its store can tell (local stores).
    pub(crate) stamp: Option<FileStamp>,
}

/// What tells one content of a file from another (local stores: device, inode, modification
/// and change times, size). Two opens with equal stamps read the same bytes, so a view may keep
/// what it cached from the first for the second. Opaque: it says nothing of the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp([u64; 7]);

impl FileStamp {
    /// True when the file last changed more than a second ago. File systems stamp times at the
    /// clock's tick, so a change made within the tick of the one before can leave every time
    /// as it was; a stamp taken after the tick has passed tells any later change from it.
    #[must_use]
    pub fn settled(&self) -> bool {
        let changed = Duration::new(self.0[4], u32::try_from(self.0[5]).unwrap_or(0));
        SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).is_ok_and(|now| now > changed + Duration::from_secs(1))
    }

    /// True when both stamps are of one file, whatever its content (the same device and
    /// inode). Sound only while a handle of the first is held open: a file removed can give
    /// its inode to another.
    #[must_use]
    pub fn same_file(&self, other: &FileStamp) -> bool {
        self.0[..2] == other.0[..2]
    }

    /// The file's modification time and size as 16 hexadecimal digits (a 64-bit FNV-1a hash,
    /// the same in every build), to be kept and compared later: a write changes them. Not its
    /// device, inode or change time, which a `chmod`, a link, a copy of the file with its
    /// times (`cp -a`, a backup restored) or a remount change without a write
    /// (infrastructure's own records; no agent sees one).
    #[must_use]
    pub fn written_token(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in [self.0[2], self.0[3], self.0[6]].iter().flat_map(|word| word.to_le_bytes()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("{hash:016x}")
    }
}

impl ViewFile {
    /// At most `len` bytes (and at most [`VIEW_READ_BYTES`]) from `offset`: fewer at the end
    /// of the file opened, none past it. `None` when the file is not held open here.
    pub(crate) fn read_at(&self, offset: u64, len: usize) -> Option<Result<Vec<u8>, Error>> {
        let file = self.file.as_ref()?;
        let mut bytes = vec![0; len.min(VIEW_READ_BYTES)];
        // A regular file reads short only at its end: one `pread` unless a signal cut it.
        let read = loop {
            match file.read_at(&mut bytes, offset) {
                Ok(read) => break read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Some(Err(Error::io(&self.path, error))),
            }
        };
        bytes.truncate(read);
        Some(Ok(bytes))
    }
}

impl Context<'_> {
    /// The attributes at `input`, following an in-mount link to what it names.
    /// The rights at `located` as a view shows them: `ro` where a name rule keeps the path
    /// read-only, whatever the mount's rights (so that a program sees no write bit and an
    /// open for writing is `EROFS`, as under a read-only sub-path).
    fn rights_with_rules(&self, located: &super::Located) -> &'static str {
        let ruled = self.registry.rules_for(self.caller, located.mount).and_then(|rules| rules.judge(&located.rel));
        match ruled {
            Some((crate::policy::RuleEffect::ReadOnly, _, _)) => "ro",
            _ => self.rights_at(located),
        }
    }

    pub(crate) fn attributes(&self, input: &str) -> Result<Attributes, Error> {
        let path = Self::parse(input)?;
        let located = match self.locate::<gate::Read>(&path, true, false) {
            Ok(located) => located,
            // Above the mounts: `/`, or a parent of nested roots that no mount serves.
            Err(error) if error.kind() == crate::ErrorKind::UnknownRoot && self.is_virtual_directory(&path) => {
                return Ok(Attributes {
                    kind: EntryKind::Directory,
                    size: 0,
                    modified: SystemTime::UNIX_EPOCH,
                    changed: SystemTime::UNIX_EPOCH,
                    mode: 0o555,
                    rights: "ro",
                });
            }
            Err(error) => return Err(error),
        };
        let Some(stat) = self.store(located.mount).stat(&located.node, &path)? else {
            return Err(Error::not_found(&path));
        };
        let (kind, size) = match stat.kind {
            Kind::File => (EntryKind::File, stat.size),
            Kind::Directory => (EntryKind::Directory, 0),
            Kind::Symlink | Kind::Special => return Err(Error::unsupported(&path)),
        };
        let mode = match (stat.mode & 0o7777, kind) {
            // Object stores keep no mode.
            (0, EntryKind::Directory) => 0o755,
            (0, _) => 0o644,
            (mode, _) => mode & 0o777,
        };
        Ok(Attributes {
            kind,
            size,
            modified: time(stat.modified),
            changed: time(stat.changed),
            mode,
            rights: self.rights_with_rules(&located),
        })
    }

    /// What is at `input` itself, a link not followed: a link is [`EntryKind::Link`], not
    /// what it names (`/` and a virtual parent of roots are directories).
    pub(crate) fn kind_at(&self, input: &str) -> Result<EntryKind, Error> {
        let path = Self::parse(input)?;
        let located = match self.locate::<gate::Read>(&path, false, false) {
            Ok(located) => located,
            Err(error) if error.kind() == crate::ErrorKind::UnknownRoot && self.is_virtual_directory(&path) => {
                return Ok(EntryKind::Directory);
            }
            Err(error) => return Err(error),
        };
        match self.store(located.mount).stat(&located.node, &path)? {
            Some(stat) => Ok(EntryKind::from_kind(stat.kind)),
            None => Err(Error::not_found(&path)),
        }
    }

    /// True for `/` and for a virtual parent of nested roots (a path some agent-facing root
    /// lies strictly below).
    fn is_virtual_directory(&self, path: &VirtualPath) -> bool {
        path.components().next().is_none() || !self.virtual_children(path).is_empty()
    }

    /// At most `len` bytes of the file at `input` from `offset` (fewer at its end).
    pub(crate) fn read_at(&self, input: &str, offset: u64, len: usize) -> Result<Vec<u8>, Error> {
        let path = Self::parse(input)?;
        let located = self.locate::<gate::Read>(&path, true, false)?;
        let mut opened = self.store(located.mount).open_file(&located.node, None, &path)?;
        if offset >= opened.size {
            return Ok(Vec::new());
        }
        let len = len.min(VIEW_READ_BYTES).min(usize::try_from(opened.size - offset).unwrap_or(usize::MAX));
        opened.reader.seek(SeekFrom::Start(offset)).map_err(|error| Error::io(&path, error))?;
        let mut bytes = Vec::with_capacity(len);
        opened.reader.take(len as u64).read_to_end(&mut bytes).map_err(|error| Error::io(&path, error))?;
        Ok(bytes)
    }

    /// Opens the file at `input` for a view's reads: one pass through the gate, then reads at
    /// offsets of the file opened, without resolving its path again. Object stores answer
    /// `None`: their reads are requests of their own, made through the gate each time.
    pub(crate) fn open_read(&self, input: &str) -> Result<ViewFile, Error> {
        let path = Self::parse(input)?;
        let located = self.locate::<gate::Read>(&path, true, false)?;
        let opened = self.store(located.mount).open_file(&located.node, None, &path)?;
        let file = match opened.reader {
            Reader::Local(file) => Some(file),
            #[cfg(feature = "s3")]
            Reader::Object(_) => None,
            Reader::Empty(_) => None,
        };
        let stamp = match &file {
            Some(file) => Some(FileStamp(file.stamp().map_err(|error| Error::io(&path, error))?)),
            None => None,
        };
        Ok(ViewFile { path, size: opened.size, file, stamp })
    }

    /// Every entry of the directory at `input` (up to `Limits::view_entries`, by default
    /// [`VIEW_ENTRIES`]), by name.
    pub(crate) fn entries(&self, input: &str) -> Result<Listing, Error> {
        // Read no further than that: a directory of a million names costs a view thread the
        // time of a tenth of them, not of all (red team: 6 to 9 s an open, debug build, while
        // every other call of the view waited for a thread).
        let shown = self.registry.limits.view_entries;
        self.list_bounded(Self::parse(input)?, shown, Some(shown.saturating_add(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::time;
    use std::time::{Duration, SystemTime};

    #[test]
    fn times_before_the_epoch_count_back_from_it() {
        assert_eq!(time((1, 5)), SystemTime::UNIX_EPOCH + Duration::new(1, 5));
        assert_eq!(time((-2, 5)), SystemTime::UNIX_EPOCH - Duration::from_secs(2) + Duration::from_nanos(5));
    }
}
