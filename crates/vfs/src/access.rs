//! The two ways in: the agent accessor and the privileged accessor.
//!
//! Tools hold an [`AgentAccessor`]: it sees agent-facing mounts only, and to it an internal root
//! does not exist. Infrastructure that must reach an internal root (the exchange logger) holds
//! a [`PrivilegedAccessor`], a distinct type that only
//! [`MountRegistry::mint_privileged`](crate::MountRegistry::mint_privileged) creates, for one
//! named root, and that reaches nothing else. Neither type can be turned into the other.

use crate::budget::{Budget, Deadline};
use crate::changes::{CallId, Keeper};
use crate::error::Error;
use crate::hint::Operation;
use crate::mount::Caller;
use crate::ops::{
    Context, CreateDirOutcome, DeleteOutcome, Edit, EditOptions, EditOutcome, FileInfo, FileResult, GrepRequest,
    GrepResult, Listing, MediaRead, MoveOutcome, NameSearch, Precondition, ReadWindow, RestoredDirectory, SizedListing,
    SortBy, StageFrom, TextRead, Tree, WriteOutcome,
};
use crate::path::VirtualPath;
use crate::registry::{MountInfo, MountRegistry};

impl MountRegistry {
    /// The accessor agents' tools use: agent-facing mounts only.
    #[must_use]
    pub fn agent(&self) -> AgentAccessor {
        AgentAccessor::new(self.clone())
    }

    /// Mints the privileged accessor for one internal root: the single place that creates one.
    ///
    /// # Privilege
    /// The accessor reaches `root` (an internal mount) and nothing else. Hold it in
    /// infrastructure only (the exchange logger); never hand it to a tool.
    ///
    /// Returns `None` when `root` is not an internal mount of this registry.
    #[must_use]
    pub fn mint_privileged(&self, root: &str) -> Option<PrivilegedAccessor> {
        let index =
            self.inner.mounts.iter().position(|mount| {
                mount.root.as_str() == root && mount.visibility == crate::mount::Visibility::Internal
            })?;
        Some(PrivilegedAccessor::new(self.clone(), index))
    }
}

/// What agents' tools use. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AgentAccessor {
    registry: MountRegistry,
    budget: Budget,
}

impl AgentAccessor {
    pub(crate) fn new(registry: MountRegistry) -> Self {
        let budget = Budget::unlimited().with_time(registry.limits().call_time);
        Self { registry, budget }
    }

    /// This accessor with another time budget and cancel flag for its calls (the default: the
    /// registry's [`Limits::call_time`](crate::Limits::call_time), no flag).
    #[must_use]
    pub fn with_budget(&self, budget: Budget) -> Self {
        Self { registry: self.registry.clone(), budget }
    }

