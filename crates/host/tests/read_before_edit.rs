//! A model-based test of read-before-edit: random sequences of reads, edits, overwrites,
//! moves, deletes and changes made behind the session's back, against a model of what the
//! session has seen. After every step the answer is the model's (done, or the exact refusal)
//! and the disk holds the model's content.
//!
//! CI runs `VFS_MODEL_CASES` cases (default 256) of up to 30 steps.
#![expect(clippy::disallowed_methods, reason = "fixture: the test changes files behind the session's back")]

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{Value, json};
use vfs::{MountRegistry, MountRoot, MountSpec, Rights};
use vfs_host::ToolService;

const FILES: [&str; 2] = ["a.txt", "b.txt"];

#[derive(Debug, Clone)]
enum Step {
    /// `read_text_file` of the whole file.
    Read(usize),
    /// `read_text_file` of its first line only: a read of the file only when that is all of it.
    ReadHead(usize),
    /// `edit_file`: every newline gets an `x` after it.
    Edit(usize),
    /// `write_file` with `overwrite: true`.
    Overwrite(usize, u8),
    /// `move_file` of one file onto the other's name, `overwrite: true`: it replaces the other
    /// file, so that one must have been seen.
    Move(usize),
    /// `delete_file`: it loses the file, so the file must have been seen.
    Delete(usize),
    /// Another program writes the file.
    Behind(usize, u8),
    /// Another program removes the file (what the session saw of it is gone: nothing unseen
    /// is lost by writing there, and the session's overwrite creates the file).
    Gone(usize),
}

fn step() -> impl Strategy<Value = Step> {
    let file = 0..FILES.len();
    prop_oneof![
        4 => file.clone().prop_map(Step::Read),
        1 => file.clone().prop_map(Step::ReadHead),
        4 => file.clone().prop_map(Step::Edit),
        3 => (file.clone(), any::<u8>()).prop_map(|(index, value)| Step::Overwrite(index, value)),
        1 => file.clone().prop_map(Step::Move),
        1 => file.clone().prop_map(Step::Delete),
        2 => (file.clone(), any::<u8>()).prop_map(|(index, value)| Step::Behind(index, value)),
        1 => file.prop_map(Step::Gone),
    ]
}

/// What the model expects of a step.
#[derive(Debug, PartialEq, Eq)]
enum Expected {
    Done,
    /// The exact text of a tool error.
    Refused(String),
}

struct Model {
    /// The files' content on disk.
    content: BTreeMap<usize, String>,
    /// What the session has seen of each file (a whole read, or its own write).
    seen: BTreeMap<usize, String>,
}

impl Model {
    fn unread(&self, index: usize) -> String {
        let path = format!("/w/{}", FILES[index]);
        if self.seen.contains_key(&index) {
            format!("read `{path}` first (it changed since you read it)")
        } else {
            format!(
                "read `{path}` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports"
            )
        }
    }

    fn missing(index: usize) -> String {
        format!("`/w/{}` does not exist", FILES[index])
    }

