//! The sandbox of `vfs run` and `run_command`: a command whose only data is the agent's tree.
//!
//! A shell given to an agent beside vfs's tools would see the operator's disk, physical paths
//! and all. Here the command sees the FUSE view instead, bound at the virtual roots: `/src` in
//! the sandbox *is* the view's `/src`, so every rule of the registry (rights, sub-path
//! overrides, name rules, internal roots) answers each of its system calls, and nothing
//! physical is there to be named. The rest of its file system is the system's programs
//! (`/usr` read-only, a short list of `/etc` files), a fresh `/tmp` and `HOME`, its own
//! `/proc` and a minimal `/dev`.
//!
//! How it is built:
//! - **One view per sandbox**, mounted when the sandbox starts in a private directory
//!   (`$TMPDIR/vfs-sandboxes-UID/PID-N`, mode 0700, in a home of the user's own that nobody
//!   else may write) and unmounted when it is dropped. A view left by a vfs that was killed is
//!   unmounted and removed by the next sandbox that starts (never anything a link leads to,
//!   and never in a home someone else made: `private_directory`). Beside it,
//!   each mount no write reaches gets a read-only view of its own (`ro-N/`), bound at its root
//!   instead: it answers no `OPEN`, so a file read there costs no round trip to vfs once the
//!   kernel holds its pages (`crate::mount_read_only`). Where one cannot be mounted, the whole
//!   tree's view serves that root too.
//! - **Each command** is `prlimit … bwrap --args FD … -- COMMAND` (the arguments, which name
//!   the private directory, read from a descriptor, out of the command line that processes
//!   inside can read; no other descriptor of vfs's reaches it): bubblewrap gives it new user, mount,
//!   PID, IPC, UTS and network namespaces (no network, not even the host's loopback), and
//!   `prlimit` its bounds (processes, address space, no core files). Outside the tree it
//!   writes only bounded places in memory (`/tmp`, `HOME`, `/dev/shm`: `max_scratch` each;
//!   `/` and `/dev` are remounted read-only), and it can make no user namespace of its own.
//!   The command is the first
//!   process of its PID namespace's init, so when it ends, or is killed at its time limit or
//!   on cancellation, every process it started ends with it.
//! - **As root**, the commands run as a host user of their own (`0x5eed0000` plus a number
//!   drawn at random once per vfs process, among 65,536, passing over those of the sandboxes
//!   in use), not as root: the kernel does not count root's processes, so a process limit
//!   would hold nothing, and root's capabilities have no business in the sandbox. The number
//!   is random so that a command reading its `/proc/self/uid_map` learns nothing of the host
//!   (a user derived from vfs's process id told that id); the sandbox's directory is that
//!   user's, which is how a later vfs finds the processes a killed one left. The view is mounted for that user (`allow_other`) and shows its files as owned
//!   by it, which inside is the sandbox's user `agent` (uid 1000), so programs that check
//!   ownership (git) accept a repository under a mount.
//! - **Setup failures are told apart** from the command's own status by bubblewrap's JSON
//!   status descriptor: without a `child-pid` report the command never started, and the
//!   agent is told only that, while the operator's log gets bubblewrap's words (they may name
//!   the private directory).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{FuseError, FuseOptions, Mounted};

/// The sandbox user's home directory, a fresh tmpfs for each command.
pub const HOME: &str = "/home/agent";

/// The sandbox user's id and group inside its user namespace.
const AGENT_ID: u32 = 1000;

/// What `PATH` is inside.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// The places of the system the sandbox lays out itself: a virtual root may not be one of
/// them, lie inside one, or hold one.
const RESERVED: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/tmp", HOME];

/// The files of `/etc` that programs need and that say nothing about the host beyond its
/// distribution: name service order, host names of loopback, certificates, the loader's cache,
/// the time zone, Debian's `alternatives` (the targets of `/usr/bin/awk` and the like).
const ETC: &[&str] = &[
    "/etc/nsswitch.conf",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/protocols",
    "/etc/services",
];

/// A host user's base id for the commands of a vfs running as root ([`host_user`]).
const HOST_ID_BASE: u32 = 0x5eed_0000;

/// How many host users the commands of vfs processes running as root are drawn from.
const HOST_IDS: u32 = 65_536;

/// Why a sandbox could not start (for the operator: it may name the machine's paths).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A program the sandbox needs is not on `PATH`.
    #[error("`{program}` was not found on PATH: install {package} (`apt-get install {package}`)")]
    Missing {
        /// The program.
        program: &'static str,
        /// The Debian package that has it.
        package: &'static str,
    },
    /// A virtual root would cover a place the sandbox needs for the system.
    #[error(
        "the mount `{root}` would cover the system's `{reserved}` inside the sandbox: give it another virtual root to run commands"
    )]
    ReservedRoot {
        /// The mount's virtual root.
        root: String,
        /// The system place.
        reserved: &'static str,
    },
    /// The view could not be mounted.
    #[error("the sandbox's view cannot be mounted: {0}")]
    View(#[from] FuseError),
    /// The sandbox's private directory could not be made.
    #[error("cannot make the sandbox's directory `{path}`: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A trial command did not start: bubblewrap cannot make its namespaces here.
    #[error(
        "the sandbox cannot start a command on this machine ({reason}); it needs user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, and `user.max_user_namespaces` above 0)"
    )]
    Unusable {
        /// What bubblewrap said.
        reason: String,
    },
}

/// Why one command did not run. [`RunError::agent_text`] is what an agent may be told.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The working directory is refused by the gate (missing, hidden, not a directory).
    #[error("{0}")]
    WorkingDirectory(vfs::Error),
    /// The working directory is a file.
    #[error("the working directory `{0}` is not a directory")]
    NotADirectory(String),
    /// bubblewrap or `prlimit` could not be started, or bubblewrap could not set the sandbox
    /// up (the reason may name the sandbox's private directory: for the operator only).
    #[error("the sandbox could not start the command: {0}")]
    Setup(String),
}

impl RunError {
    /// The refusal in words an agent may read: no physical path, no host detail.
    #[must_use]
    pub fn agent_text(&self) -> String {
        match self {
            RunError::WorkingDirectory(error) => error.agent_text().to_string(),
            RunError::NotADirectory(_) => self.to_string(),
            RunError::Setup(_) => {
                "the sandbox could not start the command (the reason is in the operator's log); try again".to_owned()
            }
        }
    }
}

