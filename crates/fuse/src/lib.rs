//! The agent's tree as a FUSE file system: `vfs fuse MOUNTPOINT`.
//!
//! The second front end over the core, beside the MCP tools. Its root is the agent's `/`; every
//! answer comes from the same [`vfs::AgentAccessor`] the tools hold, so the rights, sub-path
//! overrides, name rules, internal roots and tree guards hold for a shell as they do for a
//! tool, and nothing here restates them (`view.rs`). The kernel is told as little as it needs:
//! the source and type are `vfs`, inode numbers are synthetic (`inodes.rs`), `statfs` gives the
//! same neutral figures everywhere, extended attributes are refused, and links are presented as
//! what they name.
//!
//! This crate is the only one that depends on `fuser` (ADR 0008): the core, the host and the
//! tools build without it.

mod errno;
mod inodes;
mod invalidate;
pub mod sandbox;
mod view;

pub use sandbox::{Captured, Ending, RunError, RunOutcome, RunRequest, Sandbox, SandboxError, SandboxOptions, Stream};

use std::io;
use std::path::{Path, PathBuf};

/// Why the view could not be mounted, in one line for the operator (who may see physical
/// paths: the mountpoint is theirs).
#[derive(Debug, thiserror::Error)]
pub enum FuseError {
    /// The mountpoint holds a FUSE mount whose server is gone.
    #[error(
        "`{0}` holds a stale FUSE mount (its server ended without unmounting): unmount it with `fusermount3 -u {0}` (as root: `umount {0}`), then start again"
    )]
    StaleMount(PathBuf),
    /// The mountpoint does not exist.
    #[error("the mountpoint `{0}` is not a directory: create it first (`mkdir -p {0}`)")]
    Missing(PathBuf),
    /// The mountpoint is something other than a directory.
    #[error("the mountpoint `{0}` is not a directory (a file or another kind is there): give an empty directory")]
    NotADirectory(PathBuf),
    /// A file system is mounted at the mountpoint already.
    #[error(
        "`{0}` is in use: a file system is mounted there already (`findmnt {0}` names it); unmount it, or give another directory"
    )]
    InUse(PathBuf),
    /// The mountpoint lies inside a mount's directory: the view would serve itself.
    #[error(
        "the mountpoint `{mountpoint}` lies inside the directory of the mount `{root}`: the view would serve its own files; choose a mountpoint outside every mount"
    )]
    InsideMount {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// The virtual root of the mount that holds it.
        root: String,
    },
    /// This machine cannot mount FUSE file systems.
    #[error(
        "this machine cannot mount a FUSE file system ({reason}): install fuse3 (`apt-get install fuse3`) and make `/dev/fuse` available, or run as root"
    )]
    Unavailable {
        /// What was missing.
        reason: String,
    },
    /// A read-only view was asked for a mount that takes writes.
    #[error(
        "the mount `{root}` takes writes (or another mount's do reach its files): only a mount that takes none can be served by a read-only view"
    )]
    TakesWrites {
        /// The mount's virtual root.
        root: String,
    },
    /// The kernel refused the mount.
    #[error("cannot mount the view at `{mountpoint}`: {source}")]
    Mount {
        /// The mountpoint.
        mountpoint: PathBuf,
        /// What the kernel or `fusermount3` answered.
        source: io::Error,
    },
}

/// A call the view refused for a reason other than a missing name: what the operator's
/// exchange log records of it. Every field is the agent's side: a virtual path, and the gate's
/// reason as an agent would read it.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    /// The file-system operation (`rename`, `unlink`, `write`, …).
    pub operation: &'static str,
    /// The virtual path it named.
    pub path: &'a str,
    /// The `errno` the calling program got.
    pub errno: i32,
    /// Why, in the words a tool's refusal uses.
    pub reason: &'a str,
    /// The call whose command made the request (a `run_command` call, or `vfs run`'s one),
    /// when the view's attribution knows it: the refusal's exchange-log line carries its id.
    pub call: Option<&'a vfs::CallId>,
}

