//! The local-directory backend: handle-based confinement (DESIGN 4.2 steps 6 to 9).
//!
//! This is the one module that touches the disk. The mount root is opened once by path, in
//! [`LocalRoot::open`]; everything after that is `*at` system calls relative to a directory
//! handle, one component at a time with `O_NOFOLLOW`. Symbolic links are read with
//! `readlinkat` and resolved *by us*, lexically, inside the mount's own namespace; a link whose
//! target leaves the mount is refused. Because each step opens a single name beneath a handle
//! we already hold, a symlink swapped in during the call can make the call fail, never escape.
//! The walk also knows each directory's identity, which is how physical nesting (a mount lying
//! inside another mount's directory) is honoured however the directory was reached.
#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "the storage module is the one place allowed to touch the disk"
)]

use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::access::Caller;
use crate::error::Error;
use crate::path::VirtualPath;
use crate::registry::{ConfigError, RegistryInner};
use crate::spec::MountSpec;
use crate::text::{agent_text, code};

/// Names of vfs's own temporary files (an atomic write in flight, or one a crash interrupted).
/// They are never listed, walked or resolved: an agent sees only whole files.
pub(crate) const TEMPORARY_PREFIX: &str = ".vfs-tmp-";

/// Most directory levels vfs creates or removes below a mount root.
pub(crate) const MAX_DEPTH: usize = 256;

/// Most symbolic links one resolution follows before calling it a loop.
const MAX_LINKS: usize = 40;

/// A mount's root directory, opened once.
pub(crate) struct LocalRoot {
    dir: Arc<OwnedFd>,
    identity: (u64, u64),
    /// The canonical physical path (no links, no `.`/`..`), for relations between mounts.
    canonical: PathBuf,
    /// Every spelling of the root the scrub must know: as given (absolute), canonical.
    spellings: Vec<String>,
}

/// An open regular file. The ops layer reads through this type and never names
/// `std::fs::File`, so the static check can keep raw file types inside this module.
#[derive(Debug)]
pub(crate) struct OpenFile(File);

impl Read for OpenFile {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.0.read(buffer)
    }
}

impl io::Seek for OpenFile {
    fn seek(&mut self, position: io::SeekFrom) -> io::Result<u64> {
        self.0.seek(position)
    }
}

impl Write for OpenFile {
    fn write(&mut self, buffer: &[u8]) -> io::Result<usize> {
        self.0.write(buffer)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl OpenFile {
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

/// What a directory entry or a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Directory,
    Symlink,
    /// FIFO, socket, character or block device: never opened.
    Special,
}

/// The part of `stat` the crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) kind: Kind,
    pub(crate) size: u64,
    pub(crate) modified: (i64, u32),
    pub(crate) changed: (i64, u32),
    pub(crate) device: u64,
    pub(crate) inode: u64,
    pub(crate) mode: u32,
}

impl Stat {
    fn from_raw(raw: &rustix::fs::Stat) -> Self {
        let kind = match FileType::from_raw_mode(raw.st_mode) {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Directory,
            FileType::Symlink => Kind::Symlink,
            _ => Kind::Special,
        };
        #[expect(clippy::cast_sign_loss, reason = "sizes and nanoseconds are never negative")]
        Self {
            kind,
            size: raw.st_size as u64,
            modified: (raw.st_mtime, raw.st_mtime_nsec as u32),
            changed: (raw.st_ctime, raw.st_ctime_nsec as u32),
            #[expect(clippy::useless_conversion, reason = "the width differs by platform")]
            device: u64::from(raw.st_dev),
            #[expect(clippy::useless_conversion, reason = "the width differs by platform")]
            inode: u64::from(raw.st_ino),
            #[expect(clippy::useless_conversion, reason = "the width differs by platform")]
            mode: u32::from(raw.st_mode),
        }
    }

