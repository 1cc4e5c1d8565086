//! The static check of the workspace's own code (STYLE rule 14).
//!
//! Clippy's `disallowed-methods` catches raw filesystem calls, but only the ones it resolves, and
//! any `#[expect]` silences it with whatever reason the author typed. This check parses every
//! Rust file of the workspace with `syn` and holds the doctrine's code-level rules on its own:
//! where raw filesystem access may live, which public types may carry a host path, where the
//! privileged capability and the ambient authority may be minted, and what may be formatted
//! into agent-facing text. Every
//! exemption must carry a reason from a short ratified list ([`REASONS`]), so a new exemption is
//! a reviewed decision, not a keystroke. `docs/compliance.md` documents each rule with an example.
//!
//! The check reads the source tree by path: it is developer tooling that never runs inside the
//! server, which is the ratified `tooling` reason below.
#![expect(clippy::disallowed_methods, reason = "tooling: the check reads the workspace's own sources")]

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::{self, Visit};
use syn::{Attribute, Expr, Fields, Item, Lit, Meta, Pat, Token, Type};

pub use crate::error::CheckError;

/// Raw filesystem access outside the storage backend.
pub const RAW_FS: &str = "raw-fs";
/// A public agent-facing type with a host-path field.
pub const PATH_FIELD: &str = "path-field";
/// The privileged capability minted outside the allowed sites.
pub const MINT: &str = "mint-privileged";
/// The ambient authority minted outside the binary's `main`.
pub const AMBIENT: &str = "ambient-authority";
/// An `io::Error` or a host path formatted into agent-facing text.
pub const AGENT_TEXT: &str = "agent-text";
/// `clippy.toml` no longer lists a disallowed method or type.
pub const CLIPPY_LIST: &str = "clippy-list";
/// An exemption without a ratified reason, or a malformed one.
pub const EXEMPTION: &str = "exemption";
/// A Rust file the check could not parse.
pub const PARSE: &str = "parse";

/// One rule: its id, what it forbids, and the one-line fix printed with each finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The id printed with findings and named in exemptions (`allow(raw-fs)`).
    pub id: &'static str,
    /// What the rule forbids.
    pub summary: &'static str,
    /// How to fix a finding.
    pub fix: &'static str,
}

/// Every rule the check applies.
pub const RULES: &[Rule] = &[
    Rule {
        id: RAW_FS,
        summary: "raw filesystem access (std::fs, tokio::fs, rustix::fs, File, OpenOptions, read_dir, canonicalize, Path::exists and kin) outside crates/vfs/src/storage/",
        fix: "go through a vfs accessor (AgentAccessor/PrivilegedAccessor); only crates/vfs/src/storage/ touches the disk",
    },
    Rule {
        id: PATH_FIELD,
        summary: "a public agent-facing type (vfs ops results and arguments, error payloads, host tool types, anything deriving JsonSchema) with a Path, PathBuf, OsStr or OsString field",
        fix: "carry a vfs::VirtualPath (or a String of one) instead of a host path",
    },
    Rule {
        id: MINT,
        summary: "MountRegistry::mint_privileged called outside the host's exchange logger and journal modules (test code needs a stated reason)",
        fix: "take the capability from the exchange logger, or mint it there; in a test, add #[expect(clippy::disallowed_methods, reason = \"…\")]",
    },
    Rule {
        id: AMBIENT,
        summary: "vfs::ambient_authority() called (or named as a value) outside the binaries' main (crates/cli, crates/vfs-compliance), examples and test code",
        fix: "take the AmbientAuthority as a parameter from the caller; only the binary's main mints it (ADR 0010)",
    },
    Rule {
        id: AGENT_TEXT,
        summary: "an io::Error or a host path (a Path/PathBuf/OsStr value, `.display()`, `.to_string_lossy()`) formatted into text in an agent-facing module",
        fix: "build the text from the VirtualPath and fixed wording; keep the io::Error as the error's source()",
    },
    Rule {
        id: CLIPPY_LIST,
        summary: "clippy.toml no longer lists a disallowed method or type the doctrine relies on",
        fix: "restore the entry in clippy.toml (disallowed-methods / disallowed-types)",
    },
    Rule {
        id: EXEMPTION,
        summary: "an exemption without a ratified reason, or a malformed `vfs-compliance:` comment",
        fix: "write `// vfs-compliance: allow(RULE) reason=TAG: why` with TAG from the ratified list (fixture, tooling, operator-input, capability-proof)",
    },
    Rule {
        id: PARSE,
        summary: "a Rust file that syn cannot parse (the check cannot vouch for it)",
        fix: "make the file parse (cargo check shows the error)",
    },
];

/// The ratified exemption reasons: `reason=TAG` in a comment, or `reason = "TAG: …"` in a
/// clippy `#[expect]`/`#[allow]` attribute.
pub const REASONS: &[(&str, &str)] = &[
    ("fixture", "test or conformance-kit code that builds or inspects on-disk fixtures"),
    ("tooling", "developer tooling that reads the workspace's own files and never runs in the server"),
    ("operator-input", "reads a file the operator named (settings, crew) at launch, before anything is served"),
    ("capability-proof", "test or kit code that mints a privileged accessor to prove what it reaches"),
];

