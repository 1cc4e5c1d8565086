//! The battery: table-driven hostile cases against the agent accessor. Every case asserts that
//! nothing outside a mount changed, that no outside content, physical path or internal root
//! reached the agent, and that the call returned promptly.
//!
//! A *case* is one hostile input (a path, a link, a special file) driven through one operation;
//! [`TOTAL_CASES`] counts them and `the_battery_has_at_least_150_cases` keeps the count honest.
#![expect(clippy::disallowed_methods, reason = "fixture: the battery builds hostile layouts on disk")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vfs::{AgentAccessor, Edit, EditOptions, ErrorKind, GrepRequest, Precondition, ReadWindow};
use vfs_compliance::fixture::Layout;
use vfs_compliance::kit::{AgentView, LocalFactory, Plan, PlannedMount, SECRET, World, standard};

/// Operations every hostile path goes through.
const OPERATIONS: &[&str] = &[
    "read_text_file",
    "read_media_file",
    "get_file_info",
    "list_directory",
    "directory_tree",
    "search_files",
    "grep",
    "write_file",
    "edit_file",
    "create_directory",
    "delete_file",
    "move_file (source)",
    "move_file (destination)",
];

fn overwrite() -> Precondition {
    Precondition::Any
}

/// Runs `operation` on `path` and returns what the agent would read.
fn run(agent: &AgentAccessor, operation: &str, path: &str) -> String {
    let edit = [Edit { old_text: "alpha".into(), new_text: "omega".into() }];
    match operation {
        "read_text_file" => agent.read_text(path, &ReadWindow::default()).agent_view(),
        "read_media_file" => agent.read_media(path).agent_view(),
        "get_file_info" => agent.info(path).agent_view(),
        "list_directory" => agent.list(path).agent_view(),
        "directory_tree" => agent.tree(path, Some(4), &[]).agent_view(),
        "search_files" => agent.search_files(path, "*", &[]).agent_view(),
        "grep" => agent
            .grep(&GrepRequest {
                pattern: "SECRET|alpha".into(),
                path: Some(path.to_owned()),
                ..GrepRequest::default()
            })
            .agent_view(),
        "write_file" => agent.write(path, "pwned\n", &overwrite()).agent_view(),
        "edit_file" => agent.edit(path, &edit, &EditOptions::default()).agent_view(),
        "create_directory" => agent.create_directory(path).agent_view(),
        "delete_file" => agent.delete(path, true, &Precondition::Any).agent_view(),
        "move_file (source)" => {
            agent.move_path(path, "/output/moved", &Precondition::Any, &Precondition::Any).agent_view()
        }
        "move_file (destination)" => {
            agent.move_path("/output/victim", path, &Precondition::Any, &Precondition::Any).agent_view()
        }
        other => panic!("unknown operation {other}"),
    }
}

/// Runs `body` on another thread and fails if it does not finish in time (a FIFO that blocks).
fn promptly<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(body());
    });
    receiver.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("{what}: did not return in time"))
}

/// Asserts the invariants after one case.
fn check(world: &World, outside_before: &vfs_compliance::fixture::Snapshot, case: &str, text: &str) {
    if let Err(why) = world.check_text(text) {
        panic!("{case}: {why}");
    }
    assert!(!text.contains("hardlinked-outside"), "{case}: outside content reached the agent: {text:?}");
    assert_eq!(&world.layout.snapshot("outside"), outside_before, "{case}: something outside the mounts changed");
}

/// The standard world plus hostile furniture.
fn hostile_world() -> World {
    let world = standard(&LocalFactory(vfs::ambient_authority())).expect("the standard world builds");
    let layout = &world.layout;
    layout
        .file("outside/sub/deeper.txt", format!("{SECRET} deeper\n"))
        .file("data2/secret.txt", format!("{SECRET} sibling\n"))
        .file("data-old/secret.txt", format!("{SECRET} sibling\n"))
        .file("out/victim", "victim\n");
    world
}

