//! The agent tools of `docs/design.md` (contracts) and `docs/tools.md`: one dispatcher, and the
//! output it renders. The parts are beside it: the tool table (`table.rs`), the argument types
//! (`params.rs`) and their check (`arguments.rs`), the schemas (`schemas.rs`), the handlers
//! (`handlers.rs`), the wording of the core's hints (`words.rs`) and the session's state
//! (`session.rs`).
//!
//! The MCP server and `vfs call` both go through [`ToolService::call`], so what `vfs call`
//! prints is exactly what an agent would see. Text is rendered from [`vfs::AgentText`]: what
//! the server composed passes the registry's fail-closed scrub on the way out; file contents,
//! names read from disk and the agent's own input pass byte for byte (rewriting them would lose
//! data, and tell an agent which guessed paths are real). Structured content carries the exact
//! values; the error texts in it are rendered like the text content.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Value, json};
use vfs::{AgentAccessor, MountRegistry};

use crate::logger::{Exchange, ExchangeLogger, stamp};
use crate::words;

mod arguments;
mod handlers;
mod params;
pub(crate) mod run;
mod schemas;
mod session;

pub(crate) use session::{MAX_SEEN_BYTES_PER_TOKEN, SeenBudget};
mod table;
mod undo;

use handlers::parse;
use schemas::{FileOutput, FilesOutput};
pub use table::all_tools;
use table::{DEFINITIONS, Definition, Effect, JOURNAL_TOOLS, RUN_COMMAND, RUN_TOOL, TOOLS};

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
    /// The virtual path read, named by an embedded resource's URI (`Media::uri`).
    pub path: vfs::VirtualPath,
    /// Base64 data.
    pub data: String,
    /// The MIME type, like `image/png`.
    pub mime_type: String,
}

impl Media {
    /// The URI that names a file neither image nor audio in its embedded resource: `vfs:`
    /// and the virtual path, each byte outside the unreserved characters and `/`
    /// percent-encoded (`vfs:/src/a%20b.pdf`). A virtual path, never a `file:` URI a client
    /// could take for one of its own files.
    #[must_use]
    pub fn uri(&self) -> String {
        let mut uri = String::from("vfs:");
        for &byte in self.path.as_str().as_bytes() {
            if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
                uri.push(char::from(byte));
            } else {
                uri.push_str(&format!("%{byte:02X}"));
            }
        }
        uri
    }

    /// The content block that carries it: image or audio content for those types, else an
    /// embedded resource whose blob is the data.
    fn content(&self) -> ContentBlock {
        if self.mime_type.starts_with("image/") {
            ContentBlock::image(self.data.clone(), self.mime_type.clone())
        } else if self.mime_type.starts_with("audio/") {
            ContentBlock::audio(self.data.clone(), self.mime_type.clone())
        } else {
            ContentBlock::resource(rmcp::model::ResourceContents::BlobResourceContents {
                uri: self.uri(),
                mime_type: Some(self.mime_type.clone()),
                blob: self.data.clone(),
                meta: None,
            })
        }
    }
}