/// How a sandbox's commands are bounded and what their environment holds.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// At most this many processes at once (all the sandbox's commands together).
    pub max_processes: u64,
    /// The address space of each process, in bytes.
    pub max_memory: u64,
    /// The size of each of the command's places in memory (`/tmp`, `HOME`, `/dev/shm`), in
    /// bytes: what a command writes there is memory no address-space limit counts.
    pub max_scratch: u64,
    /// Variables added to the environment (`PATH`, `HOME`, `LANG` and `TERM` are always set).
    pub env: Vec<(String, String)>,
    /// Threads answering the view's kernel requests.
    pub threads: usize,
    /// Told of each refusal of the view the commands see (the operator's exchange log).
    pub refusals: Option<crate::RefusalSink>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            max_processes: 256,
            max_memory: 4 << 30,
            max_scratch: 1 << 30,
            env: Vec::new(),
            threads: 4,
            refusals: None,
        }
    }
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The working directory, a virtual path.
    pub cwd: String,
    /// The longest the command may run.
    pub timeout: Duration,
    /// How many bytes of each stream to keep (the tail); the rest is only counted.
    pub keep: usize,
    /// The call the command's changes through the view belong to (a `run_command` call's:
    /// then its session's journal entries hold them); `None`: each change a call of its own.
    pub call: Option<vfs::CallId>,
}

/// One of a command's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it (its status was 128 plus the signal's number).
    Signalled(i32),
    /// Its time limit ended it (every process of it was killed).
    TimedOut,
    /// Its caller cancelled it (every process of it was killed).
    Cancelled,
}

impl Ending {
    /// The status a shell would report: the exit status, 128 plus a signal, 124 for the time
    /// limit (as `timeout(1)`), 130 for a cancellation (as an interrupt).
    #[must_use]
    pub fn status(self) -> i32 {
        match self {
            Ending::Exited(code) => code,
            Ending::Signalled(signal) => 128 + signal,
            Ending::TimedOut => 124,
            Ending::Cancelled => 130,
        }
    }
}

/// What was kept of one stream: its tail, and how many bytes there were in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The last bytes, at most the request's `keep`.
    pub tail: Vec<u8>,
    /// Every byte the stream carried.
    pub total: u64,
}

impl Captured {
    /// True when bytes were cut from the front.
    #[must_use]
    pub fn truncated(&self) -> bool {
        self.total > self.tail.len() as u64
    }
}

/// How a command ended, with its output.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// How it ended.
    pub ending: Ending,
    /// How long it ran.
    pub duration: Duration,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
}

/// A sandbox: the view mounted for it, and what each command is started with.
pub struct Sandbox {
    accessor: vfs::AgentAccessor,
    /// The private directory (`view/` is the view's mountpoint, beside `passwd` and `group`).
    directory: PathBuf,
    mounted: Option<Mounted>,
    /// The read-only views, by the root each is bound at (unmounted before `mounted`).
    read_only: Vec<(String, Mounted)>,
    roots: Vec<String>,
    /// The top-level system directories: merged-usr links (name, target) or directories.
    system: Vec<(&'static str, Option<String>)>,
    bwrap: PathBuf,
    /// Whether this bubblewrap can forbid user namespaces inside (`--disable-userns`, 0.8.0
    /// and later): one that cannot runs the commands without, and the operator is told.
    disable_userns: bool,
    prlimit: PathBuf,
    /// The host user the commands run as, when vfs runs as root.
    host_user: Option<u32>,
    options: SandboxOptions,
    /// The call of each running command, by the process id of its `prlimit`/`bwrap`.
    calls: Arc<Mutex<HashMap<u32, vfs::CallId>>>,
}

/// A running command's call, known to the view's attribution until it is dropped.
struct Claimed<'a> {
    calls: &'a Mutex<HashMap<u32, vfs::CallId>>,
    pid: u32,
}

impl<'a> Claimed<'a> {
    fn new(calls: &'a Mutex<HashMap<u32, vfs::CallId>>, pid: u32, call: vfs::CallId) -> Self {
        calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(pid, call);
        Claimed { calls, pid }
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.pid);
    }
}

/// The call of the command that process `pid` belongs to: the call of the nearest ancestor
/// that is a running command's `bwrap` (every process of a command descends from it).
fn call_of(calls: &Mutex<HashMap<u32, vfs::CallId>>, pid: u32) -> Option<vfs::CallId> {
    let calls = calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if calls.is_empty() {
        return None;
    }
    let mut pid = pid;
    for _ in 0..64 {
        if let Some(call) = calls.get(&pid) {
            return Some(call.clone());
        }
        pid = parent_of(pid)?;
        if pid <= 1 {
            return None;
        }
    }
    None
}

/// The parent of process `pid` (`/proc/PID/stat`'s fourth field, after the name in parentheses).
#[expect(clippy::disallowed_methods, reason = "tooling: the process table, not an agent's file")]
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(1)?.parse().ok()
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Sandbox").field("roots", &self.roots).finish_non_exhaustive()
    }
}

/// Held from making a descriptor inheritable until the child that needs it has started, so
/// that no other command of this process inherits it.
static SPAWNING: Mutex<()> = Mutex::new(());

/// The `N` of the next sandbox directory of this process.
static NEXT: AtomicU32 = AtomicU32::new(0);

