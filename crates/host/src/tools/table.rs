//! The tool table: each tool's name, title, description, annotations, schemas and handler,
//! in the order of `docs/tools.md`, and the MCP `Tool` made of each.

use std::sync::{Arc, LazyLock};

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use vfs::AgentAccessor;

use super::handlers::{
    run_create_directory, run_delete_file, run_directory_tree, run_edit_file, run_get_file_info, run_grep,
    run_list_allowed_directories, run_list_directory, run_list_directory_with_sizes, run_list_mounts, run_move_file,
    run_read_media_file, run_read_multiple_files, run_read_text_file, run_search_files, run_write_file,
};
use super::params::{
    DeleteFileArgs, DirectoryTreeArgs, EditFileArgs, GrepArgs, ListMountsArgs, MoveFileArgs, PathArgs,
    ReadMultipleFilesArgs, ReadTextFileArgs, SearchFilesArgs, SizedListArgs, WriteFileArgs,
};
use super::schemas::{AllowedOutput, FilesOutput, MediaOutput, MountsOutput, input, output, text_read_output};
use super::{ToolOutput, ToolService, run, undo};

/// How a tool behaves, for the MCP annotations.
#[derive(Debug, Clone, Copy)]
pub(super) enum Effect {
    /// Reads only.
    Read,
    /// Changes files; (destructive, idempotent).
    Write { destructive: bool, idempotent: bool },
}

pub(super) struct Definition {
    pub(super) name: &'static str,
    pub(super) title: &'static str,
    pub(super) description: &'static str,
    pub(super) effect: Effect,
    pub(super) input: fn() -> JsonObject,
    pub(super) output: fn() -> JsonObject,
    /// Runs the tool as the given agent, on arguments checked against `input`.
    pub(super) run: Run,
}

pub(super) type Run = fn(&ToolService, &AgentAccessor, &Value) -> Result<ToolOutput, String>;

/// The tools listed only with a journal (`--journal`).
pub(super) const JOURNAL_TOOLS: [&str; 2] = ["list_changes", "undo_changes"];

pub(super) const DEFINITIONS: [Definition; 19] = [
    Definition {
        name: "list_mounts",
        title: "List mounts",
        description: "List the mounts you can use: each virtual root (like /src) with its rights (ro, rw, rwnd) and any sub-path overrides. Start here to learn where files are.",
        effect: Effect::Read,
        input: input::<ListMountsArgs>,
        output: output::<MountsOutput>,
        run: run_list_mounts,
    },
    Definition {
        name: "read_text_file",
        title: "Read a text file",
        description: "Read a UTF-8 text file, whole or a window of lines (head, tail, or offset and limit). A file is cut at the read limit (256 KiB by default), and the result says how to read on.",
        effect: Effect::Read,
        input: input::<ReadTextFileArgs>,
        output: text_read_output,
        run: run_read_text_file,
    },
    Definition {
        name: "read_multiple_files",
        title: "Read several text files",
        description: "Read several text files in one call. Each file gets its own result; a file that fails shows its error in place and does not stop the others.",
        effect: Effect::Read,
        input: input::<ReadMultipleFilesArgs>,
        output: output::<FilesOutput>,
        run: run_read_multiple_files,
    },
    Definition {
        name: "read_media_file",
        title: "Read an image, audio or other binary file",
        description: "Read an image or audio file and return it as base64 image or audio content with its MIME type; any other file comes as an embedded resource (a base64 blob, URI `vfs:` and its path). Up to the media size limit.",
        effect: Effect::Read,
        input: input::<PathArgs>,
        output: output::<MediaOutput>,
        run: run_read_media_file,
    },
    Definition {
        name: "write_file",
        title: "Write a file",
        description: "Create a file, or replace one with `overwrite: true`, atomically. Missing parent directories are created. Pass `expectedVersion` to write only if nobody changed the file since you read it.",
        effect: Effect::Write { destructive: true, idempotent: true },
        input: input::<WriteFileArgs>,
        output: output::<vfs::WriteOutcome>,
        run: run_write_file,
    },
    Definition {
        name: "edit_file",
        title: "Edit a file",
        description: "Replace exact text in a file and get a unified diff back. Each `oldText` must match exactly one place (or pass `replaceAll: true`); `dryRun: true` shows the diff without writing.",
        effect: Effect::Write { destructive: true, idempotent: false },
        input: input::<EditFileArgs>,
        output: output::<vfs::EditOutcome>,
        run: run_edit_file,
    },
    Definition {
        name: "create_directory",
        title: "Create a directory",
        description: "Create a directory and any missing parents. Succeeds if it already exists.",
        effect: Effect::Write { destructive: false, idempotent: true },
        input: input::<PathArgs>,
        output: output::<vfs::CreateDirOutcome>,
        run: run_create_directory,
    },
    Definition {
        name: "list_directory",
        title: "List a directory",
        description: "List a directory's entries (at most 2,000), each marked [FILE] or [DIR]. The path `/` lists the mounts.",
        effect: Effect::Read,
        input: input::<PathArgs>,
        output: output::<vfs::Listing>,
        run: run_list_directory,
    },
    Definition {
        name: "directory_tree",
        title: "Show a directory tree",
        description: "Show a directory's contents recursively (at most 2,000 entries and 32 levels); leave names out with `excludePatterns`.",
        effect: Effect::Read,
        input: input::<DirectoryTreeArgs>,
        output: output::<vfs::Tree>,
        run: run_directory_tree,
    },
    Definition {
        name: "search_files",
        title: "Find files by name",
        description: "Find files and directories under a path whose names match a glob pattern, like `*.rs`. Returns virtual paths (at most 2,000).",
        effect: Effect::Read,
        input: input::<SearchFilesArgs>,
        output: output::<vfs::NameSearch>,
        run: run_search_files,
    },
    Definition {
        name: "grep",
        title: "Search file contents",
        description: "Search file contents with a regular expression (or literal text), honouring .gitignore and skipping binary files. Returns matching lines with virtual paths and line numbers.",
        effect: Effect::Read,
        input: input::<GrepArgs>,
        output: output::<vfs::GrepResult>,
        run: run_grep,
    },
    Definition {
        name: "get_file_info",
        title: "Get file information",
        description: "Get a file's or directory's size, kind, modification time, your rights there, and (for files) its version token.",
        effect: Effect::Read,
        input: input::<PathArgs>,
        output: output::<vfs::FileInfo>,
        run: run_get_file_info,
    },
    Definition {
        name: "move_file",
        title: "Move or rename",
        description: "Move or rename a file or directory. An existing destination is refused unless `overwrite: true`. Needs write at the destination and delete at the source.",
        effect: Effect::Write { destructive: true, idempotent: false },
        input: input::<MoveFileArgs>,
        output: output::<vfs::MoveOutcome>,
        run: run_move_file,
    },
    Definition {
        name: "delete_file",
        title: "Delete a file or directory",
        description: "Delete a file, or a directory (a non-empty one only with `recursive: true`). Needs the delete right; links are removed, never followed.",
        effect: Effect::Write { destructive: true, idempotent: true },
        input: input::<DeleteFileArgs>,
        output: output::<vfs::DeleteOutcome>,
        run: run_delete_file,
    },
    Definition {
        name: "list_changes",
        title: "List your changes",
        description: "List the changes you made in this session, newest first, each with its id, operation, paths, time and whether it can be undone. Listed only when the operator keeps a journal.",
        effect: Effect::Read,
        input: input::<undo::ListChangesArgs>,
        output: output::<undo::ChangesOutput>,
        run: undo::run_list_changes,
    },
    Definition {
        name: "undo_changes",
        title: "Undo your changes",
        description: "Undo your newest changes of this session (`count`, default 1), or back to `changeId`, included. Each path is put back only if it still holds what your change left; otherwise it is reported as a conflict and left as it is. An undo can be undone.",
        effect: Effect::Write { destructive: true, idempotent: false },
        input: input::<undo::UndoChangesArgs>,
        output: output::<undo::UndoOutput>,
        run: undo::run_undo_changes,
    },
    // The reference filesystem server's names, so that prompts written for it work here.
    Definition {
        name: "read_file",
        title: "Read a text file (alias)",
        description: "Deprecated alias of `read_text_file` (the reference server's old name): the same arguments and result.",
        effect: Effect::Read,
        input: input::<ReadTextFileArgs>,
        output: text_read_output,
        run: run_read_text_file,
    },
    Definition {
        name: "list_directory_with_sizes",
        title: "List a directory with sizes",
        description: "List a directory's entries (at most 2,000) with each file's size and the totals; `sortBy: \"size\"` puts the largest first.",
        effect: Effect::Read,
        input: input::<SizedListArgs>,
        output: output::<vfs::SizedListing>,
        run: run_list_directory_with_sizes,
    },
    Definition {
        name: "list_allowed_directories",
        title: "List allowed directories",
        description: "List the virtual roots you can use, one per line (the reference server's name; `list_mounts` adds the rights).",
        effect: Effect::Read,
        input: input::<ListMountsArgs>,
        output: output::<AllowedOutput>,
        run: run_list_allowed_directories,
    },
];

