//! The conformance kit's scenarios as a shell meets them: `std::fs` against a mountpoint of the
//! FUSE view, over the kit's own layouts and plans (`vfs_compliance::kit`).
//!
//! Through the accessor a refusal is an `Error` with a kind and a text; through the view it is
//! an `errno`, and the text goes to the view's refusal sink (the operator's exchange log).
//! Each scenario here asserts both: the `errno` a program gets, and, where the gate refused,
//! the very text the kit asserts for the same refusal through the accessor; then what is on the
//! disk and what the agent reads afterwards. Every scenario of [`kit::scenarios`] is driven here
//! under its own name or named in [`NOT_THROUGH_A_MOUNTPOINT`] with the reason, so a scenario
//! added to the kit fails this lane until it says which.
//!
//! Each scenario runs behind a watchdog: an operation the view never answers would leave the
//! test blocked in the kernel for good, so after [`PATIENCE`] the connection is aborted, which
//! ends every waiting request with an error and fails the scenario instead.

#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::print_stderr,
    reason = "fixture: tests build fixtures on disk, look at them through the view, and say when they cannot run"
)]

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vfs::{Limits, Visibility};
use vfs_compliance::fixture::Layout;
use vfs_compliance::kit::{self, LocalFactory, Plan, PlannedMount, World};

const EROFS: i32 = 30;
const EACCES: i32 = 13;
const ENOENT: i32 = 2;
const EEXIST: i32 = 17;
const ELOOP: i32 = 40;
const EPERM: i32 = 1;
const EOPNOTSUPP: i32 = 95;
const ESTALE: i32 = 116;
/// `readlink` of what is not a link.
const EINVAL: i32 = 22;

/// How long one scenario may take before its view's connection is aborted.
const PATIENCE: Duration = Duration::from_secs(30);

/// The kit's scenarios that mean nothing through a mountpoint, and why.
const NOT_THROUGH_A_MOUNTPOINT: &[(&str, &str)] = &[
    ("mount strings that parse round-trip", "the mount grammar is the launch's, before any view exists"),
    ("bad mount strings name the bad part in one line", "the mount grammar is the launch's, before any view exists"),
    (
        "the privileged accessor reaches only its root",
        "the view holds the agent accessor only; no privileged capability is reachable through it",
    ),
    (
        "every result is bounded and says how to narrow",
        "the bounds and notes are the tools' (listings, trees, searches, read windows); a shell reads whole files and lists whole directories",
    ),
    ("registries refuse bad mount sets", "a registry that is refused is never mounted"),
];

/// A mounted view of a kit world, and what the view's refusal sink was told.
struct Lane {
    world: World,
    view: Option<vfs_fuse::Mounted>,
    mountpoint: tempfile::TempDir,
    refusals: Arc<Mutex<Vec<Told>>>,
}

/// One refusal the sink was told: operation, virtual path, `errno`, reason.
type Told = (String, String, i32, String);

impl Lane {
    /// Mounts the view of a world built by the local factory from `layout` and `plan`.
    fn mount(layout: Layout, plan: &Plan<'_>) -> Self {
        let world =
            World::build(&LocalFactory(vfs::ambient_authority()), layout, plan).expect("the kit's world builds");
        let mountpoint = tempfile::tempdir().unwrap();
        let refusals: Arc<Mutex<Vec<Told>>> = Arc::default();
        let sink = {
            let refusals = refusals.clone();
            vfs_fuse::RefusalSink::new(move |refusal| {
                refusals.lock().unwrap().push((
                    refusal.operation.to_owned(),
                    refusal.path.to_owned(),
                    refusal.errno,
                    refusal.reason.to_owned(),
                ));
            })
        };
        let options = vfs_fuse::FuseOptions { refusals: Some(sink), ..vfs_fuse::FuseOptions::default() };
        let view = vfs_fuse::mount(&world.registry, mountpoint.path(), &options).expect("the view mounts");
        Lane { world, view: Some(view), mountpoint, refusals }
    }

    fn standard() -> Self {
        Lane::mount(kit::standard_layout(), &kit::standard_plan(Limits::default()))
    }

    /// Where `virtual_path` is under the mountpoint.
    fn at(&self, virtual_path: &str) -> PathBuf {
        self.mountpoint.path().join(virtual_path.trim_start_matches('/'))
    }

