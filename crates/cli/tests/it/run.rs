//! `vfs run` and `run_command` through the binary: statuses, the time limit, the tool's text,
//! what is listed, and the refusals (exact text). What the sandbox holds in is proved in
//! `crates/fuse/tests/sandbox.rs`.

use std::process::Command;

use crate::eqnice;
use crate::util::TestDir;

/// True where the sandbox can run (root with `/dev/fuse` and `bwrap`); elsewhere the test
/// says why it did not run, and fails if `VFS_REQUIRE_SANDBOX` asks for it.
pub(crate) fn can_run() -> bool {
    let root = Command::new("id").arg("-u").output().is_ok_and(|output| output.stdout == b"0\n");
    let bwrap =
        Command::new("sh").args(["-c", "command -v bwrap"]).output().is_ok_and(|output| output.status.success());
    let possible = root && bwrap && std::path::Path::new("/dev/fuse").exists();
    if !possible {
        assert!(
            std::env::var_os("VFS_REQUIRE_SANDBOX").is_none(),
            "VFS_REQUIRE_SANDBOX is set, but this is not root with /dev/fuse and bwrap"
        );
        #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
        {
            eprintln!("SKIPPED: the sandbox needs root, /dev/fuse and bwrap here");
        }
    }
    possible
}

fn fixture() -> TestDir {
    let test = TestDir::new();
    test.file("src/a.txt", "hello\n");
    test.dir("w");
    test
}

#[test]
fn run_passes_the_commands_status_output_and_changes() {
    if !can_run() {
        return;
    }
    let test = fixture();
    let mounts = ["--mount", "./src:/src:ro", "--mount", "./w:/w:rw"];
    let script = "cat /src/a.txt; pwd; echo made > out.txt; echo oops >&2; echo x > /src/a.txt; exit 7";
    let run = test.run(&[&["run"], &mounts[..], &["--", "sh", "-c", script]].concat());
    assert_eq!(run.code, 7, "{}", run.stderr);
    eqnice!("hello\n/w\n", run.stdout);
    eqnice!("oops\nsh: 1: cannot create /src/a.txt: Read-only file system\n", run.stderr);
    assert_eq!(std::fs::read_to_string(test.path().join("w/out.txt")).unwrap(), "made\n");
    let cwd = test.run(&[&["run"], &mounts[..], &["--cwd", "/src", "--", "pwd"]].concat());
    eqnice!("/src\n", cwd.stdout);
    // The default is the first writable mount as the launch gave them, not as sorted.
    test.dir("v");
    let given =
        test.run(&["run", "--mount", "./src:/src:ro", "--mount", "./w:/w:rw", "--mount", "./v:/b:rw", "--", "pwd"]);
    eqnice!("/w\n", given.stdout);
    // A `--cwd` that is no directory of the tree is the command line's fault (2), not the
    // sandbox's (125).
    let missing = test.run(&[&["run"], &mounts[..], &["--cwd", "/nowhere", "--", "pwd"]].concat());
    assert_eq!((missing.code, missing.stdout.as_str()), (2, ""));
    eqnice!("error: no mount serves this path; available mounts: `/src` (ro), `/w` (rw)\n", missing.stderr);
    let signal = test.run(&[&["run"], &mounts[..], &["--", "sh", "-c", "kill -TERM $$"]].concat());
    assert_eq!(signal.code, 128 + 15);
    // A command that is not found exits 127, one that cannot be run 126, as under a shell; the
    // arguments reach it as given, a first one that looks like an option included.
    let unknown = test.run(&[&["run"], &mounts[..], &["--", "no-such-program", "-x"]].concat());
    assert_eq!((unknown.code, unknown.stdout.as_str()), (127, ""));
    eqnice!("vfs run: 1: exec: no-such-program: not found\n", unknown.stderr);
    let data = test.run(&[&["run"], &mounts[..], &["--", "/src/a.txt"]].concat());
    assert_eq!(data.code, 126);
    eqnice!("vfs run: 1: exec: /src/a.txt: Permission denied\n", data.stderr);
    let arguments = test.run(&[&["run"], &mounts[..], &["--", "printf", "[%s]", "-n", "a b", "", "$HOME"]].concat());
    eqnice!("[-n][a b][][$HOME]", arguments.stdout);
}

