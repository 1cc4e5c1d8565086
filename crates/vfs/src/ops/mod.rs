//! File operations, written once over the storage seam for every store and every caller.
//!
//! Each operation follows the same shape (`docs/design.md`, resolution rules): parse the virtual
//! path, route it to a mount, let the mount's store locate it (a local store resolves beneath
//! the mount's handle and may land in a nested mount), ask the registry for the rights on the
//! *effective* mount and canonical path the store reached, act on the place through the
//! store's primitives, and describe the outcome in virtual paths only. What differs between
//! stores is asked of their [`Capabilities`](crate::Capabilities), never of their kind. Every
//! result is bounded and says when it was truncated and how to narrow.

mod edit;
mod grep;
mod pattern;
mod read;
mod view;
mod walk;
mod write;

pub use edit::{Edit, EditOptions, EditOutcome};

pub use grep::{GrepLine, GrepRequest, GrepResult};
pub use read::{FileInfo, FileResult, MediaRead, ReadOn, ReadWindow, TextRead};
pub(crate) use view::ViewFile;
pub use view::{Attributes, FileStamp, VIEW_ENTRIES, VIEW_READ_BYTES};
pub use walk::{EntryKind, ListEntry, Listing, NameSearch, SizedEntry, SizedListing, SortBy, Tree, TreeNode};
pub use write::{
    AppendFile, CreateDirOutcome, DeleteOutcome, HeldSyncs, MoveOutcome, Precondition, RestoredDirectory, StageFrom,
    WriteOutcome,
};
pub(crate) use write::{DeleteGuard, NO_FILE};

use std::sync::Arc;

use crate::budget::Deadline;
use crate::changes::{Before, CallId, Change, ChangeKind, Image, Saved, TreeItem};
use crate::error::Error;
use crate::mount::Caller;
use crate::path::VirtualPath;
use crate::registry::{Claim, Place, RegistryInner, TreeChange, View};
use crate::spec::Access;
use crate::storage::{Backend, Flow, Kind, Located, Resolve, Stat};

/// The most bytes a directory move's tree version reads (see [`Context::tree_version`]):
/// above it, the tree is hashed by its files' sizes and times instead of their contents.
pub(crate) const TREE_READ_BYTES: u64 = 16 * 1024 * 1024;

/// Why a tree's image is not kept where its files' images together pass what the journal can
/// keep beside its log (or one file's alone: [`crate::changes::PAST_THE_BOUND`]).
const PAST_THE_BOUND_TREE: &str = "its copies would pass the journal's bound";

/// The version a journaled directory move records when its tree could not be walked whole in
/// the call's time: no tree hashes to it, so the move's undo is a conflict, never a move back
/// without a guard.
pub(crate) const TREE_UNKNOWN: &str = "tree-unknown";

/// The names git looks for beside `HEAD` to take a directory for a repository.
const BESIDE_HEAD: [&str; 3] = ["objects", "refs", "commondir"];

/// True when `name` is one the git guard watches ([`Context::guard_git_directory`]).
pub(crate) fn is_git_marker(name: &str) -> bool {
    name.eq_ignore_ascii_case("HEAD") || BESIDE_HEAD.iter().any(|marker| name.eq_ignore_ascii_case(marker))
}

/// One request's view: the registry, who is asking, the call's clock, and its id.
pub(crate) struct Context<'r> {
    /// Shared (not only borrowed), so that work handed to the registry's worker pool can hold it.
    pub(crate) registry: &'r Arc<RegistryInner>,
    pub(crate) caller: Caller,
    pub(crate) deadline: Arc<Deadline>,
    pub(crate) call: CallId,
}

impl<'r> Context<'r> {
    pub(crate) fn new(registry: &'r Arc<RegistryInner>, caller: Caller, deadline: Deadline, call: CallId) -> Self {
        Self { registry, caller, deadline: Arc::new(deadline), call }
    }

