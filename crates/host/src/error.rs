//! The crate's one error type: everything that refuses a launch.
//!
//! These messages are for the operator, on stderr, so they may name physical paths. Each is one
//! line that states what is wrong and the rule; the fix, when there is one, comes from
//! [`HostError::hint`] so that callers print it as a separate `hint:` line.

use std::fmt;

/// A refused launch option, settings file, crew file or mount table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// A mount string that does not parse.
    #[error("{source}{origin}")]
    Spec {
        /// The parse error (names the string and the part).
        source: vfs::SpecError,
        /// Where the string came from, like ` (in settings file `s.json`)`; may be empty.
        origin: String,
    },
    /// A `--mount-id` that is not a ULID.
    #[error("invalid --mount-id `{value}`: {reason}")]
    MountId {
        /// The value given.
        value: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A user mount on a root the runner reserves.
    #[error(
        "the mount `{spec}` claims `{root}`, a reserved root: this command reserves `/crew`, `/crews`, `/crews-N`, `/script`, `/llm-logs` and `/llm-journal`; rename the mount, for example to `{suggestion}`"
    )]
    ReservedRoot {
        /// The mount string.
        spec: String,
        /// The reserved root it claims.
        root: String,
        /// A root that would be accepted.
        suggestion: String,
    },
    /// The settings file could not be read.
    #[error("cannot read settings file `{path}`: {reason}")]
    SettingsRead {
        /// The path as given.
        path: String,
        /// Why.
        reason: vfs::host_path::HostPathError,
    },
    /// The settings file is not the expected JSON.
    #[error("invalid settings file `{path}`: {reason}")]
    SettingsParse {
        /// The path as given.
        path: String,
        /// The JSON error.
        reason: String,
    },
    /// The crew file could not be found or read.
    #[error("cannot read crew `{path}`: {reason}")]
    CrewRead {
        /// The path as given.
        path: String,
        /// Why.
        reason: vfs::host_path::HostPathError,
    },
    /// The crew's directory holds no definition where its agents would see it.
    #[error("cannot read crew `{path}`: `{at}` does not exist")]
    CrewFileMissing {
        /// The path as given.
        path: String,
        /// Where the crew's agents would see the definition (`/crew/crew.yaml`).
        at: String,
    },
    /// The crew file is larger than the read cap.
    #[error("cannot read crew `{path}`: the crew file is larger than {limit} bytes, the most it may be")]
    CrewTooLarge {
        /// The path as given.
        path: String,
        /// The read cap.
        limit: u64,
    },
    /// The crew file is not YAML, or its `mounts:` block is not a list.
    #[error("invalid crew `{path}`: {reason}")]
    CrewParse {
        /// The path as given.
        path: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A crew file that nests flow collections deeper than a crew file may (the YAML
    /// scanner's time grows with the file's length times that depth).
    #[error(
        "invalid crew `{path}`: line {line} nests flow collections (`[…]`, `{{…}}`) more than {limit} deep, the most a crew file may; write that part as indented YAML, or nest it less"
    )]
    CrewNesting {
        /// The crew file.
        path: String,
        /// The line (1-based) that passes the limit.
        line: usize,
        /// The deepest nesting allowed.
        limit: usize,
    },
    /// One entry of the crew's `mounts:` block is malformed.
    #[error("invalid crew mount `{}` in `{path}`: {reason}", vfs::escape_controls(entry))]
    CrewMount {
        /// The crew file.
        path: String,
        /// The entry as written.
        entry: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A crew's `mounts:` entry names a root the runner reserves.
    #[error(
        "invalid crew mount `{}` in `{path}`: `{root}` is {purpose}; a crew cannot name a reserved root in `mounts:`",
        vfs::escape_controls(entry)
    )]
    CrewReservedRoot {
        /// The crew file.
        path: String,
        /// The entry as written.
        entry: String,
        /// The reserved root it is or lies under.
        root: String,
        /// What the runner serves there.
        purpose: &'static str,
    },
    /// The crew's definition lies where the crew's agents may write, through another root:
    /// they could widen the crew's mounts for its next start.
    #[error(
        "the crew file `{crew}` lies inside `{root}` (`{physical}`) at `{at}`, which is mounted {rights}; a crew could rewrite its own `mounts:` block for its next start: mount `{root}` read-only, or move the crew {what} out of it"
    )]
    CrewWritable {
        /// The crew file as the operator spelled it.
        crew: String,
        /// The writable mount's root.
        root: String,
        /// The writable mount's physical directory.
        physical: String,
        /// Where the crew file (or its directory's place) is in that mount.
        at: String,
        /// The rights there.
        rights: vfs::Rights,
        /// `directory` or `file`: what lies in the writable part.
        what: &'static str,
    },
    /// The settings file lies where agents may write: they could widen their mounts for the
    /// next start.
    #[error(
        "the settings file `{file}` lies inside `{root}` (`{physical}`) at `{at}`, which is mounted {rights}; an agent could rewrite the mounts of the next start: mount `{root}` read-only there, or move the settings file out of it"
    )]
    SettingsWritable {
        /// The settings file as the operator spelled it.
        file: String,
        /// The writable mount's root.
        root: String,
        /// The writable mount's physical directory.
        physical: String,
        /// Where the file is in that mount.
        at: String,
        /// The rights there.
        rights: vfs::Rights,
    },
    /// The token file lies where agents may read it: every endpoint's token, theirs to take.
    #[error(
        "the token file `{file}` lies inside `{root}` (`{physical}`) at `{at}`, where agents may read it, and holds another endpoint's token, which they could take: move the token file out of every mount, or hide it (`--hide`)"
    )]
    TokensReadable {
        /// The token file as the operator spelled it.
        file: String,
        /// The mount's root.
        root: String,
        /// The mount's physical directory.
        physical: String,
        /// Where the file is in that mount.
        at: String,
    },
    /// Several settings entries for one root, and nothing selects one.
    #[error("the root `{root}` is declared {count} times in the settings and nothing selects one: {choice}")]
    AmbiguousRoot {
        /// The root.
        root: String,
        /// How many entries.
        count: usize,
        /// How to select one: by the ids the entries carry, or by `--mount`.
        choice: String,
    },
    /// An id that no settings entry carries.
    #[error("{source_name} names the mount id `{id}`, but no settings entry carries it: {fix}")]
    UnknownId {
        /// `--mount-id` or `the crew`.
        source_name: &'static str,
        /// The id.
        id: String,
        /// How to fix it.
        fix: &'static str,
    },
    /// The crew lists an id for one root, but the entry with that id mounts another.
    #[error(
        "the crew lists `{id}|{crew_root}`, but the settings entry `{id}` mounts `{entry_root}`: fix the root in the crew's `mounts:` block or the id"
    )]
    IdForOtherRoot {
        /// The id.
        id: String,
        /// The root the crew wants.
        crew_root: String,
        /// The root of the entry.
        entry_root: String,
    },
    /// A root the crew needs and nothing provides.
    #[error(
        "the crew needs `{root}`, but nothing provides it: pass `--mount <dir>:{root}`, or add an entry for `{root}` to the settings file"
    )]
    UnprovidedRoot {
        /// The root.
        root: String,
    },
    /// Two settings entries carry one id.
    #[error("two settings entries carry the mount id `{id}`: give each entry its own ULID")]
    DuplicateId {
        /// The id.
        id: String,
    },
    /// Two selections for one root.
    #[error("{message}")]
    ConflictingSelection {
        /// The whole line.
        message: String,
    },
    /// The mount table did not build.
    #[error(transparent)]
    Registry(#[from] vfs::ConfigError),
    /// The exchange log's or the journal's directory could not be created or opened.
    #[error("cannot use `{path}` as the {purpose} directory: {reason}")]
    LogDir {
        /// The directory, made absolute.
        path: String,
        /// `exchange log` (`--llm-log`) or `journal` (`--journal`).
        purpose: &'static str,
        /// Why.
        reason: vfs::host_path::HostPathError,
    },
    /// `--listen` without any token: authentication is never off.
    #[error("--listen needs a bearer token: give --token-file FILE or set VFS_TOKEN")]
    NoToken,
    /// The token file cannot be read.
    #[error("token file `{path}`: {reason}")]
    TokenFileRead {
        /// The path as given.
        path: String,
        /// Why.
        reason: vfs::host_path::HostPathError,
    },
    /// A line of the token file is malformed, or `VFS_TOKEN` is too short.
    #[error("token file `{path}`: {reason}")]
    TokenFile {
        /// The path as given.
        path: String,
        /// What is wrong (with the line number), never the token.
        reason: String,
    },
    /// More than one `--crew` without `--listen`.
    #[error("--crew is given {count} times, but a stdio server serves one crew")]
    ManyCrews {
        /// How many were given.
        count: usize,
    },
    /// A hosted crew's name that cannot name an endpoint.
    #[error("crew `{path}` is named `{name}`, which cannot name an endpoint: {reason}")]
    CrewName {
        /// The crew path as given.
        path: String,
        /// The name (escaped for one line).
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// Two hosted crews with one name.
    #[error("the crews `{first}` and `{second}` are both named `{name}`: each crew needs its own endpoint /mcp/<name>")]
    DuplicateCrew {
        /// The name.
        name: String,
        /// The first crew path as given.
        first: String,
        /// The second crew path as given.
        second: String,
    },
    /// Two hosted crews in one directory, or one inside the other.
    #[error(
        "the crews `{first}` and `{second}` share the directory `{directory}`: a crew would see the other's files at /crew"
    )]
    SharedCrewDirectory {
        /// The first crew path as given.
        first: String,
        /// The second crew path as given.
        second: String,
        /// The directory the second crew lives in.
        directory: String,
    },
    /// A problem of one hosted crew's table.
    #[error("crew `{crew}`: {source}")]
    InCrew {
        /// The crew's name.
        crew: String,
        /// The problem.
        source: Box<HostError>,
    },
    /// An option that only the HTTP daemon takes, without `--listen`.
    #[error("{option} needs --listen: only the HTTP daemon {what}")]
    NeedsListen {
        /// The option.
        option: &'static str,
        /// What only the daemon does.
        what: &'static str,
    },
    /// The sandbox of `run_command` and `vfs run` cannot start on this machine.
    #[error("commands cannot be run: {0}")]
    Sandbox(#[from] vfs_fuse::SandboxError),
    /// The journal cannot be used: its log cannot be opened, or (for `vfs undo`) its directory
    /// does not exist.
    #[error("cannot use `{path}` as the journal: {reason}")]
    Journal {
        /// The journal's directory, made absolute.
        path: String,
        /// Why.
        reason: String,
        /// What to do.
        hint: &'static str,
    },
    /// A journal bound too small to hold the journal's log.
    #[error("--journal-max-bytes {given} is below {why}")]
    JournalBound {
        /// The bound given, in words (`100K`).
        given: String,
        /// The least bound and why.
        why: String,
    },
    /// A `--run-env` value that is not `NAME` or `NAME=VALUE`.
    #[error("invalid --run-env `{value}`: {reason}")]
    RunEnv {
        /// The value given.
        value: String,
        /// The rule it breaks.
        reason: String,
    },
}

