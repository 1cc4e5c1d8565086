//! The journal's records on disk: images kept by hard link, one intent before each change,
//! and what a process that stops in the middle of a call leaves (an incomplete entry that undo
//! skips with a note; nothing half-restored).
#![expect(clippy::disallowed_methods, reason = "fixture: trees and the journal's files on disk")]
#![expect(clippy::disallowed_types, reason = "fixture: the journal's lock and log, held as another process would")]

mod common;

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use serde_json::{Value, json};
use vfs::Precondition;
use vfs_host::{EntryState, LaunchOptions};

fn launch(base: &Path) -> vfs_host::Launch {
    launch_with(base, &[])
}

fn launch_with(base: &Path, more: &[String]) -> vfs_host::Launch {
    vfs_host::compose(&options(base, more), vfs::ambient_authority()).unwrap()
}

/// A launch of `/w` with a journal bounded to `bound` bytes (its log and its images): several
/// of them on one `base` share the journal, as two stdio servers on one project do.
fn launch_bounded(base: &Path, bound: u64) -> vfs_host::Launch {
    let options = LaunchOptions { journal_max_bytes: Some(bound), ..options(base, &[]) };
    vfs_host::compose(&options, vfs::ambient_authority()).unwrap()
}

/// `/w` (read-write, its directory made) and `more` mounts, with a journal, without
/// read-before-edit.
fn options(base: &Path, more: &[String]) -> LaunchOptions {
    std::fs::create_dir_all(base.join("w")).unwrap();
    let mut mounts = vec![format!("{}:/w:rw", base.join("w").display())];
    mounts.extend_from_slice(more);
    LaunchOptions {
        mounts,
        journal: Some(base.join("journal")),
        no_read_before_edit: true,
        current_dir: base.to_path_buf(),
        ..LaunchOptions::default()
    }
}

/// The journal's log, a JSON value per line.
fn log_lines(base: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(base.join("journal/journal.jsonl")).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

fn call(tools: &vfs_host::ToolService, tool: &str, arguments: &Value) -> String {
    let Value::Object(arguments) = arguments.clone() else { unreachable!() };
    let output = tools.call(tool, Some(arguments)).unwrap();
    assert!(!output.is_error, "{tool}: {}", output.text);
    output.text
}

#[test]
fn a_replaced_file_is_kept_by_a_link_to_its_own_inode_and_its_call_has_an_intent_and_an_entry() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    std::fs::write(base.path().join("w/a.txt"), "before\n").unwrap();
    let inode = std::fs::metadata(base.path().join("w/a.txt")).unwrap().ino();
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));

    let lines = log_lines(base.path());
    let keys: Vec<&str> =
        lines.iter().map(|line| if line.get("intent").is_some() { "intent" } else { "entry" }).collect();
    assert_eq!(keys, ["intent", "entry"]);
    assert_eq!(lines[0]["call"], lines[1]["call"]);
    assert_eq!((&lines[0]["operation"], &lines[0]["paths"]), (&json!("write"), &json!(["/w/a.txt"])));
    let name = lines[1]["images"][0].as_str().unwrap();
    assert_eq!(lines[0]["images"], json!([name]));
    let image = base.path().join("journal/images").join(name);
    assert_eq!(std::fs::metadata(&image).unwrap().ino(), inode, "the old inode itself, not a copy");
    assert_eq!(std::fs::read(&image).unwrap(), b"before\n");

    let entries = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority()).unwrap().entries();
    assert_eq!(entries.all().len(), 1);
    assert_eq!(entries.state(&entries.all()[0]), EntryState::Undoable);
}

/// A recursive delete of an object directory whose copies (made by the store) would pass the
/// journal's bound makes none: the delete is journaled as not undoable. One within the bound
/// is kept whole and undoable.
#[test]
fn an_object_tree_whose_copies_would_pass_the_journals_bound_is_not_undoable() {
    let base = tempfile::tempdir().unwrap();
    let bound = vfs_host::MIN_MAX_BYTES;
    let options = LaunchOptions {
        journal_max_bytes: Some(bound),
        ..options(base.path(), &["memory://journal-trees:/m:rw".to_owned()])
    };
    let launch = vfs_host::compose(&options, vfs::ambient_authority()).unwrap();
    let tools = launch.tools(None);
    let content = "x".repeat(usize::try_from(bound / 3).unwrap());
    for (tree, files) in [("within", 2), ("past", 4)] {
        for file in 0..files {
            let path = format!("/m/{tree}/{file}.txt");
            call(&tools, "write_file", &json!({ "path": path, "content": content }));
        }
    }
    call(&tools, "delete_file", &json!({ "path": "/m/within", "recursive": true }));
    call(&tools, "delete_file", &json!({ "path": "/m/past", "recursive": true }));
    let entries = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority()).unwrap().entries();
    let deletes: Vec<(String, String)> = entries
        .all()
        .iter()
        .filter(|entry| entry.operation == "remove")
        .map(|entry| (entry.paths.join(" "), entries.state_text(entry)))
        .collect();
    assert_eq!(
        deletes,
        [("/m/within".to_owned(), "undoable".to_owned()), ("/m/past".to_owned(), "not undoable".to_owned())]
    );
}

/// A launch of `/w` whose journal has the least bound, and one entry: `/w/a.txt` replaced
/// (its image 7 bytes).
fn at_the_least_bound_with_one_entry(base: &Path) -> (vfs_host::Launch, vfs_host::ToolService) {
    let launch = launch_bounded(base, vfs_host::MIN_MAX_BYTES);
    let tools = launch.tools(None);
    std::fs::write(base.join("w/a.txt"), "before\n").unwrap();
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));
    (launch, tools)
}

/// A change whose image alone passes the journal's bound (a directory deleted by a move into
/// the journal, which costs nothing to keep) is dropped at once, and alone: the older entries
/// it cannot make room for stay undoable.
#[test]
fn an_image_larger_than_the_bound_is_dropped_alone() {
    let base = tempfile::tempdir().unwrap();
    let (_launch, tools) = at_the_least_bound_with_one_entry(base.path());
    std::fs::create_dir(base.path().join("w/t")).unwrap();
    for file in 0..3 {
        std::fs::write(base.path().join(format!("w/t/{file}.txt")), vec![b'x'; 100 * 1024]).unwrap();
    }
    call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    let states = states_of(base.path());
    assert_eq!(states, [("/w/a.txt".to_owned(), "undoable".to_owned()), ("/w/t".to_owned(), "dropped".to_owned())]);
    assert_eq!(image_bytes(base.path()), 7, "the image of a.txt alone");
}

/// A file whose image alone passes what the journal keeps beside its compacted log (192 KiB at
/// the least bound) is not kept: its change is `not undoable`, and its answer says so (red
/// team: a delete of a 600 KB file was answered as undoable, then dropped at once).
#[test]
fn a_file_larger_than_the_journal_keeps_is_not_undoable_and_its_answer_says_so() {
    let base = tempfile::tempdir().unwrap();
    let (_launch, tools) = at_the_least_bound_with_one_entry(base.path());
    std::fs::write(base.path().join("w/big.bin"), vec![b'b'; 600 * 1024]).unwrap();
    std::fs::write(base.path().join("w/mid.bin"), vec![b'm'; 200 * 1024]).unwrap();
    let why = "it cannot be undone: the journal of changes could keep no copy of";
    assert_eq!(
        call(&tools, "delete_file", &json!({ "path": "/w/big.bin" })),
        format!("deleted file `/w/big.bin`; {why} it (larger than its size bound allows)")
    );
    let replaced = call(&tools, "write_file", &json!({ "path": "/w/mid.bin", "content": "m\n", "overwrite": true }));
    assert!(replaced.ends_with(&format!("; {why} what it replaced (larger than its size bound allows)")), "{replaced}");
    let states = states_of(base.path());
    let state = |path: &str, state: &str| (path.to_owned(), state.to_owned());
    assert_eq!(
        states,
        [state("/w/a.txt", "undoable"), state("/w/big.bin", "not undoable"), state("/w/mid.bin", "not undoable")]
    );
    assert_eq!(image_bytes(base.path()), 7, "the image of a.txt alone");
}

/// A change whose image fits the bound beside the log as compacted, but not beside the log as
/// it is (long with another process's lines, past its own bound, not compacted yet), cannot be
/// kept now: it is dropped alone, and the older entries, which dropping would not have made
/// room for it, stay undoable.
#[test]
fn an_image_that_does_not_fit_beside_a_long_log_is_dropped_alone() {
    let base = tempfile::tempdir().unwrap();
    let (_launch, tools) = at_the_least_bound_with_one_entry(base.path());
    // Another process's lines: 100 KiB of calls it settled (its log's bound, a quarter of
    // the journal's, is 64 KiB; so the least the log takes is well under this).
    let mut lines = String::new();
    while lines.len() < 100 * 1024 {
        lines.push_str(&format!("{}\n", json!({ "settled": format!("theirs-{}", lines.len()) })));
    }
    let mut log = std::fs::OpenOptions::new().append(true).open(base.path().join("journal/journal.jsonl")).unwrap();
    std::io::Write::write_all(&mut log, lines.as_bytes()).unwrap();
    // 170 KiB: beside 64 KiB of log it fits 256 KiB, beside 100 KiB it does not.
    std::fs::write(base.path().join("w/b.txt"), vec![b'b'; 170 * 1024]).unwrap();
    call(&tools, "write_file", &json!({ "path": "/w/b.txt", "content": "small\n", "overwrite": true }));
    let states = states_of(base.path());
    assert_eq!(states, [("/w/a.txt".to_owned(), "undoable".to_owned()), ("/w/b.txt".to_owned(), "dropped".to_owned())]);
    assert_eq!(image_bytes(base.path()), 7, "the image of a.txt alone");
}

/// A file above the write cap (16 MiB) is not kept: an undo could not write it back. Its
/// overwrite is journaled as `not undoable`, and nothing of it stays in the journal.
#[test]
fn a_file_above_the_write_cap_is_journaled_not_undoable() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    let cap = vfs::Limits::default().write_bytes;
    std::fs::write(base.path().join("w/big.bin"), vec![b'b'; usize::try_from(cap + 1).unwrap()]).unwrap();
    std::fs::write(base.path().join("w/small.bin"), vec![b's'; 10]).unwrap();
    let texts: Vec<String> = ["/w/big.bin", "/w/small.bin"]
        .into_iter()
        .map(|path| call(&tools, "write_file", &json!({ "path": path, "content": "now\n", "overwrite": true })))
        .collect();
    // The answer says which cannot be undone, and why.
    let version =
        |text: &str| text.split("version ").nth(1).unwrap_or_default().split(')').next().unwrap_or_default().to_owned();
    assert_eq!(
        texts,
        [
            format!(
                "replaced `/w/big.bin` (4 bytes, version {}); it cannot be undone: the journal of changes could keep no copy of what it replaced (above the write cap)",
                version(&texts[0])
            ),
            format!("replaced `/w/small.bin` (4 bytes, version {})", version(&texts[1])),
        ]
    );
    let states = states_of(base.path());
    assert_eq!(
        states,
        [("/w/big.bin".to_owned(), "not undoable".to_owned()), ("/w/small.bin".to_owned(), "undoable".to_owned())]
    );
    assert_eq!(image_bytes(base.path()), 10, "the small file's image alone");
}

/// A delete the journal could keep no copy of (a link, a tree holding one) goes through, as
/// the journal's rules say, and its answer says it cannot be undone, and why (it said only
/// "deleted directory", and the agent learnt it at the undo). One that can be undone says
/// nothing more.
#[test]
fn a_delete_that_cannot_be_undone_says_so() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    let w = base.path().join("w");
    std::fs::create_dir_all(w.join("dl")).unwrap();
    std::fs::write(w.join("dl/q.txt"), "q\n").unwrap();
    std::os::unix::fs::symlink("q.txt", w.join("dl/l")).unwrap();
    std::os::unix::fs::symlink("dl/q.txt", w.join("link")).unwrap();
    std::fs::create_dir_all(w.join("plain")).unwrap();
    std::fs::write(w.join("plain/p.txt"), "p\n").unwrap();
    let delete = |path: &str| {
        let Value::Object(arguments) = json!({ "path": path, "recursive": true }) else { unreachable!() };
        let output = tools.call("delete_file", Some(arguments)).unwrap();
        assert!(!output.is_error, "{}", output.text);
        (output.text, output.structured.unwrap())
    };
    assert_eq!(
        delete("/w/dl"),
        (
            "deleted directory `/w/dl`; it cannot be undone: the journal of changes could keep no copy of it (it holds a link or a special file)".to_owned(),
            json!({ "path": "/w/dl", "kind": "directory", "notUndoable": "it holds a link or a special file" })
        )
    );
    assert_eq!(
        delete("/w/link").0,
        "deleted link `/w/link`; it cannot be undone: the journal of changes could keep no copy of it (a link)"
    );
    assert_eq!(
        delete("/w/plain"),
        ("deleted directory `/w/plain`".to_owned(), json!({ "path": "/w/plain", "kind": "directory" }))
    );
    let states: Vec<String> =
        states_of(base.path()).into_iter().map(|(path, state)| format!("{path} {state}")).collect();
    assert_eq!(states, ["/w/dl not undoable", "/w/link not undoable", "/w/plain undoable"]);
}

/// Each entry of the journal at `base`, oldest first: its paths and its state.
fn states_of(base: &Path) -> Vec<(String, String)> {
    let entries = vfs_host::open_journal(&base.join("journal"), vfs::ambient_authority()).unwrap().entries();
    entries.all().iter().map(|entry| (entry.paths.join(" "), entries.state_text(entry))).collect()
}

/// The bytes of the images kept in the journal at `base` (each image a file, by link or copy).
fn image_bytes(base: &Path) -> u64 {
    let images = base.join("journal/images");
    std::fs::read_dir(images).map_or(0, |entries| entries.map(|entry| entry.unwrap().metadata().unwrap().len()).sum())
}

/// The bytes of the journal at `base` on disk: its log's and its images'.
fn journal_bytes(base: &Path) -> u64 {
    image_bytes(base) + std::fs::metadata(base.join("journal/journal.jsonl")).map_or(0, |log| log.len())
}

#[test]
fn two_processes_sharing_a_journal_keep_it_within_its_bound_together() {
    // Two launches on one journal, as two stdio servers on one project are: each replaces its
    // own files (so each keeps images), taking turns. Each must count what the other kept.
    let base = tempfile::tempdir().unwrap();
    let bound = vfs_host::MIN_MAX_BYTES;
    let entry = 45_000u64;
    let open = || launch_bounded(base.path(), bound);
    let (first, second) = (open(), open());
    let tools = [first.tools(None), second.tools(None)];
    for (index, tools) in tools.iter().enumerate() {
        let path = format!("/w/{index}.txt");
        call(tools, "write_file", &json!({ "path": path, "content": "x".repeat(entry as usize) }));
    }
    for round in 0..12u8 {
        for (index, tools) in tools.iter().enumerate() {
            let path = format!("/w/{index}.txt");
            let content = char::from(b'a' + round).to_string().repeat(entry as usize);
            call(tools, "write_file", &json!({ "path": path, "content": content, "overwrite": true }));
            let kept = journal_bytes(base.path());
            assert!(kept <= bound + entry, "round {round}, process {index}: the journal takes {kept} bytes");
        }
    }
    // Both processes' entries are there, the oldest dropped, the newest of each undoable.
    let entries = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority()).unwrap().entries();
    let states: Vec<(String, EntryState)> =
        entries.all().iter().map(|entry| (entry.paths.join(" "), entries.state(entry))).collect();
    assert_eq!(states.len(), 26);
    // 24 replacements kept 45,000 bytes each; 256 KiB hold five of them beside the log (of
    // less than 37,144 bytes), not six.
    let log = std::fs::metadata(base.path().join("journal/journal.jsonl")).unwrap().len();
    assert!(log < 37_144, "{log}");
    let dropped = states.iter().filter(|(_, state)| *state == EntryState::Dropped).count();
    assert_eq!(dropped, 24 - 5, "{states:?}");
    let newest: Vec<&(String, EntryState)> = states.iter().take(2).collect();
    assert!(newest.iter().all(|(_, state)| *state == EntryState::Undoable), "{states:?}");
}

/// The bound is on the journal's bytes on disk, its log's and its images': written long
/// enough for the log to pass a quarter of the bound several times over, the journal never
/// takes more than the bound and one entry (an image, its intent and entry lines); the log is
/// compacted as it grows, the oldest images go, and the newest entry stays undoable.
#[test]
fn a_journal_written_long_stays_within_its_bound_on_disk() {
    let base = tempfile::tempdir().unwrap();
    let bound = vfs_host::MIN_MAX_BYTES;
    let launch = launch_bounded(base.path(), bound);
    let tools = launch.tools(None);
    let (image, lines) = (2_000u64, 2_000u64);
    let mut largest = 0;
    for round in 0..600u32 {
        let content = format!("{round:>width$}", width = usize::try_from(image).unwrap());
        call(
            &tools,
            "write_file",
            &json!({ "path": format!("/w/{}.txt", round % 7), "content": content, "overwrite": true }),
        );
        let taken = journal_bytes(base.path());
        assert!(taken <= bound + image + lines, "round {round}: the journal takes {taken} bytes");
        largest = largest.max(taken);
    }
    // The log was written well past the bound, and compacted back.
    let log = std::fs::metadata(base.path().join("journal/journal.jsonl")).unwrap().len();
    assert!(log <= bound / 2 + lines, "{log}");
    assert!(largest > bound / 2, "{largest}: the bound was never reached");
    let entries = launch.journal().unwrap().entries();
    assert!(entries.all().len() < 600, "the oldest were forgotten");
    assert_eq!(entries.state(entries.all().last().unwrap()), EntryState::Undoable);
}