    /// Applies `step` to the model and says what the service must answer.
    fn apply(&mut self, step: &Step) -> Option<Expected> {
        match *step {
            Step::Read(index) => Some(match self.content.get(&index) {
                Some(content) => {
                    self.seen.insert(index, content.clone());
                    Expected::Done
                }
                None => Expected::Refused(Self::missing(index)),
            }),
            Step::ReadHead(index) => Some(match self.content.get(&index) {
                Some(content) => {
                    if content.lines().count() <= 1 {
                        self.seen.insert(index, content.clone());
                    }
                    Expected::Done
                }
                None => Expected::Refused(Self::missing(index)),
            }),
            Step::Edit(index) => Some(match self.content.get(&index) {
                None => Expected::Refused(Self::missing(index)),
                Some(content) if self.seen.get(&index) == Some(content) => {
                    let edited = content.replace('\n', "\nx");
                    self.content.insert(index, edited.clone());
                    self.seen.insert(index, edited);
                    Expected::Done
                }
                Some(_) => Expected::Refused(self.unread(index)),
            }),
            Step::Overwrite(index, value) => {
                let new = format!("v{value}\n");
                Some(match self.content.get(&index) {
                    Some(content) if self.seen.get(&index) != Some(content) => Expected::Refused(self.unread(index)),
                    _ => {
                        self.content.insert(index, new.clone());
                        self.seen.insert(index, new);
                        Expected::Done
                    }
                })
            }
            Step::Move(index) => {
                let other = 1 - index;
                if !self.content.contains_key(&index) {
                    return Some(Expected::Refused(Self::missing(index)));
                }
                // Replacing the other file is an overwrite of it: it must have been seen.
                if let Some(there) = self.content.get(&other)
                    && self.seen.get(&other) != Some(there)
                {
                    return Some(Expected::Refused(self.unread(other)));
                }
                Some(match self.content.remove(&index) {
                    Some(content) => {
                        self.content.insert(other, content);
                        self.seen.remove(&other);
                        if let Some(seen) = self.seen.remove(&index) {
                            self.seen.insert(other, seen);
                        }
                        Expected::Done
                    }
                    None => Expected::Refused(Self::missing(index)),
                })
            }
            // A delete loses the file's content, as an overwrite does: it must have been seen.
            Step::Delete(index) => Some(match self.content.get(&index) {
                Some(content) if self.seen.get(&index) == Some(content) => {
                    self.content.remove(&index);
                    self.seen.remove(&index);
                    Expected::Done
                }
                Some(_) => Expected::Refused(self.unread(index)),
                None => Expected::Refused(Self::missing(index)),
            }),
            Step::Behind(index, value) => {
                self.content.insert(index, format!("e{value}\n"));
                None
            }
            Step::Gone(index) => {
                self.content.remove(&index);
                None
            }
        }
    }
}

