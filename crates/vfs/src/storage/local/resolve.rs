//! Resolution beneath a mount's root handle (`docs/design.md`, resolution rules 6 to 8).
//!
//! A path is opened one component at a time beneath the handle of the directory before it,
//! with `O_NOFOLLOW`. A symbolic link is read with `readlinkat` and resolved lexically inside
//! the mount (an absolute target only when it names the mount's own physical directory); a
//! target that climbs out is refused. Each directory's identity is asked of the mount table: a
//! directory that is another mount's root switches to that mount (its rights and visibility
//! hold from there on), and one the caller may not see is a name that does not exist.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::files::open_directory_at;
use super::{LocalRoot, Node, OpenFile, Seen, TEMPORARY_PREFIX, fstat, io_error, stat_of};
use crate::error::Error;
use crate::path::VirtualPath;
use crate::storage::{Backend, Kind, Located, MountTable, Nesting, Resolve, Stat};
#[cfg(feature = "s3")]
use crate::text::{agent_text, code};

/// Most symbolic links one resolution follows before calling it a loop.
const MAX_LINKS: usize = 40;

/// Resolves `components` (relative to mount `start`) beneath the mount's root handle.
pub(crate) fn resolve(
    table: &dyn MountTable,
    start: usize,
    components: &[&str],
    options: &Resolve<'_>,
    path: &VirtualPath,
) -> Result<Located, Error> {
    let mut walker = Walker {
        table,
        options,
        path,
        mount: start,
        pending: components.iter().map(|&segment| segment.to_owned()).collect(),
        links: 0,
        rel: Vec::new(),
        current: root_of(table, start, path)?,
    };
    loop {
        match walker.step()? {
            Step::Next => {}
            Step::Restart => {
                walker.rel.clear();
                walker.current = root_of(table, walker.mount, path)?;
            }
            Step::Done(located) => return Ok(located),
        }
    }
}

/// The root handle of a local mount.
#[cfg_attr(not(feature = "s3"), expect(clippy::unnecessary_wraps, reason = "object stores are not local"))]
fn root_of(table: &dyn MountTable, mount: usize, path: &VirtualPath) -> Result<Arc<OwnedFd>, Error> {
    #[cfg(not(feature = "s3"))]
    let _ = path;
    match table.store(mount) {
        Backend::Local(root) => Ok(root.handle()),
        #[cfg(feature = "s3")]
        Backend::Object(_) => Err(Error::invalid_argument(agent_text![
            code(path),
            " is in object storage, where this operation is not available"
        ])),
    }
}

/// One resolution in progress: where it is, and what is left to resolve.
struct Walker<'a> {
    table: &'a dyn MountTable,
    options: &'a Resolve<'a>,
    path: &'a VirtualPath,
    /// The mount being walked (switches when a nested mount's root is entered).
    mount: usize,
    /// Components still to resolve, relative to `current`.
    pending: VecDeque<String>,
    links: usize,
    /// The canonical path of `current` in `mount`.
    rel: Vec<String>,
    current: Arc<OwnedFd>,
}

enum Step {
    /// One component resolved; go on.
    Next,
    /// A link redirected the walk: start again from the mount's root with `pending`.
    Restart,
    Done(Located),
}