/// Files (relative to the workspace) where `mint_privileged` may be called: the host crate's
/// exchange logger module, under any of the names it may take, and its journal.
pub const MINT_SITES: &[&str] = &[
    "crates/host/src/exchange_log.rs",
    "crates/host/src/exchange_logger.rs",
    "crates/host/src/logger.rs",
    "crates/host/src/exchange_log/",
    "crates/host/src/logger/",
    "crates/host/src/journal.rs",
];

/// Files (relative to the workspace) where `ambient_authority()` may be called: the binaries'
/// `main`s, which mint the one token a launch (or the leak checker) opens host paths with.
/// Test code and examples (programs of their own, each with its `main`) may mint too.
pub const AMBIENT_SITES: &[&str] = &["crates/cli/src/main.rs", "crates/vfs-compliance/src/main.rs"];

/// Disallowed methods `clippy.toml` must keep listing.
pub const REQUIRED_METHODS: &[&str] = &[
    "std::fs::read",
    "std::fs::read_to_string",
    "std::fs::write",
    "std::fs::read_dir",
    "std::fs::metadata",
    "std::fs::symlink_metadata",
    "std::fs::canonicalize",
    "std::fs::create_dir",
    "std::fs::create_dir_all",
    "std::fs::remove_file",
    "std::fs::remove_dir",
    "std::fs::remove_dir_all",
    "std::fs::rename",
    "std::fs::copy",
    "std::fs::hard_link",
    "std::fs::read_link",
    "std::path::Path::exists",
    "std::path::Path::is_dir",
    "std::path::Path::is_file",
    "std::path::Path::metadata",
    "std::path::Path::canonicalize",
    "std::path::Path::read_dir",
    "vfs::MountRegistry::mint_privileged",
];

/// Disallowed types `clippy.toml` must keep listing.
pub const REQUIRED_TYPES: &[&str] = &["std::fs::File", "std::fs::OpenOptions"];

/// Module paths whose every use is raw filesystem access.
const RAW_FS_PREFIXES: &[&[&str]] = &[
    &["std", "fs"],
    &["tokio", "fs"],
    &["async_std", "fs"],
    &["rustix", "fs"],
    &["nix", "fcntl"],
    &["std", "os", "unix", "fs"],
    &["cap_std"],
    &["walkdir"],
    &["tempfile"],
    &["ignore", "Walk"],
    &["ignore", "WalkBuilder"],
];

/// Methods that reach the disk by an ambient path (`Path`, `PathBuf`, `DirEntry`).
const RAW_FS_METHODS: &[&str] = &[
    "exists",
    "try_exists",
    "is_dir",
    "is_file",
    "is_symlink",
    "metadata",
    "symlink_metadata",
    "canonicalize",
    "read_dir",
    "read_link",
];

/// Type names that hold a host path.
const HOST_PATH_TYPES: &[&str] = &["Path", "PathBuf", "OsStr", "OsString"];

/// Methods that turn a host path into text.
const HOST_PATH_TEXT_METHODS: &[&str] = &["display", "to_string_lossy", "as_os_str", "into_os_string"];

/// Formatting macros whose output may reach an agent.
const FORMAT_MACROS: &[&str] = &["format", "format_args", "write", "writeln"];

/// One finding: rule, place, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The file, relative to the checked directory, `/`-separated.
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// The rule id.
    pub rule: &'static str,
    /// What is wrong.
    pub message: String,
}

impl Finding {
    /// The rule's one-line fix.
    #[must_use]
    pub fn fix(&self) -> &'static str {
        RULES.iter().find(|rule| rule.id == self.rule).map_or("", |rule| rule.fix)
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} {}:{}: {}\n  fix: {}", self.rule, self.file, self.line, self.message, self.fix())
    }
}

/// What the check found over a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Rust files parsed.
    pub files: usize,
    /// Findings, sorted by file and line.
    pub findings: Vec<Finding>,
}

/// Checks every `.rs` file under `root` (skipping `target`, hidden directories and fuzz
/// artifacts) and `root/clippy.toml`.
pub fn check_workspace(root: &Path) -> Result<Report, CheckError> {
    let mut files = Vec::new();
    collect_rust_files(root, root, &mut files)?;
    files.sort();
    let mut report = Report { files: files.len(), findings: Vec::new() };
    for relative in &files {
        let path = root.join(relative);
        let source = std::fs::read_to_string(&path).map_err(|source| CheckError::Read { path, source })?;
        report.findings.extend(check_source(relative, &source));
    }
    let clippy = std::fs::read_to_string(root.join("clippy.toml")).ok();
    report.findings.extend(check_clippy_config(clippy.as_deref()));
    report.findings.sort();
    Ok(report)
}

fn collect_rust_files(root: &Path, directory: &Path, files: &mut Vec<String>) -> Result<(), CheckError> {
    let entries =
        std::fs::read_dir(directory).map_err(|source| CheckError::Read { path: directory.to_path_buf(), source })?;
    for entry in entries {
        let entry = entry.map_err(|source| CheckError::Read { path: directory.to_path_buf(), source })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().map_err(|source| CheckError::Read { path: entry.path(), source })?;
        let path = entry.path();
        let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        if kind.is_dir() {
            let skipped = name.starts_with('.')
                || matches!(name.as_str(), "target" | "node_modules" | "corpus" | "artifacts" | "coverage");
            if !skipped {
                collect_rust_files(root, &path, files)?;
            }
        } else if kind.is_file() && Path::new(&name).extension().is_some_and(|extension| extension == "rs") {
            files.push(relative);
        }
    }
    Ok(())
}

