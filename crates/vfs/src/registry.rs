//! The mount registry: built once, checked once, then frozen and shared.
//!
//! The registry owns every mount's root directory handle (opened exactly once, in
//! [`MountRegistryBuilder::build`], the only place that reaches the disk by an ambient path),
//! the routing from a virtual path to a mount, the rights decision and the redaction scrub. It
//! is the single place that decides *who may see what*; the storage module only decides *where
//! a name leads*.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::changes::ChangeObserver;
use crate::error::Error;
use crate::mount::{Caller, ConfigError, Limits, Visibility};
use crate::path::VirtualPath;
use crate::policy::{Loosening, NamePolicy, NameRule, RuleEffect, is_glob, same_name};
use crate::pool::WorkerPool;
use crate::scrub::Scrubber;
use crate::spec::{Access, MountId, MountRoot, MountSpec, Rights, SubPathRights};
use crate::storage::local::LocalRoot;
use crate::storage::{Backend, Capabilities, MountTable, Nesting};

mod claims;

pub(crate) use claims::{CLAIMS, Claim, Place};

/// Builds a [`MountRegistry`]. Mounts are agent-facing unless added with
/// [`MountRegistryBuilder::internal`].
#[derive(Debug, Clone, Default)]
#[expect(clippy::struct_excessive_bools, reason = "a builder's independent switches, each set by its own method")]
pub struct MountRegistryBuilder {
    entries: Vec<(MountSpec, Visibility, String)>,
    limits: Limits,
    skip_sync: bool,
    defer_agent_syncs: bool,
    deletes_with_writes: bool,
    deferred_rules: bool,
    rules: Vec<NameRule>,
    observers: Vec<Arc<dyn ChangeObserver>>,
    workers: Option<usize>,
    pool: Option<WorkerPool>,
}

impl MountRegistryBuilder {
    /// An empty builder with default [`Limits`].
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an agent-facing mount.
    pub fn mount(&mut self, spec: MountSpec) -> &mut Self {
        self.entries.push((spec, Visibility::AgentFacing, String::new()));
        self
    }

    /// Adds an internal mount, reachable only through a [`PrivilegedAccessor`](crate::PrivilegedAccessor).
    pub fn internal(&mut self, spec: MountSpec) -> &mut Self {
        self.entries.push((spec, Visibility::Internal, String::new()));
        self
    }

    /// Adds a mount with a visibility and a note on where it came from (shown to the operator
    /// by `vfs mounts`).
    pub fn mount_from(&mut self, spec: MountSpec, visibility: Visibility, origin: impl Into<String>) -> &mut Self {
        self.entries.push((spec, visibility, origin.into()));
        self
    }

    /// Replaces the bounds (default: [`Limits::default`]).
    pub fn limits(&mut self, limits: Limits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// Adds name rules for every agent-facing mount: secrets hidden, `.git` read-only
    /// ([`NameRule::defaults`], the operator's `--hide`). None by default: a registry built
    /// without rules shows agents everything its mounts hold.
    pub fn name_rules(&mut self, rules: impl IntoIterator<Item = NameRule>) -> &mut Self {
        self.rules.extend(rules);
        self
    }

    /// Adds an observer of the change feed: told of every change the registry's operations
    /// commit, under the change's lock (see [`ChangeObserver`] and `docs/architecture.md`).
    /// Every registry's first observer is the operator-log audit (`vfs::audit`).
    pub fn observe(&mut self, observer: Arc<dyn ChangeObserver>) -> &mut Self {
        self.observers.push(observer);
        self
    }

    /// Whether writes `fsync` the file and its directory before reporting success (default:
    /// yes). Turning it off trades durability across a power loss for speed; atomicity (old or
    /// new content, never a mix) holds either way. Benchmarks use it to show the price of sync.
    /// A file that cannot be synced fails the write; a directory that cannot be synced (after the
    /// rename, when the new content is already visible) is a warning in the operator's log.
    pub fn sync_writes(&mut self, sync: bool) -> &mut Self {
        self.skip_sync = !sync;
        self
    }

    /// Writes to the agent-facing local mounts are not synced one by one; the caller makes
    /// them durable at once with
    /// [`AgentAccessor::sync_deferred_writes`](crate::AgentAccessor::sync_deferred_writes)
    /// before it reports them (an undo of many files: one `syncfs` in place of two `fsync`s a
    /// file). Internal roots (a journal, the exchange log) still sync each write.
    pub fn defer_agent_syncs(&mut self) -> &mut Self {
        self.defer_agent_syncs = true;
        self
    }

    /// Every place that takes writes takes deletes too: `rwnd` (read-write, no delete), a rule
    /// for agents, counts as `rw`. For the operator's own changes through the agent accessor
    /// (`vfs undo`: undoing a file an agent created in an `rwnd` mount removes it); never for
    /// a registry that serves an agent.
    pub fn deletes_with_writes(&mut self) -> &mut Self {
        self.deletes_with_writes = true;
        self
    }

    /// Has [`MountRegistryBuilder::build`] leave the compiling of the name rules' glob sets
    /// (most of a launch's own time) to [`MountRegistry::compile_name_rules`], which a server
    /// can call on a thread of its own while it answers its first request, or to the first
    /// judgement of a name. Every rule is still parsed by `build`, so a malformed one is
    /// refused there; what is left to fail is a rule set too large to compile, which
    /// `compile_name_rules` reports. A judgement made while another thread compiles waits for
    /// it, and if the sets cannot be compiled, every rule holds for every name it could match:
    /// nothing is let through.
    pub fn defer_name_rules(&mut self) -> &mut Self {
        self.deferred_rules = true;
        self
    }

    /// Gives the registry a worker pool of its own of `threads` threads for its content
    /// searches (default: as many as the machine runs at once,
    /// [`WorkerPool::with_available_parallelism`]). One search uses at most eight of the pool's
    /// threads; its caller walks the tree and waits for them.
    pub fn workers(&mut self, threads: usize) -> &mut Self {
        self.workers = Some(threads);
        self.pool = None;
        self
    }

    /// Runs the registry's content searches on `pool`, which other registries may share (a
    /// host that builds a registry per crew gives them one pool), instead of a pool of its own.
    pub fn pool(&mut self, pool: WorkerPool) -> &mut Self {
        self.pool = Some(pool);
        self
    }

    /// Checks every mount and opens each root directory once, by the host path its spec
    /// names: with the operator's `authority` ([`crate::ambient_authority`], minted in the
    /// binary's `main`), as every open of an operator's host path is.
    pub fn build(&self, authority: crate::AmbientAuthority) -> Result<MountRegistry, ConfigError> {
        check_distinct_roots(self.entries.iter().map(|(spec, _, _)| spec))?;
        check_object_nesting(self.entries.iter().map(|(spec, _, _)| spec))?;
        let mut mounts: Vec<Mount> = Vec::with_capacity(self.entries.len());
        for (spec, visibility, origin) in &self.entries {
            let root = spec.root().as_str();
            let deferred = self.defer_agent_syncs && *visibility == Visibility::AgentFacing;
            let mut storage = Backend::open(spec, !self.skip_sync && !deferred, authority)?;
            if *visibility == Visibility::AgentFacing {
                storage.allow_deferred_syncs();
            }
            let Ok(root_path) = VirtualPath::new(root) else {
                unreachable!("a validated mount root is a virtual path")
            };
            let lifted = |rights: Rights| match rights {
                Rights::ReadWriteNoDelete if self.deletes_with_writes => Rights::ReadWrite,
                rights => rights,
            };
            mounts.push(Mount {
                spec: spec.clone(),
                root: spec.root().clone(),
                root_path,
                rights: lifted(spec.rights()),
                overrides: spec.overrides().iter().map(|item| item.with_rights(lifted(item.rights()))).collect(),
                visibility: *visibility,
                origin: origin.clone(),
                storage,
            });
        }
        let mut identities = HashMap::new();
        for (index, mount) in mounts.iter().enumerate() {
            // Two mounts of one directory: the more specific (longer) root wins on nesting.
            let Some(identity) = mount.storage.local().map(LocalRoot::identity) else { continue };
            let entry = identities.entry(identity).or_insert(index);
            if mounts[*entry].root.as_str().len() < mount.root.as_str().len() {
                *entry = index;
            }
        }
        check_internal_placement(&mounts)?;
        let pinned = pin_nesting_chains(&mounts);
        let scrub = Scrubber::new(
            mounts.iter().flat_map(|mount| mount.storage.spellings().iter().cloned()),
            mounts
                .iter()
                .filter(|mount| mount.visibility == Visibility::Internal)
                .map(|mount| mount.root.as_str().to_owned()),
            mounts
                .iter()
                .filter(|mount| mount.visibility == Visibility::AgentFacing)
                .map(|mount| mount.root.as_str().to_owned()),
        );
        let agent_table = agent_table(&mounts);
        let root_inodes = identities.keys().map(|&(_, inode)| inode).collect();
        let (rules, policies, loosenings) = compile_rules(&self.rules, &mounts, self.deferred_rules)?;
        let tree_bases = mounts.iter().map(|mount| mount.storage.tree_base()).collect();
        Ok(MountRegistry {
            inner: Arc::new(RegistryInner {
                mounts,
                identities,
                root_inodes,
                pinned,
                scrub,
                agent_table,
                limits: self.limits,
                rules,
                policies,
                loosenings,
                tree_bases,
                observers: std::iter::once(Arc::new(crate::changes::Audit) as Arc<dyn ChangeObserver>)
                    .chain(self.observers.iter().cloned())
                    .collect(),
                subscribers: std::sync::RwLock::new(Subscribers::default()),
                pool: self.pool.clone().unwrap_or_else(|| {
                    self.workers.map_or_else(WorkerPool::with_available_parallelism, WorkerPool::new)
                }),
            }),
        })
    }
}

/// Refuses two mounts at one root, or at roots that differ only in ASCII case (one would
/// shadow the other on a case-insensitive client).
fn check_distinct_roots<'s>(specs: impl Iterator<Item = &'s MountSpec>) -> Result<(), ConfigError> {
    let mut seen: HashMap<String, String> = HashMap::new();
    for spec in specs {
        let root = spec.root().as_str();
        if let Some(first) = seen.get(&root.to_ascii_lowercase()) {
            return Err(if first == root {
                ConfigError::DuplicateRoot { root: root.to_owned() }
            } else {
                ConfigError::CaseCollision { first: first.clone(), second: root.to_owned() }
            });
        }
        seen.insert(root.to_ascii_lowercase(), root.to_owned());
    }
    Ok(())
}