/// Hostile virtual paths: traversal, encodings, control characters, drive and home paths,
/// look-alikes, and lengths.
fn traversal_inputs() -> Vec<String> {
    let mut inputs: Vec<String> = [
        "/src/../outside/secret.txt",
        "/src/../../outside/secret.txt",
        "/../outside/secret.txt",
        "/src/../../../../../../../../etc/passwd",
        "/src/sub/../../outside/secret.txt",
        "/src/./../outside",
        "/output/../../outside/secret.txt",
        "/output/../outside",
        "/src/..",
        "/..",
        "/../..",
        "/",
        "/src/%2e%2e/%2e%2e/outside/secret.txt",
        "/src/%2e%2e%2foutside%2fsecret.txt",
        "/src/..%2f..%2foutside",
        "/src/%252e%252e/outside",
        "/src/..%5c..%5coutside",
        "/src/..\\..\\outside\\secret.txt",
        "\\src\\..\\outside",
        "/src\\..\\..\\outside\\secret.txt",
        "/src/....//....//outside",
        "/src/.../outside",
        "/src/..;/outside",
        "/src/%c0%ae%c0%ae/outside",
        "/src/\u{2025}/outside",
        "/src/\u{ff0e}\u{ff0e}/outside",
        "/src/\u{ff0f}..\u{ff0f}outside",
        "/src/\u{2215}..\u{2215}outside",
        "/src/\u{2044}..\u{2044}outside",
        "/src/.\u{200b}./outside",
        "/src/..\u{338}/outside",
        "/src/a\0",
        "/src/\0../outside",
        "\0/src",
        "/src/a\n",
        "/src/a\r/x",
        "/src/\t",
        "/src/\u{1b}[2J",
        "/src/\u{7f}",
        "/src/\u{85}",
        "/src/\u{9b}",
        "~",
        "~/",
        "~root/.ssh/id_rsa",
        "src/a.txt",
        "./src/a.txt",
        "../outside",
        "",
        " ",
        "C:\\Windows\\win.ini",
        "c:/",
        "C:",
        "\\\\server\\share\\x",
        "//server/share/x",
        "file:///etc/passwd",
        "/src/C:\\x",
        "/proc/self/root/etc/passwd",
        "/dev/zero",
        "/llm-logs/secret.jsonl",
        "/llm-logs/../llm-logs/secret.jsonl",
        "/src/../llm-logs/secret.jsonl",
        "/LLM-LOGS/secret.jsonl",
    ]
    .iter()
    .map(|input| (*input).to_owned())
    .collect();
    inputs.push(format!("/src/{}", "a/".repeat(2100)));
    inputs.push(format!("/src/{}", "a".repeat(256)));
    inputs.push(format!("/src/{}outside", "../".repeat(1300)));
    inputs.push(format!("/src/{}", "x".repeat(255)));
    inputs.push(format!("/output/{}", "d/".repeat(1000)));
    inputs
}

#[test]
fn traversal_and_encodings() {
    let world = hostile_world();
    let outside = world.layout.snapshot("outside");
    let agent = world.agent();
    for input in traversal_inputs() {
        for operation in OPERATIONS {
            world.layout.file("out/victim", "victim\n");
            let case = format!("{operation} {input:?}");
            let text = run(&agent, operation, &input);
            check(&world, &outside, &case, &text);
        }
        // Control characters, drive and home paths are refused before anything else.
        if input.is_empty() || input.chars().any(char::is_control) || input.starts_with('~') || !input.starts_with('/')
        {
            let error = agent.read_text(&input, &ReadWindow::default()).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::InvalidPath, "{input:?}");
            assert!(!error.to_string().contains(&input) || input.len() < 2, "the refusal echoes the input");
        }
    }
    assert_eq!(world.layout.read("logs/secret.jsonl").as_deref(), Some("{\"secret\":true}\n"));
}

