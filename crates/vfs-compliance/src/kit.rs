//! The conformance kit: scenarios every registry and storage backend must pass.
//!
//! A backend's test suite implements [`Factory`] (build a registry whose mounts are backed by
//! the directories of a [`Layout`]) and calls [`run_all`]; the local backend's run lives in this
//! crate's `tests/conformance.rs`, and an object-storage backend runs the same scenarios by
//! uploading the layout first. Each scenario asserts exact outcomes an agent would see (kinds
//! and texts), checks every agent-bound text with the [`LeakChecker`], and checks that nothing
//! outside the mounts changed. Effects are observed through accessors, so a scenario means
//! the same on every backend (where the layout's directories are the store, the files on disk
//! are checked as well, see [`World::on_disk`]). The kit is the stores' contract: a scenario is
//! skipped only for a capability the store itself declares it lacks ([`vfs::Capabilities`]:
//! links, special files, appends, directory identities), [`run_all`] reports each skip with its
//! reason, and a skipped scenario is still run: if it passes, the declaration is stale and the
//! report fails.

use std::fmt::Debug;
use std::panic::{AssertUnwindSafe, catch_unwind};

use vfs::{
    AgentAccessor, Capabilities, CreateDirOutcome, DeleteOutcome, Edit, EditOptions, EditOutcome, Error, ErrorKind,
    FileInfo, GrepRequest, GrepResult, Limits, Listing, MediaRead, MountRegistry, MountSpec, MoveOutcome, NameSearch,
    Precondition, ReadWindow, Rights, SpecPart, TextRead, Tree, VirtualPath, Visibility, WriteOutcome,
};

use crate::fixture::Layout;
use crate::leak::LeakChecker;

/// One mount a scenario asks for: a directory of the layout, a root and rights (the rights may
/// carry sub-path overrides, as in `rw;vendor:ro`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedMount<'a> {
    /// The directory, relative to the layout's base.
    pub directory: &'a str,
    /// The virtual root.
    pub root: &'a str,
    /// The rights and overrides, as in a mount string.
    pub rights: &'a str,
    /// Agent-facing or internal.
    pub visibility: Visibility,
}

/// What a scenario asks a factory to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan<'a> {
    /// The mounts.
    pub mounts: Vec<PlannedMount<'a>>,
    /// The bounds (default: [`Limits::default`]).
    pub limits: Limits,
}

/// Builds a registry over a layout. Implemented by each backend's test suite.
pub trait Factory {
    /// A short name for reports.
    fn name(&self) -> &str;

    /// Builds a registry whose mounts serve the planned directories of `layout`. The layout is
    /// complete when this is called: scenarios observe every later effect through accessors.
    fn build(&self, layout: &Layout, plan: &Plan<'_>) -> Result<MountRegistry, String>;

    /// True when the store is the layout's directories themselves, so that a scenario can
    /// also check the files on disk (false for a backend that copies the layout elsewhere).
    fn serves_layout_directly(&self) -> bool {
        true
    }

    /// What the backend's store declares it can do, asked of a registry the factory builds.
    fn capabilities(&self) -> Result<Capabilities, String> {
        let layout = Layout::new();
        layout.file("probe/file.txt", "probe\n");
        let plan = Plan {
            mounts: vec![PlannedMount {
                directory: "probe",
                root: "/probe",
                rights: "ro",
                visibility: Visibility::AgentFacing,
            }],
            limits: Limits::default(),
        };
        let registry = self.build(&layout, &plan)?;
        registry.capabilities("/probe").ok_or_else(|| "the probe registry has no `/probe`".to_owned())
    }
}

/// The local-directory backend: mounts the layout's directories directly, with the authority
/// to open them by their host paths (the test's own, [`vfs::ambient_authority`]).
#[derive(Debug, Clone, Copy)]
pub struct LocalFactory(pub vfs::AmbientAuthority);

impl Factory for LocalFactory {
    fn name(&self) -> &'static str {
        "local"
    }

    fn build(&self, layout: &Layout, plan: &Plan<'_>) -> Result<MountRegistry, String> {
        let mut builder = MountRegistry::builder();
        builder.limits(plan.limits);
        for mount in &plan.mounts {
            let spec: MountSpec =
                layout.spec(mount.directory, mount.root, mount.rights).map_err(|error| error.to_string())?;
            match mount.visibility {
                Visibility::Internal => builder.internal(spec),
                Visibility::AgentFacing => builder.mount(spec),
            };
        }
        builder.build(self.0).map_err(|error| error.to_string())
    }
}

/// What an agent reads of an operation's result.
pub trait AgentView {
    /// The text the agent sees.
    fn agent_view(&self) -> String;
}

macro_rules! agent_view {
    ($($type:ty),*) => {
        $(impl AgentView for $type {
            fn agent_view(&self) -> String {
                self.to_text()
            }
        })*
    };
}

agent_view!(
    TextRead,
    Listing,
    Tree,
    NameSearch,
    GrepResult,
    FileInfo,
    WriteOutcome,
    EditOutcome,
    CreateDirOutcome,
    MoveOutcome,
    DeleteOutcome
);

impl AgentView for MediaRead {
    fn agent_view(&self) -> String {
        format!("{} {} {}", self.path, self.mime_type, self.data)
    }
}

impl<T: AgentView> AgentView for Result<T, Error> {
    fn agent_view(&self) -> String {
        match self {
            Ok(value) => value.agent_view(),
            Err(error) => error.to_string(),
        }
    }
}

/// A scenario's verdict: `Err` holds what went wrong.
pub type Outcome = Result<(), String>;

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Outcome {
    if condition { Ok(()) } else { Err(message()) }
}

/// Fails unless `left == right`.
#[expect(clippy::needless_pass_by_value, reason = "callers compare temporaries")]
pub fn ensure_eq<T: PartialEq + Debug>(left: T, right: T, what: &str) -> Outcome {
    ensure(left == right, || format!("{what}: expected {right:?}, got {left:?}"))
}

/// Expects an error of `kind`; returns its text.
pub fn expect_kind<T: Debug>(result: Result<T, Error>, kind: ErrorKind, what: &str) -> Result<String, String> {
    match result {
        Err(error) if error.kind() == kind => Ok(error.to_string()),
        Err(error) => Err(format!("{what}: expected {kind:?}, got {:?}: {error}", error.kind())),
        Ok(value) => Err(format!("{what}: expected {kind:?}, got success: {value:?}")),
    }
}

/// Expects an error of `kind` with exactly `text` (a denial an agent reads).
pub fn expect_denial<T: Debug>(result: Result<T, Error>, kind: ErrorKind, text: &str, what: &str) -> Outcome {
    let actual = expect_kind(result, kind, what)?;
    ensure_eq(actual.as_str(), text, what)
}

