//! Listing, trees and name search, walked with handles.
//!
//! `docs/design.md`, resolution rule 9: a walk opens every directory beneath the handle of its parent with
//! `O_NOFOLLOW`, exactly as resolution does, so a directory swapped for a link during the walk
//! ends that branch instead of leading outside. Links are reported, never followed. Internal
//! directories lying physically inside a visible mount are left out, as if absent.

use super::Context;
use crate::error::Error;
use crate::gate;
use crate::hint::{Argument, Hint, Operation};
use crate::mount::Visibility;
use crate::path::VirtualPath;
use crate::policy::{NamePolicy, RuleEffect};
use crate::storage::{Flow, Kind, Located, Visit, WalkFrom, Walked};
use crate::text::{AgentText, agent_text, name};

/// What an entry is, as an agent sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    /// A directory (or a mount root).
    Directory,
    /// A regular file.
    File,
    /// A symbolic link (not followed by walks).
    Link,
    /// A FIFO, socket or device (never opened).
    Other,
}

impl EntryKind {
    fn tag(self) -> &'static str {
        match self {
            EntryKind::Directory => "[DIR]",
            EntryKind::File => "[FILE]",
            EntryKind::Link => "[LINK]",
            EntryKind::Other => "[OTHER]",
        }
    }

    pub(crate) fn from_kind(kind: Kind) -> Self {
        match kind {
            Kind::Directory => EntryKind::Directory,
            Kind::File => EntryKind::File,
            Kind::Symlink => EntryKind::Link,
            Kind::Special => EntryKind::Other,
        }
    }
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ListEntry {
    /// The entry's name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
}

/// The result of `list_directory`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Listing {
    /// The directory listed.
    pub path: VirtualPath,
    /// Entries, sorted by name.
    pub entries: Vec<ListEntry>,
    /// How many entries the directory has.
    pub total: usize,
    /// True when `entries` stops short of `total`.
    pub truncated: bool,
}

impl Listing {
    /// The agent-facing text: `[DIR] name` / `[FILE] name` lines.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`Listing::to_text`] as its pieces: names from disk are passed, control characters
    /// escaped.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = AgentText::new();
        for entry in &self.entries {
            text.composed(entry.kind.tag()).composed(" ").name(&entry.name).composed("\n");
        }
        if self.entries.is_empty() {
            text.code(&self.path).composed(" is empty\n");
        }
        if self.truncated {
            text.append(&truncation_note(self.entries.len(), self.total, Operation::List));
        }
        text
    }
}

/// How `list_directory_with_sizes` orders its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// By name (the default).
    #[default]
    Name,
    /// Largest first; directories (no size) last, each group by name.
    Size,
}

/// One entry of `list_directory_with_sizes`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SizedEntry {
    /// The entry's name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// The result of `list_directory_with_sizes`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SizedListing {
    /// The directory listed.
    pub path: VirtualPath,
    /// Entries, in the order asked for.
    pub entries: Vec<SizedEntry>,
    /// How many entries the directory has.
    pub total: usize,
    /// True when `entries` stops short of `total`.
    pub truncated: bool,
    /// Files among `entries`.
    pub files: usize,
    /// Directories among `entries`.
    pub directories: usize,
    /// The files' sizes added up, in bytes.
    pub bytes: u64,
    /// Sorted by size in a directory of more entries than are sized for it: how many were
    /// (the first by name); the largest may be among the others.
    #[serde(rename = "sortedAmong", skip_serializing_if = "Option::is_none")]
    pub sorted_among: Option<usize>,
}

impl SizedListing {
    /// The agent-facing text: `[FILE] name  size` and `[DIR] name` lines, then the totals.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = AgentText::new();
        for entry in &self.entries {
            text.composed(entry.kind.tag()).composed(" ").name(&entry.name);
            if let Some(size) = entry.size {
                text.composed(&format!("  {}", human_size(size)));
            }
            text.composed("\n");
        }
        if self.entries.is_empty() {
            text.code(&self.path).composed(" is empty\n");
        }
        let plural = |count: usize, one: &str, many: &str| format!("{count} {}", if count == 1 { one } else { many });
        text.composed(&format!(
            "Total: {}, {}; {} in files\n",
            plural(self.files, "file", "files"),
            plural(self.directories, "directory", "directories"),
            human_size(self.bytes)
        ));
        if self.truncated {
            text.append(&truncation_note(self.entries.len(), self.total, Operation::ListSized));
        }
        if let Some(among) = self.sorted_among {
            text.composed(&format!(
                "[sorted by size among the first {among} of {} entries by name; the largest may be among the others]\n",
                self.total
            ));
        }
        text
    }
}

