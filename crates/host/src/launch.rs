//! Launch composition (`docs/design.md`, contracts): from the operator's options to a frozen mount registry.
//!
//! Everything a launch can refuse is refused here, before anything is served, and each refusal
//! is one [`HostError`]. Files the launch reads (the settings file, the crew file) and the
//! directories it may create (the exchange log's, the journal's) are host paths the operator
//! named: they are opened with the [`AmbientAuthority`] that `main` mints once and passes in
//! (ADR 0010), through `vfs::host_path`, the one place besides the stores that opens a host
//! path. The crew file is read beneath its directory, as agents see it at `/crew`.
//!
//! # Selection rules, per virtual root
//! 1. A `--mount` for the root replaces every settings entry of that root.
//! 2. Else a `--mount-id` that names one of the root's settings entries selects it.
//! 3. Else the crew's `<ulid>|/root` entry selects.
//! 4. Else a root declared once in the settings is used as declared.
//! 5. Else (declared several times, nothing selecting) the launch is refused.
//!
//! Then: no agent-facing mount at all means the current directory at `/workspace` (`ro`, or
//! `rw` with `--allow-write`); the runner adds `/crew` (ro) and `/llm-logs` (internal).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use vfs::host_path::{self, HostKind, HostPathError};
use vfs::{AmbientAuthority, Location, MountId, MountRegistry, MountRoot, MountSpec, Rights, Visibility};

use crate::crew::Crew;
use crate::error::{HostError, Problems};

/// Roots the runner reserves; the last entry stands for `/crews-<N>`.
pub const RESERVED_ROOTS: [&str; 6] = ["/crew", "/crews", "/crews-N", "/script", "/llm-logs", "/llm-journal"];

/// The virtual root of the exchange log.
pub(crate) const LOG_ROOT: &str = "/llm-logs";

/// What the operator asked for. Relative physical paths resolve against
/// [`LaunchOptions::current_dir`], except in a settings file, where they resolve against the
/// file's directory.
#[derive(Debug, Clone, Default)]
#[expect(clippy::struct_excessive_bools, reason = "each is a switch of its own, set by its own option")]
pub struct LaunchOptions {
    /// `--mount SPEC`, in order.
    pub mounts: Vec<String>,
    /// `--mount-id ULID`, in order.
    pub mount_ids: Vec<String>,
    /// `--settings FILE`.
    pub settings: Option<PathBuf>,
    /// `--crew PATH`: a crew YAML file, or a directory holding `crew.yaml`. A stdio launch
    /// takes one; the HTTP daemon hosts each at its own endpoint (`crate::hosted`).
    pub crews: Vec<PathBuf>,
    /// `--llm-log DIR`: the exchange log directory (created if missing).
    pub llm_log: Option<PathBuf>,
    /// `--journal DIR`: the journal directory (created if missing), for `vfs undo`.
    pub journal: Option<PathBuf>,
    /// `--journal-max-bytes N`: the bound on the journal's bytes, its log and its images
    /// (default 1 GiB, at least [`crate::MIN_MAX_BYTES`]).
    pub journal_max_bytes: Option<u64>,
    /// Not an option: writes to the agent-facing mounts are made durable at once by the one
    /// who reports them, not each with its own `fsync`s (`vfs undo`, which restores many files
    /// and syncs them before the undo's journal entry; see
    /// `vfs::MountRegistryBuilder::defer_agent_syncs`).
    pub defer_syncs: bool,
    /// Not an option: `rwnd` counts as `rw` (`vfs undo`, the operator's: "no delete" is a rule
    /// for agents, and undoing a file an agent created in an `rwnd` mount removes it; see
    /// `vfs::MountRegistryBuilder::deletes_with_writes`).
    pub operator_deletes: bool,
    /// Not an option: the name rules are parsed by the launch and compiled later, by
    /// `vfs::MountRegistry::compile_name_rules` or the first judgement of a name (`vfs serve`
    /// compiles them on a thread while it answers its first request; see
    /// `vfs::MountRegistryBuilder::defer_name_rules`).
    pub defer_name_rules: bool,
    /// Not an option: where the journal was named when `--journal` did not name it (the
    /// settings file), for the ORIGIN of its row in the mount table.
    pub journal_origin: Option<String>,
    /// Not an option: the journal is opened without its sweep of the images no line names
    /// (`vfs undo --dry-run`, which changes nothing).
    pub journal_unswept: bool,
    /// Not an option: the journal's directory must exist already (`vfs undo`: a journal
    /// named by mistake is refused, not made empty and found to hold nothing to undo).
    pub journal_existing: bool,
    /// `--allow-write`: the default `/workspace` mount is `rw` instead of `ro`.
    pub allow_write: bool,
    /// `--call-timeout SECONDS`: the longest one tool call may run (default 30 s).
    pub call_timeout: Option<std::time::Duration>,
    /// `--no-read-before-edit`: edits and overwrites need no earlier read in the session.
    pub no_read_before_edit: bool,
    /// `--hide GLOB`, in order: names hidden from agents in every agent-facing mount.
    pub hide: Vec<String>,
    /// `--no-default-hide`: no default name rules (secrets hidden, `.git` read-only).
    pub no_default_hide: bool,
    /// The directory relative paths resolve against.
    pub current_dir: PathBuf,
}

impl LaunchOptions {
    /// True when no option was given at all (the embedded default launch).
    #[must_use]
    pub fn is_default(&self) -> bool {
        self.mounts.is_empty()
            && self.mount_ids.is_empty()
            && self.settings.is_none()
            && self.crews.is_empty()
            && self.llm_log.is_none()
            && self.journal.is_none()
            && !self.allow_write
    }
}

/// A composed launch: the frozen registry, and the crew if one was given.
#[derive(Debug, Clone)]
pub struct Launch {
    registry: MountRegistry,
    crew: Option<Crew>,
    exchange_log: bool,
    /// The folder under `/llm-logs` that this launch's sessions log into (a hosted crew's).
    log_folder: Option<String>,
    /// Whether a file must be read in a session before it is edited or overwritten.
    #[cfg_attr(not(feature = "mcp"), expect(dead_code, reason = "the MCP tools read it"))]
    read_before_edit: bool,
    /// The journal, with `--journal`.
    journal: Option<std::sync::Arc<crate::Journal>>,
}

impl Launch {
    /// The mount registry.
    #[must_use]
    pub fn registry(&self) -> &MountRegistry {
        &self.registry
    }

    /// The crew, when `--crew` was given.
    #[must_use]
    pub fn crew(&self) -> Option<&Crew> {
        self.crew.as_ref()
    }

    /// True when `--llm-log` was given (the registry has the internal root `/llm-logs`).
    #[must_use]
    pub fn has_exchange_log(&self) -> bool {
        self.exchange_log
    }

    /// The tools for one session: this launch's registry and read-before-edit rule, logging to
    /// `logger`.
    #[must_use]
    #[cfg(feature = "mcp")]
    pub fn tools(&self, logger: Option<crate::ExchangeLogger>) -> crate::ToolService {
        crate::ToolService::new(self.registry.clone(), logger)
            .read_before_edit(self.read_before_edit)
            .journal(self.journal.clone())
    }

    /// The journal, when `--journal` was given.
    #[must_use]
    pub fn journal(&self) -> Option<&crate::Journal> {
        self.journal.as_deref()
    }

    /// Opens a new exchange log file for one session (`None` without `--llm-log`).
    pub fn exchange_logger(&self) -> Result<Option<crate::ExchangeLogger>, HostError> {
        crate::ExchangeLogger::open_in(&self.registry, self.log_folder.as_deref())
    }

