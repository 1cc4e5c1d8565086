//! The change feed (`crate::changes`): one change for every committed change, with what was
//! there before, the version after and the call's id, told while the change's directory lock
//! is still held; nothing for a call that changed nothing.
#![expect(clippy::disallowed_types, reason = "the observer opens the fixture's directories to try their locks")]

mod common;

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};

use common::Fixture;
use vfs::{Before, Budget, CallId, Change, ChangeKind, ChangeObserver, Edit, EditOptions, MountRegistry, Precondition};

/// One observed change, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    call: String,
    agent: bool,
    kind: ChangeKind,
    path: String,
    to: Option<String>,
    before: Before,
    version: Option<String>,
    /// Whether the directory of the changed place was locked (another `flock` on it failed)
    /// while the observer ran; `None` when that directory no longer exists.
    locked: Option<bool>,
}

/// Records every change, and tries the changed place's directory lock while it is told.
#[derive(Debug)]
struct Recorder {
    /// The physical directory mounted at `/p`, to find the changed place's directory.
    base: std::path::PathBuf,
    seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// Whether the directory holding `path` (or, for a move, `to`) is locked by someone else.
    fn locked(&self, path: &str) -> Option<bool> {
        let relative = path.strip_prefix("/p/")?;
        let parent = self.base.join(relative).parent()?.to_path_buf();
        let directory = std::fs::File::open(parent).ok()?;
        let attempt = rustix::fs::flock(directory.as_fd(), rustix::fs::FlockOperation::NonBlockingLockExclusive);
        Some(attempt.is_err())
    }
}

impl ChangeObserver for Recorder {
    fn changed(&self, change: &Change<'_>) {
        let locked = self.locked(change.to.unwrap_or(change.path).as_str());
        self.seen.lock().unwrap().push(Seen {
            call: change.call.to_string(),
            agent: change.by_agent,
            kind: change.kind,
            path: change.path.to_string(),
            to: change.to.map(ToString::to_string),
            before: change.before.clone(),
            version: change.version.map(str::to_owned),
            locked,
        });
    }
}

fn seen(kind: ChangeKind, path: &str, before: Before, version: Option<&str>, locked: Option<bool>) -> Seen {
    Seen {
        call: String::new(),
        agent: true,
        kind,
        path: path.to_owned(),
        to: None,
        before,
        version: version.map(str::to_owned),
        locked,
    }
}

/// The changes without their call ids (compared on their own below).
fn without_calls(changes: &[Seen]) -> Vec<Seen> {
    changes.iter().cloned().map(|change| Seen { call: String::new(), ..change }).collect()
}

