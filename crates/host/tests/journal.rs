//! The journal's records on disk: images kept by hard link, one intent before each change,
//! and what a process that stops in the middle of a call leaves (an incomplete entry that undo
//! skips with a note; nothing half-restored).
#![expect(clippy::disallowed_methods, reason = "fixture: trees and the journal's files on disk")]

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use serde_json::{Value, json};
use vfs::Precondition;
use vfs_host::{EntryState, LaunchOptions};

fn launch(base: &Path) -> vfs_host::Launch {
    launch_with(base, &[])
}

fn launch_with(base: &Path, more: &[String]) -> vfs_host::Launch {
    std::fs::create_dir_all(base.join("w")).unwrap();
    let mut mounts = vec![format!("{}:/w:rw", base.join("w").display())];
    mounts.extend_from_slice(more);
    let options = LaunchOptions {
        mounts,
        journal: Some(base.join("journal")),
        no_read_before_edit: true,
        current_dir: base.to_path_buf(),
        ..LaunchOptions::default()
    };
    vfs_host::compose(&options).unwrap()
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

    let entries = vfs_host::open_journal(&base.path().join("journal")).unwrap().entries();
    assert_eq!(entries.all().len(), 1);
    assert_eq!(entries.state(&entries.all()[0]), EntryState::Undoable);
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
    let journal = vfs_host::open_journal(&base.path().join("journal")).unwrap();
    let entries = journal.entries();
    let [entry] = entries.all() else { panic!("{:?}", entries.all()) };
    assert!(entry.incomplete);
    assert_eq!((entry.operation.as_str(), entry.paths.clone()), ("write", vec!["/w/a.txt".to_owned()]));
    assert_eq!(entries.state(entry), EntryState::NotUndoable);
    assert_eq!(entries.state_text(entry), "not undoable (incomplete)");
    let listed = entries.json(entry);
    assert_eq!((&listed["state"], &listed["incomplete"]), (&json!("not undoable"), &json!(true)));

    let launch = launch(base.path());
    let (lines, clean) = launch.journal().unwrap().undo(&launch.registry().agent(), entry, "operator");
    assert_eq!(
        lines,
        [format!(
            "skipped {}: not undoable (incomplete: vfs stopped during this change, which may or may not have been made)",
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
        (true, "cannot move directory `/s/d` to another file system; move its files one by one")
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
    let (lines, clean) = journal.undo(&launch.registry().agent(), newest, "operator");
    assert_eq!((lines, clean), (vec!["restored /s/tree".to_owned()], true));
    assert_eq!(std::fs::read(other.as_ref().unwrap().path().join("tree/sub/x.txt")).unwrap(), b"on tmpfs\n");
}

/// The model-based journal lane: random changes through the tools, with edits made outside
/// vfs mixed in, then every entry undone, newest first.
mod lane {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

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
    }

    fn step(outside: bool) -> impl Strategy<Value = Step> {
        let file = 0..FILES.len();
        let directory = 0..DIRECTORIES.len();
        prop_oneof![
            4 => (file.clone(), any::<u8>()).prop_map(|(file, byte)| Step::Write(file, byte)),
            2 => file.clone().prop_map(Step::Edit),
            1 => directory.clone().prop_map(Step::Mkdir),
            2 => (file.clone(), file.clone()).prop_map(|(from, to)| Step::Move(from, to)),
            2 => file.clone().prop_map(Step::Delete),
            1 => directory.prop_map(Step::DeleteTree),
            (if outside { 2 } else { 0 }) => (file, any::<u8>()).prop_map(|(file, byte)| Step::Outside(file, byte)),
        ]
    }

    /// Every file (with its bytes) and directory (`None`) under `root`, by relative path.
    fn snapshot(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
        let mut found = BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(directory) = stack.pop() {
            for entry in std::fs::read_dir(&directory).unwrap() {
                let path = entry.unwrap().path();
                let relative = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    found.insert(relative, None);
                    stack.push(path);
                } else {
                    found.insert(relative, Some(std::fs::read(&path).unwrap()));
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

    fn run(steps: &[Step]) -> Result<(), TestCaseError> {
        let base = tempfile::tempdir().unwrap();
        let work = base.path().join("w");
        std::fs::create_dir_all(work.join("d")).unwrap();
        std::fs::write(work.join("a.txt"), "start a\n").unwrap();
        std::fs::write(work.join("d/c.txt"), "start c\n").unwrap();
        let start = snapshot(&work);
        let launch = super::launch(base.path());
        let tools = launch.tools(None);
        let mut touched: BTreeSet<String> = BTreeSet::new();
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
                        std::fs::write(&target, format!("outside {byte} {index}\n")).unwrap();
                        touched.extend(with_ancestors(FILES[*file]));
                    }
                    continue;
                }
            };
            let Value::Object(arguments) = arguments else { unreachable!() };
            tools.call(tool, Some(arguments)).unwrap();
        }
        // Undo every entry, newest first, as the operator.
        let journal = launch.journal().unwrap();
        let entries = journal.entries();
        let agent = launch.registry().agent();
        let mut lines = Vec::new();
        // The paths of every entry whose undo met a conflict (a move's conflict names one end,
        // and leaves both).
        let mut conflicts: BTreeSet<String> = BTreeSet::new();
        for entry in entries.undoable_newest(None) {
            let (undone, _) = journal.undo(&agent, entry, "operator");
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
        } else {
            // What differs from the start is what an outside edit touched, or a conflict named.
            for path in start.keys().chain(end.keys()) {
                if start.get(path) != end.get(path) {
                    let explained = touched.contains(path)
                        || conflicts.iter().any(|conflict| {
                            with_ancestors(path).contains(conflict) || with_ancestors(conflict).contains(path)
                        });
                    prop_assert!(
                        explained,
                        "`{path}` differs from the start: {:?} → {:?}\n{lines:#?}",
                        start.get(path),
                        end.get(path)
                    );
                }
            }
        }
        Ok(())
    }

    fn cases() -> u32 {
        std::env::var("VFS_MODEL_JOURNAL_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(64)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn undoing_every_change_puts_back_the_start_exactly(steps in proptest::collection::vec(step(false), 1..25)) {
            run(&steps)?;
        }

        #[test]
        fn with_outside_edits_only_what_they_touched_or_a_conflict_named_differs(steps in proptest::collection::vec(step(true), 1..25)) {
            run(&steps)?;
        }
    }
}
