//! Changing things: atomic writes, directories, moves, deletes, and the logger's appends.
//!
//! Every change to a file is a store's atomic put (locally: a temporary file in the same
//! directory, `fsync`, rename; in object storage: one PUT), so a failure at any point leaves the
//! previous content, and a link at the target is replaced rather than written through. Every
//! change states what must be at its place for it to go ahead (a [`Precondition`]: nothing,
//! anything, or a file at exactly one version), and the operation checks it under the store's
//! lock on the directory where it has one, so a check and the change it guards cannot be
//! interleaved with another writer's, whether a thread or another process; where it has none,
//! the put itself is conditional.

use super::Context;
use crate::changes::{Before, ChangeKind, Image, TreeItem};
use crate::error::{Error, ErrorKind};
use crate::gate::{self, Claimed, Place};
use crate::path::VirtualPath;
use crate::spec::Access;
use crate::storage::{Backend, Kind, Located, MadeDirectory, NewMode, Node, PutWhen, Removal, Staged, Start, Stat};
use crate::text::{AgentText, agent_text, code};

/// The result of a write.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WriteOutcome {
    /// The virtual path written.
    pub path: VirtualPath,
    /// Bytes written.
    pub bytes: u64,
    /// True when the file did not exist before.
    pub created: bool,
    /// The new version token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why this write cannot be undone, where changes are journaled and the journal could
    /// keep no copy of the file it replaced (one above the write cap, or unreadable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_undoable: Option<&'static str>,
}

impl WriteOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`WriteOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let verb = if self.created { "created " } else { "replaced " };
        let mut text = agent_text![verb, code(&self.path), format!(" ({} bytes", self.bytes)];
        if let Some(version) = &self.version {
            text.composed(&format!(", version {version}"));
        }
        text.composed(")");
        if let Some(why) = self.not_undoable {
            text.composed("; it cannot be undone: the journal of changes could keep no copy of what it replaced (")
                .composed(why)
                .composed(")");
        }
        text
    }
}

/// Why the change whose before image is `image` cannot be undone: the reason it was not
/// kept, where an observer asked for it.
fn not_undoable(image: Option<&Image>) -> Option<&'static str> {
    match image {
        Some(Image::NotKept(why)) => Some(why),
        _ => None,
    }
}

/// A directory an undo put back ([`AgentAccessor::restore_directory`](crate::AgentAccessor::restore_directory)),
/// to be given the rest of its mode once what goes in it is back
/// ([`AgentAccessor::finish_directory`](crate::AgentAccessor::finish_directory)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredDirectory {
    /// The directory.
    pub path: VirtualPath,
    /// False when it was there already (it is left as it is).
    pub created: bool,
    /// The directory made, where its store has directories of its own.
    made: Option<crate::storage::MadeAs>,
    /// The bits it was made with.
    set: u32,
    /// The bits it is to have.
    mode: u32,
}

/// The result of `create_directory`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CreateDirOutcome {
    /// The directory.
    pub path: VirtualPath,
    /// False when it already existed.
    pub created: bool,
}

impl CreateDirOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`CreateDirOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        if self.created {
            agent_text!["created directory ", code(&self.path)]
        } else {
            agent_text!["directory ", code(&self.path), " already exists"]
        }
    }
}

/// The result of `move_file`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MoveOutcome {
    /// Where it was.
    pub source: VirtualPath,
    /// Where it is.
    pub destination: VirtualPath,
    /// True when it crossed file systems and was copied, then removed.
    pub copied: bool,
}

impl MoveOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`MoveOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        agent_text!["moved ", code(&self.source), " to ", code(&self.destination)]
    }
}

/// The result of `delete_file`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeleteOutcome {
    /// What was deleted.
    pub path: VirtualPath,
    /// `file`, `directory` or `link`.
    pub kind: &'static str,
    /// Why this delete cannot be undone, where changes are journaled and the journal could
    /// keep no copy of what it took (a link, a tree holding one, a file above the write cap).
    #[serde(rename = "notUndoable", skip_serializing_if = "Option::is_none")]
    pub not_undoable: Option<&'static str>,
}

impl DeleteOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`DeleteOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = agent_text!["deleted ", self.kind, " ", code(&self.path)];
        if let Some(why) = self.not_undoable {
            text.composed("; it cannot be undone: the journal of changes could keep no copy of it (")
                .composed(why)
                .composed(")");
        }
        text
    }
}

/// A file opened for appending by a privileged logger. Each [`AppendFile::append`] is one
/// `write` on an `O_APPEND` descriptor, so concurrent appends never interleave within a record
/// and a killed process leaves only whole records.
#[derive(Debug)]
pub struct AppendFile {
    file: crate::storage::Appender,
    /// Where the room this file last allocated past its end ends ([`AppendFile::reserve`]).
    reserved_to: u64,
}

impl AppendFile {
    /// Appends one record (for a JSON-lines log: one line, newline included) and flushes it to
    /// the kernel.
    pub fn append(&mut self, record: &[u8]) -> std::io::Result<()> {
        self.file.append(record).map(drop)
    }

    /// [`AppendFile::append`], returning where the record ends in the file: it begins that
    /// many bytes before, whatever other writers appended before or after it.
    pub fn append_ending(&mut self, record: &[u8]) -> std::io::Result<u64> {
        self.file.append(record)
    }

