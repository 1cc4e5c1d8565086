//! The change feed: one [`Change`] for every change an operation commits, handed to the
//! observers the registry was built with, while the change is still held under its lock.
//!
//! What changed used to be known only to the operation that made it, and to the audit line of
//! its call. Three consumers need it as it happens: the operator's audit, a FUSE view whose
//! kernel caches must be told (the sandbox issue), and a journal that keeps the before image of
//! every change so it can be undone (the journal issue). Each would otherwise have to be called
//! by hand from every operation. Here the operations emit, and consumers observe.
//!
//! The contract an observer can rely on:
//! - **One change per committed change**: a write, an edit, a directory made (also one made on
//!   the way to a write, `create_parents`), a move (within or across mounts; one change for the
//!   whole move, after the source is gone), a delete (one change for a whole tree). A call
//!   that fails changes nothing and emits nothing, with one exception: a recursive delete that
//!   stops part way (a file written into a directory it had emptied, a file refused by read
//!   before delete, a store that failed) has removed part of the tree (see `docs/tools.md`);
//!   when an observer keeps images (moved into its [`Keeper`] as the removal went, or taken
//!   before it), each file removed is told as the removal of that one file, with its image,
//!   after the removal stopped (no lock held any more), so that what the failed call took can
//!   be put back. Appends (the exchange
//!   log's own records) are not changes.
//! - **Under the change's lock**: on a local store, the directory `flock` the operation holds
//!   for the change (both directories' for a move) is still held when the observers run, so
//!   no other writer's change to that entry can come between the change and its observation.
//!   Object stores have no locks: the change is emitted right after its request. Directories
//!   made on the way to a write are emitted as each is made (no lock is held there).
//! - **The call it belongs to**: [`CallId`], the same id the host writes on the call's
//!   exchange-log line and the per-call audit event carries.
//!
//! Observers run on the calling thread while a lock is held: they must be quick, must not
//! block on another call, and must never call the registry (that could wait for the lock they
//! are holding up). A panicking observer is the observer's bug; the change has been made.

use std::fmt;
#[cfg(feature = "s3")]
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::path::VirtualPath;

/// The id of one call: opaque, unique in the process and (but for one chance in a million
/// that two processes draw the same tag, and then only within one millisecond) across the
/// processes that share a journal or a log folder, and sortable in the order the process's
/// calls started (milliseconds since the epoch, then this process's tag and its counter:
/// `1796013365229-3fa2c0000002a`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(String);

impl CallId {
    /// A fresh id.
    #[must_use]
    pub fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis());
        let count = COUNTER.fetch_add(1, Ordering::Relaxed);
        Self(format!("{millis:013}-{:05x}{count:08x}", process_tag()))
    }

    /// The id as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// This process's tag (20 bits) in call ids and the journal's entry ids: two processes that
/// share a journal (two stdio servers on one project, or two containers whose servers are
/// both process 1) would otherwise both call their first call of a millisecond
/// `…-00000000`, and an undo by call, or the journal's reading of which calls ended or which
/// entries were dropped, would take one's for the other's. Drawn once from the process id,
/// the clock's nanoseconds and where the stack lies.
#[must_use]
pub fn process_tag() -> u64 {
    static TAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos());
        let place = std::ptr::addr_of!(nanos) as usize;
        let seed = format!("{}-{nanos}-{place:x}", std::process::id());
        xxhash_rust::xxh3::xxh3_64(seed.as_bytes()) & 0xf_ffff
    })
}

impl Default for CallId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// What kind of change was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A file's content was written whole (created or replaced).
    Write,
    /// A file's content was edited in place (its text replaced).
    Edit,
    /// A directory was made.
    MakeDirectory,
    /// A file, a link or a directory (with everything in it) was removed.
    Remove,
    /// A file, a link or a directory was moved from [`Change::path`] to [`Change::to`].
    Move,
}

impl ChangeKind {
    /// A short name for logs: `write`, `edit`, `make_directory`, `remove`, `move`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Write => "write",
            ChangeKind::Edit => "edit",
            ChangeKind::MakeDirectory => "make_directory",
            ChangeKind::Remove => "remove",
            ChangeKind::Move => "move",
        }
    }
}