/// Where a file sits, which decides the rules in scope.
#[derive(Debug, Clone, Copy, Default)]
#[expect(clippy::struct_excessive_bools, reason = "five independent facts about a file's place")]
struct Scope {
    storage: bool,
    test_file: bool,
    agent_facing: bool,
    mint_site: bool,
    ambient_site: bool,
}

impl Scope {
    fn of(relative: &str) -> Self {
        let components: Vec<&str> = relative.split('/').collect();
        let file_name = components.last().copied().unwrap_or_default();
        let test_file = components.iter().any(|part| matches!(*part, "tests" | "benches"))
            || relative.starts_with("fuzz/")
            || matches!(file_name, "tests.rs" | "testutil.rs");
        // The MCP surface: files named for it, every part of it under `tools/` (handlers,
        // table, schemas), and the words it gives the core's hints.
        let host_tool = relative.starts_with("crates/host/src/")
            && (["tool", "mcp", "server"].iter().any(|word| file_name.contains(word))
                || relative.starts_with("crates/host/src/tools/")
                || relative == "crates/host/src/words.rs");
        let agent_facing = relative.starts_with("crates/vfs/src/ops/")
            || matches!(
                relative,
                "crates/vfs/src/error.rs"
                    | "crates/vfs/src/access.rs"
                    | "crates/vfs/src/path.rs"
                    | "crates/vfs/src/text.rs"
            )
            || host_tool;
        Self {
            storage: relative.starts_with("crates/vfs/src/storage/"),
            test_file,
            agent_facing,
            mint_site: MINT_SITES
                .iter()
                .any(|site| relative == *site || (site.ends_with('/') && relative.starts_with(site))),
            // Cargo's examples, each a program with its own `main`: `examples/` of a package,
            // not any directory of that name (a module `src/examples/` is library code).
            ambient_site: AMBIENT_SITES.contains(&relative)
                || matches!(components.as_slice(), ["crates", _, "examples", ..] | ["examples", ..]),
        }
    }
}

/// A finding before scopes and exemptions are applied.
#[derive(Debug, Clone)]
struct Raw {
    rule: &'static str,
    line: usize,
    message: String,
}

/// A clippy `#[expect]`/`#[allow]` of `disallowed_methods`/`disallowed_types`: an exemption from
/// our raw-fs (and, for methods, mint) rules when its reason carries a ratified tag.
#[derive(Debug, Clone)]
struct AttributeExemption {
    line: usize,
    start: usize,
    end: usize,
    rules: Vec<&'static str>,
    reason: Option<String>,
}

/// A `// vfs-compliance: allow(…) reason=…` comment.
#[derive(Debug, Clone)]
struct CommentExemption {
    start: usize,
    end: usize,
    rules: Vec<&'static str>,
}

/// Checks one file's source; `relative` decides which rules apply (see [`check_workspace`]).
#[must_use]
pub fn check_source(relative: &str, source: &str) -> Vec<Finding> {
    let scope = Scope::of(relative);
    let finding =
        |rule: &'static str, line: usize, message: String| Finding { file: relative.to_owned(), line, rule, message };
    let file = match syn::parse_file(source) {
        Ok(file) => file,
        Err(error) => {
            return vec![finding(PARSE, error.span().start().line, format!("syn cannot parse this file: {error}"))];
        }
    };
    let mut scan = Scan { scope, ..Scan::default() };
    let total_lines = source.lines().count().max(1);
    for attribute in &file.attrs {
        scan.attribute(attribute, 1, total_lines);
    }
    scan.visit_file(&file);

    let mut findings = Vec::new();
    let (comments, malformed) = comment_exemptions(source, &scan.nodes, total_lines);
    for (line, message) in malformed {
        findings.push(finding(EXEMPTION, line, message));
    }
    let in_test = |line: usize| scope.test_file || scan.tests.iter().any(|&(start, end)| start <= line && line <= end);
    let commented = |rule: &str, line: usize| {
        comments.iter().any(|item| item.rules.contains(&rule) && item.start <= line && line <= item.end)
    };
    let mut weak_attributes = BTreeSet::new();
    for raw in scan.raw {
        let test = in_test(raw.line);
        let out_of_scope = match raw.rule {
            RAW_FS => scope.storage || test,
            MINT => scope.mint_site,
            AMBIENT => scope.ambient_site || test,
            _ => false,
        };
        if out_of_scope || commented(raw.rule, raw.line) {
            continue;
        }
        let covering: Vec<&AttributeExemption> = scan
            .attributes
            .iter()
            .filter(|item| item.rules.contains(&raw.rule) && item.start <= raw.line && raw.line <= item.end)
            .collect();
        if covering.iter().any(|item| item.reason.as_deref().is_some_and(has_ratified_tag)) {
            continue;
        }
        if test && raw.rule == MINT {
            // Test code may mint, with a stated reason (clippy's lint forces the attribute).
            if covering.iter().any(|item| item.reason.as_deref().is_some_and(|reason| !reason.trim().is_empty())) {
                continue;
            }
            findings.push(finding(
                MINT,
                raw.line,
                "test code mints a privileged accessor without saying why".to_owned(),
            ));
            continue;
        }
        if let Some(attribute) = covering.first() {
            if weak_attributes.insert(attribute.line) {
                findings.push(finding(
                    EXEMPTION,
                    attribute.line,
                    format!(
                        "this clippy exemption covers a `{}` finding (line {}) but its reason does not start with a ratified tag ({})",
                        raw.rule,
                        raw.line,
                        ratified_tags()
                    ),
                ));
            }
            continue;
        }
        findings.push(finding(raw.rule, raw.line, raw.message));
    }
    findings.sort();
    findings.dedup();
    findings
}

