//! Storage: the seam between the operations and the places data lives, and the only code that
//! touches a disk or a bucket.
//!
//! A store turns a mount-relative, canonical list of segments into a [`Node`] and offers the
//! primitives every operation is written with: locate a path beneath the mount's root, stat it,
//! open it for reading (a line window deep in a file reads ranges), read it whole up to a cap,
//! list a directory, walk a tree, put bytes under a precondition (absent, any, or a given
//! version), make a directory, remove, rename, and lock a directory for a read-modify-write.
//! What a store can and cannot do is its [`Capabilities`]; operations consult them, never the
//! store's kind. Two stores implement the seam: [`local`] (directory handles, `openat` with
//! `O_NOFOLLOW` one component at a time) and, with the cargo feature `s3`, [`object`] (an
//! S3-compatible bucket, or an in-process `memory://` store). [`Backend`] is the one place that
//! dispatches between them.
//!
//! Nothing here knows who is asking or what rights hold: resolution asks a [`MountTable`] (the
//! registry, bound to one caller) whether a directory it passes is another mount's root, and
//! the registry decides rights on the [`Located`] place resolution returns.

pub(crate) mod ambient;
pub(crate) mod local;
#[cfg(feature = "s3")]
pub(crate) mod object;

use std::io::{self, Read, Seek};
use std::sync::Arc;

use crate::budget::Deadline;
use crate::error::Error;
use crate::gate::{Delete, Place, Write};
use crate::mount::ConfigError;
use crate::path::VirtualPath;
use crate::spec::MountSpec;

/// What a store can do. Operations and the conformance kit consult it instead of asking which
/// store they run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[expect(clippy::struct_excessive_bools, reason = "each is a capability a store has or lacks, independently")]
pub struct Capabilities {
    /// Symbolic links exist; resolution follows those that stay inside the mount.
    pub links: bool,
    /// Hard links can exist (a write replaces the name, never writes through another link).
    pub hard_links: bool,
    /// FIFOs, sockets and devices can exist (and are refused without an open that could block).
    pub special_files: bool,
    /// A move is one atomic rename; without it a move copies, then deletes the source.
    pub atomic_rename: bool,
    /// Directories exist on their own; without them a directory is a key prefix, and an empty
    /// one vanishes.
    pub directories: bool,
    /// Files can be opened for appending (the exchange log).
    pub append: bool,
    /// A read-modify-write can hold a lock on the directory; without one, a guarded write is a
    /// conditional put.
    pub locks: bool,
    /// A directory's identity is known, so mounts can nest physically and be recognised.
    pub identities: bool,
    /// Calls wait on the network (a server should not make them on the thread that reads its
    /// requests).
    pub network: bool,
}

/// What a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Directory,
    Symlink,
    /// FIFO, socket, character or block device: never opened.
    Special,
}

/// What [`Store::make_directory_exact`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MadeDirectory {
    /// A directory (or something else) was there already: nothing was made or changed.
    Existed,
    /// Made, with what it is, where the store has directories of its own (local ones).
    Made(Option<MadeAs>),
}

/// A directory [`Store::make_directory_exact`] made: its identity (device, inode), its birth
/// time where the file system keeps one (so that a directory made later with the inode number
/// it left is not taken for it), and the bits it has (those asked for, less any the kernel
/// refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MadeAs {
    pub(crate) identity: (u64, u64),
    pub(crate) born: Option<(i64, u32)>,
    pub(crate) mode: u32,
}

/// The permission bits a write gives the file it puts in place (local stores; object stores
/// have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NewMode {
    /// These bits less the process's umask, as any file a program creates: every write.
    Masked(u32),
    /// Exactly these bits, whatever the umask: an undo's restore of the mode a file had before
    /// a change, so that the tree it lies in is as it was (`Context::tree_version`).
    Exact(u32),
}

impl NewMode {
    /// The permission bits (no file type, no set-user-ID, set-group-ID or sticky bit).
    pub(crate) fn bits(self) -> u32 {
        match self {
            NewMode::Masked(bits) | NewMode::Exact(bits) => bits & 0o777,
        }
    }
}

/// The part of a name's metadata the crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) kind: Kind,
    pub(crate) size: u64,
    /// Modification time: seconds and nanoseconds since the epoch.
    pub(crate) modified: (i64, u32),
    /// Change time (local stores; object stores repeat the modification time).
    pub(crate) changed: (i64, u32),
    /// `(device, inode)` where the store has identities.
    pub(crate) identity: Option<(u64, u64)>,
    /// Permission bits (local stores).
    pub(crate) mode: u32,
}

/// One entry of a directory.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) kind: Kind,
}

/// A place in a store: what resolution found, ready for the store to act on.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Local(local::Node),
    #[cfg(feature = "s3")]
    Object(object::Node),
}

impl Node {
    /// The directory handle the place holds open, as a number that tells handles apart (local
    /// stores), so that work queued over many places can bound the handles it keeps.
    #[cfg_attr(not(feature = "s3"), expect(clippy::unnecessary_wraps, reason = "object places hold no handle"))]
    pub(crate) fn handle(&self) -> Option<usize> {
        match self {
            Node::Local(node) => Some(Arc::as_ptr(&node.parent) as usize),
            #[cfg(feature = "s3")]
            Node::Object(_) => None,
        }
    }
}

/// Where a path led: the effective mount (the innermost mount whose directory holds the
/// place), the canonical path inside it, and the place itself.
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub(crate) mount: usize,
    pub(crate) rel: Vec<String>,
    pub(crate) node: Node,
}