/// Refuses two object mounts of one bucket (`s3://bucket`, or the in-process `memory://name`)
/// where one prefix holds the other (or both are the same). A local tree keeps a nested
/// mount's own rights and visibility by recognising its root directory during the walk;
/// object keys have no directory to recognise, so an outer read-write mount would reach an
/// inner read-only or internal one. Refused before any store is contacted.
fn check_object_nesting<'a>(specs: impl Iterator<Item = &'a MountSpec>) -> Result<(), ConfigError> {
    // A location that does not parse is refused where the store is opened, with its reason.
    let keyed: Vec<(&MountSpec, Vec<&str>)> = specs
        .filter_map(|spec| {
            let Some(crate::spec::Location::Object(url)) = spec.location() else { return None };
            let parts =
                [url.scheme().as_str(), url.bucket()].into_iter().chain(url.prefix().iter().map(String::as_str));
            Some((spec, parts.collect()))
        })
        .collect();
    for (index, (first, first_keys)) in keyed.iter().enumerate() {
        for (second, second_keys) in &keyed[index + 1..] {
            let (outer, inner) = if first_keys.len() <= second_keys.len() {
                ((first, first_keys), (second, second_keys))
            } else {
                ((second, second_keys), (first, first_keys))
            };
            if inner.1.starts_with(outer.1) {
                return Err(ConfigError::NestedObjects {
                    outer_root: outer.0.root().as_str().to_owned(),
                    outer: outer.0.physical().to_owned(),
                    inner_root: inner.0.root().as_str().to_owned(),
                    inner: inner.0.physical().to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// Refuses every placement in which an agent could tell an internal mount from a name that
/// does not exist: an internal root nested virtually with an agent-facing one, an agent-facing
/// mount of the internal directory or of a part of it, and an internal directory lying inside
/// the writable part of an agent-facing mount (its name would be taken there). Inside a part an
/// agent may only read, it is answered as missing, which nothing an agent can do contradicts.
fn check_internal_placement(mounts: &[Mount]) -> Result<(), ConfigError> {
    let internal = mounts.iter().filter(|mount| mount.visibility == Visibility::Internal);
    for hidden in internal {
        let agents = mounts.iter().filter(|mount| mount.visibility == Visibility::AgentFacing);
        for agent in agents.clone() {
            if hidden.root_path.starts_with(&agent.root_path) || agent.root_path.starts_with(&hidden.root_path) {
                return Err(ConfigError::InternalNestedVirtually {
                    internal: hidden.root.as_str().to_owned(),
                    agent: agent.root.as_str().to_owned(),
                });
            }
        }
        let Some(hidden_dir) = hidden.storage.local() else { continue };
        // The innermost agent-facing mount holding the internal directory decides its rights.
        let mut holder: Option<(&Mount, Vec<String>)> = None;
        for agent in agents {
            let Some(agent_dir) = agent.storage.local() else { continue };
            if hidden_dir.relative_of(agent_dir).is_some() {
                return Err(ConfigError::ServesInternal {
                    agent: agent.root.as_str().to_owned(),
                    physical: agent.spec.physical().to_owned(),
                    internal: hidden.root.as_str().to_owned(),
                });
            }
            if let Some(rel) = agent_dir.relative_of(hidden_dir)
                && holder.as_ref().is_none_or(|(_, current)| current.len() > rel.len())
            {
                holder = Some((agent, rel));
            }
        }
        if let Some((agent, rel)) = holder {
            let (rights, _) = agent.rights_at(&rel);
            if rights.allows(Access::Write) {
                return Err(ConfigError::InternalInsideWritable {
                    internal: hidden.root.as_str().to_owned(),
                    physical: hidden.spec.physical().to_owned(),
                    agent: agent.root.as_str().to_owned(),
                    inside: format!("{}/{}", agent.root, rel.join("/")),
                    rights,
                });
            }
        }
    }
    Ok(())
}

/// For every local mount lying physically inside another, the identities of the directories
/// from the outer root (exclusive) down to the inner root (inclusive), each mapped to the inner
/// mount (see `RegistryInner::pinned`).
fn pin_nesting_chains(mounts: &[Mount]) -> HashMap<(u64, u64), usize> {
    let mut pinned = HashMap::new();
    for outer in mounts {
        let Some(outer_root) = outer.storage.local() else { continue };
        for (index, inner) in mounts.iter().enumerate() {
            let Some(inner_root) = inner.storage.local() else { continue };
            for identity in outer_root.chain_to(inner_root) {
                // An agent-facing mount names itself in refusals; keep it when both claim one.
                let keep = pinned.get(&identity).is_some_and(|&current: &usize| {
                    mounts[current].visibility == Visibility::AgentFacing && inner.visibility == Visibility::Internal
                });
                if !keep {
                    pinned.insert(identity, index);
                }
            }
        }
    }
    pinned
}

/// The rules of a registry: every rule agents are held to (the operator's table), the
/// compiled rules of each mount by index, and the loosenings its mount strings asked for.
type Rules = (Vec<NameRule>, Vec<Arc<NamePolicy>>, Vec<Loosening>);

/// A place of a mount (its path from the root, as written) and the name rules lifted there.
type Lifted = (Vec<String>, Vec<usize>);

/// Every rule agents are held to (the operator's table), and the compiled rules of each mount:
/// the name rules and the mount's own anchored rules for an agent-facing mount, nothing for an
/// internal one. A walk from a mount enters the local mounts physically nested in it, so their
/// anchored rules join its own, anchored at the nested root's place inside it. An override
/// granting writes where a read-only name rule holds lifts that rule there (`loosenings`).
/// The rules are parsed here; their glob sets are compiled too unless `defer` (see
/// [`MountRegistryBuilder::defer_name_rules`]).
fn compile_rules(global: &[NameRule], mounts: &[Mount], defer: bool) -> Result<Rules, ConfigError> {
    let compiled = |policy: NamePolicy| -> Result<NamePolicy, ConfigError> {
        if !defer {
            policy.compile().map_err(ConfigError::NameRule)?;
        }
        Ok(policy)
    };
    let own = |mount: &Mount| -> Vec<NameRule> {
        mount
            .spec
            .rules()
            .iter()
            .map(|rule| NameRule::in_mount(rule.glob(), rule.effect(), mount.root.as_str()))
            .collect()
    };
    let shared = Arc::new(compiled(NamePolicy::new(global.to_vec()).map_err(ConfigError::NameRule)?)?);
    let mut listed = global.to_vec();
    let mut shown = Vec::new();
    let mut policies = Vec::with_capacity(mounts.len());
    for outer in mounts {
        if outer.visibility != Visibility::AgentFacing {
            policies.push(Arc::new(NamePolicy::default()));
            continue;
        }
        listed.extend(own(outer));
        let mut rules = own(outer);
        if let Some(outer_root) = outer.storage.local() {
            for inner in mounts.iter().filter(|inner| inner.visibility == Visibility::AgentFacing) {
                let Some(inner_root) = inner.storage.local() else { continue };
                let Some(place) = outer_root.relative_of(inner_root).filter(|place| !place.is_empty()) else {
                    continue;
                };
                let prefix = globset::escape(&place.join("/"));
                rules.extend(own(inner).into_iter().map(|mut rule| {
                    let own = if is_glob(&rule.glob) { rule.glob.clone() } else { globset::escape(&rule.glob) };
                    rule.glob = format!("{prefix}/{own}");
                    rule
                }));
            }
        }
        let loosened = loosenings(&shared, outer, &mut shown)?;
        if rules.is_empty() && loosened.is_empty() {
            policies.push(shared.clone());
        } else {
            // The global rules come first, so their indices are the shared policy's.
            rules.splice(0..0, global.iter().cloned());
            let mut policy = NamePolicy::new(rules).map_err(ConfigError::NameRule)?;
            for (place, lifted) in loosened {
                policy.loosen(place, lifted);
            }
            policies.push(Arc::new(compiled(policy)?));
        }
    }
    Ok((listed, policies, shown))
}

/// What the overrides of `mount` loosen: an override that grants writes (`;.git:rw`) at or
/// below a place a read-only name rule protects lifts that rule at and below its own path, in
/// this mount only; each place with the rules' indices in `shared`, each loosening also in
/// `shown`. An override that grants writes inside a hidden name is refused: hidden names stay
/// hidden in every mount.
fn loosenings(shared: &NamePolicy, mount: &Mount, shown: &mut Vec<Loosening>) -> Result<Vec<Lifted>, ConfigError> {
    let mut places = Vec::new();
    for item in mount.overrides.iter().filter(|item| item.rights().allows(Access::Write)) {
        // Judged on compiled rules: a set that cannot be compiled would protect everything.
        shared.compile().map_err(ConfigError::NameRule)?;
        let protecting = shared.protecting(item.segments());
        if protecting.is_empty() {
            continue;
        }
        let rule = |index: usize| &shared.rules()[index];
        if let Some((_, _, end)) = shared.judge(item.segments()).filter(|(effect, _, _)| *effect == RuleEffect::Hidden)
        {
            let hiding = protecting.iter().map(|&index| rule(index)).find(|rule| rule.effect == RuleEffect::Hidden);
            return Err(ConfigError::LoosensHidden {
                root: mount.root.as_str().to_owned(),
                item: format!("{}:{}", item.path(), item.rights()),
                place: format!("{}/{}", mount.root, item.segments()[..end].join("/")),
                rule: hiding.map(|rule| format!("`{}` ({})", rule.glob, rule.origin)).unwrap_or_default(),
            });
        }
        for &index in &protecting {
            shown.push(Loosening {
                place: format!("{}/{}", mount.root, item.path()),
                glob: rule(index).glob.clone(),
                class: rule(index).class.clone(),
                rights: item.rights(),
                origin: format!("loosened by the mount string of {}", mount.root),
            });
        }
        places.push((item.segments().to_vec(), protecting));
    }
    Ok(places)
}

fn agent_table(mounts: &[Mount]) -> String {
    let mut rows: Vec<(&str, Rights)> = mounts
        .iter()
        .filter(|mount| mount.visibility == Visibility::AgentFacing)
        .map(|mount| (mount.root.as_str(), mount.rights))
        .collect();
    rows.sort_unstable();
    rows.iter().map(|(root, rights)| format!("`{root}` ({rights})")).collect::<Vec<_>>().join(", ")
}

/// One mount in a built registry.
pub(crate) struct Mount {
    pub(crate) spec: MountSpec,
    pub(crate) root: MountRoot,
    pub(crate) root_path: VirtualPath,
    pub(crate) rights: Rights,
    pub(crate) overrides: Vec<SubPathRights>,
    pub(crate) visibility: Visibility,
    pub(crate) origin: String,
    pub(crate) storage: Backend,
}

impl Mount {
    /// The rights at `rel` (relative, canonical): the longest matching override, else the
    /// mount's rights (`docs/design.md`, resolution rule 5). Returns the rights and the virtual scope they come
    /// from.
    ///
    /// Names are compared as written and again regardless of ASCII case and Unicode
    /// normalization, and the reading that grants less wins: on a case-insensitive disk
    /// `VENDOR/lib.txt` is `vendor/lib.txt`, so `;vendor:ro` must hold for it, while on a
    /// case-sensitive one a grant (`;out:rw`) never reaches another directory that differs
    /// only in case (or writes `é` as `e` and a combining accent).
    pub(crate) fn rights_at(&self, rel: &[String]) -> (Rights, String) {
        let exact = self.longest_override(rel, |a, b| a == b);
        let folded = self.longest_override(rel, same_name);
        let rights_of = |item: Option<&SubPathRights>| item.map_or(self.rights, SubPathRights::rights);
        let best = if strength(rights_of(folded)) < strength(rights_of(exact)) { folded } else { exact };
        match best {
            Some(item) => (item.rights(), format!("{}/{}", self.root, item.path())),
            None => (self.rights, self.root.as_str().to_owned()),
        }
    }

    /// The longest override at or above `rel`, comparing names with `same`.
    fn longest_override(&self, rel: &[String], same: impl Fn(&str, &str) -> bool) -> Option<&SubPathRights> {
        let mut best: Option<&SubPathRights> = None;
        for item in &self.overrides {
            let segments = item.segments();
            if rel.len() >= segments.len()
                && segments.iter().zip(rel).all(|(segment, name)| same(segment, name))
                && best.is_none_or(|current| current.segments().len() < segments.len())
            {
                best = Some(item);
            }
        }
        best
    }

    /// The first override strictly below `rel` whose rights do not grant `access`: a move or
    /// delete of `rel` would carry what it protects out of its protection (or put something
    /// at its place). Lexical, so it holds whether or not the protected path exists yet.
    pub(crate) fn weaker_override_below(&self, rel: &[String], access: Access) -> Option<&SubPathRights> {
        self.overrides.iter().find(|item| {
            let segments = item.segments();
            // Regardless of case and normalization, as `rights_at` reads a protection.
            segments.len() > rel.len()
                && segments.iter().zip(rel).all(|(segment, name)| same_name(segment, name))
                && !item.rights().allows(access)
        })
    }
}

/// A change to a whole tree, which everything inside it must allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TreeChange {
    /// Deleting it.
    Delete,
    /// Moving it away (the source of a move).
    MoveFrom,
    /// Putting something at its place (the destination of a move).
    MoveTo,
}

impl TreeChange {
    fn access(self) -> Access {
        match self {
            TreeChange::Delete | TreeChange::MoveFrom => Access::Delete,
            TreeChange::MoveTo => Access::Write,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            TreeChange::Delete => "delete",
            TreeChange::MoveFrom => "move",
            TreeChange::MoveTo => "move to",
        }
    }
}

pub(crate) struct RegistryInner {
    pub(crate) mounts: Vec<Mount>,
    /// (device, inode) of each mount root → the mount, for physical nesting (`docs/design.md`, resolution rule 7).
    pub(crate) identities: HashMap<(u64, u64), usize>,
    /// The inodes of `identities`: a listing's entries are checked against them without a
    /// `stat` first.
    pub(crate) root_inodes: std::collections::HashSet<u64>,
    /// (device, inode) of every directory between a local mount's root and the root of a mount
    /// nested inside it (the nested root included) → the nested mount. Agents may not move,
    /// rename or delete these, so a nested mount stays where the launch found it, in this
    /// launch and the next.
    pub(crate) pinned: HashMap<(u64, u64), usize>,
    pub(crate) scrub: Scrubber,
    pub(crate) agent_table: String,
    pub(crate) limits: Limits,
    /// Every name rule and mount-string rule, for the operator's table.
    pub(crate) rules: Vec<NameRule>,
    /// The compiled rules of each mount, by index (empty for internal mounts).
    pub(crate) policies: Vec<Arc<NamePolicy>>,
    /// The name rules overrides lifted at one place of their mount, for the operator's table
    /// and the prompt.
    pub(crate) loosenings: Vec<Loosening>,
    /// Where each mount's tree lies, by index, for claims (`Backend::tree_base`).
    pub(crate) tree_bases: Vec<Vec<String>>,
    /// Who is told of each committed change (`crate::changes`), the audit first.
    pub(crate) observers: Vec<Arc<dyn ChangeObserver>>,
    /// Observers added after the launch ([`MountRegistry::subscribe`]), told after those.
    pub(crate) subscribers: std::sync::RwLock<Subscribers>,
    /// The threads that help content searches (`crate::pool`).
    pub(crate) pool: WorkerPool,
}

impl RegistryInner {
    /// Tells the observers and the subscribers that `call` returned (see
    /// [`ChangeObserver::call_ended`]).
    pub(crate) fn call_ended(&self, call: &crate::changes::CallId) {
        for observer in &self.observers {
            observer.call_ended(call);
        }
        let observers: Vec<Arc<dyn ChangeObserver>> = {
            let subscribers = self.subscribers.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if subscribers.observers.is_empty() {
                return;
            }
            subscribers.observers.iter().map(|(_, observer)| observer.clone()).collect()
        };
        for observer in observers {
            observer.call_ended(call);
        }
    }
}

/// The observers of [`MountRegistry::subscribe`], by subscription.
#[derive(Default)]
pub(crate) struct Subscribers {
    next: u64,
    pub(crate) observers: Vec<(u64, Arc<dyn ChangeObserver>)>,
}

/// An observer added to a running registry's change feed; dropping it removes the observer.
#[derive(Debug)]
#[must_use = "the observer is removed when the subscription is dropped"]
pub struct Subscription {
    registry: std::sync::Weak<RegistryInner>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            let mut subscribers = registry.subscribers.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            subscribers.observers.retain(|(id, _)| *id != self.id);
        }
    }
}

/// The registry as resolution sees it, for one caller: the stores, and what a directory
/// identity is (the same mount, another mount's root to enter, or one this caller may not see).
pub(crate) struct View<'r> {
    pub(crate) registry: &'r RegistryInner,
    pub(crate) caller: Caller,
}

impl MountTable for View<'_> {
    fn store(&self, mount: usize) -> &Backend {
        &self.registry.mounts[mount].storage
    }

    fn nesting(&self, from: usize, identity: (u64, u64)) -> Nesting {
        match self.registry.mount_at(identity) {
            Some(inner) if inner != from && !self.registry.visible(self.caller, inner) => Nesting::Hidden,
            Some(inner) if inner != from => Nesting::Enters(inner),
            _ => Nesting::Same,
        }
    }

    fn any_root_inode(&self, inode: u64) -> bool {
        self.registry.root_inodes.contains(&inode)
    }

    fn single(&self) -> bool {
        self.registry.mounts.len() == 1
    }

    fn hides(&self, mount: usize, rel: &[String]) -> bool {
        self.registry
            .rules_for(self.caller, mount)
            .is_some_and(|rules| matches!(rules.judge(rel), Some((RuleEffect::Hidden, _, _))))
    }
}

impl RegistryInner {
    /// Routes `path` for `caller` (`docs/design.md`, resolution rules 3 and 4): the longest root at a segment
    /// boundary; an internal mount the caller holds no capability for is absent, with no
    /// fallback to a parent mount.
    pub(crate) fn route<'p>(&self, caller: Caller, path: &'p VirtualPath) -> Result<(usize, Vec<&'p str>), Error> {
        let mut best: Option<usize> = None;
        for (index, mount) in self.mounts.iter().enumerate() {
            if path.starts_with(&mount.root_path)
                && best.is_none_or(|current| self.mounts[current].root.as_str().len() < mount.root.as_str().len())
            {
                best = Some(index);
            }
        }
        match best {
            Some(index) if self.visible(caller, index) => {
                let skip = self.mounts[index].root_path.components().count();
                Ok((index, path.components().skip(skip).collect()))
            }
            _ => Err(Error::unknown_root(&self.agent_table)),
        }
    }

    /// Whether `caller` may see mount `index` at all.
    pub(crate) fn visible(&self, caller: Caller, index: usize) -> bool {
        match caller {
            Caller::Agent => self.mounts[index].visibility == Visibility::AgentFacing,
            Caller::Privileged(own) => own == index,
        }
    }

    /// The rights decision (`docs/design.md`, resolution rule 5) on the *effective* mount and canonical relative
    /// path that resolution reached, so sub-path overrides hold however the path was spelled
    /// and physical nesting keeps the inner mount's rights.
    pub(crate) fn authorize(
        &self,
        caller: Caller,
        mount: usize,
        rel: &[String],
        access: Access,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        if !self.visible(caller, mount) {
            return Err(Error::not_found(path));
        }
        self.check_names(caller, mount, rel, access, path)?;
        let (rights, scope) = self.mounts[mount].rights_at(rel);
        if !rights.allows(access) {
            return Err(Error::denied(path, access, &scope, rights.as_str(), &self.grantors(access)));
        }
        // Removing a name changes the directory that holds it. Inside one scope the two have
        // the same rights; at a sub-path override's root they differ, and the override's rights
        // cover what is inside it, not its own name: `scratch:rw` under a read-only mount lets
        // an agent change `scratch`'s files, never delete or move `scratch` out of the listing.
        if access == Access::Delete
            && let Some((_, holder)) = rel.split_last()
        {
            let (held, scope) = self.mounts[mount].rights_at(holder);
            if !held.allows(access) {
                return Err(Error::holder_denies(path, &scope, held.as_str()));
            }
        }
        Ok(())
    }

    /// The name rules (`policies`) on a path inside mount `mount`, for an agent: a hidden name is
    /// a missing one (and may not be created), a read-only one is never changed. Called on the
    /// lexical path before resolution and on the canonical one after it.
    pub(crate) fn check_names<S: AsRef<str>>(
        &self,
        caller: Caller,
        mount: usize,
        rel: &[S],
        access: Access,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let Some(policy) = self.rules_for(caller, mount) else { return Ok(()) };
        // Rules that could not be compiled judge every name alike, so a move could not tell a
        // protection kept from one lost: nothing is changed until the server ends.
        if access != Access::Read && policy.compile().is_err() {
            return Err(Error::not_found(path));
        }
        match policy.judge(rel) {
            Some((RuleEffect::Hidden, class, _)) => match access {
                Access::Read | Access::Delete => Err(Error::not_found(path)),
                Access::Write => Err(Error::hidden_name(path, class)),
            },
            Some((RuleEffect::ReadOnly, class, end)) if access != Access::Read => {
                let names: Vec<&str> = rel[..end].iter().map(AsRef::as_ref).collect();
                let scope = format!("{}/{}", self.mounts[mount].root, names.join("/"));
                Err(Error::read_only_name(path, access, &scope, class))
            }
            _ => Ok(()),
        }
    }

    /// The name rules that apply to `caller` inside mount `mount`, if any: decided once per
    /// walk or listing, so that each entry costs only the rules' own prefilter.
    pub(crate) fn rules_for(&self, caller: Caller, mount: usize) -> Option<&NamePolicy> {
        let policy = &self.policies[mount];
        let applies =
            caller == Caller::Agent && !policy.is_empty() && self.mounts[mount].visibility == Visibility::AgentFacing;
        applies.then_some(policy)
    }

    /// True when some mount has name rules (a create checks them before resolution).
    pub(crate) fn any_rules(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The agent-facing mounts and overrides that grant `access`, for denial texts.
    fn grantors(&self, access: Access) -> String {
        let mut rows: Vec<String> = Vec::new();
        for mount in &self.mounts {
            if mount.visibility != Visibility::AgentFacing {
                continue;
            }
            if mount.rights.allows(access) {
                rows.push(format!("`{}` ({})", mount.root, mount.rights));
            }
            for item in &mount.overrides {
                if item.rights().allows(access) && !mount.rights.allows(access) {
                    rows.push(format!("`{}/{}` ({})", mount.root, item.path(), item.rights()));
                }
            }
        }
        rows.sort();
        rows.join(", ")
    }

    /// The place a claim on `rel` of mount `mount` covers.
    pub(crate) fn place(&self, mount: usize, rel: &[String]) -> Place {
        self.tree_bases[mount].iter().chain(rel).cloned().collect()
    }

    /// The mount whose root directory has this identity, if any.
    pub(crate) fn mount_at(&self, identity: (u64, u64)) -> Option<usize> {
        self.identities.get(&identity).copied()
    }

    /// Refuses `change` of the tree at `rel` of `mount` when something inside it is
    /// protected: an override below `rel` that does not grant what the change needs, or (for
    /// a directory, by `identity`) the place of a nested mount.
    pub(crate) fn guard_tree(
        &self,
        caller: Caller,
        mount: usize,
        rel: &[String],
        identity: Option<(u64, u64)>,
        change: TreeChange,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let owner = &self.mounts[mount];
        if let Some(item) = owner.weaker_override_below(rel, change.access()) {
            let scope = format!("{}/{}", owner.root, item.path());
            return Err(Error::protected_inside(path, change.verb(), &scope, item.rights().as_str(), change.access()));
        }
        if let Some(inner) = identity.and_then(|identity| self.pinned.get(&identity)) {
            let shown = self.visible(caller, *inner).then(|| self.mounts[*inner].root.as_str());
            return Err(Error::pinned(path, change.verb(), shown));
        }
        Ok(())
    }

    /// True when a directory with this identity is a mount root or lies between a mount and a
    /// mount nested in it: a recursive delete stops there.
    pub(crate) fn holds_mount(&self, identity: (u64, u64)) -> bool {
        self.identities.contains_key(&identity) || self.pinned.contains_key(&identity)
    }
}

/// The frozen set of mounts. Cheap to clone (shared behind an `Arc`).
///
/// Resolution of a virtual path follows the resolution rules of `docs/design.md`: parse and
/// canonicalise ([`VirtualPath::new`], rules 1 and 2), route to the longest root (3), hide an
/// internal mount from a caller without its accessor (4), let the mount's store locate the
/// place beneath its root (6), switching to a nested mount's rights and visibility (7) and
/// opening only regular files and directories (8), then decide the rights on the canonical path
/// where it landed (5).
#[derive(Clone)]
pub struct MountRegistry {
    pub(crate) inner: Arc<RegistryInner>,
}

impl MountRegistry {
    /// The worker pool this registry's content searches run on: to build another registry on
    /// the same threads ([`MountRegistryBuilder::pool`]).
    #[must_use]
    pub fn pool(&self) -> &WorkerPool {
        &self.inner.pool
    }

    /// Adds an observer of the change feed to this registry, already built: told of every
    /// change committed from now on, after the observers of the launch, until the returned
    /// [`Subscription`] is dropped. For a front end that caches what it showed (a FUSE view
    /// invalidating the kernel's entries). It is never asked for before images
    /// ([`ChangeObserver::keeps_images`] is for the launch's observers), and it is told under
    /// the change's lock, so it must only take note: hand the work to a thread of its own.
    pub fn subscribe(&self, observer: Arc<dyn ChangeObserver>) -> Subscription {
        let mut subscribers = self.inner.subscribers.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = subscribers.next;
        subscribers.next += 1;
        subscribers.observers.push((id, observer));
        Subscription { registry: Arc::downgrade(&self.inner), id }
    }
}

impl fmt::Debug for MountRegistry {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("MountRegistry")
            .field("mounts", &self.inner.mounts.iter().map(|mount| mount.root.as_str()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Which rule decided the rights of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecidedBy {
    /// The mount's own rights.
    MountRights,
    /// A sub-path override (the longest that matches).
    Override,
}

/// The outcome of [`MountRegistry::decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The canonical virtual path.
    pub path: VirtualPath,
    /// The root of the mount that serves it.
    pub mount: String,
    /// The rights in force.
    pub rights: Rights,
    /// The virtual scope the rights come from (the mount root or an override's path).
    pub scope: String,
    /// Which rule decided.
    pub rule: DecidedBy,
}

/// A part of an agent-facing mount where agents may write a place that another mount serves
/// (see [`MountRegistry::writable_elsewhere`]). Operator-facing: it names the physical
/// directory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WritableElsewhere {
    /// The virtual root of the mount agents may write through.
    pub root: String,
    /// Its physical directory as given.
    pub physical: String,
    /// The place's virtual path in that mount.
    pub path: String,
    /// The rights in force there.
    pub rights: Rights,
}

/// What the operator sees of one mount (`vfs mounts`): an expert surface that names the
/// physical directory. Never show it to an agent.
#[derive(Debug, Clone)]
pub struct OperatorMountView {
    /// The virtual root.
    pub root: String,
    /// The physical directory as given.
    pub physical: String,
    /// The mount's rights.
    pub rights: Rights,
    /// The sub-path overrides.
    pub overrides: Vec<SubPathRights>,
    /// Agent-facing or internal.
    pub visibility: Visibility,
    /// The optional settings id.
    pub id: Option<MountId>,
    /// Where the mount came from (flag, settings file, crew, runner).
    pub origin: String,
}

/// What an agent may know of one mount.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MountInfo {
    /// The virtual root.
    pub root: String,
    /// `ro`, `rw` or `rwnd`.
    pub rights: String,
    /// Sub-path overrides as `(virtual path, rights)`.
    pub overrides: Vec<OverrideInfo>,
}

/// A sub-path override as an agent sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OverrideInfo {
    /// The virtual path of the override.
    pub path: String,
    /// Its rights.
    pub rights: String,
}