/// A layout, a registry over it, and a leak checker for the registry.
pub struct World {
    /// The on-disk side.
    pub layout: Layout,
    /// The registry under test.
    pub registry: MountRegistry,
    /// The checker for agent-bound text.
    pub leaks: LeakChecker,
}

impl World {
    /// Builds a world from a layout and a plan.
    pub fn build(factory: &dyn Factory, layout: Layout, plan: &Plan<'_>) -> Result<Self, String> {
        let registry = factory.build(&layout, plan)?;
        let leaks = LeakChecker::new(&registry)
            .with_spelling(&layout.base().to_string_lossy())
            .with_spelling(&layout.path("outside").to_string_lossy());
        Ok(Self { layout, registry, leaks })
    }

    /// The agent accessor.
    #[must_use]
    pub fn agent(&self) -> AgentAccessor {
        self.registry.agent()
    }

    /// On a local tree, also checks the file on disk: a backend whose reads agree with its own
    /// writes but not with the disk must not pass. (Object stores are observed through the
    /// accessors only.)
    pub fn on_disk(&self, factory: &dyn Factory, relative: &str, expected: &str) -> Outcome {
        if !factory.serves_layout_directly() {
            return Ok(());
        }
        ensure_eq(self.layout.read(relative).as_deref(), Some(expected), &format!("`{relative}` on disk"))
    }

    /// What the holder of an internal root's capability sees there: each file's name and
    /// content, top level. The backend-neutral way to prove an agent changed nothing inside.
    pub fn internal_view(&self, root: &str) -> Result<Vec<(String, String)>, String> {
        #[expect(clippy::disallowed_methods, reason = "capability-proof: the kit observes an internal root")]
        let privileged = self.registry.mint_privileged(root).ok_or_else(|| format!("`{root}` is not internal"))?;
        let listing = privileged.list(root).map_err(|error| error.to_string())?;
        let mut seen = Vec::new();
        for entry in &listing.entries {
            let path = format!("{root}/{}", entry.name);
            let text = privileged.read_text(&path, &ReadWindow::default()).map(|read| read.content);
            seen.push((entry.name.clone(), text.unwrap_or_else(|error| error.to_string())));
        }
        Ok(seen)
    }

    /// The agent text of `value`, after checking it for leaks and for scrub hits.
    pub fn show(&self, value: &impl AgentView) -> Result<String, String> {
        let text = value.agent_view();
        self.check_text(&text)?;
        Ok(text)
    }

    /// Checks agent-bound text for leaks, scrub hits and outside content.
    pub fn check_text(&self, text: &str) -> Outcome {
        let leaks = self.leaks.check(text);
        ensure(leaks.is_empty(), || format!("agent-bound text leaks {leaks:?}: {text:?}"))?;
        ensure(self.registry.scrub(text) == text, || format!("the scrub fired on {text:?}"))?;
        ensure(!text.contains(SECRET), || format!("outside content reached the agent: {text:?}"))
    }
}

/// The content of files outside every mount: it must never reach an agent.
pub const SECRET: &str = "TOP-SECRET-CANARY";

/// The standard layout: `/src` (ro) over `data`, `/output` (rw) over `out`, `/llm-logs`
/// (internal) over `logs`, and `outside` next to them, holding [`SECRET`].
pub fn standard(factory: &dyn Factory) -> Result<World, String> {
    standard_with(factory, Limits::default())
}

/// [`standard`] with other bounds.
pub fn standard_with(factory: &dyn Factory, limits: Limits) -> Result<World, String> {
    World::build(factory, standard_layout(), &standard_plan(limits))
}

/// The standard layout, before a registry is built over it (to add files first).
#[must_use]
pub fn standard_layout() -> Layout {
    let layout = Layout::new();
    layout
        .file("data/a.txt", "alpha\n")
        .file("data/sub/b.txt", "beta\n")
        .mkdir("out")
        .file("logs/secret.jsonl", "{\"secret\":true}\n")
        .file("outside/secret.txt", format!("{SECRET}\n"));
    layout
}

/// The standard mounts over [`standard_layout`].
#[must_use]
pub fn standard_plan(limits: Limits) -> Plan<'static> {
    Plan {
        mounts: vec![
            PlannedMount { directory: "data", root: "/src", rights: "ro", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "out", root: "/output", rights: "rw", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "logs", root: "/llm-logs", rights: "rw", visibility: Visibility::Internal },
        ],
        limits,
    }
}

/// The unknown-root text of the standard world.
pub const UNKNOWN_ROOT: &str = "no mount serves this path; available mounts: `/output` (rw), `/src` (ro)";

/// One scenario.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// Its name.
    pub name: &'static str,
    /// What it covers (mount grammar, rights, …).
    pub area: &'static str,
    /// What the scenario needs of the store, if anything, and why it means nothing without.
    pub requires: Option<Requirement>,
    /// The check.
    pub run: fn(&dyn Factory) -> Outcome,
}

/// A capability a scenario needs, and why it means nothing without it.
#[derive(Debug, Clone, Copy)]
pub struct Requirement {
    /// Whether the store has it.
    pub has: fn(&Capabilities) -> bool,
    /// Why the scenario is skipped without it.
    pub why: &'static str,
}

/// Every scenario, in a fixed order.
#[must_use]
pub fn scenarios() -> Vec<Scenario> {
    const LINKS: Requirement =
        Requirement { has: |capabilities| capabilities.links, why: "the store has no symbolic links" };
    const SPECIAL: Requirement = Requirement {
        has: |capabilities| capabilities.special_files,
        why: "the store holds no FIFOs, sockets or devices",
    };
    let any = |name, area, run| Scenario { name, area, requires: None, run };
    let local = |name, area, requires, run| Scenario { name, area, requires: Some(requires), run };
    vec![
        any("mount strings that parse round-trip", "mount grammar", grammar_accepts),
        any("bad mount strings name the bad part in one line", "mount grammar", grammar_refuses),
        any("paths canonicalise lexically", "canonicalisation", canonicalisation),
        any("the longest root wins at a segment boundary", "resolution order", resolution_order),
        any("rights and overrides decide, with exact denials", "rights", rights),
        any("an internal root is an unknown root", "internal absence", internal_absence),
        any("the privileged accessor reaches only its root", "internal absence", privileged_reach),
        local("links inside work, links out are refused", "symlink policy", LINKS, symlink_policy),
        any("nested mounts keep their own rights and visibility", "physical nesting", physical_nesting),
        any("writes are atomic and never go through links", "atomic writes", atomic_writes),
        any("version guards refuse stale writes", "atomic writes", version_guards),
        any("every result is bounded and says how to narrow", "bounded results", bounded_results),
        local("special files are refused at once", "symlink policy", SPECIAL, special_files),
        any("registries refuse bad mount sets", "mount grammar", registry_refusals),
        any("every configuration: rights × visibility × caller × link", "configurations", configurations),
    ]
}