/// Roots and physical siblings that share a prefix with a mount.
const PREFIX_INPUTS: &[&str] = &[
    "/src2/secret.txt",
    "/srcx",
    "/sr/a.txt",
    "/src.bak/a.txt",
    "/SRC/a.txt",
    "/Src/a.txt",
    "/src /a.txt",
    "/src%2fa.txt",
    "/output2/x",
    "/outputs/x",
    "/llm-logs2/x",
    "/llm-log/secret.jsonl",
    "/src/sibling-relative",
    "/src/sibling-absolute",
    "/src/sibling-dotted",
    "/src/old-absolute",
];

#[test]
fn prefix_siblings() {
    let world = hostile_world();
    let layout = &world.layout;
    layout
        .symlink("../data2/secret.txt", "data/sibling-relative")
        .symlink(layout.path("data2/secret.txt"), "data/sibling-absolute")
        .symlink(format!("{}/../data2/secret.txt", layout.path("data").display()), "data/sibling-dotted")
        .symlink(layout.path("data-old/secret.txt"), "data/old-absolute");
    let outside = layout.snapshot("outside");
    let agent = world.agent();
    for input in PREFIX_INPUTS {
        for operation in OPERATIONS {
            layout.file("out/victim", "victim\n");
            let text = run(&agent, operation, input);
            check(&world, &outside, &format!("{operation} {input}"), &text);
        }
        if input.starts_with("/src/") {
            let error = agent.read_text(input, &ReadWindow::default()).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Escape, "{input}");
        } else {
            let error = agent.read_text(input, &ReadWindow::default()).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::UnknownRoot, "{input}");
        }
    }
    assert_eq!(layout.read("data2/secret.txt"), Some(format!("{SECRET} sibling\n")));
}

/// Link name → target; `{base}` is the layout's base, `{outside}` the outside directory.
const LINKS: &[(&str, &str)] = &[
    ("abs-file", "{outside}/secret.txt"),
    ("rel-file", "../outside/secret.txt"),
    ("abs-dir", "{outside}"),
    ("rel-dir", "../outside"),
    ("rel-dir-slash", "../outside/"),
    ("dangling", "missing"),
    ("dangling-out", "{outside}/missing"),
    ("loop-a", "loop-b"),
    ("self", "self"),
    ("chain-1", "chain-2"),
    ("chain-out", "chain-out-2"),
    ("internal", "../logs"),
    ("internal-abs", "{base}/logs/secret.jsonl"),
    ("dev-zero", "/dev/zero"),
    ("dev-null", "/dev/null"),
    ("proc-root", "/proc/self/root/etc/passwd"),
    ("root", "/"),
    ("dot-dot", ".."),
    ("dot-dot-2", "../.."),
    ("via-other-mount", "../out/../outside/secret.txt"),
    ("dotted-abs", "{base}/data/../outside/secret.txt"),
    ("fifo-link", "fifo"),
];

/// What follows each link name in a path: the link itself, and a child through it.
const LINK_PATHS: &[&str] = &["", "/secret.txt"];

#[test]
fn symlinks_of_every_kind() {
    for (mount, directory) in [("/src", "data"), ("/output", "out")] {
        let world = hostile_world();
        let layout = &world.layout;
        let base = layout.base().display().to_string();
        let outside_path = layout.path("outside").display().to_string();
        for (name, target) in LINKS {
            let target = target.replace("{base}", &base).replace("{outside}", &outside_path);
            layout.symlink(target, &format!("{directory}/{name}"));
        }
        layout
            .symlink("loop-a", &format!("{directory}/loop-b"))
            .symlink("../a.txt", &format!("{directory}/chain-2"))
            .symlink("rel-file", &format!("{directory}/chain-out-2"));
        let made = std::process::Command::new("mkfifo").arg(layout.path(&format!("{directory}/fifo"))).status();
        assert!(made.is_ok_and(|status| status.success()), "mkfifo");
        let outside = layout.snapshot("outside");
        let logs = layout.snapshot("logs");
        let agent = world.agent();
        for (name, _) in LINKS {
            for suffix in LINK_PATHS {
                let path = format!("{mount}/{name}{suffix}");
                for operation in OPERATIONS {
                    if *operation == "delete_file" {
                        continue;
                    }
                    layout.file("out/victim", "victim\n");
                    let agent = agent.clone();
                    let call_path = path.clone();
                    let text = promptly(&path, move || run(&agent, operation, &call_path));
                    check(&world, &outside, &format!("{operation} {path}"), &text);
                }
            }
        }
        // Deleting a link removes the link only.
        for (name, _) in LINKS {
            let text = run(&agent, "delete_file", &format!("{mount}/{name}"));
            check(&world, &outside, &format!("delete {mount}/{name}"), &text);
        }
        assert_eq!(layout.snapshot("logs"), logs, "the internal directory changed");
    }
}

