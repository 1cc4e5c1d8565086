//! File operations through the agent accessor: exact results, bounds and version guards.
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk")]

mod common;

use common::{Fixture, assert_no_leak};
use vfs::{
    Edit, EditOptions, ErrorKind, GrepRequest, Hint, Limits, MountRegistry, Operation, Precondition, ReadOn, ReadWindow,
};

/// A registry over the fixture's `data` at `/src`, read-only, with reads capped at `bytes`.
fn capped(fixture: &Fixture, bytes: u64) -> MountRegistry {
    let mut limits = Limits::default();
    limits.read_bytes = bytes;
    MountRegistry::builder()
        .mount(fixture.spec("data", "/src", "ro"))
        .limits(limits)
        .build(vfs::ambient_authority())
        .unwrap()
}

fn setup() -> (Fixture, MountRegistry) {
    let fixture = Fixture::new();
    fixture.file("data/lines.txt", "one\ntwo\nthree\nfour\nfive\n");
    fixture.file("data/src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    fixture.file("data/src/lib.rs", "pub fn hello() {}\n");
    fixture.file("data/notes.md", "# Notes\nhello world\n");
    fixture.mkdir("out");
    fixture.mkdir("keep");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("data", "/src", "ro"))
        .mount(fixture.spec("out", "/output", "rw"))
        .mount(fixture.spec("keep", "/keep", "rwnd"))
        .build(vfs::ambient_authority())
        .unwrap();
    (fixture, registry)
}

fn window(head: Option<u64>, tail: Option<u64>, offset: Option<u64>, limit: Option<u64>) -> ReadWindow {
    ReadWindow { head, tail, offset, limit }
}

#[test]
fn read_windows() {
    let (_fixture, registry) = setup();
    let agent = registry.agent();
    let whole = agent.read_text("/src/lines.txt", &ReadWindow::default()).unwrap();
    assert_eq!(whole.content, "one\ntwo\nthree\nfour\nfive\n");
    assert_eq!((whole.start_line, whole.line_count, whole.truncated), (1, 5, false));
    assert!(whole.version.is_some());
    let head = agent.read_text("/src/lines.txt", &window(Some(2), None, None, None)).unwrap();
    assert_eq!(head.to_text(), "one\ntwo\n[more lines follow; read on with offset: 3]");
    let middle = agent.read_text("/src/lines.txt", &window(None, None, Some(3), Some(2))).unwrap();
    assert_eq!(middle.content, "three\nfour\n");
    assert_eq!(middle.start_line, 3);
    let tail = agent.read_text("/src/lines.txt", &window(None, Some(2), None, None)).unwrap();
    assert_eq!(tail.to_text(), "four\nfive\n");
    let tail_all = agent.read_text("/src/lines.txt", &window(None, Some(50), None, None)).unwrap();
    assert_eq!(tail_all.content, "one\ntwo\nthree\nfour\nfive\n");
    let past_end = agent.read_text("/src/lines.txt", &window(None, None, Some(99), None)).unwrap();
    assert_eq!(past_end.content, "");
    let error = agent.read_text("/src/lines.txt", &window(Some(1), Some(1), None, None)).unwrap_err();
    assert_eq!(error.to_string(), "give `head` or `tail`, not both");
    let error = agent.read_text("/src/lines.txt", &window(None, None, Some(0), None)).unwrap_err();
    assert_eq!(error.to_string(), "`offset` is 1-based: the first line is `offset: 1`");
}

#[test]
fn the_byte_cap_bounds_what_is_read() {
    let fixture = Fixture::new();
    let line = "x".repeat(99) + "\n";
    fixture.file("data/big.txt", &line.repeat(100));
    let registry = capped(&fixture, 1_000);
    let read = registry.agent().read_text("/src/big.txt", &ReadWindow::default()).unwrap();
    assert_eq!(read.content.len(), 1_000);
    assert_eq!(read.line_count, 10);
    assert!(read.truncated);
    assert_eq!(read.next, Some(ReadOn::Capped { cap: 1_000, size: 10_000, next: 11 }));
    assert_eq!(read.next.and_then(|next| next.offset()), Some(11));
    assert_eq!(
        read.next.map(|next| next.agent_text().to_string()).as_deref(),
        Some(
            "truncated at the 1000-byte cap; the file has 10000 bytes; read on with offset: 11 (or use head/tail/limit)"
        )
    );
    let next = registry.agent().read_text("/src/big.txt", &window(None, None, Some(11), Some(5))).unwrap();
    assert_eq!(next.content, line.repeat(5));
}

/// When the cap cuts a line, paging on starts at that line again, so nothing is skipped; a
/// single line longer than the cap is cut and paging moves past it.
#[test]
fn a_line_cut_by_the_cap_is_read_again() {
    let fixture = Fixture::new();
    fixture.file("data/cut.txt", "0123456789\nabcdefghij\nrest\n");
    fixture.file("data/wide.txt", &("w".repeat(40) + "\nnext\n"));
    let registry = capped(&fixture, 16);
    let agent = registry.agent();
    let read = agent.read_text("/src/cut.txt", &ReadWindow::default()).unwrap();
    assert_eq!(
        read.to_text(),
        "0123456789\nabcde\n[truncated at the 16-byte cap inside line 2; the file has 27 bytes; read on with offset: 2 (or use head/tail/limit)]"
    );
    let on = agent.read_text("/src/cut.txt", &window(None, None, Some(2), None)).unwrap();
    assert_eq!((on.content.as_str(), on.truncated), ("abcdefghij\nrest\n", false));
    assert_eq!(read.next, Some(ReadOn::CutInside { cap: 16, line: 2, size: 27 }));
    let wide = agent.read_text("/src/wide.txt", &ReadWindow::default()).unwrap();
    assert_eq!(wide.next, Some(ReadOn::LineOverCap { cap: 16, line: 1, size: 46, next: 2 }));
    assert_eq!(
        wide.next.map(|next| next.agent_text().to_string()).as_deref(),
        Some("line 1 alone is longer than the 16-byte cap and is cut; the file has 46 bytes; read on with offset: 2")
    );
    assert_eq!(agent.read_text("/src/wide.txt", &window(None, None, Some(2), None)).unwrap().content, "next\n");
}