/// What [`run_all`] found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Scenarios that passed.
    pub passed: Vec<&'static str>,
    /// Scenarios that failed, with why.
    pub failed: Vec<(&'static str, String)>,
    /// Scenarios skipped for a capability the store lacks, with why (each still ran, and
    /// failed, as it must without the capability).
    pub skipped: Vec<(&'static str, &'static str)>,
    /// Scenarios skipped for a capability the store declares it lacks, that passed anyway:
    /// the declaration is stale.
    pub stale: Vec<&'static str>,
}

impl Report {
    /// Panics listing the failures, if any.
    ///
    /// # Panics
    /// When a scenario failed.
    pub fn assert_all_passed(&self) {
        let mut failures: Vec<String> = self.failed.iter().map(|(name, why)| format!("- {name}: {why}")).collect();
        failures.extend(
            self.stale
                .iter()
                .map(|name| format!("- {name}: skipped for a capability the store declares it lacks, yet it passed")),
        );
        assert!(failures.is_empty(), "{} scenario(s) failed:\n{}", failures.len(), failures.join("\n"));
    }
}

/// Runs every scenario against `factory`; a panic in a scenario is a failure. A scenario that
/// needs a capability the store declares it lacks is skipped: it still runs, and passing
/// anyway marks the declaration stale.
#[must_use]
pub fn run_all(factory: &dyn Factory) -> Report {
    let mut report = Report::default();
    let capabilities = match factory.capabilities() {
        Ok(capabilities) => capabilities,
        Err(why) => {
            report.failed.push(("the store declares its capabilities", why));
            return report;
        }
    };
    for scenario in scenarios() {
        let lacking = scenario.requires.filter(|requirement| !(requirement.has)(&capabilities));
        let outcome = match catch_unwind(AssertUnwindSafe(|| (scenario.run)(factory))) {
            Ok(outcome) => outcome,
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                    .unwrap_or_default();
                Err(format!("panicked: {why}"))
            }
        };
        match (lacking, outcome) {
            (Some(_), Ok(())) => report.stale.push(scenario.name),
            (Some(requirement), Err(_)) => report.skipped.push((scenario.name, requirement.why)),
            (None, Ok(())) => report.passed.push(scenario.name),
            (None, Err(why)) => report.failed.push((scenario.name, why)),
        }
    }
    report
}

fn read(agent: &AgentAccessor, path: &str) -> Result<TextRead, Error> {
    agent.read_text(path, &ReadWindow::default())
}

/// A file's whole content as the agent reads it, or `None` when the read fails.
fn content(agent: &AgentAccessor, path: &str) -> Option<String> {
    read(agent, path).ok().map(|read| read.content)
}

fn overwrite() -> Precondition {
    Precondition::Any
}

fn grammar_accepts(_factory: &dyn Factory) -> Outcome {
    for (text, physical, root, rights, overrides) in [
        ("./data:/src", "./data", "/src", Rights::ReadOnly, 0),
        ("./data:/src:RW", "./data", "/src", Rights::ReadWrite, 0),
        ("./data:/output/:rwnd", "./data", "/output", Rights::ReadWriteNoDelete, 0),
        ("C:\\data:/src:ro", "C:\\data", "/src", Rights::ReadOnly, 0),
        ("\"a:b;c\":/x:rw", "a:b;c", "/x", Rights::ReadWrite, 0),
        ("/srv/data:/src/vendor:ro", "/srv/data", "/src/vendor", Rights::ReadOnly, 0),
        ("./d:/src:rw;vendor:ro;vendor/lib:rw", "./d", "/src", Rights::ReadWrite, 2),
        ("01HZY3M5Q8V7K2N4P6R8T0W2X4|./d:/src:rw", "./d", "/src", Rights::ReadWrite, 0),
    ] {
        let spec: MountSpec = text.parse().map_err(|error| format!("`{text}` should parse: {error}"))?;
        ensure_eq(spec.physical(), physical, text)?;
        ensure_eq(spec.root().as_str(), root, text)?;
        ensure_eq(spec.rights(), rights, text)?;
        ensure_eq(spec.overrides().len(), overrides, text)?;
        let again: MountSpec = spec
            .to_string()
            .parse()
            .map_err(|error| format!("`{spec}` (display of `{text}`) should parse: {error}"))?;
        ensure_eq(&again, &spec, &format!("round trip of `{text}`"))?;
    }
    Ok(())
}

fn grammar_refuses(_factory: &dyn Factory) -> Outcome {
    for (text, part) in [
        ("", SpecPart::Shape),
        ("./data", SpecPart::Shape),
        ("./data:src", SpecPart::Root),
        ("./data:/", SpecPart::Root),
        ("./data:/a/../b", SpecPart::Root),
        ("./data:/a b", SpecPart::Root),
        ("./data:C:/x", SpecPart::Root),
        ("./data:/src:rx", SpecPart::Rights),
        ("./data:/src:ro;../x:rw", SpecPart::Override),
        ("./data:/src:ro;vendor", SpecPart::Override),
        ("NOT-A-ULID|./data:/src", SpecPart::Id),
        ("\"unclosed:/src", SpecPart::Physical),
        (":/src", SpecPart::Physical),
        ("./a\nb:/src", SpecPart::Shape),
    ] {
        let error = match text.parse::<MountSpec>() {
            Ok(spec) => return Err(format!("`{text:?}` should be refused, got {spec:?}")),
            Err(error) => error,
        };
        ensure_eq(error.part(), part, &format!("part for {text:?}"))?;
        let line = error.to_string();
        ensure(!line.contains('\n') && line.starts_with("invalid mount `"), || format!("not one line: {line:?}"))?;
        ensure(!error.hint().is_empty(), || format!("no hint for {text:?}"))?;
    }
    Ok(())
}