#[test]
fn links_into_a_nested_read_only_mount_stay_read_only() {
    let layout = Layout::new();
    layout
        .file("work/vendor/lib.rs", "lib\n")
        .file("outside/secret.txt", format!("{SECRET}\n"))
        .symlink("vendor", "work/alias")
        .symlink("vendor/lib.rs", "work/lib-alias")
        .symlink("alias", "work/alias-of-alias");
    let plan = Plan {
        mounts: vec![
            PlannedMount { directory: "work", root: "/work", rights: "rw", visibility: vfs::Visibility::AgentFacing },
            PlannedMount {
                directory: "work/vendor",
                root: "/vendor",
                rights: "ro",
                visibility: vfs::Visibility::AgentFacing,
            },
        ],
        limits: vfs::Limits::default(),
    };
    let world = World::build(&LocalFactory(vfs::ambient_authority()), layout, &plan).unwrap();
    let agent = world.agent();
    let outside = world.layout.snapshot("outside");
    let vendor = world.layout.snapshot("work/vendor");
    let edit = [Edit { old_text: "lib".into(), new_text: "pwned".into() }];
    for path in ["/work/alias/lib.rs", "/work/alias-of-alias/lib.rs", "/work/alias/new.rs", "/work/vendor/new.rs"] {
        let read_only =
            format!("cannot write `{path}`: `/vendor` is mounted ro; mounts that grant write: `/work` (rw)");
        // An existing file is no directory to create, whatever the rights.
        let existing = path.ends_with("lib.rs");
        let directory = if existing { format!("`{path}` is not a directory") } else { read_only.clone() };
        world.layout.file("work/victim", "victim\n");
        let answers = [
            ("write_file", agent.write(path, "pwned\n", &overwrite()).agent_view(), &read_only),
            ("edit_file", agent.edit(path, &edit, &EditOptions::default()).agent_view(), &read_only),
            ("create_directory", agent.create_directory(path).agent_view(), &directory),
            // The source is in the writable mount, so only the destination's rights can refuse.
            (
                "move_file (destination)",
                agent.move_path("/work/victim", path, &Precondition::Any, &Precondition::Any).agent_view(),
                &read_only,
            ),
        ];
        for (operation, text, expected) in answers {
            check(&world, &outside, &format!("{operation} {path}"), &text);
            assert_eq!(&text, expected, "{operation} {path}");
        }
        assert_eq!(world.layout.read("work/victim").as_deref(), Some("victim\n"), "the refused move kept its source");
    }
    assert_eq!(world.layout.snapshot("work/vendor"), vendor);
}