    /// The refusals told since the last call, each checked for leaks first.
    fn told(&self) -> Vec<Told> {
        let told = std::mem::take(&mut *self.refusals.lock().unwrap());
        for (_, _, _, reason) in &told {
            self.world.check_text(reason).unwrap();
        }
        told
    }

    /// Asserts that `result` failed with `errno`, and that the sink was told exactly `reason`
    /// for it (`None`: told nothing, as for a missing name or a refusal by the rights alone).
    fn refused<T: std::fmt::Debug>(
        &self,
        result: std::io::Result<T>,
        errno: i32,
        reason: Option<(&str, &str, &str)>,
        what: &str,
    ) {
        let got = result.expect_err(what).raw_os_error();
        assert_eq!(got, Some(errno), "{what}: errno");
        let expected: Vec<Told> = reason
            .map(|(operation, path, reason)| (operation.to_owned(), path.to_owned(), errno, reason.to_owned()))
            .into_iter()
            .collect();
        assert_eq!(self.told(), expected, "{what}: what the refusal sink was told");
    }

    fn read(&self, virtual_path: &str) -> Option<String> {
        fs::read_to_string(self.at(virtual_path)).ok()
    }

    fn names(&self, virtual_path: &str) -> BTreeSet<String> {
        fs::read_dir(self.at(virtual_path))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect()
    }

    /// The connection the watchdog aborts.
    fn connection(&self) -> PathBuf {
        let device = fs::metadata(self.mountpoint.path()).unwrap().dev();
        let minor = (device & 0xff) | ((device >> 12) & 0x000f_ff00);
        PathBuf::from(format!("/sys/fs/fuse/connections/{minor}"))
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        if let Some(view) = self.view.take() {
            let unmounted = view.unmount();
            if !std::thread::panicking() {
                unmounted.unwrap();
            }
        }
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|&name| name.to_owned()).collect()
}

/// True where a view can be mounted (root, `/dev/fuse`); elsewhere says why the lane did not
/// run, and fails where `VFS_REQUIRE_FUSE` is set.
fn can_mount() -> bool {
    let root = std::process::Command::new("id").arg("-u").output().is_ok_and(|output| output.stdout == b"0\n");
    let possible = Path::new("/dev/fuse").exists() && root;
    if !possible {
        assert!(
            std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
            "VFS_REQUIRE_FUSE is set, but this is not root with /dev/fuse"
        );
        eprintln!("SKIPPED: the kit's FUSE lane needs root and /dev/fuse");
    }
    possible
}

/// Runs `scenario` on `lane` behind the watchdog.
fn guarded(lane: &Lane, scenario: impl FnOnce(&Lane)) {
    let connection = lane.connection();
    let (done, finished) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            if finished.recv_timeout(PATIENCE) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("the scenario did not finish in {PATIENCE:?}: aborting its view's connection");
                let _ = fs::write(connection.join("abort"), "1");
            }
        });
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(lane)));
        let _ = done.send(());
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    });
}

fn canonicalisation(lane: &Lane) {
    for spelling in ["/src/a.txt", "/src//a.txt", "/src/./sub/../a.txt", "/output/../src/a.txt"] {
        assert_eq!(lane.read(spelling).as_deref(), Some("alpha\n"), "{spelling}");
    }
    // What the accessor takes as a name, the kernel does too: no second reading of it.
    for name in ["/src/a\\..\\b", "/src/%2e%2e"] {
        lane.refused(fs::read(lane.at(name)), ENOENT, None, name);
    }
}