    /// The budget this accessor's calls run under.
    #[must_use]
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Runs one operation on a fresh context with its own clock, and audits it. The clock is
    /// closed before the call returns, so its progress sink is never called after that.
    fn run<T: Audited>(
        &self,
        operation: Operation,
        path: &str,
        work: impl FnOnce(&Context<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let context =
            Context::new(&self.registry.inner, Caller::Agent, self.budget.start(operation), self.budget.call());
        let result = audited(Caller::Agent, operation, path, &context.call, || {
            let entered = context.deadline.enter();
            let result = work(&context);
            drop(entered);
            context.deadline.close();
            result
        });
        self.registry.inner.call_ended(&context.call);
        result
    }

    /// The agent-facing mounts with their rights and overrides.
    #[must_use]
    pub fn list_mounts(&self) -> Vec<MountInfo> {
        self.registry.agent_mounts()
    }

    /// Makes the writes to agent-facing mounts that a registry built with
    /// [`MountRegistryBuilder::defer_agent_syncs`](crate::MountRegistryBuilder::defer_agent_syncs)
    /// did not sync durable: one `syncfs` of each file system they lie on. Nothing to do for
    /// a registry that syncs each write (the default).
    ///
    /// # Errors
    /// A file system could not sync (the error carries no path).
    pub fn sync_deferred_writes(&self) -> std::io::Result<()> {
        self.sync_file_systems(|mount| mount.storage.local().is_some_and(|local| !local.syncs_each_write()))
    }

    /// One `syncfs` of each file system a local mount that `which` picks lies on.
    fn sync_file_systems(&self, which: impl Fn(&crate::registry::Mount) -> bool) -> std::io::Result<()> {
        let mut synced = std::collections::HashSet::new();
        for mount in self.registry.inner.mounts.iter().filter(|mount| which(mount)) {
            if let Some(local) = mount.storage.local()
                && synced.insert(local.identity().0)
            {
                local.sync_file_system()?;
            }
        }
        Ok(())
    }

    /// Runs `work` with the syncs of the writes it makes on this thread to agent-facing local
    /// mounts deferred, then makes them durable at once: one `syncfs` of each file system an
    /// agent-facing local mount lies on, before this returns. For a call that writes many
    /// files (an undo): each write stays atomic, and `work`'s writes are durable when this
    /// returns, as each would have been on its own. Internal roots (a journal) still sync
    /// each write.
    ///
    /// # Errors
    /// The second value: a file system could not sync (the error carries no path).
    pub fn with_syncs_deferred<T>(&self, work: impl FnOnce() -> T) -> (T, std::io::Result<()>) {
        let deferred = crate::storage::local::defer_syncs();
        let value = work();
        drop(deferred);
        (value, self.sync_file_systems(|mount| mount.visibility == crate::mount::Visibility::AgentFacing))
    }

    /// Runs `work` holding the directory syncs of the writes it makes on this thread to
    /// agent-facing local mounts: each write syncs its file before it commits, as always, and
    /// the sync of its directory is returned, to be made durable by
    /// [`AppendFile::sync_with`](crate::AppendFile::sync_with) of a file appended to after
    /// `work` (the journal's log), before the call is answered. Where that file lies on the
    /// same file system and the file system commits in order (ext4 with its journal, xfs),
    /// one sync then does what two did: a journaled write commits the file system's journal
    /// as often as a write without the journal (twice), not three times. Elsewhere the
    /// directories are synced at the same time as that file. A move across file systems
    /// syncs its copy at once. Other calls, internal roots and the FUSE view sync as before.
    pub fn with_directory_syncs_held<T>(&self, work: impl FnOnce() -> T) -> (T, crate::HeldSyncs) {
        let (value, held) = crate::storage::local::holding_directory_syncs(work);
        (value, crate::HeldSyncs::new(held))
    }

    /// Reads a text file, whole or a window of lines, bounded by the read cap.
    pub fn read_text(&self, path: &str, window: &ReadWindow) -> Result<TextRead, Error> {
        self.run(Operation::ReadText, path, |context| context.read_text(path, window))
    }

    /// Reads several text files; each gets its own result.
    pub fn read_multiple(&self, paths: &[String]) -> Result<Vec<FileResult>, Error> {
        self.run(Operation::ReadMultiple, "", |context| context.read_multiple(paths))
    }

    /// Reads an image or audio file as base64, bounded by the media cap.
    pub fn read_media(&self, path: &str) -> Result<MediaRead, Error> {
        self.run(Operation::ReadMedia, path, |context| context.read_media(path))
    }

    /// Writes a file atomically, when `precondition` holds at its place (checked under the
    /// directory's lock): [`Precondition::Absent`] creates only, [`Precondition::Any`] creates
    /// or replaces, [`Precondition::Version`] replaces only that version.
    pub fn write(&self, path: &str, content: &str, precondition: &Precondition) -> Result<WriteOutcome, Error> {
        self.run(Operation::Write, path, |context| context.write(path, content.as_bytes(), precondition))
    }

    /// Puts `content` back at `path` with exactly the permission bits `mode`, execute bits
    /// included (whatever the process's umask; never set-user-ID or set-group-ID), when `precondition`
    /// holds: what an undo restores (a journal's before image, whose mode is the one the file
    /// had before a change: no agent's write ever sets an execute bit).
    /// Binary content is welcome; rights and rules apply as to [`AgentAccessor::write`].
    pub fn restore(
        &self,
        path: &str,
        content: &[u8],
        mode: u32,
        precondition: &Precondition,
    ) -> Result<WriteOutcome, Error> {
        self.run(Operation::Restore, path, |context| context.write_mode(path, content, precondition, Some(mode)))
    }

    /// Applies exact-text edits to a file atomically and returns a unified diff.
    pub fn edit(&self, path: &str, edits: &[Edit], options: &EditOptions) -> Result<EditOutcome, Error> {
        self.run(Operation::Edit, path, |context| context.edit(path, edits, options))
    }

    /// Begins a staged write of a file: its next content, built at offsets and committed
    /// whole ([`StagedWrite::commit`]) or dropped, so a reader sees the old content or the new,
    /// never part of a write. The place is authorized for writing now (and its parents are
    /// made, as a write makes them); at most the registry's write cap in bytes. For a front
    /// end that writes files piece by piece (a file system view).
    pub fn stage(&self, path: &str, from: StageFrom) -> Result<StagedWrite, Error> {
        self.stage_with(path, from, true)
    }

    /// [`AgentAccessor::stage`] of a file whose directory must be there: its parents are not
    /// made. For a view's file that is open, or made in a directory it found: a directory
    /// removed beside the view since is not brought back, and the stage is refused as not
    /// found.
    pub fn stage_in_place(&self, path: &str, from: StageFrom) -> Result<StagedWrite, Error> {
        self.stage_with(path, from, false)
    }

    fn stage_with(&self, path: &str, from: StageFrom, make_parents: bool) -> Result<StagedWrite, Error> {
        let call = self.budget.call();
        let (path, place, staged) =
            self.run(Operation::Write, path, |context| context.stage(path, from, make_parents))?;
        Ok(StagedWrite { registry: self.registry.clone(), caller: Caller::Agent, call, path, place, staged })
    }

    /// Creates a directory and its parents; succeeds if it exists.
    pub fn create_directory(&self, path: &str) -> Result<CreateDirOutcome, Error> {
        self.run(Operation::CreateDirectory, path, |context| context.create_directory(path, true))
    }

    /// Creates the directory at `path` in a parent that is there, as `mkdir(2)` does (a front
    /// end's: a parent removed or moved away since the caller found it is `NotFound`, never
    /// made again); succeeds if it exists.
    pub fn make_directory(&self, path: &str) -> Result<CreateDirOutcome, Error> {
        self.run(Operation::CreateDirectory, path, |context| context.create_directory(path, false))
    }

    /// Puts back a directory an undo restores, with its mode (permissions, sticky,
    /// set-user-ID and set-group-ID bits, as a tree image kept them), its parents made as
    /// [`AgentAccessor::create_directory`] makes them: made with those bits and the owner's
    /// read, write and search bits for now (so that what went in it can be put back), the
    /// rest given by [`AgentAccessor::finish_directory`]. A directory there already is left as
    /// it is (`created` false). Rights and rules apply as to `create_directory`.
    pub fn restore_directory(&self, path: &str, mode: u32) -> Result<RestoredDirectory, Error> {
        self.run(Operation::Restore, path, |context| context.restore_directory(path, mode))
    }

    /// Gives a directory [`AgentAccessor::restore_directory`] made the rest of its mode, once
    /// what goes in it is back, while it is the directory made then, with the mode it was
    /// given then: a directory moved to its path since, or given another mode, is left as it
    /// is. `false` when nothing was changed.
    pub fn finish_directory(&self, restored: &RestoredDirectory) -> Result<bool, Error> {
        self.run(Operation::Restore, restored.path.as_str(), |context| context.finish_directory(restored))
    }

    /// Lists a directory (`/` lists the agent-facing mounts).
    pub fn list(&self, path: &str) -> Result<Listing, Error> {
        self.run(Operation::List, path, |context| context.list(path))
    }

    /// Lists a directory with each file's size and the totals.
    pub fn list_with_sizes(&self, path: &str, sort: SortBy) -> Result<SizedListing, Error> {
        self.run(Operation::ListSized, path, |context| context.list_sized(path, sort))
    }

    /// A bounded recursive tree.
    pub fn tree(&self, path: &str, max_depth: Option<usize>, excludes: &[String]) -> Result<Tree, Error> {
        self.run(Operation::Tree, path, |context| context.tree(path, max_depth, excludes))
    }

    /// Finds files and directories whose names match a glob.
    pub fn search_files(&self, path: &str, pattern: &str, excludes: &[String]) -> Result<NameSearch, Error> {
        self.run(Operation::SearchNames, path, |context| context.search_files(path, pattern, excludes))
    }

    /// Searches file contents with the ripgrep crates.
    pub fn grep(&self, request: &GrepRequest) -> Result<GrepResult, Error> {
        self.run(Operation::Grep, request.path.as_deref().unwrap_or("/"), |context| context.grep(request))
    }

    /// Size, kind, times, rights and the version token.
    pub fn info(&self, path: &str) -> Result<FileInfo, Error> {
        self.run(Operation::Info, path, |context| context.info(path))
    }

    /// Moves or renames a file or directory, when `at_source` holds of the source
    /// ([`Precondition::Any`], or the version it must be at) and `at_destination` of the
    /// destination: [`Precondition::Absent`] (nothing may be there), [`Precondition::Any`] (a
    /// file there is replaced), or [`Precondition::Version`] (only the file at that version is
    /// replaced; a read-before-edit session passes the version it saw there). A directory at
    /// the destination is never replaced. Both are checked under the directories' locks, just
    /// before the rename.
    pub fn move_path(
        &self,
        source: &str,
        destination: &str,
        at_source: &Precondition,
        at_destination: &Precondition,
    ) -> Result<MoveOutcome, Error> {
        self.run(Operation::Move, source, |context| context.move_path(source, destination, at_source, at_destination))
    }

    /// Deletes a file, a link, or (with `recursive`) a directory tree, when `precondition`
    /// holds of what is there (checked under the store's lock; [`Precondition::Version`]
    /// for a file's version).
    pub fn delete(&self, path: &str, recursive: bool, precondition: &Precondition) -> Result<DeleteOutcome, Error> {
        self.run(Operation::Delete, path, |context| {
            context.delete(path, recursive, crate::ops::DeleteGuard::Expected(precondition))
        })
    }

    /// Deletes as [`AgentAccessor::delete`], for a caller that may delete only files it has
    /// seen: `seen` gives the precondition of a file at a virtual path (the version the caller
    /// saw there, or [`Precondition::Absent`] where it saw none). A file at the place must meet
    /// it, checked under the store's lock; with `recursive`, so must every regular file in the
    /// directory, checked before anything is removed and again as each file is. A refusal is
    /// an error whose [`Error::unmet`] says which precondition did not hold and whose
    /// [`Error::path`] names the file. A link, or an empty directory, is deleted as by
    /// `delete`.
    pub fn delete_seen(
        &self,
        path: &str,
        recursive: bool,
        seen: &dyn Fn(&VirtualPath) -> Precondition,
    ) -> Result<DeleteOutcome, Error> {
        self.run(Operation::Delete, path, |context| {
            context.delete(path, recursive, crate::ops::DeleteGuard::Seen(seen))
        })
    }
}

/// What a file-system view asks (`crates/vfs/src/ops/view.rs`): the same gate as the tools,
/// answers shaped for `getattr`, `read` and `readdir`.
impl AgentAccessor {
    /// The attributes at `path` (no content is read: no version is computed).
    pub fn attributes(&self, path: &str) -> Result<crate::ops::Attributes, Error> {
        self.run(Operation::Attributes, path, |context| context.attributes(path))
    }