    pub(crate) fn identity(&self) -> (u64, u64) {
        (self.device, self.inode)
    }
}

fn io_error(errno: Errno) -> io::Error {
    io::Error::from(errno)
}

impl LocalRoot {
    /// Opens the mount root: the only ambient-path open in the crate.
    pub(crate) fn open(spec: &MountSpec) -> Result<Self, ConfigError> {
        let given = Path::new(spec.physical());
        let root = spec.root().as_str().to_owned();
        let physical = spec.physical().to_owned();
        let absolute = if given.is_absolute() {
            given.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|source| ConfigError::Open { root: root.clone(), physical: physical.clone(), source })?
                .join(given)
        };
        let metadata = match std::fs::metadata(&absolute) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(ConfigError::Missing { root, physical });
            }
            Err(source) => return Err(ConfigError::Open { root, physical, source }),
        };
        if !metadata.is_dir() {
            return Err(ConfigError::NotADirectory { root, physical });
        }
        let canonical = std::fs::canonicalize(&absolute).map_err(|source| ConfigError::Open {
            root: root.clone(),
            physical: physical.clone(),
            source,
        })?;
        let dir =
            rustix::fs::open(&canonical, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).map_err(
                |errno| ConfigError::Open { root: root.clone(), physical: physical.clone(), source: io_error(errno) },
            )?;
        let stat =
            rustix::fs::fstat(&dir).map_err(|errno| ConfigError::Open { root, physical, source: io_error(errno) })?;
        let stat = Stat::from_raw(&stat);
        let mut spellings = vec![
            lexical_normal(&absolute).to_string_lossy().into_owned(),
            canonical.to_string_lossy().into_owned(),
            absolute.to_string_lossy().into_owned(),
        ];
        spellings.sort();
        spellings.dedup();
        Ok(Self { dir: Arc::new(dir), identity: stat.identity(), canonical, spellings })
    }

    /// The canonical path components of `other` below this root: `Some(empty)` for the same
    /// directory, `None` when `other` does not lie inside this root.
    pub(crate) fn relative_of(&self, other: &LocalRoot) -> Option<Vec<String>> {
        let rest = other.canonical.strip_prefix(&self.canonical).ok()?;
        Some(rest.components().map(|component| component.as_os_str().to_string_lossy().into_owned()).collect())
    }

    /// The identities of the directories from this root (exclusive) down to `inner`'s root
    /// (inclusive) when `inner` lies physically inside this root; empty otherwise. Each
    /// directory is opened beneath the previous one with `O_NOFOLLOW`, as resolution would.
    pub(crate) fn chain_to(&self, inner: &LocalRoot) -> Vec<(u64, u64)> {
        let Some(rest) = self.relative_of(inner) else { return Vec::new() };
        let mut identities = Vec::with_capacity(rest.len());
        let mut current = self.dir.clone();
        for name in &rest {
            let opened = rustix::fs::openat(
                &*current,
                name.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            );
            let Ok(directory) = opened else { return Vec::new() };
            let Ok(stat) = rustix::fs::fstat(&directory) else { return Vec::new() };
            identities.push(Stat::from_raw(&stat).identity());
            current = Arc::new(directory);
        }
        // The path led somewhere else than the inner root (changed since it was opened).
        if identities.last() != Some(&inner.identity) {
            return Vec::new();
        }
        identities
    }

    pub(crate) fn identity(&self) -> (u64, u64) {
        self.identity
    }

    pub(crate) fn spellings(&self) -> &[String] {
        &self.spellings
    }

    pub(crate) fn handle(&self) -> Arc<OwnedFd> {
        self.dir.clone()
    }
}

/// `/a/./b/../c` → `/a/c` without touching the disk (for the spelling as given).
fn lexical_normal(path: &Path) -> PathBuf {
    let mut output = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                output.pop();
            }
            other => output.push(other.as_os_str()),
        }
    }
    output
}

/// Where a resolution ended.
pub(crate) struct Resolved {
    /// The effective mount: the innermost mount whose directory the target lies in.
    pub(crate) mount: usize,
    /// Canonical path of the target relative to the effective mount's root.
    pub(crate) rel: Vec<String>,
    /// The directory holding the target, or the target itself when `name` is `None`.
    pub(crate) parent: Arc<OwnedFd>,
    /// The target's name in `parent`; `None` when the target is the mount root.
    pub(crate) name: Option<String>,
    /// `lstat` of the target; `None` when it does not exist.
    pub(crate) stat: Option<Stat>,
}

impl Resolved {
    pub(crate) fn kind(&self) -> Option<Kind> {
        self.stat.map(|stat| stat.kind)
    }
}

/// Asked before a missing directory is created: the effective mount and the directory's
/// relative path.
pub(crate) type CreateGate<'a> = dyn Fn(usize, &[String]) -> Result<(), Error> + 'a;

/// How to treat the last component and missing directories.
pub(crate) struct WalkOptions<'a> {
    /// Follow a symbolic link in the last component (reads do; writes and deletes do not).
    pub(crate) follow_final: bool,
    /// Create missing intermediate directories, after asking this gate (effective mount and
    /// the relative path of the directory to create).
    pub(crate) create_parents: Option<&'a CreateGate<'a>>,
}