fn ratified_tags() -> String {
    REASONS.iter().map(|(tag, _)| *tag).collect::<Vec<_>>().join(", ")
}

/// True when `reason` starts with a ratified tag followed by `:` or the end.
fn has_ratified_tag(reason: &str) -> bool {
    let reason = reason.trim();
    REASONS.iter().any(|(tag, _)| reason.strip_prefix(tag).is_some_and(|rest| rest.is_empty() || rest.starts_with(':')))
}

/// Checks that `clippy.toml` still lists every disallowed method and type.
#[must_use]
pub fn check_clippy_config(text: Option<&str>) -> Vec<Finding> {
    let Some(text) = text else {
        return vec![Finding {
            file: "clippy.toml".to_owned(),
            line: 1,
            rule: CLIPPY_LIST,
            message: "clippy.toml is missing; it must list the disallowed filesystem methods and types".to_owned(),
        }];
    };
    let mut findings = Vec::new();
    for (key, required) in [("disallowed-methods", REQUIRED_METHODS), ("disallowed-types", REQUIRED_TYPES)] {
        let (line, listed) = toml_array_paths(text, key);
        for path in required {
            if !listed.iter().any(|item| item == path) {
                findings.push(Finding {
                    file: "clippy.toml".to_owned(),
                    line,
                    rule: CLIPPY_LIST,
                    message: format!("`{key}` no longer lists `{path}`"),
                });
            }
        }
    }
    findings
}

/// The `path = "…"` values (or bare strings) of the array under `key`, and the key's line.
fn toml_array_paths(text: &str, key: &str) -> (usize, Vec<String>) {
    let Some(position) = text
        .lines()
        .scan(0usize, |offset, line| {
            let start = *offset;
            *offset += line.len() + 1;
            Some((start, line))
        })
        .find(|(_, line)| {
            let trimmed = line.trim_start();
            !trimmed.starts_with('#')
                && trimmed.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|(start, _)| start)
    else {
        return (1, Vec::new());
    };
    let line = text[..position].matches('\n').count() + 1;
    let rest = &text[position..];
    let Some(open) = rest.find('[') else { return (line, Vec::new()) };
    let mut values = Vec::new();
    let mut depth = 0usize;
    let mut chars = rest[open..].char_indices().peekable();
    let mut pending_key: Option<String> = None;
    let mut word = String::new();
    while let Some((_, character)) = chars.next() {
        match character {
            '#' => {
                // A comment runs to the end of the line.
                for (_, next) in chars.by_ref() {
                    if next == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut value = String::new();
                while let Some((_, next)) = chars.next() {
                    match next {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                value.push(escaped);
                            }
                        }
                        '"' => break,
                        other => value.push(other),
                    }
                }
                match pending_key.take().as_deref() {
                    Some("path") => values.push(value),
                    None if depth == 1 => values.push(value),
                    _ => {}
                }
            }
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            '=' => pending_key = Some(std::mem::take(&mut word)),
            ',' => {
                word.clear();
                pending_key = None;
            }
            other if other.is_alphanumeric() || other == '-' || other == '_' => word.push(other),
            _ => {}
        }
    }
    (line, values)
}

/// Parses `// vfs-compliance: …` comments: the valid exemptions with the lines they cover, and
/// the malformed ones as `(line, message)`.
fn comment_exemptions(
    source: &str,
    nodes: &[(usize, usize)],
    total_lines: usize,
) -> (Vec<CommentExemption>, Vec<(usize, String)>) {
    let literals = literal_ranges(source);
    let lines: Vec<&str> = source.lines().collect();
    let mut valid = Vec::new();
    let mut malformed = Vec::new();
    for (index, text) in lines.iter().enumerate() {
        let line = index + 1;
        let Some(column) = marker_column(text) else { continue };
        let char_column = text[..column].chars().count();
        if literals.iter().any(|&(start, end)| (line, char_column) > start && (line, char_column) < end) {
            continue;
        }
        let comment = &text[column..];
        let standalone = text[..column].trim().is_empty();
        let body = comment.trim_start_matches('/').trim_start().trim_start_matches("vfs-compliance:").trim();
        match parse_exemption(body) {
            Ok((whole_file, rules)) => {
                let (start, end) = if whole_file {
                    (1, total_lines)
                } else if standalone {
                    let next = (index + 1..lines.len())
                        .find(|&next| {
                            let trimmed = lines[next].trim();
                            !trimmed.is_empty() && !trimmed.starts_with("//")
                        })
                        .map_or(line, |next| next + 1);
                    let end = nodes.iter().filter(|(start, _)| *start == next).map(|(_, end)| *end).max();
                    (next, end.unwrap_or(next))
                } else {
                    (line, line)
                };
                valid.push(CommentExemption { start, end, rules });
            }
            Err(message) => malformed.push((line, message)),
        }
    }
    (valid, malformed)
}

/// The byte column of a `// vfs-compliance:` comment (not a doc comment) on this line.
fn marker_column(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(offset) = text[from..].find("//") {
        let column = from + offset;
        let after = &text[column + 2..];
        let is_doc = after.starts_with('/') || after.starts_with('!');
        if !is_doc && after.trim_start().starts_with("vfs-compliance:") {
            return Some(column);
        }
        from = column + 2;
    }
    None
}

