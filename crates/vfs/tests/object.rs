//! Object-storage mounts (feature `s3`): the same contracts as local mounts, on an in-process
//! store (`memory://`) and, when `VFS_TEST_S3_BUCKET` names a bucket on the S3-compatible server
//! that `scripts/test` starts (endpoint and credentials in the `AWS_*` variables), on a real
//! S3 API.
#![cfg(feature = "s3")]
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk")]

mod common;

use common::Fixture;
use vfs::{Edit, EditOptions, ErrorKind, GrepRequest, MountRegistry, MountSpec, Precondition, ReadWindow};

/// The bucket on the S3-compatible server `scripts/test` starts (`VFS_TEST_S3_BUCKET`); `None`
/// where there is none, which CI does not allow.
fn test_bucket() -> Option<String> {
    let bucket = std::env::var("VFS_TEST_S3_BUCKET").ok();
    assert!(
        bucket.is_some() || std::env::var_os("CI").is_none(),
        "CI must run this test against the S3 server scripts/test starts"
    );
    bucket
}

fn registry_with(data: &str, local: Option<&Fixture>) -> MountRegistry {
    let mut builder = MountRegistry::builder();
    builder.mount(format!("{data}:/data:rw").parse::<MountSpec>().unwrap());
    if let Some(fixture) = local {
        builder.mount(fixture.spec("src", "/src", "rw"));
    }
    builder.build(vfs::ambient_authority()).unwrap()
}

/// On S3 an empty directory is its marker (`empty/`), listed and kept as on a disk; the memory
/// store of tests keeps none.
fn makes_an_empty_directory(agent: &vfs::AgentAccessor, on_s3: bool) {
    assert!(agent.create_directory("/data/empty").unwrap().created);
    let (listed, walked) = if on_s3 { ("[DIR] empty\n", "  empty/\n") } else { ("", "") };
    assert_eq!(agent.list("/data").unwrap().to_text(), format!("{listed}[DIR] notes\n[FILE] top.txt\n"));
    assert_eq!(agent.list("/data/notes").unwrap().to_text(), "[FILE] a.txt\n[FILE] b.md\n");
    assert_eq!(
        agent.tree("/data", None, &[]).unwrap().to_text(),
        format!("/data/\n{walked}  notes/\n    a.txt\n    b.md\n  top.txt\n")
    );
    if on_s3 {
        assert!(!agent.create_directory("/data/empty").unwrap().created, "it is there");
        assert_eq!(agent.list("/data/empty").unwrap().to_text(), "`/data/empty` is empty\n");
        agent.delete("/data/empty", false, &Precondition::Any).unwrap();
    }
}

/// A version that no entity tag is (and no header could carry: the client panicked on a line
/// break) is one the file does not have: `/data/notes/a.txt`, at `version`, is left as it is.
fn refuses_versions_no_object_has(agent: &vfs::AgentAccessor, version: &str) {
    for odd in ["x\r\nX-Evil: 1", "caf\u{e9}", "a\"b", ""] {
        let refused = agent.write("/data/notes/a.txt", "x", &Precondition::Version(odd.into())).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "`/data/notes/a.txt` changed since you read it: its version is now `{version}`; read it again and retry"
            ),
            "{odd:?}"
        );
    }
}

