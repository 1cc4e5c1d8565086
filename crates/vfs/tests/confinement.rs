//! Resolution and confinement: routing, internal absence, symlinks, nesting, special files,
//! races. Every assertion is on the exact outcome an agent would see.
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{Fixture, assert_no_leak};
use vfs::{ErrorKind, MountRegistry, Precondition, ReadWindow};

/// Asserts that `result` is a refusal of `kind` with exactly `text`.
#[track_caller]
fn assert_denied<T: std::fmt::Debug>(result: Result<T, vfs::Error>, kind: ErrorKind, text: &str) {
    let error = result.unwrap_err();
    assert_eq!((error.kind(), error.to_string().as_str()), (kind, text));
}

fn read(registry: &MountRegistry, path: &str) -> Result<String, vfs::Error> {
    registry.agent().read_text(path, &ReadWindow::default()).map(|read| read.content)
}

/// `/src` (ro) over `data`, `/output` (rw) over `out`, `/llm-logs` internal over `logs`.
fn standard() -> (Fixture, MountRegistry) {
    let fixture = Fixture::new();
    fixture.file("data/a.txt", "alpha\n");
    fixture.mkdir("out");
    fixture.file("logs/secret.jsonl", "{}\n");
    fixture.file("outside/secret.txt", "top secret\n");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("data", "/src", "ro"))
        .mount(fixture.spec("out", "/output", "rw"))
        .internal(fixture.spec("logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    (fixture, registry)
}

const UNKNOWN: &str = "no mount serves this path; available mounts: `/output` (rw), `/src` (ro)";

#[test]
fn reads_inside_a_mount() {
    let (_fixture, registry) = standard();
    assert_eq!(read(&registry, "/src/a.txt").unwrap(), "alpha\n");
    assert_eq!(read(&registry, "/src/./x/../a.txt").unwrap(), "alpha\n");
}

#[test]
fn internal_root_is_byte_identical_to_an_unknown_root() {
    let (fixture, registry) = standard();
    let internal = read(&registry, "/llm-logs/secret.jsonl").unwrap_err();
    let unknown = read(&registry, "/no-such-root/secret.jsonl").unwrap_err();
    assert_eq!(internal.to_string(), UNKNOWN);
    assert_eq!(internal.to_string(), unknown.to_string());
    assert_eq!(internal.kind(), ErrorKind::UnknownRoot);
    assert_eq!(unknown.kind(), ErrorKind::UnknownRoot);
    let internal_dir = registry.agent().list("/llm-logs").unwrap_err();
    assert_eq!(internal_dir.to_string(), registry.agent().list("/nope").unwrap_err().to_string());
    let write = registry.agent().write("/llm-logs/x", "x", &Precondition::Absent).unwrap_err();
    assert_eq!(write.to_string(), UNKNOWN);
    assert_no_leak(&fixture, &registry, &internal.to_string());
}

#[test]
fn the_virtual_root_lists_agent_facing_mounts_only() {
    let (_fixture, registry) = standard();
    assert_eq!(registry.agent().list("/").unwrap().to_text(), "[DIR] output\n[DIR] src\n");
}

#[test]
fn prefix_siblings_do_not_match() {
    let (_fixture, registry) = standard();
    let error = read(&registry, "/src2/a.txt").unwrap_err();
    assert_eq!(error.to_string(), UNKNOWN);
    assert_denied(read(&registry, "/srca.txt"), ErrorKind::UnknownRoot, UNKNOWN);
}

#[test]
fn dot_dot_across_mounts_is_lexical() {
    let (_fixture, registry) = standard();
    assert_eq!(read(&registry, "/output/../src/a.txt").unwrap(), "alpha\n");
    assert_eq!(read(&registry, "/src/../../../etc/passwd").unwrap_err().to_string(), UNKNOWN);
}

#[test]
fn invalid_paths_are_refused_without_echo() {
    let (_fixture, registry) = standard();
    for (input, message) in [
        ("src/a.txt", "invalid path: virtual paths are absolute and start with `/`, like `/src/main.rs`"),
        ("/src/a\0.txt", "invalid path: the path contains a NUL character"),
        ("/src/a\n.txt", "invalid path: the path contains a control character"),
        ("~/a.txt", "invalid path: `~` is not expanded; virtual paths start at a mount root such as `/src`"),
        ("C:\\data\\a.txt", "invalid path: drive paths are not virtual paths; use a mount root such as `/src/main.rs`"),
    ] {
        let error = read(&registry, input).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidPath, "{input:?}");
        assert_eq!(error.to_string(), message, "{input:?}");
    }
    let long = format!("/src/{}", "a/".repeat(3000));
    assert_eq!(read(&registry, &long).unwrap_err().to_string(), "invalid path: the path is longer than 4096 bytes");
}