/// What a tool call returns to the agent (already scrubbed).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text content.
    pub text: String,
    /// The structured content (an object), absent for errors.
    pub structured: Option<Value>,
    /// Image, audio or embedded resource content (`read_media_file`).
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
        content.extend(self.media.as_ref().map(Media::content));
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

    /// Bounds what this session remembers with the other sessions of its token by `budget`
    /// (the daemon's sessions of the handshake protocol), when the read-before-edit rule is on.
    #[must_use]
    pub(crate) fn seen_within(mut self, budget: Arc<SeenBudget>) -> Self {
        if self.seen.is_some() {
            self.seen = Some(Arc::new(session::Seen::within(budget)));
        }
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
        let outcome = if let Some((journal, session)) = &self.journal {
            journal.begin(&call, session, None);
            // The call's entries are durable before it is answered, and with them its
            // changes: the log's sync stands for the syncs of the directories it changed.
            let (outcome, held) =
                agent.with_directory_syncs_held(|| guarded(name, || self.dispatch(name, &arguments, &agent)));
            journal.finish_with(&call, held);
            outcome
        } else {
            guarded(name, || self.dispatch(name, &arguments, &agent))
        };
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
        /// The tools that refuse an unknown argument instead of ignoring it.
        const UNKNOWN_REFUSED: [&str; 1] = ["undo_changes"];
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
        // A tool whose default acts on what no argument names does not run with an argument
        // it cannot read: `undo_changes` given a misspelt `changeId` undid the newest change
        // (red team).
        if !ignored.is_empty() && UNKNOWN_REFUSED.contains(&name) {
            return Ok(invalid(arguments::unknown_refusal(tool, &ignored)));
        }
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
        let mut structured = serde_json::to_value(FilesOutput { files }).unwrap_or(Value::Null);
        if let Some(Value::Array(files)) = structured.get_mut("files") {
            for (file, (_, result)) in files.iter_mut().zip(results) {
                if let (Some(read), Ok(result)) = (file.get_mut("read"), result) {
                    words::word_read_on(read, result.next);
                }
            }
        }
        self.success(&text, structured)
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

/// The names of the tools `service` lists, for the operator's start-up line (without making
/// the schemas, which the first `tools/list` makes).
pub(crate) fn listed_names(service: &ToolService) -> String {
    let writable = service.registry.agent_can_write();
    DEFINITIONS
        .iter()
        .filter(|definition| writable || matches!(definition.effect, Effect::Read))
        .filter(|definition| service.offers_journal(definition))
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
        let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
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

    /// Image and audio go as such; any other file as an embedded resource named by its
    /// virtual path, encoded (it went as image content, which no client could show).
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: files put where the mount reads")]
    fn media_go_as_image_audio_or_an_embedded_resource() {
        let (dir, tools) = service("ro");
        std::fs::write(dir.path().join("a b#%é.bin"), [0, 1, 2, 3]).unwrap();
        std::fs::write(dir.path().join("p.png"), [4]).unwrap();
        std::fs::write(dir.path().join("s.wav"), [5]).unwrap();
        let content = |path: &str| {
            let output = tools.call("read_media_file", json!({ "path": path }).as_object().cloned()).unwrap();
            let result = serde_json::to_value(output.to_call_result()).unwrap();
            result["content"][1].clone()
        };
        assert_eq!(
            content("/src/a b#%é.bin"),
            json!({
                "type": "resource",
                "resource": {
                    "uri": "vfs:/src/a%20b%23%25%C3%A9.bin",
                    "mimeType": "application/octet-stream",
                    "blob": "AAECAw==",
                },
            })
        );
        assert_eq!(content("/src/p.png"), json!({ "type": "image", "data": "BA==", "mimeType": "image/png" }));
        assert_eq!(content("/src/s.wav"), json!({ "type": "audio", "data": "BQ==", "mimeType": "audio/wav" }));
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
        // The operator's start-up line names exactly what `tools/list` lists (it named the
        // journal's tools without a journal).
        for rights in ["ro", "rwnd"] {
            let (_dir, tools) = service(rights);
            let listed: Vec<String> = tools.listed_tools().iter().map(|tool| tool.name.to_string()).collect();
            assert_eq!(listed_names(&tools), listed.join(", "), "{rights}");
        }
        let (_dir, read_only) = service("ro");
        assert_eq!(
            read_only.call("delete_file", Some(JsonObject::new())),
            Err(CallError::UnknownTool("delete_file".to_owned()))
        );
    }

    /// A whole number past 2^53 is said to be one, and what bounds it (it was "must be a
    /// whole number, not the number 1.8446744073709552e19"); no search asks for no match.
    #[test]
    fn counts_out_of_range_are_refused_saying_which_bound() {
        let (_dir, tools) = service("rw");
        let cases = [
            (
                "read_text_file",
                json!({ "path": "/src/a.txt", "head": -9_223_372_036_854_775_809.0 }),
                "`head` must be 0 or more, not -9.223372036854776e18",
            ),
            (
                "grep",
                json!({ "pattern": "x", "maxResults": 18_446_744_073_709_551_616.0 }),
                "`maxResults` is too large: give a whole number between -9007199254740992 and 9007199254740992, not 1.8446744073709552e19",
            ),
            ("grep", json!({ "pattern": "x", "maxResults": 0 }), "`maxResults` must be 1 or more, not 0"),
        ];
        for (name, arguments, message) in cases {
            let output = tools.call(name, arguments.as_object().cloned()).unwrap();
            assert!(output.is_error, "{name}");
            assert_eq!(output.text, format!("invalid arguments for `{name}`: {message}"));
        }
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
        // The structured content says how to read on in the tools' words, without the text.
        assert_eq!(
            output.structured,
            Some(json!({
                "path": "/src/a.txt", "startLine": 1, "lineCount": 1, "size": 8, "truncated": true,
                "next": "more lines follow; read on with offset: 2",
            }))
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

    /// Counts past their caps are taken as the caps, and said so in a note each.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the test writes a file to search")]
    fn counts_past_their_caps_are_the_caps_and_said_so() {
        let (dir, tools) = service("rw");
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let call = |name: &str, arguments: Value| tools.call(name, arguments.as_object().cloned()).unwrap();
        let output = call(
            "grep",
            json!({ "pattern": "one", "path": "/src", "context": 18_446_744_073_709_551_615_u64, "maxResults": 5000 }),
        );
        assert_eq!((output.is_error, output.text.as_str()), (false, "/src/a.txt:1:one\n/src/a.txt-2-two\n"));
        assert_eq!(
            output.notes,
            [
                "[`maxResults` 5000 is above the cap: at most 1000 matches are returned]",
                "[`context` 18446744073709551615 is above the cap: at most 20 lines are shown around each match]"
            ]
        );
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
            .build(vfs::ambient_authority())
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
            .build(vfs::ambient_authority())
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
