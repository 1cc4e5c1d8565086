//! The doctrine, proved rather than configured: **a physical path is never a virtual path, and
//! no physical path ever reaches an agent.** This crate is the test kit other crates of the
//! workspace depend on to show that they keep it.
//!
//! # What each part proves
//!
//! - [`static_check`]: the workspace's own code keeps raw filesystem access inside
//!   `crates/vfs/src/storage/`, carries no host path in a public agent-facing type, mints the
//!   privileged capability only where allowed, formats no `io::Error` or host path into agent
//!   text, and still lists the disallowed methods in `clippy.toml`. Run it with
//!   `cargo run -p vfs-compliance -- check .`.
//! - [`deps`]: every package the workspaces build is under a license on the allow-list, comes
//!   from crates.io or a path inside the repository, and is built in one version unless the
//!   allow-list says why two are accepted. Run it with `cargo run -p vfs-compliance -- deps .`.
//! - [`leak`]: a piece of agent-bound text names no physical base of any mount in any spelling,
//!   nor the working directory, nor `$HOME`, nor an internal root. Tests outside Rust run it as
//!   `vfs-compliance leaks --mount SPEC … < text`.
//! - [`kit`]: a registry and its storage backend pass the scenarios every backend must pass
//!   (mount grammar, canonicalisation, resolution order, rights, internal absence, symlink
//!   policy, physical nesting, atomic writes, bounded results, exact denial texts). A backend's
//!   own test suite calls [`kit::run_all`] with a [`kit::Factory`]; the last scenario runs one
//!   read and one write across every configuration (rights × visibility × caller × link).
//! - [`fixture`]: temporary directory layouts for the kit and the battery.
#![deny(missing_docs)]

pub use error::CheckError;
pub use leak::{Leak, LeakChecker, LeakKind};

pub mod deps;
mod error;
pub mod fixture;
pub mod kit;
pub mod leak;
pub mod static_check;