/// What was at the changed place before the change (for a move, at its destination: what the
/// move replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Before {
    /// Nothing.
    Absent,
    /// A regular file.
    File {
        /// Its size in bytes.
        size: u64,
        /// Its version, when the operation knew it (it checked or read it); `None` when the
        /// operation replaced or removed the file without looking.
        version: Option<String>,
    },
    /// A directory (for a removal: with everything in it).
    Directory,
    /// A symbolic link.
    Link,
}

/// One committed change, as its observers see it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Change<'a> {
    /// The call that made it.
    pub call: &'a CallId,
    /// True when an agent's call made it; false for infrastructure (a privileged accessor).
    pub by_agent: bool,
    /// What was done.
    pub kind: ChangeKind,
    /// The changed place (a move's source), as the virtual path the call named or made.
    pub path: &'a VirtualPath,
    /// A move's destination.
    pub to: Option<&'a VirtualPath>,
    /// What was there before.
    pub before: &'a Before,
    /// The file's version after the change, when the store reports one (for a move, the
    /// version of the file at its destination, when some observer keeps images).
    pub version: Option<&'a str>,
    /// The before image, when some observer keeps images ([`ChangeObserver::keeps_images`]):
    /// taken under the change's lock, just before the change.
    pub image: Option<&'a Image>,
    /// True for a directory made on the way to another change of the same call (a write's
    /// missing parents), which follows it; false for every change asked for itself.
    pub on_the_way: bool,
}

/// The before image of a change: what an undo puts back. For a move, the image is of what
/// the move replaced at its destination.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Image {
    /// Nothing was there: a create.
    Absent,
    /// A regular file: its content and permission bits.
    File {
        /// The whole content, copied or kept by link.
        content: Saved,
        /// The permission bits.
        mode: u32,
    },
    /// A directory and everything in it (a removed directory).
    Tree {
        /// The directory's own permission bits (with the sticky, set-user-ID and
        /// set-group-ID bits as they were; an object store's directories say `0o755`).
        mode: u32,
        /// What it held, parents before children.
        items: Vec<TreeItem>,
    },
    /// Not kept, and why: a link, a special file, a file above the write cap, a tree above
    /// [`TREE_IMAGE_BYTES`].
    NotKept(&'static str),
}

/// Why a file's image is not kept where its bytes alone pass what the journal can keep beside
/// its log ([`Keeper::bound_stored`]): kept, it would be dropped as soon as its entry is
/// written, and the change said to be undoable would not be.
pub(crate) const PAST_THE_BOUND: &str = "larger than its size bound allows";

/// The most bytes of copied file content one tree image holds in memory; a larger tree is
/// [`Image::NotKept`]. Content kept by a [`Keeper`] (linked or moved, not read) does not count;
/// copies an object store makes itself ([`Saved::Stored`]) count against
/// [`Keeper::bound_stored`] instead.
pub const TREE_IMAGE_BYTES: u64 = 256 * 1024 * 1024;

/// The content of a file in a before image.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Saved {
    /// The bytes, copied (a store that cannot link, another file system, a file with more
    /// than one link, or no observer with a [`Keeper`]).
    Copied(Vec<u8>),
    /// The file's own inode, hard-linked under `name` into the [`Keeper`] of the observer
    /// that asked for images, under the change's lock: nothing was read or copied, and the
    /// store never writes into an inode it replaced.
    Kept {
        /// The image's name in the keeper's directory.
        name: String,
        /// Its size in bytes.
        size: u64,
    },
    /// An object, copied by its own store (a server-side copy: no byte passed through vfs)
    /// into its mount's image area, for the observer that offers a [`Keeper`]. Read it back
    /// with [`Keeper::read_stored`], remove it with [`Keeper::forget_stored`].
    Stored {
        /// Where the image lies: a virtual path in the mount's image area, under vfs's own
        /// reserved names (`/data/.vfs-tmp-journal/…`), which no agent can name or list.
        path: String,
        /// Its size in bytes.
        size: u64,
    },
}

impl Saved {
    /// The content's size in bytes.
    #[must_use]
    pub fn len(&self) -> u64 {
        match self {
            Saved::Copied(bytes) => bytes.len() as u64,
            Saved::Kept { size, .. } | Saved::Stored { size, .. } => *size,
        }
    }