fn canonicalisation(factory: &dyn Factory) -> Outcome {
    for (input, canonical) in [
        ("/src/a.txt", "/src/a.txt"),
        ("//src///a.txt", "/src/a.txt"),
        ("/src/./a.txt", "/src/a.txt"),
        ("/src/sub/../a.txt", "/src/a.txt"),
        ("/../../src/a.txt", "/src/a.txt"),
        ("/src/", "/src"),
        ("/src/..", "/"),
        ("/src/a\\..\\b", "/src/a\\..\\b"),
        ("/src/%2e%2e", "/src/%2e%2e"),
    ] {
        let path = VirtualPath::new(input).map_err(|error| format!("{input:?}: {error}"))?;
        ensure_eq(path.as_str(), canonical, input)?;
        ensure_eq(path.to_string().parse::<VirtualPath>().ok(), Some(path.clone()), input)?;
    }
    for (input, kind) in [
        ("src/a.txt", ErrorKind::InvalidPath),
        ("~/a.txt", ErrorKind::InvalidPath),
        ("C:\\a.txt", ErrorKind::InvalidPath),
        ("/src/a\0", ErrorKind::InvalidPath),
        ("/src/a\u{7}", ErrorKind::InvalidPath),
    ] {
        ensure(VirtualPath::new(input).is_err(), || format!("{input:?} should not parse"))?;
        let world = standard(factory)?;
        let text = expect_kind(read(&world.agent(), input), kind, input)?;
        world.check_text(&text)?;
    }
    let world = standard(factory)?;
    let agent = world.agent();
    for spelling in ["/src/a.txt", "/src//a.txt", "/src/./sub/../a.txt", "/output/../src/a.txt"] {
        ensure_eq(read(&agent, spelling).map(|read| read.content).ok().as_deref(), Some("alpha\n"), spelling)?;
    }
    Ok(())
}

fn resolution_order(factory: &dyn Factory) -> Outcome {
    let layout = Layout::new();
    layout.file("data/vendor/x.txt", "outer\n").file("vendored/x.txt", "inner\n").file("data2/y.txt", "y\n");
    let plan = Plan {
        mounts: vec![
            PlannedMount { directory: "data", root: "/src", rights: "rw", visibility: Visibility::AgentFacing },
            PlannedMount {
                directory: "vendored",
                root: "/src/vendor",
                rights: "ro",
                visibility: Visibility::AgentFacing,
            },
        ],
        limits: Limits::default(),
    };
    let world = World::build(factory, layout, &plan)?;
    let agent = world.agent();
    ensure_eq(
        read(&agent, "/src/vendor/x.txt").map(|read| read.content).ok().as_deref(),
        Some("inner\n"),
        "nested root",
    )?;
    ensure_eq(
        world.show(&agent.list("/src/vendor"))?.as_str(),
        "[FILE] x.txt\n",
        "a nested root lists its own directory",
    )?;
    let unknown = "no mount serves this path; available mounts: `/src` (rw), `/src/vendor` (ro)";
    for path in ["/src2/y.txt", "/sr/y.txt", "/SRC/vendor/x.txt", "/srcvendor/x.txt"] {
        let result = read(&agent, path);
        world.show(&result)?;
        expect_denial(result, ErrorKind::UnknownRoot, unknown, path)?;
    }
    expect_denial(
        agent.write("/src/vendor/new.txt", "x", &overwrite()),
        ErrorKind::PermissionDenied,
        "cannot write `/src/vendor/new.txt`: `/src/vendor` is mounted ro; mounts that grant write: `/src` (rw)",
        "the nested mount's rights apply",
    )?;
    ensure_eq(world.show(&agent.list("/"))?.as_str(), "[DIR] src\n", "the virtual root")?;
    Ok(())
}

fn rights(factory: &dyn Factory) -> Outcome {
    let layout = Layout::new();
    layout.file("ro/a.txt", "a\n").file("rw/a.txt", "a\n").file("rwnd/a.txt", "a\n").file("mixed/vendor/v.txt", "v\n");
    let plan = Plan {
        mounts: vec![
            PlannedMount { directory: "ro", root: "/ro", rights: "ro", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "rw", root: "/rw", rights: "rw", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "rwnd", root: "/rwnd", rights: "rwnd", visibility: Visibility::AgentFacing },
            PlannedMount {
                directory: "mixed",
                root: "/mixed",
                rights: "rw;vendor:ro",
                visibility: Visibility::AgentFacing,
            },
        ],
        limits: Limits::default(),
    };
    let world = World::build(factory, layout, &plan)?;
    let agent = world.agent();
    let write_grantors = "`/mixed` (rw), `/rw` (rw), `/rwnd` (rwnd)";
    expect_denial(
        agent.write("/ro/a.txt", "x", &overwrite()),
        ErrorKind::PermissionDenied,
        &format!("cannot write `/ro/a.txt`: `/ro` is mounted ro; mounts that grant write: {write_grantors}"),
        "write on ro",
    )?;
    expect_denial(
        agent.delete("/ro/a.txt", false, &Precondition::Any),
        ErrorKind::PermissionDenied,
        "cannot delete `/ro/a.txt`: `/ro` is mounted ro; mounts that grant delete: `/mixed` (rw), `/rw` (rw)",
        "delete on ro",
    )?;
    expect_kind(agent.create_directory("/ro/new"), ErrorKind::PermissionDenied, "mkdir on ro")?;
    expect_kind(
        agent.move_path("/ro/a.txt", "/rw/b.txt", &Precondition::Any, &Precondition::Absent),
        ErrorKind::PermissionDenied,
        "move from ro",
    )?;
    expect_kind(
        agent.edit("/ro/a.txt", &[Edit { old_text: "a".into(), new_text: "b".into() }], &EditOptions::default()),
        ErrorKind::PermissionDenied,
        "edit on ro",
    )?;
    expect_denial(
        agent.delete("/rwnd/a.txt", false, &Precondition::Any),
        ErrorKind::PermissionDenied,
        "cannot delete `/rwnd/a.txt`: `/rwnd` is mounted rwnd; mounts that grant delete: `/mixed` (rw), `/rw` (rw)",
        "delete on rwnd",
    )?;
    world.show(&agent.write("/rwnd/a.txt", "b\n", &overwrite()))?;
    world.show(&agent.write("/rw/new.txt", "n\n", &Precondition::Absent))?;
    world.show(&agent.delete("/rw/new.txt", false, &Precondition::Any))?;
    for spelling in ["/mixed/vendor/v.txt", "/mixed/./vendor/v.txt", "/mixed/x/../vendor/v.txt"] {
        expect_denial(
            agent.write(spelling, "x", &overwrite()),
            ErrorKind::PermissionDenied,
            &format!(
                "cannot write `/mixed/vendor/v.txt`: `/mixed/vendor` is mounted ro; mounts that grant write: {write_grantors}"
            ),
            spelling,
        )?;
    }
    ensure_eq(content(&agent, "/ro/a.txt").as_deref(), Some("a\n"), "ro content")?;
    ensure_eq(content(&agent, "/mixed/vendor/v.txt").as_deref(), Some("v\n"), "override content")?;
    ensure_eq(content(&agent, "/rwnd/a.txt").as_deref(), Some("b\n"), "rwnd write")?;
    world.on_disk(factory, "ro/a.txt", "a\n")?;
    world.on_disk(factory, "mixed/vendor/v.txt", "v\n")?;
    world.on_disk(factory, "rwnd/a.txt", "b\n")?;
    Ok(())
}

