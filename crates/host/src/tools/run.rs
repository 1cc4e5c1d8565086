//! `run_command`: a shell command in the sandbox, as a tool.
//!
//! The sandbox (`vfs_fuse::Sandbox`) makes the command's only data the agent's tree, served
//! by the same registry as the file tools, so there is nothing to check here beyond the
//! tool's own arguments. What is here: the launch's bounds (`--run-timeout`,
//! `--run-max-processes`, `--run-max-memory`, `--run-env`), the working directory's default
//! (the first writable mount, else the first mount), the result's shape (a status line, then
//! each stream's kept tail), progress (lines of output so far) and cancellation (the whole
//! process tree killed), and the exchange-log record, which holds the run but never its
//! output.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use vfs::{AgentAccessor, MountRegistry};
use vfs_fuse::{Ending, RunRequest, Sandbox, SandboxOptions, Stream};

use crate::HostError;
use crate::tools::ToolOutput;

/// How much of each stream a result keeps: its last 256 KiB.
pub(crate) const KEEP_BYTES: usize = 256 * 1024;

/// The time limit of a call that names none.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_mins(1);

/// The operator's bounds on commands.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The longest a command may run, whatever the call asks (`--run-timeout`).
    pub max_timeout: Duration,
    /// Processes at once, all commands together (`--run-max-processes`).
    pub max_processes: u64,
    /// Address space of each process, in MiB (`--run-max-memory`).
    pub max_memory_mib: u64,
    /// Size of each of a command's places in memory (`/tmp`, `HOME`, `/dev/shm`), in MiB
    /// (`--run-max-scratch`).
    pub max_scratch_mib: u64,
    /// `--run-env NAME` or `NAME=VALUE`, in order.
    pub env: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            max_timeout: Duration::from_mins(10),
            max_processes: 256,
            max_memory_mib: 4096,
            max_scratch_mib: 1024,
            env: Vec::new(),
        }
    }
}

/// The variables every command gets from the sandbox itself; `--run-env` may not set them.
const FIXED: &[&str] = &["PATH", "HOME", "LANG", "TERM", "PWD"];

/// `--run-env` values as `(name, value)`: `NAME` takes its value from vfs's environment.
pub fn check_run_env(values: &[String]) -> Result<Vec<(String, String)>, HostError> {
    values
        .iter()
        .map(|value| {
            let refuse = |reason: String| HostError::RunEnv { value: value.clone(), reason };
            let (name, given) = match value.split_once('=') {
                Some((name, given)) => (name, Some(given.to_owned())),
                None => (value.as_str(), None),
            };
            let valid = name.bytes().next().is_some_and(|first| first.is_ascii_alphabetic() || first == b'_')
                && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_');
            if !valid {
                return Err(refuse("a name is letters, digits and `_`, not starting with a digit".to_owned()));
            }
            if FIXED.contains(&name) {
                return Err(refuse(format!("`{name}` is set by the sandbox itself")));
            }
            let value = match given {
                Some(given) => given,
                None => std::env::var(name).map_err(|_| {
                    refuse(format!("`{name}` is not set in vfs's own environment; give `{name}=VALUE`"))
                })?,
            };
            Ok((name.to_owned(), value))
        })
        .collect()
}

/// The sandbox of one launch, with its bounds; shared by the launch's sessions.
#[derive(Debug)]
pub struct Runner {
    sandbox: Sandbox,
    max_timeout: Duration,
    default_cwd: String,
}

impl Runner {
    /// Starts the sandbox over `registry` (mounting its view and trying one command).
    pub fn start(registry: &MountRegistry, options: &RunOptions) -> Result<Runner, HostError> {
        // The view's refusals go to the exchange log, in a file of their own (the view is
        // shared by every call that runs a command).
        let logger = crate::ExchangeLogger::open(registry)?.map(std::sync::Arc::new);
        Self::start_logged(registry, options, logger.as_ref())
    }

    /// [`Runner::start`], with the view's refusals recorded by `logger` (`vfs run` records its
    /// command and the view's refusals in one file).
    pub fn start_logged(
        registry: &MountRegistry,
        options: &RunOptions,
        logger: Option<&std::sync::Arc<crate::ExchangeLogger>>,
    ) -> Result<Runner, HostError> {
        let env = check_run_env(&options.env)?;
        let refusals = logger.map(crate::ExchangeLogger::refusal_sink);
        let sandbox = Sandbox::start(
            registry,
            SandboxOptions {
                max_processes: options.max_processes,
                max_memory: options.max_memory_mib.saturating_mul(1 << 20),
                max_scratch: options.max_scratch_mib.saturating_mul(1 << 20),
                env,
                refusals,
                ..SandboxOptions::default()
            },
        )?;
        let mounts = registry.agent_mounts_as_given();
        let default_cwd = mounts
            .iter()
            .find(|mount| mount.rights != "ro")
            .or_else(|| mounts.first())
            .map_or_else(|| "/".to_owned(), |mount| mount.root.clone());
        Ok(Runner { sandbox, max_timeout: options.max_timeout, default_cwd })
    }

    /// The working directory of a command that names none.
    #[must_use]
    pub fn default_cwd(&self) -> &str {
        &self.default_cwd
    }

    /// The longest a command may run.
    #[must_use]
    pub fn max_timeout(&self) -> Duration {
        self.max_timeout
    }

    /// The sandbox.
    #[must_use]
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
}

/// The arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RunCommandArgs {
    /// The command, run with `/bin/sh -c` in a sandbox whose only files are your mounts (at
    /// their virtual paths), the system's programs and a fresh `/tmp` and `HOME`; no network.
    command: String,
    /// The working directory, a virtual path (default: the first writable mount, else the
    /// first mount).
    #[serde(default)]
    cwd: Option<String>,
    /// The time limit in seconds (default 60; the operator caps it). Every process of the
    /// command is killed when it passes.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_seconds: Option<u64>,
}

