//! The exchange logger: one JSON line per tool call, in the internal root `/llm-logs`.
//!
//! It holds the only privileged capability the service mints, narrowed to appending, so the
//! logger can create and extend its own log file and do nothing else; agents cannot list, read,
//! write or detect `/llm-logs` (to them it is a root that does not exist). Each line is written
//! with one `append` call on an `O_APPEND` file, so lines never interleave; a killed server
//! leaves whole lines but for, at most, its last (the kernel copies a record of more than a page
//! page by page, and `SIGKILL` can stop it between two).
//!
//! The file is created with its first record, never before: a session (or, under the
//! 2026-07-28 protocol, a principal) that calls no tool leaves no empty file, and a request
//! refused before any tool runs leaves none at all. A record is bounded whatever the agent
//! sends: past a budget of kept text, a string is stored as its size and digest
//! ([`bounded`]), so a read-only agent cannot fill the operator's disk through the log. The
//! operator sees the log's growth in the service's own log.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value, json};
use vfs::{AppendFile, AppendOnlyAccessor, MountRegistry};

use crate::error::HostError;
use crate::launch::LOG_ROOT;
use crate::time::{compact_stamp, rfc3339_millis};

/// Appends one JSON line per tool call to `/llm-logs/exchanges-<UTC stamp>-<token>.jsonl`.
#[derive(Debug)]
pub struct ExchangeLogger {
    appender: AppendOnlyAccessor,
    file: Mutex<Written>,
    name: String,
}

/// The log file once its first record opened it, and how much was written to it.
#[derive(Debug, Default)]
struct Written {
    file: Option<AppendFile>,
    bytes: u64,
    /// The size past which the next growth notice goes to the operator's log.
    next_notice: u64,
}

/// The first size at which the operator's log notes the exchange log's growth; each later
/// notice comes at twice the size of the one before.
const FIRST_NOTICE: u64 = 64 * 1024 * 1024;

impl Drop for ExchangeLogger {
    /// The log outlives the session: a session that ends (a client that leaves, a daemon that
    /// stops, an idle session that expires) leaves its records on stable storage, not only in
    /// the kernel's cache.
    fn drop(&mut self) {
        let written = self.file.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(file) = &mut written.file
            && let Err(error) = file.sync()
        {
            tracing::warn!(%error, log = %self.name, "cannot sync the exchange log");
        }
    }
}

/// One record, as written.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Exchange<'a> {
    pub(crate) time: String,
    /// The call's id, the same the change feed gives each change the call made.
    pub(crate) call: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) arguments: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Value>,
    pub(crate) duration_ms: f64,
}

impl ExchangeLogger {
    /// A logger for a new log file under `/llm-logs` (created with the first record).
    /// Returns `None` when the registry has no internal `/llm-logs` root (no `--llm-log`).
    pub fn open(registry: &MountRegistry) -> Result<Option<Self>, HostError> {
        Self::open_in(registry, None)
    }

    /// A logger for a new log file in `folder` under `/llm-logs` (a hosted crew's own folder,
    /// which the launch created), or directly under it. The file is created with the first
    /// record.
    pub fn open_in(registry: &MountRegistry, folder: Option<&str>) -> Result<Option<Self>, HostError> {
        #[expect(
            clippy::disallowed_methods,
            reason = "the exchange logger is the one holder of a privileged capability: append-only, for /llm-logs"
        )]
        let Some(capability) = registry.mint_privileged(LOG_ROOT) else {
            return Ok(None);
        };
        let appender = capability.into_append_only();
        let now = SystemTime::now();
        let token = RandomState::new().build_hasher().finish() & 0xffff_ffff;
        let file_name = format!("exchanges-{}-{token:08x}.jsonl", compact_stamp(now));
        let name = match folder {
            Some(folder) => format!("{folder}/{file_name}"),
            None => file_name,
        };
        let written = Written { next_notice: FIRST_NOTICE, ..Written::default() };
        Ok(Some(Self { appender, file: Mutex::new(written), name }))
    }

    /// The log file's path inside `/llm-logs`, like `exchanges-….jsonl` or
    /// `review/exchanges-….jsonl` (the file exists once a tool was called).
    #[must_use]
    pub fn file_name(&self) -> &str {
        &self.name
    }

    /// Writes one record, bounded. A failure is reported to the operator's log and never to
    /// the agent; a file that could not be created is tried again with the next record.
    pub(crate) fn record(&self, exchange: &Exchange<'_>) {
        let bounded = Exchange {
            time: exchange.time.clone(),
            call: exchange.call,
            tool: exchange.tool,
            arguments: &bounded(exchange.arguments),
            result: exchange.result.as_ref().map(bounded),
            error: exchange.error.as_ref().map(bounded),
            duration_ms: exchange.duration_ms,
        };
        let mut line = match serde_json::to_vec(&bounded) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "cannot encode an exchange record");
                return;
            }
        };
        line.push(b'\n');
        let mut written = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if written.file.is_none() {
            match self.appender.open_append(&format!("{LOG_ROOT}/{}", self.name)) {
                Ok(file) => written.file = Some(file),
                Err(error) => {
                    tracing::warn!(%error, log = %self.name, "cannot create the exchange log file");
                    return;
                }
            }
        }
        let Some(file) = written.file.as_mut() else { return };
        if let Err(error) = file.append(&line) {
            tracing::warn!(%error, "cannot append to the exchange log");
            return;
        }
        written.bytes += line.len() as u64;
        if written.bytes >= written.next_notice {
            let mib = written.bytes / (1024 * 1024);
            tracing::warn!(log = %self.name, mib, "the exchange log has grown past {mib} MiB");
            written.next_notice = written.next_notice.saturating_mul(2);
        }
    }
}