    /// Flushes to stable storage.
    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }

    /// Flushes to stable storage, and with it the directory syncs `held` of changes made
    /// before the last append to this file (call it right after that append): on a file
    /// system that commits in order (ext4 with its journal, xfs), this one sync commits every
    /// change made before it, so the held directories on this file's file system need no
    /// `fsync` of their own; the others are synced at the same time, by vfs's syncer
    /// threads. Every held directory is synced whether this file's sync succeeds or not.
    ///
    /// # Errors
    /// This file could not be synced.
    pub fn sync_with(&self, held: HeldSyncs) -> std::io::Result<()> {
        self.file.sync_data_with(held.take())
    }

    /// The file's length now, appends of every writer included (another process may append
    /// to the same file).
    pub fn length(&self) -> std::io::Result<u64> {
        self.file.len()
    }

    /// Makes sure that the next `ahead / 2` bytes appended, at least, need no room the disk
    /// may not have by then: once fewer bytes past the file's end are left of what this file
    /// last allocated, `ahead` bytes are allocated from the end (without changing its length).
    /// A log that must be able to write its next line once a change is made (the journal's
    /// entry after its intent) reserves before the change. A file system that cannot allocate
    /// ahead reserves nothing, without an error.
    ///
    /// # Errors
    /// The disk (or the owner's quota) has not that much room (`ENOSPC`, `EDQUOT`, `EFBIG`),
    /// or the file system failed otherwise.
    pub fn reserve(&mut self, ahead: u64) -> std::io::Result<()> {
        self.file.reserve(ahead, &mut self.reserved_to)
    }

    /// Takes the file's exclusive advisory lock (`flock`), if no other open file holds its
    /// lock, shared or exclusive: `Ok(false)` when one does. Processes that share a log mark
    /// with the lock that they are using it, so that one of them can tell that it is alone.
    /// A shared lock this file held is given up first, and is not held after `Ok(false)`
    /// (Linux converts a `flock` by removing the old lock): take it again with
    /// [`AppendFile::lock_shared`].
    ///
    /// # Errors
    /// The file system refused the lock.
    pub fn try_lock_exclusive(&self) -> std::io::Result<bool> {
        self.file.lock(true)
    }

    /// Takes the file's shared advisory lock, waiting while another open file holds it
    /// exclusively (an exclusive lock taken with [`AppendFile::try_lock_exclusive`] is
    /// given up first). Held until the file is dropped.
    ///
    /// # Errors
    /// The file system refused the lock.
    pub fn lock_shared(&self) -> std::io::Result<()> {
        self.file.unlock()?;
        self.file.lock(false).map(drop)
    }

    /// Takes the file's exclusive advisory lock, waiting for every other open file to let go
    /// of its lock (a shared lock this file held is given up first).
    ///
    /// # Errors
    /// The file system refused the lock.
    pub fn lock_exclusive(&self) -> std::io::Result<()> {
        self.file.unlock()?;
        self.file.lock_exclusive()
    }

    /// Lets go of the file's advisory lock.
    ///
    /// # Errors
    /// The file system refused.
    pub fn unlock(&self) -> std::io::Result<()> {
        self.file.unlock()
    }

    /// True when the file is no longer the one its name gives: the name was removed, or
    /// another file was renamed over it (a log rewritten and put in its place), even while a
    /// second name links this one. What is appended to it then is read by nobody who reads
    /// the name: open the name again.
    ///
    /// # Errors
    /// The file's status could not be read.
    pub fn unnamed(&self) -> std::io::Result<bool> {
        self.file.unnamed()
    }
}

/// The directory syncs a call held
/// ([`AgentAccessor::with_directory_syncs_held`](crate::AgentAccessor::with_directory_syncs_held)):
/// made durable by [`AppendFile::sync_with`], or each synced on its own when dropped, so that
/// no change is ever left unsynced.
#[derive(Debug, Default)]
#[must_use = "dropped, each held directory is synced on its own"]
pub struct HeldSyncs(Vec<crate::storage::local::HeldDirectory>);

impl HeldSyncs {
    pub(crate) fn new(held: Vec<crate::storage::local::HeldDirectory>) -> Self {
        Self(held)
    }

    /// How many directory syncs are held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn push(&mut self, directory: crate::storage::local::HeldDirectory) {
        self.0.push(directory);
    }

    fn take(mut self) -> Vec<crate::storage::local::HeldDirectory> {
        std::mem::take(&mut self.0)
    }
}

impl Drop for HeldSyncs {
    fn drop(&mut self) {
        crate::storage::local::sync_held(crate::storage::local::uncovered(std::mem::take(&mut self.0), None));
    }
}

/// What must be at a place for a change to go ahead there: a write (whole, or a staged
/// write's commit), an edit, a delete, either end of a move. It is checked under the store's
/// lock on the place's directory (or made the store's conditional put), just before the act,
/// so a change made between the caller's look and the act is refused, never overwritten. A
/// refusal is an [`Error`] whose [`Error::unmet`] names the precondition that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// Nothing: a write creates the file, and fails if one appeared meanwhile
    /// ([`AlreadyExists`](crate::ErrorKind::AlreadyExists)). For a change that needs something
    /// there (an edit, a delete, a move's source) it never holds: the change is refused when
    /// something is there, and answered as missing otherwise.
    Absent,
    /// Anything (a file or nothing): a write creates or replaces it.
    Any,
    /// A file at exactly this version (as `get_file_info` or a read reported it); another
    /// version, or no file, is a [`VersionMismatch`](crate::ErrorKind::VersionMismatch).
    Version(String),
    /// A directory whose tree is at exactly this version: the one a journaled directory move
    /// recorded ([`crate::Change::version`]), for the source of the move back that undoes it.
    /// Only the journal holds one: no tool builds it from an agent's input and no answer shows
    /// one, because the tree's version covers names the name rules hide. A file, or another
    /// tree, is a [`VersionMismatch`](crate::ErrorKind::VersionMismatch).
    Tree(String),
    /// A directory, whatever it holds (a delete without `recursive` removes it only empty):
    /// the guard of an undo that removes a directory its change made. A file, or nothing, is
    /// refused ([`VersionMismatch`](crate::ErrorKind::VersionMismatch), or missing), so that
    /// such an undo never removes a file written at that path since.
    Directory,
}

/// What a version mismatch says is there when no file is.
pub(crate) const NO_FILE: &str = "none (the file does not exist)";

/// What a tree's version mismatch says is there: a file, or another tree. Never the tree's
/// version, which covers hidden names (see [`Precondition::Tree`]).
const NOT_A_TREE: &str = "another tree";

/// What a mismatch of [`Precondition::Directory`] says is there.
const NOT_A_DIRECTORY: &str = "not a directory";

impl Precondition {
    /// Checks this precondition of a place where a file is, at version `current` (if it has
    /// one).
    pub(crate) fn check_file(&self, path: &VirtualPath, current: Option<&str>) -> Result<(), Error> {
        match self {
            Precondition::Any => Ok(()),
            Precondition::Absent => Err(Error::exists(path)),
            Precondition::Version(expected) if current == Some(expected.as_str()) => Ok(()),
            Precondition::Version(_) => Err(Error::version_mismatch(path, current.unwrap_or_default())),
            Precondition::Tree(_) => Err(Error::version_mismatch(path, NOT_A_TREE)),
            Precondition::Directory => Err(Error::version_mismatch(path, NOT_A_DIRECTORY)),
        }
    }