impl Sandbox {
    /// Mounts the view of `registry` for a sandbox and tries one command in it, so that a
    /// machine that cannot run it is told now, in one line.
    pub fn start(registry: &vfs::MountRegistry, options: SandboxOptions) -> Result<Sandbox, SandboxError> {
        let bwrap = find("bwrap").ok_or(SandboxError::Missing { program: "bwrap", package: "bubblewrap" })?;
        let prlimit = find("prlimit").ok_or(SandboxError::Missing { program: "prlimit", package: "util-linux" })?;
        let disable_userns = offers(&bwrap, "--disable-userns");
        if !disable_userns {
            tracing::warn!(
                "this bubblewrap cannot forbid user namespaces inside the sandbox (`--disable-userns`, \
                 bubblewrap 0.8.0 and later): commands may make their own; install a newer bubblewrap"
            );
        }
        let roots: Vec<String> = registry.agent_mounts().into_iter().map(|mount| mount.root).collect();
        for root in &roots {
            if let Some(reserved) = RESERVED.iter().find(|reserved| overlaps(root, reserved)) {
                return Err(SandboxError::ReservedRoot { root: root.clone(), reserved });
            }
        }
        let root = rustix::process::getuid().is_root();
        let temp = std::env::temp_dir();
        let host_user = root.then(|| host_user(&temp));
        let directory = private_directory(&temp, host_user)?;
        let owner = host_user.map_or_else(
            || (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw()),
            |user| (user, user),
        );
        let calls: Arc<Mutex<HashMap<u32, vfs::CallId>>> = Arc::default();
        let attributed = calls.clone();
        let fuse = FuseOptions {
            threads: options.threads,
            allow_other: host_user.is_some(),
            owner: Some(owner),
            refusals: options.refusals.clone(),
            attribution: Some(crate::Attribution::new(move |pid| call_of(&attributed, pid))),
        };
        let mut sandbox = Sandbox {
            accessor: registry.agent(),
            directory: directory.clone(),
            mounted: None,
            read_only: Vec::new(),
            roots,
            system: system_layout(),
            bwrap,
            disable_userns,
            prlimit,
            host_user,
            options,
            calls,
        };
        // Dropping the sandbox from here on removes the directory (and unmounts the view).
        // Mounted under the spawn lock: a mount by `fusermount3` (not as root) receives the
        // view's `/dev/fuse` descriptor without close-on-exec, and a command another thread
        // started then would inherit it.
        let spawning = SPAWNING.lock().unwrap_or_else(PoisonError::into_inner);
        sandbox.mounted = Some(crate::mount(registry, &directory.join("view"), &fuse)?);
        sandbox.read_only = mount_read_only_views(registry, &directory, host_user, &fuse);
        drop(spawning);
        let trial = RunRequest {
            argv: vec!["/bin/true".to_owned()],
            cwd: "/".to_owned(),
            timeout: Duration::from_secs(20),
            keep: 4096,
            call: None,
        };
        match sandbox.run(&trial, &|| false, &mut |_, _| {}) {
            Ok(outcome) if outcome.ending == Ending::Exited(0) => Ok(sandbox),
            Ok(outcome) => Err(SandboxError::Unusable {
                reason: format!(
                    "`true` ended with status {}: {}",
                    outcome.ending.status(),
                    String::from_utf8_lossy(&outcome.stderr.tail).trim()
                ),
            }),
            Err(RunError::Setup(reason)) => Err(SandboxError::Unusable { reason }),
            Err(error) => Err(SandboxError::Unusable { reason: error.to_string() }),
        }
    }

    /// The virtual roots bound in the sandbox.
    #[must_use]
    pub fn roots(&self) -> &[String] {
        &self.roots
    }

    /// Runs one command, handing its output to `output` as it comes (on the calling thread),
    /// until it exits, its time limit passes or `cancelled` answers true (checked every few
    /// milliseconds). When this returns, no process of the command is left.
    pub fn run(
        &self,
        request: &RunRequest,
        cancelled: &dyn Fn() -> bool,
        output: &mut dyn FnMut(Stream, &[u8]),
    ) -> Result<RunOutcome, RunError> {
        // The gate judges the path as given (its refusal is the agent's answer); the sandbox
        // changes into its normal spelling.
        let attributes = self.accessor.attributes(&request.cwd).map_err(RunError::WorkingDirectory)?;
        let cwd =
            vfs::VirtualPath::new(&request.cwd).map_or_else(|_| request.cwd.clone(), |path| path.as_str().to_owned());
        if attributes.kind != vfs::EntryKind::Directory {
            return Err(RunError::NotADirectory(cwd));
        }
        let started = Instant::now();
        let (mut child, status) = self.spawn(request, &cwd)?;
        let _claimed = request.call.as_ref().map(|call| Claimed::new(&self.calls, child.id(), call.clone()));
        // Bounded: a command writes faster than its output is handed on (to a slow reader of
        // `vfs run`'s stdout), and waits for it; before 2026-12-07 vfs queued it all (7.5 GB in
        // 20 s of `head -c 100G /dev/zero`).
        let (sender, receiver) = mpsc::sync_channel::<Event>(OUTPUT_QUEUE);
        let readers = [
            child.stdout.take().map(|pipe| pump(pipe, Stream::Stdout, sender.clone())),
            child.stderr.take().map(|pipe| pump(pipe, Stream::Stderr, sender.clone())),
        ];
        let status_reader = watch_status(status, sender.clone());
        drop(sender);
        let child = Arc::new(Mutex::new(child));
        // The time limit holds even while `output` waits (on a reader that does not read).
        let watchdog = Watchdog::start(&child, request.timeout).map_err(|error| {
            let mut child = child.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = child.kill();
            let _ = child.wait();
            RunError::Setup(format!("the time limit could not be watched: {error}"))
        })?;
        let mut stdout = Tail::new(request.keep);
        let mut stderr = Tail::new(request.keep);
        let mut open_streams = readers.iter().filter(|reader| reader.is_some()).count();
        let mut started_report: Option<bool> = if status_reader.is_none() { Some(true) } else { None };
        let mut ending: Option<Ending> = None;
        let mut exit: Option<std::process::ExitStatus> = None;
        let mut exited: Option<Instant> = None;
        loop {
            match receiver.recv_timeout(Duration::from_millis(5)) {
                Ok(Event::Output(stream, bytes)) => {
                    match stream {
                        Stream::Stdout => stdout.push(&bytes),
                        Stream::Stderr => stderr.push(&bytes),
                    }
                    output(stream, &bytes);
                }
                Ok(Event::Closed) => open_streams -= 1,
                Ok(Event::Started(started)) => started_report = Some(started),
                Err(mpsc::RecvTimeoutError::Timeout | mpsc::RecvTimeoutError::Disconnected) => {}
            }
            if exit.is_none() {
                let waited = child.lock().unwrap_or_else(PoisonError::into_inner).try_wait();
                if let Ok(Some(status)) = waited {
                    exit = Some(status);
                    if watchdog.fired() {
                        ending.get_or_insert(Ending::TimedOut);
                    }
                } else if ending.is_none() && cancelled() {
                    // The time limit is the watchdog's. bubblewrap's init dies with it
                    // (`--die-with-parent`), and with the init every process of its PID
                    // namespace.
                    ending = Some(Ending::Cancelled);
                    let _ = child.lock().unwrap_or_else(PoisonError::into_inner).kill();
                }
            }
            if let Some(status) = exit {
                let exited_at = *exited.get_or_insert_with(Instant::now);
                if started_report.is_none() && open_streams == 0 && exited_at.elapsed() > Duration::from_secs(1) {
                    // The status descriptor is held open elsewhere (a program another part of
                    // this process started in the instant it was inheritable): the command
                    // did run as far as anyone can tell.
                    started_report = Some(true);
                }
                // Every process of the command is gone with the namespace's init: the
                // streams close, and the status report ends at bubblewrap's exit.
                if open_streams == 0 && started_report.is_some() {
                    let ending = ending.unwrap_or_else(|| ending_of(status));
                    if started_report == Some(false) && !matches!(ending, Ending::TimedOut | Ending::Cancelled) {
                        let reason = String::from_utf8_lossy(&stderr.bytes()).trim().to_owned();
                        tracing::warn!(target: "vfs::run", %reason, "the sandbox could not start a command");
                        return Err(RunError::Setup(reason));
                    }
                    return Ok(RunOutcome {
                        ending,
                        duration: started.elapsed(),
                        stdout: stdout.finish(),
                        stderr: stderr.finish(),
                    });
                }
            }
        }
    }

