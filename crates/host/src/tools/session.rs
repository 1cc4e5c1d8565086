//! Read before edit: what one session has seen.
//!
//! Coding agents taught their users one rule: a file is read before it is changed, so an agent
//! never replaces what it has not seen. A session (a stdio server process, or one MCP session
//! of the HTTP daemon) remembers, per canonical virtual path, the version of each file it read
//! whole or wrote itself. `edit_file`, `write_file` with `overwrite`, `move_file` with
//! `overwrite` and `delete_file` then pass the core a precondition made of it
//! ([`Seen::precondition`]): the file at the version the session saw, or nothing where it saw
//! none. The check itself is the store's, under the directory lock (or a conditional put), so
//! a change between the agent's read and its edit cannot slip through; the core's refusal of
//! that precondition ([`vfs::Error::unmet`]) is what the session words as "read it first".

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use vfs::VirtualPath;

/// The most files one session remembers. A daemon keeps a modern-protocol principal's memory
/// for as long as it runs, and a session may read every file of a large tree: past this, or
/// past [`MAX_SEEN_BYTES`], the quarter seen longest ago is forgotten at once (a forgotten file
/// is read again before it is changed, as one never read).
pub(super) const MAX_SEEN: usize = 20_000;

/// The most bytes of paths and versions one session remembers (paths may be 4 KiB long).
pub(super) const MAX_SEEN_BYTES: usize = 4 * 1024 * 1024;

/// The most bytes of paths and versions the sessions of one token remember together: a token
/// may open hundreds of sessions (`--max-sessions-per-token`), and 250 of them, each filled to
/// [`MAX_SEEN_BYTES`], held a gigabyte.
pub(crate) const MAX_SEEN_BYTES_PER_TOKEN: usize = 64 * 1024 * 1024;

/// What the sessions of one token remember together, in bytes ([`Seen::within`]): a session
/// that would take it past its bound forgets the quarter of its own files it saw longest ago
/// first (one that remembers nothing yet still keeps the file it sees).
#[derive(Debug)]
pub(crate) struct SeenBudget {
    bytes: AtomicUsize,
    cap: usize,
}

impl SeenBudget {
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { bytes: AtomicUsize::new(0), cap })
    }

    fn full_for(&self, adding: usize) -> bool {
        self.bytes.load(Ordering::Relaxed).saturating_add(adding) > self.cap
    }
}

/// The versions this session read or wrote, by canonical virtual path.
#[derive(Debug, Default)]
pub(super) struct Seen {
    versions: Mutex<Versions>,
}

/// Each path's version, and when it was last seen (a count of what this session saw).
#[derive(Debug, Default)]
struct Versions {
    by_path: HashMap<String, (u64, String)>,
    seen: u64,
    /// The bytes of the paths and versions held.
    bytes: usize,
    /// What this session's token's sessions hold together, when it shares a bound with them.
    budget: Option<Arc<SeenBudget>>,
}

impl Drop for Versions {
    fn drop(&mut self) {
        self.resize(0);
    }
}

impl Versions {
    fn insert(&mut self, path: String, version: String) {
        self.seen += 1;
        self.remove(&path);
        let adding = path.len() + version.len();
        let over = |versions: &Self| {
            versions.by_path.len() >= MAX_SEEN
                || versions.bytes + adding > MAX_SEEN_BYTES
                || versions.budget.as_ref().is_some_and(|budget| budget.full_for(adding))
        };
        while !self.by_path.is_empty() && over(self) {
            self.forget_oldest_quarter();
        }
        self.resize(self.bytes + adding);
        self.by_path.insert(path, (self.seen, version));
    }

    /// Sets the bytes held to `bytes`, and the token's count with them.
    fn resize(&mut self, bytes: usize) {
        if let Some(budget) = &self.budget {
            if bytes > self.bytes {
                budget.bytes.fetch_add(bytes - self.bytes, Ordering::Relaxed);
            } else {
                budget.bytes.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
            }
        }
        self.bytes = bytes;
    }

    /// Forgets the quarter (at least one) of the files seen longest ago.
    fn forget_oldest_quarter(&mut self) {
        let mut stamps: Vec<u64> = self.by_path.values().map(|(stamp, _)| *stamp).collect();
        let cut = (stamps.len() / 4).max(1).min(stamps.len() - 1);
        let oldest_kept = if stamps.len() == 1 { u64::MAX } else { *stamps.select_nth_unstable(cut).1 };
        self.retain(|_, stamp| stamp >= oldest_kept);
    }