impl MountRegistry {
    /// A builder.
    #[must_use]
    pub fn builder() -> MountRegistryBuilder {
        MountRegistryBuilder::new()
    }

    /// Compiles the name rules' glob sets if they are not yet (waiting for another thread that
    /// is at it), and says whether they could be. A registry built with
    /// [`MountRegistryBuilder::defer_name_rules`] compiles them here; one built without has
    /// done it in `build`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NameRule`] for the first set that cannot be compiled.
    pub fn compile_name_rules(&self) -> Result<(), ConfigError> {
        self.inner.policies.iter().try_for_each(|policy| policy.compile().map_err(ConfigError::NameRule))
    }

    /// The name rules agents are held to (`vfs mounts` shows them).
    #[must_use]
    pub fn name_rules(&self) -> &[NameRule] {
        &self.inner.rules
    }

    /// The name rules that overrides of a mount string lifted at one place of their mount
    /// (`;.git:rw`), in the order the overrides came (`vfs mounts` shows them after the rule).
    #[must_use]
    pub fn loosened_rules(&self) -> &[Loosening] {
        &self.inner.loosenings
    }

    /// The agent-facing mounts, sorted by root.
    #[must_use]
    pub fn agent_mounts(&self) -> Vec<MountInfo> {
        let mut rows = self.agent_mounts_as_given();
        rows.sort_by(|left, right| left.root.cmp(&right.root));
        rows
    }

