//! Integration tests that drive the real `vfs` binary. One test binary; each module holds one
//! kind of test.
#![expect(clippy::disallowed_methods, reason = "fixture: tests build fixtures on disk")]

// Shared helpers: a fresh temp directory per test and a `vfs` command with a clean environment.
mod util;

// Launch composition: mounts, settings, crews, reserved roots, refusals (exact text).
mod launch;
// `vfs call`: what an agent sees, byte for byte.
mod call;
// `vfs serve`: the MCP protocol over stdio, raw.
mod serve;
// `vfs serve --listen`: the HTTP daemon, raw: tokens, origins, sessions, hosted crews.
mod http;
// The daemon as a server people run: HTTP answers, CORS, bounds, caps and timeouts.
mod daemon;
// `vfs fuse`: the start-up line, SIGTERM, stale mounts and refused mountpoints.
mod fuse;
// `vfs run` and `run_command`: statuses, time limits, the tool's text, what is listed.
mod run;
// `--journal`, `vfs journal list` and `vfs undo`: every change undone exactly, guarded.
mod journal;
// Documentation kept in sync with the binary.
mod docs;