fn exercise(registry: &MountRegistry, physical_spellings: &[&str]) {
    let on_s3 = physical_spellings.iter().any(|spelling| spelling.starts_with("s3://"));
    let agent = registry.agent();
    let created = agent.write("/data/notes/a.txt", "one\ntwo\nthree\n", &Precondition::Absent).unwrap();
    assert!(created.created);
    let version = created.version.clone().expect("an ETag");
    assert_eq!(
        agent.write("/data/notes/a.txt", "x", &Precondition::Absent).unwrap_err().to_string(),
        "`/data/notes/a.txt` already exists; ask for an overwrite to replace it"
    );
    let read = agent.read_text("/data/notes/a.txt", &ReadWindow::default()).unwrap();
    assert_eq!(read.content, "one\ntwo\nthree\n");
    assert_eq!(read.version.as_deref(), Some(version.as_str()));
    let window = ReadWindow { offset: Some(2), limit: Some(1), ..ReadWindow::default() };
    assert_eq!(agent.read_text("/data/notes/a.txt", &window).unwrap().content, "two\n");
    let tail = ReadWindow { tail: Some(1), ..ReadWindow::default() };
    assert_eq!(agent.read_text("/data/notes/a.txt", &tail).unwrap().content, "three\n");
    let info = agent.info("/data/notes/a.txt").unwrap();
    assert_eq!((info.kind, info.size, info.version.as_deref()), ("file", 14, Some(version.as_str())));
    assert_eq!(agent.info("/data/notes").unwrap().kind, "directory");
    assert_eq!(
        agent.read_text("/data/notes", &ReadWindow::default()).unwrap_err().to_string(),
        "`/data/notes` is a directory, not a file"
    );
    assert_eq!(
        agent.read_text("/data/none.txt", &ReadWindow::default()).unwrap_err().to_string(),
        "`/data/none.txt` does not exist"
    );

    let stale = Precondition::Version("stale".into());
    let refused = agent.write("/data/notes/a.txt", "x", &stale).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::VersionMismatch);
    assert_eq!(
        refused.to_string(),
        format!(
            "`/data/notes/a.txt` changed since you read it: its version is now `{version}`; read it again and retry"
        )
    );
    refuses_versions_no_object_has(&agent, &version);
    let guarded = Precondition::Version(version);
    let replaced = agent.write("/data/notes/a.txt", "one\n2\nthree\n", &guarded).unwrap();
    assert!(!replaced.created);

    let edit = Edit { old_text: "2".into(), new_text: "two".into() };
    let edited = agent.edit("/data/notes/a.txt", &[edit], &EditOptions::default()).unwrap();
    assert_eq!(edited.diff, "--- /data/notes/a.txt\n+++ /data/notes/a.txt\n@@ -1,3 +1,3 @@\n one\n-2\n+two\n three\n");

    agent.write("/data/notes/b.md", "hello world\n", &Precondition::Absent).unwrap();
    agent.write("/data/top.txt", "top\n", &Precondition::Absent).unwrap();
    makes_an_empty_directory(&agent, on_s3);
    assert_eq!(agent.search_files("/data", "*.md", &[]).unwrap().to_text(), "/data/notes/b.md\n");
    let grep = agent
        .grep(&GrepRequest { pattern: "hello|top".into(), path: Some("/data".into()), ..GrepRequest::default() })
        .unwrap();
    assert_eq!(grep.to_text(), "/data/notes/b.md:1:hello world\n/data/top.txt:1:top\n");

    assert_eq!(
        agent
            .move_path("/data/top.txt", "/data/notes/a.txt", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .kind(),
        ErrorKind::AlreadyExists
    );
    agent.move_path("/data/top.txt", "/data/moved.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(agent.read_text("/data/moved.txt", &ReadWindow::default()).unwrap().content, "top\n");
    assert_eq!(agent.info("/data/top.txt").unwrap_err().to_string(), "`/data/top.txt` does not exist");

    assert_eq!(
        agent.delete("/data/notes", false, &Precondition::Any).unwrap_err().kind(),
        ErrorKind::DirectoryNotEmpty
    );
    assert_eq!(
        agent.delete("/data/notes", true, &Precondition::Any).unwrap().to_text(),
        "deleted directory `/data/notes`"
    );
    assert_eq!(agent.list("/data").unwrap().to_text(), "[FILE] moved.txt\n");
    agent.delete("/data/moved.txt", false, &Precondition::Any).unwrap();

    // Nothing physical in any error.
    let error = agent.read_text("/data/x/y", &ReadWindow::default()).unwrap_err().to_string();
    for spelling in physical_spellings {
        assert!(!error.contains(spelling), "{error}");
    }
}

#[test]
fn memory_store_meets_the_contracts() {
    let registry = registry_with("memory://test", None);
    exercise(&registry, &["memory://test"]);
    assert_eq!(registry.scrub("see memory://test/x"), "see [redacted]/x");
}

/// An object store's walk, too, counts the directories past its depth bound: the result
/// says it is cut, and where to look.
#[test]
fn an_object_tree_deeper_than_a_walk_goes_is_said_to_be() {
    let registry = registry_with("memory://deep", None);
    let agent = registry.agent();
    let mut at = String::from("/data/t");
    for level in 1..=34 {
        at.push_str("/d");
        agent.write(&format!("{at}/leaf{level:02}.txt"), "needle\n", &Precondition::Absent).unwrap();
    }
    let found = agent.search_files("/data/t", "leaf*", &[]).unwrap();
    assert_eq!((found.matches.len(), found.deeper, found.truncated), (31, 1, true));
    let request = GrepRequest { pattern: "needle".into(), path: Some("/data/t".into()), ..GrepRequest::default() };
    let grepped = agent.grep(&request).unwrap();
    assert_eq!((grepped.matches, grepped.deeper, grepped.truncated), (31, 1, true));
}

#[test]
fn moves_across_local_and_object_mounts() {
    let fixture = Fixture::new();
    fixture.file("src/report.txt", "local\n");
    let registry = registry_with("memory://mixed", Some(&fixture));
    let agent = registry.agent();
    agent.move_path("/src/report.txt", "/data/report.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    assert!(!fixture.path("src/report.txt").exists());
    assert_eq!(agent.read_text("/data/report.txt", &ReadWindow::default()).unwrap().content, "local\n");
    agent.move_path("/data/report.txt", "/src/back.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(fixture.read("src/back.txt"), "local\n");
    assert_eq!(agent.info("/data/report.txt").unwrap_err().to_string(), "`/data/report.txt` does not exist");
}

#[test]
fn read_only_object_mount_refuses_writes() {
    let spec: MountSpec = "memory://ro:/data:ro".parse().unwrap();
    let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
    assert!(registry.has_object_storage());
    let fixture = Fixture::new();
    fixture.mkdir("src");
    assert!(
        !MountRegistry::builder()
            .mount(fixture.spec("src", "/src", "ro"))
            .build(vfs::ambient_authority())
            .unwrap()
            .has_object_storage()
    );
    assert_eq!(
        registry.agent().write("/data/x", "x", &Precondition::Absent).unwrap_err().to_string(),
        "cannot write `/data/x`: `/data` is mounted ro, and no mount grants write"
    );
}

#[test]
fn real_s3_api_meets_the_contracts() {
    // Outside CI without the server: nothing to run against (scripts/test starts one).
    let Some(bucket) = test_bucket() else { return };
    let url = format!("s3://{bucket}/run-{}", std::process::id());
    let registry = registry_with(&url, None);
    exercise(&registry, &[&bucket, &url]);
}

#[test]
fn unreachable_store_is_refused_before_serving() {
    // The child process builds a registry against a closed local port: the refusal is one
    // operator line, before anything could be served.
    let outcome = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "probe_unreachable", "--nocapture", "--ignored"])
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&outcome.stdout);
    assert!(
        stdout.contains(
            "cannot use `s3://no-such-bucket/x` for mount `/data`: the object store did not answer; check AWS_ENDPOINT_URL, AWS_REGION and the network ("
        ),
        "{stdout}"
    );
}

#[test]
#[ignore = "run by unreachable_store_is_refused_before_serving in a child process with AWS_* set"]
#[expect(clippy::print_stdout, reason = "the parent test reads the refusal from stdout")]
fn probe_unreachable() {
    let spec: MountSpec = "s3://no-such-bucket/x:/data:ro".parse().unwrap();
    let error = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap_err();
    println!("{error}");
}

/// `grep` in object storage skips what a local tree's `.gitignore` files and `.git` skip: the
/// same layout, searched on both backends, gives the same answer.
#[test]
fn grep_honours_gitignore_as_a_local_tree_does() {
    let layout: &[(&str, &str)] = &[
        (".gitignore", "target/\n*.log\n!keep.log\n"),
        ("target/x.txt", "needle\n"),
        ("a.log", "needle\n"),
        ("keep.log", "needle\n"),
        ("src/main.rs", "needle\n"),
        (".git/config", "needle\n"),
        ("sub/.gitignore", "gen.txt\n!b.log\n"),
        ("sub/gen.txt", "needle\n"),
        ("sub/ok.txt", "needle\n"),
        ("sub/b.log", "needle\n"),
        ("sub/deeper/gen.txt", "needle\n"),
    ];
    let fixture = Fixture::new();
    for (name, content) in layout {
        fixture.file(&format!("data/{name}"), content);
    }
    let local =
        MountRegistry::builder().mount(fixture.spec("data", "/data", "ro")).build(vfs::ambient_authority()).unwrap();
    let object = registry_with("memory://gitignore", None);
    for (name, content) in layout {
        object.agent().write(&format!("/data/{name}"), content, &Precondition::Absent).unwrap();
    }
    let found = |registry: &MountRegistry, path: &str| {
        let request = GrepRequest { pattern: "needle".into(), path: Some(path.into()), ..GrepRequest::default() };
        let mut paths: Vec<String> =
            registry.agent().grep(&request).unwrap().lines.iter().map(|line| line.path.to_string()).collect();
        paths.sort();
        paths
    };
    let expected = ["/data/keep.log", "/data/src/main.rs", "/data/sub/b.log", "/data/sub/ok.txt"];
    assert_eq!(found(&local, "/data"), expected);
    assert_eq!(found(&object, "/data"), expected);
    // Searching below the top `.gitignore` leaves it out, on both backends.
    assert_eq!(found(&local, "/data/sub"), found(&object, "/data/sub"));
    assert_eq!(found(&object, "/data/sub"), ["/data/sub/b.log", "/data/sub/ok.txt"]);
}