    /// The agent-facing mounts in the order the launch gave them (`--mount` after `--mount`,
    /// a settings file's or a crew's list as written): what "the first writable mount" means
    /// to the one who wrote them.
    #[must_use]
    pub fn agent_mounts_as_given(&self) -> Vec<MountInfo> {
        self.inner
            .mounts
            .iter()
            .filter(|mount| mount.visibility == Visibility::AgentFacing)
            .map(|mount| MountInfo {
                root: mount.root.as_str().to_owned(),
                rights: mount.rights.as_str().to_owned(),
                overrides: mount
                    .overrides
                    .iter()
                    .map(|item| OverrideInfo {
                        path: format!("{}/{}", mount.root, item.path()),
                        rights: item.rights().as_str().to_owned(),
                    })
                    .collect(),
            })
            .collect()
    }

    /// Each agent-facing mount's root and a word naming where its files lie (a hash of the
    /// store's place: a local root's canonical directory, an object mount's bucket and
    /// prefix), sorted by root. Two launches that mount the same place at a root give the same
    /// word; no physical path can be read from it. The journal records it with each change,
    /// so that an undo through a launch that maps the root elsewhere is refused.
    #[must_use]
    pub fn mount_places(&self) -> Vec<(String, String)> {
        let mut places: Vec<(String, String)> = self
            .inner
            .mounts
            .iter()
            .filter(|mount| mount.visibility == Visibility::AgentFacing)
            .map(|mount| {
                let mut hasher = xxhash_rust::xxh3::Xxh3::new();
                for segment in mount.storage.tree_base() {
                    hasher.update(segment.as_bytes());
                    hasher.update(&[0]);
                }
                (mount.root.as_str().to_owned(), format!("p{:016x}", hasher.digest()))
            })
            .collect();
        places.sort();
        places
    }