    /// What is at `path` itself, a link not followed: a link is [`EntryKind::Link`](crate::EntryKind::Link),
    /// whatever it names (an undo that finds a tree's directory there must not take a link to
    /// another for it).
    pub fn kind_at(&self, path: &str) -> Result<crate::EntryKind, Error> {
        self.run(Operation::Attributes, path, |context| context.kind_at(path))
    }

    /// At most `len` bytes (and at most [`VIEW_READ_BYTES`](crate::VIEW_READ_BYTES)) of the
    /// file at `path` from `offset`: fewer at its end, none past it.
    pub fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, Error> {
        self.run(Operation::ReadAt, path, |context| context.read_at(path, offset, len))
    }

    /// Every entry of a directory, up to `Limits::view_entries` (by default [`VIEW_ENTRIES`](crate::VIEW_ENTRIES)) (`/` and a
    /// virtual parent list the roots below them).
    pub fn entries(&self, path: &str) -> Result<Listing, Error> {
        self.run(Operation::Entries, path, |context| context.entries(path))
    }

    /// Opens the file at `path` for reading at offsets, authorized once, now: its reads go to
    /// the file opened (as reads of an open file do), even if it is replaced, moved or removed
    /// meanwhile. A directory is refused as not a file.
    pub fn open_read(&self, path: &str) -> Result<ReadHandle, Error> {
        let file = self.run(Operation::OpenRead, path, |context| context.open_read(path))?;
        Ok(ReadHandle { reader: Reader::Agent(self.clone()), file })
    }
}

/// A file opened for reading by an agent's front end (see [`AgentAccessor::open_read`]) or by
/// infrastructure ([`PrivilegedAccessor::open_read`]).
#[derive(Debug)]
pub struct ReadHandle {
    reader: Reader,
    file: crate::ops::ViewFile,
}

/// Who opened a [`ReadHandle`]: a file an object store cannot hold open is read again through
/// them.
#[derive(Debug)]
enum Reader {
    Agent(AgentAccessor),
    Privileged(PrivilegedAccessor),
}

impl ReadHandle {
    /// The virtual path opened.
    #[must_use]
    pub fn path(&self) -> &VirtualPath {
        &self.file.path
    }