/// Every operation on `root` and below, as agent text (for byte comparison).
fn every_answer(agent: &AgentAccessor, root: &str) -> Vec<String> {
    let file = format!("{root}/secret.jsonl");
    let edit = [Edit { old_text: "a".into(), new_text: "b".into() }];
    vec![
        read(agent, &file).agent_view(),
        agent.read_media(&file).agent_view(),
        agent.info(&file).agent_view(),
        agent.list(root).agent_view(),
        agent.tree(root, None, &[]).agent_view(),
        agent.search_files(root, "*", &[]).agent_view(),
        agent
            .grep(&GrepRequest { pattern: "x".into(), path: Some(root.to_owned()), ..GrepRequest::default() })
            .agent_view(),
        agent.write(&file, "x", &overwrite()).agent_view(),
        agent.edit(&file, &edit, &EditOptions::default()).agent_view(),
        agent.create_directory(&format!("{root}/new")).agent_view(),
        agent.delete(&file, false, &Precondition::Any).agent_view(),
        agent.move_path(&file, "/output/stolen", &Precondition::Any, &Precondition::Absent).agent_view(),
        agent.move_path("/output/x", &format!("{root}/x"), &Precondition::Any, &Precondition::Absent).agent_view(),
    ]
}

fn internal_absence(factory: &dyn Factory) -> Outcome {
    let layout = standard_layout();
    layout.file("out/x", "x\n");
    let world = World::build(factory, layout, &standard_plan(Limits::default()))?;
    let agent = world.agent();
    let before = world.layout.snapshot("logs");
    let seen_before = world.internal_view("/llm-logs")?;
    let internal = every_answer(&agent, "/llm-logs");
    let unknown = every_answer(&agent, "/no-such-root");
    for (index, (left, right)) in internal.iter().zip(&unknown).enumerate() {
        ensure_eq(left, right, &format!("operation {index} on an internal vs an unknown root"))?;
        world.check_text(left)?;
    }
    ensure_eq(internal[0].as_str(), UNKNOWN_ROOT, "the unknown-root text")?;
    ensure_eq(world.show(&agent.list("/"))?.as_str(), "[DIR] output\n[DIR] src\n", "the virtual root")?;
    ensure(!world.registry.prompt_table().contains("llm-logs"), || "the prompt table names an internal root".into())?;
    ensure(agent.list_mounts().iter().all(|mount| mount.root != "/llm-logs"), || "list_mounts names it".into())?;
    let grep = agent.grep(&GrepRequest { pattern: "secret".into(), ..GrepRequest::default() });
    ensure_eq(grep.as_ref().map(|result| result.matches).ok(), Some(0), "grep from / finds nothing internal")?;
    ensure_eq(world.layout.snapshot("logs"), before, "the internal directory")?;
    ensure_eq(world.internal_view("/llm-logs")?, seen_before, "the internal root, through its capability")?;
    ensure_eq(content(&agent, "/output/x").as_deref(), Some("x\n"), "the move's source stayed")?;
    Ok(())
}

fn privileged_reach(factory: &dyn Factory) -> Outcome {
    let world = standard(factory)?;
    #[expect(clippy::disallowed_methods, reason = "capability-proof: the kit proves the capability's reach")]
    let minted = (world.registry.mint_privileged("/llm-logs"), world.registry.mint_privileged("/src"));
    let (Some(privileged), None) = minted else {
        return Err("mint_privileged must mint for an internal root only".into());
    };
    ensure_eq(
        privileged.read_text("/llm-logs/secret.jsonl", &ReadWindow::default()).map(|read| read.content).ok().as_deref(),
        Some("{\"secret\":true}\n"),
        "the privileged accessor reads its root",
    )?;
    expect_kind(
        privileged.read_text("/src/a.txt", &ReadWindow::default()),
        ErrorKind::UnknownRoot,
        "the privileged accessor reaches nothing else",
    )?;
    let appender = privileged.into_append_only();
    let opened = appender.open_append("/llm-logs/new.jsonl");
    if !factory.capabilities()?.append {
        // Objects cannot be appended to: the exchange log is always a local folder.
        return expect_denial(
            opened,
            ErrorKind::InvalidArgument,
            "`/llm-logs/new.jsonl` is in object storage, where this operation is not available",
            "append on object storage",
        );
    }
    let mut file = opened.map_err(|error| error.to_string())?;
    file.append(b"{\"n\":1}\n").map_err(|error| error.to_string())?;
    ensure_eq(
        world.internal_view("/llm-logs")?.iter().find(|(name, _)| name == "new.jsonl").map(|(_, text)| text.as_str()),
        Some("{\"n\":1}\n"),
        "appended",
    )?;
    world.on_disk(factory, "logs/new.jsonl", "{\"n\":1}\n")?;
    Ok(())
}