/// The structured result of `run_command`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunCommandOutput {
    /// The exit status (128 plus the signal's number when a signal ended it; 124 when the
    /// time limit did; 130 for a cancellation).
    exit_code: i32,
    /// The signal that ended the command (absent when none did).
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<i32>,
    /// True when the time limit ended the command.
    timed_out: bool,
    /// The end of standard output (at most 256 KiB).
    stdout: String,
    /// The end of standard error (at most 256 KiB).
    stderr: String,
    /// True when the start of standard output was cut.
    stdout_truncated: bool,
    /// True when the start of standard error was cut.
    stderr_truncated: bool,
    /// Bytes of standard output in all.
    stdout_bytes: u64,
    /// Bytes of standard error in all.
    stderr_bytes: u64,
    /// How long the command ran, in milliseconds.
    duration_ms: u64,
}

/// Runs the call (`Err` for arguments that do not parse).
pub(crate) fn run(runner: &Runner, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let arguments: RunCommandArgs = serde_json::from_value(arguments.clone()).map_err(|error| error.to_string())?;
    let timeout = arguments.timeout_seconds.map_or(DEFAULT_TIMEOUT, Duration::from_secs).min(runner.max_timeout);
    let request = RunRequest {
        argv: vec!["/bin/sh".to_owned(), "-c".to_owned(), arguments.command],
        cwd: arguments.cwd.unwrap_or_else(|| runner.default_cwd.clone()),
        timeout,
        keep: KEEP_BYTES,
        // The command's changes are this call's: journaled for the session that ran it.
        call: agent.budget().call_id().cloned(),
    };
    let budget = agent.budget();
    let progress = budget.progress_sink().cloned();
    let mut lines = 0u64;
    let mut reported = Instant::now();
    let mut first = true;
    let mut on_output = |stream: Stream, bytes: &[u8]| {
        let _ = stream;
        lines += (bytes.split(|&byte| byte == b'\n').count() - 1) as u64;
        if let Some(sink) = &progress
            && (first || reported.elapsed() >= Duration::from_millis(250))
            && !budget.is_cancelled()
        {
            first = false;
            reported = Instant::now();
            sink(vfs::Progress { done: lines, total: None, message: format!("{lines} lines of output so far") });
        }
    };
    let outcome = match runner.sandbox.run(&request, &|| budget.is_cancelled(), &mut on_output) {
        Ok(outcome) => outcome,
        Err(error) => {
            return Ok(ToolOutput {
                text: error.agent_text(),
                structured: None,
                media: None,
                is_error: true,
                notes: Vec::new(),
            });
        }
    };
    let (signal, timed_out) = match outcome.ending {
        Ending::Signalled(signal) => (Some(signal), false),
        Ending::TimedOut => (None, true),
        Ending::Exited(_) | Ending::Cancelled => (None, false),
    };
    let stdout = String::from_utf8_lossy(&outcome.stdout.tail).into_owned();
    let stderr = String::from_utf8_lossy(&outcome.stderr.tail).into_owned();
    let text = result_text(&outcome, timeout, &stdout, &stderr);
    let structured = RunCommandOutput {
        exit_code: outcome.ending.status(),
        signal,
        timed_out,
        stdout_truncated: outcome.stdout.truncated(),
        stderr_truncated: outcome.stderr.truncated(),
        stdout_bytes: outcome.stdout.total,
        stderr_bytes: outcome.stderr.total,
        stdout,
        stderr,
        duration_ms: u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
    };
    Ok(ToolOutput {
        text,
        structured: Some(serde_json::to_value(structured).unwrap_or(Value::Null)),
        media: None,
        is_error: false,
        notes: Vec::new(),
    })
}

/// The result's text: the status line, then each stream's kept tail (or `(empty)`).
fn result_text(outcome: &vfs_fuse::RunOutcome, timeout: Duration, stdout: &str, stderr: &str) -> String {
    let status = match outcome.ending {
        Ending::Exited(code) => format!("exit status {code}"),
        Ending::Signalled(signal) => format!("ended by signal {signal} (exit status {})", 128 + signal),
        Ending::TimedOut => format!(
            "timed out after {} s: every process of the command was killed (exit status 124)",
            timeout.as_secs_f64()
        ),
        Ending::Cancelled => "cancelled: every process of the command was killed (exit status 130)".to_owned(),
    };
    let mut text = status;
    for (name, captured, content) in [("stdout", &outcome.stdout, stdout), ("stderr", &outcome.stderr, stderr)] {
        if captured.total == 0 {
            text.push_str(&format!("\n{name}: (empty)"));
            continue;
        }
        if captured.truncated() {
            text.push_str(&format!(
                "\n{name} (its last {} of {} bytes; the first {} were cut):\n",
                captured.tail.len(),
                captured.total,
                captured.total - captured.tail.len() as u64
            ));
        } else {
            text.push_str(&format!("\n{name}:\n"));
        }
        text.push_str(content);
    }
    text
}

/// What the exchange log keeps of a `run_command` result: the run, never its output.
pub(crate) fn log_record(is_error: bool, text: &str, structured: Option<&Value>) -> Value {
    match structured {
        Some(structured) => {
            let mut record = json!({ "isError": is_error });
            for key in ["exitCode", "signal", "timedOut", "stdoutBytes", "stderrBytes", "durationMs"] {
                record[key] = structured.get(key).cloned().unwrap_or(Value::Null);
            }
            record
        }
        // A refusal (a working directory the gate refused) holds no output.
        None => json!({ "isError": is_error, "text": text }),
    }
}