/// `allow(raw-fs, mint-privileged) reason=fixture: why` → (whole file?, rules).
fn parse_exemption(body: &str) -> Result<(bool, Vec<&'static str>), String> {
    let (whole_file, rest) = if let Some(rest) = body.strip_prefix("allow-file(") {
        (true, rest)
    } else if let Some(rest) = body.strip_prefix("allow(") {
        (false, rest)
    } else {
        return Err(
            "a `vfs-compliance:` comment must read `allow(RULE) reason=TAG: why` (or `allow-file(…)`)".to_owned()
        );
    };
    let Some((list, after)) = rest.split_once(')') else {
        return Err("the exemption's rule list has no closing `)`".to_owned());
    };
    let mut rules = Vec::new();
    for name in list.split(',').map(str::trim) {
        match RULES.iter().find(|rule| rule.id == name && ![EXEMPTION, PARSE, CLIPPY_LIST].contains(&rule.id)) {
            Some(rule) => rules.push(rule.id),
            None => return Err(format!("the exemption names `{name}`, which is not an exemptable rule")),
        }
    }
    let Some(reason) = after.trim().strip_prefix("reason=") else {
        return Err(format!("the exemption has no `reason=TAG`; ratified tags: {}", ratified_tags()));
    };
    let tag = reason.split(':').next().unwrap_or_default().trim();
    if !REASONS.iter().any(|(ratified, _)| *ratified == tag) {
        return Err(format!("`{tag}` is not a ratified reason; ratified tags: {}", ratified_tags()));
    }
    Ok((whole_file, rules))
}

/// A (line, column) start and end.
type LineColumnRange = ((usize, usize), (usize, usize));

/// (start, end) line/column ranges of every literal token, so that a marker inside a string is
/// not taken for a comment.
fn literal_ranges(source: &str) -> Vec<LineColumnRange> {
    fn walk(stream: TokenStream, ranges: &mut Vec<LineColumnRange>) {
        for tree in stream {
            match tree {
                TokenTree::Group(group) => walk(group.stream(), ranges),
                TokenTree::Literal(literal) => {
                    let span = literal.span();
                    ranges.push(((span.start().line, span.start().column), (span.end().line, span.end().column)));
                }
                _ => {}
            }
        }
    }
    let mut ranges = Vec::new();
    if let Ok(stream) = source.parse::<TokenStream>() {
        walk(stream, &mut ranges);
    }
    ranges
}

#[derive(Default)]
struct Scan {
    scope: Scope,
    raw: Vec<Raw>,
    attributes: Vec<AttributeExemption>,
    /// Line ranges of `#[cfg(test)]` and `#[test]` items.
    tests: Vec<(usize, usize)>,
    /// Line ranges of items, statements, fields and arms (what a standalone comment covers).
    nodes: Vec<(usize, usize)>,
    /// Names bound to a host path or an `io::Error`, per function scope.
    typed: Vec<Vec<String>>,
}

impl Scan {
    fn push(&mut self, rule: &'static str, line: usize, message: String) {
        self.raw.push(Raw { rule, line, message });
    }

    fn node(&mut self, node: &impl Spanned, attributes: &[Attribute]) {
        let span = node.span();
        let (start, end) = (span.start().line, span.end().line);
        self.nodes.push((start, end));
        for attribute in attributes {
            self.attribute(attribute, start, end);
        }
    }

