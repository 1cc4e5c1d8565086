//! The sandbox run for real: commands under bubblewrap whose only data is the FUSE view.
//!
//! On a machine that cannot run it (no `bwrap`, no `/dev/fuse`, no user namespaces) every
//! test prints why it did not run and returns; with `VFS_REQUIRE_SANDBOX=1` (what
//! `scripts/test` sets where it can) it fails instead, so a skip cannot pass for a success.

#![expect(
    clippy::disallowed_methods,
    clippy::print_stderr,
    reason = "fixture: tests build fixtures on disk, look at the process table, and say when they cannot run"
)]

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use vfs::{MountRegistry, MountSpec, NameRule, Precondition, ReadWindow};
use vfs_fuse::{Ending, RunError, RunOutcome, RunRequest, Sandbox, SandboxOptions};

struct Fixture {
    dir: tempfile::TempDir,
    registry: MountRegistry,
}

impl Fixture {
    /// `/src` read-only with a hidden `.env`, `/w` read-write with a read-only `docs`, and
    /// the internal `/llm-logs`.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = |relative: &str, content: &[u8]| {
            let path = dir.path().join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        };
        file("src/a.txt", b"hello\n");
        file("src/.env", b"SECRET=1\n");
        file("w/docs/guide.md", b"# guide\n");
        file("logs/old.jsonl", b"{}\n");
        let spec = |relative: &str, rest: &str| -> MountSpec {
            format!("{}:{rest}", dir.path().join(relative).display()).parse().unwrap()
        };
        let registry = MountRegistry::builder()
            .mount(spec("src", "/src:ro"))
            .mount(spec("w", "/w:rw;docs:ro"))
            .internal(spec("logs", "/llm-logs:rw"))
            .name_rules(NameRule::defaults())
            .build(vfs::ambient_authority())
            .unwrap();
        Fixture { dir, registry }
    }

    fn physical(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

/// A started sandbox over a fresh fixture, or `None` (with the reason printed).
fn sandbox(options: SandboxOptions) -> Option<(Fixture, Sandbox)> {
    let fixture = Fixture::new();
    match Sandbox::start(&fixture.registry, options) {
        Ok(sandbox) => Some((fixture, sandbox)),
        Err(error) => {
            assert!(
                std::env::var_os("VFS_REQUIRE_SANDBOX").is_none(),
                "VFS_REQUIRE_SANDBOX is set, but the sandbox cannot start: {error}"
            );
            eprintln!("SKIPPED: this machine cannot run the sandbox: {error}");
            None
        }
    }
}

fn shell(sandbox: &Sandbox, script: &str, cwd: &str) -> RunOutcome {
    run(sandbox, script, cwd, Duration::from_secs(30), &|| false).unwrap()
}

fn run(
    sandbox: &Sandbox,
    script: &str,
    cwd: &str,
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
) -> Result<RunOutcome, RunError> {
    let request = RunRequest {
        argv: vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned()],
        cwd: cwd.to_owned(),
        timeout,
        keep: 1 << 20,
        call: None,
    };
    sandbox.run(&request, cancelled, &mut |_, _| {})
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The processes on the machine whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        if let Ok(cmdline) = fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) && !cmdline.contains("sandbox-") {
                found.push(cmdline);
            }
        }
    }
    found
}