    /// True when the content is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`Keeper::stored_images`] found.
#[derive(Debug, Default)]
pub struct StoredImages {
    /// The images listed, as the paths [`Saved::Stored`] gives.
    pub paths: Vec<String>,
    /// Why a mount's image area was not listed whole: a store that failed, or did not answer
    /// in time (the names it gave before are in `paths`).
    pub missed: Vec<crate::Error>,
}

/// A directory of a local internal root where the operations keep before images by hard
/// link instead of copying them ([`PrivilegedAccessor::keeper`](crate::PrivilegedAccessor::keeper)).
/// An observer that holds one offers it with [`ChangeObserver::keeper`]. Opaque: it says
/// nothing of where the directory is.
pub struct Keeper {
    pub(crate) directory: crate::storage::local::KeepDirectory,
    next: AtomicU64,
    /// The most bytes of copies one tree image may have an object store make
    /// ([`Keeper::bound_stored`]).
    stored_bound: AtomicU64,
    /// What the names of the images object stores keep for this keeper begin with
    /// ([`Keeper::tag_stored`]).
    stored_tag: std::sync::OnceLock<String>,
    /// This process's id (asked once: every image's name holds it).
    process: u32,
    /// The registry whose object mounts keep their own images ([`Saved::Stored`]); weak, as
    /// the registry holds the observer that holds this keeper.
    #[cfg_attr(not(feature = "s3"), expect(dead_code, reason = "only object mounts keep their own images"))]
    registry: std::sync::Weak<crate::registry::RegistryInner>,
}

impl fmt::Debug for Keeper {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Keeper")
    }
}

impl Keeper {
    pub(crate) fn new(
        directory: crate::storage::local::KeepDirectory,
        registry: std::sync::Weak<crate::registry::RegistryInner>,
    ) -> Self {
        Self {
            directory,
            next: AtomicU64::new(0),
            stored_bound: AtomicU64::new(u64::MAX),
            stored_tag: std::sync::OnceLock::new(),
            process: std::process::id(),
            registry,
        }
    }

    /// Bounds the bytes of the copies an object store makes for one tree image (a recursive
    /// delete of an object directory) to `bytes`: past it the tree is [`Image::NotKept`] and
    /// the copies made are removed. The keeper's holder gives what it could keep at all (a
    /// journal, its own bound: copies past it would be dropped as soon as they are kept,
    /// each one a request and bytes in the bucket for nothing). Unbounded until called.
    pub fn bound_stored(&self, bytes: u64) {
        self.stored_bound.store(bytes, Ordering::Relaxed);
    }

    /// The bound [`Keeper::bound_stored`] set.
    pub(crate) fn stored_bound(&self) -> u64 {
        self.stored_bound.load(Ordering::Relaxed)
    }

    /// Begins the name of every image an object store keeps for this keeper from now on with
    /// `tag` (ASCII letters and digits, at most 64; once), so that its holder can tell its
    /// own images from those of other holders sharing the bucket
    /// ([`Keeper::stored_images`]). False when `tag` is not such a word, or a tag was set.
    pub fn tag_stored(&self, tag: &str) -> bool {
        let word = !tag.is_empty() && tag.len() <= 64 && tag.bytes().all(|byte| byte.is_ascii_alphanumeric());
        word && self.stored_tag.set(tag.to_owned()).is_ok()
    }

    /// The images object stores keep for this keeper's tag ([`Keeper::tag_stored`]), as the
    /// paths [`Saved::Stored`] gives, in every object mount of the registry that takes a
    /// write; at most `limit` of each mount's, listed until `until`. A mount whose listing
    /// failed or ran out of time is named in [`StoredImages::missed`] and does not stop the
    /// others. Empty without a tag.
    ///
    /// # Privilege
    /// Lists vfs's own image areas of agent-facing mounts: hold the keeper in infrastructure
    /// only (the journal).
    pub fn stored_images(&self, limit: usize, until: std::time::Instant) -> StoredImages {
        let Some(tag) = self.stored_tag.get() else { return StoredImages::default() };
        #[cfg(feature = "s3")]
        if let Some(registry) = self.registry.upgrade() {
            let mut found = StoredImages::default();
            // Only where a write can go: no image is made in a mount that takes none, and a
            // read-only mount's area is not vfs's to clear.
            let writes = |mount: &crate::registry::Mount| {
                mount.rights.allows(crate::Access::Write)
                    || mount.overrides.iter().any(|item| item.rights().allows(crate::Access::Write))
            };
            for mount in registry.mounts.iter().filter(|mount| writes(mount)) {
                if let crate::storage::Backend::Object(object) = &mount.storage {
                    let area = format!("{}/{}", mount.root.as_str(), crate::storage::object::IMAGE_AREA);
                    let Ok(at) = VirtualPath::new(&area) else { continue };
                    let (names, missed) = object.image_names(&format!("{tag}-"), limit, until, &at);
                    found.paths.extend(names.into_iter().map(|name| format!("{area}/{name}")));
                    found.missed.extend(missed);
                }
            }
            return found;
        }
        let _ = (tag, limit, until);
        StoredImages::default()
    }

