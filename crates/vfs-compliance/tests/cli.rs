//! The `vfs-compliance` binary: `leaks` for tests outside Rust, `deps`' exit codes, and usage
//! errors.

use std::io::Write as _;
use std::process::{Command, Stdio};

use vfs_compliance::fixture::Layout;

fn leaks(arguments: &[String], input: &str) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vfs-compliance"))
        .arg("leaks")
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    (output.status.code(), String::from_utf8(output.stdout).unwrap())
}

#[test]
fn leaks_reads_agent_text_on_standard_input() {
    let layout = Layout::new();
    layout.mkdir("data").mkdir("logs");
    let data = layout.path("data").display().to_string();
    let logs = layout.path("logs").display().to_string();
    let arguments = vec![
        "--mount".to_owned(),
        format!("{data}:/src:ro"),
        "--internal".to_owned(),
        format!("{logs}:/llm-logs:rw"),
        "--spelling".to_owned(),
        "/srv/alias".to_owned(),
    ];
    let (code, stdout) = leaks(&arguments, "cannot read `/src/a.txt`");
    assert_eq!((code, stdout.as_str()), (Some(0), "vfs-compliance: no leak in 24 bytes\n"));
    let (code, stdout) = leaks(&arguments, &format!("at {data}/a.txt, /llm-logs/x and /srv/alias/y"));
    assert_eq!(code, Some(1));
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
    assert!(stdout.contains("leak: InternalRoot `/llm-logs`"), "{stdout}");
    let (code, _) = leaks(&["--mount".to_owned()], "");
    assert_eq!(code, Some(2));
}

#[test]
fn usage_errors_exit_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_vfs-compliance")).arg("frobnicate").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let rules = Command::new(env!("CARGO_BIN_EXE_vfs-compliance")).arg("rules").output().unwrap();
    assert!(String::from_utf8(rules.stdout).unwrap().contains("raw-fs: raw filesystem access"));
}

#[test]
fn deps_that_cannot_run_exits_2_with_a_hint() {
    let layout = Layout::new();
    let output = Command::new(env!("CARGO_BIN_EXE_vfs-compliance")).arg("deps").arg(layout.path(".")).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("error: `cargo metadata` failed for `Cargo.toml`: "), "{stderr}");
    assert!(stderr.ends_with("\n\nhint: the check runs offline (`--locked --offline`): fetch the locked dependencies once with `cargo fetch --locked --manifest-path Cargo.toml`, or bring the lock file up to date\n"), "{stderr}");
}