    /// The folder under the `--llm-log` directory that this launch logs into, if not the
    /// directory itself.
    #[must_use]
    pub fn log_folder(&self) -> Option<&str> {
        self.log_folder.as_deref()
    }
}

/// One candidate mount with its visibility and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) spec: MountSpec,
    pub(crate) visibility: Visibility,
    pub(crate) origin: String,
}

/// What the operator's options offer before any crew selects: `--mount`, `--mount-id` and the
/// settings file's entries.
#[derive(Clone)]
pub(crate) struct Sources {
    pub(crate) flags: Vec<Entry>,
    pub(crate) mount_ids: Vec<MountId>,
    pub(crate) settings: Vec<Entry>,
    /// The settings file's `journal` and `journal_max_bytes`, for when the flags are not given.
    pub(crate) journal: Option<PathBuf>,
    /// The settings file, as the mount table names it (`settings FILE`).
    pub(crate) settings_origin: Option<String>,
    pub(crate) journal_max_bytes: Option<u64>,
    /// The name rules for every agent-facing mount: the defaults (unless
    /// `--no-default-hide`), the settings file's `hide`, then `--hide`.
    pub(crate) rules: Vec<vfs::NameRule>,
}

impl Sources {
    /// `options` with the settings file's journal keys where the flags do not give them: the
    /// flags win, key by key. Every launch (a single one, and each endpoint of the daemon)
    /// finishes with these options, so a settings file's journal is never ignored.
    pub(crate) fn journal_over<'a>(&self, options: &'a LaunchOptions) -> Cow<'a, LaunchOptions> {
        let journal = options.journal.is_none() && self.journal.is_some();
        let bound = options.journal_max_bytes.is_none() && self.journal_max_bytes.is_some();
        if !journal && !bound {
            return Cow::Borrowed(options);
        }
        Cow::Owned(LaunchOptions {
            journal: options.journal.clone().or_else(|| self.journal.clone()),
            journal_origin: if journal {
                self.settings_origin.as_ref().map(|origin| format!("runner ({origin})"))
            } else {
                None
            },
            journal_max_bytes: options.journal_max_bytes.or(self.journal_max_bytes),
            ..options.clone()
        })
    }
}

