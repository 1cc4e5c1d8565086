//! Content search with the ripgrep crates, over files opened beneath handles.
//!
//! `grep-regex` compiles the pattern, `grep-searcher` searches each already-opened file (binary
//! files are skipped at the first NUL), and `ignore`'s gitignore matcher decides which entries
//! a `.gitignore` excludes. The walking itself is ours (`docs/design.md`, resolution rule 9): a path-based walker
//! would reopen by host path the race that handle-based resolution closes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::Context;
use crate::budget::Deadline;
use crate::error::Error;
use crate::gate;
use crate::hint::{Argument, Hint, Operation};
use crate::path::VirtualPath;
use crate::policy::RuleEffect;
use crate::pool::{MAX_WORKERS, Ran, Task, WorkerPool};
use crate::registry::RegistryInner;
use crate::storage::local::descriptor_budget;
use crate::storage::{Backend, Flow, Kind, Located, Node, Walked};
use crate::text::AgentText;

/// Longest line text returned; longer lines are cut with `…`.
const MAX_LINE_CHARS: usize = 500;
/// Largest `.gitignore` read (a larger one is not used): compiling one costs hundreds of
/// bytes of memory per byte of patterns, at every directory a walk passes.
const MAX_GITIGNORE_BYTES: u64 = 64 * 1024;
/// Longest line the searcher holds in memory; a file with a longer line is skipped and counted
/// as unreadable.
const HEAP_LIMIT: usize = 8 * 1024 * 1024;
/// Default `maxResults`.
const DEFAULT_RESULTS: usize = 200;
/// Most files one search visits.
const MAX_FILES: usize = 1_000_000;

/// A file to search, found by the walk: its mount and its place in that mount's store.
struct Job {
    path: VirtualPath,
    mount: usize,
    node: Node,
}

/// Files searched per parallel batch: bounds memory and open directory handles.
const BATCH: usize = 4096;

/// What every file of one call is searched with, shared with the worker pool's threads that
/// search them (so it is owned, not borrowed from the call).
struct Search {
    registry: Arc<RegistryInner>,
    deadline: Arc<Deadline>,
    matcher: grep_regex::RegexMatcher,
    lines_around: usize,
    limit: usize,
    /// The whole call's progress, counted by the workers as each file finishes.
    tally: Tally,
}

/// The files waiting to be searched and the merged output so far, in walk order.
struct Batch<'m> {
    search: Arc<Search>,
    pool: &'m WorkerPool,
    jobs: Vec<Job>,
    /// Distinct directory handles the waiting jobs hold open.
    handles: usize,
    lines: Vec<GrepLine>,
    matches: usize,
    files_searched: usize,
    unreadable: usize,
    truncated: bool,
}

/// Files searched and matches found so far in the whole call, counted by the workers as each
/// file finishes rather than when its batch is merged (a batch of large files can take
/// seconds): what the call's progress reports.
#[derive(Default)]
struct Tally {
    files: AtomicU64,
    matches: AtomicU64,
}

impl Search {
    fn searcher(&self) -> Searcher {
        SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .before_context(self.lines_around)
            .after_context(self.lines_around)
            .heap_limit(Some(HEAP_LIMIT))
            .build()
    }

    /// Counts a file a worker has just searched, and reports from that worker: an atomic add
    /// per file, and the deadline's rate-limited report.
    fn count(&self, outcome: &FileOutcome) {
        if outcome.searched {
            self.tally.files.fetch_add(1, Ordering::Relaxed);
            self.tally.matches.fetch_add(outcome.matches as u64, Ordering::Relaxed);
        }
        self.report();
    }

    /// Reports the files searched and matches found so far. Matches past `limit` are found
    /// (a worker finishes the file it is in) but never returned, so they are not counted:
    /// the last count is the result's.
    fn report(&self) {
        let files = self.tally.files.load(Ordering::Relaxed);
        let matches = self.tally.matches.load(Ordering::Relaxed).min(self.limit as u64);
        self.deadline.progress(files, None, || format!("{files} files searched, {matches} matches"));
    }