    /// Records what an attribute says about the lines `start..=end`.
    fn attribute(&mut self, attribute: &Attribute, start: usize, end: usize) {
        let path = attribute.path();
        if path.segments.last().is_some_and(|segment| segment.ident == "test") {
            self.tests.push((start, end));
            return;
        }
        if path.is_ident("cfg") {
            if let Meta::List(list) = &attribute.meta
                && list.parse_args::<Meta>().is_ok_and(|predicate| requires_test(&predicate))
            {
                self.tests.push((start, end));
            }
            return;
        }
        if !(path.is_ident("expect") || path.is_ident("allow")) {
            return;
        }
        let Ok(items) = attribute.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) else {
            return;
        };
        let mut rules = Vec::new();
        let mut reason = None;
        for item in items {
            match item {
                Meta::Path(path) => {
                    let names: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
                    match names.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                        ["clippy", "disallowed_methods"] => rules.extend([RAW_FS, MINT]),
                        ["clippy", "disallowed_types"] => rules.push(RAW_FS),
                        _ => {}
                    }
                }
                Meta::NameValue(pair) if pair.path.is_ident("reason") => {
                    if let Expr::Lit(literal) = &pair.value
                        && let Lit::Str(text) = &literal.lit
                    {
                        reason = Some(text.value());
                    }
                }
                _ => {}
            }
        }
        if !rules.is_empty() {
            rules.dedup();
            self.attributes.push(AttributeExemption { line: attribute.span().start().line, start, end, rules, reason });
        }
    }

    fn check_path(&mut self, segments: &[String], line: usize) {
        for prefix in RAW_FS_PREFIXES {
            if segments.len() >= prefix.len() && segments.iter().zip(prefix.iter()).all(|(left, right)| left == right) {
                self.push(RAW_FS, line, format!("raw filesystem access through `{}`", segments.join("::")));
                return;
            }
        }
        if let [.., owner, method] = segments
            && matches!(owner.as_str(), "Path" | "PathBuf" | "DirEntry")
            && RAW_FS_METHODS.contains(&method.as_str())
        {
            self.push(RAW_FS, line, format!("`{owner}::{method}` reaches the disk by an ambient path"));
        }
        if segments.last().is_some_and(|last| last == "mint_privileged") && segments.len() > 1 {
            self.push(MINT, line, "the privileged capability is minted here".to_owned());
        }
    }

    fn is_typed(&self, name: &str) -> bool {
        self.typed.iter().any(|scope| scope.iter().any(|item| item == name))
    }

    fn bind_typed(&mut self, pattern: &Pat) {
        if let Pat::Type(typed) = pattern {
            self.bind_typed_parts(&typed.pat, &typed.ty);
        }
    }

    fn bind_typed_parts(&mut self, pattern: &Pat, ty: &Type) {
        if (type_mentions(ty, HOST_PATH_TYPES).is_some() || mentions_io_error(ty))
            && let Pat::Ident(binding) = pattern
            && let Some(scope) = self.typed.last_mut()
        {
            scope.push(binding.ident.to_string());
        }
    }

    /// Rule `agent-text`: what a formatting macro in an agent-facing module puts into text.
    fn check_format(&mut self, name: &str, arguments: &Punctuated<Expr, Token![,]>, line: usize) {
        let skip = usize::from(matches!(name, "write" | "writeln"));
        let mut arguments = arguments.iter().skip(skip);
        if let Some(Expr::Lit(literal)) = arguments.next()
            && let Lit::Str(text) = &literal.lit
        {
            for capture in inline_captures(&text.value()) {
                if self.is_typed(&capture) {
                    self.push(AGENT_TEXT, line, format!("`{{{capture}}}` formats a host path or an io::Error"));
                }
            }
        }
        for argument in arguments {
            let value = match argument {
                Expr::Assign(assign) => &*assign.right,
                other => other,
            };
            let mut finder = TextLeak { typed: &self.typed, found: None };
            finder.visit_expr(value);
            if let Some(what) = finder.found {
                self.push(AGENT_TEXT, value.span().start().line, format!("{what} is formatted into agent-facing text"));
            }
        }
    }

    fn check_type_fields(&mut self, attributes: &[Attribute], public: bool, fields: Vec<&Fields>, name: &str) {
        let schema = attributes.iter().any(derives_json_schema);
        if !(public && (self.scope.agent_facing || schema)) {
            return;
        }
        for field in fields.into_iter().flat_map(|fields| fields.iter()) {
            if let Some(found) = type_mentions(&field.ty, HOST_PATH_TYPES) {
                let label =
                    field.ident.as_ref().map_or_else(|| "a field".to_owned(), |ident| format!("field `{ident}`"));
                self.push(
                    PATH_FIELD,
                    field.span().start().line,
                    format!("public agent-facing type `{name}` has {label} of type `{found}`"),
                );
            }
        }
    }
}

/// True when a `cfg` predicate holds only in test builds: `test`, `all(…)` with a part that
/// does, `any(…)` whose every part does. (`any(test, unix)` builds in production too.)
fn requires_test(predicate: &Meta) -> bool {
    match predicate {
        Meta::Path(path) => path.is_ident("test"),
        Meta::List(list) => {
            let Ok(parts) = list.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated) else {
                return false;
            };
            if list.path.is_ident("all") {
                parts.iter().any(requires_test)
            } else if list.path.is_ident("any") {
                !parts.is_empty() && parts.iter().all(requires_test)
            } else {
                false
            }
        }
        Meta::NameValue(_) => false,
    }
}

/// True when `tokens` name `ident` anywhere, groups included.
fn names_ident(tokens: TokenStream, ident: &str) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(found) => found == ident,
        TokenTree::Group(group) => names_ident(group.stream(), ident),
        _ => false,
    })
}

fn derives_json_schema(attribute: &Attribute) -> bool {
    attribute.path().is_ident("derive")
        && attribute
            .parse_args_with(Punctuated::<syn::Path, Token![,]>::parse_terminated)
            .is_ok_and(|paths| paths.iter().any(|path| path.segments.last().is_some_and(|s| s.ident == "JsonSchema")))
}

/// The first of `names` that the type mentions as a path segment.
fn type_mentions(ty: &Type, names: &[&str]) -> Option<String> {
    struct Finder<'n> {
        names: &'n [&'n str],
        found: Option<String>,
    }
    impl<'ast> Visit<'ast> for Finder<'_> {
        fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
            if self.found.is_none() && self.names.iter().any(|name| segment.ident == name) {
                self.found = Some(segment.ident.to_string());
            }
            visit::visit_path_segment(self, segment);
        }
    }
    let mut finder = Finder { names, found: None };
    finder.visit_type(ty);
    finder.found
}

fn mentions_io_error(ty: &Type) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_path(&mut self, path: &'ast syn::Path) {
            let names: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
            if names.windows(2).any(|pair| pair[0] == "io" && pair[1] == "Error") {
                self.0 = true;
            }
            visit::visit_path(self, path);
        }
    }
    let mut finder = Finder(false);
    finder.visit_type(ty);
    finder.0
}

