//! The agent tools of `docs/design.md` (contracts) and `docs/tools.md`: names, argument schemas, annotations, and one dispatcher.
//!
//! The MCP server and `vfs call` both go through [`ToolService::call`], so what `vfs call`
//! prints is exactly what an agent would see. Text is rendered from [`vfs::AgentText`]: what
//! the server composed passes the registry's fail-closed scrub on the way out; file contents,
//! names read from disk and the agent's own input pass byte for byte (rewriting them would lose
//! data, and tell an agent which guessed paths are real). Structured content carries the exact
//! values; the error texts in it are rendered like the text content.

use std::sync::{Arc, LazyLock};
use std::time::{Instant, SystemTime};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaGenerator, SchemaSettings};
use serde::Deserialize;
use serde_json::{Value, json};
use vfs::{AgentAccessor, MountRegistry};

use crate::logger::{Exchange, ExchangeLogger, stamp};

mod arguments;
pub(crate) mod run;
mod session;
mod undo;
pub(crate) mod words;

#[derive(Debug, Deserialize, JsonSchema)]
struct ListMountsArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ReadTextFileArgs {
    /// Virtual path of the file, like `/src/main.rs`.
    path: String,
    /// Return only the first N lines.
    head: Option<u64>,
    /// Return only the last N lines.
    tail: Option<u64>,
    /// First line to return (1-based); pairs with `limit`.
    offset: Option<u64>,
    /// Most lines to return, from `offset` (or the start).
    limit: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ReadMultipleFilesArgs {
    /// Virtual paths of the files; each gets its own result, and a failure does not stop the others.
    paths: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct PathArgs {
    /// Virtual path, like `/src/docs`.
    path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct WriteFileArgs {
    /// Virtual path of the file to write; missing parent directories are created.
    path: String,
    /// The complete new content.
    content: String,
    /// Replace the file if it exists (default false: an existing file is refused).
    #[serde(default)]
    overwrite: bool,
    /// Write only if the file's current version is this token (from a read or `get_file_info`).
    expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EditArg {
    /// Text to find, exactly as it is in the file.
    old_text: String,
    /// Text to put in its place (literal: `$1` stays `$1`).
    new_text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EditFileArgs {
    /// Virtual path of the file to edit.
    path: String,
    /// Replacements, applied in order; each `oldText` must match exactly one place unless `replaceAll`.
    edits: Vec<EditArg>,
    /// Replace every occurrence of each `oldText` (default false).
    #[serde(default)]
    replace_all: bool,
    /// Show the diff without writing (default false).
    #[serde(default)]
    dry_run: bool,
    /// Edit only if the file's current version is this token.
    expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DirectoryTreeArgs {
    /// Virtual path of the directory.
    path: String,
    /// How deep to descend (default and at most 32 levels).
    max_depth: Option<usize>,
    /// Glob patterns of names or relative paths to leave out, like `target` or `*.log`.
    #[serde(default)]
    exclude_patterns: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SearchFilesArgs {
    /// Virtual path of the directory to search under.
    path: String,
    /// Glob pattern on names (or relative paths, if it contains `/`), like `*.rs`.
    pattern: String,
    /// Glob patterns to leave out.
    #[serde(default)]
    exclude_patterns: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct GrepArgs {
    /// Regular expression (or literal text with `literal`).
    pattern: String,
    /// Directory or file to search (default `/`: every mount).
    path: Option<String>,
    /// Only files whose name matches this glob, like `*.rs`.
    include: Option<String>,
    /// Match regardless of case (default false).
    #[serde(default)]
    case_insensitive: bool,
    /// Treat `pattern` as literal text (default false).
    #[serde(default)]
    literal: bool,
    /// Lines of context before and after each match (default 0, at most 20).
    context: Option<usize>,
    /// Most matches to return (default 200, at most 1,000).
    max_results: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct MoveFileArgs {
    /// Virtual path of the file or directory to move.
    source: String,
    /// Virtual path to move it to.
    destination: String,
    /// Replace an existing destination (default false).
    #[serde(default)]
    overwrite: bool,
    /// Move only if the source file's version is still this one (from `get_file_info`).
    expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DeleteFileArgs {
    /// Virtual path of the file or directory to delete.
    path: String,
    /// Delete a non-empty directory with its contents (default false).
    #[serde(default)]
    recursive: bool,
    /// Delete only if the file's version is still this one (from `get_file_info`).
    expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct SizedListArgs {
    /// Virtual path of the directory, like `/src/docs`.
    path: String,
    /// `name` (the default) or `size` (largest first).
    sort_by: Option<SortKey>,
}

/// How `list_directory_with_sizes` sorts.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum SortKey {
    Name,
    Size,
}

/// `list_mounts`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
struct MountsOutput {
    /// The mounts you can use.
    mounts: Vec<vfs::MountInfo>,
}

/// `list_allowed_directories`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
struct AllowedOutput {
    /// The virtual roots you can use.
    directories: Vec<String>,
}

/// `read_media_file`'s structured content (the data is in the image or audio content).
#[derive(Debug, serde::Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct MediaOutput {
    /// The virtual path read.
    path: vfs::VirtualPath,
    /// The MIME type.
    mime_type: String,
    /// Size in bytes.
    size: u64,
}

/// `read_multiple_files`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
struct FilesOutput {
    /// One result per path, in the order given.
    files: Vec<FileOutput>,
}

/// One file of `read_multiple_files`.
#[derive(Debug, serde::Serialize, JsonSchema)]
struct FileOutput {
    /// The path as given.
    path: String,
    /// True when the file was read.
    ok: bool,
    /// What was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    read: Option<vfs::TextRead>,
    /// Why it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// How a tool behaves, for the MCP annotations.
#[derive(Debug, Clone, Copy)]
enum Effect {
    /// Reads only.
    Read,
    /// Changes files; (destructive, idempotent).
    Write { destructive: bool, idempotent: bool },
}

struct Definition {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    effect: Effect,
    input: fn() -> JsonObject,
    output: fn() -> JsonObject,
    /// Runs the tool as the given agent, on arguments checked against `input`.
    run: Run,
}

type Run = fn(&ToolService, &AgentAccessor, &Value) -> Result<ToolOutput, String>;

/// A generator of portable schemas: subschemas inline, no `$schema` keyword.
fn generator(contract: Contract) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    settings.contract = contract;
    settings.into_generator()
}

/// The schema of a tool's arguments.
fn input<T: JsonSchema>() -> JsonObject {
    portable(generator(Contract::Deserialize).into_root_schema_for::<T>())
}

/// The schema of a tool's structured content. The fields of the result are typed; a list is
/// typed as a list, and its items are described in one line, not given a schema: a client that
/// validates every result (the Python SDK does, in Python) would otherwise spend more time on
/// a listing than the server spends making it (ADR 0004).
fn output<T: JsonSchema>() -> JsonObject {
    let mut schema = portable(generator(Contract::Serialize).into_root_schema_for::<T>());
    schema.remove("$defs");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for field in properties.values_mut() {
            describe_items(field);
            if let Some(field) = field.as_object_mut() {
                // A count is never negative; validating that costs every result a keyword.
                field.remove("minimum");
            }
        }
    }
    schema
}

/// A list's item schema folded into the list's description: `… Each: `kind` (one of …): …;
/// `name` (string): ….`, or `(strings)`.
fn describe_items(schema: &mut Value) {
    let Some(list) = schema.as_object_mut() else { return };
    let Some(Value::Object(items)) = list.remove("items") else { return };
    let what = list.get("description").and_then(Value::as_str).unwrap_or("").trim_end_matches('.').to_owned();
    let described = match items.get("properties") {
        Some(Value::Object(fields)) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, field)| {
                    let kind = match (
                        field.get("type").and_then(Value::as_str),
                        field.get("enum").and_then(Value::as_array),
                    ) {
                        (_, Some(choices)) => {
                            let words: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
                            format!("one of {}", words.join(", "))
                        }
                        (Some(kind), None) => kind.to_owned(),
                        (None, None) => "object".to_owned(),
                    };
                    let about = field.get("description").and_then(Value::as_str).unwrap_or("").trim_end_matches('.');
                    format!("`{name}` ({kind}): {about}")
                })
                .collect();
            format!("{what}. Each is an object: {}.", fields.join("; "))
        }
        _ => match items.get("type").and_then(Value::as_str) {
            Some(kind) => format!("{what} ({kind}s)."),
            None => format!("{what}."),
        },
    };
    list.insert("description".to_owned(), json!(described));
}

/// `read_text_file`'s structured content: a [`vfs::TextRead`] without the text, which goes
/// once, as text content.
fn text_read_output() -> JsonObject {
    let mut schema = output::<vfs::TextRead>();
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.remove("content");
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| name != "content");
    }
    schema
}

/// Makes a generated schema portable across MCP clients: an optional argument is one that is
/// not required (no `["integer", "null"]` type arrays, no `anyOf` with `null`), no `format`
/// values beyond the standard ones (`uint64` is Rust's), no Rust type names as titles, and
/// unknown keys allowed (they are ignored, with a note).
fn portable(schema: schemars::Schema) -> JsonObject {
    let mut value = schema.to_value();
    clean(&mut value);
    let mut map = match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    // Some clients read `properties` without checking that it is there.
    map.entry("properties").or_insert_with(|| json!({}));
    map
}

fn clean(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    for key in ["format", "title", "additionalProperties", "$schema"] {
        map.remove(key);
    }
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    // Doc comments wrap; a description is one line.
    if let Some(Value::String(description)) = map.get_mut("description")
        && description.contains('\n')
    {
        *description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let kept: Vec<Value> = types.iter().filter(|kind| *kind != "null").cloned().collect();
        let single = if let [kind] = kept.as_slice() { kind.clone() } else { Value::Array(kept) };
        map.insert("type".to_owned(), single);
    }
    for combinator in ["anyOf", "oneOf"] {
        let Some(Value::Array(branches)) = map.get(combinator) else { continue };
        let kept: Vec<Value> =
            branches.iter().filter(|branch| branch.get("type") != Some(&json!("null"))).cloned().collect();
        if let [Value::Object(only)] = kept.as_slice() {
            let only = only.clone();
            map.remove(combinator);
            for (key, value) in only {
                map.entry(key).or_insert(value);
            }
        }
    }
    if let Some(Value::Array(choices)) = map.get_mut("enum") {
        choices.retain(|choice| !choice.is_null());
    }
    // An enum of strings as `enum`, which every client reads, not as `oneOf` of constants.
    if let Some(Value::Array(branches)) = map.get("oneOf")
        && let Some(choices) =
            branches.iter().map(|branch| branch.get("const").cloned()).collect::<Option<Vec<Value>>>()
    {
        map.remove("oneOf");
        map.insert("type".to_owned(), json!("string"));
        map.insert("enum".to_owned(), Value::Array(choices));
    }
    for key in ["properties", "$defs"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(clean);
        }
    }
    if let Some(items) = map.get_mut("items") {
        clean(items);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = map.get_mut(key) {
            branches.iter_mut().for_each(clean);
        }
    }
}

/// The tools listed only with a journal (`--journal`).
const JOURNAL_TOOLS: [&str; 2] = ["list_changes", "undo_changes"];

const DEFINITIONS: [Definition; 19] = [
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
        title: "Read an image or audio file",
        description: "Read an image or audio file and return it as base64 content with its MIME type, up to the media size limit.",
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
static RUN_COMMAND: Definition = Definition {
    name: "run_command",
    title: "Run a shell command",
    description: "Run a shell command (`/bin/sh -c`) in a sandbox whose only files are your mounts, at the same virtual paths and with the same rights as the file tools, beside the system's programs and a fresh `/tmp` and `HOME`; no network. Answers with the exit status, then the end of stdout and of stderr (at most 256 KiB each). The time limit (default 60 s) and a cancellation kill every process the command started.",
    effect: Effect::Write { destructive: true, idempotent: false },
    input: input::<run::RunCommandArgs>,
    output: output::<run::RunCommandOutput>,
    run: run_run_command,
};

static RUN_TOOL: LazyLock<Tool> = LazyLock::new(|| to_tool(&RUN_COMMAND));

fn run_run_command(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    match &tools.runner {
        Some(runner) => run::run(runner, agent, arguments),
        None => Err("`run_command` is not offered by this launch".to_owned()),
    }
}

fn to_tool(definition: &Definition) -> Tool {
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
static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| DEFINITIONS.iter().map(to_tool).collect());

/// Every tool, write tools included, in the order of `docs/tools.md` (the aliases last).
#[must_use]
pub fn all_tools() -> Vec<Tool> {
    let mut tools = TOOLS.clone();
    tools.push(RUN_TOOL.clone());
    tools
}

/// A tool call the protocol refuses (a JSON-RPC error, not a tool result). Arguments that do
/// not match a tool's schema are a tool result the model can read (SEP-1303), not this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No listed tool has this name.
    #[error("unknown tool `{0}`; list the tools to see which ones this server offers")]
    UnknownTool(String),
}

/// A media payload of a tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// Base64 data.
    pub data: String,
    /// The MIME type, like `image/png`.
    pub mime_type: String,
}

/// What a tool call returns to the agent (already scrubbed).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text content.
    pub text: String,
    /// The structured content (an object), absent for errors.
    pub structured: Option<Value>,
    /// Image or audio content (`read_media_file`).
    pub media: Option<Media>,
    /// True when the tool reports an error (`isError`).
    pub is_error: bool,
    /// Notes about the call itself (arguments ignored or capped), each a text content block of
    /// its own after the result, so that the result's text stays exactly what was read.
    pub notes: Vec<String>,
}