    /// Starts `prlimit … bwrap … -- COMMAND`, with the write end of the status pipe inherited.
    fn spawn(&self, request: &RunRequest, cwd: &str) -> Result<(Child, io::PipeReader), RunError> {
        use std::os::fd::{AsFd, AsRawFd};
        let setup = |error: io::Error| RunError::Setup(error.to_string());
        let (status_reader, status_writer) = io::pipe().map_err(setup)?;
        let id = AGENT_ID;
        let passwd = data(&format!(
            "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nagent:x:{id}:{id}:agent:{HOME}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ))
        .map_err(setup)?;
        let group = data(&format!("root:x:0:\nagent:x:{id}:\nnogroup:x:65534:\n")).map_err(setup)?;
        // The sandbox's own names (the host's file names the host's machines).
        let hosts =
            data("127.0.0.1\tlocalhost\n127.0.1.1\tvfs\n::1\tlocalhost ip6-localhost ip6-loopback\n").map_err(setup)?;
        // bubblewrap's own arguments name the sandbox's directory (the binds' sources): read
        // from a descriptor (`--args`), they are not in its command line, which every process
        // inside can read (`/proc/1/cmdline`).
        let mut arguments = Vec::new();
        for argument in self.bwrap_arguments(cwd, [passwd.as_raw_fd(), group.as_raw_fd(), hosts.as_raw_fd()]) {
            arguments.extend_from_slice(argument.as_encoded_bytes());
            arguments.push(0);
        }
        let arguments = streamed(arguments).map_err(setup)?;
        let mut command = Command::new(&self.prlimit);
        let processes = self.process_limit();
        command
            .arg(format!("--nproc={processes}"))
            .arg(format!("--as={}", self.options.max_memory))
            .arg("--core=0")
            .arg("--")
            .arg(&self.bwrap)
            .arg("--args")
            .arg(arguments.as_raw_fd().to_string())
            .arg("--json-status-fd")
            .arg(status_writer.as_raw_fd().to_string())
            .arg("--")
            .args(&request.argv)
            .env_clear()
            .env("PATH", PATH)
            .env("HOME", HOME)
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .envs(self.options.env.iter().map(|(name, value)| (name, value)))
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(user) = self.host_user {
            command.uid(user).gid(user);
        }
        let spawning = SPAWNING.lock().unwrap_or_else(PoisonError::into_inner);
        // Only these go to the command: every other descriptor of vfs's, those it inherited
        // from whoever started it included, is closed at the exec (bubblewrap passes on all it
        // gets, and one open on a host file would be a way out of the tree).
        close_fds::set_fds_cloexec_threadsafe(3, &[]);
        for inherited in [status_writer.as_fd(), passwd.as_fd(), group.as_fd(), hosts.as_fd(), arguments.as_fd()] {
            rustix::io::fcntl_setfd(inherited, rustix::io::FdFlags::empty()).map_err(|errno| setup(errno.into()))?;
        }
        let child = command.spawn();
        drop((status_writer, passwd, group, hosts, arguments));
        drop(spawning);
        Ok((child.map_err(setup)?, status_reader))
    }

    /// The limit on processes: as root, the commands' own user has no other process; as
    /// another user, the user's threads outside the sandbox count too (the kernel's limit
    /// counts threads: vfs's own, its pool's and its views' among them), so they are added.
    fn process_limit(&self) -> u64 {
        if self.host_user.is_some() {
            return self.options.max_processes;
        }
        self.options.max_processes + threads_of(rustix::process::getuid().as_raw())
    }

    /// bubblewrap's arguments; `etc` are the descriptors `/etc/passwd`, `/etc/group` and
    /// `/etc/hosts` are read from (a file bound from the host would show its physical path
    /// in the sandbox's `mountinfo`, and the host's `hosts` names its machines).
    fn bwrap_arguments(&self, cwd: &str, etc: [i32; 3]) -> Vec<OsString> {
        let [passwd, group, hosts] = etc;
        let mut arguments: Vec<OsString> = Vec::new();
        let mut add = |items: &[&str]| arguments.extend(items.iter().map(OsString::from));
        // A user namespace of its own, in which no other can be made (a nested one would
        // give the command a root of its own to mount and unshare with).
        add(&["--unshare-all", "--unshare-user"]);
        if self.disable_userns {
            add(&["--disable-userns"]);
        }
        add(&["--die-with-parent", "--new-session", "--hostname", "vfs"]);
        let id = AGENT_ID.to_string();
        add(&["--uid", &id, "--gid", &id]);
        add(&["--ro-bind", "/usr", "/usr"]);
        for (top, link) in &self.system {
            match link {
                Some(target) => add(&["--symlink", target, top]),
                None => add(&["--ro-bind", top, top]),
            }
        }
        for file in ETC {
            add(&["--ro-bind-try", file, file]);
        }
        add(&[
            "--ro-bind-data",
            &passwd.to_string(),
            "/etc/passwd",
            "--ro-bind-data",
            &group.to_string(),
            "/etc/group",
            "--ro-bind-data",
            &hosts.to_string(),
            "/etc/hosts",
        ]);
        // The places a command may write besides the tree are memory, each bounded (a tmpfs
        // takes half the machine's memory by default, and no address-space limit counts
        // it); `/dev` is read-only once its `shm` is mounted, and so is `/` once everything
        // is bound (both are bubblewrap's own tmpfs, unbounded).
        let scratch = self.options.max_scratch.to_string();
        add(&["--proc", "/proc", "--dev", "/dev", "--size", &scratch, "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]);
        add(&["--size", &scratch, "--tmpfs", "/tmp", "--dir", "/home", "--size", &scratch, "--tmpfs", HOME]);
        let view = self.directory.join("view");
        // Shallow roots first, so a nested root is bound over its parent's binding.
        let mut roots = self.roots.clone();
        roots.sort_by_key(|root| root.matches('/').count());
        for root in &roots {
            let source = match self.read_only.iter().position(|(read_only, _)| read_only == root) {
                Some(index) => self.directory.join(format!("ro-{index}")),
                None => view.join(root.trim_start_matches('/')),
            };
            arguments.extend(["--bind".into(), source.into_os_string(), root.into()]);
        }
        arguments.extend(["--remount-ro".into(), "/".into(), "--chdir".into(), cwd.into()]);
        arguments
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for (_, mounted) in std::mem::take(&mut self.read_only) {
            let _ = mounted.unmount();
        }
        if let Some(mounted) = self.mounted.take() {
            let _ = mounted.unmount();
        }
        remove(&self.directory);
    }
}

/// True when `bwrap --help` names `option`.
fn offers(bwrap: &Path, option: &str) -> bool {
    Command::new(bwrap)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).split_whitespace().any(|word| word == option))
}

/// Reads bubblewrap's JSON status reports and tells whether the command started.
fn watch_status(status: io::PipeReader, sender: mpsc::SyncSender<Event>) -> Option<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("vfs-run-status".to_owned())
        .spawn(move || {
            // `{"child-pid": N}` comes once the command is started; the end of the
            // stream without it means bubblewrap gave up before.
            // The stream is read to its end: bubblewrap writes its exit code last,
            // and a closed pipe would end it with SIGPIPE.
            let mut started = false;
            for line in BufReader::new(status).lines().map_while(Result::ok) {
                if !started && line.contains("\"child-pid\"") {
                    started = true;
                    let _ = sender.send(Event::Started(true));
                }
            }
            if !started {
                let _ = sender.send(Event::Started(false));
            }
        })
        .ok()
}

/// A pipe that yields `content`, then its end: bubblewrap reads its arguments from it
/// (`--args`), as many as the mounts need. A thread writes them, since a pipe holds at most
/// 64 KiB before its reader starts; it ends when all is read, or at once if the reader is gone.
fn streamed(content: Vec<u8>) -> io::Result<io::PipeReader> {
    use std::io::Write as _;
    let (reader, mut writer) = io::pipe()?;
    std::thread::Builder::new().name("vfs-run-args".to_owned()).spawn(move || {
        let _ = writer.write_all(&content);
    })?;
    Ok(reader)
}

/// A pipe that holds `content` and nothing more will be written to: bubblewrap reads a file
/// of the sandbox from it (`--ro-bind-data`). The content is small (well under a pipe's
/// 64 KiB), so it is written whole before the command starts.
fn data(content: &str) -> io::Result<io::PipeReader> {
    use std::io::Write as _;
    let (reader, mut writer) = io::pipe()?;
    writer.write_all(content.as_bytes())?;
    Ok(reader)
}

/// What the threads watching a command report.
enum Event {
    Output(Stream, Vec<u8>),
    Closed,
    /// Whether bubblewrap reported the command started.
    Started(bool),
}

fn pump(
    mut pipe: impl Read + Send + 'static,
    stream: Stream,
    sender: mpsc::SyncSender<Event>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(read) => {
                    if sender.send(Event::Output(stream, buffer[..read].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = sender.send(Event::Closed);
    })
}

/// How many pieces of output (of at most 64 KiB each) wait at once to be handed on.
const OUTPUT_QUEUE: usize = 16;

/// Kills the command when its time limit passes, whatever the loop that hands on its output
/// is doing (waiting for a reader, say); stopped when dropped.
struct Watchdog {
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    fired: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// # Errors
    /// Its thread could not be started: nothing would end the command at its limit.
    fn start(child: &Arc<Mutex<Child>>, limit: Duration) -> io::Result<Self> {
        let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (stop, fired, child) = (stop.clone(), fired.clone(), child.clone());
            std::thread::Builder::new().name("vfs-run-limit".to_owned()).spawn(move || {
                let (stopped, wake) = &*stop;
                let stopped = stopped.lock().unwrap_or_else(PoisonError::into_inner);
                let (stopped, _) = wake
                    .wait_timeout_while(stopped, limit, |stopped| !*stopped)
                    .unwrap_or_else(PoisonError::into_inner);
                if !*stopped {
                    // A child already waited for is not signalled (`Child::kill`), so no
                    // other process that took its number is.
                    fired.store(true, Ordering::SeqCst);
                    let _ = child.lock().unwrap_or_else(PoisonError::into_inner).kill();
                }
            })?
        };
        Ok(Watchdog { stop, fired, thread: Some(thread) })
    }

    /// True when the time limit passed and the command was killed for it.
    fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The last `keep` bytes of a stream, and its length.
struct Tail {
    keep: usize,
    bytes: VecDeque<u8>,
    total: u64,
}

impl Tail {
    fn new(keep: usize) -> Self {
        Tail { keep, bytes: VecDeque::new(), total: 0 }
    }

    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let kept = &bytes[bytes.len().saturating_sub(self.keep)..];
        self.bytes.extend(kept);
        let excess = self.bytes.len().saturating_sub(self.keep);
        self.bytes.drain(..excess);
    }

    fn bytes(&self) -> Vec<u8> {
        self.bytes.iter().copied().collect()
    }

    fn finish(self) -> Captured {
        Captured { tail: self.bytes.into_iter().collect(), total: self.total }
    }
}

fn ending_of(status: std::process::ExitStatus) -> Ending {
    match (status.code(), status.signal()) {
        // bubblewrap reports a command ended by a signal as 128 plus its number.
        (Some(code), _) if (129..=128 + 64).contains(&code) => Ending::Signalled(code - 128),
        (Some(code), _) => Ending::Exited(code),
        (None, Some(signal)) => Ending::Signalled(signal),
        (None, None) => Ending::Exited(-1),
    }
}

/// The top-level directories of the system beside `/usr`: on a merged-usr system, links
/// (`/bin -> usr/bin`), laid out as the same links; elsewhere directories, bound read-only.
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the machine's own system directories, never an agent's path"
)]
fn system_layout() -> Vec<(&'static str, Option<String>)> {
    ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
        .into_iter()
        .filter_map(|top| match std::fs::read_link(top) {
            Ok(target) => Some((top, Some(target.to_string_lossy().into_owned()))),
            Err(_) if std::fs::metadata(top).is_ok_and(|metadata| metadata.is_dir()) => Some((top, None)),
            Err(_) => None,
        })
        .collect()
}

