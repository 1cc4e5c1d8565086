//! `vfs fuse`: the start-up line, the end on SIGTERM, and the refusals before anything is
//! mounted (exact text). What the view answers is proved in `crates/fuse/tests/view.rs`.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};

use crate::util::{TestDir, signal};

/// True where the view can be mounted (root and `/dev/fuse`); elsewhere the test says why it
/// did not run, and fails if `VFS_REQUIRE_FUSE` asks for it.
fn can_mount() -> bool {
    let root = Command::new("id").arg("-u").output().is_ok_and(|output| output.stdout == b"0\n");
    let possible = root && std::path::Path::new("/dev/fuse").exists();
    if !possible {
        assert!(
            std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
            "VFS_REQUIRE_FUSE is set, but this is not root with /dev/fuse"
        );
        #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
        {
            eprintln!("SKIPPED: mounting the FUSE view needs root and /dev/fuse here");
        }
    }
    possible
}

/// A directory with `src/a.txt` and an empty `mnt`.
fn fixture() -> TestDir {
    let test = TestDir::new();
    test.file("src/a.txt", "hello\n");
    test.dir("mnt");
    test
}

/// Starts `vfs fuse mnt --mount ./src:/src:ro` and returns it with its first stderr line.
fn start(test: &TestDir) -> (Child, String) {
    let mut child = test
        .command(&["fuse", "mnt", "--mount", "./src:/src:ro"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vfs");
    let mut line = String::new();
    BufReader::new(child.stderr.take().expect("stderr")).read_line(&mut line).expect("the start-up line");
    (child, line)
}

fn mounted(test: &TestDir) -> bool {
    let mountpoint = test.path().join("mnt").display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("the mount table")
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(mountpoint.as_str()))
}

#[test]
fn the_view_serves_until_sigterm_and_unmounts() {
    if !can_mount() {
        return;
    }
    let test = fixture();
    let (mut child, line) = start(&test);
    assert_eq!(
        line,
        format!(
            "vfs {}: serving /src (ro) through FUSE at mnt; stop with SIGTERM, Ctrl-C or `fusermount3 -u mnt`\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert_eq!(std::fs::read_to_string(test.path().join("mnt/src/a.txt")).expect("read through the view"), "hello\n");
    assert!(mounted(&test));
    signal(&child, "TERM");
    assert_eq!(child.wait().expect("the view ends").code(), Some(0));
    assert!(!mounted(&test));
}

#[test]
fn a_sigterm_right_after_the_start_up_line_unmounts_the_view() {
    if !can_mount() {
        return;
    }
    // The line says "stop with SIGTERM": from the moment it is out, SIGTERM unmounts (vfs
    // listened for it only after the line once, and a SIGTERM in between left a stale mount).
    for round in 0..20 {
        let test = fixture();
        let (mut child, _) = start(&test);
        signal(&child, "TERM");
        let code = child.wait().expect("the view ends").code();
        if mounted(&test) {
            let _ = Command::new("umount").arg("-l").arg(test.path().join("mnt")).status();
            panic!("round {round}: the view was left mounted (exit {code:?})");
        }
        assert_eq!(code, Some(0), "round {round}");
    }
}

#[test]
fn a_view_busy_at_sigterm_is_detached_and_vfs_exits_cleanly() {
    if !can_mount() {
        return;
    }
    let test = fixture();
    let (mut child, _) = start(&test);
    // A process whose working directory is in the view keeps it busy: a plain unmount fails.
    let mut shell =
        Command::new("sleep").arg("60").current_dir(test.path().join("mnt/src")).spawn().expect("spawn sleep");
    signal(&child, "TERM");
    let code = child.wait().expect("the view ends").code();
    let still_mounted = mounted(&test);
    shell.kill().expect("kill sleep");
    shell.wait().expect("sleep ends");
    assert_eq!(code, Some(0));
    assert!(!still_mounted, "the busy view was detached");
}

#[test]
fn a_stale_mount_is_named_at_the_next_start() {
    if !can_mount() {
        return;
    }
    let test = fixture();
    let (mut child, _) = start(&test);
    signal(&child, "KILL");
    child.wait().expect("killed");
    let run = test.run(&["fuse", "mnt", "--mount", "./src:/src:ro"]);
    // The mount the killed view left is removed before the assertions can fail.
    let unmounted = Command::new("umount").arg("-l").arg(test.path().join("mnt")).status().expect("umount");
    assert!(unmounted.success());
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        "error: `mnt` holds a stale FUSE mount (its server ended without unmounting): unmount it with `fusermount3 -u mnt` (as root: `umount mnt`), then start again\n"
    );
}

#[test]
fn a_mountpoint_that_cannot_take_the_view_is_refused_in_one_line() {
    let test = TestDir::new();
    test.file("src/a.txt", "hello\n");
    test.dir("src/inner");
    let run = test.run(&["fuse", "src/inner", "--mount", "./src:/src:ro"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: the mountpoint `src/inner` lies inside the directory of the mount `/src`: the view would serve its own files; choose a mountpoint outside every mount\n"
    );
    let run = test.run(&["fuse", "missing", "--mount", "./src:/src:ro"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: the mountpoint `missing` is not a directory: create it first (`mkdir -p missing`)\n"
    );
    test.file("file.txt", "x");
    let run = test.run(&["fuse", "file.txt", "--mount", "./src:/src:ro"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "error: the mountpoint `file.txt` is not a directory (a file or another kind is there): give an empty directory\n"
    );
}

#[test]
fn a_mountpoint_in_use_is_refused_and_what_is_mounted_there_stays() {
    if !can_mount() {
        return;
    }
    let test = fixture();
    test.dir("busy");
    let busy = test.path().join("busy");
    let mounted = Command::new("mount").args(["-t", "tmpfs", "vfs-test-busy"]).arg(&busy).status().unwrap();
    assert!(mounted.success());
    // Bounded: a view mounted over the tmpfs would serve until stopped (`timeout` ends it).
    let run = test.command(&["fuse", "busy", "--mount", "./src:/src:ro"]);
    let run = Command::new("timeout")
        .arg("20")
        .arg(run.get_program())
        .args(run.get_args())
        .current_dir(test.path())
        .env_remove("VFS_LOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let unmounted = Command::new("umount").arg(&busy).status().unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&run.stderr),
        "error: `busy` is in use: a file system is mounted there already (`findmnt busy` names it); unmount it, or give another directory\n"
    );
    assert!(unmounted.success(), "the tmpfs was still mounted, alone");
}