/// Reads the `--mount`, `--mount-id` and settings options, recording every problem.
pub(crate) fn sources(options: &LaunchOptions, problems: &mut Vec<HostError>, authority: AmbientAuthority) -> Sources {
    let flags = flag_mounts(options, problems);
    let mount_ids = mount_ids(options, problems);
    let mut rules = if options.no_default_hide { Vec::new() } else { vfs::NameRule::defaults() };
    let (mut journal, mut journal_max_bytes, mut settings_origin) = (None, None, None);
    let settings = match &options.settings {
        Some(path) => match settings_entries(options, path, authority) {
            Ok(settings) => {
                let origin = format!("settings {}", path_text(path));
                rules.extend(settings.hide.iter().map(|glob| vfs::NameRule::hide(glob, &origin)));
                (journal, journal_max_bytes) = (settings.journal, settings.journal_max_bytes);
                settings_origin = Some(origin);
                settings.entries
            }
            Err(Problems(found)) => {
                problems.extend(found);
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    rules.extend(options.hide.iter().map(|glob| vfs::NameRule::hide(glob, "--hide")));
    Sources { flags, mount_ids, settings, journal, settings_origin, journal_max_bytes, rules }
}

/// The journal directory a settings file names (its `journal`, resolved against the file's
/// directory), for the commands that read a journal without a launch (`vfs journal list`).
/// `authority` opens the file.
pub fn settings_journal(
    settings: &Path,
    current_dir: &Path,
    authority: AmbientAuthority,
) -> Result<Option<PathBuf>, Problems> {
    let options = LaunchOptions { current_dir: current_dir.to_path_buf(), ..LaunchOptions::default() };
    settings_entries(&options, settings, authority).map(|settings| settings.journal)
}

/// Composes a launch, or returns every problem found (one line each). `authority` opens the
/// host paths the options name: the mounts' directories, the settings and crew files, the
/// exchange log's and the journal's directories.
pub fn compose(options: &LaunchOptions, authority: AmbientAuthority) -> Result<Launch, Problems> {
    if options.crews.len() > 1 {
        return Err(HostError::ManyCrews { count: options.crews.len() }.into());
    }
    compose_beside(options, options.crews.first().map(PathBuf::as_path), &[], authority)
}

/// Composes a launch with at most one crew, beside the hidden mounts `hidden` (the daemon's
/// hosted crews' directories, as internal roots: absent to agents, and no writable mount may
/// hold them).
pub(crate) fn compose_beside(
    options: &LaunchOptions,
    crew: Option<&Path>,
    hidden: &[Entry],
    authority: AmbientAuthority,
) -> Result<Launch, Problems> {
    let mut problems: Vec<HostError> = Vec::new();
    let sources = sources(options, &mut problems, authority);
    compose_from(options, sources, problems, crew, hidden, authority)
}

/// [`compose_beside`] from the sources read already (the daemon reads the settings file once
/// for all its endpoints, so that an edit meanwhile cannot give them different journals or
/// mounts), with the `problems` found reading them.
pub(crate) fn compose_from(
    options: &LaunchOptions,
    sources: Sources,
    mut problems: Vec<HostError>,
    crew: Option<&Path>,
    hidden: &[Entry],
    authority: AmbientAuthority,
) -> Result<Launch, Problems> {
    let merged = sources.journal_over(options);
    let options = &*merged;
    let Sources { flags: flag_mounts, mount_ids, settings, rules, .. } = sources;
    let crew_place = match crew.map(|path| crew_place(options, path, authority)).transpose() {
        Ok(place) => place,
        Err(error) => {
            problems.push(error);
            None
        }
    };
    let crew = match crew_place.as_ref().map(|place| read_crew(place, authority)).transpose() {
        Ok(crew) => crew,
        Err(Problems(found)) => {
            problems.extend(found);
            None
        }
    };
    if !problems.is_empty() {
        return Err(Problems(problems));
    }

    let mut selected = select(&flag_mounts, &mount_ids, &settings, crew.as_ref(), None, &mut problems);

    if !selected.iter().any(|entry| entry.visibility == Visibility::AgentFacing) {
        let rights = if options.allow_write { Rights::ReadWrite } else { Rights::ReadOnly };
        let root = MountRoot::new("/workspace").unwrap_or_else(|_| unreachable!("a valid root"));
        let origin = if options.allow_write {
            "default (current directory, --allow-write)"
        } else {
            "default (current directory)"
        };
        selected.push(Entry {
            spec: MountSpec::local(options.current_dir.clone(), root, rights),
            visibility: Visibility::AgentFacing,
            origin: origin.to_owned(),
        });
    }

    if let Some(crew) = &crew {
        problems.extend(unprovided(crew, &selected));
    }
    if !problems.is_empty() {
        return Err(Problems(problems));
    }

    if let Some(place) = &crew_place {
        selected.push(Entry {
            spec: MountSpec::local(place.directory.clone(), runner_root("/crew"), Rights::ReadOnly),
            visibility: Visibility::AgentFacing,
            origin: "runner (--crew)".to_owned(),
        });
    }
    selected.extend(hidden.iter().cloned());
    let launch = finish(options, selected, &rules, crew, None, authority)?;
    if let Some(place) = &crew_place {
        crew_out_of_reach(&launch, place)?;
    }
    settings_out_of_reach(&launch, options, authority)?;
    Ok(launch)
}

/// Refuses a launch in which agents could rewrite its settings file, and so the mounts of
/// its next start (an agent that writes `{"mounts": ["/:/host:rw"]}` there has the host at the
/// next start): the file, links followed, in a part of an agent-facing mount they may write.
pub(crate) fn settings_out_of_reach(
    launch: &Launch,
    options: &LaunchOptions,
    authority: AmbientAuthority,
) -> Result<(), HostError> {
    let Some(file) = &options.settings else { return Ok(()) };
    // Read a moment ago: one that no longer resolves is one agents cannot write either.
    let Ok(canonical) = vfs::host_path::canonical(&absolute(&options.current_dir, file), authority) else {
        return Ok(());
    };
    match launch.registry().reaches_file(&canonical, vfs::Access::Write) {
        Some(found) => Err(HostError::SettingsWritable {
            file: path_text(file),
            root: found.root,
            physical: found.physical,
            at: found.path,
            rights: found.rights,
        }),
        None => Ok(()),
    }
}

/// Refuses a launch in which the crew's agents could rewrite the crew's definition, and so
/// its `mounts:` block, for the next start: its directory in a writable part of another
/// agent-facing mount (that directory itself, or one holding it), or its file, links
/// followed, in one. Compared on canonical physical paths (`MountRegistry::writable_elsewhere`).
///
/// A writable mount holding the crew directory is refused although, in this launch, the
/// directory nested in it keeps its own read-only rights: a crew path that runs through the
/// writable mount (a link in it) can be replaced by a directory an agent writes, and the next
/// start would read that one.
pub(crate) fn crew_out_of_reach(launch: &Launch, place: &CrewPlace) -> Result<(), HostError> {
    let file = format!("/crew/{}", place.file);
    for (path, what) in [("/crew", "directory"), (file.as_str(), "file")] {
        // The definition was read a moment ago: a place that no longer resolves is one agents
        // cannot read either, and the launch's other checks stand.
        let Ok(Some(found)) = launch.registry().writable_elsewhere(path) else { continue };
        let at = if what == "directory" { format!("{}/{}", found.path, place.file) } else { found.path };
        return Err(HostError::CrewWritable {
            crew: place.file_shown(),
            root: found.root,
            physical: found.physical,
            at,
            rights: found.rights,
            what,
        });
    }
    Ok(())
}

/// The roots `crew` needs that no agent-facing entry of `selected` provides.
pub(crate) fn unprovided(crew: &Crew, selected: &[Entry]) -> Vec<HostError> {
    crew.mounts()
        .iter()
        .filter(|needed| {
            !selected
                .iter()
                .any(|entry| entry.visibility == Visibility::AgentFacing && entry.spec.root() == &needed.root)
        })
        .map(|needed| HostError::UnprovidedRoot { root: needed.root.to_string() })
        .collect()
}

/// Adds the exchange log (creating `log_folder` inside it) and builds the frozen registry. A
/// launch refused here removes the directories it made for the log and the journal (a log
/// or journal named inside an agent's writable mount is refused only once it exists, and
/// was left there, in the agent's tree).
pub(crate) fn finish(
    options: &LaunchOptions,
    selected: Vec<Entry>,
    rules: &[vfs::NameRule],
    crew: Option<Crew>,
    log_folder: Option<String>,
    authority: AmbientAuthority,
) -> Result<Launch, Problems> {
    let mut made = Vec::new();
    let launch = finish_making(options, selected, rules, crew, log_folder, authority, &mut made);
    if launch.is_err() {
        vfs::host_path::remove_made_directories(&made, authority);
    }
    launch
}

/// [`finish`], noting in `made` each directory it makes.
fn finish_making(
    options: &LaunchOptions,
    mut selected: Vec<Entry>,
    rules: &[vfs::NameRule],
    crew: Option<Crew>,
    log_folder: Option<String>,
    authority: AmbientAuthority,
    made: &mut Vec<PathBuf>,
) -> Result<Launch, Problems> {
    if let Some(directory) = &options.llm_log {
        let directory = absolute(&options.current_dir, directory);
        match &log_folder {
            Some(folder) => made.extend(ensure_directory(&directory.join(folder), "exchange log", authority)?),
            None => made.extend(ensure_directory(&directory, "exchange log", authority)?),
        }
        selected.push(Entry {
            spec: MountSpec::local(directory.clone(), runner_root(LOG_ROOT), Rights::ReadWrite),
            visibility: Visibility::Internal,
            origin: "runner (--llm-log)".to_owned(),
        });
    }

    let journal = match &options.journal {
        Some(directory) => {
            let bound = options.journal_max_bytes.unwrap_or(crate::journal::DEFAULT_MAX_BYTES);
            crate::journal::check_journal_bound(bound)
                .map_err(|why| HostError::JournalBound { given: crate::journal::byte_words(bound), why })?;
            let directory = absolute(&options.current_dir, directory);
            if options.journal_existing
                && matches!(vfs::host_path::probe(&directory, authority), Err(vfs::host_path::HostPathError::Missing))
            {
                return Err(HostError::Journal {
                    path: directory.display().to_string(),
                    reason: "the directory does not exist".to_owned(),
                    hint: "name the directory the changes were journaled in, as they were made with --journal DIR",
                }
                .into());
            }
            made.extend(ensure_directory(&directory, "journal", authority)?);
            selected.push(Entry {
                spec: MountSpec::local(directory.clone(), runner_root(crate::journal::JOURNAL_ROOT), Rights::ReadWrite),
                visibility: Visibility::Internal,
                origin: options.journal_origin.clone().unwrap_or_else(|| "runner (--journal)".to_owned()),
            });
            Some(std::sync::Arc::new(crate::Journal::new(bound).for_tenant(log_folder.clone())))
        }
        None => None,
    };

    let mut builder = MountRegistry::builder();
    builder.pool(search_workers());
    if let Some(journal) = &journal {
        builder.observe(journal.clone());
    }
    if options.defer_syncs {
        builder.defer_agent_syncs();
    }
    if options.operator_deletes {
        builder.deletes_with_writes();
    }
    if options.defer_name_rules {
        builder.defer_name_rules();
    }
    let mut limits = vfs::Limits::default();
    if let Some(timeout) = options.call_timeout {
        limits.call_time = timeout;
    }
    builder.limits(limits);
    builder.name_rules(rules.iter().cloned());
    for entry in &selected {
        builder.mount_from(entry.spec.clone(), entry.visibility, entry.origin.clone());
    }
    let registry = builder.build(authority).map_err(HostError::from)?;
    if let Some(journal) = &journal {
        attach_journal(journal, &registry, options)?;
    }
    Ok(Launch {
        registry,
        crew,
        exchange_log: options.llm_log.is_some(),
        log_folder,
        read_before_edit: !options.no_read_before_edit,
        journal,
    })
}

/// Attaches the journal to the registry it observes. A process that changes things is refused
/// when the journal's log cannot be opened to be written: no change could be recorded, and
/// every one would be refused.
fn attach_journal(journal: &crate::Journal, registry: &MountRegistry, options: &LaunchOptions) -> Result<(), Problems> {
    if options.journal_unswept {
        journal.attach_unswept(registry);
        return Ok(());
    }
    journal.attach(registry);
    match (journal.unwritable_log(), &options.journal) {
        (Some(reason), Some(directory)) => Err(HostError::Journal {
            path: absolute(&options.current_dir, directory).display().to_string(),
            reason: format!("its log `journal.jsonl` cannot be opened to be written: {reason}"),
            hint: "the log must be a regular file, or absent: move away what is there, or give --journal another directory",
        }
        .into()),
        _ => Ok(()),
    }
}

pub(crate) fn runner_root(root: &str) -> MountRoot {
    MountRoot::new(root).unwrap_or_else(|_| unreachable!("runner roots are valid roots"))
}

/// `--mount` strings: parsed, resolved against the current directory, checked for reserved
/// roots.
fn flag_mounts(options: &LaunchOptions, problems: &mut Vec<HostError>) -> Vec<Entry> {
    let mut entries = Vec::new();
    for text in &options.mounts {
        match text.parse::<MountSpec>() {
            Ok(spec) => {
                if let Some(error) = reserved(&spec, text) {
                    problems.push(error);
                    continue;
                }
                let spec = resolve(spec, &options.current_dir);
                entries.push(Entry { spec, visibility: Visibility::AgentFacing, origin: "--mount".to_owned() });
            }
            Err(source) => problems.push(HostError::Spec { source, origin: String::new() }),
        }
    }
    entries
}

fn mount_ids(options: &LaunchOptions, problems: &mut Vec<HostError>) -> Vec<MountId> {
    let mut ids = Vec::new();
    for text in &options.mount_ids {
        match MountId::new(text) {
            Ok(id) => ids.push(id),
            Err(reason) => problems.push(HostError::MountId { value: text.clone(), reason }),
        }
    }
    ids
}

/// Refuses a user mount whose root is, or lies under, a root the runner reserves.
fn reserved(spec: &MountSpec, text: &str) -> Option<HostError> {
    reserved_root(spec.root()).map(|root| HostError::ReservedRoot {
        spec: text.to_owned(),
        suggestion: format!("{root}-files"),
        root,
    })
}

/// The reserved root (one of [`RESERVED_ROOTS`], `/crews-2` for `/crews-N`) that `root` is or
/// lies under.
pub(crate) fn reserved_root(root: &MountRoot) -> Option<String> {
    let first = root.components().next().unwrap_or_default();
    let is_reserved = matches!(first, "crew" | "crews" | "script" | "llm-logs" | "llm-journal")
        || first
            .strip_prefix("crews-")
            .is_some_and(|number| !number.is_empty() && number.bytes().all(|byte| byte.is_ascii_digit()));
    is_reserved.then(|| format!("/{first}"))
}

/// What the runner serves at a reserved root, for the refusal of a crew that names it.
pub(crate) fn reserved_purpose(root: &str) -> &'static str {
    match root {
        "/crew" => "where the runner serves the crew's own directory, read-only",
        "/llm-logs" => "the internal exchange log (`--llm-log`), which agents never see",
        "/llm-journal" => "the internal journal (`--journal`), which agents never see",
        "/script" => "kept for the runner's own use",
        // `/crews` and `/crews-<N>`.
        _ => "where the daemon mounts the hosted crews' directories, each hidden from the other crews",
    }
}

/// Makes a relative local directory absolute against `base` (lexically; the registry opens it).
/// An object store's location is not a path: nothing to resolve.
fn resolve(spec: MountSpec, base: &Path) -> MountSpec {
    match spec.location() {
        Some(Location::Local(directory)) if !directory.is_absolute() => {
            let joined = absolute(base, directory);
            spec.with_directory(joined)
        }
        _ => spec,
    }
}

pub(crate) fn absolute(base: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() { path.to_path_buf() } else { base.join(path) };
    // Drop `.` components so that the operator's table reads cleanly; `..` stays for the OS.
    joined.components().filter(|component| !matches!(component, std::path::Component::CurDir)).collect()
}

pub(crate) fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The most the launch reads of an operator's file (settings, crew, tokens): the read cap.
pub(crate) fn read_limit() -> u64 {
    vfs::Limits::default().read_bytes
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsFile {
    #[serde(default)]
    mounts: Vec<String>,
    #[serde(default)]
    internal_mounts: Vec<String>,
    #[serde(default)]
    hide: Vec<String>,
    /// `--journal`'s directory (relative to the settings file's), when the flag is not given.
    #[serde(default)]
    journal: Option<String>,
    /// `--journal-max-bytes`, when the flag is not given: a number of bytes, or a string with
    /// the flag's suffixes (`"512M"`).
    #[serde(default)]
    journal_max_bytes: Option<ByteCount>,
}

/// A byte count in a settings file: `1073741824` or `"1G"`.
#[derive(Debug)]
enum ByteCount {
    Number(u64),
    Text(String),
}

impl<'de> serde::Deserialize<'de> for ByteCount {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Count;
        impl serde::de::Visitor<'_> for Count {
            type Value = ByteCount;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(r#"a byte count, like 1073741824 or "1G""#)
            }
            fn visit_u64<E: serde::de::Error>(self, bytes: u64) -> Result<ByteCount, E> {
                Ok(ByteCount::Number(bytes))
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<ByteCount, E> {
                Ok(ByteCount::Text(text.to_owned()))
            }
        }
        // Anything else (a negative or fractional number, a list) is refused by the visitor's
        // own words, `expected a byte count, like …`, rather than serde's untagged enum.
        deserializer.deserialize_any(Count)
    }
}

/// What a settings file says: its mounts, its `hide` globs and its journal.
struct Settings {
    entries: Vec<Entry>,
    hide: Vec<String>,
    journal: Option<PathBuf>,
    journal_max_bytes: Option<u64>,
}

/// A settings file's mount entries, its `hide` globs and its journal keys.
fn settings_entries(options: &LaunchOptions, path: &Path, authority: AmbientAuthority) -> Result<Settings, Problems> {
    let shown = path_text(path);
    let file = absolute(&options.current_dir, path);
    let text = host_path::read_text_file(&file, read_limit(), authority)
        .map_err(|reason| HostError::SettingsRead { path: shown.clone(), reason })?;
    // A byte order mark (editors on Windows write one) is no JSON, and no part of the settings.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    // Anything but an object (`[1]`, `"x"`) is said so, not as the first field serde met.
    if !text.trim_start().starts_with('{') {
        return Err(HostError::SettingsParse {
            path: shown,
            reason: "the settings file must hold one JSON object, like {\"mounts\": [\"./src:/src:ro\"]}".to_owned(),
        }
        .into());
    }
    let settings: SettingsFile = serde_json::from_str(text)
        .map_err(|error| HostError::SettingsParse { path: shown.clone(), reason: error.to_string() })?;
    let base = file.parent().map_or_else(|| options.current_dir.clone(), Path::to_path_buf);
    let mut problems = Vec::new();
    let mut entries = Vec::new();
    let lists = [(settings.mounts, Visibility::AgentFacing), (settings.internal_mounts, Visibility::Internal)];
    for (list, visibility) in lists {
        for text in list {
            match text.parse::<MountSpec>() {
                Ok(spec) => {
                    if let Some(error) = reserved(&spec, &text) {
                        problems.push(error);
                        continue;
                    }
                    let spec = resolve(spec, &base);
                    entries.push(Entry { spec, visibility, origin: format!("settings {shown}") });
                }
                Err(source) => {
                    problems.push(HostError::Spec { source, origin: format!(" (in settings file `{shown}`)") });
                }
            }
        }
    }
    let mut seen: HashMap<&MountId, usize> = HashMap::new();
    for entry in &entries {
        if let Some(id) = entry.spec.id() {
            let count = seen.entry(id).or_default();
            *count += 1;
            if *count == 2 {
                problems.push(HostError::DuplicateId { id: id.to_string() });
            }
        }
    }
    let journal_max_bytes = match settings.journal_max_bytes {
        None => None,
        Some(ByteCount::Number(bytes)) => Some(crate::journal::byte_words(bytes)),
        Some(ByteCount::Text(text)) => Some(text),
    }
    .and_then(|text| match crate::journal::parse_journal_bound(&text) {
        Ok(bytes) => Some(bytes),
        Err(why) => {
            problems
                .push(HostError::SettingsParse { path: shown.clone(), reason: format!("journal_max_bytes: {why}") });
            None
        }
    });
    // An empty path would name the settings file's own directory: refused, as `--journal ''` is.
    if settings.journal.as_deref() == Some("") {
        problems.push(HostError::SettingsParse {
            path: shown.clone(),
            reason: "journal: the path is empty; name the journal's directory, like \"journal\": \"./journal\""
                .to_owned(),
        });
    }
    let journal = settings
        .journal
        .filter(|directory| !directory.is_empty())
        .map(|directory| absolute(&base, Path::new(&directory)));
    if problems.is_empty() {
        Ok(Settings { entries, hide: settings.hide, journal, journal_max_bytes })
    } else {
        Err(Problems(problems))
    }
}

/// Where the crew lives: the directory mounted at `/crew` and the definition's file name.
#[derive(Debug)]
pub(crate) struct CrewPlace {
    /// The path as the operator gave it.
    pub(crate) shown: String,
    /// The directory agents see at `/crew`.
    pub(crate) directory: PathBuf,
    /// The definition's file name in it.
    pub(crate) file: String,
    /// True when the operator gave the directory (the definition is `crew.yaml`).
    pub(crate) given_directory: bool,
}

impl CrewPlace {
    /// The definition's file as the operator would spell it: the path given, or for a
    /// directory, `crew.yaml` in it.
    pub(crate) fn file_shown(&self) -> String {
        if self.given_directory { path_text(&Path::new(&self.shown).join(&self.file)) } else { self.shown.clone() }
    }
}

/// Where the crew `path` lives: a directory holding `crew.yaml`, or a file and its directory.
pub(crate) fn crew_place(
    options: &LaunchOptions,
    path: &Path,
    authority: AmbientAuthority,
) -> Result<CrewPlace, HostError> {
    let shown = path_text(path);
    let full = absolute(&options.current_dir, path);
    match host_path::probe(&full, authority) {
        Ok(HostKind::Directory) => {
            Ok(CrewPlace { shown, directory: full, file: "crew.yaml".to_owned(), given_directory: true })
        }
        Ok(HostKind::Other) => {
            let (Some(directory), Some(name)) = (full.parent(), full.file_name()) else {
                return Err(HostError::CrewRead { path: shown, reason: HostPathError::NotAFile });
            };
            Ok(CrewPlace {
                shown,
                directory: directory.to_path_buf(),
                file: name.to_string_lossy().into_owned(),
                given_directory: false,
            })
        }
        Err(reason) => Err(HostError::CrewRead { path: shown, reason }),
    }
}

/// Reads the crew definition beneath its directory, exactly as its agents will see it at
/// `/crew/<file>`: a link in the directory is followed only while it stays inside.
pub(crate) fn read_crew(place: &CrewPlace, authority: AmbientAuthority) -> Result<Crew, Problems> {
    let at = format!("/crew/{}", place.file);
    let limit = read_limit();
    let text =
        host_path::read_text_file_beneath(&place.directory, &place.file, limit, authority).map_err(|reason| {
            let path = place.shown.clone();
            match reason {
                HostPathError::NoFile => HostError::CrewFileMissing { path, at: at.clone() },
                HostPathError::TooLarge { limit } => HostError::CrewTooLarge { path, limit },
                reason => HostError::CrewRead { path, reason },
            }
        })?;
    Crew::parse(&place.file_shown(), &at, &text)
}

/// Applies the selection rules (module docs) to the settings entries; with `only`, to the
/// roots it lists (a hosted crew's `mounts:` block) and no other.
pub(crate) fn select(
    flags: &[Entry],
    mount_ids: &[MountId],
    settings: &[Entry],
    crew: Option<&Crew>,
    only: Option<&[&MountRoot]>,
    problems: &mut Vec<HostError>,
) -> Vec<Entry> {
    let by_id: HashMap<&MountId, &Entry> =
        settings.iter().filter_map(|entry| entry.spec.id().map(|id| (id, entry))).collect();
    let flag_roots: Vec<&MountRoot> = flags.iter().map(|entry| entry.spec.root()).collect();
    let chosen = chosen_by_flags(mount_ids, &by_id, &flag_roots, problems);
    let crew_chosen = crew.map(|crew| chosen_by_crew(crew, &by_id, problems)).unwrap_or_default();
    let wanted = |root: &MountRoot| only.is_none_or(|roots| roots.contains(&root));
    let mut selected: Vec<Entry> = flags.iter().filter(|entry| wanted(entry.spec.root())).cloned().collect();
    for (root, group) in group_by_root(settings) {
        if flag_roots.contains(&root) || !wanted(root) {
            continue; // Rule 1, or a root the crew does not ask for.
        }
        let pick = chosen.get(root).or_else(|| crew_chosen.get(root)).and_then(|id| by_id.get(id).copied());
        let entry = match (pick, group.as_slice()) {
            (Some(entry), _) => entry,
            (None, [entry]) => *entry,
            (None, _) => {
                problems.push(ambiguous(root, &group));
                continue;
            }
        };
        let mut entry = entry.clone();
        if let Some(id) = chosen.get(root) {
            entry.origin = format!("{} (--mount-id {id})", entry.origin);
        } else if let Some(id) = crew_chosen.get(root) {
            entry.origin = format!("{} (crew id {id})", entry.origin);
        }
        selected.push(entry);
    }
    selected
}

/// Rule 2: the settings entries `--mount-id` selects, by root.
fn chosen_by_flags<'a>(
    mount_ids: &'a [MountId],
    by_id: &HashMap<&MountId, &'a Entry>,
    flag_roots: &[&MountRoot],
    problems: &mut Vec<HostError>,
) -> BTreeMap<&'a MountRoot, &'a MountId> {
    let mut chosen: BTreeMap<&MountRoot, &MountId> = BTreeMap::new();
    for id in mount_ids {
        let Some(entry) = by_id.get(id) else {
            problems.push(HostError::UnknownId {
                source_name: "--mount-id",
                id: id.to_string(),
                fix: "check the id against the settings file's `<ulid>|` prefixes",
            });
            continue;
        };
        let root = entry.spec.root();
        if flag_roots.contains(&root) {
            problems.push(HostError::ConflictingSelection {
                message: format!(
                    "--mount-id `{id}` selects an entry for `{root}`, but a --mount replaces `{root}`: drop one of the two"
                ),
            });
        } else if let Some(first) = chosen.insert(root, id) {
            problems.push(HostError::ConflictingSelection {
                message: format!(
                    "--mount-id `{first}` and --mount-id `{id}` both select `{root}`: pass one id per root"
                ),
            });
        }
    }
    chosen
}

/// Rule 3: the settings entries the crew's `<ulid>|/root` entries select, by root.
fn chosen_by_crew<'a>(
    crew: &'a Crew,
    by_id: &HashMap<&MountId, &Entry>,
    problems: &mut Vec<HostError>,
) -> BTreeMap<&'a MountRoot, &'a MountId> {
    let mut chosen: BTreeMap<&MountRoot, &MountId> = BTreeMap::new();
    for needed in crew.mounts() {
        let Some(id) = &needed.id else { continue };
        match by_id.get(id) {
            None => problems.push(HostError::UnknownId {
                source_name: "the crew",
                id: id.to_string(),
                fix: "add an entry with this id to the settings file, or drop the id from the crew's `mounts:` block",
            }),
            Some(entry) if entry.spec.root() != &needed.root => problems.push(HostError::IdForOtherRoot {
                id: id.to_string(),
                crew_root: needed.root.to_string(),
                entry_root: entry.spec.root().to_string(),
            }),
            Some(_) => {
                chosen.insert(&needed.root, id);
            }
        }
    }
    chosen
}