impl ToolOutput {
    /// The MCP result.
    #[must_use]
    pub fn to_call_result(&self) -> CallToolResult {
        let mut content = vec![ContentBlock::text(self.text.clone())];
        content.extend(self.notes.iter().map(|note| ContentBlock::text(note.clone())));
        if let Some(media) = &self.media {
            if media.mime_type.starts_with("audio/") {
                content.push(ContentBlock::audio(media.data.clone(), media.mime_type.clone()));
            } else {
                content.push(ContentBlock::image(media.data.clone(), media.mime_type.clone()));
            }
        }
        let mut result = if self.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
        result.structured_content.clone_from(&self.structured);
        result
    }

    /// The record of this output for the exchange log.
    fn to_log(&self) -> Value {
        let mut record = json!({ "isError": self.is_error, "text": self.text });
        if let Some(structured) = &self.structured {
            record["structuredContent"] = structured.clone();
        }
        if let Some(media) = &self.media {
            record["media"] = json!({ "mimeType": media.mime_type, "bytes": media.data.len() });
        }
        if !self.notes.is_empty() {
            record["notes"] = json!(self.notes);
        }
        record
    }
}

/// The tools over one registry, with the exchange logger when `--llm-log` is given.
#[derive(Debug, Clone)]
pub struct ToolService {
    registry: MountRegistry,
    agent: AgentAccessor,
    logger: Option<Arc<ExchangeLogger>>,
    /// What this session read or wrote, for read-before-edit; `None` when the rule is off.
    seen: Option<Arc<session::Seen>>,
    /// The launch's sandbox, when it offers `run_command`.
    runner: Option<Arc<run::Runner>>,
    /// The journal (`--journal`), and this session's name in it.
    journal: Option<(Arc<crate::Journal>, Arc<str>)>,
}