/// True when one path is the other or lies inside it.
fn overlaps(root: &str, reserved: &str) -> bool {
    let inside = |inner: &str, outer: &str| {
        outer == "/" || inner == outer || inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('/'))
    };
    inside(root, reserved) || inside(reserved, root)
}

/// `program` on `PATH`.
fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|directory| directory.join(program)).find(|candidate| is_executable(candidate))
}

#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: a program on the operator's PATH, never an agent's path"
)]
fn is_executable(candidate: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(candidate).is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// How many threads `user` has on the machine: what `RLIMIT_NPROC` counts (a process whose
/// threads cannot be listed, gone meanwhile, counts as one).
fn threads_of(user: u32) -> u64 {
    threads_in(Path::new("/proc"), user)
}

/// [`threads_of`] in a process table at `table`.
#[expect(clippy::disallowed_methods, reason = "operator-input: the machine's process table, never an agent's path")]
fn threads_in(table: &Path, user: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(table) else { return 0 };
    let count: usize = entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name.bytes().all(|byte| byte.is_ascii_digit())))
        .filter(|entry| entry.metadata().is_ok_and(|metadata| metadata.uid() == user))
        .map(|entry| std::fs::read_dir(entry.path().join("task")).map_or(1, Iterator::count))
        .sum();
    count as u64
}