/// `run_command`, listed only where the launch started a sandbox (`--allow-run`).
pub(super) static RUN_COMMAND: Definition = Definition {
    name: "run_command",
    title: "Run a shell command",
    description: "Run a shell command (`/bin/sh -c`) in a sandbox whose only files are your mounts, at the same virtual paths and with the same rights as the file tools, beside the system's programs and a fresh `/tmp` and `HOME`; no network. Answers with the exit status, then the end of stdout and of stderr (at most 256 KiB each). The time limit (default 60 s) and a cancellation kill every process the command started.",
    effect: Effect::Write { destructive: true, idempotent: false },
    input: input::<run::RunCommandArgs>,
    output: output::<run::RunCommandOutput>,
    run: run_run_command,
};

pub(super) static RUN_TOOL: LazyLock<Tool> = LazyLock::new(|| to_tool(&RUN_COMMAND));

pub(super) fn run_run_command(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    match &tools.runner {
        Some(runner) => run::run(runner, agent, arguments),
        None => Err("`run_command` is not offered by this launch".to_owned()),
    }
}

pub(super) fn to_tool(definition: &Definition) -> Tool {
    let annotations = match definition.effect {
        Effect::Read => ToolAnnotations::with_title(definition.title)
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
        Effect::Write { destructive, idempotent } => ToolAnnotations::with_title(definition.title)
            .read_only(false)
            .destructive(destructive)
            .idempotent(idempotent)
            .open_world(false),
    };
    let mut tool = Tool::new(definition.name, definition.description, Arc::new((definition.input)()));
    tool.output_schema = Some(Arc::new((definition.output)()));
    tool.title = Some(definition.title.to_owned());
    tool.annotations = Some(annotations);
    tool
}

/// Every tool with its schemas, made once.
pub(super) static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| DEFINITIONS.iter().map(to_tool).collect());

/// Every tool, write tools included, in the order of `docs/tools.md` (the aliases last).
#[must_use]
pub fn all_tools() -> Vec<Tool> {
    let mut tools = TOOLS.clone();
    tools.push(RUN_TOOL.clone());
    tools
}