    /// The file's size when it was opened.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.file.size
    }

    /// What the file was at the open, where its store can tell: equal stamps of two opens mean
    /// the same content, so a view may keep what it cached.
    #[must_use]
    pub fn stamp(&self) -> Option<crate::FileStamp> {
        self.file.stamp
    }

    /// At most `len` bytes (and at most [`VIEW_READ_BYTES`](crate::VIEW_READ_BYTES)) from
    /// `offset`: fewer at the end, none past it. A file of an object store is read through the
    /// gate again, as [`AgentAccessor::read_at`] reads it.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, Error> {
        match self.file.read_at(offset, len) {
            Some(result) => result,
            None => match &self.reader {
                Reader::Agent(accessor) => accessor.read_at(self.file.path.as_str(), offset, len),
                Reader::Privileged(accessor) => accessor.read_at(self.file.path.as_str(), offset, len),
            },
        }
    }
}

/// A file's next content being built by an agent's front end (see [`AgentAccessor::stage`])
/// or by infrastructure ([`PrivilegedAccessor::stage`]). Dropped without a commit, it leaves
/// the file as it was and nothing behind.
pub struct StagedWrite {
    registry: MountRegistry,
    /// Who began it: the commit is authorized and audited as theirs.
    caller: Caller,
    call: CallId,
    path: VirtualPath,
    place: crate::gate::Place<crate::gate::Write>,
    staged: crate::storage::Staged,
}