/// What a directory found during resolution is, for the caller resolving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nesting {
    /// Part of the mount being walked.
    Same,
    /// The root of another mount the caller may see: its rights and visibility apply from here.
    Enters(usize),
    /// The root of a mount the caller may not see: a name that does not exist.
    Hidden,
}

/// What resolution needs of the mount table, bound to one caller: the stores, and whether a
/// directory is another mount's root. The registry implements it; storage never sees the
/// registry itself, rights or callers.
pub(crate) trait MountTable {
    /// The store of mount `mount`.
    fn store(&self, mount: usize) -> &Backend;
    /// What the directory with `identity`, reached inside mount `from`, is.
    fn nesting(&self, from: usize, identity: (u64, u64)) -> Nesting;
    /// True when some directory identity belongs to a mount root (a cheap pre-check for walks).
    fn any_root_inode(&self, inode: u64) -> bool;
    /// True when the table holds one mount: nothing can nest, and resolution may skip the check.
    fn single(&self) -> bool;
    /// True when a name rule hides the place at `rel` in mount `mount` from the caller. The
    /// path as written is judged before resolution; resolution asks again once a link has
    /// made the canonical path differ from it, before any answer could tell what is inside.
    fn hides(&self, mount: usize, rel: &[String]) -> bool;
}

/// Asked before resolution creates a missing directory: the effective mount and the
/// directory's canonical path in it.
pub(crate) type CreateGate<'a> = dyn Fn(usize, &[String]) -> Result<(), Error> + 'a;

/// How to resolve the last component and missing directories.
pub(crate) struct Resolve<'a> {
    /// Follow a symbolic link in the last component (reads do; writes and deletes do not).
    pub(crate) follow_final: bool,
    /// Create missing intermediate directories, after asking this gate.
    pub(crate) create_parents: Option<&'a CreateGate<'a>>,
    /// Told of each directory resolution made (the effective mount and the directory's
    /// canonical path in it), once it exists: the change feed's record of it.
    pub(crate) made: Option<&'a Made<'a>>,
}

/// Told of a directory resolution made on the way (see `Resolve::made`).
pub(crate) type Made<'a> = dyn Fn(usize, &[String]) + 'a;

/// When a put may replace what is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PutWhen {
    /// Only if nothing is there (atomic create-if-absent).
    Absent,
    /// Whatever is there.
    Any,
    /// Only if the current version is this token. Local stores check it under the directory
    /// lock before the put; object stores make the put conditional.
    Version(String),
}

/// A file opened for reading.
pub(crate) struct Opened<'s> {
    pub(crate) reader: Reader<'s>,
    pub(crate) size: u64,
    /// The version token the store gives without reading the content (an object's `ETag`);
    /// local stores hash the content instead.
    pub(crate) token: Option<String>,
    /// The first bytes, when the store fetched them with the open (one GET): a window from the
    /// first line is cut from them without another request.
    pub(crate) first: Option<Vec<u8>>,
}

/// A reader over an opened file.
pub(crate) enum Reader<'s> {
    Local(local::OpenFile),
    #[cfg(feature = "s3")]
    Object(object::ObjectReader<'s>),
    /// Nothing more to read (the bytes came with the open).
    #[cfg_attr(not(feature = "s3"), expect(dead_code, reason = "only object stores fetch bytes with the open"))]
    Empty(std::marker::PhantomData<&'s ()>),
}

impl Read for Reader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        match self {
            Reader::Local(file) => file.read(buffer),
            #[cfg(feature = "s3")]
            Reader::Object(reader) => reader.read(buffer),
            Reader::Empty(_) => Ok(0),
        }
    }
}

impl Seek for Reader<'_> {
    fn seek(&mut self, position: io::SeekFrom) -> io::Result<u64> {
        match self {
            Reader::Local(file) => file.seek(position),
            #[cfg(feature = "s3")]
            Reader::Object(reader) => reader.seek(position),
            Reader::Empty(_) => Ok(0),
        }
    }
}

/// Held while a read-modify-write of a directory's entries runs.
pub(crate) enum Lock {
    Local(#[expect(dead_code, reason = "held until dropped, which releases the lock")] local::DirectoryLock),
    /// Object stores have no locks of their own: the process's ([`object::ObjectLock`]).
    #[cfg(feature = "s3")]
    Object(#[expect(dead_code, reason = "held until dropped, which releases the lock")] object::ObjectLock),
}

/// Where a lock stands in the one order every caller of [`lock_pair`] takes two locks in:
/// a local directory by its identity, an object store's "directory" by its name, local first.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum LockOrder {
    Local((u64, u64)),
    #[cfg(feature = "s3")]
    Object(String),
}

fn lock_order(backend: &Backend, node: &Node) -> Option<LockOrder> {
    match (backend, node) {
        #[cfg(feature = "s3")]
        (Backend::Object(root), Node::Object(node)) => Some(LockOrder::Object(root.lock_name(&node.rel))),
        _ => directory_identity(node).map(LockOrder::Local),
    }
}

/// The identity (device, inode) of the directory `node` lies in, where the store has one
/// (local stores).
pub(crate) fn directory_identity(node: &Node) -> Option<(u64, u64)> {
    match node {
        Node::Local(node) => local::directory_identity(node),
        #[cfg(feature = "s3")]
        Node::Object(_) => None,
    }
}

/// Locks the directories of a move's two places, a shared directory once, in one order for
/// every caller ([`LockOrder`]), so that two moves in opposite directions never each hold one
/// lock and wait for the other.
pub(crate) fn lock_pair(
    (first, first_node, first_path): (&Backend, &Node, &VirtualPath),
    (second, second_node, second_path): (&Backend, &Node, &VirtualPath),
) -> Result<(Lock, Option<Lock>), Error> {
    #[cfg(feature = "s3")]
    if let ((Backend::Object(one), Node::Object(from)), (Backend::Object(other), Node::Object(to))) =
        ((first, first_node), (second, second_node))
    {
        // Both places' claims at once: the names above one may be the other's.
        let mut claims = one.lock_claims(&from.rel);
        claims.extend(other.lock_claims(&to.rel));
        return Ok((Lock::Object(object::ObjectLock::take(claims)?), None));
    }
    match (lock_order(first, first_node), lock_order(second, second_node)) {
        (Some(one), Some(other)) if one == other => Ok((first.lock(first_node, first_path)?, None)),
        (Some(one), Some(other)) if other < one => {
            let later = second.lock(second_node, second_path)?;
            Ok((first.lock(first_node, first_path)?, Some(later)))
        }
        _ => {
            let earlier = first.lock(first_node, first_path)?;
            Ok((earlier, Some(second.lock(second_node, second_path)?)))
        }
    }
}

/// One entry a walk visits.
pub(crate) struct Visit<'a> {
    pub(crate) path: &'a VirtualPath,
    /// The path relative to the walk's start, `/`-joined.
    pub(crate) relative: &'a str,
    pub(crate) name: &'a str,
    pub(crate) kind: Kind,
    pub(crate) depth: usize,
    /// The entry itself, to open it or read what it holds.
    pub(crate) node: &'a Node,
}