/// A change whose line alone is longer than the log keeps whole (the removal of a tree of many
/// files: its line names each) is dropped at once, and pushes out no older entry; a line that
/// is JSON but no entry, however long (a damaged log), counts for nothing and goes at the next
/// compaction. Before, either emptied the journal: every older entry dropped, its images
/// removed.
/// The files of a tree of 600 files, with their content (`t\n` and their number).
fn many_files(base: &Path) -> Vec<(std::path::PathBuf, String)> {
    (0..600)
        .map(|index| {
            let directory = base.join(format!("w/t/d{}", index / 100));
            std::fs::create_dir_all(&directory).unwrap();
            let file = directory.join(format!("file-{index}.txt"));
            std::fs::write(&file, format!("t{index}\n")).unwrap();
            (file, format!("t{index}\n"))
        })
        .collect()
}

/// A tree removal's parts name each file of the tree: past 16 KiB they go into a file of
/// `images/` beside the line (before 2026-12-07 the line held them, and one past three
/// quarters of the log's bound, here 600 files at the least bound, about 40,000 at any
/// bound, was dropped as soon as it was made). The line stays short; a start alone keeps
/// the images that file names; the tree is undone whole, and so is its redo, whose 600
/// intents the compaction leaves out once its entry names their images.
#[test]
fn a_tree_removal_of_many_files_keeps_its_parts_beside_its_line_and_is_undone_whole() {
    let base = tempfile::tempdir().unwrap();
    let bound = vfs_host::MIN_MAX_BYTES;
    let files = many_files(base.path());
    {
        let launch = launch_bounded(base.path(), bound);
        let tools = launch.tools(None);
        call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    }
    let removal = log_lines(base.path())
        .into_iter()
        .find(|line| line["operation"] == "remove" && line["id"].is_string())
        .unwrap();
    let aside = format!("{}.{}.0.entry", removal["call"].as_str().unwrap(), removal["id"].as_str().unwrap());
    assert_eq!(
        (&removal["parts"], &removal["images"], &removal["parts_in"]),
        (&json!([]), &json!([aside]), &json!([aside]))
    );
    assert!(removal.to_string().len() < 1024, "{removal}");
    // The next start is alone on the journal: it removes the images no line names.
    let launch = launch_bounded(base.path(), bound);
    assert_eq!(image_names(base.path()).len(), 600 + 1, "the tree's images and the file of parts");
    let states = states_of(base.path());
    assert_eq!(states, [("/w/t".to_owned(), "undoable".to_owned())]);
    let journal = launch.journal().unwrap();
    let agent = launch.registry().agent();
    let undone: Vec<String> = journal
        .entries()
        .all()
        .iter()
        .rev()
        .flat_map(|entry| journal.undo(&agent, entry, "operator", None).0)
        .collect();
    assert_eq!(undone, ["restored /w/t"]);
    for (file, content) in &files {
        assert_eq!(&std::fs::read_to_string(file).unwrap(), content);
    }
    // The redo of the tree (the undo of its undo) goes file by file, an intent each: 150 KB
    // of them, which would push the redo out of the least bound before any compaction.
    drop(launch);
    let launch = launch_bounded(base.path(), 4 * bound);
    let (journal, agent) = (launch.journal().unwrap(), launch.registry().agent());
    let entries = journal.entries();
    let undo = entries.all().iter().find(|entry| entry.undoes.as_deref() == Some(removal["id"].as_str().unwrap()));
    let (lines, clean) = journal.undo(&agent, undo.unwrap(), "operator", None);
    assert!(clean, "{lines:?}");
    assert!(!base.path().join("w/t").exists());
    drop(launch);
    let launch = launch_bounded(base.path(), 4 * bound);
    let log = std::fs::metadata(base.path().join("journal/journal.jsonl")).unwrap().len();
    assert!(log < 8 * 1024, "the redo's intents left out: {log} bytes");
    let entries = launch.journal().unwrap().entries();
    let redo = &entries.all()[entries.all().len() - 1];
    assert_eq!((redo.paths.join(" "), entries.state_text(redo)), ("/w/t".to_owned(), "undoable".to_owned()));
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), redo, "operator", None);
    assert!(clean, "{lines:?}");
    for (file, content) in &files {
        assert_eq!(&std::fs::read_to_string(file).unwrap(), content);
    }
}

/// A process stopped after it wrote a tree removal's file of parts and before its line: the
/// call is incomplete, and a start alone keeps that file and the images it names, as it keeps
/// every image of a call stopped during its change (the file, unnamed, once took them all with
/// it). A file of parts that cannot be read (damaged by hand) makes a start alone sweep
/// nothing, and the undo of its entry fails without restoring anything.
#[test]
fn a_tree_removals_file_of_parts_is_kept_when_its_line_is_missing_and_a_damaged_one_sweeps_nothing() {
    let base = tempfile::tempdir().unwrap();
    many_files(base.path());
    {
        let launch = launch(base.path());
        call(&launch.tools(None), "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    }
    let log = base.path().join("journal/journal.jsonl");
    let whole = std::fs::read_to_string(&log).unwrap();
    let without_entry: String = whole
        .lines()
        .filter(|line| !line.contains("\"parts_in\""))
        .fold(String::new(), |kept, line| kept + line + "\n");
    std::fs::write(&log, &without_entry).unwrap();
    drop(launch(base.path()));
    assert_eq!(image_names(base.path()).len(), 600 + 1, "the stopped call's images and file of parts");
    assert_eq!(states_of(base.path()), [("/w/t".to_owned(), "not undoable (incomplete)".to_owned())]);
    // The entry back, its file of parts damaged.
    std::fs::write(&log, &whole).unwrap();
    let aside = image_names(base.path()).into_iter().find(|name| name.contains(".0.entry")).unwrap();
    let damaged = std::fs::read_to_string(base.path().join("journal/images").join(&aside)).unwrap().replacen(
        "\"entry\":\"",
        "\"entry\":\"x",
        1,
    );
    std::fs::write(base.path().join("journal/images").join(&aside), damaged).unwrap();
    let launch = launch(base.path());
    assert_eq!(image_names(base.path()).len(), 600 + 1, "nothing swept");
    let journal = launch.journal().unwrap();
    let entries = journal.entries();
    let (lines, clean) = journal.undo(&launch.registry().agent(), &entries.all()[0], "operator", None);
    let failed = format!("failed {}: its record in the journal could not be read", entries.all()[0].id);
    assert_eq!((lines, clean), (vec![failed], false));
    assert!(!base.path().join("w/t").exists());
}

/// A tree removal whose parts lie beside its line, dropped by the bound, takes with it the
/// images they name and the file of parts, at once: nothing of it is left in `images/`.
#[test]
fn a_dropped_tree_removal_takes_the_images_its_parts_name() {
    let base = tempfile::tempdir().unwrap();
    many_files(base.path());
    let (_launch, tools) = at_the_least_bound_with_one_entry(base.path());
    call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    assert_eq!(image_names(base.path()).len(), 1 + 600 + 1);
    // 180 KiB more (within what the journal keeps beside its compacted log, 192 KiB): the
    // tree's entry, the oldest but one, and a.txt's go.
    std::fs::write(base.path().join("w/b.txt"), vec![b'b'; 180 * 1024]).unwrap();
    call(&tools, "write_file", &json!({ "path": "/w/b.txt", "content": "small\n", "overwrite": true }));
    let states = states_of(base.path());
    assert_eq!(
        states,
        [
            ("/w/a.txt".to_owned(), "dropped".to_owned()),
            ("/w/t".to_owned(), "dropped".to_owned()),
            ("/w/b.txt".to_owned(), "undoable".to_owned()),
        ]
    );
    assert_eq!(image_bytes(base.path()), 180 * 1024, "b.txt's image alone");
}

/// A damaged log: a line of JSON, no entry, longer than the log's bound, names nothing and is
/// left out at the next start.
#[test]
fn a_line_of_json_that_is_no_entry_and_passes_the_logs_bound_is_left_out() {
    let base = tempfile::tempdir().unwrap();
    let bound = vfs_host::MIN_MAX_BYTES;
    {
        let launch = launch_bounded(base.path(), bound);
        let tools = launch.tools(None);
        std::fs::write(base.path().join("w/a.txt"), "one\n").unwrap();
        call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "two\n", "overwrite": true }));
        call(&tools, "write_file", &json!({ "path": "/w/b.txt", "content": "bee\n" }));
    }
    let log = base.path().join("journal/journal.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!("{}\n", json!({ "pad": "x".repeat(100_000) })));
    std::fs::write(&log, text).unwrap();
    let launch = launch_bounded(base.path(), bound);
    assert!(std::fs::metadata(&log).unwrap().len() < 10_000, "the next start compacted the log");
    for line in log_lines(base.path()) {
        let named = ["id", "intent", "settled"].iter().any(|key| line.get(*key).is_some_and(Value::is_string));
        assert!(named, "a line that names nothing was kept: {line}");
    }
    let journal = launch.journal().unwrap();
    let entries = journal.entries();
    let agent = launch.registry().agent();
    let undone: Vec<String> =
        entries.all().iter().rev().flat_map(|entry| journal.undo(&agent, entry, "operator", None).0).collect();
    assert_eq!(undone, ["removed /w/b.txt", "restored /w/a.txt"]);
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "one\n");
    assert!(!base.path().join("w/b.txt").exists());
}

/// Two sessions of one launch write at once while the log is compacted under them (this
/// process's other calls write on during its compaction) and the bound drops images: every
/// write succeeds, every entry the log keeps undoable still has its images, no image is
/// left that no such entry names, and the journal ends within its bound and one entry.
#[test]
fn two_sessions_writing_through_compactions_keep_every_undoable_entrys_images() {
    let base = tempfile::tempdir().unwrap();
    let bound = vfs_host::MIN_MAX_BYTES;
    let launch = launch_bounded(base.path(), bound);
    let (image, rounds) = (2_000usize, 300u32);
    std::thread::scope(|scope| {
        for session in 0..2 {
            let tools = launch.tools(None);
            scope.spawn(move || {
                for round in 0..rounds {
                    let path = format!("/w/{session}-{}.txt", round % 4);
                    let content = format!("{round:>image$}");
                    call(&tools, "write_file", &json!({ "path": path, "content": content, "overwrite": true }));
                }
            });
        }
    });
    let lines = log_lines(base.path());
    let gone: std::collections::HashSet<&str> =
        lines.iter().filter_map(|line| line.get("dropped").and_then(Value::as_str)).collect();
    let mut named: Vec<String> = lines
        .iter()
        .filter(|line| line.get("parts").is_some() && !gone.contains(line["id"].as_str().unwrap()))
        .flat_map(|line| line["images"].as_array().unwrap().iter().map(|name| name.as_str().unwrap().to_owned()))
        .collect();
    named.sort();
    assert!(named.len() > 10, "{} images kept", named.len());
    assert_eq!(image_names(base.path()), named, "the images on disk are those of the entries kept");
    let taken = journal_bytes(base.path());
    assert!(taken <= bound + image as u64 + 2_000, "the journal takes {taken} bytes");
    // Compacted: the intents of the calls that ended are gone.
    let intents = lines.iter().filter(|line| line.get("intent").is_some()).count();
    assert!(intents < 2 * rounds as usize, "{intents} intents");
}

#[test]
fn two_processes_writing_at_once_into_one_journal_all_succeed_and_end_within_its_bound() {
    // The same two launches, now at once: every write succeeds, and once both are done the
    // images are within the bound and one entry (the last bound applied saw every line).
    let base = tempfile::tempdir().unwrap();
    let (bound, entry) = (vfs_host::MIN_MAX_BYTES, 45_000usize);
    let open = || launch_bounded(base.path(), bound);
    let launches = [open(), open()];
    let written: Vec<usize> = std::thread::scope(|scope| {
        let workers: Vec<_> = launches
            .iter()
            .enumerate()
            .map(|(index, launch)| {
                scope.spawn(move || {
                    let tools = launch.tools(None);
                    let path = format!("/w/{index}.txt");
                    call(&tools, "write_file", &json!({ "path": path, "content": "x".repeat(entry) }));
                    for round in 0..15u8 {
                        let content = char::from(b'a' + round).to_string().repeat(entry);
                        call(&tools, "write_file", &json!({ "path": path, "content": content, "overwrite": true }));
                    }
                    16
                })
            })
            .collect();
        workers.into_iter().map(|worker| worker.join().unwrap()).collect()
    });
    assert_eq!(written, [16, 16]);
    let kept = journal_bytes(base.path());
    assert!(kept <= bound + entry as u64, "the journal takes {kept} bytes");
    let entries = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority()).unwrap().entries();
    assert_eq!(entries.all().len(), 32);
    // Each of the 30 replacements kept one image; those not dropped still have it on the disk,
    // and no dropped one left its image behind (none dropped twice over a kept one).
    let dropped = entries.all().iter().filter(|entry| entries.state(entry) == EntryState::Dropped).count();
    let files = std::fs::read_dir(base.path().join("journal/images")).unwrap().count();
    assert_eq!(files, 30 - dropped, "{dropped} entries dropped");
    assert!(dropped >= 30 - (bound as usize / entry) - 1, "{dropped} entries dropped");
}

#[test]
fn a_process_that_stops_between_a_change_and_its_entry_leaves_an_incomplete_entry_that_undo_skips() {
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("w")).unwrap();
    std::fs::write(base.path().join("w/a.txt"), "before\n").unwrap();
    {
        // The change is made and its intent written; the call's entry never is (the journal
        // writes it when the call ends, and this process "stops" first).
        let launch = launch(base.path());
        launch.registry().agent().write("/w/a.txt", "after\n", &Precondition::Any).unwrap();
    }
    let journal = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority()).unwrap();
    let entries = journal.entries();
    let [entry] = entries.all() else { panic!("{:?}", entries.all()) };
    assert!(entry.incomplete);
    assert_eq!((entry.operation.as_str(), entry.paths.clone()), ("write", vec!["/w/a.txt".to_owned()]));
    assert_eq!(entries.state(entry), EntryState::NotUndoable);
    assert_eq!(entries.state_text(entry), "not undoable (incomplete)");
    let listed = entries.json(entry);
    assert_eq!((&listed["state"], &listed["incomplete"]), (&json!("not undoable"), &json!(true)));

    let launch = launch(base.path());
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), entry, "operator", None);
    assert_eq!(
        lines,
        [format!(
            "skipped {}: not undoable (incomplete: vfs stopped during this change, or could not write its entry; the change may or may not have been made)",
            entry.id
        )]
    );
    assert!(!clean);
    assert_eq!(std::fs::read(base.path().join("w/a.txt")).unwrap(), b"after\n", "nothing restored");
}

#[test]
fn a_change_nobody_began_gets_its_entry_at_the_flush_and_a_call_whose_change_fails_is_settled() {
    let base = tempfile::tempdir().unwrap();
    // A second file system, so that a move of a directory fails after its intent.
    let other = tempfile::tempdir_in("/dev/shm").ok().filter(|other| {
        let device = |path: &Path| std::fs::metadata(path).unwrap().dev();
        device(other.path()) != device(base.path())
    });
    let more: Vec<String> = other.iter().map(|other| format!("{}:/s:rw", other.path().display())).collect();
    let launch = launch_with(base.path(), &more);
    // A change no begun call made (the FUSE view's): its entry is written at the flush.
    launch.registry().agent().write("/w/b.txt", "b\n", &Precondition::Absent).unwrap();
    launch.journal().unwrap().flush();
    let entries = launch.journal().unwrap().entries();
    let [entry] = entries.all() else { panic!("{:?}", entries.all()) };
    assert_eq!((entry.session.as_str(), entry.operation.as_str(), entry.incomplete), ("-", "write", false));

    if other.is_none() {
        #[expect(clippy::print_stderr, reason = "fixture: a skipped part says why")]
        {
            eprintln!("skipped the failed-change part: /dev/shm is not a second file system here");
        }
        return;
    }
    // The move is told as intended, then refused by the store: no change, and the call is
    // settled, so its intent is not taken for a crash.
    std::fs::create_dir_all(base.path().join("w/d")).unwrap();
    let tools = launch.tools(None);
    let Value::Object(arguments) = json!({ "source": "/w/d", "destination": "/s/d" }) else { unreachable!() };
    let output = tools.call("move_file", Some(arguments)).unwrap();
    assert_eq!(
        (output.is_error, output.text.as_str()),
        (true, "cannot move a directory to `/s/d` on another file system; move its files one by one")
    );
    let lines = log_lines(base.path());
    let tail: Vec<(Option<&str>, Option<&str>)> =
        lines[2..].iter().map(|line| (line["operation"].as_str(), line["settled"].as_str())).collect();
    assert_eq!(tail, [(Some("move"), None), (None, lines[2]["call"].as_str())]);
    let entries = launch.journal().unwrap().entries();
    assert_eq!(entries.all().len(), 1, "{:?}", entries.all());

    // A tree on another file system than the journal is copied, not moved, into its image:
    // its delete is undone all the same.
    std::fs::create_dir_all(other.as_ref().unwrap().path().join("tree/sub")).unwrap();
    std::fs::write(other.as_ref().unwrap().path().join("tree/sub/x.txt"), "on tmpfs\n").unwrap();
    call(&tools, "delete_file", &json!({ "path": "/s/tree", "recursive": true }));
    let journal = launch.journal().unwrap();
    let entries = journal.entries();
    let newest = entries.all().last().unwrap();
    assert_eq!((newest.operation.as_str(), entries.state(newest)), ("remove", EntryState::Undoable));
    let (lines, clean) = journal.undo(&launch.registry().agent(), newest, "operator", None);
    assert_eq!((lines, clean), (vec!["restored /s/tree".to_owned()], true));
    assert_eq!(std::fs::read(other.as_ref().unwrap().path().join("tree/sub/x.txt")).unwrap(), b"on tmpfs\n");
}