/// What the view of a sandbox or of `vfs fuse` and a `vfs run` leave in the exchange log: the
/// view's refusals (tool `fuse`) and each command `vfs run` ran (tool `vfs run`), in a log file
/// of their own (the view is shared by every call that runs a command, so its refusals belong
/// to no one session).
impl ExchangeLogger {
    /// A sink that records each refusal of a view as one line: `{"call", "tool": "fuse",
    /// "arguments": {"operation", "path"}, "result": {"isError": true, "text", "errno"}}`, the
    /// call being the one whose command made the request (a `run_command` call, `vfs run`'s)
    /// when the view knows it.
    pub fn refusal_sink(self: &std::sync::Arc<Self>) -> vfs_fuse::RefusalSink {
        let logger = std::sync::Arc::clone(self);
        vfs_fuse::RefusalSink::new(move |refusal| {
            let arguments = json!({ "operation": refusal.operation, "path": refusal.path });
            let result = json!({ "isError": true, "text": refusal.reason, "errno": refusal.errno });
            logger.record(&Exchange {
                time: rfc3339_millis(SystemTime::now()),
                // The command's call when the view knows it; else a call of the view's own.
                call: &refusal.call.map_or_else(|| vfs::CallId::new().to_string(), ToString::to_string),
                tool: "fuse",
                arguments: &arguments,
                result: Some(result),
                error: None,
                duration_ms: 0.0,
            });
        })
    }

    /// Records one command `vfs run` ran, as the call `call` (the id its journal entries
    /// carry): its arguments, working directory and how it ended (exit status, signal, time
    /// limit, bytes of output, duration), never its output; or why the sandbox could not run
    /// it.
    pub fn record_command(
        &self,
        call: &vfs::CallId,
        argv: &[String],
        cwd: &str,
        started: SystemTime,
        outcome: Result<&vfs_fuse::RunOutcome, &str>,
    ) {
        let arguments = json!({ "argv": argv, "cwd": cwd });
        let (result, elapsed) = match outcome {
            Ok(outcome) => {
                let signal = match outcome.ending {
                    vfs_fuse::Ending::Signalled(signal) => Some(signal),
                    _ => None,
                };
                let result = json!({
                    "isError": false,
                    "exitCode": outcome.ending.status(),
                    "signal": signal,
                    "timedOut": matches!(outcome.ending, vfs_fuse::Ending::TimedOut),
                    "stdoutBytes": outcome.stdout.total,
                    "stderrBytes": outcome.stderr.total,
                    "durationMs": u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
                });
                (result, outcome.duration)
            }
            Err(reason) => (json!({ "isError": true, "text": reason }), started.elapsed().unwrap_or_default()),
        };
        let (time, duration_ms) = stamp(started, elapsed);
        self.record(&Exchange {
            time,
            call: &call.to_string(),
            tool: "vfs run",
            arguments: &arguments,
            result: Some(result),
            error: None,
            duration_ms,
        });
    }
}

/// Most bytes of text one record keeps (arguments and result together count separately);
/// past it, each further string longer than [`SHORT`] is kept as its size and digest.
const KEPT_TEXT: usize = 64 * 1024;
/// Strings this short are always kept.
const SHORT: usize = 64;
/// Most items of one list or entries of one object kept; the rest are counted.
const KEPT_ITEMS: usize = 1024;
/// Most values of one record visited; past it, a value is kept as a count.
const KEPT_NODES: usize = 16 * 1024;