#[test]
fn hard_links_are_never_written_through() {
    let world = hostile_world();
    let layout = &world.layout;
    layout.file("outside/hard-target.txt", "hardlinked-outside alpha\n");
    let outside_text = layout.read("outside/hard-target.txt");
    let agent = world.agent();
    // Each operation works on the link itself: the name in the mount gets the new content (or
    // goes), and the outside file it shared an inode with keeps its own.
    let cases: [(&str, &str, Option<&str>, Option<&str>); 5] = [
        ("write_file", "replaced `/output/hard` (6 bytes, version {version})", Some("pwned\n"), None),
        (
            "edit_file",
            "edited `/output/hard` (1 replacement)\n--- /output/hard\n+++ /output/hard\n@@ -1 +1 @@\n\
             -hardlinked-outside alpha\n+hardlinked-outside omega\n",
            Some("hardlinked-outside omega\n"),
            None,
        ),
        ("delete_file", "deleted file `/output/hard`", None, None),
        ("move_file (source)", "moved `/output/hard` to `/output/moved`", None, Some("hardlinked-outside alpha\n")),
        ("move_file (destination)", "moved `/output/victim` to `/output/hard`", Some("victim\n"), None),
    ];
    for (operation, expected, hard_after, moved_after) in cases {
        layout.remove("out/hard");
        layout.remove("out/moved");
        layout.file("out/victim", "victim\n");
        layout.hard_link("outside/hard-target.txt", "out/hard");
        let text = run(&agent, operation, "/output/hard");
        let version = agent.info("/output/hard").ok().and_then(|info| info.version).unwrap_or_default();
        assert_eq!(text, expected.replace("{version}", &version), "{operation}");
        assert_eq!(layout.read("out/hard").as_deref(), hard_after, "{operation}: the name in the mount");
        assert_eq!(layout.read("out/moved").as_deref(), moved_after, "{operation}: the moved name");
        assert_eq!(layout.read("outside/hard-target.txt"), outside_text, "{operation} through a hard link");
    }
}

#[test]
fn fifos_sockets_and_devices_are_refused_at_once() {
    let world = hostile_world();
    let layout = &world.layout;
    let mut listeners = Vec::new();
    for directory in ["data", "out"] {
        let made = std::process::Command::new("mkfifo").arg(layout.path(&format!("{directory}/fifo"))).status();
        assert!(made.is_ok_and(|status| status.success()), "mkfifo");
        listeners.push(std::os::unix::net::UnixListener::bind(layout.path(&format!("{directory}/socket"))).unwrap());
    }
    // A character device needs CAP_MKNOD; where it is missing the device cases are skipped.
    let device = std::process::Command::new("mknod")
        .arg(layout.path("data/null-device"))
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|status| status.success());
    let outside = layout.snapshot("outside");
    let agent = world.agent();
    let mut names = vec!["fifo", "socket"];
    if device {
        names.push("null-device");
    }
    for mount in ["/src", "/output"] {
        for name in &names {
            let path = format!("{mount}/{name}");
            for operation in OPERATIONS {
                layout.file("out/victim", "victim\n");
                let agent = agent.clone();
                let call_path = path.clone();
                let started = Instant::now();
                let text = promptly(&path, move || run(&agent, operation, &call_path));
                assert!(started.elapsed() < Duration::from_secs(5), "{operation} {path} was slow");
                check(&world, &outside, &format!("{operation} {path}"), &text);
            }
            if mount == "/src" {
                let error = agent.read_text(&path, &ReadWindow::default()).unwrap_err();
                assert_eq!(error.kind(), ErrorKind::Unsupported, "{path}");
            }
        }
        // Walks over a directory holding them end promptly too.
        let agent = agent.clone();
        let text = promptly(mount, move || {
            let grep = GrepRequest { pattern: "x".into(), path: Some(mount.to_owned()), ..GrepRequest::default() };
            format!("{}{}", agent.grep(&grep).agent_view(), agent.tree(mount, None, &[]).agent_view())
        });
        check(&world, &outside, mount, &text);
    }
}

/// Iterations of each racing read-side operation (read ×2, list, grep): 8,000 racing calls.
const RACE_ITERATIONS: usize = 2_000;
/// Every this many iterations the write-side operations (write, edit, `create_directory`, move)
/// race too: each write syncs to disk, so they run 500 times each, 2,000 racing calls.
const WRITE_RACE_EVERY: usize = 4;