/// A tail whose last lines exceed the cap shows what fits and says to page from the start:
/// the note carries the numbers, and the window's arguments as terms a front end words.
#[test]
fn a_tail_over_the_cap_says_to_page_from_the_start() {
    let fixture = Fixture::new();
    fixture.file("data/cut.txt", "0123456789\nabcdefghij\nrest\n");
    let registry = capped(&fixture, 16);
    let read = registry.agent().read_text("/src/cut.txt", &window(None, Some(3), None, None)).unwrap();
    assert_eq!(read.next, Some(ReadOn::TailOverCap { cap: 16, lines: 2 }));
    assert_eq!(read.next.and_then(|next| next.offset()), None);
    assert_eq!(
        read.to_text(),
        "abcdefghij\nrest\n[the last lines exceed the 16-byte cap; showing the last 2 whole or partial lines; use offset/limit to page from the start]"
    );
}

/// The largest count an agent can write is a whole file, not an overflow (it panicked).
#[test]
fn a_tail_of_every_line_the_count_can_name_is_the_whole_file() {
    let fixture = Fixture::new();
    fixture.file("data/short.txt", "one\ntwo\n");
    let registry = capped(&fixture, 16);
    let read = registry.agent().read_text("/src/short.txt", &window(None, Some(u64::MAX), None, None)).unwrap();
    assert_eq!((read.content.as_str(), read.next), ("one\ntwo\n", None));
}

#[test]
fn binary_and_missing_files() {
    let (fixture, registry) = setup();
    std::fs::write(fixture.path("data/blob.bin"), [0u8, 1, 2, 3]).unwrap();
    let agent = registry.agent();
    assert_eq!(
        agent.read_text("/src/blob.bin", &ReadWindow::default()).unwrap_err().to_string(),
        "`/src/blob.bin` looks binary (it contains NUL bytes); use read_media for images and audio"
    );
    assert_eq!(
        agent.read_text("/src/none.txt", &ReadWindow::default()).unwrap_err().to_string(),
        "`/src/none.txt` does not exist"
    );
    assert_eq!(
        agent.read_text("/src/src", &ReadWindow::default()).unwrap_err().to_string(),
        "`/src/src` is a directory, not a file"
    );
    let media = agent.read_media("/src/blob.bin").unwrap();
    assert_eq!((media.data.as_str(), media.mime_type.as_str()), ("AAECAw==", "application/octet-stream"));
}

#[test]
fn read_multiple_reports_per_file() {
    let (_fixture, registry) = setup();
    let results = registry
        .agent()
        .read_multiple(&["/src/src/lib.rs".into(), "/src/missing".into(), "/elsewhere/x".into()])
        .unwrap();
    assert_eq!(results[0].1.as_ref().unwrap().content, "pub fn hello() {}\n");
    assert_eq!(results[1].1.as_ref().unwrap_err().to_string(), "`/src/missing` does not exist");
    assert_eq!(
        results[2].1.as_ref().unwrap_err().to_string(),
        "no mount serves this path; available mounts: `/keep` (rwnd), `/output` (rw), `/src` (ro)"
    );
}

