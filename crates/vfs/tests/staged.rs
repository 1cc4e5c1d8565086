//! Staged writes (`AgentAccessor::stage`): a file's next content built at offsets and
//! committed whole under a precondition, or dropped; on a local mount and, with the `s3`
//! feature, an in-process object store. What a front end that writes piece by piece (the FUSE
//! view) relies on: readers see the old content until the commit, a failed or dropped stage
//! changes nothing, the rights and name rules are the gate's, the change feed is told once.
#![expect(clippy::disallowed_methods, reason = "tests look at what the fixture's directory holds")]

mod common;

use std::sync::{Arc, Mutex};

use common::Fixture;
use vfs::{Change, ChangeKind, ChangeObserver, MountRegistry, NameRule, Precondition, ReadWindow, StageFrom};

#[derive(Debug, Default)]
struct Kinds(Mutex<Vec<(ChangeKind, String)>>);

impl ChangeObserver for Kinds {
    fn changed(&self, change: &Change<'_>) {
        self.0.lock().unwrap().push((change.kind, change.path.to_string()));
    }
}

fn read(agent: &vfs::AgentAccessor, path: &str) -> String {
    agent.read_text(path, &ReadWindow::default()).unwrap().content
}

/// The same sequence on any store mounted at `/w` (read-write).
fn exercise(registry: &MountRegistry, changes: &Kinds) {
    let agent = registry.agent();
    agent.write("/w/a.txt", "hello world\n", &vfs::Precondition::Absent).unwrap();
    let version = agent.info("/w/a.txt").unwrap().version.unwrap();
    changes.0.lock().unwrap().clear();

    // Built from the current content, at offsets; readers see the old content meanwhile.
    let mut staged = agent.stage("/w/a.txt", StageFrom::Current).unwrap();
    assert_eq!(staged.len(), 12);
    staged.write_at(6, b"there").unwrap();
    staged.write_at(12, b"and more\n").unwrap();
    assert_eq!(read(&agent, "/w/a.txt"), "hello world\n");
    // A precondition that no longer holds commits nothing.
    let stale = staged.commit(&Precondition::Version("0000000000000000".to_owned())).unwrap_err();
    assert_eq!(stale.kind(), vfs::ErrorKind::VersionMismatch);
    assert_eq!(read(&agent, "/w/a.txt"), "hello world\n");
    assert_eq!(changes.0.lock().unwrap().len(), 0);

    let mut staged = agent.stage("/w/a.txt", StageFrom::Current).unwrap();
    staged.write_at(6, b"there").unwrap();
    staged.write_at(12, b"and more\n").unwrap();
    let written = staged.commit(&Precondition::Version(version)).unwrap();
    let after = written.version.clone().unwrap();
    assert_eq!(written.to_text(), format!("replaced `/w/a.txt` (21 bytes, version {after})"));
    assert_eq!(read(&agent, "/w/a.txt"), "hello there\nand more\n");
    assert_eq!(written.version, agent.info("/w/a.txt").unwrap().version);

    // From empty, cut and extended; a create refuses a file that exists, then succeeds where
    // none does.
    let mut staged = agent.stage("/w/b.txt", StageFrom::Empty).unwrap();
    staged.write_at(0, b"0123456789").unwrap();
    staged.set_len(4).unwrap();
    staged.set_len(6).unwrap();
    staged.write_at(5, b"b\n").unwrap();
    staged.write_at(4, b"a").unwrap();
    let created = staged.commit(&Precondition::Absent).unwrap();
    assert!(created.created);
    assert_eq!(read(&agent, "/w/b.txt"), "0123ab\n");
    let staged = agent.stage("/w/b.txt", StageFrom::Empty).unwrap();
    assert_eq!(
        staged.commit(&Precondition::Absent).unwrap_err().to_string(),
        "`/w/b.txt` already exists; ask for an overwrite to replace it"
    );

    // Dropped: nothing changes.
    let mut staged = agent.stage("/w/a.txt", StageFrom::Empty).unwrap();
    staged.write_at(0, b"gone").unwrap();
    drop(staged);
    assert_eq!(read(&agent, "/w/a.txt"), "hello there\nand more\n");

    // Bounded by the write cap before anything is written.
    let mut staged = agent.stage("/w/c.txt", StageFrom::Empty).unwrap();
    let cap = registry.limits().write_bytes;
    assert_eq!(staged.write_at(cap, b"x").unwrap_err().kind(), vfs::ErrorKind::TooLarge);

    assert_eq!(
        *changes.0.lock().unwrap(),
        [(ChangeKind::Write, "/w/a.txt".to_owned()), (ChangeKind::Write, "/w/b.txt".to_owned())]
    );
}