    /// The version this precondition names, for the change feed's "before".
    fn version(&self) -> Option<String> {
        match self {
            Precondition::Version(version) => Some(version.clone()),
            Precondition::Absent | Precondition::Any | Precondition::Tree(_) | Precondition::Directory => None,
        }
    }
}

/// What a staged write starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageFrom {
    /// An empty file.
    Empty,
    /// The file's current content (empty when there is none).
    Current,
}

impl Context<'_> {
    pub(crate) fn write(
        &self,
        input: &str,
        content: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome, Error> {
        self.write_mode(input, content, precondition, None)
    }

    /// [`Context::write`], the file getting `mode` (the permission bits of a before image an
    /// undo restores, execute bits included: the mode the file had before a change, never
    /// one an agent chose) instead of the mode it had, less its execute bits, as every other
    /// file an agent's call writes.
    ///
    /// A write whose directory another call removed under it (a delete beside it) wrote
    /// nothing and is tried again, four times at most (`again_if_changed`): the directory is
    /// made again, as a write makes missing parents.
    pub(crate) fn write_mode(
        &self,
        input: &str,
        content: &[u8],
        precondition: &Precondition,
        mode: Option<u32>,
    ) -> Result<WriteOutcome, Error> {
        Self::again_if_changed(|| self.write_once(input, content, precondition, mode))
    }

    /// Runs `work` again, four times at most, while it answers [`ErrorKind::Changed`]: a call
    /// that found its directory and then met it removed by a delete beside it (found again,
    /// the directory is made anew, as any missing parent is) wrote nothing, and is tried again
    /// rather than answered "try again".
    ///
    /// After a pause, longer each time (1, 2, 4, 8 ms): a directory being removed is dead (no
    /// file can be made in it) a moment before its name leaves its parent, and a `rmdir`
    /// descheduled in between (two cores, a loaded machine) kept handing the same dead
    /// directory to three tries in a row, a few microseconds apart.
    fn again_if_changed<T>(mut work: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
        const TRIES: u32 = 5;
        let mut tried = 1;
        loop {
            match work() {
                Err(error) if error.kind() == ErrorKind::Changed && tried < TRIES => {
                    std::thread::sleep(std::time::Duration::from_millis(1 << (tried - 1)));
                    tried += 1;
                }
                done => return done,
            }
        }
    }

    fn write_once(
        &self,
        input: &str,
        content: &[u8],
        precondition: &Precondition,
        mode: Option<u32>,
    ) -> Result<WriteOutcome, Error> {
        let path = Self::parse(input)?;
        let cap = self.registry.limits.write_bytes;
        if content.len() as u64 > cap {
            let message = format!("the content has {} bytes, more than the {cap}-byte write cap", content.len());
            return Err(Error::too_large(Some(&path), agent_text![message]));
        }
        // A write that needs something there makes no parent: where one is missing, so is
        // the file, as `put_when` answers.
        let missing = || Error::version_mismatch(&path, NO_FILE);
        let locate = || match precondition {
            Precondition::Any | Precondition::Absent => self.locate::<gate::Write>(&path, false, true),
            _ => self.locate_present(&path, &missing),
        };
        let (_claim, located) = self.under_write_claim(&path, locate)?;
        if Self::is_root(&located) {
            return Err(Error::not_a_file(&path));
        }
        let store = self.store(located.mount);
        let _lock = store.lock(&located.node, &path)?;
        // Again under the directory's lock, which a `create_directory` beside it takes too.
        self.guard_git_directory(located.mount, &located.rel, Access::Write, &path)?;
        let existing = store.restat(&located.node, &path)?;
        if let Some(stat) = existing {
            Self::replaceable(stat.kind, &path)?;
        }
        let mode = match (mode, existing) {
            // The restored bits exactly while the file has the mode a write from them left
            // (`restored_mode`); a mode someone set since is kept, never widened.
            (Some(restored), Some(stat)) => super::restored_mode(restored, stat.mode),
            (Some(restored), None) => NewMode::Exact(restored),
            (None, Some(stat)) => NewMode::Masked(super::authored_mode(stat.mode)),
            (None, None) => NewMode::Masked(0o666),
        };
        let when = Self::put_when(store, &located.node, precondition, existing.is_some(), &path)?;
        let before = match existing {
            Some(stat) => Before::File { size: stat.size, version: precondition.version() },
            None => Before::Absent,
        };
        let image = self.keeps_images(&path).then(|| match existing {
            Some(stat) => self.file_image(store, &located.node, Some(stat.size), &path),
            None => Image::Absent,
        });
        self.intends(ChangeKind::Write, &path, None, &before, image.as_ref())
            .inspect_err(|_| self.forget_image(image.as_ref()))?;
        let version =
            store.put(&located, content, &when, mode, &path).inspect_err(|_| self.forget_image(image.as_ref()))?;
        self.changed(ChangeKind::Write, &path, None, &before, version.as_deref(), image.as_ref());
        let not_undoable = not_undoable(image.as_ref());
        Ok(WriteOutcome { path, bytes: content.len() as u64, created: existing.is_none(), version, not_undoable })
    }

    /// Refuses to write over what is not a regular file.
    fn replaceable(kind: Kind, path: &VirtualPath) -> Result<(), Error> {
        match kind {
            Kind::File => Ok(()),
            Kind::Symlink => Err(Error::symlink(path)),
            Kind::Directory => Err(Error::not_a_file(path)),
            Kind::Special => Err(Error::unsupported(path)),
        }
    }

    /// The put of a write under `precondition` at a place where a file is (`present`) or
    /// nothing is, once what a store with locks can check now is checked (the caller holds
    /// the lock): a precondition that does not hold is refused here, before anything is
    /// written.
    fn put_when(
        store: &Backend,
        node: &Node,
        precondition: &Precondition,
        present: bool,
        path: &VirtualPath,
    ) -> Result<PutWhen, Error> {
        match (precondition, present) {
            (Precondition::Absent, true) => Err(Error::already_exists(path)),
            (Precondition::Absent | Precondition::Any, false) => Ok(PutWhen::Absent),
            (Precondition::Any, true) => Ok(PutWhen::Any),
            (Precondition::Version(expected), true) => Self::guarded(store, node, expected, path),
            (Precondition::Version(_) | Precondition::Tree(_) | Precondition::Directory, false) => {
                Err(Error::version_mismatch(path, NO_FILE))
            }
            (Precondition::Tree(_), true) => Err(Error::version_mismatch(path, NOT_A_TREE)),
            (Precondition::Directory, true) => Err(Error::version_mismatch(path, NOT_A_DIRECTORY)),
        }
    }

    /// Begins a staged write of the file at `input` (with `make_parents`, its missing parents
    /// made as a write makes them; without, its directory must be there): located and
    /// authorized for writing now, written at offsets by the caller, committed by
    /// [`Context::commit_staged`].
    pub(crate) fn stage(
        &self,
        input: &str,
        from: StageFrom,
        make_parents: bool,
    ) -> Result<(VirtualPath, Place<gate::Write>, Staged), Error> {
        Self::again_if_changed(|| self.stage_once(input, from, make_parents))
    }

    fn stage_once(
        &self,
        input: &str,
        from: StageFrom,
        make_parents: bool,
    ) -> Result<(VirtualPath, Place<gate::Write>, Staged), Error> {
        let path = Self::parse(input)?;
        if !make_parents {
            // The check `locate` makes only when it makes parents: as the write tool does.
            let (mount, components) = self.registry.route(self.caller, &path)?;
            self.authorize_as_written(mount, &components, Access::Write, &path)?;
        }
        let place = self.locate::<gate::Write>(&path, false, make_parents)?;
        if Self::is_root(&place) {
            return Err(Error::not_a_file(&path));
        }
        let store = self.store(place.mount);
        let mode = match store.restat(&place.node, &path)? {
            Some(stat) => {
                Self::replaceable(stat.kind, &path)?;
                NewMode::Masked(super::authored_mode(stat.mode))
            }
            None => NewMode::Masked(0o666),
        };
        let start = match from {
            StageFrom::Empty => Start::Empty,
            StageFrom::Current => Start::Current,
        };
        let staged = store.stage(&place, start, mode, self.registry.limits.write_bytes, &path)?;
        Ok((path, place, staged))
    }

    /// Commits a staged write when `precondition` holds, under the directory's lock (the
    /// checks a write makes, again: the git look-alike guard, what is at the place), and tells
    /// the change feed. The stage is taken out of `staged` by the put only: refused before it,
    /// the caller has it still.
    pub(crate) fn commit_staged(
        &self,
        path: &VirtualPath,
        place: &Place<gate::Write>,
        staged: &mut Option<Staged>,
        precondition: &Precondition,
    ) -> Result<WriteOutcome, Error> {
        let store = self.store(place.mount);
        // Claimed where it was staged (ADR 0006): no move of a directory above it in this
        // process lands between the check that it is still there and the commit.
        let _claim = crate::registry::CLAIMS.claim(&[self.place(place)], &self.deadline, &[path])?;
        let _lock = store.lock(&place.node, path)?;
        self.still_in_place(place, path)?;
        self.guard_git_directory(place.mount, &place.rel, Access::Write, path)?;
        let existing = store.restat(&place.node, path)?;
        if let Some(stat) = existing {
            Self::replaceable(stat.kind, path)?;
        }
        let when = Self::put_when(store, &place.node, precondition, existing.is_some(), path)?;
        let before = match existing {
            Some(stat) => Before::File { size: stat.size, version: precondition.version() },
            None => Before::Absent,
        };
        let bytes = staged.as_ref().map_or(0, Staged::len);
        let image = self.keeps_images(path).then(|| match existing {
            Some(stat) => self.file_image(store, &place.node, Some(stat.size), path),
            None => Image::Absent,
        });
        self.intends(ChangeKind::Write, path, None, &before, image.as_ref())
            .inspect_err(|_| self.forget_image(image.as_ref()))?;
        let staged = staged.take().ok_or_else(|| Error::changed_during_call(path))?;
        let version = store.commit(place, staged, &when, path).inspect_err(|_| self.forget_image(image.as_ref()))?;
        self.changed(ChangeKind::Write, path, None, &before, version.as_deref(), image.as_ref());
        let not_undoable = not_undoable(image.as_ref());
        Ok(WriteOutcome { path: path.clone(), bytes, created: existing.is_none(), version, not_undoable })
    }

    /// Refuses the commit of a stage whose directory is no longer at the path it was staged
    /// for (moved or removed since: a file kept open across a rename of its directory). The
    /// stage holds that directory itself, and would write into it wherever it went, under
    /// rights that were judged for the old path; the content goes nowhere instead, and the
    /// writer is told that the place changed.
    fn still_in_place(&self, place: &Place<gate::Write>, path: &VirtualPath) -> Result<(), Error> {
        let Some(held) = crate::storage::directory_identity(&place.node) else { return Ok(()) };
        let parent = path.parent();
        let found = self
            .locate::<gate::Read>(&parent, true, false)
            .and_then(|directory| self.store(directory.mount).restat(&directory.node, &parent));
        match found {
            Ok(Some(stat)) if stat.kind == Kind::Directory && stat.identity == Some(held) => Ok(()),
            _ => Err(Error::changed_during_call(path)),
        }
    }

    /// The put for a write guarded by `expected`: a store with directory locks checks the
    /// version now, under the lock the caller holds, so the check and the write cannot
    /// interleave with another writer's; a store without makes the put itself conditional.
    pub(crate) fn guarded(store: &Backend, node: &Node, expected: &str, path: &VirtualPath) -> Result<PutWhen, Error> {
        if store.capabilities().locks {
            store.check_version(node, expected, path)?;
            Ok(PutWhen::Any)
        } else {
            Ok(PutWhen::Version(expected.to_owned()))
        }
    }

    /// Makes the directory at `input`; with `make_parents`, its parents too, else only in a
    /// parent that is there (`mkdir(2)`: a parent missing is `NotFound`).
    pub(crate) fn create_directory(&self, input: &str, make_parents: bool) -> Result<CreateDirOutcome, Error> {
        Self::again_if_changed(|| self.create_directory_once(input, None, make_parents)).map(|(outcome, _)| outcome)
    }

    /// Puts back a directory an undo restores, with its mode `mode` (permissions, sticky,
    /// set-user-ID and set-group-ID bits, as a tree image kept them): made with those bits and
    /// the owner's read, write and search bits for now (a directory without them could take
    /// nothing back), given the rest by [`Context::finish_directory`] once what goes in it is
    /// back. A directory there already is left as it is (`created` false). Rights and rules as
    /// for [`Context::create_directory`].
    pub(crate) fn restore_directory(&self, input: &str, mode: u32) -> Result<RestoredDirectory, Error> {
        let mode = mode & 0o7777;
        let set = mode | 0o700;
        let (outcome, made) = Self::again_if_changed(|| self.create_directory_once(input, Some(set), true))?;
        // The bits it has: the kernel may have refused some (a set-group-ID bit, for a process
        // not in the directory's group), and the finish compares with what was given.
        let set = made.map_or(set, |made| made.mode);
        Ok(RestoredDirectory { path: outcome.path, created: outcome.created, made, set, mode })
    }

    /// True when the tree at `from` has the version `expected` (`Context::tree_version`). A
    /// version recorded before directories' modes counted (`tree-c…`, `tree-s…`) is compared
    /// without them, or, as the builds of 2026-12-05 between `3941971` and `b29f531` took it,
    /// with them under the old prefix.
    fn tree_matches(&self, from: &Located, source: &VirtualPath, expected: &str) -> bool {
        let legacy = expected.starts_with("tree-c") || expected.starts_with("tree-s");
        if !legacy {
            return self.tree_version(from, source, true).as_deref() == Some(expected);
        }
        let lower = |version: String| version.replacen("tree-C", "tree-c", 1).replacen("tree-S", "tree-s", 1);
        self.tree_version(from, source, false).as_deref() == Some(expected)
            || self.tree_version(from, source, true).map(lower).as_deref() == Some(expected)
    }

    /// Gives a directory [`Context::restore_directory`] made the rest of its mode, while it is
    /// still the directory made (not another one moved to its path since) with the mode it was
    /// given then (a mode set since is kept). `false` when nothing was changed.
    pub(crate) fn finish_directory(&self, restored: &RestoredDirectory) -> Result<bool, Error> {
        if !restored.created {
            return Ok(false);
        }
        // `None`: made by a store with no directories of its own, which settles it as it stands.
        let made = match &restored.made {
            Some(made) if restored.set == restored.mode => return Ok(false),
            made => made.as_ref(),
        };
        let path = &restored.path;
        let located = self.locate::<gate::Write>(path, false, false)?;
        if Self::is_root(&located) {
            return Ok(false);
        }
        let store = self.store(located.mount);
        let _lock = store.lock(&located.node, path)?;
        store.finish_directory(&located, made, restored.mode, path)
    }

    /// Makes the directory at `input` (its parents too) with the umask's mode, or exactly the
    /// bits `exact`; with the identity of the one made and the bits it has, where the store
    /// has them.
    fn create_directory_once(
        &self,
        input: &str,
        exact: Option<u32>,
        make_parents: bool,
    ) -> Result<(CreateDirOutcome, Option<crate::storage::MadeAs>), Error> {
        let path = Self::parse(input)?;
        let (_claim, located) = self.under_write_claim(&path, || self.locate_directory_to_make(&path, make_parents))?;
        if Self::is_root(&located) {
            return Ok((CreateDirOutcome { path, created: false }, None));
        }
        let store = self.store(located.mount);
        match store.stat(&located.node, &path)? {
            Some(stat) if stat.kind == Kind::Directory => Ok((CreateDirOutcome { path, created: false }, None)),
            Some(_) => Err(Error::not_a_directory(&path)),
            None => {
                let located = self.authorize_write(located, &path)?;
                // Under the directory's lock, which a write beside it takes too.
                let _lock = store.lock(&located.node, &path)?;
                self.guard_git_directory(located.mount, &located.rel, Access::Write, &path)?;
                let image = self.keeps_images(&path).then_some(Image::Absent);
                self.intends(ChangeKind::MakeDirectory, &path, None, &Before::Absent, image.as_ref())
                    .inspect_err(|_| self.forget_image(image.as_ref()))?;
                let made = match exact {
                    Some(bits) => store.make_directory_exact(&located, bits, &path)?,
                    None if store.make_directory(&located, &path)? => MadeDirectory::Made(None),
                    None => MadeDirectory::Existed,
                };
                let MadeDirectory::Made(made) = made else {
                    return Ok((CreateDirOutcome { path, created: false }, None));
                };
                self.changed(ChangeKind::MakeDirectory, &path, None, &Before::Absent, None, image.as_ref());
                Ok((CreateDirOutcome { path, created: true }, made))
            }
        }
    }

    /// Moves `source_input` to `destination_input` when `at_source` holds of the source and
    /// `at_destination` of the destination, both checked under the directories' locks just
    /// before the rename. A directory at the destination is never replaced, whatever the
    /// precondition.
    pub(crate) fn move_path(
        &self,
        source_input: &str,
        destination_input: &str,
        at_source: &Precondition,
        at_destination: &Precondition,
    ) -> Result<MoveOutcome, Error> {
        let source = Self::parse(source_input)?;
        let destination = Self::parse(destination_input)?;
        // A guard on the source (an undo's) is looked at once before anything is claimed or
        // made, so that a move refused for its source makes no parent directory at its
        // destination; the check under the locks below is the one that decides.
        if matches!(at_source, Precondition::Version(_) | Precondition::Tree(_)) {
            let (from, stat) = self.move_source(&source, &destination)?;
            self.source_holds(&from, stat.kind, at_source, &source)?;
        }
        // Both ends stay claimed to the rename: no other move or delete can bring a protected
        // name into the source, or change the destination, in between.
        let Claimed { claim: _claim, from, from_stat, to } = self.claim_move(&source, &destination, at_destination)?;
        let (from_store, to_store) = (self.store(from.mount), self.store(to.mount));
        let _locks = crate::storage::lock_pair((from_store, &from.node, &source), (to_store, &to.node, &destination))?;
        // Again under the destination directory's lock, which a write beside it takes too: a
        // `HEAD` written there meanwhile would make an `objects` directory moved in a git
        // repository's look-alike.
        self.guard_git_directory(to.mount, &to.rel, Access::Write, &destination)?;
        self.source_holds(&from, from_stat.kind, at_source, &source)?;
        let existing = to_store.restat(&to.node, &destination)?;
        if existing.is_some_and(|stat| stat.kind == Kind::Directory) {
            return Err(Error::invalid_argument(agent_text![
                "cannot replace directory ",
                code(&destination),
                "; delete it first"
            ]));
        }
        // Checked under both directories' locks, just before the rename (a store without
        // locks has no conditional rename: its check is a look just before).
        let when = Self::destination_when(to_store, &to.node, at_destination, existing.is_some(), &destination)?;
        if source == destination || Self::same_file(from_store, &from.node, &source, existing)? {
            return Ok(MoveOutcome { source, destination, copied: false });
        }
        let before = match existing {
            Some(stat) => Before::File { size: stat.size, version: at_destination.version() },
            None => Before::Absent,
        };
        let overwrite = when != PutWhen::Absent;
        let keeps = self.keeps_images(&source) || self.keeps_images(&destination);
        let image = keeps.then(|| match existing {
            Some(stat) => self.file_image(to_store, &to.node, Some(stat.size), &destination),
            None => Image::Absent,
        });
        // The version at the destination after the move, for an undo's guard (a directory's:
        // its tree's, taken under the same locks as the rename).
        let moved_version = |keeps: bool| match from_stat.kind {
            Kind::File if keeps => to_store.version_now(&to.node, &destination).ok().flatten(),
            Kind::Directory if keeps => {
                let now = Located {
                    mount: to.mount,
                    rel: to.rel.clone(),
                    node: crate::storage::Backend::directory_now(&to.node),
                };
                Some(self.tree_version(&now, &destination, true).unwrap_or_else(|| super::TREE_UNKNOWN.to_owned()))
            }
            _ => None,
        };
        self.intends(ChangeKind::Move, &source, Some(&destination), &before, image.as_ref())
            .inspect_err(|_| self.forget_image(image.as_ref()))?;
        let forget = |_: &Error| self.forget_image(image.as_ref());
        if let Some(renamed) = crate::storage::rename(from_store, &from, to_store, &to, overwrite, &destination) {
            renamed.inspect_err(forget)?;
            let version = moved_version(keeps);
            self.changed(ChangeKind::Move, &source, Some(&destination), &before, version.as_deref(), image.as_ref());
            let copied = !from_store.capabilities().atomic_rename;
            return Ok(MoveOutcome { source, destination, copied });
        }
        // Another store, or another file system: copy, then delete (not atomic; a failure
        // between the two leaves both copies, never neither).
        if from_stat.kind != Kind::File {
            return Err(Error::invalid_argument(agent_text![
                "cannot move directory ",
                code(&source),
                " to another file system or store; move its files one by one"
            ]));
        }
        // The copy is durable before the source goes, even in a call that holds its syncs.
        crate::storage::local::syncing_directories_now(|| self.copy_file(&from, &source, &to, &destination, &when))
            .inspect_err(forget)?;
        from_store.remove(&from, Kind::File, &Removal::single(), &source)?;
        let version = moved_version(keeps);
        self.changed(ChangeKind::Move, &source, Some(&destination), &before, version.as_deref(), image.as_ref());
        Ok(MoveOutcome { source, destination, copied: true })
    }

    /// Checks `at_source` of a move's source `from`, a `kind`. A directory's version is its
    /// tree's (`Context::tree_version`): an undo moves a directory back only while it holds
    /// what the move left.
    fn source_holds(
        &self,
        from: &Located,
        kind: Kind,
        at_source: &Precondition,
        source: &VirtualPath,
    ) -> Result<(), Error> {
        match (kind, at_source) {
            (Kind::Directory, Precondition::Tree(expected)) => {
                if self.tree_matches(from, source, expected) {
                    Ok(())
                } else {
                    Err(Error::version_mismatch(source, NOT_A_TREE))
                }
            }
            (Kind::Directory, Precondition::Directory) => Ok(()),
            _ => Self::hold(self.store(from.mount), &from.node, at_source, source),
        }
    }

    /// True when the file at a move's destination (`existing`) is the source itself, another
    /// link to it: such a move, like one onto its own path, changes nothing (`rename(2)` does
    /// nothing), and no change is made or told.
    fn same_file(store: &Backend, from: &Node, source: &VirtualPath, existing: Option<Stat>) -> Result<bool, Error> {
        let Some(to) = existing else { return Ok(false) };
        Ok(to.identity.is_some() && store.restat(from, source)?.is_some_and(|from| from.identity == to.identity))
    }

    /// What a move may do at its destination, where something is (`present`) or not, under
    /// `precondition`.
    fn destination_when(
        store: &Backend,
        node: &Node,
        precondition: &Precondition,
        present: bool,
        destination: &VirtualPath,
    ) -> Result<PutWhen, Error> {
        match (precondition, present) {
            (Precondition::Absent, true) => Err(Error::already_exists(destination)),
            (Precondition::Absent, false) => Ok(PutWhen::Absent),
            (Precondition::Any, _) => Ok(PutWhen::Any),
            (Precondition::Version(expected), true) => {
                store.check_version(node, expected, destination)?;
                Ok(PutWhen::Any)
            }
            (Precondition::Version(_) | Precondition::Tree(_) | Precondition::Directory, false) => {
                Err(Error::version_mismatch(destination, NO_FILE))
            }
            (Precondition::Tree(_), true) => Err(Error::version_mismatch(destination, NOT_A_TREE)),
            (Precondition::Directory, true) => Err(Error::version_mismatch(destination, NOT_A_DIRECTORY)),
        }
    }

    /// Checks `precondition` of a place where something is (a delete's, a move's source),
    /// under the lock the caller holds.
    fn hold(store: &Backend, node: &Node, precondition: &Precondition, path: &VirtualPath) -> Result<(), Error> {
        match precondition {
            Precondition::Any => Ok(()),
            Precondition::Absent => Err(Error::exists(path)),
            Precondition::Version(expected) => store.check_version(node, expected, path),
            Precondition::Tree(_) => Err(Error::version_mismatch(path, NOT_A_TREE)),
            Precondition::Directory => Err(Error::version_mismatch(path, NOT_A_DIRECTORY)),
        }
    }

    /// Copies a file's content to another place, within the write cap.
    fn copy_file(
        &self,
        from: &Located,
        source: &VirtualPath,
        to: &Place<gate::Write>,
        destination: &VirtualPath,
        when: &PutWhen,
    ) -> Result<(), Error> {
        let (source_store, target_store) = (self.store(from.mount), self.store(to.mount));
        let cap = self.registry.limits.write_bytes;
        crate::storage::copy_file(source_store, &from.node, source, target_store, to, destination, when, cap)
    }

    pub(crate) fn delete(&self, input: &str, recursive: bool, guard: DeleteGuard<'_>) -> Result<DeleteOutcome, Error> {
        let path = Self::parse(input)?;
        // The tree stays claimed from the walk for protected names to the removal: no move can
        // bring one into it in between.
        let (_claim, located, stat) = self.claim_to_delete(&path, recursive)?;
        let store = self.store(located.mount);
        let seen = match guard {
            DeleteGuard::Seen(seen) => Some(seen),
            DeleteGuard::Expected(_) => None,
        };
        // Read before delete, for a tree: every file in it must be one the caller has seen at
        // its version. Looked at before anything is removed, so the usual refusal loses
        // nothing; judged again for each file as it is removed (`Removal::judge`), so a file
        // written into the tree in between is refused there.
        let judge =
            seen.map(|seen| move |file: &VirtualPath, current: Option<&str>| seen(file).check_file(file, current));
        if let Some(judge) = &judge
            && recursive
            && stat.kind == Kind::Directory
        {
            self.first_unseen(&located, &path, judge)?;
        }
        let _lock = store.lock(&located.node, &path)?;
        let precondition = match guard {
            DeleteGuard::Expected(precondition) => Some(precondition.clone()),
            DeleteGuard::Seen(seen) if stat.kind == Kind::File => Some(seen(&path)),
            // A directory or link, unguarded; if a file took its place since the look above,
            // the removal of a directory or link fails on it, and nothing unseen is lost.
            DeleteGuard::Seen(_) => None,
        };
        match &precondition {
            // The kind was looked at above; a file that took the directory's place since
            // fails the directory's removal, which is by kind (`rmdir`).
            Some(Precondition::Directory) if stat.kind == Kind::Directory => {}
            Some(precondition) => Self::hold(store, &located.node, precondition, &path)?,
            None => {}
        }
        let registry = self.registry;
        let keeps = self.keeps_images(&path);
        let keeping =
            (keeps && recursive && stat.kind == Kind::Directory).then(|| self.keeping(&located, &path)).flatten();
        let image = match &keeping {
            // Told to the intent as an empty tree: its items are linked as the removal goes.
            Some(_) => Some(Image::Tree { mode: super::directory_mode(&stat), items: Vec::new() }),
            // A directory removed alone is empty, or its removal fails: nothing in it is
            // imaged (linking its files would change their change times for nothing).
            None if !recursive && stat.kind == Kind::Directory => {
                keeps.then(|| Image::Tree { mode: super::directory_mode(&stat), items: Vec::new() })
            }
            None => keeps.then(|| self.removal_image(&located, &stat, &path)),
        };
        // A tree imaged before its removal: which of its files the removal took, in case it
        // stops part way.
        let taken = std::cell::RefCell::new(std::collections::HashSet::new());
        let took = |file: &VirtualPath| {
            taken.borrow_mut().insert(file.clone());
        };
        let removal = Removal {
            recursive,
            holds_mount: &|identity| registry.holds_mount(identity),
            judge: judge.as_ref().map(|judge| judge as &crate::storage::Judge<'_>),
            keep: keeping.as_ref(),
            took: matches!(image, Some(Image::Tree { .. })).then_some(&took as &dyn Fn(&VirtualPath)),
        };
        let before = removed_before(&stat, precondition.as_ref());
        self.intends(ChangeKind::Remove, &path, None, &before, image.as_ref())
            .inspect_err(|_| self.forget_image(image.as_ref()))?;
        let removed = store.remove(&located, stat.kind, &removal, &path);
        let taken = taken.into_inner();
        let image = match (keeping, image) {
            (Some(keeping), _) => {
                Some(self.kept_tree(keeping, super::directory_mode(&stat), removed.is_ok(), &taken, &path))
            }
            (None, Some(Image::Tree { items, .. })) if removed.is_err() => {
                let (gone, left): (Vec<TreeItem>, Vec<TreeItem>) = items
                    .into_iter()
                    .partition(|item| Self::tree_file(&path, item).is_some_and(|file| taken.contains(&file)));
                self.forget_kept(left.iter().filter_map(|item| item.content.as_ref()));
                self.tell_taken(gone, &taken, &path);
                Some(Image::NotKept("the removal stopped part way"))
            }
            (None, image) => image,
        };
        removed.inspect_err(|_| self.forget_image(image.as_ref()))?;
        self.changed(ChangeKind::Remove, &path, None, &before, None, image.as_ref());
        let kind = match stat.kind {
            Kind::Directory => "directory",
            Kind::Symlink => "link",
            Kind::File | Kind::Special => "file",
        };
        let not_undoable = not_undoable(image.as_ref());
        Ok(DeleteOutcome { path, kind, not_undoable })
    }

    /// The before image of what a removal at `located` takes, read before it (the caller
    /// holds the lock).
    fn removal_image(&self, located: &Located, stat: &Stat, path: &VirtualPath) -> Image {
        match stat.kind {
            Kind::File => self.file_image(self.store(located.mount), &located.node, Some(stat.size), path),
            Kind::Directory => self.tree_image(located, super::directory_mode(stat), path),
            Kind::Symlink => Image::NotKept("a link"),
            Kind::Special => Image::NotKept("a special file"),
        }
    }

    /// How a recursive removal of a local tree at `path` takes its image as it goes, when an
    /// observer offers a keeper: each file moved into the keeper under its directory's lock,
    /// in place of its removal (one pass, and exactly what the removal took). Elsewhere the
    /// image is taken first.
    fn keeping<'k>(&'k self, located: &Located, path: &'k VirtualPath) -> Option<crate::storage::TreeKeeping<'k>> {
        self.store(located.mount).local()?;
        let keeper = self.keeper()?;
        // On another file system nothing can be moved into the keeper: the image is copied.
        #[cfg_attr(not(feature = "s3"), expect(irrefutable_let_patterns, reason = "only local nodes without s3"))]
        let crate::storage::Node::Local(node) = &located.node else { return None };
        if !keeper.directory.same_file_system(&node.parent) {
            return None;
        }
        Some(crate::storage::TreeKeeping {
            keeper,
            call: &self.call,
            top: path,
            items: std::cell::RefCell::default(),
            refused: std::cell::Cell::new(None),
            cap: self.registry.limits.write_bytes,
            grows: Box::new(|file| self.grows(file)),
        })
    }

    /// The image a removal's keeping took: the tree, when the removal went through and
    /// every file was kept. A removal that went through without a whole image is not kept
    /// (what was kept is removed). One that stopped part way (a file written into a directory
    /// it had emptied) has removed the files it kept and the directories in `taken`: each is
    /// told as a change of its own (`Context::tell_taken`), so that what the failed call took
    /// can be put back.
    fn kept_tree(
        &self,
        keeping: crate::storage::TreeKeeping<'_>,
        mode: u32,
        removed: bool,
        taken: &std::collections::HashSet<VirtualPath>,
        path: &VirtualPath,
    ) -> Image {
        let refused = keeping.refused.get();
        let items = keeping.items.into_inner();
        if removed && refused.is_none() {
            return Image::Tree { mode, items };
        }
        if removed {
            self.forget_kept(items.iter().filter_map(|item| item.content.as_ref()));
            return Image::NotKept(refused.unwrap_or("the tree could not be read whole"));
        }
        self.tell_taken(items, taken, path);
        Image::NotKept("the removal stopped part way")
    }

    /// The virtual path of a tree image's item, under the tree at `top`.
    fn tree_file(top: &VirtualPath, item: &TreeItem) -> Option<VirtualPath> {
        VirtualPath::new(&format!("{top}/{}", item.relative)).ok()
    }

    /// Tells each file of `items` (the files a removal of the tree at `top` took before it
    /// stopped part way) as the removal of that one file, with its image, then each directory
    /// of `items` it removed (those in `taken`) as the removal of that empty directory, with
    /// its mode, so that what the failed call took can be put back. The directories come
    /// after the files and each after those below it (the items have parents first): an
    /// undo, newest first, makes each directory again before what goes in it. No lock is
    /// held any more.
    fn tell_taken(&self, items: Vec<TreeItem>, taken: &std::collections::HashSet<VirtualPath>, top: &VirtualPath) {
        let mut directories = Vec::new();
        for item in items {
            let file = Self::tree_file(top, &item);
            let Some(content) = item.content else {
                directories.extend(file.filter(|directory| taken.contains(directory)).map(|path| (path, item.mode)));
                continue;
            };
            let Some(file) = file else {
                self.forget_kept(std::iter::once(&content));
                continue;
            };
            let before = Before::File { size: content.len(), version: None };
            let image = Image::File { content, mode: item.mode };
            self.changed(ChangeKind::Remove, &file, None, &before, None, Some(&image));
        }
        for (directory, mode) in directories.into_iter().rev() {
            let image = Image::Tree { mode, items: Vec::new() };
            self.changed(ChangeKind::Remove, &directory, None, &Before::Directory, None, Some(&image));
        }
    }

    /// The directory at `input` (made if missing) as a keeper of before images.
    pub(crate) fn keeper_at(&self, input: &str) -> Result<crate::changes::Keeper, Error> {
        self.create_directory(input, true)?;
        let path = Self::parse(input)?;
        let located = self.locate::<gate::Read>(&path, false, false)?;
        let store = self.store(located.mount);
        let (Some(_), crate::storage::Node::Local(node)) = (store.local(), &located.node) else {
            return Err(Error::unsupported(&path));
        };
        let directory = crate::storage::local::KeepDirectory::open(node, &path)?;
        Ok(crate::changes::Keeper::new(directory, std::sync::Arc::downgrade(self.registry)))
    }

    pub(crate) fn remove_stages(&self, input: &str) -> Result<(), Error> {
        let path = Self::parse(input)?;
        let located = self.locate::<gate::Write>(&path, false, false)?;
        let store = self.store(located.mount);
        let (Some(_), crate::storage::Node::Local(node)) = (store.local(), &located.node) else {
            return Err(Error::unsupported(&path));
        };
        crate::storage::local::remove_stages(node, &path)
    }

    pub(crate) fn open_append(&self, input: &str) -> Result<AppendFile, Error> {
        let path = Self::parse(input)?;
        let located = self.locate::<gate::Write>(&path, false, true)?;
        if Self::is_root(&located) {
            return Err(Error::not_a_file(&path));
        }
        let file = self.store(located.mount).open_append(&located, &path)?;
        Ok(AppendFile { file, reserved_to: 0 })
    }
}
/// What a removal of what `stat` describes had there (a file's version when the removal was
/// guarded by one).
fn removed_before(stat: &Stat, precondition: Option<&Precondition>) -> Before {
    match stat.kind {
        Kind::Directory => Before::Directory,
        Kind::Symlink => Before::Link,
        Kind::File | Kind::Special => {
            Before::File { size: stat.size, version: precondition.and_then(Precondition::version) }
        }
    }
}

/// What a delete checks of what it removes, under the store's lock.
#[derive(Clone, Copy)]
pub(crate) enum DeleteGuard<'a> {
    /// One precondition of the place, whatever is there.
    Expected(&'a Precondition),
    /// Read before delete: the precondition of a file at each path (the version a session
    /// saw there, or `Absent` where it saw none), for the file named and for every file of a
    /// directory deleted with `recursive`. A link, and an empty directory, are not checked.
    Seen(&'a dyn Fn(&VirtualPath) -> Precondition),
}