#[test]
fn run_ends_every_process_at_its_time_limit() {
    if !can_run() {
        return;
    }
    let test = fixture();
    let started = std::time::Instant::now();
    let run = test.run(&[
        "run",
        "--mount",
        "./w:/w:rw",
        "--timeout",
        "1",
        "--",
        "sh",
        "-c",
        "sleep 321 & echo up; sleep 322",
    ]);
    assert_eq!(run.code, 124);
    eqnice!("up\n", run.stdout);
    eqnice!("vfs run: the command ran past its time limit (1 s); every process of it was killed\n", run.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    let left = Command::new("pgrep").args(["-f", "sleep 32[12]"]).output().unwrap();
    eqnice!("", String::from_utf8_lossy(&left.stdout));
}

#[test]
fn run_command_answers_with_the_status_then_each_stream() {
    if !can_run() {
        return;
    }
    let test = fixture();
    let call = |arguments: &str| {
        test.run(&["call", "run_command", arguments, "--allow-run", "--mount", "./src:/src:ro", "--mount", "./w:/w:rw"])
    };
    let run = call(r#"{"command": "ls /src; echo warn >&2; exit 3"}"#);
    assert_eq!(run.code, 0, "{}", run.stderr);
    eqnice!("exit status 3\nstdout:\na.txt\n\nstderr:\nwarn\n", run.stdout);
    let run = call(r#"{"command": "head -c 300000 /dev/zero | tr '\\0' x", "cwd": "/src"}"#);
    let expected = format!(
        "exit status 0\nstdout (its last 262144 of 300000 bytes; the first 37856 were cut):\n{}\nstderr: (empty)\n",
        "x".repeat(262_144)
    );
    assert!(run.stdout == expected, "{}", &run.stdout[..200.min(run.stdout.len())]);
    let run = call(r#"{"command": "sleep 5", "timeoutSeconds": 1}"#);
    eqnice!(
        "timed out after 1 s: every process of the command was killed (exit status 124)\nstdout: (empty)\nstderr: (empty)\n",
        run.stdout
    );
    let run = call(r#"{"command": "true", "cwd": "/llm-logs"}"#);
    let missing = call(r#"{"command": "true", "cwd": "/nowhere"}"#);
    assert_eq!(run.code, 1);
    eqnice!(missing.stdout.replace("/nowhere", "/llm-logs"), run.stdout);
    test.assert_no_leak(&run.stdout);
}

#[test]
fn run_command_is_listed_only_with_allow_run_and_a_sandbox() {
    let test = fixture();
    let names = |run: &crate::util::Run| -> Vec<String> {
        let tools: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        tools.as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_owned()).collect()
    };
    let without = test.run(&["tools", "--mount", "./w:/w:rw"]);
    assert!(!names(&without).contains(&"run_command".to_owned()));
    let refused = test.run(&["call", "run_command", r#"{"command": "true"}"#, "--mount", "./w:/w:rw"]);
    assert_eq!(refused.code, 2);
    eqnice!(
        "error: unknown tool `run_command`; list the tools to see which ones this server offers\n\nhint: `vfs tools` lists the tools and their arguments\n",
        refused.stderr
    );
    if !can_run() {
        return;
    }
    let check = test.run(&["check", "--allow-run", "--mount", "./w:/w:rw"]);
    eqnice!("OK\n", check.stdout);
    let covered = test.run(&["check", "--allow-run", "--mount", "./w:/usr/local:rw"]);
    assert_eq!(covered.code, 2);
    eqnice!(
        "commands cannot be run: the mount `/usr/local` would cover the system's `/usr` inside the sandbox: give it another virtual root to run commands\n",
        covered.stdout
    );
}

#[test]
fn run_env_values_are_checked_before_anything_runs() {
    let test = fixture();
    let run = test.run(&["run", "--mount", "./w:/w:rw", "--run-env", "PATH=/evil", "--", "true"]);
    assert_eq!(run.code, 2, "the command line's fault, not the sandbox's");
    eqnice!(
        "error: invalid --run-env `PATH=/evil`: `PATH` is set by the sandbox itself\n\nhint: --run-env takes `NAME` (its value from vfs's own environment) or `NAME=VALUE`, like --run-env CARGO_HOME=/w/.cargo\n",
        run.stderr
    );
    if !can_run() {
        return;
    }
    let run = test.run(&[
        "run",
        "--mount",
        "./w:/w:rw",
        "--run-env",
        "GREETING=hi there",
        "--",
        "sh",
        "-c",
        "echo $GREETING",
    ]);
    eqnice!("hi there\n", run.stdout);
}

/// What a command changes through the sandbox's view is journaled like a tool's change (the
/// same change feed), and `vfs undo` puts it back.
#[test]
fn a_commands_changes_are_journaled_and_undone() {
    if !can_run() {
        return;
    }
    let test = fixture();
    let launch = ["--mount", "./w:/w:rw", "--journal", "journal"];
    let ran = test.run(
        &[
            &["call", "run_command", r#"{"command": "echo a > /w/x.txt; mkdir /w/d; echo b > /w/d/y"}"#, "--allow-run"],
            &launch[..],
        ]
        .concat(),
    );
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let listed = test.run(&["journal", "list", "--journal", "journal", "--json"]);
    let entries: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let changes: Vec<(String, String)> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| (entry["operation"].as_str().unwrap().to_owned(), entry["paths"][0].as_str().unwrap().to_owned()))
        .collect();
    // Newest first; a file made by the shell is created empty, then written at its close.
    let expected = [
        ("write", "/w/d/y"),
        ("write", "/w/d/y"),
        ("make_directory", "/w/d"),
        ("write", "/w/x.txt"),
        ("write", "/w/x.txt"),
    ];
    assert_eq!(changes, expected.map(|(operation, path)| (operation.to_owned(), path.to_owned())));
    // All of them are the `run_command` call's, in the session that made it (the view's
    // changes of a command are attributed to it), so the agent's `undo_changes` sees them.
    let owners: Vec<(&str, &str)> = entries
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| (entry["session"].as_str().unwrap(), entry["call"].as_str().unwrap()))
        .collect();
    assert!(owners.iter().all(|owner| *owner == owners[0]), "{owners:?}");
    assert_ne!(owners[0].0, "-", "{owners:?}");
    let undone = test.run(&[&["undo", "--last", "5"], &launch[..]].concat());
    eqnice!("restored /w/d/y\nremoved /w/d/y\nremoved /w/d\nrestored /w/x.txt\nremoved /w/x.txt\n", undone.stdout);
    assert_eq!(undone.code, 0, "{}", undone.stderr);
    assert_eq!(std::fs::read_dir(test.path().join("w")).unwrap().count(), 0);
}

#[test]
fn run_records_its_command_and_the_views_refusals_in_the_exchange_log() {
    if !can_run() {
        return;
    }
    let test = fixture();
    test.file("k/kept.txt", "kept\n");
    let run = test.run(&[
        "run",
        "--mount",
        "./w:/w:rw",
        "--mount",
        "./k:/k:rwnd",
        "--llm-log",
        "logs",
        "--",
        "sh",
        "-c",
        "echo out; rm /k/kept.txt; exit 3",
    ]);
    assert_eq!(run.code, 3, "{}", run.stderr);
    eqnice!("rm: cannot remove '/k/kept.txt': Permission denied\n", run.stderr);
    assert_eq!(std::fs::read_to_string(test.path().join("k/kept.txt")).unwrap(), "kept\n");
    #[expect(clippy::disallowed_methods, reason = "fixture: the test reads the log the run left")]
    let files: Vec<std::path::PathBuf> =
        std::fs::read_dir(test.path().join("logs")).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one log file for the run and its view: {files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let refusals: Vec<&serde_json::Value> = lines.iter().filter(|line| line["tool"] == "fuse").collect();
    assert_eq!(refusals.len(), 1, "{text}");
    assert_eq!(refusals[0]["arguments"], serde_json::json!({ "operation": "unlink", "path": "/k/kept.txt" }));
    assert_eq!(
        refusals[0]["result"],
        serde_json::json!({
            "isError": true,
            "errno": 13,
            "text": "cannot delete `/k/kept.txt`: `/k` is mounted rwnd; mounts that grant delete: `/w` (rw)",
        })
    );
    let commands: Vec<&serde_json::Value> = lines.iter().filter(|line| line["tool"] == "vfs run").collect();
    assert_eq!(commands.len(), 1, "{text}");
    assert_eq!(
        commands[0]["arguments"],
        serde_json::json!({ "argv": ["sh", "-c", "echo out; rm /k/kept.txt; exit 3"], "cwd": "/w" })
    );
    let result = &commands[0]["result"];
    assert_eq!(result["exitCode"], 3);
    assert_eq!(result["signal"], serde_json::Value::Null);
    assert_eq!(result["timedOut"], false);
    assert_eq!(result["stdoutBytes"], 4);
    assert_eq!(result["stderrBytes"], run.stderr.len());
    assert!(result.get("stdout").is_none() && !text.contains("echo out\\n") && !text.contains("\"out\\n\""));
}

#[test]
fn run_command_logs_the_call_and_its_views_refusals_apart() {
    if !can_run() {
        return;
    }
    let test = fixture();
    test.file("k/kept.txt", "kept\n");
    let call = test.run(&[
        "call",
        "run_command",
        r#"{"command": "mv /k/kept.txt /k/moved.txt"}"#,
        "--allow-run",
        "--mount",
        "./k:/k:rwnd",
        "--llm-log",
        "logs",
    ]);
    assert_eq!(call.code, 0, "{}", call.stderr);
    assert!(call.stdout.starts_with("exit status 1\n"), "{}", call.stdout);
    #[expect(clippy::disallowed_methods, reason = "fixture: the test reads the logs the call left")]
    let mut texts: Vec<String> = std::fs::read_dir(test.path().join("logs"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    texts.sort_by_key(|text| text.contains("\"tool\":\"run_command\""));
    assert_eq!(texts.len(), 2, "the call's file and the view's: {texts:?}");
    let refusal: serde_json::Value = serde_json::from_str(texts[0].trim_end()).unwrap();
    assert_eq!(refusal["tool"], "fuse");
    assert_eq!(refusal["arguments"], serde_json::json!({ "operation": "rename", "path": "/k/kept.txt" }));
    assert_eq!(
        refusal["result"]["text"],
        "cannot delete `/k/kept.txt`: `/k` is mounted rwnd, and no mount grants delete"
    );
    let logged: serde_json::Value = serde_json::from_str(texts[1].trim_end()).unwrap();
    assert_eq!(logged["tool"], "run_command");
    assert_eq!(logged["result"]["exitCode"], 1);
}

/// The lines of this machine's mount table whose mountpoint lies under `under`.
#[expect(clippy::disallowed_methods, reason = "fixture: the test reads the mount table")]
fn mounted_under(under: &std::path::Path) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let under = under.display().to_string();
    table
        .lines()
        .filter(|line| line.split(' ').nth(4).is_some_and(|at| at.starts_with(&under)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_views_a_killed_vfs_left_are_unmounted_and_removed_by_the_next_sandbox() {
    if !can_run() {
        return;
    }
    let test = fixture();
    test.dir("tmp");
    let temp = test.path().join("tmp");
    // Killed once its command runs (past bubblewrap's set-up, whose processes do not yet die
    // with their parent).
    let script = "echo > /w/started; sleep 30";
    let mut killed = test
        .command(&["run", "--mount", "./w:/w:rw", "--mount", "./src:/src:ro", "--", "sh", "-c", script])
        .env("TMPDIR", &temp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while !test.path().join("w/started").exists() && started.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    killed.kill().unwrap();
    killed.wait().unwrap();
    let home = temp.join("vfs-sandboxes-0");
    let left = mounted_under(&home);
    assert_eq!(left.len(), 2, "the view and the read-only view of /src, stale: {left:?}");
    let run = test.command(&["run", "--mount", "./w:/w:rw", "--", "true"]).env("TMPDIR", &temp).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(mounted_under(&temp), Vec::<String>::new());
    assert_eq!(names_in(&home), Vec::<String>::new(), "the killed vfs's directory is gone, and the last one's");
}

#[expect(clippy::disallowed_methods, reason = "fixture: the test lists the sandboxes' home")]
fn names_in(directory: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Starts `sh -c 'sleep 300 & echo $!'` as `user` and gives the id of the `sleep`, adopted by
/// init once its shell is gone.
fn orphan_of(user: u32) -> u32 {
    let left = Command::new("setpriv")
        .arg(format!("--reuid={user}"))
        .arg(format!("--regid={user}"))
        .args(["--clear-groups", "sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&left.stdout).trim().parse().unwrap()
}

/// True while process `pid` runs (not a zombie its reaper has not waited for yet).
#[expect(clippy::disallowed_methods, reason = "fixture: the process table")]
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .is_ok_and(|status| status.lines().any(|line| line.starts_with("State:") && !line.contains("zombie")))
}

#[test]
fn the_processes_a_killed_vfss_sandbox_left_are_ended_by_the_next_sandbox() {
    if !can_run() {
        return;
    }
    // What a vfs killed during bubblewrap's set-up leaves: a process of its commands' own
    // user, adopted by init, and its sandbox's directory, which is that user's. Its process
    // id (99999999) is never a live one. Beside it, another killed vfs's, whose user a vfs
    // still running (this test's process) drew too: that user's processes are left alone.
    let test = fixture();
    let home = test.path().join("tmp/vfs-sandboxes-0");
    let (killed, shared) = (0x5eed_1234u32, 0x5eed_4321u32);
    let live = format!("{}-0", std::process::id());
    for (name, user) in [("99999999-0", killed), ("99999998-0", shared), (live.as_str(), shared)] {
        test.dir(&format!("tmp/vfs-sandboxes-0/{name}/view"));
        std::os::unix::fs::chown(home.join(name), Some(user), Some(user)).unwrap();
    }
    let (orphan, spared) = (orphan_of(killed), orphan_of(shared));
    assert!(running(orphan) && running(spared));
    let mut command = test.command(&["run", "--mount", "./w:/w:rw", "--", "true"]);
    let run = command.env("TMPDIR", test.path().join("tmp")).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let started = std::time::Instant::now();
    while running(orphan) && started.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let spared_ran = running(spared);
    let _ = Command::new("kill").args(["-KILL", &spared.to_string()]).status();
    assert!(!running(orphan), "the left process {orphan} still runs");
    assert!(spared_ran, "the process {spared} of a user a live sandbox has was ended");
    assert_eq!(names_in(&home), vec![live], "the killed vfss' directories are gone, the live one's stays");
}

#[test]
fn a_commands_host_user_says_nothing_of_vfss_process_id() {
    if !can_run() {
        return;
    }
    // As root, the commands run as a host user drawn at random, once derived from vfs's
    // process id. Inside, `/proc/self/mountinfo` shows it: bubblewrap's root tmpfs is mounted
    // with that user's `uid=`. (A draw equal to the old derivation, 1 in 65,536, fails this
    // test.)
    let test = fixture();
    let child = test
        .command(&["run", "--mount", "./w:/w:rw", "--", "cat", "/proc/self/mountinfo"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mountinfo = String::from_utf8_lossy(&output.stdout).into_owned();
    let users: std::collections::BTreeSet<u32> = mountinfo
        .split([' ', ','])
        .filter_map(|option| option.strip_prefix("uid="))
        .map(|user| user.parse().unwrap())
        .collect();
    let [host] = users.iter().copied().collect::<Vec<u32>>()[..] else { panic!("one host user: {mountinfo}") };
    assert!((0x5eed_0000..0x5eed_0000 + 65_536).contains(&host), "{host:#x}");
    assert_ne!(host, 0x5eed_0000 + pid % 65_536, "the host user is derived from vfs's process id {pid}");
}
