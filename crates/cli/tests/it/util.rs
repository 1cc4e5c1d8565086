use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A fresh temporary directory and a way to run `vfs` in it.
pub(crate) struct TestDir {
    dir: tempfile::TempDir,
}

/// The result of one run.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) code: i32,
}

impl TestDir {
    pub(crate) fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("a temp dir") }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a file (creating parents) and returns its path.
    pub(crate) fn file(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create parents");
        std::fs::write(&path, content).expect("write fixture");
        path
    }

    /// Creates a directory (and parents).
    pub(crate) fn dir(&self, relative: &str) -> PathBuf {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(&path).expect("create dir");
        path
    }

    /// A `vfs` command running in the temp dir, with `VFS_*` variables cleared.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_vfs"));
        command.current_dir(self.dir.path()).args(args).env_remove("VFS_LOG").env("NO_COLOR", "1");
        command
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        self.run_with_input(args, "")
    }

    pub(crate) fn run_with_input(&self, args: &[&str], input: &str) -> Run {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vfs");
        // A refused launch exits before reading its input: a broken pipe is expected then.
        if let Err(error) = child.stdin.take().expect("stdin").write_all(input.as_bytes()) {
            assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {error}");
        }
        let output = child.wait_with_output().expect("wait for vfs");
        Run {
            stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
            stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
            code: output.status.code().unwrap_or(-1),
        }
    }

    /// `args` run with a stdout whose reader is gone before the first byte (`vfs … | head -c 0`):
    /// the exit code and stderr.
    pub(crate) fn run_with_closed_stdout(&self, args: &[&str]) -> (i32, String) {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let output =
            self.command(args).stdin(Stdio::null()).stdout(writer).stderr(Stdio::piped()).output().expect("run vfs");
        (output.status.code().unwrap_or(-1), String::from_utf8(output.stderr).expect("utf-8 stderr"))
    }

    /// The exit code of `args` run with stdout and stderr on a full disk (`/dev/full`: every
    /// write fails with `ENOSPC`).
    #[expect(clippy::disallowed_types, reason = "fixture: the system's /dev/full, no mount's file")]
    pub(crate) fn run_with_full_outputs(&self, args: &[&str]) -> i32 {
        let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
        let status = self.command(args).stdin(Stdio::null()).stdout(full()).stderr(full()).status().expect("run vfs");
        status.code().unwrap_or(-1)
    }

    /// Operator output with the temp dir replaced by `[TMP]` (never use on agent output: a
    /// physical path there is a leak, asserted by [`assert_no_leak`]).
    pub(crate) fn redact(&self, text: &str) -> String {
        let mut text = text.replace(&self.path().display().to_string(), "[TMP]");
        if let Ok(real) = self.path().canonicalize() {
            text = text.replace(&real.display().to_string(), "[TMP]");
        }
        text
    }

    /// Fails if agent-bound text names the temp dir in any spelling.
    pub(crate) fn assert_no_leak(&self, text: &str) {
        let mut spellings = vec![self.path().display().to_string()];
        if let Ok(real) = self.path().canonicalize() {
            spellings.push(real.display().to_string());
        }
        for spelling in spellings {
            assert!(!text.contains(&spelling), "agent output names a physical path: {text}");
        }
    }
}

/// Asserts exact equality and shows both sides in full when they differ.
#[macro_export]
macro_rules! eqnice {
    ($expected:expr, $got:expr) => {{
        let expected: &str = &$expected;
        let got: &str = &$got;
        if expected != got {
            panic!("\n==== expected ====\n{expected}\n==== got ====\n{got}\n==== end ====\n");
        }
    }};
}

/// Sends the signal `name` (`TERM`, `INT`, …) to `child`.
pub(crate) fn signal(child: &std::process::Child, name: &str) {
    let status = Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status().expect("kill");
    assert!(status.success());
}