/// The settings entries grouped by root, in order of first appearance.
fn group_by_root(settings: &[Entry]) -> Vec<(&MountRoot, Vec<&Entry>)> {
    let mut groups: Vec<(&MountRoot, Vec<&Entry>)> = Vec::new();
    for entry in settings {
        match groups.iter_mut().find(|(root, _)| *root == entry.spec.root()) {
            Some((_, group)) => group.push(entry),
            None => groups.push((entry.spec.root(), vec![entry])),
        }
    }
    groups
}

/// Rule 5: a root declared several times with nothing selecting one.
/// The fix names the ids the entries carry; entries without one can be told apart only by a
/// `--mount`, or by ids given to them (`<ulid>|` before the entry).
fn ambiguous(root: &MountRoot, group: &[&Entry]) -> HostError {
    let ids: Vec<String> = group.iter().filter_map(|entry| entry.spec.id()).map(|id| format!("`{id}`")).collect();
    let choice = if ids.is_empty() {
        format!(
            "pass `--mount` for `{root}`, or give the entries ids (`<ULID>|` before each) and pass `--mount-id <ULID>`"
        )
    } else {
        format!("pass `--mount-id <ULID>` with one of {}, or `--mount` for `{root}`", ids.join(", "))
    };
    HostError::AmbiguousRoot { root: root.to_string(), count: group.len(), choice }
}