fn symlink_policy(factory: &dyn Factory) -> Outcome {
    let world = standard(factory)?;
    let layout = &world.layout;
    layout
        .symlink("../a.txt", "data/sub/relative")
        .symlink(layout.path("data/a.txt"), "data/absolute")
        .symlink("sub", "data/dirlink")
        .symlink("relative", "data/sub/chain")
        .symlink(layout.path("outside/secret.txt"), "data/out-absolute")
        .symlink("../outside/secret.txt", "data/out-relative")
        .symlink(layout.path("outside"), "data/out-dir")
        .symlink("../out", "data/other-mount")
        .symlink("/etc/passwd", "data/passwd")
        .symlink("missing", "data/dangling")
        .symlink("loop-b", "data/loop-a")
        .symlink("loop-a", "data/loop-b");
    let agent = world.agent();
    for path in ["/src/sub/relative", "/src/absolute", "/src/dirlink/relative", "/src/dirlink/chain"] {
        let result = read(&agent, path);
        ensure_eq(world.show(&result)?.as_str(), "alpha\n", path)?;
    }
    for path in ["/src/out-absolute", "/src/out-relative", "/src/out-dir/secret.txt", "/src/other-mount", "/src/passwd"]
    {
        let result = read(&agent, path);
        world.show(&result)?;
        expect_denial(
            result,
            ErrorKind::Escape,
            &format!("`{path}` goes through a symbolic link that leads outside its mount; it is not followed"),
            path,
        )?;
    }
    expect_denial(read(&agent, "/src/dangling"), ErrorKind::NotFound, "`/src/dangling` does not exist", "dangling")?;
    expect_denial(
        read(&agent, "/src/loop-a"),
        ErrorKind::SymlinkLoop,
        "`/src/loop-a` goes through too many symbolic links (a loop?)",
        "loop",
    )?;
    let listing = world.show(&agent.list("/src"))?;
    ensure(listing.contains("[LINK] out-dir\n"), || format!("links are listed as links: {listing}"))?;
    let tree = world.show(&agent.tree("/src", None, &[]))?;
    ensure(!tree.contains("secret.txt"), || format!("a tree followed a link out: {tree}"))?;
    // Writes and deletes act on the link, never through it.
    layout.symlink(layout.path("outside/secret.txt"), "out/link");
    let before = layout.snapshot("outside");
    expect_denial(
        agent.write("/output/link", "pwned", &overwrite()),
        ErrorKind::Symlink,
        "`/output/link` is a symbolic link; vfs does not write or delete through links, so address the file it points to",
        "write through a link",
    )?;
    world.show(&agent.delete("/output/link", false, &Precondition::Any))?;
    ensure_eq(layout.snapshot("outside"), before, "outside after link writes")?;
    Ok(())
}

/// The nesting scenario's layout: `work` holding an internal `logs` and a read-only `vendor`,
/// each also reached through a link.
#[must_use]
pub fn nesting_layout() -> Layout {
    let layout = Layout::new();
    layout
        .file("work/notes.txt", "n\n")
        .file("work/logs/secret.jsonl", "{}\n")
        .file("work/vendor/lib.rs", "lib\n")
        .symlink("logs", "work/log-alias")
        .symlink("vendor", "work/vendor-alias");
    layout
}

/// The nesting scenario's mounts over [`nesting_layout`]: `/work` (rw, its `logs` ro), the
/// internal `/llm-logs` inside it, and `/vendor` (ro) nested in it. An internal directory may
/// lie only where the outer mount grants no write; there it is a missing name.
#[must_use]
pub fn nesting_plan() -> Plan<'static> {
    Plan {
        mounts: vec![
            PlannedMount {
                directory: "work",
                root: "/work",
                rights: "rw;logs:ro",
                visibility: Visibility::AgentFacing,
            },
            PlannedMount { directory: "work/logs", root: "/llm-logs", rights: "rw", visibility: Visibility::Internal },
            PlannedMount {
                directory: "work/vendor",
                root: "/vendor",
                rights: "ro",
                visibility: Visibility::AgentFacing,
            },
        ],
        limits: Limits::default(),
    }
}

fn physical_nesting(factory: &dyn Factory) -> Outcome {
    let layout = nesting_layout();
    // The plan with `/work` writable all through is refused (below).
    let plan = nesting_plan();
    if !factory.capabilities()?.identities {
        // Object keys have no directory a walk could recognise as another mount's root, so
        // nesting is refused when the registry is built, before anything is served.
        return match World::build(factory, layout, &plan) {
            Err(refusal) if refusal.ends_with("object-storage mounts cannot nest") => Ok(()),
            Err(other) => Err(format!("nested object mounts: expected the nesting refusal, got {other}")),
            Ok(_) => Err("nested object mounts were accepted".into()),
        };
    }
    let mut writable = plan.clone();
    writable.mounts[0].rights = "rw";
    match World::build(factory, nesting_layout(), &writable) {
        Err(refusal) if refusal.ends_with("an agent could tell that something is there") => {}
        Err(other) => return Err(format!("an internal root in a writable part: expected the refusal, got {other}")),
        Ok(_) => return Err("an internal root in a writable part was accepted".into()),
    }
    let world = World::build(factory, layout, &plan)?;
    let agent = world.agent();
    for path in ["/work/logs/secret.jsonl", "/work/log-alias/secret.jsonl", "/work/./logs/secret.jsonl"] {
        let canonical = VirtualPath::new(path).map_err(|error| error.to_string())?;
        let result = read(&agent, path);
        world.show(&result)?;
        expect_denial(result, ErrorKind::NotFound, &format!("`{canonical}` does not exist"), path)?;
    }
    ensure_eq(
        world.show(&agent.list("/work"))?.as_str(),
        "[LINK] log-alias\n[FILE] notes.txt\n[DIR] vendor\n[LINK] vendor-alias\n",
        "the internal directory is absent from listings",
    )?;
    let found = agent.search_files("/work", "*.jsonl", &[]).map_err(|error| error.to_string())?;
    ensure(found.matches.is_empty(), || format!("search found internal files: {found:?}"))?;
    // As for a missing name in a read-only part.
    expect_denial(
        agent.write("/work/logs/x.txt", "x", &overwrite()),
        ErrorKind::PermissionDenied,
        "cannot write `/work/logs/x.txt`: `/work/logs` is mounted ro; mounts that grant write: `/work` (rw)",
        "write into internal",
    )?;
    expect_denial(
        agent.delete("/work/logs", true, &Precondition::Any),
        ErrorKind::PermissionDenied,
        "cannot delete `/work/logs`: `/work/logs` is mounted ro; mounts that grant delete: `/work` (rw)",
        "delete internal",
    )?;
    for path in ["/work/vendor/lib.rs", "/work/vendor-alias/lib.rs", "/vendor/lib.rs"] {
        let canonical = VirtualPath::new(path).map_err(|error| error.to_string())?;
        expect_denial(
            agent.write(path, "pwned", &overwrite()),
            ErrorKind::PermissionDenied,
            &format!("cannot write `{canonical}`: `/vendor` is mounted ro; mounts that grant write: `/work` (rw)"),
            path,
        )?;
    }
    expect_kind(
        agent.delete("/work/vendor", true, &Precondition::Any),
        ErrorKind::PermissionDenied,
        "delete the nested ro mount",
    )?;
    ensure_eq(content(&agent, "/vendor/lib.rs").as_deref(), Some("lib\n"), "ro content")?;
    let internal = world.internal_view("/llm-logs")?;
    ensure_eq(internal, vec![("secret.jsonl".to_owned(), "{}\n".to_owned())], "internal content")?;
    world.on_disk(factory, "work/vendor/lib.rs", "lib\n")?;
    world.on_disk(factory, "work/logs/secret.jsonl", "{}\n")?;
    Ok(())
}