    fn remove(&mut self, path: &str) -> Option<String> {
        let (_, version) = self.by_path.remove(path)?;
        self.resize(self.bytes - (path.len() + version.len()));
        Some(version)
    }

    fn retain(&mut self, mut keep: impl FnMut(&str, u64) -> bool) {
        let mut bytes = 0;
        self.by_path.retain(|path, (stamp, version)| {
            let kept = keep(path, *stamp);
            if kept {
                bytes += path.len() + version.len();
            }
            kept
        });
        self.resize(bytes);
    }

    fn get(&self, path: &str) -> Option<&String> {
        self.by_path.get(path).map(|(_, version)| version)
    }
}

/// Why a change is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unread {
    /// The session never read the file whole, nor wrote it.
    Never,
    /// The file changed since the session read or wrote it.
    Changed,
}

impl Unread {
    /// Why the core refused a change, when `error` is its refusal of the precondition a
    /// session passed for `path` ([`Seen::precondition`]): nothing was to be there (never seen),
    /// or the version seen (changed since). Any other error is the core's own answer.
    pub(super) fn of(error: &vfs::Error, path: &VirtualPath) -> Option<Self> {
        if error.path() != Some(path) {
            return None;
        }
        match error.unmet()? {
            vfs::Unmet::Absent => Some(Unread::Never),
            vfs::Unmet::Version => Some(Unread::Changed),
            _ => None,
        }
    }
}

impl Seen {
    /// A session's memory bounded with its token's other sessions' by `budget` too.
    pub(super) fn within(budget: Arc<SeenBudget>) -> Self {
        let mut versions = Versions::default();
        versions.budget = Some(budget);
        Self { versions: Mutex::new(versions) }
    }

    fn versions(&self) -> std::sync::MutexGuard<'_, Versions> {
        self.versions.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that the session saw `path` at `version` (a whole read, or its own write).
    pub(super) fn saw(&self, path: &VirtualPath, version: Option<&str>) {
        if let Some(version) = version {
            self.versions().insert(path.as_str().to_owned(), version.to_owned());
        }
    }

    /// The version the session last saw at `path`.
    pub(super) fn version(&self, path: &VirtualPath) -> Option<String> {
        self.versions().get(path.as_str()).cloned()
    }

    /// What must be at `path` for this session to change what is there: the file at the
    /// version the session last saw there, or nothing where it saw none.
    pub(super) fn precondition(&self, path: &VirtualPath) -> vfs::Precondition {
        self.version(path).map_or(vfs::Precondition::Absent, vfs::Precondition::Version)
    }

    /// A move: what was seen at `from` is now at `to`.
    pub(super) fn moved(&self, from: &VirtualPath, to: &VirtualPath) {
        let mut versions = self.versions();
        // A directory's files move with it.
        let prefix = format!("{}/", from.as_str());
        let moved: Vec<(String, String)> = versions
            .by_path
            .iter()
            .filter(|(path, _)| path.as_str() == from.as_str() || path.starts_with(&prefix))
            .map(|(path, (_, version))| (path.clone(), version.clone()))
            .collect();
        for (path, version) in moved {
            versions.remove(&path);
            let rest = &path[from.as_str().len()..];
            versions.insert(format!("{}{rest}", to.as_str()), version);
        }
    }

    /// A delete: nothing is seen at `path` or below any more.
    pub(super) fn forget(&self, path: &VirtualPath) {
        let prefix = format!("{}/", path.as_str());
        self.versions().retain(|seen, _| seen != path.as_str() && !seen.starts_with(&prefix));
    }
}

/// The refusal: one line that says what to do.
pub(super) fn refusal(path: &VirtualPath, why: Unread) -> vfs::AgentText {
    let mut text = vfs::AgentText::new();
    text.composed("read ").code(path).composed(match why {
        Unread::Never => " first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports",
        Unread::Changed => " first (it changed since you read it)",
    });
    text
}