/// Creates `directory` and its missing parents, with the operator's authority; `purpose`
/// names it in a refusal (`exchange log`, `journal`). Returns the directories it made.
pub(crate) fn ensure_directory(
    directory: &Path,
    purpose: &'static str,
    authority: AmbientAuthority,
) -> Result<Vec<PathBuf>, HostError> {
    host_path::create_directories(directory, authority).map_err(|reason| HostError::LogDir {
        path: path_text(directory),
        purpose,
        reason,
    })
}

/// The core's worker pool for content searches, one for the process: every registry a launch
/// builds (one per endpoint of the daemon) searches on the same threads, one per core.
pub(crate) fn search_workers() -> vfs::WorkerPool {
    static WORKERS: std::sync::OnceLock<vfs::WorkerPool> = std::sync::OnceLock::new();
    WORKERS.get_or_init(vfs::WorkerPool::with_available_parallelism).clone()
}

#[cfg(test)]
#[expect(clippy::disallowed_methods, reason = "fixture: tests build fixtures on disk")]
mod tests {
    use super::*;

    const ID_A: &str = "01J9Z3K4M5N6P7Q8R9S0T1V2W3";
    const ID_B: &str = "01J9Z3K4M5N6P7Q8R9S0T1V2W4";

    macro_rules! reserved {
        ($name:ident, $spec:expr, $expected:expr) => {
            #[test]
            fn $name() {
                let spec: MountSpec = $spec.parse().unwrap();
                let found = reserved(&spec, $spec).map(|error| match error {
                    HostError::ReservedRoot { root, .. } => root,
                    other => panic!("{other}"),
                });
                assert_eq!(found.as_deref(), $expected);
            }
        };
    }