#[test]
fn a_staged_write_appears_whole_at_its_commit_on_a_local_mount() {
    let fixture = Fixture::new();
    fixture.mkdir("w");
    let changes = Arc::new(Kinds::default());
    let registry = MountRegistry::builder()
        .mount(fixture.spec("w", "/w", "rw"))
        .observe(changes.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    exercise(&registry, &changes);
    // No stage leaves a temporary file behind.
    let mut names: Vec<String> = std::fs::read_dir(fixture.path("w"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["a.txt", "b.txt"]);
}

/// A recursive delete of a tree in which a stage is being built removes the stage's
/// temporary file with the tree (it cannot tell it from one a crash left behind): the commit
/// then fails as changed, and creates nothing, not even the directory again.
/// A commit refused before its put hands the stage back, whole, to be read (the view builds
/// an append's next content from it).
#[test]
fn a_stage_refused_before_its_put_is_handed_back_to_be_read() {
    let fixture = Fixture::new();
    fixture.file("w/a.txt", "base\n");
    let registry =
        MountRegistry::builder().mount(fixture.spec("w", "/w", "rw")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    let mut staged = agent.stage("/w/a.txt", StageFrom::Current).unwrap();
    staged.write_at(5, b"mine\n").unwrap();
    let stale = Precondition::Version("0000000000000000".to_owned());
    let (error, kept) = staged.commit_or_keep(&stale).unwrap_err();
    assert_eq!(error.kind(), vfs::ErrorKind::VersionMismatch);
    let kept = kept.expect("handed back");
    assert_eq!(kept.read_at(0, 100).unwrap(), b"base\nmine\n");
    assert_eq!(read(&agent, "/w/a.txt"), "base\n");
}

#[cfg(feature = "s3")]
#[test]
fn an_object_stage_refused_by_its_conditional_put_has_nothing_to_hand_back() {
    let objects = MountRegistry::builder()
        .mount("memory://kept:/w:rw".parse::<vfs::MountSpec>().unwrap())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = objects.agent();
    agent.write("/w/a.txt", "base\n", &Precondition::Absent).unwrap();
    let staged = agent.stage("/w/a.txt", StageFrom::Current).unwrap();
    let stale = Precondition::Version("0000000000000000".to_owned());
    let (error, kept) = staged.commit_or_keep(&stale).unwrap_err();
    assert_eq!(error.kind(), vfs::ErrorKind::VersionMismatch);
    assert!(kept.is_none());
}

#[test]
fn a_stage_in_a_tree_deleted_meanwhile_commits_nothing() {
    let fixture = Fixture::new();
    fixture.file("w/d/a.txt", "a\n");
    let registry =
        MountRegistry::builder().mount(fixture.spec("w", "/w", "rw")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    let mut staged = agent.stage("/w/d/new.txt", StageFrom::Empty).unwrap();
    staged.write_at(0, b"mine\n").unwrap();
    assert_eq!(agent.delete("/w/d", true, &Precondition::Any).unwrap().to_text(), "deleted directory `/w/d`");
    staged.write_at(5, b"more\n").unwrap();
    assert_eq!(
        staged.commit(&Precondition::Absent).unwrap_err().to_string(),
        "`/w/d/new.txt` changed while vfs was working on it; try again"
    );
    assert!(!fixture.path("w/d").exists());
}

#[cfg(feature = "s3")]
#[test]
fn a_staged_write_appears_whole_at_its_commit_on_an_object_store() {
    let changes = Arc::new(Kinds::default());
    let registry = MountRegistry::builder()
        .mount("memory://staged:/w:rw".parse::<vfs::MountSpec>().unwrap())
        .observe(changes.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    exercise(&registry, &changes);
}

#[test]
fn a_stage_is_authorized_by_the_gate_as_a_write() {
    let fixture = Fixture::new();
    fixture.file("w/.env", "SECRET=1\n");
    fixture.file("r/a.txt", "read only\n");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("w", "/w", "rw"))
        .mount(fixture.spec("r", "/r", "ro"))
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    assert_eq!(
        agent.stage("/r/a.txt", StageFrom::Current).unwrap_err().to_string(),
        "cannot write `/r/a.txt`: `/r` is mounted ro; mounts that grant write: `/w` (rw)"
    );
    assert_eq!(agent.stage("/w/.env", StageFrom::Current).unwrap_err().kind(), vfs::ErrorKind::PermissionDenied);
    assert_eq!(agent.stage("/nowhere/a.txt", StageFrom::Empty).unwrap_err().kind(), vfs::ErrorKind::UnknownRoot);
    assert_eq!(fixture.read("w/.env"), "SECRET=1\n");
    assert_eq!(fixture.read("r/a.txt"), "read only\n");
}

/// A stage in place (the FUSE view's) makes no parents: a directory that is not there is not
/// made, and the stage is refused as missing. It keeps the checks a write makes before it
/// makes parents: a file staged through a read-only mount's path is refused even where it
/// lands in a writable mount nested in it, as a write is.
#[test]
fn a_stage_in_place_makes_no_parents_and_is_judged_as_a_write() {
    let fixture = Fixture::new();
    fixture.file("outer/p/w/f.txt", "f\n");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("outer", "/r", "ro"))
        .mount(fixture.spec("outer/p/w", "/w", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let missing = agent.stage_in_place("/w/gone/new.txt", StageFrom::Empty).unwrap_err();
    assert_eq!(
        (missing.kind(), missing.to_string()),
        (vfs::ErrorKind::NotFound, "`/w/gone/new.txt` does not exist".to_owned())
    );
    assert!(!fixture.path("outer/p/w/gone").exists());
    let write = agent.write("/r/p/w/g.txt", "x", &Precondition::Absent).unwrap_err().to_string();
    let staged = agent.stage_in_place("/r/p/w/g.txt", StageFrom::Empty).unwrap_err().to_string();
    assert_eq!(staged, "cannot write `/r/p/w/g.txt`: `/r` is mounted ro; mounts that grant write: `/w` (rw)");
    assert_eq!(staged, write);
    // Where the directory is there, it stages and commits as `stage` does.
    let mut staged = agent.stage_in_place("/w/g.txt", StageFrom::Empty).unwrap();
    staged.write_at(0, b"mine\n").unwrap();
    assert!(staged.commit(&Precondition::Absent).unwrap().created);
    assert_eq!(fixture.read("outer/p/w/g.txt"), "mine\n");
}