impl std::fmt::Debug for StagedWrite {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StagedWrite")
            .field("path", &self.path)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl StagedWrite {
    /// The file this stage will write.
    #[must_use]
    pub fn path(&self) -> &VirtualPath {
        &self.path
    }

    /// The staged content's length.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.staged.len()
    }

    /// True when nothing is staged.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes `bytes` at `offset`; a gap past the end reads as zeros.
    pub fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<(), Error> {
        self.staged.write_at(offset, bytes, &self.path)
    }

    /// Flushes what is staged so far to stable storage, so that the commit's own sync has
    /// only what is written after to flush: for a large content put in place while a lock
    /// is held, the bulk is synced before the lock is taken.
    pub fn sync(&self) -> Result<(), Error> {
        self.staged.sync(&self.path)
    }

    /// Cuts the content to `len` bytes, or extends it with zeros.
    pub fn set_len(&mut self, len: u64) -> Result<(), Error> {
        self.staged.set_len(len, &self.path)
    }

    /// At most `len` bytes of the staged content from `offset`: what a reader of the file
    /// through the same open handle sees before the commit.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>, Error> {
        self.staged.read_at(offset, len.min(crate::VIEW_READ_BYTES), &self.path)
    }

    /// Puts the staged content in the file at once, when `precondition` holds then (checked
    /// under the directory's lock), and tells the change feed.
    pub fn commit(self, precondition: &Precondition) -> Result<WriteOutcome, Error> {
        self.commit_or_keep(precondition).map_err(|(error, _)| error)
    }

    /// [`StagedWrite::commit`], with the stage handed back when the commit was refused before
    /// anything was put (`precondition` did not hold, say): for a caller that builds the next
    /// content from what it staged (a view's appends, put at the end of the file as it is
    /// now). The stage handed back is for reading: its call has ended, so a new stage is
    /// the one to commit.
    pub fn commit_or_keep(
        self,
        precondition: &Precondition,
    ) -> Result<WriteOutcome, (Error, Option<Box<StagedWrite>>)> {
        let StagedWrite { registry, caller, call, path, place, staged } = self;
        let mut staged = Some(staged);
        let context = Context::new(&registry.inner, caller, Deadline::never(), call.clone());
        let result = audited(caller, Operation::Write, path.as_str(), &call, || {
            context.commit_staged(&path, &place, &mut staged, precondition)
        });
        drop(context);
        registry.inner.call_ended(&call);
        result.map_err(|error| {
            let kept = staged.map(|staged| Box::new(StagedWrite { registry, caller, call, path, place, staged }));
            (error, kept)
        })
    }
}