fn cases() -> u32 {
    std::env::var("VFS_MODEL_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(256)
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    std::fs::create_dir(&root).unwrap();
    let mut model = Model { content: BTreeMap::new(), seen: BTreeMap::new() };
    for (index, name) in FILES.iter().enumerate() {
        std::fs::write(root.join(name), "start\n").unwrap();
        model.content.insert(index, "start\n".to_owned());
    }
    let spec = MountSpec::new(root.to_str().unwrap(), MountRoot::new("/w").unwrap(), Rights::ReadWrite);
    let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
    let tools = ToolService::new(registry, None);
    for step in steps {
        let path = |index: usize| format!("/w/{}", FILES[index]);
        let call = |name: &str, arguments: Value| tools.call(name, arguments.as_object().cloned()).unwrap();
        let output = match *step {
            Step::Read(index) => Some(call("read_text_file", json!({ "path": path(index) }))),
            Step::ReadHead(index) => Some(call("read_text_file", json!({ "path": path(index), "head": 1 }))),
            Step::Edit(index) => Some(call(
                "edit_file",
                json!({ "path": path(index), "edits": [{ "oldText": "\n", "newText": "\nx" }], "replaceAll": true }),
            )),
            Step::Overwrite(index, value) => Some(call(
                "write_file",
                json!({ "path": path(index), "content": format!("v{value}\n"), "overwrite": true }),
            )),
            Step::Move(index) => Some(call(
                "move_file",
                json!({ "source": path(index), "destination": path(1 - index), "overwrite": true }),
            )),
            Step::Delete(index) => Some(call("delete_file", json!({ "path": path(index) }))),
            Step::Behind(index, value) => {
                std::fs::write(root.join(FILES[index]), format!("e{value}\n")).unwrap();
                None
            }
            Step::Gone(index) => {
                let _ = std::fs::remove_file(root.join(FILES[index]));
                None
            }
        };
        let expected = model.apply(step);
        if let (Some(output), Some(expected)) = (output, expected) {
            let got = if output.is_error { Expected::Refused(output.text.clone()) } else { Expected::Done };
            prop_assert_eq!(got, expected, "after {:?}: {}", step, output.text);
        }
        for (index, name) in FILES.iter().enumerate() {
            let on_disk = std::fs::read_to_string(root.join(name)).ok();
            prop_assert_eq!(on_disk.as_ref(), model.content.get(&index), "{} after {:?}", name, step);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_session_changes_only_what_it_has_seen(steps in prop::collection::vec(step(), 1..30)) {
        run(&steps)?;
    }
}

/// The sequence: read, edit, edit again, an external change, edit refused, read, edit.
#[test]
fn read_edit_edit_change_refused_read_edit() {
    use Step::{Behind, Edit, Read};
    run(&[Read(0), Edit(0), Edit(0), Behind(0, 7), Edit(0), Read(0), Edit(0)]).unwrap();
    // And the model's answers are the ones asserted: a refusal before any read, and after a
    // change behind the session's back.
    let mut model = Model { content: BTreeMap::from([(0, "start\n".to_owned())]), seen: BTreeMap::new() };
    assert_eq!(
        model.apply(&Edit(0)),
        Some(Expected::Refused(
            "read `/w/a.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports".to_owned()
        ))
    );
    model.apply(&Read(0));
    model.apply(&Behind(0, 1));
    assert_eq!(
        model.apply(&Edit(0)),
        Some(Expected::Refused("read `/w/a.txt` first (it changed since you read it)".to_owned()))
    );
}

/// A session's overwrite of a file it wrote, sent at the same time as its own move of that
/// file away: both succeed, whichever goes first (before, the write was often refused as
/// "changed since you read it", of a file the session had only moved), and no content is
/// lost. The same for a move onto a file the session saw that another of its calls moves
/// away at the same time.
#[test]
fn an_overwrite_beside_the_sessions_own_move_of_that_file_succeeds_whichever_goes_first() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    std::fs::create_dir(&root).unwrap();
    let spec = MountSpec::new(root.to_str().unwrap(), MountRoot::new("/w").unwrap(), Rights::ReadWrite);
    let tools = ToolService::new(MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap(), None);
    let call = |name: &str, arguments: Value| tools.call(name, arguments.as_object().cloned()).unwrap();
    for round in 0..200 {
        let (file, moved) = (format!("/w/f{round}.txt"), format!("/w/g{round}.txt"));
        let written = call("write_file", json!({ "path": file, "content": "old\n" }));
        assert!(!written.is_error, "{}", written.text);
        let (write, shift) = std::thread::scope(|scope| {
            let write =
                scope.spawn(|| call("write_file", json!({ "path": file, "content": "new\n", "overwrite": true })));
            let shift = scope.spawn(|| call("move_file", json!({ "source": file, "destination": moved })));
            (write.join().unwrap(), shift.join().unwrap())
        });
        assert!(!write.is_error && !shift.is_error, "round {round}: {} / {}", write.text, shift.text);
        let read = |path: &str| std::fs::read_to_string(root.join(path.trim_start_matches("/w/"))).ok();
        // The move went first and the write made the file again, or the write went first
        // and its content moved.
        let after = (read(&file), read(&moved));
        let either = [(Some("new\n".to_owned()), Some("old\n".to_owned())), (None, Some("new\n".to_owned()))];
        assert!(either.contains(&after), "round {round}: {after:?}");
    }
}

/// A service on `/w` (rw) holding `a.txt` ("theirs") and the directory `d`, with the
/// temporary directory that holds them.
fn a_file_and_a_directory() -> (tempfile::TempDir, ToolService) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("w");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("a.txt"), "theirs\n").unwrap();
    let spec = MountSpec::new(root.to_str().unwrap(), MountRoot::new("/w").unwrap(), Rights::ReadWrite);
    (dir, ToolService::new(MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap(), None))
}

