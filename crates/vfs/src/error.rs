//! The one error type of the crate, safe to show to an agent by construction.
//!
//! Every [`Error`] is built by a constructor in this module from a [`VirtualPath`] and fixed
//! wording; none takes a host path, and OS errors contribute only their [`std::io::ErrorKind`]
//! (whose text never carries a path). The message is an [`AgentText`]: the wording is composed,
//! the paths and patterns it echoes are the agent's own input, passed as given. The unknown-root error is built in exactly one place,
//! [`Error::unknown_root`], and internal roots use it too, so "internal" and "does not exist"
//! are the same bytes (`docs/design.md`, resolution rule 4). What to do next is a [`Hint`]
//! ([`Error::hint`]), worded in the text by the front end that renders it, as are the names of
//! operations and arguments (see [`crate::Wording`]).

use std::fmt;
use std::sync::Arc;

use crate::hint::{Argument, Hint, Operation};
use crate::path::{ParsePathError, VirtualPath};
use crate::spec::Access;
use crate::text::{AgentText, agent_text, code};

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The path is not a valid virtual path.
    InvalidPath,
    /// No agent-facing mount serves the path (also: an internal root, to an agent).
    UnknownRoot,
    /// The path does not exist inside its mount.
    NotFound,
    /// Something is at a place where the change required nothing (`overwrite` not given, or
    /// [`Precondition::Absent`](crate::Precondition::Absent)).
    AlreadyExists,
    /// The mount's rights do not grant the access.
    PermissionDenied,
    /// A file was expected.
    NotAFile,
    /// A directory was expected.
    NotADirectory,
    /// A FIFO, socket or device: vfs serves only regular files and directories.
    Unsupported,
    /// A symbolic link leads outside its mount.
    Escape,
    /// Too many symbolic links (a loop).
    SymlinkLoop,
    /// The operation refuses to act through a symbolic link.
    Symlink,
    /// The file is not at the version the change required (`expectedVersion`, or
    /// [`Precondition::Version`](crate::Precondition::Version)): it is at another, or gone.
    VersionMismatch,
    /// An edit's `oldText` matched no place, or more than one.
    EditMismatch,
    /// The input or the result is larger than the bound.
    TooLarge,
    /// An argument is malformed.
    InvalidArgument,
    /// A directory is not empty and `recursive` was not given.
    DirectoryNotEmpty,
    /// The file or directory changed while the operation ran (a concurrent writer); retrying
    /// usually succeeds.
    Changed,
    /// The host refused or failed the operation.
    Io,
    /// The call ran past its time budget and was stopped.
    TimedOut,
    /// The caller cancelled the call.
    Cancelled,
}

/// Which precondition of a change did not hold at the error's path ([`Error::unmet`]).
///
/// A caller that set a precondition itself (a host passing the version its session saw) tells
/// by this, not by the kind or the text, that the refusal is its precondition's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unmet {
    /// Nothing was to be there ([`Precondition::Absent`](crate::Precondition::Absent)), and
    /// something is.
    Absent,
    /// A file at a version was to be there
    /// ([`Precondition::Version`](crate::Precondition::Version)), and it is at another
    /// version, or there is none.
    Version,
}

#[derive(Debug)]
struct Inner {
    kind: ErrorKind,
    path: Option<VirtualPath>,
    message: AgentText,
    source: Option<std::io::Error>,
    unmet: Option<Unmet>,
    hint: Option<Hint>,
    /// A refusal of a place that is read-only to the caller ([`Error::is_read_only`]).
    read_only: bool,
}

impl Inner {
    /// An error of `kind` at `path` saying `message`, and nothing more.
    fn new(kind: ErrorKind, path: Option<VirtualPath>, message: AgentText) -> Self {
        Self { kind, path, message, source: None, unmet: None, hint: None, read_only: false }
    }
}

/// An agent-safe error: a kind, the virtual path concerned, and a message naming only virtual
/// paths.
#[derive(Clone)]
pub struct Error(Arc<Inner>);

impl Error {
    fn build(kind: ErrorKind, path: Option<&VirtualPath>, message: AgentText) -> Self {
        Self(Arc::new(Inner::new(kind, path.cloned(), message)))
    }