#[test]
fn the_roots_are_at_their_virtual_paths_and_nothing_physical_is_there() {
    let Some((fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let outcome = shell(&sandbox, "cat /src/a.txt; pwd; ls -a /src; ls /; cat /proc/self/mountinfo; df; env", "/w");
    assert_eq!(outcome.ending, Ending::Exited(0), "{}", text(&outcome.stderr.tail));
    let stdout = text(&outcome.stdout.tail);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..5], ["hello", "/w", ".", "..", "a.txt"], "{stdout}");
    assert!(stdout.contains(" /src rw,") || stdout.contains(" /src ro,"), "{stdout}");
    assert!(stdout.lines().any(|line| line.contains(" /w ") && line.contains(" - fuse vfs ")), "{stdout}");
    let physical = fixture.physical().display().to_string();
    assert!(!stdout.contains(&physical), "a physical path leaked: {stdout}");
    assert!(!stdout.contains("vfs-sandbox"), "the sandbox's directory leaked: {stdout}");
    assert!(!stdout.contains("llm-logs"), "{stdout}");
    assert_eq!(outcome.stderr.tail, b"");
    // The sandbox's own names, not the host's file (which names the host's machines).
    let hosts = shell(&sandbox, "cat /etc/hosts", "/");
    assert_eq!(
        text(&hosts.stdout.tail),
        "127.0.0.1\tlocalhost\n127.0.1.1\tvfs\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    );
}

#[test]
fn no_descriptor_of_vfss_and_no_directory_of_the_sandboxs_reaches_the_command() {
    let Some((fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    // A descriptor vfs inherited (its parent's, not closed at exec) on a host directory.
    let outside = fixture.physical().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    let inherited = rustix::fs::open(
        &outside,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    rustix::io::fcntl_setfd(&inherited, rustix::io::FdFlags::empty()).unwrap();
    let number = std::os::fd::AsRawFd::as_raw_fd(&inherited);
    let script = format!("ls /proc/$$/fd; cat /proc/self/fd/{number}/secret.txt; tr '\\0' ' ' < /proc/1/cmdline");
    let outcome = shell(&sandbox, &script, "/w");
    drop(inherited);
    let stdout = text(&outcome.stdout.tail);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[..3], ["0", "1", "2"], "only the standard three: {stdout}");
    assert_eq!(
        text(&outcome.stderr.tail),
        format!("cat: /proc/self/fd/{number}/secret.txt: No such file or directory\n")
    );
    // The first process inside (bubblewrap) has its binds' sources out of its command line.
    let [_, _, _, first] = lines[..] else { panic!("{stdout}") };
    assert!(first.contains(" --args ") && first.ends_with(&format!(" -- /bin/sh -c {script} ")), "{first}");
    assert!(!first.contains(&fixture.physical().display().to_string()), "{first}");
    assert!(!first.contains("vfs-sandbox"), "{first}");
    assert!(!first.contains(&std::env::temp_dir().display().to_string()), "{first}");
}

#[test]
fn the_rules_hold_in_the_shell_and_its_changes_reach_the_tools() {
    let Some((fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let outcome = shell(
        &sandbox,
        "echo x > /src/a.txt; echo docs > /w/docs/new.md; cat /src/.env; ls /llm-logs; printf 'made\\0by shell' > /w/out.bin; echo done",
        "/w",
    );
    assert_eq!(outcome.ending, Ending::Exited(0));
    assert_eq!(text(&outcome.stdout.tail), "done\n");
    assert_eq!(
        text(&outcome.stderr.tail),
        "/bin/sh: 1: cannot create /src/a.txt: Read-only file system\n\
         /bin/sh: 1: cannot create /w/docs/new.md: Read-only file system\n\
         cat: /src/.env: No such file or directory\n\
         ls: cannot access '/llm-logs': No such file or directory\n"
    );
    assert_eq!(fs::read(fixture.physical().join("w/out.bin")).unwrap(), b"made\0by shell");
    let agent = fixture.registry.agent();
    agent.write("/w/from-tool.txt", "tool wrote\n", &Precondition::Absent).unwrap();
    assert_eq!(agent.read_text("/src/a.txt", &ReadWindow::default()).unwrap().content, "hello\n");
    let outcome = shell(&sandbox, "cat /w/from-tool.txt", "/");
    assert_eq!(text(&outcome.stdout.tail), "tool wrote\n");
}

/// `/src` takes no write (`ro`, no override): the sandbox binds a read-only view of it alone,
/// which answers no `OPEN`, so the kernel keeps a file's pages from one open to the next. A
/// change made on the disk still shows within the attribute time-out (a second), also one
/// that keeps the size (the kernel drops the pages when the modification time changes).
#[test]
fn a_mount_no_write_reaches_has_a_read_only_view_that_still_sees_changes() {
    let Some((fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let outcome = shell(&sandbox, "grep -E ' /(src|w) ' /proc/self/mountinfo; cat /src/a.txt; cat /src/a.txt", "/");
    assert_eq!(outcome.ending, Ending::Exited(0), "{}", text(&outcome.stderr.tail));
    let stdout = text(&outcome.stdout.tail);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    let (src, w) = if lines[0].contains(" /src ") { (lines[0], lines[1]) } else { (lines[1], lines[0]) };
    assert!(src.contains(" /src ro,") && src.contains(" - fuse vfs ro,"), "{src}");
    assert!(w.contains(" /w rw,") && w.contains(" - fuse vfs rw,"), "{w}");
    // Two views: the device numbers differ.
    assert_ne!(src.split(' ').nth(2), w.split(' ').nth(2), "{stdout}");
    assert_eq!(lines[2..], ["hello", "hello"]);
    for content in ["HELLO\n", "changed, and longer\n"] {
        fs::write(fixture.physical().join("src/a.txt"), content).unwrap();
        std::thread::sleep(Duration::from_millis(1_200));
        let outcome = shell(&sandbox, "cat /src/a.txt", "/");
        assert_eq!(text(&outcome.stdout.tail), content);
    }
}

/// A `ro` mount whose directory holds a writable mount's directory gets no read-only view: a
/// tool's write through the writable mount changes a file the `ro` mount shows under another
/// name, which the change feed does not name, and a view that kept the file's pages would go
/// on showing the old content. Through the whole view the next `cat` sees the change at once.
/// A write through the `ro` mount itself is refused in the shell as by the tools (`EROFS`).
#[test]
fn a_read_only_mount_that_holds_a_writable_one_sees_its_changes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("outer/p/w")).unwrap();
    fs::write(dir.path().join("outer/p/w/f.txt"), "before\n").unwrap();
    let spec = |relative: &str, rest: &str| -> MountSpec {
        format!("{}:{rest}", dir.path().join(relative).display()).parse().unwrap()
    };
    let registry = MountRegistry::builder()
        .mount(spec("outer", "/r:ro"))
        .mount(spec("outer/p/w", "/w:rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    assert!(registry.roots_without_writes().is_empty());
    let sandbox = match Sandbox::start(&registry, SandboxOptions::default()) {
        Ok(sandbox) => sandbox,
        Err(error) => {
            assert!(std::env::var_os("VFS_REQUIRE_SANDBOX").is_none(), "the sandbox cannot start: {error}");
            eprintln!("SKIPPED: this machine cannot run the sandbox: {error}");
            return;
        }
    };
    assert_eq!(text(&shell(&sandbox, "cat /r/p/w/f.txt /r/p/w/f.txt", "/").stdout.tail), "before\nbefore\n");
    // The same size, well within the kernel's one-second attribute time-out.
    registry.agent().write("/w/f.txt", "after!\n", &Precondition::Any).unwrap();
    let outcome = shell(&sandbox, "cat /r/p/w/f.txt; echo x > /r/p/w/g.txt", "/");
    assert_eq!(outcome.ending, Ending::Exited(2));
    assert_eq!(text(&outcome.stdout.tail), "after!\n");
    assert_eq!(text(&outcome.stderr.tail), "/bin/sh: 1: cannot create /r/p/w/g.txt: Read-only file system\n");
    assert_eq!(
        registry.agent().write("/r/p/w/g.txt", "x", &Precondition::Any).unwrap_err().to_string(),
        "cannot write `/r/p/w/g.txt`: `/r` is mounted ro; mounts that grant write: `/w` (rw)"
    );
}

#[test]
fn the_working_directory_is_judged_by_the_gate() {
    let Some((_fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let error = run(&sandbox, "true", "/llm-logs", Duration::from_secs(5), &|| false).unwrap_err();
    let missing = run(&sandbox, "true", "/nowhere", Duration::from_secs(5), &|| false).unwrap_err();
    assert_eq!(error.agent_text(), missing.agent_text());
    assert_eq!(
        run(&sandbox, "true", "/src/a.txt", Duration::from_secs(5), &|| false).unwrap_err().agent_text(),
        "the working directory `/src/a.txt` is not a directory"
    );
}

#[test]
fn statuses_and_signals_pass_through() {
    let Some((_fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    assert_eq!(shell(&sandbox, "exit 3", "/").ending, Ending::Exited(3));
    assert_eq!(shell(&sandbox, "kill -9 $$", "/").ending, Ending::Signalled(9));
}

#[test]
fn the_time_limit_and_a_cancellation_end_every_process() {
    let Some((_fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let started = Instant::now();
    let outcome = run(
        &sandbox,
        "setsid sleep 311 & (sleep 312 &) ; echo started; sleep 313",
        "/",
        Duration::from_millis(800),
        &|| false,
    )
    .unwrap();
    assert_eq!(outcome.ending, Ending::TimedOut);
    assert_eq!(text(&outcome.stdout.tail), "started\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    for marker in ["sleep 311", "sleep 312", "sleep 313"] {
        assert_eq!(processes_with(marker), Vec::<String>::new());
    }
    let cancel = AtomicBool::new(false);
    let canceller = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            cancel.store(true, Ordering::SeqCst);
        });
        run(&sandbox, "sleep 314 & sleep 315", "/", Duration::from_mins(1), &|| cancel.load(Ordering::SeqCst))
    });
    assert_eq!(canceller.unwrap().ending, Ending::Cancelled);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(processes_with("sleep 314"), Vec::<String>::new());
    assert_eq!(processes_with("sleep 315"), Vec::<String>::new());
    // The command after a killed one runs as usual.
    assert_eq!(shell(&sandbox, "echo again", "/").stdout.tail, b"again\n");
}

#[test]
fn a_fork_bomb_is_held_and_the_environment_is_exactly_the_sandboxs() {
    let options = SandboxOptions {
        max_processes: 30,
        env: vec![("CI_TOKEN".to_owned(), "given".to_owned())],
        ..SandboxOptions::default()
    };
    let Some((_fixture, sandbox)) = sandbox(options) else { return };
    let outcome = shell(&sandbox, "for i in $(seq 100); do sleep 316 & done; echo after", "/");
    // The shell cannot start the 31st process and gives up; its sleeps end with it.
    assert_eq!(outcome.ending, Ending::Exited(2), "{}", text(&outcome.stderr.tail));
    assert_eq!(text(&outcome.stdout.tail), "");
    assert_eq!(text(&outcome.stderr.tail), "/bin/sh: 0: Cannot fork\n");
    assert_eq!(processes_with("sleep 316"), Vec::<String>::new());
    assert_eq!(shell(&sandbox, "echo fine", "/").stdout.tail, b"fine\n");
    let request = RunRequest {
        argv: vec!["env".to_owned()],
        cwd: "/w".to_owned(),
        timeout: Duration::from_secs(10),
        keep: 4096,
        call: None,
    };
    let outcome = sandbox.run(&request, &|| false, &mut |_, _| {}).unwrap();
    let mut lines: Vec<String> = text(&outcome.stdout.tail).lines().map(str::to_owned).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "CI_TOKEN=given",
            "HOME=/home/agent",
            "LANG=C.UTF-8",
            "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
            "PWD=/w",
            "TERM=dumb"
        ]
    );
}

/// Outside the tree a command writes only memory that is bounded: `/tmp`, `HOME` and
/// `/dev/shm` hold `max_scratch` each, and `/`, `/home` and `/dev` are read-only (each was a
/// tmpfs of half the machine's memory, which no address-space limit counts). No user
/// namespace can be made inside (a root of its own to mount with).
#[test]
fn a_command_writes_only_the_tree_and_bounded_scratch_places() {
    let options = SandboxOptions { max_scratch: 1 << 20, ..SandboxOptions::default() };
    let Some((_fixture, sandbox)) = sandbox(options) else { return };
    let script = "for place in /tmp /home/agent /dev/shm; do \
            head -c 2000000 /dev/zero > $place/big 2>/dev/null; echo \"$place $(wc -c < $place/big)\"; \
        done; \
        for place in / /home /dev /etc; do touch $place/x 2>/dev/null && echo \"$place written\"; done; \
        unshare -U true 2>/dev/null || echo no-userns; \
        echo kept > /w/kept.txt && cat /w/kept.txt; echo null > /dev/null && echo null";
    let outcome = shell(&sandbox, script, "/");
    assert_eq!(
        text(&outcome.stdout.tail),
        "/tmp 1048576\n/home/agent 1048576\n/dev/shm 1048576\nno-userns\nkept\nnull\n",
        "{}",
        text(&outcome.stderr.tail)
    );
}

/// A command that writes without end to a reader that takes its time (a slow reader of `vfs
/// run`'s stdout): it waits for the reader, so vfs holds a bounded queue of its output
/// (before 2026-12-07 all of it: 7.5 GB in 20 s), and its time limit ends it on time, though
/// the loop that hands its output on waits (before, its background process wrote 7 s past a
/// limit of 3 s).
#[test]
fn a_flood_of_output_to_a_slow_reader_waits_for_it_and_the_time_limit_still_ends_it() {
    const BOUND: u64 = 48 * 64 * 1024;
    let Some((fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let request = RunRequest {
        argv: vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "(sleep 3; echo alive > /w/marker) & head -c 500000000 /dev/zero".to_owned(),
        ],
        cwd: "/w".to_owned(),
        timeout: Duration::from_secs(1),
        keep: 1 << 20,
        call: None,
    };
    let mut handed = 0u64;
    let outcome = sandbox
        .run(&request, &|| false, &mut |_, bytes| {
            // A reader that stalls 5 s at first, then takes 64 KiB every 100 ms (once past
            // the bound, at once: a test that fails ends).
            let first = handed == 0;
            handed += bytes.len() as u64;
            if first {
                std::thread::sleep(Duration::from_secs(5));
            } else if handed <= BOUND {
                std::thread::sleep(Duration::from_millis(100));
            }
        })
        .unwrap();
    assert_eq!(outcome.ending, Ending::TimedOut);
    assert_eq!(outcome.stdout.total, handed);
    // What the command could write before its limit: the queue's sixteen pieces of at most
    // 64 KiB, the two its readers hold, and the pipe's, with room to spare.
    assert!(handed <= BOUND, "{handed} bytes of output held or handed on");
    // The background process would have written at 3 s, while the reader stalled.
    assert!(!fixture.physical().join("w/marker").exists(), "the command's process wrote after its time limit");
}

#[test]
fn output_is_streamed_and_capped_to_its_tail() {
    let Some((_fixture, sandbox)) = sandbox(SandboxOptions::default()) else { return };
    let request = RunRequest {
        argv: vec!["/bin/sh".to_owned(), "-c".to_owned(), "seq 1 20000; echo end >&2".to_owned()],
        cwd: "/".to_owned(),
        timeout: Duration::from_secs(10),
        keep: 10,
        call: None,
    };
    let mut streamed = Vec::new();
    let outcome = sandbox
        .run(&request, &|| false, &mut |stream, bytes| {
            if stream == vfs_fuse::Stream::Stdout {
                streamed.extend_from_slice(bytes);
            }
        })
        .unwrap();
    let all: String = (1..=20_000).map(|number: u32| number.to_string() + "\n").collect();
    assert_eq!(text(&streamed), all);
    assert_eq!(outcome.stdout.total, all.len() as u64);
    assert_eq!(text(&outcome.stdout.tail), "999\n20000\n");
    assert!(outcome.stdout.truncated());
    assert_eq!(outcome.stderr.tail, b"end\n");
    assert!(!outcome.stderr.truncated());
}