/// Told of each [`Refusal`] of a view (a missing name is not one: shells probe for them all
/// the time). Called on the thread that answers the kernel, so it must be quick.
#[derive(Clone)]
pub struct RefusalSink(std::sync::Arc<dyn Fn(&Refusal<'_>) + Send + Sync>);

impl RefusalSink {
    /// A sink that calls `tell` with each refusal.
    pub fn new(tell: impl Fn(&Refusal<'_>) + Send + Sync + 'static) -> Self {
        RefusalSink(std::sync::Arc::new(tell))
    }

    pub(crate) fn tell(&self, refusal: &Refusal<'_>) {
        (self.0)(refusal);
    }
}

impl std::fmt::Debug for RefusalSink {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RefusalSink")
    }
}

/// How the view is served.
#[derive(Debug, Clone)]
pub struct FuseOptions {
    /// Threads answering the kernel (at least 2: one slow call must not stall every process).
    pub threads: usize,
    /// Lets every user of the machine use the view, not only its owner (`allow_other`; the
    /// sandbox's commands run as a user of their own). Needs root, or `user_allow_other` in
    /// `/etc/fuse.conf`.
    pub allow_other: bool,
    /// The user and group its files show as owned by (default: vfs's own).
    pub owner: Option<(u32, u32)>,
    /// Told of each refusal (the operator's exchange log), if anyone listens.
    pub refusals: Option<RefusalSink>,
    /// Which call a change through the view belongs to, by the id of the process that makes
    /// it (the sandbox: the `run_command` call whose command the process is part of); a
    /// change no call claims is a call of the view's own.
    pub attribution: Option<Attribution>,
}

/// Says which call a process's change through the view belongs to, by the process's id (in
/// the view's PID namespace), or `None`. Called on the thread that answers the kernel, for
/// changes only, so it must be quick.
#[derive(Clone)]
pub struct Attribution(std::sync::Arc<dyn Fn(u32) -> Option<vfs::CallId> + Send + Sync>);

impl Attribution {
    /// An attribution that asks `call_of`.
    pub fn new(call_of: impl Fn(u32) -> Option<vfs::CallId> + Send + Sync + 'static) -> Self {
        Attribution(std::sync::Arc::new(call_of))
    }

    pub(crate) fn call_of(&self, pid: u32) -> Option<vfs::CallId> {
        (self.0)(pid)
    }
}

impl std::fmt::Debug for Attribution {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Attribution")
    }
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions { threads: 4, allow_other: false, owner: None, refusals: None, attribution: None }
    }
}

/// A mounted view; dropping it (or [`Mounted::unmount`]) unmounts it.
pub struct Mounted {
    session: fuser::BackgroundSession,
    /// The view's subscription to the change feed (dropped before the session ends).
    subscription: Option<vfs::Subscription>,
    /// Where it is mounted (the operator's path), for a lazy unmount when it is busy.
    mountpoint: PathBuf,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Mounted").finish_non_exhaustive()
    }
}

impl Mounted {
    /// False once the kernel ended the session (someone ran `fusermount3 -u` or `umount`).
    #[must_use]
    pub fn is_mounted(&self) -> bool {
        !self.session.guard.is_finished()
    }

    /// Unmounts the view and waits for its threads to end.
    ///
    /// A view that is busy (a process has a file or its working directory in it: `EBUSY`) is
    /// detached instead (a lazy unmount, as `umount -l` or `fusermount3 -u -z` does): it
    /// leaves the mount table at once, the files still open in it go on working until they are
    /// closed, and the view's threads end with its last file. They are not waited for then
    /// (fuser gives the session up with the failed unmount), and whatever still holds a file
    /// gets `ENOTCONN` once this process has exited.
    pub fn unmount(mut self) -> io::Result<()> {
        drop(self.subscription.take());
        let mountpoint = std::mem::take(&mut self.mountpoint);
        match self.session.umount_and_join() {
            Err(error) if error.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) => {
                detach(&mountpoint).map_err(|_| error)
            }
            done => session_end(done),
        }
    }
}