/// `{name}`, `{name:?}`, `{name:>8}` captures of a format string.
fn inline_captures(format: &str) -> Vec<String> {
    let mut captures = Vec::new();
    let mut chars = format.chars().peekable();
    while let Some(character) = chars.next() {
        if character == '{' {
            if chars.peek() == Some(&'{') {
                chars.next();
                continue;
            }
            let mut name = String::new();
            while let Some(&next) = chars.peek() {
                if next == '}' || next == ':' {
                    break;
                }
                name.push(next);
                chars.next();
            }
            let name = name.trim();
            if name.chars().next().is_some_and(|first| first.is_alphabetic() || first == '_') {
                captures.push(name.to_owned());
            }
        }
    }
    captures
}

/// Finds a host path or an `io::Error` inside one formatting argument.
struct TextLeak<'s> {
    typed: &'s [Vec<String>],
    found: Option<String>,
}

impl<'ast> Visit<'ast> for TextLeak<'_> {
    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let method = call.method.to_string();
        if self.found.is_none() && HOST_PATH_TEXT_METHODS.contains(&method.as_str()) {
            self.found = Some(format!("a host path (`.{method}()`)"));
        }
        visit::visit_expr_method_call(self, call);
    }

    fn visit_expr_path(&mut self, path: &'ast syn::ExprPath) {
        let names: Vec<String> = path.path.segments.iter().map(|segment| segment.ident.to_string()).collect();
        if self.found.is_none() {
            if names.windows(2).any(|pair| pair[0] == "io" && pair[1] == "Error") {
                self.found = Some("an io::Error".to_owned());
            } else if let [name] = names.as_slice()
                && self.typed.iter().any(|scope| scope.contains(name))
            {
                self.found = Some(format!("`{name}` (a host path or an io::Error)"));
            }
        }
        visit::visit_expr_path(self, path);
    }

    fn visit_expr_closure(&mut self, _closure: &'ast syn::ExprClosure) {}
}

fn path_names(path: &syn::Path) -> Vec<String> {
    path.segments.iter().map(|segment| segment.ident.to_string()).collect()
}

fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, output: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(path) => {
            prefix.push(path.ident.to_string());
            use_paths(&path.tree, prefix, output);
            prefix.pop();
        }
        syn::UseTree::Name(name) => {
            let mut full = prefix.clone();
            if name.ident != "self" {
                full.push(name.ident.to_string());
            }
            output.push(full);
        }
        syn::UseTree::Rename(rename) => {
            let mut full = prefix.clone();
            full.push(rename.ident.to_string());
            output.push(full);
        }
        syn::UseTree::Glob(_) => output.push(prefix.clone()),
        syn::UseTree::Group(group) => {
            for item in &group.items {
                use_paths(item, prefix, output);
            }
        }
    }
}

fn item_attributes(item: &Item) -> &[Attribute] {
    match item {
        Item::Const(item) => &item.attrs,
        Item::Enum(item) => &item.attrs,
        Item::ExternCrate(item) => &item.attrs,
        Item::Fn(item) => &item.attrs,
        Item::ForeignMod(item) => &item.attrs,
        Item::Impl(item) => &item.attrs,
        Item::Macro(item) => &item.attrs,
        Item::Mod(item) => &item.attrs,
        Item::Static(item) => &item.attrs,
        Item::Struct(item) => &item.attrs,
        Item::Trait(item) => &item.attrs,
        Item::TraitAlias(item) => &item.attrs,
        Item::Type(item) => &item.attrs,
        Item::Union(item) => &item.attrs,
        Item::Use(item) => &item.attrs,
        _ => &[],
    }
}

fn expression_attributes(expression: &Expr) -> &[Attribute] {
    match expression {
        Expr::Call(item) => &item.attrs,
        Expr::MethodCall(item) => &item.attrs,
        Expr::Block(item) => &item.attrs,
        Expr::Macro(item) => &item.attrs,
        Expr::Assign(item) => &item.attrs,
        Expr::Let(item) => &item.attrs,
        Expr::If(item) => &item.attrs,
        Expr::Match(item) => &item.attrs,
        Expr::Closure(item) => &item.attrs,
        Expr::Unsafe(item) => &item.attrs,
        _ => &[],
    }
}

impl<'ast> Visit<'ast> for Scan {
    fn visit_item(&mut self, item: &'ast Item) {
        self.node(item, item_attributes(item));
        match item {
            Item::Struct(structure) => {
                let public = matches!(structure.vis, syn::Visibility::Public(_));
                self.check_type_fields(&structure.attrs, public, vec![&structure.fields], &structure.ident.to_string());
            }
            Item::Enum(enumeration) => {
                let public = matches!(enumeration.vis, syn::Visibility::Public(_));
                let fields = enumeration.variants.iter().map(|variant| &variant.fields).collect();
                self.check_type_fields(&enumeration.attrs, public, fields, &enumeration.ident.to_string());
            }
            Item::Use(declaration) => {
                let mut paths = Vec::new();
                use_paths(&declaration.tree, &mut Vec::new(), &mut paths);
                for path in paths {
                    self.check_path(&path, declaration.span().start().line);
                }
            }
            _ => {}
        }
        visit::visit_item(self, item);
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attributes: &[Attribute] = match item {
            syn::ImplItem::Const(item) => &item.attrs,
            syn::ImplItem::Fn(item) => &item.attrs,
            syn::ImplItem::Type(item) => &item.attrs,
            syn::ImplItem::Macro(item) => &item.attrs,
            _ => &[],
        };
        self.node(item, attributes);
        visit::visit_impl_item(self, item);
    }