/// A move onto an existing file replaces it: the file must have been read, as for an
/// overwrite. Found by an attack review: a created file moved onto an unread one replaced it.
#[test]
fn a_move_replaces_only_a_file_the_session_has_seen() {
    let (dir, tools) = a_file_and_a_directory();
    let root = dir.path().join("w");
    let call = |name: &str, arguments: Value| {
        let output = tools.call(name, arguments.as_object().cloned()).unwrap();
        (output.text, output.is_error)
    };
    let onto = |destination: &str| json!({ "source": "/w/new.txt", "destination": destination, "overwrite": true });
    assert!(!call("write_file", json!({ "path": "/w/new.txt", "content": "mine\n" })).1);
    assert_eq!(
        call("move_file", onto("/w/a.txt")),
        (
            "read `/w/a.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports".to_owned(),
            true
        )
    );
    assert!(!call("read_text_file", json!({ "path": "/w/a.txt" })).1);
    std::fs::write(root.join("a.txt"), "changed behind\n").unwrap();
    assert_eq!(
        call("move_file", onto("/w/a.txt")),
        ("read `/w/a.txt` first (it changed since you read it)".to_owned(), true)
    );
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "changed behind\n");
    // A directory is not replaced whatever was read, and says so.
    assert_eq!(call("move_file", onto("/w/d")), ("cannot replace directory `/w/d`; delete it first".to_owned(), true));
    // Nor a mount root: no read could let it be replaced, so the answer is not "read it first".
    assert_eq!(call("move_file", onto("/w")), ("cannot move onto `/w`: it is a mount root".to_owned(), true));
    assert!(!call("read_text_file", json!({ "path": "/w/a.txt" })).1);
    assert!(!call("move_file", onto("/w/a.txt")).1);
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "mine\n");
    // The moved file counts as seen at its new name: it can be edited at once.
    let edit = json!({ "path": "/w/a.txt", "edits": [{ "oldText": "mine", "newText": "ours" }] });
    assert!(!call("edit_file", edit).1);
}

/// An edit of a place the session never saw: a file is refused as unread by the store's own
/// version guard, under its lock (no look beforehand that a swap could outrun); a directory
/// or a missing name gets the answer it would get anyway.
#[test]
fn an_unseen_place_gets_its_own_answer_and_an_unseen_file_is_refused() {
    let (dir, tools) = a_file_and_a_directory();
    let root = dir.path().join("w");
    let edit = |path: &str| {
        let arguments = json!({ "path": path, "edits": [{ "oldText": "theirs", "newText": "mine" }] });
        let output = tools.call("edit_file", arguments.as_object().cloned()).unwrap();
        (output.text, output.is_error)
    };
    assert_eq!(
        edit("/w/a.txt"),
        (
            "read `/w/a.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports".to_owned(),
            true
        )
    );
    assert_eq!(edit("/w/d"), ("`/w/d` is a directory, not a file".to_owned(), true));
    assert_eq!(edit("/w/none.txt"), ("`/w/none.txt` does not exist".to_owned(), true));
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "theirs\n");
}

