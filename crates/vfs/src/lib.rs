//! A virtual filesystem for AI agents: **a physical path is never a virtual path, and no
//! physical path ever reaches an agent.** Agents name files by virtual paths such as
//! `/src/main.rs`; the registry maps each virtual root to a directory it opened once, resolves
//! every request beneath that directory's handle, applies rights and visibility, and answers in
//! virtual paths only.
//!
//! # Brief overview
//!
//! - [`MountSpec`] parses the operator's mount strings (`./data:/src:ro`).
//! - [`MountRegistry`] is built once by [`MountRegistryBuilder`], then frozen and shared; each
//!   mount has [`Rights`] and a [`Visibility`].
//! - [`VirtualPath`] is the only path type agents' requests carry.
//! - [`AgentAccessor`] is what tools use; [`PrivilegedAccessor`] is the capability that reaches
//!   one internal root, minted in one place ([`MountRegistry::mint_privileged`]).
//! - [`Error`] is safe to show to an agent by construction.
//! - [`AmbientAuthority`] opens the operator's own host paths ([`host_path`]); only
//!   [`ambient_authority`] makes one, and only the binary's `main` calls it (ADR 0010).
//! - [`Location`]: a mount's physical side, parsed once (a local directory or an object URL).
//!
//! # Example
//!
//! ```
//! use vfs::{MountRegistry, Precondition, ReadWindow};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("hello.txt"), "hi\n").unwrap();
//! let spec = format!("{}:/src:ro", dir.path().display()).parse()?;
//! // The binary's `main` mints the authority to open the operator's host paths, once.
//! let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority())?;
//! let agent = registry.agent();
//!
//! let read = agent.read_text("/src/hello.txt", &ReadWindow::default())?;
//! assert_eq!(read.content, "hi\n");
//!
//! let denied = agent.write("/src/new.txt", "x", &Precondition::Absent).unwrap_err();
//! assert_eq!(
//!     denied.to_string(),
//!     "cannot write `/src/new.txt`: `/src` is mounted ro, and no mount grants write"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub use access::{
    AgentAccessor, AppendOnlyAccessor, PrivilegedAccessor, ReadHandle, StagedWrite, WeakPrivilegedAccessor,
};
pub use budget::{Budget, Progress, ProgressSink};
pub use changes::{
    Before, CallId, Change, ChangeKind, ChangeObserver, Image, Keeper, Saved, StoredImages, TAKING_SUFFIX,
    TREE_IMAGE_BYTES, TreeItem, process_tag,
};
pub use error::{Error, ErrorKind, Unmet};
pub use hint::{Argument, Hint, Neutral, Operation, Wording};
pub use mount::{ConfigError, Limits, Visibility};
pub use ops::{
    AppendFile, Attributes, CreateDirOutcome, DeleteOutcome, Edit, EditOptions, EditOutcome, EntryKind, FileInfo,
    FileResult, FileStamp, GrepLine, GrepRequest, GrepResult, HeldSyncs, ListEntry, Listing, MediaRead, MoveOutcome,
    NameSearch, Precondition, ReadOn, ReadWindow, RestoredDirectory, SizedEntry, SizedListing, SortBy, StageFrom,
    TextRead, Tree, TreeNode, VIEW_ENTRIES, VIEW_READ_BYTES, WriteOutcome, rfc3339,
};
pub use path::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, ParsePathError, VirtualPath};
pub use policy::{Loosening, NameRule, RuleEffect, RuleError};
pub use pool::WorkerPool;
pub use registry::{
    DecidedBy, Decision, MountInfo, MountRegistry, MountRegistryBuilder, OperatorMountView, OverrideInfo, Subscription,
    WritableElsewhere,
};
pub use scrub::REDACTED;
pub use spec::{
    Access, Location, MountId, MountRoot, MountSpec, ObjectScheme, ObjectUrl, Rights, SpecError, SpecPart,
    SubPathRights, SubPathRule,
};
pub use storage::Capabilities;
pub use storage::ambient::{AmbientAuthority, ambient_authority};
pub use text::{AgentText, escape_controls};

/// Raises the process's soft open-file limit to its hard limit (at most 1,048,576), for a
/// server that walks large trees for several callers at once; returns the limit in force. Call
/// it once, before the first operation.
#[expect(clippy::must_use_candidate, reason = "raising the limit is the point; the value is for a log line")]
pub fn raise_open_file_limit() -> u64 {
    storage::local::raise_open_file_limit()
}

/// The operator's own host paths (settings, crew and token files, the log's and the journal's
/// directories), opened by path with the [`AmbientAuthority`] (ADR 0010).
pub mod host_path {
    pub use crate::storage::ambient::{
        HostKind, HostPathError, canonical, create_directories, probe, read_text_file, read_text_file_beneath,
        remove_made_directories,
    };
}

mod access;
mod budget;
mod changes;
mod error;
mod gate;
mod hint;
mod mount;
mod ops;
mod path;
mod policy;
mod pool;
mod registry;
mod scrub;
mod spec;
mod storage;
mod text;