/// Resolves `components` (relative to mount `start`) beneath the mount's root handle.
pub(crate) fn resolve(
    registry: &RegistryInner,
    caller: Caller,
    path: &VirtualPath,
    start: usize,
    components: &[&str],
    options: &WalkOptions<'_>,
) -> Result<Resolved, Error> {
    let mut mount = start;
    let mut pending: VecDeque<String> = components.iter().map(|&segment| segment.to_owned()).collect();
    let mut links = 0usize;
    let check_nesting = registry.mounts.len() > 1;
    'restart: loop {
        let Some(root) = registry.mounts[mount].storage.local() else {
            return Err(Error::invalid_argument(agent_text![
                code(path),
                " is in object storage, where this operation is not available"
            ]));
        };
        let mut current = root.handle();
        let mut rel: Vec<String> = Vec::with_capacity(pending.len());
        while let Some(name) = pending.pop_front() {
            if name.starts_with(TEMPORARY_PREFIX) {
                return Err(Error::not_found(path));
            }
            if pending.is_empty() {
                let stat = match rustix::fs::statat(&*current, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(raw) => Stat::from_raw(&raw),
                    Err(Errno::NOENT) => {
                        rel.push(name.clone());
                        return Ok(Resolved { mount, rel, parent: current, name: Some(name), stat: None });
                    }
                    Err(Errno::NAMETOOLONG) => return Err(Error::not_found(path)),
                    Err(errno) => return Err(Error::io(path, io_error(errno))),
                };
                match stat.kind {
                    Kind::Symlink if options.follow_final => {
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(Error::symlink_loop(path));
                        }
                        let target = read_link(&current, &name, path)?;
                        pending = link_target(registry, mount, &rel, &target, path)?.into();
                        continue 'restart;
                    }
                    Kind::Directory => {
                        if let Some(inner) = registry.mount_at(stat.identity()).filter(|&inner| inner != mount) {
                            if !registry.visible(caller, inner) {
                                // Another mount's root that this caller may not see: answered
                                // as a name that does not exist. The launch allows that only
                                // where this mount grants no write, so nothing can try to
                                // create it.
                                rel.push(name.clone());
                                return Ok(Resolved { mount, rel, parent: current, name: Some(name), stat: None });
                            }
                            let Some(parent) = registry.mounts[inner].storage.local().map(LocalRoot::handle) else {
                                return Err(Error::not_found(path));
                            };
                            return Ok(Resolved {
                                mount: inner,
                                rel: Vec::new(),
                                parent,
                                name: None,
                                stat: Some(stat),
                            });
                        }
                    }
                    _ => {}
                }
                rel.push(name.clone());
                return Ok(Resolved { mount, rel, parent: current, name: Some(name), stat: Some(stat) });
            }
            match rustix::fs::openat(
                &*current,
                name.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(directory) => {
                    // With a single mount nothing can be nested: skip the identity check.
                    let inner = if check_nesting {
                        let stat = fstat(&directory, path)?;
                        registry.mount_at(stat.identity()).filter(|&inner| inner != mount)
                    } else {
                        None
                    };
                    match inner {
                        Some(inner) if !registry.visible(caller, inner) => {
                            // As a missing directory: refused where creating it would be
                            // (the launch allows such a root only where this mount grants no
                            // write), else "does not exist".
                            if let Some(gate) = options.create_parents {
                                let mut wanted = rel.clone();
                                wanted.push(name);
                                gate(mount, &wanted)?;
                            }
                            return Err(Error::not_found(path));
                        }
                        Some(inner) => {
                            mount = inner;
                            rel.clear();
                        }
                        None => rel.push(name),
                    }
                    current = Arc::new(directory);
                }
                Err(Errno::NOENT) => {
                    let Some(gate) = options.create_parents else {
                        return Err(Error::not_found(path));
                    };
                    let mut wanted = rel.clone();
                    wanted.push(name.clone());
                    gate(mount, &wanted)?;
                    match rustix::fs::mkdirat(&*current, name.as_str(), Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(Error::io(path, io_error(errno))),
                    }
                    pending.push_front(name);
                }
                Err(Errno::LOOP | Errno::NOTDIR | Errno::MLINK) => {
                    match rustix::fs::readlinkat(&*current, name.as_str(), Vec::new()) {
                        Ok(target) => {
                            links += 1;
                            if links > MAX_LINKS {
                                return Err(Error::symlink_loop(path));
                            }
                            let mut next = link_target(registry, mount, &rel, target.as_bytes(), path)?;
                            next.extend(pending.drain(..));
                            pending = next.into();
                            continue 'restart;
                        }
                        Err(Errno::INVAL) => return Err(Error::not_a_directory(path)),
                        Err(Errno::NOENT) => return Err(Error::changed_during_call(path)),
                        Err(errno) => return Err(Error::io(path, io_error(errno))),
                    }
                }
                Err(Errno::NAMETOOLONG) => return Err(Error::not_found(path)),
                Err(errno) => return Err(Error::io(path, io_error(errno))),
            }
        }
        let stat = fstat(&current, path)?;
        return Ok(Resolved { mount, rel, parent: current, name: None, stat: Some(stat) });
    }
}

fn read_link(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<Vec<u8>, Error> {
    match rustix::fs::readlinkat(directory, name, Vec::new()) {
        Ok(target) => Ok(target.into_bytes()),
        Err(Errno::INVAL | Errno::NOENT) => Err(Error::changed_during_call(path)),
        Err(errno) => Err(Error::io(path, io_error(errno))),
    }
}

/// Resolves a link target lexically within the mount: `rel` is the directory holding the link.
/// Absolute targets are accepted only when they name a place under the mount's own physical
/// root (in any spelling the registry knows); anything that climbs out is an escape.
fn link_target(
    registry: &RegistryInner,
    mount: usize,
    rel: &[String],
    target: &[u8],
    path: &VirtualPath,
) -> Result<Vec<String>, Error> {
    let Ok(target) = std::str::from_utf8(target) else {
        return Err(Error::escape(path));
    };
    let mut output: Vec<String>;
    let remainder: &str;
    if target.starts_with('/') {
        let spellings = registry.mounts[mount].storage.spellings();
        let Some(rest) = spellings.iter().find_map(|spelling| {
            let spelling = spelling.trim_end_matches('/');
            match target.strip_prefix(spelling) {
                Some("") => Some(""),
                Some(rest) if rest.starts_with('/') => Some(rest),
                _ => None,
            }
        }) else {
            return Err(Error::escape(path));
        };
        output = Vec::new();
        remainder = rest;
    } else {
        output = rel.to_vec();
        remainder = target;
    }
    for segment in remainder.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if output.pop().is_none() {
                    return Err(Error::escape(path));
                }
            }
            name => output.push(name.to_owned()),
        }
    }
    Ok(output)
}

fn fstat(fd: &OwnedFd, path: &VirtualPath) -> Result<Stat, Error> {
    rustix::fs::fstat(fd).map(|raw| Stat::from_raw(&raw)).map_err(|errno| Error::io(path, io_error(errno)))
}

/// Opens the resolved target as a regular file for reading, without ever blocking (FIFOs,
/// sockets and devices are refused before any open; `O_NONBLOCK` covers a swap during the call)
/// and checks that the opened object is the one resolution saw.
pub(crate) fn open_file(resolved: &Resolved, path: &VirtualPath) -> Result<(OpenFile, Stat), Error> {
    let Some(seen) = resolved.stat else {
        return Err(Error::not_found(path));
    };
    let Some(name) = &resolved.name else {
        return Err(Error::not_a_file(path));
    };
    open_file_in(&resolved.parent, name, seen, path)
}