    /// Removes the images stores keep at `paths` ([`Keeper::stored_images`] gave them), each
    /// mount's in as few requests as its store takes, until `until`: how many were removed.
    /// A path that is not such an image is left, as is one the store did not remove in time.
    pub fn forget_stored_all(&self, paths: &[String], until: std::time::Instant) -> usize {
        #[cfg(feature = "s3")]
        {
            let mut by_mount: std::collections::BTreeMap<usize, Vec<String>> = std::collections::BTreeMap::new();
            let mut registry = None;
            for path in paths {
                if let Ok(virtual_path) = VirtualPath::new(path)
                    && let Some((inner, mount, name)) = self.stored(&virtual_path)
                {
                    by_mount.entry(mount).or_default().push(name.to_owned());
                    registry = Some(inner);
                }
            }
            let Some(registry) = registry else { return 0 };
            by_mount
                .iter()
                .map(|(&mount, names)| match &registry.mounts[mount].storage {
                    crate::storage::Backend::Object(object) => object.forget_images(names, until),
                    crate::storage::Backend::Local(_) => 0,
                })
                .sum()
        }
        #[cfg(not(feature = "s3"))]
        {
            let _ = (paths, until);
            0
        }
    }

    /// The content of the image a store kept itself ([`Saved::Stored`]) at `path`, bounded by
    /// the write cap.
    ///
    /// # Errors
    /// `path` is not an image of an object mount of this keeper's registry, or it cannot be
    /// read (gone, the store did not answer).
    ///
    /// # Privilege
    /// Reads vfs's own image area of an agent-facing mount, which no agent can reach: hold
    /// the keeper in infrastructure only (the journal).
    pub fn read_stored(&self, path: &str) -> Result<Vec<u8>, crate::Error> {
        let Ok(virtual_path) = VirtualPath::new(path) else {
            return Err(crate::Error::invalid_argument(crate::text::agent_text!["not an image's path"]));
        };
        #[cfg(feature = "s3")]
        if let Some((registry, mount, name)) = self.stored(&virtual_path) {
            let cap = registry.limits.write_bytes;
            if let crate::storage::Backend::Object(object) = &registry.mounts[mount].storage {
                return object.read_image(name, cap, &virtual_path);
            }
        }
        Err(crate::Error::not_found(&virtual_path))
    }

    /// Removes the image a store kept itself at `path` (one no entry will need any more).
    pub fn forget_stored(&self, path: &str) {
        #[cfg(feature = "s3")]
        if let Ok(virtual_path) = VirtualPath::new(path)
            && let Some((registry, mount, name)) = self.stored(&virtual_path)
            && let crate::storage::Backend::Object(object) = &registry.mounts[mount].storage
        {
            object.forget_image(name);
        }
        #[cfg(not(feature = "s3"))]
        let _ = path;
    }