fn atomic_writes(factory: &dyn Factory) -> Outcome {
    let world = standard(factory)?;
    let agent = world.agent();
    let layout = &world.layout;
    let created = agent.write("/output/dir/a.txt", "one\n", &Precondition::Absent);
    ensure(world.show(&created)?.starts_with("created `/output/dir/a.txt` (4 bytes"), || "created text".into())?;
    expect_denial(
        agent.write("/output/dir/a.txt", "two\n", &Precondition::Absent),
        ErrorKind::AlreadyExists,
        "`/output/dir/a.txt` already exists; ask for an overwrite to replace it",
        "no overwrite by default",
    )?;
    world.show(&agent.write("/output/dir/a.txt", "two\n", &overwrite()))?;
    ensure_eq(content(&agent, "/output/dir/a.txt").as_deref(), Some("two\n"), "overwritten")?;
    world.on_disk(factory, "out/dir/a.txt", "two\n")?;
    if factory.capabilities()?.hard_links {
        // A hard link to a file outside is replaced, never written through.
        layout.hard_link("outside/secret.txt", "out/hard");
        world.show(&agent.write("/output/hard", "replaced\n", &overwrite()))?;
        ensure_eq(layout.read("outside/secret.txt"), Some(format!("{SECRET}\n")), "hard link target")?;
    } else {
        world.show(&agent.write("/output/hard", "replaced\n", &Precondition::Absent))?;
    }
    let edit = [Edit { old_text: "replaced".into(), new_text: "edited".into() }];
    let edited = agent.edit("/output/hard", &edit, &EditOptions::default());
    let text = world.show(&edited)?;
    ensure(text.contains("--- /output/hard\n+++ /output/hard\n"), || format!("the diff names virtual paths: {text}"))?;
    // No temporary file is ever left behind or shown.
    for index in 0..20 {
        agent.write("/output/dir/a.txt", &format!("{index}\n"), &overwrite()).map_err(|error| error.to_string())?;
    }
    let listing = world.show(&agent.list("/output/dir"))?;
    ensure_eq(listing.as_str(), "[FILE] a.txt\n", "no temporary files")?;
    // Moves: refuse an existing destination unless asked.
    world.show(&agent.write("/output/b.txt", "b\n", &Precondition::Absent))?;
    expect_kind(
        agent.move_path("/output/b.txt", "/output/dir/a.txt", &Precondition::Any, &Precondition::Absent),
        ErrorKind::AlreadyExists,
        "move",
    )?;
    world.show(&agent.move_path("/output/b.txt", "/output/dir/a.txt", &Precondition::Any, &Precondition::Any))?;
    ensure_eq(content(&agent, "/output/dir/a.txt").as_deref(), Some("b\n"), "moved over")?;
    world.on_disk(factory, "out/dir/a.txt", "b\n")?;
    expect_kind(read(&agent, "/output/b.txt"), ErrorKind::NotFound, "the moved file's old name")?;
    Ok(())
}

fn version_guards(factory: &dyn Factory) -> Outcome {
    let world = standard(factory)?;
    let agent = world.agent();
    let written = agent.write("/output/v.txt", "1\n", &Precondition::Absent).map_err(|error| error.to_string())?;
    let version = written.version.clone().ok_or("a written file has a version")?;
    let info = agent.info("/output/v.txt").map_err(|error| error.to_string())?;
    ensure_eq(info.version.as_deref(), Some(version.as_str()), "info reports the write's version")?;
    let guarded = Precondition::Version(version.clone());
    let second = agent.write("/output/v.txt", "2\n", &guarded).map_err(|error| error.to_string())?;
    let stale = agent.write("/output/v.txt", "3\n", &guarded);
    let current = second.version.clone().unwrap_or_default();
    expect_denial(
        stale,
        ErrorKind::VersionMismatch,
        &format!("`/output/v.txt` changed since you read it: its version is now `{current}`; read it again and retry"),
        "stale write",
    )?;
    let edit = [Edit { old_text: "2".into(), new_text: "4".into() }];
    let stale_edit = EditOptions { precondition: Precondition::Version(version), ..EditOptions::default() };
    expect_kind(agent.edit("/output/v.txt", &edit, &stale_edit), ErrorKind::VersionMismatch, "stale edit")?;
    ensure_eq(content(&agent, "/output/v.txt").as_deref(), Some("2\n"), "content after stale attempts")?;
    world.on_disk(factory, "out/v.txt", "2\n")?;
    Ok(())
}

fn bounded_results(factory: &dyn Factory) -> Outcome {
    let mut limits = Limits::default();
    limits.entries = 5;
    limits.read_bytes = 64;
    limits.matches = 3;
    limits.depth = 3;
    let layout = standard_layout();
    for index in 0..12 {
        layout.file(&format!("data/many/f{index:02}.txt"), "needle\n");
    }
    layout.file("data/long.txt", "0123456789\n".repeat(40));
    layout.file("data/d1/d2/d3/d4/deep.txt", "deep\n");
    let world = World::build(factory, layout, &standard_plan(limits))?;
    let agent = world.agent();
    let listing = agent.list("/src/many").map_err(|error| error.to_string())?;
    ensure(listing.truncated && listing.entries.len() == 5 && listing.total == 12, || format!("{listing:?}"))?;
    ensure(
        world
            .show(&Ok::<_, Error>(listing))?
            .ends_with("[truncated: showing 5 of 12 entries; narrow with a search of names]\n"),
        || "listing note".into(),
    )?;
    let tree = agent.tree("/src", None, &[]).map_err(|error| error.to_string())?;
    ensure(tree.truncated && tree.count == 5, || format!("tree bound: {tree:?}"))?;
    world.show(&Ok::<_, Error>(tree))?;
    let search = agent.search_files("/src", "*.txt", &[]).map_err(|error| error.to_string())?;
    ensure(search.truncated && search.matches.len() == 5, || format!("search bound: {search:?}"))?;
    let grep = agent
        .grep(&GrepRequest { pattern: "needle".into(), path: Some("/src".into()), ..GrepRequest::default() })
        .map_err(|error| error.to_string())?;
    ensure(grep.truncated && grep.matches == 3, || format!("grep bound: {grep:?}"))?;
    let long = read(&agent, "/src/long.txt").map_err(|error| error.to_string())?;
    ensure(long.truncated && long.content.len() <= 64, || format!("read bound: {long:?}"))?;
    let text = world.show(&Ok::<_, Error>(long))?;
    ensure(text.contains("read on with offset"), || format!("the read says how to page: {text}"))?;
    let deep = agent.tree("/src/d1", Some(100), &[]).map_err(|error| error.to_string())?;
    ensure(!world.show(&Ok::<_, Error>(deep))?.contains("deep.txt"), || "depth bound".into())?;
    Ok(())
}