/// Kills the processes of the commands' host user `user` (in the process table `table`) that
/// their parent left (adopted by the machine's init): the namespaces of a vfs that is gone.
/// A process of a live sandbox has its bubblewrap, and that its vfs, for parent.
#[expect(clippy::disallowed_methods, reason = "operator-input: the machine's process table, never an agent's path")]
fn end_orphans(table: &Path, user: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(table) else { return 0 };
    let mut ended = 0;
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else { continue };
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else { continue };
        let field = |name: &str| {
            status.lines().find_map(|line| line.strip_prefix(name)).and_then(|rest| rest.split_whitespace().next())
        };
        let orphan = field("PPid:") == Some("1");
        if orphan
            && field("Uid:").and_then(|uid| uid.parse::<u32>().ok()) == Some(user)
            && let Some(pid) = rustix::process::Pid::from_raw(pid)
            && rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
        {
            ended += 1;
        }
    }
    if ended > 0 {
        tracing::info!(target: "vfs::run", ended, "ended the processes a killed vfs's sandbox left");
    }
    ended
}

/// A read-only view of each mount no write reaches, at `ro-N/` in the sandbox's directory
/// (`N` its place in the list). One that cannot be mounted is left out (the whole tree's view
/// serves its root), and said in the operator's log.
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandbox's own directory under the operator's TMPDIR, never an agent's path"
)]
fn mount_read_only_views(
    registry: &vfs::MountRegistry,
    directory: &Path,
    host_user: Option<u32>,
    fuse: &FuseOptions,
) -> Vec<(String, Mounted)> {
    let mut views = Vec::new();
    for root in registry.roots_without_writes() {
        let mountpoint = directory.join(format!("ro-{}", views.len()));
        let mounted = make_mountpoint(&mountpoint, host_user)
            .map_err(|source| SandboxError::Directory { path: mountpoint.clone(), source })
            .and_then(|()| crate::mount_read_only(registry, &root, &mountpoint, fuse).map_err(SandboxError::from));
        match mounted {
            Ok(mounted) => views.push((root, mounted)),
            Err(error) => {
                tracing::info!(target: "vfs::run", root, %error, "served by the view of the whole tree");
                let _ = std::fs::remove_dir(&mountpoint);
            }
        }
    }
    views
}

/// A directory for a view to be mounted on, owned by the commands' host user when there is one.
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandbox's own directory under the operator's TMPDIR, never an agent's path"
)]
fn make_mountpoint(path: &Path, host_user: Option<u32>) -> io::Result<()> {
    std::fs::create_dir(path)?;
    if let Some(user) = host_user {
        rustix::fs::chown(
            path,
            Some(rustix::process::Uid::from_raw(user)),
            Some(rustix::process::Gid::from_raw(user)),
        )?;
    }
    Ok(())
}

/// Makes the sandbox's private directory: mode 0700, owned by the commands' user, with the
/// mountpoint of the view.
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandbox's own directory under the operator's TMPDIR, never an agent's path"
)]
fn lay_out(directory: &Path, host_user: Option<u32>) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(directory)?;
    std::fs::create_dir(directory.join("view"))?;
    if let Some(user) = host_user {
        let user = Some(rustix::process::Uid::from_raw(user));
        let group = Some(rustix::process::Gid::from_raw(user.map_or(0, rustix::process::Uid::as_raw)));
        for path in [directory.to_owned(), directory.join("view")] {
            rustix::fs::chown(&path, user, group)?;
        }
    }
    Ok(())
}