pub(crate) use local::Start;

/// A staged write: a file's next content being built, at offsets, until it is committed in
/// its place at once or dropped (see [`Store::stage`]). Locally a temporary file beside the
/// target; in object storage a buffer, put whole (with the precondition) at the commit.
#[derive(Debug)]
pub(crate) enum Staged {
    Local(local::Staged),
    #[cfg(feature = "s3")]
    Object(object::Staged),
}

impl Staged {
    /// The staged content's length.
    pub(crate) fn len(&self) -> u64 {
        match self {
            Staged::Local(staged) => staged.len(),
            #[cfg(feature = "s3")]
            Staged::Object(staged) => staged.len(),
        }
    }

    /// Writes `bytes` at `offset` (a gap past the end reads as zeros).
    pub(crate) fn write_at(&mut self, offset: u64, bytes: &[u8], path: &VirtualPath) -> Result<(), Error> {
        match self {
            Staged::Local(staged) => staged.write_at(offset, bytes, path),
            #[cfg(feature = "s3")]
            Staged::Object(staged) => staged.write_at(offset, bytes, path),
        }
    }

    /// Flushes what is staged so far to stable storage (an object's stage is held in memory
    /// until its put: nothing to do).
    pub(crate) fn sync(&self, path: &VirtualPath) -> Result<(), Error> {
        match self {
            Staged::Local(staged) => staged.sync(path),
            #[cfg(feature = "s3")]
            Staged::Object(_) => Ok(()),
        }
    }

    /// Cuts or extends (with zeros) the content to `len` bytes.
    pub(crate) fn set_len(&mut self, len: u64, path: &VirtualPath) -> Result<(), Error> {
        match self {
            Staged::Local(staged) => staged.set_len(len, path),
            #[cfg(feature = "s3")]
            Staged::Object(staged) => staged.set_len(len, path),
        }
    }

    /// At most `len` bytes of the staged content from `offset`.
    pub(crate) fn read_at(&self, offset: u64, len: usize, path: &VirtualPath) -> Result<Vec<u8>, Error> {
        let len = len.min(usize::try_from(self.len().saturating_sub(offset)).unwrap_or(usize::MAX));
        match self {
            Staged::Local(staged) => staged.read_at(offset, len, path),
            #[cfg(feature = "s3")]
            Staged::Object(staged) => Ok(staged.read_at(offset, len)),
        }
    }
}

/// The judgement of a file a removal is about to remove: its path and its current version
/// (if it has one); an error refuses it (read before delete).
pub(crate) type Judge<'a> = dyn Fn(&VirtualPath, Option<&str>) -> Result<(), Error> + 'a;

/// What a removal may remove.
pub(crate) struct Removal<'a> {
    /// A non-empty directory is removed with everything in it.
    pub(crate) recursive: bool,
    /// True for a directory that is a nested mount's root: a recursive removal stops there,
    /// refused.
    pub(crate) holds_mount: &'a dyn Fn((u64, u64)) -> bool,
    /// Read before delete, for the files of a recursive removal. Each regular file is judged
    /// just before it is removed (a local store under its directory's lock, which every write
    /// takes), and the first refused ends the removal with the judge's error. `None` here:
    /// files are removed unjudged.
    pub(crate) judge: Option<&'a Judge<'a>>,
    /// The before image of a recursive removal, taken as it goes (a local store): each file
    /// linked into the keeper under its directory's lock just before it is removed, so the
    /// image is exactly what the removal took.
    pub(crate) keep: Option<&'a TreeKeeping<'a>>,
    /// Told the path of each file (or link) a recursive removal has removed without `keep`
    /// taking it, and of each directory below the top once it is removed, as it goes: a
    /// removal that stops part way must say which of its files and directories are gone
    /// (their images are then all that is left of them).
    pub(crate) took: Option<&'a dyn Fn(&VirtualPath)>,
}