fn resolution_order() {
    let layout = Layout::new();
    layout.file("data/vendor/x.txt", "outer\n").file("vendored/x.txt", "inner\n").file("data2/y.txt", "y\n");
    let plan = Plan {
        mounts: vec![
            PlannedMount { directory: "data", root: "/src", rights: "rw", visibility: Visibility::AgentFacing },
            PlannedMount {
                directory: "vendored",
                root: "/src/vendor",
                rights: "ro",
                visibility: Visibility::AgentFacing,
            },
        ],
        limits: Limits::default(),
    };
    let lane = Lane::mount(layout, &plan);
    guarded(&lane, |lane| {
        assert_eq!(lane.read("/src/vendor/x.txt").as_deref(), Some("inner\n"), "the nested root");
        assert_eq!(lane.names("/src/vendor"), names(&["x.txt"]), "a nested root lists its own directory");
        for path in ["/src2/y.txt", "/sr/y.txt", "/SRC/vendor/x.txt", "/srcvendor/x.txt"] {
            lane.refused(fs::read(lane.at(path)), ENOENT, None, path);
        }
        lane.refused(fs::write(lane.at("/src/vendor/new.txt"), "x"), EROFS, None, "the nested mount's rights apply");
        assert!(!lane.world.layout.exists("vendored/new.txt") && !lane.world.layout.exists("data/vendor/new.txt"));
        assert_eq!(lane.names("/"), names(&["src"]), "the virtual root");
    });
}

fn rights() {
    let layout = Layout::new();
    layout.file("ro/a.txt", "a\n").file("rw/a.txt", "a\n").file("rwnd/a.txt", "a\n").file("mixed/vendor/v.txt", "v\n");
    let plan = Plan {
        mounts: vec![
            PlannedMount { directory: "ro", root: "/ro", rights: "ro", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "rw", root: "/rw", rights: "rw", visibility: Visibility::AgentFacing },
            PlannedMount { directory: "rwnd", root: "/rwnd", rights: "rwnd", visibility: Visibility::AgentFacing },
            PlannedMount {
                directory: "mixed",
                root: "/mixed",
                rights: "rw;vendor:ro",
                visibility: Visibility::AgentFacing,
            },
        ],
        limits: Limits::default(),
    };
    let lane = Lane::mount(layout, &plan);
    guarded(&lane, |lane| {
        lane.refused(fs::write(lane.at("/ro/a.txt"), "x"), EROFS, None, "write on ro");
        lane.refused(fs::remove_file(lane.at("/ro/a.txt")), EROFS, None, "delete on ro");
        lane.refused(fs::create_dir(lane.at("/ro/new")), EROFS, None, "mkdir on ro");
        lane.refused(fs::rename(lane.at("/ro/a.txt"), lane.at("/rw/b.txt")), EROFS, None, "move from ro");
        lane.refused(OpenOptions::new().append(true).open(lane.at("/ro/a.txt")), EROFS, None, "edit on ro");
        lane.refused(
            fs::remove_file(lane.at("/rwnd/a.txt")),
            EACCES,
            Some((
                "unlink",
                "/rwnd/a.txt",
                "cannot delete `/rwnd/a.txt`: `/rwnd` is mounted rwnd; mounts that grant delete: `/mixed` (rw), `/rw` (rw)",
            )),
            "delete on rwnd",
        );
        fs::write(lane.at("/rwnd/a.txt"), "b\n").unwrap();
        fs::write(lane.at("/rw/new.txt"), "n\n").unwrap();
        fs::remove_file(lane.at("/rw/new.txt")).unwrap();
        // (The kernel looks up each name, `..` included, so a spelling through a missing
        // directory is missing here, where the accessor reads it lexically.)
        for spelling in ["/mixed/vendor/v.txt", "/mixed/./vendor/v.txt", "/mixed/vendor/../vendor/v.txt"] {
            lane.refused(fs::write(lane.at(spelling), "x"), EROFS, None, spelling);
        }
        lane.refused(fs::write(lane.at("/mixed/x/../vendor/v.txt"), "x"), ENOENT, None, "through a missing directory");
        assert_eq!(lane.read("/ro/a.txt").as_deref(), Some("a\n"), "ro content");
        assert_eq!(lane.read("/mixed/vendor/v.txt").as_deref(), Some("v\n"), "override content");
        assert_eq!(lane.read("/rwnd/a.txt").as_deref(), Some("b\n"), "rwnd write");
        let layout = &lane.world.layout;
        assert_eq!(layout.read("ro/a.txt").as_deref(), Some("a\n"));
        assert_eq!(layout.read("mixed/vendor/v.txt").as_deref(), Some("v\n"));
        assert_eq!(layout.read("rwnd/a.txt").as_deref(), Some("b\n"));
        assert!(!layout.exists("rw/new.txt") && !layout.exists("ro/new") && !layout.exists("rw/b.txt"));
    });
}

