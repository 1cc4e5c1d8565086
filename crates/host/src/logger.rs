//! The exchange logger: one JSON line per tool call, in the internal root `/llm-logs`.
//!
//! It holds the only privileged capability the service mints, narrowed to appending, so the
//! logger can create and extend its own log file and do nothing else; agents cannot list, read,
//! write or detect `/llm-logs` (to them it is a root that does not exist). Each line is written
//! with one `append` call on an `O_APPEND` file, so a killed server leaves only whole lines.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use vfs::{AppendFile, MountRegistry};

use crate::error::HostError;
use crate::launch::LOG_ROOT;
use crate::time::{compact_stamp, rfc3339_millis};

/// Appends one JSON line per tool call to `/llm-logs/exchanges-<UTC stamp>-<token>.jsonl`.
#[derive(Debug)]
pub struct ExchangeLogger {
    file: Mutex<AppendFile>,
    name: String,
}

impl Drop for ExchangeLogger {
    /// The log outlives the session: a session that ends (a client that leaves, a daemon that
    /// stops) leaves its records on stable storage, not only in the kernel's cache.
    fn drop(&mut self) {
        let file = self.file.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(error) = file.sync() {
            tracing::warn!(%error, log = %self.name, "cannot sync the exchange log");
        }
    }
}

/// One record, as written.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Exchange<'a> {
    pub(crate) time: String,
    pub(crate) tool: &'a str,
    pub(crate) arguments: &'a serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<serde_json::Value>,
    pub(crate) duration_ms: f64,
}

impl ExchangeLogger {
    /// Opens a new log file under `/llm-logs`. Returns `None` when the registry has no
    /// internal `/llm-logs` root (no `--llm-log` given).
    pub fn open(registry: &MountRegistry) -> Result<Option<Self>, HostError> {
        Self::open_in(registry, None)
    }

    /// Opens a new log file in `folder` under `/llm-logs` (a hosted crew's own folder, which
    /// the launch created), or directly under it.
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
        let file = appender.open_append(&format!("{LOG_ROOT}/{name}")).map_err(|error| HostError::LogDir {
            path: LOG_ROOT.to_owned(),
            reason: format!("cannot create the log file: {error}"),
        })?;
        Ok(Some(Self { file: Mutex::new(file), name }))
    }

    /// The log file's path inside `/llm-logs`, like `exchanges-….jsonl` or
    /// `review/exchanges-….jsonl`.
    #[must_use]
    pub fn file_name(&self) -> &str {
        &self.name
    }

    /// Writes one record. A failure is reported to the operator's log and never to the agent.
    pub(crate) fn record(&self, exchange: &Exchange<'_>) {
        let mut line = match serde_json::to_vec(exchange) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "cannot encode an exchange record");
                return;
            }
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(error) = file.append(&line) {
            tracing::warn!(%error, "cannot append to the exchange log");
        }
    }
}

/// Builds a record's time and duration fields.
pub(crate) fn stamp(started: SystemTime, elapsed: Duration) -> (String, f64) {
    (rfc3339_millis(started), (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0)
}