    /// Searches one file; each read checks the call's clock. A file that vanished is left
    /// out; one that cannot be opened or searched (permissions, I/O, a line longer than
    /// [`HEAP_LIMIT`]) is counted as unreadable.
    fn search_one(&self, searcher: &mut Searcher, job: &Job) -> FileOutcome {
        let mut outcome = FileOutcome::default();
        let deadline = &self.deadline;
        let opened = match self.registry.mounts[job.mount].storage.open_file(&job.node, None, &job.path) {
            Ok(opened) => opened,
            Err(error) => {
                outcome.unreadable = error.kind() != crate::ErrorKind::Changed;
                return outcome;
            }
        };
        outcome.searched = true;
        // One match more than the call returns: found, it tells that the limit cut the search.
        let limit = self.limit.saturating_add(1);
        let mut sink = Collector { path: &job.path, lines: &mut outcome.lines, matches: &mut outcome.matches, limit };
        if searcher.search_reader(&self.matcher, deadline.reader(opened.reader), &mut sink).is_err() {
            // A search the clock stopped is reported by the caller, as the whole call's end.
            outcome.unreadable = deadline.check().is_ok();
        }
        outcome
    }
}

/// One batch being searched: its files, each taken once, in order, by whichever of the pool's
/// threads working on it is free, and what each gave.
struct Flush {
    search: Arc<Search>,
    jobs: Vec<Job>,
    next: AtomicUsize,
    /// Matches found in the batch so far: the workers stop taking files at `remaining`.
    found: AtomicUsize,
    remaining: usize,
    outcomes: Mutex<Vec<(usize, FileOutcome)>>,
}

impl Task for Flush {
    fn run(&self, others_wait: &dyn Fn() -> bool) -> Ran {
        // The pool's thread works for this call: its object requests wait on the call's clock.
        let _entered = self.search.deadline.enter();
        let mut searcher = self.search.searcher();
        let mut done = Vec::new();
        let ran = loop {
            if self.found.load(Ordering::Relaxed) >= self.remaining || self.search.deadline.check().is_err() {
                break Ran::Done;
            }
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = self.jobs.get(index) else { break Ran::Done };
            let outcome = self.search.search_one(&mut searcher, job);
            self.found.fetch_add(outcome.matches, Ordering::Relaxed);
            self.search.count(&outcome);
            done.push((index, outcome));
            // Another call waits for a thread: its turn, after this file.
            if others_wait() {
                break Ran::Yielded;
            }
        };
        self.outcomes.lock().unwrap_or_else(PoisonError::into_inner).extend(done);
        ran
    }
}

impl<'m> Batch<'m> {
    fn new(matcher: grep_regex::RegexMatcher, call: &'m Context<'m>, context: usize, limit: usize) -> Self {
        let search = Search {
            registry: Arc::clone(call.registry),
            deadline: Arc::clone(&call.deadline),
            matcher,
            lines_around: context,
            limit,
            tally: Tally::default(),
        };
        Self {
            search: Arc::new(search),
            pool: &call.registry.pool,
            jobs: Vec::new(),
            handles: 0,
            lines: Vec::new(),
            matches: 0,
            files_searched: 0,
            unreadable: 0,
            truncated: false,
        }
    }

    /// True once `limit` matches are merged: nothing more needs searching.
    fn full(&self) -> bool {
        self.matches >= self.search.limit
    }

    /// Queues a file; searches the batch once it holds [`BATCH`] files or as many directory
    /// handles as the process can spare (`local::descriptor_budget`).
    fn push(&mut self, job: Job) {
        if job.node.handle().is_some() && self.jobs.last().is_none_or(|last| last.node.handle() != job.node.handle()) {
            self.handles += 1;
        }
        self.jobs.push(job);
        if self.jobs.len() >= BATCH || self.handles >= descriptor_budget() {
            self.flush();
        }
    }

    /// Appends one file's outcome in order, cutting at `limit` matches.
    fn merge(&mut self, outcome: FileOutcome) {
        self.files_searched += usize::from(outcome.searched);
        self.unreadable += usize::from(outcome.unreadable);
        if self.full() {
            self.truncated |= outcome.matches > 0;
            return;
        }
        for line in outcome.lines {
            if line.is_match {
                if self.full() {
                    // A match past the limit (each file is searched for one more than it
                    // can give, so that a limit reached in the last file is known to have
                    // cut): the lines before it that are not the last match's own context go.
                    self.truncated = true;
                    self.drop_context_past_last_match();
                    break;
                }
                self.matches += 1;
            }
            self.lines.push(line);
        }
    }

    /// Removes the trailing context lines that lie past the last match's `lines_around`:
    /// context of a match not returned.
    fn drop_context_past_last_match(&mut self) {
        let around = self.search.lines_around as u64;
        let Some(last) = self.lines.iter().rposition(|line| line.is_match) else { return };
        let (path, at) = (self.lines[last].path.clone(), self.lines[last].line);
        while self.lines.last().is_some_and(|line| !line.is_match && (line.path != path || line.line > at + around)) {
            self.lines.pop();
        }
    }