/// Every operation a shell can make on `root` and below: each one's `errno`, or `Ok`.
fn every_answer(lane: &Lane, root: &str) -> Vec<Result<(), i32>> {
    let file = lane.at(&format!("{root}/secret.jsonl"));
    let errno = |result: std::io::Result<()>| result.map_err(|error| error.raw_os_error().unwrap_or(-1));
    vec![
        errno(fs::read(&file).map(drop)),
        errno(fs::metadata(&file).map(drop)),
        errno(fs::metadata(lane.at(root)).map(drop)),
        errno(fs::read_dir(lane.at(root)).map(drop)),
        errno(fs::write(&file, "x")),
        errno(OpenOptions::new().append(true).open(&file).map(drop)),
        errno(fs::create_dir(lane.at(&format!("{root}/new")))),
        errno(fs::remove_file(&file)),
        errno(fs::remove_dir(lane.at(root))),
        errno(fs::rename(&file, lane.at("/output/stolen"))),
        errno(fs::rename(lane.at("/output/x"), lane.at(&format!("{root}/x")))),
    ]
}

fn internal_absence() {
    let layout = kit::standard_layout();
    layout.file("out/x", "x\n");
    let lane = Lane::mount(layout, &kit::standard_plan(Limits::default()));
    guarded(&lane, |lane| {
        let before = lane.world.layout.snapshot("logs");
        let internal = every_answer(lane, "/llm-logs");
        let unknown = every_answer(lane, "/no-such-root");
        assert_eq!(internal, unknown, "every operation on an internal vs an unknown root");
        assert!(internal.iter().all(|answer| *answer == Err(ENOENT)), "{internal:?}");
        assert_eq!(lane.told(), [], "a missing root is no refusal to log");
        assert_eq!(lane.names("/"), names(&["output", "src"]), "the virtual root");
        assert_eq!(lane.world.layout.snapshot("logs"), before, "the internal directory");
        assert_eq!(lane.read("/output/x").as_deref(), Some("x\n"), "the move's source stayed");
    });
}

fn symlink_policy() {
    let lane = Lane::standard();
    let layout = &lane.world.layout;
    layout
        .symlink("../a.txt", "data/sub/relative")
        .symlink(layout.path("data/a.txt"), "data/absolute")
        .symlink("sub", "data/dirlink")
        .symlink("relative", "data/sub/chain")
        .symlink(layout.path("outside/secret.txt"), "data/out-absolute")
        .symlink("../outside/secret.txt", "data/out-relative")
        .symlink(layout.path("outside"), "data/out-dir")
        .symlink("../out", "data/other-mount")
        .symlink("/etc/passwd", "data/passwd")
        .symlink("missing", "data/dangling")
        .symlink("loop-b", "data/loop-a")
        .symlink("loop-a", "data/loop-b");
    guarded(&lane, |lane| {
        // A link inside its mount is shown as what it points to: no link, so no target to read.
        for path in ["/src/sub/relative", "/src/absolute", "/src/dirlink/relative", "/src/dirlink/chain"] {
            assert_eq!(lane.read(path).as_deref(), Some("alpha\n"), "{path}");
            assert!(!fs::symlink_metadata(lane.at(path)).unwrap().file_type().is_symlink(), "{path}");
        }
        assert!(fs::metadata(lane.at("/src/dirlink")).unwrap().is_dir());
        // The kernel looks a path up name by name, so a link out is refused where it stands
        // (`/src/out-dir`, not the file below it that the accessor is asked for).
        for (path, refused_at) in [
            ("/src/out-absolute", "/src/out-absolute"),
            ("/src/out-relative", "/src/out-relative"),
            ("/src/out-dir/secret.txt", "/src/out-dir"),
            ("/src/other-mount", "/src/other-mount"),
            ("/src/passwd", "/src/passwd"),
        ] {
            let reason =
                format!("`{refused_at}` goes through a symbolic link that leads outside its mount; it is not followed");
            lane.refused(fs::read(lane.at(path)), EACCES, Some(("getattr", refused_at, &reason)), path);
        }
        lane.refused(fs::read(lane.at("/src/dangling")), ENOENT, None, "dangling");
        lane.refused(
            fs::read(lane.at("/src/loop-a")),
            ELOOP,
            Some(("getattr", "/src/loop-a", "`/src/loop-a` goes through too many symbolic links (a loop?)")),
            "loop",
        );
        // No link is shown, so no target (physical or not) can be read back.
        lane.refused(fs::read_link(lane.at("/src/sub/relative")), EINVAL, None, "readlink of a link inside");
        let reason = "`/src/out-dir` goes through a symbolic link that leads outside its mount; it is not followed";
        lane.refused(
            fs::read_link(lane.at("/src/out-dir")),
            EACCES,
            Some(("getattr", "/src/out-dir", reason)),
            "readlink of a link out",
        );
        links_lead_nowhere_out(lane);
    });
}