    /// An error whose text says `hint` (the text holds it where it is to be worded).
    fn build_hinted(kind: ErrorKind, path: Option<&VirtualPath>, message: AgentText, hint: Hint) -> Self {
        debug_assert!(message.hints().any(|said| said == hint), "the text says the hint it carries");
        Self(Arc::new(Inner { hint: Some(hint), ..Inner::new(kind, path.cloned(), message) }))
    }

    /// A refusal because `unmet` did not hold at `path`.
    fn build_unmet(kind: ErrorKind, path: &VirtualPath, message: AgentText, unmet: Unmet) -> Self {
        let hint = message.hints().next();
        Self(Arc::new(Inner { unmet: Some(unmet), hint, ..Inner::new(kind, Some(path.clone()), message) }))
    }

    /// The kind, to match on.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The virtual path the error is about, if any.
    #[must_use]
    pub fn path(&self) -> Option<&VirtualPath> {
        self.0.path.as_ref()
    }

    /// The precondition of the change that did not hold at [`Error::path`], when that is why
    /// the change was refused (every [`AlreadyExists`](ErrorKind::AlreadyExists) and
    /// [`VersionMismatch`](ErrorKind::VersionMismatch) is such a refusal); `None` for every
    /// other error.
    #[must_use]
    pub fn unmet(&self) -> Option<Unmet> {
        self.0.unmet
    }

    /// What the caller can do next, when the error says it (the text holds it, for the front
    /// end to word): [`Hint::Overwrite`] for an existing file at a create-only write or move,
    /// [`Hint::ReplaceAll`] for edit text matching several places, [`Hint::Recursive`] for a
    /// directory that is not empty, [`Hint::Literal`] for a pattern that is no usable regular
    /// expression, [`Hint::Narrow`] for a call out of time.
    #[must_use]
    pub fn hint(&self) -> Option<Hint> {
        self.0.hint
    }

    /// The message as the pieces it was built from: the server's wording, and the agent's
    /// input it echoes (see [`AgentText`]).
    #[must_use]
    pub fn agent_text(&self) -> &AgentText {
        &self.0.message
    }

    pub(crate) fn invalid_path(error: &ParsePathError) -> Self {
        Self::build(ErrorKind::InvalidPath, None, agent_text![error.to_string()])
    }

    /// The single constructor for "no such root", used for unknown and internal roots alike.
    /// It names the agent-facing mounts and never the path asked for, so nothing in the answer
    /// depends on whether the root exists for someone else.
    #[cold]
    pub(crate) fn unknown_root(mount_table: &str) -> Self {
        let message = if mount_table.is_empty() {
            agent_text!["no mount serves this path, and no mounts are available"]
        } else {
            agent_text!["no mount serves this path; available mounts: ", mount_table]
        };
        Self::build(ErrorKind::UnknownRoot, None, message)
    }

    pub(crate) fn not_found(path: &VirtualPath) -> Self {
        Self::build(ErrorKind::NotFound, Some(path), agent_text![code(path), " does not exist"])
    }

    /// A write or move whose precondition was that nothing be there ([`Unmet::Absent`]).
    pub(crate) fn already_exists(path: &VirtualPath) -> Self {
        Self::build_unmet(
            ErrorKind::AlreadyExists,
            path,
            agent_text![code(path), " already exists; ", Hint::Overwrite],
            Unmet::Absent,
        )
    }

    /// An edit or a delete whose precondition was that nothing be there ([`Unmet::Absent`]):
    /// no `overwrite` could change that, so the text offers none.
    pub(crate) fn exists(path: &VirtualPath) -> Self {
        Self::build_unmet(
            ErrorKind::AlreadyExists,
            path,
            agent_text![code(path), " exists; the change required that nothing be there"],
            Unmet::Absent,
        )
    }

    /// A write of a name the rules hide: the same whether or not something is there.
    pub(crate) fn hidden_name(path: &VirtualPath, class: &str) -> Self {
        Self::build(
            ErrorKind::PermissionDenied,
            Some(path),
            agent_text!["cannot create ", code(path), ": names like this are hidden (", class, ")"],
        )
    }

    /// A change under a name the rules keep read-only (`.git`).
    pub(crate) fn read_only_name(path: &VirtualPath, access: Access, scope: &str, class: &str) -> Self {
        Self::build(
            ErrorKind::PermissionDenied,
            Some(path),
            agent_text!["cannot ", access.as_str(), " ", code(path), ": `", scope, "` is read-only (", class, ")"],
        )
        .of_read_only_place()
    }