    reserved!(crew_is_reserved, "./a:/crew", Some("/crew"));
    reserved!(under_crew_is_reserved, "./a:/crew/inner", Some("/crew"));
    reserved!(crews_is_reserved, "./a:/crews", Some("/crews"));
    reserved!(numbered_crews_are_reserved, "./a:/crews-12", Some("/crews-12"));
    reserved!(script_is_reserved, "./a:/script", Some("/script"));
    reserved!(llm_logs_is_reserved, "./a:/llm-logs", Some("/llm-logs"));
    reserved!(crews_dash_word_is_free, "./a:/crews-x", None);
    reserved!(crews_dash_alone_is_free, "./a:/crews-", None);
    reserved!(crew2_is_free, "./a:/crew2", None);
    reserved!(nested_elsewhere_is_free, "./a:/src/crew", None);

    struct Setup {
        dir: tempfile::TempDir,
    }

    impl Setup {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            for name in ["one", "two", "three"] {
                std::fs::create_dir(dir.path().join(name)).unwrap();
            }
            Self { dir }
        }

        fn options(&self) -> LaunchOptions {
            LaunchOptions { current_dir: self.dir.path().to_path_buf(), ..LaunchOptions::default() }
        }

        fn settings(&self, json: &str) -> PathBuf {
            std::fs::write(self.dir.path().join("vfs.json"), json).unwrap();
            PathBuf::from("vfs.json")
        }

