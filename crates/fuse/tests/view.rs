//! The FUSE view driven as a shell drives it: `std::fs` against a real mountpoint.
//!
//! Each test mounts its own view of a fresh fixture. On a machine that cannot mount FUSE (no
//! `/dev/fuse`, no privilege) every test prints why it did not run and returns; with
//! `VFS_REQUIRE_FUSE=1` (what `scripts/test` sets where `/dev/fuse` exists) it fails instead,
//! so a suite that should have run them cannot pass without them.

#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::print_stderr,
    reason = "fixture: tests build fixtures on disk, look at them through the view, and say when they cannot run"
)]

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use vfs::{MountRegistry, MountSpec, NameRule};

const EROFS: i32 = 30;
/// `O_TRUNC`, as Linux numbers it.
const O_TRUNC: i32 = 0o1000;
const EACCES: i32 = 13;
const EPERM: i32 = 1;
const ENOTEMPTY: i32 = 39;
const ESTALE: i32 = 116;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let fixture = Fixture { dir: tempfile::tempdir().unwrap() };
        fs::create_dir(fixture.physical("mnt")).unwrap();
        fixture
    }

    fn physical(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn file(&self, relative: &str, content: &[u8]) {
        let path = self.physical(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn spec(&self, relative: &str, rest: &str) -> MountSpec {
        fs::create_dir_all(self.physical(relative)).unwrap();
        format!("{}:{rest}", self.physical(relative).display()).parse().unwrap()
    }
}

/// A mounted view and the fixture under it; the view is unmounted first when dropped.
struct Mounted {
    view: Option<vfs_fuse::Mounted>,
    registry: MountRegistry,
    fixture: Fixture,
}

impl Mounted {
    fn at(&self, virtual_path: &str) -> PathBuf {
        self.fixture.physical("mnt").join(virtual_path.trim_start_matches('/'))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(view) = self.view.take() {
            view.unmount().unwrap();
        }
    }
}

/// Mounts the view of the registry `build` makes from the fixture, or says why not.
fn mount(build: impl FnOnce(&Fixture) -> MountRegistry) -> Option<Mounted> {
    let fixture = Fixture::new();
    let registry = build(&fixture);
    match vfs_fuse::mount(&registry, &fixture.physical("mnt"), &vfs_fuse::FuseOptions::default()) {
        Ok(view) => Some(Mounted { view: Some(view), registry, fixture }),
        Err(error) => {
            assert!(
                std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
                "VFS_REQUIRE_FUSE is set, but the view cannot be mounted: {error}"
            );
            eprintln!("SKIPPED: this machine cannot mount the FUSE view: {error}");
            None
        }
    }
}

/// `/src` read-only with a hidden `.env`, `/w` read-write with a read-only `docs`, `/keep`
/// without deletes, and the internal `/llm-logs`.
fn standard(fixture: &Fixture) -> MountRegistry {
    fixture.file("src/a.txt", b"hello\n");
    fixture.file("src/.env", b"SECRET=1\n");
    fixture.file("src/sub/b.bin", &(0..=255u8).collect::<Vec<u8>>());
    fixture.file("w/docs/guide.md", b"# guide\n");
    fixture.file("keep/k.txt", b"kept\n");
    fixture.file("logs/old.jsonl", b"{}\n");
    MountRegistry::builder()
        .mount(fixture.spec("src", "/src:ro"))
        .mount(fixture.spec("w", "/w:rw;docs:ro"))
        .mount(fixture.spec("keep", "/keep:rwnd"))
        .internal(fixture.spec("logs", "/llm-logs:rw"))
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap()
}

fn names(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(directory).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

fn errno(result: std::io::Result<impl std::fmt::Debug>) -> i32 {
    result.expect_err("the call should have been refused").raw_os_error().unwrap()
}

#[test]
fn the_root_lists_the_agent_facing_mounts_and_hidden_names_are_absent() {
    let Some(view) = mount(standard) else { return };
    assert_eq!(names(&view.at("/")), ["keep", "src", "w"]);
    assert_eq!(names(&view.at("/src")), ["a.txt", "sub"]);
    assert_eq!(fs::metadata(view.at("/src/.env")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::read(view.at("/src/.env")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::metadata(view.at("/llm-logs")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::read_dir(view.at("/llm-logs/")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::metadata(view.at("/nowhere")).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn contents_pass_byte_for_byte_and_reads_at_offsets_see_the_file() {
    let Some(view) = mount(standard) else { return };
    assert_eq!(fs::read(view.at("/src/a.txt")).unwrap(), b"hello\n");
    assert_eq!(fs::read(view.at("/src/sub/b.bin")).unwrap(), (0..=255u8).collect::<Vec<u8>>());
    let mut file = fs::File::open(view.at("/src/sub/b.bin")).unwrap();
    file.seek(SeekFrom::Start(250)).unwrap();
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, [250, 251, 252, 253, 254, 255]);
    let metadata = fs::metadata(view.at("/src/sub/b.bin")).unwrap();
    assert_eq!(metadata.len(), 256);
    assert!(metadata.is_file());
    // Read-only places carry no write bits.
    assert_eq!(metadata.permissions().mode() & 0o222, 0);
    assert_ne!(fs::metadata(view.at("/w/x")).map_or(0o200, |m| m.permissions().mode()) & 0o200, 0);
}

#[test]
fn writes_where_the_rights_are_read_only_are_erofs() {
    let Some(view) = mount(standard) else { return };
    assert_eq!(errno(fs::write(view.at("/src/new.txt"), b"x")), EROFS);
    assert_eq!(errno(fs::write(view.at("/src/a.txt"), b"x")), EROFS);
    assert_eq!(errno(OpenOptions::new().append(true).open(view.at("/src/a.txt"))), EROFS);
    // An open for reading that truncates (`O_RDONLY|O_TRUNC`) would write too.
    assert_eq!(errno(OpenOptions::new().read(true).custom_flags(O_TRUNC).open(view.at("/src/a.txt"))), EROFS);
    assert_eq!(errno(fs::remove_file(view.at("/src/a.txt"))), EROFS);
    assert_eq!(errno(fs::create_dir(view.at("/src/d"))), EROFS);
    assert_eq!(errno(fs::rename(view.at("/src/a.txt"), view.at("/w/a.txt"))), EROFS);
    // A read-only sub-path of a writable mount.
    assert_eq!(errno(fs::write(view.at("/w/docs/guide.md"), b"x")), EROFS);
    assert_eq!(errno(fs::write(view.at("/w/docs/new.md"), b"x")), EROFS);
    // A file a name rule keeps read-only (the default `.git`) in a writable mount: no write
    // bit, and every open that would write is `EROFS`, as under a read-only sub-path.
    view.fixture.file("w/.git/config", b"[core]\n");
    assert_eq!(fs::metadata(view.at("/w/.git/config")).unwrap().permissions().mode() & 0o222, 0);
    assert_eq!(errno(OpenOptions::new().append(true).open(view.at("/w/.git/config"))), EROFS);
    assert_eq!(errno(OpenOptions::new().write(true).open(view.at("/w/.git/config"))), EROFS);
    assert_eq!(errno(OpenOptions::new().read(true).custom_flags(O_TRUNC).open(view.at("/w/.git/config"))), EROFS);
    assert_eq!(errno(fs::remove_file(view.at("/w/.git/config"))), EROFS);
    // New names there too (the core refuses them, marked read-only).
    assert_eq!(errno(fs::write(view.at("/w/.git/new"), b"x")), EROFS);
    assert_eq!(errno(fs::create_dir(view.at("/w/.git/more"))), EROFS);
    fs::write(view.at("/w/loose.txt"), b"loose\n").unwrap();
    assert_eq!(errno(fs::rename(view.at("/w/loose.txt"), view.at("/w/.git/loose.txt"))), EROFS);
    assert_eq!(fs::read(view.fixture.physical("w/loose.txt")).unwrap(), b"loose\n");
    // A new name the rule matches in a writable directory (`.git` anywhere).
    fs::create_dir(view.at("/w/sub")).unwrap();
    assert_eq!(errno(fs::write(view.at("/w/sub/.git"), b"x")), EROFS);
    assert_eq!(errno(fs::create_dir(view.at("/w/sub/.git"))), EROFS);
    assert_eq!(errno(fs::rename(view.at("/w/loose.txt"), view.at("/w/sub/.git"))), EROFS);
    assert_eq!(names(&view.fixture.physical("w/sub")), Vec::<String>::new());
    assert_eq!(fs::read(view.fixture.physical("w/.git/config")).unwrap(), b"[core]\n");
    assert!(!view.fixture.physical("w/.git/new").exists() && !view.fixture.physical("w/.git/more").exists());
    assert_eq!(fs::read(view.fixture.physical("src/a.txt")).unwrap(), b"hello\n");
    assert_eq!(fs::read(view.fixture.physical("w/docs/guide.md")).unwrap(), b"# guide\n");
    assert!(!view.fixture.physical("w/docs/new.md").exists());
    assert!(!view.fixture.physical("src/new.txt").exists());
}

#[test]
fn a_write_is_committed_whole_when_the_file_is_closed() {
    let Some(view) = mount(standard) else { return };
    fs::write(view.fixture.physical("w/f.txt"), b"old content\n").unwrap();
    let mut file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/f.txt")).unwrap();
    file.write_all(b"new ").unwrap();
    // Neither the disk nor a reader through the view sees part of the write.
    assert_eq!(fs::read(view.fixture.physical("w/f.txt")).unwrap(), b"old content\n");
    file.write_all(b"content\n").unwrap();
    file.sync_all().unwrap();
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/f.txt")).unwrap(), b"new content\n");
    assert_eq!(fs::read(view.at("/w/f.txt")).unwrap(), b"new content\n");
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    fs::write(view.at("/w/bin/all.bin"), &bytes).unwrap_err();
    fs::create_dir(view.at("/w/bin")).unwrap();
    fs::write(view.at("/w/bin/all.bin"), &bytes).unwrap();
    assert_eq!(fs::read(view.fixture.physical("w/bin/all.bin")).unwrap(), bytes);
    assert_eq!(fs::read(view.at("/w/bin/all.bin")).unwrap(), bytes);
}

/// A reader through the view never sees what a write not yet committed wrote (red team: the
/// writer's bytes went into the kernel's pages of the file, which the reader shares, so a
/// reader saw them before the close, even bytes whose commit then failed and that no file
/// ever held). A reader that opened before the writer reads the old content to its end; one
/// that opens while the writer writes, truncating or not, reads it whole; after the close,
/// the new. (A reader that opened before a writer that truncates may find the file ending
/// early: the kernel keeps one size of a file; docs/cli.md.)
#[test]
fn a_reader_never_sees_what_a_write_not_yet_committed_wrote() {
    const SIZE: usize = 1 << 20;
    let Some(view) = mount(standard) else { return };
    let old = vec![b'A'; SIZE];
    let described = |bytes: &[u8]| {
        format!("{} bytes, {} of them not the old", bytes.len(), bytes.iter().filter(|byte| **byte != b'A').count())
    };
    for truncating in [false, true] {
        fs::write(view.fixture.physical("w/r.bin"), &old).unwrap();
        let mut reader = fs::File::open(view.at("/w/r.bin")).unwrap();
        let mut first = vec![0; SIZE / 2];
        reader.read_exact(&mut first).unwrap();
        let mut writer = OpenOptions::new().write(true).truncate(truncating).open(view.at("/w/r.bin")).unwrap();
        writer.write_all(&vec![b'B'; SIZE / 4]).unwrap();
        let meanwhile = fs::read(view.at("/w/r.bin")).unwrap();
        assert!(meanwhile == old, "truncating {truncating}: a reader opened meanwhile saw {}", described(&meanwhile));
        writer.write_all(&vec![b'B'; SIZE / 4 * 3]).unwrap();
        if !truncating {
            let mut rest = Vec::new();
            reader.read_to_end(&mut rest).unwrap();
            first.extend(rest);
            assert!(first == old, "the reader opened before saw {}", described(&first));
        }
        drop(writer);
        assert!(fs::read(view.at("/w/r.bin")).unwrap() == vec![b'B'; SIZE], "truncating {truncating}");
    }
    // A write whose commit fails (the file changed on the disk since the open): no reader
    // ever saw its bytes, before or after.
    fs::write(view.fixture.physical("w/r.bin"), &old).unwrap();
    let mut reader = fs::File::open(view.at("/w/r.bin")).unwrap();
    let mut first = vec![0; SIZE / 2];
    reader.read_exact(&mut first).unwrap();
    let mut writer = OpenOptions::new().write(true).open(view.at("/w/r.bin")).unwrap();
    writer.write_all(&vec![b'C'; SIZE]).unwrap();
    fs::write(view.fixture.physical("w/r.bin"), vec![b'D'; SIZE]).unwrap();
    assert_eq!(errno(writer.sync_all()), ESTALE);
    drop(writer);
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(!rest.contains(&b'C'), "the reader saw bytes no file held");
    assert!(!fs::read(view.at("/w/r.bin")).unwrap().contains(&b'C'));
}

/// A directory moved away or removed on the disk is not made again by a `mkdir` through a
/// handle held on it, as a disk's `mkdir` does not (red team: `mkdirat` on a held handle made
/// the moved directory again, and a removed chain of them).
#[test]
fn a_mkdir_through_a_handle_of_a_directory_gone_makes_nothing() {
    let Some(view) = mount(standard) else { return };
    let mode = rustix::fs::Mode::from_raw_mode(0o755);
    fs::create_dir_all(view.fixture.physical("w/rz/a")).unwrap();
    let held = fs::File::open(view.at("/w/rz/a")).unwrap();
    rustix::fs::mkdirat(&held, "first", mode).unwrap();
    assert!(view.fixture.physical("w/rz/a/first").is_dir());
    fs::rename(view.fixture.physical("w/rz"), view.fixture.physical("moved-away")).unwrap();
    assert_eq!(rustix::fs::mkdirat(&held, "sub", mode), Err(rustix::io::Errno::NOENT));
    assert!(!view.fixture.physical("w/rz").exists());
    assert!(!view.fixture.physical("moved-away/a/sub").exists());
    fs::create_dir_all(view.fixture.physical("w/rq/a/b")).unwrap();
    let held = fs::File::open(view.at("/w/rq/a/b")).unwrap();
    fs::remove_dir_all(view.fixture.physical("w/rq")).unwrap();
    assert_eq!(rustix::fs::mkdirat(&held, "sub", mode), Err(rustix::io::Errno::NOENT));
    assert!(!view.fixture.physical("w/rq").exists());
}

/// The view removes a link as `delete_file` does, judged at the link (a read-only file it
/// names is left as it is), and lists no name it could not look up (red team: a link to a
/// read-only file was `EROFS` to `rm`, and a name with a control character, made beside vfs,
/// was listed while every lookup of it failed, so `rm -rf` of its directory could not end).
#[test]
fn a_link_is_removed_as_the_tools_remove_it_and_unspellable_names_are_not_listed() {
    let Some(view) = mount(standard) else { return };
    std::os::unix::fs::symlink("docs/guide.md", view.fixture.physical("w/to-guide")).unwrap();
    fs::remove_file(view.at("/w/to-guide")).unwrap();
    assert!(fs::symlink_metadata(view.fixture.physical("w/to-guide")).is_err());
    assert_eq!(fs::read(view.fixture.physical("w/docs/guide.md")).unwrap(), b"# guide\n");
    assert_eq!(errno(fs::remove_file(view.at("/w/docs/guide.md"))), EROFS);
    fs::create_dir(view.fixture.physical("w/odd")).unwrap();
    fs::write(view.fixture.physical("w/odd/ctl\nname"), b"x").unwrap();
    fs::write(view.fixture.physical("w/odd/plain.txt"), b"x").unwrap();
    assert_eq!(names(&view.at("/w/odd")), ["plain.txt"]);
}

/// A copy of an open file's descriptor closed by another process (a child that inherited it
/// and closes it at its `exec`, as every program started while a file is written does)
/// publishes nothing: readers see the old content until the opener's own close. (It
/// committed what was written so far, and a reader saw half a file.)
#[test]
fn a_child_closing_an_inherited_descriptor_publishes_nothing() {
    let Some(view) = mount(standard) else { return };
    fs::write(view.fixture.physical("w/c.txt"), b"old\n").unwrap();
    let mut file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/c.txt")).unwrap();
    file.write_all(b"NEW-HALF").unwrap();
    // Rust opens files close-on-exec: the child's `exec` closes its copy.
    assert!(std::process::Command::new("/bin/true").status().unwrap().success());
    assert_eq!(fs::read(view.fixture.physical("w/c.txt")).unwrap(), b"old\n");
    file.write_all(b" and the rest\n").unwrap();
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/c.txt")).unwrap(), b"NEW-HALF and the rest\n");

    // Once the opener has closed it, the child's close commits, before the child has ended
    // (the last close's `release` comes after `close` returns: a reader then saw nothing).
    let file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/c.txt")).unwrap();
    let mut child = std::process::Command::new("/bin/sh")
        .args(["-c", "read go; echo from the child"])
        .stdin(std::process::Stdio::piped())
        .stdout(file)
        .spawn()
        .unwrap();
    // The opener's copy was closed at the spawn; the child writes after.
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(fs::read(view.fixture.physical("w/c.txt")).unwrap(), b"from the child\n");
}

#[test]
fn a_write_past_the_cap_keeps_nothing_of_that_open_file() {
    let Some(view) = mount(|fixture| {
        fixture.file("w/f.txt", b"before\n");
        MountRegistry::builder()
            .mount(fixture.spec("w", "/w:rw"))
            .limits({
                let mut limits = vfs::Limits::default();
                limits.write_bytes = 1024;
                limits
            })
            .build(vfs::ambient_authority())
            .unwrap()
    }) else {
        return;
    };
    let efbig = rustix::io::Errno::FBIG.raw_os_error();
    let mut file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/f.txt")).unwrap();
    file.write_all(&[b'a'; 1000]).unwrap();
    assert_eq!(errno(file.write_all(&[b'b'; 100])), efbig);
    // Every later write of this open file fails too, and so does its close: nothing of it is
    // committed, not the first 1,000 bytes nor a later small write.
    assert_eq!(errno(file.write_all(b"c")), efbig);
    assert_eq!(errno(file.sync_all()), efbig);
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/f.txt")).unwrap(), b"before\n");
    // A new file past the cap is not made either; a file within it still is.
    let mut file = fs::File::create(view.at("/w/new.txt")).unwrap();
    assert_eq!(errno(file.write_all(&[b'x'; 2000])), efbig);
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/new.txt")).unwrap_or_default(), b"");
    fs::write(view.at("/w/small.txt"), b"small\n").unwrap();
    assert_eq!(fs::read(view.fixture.physical("w/small.txt")).unwrap(), b"small\n");
}

#[test]
fn a_file_open_for_writing_is_committed_where_it_is_at_its_close_and_judged_there() {
    let Some(view) = mount(|fixture| {
        fixture.file("w/dir/f.txt", b"before\n");
        fixture.file("w/locked/keep.txt", b"k\n");
        MountRegistry::builder()
            .mount(fixture.spec("w", "/w:rw;locked/**/*.txt:ro"))
            .build(vfs::ambient_authority())
            .unwrap()
    }) else {
        return;
    };
    // Renamed through the view to a writable place, the file's content goes there.
    let mut file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/dir/f.txt")).unwrap();
    file.write_all(b"moved with its directory\n").unwrap();
    fs::rename(view.at("/w/dir"), view.at("/w/dir2")).unwrap();
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/dir2/f.txt")).unwrap(), b"moved with its directory\n");
    assert!(!view.fixture.physical("w/dir").exists());
    // Into a read-only place its directory may not go (its `f.txt` would be under
    // `locked/**/*.txt:ro`, where no write could create it): the file stays, and its content
    // is committed where it is.
    let mut file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/dir2/f.txt")).unwrap();
    file.write_all(b"written beside a read-only place\n").unwrap();
    assert_eq!(
        errno(fs::rename(view.at("/w/dir2"), view.at("/w/locked/dir"))),
        rustix::io::Errno::ACCESS.raw_os_error()
    );
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/dir2/f.txt")).unwrap(), b"written beside a read-only place\n");
    assert!(!view.fixture.physical("w/locked/dir").exists());
    // Moved on disk, where the view's table does not follow: the close says the place
    // changed, and nothing is written.
    fs::create_dir(view.fixture.physical("w/d3")).unwrap();
    fs::write(view.fixture.physical("w/d3/g.txt"), b"g\n").unwrap();
    let mut file = OpenOptions::new().write(true).truncate(true).open(view.at("/w/d3/g.txt")).unwrap();
    file.write_all(b"lost\n").unwrap();
    fs::rename(view.fixture.physical("w/d3"), view.fixture.physical("w/d4")).unwrap();
    assert_eq!(errno(file.sync_all()), rustix::io::Errno::STALE.raw_os_error());
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/d4/g.txt")).unwrap(), b"g\n");
    // Its directory removed on disk after a commit: the next write is refused as missing,
    // and the directory is not made again.
    fs::create_dir(view.fixture.physical("w/d5")).unwrap();
    fs::write(view.fixture.physical("w/d5/h.txt"), b"h\n").unwrap();
    let mut file = OpenOptions::new().write(true).open(view.at("/w/d5/h.txt")).unwrap();
    file.write_all(b"one\n").unwrap();
    file.sync_all().unwrap();
    assert_eq!(fs::read(view.fixture.physical("w/d5/h.txt")).unwrap(), b"one\n");
    fs::remove_dir_all(view.fixture.physical("w/d5")).unwrap();
    let again = file.write_all(b"two\n").and_then(|()| file.sync_all());
    assert_eq!(errno(again), rustix::io::Errno::NOENT.raw_os_error());
    drop(file);
    assert!(!view.fixture.physical("w/d5").exists());
}

#[test]
fn the_save_patterns_of_editors_and_tools_work() {
    let Some(view) = mount(standard) else { return };
    fs::write(view.fixture.physical("w/conf.txt"), b"a=1\n").unwrap();
    // A temporary file renamed over the target (`sed -i`, git, Python's `os.replace`).
    fs::write(view.at("/w/.conf.txt.tmp"), b"a=2\n").unwrap();
    fs::rename(view.at("/w/.conf.txt.tmp"), view.at("/w/conf.txt")).unwrap();
    assert_eq!(fs::read(view.fixture.physical("w/conf.txt")).unwrap(), b"a=2\n");
    assert!(!view.fixture.physical("w/.conf.txt.tmp").exists());
    // Appends.
    let mut log = OpenOptions::new().append(true).open(view.at("/w/conf.txt")).unwrap();
    log.write_all(b"b=3\n").unwrap();
    drop(log);
    assert_eq!(fs::read(view.at("/w/conf.txt")).unwrap(), b"a=2\nb=3\n");
    // An open for reading with `O_TRUNC` truncates, as Linux does where one may write.
    let mut emptied = OpenOptions::new().read(true).custom_flags(O_TRUNC).open(view.at("/w/conf.txt")).unwrap();
    let mut seen = Vec::new();
    emptied.read_to_end(&mut seen).unwrap();
    assert_eq!((seen, fs::read(view.fixture.physical("w/conf.txt")).unwrap()), (Vec::new(), Vec::new()));
    drop(emptied);
    fs::write(view.at("/w/conf.txt"), b"a=2\nb=3\n").unwrap();
    // A truncation by size, with no handle (`truncate -s`).
    OpenOptions::new().write(true).open(view.at("/w/conf.txt")).unwrap().set_len(3).unwrap();
    assert_eq!(fs::read(view.fixture.physical("w/conf.txt")).unwrap(), b"a=2");
    // A read-write handle reads back what it wrote before the close.
    let mut both = OpenOptions::new().read(true).write(true).open(view.at("/w/conf.txt")).unwrap();
    both.seek(SeekFrom::Start(2)).unwrap();
    both.write_all(b"9").unwrap();
    both.seek(SeekFrom::Start(0)).unwrap();
    let mut seen = String::new();
    both.read_to_string(&mut seen).unwrap();
    assert_eq!(seen, "a=9");
    drop(both);
    assert_eq!(fs::read(view.fixture.physical("w/conf.txt")).unwrap(), b"a=9");
    // A mode change is accepted and changes nothing (vfs keeps the modes).
    fs::set_permissions(view.at("/w/conf.txt"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(fs::metadata(view.fixture.physical("w/conf.txt")).unwrap().permissions().mode() & 0o111, 0);
}

#[test]
fn a_file_changed_since_the_open_is_not_overwritten_at_the_close() {
    let Some(view) = mount(standard) else { return };
    fs::write(view.fixture.physical("w/race.txt"), b"first\n").unwrap();
    let mut file = OpenOptions::new().write(true).open(view.at("/w/race.txt")).unwrap();
    file.write_all(b"mine!\n").unwrap();
    // Someone else (a tool, another process, the disk) writes the file meanwhile.
    fs::write(view.fixture.physical("w/race.txt"), b"theirs\n").unwrap();
    assert_eq!(errno(file.sync_all()), ESTALE);
    // The open's writing has ended: a write after fails the same way (it staged again, and
    // the close said nothing).
    assert_eq!(errno(file.write_all(b"more\n")), ESTALE);
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/race.txt")).unwrap(), b"theirs\n");
}

/// Appends land at the end of the file as it is when they are committed. The kernel reckons
/// an append's offset from a size it may have cached (a second, or another open's writes
/// staged beside): written there, the gap was committed as zeros. And two opens appending at
/// once each keep their bytes (the second to close failed with `ESTALE`, its lines lost).
#[test]
fn appends_land_at_the_end_of_the_file_as_it_is_at_their_close() {
    let Some(view) = mount(standard) else { return };
    let append = |path: &str| OpenOptions::new().append(true).open(view.at(path)).unwrap();
    // A size the kernel cached, then the file cut short on the disk.
    fs::write(view.at("/w/log.txt"), b"a-long-line-of-content-here\n").unwrap();
    assert_eq!(fs::metadata(view.at("/w/log.txt")).unwrap().len(), 28);
    fs::write(view.fixture.physical("w/log.txt"), b"S\n").unwrap();
    let mut file = append("/w/log.txt");
    file.write_all(b"X\n").unwrap();
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/log.txt")).unwrap(), b"S\nX\n");

    // Two opens of one process, the first closed last.
    fs::write(view.fixture.physical("w/two.txt"), b"base\n").unwrap();
    let mut first = append("/w/two.txt");
    first.write_all(b"AAAA\n").unwrap();
    let mut second = append("/w/two.txt");
    second.write_all(b"BBBB\n").unwrap();
    second.sync_all().unwrap();
    first.write_all(b"aaaa\n").unwrap();
    first.sync_all().unwrap();
    drop((first, second));
    assert_eq!(fs::read(view.fixture.physical("w/two.txt")).unwrap(), b"base\nBBBB\nAAAA\naaaa\n");
    // Larger, and read through the view at once: the kernel drops what it held of the file
    // (its size, and pages with the bytes where it wrote them), as for a tool's change.
    fs::write(view.fixture.physical("w/big.txt"), b"0123456789").unwrap();
    let (a, b) = (vec![b'a'; 5000], vec![b'b'; 5000]);
    let mut first = append("/w/big.txt");
    let mut second = append("/w/big.txt");
    first.write_all(&a).unwrap();
    second.write_all(&b).unwrap();
    drop(second);
    assert_eq!(fs::metadata(view.at("/w/big.txt")).unwrap().len(), 5010, "the first's bytes are not in yet");
    drop(first);
    let whole = [b"0123456789".as_slice(), &b, &a].concat();
    // Told by the view's invalidating thread, at once; well within the second the kernel
    // would otherwise keep the size it saw above.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(600);
    while fs::metadata(view.at("/w/big.txt")).unwrap().len() != 10_010 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(fs::metadata(view.at("/w/big.txt")).unwrap().len(), 10_010);
    assert!(fs::read(view.at("/w/big.txt")).unwrap() == whole, "read through the view as committed");

    // Eight appenders at once, each line kept whole.
    fs::write(view.fixture.physical("w/many.txt"), b"base\n").unwrap();
    std::thread::scope(|scope| {
        for index in 0..8 {
            let view = &view;
            scope.spawn(move || {
                let mut file = OpenOptions::new().append(true).open(view.at("/w/many.txt")).unwrap();
                file.write_all(format!("line {index}\n").as_bytes()).unwrap();
                file.sync_all().unwrap();
            });
        }
    });
    let text = fs::read_to_string(view.fixture.physical("w/many.txt")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.remove(0), "base");
    lines.sort_unstable();
    assert_eq!(lines, (0..8).map(|index| format!("line {index}")).collect::<Vec<_>>());

    // An open that cut its file is its own content: committed only over what it opened.
    fs::write(view.fixture.physical("w/cut.txt"), b"one\n").unwrap();
    let mut file = append("/w/cut.txt");
    file.set_len(0).unwrap();
    file.write_all(b"two\n").unwrap();
    fs::write(view.fixture.physical("w/cut.txt"), b"theirs\n").unwrap();
    assert_eq!(errno(file.sync_all()), ESTALE);
    drop(file);
    assert_eq!(fs::read(view.fixture.physical("w/cut.txt")).unwrap(), b"theirs\n");
}

#[test]
fn moves_and_deletes_keep_the_rules() {
    let Some(view) = mount(standard) else { return };
    fs::create_dir_all(view.at("/w/d/e")).unwrap();
    fs::write(view.at("/w/d/e/x.txt"), b"x").unwrap();
    assert_eq!(errno(fs::remove_dir(view.at("/w/d"))), ENOTEMPTY);
    fs::rename(view.at("/w/d"), view.at("/w/moved")).unwrap();
    assert_eq!(fs::read(view.at("/w/moved/e/x.txt")).unwrap(), b"x");
    assert_eq!(fs::metadata(view.at("/w/d")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::read(view.fixture.physical("w/moved/e/x.txt")).unwrap(), b"x");
    // The read-only sub-path cannot be carried out of its protection.
    assert_eq!(errno(fs::rename(view.at("/w/docs"), view.at("/w/loose"))), EROFS);
    assert!(view.fixture.physical("w/docs/guide.md").exists());
    // A hidden name cannot be made.
    assert_eq!(errno(fs::write(view.at("/w/.env"), b"x")), EACCES);
    assert!(!view.fixture.physical("w/.env").exists());
    // `rwnd`: writes yes, deletes no, and a rename takes its source away.
    fs::write(view.at("/keep/new.txt"), b"n").unwrap();
    fs::write(view.at("/keep/k.txt"), b"rewritten\n").unwrap();
    assert_eq!(errno(fs::remove_file(view.at("/keep/k.txt"))), EACCES);
    assert_eq!(errno(fs::rename(view.at("/keep/new.txt"), view.at("/keep/k.txt"))), EACCES);
    assert_eq!(fs::read(view.fixture.physical("keep/k.txt")).unwrap(), b"rewritten\n");
    assert_eq!(fs::read(view.fixture.physical("keep/new.txt")).unwrap(), b"n");
    // A directory removed beside the view is not brought back by a create in it.
    fs::create_dir(view.at("/w/gone")).unwrap();
    let stale = view.at("/w/gone");
    fs::remove_dir(view.fixture.physical("w/gone")).unwrap();
    assert_eq!(fs::write(stale.join("f.txt"), b"x").unwrap_err().kind(), ErrorKind::NotFound);
    assert!(!view.fixture.physical("w/gone").exists());
    // Links and nodes are refused.
    assert_eq!(errno(std::os::unix::fs::symlink("x.txt", view.at("/w/link"))), EPERM);
    assert_eq!(errno(fs::hard_link(view.at("/w/moved/e/x.txt"), view.at("/w/hard"))), EPERM);
    fs::remove_file(view.at("/w/moved/e/x.txt")).unwrap();
    fs::remove_dir(view.at("/w/moved/e")).unwrap();
    assert_eq!(names(&view.at("/w/moved")), Vec::<String>::new());
}

#[test]
fn a_change_on_the_disk_shows_through_the_view() {
    let Some(view) = mount(standard) else { return };
    assert_eq!(fs::metadata(view.at("/w/later.txt")).unwrap_err().kind(), ErrorKind::NotFound);
    fs::write(view.fixture.physical("w/later.txt"), b"made outside\n").unwrap();
    // No negative entry is kept: the file is there at once.
    assert_eq!(fs::read(view.at("/w/later.txt")).unwrap(), b"made outside\n");
    fs::rename(view.fixture.physical("w/later.txt"), view.fixture.physical("w/elsewhere.txt")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(fs::metadata(view.at("/w/later.txt")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::read(view.at("/w/elsewhere.txt")).unwrap(), b"made outside\n");
}

#[test]
fn pages_kept_between_opens_never_hide_a_change() {
    let Some(view) = mount(|fixture| {
        fixture.file("w/c.txt", b"one\n");
        MountRegistry::builder().mount(fixture.spec("w", "/w:rw")).build(vfs::ambient_authority()).unwrap()
    }) else {
        return;
    };
    // Settled: the file last changed more than a second ago, so the second open may keep
    // the pages of the first.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"one\n");
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"one\n");
    // A change in place on the disk, of the same size: seen at the next open, not a second later.
    let mut file = OpenOptions::new().write(true).open(view.fixture.physical("w/c.txt")).unwrap();
    file.write_all(b"two\n").unwrap();
    drop(file);
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"two\n");
    // A replacement by the tools (another inode), the same size again.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"two\n");
    view.registry.agent().write("/w/c.txt", "thr\n", &vfs::Precondition::Any).unwrap();
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"thr\n");
    // A write through the view, then reads through it.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"thr\n");
    fs::write(view.at("/w/c.txt"), b"fou\n").unwrap();
    assert_eq!(fs::read(view.at("/w/c.txt")).unwrap(), b"fou\n");
    assert_eq!(fs::read(view.fixture.physical("w/c.txt")).unwrap(), b"fou\n");
}

#[test]
fn a_change_by_the_tools_shows_through_the_view_at_once() {
    let Some(view) = mount(|fixture| {
        fixture.file("w/a.txt", b"one\n");
        fixture.file("w/d/in.txt", b"in\n");
        MountRegistry::builder().mount(fixture.spec("w", "/w:rw")).build(vfs::ambient_authority()).unwrap()
    }) else {
        return;
    };
    // The kernel now holds the entries and the attributes (for a second).
    assert_eq!(fs::metadata(view.at("/w/a.txt")).unwrap().len(), 4);
    assert_eq!(fs::metadata(view.at("/w/d/in.txt")).unwrap().len(), 3);
    let agent = view.registry.agent();
    agent.write("/w/a.txt", "longer now\n", &vfs::Precondition::Any).unwrap();
    assert_eq!(fs::metadata(view.at("/w/a.txt")).unwrap().len(), 11);
    agent.move_path("/w/a.txt", "/w/b.txt", &vfs::Precondition::Any, &vfs::Precondition::Absent).unwrap();
    assert_eq!(fs::metadata(view.at("/w/a.txt")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::read(view.at("/w/b.txt")).unwrap(), b"longer now\n");
    agent.read_text("/w/d/in.txt", &vfs::ReadWindow::default()).unwrap();
    agent.delete("/w/d", true, &vfs::Precondition::Any).unwrap();
    assert_eq!(fs::metadata(view.at("/w/d/in.txt")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::metadata(view.at("/w/d")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(names(&view.at("/w")), ["b.txt"]);
}

#[test]
fn nothing_physical_shows_in_the_mount_table() {
    let Some(view) = mount(standard) else { return };
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mountpoint = view.fixture.physical("mnt").display().to_string();
    let line = mountinfo.lines().find(|line| line.contains(&mountpoint)).expect("the view is in the mount table");
    let fields: Vec<&str> = line.split(" - ").nth(1).unwrap().split(' ').collect();
    // The type is `fuse` when the kernel is asked directly (as root), `fuse.vfs` through
    // `fusermount3`; the source is `vfs` either way.
    assert!(["fuse", "fuse.vfs"].contains(&fields[0]), "{line}");
    assert_eq!(fields[1], "vfs", "{line}");
    for physical in ["src", "w", "keep", "logs"] {
        assert!(!line.contains(&view.fixture.physical(physical).display().to_string()), "{line}");
    }
}

#[test]
fn writes_and_renames_at_once_in_one_directory_all_land() {
    let Some(view) = mount(standard) else { return };
    fs::create_dir(view.at("/w/p")).unwrap();
    let directory = view.at("/w/p");
    std::thread::scope(|scope| {
        for worker in 0..4 {
            let directory = directory.clone();
            scope.spawn(move || {
                for round in 0..25 {
                    let content = format!("worker {worker} round {round}\n");
                    let temporary = directory.join(format!(".{worker}-{round}.tmp"));
                    fs::write(&temporary, &content).unwrap();
                    fs::rename(&temporary, directory.join(format!("{worker}-{round}.txt"))).unwrap();
                }
            });
        }
    });
    let mut expected: Vec<String> =
        (0..4).flat_map(|worker| (0..25).map(move |round| format!("{worker}-{round}.txt"))).collect();
    expected.sort();
    assert_eq!(names(&directory), expected);
    for worker in 0..4 {
        for round in 0..25 {
            let name = format!("w/p/{worker}-{round}.txt");
            assert_eq!(
                fs::read_to_string(view.fixture.physical(&name)).unwrap(),
                format!("worker {worker} round {round}\n")
            );
        }
    }
}

#[test]
fn a_busy_view_is_detached_and_its_open_files_go_on_working_until_closed() {
    let Some(mut view) = mount(standard) else { return };
    let mut held = fs::File::open(view.at("/src/a.txt")).unwrap();
    let mountpoint = view.fixture.physical("mnt").display().to_string();
    let mounted = |mountpoint: &str| {
        fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|line| line.split(' ').nth(4) == Some(mountpoint))
    };
    assert!(mounted(&mountpoint));
    // A plain unmount is refused with EBUSY while the file is open; the view detaches instead.
    view.view.take().unwrap().unmount().unwrap();
    assert!(!mounted(&mountpoint), "the view left the mount table");
    assert_eq!(
        fs::read_dir(view.fixture.physical("mnt")).unwrap().count(),
        0,
        "the mountpoint is the empty directory again"
    );
    let mut content = String::new();
    held.read_to_string(&mut content).unwrap();
    assert_eq!(content, "hello\n", "a file open in the view still reads until it is closed");
    drop(held);
}

/// A read-only view of `/src` alone (`vfs_fuse::mount_read_only`), or `None` when the machine
/// cannot mount one (said, or a failure under `VFS_REQUIRE_FUSE`).
fn mount_read_only(fixture: &Fixture, registry: &MountRegistry) -> Option<vfs_fuse::Mounted> {
    let options = vfs_fuse::FuseOptions::default();
    match vfs_fuse::mount_read_only(registry, "/src", &fixture.physical("mnt"), &options) {
        Ok(view) => Some(view),
        Err(error) => {
            assert!(
                std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
                "VFS_REQUIRE_FUSE is set, but the read-only view cannot be mounted: {error}"
            );
            eprintln!("SKIPPED: this machine cannot mount the read-only view: {error}");
            None
        }
    }
}

/// The read-only view of one mount keeps the gate's answers: a hidden name is absent, a write
/// is `EROFS` (the kernel's), content passes byte for byte at any offset. A file renamed on the
/// disk to a hidden name is not read through the name it had: each read asks the gate for the
/// file at the path (the view answers no `OPEN`, so it holds no file between reads).
#[test]
fn the_read_only_view_keeps_the_rules_and_reads_through_the_gate_each_time() {
    let fixture = Fixture::new();
    let registry = standard(&fixture);
    let big: Vec<u8> = (0..8 << 20).map(|index: u32| (index % 251) as u8).collect();
    fixture.file("src/big.bin", &big);
    let Some(view) = mount_read_only(&fixture, &registry) else { return };
    let root = fixture.physical("mnt");
    assert_eq!(names(&root), ["a.txt", "big.bin", "sub"]);
    assert_eq!(errno(fs::read(root.join(".env"))), 2);
    assert_eq!(errno(fs::write(root.join("new.txt"), "x")), EROFS);
    assert_eq!(fs::read(root.join("sub/b.bin")).unwrap(), (0..=255u8).collect::<Vec<u8>>());
    let mut file = fs::File::open(root.join("big.bin")).unwrap();
    let mut first = vec![0; 64 << 10];
    file.read_exact(&mut first).unwrap();
    assert!(first[..] == big[..64 << 10]);
    // On the disk: the file becomes `.env` (hidden), and a new `big.bin` of the same size
    // takes its name. A read past what the kernel read ahead gets the new file's bytes.
    fs::rename(fixture.physical("src/big.bin"), fixture.physical("src/.env")).unwrap();
    fixture.file("src/big.bin", &vec![7u8; 8 << 20]);
    file.seek(SeekFrom::Start(6 << 20)).unwrap();
    let mut later = vec![0; 4096];
    file.read_exact(&mut later).unwrap();
    assert_eq!(later, vec![7u8; 4096], "a read reached the file now named .env");
    drop(file);
    view.unmount().unwrap();
}

/// Which mounts take no write: `ro` with no override granting one, nothing mounted beneath
/// its root, and no other agent-facing mount's directory at, inside or around its own.
#[test]
fn only_mounts_no_write_reaches_may_have_a_read_only_view() {
    let fixture = Fixture::new();
    fixture.file("outer/p/w/f.txt", b"f\n");
    fixture.file("same/s.txt", b"s\n");
    fixture.file("wide/n/x.txt", b"x\n");
    let registry = MountRegistry::builder()
        .mount(fixture.spec("outer", "/r:ro"))
        .mount(fixture.spec("outer/p/w", "/w:rw"))
        .mount(fixture.spec("alone", "/alone:ro;sub:ro"))
        .mount(fixture.spec("loosened", "/loosened:ro;sub:rw"))
        .mount(fixture.spec("same", "/a:ro"))
        .mount(fixture.spec("same", "/b:rwnd"))
        .mount(fixture.spec("same2", "/s1:ro"))
        .mount(fixture.spec("same2", "/s2:ro"))
        .mount(fixture.spec("wide", "/wide:rw"))
        .mount(fixture.spec("wide/n", "/narrow:ro"))
        .mount(fixture.spec("top", "/top:ro"))
        .mount(fixture.spec("inner", "/top/inner:ro"))
        .mount(fixture.spec("top2", "/top2:ro"))
        .mount(fixture.spec("inner2", "/top2/inner:rw"))
        .mount(fixture.spec("logs", "/internal-ok:ro"))
        .internal(fixture.spec("alone/logs", "/llm-logs:rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    // Left out: `/r` (holds `/w`'s directory), `/a` (`/b` is its directory), `/narrow` (inside
    // `/wide`'s), `/top2` (a writable mount beneath it), `/loosened` (takes writes itself).
    // Two `ro` mounts of one directory, or one beneath another, take no write either.
    assert_eq!(registry.roots_without_writes(), ["/alone", "/internal-ok", "/s1", "/s2", "/top", "/top/inner"]);
    let refused =
        vfs_fuse::mount_read_only(&registry, "/r", &fixture.physical("mnt"), &vfs_fuse::FuseOptions::default());
    assert_eq!(
        refused.err().map(|error| error.to_string()),
        Some(
            "the mount `/r` takes writes (or another mount's do reach its files): only a mount that takes none can be served by a read-only view"
                .to_owned()
        )
    );
}

#[test]
fn past_its_bound_of_files_open_for_writing_an_open_for_writing_is_emfile() {
    // This process holds the files open and the view their stages: room for both first.
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if nofile.current.is_some_and(|current| current < 8192) {
        let room =
            rustix::process::Rlimit { current: Some(nofile.maximum.map_or(8192, |most| most.min(8192))), ..nofile };
        if rustix::process::setrlimit(rustix::process::Resource::Nofile, room).is_err() {
            eprintln!("SKIPPED: this process cannot hold 2,048 descriptors");
            return;
        }
    }
    let Some(view) = mount(standard) else { return };
    let path = |index: usize| view.at(&format!("/w/open/f{index}"));
    fs::create_dir_all(view.at("/w/open")).unwrap();
    let mut held = Vec::new();
    for index in 0..1024 {
        let mut file = fs::File::create(path(index)).unwrap();
        std::io::Write::write_all(&mut file, b"x").unwrap();
        held.push(file);
    }
    // The next one, made or opened, is refused as a process's own limit refuses it.
    assert_eq!(errno(fs::File::create(path(1024))), libc_emfile());
    assert_eq!(errno(fs::OpenOptions::new().write(true).open(path(0))), libc_emfile());
    assert!(!path(1024).exists());
    // Reads are not counted; a file closed gives its place back, its write committed. (A
    // file held open is not read here: the kernel would keep its size until the attributes'
    // timeout.)
    assert_eq!(fs::read(view.at("/src/a.txt")).unwrap(), b"hello\n");
    drop(held.pop());
    assert_eq!(fs::read(path(1023)).unwrap(), b"x");
    let mut file = fs::File::create(path(1024)).unwrap();
    std::io::Write::write_all(&mut file, b"y").unwrap();
    drop(file);
    drop(held);
    // (`f0`, looked up by the refused open, is not read: the kernel keeps the size it saw then
    // until the attributes' timeout.)
    assert_eq!(fs::read(path(1)).unwrap(), b"x");
    assert_eq!(fs::read(view.fixture.physical("w/open/f0")).unwrap(), b"x");
    assert_eq!(fs::read(path(1024)).unwrap(), b"y");
}

#[test]
fn past_its_bound_of_directory_entries_held_open_an_open_of_a_directory_is_emfile() {
    let Some(view) = mount(standard) else { return };
    // 3,000 names of 250 bytes: each open of the directory holds 870,083 bytes of entries
    // (its names and `.` and `..`, 3 + 750,000 bytes, and 40 bytes of each of the 3,002), so
    // 64 MiB holds 77 opens at once.
    let directory = view.fixture.physical("w/wide");
    fs::create_dir_all(&directory).unwrap();
    for index in 0..3000 {
        fs::write(directory.join(format!("{index:04}{}", "n".repeat(246))), b"").unwrap();
    }
    let mut held = Vec::new();
    let refused = loop {
        match fs::File::open(view.at("/w/wide")) {
            Ok(file) => held.push(file),
            Err(error) => break error,
        }
        assert!(held.len() <= 200, "200 opens of the directory held, and no bound met");
    };
    assert_eq!((held.len(), refused.raw_os_error()), (77, Some(libc_emfile())));
    // A file is still opened; a directory closed gives its room back.
    assert_eq!(fs::read(view.at("/src/a.txt")).unwrap(), b"hello\n");
    drop(held.pop());
    assert_eq!(fs::read_dir(view.at("/w/wide")).unwrap().count(), 3000);
    drop(held);
    let opened: Vec<fs::File> = (0..77).map(|_| fs::File::open(view.at("/w/wide")).unwrap()).collect();
    assert_eq!(opened.len(), 77);
}

/// `EMFILE`, too many open files.
fn libc_emfile() -> i32 {
    rustix::io::Errno::MFILE.raw_os_error()
}