/// A walk of the tree never reaches past a link out, and writes act on a link, never through
/// it; no link is made.
fn links_lead_nowhere_out(lane: &Lane) {
    // A walk of the tree never reaches past a link out.
    let mut seen = Vec::new();
    let mut pending = vec![lane.at("/src")];
    while let Some(directory) = pending.pop() {
        for entry in fs::read_dir(&directory).unwrap() {
            let entry = entry.unwrap();
            seen.push(entry.file_name().into_string().unwrap());
            if fs::metadata(entry.path()).is_ok_and(|metadata| metadata.is_dir()) {
                pending.push(entry.path());
            }
        }
    }
    lane.told();
    assert!(!seen.iter().any(|name| name == "secret.txt"), "a walk followed a link out: {seen:?}");
    // Nothing is written through a link out; nor can the shell remove one (the tool can): the
    // kernel looks the name up first, and the view shows a link as what it points to.
    let layout = &lane.world.layout;
    layout.symlink(layout.path("outside/secret.txt"), "out/link");
    let before = layout.snapshot("outside");
    lane.refused(
        fs::write(lane.at("/output/link"), "pwned"),
        EACCES,
        Some((
            "getattr",
            "/output/link",
            "`/output/link` goes through a symbolic link that leads outside its mount; it is not followed",
        )),
        "write through a link",
    );
    let reason = "`/output/link` goes through a symbolic link that leads outside its mount; it is not followed";
    lane.refused(fs::remove_file(lane.at("/output/link")), EACCES, Some(("getattr", "/output/link", reason)), "unlink");
    lane.refused(std::os::unix::fs::symlink("a.txt", lane.at("/output/new-link")), EPERM, None, "a link is never made");
    assert_eq!(layout.snapshot("outside"), before, "outside after link writes");
    assert!(!layout.exists("out/new-link"));
}

fn physical_nesting() {
    let lane = Lane::mount(kit::nesting_layout(), &kit::nesting_plan());
    guarded(&lane, |lane| {
        for path in ["/work/logs/secret.jsonl", "/work/log-alias/secret.jsonl", "/work/./logs/secret.jsonl"] {
            lane.refused(fs::read(lane.at(path)), ENOENT, None, path);
        }
        assert_eq!(
            lane.names("/work"),
            names(&["log-alias", "notes.txt", "vendor", "vendor-alias"]),
            "the internal directory is absent from listings"
        );
        // The kernel looks up `logs` before anything is written into it: it is missing.
        lane.refused(fs::write(lane.at("/work/logs/x.txt"), "x"), ENOENT, None, "write into internal");
        lane.refused(fs::remove_dir(lane.at("/work/logs")), ENOENT, None, "delete internal");
        for path in ["/work/vendor/lib.rs", "/work/vendor-alias/lib.rs", "/vendor/lib.rs"] {
            lane.refused(fs::write(lane.at(path), "pwned"), EROFS, None, path);
        }
        lane.refused(fs::remove_file(lane.at("/work/vendor/lib.rs")), EROFS, None, "delete in the nested ro mount");
        lane.refused(
            fs::rename(lane.at("/work/vendor"), lane.at("/work/moved")),
            EROFS,
            None,
            "move the nested ro mount",
        );
        assert_eq!(lane.read("/vendor/lib.rs").as_deref(), Some("lib\n"), "ro content");
        let layout = &lane.world.layout;
        assert_eq!(layout.read("work/vendor/lib.rs").as_deref(), Some("lib\n"));
        assert_eq!(layout.read("work/logs/secret.jsonl").as_deref(), Some("{}\n"));
        assert!(!layout.exists("work/logs/x.txt") && !layout.exists("work/moved"));
    });
}