#[test]
fn symlink_swaps_during_every_operation_never_escape() {
    let world = hostile_world();
    let layout = &world.layout;
    layout
        .file("data/dir/file.txt", "inside\n")
        .file("out/dir/file.txt", "inside\n")
        .file("outside/marker-outside", "");
    layout.file("outside/file.txt", format!("{SECRET}\n"));
    let outside = layout.snapshot("outside");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let bases = [layout.path("data"), layout.path("out")];
        let target = layout.path("outside");
        std::thread::spawn(move || {
            let mut swaps = 0usize;
            while !stop.load(Ordering::Relaxed) {
                for base in &bases {
                    let real = base.join("dir");
                    let parked = base.join("dir.parked");
                    if std::fs::rename(&real, &parked).is_ok() {
                        let _ = std::os::unix::fs::symlink(&target, &real);
                        std::thread::yield_now();
                        let _ = std::fs::remove_file(&real);
                        let _ = std::fs::rename(&parked, &real);
                    }
                    // The final component too: a file swapped for a link to the outside file.
                    let file = base.join("swap.txt");
                    let _ = std::fs::remove_file(&file);
                    let _ = std::os::unix::fs::symlink(target.join("file.txt"), &file);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&file);
                    let _ = std::fs::write(&file, "inside alpha\n");
                }
                swaps += 1;
            }
            swaps
        })
    };
    let agent = world.agent();
    let escapes = AtomicUsize::new(0);
    let mut calls = 0usize;
    // How often each racing operation did its job: a race in which every call failed would
    // prove nothing about the calls that get through.
    let mut successes = [0usize; 8];
    for iteration in 0..RACE_ITERATIONS {
        let answers = racing_calls(&agent, iteration);
        calls += answers.len();
        for (index, (done, text)) in answers.iter().enumerate() {
            successes[index] += usize::from(*done);
            if text.contains(SECRET) || text.contains("marker-outside") || world.check_text(text).is_err() {
                escapes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0, "the swapper never ran");
    assert_eq!(escapes.load(Ordering::Relaxed), 0, "escapes during {calls} racing calls");
    assert!(successes.iter().all(|count| *count > 0), "an operation never got through the races: {successes:?}");
    assert_eq!(layout.snapshot("outside"), outside, "something outside changed during the races");
}

/// One iteration's racing calls, each with whether it did its job: the read side every time,
/// the write side every [`WRITE_RACE_EVERY`] iterations.
fn racing_calls(agent: &AgentAccessor, iteration: usize) -> Vec<(bool, String)> {
    let edit = [Edit { old_text: "alpha".into(), new_text: "alpha".into() }];
    let texts = [
        agent.read_text("/src/dir/file.txt", &ReadWindow::default()).agent_view(),
        agent.read_text("/src/swap.txt", &ReadWindow::default()).agent_view(),
        agent.list("/src/dir").agent_view(),
        agent
            .grep(&GrepRequest { pattern: "SECRET".into(), path: Some("/src".into()), ..GrepRequest::default() })
            .agent_view(),
    ];
    let done = [
        texts[0] == "inside\n",
        texts[1] == "inside alpha\n",
        texts[2] == "[FILE] file.txt\n",
        texts[3].starts_with("no matches in "),
    ];
    let mut answers: Vec<(bool, String)> = done.into_iter().zip(texts).collect();
    if iteration.is_multiple_of(WRITE_RACE_EVERY) {
        let written = format!("{iteration}\n");
        let texts = [
            agent.write("/output/dir/written.txt", &written, &overwrite()).agent_view(),
            agent.edit("/output/swap.txt", &edit, &EditOptions::default()).agent_view(),
            agent.create_directory(&format!("/output/dir/sub{}", iteration % 5)).agent_view(),
            agent
                .move_path("/output/dir/written.txt", "/output/dir/renamed.txt", &Precondition::Any, &Precondition::Any)
                .agent_view(),
        ];
        let done = [
            texts[0].starts_with("created `/output/dir/written.txt` (")
                || texts[0].starts_with("replaced `/output/dir/written.txt` ("),
            texts[1].starts_with("edited `/output/swap.txt` (1 replacement)"),
            texts[2].starts_with("created directory `/output/dir/sub")
                || texts[2].starts_with("directory `/output/dir/sub"),
            texts[3] == "moved `/output/dir/written.txt` to `/output/dir/renamed.txt`",
        ];
        answers.extend(done.into_iter().zip(texts));
    }
    answers
}

#[test]
fn concurrent_guarded_edits_lose_no_update() {
    const THREADS: usize = 8;
    const INCREMENTS: usize = 25;
    let world = Arc::new(hostile_world());
    world.agent().write("/output/counter.txt", "0\n", &Precondition::Absent).unwrap();
    world.agent().write("/output/written.txt", "0\n", &Precondition::Absent).unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|worker| {
            let world = world.clone();
            std::thread::spawn(move || {
                let agent = world.agent();
                // Half the workers edit with a version guard, half write with one.
                let (path, by_edit) =
                    if worker % 2 == 0 { ("/output/counter.txt", true) } else { ("/output/written.txt", false) };
                let mut retries = 0usize;
                for _ in 0..INCREMENTS {
                    loop {
                        let read = agent.read_text(path, &ReadWindow::default()).unwrap();
                        let version = read.version.clone().unwrap();
                        let value: usize = read.content.trim().parse().unwrap();
                        let next = format!("{}\n", value + 1);
                        let result = if by_edit {
                            let edit = [Edit { old_text: read.content.clone(), new_text: next }];
                            let options =
                                EditOptions { precondition: Precondition::Version(version), ..EditOptions::default() };
                            agent.edit(path, &edit, &options).map(|_| ())
                        } else {
                            let options = Precondition::Version(version);
                            agent.write(path, &next, &options).map(|_| ())
                        };
                        match result {
                            Ok(()) => break,
                            Err(error) if error.kind() == ErrorKind::VersionMismatch => retries += 1,
                            Err(error) => panic!("unexpected error: {error}"),
                        }
                    }
                }
                retries
            })
        })
        .collect();
    let _retries: usize = workers.into_iter().map(|worker| worker.join().unwrap()).sum();
    let expected = format!("{}\n", THREADS / 2 * INCREMENTS);
    assert_eq!(world.layout.read("out/counter.txt"), Some(expected.clone()), "lost edits");
    assert_eq!(world.layout.read("out/written.txt"), Some(expected), "lost writes");
}