#[test]
fn percent_signs_and_backslashes_are_literal() {
    let (fixture, registry) = standard();
    fixture.file("data/%2e%2e", "percent\n");
    fixture.file("data/a\\..\\b", "backslash\n");
    assert_eq!(read(&registry, "/src/%2e%2e").unwrap(), "percent\n");
    assert_eq!(read(&registry, "/src/a\\..\\b").unwrap(), "backslash\n");
    assert_denied(
        read(&registry, "/src/%2e%2e/%2e%2e/outside"),
        ErrorKind::NotADirectory,
        "`/src/%2e%2e/%2e%2e/outside` is not a directory",
    );
}

#[test]
fn symlinks_inside_the_mount_work() {
    let (fixture, registry) = standard();
    fixture.mkdir("data/sub");
    fixture.symlink("../a.txt", "data/sub/relative");
    fixture.symlink(fixture.path("data/a.txt"), "data/absolute");
    fixture.symlink("sub", "data/dirlink");
    fixture.symlink("relative", "data/sub/chain");
    assert_eq!(read(&registry, "/src/sub/relative").unwrap(), "alpha\n");
    assert_eq!(read(&registry, "/src/absolute").unwrap(), "alpha\n");
    assert_eq!(read(&registry, "/src/dirlink/relative").unwrap(), "alpha\n");
    assert_eq!(read(&registry, "/src/dirlink/chain").unwrap(), "alpha\n");
}

#[test]
fn symlinks_that_leave_the_mount_are_refused() {
    let (fixture, registry) = standard();
    fixture.symlink(fixture.path("outside/secret.txt"), "data/absolute");
    fixture.symlink("../outside/secret.txt", "data/relative");
    fixture.symlink(fixture.path("outside"), "data/dir");
    fixture.symlink("../out", "data/to-other-mount");
    fixture.symlink("/etc/passwd", "data/passwd");
    for path in ["/src/absolute", "/src/relative", "/src/dir/secret.txt", "/src/to-other-mount", "/src/passwd"] {
        let error = read(&registry, path).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Escape, "{path}");
        assert_eq!(
            error.to_string(),
            format!("`{path}` goes through a symbolic link that leads outside its mount; it is not followed")
        );
        assert_no_leak(&fixture, &registry, &error.to_string());
    }
}

#[test]
fn dangling_and_looping_links_end_cleanly() {
    let (fixture, registry) = standard();
    fixture.symlink("missing", "data/dangling");
    fixture.symlink("loop-b", "data/loop-a");
    fixture.symlink("loop-a", "data/loop-b");
    fixture.symlink(".", "data/self");
    assert_eq!(read(&registry, "/src/dangling").unwrap_err().to_string(), "`/src/dangling` does not exist");
    assert_eq!(
        read(&registry, "/src/loop-a").unwrap_err().to_string(),
        "`/src/loop-a` goes through too many symbolic links (a loop?)"
    );
    let deep = format!("/src/{}a.txt", "self/".repeat(50));
    assert_denied(
        read(&registry, &deep),
        ErrorKind::SymlinkLoop,
        &format!("`{deep}` goes through too many symbolic links (a loop?)"),
    );
}

#[test]
fn writes_never_go_through_links() {
    let (fixture, registry) = standard();
    fixture.symlink(fixture.path("outside/secret.txt"), "out/link");
    let agent = registry.agent();
    let options = Precondition::Any;
    let error = agent.write("/output/link", "pwned", &options).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`/output/link` is a symbolic link; vfs does not write or delete through links, so address the file it points to"
    );
    assert_eq!(fixture.read("outside/secret.txt"), "top secret\n");
    // A directory link out of the mount cannot be used as a parent either.
    fixture.symlink(fixture.path("outside"), "out/dir");
    assert_denied(
        agent.write("/output/dir/new.txt", "x", &options),
        ErrorKind::Escape,
        "`/output/dir/new.txt` goes through a symbolic link that leads outside its mount; it is not followed",
    );
    assert!(!fixture.path("outside/new.txt").exists());
    // Deleting a link removes the link, never the target.
    agent.delete("/output/link", false, &Precondition::Any).unwrap();
    assert_eq!(fixture.read("outside/secret.txt"), "top secret\n");
}