/// A change nobody began (the view's) is written with the next call's entry, after it, but
/// it was made first, and sorts first: undone newest first, the call's change goes back
/// before the view's, and both are undone cleanly.
#[test]
fn a_change_of_the_views_written_with_a_later_calls_entry_sorts_before_it() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    let journal = launch.journal().unwrap();
    let agent = launch.registry().agent();
    // Many rounds, so that some fall within one millisecond (ids are times first).
    for round in 0..40 {
        let path = format!("/w/a{round}.txt");
        agent.write(&path, "by the view\n", &Precondition::Absent).unwrap();
        call(&tools, "delete_file", &json!({ "path": path }));
        let lines = log_lines(base.path());
        let written: Vec<&str> =
            lines[lines.len() - 2..].iter().map(|line| line["operation"].as_str().unwrap()).collect();
        assert_eq!(written, ["remove", "write"], "round {round}: the view's entry is written second");
        let entries = journal.entries();
        let newest: Vec<&vfs_host::Entry> = entries.undoable_newest(None).into_iter().take(2).collect();
        let order: Vec<&str> = newest.iter().map(|entry| entry.operation.as_str()).collect();
        assert_eq!(order, ["remove", "write"], "round {round}");
        let undone: Vec<String> =
            newest.iter().flat_map(|entry| journal.undo(&agent, entry, "operator", None).0).collect();
        assert_eq!(undone, [format!("restored {path}"), format!("removed {path}")], "round {round}");
        assert!(!base.path().join(&path[1..]).exists());
    }
}

/// A shell's `mv` through the view and a `move_file` of the same file at once: one of them
/// moves it (the other finds it gone), the file is in exactly one place, and the journal's
/// one move entry, undone, puts it back where it was.
#[test]
fn a_shell_mv_beside_move_file_moves_the_file_once_and_its_undo_puts_it_back() {
    if !lane::can_mount() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    let journal = launch.journal().unwrap();
    let mountpoint = tempfile::tempdir().unwrap();
    let view = vfs_fuse::mount(launch.registry(), mountpoint.path(), &vfs_fuse::FuseOptions::default()).unwrap();
    let work = base.path().join("w");
    let (mut by_shell, mut by_tool) = (0, 0);
    for round in 0..40 {
        let content = format!("round {round}\n");
        call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": content, "overwrite": true }));
        let barrier = std::sync::Barrier::new(2);
        let (shell, tool) = std::thread::scope(|scope| {
            let shell = scope.spawn(|| {
                barrier.wait();
                std::fs::rename(mountpoint.path().join("w/a.txt"), mountpoint.path().join("w/b.txt"))
            });
            let tool = scope.spawn(|| {
                barrier.wait();
                let Value::Object(arguments) = json!({ "source": "/w/a.txt", "destination": "/w/c.txt" }) else {
                    unreachable!()
                };
                tools.call("move_file", Some(arguments)).unwrap()
            });
            (shell.join().unwrap(), tool.join().unwrap())
        });
        let moved_to = match (&shell, tool.is_error) {
            (Ok(()), true) => {
                assert_eq!(tool.text, "`/w/a.txt` does not exist", "round {round}");
                by_shell += 1;
                "b.txt"
            }
            (Err(error), false) => {
                assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "round {round}: {error}");
                by_tool += 1;
                "c.txt"
            }
            _ => panic!("round {round}: not exactly one move: the shell's {shell:?}, the tool's {}", tool.text),
        };
        let present: Vec<&str> =
            ["a.txt", "b.txt", "c.txt"].into_iter().filter(|name| work.join(name).exists()).collect();
        assert_eq!(present, [moved_to], "round {round}");
        assert_eq!(std::fs::read_to_string(work.join(moved_to)).unwrap(), content);
        journal.flush();
        let entries = journal.entries();
        let newest = entries.undoable_newest(None)[0];
        assert_eq!(
            (newest.operation.as_str(), newest.paths.clone()),
            ("move", vec!["/w/a.txt".to_owned(), format!("/w/{moved_to}")])
        );
        let (lines, clean) = journal.undo(&launch.registry().agent(), newest, "operator", None);
        assert_eq!((lines, clean), (vec!["restored /w/a.txt".to_owned()], true), "round {round}");
        let present: Vec<&str> =
            ["a.txt", "b.txt", "c.txt"].into_iter().filter(|name| work.join(name).exists()).collect();
        assert_eq!((present, std::fs::read_to_string(work.join("a.txt")).unwrap()), (vec!["a.txt"], content));
    }
    view.unmount().unwrap();
    // How the race went (the tool usually wins: it does not wait on the kernel).
    #[expect(clippy::print_stderr, reason = "fixture: how the race went")]
    {
        eprintln!("the shell moved it {by_shell} times, the tool {by_tool} times");
    }
}

/// The model-based journal lane: random changes through the tools and through a shell using
/// the FUSE view of the same launch, with edits made outside vfs mixed in, then every entry
/// undone, newest first.
mod lane {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};
    use std::sync::mpsc;
    use std::time::Duration;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    const FILES: [&str; 5] = ["a.txt", "b.txt", "d/c.txt", "d/e.txt", "d/f/g.txt"];
    const DIRECTORIES: [&str; 2] = ["d", "d/f"];

    #[derive(Debug, Clone)]
    enum Step {
        Write(usize, u8),
        Edit(usize),
        Mkdir(usize),
        Move(usize, usize),
        Delete(usize),
        DeleteTree(usize),
        /// Another program writes the file (when its directory exists).
        Outside(usize, u8),
        /// A shell's operation through the view.
        Shell(Shell),
    }

    /// What a shell does through the view (`std::fs` on the mount point).
    #[derive(Debug, Clone)]
    enum Shell {
        Write(usize, u8),
        Append(usize, u8),
        Mkdir(usize),
        Rename(usize, usize),
        Remove(usize),
        RemoveTree(usize),
    }

    /// Longest one shell operation may take before the watchdog aborts the view's connection
    /// (which ends every request waiting on it) and fails the case.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn step(outside: bool, shell: bool) -> impl Strategy<Value = Step> {
        let file = || 0..FILES.len();
        let directory = || 0..DIRECTORIES.len();
        let mut steps: Vec<(u32, BoxedStrategy<Step>)> = vec![
            (4, (file(), any::<u8>()).prop_map(|(file, byte)| Step::Write(file, byte)).boxed()),
            (2, file().prop_map(Step::Edit).boxed()),
            (1, directory().prop_map(Step::Mkdir).boxed()),
            (2, (file(), file()).prop_map(|(from, to)| Step::Move(from, to)).boxed()),
            (2, file().prop_map(Step::Delete).boxed()),
            (1, directory().prop_map(Step::DeleteTree).boxed()),
        ];
        if outside {
            steps.push((2, (file(), any::<u8>()).prop_map(|(file, byte)| Step::Outside(file, byte)).boxed()));
        }
        if shell {
            steps.extend([
                (3, (file(), any::<u8>()).prop_map(|(file, byte)| Step::Shell(Shell::Write(file, byte))).boxed()),
                (1, (file(), any::<u8>()).prop_map(|(file, byte)| Step::Shell(Shell::Append(file, byte))).boxed()),
                (1, directory().prop_map(|directory| Step::Shell(Shell::Mkdir(directory))).boxed()),
                (2, (file(), file()).prop_map(|(from, to)| Step::Shell(Shell::Rename(from, to))).boxed()),
                (1, file().prop_map(|file| Step::Shell(Shell::Remove(file))).boxed()),
                (1, directory().prop_map(|directory| Step::Shell(Shell::RemoveTree(directory))).boxed()),
            ]);
        }
        prop::strategy::Union::new_weighted(steps)
    }

    /// Does `shell` through the view mounted at `mountpoint`; refusals and failures are the
    /// shell's to see (the undo below must cope with whatever was made).
    fn shell_apply(mountpoint: &Path, shell: &Shell, index: usize) {
        let file = |file: usize| mountpoint.join("w").join(FILES[file]);
        let directory = |directory: usize| mountpoint.join("w").join(DIRECTORIES[directory]);
        let _ = match *shell {
            Shell::Write(at, byte) => std::fs::write(file(at), format!("s{byte} {index}\n")),
            Shell::Append(at, byte) => {
                use std::io::Write as _;
                #[expect(clippy::disallowed_types, reason = "fixture: a shell's append, through the view")]
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(file(at))
                    .and_then(|mut opened| opened.write_all(format!("a{byte} {index}\n").as_bytes()))
            }
            Shell::Mkdir(at) => std::fs::create_dir_all(directory(at)),
            Shell::Rename(from, to) => std::fs::rename(file(from), file(to)),
            Shell::Remove(at) => std::fs::remove_file(file(at)),
            Shell::RemoveTree(at) => std::fs::remove_dir_all(directory(at)),
        };
    }

    /// [`shell_apply`] on a thread of its own; when it does not return within [`PATIENCE`],
    /// the view's connection is aborted and the case fails.
    fn shell(mountpoint: &Path, shell: &Shell, index: usize) -> Result<(), TestCaseError> {
        let (sender, receiver) = mpsc::channel();
        let (at, what) = (mountpoint.to_owned(), shell.clone());
        std::thread::spawn(move || {
            shell_apply(&at, &what, index);
            let _ = sender.send(());
        });
        if receiver.recv_timeout(PATIENCE).is_err() {
            crate::common::abort(&crate::common::connection(mountpoint));
            return Err(TestCaseError::fail(format!("{shell:?} got no answer from the view within {PATIENCE:?}")));
        }
        Ok(())
    }

    pub(super) fn can_mount() -> bool {
        crate::common::can_mount("the journal's shell lane")
    }

    /// Every file (its permission bits and bytes) and directory (its permission bits, no
    /// bytes) under `root`, by relative path.
    fn snapshot(root: &Path) -> BTreeMap<String, (u32, Option<Vec<u8>>)> {
        use std::os::unix::fs::PermissionsExt as _;
        let mut found = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(directory) = stack.pop() {
            for entry in std::fs::read_dir(&directory).unwrap() {
                let path = entry.unwrap().path();
                let relative = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
                if path.is_dir() {
                    found.insert(relative, (mode, None));
                    stack.push(path);
                } else {
                    found.insert(relative, (mode, Some(std::fs::read(&path).unwrap())));
                }
            }
        }
        found
    }

    /// `path` and its ancestors.
    fn with_ancestors(path: &str) -> Vec<String> {
        let mut all = vec![path.to_owned()];
        let mut rest = path;
        while let Some((parent, _)) = rest.rsplit_once('/') {
            all.push(parent.to_owned());
            rest = parent;
        }
        all
    }

    #[expect(clippy::too_many_lines, reason = "one case of the lane, read top to bottom: act, undo, judge")]
    fn run(steps: &[Step]) -> Result<(), TestCaseError> {
        let base = tempfile::tempdir().unwrap();
        let work = base.path().join("w");
        std::fs::create_dir_all(work.join("d")).unwrap();
        std::fs::write(work.join("a.txt"), "start a\n").unwrap();
        std::fs::write(work.join("d/c.txt"), "start c\n").unwrap();
        // A program, a private file and a private directory: the modes come back too (an
        // agent's writes leave a file without execute bits; a directory put back is made
        // with the umask's mode).
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(work.join("a.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::set_permissions(work.join("d/c.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
            std::fs::set_permissions(work.join("d"), std::fs::Permissions::from_mode(0o750)).unwrap();
        }
        let start = snapshot(&work);
        let launch = super::launch(base.path());
        let tools = launch.tools(None);
        let journal = launch.journal().unwrap();
        // The view, mounted outside the tree (the snapshots walk the disk) when a shell acts.
        let outside_tree = tempfile::tempdir().unwrap();
        let mountpoint: PathBuf = outside_tree.path().to_owned();
        let view = if steps.iter().any(|step| matches!(step, Step::Shell(_))) {
            if !can_mount() {
                return Ok(());
            }
            Some(vfs_fuse::mount(launch.registry(), &mountpoint, &vfs_fuse::FuseOptions::default()).unwrap())
        } else {
            None
        };
        let mut touched: BTreeSet<String> = BTreeSet::new();
        // The content of each path's last outside edit, and the paths an outside edit hit
        // after a change named them (their undo must meet it: a conflict).
        let mut last_outside: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut met: BTreeSet<String> = BTreeSet::new();
        for (index, step) in steps.iter().enumerate() {
            let path = |file: usize| format!("/w/{}", FILES[file]);
            let (tool, arguments) = match step {
                Step::Write(file, byte) => (
                    "write_file",
                    json!({ "path": path(*file), "content": format!("v{byte} {index}\n"), "overwrite": true }),
                ),
                Step::Edit(file) => {
                    ("edit_file", json!({ "path": path(*file), "edits": [{ "oldText": "v", "newText": "e" }] }))
                }
                Step::Mkdir(directory) => {
                    ("create_directory", json!({ "path": format!("/w/{}", DIRECTORIES[*directory]) }))
                }
                Step::Move(from, to) => {
                    ("move_file", json!({ "source": path(*from), "destination": path(*to), "overwrite": true }))
                }
                Step::Delete(file) => ("delete_file", json!({ "path": path(*file) })),
                Step::DeleteTree(directory) => {
                    ("delete_file", json!({ "path": format!("/w/{}", DIRECTORIES[*directory]), "recursive": true }))
                }
                Step::Outside(file, byte) => {
                    let target = work.join(FILES[*file]);
                    if target.parent().unwrap().is_dir() {
                        let content = format!("outside {byte} {index}\n").into_bytes();
                        std::fs::write(&target, &content).unwrap();
                        touched.extend(with_ancestors(FILES[*file]));
                        last_outside.insert(FILES[*file].to_owned(), content);
                        journal.flush();
                        if journal.entries().all().iter().any(|entry| entry.paths.contains(&path(*file))) {
                            met.insert(FILES[*file].to_owned());
                        }
                    }
                    continue;
                }
                Step::Shell(what) => {
                    if let Err(failure) = shell(&mountpoint, what, index) {
                        drop(view);
                        return Err(failure);
                    }
                    continue;
                }
            };
            let Value::Object(arguments) = arguments else { unreachable!() };
            tools.call(tool, Some(arguments)).unwrap();
        }
        if let Some(view) = view {
            view.unmount().unwrap();
        }
        journal.flush();
        // Undo every entry, newest first, as the operator.
        let entries = journal.entries();
        let agent = launch.registry().agent();
        let mut lines = Vec::new();
        // The paths of every entry whose undo met a conflict (a move's conflict names one end,
        // and leaves both).
        let mut conflicts: BTreeSet<String> = BTreeSet::new();
        for entry in entries.undoable_newest(None) {
            let (undone, _) = journal.undo(&agent, entry, "operator", None);
            if undone.iter().any(|line| line.starts_with("conflict ")) {
                conflicts.extend(entry.paths.iter().map(|path| path.trim_start_matches("/w/").to_owned()));
            }
            lines.extend(undone);
        }
        let end = snapshot(&work);
        for line in &lines {
            let known = ["restored /w/", "removed /w/", "conflict /w/"].iter().any(|prefix| line.starts_with(prefix));
            prop_assert!(known, "an undo line that is neither a restore nor a conflict: {line}\n{lines:#?}");
        }
        if touched.is_empty() {
            // Nothing changed behind vfs's back: everything is put back exactly, cleanly.
            prop_assert!(conflicts.is_empty(), "{lines:#?}");
            prop_assert_eq!(&end, &start, "{:#?}", lines);
            return Ok(());
        }
        let related = |path: &str, other: &str| {
            with_ancestors(path).iter().any(|one| one == other) || with_ancestors(other).iter().any(|one| one == path)
        };
        // What differs from the start is what an outside edit touched, or a conflict named.
        for path in start.keys().chain(end.keys()) {
            if start.get(path) != end.get(path) {
                let explained = touched.contains(path) || conflicts.iter().any(|conflict| related(path, conflict));
                prop_assert!(
                    explained,
                    "`{path}` differs from the start: {:?} → {:?}\n{lines:#?}",
                    start.get(path),
                    end.get(path)
                );
            }
        }
        // An outside edit is what stays: every change after it is undone back to it, and a
        // change before it that named its path met it and said so.
        for (path, content) in &last_outside {
            if !conflicts.iter().any(|conflict| related(path, conflict)) {
                prop_assert_eq!(
                    end.get(path).map(|(_, bytes)| bytes.as_ref()),
                    Some(Some(content)),
                    "`{}` lost its outside edit: {:#?}",
                    path,
                    lines
                );
            }
        }
        // (At its path, or at a directory holding it: a tree whose delete took the outside
        // edit into its image, and whose undo then met the tree made again.)
        for path in &met {
            prop_assert!(
                conflicts.iter().any(|conflict| related(path, conflict)),
                "the outside edit of `{path}` was undone over without a conflict: {lines:#?}"
            );
        }
        Ok(())
    }

    fn cases() -> u32 {
        std::env::var("VFS_MODEL_JOURNAL_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(64)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn undoing_every_change_puts_back_the_start_exactly(steps in proptest::collection::vec(step(false, false), 1..25)) {
            run(&steps)?;
        }

        #[test]
        fn with_outside_edits_only_what_they_touched_or_a_conflict_named_differs(steps in proptest::collection::vec(step(true, false), 1..25)) {
            run(&steps)?;
        }

        #[test]
        fn changes_by_tools_and_by_a_shell_through_the_view_are_undone_exactly(steps in proptest::collection::vec(step(false, true), 1..25)) {
            run(&steps)?;
        }

        #[test]
        fn with_a_shell_and_outside_edits_the_outside_edits_stay_and_meet_conflicts(steps in proptest::collection::vec(step(true, true), 1..25)) {
            run(&steps)?;
        }
    }
}