/// What the end of a session whose file system is unmounted means. The kernel ends the
/// connection at the unmount; a thread that had just taken a request off the queue (a `release`
/// sent after a close returned, say) reads `ECONNABORTED` instead of the `ENODEV` the others
/// read, and fuser hands that on as the session's error. The view is gone either way: that is
/// a clean end, not a failed unmount.
fn session_end(ended: io::Result<()>) -> io::Result<()> {
    match ended {
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::CONNABORTED.raw_os_error()) => Ok(()),
        ended => ended,
    }
}

/// A lazy unmount of `mountpoint`: the kernel's own as root, `fusermount3 -u -z` otherwise.
fn detach(mountpoint: &Path) -> io::Result<()> {
    match rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::DETACH) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::PERM) => {
            let status = std::process::Command::new("fusermount3")
                .args(["-u", "-z", "--"])
                .arg(mountpoint)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()?;
            if status.success() { Ok(()) } else { Err(io::Error::other("fusermount3 -u -z failed")) }
        }
        Err(errno) => Err(errno.into()),
    }
}

/// Checks that `mountpoint` can take the view: an existing directory, not a stale mount.
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the mountpoint and /dev/fuse are the operator's and the machine's paths, never an agent's"
)]
pub fn check_mountpoint(mountpoint: &Path) -> Result<(), FuseError> {
    use rustix::fs::{AtFlags, StatxAttributes, StatxFlags};
    match std::fs::metadata(mountpoint) {
        Ok(metadata) if metadata.is_dir() => {}
        // A FUSE mount whose server died answers every call with `ENOTCONN`.
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::NOTCONN.raw_os_error()) => {
            return Err(FuseError::StaleMount(mountpoint.to_owned()));
        }
        Ok(_) => return Err(FuseError::NotADirectory(mountpoint.to_owned())),
        Err(_) => return Err(FuseError::Missing(mountpoint.to_owned())),
    }
    // A view mounted over another file system (a view already served there, say) would hide
    // it, and unmounting one would leave the other.
    if rustix::fs::statx(rustix::fs::CWD, mountpoint, AtFlags::NO_AUTOMOUNT, StatxFlags::empty())
        .is_ok_and(|found| found.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
    {
        return Err(FuseError::InUse(mountpoint.to_owned()));
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(FuseError::Unavailable { reason: "there is no /dev/fuse".to_owned() });
    }
    Ok(())
}

/// Refuses a mountpoint inside a local mount's directory: the view would serve itself, and a
/// read of it through vfs would wait on vfs.
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the operator's mountpoint and physical directories, compared, never served"
)]
fn refuse_inside_a_mount(mountpoint: &Path, registry: &vfs::MountRegistry) -> Result<(), FuseError> {
    let Ok(canonical) = std::fs::canonicalize(mountpoint) else {
        return Err(FuseError::Missing(mountpoint.to_owned()));
    };
    for mount in registry.operator_view() {
        // An object-storage location is not a directory here and canonicalizes to nothing.
        if let Ok(physical) = std::fs::canonicalize(&mount.physical)
            && canonical.starts_with(&physical)
        {
            return Err(FuseError::InsideMount { mountpoint: mountpoint.to_owned(), root: mount.root });
        }
    }
    Ok(())
}

/// The number of the next view mounted in this process (the change feed tells them apart).
static VIEWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Mounts the agent's view of `registry` (what its [`vfs::MountRegistry::agent`] accessor
/// reaches) at `mountpoint`, and serves it on background threads until the returned
/// [`Mounted`] is dropped or the file system is unmounted.
pub fn mount(registry: &vfs::MountRegistry, mountpoint: &Path, options: &FuseOptions) -> Result<Mounted, FuseError> {
    check_mountpoint(mountpoint)?;
    refuse_inside_a_mount(mountpoint, registry)?;
    mount_view(registry, mountpoint, options, "/", false)
}