#[test]
fn hard_links_are_replaced_not_written_through() {
    let (fixture, registry) = standard();
    std::fs::hard_link(fixture.path("outside/secret.txt"), fixture.path("out/hard")).unwrap();
    let options = Precondition::Any;
    registry.agent().write("/output/hard", "replaced\n", &options).unwrap();
    assert_eq!(fixture.read("out/hard"), "replaced\n");
    assert_eq!(fixture.read("outside/secret.txt"), "top secret\n");
}

#[test]
fn fifos_sockets_and_devices_are_refused_at_once() {
    let (fixture, registry) = standard();
    let fifo = fixture.path("data/fifo");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o644), 0)
        .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(fixture.path("data/socket")).unwrap();
    let started = std::time::Instant::now();
    for path in ["/src/fifo", "/src/socket"] {
        let error = read(&registry, path).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("`{path}` is not a regular file or directory (a FIFO, socket or device); vfs does not open it")
        );
        assert_denied(
            registry.agent().info(path),
            ErrorKind::Unsupported,
            &format!("`{path}` is not a regular file or directory (a FIFO, socket or device); vfs does not open it"),
        );
    }
    fixture.symlink("/dev/zero", "data/zero");
    assert_denied(
        read(&registry, "/src/zero"),
        ErrorKind::Escape,
        "`/src/zero` goes through a symbolic link that leads outside its mount; it is not followed",
    );
    // A writer on a FIFO would block; the no-overwrite rule and the kind check come first.
    let options = Precondition::Any;
    std::fs::create_dir_all(fixture.path("out")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fixture.path("out/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert_denied(
        registry.agent().write("/output/fifo", "x", &options),
        ErrorKind::Unsupported,
        "`/output/fifo` is not a regular file or directory (a FIFO, socket or device); vfs does not open it",
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "a special file blocked");
}