/// Makes this sandbox's private directory (`lay_out`) in the home of this user's sandboxes,
/// `TEMP/vfs-sandboxes-UID` (mode 0711: others may pass through it to the directory of a
/// sandbox they run in, never list or add to it), after clearing what killed vfs processes
/// left there. The home is trusted only when it is a directory of this user's that nobody
/// else may write: in a shared `/tmp` anyone could have made the name first, with links in it
/// that would have a root vfs unmount other file systems. Where it is not, the sandbox gets a
/// directory of a random name in `TEMP` itself (nothing stale is cleared then; the operator's
/// log says why).
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandboxes' own directories under the operator's TMPDIR, never an agent's path"
)]
fn private_directory(temp: &Path, host_user: Option<u32>) -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let user = rustix::process::geteuid().as_raw();
    let home = temp.join(format!("vfs-sandboxes-{user}"));
    let made = std::fs::DirBuilder::new().mode(0o711).create(&home);
    let trusted = match made {
        Ok(()) => std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711)).is_ok(),
        Err(_) => std::fs::symlink_metadata(&home)
            .is_ok_and(|found| found.file_type().is_dir() && found.uid() == user && found.mode() & 0o022 == 0),
    };
    let make = |directory: &Path| {
        lay_out(directory, host_user).map_err(|source| SandboxError::Directory { path: directory.to_owned(), source })
    };
    if trusted {
        clear_stale(&home);
        // A directory of this process's id that it did not make (an earlier process with the
        // same id, a container's, killed) is passed over: the next number is tried.
        let mut tries = 0;
        loop {
            let directory = home.join(format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
            match make(&directory) {
                Err(SandboxError::Directory { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists && tries < 8 =>
                {
                    tries += 1;
                }
                done => return done.map(|()| directory),
            }
        }
    }
    tracing::warn!(
        target: "vfs::run",
        home = %home.display(),
        "not vfs's own (another user's, or writable by others): this sandbox's directory gets a random name instead, and no sandbox a killed vfs left is cleared; remove it if no vfs uses it"
    );
    let mut tries = 0;
    loop {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let directory = temp.join(format!("vfs-sandbox-{:016x}", hasher.finish()));
        match make(&directory) {
            Err(SandboxError::Directory { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists && tries < 8 =>
            {
                tries += 1;
            }
            done => return done.map(|()| directory),
        }
    }
}

/// Unmounts and removes the sandbox directories (`PID-N`) in `home`, this user's own, of vfs
/// processes that are gone.
fn clear_stale(home: &Path) {
    let sandboxes = sandboxes_in(home);
    for (directory, live, user) in &sandboxes {
        if *live {
            continue;
        }
        // A vfs killed while bubblewrap set a command up leaves that command's namespace
        // behind (its first process waits for a parent that is gone, and dies with none),
        // holding the views' mounts: as root, its commands had a user of their own, the
        // owner of its directory (unless a live sandbox drew the same one).
        if rustix::process::geteuid().is_root()
            && let Some(user) = *user
            && !sandboxes.iter().any(|(_, live, other)| *live && *other == Some(user))
        {
            end_orphans(Path::new("/proc"), user);
        }
        // A view whose server is gone answers `ENOTCONN`; detach each (`view/`, `ro-N/`), then
        // remove the rest.
        for view in mountpoints(directory).into_iter().filter(|view| is_mounted(view)) {
            let _ = Command::new("fusermount3")
                .args(["-u", "-z"])
                .arg(&view)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if rustix::process::getuid().is_root() {
                let _ =
                    Command::new("umount").arg("-l").arg(&view).stdout(Stdio::null()).stderr(Stdio::null()).status();
            }
        }
        tracing::info!(target: "vfs::run", directory = %directory.display(), "removed the sandbox of a vfs that is gone");
        remove(directory);
    }
}

/// The sandbox directories (`PID-N`) in `home`: each with whether its vfs still runs and the
/// host user its commands ran as (its owner, when that is one of [`host_user`]'s).
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandboxes' own directories under the operator's TMPDIR, never an agent's path"
)]
fn sandboxes_in(home: &Path) -> Vec<(PathBuf, bool, Option<u32>)> {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(home) else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let Ok(metadata) = entry.path().symlink_metadata() else { continue };
        if !metadata.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|name| name.split('-').next()) else { continue };
        if pid.is_empty() || !pid.bytes().all(|byte| byte.is_ascii_digit()) {
            continue;
        }
        let live = Path::new("/proc").join(pid).exists();
        let user = (HOST_ID_BASE..HOST_ID_BASE + HOST_IDS).contains(&metadata.uid()).then_some(metadata.uid());
        found.push((entry.path(), live, user));
    }
    found
}

/// The host user this process's commands run as when vfs runs as root: `HOST_ID_BASE` plus a
/// number drawn at random the first time, passing over the users of the sandboxes in use in
/// `TEMP/vfs-sandboxes-0` (two vfs processes that drew the same would share one process limit).
fn host_user(temp: &Path) -> u32 {
    static DRAWN: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *DRAWN.get_or_init(|| {
        let home = temp.join(format!("vfs-sandboxes-{}", rustix::process::geteuid().as_raw()));
        let taken: Vec<u32> =
            sandboxes_in(&home).into_iter().filter(|(_, live, _)| *live).filter_map(|(_, _, user)| user).collect();
        let mut user = HOST_ID_BASE + random_below(HOST_IDS);
        for _ in 0..16 {
            if !taken.contains(&user) {
                break;
            }
            user = HOST_ID_BASE + random_below(HOST_IDS);
        }
        user
    })
}

/// A number below `bound`, drawn from the random keys the standard library seeds its hash maps
/// with.
fn random_below(bound: u32) -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    u32::try_from(hasher.finish() % u64::from(bound)).unwrap_or(0)
}

#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandbox's own directory under the operator's TMPDIR, never an agent's path"
)]
fn remove(directory: &Path) {
    // Only what the sandbox made, each mountpoint by `rmdir`: never into a view still mounted.
    for mountpoint in mountpoints(directory) {
        let _ = std::fs::remove_dir(mountpoint);
    }
    let _ = std::fs::remove_dir(directory);
}

/// True when `path` is where a file system is mounted (its device is not its parent's; a
/// stale FUSE mount answers `ENOTCONN`), not a plain directory. (The sandbox's views are FUSE
/// file systems, each a device of its own.)
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: a mountpoint in the sandboxes' own home under the operator's TMPDIR, never an agent's path"
)]
fn is_mounted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(parent) = path.parent() else { return false };
    match (std::fs::symlink_metadata(path), std::fs::symlink_metadata(parent)) {
        (Ok(found), Ok(above)) => found.dev() != above.dev(),
        (Err(error), _) => error.raw_os_error() == Some(rustix::io::Errno::NOTCONN.raw_os_error()),
        (Ok(_), Err(_)) => false,
    }
}