/// Opens `name` in `directory` as a regular file; `seen` is its `lstat` from resolution.
pub(crate) fn open_file_in(
    directory: &OwnedFd,
    name: &str,
    seen: Stat,
    path: &VirtualPath,
) -> Result<(OpenFile, Stat), Error> {
    match seen.kind {
        Kind::Directory => return Err(Error::not_a_file(path)),
        Kind::Special => return Err(Error::unsupported(path)),
        Kind::Symlink | Kind::File => {}
    }
    // A regular file replaced by another regular file since the `lstat` (an atomic write by
    // someone else) is simply the newer version: confinement came from the parent handle and
    // `O_NOFOLLOW`, and `open_entry_file` refuses anything but a regular file.
    open_entry_file(directory, name, path)
}

/// Opens a directory entry that a walk saw as a regular file, without a separate `lstat`:
/// `O_NOFOLLOW | O_NONBLOCK` keeps a link or FIFO swapped in since from being followed or
/// blocking, and the `fstat` after the open refuses anything that is not a regular file.
pub(crate) fn open_entry_file(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(OpenFile, Stat), Error> {
    let fd = rustix::fs::openat(
        directory,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        Errno::LOOP | Errno::NOENT => Error::changed_during_call(path),
        errno => Error::io(path, io_error(errno)),
    })?;
    let stat = fstat(&fd, path)?;
    match stat.kind {
        Kind::File => Ok((OpenFile(File::from(fd)), stat)),
        Kind::Directory => Err(Error::not_a_file(path)),
        Kind::Symlink | Kind::Special => Err(Error::unsupported(path)),
    }
}

/// The fast path for reads when the registry holds a single mount, so that nothing can be
/// nested: one `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV` opens the
/// target beneath the root handle, refusing any link or mount crossing, and `O_NONBLOCK` keeps
/// a FIFO from blocking. `None` means "take the component walk": several mounts, no
/// `openat2`, or a path through a link (which the walk resolves within the mount).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn open_direct(
    registry: &RegistryInner,
    mount: usize,
    components: &[&str],
    path: &VirtualPath,
) -> Option<Result<(OpenFile, Stat), Error>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
    if registry.mounts.len() != 1
        || components.is_empty()
        || UNAVAILABLE.load(Ordering::Relaxed)
        || components.iter().any(|segment| segment.starts_with(TEMPORARY_PREFIX))
    {
        return None;
    }
    let root = registry.mounts[mount].storage.local()?;
    let mut relative = String::with_capacity(path.as_str().len());
    for (index, segment) in components.iter().enumerate() {
        if index > 0 {
            relative.push('/');
        }
        relative.push_str(segment);
    }
    let resolve = rustix::fs::ResolveFlags::BENEATH
        | rustix::fs::ResolveFlags::NO_SYMLINKS
        | rustix::fs::ResolveFlags::NO_MAGICLINKS
        | rustix::fs::ResolveFlags::NO_XDEV;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::openat2(&*root.handle(), relative.as_str(), flags, Mode::empty(), resolve) {
        Ok(fd) => Some(fstat(&fd, path).and_then(|stat| match stat.kind {
            Kind::File => Ok((OpenFile(File::from(fd)), stat)),
            Kind::Directory => Err(Error::not_a_file(path)),
            Kind::Symlink | Kind::Special => Err(Error::unsupported(path)),
        })),
        // The kernel has no `openat2`: never ask again.
        Err(Errno::NOSYS) => {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            None
        }
        // Refused for this call (a seccomp filter, an LSM): this call takes the walk, the next
        // one tries again.
        Err(Errno::NOENT) => Some(Err(Error::not_found(path))),
        Err(_) => None,
    }
}

/// Other systems always take the component walk.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn open_direct(
    _registry: &RegistryInner,
    _mount: usize,
    _components: &[&str],
    _path: &VirtualPath,
) -> Option<Result<(OpenFile, Stat), Error>> {
    None
}

/// Opens the resolved target as a directory (the mount root when `name` is `None`).
pub(crate) fn open_directory(resolved: &Resolved, path: &VirtualPath) -> Result<Arc<OwnedFd>, Error> {
    let Some(seen) = resolved.stat else {
        return Err(Error::not_found(path));
    };
    match &resolved.name {
        None => Ok(resolved.parent.clone()),
        Some(name) => {
            if seen.kind != Kind::Directory {
                return Err(if seen.kind == Kind::Special {
                    Error::unsupported(path)
                } else {
                    Error::not_a_directory(path)
                });
            }
            let (fd, stat) = open_subdirectory(&resolved.parent, name, path)?;
            if stat.identity() != seen.identity() {
                return Err(Error::changed_during_call(path));
            }
            Ok(Arc::new(fd))
        }
    }
}

/// Opens a child directory without following links.
pub(crate) fn open_subdirectory(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(OwnedFd, Stat), Error> {
    let fd = rustix::fs::openat(
        directory,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| match errno {
        Errno::LOOP | Errno::NOTDIR | Errno::NOENT => Error::changed_during_call(path),
        errno => Error::io(path, io_error(errno)),
    })?;
    let stat = fstat(&fd, path)?;
    Ok((fd, stat))
}

/// One directory entry.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) kind: Kind,
    pub(crate) inode: u64,
}