impl Walker<'_> {
    fn step(&mut self) -> Result<Step, Error> {
        let Some(name) = self.pending.pop_front() else {
            let stat = fstat(&self.current, self.path)?;
            return Ok(Step::Done(self.located(None, Seen::Stat(stat))));
        };
        if name.starts_with(TEMPORARY_PREFIX) {
            return Err(Error::not_found(self.path));
        }
        if self.pending.is_empty() { self.last(name) } else { self.directory(name) }
    }

    fn located(&mut self, name: Option<String>, seen: Seen) -> Located {
        let rel = std::mem::take(&mut self.rel);
        Located {
            mount: self.mount,
            rel,
            node: crate::storage::Node::Local(Node { parent: self.current.clone(), name, seen }),
        }
    }

    /// The place of a name in the current directory, pushing it onto the canonical path.
    fn place(&mut self, name: String, seen: Seen) -> Step {
        self.rel.push(name.clone());
        Step::Done(self.located(Some(name), seen))
    }

    /// The last component: `lstat` it, follow a link if asked, and switch to a nested mount
    /// whose root it is.
    fn last(&mut self, name: String) -> Result<Step, Error> {
        let stat = match rustix::fs::statat(&*self.current, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(raw) => stat_of(&raw),
            Err(Errno::NOENT) => return Ok(self.place(name, Seen::Missing)),
            Err(Errno::NAMETOOLONG) => return Err(Error::not_found(self.path)),
            Err(errno) => return Err(Error::io(self.path, io_error(errno))),
        };
        match stat.kind {
            Kind::Symlink if self.options.follow_final => {
                let target = self.read_link(&name)?;
                self.follow(&target)?;
                Ok(Step::Restart)
            }
            Kind::Directory => match self.nesting(&stat) {
                // Another mount's root that this caller may not see is a name that does not
                // exist. The launch allows that only where this mount grants no write, so
                // nothing can try to create it.
                Nesting::Hidden => Ok(self.place(name, Seen::Missing)),
                Nesting::Enters(inner) => {
                    self.mount = inner;
                    self.rel.clear();
                    self.current = root_of(self.table, inner, self.path)?;
                    Ok(Step::Done(self.located(None, Seen::Stat(stat))))
                }
                Nesting::Same => Ok(self.place(name, Seen::Stat(stat))),
            },
            _ => Ok(self.place(name, Seen::Stat(stat))),
        }
    }

    /// A directory on the way: open it beneath the current one, follow it if it is a link,
    /// create it if missing and asked to, switch mounts at a nested mount's root.
    fn directory(&mut self, name: String) -> Result<Step, Error> {
        match open_directory_at(&self.current, &name) {
            Ok(directory) => self.enter(name, directory),
            Err(Errno::NOENT) => self.create(name),
            Err(Errno::LOOP | Errno::NOTDIR | Errno::MLINK) => {
                match rustix::fs::readlinkat(&*self.current, name.as_str(), Vec::new()) {
                    Ok(target) => {
                        self.follow(target.as_bytes())?;
                        Ok(Step::Restart)
                    }
                    Err(Errno::INVAL) => Err(Error::not_a_directory(self.path)),
                    Err(Errno::NOENT) => Err(Error::changed_during_call(self.path)),
                    Err(errno) => Err(Error::io(self.path, io_error(errno))),
                }
            }
            Err(Errno::NAMETOOLONG) => Err(Error::not_found(self.path)),
            Err(errno) => Err(Error::io(self.path, io_error(errno))),
        }
    }

    fn enter(&mut self, name: String, directory: OwnedFd) -> Result<Step, Error> {
        // With a single mount nothing can be nested: skip the identity check.
        let nesting = if self.table.single() { Nesting::Same } else { self.nesting(&fstat(&directory, self.path)?) };
        match nesting {
            Nesting::Hidden => {
                // As a missing directory: refused where creating it would be (the launch
                // allows such a root only where this mount grants no write), else "does not
                // exist".
                if let Some(gate) = self.options.create_parents {
                    let mut wanted = self.rel.clone();
                    wanted.push(name);
                    gate(self.mount, &wanted)?;
                }
                return Err(Error::not_found(self.path));
            }
            Nesting::Enters(inner) => {
                self.mount = inner;
                self.rel.clear();
            }
            Nesting::Same => {
                self.rel.push(name);
                // After a link the canonical path is no longer the one judged before
                // resolution: a hidden directory reached through one is missing before its
                // content could answer anything ("not a directory", "does not exist").
                if self.links > 0 && self.table.hides(self.mount, &self.rel) {
                    if let Some(gate) = self.options.create_parents {
                        gate(self.mount, &self.rel)?;
                    }
                    return Err(Error::not_found(self.path));
                }
            }
        }
        self.current = Arc::new(directory);
        Ok(Step::Next)
    }

    fn create(&mut self, name: String) -> Result<Step, Error> {
        let Some(gate) = self.options.create_parents else {
            return Err(Error::not_found(self.path));
        };
        let mut wanted = self.rel.clone();
        wanted.push(name.clone());
        // Judged and made under its directory's lock, which a write beside it takes too: the
        // gate's look at the names beside it (no `objects` made beside a `HEAD` being written,
        // the git look-alike guard) and the making are one step.
        let _lock = super::files::lock_directory(&self.current, self.path)?;
        gate(self.mount, &wanted)?;
        match rustix::fs::mkdirat(&*self.current, name.as_str(), Mode::from_raw_mode(0o777)) {
            Ok(()) => {
                super::files::give_directory_owner(&self.current, &name);
                if let Some(made) = self.options.made {
                    made(self.mount, &wanted);
                }
            }
            Err(Errno::EXIST) => {}
            Err(errno) => return Err(Error::io(self.path, io_error(errno))),
        }
        self.pending.push_front(name);
        Ok(Step::Next)
    }

    fn nesting(&self, stat: &Stat) -> Nesting {
        match stat.identity {
            Some(identity) => match self.table.nesting(self.mount, identity) {
                Nesting::Enters(inner) if inner == self.mount => Nesting::Same,
                other => other,
            },
            None => Nesting::Same,
        }
    }

    fn read_link(&self, name: &str) -> Result<Vec<u8>, Error> {
        match rustix::fs::readlinkat(&*self.current, name, Vec::new()) {
            Ok(target) => Ok(target.into_bytes()),
            Err(Errno::INVAL | Errno::NOENT) => Err(Error::changed_during_call(self.path)),
            Err(errno) => Err(Error::io(self.path, io_error(errno))),
        }
    }

    /// Puts a link's target in front of what is left to resolve, lexically within the mount
    /// (`rel` is the directory holding the link). Absolute targets are accepted only when they
    /// name a place under the mount's own physical root (in any spelling it knows); anything
    /// that climbs out is an escape.
    fn follow(&mut self, target: &[u8]) -> Result<(), Error> {
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(Error::symlink_loop(self.path));
        }
        let Ok(target) = std::str::from_utf8(target) else {
            return Err(Error::escape(self.path));
        };
        let (mut output, remainder) = if target.starts_with('/') {
            let spellings = self.table.store(self.mount).spellings();
            let Some(rest) =
                spellings.iter().find_map(|spelling| match target.strip_prefix(spelling.trim_end_matches('/')) {
                    Some("") => Some(""),
                    Some(rest) if rest.starts_with('/') => Some(rest),
                    _ => None,
                })
            else {
                return Err(Error::escape(self.path));
            };
            (Vec::new(), rest)
        } else {
            (std::mem::take(&mut self.rel), target)
        };
        for segment in remainder.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    if output.pop().is_none() {
                        return Err(Error::escape(self.path));
                    }
                }
                name => output.push(name.to_owned()),
            }
        }
        output.extend(self.pending.drain(..));
        self.pending = output.into();
        Ok(())
    }
}