    /// Tells the registry's observers of a change this call committed (`crate::changes`),
    /// with its before image when [`Context::keeps_images`] asked for it; the caller still
    /// holds the change's lock.
    pub(crate) fn changed(
        &self,
        kind: ChangeKind,
        path: &VirtualPath,
        to: Option<&VirtualPath>,
        before: &Before,
        version: Option<&str>,
        image: Option<&Image>,
    ) {
        self.tell(&Change {
            call: &self.call,
            by_agent: self.caller == Caller::Agent,
            kind,
            path,
            to,
            before,
            version,
            image,
            on_the_way: false,
        });
    }

    /// Tells the observers of a directory made on the way to a change of this call.
    pub(crate) fn made_on_the_way(&self, path: &VirtualPath, image: Option<&Image>) {
        self.tell(&Change {
            call: &self.call,
            by_agent: self.caller == Caller::Agent,
            kind: ChangeKind::MakeDirectory,
            path,
            to: None,
            before: &Before::Absent,
            version: None,
            image,
            on_the_way: true,
        });
    }

    fn tell(&self, change: &Change<'_>) {
        let change = *change;
        for observer in &self.registry.observers {
            observer.changed(&change);
        }
        let subscribers = self.registry.subscribers.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, observer) in &subscribers.observers {
            observer.changed(&change);
        }
    }

    /// True when some observer keeps the before image of a change at `path`.
    pub(crate) fn keeps_images(&self, path: &VirtualPath) -> bool {
        let by_agent = self.caller == Caller::Agent;
        self.registry.observers.iter().any(|observer| observer.keeps_images(path, by_agent))
    }

    /// Tells the observers that keep images of the change about to be made (its image just
    /// taken, the lock held): [`ChangeObserver::intends`](crate::ChangeObserver::intends).
    /// An observer that cannot keep its record refuses the change: the caller forgets the
    /// image and answers the error, changing nothing.
    pub(crate) fn intends(
        &self,
        kind: ChangeKind,
        path: &VirtualPath,
        to: Option<&VirtualPath>,
        before: &Before,
        image: Option<&Image>,
    ) -> Result<(), Error> {
        let Some(image) = image else { return Ok(()) };
        let by_agent = self.caller == Caller::Agent;
        let change = Change {
            call: &self.call,
            by_agent,
            kind,
            path,
            to,
            before,
            version: None,
            image: Some(image),
            on_the_way: false,
        };
        if self.recorded(path, "a change was refused", |observer| observer.intends(&change)) {
            Ok(())
        } else {
            Err(Error::not_journaled(path))
        }
    }

    /// True when every observer that keeps images of `path` agrees (`ask`) to record it; the
    /// first that cannot has its reason in the operator's log, after `refused`.
    fn recorded(
        &self,
        path: &VirtualPath,
        refused: &str,
        ask: impl Fn(&dyn crate::ChangeObserver) -> Result<(), String>,
    ) -> bool {
        let by_agent = self.caller == Caller::Agent;
        for observer in &self.registry.observers {
            if observer.keeps_images(path, by_agent)
                && let Err(reason) = ask(observer.as_ref())
            {
                tracing::warn!(
                    target: "vfs::journal",
                    call = self.call.as_str(),
                    path = path.as_str(),
                    reason,
                    "{refused}: its record could not be kept"
                );
                return false;
            }
        }
        true
    }

    /// Tells the observers that keep images that a removal keeping its tree as it goes is
    /// about to keep `file` ([`ChangeObserver::grows`](crate::ChangeObserver::grows)); false
    /// when one cannot record it (the removal stops there).
    pub(crate) fn grows(&self, file: &VirtualPath) -> bool {
        self.recorded(file, "a removal stopped", |observer| observer.grows(&self.call, file))
    }

    /// The keeper of the first observer that offers one.
    fn keeper(&self) -> Option<&crate::changes::Keeper> {
        self.registry.observers.iter().find_map(|observer| observer.keeper())
    }

    /// A file's content kept by hard link in the observers' keeper, when there is one and
    /// the store and the file allow (`storage::local::KeepDirectory::link`); with its mode.
    /// Above the write cap it is not kept (an undo could not write it back).
    /// `size`: the file's size, when the caller has just looked (an object store then need not
    /// be asked again).
    fn kept(
        &self,
        store: &Backend,
        node: &crate::storage::Node,
        size: Option<u64>,
    ) -> Option<Result<(Saved, u32), Image>> {
        let keeper = self.keeper()?;
        #[cfg(feature = "s3")]
        if let (Backend::Object(object), crate::storage::Node::Object(node)) = (store, node) {
            return self.kept_by_store(keeper, object, node, size);
        }
        #[cfg(not(feature = "s3"))]
        let _ = size;
        store.local()?;
        #[cfg_attr(not(feature = "s3"), expect(irrefutable_let_patterns, reason = "only local nodes without s3"))]
        let crate::storage::Node::Local(node) = node else { return None };
        let name = keeper.fresh_name(&self.call);
        let (size, mode) = keeper.directory.link(node, &name)?;
        if size > self.registry.limits.write_bytes {
            keeper.forget(&name);
            return Some(Err(Image::NotKept("above the write cap")));
        }
        if size > keeper.stored_bound() {
            keeper.forget(&name);
            return Some(Err(Image::NotKept(crate::changes::PAST_THE_BOUND)));
        }
        Some(Ok((Saved::Kept { name, size }, mode)))
    }

    /// An object's content kept by a copy its store makes itself into its mount's image area
    /// (`ObjectRoot::keep_copy`); its mode is every object's. `None` when the copy could not
    /// be made (the caller reads the object instead).
    #[cfg(feature = "s3")]
    fn kept_by_store(
        &self,
        keeper: &crate::changes::Keeper,
        object: &crate::storage::object::ObjectRoot,
        node: &crate::storage::object::Node,
        size: Option<u64>,
    ) -> Option<Result<(Saved, u32), Image>> {
        let cap = self.registry.limits.write_bytes;
        let mount = self
            .registry
            .mounts
            .iter()
            .find(|mount| matches!(&mount.storage, Backend::Object(mine) if std::ptr::eq(mine, object)))?;
        let root = &mount.root;
        let name = keeper.fresh_stored_name(&self.call);
        let size = object.keep_copy(node, size, &name, cap.min(keeper.stored_bound()))?;
        if size > cap {
            return Some(Err(Image::NotKept("above the write cap")));
        }
        if size > keeper.stored_bound() {
            return Some(Err(Image::NotKept(crate::changes::PAST_THE_BOUND)));
        }
        let path = format!("{}/{}/{name}", root.as_str(), crate::storage::object::IMAGE_AREA);
        Some(Ok((Saved::Stored { path, size }, crate::storage::object::FILE_MODE)))
    }

    /// The before image of the regular file at `node` (the caller holds its directory's
    /// lock): its content (kept by link where it can be, copied otherwise) and mode, or not
    /// kept above the write cap.
    pub(crate) fn file_image(
        &self,
        store: &Backend,
        node: &crate::storage::Node,
        size: Option<u64>,
        path: &VirtualPath,
    ) -> Image {
        match self.kept(store, node, size) {
            Some(Ok((content, mode))) => return Image::File { content, mode },
            Some(Err(image)) => return image,
            None => {}
        }
        match store.read_all(node, self.registry.limits.write_bytes, path) {
            Ok((content, ..)) if self.keeper().is_some_and(|keeper| content.len() as u64 > keeper.stored_bound()) => {
                Image::NotKept(crate::changes::PAST_THE_BOUND)
            }
            Ok((content, _, stat)) => Image::File { content: Saved::Copied(content), mode: stat.mode & 0o7777 },
            Err(error) if error.kind() == crate::ErrorKind::TooLarge => Image::NotKept("above the write cap"),
            Err(_) => Image::NotKept("unreadable"),
        }
    }

    /// [`Context::file_image`] of a file whose content the caller holds already (an edit):
    /// kept by link where it can be, else a copy of `content`.
    pub(crate) fn file_image_of(
        &self,
        store: &Backend,
        node: &crate::storage::Node,
        content: &[u8],
        mode: u32,
    ) -> Image {
        match self.kept(store, node, Some(content.len() as u64)) {
            Some(Ok((content, mode))) => Image::File { content, mode },
            Some(Err(image)) => image,
            None => Image::File { content: Saved::Copied(content.to_vec()), mode: mode & 0o7777 },
        }
    }

    /// The version of the directory at `located`, for the guard of a move's undo: equal while
    /// nothing below it was added, removed, renamed, rewritten, replaced or given other
    /// permission bits. Every name below it counts, with its kind; a file or a directory with
    /// its permission bits (an undo that restores a deleted tree gives its directories back
    /// the modes they had); a link or a special file with its type, size and times (a
    /// replaced one has another change time). Files the name rules hide count by their
    /// sizes and times. The visible files of a tree that holds at most [`TREE_READ_BYTES`] of
    /// them count by their versions (their contents): an undo that puts a file's bytes and
    /// mode back leaves it as it was. Past that, they count by their sizes, modification and
    /// change times instead, one `stat` a file and no reads, so that a journaled move of a
    /// large tree does not hold both parents' locks for the time its bytes take to read; a
    /// change of the content always moves the change time (a file whose bytes an undo put
    /// back has a new one, so the tree's undo is then a conflict). Either way the tree's own
    /// rename leaves it as it was. `None` when the tree cannot be walked whole (the call's
    /// time ran out, an unreadable part).
    ///
    /// It covers the names the name rules hide: it is never shown to an agent, and only the
    /// journal's undo checks it ([`Precondition::Tree`](crate::Precondition::Tree)). Which of
    /// the two ways a tree is hashed depends on its visible files alone, so that an undo's
    /// outcome tells an agent nothing of the hidden files' sizes.
    ///
    /// Versions since directories' modes count begin `tree-C` or `tree-S`; those a move
    /// recorded before (`tree-c`, `tree-s`, journaled by an earlier vfs) are compared as they
    /// were taken, without them (`modes` false), so that an undo of such a move still goes
    /// through.
    pub(crate) fn tree_version(&self, located: &Located, path: &VirtualPath, modes: bool) -> Option<String> {
        let store = self.store(located.mount);
        let rules = self.registry.rules_for(Caller::Agent, located.mount);
        let hidden = |relative: &str| {
            rules.is_some_and(|rules| {
                let mut rel = located.rel.clone();
                rel.extend(relative.split('/').map(str::to_owned));
                rules.judge(&rel).is_some_and(|(effect, _, _)| effect == crate::policy::RuleEffect::Hidden)
            })
        };
        // Each entry is hashed on its own (`tree_entry_hash`) and the hashes are added: the sum
        // is the same in any walk order, and no list of the tree is held.
        let (mut by_stat, mut bytes, mut whole) = (0u128, 0u64, true);
        let walked = self.store_walk(located, path, usize::MAX, &mut |entry| {
            let Ok(Some(stat)) = store.restat(entry.node, entry.path) else {
                whole = false;
                return Flow::Stop;
            };
            if entry.kind == Kind::File && !hidden(entry.relative) {
                bytes = bytes.saturating_add(stat.size);
            }
            by_stat =
                by_stat.wrapping_add(tree_entry_hash(entry.relative, &tree_stamp(&stat, entry.kind, true, modes)));
            Flow::Continue
        });
        if !whole || !walked.is_ok_and(|walked| walked.completed && walked.unreadable == 0) {
            return None;
        }
        let (by_stat_prefix, by_content_prefix) = if modes { ("tree-S", "tree-C") } else { ("tree-s", "tree-c") };
        if bytes > TREE_READ_BYTES {
            return Some(format!("{by_stat_prefix}{by_stat:032x}"));
        }
        let mut by_content = 0u128;
        let walked = self.store_walk(located, path, usize::MAX, &mut |entry| {
            let Ok(Some(stat)) = store.restat(entry.node, entry.path) else {
                whole = false;
                return Flow::Stop;
            };
            let state = if entry.kind == Kind::File && !hidden(entry.relative) {
                let Ok(Some(version)) = store.version(entry.node, entry.path) else {
                    whole = false;
                    return Flow::Stop;
                };
                let mut state = tree_stamp(&stat, Kind::File, false, modes);
                state.extend_from_slice(version.as_bytes());
                state
            } else {
                tree_stamp(&stat, entry.kind, true, modes)
            };
            by_content = by_content.wrapping_add(tree_entry_hash(entry.relative, &state));
            Flow::Continue
        });
        if !whole || !walked.is_ok_and(|walked| walked.completed && walked.unreadable == 0) {
            return None;
        }
        Some(format!("{by_content_prefix}{by_content:032x}"))
    }

    /// The before image of the directory at `located`, whose permission bits are `mode`, and
    /// everything in it.
    pub(crate) fn tree_image(&self, located: &Located, mode: u32, path: &VirtualPath) -> Image {
        let store = self.store(located.mount);
        let cap = self.registry.limits.write_bytes;
        let mut items = Vec::new();
        let mut copied = 0u64;
        let mut stored = 0u64;
        let stored_bound = self.keeper().map_or(u64::MAX, crate::changes::Keeper::stored_bound);
        let mut refused = None;
        let walked = self.store_walk(located, path, usize::MAX, &mut |entry| {
            let relative = entry.relative.to_owned();
            // An undo puts the tree back by path.
            if !entry.path.is_spelled() {
                refused = Some(crate::changes::UNSPELLED);
                return Flow::Stop;
            }
            match entry.kind {
                Kind::Directory => {
                    // Its mode, to be put back as it was (a store that keeps none says 0).
                    let Ok(Some(stat)) = store.restat(entry.node, entry.path) else {
                        refused = Some("the tree could not be read whole");
                        return Flow::Stop;
                    };
                    items.push(TreeItem { relative, content: None, mode: directory_mode(&stat) });
                }
                Kind::File => {
                    let (content, mode) = match self.kept(store, entry.node, None) {
                        Some(Ok(kept)) => kept,
                        Some(Err(Image::NotKept(crate::changes::PAST_THE_BOUND))) => {
                            refused = Some(PAST_THE_BOUND_TREE);
                            return Flow::Stop;
                        }
                        Some(Err(_)) => {
                            refused = Some("a file in it is unreadable or above the write cap");
                            return Flow::Stop;
                        }
                        None => {
                            let Ok((content, _, stat)) = store.read_all(entry.node, cap, entry.path) else {
                                refused = Some("a file in it is unreadable or above the write cap");
                                return Flow::Stop;
                            };
                            (Saved::Copied(content), stat.mode & 0o7777)
                        }
                    };
                    // Copies are held in memory; links cost nothing but a name; a store's
                    // own copies cost a request each and bytes in the bucket. Links and a
                    // store's copies count against the journal's bound, where kept images go.
                    match &content {
                        Saved::Copied(bytes) => copied += bytes.len() as u64,
                        Saved::Stored { size, .. } | Saved::Kept { size, .. } => stored += size,
                    }
                    items.push(TreeItem { relative, content: Some(content), mode });
                    if copied > crate::changes::TREE_IMAGE_BYTES {
                        refused = Some("above the tree image bound");
                        return Flow::Stop;
                    }
                    if stored > stored_bound {
                        refused = Some(PAST_THE_BOUND_TREE);
                        return Flow::Stop;
                    }
                }
                Kind::Symlink | Kind::Special => {
                    refused = Some("it holds a link or a special file");
                    return Flow::Stop;
                }
            }
            Flow::Continue
        });
        match (walked, refused) {
            (Ok(walked), None) if walked.completed => Image::Tree { mode, items },
            (walked, refused) => {
                self.forget_kept(items.iter().filter_map(|item| item.content.as_ref()));
                Image::NotKept(match (walked, refused) {
                    (_, Some(why)) => why,
                    _ => "the tree could not be read whole",
                })
            }
        }
    }

    /// Removes images kept by link that no change will use (an image abandoned part way,
    /// or a change that failed after its image was taken).
    pub(crate) fn forget_kept<'s>(&self, contents: impl Iterator<Item = &'s Saved>) {
        let Some(keeper) = self.keeper() else { return };
        for content in contents {
            match content {
                Saved::Kept { name, .. } => keeper.forget(name),
                Saved::Stored { path, .. } => keeper.forget_stored(path),
                Saved::Copied(_) => {}
            }
        }
    }

    /// Removes the images kept by link in `image`, when its change failed.
    pub(crate) fn forget_image(&self, image: Option<&Image>) {
        match image {
            Some(Image::File { content, .. }) => self.forget_kept(std::iter::once(content)),
            Some(Image::Tree { items, .. }) => {
                self.forget_kept(items.iter().filter_map(|item| item.content.as_ref()));
            }
            _ => {}
        }
    }

    /// Parses agent input into a virtual path.
    pub(crate) fn parse(path: &str) -> Result<VirtualPath, Error> {
        VirtualPath::new(path).map_err(|error| Error::invalid_path(&error))
    }

    /// The registry as resolution sees it for this caller.
    pub(crate) fn table(&self) -> View<'r> {
        View { registry: self.registry, caller: self.caller }
    }

    /// The store of mount `mount`.
    pub(crate) fn store(&self, mount: usize) -> &'r Backend {
        &self.registry.mounts[mount].storage
    }

    /// Finds the places a move or delete changes (`find`), claims them (`places` says which:
    /// see `registry::claims`), then finds them again under the claim, so that every check
    /// and the act run on places that no other move or delete can change until the claim
    /// is dropped (ADR 0006). Finding again matters: a move that held the place before this
    /// call could claim it may have moved a directory on its way. A path that leads elsewhere
    /// the second time is claimed again, a few times, then refused as changed.
    /// `paths`: the call's paths, the first one named if the place changes, all of them if
    /// the call's time runs out while it waits.
    pub(crate) fn under_claim<T>(
        &self,
        paths: &[&VirtualPath],
        places: impl Fn(&T) -> Vec<Place>,
        find: impl Fn() -> Result<T, Error>,
    ) -> Result<(Claim<'r>, T), Error> {
        let wanted = places(&find()?);
        self.under_claim_from(wanted, paths, places, find)
    }

    /// The place a write, a stage's commit or a new directory changes at `path`, claimed (ADR
    /// 0006), then found under the claim by `find` (which may make missing parents): a move
    /// or delete of a directory above it waits for the write, or the write for it, so that
    /// the move's walk for rules of its new place and its rename are one step for the
    /// writes of the process too. Claimed first where the path lies as written (the
    /// canonical place where no link is on the way); where `find` lands elsewhere, that
    /// place is claimed and found again.
    pub(crate) fn under_write_claim<N: crate::gate::Need>(
        &self,
        path: &VirtualPath,
        find: impl Fn() -> Result<crate::gate::Place<N>, Error>,
    ) -> Result<(Claim<'r>, crate::gate::Place<N>), Error> {
        let (mount, components) = self.registry.route(self.caller, path)?;
        // Refused by name before anything is claimed: no call waits on a hidden place.
        self.registry.check_names(self.caller, mount, &components, Access::Write, path)?;
        let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
        let wanted = vec![self.registry.place(mount, &rel)];
        self.under_claim_from(wanted, &[path], |found: &crate::gate::Place<N>| vec![self.place(found)], find)
    }

    /// [`Context::under_claim`] from the places `wanted`, claimed before `find` first runs.
    fn under_claim_from<T>(
        &self,
        mut wanted: Vec<Place>,
        paths: &[&VirtualPath],
        places: impl Fn(&T) -> Vec<Place>,
        find: impl Fn() -> Result<T, Error>,
    ) -> Result<(Claim<'r>, T), Error> {
        const ATTEMPTS: usize = 4;
        for _ in 0..ATTEMPTS {
            let claim = crate::registry::CLAIMS.claim(&wanted, &self.deadline, paths)?;
            let found = find()?;
            let now = places(&found);
            if now == wanted {
                return Ok((claim, found));
            }
            drop(claim);
            wanted = now;
        }
        Err(Error::changed_during_call(paths[0]))
    }

    /// The place a claim on a located place covers.
    pub(crate) fn place(&self, located: &Located) -> Place {
        self.registry.place(located.mount, &located.rel)
    }

    /// Refuses `access` (a write, an edit, a new directory, a move's destination) of the entry
    /// at `rel` of `mount` when it would make its directory look like a git repository: git
    /// takes a directory for one when it holds `HEAD` and either `objects` and `refs`, or
    /// `commondir` naming where they are (what the tests in `crates/vfs/tests/git.rs` show git doing), and then runs
    /// what that directory's `config` names (`core.fsmonitor` at the next `git status` in or
    /// below it). So, for an agent, where the default `.git` rule holds: no `HEAD` beside
    /// `objects`, `refs` or `commondir`, and none of those beside `HEAD`. The entry's own name
    /// is matched regardless of ASCII case (a case-insensitive disk opens `head` for `HEAD`);
    /// the names beside it are looked up as git spells them, which such a disk matches in any
    /// case. A directory that is already a repository under another name is not detected:
    /// only its `HEAD`, `objects`, `refs` and `commondir` are kept as they are.
    pub(crate) fn guard_git_directory(
        &self,
        mount: usize,
        rel: &[String],
        access: Access,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let Some((name, parent)) = rel.split_last() else { return Ok(()) };
        if !is_git_marker(name) {
            return Ok(());
        }
        let partners: &[&str] = if name.eq_ignore_ascii_case("HEAD") { &BESIDE_HEAD } else { &["HEAD"] };
        if !self.registry.rules_for(self.caller, mount).is_some_and(|policy| policy.guards_git_directories(rel)) {
            return Ok(());
        }
        let options = Resolve { follow_final: false, create_parents: None, made: None };
        for partner in partners {
            let mut components: Vec<&str> = parent.iter().map(String::as_str).collect();
            components.push(partner);
            let found = match self.store(mount).locate(&self.table(), mount, &components, &options, path) {
                Ok(located) => self.store(located.mount).stat(&located.node, path)?.is_some(),
                // No directory there yet (it is being created), or none the agent may see.
                Err(error) if error.kind() == crate::ErrorKind::NotFound => false,
                Err(error) => return Err(error),
            };
            if found {
                let root = &self.registry.mounts[mount].root;
                let directory =
                    if parent.is_empty() { root.to_string() } else { format!("{root}/{}", parent.join("/")) };
                return Err(Error::git_directory(path, access, partner, &directory));
            }
        }
        Ok(())
    }

    /// Refuses `change` of the tree at a located place when something inside it is protected
    /// (see `RegistryInner::guard_tree`); `stat` is the place's own, when known.
    pub(crate) fn guard_tree(
        &self,
        located: &Located,
        stat: Option<&Stat>,
        change: TreeChange,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let identity = stat.filter(|stat| stat.kind == crate::storage::Kind::Directory).and_then(|stat| stat.identity);
        self.registry.guard_tree(self.caller, located.mount, &located.rel, identity, change, path)
    }

    /// The rights string at a located place, for `get_file_info`.
    pub(crate) fn rights_at(&self, located: &Located) -> &'static str {
        self.registry.mounts[located.mount].rights_at(&located.rel).0.as_str()
    }

    /// True when the place is a mount's root (no name of its own to move, delete or write).
    pub(crate) fn is_root(located: &Located) -> bool {
        located.rel.is_empty()
    }
}