/// The mountpoints of a sandbox's directory: `view/` and the read-only views' `ro-N/`
/// (directories, never links).
#[expect(
    clippy::disallowed_methods,
    reason = "operator-input: the sandbox's own directory under the operator's TMPDIR, never an agent's path"
)]
fn mountpoints(directory: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(directory) else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(|name| name == "view" || name.starts_with("ro-")))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.path())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An option is looked for as a word of `--help`'s text: one this bubblewrap has, one no
    /// bubblewrap has, and a word that is only part of one.
    #[test]
    fn an_option_is_offered_when_help_names_it() {
        let Some(bwrap) = find("bwrap") else {
            #[expect(clippy::print_stderr, reason = "fixture: a skipped test says why")]
            {
                eprintln!("SKIPPED: no bwrap on this machine");
            }
            return;
        };
        assert!(offers(&bwrap, "--unshare-all"));
        assert!(!offers(&bwrap, "--no-such-option"));
        assert!(!offers(&bwrap, "--unshare"));
    }

    /// A sandbox's directory goes whole when it is removed: the view's mountpoint and each
    /// read-only view's (`ro-N/`), never anything else.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a sandbox directory laid out on disk")]
    fn a_removed_sandbox_leaves_no_mountpoint_behind() {
        let temp = tempfile::tempdir().unwrap();
        let directory = temp.path().join("vfs-sandbox-1-0");
        lay_out(&directory, None).unwrap();
        make_mountpoint(&directory.join("ro-0"), None).unwrap();
        make_mountpoint(&directory.join("ro-1"), None).unwrap();
        remove(&directory);
        assert!(!directory.exists());
        // Something that is not a mountpoint of the sandbox's is never removed.
        lay_out(&directory, None).unwrap();
        std::fs::write(directory.join("other"), "x").unwrap();
        remove(&directory);
        assert_eq!(std::fs::read_to_string(directory.join("other")).unwrap(), "x");
        assert!(!directory.join("view").exists());
    }

    /// A sandbox's directory is made in the home of this user's sandboxes (mode 0711), made
    /// for it; one that is not this user's own, or that others may write, is not used, nor is
    /// anything in it followed: the sandbox gets a directory of a random name instead.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: homes of sandboxes laid out on disk")]
    fn a_sandboxs_directory_is_made_only_in_a_home_of_its_users_own() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let user = rustix::process::geteuid().as_raw();
        let home = temp.path().join(format!("vfs-sandboxes-{user}"));
        let directory = private_directory(temp.path(), None).unwrap();
        assert_eq!(directory.parent(), Some(home.as_path()));
        assert_eq!(std::fs::metadata(&home).unwrap().permissions().mode() & 0o7777, 0o711);
        assert!(directory.join("view").is_dir());
        // A directory a killed vfs left (no such process), whose `view` is a link elsewhere:
        // the link is not followed, and what it names stays.
        let elsewhere = temp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("kept")).unwrap();
        std::fs::create_dir(home.join("99999999-0")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, home.join("99999999-0/view")).unwrap();
        let second = private_directory(temp.path(), None).unwrap();
        assert_eq!(second.parent(), Some(home.as_path()));
        assert!(elsewhere.join("kept").is_dir());
        // A home that others may write is not trusted: nothing in it is touched.
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o777)).unwrap();
        let third = private_directory(temp.path(), None).unwrap();
        assert_eq!(third.parent(), Some(temp.path()));
        assert!(third.file_name().unwrap().to_str().unwrap().starts_with("vfs-sandbox-"));
        assert!(home.join("99999999-0/view").is_symlink());
        // Nor is a link in the home's place followed.
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o711)).unwrap();
        let moved = temp.path().join("moved-home");
        std::fs::rename(&home, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &home).unwrap();
        let fourth = private_directory(temp.path(), None).unwrap();
        assert_eq!(fourth.parent(), Some(temp.path()));
        assert_eq!(
            std::fs::read_dir(&moved).unwrap().count(),
            3,
            "nothing made in, or removed from, what the link names"
        );
        for made in [directory, second, third, fourth] {
            remove(&made);
        }
    }

    /// A directory of this process's id left by an earlier process with the same id (a
    /// container's vfs, killed and started again) does not stop a sandbox: the next number is
    /// taken, and the left one stays for a later process to clear.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a left directory laid out on disk")]
    fn a_directory_left_under_this_process_id_is_passed_over() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join(format!("vfs-sandboxes-{}", rustix::process::geteuid().as_raw()));
        std::fs::create_dir(&home).unwrap();
        let next = NEXT.load(Ordering::Relaxed);
        for number in next..next + 3 {
            std::fs::create_dir(home.join(format!("{}-{number}", std::process::id()))).unwrap();
        }
        let directory = private_directory(temp.path(), None).unwrap();
        assert_eq!(directory.parent(), Some(home.as_path()));
        assert!(directory.join("view").is_dir());
        for number in next..next + 3 {
            let left = home.join(format!("{}-{number}", std::process::id()));
            assert!(left.is_dir() && !left.join("view").exists(), "left as it was: {left:?}");
        }
        remove(&directory);
    }

    /// The limit counts threads, as the kernel's does: a table of two processes of the user,
    /// with three threads and one, counts four (an entry that is no process counts nothing).
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a process table laid out on disk")]
    fn the_limit_counts_the_users_threads_not_its_processes() {
        use std::os::unix::fs::MetadataExt;
        let table = tempfile::tempdir().unwrap();
        for (process, threads) in [("123", 3), ("456", 1)] {
            for thread in 0..threads {
                std::fs::create_dir_all(table.path().join(process).join("task").join(thread.to_string())).unwrap();
            }
        }
        std::fs::create_dir_all(table.path().join("self/task/1")).unwrap();
        let user = std::fs::metadata(table.path().join("123")).unwrap().uid();
        assert_eq!(threads_in(table.path(), user), 4);
        assert_eq!(threads_in(table.path(), user + 1), 0);
    }

    #[test]
    fn a_root_may_not_cover_the_system() {
        assert!(overlaps("/usr", "/usr"));
        assert!(overlaps("/usr/local", "/usr"));
        assert!(overlaps("/home", HOME));
        assert!(!overlaps("/users", "/usr"));
        assert!(!overlaps("/src", "/usr"));
        assert!(!overlaps("/home2", "/home/agent"));
    }

    #[test]
    fn the_tail_keeps_the_last_bytes_and_counts_them_all() {
        let mut tail = Tail::new(4);
        tail.push(b"abc");
        tail.push(b"defgh");
        tail.push(b"i");
        let captured = tail.finish();
        assert_eq!(captured.tail, b"fghi");
        assert_eq!(captured.total, 9);
        assert!(captured.truncated());
        let mut none = Tail::new(0);
        none.push(b"abc");
        assert_eq!(none.finish(), Captured { tail: Vec::new(), total: 3 });
    }

    #[test]
    fn statuses_are_the_shells() {
        assert_eq!(Ending::Exited(3).status(), 3);
        assert_eq!(Ending::Signalled(9).status(), 137);
        assert_eq!(Ending::TimedOut.status(), 124);
        assert_eq!(Ending::Cancelled.status(), 130);
        assert_eq!(ending_of(std::process::ExitStatus::from_raw(137 << 8)), Ending::Signalled(9));
        assert_eq!(ending_of(std::process::ExitStatus::from_raw(2 << 8)), Ending::Exited(2));
    }
}