    /// The registry, the object mount and the image's name that an image path names:
    /// `<mount root>/<image area>/<name>`, with a name as [`Keeper::fresh_name`] makes them.
    #[cfg(feature = "s3")]
    fn stored<'p>(&self, path: &'p VirtualPath) -> Option<(Arc<crate::registry::RegistryInner>, usize, &'p str)> {
        let registry = self.registry.upgrade()?;
        let (area, name) = path.as_str().rsplit_once('/')?;
        let root = area.strip_suffix(crate::storage::object::IMAGE_AREA)?.strip_suffix('/')?;
        if name.is_empty() || name.starts_with('.') {
            return None;
        }
        let mount = registry.mounts.iter().position(|mount| {
            mount.root.as_str() == root && matches!(mount.storage, crate::storage::Backend::Object(_))
        })?;
        Some((registry, mount, name))
    }

    /// A name for the next image of `call`: the call's id, this process and a counter, so
    /// that processes sharing a keeper never pick the same one.
    pub(crate) fn fresh_name(&self, call: &CallId) -> String {
        let next = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{call}.{:x}.{next:x}", self.process)
    }

    /// [`Keeper::fresh_name`] for an image an object store keeps: after the keeper's tag, when
    /// it has one (`tag-call.process.n`).
    #[cfg(feature = "s3")]
    pub(crate) fn fresh_stored_name(&self, call: &CallId) -> String {
        match self.stored_tag.get() {
            Some(tag) => format!("{tag}-{}", self.fresh_name(call)),
            None => self.fresh_name(call),
        }
    }

    /// The permission bits of the image `name` this keeper holds (a file a removal took keeps
    /// its own), when it is one.
    #[must_use]
    pub fn mode_of(&self, name: &str) -> Option<u32> {
        if name.contains('/') || name.starts_with('.') {
            return None;
        }
        self.directory.mode(name)
    }

    /// The name of the record in which a removal by `call` notes the files it takes
    /// (`Keeper::note_taking`): `{call}.taking`, beside the images, so that it goes where they
    /// go (kept while the call is incomplete), and found by name (a call is one process's).
    #[must_use]
    pub fn taking_name(call: &CallId) -> String {
        format!("{call}{TAKING_SUFFIX}")
    }

    /// Notes, before a recursive removal by `call` takes the files `files` of `directory`
    /// (each with the image name it will have), which image is which file, and the directory's
    /// permission bits `mode`: one JSON line (`{"dir": …, "mode": …, "files": [[name, image],
    /// …]}`) appended to [`Keeper::taking_name`], not synced. The change is told with its
    /// image only once the whole tree is removed; a process killed before leaves images that
    /// this record alone names, and directories removed that it alone describes. A record
    /// that cannot be written (the disk full) is left out: the removal goes on, its files
    /// recorded as before in its entry, and a crash then leaves them unnamed.
    pub(crate) fn note_taking(&self, call: &CallId, directory: &VirtualPath, mode: u32, files: &[(String, String)]) {
        let files: Vec<String> =
            files.iter().map(|(name, image)| format!("[{},{}]", json_string(name), json_string(image))).collect();
        let line = format!(
            "{{\"dir\":{},\"mode\":{mode},\"files\":[{}]}}\n",
            json_string(directory.as_str()),
            files.join(",")
        );
        if let Err(errno) = self.directory.append(&Self::taking_name(call), line.as_bytes()) {
            tracing::debug!(target: "vfs::journal", call = call.as_str(), %errno, "a removal's record of the files it takes was not written");
        }
    }

    /// Removes the record of the files `call` took (`Keeper::note_taking`), once its change
    /// is recorded whole.
    pub fn forget_taking(&self, call: &CallId) {
        self.directory.forget(&Self::taking_name(call));
    }

    /// Removes the image `name` (one kept for a change that was then not made, or that the
    /// observer no longer needs).
    pub fn forget(&self, name: &str) {
        if !name.contains('/') && !name.starts_with('.') {
            self.directory.forget(name);
        }
    }

    /// Makes the images linked so far durable with the syncs `held` (made when the caller next
    /// syncs its record of them, [`AppendFile::sync_with`](crate::AppendFile::sync_with)):
    /// nothing to add on a file system that commits in order (ext4 with its journal, xfs),
    /// where that sync commits the links too; elsewhere this directory, synced at the same time
    /// as the record (so there a crash may keep a record whose image it lost: an undo then
    /// says the image is gone, and puts nothing back).
    pub fn sync_with(&self, held: &mut crate::HeldSyncs) {
        if let Some(directory) = self.directory.unordered() {
            held.push(directory);
        }
    }
}

/// How the names of the records of the files a removal takes end (`Keeper::note_taking`).
pub const TAKING_SUFFIX: &str = ".taking";

/// `text` as a JSON string: quotes, backslashes and control characters escaped.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            control if u32::from(control) < 0x20 => quoted.push_str(&format!("\\u{:04x}", u32::from(control))),
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// One entry of a removed tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeItem {
    /// Its path relative to the tree's root, `/`-joined.
    pub relative: String,
    /// `None` for a directory; a file's content otherwise.
    pub content: Option<Saved>,
    /// The permission bits (with the sticky, set-user-ID and set-group-ID bits as they were;
    /// an object store's directories say `0o755`).
    pub mode: u32,
}

/// Why a tree's image is not kept when a name in it is one no path can spell (a control
/// character, made outside vfs): an undo puts the tree back by path, so it could not put that
/// one back, and a tree undone but for a file would be a change half undone.
pub(crate) const UNSPELLED: &str = "a name in it is one no path can spell";