/// The permission bits of a file whose content an agent's write or edit replaces: those it
/// had, without the execute bits. A file an agent wrote is never a program git (a hook under
/// `core.hooksPath`) or anything else runs by its mode alone; a new file gets `0o666` (less
/// the umask), which has none either.
pub(crate) fn authored_mode(mode: u32) -> u32 {
    mode & !0o111
}

/// The bits of a directory's mode a tree image keeps: its permissions with the sticky,
/// set-user-ID and set-group-ID bits.
pub(crate) fn directory_mode(stat: &crate::storage::Stat) -> u32 {
    stat.mode & 0o7777
}

/// One entry's share of a tree's version: its name below the tree and its `state`.
fn tree_entry_hash(relative: &str, state: &[u8]) -> u128 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(relative.as_bytes());
    hasher.update(&[0]);
    hasher.update(state);
    hasher.digest128()
}

/// What a tree's version counts of an entry besides its name (see [`Context::tree_version`]):
/// its kind, a file's or (with `modes`) a directory's permission bits, a link's or a special
/// file's type and bits; with `times`, the size and the times of what is not a directory.
fn tree_stamp(stat: &Stat, kind: Kind, times: bool, modes: bool) -> Vec<u8> {
    let mut state = Vec::with_capacity(40);
    let mode = match kind {
        Kind::Directory if !modes => 0,
        Kind::Directory | Kind::File => stat.mode & 0o7777,
        Kind::Symlink | Kind::Special => stat.mode,
    };
    state.push(match kind {
        Kind::Directory => b'd',
        Kind::File => b'f',
        Kind::Symlink => b'l',
        Kind::Special => b's',
    });
    state.extend_from_slice(&mode.to_le_bytes());
    if times && kind != Kind::Directory {
        state.extend_from_slice(&stat.size.to_le_bytes());
        for (seconds, nanoseconds) in [stat.modified, stat.changed] {
            state.extend_from_slice(&seconds.to_le_bytes());
            state.extend_from_slice(&nanoseconds.to_le_bytes());
        }
    }
    state
}