    /// Reports the progress so far (see [`Search::report`]).
    fn report(&self) {
        self.search.report();
    }

    /// Searches the waiting files on the registry's worker pool ([`WorkerPool`]): on as many
    /// of its threads as it has (by default one per core), at most [`MAX_WORKERS`], while the
    /// call's thread waits. Workers take files in order, so the files searched are always a
    /// prefix of the batch, and the merged output is exactly the first matches in walk order.
    fn flush(&mut self) {
        if self.jobs.is_empty() {
            return;
        }
        let jobs = std::mem::take(&mut self.jobs);
        self.handles = 0;
        let total = jobs.len();
        let workers = self.pool.threads().min(MAX_WORKERS).min(total);
        let flush = Arc::new(Flush {
            search: Arc::clone(&self.search),
            jobs,
            next: AtomicUsize::new(0),
            found: AtomicUsize::new(0),
            remaining: self.search.limit.saturating_sub(self.matches),
            outcomes: Mutex::new(Vec::new()),
        });
        let task: Arc<dyn Task> = flush.clone();
        // Returns once no thread of the pool holds the batch any more.
        self.pool.run(&task, workers);
        let mut outcomes = std::mem::take(&mut *flush.outcomes.lock().unwrap_or_else(PoisonError::into_inner));
        outcomes.sort_unstable_by_key(|(index, _)| *index);
        if outcomes.len() < total {
            self.truncated = true;
        }
        for (_, outcome) in outcomes {
            self.merge(outcome);
        }
    }

    /// The result; `directories` counts what the walk itself could not read, `deeper` the
    /// directories past its depth bound.
    fn finish(self, directories: usize, deeper: usize) -> GrepResult {
        let unreadable = self.unreadable + directories;
        GrepResult {
            lines: self.lines,
            matches: self.matches,
            files_searched: self.files_searched,
            truncated: self.truncated || unreadable > 0 || deeper > 0,
            unreadable,
            deeper,
            cut: self.truncated,
        }
    }
}

/// What searching one file gave.
#[derive(Default)]
struct FileOutcome {
    lines: Vec<GrepLine>,
    matches: usize,
    searched: bool,
    unreadable: bool,
}

/// A content search.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepRequest {
    /// A regular expression (or literal text with `literal`).
    pub pattern: String,
    /// Where to search: a directory or a file (default `/`: every agent-facing mount).
    pub path: Option<String>,
    /// Only files whose name (or relative path, if it has a `/`) matches this glob.
    pub include: Option<String>,
    /// Match without regard to case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Treat `pattern` as literal text.
    #[serde(default)]
    pub literal: bool,
    /// Lines of context before and after each match (at most [`GrepRequest::MAX_CONTEXT`]).
    pub context: Option<usize>,
    /// Most matches returned (default 200).
    pub max_results: Option<usize>,
}

impl GrepRequest {
    /// The most lines of context shown before and after a match; more is taken as this many.
    pub const MAX_CONTEXT: usize = 20;
}

/// One line of output.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GrepLine {
    /// The file.
    pub path: VirtualPath,
    /// The 1-based line number.
    pub line: u64,
    /// The line's text (without its line ending; long lines cut).
    pub text: String,
    /// True for a matching line, false for context.
    pub is_match: bool,
}

/// The result of `grep`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GrepResult {
    /// Matching and context lines, grouped by file in walk order.
    pub lines: Vec<GrepLine>,
    /// How many matching lines.
    pub matches: usize,
    /// How many files were searched.
    pub files_searched: usize,
    /// True when `maxResults` stopped the search, a file could not be read, or the tree goes
    /// deeper than a walk does.
    pub truncated: bool,
    /// Files and directories that could not be read (permission or I/O errors, lines longer
    /// than 8 MiB).
    #[serde(skip_serializing_if = "super::walk::is_zero")]
    pub unreadable: usize,
    /// Directories deeper than a walk goes (32 levels below where it starts), not searched:
    /// search from inside them to see what they hold.
    #[serde(skip_serializing_if = "super::walk::is_zero")]
    pub deeper: usize,
    /// True when `maxResults` (or the call's listing bound) cut the search (`truncated` says
    /// so too; not sent).
    #[serde(skip)]
    pub cut: bool,
}