/// The names of the files of the journal's `images/`, sorted.
fn image_names(base: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(base.join("journal/images"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// An image a process made just before it was killed, which no line names: its name begins
/// with a call the log does not know (as an image taken before its change's intent does).
const ORPHAN: &str = "1796417589431-000000ff.1.0";

/// A process that stops leaves images in `images/` that no line names. The next process
/// alone on the journal removes them, and keeps every image a line names and the files of a
/// call whose intent has no entry: a recursive delete that was killed had moved them there,
/// and they may be all that is left of them. The first process is a real one (this test
/// binary, running `a_process_that_stops_in_a_delete`), so that its end lets go of the
/// journal as a process's end does.
#[test]
fn the_images_a_stopped_process_left_unnamed_are_removed_by_the_next_process_alone_on_the_journal() {
    let base = tempfile::tempdir().unwrap();
    let spawning = alone();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_process_that_stops_in_a_delete", "--ignored", "--quiet"])
        .env(STOPPED_BASE, base.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    drop(spawning);
    assert!(status.success());
    let lines = log_lines(base.path());
    let named: Vec<&str> = lines
        .iter()
        .filter(|line| line.get("id").is_some())
        .flat_map(|line| line["images"].as_array().unwrap().iter().map(|name| name.as_str().unwrap()))
        .collect();
    assert_eq!(named.len(), 1, "the write's entry names its image");
    let delete = lines.iter().find(|line| line["operation"] == "remove").unwrap();
    assert_eq!(delete["images"], json!([]), "the delete's intent names no image");
    // Call ids carry their process's tag (a 1 in 2^20 chance of a false failure).
    let tag = |id: &str| id[14..19].to_owned();
    assert_eq!(tag(delete["call"].as_str().unwrap()), tag(lines[0]["call"].as_str().unwrap()));
    assert_ne!(tag(delete["call"].as_str().unwrap()), tag(vfs::CallId::new().as_str()), "another process's");
    let entry = lines.iter().find(|line| line.get("id").is_some()).unwrap();
    assert_eq!(tag(entry["id"].as_str().unwrap()), tag(delete["call"].as_str().unwrap()), "entry ids carry it too");
    let taken: Vec<String> = image_names(base.path())
        .into_iter()
        .filter(|name| name.starts_with(&format!("{}.", delete["call"].as_str().unwrap())))
        .collect();
    let record: Vec<&String> = taken.iter().filter(|name| name.ends_with(".taking")).collect();
    assert_eq!((taken.len(), record.len()), (3, 1), "the tree's two files and the record of them: {taken:?}");
    // Which image is which file: a line a directory, written before its files were taken.
    let record = std::fs::read_to_string(base.path().join("journal/images").join(record[0])).unwrap();
    let noted: Vec<(String, usize)> = record
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|line| (line["dir"].as_str().unwrap().to_owned(), line["files"].as_array().unwrap().len()))
        .collect();
    assert_eq!(noted, [("/w/tree".to_owned(), 1), ("/w/tree/deep".to_owned(), 1)]);
    std::fs::write(base.path().join("journal/images").join(ORPHAN), "no line names it\n").unwrap();
    assert_eq!(image_names(base.path()).len(), 5);

    let launch = launch(base.path());
    let mut left = vec![named[0].to_owned()];
    left.extend(taken);
    left.sort();
    assert_eq!(image_names(base.path()), left, "only the orphan is removed");
    let entries = launch.journal().unwrap().entries();
    let write = entries.all().iter().find(|entry| entry.operation == "write").unwrap();
    assert_eq!(entries.state(write), EntryState::Undoable);
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), write, "operator", None);
    assert!(clean, "{lines:?}");
    assert_eq!(std::fs::read(base.path().join("w/a.txt")).unwrap(), b"before\n");
    let delete = entries.all().iter().find(|entry| entry.operation == "remove").unwrap();
    assert_eq!(entries.state_text(delete), "not undoable (incomplete)");
    // The undo of the incomplete entry puts back what the record names, file by file, where
    // nothing is now, with their modes (a file made since at a path is that path's conflict).
    std::fs::create_dir_all(base.path().join("w/tree")).unwrap();
    std::fs::write(base.path().join("w/tree/one.txt"), "made since\n").unwrap();
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), delete, "operator", None);
    let expected = ["conflict /w/tree/one.txt: changed since (left as it is)", "restored /w/tree/deep/two.txt"];
    assert_eq!((lines.iter().map(String::as_str).collect::<Vec<_>>(), clean), (expected.to_vec(), false));
    assert_eq!(std::fs::read(base.path().join("w/tree/one.txt")).unwrap(), b"made since\n");
    assert_eq!(std::fs::read(base.path().join("w/tree/deep/two.txt")).unwrap(), b"two\n");
    let mode = std::fs::metadata(base.path().join("w/tree/deep/two.txt")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o755);
    let entries = launch.journal().unwrap().entries();
    let delete = entries.all().iter().find(|entry| entry.operation == "remove").unwrap();
    assert_eq!(entries.state_text(delete), "undone (incomplete)");
    let (lines, _) = launch.journal().unwrap().undo(&launch.registry().agent(), delete, "operator", None);
    assert_eq!(lines, [format!("skipped {}: undone", delete.id)]);
}

/// A launch let go of lets go of its journal: its files and its presence lock close with it,
/// so the next launch on the journal in the same process (a daemon's, a test's) finds itself
/// alone and removes what no line names. The journal is an observer of its registry; a
/// journal that held its registry strongly kept both, and every file they hold, for as long
/// as the process lived (2,000 launches ran out of descriptors).
#[test]
fn a_launch_let_go_of_lets_go_of_its_journal_and_the_next_one_is_alone_on_it() {
    let base = tempfile::tempdir().unwrap();
    let _alone = alone();
    let first = launch(base.path());
    let tools = first.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "one\n" }));
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "two\n", "overwrite": true }));
    let view = first.registry().agent();
    drop((tools, first));
    // The registry, with its observers, goes with its last holder.
    view.info("/w/a.txt").unwrap();
    drop(view);
    let kept = image_names(base.path());
    assert_eq!(kept.len(), 1, "the overwrite's image: {kept:?}");
    std::fs::write(base.path().join("journal/images").join(ORPHAN), "no line names it\n").unwrap();
    let second = launch(base.path());
    assert_eq!(image_names(base.path()), kept, "the orphan is removed, the named image kept");
    let entries = second.journal().unwrap().entries();
    let write = entries.all().iter().find(|entry| entry.paths == ["/w/a.txt"] && entry.operation == "write");
    assert_eq!(entries.state(write.unwrap()), EntryState::Undoable);
}

/// Where [`a_process_that_stops_in_a_delete`] finds its journal's base.
const STOPPED_BASE: &str = "VFS_TEST_STOPPED_BASE";

/// Held by a test that starts a process, and by one that needs to be alone on its journal:
/// a child holds copies of this process's open files (and so their locks) until it starts
/// its program.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SPAWNING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The first process of the test above: a write through the tools (its entry is written),
/// then a recursive delete outside any call, whose entry is never written: the process ends
/// first, as a killed one would.
#[test]
#[ignore = "a child process of the_images_a_stopped_process_left_unnamed_are_removed_by_the_next_process_alone_on_the_journal"]
fn a_process_that_stops_in_a_delete() {
    // Run with the ignored tests but not by its test: nothing to do.
    let Some(base) = std::env::var_os(STOPPED_BASE).map(std::path::PathBuf::from) else { return };
    std::fs::create_dir_all(base.join("w/tree/deep")).unwrap();
    std::fs::write(base.join("w/tree/one.txt"), "one\n").unwrap();
    std::fs::write(base.join("w/tree/deep/two.txt"), "two\n").unwrap();
    std::fs::set_permissions(base.join("w/tree/deep/two.txt"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    std::fs::write(base.join("w/a.txt"), "before\n").unwrap();
    let launch = launch(&base);
    call(&launch.tools(None), "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));
    launch.registry().agent().delete("/w/tree", true, &Precondition::Any).unwrap();
    std::process::exit(0);
}

/// A process that starts while another uses the journal removes nothing: the other may be
/// between an image and its line. Nor does one that only reads the journal (`vfs journal
/// list`).
#[test]
fn a_process_that_shares_the_journal_or_only_reads_it_removes_no_image() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("journal/images")).unwrap();
    std::fs::write(base.path().join("journal/images").join(ORPHAN), "no line names it\n").unwrap();
    let reader = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority()).unwrap();
    assert_eq!(reader.entries().all().len(), 0);
    assert_eq!(image_names(base.path()), [ORPHAN], "a reader removes nothing");
    drop(reader);

    let first = launch(base.path());
    assert_eq!(image_names(base.path()), Vec::<String>::new(), "the first launch, alone, removes it");
    std::fs::write(base.path().join("journal/images").join(ORPHAN), "no line names it\n").unwrap();
    let second = launch(base.path());
    assert_eq!(image_names(base.path()), [ORPHAN], "kept while another process uses the journal");
    std::fs::write(base.path().join("w/a.txt"), "before\n").unwrap();
    call(&second.tools(None), "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));
    call(&first.tools(None), "write_file", &json!({ "path": "/w/a.txt", "content": "again\n", "overwrite": true }));
    assert_eq!(image_names(base.path()).len(), 3, "both writes kept their images, the orphan is left");
}

/// More orphans than a listing shows (2,000) are all removed at one start. A line that is
/// not JSON names nothing, and a last line cut short by a killed process is ended first, so
/// that the next process's line is not joined to it.
#[test]
fn every_orphan_goes_at_one_start_and_a_cut_last_line_is_ended() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    let images = base.path().join("journal/images");
    std::fs::create_dir_all(&images).unwrap();
    let log = base.path().join("journal/journal.jsonl");
    let cut = "{\"settled\": \"x\"}\nnot json\n{\"intent\": \"1";
    std::fs::write(&log, cut).unwrap();
    for index in 0..2_100 {
        std::fs::write(images.join(format!("1796417589431-{index:08x}.1.0")), "").unwrap();
    }
    let launch = launch(base.path());
    assert_eq!(image_names(base.path()), Vec::<String>::new());
    assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("{cut}\n"));

    std::fs::write(base.path().join("w/a.txt"), "before\n").unwrap();
    call(&launch.tools(None), "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));
    let entries = launch.journal().unwrap().entries();
    assert_eq!(entries.all().len(), 1, "the write's entry is read whole");
    assert_eq!(entries.state(&entries.all()[0]), EntryState::Undoable);
}

/// The sweep reads what each line names: an image the size bound dropped but could not
/// remove goes (its entry and its intent both name it); an image named only by an intent
/// stays, even when its call has an entry for another change (a view's call, whose first
/// change was written before the process stopped during its second).
#[test]
fn a_dropped_entrys_leftover_image_goes_and_an_image_an_intent_names_stays() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    let images = base.path().join("journal/images");
    std::fs::create_dir_all(&images).unwrap();
    let call = "1796417589431-00000001";
    let lines = [
        json!({ "intent": "1796417589431-0000100000", "call": call, "operation": "write", "images": [format!("{call}.1.0")] }),
        json!({ "id": "1796417589431-0000100001", "call": call, "operation": "write", "images": [format!("{call}.1.0")], "parts": [] }),
        json!({ "dropped": "1796417589431-0000100001" }),
        json!({ "intent": "1796417589432-0000100002", "call": call, "operation": "write", "images": [format!("{call}.1.1")] }),
    ];
    let log = lines.iter().map(Value::to_string).collect::<Vec<_>>().join("\n") + "\n";
    std::fs::write(base.path().join("journal/journal.jsonl"), log).unwrap();
    for name in [format!("{call}.1.0"), format!("{call}.1.1")] {
        std::fs::write(images.join(name), "kept\n").unwrap();
    }
    let _launch = launch(base.path());
    assert_eq!(image_names(base.path()), [format!("{call}.1.1")]);
}

/// Where [`a_process_that_makes_many_changes`] finds its journal's base.
const MANY_BASE: &str = "VFS_TEST_MANY_BASE";
/// How many files it writes over.
const MANY: usize = 400;

/// Runs [`a_process_that_makes_many_changes`] as a process of its own, which lets go of the
/// journal when it ends, and waits for it.
fn make_many_changes(base: &Path) {
    let spawning = alone();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_process_that_makes_many_changes", "--ignored", "--quiet"])
        .env(MANY_BASE, base)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    drop(spawning);
    assert!(status.success());
}

/// The first process of the compaction tests: [`MANY`] files written over through the tools,
/// each leaving an intent and an entry with an image. Written by ten launches in turn, each
/// kept open to the end, as ten processes sharing the journal: none is alone at its start
/// (so none compacts the log there), and none writes enough to double the log it found (so
/// none compacts it while it runs: `a_log_in_use_is_compacted_as_it_grows_…` proves that).
#[test]
#[ignore = "a child process of the compaction tests"]
fn a_process_that_makes_many_changes() {
    let Some(base) = std::env::var_os(MANY_BASE).map(std::path::PathBuf::from) else { return };
    std::fs::create_dir_all(base.join("w")).unwrap();
    for index in 0..MANY {
        std::fs::write(base.join(format!("w/{index:03}.txt")), format!("before {index}\n")).unwrap();
    }
    let mut open = Vec::new();
    for turn in 0..10 {
        let launch = launch(&base);
        let tools = launch.tools(None);
        for index in turn * MANY / 10..(turn + 1) * MANY / 10 {
            let arguments = json!({ "path": format!("/w/{index:03}.txt"), "content": format!("after {index}\n"), "overwrite": true });
            call(&tools, "write_file", &arguments);
        }
        open.push((launch, tools));
    }
    std::process::exit(0);
}

/// What `vfs journal list --json` shows of every entry, oldest first, read by a process that
/// lets go of the journal when it returns.
fn listed(base: &Path) -> Vec<Value> {
    let reader = vfs_host::open_journal(&base.join("journal"), vfs::ambient_authority()).unwrap();
    let entries = reader.entries();
    entries.all().iter().map(|entry| entries.json(entry)).collect()
}

/// A log that grew long is rewritten by the next process alone on the journal, without the
/// intents of the calls that ended: every entry reads as before (its state, its paths), and
/// an undo reads its parts where the entry now lies.
#[test]
fn a_long_log_is_compacted_at_the_next_start_and_every_entry_reads_and_undoes_as_before() {
    let base = tempfile::tempdir().unwrap();
    make_many_changes(base.path());
    let log = base.path().join("journal/journal.jsonl");
    let before = std::fs::metadata(&log).unwrap().len();
    assert!(before >= 64 * 1024, "{before} bytes: too short to be compacted");
    let lines = log_lines(base.path());
    assert_eq!(lines.iter().filter(|line| line.get("intent").is_some()).count(), MANY);
    let entries_before: Vec<Value> = lines.into_iter().filter(|line| line.get("id").is_some()).collect();
    let listed_before = listed(base.path());
    assert_eq!(listed_before.len(), MANY);
    let images_before = image_names(base.path());
    assert_eq!(images_before.len(), MANY);

    let _alone = alone();
    let launch = launch(base.path());
    let after = std::fs::metadata(&log).unwrap().len();
    assert!(after <= before / 4 * 3, "{before} bytes, then {after}");
    assert_eq!(log_lines(base.path()), entries_before, "the entries, whole and in order, and nothing else");
    assert_eq!(listed(base.path()), listed_before);
    assert_eq!(image_names(base.path()), images_before);

    let entries = launch.journal().unwrap().entries();
    let agent = launch.registry().agent();
    for entry in [&entries.all()[0], &entries.all()[MANY - 1]] {
        let (lines, clean) = launch.journal().unwrap().undo(&agent, entry, "operator", None);
        assert!(clean, "{lines:?}");
        assert_eq!(lines, [format!("restored {}", entry.paths[0])]);
    }
    assert_eq!(std::fs::read_to_string(base.path().join("w/000.txt")).unwrap(), "before 0\n");
    assert_eq!(
        std::fs::read_to_string(base.path().join(format!("w/{:03}.txt", MANY - 1))).unwrap(),
        format!("before {}\n", MANY - 1)
    );
    // The undos' lines went to the new log.
    assert_eq!(log_lines(base.path()).iter().filter(|line| line["operation"] == "undo").count(), 2);
}

