//! Walking a local tree with handles (`docs/design.md`, resolution rule 9): every subdirectory is
//! opened beneath its parent with `O_NOFOLLOW`, exactly as resolution does, so a directory
//! swapped for a link during the walk ends that branch instead of leading outside. Links are
//! reported, never followed; another mount's root that the caller may not see is left out, as
//! if absent.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::files::{self, DirEntry};
use super::{Node, Seen, identity};
use crate::error::Error;
use crate::path::VirtualPath;
use crate::storage::{Flow, Kind, MountTable, Nesting, Visit, WalkFrom, Walked};

/// True when a directory entry is another mount's root that the caller may not see (an
/// internal directory lying physically inside a visible mount). The inode alone settles most
/// entries without a `stat`.
pub(super) fn hidden_entry(table: &dyn MountTable, mount: usize, directory: &OwnedFd, entry: &DirEntry) -> bool {
    if entry.kind != Kind::Directory || !table.any_root_inode(entry.inode) {
        return false;
    }
    match files::stat_child(directory, &entry.name) {
        Some(stat) => table.nesting(mount, identity(&stat)) == Nesting::Hidden,
        // Vanished: nothing to show either way.
        None => true,
    }
}

/// True unless the directory `name` of `directory` is empty: one past the walk's depth bound
/// is counted as left out only when there is something in it. One that cannot be opened or
/// read is counted (what it holds is not known).
fn holds_anything(directory: &OwnedFd, name: &str, path: &VirtualPath) -> bool {
    let Ok((handle, _)) = files::open_subdirectory(directory, name, path) else { return true };
    let Ok(mut reader) = rustix::fs::Dir::read_from(&handle) else { return true };
    while let Some(entry) = reader.read() {
        let Ok(entry) = entry else { return true };
        if !matches!(entry.file_name().to_bytes(), b"." | b"..") {
            return true;
        }
    }
    false
}

/// Walks below `directory` (the start of the walk, at depth 0).
pub(super) fn walk(
    from: &WalkFrom<'_>,
    directory: &Arc<OwnedFd>,
    visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
) -> Result<Walked, Error> {
    let mut walked = Walked { completed: true, unreadable: 0, deeper: 0 };
    walked.completed = level(from, directory, from.path, "", 0, visit, &mut walked)?;
    Ok(walked)
}

/// One directory of the walk, depth-first in name order; false when the visitor stopped it.
/// The call's clock is checked at every entry. A subdirectory that cannot be opened or read
/// for another reason than having vanished is skipped and counted (`counts.unreadable`), and
/// so is one past the depth bound (`counts.deeper`).
fn level(
    from: &WalkFrom<'_>,
    directory: &Arc<OwnedFd>,
    path: &VirtualPath,
    relative: &str,
    depth: usize,
    visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    counts: &mut Walked,
) -> Result<bool, Error> {
    let mut entries = files::read_directory(directory, path)?;
    entries.sort_unstable_by(|left, right| left.name.cmp(&right.name));
    for entry in entries {
        from.deadline.check()?;
        if hidden_entry(from.table, from.mount, directory, &entry) {
            continue;
        }
        let child = path.join_trusted(&entry.name);
        let child_relative =
            if relative.is_empty() { entry.name.clone() } else { format!("{relative}/{}", entry.name) };
        let node = crate::storage::Node::Local(Node {
            parent: directory.clone(),
            name: Some(entry.name.clone()),
            seen: Seen::Listed(entry.kind),
        });
        let flow = visit(&Visit {
            path: &child,
            relative: &child_relative,
            name: &entry.name,
            kind: entry.kind,
            depth: depth + 1,
            node: &node,
        });
        match flow {
            Flow::Stop => return Ok(false),
            Flow::Continue if entry.kind == Kind::Directory && depth + 1 < from.max_depth => {
                // A directory that vanished or turned into a link mid-walk ends its branch; one
                // that cannot be opened or read is counted as well.
                let handle = match files::open_subdirectory(directory, &entry.name, &child) {
                    Ok((handle, _)) => Arc::new(handle),
                    Err(error) => {
                        counts.unreadable += usize::from(error.kind() != crate::ErrorKind::Changed);
                        continue;
                    }
                };
                match level(from, &handle, &child, &child_relative, depth + 1, visit, counts) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(error) if error.kind() == crate::ErrorKind::Io => counts.unreadable += 1,
                    Err(error) => return Err(error),
                }
            }
            Flow::Continue if entry.kind == Kind::Directory => {
                counts.deeper += usize::from(holds_anything(directory, &entry.name, &child));
            }
            Flow::SkipDirectory | Flow::Continue => {}
        }
    }
    Ok(true)
}