/// Reads a directory's entries (not sorted). Names that are not UTF-8 cannot be addressed by
/// a virtual path and are left out.
pub(crate) fn read_directory(directory: &OwnedFd, path: &VirtualPath) -> Result<Vec<Entry>, Error> {
    let mut reader = rustix::fs::Dir::read_from(directory).map_err(|errno| Error::io(path, io_error(errno)))?;
    let mut entries = Vec::new();
    while let Some(entry) = reader.read() {
        let entry = entry.map_err(|errno| Error::io(path, io_error(errno)))?;
        let raw: &CStr = entry.file_name();
        let bytes = raw.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(bytes) else {
            continue;
        };
        if name.starts_with(TEMPORARY_PREFIX) {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Directory,
            FileType::Symlink => Kind::Symlink,
            FileType::Unknown => match rustix::fs::statat(directory, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(raw) => Stat::from_raw(&raw).kind,
                Err(_) => continue,
            },
            _ => Kind::Special,
        };
        entries.push(Entry { name: name.to_owned(), kind, inode: entry.ino() });
    }
    Ok(entries)
}

/// How many directory handles one batch of work (a content search's batch of files) may hold
/// open: an eighth of the process's open-file limit, between 16 and 4,096, so that several
/// calls at once stay well inside it.
pub(crate) fn descriptor_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX);
        usize::try_from(limit / 8).unwrap_or(usize::MAX).clamp(16, 4096)
    })
}

/// Raises the process's soft open-file limit to its hard limit (at most 1,048,576), as servers
/// that walk large trees for several callers at once do. Returns the limit in force.
pub(crate) fn raise_open_file_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let current = getrlimit(Resource::Nofile);
    let wanted = current.maximum.unwrap_or(1 << 20).min(1 << 20);
    if current.current.is_some_and(|soft| soft < wanted)
        && setrlimit(Resource::Nofile, Rlimit { current: Some(wanted), maximum: current.maximum }).is_ok()
    {
        return wanted;
    }
    current.current.unwrap_or(u64::MAX)
}

/// `lstat` of a child.
pub(crate) fn stat_child(directory: &OwnedFd, name: &str) -> Option<Stat> {
    rustix::fs::statat(directory, name, AtFlags::SYMLINK_NOFOLLOW).ok().map(|raw| Stat::from_raw(&raw))
}

/// An exclusive advisory lock on a directory, held while a read-modify-write of one of its
/// entries runs, so that concurrent writers (threads or processes) never lose an update.
pub(crate) struct DirectoryLock {
    _fd: OwnedFd,
}

pub(crate) fn lock_directory(directory: &OwnedFd, path: &VirtualPath) -> Result<DirectoryLock, Error> {
    // A fresh open file description: `flock` does not exclude holders of the same one.
    let fd = rustix::fs::openat(directory, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|errno| Error::io(path, io_error(errno)))?;
    rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|errno| Error::io(path, io_error(errno)))?;
    Ok(DirectoryLock { _fd: fd })
}

fn temporary_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    format!("{TEMPORARY_PREFIX}{:016x}", hasher.finish())
}

/// How an atomic write treats an existing entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replace {
    /// Fail with `AlreadyExists` if the name exists (atomic create-if-absent).
    Never,
    /// Replace whatever is there.
    Always,
}

/// Writes `source` to `name` in `directory` atomically: a temporary file in the same directory,
/// `fsync`, then `rename` (or a no-replace rename for [`Replace::Never`]). The target is never
/// opened for writing, so a symbolic link or hard link at `name` is replaced, not written
/// through. On any failure the temporary file is removed and the previous content stays.
/// Only the permission bits of `mode` are used: setuid, setgid and sticky bits are never
/// carried onto a file an agent wrote.
pub(crate) fn write_atomic(
    directory: &OwnedFd,
    name: &str,
    source: &mut dyn Read,
    replace: Replace,
    mode: u32,
    sync: bool,
    path: &VirtualPath,
) -> Result<u64, Error> {
    let temporary = temporary_name();
    let fd = rustix::fs::openat(
        directory,
        temporary.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode & 0o777),
    )
    .map_err(|errno| Error::io(path, io_error(errno)))?;
    let mut file = File::from(fd);
    let written = (|| -> io::Result<u64> {
        let written = io::copy(source, &mut file)?;
        file.flush()?;
        if sync {
            file.sync_all()?;
        }
        Ok(written)
    })();
    drop(file);
    let written = match written {
        Ok(written) => written,
        Err(error) => {
            let _ = rustix::fs::unlinkat(directory, temporary.as_str(), AtFlags::empty());
            return Err(Error::io(path, error));
        }
    };
    let renamed = match replace {
        Replace::Always => rustix::fs::renameat(directory, temporary.as_str(), directory, name),
        Replace::Never => rename_no_replace(directory, &temporary, directory, name),
    };
    if let Err(errno) = renamed {
        let _ = rustix::fs::unlinkat(directory, temporary.as_str(), AtFlags::empty());
        return Err(match errno {
            Errno::EXIST => Error::already_exists(path),
            Errno::ISDIR => Error::not_a_file(path),
            errno => Error::io(path, io_error(errno)),
        });
    }
    if sync {
        let _ = rustix::fs::fsync(directory);
    }
    Ok(written)
}

/// `renameat2(RENAME_NOREPLACE)`, falling back to `linkat` + `unlinkat` where the file system
/// does not support it (both refuse an existing destination atomically).
fn rename_no_replace(from_dir: &OwnedFd, from: &str, to_dir: &OwnedFd, to: &str) -> rustix::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        match rustix::fs::renameat_with(from_dir, from, to_dir, to, rustix::fs::RenameFlags::NOREPLACE) {
            Err(Errno::INVAL | Errno::NOSYS) => {}
            other => return other,
        }
    }
    match rustix::fs::statat(from_dir, from, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(raw) if FileType::from_raw_mode(raw.st_mode) == FileType::Directory => {
            // Directories cannot be hard-linked: check, then rename (best effort).
            if rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Err(Errno::EXIST);
            }
            rustix::fs::renameat(from_dir, from, to_dir, to)
        }
        _ => {
            rustix::fs::linkat(from_dir, from, to_dir, to, AtFlags::empty())?;
            rustix::fs::unlinkat(from_dir, from, AtFlags::empty())
        }
    }
}