impl ToolService {
    /// Tools over `registry` for one session, logging each call to `logger` if given. A file
    /// must be read before it is edited or overwritten ([`ToolService::read_before_edit`]).
    #[must_use]
    pub fn new(registry: MountRegistry, logger: Option<ExchangeLogger>) -> Self {
        let agent = registry.agent();
        Self { registry, agent, logger: logger.map(Arc::new), seen: Some(Arc::default()), runner: None, journal: None }
    }

    /// Offers `run_command`, in `runner`'s sandbox (shared by the sessions of a launch).
    #[must_use]
    pub fn with_runner(mut self, runner: Option<Arc<run::Runner>>) -> Self {
        self.runner = runner;
        self
    }

    /// Journals this session's changes in `journal` (`--journal`), under a fresh session id.
    #[must_use]
    pub fn journal(mut self, journal: Option<Arc<crate::Journal>>) -> Self {
        self.journal = journal.map(|journal| (journal, Arc::from(format!("s{}", vfs::CallId::new()))));
        self
    }

    /// Turns the read-before-edit rule on (the default) or off (`--no-read-before-edit`).
    #[must_use]
    pub fn read_before_edit(mut self, on: bool) -> Self {
        self.seen = on.then(Arc::default);
        self
    }

    /// The session's memory and `path` parsed, when the read-before-edit rule is on and the
    /// path is valid (an invalid one gets the core's own answer).
    fn session_path(&self, path: &str) -> Option<(&session::Seen, vfs::VirtualPath)> {
        let seen = self.seen.as_deref()?;
        vfs::VirtualPath::new(path).ok().map(|path| (seen, path))
    }

    /// Records a whole read or the session's own write.
    fn saw(&self, path: &vfs::VirtualPath, version: Option<&str>) {
        if let Some(seen) = &self.seen {
            seen.saw(path, version);
        }
    }

    /// The read-before-edit refusal, as a tool error.
    fn unread(&self, path: &vfs::VirtualPath, why: session::Unread) -> ToolOutput {
        ToolOutput {
            text: self.registry.render_with(&session::refusal(path, why), &words::Mcp),
            structured: None,
            media: None,
            is_error: true,
            notes: Vec::new(),
        }
    }

    /// The refusal of a recursive delete of `directory` that holds `file`, unread.
    fn unread_inside(&self, directory: &vfs::VirtualPath, file: &vfs::VirtualPath, why: session::Unread) -> ToolOutput {
        ToolOutput {
            text: self.registry.render_with(&session::refusal_inside(directory, file, why), &words::Mcp),
            structured: None,
            media: None,
            is_error: true,
            notes: Vec::new(),
        }
    }

    /// The registry.
    #[must_use]
    pub fn registry(&self) -> &MountRegistry {
        &self.registry
    }

    /// The exchange logger, if any.
    #[must_use]
    pub fn logger(&self) -> Option<&ExchangeLogger> {
        self.logger.as_deref()
    }