impl GrepResult {
    /// The agent-facing text: `path:line:text` for matches, `path-line-text` for context, as
    /// ripgrep prints them.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`GrepResult::to_text`] as its pieces: paths from disk are passed with control
    /// characters escaped, line text is passed as it is.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = AgentText::new();
        for line in &self.lines {
            let separator = if line.is_match { ":" } else { "-" };
            text.name(line.path.as_str()).composed(&format!("{separator}{}{separator}", line.line));
            text.passed(&line.text).composed("\n");
        }
        if self.matches == 0 {
            text.composed(&format!("no matches in {} files\n", self.files_searched));
        }
        if self.unreadable > 0 {
            text.composed(&super::walk::unreadable_note_for(
                self.unreadable,
                "permission or I/O errors, or a line longer than 8 MiB",
            ));
        }
        if self.deeper > 0 {
            text.composed(&super::walk::deeper_note(self.deeper, ("searched", "search")));
        }
        if self.cut {
            text.composed(&format!("[truncated at {} matches; ", self.matches))
                .hint(Hint::Truncated(Operation::Grep))
                .composed("]\n");
        }
        text
    }
}

struct Collector<'a> {
    path: &'a VirtualPath,
    lines: &'a mut Vec<GrepLine>,
    matches: &'a mut usize,
    limit: usize,
}

fn line_text(bytes: &[u8]) -> String {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
    let text = String::from_utf8_lossy(trimmed);
    if text.chars().count() > MAX_LINE_CHARS {
        let mut cut: String = text.chars().take(MAX_LINE_CHARS).collect();
        cut.push('…');
        cut
    } else {
        text.into_owned()
    }
}

impl Sink for Collector<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if *self.matches >= self.limit {
            return Ok(false);
        }
        *self.matches += 1;
        self.lines.push(GrepLine {
            path: self.path.clone(),
            line: found.line_number().unwrap_or(0),
            text: line_text(found.bytes()),
            is_match: true,
        });
        Ok(*self.matches < self.limit)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if matches!(context.kind(), SinkContextKind::Before | SinkContextKind::After) {
            self.lines.push(GrepLine {
                path: self.path.clone(),
                line: context.line_number().unwrap_or(0),
                text: line_text(context.bytes()),
                is_match: false,
            });
        }
        Ok(true)
    }
}

/// The `.gitignore` matchers of the directories above the current one.
struct IgnoreStack {
    levels: Vec<(usize, Gitignore)>,
}

impl IgnoreStack {
    fn ignored(&self, path: &VirtualPath, is_directory: bool) -> bool {
        for (_, matcher) in self.levels.iter().rev() {
            let found = matcher.matched(PathBuf::from(path.as_str()), is_directory);
            if found.is_ignore() {
                return true;
            }
            if found.is_whitelist() {
                return false;
            }
        }
        false
    }
}

