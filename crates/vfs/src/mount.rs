//! The vocabulary of the mount table that every layer shares: who is asking ([`Caller`]),
//! who may see a mount ([`Visibility`]), the bounds of every operation ([`Limits`]) and why a
//! mount cannot be served ([`ConfigError`]). It sits below storage, the registry and the
//! operations, so each of them can use it without reaching up.

use std::fmt;

use crate::spec::Rights;

/// Who is asking: decides which mounts exist for the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// An agent, through the tools: agent-facing mounts only.
    Agent,
    /// The holder of a privileged capability for one internal mount (its index).
    Privileged(usize),
}

/// Who may resolve a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Visibility {
    /// Listed and resolvable by agents.
    AgentFacing,
    /// Resolvable only with a [`PrivilegedAccessor`](crate::PrivilegedAccessor) for this root; to an agent it does not exist.
    Internal,
}

impl Visibility {
    /// `agent-facing` or `internal`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::AgentFacing => "agent-facing",
            Visibility::Internal => "internal",
        }
    }
}

impl fmt::Display for Visibility {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Bounds applied to every operation. Each field's doc names its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most bytes of text one read returns (default 256 KiB).
    pub read_bytes: u64,
    /// Most bytes of a media file (default 8 MiB).
    pub media_bytes: u64,
    /// Most bytes one write or edit may produce (default 16 MiB).
    pub write_bytes: u64,
    /// Most entries a listing, tree or name search returns (default 2,000).
    pub entries: usize,
    /// Deepest a tree or walk descends (default 32).
    pub depth: usize,
    /// Most matches a content search returns (default 1,000; the per-call default is 200).
    pub matches: usize,
    /// Most files `read_multiple_files` takes (default 64).
    pub files_per_call: usize,
    /// Most edits one `edit_file` call applies (default 100).
    pub edits_per_call: usize,
    /// Longest glob pattern (name search, `include`, each exclude pattern) in bytes (default
    /// 1 KiB); a longer one is refused before it is compiled.
    pub glob_bytes: usize,
    /// Longest regular expression in bytes (default 8 KiB).
    pub regex_bytes: usize,
    /// Most exclude patterns per call (default 64).
    pub excludes: usize,
    /// Longest time one agent call may run before it is stopped with an error that says what
    /// to narrow (default 30 s).
    pub call_time: std::time::Duration,
    /// Most entries of a directory a front end's listing ([`AgentAccessor::entries`], the
    /// FUSE view's) shows, and reads (default [`VIEW_ENTRIES`](crate::VIEW_ENTRIES)).
    ///
    /// [`AgentAccessor::entries`]: crate::AgentAccessor::entries
    pub view_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            read_bytes: 256 * 1024,
            media_bytes: 8 * 1024 * 1024,
            write_bytes: 16 * 1024 * 1024,
            entries: 2_000,
            depth: 32,
            matches: 1_000,
            files_per_call: 64,
            edits_per_call: 100,
            glob_bytes: 1024,
            regex_bytes: 8 * 1024,
            excludes: 64,
            call_time: std::time::Duration::from_secs(30),
            view_entries: crate::VIEW_ENTRIES,
        }
    }
}

