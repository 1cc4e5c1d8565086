//! What the core says to do next, and what it calls its operations and their arguments, as
//! values: a front end words them.
//!
//! The core serves more than one front end (the MCP tools, the FUSE view, the CLI), and each
//! names things its own way: the MCP surface says `overwrite: true` and `read_text_file`, a
//! file system says nothing of the kind. So the core never writes a front end's names into its
//! texts. Where a text refers to an operation ([`Operation`]) or one of its arguments
//! ([`Argument`]), or says what to do next ([`Hint`]), it carries the value, and the front end
//! that renders the text gives the words ([`Wording`]; the core's own, for `Display`, is
//! [`Neutral`]). A hint is also carried where a caller can match on it:
//! [`Error::hint`](crate::Error::hint), and the notes of a cut result
//! ([`AgentText::hints`](crate::AgentText::hints)).

/// An operation of the core, by its own name: what the audit records, what a call's budget
/// is for, and what an out-of-time error names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation {
    /// A text file read, whole or a window of lines.
    ReadText,
    /// Several text files read in one call.
    ReadMultiple,
    /// An image or audio file read as base64.
    ReadMedia,
    /// A whole-file write, or a staged one and its commit.
    Write,
    /// A file put back as it was (an undo).
    Restore,
    /// Exact-text edits of a file.
    Edit,
    /// A directory made, with its parents.
    CreateDirectory,
    /// A directory listed.
    List,
    /// A directory listed with sizes.
    ListSized,
    /// A bounded recursive tree.
    Tree,
    /// A search of names by glob.
    SearchNames,
    /// A search of contents by regular expression.
    Grep,
    /// A file's or directory's information.
    Info,
    /// A move or rename.
    Move,
    /// A delete.
    Delete,
    /// A view's attributes of a path.
    Attributes,
    /// Bytes of a file at an offset.
    ReadAt,
    /// A view's entries of a directory.
    Entries,
    /// A file opened for reads at offsets.
    OpenRead,
    /// A file opened for appends.
    OpenAppend,
    /// A directory made a keeper of before images.
    Keeper,
    /// The temporary files of stages cut short, removed from a directory.
    RemoveStages,
}

impl Operation {
    /// The core's name of the operation (the audit's `operation` field).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Operation::ReadText => "read_text",
            Operation::ReadMultiple => "read_multiple",
            Operation::ReadMedia => "read_media",
            Operation::Write => "write",
            Operation::Restore => "restore",
            Operation::Edit => "edit",
            Operation::CreateDirectory => "create_directory",
            Operation::List => "list",
            Operation::ListSized => "list_sized",
            Operation::Tree => "tree",
            Operation::SearchNames => "search_names",
            Operation::Grep => "grep",
            Operation::Info => "info",
            Operation::Move => "move",
            Operation::Delete => "delete",
            Operation::Attributes => "attributes",
            Operation::ReadAt => "read_at",
            Operation::Entries => "entries",
            Operation::OpenRead => "open_read",
            Operation::OpenAppend => "open_append",
            Operation::Keeper => "keeper",
            Operation::RemoveStages => "remove_stages",
        }
    }
}

/// An argument of an operation that a text refers to, by what it is in the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Argument {
    /// The path searched ([`GrepRequest::path`](crate::GrepRequest::path), a tree's or a name search's path).
    Path,
    /// The paths of a read of several files.
    Paths,
    /// A search's pattern.
    Pattern,
    /// The content search's glob of names ([`GrepRequest::include`](crate::GrepRequest::include)).
    Include,
    /// The content search's bound on matches ([`GrepRequest::max_results`](crate::GrepRequest::max_results)).
    MaxResults,
    /// [`ReadWindow::head`](crate::ReadWindow::head).
    Head,
    /// [`ReadWindow::tail`](crate::ReadWindow::tail).
    Tail,
    /// [`ReadWindow::offset`](crate::ReadWindow::offset).
    Offset,
    /// [`ReadWindow::limit`](crate::ReadWindow::limit).
    Limit,
    /// The edits of an edit.
    Edits,
    /// [`Edit::old_text`](crate::Edit::old_text).
    OldText,
    /// [`Edit::new_text`](crate::Edit::new_text).
    NewText,
    /// A tree's depth bound.
    MaxDepth,
    /// The exclude patterns of a tree or a name search.
    Excludes,
}

