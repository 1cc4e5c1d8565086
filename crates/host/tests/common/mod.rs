//! What the FUSE lanes of `journal.rs` and `model.rs` share: whether a view can be mounted here,
//! and the connection a watchdog aborts when an operation through a view never answers.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// True where a view can be mounted (root, `/dev/fuse`); elsewhere `lane` says why it did not
/// run, and fails where `VFS_REQUIRE_FUSE` is set.
pub(crate) fn can_mount(lane: &str) -> bool {
    // Asked once: a child forked while a shell thread holds a file of a view open keeps it
    // open until it execs, and that view's unmount then fails as busy.
    static ROOT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let root = *ROOT.get_or_init(|| {
        std::process::Command::new("id").arg("-u").output().is_ok_and(|output| output.stdout == b"0\n")
    });
    let possible = Path::new("/dev/fuse").exists() && root;
    if !possible {
        assert!(
            std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
            "VFS_REQUIRE_FUSE is set, but this is not root with /dev/fuse"
        );
        #[expect(clippy::print_stderr, reason = "fixture: a skipped lane says why")]
        {
            eprintln!("SKIPPED: {lane} needs root and /dev/fuse");
        }
    }
    possible
}

/// The connection of the view mounted at `mountpoint` under `/sys/fs/fuse/connections`: its
/// number is the minor device number of the mounted file system.
pub(crate) fn connection(mountpoint: &Path) -> PathBuf {
    let device = std::fs::metadata(mountpoint).unwrap().dev();
    let minor = (device & 0xff) | ((device >> 12) & 0x000f_ff00);
    PathBuf::from(format!("/sys/fs/fuse/connections/{minor}"))
}

/// Aborts `connection`: every request waiting on it ends with `ENOTCONN`, so a stuck case
/// fails instead of hanging the suite.
pub(crate) fn abort(connection: &Path) {
    let _ = std::fs::write(connection.join("abort"), "1");
}