/// The mode an undo gives a file it puts back over one whose mode is `current`: exactly the
/// before image's `restored` bits while `current` is what a write from them left (the
/// authored mode less the umask: the change being undone, or a later one, set it), so that
/// an undo also gives back the bits the write took (execute bits, bits the umask removed).
/// A mode set since by someone else (a `chmod` narrowing it) is kept as it is: an undo never
/// widens it.
pub(crate) fn restored_mode(restored: u32, current: u32) -> crate::storage::NewMode {
    let left = authored_mode(restored) & 0o777 & !crate::storage::local::process_umask();
    if current & 0o777 == left {
        crate::storage::NewMode::Exact(restored)
    } else {
        crate::storage::NewMode::Exact(current)
    }
}

/// Formats seconds since the epoch as RFC 3339 UTC (`2026-11-30T02:13:39Z`), the form every
/// vfs surface uses for time (modification times, exchange-log stamps).
#[must_use]
pub fn rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    /// A tree's version recorded before directories' modes counted (`tree-c…`, an entry of an
    /// earlier vfs) is compared as it was taken: the move back goes through while the tree is
    /// as it was, whatever a directory's mode; one recorded since (`tree-C…`) counts it. The
    /// builds of 2026-12-05 that counted them under the old prefix are matched too.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a tree on disk, a directory's mode set outside")]
    fn a_trees_version_recorded_before_directory_modes_counted_is_compared_without_them() {
        use std::os::unix::fs::PermissionsExt as _;
        let directory = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(directory.path().join("d/sub")).unwrap();
        std::fs::write(directory.path().join("d/sub/a.txt"), "a\n").unwrap();
        let root = crate::MountRoot::new("/p").unwrap();
        let spec = crate::MountSpec::local(directory.path().to_path_buf(), root, crate::Rights::ReadWrite);
        let registry = crate::MountRegistry::builder().mount(spec).build(crate::ambient_authority()).unwrap();
        let versions = || {
            let context = super::Context::new(
                &registry.inner,
                crate::mount::Caller::Agent,
                super::Deadline::never(),
                crate::CallId::new(),
            );
            let path = crate::VirtualPath::new("/p/d").unwrap();
            let located = context.locate::<crate::gate::Delete>(&path, false, false).unwrap();
            (
                context.tree_version(&located, &path, false).unwrap(),
                context.tree_version(&located, &path, true).unwrap(),
            )
        };
        let (before, since) = versions();
        assert!(before.starts_with("tree-c") && since.starts_with("tree-C"), "{before} {since}");
        std::fs::set_permissions(directory.path().join("d/sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let (before_now, since_now) = versions();
        assert_eq!(before_now, before, "a directory's mode is not counted the old way");
        assert_ne!(since_now, since);
        let agent = registry.agent();
        let back = |guard: &str| {
            agent.move_path("/p/e", "/p/d", &crate::Precondition::Tree(guard.to_owned()), &crate::Precondition::Absent)
        };
        let away = || agent.move_path("/p/d", "/p/e", &crate::Precondition::Any, &crate::Precondition::Absent);
        away().unwrap();
        assert_eq!(back(&since).unwrap_err().kind(), crate::ErrorKind::VersionMismatch);
        back(&before).unwrap();
        // As the builds of a few hours took it: modes counted under the old prefix.
        away().unwrap();
        back(&since_now.replacen("tree-C", "tree-c", 1)).unwrap();
    }

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_004_819), "2026-11-30T02:13:39Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