    /// The tools an agent is offered: the write tools only when some mount grants write.
    #[must_use]
    pub fn listed_tools(&self) -> Vec<Tool> {
        let writable = self.registry.agent_can_write();
        DEFINITIONS
            .iter()
            .zip(TOOLS.iter())
            .filter(|(definition, _)| writable || matches!(definition.effect, Effect::Read))
            .filter(|(definition, _)| self.offers_journal(definition))
            .map(|(_, tool)| tool.clone())
            .chain(self.runner.as_ref().map(|_| RUN_TOOL.clone()))
            .collect()
    }

    /// False for a journal tool without a journal, or where no mount grants write.
    fn offers_journal(&self, definition: &Definition) -> bool {
        !JOURNAL_TOOLS.contains(&definition.name) || (self.journal.is_some() && self.registry.agent_can_write())
    }

    /// The definition and listed tool of `name`, if this launch offers it.
    fn listed(&self, name: &str) -> Option<(&'static Definition, &'static Tool)> {
        if name == RUN_COMMAND.name {
            return self.runner.as_ref().map(|_| (&RUN_COMMAND, &*RUN_TOOL));
        }
        let writable = self.registry.agent_can_write();
        DEFINITIONS
            .iter()
            .zip(TOOLS.iter())
            .find(|(definition, _)| definition.name == name)
            .filter(|(definition, _)| writable || matches!(definition.effect, Effect::Read))
            .filter(|(definition, _)| self.offers_journal(definition))
    }

    /// Runs one tool as an agent would, and records the exchange. Blocking: call it from a
    /// blocking thread in async code.
    pub fn call(&self, name: &str, arguments: Option<JsonObject>) -> Result<ToolOutput, CallError> {
        self.call_with(name, arguments, vfs::Budget::unlimited())
    }

    /// [`ToolService::call`] with a cancel flag and a progress sink of the caller's (the time
    /// limit is the launch's, `--call-timeout`).
    pub fn call_with(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        budget: vfs::Budget,
    ) -> Result<ToolOutput, CallError> {
        let started = SystemTime::now();
        let clock = Instant::now();
        let arguments = Value::Object(arguments.unwrap_or_default());
        // One id for the call: on its exchange-log line and on every change it makes.
        let call = vfs::CallId::new();
        let agent = self.agent.with_budget(budget.with_time(self.registry.limits().call_time).with_call(call.clone()));
        // A protocol refusal echoes the agent's input (the tool name, the argument serde read)
        // as given: nothing in it is the server's own.
        if let Some((journal, session)) = &self.journal {
            journal.begin(&call, session, None);
        }
        let outcome = guarded(name, || self.dispatch(name, &arguments, &agent));
        // The call's entries are durable before it is answered.
        if let Some((journal, _)) = &self.journal {
            journal.finish(&call);
        }
        if let Some(logger) = &self.logger {
            let (time, duration_ms) = stamp(started, clock.elapsed());
            let (result, error) = match &outcome {
                // A command's output is data of the agent's, not a record of the call.
                Ok(output) if name == RUN_COMMAND.name => {
                    (Some(run::log_record(output.is_error, &output.text, output.structured.as_ref())), None)
                }
                Ok(output) => (Some(output.to_log()), None),
                Err(error) => {
                    let code = match error {
                        CallError::UnknownTool(_) => -32602,
                    };
                    (None, Some(json!({ "code": code, "message": error.to_string() })))
                }
            };
            logger.record(&Exchange {
                time,
                call: call.as_str(),
                tool: name,
                arguments: &arguments,
                result,
                error,
                duration_ms,
            });
        }
        outcome
    }

    fn dispatch(&self, name: &str, arguments: &Value, agent: &AgentAccessor) -> Result<ToolOutput, CallError> {
        let Some((definition, tool)) = self.listed(name) else {
            return Err(CallError::UnknownTool(name.to_owned()));
        };
        let invalid = |message: String| ToolOutput {
            text: format!("invalid arguments for `{name}`: {message}"),
            structured: None,
            media: None,
            is_error: true,
            notes: Vec::new(),
        };
        let (arguments, ignored) = match arguments::check(tool, arguments) {
            Ok(checked) => checked,
            Err(message) => return Ok(invalid(message)),
        };
        let mut output = match (definition.run)(self, agent, &arguments) {
            Ok(output) => output,
            Err(message) => return Ok(invalid(message)),
        };
        if !ignored.is_empty() {
            output.notes.insert(0, arguments::ignored_note(tool, &ignored));
        }
        Ok(output)
    }

    fn finish<T: serde::Serialize>(&self, result: Result<T, vfs::Error>, text: fn(&T) -> vfs::AgentText) -> ToolOutput {
        match result {
            Ok(value) => {
                let structured = serde_json::to_value(&value).unwrap_or(Value::Null);
                self.success(&text(&value), structured)
            }
            Err(error) => self.failure(&error),
        }
    }

    fn success(&self, text: &vfs::AgentText, structured: Value) -> ToolOutput {
        let structured = match structured {
            Value::Object(_) => structured,
            other => json!({ "result": other }),
        };
        ToolOutput {
            text: self.registry.render_with(text, &words::Mcp),
            structured: Some(structured),
            media: None,
            is_error: false,
            notes: Vec::new(),
        }
    }

    fn failure(&self, error: &vfs::Error) -> ToolOutput {
        ToolOutput {
            text: self.registry.render_with(error.agent_text(), &words::Mcp),
            structured: None,
            media: None,
            is_error: true,
            notes: Vec::new(),
        }
    }

    /// One section per file, labelled with the path as the agent gave it.
    fn multiple(&self, results: &[vfs::FileResult]) -> ToolOutput {
        let mut text = vfs::AgentText::new();
        let mut files = Vec::with_capacity(results.len());
        for (index, (path, result)) in results.iter().enumerate() {
            if index > 0 {
                text.composed("\n---\n");
            }
            text.passed(path);
            match result {
                Ok(read) => {
                    text.composed(":\n").append(&read.agent_text());
                    files.push(FileOutput { path: path.clone(), ok: true, read: Some(read.clone()), error: None });
                }
                Err(error) => {
                    text.composed(": error: ").append(error.agent_text());
                    let error = self.registry.render_with(error.agent_text(), &words::Mcp);
                    files.push(FileOutput { path: path.clone(), ok: false, read: None, error: Some(error) });
                }
            }
        }
        self.success(&text, serde_json::to_value(FilesOutput { files }).unwrap_or(Value::Null))
    }
}