/// Caps on object storage: a media read takes an object of exactly the cap and refuses one
/// byte more (before its body is read); a text read of a larger object stops at the cap and
/// says how to page on.
#[test]
fn object_reads_keep_their_caps() {
    let mut limits = vfs::Limits::default();
    limits.media_bytes = 16;
    limits.read_bytes = 16;
    let spec: MountSpec = "memory://caps:/data:rw".parse().unwrap();
    let registry = MountRegistry::builder().mount(spec).limits(limits).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    agent.write("/data/at-cap.png", &"p".repeat(16), &Precondition::Absent).unwrap();
    agent.write("/data/over-cap.png", &"p".repeat(17), &Precondition::Absent).unwrap();
    assert_eq!(agent.read_media("/data/at-cap.png").unwrap().size, 16);
    assert_eq!(
        agent.read_media("/data/over-cap.png").unwrap_err().to_string(),
        "`/data/over-cap.png`: the file has 17 bytes, more than the 16-byte cap"
    );
    agent.write("/data/long.txt", "0123456789\nabcdefghij\nrest\n", &Precondition::Absent).unwrap();
    let read = agent.read_text("/data/long.txt", &ReadWindow::default()).unwrap();
    assert_eq!((read.content.as_str(), read.truncated, read.version), ("0123456789\nabcde", true, None));
    assert_eq!(
        read.next.map(|next| next.agent_text().to_string()).as_deref(),
        Some(
            "truncated at the 16-byte cap inside line 2; the file has 27 bytes; read on with offset: 2 (or use head/tail/limit)"
        )
    );
    let on = agent.read_text("/data/long.txt", &ReadWindow { offset: Some(2), ..ReadWindow::default() }).unwrap();
    assert_eq!(
        (on.content.as_str(), on.truncated),
        (
            "abcdefghij
rest
",
            false
        )
    );
    agent.write("/data/exact.txt", &"x".repeat(15), &Precondition::Absent).unwrap();
    let exact = agent.read_text("/data/exact.txt", &ReadWindow::default()).unwrap();
    assert_eq!((exact.content.len(), exact.truncated, exact.version.is_some()), (15, false, true));
}

/// An observer that keeps before images, with its keeper in a local internal root `/keep`.
#[derive(Debug, Default)]
struct Keeping {
    keeper: std::sync::OnceLock<vfs::Keeper>,
    told: std::sync::Mutex<Vec<(vfs::ChangeKind, String, Option<vfs::Image>)>>,
    intended: std::sync::Mutex<Vec<(vfs::ChangeKind, String, Option<vfs::Image>)>>,
}

impl vfs::ChangeObserver for Keeping {
    fn changed(&self, change: &vfs::Change<'_>) {
        let told = (change.kind, change.path.to_string(), change.image.cloned());
        self.told.lock().unwrap().push(told);
    }

    fn intends(&self, change: &vfs::Change<'_>) -> Result<(), String> {
        let intended = (change.kind, change.path.to_string(), change.image.cloned());
        self.intended.lock().unwrap().push(intended);
        Ok(())
    }

    fn keeps_images(&self, path: &vfs::VirtualPath, _by_agent: bool) -> bool {
        !path.as_str().starts_with("/keep")
    }

    fn keeper(&self) -> Option<&vfs::Keeper> {
        self.keeper.get()
    }
}

/// A registry of `data` at `/data` (read-write) with `limits`, observed by a [`Keeping`] whose
/// keeper is `/keep/images` (the fixture's `k/images`).
fn keeping_registry(data: &str, fixture: &Fixture, limits: vfs::Limits) -> (MountRegistry, std::sync::Arc<Keeping>) {
    fixture.mkdir("k");
    let keeping = std::sync::Arc::new(Keeping::default());
    let registry = MountRegistry::builder()
        .mount(format!("{data}:/data:rw").parse::<MountSpec>().unwrap())
        .internal(fixture.spec("k", "/keep", "rw"))
        .observe(keeping.clone())
        .limits(limits)
        .build(vfs::ambient_authority())
        .unwrap();
    #[expect(clippy::disallowed_methods, reason = "capability-proof: the test holds the keeper's root")]
    let privileged = registry.mint_privileged("/keep").unwrap();
    keeping.keeper.set(privileged.keeper("/keep/images").unwrap()).unwrap();
    (registry, keeping)
}