    /// Marks a refusal as one of a place read-only to the caller.
    fn of_read_only_place(mut self) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.read_only = true;
        }
        self
    }

    /// True when this refuses a change of a place that is read-only to the caller: its
    /// mount or sub-path is mounted `ro`, or a name rule keeps it read-only (`**/*.lock:ro`,
    /// the default `.git`). A file-system view answers it `EROFS`, as a read-only file system
    /// would; other refusals of the rights (a delete under `rwnd`) are `EACCES`.
    #[must_use]
    pub fn is_read_only(&self) -> bool {
        self.0.read_only
    }

    /// A change that would put `HEAD` beside `objects`, `refs` or `commondir` (`partner`, or the
    /// other way round) in `directory`: git would take that directory for a repository and run
    /// what its config names.
    pub(crate) fn git_directory(path: &VirtualPath, access: Access, partner: &str, directory: &str) -> Self {
        Self::build(
            ErrorKind::PermissionDenied,
            Some(path),
            agent_text![
                "cannot ",
                access.as_str(),
                " ",
                code(path),
                ": beside `",
                partner,
                "` it would make `",
                directory,
                "` look like a git repository (git metadata)"
            ],
        )
    }

    /// A delete or a move (`verb`) of a directory that holds names the rules protect.
    pub(crate) fn holds_protected(verb: &'static str, path: &VirtualPath, class: &str, hidden: bool) -> Self {
        let what = if hidden { " inside, which are hidden from you" } else { " inside, which are read-only" };
        Self::build(
            ErrorKind::PermissionDenied,
            Some(path),
            agent_text!["cannot ", verb, " ", code(path), ": it holds ", class, what],
        )
    }

    /// A move of a directory that would bring names into a rule's protection at the
    /// destination (read-only or hidden there): what a write could not create there.
    pub(crate) fn would_be_protected(
        source: &VirtualPath,
        destination: &VirtualPath,
        class: &str,
        hidden: bool,
    ) -> Self {
        let what = if hidden { " there, which are hidden from you" } else { " there, which are read-only to you" };
        Self::build(
            ErrorKind::PermissionDenied,
            Some(source),
            agent_text![
                "cannot move ",
                code(source),
                " to ",
                code(destination),
                ": files in it would land on ",
                class,
                what
            ],
        )
    }

    /// A delete or a move (`verb`) of a directory holding more entries than a walk may list
    /// (object stores): what was not seen may be protected.
    pub(crate) fn too_many_to_check(verb: &'static str, path: &VirtualPath, bound: usize) -> Self {
        Self::build(
            ErrorKind::TooLarge,
            Some(path),
            agent_text![
                "cannot ",
                verb,
                " ",
                code(path),
                ": it holds more than ",
                bound.to_string(),
                " entries, too many to check for protected names; ",
                verb,
                " what it holds in smaller parts first"
            ],
        )
    }

    pub(crate) fn denied(path: &VirtualPath, access: Access, scope: &str, rights: &str, grantors: &str) -> Self {
        let access = access.as_str();
        let message = if grantors.is_empty() {
            agent_text![
                "cannot ",
                access,
                " ",
                code(path),
                ": `",
                scope,
                "` is mounted ",
                rights,
                ", and no mount grants ",
                access
            ]
        } else {
            agent_text![
                "cannot ",
                access,
                " ",
                code(path),
                ": `",
                scope,
                "` is mounted ",
                rights,
                "; mounts that grant ",
                access,
                ": ",
                grantors
            ]
        };
        let refused = Self::build(ErrorKind::PermissionDenied, Some(path), message);
        if rights == "ro" { refused.of_read_only_place() } else { refused }
    }

    /// A delete or move of a sub-path override's root whose holding directory does not grant
    /// delete: `scope` is the virtual path of the scope that holds it.
    pub(crate) fn holder_denies(path: &VirtualPath, scope: &str, rights: &str) -> Self {
        let message = agent_text![
            "cannot delete ",
            code(path),
            ": `",
            scope,
            "`, which holds it, is mounted ",
            rights,
            ", which does not grant delete (its own rights cover what is inside it)"
        ];
        Self::build(ErrorKind::PermissionDenied, Some(path), message)
    }

    /// A move or delete of a directory that holds a sub-path whose rights do not grant what the
    /// operation needs there: `verb` is `move`, `move to` or `delete`, `scope` the virtual path
    /// of the override.
    pub(crate) fn protected_inside(path: &VirtualPath, verb: &str, scope: &str, rights: &str, access: Access) -> Self {
        let message = agent_text![
            "cannot ",
            verb,
            " ",
            code(path),
            ": `",
            scope,
            "` inside it is mounted ",
            rights,
            ", which does not grant ",
            access.as_str()
        ];
        Self::build(ErrorKind::PermissionDenied, Some(path), message)
    }

    /// A move or delete of a directory that holds another mount's root: the directories
    /// between a mount and a mount nested in it stay where the launch found them. `mount` is
    /// the nested mount's root when the caller may see it.
    pub(crate) fn pinned(path: &VirtualPath, verb: &str, mount: Option<&str>) -> Self {
        let mut message = agent_text!["cannot ", verb, " ", code(path)];
        if let Some(root) = mount {
            message.composed(&format!(": it holds the mount `{root}`, whose place stays as the launch found it"));
        } else {
            message.composed(": it holds another mount");
        }
        Self::build(ErrorKind::PermissionDenied, Some(path), message)
    }

    pub(crate) fn not_a_file(path: &VirtualPath) -> Self {
        Self::build(ErrorKind::NotAFile, Some(path), agent_text![code(path), " is a directory, not a file"])
    }

    pub(crate) fn not_a_directory(path: &VirtualPath) -> Self {
        Self::build(ErrorKind::NotADirectory, Some(path), agent_text![code(path), " is not a directory"])
    }

    pub(crate) fn unsupported(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Unsupported,
            Some(path),
            agent_text![
                code(path),
                " is not a regular file or directory (a FIFO, socket or device); vfs does not open it"
            ],
        )
    }

    pub(crate) fn escape(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Escape,
            Some(path),
            agent_text![code(path), " goes through a symbolic link that leads outside its mount; it is not followed"],
        )
    }

    pub(crate) fn symlink_loop(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::SymlinkLoop,
            Some(path),
            agent_text![code(path), " goes through too many symbolic links (a loop?)"],
        )
    }

    pub(crate) fn symlink(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Symlink,
            Some(path),
            agent_text![
                code(path),
                " is a symbolic link; vfs does not write or delete through links, so address the file it points to"
            ],
        )
    }

    /// A change whose precondition was a version the file is not at ([`Unmet::Version`]).
    pub(crate) fn version_mismatch(path: &VirtualPath, current: &str) -> Self {
        Self::build_unmet(
            ErrorKind::VersionMismatch,
            path,
            agent_text![
                code(path),
                " changed since you read it: its version is now `",
                current,
                "`; read it again and retry"
            ],
            Unmet::Version,
        )
    }

    pub(crate) fn edit_mismatch(path: &VirtualPath, edit: usize, count: usize) -> Self {
        let message = if count == 0 {
            agent_text![
                "edit ",
                edit.to_string(),
                " for ",
                code(path),
                ": `",
                Argument::OldText,
                "` was not found; read the file and copy the text exactly"
            ]
        } else {
            let message = agent_text![
                "edit ",
                edit.to_string(),
                " for ",
                code(path),
                ": `",
                Argument::OldText,
                "` matches ",
                count.to_string(),
                " places; ",
                Hint::ReplaceAll
            ];
            return Self::build_hinted(ErrorKind::EditMismatch, Some(path), message, Hint::ReplaceAll);
        };
        Self::build(ErrorKind::EditMismatch, Some(path), message)
    }

    pub(crate) fn too_large(path: Option<&VirtualPath>, what: impl Into<AgentText>) -> Self {
        let what = what.into();
        let message = match path {
            Some(path) => agent_text![code(path), ": ", &what],
            None => what,
        };
        Self::build(ErrorKind::TooLarge, path, message)
    }

    pub(crate) fn too_deep(path: &VirtualPath, levels: usize) -> Self {
        Self::too_large(Some(path), agent_text!["vfs creates directories at most ", levels.to_string(), " levels deep"])
    }

    pub(crate) fn invalid_argument(message: impl Into<AgentText>) -> Self {
        Self::build(ErrorKind::InvalidArgument, None, message.into())
    }

    /// [`Error::invalid_argument`] or [`Error::too_large`] (`kind`) whose text says `hint`.
    pub(crate) fn hinted(kind: ErrorKind, message: AgentText, hint: Hint) -> Self {
        Self::build_hinted(kind, None, message, hint)
    }

    pub(crate) fn not_empty(path: &VirtualPath) -> Self {
        Self::build_hinted(
            ErrorKind::DirectoryNotEmpty,
            Some(path),
            agent_text![code(path), " is a directory that is not empty; ", Hint::Recursive],
            Hint::Recursive,
        )
    }

    /// An OS error: only its kind's description reaches the text; the error itself is kept as
    /// the source for operator logs. A read that found its object replaced midway
    /// ([`ChangedDuringRead`]), and a name found gone when the store acted on it, are
    /// [`ErrorKind::Changed`].
    pub(crate) fn io(path: &VirtualPath, error: std::io::Error) -> Self {
        // A name the gate found that is gone when the store acts on it (a directory another
        // call removed between the two) changed during the call; it is not a host failure.
        if error.kind() == std::io::ErrorKind::NotFound
            || error.get_ref().is_some_and(<dyn std::error::Error + Send + Sync>::is::<ChangedDuringRead>)
        {
            return Self::changed_during_call(path);
        }
        let kind = error.kind();
        let description = match kind {
            std::io::ErrorKind::PermissionDenied => "the host refused access".to_owned(),
            std::io::ErrorKind::StorageFull => "the disk is full".to_owned(),
            std::io::ErrorKind::ReadOnlyFilesystem => "the host file system is read-only".to_owned(),
            std::io::ErrorKind::InvalidData => "the file is not valid UTF-8 text".to_owned(),
            other => format!("the host reported: {}", describe_io_kind(other)),
        };
        let message = agent_text![code(path), ": ", description];
        Self(Arc::new(Inner { source: Some(error), ..Inner::new(ErrorKind::Io, Some(path.clone()), message) }))
    }

    /// An object store that kept failing after retries. The store's own error is logged for
    /// the operator; its text names the bucket and endpoint, so none of it is shown here.
    #[cfg(feature = "s3")]
    pub(crate) fn store_failed(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Io,
            Some(path),
            agent_text![code(path), ": the object store failed (after retries); try again later"],
        )
    }

    /// An object store listing that stopped at a key vfs cannot name (another tool wrote it).
    /// The key is physical (it carries the mount's prefix): logged for the operator only.
    #[cfg(feature = "s3")]
    pub(crate) fn store_bad_key(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Io,
            Some(path),
            agent_text![
                code(path),
                ": the object store holds a name here that no path can spell (an empty, `.` or `..` part, or a control character), which stops its listing; ask the operator to rename or remove it"
            ],
        )
    }

    /// A call stopped at its time budget: names the operation and what to narrow
    /// ([`Hint::Narrow`]).
    pub(crate) fn timed_out(operation: Operation, seconds: u64) -> Self {
        let hint = Hint::Narrow(operation);
        let message =
            agent_text!["`", operation, format!("` ran past its {seconds} s time budget and was stopped; "), hint];
        Self::build_hinted(ErrorKind::TimedOut, None, message, hint)
    }

    /// A call stopped at its time budget while it waited for another call's claim on a place
    /// that holds or lies inside one of its `paths` (a move or a delete, ADR 0006): nothing of
    /// its own to narrow.
    pub(crate) fn timed_out_waiting(operation: Operation, seconds: u64, paths: &[&VirtualPath]) -> Self {
        let stopped = format!(
            "` was stopped at its {seconds} s time budget while it waited for another call moving or deleting "
        );
        let answered = "; try again once that call has answered";
        let message = if let [one, other] = paths {
            agent_text![
                "`",
                operation,
                stopped,
                code(one),
                " or ",
                code(other),
                ", a directory above one of them or something inside one",
                answered
            ]
        } else {
            agent_text![
                "`",
                operation,
                stopped,
                code(paths[0]),
                ", a directory above it or something inside it",
                answered
            ]
        };
        Self::build(ErrorKind::TimedOut, paths.first().copied(), message)
    }

    /// A call its caller cancelled (an MCP client sends no answer for it).
    pub(crate) fn cancelled() -> Self {
        Self::build(ErrorKind::Cancelled, None, agent_text!["the call was cancelled"])
    }

    /// A change refused because the journal of changes could not record it (its log or its
    /// images could not be written): nothing was changed. The reason is the operator's
    /// (their log), never the agent's.
    #[must_use]
    pub fn not_journaled(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Io,
            Some(path),
            agent_text![
                code(path),
                " was not changed: vfs could not record the change in its journal (where every change is kept so that it can be undone); tell the operator, whose log says why"
            ],
        )
    }

    /// A recursive delete, with the journal on, that stopped at `file` because its record
    /// could not be kept (the journal's disk is full, its images cannot be written): what it
    /// removed before is recorded, each file a change of its own.
    pub(crate) fn not_journaled_in_tree(top: &VirtualPath, file: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Io,
            Some(top),
            agent_text![
                code(top),
                " was not deleted whole: vfs could not record the deletion of ",
                code(file),
                " in its journal (where every change is kept so that it can be undone), so it stopped there; anything it deleted before can be undone; tell the operator, whose log says why"
            ],
        )
    }

    /// A recursive delete, with the journal on, that met a file with other hard links: its
    /// image could not be kept whole with the tree's, so the delete stopped there.
    pub(crate) fn linked_in_tree(top: &VirtualPath, file: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Unsupported,
            Some(top),
            agent_text![
                code(top),
                " was not deleted whole: ",
                code(file),
                " has other hard links, and the journal of changes keeps a deleted tree only when it can keep each of its files; delete that file by itself first (what this delete removed before it can be undone)"
            ],
        )
    }

    pub(crate) fn changed_during_call(path: &VirtualPath) -> Self {
        Self::build(
            ErrorKind::Changed,
            Some(path),
            agent_text![code(path), " changed while vfs was working on it; try again"],
        )
    }
}