/// A recursive removal's image being taken (see [`Removal::keep`]).
pub(crate) struct TreeKeeping<'a> {
    pub(crate) keeper: &'a crate::changes::Keeper,
    pub(crate) call: &'a crate::changes::CallId,
    /// The tree's virtual path: the items are relative to it.
    pub(crate) top: &'a VirtualPath,
    /// The items so far, parents before children.
    pub(crate) items: std::cell::RefCell<Vec<crate::changes::TreeItem>>,
    /// Why the image cannot be whole (a link, a special file, a file that could not be
    /// linked or is above `cap`), once one is met.
    pub(crate) refused: std::cell::Cell<Option<&'static str>>,
    pub(crate) cap: u64,
    /// Told of each file before it is kept, and of each directory below the top before its
    /// removal begins (`Context::grows`); false (its record cannot be kept) stops the removal
    /// there.
    pub(crate) grows: Box<dyn Fn(&VirtualPath) -> bool + 'a>,
}

impl TreeKeeping<'_> {
    /// `path` relative to the tree's top.
    pub(crate) fn relative(&self, path: &VirtualPath) -> String {
        path.as_str().get(self.top.as_str().len() + 1..).unwrap_or_default().to_owned()
    }
}

impl Removal<'_> {
    /// Removes one entry, never a tree, and nothing but what is named.
    pub(crate) fn single() -> Removal<'static> {
        Removal { recursive: false, holds_mount: &|_| false, judge: None, keep: None, took: None }
    }
}

/// What a visitor tells the walk.
pub(crate) enum Flow {
    Continue,
    SkipDirectory,
    Stop,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Walked {
    /// False when the visitor stopped it or the store's listing bound cut it.
    pub(crate) completed: bool,
    /// Entries that could not be read for another reason than having vanished.
    pub(crate) unreadable: usize,
    /// Directories the walk's depth bound kept it out of: seen, not entered.
    pub(crate) deeper: usize,
}

/// The context of a walk: where it starts, how deep it goes, and what it may look at.
pub(crate) struct WalkFrom<'a> {
    pub(crate) table: &'a dyn MountTable,
    pub(crate) mount: usize,
    pub(crate) path: &'a VirtualPath,
    pub(crate) max_depth: usize,
    /// Most entries a store that lists whole trees at once fetches (object stores).
    #[cfg_attr(not(feature = "s3"), expect(dead_code, reason = "only object stores list whole trees"))]
    pub(crate) listing_bound: usize,
    pub(crate) deadline: &'a Deadline,
}

/// The primitives every store offers the operations. A store implements them over its own
/// places ([`Store::Node`]); [`Backend`] dispatches an operation's call to the store of the
/// mount it concerns. Errors name virtual paths only.
pub(crate) trait Store {
    /// A place in the store, as resolution or a walk found it.
    type Node;

    /// A file opened for appending (a store that cannot append has none: `Infallible`).
    type Appender;

    /// A file opened in one step from the mount's root (a store without that step has none:
    /// `Infallible`).
    type Direct;

    /// What the store can do.
    fn capabilities(&self) -> Capabilities;

    /// Opens a regular file for reading in one step from the mount's root, when the store can
    /// do that faster than locating the place and opening it, and only where no link and no
    /// nested mount lies on the way (so the path as written is the canonical one the gate
    /// judged); `None` means "locate it". `components` are the path's beneath the mount.
    fn open_direct(
        &self,
        table: &dyn MountTable,
        components: &[&str],
        path: &VirtualPath,
    ) -> Option<Result<(Self::Direct, Stat), Error>>;

    /// A regular file's metadata and version in one step from the mount's root, on the terms
    /// of [`Store::open_direct`]; `None` means "locate it".
    fn info_direct(
        &self,
        table: &dyn MountTable,
        components: &[&str],
        path: &VirtualPath,
    ) -> Option<Result<(Stat, String), Error>>;

    /// What the place is, as far as resolution or a listing saw it (no I/O where it can), or
    /// `None` when it does not exist.
    fn stat(&self, node: &Self::Node, path: &VirtualPath) -> Result<Option<Stat>, Error>;

    /// What the place is now (under a lock: what a read-modify-write must check).
    fn restat(&self, node: &Self::Node, path: &VirtualPath) -> Result<Option<Stat>, Error>;

    /// Opens a regular file for reading; `first` asks for that many bytes with the open, when
    /// the store saves a request by it.
    fn open_file(&self, node: &Self::Node, first: Option<u64>, path: &VirtualPath) -> Result<Opened<'_>, Error>;