/// Mounts a view of the one mount at `root`, which no write reaches (one of
/// [`vfs::MountRegistry::roots_without_writes`]), at `mountpoint`: mounted read-only, its root the mount's root, and
/// answering no `OPEN` (see `View::without_open`), so that a file read
/// there costs no round trip to vfs once the kernel holds its pages. The sandbox binds it in
/// place of that root of the whole tree's view. (`vfs fuse` does not: a view mounted over a
/// directory of another would keep `fusermount3 -u` from unmounting the outer one.)
pub fn mount_read_only(
    registry: &vfs::MountRegistry,
    root: &str,
    mountpoint: &Path,
    options: &FuseOptions,
) -> Result<Mounted, FuseError> {
    if !registry.roots_without_writes().iter().any(|candidate| candidate == root) {
        return Err(FuseError::TakesWrites { root: root.to_owned() });
    }
    check_mountpoint(mountpoint)?;
    refuse_inside_a_mount(mountpoint, registry)?;
    // The kernel's handshake is part of the mount: a kernel without `FUSE_NO_OPEN_SUPPORT` or
    // `FUSE_AUTO_INVAL_DATA` fails it (`View::init`), and the mount with it.
    mount_view(registry, mountpoint, options, root, true)
}

/// One view, of the agent's tree from `root` (`/`, or a mount no write reaches), mounted at
/// `mountpoint`; with `read_only`, mounted read-only and answering no `OPEN`.
fn mount_view(
    registry: &vfs::MountRegistry,
    mountpoint: &Path,
    options: &FuseOptions,
    root: &str,
    read_only: bool,
) -> Result<Mounted, FuseError> {
    let accessor = registry.agent();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName("vfs".to_owned()),
        fuser::MountOption::Subtype("vfs".to_owned()),
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
        fuser::MountOption::NoAtime,
    ];
    if read_only {
        config.mount_options.push(fuser::MountOption::RO);
    }
    config.n_threads = Some(options.threads.max(2));
    if options.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    let owner =
        options.owner.unwrap_or_else(|| (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw()));
    let id = VIEWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let inodes = std::sync::Arc::new(std::sync::Mutex::new(inodes::Inodes::rooted(root)));
    let mut view = view::View::new(accessor, id, inodes.clone(), owner, options.refusals.clone())
        .attributed(options.attribution.clone());
    if read_only {
        view = view.without_open();
    }
    let session = fuser::spawn_mount(view, mountpoint, &config)
        .map_err(|source| FuseError::Mount { mountpoint: mountpoint.to_owned(), source })?;
    let subscription = invalidate::start(registry, id, inodes, session.notifier());
    Ok(Mounted { session, subscription: Some(subscription), mountpoint: mountpoint.to_owned() })
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::session_end;

    #[test]
    fn a_connection_ended_by_the_unmount_is_a_clean_end_and_nothing_else_is() {
        let os = |errno: rustix::io::Errno| Err(io::Error::from_raw_os_error(errno.raw_os_error()));
        assert!(session_end(Ok(())).is_ok());
        assert!(session_end(os(rustix::io::Errno::CONNABORTED)).is_ok());
        for errno in [rustix::io::Errno::BUSY, rustix::io::Errno::NOTCONN, rustix::io::Errno::IO] {
            let ended = session_end(os(errno)).unwrap_err();
            assert_eq!(ended.raw_os_error(), Some(errno.raw_os_error()));
        }
        let panicked = session_end(Err(io::Error::other("filesystem background thread panicked"))).unwrap_err();
        assert_eq!(panicked.to_string(), "filesystem background thread panicked");
    }
}