/// Renames within one backend; `replace` decides whether an existing destination may go.
pub(crate) fn rename(
    from_dir: &OwnedFd,
    from: &str,
    to_dir: &OwnedFd,
    to: &str,
    replace: Replace,
    path: &VirtualPath,
) -> Result<(), Error> {
    let result = match replace {
        Replace::Always => rustix::fs::renameat(from_dir, from, to_dir, to),
        Replace::Never => rename_no_replace(from_dir, from, to_dir, to),
    };
    result.map_err(|errno| match errno {
        Errno::EXIST | Errno::NOTEMPTY => Error::already_exists(path),
        Errno::ISDIR | Errno::NOTDIR => Error::invalid_argument(agent_text![
            "cannot move to ",
            code(path),
            ": a file and a directory cannot replace each other"
        ]),
        Errno::INVAL => Error::invalid_argument(agent_text!["cannot move a directory into itself (", code(path), ")"]),
        errno => Error::io(path, io_error(errno)),
    })?;
    let _ = rustix::fs::fsync(from_dir);
    let _ = rustix::fs::fsync(to_dir);
    Ok(())
}

/// Creates one directory.
pub(crate) fn make_directory(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<bool, Error> {
    match rustix::fs::mkdirat(directory, name, Mode::from_raw_mode(0o777)) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        Err(errno) => Err(Error::io(path, io_error(errno))),
    }
}

/// Removes a file or a symbolic link (never its target).
pub(crate) fn remove_file(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(), Error> {
    rustix::fs::unlinkat(directory, name, AtFlags::empty()).map_err(|errno| match errno {
        Errno::NOENT => Error::not_found(path),
        Errno::ISDIR => Error::not_a_file(path),
        errno => Error::io(path, io_error(errno)),
    })
}

/// Removes an empty directory.
pub(crate) fn remove_directory(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<(), Error> {
    rustix::fs::unlinkat(directory, name, AtFlags::REMOVEDIR).map_err(|errno| match errno {
        Errno::NOENT => Error::not_found(path),
        Errno::NOTEMPTY | Errno::EXIST => Error::not_empty(path),
        errno => Error::io(path, io_error(errno)),
    })
}

/// Removes a directory tree beneath handles, never following a link (links are unlinked).
/// Stops at a directory for which `holds_mount` is true (a nested mount's root or a directory
/// on the way to one); the operation checked the top before, so this is a second line.
pub(crate) fn remove_tree(
    directory: &OwnedFd,
    name: &str,
    path: &VirtualPath,
    holds_mount: &dyn Fn((u64, u64)) -> bool,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::too_large(Some(path), "the directory tree is too deep to delete"));
    }
    let (child, stat) = open_subdirectory(directory, name, path)?;
    if holds_mount(stat.identity()) {
        return Err(Error::pinned(path, "delete", None));
    }
    for entry in read_directory(&child, path)? {
        let entry_path = path.join_trusted(&entry.name);
        if entry.kind == Kind::Directory {
            remove_tree(&child, &entry.name, &entry_path, holds_mount, depth + 1)?;
        } else {
            remove_file(&child, &entry.name, &entry_path)?;
        }
    }
    drop(child);
    remove_directory(directory, name, path)
}

/// Opens (creating if needed) a file for appending, never through a link.
pub(crate) fn open_append(directory: &OwnedFd, name: &str, path: &VirtualPath) -> Result<OpenFile, Error> {
    let fd = rustix::fs::openat(
        directory,
        name,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o644),
    )
    .map_err(|errno| match errno {
        Errno::LOOP => Error::symlink(path),
        errno => Error::io(path, io_error(errno)),
    })?;
    let stat = fstat(&fd, path)?;
    if stat.kind != Kind::File {
        return Err(Error::unsupported(path));
    }
    Ok(OpenFile(File::from(fd)))
}

/// A version token: a content hash for files up to [`HASHED_VERSION_BYTES`], else a hash of the
/// identity, size and change times. A content hash already computed for this very state of the
/// file comes from `cache` (see [`VersionCache`]).
pub(crate) fn version_of_file(cache: &VersionCache, file: &mut OpenFile, stat: &Stat) -> io::Result<String> {
    use std::io::Seek;
    if stat.size > HASHED_VERSION_BYTES {
        return Ok(metadata_version(stat));
    }
    if let Some(token) = cache.get(stat) {
        return Ok(token);
    }
    // The clock is read before the state the hash is filed under, so a change during the read
    // can never hide under that state (see `VersionCache`).
    let started = std::time::SystemTime::now();
    let stat = rustix::fs::fstat(&file.0).map(|raw| Stat::from_raw(&raw)).map_err(io_error)?;
    file.seek(io::SeekFrom::Start(0))?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    // A buffer no larger than the file needs (zeroing 64 KiB for a small file costs more than
    // hashing it).
    let mut buffer =
        vec![0u8; usize::try_from(stat.size.saturating_add(1)).unwrap_or(usize::MAX).clamp(512, 64 * 1024)];
    loop {
        let count = file.read(&mut buffer)?;
        if count == 0 {
            break;
        }
        hasher.update(&buffer[..count]);
    }
    file.seek(io::SeekFrom::Start(0))?;
    let token = format!("{:016x}", hasher.digest());
    if keeps_change_times(file) {
        cache.insert(&stat, started, &token);
    }
    Ok(token)
}