/// Runs a tool; a panic inside it (a bug) becomes an `isError` result and a log line for the
/// operator, so no request is left unanswered and the server goes on.
fn guarded(tool: &str, run: impl FnOnce() -> Result<ToolOutput, CallError>) -> Result<ToolOutput, CallError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|_| {
        tracing::error!(tool, "a tool call panicked; this is a bug, please report it");
        Ok(ToolOutput {
            text: format!("`{tool}` failed unexpectedly (an internal error, logged for the operator); try again or narrow the request"),
            structured: None,
            media: None,
            is_error: true,
            notes: Vec::new(),
        })
    })
}

fn run_list_mounts(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    parse::<ListMountsArgs>(arguments)?;
    let mounts = agent.list_mounts();
    let text = vfs::AgentText::from(mounts_text(&mounts).as_str());
    Ok(tools.success(&text, serde_json::to_value(MountsOutput { mounts }).unwrap_or(Value::Null)))
}

fn run_list_allowed_directories(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    parse::<ListMountsArgs>(arguments)?;
    let directories: Vec<String> = agent.list_mounts().into_iter().map(|mount| mount.root).collect();
    let mut text = vfs::AgentText::from("Allowed directories:\n");
    for root in &directories {
        text.composed(root).composed("\n");
    }
    Ok(tools.success(&text, serde_json::to_value(AllowedOutput { directories }).unwrap_or(Value::Null)))
}

fn run_list_directory_with_sizes(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: SizedListArgs = parse(arguments)?;
    let sort = match args.sort_by {
        Some(SortKey::Size) => vfs::SortBy::Size,
        Some(SortKey::Name) | None => vfs::SortBy::Name,
    };
    Ok(tools.finish(agent.list_with_sizes(&args.path, sort), vfs::SizedListing::agent_text))
}

fn run_read_text_file(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: ReadTextFileArgs = parse(arguments)?;
    let window = vfs::ReadWindow { head: args.head, tail: args.tail, offset: args.offset, limit: args.limit };
    let read = agent.read_text(&args.path, &window);
    if let Ok(read) = &read {
        tools.saw(&read.path, read.version.as_deref());
    }
    let mut output = tools.finish(read, vfs::TextRead::agent_text);
    // The file's text goes once, in the text content; the structured content keeps what
    // programs need (version, window, truncation) without a second copy.
    if let Some(Value::Object(fields)) = &mut output.structured {
        fields.remove("content");
    }
    Ok(output)
}

fn run_read_multiple_files(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: ReadMultipleFilesArgs = parse(arguments)?;
    Ok(match agent.read_multiple(&args.paths) {
        Ok(results) => {
            for read in results.iter().filter_map(|(_, result)| result.as_ref().ok()) {
                tools.saw(&read.path, read.version.as_deref());
            }
            tools.multiple(&results)
        }
        Err(error) => tools.failure(&error),
    })
}

fn run_read_media_file(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    let media = match agent.read_media(&args.path) {
        Ok(media) => media,
        Err(error) => return Ok(tools.failure(&error)),
    };
    let mut text = vfs::AgentText::new();
    text.composed("`").passed(media.path.as_str());
    text.composed(&format!("` ({}, {} bytes)", media.mime_type, media.size));
    let structured = MediaOutput { path: media.path, mime_type: media.mime_type.clone(), size: media.size };
    let mut output = tools.success(&text, serde_json::to_value(structured).unwrap_or(Value::Null));
    output.media = Some(Media { data: media.data, mime_type: media.mime_type });
    Ok(output)
}

fn run_write_file(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: WriteFileArgs = parse(arguments)?;
    let mut precondition = match (args.expected_version, args.overwrite) {
        (Some(version), _) => vfs::Precondition::Version(version),
        (None, true) => vfs::Precondition::Any,
        (None, false) => vfs::Precondition::Absent,
    };
    // Read before overwrite: an overwrite replaces only the version the session saw; never
    // seen, the write may only create. The core checks it under the directory's lock.
    let mut guarded = None;
    if precondition == vfs::Precondition::Any
        && let Some((seen, path)) = tools.session_path(&args.path)
    {
        precondition = seen.precondition(&path);
        guarded = Some(path);
    }
    let written = agent.write(&args.path, &args.content, &precondition);
    match (&written, &guarded) {
        (Ok(outcome), _) => tools.saw(&outcome.path, outcome.version.as_deref()),
        (Err(error), Some(path)) => {
            if let Some(why) = session::Unread::of(error, path) {
                return Ok(tools.unread(path, why));
            }
        }
        (Err(_), None) => {}
    }
    Ok(tools.finish(written, vfs::WriteOutcome::agent_text))
}

fn run_edit_file(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: EditFileArgs = parse(arguments)?;
    let edits: Vec<vfs::Edit> =
        args.edits.into_iter().map(|edit| vfs::Edit { old_text: edit.old_text, new_text: edit.new_text }).collect();
    let mut options = vfs::EditOptions {
        replace_all: args.replace_all,
        dry_run: args.dry_run,
        precondition: args.expected_version.map_or(vfs::Precondition::Any, vfs::Precondition::Version),
    };
    // Read before edit (a dry run changes nothing and needs no read): the version the session
    // saw guards the edit in the store, under its lock; never seen, the precondition is that
    // no file be there, so whatever file is there when the edit runs is refused as unread, and
    // a place that is missing or not a file gets the answer it would get anyway.
    let mut guarded = None;
    if !options.dry_run
        && options.precondition == vfs::Precondition::Any
        && let Some((seen, path)) = tools.session_path(&args.path)
    {
        options.precondition = seen.precondition(&path);
        guarded = Some(path);
    }
    let edited = agent.edit(&args.path, &edits, &options);
    match (&edited, &guarded) {
        (Ok(outcome), _) if outcome.applied => tools.saw(&outcome.path, outcome.version.as_deref()),
        (Err(error), Some(path)) => {
            if let Some(why) = session::Unread::of(error, path) {
                return Ok(tools.unread(path, why));
            }
        }
        _ => {}
    }
    Ok(tools.finish(edited, vfs::EditOutcome::agent_text))
}