/// `value`, bounded for the log: what the agent sent stays readable up to a budget, and what is
/// larger is kept as its size and an xxh3 digest (`{"omitted": {"bytes": N, "xxh3": "…"}}`),
/// enough to tell whether two calls carried the same content.
pub(crate) fn bounded(value: &Value) -> Value {
    let mut budget = Budget { text: KEPT_TEXT, nodes: KEPT_NODES };
    budget.keep(value)
}

struct Budget {
    text: usize,
    nodes: usize,
}

impl Budget {
    fn keep(&mut self, value: &Value) -> Value {
        if self.nodes == 0 {
            return json!({ "omitted": { "values": 1 } });
        }
        self.nodes -= 1;
        match value {
            Value::String(text) => self.keep_text(text),
            Value::Array(items) => {
                let mut kept: Vec<Value> = items.iter().take(KEPT_ITEMS).map(|item| self.keep(item)).collect();
                if items.len() > KEPT_ITEMS {
                    kept.push(json!({ "omitted": { "items": items.len() - KEPT_ITEMS } }));
                }
                Value::Array(kept)
            }
            Value::Object(entries) => {
                let mut kept = Map::new();
                for (key, item) in entries.iter().take(KEPT_ITEMS) {
                    let key = match self.keep_text(key) {
                        Value::String(key) => key,
                        _ => format!("omitted key of {} bytes, xxh3 {:016x}", key.len(), digest(key)),
                    };
                    let item = self.keep(item);
                    kept.insert(key, item);
                }
                if entries.len() > KEPT_ITEMS {
                    kept.insert("omitted".to_owned(), json!({ "entries": entries.len() - KEPT_ITEMS }));
                }
                Value::Object(kept)
            }
            other => other.clone(),
        }
    }

    fn keep_text(&mut self, text: &str) -> Value {
        if text.len() <= SHORT || text.len() <= self.text {
            self.text = self.text.saturating_sub(text.len());
            return Value::String(text.to_owned());
        }
        json!({ "omitted": { "bytes": text.len(), "xxh3": format!("{:016x}", digest(text)) } })
    }
}

fn digest(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// Builds a record's time and duration fields.
pub(crate) fn stamp(started: SystemTime, elapsed: Duration) -> (String, f64) {
    (rfc3339_millis(started), (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_records_pass_whole() {
        let value = json!({ "path": "/src/a.txt", "edits": [{ "oldText": "a", "newText": "b" }], "n": 3 });
        assert_eq!(bounded(&value), value);
    }

    #[test]
    fn large_text_is_kept_as_its_size_and_digest_past_the_budget() {
        let big = "x".repeat(KEPT_TEXT + 1);
        let value = json!({ "path": "/src/a.txt", "content": big });
        let expected = json!({
            "path": "/src/a.txt",
            "content": { "omitted": { "bytes": KEPT_TEXT + 1, "xxh3": format!("{:016x}", digest(&big)) } },
        });
        assert_eq!(bounded(&value), expected);
        // Text up to the budget is kept, then only short strings.
        let half = "y".repeat(KEPT_TEXT / 2 + 1);
        let value = json!([half, half, "short"]);
        let kept = bounded(&value);
        assert_eq!(kept[0], json!(half));
        assert_eq!(kept[1]["omitted"]["bytes"], json!(KEPT_TEXT / 2 + 1));
        assert_eq!(kept[2], json!("short"));
    }

    #[test]
    fn long_lists_and_deep_values_are_counted_not_kept() {
        let value = Value::Array(vec![json!(0); KEPT_ITEMS + 5]);
        let kept = bounded(&value);
        let items = kept.as_array().unwrap();
        assert_eq!(items.len(), KEPT_ITEMS + 1);
        assert_eq!(items[KEPT_ITEMS], json!({ "omitted": { "items": 5 } }));
        let mut nested = json!(0);
        for _ in 0..100 {
            nested = Value::Array(vec![nested; 1000.min(KEPT_ITEMS)]);
            if serde_json::to_vec(&nested).unwrap().len() > 1 << 20 {
                break;
            }
        }
        let encoded = serde_json::to_vec(&bounded(&nested)).unwrap();
        assert!(encoded.len() < 512 * 1024, "a bounded record is {} bytes", encoded.len());
    }
}