/// Told of every change the registry's operations commit (see the module's contract).
pub trait ChangeObserver: Send + Sync + fmt::Debug {
    /// One change, just committed; the operation still holds its lock.
    fn changed(&self, change: &Change<'_>);

    /// True when this observer wants the before image of a change at `path` made by an agent
    /// (`by_agent`) or by infrastructure: the operations then take it, under the change's
    /// lock, and pass it as [`Change::image`]. No observer asking, no image is taken.
    fn keeps_images(&self, path: &VirtualPath, by_agent: bool) -> bool {
        let _ = (path, by_agent);
        false
    }

    /// The directory where this observer wants file images kept by hard link, when it has
    /// one: an operation then links the file it replaces or removes there
    /// ([`Saved::Kept`]) where the store and the file allow, and copies it otherwise.
    fn keeper(&self) -> Option<&Keeper> {
        None
    }

    /// A change is about to be made: told after its before image is taken and just before
    /// the store acts, under the same lock, to the observers that keep images (with
    /// [`Change::version`] `None`). An observer that keeps a record which must outlive a
    /// crash of the process writes its intent here; [`ChangeObserver::changed`] follows if
    /// the change is made. The same rules as for `changed` apply.
    ///
    /// # Errors
    /// Why the observer cannot keep its record of the change (for the operator's log). The
    /// change is then not made: the operation answers
    /// [`Error::not_journaled`](crate::Error::not_journaled), so that no change goes through
    /// that its record, and so its undo, would miss.
    fn intends(&self, change: &Change<'_>) -> Result<(), String> {
        let _ = change;
        Ok(())
    }

    /// A recursive removal whose intent told an empty tree (it keeps the tree's files in the
    /// [`Keeper`] as it goes, so the image is known only once it is done) is about to keep
    /// the file `file`: the record written after the change grows by it, or, should the
    /// removal stop part way, by a change of its own for that file. Told under the lock of
    /// the file's directory, before the file is taken. An observer whose record needs room
    /// for it makes sure of the room here, as in [`ChangeObserver::intends`].
    ///
    /// # Errors
    /// Why the observer cannot keep its record of that file: the removal stops before it
    /// ([`Error::not_journaled`](crate::Error::not_journaled)); the files it took before are
    /// its changes, each told with its image.
    fn grows(&self, call: &CallId, file: &VirtualPath) -> Result<(), String> {
        let _ = (call, file);
        Ok(())
    }

    /// The call `call` returned: it holds no lock any more, and every change it made was told.
    /// Told to the registry's observers and to those of
    /// [`MountRegistry::subscribe`](crate::MountRegistry::subscribe), on the call's thread,
    /// before the call's answer reaches its caller: an observer
    /// that acts on changes in a thread of its own can finish that work here, so that what
    /// the call changed is in effect when its caller sees the answer.
    fn call_ended(&self, call: &CallId) {
        let _ = call;
    }
}

/// The first observer of every registry: one operator-log event per change, at debug level,
/// under the audit target (`RUST_LOG=vfs::audit=debug`), with the call's id.
#[derive(Debug, Default)]
pub(crate) struct Audit;

impl ChangeObserver for Audit {
    fn changed(&self, change: &Change<'_>) {
        let to = change.to.map(VirtualPath::as_str);
        let before = match change.before {
            Before::Absent => "absent",
            Before::File { .. } => "file",
            Before::Directory => "directory",
            Before::Link => "link",
        };
        tracing::debug!(
            target: "vfs::audit",
            call = change.call.as_str(),
            change = change.kind.as_str(),
            path = change.path.as_str(),
            to,
            before,
            version = change.version,
            agent = change.by_agent,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_are_unique_and_sort_in_the_order_they_were_made() {
        let ids: Vec<CallId> = (0..1000).map(|_| CallId::new()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ids);
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len());
        assert_eq!(ids[0].as_str().len(), "0000000000000-0000000000000".len());
    }

    /// A name in a removal's record of the files it takes reads back as it was, whatever it
    /// holds: quotes, backslashes, control characters, any Unicode.
    #[test]
    fn names_in_the_record_of_a_removal_read_back_as_they_were() {
        for name in ["plain.txt", "quo\"te\\back", "tab\tnew\nline\u{1}\u{1f}", "é ü 日本 🙂", ""] {
            let read: String = serde_json::from_str(&json_string(name)).unwrap();
            assert_eq!(read, name);
        }
    }
}