        fn crew(&self, yaml: &str) -> PathBuf {
            std::fs::write(self.dir.path().join("crew.yaml"), yaml).unwrap();
            PathBuf::from("crew.yaml")
        }
    }

    fn physical_of(launch: &Launch, root: &str) -> String {
        let view = launch.registry().operator_view();
        let mount = view.iter().find(|view| view.root == root).unwrap();
        Path::new(&mount.physical).file_name().unwrap().to_string_lossy().into_owned()
    }

    #[test]
    fn selection_follows_the_documented_order() {
        let setup = Setup::new();
        let two_entries = format!(r#"{{"mounts": ["{ID_A}|one:/src", "{ID_B}|two:/src"]}}"#);
        let mut options = setup.options();
        options.settings = Some(setup.settings(&two_entries));

        // Rule 5: nothing selects.
        let problems = compose(&options, vfs::ambient_authority()).unwrap_err();
        assert!(matches!(problems.0.as_slice(), [HostError::AmbiguousRoot { count: 2, .. }]));

        // Rule 3: the crew's id.
        options.crews = vec![setup.crew(&format!("mounts: ['{ID_B}|/src']\n"))];
        assert_eq!(physical_of(&compose(&options, vfs::ambient_authority()).unwrap(), "/src"), "two");

        // Rule 2: `--mount-id` before the crew.
        options.mount_ids = vec![ID_A.to_owned()];
        assert_eq!(physical_of(&compose(&options, vfs::ambient_authority()).unwrap(), "/src"), "one");

        // Rule 1: `--mount` replaces the settings entries (and conflicts with `--mount-id`).
        options.mounts = vec!["three:/src".to_owned()];
        let problems = compose(&options, vfs::ambient_authority()).unwrap_err();
        assert!(matches!(problems.0.as_slice(), [HostError::ConflictingSelection { .. }]));
        options.mount_ids.clear();
        assert_eq!(physical_of(&compose(&options, vfs::ambient_authority()).unwrap(), "/src"), "three");
    }

    #[test]
    fn a_root_declared_once_is_used_and_the_default_workspace_is_dropped() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.settings = Some(setup.settings(r#"{"mounts": ["one:/src:rw"], "internal_mounts": ["two:/secret"]}"#));
        let launch = compose(&options, vfs::ambient_authority()).unwrap();
        let roots: Vec<String> = launch.registry().operator_view().into_iter().map(|view| view.root).collect();
        assert_eq!(roots, ["/src", "/secret"]);
        assert_eq!(launch.registry().internal_roots(), ["/secret"]);
    }

    #[test]
    fn every_launch_searches_on_the_one_worker_pool_of_the_process() {
        let setup = Setup::new();
        let first = compose(&setup.options(), vfs::ambient_authority()).unwrap();
        let second = compose(&setup.options(), vfs::ambient_authority()).unwrap();
        assert_eq!(first.registry().pool(), second.registry().pool());
    }

    #[test]
    fn only_internal_mounts_still_get_the_default_workspace() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.settings = Some(setup.settings(r#"{"internal_mounts": ["two:/secret"]}"#));
        let launch = compose(&options, vfs::ambient_authority()).unwrap();
        let mounts = launch.registry().agent_mounts();
        assert_eq!(mounts.len(), 1);
        assert_eq!((mounts[0].root.as_str(), mounts[0].rights.as_str()), ("/workspace", "ro"));
        // Writable, the default workspace would hold the internal directory where an agent
        // could create its name: refused, with the fix.
        options.allow_write = true;
        let problems = compose(&options, vfs::ambient_authority()).unwrap_err();
        assert_eq!(problems.0.len(), 1);
        assert!(matches!(&problems.0[0], HostError::Registry(vfs::ConfigError::InternalInsideWritable { .. })));
    }

    /// A journal or a log named inside an agent's writable mount is refused once its
    /// directory exists: the refused launch removes the directories it made, and leaves one
    /// that was there, and one anyone filled since, as they are.
    #[test]
    fn a_refused_launch_leaves_no_directory_of_its_own_in_the_agents_tree() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.mounts = vec!["one:/w:rw".to_owned()];
        options.journal = Some(PathBuf::from("one/j/deeper"));
        options.llm_log = Some(PathBuf::from("one/logs"));
        let problems = compose(&options, vfs::ambient_authority()).unwrap_err();
        assert!(matches!(&problems.0[0], HostError::Registry(vfs::ConfigError::InternalInsideWritable { .. })));
        let left: Vec<_> = std::fs::read_dir(setup.dir.path().join("one")).unwrap().collect();
        assert_eq!(left.len(), 0, "{left:?}");
        std::fs::create_dir(setup.dir.path().join("one/logs")).unwrap();
        compose(&options, vfs::ambient_authority()).unwrap_err();
        assert!(setup.dir.path().join("one/logs").is_dir(), "there before: left");
        assert!(!setup.dir.path().join("one/j").exists());
    }

    #[test]
    fn a_crew_root_served_only_internally_is_not_provided() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.settings = Some(setup.settings(r#"{"internal_mounts": ["two:/secret"]}"#));
        options.crews = vec![setup.crew("mounts: [/secret]\n")];
        let problems = compose(&options, vfs::ambient_authority()).unwrap_err();
        assert!(matches!(problems.0.as_slice(), [HostError::UnprovidedRoot { root }] if root == "/secret"));
    }

    #[test]
    fn the_crew_is_read_through_the_vfs_and_mounted_at_crew() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.crews = vec![setup.crew("name: x\nmounts: [/workspace]\n")];
        let launch = compose(&options, vfs::ambient_authority()).unwrap();
        let crew = launch.crew().unwrap();
        assert_eq!(crew.path(), "/crew/crew.yaml");
        assert_eq!(crew.mounts()[0].root.as_str(), "/workspace");
        let read = launch.registry().agent().read_text("/crew/crew.yaml", &vfs::ReadWindow::default()).unwrap();
        assert!(read.content.starts_with("name: x"));
    }

    /// A settings file agents could rewrite (and so widen the mounts of the next start) is
    /// refused, naming the mount, the place and the fix (red team: an agent wrote
    /// `{"mounts": ["/:/host:rw"]}` into it and had the host at the next start); read-only
    /// places, and a file out of every mount, are not.
    #[test]
    fn a_settings_file_its_agents_could_write_is_refused() {
        let setup = Setup::new();
        let root = setup.dir.path().display().to_string();
        let check = |settings: &str, mounts: &[&str], allow_write: bool| -> String {
            let mut options = setup.options();
            options.settings = Some(setup.settings(settings));
            options.mounts = mounts.iter().map(|&mount| mount.to_owned()).collect();
            options.allow_write = allow_write;
            match compose(&options, vfs::ambient_authority()) {
                Ok(_) => "OK".to_owned(),
                Err(problems) => problems.to_string().replace(&root, "[TMP]"),
            }
        };
        let refusal = |root: &str, physical: &str, at: &str, rights: &str| {
            format!(
                "the settings file `vfs.json` lies inside `{root}` (`{physical}`) at `{at}`, which is mounted {rights}; an agent could rewrite the mounts of the next start: mount `{root}` read-only there, or move the settings file out of it"
            )
        };
        assert_eq!(check(r#"{"mounts": ["one:/src:rw"]}"#, &[], false), "OK");
        assert_eq!(
            check(r#"{"mounts": ["./:/work:rw"]}"#, &[], false),
            refusal("/work", "[TMP]", "/work/vfs.json", "rw")
        );
        assert_eq!(check("{}", &["./:/work:rwnd"], false), refusal("/work", "[TMP]", "/work/vfs.json", "rwnd"));
        assert_eq!(check("{}", &["./:/work:rw;vfs.json:ro"], false), "OK");
        assert_eq!(check("{}", &["./:/work:ro"], false), "OK");
        // The default workspace (the current directory), made writable.
        assert_eq!(check("{}", &[], true), refusal("/workspace", "[TMP]", "/workspace/vfs.json", "rw"));
        assert_eq!(check("{}", &[], false), "OK");
    }

    /// Every way a writable mount reaches the crew's definition is refused, naming the
    /// mount, the place and the fix; read-only parts, and writable mounts that cannot reach
    /// the file, are not.
    #[test]
    fn a_crew_definition_its_agents_could_write_is_refused() {
        let setup = Setup::new();
        let root = setup.dir.path();
        std::fs::create_dir_all(root.join("crews/a/out")).unwrap();
        std::fs::write(root.join("crews/a/crew.yaml"), "name: a\n").unwrap();
        std::fs::create_dir_all(root.join("crews/b/out")).unwrap();
        std::fs::write(root.join("crews/b/out/real.yaml"), "name: b\n").unwrap();
        std::os::unix::fs::symlink("out/real.yaml", root.join("crews/b/crew.yaml")).unwrap();
        std::fs::write(root.join("team.yaml"), "name: team\n").unwrap();
        let check = |mounts: &[&str], crew: &str, allow_write: bool| -> String {
            let mut options = setup.options();
            options.mounts = mounts.iter().map(|&mount| mount.to_owned()).collect();
            options.crews = vec![PathBuf::from(crew)];
            options.allow_write = allow_write;
            match compose(&options, vfs::ambient_authority()) {
                Ok(_) => "OK".to_owned(),
                Err(problems) => problems.to_string().replace(&root.display().to_string(), "[TMP]"),
            }
        };
        let refusal = |file: &str, root: &str, physical: &str, at: &str, rights: &str, what: &str| {
            format!(
                "the crew file `{file}` lies inside `{root}` (`[TMP]{physical}`) at `{at}`, which is mounted {rights}; a crew could rewrite its own `mounts:` block for its next start: mount `{root}` read-only, or move the crew {what} out of it"
            )
        };
        // The crew's directory served writable at another root.
        assert_eq!(
            check(&["crews/a:/work:rw"], "crews/a", false),
            refusal("crews/a/crew.yaml", "/work", "/crews/a", "/work/crew.yaml", "rw", "directory")
        );
        assert_eq!(check(&["crews/a:/work:ro"], "crews/a", false), "OK");
        // Inside a writable mount: the directory nested there is read-only in this launch, but a
        // crew path through the mount could be replaced by one an agent writes.
        assert_eq!(
            check(&["./:/work:rw"], "crews/a", false),
            refusal("crews/a/crew.yaml", "/work", "", "/work/crews/a/crew.yaml", "rw", "directory")
        );
        assert_eq!(
            check(&["crews:/work:rwnd"], "crews/a", false),
            refusal("crews/a/crew.yaml", "/work", "/crews", "/work/a/crew.yaml", "rwnd", "directory")
        );
        assert_eq!(check(&["./:/work:rw;crews:ro"], "crews/a", false), "OK");
        assert_eq!(check(&["./:/work:rw", "crews:/all-crews:ro"], "crews/a", false), "OK");
        // A writable mount inside the crew directory reaches the file only through a link.
        assert_eq!(check(&["crews/a/out:/out:rw"], "crews/a", false), "OK");
        assert_eq!(
            check(&["crews/b/out:/out:rw"], "crews/b", false),
            refusal("crews/b/crew.yaml", "/out", "/crews/b/out", "/out/real.yaml", "rw", "file")
        );
        // A single-file crew beside the default workspace made writable.
        assert_eq!(
            check(&[], "team.yaml", true),
            refusal("team.yaml", "/workspace", "", "/workspace/team.yaml", "rw", "directory")
        );
        assert_eq!(check(&[], "team.yaml", false), "OK");
    }

    /// Each host path the launch opens with the ambient authority is refused in one line of
    /// its own wording: the settings file, the crew (read beneath its directory, as its agents
    /// see it), the exchange log's and the journal's directories.
    #[test]
    fn operator_paths_are_refused_in_one_line_each() {
        let setup = Setup::new();
        let root = setup.dir.path();
        std::fs::write(root.join("binary.json"), "{\0}").unwrap();
        std::fs::write(root.join("file"), "").unwrap();
        std::fs::create_dir_all(root.join("crews/empty")).unwrap();
        std::fs::create_dir_all(root.join("crews/out")).unwrap();
        std::fs::create_dir_all(root.join("work")).unwrap();
        std::fs::write(root.join("work/crew.yaml"), "name: out\n").unwrap();
        std::os::unix::fs::symlink("../../work/crew.yaml", root.join("crews/out/crew.yaml")).unwrap();
        let refusal = |change: &dyn Fn(&mut LaunchOptions)| -> String {
            let mut options = setup.options();
            change(&mut options);
            match compose(&options, vfs::ambient_authority()) {
                Ok(_) => "OK".to_owned(),
                Err(problems) => problems.to_string().replace(&root.display().to_string(), "[TMP]"),
            }
        };
        assert_eq!(
            refusal(&|options| options.settings = Some(PathBuf::from("one"))),
            "cannot read settings file `one`: it is a directory, not a file"
        );
        assert_eq!(
            refusal(&|options| options.settings = Some(PathBuf::from("binary.json"))),
            "cannot read settings file `binary.json`: it looks binary (it contains NUL bytes), not text"
        );
        assert_eq!(
            refusal(&|options| options.settings = Some(PathBuf::from("none/vfs.json"))),
            "cannot read settings file `none/vfs.json`: no such file or directory"
        );
        assert_eq!(
            refusal(&|options| options.crews = vec![PathBuf::from("crews/empty")]),
            "cannot read crew `crews/empty`: `/crew/crew.yaml` does not exist"
        );
        // The crew file's link leads into a writable mount: read as agents see it, it is not there.
        assert_eq!(
            refusal(&|options| {
                options.crews = vec![PathBuf::from("crews/out")];
                options.mounts = vec!["work:/work:rw".to_owned()];
            }),
            "cannot read crew `crews/out`: it is a link that leads out of its directory"
        );
        assert_eq!(
            refusal(&|options| options.llm_log = Some(PathBuf::from("file/logs"))),
            "cannot use `[TMP]/file/logs` as the exchange log directory: it is not a directory"
        );
        assert_eq!(
            refusal(&|options| options.journal = Some(PathBuf::from("file"))),
            "cannot use `[TMP]/file` as the journal directory: it is not a directory"
        );
    }

    /// The launch decides local or object by the parsed location (one rule, `Location::parse`):
    /// a relative directory resolves against the launch's directory, even one named like a URL
    /// (quoted), and an object URL stays as written.
    #[test]
    fn relative_directories_resolve_and_object_urls_stay_as_written() {
        let base = Path::new("/base");
        let resolved = |text: &str| resolve(text.parse().unwrap(), base).physical().to_owned();
        assert_eq!(resolved("memory://team/x:/m"), "memory://team/x");
        assert_eq!(resolved("s3://team-data/x:/m"), "s3://team-data/x");
        assert_eq!(resolved("\"a://b\":/m"), "/base/a:/b");
        assert_eq!(resolved("./data:/m"), "/base/data");
        assert_eq!(resolved("/abs:/m"), "/abs");
        let setup = Setup::new();
        std::fs::create_dir_all(setup.dir.path().join("a:/b")).unwrap();
        let mut options = setup.options();
        options.mounts = vec!["\"a://b\":/odd".to_owned()];
        let launch = compose(&options, vfs::ambient_authority()).unwrap();
        let view = launch.registry().operator_view();
        let odd = view.iter().find(|mount| mount.root == "/odd").unwrap();
        assert_eq!(odd.physical.replace(&setup.dir.path().display().to_string(), "[TMP]"), "[TMP]/a:/b");
    }

    #[test]
    fn the_log_directory_is_created_beneath_its_nearest_existing_ancestor() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.llm_log = Some(PathBuf::from("a/b/c"));
        let launch = compose(&options, vfs::ambient_authority()).unwrap();
        assert!(launch.has_exchange_log());
        assert!(std::fs::metadata(setup.dir.path().join("a/b/c")).unwrap().is_dir());
        assert_eq!(launch.registry().internal_roots(), [LOG_ROOT]);
    }

    /// A launch given a journal bound below the least (through the library, where the
    /// command line's parser does not stand guard) is refused in one line, in the words the
    /// option takes, and nothing is created.
    #[test]
    fn a_journal_bound_below_the_least_is_refused_at_launch() {
        let setup = Setup::new();
        let mut options = setup.options();
        options.mounts = vec!["./one:/w:rw".to_owned()];
        options.journal = Some(PathBuf::from("journal"));
        options.journal_max_bytes = Some(100 * 1024);
        let problems = compose(&options, vfs::ambient_authority()).unwrap_err();
        let [problem] = problems.0.as_slice() else { panic!("{problems:?}") };
        assert_eq!(
            problem.to_string(),
            "--journal-max-bytes 100K is below 256K, the least a journal keeps (its log may grow to 128K before it is compacted, and takes at most half)"
        );
        assert_eq!(
            problem.hint().as_deref(),
            Some("give --journal-max-bytes 256K or more, like --journal-max-bytes 1G (the default)")
        );
        assert!(!setup.dir.path().join("journal").exists());
        options.journal_max_bytes = Some(crate::journal::MIN_MAX_BYTES);
        assert!(compose(&options, vfs::ambient_authority()).unwrap().journal().is_some());
    }
}