/// `512 B`, `1.5 KiB`, `3.2 MiB`, `1.0 GiB`.
#[expect(clippy::cast_precision_loss, reason = "one decimal of a size")]
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// One node of a tree.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TreeNode {
    /// The name.
    pub name: String,
    /// What it is (`kind`, as in `list_directory`).
    pub kind: EntryKind,
    /// Children of a directory (absent beyond `maxDepth`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<TreeNode>>,
}

/// The result of `directory_tree`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Tree {
    /// The root of the tree.
    pub path: VirtualPath,
    /// Its entries.
    pub entries: Vec<TreeNode>,
    /// How many nodes were returned.
    pub count: usize,
    /// True when the entry bound cut the tree, something in it could not be read, or it goes
    /// deeper than a walk does.
    pub truncated: bool,
    /// Directories the walk could not read (permission or I/O errors).
    #[serde(skip_serializing_if = "is_zero")]
    pub unreadable: usize,
    /// Directories deeper than a walk goes (32 levels below where it starts), not entered:
    /// list or search from inside them to see what they hold.
    #[serde(skip_serializing_if = "is_zero")]
    pub deeper: usize,
    /// True when the bound of entries cut the result (`truncated` says so too; not sent).
    #[serde(skip)]
    pub cut: bool,
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if passes a reference")]
pub(crate) fn is_zero(count: &usize) -> bool {
    *count == 0
}

/// The note for a result whose walk did not enter the directories past its depth bound.
pub(crate) fn deeper_note(deeper: usize, (done, verb): (&str, &str)) -> String {
    format!(
        "[{deeper} {} deeper than a walk goes (32 levels below where it starts), not {done}; {verb} from a path inside {} to see what {}]\n",
        if deeper == 1 { "directory lies" } else { "directories lie" },
        if deeper == 1 { "it" } else { "them" },
        if deeper == 1 { "it holds" } else { "they hold" }
    )
}

/// The note for a result whose walk skipped what it could not read.
pub(crate) fn unreadable_note(unreadable: usize) -> String {
    unreadable_note_for(unreadable, "permission or I/O errors")
}

/// [`unreadable_note`], naming what can keep an entry from being read.
pub(crate) fn unreadable_note_for(unreadable: usize, causes: &str) -> String {
    format!(
        "[{unreadable} entr{} could not be read ({causes}); the result may be incomplete]\n",
        if unreadable == 1 { "y" } else { "ies" }
    )
}

impl Tree {
    /// The agent-facing text: one line per node, indented two spaces per level, directories
    /// ending in `/`.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`Tree::to_text`] as its pieces: names from disk are passed, control characters
    /// escaped.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        fn render(nodes: &[TreeNode], depth: usize, text: &mut AgentText) {
            for node in nodes {
                text.composed(&"  ".repeat(depth)).name(&node.name);
                match node.kind {
                    EntryKind::Directory => text.composed("/"),
                    EntryKind::Link => text.composed(" (link)"),
                    _ => text,
                };
                text.composed("\n");
                if let Some(children) = &node.children {
                    render(children, depth + 1, text);
                }
            }
        }
        let mut text = agent_text![name(self.path.as_str().trim_end_matches('/')), "/\n"];
        render(&self.entries, 1, &mut text);
        if self.unreadable > 0 {
            text.composed(&unreadable_note(self.unreadable));
        }
        if self.deeper > 0 {
            text.composed(&deeper_note(self.deeper, ("listed", "list")));
        }
        if self.cut {
            text.composed(&format!("[truncated after {} entries; ", self.count))
                .hint(Hint::Truncated(Operation::Tree))
                .composed("]\n");
        }
        text
    }
}