/// The side door of the first rule: delete an unread file, then create it again, and the
/// overwrite the rule refuses is done in two calls. A delete needs the file seen, as an
/// overwrite does; a directory is deleted as before.
#[test]
fn a_delete_loses_only_a_file_the_session_has_seen() {
    let (dir, tools) = a_file_and_a_directory();
    let root = dir.path().join("w");
    let call = |name: &str, arguments: Value| {
        let output = tools.call(name, arguments.as_object().cloned()).unwrap();
        (output.text, output.is_error)
    };
    assert_eq!(
        call("delete_file", json!({ "path": "/w/a.txt" })),
        (
            "read `/w/a.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports".to_owned(),
            true
        )
    );
    assert!(!call("read_text_file", json!({ "path": "/w/a.txt" })).1);
    std::fs::write(root.join("a.txt"), "changed behind\n").unwrap();
    assert_eq!(
        call("delete_file", json!({ "path": "/w/a.txt" })),
        ("read `/w/a.txt` first (it changed since you read it)".to_owned(), true)
    );
    assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "changed behind\n");
    assert!(!call("read_text_file", json!({ "path": "/w/a.txt" })).1);
    assert_eq!(call("delete_file", json!({ "path": "/w/a.txt" })), ("deleted file `/w/a.txt`".to_owned(), false));
    assert!(!root.join("a.txt").exists());
    // A file the session wrote itself is seen; a directory needs no read.
    assert!(!call("write_file", json!({ "path": "/w/mine.txt", "content": "mine\n" })).1);
    assert!(!call("delete_file", json!({ "path": "/w/mine.txt" })).1);
    assert!(!call("delete_file", json!({ "path": "/w/d" })).1);
    assert_eq!(
        call("delete_file", json!({ "path": "/w/none.txt" })),
        ("`/w/none.txt` does not exist".to_owned(), true)
    );
}

/// The same side door through a directory: a recursive delete of a directory loses every file
/// in it, so each must have been seen at its current version; the refusal names the first that
/// was not, and nothing is deleted.
#[test]
fn a_recursive_delete_loses_only_files_the_session_has_seen() {
    let (dir, tools) = a_file_and_a_directory();
    let root = dir.path().join("w");
    std::fs::create_dir_all(root.join("d/inner")).unwrap();
    std::fs::write(root.join("d/one.txt"), "one\n").unwrap();
    std::fs::write(root.join("d/inner/two.txt"), "two\n").unwrap();
    let call = |name: &str, arguments: Value| {
        let output = tools.call(name, arguments.as_object().cloned()).unwrap();
        (output.text, output.is_error)
    };
    let delete = || call("delete_file", json!({ "path": "/w/d", "recursive": true }));
    let refused = |file: &str, why: &str| {
        (
            format!(
                "cannot delete `/w/d`: it holds `{file}`, {why}; a delete removes only files this session has seen at their current version, so read it whole first, or delete it by itself with the `expectedVersion` that `get_file_info` reports"
            ),
            true,
        )
    };
    assert!(!call("read_text_file", json!({ "path": "/w/d/one.txt" })).1);
    assert_eq!(delete(), refused("/w/d/inner/two.txt", "which you have not read in this session"));
    assert!(!call("read_text_file", json!({ "path": "/w/d/inner/two.txt" })).1);
    std::fs::write(root.join("d/one.txt"), "changed behind\n").unwrap();
    assert_eq!(delete(), refused("/w/d/one.txt", "which changed since you read it"));
    assert_eq!(std::fs::read_to_string(root.join("d/one.txt")).unwrap(), "changed behind\n");
    assert_eq!(std::fs::read_to_string(root.join("d/inner/two.txt")).unwrap(), "two\n");
    assert!(!call("read_text_file", json!({ "path": "/w/d/one.txt" })).1);
    // What the session wrote itself it has seen; empty directories and links need no read.
    assert!(!call("write_file", json!({ "path": "/w/d/mine.txt", "content": "mine\n" })).1);
    std::fs::create_dir(root.join("d/empty")).unwrap();
    std::os::unix::fs::symlink("one.txt", root.join("d/link")).unwrap();
    assert_eq!(delete(), ("deleted directory `/w/d`".to_owned(), false));
    assert!(!root.join("d").exists());
    // Nothing of the tree is remembered: a file made again at the same path is new.
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::write(root.join("d/one.txt"), "one\n").unwrap();
    assert_eq!(
        call("write_file", json!({ "path": "/w/d/one.txt", "content": "x\n", "overwrite": true })),
        (
            "read `/w/d/one.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports".to_owned(),
            true
        )
    );
}