/// Past its bound (a quarter of `--journal-max-bytes`: here 64 KiB), a compaction drops the oldest entries
/// (their images go) and then forgets the oldest dropped ones: the log ends within the bound,
/// the newest entries stay undoable, and what is listed is the newest part of what was.
#[test]
fn past_its_bound_a_compaction_drops_the_oldest_entries_then_forgets_the_oldest_dropped() {
    let base = tempfile::tempdir().unwrap();
    make_many_changes(base.path());
    let listed_before = listed(base.path());
    let _alone = alone();
    let launch = launch_bounded(base.path(), 256 * 1024);
    let after = std::fs::metadata(base.path().join("journal/journal.jsonl")).unwrap().len();
    assert!(after <= 64 * 1024, "{after} bytes");

    let listed_after = listed(base.path());
    assert!(listed_after.len() < MANY, "some of the oldest are forgotten");
    let ids = |listing: &[Value]| listing.iter().map(|entry| entry["id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&listed_after), ids(&listed_before)[MANY - listed_after.len()..], "the newest are listed");
    let states: Vec<&str> = listed_after.iter().map(|entry| entry["state"].as_str().unwrap()).collect();
    let dropped = states.iter().take_while(|state| **state == "dropped").count();
    assert!(dropped > 0, "{states:?}");
    assert!(states[dropped..].iter().all(|state| *state == "undoable"), "{states:?}");
    assert!(states.len() > dropped, "{states:?}");
    for (entry, before) in listed_after.iter().zip(&listed_before[MANY - listed_after.len()..]) {
        for key in ["time", "session", "call", "operation", "paths"] {
            assert_eq!(entry[key], before[key], "{key} of {}", entry["id"]);
        }
    }
    // The images of the dropped and forgotten entries are gone; the others' are kept.
    assert_eq!(image_names(base.path()).len(), states.len() - dropped);
    // What was forgotten is counted, with the times of the oldest and the newest of it.
    let gone = MANY - listed_after.len();
    let forgotten = vfs_host::open_journal(&base.path().join("journal"), vfs::ambient_authority())
        .unwrap()
        .entries()
        .forgotten()
        .cloned();
    let time = |index: usize| listed_before[index]["time"].as_str().unwrap().to_owned();
    assert_eq!(forgotten, Some(vfs_host::Forgotten { count: gone as u64, oldest: time(0), newest: time(gone - 1) }));

    let entries = launch.journal().unwrap().entries();
    let newest = entries.all().last().unwrap();
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), newest, "operator", None);
    assert!(clean, "{lines:?}");
    let oldest = entries.all().first().unwrap();
    assert_eq!(entries.skipped(oldest), Some(format!("skipped {}: dropped", oldest.id)));
}

/// A process that starts while another compacts waits for it, then opens the new log: its
/// lines are not appended to the file the compaction replaced. The other process is played
/// by this test, holding the presence lock and replacing the log.
#[test]
fn a_process_that_starts_during_a_compaction_writes_to_the_new_log() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("journal")).unwrap();
    let presence = std::fs::File::create(base.path().join("journal/journal.lock")).unwrap();
    presence.lock().unwrap();
    let log = base.path().join("journal/journal.jsonl");
    std::fs::write(&log, "").unwrap();
    let starting = {
        let base = base.path().to_path_buf();
        std::thread::spawn(move || launch(&base))
    };
    // The starting process opens nothing of the log before the lock is let go.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!starting.is_finished(), "it waits for the lock");
    let old = std::fs::File::open(&log).unwrap();
    std::fs::write(base.path().join("journal/journal.new"), "").unwrap();
    std::fs::rename(base.path().join("journal/journal.new"), &log).unwrap();
    presence.unlock().unwrap();
    let launch = starting.join().unwrap();

    std::fs::write(base.path().join("w/a.txt"), "before\n").unwrap();
    call(&launch.tools(None), "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));
    let lines = log_lines(base.path());
    assert_eq!(lines.len(), 2, "its intent and its entry, in the log in place: {lines:?}");
    assert_eq!(old.metadata().unwrap().len(), 0, "nothing went to the replaced file");
}

/// A log in use is compacted as it grows (to twice its length after the last compaction),
/// while two processes append to it at once: every write succeeds, no line of either is lost (each appends under the
/// gate, to the log in place), every entry stays listed and undoable, and an entry read
/// before the compactions is undone after them (its line moved: it is looked for).
#[test]
fn a_log_in_use_is_compacted_as_it_grows_and_two_processes_sharing_it_lose_no_line() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("w")).unwrap();
    for index in 0..MANY {
        std::fs::write(base.path().join(format!("w/{index:03}.txt")), format!("before {index}\n")).unwrap();
    }
    let (first, second) = (launch(base.path()), launch(base.path()));
    let tools = [first.tools(None), second.tools(None)];
    let write = |index: usize| {
        let arguments =
            json!({ "path": format!("/w/{index:03}.txt"), "content": format!("after {index}\n"), "overwrite": true });
        call(&tools[index % 2], "write_file", &arguments);
    };
    write(0);
    let early = first.journal().unwrap().entries().all()[0].clone();
    // The two write at once: one may compact while the other appends.
    std::thread::scope(|scope| {
        for turn in 0..2 {
            scope.spawn(move || {
                for index in (1..MANY).filter(|index| index % 2 == turn) {
                    write(index);
                }
            });
        }
    });
    let lines = log_lines(base.path());
    let intents = lines.iter().filter(|line| line.get("intent").is_some()).count();
    assert!(intents < MANY / 2, "{intents} intents left: the log was not compacted");
    let listing = listed(base.path());
    assert_eq!(listing.len(), MANY);
    let not_undoable: Vec<&Value> = listing.iter().filter(|entry| entry["state"] != "undoable").collect();
    assert!(not_undoable.is_empty(), "{} entries not undoable, the first: {}", not_undoable.len(), not_undoable[0]);
    let mut paths: Vec<&str> = listing.iter().map(|entry| entry["paths"][0].as_str().unwrap()).collect();
    paths.sort_unstable();
    let expected: Vec<String> = (0..MANY).map(|index| format!("/w/{index:03}.txt")).collect();
    assert_eq!(paths, expected);

    let (undone, clean) = first.journal().unwrap().undo(&first.registry().agent(), &early, "operator", None);
    assert!(clean, "{undone:?}");
    assert_eq!(undone, ["restored /w/000.txt"]);
    assert_eq!(std::fs::read_to_string(base.path().join("w/000.txt")).unwrap(), "before 0\n");
}

/// Lines written as a process of another run would have written them: `lines` put before
/// the log's own (older than every entry in it), `after` after them.
fn surround_log(base: &Path, before: &[Value], after: &str) {
    let log = base.join("journal/journal.jsonl");
    let mut text: String = before.iter().map(|line| line.to_string() + "\n").collect();
    text.push_str(&std::fs::read_to_string(&log).unwrap());
    text.push_str(after);
    std::fs::write(&log, text).unwrap();
}

/// An entry's line as the journal writes it, of a write whose image is `images` (none: an
/// imageless one).
fn entry_line(id: &str, call: &str, path: &str, images: &[&str]) -> Value {
    let parts: Vec<Value> = images
        .iter()
        .map(|name| json!({ "image": { "file": name, "mode": 420 }, "kind": "write", "parent": false, "path": path, "to": null, "version": "0000000000000000" }))
        .collect();
    json!({
        "call": call, "id": id, "image_bytes": 9 * images.len(), "images": images, "operation": "write",
        "parts": parts, "paths": [path], "session": "s0", "time": "2026-12-01T00:00:00Z", "undoes": null,
    })
}

/// A compaction past its bound keeps what readers need of every kind of line: the intent of
/// a call that stopped during its change (with its image), an entry whose call keeps an
/// intent (only dropped, never forgotten: its intent would read as incomplete), an entry
/// marked dropped later (its image goes), an undo and the entry it undid; and it leaves out
/// a line that is not JSON and a last line cut short.
#[test]
fn a_compaction_past_its_bound_keeps_intents_undos_and_dropped_marks_as_readers_need_them() {
    let base = tempfile::tempdir().unwrap();
    make_many_changes(base.path());
    let original = log_lines(base.path());
    let ids: Vec<String> = original.iter().filter_map(|line| line["id"].as_str().map(str::to_owned)).collect();
    assert_eq!(ids.len(), MANY);
    let (viewed, stopped) = ("1700000000000-0000a00001", "1700000000000-0000a00002");
    let images = base.path().join("journal/images");
    for name in [format!("{viewed}.1.0"), format!("{viewed}.1.1"), format!("{stopped}.1.0")] {
        std::fs::write(images.join(name), "an image\n").unwrap();
    }
    let first = format!("{viewed}.1.0");
    let second = format!("{viewed}.1.1");
    let before = [
        // A call of the view's: its first change has an entry, it stopped during its second.
        json!({ "intent": "1700000000000-0000b00001", "call": viewed, "operation": "write", "paths": ["/w/v.txt"], "images": [first.clone()], "session": "-", "time": "2026-12-01T00:00:00Z" }),
        entry_line("1700000000000-0000b00002", viewed, "/w/v.txt", &[&first]),
        json!({ "intent": "1700000000001-0000b00003", "call": viewed, "operation": "write", "paths": ["/w/v.txt"], "images": [second.clone()], "session": "-", "time": "2026-12-01T00:00:00Z" }),
        // A call that stopped during its only change.
        json!({ "intent": "1700000000002-0000b00004", "call": stopped, "operation": "write", "paths": ["/w/s.txt"], "images": [format!("{stopped}.1.0")], "session": "-", "time": "2026-12-01T00:00:00Z" }),
    ];
    // Entry 250 is undone by a later line; the newest entry is marked dropped.
    let undone = &ids[250];
    let undo = json!({
        "call": "1800000000000-0000c00001", "id": "1800000000000-0000c00002", "image_bytes": 0, "images": [],
        "operation": "undo", "parts": [], "paths": original.iter().find(|line| line["id"] == json!(undone)).unwrap()["paths"],
        "session": "operator", "time": "2027-01-01T00:00:00Z", "undoes": undone,
    });
    let newest = &ids[MANY - 1];
    let after = format!("not json\n{undo}\n{}\n{{\"intent\": \"18", json!({ "dropped": newest }));
    // What an earlier compaction forgot, counted on.
    let earlier = json!({ "settled": "forgotten", "forgotten": 7, "oldest": "2026-11-01T00:00:00Z", "newest": "2026-11-02T00:00:00Z" });
    let before: Vec<Value> = std::iter::once(earlier).chain(before).collect();
    surround_log(base.path(), &before, &after);
    let newest_image = original.iter().find(|line| line["id"] == json!(newest)).unwrap()["images"][0].clone();

    let _alone = alone();
    let launch = launch_bounded(base.path(), 256 * 1024);
    let log = std::fs::read_to_string(base.path().join("journal/journal.jsonl")).unwrap();
    assert!(log.len() <= 64 * 1024, "{} bytes", log.len());
    let lines: Vec<Value> = log.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let intents: Vec<&Value> = lines.iter().filter_map(|line| line.get("intent")).collect();
    assert_eq!(
        intents,
        ["1700000000001-0000b00003", "1700000000002-0000b00004"],
        "those that name images no entry names"
    );
    assert_eq!(
        lines[0],
        json!({ "dropped": true, "id": "1700000000000-0000b00002", "call": viewed, "operation": "write", "paths": ["/w/v.txt"], "session": "s0", "time": "2026-12-01T00:00:00Z", "undoes": null })
    );

    let entries = launch.journal().unwrap().entries();
    let state = |id: &str| entries.find(id).map(|entry| entries.state_text(entry));
    assert_eq!(state("1700000000000-0000b00002").as_deref(), Some("dropped"), "dropped, not forgotten");
    let incomplete: Vec<&vfs_host::Entry> =
        entries.all().iter().map(std::sync::Arc::as_ref).filter(|entry| entry.incomplete).collect();
    assert_eq!(incomplete.len(), 1, "only the call that stopped in its only change");
    assert_eq!(incomplete[0].call, stopped);
    assert_eq!(entries.state_text(incomplete[0]), "not undoable (incomplete)");
    assert_eq!(state(undone).as_deref(), Some("undone"));
    assert_eq!(state("1800000000000-0000c00002").as_deref(), Some("undoable"));
    assert_eq!(state(newest).as_deref(), Some("dropped"));
    assert_eq!(state(&ids[MANY - 2]).as_deref(), Some("undoable"));
    let undone_line = lines.iter().find(|line| line["id"] == json!(undone)).unwrap();
    assert_eq!(undone_line["dropped"], true, "the undone entry lies where entries are dropped: {undone_line}");
    assert!(state(&ids[0]).is_none(), "the oldest of the run are forgotten");
    // Counted with those an earlier compaction forgot, in one line at the end of what it wrote.
    let gone: Vec<&String> = ids.iter().filter(|id| entries.find(id).is_none()).collect();
    let time_of = |id: &str| original.iter().find(|line| line["id"] == json!(id)).unwrap()["time"].clone();
    let counts: Vec<&Value> = lines.iter().filter(|line| line.get("forgotten").is_some()).collect();
    assert_eq!(
        counts,
        [
            &json!({ "settled": "forgotten", "forgotten": 7 + gone.len(), "oldest": "2026-11-01T00:00:00Z", "newest": time_of(gone[gone.len() - 1]) })
        ]
    );
    assert_eq!(entries.forgotten().map(|forgotten| forgotten.count), Some(7 + gone.len() as u64));

    let kept = image_names(base.path());
    assert!(kept.contains(&second), "named by an intent only");
    assert!(kept.contains(&format!("{stopped}.1.0")), "of a call that stopped");
    assert!(!kept.contains(&first), "its entry was dropped");
    assert!(!kept.contains(&newest_image.as_str().unwrap().to_owned()), "its entry was marked dropped");
}

/// A log past its bound is compacted at a start even when nothing in it names an image and
/// less than a quarter would be saved.
#[test]
fn a_log_just_past_its_bound_is_compacted_at_a_start() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("journal")).unwrap();
    let mut text = String::new();
    let mut index = 0;
    while text.len() < 66 * 1024 {
        let line = entry_line(&format!("1700000000000-{index:010x}"), "1700000000000-00000000", "/w/a.txt", &[]);
        text.push_str(&(line.to_string() + "\n"));
        index += 1;
    }
    std::fs::write(base.path().join("journal/journal.jsonl"), &text).unwrap();
    let _launch = launch_bounded(base.path(), 256 * 1024);
    let after = std::fs::metadata(base.path().join("journal/journal.jsonl")).unwrap().len();
    assert!(after <= 64 * 1024, "{} bytes, then {after}", text.len());
    let listing = listed(base.path());
    assert_eq!(listing.last().unwrap()["id"], format!("1700000000000-{:010x}", index - 1), "the newest stays");
    assert_eq!(listing.last().unwrap()["state"], "undoable");
}

/// What a process killed during a stage left in the journal's directory (a compaction's new
/// log, a copied image) is removed by the next process alone on it.
#[test]
fn the_files_of_a_killed_compaction_or_copy_are_removed_at_the_next_start_alone() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("journal/images")).unwrap();
    std::fs::write(base.path().join("journal/.vfs-tmp-00000000000000a1"), "a new log, never put in place\n").unwrap();
    std::fs::write(base.path().join("journal/images/.vfs-tmp-00000000000000a2"), "a copy\n").unwrap();
    let _launch = launch(base.path());
    let mut names: Vec<String> = std::fs::read_dir(base.path().join("journal"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["images", "journal.gate", "journal.jsonl", "journal.lock"]);
    assert_eq!(image_names(base.path()), Vec::<String>::new());
}

/// A vfs from before `journal.lock` locked the log itself: a process that finds that lock
/// held is not alone, and removes nothing.
#[test]
fn a_process_beside_an_older_vfs_holding_the_logs_lock_removes_nothing() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("journal/images")).unwrap();
    std::fs::write(base.path().join("journal/images").join(ORPHAN), "no line names it\n").unwrap();
    let older = std::fs::File::create(base.path().join("journal/journal.jsonl")).unwrap();
    older.lock_shared().unwrap();
    let _launch = launch(base.path());
    // Alone, a start removes it (`a_process_that_shares_the_journal_or_only_reads_it_…`).
    assert_eq!(image_names(base.path()), [ORPHAN], "kept while the older vfs runs");
}

/// An entry that another process dropped after this one listed it is skipped as dropped,
/// and nothing of it is restored.
#[test]
fn an_undo_of_an_entry_dropped_since_it_was_listed_is_skipped_whole() {
    let _alone = alone();
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("w")).unwrap();
    std::fs::write(base.path().join("w/a.txt"), "before\n").unwrap();
    let launch = launch(base.path());
    call(&launch.tools(None), "write_file", &json!({ "path": "/w/a.txt", "content": "after\n", "overwrite": true }));
    let entry = launch.journal().unwrap().entries().all()[0].clone();
    // Another process drops it, as its size bound would.
    for name in image_names(base.path()) {
        std::fs::remove_file(base.path().join("journal/images").join(name)).unwrap();
    }
    let mut log = std::fs::OpenOptions::new().append(true).open(base.path().join("journal/journal.jsonl")).unwrap();
    std::io::Write::write_all(&mut log, format!("{}\n", json!({ "dropped": entry.id })).as_bytes()).unwrap();
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), &entry, "operator", None);
    assert!(!clean);
    assert_eq!(lines, [format!("skipped {}: dropped", entry.id)]);
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "after\n");
}