impl HostError {
    /// How to fix it, for a `hint:` line, when there is more to say than the line says.
    #[must_use]
    pub fn hint(&self) -> Option<String> {
        match self {
            HostError::Spec { source, .. } => {
                let hint = source.hint();
                (!hint.is_empty()).then(|| hint.to_owned())
            }
            HostError::MountId { .. } => Some("a mount id is the ULID written before `|` in a settings entry, like `01J9Z3K4M5N6P7Q8R9S0T1V2W3|./data:/src:ro`".to_owned()),
            HostError::SettingsParse { .. } => Some(
                r#"the settings file is JSON like {"mounts": ["./data:/src:ro"], "internal_mounts": []}"#.to_owned(),
            ),
            HostError::CrewRead { .. } | HostError::CrewFileMissing { .. } | HostError::CrewTooLarge { .. } => Some("--crew takes a crew YAML file, or a directory holding `crew.yaml`".to_owned()),
            HostError::CrewMount { .. } | HostError::CrewParse { .. } => Some(
                "a crew's `mounts:` block is a list of `/root` or `<ulid>|/root`, like `mounts: [\"/src\", \"01J9Z3K4M5N6P7Q8R9S0T1V2W3|/output\"]`".to_owned(),
            ),
            HostError::CrewReservedRoot { root, .. } if root == "/crew" => {
                Some("drop the entry: every crew sees its own directory at `/crew` without listing it".to_owned())
            }
            HostError::CrewReservedRoot { root, .. } => Some(format!(
                "drop the entry, or list a root of the crew's own, like `{root}-files`, and provide it with --mount or the settings file"
            )),
            HostError::Registry(error) => Some(error.hint().to_owned()),
            HostError::LogDir { purpose, .. } => {
                let option = if *purpose == "journal" { "--journal" } else { "--llm-log" };
                Some(format!("{option} takes a directory; it is created if missing"))
            }
            HostError::NoToken | HostError::TokenFile { .. } | HostError::TokenFileRead { .. } => Some(
                "a token file holds one token per line: `TOKEN` grants /mcp, `CREW TOKEN` grants /mcp/CREW; make tokens with `openssl rand -hex 32`".to_owned(),
            ),
            HostError::NeedsListen { .. } => Some("add --listen HOST:PORT, like --listen 127.0.0.1:8080".to_owned()),
            HostError::Journal { hint, .. } => Some((*hint).to_owned()),
            HostError::JournalBound { .. } => Some(format!(
                "give --journal-max-bytes {} or more, like --journal-max-bytes 1G (the default)",
                crate::journal::byte_words(crate::journal::MIN_MAX_BYTES)
            )),
            HostError::RunEnv { .. } => Some(
                "--run-env takes `NAME` (its value from vfs's own environment) or `NAME=VALUE`, like --run-env CARGO_HOME=/w/.cargo".to_owned(),
            ),
            HostError::ManyCrews { .. } => Some(
                "host several crews with the HTTP daemon: add --listen HOST:PORT, like --listen 127.0.0.1:8080".to_owned(),
            ),
            HostError::CrewName { .. } | HostError::DuplicateCrew { .. } => Some(
                "a hosted crew is named by its `name:` key, else its file or directory name; use letters, digits, `-`, `_` and `.`".to_owned(),
            ),
            HostError::SharedCrewDirectory { .. } => {
                Some("give each hosted crew a directory of its own, holding its `crew.yaml`".to_owned())
            }
            HostError::InCrew { source, .. } => source.hint(),
            HostError::ReservedRoot { .. }
            | HostError::CrewNesting { .. }
            | HostError::CrewWritable { .. }
            | HostError::SettingsWritable { .. }
            | HostError::TokensReadable { .. }
            | HostError::SettingsRead { .. }
            | HostError::AmbiguousRoot { .. }
            | HostError::UnknownId { .. }
            | HostError::IdForOtherRoot { .. }
            | HostError::UnprovidedRoot { .. }
            | HostError::DuplicateId { .. }
            | HostError::ConflictingSelection { .. }
            | HostError::Sandbox(vfs_fuse::SandboxError::ReservedRoot { .. }) => None,
            HostError::Sandbox(_) => Some(
                "the file tools work without it; `vfs check --allow-run` tries the sandbox, and docs/cli.md (`vfs run`) says what it needs".to_owned(),
            ),
        }
    }
}

/// Every problem a launch found, in the order found. Never empty.
#[derive(Debug)]
pub struct Problems(pub Vec<HostError>);

impl Problems {
    /// The problems.
    pub fn iter(&self) -> std::slice::Iter<'_, HostError> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a Problems {
    type Item = &'a HostError;
    type IntoIter = std::slice::Iter<'a, HostError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl From<HostError> for Problems {
    fn from(error: HostError) -> Self {
        Self(vec![error])
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, problem) in self.0.iter().enumerate() {
            if index > 0 {
                formatter.write_str("\n")?;
            }
            write!(formatter, "{problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}