    /// True when some agent-facing mount or override grants write.
    #[must_use]
    pub fn agent_can_write(&self) -> bool {
        self.inner.mounts.iter().filter(|mount| mount.visibility == Visibility::AgentFacing).any(|mount| {
            mount.rights.allows(Access::Write) || mount.overrides.iter().any(|item| item.rights().allows(Access::Write))
        })
    }

    /// The roots of the agent-facing mounts that no write reaches: mounted `ro` with no
    /// override granting a write (name rules only take away), no agent-facing mount that takes
    /// writes beneath the root, and, for a local mount, none whose directory is at, inside or
    /// around its own (a write through that mount would change these files, and the change feed
    /// would tell it under that mount's names). Judged on the mounts' canonical directories,
    /// without a look at the disk. A front end may serve them without any means of writing (the
    /// sandbox's read-only views, ADR 0012).
    #[must_use]
    pub fn roots_without_writes(&self) -> Vec<String> {
        let mounts = &self.inner.mounts;
        let writes = |mount: &Mount| {
            mount.rights.allows(Access::Write) || mount.overrides.iter().any(|item| item.rights().allows(Access::Write))
        };
        let beneath = |root: &str, other: &str| {
            other.len() > root.len() && other.starts_with(root) && other.as_bytes()[root.len()] == b'/'
        };
        let overlap = |mount: &Mount, other: &Mount| match (mount.storage.local(), other.storage.local()) {
            (Some(mine), Some(theirs)) => {
                mine.identity() == theirs.identity()
                    || mine.relative_of(theirs).is_some()
                    || theirs.relative_of(mine).is_some()
            }
            _ => false,
        };
        let mut roots: Vec<String> = mounts
            .iter()
            .filter(|mount| mount.visibility == Visibility::AgentFacing && !writes(mount))
            .filter(|mount| {
                !mounts.iter().any(|other| {
                    other.visibility == Visibility::AgentFacing
                        && writes(other)
                        && (beneath(mount.root.as_str(), other.root.as_str()) || overlap(mount, other))
                })
            })
            .map(|mount| mount.root.as_str().to_owned())
            .collect();
        roots.sort();
        roots
    }

    /// Every mount with its physical directory, for the operator's table. Operator-facing only.
    #[must_use]
    pub fn operator_view(&self) -> Vec<OperatorMountView> {
        self.inner
            .mounts
            .iter()
            .map(|mount| OperatorMountView {
                root: mount.root.as_str().to_owned(),
                physical: mount.spec.physical().to_owned(),
                rights: mount.rights,
                overrides: mount.overrides.clone(),
                visibility: mount.visibility,
                id: mount.spec.id().cloned(),
                origin: mount.origin.clone(),
            })
            .collect()
    }