/// True when the file lies on a file system known to set the change time itself on every
/// change (the kernel's own local file systems). FUSE file systems (sshfs reports the
/// modification time as the change time), network file systems and pseudo file systems are
/// not trusted: their files are hashed on every call.
fn keeps_change_times(file: &OpenFile) -> bool {
    const TRUSTED: [u32; 9] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0x0102_1994, // tmpfs
        0xF2F5_2010, // f2fs
        0x2FC1_2FC1, // zfs
        0xCA45_1A4E, // bcachefs
        0x8584_58F6, // ramfs
        0x794C_7630, // overlayfs (changes land on its upper, local file system)
    ];
    rustix::fs::fstatfs(&file.0).is_ok_and(|statfs| {
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "magic numbers are 32-bit")]
        let magic = statfs.f_type as u32;
        TRUSTED.contains(&magic)
    })
}

fn metadata_version(stat: &Stat) -> String {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for value in [
        stat.device,
        stat.inode,
        stat.size,
        stat.modified.0.cast_unsigned(),
        u64::from(stat.modified.1),
        stat.changed.0.cast_unsigned(),
        u64::from(stat.changed.1),
    ] {
        hasher.update(&value.to_le_bytes());
    }
    format!("m{:016x}", hasher.digest())
}

/// Content-hash versions already computed, filed under the state of the file they were
/// computed for: (device, inode) and (size, modification time, change time).
///
/// Why a hit is safe. The kernel sets a file's change time (`ctime`) to the current time on
/// every change of content or metadata, and no call sets it to anything else. A hash is filed
/// only when the file's `ctime` lies at least [`SETTLED`] before the clock reading taken ahead
/// of the read that produced the hash. Any later change, including one during that read, sets
/// `ctime` to a time after that reading (less at most one clock tick and one timestamp
/// granule, which [`SETTLED`] covers), so it can never show the filed `ctime` again; a new file
/// that reuses the inode number is created after the reading too. So a file showing exactly
/// the filed state still holds the hashed content, as git's index trusts unchanged `stat`
/// data for files older than the index. What this trusts: a clock that does not jump back
/// by more than [`SETTLED`], and filesystems that keep `ctime` (network filesystems with a
/// skewed server clock weaken it, as they do for git, and so do writes through a shared memory
/// map, whose times the kernel updates late), so only files on the kernel's local file
/// systems are filed at all (see `keeps_change_times`).
///
/// One gap remains in that argument: a `write` stamps the times when it starts and then
/// copies its data, so a single write stalled for seconds (throttled write-back, a slow source
/// buffer) could be hashed half done under a state that no longer changes when the write
/// ends. A hash is therefore served only once it is confirmed: the same state hashed to the
/// same token again, at least [`SETTLED`] after the first time. A stalled write would have to
/// stay stalled at the same byte across both. Files changed within [`SETTLED`] are hashed
/// every time. At most [`VERSION_CACHE_ENTRIES`] states are kept; a full cache starts over.
#[derive(Debug, Default)]
pub(crate) struct VersionCache {
    entries: std::sync::Mutex<HashMap<(u64, u64), CachedVersion>>,
}

#[derive(Debug)]
struct CachedVersion {
    size: u64,
    modified: (i64, u32),
    changed: (i64, u32),
    token: String,
    /// When the first hash of this state started.
    first_hashed: std::time::SystemTime,
    /// Hashed again to the same token at least [`SETTLED`] later: served from now on.
    confirmed: bool,
}

impl CachedVersion {
    fn same_state(&self, stat: &Stat) -> bool {
        self.size == stat.size && self.modified == stat.modified && self.changed == stat.changed
    }
}

/// How long before the hash's clock reading a file's last change must lie for the hash to be
/// filed: more than a clock tick plus the coarsest timestamp granule in use (FAT's 2 s).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(3);

/// The most file states a [`VersionCache`] keeps (about 100 bytes each).
pub(crate) const VERSION_CACHE_ENTRIES: usize = 8192;

impl VersionCache {
    fn get(&self, stat: &Stat) -> Option<String> {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let cached = entries.get(&stat.identity())?;
        (cached.confirmed && cached.same_state(stat)).then(|| cached.token.clone())
    }