/// The capability to reach one internal root. Only
/// [`MountRegistry::mint_privileged`](crate::MountRegistry::mint_privileged) creates one (and
/// [`WeakPrivilegedAccessor::upgrade`] gives back one made so, to its holder).
///
/// # Privilege
/// Every method reaches the internal root this accessor was minted for, and only that root:
/// a path under any other root gets the same answer as a root that does not exist.
#[derive(Debug)]
pub struct PrivilegedAccessor {
    registry: MountRegistry,
    mount: usize,
}

impl PrivilegedAccessor {
    pub(crate) fn new(registry: MountRegistry, mount: usize) -> Self {
        Self { registry, mount }
    }

    fn caller(&self) -> Caller {
        Caller::Privileged(self.mount)
    }

    /// Runs one operation (infrastructure's own calls have no time budget), and audits it.
    fn run<T: Audited>(
        &self,
        operation: Operation,
        path: &str,
        work: impl FnOnce(&Context<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let context = Context::new(&self.registry.inner, self.caller(), Deadline::never(), CallId::new());
        let result = audited(self.caller(), operation, path, &context.call, || {
            let _entered = context.deadline.enter();
            work(&context)
        });
        self.registry.inner.call_ended(&context.call);
        result
    }

    /// The root this accessor reaches.
    #[must_use]
    pub fn root(&self) -> &str {
        self.registry.inner.mounts[self.mount].root.as_str()
    }

    /// Reads a text file under the root.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn read_text(&self, path: &str, window: &ReadWindow) -> Result<TextRead, Error> {
        self.run(Operation::ReadText, path, |context| context.read_text(path, window))
    }

    /// Writes a file under the root atomically, when `precondition` holds at its place (as
    /// [`AgentAccessor::write`]).
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn write(&self, path: &str, content: &[u8], precondition: &Precondition) -> Result<WriteOutcome, Error> {
        self.run(Operation::Write, path, |context| context.write(path, content, precondition))
    }