    /// The prompt table (`## Available File Mounts`) listing agent-facing mounts and overrides,
    /// for frameworks that put it in a system prompt.
    #[must_use]
    pub fn prompt_table(&self) -> String {
        let mut text = String::from("## Available File Mounts\n\n| mount | rights | access |\n|---|---|---|\n");
        for mount in self.agent_mounts() {
            text.push_str(&format!("| {} | {} | {} |\n", mount.root, mount.rights, describe(&mount.rights)));
            for item in mount.overrides {
                text.push_str(&format!("| {} | {} | {} |\n", item.path, item.rights, describe(&item.rights)));
            }
        }
        if let Some(sentence) = self.rules_sentence() {
            text.push('\n');
            text.push_str(&sentence);
            text.push('\n');
        }
        text
    }

    /// One sentence on the name rules for an agent's prompt: the classes, never the globs.
    fn rules_sentence(&self) -> Option<String> {
        let mut hidden: Vec<&str> = Vec::new();
        let mut read_only: Vec<&str> = Vec::new();
        for rule in self.name_rules() {
            let list = if rule.effect == RuleEffect::Hidden { &mut hidden } else { &mut read_only };
            if !list.contains(&rule.class.as_str()) {
                list.push(&rule.class);
            }
        }
        let secrets = format!(
            "Secrets ({}) are hidden: such names do not exist for you and cannot be created",
            hidden.join(", ")
        );
        // A class an override loosened somewhere names the places, which the table above
        // lists with their rights anyway.
        let read_only: Vec<String> = read_only
            .iter()
            .map(|class| {
                let mut places: Vec<String> = Vec::new();
                for loosening in self.loosened_rules().iter().filter(|loosening| loosening.class == *class) {
                    let place = format!("`{}`", loosening.place);
                    if !places.contains(&place) {
                        places.push(place);
                    }
                }
                if places.is_empty() {
                    (*class).to_owned()
                } else {
                    format!("{class} (except in {})", places.join(", "))
                }
            })
            .collect();
        let read_only = read_only.join(", ");
        match (hidden.is_empty(), read_only.is_empty()) {
            (false, false) => Some(format!("{secrets}; you may read but not change {read_only}.")),
            (false, true) => Some(format!("{secrets}.")),
            (true, false) => Some(format!("You may read but not change {read_only}.")),
            (true, true) => None,
        }
    }

    /// The final fail-closed scrub for text the server composed: replaces any spelling of any
    /// mount's physical directory and any internal root name. It should never fire; when it
    /// does it logs a warning, because that is a bug. Data and the agent's own input never pass
    /// through it: render an [`AgentText`](crate::AgentText) with [`MountRegistry::render`].
    #[must_use]
    pub fn scrub<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        self.inner.scrub.scrub(text)
    }

    /// Renders agent-bound text: the pieces the server composed pass the scrub (see
    /// [`MountRegistry::scrub`]), data and the agent's own input pass as they are.
    #[must_use]
    pub fn render(&self, text: &crate::AgentText) -> String {
        text.render(|piece| self.inner.scrub.scrub(piece))
    }

    /// [`MountRegistry::render`] with what the text refers to worded by a front end
    /// (`wording`): the words are composed, and scrubbed with the wording around them.
    pub fn render_with(&self, text: &crate::AgentText, wording: &dyn crate::Wording) -> String {
        text.render_with(wording, |piece| self.inner.scrub.scrub(piece))
    }

    /// The physical spellings the scrub knows (operator and test use: the leak checker).
    #[must_use]
    pub fn physical_spellings(&self) -> Vec<String> {
        self.inner.scrub.spellings().to_vec()
    }

    /// The internal roots (operator and test use: the leak checker).
    #[must_use]
    pub fn internal_roots(&self) -> Vec<String> {
        self.inner
            .mounts
            .iter()
            .filter(|mount| mount.visibility == Visibility::Internal)
            .map(|mount| mount.root.as_str().to_owned())
            .collect()
    }

    /// The lexical part of resolution for an agent, without touching the disk: parse,
    /// route to the longest root, hide internal roots, and decide the rights at the canonical
    /// path (`docs/design.md`, resolution rules 1 to 5). Says which rule decided. Links and physical nesting
    /// (steps 6 to 8) can still change the outcome when an operation runs.
    pub fn decide(&self, path: &str, access: Access) -> Result<Decision, Error> {
        let path = VirtualPath::new(path).map_err(|error| Error::invalid_path(&error))?;
        let (index, components) = self.inner.route(Caller::Agent, &path)?;
        let mount = &self.inner.mounts[index];
        let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
        let (rights, scope) = mount.rights_at(&rel);
        let rule = if scope == mount.root.as_str() { DecidedBy::MountRights } else { DecidedBy::Override };
        if !rights.allows(access) {
            self.inner.authorize(Caller::Agent, index, &rel, access, &path)?;
        }
        Ok(Decision { path, mount: mount.root.as_str().to_owned(), rights, scope, rule })
    }

    /// Operator use: the part of another agent-facing mount where agents may write the place
    /// that the agent path `path` leads to (links followed), if there is one. A launch uses it
    /// to keep a place it serves read-only (a crew's definition) out of agents' reach by any
    /// other root.
    ///
    /// The place is compared on canonical physical paths with every other local agent-facing
    /// mount's directory. Of the mounts that hold it, the innermost decide, as a walk from an
    /// outer one switches to an inner one's rights (resolution rule 7); each decides with its
    /// rights, overrides and name rules for a write there. The mount serving `path` is not
    /// one of them, so a writable mount around it is reported even though it would guard the
    /// place in this launch: what agents write around it is still there at the next one.
    ///
    /// # Errors
    /// The errors of resolving `path` for an agent (an unknown root, a missing place).
    pub fn writable_elsewhere(&self, path: &str) -> Result<Option<WritableElsewhere>, Error> {
        let path = VirtualPath::new(path).map_err(|error| Error::invalid_path(&error))?;
        let (serving, _) = self.inner.route(Caller::Agent, &path)?;
        let deadline = crate::budget::Deadline::never();
        let context = crate::ops::Context::new(&self.inner, Caller::Agent, deadline, crate::CallId::new());
        let located = context.locate::<crate::gate::Read>(&path, true, false)?;
        let Some(landed) = self.inner.mounts[located.mount].storage.local() else { return Ok(None) };
        let holders: Vec<(usize, Vec<String>)> = (self.inner.mounts.iter().enumerate())
            .filter(|(index, mount)| *index != serving && mount.visibility == Visibility::AgentFacing)
            .filter_map(|(index, mount)| Some((index, mount.storage.local()?.relative_of_place(landed, &located.rel)?)))
            .collect();
        let Some(innermost) = holders.iter().map(|(_, rel)| rel.len()).min() else { return Ok(None) };
        for (index, rel) in holders.iter().filter(|(_, rel)| rel.len() == innermost) {
            let mount = &self.inner.mounts[*index];
            let shown =
                if rel.is_empty() { mount.root.to_string() } else { format!("{}/{}", mount.root, rel.join("/")) };
            // A name no path can spell is still a place a link could lead a write to.
            let place = VirtualPath::new(&shown).unwrap_or_else(|_| mount.root_path.clone());
            if self.inner.authorize(Caller::Agent, *index, rel, Access::Write, &place).is_ok() {
                return Ok(Some(WritableElsewhere {
                    root: mount.root.to_string(),
                    physical: mount.spec.physical().to_owned(),
                    path: shown,
                    rights: mount.rights_at(rel).0,
                }));
            }
        }
        Ok(None)
    }

    /// Operator use: the agent-facing mount through which agents may `access` (read, or write)
    /// the host file at the canonical path `file` (`host_path::canonical`), if one does. Of the
    /// local mounts that hold it the innermost decide, with their rights, overrides and name
    /// rules, as a walk does. A launch keeps its own files out of agents' reach with it: a
    /// settings file agents could rewrite, a token file they could read.
    #[must_use]
    pub fn reaches_file(&self, file: &std::path::Path, access: Access) -> Option<WritableElsewhere> {
        let holders: Vec<(usize, Vec<String>)> = (self.inner.mounts.iter().enumerate())
            .filter(|(_, mount)| mount.visibility == Visibility::AgentFacing)
            .filter_map(|(index, mount)| Some((index, mount.storage.local()?.relative_of_path(file)?)))
            .collect();
        let innermost = holders.iter().map(|(_, rel)| rel.len()).min()?;
        holders.iter().filter(|(_, rel)| rel.len() == innermost).find_map(|(index, rel)| {
            let mount = &self.inner.mounts[*index];
            let shown =
                if rel.is_empty() { mount.root.to_string() } else { format!("{}/{}", mount.root, rel.join("/")) };
            let place = VirtualPath::new(&shown).unwrap_or_else(|_| mount.root_path.clone());
            self.inner.authorize(Caller::Agent, *index, rel, access, &place).ok()?;
            Some(WritableElsewhere {
                root: mount.root.to_string(),
                physical: mount.spec.physical().to_owned(),
                path: shown,
                rights: mount.rights_at(rel).0,
            })
        })
    }

    /// True when some mount is an object store: its calls wait on the network, which a
    /// server should not do on the thread that reads its requests.
    #[must_use]
    pub fn has_object_storage(&self) -> bool {
        self.inner.mounts.iter().any(|mount| mount.storage.capabilities().network)
    }

    /// What the store behind an agent-facing or internal root can do (operator and test use:
    /// the conformance kit skips a scenario only for a capability the store lacks).
    #[must_use]
    pub fn capabilities(&self, root: &str) -> Option<Capabilities> {
        self.inner.mounts.iter().find(|mount| mount.root.as_str() == root).map(|mount| mount.storage.capabilities())
    }

    /// The bounds in force.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }
}