/// The refusal of a recursive delete: the directory holds a file the session has not seen at
/// its version.
pub(super) fn refusal_inside(directory: &VirtualPath, file: &VirtualPath, why: Unread) -> vfs::AgentText {
    let mut text = vfs::AgentText::new();
    text.composed("cannot delete ").code(directory).composed(": it holds ").code(file).composed(match why {
        Unread::Never => ", which you have not read in this session",
        Unread::Changed => ", which changed since you read it",
    });
    text.composed(
        "; a delete removes only files this session has seen at their current version, so read it whole first, or delete it by itself with the `expectedVersion` that `get_file_info` reports",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sessions of one token share a bound: one that would pass it forgets its own oldest
    /// files, never another's; a session that ends gives back what it held.
    #[test]
    fn the_sessions_of_one_token_share_a_bound_and_give_back_what_they_held() {
        let budget = SeenBudget::new(1000);
        let (one, two) = (Seen::within(budget.clone()), Seen::within(budget.clone()));
        // 13 bytes each: `/w/a/000.txt` and `v`.
        let path = |session: &str, index: usize| VirtualPath::new(&format!("/w/{session}/{index:03}.txt")).unwrap();
        for index in 0..60 {
            one.saw(&path("a", index), Some("v"));
        }
        for index in 0..30 {
            two.saw(&path("b", index), Some("v"));
        }
        let held = |seen: &Seen| seen.versions().bytes;
        assert_eq!(budget.bytes.load(Ordering::Relaxed), held(&one) + held(&two));
        assert!(budget.bytes.load(Ordering::Relaxed) <= 1000, "{}", budget.bytes.load(Ordering::Relaxed));
        assert_eq!(one.versions().by_path.len(), 60, "the first session kept all it saw");
        assert_eq!(two.version(&path("b", 29)).as_deref(), Some("v"), "the second kept its newest");
        assert_eq!(two.version(&path("b", 0)), None, "and forgot its oldest");
        two.forget(&path("b", 29));
        drop(two);
        assert_eq!(budget.bytes.load(Ordering::Relaxed), 60 * 13);
        drop(one);
        assert_eq!(budget.bytes.load(Ordering::Relaxed), 0);
    }

    /// A session's memory is bounded: past [`MAX_SEEN`] files, the quarter seen longest ago is
    /// forgotten (a file seen again counts as seen then), and the rest stays.
    #[test]
    fn past_its_bound_a_session_forgets_the_files_it_saw_longest_ago() {
        let seen = Seen::default();
        let path = |index: usize| VirtualPath::new(&format!("/w/{index}.txt")).unwrap();
        for index in 0..MAX_SEEN {
            seen.saw(&path(index), Some(&format!("v{index}")));
        }
        // The first file, seen again, is the newest now.
        seen.saw(&path(0), Some("again"));
        assert_eq!(seen.versions().by_path.len(), MAX_SEEN);
        seen.saw(&path(MAX_SEEN), Some("new"));
        let versions = seen.versions();
        assert_eq!(versions.by_path.len(), MAX_SEEN - MAX_SEEN / 4 + 1);
        drop(versions);
        assert_eq!(seen.version(&path(0)).as_deref(), Some("again"));
        assert_eq!(seen.version(&path(1)), None);
        assert_eq!(seen.version(&path(MAX_SEEN / 4)), None);
        assert_eq!(seen.version(&path(MAX_SEEN / 4 + 1)).as_deref(), Some(format!("v{}", MAX_SEEN / 4 + 1).as_str()));
        assert_eq!(seen.version(&path(MAX_SEEN)).as_deref(), Some("new"));
        assert_eq!(seen.precondition(&path(1)), vfs::Precondition::Absent);
    }

    /// Long paths reach the bound on bytes first: the quarter seen longest ago goes, and the
    /// count of bytes follows every insert, move and forget.
    #[test]
    fn long_paths_are_bounded_by_their_bytes() {
        let seen = Seen::default();
        let long = vec!["x".repeat(250); 15].join("/");
        let path = |index: usize| VirtualPath::new(&format!("/w/{long}/{index:05}")).unwrap();
        let each = path(0).as_str().len() + "v".len();
        let fit = MAX_SEEN_BYTES / each;
        for index in 0..fit {
            seen.saw(&path(index), Some("v"));
        }
        assert_eq!(seen.versions().by_path.len(), fit);
        assert_eq!(seen.versions().bytes, fit * each);
        seen.saw(&path(fit), Some("v"));
        let versions = seen.versions();
        assert!(versions.bytes <= MAX_SEEN_BYTES);
        assert_eq!(versions.by_path.len(), fit - fit / 4 + 1);
        drop(versions);
        assert_eq!(seen.version(&path(0)), None);
        assert_eq!(seen.version(&path(fit)).as_deref(), Some("v"));
        seen.moved(&VirtualPath::new("/w").unwrap(), &VirtualPath::new("/v").unwrap());
        seen.forget(&VirtualPath::new("/v").unwrap());
        let versions = seen.versions();
        assert_eq!((versions.by_path.len(), versions.bytes), (0, 0));
    }
}
