//! The MCP surface's words for what the core refers to: its operations by tool name, their
//! arguments as the tools' schemas spell them, and its hints as what an agent passes to a tool.
//!
//! The core carries values ([`vfs::Operation`], [`vfs::Argument`], [`vfs::Hint`]) and never
//! these names; every agent text the tools render goes through [`Mcp`].

use vfs::{Argument, Hint, Operation, Wording};

/// The MCP tools' wording.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mcp;

impl Wording for Mcp {
    fn operation(&self, operation: Operation) -> &'static str {
        match operation {
            Operation::ReadText => "read_text_file",
            Operation::ReadMultiple => "read_multiple_files",
            Operation::ReadMedia => "read_media_file",
            Operation::Write => "write_file",
            Operation::Edit => "edit_file",
            Operation::CreateDirectory => "create_directory",
            Operation::List => "list_directory",
            Operation::ListSized => "list_directory_with_sizes",
            Operation::Tree => "directory_tree",
            Operation::SearchNames => "search_files",
            Operation::Grep => "grep",
            Operation::Info => "get_file_info",
            Operation::Move => "move_file",
            Operation::Delete => "delete_file",
            // No tool of its own: the core's name.
            other => other.name(),
        }
    }

    fn argument(&self, argument: Argument) -> &'static str {
        match argument {
            Argument::MaxResults => "maxResults",
            Argument::OldText => "oldText",
            Argument::NewText => "newText",
            Argument::MaxDepth => "maxDepth",
            Argument::Excludes => "excludePatterns",
            // The tools' schemas spell the others as the core does.
            other => other.name(),
        }
    }

    fn hint(&self, hint: Hint) -> &'static str {
        match hint {
            Hint::Overwrite => "pass `overwrite: true` to replace it",
            Hint::ReplaceAll => "add surrounding lines to make it unique, or pass `replaceAll: true`",
            Hint::Recursive => "pass `recursive: true` to delete it with its contents",
            Hint::Literal => "pass `literal: true` to search for the text as written",
            Hint::Narrow(Operation::Grep) => "narrow it with `path`, `include` or a more specific pattern",
            Hint::Narrow(Operation::Tree) => "pass a smaller `maxDepth`, `excludePatterns` or a deeper `path`",
            Hint::Narrow(Operation::SearchNames) => "search below a deeper `path`, or with a more specific pattern",
            Hint::Narrow(Operation::ReadText | Operation::ReadMultiple) => {
                "read a window nearer the start (`head`, or `offset` and `limit`)"
            }
            Hint::Narrow(Operation::Edit) => "make fewer or smaller edits",
            Hint::Truncated(Operation::Grep) => {
                "narrow with `path`, `include` or a more specific pattern, or raise `maxResults`"
            }
            Hint::Truncated(Operation::Tree) => "pass a smaller maxDepth, excludePatterns, or a deeper path",
            Hint::Truncated(Operation::SearchNames) => "use a more specific pattern or path",
            Hint::Truncated(Operation::List | Operation::ListSized | Operation::Entries) => "narrow with search_files",
            // `Hint` is non-exhaustive: a hint this surface does not know yet is said plainly.
            _ => "narrow the request",
        }
    }
}

/// An error's text in the tools' words, unscrubbed: for a line that is scrubbed with the text
/// it goes into, or that only ever holds virtual paths (an undo's report).
pub(crate) fn error_text(error: &vfs::Error) -> String {
    error.agent_text().to_string_with(&Mcp)
}

/// Words the structured `next` of a text read (`read`, a serialized [`vfs::TextRead`]) in the
/// tools' words: the core serializes it in its own.
#[cfg(feature = "mcp")]
pub(crate) fn word_read_on(read: &mut serde_json::Value, next: Option<vfs::ReadOn>) {
    if let (Some(next), serde_json::Value::Object(fields)) = (next, read) {
        fields.insert("next".to_owned(), serde_json::Value::String(next.agent_text().to_string_with(&Mcp)));
    }
}