    fn insert(&self, stat: &Stat, started: std::time::SystemTime, token: &str) {
        let Some(settled) = started.checked_sub(SETTLED) else { return };
        let Ok(settled) = settled.duration_since(std::time::UNIX_EPOCH) else { return };
        let changed = i128::from(stat.changed.0) * 1_000_000_000 + i128::from(stat.changed.1);
        if changed >= i128::try_from(settled.as_nanos()).unwrap_or(i128::MAX) {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(cached) = entries.get_mut(&stat.identity())
            && cached.same_state(stat)
            && cached.token == token
        {
            let apart = started.duration_since(cached.first_hashed).is_ok_and(|apart| apart >= SETTLED);
            cached.confirmed |= apart;
            return;
        }
        if entries.len() >= VERSION_CACHE_ENTRIES {
            entries.clear();
        }
        let cached = CachedVersion {
            size: stat.size,
            modified: stat.modified,
            changed: stat.changed,
            token: token.to_owned(),
            first_hashed: started,
            confirmed: false,
        };
        entries.insert(stat.identity(), cached);
    }
}

/// Files up to this size get a content-hash version; larger ones a metadata version.
pub(crate) const HASHED_VERSION_BYTES: u64 = 32 * 1024 * 1024;

/// The version of bytes about to be written (same token as [`version_of_file`] gives).
pub(crate) fn version_of_bytes(bytes: &[u8]) -> Option<String> {
    (bytes.len() as u64 <= HASHED_VERSION_BYTES).then(|| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Yields some bytes, then fails: a write interrupted midway.
    struct FailingReader {
        sent: bool,
    }

    impl Read for FailingReader {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            if self.sent {
                return Err(io::Error::other("the source failed"));
            }
            self.sent = true;
            let chunk = b"half of the new content";
            buffer[..chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        }
    }

    #[test]
    fn a_write_that_fails_midway_keeps_the_old_content() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file.txt"), "old content").unwrap();
        let handle = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let path = VirtualPath::new("/x/file.txt").unwrap();
        let error =
            write_atomic(&handle, "file.txt", &mut FailingReader { sent: false }, Replace::Always, 0o644, true, &path)
                .unwrap_err();
        assert_eq!(error.to_string(), "`/x/file.txt`: the host reported: other error");
        assert_eq!(std::fs::read_to_string(dir.path().join("file.txt")).unwrap(), "old content");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|entry| entry.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("file.txt")], "the temporary file is removed");
    }

    #[test]
    fn create_if_absent_refuses_an_existing_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file.txt"), "old").unwrap();
        let handle = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let path = VirtualPath::new("/x/file.txt").unwrap();
        let error =
            write_atomic(&handle, "file.txt", &mut &b"new"[..], Replace::Never, 0o644, true, &path).unwrap_err();
        assert_eq!(error.kind(), crate::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(dir.path().join("file.txt")).unwrap(), "old");
    }

    fn open_with_stat(path: &std::path::Path) -> (OpenFile, Stat) {
        let file = File::open(path).unwrap();
        let stat = Stat::from_raw(&rustix::fs::fstat(&file).unwrap());
        (OpenFile(file), stat)
    }

    /// A file changed just now is hashed every time: its hash is not filed.
    #[test]
    fn a_recently_changed_file_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fresh.txt");
        std::fs::write(&path, "fresh\n").unwrap();
        let cache = VersionCache::default();
        let (mut file, stat) = open_with_stat(&path);
        let token = version_of_file(&cache, &mut file, &stat).unwrap();
        assert_eq!(Some(token), version_of_bytes(b"fresh\n"));
        assert_eq!(cache.get(&stat), None);
    }

    /// A settled state is served from the cache until size, modification or change time
    /// differ; then the file is hashed again.
    #[test]
    fn a_settled_state_is_served_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.txt");
        std::fs::write(&path, "old\n").unwrap();
        let cache = VersionCache::default();
        let (mut file, stat) = open_with_stat(&path);
        // As if the hash had been taken ten seconds from now: the change lies well before it.
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
        cache.insert(&stat, later, "filed");
        // A first hash is a candidate only; the same token again 3 s on confirms it.
        assert_eq!(cache.get(&stat), None);
        cache.insert(&stat, later + std::time::Duration::from_secs(1), "filed");
        assert_eq!(cache.get(&stat), None, "confirmed too soon");
        cache.insert(&stat, later + SETTLED, "filed");
        assert_eq!(version_of_file(&cache, &mut file, &stat).unwrap(), "filed");
        for changed in [
            Stat { size: stat.size + 1, ..stat },
            Stat { modified: (stat.modified.0 + 1, stat.modified.1), ..stat },
            Stat { changed: (stat.changed.0, stat.changed.1 ^ 1), ..stat },
            Stat { inode: stat.inode + 1, ..stat },
        ] {
            assert_eq!(cache.get(&changed), None, "{changed:?}");
        }
        std::fs::write(&path, "new content\n").unwrap();
        let (mut file, stat) = open_with_stat(&path);
        assert_eq!(Some(version_of_file(&cache, &mut file, &stat).unwrap()), version_of_bytes(b"new content\n"));
    }

    /// A write stalled midway: the same state hashed to another token later (the write went
    /// on without touching the times) is never served, and the newer hash starts over.
    #[test]
    fn a_state_that_hashes_differently_is_not_confirmed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stalled.txt");
        std::fs::write(&path, "half").unwrap();
        let (_, stat) = open_with_stat(&path);
        let cache = VersionCache::default();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
        cache.insert(&stat, later, "half written");
        cache.insert(&stat, later + SETTLED, "whole");
        assert_eq!(cache.get(&stat), None);
        cache.insert(&stat, later + SETTLED * 2, "whole");
        assert_eq!(cache.get(&stat).as_deref(), Some("whole"));
    }

    /// Only file systems that keep change times themselves are trusted.
    #[test]
    fn local_file_systems_keep_change_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let (file, _) = open_with_stat(&path);
        // The temporary directory of the machines this runs on is ext4 or tmpfs.
        assert!(keeps_change_times(&file));
        let (proc_file, _) = open_with_stat(std::path::Path::new("/proc/self/status"));
        assert!(!keeps_change_times(&proc_file), "procfs changes content without change times");
    }

    #[test]
    fn the_cache_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "x").unwrap();
        let (_, stat) = open_with_stat(&path);
        let cache = VersionCache::default();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(10);
        for inode in 0..=VERSION_CACHE_ENTRIES as u64 {
            cache.insert(&Stat { inode, ..stat }, later, "t");
        }
        let kept = cache.entries.lock().unwrap().len();
        assert_eq!(kept, 1, "a full cache starts over");
    }
}