#[test]
fn writes_are_atomic_and_guarded() {
    let (fixture, registry) = setup();
    let agent = registry.agent();
    let created = agent.write("/output/a/b/new.txt", "hello\n", &Precondition::Absent).unwrap();
    assert!(created.created);
    assert_eq!(fixture.read("out/a/b/new.txt"), "hello\n");
    let version = created.version.clone().unwrap();
    assert_eq!(created.to_text(), format!("created `/output/a/b/new.txt` (6 bytes, version {version})"));
    let exists = agent.write("/output/a/b/new.txt", "again", &Precondition::Absent).unwrap_err();
    // What to do next is a value; the front end words it (here `Display`, the core's own).
    assert_eq!(exists.hint(), Some(Hint::Overwrite));
    assert_eq!(exists.to_string(), "`/output/a/b/new.txt` already exists; ask for an overwrite to replace it");
    let stale = Precondition::Version("0000000000000000".into());
    let mismatch = agent.write("/output/a/b/new.txt", "again", &stale).unwrap_err();
    assert_eq!(
        mismatch.to_string(),
        format!(
            "`/output/a/b/new.txt` changed since you read it: its version is now `{version}`; read it again and retry"
        )
    );
    let guarded = Precondition::Version(version.clone());
    let replaced = agent.write("/output/a/b/new.txt", "second\n", &guarded).unwrap();
    assert!(!replaced.created);
    assert_eq!(fixture.read("out/a/b/new.txt"), "second\n");
    assert_eq!(agent.info("/output/a/b/new.txt").unwrap().version, replaced.version);
    let denied = agent.write("/src/x.txt", "x", &Precondition::Absent).unwrap_err();
    assert_eq!(
        denied.to_string(),
        "cannot write `/src/x.txt`: `/src` is mounted ro; mounts that grant write: `/keep` (rwnd), `/output` (rw)"
    );
    let leftovers: Vec<_> = std::fs::read_dir(fixture.path("out/a/b"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(leftovers, vec!["new.txt".to_owned()], "no temporary file is left behind");
}

/// A write or a move that needs something at its destination (a version, a tree, a
/// directory) makes no directory on its way there: where a parent is missing, so is the file,
/// and the refusal is the version's, as beside an existing directory. (Before, the missing
/// parents were made, then the write refused, and they stayed.) Without such a precondition
/// the parents are made.
#[test]
fn a_change_that_needs_its_destination_there_makes_no_directory_on_its_way() {
    let (fixture, registry) = setup();
    fixture.file("out/a.txt", "a\n");
    let agent = registry.agent();
    let mismatch = |error: vfs::Error| {
        assert_eq!(error.kind(), ErrorKind::VersionMismatch);
        assert_eq!(error.unmet(), Some(vfs::Unmet::Version));
        error.to_string()
    };
    let text = |path: &str| {
        format!(
            "`{path}` changed since you read it: its version is now `none (the file does not exist)`; read it again and retry"
        )
    };
    let preconditions = [
        Precondition::Version("0000000000000000".into()),
        Precondition::Tree("0000000000000000".into()),
        Precondition::Directory,
    ];
    for precondition in &preconditions {
        let error = agent.write("/output/x/y/c.txt", "c", precondition).unwrap_err();
        assert_eq!(mismatch(error), text("/output/x/y/c.txt"), "{precondition:?}");
        let error =
            agent.move_path("/output/a.txt", "/output/m/n/c.txt", &Precondition::Any, precondition).unwrap_err();
        assert_eq!(mismatch(error), text("/output/m/n/c.txt"), "{precondition:?}");
    }
    // Nor does a move refused for its source's guard (an undo's): the source is looked at
    // before the destination's parents are made.
    fixture.mkdir("out/d");
    fixture.file("out/d/f.txt", "f\n");
    let stale = Precondition::Version("0000000000000000".into());
    let error = agent.move_path("/output/a.txt", "/output/p/q/a.txt", &stale, &Precondition::Absent).unwrap_err();
    assert_eq!(
        mismatch(error),
        "`/output/a.txt` changed since you read it: its version is now `VERSION`; read it again and retry"
            .replace("VERSION", &agent.info("/output/a.txt").unwrap().version.unwrap())
    );
    let stale = Precondition::Tree("0000000000000000".into());
    let error = agent.move_path("/output/d", "/output/p/q/d", &stale, &Precondition::Absent).unwrap_err();
    assert_eq!(
        mismatch(error),
        "`/output/d` changed since you read it: its version is now `another tree`; read it again and retry"
    );
    std::fs::remove_dir_all(fixture.path("out/d")).unwrap();
    let made: Vec<String> = std::fs::read_dir(fixture.path("out"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(made, ["a.txt"], "no directory made on the way");
    assert_eq!(std::fs::read_to_string(fixture.path("out/a.txt")).unwrap(), "a\n");

    agent.write("/output/x/y/c.txt", "c", &Precondition::Any).unwrap();
    agent.move_path("/output/a.txt", "/output/m/n/a.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(std::fs::read_to_string(fixture.path("out/x/y/c.txt")).unwrap(), "c");
    assert_eq!(std::fs::read_to_string(fixture.path("out/m/n/a.txt")).unwrap(), "a\n");
}

/// One precondition for every change: each refusal is exact, names the place it was for, says
/// which precondition did not hold (`Error::unmet`), and changes nothing.
#[test]
fn every_change_states_its_precondition() {
    let (fixture, registry) = setup();
    fixture.file("out/a.txt", "a\n");
    fixture.file("out/b.txt", "b\n");
    fixture.mkdir("out/d");
    let agent = registry.agent();
    let version = agent.info("/output/a.txt").unwrap().version.unwrap();
    let refusal =
        |error: vfs::Error| (error.kind(), error.unmet(), error.path().map(ToString::to_string), error.to_string());
    let mismatch = |path: &str, now: &str| {
        (
            ErrorKind::VersionMismatch,
            Some(vfs::Unmet::Version),
            Some(path.to_owned()),
            format!("`{path}` changed since you read it: its version is now `{now}`; read it again and retry"),
        )
    };
    let exists = |path: &str| {
        (
            ErrorKind::AlreadyExists,
            Some(vfs::Unmet::Absent),
            Some(path.to_owned()),
            format!("`{path}` exists; the change required that nothing be there"),
        )
    };
    let stale = Precondition::Version("0000000000000000".into());
    let edit = [Edit { old_text: "a".into(), new_text: "x".into() }];

    // A write at a version where no file is: the version is "none".
    assert_eq!(
        refusal(agent.write("/output/none.txt", "x", &stale).unwrap_err()),
        mismatch("/output/none.txt", "none (the file does not exist)")
    );
    // An edit needs a file: under `Absent` the file there is refused; a missing one is missing.
    let absent = EditOptions { precondition: Precondition::Absent, ..EditOptions::default() };
    assert_eq!(refusal(agent.edit("/output/a.txt", &edit, &absent).unwrap_err()), exists("/output/a.txt"));
    assert_eq!(
        agent.edit("/output/none.txt", &edit, &absent).unwrap_err().to_string(),
        "`/output/none.txt` does not exist"
    );
    // A delete, likewise; and at a version.
    assert_eq!(
        refusal(agent.delete("/output/a.txt", false, &Precondition::Absent).unwrap_err()),
        exists("/output/a.txt")
    );
    assert_eq!(refusal(agent.delete("/output/a.txt", false, &stale).unwrap_err()), mismatch("/output/a.txt", &version));
    // A move: the source's precondition names the source, the destination's the destination.
    assert_eq!(
        refusal(agent.move_path("/output/a.txt", "/output/c.txt", &stale, &Precondition::Absent).unwrap_err()),
        mismatch("/output/a.txt", &version)
    );
    let b_version = agent.info("/output/b.txt").unwrap().version.unwrap();
    assert_eq!(
        refusal(agent.move_path("/output/a.txt", "/output/b.txt", &Precondition::Any, &stale).unwrap_err()),
        mismatch("/output/b.txt", &b_version)
    );
    assert_eq!(
        refusal(agent.move_path("/output/a.txt", "/output/c.txt", &Precondition::Any, &stale).unwrap_err()),
        mismatch("/output/c.txt", "none (the file does not exist)")
    );
    // A directory is never replaced, whatever the precondition; a mount root is no destination.
    for precondition in [Precondition::Absent, Precondition::Any, stale.clone()] {
        let error = agent.move_path("/output/a.txt", "/output/d", &Precondition::Any, &precondition).unwrap_err();
        assert_eq!(
            (error.unmet(), error.to_string()),
            (None, "cannot replace directory `/output/d`; delete it first".to_owned()),
            "{precondition:?}"
        );
    }
    let error = agent.move_path("/output/a.txt", "/keep", &Precondition::Any, &Precondition::Any).unwrap_err();
    assert_eq!(
        (error.kind(), error.unmet(), error.to_string()),
        (ErrorKind::InvalidArgument, None, "cannot move onto `/keep`: it is a mount root".to_owned())
    );
    assert_eq!((fixture.read("out/a.txt"), fixture.read("out/b.txt")), ("a\n".to_owned(), "b\n".to_owned()));
    // The version the caller saw replaces the file at the destination.
    agent
        .move_path("/output/a.txt", "/output/b.txt", &Precondition::Version(version), &Precondition::Version(b_version))
        .unwrap();
    assert_eq!((fixture.path("out/a.txt").exists(), fixture.read("out/b.txt")), (false, "a\n".to_owned()));
}

#[test]
fn edits_need_a_unique_match_and_return_a_diff() {
    let (fixture, registry) = setup();
    fixture.file("out/code.rs", "let a = 1;\nlet b = 2;\nlet a2 = 1;\n");
    let agent = registry.agent();
    let edit = |old: &str, new: &str| Edit { old_text: old.into(), new_text: new.into() };
    let ambiguous = agent.edit("/output/code.rs", &[edit("= 1;", "= 9;")], &EditOptions::default()).unwrap_err();
    assert_eq!(ambiguous.hint(), Some(Hint::ReplaceAll));
    assert_eq!(
        ambiguous.to_string(),
        "edit 1 for `/output/code.rs`: `old_text` matches 2 places; add surrounding lines to make it unique, or ask to replace every occurrence"
    );
    let dry = EditOptions { dry_run: true, ..EditOptions::default() };
    let preview = agent.edit("/output/code.rs", &[edit("let b = 2;", "let b = $1;")], &dry).unwrap();
    assert!(!preview.applied);
    assert_eq!(fixture.read("out/code.rs"), "let a = 1;\nlet b = 2;\nlet a2 = 1;\n");
    let done = agent.edit("/output/code.rs", &[edit("let b = 2;", "let b = $1;")], &EditOptions::default()).unwrap();
    assert_eq!(
        done.to_text(),
        "edited `/output/code.rs` (1 replacement)\n--- /output/code.rs\n+++ /output/code.rs\n@@ -1,3 +1,3 @@\n let a = 1;\n-let b = 2;\n+let b = $1;\n let a2 = 1;\n"
    );
    assert_eq!(fixture.read("out/code.rs"), "let a = 1;\nlet b = $1;\nlet a2 = 1;\n");
    let all = EditOptions { replace_all: true, ..EditOptions::default() };
    assert_eq!(agent.edit("/output/code.rs", &[edit("= 1;", "= 7;")], &all).unwrap().replacements, 2);
    let stale = EditOptions { precondition: Precondition::Version("nope".into()), ..EditOptions::default() };
    let version = agent.info("/output/code.rs").unwrap().version.unwrap();
    assert_eq!(
        agent.edit("/output/code.rs", &[edit("7", "8")], &stale).unwrap_err().to_string(),
        format!("`/output/code.rs` changed since you read it: its version is now `{version}`; read it again and retry")
    );
    assert_eq!(fixture.read("out/code.rs"), "let a = 7;\nlet b = $1;\nlet a2 = 7;\n");
    assert_eq!(
        agent.edit("/src/notes.md", &[edit("hello", "bye")], &EditOptions::default()).unwrap_err().to_string(),
        "cannot write `/src/notes.md`: `/src` is mounted ro; mounts that grant write: `/keep` (rwnd), `/output` (rw)"
    );
}

/// A tree deeper than any path names (made beside vfs, or by moving one tree under another:
/// a move checks no depth) is walked no deeper than 256 levels below where a walk starts. A
/// recursive delete, whose walks must see every name (the default rules, the images), is
/// refused in one line and nothing goes. (Walked a level a frame to its end, 3,000 levels took
/// the thread's whole stack, and the process.)
#[test]
fn a_tree_deeper_than_any_path_is_walked_no_deeper_than_a_path_goes() {
    let fixture = Fixture::new();
    let chain = vec!["a"; 300].join("/");
    fixture.file(&format!("w/deep/{chain}/f.txt"), "x\n");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("w", "/w", "rw"))
        .name_rules(vfs::NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    assert_eq!(
        agent.delete("/w/deep", true, &Precondition::Any).unwrap_err().to_string(),
        "`/w/deep`: it holds directories more than 256 levels below it, deeper than vfs goes"
    );
    assert!(fixture.path(&format!("w/deep/{chain}/f.txt")).is_file());
}

/// A move to another file system copies the file, so it is refused above the write cap (a
/// sparse file of a gigabyte was written out whole, past the call's time) and when the call is
/// out of time; refused, it leaves the source as it was and nothing at the destination. (The
/// copy also looks at the clock every MiB; no test here can time a copy to stop in its middle.)
#[test]
#[expect(clippy::disallowed_types, reason = "fixture: a sparse file made on disk")]
fn a_move_to_another_file_system_is_refused_above_the_write_cap_and_out_of_time() {
    use std::os::unix::fs::MetadataExt as _;
    let fixture = Fixture::new();
    let shm = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm (tmpfs)");
    fixture.file("w/small.txt", "small\n");
    std::fs::File::create(fixture.path("w/sparse.bin")).unwrap().set_len(1 << 30).unwrap();
    assert_ne!(std::fs::metadata(shm.path()).unwrap().dev(), std::fs::metadata(fixture.path("w")).unwrap().dev());
    let mut limits = Limits::default();
    limits.write_bytes = 16 << 20;
    let registry = MountRegistry::builder()
        .mount(fixture.spec("w", "/w", "rw"))
        .mount(format!("{}:/s:rw", shm.path().display()).parse().unwrap())
        .limits(limits)
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    assert_eq!(
        agent
            .move_path("/w/sparse.bin", "/s/sparse.bin", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "`/w/sparse.bin`: a move to another file system copies it, and it has 1073741824 bytes, more than the 16777216-byte write cap"
    );
    assert_eq!(std::fs::metadata(fixture.path("w/sparse.bin")).unwrap().len(), 1 << 30);
    assert!(!shm.path().join("sparse.bin").exists());
    // Out of time before the copy: nothing moved.
    let hurried = agent.with_budget(vfs::Budget::unlimited().with_time(std::time::Duration::from_nanos(1)));
    let late = hurried.move_path("/w/small.txt", "/s/small.txt", &Precondition::Any, &Precondition::Absent);
    assert_eq!(late.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(std::fs::read(fixture.path("w/small.txt")).unwrap(), b"small\n");
    assert_eq!(std::fs::read_dir(shm.path()).unwrap().count(), 0, "no copy left behind");
    assert_eq!(
        agent.move_path("/w/small.txt", "/s/small.txt", &Precondition::Any, &Precondition::Absent).unwrap().to_text(),
        "moved `/w/small.txt` to `/s/small.txt`"
    );
    assert_eq!(std::fs::read(shm.path().join("small.txt")).unwrap(), b"small\n");
}

#[test]
fn directories_moves_and_deletes() {
    let (fixture, registry) = setup();
    let agent = registry.agent();
    assert!(agent.create_directory("/output/x/y").unwrap().created);
    assert_eq!(agent.create_directory("/output/x/y").unwrap().to_text(), "directory `/output/x/y` already exists");
    agent.write("/output/x/y/f.txt", "f", &Precondition::Absent).unwrap();
    agent.write("/output/g.txt", "g", &Precondition::Absent).unwrap();
    let refused =
        agent.move_path("/output/g.txt", "/output/x/y/f.txt", &Precondition::Any, &Precondition::Absent).unwrap_err();
    assert_eq!(refused.to_string(), "`/output/x/y/f.txt` already exists; ask for an overwrite to replace it");
    agent.move_path("/output/g.txt", "/output/x/y/f.txt", &Precondition::Any, &Precondition::Any).unwrap();
    assert_eq!(fixture.read("out/x/y/f.txt"), "g");
    let moved = agent.move_path("/output/x/y/f.txt", "/keep/f.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(moved.to_text(), "moved `/output/x/y/f.txt` to `/keep/f.txt`");
    assert_eq!(fixture.read("keep/f.txt"), "g");
    // rwnd: write and create, but never delete (a move out deletes the source).
    assert_eq!(
        agent.delete("/keep/f.txt", false, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/keep/f.txt`: `/keep` is mounted rwnd; mounts that grant delete: `/output` (rw)"
    );
    assert_eq!(
        agent
            .move_path("/keep/f.txt", "/output/f.txt", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot delete `/keep/f.txt`: `/keep` is mounted rwnd; mounts that grant delete: `/output` (rw)"
    );
    assert_eq!(
        agent
            .move_path("/src/notes.md", "/output/n.md", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot delete `/src/notes.md`: `/src` is mounted ro; mounts that grant delete: `/output` (rw)"
    );
    assert_eq!((fixture.read("keep/f.txt"), fixture.path("out/f.txt").exists()), ("g".to_owned(), false));
    let not_empty = agent.delete("/output/x", false, &Precondition::Any).unwrap_err();
    assert_eq!(not_empty.hint(), Some(Hint::Recursive));
    assert_eq!(
        not_empty.to_string(),
        "`/output/x` is a directory that is not empty; ask for a recursive delete to delete it with its contents"
    );
    assert!(fixture.path("out/x/y").is_dir(), "the refused delete kept the directory");
    assert_eq!(agent.delete("/output/x", true, &Precondition::Any).unwrap().to_text(), "deleted directory `/output/x`");
    assert!(!fixture.path("out/x").exists());
    assert_eq!(
        agent.delete("/output", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/output`: it is a mount root"
    );
}

#[test]
fn listing_tree_and_name_search() {
    let (fixture, registry) = setup();
    let agent = registry.agent();
    assert_eq!(agent.list("/src").unwrap().to_text(), "[FILE] lines.txt\n[FILE] notes.md\n[DIR] src\n");
    assert_eq!(agent.list("/").unwrap().to_text(), "[DIR] keep\n[DIR] output\n[DIR] src\n");
    let tree = agent.tree("/src", None, &[]).unwrap();
    assert_eq!(tree.to_text(), "/src/\n  lines.txt\n  notes.md\n  src/\n    lib.rs\n    main.rs\n");
    let shallow = agent.tree("/src", Some(1), &["*.md".into()]).unwrap();
    assert_eq!(shallow.to_text(), "/src/\n  lines.txt\n  src/\n");
    let found = agent.search_files("/src", "*.rs", &[]).unwrap();
    assert_eq!(found.to_text(), "/src/src/lib.rs\n/src/src/main.rs\n");
    let by_path = agent.search_files("/src", "src/m*", &[]).unwrap();
    assert_eq!(by_path.to_text(), "/src/src/main.rs\n");
    let text = format!("{}{}{}", tree.to_text(), found.to_text(), agent.list("/src").unwrap().to_text());
    assert_no_leak(&fixture, &registry, &text);
}

#[test]
fn bounded_listing_says_how_to_narrow() {
    let fixture = Fixture::new();
    for index in 0..30 {
        fixture.file(&format!("data/f{index:02}"), "");
    }
    let mut limits = Limits::default();
    limits.entries = 10;
    let registry = MountRegistry::builder()
        .mount(fixture.spec("data", "/src", "ro"))
        .limits(limits)
        .build(vfs::ambient_authority())
        .unwrap();
    let listing = registry.agent().list("/src").unwrap();
    assert_eq!(listing.entries.len(), 10);
    assert!(listing.to_text().ends_with("[truncated: showing 10 of 30 entries; narrow with a search of names]\n"));
    assert_eq!(listing.agent_text().hints().collect::<Vec<_>>(), [Hint::Truncated(Operation::List)]);
    let tree = registry.agent().tree("/src", None, &[]).unwrap();
    assert!(tree.truncated);
}

/// Sorted by size, the largest are picked among eight times the entries a listing returns,
/// not among the first names alone; past that, the answer says among how many. (A red team
/// listed 200,001 entries by size and saw 2,000 empty files: the largest was never shown.)
#[test]
fn a_listing_by_size_picks_the_largest_among_more_than_it_shows() {
    let fixture = Fixture::new();
    for index in 0..30 {
        fixture.file(&format!("data/some/f{index:02}"), &"x".repeat(index));
    }
    for index in 0..50 {
        fixture.file(&format!("data/many/f{index:02}"), &"x".repeat(index));
    }
    let mut limits = Limits::default();
    limits.entries = 5;
    let registry = MountRegistry::builder()
        .mount(fixture.spec("data", "/src", "ro"))
        .limits(limits)
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let names =
        |listing: &vfs::SizedListing| listing.entries.iter().map(|entry| entry.name.clone()).collect::<Vec<_>>();
    let some = agent.list_with_sizes("/src/some", vfs::SortBy::Size).unwrap();
    assert_eq!(names(&some), ["f29", "f28", "f27", "f26", "f25"]);
    assert_eq!((some.total, some.truncated, some.sorted_among), (30, true, None));
    let many = agent.list_with_sizes("/src/many", vfs::SortBy::Size).unwrap();
    assert_eq!(names(&many), ["f39", "f38", "f37", "f36", "f35"]);
    assert_eq!((many.total, many.truncated, many.sorted_among), (50, true, Some(40)));
    assert!(
        many.agent_text().to_string().ends_with(
            "[sorted by size among the first 40 of 50 entries by name; the largest may be among the others]\n"
        ),
        "{}",
        many.agent_text()
    );
    let by_name = agent.list_with_sizes("/src/many", vfs::SortBy::Name).unwrap();
    assert_eq!(names(&by_name), ["f00", "f01", "f02", "f03", "f04"]);
    assert_eq!(by_name.sorted_among, None);
}

#[test]
fn grep_honours_gitignore_and_skips_binary() {
    let (fixture, registry) = setup();
    fixture.file("data/.gitignore", "ignored/\n*.log\n");
    fixture.file("data/ignored/hit.txt", "hello ignored\n");
    fixture.file("data/debug.log", "hello log\n");
    std::fs::write(fixture.path("data/bin.dat"), b"hello\0binary").unwrap();
    let agent = registry.agent();
    let request = GrepRequest { pattern: "hello".into(), path: Some("/src".into()), ..GrepRequest::default() };
    let result = agent.grep(&request).unwrap();
    assert_eq!(
        result.to_text(),
        "/src/notes.md:2:hello world\n/src/src/lib.rs:1:pub fn hello() {}\n/src/src/main.rs:2:    println!(\"hello\");\n"
    );
    let request = GrepRequest {
        pattern: "HELLO".into(),
        case_insensitive: true,
        include: Some("*.rs".into()),
        context: Some(1),
        max_results: Some(1),
        ..GrepRequest::default()
    };
    let result = agent.grep(&request).unwrap();
    assert_eq!(result.matches, 1);
    assert!(result.truncated);
    assert_eq!(result.lines[0].text, "pub fn hello() {}");
    assert_eq!(result.agent_text().hints().collect::<Vec<_>>(), [Hint::Truncated(Operation::Grep)]);
    let literal = GrepRequest { pattern: "println!(".into(), literal: true, ..GrepRequest::default() };
    assert_eq!(agent.grep(&literal).unwrap().matches, 1);
    let bad = GrepRequest { pattern: "(".into(), ..GrepRequest::default() };
    assert_eq!(agent.grep(&bad).unwrap_err().hint(), Some(Hint::Literal));
    assert_eq!(
        agent.grep(&bad).unwrap_err().to_string(),
        "`(` is not a valid regular expression; ask for a literal search to search for the text as written"
    );
}

/// A limit reached in the last file searched is known to have cut the search when that file
/// holds more matches (each file is searched for one more), and not when it holds exactly
/// that many; the context shown is the returned matches' own, never that of a match cut.
#[test]
fn grep_says_it_was_cut_when_the_limit_falls_in_the_last_file() {
    let (fixture, registry) = setup();
    let lines: Vec<String> = (1..=10).map(|index| format!("a{index}\nfiller {index}\n")).collect();
    let lines = lines.concat();
    fixture.file("data/only/ten.txt", &lines);
    fixture.file("data/exact/five.txt", "a1\na2\na3\na4\na5\n");
    let agent = registry.agent();
    let grep = |path: &str, max: usize, context: usize| {
        let request = GrepRequest {
            pattern: "^a".into(),
            path: Some(path.into()),
            max_results: Some(max),
            context: Some(context),
            ..GrepRequest::default()
        };
        agent.grep(&request).unwrap()
    };
    let cut = grep("/src/only", 5, 0);
    assert_eq!((cut.matches, cut.truncated), (5, true));
    assert_eq!(
        cut.to_text(),
        "/src/only/ten.txt:1:a1\n/src/only/ten.txt:3:a2\n/src/only/ten.txt:5:a3\n/src/only/ten.txt:7:a4\n/src/only/ten.txt:9:a5\n[truncated at 5 matches; narrow it with a deeper path, a glob of names or a more specific pattern, or ask for more matches]\n"
    );
    // The same file named itself, and with context: the fifth match's line after is its own;
    // none of the sixth's.
    let cut = grep("/src/only/ten.txt", 5, 1);
    assert_eq!((cut.matches, cut.truncated), (5, true));
    let last: Vec<(u64, bool)> = cut.lines.iter().rev().take(3).map(|line| (line.line, line.is_match)).collect();
    assert_eq!(last, [(10, false), (9, true), (8, false)]);
    let cut = grep("/src/only/ten.txt", 5, 2);
    let last: Vec<(u64, bool)> = cut.lines.iter().rev().take(3).map(|line| (line.line, line.is_match)).collect();
    assert_eq!(last, [(10, false), (9, true), (8, false)], "line 11, before the sixth match, is not shown");
    // Matches five lines apart: the line before the sixth is context of none returned.
    let apart: Vec<String> = (1..=10).map(|index| format!("a{index}\n.\n.\n.\n.\n")).collect();
    let apart = apart.concat();
    fixture.file("data/apart/f.txt", &apart);
    let cut = grep("/src/apart", 5, 1);
    let last: Vec<(u64, bool)> = cut.lines.iter().rev().take(3).map(|line| (line.line, line.is_match)).collect();
    assert_eq!(last, [(22, false), (21, true), (20, false)], "line 25, before the sixth match, is not shown");
    // Exactly as many as asked: all of them, not cut.
    let whole = grep("/src/exact", 5, 0);
    assert_eq!((whole.matches, whole.truncated), (5, false));
    assert!(!whole.to_text().contains("truncated"));
}

/// A tree deeper than a walk goes (32 levels) is said to be: `search_files`, `grep` and
/// `directory_tree` count the directories they did not enter, call themselves truncated and
/// say where to look instead. (Before, the deeper files were left out of a result that said it
/// was whole.) A depth the caller chose is no cut.
#[test]
fn walks_say_when_the_tree_goes_deeper_than_they_do() {
    let (fixture, registry) = setup();
    let mut at = String::from("data/t");
    for level in 1..=40 {
        at.push_str("/d");
        fixture.file(&format!("{at}/leaf{level:02}.txt"), "needle\n");
    }
    let agent = registry.agent();
    let note = |(done, verb): (&str, &str)| {
        format!(
            "[1 directory lies deeper than a walk goes (32 levels below where it starts), not {done}; {verb} from a path inside it to see what it holds]\n"
        )
    };
    let found = agent.search_files("/src/t", "leaf*", &[]).unwrap();
    assert_eq!((found.matches.len(), found.deeper, found.truncated), (31, 1, true));
    assert!(
        found.to_text().ends_with(&format!("/leaf01.txt\n{}", note(("searched", "search")))),
        "{}",
        found.to_text()
    );

    let request = GrepRequest { pattern: "needle".into(), path: Some("/src/t".into()), ..GrepRequest::default() };
    let grepped = agent.grep(&request).unwrap();
    assert_eq!((grepped.matches, grepped.deeper, grepped.truncated), (31, 1, true));
    assert!(grepped.to_text().ends_with(&format!("/leaf01.txt:1:needle\n{}", note(("searched", "search")))));

    let tree = agent.tree("/src/t", None, &[]).unwrap();
    assert_eq!((tree.deeper, tree.truncated), (1, true));
    assert!(tree.to_text().ends_with(&note(("listed", "list"))), "{}", tree.to_text());
    let shallow = agent.tree("/src/t", Some(3), &[]).unwrap();
    assert_eq!((shallow.deeper, shallow.truncated), (0, false));
    let asked = agent.tree("/src/t", Some(32), &[]).unwrap();
    assert_eq!((asked.deeper, asked.truncated), (0, false), "32 levels asked for are the answer");
    // From above the mounts too: the bound is the same, one level of it spent on the mount.
    let from_top = agent.tree("/", None, &[]).unwrap();
    assert_eq!((from_top.deeper, from_top.truncated), (1, true));
    assert!(from_top.to_text().ends_with(&note(("listed", "list"))), "{}", from_top.to_text());
    // Cut by the limit as well: both are said.
    let request = GrepRequest { max_results: Some(3), ..request.clone() };
    let both = agent.grep(&request).unwrap();
    assert_eq!((both.matches, both.deeper, both.truncated), (3, 1, true));
    assert!(
        both.to_text().ends_with(&format!(
            "{}[truncated at 3 matches; narrow it with a deeper path, a glob of names or a more specific pattern, or ask for more matches]\n",
            note(("searched", "search"))
        )),
        "{}",
        both.to_text()
    );

    // An empty directory at the bound holds nothing left out.
    fixture.mkdir(&format!("data/e{}", "/d".repeat(32)));
    let found = agent.search_files("/src/e", "*", &[]).unwrap();
    assert_eq!((found.matches.len(), found.deeper, found.truncated), (32, 0, false));
    // From inside, the rest is there.
    let deep = format!("/src/{}", &at["data/".len()..at.len() - "/d".len() * 8]);
    let found = agent.search_files(&deep, "leaf*", &[]).unwrap();
    assert_eq!((found.matches.len(), found.deeper, found.truncated), (9, 0, false));
}

#[test]
fn file_info_reports_rights_and_version() {
    let (_fixture, registry) = setup();
    let agent = registry.agent();
    let info = agent.info("/src/notes.md").unwrap();
    assert_eq!((info.kind, info.size, info.rights), ("file", 20, "ro"));
    assert_eq!(info.version.as_deref().map(str::len), Some(16));
    let directory = agent.info("/output").unwrap();
    assert_eq!((directory.kind, directory.rights, directory.version), ("directory", "rw", None));
}

#[test]
fn concurrent_guarded_edits_lose_no_update() {
    let (fixture, registry) = setup();
    fixture.file("out/counter.txt", "0");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let agent = registry.agent();
            std::thread::spawn(move || {
                let mut done = 0;
                while done < 25 {
                    let read = agent.read_text("/output/counter.txt", &ReadWindow::default()).unwrap();
                    let next = read.content.parse::<u64>().unwrap() + 1;
                    let options = Precondition::Version(read.version.clone().unwrap());
                    match agent.write("/output/counter.txt", &next.to_string(), &options) {
                        Ok(_) => done += 1,
                        Err(error) if error.kind() == ErrorKind::VersionMismatch => {}
                        Err(error) => panic!("only a version conflict may be retried: {error}"),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(fixture.read("out/counter.txt"), "100");
}

#[test]
fn decide_says_which_rule_decided() {
    let fixture = Fixture::new();
    fixture.mkdir("work/vendor");
    let spec = format!("{}:/work:rw;vendor:ro", fixture.path("work").display()).parse().unwrap();
    let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
    let decision = registry.decide("/work/a/../vendor/x", vfs::Access::Read).unwrap();
    assert_eq!(decision.path.as_str(), "/work/vendor/x");
    assert_eq!(
        (decision.scope.as_str(), decision.rights, decision.rule),
        ("/work/vendor", vfs::Rights::ReadOnly, vfs::DecidedBy::Override)
    );
    let denied = registry.decide("/work/vendor/x", vfs::Access::Write).unwrap_err();
    assert_eq!(
        denied.to_string(),
        "cannot write `/work/vendor/x`: `/work/vendor` is mounted ro; mounts that grant write: `/work` (rw)"
    );
    let mount = registry.decide("/work/b", vfs::Access::Delete).unwrap();
    assert_eq!(mount.rule, vfs::DecidedBy::MountRights);
}

#[test]
fn prompt_table_lists_agent_facing_mounts_and_overrides() {
    let fixture = Fixture::new();
    fixture.mkdir("work/vendor");
    fixture.mkdir("logs");
    let spec = format!("{}:/work:rw;vendor:ro", fixture.path("work").display()).parse().unwrap();
    let registry = MountRegistry::builder()
        .mount(spec)
        .internal(fixture.spec("logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    assert_eq!(
        registry.prompt_table(),
        "## Available File Mounts\n\n| mount | rights | access |\n|---|---|---|\n| /work | rw | read, write, create, delete |\n| /work/vendor | ro | read only |\n"
    );
}

#[test]
fn tree_and_name_search_work_from_the_virtual_root() {
    let (_fixture, registry) = setup();
    let agent = registry.agent();
    assert_eq!(agent.tree("/", Some(1), &[]).unwrap().to_text(), "/\n  keep/\n  output/\n  src/\n");
    assert_eq!(
        agent.tree("/", Some(2), &[]).unwrap().to_text(),
        "/\n  keep/\n  output/\n  src/\n    lines.txt\n    notes.md\n    src/\n"
    );
    assert_eq!(agent.search_files("/", "*.rs", &[]).unwrap().to_text(), "/src/src/lib.rs\n/src/src/main.rs\n");
}

#[test]
fn temporary_files_are_never_shown() {
    let (fixture, registry) = setup();
    fixture.file("out/.vfs-tmp-0123456789abcdef", "half");
    fixture.file("out/real.txt", "whole");
    let agent = registry.agent();
    assert_eq!(agent.list("/output").unwrap().to_text(), "[FILE] real.txt\n");
    assert_eq!(
        agent.read_text("/output/.vfs-tmp-0123456789abcdef", &ReadWindow::default()).unwrap_err().to_string(),
        "`/output/.vfs-tmp-0123456789abcdef` does not exist"
    );
    assert_eq!(agent.search_files("/output", "*", &[]).unwrap().to_text(), "/output/real.txt\n");
}

/// A write cut short by a crash leaves its temporary file (vfs's reserved prefix, never shown):
/// a recursive delete removes it with the tree, read before delete or not, instead of finding
/// the directory not empty and answering "changed" however often it is tried. A delete without
/// `recursive` leaves it, and says the directory is not empty.
#[test]
fn a_recursive_delete_removes_stale_temporary_files() {
    let (fixture, registry) = setup();
    fixture.file("out/d/a.txt", "a");
    fixture.file("out/d/.vfs-tmp-0123456789abcdef", "half");
    fixture.file("out/d/e/.vfs-tmp-fedcba9876543210", "half");
    fixture.file("out/f/.vfs-tmp-00000000000000aa", "half");
    let agent = registry.agent();
    assert_eq!(agent.list("/output/d").unwrap().to_text(), "[FILE] a.txt\n[DIR] e\n");
    let version = agent.info("/output/d/a.txt").unwrap().version.unwrap();
    let seen = |path: &vfs::VirtualPath| {
        if path.as_str() == "/output/d/a.txt" { Precondition::Version(version.clone()) } else { Precondition::Absent }
    };
    assert_eq!(agent.delete_seen("/output/d", true, &seen).unwrap().to_text(), "deleted directory `/output/d`");
    assert!(!fixture.path("out/d").exists());
    assert_eq!(
        agent.delete("/output/f", false, &Precondition::Any).unwrap_err().to_string(),
        "`/output/f` is a directory that is not empty; ask for a recursive delete to delete it with its contents"
    );
    assert_eq!(agent.delete("/output/f", true, &Precondition::Any).unwrap().to_text(), "deleted directory `/output/f`");
    assert!(!fixture.path("out/f").exists());
}

#[test]
fn directory_depth_is_bounded_on_creation() {
    let (_fixture, registry) = setup();
    let deep = format!("/output/{}", "d/".repeat(300));
    assert_eq!(
        registry.agent().create_directory(&deep).unwrap_err().to_string(),
        format!("`{}`: vfs creates directories at most 256 levels deep", deep.trim_end_matches('/'))
    );
}

/// As root (a container's vfs over a project), what vfs makes is the project's: a new file,
/// a new directory and the parents a write makes take the owner and group of the directory
/// they are made in, and a replaced file keeps its own. What an undo puts back of a removed
/// file or directory stays root's: it was someone's, the image does not say whose, and the
/// directory's owner may not be allowed to read it (a file of another user's, mode 0600).
#[test]
fn as_root_what_is_made_takes_the_owner_of_the_directory_it_is_made_in() {
    use std::os::unix::fs::{MetadataExt as _, chown};
    if !rustix::process::geteuid().is_root() {
        #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
        {
            eprintln!("SKIPPED: giving a file another owner needs root");
        }
        return;
    }
    let fixture = Fixture::new();
    let project = fixture.mkdir("project");
    chown(&project, Some(4321), Some(8765)).unwrap();
    fixture.file("project/old.txt", "old\n");
    chown(fixture.path("project/old.txt"), Some(1111), Some(2222)).unwrap();
    let registry =
        MountRegistry::builder().mount(fixture.spec("project", "/w", "rw")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    agent.write("/w/new.txt", "new\n", &Precondition::Absent).unwrap();
    agent.write("/w/deep/er/file.txt", "deep\n", &Precondition::Absent).unwrap();
    agent.create_directory("/w/made/inner").unwrap();
    agent.restore_directory("/w/restored", 0o750).unwrap();
    agent.restore("/w/secret.txt", b"secret\n", 0o600, &Precondition::Absent).unwrap();
    let version = agent.info("/w/old.txt").unwrap().version.unwrap();
    agent.write("/w/old.txt", "replaced\n", &Precondition::Version(version)).unwrap();
    let owner = |relative: &str| {
        let metadata = std::fs::symlink_metadata(fixture.path(relative)).unwrap();
        (metadata.uid(), metadata.gid())
    };
    for made in ["new.txt", "deep", "deep/er", "deep/er/file.txt", "made", "made/inner"] {
        assert_eq!(owner(&format!("project/{made}")), (4321, 8765), "{made}");
    }
    for restored in ["restored", "secret.txt"] {
        assert_eq!(owner(&format!("project/{restored}")), (0, 0), "{restored}");
    }
    assert_eq!(owner("project/old.txt"), (1111, 2222));
    assert_eq!(fixture.read("project/old.txt"), "replaced\n");
}

/// As root, a file moved to another file system (a copy, then a delete) keeps its owner and
/// group, as the rename it stands for would: it is not given to the destination directory's
/// owner, who may not be allowed to read it.
#[test]
fn as_root_a_file_moved_to_another_file_system_keeps_its_owner() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, chown};
    if !rustix::process::geteuid().is_root() {
        #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
        {
            eprintln!("SKIPPED: giving a file another owner needs root");
        }
        return;
    }
    let fixture = Fixture::new();
    let Ok(elsewhere) = tempfile::tempdir_in("/dev/shm") else {
        #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
        {
            eprintln!("SKIPPED: no /dev/shm for a second file system");
        }
        return;
    };
    let project = fixture.mkdir("project");
    if std::fs::metadata(&project).unwrap().dev() == std::fs::metadata(elsewhere.path()).unwrap().dev() {
        #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
        {
            eprintln!("SKIPPED: /dev/shm is on the fixture's file system here");
        }
        return;
    }
    chown(&project, Some(4321), Some(8765)).unwrap();
    let secret = fixture.file("project/bob.txt", "bob's\n");
    chown(&secret, Some(2000), Some(2000)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    chown(elsewhere.path(), Some(4321), Some(8765)).unwrap();
    let spec: vfs::MountSpec = format!("{}:/o:rw", elsewhere.path().display()).parse().unwrap();
    let registry = MountRegistry::builder()
        .mount(fixture.spec("project", "/w", "rw"))
        .mount(spec)
        .build(vfs::ambient_authority())
        .unwrap();
    registry.agent().move_path("/w/bob.txt", "/o/bob.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    let moved = std::fs::metadata(elsewhere.path().join("bob.txt")).unwrap();
    assert_eq!((moved.uid(), moved.gid(), moved.mode() & 0o777), (2000, 2000, 0o600));
    assert_eq!(std::fs::read_to_string(elsewhere.path().join("bob.txt")).unwrap(), "bob's\n");
    assert!(!secret.exists());
}