/// The result of `search_files`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NameSearch {
    /// Matching virtual paths, in walk order.
    pub matches: Vec<VirtualPath>,
    /// True when the bound stopped the search, something could not be read, or the tree goes
    /// deeper than a walk does.
    pub truncated: bool,
    /// Directories the walk could not read (permission or I/O errors).
    #[serde(skip_serializing_if = "is_zero")]
    pub unreadable: usize,
    /// Directories deeper than a walk goes (32 levels below where it starts), not entered:
    /// list or search from inside them to see what they hold.
    #[serde(skip_serializing_if = "is_zero")]
    pub deeper: usize,
    /// True when the bound of entries cut the result (`truncated` says so too; not sent).
    #[serde(skip)]
    pub cut: bool,
}

impl NameSearch {
    /// The agent-facing text: one virtual path per line.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`NameSearch::to_text`] as its pieces: paths built from names on disk are passed,
    /// control characters escaped.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = AgentText::new();
        for path in &self.matches {
            text.name(path.as_str()).composed("\n");
        }
        if self.matches.is_empty() {
            text.composed("no matches\n");
        }
        if self.unreadable > 0 {
            text.composed(&unreadable_note(self.unreadable));
        }
        if self.deeper > 0 {
            text.composed(&deeper_note(self.deeper, ("searched", "search")));
        }
        if self.cut {
            text.composed(&format!("[truncated at {} matches; ", self.matches.len()))
                .hint(Hint::Truncated(Operation::SearchNames))
                .composed("]\n");
        }
        text
    }
}

/// The deepest a walk goes below where it starts (a path names at most as many levels below
/// its mount): a tree can be deeper, moved under another one or made beside vfs, and a walk
/// of it goes one level a frame, so past this it would take the thread's whole stack.
pub(crate) const WALK_DEPTH: usize = crate::storage::local::MAX_DEPTH;