#[test]
fn internal_directory_nested_in_a_mount_is_absent() {
    let fixture = Fixture::new();
    fixture.file("work/notes.txt", "n\n");
    fixture.file("work/logs/secret.jsonl", "{}\n");
    fixture.symlink("logs", "work/alias");
    // Inside the writable part the launch refuses it (hostile_sequences.rs); inside a part
    // agents may only read, it is a name that does not exist.
    let spec = format!("{}:/work:rw;logs:ro", fixture.path("work").display()).parse().unwrap();
    let registry = MountRegistry::builder()
        .mount(spec)
        .internal(fixture.spec("work/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let missing = read(&registry, "/work/no-such.jsonl").unwrap_err().to_string();
    assert_eq!(missing, "`/work/no-such.jsonl` does not exist");
    assert_eq!(
        read(&registry, "/work/logs/secret.jsonl").unwrap_err().to_string(),
        "`/work/logs/secret.jsonl` does not exist"
    );
    assert_eq!(
        read(&registry, "/work/alias/secret.jsonl").unwrap_err().to_string(),
        "`/work/alias/secret.jsonl` does not exist"
    );
    assert_denied(agent.list("/work/logs"), ErrorKind::NotFound, "`/work/logs` does not exist");
    assert_eq!(agent.list("/work").unwrap().to_text(), "[LINK] alias\n[FILE] notes.txt\n");
    assert_eq!(agent.search_files("/work", "*.jsonl", &[]).unwrap().matches.len(), 0);
    let grep = agent.grep(&vfs::GrepRequest { pattern: "\\{".into(), ..Default::default() }).unwrap();
    assert_eq!(grep.matches, 0);
    let options = Precondition::Any;
    assert_eq!(
        agent.write("/work/logs/x.txt", "x", &options).unwrap_err().to_string(),
        "cannot write `/work/logs/x.txt`: `/work/logs` is mounted ro; mounts that grant write: `/work` (rw)"
    );
    assert_eq!(
        agent.delete("/work/logs", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/work/logs`: `/work/logs` is mounted ro; mounts that grant delete: `/work` (rw)"
    );
    assert_eq!(fixture.read("work/logs/secret.jsonl"), "{}\n");
}

#[test]
fn read_only_mount_nested_in_a_writable_one_stays_read_only() {
    let fixture = Fixture::new();
    fixture.file("work/vendor/lib.rs", "lib\n");
    fixture.symlink("vendor", "work/alias");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("work", "/work", "rw"))
        .mount(fixture.spec("work/vendor", "/vendor", "ro"))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let options = Precondition::Any;
    for (path, canonical) in [
        ("/work/vendor/lib.rs", "/work/vendor/lib.rs"),
        ("/work/alias/lib.rs", "/work/alias/lib.rs"),
        ("/work/./vendor/lib.rs", "/work/vendor/lib.rs"),
        ("/vendor/lib.rs", "/vendor/lib.rs"),
    ] {
        let error = agent.write(path, "pwned", &options).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("cannot write `{canonical}`: `/vendor` is mounted ro; mounts that grant write: `/work` (rw)")
        );
    }
    assert_denied(
        agent.delete("/work/vendor/lib.rs", false, &Precondition::Any),
        ErrorKind::PermissionDenied,
        "cannot delete `/work/vendor/lib.rs`: `/vendor` is mounted ro; mounts that grant delete: `/work` (rw)",
    );
    assert_eq!(fixture.read("work/vendor/lib.rs"), "lib\n");
    agent.write("/work/new.txt", "ok", &options).unwrap();
}

#[test]
fn sub_path_overrides_hold_however_the_path_is_spelled() {
    let fixture = Fixture::new();
    fixture.file("work/vendor/x", "v\n");
    fixture.mkdir("work/a");
    let spec = format!("{}:/work:rw;vendor:ro", fixture.path("work").display()).parse().unwrap();
    let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
    let options = Precondition::Any;
    for path in ["/work/vendor/x", "/work/./vendor/x", "/work/a/../vendor/x", "/work//vendor/x"] {
        let error = registry.agent().write(path, "pwned", &options).unwrap_err();
        assert_eq!(
            error.to_string(),
            "cannot write `/work/vendor/x`: `/work/vendor` is mounted ro; mounts that grant write: `/work` (rw)"
        );
    }
    fixture.symlink("vendor", "work/v2");
    assert_denied(
        registry.agent().write("/work/v2/x", "pwned", &options),
        ErrorKind::PermissionDenied,
        "cannot write `/work/v2/x`: `/work/vendor` is mounted ro; mounts that grant write: `/work` (rw)",
    );
    assert_eq!(fixture.read("work/vendor/x"), "v\n");
}

#[test]
fn registry_refusals_are_operator_lines() {
    let fixture = Fixture::new();
    fixture.mkdir("a");
    fixture.file("file", "x");
    let duplicate = MountRegistry::builder()
        .mount(fixture.spec("a", "/src", "ro"))
        .mount(fixture.spec("a", "/src", "rw"))
        .build(vfs::ambient_authority())
        .unwrap_err();
    assert_eq!(duplicate.to_string(), "the virtual root `/src` is mounted twice");
    let case = MountRegistry::builder()
        .mount(fixture.spec("a", "/src", "ro"))
        .mount(fixture.spec("a", "/SRC", "rw"))
        .build(vfs::ambient_authority())
        .unwrap_err();
    assert_eq!(case.to_string(), "the virtual roots `/src` and `/SRC` differ only by case");
    let missing =
        MountRegistry::builder().mount(fixture.spec("nope", "/src", "ro")).build(vfs::ambient_authority()).unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!("the directory `{}` for mount `/src` does not exist", fixture.path("nope").display())
    );
    let file =
        MountRegistry::builder().mount(fixture.spec("file", "/src", "ro")).build(vfs::ambient_authority()).unwrap_err();
    assert_eq!(file.to_string(), format!("`{}` for mount `/src` is not a directory", fixture.path("file").display()));
}

/// Object prefixes that nest in one bucket are refused before any store is contacted: an outer
/// read-write mount would otherwise write into an inner read-only (or internal) one.
#[test]
fn nested_object_prefixes_are_refused() {
    let build = |first: &str, second: &str| {
        let specs: Vec<vfs::MountSpec> = [first, second].iter().map(|text| text.parse().unwrap()).collect();
        let mut builder = MountRegistry::builder();
        builder.mount(specs[0].clone()).internal(specs[1].clone());
        builder.build(vfs::ambient_authority()).err().map(|error| (error.to_string(), error.hint()))
    };
    let hint = "give the mounts prefixes side by side, such as `s3://bucket/work` and `s3://bucket/vendor`, or keep only the outer one";
    assert_eq!(
        build("s3://team/work:/work:rw", "s3://team/work/vendor:/vendor:ro"),
        Some((
            "`s3://team/work/vendor` for mount `/vendor` lies inside `s3://team/work` for mount `/work`: object-storage mounts cannot nest".to_owned(),
            hint
        ))
    );
    assert_eq!(
        build("s3://team/work/logs:/llm-logs:rw", "s3://team:/all:ro").map(|(text, _)| text),
        Some("`s3://team/work/logs` for mount `/llm-logs` lies inside `s3://team` for mount `/all`: object-storage mounts cannot nest".to_owned())
    );
    assert_eq!(
        build("s3://team/work:/a:ro", "s3://team/work/:/b:rw").map(|(text, _)| text),
        Some("`s3://team/work/` for mount `/b` lies inside `s3://team/work` for mount `/a`: object-storage mounts cannot nest".to_owned())
    );
}

#[test]
fn privileged_accessor_reaches_only_its_root() {
    let (fixture, registry) = standard();
    #[expect(clippy::disallowed_methods, reason = "the test holds the logger's capability to prove its reach")]
    let privileged = registry.mint_privileged("/llm-logs").unwrap();
    assert_eq!(privileged.read_text("/llm-logs/secret.jsonl", &ReadWindow::default()).unwrap().content, "{}\n");
    let error = privileged.read_text("/src/a.txt", &ReadWindow::default()).unwrap_err();
    assert_eq!((error.kind(), error.to_string().as_str()), (ErrorKind::UnknownRoot, UNKNOWN));
    #[expect(clippy::disallowed_methods, reason = "proves an agent-facing root cannot be minted")]
    let not_internal = registry.mint_privileged("/src");
    assert!(not_internal.is_none());
    let appender = privileged.into_append_only();
    let mut file = appender.open_append("/llm-logs/new.jsonl").unwrap();
    file.append(b"{\"a\":1}\n").unwrap();
    file.append(b"{\"a\":2}\n").unwrap();
    assert_eq!(fixture.read("logs/new.jsonl"), "{\"a\":1}\n{\"a\":2}\n");
}

/// A downgraded capability reaches its root, and only it, while its registry lives, and
/// does not keep the registry alive: what an observer of the registry holds.
#[test]
fn a_downgraded_privileged_accessor_reaches_its_root_only_while_the_registry_lives() {
    let (fixture, registry) = standard();
    #[expect(clippy::disallowed_methods, reason = "the test holds the journal's kind of capability")]
    let weak = registry.mint_privileged("/llm-logs").unwrap().downgrade();
    let privileged = weak.upgrade().unwrap();
    assert_eq!(privileged.read_text("/llm-logs/secret.jsonl", &ReadWindow::default()).unwrap().content, "{}\n");
    let error = privileged.read_text("/src/a.txt", &ReadWindow::default()).unwrap_err();
    assert_eq!((error.kind(), error.to_string().as_str()), (ErrorKind::UnknownRoot, UNKNOWN));
    drop(privileged);
    drop(registry);
    assert!(weak.upgrade().is_none(), "the registry outlived its last holder");
    drop(fixture);
}

/// An append file tells when its name no longer gives it: replaced by a rename (a log
/// compacted), even while a second name (a backup made with hard links) keeps it linked, or
/// removed.
#[test]
fn an_append_file_knows_when_its_name_gives_another_file() {
    let (fixture, registry) = standard();
    #[expect(clippy::disallowed_methods, reason = "the test holds the journal's kind of capability")]
    let privileged = registry.mint_privileged("/llm-logs").unwrap();
    let mut log = privileged.open_append("/llm-logs/log.jsonl").unwrap();
    log.append(b"one\n").unwrap();
    assert!(!log.unnamed().unwrap());
    std::fs::hard_link(fixture.path("logs/log.jsonl"), fixture.path("logs/backup.jsonl")).unwrap();
    assert!(!log.unnamed().unwrap(), "a second name changes nothing");
    std::fs::write(fixture.path("logs/new.jsonl"), "compacted\n").unwrap();
    std::fs::rename(fixture.path("logs/new.jsonl"), fixture.path("logs/log.jsonl")).unwrap();
    assert!(log.unnamed().unwrap(), "replaced, though the backup still links the file");
    let fresh = privileged.open_append("/llm-logs/log.jsonl").unwrap();
    assert!(!fresh.unnamed().unwrap());
    std::fs::remove_file(fixture.path("logs/log.jsonl")).unwrap();
    assert!(fresh.unnamed().unwrap(), "removed");
}

/// The temporary file a stage cut short leaves (a process killed before its commit) is
/// removed by `remove_stages`; nothing else in the directory is, nor in the directories
/// below it.
#[test]
fn remove_stages_removes_only_the_temporary_files_of_stages() {
    let (fixture, registry) = standard();
    #[expect(clippy::disallowed_methods, reason = "the test holds the journal's kind of capability")]
    let privileged = registry.mint_privileged("/llm-logs").unwrap();
    let mut staged = privileged.stage("/llm-logs/log.jsonl", vfs::StageFrom::Empty).unwrap();
    staged.write_at(0, b"never committed\n").unwrap();
    // Forgotten, as a killed process leaves it: its temporary file stays.
    std::mem::forget(staged);
    fixture.file("logs/deeper/.vfs-tmp-00000000000000aa", "below\n");
    fixture.mkdir("logs/.vfs-tmp-directory");
    let names = |relative: &str| {
        let mut names: Vec<String> = std::fs::read_dir(fixture.path(relative))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let before = names("logs");
    assert_eq!(before.len(), 4, "{before:?}");
    assert!(before.iter().any(|name| name.starts_with(".vfs-tmp-") && name != ".vfs-tmp-directory"), "{before:?}");
    privileged.remove_stages("/llm-logs").unwrap();
    assert_eq!(names("logs"), [".vfs-tmp-directory", "deeper", "secret.jsonl"]);
    assert_eq!(names("logs/deeper"), [".vfs-tmp-00000000000000aa"]);
    let error = privileged.remove_stages("/llm-logs/secret.jsonl").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotADirectory);
    let error = privileged.remove_stages("/src").unwrap_err();
    assert_eq!((error.kind(), error.to_string().as_str()), (ErrorKind::UnknownRoot, UNKNOWN));
}

#[test]
fn racing_symlink_swaps_never_escape() {
    let fixture = Fixture::new();
    fixture.file("data/dir/file.txt", "inside\n");
    fixture.file("outside/file.txt", "SECRET\n");
    fixture.file("outside/marker-outside", "");
    fixture.mkdir("out/dir");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("data", "/src", "ro"))
        .mount(fixture.spec("out", "/output", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let data = fixture.path("data");
    let out = fixture.path("out");
    let outside = fixture.path("outside");
    let swapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut swaps = 0usize;
            while !stop.load(Ordering::Relaxed) {
                for base in [&data, &out] {
                    let real = base.join("dir");
                    let parked = base.join("dir.real");
                    let _ = std::fs::rename(&real, &parked);
                    let _ = std::os::unix::fs::symlink(&outside, &real);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&real);
                    let _ = std::fs::rename(&parked, &real);
                }
                swaps += 1;
            }
            swaps
        })
    };
    let agent = registry.agent();
    let escapes = AtomicUsize::new(0);
    // Reads, writes, directories and listings that did their job: a race in which every call
    // failed would say nothing about the calls that get through.
    let mut successes = [0usize; 4];
    let options = Precondition::Any;
    for iteration in 0..5_000 {
        let read = agent.read_text("/src/dir/file.txt", &ReadWindow::default());
        if read.as_ref().is_ok_and(|read| read.content.contains("SECRET")) {
            escapes.fetch_add(1, Ordering::Relaxed);
        }
        successes[0] += usize::from(read.is_ok_and(|read| read.content == "inside\n"));
        let content = iteration.to_string();
        let written = agent.write("/output/dir/written.txt", &content, &options);
        successes[1] += usize::from(written.is_ok_and(|written| written.bytes == content.len() as u64));
        let made = agent.create_directory(&format!("/output/dir/sub{}", iteration % 7));
        successes[2] += usize::from(made.is_ok());
        let listing = agent.list("/src/dir").map(|listing| listing.to_text());
        if listing.as_ref().is_ok_and(|text| text.contains("marker-outside")) {
            escapes.fetch_add(1, Ordering::Relaxed);
        }
        successes[3] += usize::from(listing.is_ok_and(|text| text == "[FILE] file.txt\n"));
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 0);
    assert_eq!(escapes.load(Ordering::Relaxed), 0);
    assert!(successes.iter().all(|count| *count > 0), "read, write, mkdir, list never got through: {successes:?}");
    let mut leaked: Vec<_> =
        std::fs::read_dir(fixture.path("outside")).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    leaked.sort();
    assert_eq!(
        leaked,
        vec![std::ffi::OsString::from("file.txt"), std::ffi::OsString::from("marker-outside")],
        "something was created outside the mounts"
    );
}

/// With a single mount, reads take one `openat2` beneath the root handle; every rule must hold
/// the same as on the component walk.
#[test]
fn single_mount_fast_path_keeps_every_rule() {
    let fixture = Fixture::new();
    fixture.file("data/dir/a.txt", "alpha\n");
    fixture.file("outside/secret.txt", "top secret\n");
    fixture.symlink("dir/a.txt", "data/inside-link");
    fixture.symlink(fixture.path("outside/secret.txt"), "data/escape");
    fixture.symlink("../outside", "data/escape-dir");
    fixture.file("data/.vfs-tmp-0123456789abcdef", "half");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fixture.path("data/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let registry =
        MountRegistry::builder().mount(fixture.spec("data", "/src", "ro")).build(vfs::ambient_authority()).unwrap();
    assert_eq!(read(&registry, "/src/dir/a.txt").unwrap(), "alpha\n");
    assert_eq!(read(&registry, "/src/inside-link").unwrap(), "alpha\n");
    assert_denied(
        read(&registry, "/src/escape"),
        ErrorKind::Escape,
        "`/src/escape` goes through a symbolic link that leads outside its mount; it is not followed",
    );
    assert_denied(
        read(&registry, "/src/escape-dir/secret.txt"),
        ErrorKind::Escape,
        "`/src/escape-dir/secret.txt` goes through a symbolic link that leads outside its mount; it is not followed",
    );
    assert_denied(
        read(&registry, "/src/fifo"),
        ErrorKind::Unsupported,
        "`/src/fifo` is not a regular file or directory (a FIFO, socket or device); vfs does not open it",
    );
    assert_eq!(read(&registry, "/src/dir").unwrap_err().to_string(), "`/src/dir` is a directory, not a file");
    assert_eq!(read(&registry, "/src/none").unwrap_err().to_string(), "`/src/none` does not exist");
    assert_eq!(read(&registry, "/src/dir/none/x").unwrap_err().to_string(), "`/src/dir/none/x` does not exist");
    assert_eq!(
        read(&registry, "/src/.vfs-tmp-0123456789abcdef").unwrap_err().to_string(),
        "`/src/.vfs-tmp-0123456789abcdef` does not exist"
    );
    assert_denied(
        read(&registry, "/elsewhere/x"),
        ErrorKind::UnknownRoot,
        "no mount serves this path; available mounts: `/src` (ro)",
    );
}

#[test]
fn racing_symlink_swaps_never_escape_with_one_mount() {
    let fixture = Fixture::new();
    fixture.file("data/dir/file.txt", "inside\n");
    fixture.file("outside/file.txt", "SECRET\n");
    let registry =
        MountRegistry::builder().mount(fixture.spec("data", "/src", "ro")).build(vfs::ambient_authority()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (data, outside) = (fixture.path("data"), fixture.path("outside"));
    let swapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut swaps = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(data.join("dir"), data.join("dir.real"));
                let _ = std::os::unix::fs::symlink(&outside, data.join("dir"));
                std::thread::yield_now();
                let _ = std::fs::remove_file(data.join("dir"));
                let _ = std::fs::rename(data.join("dir.real"), data.join("dir"));
                swaps += 1;
            }
            swaps
        })
    };
    let (mut escapes, mut inside) = (0usize, 0usize);
    // 5,000 reads, and on past them (for at most a minute) until one got through: on a loaded
    // machine the swapper can hold the directory away for every one of the first 5,000.
    let started = std::time::Instant::now();
    let mut reads = 0usize;
    while reads < 5_000 || (inside == 0 && started.elapsed() < std::time::Duration::from_mins(1)) {
        reads += 1;
        match read(&registry, "/src/dir/file.txt") {
            Ok(content) if content.contains("SECRET") => escapes += 1,
            Ok(content) => inside += usize::from(content == "inside\n"),
            Err(_) => {}
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(swapper.join().unwrap() > 0);
    assert_eq!(escapes, 0);
    assert!(inside > 0, "no read got through the swaps");
}