fn special_files(factory: &dyn Factory) -> Outcome {
    let world = standard(factory)?;
    let fifo = world.layout.path("data/fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|status| status.success()) {
        return Ok(());
    }
    let agent = world.agent();
    let started = std::time::Instant::now();
    expect_denial(
        read(&agent, "/src/fifo"),
        ErrorKind::Unsupported,
        "`/src/fifo` is not a regular file or directory (a FIFO, socket or device); vfs does not open it",
        "fifo",
    )?;
    expect_kind(agent.info("/src/fifo"), ErrorKind::Unsupported, "fifo info")?;
    expect_kind(agent.read_media("/src/fifo"), ErrorKind::Unsupported, "fifo media")?;
    let grep = agent.grep(&GrepRequest { pattern: "x".into(), path: Some("/src".into()), ..GrepRequest::default() });
    world.show(&grep)?;
    ensure(started.elapsed() < std::time::Duration::from_secs(5), || "a FIFO blocked".into())?;
    Ok(())
}

fn registry_refusals(factory: &dyn Factory) -> Outcome {
    let layout = Layout::new();
    layout.mkdir("a").file("file", "x");
    let twice = Plan {
        mounts: vec![
            PlannedMount { directory: "a", root: "/src", rights: "ro", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "a", root: "/src", rights: "rw", visibility: Visibility::AgentFacing },
        ],
        limits: Limits::default(),
    };
    ensure_eq(
        factory.build(&layout, &twice).err().as_deref(),
        Some("the virtual root `/src` is mounted twice"),
        "dup",
    )?;
    let case = Plan {
        mounts: vec![
            PlannedMount { directory: "a", root: "/src", rights: "ro", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "a", root: "/SRC", rights: "rw", visibility: Visibility::AgentFacing },
        ],
        limits: Limits::default(),
    };
    ensure_eq(
        factory.build(&layout, &case).err().as_deref(),
        Some("the virtual roots `/src` and `/SRC` differ only by case"),
        "case",
    )?;
    for directory in ["missing", "file"] {
        let plan = Plan {
            mounts: vec![PlannedMount { directory, root: "/src", rights: "ro", visibility: Visibility::AgentFacing }],
            limits: Limits::default(),
        };
        ensure(factory.build(&layout, &plan).is_err(), || format!("a mount of `{directory}` must be refused"))?;
    }
    Ok(())
}

/// Who calls in [`configurations`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Agent,
    Privileged,
}

/// Runs a read and a write on a plain file, a link inside and a link outside, for every
/// rights token, visibility and caller, and compares with what the rules say must happen.
fn configurations(factory: &dyn Factory) -> Outcome {
    // Without a local tree there are no links: the plain file alone, per configuration.
    let targets: &[&str] = if factory.capabilities()?.links { &["f.txt", "in", "out"] } else { &["f.txt"] };
    let mut checked = 0usize;
    for rights in ["ro", "rw", "rwnd"] {
        for visibility in [Visibility::AgentFacing, Visibility::Internal] {
            let layout = Layout::new();
            layout
                .file("m/f.txt", "x\n")
                .file("outside/secret.txt", format!("{SECRET}\n"))
                .symlink("f.txt", "m/in")
                .symlink("../outside/secret.txt", "m/out");
            let plan = Plan {
                mounts: vec![PlannedMount { directory: "m", root: "/m", rights, visibility }],
                limits: Limits::default(),
            };
            let world = World::build(factory, layout, &plan)?;
            let outside = world.layout.snapshot("outside");
            #[expect(clippy::disallowed_methods, reason = "capability-proof: the kit proves the capability's reach")]
            let privileged = world.registry.mint_privileged("/m");
            ensure_eq(privileged.is_some(), visibility == Visibility::Internal, "mint only for an internal root")?;
            for caller in [Caller::Agent, Caller::Privileged] {
                for &target in targets {
                    let path = format!("/m/{target}");
                    let what = format!("{rights} {visibility} {caller:?} {target}");
                    let (read, write, absent) = match (caller, &privileged) {
                        (Caller::Agent, _) => {
                            let agent = world.agent();
                            let read = read(&agent, &path);
                            let write = agent.write(&path, "y\n", &overwrite());
                            world.show(&read)?;
                            world.show(&write)?;
                            if write.is_ok() {
                                agent.write(&path, "x\n", &overwrite()).map_err(|error| format!("{what}: {error}"))?;
                            }
                            (read, write, visibility == Visibility::Internal)
                        }
                        (Caller::Privileged, Some(privileged)) => {
                            let read = privileged.read_text(&path, &ReadWindow::default());
                            let write = privileged.write(&path, b"y\n", &overwrite());
                            if write.is_ok() {
                                privileged
                                    .write(&path, b"x\n", &overwrite())
                                    .map_err(|error| format!("{what}: {error}"))?;
                            }
                            // The holder of the capability may see its own root's name, never a
                            // physical path.
                            let base = world.layout.base().to_string_lossy().into_owned();
                            for text in [read.agent_view(), write.agent_view()] {
                                ensure(!text.contains(&base) && !text.contains(SECRET), || format!("{what}: {text}"))?;
                            }
                            (read, write, false)
                        }
                        (Caller::Privileged, None) => continue,
                    };
                    expect_configuration(absent, rights, target, read, write, &what)?;
                    checked += 1;
                }
            }
            ensure_eq(world.layout.snapshot("outside"), outside, "outside")?;
        }
    }
    // Per rights token: the agent on the agent-facing and the internal mount, the privileged
    // caller on the internal one.
    ensure_eq(checked, 3 * 3 * targets.len(), "configurations checked")
}

fn expect_configuration(
    absent: bool,
    rights: &str,
    target: &str,
    read: Result<TextRead, Error>,
    write: Result<WriteOutcome, Error>,
    what: &str,
) -> Outcome {
    if absent {
        expect_kind(read, ErrorKind::UnknownRoot, what)?;
        expect_kind(write, ErrorKind::UnknownRoot, what)?;
        return Ok(());
    }
    match target {
        "out" => {
            expect_kind(read, ErrorKind::Escape, what)?;
        }
        _ => ensure_eq(read.map(|read| read.content).ok().as_deref(), Some("x\n"), what)?,
    }
    match (rights, target) {
        ("ro", _) => {
            expect_kind(write, ErrorKind::PermissionDenied, what)?;
        }
        (_, "f.txt") => ensure(write.is_ok(), || format!("{what}: write should succeed: {write:?}"))?,
        _ => {
            expect_kind(write, ErrorKind::Symlink, what)?;
        }
    }
    Ok(())
}