/// A tool call's result: whether it is an error, and its text.
fn answer(tools: &vfs_host::ToolService, tool: &str, arguments: &Value) -> (bool, String) {
    let Value::Object(arguments) = arguments.clone() else { unreachable!() };
    let output = tools.call(tool, Some(arguments)).unwrap();
    (output.is_error, output.text)
}

#[test]
fn the_undo_of_a_made_directory_removes_it_only_while_it_is_an_empty_directory() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let (mine, theirs) = (launch.tools(None), launch.tools(None));
    // Another session put a file where this one made a directory: the undo leaves it.
    call(&mine, "create_directory", &json!({ "path": "/w/d" }));
    call(&theirs, "delete_file", &json!({ "path": "/w/d" }));
    call(&theirs, "write_file", &json!({ "path": "/w/d", "content": "their work\n" }));
    let undone = answer(&mine, "undo_changes", &json!({}));
    assert_eq!(undone, (true, "conflict /w/d: changed since (left as it is)\n".to_owned()));
    assert_eq!(std::fs::read_to_string(base.path().join("w/d")).unwrap(), "their work\n");
    // Or a file in it.
    call(&mine, "create_directory", &json!({ "path": "/w/e" }));
    call(&theirs, "write_file", &json!({ "path": "/w/e/f.txt", "content": "theirs\n" }));
    let undone = answer(&mine, "undo_changes", &json!({}));
    assert_eq!(undone, (true, "conflict /w/e: changed since (left as it is)\n".to_owned()));
    assert_eq!(std::fs::read_to_string(base.path().join("w/e/f.txt")).unwrap(), "theirs\n");
    // An empty directory goes.
    call(&mine, "create_directory", &json!({ "path": "/w/g" }));
    assert_eq!(answer(&mine, "undo_changes", &json!({})), (false, "removed /w/g\n".to_owned()));
    assert!(!base.path().join("w/g").exists());
}

#[test]
fn the_move_of_a_link_is_not_undoable_and_its_undo_moves_nothing() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let (mine, theirs) = (launch.tools(None), launch.tools(None));
    std::os::unix::fs::symlink("a.txt", base.path().join("w/link")).unwrap();
    call(&mine, "move_file", &json!({ "source": "/w/link", "destination": "/w/moved" }));
    let entries = launch.journal().unwrap().entries();
    let [entry] = entries.all() else { panic!("{:?}", entries.all()) };
    assert_eq!((entry.operation.as_str(), entries.state(entry)), ("move", EntryState::NotUndoable));
    // Another session's tree where the link went stays where it is.
    call(&theirs, "delete_file", &json!({ "path": "/w/moved" }));
    call(&theirs, "write_file", &json!({ "path": "/w/moved/notes.txt", "content": "their tree\n" }));
    let undone = answer(&mine, "undo_changes", &json!({}));
    let never =
        "(they never can be: to undo older changes, give `count` 2 or more, or a `changeId` from `list_changes`)";
    assert_eq!(undone, (true, format!("skipped {}: not undoable\n{never}\n", entry.id)));
    assert_eq!(std::fs::read_to_string(base.path().join("w/moved/notes.txt")).unwrap(), "their tree\n");
    assert!(!base.path().join("w/link").exists());
    // Named, or counted past, it is skipped as before and no hint is added.
    let undone = answer(&mine, "undo_changes", &json!({ "changeId": entry.id }));
    assert_eq!(undone, (true, format!("skipped {}: not undoable\n", entry.id)));
}

#[test]
fn a_change_this_process_has_not_finished_is_not_listed_as_incomplete() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let journal = launch.journal().unwrap();
    // A begun call's change: its intent is in the log, its entry not yet.
    let call = vfs::CallId::new();
    journal.begin(&call, "s", None);
    let agent = launch.registry().agent().with_budget(vfs::Budget::unlimited().with_call(call.clone()));
    agent.write("/w/a.txt", "a\n", &Precondition::Absent).unwrap();
    assert!(log_lines(base.path()).iter().any(|line| line["intent"].is_string() && line["call"] == call.as_str()));
    assert!(journal.entries().all().is_empty(), "running, not stopped");
    journal.finish(&call);
    let entries = journal.entries();
    let [entry] = entries.all() else { panic!("{:?}", entries.all()) };
    assert_eq!((entry.incomplete, entries.state(entry)), (false, EntryState::Undoable));
    // A change no call began (the view's), until the flush writes its entry.
    launch.registry().agent().write("/w/b.txt", "b\n", &Precondition::Absent).unwrap();
    assert_eq!(journal.entries().all().len(), 1);
    journal.flush();
    let entries = journal.entries();
    assert!(entries.all().iter().all(|entry| !entry.incomplete), "{:?}", entries.all());
    assert_eq!(entries.all().len(), 2);
    // Another process cannot tell a running call from a stopped one: it lists the intent of
    // one not finished as incomplete (documented).
}

#[test]
fn two_undos_of_one_change_asked_for_at_once_undo_it_once() {
    let base = tempfile::tempdir().unwrap();
    let launch = std::sync::Arc::new(launch(base.path()));
    let tools = launch.tools(None);
    for round in 0..20 {
        call(&tools, "write_file", &json!({ "path": format!("/w/r{round}/p/f.txt"), "content": "x\n" }));
        let entry = launch.journal().unwrap().entries().all().last().unwrap().clone();
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<(Vec<String>, bool)> = std::thread::scope(|scope| {
            let undo = || {
                barrier.wait();
                launch.journal().unwrap().undo(&launch.registry().agent(), &entry, "operator", None)
            };
            let (first, second) = (scope.spawn(undo), scope.spawn(undo));
            vec![first.join().unwrap(), second.join().unwrap()]
        });
        let done: Vec<&(Vec<String>, bool)> = results.iter().filter(|(_, clean)| *clean).collect();
        assert_eq!(done.len(), 1, "round {round}: {results:?}");
        assert_eq!(done[0].0, [format!("removed /w/r{round}/p/f.txt")], "round {round}");
        let other = results.iter().find(|(_, clean)| !clean).unwrap();
        let skipped = [format!("skipped {}: being undone by another call", entry.id)];
        let after = [format!("skipped {}: undone", entry.id)];
        assert!(other.0 == skipped || other.0 == after, "round {round}: {other:?}");
        let undos = log_lines(base.path()).iter().filter(|line| line["undoes"] == entry.id.as_str()).count();
        assert_eq!(undos, 1, "round {round}");
        assert!(!base.path().join(format!("w/r{round}")).exists(), "round {round}: the parents it made went too");
    }
}

/// An undo's own entries add to the journal as it goes; at a small bound they used to push
/// out the oldest entries it had yet to reach, images and all (red team: 37 of 90 overwrites
/// skipped as `dropped`, their first contents lost). The entries it chose are kept until it
/// reaches them: every one is undone.
#[test]
fn an_undo_of_many_changes_undoes_every_one_it_chose_whatever_its_own_entries_add() {
    const CHANGES: usize = 90;
    let base = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(base.path().join("w")).unwrap();
    for at in 0..CHANGES {
        std::fs::write(base.path().join(format!("w/f{at}.txt")), format!("original {at}\n")).unwrap();
    }
    let launch = launch_bounded(base.path(), vfs_host::MIN_MAX_BYTES);
    let tools = launch.tools(None);
    for at in 0..CHANGES {
        let arguments = json!({ "path": format!("/w/f{at}.txt"), "content": "agent\n", "overwrite": true });
        call(&tools, "write_file", &arguments);
    }
    let states = states_of(base.path());
    assert_eq!(states.len(), CHANGES);
    assert!(states.iter().all(|(_, state)| state == "undoable"), "{states:?}");
    let (error, text) = answer(&tools, "undo_changes", &json!({ "count": CHANGES }));
    let expected: String = (0..CHANGES).rev().map(|at| format!("restored /w/f{at}.txt")).collect::<Vec<_>>().join("\n");
    let expected = format!("{expected}\n");
    assert_eq!((error, text), (false, expected));
    for at in 0..CHANGES {
        let content = std::fs::read_to_string(base.path().join(format!("w/f{at}.txt"))).unwrap();
        assert_eq!(content, format!("original {at}\n"));
    }
    // Within its bound again after the next change.
    call(&tools, "write_file", &json!({ "path": "/w/next.txt", "content": "next\n" }));
    assert!(journal_bytes(base.path()) <= vfs_host::MIN_MAX_BYTES, "{}", journal_bytes(base.path()));
}

/// A log that cannot be read (replaced by a directory while vfs runs) is said to be so by
/// both tools, not taken for a session without changes (red team: `no changes in this
/// session` and `nothing to undo` after nine changes).
#[test]
fn a_journal_whose_log_cannot_be_read_is_said_to_be_so_not_empty() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "a\n" }));
    let log = base.path().join("journal/journal.jsonl");
    let aside = base.path().join("journal/aside.jsonl");
    std::fs::rename(&log, &aside).unwrap();
    std::fs::create_dir(&log).unwrap();
    let unreadable = "the journal of changes cannot be read now, so your changes cannot be listed or undone; tell the operator, whose log says why";
    assert_eq!(answer(&tools, "list_changes", &json!({})), (true, unreadable.to_owned()));
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (true, unreadable.to_owned()));
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "a\n");
    // Removed (this process made it at its start): not "no log yet".
    std::fs::remove_dir(&log).unwrap();
    assert_eq!(answer(&tools, "list_changes", &json!({})), (true, unreadable.to_owned()));
    std::fs::rename(&aside, &log).unwrap();
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "removed /w/a.txt\n".to_owned()));
}

/// An entry whose image is gone from `images/` (removed or replaced outside vfs) is skipped
/// as such, not as one the size bound dropped, and as one that never can be undone, with the
/// way past it (red team: `skipped ID: dropped`, and no hint, so each call met it again).
#[test]
fn an_entry_whose_image_is_gone_is_said_to_be_so_and_how_to_get_past_it() {
    let base = tempfile::tempdir().unwrap();
    let (launch, tools) = at_the_least_bound_with_one_entry(base.path());
    let entry = launch.journal().unwrap().entries().all()[0].clone();
    for image in image_names(base.path()) {
        let image = base.path().join("journal/images").join(image);
        std::fs::remove_file(&image).unwrap();
        std::fs::create_dir(&image).unwrap();
    }
    let gone = format!(
        "skipped {}: its before images are gone from the journal (removed or damaged outside vfs), so it can never be undone",
        entry.id
    );
    let past =
        "(they never can be: to undo older changes, give `count` 2 or more, or a `changeId` from `list_changes`)";
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (true, format!("{gone}\n{past}\n")));
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "after\n");
}

/// A file's image is its own inode, kept by link: a process that held the file open before
/// the change can still write to it. Its undo then does not put back bytes the path never
/// held (red team: a line appended after the change was restored with the rest); one not
/// written to since is put back as ever.
#[test]
fn an_image_written_to_after_the_change_is_not_put_back() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    std::fs::write(base.path().join("w/log.txt"), "line 1\n").unwrap();
    std::fs::write(base.path().join("w/quiet.txt"), "quiet\n").unwrap();
    let mut held = std::fs::OpenOptions::new().append(true).open(base.path().join("w/log.txt")).unwrap();
    call(&tools, "write_file", &json!({ "path": "/w/quiet.txt", "content": "new\n", "overwrite": true }));
    call(&tools, "write_file", &json!({ "path": "/w/log.txt", "content": "agent\n", "overwrite": true }));
    std::io::Write::write_all(&mut held, b"written after the change\n").unwrap();
    drop(held);
    // What changes an inode but not its bytes (a `chmod`; as a copy of the journal with its
    // times, or a remount, would change its inode or device) is no write.
    for image in image_names(base.path()) {
        let image = base.path().join("journal/images").join(image);
        std::fs::set_permissions(&image, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }
    let entries = launch.journal().unwrap().entries();
    let id = &entries.all().last().unwrap().id;
    let written = format!(
        "skipped {id}: its before image was written to after the change (by a process that held the file open), so it no longer holds what the change replaced; it is not put back"
    );
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (true, format!("{written}\n")));
    assert_eq!(std::fs::read_to_string(base.path().join("w/log.txt")).unwrap(), "agent\n");
    let undone = answer(&tools, "undo_changes", &json!({ "count": 2 }));
    assert_eq!(undone, (true, format!("{written}\nrestored /w/quiet.txt\n")));
    assert_eq!(std::fs::read_to_string(base.path().join("w/quiet.txt")).unwrap(), "quiet\n");
}

/// Two `undo_changes` of one session asked for at once take turns: each undoes one change,
/// the second from what the first left, so both succeed and both changes are undone (before,
/// both chose the newest and the second was refused as "being undone by another call").
#[test]
fn two_undo_changes_of_one_session_at_once_undo_its_two_newest_changes() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    for round in 0..20 {
        for name in ["a", "b"] {
            call(&tools, "write_file", &json!({ "path": format!("/w/r{round}{name}.txt"), "content": "x\n" }));
        }
        let barrier = std::sync::Barrier::new(2);
        let mut answers: Vec<(bool, String)> = std::thread::scope(|scope| {
            let undo = || {
                barrier.wait();
                answer(&tools, "undo_changes", &json!({}))
            };
            let (first, second) = (scope.spawn(undo), scope.spawn(undo));
            vec![first.join().unwrap(), second.join().unwrap()]
        });
        answers.sort();
        let removed = |name: &str| (false, format!("removed /w/r{round}{name}.txt\n"));
        assert_eq!(answers, [removed("a"), removed("b")], "round {round}");
        assert!(!base.path().join(format!("w/r{round}a.txt")).exists(), "round {round}");
        assert!(!base.path().join(format!("w/r{round}b.txt")).exists(), "round {round}");
    }
}

/// A call whose time runs out while another `undo_changes` of its session holds the turn
/// undoes nothing and says why.
#[test]
fn an_undo_changes_waiting_for_its_sessions_turn_stops_when_its_time_runs_out() {
    let base = tempfile::tempdir().unwrap();
    // A time limit every call outlives (a change already begun is still made whole).
    let options = LaunchOptions { call_timeout: Some(std::time::Duration::from_nanos(1)), ..options(base.path(), &[]) };
    let launch = vfs_host::compose(&options, vfs::ambient_authority()).unwrap();
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "x\n" }));
    let journal = launch.journal().unwrap();
    let session = journal.entries().all()[0].session.clone();
    let held = journal.undo_turn(&session, || false).unwrap();
    let waited = "nothing was undone: another `undo_changes` of this session was still running when this call's time ran out; call again once it has answered";
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (true, waited.to_owned()));
    assert!(base.path().join("w/a.txt").exists());
    // Another session's turn is its own.
    let other = launch.tools(None);
    assert_eq!(answer(&other, "undo_changes", &json!({})), (false, "nothing to undo\n".to_owned()));
    drop(held);
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "removed /w/a.txt\n".to_owned()));
}

#[test]
fn an_undo_of_many_changes_stops_between_two_when_the_calls_time_runs_out() {
    let base = tempfile::tempdir().unwrap();
    // A time limit every call outlives: each change is still undone whole, one a call.
    let options = LaunchOptions { call_timeout: Some(std::time::Duration::from_nanos(1)), ..options(base.path(), &[]) };
    let launch = vfs_host::compose(&options, vfs::ambient_authority()).unwrap();
    let tools = launch.tools(None);
    for name in ["a", "b", "c"] {
        call(&tools, "write_file", &json!({ "path": format!("/w/{name}.txt"), "content": "x\n" }));
    }
    let stopped = "stopped: the call's time ran out with 2 more to undo; call `undo_changes` again for them";
    assert_eq!(
        answer(&tools, "undo_changes", &json!({ "count": 3 })),
        (true, format!("removed /w/c.txt\n{stopped}\n"))
    );
    let stopped = "stopped: the call's time ran out with 1 more to undo; call `undo_changes` again for it";
    assert_eq!(
        answer(&tools, "undo_changes", &json!({ "count": 2 })),
        (true, format!("removed /w/b.txt\n{stopped}\n"))
    );
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "removed /w/a.txt\n".to_owned()));
}

#[test]
fn a_change_id_is_looked_for_among_the_sessions_own_changes_and_named_back_only_as_an_id() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let (mine, theirs) = (launch.tools(None), launch.tools(None));
    call(&mine, "write_file", &json!({ "path": "/w/mine.txt", "content": "m\n" }));
    call(&theirs, "write_file", &json!({ "path": "/w/theirs.txt", "content": "t\n" }));
    let entries = launch.journal().unwrap().entries();
    let [first, second] = entries.all() else { panic!("{:?}", entries.all()) };
    let shared: String = first.id.chars().zip(second.id.chars()).take_while(|(a, b)| a == b).map(|(a, _)| a).collect();
    assert!(shared.len() >= 6, "ids made a moment apart share their first characters: {first:?} {second:?}");
    // The prefix names one change of this session: the other session's is not counted.
    let undone = answer(&mine, "undo_changes", &json!({ "changeId": shared }));
    assert_eq!(undone, (false, "removed /w/mine.txt\n".to_owned()));
    assert!(base.path().join("w/theirs.txt").exists());
    let refused = |id: &str| answer(&mine, "undo_changes", &json!({ "changeId": id }));
    assert_eq!(
        refused(&second.id),
        (
            true,
            format!(
                "no change `{}` of this session (or the prefix names more than one); `list_changes` lists them",
                second.id
            )
        )
    );
    for odd in ["x".repeat(65), "1\n\nrestored /w/a.txt".to_owned()] {
        assert_eq!(
            refused(&odd),
            (
                true,
                "no change with that id of this session (or the prefix names more than one); `list_changes` lists them"
                    .to_owned()
            )
        );
    }
}