/// Every case counted above: traversal × operations, prefixes × operations, links × paths ×
/// operations (without delete) + link deletes, twice (ro and rw mounts), the nested read-only
/// mount, hard links, special files × operations over two mounts, and the race and
/// concurrency scenarios.
const TOTAL_CASES_FLOOR: usize = 150;

#[test]
fn the_battery_has_at_least_150_cases() {
    let operations = OPERATIONS.len();
    let traversal = traversal_inputs().len() * operations;
    let prefixes = PREFIX_INPUTS.len() * operations;
    let links = 2 * (LINKS.len() * LINK_PATHS.len() * (operations - 1) + LINKS.len());
    let nested = 4 * 4;
    let hard = 5;
    let special = 2 * 2 * operations;
    let races = 8;
    let concurrency = 2;
    let total = traversal + prefixes + links + nested + hard + special + races + concurrency;
    assert!(total >= TOTAL_CASES_FLOOR, "{total}");
    // The figures docs/compliance.md gives, so a table that grows or shrinks fails here until
    // the document follows it.
    let document = include_str!("../../../docs/compliance.md");
    let figures = [
        (traversal, format!("× {operations} operations | {traversal} |")),
        (prefixes, format!("prefix siblings (virtual and physical) × {operations} operations | {prefixes} |")),
        (links, format!("plus deleting each | {} |", thousands(links))),
        (total, format!("Total: {} table-driven hostile cases", thousands(total))),
    ];
    for (figure, line) in figures {
        assert!(document.contains(&line), "docs/compliance.md does not say {figure}: {line:?}");
    }
    let paths = format!("{} hostile paths", traversal_inputs().len());
    assert!(document.contains(&paths), "docs/compliance.md does not say {paths:?}");
}

/// `2262` as the document writes it, `2,262`.
fn thousands(number: usize) -> String {
    let digits = number.to_string();
    let mut text = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}