/// The fast path for reads when the registry holds a single mount, so that nothing can be
/// nested: one `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV` opens the
/// target beneath the root handle, refusing any link or mount crossing, and `O_NONBLOCK` keeps
/// a FIFO from blocking. `None` means "take the component walk": several mounts, no
/// `openat2`, or a path through a link (which the walk resolves within the mount).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn open_direct(
    root: &LocalRoot,
    table: &dyn MountTable,
    components: &[&str],
    path: &VirtualPath,
) -> Option<Result<(OpenFile, Stat), Error>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
    if !table.single()
        || components.is_empty()
        || UNAVAILABLE.load(Ordering::Relaxed)
        || components.iter().any(|segment| segment.starts_with(TEMPORARY_PREFIX))
    {
        return None;
    }
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
            Kind::File => Ok((OpenFile(std::fs::File::from(fd)), stat)),
            Kind::Directory => Err(Error::not_a_file(path)),
            Kind::Symlink | Kind::Special => Err(Error::unsupported(path)),
        })),
        // The kernel has no `openat2`: never ask again.
        Err(Errno::NOSYS) => {
            UNAVAILABLE.store(true, Ordering::Relaxed);
            None
        }
        Err(Errno::NOENT) => Some(Err(Error::not_found(path))),
        // Refused for this call (a seccomp filter, an LSM), or a link or mount on the way:
        // this call takes the walk, the next one tries again.
        Err(_) => None,
    }
}

/// Other systems always take the component walk.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn open_direct(
    _root: &LocalRoot,
    _table: &dyn MountTable,
    _components: &[&str],
    _path: &VirtualPath,
) -> Option<Result<(OpenFile, Stat), Error>> {
    None
}
