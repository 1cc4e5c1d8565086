//! The tools' arguments as Rust types: what each tool's input schema is generated from, and
//! what its arguments (already checked against that schema, `arguments.rs`) are parsed into.

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub(super) struct ListMountsArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReadTextFileArgs {
    /// Virtual path of the file, like `/src/main.rs`.
    pub(super) path: String,
    /// Return only the first N lines.
    pub(super) head: Option<u64>,
    /// Return only the last N lines.
    pub(super) tail: Option<u64>,
    /// First line to return (1-based); pairs with `limit`.
    pub(super) offset: Option<u64>,
    /// Most lines to return, from `offset` (or the start).
    pub(super) limit: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReadMultipleFilesArgs {
    /// Virtual paths of the files; each gets its own result, and a failure does not stop the others.
    pub(super) paths: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct PathArgs {
    /// Virtual path, like `/src/docs`.
    pub(super) path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct WriteFileArgs {
    /// Virtual path of the file to write; missing parent directories are created.
    pub(super) path: String,
    /// The complete new content.
    pub(super) content: String,
    /// Replace the file if it exists (default false: an existing file is refused).
    #[serde(default)]
    pub(super) overwrite: bool,
    /// Write only if the file's current version is this token (from a read or `get_file_info`).
    pub(super) expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct EditArg {
    /// Text to find, exactly as it is in the file.
    pub(super) old_text: String,
    /// Text to put in its place (literal: `$1` stays `$1`).
    pub(super) new_text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct EditFileArgs {
    /// Virtual path of the file to edit.
    pub(super) path: String,
    /// Replacements, applied in order; each `oldText` must match exactly one place unless `replaceAll`.
    pub(super) edits: Vec<EditArg>,
    /// Replace every occurrence of each `oldText` (default false).
    #[serde(default)]
    pub(super) replace_all: bool,
    /// Show the diff without writing (default false).
    #[serde(default)]
    pub(super) dry_run: bool,
    /// Edit only if the file's current version is this token.
    pub(super) expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DirectoryTreeArgs {
    /// Virtual path of the directory.
    pub(super) path: String,
    /// How deep to descend (default and at most 32 levels).
    pub(super) max_depth: Option<usize>,
    /// Glob patterns of names or relative paths to leave out, like `target` or `*.log`.
    #[serde(default)]
    pub(super) exclude_patterns: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SearchFilesArgs {
    /// Virtual path of the directory to search under.
    pub(super) path: String,
    /// Glob pattern on names (or relative paths, if it contains `/`), like `*.rs`.
    pub(super) pattern: String,
    /// Glob patterns to leave out.
    #[serde(default)]
    pub(super) exclude_patterns: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct GrepArgs {
    /// Regular expression (or literal text with `literal`).
    pub(super) pattern: String,
    /// Directory or file to search (default `/`: every mount).
    pub(super) path: Option<String>,
    /// Only files whose name matches this glob, like `*.rs`.
    pub(super) include: Option<String>,
    /// Match regardless of case (default false).
    #[serde(default)]
    pub(super) case_insensitive: bool,
    /// Treat `pattern` as literal text (default false).
    #[serde(default)]
    pub(super) literal: bool,
    /// Lines of context before and after each match (default 0, at most 20).
    pub(super) context: Option<usize>,
    /// Most matches to return (default 200, at most 1,000).
    #[schemars(range(min = 1))]
    pub(super) max_results: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct MoveFileArgs {
    /// Virtual path of the file or directory to move.
    pub(super) source: String,
    /// Virtual path to move it to.
    pub(super) destination: String,
    /// Replace an existing destination (default false).
    #[serde(default)]
    pub(super) overwrite: bool,
    /// Move only if the source file's version is still this one (from `get_file_info`).
    pub(super) expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DeleteFileArgs {
    /// Virtual path of the file or directory to delete.
    pub(super) path: String,
    /// Delete a non-empty directory with its contents (default false).
    #[serde(default)]
    pub(super) recursive: bool,
    /// Delete only if the file's version is still this one (from `get_file_info`).
    pub(super) expected_version: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SizedListArgs {
    /// Virtual path of the directory, like `/src/docs`.
    pub(super) path: String,
    /// `name` (the default) or `size` (largest first).
    pub(super) sort_by: Option<SortKey>,
}

/// How `list_directory_with_sizes` sorts.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum SortKey {
    Name,
    Size,
}