fn atomic_writes(lane: &Lane) {
    let layout = &lane.world.layout;
    fs::create_dir(lane.at("/output/dir")).unwrap();
    // `O_EXCL` is the shell's "no overwrite".
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(lane.at("/output/dir/a.txt"))
        .unwrap()
        .write_all(b"one\n")
        .unwrap();
    lane.refused(
        OpenOptions::new().write(true).create_new(true).open(lane.at("/output/dir/a.txt")),
        EEXIST,
        None,
        "no overwrite with O_EXCL",
    );
    fs::write(lane.at("/output/dir/a.txt"), "two\n").unwrap();
    assert_eq!(lane.read("/output/dir/a.txt").as_deref(), Some("two\n"), "overwritten");
    assert_eq!(layout.read("out/dir/a.txt").as_deref(), Some("two\n"));
    // A hard link to a file outside is replaced, never written through.
    layout.hard_link("outside/secret.txt", "out/hard");
    fs::write(lane.at("/output/hard"), "replaced\n").unwrap();
    assert_eq!(layout.read("outside/secret.txt"), Some(format!("{}\n", kit::SECRET)), "hard link target");
    assert_eq!(layout.read("out/hard").as_deref(), Some("replaced\n"));
    // No temporary file is ever left behind or shown.
    for index in 0..20 {
        fs::write(lane.at("/output/dir/a.txt"), format!("{index}\n")).unwrap();
    }
    assert_eq!(lane.names("/output/dir"), names(&["a.txt"]), "no temporary files");
    let on_disk: Vec<String> = fs::read_dir(layout.path("out/dir"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(on_disk, ["a.txt"], "no temporary files on the disk");
    // A rename replaces its destination, as `mv` does.
    fs::write(lane.at("/output/b.txt"), "b\n").unwrap();
    fs::rename(lane.at("/output/b.txt"), lane.at("/output/dir/a.txt")).unwrap();
    assert_eq!(lane.read("/output/dir/a.txt").as_deref(), Some("b\n"), "moved over");
    assert_eq!(layout.read("out/dir/a.txt").as_deref(), Some("b\n"));
    lane.refused(fs::read(lane.at("/output/b.txt")), ENOENT, None, "the moved file's old name");
}

fn version_guards(lane: &Lane) {
    fs::write(lane.at("/output/v.txt"), "1\n").unwrap();
    let mut file = OpenOptions::new().write(true).truncate(true).open(lane.at("/output/v.txt")).unwrap();
    file.write_all(b"3\n").unwrap();
    // Another writer (here a tool) changes the file between this open and its close.
    lane.world.agent().write("/output/v.txt", "2\n", &vfs::Precondition::Any).unwrap();
    let refused = file.sync_all();
    drop(file);
    let told = lane.told();
    assert_eq!(refused.unwrap_err().raw_os_error(), Some(ESTALE), "stale write");
    assert_eq!(told.len(), 1, "{told:?}");
    let (operation, path, errno, reason) = &told[0];
    assert_eq!((operation.as_str(), path.as_str(), *errno), ("write", "/output/v.txt", ESTALE));
    let version = lane.world.agent().info("/output/v.txt").unwrap().version.unwrap();
    assert_eq!(
        reason,
        &format!("`/output/v.txt` changed since you read it: its version is now `{version}`; read it again and retry")
    );
    assert_eq!(lane.read("/output/v.txt").as_deref(), Some("2\n"), "content after the stale attempt");
    assert_eq!(lane.world.layout.read("out/v.txt").as_deref(), Some("2\n"));
}

fn special_files(lane: &Lane) {
    let fifo = lane.world.layout.path("data/fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|status| status.success()), "mkfifo");
    let started = std::time::Instant::now();
    let reason = "`/src/fifo` is not a regular file or directory (a FIFO, socket or device); vfs does not open it";
    lane.refused(fs::read(lane.at("/src/fifo")), EOPNOTSUPP, Some(("getattr", "/src/fifo", reason)), "fifo");
    assert!(!lane.names("/src").contains("fifo"), "a FIFO is not listed");
    lane.told();
    // Nor can one be made.
    let refused = std::process::Command::new("mkfifo").arg(lane.at("/output/made")).status().unwrap();
    assert!(!refused.success(), "mkfifo through the view");
    assert!(!lane.world.layout.exists("out/made"));
    assert!(started.elapsed() < Duration::from_secs(5), "a FIFO blocked");
}

/// Rights × visibility, through the view: each configuration's answer to a read, a write and
/// a delete of a file in it, as `errno`s.
fn configurations() {
    for (rights, visibility, expected) in [
        ("ro", Visibility::AgentFacing, [Ok(()), Err(EROFS), Err(EROFS)]),
        ("rw", Visibility::AgentFacing, [Ok(()), Ok(()), Ok(())]),
        ("rwnd", Visibility::AgentFacing, [Ok(()), Ok(()), Err(EACCES)]),
        ("ro", Visibility::Internal, [Err(ENOENT), Err(ENOENT), Err(ENOENT)]),
        ("rw", Visibility::Internal, [Err(ENOENT), Err(ENOENT), Err(ENOENT)]),
    ] {
        let layout = Layout::new();
        layout.file("d/f.txt", "f\n").mkdir("other");
        let plan = Plan {
            mounts: vec![
                PlannedMount { directory: "d", root: "/m", rights, visibility },
                PlannedMount { directory: "other", root: "/other", rights: "ro", visibility: Visibility::AgentFacing },
            ],
            limits: Limits::default(),
        };
        let lane = Lane::mount(layout, &plan);
        guarded(&lane, |lane| {
            let errno = |result: std::io::Result<()>| result.map_err(|error| error.raw_os_error().unwrap_or(-1));
            let answers = [
                errno(fs::read(lane.at("/m/f.txt")).map(drop)),
                errno(fs::write(lane.at("/m/f.txt"), "g\n")),
                errno(fs::remove_file(lane.at("/m/f.txt"))),
            ];
            assert_eq!(answers, expected, "{rights} {visibility:?}");
            lane.told();
            let on_disk = lane.world.layout.read("d/f.txt");
            let written = expected[1].is_ok();
            let deleted = expected[2].is_ok();
            let want = if deleted {
                None
            } else if written {
                Some("g\n")
            } else {
                Some("f\n")
            };
            assert_eq!(on_disk.as_deref(), want, "{rights} {visibility:?} on the disk");
        });
    }
}

#[test]
fn the_kits_scenarios_hold_through_a_mountpoint() {
    if !can_mount() {
        return;
    }
    let driven: &[(&str, fn())] = &[
        ("paths canonicalise lexically", || {
            let lane = Lane::standard();
            guarded(&lane, canonicalisation);
        }),
        ("the longest root wins at a segment boundary", resolution_order),
        ("rights and overrides decide, with exact denials", rights),
        ("an internal root is an unknown root", internal_absence),
        ("links inside work, links out are refused", symlink_policy),
        ("nested mounts keep their own rights and visibility", physical_nesting),
        ("writes are atomic and never go through links", || {
            let lane = Lane::standard();
            guarded(&lane, atomic_writes);
        }),
        ("version guards refuse stale writes", || {
            let lane = Lane::standard();
            guarded(&lane, version_guards);
        }),
        ("special files are refused at once", || {
            let lane = Lane::standard();
            guarded(&lane, special_files);
        }),
        ("every configuration: rights × visibility × caller × link", configurations),
    ];
    // Every scenario of the kit is driven here or says why it is not.
    let kit: BTreeSet<&str> = kit::scenarios().iter().map(|scenario| scenario.name).collect();
    let covered: BTreeSet<&str> =
        driven.iter().map(|(name, _)| *name).chain(NOT_THROUGH_A_MOUNTPOINT.iter().map(|(name, _)| *name)).collect();
    assert_eq!(covered, kit, "the kit's scenarios and this lane's");
    let mut failed = Vec::new();
    for (name, scenario) in driven {
        if let Err(panic) = std::panic::catch_unwind(*scenario) {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|text| (*text).to_owned()))
                .unwrap_or_default();
            failed.push(format!("- {name}: {why}"));
        }
    }
    assert!(failed.is_empty(), "{} scenario(s) failed through the view:\n{}", failed.len(), failed.join("\n"));
}