    /// Opens a file under the root for reading at offsets (as [`AgentAccessor::open_read`]):
    /// its reads go to the file opened, even if it is replaced meanwhile, so that a reader of
    /// a file that another process rewrites and renames into place reads one version whole.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn open_read(&self, path: &str) -> Result<ReadHandle, Error> {
        let file = self.run(Operation::OpenRead, path, |context| context.open_read(path))?;
        Ok(ReadHandle { reader: Reader::Privileged(Self::new(self.registry.clone(), self.mount)), file })
    }

    /// Begins a staged write of a file under the root (as [`AgentAccessor::stage`]): for
    /// content built a piece at a time, larger than one should hold in memory, put in place
    /// at once by [`StagedWrite::commit`].
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn stage(&self, path: &str, from: StageFrom) -> Result<StagedWrite, Error> {
        let call = CallId::new();
        let context = Context::new(&self.registry.inner, self.caller(), Deadline::never(), call.clone());
        let result = audited(self.caller(), Operation::Write, path, &call, || context.stage(path, from, true));
        self.registry.inner.call_ended(&call);
        let (path, place, staged) = result?;
        Ok(StagedWrite { registry: self.registry.clone(), caller: self.caller(), call, path, place, staged })
    }

    /// Lists a directory under the root.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn list(&self, path: &str) -> Result<Listing, Error> {
        self.run(Operation::List, path, |context| context.list(path))
    }

    /// Every entry of a directory under the root, up to `Limits::view_entries` (by default [`VIEW_ENTRIES`](crate::VIEW_ENTRIES))
    /// (a listing stops at the agents' entry bound).
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn entries(&self, path: &str) -> Result<Listing, Error> {
        self.run(Operation::Entries, path, |context| context.entries(path))
    }

    /// The bytes of a file under the root, up to `len` from `offset`.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn read_at(&self, path: &str, offset: u64, len: usize) -> Result<Vec<u8>, Error> {
        self.run(Operation::ReadAt, path, |context| context.read_at(path, offset, len))
    }

    /// Deletes a file or a directory (with `recursive`) under the root.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn delete(&self, path: &str, recursive: bool) -> Result<DeleteOutcome, Error> {
        self.run(Operation::Delete, path, |context| {
            context.delete(path, recursive, crate::ops::DeleteGuard::Expected(&Precondition::Any))
        })
    }

    /// Opens (creating if needed) a file under the root for appending.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn open_append(&self, path: &str) -> Result<crate::ops::AppendFile, Error> {
        self.run(Operation::OpenAppend, path, |context| context.open_append(path))
    }

    /// The directory at `path` under the root (made if missing) as a [`Keeper`]: where an
    /// observer that offers it ([`ChangeObserver::keeper`](crate::ChangeObserver::keeper))
    /// has the operations keep before images by hard link.
    ///
    /// # Errors
    /// The path is not a directory, or the root is not a local directory (object storage
    /// cannot link: its images are copied).
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn keeper(&self, path: &str) -> Result<Keeper, Error> {
        self.run(Operation::Keeper, path, |context| context.keeper_at(path))
    }

    /// Removes from the directory at `path` under the root the temporary files of staged
    /// writes ([`PrivilegedAccessor::stage`]) that a process killed during its stage left
    /// there: they are never listed, and would stay for good. Only for a caller that knows
    /// that no stage into that directory is in flight (one's file would be removed under it,
    /// and its commit fail).
    ///
    /// # Errors
    /// The path is not a directory, or not on a local directory (an object store's stage
    /// leaves no file).
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn remove_stages(&self, path: &str) -> Result<(), Error> {
        self.run(Operation::RemoveStages, path, |context| context.remove_stages(path))
    }

    /// Narrows this capability to appending: the form a logger holds.
    #[must_use]
    pub fn into_append_only(self) -> AppendOnlyAccessor {
        AppendOnlyAccessor { inner: self }
    }

    /// This capability, held without keeping its registry alive: the form an observer of
    /// the registry holds ([`MountRegistryBuilder::observe`](crate::MountRegistryBuilder::observe)).
    /// The registry holds its observers; one that held its registry would keep both, and
    /// every file and lock either holds, for as long as the process lives.
    #[must_use]
    pub fn downgrade(&self) -> WeakPrivilegedAccessor {
        WeakPrivilegedAccessor { registry: std::sync::Arc::downgrade(&self.registry.inner), mount: self.mount }
    }
}