fn run_create_directory(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    Ok(tools.finish(agent.create_directory(&args.path), vfs::CreateDirOutcome::agent_text))
}

fn run_list_directory(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    Ok(tools.finish(agent.list(&args.path), vfs::Listing::agent_text))
}

fn run_directory_tree(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: DirectoryTreeArgs = parse(arguments)?;
    Ok(tools.finish(agent.tree(&args.path, args.max_depth, &args.exclude_patterns), vfs::Tree::agent_text))
}

fn run_search_files(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: SearchFilesArgs = parse(arguments)?;
    let found = agent.search_files(&args.path, &args.pattern, &args.exclude_patterns);
    Ok(tools.finish(found, vfs::NameSearch::agent_text))
}

fn run_grep(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: GrepArgs = parse(arguments)?;
    let cap = tools.registry.limits().matches;
    let capped = args.max_results.filter(|&asked| asked > cap);
    let request = vfs::GrepRequest {
        pattern: args.pattern,
        path: args.path,
        include: args.include,
        case_insensitive: args.case_insensitive,
        literal: args.literal,
        context: args.context,
        max_results: args.max_results,
    };
    let mut output = tools.finish(agent.grep(&request), vfs::GrepResult::agent_text);
    if let Some(asked) = capped {
        output.notes.push(format!("[`maxResults` {asked} is above the cap: at most {cap} matches are returned]"));
    }
    Ok(output)
}

fn run_get_file_info(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    Ok(tools.finish(agent.info(&args.path), vfs::FileInfo::agent_text))
}

fn run_move_file(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: MoveFileArgs = parse(arguments)?;
    let at_source = args.expected_version.map_or(vfs::Precondition::Any, vfs::Precondition::Version);
    let mut at_destination = if args.overwrite { vfs::Precondition::Any } else { vfs::Precondition::Absent };
    // Read before replace: a move onto an existing file replaces it, as an overwrite does, so
    // it replaces only the version the session saw there; never seen, the move may only
    // create. The core checks it under the directories' locks, just before the rename, and
    // never replaces a directory.
    let mut guarded = None;
    if args.overwrite
        && let Some((seen, destination)) = tools.session_path(&args.destination)
    {
        at_destination = seen.precondition(&destination);
        guarded = Some(destination);
    }
    let moved = agent.move_path(&args.source, &args.destination, &at_source, &at_destination);
    match (&moved, &guarded) {
        (Ok(outcome), _) => {
            if let Some(seen) = &tools.seen {
                seen.forget(&outcome.destination);
                seen.moved(&outcome.source, &outcome.destination);
            }
        }
        // Only the destination's refusal: the source's is the agent's own `expectedVersion`.
        (Err(error), Some(destination)) => {
            if let Some(why) = session::Unread::of(error, destination) {
                return Ok(tools.unread(destination, why));
            }
        }
        (Err(_), None) => {}
    }
    Ok(tools.finish(moved, vfs::MoveOutcome::agent_text))
}

fn run_delete_file(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: DeleteFileArgs = parse(arguments)?;
    // Read before delete: a delete loses what a file held, as an overwrite does, so a file
    // goes only at the version the session saw (never seen: only if no file is there), and a
    // recursive delete only when every file of the tree does (checked by the store under its
    // locks); a link or an empty directory is deleted as before. An `expectedVersion` the
    // agent passes guards instead.
    let guarded = tools.seen.as_ref().filter(|_| args.expected_version.is_none());
    let deleted = match (guarded, args.expected_version) {
        (Some(seen), _) => agent.delete_seen(&args.path, args.recursive, &|path| seen.precondition(path)),
        (None, expected) => {
            let precondition = expected.map_or(vfs::Precondition::Any, vfs::Precondition::Version);
            agent.delete(&args.path, args.recursive, &precondition)
        }
    };
    match (&deleted, guarded) {
        (Ok(outcome), _) => {
            if let Some(seen) = &tools.seen {
                seen.forget(&outcome.path);
            }
        }
        // The refusal of a precondition the session passed names the file it was for: the
        // one asked for, or a file in the directory.
        (Err(error), Some(_)) => {
            if let Some(file) = error.path()
                && let Some(why) = session::Unread::of(error, file)
            {
                let asked = vfs::VirtualPath::new(&args.path).ok();
                return Ok(match asked {
                    Some(directory) if directory != *file => tools.unread_inside(&directory, file, why),
                    _ => tools.unread(file, why),
                });
            }
        }
        (Err(_), None) => {}
    }
    Ok(tools.finish(deleted, vfs::DeleteOutcome::agent_text))
}

/// The arguments, already checked against the schema (`arguments::check`): what serde still
/// refuses is inside a list of objects (an edit without `newText`), and its message names it.
fn parse<T: serde::de::DeserializeOwned>(arguments: &Value) -> Result<T, String> {
    serde_json::from_value(arguments.clone()).map_err(|error| error.to_string())
}

fn mounts_text(mounts: &[vfs::MountInfo]) -> String {
    if mounts.is_empty() {
        return "no mounts are available".to_owned();
    }
    let mut text = String::new();
    for mount in mounts {
        text.push_str(&format!("{} ({})\n", mount.root, mount.rights));
        for item in &mount.overrides {
            text.push_str(&format!("  {} ({})\n", item.path, item.rights));
        }
    }
    text
}