/// How much `rights` grant, for choosing the reading that grants less.
fn strength(rights: Rights) -> u8 {
    match rights {
        Rights::ReadOnly => 0,
        Rights::ReadWriteNoDelete => 1,
        Rights::ReadWrite => 2,
    }
}

fn describe(rights: &str) -> &'static str {
    match rights {
        "rw" => "read, write, create, delete",
        "rwnd" => "read, write, create (no delete)",
        _ => "read only",
    }
}

#[cfg(test)]
mod tests {
    use super::{MountRegistry, check_object_nesting};
    use crate::spec::{MountRoot, MountSpec, Rights};
    use crate::storage::local::Durability;

    /// A registry over two fresh directories under `dir`: `/w`, agent-facing, and the
    /// internal root `/llm-logs`; `defer` builds it with `defer_agent_syncs`.
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds directories on disk")]
    fn agent_and_internal(dir: &std::path::Path, defer: bool) -> MountRegistry {
        let spec = |name: &str, root: &str| {
            std::fs::create_dir_all(dir.join(name)).expect("fixture directory");
            let physical = dir.join(name).to_string_lossy().into_owned();
            MountSpec::new(physical, MountRoot::new(root).expect("a root"), Rights::ReadWrite)
        };
        let mut builder = MountRegistry::builder();
        builder.mount(spec("w", "/w")).internal(spec("logs", "/llm-logs"));
        if defer {
            builder.defer_agent_syncs();
        }
        builder.build(crate::ambient_authority()).expect("registry")
    }