/// Two hosted crews, `alpha` (writing `/adata`) and `beta` (`/bdata`), sharing one journal at
/// the least bound under `base`, as a daemon serves them: their tools.
fn two_hosted_crews(base: &Path) -> (vfs_host::ToolService, vfs_host::ToolService) {
    for (crew, root) in [("alpha", "/adata"), ("beta", "/bdata")] {
        std::fs::create_dir_all(base.join(format!("crews/{crew}"))).unwrap();
        std::fs::write(base.join(format!("crews/{crew}/crew.yaml")), format!("name: {crew}\nmounts: [{root}]\n"))
            .unwrap();
        std::fs::create_dir_all(base.join(&root[1..])).unwrap();
    }
    let options = LaunchOptions {
        mounts: vec![
            format!("{}:/adata:rw", base.join("adata").display()),
            format!("{}:/bdata:rw", base.join("bdata").display()),
        ],
        crews: vec![base.join("crews/alpha"), base.join("crews/beta")],
        journal: Some(base.join("journal")),
        journal_max_bytes: Some(vfs_host::MIN_MAX_BYTES),
        no_read_before_edit: true,
        current_dir: base.to_path_buf(),
        ..LaunchOptions::default()
    };
    let hosting = vfs_host::host(&options, None, None, false, vfs::ambient_authority()).unwrap();
    let tools = |crew: &str| {
        let served = hosting.endpoints.iter().find(|served| served.crew_name() == Some(crew)).unwrap();
        served.launch().tools(None)
    };
    (tools("alpha"), tools("beta"))
}

/// One journal serves every endpoint of a daemon, under one bound: past it, the images of the
/// crew that keeps the most go first. A crew that writes a lot pushes out its own oldest
/// changes, never another crew's one change (the red team's: beta's overwrite was dropped by
/// alpha's twelve, and beta could no longer undo it).
#[test]
fn past_the_bound_one_crews_changes_drop_its_own_images_not_another_crews() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let (alpha, beta) = two_hosted_crews(base);
    let precious = "precious\n".repeat(1000);
    call(&beta, "write_file", &json!({ "path": "/bdata/victim.txt", "content": precious }));
    call(&beta, "write_file", &json!({ "path": "/bdata/victim.txt", "content": "oops\n", "overwrite": true }));
    let large = "x".repeat(60 * 1024);
    for round in 0..12 {
        let path = format!("/adata/{}.txt", round % 3);
        call(&alpha, "write_file", &json!({ "path": path, "content": format!("{round}{large}"), "overwrite": true }));
    }
    // Alpha's creations keep no image; of its nine overwrites the six oldest are dropped.
    let states: Vec<(String, String)> = states_of(base);
    let expected: Vec<(String, String)> = [("/bdata/victim.txt", "undoable"); 2]
        .into_iter()
        .chain((0..12).map(|round| {
            let path = ["/adata/0.txt", "/adata/1.txt", "/adata/2.txt"][round % 3];
            (path, if (3..9).contains(&round) { "dropped" } else { "undoable" })
        }))
        .map(|(path, state)| (path.to_owned(), state.to_owned()))
        .collect();
    assert_eq!(states, expected);
    assert!(journal_bytes(base) <= vfs_host::MIN_MAX_BYTES + 61 * 1024, "{}", journal_bytes(base));
    let undone = call(&beta, "undo_changes", &json!({}));
    assert_eq!(undone, "restored /bdata/victim.txt\n");
    assert_eq!(std::fs::read_to_string(base.join("bdata/victim.txt")).unwrap(), precious);
}

/// The log's compaction is as fair as the images' bound: at the least bound, one crew's 600
/// small writes (no images) drop and forget its own oldest entries, and another crew's two
/// older changes stay undoable. (A red team found them dropped after 152 of the other crew's
/// writes, forgotten after 255: the compaction cut the oldest of any crew.)
#[test]
fn past_the_bound_one_crews_changes_compact_its_own_entries_not_another_crews() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let (alpha, beta) = two_hosted_crews(base);
    call(&beta, "write_file", &json!({ "path": "/bdata/a.txt", "content": "a\n" }));
    call(&beta, "write_file", &json!({ "path": "/bdata/b.txt", "content": "b\n" }));
    for round in 0..600 {
        call(&alpha, "write_file", &json!({ "path": format!("/adata/{round}.txt"), "content": "x" }));
    }
    let states = states_of(base);
    let beta_states: Vec<&(String, String)> = states.iter().filter(|(path, _)| path.starts_with("/bdata")).collect();
    assert_eq!(
        beta_states,
        [&("/bdata/a.txt".to_owned(), "undoable".to_owned()), &("/bdata/b.txt".to_owned(), "undoable".to_owned())]
    );
    let alpha_listed = states.len() - 2;
    assert!(alpha_listed < 600, "some of alpha's entries are forgotten: {alpha_listed} listed");
    assert!(states.iter().any(|(_, state)| state == "dropped"), "some of alpha's are dropped");
    assert_eq!(call(&beta, "undo_changes", &json!({ "count": 2 })), "removed /bdata/b.txt\nremoved /bdata/a.txt\n");
}

/// The log's entry lines (not intents, settlements or marks), as JSON.
fn entry_lines(base: &Path) -> Vec<Value> {
    log_lines(base).into_iter().filter(|line| line.get("parts").is_some()).collect()
}

/// A tree holding a name made outside vfs that no path can spell (a control character) could
/// not be put back by path: its removal is journaled not undoable, with why, and keeps no
/// image (those taken before the name was met are let go of).
#[test]
fn a_tree_holding_a_name_no_path_can_spell_is_removed_not_undoable() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    std::fs::create_dir_all(base.path().join("w/t")).unwrap();
    std::fs::write(base.path().join("w/t/a.txt"), "kept first\n").unwrap();
    std::fs::write(base.path().join("w/t/z\u{1}y"), "no path\n").unwrap();
    std::fs::create_dir_all(base.path().join("w/u/d\nx")).unwrap();
    std::fs::write(base.path().join("w/u/d\nx/f.txt"), "below\n").unwrap();
    for tree in ["/w/t", "/w/u"] {
        call(&tools, "delete_file", &json!({ "path": tree, "recursive": true }));
        assert!(!base.path().join(&tree[1..]).exists());
    }
    assert_eq!(
        states_of(base.path()),
        [("/w/t".to_owned(), "not undoable".to_owned()), ("/w/u".to_owned(), "not undoable".to_owned())]
    );
    for line in entry_lines(base.path()) {
        assert_eq!(line["parts"][0]["image"], json!({ "not_kept": "a name in it is one no path can spell" }));
    }
    assert_eq!(image_bytes(base.path()), 0);
    let entries = launch.journal().unwrap().entries();
    let newest = entries.all().last().unwrap();
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), newest, "operator", None);
    assert_eq!((lines, clean), (vec![format!("skipped {}: not undoable", newest.id)], false));
}

/// Putting a tree back, a file that is there already (made since, by another writer) is that
/// file's conflict, the rest put back: here a damaged line names one file twice.
/// A file made since where a tree is put back is that path's conflict, left as it is; the rest
/// of the tree comes back into the directory there.
#[test]
fn a_file_met_where_a_tree_is_put_back_is_a_conflict_and_left_as_it_is() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    std::fs::create_dir_all(base.path().join("w/t")).unwrap();
    std::fs::write(base.path().join("w/t/f.txt"), "first\n").unwrap();
    std::fs::write(base.path().join("w/t/g.txt"), "second\n").unwrap();
    call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    call(&tools, "write_file", &json!({ "path": "/w/t/f.txt", "content": "made since\n" }));
    let entries = launch.journal().unwrap().entries();
    let entry = entries.all().iter().find(|entry| entry.operation == "remove").unwrap();
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), entry, "operator", None);
    assert_eq!(
        (lines, clean),
        (vec!["conflict /w/t/f.txt: changed since (left as it is)".to_owned(), "restored /w/t".to_owned()], false)
    );
    assert_eq!(std::fs::read_to_string(base.path().join("w/t/f.txt")).unwrap(), "made since\n");
    assert_eq!(std::fs::read_to_string(base.path().join("w/t/g.txt")).unwrap(), "second\n");
}

/// An undo of a tree's removal that stopped part way (killed: red team, 1,447 of 10,000
/// files back, and the next undo a conflict for the whole tree, since its directory was
/// there) is finished by undoing it again: what it put back, as the image has it, is taken as
/// back, each path holding something else is a conflict, and the rest comes back.
#[test]
fn an_undo_of_a_tree_removal_that_stopped_part_way_is_finished_by_undoing_it_again() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    let files: Vec<(String, String)> =
        (0..40).map(|at| (format!("t/d{}/f{at}.txt", at % 4), format!("file {at}\n"))).collect();
    for (path, content) in &files {
        let path = base.path().join("w").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    std::fs::create_dir(base.path().join("w/t/empty")).unwrap();
    call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    // What a stopped undo leaves: the first half of the files back as they were, one of them
    // with its bytes but not its mode, and one file cut short.
    for (path, content) in &files[..20] {
        let path = base.path().join("w").join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    let cut = base.path().join("w").join(&files[3].0);
    std::fs::write(&cut, "file").unwrap();
    let moded = base.path().join("w").join(&files[5].0);
    std::fs::set_permissions(&moded, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let conflicts = [&files[3].0, &files[5].0].map(|path| format!("conflict /w/{path}: changed since (left as it is)"));
    let mut expected: Vec<String> = conflicts.to_vec();
    expected.push("restored /w/t".to_owned());
    let (error, text) = answer(&tools, "undo_changes", &json!({}));
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.sort();
    expected.sort();
    assert_eq!((error, lines), (true, expected));
    for (at, (path, content)) in files.iter().enumerate() {
        let there = std::fs::read_to_string(base.path().join("w").join(path)).unwrap();
        assert_eq!(there, if at == 3 { "file" } else { content.as_str() }, "{path}");
    }
    assert!(base.path().join("w/t/empty").is_dir());

    // Only its directory there (made by hand, or the first thing a stopped undo made): the
    // whole tree comes back, cleanly.
    call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    std::fs::create_dir(base.path().join("w/t")).unwrap();
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "restored /w/t\n".to_owned()));
    assert_eq!(std::fs::read_to_string(base.path().join("w").join(&files[39].0)).unwrap(), "file 39\n");
    // A link there to another directory is no directory of the tree: a conflict, and nothing
    // goes into the directory it names.
    call(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    std::fs::create_dir(base.path().join("w/other")).unwrap();
    std::os::unix::fs::symlink("other", base.path().join("w/t")).unwrap();
    let conflict = "conflict /w/t: changed since (left as it is)\n";
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (true, conflict.to_owned()));
    assert_eq!(std::fs::read_dir(base.path().join("w/other")).unwrap().count(), 0);
    std::fs::remove_file(base.path().join("w/t")).unwrap();
    // A file where the tree goes is still the tree's conflict.
    std::fs::write(base.path().join("w/t"), "a file\n").unwrap();
    let conflict = "conflict /w/t: changed since (left as it is)\n";
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (true, conflict.to_owned()));
}

/// A move's undo blocked by a file made since at the place the file left names that place,
/// not the one it went to (which holds what the move left).
#[test]
fn a_moves_undo_blocked_where_it_came_from_names_that_place() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    std::fs::write(base.path().join("w/a.txt"), "moved\n").unwrap();
    call(&tools, "move_file", &json!({ "source": "/w/a.txt", "destination": "/w/b.txt" }));
    std::fs::write(base.path().join("w/a.txt"), "made since\n").unwrap();
    let undone = answer(&tools, "undo_changes", &json!({}));
    assert_eq!(undone, (true, "conflict /w/a.txt: changed since (left as it is)\n".to_owned()));
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "made since\n");
    assert_eq!(std::fs::read_to_string(base.path().join("w/b.txt")).unwrap(), "moved\n");
}

/// A damaged log: lines that are JSON but no entry are no change, an image named outside
/// `images/` is never read (the entry is skipped whole), and a path holding a control
/// character is one line, escaped, in the listing and in the undo's lines.
#[test]
fn a_damaged_logs_lines_list_and_undo_nothing_they_do_not_name() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "mine\n" }));
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "changed\n", "overwrite": true }));
    let log = base.path().join("journal/journal.jsonl");
    let mut lines = log_lines(base.path());
    let entry = lines.iter_mut().rfind(|line| line.get("parts").is_some()).unwrap();
    let session = entry["session"].clone();
    entry["images"] = json!(["../journal.jsonl"]);
    entry["parts"][0]["image"]["file"] = json!("../journal.jsonl");
    let id = entry["id"].as_str().unwrap().to_owned();
    let mut text: String = lines.iter().map(|line| line.to_string() + "\n").collect();
    text.push_str("{}\n1\n[]\n\"x\"\n{\"id\":1}\n");
    let forged = json!({
        "call": "c-forged", "id": "9999999999999-forged", "images": [], "operation": "make_directory",
        "parts": [{ "kind": "make_directory", "path": "/w/x\nremoved /w/forged", "parent": false }],
        "paths": ["/w/x\nremoved /w/forged"], "session": session, "time": "2026-12-01T00:00:00Z", "undoes": null,
    });
    text.push_str(&(forged.to_string() + "\n"));
    std::fs::write(&log, text).unwrap();
    let entries = launch.journal().unwrap().entries();
    assert_eq!(entries.all().len(), 3, "{:?}", entries.all());
    let listed = answer(&tools, "list_changes", &json!({}));
    assert!(
        listed.1.starts_with(
            "9999999999999-forged  2026-12-01T00:00:00Z  make_directory  /w/x\\nremoved /w/forged  undoable\n"
        ),
        "{listed:?}"
    );
    let undone = answer(&tools, "undo_changes", &json!({ "count": 2 }));
    assert_eq!(
        undone,
        (
            true,
            format!(
                "failed /w/x\\nremoved /w/forged: invalid path: the path contains a control character\nskipped {id}: its before images are gone from the journal (removed or damaged outside vfs), so it can never be undone\n"
            )
        )
    );
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "changed\n");
}

/// `undo_changes` refuses an argument it cannot read instead of ignoring it: with no `count`
/// or `changeId` it undoes the newest change, so a misspelt id undid another change (red
/// team). Nothing is undone.
#[test]
fn undo_changes_refuses_an_argument_it_cannot_read() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "a\n" }));
    let refused = "invalid arguments for `undo_changes`: unknown argument `change_id` (`undo_changes` takes `changeId`, `count`); nothing was done: an argument it cannot read is not taken for its default";
    assert_eq!(answer(&tools, "undo_changes", &json!({ "change_id": "x" })), (true, refused.to_owned()));
    assert!(base.path().join("w/a.txt").exists());
    // Other tools still ignore one, with a note.
    let listed = answer(&tools, "list_changes", &json!({ "ids": 1 }));
    assert!(!listed.0, "{listed:?}");
}

#[test]
fn list_changes_and_undo_changes_refuse_a_zero() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/a.txt", "content": "mine\n" }));
    assert_eq!(
        answer(&tools, "list_changes", &json!({ "limit": 0 })),
        (true, "`limit` must be at least 1 (it is how many of your changes to list)".to_owned())
    );
    assert_eq!(
        answer(&tools, "undo_changes", &json!({ "count": 0 })),
        (true, "`count` must be at least 1 (it is how many of your newest changes to undo)".to_owned())
    );
    assert!(base.path().join("w/a.txt").exists());
}

/// A journal that cannot keep a change's image or its intent refuses the change. A red team
/// found both made without either: the replaced file and the deleted tree lost for good, the
/// agent told they went through, the operator warned only after the fact.
#[test]
fn a_change_the_journal_cannot_record_is_refused_and_nothing_is_lost() {
    let refused = |path: &str| {
        (
            true,
            format!(
                "`{path}` was not changed: vfs could not record the change in its journal (where every change is kept so that it can be undone); tell the operator, whose log says why"
            ),
        )
    };
    // `images/` replaced by a file: no image can be linked or written there.
    let base = tempfile::tempdir().unwrap();
    drop(launch(base.path()));
    std::fs::write(base.path().join("w/p.txt"), "precious\n").unwrap();
    std::fs::create_dir_all(base.path().join("w/tree")).unwrap();
    std::fs::write(base.path().join("w/tree/r.txt"), "kept\n").unwrap();
    std::fs::remove_dir_all(base.path().join("journal/images")).unwrap();
    std::fs::write(base.path().join("journal/images"), "not a directory\n").unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    let write = json!({ "path": "/w/p.txt", "content": "new\n", "overwrite": true });
    assert_eq!(answer(&tools, "write_file", &write), refused("/w/p.txt"));
    let delete = json!({ "path": "/w/tree", "recursive": true });
    assert_eq!(answer(&tools, "delete_file", &delete), refused("/w/tree"));
    assert_eq!(std::fs::read_to_string(base.path().join("w/p.txt")).unwrap(), "precious\n");
    assert_eq!(std::fs::read_to_string(base.path().join("w/tree/r.txt")).unwrap(), "kept\n");
    // A create needs no image, but its intent: with the log unwritable nothing could be
    // recorded, and the launch is refused (before 2026-12-07 it went on, refusing every change).
    drop(tools);
    drop(launch);
    std::fs::remove_file(base.path().join("journal/images")).unwrap();
    std::fs::remove_file(base.path().join("journal/journal.jsonl")).unwrap();
    std::fs::create_dir(base.path().join("journal/journal.jsonl")).unwrap();
    let Err(problems) = vfs_host::compose(&options(base.path(), &[]), vfs::ambient_authority()) else {
        panic!("a launch whose journal cannot record is refused")
    };
    assert_eq!(
        problems.to_string(),
        format!(
            "cannot use `{}` as the journal: its log `journal.jsonl` cannot be opened to be written: the host reported: is a directory",
            base.path().join("journal").display()
        )
    );
    assert_eq!(std::fs::read_to_string(base.path().join("w/p.txt")).unwrap(), "precious\n");
}