impl Argument {
    /// The core's name of the argument.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Argument::Path => "path",
            Argument::Paths => "paths",
            Argument::Pattern => "pattern",
            Argument::Include => "include",
            Argument::MaxResults => "max_results",
            Argument::Head => "head",
            Argument::Tail => "tail",
            Argument::Offset => "offset",
            Argument::Limit => "limit",
            Argument::Edits => "edits",
            Argument::OldText => "old_text",
            Argument::NewText => "new_text",
            Argument::MaxDepth => "max_depth",
            Argument::Excludes => "excludes",
        }
    }
}

/// What the caller can do next, as a value a front end words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Hint {
    /// Something is at the place: the change may be asked to replace it (a write's or a
    /// move's [`Precondition::Any`](crate::Precondition::Any)).
    Overwrite,
    /// An edit's old text matches several places: make it unique, or replace every one
    /// ([`EditOptions::replace_all`](crate::EditOptions::replace_all)).
    ReplaceAll,
    /// A directory is not empty: a delete may be asked to take its contents too (`recursive`).
    Recursive,
    /// A pattern is not a regular expression the search can use: search for it as literal
    /// text ([`GrepRequest::literal`](crate::GrepRequest::literal)).
    Literal,
    /// A call of this operation ran out of time: what to ask for less of.
    Narrow(Operation),
    /// A result of this operation was cut at its bound: how to ask for less (or more).
    Truncated(Operation),
}

/// How a front end words what the core refers to. The words are composed text: they pass
/// the registry's scrub with the wording around them.
pub trait Wording {
    /// The name of `operation`.
    fn operation(&self, operation: Operation) -> &'static str;
    /// The name of `argument`.
    fn argument(&self, argument: Argument) -> &'static str;
    /// The clause that says `hint`, to stand after a `; ` (lower case, no final stop).
    fn hint(&self, hint: Hint) -> &'static str;
}

/// The core's own wording: its names, and hints said without any front end's names. What
/// `Display` of an [`AgentText`](crate::AgentText) or an [`Error`](crate::Error) shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Neutral;

impl Wording for Neutral {
    fn operation(&self, operation: Operation) -> &'static str {
        operation.name()
    }

    fn argument(&self, argument: Argument) -> &'static str {
        argument.name()
    }

    fn hint(&self, hint: Hint) -> &'static str {
        match hint {
            Hint::Overwrite => "ask for an overwrite to replace it",
            Hint::ReplaceAll => "add surrounding lines to make it unique, or ask to replace every occurrence",
            Hint::Recursive => "ask for a recursive delete to delete it with its contents",
            Hint::Literal => "ask for a literal search to search for the text as written",
            Hint::Narrow(Operation::Grep) => "narrow it with a deeper path, a glob of names or a more specific pattern",
            Hint::Narrow(Operation::Tree) | Hint::Truncated(Operation::Tree) => {
                "ask for less depth, more exclude patterns or a deeper path"
            }
            Hint::Narrow(Operation::SearchNames) => "search below a deeper path, or with a more specific pattern",
            Hint::Narrow(Operation::ReadText | Operation::ReadMultiple) => "read a window nearer the start",
            Hint::Narrow(Operation::Edit) => "make fewer or smaller edits",
            Hint::Truncated(Operation::Grep) => {
                "narrow it with a deeper path, a glob of names or a more specific pattern, or ask for more matches"
            }
            Hint::Truncated(Operation::SearchNames) => "use a more specific pattern or path",
            Hint::Truncated(Operation::List | Operation::ListSized | Operation::Entries) => {
                "narrow with a search of names"
            }
            Hint::Narrow(_) | Hint::Truncated(_) => "narrow the request",
        }
    }
}