/// A [`PrivilegedAccessor`] that does not keep its registry alive
/// ([`PrivilegedAccessor::downgrade`]).
///
/// # Privilege
/// Reaches the internal root it was downgraded from, while its registry lives.
#[derive(Debug)]
pub struct WeakPrivilegedAccessor {
    registry: std::sync::Weak<crate::registry::RegistryInner>,
    mount: usize,
}

impl WeakPrivilegedAccessor {
    /// The capability, while its registry lives (someone else holds it); `None` once it is
    /// gone.
    #[must_use]
    pub fn upgrade(&self) -> Option<PrivilegedAccessor> {
        let inner = self.registry.upgrade()?;
        Some(PrivilegedAccessor::new(MountRegistry { inner }, self.mount))
    }
}

/// An append-only capability for one internal root: it creates files and appends to them,
/// and can neither read, replace nor delete anything.
///
/// # Privilege
/// Reaches the internal root it was narrowed from.
#[derive(Debug)]
pub struct AppendOnlyAccessor {
    inner: PrivilegedAccessor,
}

impl AppendOnlyAccessor {
    /// The root this accessor reaches.
    #[must_use]
    pub fn root(&self) -> &str {
        self.inner.root()
    }

    /// Opens (creating if needed) a file under the root for appending.
    ///
    /// # Privilege
    /// Reaches the internal root.
    pub fn open_append(&self, path: &str) -> Result<crate::ops::AppendFile, Error> {
        self.inner.run(Operation::OpenAppend, path, |context| context.open_append(path))
    }
}

/// How many bytes an operation's result carries, for its audit event.
trait Audited {
    fn bytes(&self) -> u64 {
        0
    }
}

impl Audited for TextRead {
    fn bytes(&self) -> u64 {
        self.content.len() as u64
    }
}

impl Audited for MediaRead {
    fn bytes(&self) -> u64 {
        self.size
    }
}

impl Audited for WriteOutcome {
    fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Audited for Vec<FileResult> {
    fn bytes(&self) -> u64 {
        self.iter().filter_map(|(_, result)| result.as_ref().ok()).map(Audited::bytes).sum()
    }
}

impl Audited for Vec<u8> {
    fn bytes(&self) -> u64 {
        self.len() as u64
    }
}

impl Audited for crate::ops::Attributes {}
impl Audited for crate::ops::ViewFile {}
impl Audited for EditOutcome {}
impl Audited for CreateDirOutcome {}
impl Audited for bool {}
impl Audited for crate::EntryKind {}
impl Audited for RestoredDirectory {}
impl Audited for Listing {}
impl Audited for SizedListing {}
impl Audited for Tree {}
impl Audited for NameSearch {}
impl Audited for GrepResult {}
impl Audited for FileInfo {}
impl Audited for MoveOutcome {}
impl Audited for DeleteOutcome {}
impl Audited for crate::ops::AppendFile {}
impl Audited for Keeper {}
impl Audited for () {}
impl Audited for (VirtualPath, crate::gate::Place<crate::gate::Write>, crate::storage::Staged) {}

/// The one audit wrapper: runs an operation and records one `vfs::audit` event for it, success
/// or failure, with the operation, the virtual path as given, the bytes it carried and who
/// asked; never content and never a physical path.
fn audited<T: Audited>(
    caller: Caller,
    operation: Operation,
    path: &str,
    call: &CallId,
    run: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    let result = run();
    let caller = match caller {
        Caller::Agent => "agent",
        Caller::Privileged(_) => "privileged",
    };
    let call = call.as_str();
    let operation = operation.name();
    match &result {
        Ok(value) => {
            tracing::debug!(target: "vfs::audit", call, operation, path, bytes = value.bytes(), caller, outcome = "ok");
        }
        Err(error) => {
            tracing::debug!(
                target: "vfs::audit",
                call,
                operation,
                path,
                bytes = 0u64,
                caller,
                outcome = ?error.kind()
            );
        }
    }
    result
}