/// A file the operation copies instead of linking (it has a second link) has its image
/// written before the change, named by the intent, and the entry names the same image: the
/// undo puts the bytes back.
#[test]
fn a_copied_image_is_written_before_the_change_and_undone_from() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    std::fs::write(base.path().join("w/shared.txt"), "shared before\n").unwrap();
    std::fs::hard_link(base.path().join("w/shared.txt"), base.path().join("elsewhere.txt")).unwrap();
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/shared.txt", "content": "after\n", "overwrite": true }));
    let lines = log_lines(base.path());
    assert_eq!(lines.len(), 2, "{lines:?}");
    let name = lines[0]["images"][0].as_str().unwrap().to_owned();
    assert_eq!(lines[1]["images"], json!([name]), "the entry names the image the intent wrote");
    assert_eq!(std::fs::read_to_string(base.path().join("journal/images").join(&name)).unwrap(), "shared before\n");
    let (failed, undone) = answer(&tools, "undo_changes", &json!({}));
    assert_eq!((failed, undone.as_str()), (false, "restored /w/shared.txt\n"));
    assert_eq!(std::fs::read_to_string(base.path().join("w/shared.txt")).unwrap(), "shared before\n");
}

/// A tree removal stopped part way (at a file with another hard link) is undone whole by
/// undoing its call's changes: the files it took and the directories it removed, an empty
/// one too, each with its mode. (The directories were gone for good: only the files were
/// recorded, and an undo made their directories again with the umask's mode.)
#[test]
fn a_tree_removal_stopped_part_way_is_undone_with_its_directories() {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let w = base.path().join("w");
    std::fs::create_dir_all(w.join("t/a")).unwrap();
    std::fs::create_dir_all(w.join("t/b")).unwrap();
    std::fs::create_dir_all(w.join("t/c")).unwrap();
    std::fs::write(w.join("t/a/x.txt"), "x\n").unwrap();
    std::fs::write(w.join("t/c/y.txt"), "y\n").unwrap();
    std::fs::hard_link(w.join("t/c/y.txt"), base.path().join("elsewhere.txt")).unwrap();
    std::fs::set_permissions(w.join("t/a"), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(w.join("t/b"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let tools = launch.tools(None);
    let (error, text) = answer(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    assert!(error);
    assert_eq!(
        text,
        "`/w/t` was not deleted whole: `/w/t/c/y.txt` has other hard links, and the journal of changes keeps a deleted tree only when it can keep each of its files; delete that file by itself first (what this delete removed before it can be undone)"
    );
    assert!(!w.join("t/a").exists() && !w.join("t/b").exists());
    let listed = call(&tools, "list_changes", &json!({}));
    assert_eq!(listed.lines().count(), 3, "{listed}");
    let (error, text) = answer(&tools, "undo_changes", &json!({ "count": 3 }));
    assert_eq!((error, text.as_str()), (false, "restored /w/t/a\nrestored /w/t/b\nrestored /w/t/a/x.txt\n"));
    assert_eq!(std::fs::read_to_string(w.join("t/a/x.txt")).unwrap(), "x\n");
    let mode = |name: &str| std::fs::metadata(w.join(name)).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode("t/a"), mode("t/b")), (0o711, 0o750));
    assert_eq!(std::fs::read_to_string(w.join("t/c/y.txt")).unwrap(), "y\n");
}

/// The log replaced behind a running process by something it cannot append to (a directory
/// here; a FIFO or an immutable file alike): the next change is refused, never appended to the
/// removed file it held, where nobody reads it and the next start sweeps its image. Once the
/// name gives a log again, changes go on and are undoable.
#[test]
fn a_log_replaced_under_a_running_process_refuses_the_next_change() {
    let base = tempfile::tempdir().unwrap();
    let launch = launch(base.path());
    let tools = launch.tools(None);
    std::fs::write(base.path().join("w/a.txt"), "hello\n").unwrap();
    call(&tools, "write_file", &json!({ "path": "/w/b.txt", "content": "b\n" }));
    let log = base.path().join("journal/journal.jsonl");
    std::fs::remove_file(&log).unwrap();
    std::fs::create_dir(&log).unwrap();
    let write = json!({ "path": "/w/a.txt", "content": "changed\n", "overwrite": true });
    assert_eq!(
        answer(&tools, "write_file", &write),
        (
            true,
            "`/w/a.txt` was not changed: vfs could not record the change in its journal (where every change is kept so that it can be undone); tell the operator, whose log says why".to_owned()
        )
    );
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "hello\n");
    std::fs::remove_dir(&log).unwrap();
    call(&tools, "write_file", &write);
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "restored /w/a.txt\n".to_owned()));
    assert_eq!(std::fs::read_to_string(base.path().join("w/a.txt")).unwrap(), "hello\n");
}

/// A tmpfs of a few pages mounted at a directory, unmounted (lazily) when dropped: a disk that
/// fills. `None`, saying why, where this process may not mount (not root).
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "vfs-test"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !mounted {
            // Where the FUSE tests must run (root, /dev/fuse), a tmpfs can be mounted too.
            assert!(
                std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
                "VFS_REQUIRE_FUSE is set, but tmpfs cannot be mounted"
            );
            #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
            {
                eprintln!("SKIPPED: a full disk is a small tmpfs, and mounting one needs root");
            }
            return None;
        }
        Some(Self(at.to_path_buf()))
    }

    /// Fills the disk: a file `filler` written until no page more fits.
    fn fill(&self) -> std::fs::File {
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        while std::io::Write::write_all(&mut filler, &[0; 4096]).is_ok() {}
        filler
    }

    /// Room again: `filler` removed.
    fn empty(&self) {
        std::fs::remove_file(self.0.join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Two tree removals at once on a disk that fills: the room each makes sure of as it grows is
/// counted with the other's, so neither leaves a file taken without its record. Each is
/// refused whole (no room for its intent), stops part way, or goes through whole; every
/// change is undoable (none cut short), and with room again, undoing each session's changes
/// puts both trees back whole. With 64 KiB left, the records of both whole trees would not
/// fit (one stops part way, the other finds no room for its intent); with 320 KiB, both
/// begin and either may go through.
#[test]
fn two_tree_removals_at_once_on_a_disk_that_fills_leave_every_file_taken_recorded() {
    for left in [64 * 1024, 320 * 1024] {
        two_tree_removals_at_once(left);
    }
}

fn two_tree_removals_at_once(left: u64) {
    const FILES: usize = 400;
    let base = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&base.path().join("disk"), "1m") else { return };
    let root = disk.0.clone();
    let launch = launch(&root);
    let name = |index: usize| format!("{index:04}-{}", "n".repeat(120));
    for tree in ["t1", "t2"] {
        std::fs::create_dir_all(root.join("w").join(tree)).unwrap();
        for index in 0..FILES {
            std::fs::write(root.join("w").join(tree).join(name(index)), "").unwrap();
        }
    }
    let names = |tree: &str| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(root.join("w").join(tree)) else { return Vec::new() };
        let mut names: Vec<String> = entries.map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    };
    let sessions = [launch.tools(None), launch.tools(None)];
    call(&sessions[0], "write_file", &json!({ "path": "/w/first.txt", "content": "the log is open\n" }));
    // Full but for a little (about the room one removal's records need), so that both begin
    // and the room runs out while both run: either may go through whole, stop part way, or
    // find no room for its intent.
    let filler = disk.fill();
    let length = filler.metadata().unwrap().len();
    filler.set_len(length.saturating_sub(left)).unwrap();
    drop(filler);

    let answers: Vec<(bool, String)> = std::thread::scope(|scope| {
        let deletes: Vec<_> = ["t1", "t2"]
            .iter()
            .zip(&sessions)
            .map(|(tree, tools)| {
                scope.spawn(move || {
                    answer(tools, "delete_file", &json!({ "path": format!("/w/{tree}"), "recursive": true }))
                })
            })
            .collect();
        deletes.into_iter().map(|delete| delete.join().unwrap()).collect()
    });
    let mut undo_counts = Vec::new();
    for (tree, (error, text)) in ["t1", "t2"].iter().zip(&answers) {
        let taken = FILES - names(tree).len();
        let refused = format!(
            "`/w/{tree}` was not changed: vfs could not record the change in its journal (where every change is kept so that it can be undone); tell the operator, whose log says why"
        );
        if *error && *text == refused {
            // No room for even its intent: nothing taken.
            assert_eq!(taken, 0, "{tree}");
            undo_counts.push(0);
        } else if *error {
            let stopped =
                format!("`/w/{tree}` was not deleted whole: vfs could not record the deletion of `/w/{tree}/");
            assert!(text.starts_with(&stopped), "{text}");
            assert!(taken < FILES, "{tree}: {taken} taken");
            undo_counts.push(taken);
        } else {
            assert_eq!(text, &format!("deleted directory `/w/{tree}`"));
            undo_counts.push(1);
        }
    }
    let states = states_of(&root);
    assert_eq!(states.len(), 1 + undo_counts.iter().sum::<usize>(), "{answers:?} {states:?}");
    assert!(states.iter().all(|(_, state)| state == "undoable"), "{states:?}");

    disk.empty();
    for (tools, count) in sessions.iter().zip(&undo_counts) {
        if *count > 0 {
            let (error, text) = answer(tools, "undo_changes", &json!({ "count": count }));
            assert!(!error, "{text}");
        }
    }
    let all: Vec<String> = (0..FILES).map(name).collect();
    assert_eq!((names("t1"), names("t2")), (all.clone(), all));
}

/// A disk that fills between a change and its entry cannot leave the change made without
/// it: before each change the journal keeps room allocated past its log's end. Positioned so
/// that the next move's intent fits in the log's last page and its entry does not, then with
/// the disk filled, the moves go on, each with its entry, while that room lasts, and then are
/// refused with nothing moved; no entry is ever incomplete. (Before, the first move was made,
/// its entry failed, and it stood `not undoable (incomplete)`.)
#[test]
fn a_disk_that_fills_leaves_no_change_without_its_entry() {
    const PAGE: usize = 4096;
    let base = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&base.path().join("disk"), "1m") else { return };
    let root = disk.0.clone();
    let launch = launch(&root);
    std::fs::write(root.join("w/a.txt"), "moved back and forth\n").unwrap();
    let tools = launch.tools(None);
    let mut at = "a";
    let mut move_once = || {
        let to = if at == "a" { "b" } else { "a" };
        let arguments = json!({ "source": format!("/w/{at}.txt"), "destination": format!("/w/{to}.txt") });
        let answer = answer(&tools, "move_file", &arguments);
        if !answer.0 {
            at = to;
        }
        (answer, format!("/w/{at}.txt"))
    };
    let log = || std::fs::read_to_string(root.join("journal/journal.jsonl")).unwrap();
    let mut positioned = false;
    for _ in 0..400 {
        let ((error, text), _) = move_once();
        assert!(!error, "{text}");
        let log = log();
        let lines: Vec<&str> = log.lines().collect();
        let (intent, entry) = (lines[lines.len() - 2].len() + 1, lines[lines.len() - 1].len() + 1);
        let room = (PAGE - log.len() % PAGE) % PAGE;
        if room >= intent + 16 && room + 16 < intent + entry {
            positioned = true;
            break;
        }
    }
    assert!(positioned, "the log's end never fell where an intent fits and its entry does not");

    let filler = disk.fill();
    let mut made = 0;
    let refused = loop {
        assert!(made < 200, "the disk is full, yet every move is made");
        let ((error, text), now) = move_once();
        if error {
            break (text, now);
        }
        made += 1;
    };
    let (text, left) = refused;
    assert_eq!(
        text,
        format!(
            "`{left}` was not changed: vfs could not record the change in its journal (where every change is kept so that it can be undone); tell the operator, whose log says why"
        )
    );
    assert!(root.join(&left[1..]).exists(), "the refused move moved nothing");
    assert!(made > 0, "the room kept ahead took no change");
    let states = states_of(&root);
    assert!(states.iter().all(|(_, state)| state == "undoable"), "{states:?}");
    assert_eq!(states.len(), log().lines().count() / 2, "an entry for every intent");

    // Room again: the next move is made, and undone.
    drop(filler);
    disk.empty();
    let ((error, text), _) = move_once();
    assert!(!error, "{text}");
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, format!("restored {left}\n")));
}

/// The room kept for a removal is reckoned near what its record takes, and the disk is asked
/// for no more than that when it has no more: a tree whose entry fits is removed whole. (A
/// review found 3,000 files on a fresh 2 MiB disk stopped at the 1,482nd: the reckoning was
/// about three times the record, and twice that was asked of the disk.)
#[test]
fn a_tree_removal_whose_record_fits_on_a_small_disk_is_made_whole() {
    const FILES: usize = 3_000;
    let base = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&base.path().join("disk"), "2m") else { return };
    let root = disk.0.clone();
    let launch = launch(&root);
    std::fs::create_dir_all(root.join("w/t")).unwrap();
    for index in 0..FILES {
        std::fs::write(root.join(format!("w/t/f{index}")), "").unwrap();
    }
    let tools = launch.tools(None);
    assert_eq!(
        answer(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true })),
        (false, "deleted directory `/w/t`".to_owned())
    );
    assert_eq!(states_of(&root), [("/w/t".to_owned(), "undoable".to_owned())]);
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "restored /w/t\n".to_owned()));
    assert_eq!(std::fs::read_dir(root.join("w/t")).unwrap().count(), FILES);
}

/// The room kept ahead grows with the record owed: a tree's removal keeps its files as it
/// goes and names each in its entry, so the journal makes sure of room for each file before
/// it is taken. On a full disk the removal stops part way, each file it took recorded (an
/// entry of its own, undoable); with room again, the whole tree's removal is recorded, and
/// so is its undo (one part a file). (Before, the removal's small intent fit in the room
/// kept for any change, the whole tree was removed, and its entry, too large for the room
/// left, was cut short: `not undoable (incomplete)`.)
#[test]
fn a_tree_removal_on_a_disk_that_fills_stops_with_each_file_it_took_recorded() {
    const FILES: usize = 400;
    let base = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(&base.path().join("disk"), "1m") else { return };
    let root = disk.0.clone();
    let launch = launch(&root);
    std::fs::create_dir_all(root.join("w/t")).unwrap();
    let name = |index: usize| format!("{index:04}-{}", "n".repeat(120));
    for index in 0..FILES {
        std::fs::write(root.join("w/t").join(name(index)), "").unwrap();
    }
    let names = || {
        let mut names: Vec<String> = std::fs::read_dir(root.join("w/t"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    let tools = launch.tools(None);
    call(&tools, "write_file", &json!({ "path": "/w/first.txt", "content": "a change, so that the log is open\n" }));
    disk.fill();

    let (error, text) = answer(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true }));
    assert!(error);
    let left = names();
    let taken = FILES - left.len();
    assert!(taken > 0 && taken < FILES, "{taken} of {FILES} files taken");
    let stopped_at = text.split('`').nth(3).unwrap_or_default().to_owned();
    assert_eq!(
        text,
        format!(
            "`/w/t` was not deleted whole: vfs could not record the deletion of `{stopped_at}` in its journal (where every change is kept so that it can be undone), so it stopped there; anything it deleted before can be undone; tell the operator, whose log says why"
        )
    );
    assert!(left.iter().any(|left| format!("/w/t/{left}") == stopped_at), "it stopped at a file it left");
    let states = states_of(&root);
    assert_eq!(states.len(), 1 + taken, "an entry for each file taken: {states:?}");
    assert!(states.iter().all(|(_, state)| state == "undoable"), "{states:?}");

    // Room again: what it took is put back, and the whole tree's removal is recorded and
    // undone.
    disk.empty();
    let (error, text) = answer(&tools, "undo_changes", &json!({ "count": taken }));
    assert!(!error, "{text}");
    assert_eq!(text.lines().count(), taken);
    assert_eq!(names(), (0..FILES).map(name).collect::<Vec<_>>());
    assert_eq!(
        answer(&tools, "delete_file", &json!({ "path": "/w/t", "recursive": true })),
        (false, "deleted directory `/w/t`".to_owned())
    );
    // The disk full again: the undo runs in the room the removal's entry left.
    disk.fill();
    assert_eq!(answer(&tools, "undo_changes", &json!({})), (false, "restored /w/t\n".to_owned()));
    assert_eq!(names(), (0..FILES).map(name).collect::<Vec<_>>());
    let states = states_of(&root);
    assert_eq!(states.len(), 1 + 2 * taken + 2, "{states:?}");
    assert!(states.iter().all(|(_, state)| state == "undoable" || state == "undone"), "{states:?}");
}