#[test]
fn every_committed_change_is_told_once_with_its_before_and_its_version_under_its_lock() {
    let fixture = Fixture::new();
    fixture.file("p/keep.txt", "keep\n");
    let recorder = Arc::new(Recorder { base: fixture.path("p"), seen: Mutex::new(Vec::new()) });
    let registry = MountRegistry::builder()
        .mount(fixture.spec("p", "/p", "rw"))
        .observe(recorder.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();

    // A write that makes two directories on the way: each is a change, made and told under
    // its directory's lock as the file is, then the file.
    let written = agent.write("/p/a/b/new.txt", "one\n", &Precondition::Absent).unwrap();
    let first = written.version.clone().unwrap();
    let changes = recorder.take();
    assert_eq!(
        without_calls(&changes),
        vec![
            seen(ChangeKind::MakeDirectory, "/p/a", Before::Absent, None, Some(true)),
            seen(ChangeKind::MakeDirectory, "/p/a/b", Before::Absent, None, Some(true)),
            seen(ChangeKind::Write, "/p/a/b/new.txt", Before::Absent, Some(&first), Some(true)),
        ]
    );
    assert!(changes.iter().all(|change| change.call == changes[0].call), "{changes:?}");

    // A guarded overwrite knows the version it replaced; an edit knows the one it read.
    let options = Precondition::Version(first.clone());
    let second = agent.write("/p/a/b/new.txt", "two\n", &options).unwrap().version.unwrap();
    let edit = Edit { old_text: "two".to_owned(), new_text: "three".to_owned() };
    let third = agent.edit("/p/a/b/new.txt", &[edit], &EditOptions::default()).unwrap().version.unwrap();
    let changes = recorder.take();
    assert_eq!(
        without_calls(&changes),
        vec![
            seen(
                ChangeKind::Write,
                "/p/a/b/new.txt",
                Before::File { size: 4, version: Some(first) },
                Some(&second),
                Some(true)
            ),
            seen(
                ChangeKind::Edit,
                "/p/a/b/new.txt",
                Before::File { size: 4, version: Some(second) },
                Some(&third),
                Some(true)
            ),
        ]
    );
    assert_ne!(changes[0].call, changes[1].call, "two calls, two ids");

    // A directory made, and one that was already there (no change).
    agent.create_directory("/p/d").unwrap();
    agent.create_directory("/p/d").unwrap();
    // A move, told once with both ends, under the destination's lock too.
    agent.move_path("/p/a/b/new.txt", "/p/d/moved.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    // A recursive delete is one change for the tree.
    agent.delete("/p/a", true, &Precondition::Any).unwrap();
    assert_eq!(
        without_calls(&recorder.take()),
        vec![
            seen(ChangeKind::MakeDirectory, "/p/d", Before::Absent, None, Some(true)),
            Seen {
                to: Some("/p/d/moved.txt".to_owned()),
                ..seen(ChangeKind::Move, "/p/a/b/new.txt", Before::Absent, None, Some(true))
            },
            seen(ChangeKind::Remove, "/p/a", Before::Directory, None, Some(true)),
        ]
    );

    // Calls that change nothing tell nothing: refused, failed, read.
    agent.write("/p/keep.txt", "x\n", &Precondition::Absent).unwrap_err();
    agent.delete("/p/none.txt", false, &Precondition::Any).unwrap_err();
    agent.read_text("/p/keep.txt", &vfs::ReadWindow::default()).unwrap();
    assert_eq!(recorder.take(), Vec::new());
    assert_eq!(fixture.read("p/d/moved.txt"), "three\n");
}

#[test]
fn a_change_carries_the_call_id_its_budget_was_given() {
    let fixture = Fixture::new();
    fixture.mkdir("p");
    let recorder = Arc::new(Recorder { base: fixture.path("p"), seen: Mutex::new(Vec::new()) });
    let registry = MountRegistry::builder()
        .mount(fixture.spec("p", "/p", "rw"))
        .observe(recorder.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    let call = CallId::new();
    let agent = registry.agent().with_budget(Budget::unlimited().with_call(call.clone()));
    agent.write("/p/one.txt", "1\n", &Precondition::Absent).unwrap();
    agent.delete("/p/one.txt", false, &Precondition::Any).unwrap();
    let calls: Vec<String> = recorder.take().into_iter().map(|change| change.call).collect();
    assert_eq!(calls, vec![call.to_string(), call.to_string()]);
}

/// One observed change: its kind, path, image and version after.
type Kept = (ChangeKind, String, Option<vfs::Image>, Option<String>);

/// Keeps the before image of every change (or of none, with `keep` false).
#[derive(Debug)]
struct Keeper {
    keep: bool,
    images: Mutex<Vec<Kept>>,
}

impl ChangeObserver for Keeper {
    fn changed(&self, change: &Change<'_>) {
        let entry = (change.kind, change.path.to_string(), change.image.cloned(), change.version.map(str::to_owned));
        self.images.lock().unwrap().push(entry);
    }

    fn keeps_images(&self, _path: &vfs::VirtualPath, _by_agent: bool) -> bool {
        self.keep
    }
}

#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: a binary file with a mode of its own")]
fn an_observer_that_keeps_images_gets_what_each_change_replaced_and_one_that_does_not_gets_none() {
    use std::os::unix::fs::PermissionsExt as _;
    use vfs::{Image, Saved, TreeItem};
    let fixture = Fixture::new();
    fixture.file("p/a.bin", "");
    std::fs::write(fixture.path("p/a.bin"), [0u8, 159, 146, 150, 255]).unwrap();
    std::fs::set_permissions(fixture.path("p/a.bin"), std::fs::Permissions::from_mode(0o750)).unwrap();
    fixture.file("p/t/x.txt", "x\n");
    fixture.file("p/t/s/y.txt", "y\n");
    // Directories with modes of their own (a private one, a shared one with the sticky bit).
    std::fs::set_permissions(fixture.path("p/t"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::fs::set_permissions(fixture.path("p/t/s"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    fixture.file("p/m.txt", "m\n");
    fixture.file("p/dest.txt", "dest\n");
    let keeper = Arc::new(Keeper { keep: true, images: Mutex::new(Vec::new()) });
    let blind = Arc::new(Keeper { keep: false, images: Mutex::new(Vec::new()) });
    let registry = MountRegistry::builder()
        .mount(fixture.spec("p", "/p", "rw"))
        .observe(keeper.clone())
        .observe(blind.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    agent.write("/p/a.bin", "text\n", &Precondition::Any).unwrap();
    agent.write("/p/new.txt", "new\n", &Precondition::Absent).unwrap();
    let edit = Edit { old_text: "text".to_owned(), new_text: "edited".to_owned() };
    agent.edit("/p/a.bin", &[edit], &EditOptions::default()).unwrap();
    let moved = agent.move_path("/p/m.txt", "/p/dest.txt", &Precondition::Any, &Precondition::Any).unwrap();
    agent.delete("/p/t", true, &Precondition::Any).unwrap();
    agent.delete("/p/new.txt", false, &Precondition::Any).unwrap();
    let images: Vec<(ChangeKind, String, Option<Image>)> = keeper
        .images
        .lock()
        .unwrap()
        .iter()
        .map(|(kind, path, image, _)| (*kind, path.clone(), image.clone()))
        .collect();
    let file = |content: &[u8], mode: u32| Some(Image::File { content: Saved::Copied(content.to_vec()), mode });
    assert_eq!(
        images,
        vec![
            (ChangeKind::Write, "/p/a.bin".to_owned(), file(&[0, 159, 146, 150, 255], 0o750)),
            (ChangeKind::Write, "/p/new.txt".to_owned(), Some(Image::Absent)),
            (ChangeKind::Edit, "/p/a.bin".to_owned(), file(b"text\n", 0o640)),
            (ChangeKind::Move, "/p/m.txt".to_owned(), file(b"dest\n", 0o644 & !fixture_umask())),
            (
                ChangeKind::Remove,
                "/p/t".to_owned(),
                Some(Image::Tree {
                    mode: 0o750,
                    items: vec![
                        TreeItem { relative: "s".to_owned(), content: None, mode: 0o1777 },
                        TreeItem {
                            relative: "s/y.txt".to_owned(),
                            content: Some(Saved::Copied(b"y\n".to_vec())),
                            mode: 0o644 & !fixture_umask()
                        },
                        TreeItem {
                            relative: "x.txt".to_owned(),
                            content: Some(Saved::Copied(b"x\n".to_vec())),
                            mode: 0o644 & !fixture_umask()
                        },
                    ]
                })
            ),
            (ChangeKind::Remove, "/p/new.txt".to_owned(), file(b"new\n", 0o666 & !fixture_umask())),
        ]
    );
    // A move's version after is the destination's, for an undo's guard.
    let move_version = keeper.images.lock().unwrap()[3].3.clone();
    assert!(move_version.is_some(), "{moved:?}");
    // Every observer is told the one change, image included, when one of them keeps images.
    assert_eq!(blind.images.lock().unwrap().len(), 6);
    let blind_only = Arc::new(Keeper { keep: false, images: Mutex::new(Vec::new()) });
    fixture.file("q/a.txt", "a\n");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("q", "/q", "rw"))
        .observe(blind_only.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    registry.agent().write("/q/a.txt", "b\n", &Precondition::Any).unwrap();
    assert_eq!(blind_only.images.lock().unwrap()[0].2, None, "no observer keeps images: none is taken");
}

/// What a [`Linker`] was told: `intends` or `changed`, the kind, the path, the image.
type Told = (&'static str, ChangeKind, String, Option<vfs::Image>);

/// Keeps images by hard link in a keeper of its own internal root, and records the intents
/// and changes it is told, in order.
#[derive(Debug, Default)]
struct Linker {
    keeper: std::sync::OnceLock<vfs::Keeper>,
    told: Mutex<Vec<Told>>,
    /// The version after of each change, in the order told.
    versions: Mutex<Vec<String>>,
    /// When set, every intent is refused with this reason (a journal that cannot write).
    refuse: Mutex<Option<String>>,
    /// The files a removal keeping its tree was about to keep, in order.
    grown: Mutex<Vec<String>>,
    /// When set, how many files more a removal may keep before they are refused (a journal
    /// whose disk has no room for their record).
    room_for: Mutex<Option<usize>>,
}

impl ChangeObserver for Linker {
    fn changed(&self, change: &Change<'_>) {
        let told = ("changed", change.kind, change.path.to_string(), change.image.cloned());
        let mut list = self.told.lock().unwrap();
        list.push(told);
        self.versions.lock().unwrap().extend(change.version.map(str::to_owned));
    }

    fn intends(&self, change: &Change<'_>) -> Result<(), String> {
        assert_eq!(change.version, None, "an intent has no version after");
        let told = ("intends", change.kind, change.path.to_string(), change.image.cloned());
        self.told.lock().unwrap().push(told);
        if let Some(why) = self.refuse.lock().unwrap().clone() {
            return Err(why);
        }
        Ok(())
    }

    fn grows(&self, _call: &vfs::CallId, file: &vfs::VirtualPath) -> Result<(), String> {
        self.grown.lock().unwrap().push(file.to_string());
        match &mut *self.room_for.lock().unwrap() {
            Some(0) => Err("no room".to_owned()),
            Some(left) => {
                *left -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn keeps_images(&self, path: &vfs::VirtualPath, _by_agent: bool) -> bool {
        !path.as_str().starts_with("/keep")
    }

    fn keeper(&self) -> Option<&vfs::Keeper> {
        self.keeper.get()
    }
}

/// A registry of `/p` (the fixture's `p`, `rw`) observed by a [`Linker`] whose keeper is
/// `/keep/images` (the fixture's `k/images`); the linker has been told nothing yet.
fn linked(fixture: &Fixture) -> (MountRegistry, Arc<Linker>) {
    linked_at(fixture, fixture.spec("p", "/p", "rw"))
}

/// [`linked`], with `/p` mounted as `spec` says.
#[expect(clippy::disallowed_methods, reason = "fixture: the keeper's directory on disk")]
fn linked_at(fixture: &Fixture, spec: vfs::MountSpec) -> (MountRegistry, Arc<Linker>) {
    std::fs::create_dir_all(fixture.path("k")).unwrap();
    let linker = Arc::new(Linker::default());
    let registry = MountRegistry::builder()
        .mount(spec)
        .internal(fixture.spec("k", "/keep", "rw"))
        .observe(linker.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    #[expect(clippy::disallowed_methods, reason = "capability-proof: the test holds the keeper's root")]
    let privileged = registry.mint_privileged("/keep").unwrap();
    linker.keeper.set(privileged.keeper("/keep/images").unwrap()).unwrap();
    linker.told.lock().unwrap().clear(); // the keeper's own directory, made just now
    (registry, linker)
}

/// A recursive delete of a tree on another file system than the keeper (its image copied
/// before the removal, not moved into the keeper as it goes) that stops part way, read before
/// delete refusing its third file: each file it removed is told as the removal of that file,
/// with its copy, and the tree is not told.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: a tree on tmpfs, the keeper on the disk")]
fn a_delete_on_another_file_system_stopped_part_way_tells_each_file_it_took() {
    use std::os::unix::fs::MetadataExt as _;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use vfs::{Image, Saved};
    let fixture = Fixture::new();
    let shm = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm (tmpfs)");
    let (registry, linker) = linked_at(&fixture, format!("{}:/p:rw", shm.path().display()).parse().unwrap());
    assert_ne!(std::fs::metadata(shm.path()).unwrap().dev(), std::fs::metadata(fixture.path("k")).unwrap().dev());
    let agent = registry.agent();
    let mut versions = std::collections::HashMap::new();
    for name in ["a", "b", "c"] {
        let path = format!("/p/t/{name}.txt");
        let written = agent.write(&path, &format!("{name}\n"), &Precondition::Absent).unwrap();
        versions.insert(path, written.version.unwrap());
    }
    linker.told.lock().unwrap().clear();
    let looks_at_c = AtomicUsize::new(0);
    let seen = |file: &vfs::VirtualPath| {
        if file.as_str() == "/p/t/c.txt" && looks_at_c.fetch_add(1, Ordering::SeqCst) > 0 {
            return Precondition::Absent;
        }
        Precondition::Version(versions[file.as_str()].clone())
    };
    let refused = agent.delete_seen("/p/t", true, &seen).unwrap_err();
    assert_eq!(refused.to_string(), "`/p/t/c.txt` exists; the change required that nothing be there");
    let told: Vec<(&str, ChangeKind, String, Option<Image>)> =
        linker.told.lock().unwrap().iter().filter(|told| told.0 == "changed").cloned().collect();
    let file =
        |content: &[u8]| Some(Image::File { content: Saved::Copied(content.to_vec()), mode: 0o644 & !fixture_umask() });
    assert_eq!(
        told,
        vec![
            ("changed", ChangeKind::Remove, "/p/t/a.txt".to_owned(), file(b"a\n")),
            ("changed", ChangeKind::Remove, "/p/t/b.txt".to_owned(), file(b"b\n")),
        ]
    );
    let left: Vec<String> = std::fs::read_dir(shm.path().join("t"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["c.txt".to_owned()]);
}

#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: links, modes and the kept files on disk")]
fn a_keeper_gets_the_replaced_inodes_themselves_and_an_intent_before_each_change() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use vfs::{Image, Saved};
    let fixture = Fixture::new();
    fixture.file("p/a.txt", "a before\n");
    std::fs::set_permissions(fixture.path("p/a.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let inode = std::fs::metadata(fixture.path("p/a.txt")).unwrap().ino();
    fixture.file("p/t/x.txt", "x\n");
    fixture.file("p/t/s/y.txt", "y\n");
    fixture.file("p/shared.txt", "shared\n");
    std::fs::hard_link(fixture.path("p/shared.txt"), fixture.path("elsewhere.txt")).unwrap();
    let (registry, linker) = linked(&fixture);
    let agent = registry.agent();
    agent.write("/p/a.txt", "a after\n", &Precondition::Any).unwrap();
    agent.delete("/p/t", true, &Precondition::Any).unwrap();
    agent.write("/p/shared.txt", "changed\n", &Precondition::Any).unwrap();

    let told = linker.told.lock().unwrap().clone();
    let kinds: Vec<(&str, ChangeKind, &str)> =
        told.iter().map(|(what, kind, path, _)| (*what, *kind, path.as_str())).collect();
    assert_eq!(
        kinds,
        vec![
            ("intends", ChangeKind::Write, "/p/a.txt"),
            ("changed", ChangeKind::Write, "/p/a.txt"),
            ("intends", ChangeKind::Remove, "/p/t"),
            ("changed", ChangeKind::Remove, "/p/t"),
            ("intends", ChangeKind::Write, "/p/shared.txt"),
            ("changed", ChangeKind::Write, "/p/shared.txt"),
        ]
    );
    let kept = |name: &str| fixture.path(&format!("k/images/{name}"));
    // The replaced file's own inode, with its bytes and mode, nothing copied.
    let Some(Image::File { content: Saved::Kept { name, size: 9 }, mode: 0o640 }) = &told[1].3 else {
        panic!("{:?}", told[1].3)
    };
    assert_eq!(std::fs::metadata(kept(name)).unwrap().ino(), inode);
    assert_eq!(std::fs::read(kept(name)).unwrap(), b"a before\n");
    assert_eq!(std::fs::read(fixture.path("p/a.txt")).unwrap(), b"a after\n");
    // A removed tree: each file kept by link, under the names the image gives.
    let Some(Image::Tree { items, .. }) = &told[3].3 else { panic!("{:?}", told[3].3) };
    let files: Vec<(String, Vec<u8>)> = items
        .iter()
        .filter_map(|item| match &item.content {
            Some(Saved::Kept { name, .. }) => Some((item.relative.clone(), std::fs::read(kept(name)).unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(files, vec![("s/y.txt".to_owned(), b"y\n".to_vec()), ("x.txt".to_owned(), b"x\n".to_vec())]);
    // A file with another link could be written through it: its image is a copy.
    assert_eq!(
        told[5].3,
        Some(Image::File { content: Saved::Copied(b"shared\n".to_vec()), mode: 0o644 & !fixture_umask() })
    );
    assert_eq!(std::fs::read(fixture.path("elsewhere.txt")).unwrap(), b"shared\n");
    let mut names: Vec<String> = std::fs::read_dir(fixture.path("k/images"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    // And the removal's record of which image is which file (a line a directory, before its
    // files are taken), which its observer removes once the change is recorded.
    assert_eq!(names.len(), 4, "one link per kept file, and the record: {names:?}");
    let record = names.iter().find(|name| name.ends_with(vfs::TAKING_SUFFIX)).unwrap();
    let noted = std::fs::read_to_string(kept(record)).unwrap();
    let name_of = |item: &vfs::TreeItem| match &item.content {
        Some(Saved::Kept { name, .. }) => name.clone(),
        other => panic!("{other:?}"),
    };
    let (y, x) = (&items[1], &items[2]);
    // Each directory with its permission bits, as made here.
    let mode = 0o777 & !fixture_umask();
    assert_eq!(
        noted,
        format!(
            "{{\"dir\":\"/p/t\",\"mode\":{mode},\"files\":[[\"x.txt\",\"{}\"]]}}\n{{\"dir\":\"/p/t/s\",\"mode\":{mode},\"files\":[[\"y.txt\",\"{}\"]]}}\n",
            name_of(x),
            name_of(y)
        )
    );
    linker.keeper.get().unwrap().forget(name);
    assert!(!kept(name).exists());
}

/// An observer that cannot keep its record of a change (a journal whose log or images cannot
/// be written) refuses it: nothing is changed, the image taken for it is forgotten, and the
/// agent is told so without the reason, which is the operator's.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the tree and the kept images on disk")]
fn a_change_whose_record_cannot_be_kept_is_not_made() {
    let fixture = Fixture::new();
    fixture.file("p/a.txt", "before\n");
    fixture.file("p/t/x.txt", "x\n");
    let (registry, linker) = linked(&fixture);
    *linker.refuse.lock().unwrap() = Some("its log could not be written".to_owned());
    let agent = registry.agent();
    let refused = |path: &str| {
        format!(
            "`{path}` was not changed: vfs could not record the change in its journal (where every change is kept so that it can be undone); tell the operator, whose log says why"
        )
    };
    let errors = [
        agent.write("/p/a.txt", "after\n", &Precondition::Any).unwrap_err(),
        agent.write("/p/new.txt", "new\n", &Precondition::Absent).unwrap_err(),
        agent
            .edit(
                "/p/a.txt",
                &[vfs::Edit { old_text: "before".into(), new_text: "edited".into() }],
                &vfs::EditOptions::default(),
            )
            .unwrap_err(),
        agent.delete("/p/t", true, &Precondition::Any).unwrap_err(),
        agent.move_path("/p/a.txt", "/p/b.txt", &Precondition::Any, &Precondition::Absent).unwrap_err(),
        agent.create_directory("/p/d").unwrap_err(),
    ];
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            refused("/p/a.txt"),
            refused("/p/new.txt"),
            refused("/p/a.txt"),
            refused("/p/t"),
            refused("/p/a.txt"),
            refused("/p/d"),
        ]
    );
    assert_eq!(std::fs::read(fixture.path("p/a.txt")).unwrap(), b"before\n");
    assert_eq!(std::fs::read(fixture.path("p/t/x.txt")).unwrap(), b"x\n");
    for gone in ["p/new.txt", "p/b.txt", "p/d"] {
        assert!(!fixture.path(gone).exists(), "{gone}");
    }
    let told = linker.told.lock().unwrap().clone();
    assert!(told.iter().all(|(what, ..)| *what == "intends"), "no change was told: {told:?}");
    assert_eq!(told.len(), 6);
    let images = std::fs::read_dir(fixture.path("k/images")).unwrap().count();
    assert_eq!(images, 0, "the images taken for the refused changes are forgotten");
}

/// A recursive delete whose files cannot be moved into the keeper (its directory is gone)
/// stops at the first: no file goes without its image.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the tree and the keeper's directory on disk")]
fn a_tree_whose_files_cannot_be_kept_is_not_removed() {
    let fixture = Fixture::new();
    fixture.file("p/t/a.txt", "a\n");
    fixture.file("p/t/b.txt", "b\n");
    let (registry, linker) = linked(&fixture);
    std::fs::remove_dir(fixture.path("k/images")).unwrap();
    let error = registry.agent().delete("/p/t", true, &Precondition::Any).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`/p/t` was not deleted whole: vfs could not record the deletion of `/p/t/a.txt` in its journal (where every change is kept so that it can be undone), so it stopped there; anything it deleted before can be undone; tell the operator, whose log says why"
    );
    assert_eq!(std::fs::read(fixture.path("p/t/a.txt")).unwrap(), b"a\n");
    assert_eq!(std::fs::read(fixture.path("p/t/b.txt")).unwrap(), b"b\n");
    let told = linker.told.lock().unwrap().clone();
    assert_eq!(told.len(), 1, "{told:?}");
}

/// A removal that keeps its tree as it goes tells the observer of each file before it takes
/// it (`ChangeObserver::grows`): the journal makes sure of room for its record there. One
/// the observer refuses stops the removal before that file: each file taken before is told
/// as a change of its own with its image, and the rest stay.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the tree on disk")]
fn a_tree_removal_stops_at_the_first_file_the_observer_has_no_room_for() {
    let fixture = Fixture::new();
    for name in ["a", "b", "c"] {
        fixture.file(&format!("p/t/{name}.txt"), &format!("{name}\n"));
    }
    let (registry, linker) = linked(&fixture);
    *linker.room_for.lock().unwrap() = Some(1);
    let error = registry.agent().delete("/p/t", true, &Precondition::Any).unwrap_err();
    let grown = linker.grown.lock().unwrap().clone();
    assert_eq!(grown.len(), 2, "{grown:?}");
    let (taken, stopped) = (&grown[0], &grown[1]);
    assert_eq!(
        error.to_string(),
        format!(
            "`/p/t` was not deleted whole: vfs could not record the deletion of `{stopped}` in its journal (where every change is kept so that it can be undone), so it stopped there; anything it deleted before can be undone; tell the operator, whose log says why"
        )
    );
    let on_disk = |path: &str| fixture.path(&path[1..]).exists();
    assert!(!on_disk(taken), "{taken} was taken");
    let left: Vec<&str> = ["/p/t/a.txt", "/p/t/b.txt", "/p/t/c.txt"].into_iter().filter(|path| on_disk(path)).collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.contains(&stopped.as_str()));
    let told = linker.told.lock().unwrap().clone();
    let changed: Vec<(ChangeKind, &str, bool)> = told
        .iter()
        .filter(|(what, ..)| *what == "changed")
        .map(|(_, kind, path, image)| (*kind, path.as_str(), matches!(image, Some(vfs::Image::File { .. }))))
        .collect();
    assert_eq!(changed, [(ChangeKind::Remove, taken.as_str(), true)]);

    // With room, the rest goes whole.
    *linker.room_for.lock().unwrap() = None;
    registry.agent().delete("/p/t", true, &Precondition::Any).unwrap();
    assert!(!fixture.path("p/t").exists());
}

/// A removal that stops part way tells the directories it removed as well as the files, each
/// after what was in it, with its mode: an undo, newest first, makes each directory again
/// (an empty one too) before what goes in it. A directory is room asked for too.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the tree on disk")]
fn a_tree_removal_that_stops_tells_the_directories_it_removed() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Fixture::new();
    fixture.file("p/t/a/x.txt", "x\n");
    fixture.mkdir("p/t/b");
    std::fs::set_permissions(fixture.path("p/t/b"), std::fs::Permissions::from_mode(0o750)).unwrap();
    fixture.file("p/t/c/y.txt", "y\n");
    fixture.file("p/t/z.txt", "z\n");
    let (registry, linker) = linked(&fixture);
    *linker.room_for.lock().unwrap() = Some(4);
    let error = registry.agent().delete("/p/t", true, &Precondition::Any).unwrap_err();
    assert_eq!(*linker.grown.lock().unwrap(), ["/p/t/a", "/p/t/a/x.txt", "/p/t/b", "/p/t/c", "/p/t/c/y.txt"]);
    assert_eq!(
        error.to_string(),
        "`/p/t` was not deleted whole: vfs could not record the deletion of `/p/t/c/y.txt` in its journal (where every change is kept so that it can be undone), so it stopped there; anything it deleted before can be undone; tell the operator, whose log says why"
    );
    let on_disk = |path: &str| fixture.path(path).exists();
    assert_eq!(
        ["p/t/a", "p/t/b", "p/t/c/y.txt", "p/t/z.txt"].map(on_disk),
        [false, false, true, true],
        "a and b gone, the rest left"
    );
    let told = linker.told.lock().unwrap().clone();
    let changed: Vec<(ChangeKind, &str, Option<vfs::Image>)> = told
        .iter()
        .filter(|(what, ..)| *what == "changed")
        .map(|(_, kind, path, image)| {
            let image = image.as_ref().map(|image| match image {
                vfs::Image::File { mode, .. } => {
                    vfs::Image::File { content: vfs::Saved::Copied(Vec::new()), mode: *mode }
                }
                other => other.clone(),
            });
            (*kind, path.as_str(), image)
        })
        .collect();
    let directory = |mode: u32| Some(vfs::Image::Tree { mode, items: Vec::new() });
    let file_mode = std::fs::metadata(fixture.path("p/t/z.txt")).unwrap().permissions().mode() & 0o7777;
    let a_mode = std::fs::metadata(fixture.path("p/t/c")).unwrap().permissions().mode() & 0o7777; // made as `a` was
    assert_eq!(
        changed,
        [
            (
                ChangeKind::Remove,
                "/p/t/a/x.txt",
                Some(vfs::Image::File { content: vfs::Saved::Copied(Vec::new()), mode: file_mode })
            ),
            (ChangeKind::Remove, "/p/t/b", directory(0o750)),
            (ChangeKind::Remove, "/p/t/a", directory(a_mode)),
        ]
    );
}

/// A file with other hard links cannot be moved into the keeper as a whole image: a recursive
/// delete stops there, saying so, instead of removing the whole tree without an image (the
/// tree was then "not undoable" and every file in it lost). What it took before is told.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the tree, its hard links and the images on disk")]
fn a_tree_holding_a_hard_linked_file_is_deleted_only_up_to_it() {
    let fixture = Fixture::new();
    fixture.file("p/t/a.txt", "a\n");
    fixture.file("p/t/b.txt", "linked\n");
    fixture.file("p/t/z.txt", "z\n");
    std::fs::hard_link(fixture.path("p/t/b.txt"), fixture.path("p/elsewhere.txt")).unwrap();
    let (registry, linker) = linked(&fixture);
    let error = registry.agent().delete("/p/t", true, &Precondition::Any).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`/p/t` was not deleted whole: `/p/t/b.txt` has other hard links, and the journal of changes keeps a deleted tree only when it can keep each of its files; delete that file by itself first (what this delete removed before it can be undone)"
    );
    assert!(!fixture.path("p/t/a.txt").exists(), "taken before the linked file");
    assert_eq!(std::fs::read(fixture.path("p/t/b.txt")).unwrap(), b"linked\n");
    assert_eq!(std::fs::read(fixture.path("p/t/z.txt")).unwrap(), b"z\n");
    let told = linker.told.lock().unwrap().clone();
    let changed: Vec<(&str, ChangeKind, &str)> = told
        .iter()
        .filter(|(what, ..)| *what == "changed")
        .map(|(what, kind, path, _)| (*what, *kind, path.as_str()))
        .collect();
    assert_eq!(changed, [("changed", ChangeKind::Remove, "/p/t/a.txt")]);
}

#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the kept images on disk")]
fn two_writers_at_once_each_get_as_image_exactly_what_the_other_left() {
    use std::collections::HashMap;
    use vfs::{Image, Saved};
    let fixture = Fixture::new();
    fixture.file("p/a.txt", "start\n");
    let (registry, linker) = linked(&fixture);
    let rounds = 200;
    // Each writer's versions and what it wrote under each: every write must succeed.
    let written: Vec<Vec<(String, String)>> = std::thread::scope(|scope| {
        let writers: Vec<_> = ["A", "B"]
            .into_iter()
            .map(|who| {
                let agent = registry.agent();
                scope.spawn(move || {
                    (0..rounds)
                        .map(|round| {
                            let content = format!("{who}{round}\n");
                            let outcome = agent.write("/p/a.txt", &content, &Precondition::Any).unwrap();
                            (outcome.version.unwrap(), content)
                        })
                        .collect()
                })
            })
            .collect();
        writers.into_iter().map(|writer| writer.join().unwrap()).collect()
    });
    let content_of: HashMap<String, String> = written.into_iter().flatten().collect();
    assert_eq!(content_of.len(), 2 * rounds);
    // In the order the lock let them in, each change's image is what the one before left.
    let told = linker.told.lock().unwrap().clone();
    let changes: Vec<&Option<Image>> = told.iter().filter(|told| told.0 == "changed").map(|told| &told.3).collect();
    assert_eq!(changes.len(), 2 * rounds);
    let mut previous = "start\n".to_owned();
    let versions = {
        // The version each change left, in the same order (from the feed's own record).
        let recorded = linker.versions.lock().unwrap().clone();
        assert_eq!(recorded.len(), 2 * rounds);
        recorded
    };
    for (image, version) in changes.iter().zip(&versions) {
        let Some(Image::File { content: Saved::Kept { name, .. }, .. }) = image else { panic!("{image:?}") };
        let kept = std::fs::read_to_string(fixture.path(&format!("k/images/{name}"))).unwrap();
        assert_eq!(kept, previous);
        previous.clone_from(&content_of[version]);
    }
    assert_eq!(std::fs::read_to_string(fixture.path("p/a.txt")).unwrap(), previous);
}

#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the tree and the kept images on disk")]
fn a_file_written_into_a_tree_while_it_is_deleted_is_left_or_kept_even_when_the_delete_fails() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use vfs::{ErrorKind, Image, Saved};
    let fixture = Fixture::new();
    fixture.file("p/t/d0/seed.txt", "seed\n");
    let (registry, linker) = linked(&fixture);
    let done = AtomicBool::new(false);
    let (written, deletes) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let agent = registry.agent();
            let mut written = BTreeMap::new();
            for file in 0..300 {
                let (path, content) = (format!("/p/t/d{}/f{file}.txt", file % 3), format!("content {file}\n"));
                match agent.write(&path, &content, &Precondition::Absent) {
                    Ok(_) => {
                        written.insert(path, content);
                    }
                    // Its directory went while it was being written: nothing was made.
                    Err(error) => assert_eq!(error.kind(), ErrorKind::Changed, "{path}: {error}"),
                }
            }
            done.store(true, Ordering::SeqCst);
            written
        });
        let deleter = scope.spawn(|| {
            let agent = registry.agent();
            let mut deletes = 0;
            while !done.load(Ordering::SeqCst) {
                match agent.delete("/p/t", true, &Precondition::Any) {
                    Ok(_) => deletes += 1,
                    // Gone already, or a file was written into a directory it had emptied.
                    Err(error) => assert!(matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Changed), "{error}"),
                }
            }
            deletes
        });
        (writer.join().unwrap(), deleter.join().unwrap())
    });
    assert!(deletes > 0 && !written.is_empty(), "the race ran: {deletes} deletes, {} writes", written.len());
    // What the deletes took, by virtual path, from their images: whole trees, and the files a
    // delete that stopped part way had taken.
    let kept_at = |name: &str| std::fs::read_to_string(fixture.path(&format!("k/images/{name}"))).unwrap();
    let mut kept: BTreeMap<String, String> = BTreeMap::new();
    for (what, kind, path, image) in linker.told.lock().unwrap().iter() {
        match (*what, kind, image) {
            ("changed", ChangeKind::Remove, Some(Image::Tree { items, .. })) => {
                for item in items {
                    if let Some(Saved::Kept { name, .. }) = &item.content {
                        kept.insert(format!("{path}/{}", item.relative), kept_at(name));
                    }
                }
            }
            ("changed", ChangeKind::Remove, Some(Image::File { content: Saved::Kept { name, .. }, .. })) => {
                kept.insert(path.clone(), kept_at(name));
            }
            ("changed", ChangeKind::Remove, image) => panic!("a delete without its image: {image:?}"),
            _ => {}
        }
    }
    // Each file written is on the disk still, or some delete's image holds it, byte for byte.
    for (path, content) in &written {
        let on_disk = std::fs::read_to_string(fixture.path(&format!("p{}", &path[2..]))).ok();
        let in_image = kept.get(path);
        assert!(
            on_disk.as_ref() == Some(content) || in_image == Some(content),
            "{path} was written, then neither left nor kept: {on_disk:?} {in_image:?}"
        );
    }
}

/// A file moved out of a tree while the tree is deleted: the move and the delete each take
/// their directory's lock, so the file ends in exactly one place (moved out, still in the
/// tree, or in the delete's image), never in none and never in two.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: where each file ended, on disk")]
#[expect(clippy::too_many_lines, reason = "one race, read top to bottom: the two sides, then where each file is")]
fn a_file_moved_out_of_a_tree_while_it_is_deleted_ends_in_exactly_one_place() {
    use std::collections::BTreeMap;
    use std::sync::Barrier;
    use vfs::{ErrorKind, Image, Saved};
    const ROUNDS: usize = 200;
    let fixture = Fixture::new();
    fixture.file("p/out/.keep", "");
    let (registry, linker) = linked(&fixture);
    // Each round: the tree is written (a few files beside the one that moves), then the move
    // and the delete start together.
    // No thread panics before its last barrier (the other would wait there for ever): what
    // went wrong is noted and failed after the race.
    let barrier = Barrier::new(2);
    let unexpected = std::sync::Mutex::new(Vec::<String>::new());
    let note = |what: String| unexpected.lock().unwrap().push(what);
    let (written, moved, deletes) = std::thread::scope(|scope| {
        let mover = scope.spawn(|| {
            let agent = registry.agent();
            let (mut written, mut moved) = (BTreeMap::new(), 0);
            for file in 0..ROUNDS {
                for other in 0..8 {
                    if let Err(error) =
                        agent.write(&format!("/p/t/d{other}/o{file}.txt"), "other\n", &Precondition::Any)
                    {
                        note(format!("round {file}: {error}"));
                    }
                }
                let (path, content) = (format!("/p/t/d{}/f{file}.txt", file % 8), format!("content {file}\n"));
                match agent.write(&path, &content, &Precondition::Absent) {
                    Ok(_) => {
                        written.insert(file, content);
                    }
                    Err(error) => note(format!("{path}: {error}")),
                }
                barrier.wait();
                let destination = format!("/p/out/f{file}.txt");
                match agent.move_path(&path, &destination, &Precondition::Any, &Precondition::Absent) {
                    Ok(_) => moved += 1,
                    // The delete took it first (or its directory went on the way).
                    Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::Changed) => {}
                    Err(error) => note(format!("moving {path}: {error}")),
                }
                barrier.wait();
                barrier.wait();
            }
            (written, moved)
        });
        let deleter = scope.spawn(|| {
            let agent = registry.agent();
            let mut deletes = 0;
            for _ in 0..ROUNDS {
                barrier.wait();
                match agent.delete("/p/t", true, &Precondition::Any) {
                    Ok(_) => deletes += 1,
                    // The move made the tree change under it: it stopped part way.
                    Err(error) if error.kind() == ErrorKind::Changed => {}
                    Err(error) => note(format!("deleting: {error}")),
                }
                barrier.wait();
                // What a delete that stopped part way left goes before the next round.
                let _ = agent.delete("/p/t", true, &Precondition::Any);
                barrier.wait();
            }
            deletes
        });
        let (written, moved) = mover.join().unwrap();
        (written, moved, deleter.join().unwrap())
    });
    assert_eq!(unexpected.into_inner().unwrap(), Vec::<String>::new());
    assert!(
        deletes > 0 && moved > 0 && moved < ROUNDS,
        "the race ran both ways: {deletes} deletes, {moved} moves of {} files",
        written.len()
    );
    let kept_at = |name: &str| std::fs::read_to_string(fixture.path(&format!("k/images/{name}"))).unwrap();
    let mut kept: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (what, kind, path, image) in linker.told.lock().unwrap().iter() {
        match (*what, kind, image) {
            ("changed", ChangeKind::Remove, Some(Image::Tree { items, .. })) => {
                for item in items {
                    if let Some(Saved::Kept { name, .. }) = &item.content {
                        kept.entry(format!("{path}/{}", item.relative)).or_default().push(kept_at(name));
                    }
                }
            }
            ("changed", ChangeKind::Remove, Some(Image::File { content: Saved::Kept { name, .. }, .. })) => {
                kept.entry(path.clone()).or_default().push(kept_at(name));
            }
            ("changed", ChangeKind::Remove, image) => panic!("a delete without its image: {image:?}"),
            _ => {}
        }
    }
    for (file, content) in &written {
        let in_tree = format!("/p/t/d{}/f{file}.txt", file % 8);
        let places = [
            std::fs::read_to_string(fixture.path(&format!("p/out/f{file}.txt"))).ok(),
            std::fs::read_to_string(fixture.path(&format!("p{}", &in_tree[2..]))).ok(),
        ];
        let images = kept.get(&in_tree).cloned().unwrap_or_default();
        let found: Vec<&String> = places.iter().flatten().chain(&images).collect();
        assert_eq!(found, vec![content], "file {file} is not in exactly one place (moved out, in the tree, kept)");
    }
}

/// `/p` (rw) observed by a keeper that keeps images and records what it is told.
fn keeping(fixture: &Fixture) -> (MountRegistry, Arc<Keeper>) {
    let keeper = Arc::new(Keeper { keep: true, images: Mutex::new(Vec::new()) });
    let registry = MountRegistry::builder()
        .mount(fixture.spec("p", "/p", "rw"))
        .observe(keeper.clone())
        .build(vfs::ambient_authority())
        .unwrap();
    (registry, keeper)
}

#[test]
fn a_move_records_the_version_it_left_and_a_move_onto_itself_changes_nothing() {
    let fixture = Fixture::new();
    fixture.file("p/a.txt", "a\n");
    let (registry, keeper) = keeping(&fixture);
    let agent = registry.agent();
    agent.move_path("/p/a.txt", "/p/a.txt", &Precondition::Any, &Precondition::Any).unwrap();
    assert!(keeper.images.lock().unwrap().is_empty(), "a move onto itself is no change");
    agent.move_path("/p/a.txt", "/p/new/b.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    let info = agent.info("/p/new/b.txt").unwrap();
    let told = keeper.images.lock().unwrap().clone();
    let moves: Vec<&Kept> = told.iter().filter(|kept| kept.0 == ChangeKind::Move).collect();
    assert_eq!(moves.len(), 1);
    // Into a place where nothing was: the version of the file the move put there.
    assert_eq!(moves[0].3.as_deref(), info.version.as_deref());
    assert!(moves[0].3.is_some());
}

/// A directory's move records its tree's version; a move back guarded by it
/// ([`Precondition::Tree`], the journal's) goes through while the tree is as the move left it,
/// and is refused once a file in it changed, without saying the tree's version (it covers
/// hidden names). The version a move records when it had no time to walk the tree
/// (`tree-unknown`) matches no tree. A tree's version given as a file's (`expectedVersion`,
/// all an agent can give) never matches either.
#[test]
fn a_directory_move_records_its_trees_version_and_only_that_tree_matches_it() {
    let fixture = Fixture::new();
    fixture.file("p/d/a.txt", "a\n");
    fixture.file("p/d/sub/b.txt", "b\n");
    let (registry, keeper) = keeping(&fixture);
    let agent = registry.agent();
    let version_of_move = || {
        let told = keeper.images.lock().unwrap().clone();
        told.iter().rev().find(|kept| kept.0 == ChangeKind::Move).and_then(|kept| kept.3.clone()).unwrap()
    };
    agent.move_path("/p/d", "/p/e", &Precondition::Any, &Precondition::Absent).unwrap();
    let left = version_of_move();
    assert!(left.starts_with("tree-C"), "{left}");
    let refused = |guard: Precondition| {
        let error = agent.move_path("/p/e", "/p/d", &guard, &Precondition::Absent).unwrap_err();
        (error.kind(), error.to_string())
    };
    let mismatch = (
        vfs::ErrorKind::VersionMismatch,
        "`/p/e` changed since you read it: its version is now `another tree`; read it again and retry".to_owned(),
    );
    assert_eq!(refused(Precondition::Tree("tree-unknown".to_owned())), mismatch);
    let not_a_file = (vfs::ErrorKind::NotAFile, "`/p/e` is a directory, not a file".to_owned());
    assert_eq!(refused(Precondition::Version(left.clone())), not_a_file);
    agent.write("/p/e/sub/b.txt", "B\n", &Precondition::Any).unwrap();
    assert_eq!(refused(Precondition::Tree(left.clone())), mismatch);
    agent.write("/p/e/sub/b.txt", "b\n", &Precondition::Any).unwrap();
    agent.move_path("/p/e", "/p/d", &Precondition::Tree(left), &Precondition::Absent).unwrap();
    assert_eq!(fixture.read("p/d/sub/b.txt"), "b\n");
}

/// The process's umask (the fixture's files are made with it).
#[expect(clippy::disallowed_methods, reason = "fixture: the mode a fixture file gets")]
fn fixture_umask() -> u32 {
    let probe = Fixture::new();
    probe.file("probe", "");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(probe.path("probe")).unwrap().permissions());
    0o666 & !(mode & 0o777)
}

/// A directory deleted alone (no `recursive`, as a shell's `rmdir`) beside a write into it, at
/// once, 100 rounds: each answers as some order of the two does (the write always lands,
/// making the directory again when the delete went first, also when the directory went from
/// under it; the delete goes through or is refused as not empty), the written bytes are
/// there, and the delete linked nothing into the
/// keeper: its image is the empty tree, so it never touches a file in the directory.
#[test]
fn a_directory_deleted_alone_beside_a_write_into_it_loses_nothing_and_links_nothing() {
    beside_a_directory_deleted_alone(
        &|agent, round| agent.write("/p/d/f.txt", &format!("round {round}\n"), &Precondition::Any).map(drop),
        &|fixture, round| assert_eq!(fixture.read("p/d/f.txt"), format!("round {round}\n"), "round {round}"),
    );
}

/// The same race with a directory made in the one deleted: `create_directory` always
/// succeeds (making its parent again when the delete went first or took it from under it),
/// and the directory is there.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: the directory made, on disk")]
fn a_directory_deleted_alone_beside_a_directory_made_in_it_loses_nothing() {
    beside_a_directory_deleted_alone(&|agent, _| agent.create_directory("/p/d/sub").map(drop), &|fixture, round| {
        assert!(fixture.path("p/d/sub").is_dir(), "round {round}");
    });
}

/// The same race with a staged write (the FUSE view's): begun, written and committed, it
/// always lands, and its bytes are there.
#[test]
fn a_directory_deleted_alone_beside_a_staged_write_into_it_loses_nothing() {
    beside_a_directory_deleted_alone(
        &|agent, round| {
            let mut staged = agent.stage("/p/d/f.txt", vfs::StageFrom::Empty)?;
            staged.write_at(0, format!("staged {round}\n").as_bytes())?;
            staged.commit(&Precondition::Any).map(drop)
        },
        &|fixture, round| assert_eq!(fixture.read("p/d/f.txt"), format!("staged {round}\n"), "round {round}"),
    );
}

/// Runs `act` into `/p/d` at once with a delete of `/p/d` without `recursive`, 100 rounds on
/// a barrier (`act` a little later each round): `act` must succeed every round and `landed`
/// find its result; the delete goes through or is refused as not empty (both happen), and
/// links nothing into the keeper.
#[expect(clippy::disallowed_methods, reason = "fixture: the keeper's directory on disk")]
fn beside_a_directory_deleted_alone(
    act: &(dyn Fn(&vfs::AgentAccessor, u64) -> Result<(), vfs::Error> + Sync),
    landed: &dyn Fn(&Fixture, u64),
) {
    let fixture = Fixture::new();
    fixture.mkdir("p");
    let (registry, _linker) = linked(&fixture);
    let agent = registry.agent();
    let (mut deleted, mut refused) = (0, 0);
    for round in 0..100u64 {
        fixture.mkdir("p/d");
        let barrier = std::sync::Barrier::new(2);
        let (removed, acted) = std::thread::scope(|scope| {
            let remove = scope.spawn(|| {
                barrier.wait();
                agent.delete("/p/d", false, &Precondition::Any)
            });
            let acting = scope.spawn(|| {
                barrier.wait();
                std::thread::sleep(std::time::Duration::from_micros(round % 7 * 20));
                act(&agent, round)
            });
            (remove.join().unwrap(), acting.join().unwrap())
        });
        assert!(acted.is_ok(), "round {round}: it failed: {acted:?}");
        match removed {
            Ok(_) => deleted += 1,
            Err(error) if error.kind() == vfs::ErrorKind::DirectoryNotEmpty => refused += 1,
            Err(error) => panic!("round {round}: the delete failed otherwise: {error}"),
        }
        landed(&fixture, round);
        let linked = std::fs::read_dir(fixture.path("k/images")).map_or(0, Iterator::count);
        assert_eq!(linked, 0, "round {round}: the delete linked a file into the keeper");
        std::fs::remove_dir_all(fixture.path("p/d")).unwrap();
    }
    assert!(deleted + refused == 100 && refused > 0, "deleted {deleted}, refused {refused}");
}

/// A directory an undo puts back is made with its mode at once (whatever the umask; the
/// owner's bits added until [`vfs::AgentAccessor::finish_directory`] gives the rest), under its
/// parent's lock; the rest is given only to that same directory, with the mode it was made
/// with: a directory moved to its path since (by an agent racing the undo) keeps its own, as
/// does one that was there before, and one whose mode was set since.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: directories' modes on disk")]
fn a_restored_directorys_mode_goes_to_that_directory_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let fixture = Fixture::new();
    fixture.mkdir("p/t");
    fixture.mkdir("p/victim");
    let registry =
        MountRegistry::builder().mount(fixture.spec("p", "/p", "rw")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    let mode = |relative: &str| std::fs::metadata(fixture.path(relative)).unwrap().permissions().mode() & 0o7777;
    // The mode a directory restored as read-only has until it is finished.
    std::fs::set_permissions(fixture.path("p/victim"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let victim = mode("p/victim");

    // Made, a file put in, then the rest of its mode: read-only at last.
    let restored = agent.restore_directory("/p/t/ro", 0o555).unwrap();
    assert!(restored.created);
    assert_eq!(mode("p/t/ro"), 0o755, "the owner's bits until it is finished");
    agent.write("/p/t/ro/a.txt", "a\n", &Precondition::Absent).unwrap();
    assert!(agent.finish_directory(&restored).unwrap());
    assert_eq!(mode("p/t/ro"), 0o555);

    // Bits the umask would take, and the sticky bit, given at once; nothing left to finish.
    let shared = agent.restore_directory("/p/t/shared", 0o1777).unwrap();
    assert_eq!(mode("p/t/shared"), 0o1777);
    assert!(!agent.finish_directory(&shared).unwrap());
    let none = agent.restore_directory("/p/t/none", 0).unwrap();
    assert!(agent.finish_directory(&none).unwrap());
    assert_eq!(mode("p/t/none"), 0);

    // Swapped: another directory moved to its path before it is finished keeps its mode,
    // though it has the mode the one made had.
    let swapped = agent.restore_directory("/p/t/a", 0o555).unwrap();
    agent.delete("/p/t/a", false, &Precondition::Any).unwrap();
    agent.move_path("/p/victim", "/p/t/a", &Precondition::Any, &Precondition::Absent).unwrap();
    assert!(!agent.finish_directory(&swapped).unwrap());
    assert_eq!(mode("p/t/a"), victim);

    // There before: left as it is, then and at the finish.
    let there = agent.restore_directory("/p/t/a", 0o1777).unwrap();
    assert!(!there.created);
    assert!(!agent.finish_directory(&there).unwrap());
    assert_eq!(mode("p/t/a"), victim);

    // A mode set since it was made is kept.
    let narrowed = agent.restore_directory("/p/t/n", 0o500).unwrap();
    std::fs::set_permissions(fixture.path("p/t/n"), std::fs::Permissions::from_mode(0o711)).unwrap();
    assert!(!agent.finish_directory(&narrowed).unwrap());
    assert_eq!(mode("p/t/n"), 0o711);
}

/// A directory made later that took the inode number the restored one left (ext4 gives a freed
/// number out again at once), with the mode the restored one was made with, moved to its path
/// before the finish: not taken for it (its birth time differs), so it keeps its mode.
#[test]
#[expect(clippy::disallowed_methods, reason = "fixture: inode numbers and modes on disk")]
fn a_directory_that_took_a_restored_ones_inode_number_keeps_its_mode() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let fixture = Fixture::new();
    fixture.mkdir("p/t");
    let registry =
        MountRegistry::builder().mount(fixture.spec("p", "/p", "rw")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    let metadata = |relative: &str| std::fs::metadata(fixture.path(relative)).unwrap();
    let restored = agent.restore_directory("/p/t/a", 0o555).unwrap();
    let number = metadata("p/t/a").ino();
    if metadata("p/t/a").created().is_err() {
        #[expect(clippy::print_stderr, reason = "a case this file system cannot exercise says so")]
        {
            eprintln!("SKIPPED: this file system keeps no birth times; the reused inode case is not exercised");
        }
        return;
    }
    agent.delete("/p/t/a", false, &Precondition::Any).unwrap();
    let reused = (0..200).map(|n| format!("p/t/b{n}")).find(|name| {
        agent.create_directory(&format!("/{name}")).unwrap();
        metadata(name).ino() == number
    });
    let Some(reused) = reused else {
        #[expect(clippy::print_stderr, reason = "a case this file system cannot exercise says so")]
        {
            eprintln!("SKIPPED: no inode number was given out again here; the reused inode case is not exercised");
        }
        return;
    };
    std::fs::set_permissions(fixture.path(&reused), std::fs::Permissions::from_mode(0o755)).unwrap();
    agent.move_path(&format!("/{reused}"), "/p/t/a", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(metadata("p/t/a").ino(), number);
    assert!(!agent.finish_directory(&restored).unwrap());
    assert_eq!(metadata("p/t/a").permissions().mode() & 0o7777, 0o755);
}