/// A refused registry: operator-facing (it may name physical paths).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A name rule (`--hide`, a settings file's `hide`) that cannot be used.
    #[error(transparent)]
    NameRule(#[from] crate::policy::RuleError),
    /// Two mounts claim one virtual root.
    #[error("the virtual root `{root}` is mounted twice")]
    DuplicateRoot {
        /// The root.
        root: String,
    },
    /// Two roots differ only by case.
    #[error("the virtual roots `{first}` and `{second}` differ only by case")]
    CaseCollision {
        /// The first root.
        first: String,
        /// The second root.
        second: String,
    },
    /// The physical directory does not exist.
    #[error("the directory `{physical}` for mount `{root}` does not exist")]
    Missing {
        /// The root.
        root: String,
        /// The physical path as given.
        physical: String,
    },
    /// The physical path is not a directory.
    #[error("`{physical}` for mount `{root}` is not a directory")]
    NotADirectory {
        /// The root.
        root: String,
        /// The physical path as given.
        physical: String,
    },
    /// An object store could not be configured or did not answer.
    #[error("cannot use `{physical}` for mount `{root}`: {reason}")]
    Store {
        /// The root.
        root: String,
        /// The URL as given.
        physical: String,
        /// What went wrong.
        reason: String,
    },
    /// Two object-storage mounts whose keys overlap in one bucket.
    #[error(
        "`{inner}` for mount `{inner_root}` lies inside `{outer}` for mount `{outer_root}`: object-storage mounts cannot nest"
    )]
    NestedObjects {
        /// The mount whose prefix holds the other.
        outer_root: String,
        /// Its URL as given.
        outer: String,
        /// The mount inside it.
        inner_root: String,
        /// Its URL as given.
        inner: String,
    },
    /// An internal root whose virtual root lies under an agent-facing one, or above one: an
    /// agent would see a name there answer differently from a name that does not exist.
    #[error("the internal root `{internal}` and the agent-facing root `{agent}` nest in one another")]
    InternalNestedVirtually {
        /// The internal root.
        internal: String,
        /// The agent-facing root.
        agent: String,
    },
    /// An agent-facing mount that serves an internal mount's directory, or lies inside it.
    #[error(
        "the mount `{agent}` (`{physical}`) serves the directory of the internal root `{internal}`, or a part of it"
    )]
    ServesInternal {
        /// The agent-facing root.
        agent: String,
        /// Its physical directory as given.
        physical: String,
        /// The internal root.
        internal: String,
    },
    /// An internal mount's directory inside a part of an agent-facing mount that agents may
    /// write: its name would be taken there, visibly.
    #[error(
        "the internal root `{internal}` (`{physical}`) lies inside `{agent}` at `{inside}`, which is mounted {rights}; an agent could tell that something is there"
    )]
    InternalInsideWritable {
        /// The internal root.
        internal: String,
        /// Its physical directory as given.
        physical: String,
        /// The agent-facing mount holding it.
        agent: String,
        /// The virtual path at which it lies.
        inside: String,
        /// The rights there.
        rights: Rights,
    },
    /// An override granting writes inside a name a name rule hides (`;.ssh:rw`): only a
    /// read-only name rule can be loosened for one mount.
    #[error(
        "the override `{item}` of mount `{root}` lies inside `{place}`, which the name rule {rule} hides: a hidden name cannot be loosened"
    )]
    LoosensHidden {
        /// The mount's root.
        root: String,
        /// The override as written, like `.ssh:rw`.
        item: String,
        /// The hidden virtual path it lies at or inside.
        place: String,
        /// The rule that hides it and where it came from, like `` `.ssh` (default) ``.
        rule: String,
    },
    /// The directory could not be opened.
    #[error("cannot open `{physical}` for mount `{root}`: {source}")]
    Open {
        /// The root.
        root: String,
        /// The physical path as given.
        physical: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl ConfigError {
    /// How to fix it, for a `hint:` line.
    #[must_use]
    pub fn hint(&self) -> &'static str {
        match self {
            ConfigError::DuplicateRoot { .. } | ConfigError::CaseCollision { .. } => {
                "give each mount its own virtual root, for example `/src` and `/src-extra`"
            }
            ConfigError::Missing { .. } => "create the directory first, or fix the path",
            ConfigError::NotADirectory { .. } => "a mount's physical side must be a directory",
            ConfigError::Open { .. } => "check the directory's permissions",
            ConfigError::InternalNestedVirtually { .. } => {
                "give the internal mount a root of its own, beside the agent-facing ones (like `/llm-logs`)"
            }
            ConfigError::ServesInternal { .. } => {
                "mount a directory that neither is nor lies inside the internal one (the exchange log, `--llm-log`)"
            }
            ConfigError::InternalInsideWritable { .. } => {
                "put the internal directory outside the mount, or make that part read-only with a sub-path override (`;part:ro`)"
            }
            ConfigError::NestedObjects { .. } => {
                "give the mounts prefixes side by side, such as `s3://bucket/work` and `s3://bucket/vendor`, or keep only the outer one"
            }
            ConfigError::Store { .. } => {
                "set AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (AWS_ALLOW_HTTP=true for a local endpoint)"
            }
            ConfigError::LoosensHidden { .. } => {
                "drop the override: hidden names stay hidden in every mount, and only a read-only rule (the default `.git`) can be loosened for one; `--no-default-hide` turns every default rule off"
            }
            ConfigError::NameRule(_) => {
                "a name rule is a glob of a name, like `*.sqlite`, or of a few names, like `.docker/config.json`"
            }
        }
    }
}
