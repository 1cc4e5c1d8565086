//! The inode table: synthetic numbers for virtual paths.
//!
//! An inode holds a virtual path, never a descriptor or a physical location: every operation
//! on it asks the gate again, so a directory someone moved out of its mount is not reachable
//! through a number the kernel kept. Numbers are never reused while the process runs (the
//! kernel may hold one after its path is gone), and a rename through the view rewrites the
//! paths of the entry and of everything below it.

use std::collections::HashMap;

/// The root's number, fixed by the protocol.
pub(crate) const ROOT: u64 = 1;

#[derive(Debug)]
struct Node {
    /// The virtual path; `None` once the entry was removed or replaced through the view.
    path: Option<String>,
    /// How many lookups the kernel holds.
    lookups: u64,
}

/// Inode numbers and the virtual paths they stand for.
#[derive(Debug)]
pub(crate) struct Inodes {
    nodes: HashMap<u64, Node>,
    by_path: HashMap<String, u64>,
    next: u64,
}

impl Default for Inodes {
    fn default() -> Self {
        Inodes::rooted("/")
    }
}

impl Inodes {
    /// A table whose root is the virtual path `root` (`/` for the agent's whole tree, a mount's
    /// root for a view of one mount).
    pub(crate) fn rooted(root: &str) -> Self {
        let mut inodes = Inodes { nodes: HashMap::new(), by_path: HashMap::new(), next: ROOT + 1 };
        inodes.nodes.insert(ROOT, Node { path: Some(root.to_owned()), lookups: 1 });
        inodes.by_path.insert(root.to_owned(), ROOT);
        inodes
    }

    /// The virtual path of `ino`, if it still has one.
    pub(crate) fn path(&self, ino: u64) -> Option<String> {
        self.nodes.get(&ino).and_then(|node| node.path.clone())
    }

    /// The number of `path`, if it has one.
    pub(crate) fn find(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// The number of `path`, made if it has none; `lookup` counts one kernel lookup on it
    /// (a `lookup`, `create` or `mkdir` reply), which a `forget` gives back.
    pub(crate) fn number(&mut self, path: &str, lookup: bool) -> u64 {
        let ino = if let Some(&ino) = self.by_path.get(path) {
            ino
        } else {
            let ino = self.next;
            self.next += 1;
            self.nodes.insert(ino, Node { path: Some(path.to_owned()), lookups: 0 });
            self.by_path.insert(path.to_owned(), ino);
            ino
        };
        if lookup && let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups += 1;
        }
        ino
    }

    /// The kernel gave back `count` lookups of `ino`; with none left, the number is dropped.
    pub(crate) fn forget(&mut self, ino: u64, count: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.nodes.get_mut(&ino) else { return };
        node.lookups = node.lookups.saturating_sub(count);
        if node.lookups == 0 {
            let node = self.nodes.remove(&ino);
            if let Some(path) = node.and_then(|node| node.path)
                && self.by_path.get(&path) == Some(&ino)
            {
                self.by_path.remove(&path);
            }
        }
    }

    /// The entry at `path` is gone (removed, or replaced by a rename): its number, and the
    /// numbers of everything below it, reach nothing from now on.
    pub(crate) fn detach(&mut self, path: &str) {
        for ino in self.under(path) {
            if let Some(node) = self.nodes.get_mut(&ino)
                && let Some(old) = node.path.take()
            {
                self.by_path.remove(&old);
            }
        }
    }

    /// The entry at `from` is now at `to`: so is everything below it. What was at `to` is
    /// detached first.
    pub(crate) fn renamed(&mut self, from: &str, to: &str) {
        self.detach(to);
        for ino in self.under(from) {
            let Some(node) = self.nodes.get_mut(&ino) else { continue };
            let Some(old) = node.path.take() else { continue };
            let new = format!("{to}{}", &old[from.len()..]);
            self.by_path.remove(&old);
            self.by_path.insert(new.clone(), ino);
            node.path = Some(new);
        }
    }

    /// The numbers of `path` and of every path below it.
    fn under(&self, path: &str) -> Vec<u64> {
        self.by_path
            .iter()
            .filter(|(candidate, _)| {
                candidate.as_str() == path
                    || (candidate.starts_with(path) && candidate.as_bytes().get(path.len()) == Some(&b'/'))
            })
            .map(|(_, &ino)| ino)
            .collect()
    }

    /// How many numbers are held (for tests and bounds).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::{Inodes, ROOT};

    #[test]
    fn a_path_keeps_its_number_and_a_new_path_gets_a_new_one() {
        let mut inodes = Inodes::default();
        let a = inodes.number("/w/a", true);
        assert_eq!(inodes.number("/w/a", true), a);
        let b = inodes.number("/w/b", true);
        assert_ne!(a, b);
        assert_ne!(a, ROOT);
        assert_eq!(inodes.path(ROOT).as_deref(), Some("/"));
        assert_eq!(inodes.path(a).as_deref(), Some("/w/a"));
    }

    #[test]
    fn a_number_goes_when_its_last_lookup_is_forgotten_and_is_never_reused() {
        let mut inodes = Inodes::default();
        let a = inodes.number("/w/a", true);
        inodes.number("/w/a", true);
        inodes.forget(a, 1);
        assert_eq!(inodes.path(a).as_deref(), Some("/w/a"));
        inodes.forget(a, 1);
        assert_eq!(inodes.path(a), None);
        let again = inodes.number("/w/a", true);
        assert_ne!(again, a);
        inodes.forget(ROOT, 10);
        assert_eq!(inodes.path(ROOT).as_deref(), Some("/"));
    }

    #[test]
    fn a_rename_moves_the_entry_and_everything_below_it_and_detaches_the_target() {
        let mut inodes = Inodes::default();
        let dir = inodes.number("/w/d", true);
        let child = inodes.number("/w/d/x.txt", true);
        let sibling = inodes.number("/w/dx", true);
        let target = inodes.number("/w/e", true);
        inodes.renamed("/w/d", "/w/e");
        assert_eq!(inodes.path(dir).as_deref(), Some("/w/e"));
        assert_eq!(inodes.path(child).as_deref(), Some("/w/e/x.txt"));
        assert_eq!(inodes.path(sibling).as_deref(), Some("/w/dx"));
        assert_eq!(inodes.path(target), None);
        assert_eq!(inodes.number("/w/e/x.txt", false), child);
        assert_eq!(inodes.len(), 5);
    }

    #[test]
    fn a_detached_entry_reaches_nothing_and_its_path_gets_a_fresh_number() {
        let mut inodes = Inodes::default();
        let file = inodes.number("/w/a", true);
        inodes.detach("/w/a");
        assert_eq!(inodes.path(file), None);
        assert_ne!(inodes.number("/w/a", true), file);
    }
}