/// Inside an I/O error: what was being read was replaced by another version midway.
#[derive(Debug)]
pub(crate) struct ChangedDuringRead;

impl fmt::Display for ChangedDuringRead {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("changed during the read")
    }
}

impl std::error::Error for ChangedDuringRead {}

/// `io::ErrorKind`'s Display is fixed wording without paths; we still spell out the common ones
/// so that the text does not depend on the standard library version.
fn describe_io_kind(kind: std::io::ErrorKind) -> String {
    match kind {
        std::io::ErrorKind::NotFound => "not found".to_owned(),
        std::io::ErrorKind::AlreadyExists => "already exists".to_owned(),
        std::io::ErrorKind::Interrupted => "interrupted".to_owned(),
        std::io::ErrorKind::UnexpectedEof => "unexpected end of file".to_owned(),
        other => other.to_string(),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.message, formatter)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Error")
            .field("kind", &self.0.kind)
            .field("path", &self.0.path)
            .field("message", &self.0.message)
            .field("hint", &self.0.hint)
            .finish_non_exhaustive()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source.as_ref().map(|error| error as &(dyn std::error::Error + 'static))
    }
}

impl From<ParsePathError> for Error {
    fn from(error: ParsePathError) -> Self {
        Self::invalid_path(&error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_never_carry_os_text_with_paths() {
        let path = VirtualPath::new("/src/a").unwrap();
        let os = std::io::Error::other("open /home/secret/a failed");
        let error = Error::io(&path, os);
        assert_eq!(error.to_string(), "`/src/a`: the host reported: other error");
        assert!(std::error::Error::source(&error).is_some());
    }

    #[test]
    fn an_error_carries_the_hint_its_text_says() {
        let path = VirtualPath::new("/w/a").unwrap();
        let cases = [
            (Error::already_exists(&path), Some(Hint::Overwrite)),
            (Error::not_empty(&path), Some(Hint::Recursive)),
            (Error::edit_mismatch(&path, 1, 2), Some(Hint::ReplaceAll)),
            (Error::timed_out(Operation::Tree, 3), Some(Hint::Narrow(Operation::Tree))),
            (Error::edit_mismatch(&path, 1, 0), None),
            (Error::exists(&path), None),
            (Error::version_mismatch(&path, "v2"), None),
            (Error::not_found(&path), None),
        ];
        for (error, hint) in cases {
            assert_eq!(error.hint(), hint, "{error}");
            assert_eq!(error.agent_text().hints().collect::<Vec<_>>(), Vec::from_iter(hint), "{error}");
        }
        assert_eq!(Error::already_exists(&path).unmet(), Some(Unmet::Absent));
        assert_eq!(
            Error::already_exists(&path).to_string(),
            "`/w/a` already exists; ask for an overwrite to replace it"
        );
        assert_eq!(
            Error::timed_out(Operation::Tree, 3).to_string(),
            "`tree` ran past its 3 s time budget and was stopped; ask for less depth, more exclude patterns or a deeper path"
        );
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static>() {}
        check::<Error>();
    }
}