impl Context<'_> {
    pub(crate) fn grep(&self, request: &GrepRequest) -> Result<GrepResult, Error> {
        let limits = &self.registry.limits;
        let matcher = super::pattern::regex(&request.pattern, request.case_insensitive, request.literal, limits)?;
        let include = match &request.include {
            Some(glob) => Some((glob.contains('/'), super::pattern::glob(Argument::Include, glob, limits)?)),
            None => None,
        };
        let context = request.context.unwrap_or(0).min(GrepRequest::MAX_CONTEXT);
        let limit = request.max_results.unwrap_or(DEFAULT_RESULTS).clamp(1, limits.matches);
        let start = Self::parse(request.path.as_deref().unwrap_or("/"))?;

        // The walk is sequential and lists files to search in walk order; every batch of
        // files is searched on the registry's worker pool and merged in order, so memory and
        // open directory handles stay bounded however large the tree is.
        let mut batch = Batch::new(matcher, self, context, limit);
        // The pool's threads wake while the walk finds the first files.
        self.registry.pool.rouse();
        // The first report goes out at the start: a walk may pass many entries before it has a
        // file to search, and one large file may take long to search.
        batch.report();
        let (mut unreadable, mut deeper) = (0, 0);
        for (path, root) in self.grep_roots(&start, &mut batch)? {
            if batch.full() {
                break;
            }
            let walked = self.grep_tree(&path, &root, include.as_ref(), &mut batch)?;
            batch.flush();
            unreadable += walked.unreadable;
            deeper += walked.deeper;
            if !walked.completed {
                batch.truncated = true;
                break;
            }
        }
        batch.flush();
        // A clock that ran out during the last batch ends the call, as it does in the walk.
        self.deadline.check()?;
        Ok(batch.finish(unreadable, deeper))
    }

    /// Where a search from `start` walks: the mounts below a virtual directory (`/`), the
    /// directory itself, or nothing when `start` is a file (then it is queued at once).
    fn grep_roots(&self, start: &VirtualPath, batch: &mut Batch<'_>) -> Result<Vec<(VirtualPath, Located)>, Error> {
        if start.is_root() || self.registry.route(self.caller, start).is_err() {
            let roots = self.roots_below(start);
            if roots.is_empty() {
                // Let routing produce the one unknown-root answer.
                self.registry.route(self.caller, start)?;
            }
            return roots
                .into_iter()
                .map(|root| self.locate::<gate::Read>(&root, true, false).map(|located| (root, located.into_located())))
                .collect();
        }
        let located = self.locate::<gate::Read>(start, true, false)?.into_located();
        match self.store(located.mount).stat(&located.node, start)?.map(|stat| stat.kind) {
            Some(Kind::File) => {
                batch.push(Job { path: start.clone(), mount: located.mount, node: located.node });
                Ok(Vec::new())
            }
            Some(Kind::Directory) => Ok(vec![(start.clone(), located)]),
            Some(_) => Err(Error::unsupported(start)),
            None => Err(Error::not_found(start)),
        }
    }

    /// Walks one tree, queueing the files to search: `.gitignore` files are honoured as
    /// they are met, `.git` is skipped, and `include` filters names or relative paths.
    fn grep_tree(
        &self,
        path: &VirtualPath,
        root: &Located,
        include: Option<&(bool, globset::GlobMatcher)>,
        batch: &mut Batch<'_>,
    ) -> Result<Walked, Error> {
        let store = self.store(root.mount);
        // A `.gitignore` the rules hide is never opened: its patterns would tell in
        // `files_searched` what it says.
        let rules = self.registry.rules_for(self.caller, root.mount);
        let hidden = |directory: &str| {
            rules.is_some_and(|rules| {
                let relative =
                    if directory.is_empty() { ".gitignore".to_owned() } else { format!("{directory}/.gitignore") };
                matches!(rules.entry(&root.rel, &relative, ".gitignore"), Some((RuleEffect::Hidden, _)))
            })
        };
        let mut ignores = IgnoreStack { levels: Vec::new() };
        if !hidden("") {
            Self::load_gitignore(store, &root.node, path, 0, &mut ignores);
        }
        let mut visited = 0usize;
        self.walk_located(root, path, self.registry.limits.depth, &mut |visit| {
            while ignores.levels.last().is_some_and(|(depth, _)| *depth >= visit.depth) {
                ignores.levels.pop();
            }
            match visit.kind {
                Kind::Directory => {
                    if visit.name == ".git" || ignores.ignored(visit.path, true) {
                        return Flow::SkipDirectory;
                    }
                    if !hidden(visit.relative) {
                        Self::load_gitignore(store, visit.node, visit.path, visit.depth, &mut ignores);
                    }
                    Flow::Continue
                }
                Kind::File => {
                    if ignores.ignored(visit.path, false) {
                        return Flow::Continue;
                    }
                    if let Some((by_path, glob)) = include {
                        let subject = if *by_path { visit.relative } else { visit.name };
                        if !glob.is_match(subject) {
                            return Flow::Continue;
                        }
                    }
                    visited += 1;
                    if visited > MAX_FILES {
                        return Flow::Stop;
                    }
                    batch.push(Job { path: visit.path.clone(), mount: root.mount, node: visit.node.clone() });
                    if batch.full() { Flow::Stop } else { Flow::Continue }
                }
                Kind::Symlink | Kind::Special => Flow::Continue,
            }
        })
    }

    /// Reads the `.gitignore` in a directory onto the stack at `depth`; one that is too large
    /// or not UTF-8 is not used.
    fn load_gitignore(store: &Backend, directory: &Node, path: &VirtualPath, depth: usize, ignores: &mut IgnoreStack) {
        let Some(bytes) = store.read_child(directory, ".gitignore", MAX_GITIGNORE_BYTES, path) else { return };
        let Ok(text) = String::from_utf8(bytes) else { return };
        if let Some(matcher) = gitignore_matcher(path, &text) {
            ignores.levels.push((depth, matcher));
        }
    }
}

/// The matcher for a `.gitignore` holding `text` in the directory `directory` (matching is on
/// virtual paths); `None` when no line is a valid pattern.
fn gitignore_matcher(directory: &VirtualPath, text: &str) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(PathBuf::from(directory.as_str()));
    for line in text.lines() {
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}