/// The names of the tools `service` lists, for the operator's start-up line (without making
/// the schemas, which the first `tools/list` makes).
pub(crate) fn listed_names(service: &ToolService) -> String {
    let writable = service.registry.agent_can_write();
    DEFINITIONS
        .iter()
        .filter(|definition| writable || matches!(definition.effect, Effect::Read))
        .map(|definition| definition.name)
        .chain(service.runner.as_ref().map(|_| RUN_COMMAND.name))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(rights: &str) -> (tempfile::TempDir, ToolService) {
        let dir = tempfile::tempdir().unwrap();
        let root = vfs::MountRoot::new("/src").unwrap();
        let spec = vfs::MountSpec::new(dir.path().to_str().unwrap(), root, rights.parse().unwrap());
        let registry = MountRegistry::builder().mount(spec).build().unwrap();
        (dir, ToolService::new(registry, None))
    }

    #[test]
    fn a_panic_in_a_tool_is_an_error_result() {
        let output = guarded("grep", || panic!("a bug")).unwrap();
        assert!(output.is_error);
        assert_eq!(
            output.text,
            "`grep` failed unexpectedly (an internal error, logged for the operator); try again or narrow the request"
        );
    }

    /// Walks every subschema: no type arrays, no `format`, no titles, no `null` anywhere.
    fn assert_portable(tool: &str, schema: &Value) {
        match schema {
            Value::Object(map) => {
                for key in ["format", "title", "additionalProperties", "$schema", "anyOf", "oneOf"] {
                    assert!(!map.contains_key(key), "{tool}: `{key}` in {schema}");
                }
                if let Some(kind) = map.get("type") {
                    assert!(kind.is_string(), "{tool}: a type array in {schema}");
                }
                map.values().for_each(|child| assert_portable(tool, child));
            }
            Value::Array(items) => items.iter().for_each(|item| assert_portable(tool, item)),
            Value::Null => panic!("{tool}: a null in a schema"),
            _ => {}
        }
    }

    #[test]
    fn every_schema_is_a_portable_object() {
        for tool in all_tools() {
            let output = tool.output_schema.as_ref().expect("an output schema");
            for schema in [&tool.input_schema, output] {
                assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
                assert!(schema.get("properties").is_some_and(Value::is_object), "{}", tool.name);
                assert_portable(&tool.name, &Value::Object((**schema).clone()));
            }
            let annotations = tool.annotations.as_ref().unwrap();
            assert_eq!(annotations.open_world_hint, Some(false));
            assert!(annotations.read_only_hint.is_some() && annotations.destructive_hint.is_some());
        }
    }

    #[test]
    fn write_tools_are_listed_only_when_something_grants_write() {
        assert_eq!(service("ro").1.listed_tools().len(), 12);
        assert_eq!(service("rwnd").1.listed_tools().len(), 17);
        let (_dir, read_only) = service("ro");
        assert_eq!(
            read_only.call("delete_file", Some(JsonObject::new())),
            Err(CallError::UnknownTool("delete_file".to_owned()))
        );
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test writes a file to read")]
    fn errors_and_bad_arguments_are_tool_results_and_unknown_keys_a_note() {
        let (dir, tools) = service("rw");
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let call = |name: &str, arguments: Value| tools.call(name, arguments.as_object().cloned()).unwrap();
        let output = call("read_text_file", json!({ "path": "/elsewhere/x" }));
        assert!(output.is_error);
        assert_eq!(output.text, "no mount serves this path; available mounts: `/src` (rw)");
        assert_eq!(output.structured, None);

        let cases = [
            (
                "read_text_file",
                json!({ "path": 3 }),
                "`path` must be a string, not the number 3; write it like `\"path\": \"…\"`",
            ),
            ("read_text_file", json!({}), "`path` is missing; add it: virtual path of the file, like `/src/main.rs`."),
            (
                "read_text_file",
                json!({ "path": null }),
                "`path` is missing; add it: virtual path of the file, like `/src/main.rs`.",
            ),
            ("read_text_file", json!({ "path": "/src/a.txt", "head": -1 }), "`head` must be 0 or more, not -1"),
            (
                "read_text_file",
                json!({ "path": "/src/a.txt", "head": 1.5 }),
                "`head` must be a whole number, not the number 1.5; write it like `\"head\": 10`",
            ),
            (
                "read_multiple_files",
                json!({ "paths": ["/src/a.txt", false] }),
                "`paths[1]` must be a string, not `false`; `paths` is a list of strings, like `\"paths\": [\"…\"]`",
            ),
            (
                "edit_file",
                json!({ "path": "/src/a.txt", "edits": [{ "oldText": "one" }] }),
                "`edits[0].newText` is missing; add it: text to put in its place (literal: `$1` stays `$1`).",
            ),
            (
                "list_directory_with_sizes",
                json!({ "path": "/src", "sortBy": "age" }),
                "`sortBy` must be one of `name`, `size`, not `age`",
            ),
            (
                "delete_file",
                json!({ "path": "/src/a.txt", "recursive": "yes" }),
                "`recursive` must be `true` or `false`, not a string; write it like `\"recursive\": true`",
            ),
        ];
        for (name, arguments, message) in cases {
            let output = call(name, arguments);
            assert!(output.is_error, "{name}");
            assert_eq!(output.text, format!("invalid arguments for `{name}`: {message}"));
            assert_eq!(output.structured, None);
        }

        // A whole number may be written `2.0`; `null` is "not given"; unknown keys are a note
        // of their own, after the text, which stays exactly the file's.
        let output = call("read_text_file", json!({ "path": "/src/a.txt", "head": 1.0, "tail": null, "surprise": 1 }));
        assert_eq!(
            (output.is_error, output.text.as_str()),
            (false, "one\n[more lines follow; read on with offset: 2]")
        );
        assert_eq!(
            output.notes,
            ["[ignored unknown argument `surprise`: `read_text_file` takes `head`, `limit`, `offset`, `path`, `tail`]"]
        );
        let result = output.to_call_result();
        assert_eq!(result.content.len(), 2);
        // An unknown tool stays a protocol error.
        assert_eq!(tools.call("read_text", None), Err(CallError::UnknownTool("read_text".to_owned())));
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds the listed directory")]
    fn the_reference_servers_names_work() {
        let (dir, tools) = service("ro");
        std::fs::write(dir.path().join("small.txt"), "a\n").unwrap();
        std::fs::write(dir.path().join("big.txt"), "x".repeat(3000)).unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        let call = |name: &str, arguments: Value| tools.call(name, arguments.as_object().cloned()).unwrap();
        assert_eq!(call("read_file", json!({ "path": "/src/small.txt" })).text, "a\n");
        assert_eq!(call("list_allowed_directories", json!({})).text, "Allowed directories:\n/src\n");
        let by_name = call("list_directory_with_sizes", json!({ "path": "/src" }));
        assert_eq!(
            by_name.text,
            "[FILE] big.txt  2.9 KiB\n[DIR] docs\n[FILE] small.txt  2 B\nTotal: 2 files, 1 directory; 2.9 KiB in files\n"
        );
        assert_eq!(by_name.structured.as_ref().unwrap()["bytes"], 3002);
        let by_size = call("list_directory_with_sizes", json!({ "path": "/src", "sortBy": "size" }));
        assert_eq!(
            by_size.text,
            "[FILE] big.txt  2.9 KiB\n[FILE] small.txt  2 B\n[DIR] docs\nTotal: 2 files, 1 directory; 2.9 KiB in files\n"
        );
    }

    /// File contents, names read from disk and the agent's own input are data: they pass byte
    /// for byte, even when they spell a mount's physical path or an internal root.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds the mounted directories")]
    fn data_and_input_pass_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["src", "logs"] {
            std::fs::create_dir_all(dir.path().join(name)).unwrap();
        }
        let physical = dir.path().join("src").to_str().unwrap().to_owned();
        let content = format!("see {physical}/a.txt and /llm-logs/x and [redacted]\n");
        std::fs::write(dir.path().join("src/mentions.txt"), &content).unwrap();
        std::fs::write(dir.path().join("src/line\nbreak.txt"), "x").unwrap();
        let spec = |name: &str, root: &str, rights: &str| {
            let physical = dir.path().join(name);
            vfs::MountSpec::new(physical.to_str().unwrap(), vfs::MountRoot::new(root).unwrap(), rights.parse().unwrap())
        };
        let registry = MountRegistry::builder()
            .mount(spec("src", "/src", "rw"))
            .internal(spec("logs", "/llm-logs", "rw"))
            .build()
            .unwrap();
        let tools = ToolService::new(registry, None);
        let call = |name: &str, arguments: Value| tools.call(name, arguments.as_object().cloned()).unwrap();

        let read = call("read_text_file", json!({ "path": "/src/mentions.txt" }));
        assert_eq!(read.text, content);
        let version = read.structured.unwrap()["version"].as_str().unwrap().to_owned();
        let written = call(
            "write_file",
            json!({ "path": "/src/mentions.txt", "content": read.text, "expectedVersion": version }),
        );
        assert!(!written.is_error, "{}", written.text);
        assert_eq!(std::fs::read_to_string(dir.path().join("src/mentions.txt")).unwrap(), content);
        let found = call("grep", json!({ "pattern": "llm-logs", "path": "/src" }));
        assert_eq!(found.text, format!("/src/mentions.txt:1:{content}"));

        // A name that holds a newline is escaped in text and exact in structured content.
        let listing = call("list_directory", json!({ "path": "/src" }));
        assert_eq!(listing.text, "[FILE] line\\nbreak.txt\n[FILE] mentions.txt\n");
        assert_eq!(listing.structured.unwrap()["entries"][0]["name"], "line\nbreak.txt");

        // The agent's own input is echoed as given; an internal root reads as an unknown one.
        let guessed = format!("{physical}/secret");
        assert_eq!(
            tools.call(&guessed, None).unwrap_err().to_string(),
            format!("unknown tool `{guessed}`; list the tools to see which ones this server offers")
        );
        let hidden = call("read_multiple_files", json!({ "paths": ["/llm-logs/x", "/src/mentions.txt"] }));
        let unknown = call("read_multiple_files", json!({ "paths": ["/nope-logs/x", "/src/mentions.txt"] }));
        assert_eq!(hidden.text, unknown.text.replace("/nope-logs/x", "/llm-logs/x"));
        assert!(hidden.text.starts_with("/llm-logs/x: error: no mount serves this path"), "{}", hidden.text);
    }

    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test builds the mounted directories")]
    fn no_tool_output_names_a_physical_path_or_the_internal_root() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["src/docs", "out", "logs"] {
            std::fs::create_dir_all(dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join("src/docs/a.txt"), "alpha\nneedle\n").unwrap();
        std::os::unix::fs::symlink("/etc", dir.path().join("src/escape")).unwrap();
        let spec = |name: &str, root: &str, rights: &str| {
            let physical = dir.path().join(name);
            vfs::MountSpec::new(physical.to_str().unwrap(), vfs::MountRoot::new(root).unwrap(), rights.parse().unwrap())
        };
        let registry = MountRegistry::builder()
            .mount(spec("src", "/src", "ro"))
            .mount(spec("out", "/output", "rw"))
            .internal(spec("logs", "/llm-logs", "rw"))
            .build()
            .unwrap();
        let checker = vfs_compliance::leak::LeakChecker::new(&registry);
        let tools = ToolService::new(registry, None);
        let calls = [
            ("list_mounts", json!({})),
            ("read_text_file", json!({ "path": "/src/docs/a.txt" })),
            ("read_text_file", json!({ "path": "/src/escape/passwd" })),
            ("read_text_file", json!({ "path": "/llm-logs/x" })),
            // (An internal root given as input is echoed as given: `data_and_input_pass_byte_for_byte`.)
            ("read_multiple_files", json!({ "paths": ["/src/docs/a.txt", "/src/../../etc"] })),
            ("write_file", json!({ "path": "/output/n/b.txt", "content": "x" })),
            ("edit_file", json!({ "path": "/output/n/b.txt", "edits": [{ "oldText": "x", "newText": "y" }] })),
            ("write_file", json!({ "path": "/src/denied.txt", "content": "x" })),
            ("create_directory", json!({ "path": "/output/d" })),
            ("list_directory", json!({ "path": "/" })),
            ("directory_tree", json!({ "path": "/src" })),
            ("search_files", json!({ "path": "/", "pattern": "*" })),
            ("grep", json!({ "pattern": "needle" })),
            ("get_file_info", json!({ "path": "/src/escape" })),
            ("move_file", json!({ "source": "/output/n/b.txt", "destination": "/output/c.txt" })),
            ("delete_file", json!({ "path": "/output/c.txt" })),
            ("delete_file", json!({ "path": "/llm-logs" })),
        ];
        for (name, arguments) in calls {
            let output = tools.call(name, arguments.as_object().cloned()).unwrap();
            checker.assert_clean(&output.text);
            if let Some(structured) = &output.structured {
                checker.assert_clean(&structured.to_string());
            }
        }
    }
}
