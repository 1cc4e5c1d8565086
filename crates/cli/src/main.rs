//! The `vfs` binary: serve the agent tools over MCP, and inspect or try a launch.
//!
//! Exit codes: 0 success; 1 the tool reported an error (`vfs call`) or serving failed; 2 the
//! launch options were refused (also by `vfs check`), the tool call was malformed, or the
//! command line was invalid.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use vfs_host::{LaunchOptions, Problems, ToolService};

mod output;

const EXAMPLES: &str = "\
Examples:
  vfs serve
      serve the current directory read-only at /workspace
  vfs serve --mount ../data:/src:ro --mount ./out:/output:rw --llm-log ./logs
      serve two folders and log every tool call to ./logs (hidden from the agent)
  vfs serve --settings vfs.json --crew ./crews/review
      mounts from a settings file, selected by the crew's `mounts:` block
  vfs mounts --mount ./out:/output:rw
      show the mount table with physical paths (operator view)
  vfs check --settings vfs.json --crew ./crews/review
      validate a launch without serving
  vfs call read_text_file '{\"path\": \"/workspace/README.md\", \"head\": 5}'
      run one tool and print what the agent would see

Exit codes:
  0  success
  1  the tool reported an error (`call`), or serving failed
  2  the launch was refused (bad --mount, settings, crew, reserved root; `check` found problems),
     the tool call was malformed (unknown tool, wrong arguments), or the command line is invalid";

/// A virtual filesystem for AI agents: named mounts under virtual paths, served over MCP.
#[derive(Debug, Parser)]
#[command(name = "vfs", version, about, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the agent tools as an MCP server over stdio (stdout carries only the protocol).
    #[command(after_help = EXAMPLES)]
    Serve {
        #[command(flatten)]
        launch: LaunchArgs,
    },
    /// Show the effective mount table for the operator: physical paths, rights, visibility, origin.
    #[command(after_help = EXAMPLES)]
    Mounts {
        /// Print the agent-facing prompt table (`## Available File Mounts`) instead.
        #[arg(long)]
        prompt: bool,
        #[command(flatten)]
        launch: LaunchArgs,
    },
    /// Validate everything a launch would do; print `OK` or one line per problem.
    #[command(after_help = EXAMPLES)]
    Check {
        #[command(flatten)]
        launch: LaunchArgs,
    },
    /// Print the agent tools with their JSON schemas and annotations (all of them, or with
    /// launch options the ones that launch would list).
    #[command(after_help = EXAMPLES)]
    Tools {
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
    },
}

/// The launch options every command takes.
#[derive(Debug, Args)]
struct LaunchArgs {
    /// Mount a directory: `[<ulid>|]<physical>:<virtual>[:ro|rw|rwnd][;<subpath>:<rights>]*`
    /// (repeatable; relative paths resolve against the current directory).
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
    #[arg(long, value_name = "PATH")]
    crew: Option<PathBuf>,
    /// Log every tool call as JSON lines in this directory (created if missing), mounted as the
    /// internal root `/llm-logs` that agents cannot see.
    #[arg(long = "llm-log", value_name = "DIR")]
    llm_log: Option<PathBuf>,
    /// Mount the default `/workspace` (the current directory) read-write instead of read-only.
    #[arg(long)]
    allow_write: bool,
}

impl LaunchArgs {
    fn into_options(self) -> anyhow::Result<LaunchOptions> {
        let current_dir = std::env::current_dir().context("cannot determine the current directory")?;
        Ok(LaunchOptions {
            mounts: self.mounts,
            mount_ids: self.mount_ids,
            settings: self.settings,
            crew: self.crew,
            llm_log: self.llm_log,
            allow_write: self.allow_write,
            current_dir,
        })
    }
}

/// A finished command's exit status.
const REFUSED: u8 = 2;
const TOOL_ERROR: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    output::init_logging();
    match run(cli.command) {
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

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve { launch } => serve(&launch.into_options()?),
        Command::Mounts { prompt, launch } => {
            let launch = vfs_host::compose(&launch.into_options()?)?;
            if prompt {
                output::text(&launch.registry().prompt_table());
            } else {
                output::mount_table(&launch.registry().operator_view());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { launch } => match vfs_host::compose(&launch.into_options()?) {
            Ok(_) => {
                output::line("OK");
                Ok(ExitCode::SUCCESS)
            }
            Err(problems) => {
                for problem in &problems {
                    output::line(&problem.to_string());
                }
                Ok(ExitCode::from(REFUSED))
            }
        },
        Command::Tools { launch } => {
            let options = launch.into_options()?;
            let tools = if options.is_default() {
                vfs_host::all_tools()
            } else {
                let launch = vfs_host::compose(&options)?;
                ToolService::new(launch.registry().clone(), None).listed_tools()
            };
            output::json(&serde_json::to_value(&tools).context("cannot encode the tool list")?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Call { tool, arguments, launch } => {
            let arguments: serde_json::Value = serde_json::from_str(&arguments).map_err(|error| Refusal {
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
            let launch = vfs_host::compose(&launch.into_options()?)?;
            let logger = vfs_host::ExchangeLogger::open(launch.registry()).map_err(Problems::from)?;
            let service = ToolService::new(launch.registry().clone(), logger);
            match service.call(&tool, Some(arguments)) {
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
    }
}

fn serve(options: &LaunchOptions) -> anyhow::Result<ExitCode> {
    vfs::raise_open_file_limit();
    let launch = vfs_host::compose(options)?;
    let registry = launch.registry().clone();
    let logger = vfs_host::ExchangeLogger::open(&registry).map_err(Problems::from)?;
    let log_note = match (&logger, &options.llm_log) {
        (Some(logger), Some(directory)) => format!("; exchange log {}", directory.join(logger.file_name()).display()),
        _ => String::new(),
    };
    let service = ToolService::new(registry, logger);
    let server = vfs_host::VfsServer::new(service.clone());
    let served: Vec<String> =
        service.registry().agent_mounts().iter().map(|mount| format!("{} ({})", mount.root, mount.rights)).collect();
    output::status(&format!(
        "vfs {}: serving {} over MCP on stdin/stdout{log_note}; tools: {}; connect by having your MCP host launch this command (README: Connect an MCP host)",
        env!("CARGO_PKG_VERSION"),
        served.join(", "),
        server.tool_summary(),
    ));
    // One thread for the protocol: tool calls on local mounts run in place (see
    // `vfs_host::server`), and a second worker would only add cross-thread wake-ups.
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    runtime.block_on(vfs_host::serve_stdio(service)).context("the MCP connection failed")?;
    Ok(ExitCode::SUCCESS)
}