    /// The local store of the mount at `root`.
    fn local<'r>(registry: &'r MountRegistry, root: &str) -> &'r crate::storage::local::LocalRoot {
        let mount = registry.inner.mounts.iter().find(|mount| mount.root.as_str() == root).expect("the mount");
        mount.storage.local().expect("a local mount")
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test reads what was written")]
    fn deferred_syncs_are_the_agent_mounts_only_and_one_sync_makes_them_durable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = agent_and_internal(dir.path(), true);
        assert!(!local(&registry, "/w").syncs_each_write(), "an agent-facing mount defers its syncs");
        assert!(local(&registry, "/llm-logs").syncs_each_write(), "an internal root still syncs each write");
        let agent = registry.agent();
        agent.write("/w/a.txt", "a\n", &crate::ops::Precondition::Any).expect("a write");
        agent.sync_deferred_writes().expect("one sync");
        assert_eq!(std::fs::read(dir.path().join("w/a.txt")).expect("the file"), b"a\n");
        let default = agent_and_internal(dir.path(), false);
        assert!(local(&default, "/w").syncs_each_write());
    }

    /// A call may defer the syncs of its writes to agent-facing mounts
    /// (`AgentAccessor::with_syncs_deferred`), never those of an internal root; the deferral
    /// ends with the call's work, and its writes are there.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test reads what was written")]
    fn a_call_defers_the_syncs_of_agent_facing_mounts_only_while_it_runs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = agent_and_internal(dir.path(), false);
        let durability = |root: &str| local(&registry, root).durability();
        let agent = registry.agent();
        let (during, synced) = agent.with_syncs_deferred(|| {
            agent.write("/w/a.txt", "a\n", &crate::ops::Precondition::Any).expect("a write");
            (durability("/w"), durability("/llm-logs"))
        });
        synced.expect("one sync of the file system");
        assert_eq!(during, (Durability::Later, Durability::Now), "the agent's mount deferred, the internal root not");
        assert_eq!(
            (durability("/w"), durability("/llm-logs")),
            (Durability::Now, Durability::Now),
            "each write syncs again after"
        );
        assert_eq!(std::fs::read(dir.path().join("w/a.txt")).expect("the file"), b"a\n");
    }

    /// A call's deferral is its own thread's: a write made at the same time by another call
    /// still syncs, and both writes succeed.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test reads what was written")]
    fn another_call_at_the_same_time_keeps_syncing_each_write() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = agent_and_internal(dir.path(), false);
        let agent = registry.agent();
        let inside = std::sync::Barrier::new(2);
        let beside = std::sync::Barrier::new(2);
        let (deferring, other) = std::thread::scope(|scope| {
            let deferring = scope.spawn(|| {
                agent.with_syncs_deferred(|| {
                    inside.wait();
                    beside.wait();
                    agent.write("/w/undone.txt", "u\n", &crate::ops::Precondition::Any).expect("the undo's write");
                    local(&registry, "/w").durability()
                })
            });
            let other = scope.spawn(|| {
                inside.wait();
                let syncs = local(&registry, "/w").durability();
                agent.write("/w/other.txt", "o\n", &crate::ops::Precondition::Any).expect("the other write");
                beside.wait();
                syncs
            });
            (deferring.join().expect("the deferring call"), other.join().expect("the other call"))
        });
        let (deferred_syncs, synced) = deferring;
        synced.expect("one sync of the file system");
        assert_eq!((deferred_syncs, other), (Durability::Later, Durability::Now), "deferred on the undo's thread only");
        assert_eq!(std::fs::read(dir.path().join("w/undone.txt")).expect("the file"), b"u\n");
        assert_eq!(std::fs::read(dir.path().join("w/other.txt")).expect("the file"), b"o\n");
    }

    /// A call may hold the directory syncs of its writes to agent-facing mounts
    /// (`AgentAccessor::with_directory_syncs_held`, the journal's calls): each write still
    /// syncs its file, one directory sync per write is handed back, none for an internal
    /// root, and the writes are there.
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "fixture: the test reads what was written; capability-proof: it writes the internal root"
    )]
    fn a_call_holds_the_directory_syncs_of_agent_facing_mounts_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = agent_and_internal(dir.path(), false);
        let durability = |root: &str| local(&registry, root).durability();
        let agent = registry.agent();
        let logs = registry.mint_privileged("/llm-logs").expect("an internal root");
        let (during, held) = agent.with_directory_syncs_held(|| {
            agent.write("/w/a.txt", "a\n", &crate::ops::Precondition::Any).expect("a write");
            agent.write("/w/b.txt", "b\n", &crate::ops::Precondition::Any).expect("another");
            logs.write("/llm-logs/c.txt", b"c\n", &crate::ops::Precondition::Any).expect("the internal root's write");
            (durability("/w"), durability("/llm-logs"))
        });
        assert_eq!(during, (Durability::FileNow, Durability::Now), "the agent's mount held, the internal root not");
        assert_eq!(held.len(), 2, "one held directory sync for each of the agent's writes");
        drop(held);
        assert_eq!(
            (durability("/w"), durability("/llm-logs")),
            (Durability::Now, Durability::Now),
            "nothing held after"
        );
        assert_eq!(std::fs::read(dir.path().join("w/a.txt")).expect("the file"), b"a\n");
        assert_eq!(std::fs::read(dir.path().join("w/b.txt")).expect("the file"), b"b\n");
    }

    /// A move across file systems copies, then removes its source: the copy's directory is
    /// synced at once even in a call that holds its syncs, so that no crash can find the
    /// source gone and the copy not yet durable. The file is moved.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds and reads files on two file systems")]
    fn a_move_across_file_systems_syncs_its_copy_before_it_removes_the_source() {
        let disk = tempfile::tempdir().expect("temp dir");
        let shm = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm (tmpfs)");
        std::fs::write(disk.path().join("a.txt"), "a\n").expect("fixture file");
        let spec = |dir: &std::path::Path, root: &str| {
            MountSpec::new(dir.to_string_lossy().into_owned(), MountRoot::new(root).expect("a root"), Rights::ReadWrite)
        };
        let registry = MountRegistry::builder()
            .mount(spec(disk.path(), "/w"))
            .mount(spec(shm.path(), "/m"))
            .build(crate::ambient_authority())
            .expect("registry");
        let agent = registry.agent();
        let (moved, held) = agent.with_directory_syncs_held(|| {
            agent.move_path("/w/a.txt", "/m/a.txt", &crate::ops::Precondition::Any, &crate::ops::Precondition::Absent)
        });
        assert!(moved.expect("the move").copied, "a copy across file systems");
        assert_eq!(held.len(), 0, "nothing of the move is held");
        assert_eq!(std::fs::read(shm.path().join("a.txt")).expect("the copy"), b"a\n");
        assert!(!disk.path().join("a.txt").exists());
        let (written, held) = agent.with_directory_syncs_held(|| {
            agent.write("/m/b.txt", "b\n", &crate::ops::Precondition::Any).map(|_| local(&registry, "/m").durability())
        });
        assert_eq!((written.expect("a write"), held.len()), (Durability::FileNow, 1), "the hold is back after a move");
    }

    /// A call's held syncs are its own thread's: a write made at the same time by another call
    /// syncs its directory itself, both writes succeed, and only the holding call's is held.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test reads what was written")]
    fn another_call_at_the_same_time_syncs_its_own_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let registry = agent_and_internal(dir.path(), false);
        let agent = registry.agent();
        let inside = std::sync::Barrier::new(2);
        let beside = std::sync::Barrier::new(2);
        let (holding, other) = std::thread::scope(|scope| {
            let holding = scope.spawn(|| {
                agent.with_directory_syncs_held(|| {
                    inside.wait();
                    beside.wait();
                    agent
                        .write("/w/held.txt", "h\n", &crate::ops::Precondition::Any)
                        .expect("the holding call's write");
                    local(&registry, "/w").durability()
                })
            });
            let other = scope.spawn(|| {
                inside.wait();
                let durability = local(&registry, "/w").durability();
                agent.write("/w/other.txt", "o\n", &crate::ops::Precondition::Any).expect("the other write");
                beside.wait();
                durability
            });
            (holding.join().expect("the holding call"), other.join().expect("the other call"))
        });
        let (held_durability, held) = holding;
        assert_eq!((held_durability, other), (Durability::FileNow, Durability::Now), "held on its own thread only");
        assert_eq!(held.len(), 1, "the holding call's one write");
        assert_eq!(std::fs::read(dir.path().join("w/held.txt")).expect("the file"), b"h\n");
        assert_eq!(std::fs::read(dir.path().join("w/other.txt")).expect("the file"), b"o\n");
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds files on disk")]
    fn deferred_name_rules_are_parsed_by_build_and_judge_as_rules_compiled_at_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("w")).expect("fixture directory");
        for name in [".env", ".env.example", "a.txt"] {
            std::fs::write(dir.path().join("w").join(name), "x\n").expect("fixture file");
        }
        let physical = dir.path().join("w").to_string_lossy().into_owned();
        let spec = MountSpec::new(physical, MountRoot::new("/w").expect("a root"), Rights::ReadWrite);
        let build = |rules: Vec<crate::NameRule>, defer: bool| {
            let mut builder = MountRegistry::builder();
            builder.mount(spec.clone()).name_rules(rules);
            if defer {
                builder.defer_name_rules();
            }
            builder.build(crate::ambient_authority())
        };
        let refused = build(vec![crate::NameRule::hide("[", "--hide")], true).expect_err("a malformed rule");
        assert_eq!(refused.to_string(), "the name rule `[` is not valid: unclosed character class; missing ']'");
        // A settings file cannot write lines or terminal controls into the operator's output.
        let refused =
            build(vec![crate::NameRule::hide("a\nb\u{1b}[2J", "--hide")], true).expect_err("a malformed rule");
        assert_eq!(
            refused.to_string(),
            "the name rule `a\\nb\\u{1b}[2J` is not valid: unclosed character class; missing ']'"
        );
        let eager = build(crate::NameRule::defaults(), false).expect("registry");
        let deferred = build(crate::NameRule::defaults(), true).expect("registry");
        let read = |registry: &MountRegistry, path: &str| {
            let read = registry.agent().read_text(path, &crate::ops::ReadWindow::default());
            read.map(|read| read.content).map_err(|error| error.to_string())
        };
        assert_eq!(read(&deferred, "/w/.env"), Err("`/w/.env` does not exist".to_owned()));
        for path in ["/w/.env", "/w/.env.example", "/w/a.txt", "/w/.ENV"] {
            assert_eq!(read(&deferred, path), read(&eager, path), "{path}");
        }
        deferred.compile_name_rules().expect("the defaults compile");
        eager.compile_name_rules().expect("compiled by build");

        // Rules that could not be compiled let nothing change: a move judged on them could
        // carry a protected file out of its protection.
        std::fs::create_dir_all(dir.path().join("w/u/.docker")).expect("fixture directory");
        std::fs::write(dir.path().join("w/u/.docker/config.json"), "{}").expect("fixture file");
        let broken = build(crate::NameRule::defaults(), true).expect("registry");
        broken.inner.policies[0].fail_compile_for_test();
        assert!(broken.compile_name_rules().is_err());
        let agent = broken.agent();
        let moved = agent.move_path(
            "/w/u/.docker",
            "/w/u/dock",
            &crate::ops::Precondition::Any,
            &crate::ops::Precondition::Absent,
        );
        assert_eq!(moved.map(drop).map_err(|error| error.to_string()), Err("`/w/u/.docker` does not exist".to_owned()));
        let moved = agent.move_path("/w/u", "/w/v", &crate::ops::Precondition::Any, &crate::ops::Precondition::Absent);
        assert_eq!(moved.map(drop).map_err(|error| error.to_string()), Err("`/w/u` does not exist".to_owned()));
        let written =
            agent.write("/w/new.txt", "x\n", &crate::ops::Precondition::Any).map_err(|error| error.to_string());
        assert_eq!(written.map(drop), Err("`/w/new.txt` does not exist".to_owned()));
        assert!(dir.path().join("w/u/.docker/config.json").exists());
        assert_eq!(read(&broken, "/w/a.txt"), Ok("x\n".to_owned()));
    }

    /// The place `/place/file` served read-only, with other mounts around it.
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds directories on disk")]
    fn around(dir: &std::path::Path, others: &[(&str, &str, Rights)]) -> MountRegistry {
        std::fs::create_dir_all(dir.join("outer/inner/place")).expect("fixture directories");
        std::fs::write(dir.join("outer/inner/place/file"), "x").expect("fixture file");
        let spec = |physical: &str, root: &str, rights| {
            let physical = dir.join(physical).to_string_lossy().into_owned();
            MountSpec::new(physical, MountRoot::new(root).expect("a root"), rights)
        };
        let mut builder = MountRegistry::builder();
        builder.mount(spec("outer/inner/place", "/place", Rights::ReadOnly));
        for (physical, root, rights) in others {
            builder.mount(spec(physical, root, *rights));
        }
        builder.build(crate::ambient_authority()).expect("a registry")
    }

    #[test]
    fn a_place_is_writable_elsewhere_where_the_innermost_other_mount_lets_agents_write() {
        let dir = tempfile::tempdir().expect("a temp dir");
        // The serving mount, nested in a writable one, does not hide it.
        let registry = around(dir.path(), &[("outer", "/outer", Rights::ReadWrite)]);
        let found = registry.writable_elsewhere("/place/file").expect("resolves").expect("writable");
        assert_eq!(
            (found.root.as_str(), found.path.as_str(), found.rights),
            ("/outer", "/outer/inner/place/file", Rights::ReadWrite)
        );
        let found = registry.writable_elsewhere("/place").expect("resolves").expect("writable");
        assert_eq!(found.path, "/outer/inner/place");
        // Another mount between them decides there (resolution rule 7).
        let registry =
            around(dir.path(), &[("outer", "/outer", Rights::ReadWrite), ("outer/inner", "/inner", Rights::ReadOnly)]);
        assert_eq!(registry.writable_elsewhere("/place/file").expect("resolves"), None);
        let registry = around(dir.path(), &[("outer/inner/place", "/same", Rights::ReadOnly)]);
        assert_eq!(registry.writable_elsewhere("/place/file").expect("resolves"), None);
    }

    fn nested(first: &str, second: &str) -> bool {
        let specs: Vec<MountSpec> = [first, second].iter().map(|text| text.parse().expect("a mount string")).collect();
        check_object_nesting(specs.iter()).is_err()
    }

    #[test]
    fn only_prefixes_that_hold_one_another_in_one_bucket_nest() {
        assert!(nested("s3://team/work:/a:ro", "s3://team/work/vendor:/b:rw"));
        assert!(nested("s3://team/work/vendor:/a:ro", "s3://team/work:/b:rw"));
        assert!(nested("s3://team/work:/a:ro", "s3://team/work:/b:rw"));
        assert!(nested("s3://team:/a:ro", "s3://team/x:/b:rw"));
        assert!(!nested("s3://team/work:/a:ro", "s3://team/workshop:/b:rw"));
        assert!(!nested("s3://team/a:/a:ro", "s3://other/a:/b:rw"));
        assert!(nested("memory://team:/a:ro", "memory://team/x:/b:rw"));
        assert!(!nested("memory://team:/a:ro", "s3://team:/b:rw"));
        assert!(!nested("/srv/team:/a:ro", "/srv/team/x:/b:rw"));
    }
}
