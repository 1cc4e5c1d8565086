//! The service around the `vfs` library: it turns an operator's launch options into a frozen
//! mount registry, holds the one privileged capability the service needs (the exchange logger's
//! append-only reach into `/llm-logs`), and serves the agent tools over MCP. Agents only ever
//! see virtual paths; physical paths appear on operator surfaces only (refusal lines, the
//! operator's mount table, the start-up line on stderr).
//!
//! # Brief overview
//!
//! - [`LaunchOptions`] and [`compose`]: the launch composition (`--mount`, `--mount-id`,
//!   `--settings`, `--crew`, `--llm-log`, `--allow-write`), every refusal one line, before
//!   anything is served.
//! - [`Crew`]: a crew definition, read beneath its directory as agents see it at `/crew`.
//! - [`host`]: the HTTP daemon's plan: `/mcp` and each hosted crew's `/mcp/<name>`, each with
//!   its own registry, and the bearer tokens; [`serve_http`] serves it over MCP streamable
//!   HTTP.
//! - [`ExchangeLogger`]: one JSON line per tool call in `/llm-logs`, through the privileged,
//!   append-only capability.
//! - [`Journal`]: every change an agent makes, with its before image, in `/llm-journal`
//!   (`--journal`), for `vfs undo`.
//! - [`ToolService`]: the agent tools of `docs/design.md` (contracts) and `docs/tools.md`, run exactly as an agent would run them;
//!   shared by the MCP server ([`serve_stdio`]) and `vfs call`.
//! - [`HostError`]: the crate's one error type, operator-facing, with a separate hint.

#[cfg(feature = "mcp")]
pub use client_log::ClientLogLayer;
pub use crew::{Crew, CrewMount, CrewNameKey};
pub use error::{HostError, Problems};
pub use hosted::{Hosting, Served, host, tokens};
#[cfg(feature = "mcp")]
pub use http::{Endpoint, HttpOptions, Listener, SessionFactory, serve_http, serve_until, shutdown_signal};
pub use journal::{
    DEFAULT_MAX_BYTES, Entries, Entry, EntryState, Forgotten, JOURNAL_ROOT, Journal, MIN_MAX_BYTES, OPERATOR_SESSION,
    Pinned, UndoTurn, open_journal, parse_bytes, parse_journal_bound,
};
pub use launch::{Launch, LaunchOptions, RESERVED_ROOTS, compose, settings_journal};
pub use logger::ExchangeLogger;
#[cfg(feature = "mcp")]
pub use server::{VfsServer, serve_stdio, serve_stdio_until};
pub use tokens::{Principal, Tokens};
#[cfg(feature = "mcp")]
pub use tools::run::{RunOptions, Runner, check_run_env};
#[cfg(feature = "mcp")]
pub use tools::{CallError, Media, ToolOutput, ToolService, all_tools};

// The MCP surface and its transports (feature `mcp`, on by default): without it, the launch
// composition, crews, the hosted plan, the exchange logger and the journal build without
// rmcp, hyper or tokio, for a front end of its own.
#[cfg(feature = "mcp")]
mod client_log;
mod crew;
mod error;
mod hosted;
#[cfg(feature = "mcp")]
mod http;
mod journal;
#[cfg(feature = "mcp")]
mod json_check;
mod launch;
mod logger;
mod nesting;
#[cfg(feature = "mcp")]
mod pool;
#[cfg(feature = "mcp")]
mod server;
mod time;
mod tokens;
#[cfg(feature = "mcp")]
mod tools;
mod words;
