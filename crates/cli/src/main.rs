//! The `vfs` binary: serve the agent tools over MCP, and inspect or try a launch.
//!
//! Exit codes: 0 success; 1 the tool reported an error (`vfs call`) or serving failed; 2 the
//! launch options were refused (also by `vfs check`), the tool call was malformed, or the
//! command line was invalid.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use vfs::AmbientAuthority;
use vfs_host::{LaunchOptions, Problems};

mod journal;
mod output;
mod stopping;

const EXAMPLES: &str = "\
Examples:
  vfs serve
      serve the current directory read-only at /workspace
  vfs serve --mount ../data:/src:ro --mount ./out:/output:rw --llm-log ./logs
      serve two folders and log every tool call to ./logs (hidden from the agent)
  vfs serve --settings vfs.json --crew ./crews/review
      mounts from a settings file, selected by the crew's `mounts:` block
  vfs serve --listen 127.0.0.1:8080 --token-file tokens --settings vfs.json --crew ./crews/a --crew ./crews/b
      a daemon for a team over MCP streamable HTTP: each crew at /mcp/<name>, with its own roots
  vfs mounts --mount ./out:/output:rw
      show the mount table with physical paths (operator view)
  vfs check --settings vfs.json --crew ./crews/review
      validate a launch without serving
  vfs fuse /mnt/agent --mount ../data:/src:ro --mount ./out:/output:rw
      the same tree as a file system at /mnt/agent, for a shell (Ctrl-C unmounts it)
  vfs call read_text_file '{\"path\": \"/workspace/README.md\", \"head\": 5}'
      run one tool and print what the agent would see
  vfs serve --allow-run --mount .:/w:rw
      also offer `run_command`: shell commands in a sandbox that sees only the mounts
  vfs run --mount .:/w:rw -- cargo test
      run one command in that sandbox, at /w (exit status: the command's)

Exit codes:
  0  success
  1  the tool reported an error (`call`; arguments that do not fit included), or serving failed
  2  the launch was refused (bad --mount, settings, crew, reserved root; `check` found problems),
     the tool call was malformed (unknown tool, arguments not an object), or the command line is
     invalid";

/// A virtual filesystem for AI agents: named mounts under virtual paths, served over MCP.
#[derive(Debug, Parser)]
#[command(name = "vfs", version, about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The arguments of `vfs serve` alone. An MCP host starts `vfs serve` for every session and
/// waits for its first answer, and the parser of every subcommand (each takes the launch
/// options) was about a tenth of that start's own time. A command line this parses whole takes
/// it; any other (help, a mistake) goes to [`Cli`], which answers as it always has.
#[derive(Debug, Parser)]
#[command(name = "vfs serve")]
struct ServeOnly {
    #[command(flatten)]
    serve: ServeArgs,
}

impl ServeOnly {
    /// `vfs serve …` as the command it is, if `arguments` (the binary's name first) are that
    /// and parse.
    fn parse(arguments: &[std::ffi::OsString]) -> Option<Command> {
        let rest = arguments.get(1..).filter(|rest| rest.first().is_some_and(|first| first == "serve"))?;
        Self::try_parse_from(rest).ok().map(|only| Command::Serve(only.serve))
    }
}

/// What `vfs serve` takes.
#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    launch: LaunchArgs,
    #[command(flatten)]
    daemon: DaemonArgs,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the agent tools as an MCP server over stdio (stdout carries only the protocol), or
    /// with --listen as a daemon over MCP streamable HTTP, hosting any number of crews.
    #[command(after_help = EXAMPLES)]
    Serve(ServeArgs),
    /// Show the effective mount table for the operator: physical paths, rights, visibility, origin.
    #[command(after_help = EXAMPLES)]
    Mounts {
        /// Print the agent-facing prompt table (`## Available File Mounts`) instead.
        #[arg(long)]
        prompt: bool,
        #[command(flatten)]
        launch: LaunchArgs,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Validate everything a launch would do; print `OK` or one line per problem.
    #[command(after_help = EXAMPLES)]
    Check {
        #[command(flatten)]
        launch: LaunchArgs,
        #[command(flatten)]
        daemon: DaemonArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Print the agent tools with their JSON schemas and annotations (all of them, or with
    /// launch options the ones that launch would list).
    #[command(after_help = EXAMPLES)]
    Tools {
        #[command(flatten)]
        launch: LaunchArgs,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Serve the agent's tree as a FUSE file system at MOUNTPOINT, whose root is the agent's
    /// `/` (`MOUNTPOINT/src`, `MOUNTPOINT/output`), with the same rules as the tools: read-only
    /// places refuse writes (`EROFS`), hidden names and internal roots are absent, and a file
    /// written through it is committed whole when it is closed. Runs in the foreground until
    /// SIGTERM, Ctrl-C or `fusermount3 -u MOUNTPOINT`.
    #[command(after_help = EXAMPLES)]
    Fuse {
        /// An existing directory outside every mount's directory, where the view appears.
        mountpoint: PathBuf,
        #[command(flatten)]
        launch: LaunchArgs,
    },
    /// Run one tool exactly as an agent would, and print what the agent would see.
    #[command(after_help = EXAMPLES)]
    Call {
        /// The tool, like `read_text_file` (see `vfs tools`).
        tool: String,
        /// The arguments as a JSON object, like '{"path": "/workspace/README.md"}'.
        #[arg(default_value = "{}")]
        arguments: String,
        #[command(flatten)]
        launch: LaunchArgs,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Run one command in the sandbox of `run_command`: its only files are the launch's
    /// agent-facing mounts at their virtual paths (through the FUSE view, with the same rules
    /// as the tools), the system's programs read-only and a fresh `/tmp` and `HOME`; no
    /// network. Streams its stdout and stderr and exits with its status: 127 when it is not
    /// found, 126 when it cannot be run, 124 when the time limit ended it, 128+N for signal N,
    /// 125 when the sandbox cannot start (one line says why). Needs `bwrap` (bubblewrap) and
    /// FUSE.
    #[command(after_help = EXAMPLES)]
    Run {
        #[command(flatten)]
        launch: LaunchArgs,
        #[command(flatten)]
        limits: RunLimits,
        /// The working directory, a virtual path [default: the first writable mount, else
        /// the first mount].
        #[arg(long, value_name = "VIRTUAL_PATH")]
        cwd: Option<String>,
        /// The time limit in seconds; every process of the command is killed when it passes
        /// [default: --run-timeout].
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=604_800))]
        timeout: Option<u64>,
        /// The command and its arguments, after `--`, run as given (no shell: add `sh -c`).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Read the journal that `--journal DIR` keeps of the agents' changes.
    Journal {
        #[command(subcommand)]
        command: journal::JournalCommand,
    },
    /// Undo journaled changes, newest first, each only where the path still holds what the
    /// change left (else a conflict, left as it is); exits 1 when there were conflicts.
    Undo {
        #[command(flatten)]
        selection: journal::Selection,
        /// Print what would be undone, and change nothing.
        #[arg(long = "dry-run")]
        dry_run: bool,
        /// Undo changes whose roots this launch mounts from another place than when they were
        /// made (a project directory moved or renamed since); without it they are skipped.
        #[arg(long = "any-place")]
        any_place: bool,
        #[command(flatten)]
        launch: LaunchArgs,
    },
}

/// `--allow-run` and the sandbox's bounds (`serve`, `check`, `call`).
#[derive(Debug, Args)]
struct RunArgs {
    /// Offer the tool `run_command`: shell commands in a sandbox whose only files are the
    /// agent-facing mounts (see `vfs run`). Where the sandbox cannot start, the tool is not
    /// listed and one line says why (`vfs check --allow-run` tries it).
    #[arg(long = "allow-run")]
    allow_run: bool,
    #[command(flatten)]
    limits: RunLimits,
}

/// The sandbox's bounds and environment.
#[derive(Debug, Args)]
struct RunLimits {
    /// The longest one command may run, in seconds, whatever a call asks.
    #[arg(id = "run_timeout", long = "run-timeout", value_name = "SECONDS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    timeout: u64,
    /// Most processes at once, all commands together (a fork bomb stops there).
    #[arg(id = "run_max_processes", long = "run-max-processes", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_processes: u64,
    /// The address space of each process, in MiB.
    #[arg(id = "run_max_memory", long = "run-max-memory", value_name = "MIB", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(16..=1 << 24))]
    max_memory: u64,
    /// The size of each of a command's places in memory, `/tmp`, `/home/agent` and
    /// `/dev/shm`, in MiB (the rest of the sandbox outside the tree is read-only).
    #[arg(id = "run_max_scratch", long = "run-max-scratch", value_name = "MIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    max_scratch: u64,
    /// Add a variable to the commands' environment: `NAME=VALUE`, or `NAME` for its value in
    /// vfs's own environment (repeatable). Otherwise they get only `PATH`, `HOME`, `LANG`,
    /// `TERM` and `PWD`.
    #[arg(id = "run_env", long = "run-env", value_name = "NAME[=VALUE]")]
    env: Vec<String>,
}

impl RunLimits {
    fn options(&self) -> vfs_host::RunOptions {
        vfs_host::RunOptions {
            max_timeout: std::time::Duration::from_secs(self.timeout),
            max_processes: self.max_processes,
            max_memory_mib: self.max_memory,
            max_scratch_mib: self.max_scratch,
            env: self.env.clone(),
        }
    }
}

impl RunArgs {
    /// The launch's sandbox when `--allow-run` was given: `Err` with the reason when it
    /// cannot start.
    fn runner(&self, registry: &vfs::MountRegistry) -> Result<Option<Arc<vfs_host::Runner>>, vfs_host::HostError> {
        if !self.allow_run {
            return Ok(None);
        }
        vfs_host::Runner::start(registry, &self.limits.options()).map(|runner| Some(Arc::new(runner)))
    }

    /// [`RunArgs::runner`] for a server, which goes on without `run_command` (saying why).
    fn runner_or_note(&self, registry: &vfs::MountRegistry, endpoint: &str) -> Option<Arc<vfs_host::Runner>> {
        self.runner(registry).unwrap_or_else(|error| {
            output::status(&format!("vfs: {endpoint}`run_command` is not offered: {error}"));
            None
        })
    }
}

/// How `vfs serve` listens over HTTP instead of stdio (`mounts`, `check` and `tools` take them
/// too, to show or check what the daemon would serve).
#[derive(Debug, Args)]
struct DaemonArgs {
    /// Serve MCP over streamable HTTP at `http://HOST:PORT/mcp` instead of stdin/stdout (port 0
    /// picks a free port; the start-up line names it), and each --crew at `/mcp/<crew name>`.
    /// Needs a token: --token-file or `VFS_TOKEN`.
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Bearer tokens, one per line: `TOKEN` grants /mcp, `CREW TOKEN` grants /mcp/CREW; blank
    /// lines and `#` comments are ignored. The environment variable `VFS_TOKEN` may give the
    /// /mcp token instead.
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Another browser origin to accept, like `https://agents.example.com` (repeatable; the
    /// listen address and localhost are always accepted).
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    allowed_origins: Vec<String>,
    /// Another `Host` header value to accept, like `files.example.com:8080` (repeatable; the
    /// listen address and localhost are always accepted).
    #[arg(long = "allowed-host", value_name = "HOST")]
    allowed_hosts: Vec<String>,
    /// How long running calls may take to finish after SIGTERM or Ctrl-C, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    grace: u64,
    /// How long a client may take to send a request's headers, in seconds; also how long an
    /// idle connection stays open between requests.
    #[arg(long = "header-timeout", value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout: u64,
    /// How long a client may take to send a request's body once its headers arrived, in
    /// seconds.
    #[arg(long = "body-timeout", value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    body_timeout: u64,
    /// Most connections served at once; past it a new connection takes the place of one not
    /// kept (that has shown no valid token, or a token's past --max-connections-per-token;
    /// from the address holding the most, idle first, oldest first), and gets 503 with
    /// Retry-After only when all are kept [default: a quarter of the open-file limit, between
    /// 16 and 4096].
    #[arg(long = "max-connections", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: Option<u64>,
    /// Most connections of one token kept at the connection cap; past it, a token's further
    /// connections give way to new ones there, as connections without a token do. With several
    /// crews, each crew's endpoint is kept its share, as for sessions [default: a quarter of
    /// --max-connections, at least 4].
    #[arg(long = "max-connections-per-token", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections_per_token: Option<u64>,
    /// Most MCP sessions alive at once over all endpoints; past it a new session gets 503
    /// with Retry-After, and open sessions keep their state. With several crews, half of them
    /// are kept for the crews' endpoints evenly, so that one crew cannot take another's
    /// [default: as --max-connections].
    #[arg(long = "max-sessions", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_sessions: Option<u64>,
    /// Most MCP sessions alive at once for one token, so that one agent cannot take every
    /// session [default: a quarter of --max-sessions, at least 4].
    #[arg(long = "max-sessions-per-token", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_sessions_per_token: Option<u64>,
    /// Most requests of one token whose answers are on their way at once (a session's own
    /// event stream does not count); past it, 503 with Retry-After [default: a quarter of
    /// --max-connections, at least 4].
    #[arg(long = "max-requests-per-token", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_requests_per_token: Option<u64>,
    /// Most tool calls of one MCP session (or, under the 2026-07-28 protocol, one token) that
    /// run at once; the others wait their turn, never refused. Lower it (to the cores, say)
    /// so that one crew's calls leave more of the cores to the others' [default: the call
    /// pool's size, four per core].
    #[arg(long = "max-calls-per-session", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_calls_per_session: Option<u64>,
    /// An MCP session with no request for this long ends (its exchange log file is closed; its
    /// client gets 404 and starts a new session), in seconds.
    #[arg(long = "session-idle", value_name = "SECONDS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    session_idle: u64,
    /// The largest request body accepted, in bytes; a larger one gets 413 before it is read.
    #[arg(long = "max-request-bytes", value_name = "BYTES", default_value_t = 16 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=1 << 30))]
    max_request_bytes: u64,
    /// Most bytes of request bodies held at once, over all tokens (a body is held from its
    /// arrival until its answer is sent); one token holds at most a quarter of them, and at
    /// least one body of --max-request-bytes. Past either, a body gets 503 with Retry-After, so
    /// that many large bodies at once cannot fill the daemon's memory [default: 16 times
    /// --max-request-bytes].
    #[arg(long = "max-request-bytes-held", value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..=u64::from(u32::MAX)))]
    max_request_bytes_held: Option<u64>,
}

/// The launch options every command takes.
#[derive(Debug, Args)]
struct LaunchArgs {
    /// Mount a directory: `[<ulid>|]<physical>:<virtual>[:ro|rw|rwnd][;<subpath>:<rights>]*`
    /// (repeatable; relative paths resolve against the current directory). A sub-path may be
    /// `hidden`, or a glob from the mount root that is `ro` or `hidden`:
    /// `"./proj:/p:rw;**/*.key:hidden;secrets:hidden;docs:ro"`.
    #[arg(long = "mount", value_name = "SPEC")]
    mounts: Vec<String>,
    /// Select the settings entry with this id for its root (repeatable).
    #[arg(long = "mount-id", value_name = "ULID")]
    mount_ids: Vec<String>,
    /// A JSON settings file, `{"mounts": [...], "internal_mounts": [...]}` (relative paths
    /// resolve against the file's directory).
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
    /// A crew: a YAML file, or a directory holding `crew.yaml`; mounted read-only at `/crew`.
    /// With --listen, repeatable: each crew is served at `/mcp/<crew name>` and sees only the
    /// roots its `mounts:` block names.
    #[arg(long = "crew", value_name = "PATH")]
    crews: Vec<PathBuf>,
    /// Log every tool call as JSON lines in this directory (created if missing), mounted as the
    /// internal root `/llm-logs` that agents cannot see.
    #[arg(long = "llm-log", value_name = "DIR")]
    llm_log: Option<PathBuf>,
    /// Journal every change agents make, with what it replaced, in this directory (created if
    /// missing), mounted as the internal root `/llm-journal` that agents cannot see; `vfs undo`
    /// undoes them.
    #[arg(long = "journal", value_name = "DIR")]
    journal: Option<PathBuf>,
    /// The most bytes the journal keeps on disk, its log and the before images (`K`, `M`, `G`
    /// suffixes; at least 256K; default 1G): the oldest images are dropped first, and the
    /// oldest entries leave the log once it is compacted.
    #[arg(long = "journal-max-bytes", value_name = "BYTES", value_parser = vfs_host::parse_journal_bound)]
    journal_max_bytes: Option<u64>,
    /// Mount the default `/workspace` (the current directory) read-write instead of read-only.
    #[arg(long)]
    allow_write: bool,
    /// The longest one tool call may run, in seconds; a call past it ends with an error that
    /// says what to narrow.
    #[arg(long = "call-timeout", value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    call_timeout: u64,
    /// Let an agent edit, overwrite or move onto a file it has not read in its session (by default it
    /// must read the file whole first, or pass the `expectedVersion` it knows).
    #[arg(long = "no-read-before-edit")]
    no_read_before_edit: bool,
    /// Hide names matching this glob from agents in every mount, like `*.sqlite`,
    /// `.docker/config.json` or `notes/**` (`**` is any number of names, and `notes/**` hides
    /// `notes` too; repeatable; added to the default rules).
    #[arg(long = "hide", value_name = "GLOB")]
    hide: Vec<String>,
    /// Turn off the default rules (the `.env` family, private keys, `.ssh`, `.aws` and other
    /// credentials hidden; `.git` read-only). To let agents write one mount's `.git` only,
    /// loosen it in that mount string instead: `--mount "./proj:/p:rw;.git:rw"`.
    #[arg(long = "no-default-hide")]
    no_default_hide: bool,
}

impl LaunchArgs {
    fn into_options(self) -> anyhow::Result<LaunchOptions> {
        // A refused launch (exit 2), as every launch refusal is: the operator's shell is in a
        // directory that is gone, or that it may not read.
        let current_dir = std::env::current_dir().map_err(|error| Refusal {
            message: format!("cannot determine the current directory: {error}"),
            hint: Some("run vfs from a directory that exists (relative paths resolve against it)".to_owned()),
        })?;
        Ok(LaunchOptions {
            mounts: self.mounts,
            mount_ids: self.mount_ids,
            settings: self.settings,
            crews: self.crews,
            llm_log: self.llm_log,
            journal: self.journal,
            journal_max_bytes: self.journal_max_bytes,
            defer_syncs: false,
            operator_deletes: false,
            defer_name_rules: false,
            journal_origin: None,
            journal_unswept: false,
            journal_existing: false,
            allow_write: self.allow_write,
            call_timeout: Some(std::time::Duration::from_secs(self.call_timeout)),
            no_read_before_edit: self.no_read_before_edit,
            hide: self.hide,
            no_default_hide: self.no_default_hide,
            current_dir,
        })
    }
}

/// A finished command's exit status.
const REFUSED: u8 = 2;
const TOOL_ERROR: u8 = 1;

fn main() -> ExitCode {
    let arguments: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = ServeOnly::parse(&arguments).unwrap_or_else(|| Cli::parse_from(&arguments).command);
    output::init_logging();
    // The one mint of the ambient authority (ADR 0010): every host path the operator names
    // (mount sources, settings, crew and token files, the log and journal directories) is
    // opened with this token, handed down from here; `vfs-compliance check` refuses a mint
    // anywhere else.
    let authority = vfs::ambient_authority();
    match run(command, authority) {
        Ok(code) => code,
        Err(error) => {
            if let Some(problems) = error.downcast_ref::<Problems>() {
                output::problems(problems);
                return ExitCode::from(REFUSED);
            }
            if let Some(refusal) = error.downcast_ref::<Refusal>() {
                output::error(&refusal.message, refusal.hint.as_deref());
                return ExitCode::from(REFUSED);
            }
            output::error(&format!("{error:#}"), None);
            ExitCode::FAILURE
        }
    }
}

/// A refusal of the command's own input (not of the launch), with an optional hint.
#[derive(Debug)]
struct Refusal {
    message: String,
    hint: Option<String>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

fn run(command: Command, authority: AmbientAuthority) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(ServeArgs { launch, daemon, run }) => {
            if let Some(listen) = daemon.listen {
                serve_http(&launch.into_options()?, &daemon, &run, listen, authority)
            } else {
                daemon.refuse_without_listen()?;
                serve(&launch.into_options()?, &run, authority)
            }
        }
        Command::Mounts { prompt, launch, daemon } => mounts(prompt, launch, &daemon, authority),
        Command::Check { launch, daemon, run } => check(launch, &daemon, &run, authority),
        Command::Tools { launch, daemon } => tools(launch, &daemon, authority),
        Command::Call { tool, arguments, launch, run } => call(&tool, &arguments, launch, &run, authority),
        Command::Run { launch, limits, cwd, timeout, command } => {
            run_one(&launch.into_options()?, &limits, cwd, timeout, &command, authority)
        }
        Command::Fuse { mountpoint, launch } => fuse(&mountpoint, &launch.into_options()?, authority),
        Command::Journal { command } => journal::list(command, authority),
        Command::Undo { selection, dry_run, any_place, launch } => {
            journal::undo(launch, &selection, journal::UndoHow { dry_run, any_place }, authority)
        }
    }
}

/// `vfs mounts`: the operator's table, or the agents' prompt table; each endpoint's with
/// `--listen`.
fn mounts(
    prompt: bool,
    launch: LaunchArgs,
    daemon: &DaemonArgs,
    authority: AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    let options = launch.into_options()?;
    let show = |registry: &vfs::MountRegistry| {
        if prompt {
            output::text(&registry.prompt_table());
        } else {
            output::mount_table(&registry.operator_view(), registry.loosened_rules());
            output::name_rules(registry.name_rules(), registry.loosened_rules());
        }
    };
    if daemon.listen.is_some() {
        for (index, served) in daemon.plan(&options, false, authority)?.endpoints.iter().enumerate() {
            if index > 0 {
                output::line("");
            }
            output::line(&format!("{}:", endpoint_title(served)));
            show(served.launch().registry());
        }
    } else {
        daemon.refuse_without_listen()?;
        show(vfs_host::compose(&options, authority)?.registry());
    }
    Ok(ExitCode::SUCCESS)
}

/// `vfs check`: `OK`, or every problem one per line.
fn check(
    launch: LaunchArgs,
    daemon: &DaemonArgs,
    run: &RunArgs,
    authority: AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    let options = launch.into_options()?;
    // With --allow-run, each endpoint's sandbox is started and tried once.
    let try_run = |registry: &vfs::MountRegistry| run.runner(registry).map(drop).map_err(|error| Problems(vec![error]));
    let checked = if daemon.listen.is_some() {
        daemon
            .plan(&options, true, authority)
            .and_then(|hosting| hosting.endpoints.iter().try_for_each(|served| try_run(served.launch().registry())))
    } else {
        daemon.refuse_without_listen()?;
        vfs_host::compose(&options, authority).and_then(|launch| try_run(launch.registry()))
    };
    match checked {
        Ok(()) => {
            output::line("OK");
            Ok(ExitCode::SUCCESS)
        }
        Err(problems) => {
            for problem in &problems {
                output::line(&problem.to_string());
            }
            Ok(ExitCode::from(REFUSED))
        }
    }
}

/// `vfs tools`: the tools a launch lists (all of them by default); each endpoint's with
/// `--listen`.
fn tools(launch: LaunchArgs, daemon: &DaemonArgs, authority: AmbientAuthority) -> anyhow::Result<ExitCode> {
    let options = launch.into_options()?;
    let listed = |launch: &vfs_host::Launch| launch.tools(None).listed_tools();
    let tools = if daemon.listen.is_some() {
        let endpoints = daemon.plan(&options, false, authority)?.endpoints;
        let by_endpoint: serde_json::Map<String, serde_json::Value> = endpoints
            .iter()
            .map(|served| Ok((served.path(), serde_json::to_value(listed(served.launch()))?)))
            .collect::<Result<_, serde_json::Error>>()
            .context("cannot encode the tool list")?;
        serde_json::Value::Object(by_endpoint)
    } else if options.is_default() {
        daemon.refuse_without_listen()?;
        serde_json::to_value(vfs_host::all_tools()).context("cannot encode the tool list")?
    } else {
        daemon.refuse_without_listen()?;
        let launch = vfs_host::compose(&options, authority)?;
        serde_json::to_value(listed(&launch)).context("cannot encode the tool list")?
    };
    output::json(&tools);
    Ok(ExitCode::SUCCESS)
}

/// `vfs call`: one tool call, printed as the agent would see it.
fn call(
    tool: &str,
    arguments: &str,
    launch: LaunchArgs,
    run: &RunArgs,
    authority: AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    let arguments: serde_json::Value = serde_json::from_str(arguments).map_err(|error| Refusal {
        message: format!("the arguments are not valid JSON: {error}"),
        hint: Some(r#"pass one JSON object, like '{"path": "/workspace/README.md"}'"#.to_owned()),
    })?;
    let serde_json::Value::Object(arguments) = arguments else {
        return Err(Refusal {
            message: "the arguments must be a JSON object".to_owned(),
            hint: Some(r#"pass one JSON object, like '{"path": "/workspace/README.md"}'"#.to_owned()),
        }
        .into());
    };
    let launch = vfs_host::compose(&launch.into_options()?, authority)?;
    let logger = vfs_host::ExchangeLogger::open(launch.registry()).map_err(Problems::from)?;
    let runner = run.runner(launch.registry()).map_err(|error| Problems(vec![error]))?;
    let service = launch.tools(logger).with_runner(runner);
    // A signal cancels the call where it can safely stop (a delete that has begun finishes)
    // instead of ending the process in the middle of a change (`stopping`).
    let cancel = stopping::flag_on_first_signal("stopping once the call has ended or stopped")?;
    match service.call_with(tool, Some(arguments), vfs::Budget::unlimited().with_cancel_flag(cancel)) {
        Ok(result) => {
            output::tool_output(&result);
            Ok(if result.is_error { ExitCode::from(TOOL_ERROR) } else { ExitCode::SUCCESS })
        }
        Err(error) => Err(Refusal {
            message: error.to_string(),
            hint: Some("`vfs tools` lists the tools and their arguments".to_owned()),
        }
        .into()),
    }
}

impl DaemonArgs {
    /// The daemon's options are refused without `--listen`, in one line.
    fn refuse_without_listen(&self) -> Result<(), Problems> {
        let given = [
            (self.token_file.is_some(), "--token-file", "takes tokens"),
            (!self.allowed_origins.is_empty(), "--allowed-origin", "checks origins"),
            (!self.allowed_hosts.is_empty(), "--allowed-host", "checks hosts"),
        ];
        match given.iter().find(|(set, _, _)| *set) {
            Some((_, option, what)) => Err(Problems(vec![vfs_host::HostError::NeedsListen { option, what }])),
            None => Ok(()),
        }
    }

    /// The daemon's bounds: the options given, the machine's defaults for the rest.
    fn http_options(
        &self,
        listen: std::net::SocketAddr,
        tokens: vfs_host::Tokens,
        descriptors: u64,
    ) -> vfs_host::HttpOptions {
        let count = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        let seconds = std::time::Duration::from_secs;
        let mut http = vfs_host::HttpOptions::new(listen, tokens, descriptors);
        http.allowed_hosts.clone_from(&self.allowed_hosts);
        http.allowed_origins.clone_from(&self.allowed_origins);
        http.grace = seconds(self.grace);
        http.header_timeout = seconds(self.header_timeout);
        http.body_timeout = seconds(self.body_timeout);
        http.session_idle = seconds(self.session_idle);
        http.max_request_bytes = count(self.max_request_bytes);
        http.max_bodies_bytes = match self.max_request_bytes_held {
            Some(max) => count(max),
            None => http.max_request_bytes.saturating_mul(16),
        };
        if let Some(max) = self.max_connections {
            http.max_connections = count(max);
            http.max_sessions = count(max);
        }
        if let Some(max) = self.max_sessions {
            http.max_sessions = count(max);
        }
        http.max_sessions_per_token = match self.max_sessions_per_token {
            Some(max) => count(max),
            None => (http.max_sessions / 4).max(4),
        };
        http.max_connections_per_token = match self.max_connections_per_token {
            Some(max) => count(max),
            None => (http.max_connections / 4).max(4),
        };
        http.max_calls_per_session = self.max_calls_per_session.map(count);
        http.max_requests_per_token = match self.max_requests_per_token {
            Some(max) => count(max),
            None => (http.max_connections / 4).max(4),
        };
        http
    }

    /// What the daemon would serve; with `require_tokens`, no token is refused.
    fn plan(
        &self,
        options: &LaunchOptions,
        require_tokens: bool,
        authority: AmbientAuthority,
    ) -> Result<vfs_host::Hosting, Problems> {
        let environment = std::env::var("VFS_TOKEN").ok();
        vfs_host::host(options, self.token_file.as_deref(), environment.as_deref(), require_tokens, authority)
    }
}

/// `/mcp/review (crew `review`, its directory at /crews-1)`, or `/mcp`.
fn endpoint_title(served: &vfs_host::Served) -> String {
    match (served.crew_name(), served.runner_root()) {
        (Some(name), Some(root)) => format!("{} (crew `{name}`, hosted at {root})", served.path()),
        _ => served.path(),
    }
}

/// `vfs serve --listen`: the MCP streamable HTTP daemon.
fn serve_http(
    options: &LaunchOptions,
    daemon: &DaemonArgs,
    run: &RunArgs,
    listen: std::net::SocketAddr,
    authority: AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    let descriptors = vfs::raise_open_file_limit();
    let hosting = daemon.plan(options, true, authority)?;
    let mut summary = Vec::new();
    let mut endpoints = Vec::new();
    for served in &hosting.endpoints {
        let launch = served.launch().clone();
        let roots: Vec<String> =
            launch.registry().agent_mounts().iter().map(|mount| format!("{} ({})", mount.root, mount.rights)).collect();
        summary.push(format!("{} serves {}", served.path(), roots.join(", ")));
        // One sandbox per endpoint, shared by its sessions.
        let runner = run.runner_or_note(launch.registry(), &format!("{}: ", served.path()));
        let sessions: vfs_host::SessionFactory = std::sync::Arc::new(move || {
            let logger = launch.exchange_logger().map_err(|error| std::io::Error::other(error.to_string()))?;
            Ok(launch.tools(logger).with_runner(runner.clone()))
        });
        endpoints.push(vfs_host::Endpoint { crew: served.crew_name().map(str::to_owned), sessions });
    }
    let http = daemon.http_options(listen, hosting.tokens.unwrap_or_default(), descriptors);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Listening for the signals before the line that names them: a SIGTERM as soon as it
        // is out shuts down gracefully instead of ending vfs by the default action.
        let stop = vfs_host::shutdown_signal().context("cannot listen for SIGTERM, SIGINT and SIGHUP")?;
        let listener = vfs_host::Listener::bind(listen).await.with_context(|| format!("cannot listen on {listen}"))?;
        let log_note = match &options.llm_log {
            Some(directory) => format!("; exchange log in {}, a file per session or token", directory.display()),
            None => String::new(),
        };
        output::status(&format!(
            "vfs {}: listening at http://{} (MCP streamable HTTP); {}{log_note}; stop with SIGTERM or Ctrl-C",
            env!("CARGO_PKG_VERSION"),
            listener.address(),
            summary.join("; "),
        ));
        vfs_host::serve_until(listener, endpoints, http, stop).await.context("the HTTP server failed")
    })?;
    Ok(ExitCode::SUCCESS)
}

fn serve(options: &LaunchOptions, run: &RunArgs, authority: AmbientAuthority) -> anyhow::Result<ExitCode> {
    vfs::raise_open_file_limit();
    // An MCP host starts this process for each session and waits for its first answer: the
    // name rules' automata, most of the start-up's own time, are built beside it. A rule set
    // too large to build (every rule was parsed above) ends the server as a refused launch
    // would, and until then no name a rule could match is let through and nothing is changed.
    // With --allow-run the sandbox mounts a view before serving, which an exit from that
    // thread would leave behind, and costs far more than the rules: they are compiled first.
    let options = &LaunchOptions { defer_name_rules: !run.allow_run, ..options.clone() };
    let launch = vfs_host::compose(options, authority)?;
    let compiling = launch.registry().clone();
    std::thread::Builder::new()
        .name("vfs-name-rules".to_owned())
        .spawn(move || {
            if let Err(error) = compiling.compile_name_rules() {
                output::problems(&Problems::from(vfs_host::HostError::from(error)));
                std::process::exit(i32::from(REFUSED));
            }
        })
        .context("cannot start a thread")?;
    let logger = launch.exchange_logger().map_err(Problems::from)?;
    let log_note = match (&logger, &options.llm_log) {
        (Some(logger), Some(directory)) => format!("; exchange log {}", directory.join(logger.file_name()).display()),
        _ => String::new(),
    };
    let runner = run.runner_or_note(launch.registry(), "");
    let service = launch.tools(logger).with_runner(runner);
    let server = vfs_host::VfsServer::new(service.clone());
    let served: Vec<String> =
        service.registry().agent_mounts().iter().map(|mount| format!("{} ({})", mount.root, mount.rights)).collect();
    output::status(&format!(
        "vfs {}: serving {} over MCP on stdin/stdout{log_note}; tools: {}; connect by having your MCP host launch this command (README: Connect an MCP host)",
        env!("CARGO_PKG_VERSION"),
        served.join(", "),
        server.tool_summary(),
    ));
    // One thread for the protocol; tool calls run on the blocking pool (see `vfs_host::server`).
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let served = runtime.block_on(async {
        // A signal stops the server as the end of stdin does, the calls running cancelled
        // where they safely can be, and waits for them (`stopping`).
        let mut signals = stopping::Signals::listen()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            signals.next().await;
            let _ = stop.send(());
            signals.then_end_at_the_next("stopping once the calls running have ended or stopped").await;
        });
        vfs_host::serve_stdio_until(server, async move {
            let _ = stopped.await;
        })
        .await
        .context("the MCP connection failed")
    });
    // The tool calls have ended (`serve_stdio_until` waits for them); stdin's read may not
    // have (a terminal or a socket): not waited for.
    runtime.shutdown_background();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// `vfs fuse`: the agent's tree as a FUSE file system, until a signal or an unmount.
fn fuse(
    mountpoint: &std::path::Path,
    options: &LaunchOptions,
    authority: AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    vfs::raise_open_file_limit();
    let launch = vfs_host::compose(options, authority)?;
    let registry = launch.registry();
    let refusals =
        vfs_host::ExchangeLogger::open(registry).map_err(Problems::from)?.map(|logger| Arc::new(logger).refusal_sink());
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    // Listening before the view is mounted: a SIGTERM that comes as soon as the line below is
    // out (a supervisor's, a test's) unmounts the view, where the default action would end vfs
    // and leave a stale mount behind.
    let stop = {
        let _entered = runtime.enter();
        vfs_host::shutdown_signal().context("cannot listen for SIGTERM, SIGINT and SIGHUP")?
    };
    let mounted = vfs_fuse::mount(registry, mountpoint, &vfs_fuse::FuseOptions { refusals, ..Default::default() })?;
    let served: Vec<String> =
        registry.agent_mounts().iter().map(|mount| format!("{} ({})", mount.root, mount.rights)).collect();
    output::status(&format!(
        "vfs {}: serving {} through FUSE at {}; stop with SIGTERM, Ctrl-C or `fusermount3 -u {}`",
        env!("CARGO_PKG_VERSION"),
        served.join(", "),
        mountpoint.display(),
        mountpoint.display(),
    ));
    runtime.block_on(async {
        let mut stop = std::pin::pin!(stop);
        let mut poll = tokio::time::interval(std::time::Duration::from_millis(200));
        loop {
            tokio::select! {
                () = &mut stop => break,
                _ = poll.tick() => {
                    // The view's changes reach the journal within a poll.
                    if let Some(journal) = launch.journal() { journal.flush(); }
                    if !mounted.is_mounted() { break }
                },
            }
        }
        anyhow::Ok(())
    })?;
    let unmounted_elsewhere = !mounted.is_mounted();
    let unmounted = mounted.unmount();
    // After the view is gone: a file committed at its release during the unmount has its
    // entry written too, not only its intent.
    if let Some(journal) = launch.journal() {
        journal.flush();
    }
    match unmounted {
        Err(error) if !unmounted_elsewhere => Err(anyhow::anyhow!("cannot unmount {}: {error}", mountpoint.display())),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The exit status of `vfs run` when the sandbox cannot start (as `env(1)` and `timeout(1)`
/// use 125 for their own failures).
const SANDBOX_FAILED: u8 = 125;

/// `vfs run`: one command in the sandbox, its output streamed, its status passed on.
fn run_one(
    options: &LaunchOptions,
    limits: &RunLimits,
    cwd: Option<String>,
    timeout: Option<u64>,
    command: &[String],
    authority: AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    vfs::raise_open_file_limit();
    let launch = vfs_host::compose(options, authority)?;
    let logger = vfs_host::ExchangeLogger::open(launch.registry()).map_err(Problems::from)?.map(Arc::new);
    // SIGINT and SIGTERM end the command (every process of it), as a cancellation; listened
    // for before the sandbox mounts its view, so that one during the start cannot end vfs by
    // its default action and leave the view's mount behind.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let signalled = {
        let _entered = runtime.enter();
        vfs_host::shutdown_signal().context("cannot listen for SIGTERM, SIGINT and SIGHUP")?
    };
    let started = std::time::SystemTime::now();
    // One call for the whole command: its exchange-log line and the journal entries of what it
    // changed through the view carry its id (`vfs undo --call ID` undoes the command).
    let call = vfs::CallId::new();
    let runner = match vfs_host::Runner::start_logged(launch.registry(), &limits.options(), logger.as_ref()) {
        Ok(runner) => runner,
        Err(error) => {
            if let Some(logger) = &logger {
                logger.record_command(&call, command, cwd.as_deref().unwrap_or(""), started, Err(&error.to_string()));
            }
            output::error(&error.to_string(), error.hint().as_deref());
            // A malformed `--run-env` is the command line's fault; anything else, the sandbox's.
            let code = if matches!(error, vfs_host::HostError::RunEnv { .. }) { REFUSED } else { SANDBOX_FAILED };
            return Ok(ExitCode::from(code));
        }
    };
    let timeout = timeout.map_or(runner.max_timeout(), std::time::Duration::from_secs).min(runner.max_timeout());
    // The command is started by a shell's `exec`, as a shell would start it: one that is not
    // found exits 127, one that cannot be run 126 (bubblewrap's own exec exits 1 for both, which
    // a command's own 1 would not tell apart). The shell is replaced by the command.
    let argv =
        ["/bin/sh", "-c", "exec \"$@\"", "vfs run"].into_iter().map(str::to_owned).chain(command.iter().cloned());
    let request = vfs_fuse::RunRequest {
        argv: argv.collect(),
        cwd: cwd.unwrap_or_else(|| runner.default_cwd().to_owned()),
        timeout,
        keep: 0,
        call: Some(call.clone()),
    };
    if let Some(journal) = launch.journal() {
        journal.begin(&call, vfs_host::OPERATOR_SESSION, None);
    }
    let flag = stop.clone();
    std::thread::spawn(move || {
        runtime.block_on(signalled);
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    let outcome =
        runner.sandbox().run(&request, &|| stop.load(std::sync::atomic::Ordering::Relaxed), &mut |stream, bytes| {
            let _ = match stream {
                vfs_fuse::Stream::Stdout => stdout.write_all(bytes).and_then(|()| stdout.flush()),
                vfs_fuse::Stream::Stderr => stderr.write_all(bytes).and_then(|()| stderr.flush()),
            };
        });
    drop((stdout, stderr));
    // The view goes first: a file whose flush a killed command cut short is committed at its
    // release, which the unmount waits for. Then every change is known, and durable before
    // `vfs run` exits (one the view could not tie to the command is written as nobody's).
    drop(runner);
    if let Some(journal) = launch.journal() {
        journal.finish(&call);
    }
    if let Some(logger) = &logger {
        let reason = outcome.as_ref().err().map(ToString::to_string);
        logger.record_command(
            &call,
            command,
            &request.cwd,
            started,
            outcome.as_ref().map_err(|_| reason.as_deref().unwrap_or("")),
        );
    }
    Ok(run_status(outcome, timeout))
}

/// `vfs run`'s exit status for how its command ended, with a line for an end it caused.
fn run_status(outcome: Result<vfs_fuse::RunOutcome, vfs_fuse::RunError>, timeout: std::time::Duration) -> ExitCode {
    match outcome {
        Ok(outcome) => {
            match outcome.ending {
                vfs_fuse::Ending::TimedOut => output::status(&format!(
                    "vfs run: the command ran past its time limit ({} s); every process of it was killed",
                    timeout.as_secs()
                )),
                vfs_fuse::Ending::Cancelled => {
                    output::status("vfs run: stopped; every process of the command was killed");
                }
                vfs_fuse::Ending::Exited(_) | vfs_fuse::Ending::Signalled(_) => {}
            }
            ExitCode::from(u8::try_from(outcome.ending.status()).unwrap_or(1))
        }
        // A `--cwd` that is no directory of the tree is the command line's fault.
        Err(error @ (vfs_fuse::RunError::WorkingDirectory(_) | vfs_fuse::RunError::NotADirectory(_))) => {
            output::error(&error.to_string(), None);
            ExitCode::from(REFUSED)
        }
        Err(error) => {
            output::error(&error.to_string(), None);
            ExitCode::from(SANDBOX_FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::{Cli, ServeOnly};

    /// `vfs serve`'s own parser reads every command line it takes as the whole parser does,
    /// and leaves every other one to it.
    #[test]
    fn serve_alone_parses_as_the_whole_command_line_does() {
        let line = |text: &str| -> Vec<std::ffi::OsString> { text.split(' ').map(Into::into).collect() };
        for text in [
            "vfs serve",
            "vfs serve --mount ./a:/src:ro --mount ./out:/output:rw --llm-log logs",
            "vfs serve --listen 127.0.0.1:0 --token-file t --max-sessions 3",
            "vfs serve --allow-run --run-timeout 5 --hide *.db --no-default-hide",
        ] {
            let whole = Cli::try_parse_from(line(text)).map(|cli| format!("{:?}", cli.command));
            let alone = ServeOnly::parse(&line(text)).map(|command| format!("{command:?}"));
            assert_eq!(alone, Some(whole.expect(text)), "{text}");
        }
        for text in
            ["vfs serve --help", "vfs serve -h", "vfs serve --version", "vfs serve --mount", "vfs mounts", "vfs"]
        {
            assert!(ServeOnly::parse(&line(text)).is_none(), "{text}");
        }
    }
}