/// The store at `data` keeps the images of the objects a write replaces and a recursive
/// delete removes, by a copy it makes itself, in an area of the mount no agent can name, list,
/// search or grep; the keeper reads them back and forgets them.
fn keeps_its_own_images(data: &str) {
    use vfs::{ChangeKind, Image, Saved};
    let fixture = Fixture::new();
    let (registry, keeping) = keeping_registry(data, &fixture, vfs::Limits::default());
    let agent = registry.agent();
    agent.write("/data/a.txt", "a before\n", &Precondition::Absent).unwrap();
    agent.write("/data/t/x.txt", "x\n", &Precondition::Absent).unwrap();
    agent.write("/data/t/s/y.txt", "y\n", &Precondition::Absent).unwrap();
    keeping.told.lock().unwrap().clear();

    agent.write("/data/a.txt", "a after\n", &Precondition::Any).unwrap();
    agent.delete("/data/t", true, &Precondition::Any).unwrap();
    let told = keeping.told.lock().unwrap().clone();
    let kinds: Vec<(ChangeKind, &str)> = told.iter().map(|(kind, path, _)| (*kind, path.as_str())).collect();
    assert_eq!(kinds, vec![(ChangeKind::Write, "/data/a.txt"), (ChangeKind::Remove, "/data/t")]);
    let keeper = keeping.keeper.get().unwrap();
    let Some(Image::File { content: Saved::Stored { path: image, size: 9 }, mode: 0o644 }) = &told[0].2 else {
        panic!("{:?}", told[0].2)
    };
    assert!(image.starts_with("/data/.vfs-tmp-journal/"), "{image}");
    assert_eq!(keeper.read_stored(image).unwrap(), b"a before\n");
    assert_eq!(agent.read_text("/data/a.txt", &ReadWindow::default()).unwrap().content, "a after\n");
    let Some(Image::Tree { items, .. }) = &told[1].2 else { panic!("{:?}", told[1].2) };
    let files: Vec<(String, Vec<u8>)> = items
        .iter()
        .filter_map(|item| match &item.content {
            Some(Saved::Stored { path, .. }) => Some((item.relative.clone(), keeper.read_stored(path).unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(files, vec![("s/y.txt".to_owned(), b"y\n".to_vec()), ("x.txt".to_owned(), b"x\n".to_vec())]);

    // No agent reaches the images: not by name, not in a listing, a search, a tree or a grep.
    let names: Vec<String> = agent.list("/data").unwrap().entries.into_iter().map(|entry| entry.name).collect();
    assert_eq!(names, vec!["a.txt".to_owned()]);
    let found = agent.search_files("/data", "**", &[]).unwrap().matches;
    assert_eq!(found.iter().map(vfs::VirtualPath::as_str).collect::<Vec<_>>(), vec!["/data/a.txt"]);
    let tree = serde_json::to_string(&agent.tree("/data", None, &[]).unwrap()).unwrap();
    assert!(!tree.contains("vfs-tmp"), "{tree}");
    let request = GrepRequest { path: Some("/data".into()), pattern: "before".into(), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched), (0, 1), "only /data/a.txt searched");
    for read in [image.as_str(), "/data/.vfs-tmp-journal"] {
        assert_eq!(
            agent.read_text(read, &ReadWindow::default()).unwrap_err().to_string(),
            format!("`{read}` does not exist")
        );
    }
    assert_eq!(
        agent.write(image, "forged\n", &Precondition::Any).unwrap_err().to_string(),
        format!("`{image}` does not exist")
    );
    assert_eq!(keeper.read_stored(image).unwrap(), b"a before\n", "the image is as it was kept");

    keeper.forget_stored(image);
    assert_eq!(keeper.read_stored(image).unwrap_err().kind(), ErrorKind::NotFound);
    // A path that is not an image of an object mount reads nothing.
    for other in ["/data/a.txt", "/keep/images/x", "/data/.vfs-tmp-journal/.x", "/nowhere/.vfs-tmp-journal/x"] {
        assert_eq!(keeper.read_stored(other).unwrap_err().kind(), ErrorKind::NotFound, "{other}");
    }
}

/// A recursive delete of an object directory that stops part way (read before delete refuses
/// its third file, as a file changed since it was read would be) has removed two objects: each
/// is told as the removal of that one file, with the image the store copied, so that undo can
/// put it back; the copy of the object it left is removed from the image area.
fn a_delete_stopped_part_way_tells_each_object_it_took(data: &str) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use vfs::{ChangeKind, Image, Saved};
    let fixture = Fixture::new();
    let (registry, keeping) = keeping_registry(data, &fixture, vfs::Limits::default());
    let agent = registry.agent();
    let mut versions = std::collections::HashMap::new();
    for name in ["a", "b", "c"] {
        let path = format!("/data/t/{name}.txt");
        let written = agent.write(&path, &format!("{name}\n"), &Precondition::Absent).unwrap();
        versions.insert(path, written.version.unwrap());
    }
    keeping.told.lock().unwrap().clear();
    // Every file is seen at its version when the tree is looked at first; `c.txt` is unseen
    // when the removal comes to it.
    let looks_at_c = AtomicUsize::new(0);
    let seen = |file: &vfs::VirtualPath| {
        if file.as_str() == "/data/t/c.txt" && looks_at_c.fetch_add(1, Ordering::SeqCst) > 0 {
            return Precondition::Absent;
        }
        Precondition::Version(versions[file.as_str()].clone())
    };
    let refused = agent.delete_seen("/data/t", true, &seen).unwrap_err();
    assert_eq!(refused.to_string(), "`/data/t/c.txt` exists; the change required that nothing be there");
    assert_eq!(looks_at_c.load(Ordering::SeqCst), 2);

    let keeper = keeping.keeper.get().unwrap();
    let told = keeping.told.lock().unwrap().clone();
    let taken: Vec<(ChangeKind, &str, Vec<u8>)> = told
        .iter()
        .map(|(kind, path, image)| match image {
            Some(Image::File { content: Saved::Stored { path: image, .. }, .. }) => {
                (*kind, path.as_str(), keeper.read_stored(image).unwrap())
            }
            other => panic!("{path}: {other:?}"),
        })
        .collect();
    assert_eq!(
        taken,
        vec![
            (ChangeKind::Remove, "/data/t/a.txt", b"a\n".to_vec()),
            (ChangeKind::Remove, "/data/t/b.txt", b"b\n".to_vec())
        ]
    );
    let names: Vec<String> = agent.list("/data/t").unwrap().entries.into_iter().map(|entry| entry.name).collect();
    assert_eq!(names, vec!["c.txt".to_owned()]);
    // The copy of `c.txt` the image had taken is gone from the area.
    let intended = keeping.intended.lock().unwrap().clone();
    let Some((ChangeKind::Remove, tree, Some(Image::Tree { items, .. }))) = intended.last() else {
        panic!("{intended:?}")
    };
    assert_eq!(tree, "/data/t");
    let left: Vec<&str> = items
        .iter()
        .filter(|item| item.relative == "c.txt")
        .map(|item| match &item.content {
            Some(Saved::Stored { path, .. }) => path.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(left.len(), 1);
    assert_eq!(keeper.read_stored(left[0]).unwrap_err().kind(), ErrorKind::NotFound);
}

/// Two writers overwrite one object at once, each change's image a copy the store makes
/// (object stores have no lock: a copy may take the other writer's newer content, never a
/// mix). Every write succeeds, every overwrite has an image, and each image holds exactly
/// one content the object held: the first, or one a writer wrote.
#[test]
fn two_writers_at_once_each_get_an_image_of_a_whole_content_the_object_held() {
    use vfs::{Image, Saved};
    let fixture = Fixture::new();
    let (registry, keeping) = keeping_registry("memory://two-writers", &fixture, vfs::Limits::default());
    registry.agent().write("/data/a.txt", "start\n", &Precondition::Absent).unwrap();
    keeping.told.lock().unwrap().clear();
    let rounds = 100;
    std::thread::scope(|scope| {
        for who in ["A", "B"] {
            let agent = registry.agent();
            scope.spawn(move || {
                for round in 0..rounds {
                    agent.write("/data/a.txt", &format!("{who}{round}\n"), &Precondition::Any).unwrap();
                }
            });
        }
    });
    let keeper = keeping.keeper.get().unwrap();
    let told = keeping.told.lock().unwrap().clone();
    assert_eq!(told.len(), 2 * rounds, "one change for each write");
    let held: std::collections::HashSet<String> = ["start\n".to_owned()]
        .into_iter()
        .chain((0..rounds).flat_map(|round| ["A", "B"].map(|who| format!("{who}{round}\n"))))
        .collect();
    for (_, path, image) in &told {
        let Some(Image::File { content: Saved::Stored { path: image, .. }, .. }) = image else {
            panic!("{path}: {image:?}")
        };
        let kept = String::from_utf8(keeper.read_stored(image).unwrap()).unwrap();
        assert!(held.contains(&kept), "an image of content the object never held: {kept:?}");
    }
}

#[test]
fn a_memory_store_tells_what_a_delete_stopped_part_way_took() {
    a_delete_stopped_part_way_tells_each_object_it_took("memory://part-way");
}

#[test]
fn a_real_s3_api_tells_what_a_delete_stopped_part_way_took() {
    let Some(bucket) = test_bucket() else { return };
    a_delete_stopped_part_way_tells_each_object_it_took(&format!("s3://{bucket}/part-way-{}", std::process::id()));
}

#[test]
fn a_memory_store_keeps_its_own_images_where_no_agent_sees_them() {
    keeps_its_own_images("memory://kept-images");
}

/// The copies a store makes for one tree's image are bounded by what the keeper's holder can
/// keep ([`vfs::Keeper::bound_stored`]): a tree whose copies would pass it has no image (the
/// delete goes ahead, not undoable), one within it has its whole image.
#[test]
fn a_tree_whose_copies_would_pass_the_keepers_bound_is_not_kept() {
    use vfs::{ChangeKind, Image};
    let fixture = Fixture::new();
    let (registry, keeping) = keeping_registry("memory://bounded-trees", &fixture, vfs::Limits::default());
    let agent = registry.agent();
    keeping.keeper.get().unwrap().bound_stored(16);
    for tree in ["/data/within", "/data/past"] {
        agent.write(&format!("{tree}/x.txt"), "12345678", &Precondition::Absent).unwrap();
        agent.write(&format!("{tree}/y.txt"), "12345678", &Precondition::Absent).unwrap();
    }
    agent.write("/data/past/z.txt", "1", &Precondition::Absent).unwrap();
    keeping.told.lock().unwrap().clear();
    agent.delete("/data/within", true, &Precondition::Any).unwrap();
    agent.delete("/data/past", true, &Precondition::Any).unwrap();
    let told = keeping.told.lock().unwrap().clone();
    let [
        (ChangeKind::Remove, within, Some(Image::Tree { items, .. })),
        (ChangeKind::Remove, past, Some(Image::NotKept(why))),
    ] = told.as_slice()
    else {
        panic!("{told:?}")
    };
    assert_eq!((within.as_str(), items.len()), ("/data/within", 2), "its two files (an object directory is implied)");
    assert_eq!((past.as_str(), *why), ("/data/past", "its copies would pass the journal's bound"));
    let names: Vec<String> = agent.list("/data").unwrap().entries.into_iter().map(|entry| entry.name).collect();
    assert!(names.is_empty(), "{names:?}");
}

/// The images sort first in a listing of the mount's root, and there may be many: a walk skips
/// them before it counts, so they never use up its bound (the walk bound here is 16 objects,
/// eight times the listing limit of 2, and 40 images lie beside the one file).
#[test]
fn many_images_never_use_up_a_walk_of_the_mount_root() {
    let fixture = Fixture::new();
    let mut limits = vfs::Limits::default();
    limits.entries = 2;
    let (registry, keeping) = keeping_registry("memory://many-images", &fixture, limits);
    let agent = registry.agent();
    for round in 0..41 {
        agent.write("/data/z.txt", &format!("round {round}\n"), &Precondition::Any).unwrap();
    }
    let stored = keeping
        .told
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, image)| matches!(image, Some(vfs::Image::File { content: vfs::Saved::Stored { .. }, .. })))
        .count();
    assert_eq!(stored, 40, "an image for each overwrite");
    let found = agent.search_files("/data", "**", &[]).unwrap();
    assert_eq!(found.matches.iter().map(vfs::VirtualPath::as_str).collect::<Vec<_>>(), vec!["/data/z.txt"]);
    assert!(!found.truncated, "the images did not use up the walk");
    let request = GrepRequest { path: Some("/data".into()), pattern: "round 40".into(), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched, grep.truncated), (1, 1, false));
}

#[test]
fn a_real_s3_api_keeps_its_own_images_where_no_agent_sees_them() {
    let Some(bucket) = test_bucket() else { return };
    keeps_its_own_images(&format!("s3://{bucket}/kept-{}", std::process::id()));
}

/// Two calls of one process at once on one object ("directory"), each a check and the act
/// it guards: a delete and an edit of the version both read, and two moves onto one name
/// without `overwrite`. A store has no conditional delete or copy-if-absent, so the check and
/// the act hold the process's lock of the place. In every round one of each pair succeeds and
/// the other is refused as the order of the two gives it: no acknowledged edit is deleted, no
/// moved file is overwritten.
fn a_check_and_its_act_are_never_split_by_another_call(data: &str) {
    let registry = registry_with(data, None);
    let agent = registry.agent();
    for round in 0..40 {
        let path = format!("/data/race/e{round}");
        let version = agent.write(&path, "before\n", &Precondition::Any).unwrap().version.unwrap();
        let guard = Precondition::Version(version);
        let barrier = std::sync::Barrier::new(2);
        let (deleted, edited) = std::thread::scope(|scope| {
            let deleting = scope.spawn(|| {
                barrier.wait();
                registry.agent().delete(&path, false, &guard).map(|_| ())
            });
            let editing = scope.spawn(|| {
                barrier.wait();
                registry.agent().write(&path, "edited\n", &guard).map(|_| ())
            });
            (deleting.join().unwrap(), editing.join().unwrap())
        });
        let now = agent.read_text(&path, &ReadWindow::default()).map(|read| read.content);
        match (deleted, edited) {
            (Ok(()), Err(error)) => {
                assert!(matches!(error.kind(), ErrorKind::NotFound | ErrorKind::VersionMismatch), "{round}: {error}");
                assert_eq!(now.unwrap_err().kind(), ErrorKind::NotFound, "{round}");
            }
            (Err(error), Ok(())) => {
                assert_eq!(error.kind(), ErrorKind::VersionMismatch, "{round}: {error}");
                assert_eq!(now.unwrap(), "edited\n", "{round}");
            }
            other => panic!("{round}: a delete and an edit of one version both answered {other:?}"),
        }

        let (one, other) = (format!("/data/race/a{round}"), format!("/data/race/b{round}"));
        let target = format!("/data/race/c{round}");
        agent.write(&one, "one\n", &Precondition::Absent).unwrap();
        agent.write(&other, "other\n", &Precondition::Absent).unwrap();
        let barrier = std::sync::Barrier::new(2);
        let moved = std::thread::scope(|scope| {
            let moves = [&one, &other].map(|source| {
                let (barrier, registry, target) = (&barrier, &registry, &target);
                scope.spawn(move || {
                    barrier.wait();
                    registry.agent().move_path(source, target, &Precondition::Any, &Precondition::Absent).map(|_| ())
                })
            });
            moves.map(|moving| moving.join().unwrap())
        });
        let (winner, loser) = match moved {
            [Ok(()), Err(error)] => ((&one, "one\n"), (&other, error)),
            [Err(error), Ok(())] => ((&other, "other\n"), (&one, error)),
            other => panic!("{round}: two moves onto one name answered {other:?}"),
        };
        assert_eq!(loser.1.kind(), ErrorKind::AlreadyExists, "{round}: {}", loser.1);
        assert_eq!(agent.read_text(&target, &ReadWindow::default()).unwrap().content, winner.1, "{round}");
        assert_eq!(agent.read_text(winner.0, &ReadWindow::default()).unwrap_err().kind(), ErrorKind::NotFound);
        assert!(agent.read_text(loser.0, &ReadWindow::default()).is_ok(), "{round}: the refused move's source is gone");
    }
}

#[test]
fn on_a_memory_store_a_check_and_its_act_are_never_split_by_another_call() {
    a_check_and_its_act_are_never_split_by_another_call("memory://split");
}

#[test]
fn on_a_real_s3_api_a_check_and_its_act_are_never_split_by_another_call() {
    let Some(bucket) = test_bucket() else { return };
    a_check_and_its_act_are_never_split_by_another_call(&format!("s3://{bucket}/split-{}", std::process::id()));
}

/// A name is the key as the store holds it, both ways: a file an agent writes under a name
/// with `?`, `#`, `%`, `\`, `[`, a space or a non-ASCII letter is listed, found, searched,
/// moved and deleted under that name, and (on a real S3 API) another tool's key with such a
/// name is found under the name it is listed by. The store's client would encode them
/// (`new?x` stored as `new%3Fx`, listed as that and found under neither).
fn a_name_is_the_key_as_the_store_holds_it(data: &str) -> MountRegistry {
    let registry = registry_with(data, None);
    let agent = registry.agent();
    let names = ["new?x", "a#b%20c", "back\\slash", "br[ack]et", "sp ace", "ü.txt"];
    for name in names {
        agent.write(&format!("/data/odd/{name}"), &format!("{name}\n"), &Precondition::Absent).unwrap();
    }
    let mut listed: Vec<String> =
        agent.list("/data/odd").unwrap().entries.into_iter().map(|entry| entry.name).collect();
    listed.sort();
    let mut expected: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    expected.sort();
    assert_eq!(listed, expected);
    for name in names {
        let read = agent.read_text(&format!("/data/odd/{name}"), &ReadWindow::default()).unwrap();
        assert_eq!(read.content, format!("{name}\n"));
    }
    let found = agent.search_files("/data/odd", "*%*", &[]).unwrap();
    assert_eq!(found.to_text(), "/data/odd/a#b%20c\n");
    agent.move_path("/data/odd/new?x", "/data/odd/moved?#.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(agent.read_text("/data/odd/moved?#.txt", &ReadWindow::default()).unwrap().content, "new?x\n");
    agent.delete("/data/odd/moved?#.txt", false, &Precondition::Any).unwrap();
    assert_eq!(
        agent.read_text("/data/odd/moved?#.txt", &ReadWindow::default()).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    registry
}

#[test]
fn on_a_memory_store_a_name_is_the_key_as_the_store_holds_it() {
    a_name_is_the_key_as_the_store_holds_it("memory://odd-names");
}

#[test]
fn on_a_real_s3_api_a_name_is_the_key_as_the_store_holds_it() {
    use object_store::ObjectStoreExt as _;
    let Some(bucket) = test_bucket() else { return };
    let prefix = format!("odd-names-{}", std::process::id());
    let registry = a_name_is_the_key_as_the_store_holds_it(&format!("s3://{bucket}/{prefix}"));
    // Another tool's key, written raw: listed and read under its own name.
    let store = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(&bucket).build().unwrap();
    let key = object_store::path::Path::parse(format!("{prefix}/theirs/q?mark")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(store.put(&key, object_store::PutPayload::from("theirs\n"))).unwrap();
    let agent = registry.agent();
    assert_eq!(agent.list("/data/theirs").unwrap().to_text(), "[FILE] q?mark\n");
    assert_eq!(agent.read_text("/data/theirs/q?mark", &ReadWindow::default()).unwrap().content, "theirs\n");
}

/// A name is a file or a directory, never both, as on a disk: a write, a move or a new
/// directory at or below an object's name is refused as a local store refuses it (a key below
/// an object, which another tool may write, is listed as both the file and the directory).
fn nothing_is_made_below_a_file(data: &str) {
    let registry = registry_with(data, None);
    let agent = registry.agent();
    agent.write("/data/z/f", "file\n", &Precondition::Absent).unwrap();
    agent.write("/data/z/h", "other\n", &Precondition::Absent).unwrap();
    let refused = |answer: Result<(), vfs::Error>| answer.unwrap_err().to_string();
    assert_eq!(
        refused(agent.write("/data/z/f/inner", "x", &Precondition::Any).map(|_| ())),
        "`/data/z/f/inner` is not a directory"
    );
    assert_eq!(
        refused(agent.write("/data/z/f/a/b", "x", &Precondition::Absent).map(|_| ())),
        "`/data/z/f/a/b` is not a directory"
    );
    assert_eq!(refused(agent.create_directory("/data/z/f/d").map(|_| ())), "`/data/z/f/d` is not a directory");
    assert_eq!(refused(agent.create_directory("/data/z/f").map(|_| ())), "`/data/z/f` is not a directory");
    assert_eq!(
        refused(agent.move_path("/data/z/h", "/data/z/f/h", &Precondition::Any, &Precondition::Absent).map(|_| ())),
        "`/data/z/f/h` is not a directory"
    );
    assert_eq!(agent.list("/data/z").unwrap().to_text(), "[FILE] f\n[FILE] h\n");
    assert_eq!(agent.read_text("/data/z/h", &ReadWindow::default()).unwrap().content, "other\n");
    // Beside it, and below a directory, as before.
    agent.write("/data/z/k/l", "deep\n", &Precondition::Absent).unwrap();
    agent.create_directory("/data/z/k/m").unwrap();
    assert_eq!(agent.list("/data/z").unwrap().to_text(), "[FILE] f\n[FILE] h\n[DIR] k\n");
}

#[test]
fn on_a_memory_store_nothing_is_made_below_a_file() {
    nothing_is_made_below_a_file("memory://below-a-file");
}

#[test]
fn on_a_real_s3_api_nothing_is_made_below_a_file() {
    let Some(bucket) = test_bucket() else { return };
    nothing_is_made_below_a_file(&format!("s3://{bucket}/below-a-file-{}", std::process::id()));
}

/// A file and a file below its name, written at once by two calls of one process: they take
/// the locks of different "directories", yet exactly one succeeds and the other is refused as
/// a disk refuses it, never both (a key that is a file and a prefix at once). The same for a
/// move onto the name beside a write below it.
fn a_name_is_never_made_a_file_and_a_directory_at_once(data: &str) {
    let registry = registry_with(data, None);
    let agent = registry.agent();
    let text = |answer: Result<(), vfs::Error>| answer.map_err(|error| error.to_string());
    for round in 0..40 {
        let (file, below) = (format!("/data/pair/f{round}"), format!("/data/pair/f{round}/y/z"));
        let source = format!("/data/pair/s{round}");
        let moving = round % 2 == 1;
        if moving {
            agent.write(&source, "moved\n", &Precondition::Absent).unwrap();
        }
        let barrier = std::sync::Barrier::new(2);
        let (made_file, made_below) = std::thread::scope(|scope| {
            let making_file = scope.spawn(|| {
                barrier.wait();
                if moving {
                    text(
                        registry.agent().move_path(&source, &file, &Precondition::Any, &Precondition::Absent).map(drop),
                    )
                } else {
                    text(registry.agent().write(&file, "file\n", &Precondition::Absent).map(drop))
                }
            });
            let making_below = scope.spawn(|| {
                barrier.wait();
                text(registry.agent().write(&below, "below\n", &Precondition::Absent).map(drop))
            });
            (making_file.join().unwrap(), making_below.join().unwrap())
        });
        let listed = agent.list("/data/pair").unwrap().to_text();
        let name = format!("f{round}");
        match (made_file, made_below) {
            (Ok(()), Err(error)) => {
                assert_eq!(error, format!("`{below}` is not a directory"), "{round}");
                assert!(listed.contains(&format!("[FILE] {name}\n")), "{round}: {listed}");
                // A read asks for the key only: nothing is there.
                assert_eq!(agent.read_text(&below, &ReadWindow::default()).unwrap_err().kind(), ErrorKind::NotFound);
            }
            (Err(error), Ok(())) => {
                let refusal = if moving {
                    format!("cannot replace directory `{file}`; delete it first")
                } else {
                    format!("`{file}` is a directory, not a file")
                };
                assert_eq!(error, refusal, "{round}");
                assert!(listed.contains(&format!("[DIR] {name}\n")), "{round}: {listed}");
                assert_eq!(agent.read_text(&below, &ReadWindow::default()).unwrap().content, "below\n");
                if moving {
                    assert_eq!(agent.read_text(&source, &ReadWindow::default()).unwrap().content, "moved\n");
                }
            }
            other => panic!("{round}: a file and a file below its name both answered {other:?}"),
        }
        let tree = agent.tree("/data/pair", None, &[]).unwrap().to_text();
        assert_eq!(tree.matches(&format!(" {name}")).count(), 1, "{round}: one entry for the name:\n{tree}");
    }
}

#[test]
fn on_a_memory_store_a_name_is_never_made_a_file_and_a_directory_at_once() {
    a_name_is_never_made_a_file_and_a_directory_at_once("memory://file-and-directory");
}

/// The names above a change are shared, not held alone: two writes below one name and a
/// write and a move beside it, all at once, all succeed, round after round.
#[test]
fn on_a_memory_store_changes_below_and_beside_one_name_all_succeed_at_once() {
    let registry = registry_with("memory://shared-names", None);
    let agent = registry.agent();
    for round in 0..40 {
        agent.write(&format!("/data/s/m{round}"), "moved\n", &Precondition::Absent).unwrap();
        let barrier = std::sync::Barrier::new(4);
        let answers = std::thread::scope(|scope| {
            let calls = [0, 1, 2, 3].map(|call| {
                let (barrier, registry) = (&barrier, &registry);
                scope.spawn(move || {
                    let agent = registry.agent();
                    barrier.wait();
                    match call {
                        0 => agent.write(&format!("/data/s/d{round}/a"), "a\n", &Precondition::Absent).map(drop),
                        1 => agent.write(&format!("/data/s/d{round}/b"), "b\n", &Precondition::Absent).map(drop),
                        2 => agent.write(&format!("/data/s/e{round}"), "e\n", &Precondition::Absent).map(drop),
                        _ => agent
                            .move_path(
                                &format!("/data/s/m{round}"),
                                &format!("/data/s/d{round}/m"),
                                &Precondition::Any,
                                &Precondition::Absent,
                            )
                            .map(drop),
                    }
                })
            });
            calls.map(|call| call.join().unwrap())
        });
        assert!(answers.iter().all(Result::is_ok), "{round}: {answers:?}");
        assert_eq!(agent.list(&format!("/data/s/d{round}")).unwrap().to_text(), "[FILE] a\n[FILE] b\n[FILE] m\n");
    }
}

#[test]
fn on_a_real_s3_api_a_name_is_never_made_a_file_and_a_directory_at_once() {
    let Some(bucket) = test_bucket() else { return };
    a_name_is_never_made_a_file_and_a_directory_at_once(&format!("s3://{bucket}/both-{}", std::process::id()));
}

/// Directory markers, the empty `name/` objects other tools write for a "directory" (the AWS
/// console's "Create folder", `s3fs`, sync tools), are directories everywhere: never a file
/// inside their own directory or beside it, listed, walked, searched and deleted as the
/// directories they stand for, an empty one included. A real empty file stays a file.
#[test]
fn on_a_real_s3_api_a_directory_marker_is_a_directory() {
    use object_store::{ObjectStore as _, ObjectStoreExt as _};
    let Some(bucket) = test_bucket() else { return };
    let prefix = format!("markers-{}", std::process::id());
    // The registry first: it installs the TLS provider the client below needs.
    let registry = registry_with(&format!("s3://{bucket}/{prefix}"), None);
    let store = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(&bucket).build().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let key = |name: &str| object_store::path::Path::parse(format!("{prefix}/{name}")).unwrap();
    let marker = |name: &str| key(name).join("");
    let put = |key: object_store::path::Path, body: &'static str| {
        runtime.block_on(store.put(&key, object_store::PutPayload::from(body))).unwrap();
    };
    put(marker(""), "");
    put(marker("m/folder"), "");
    put(key("m/folder/a.txt"), "alpha\n");
    put(marker("m/empty"), "");
    put(marker("m/deep"), "");
    put(marker("m/deep/inner"), "");
    put(key("m/deep/inner/b.txt"), "beta\n");
    put(key("m/zero"), "");
    let keys = |under: &str| -> Vec<String> {
        let listed: Vec<object_store::ObjectMeta> =
            runtime.block_on(futures_util::TryStreamExt::try_collect(store.list(Some(&key(under))))).unwrap();
        listed.into_iter().map(|meta| meta.location.to_string()).collect()
    };
    let agent = registry.agent();

    assert_eq!(agent.list("/data").unwrap().to_text(), "[DIR] m\n");
    assert_eq!(agent.list("/data/m").unwrap().to_text(), "[DIR] deep\n[DIR] empty\n[DIR] folder\n[FILE] zero\n");
    assert_eq!(agent.list("/data/m/folder").unwrap().to_text(), "[FILE] a.txt\n");
    assert_eq!(agent.list("/data/m/empty").unwrap().to_text(), "`/data/m/empty` is empty\n");
    assert_eq!(
        agent.tree("/data/m", None, &[]).unwrap().to_text(),
        agent_tree_of(&[
            ("deep/", 0),
            ("inner/", 1),
            ("b.txt", 2),
            ("empty/", 0),
            ("folder/", 0),
            ("a.txt", 1),
            ("zero", 0)
        ])
    );
    assert_eq!(
        agent.search_files("/data/m", "**", &[]).unwrap().to_text(),
        "/data/m/deep\n/data/m/deep/inner\n/data/m/deep/inner/b.txt\n/data/m/empty\n/data/m/folder\n/data/m/folder/a.txt\n/data/m/zero\n"
    );
    let request = GrepRequest { path: Some("/data/m".into()), pattern: "a".into(), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched), (2, 3), "{}", grep.to_text());
    let refused = |answer: Result<(), vfs::Error>| answer.unwrap_err().to_string();
    assert_eq!(
        refused(agent.read_text("/data/m/empty", &ReadWindow::default()).map(drop)),
        "`/data/m/empty` is a directory, not a file"
    );
    assert_eq!(
        refused(agent.write("/data/m/empty", "x", &Precondition::Any).map(drop)),
        "`/data/m/empty` is a directory, not a file"
    );
    assert_eq!(agent.read_text("/data/m/zero", &ReadWindow::default()).unwrap().content, "");
    assert_eq!(
        refused(
            agent.move_path("/data/m/folder", "/data/m/moved", &Precondition::Any, &Precondition::Absent).map(drop)
        ),
        "cannot move a directory to `/data/m/moved` in object storage; move its files one by one"
    );

    // An empty directory is deleted without `recursive`, a full one is not; with it, its
    // markers go with its files.
    agent.delete("/data/m/empty", false, &Precondition::Any).unwrap();
    assert_eq!(
        refused(agent.delete("/data/m/deep", false, &Precondition::Any).map(drop)),
        "`/data/m/deep` is a directory that is not empty; ask for a recursive delete to delete it with its contents"
    );
    agent.delete("/data/m/deep", true, &Precondition::Any).unwrap();
    agent.delete("/data/m/folder", true, &Precondition::Any).unwrap();
    assert_eq!(agent.list("/data/m").unwrap().to_text(), "[FILE] zero\n");
    assert_eq!(keys("m"), [format!("{prefix}/m/zero")]);
}

/// Many empty objects in one directory, and a marker among them: told apart by one listing of
/// the directory rather than a HEAD each.
#[test]
fn on_a_real_s3_api_many_empty_objects_in_one_directory_are_told_from_markers() {
    use object_store::ObjectStoreExt as _;
    let Some(bucket) = test_bucket() else { return };
    let prefix = format!("many-empty-{}", std::process::id());
    // The registry first: it installs the TLS provider the client below needs.
    let registry = registry_with(&format!("s3://{bucket}/{prefix}"), None);
    let store = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(&bucket).build().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut expected = String::new();
    for index in 0..30 {
        let name = format!("__init__{index:02}.py");
        let key = object_store::path::Path::parse(format!("{prefix}/n/{name}")).unwrap();
        runtime.block_on(store.put(&key, object_store::PutPayload::new())).unwrap();
        expected.push_str(&format!("/data/n/{name}\n"));
    }
    let marker = object_store::path::Path::parse(format!("{prefix}/n/sub")).unwrap().join("");
    runtime.block_on(store.put(&marker, object_store::PutPayload::new())).unwrap();
    expected.push_str("/data/n/sub\n");
    let agent = registry.agent();
    assert_eq!(agent.search_files("/data/n", "**", &[]).unwrap().to_text(), expected);
    assert_eq!(agent.list("/data/n/sub").unwrap().to_text(), "`/data/n/sub` is empty\n");
    assert_eq!(agent.read_text("/data/n/__init__07.py", &ReadWindow::default()).unwrap().content, "");
}

/// The text of a tree at `/data/m` with these entries (name, depth below it).
fn agent_tree_of(entries: &[(&str, usize)]) -> String {
    let mut text = "/data/m/\n".to_owned();
    for (name, depth) in entries {
        text.push_str(&format!("{}{name}\n", "  ".repeat(depth + 1)));
    }
    text
}