impl Context<'_> {
    /// Walks the tree below the directory at `path` (located with read rights) through its
    /// store: depth-first, each directory's entries in name order; `max_depth` 1 visits only
    /// the directory's own entries. The store checks the call's clock at every entry.
    pub(crate) fn walk_below(
        &self,
        path: &VirtualPath,
        max_depth: usize,
        visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    ) -> Result<Walked, Error> {
        let located = self.locate::<gate::Read>(path, true, false)?;
        self.walk_located(&located, path, max_depth, visit)
    }

    /// [`Context::walk_below`] from a place already located.
    pub(crate) fn walk_located(
        &self,
        located: &Located,
        path: &VirtualPath,
        max_depth: usize,
        visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    ) -> Result<Walked, Error> {
        let store = self.store(located.mount);
        match store.stat(&located.node, path)? {
            None => return Err(Error::not_found(path)),
            Some(stat) if stat.kind == Kind::Special => return Err(Error::unsupported(path)),
            Some(stat) if stat.kind != Kind::Directory => return Err(Error::not_a_directory(path)),
            Some(_) => {}
        }
        let Some(rules) = self.registry.rules_for(self.caller, located.mount) else {
            return self.store_walk(located, path, max_depth, visit);
        };
        // Hidden names are left out, and a hidden directory is never opened.
        self.store_walk(located, path, max_depth, &mut |entry| match rules.entry(
            &located.rel,
            entry.relative,
            entry.name,
        ) {
            Some((RuleEffect::Hidden, _)) => Flow::SkipDirectory,
            _ => visit(entry),
        })
    }

    /// The store's own walk of the directory at `located`, as deep as `max_depth` and never
    /// deeper than [`WALK_DEPTH`], within this call's deadline and listing bound; it knows the
    /// mount table, so nested roots are not walked twice. A walk of the whole tree
    /// (`usize::MAX`) that finds directories deeper than that is refused: what it did not see
    /// may be protected, unread or part of an image.
    pub(crate) fn store_walk(
        &self,
        located: &Located,
        path: &VirtualPath,
        max_depth: usize,
        visit: &mut dyn FnMut(&Visit<'_>) -> Flow,
    ) -> Result<Walked, Error> {
        let from = WalkFrom {
            table: &self.table(),
            mount: located.mount,
            path,
            max_depth: max_depth.min(WALK_DEPTH),
            listing_bound: self.listing_bound(),
            deadline: &self.deadline,
        };
        let walked = self.store(located.mount).walk(&from, &located.node, visit)?;
        if max_depth == usize::MAX && walked.deeper > 0 {
            return Err(Error::too_large(
                Some(path),
                agent_text![
                    "it holds directories more than ",
                    WALK_DEPTH.to_string(),
                    " levels below it, deeper than vfs goes"
                ],
            ));
        }
        Ok(walked)
    }

    /// The first protection inside the directory at `from` that would not hold once it is
    /// moved to `to`, for an agent's move: a rule anchored at the mount root (`docs/*.md:ro`)
    /// or spanning the directory's own name (`.docker/config.json`) protects by place, and a
    /// move would carry the protected file out of it. Looks only as deep as such rules reach.
    pub(crate) fn protection_lost(
        &self,
        from: &Located,
        to: &Located,
        path: &VirtualPath,
    ) -> Result<Option<(RuleEffect, String)>, Error> {
        let max_depth = self.registry.rules_for(self.caller, from.mount).map_or(0, NamePolicy::move_depth);
        if max_depth == 0 {
            return Ok(None);
        }
        let there = self.registry.rules_for(self.caller, to.mount);
        self.first_protection(from, path, max_depth, "move", &|entry, effect| {
            let mut moved: Vec<&str> = to.rel.iter().map(String::as_str).collect();
            moved.extend(entry.relative.split('/'));
            let kept = there.and_then(|there| there.judge(&moved)).map(|(effect, _, _)| effect);
            match (effect, kept) {
                (_, Some(RuleEffect::Hidden)) => Flow::SkipDirectory,
                (RuleEffect::ReadOnly, Some(RuleEffect::ReadOnly)) => Flow::Continue,
                _ => Flow::Stop,
            }
        })
    }

    /// The first name inside the directory at `from` that no rule protects there but one would
    /// at the move's destination `to` (read-only or hidden there): a move may not bring a file
    /// where a write could not create it (`cfg/*.toml:ro`, a rule of the other mount's). What
    /// is protected at the source is [`Context::protection_lost`]'s to judge. Within one mount
    /// the walk looks as deep as a rule could join names with the new place; across mounts,
    /// whose rules differ, all the way down.
    pub(crate) fn protection_gained(
        &self,
        from: &Located,
        to: &Located,
        path: &VirtualPath,
    ) -> Result<Option<(RuleEffect, String)>, Error> {
        let Some(there) = self.registry.rules_for(self.caller, to.mount) else {
            return Ok(None);
        };
        let here = self.registry.rules_for(self.caller, from.mount);
        let max_depth = if from.mount == to.mount { there.move_depth() } else { usize::MAX };
        if max_depth == 0 || there.is_empty() {
            return Ok(None);
        }
        let mut found = None;
        let walked = self.store_walk(from, path, max_depth, &mut |entry| {
            if here.is_some_and(|here| here.entry(&from.rel, entry.relative, entry.name).is_some()) {
                return Flow::Continue;
            }
            let mut moved: Vec<&str> = to.rel.iter().map(String::as_str).collect();
            moved.extend(entry.relative.split('/'));
            match there.judge(&moved) {
                Some((effect, class, _)) => {
                    found = Some((effect, class.to_owned()));
                    Flow::Stop
                }
                None => Flow::Continue,
            }
        })?;
        if found.is_none() && !walked.completed {
            return Err(Error::too_many_to_check("move", path, self.listing_bound()));
        }
        Ok(found)
    }

    /// The first name inside the directory at `located` that the rules protect, for an agent's
    /// recursive delete; the walk is the store's own, without the agent's filter.
    pub(crate) fn protected_inside(
        &self,
        located: &Located,
        path: &VirtualPath,
    ) -> Result<Option<(RuleEffect, String)>, Error> {
        self.first_protection(located, path, usize::MAX, "delete", &|_, _| Flow::Stop)
    }

    /// Refuses a recursive delete of the directory at `located` when `judge` refuses a
    /// regular file in it at its current version (never seen, or changed since): the answer
    /// is the judge's error, naming the first such file. The walk is the store's own (hidden
    /// names included: the delete removes them too).
    pub(crate) fn first_unseen(
        &self,
        located: &Located,
        path: &VirtualPath,
        judge: &crate::storage::Judge<'_>,
    ) -> Result<(), Error> {
        let store = self.store(located.mount);
        let mut refused = None;
        let walked = self.store_walk(located, path, usize::MAX, &mut |entry| {
            if entry.kind != Kind::File {
                return Flow::Continue;
            }
            let judged =
                store.version(entry.node, entry.path).and_then(|current| judge(entry.path, current.as_deref()));
            match judged {
                Ok(()) => Flow::Continue,
                Err(error) => {
                    refused = Some(error);
                    Flow::Stop
                }
            }
        })?;
        if let Some(error) = refused {
            return Err(error);
        }
        if !walked.completed {
            return Err(Error::too_many_to_check("delete", path, self.listing_bound()));
        }
        Ok(())
    }

    /// The first name, as deep as `max_depth` inside the directory at `located`, that a rule
    /// protects and that `lost` (told the entry and the rule's effect) stops at, for a `verb`
    /// of the whole directory. A walk the store's listing bound cut (object stores list whole
    /// trees) has not seen every name, and what it did not see may be protected: the change
    /// is refused then.
    fn first_protection(
        &self,
        located: &Located,
        path: &VirtualPath,
        max_depth: usize,
        verb: &'static str,
        lost: &dyn Fn(&Visit<'_>, RuleEffect) -> Flow,
    ) -> Result<Option<(RuleEffect, String)>, Error> {
        let Some(rules) = self.registry.rules_for(self.caller, located.mount) else {
            return Ok(None);
        };
        let mut found = None;
        let walked = self.store_walk(located, path, max_depth, &mut |entry| {
            let Some((effect, class)) = rules.entry(&located.rel, entry.relative, entry.name) else {
                return Flow::Continue;
            };
            let flow = lost(entry, effect);
            if matches!(flow, Flow::Stop) {
                found = Some((effect, class.to_owned()));
            }
            flow
        })?;
        if found.is_none() && !walked.completed {
            return Err(Error::too_many_to_check(verb, path, self.listing_bound()));
        }
        Ok(found)
    }

    /// Most entries a store that lists whole trees at once fetches for one walk.
    fn listing_bound(&self) -> usize {
        self.registry.limits.entries.saturating_mul(8)
    }

    /// Agent-facing roots strictly below `path`, as the next segment under it.
    pub(super) fn virtual_children(&self, path: &VirtualPath) -> Vec<String> {
        let mut names: Vec<String> = self
            .registry
            .mounts
            .iter()
            .enumerate()
            .filter(|(index, mount)| {
                self.registry.visible(self.caller, *index)
                    && mount.root_path.starts_with(path)
                    && mount.root_path != *path
            })
            .filter_map(|(_, mount)| mount.root_path.components().nth(path.components().count()).map(str::to_owned))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub(crate) fn list(&self, input: &str) -> Result<Listing, Error> {
        self.list_bounded(Self::parse(input)?, self.registry.limits.entries, None)
    }

    /// A listing with each file's size, in the order asked for. Sorted by size, the largest
    /// are picked among up to eight times the entries a listing returns (each is looked at),
    /// not among the first by name alone.
    pub(crate) fn list_sized(&self, input: &str, sort: SortBy) -> Result<SizedListing, Error> {
        let limit = self.registry.limits.entries;
        let listing = match sort {
            SortBy::Size => self.list_bounded(Self::parse(input)?, self.listing_bound(), None)?,
            SortBy::Name => self.list(input)?,
        };
        let sized = listing.entries.len();
        let mut entries = Vec::with_capacity(listing.entries.len());
        for entry in listing.entries {
            self.deadline.check()?;
            let size = if entry.kind == EntryKind::File {
                let child = listing.path.join_trusted(&entry.name);
                self.locate::<gate::Read>(&child, false, false)
                    .ok()
                    .and_then(|located| self.store(located.mount).stat(&located.node, &child).ok().flatten())
                    .map(|stat| stat.size)
            } else {
                None
            };
            entries.push(SizedEntry { name: entry.name, kind: entry.kind, size });
        }
        if sort == SortBy::Size {
            entries.sort_by(|left, right| right.size.cmp(&left.size).then_with(|| left.name.cmp(&right.name)));
            entries.truncate(limit);
        }
        let truncated = entries.len() < listing.total;
        let files = entries.iter().filter(|entry| entry.kind == EntryKind::File).count();
        let directories = entries.iter().filter(|entry| entry.kind == EntryKind::Directory).count();
        let bytes = entries.iter().filter_map(|entry| entry.size).sum();
        Ok(SizedListing {
            path: listing.path,
            entries,
            total: listing.total,
            truncated,
            files,
            directories,
            bytes,
            sorted_among: (sort == SortBy::Size && sized < listing.total).then_some(sized),
        })
    }

    /// The entries of the directory at `path` in name order, at most `limit` of them; with
    /// `read_at_most`, for a front end (the FUSE view), a store that reads entries one by one
    /// reads no more than that many (then the first the directory gives: the listing is cut,
    /// and its total is what was read), and a name is listed once. Otherwise a name an object
    /// store holds both as a file and as a prefix (`a` and `a/b`, written by another tool) is
    /// listed twice, as the directory and as the file; a front end, which can show a name only
    /// once, shows the file (what a lookup of the name finds).
    pub(super) fn list_bounded(
        &self,
        path: VirtualPath,
        limit: usize,
        read_at_most: Option<usize>,
    ) -> Result<Listing, Error> {
        let virtual_names = self.virtual_children(&path);
        let mut entries: Vec<(String, EntryKind)> = Vec::new();
        match self.locate::<gate::Read>(&path, true, false) {
            Ok(located) => {
                let store = self.store(located.mount);
                let rules = self.registry.rules_for(self.caller, located.mount);
                let at_most = read_at_most.unwrap_or(usize::MAX);
                for entry in store.list(&self.table(), located.mount, &located.node, &path, at_most)? {
                    let hidden = rules.is_some_and(|rules| {
                        matches!(rules.entry(&located.rel, &entry.name, &entry.name), Some((RuleEffect::Hidden, _)))
                    });
                    if !hidden {
                        entries.push((entry.name, EntryKind::from_kind(entry.kind)));
                    }
                }
            }
            Err(error) if error.kind() == crate::ErrorKind::UnknownRoot && !virtual_names.is_empty() => {}
            Err(error) => return Err(error),
        }
        // A root nested below is the directory at its name, whatever the store holds there.
        entries.retain(|(name, _)| !virtual_names.contains(name));
        entries.extend(virtual_names.into_iter().map(|name| (name, EntryKind::Directory)));
        entries.sort();
        if read_at_most.is_some() {
            // The later of two of one name: the file (`EntryKind` orders directories first).
            entries.dedup_by(|later, earlier| {
                let same = later.0 == earlier.0;
                if same {
                    std::mem::swap(later, earlier);
                }
                same
            });
        } else {
            entries.dedup();
        }
        let total = entries.len();
        let entries: Vec<ListEntry> =
            entries.into_iter().take(limit).map(|(name, kind)| ListEntry { name, kind }).collect();
        Ok(Listing { truncated: entries.len() < total, total, entries, path })
    }

    pub(crate) fn tree(&self, input: &str, max_depth: Option<usize>, excludes: &[String]) -> Result<Tree, Error> {
        // Cut by the bound, not by the caller: no depth asked, or one past the bound.
        let capped = max_depth.is_none_or(|depth| depth > self.registry.limits.depth);
        self.tree_from(input, max_depth, excludes, 0, capped)
    }

    /// [`Context::tree`] of one part of a call that has counted `before` entries elsewhere
    /// (the mounts before this one, below a virtual parent), so that its progress counts the
    /// whole call.
    fn tree_from(
        &self,
        input: &str,
        max_depth: Option<usize>,
        excludes: &[String],
        before: usize,
        capped: bool,
    ) -> Result<Tree, Error> {
        let path = Self::parse(input)?;
        let limit = self.registry.limits.entries;
        let depth_cap = self.registry.limits.depth;
        if max_depth == Some(0) {
            return Err(Error::invalid_argument(agent_text!["`", Argument::MaxDepth, "` must be at least 1"]));
        }
        // The first report goes out at the start: a store that lists whole trees at once
        // takes a while to reach the first entry.
        self.deadline.progress(before as u64, None, || format!("{before} entries listed"));
        let max_depth = max_depth.unwrap_or(depth_cap).min(depth_cap);
        if self.registry.route(self.caller, &path).is_err() {
            let names = self.virtual_children(&path);
            if !names.is_empty() {
                // Above the mounts (`/`, or a virtual parent of nested roots): one node per
                // mount, each with its own bounded subtree.
                let (mut entries, mut count, mut truncated, mut unreadable, mut deeper, mut cut) =
                    (Vec::new(), 0, false, 0, 0, false);
                for name in names {
                    let child = path.join_trusted(&name);
                    count += 1;
                    let children = if max_depth > 1 {
                        let subtree =
                            self.tree_from(child.as_str(), Some(max_depth - 1), excludes, before + count, capped)?;
                        count += subtree.count;
                        truncated |= subtree.truncated;
                        unreadable += subtree.unreadable;
                        deeper += subtree.deeper;
                        cut |= subtree.cut;
                        Some(subtree.entries)
                    } else {
                        None
                    };
                    entries.push(TreeNode { name, kind: EntryKind::Directory, children });
                }
                return Ok(Tree { path, entries, count, truncated, unreadable, deeper, cut });
            }
        }
        let excluded = super::pattern::exclude_set(excludes, &self.registry.limits)?;
        // Build the nested structure from the depth-first, name-ordered visit sequence.
        let mut stack: Vec<Vec<TreeNode>> = vec![Vec::new()];
        let mut depths: Vec<usize> = Vec::new();
        let mut count = 0usize;
        let mut truncated = false;
        let walked = self.walk_below(&path, max_depth, &mut |visit| {
            if excluded.is_match(visit.relative) || excluded.is_match(visit.name) {
                return Flow::SkipDirectory;
            }
            if count >= limit {
                truncated = true;
                return Flow::Stop;
            }
            count += 1;
            let done = before + count;
            self.deadline.progress(done as u64, None, || format!("{done} entries listed"));
            while depths.last().is_some_and(|&depth| depth >= visit.depth) {
                close_level(&mut stack, &mut depths);
            }
            let kind = EntryKind::from_kind(visit.kind);
            let node = TreeNode {
                name: visit.name.to_owned(),
                kind,
                children: (kind == EntryKind::Directory && visit.depth < max_depth).then(Vec::new),
            };
            if node.children.is_some() {
                stack.last_mut().expect("the stack holds the root level").push(node);
                stack.push(Vec::new());
                depths.push(visit.depth);
            } else {
                stack.last_mut().expect("the stack holds the root level").push(node);
            }
            Flow::Continue
        })?;
        // Directories past a depth the caller chose are its answer; past the bound, they are
        // left out, and said so.
        let deeper = if capped { walked.deeper } else { 0 };
        let cut = truncated || !walked.completed;
        truncated = cut || walked.unreadable > 0 || deeper > 0;
        while !depths.is_empty() {
            close_level(&mut stack, &mut depths);
        }
        let entries = stack.pop().unwrap_or_default();
        Ok(Tree { path, entries, count, truncated, unreadable: walked.unreadable, deeper, cut })
    }

    pub(crate) fn search_files(&self, input: &str, pattern: &str, excludes: &[String]) -> Result<NameSearch, Error> {
        self.search_files_from(input, pattern, excludes, &mut Scanned::default())
    }

    /// [`Context::search_files`] of one part of a call, adding to what the whole call has
    /// `scanned` (the mounts before this one, below a virtual parent), so that its progress
    /// counts the whole call.
    fn search_files_from(
        &self,
        input: &str,
        pattern: &str,
        excludes: &[String],
        scanned: &mut Scanned,
    ) -> Result<NameSearch, Error> {
        let path = Self::parse(input)?;
        if pattern.is_empty() {
            return Err(Error::invalid_argument(agent_text![
                "`",
                Argument::Pattern,
                "` is empty; use a glob such as `*.rs` or `**/test_*.py`"
            ]));
        }
        let by_path = pattern.contains('/');
        let matcher = super::pattern::glob(Argument::Pattern, pattern, &self.registry.limits)?;
        let limit = self.registry.limits.entries;
        // The first report goes out at the start, as in `tree_from`.
        scanned.report(self, limit, 0);
        if self.registry.route(self.caller, &path).is_err() {
            let roots = self.roots_below(&path);
            if !roots.is_empty() {
                let (mut matches, mut truncated, mut unreadable, mut deeper, mut cut) =
                    (Vec::new(), false, 0, 0, false);
                for root in roots {
                    let found = self.search_files_from(root.as_str(), pattern, excludes, scanned)?;
                    truncated |= found.truncated;
                    unreadable += found.unreadable;
                    deeper += found.deeper;
                    cut |= found.cut;
                    matches.extend(found.matches);
                }
                if matches.len() > limit {
                    matches.truncate(limit);
                    truncated = true;
                    cut = true;
                }
                return Ok(NameSearch { matches, truncated, unreadable, deeper, cut });
            }
        }
        let excluded = super::pattern::exclude_set(excludes, &self.registry.limits)?;
        let mut matches = Vec::new();
        let mut truncated = false;
        let walked = self.walk_below(&path, self.registry.limits.depth, &mut |visit| {
            let subject = if by_path { visit.relative } else { visit.name };
            let flow = if excluded.is_match(visit.relative) || excluded.is_match(visit.name) {
                Flow::SkipDirectory
            } else if !matcher.is_match(subject) {
                Flow::Continue
            } else if matches.len() >= limit {
                truncated = true;
                Flow::Stop
            } else {
                matches.push(visit.path.clone());
                Flow::Continue
            };
            // Reported once the entry is judged, so that the counts include it.
            scanned.entries += 1;
            scanned.report(self, limit, matches.len());
            flow
        })?;
        scanned.matches += matches.len();
        let cut = truncated || !walked.completed;
        let truncated = cut || walked.unreadable > 0 || walked.deeper > 0;
        Ok(NameSearch { matches, truncated, unreadable: walked.unreadable, deeper: walked.deeper, cut })
    }

    /// The agent-facing mounts whose roots lie at or below `path` (for searches from `/`).
    pub(crate) fn roots_below(&self, path: &VirtualPath) -> Vec<VirtualPath> {
        self.registry
            .mounts
            .iter()
            .enumerate()
            .filter(|(index, mount)| {
                self.registry.visible(self.caller, *index)
                    && mount.visibility == Visibility::AgentFacing
                    && mount.root_path.starts_with(path)
            })
            .map(|(_, mount)| mount.root_path.clone())
            .collect()
    }
}

/// What one `search_files` call has done so far, across the mounts it searches.
#[derive(Default)]
struct Scanned {
    /// Entries visited.
    entries: u64,
    /// Matches found in the mounts already searched.
    matches: usize,
}

impl Scanned {
    /// Reports the entries scanned, and the matches with `more` found in the mount being
    /// searched; no more than the `limit` the result keeps.
    fn report(&self, context: &Context<'_>, limit: usize, more: usize) {
        let (done, found) = (self.entries, (self.matches + more).min(limit));
        context.deadline.progress(done, None, || format!("{done} entries scanned, {found} matches"));
    }
}

fn close_level(stack: &mut Vec<Vec<TreeNode>>, depths: &mut Vec<usize>) {
    depths.pop();
    let children = stack.pop().expect("a level was opened");
    let parent = stack.last_mut().expect("the root level stays");
    let node = parent.last_mut().expect("the directory node precedes its children");
    node.children = Some(children);
}

/// The last line of a listing (of `operation`) cut at the entry limit.
fn truncation_note(shown: usize, total: usize, operation: Operation) -> AgentText {
    agent_text![format!("[truncated: showing {shown} of {total} entries; "), Hint::Truncated(operation), "]\n"]
}