    fn visit_trait_item(&mut self, item: &'ast syn::TraitItem) {
        let attributes: &[Attribute] = match item {
            syn::TraitItem::Const(item) => &item.attrs,
            syn::TraitItem::Fn(item) => &item.attrs,
            syn::TraitItem::Type(item) => &item.attrs,
            syn::TraitItem::Macro(item) => &item.attrs,
            _ => &[],
        };
        self.node(item, attributes);
        visit::visit_trait_item(self, item);
    }

    fn visit_stmt(&mut self, statement: &'ast syn::Stmt) {
        match statement {
            syn::Stmt::Local(local) => {
                self.node(statement, &local.attrs);
                self.bind_typed(&local.pat);
            }
            syn::Stmt::Expr(expression, _) => self.node(statement, expression_attributes(expression)),
            syn::Stmt::Macro(mac) => self.node(statement, &mac.attrs),
            syn::Stmt::Item(_) => {}
        }
        visit::visit_stmt(self, statement);
    }

    fn visit_field(&mut self, field: &'ast syn::Field) {
        self.node(field, &field.attrs);
        visit::visit_field(self, field);
    }

    fn visit_arm(&mut self, arm: &'ast syn::Arm) {
        self.node(arm, &arm.attrs);
        visit::visit_arm(self, arm);
    }

    fn visit_signature(&mut self, signature: &'ast syn::Signature) {
        for input in &signature.inputs {
            if let syn::FnArg::Typed(typed) = input {
                self.bind_typed_parts(&typed.pat, &typed.ty);
            }
        }
        visit::visit_signature(self, signature);
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        self.typed.push(Vec::new());
        visit::visit_item_fn(self, function);
        self.typed.pop();
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        self.typed.push(Vec::new());
        visit::visit_impl_item_fn(self, function);
        self.typed.pop();
    }

    fn visit_expr_closure(&mut self, closure: &'ast syn::ExprClosure) {
        self.typed.push(Vec::new());
        for input in &closure.inputs {
            self.bind_typed(input);
        }
        visit::visit_expr_closure(self, closure);
        self.typed.pop();
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.check_path(&path_names(path), path.span().start().line);
        visit::visit_path(self, path);
    }

    /// Rule `ambient-authority`: a call of `ambient_authority`, or the function named as a
    /// value (a `use` that only names it, as the crate's re-export does, mints nothing).
    fn visit_expr_path(&mut self, path: &'ast syn::ExprPath) {
        if path.path.segments.last().is_some_and(|segment| segment.ident == "ambient_authority") {
            self.push(AMBIENT, path.span().start().line, "the ambient authority is minted here".to_owned());
        }
        visit::visit_expr_path(self, path);
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let method = call.method.to_string();
        let line = call.method.span().start().line;
        if RAW_FS_METHODS.contains(&method.as_str()) {
            self.push(RAW_FS, line, format!("`.{method}()` reaches the disk by an ambient path"));
        }
        if method == "mint_privileged" {
            self.push(MINT, line, "the privileged capability is minted here".to_owned());
        }
        visit::visit_expr_method_call(self, call);
    }

    /// Rule `ambient-authority` again: a renamed import would let a call go unseen.
    fn visit_use_rename(&mut self, rename: &'ast syn::UseRename) {
        if rename.ident == "ambient_authority" {
            self.push(
                AMBIENT,
                rename.span().start().line,
                format!("`ambient_authority` is imported as `{}`; call it by its own name", rename.rename),
            );
        }
        visit::visit_use_rename(self, rename);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        visit::visit_macro(self, mac);
        let Ok(arguments) = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated) else {
            // A body that is not a list of expressions (a `macro_rules!`, a DSL) is not walked:
            // a mint inside it is found by its name.
            if names_ident(mac.tokens.clone(), "ambient_authority") {
                self.push(
                    AMBIENT,
                    mac.span().start().line,
                    "the ambient authority is named in a macro here".to_owned(),
                );
            }
            return;
        };
        let name = mac.path.segments.last().map(|segment| segment.ident.to_string()).unwrap_or_default();
        if self.scope.agent_facing && FORMAT_MACROS.contains(&name.as_str()) {
            self.check_format(&name, &arguments, mac.span().start().line);
        }
        for argument in &arguments {
            self.visit_expr(argument);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratified_tags_need_a_separator() {
        assert!(has_ratified_tag("fixture: tests build fixtures"));
        assert!(has_ratified_tag("tooling"));
        assert!(!has_ratified_tag("fixtures are needed"));
        assert!(!has_ratified_tag("tests build fixtures on disk"));
    }

    #[test]
    fn captures_skip_escapes_and_positions() {
        assert_eq!(inline_captures("{a} {{b}} {} {0} {c:?} {d:>8}"), ["a", "c", "d"]);
    }

    #[test]
    fn clippy_arrays_are_read_with_comments_and_tables() {
        let text = "disallowed-methods = [\n  # comment ]\n  { path = \"std::fs::read\", reason = \"x ] y\" },\n  \"std::fs::write\",\n]\ndisallowed-types = []\n";
        let (line, values) = toml_array_paths(text, "disallowed-methods");
        assert_eq!(line, 1);
        assert_eq!(values, ["std::fs::read", "std::fs::write"]);
        assert!(toml_array_paths(text, "disallowed-types").1.is_empty());
    }
}