    /// The whole content of a regular file, refused above `cap` bytes before it is read, with
    /// its version token and metadata.
    fn read_all(
        &self,
        node: &Self::Node,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<(Vec<u8>, Option<String>, Stat), Error>;

    /// The version token of a regular file.
    fn version(&self, node: &Self::Node, path: &VirtualPath) -> Result<Option<String>, Error>;

    /// Refuses with the current version unless the file's version is `expected`.
    fn check_version(&self, node: &Self::Node, expected: &str, path: &VirtualPath) -> Result<(), Error>;

    /// A directory's entries, unsorted, without what the caller may not see.
    /// The entries of a directory; a store that reads them one by one reads at most
    /// `at_most` (those the directory gives first).
    fn list(
        &self,
        table: &dyn MountTable,
        mount: usize,
        node: &Self::Node,
        path: &VirtualPath,
        at_most: usize,
    ) -> Result<Vec<Entry>, Error>;

    /// Walks the tree below a directory depth-first, each directory's entries in name order.
    fn walk(
        &self,
        from: &WalkFrom<'_>,
        node: &Self::Node,
        visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    ) -> Result<Walked, Error>;

    /// The file `name` in the directory `node`, when it is a regular file of at most `cap`
    /// bytes; `None` otherwise.
    fn read_child(&self, node: &Self::Node, name: &str, cap: u64, path: &VirtualPath) -> Option<Vec<u8>>;

    /// Writes `bytes` at the place atomically (never through a link), when `when` allows;
    /// `mode` gives the permission bits of a new file. Returns the new version token.
    fn put(
        &self,
        node: &Self::Node,
        bytes: &[u8],
        when: &PutWhen,
        mode: NewMode,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error>;

    /// Begins a staged write of the place: its next content, built from empty or from what
    /// it holds now, at most `cap` bytes, with the permission bits of `mode` for a new file.
    /// Nothing changes at the place until [`Store::commit`]; a stage dropped uncommitted leaves
    /// nothing behind.
    fn stage(
        &self,
        node: &Self::Node,
        start: Start,
        mode: NewMode,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<Staged, Error>;

    /// Puts a stage begun on `node` in its place, atomically, when `when` allows; returns the
    /// new version token.
    fn commit(
        &self,
        node: &Self::Node,
        staged: Staged,
        when: &PutWhen,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error>;

    /// Creates a directory; `false` when it already existed.
    fn make_directory(&self, node: &Self::Node, path: &VirtualPath) -> Result<bool, Error>;

    /// Creates a directory with exactly the bits `mode` (whatever the umask), given through a
    /// handle opened on it right after it was made, under the caller's lock of its parent (so
    /// no other call's directory can be there instead).
    fn make_directory_exact(&self, node: &Self::Node, mode: u32, path: &VirtualPath) -> Result<MadeDirectory, Error>;

    /// Gives the directory at the place the bits `to`, when it is still the one `made`
    /// ([`MadeDirectory::Made`]) with the mode it was made with (never through a link);
    /// `false` otherwise, or when the bits could not be given. With `made` `None` (a store
    /// with no directories of its own made it: `Made(None)`), the store settles it as it
    /// stands now that what goes in it is back (an object store's marker goes when the
    /// directory holds something).
    fn finish_directory(
        &self,
        node: &Self::Node,
        made: Option<&MadeAs>,
        to: u32,
        path: &VirtualPath,
    ) -> Result<bool, Error>;

    /// Removes a file or a link (never its target), an empty directory, or with
    /// `removal.recursive` a whole tree, as [`Removal`] says.
    fn remove(&self, node: &Self::Node, kind: Kind, removal: &Removal<'_>, path: &VirtualPath) -> Result<(), Error>;

    /// Holds a lock for a read-modify-write of the place's directory.
    fn lock(&self, node: &Self::Node, path: &VirtualPath) -> Result<Lock, Error>;

    /// Opens (creating if needed) a file for appending, never through a link.
    fn open_append(&self, node: &Self::Node, path: &VirtualPath) -> Result<Self::Appender, Error>;

    /// Moves `from` to `to` within this store, or to `to` in `target`, another mount of the
    /// same kind: `None` when this store cannot move there in one step (the caller copies and
    /// removes), else what the move gave. Never through a link; a directory at `to` is never
    /// replaced, and anything else only with `replace`.
    fn rename(
        &self,
        from: &Self::Node,
        to: &Self::Node,
        target: &Self,
        replace: bool,
        path: &VirtualPath,
    ) -> Option<Result<(), Error>>;
}

/// A file opened for appending, of whichever store: what an append-only log writes to.
#[derive(Debug)]
pub(crate) enum Appender {
    Local(local::NamedFile),
}

impl Appender {
    /// Appends `bytes` whole, hands them to the system, and returns where they end in the
    /// file: an `O_APPEND` write moves the descriptor's offset to its own end, wherever other
    /// writers' appends put the file's end before it.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        match self {
            Appender::Local(named) => {
                io::Write::write_all(&mut named.file, bytes)?;
                io::Write::flush(&mut named.file)?;
                io::Seek::stream_position(&mut named.file)
            }
        }
    }

    /// Flushes what was appended to stable storage.
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        match self {
            Appender::Local(named) => named.file.sync_data(),
        }
    }

    /// Flushes what was appended to stable storage, and with it the directories `held`
    /// (`local::sync_with_held`).
    pub(crate) fn sync_data_with(&self, held: Vec<crate::storage::local::HeldDirectory>) -> io::Result<()> {
        match self {
            Appender::Local(named) => local::sync_with_held(&named.file, held),
        }
    }

    /// The file's length now, every writer's appends included.
    pub(crate) fn len(&self) -> io::Result<u64> {
        match self {
            Appender::Local(named) => named.file.len(),
        }
    }

    /// Keeps room allocated past the file's end (`local::OpenFile::reserve`).
    pub(crate) fn reserve(&self, ahead: u64, reserved_to: &mut u64) -> io::Result<()> {
        match self {
            Appender::Local(named) => named.file.reserve(ahead, reserved_to),
        }
    }

    /// Takes the file's advisory lock (`local::OpenFile::lock`).
    pub(crate) fn lock(&self, exclusive: bool) -> io::Result<bool> {
        match self {
            Appender::Local(named) => named.file.lock(exclusive),
        }
    }

    /// Takes the file's advisory lock exclusively, waiting for it.
    pub(crate) fn lock_exclusive(&self) -> io::Result<()> {
        match self {
            Appender::Local(named) => named.file.lock_exclusive(),
        }
    }

    /// Lets go of the file's advisory lock.
    pub(crate) fn unlock(&self) -> io::Result<()> {
        match self {
            Appender::Local(named) => named.file.unlock(),
        }
    }

    /// True when the file no longer has a name (`local::OpenFile::unnamed`).
    pub(crate) fn unnamed(&self) -> io::Result<bool> {
        match self {
            Appender::Local(named) => named.unnamed(),
        }
    }
}

/// A mount's storage: a local directory, or (feature `s3`) an object store. Every operation
/// reaches storage through these methods, which dispatch to the store's own.
pub(crate) enum Backend {
    Local(local::LocalRoot),
    #[cfg(feature = "s3")]
    Object(object::ObjectRoot),
}

/// A node of the wrong store for this backend: resolution always returns a node of the store
/// it ran on, so this is a bug, answered as a change during the call.
#[cold]
#[cfg(feature = "s3")]
fn foreign(path: &VirtualPath) -> Error {
    tracing::error!(target: "vfs::storage", %path, "a node reached a store it does not belong to; this is a bug");
    Error::changed_during_call(path)
}

/// Runs `$body` with `$store` bound to the backend's store and `$node` to the node's own type.
macro_rules! with_node {
    ($backend:expr, $node:expr, $path:expr, |$store:ident, $inner:ident| $body:expr) => {
        match ($backend, $node) {
            (Backend::Local($store), Node::Local($inner)) => $body,
            #[cfg(feature = "s3")]
            (Backend::Object($store), Node::Object($inner)) => $body,
            #[cfg(feature = "s3")]
            _ => Err(foreign($path)),
        }
    };
}

impl Backend {
    /// Opens the storage a spec's location names: an object store, or a local directory.
    pub(crate) fn open(spec: &MountSpec, sync: bool, authority: crate::AmbientAuthority) -> Result<Self, ConfigError> {
        // A location that is not valid is only ever an object URL (`MountSpec::new`): the
        // object store refuses it with its rule.
        if !matches!(spec.location(), Some(crate::spec::Location::Local(_))) {
            #[cfg(feature = "s3")]
            return object::ObjectRoot::open(spec).map(Backend::Object);
            #[cfg(not(feature = "s3"))]
            return Err(ConfigError::Store {
                root: spec.root().as_str().to_owned(),
                physical: spec.physical().to_owned(),
                reason: "this build has no object-storage support (cargo feature `s3`)".to_owned(),
            });
        }
        local::LocalRoot::open(spec, sync, authority).map(Backend::Local)
    }

    /// What this store can do.
    pub(crate) fn capabilities(&self) -> Capabilities {
        match self {
            Backend::Local(store) => store.capabilities(),
            #[cfg(feature = "s3")]
            Backend::Object(store) => store.capabilities(),
        }
    }

    /// Where this store's tree lies among every store of the process, as path segments: a
    /// local root's canonical directory, an object mount's scheme, bucket and prefix. Claims
    /// (`registry::claims`) compare places by it, so two mounts of one tree, in one registry
    /// or in two (two crews of a daemon), exclude each other's moves and deletes. Never shown.
    pub(crate) fn tree_base(&self) -> Vec<String> {
        match self {
            Backend::Local(root) => root.tree_base(),
            #[cfg(feature = "s3")]
            Backend::Object(root) => root.tree_base(),
        }
    }

    /// Every physical spelling the scrub must know.
    pub(crate) fn spellings(&self) -> &[String] {
        match self {
            Backend::Local(root) => root.spellings(),
            #[cfg(feature = "s3")]
            Backend::Object(root) => root.spellings(),
        }
    }

    /// Lets a call defer this store's syncs (`local::defer_syncs`), if it is a local one.
    pub(crate) fn allow_deferred_syncs(&mut self) {
        match self {
            Backend::Local(root) => root.allow_deferred_syncs(),
            #[cfg(feature = "s3")]
            Backend::Object(_) => {}
        }
    }

    /// The local root, for relations between local mounts (nesting, pins); `None` for other
    /// stores.
    #[cfg_attr(not(feature = "s3"), expect(clippy::unnecessary_wraps, reason = "object stores are not local"))]
    pub(crate) fn local(&self) -> Option<&local::LocalRoot> {
        match self {
            Backend::Local(root) => Some(root),
            #[cfg(feature = "s3")]
            Backend::Object(_) => None,
        }
    }

    /// Resolves `components` (relative to mount `start`, whose store this is).
    pub(crate) fn locate(
        &self,
        table: &dyn MountTable,
        start: usize,
        components: &[&str],
        options: &Resolve<'_>,
        path: &VirtualPath,
    ) -> Result<Located, Error> {
        match self {
            Backend::Local(_) => local::resolve(table, start, components, options, path),
            // vfs's own names are not there for anyone who names them, as in a local store.
            #[cfg(feature = "s3")]
            Backend::Object(_) if components.iter().any(|name| object::reserved(name)) => Err(Error::not_found(path)),
            #[cfg(feature = "s3")]
            Backend::Object(_) => {
                // A key makes no directory on the way, so the gate a local store asks for each
                // directory it makes is asked here for each name above the key that the git
                // guard watches (`objects` beside a `HEAD`, ...), made or not: what a write
                // below it would make is the same look-alike.
                if let Some(gate) = options.create_parents {
                    let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
                    for end in 1..rel.len() {
                        if crate::ops::is_git_marker(&rel[end - 1]) {
                            gate(start, &rel[..end])?;
                        }
                    }
                }
                Ok(object::locate(start, components))
            }
        }
    }

    /// Opens a file for reading in one step from the mount's root ([`Store::open_direct`]);
    /// `None` means "locate it and open the place".
    pub(crate) fn open_fast(
        &self,
        table: &dyn MountTable,
        components: &[&str],
        path: &VirtualPath,
    ) -> Option<Result<(local::OpenFile, Stat), Error>> {
        match self {
            Backend::Local(root) => root.open_direct(table, components, path),
            #[cfg(feature = "s3")]
            Backend::Object(root) => {
                root.open_direct(table, components, path).map(|opened| opened.map(|(never, _)| match never {}))
            }
        }
    }

    /// A file's metadata and version in one step from the mount's root
    /// ([`Store::info_direct`]); `None` means "locate it".
    pub(crate) fn info_fast(
        &self,
        table: &dyn MountTable,
        components: &[&str],
        path: &VirtualPath,
    ) -> Option<Result<(Stat, String), Error>> {
        match self {
            Backend::Local(root) => root.info_direct(table, components, path),
            #[cfg(feature = "s3")]
            Backend::Object(root) => root.info_direct(table, components, path),
        }
    }

    /// What the place is, as resolution saw it (no I/O for local stores), or `None` when it
    /// does not exist.
    pub(crate) fn stat(&self, node: &Node, path: &VirtualPath) -> Result<Option<Stat>, Error> {
        with_node!(self, node, path, |store, node| store.stat(node, path))
    }

    /// What the place is now (under a lock: what a read-modify-write must check).
    pub(crate) fn restat(&self, node: &Node, path: &VirtualPath) -> Result<Option<Stat>, Error> {
        with_node!(self, node, path, |store, node| store.restat(node, path))
    }

    /// Opens a regular file for reading; `first` asks for that many bytes with the open, when
    /// the store saves a request by it.
    pub(crate) fn open_file(&self, node: &Node, first: Option<u64>, path: &VirtualPath) -> Result<Opened<'_>, Error> {
        with_node!(self, node, path, |store, node| store.open_file(node, first, path))
    }

    /// The whole content of a regular file, refused above `cap` bytes before it is read, with
    /// its version token.
    pub(crate) fn read_all(
        &self,
        node: &Node,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<(Vec<u8>, Option<String>, Stat), Error> {
        with_node!(self, node, path, |store, node| store.read_all(node, cap, path))
    }

    /// The version token of a regular file.
    pub(crate) fn version(&self, node: &Node, path: &VirtualPath) -> Result<Option<String>, Error> {
        with_node!(self, node, path, |store, node| store.version(node, path))
    }

    /// The version token of the regular file at `node`'s name now, whatever resolution saw
    /// there (a move's destination after the move: resolution saw nothing, or another file).
    pub(crate) fn version_now(&self, node: &Node, path: &VirtualPath) -> Result<Option<String>, Error> {
        match (self, node) {
            (Backend::Local(store), Node::Local(node)) => {
                let now = local::Node {
                    parent: node.parent.clone(),
                    name: node.name.clone(),
                    seen: local::Seen::Listed(Kind::File),
                };
                Store::version(store, &now, path)
            }
            #[cfg(feature = "s3")]
            _ => self.version(node, path),
        }
    }

    /// `node`'s place as a directory found there now (a move's destination after the move:
    /// resolution saw nothing there, or another file).
    pub(crate) fn directory_now(node: &Node) -> Node {
        match node {
            Node::Local(node) => Node::Local(local::Node {
                parent: node.parent.clone(),
                name: node.name.clone(),
                seen: local::Seen::Listed(Kind::Directory),
            }),
            #[cfg(feature = "s3")]
            other => other.clone(),
        }
    }

    /// Refuses with the current version unless the file's version is `expected`.
    pub(crate) fn check_version(&self, node: &Node, expected: &str, path: &VirtualPath) -> Result<(), Error> {
        with_node!(self, node, path, |store, node| store.check_version(node, expected, path))
    }

    /// The file `name` in the directory `node`, when it is a regular file of at most `cap`
    /// bytes (a walk's `.gitignore`); `None` otherwise.
    pub(crate) fn read_child(&self, node: &Node, name: &str, cap: u64, path: &VirtualPath) -> Option<Vec<u8>> {
        match (self, node) {
            (Backend::Local(store), Node::Local(node)) => store.read_child(node, name, cap, path),
            #[cfg(feature = "s3")]
            (Backend::Object(store), Node::Object(node)) => store.read_child(node, name, cap, path),
            #[cfg(feature = "s3")]
            _ => None,
        }
    }

    /// A directory's entries, unsorted, without what the caller may not see.
    pub(crate) fn list(
        &self,
        table: &dyn MountTable,
        mount: usize,
        node: &Node,
        path: &VirtualPath,
        at_most: usize,
    ) -> Result<Vec<Entry>, Error> {
        with_node!(self, node, path, |store, node| store.list(table, mount, node, path, at_most))
    }

    /// Walks the tree below a directory depth-first, each directory's entries in name order,
    /// calling `visit` for each entry (see `Visit`).
    pub(crate) fn walk(
        &self,
        from: &WalkFrom<'_>,
        node: &Node,
        visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    ) -> Result<Walked, Error> {
        with_node!(self, node, from.path, |store, node| store.walk(from, node, visit))
    }

    /// Writes `bytes` at the place atomically (never through a link), when `when` allows.
    /// `mode` gives the permission bits of a new file. Returns the new version token.
    pub(crate) fn put(
        &self,
        place: &Place<Write>,
        bytes: &[u8],
        when: &PutWhen,
        mode: NewMode,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error> {
        with_node!(self, &place.node, path, |store, node| store.put(node, bytes, when, mode, path))
    }

    /// Begins a staged write of the place (see [`Store::stage`]).
    pub(crate) fn stage(
        &self,
        place: &Place<Write>,
        start: Start,
        mode: NewMode,
        cap: u64,
        path: &VirtualPath,
    ) -> Result<Staged, Error> {
        with_node!(self, &place.node, path, |store, node| store.stage(node, start, mode, cap, path))
    }

    /// Commits a stage begun on the place (see [`Store::commit`]).
    pub(crate) fn commit(
        &self,
        place: &Place<Write>,
        staged: Staged,
        when: &PutWhen,
        path: &VirtualPath,
    ) -> Result<Option<String>, Error> {
        with_node!(self, &place.node, path, |store, node| store.commit(node, staged, when, path))
    }

    /// Creates a directory; `false` when it already existed.
    pub(crate) fn make_directory(&self, place: &Place<Write>, path: &VirtualPath) -> Result<bool, Error> {
        with_node!(self, &place.node, path, |store, node| store.make_directory(node, path))
    }

    /// Creates a directory with exactly the bits `mode` ([`Store::make_directory_exact`]).
    pub(crate) fn make_directory_exact(
        &self,
        place: &Place<Write>,
        mode: u32,
        path: &VirtualPath,
    ) -> Result<MadeDirectory, Error> {
        with_node!(self, &place.node, path, |store, node| store.make_directory_exact(node, mode, path))
    }

    /// Gives the directory `made` the bits `to` while it is at the place with the mode it was
    /// made with ([`Store::finish_directory`]).
    pub(crate) fn finish_directory(
        &self,
        place: &Place<Write>,
        made: Option<&MadeAs>,
        to: u32,
        path: &VirtualPath,
    ) -> Result<bool, Error> {
        with_node!(self, &place.node, path, |store, node| store.finish_directory(node, made, to, path))
    }

    /// Removes a file or a link (never its target), an empty directory, or with
    /// `removal.recursive` a whole tree, as [`Removal`] says.
    pub(crate) fn remove(
        &self,
        place: &Place<Delete>,
        kind: Kind,
        removal: &Removal<'_>,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        with_node!(self, &place.node, path, |store, node| store.remove(node, kind, removal, path))
    }

    /// Holds a lock for a read-modify-write of the place's directory.
    pub(crate) fn lock(&self, node: &Node, path: &VirtualPath) -> Result<Lock, Error> {
        with_node!(self, node, path, |store, node| store.lock(node, path))
    }

    /// Opens (creating if needed) a file for appending, never through a link.
    pub(crate) fn open_append(&self, place: &Place<Write>, path: &VirtualPath) -> Result<Appender, Error> {
        match (self, &place.node) {
            (Backend::Local(store), Node::Local(node)) => store.open_append(node, path).map(Appender::Local),
            #[cfg(feature = "s3")]
            (Backend::Object(store), Node::Object(node)) => store.open_append(node, path).map(|never| match never {}),
            #[cfg(feature = "s3")]
            _ => Err(foreign(path)),
        }
    }
}

/// Copies the file at `from` (in `source`) to `to` (in `target`), as a move between stores or
/// file systems does: streamed between two local places (within the call's time), else read
/// whole and put; refused above `cap` either way (a sparse file of gigabytes would be written
/// out whole).
#[expect(clippy::too_many_arguments, reason = "two places, each with its store and path, and the put's terms")]
pub(crate) fn copy_file(
    source: &Backend,
    from: &Node,
    source_path: &VirtualPath,
    target: &Backend,
    to: &Place<Write>,
    target_path: &VirtualPath,
    when: &PutWhen,
    cap: u64,
) -> Result<(), Error> {
    match (source, from, target, &to.node) {
        (Backend::Local(_), Node::Local(from), Backend::Local(target), Node::Local(to)) => {
            let (mut file, stat) = local::open_local(from, source_path)?;
            if stat.size > cap {
                return Err(Error::too_large(
                    Some(source_path),
                    crate::text::agent_text![format!(
                        "a move to another file system copies it, and it has {} bytes, more than the {cap}-byte write cap",
                        stat.size
                    )],
                ));
            }
            let replace = !matches!(when, PutWhen::Absent);
            // A move keeps the file's owner, as the rename it stands for would.
            let owner = file.owner();
            target.put_from(to, &mut file, replace, NewMode::Masked(stat.mode), owner, cap, target_path).map(|_| ())
        }
        #[cfg(feature = "s3")]
        _ => {
            let (bytes, _, stat) = source.read_all(from, cap, source_path)?;
            target.put(to, &bytes, when, NewMode::Masked(stat.mode), target_path).map(|_| ())
        }
    }
}

/// Moves `from` (in `source`) to `to` (in `target`) in one step when both places are in one
/// store that can (two local mounts on one file system, two mounts of one bucket); `None` when
/// they are not, and the operation copies, then deletes.
pub(crate) fn rename(
    source: &Backend,
    from: &Place<Delete>,
    target: &Backend,
    to: &Place<Write>,
    replace: bool,
    path: &VirtualPath,
) -> Option<Result<(), Error>> {
    match (source, &from.node, target, &to.node) {
        (Backend::Local(source), Node::Local(from), Backend::Local(target), Node::Local(to)) => {
            source.rename(from, to, target, replace, path)
        }
        #[cfg(feature = "s3")]
        (Backend::Object(source), Node::Object(from), Backend::Object(target), Node::Object(to)) => {
            source.rename(from, to, target, replace, path)
        }
        #[cfg(feature = "s3")]
        _ => None,
    }
}
