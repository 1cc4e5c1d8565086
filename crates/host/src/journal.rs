//! The journal (`--journal DIR`): every change an agent makes, with its before image, so that
//! the operator (`vfs undo`) can undo it exactly, guarded by version (ADR 0009).
//!
//! The journal is a [`ChangeObserver`] of the registry: the operations hand it each change
//! with its before image, taken under the change's lock (`crates/vfs/src/changes.rs`). It only
//! keeps them in memory there (an observer must not call the registry); the call that made
//! them writes them out before it is answered ([`Journal::finish`]), through the privileged
//! capability minted for the internal root `/llm-journal`, which agents cannot name.
//!
//! On disk, inside the journal's directory: `journal.jsonl`, one JSON line per entry (and one
//! per entry whose images the size bound dropped), appended and synced once per call (a sync
//! that also stands for the directory syncs the call's writes held, ADR 0009); `journal.lock`,
//! the lock that tells a process whether it is alone on the journal; `journal.gate`, the lock
//! that keeps appends and a compaction apart;
//! `images/`, one file per kept file content. The operations keep a file they replace or
//! remove there by hard link (the journal offers its `images/` as the registry's
//! [`vfs::Keeper`]), so an image costs a link, not a copy; a file that cannot be linked
//! (another file system, object storage, a file with other links) is copied. An entry whose
//! parts and images pass 16 KiB (a tree's removal names every file of the tree) keeps them in
//! `images/CALL.ID.N.entry`, images of its own, and its line stays short ([`set_aside_in`]).
//!
//! A crash between an image and its change: before each change the journal appends an
//! *intent* line (the call, the operation, the paths, the images), unsynced (a killed process
//! loses no write it made). An intent whose call has neither an entry nor a `settled` line
//! (its call ended without a change) is listed as an incomplete entry, not undoable: undo
//! skips it with a note, and nothing is half-restored.
//!
//! What a killed process leaves in `images/` unnamed (an image made before its intent, a copy
//! written before its entry) is removed by the next process that finds itself alone on the
//! journal: every process holds the `flock` of `journal.lock` shared, so one that gets it
//! exclusive knows that no other is between an image and its line (`Journal::sweep`).
//!
//! Appending only lengthens the log; a compaction rewrites it and renames the new one into
//! place (`prepare`, `Journal::put_in_place`): at a start alone, and by any process once the
//! log has doubled. The new log is written while others go on appending; it is put in place,
//! with the lines appended meanwhile, under the gate (`journal.gate`): every append takes it
//! shared and checks that the file it holds is still the one named, so no line goes to a
//! replaced log.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use vfs::{AppendFile, Keeper, Saved};

use serde_json::{Value, json};

use crate::words::error_text;
use vfs::{
    AgentAccessor, Budget, CallId, Change, ChangeKind, ChangeObserver, ErrorKind, Image, MountRegistry, Precondition,
    PrivilegedAccessor, VirtualPath,
};

/// The session of the operator's own changes: `vfs undo`'s, and those of the commands `vfs
/// run` runs.
pub const OPERATOR_SESSION: &str = "operator";

/// The virtual root of the journal, internal.
pub const JOURNAL_ROOT: &str = "/llm-journal";

/// The default bound on the journal's bytes, its log and its images (`--journal-max-bytes`):
/// 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// The least bound a journal takes, 256 KiB: its log alone may take up to half of it (a
/// quarter once compacted, twice that before the next compaction), and a compacted log is
/// never bounded below 64 KiB.
pub const MIN_MAX_BYTES: u64 = 4 * COMPACT_FROM;

const LOG_FILE: &str = "/llm-journal/journal.jsonl";
/// Locked (`flock`) by every process that uses the journal, shared; only one alone gets it
/// exclusive. A file of its own, never replaced, so that a compaction, which replaces the
/// log, cannot leave a waiting process holding the lock of a log no longer in use.
const PRESENCE: &str = "/llm-journal/journal.lock";
/// Locked shared around each append, exclusively around a compaction (by any process, at any
/// time): an append never goes to a log that a compaction has just replaced, since it checks,
/// under this lock, that the log it holds still has its name.
const GATE: &str = "/llm-journal/journal.gate";
const IMAGES: &str = "/llm-journal/images";
/// The journal's own word, made once: the names of the images object stores keep for it
/// begin with it, so that a start alone can tell them from another journal's in the same
/// bucket (`Journal::sweep_stored`).
const ID_FILE: &str = "/llm-journal/journal.id";
/// The most object images of one mount a start looks at.
const SWEEP_STORED: usize = 100_000;
/// How long a start alone spends on the object images no line names (listing and removing
/// them; a store answers a thousand removals a request): past it the start goes on, and the
/// next start alone takes up what is left. A host waits for a stdio server's first answer.
const SWEEP_STORED_TIME: Duration = Duration::from_secs(5);
/// A log shorter than this is never compacted (nothing worth a rewrite), and the compacted
/// log's bound is never below it.
const COMPACT_FROM: u64 = 64 * 1024;
/// The least room kept allocated past the log's end before each change (at least half of it;
/// see `vfs::AppendFile::reserve`): the entry written after the change has room, so a disk
/// that fills in between cannot leave a change made without its entry. A change's entry is
/// well under a kilobyte; for larger ones (a tree's removal, which names each file of the
/// tree, or the undo of one, one part a file) the room kept grows with the entries owed
/// ([`Intended::owed`], [`entry_room`]).
const RESERVE_AHEAD: u64 = 64 * 1024;
/// What an entry takes besides its parts (its id, time, session, call, paths, places), at
/// most: counted for each change intended, and once for an undo's (one entry).
const ENTRY_FIELDS: u64 = 1024;
/// What the record of one file of a tree removed as it is kept takes at most, besides its path
/// (three times: the part's, the entry's paths, and its root's place, no longer than it) and
/// its crew's name: as an item of the tree's image, or, should the removal stop part way, as
/// an entry of its own with its image ([`Journal::grows`]). Such an entry measured 428 bytes
/// besides its path's two spellings.
const FILE_ROOM: u64 = 512;
/// How much a removal's record may grow before the room kept for it is looked at again.
const GROW_STEP: u64 = 16 * 1024;
/// How many stretches other processes appended (`State::unread`), and how many bytes of
/// them, are read alone at a bound; past either, the log is counted again whole.
const UNREAD_STRETCHES: usize = 256;
const UNREAD_BYTES: u64 = 4 * 1024 * 1024;
/// One read of the log or of an image: as much as one privileged read returns.
const CHUNK: usize = vfs::VIEW_READ_BYTES;

/// One change, as observed, waiting for its call to end.
/// A change as its intent and its commit both tell it: what, where, and where to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChangeKey {
    kind: ChangeKind,
    path: String,
    to: Option<String>,
}

impl ChangeKey {
    fn of(change: &Change<'_>) -> Self {
        Self {
            kind: change.kind,
            path: change.path.as_str().to_owned(),
            to: change.to.map(|to| to.as_str().to_owned()),
        }
    }
}

#[derive(Debug)]
struct Observed {
    call: CallId,
    time: SystemTime,
    /// This process's count of changes when it was told: with `time`, the entry's id, so
    /// that entries sort in the order their changes were made, not the order their calls
    /// ended (a change of the view's, written with the next call's, is older than it).
    sequence: u64,
    kind: ChangeKind,
    path: String,
    to: Option<String>,
    version: Option<String>,
    image: Option<Image>,
    /// A directory made on the way to the call's next change.
    on_the_way: bool,
}

/// Who a call is for, and whether it undoes an entry.
#[derive(Debug, Clone)]
struct CallInfo {
    session: String,
    undoes: Option<String>,
    /// An undo's asker: the call of the request that asked for it (an agent's `undo_changes`,
    /// whose exchange-log line carries that id), when it is not the undo's own call.
    asked_by: Option<String>,
    /// An undo's paths: those of the entry it undoes.
    paths: Vec<String>,
}

/// What the journal knows of a call that told an intent.
#[derive(Debug, Default, Clone, Copy)]
struct Intended {
    /// The call returned ([`ChangeObserver::call_ended`]).
    ended: bool,
    /// An entry of the call's was written.
    written: bool,
    /// The bytes the entries of the changes it intended take at most, once written: kept
    /// allocated past the log's end until they are ([`Journal::intends`],
    /// [`Journal::grows`]).
    owed: u64,
    /// What `owed` was when the room was last made sure of, and [`GROW_STEP`] past it: the
    /// room a removal's growth may take before it is looked at again.
    reserved_for: u64,
}

#[derive(Debug, Default)]
struct State {
    pending: Vec<Observed>,
    /// The images of changes intended whose content the operation copied (it could not link
    /// it), as written into `images/` before the change, by call: each change's, once told,
    /// takes its place ([`Journal::written_copies`]).
    copies: HashMap<CallId, Vec<(ChangeKey, Image)>>,
    calls: HashMap<CallId, CallInfo>,
    intended: HashMap<CallId, Intended>,
    /// True while `Journal::live` holds the images kept, but for the lines of `unread`
    /// (false: not counted yet, or counted before what the log says could be read).
    counted: bool,
    /// Where the log ended after this process's last append, as far as it knows: a log found
    /// longer was written by another process too, whose images this one has not counted.
    log_end: Option<u64>,
    /// The stretches of the log other processes appended between this one's appends (start,
    /// end), not yet counted: read at the next bound (`Journal::count_unread`), not the whole
    /// log again.
    unread: Vec<(u64, u64)>,
    /// Moved on each time the count is found stale, so that a count made before cannot be
    /// stored over the finding.
    generation: u64,
    /// True while `Journal::bound` reads the whole log: what other processes append
    /// meanwhile is noted in `unread` as when the count stands, and what of it lies past
    /// where the read stopped is counted next (without, every own append while two
    /// processes write at once would send the next bound back to the whole log).
    loading: bool,
    /// Where the log's end must reach before it is compacted again
    /// (`Journal::compact_if_grown`, [`compact_at`]).
    compact_at: u64,
    /// What the calls whose entries are being written owe ([`Intended::room`]), from when
    /// they are settled until their lines are appended ([`Owing`]).
    writing: u64,
    /// An append failed, perhaps after part of it was written: the next one begins with a
    /// newline, so that a cut line stays a line of its own (skipped by every reader) and
    /// does not take the next one with it.
    cut: bool,
    /// The calls of this process that told an intent and are over, newest last (at most
    /// [`FINISHED_KEPT`]): a reader that found one's intent without its entry read the log
    /// before the entry was appended, and the call is no crash (`Journal::entries`).
    finished: std::collections::VecDeque<CallId>,
}

impl Intended {
    /// The room kept for its entries: what they take at most, or, for a removal that grows,
    /// what was last made sure of.
    fn room(&self) -> u64 {
        self.owed.max(self.reserved_for)
    }
}

/// The room of the entries a `finish` is writing ([`State::writing`]), given back when it is
/// done, whatever way it ends.
struct Owing<'j> {
    journal: &'j Journal,
    bytes: u64,
}

impl Drop for Owing<'_> {
    fn drop(&mut self) {
        let mut state = self.journal.state();
        state.writing = state.writing.saturating_sub(self.bytes);
    }
}

/// What a `finish` takes out of the state, to write ([`State::finished`]).
struct Finished {
    /// The changes whose entries it writes: the call's own, and those of calls nobody began.
    observed: Vec<Observed>,
    info: Option<CallInfo>,
    /// The calls over with no entry: each gets a `settled` line.
    settle: Vec<CallId>,
    /// The calls over.
    over: Vec<CallId>,
    /// The room their entries were kept ([`State::writing`]).
    owing: u64,
}

impl State {
    /// Takes the changes `call`'s finish writes, and settles the calls that are over: its own,
    /// and those that ended (the view's). One with no entry gets a line saying so, so that its
    /// intent is not taken for a crash. What they owe stays owed until their entries are
    /// appended ([`Owing`]).
    fn finished(&mut self, call: &CallId) -> Finished {
        let known: HashSet<CallId> = self.calls.keys().filter(|known| *known != call).cloned().collect();
        let (mine, others): (Vec<Observed>, Vec<Observed>) =
            std::mem::take(&mut self.pending).into_iter().partition(|change| !known.contains(&change.call));
        self.pending = others;
        for change in &mine {
            if let Some(intended) = self.intended.get_mut(&change.call) {
                intended.written = true;
            }
        }
        let over: Vec<CallId> = self
            .intended
            .iter()
            .filter(|(intended, what)| *intended == call || (what.ended && !known.contains(intended)))
            .map(|(intended, _)| intended.clone())
            .collect();
        let owing: u64 = over.iter().filter_map(|over| self.intended.get(over)).map(Intended::room).sum();
        self.writing += owing;
        let settle: Vec<CallId> = over.iter().filter_map(|intended| self.end(intended.clone())).collect();
        let info = self.calls.remove(call);
        Finished { observed: mine, info, settle, over, owing }
    }

    /// Every entry this process owes: those of the calls running that told an intent, and
    /// those being written. Calls running at once append into the same room.
    fn owed(&self) -> u64 {
        self.intended.values().map(Intended::room).sum::<u64>() + self.writing
    }

    /// The image of `change` with its copies as [`Journal::intends`] wrote them, when it
    /// wrote some: taken from those kept for its call, the first that matches.
    fn written_copies(&mut self, change: &Change<'_>) -> Option<Image> {
        let copies = self.copies.get_mut(change.call)?;
        let key = ChangeKey::of(change);
        let index = copies.iter().position(|(written, _)| *written == key)?;
        Some(copies.remove(index).1)
    }

    /// Ends what is known of `call`'s intent: remembered among the calls over
    /// ([`State::finished`]); returned when it wrote no entry (its settling line is due).
    fn end(&mut self, call: CallId) -> Option<CallId> {
        let unwritten = self.intended.remove(&call).is_some_and(|what| !what.written);
        // The copies of a change intended and then not made: its entry will not name them.
        self.copies.remove(&call);
        if self.finished.len() == FINISHED_KEPT {
            self.finished.pop_front();
        }
        self.finished.push_back(call.clone());
        unwritten.then_some(call)
    }

    /// The images are counted again, from the whole log, before the bound is next applied.
    fn forget_count(&mut self) {
        self.counted = false;
        self.unread.clear();
        self.generation += 1;
    }
}

/// The journal of one launch.
#[derive(Debug)]
pub struct Journal {
    max_bytes: u64,
    /// The hosted crew whose endpoint writes through this journal (`None`: the daemon's `/mcp`,
    /// a stdio server, the operator's commands): each entry names it, and the size bound drops
    /// the images of the tenant that holds the most first ([`Live::next_to_drop`]).
    tenant: Option<String>,
    /// Weak: the registry this journal observes holds it (a strong capability would keep
    /// both, with the journal's files and its presence lock, for as long as the process
    /// lives, and a later launch on the journal would never find itself alone).
    access: OnceLock<vfs::WeakPrivilegedAccessor>,
    /// The registry of a journal opened only to be read ([`open_journal`]): it does not
    /// observe into the journal, and nothing else holds it.
    reading: OnceLock<MountRegistry>,
    keeper: OnceLock<Keeper>,
    /// The log, held open for the intents (told under a change's lock: no registry call).
    intents: Mutex<Option<AppendFile>>,
    /// The presence lock's file, held (its lock shared) for as long as the journal lives.
    presence: Mutex<Option<AppendFile>>,
    /// The gate's file ([`GATE`]), locked only with `intents` held.
    gate: OnceLock<AppendFile>,
    /// The bound a compaction brings the log within (`log_bound`).
    log_bound: OnceLock<u64>,
    /// The most one file of an entry's parts holds (`aside_piece`), from the registry's
    /// write cap, set when it is attached.
    aside_piece: OnceLock<usize>,
    /// The launch's agent-facing roots and where their files lie
    /// (`MountRegistry::mount_places`): recorded with each entry, and compared by its undo.
    places: OnceLock<Vec<(String, String)>>,
    /// Why the log could not be opened to be written, when it could not.
    unwritable_log: OnceLock<String>,
    /// Set by the operator's `vfs undo --any-place`: the places are not compared.
    any_place: std::sync::atomic::AtomicBool,
    state: Mutex<State>,
    /// Serializes this process's calls' entries and the size bound they apply (a running
    /// compaction writes outside it: `Journal::compact_if_grown`).
    writing: Mutex<()>,
    /// Held by the thread that compacts the log while it runs (`Journal::compact_if_grown`).
    compacting: Mutex<()>,
    /// The entries this process is undoing now: a second undo of one of them, asked for at
    /// the same time, is skipped (`Journal::undo`).
    undoing: Mutex<HashSet<String>>,
    /// The sessions choosing and undoing their own changes now ([`Journal::undo_turn`]),
    /// and the signal that one let go of its turn.
    turns: (Mutex<HashSet<String>>, std::sync::Condvar),
    /// The entries whose images are kept, as this process counted them (`State::counted`
    /// says whether the count stands); used only by `Journal::bound`, under `writing`.
    live: Mutex<Live>,
    /// What reads of the log took, kept while a batch is held ([`Journal::batch`]).
    batching: Mutex<Batching>,
}

/// The entries whose images are kept (not dropped), oldest first, with their bytes: what the
/// size bound counts and drops from, kept up to date from this process's entries and the
/// lines others append, so that the log is read whole only when it was replaced.
#[derive(Debug, Default)]
struct Live {
    entries: std::collections::BTreeMap<String, LiveEntry>,
    bytes: u64,
    /// The bytes each tenant's entries keep (`""`: entries of no hosted crew).
    tenants: HashMap<String, u64>,
}

#[derive(Debug)]
struct LiveEntry {
    bytes: u64,
    images: Vec<String>,
    tenant: String,
}

impl Live {
    /// The count of a whole log's entries. An intent without its entry is left out: its call
    /// may be running (its entry, added later under its own id, names the same images, which
    /// the oldest-first drop would then remove under a listed entry); a stopped call's images
    /// are the sweep's.
    fn of(entries: Vec<Entry>) -> Self {
        let mut live = Self::default();
        for entry in entries.into_iter().filter(|entry| !entry.dropped && !entry.incomplete) {
            live.add(entry.id, entry.image_bytes, entry.images, entry.tenant);
        }
        live
    }

    fn add(&mut self, id: String, bytes: u64, images: Vec<String>, tenant: String) {
        if bytes == 0 {
            return;
        }
        if let std::collections::btree_map::Entry::Vacant(vacant) = self.entries.entry(id) {
            *self.tenants.entry(tenant.clone()).or_default() += bytes;
            vacant.insert(LiveEntry { bytes, images, tenant });
            self.bytes += bytes;
        }
    }

    fn remove(&mut self, id: &str) -> Option<LiveEntry> {
        let removed = self.entries.remove(id)?;
        self.bytes -= removed.bytes;
        if let Some(held) = self.tenants.get_mut(&removed.tenant) {
            *held = held.saturating_sub(removed.bytes);
            if *held == 0 {
                self.tenants.remove(&removed.tenant);
            }
        }
        Some(removed)
    }

    /// The entry the size bound drops next: the oldest of the tenant whose entries keep the
    /// most bytes (of those that keep as much, the one with the oldest entry). One journal
    /// serves every endpoint of a daemon: so one crew's changes push out its own oldest
    /// images, not another crew's, until it keeps no more than the other does. Within one
    /// tenant (a stdio server, every process without crews), the oldest entry.
    /// An entry `pinned` names (chosen by a running undo) is passed over: the tenant's next
    /// oldest goes instead, or none (the bound is passed while the undo runs, rather than
    /// another tenant's entries going for this one's).
    fn next_to_drop(&self, pinned: &HashSet<String>) -> Option<String> {
        let most = self.tenants.values().max()?;
        let oldest = self
            .entries
            .iter()
            .find(|(id, entry)| self.tenants.get(&entry.tenant) == Some(most) && !pinned.contains(id.as_str()));
        oldest.map(|(id, _)| id.clone())
    }

    /// Takes in one line another process appended: its entry adds its images, its
    /// `dropped` line takes away the entry it names (once, however many processes dropped
    /// it). False for a line that is not one of the log's.
    fn apply(&mut self, line: &Value) -> bool {
        if line.get("intent").is_some() || line.get("settled").is_some() {
            return true;
        }
        if let Some(id) = line.get("dropped").and_then(Value::as_str) {
            self.remove(id);
            return true;
        }
        let Some(id) = line.get("id").and_then(Value::as_str) else { return false };
        if line.get("dropped") != Some(&Value::Bool(true)) {
            let images = line
                .get("images")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            let tenant = line.get("tenant").and_then(Value::as_str).unwrap_or_default().to_owned();
            self.add(id.to_owned(), line.get("image_bytes").and_then(Value::as_u64).unwrap_or(0), images, tenant);
        }
        true
    }
}

/// Parses a journal's bound (`--journal-max-bytes`): a byte count ([`parse_bytes`]) of at
/// least [`MIN_MAX_BYTES`].
///
/// # Errors
/// A message naming what is wrong and the least bound taken.
pub fn parse_journal_bound(text: &str) -> Result<u64, String> {
    let bytes = parse_bytes(text)?;
    check_journal_bound(bytes).map_err(|why| format!("`{}` is below {why}", text.trim()))?;
    Ok(bytes)
}

/// `Err` with the least bound and why it is the least, to follow "is below", when `bytes`
/// is below [`MIN_MAX_BYTES`].
pub(crate) fn check_journal_bound(bytes: u64) -> Result<(), String> {
    if bytes < MIN_MAX_BYTES {
        Err(format!(
            "{}, the least a journal keeps (its log may grow to {} before it is compacted, and takes at most half)",
            byte_words(MIN_MAX_BYTES),
            byte_words(2 * COMPACT_FROM)
        ))
    } else {
        Ok(())
    }
}

/// A byte count as `--journal-max-bytes` takes it: with the largest suffix that divides it.
pub(crate) fn byte_words(bytes: u64) -> String {
    match bytes {
        0 => "0".to_owned(),
        _ if bytes.is_multiple_of(1 << 30) => format!("{}G", bytes >> 30),
        _ if bytes.is_multiple_of(1 << 20) => format!("{}M", bytes >> 20),
        _ if bytes.is_multiple_of(1 << 10) => format!("{}K", bytes >> 10),
        _ => bytes.to_string(),
    }
}

/// Parses a byte count with an optional `K`, `M` or `G` suffix (powers of 1024).
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let (digits, factor) = match trimmed.char_indices().last() {
        Some((at, 'K' | 'k')) => (&trimmed[..at], 1u64 << 10),
        Some((at, 'M' | 'm')) => (&trimmed[..at], 1 << 20),
        Some((at, 'G' | 'g')) => (&trimmed[..at], 1 << 30),
        _ => (trimmed, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|count| count.checked_mul(factor))
        .ok_or_else(|| format!("`{text}` is not a byte count (digits, optionally followed by K, M or G)"))
}

impl Journal {
    /// A journal bounded to `max_bytes` (its log and its images; at least [`MIN_MAX_BYTES`]:
    /// a launch refuses less), not yet attached to its registry.
    #[must_use]
    pub fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            tenant: None,
            access: OnceLock::new(),
            reading: OnceLock::new(),
            keeper: OnceLock::new(),
            intents: Mutex::new(None),
            presence: Mutex::new(None),
            gate: OnceLock::new(),
            log_bound: OnceLock::new(),
            aside_piece: OnceLock::new(),
            places: OnceLock::new(),
            unwritable_log: OnceLock::new(),
            any_place: std::sync::atomic::AtomicBool::new(false),
            state: Mutex::default(),
            writing: Mutex::new(()),
            compacting: Mutex::new(()),
            undoing: Mutex::default(),
            turns: (Mutex::default(), std::sync::Condvar::new()),
            live: Mutex::new(Live::default()),
            batching: Mutex::default(),
        }
    }

    /// The same journal, written for the hosted crew `tenant` (`None`: no crew): each entry
    /// names it, and past the bound the images of the tenant that keeps the most go first.
    #[must_use]
    pub fn for_tenant(mut self, tenant: Option<String>) -> Self {
        self.tenant = tenant;
        self
    }

    /// Attaches the journal to the registry that observes into it (it must have the internal
    /// root [`JOURNAL_ROOT`]); returns false when it has none. The process then holds the
    /// log's shared lock for as long as the journal lives; when it is the only process using
    /// the journal, it first removes the images a killed process left behind
    /// (`Journal::sweep`).
    pub fn attach(&self, registry: &MountRegistry) -> bool {
        self.attach_with(registry, true)
    }

    /// Why the log could not be opened to be written when the journal was attached, if it
    /// could not: a process that changes things is then refused at its launch.
    #[must_use]
    pub fn unwritable_log(&self) -> Option<&str> {
        self.unwritable_log.get().map(String::as_str)
    }

    /// [`Journal::attach`] without the sweep: for a process that changes nothing (a dry run).
    pub fn attach_unswept(&self, registry: &MountRegistry) -> bool {
        self.attach_with(registry, false)
    }

    fn attach_with(&self, registry: &MountRegistry, sweeps: bool) -> bool {
        #[expect(
            clippy::disallowed_methods,
            reason = "the journal holds the one privileged capability for /llm-journal"
        )]
        let Some(capability) = registry.mint_privileged(JOURNAL_ROOT) else {
            return false;
        };
        let _ = self.places.set(registry.mount_places());
        let bound = *self.log_bound.get_or_init(|| log_bound(self.max_bytes, registry.limits().write_bytes));
        let _ = self.aside_piece.set(aside_piece(registry.limits().write_bytes));
        // Without a keeper (object storage), images are copied; without the log held open,
        // intents are not written (the entries still are).
        match capability.keeper(IMAGES) {
            Ok(keeper) => {
                // A tree whose store-made copies pass the bound beside the compacted log
                // would be dropped at once.
                keeper.bound_stored(self.max_bytes.saturating_sub(bound));
                // Only where a store keeps images, and made only by a process that changes
                // things (not a listing, not a dry run).
                if registry.has_object_storage()
                    && let Some(tag) = journal_tag(&capability, sweeps)
                {
                    keeper.tag_stored(&tag);
                }
                let _ = self.keeper.set(keeper);
            }
            Err(error) => tracing::debug!(target: "vfs::journal", %error, "images will be copied"),
        }
        match capability.open_append(GATE) {
            Ok(gate) => {
                let _ = self.gate.set(gate);
            }
            Err(error) => tracing::warn!(target: "vfs::journal", %error, "the journal's log will not be compacted"),
        }
        // The presence lock first: where it cannot be taken (a file system without `flock`),
        // no process can tell that it is alone, and none sweeps or compacts.
        let presence = match capability.open_append(PRESENCE) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(target: "vfs::journal", %error, "the journal's lock was not taken");
                None
            }
        };
        if let Some(presence) = presence.as_ref() {
            match presence.lock_shared() {
                // Alone (the exclusive lock is free), this process may remove what no line
                // names and rewrite the log: no other process is between an image and its
                // line, or holds the log open.
                Ok(()) if sweeps => {
                    if presence.try_lock_exclusive().unwrap_or(false) && !older_process_on(&capability) {
                        self.tidy(&capability, bound);
                    }
                    if let Err(error) = presence.lock_shared() {
                        tracing::warn!(target: "vfs::journal", %error, "the journal's lock was not taken");
                    }
                }
                Ok(()) => {}
                Err(error) => tracing::warn!(target: "vfs::journal", %error, "the journal's lock was not taken"),
            }
        }
        // The log is opened after the lock: a compaction by another process, while this one
        // waited for it, has replaced the file.
        let log = match capability.open_append(LOG_FILE) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::debug!(target: "vfs::journal", %error, "intents will not be written");
                let _ = self.unwritable_log.set(without_path(&error));
                None
            }
        };
        *self.presence.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = presence;
        self.state().compact_at = compact_at(log.as_ref().and_then(|log| log.length().ok()).unwrap_or(0), bound);
        *self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = log;
        let _ = self.access.set(capability.downgrade());
        true
    }

    /// What a process alone on the journal does first: ends a last line a killed process
    /// cut short (`end_cut_line`), reads the log once, removes the images no line names
    /// (`Journal::sweep`) and the files of stages cut short, and compacts the log when that
    /// is worth it ([`prepare`], `Journal::put_in_place`), to at most `bound` bytes. Nothing
    /// is removed or rewritten when the log cannot be read.
    fn tidy(&self, access: &PrivilegedAccessor, bound: u64) {
        end_cut_line(access);
        let Ok(log) = access.open_read(LOG_FILE) else { return };
        let Ok(mut scan) = Scan::read(&log) else { return };
        if scan.read_aside(access, true) {
            let kept = scan.kept();
            self.sweep(access, &kept);
            self.sweep_stored(&kept);
        } else {
            tracing::warn!(
                target: "vfs::journal",
                "images/ not swept: a file of an entry's parts (`*.entry`) could not be read, and \
                 what it names would have been taken for images no line names"
            );
        }
        // The gate too: a process whose presence lock failed still appends (under the gate).
        let gate = self.gate.get().filter(|gate| gate.lock_exclusive().is_ok());
        // What a process killed while it wrote a copied image, or compacted, left: alone, and
        // with the gate, no stage is in flight into either directory.
        for directory in [JOURNAL_ROOT, IMAGES] {
            if let Err(error) = access.remove_stages(directory) {
                tracing::debug!(target: "vfs::journal", directory, %error, "stages not looked for");
            }
        }
        let compacted = prepare(access, &log, &scan, bound).and_then(|prepared| match prepared {
            Some(compaction) => self.put_in_place(access, compaction, &log, scan.end),
            None => Ok(()),
        });
        if let Err(error) = compacted {
            tracing::warn!(target: "vfs::journal", %error, "the journal's log was not compacted");
        }
        if let Some(gate) = gate {
            let _ = gate.unlock();
        }
    }

    /// Removes the files of `images/` that no line of the log names: images a process made
    /// and was killed before it wrote the line that names them (an image is taken before its
    /// change's intent, a copied image written before its entry), and images that the size
    /// bound dropped but could not remove. Kept: every image a line names, and the files of a
    /// call whose intent has no entry (a recursive delete that was killed had moved them into
    /// `images/`, and they may be all that is left of the files). A line that is not JSON
    /// names nothing (no entry is read from it either). Run only
    /// by a process that holds the presence lock exclusively: no other is making images or
    /// appending. Object images, kept in their buckets, are `Journal::sweep_stored`'s.
    fn sweep(&self, access: &PrivilegedAccessor, kept: &Kept) {
        let Ok(listing) = access.entries(IMAGES) else { return };
        let (mut removed, mut stopped) = (0usize, 0usize);
        for entry in listing.entries.iter().filter(|entry| entry.kind == vfs::EntryKind::File) {
            if !kept.named.contains(&entry.name) && kept.of_incomplete(&entry.name) {
                stopped += 1;
            } else if !kept.keeps(&entry.name) {
                self.forget_one(access, &entry.name);
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(target: "vfs::journal", removed, "removed images that no line names");
        }
        if stopped > 0 {
            tracing::warn!(
                target: "vfs::journal",
                "images/ keeps {stopped} files of changes vfs stopped during (`vfs journal list` shows \
                 them as incomplete; their names begin with the call's id): remove them by hand when \
                 they are not wanted"
            );
        }
    }

    /// [`Journal::sweep`] of the images object stores keep for this journal in their
    /// mounts' image areas: those that begin with this journal's tag ([`ID_FILE`]; another
    /// journal sharing the bucket has its own, and images from before the tag have none, so
    /// neither is touched) and that no line names (a process killed between a store's copy
    /// and the intent that names it, or an image the bound dropped and could not remove).
    /// Those of a call stopped during its change are kept, as `images/`'s are.
    fn sweep_stored(&self, kept: &Kept) {
        let Some(keeper) = self.keeper.get() else { return };
        let until = Instant::now() + SWEEP_STORED_TIME;
        let listed = keeper.stored_images(SWEEP_STORED, until);
        for missed in &listed.missed {
            tracing::warn!(
                target: "vfs::journal",
                "object images not all looked for ({}): the next start alone looks again",
                error_text(missed)
            );
        }
        // By name, not by path: a launch that mounts the bucket at another root lists the
        // same images under another path, and they are still the ones the lines name.
        let base = |path: &str| path.rsplit_once('/').map_or(path, |(_, name)| name).to_owned();
        let named: HashSet<String> =
            kept.named.iter().filter(|path| path.starts_with('/')).map(|path| base(path)).collect();
        let mut stopped = 0usize;
        let mut unnamed = Vec::new();
        for path in listed.paths {
            // `<root>/<area>/<tag>-<call>.<process>.<n>`: the call's id after the tag.
            let name = base(&path);
            if named.contains(&name) {
                continue;
            }
            if name.split_once('-').is_some_and(|(_, rest)| kept.of_incomplete(rest)) {
                stopped += 1;
            } else {
                unnamed.push(path);
            }
        }
        let removed = keeper.forget_stored_all(&unnamed, until);
        if removed > 0 {
            tracing::info!(target: "vfs::journal", removed, "removed object images that no line names");
        }
        if removed < unnamed.len() {
            tracing::warn!(
                target: "vfs::journal",
                "{} object images that no line names are left (the store did not remove them within {} s): \
                 the next start alone removes them",
                unnamed.len() - removed,
                SWEEP_STORED_TIME.as_secs()
            );
        }
        if stopped > 0 {
            tracing::warn!(
                target: "vfs::journal",
                "the object mounts' image areas keep {stopped} images of changes vfs stopped during \
                 (`vfs journal list` shows them as incomplete; their names hold the call's id after \
                 the journal's word): remove them by hand when they are not wanted"
            );
        }
    }

    /// Puts a compacted log in place ([`prepare`] wrote it): what was appended to `log` after
    /// the scan's whole lines (from `end`) is added as it is, then the new log is renamed over
    /// the old one, and the images of the entries it dropped are removed. Called with no
    /// append possible meanwhile: by a process alone on the journal, or under the gate's
    /// exclusive lock (`Journal::compact_if_grown`), so that every append after it goes to
    /// the new log. A failure leaves the old log as it was.
    fn put_in_place(
        &self,
        access: &PrivilegedAccessor,
        compaction: Compaction,
        log: &vfs::ReadHandle,
        end: u64,
    ) -> Result<(), String> {
        let Compaction { mut staged, written, forget, length, kept } = compaction;
        let failed = |error: vfs::Error| format!("{LOG_FILE}: {}", error_text(&error));
        let mut at = written;
        loop {
            let chunk = log.read_at(end + (at - written), CHUNK).map_err(failed)?;
            if chunk.is_empty() {
                break;
            }
            staged.write_at(at, &chunk).map_err(failed)?;
            at += chunk.len() as u64;
        }
        staged.commit(&Precondition::Any).map_err(failed)?;
        for name in &forget {
            self.forget_image(access, name);
        }
        tracing::info!(
            target: "vfs::journal",
            "compacted the journal's log from {length} to {kept} bytes{}{}",
            if at > written { format!(" (and {} bytes appended meanwhile)", at - written) } else { String::new() },
            if forget.is_empty() { String::new() } else { format!(" ({} images of its oldest entries dropped)", forget.len()) }
        );
        Ok(())
    }

    /// The journal's capability, while the registry it is attached to lives.
    fn access(&self) -> Option<PrivilegedAccessor> {
        self.access.get()?.upgrade()
    }

    /// [`Journal::access`], to write `changes` changes: when the registry is gone (one
    /// attached only for a while), they would go unrecorded without a word.
    fn access_for(&self, changes: usize) -> Option<PrivilegedAccessor> {
        let access = self.access();
        if access.is_none() && changes > 0 {
            tracing::warn!(
                target: "vfs::journal",
                "{changes} changes not journaled: the registry the journal was attached to is gone"
            );
        }
        access
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Says who `call` is for before it runs, and which entry it undoes, if any.
    pub fn begin(&self, call: &CallId, session: &str, undoes: Option<&Entry>) {
        let info = CallInfo {
            session: session.to_owned(),
            undoes: undoes.map(|entry| entry.id.clone()),
            asked_by: None,
            paths: undoes.map(|entry| entry.paths.clone()).unwrap_or_default(),
        };
        self.state().calls.insert(call.clone(), info);
    }

    /// Takes `calls` off the calls over ([`State::finished`]): their entries could not be
    /// written, so their intents in the log are what a crash leaves, and are listed so.
    fn unfinish(&self, calls: &[CallId]) {
        self.state().finished.retain(|finished| !calls.contains(finished));
    }

    /// Writes out the changes `call` made (and any change of a call nobody began), durably,
    /// before the call is answered. A failure is the operator's to see in the log.
    pub fn finish(&self, call: &CallId) {
        self.finish_with(call, vfs::HeldSyncs::default());
    }

    /// [`Journal::finish`] of a call whose directory syncs were `held`
    /// ([`AgentAccessor::with_directory_syncs_held`]): the log's one sync makes them durable
    /// with the call's entries, where the file system allows; otherwise (and whenever no
    /// entry is written) each is synced on its own.
    pub fn finish_with(&self, call: &CallId, mut held: vfs::HeldSyncs) {
        let Finished { observed, info: infos, settle, over, owing } = self.state().finished(call);
        let _owing = Owing { journal: self, bytes: owing };
        if observed.is_empty() && settle.is_empty() {
            return;
        }
        let Some(access) = self.access_for(observed.len()) else {
            self.unfinish(&over);
            return;
        };
        let access = &access;
        let writing = self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let default = CallInfo { session: "-".to_owned(), undoes: None, asked_by: None, paths: Vec::new() };
        let mut added = Vec::new();
        let (this, others): (Vec<Observed>, Vec<Observed>) =
            observed.into_iter().partition(|change| change.call == *call);
        let info = infos.unwrap_or_else(|| default.clone());
        let mut groups = if info.undoes.is_some() {
            vec![(this, info)]
        } else {
            entries_of(this).into_iter().map(|group| (group, info.clone())).collect()
        };
        groups.extend(entries_of(others).into_iter().map(|group| (group, default.clone())));
        // The links are durable with the lines that name them (a stored image, an object's,
        // is its store's: durable once the store answered).
        let linked = |change: &Observed| kept_names(change.image.as_ref()).iter().any(|name| !name.starts_with('/'));
        if let Some(keeper) = self.keeper.get()
            && groups.iter().any(|(group, _)| group.iter().any(linked))
        {
            keeper.sync_with(&mut held);
        }
        let mut lines = String::new();
        let removals: HashSet<CallId> = groups
            .iter()
            .flat_map(|(group, _)| group.iter())
            .filter(|change| change.kind == ChangeKind::Remove)
            .map(|change| change.call.clone())
            .collect();
        for (group, info) in groups {
            if group.is_empty() {
                continue;
            }
            let piece = self.aside_piece.get().copied().unwrap_or(ASIDE_PIECE);
            match entry_line(access, &group, &info, self.places.get().map_or(&[], Vec::as_slice), piece) {
                Ok((mut line, bytes)) => {
                    if let Some(tenant) = &self.tenant {
                        line["tenant"] = json!(tenant);
                    }
                    lines.push_str(&line.to_string());
                    lines.push('\n');
                    added.push(added_entry(&line, bytes));
                }
                Err(error) => {
                    tracing::warn!(target: "vfs::journal", %error, "journal entry not written");
                    let calls: Vec<CallId> = group.iter().map(|change| change.call.clone()).collect();
                    self.unfinish(&calls);
                }
            }
        }
        for call in settle {
            lines.push_str(&json!({ "settled": call.as_str() }).to_string());
            lines.push('\n');
        }
        if let Err(error) = self.append(access, &lines, held) {
            tracing::warn!(target: "vfs::journal", %error, "journal entries not written");
            self.unfinish(&over);
            return;
        }
        // A removal's record of the files it took is not needed once its entry is written.
        if let Some(keeper) = self.keeper.get() {
            for call in removals {
                keeper.forget_taking(&call);
            }
        }
        self.bound(access, added);
        // This process's other calls write on while the log is compacted (only putting the
        // new log in place holds their appends, as it holds other processes').
        drop(writing);
        self.compact_if_grown(access);
    }

    /// Compacts the log once it has grown to twice its length after the last compaction (and
    /// to [`COMPACT_FROM`]), while this process and others use it. The compacted log is
    /// written while every process goes on appending; only putting it in place, with the
    /// lines appended meanwhile, is done under the gate's exclusive lock, which every append
    /// takes shared, so that no line goes to the log it replaces. Unlike a start's, it
    /// removes no image that no line names (another process may be between an image and its
    /// line). One at a time in a process; of two processes, the second to take the gate
    /// finds the log it scanned replaced and puts nothing in place.
    fn compact_if_grown(&self, access: &PrivilegedAccessor) {
        let (Some(gate), Some(bound)) = (self.gate.get(), self.log_bound.get()) else { return };
        let grown = {
            let state = self.state();
            state.log_end.is_some_and(|end| end >= state.compact_at)
        };
        if !grown {
            return;
        }
        // Not while an undo has entries of this journal to reach: a compaction may drop them
        // (tried again at the next append once none is held). Another journal's pins, in the
        // same process, are not this one's business.
        let pinned_here = {
            let live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            pinned().keys().any(|id| live.entries.contains_key(id))
        };
        if pinned_here {
            return;
        }
        let Ok(_compacting) = self.compacting.try_lock() else { return };
        // The log scanned, and a handle that tells, under the gate, whether the name still
        // gives it (opened first: a log replaced between the two opens reads as replaced).
        let (anchor, log) = match (access.open_append(LOG_FILE), access.open_read(LOG_FILE)) {
            (Ok(anchor), Ok(log)) => (anchor, log),
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(target: "vfs::journal", error = %error_text(&error), "the journal's log was not compacted");
                return;
            }
        };
        let prepared =
            Scan::read(&log).map_err(|error| format!("{LOG_FILE}: {}", error_text(&error))).and_then(|mut scan| {
                scan.read_aside(access, false);
                Ok(prepare(access, &log, &scan, *bound)?.map(|compaction| (compaction, scan.end)))
            });
        let mut held = self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut reopened = false;
        let compacted = match prepared {
            Ok(Some((compaction, end))) => match gate.lock_exclusive() {
                Ok(()) => {
                    let put = if anchor.unnamed().unwrap_or(true) {
                        // Another process compacted it first.
                        Ok(false)
                    } else {
                        self.put_in_place(access, compaction, &log, end).map(|()| true)
                    };
                    // The log is taken again either way.
                    if let Ok(fresh) = access.open_append(LOG_FILE) {
                        *held = Some(fresh);
                        reopened = true;
                    }
                    let _ = gate.unlock();
                    put
                }
                Err(error) => Err(error.to_string()),
            },
            Ok(None) => Ok(false),
            Err(error) => Err(error),
        };
        if let Err(error) = &compacted {
            tracing::warn!(target: "vfs::journal", %error, "the journal's log was not compacted");
        }
        let length = held.as_ref().and_then(|log| log.length().ok());
        // With the log still held: a count of the stretches noted in the old log
        // (`Journal::count_unread`, under `intents`) must find the generation moved on.
        let mut state = self.state();
        // The log was taken again (replaced by this compaction or another process's), and the
        // images of entries dropped are gone: counted again before the bound is next applied.
        // Not taken again, the log's end stays where this process's last append left it: what
        // others appended since is still to be read as theirs.
        if compacted.as_ref().is_ok_and(|rewritten| *rewritten) || reopened {
            state.log_end = length;
            state.forget_count();
        }
        let length = length.or(state.log_end).unwrap_or(0);
        let next = compact_at(length, *bound);
        // Not worth a rewrite, failed, or left as long as the mark (intents of calls still
        // running kept): tried again once the log has grown by half (and by 64 KiB), not
        // at every append (each try reads the whole log).
        // (Taken again after another process's compaction: a fresh log, a fresh mark.)
        let fresh = compacted.as_ref().is_ok_and(|rewritten| *rewritten || reopened);
        state.compact_at =
            if fresh && next > length { next } else { length.saturating_add((length / 2).max(COMPACT_FROM)) };
        drop(state);
        drop(held);
    }

    /// Writes out every change no begun call made (the FUSE view's), durably.
    pub fn flush(&self) {
        self.finish(&CallId::new());
    }

    /// Drops the oldest images while the kept images and the log together exceed the bound.
    /// `added`: the entries this process just appended (id, image bytes, images).
    fn bound(&self, access: &PrivilegedAccessor, added: Vec<(String, u64, Vec<String>, String)>) {
        // Never read the journal with the state locked: the read is a call, whose end is
        // told to this observer (`call_ended`), which takes the state.
        let (counted, mut generation, unread) = {
            let mut state = self.state();
            (state.counted, state.generation, std::mem::take(&mut state.unread))
        };
        let mut live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // What other processes appended since: read alone, when it can be; else the log is
        // read whole (a long one takes a while: docs/performance.md), this process's new
        // entries with it.
        let mut incremental =
            counted && (unread.is_empty() || self.count_unread(access, &mut live, &unread, generation));
        let sizes: Vec<(String, u64)> = added.iter().map(|(id, bytes, _, _)| (id.clone(), *bytes)).collect();
        // Where the whole log's read stopped: the stretches noted meanwhile are counted
        // next from there on.
        let mut loaded_to = None;
        if incremental {
            for (id, bytes, images, tenant) in added {
                live.add(id, bytes, images, tenant);
            }
        } else {
            (generation, loaded_to) = self.load_whole(access, &mut live);
        }
        // The bound is on the journal's bytes: the log's, which only a compaction shortens
        // (`Journal::compact_if_grown`), and the images', which go oldest first.
        // The `dropped` lines go in one append (one sync).
        let mut log_bytes = self.log_length();
        // A compaction that landed since (this process's, which runs outside `writing`, or
        // another's, seen at an append) forgot entries this count still holds: dropping
        // from it would give up undoable entries for bytes no longer on disk. Counted again
        // (looked at after the log's length, which waits for a compaction putting its log
        // in place).
        if self.state().generation != generation {
            incremental = false;
            (generation, loaded_to) = self.load_whole(access, &mut live);
            log_bytes = self.log_length();
        }
        let mut lines = String::new();
        // An entry of this process's whose images pass the bound beside the log as it is
        // cannot be kept now: it goes first, not after every older entry, which dropping
        // would not make room for it (it would go next all the same). A log past its bound
        // is compacted after this count, not before: an entry that would fit beside the
        // compacted log is dropped too, where it does not fit beside the long one.
        let mut too_large =
            sizes.into_iter().filter(|(_, bytes)| bytes.saturating_add(log_bytes) > self.max_bytes).map(|(id, _)| id);
        // The entries a running undo chose stay until it reaches them: the bound is passed
        // meanwhile, rather than losing what the undo was asked to bring back.
        // (Copied only when something is to be dropped: most appends drop nothing.)
        let over = live.bytes + log_bytes > self.max_bytes;
        let pinned: HashSet<String> = if over { pinned().keys().cloned().collect() } else { HashSet::new() };
        while live.bytes + log_bytes + lines.len() as u64 > self.max_bytes {
            let next = too_large.find(|id| live.entries.contains_key(id) && !pinned.contains(id));
            let Some(oldest) = next.or_else(|| live.next_to_drop(&pinned)) else { break };
            let Some(entry) = live.remove(&oldest) else { break };
            for name in &entry.images {
                self.forget_image(access, name);
            }
            lines.push_str(&json!({ "dropped": oldest }).to_string());
            lines.push('\n');
        }
        if let Err(error) = self.append(access, &lines, vfs::HeldSyncs::default()) {
            tracing::warn!(target: "vfs::journal", %error, "journal entries dropped but not marked");
        }
        // The count stands only if the log was not found changed meanwhile (nor replaced).
        // One of the whole log has read the lines others appended before it stopped: what
        // they appended past that is counted next, and an append of this process's that
        // lands past it finds what lies between to be theirs, not what was read.
        let mut state = self.state();
        state.loading = false;
        state.counted = state.generation == generation && (incremental || loaded_to.is_some());
        if let (Some(end), true) = (loaded_to, state.counted) {
            state.unread = unread_past(&state.unread, end);
            state.log_end = state.log_end.map(|known| known.max(end));
        }
        if !state.counted {
            state.unread.clear();
        }
    }

    /// Counts the whole log into `live`: the generation it was read at (taken with `loading`
    /// set, under one lock, so that a stretch noted after the read began is kept for the next
    /// count), and where its whole lines end (`None`: it could not be read).
    fn load_whole(&self, access: &PrivilegedAccessor, live: &mut Live) -> (u64, Option<u64>) {
        let generation = {
            let mut state = self.state();
            state.loading = true;
            state.generation
        };
        let loaded = load_ending(access);
        let loaded_to = loaded.as_ref().map(|(_, end, _)| *end);
        *live = Live::of(loaded.map(|(entries, _, _)| entries).unwrap_or_default());
        (generation, loaded_to)
    }
}

impl Journal {
    /// The length of the log held, every process's appends included; where this process's
    /// last append left it when its length cannot be read.
    fn log_length(&self) -> u64 {
        let log = self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        log.as_ref().and_then(|log| log.length().ok()).or_else(|| self.state().log_end).unwrap_or(0)
    }

    /// Takes into `live` the lines other processes appended in `unread` (stretches of the log
    /// this process holds). False when they cannot be read so (the log was replaced, a
    /// stretch does not hold whole lines of the log's): the log is then read whole. Under the
    /// gate, shared (with the log held, as every use of the gate's lock is), so that no
    /// compaction replaces the log while it is read.
    fn count_unread(
        &self,
        access: &PrivilegedAccessor,
        live: &mut Live,
        unread: &[(u64, u64)],
        generation: u64,
    ) -> bool {
        let log = self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let gate = self.gate.get().filter(|gate| gate.lock_shared().is_ok());
        let counted = (|| {
            // The stretches are of the log held when they were noted: not if it was taken
            // again since (a reopen, under `intents`, moves the generation on).
            if self.state().generation != generation || log.as_ref()?.unnamed().unwrap_or(true) {
                return None;
            }
            let reader = access.open_read(LOG_FILE).ok()?;
            for &(start, end) in unread {
                // A stretch begins where a line of this process's ended.
                if start > 0 && reader.read_at(start - 1, 1).ok()? != b"\n" {
                    return None;
                }
                let mut bytes = Vec::new();
                while (bytes.len() as u64) < end - start {
                    let want = usize::try_from(end - start).unwrap_or(usize::MAX) - bytes.len();
                    let chunk = reader.read_at(start + bytes.len() as u64, want.min(CHUNK)).ok()?;
                    if chunk.is_empty() {
                        return None;
                    }
                    bytes.extend_from_slice(&chunk);
                }
                for line in bytes.strip_suffix(b"\n")?.split(|&byte| byte == b'\n') {
                    if !live.apply(&serde_json::from_slice::<Value>(line).ok()?) {
                        return None;
                    }
                }
            }
            Some(())
        })();
        if let Some(gate) = gate {
            let _ = gate.unlock();
        }
        counted.is_some()
    }
}

/// What of the stretches `unread` lies past `end`, where a read of the whole log stopped (the
/// end of a whole line): the rest it read.
fn unread_past(unread: &[(u64, u64)], end: u64) -> Vec<(u64, u64)> {
    unread.iter().filter(|(_, to)| *to > end).map(|&(from, to)| (from.max(end), to)).collect()
}

/// Opens the journal in `directory` for reading (`vfs journal list`), a host path the operator
/// named, with the operator's `authority`.
///
/// # Errors
/// The directory does not exist or cannot be mounted.
pub fn open_journal(
    directory: &std::path::Path,
    authority: vfs::AmbientAuthority,
) -> Result<Journal, crate::HostError> {
    let spec = vfs::MountSpec::local(
        directory.to_path_buf(),
        crate::launch::runner_root(JOURNAL_ROOT),
        vfs::Rights::ReadWrite,
    );
    let registry = MountRegistry::builder().internal(spec).build(authority).map_err(crate::HostError::from)?;
    let journal = Journal::new(DEFAULT_MAX_BYTES);
    journal.attach_with(&registry, false);
    // A log that is there and cannot be read (a directory, a special file) would list as an
    // empty journal.
    if let Some(access) = journal.access()
        && let Err(error) = access.open_read(LOG_FILE)
        && error.kind() != vfs::ErrorKind::NotFound
    {
        return Err(crate::HostError::Journal {
            path: directory.display().to_string(),
            reason: format!("its log `journal.jsonl` cannot be read: {}", without_path(&error)),
            hint: "the log must be a regular file, or absent: move away what is there",
        });
    }
    let _ = journal.reading.set(registry);
    Ok(journal)
}

/// An error of the journal's own files, for the operator, without the virtual path it names
/// (the operator names the journal by its directory).
fn without_path(error: &vfs::Error) -> String {
    let text = error.to_string();
    if let Some(rest) = text.strip_prefix(&format!("`{LOG_FILE}`: ")) {
        return rest.to_owned();
    }
    match text.strip_prefix(&format!("`{LOG_FILE}` ")) {
        Some(rest) => format!("it {rest}"),
        None => text,
    }
}

impl ChangeObserver for Journal {
    fn changed(&self, change: &Change<'_>) {
        if !self.keeps_images(change.path, change.by_agent) {
            return;
        }
        let observed = Observed {
            call: change.call.clone(),
            time: SystemTime::now(),
            sequence: COUNTER.fetch_add(1, Ordering::Relaxed),
            kind: change.kind,
            path: change.path.as_str().to_owned(),
            to: change.to.map(|to| to.as_str().to_owned()),
            version: change.version.map(str::to_owned),
            image: None,
            on_the_way: change.on_the_way,
        };
        let mut state = self.state();
        let image = state.written_copies(change).or_else(|| change.image.cloned());
        state.pending.push(Observed { image, ..observed });
    }

    fn keeps_images(&self, path: &VirtualPath, _by_agent: bool) -> bool {
        let path = path.as_str();
        !(path == JOURNAL_ROOT || path.starts_with("/llm-journal/"))
    }

    fn keeper(&self) -> Option<&Keeper> {
        self.keeper.get()
    }

    fn intends(&self, change: &Change<'_>) -> Result<(), String> {
        let time = SystemTime::now();
        let intent = fresh_id(time);
        // Content the operation copied (it could not link it here) is written now, before
        // the change: written with the entry, after the change, it would be lost if the
        // journal's storage failed between the two, and the change made without its image.
        let copied = match change.image {
            Some(image) if has_copies(image) => {
                let access = self.access().ok_or("the journal is not attached to the mounts")?;
                let written = write_copies(&access, image, &intent)?;
                Some(written)
            }
            _ => None,
        };
        let image = copied.as_ref().or(change.image);
        let (session, asked_by, owed) = {
            let mut state = self.state();
            let info = state.calls.get(change.call);
            // An undo's changes are one entry: its own fields are counted once.
            let fields = info.is_none_or(|info| info.undoes.is_none());
            let (session, asked_by) =
                info.map_or_else(|| ("-".to_owned(), None), |info| (info.session.clone(), info.asked_by.clone()));
            let intended = state.intended.entry(change.call.clone()).or_default();
            if fields || intended.owed == 0 {
                intended.owed += ENTRY_FIELDS;
            }
            intended.owed += entry_room(change.path, change.to, image);
            intended.reserved_for = intended.owed;
            // Every entry this process owes, not this call's alone: calls running at once
            // append their intents into the same room.
            let owed = state.owed();
            (session, asked_by, owed)
        };
        let mut paths = vec![change.path.as_str()];
        paths.extend(change.to.map(VirtualPath::as_str));
        let images = kept_names(image);
        let bytes: u64 = kept_sizes(image);
        let mut line = json!({
            "intent": intent,
            "time": time_text(time),
            "session": session,
            "call": change.call.as_str(),
            "operation": change.kind.as_str(),
            "paths": paths,
            "images": images,
            "image_bytes": bytes,
        });
        if let Some(asked_by) = asked_by {
            line["asked_by"] = json!(asked_by);
        }
        let written = {
            let mut log = self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if log.is_none() {
                Err("its log could not be opened when it started (a warning then said why)".to_owned())
            } else {
                let line = format!("{line}\n");
                // Room for the intent and, after it, every entry owed (the reservation
                // keeps at least half of what it is asked for).
                let ahead = RESERVE_AHEAD.max(2 * (owed + line.len() as u64));
                self.append_gated(&mut log, line.as_bytes(), ahead)
                    .map_err(|error| format!("its log could not be written: {error}"))
            }
        };
        if let Err(why) = written {
            if let (Some(copied), Some(access)) = (&copied, self.access()) {
                for name in kept_names(Some(copied)) {
                    let _ = access.delete(&format!("{IMAGES}/{name}"), false);
                }
            }
            return Err(why);
        }
        if let Some(copied) = copied {
            self.state().copies.entry(change.call.clone()).or_default().push((ChangeKey::of(change), copied));
        }
        Ok(())
    }

    fn grows(&self, call: &CallId, file: &VirtualPath) -> Result<(), String> {
        let owed = {
            let mut state = self.state();
            // Told an intent before (the tree's): there is an entry for the call.
            let Some(intended) = state.intended.get_mut(call) else { return Ok(()) };
            let tenant = self.tenant.as_deref().map_or(0, |tenant| json_len(tenant) + 12);
            intended.owed += FILE_ROOM + 3 * json_len(file.as_str()) + tenant;
            if intended.owed <= intended.reserved_for {
                return Ok(());
            }
            intended.reserved_for = intended.owed + GROW_STEP;
            state.owed()
        };
        let mut log = self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if log.is_none() {
            return Err("its log could not be opened when it started (a warning then said why)".to_owned());
        }
        self.append_gated(&mut log, b"", RESERVE_AHEAD.max(2 * owed))
            .map_err(|error| format!("its log could not be written: {error}"))
    }

    fn call_ended(&self, call: &CallId) {
        if let Some(intended) = self.state().intended.get_mut(call) {
            intended.ended = true;
        }
    }
}

/// Ends a last line that a killed process cut short with a newline, so that the next line is
/// not joined to it (and lost). Run by a process alone on the journal: no other is appending.
fn end_cut_line(access: &PrivilegedAccessor) {
    let Ok(log) = access.open_read(LOG_FILE) else { return };
    let size = log.size();
    if size == 0 || log.read_at(size - 1, 1).is_ok_and(|last| last == b"\n") {
        return;
    }
    let ended =
        access.open_append(LOG_FILE).ok().is_some_and(|mut log| log.append(b"\n").and_then(|()| log.sync()).is_ok());
    if !ended {
        tracing::warn!(target: "vfs::journal", "the journal's cut last line could not be ended");
    }
}

/// A compacted log written beside the old one, not yet in its place
/// (`Journal::put_in_place`).
struct Compaction {
    staged: vfs::StagedWrite,
    /// The bytes written.
    written: u64,
    /// The images of the entries it drops.
    forget: Vec<String>,
    /// The length of the lines it was made from, and what they came to.
    length: u64,
    kept: u64,
}

/// Writes the log's whole lines that `scan` read from `log` anew, without what no reader
/// needs any more, once that is worth it: the intents of calls that ended (their entries or
/// `settled` lines say so), the `settled` and `dropped` lines, lines that are not JSON; an
/// entry the size bound dropped keeps only what `vfs journal list` shows of it. Past
/// `bound`, the oldest entries are dropped (their images are to go), then the oldest dropped
/// ones forgotten (`Scan::fates`). Intents of calls still running are kept (they have no
/// entry yet). Synced before it returns: putting it in place, under a lock, then has only
/// the lines appended meanwhile to sync. `None`: not worth a rewrite.
fn prepare(
    access: &PrivilegedAccessor,
    log: &vfs::ReadHandle,
    scan: &Scan,
    bound: u64,
) -> Result<Option<Compaction>, String> {
    let length = scan.end;
    if length < COMPACT_FROM {
        return Ok(None);
    }
    let (fates, forget) = scan.fates(bound);
    let kept: u64 = scan.lines.iter().zip(&fates).map(|(line, fate)| line.kept_bytes(*fate)).sum();
    // Worth a rewrite: images to remove, a quarter saved, or a log past its bound that the
    // rewrite shortens.
    let worth = !forget.is_empty() || kept <= length / 4 * 3 || (length > bound && kept < length);
    if !worth {
        return Ok(None);
    }
    let failed = |error: vfs::Error| format!("{LOG_FILE}: {}", error_text(&error));
    let mut staged = access.stage(LOG_FILE, vfs::StageFrom::Empty).map_err(failed)?;
    let (mut index, mut written, mut out, mut error) = (0usize, 0u64, Vec::new(), None);
    // The entries left out are forgotten: counted, with their times, in the log's one line
    // that says so.
    let mut forgotten: Option<Forgotten> = None;
    lines_of(log, 0, scan.end, false, |_, line| {
        match fates.get(index) {
            Some(Fate::Whole) => {
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            Some(Fate::Dropped) => {
                if let Ok(value) = serde_json::from_slice::<Value>(line) {
                    out.extend_from_slice(dropped_line(&value).as_bytes());
                    out.push(b'\n');
                }
            }
            Some(Fate::Omitted) if matches!(scan.lines.get(index).map(|line| &line.what), Some(What::Entry { .. })) => {
                let time = serde_json::from_slice::<Value>(line)
                    .ok()
                    .and_then(|value| value.get("time").and_then(Value::as_str).map(Forgotten::time))
                    .unwrap_or_default();
                let one = Forgotten { count: 1, oldest: time.clone(), newest: time };
                Forgotten::add(&mut forgotten, one);
            }
            Some(Fate::Omitted) | None => {}
        }
        index += 1;
        if out.len() >= CHUNK && error.is_none() {
            error = staged.write_at(written, &out).err();
            written += out.len() as u64;
            out.clear();
        }
    })
    .map_err(failed)?;
    if let Some(error) = error {
        return Err(failed(error));
    }
    // Read from the same open file, up to the same length: a count that differs means it was
    // not read as it was scanned, and nothing is written.
    if index != fates.len() {
        return Err(format!("{LOG_FILE}: changed while it was compacted"));
    }
    // Those forgotten before, then these.
    let mut total = scan.forgotten.clone();
    if let Some(now) = forgotten {
        Forgotten::add(&mut total, now);
    }
    if let Some(forgotten) = total {
        out.extend_from_slice(forgotten.line().as_bytes());
        out.push(b'\n');
    }
    staged.write_at(written, &out).map_err(failed)?;
    written += out.len() as u64;
    staged.sync().map_err(failed)?;
    Ok(Some(Compaction { staged, written, forget, length, kept }))
}

/// True when a vfs from before the presence lock had its own file (`journal.lock`) uses the
/// journal: it held the log's own lock shared, and this process is not alone.
fn older_process_on(access: &PrivilegedAccessor) -> bool {
    access.open_append(LOG_FILE).is_ok_and(|log| !log.try_lock_exclusive().unwrap_or(true))
}

/// This journal's own word ([`ID_FILE`]), made (when `make`) by the first process that needs
/// it: what the names of the images object stores keep for it begin with. `None` when it can
/// be neither read nor made (the images are then named without it, and not swept).
fn journal_tag(access: &PrivilegedAccessor, make: bool) -> Option<String> {
    let read = || {
        let read = access.read_text(ID_FILE, &vfs::ReadWindow::default()).ok()?;
        let tag = read.content.trim();
        is_journal_tag(tag).then(|| tag.to_owned())
    };
    if let Some(tag) = read() {
        return Some(tag);
    }
    if !make {
        return None;
    }
    let fresh = fresh_journal_tag();
    match access.write(ID_FILE, format!("{fresh}\n").as_bytes(), &vfs::Precondition::Absent) {
        Ok(_) => Some(fresh),
        // Another process made it first (or the file holds something else: no tag then).
        Err(_) => read(),
    }
}

/// A journal's word: `j` and 32 hex digits, a form no call id has (they begin with a digit
/// and hold a `-`), so that no word is the beginning of an image name made without one.
fn is_journal_tag(tag: &str) -> bool {
    tag.len() == 33
        && tag.starts_with('j')
        && tag[1..].bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

/// A fresh word, 128 bits from the operating system's random source (through the standard
/// library's randomly seeded hasher, so no dependency is added for it).
fn fresh_journal_tag() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_nanos()));
        hasher.finish()
    };
    format!("j{:016x}{:016x}", half(), half())
}

/// The bound a compaction brings the log within: a quarter of `--journal-max-bytes` (the log
/// grows to twice its compacted length before the next compaction, so it takes at most half
/// of the journal's bound, the images the rest), but no less than [`COMPACT_FROM`], and never
/// more than half of what one file may be written (the write cap: the new log is one file,
/// and a running compaction adds to it the lines appended while it was written, which the
/// other half leaves room for).
fn log_bound(max_bytes: u64, write_cap: u64) -> u64 {
    (max_bytes / 4).max(COMPACT_FROM).min(write_cap / 2)
}

/// Where a log `length` bytes long (just compacted, or found so) is compacted next: once it
/// has doubled, and at [`COMPACT_FROM`] at the least. A log found longer than its bound `bound`
/// (inherited from another process, or left so by another process's compaction) is compacted
/// at twice the bound, not at twice its length, so that it takes at most half of the journal's.
fn compact_at(length: u64, bound: u64) -> u64 {
    COMPACT_FROM.max(length.min(bound).saturating_mul(2))
}

/// The log, read once, a line at a time: what the sweep and the compaction decide from.
#[derive(Debug, Default)]
struct Scan {
    /// Every line, in order.
    lines: Vec<Line>,
    /// The ids of the entries the size bound dropped.
    dropped: HashSet<String>,
    /// What earlier compactions forgot.
    forgotten: Option<Forgotten>,
    /// Calls with a `settled` line (their intents had no change), with an intent, with an entry.
    settled: HashSet<String>,
    intended: HashSet<String>,
    entered: HashSet<String>,
    /// Each entry's tenant (`""`: no hosted crew), by id: an undo's entry counts as its
    /// change's tenant's.
    tenants: HashMap<String, String>,
    /// The images named in the files of parts of the entries not dropped ([`set_aside_in`]),
    /// once read ([`Scan::read_aside`]).
    aside: HashSet<String>,
    /// Where its whole lines end.
    end: u64,
}

/// One line of the log, as a sweep and a compaction see it.
#[derive(Debug)]
struct Line {
    /// Its length, without its newline.
    len: usize,
    what: What,
}

#[derive(Debug)]
enum What {
    /// An entry: its id, its call, the images it names, the length of its line once dropped
    /// ([`dropped_line`]), and its tenant (that of the change it undoes, for an undo's).
    Entry { id: String, call: String, images: Vec<String>, dropped_len: usize, tenant: String },
    /// An intent: its call and the images it names.
    Intent { call: String, images: Vec<String> },
    /// A `dropped` or `settled` line, the count of forgotten entries, or one that is not
    /// JSON.
    Other,
}

/// The most bytes the line counting the entries forgotten takes ([`Forgotten::line`]: two
/// times of 20 characters, a count of at most 20 digits, the keys), with its newline: kept
/// free within the log's bound.
const FORGOTTEN_LINE: u64 = 128;

/// What the log says of the entries its compactions forgot (no longer listed): how many, and
/// the times of the oldest and the newest of them. One line, written by each compaction that
/// forgets (with the count of those before it) at the end of the log it writes:
/// `{"settled": "forgotten", "forgotten": N, "oldest": TIME, "newest": TIME}`. Its `settled`
/// names no call (call ids begin with a digit), so that a vfs from before these lines passes
/// over it as a call's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forgotten {
    /// How many entries were forgotten.
    pub count: u64,
    /// The time of the oldest of them (RFC 3339 UTC).
    pub oldest: String,
    /// The time of the newest of them.
    pub newest: String,
}

impl Forgotten {
    /// Read from a line of the log, when it is one.
    fn of(value: &Value) -> Option<Self> {
        let count = value.get("forgotten")?.as_u64()?;
        let time = |key: &str| value.get(key).and_then(Value::as_str).map(Self::time).unwrap_or_default();
        Some(Self { count, oldest: time("oldest"), newest: time("newest") })
    }

    /// A time as the line keeps it: one of vfs's own (RFC 3339 UTC, to the second, 20
    /// characters), anything else as none, so that the line stays within [`FORGOTTEN_LINE`].
    fn time(text: &str) -> String {
        if text.len() == 20 { text.to_owned() } else { String::new() }
    }

    /// Adds `later`, forgotten after what `total` counts, to it.
    fn add(total: &mut Option<Self>, later: Self) {
        *total = Some(match total.take() {
            Some(before) => {
                let oldest = if before.oldest.is_empty() { later.oldest } else { before.oldest };
                Self { count: before.count + later.count, oldest, newest: later.newest }
            }
            None => later,
        });
    }

    fn line(&self) -> String {
        json!({ "settled": "forgotten", "forgotten": self.count, "oldest": self.oldest, "newest": self.newest })
            .to_string()
    }
}

/// What a compaction does with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Kept as it is.
    Whole,
    /// An entry kept as a dropped one: what `vfs journal list` shows of it.
    Dropped,
    /// Left out.
    Omitted,
}

impl Line {
    /// The bytes the line takes in the compacted log, its newline included.
    fn kept_bytes(&self, fate: Fate) -> u64 {
        match (fate, &self.what) {
            (Fate::Whole, _) => self.len as u64 + 1,
            (Fate::Dropped, What::Entry { dropped_len, .. }) => *dropped_len as u64 + 1,
            _ => 0,
        }
    }
}

/// The longest id an entry of the log may have (this journal's are 24 characters): a longer
/// one is no entry this journal wrote.
const MAX_ID: usize = 64;

/// True when a line of the log (not an intent) is an entry: an id of at most [`MAX_ID`]
/// bytes and the call it belongs to, as every entry (and every dropped entry's line) has.
/// Anything else (a damaged or hand-made log's `{"id":"x"}`) names nothing, is not listed
/// and is left out by a compaction.
fn names_an_entry(value: &Value) -> bool {
    let text = |key: &str| value.get(key).and_then(Value::as_str).filter(|text| !text.is_empty());
    text("id").is_some_and(|id| id.len() <= MAX_ID) && text("call").is_some()
}

/// An entry's line once the size bound dropped it: what `vfs journal list` shows of it, and
/// the entry it undoes, without its parts and images.
fn dropped_line(value: &Value) -> String {
    let mut line = json!({ "dropped": true });
    for key in ["id", "time", "session", "call", "asked_by", "operation", "paths", "undoes", "tenant"] {
        if let Some(field) = value.get(key) {
            line[key] = field.clone();
        }
    }
    line.to_string()
}

impl Scan {
    /// Reads the whole lines of `log` as it was when opened (in the memory of one chunk, its
    /// longest line and what is noted of each line). A line that is not JSON (cut by a killed
    /// process, or joined to such a one) names nothing; a last line without its newline is
    /// left for what follows the scan (`end`).
    fn read(log: &vfs::ReadHandle) -> Result<Self, vfs::Error> {
        let mut scan = Self::default();
        (scan.end, _) = lines_of(log, 0, log.size(), false, |_, line| {
            let what = match serde_json::from_slice::<Value>(line) {
                Ok(value) => scan.note(&value),
                Err(_) => What::Other,
            };
            scan.lines.push(Line { len: line.len(), what });
        })?;
        Ok(scan)
    }

    /// Reads the files of parts of the entries not dropped ([`set_aside_in`]): the images they
    /// name are their entries', kept by a sweep, and name what their calls' intents name
    /// (`all` false: only those of calls whose intents are in the log, which is all a
    /// compaction needs). False when one of them could not be read (damaged, or past
    /// [`ASIDE_MAX`]): a sweep would then remove images an entry needs.
    fn read_aside(&mut self, access: &PrivilegedAccessor, all: bool) -> bool {
        let mut whole = true;
        for line in &self.lines {
            if let What::Entry { id, images, call, .. } = &line.what
                && !self.dropped.contains(id)
                && (all || self.intended.contains(call))
            {
                for name in images.iter().filter(|name| name.ends_with(ASIDE_SUFFIX)) {
                    match aside_images(access, name) {
                        Ok(named) => self.aside.extend(named),
                        // Gone: its entry cannot be undone, and names nothing.
                        Err(AsideError::Missing) => {}
                        Err(AsideError::Damaged) => whole = false,
                    }
                }
            }
        }
        whole
    }

    fn note(&mut self, value: &Value) -> What {
        if let Some(forgotten) = Forgotten::of(value) {
            Forgotten::add(&mut self.forgotten, forgotten);
            return What::Other;
        }
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        let images: Vec<String> = value
            .get("images")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        if let Some(id) = text("dropped") {
            self.dropped.insert(id);
            What::Other
        } else if let Some(call) = text("settled") {
            self.settled.insert(call);
            What::Other
        } else if value.get("intent").is_some() {
            let call = text("call").unwrap_or_default();
            self.intended.insert(call.clone());
            What::Intent { call, images }
        } else {
            // A line that is JSON but no entry (a damaged log's `{}`, `1`, or anything without
            // an id) names nothing and takes no room: a compaction leaves it out, as it leaves
            // out a line that is not JSON.
            let Some(id) = text("id").filter(|_| names_an_entry(value)) else { return What::Other };
            let call = text("call").unwrap_or_default();
            self.entered.insert(call.clone());
            // A compacted log keeps a dropped entry as a line that says so.
            if value.get("dropped") == Some(&Value::Bool(true)) {
                self.dropped.insert(id.clone());
            }
            // An undo's entry goes with the change it undoes (the operator's undo of a
            // crew's change is written by a process of no crew), so that the two are dropped
            // and forgotten in one order: the undo never before the change.
            let tenant = value
                .get("undoes")
                .and_then(Value::as_str)
                .and_then(|undone| self.tenants.get(undone).cloned())
                .or_else(|| text("tenant"))
                .unwrap_or_default();
            self.tenants.insert(id.clone(), tenant.clone());
            What::Entry { id, call, images, dropped_len: dropped_line(value).len(), tenant }
        }
    }

    /// Calls with an intent and neither an entry nor a `settled` line: the process stopped
    /// during their change.
    fn incomplete(&self) -> HashSet<&str> {
        self.intended
            .iter()
            .filter(|call| !self.entered.contains(*call) && !self.settled.contains(*call))
            .map(String::as_str)
            .collect()
    }

    /// What a sweep keeps of `images/`. An entry's images are also named by its call's
    /// intent: those of a dropped entry are taken out after every line is read.
    fn kept(&self) -> Kept {
        let (mut named, mut gone) = (HashSet::new(), HashSet::new());
        for line in &self.lines {
            match &line.what {
                What::Entry { id, images, .. } if self.dropped.contains(id) => gone.extend(images.iter().cloned()),
                What::Entry { images, .. } | What::Intent { images, .. } => named.extend(images.iter().cloned()),
                What::Other => {}
            }
        }
        named.retain(|name| !gone.contains(name));
        named.extend(self.aside.iter().cloned());
        let incomplete = self.incomplete().into_iter().map(str::to_owned).collect();
        Kept { named, incomplete }
    }

    /// What a compaction does with each line before the bound: an entry is kept whole (or as
    /// dropped, when it was), an intent while it is all that names an image, the rest left
    /// out.
    fn fates_unbounded(&self) -> Vec<Fate> {
        let incomplete = self.incomplete();
        // An intent stays while it is all that names an image: its call is incomplete, or
        // has an entry for another change only (a call of the view's, in the middle of its
        // next change, or stopped in it). Those of a settled call name images the call
        // removed.
        let named_by_entries: HashSet<&str> = self
            .lines
            .iter()
            .filter_map(|line| match &line.what {
                What::Entry { images, .. } => Some(images.iter().map(String::as_str)),
                _ => None,
            })
            .flatten()
            .chain(self.aside.iter().map(String::as_str))
            .collect();
        // A dropped entry whose parts lay beside its line took the images they named with
        // its file of parts: its call's intents name only images gone.
        let dropped_aside: HashSet<&str> = self
            .lines
            .iter()
            .filter_map(|line| match &line.what {
                What::Entry { id, call, images, .. }
                    if self.dropped.contains(id) && images.iter().any(|name| name.ends_with(ASIDE_SUFFIX)) =>
                {
                    Some(call.as_str())
                }
                _ => None,
            })
            .collect();
        self.lines
            .iter()
            .map(|line| match &line.what {
                What::Entry { id, .. } if self.dropped.contains(id) => Fate::Dropped,
                What::Entry { .. } => Fate::Whole,
                What::Intent { call, .. } if incomplete.contains(call.as_str()) => Fate::Whole,
                What::Intent { call, images }
                    if !self.settled.contains(call)
                        && !dropped_aside.contains(call.as_str())
                        && images.iter().any(|name| !named_by_entries.contains(name.as_str())) =>
                {
                    Fate::Whole
                }
                _ => Fate::Omitted,
            })
            .collect()
    }

    /// What a compaction to `bound` bytes does with each line, and the images of the entries
    /// it drops.
    ///
    /// Past the bound, each tenant (a hosted crew; every entry of a process without crews is
    /// one tenant's) gives up its oldest entries within a share of the bound: the tenants
    /// whose entries take the least room keep them all, and the room left is shared evenly
    /// among the others (`fair_shares`). So one crew's many changes drop and forget its own
    /// oldest entries, never another crew's few (before 2026-12-07, the oldest of any crew
    /// went first: about 15,000 small changes of one crew dropped another's at the default
    /// bound). Where there is one tenant its share is the whole bound.
    fn fates(&self, bound: u64) -> (Vec<Fate>, Vec<String>) {
        let mut fates = self.fates_unbounded();
        let intending: HashSet<&str> = self
            .lines
            .iter()
            .zip(&fates)
            .filter_map(|(line, fate)| match &line.what {
                What::Intent { call, .. } if *fate == Fate::Whole => Some(call.as_str()),
                _ => None,
            })
            .collect();
        // The kept intents, and what those entries take at least, are counted first, with
        // room for the count of the entries forgotten.
        let reserved = |line: &Line| match &line.what {
            What::Entry { call, .. } if intending.contains(call.as_str()) => line.kept_bytes(Fate::Dropped),
            _ => 0,
        };
        let base: u64 = self
            .lines
            .iter()
            .zip(&fates)
            .map(|(line, fate)| match line.what {
                What::Intent { .. } => line.kept_bytes(*fate),
                _ => reserved(line),
            })
            .sum::<u64>()
            // The line that counts the entries forgotten, which the compaction adds.
            + FORGOTTEN_LINE;
        let mut wanted: HashMap<&str, u64> = HashMap::new();
        for (line, fate) in self.lines.iter().zip(&fates) {
            if let What::Entry { tenant, .. } = &line.what {
                *wanted.entry(tenant.as_str()).or_default() += line.kept_bytes(*fate).saturating_sub(reserved(line));
            }
        }
        let whole_room = (bound / 4 * 3).saturating_sub(base);
        let whole = fair_shares(&wanted, whole_room);
        let kept = fair_shares(&wanted, bound.saturating_sub(base));
        let mut forget = Vec::new();
        let cut = Cut { intending: &intending, reserved: &reserved };
        for (tenant, whole) in whole {
            // Too long to be kept whole even alone: past three quarters of the bound, or, for
            // a tenant cut to a share, past its share.
            let alone = if whole >= whole_room { (bound / 4 * 3).saturating_sub(FORGOTTEN_LINE) } else { whole };
            let share = Share { whole, kept: kept.get(tenant).copied().unwrap_or(0), alone };
            cut.apply(&self.lines, &mut fates, &mut forget, tenant, &share);
        }
        (fates, forget)
    }
}

/// How a compaction cuts one tenant's entries (`Scan::fates`).
struct Cut<'c> {
    /// The calls whose intents are kept: their entries are never forgotten, only dropped.
    intending: &'c HashSet<&'c str>,
    /// The bytes counted before any entry for an entry of an intending call.
    reserved: &'c dyn Fn(&Line) -> u64,
}

/// One tenant's share of a compacted log, in bytes: its entries kept whole within `whole`, and
/// kept at all (whole or dropped) within `kept`; an entry whose line alone is longer than
/// `alone` is dropped by itself.
struct Share {
    whole: u64,
    kept: u64,
    alone: u64,
}

impl Cut<'_> {
    /// From the newest entry of `tenant` back: its entries are kept as they are within
    /// `share.whole` bytes, older ones are dropped (their images go) within `share.kept`, and the older
    /// ones still are forgotten. Each step back only gives up more, so an undo is never
    /// forgotten while the entry it undid (older, the same tenant's) stays listed. An entry
    /// whose call keeps an intent is never forgotten, only dropped: without it, the intent
    /// would read as a change vfs stopped during, incomplete for good. An entry whose line
    /// could not be kept whole even alone (the removal of a tree of many files) is dropped
    /// itself and pushes out nothing older, as a change whose images pass the bound is.
    fn apply(&self, lines: &[Line], fates: &mut [Fate], forget: &mut Vec<String>, tenant: &str, share: &Share) {
        // What an entry adds beyond the bytes counted for it before any entry (a hand-made
        // line may be shorter whole than dropped).
        let adds = |line: &Line, fate: Fate, reserved: u64| line.kept_bytes(fate).saturating_sub(reserved);
        let mut total = 0;
        let mut step = 0;
        for (line, fate) in lines.iter().zip(fates.iter_mut()).rev() {
            let What::Entry { images, call, tenant: its, .. } = &line.what else { continue };
            if its != tenant {
                continue;
            }
            let reserved = (self.reserved)(line);
            if step == 0 && *fate == Fate::Whole && line.kept_bytes(Fate::Whole) > share.alone {
                *fate = Fate::Dropped;
                forget.extend(images.iter().cloned());
                total += adds(line, Fate::Dropped, reserved);
                continue;
            }
            if step == 0 && total + adds(line, *fate, reserved) > share.whole {
                step = 1;
            }
            if step == 1 && total + adds(line, Fate::Dropped, reserved) > share.kept {
                step = 2;
            }
            match step {
                0 => {}
                1 => {
                    if *fate == Fate::Whole {
                        *fate = Fate::Dropped;
                        forget.extend(images.iter().cloned());
                    }
                }
                _ => {
                    if *fate == Fate::Whole {
                        forget.extend(images.iter().cloned());
                    }
                    *fate = if self.intending.contains(call.as_str()) { Fate::Dropped } else { Fate::Omitted };
                }
            }
            total += adds(line, *fate, reserved);
        }
    }
}

/// Shares `room` bytes among tenants that want `wanted` bytes each: all of it to each when
/// everything fits (each then takes only what it wants); otherwise the tenants that want
/// least get what they want, and the others the same share each of what is left (the most
/// one tenant keeps while another wants more is no more than what that one keeps).
fn fair_shares<'t>(wanted: &HashMap<&'t str, u64>, room: u64) -> HashMap<&'t str, u64> {
    if wanted.values().sum::<u64>() <= room {
        return wanted.keys().map(|tenant| (*tenant, room)).collect();
    }
    let mut order: Vec<(&str, u64)> = wanted.iter().map(|(tenant, bytes)| (*tenant, *bytes)).collect();
    order.sort_by_key(|(tenant, bytes)| (*bytes, *tenant));
    let mut left = room;
    let mut shares = HashMap::new();
    for (index, (tenant, bytes)) in order.iter().enumerate() {
        let others = (order.len() - index) as u64;
        let share = (left / others).min(*bytes);
        shares.insert(*tenant, share);
        left -= share;
    }
    shares
}

/// What a sweep keeps of `images/` (`Journal::sweep`).
#[derive(Debug, Default)]
struct Kept {
    /// The images some line names, less those of dropped entries.
    named: HashSet<String>,
    /// Calls with an intent and neither an entry nor a `settled` line.
    incomplete: HashSet<String>,
}

impl Kept {
    /// True for an image a line names, or one of an incomplete call's (its name begins with
    /// the call's id: `Keeper`'s names are `{call}.{process}.{n}`).
    fn keeps(&self, name: &str) -> bool {
        self.named.contains(name) || self.of_incomplete(name)
    }

    /// True for an image whose name begins with an incomplete call's id.
    fn of_incomplete(&self, name: &str) -> bool {
        name.split_once('.').is_some_and(|(call, _)| self.incomplete.contains(call))
    }
}

/// The names of the images of `image` kept by link, and the paths of those kept by their
/// store (which begin with `/`, as no name in `images/` does).
fn kept_names(image: Option<&Image>) -> Vec<&str> {
    fn kept(content: &Saved) -> Option<&str> {
        match content {
            Saved::Kept { name, .. } => Some(name.as_str()),
            Saved::Stored { path, .. } => Some(path.as_str()),
            _ => None,
        }
    }
    match image {
        Some(Image::File { content, .. }) => kept(content).into_iter().collect(),
        Some(Image::Tree { items, .. }) => {
            items.iter().filter_map(|item| item.content.as_ref().and_then(kept)).collect()
        }
        _ => Vec::new(),
    }
}

/// True when some of `image`'s content was copied (not linked, not stored by its store).
fn has_copies(image: &Image) -> bool {
    match image {
        Image::File { content, .. } => matches!(content, Saved::Copied(_)),
        Image::Tree { items, .. } => items.iter().any(|item| matches!(item.content, Some(Saved::Copied(_)))),
        _ => false,
    }
}

/// Writes the copied content of `image` into `images/`, named after the intent `intent`:
/// the image with that content kept there ([`Saved::Kept`]). What was written is removed
/// again when a write fails.
fn write_copies(access: &PrivilegedAccessor, image: &Image, intent: &str) -> Result<Image, String> {
    let mut written: Vec<String> = Vec::new();
    let mut keep = |content: &Saved| -> Result<Saved, String> {
        let Saved::Copied(bytes) = content else { return Ok(content.clone()) };
        let name = format!("{intent}.{}", written.len());
        access
            .write(&format!("{IMAGES}/{name}"), bytes, &Precondition::Absent)
            .map_err(|error| format!("an image could not be written: {}", error_text(&error)))?;
        written.push(name.clone());
        Ok(Saved::Kept { name, size: bytes.len() as u64 })
    };
    let kept = match image {
        Image::File { content, mode } => keep(content).map(|content| Image::File { content, mode: *mode }),
        Image::Tree { mode, items } => items
            .iter()
            .map(|item| {
                let content = item.content.as_ref().map(&mut keep).transpose()?;
                Ok(vfs::TreeItem { content, ..item.clone() })
            })
            .collect::<Result<Vec<_>, String>>()
            .map(|items| Image::Tree { mode: *mode, items }),
        other => Ok(other.clone()),
    };
    if kept.is_err() {
        for name in &written {
            let _ = access.delete(&format!("{IMAGES}/{name}"), false);
        }
    }
    kept
}

/// The bytes of the images of `image` kept by link or by their store.
fn kept_sizes(image: Option<&Image>) -> u64 {
    let kept = |content: &Saved| match content {
        Saved::Kept { size, .. } | Saved::Stored { size, .. } => *size,
        _ => 0,
    };
    match image {
        Some(Image::File { content, .. }) => kept(content),
        Some(Image::Tree { items, .. }) => items.iter().filter_map(|item| item.content.as_ref()).map(kept).sum(),
        _ => 0,
    }
}

/// The most bytes the part of an entry that records a change of `path` (to `to`) with
/// `image` takes: it names its paths and each kept image (twice: in the part and in the
/// entry's list of images), and a tree's part each of its items.
fn entry_room(path: &VirtualPath, to: Option<&VirtualPath>, image: Option<&Image>) -> u64 {
    /// A part's keys, kind and version; a tree item's keys and mode.
    const PART: u64 = 256;
    const ITEM: u64 = 48;
    // A stamp the line keeps of an image kept by link (`stamps_of`): its name again, and the
    // stamp's 16 digits.
    const STAMP: u64 = 16 + 4;
    let name = |content: &Saved| match content {
        Saved::Kept { name, .. } => 2 * json_len(name),
        Saved::Stored { path, .. } => 2 * json_len(path),
        _ => PART,
    };
    let stamp = |content: &Saved| match content {
        Saved::Kept { name, .. } => json_len(name) + STAMP,
        _ => 0,
    };
    let image = match image {
        Some(Image::File { content, .. }) => name(content) + stamp(content),
        Some(Image::Tree { items, .. }) => {
            let contents = || items.iter().filter_map(|item| item.content.as_ref());
            let stamped = contents().filter(|content| matches!(content, Saved::Kept { .. })).count() <= STAMPED_IMAGES;
            let stamps = if stamped { contents().map(stamp).sum() } else { 0 };
            stamps
                + items
                    .iter()
                    .map(|item| ITEM + json_len(&item.relative) + item.content.as_ref().map_or(0, name))
                    .sum::<u64>()
        }
        Some(Image::NotKept(why)) => json_len(why),
        _ => 0,
    };
    PART + 2 * json_len(path.as_str()) + to.map_or(0, |to| 2 * json_len(to.as_str())) + image
}

/// The length of `text` as a JSON string, quotes included.
fn json_len(text: &str) -> u64 {
    let escaped: usize = text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..0x20 => 5,
            _ => 0,
        })
        .sum();
    (text.len() + escaped + 2) as u64
}

/// The entries the changes of one `finish` make: the directories a call made on its way to
/// a change belong to that change's entry; all the changes of an undo are one entry.
fn entries_of(observed: Vec<Observed>) -> Vec<Vec<Observed>> {
    let mut entries: Vec<Vec<Observed>> = Vec::new();
    let mut open: Vec<Observed> = Vec::new();
    for change in observed {
        if open.first().is_some_and(|first| first.call != change.call) {
            entries.push(std::mem::take(&mut open));
        }
        let on_the_way = change.on_the_way;
        open.push(change);
        if !on_the_way {
            entries.push(std::mem::take(&mut open));
        }
    }
    if !open.is_empty() {
        entries.push(open);
    }
    entries
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn fresh_id(time: SystemTime) -> String {
    id_at(time, COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// The id of what happened at `time` as this process's `sequence`th event: ids sort by
/// time, then (within a millisecond) by process (its tag, `vfs::process_tag`, not its id,
/// which two containers share) and the order this process saw them.
fn id_at(time: SystemTime, sequence: u64) -> String {
    let millis = time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis());
    format!("{millis:013}-{:05x}{:05x}", vfs::process_tag(), sequence & 0xf_ffff)
}

fn time_text(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    vfs::rfc3339(i64::try_from(seconds).unwrap_or(i64::MAX))
}

/// One entry's line, its copied images written (kept ones are linked already); with the
/// bytes of its images.
fn entry_line(
    access: &PrivilegedAccessor,
    group: &[Observed],
    info: &CallInfo,
    places: &[(String, String)],
    piece: usize,
) -> Result<(Value, u64), String> {
    let main = group.iter().rev().find(|change| !change.on_the_way).unwrap_or(&group[group.len() - 1]);
    let id = id_at(main.time, main.sequence);
    let mut bytes = 0u64;
    let mut images = Vec::new();
    let mut parts = Vec::new();
    let mut linked = Vec::new();
    let mut save = |content: &Saved, images: &mut Vec<String>| -> Result<String, String> {
        let name = match content {
            Saved::Kept { name, .. } => {
                linked.push(name.clone());
                name.clone()
            }
            // An object's image, copied by its store into its mount's image area.
            Saved::Stored { path, .. } => path.clone(),
            Saved::Copied(content) => {
                let name = format!("{id}.{}", images.len());
                access
                    .write(&format!("{IMAGES}/{name}"), content, &Precondition::Absent)
                    .map_err(|error| error.to_string())?;
                name
            }
            _ => return Err("an image of an unknown kind".to_owned()),
        };
        bytes += content.len();
        images.push(name.clone());
        Ok(name)
    };
    let main_index = group.iter().position(|change| std::ptr::eq(change, main)).unwrap_or(0);
    for (index, change) in group.iter().enumerate() {
        let image = match &change.image {
            None => json!({ "not_kept": "no image" }),
            Some(Image::Absent) => json!("absent"),
            Some(Image::File { content, mode }) => json!({ "file": save(content, &mut images)?, "mode": mode }),
            Some(Image::Tree { mode, items }) => tree_json(*mode, items, |content| save(content, &mut images))?,
            Some(Image::NotKept(why)) => json!({ "not_kept": why }),
            Some(_) => json!({ "not_kept": "unknown image" }),
        };
        // Directories made on the way to the entry's change are its parents (removed on
        // undo only when still empty); those of an undo are its own parts.
        let parent = info.undoes.is_none() && change.on_the_way && index < main_index;
        parts.push(part_json(change, &image, parent));
    }
    let (paths, operation) = paths_of(main, info);
    let at = places_of(&parts, places);
    let not_undoable = parts.iter().any(part_not_undoable);
    let (parts, images, side) = match set_aside_in(access, main.call.as_str(), &id, parts, images, piece) {
        Aside::Inline(parts, images) => (parts, images, None),
        Aside::Written { names, bytes: written } => {
            bytes += written;
            (Vec::new(), names.clone(), Some(names))
        }
    };
    let stamps = stamps_of(access, &linked);
    let mut line = json!({
        "id": id,
        "time": time_text(main.time),
        "session": info.session,
        "call": main.call.as_str(),
        "operation": operation,
        "paths": paths,
        "undoes": info.undoes,
        "parts": parts,
        "images": images,
        "image_bytes": bytes,
    });
    if let Some(side) = side {
        line[ASIDE_KEY] = json!(side);
        line["not_undoable"] = json!(not_undoable);
    }
    let optional = [
        ("asked_by", info.asked_by.as_ref().map(|asked_by| json!(asked_by))),
        ("places", at),
        ("stamps", stamps.as_object().is_some_and(|stamps| !stamps.is_empty()).then_some(stamps)),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            line[key] = value;
        }
    }
    Ok((line, bytes))
}

/// The paths and the operation of an entry whose main change is `main`.
fn paths_of<'m>(main: &'m Observed, info: &CallInfo) -> (Vec<String>, &'m str) {
    let mut paths = vec![main.path.clone()];
    paths.extend(main.to.clone());
    if info.undoes.is_some() && !info.paths.is_empty() {
        paths.clone_from(&info.paths);
    }
    (paths, if info.undoes.is_some() { "undo" } else { main.kind.as_str() })
}

/// The part of an entry's line that records `change`, with its before image.
fn part_json(change: &Observed, image: &Value, parent: bool) -> Value {
    json!({
        "kind": change.kind.as_str(),
        "path": change.path,
        "to": change.to,
        "version": change.version,
        "image": image,
        "parent": parent,
    })
}

/// The most images kept by link an entry's line records the stamps of ([`stamps_of`]): a
/// write's, an edit's, a file's delete, a move's, and small trees; a tree of more keeps none
/// (each stamp an open of its image and about 70 bytes of the line).
const STAMPED_IMAGES: usize = 16;

/// The stamps of the images `linked` (kept by link: the inode the file had, which a process
/// that held the file open before the change can still write to), by name; none past
/// [`STAMPED_IMAGES`].
fn stamps_of(access: &PrivilegedAccessor, linked: &[String]) -> Value {
    if linked.len() > STAMPED_IMAGES {
        return json!({});
    }
    let stamps: serde_json::Map<String, Value> = linked
        .iter()
        .filter_map(|name| {
            let stamp = access.open_read(&image_place(name)?).ok()?.stamp()?;
            Some((name.clone(), json!(stamp.written_token())))
        })
        .collect();
    Value::Object(stamps)
}

/// An entry's parts and images longer than this (in JSON) are written beside its line, into
/// `images/` ([`set_aside_in`]): a tree's removal names each file of the tree, and its line,
/// kept in the log, would pass the log's bound (at most 8 MiB) from about 40,000 files on,
/// and be dropped as soon as it was made.
const ASIDE_FROM: usize = 16 * 1024;
/// The most one file of parts holds (about 30,000 files of a tree): it is written whole, so
/// well within the write cap (16 MiB by default); a longer record takes several.
const ASIDE_PIECE: usize = 4 * 1024 * 1024;

/// The most one file of parts holds under the write cap `write_cap`: [`ASIDE_PIECE`], or half
/// the cap where that is less (a piece holds at least one part, which may pass it).
fn aside_piece(write_cap: u64) -> usize {
    usize::try_from(write_cap / 2).map_or(ASIDE_PIECE, |half| half.clamp(1024, ASIDE_PIECE))
}
/// The longest file of parts read back: a longer one is no file this journal wrote.
const ASIDE_MAX: usize = 2 * ASIDE_PIECE;
/// The key of an entry's line that names the files of `images/` holding its parts and
/// images, in order.
const ASIDE_KEY: &str = "parts_in";
/// How the names of such files end (`{call}.{entry id}.{piece}.entry`): no image a keeper or
/// a copy makes ends so. They begin with the call, as the keeper's do, so that a start alone
/// keeps those of a call that was stopped before its entry was written, as it keeps its
/// images.
const ASIDE_SUFFIX: &str = ".entry";

/// Where an entry's parts and images went.
enum Aside {
    /// Into its line, as they are.
    Inline(Vec<Value>, Vec<String>),
    /// Into the files `names` of `images/` (`bytes` long in all), which its line names as its
    /// images.
    Written { names: Vec<String>, bytes: u64 },
}

/// Writes the parts and images of the entry `id` of `call` into `images/` when they are
/// longer than [`ASIDE_FROM`], in files of at most `piece` bytes (`aside_piece`; a part or an
/// item longer than that alone): the log then keeps a line of the same few hundred bytes
/// however many files the change took, and each file of parts is an image of the entry,
/// counted against the journal's bound and dropped with it. Where one cannot be written (the
/// disk is full), none is kept and they stay in the line, for which the log kept room before
/// the change (a line past the log's bound is then dropped alone).
fn set_aside_in(
    access: &PrivilegedAccessor,
    call: &str,
    id: &str,
    parts: Vec<Value>,
    images: Vec<String>,
    piece: usize,
) -> Aside {
    // A tree's part names every file of the tree: its items go apart (`[part, item]`), so
    // that no piece holds more than one item's worth past its bound.
    let mut items: Vec<String> = Vec::new();
    let texts: Vec<String> = parts
        .iter()
        .enumerate()
        .map(|(index, part)| match part.pointer("/image/tree").and_then(Value::as_array) {
            Some(tree) => {
                items.extend(tree.iter().map(|item| json!([index, item]).to_string()));
                let mut head = part.clone();
                head["image"]["tree"] = json!([]);
                head.to_string()
            }
            None => part.to_string(),
        })
        .collect();
    let named: Vec<String> = images.iter().map(|name| json!(name).to_string()).collect();
    let total: usize = texts.iter().chain(&items).chain(&named).map(|text| text.len() + 1).sum();
    if total <= ASIDE_FROM {
        return Aside::Inline(parts, images);
    }
    // Each piece: its parts, its items and its images, as JSON texts, and their length.
    let mut pieces: Vec<([Vec<&str>; 3], usize)> = vec![(Default::default(), 0)];
    for (kind, texts) in [&texts, &items, &named].into_iter().enumerate() {
        for text in texts {
            let last = pieces.len() - 1;
            if pieces[last].1 > 0 && pieces[last].1 + text.len() + 1 > piece {
                pieces.push((Default::default(), 0));
            }
            let (lists, length) = pieces.last_mut().unwrap_or_else(|| unreachable!("one piece at least"));
            lists[kind].push(text);
            *length += text.len() + 1;
        }
    }
    let mut names = Vec::new();
    let mut bytes = 0u64;
    for (index, ([piece_parts, piece_items, piece_images], _)) in pieces.iter().enumerate() {
        let name = format!("{call}.{id}.{index}{ASIDE_SUFFIX}");
        let content = format!(
            "{{\"entry\":{},\"piece\":{index},\"parts\":[{}],\"items\":[{}],\"images\":[{}]}}",
            json!(id),
            piece_parts.join(","),
            piece_items.join(","),
            piece_images.join(",")
        );
        if let Err(error) = access.write(&format!("{IMAGES}/{name}"), content.as_bytes(), &Precondition::Absent) {
            tracing::warn!(
                target: "vfs::journal",
                error = %error_text(&error),
                "an entry's parts could not be written beside its line: its line holds them"
            );
            for name in &names {
                let _ = access.delete(&format!("{IMAGES}/{name}"), false);
            }
            return Aside::Inline(parts, images);
        }
        bytes += content.len() as u64;
        names.push(name);
    }
    Aside::Written { names, bytes }
}

/// Why a file of parts could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AsideError {
    /// It is not there (its entry was dropped, or it was removed by hand).
    Missing,
    /// It is there but is not one this journal wrote for the entry its name gives.
    Damaged,
}

/// The id of the entry the file of parts `name` belongs to (`{call}.{id}.{piece}.entry`).
fn aside_entry(name: &str) -> Option<&str> {
    let (front, _piece) = name.strip_suffix(ASIDE_SUFFIX)?.rsplit_once('.')?;
    front.split_once('.').map(|(_call, id)| id)
}

/// The content of the file of parts `name`, read whole within [`ASIDE_MAX`].
fn aside_content(access: &PrivilegedAccessor, name: &str) -> Result<Vec<u8>, AsideError> {
    let place = image_place(name).ok_or(AsideError::Damaged)?;
    match read_up_to(access, &place, ASIDE_MAX) {
        Ok(Some(content)) => Ok(content),
        Err(error) if error.kind() == ErrorKind::NotFound => Err(AsideError::Missing),
        Ok(None) | Err(_) => Err(AsideError::Damaged),
    }
}

/// The images a file of parts names (none for an image of any other kind). Only its images
/// are taken from it: its parts are passed over, not kept.
fn aside_images(access: &PrivilegedAccessor, name: &str) -> Result<Vec<String>, AsideError> {
    #[derive(serde::Deserialize)]
    struct Named {
        entry: String,
        images: Vec<String>,
    }
    if !name.ends_with(ASIDE_SUFFIX) {
        return Ok(Vec::new());
    }
    // A name this journal does not give its files of parts (an older one's, a hand-made
    // one): what it names cannot be told, so nothing is swept for it.
    let id = aside_entry(name).ok_or(AsideError::Damaged)?;
    let content = aside_content(access, name)?;
    let named: Named = serde_json::from_slice(&content).map_err(|_| AsideError::Damaged)?;
    if named.entry != id {
        return Err(AsideError::Damaged);
    }
    Ok(named.images)
}

/// The parts of an entry whose `line` keeps them beside it ([`set_aside_in`]), in order: `None`
/// when a file of them is gone (the entry was dropped) or is not one written for this entry.
fn aside_parts(access: &PrivilegedAccessor, line: &Value) -> Option<Vec<Value>> {
    #[derive(serde::Deserialize)]
    struct Piece {
        entry: String,
        parts: Vec<Value>,
        items: Vec<(usize, Value)>,
    }
    let id = line.get("id").and_then(Value::as_str)?;
    let (mut parts, mut items) = (Vec::new(), Vec::new());
    for name in line.get(ASIDE_KEY).and_then(Value::as_array)? {
        let name = name.as_str()?;
        let content = aside_content(access, name).ok()?;
        let piece: Piece = serde_json::from_slice(&content).ok()?;
        if piece.entry != id || aside_entry(name) != Some(id) {
            return None;
        }
        parts.extend(piece.parts);
        items.extend(piece.items);
    }
    for (index, item) in items {
        parts.get_mut(index)?.pointer_mut("/image/tree")?.as_array_mut()?.push(item);
    }
    Some(parts)
}

/// True for a part that cannot be undone: its image was not kept, or its change left no
/// version to guard the undo by.
fn part_not_undoable(part: &Value) -> bool {
    part.get("image").is_some_and(|image| image.get("not_kept").is_some())
        || (part.get("kind").and_then(Value::as_str).is_some_and(needs_version)
            && part.get("version").is_none_or(Value::is_null))
}

/// Where the roots of the paths of `parts` lie (`{root: place}`), for the entry's undo to
/// compare with its launch's (`Journal::misplaced`); `None` when no path lies under a root.
fn places_of(parts: &[Value], places: &[(String, String)]) -> Option<Value> {
    let mut at = serde_json::Map::new();
    for part in parts {
        for key in ["path", "to"] {
            if let Some(path) = part.get(key).and_then(Value::as_str)
                && let Some((root, place)) = place_of(places, path)
            {
                at.insert(root.to_owned(), json!(place));
            }
        }
    }
    (!at.is_empty()).then_some(Value::Object(at))
}

/// The agent-facing root `path` lies under (the longest that holds it) and where its files lie.
fn place_of<'p>(places: &'p [(String, String)], path: &str) -> Option<(&'p str, &'p str)> {
    places
        .iter()
        .filter(|(root, _)| {
            path.strip_prefix(root.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
        .max_by_key(|(root, _)| root.len())
        .map(|(root, place)| (root.as_str(), place.as_str()))
}

impl Journal {
    /// Appends `lines` to the log (through the file held open, or one opened now) and syncs
    /// it: one sync for all of a call's lines, and for the directory syncs the call `held`.
    fn append(&self, access: &PrivilegedAccessor, lines: &str, held: vfs::HeldSyncs) -> Result<(), String> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut log = self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if log.is_none() {
            *log = Some(access.open_append(LOG_FILE).map_err(|error| error.to_string())?);
        }
        self.append_gated(&mut log, lines.as_bytes(), 0)
            .map_err(|_| format!("{LOG_FILE}: could not be appended to"))?;
        let Some(file) = log.as_ref() else { return Err(format!("{LOG_FILE}: could not be opened")) };
        file.sync_with(held).map_err(|_| format!("{LOG_FILE}: could not be synced"))
    }

    /// Appends `bytes` to the log `log` holds, under the gate's shared lock: a log that a
    /// compaction replaced (it has no name any more) is opened again first, so that the line
    /// goes where readers look. With `ahead`, that much room past the log's end is kept
    /// allocated first (half of it at least; [`RESERVE_AHEAD`]), and nothing is appended
    /// when the disk has not that much (`bytes` empty: only the room is made sure of).
    /// Called with `intents` held (`log` is its content).
    fn append_gated(&self, log: &mut Option<AppendFile>, bytes: &[u8], ahead: u64) -> std::io::Result<()> {
        let gate = self.gate.get().filter(|gate| gate.lock_shared().is_ok());
        let unnamed = log.as_ref().is_some_and(|file| file.unnamed().unwrap_or(false));
        let reopened = if unnamed { self.access().and_then(|access| access.open_append(LOG_FILE).ok()) } else { None };
        if unnamed && reopened.is_none() {
            // The name gives no log this process can append to (removed and replaced by a
            // directory, a FIFO, an immutable file): a line written to the file it holds would
            // be read by nobody, and the change it names swept at the next start. Refused, so
            // that the change is not made.
            if let Some(gate) = gate {
                let _ = gate.unlock();
            }
            return Err(std::io::Error::other("the log was replaced by something that cannot be opened to append to"));
        }
        if let Some(fresh) = reopened {
            let length = fresh.length().unwrap_or(0);
            *log = Some(fresh);
            // Another process compacted the log: where this one left it, and the stretches
            // noted in the old one, mean nothing now; the next compaction is reckoned from
            // the new log.
            let mut state = self.state();
            state.log_end = None;
            state.forget_count();
            if let Some(bound) = self.log_bound.get() {
                state.compact_at = compact_at(length, *bound);
            }
        }
        let result = match log.as_mut() {
            Some(file) => {
                let reserved = if ahead == 0 { Ok(()) } else { file.reserve(ahead) };
                reserved
                    .map_err(|error| {
                        std::io::Error::new(
                            error.kind(),
                            format!("there is no room on its disk for the entry written after the change ({error})"),
                        )
                    })
                    .and_then(|()| if bytes.is_empty() { Ok(()) } else { self.append_counted(file, bytes) })
            }
            None => Err(std::io::Error::other("the log is not open")),
        };
        if let Some(gate) = gate {
            let _ = gate.unlock();
        }
        result
    }

    /// Appends `bytes` to the log. Several processes may share a journal (two stdio servers
    /// on one project): a log that is not where this process left it was appended to by
    /// another, whose images this one has not counted: what lies between is noted, and
    /// counted before the bound is next applied (`Journal::count_unread`); past a few such
    /// stretches, or when the log is not as this process left it, the log is counted again.
    fn append_counted(&self, file: &mut AppendFile, bytes: &[u8]) -> std::io::Result<()> {
        // Where the lines landed, told by the write itself: another process may append
        // between a look at the log's length and this append (appenders share the gate).
        let cut = self.state().cut;
        let ending = if cut {
            let mut whole = Vec::with_capacity(bytes.len() + 1);
            whole.push(b'\n');
            whole.extend_from_slice(bytes);
            file.append_ending(&whole)
        } else {
            file.append_ending(bytes)
        };
        let mut state = self.state();
        let end = match ending {
            Ok(end) => end,
            Err(error) => {
                // Some of it may be in the log: where it ends is not known, nor what is this
                // process's. The cut line is ended at once, still under the gate, so that
                // another process's next line is not glued to it either; where that fails
                // too, this process's next append begins with the newline.
                state.cut = file.append_ending(b"\n").is_err();
                state.log_end = None;
                state.forget_count();
                return Err(error);
            }
        };
        state.cut = false;
        let start = end.saturating_sub(bytes.len() as u64 + u64::from(cut));
        match state.log_end {
            Some(known) if known == start => {}
            Some(known)
                if start > known
                    && (state.counted || state.loading)
                    && state.unread.len() < UNREAD_STRETCHES
                    && state.unread.iter().map(|(from, to)| to - from).sum::<u64>() + (start - known)
                        <= UNREAD_BYTES =>
            {
                state.unread.push((known, start));
            }
            _ => state.forget_count(),
        }
        state.log_end = Some(end);
        Ok(())
    }
}

/// Calls `each` with every line of the log (without its newline) and the offset it begins
/// at, reading a chunk at a time, so that a log of any length is read in the memory of one
/// chunk and its longest line. Returns where its whole lines end, and how much was read: a
/// last line without its newline was cut by a killed process, or is being appended to.
fn each_line(access: &PrivilegedAccessor, each: impl FnMut(u64, &[u8])) -> Result<(u64, u64), vfs::Error> {
    // Read from the file opened: a compaction that puts a new log in its place meanwhile
    // leaves this reader the whole of the one it began with.
    let log = access.open_read(LOG_FILE)?;
    lines_of(&log, 0, u64::MAX, true, each)
}

/// Calls `each` with every whole line of `log` from `from` (where a line begins) to `upto`
/// (without its newline) and the offset it begins at, and with `partial` a last line without its newline
/// too, reading a chunk at a time, so that a log of any length is read in the memory of one
/// chunk and its longest line. Returns where the last whole line ends, and how much was read.
fn lines_of(
    log: &vfs::ReadHandle,
    from: u64,
    upto: u64,
    partial: bool,
    mut each: impl FnMut(u64, &[u8]),
) -> Result<(u64, u64), vfs::Error> {
    let mut at = from;
    let mut buffer: Vec<u8> = Vec::new();
    // How much of the buffer is known to hold no newline (a line longer than a chunk is
    // searched once, not again with each chunk added).
    let mut searched = 0;
    // Past [`MAX_LINE`], a line is not kept in memory: it is skipped to its newline and
    // handed on empty (it names nothing), from where it began.
    let mut skipping: Option<u64> = None;
    loop {
        let offset = at + buffer.len() as u64;
        let want = usize::try_from(upto.saturating_sub(offset)).unwrap_or(usize::MAX).min(CHUNK);
        let chunk = if want == 0 { Vec::new() } else { log.read_at(offset, want)? };
        let done = chunk.is_empty();
        buffer.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(found) = buffer[searched..].iter().position(|&byte| byte == b'\n') {
            let end = searched + found;
            match skipping.take() {
                Some(began) => each(began, &[]),
                None => each(at + start as u64, &buffer[start..end]),
            }
            start = end + 1;
            searched = start;
        }
        if done {
            let end = at + start as u64;
            if partial && (start < buffer.len() || skipping.is_some()) {
                match skipping {
                    Some(began) => each(began, &[]),
                    None => each(end, &buffer[start..]),
                }
            }
            return Ok((skipping.unwrap_or(end), at + buffer.len() as u64));
        }
        buffer.drain(..start);
        at += start as u64;
        if buffer.len() > MAX_LINE {
            skipping.get_or_insert(at);
            at += buffer.len() as u64;
            buffer.clear();
        }
        searched = buffer.len();
    }
}

/// The longest line of the log read: twice the most the log itself keeps ([`log_bound`] is at
/// most half the write cap, 8 MiB by default). A longer one is no line this journal wrote (a
/// hand-made or damaged log's), and names nothing.
const MAX_LINE: usize = 32 * 1024 * 1024;

/// The longest record of the files a removal took that an undo reads (about 800,000 files).
const TAKING_MAX: usize = 64 * 1024 * 1024;

/// The content of the journal's file `path`, read whole: `None` when it is longer than
/// `most` bytes (what is past that is not read).
fn read_up_to(access: &PrivilegedAccessor, path: &str, most: usize) -> Result<Option<Vec<u8>>, vfs::Error> {
    let mut content = Vec::new();
    loop {
        let chunk = access.read_at(path, content.len() as u64, CHUNK)?;
        let done = chunk.len() < CHUNK;
        content.extend_from_slice(&chunk);
        if content.len() > most {
            return Ok(None);
        }
        if done {
            return Ok(Some(content));
        }
    }
}

fn read_whole(access: &PrivilegedAccessor, path: &str) -> Result<Vec<u8>, vfs::Error> {
    read_up_to(access, path, usize::MAX).map(Option::unwrap_or_default)
}

/// One entry, as read back.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Opaque, sortable.
    pub id: String,
    /// RFC 3339 UTC.
    pub time: String,
    /// The session that made it (`operator` for `vfs undo` and `vfs run`).
    pub session: String,
    /// The call id (the exchange log's).
    pub call: String,
    /// `write`, `edit`, `make_directory`, `remove`, `move` or `undo`.
    pub operation: String,
    /// The virtual paths.
    pub paths: Vec<String>,
    /// The entry this one undoes.
    pub undoes: Option<String>,
    /// An undo's asker: the call id of the request that asked for it (an agent's
    /// `undo_changes`, as its exchange-log line says); `None` for the operator's `vfs undo`
    /// and for every other change. Each undo has a call of its own ([`Entry::call`]).
    pub asked_by: Option<String>,
    /// Where the roots of its paths lay when it was made (root, a word naming the place; see
    /// `MountRegistry::mount_places`); empty for an entry written before they were recorded.
    places: Vec<(String, String)>,
    /// Where its line lies in the log (offset, length): its parts are read from there when
    /// it is undone, not held. A compaction (at a start, or by any process once the log has
    /// doubled) moves lines: a line not found there is looked for through the log.
    line: (u64, usize),
    /// True when some part has no image, or no version to guard its undo by.
    not_undoable: bool,
    images: Vec<String>,
    image_bytes: u64,
    /// The stamps its images kept by link had when its line was written ([`STAMPED_IMAGES`]),
    /// by name: an image written to since (through a descriptor a process held open on the
    /// file before the change) is not put back.
    stamps: Vec<(String, String)>,
    /// The hosted crew whose endpoint made it (`""`: none), for the size bound's share.
    tenant: String,
    /// True when the size bound dropped its images.
    pub dropped: bool,
    /// True when only its intent was written: the process stopped during the change (it may
    /// or may not have been made); never undone.
    pub incomplete: bool,
}

#[cfg(test)]
fn load(access: &PrivilegedAccessor) -> Vec<Entry> {
    load_ending(access).map(|(entries, _, _)| entries).unwrap_or_default()
}

/// [`load`], and where the log's whole lines it read end; `None` when the log could not be
/// read.
fn load_ending(access: &PrivilegedAccessor) -> Option<(Vec<Entry>, u64, Option<Forgotten>)> {
    let mut loaded = Loaded::default();
    loaded.read(access).ok()?;
    let (entries, forgotten) = loaded.listed();
    Some((entries.into_iter().map(Arc::unwrap_or_clone).collect(), loaded.end, forgotten))
}

/// What has been read of the log: its entries (without their parts, read again when one is
/// undone), and where the whole lines read end. Kept while a batch holds it
/// ([`Journal::batch`]), so that each read takes only the lines appended since the last: the
/// log is only appended to while its name gives the file read (a compaction puts a new file
/// in its place), and the file is held open, so that its inode stays its own.
#[derive(Debug, Default)]
struct Loaded {
    /// The log read, and what tells it from the file its name gives next.
    log: Option<(vfs::ReadHandle, vfs::FileStamp)>,
    /// Where the whole lines read end: a last line without its newline is being appended
    /// (or was cut by a killed process, and is ended by the next append): read with what
    /// follows it.
    end: u64,
    forgotten: Option<Forgotten>,
    /// The entries, in the log's order.
    entries: Vec<Arc<Entry>>,
    /// The intents, in the log's order.
    intents: Vec<Arc<Entry>>,
    /// The calls that wrote an entry.
    complete: HashSet<String>,
    dropped: HashSet<String>,
    settled: HashSet<String>,
}

impl Loaded {
    /// Reads what was appended to the log since the last read; the whole log when it is
    /// another file than the one read (compacted since), or shorter than what was read.
    fn read(&mut self, access: &PrivilegedAccessor) -> Result<(), vfs::Error> {
        // Read from the file opened: a compaction that puts a new log in its place meanwhile
        // leaves this reader the whole of the one it began with.
        let log = access.open_read(LOG_FILE)?;
        let stamp = log.stamp();
        let grown = match (&self.log, stamp) {
            (Some((_, read)), Some(now)) => read.same_file(&now) && log.size() >= self.end,
            _ => false,
        };
        if !grown {
            *self = Self::default();
        }
        let read = lines_of(&log, self.end, u64::MAX, false, |at, line| self.take(at, line));
        // Lines taken before a read that failed would be taken again by the next.
        let (end, _) = read.inspect_err(|_| *self = Self::default())?;
        self.end = end;
        self.log = stamp.map(|stamp| (log, stamp));
        // A `dropped` line follows its entry: marked on it, once.
        for entry in self.entries.iter_mut().chain(&mut self.intents) {
            if !entry.dropped && self.dropped.contains(&entry.id) {
                Arc::make_mut(entry).dropped = true;
            }
        }
        Ok(())
    }

    /// Takes one line of the log, beginning at `at`.
    fn take(&mut self, at: u64, line: &[u8]) {
        let Ok(value) = serde_json::from_slice::<Value>(line) else { return };
        if let Some(more) = Forgotten::of(&value) {
            Forgotten::add(&mut self.forgotten, more);
            return;
        }
        if let Some(id) = value.get("dropped").and_then(Value::as_str) {
            self.dropped.insert(id.to_owned());
            return;
        }
        if let Some(call) = value.get("settled").and_then(Value::as_str) {
            self.settled.insert(call.to_owned());
            return;
        }
        let incomplete = value.get("intent").is_some();
        // A line that is JSON but no entry (a damaged log's `{}`, `1`, `[]`, `{"id":"x"}`) is
        // no change.
        let named = if incomplete {
            value.get("intent").and_then(Value::as_str).is_some_and(|id| !id.is_empty() && id.len() <= MAX_ID)
        } else {
            names_an_entry(&value)
        };
        if !named {
            return;
        }
        let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let strings = |key: &str| -> Vec<String> {
            value
                .get(key)
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default()
        };
        if value.get("dropped") == Some(&Value::Bool(true)) {
            self.dropped.insert(text("id"));
        }
        // An object of strings (`places`: root to place; `stamps`: image to stamp), as pairs.
        let pairs = |key: &str| -> Vec<(String, String)> {
            value
                .get(key)
                .and_then(Value::as_object)
                .map(|pairs| {
                    pairs.iter().filter_map(|(name, text)| Some((name.clone(), text.as_str()?.to_owned()))).collect()
                })
                .unwrap_or_default()
        };
        let parts = value.get("parts").and_then(Value::as_array);
        let entry = Entry {
            id: text(if incomplete { "intent" } else { "id" }),
            time: text("time"),
            session: text("session"),
            call: text("call"),
            operation: text("operation"),
            paths: strings("paths"),
            undoes: value.get("undoes").and_then(Value::as_str).map(str::to_owned),
            asked_by: value.get("asked_by").and_then(Value::as_str).map(str::to_owned),
            places: pairs("places"),
            line: (at, line.len()),
            // An entry whose parts lie beside its line says whether one cannot be undone.
            not_undoable: value.get("not_undoable") == Some(&Value::Bool(true))
                || parts.into_iter().flatten().any(part_not_undoable),
            images: strings("images"),
            image_bytes: value.get("image_bytes").and_then(Value::as_u64).unwrap_or(0),
            stamps: pairs("stamps"),
            tenant: value.get("tenant").and_then(Value::as_str).unwrap_or_default().to_owned(),
            dropped: false,
            incomplete,
        };
        if incomplete {
            self.intents.push(Arc::new(entry));
        } else {
            self.complete.insert(entry.call.clone());
            self.entries.push(Arc::new(entry));
        }
    }

    /// The entries read, sorted by id, and what compactions forgot.
    fn listed(&self) -> (Vec<Arc<Entry>>, Option<Forgotten>) {
        // An intent is incomplete when its call has no entry and was not settled: the process
        // stopped between the image and the change, or between the change and its entry.
        let mut entries: Vec<Arc<Entry>> = self
            .entries
            .iter()
            .chain(
                self.intents
                    .iter()
                    .filter(|intent| !self.complete.contains(&intent.call) && !self.settled.contains(&intent.call)),
            )
            .cloned()
            .collect();
        // Mostly in order already (ids are times): the sort only checks it.
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        (entries, self.forgotten.clone())
    }
}

/// What reads of the log have taken, kept while a batch is held ([`Journal::batch`]).
#[derive(Debug, Default)]
struct Batching {
    /// How many batches are held.
    holders: usize,
    loaded: Loaded,
}

/// A batch of reads of the journal ([`Journal::batch`]).
#[derive(Debug)]
pub struct Batch<'j> {
    journal: &'j Journal,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        let mut batching = self.journal.batching.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        batching.holders -= 1;
        if batching.holders == 0 {
            batching.loaded = Loaded::default();
        }
    }
}

/// What can be done with an entry now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// It can be undone.
    Undoable,
    /// An undo of it is in effect.
    Undone,
    /// Some part has no image (a link, a file above the cap).
    NotUndoable,
    /// The size bound dropped its images.
    Dropped,
}

impl EntryState {
    /// `undoable`, `undone`, `not undoable`, `dropped`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Undoable => "undoable",
            EntryState::Undone => "undone",
            EntryState::NotUndoable => "not undoable",
            EntryState::Dropped => "dropped",
        }
    }
}

/// The entries of a journal, oldest first, with their states.
#[derive(Debug)]
pub struct Entries {
    listed: Vec<Arc<Entry>>,
    undone: HashSet<String>,
    forgotten: Option<Forgotten>,
    /// The log could not be read (removed, replaced by a directory, unreadable): none are
    /// listed, which is not "no changes".
    unreadable: bool,
}

impl Entries {
    fn new(entries: Vec<Arc<Entry>>, forgotten: Option<Forgotten>) -> Self {
        // Newest first: an undo is undone when a later entry undoes it, and so on.
        let mut undone = HashSet::new();
        for entry in entries.iter().rev() {
            if !undone.contains(&entry.id)
                && let Some(target) = &entry.undoes
            {
                undone.insert(target.clone());
            }
        }
        Self { listed: entries, undone, forgotten, unreadable: false }
    }

    /// True when the log could not be read: nothing is listed, and that says nothing of what
    /// was changed (the operator's log says why).
    #[must_use]
    pub fn unreadable(&self) -> bool {
        self.unreadable
    }

    /// The entries, oldest first.
    #[must_use]
    pub fn all(&self) -> &[Arc<Entry>] {
        &self.listed
    }

    /// What compactions past the log's bound forgot: entries older than every one listed,
    /// which the log no longer holds (`None` when none was).
    #[must_use]
    pub fn forgotten(&self) -> Option<&Forgotten> {
        self.forgotten.as_ref()
    }

    /// The state of `entry`.
    #[must_use]
    pub fn state(&self, entry: &Entry) -> EntryState {
        if self.undone.contains(&entry.id) {
            EntryState::Undone
        } else if entry.dropped {
            EntryState::Dropped
        } else if entry.incomplete || entry.not_undoable {
            EntryState::NotUndoable
        } else {
            EntryState::Undoable
        }
    }

    /// The state as `vfs journal list` prints it: [`EntryState::as_str`], with
    /// `(incomplete)` after it for an entry of which only the intent was written.
    #[must_use]
    pub fn state_text(&self, entry: &Entry) -> String {
        let state = self.state(entry).as_str();
        if entry.incomplete { format!("{state} (incomplete)") } else { state.to_owned() }
    }

    /// The entry `id` names (an id or a prefix of at least 6 characters of just one).
    #[must_use]
    pub fn find(&self, id: &str) -> Option<&Entry> {
        self.find_of(id, None)
    }

    /// [`Entries::find`] among the entries of `session` alone, if given: whether another
    /// session's entry shares the prefix is not told.
    #[must_use]
    pub fn find_of(&self, id: &str, session: Option<&str>) -> Option<&Entry> {
        let matching: Vec<&Entry> = self
            .listed
            .iter()
            .map(Arc::as_ref)
            .filter(|entry| session.is_none_or(|session| entry.session == session))
            .filter(|entry| entry.id == id || (id.len() >= 6 && entry.id.starts_with(id)))
            .collect();
        match matching.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// The newest entries that are neither undone nor undos, newest first, of `session` if
    /// given.
    #[must_use]
    pub fn undoable_newest(&self, session: Option<&str>) -> Vec<&Entry> {
        self.listed
            .iter()
            .map(Arc::as_ref)
            .rev()
            .filter(|entry| entry.undoes.is_none() && !self.undone.contains(&entry.id))
            .filter(|entry| session.is_none_or(|session| entry.session == session))
            .collect()
    }

    /// The line an undo of `entry` gives instead of undoing it (`skipped ID: why`), or `None`
    /// when it can be undone.
    #[must_use]
    pub fn skipped(&self, entry: &Entry) -> Option<String> {
        match self.state(entry) {
            EntryState::Undoable => None,
            state @ EntryState::NotUndoable if entry.incomplete => Some(format!(
                "skipped {}: {} (incomplete: vfs stopped during this change, or could not write its entry; the change may or may not have been made)",
                entry.id,
                state.as_str()
            )),
            state => Some(format!("skipped {}: {}", entry.id, state.as_str())),
        }
    }

    /// One JSON object of `entry` (`vfs journal list --json`, `list_changes`).
    #[must_use]
    pub fn json(&self, entry: &Entry) -> Value {
        let mut value = json!({
            "id": entry.id,
            "time": entry.time,
            "session": entry.session,
            "call": entry.call,
            "operation": entry.operation,
            "paths": entry.paths,
            "state": self.state(entry).as_str(),
        });
        if let Some(asked_by) = &entry.asked_by {
            value["asked_by"] = json!(asked_by);
        }
        if entry.incomplete {
            value["incomplete"] = json!(true);
        }
        value
    }
}

impl Journal {
    /// The journal's entries.
    #[must_use]
    pub fn entries(&self) -> Entries {
        let Some(access) = self.access() else { return Entries::new(Vec::new(), None) };
        let read = {
            let mut batching = self.batching.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if batching.holders > 0 {
                batching.loaded.read(&access).map(|()| batching.loaded.listed())
            } else {
                let mut loaded = Loaded::default();
                loaded.read(&access).map(|()| loaded.listed())
            }
        };
        let (mut entries, forgotten) = match read {
            Ok(read) => read,
            // No log yet: no change was recorded (where this process holds none open: one it
            // holds was made at its start, and is gone only when removed since).
            Err(error) if error.kind() == ErrorKind::NotFound && !self.holds_log() => {
                return Entries::new(Vec::new(), None);
            }
            Err(error) => {
                tracing::warn!(target: "vfs::journal", error = %error_text(&error), "the journal's log cannot be read");
                return Entries { unreadable: true, ..Entries::new(Vec::new(), None) };
            }
        };
        // An intent without its entry is a crash only when its call is over and wrote none.
        // A call of this process's, still running or over since the log was read (its entry
        // appended after the read passed), is none: left out, as its entry will be listed.
        let state = self.state();
        let own = |call: &str| {
            state.calls.keys().chain(state.intended.keys()).chain(&state.finished).any(|own| own.as_str() == call)
        };
        entries.retain(|entry| !(entry.incomplete && own(&entry.call)));
        drop(state);
        Entries::new(entries, forgotten)
    }

    /// True when this process holds the log open to append to it (made at its start).
    fn holds_log(&self) -> bool {
        self.intents.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// Holds what reads of the log take (for as long as the batch is held, by any caller):
    /// each [`Journal::entries`] then reads only the lines appended since the last, so that
    /// undoing many entries, each judged from the log as it is then, reads the log once, not
    /// once per entry (whose entries and undos it holds: a read a line). Let go of when the
    /// last batch is dropped.
    #[must_use = "the batch lasts while it is held"]
    pub fn batch(&self) -> Batch<'_> {
        self.batching.lock().unwrap_or_else(std::sync::PoisonError::into_inner).holders += 1;
        Batch { journal: self }
    }

    /// Waits for `session`'s turn to choose its changes to undo and undo them: one at a time
    /// for each session in this process. Two `undo_changes` of one session asked for at once
    /// would both choose its newest change (the second then skipped as being undone); in
    /// turn, the second chooses from what the first left, so two asking for one change each
    /// undo two. `None` when `give_up` says so first (asked every 50 ms while waiting: the
    /// call's time ran out, or it was cancelled).
    #[must_use = "the turn lasts while it is held"]
    pub fn undo_turn(&self, session: &str, give_up: impl Fn() -> bool) -> Option<UndoTurn<'_>> {
        let (turns, freed) = &self.turns;
        let mut taken = turns.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while taken.contains(session) {
            if give_up() {
                return None;
            }
            taken = freed
                .wait_timeout(taken, Duration::from_millis(50))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        taken.insert(session.to_owned());
        Some(UndoTurn { journal: self, session: session.to_owned() })
    }

    /// Keeps the entries `ids` (those an undo chose) from the size bound until the pin is
    /// dropped: the undo's own entries, which add to the journal as it goes, would otherwise
    /// push out the oldest of those it has yet to reach, and their images with them (an undo
    /// of 90 small changes at a 256 KiB bound lost 37). The bound is passed meanwhile; the
    /// next change after brings the journal within it. Another process sharing the journal
    /// does not see the pin.
    #[must_use = "the entries are kept while the pin is held"]
    pub fn pin<'e>(&self, ids: impl IntoIterator<Item = &'e str>) -> Pinned {
        let ids: Vec<String> = ids.into_iter().map(str::to_owned).collect();
        let mut pinned = pinned();
        for id in &ids {
            *pinned.entry(id.clone()).or_default() += 1;
        }
        Pinned { ids }
    }

    /// Undoes `entry` through `agent` (rights apply), journaled as an undo of it for
    /// `session`, asked for by the call `asked_by` (an agent's `undo_changes`); one line per
    /// path, and whether every part was undone. The lines escape control characters (a path
    /// the journal holds is one line, whatever a damaged journal says it is).
    pub fn undo(
        &self,
        agent: &AgentAccessor,
        entry: &Entry,
        session: &str,
        asked_by: Option<&CallId>,
    ) -> (Vec<String>, bool) {
        let (lines, clean) = self.undo_lines(agent, entry, session, asked_by);
        (lines.iter().map(|line| vfs::escape_controls(line).into_owned()).collect(), clean)
    }

    fn undo_lines(
        &self,
        agent: &AgentAccessor,
        entry: &Entry,
        session: &str,
        asked_by: Option<&CallId>,
    ) -> (Vec<String>, bool) {
        let mut lines = Vec::new();
        // One undo of an entry at a time in this process: two asked for at once would both
        // find it undoable and both restore it (another process's undo is seen in the log).
        let Some(_undoing) = Undoing::take(&self.undoing, &entry.id) else {
            lines.push(format!("skipped {}: being undone by another call", entry.id));
            return (lines, false);
        };
        // Judged from the log as it is now, not as `entry` was read: another process may have
        // undone it, or dropped or forgotten it (the size bound, a compaction) meanwhile.
        let entries = self.entries();
        let Some(entry) = entries.all().iter().find(|current| current.id == entry.id) else {
            lines.push(format!("skipped {}: {}", entry.id, EntryState::Dropped.as_str()));
            return (lines, false);
        };
        if let Some(skipped) = entries.skipped(entry) {
            // A tree's removal that vfs stopped during: what its record says it took is put
            // back, file by file, where nothing is now.
            let taken = self.taken(entry, &entries);
            if !taken.is_empty() {
                return self.put_back_taken(agent, entry, &taken, session, asked_by);
            }
            lines.push(skipped);
            return (lines, false);
        }
        if let Some(skipped) = self.misplaced(entry) {
            lines.push(skipped);
            return (lines, false);
        }
        // Every image is looked for before anything is restored: an entry whose images were
        // dropped since it was listed is skipped whole, never half-undone.
        if !self.has_images(entry) {
            // The size bound removes an entry's images, then appends its `dropped` line: once
            // a bound running now is done (its lock taken and let go of at once, not held
            // across the read, which is a call the journal observes), the log says which.
            drop(self.writing.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            let now = self.entries();
            let state = now.all().iter().find(|current| current.id == entry.id).map(|current| now.state(current));
            let why = match state {
                None => EntryState::Dropped.as_str(),
                Some(state @ (EntryState::Dropped | EntryState::Undone)) => state.as_str(),
                Some(_) => IMAGES_GONE,
            };
            lines.push(format!("skipped {}: {why}", entry.id));
            return (lines, false);
        }
        if self.images_written_since(entry) {
            lines.push(format!("skipped {}: {IMAGES_WRITTEN}", entry.id));
            return (lines, false);
        }
        let Some(parts) = self.parts_of(entry) else {
            lines.push(format!("failed {}: its record in the journal could not be read", entry.id));
            return (lines, false);
        };
        self.undo_as(agent, entry, session, asked_by, lines, |agent, lines| {
            let mut clean = true;
            for part in parts.iter().rev() {
                clean &= self.undo_part(agent, part, lines);
            }
            clean
        })
    }

    /// Runs `restore` as the undo of `entry`, after `lines` said so far, and says whether all
    /// went through. A call of its own for each undo: whether a call was cut short is judged
    /// by its id, so two undos under one id would let the first's entry hide a crash in the
    /// second; the request that asked for it is named beside (`asked_by`). What it restores is
    /// made durable at once, one `syncfs` of each file system (not two `fsync`s a file),
    /// before its entry is written.
    fn undo_as(
        &self,
        agent: &AgentAccessor,
        entry: &Entry,
        session: &str,
        asked_by: Option<&CallId>,
        mut lines: Vec<String>,
        restore: impl FnOnce(&AgentAccessor, &mut Vec<String>) -> bool,
    ) -> (Vec<String>, bool) {
        let call = CallId::new();
        self.begin(&call, session, Some(entry));
        if let Some(info) = self.state().calls.get_mut(&call) {
            info.asked_by = asked_by.map(|asker| asker.as_str().to_owned());
        }
        let agent = agent.with_budget(Budget::unlimited().with_call(call.clone()));
        let (mut clean, synced) = agent.with_syncs_deferred(|| restore(&agent, &mut lines));
        if let Err(error) = synced {
            tracing::warn!(target: "vfs::journal", %error, "cannot sync what an undo restored");
            lines.push(format!("failed {}: what was restored could not be synced to the disk ({error})", entry.id));
            clean = false;
        }
        self.finish(&call);
        (lines, clean)
    }

    /// How many files an undo of `entry` would put back that a tree's removal vfs stopped
    /// during had taken (none for any other entry): what `vfs undo --dry-run` says of it.
    #[must_use]
    pub fn taken_count(&self, entry: &Entry) -> usize {
        let Some(access) = self.access() else { return 0 };
        let there = |image: &str| image_place(image).is_some_and(|place| access.read_at(&place, 0, 0).is_ok());
        let taken = self.taken(entry, &self.entries());
        taken.iter().flat_map(|directory| &directory.files).filter(|(_, image)| there(image)).count()
    }

    /// What `entry` took, when it is a tree's removal vfs stopped during, not undone.
    fn taken(&self, entry: &Entry, entries: &Entries) -> Vec<Taken> {
        if entry.incomplete && entry.operation == "remove" && entries.state(entry) == EntryState::NotUndoable {
            self.taken_record(&entry.call)
        } else {
            Vec::new()
        }
    }

    /// The directories a tree's removal by `call` noted as it went (`Keeper::note_taking`: one
    /// line a directory of `images/CALL.taking`, read by its name, since a listing of
    /// `images/` stops at 100,000 names), each with its mode and the files it was taking with
    /// the names of their images, in the order it went (each directory before those in it).
    fn taken_record(&self, call: &str) -> Vec<Taken> {
        let Some(access) = self.access() else { return Vec::new() };
        let plain = |name: &str| !name.is_empty() && name != "." && name != ".." && !name.contains('/');
        let record = format!("{call}{}", vfs::TAKING_SUFFIX);
        let Some(content) =
            image_place(&record).and_then(|place| read_up_to(&access, &place, TAKING_MAX).ok().flatten())
        else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        for line in content.split(|byte| *byte == b'\n') {
            // A last line a killed process cut short is not JSON: passed over.
            let Ok(value) = serde_json::from_slice::<Value>(line) else { continue };
            let Some(directory) = value.get("dir").and_then(Value::as_str) else { continue };
            let mut files = Vec::new();
            for file in value.get("files").and_then(Value::as_array).into_iter().flatten() {
                if let (Some(name), Some(image)) =
                    (file.get(0).and_then(Value::as_str), file.get(1).and_then(Value::as_str))
                    && plain(name)
                {
                    files.push((format!("{directory}/{name}"), image.to_owned()));
                }
            }
            taken.push(Taken { directory: directory.to_owned(), mode: mode_of(&value), files });
        }
        taken
    }

    /// Puts back what a stopped tree removal took (`taken`): each directory, with its mode,
    /// where none is now (one there is left as it is), then each file where nothing is now,
    /// with the mode its image kept; a file whose image is not there was not taken. The
    /// directories made get the rest of their modes last, deepest first. Journaled as the undo
    /// of `entry`, so it is listed as undone and can be redone. (A record from before modes
    /// were noted makes its directories as new ones are made.)
    fn put_back_taken(
        &self,
        agent: &AgentAccessor,
        entry: &Entry,
        taken: &[Taken],
        session: &str,
        asked_by: Option<&CallId>,
    ) -> (Vec<String>, bool) {
        let keeper = self.keeper.get();
        self.undo_as(agent, entry, session, asked_by, Vec::new(), |agent, lines| {
            let mut clean = true;
            let mut made = Vec::new();
            for directory in taken {
                if let Some(mode) = directory.mode {
                    match agent.restore_directory(&directory.directory, mode) {
                        Ok(restored) => made.push(restored),
                        Err(error) => {
                            lines.push(format!("failed {}: {}", directory.directory, error_text(&error)));
                            clean = false;
                            continue;
                        }
                    }
                }
                for (path, image) in &directory.files {
                    let Some(content) = image_place(image).and_then(|_| self.image_bytes(image)) else { continue };
                    let mode = keeper.and_then(|keeper| keeper.mode_of(image)).unwrap_or(0o644);
                    match agent.restore(path, &content, mode, &Precondition::Absent) {
                        Ok(_) => lines.push(format!("restored {path}")),
                        Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                            lines.push(format!("conflict {path}: changed since (left as it is)"));
                            clean = false;
                        }
                        Err(error) => {
                            lines.push(format!("failed {path}: {}", error_text(&error)));
                            clean = false;
                        }
                    }
                }
            }
            for restored in made.iter().rev() {
                if let Err(error) = agent.finish_directory(restored) {
                    lines.push(format!("failed {}: {}", restored.path, error_text(&error)));
                    clean = false;
                }
            }
            clean
        })
    }

    /// Undoes entries whatever place their roots are mounted from now (the operator's `vfs
    /// undo --any-place`: a project directory moved or renamed since the changes).
    pub fn undo_from_any_place(&self) {
        self.any_place.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The line saying why `entry` is skipped when this launch would put one of its paths in
    /// another place than the launch that made it: a root mounted from another directory or
    /// bucket, not mounted, or a mount nested in it since that now holds the path. Undone
    /// through it, its paths would name other files (another crew's mount at the same root).
    /// `None` when every path lies where it lay (or the entry predates the record).
    #[must_use]
    pub fn misplaced(&self, entry: &Entry) -> Option<String> {
        if self.any_place.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let now = self.places.get()?;
        entry.paths.iter().find_map(|path| {
            let (root, then) = place_of(&entry.places, path)?;
            let why = match place_of(now, path) {
                None => format!("{root} is not mounted"),
                Some((here, there)) if here == root && there == then => return None,
                Some((here, _)) if here != root => format!("{path} now lies in another mount, {here}"),
                Some(_) => format!("{root} is mounted from another place than when the change was made"),
            };
            Some(format!("skipped {}: {why} (undo it with the mounts it was made with)", entry.id))
        })
    }

    /// True when an undo of `entry`, undoable as its log says, would find an image of it gone
    /// from `images/` (removed or replaced outside vfs): it can never be undone.
    #[must_use]
    pub fn images_gone(&self, entry: &Entry) -> bool {
        !self.has_images(entry)
    }

    /// True when an image of `entry` whose stamp its line keeps has another now: written to
    /// after the change, through a descriptor a process held open on the file before it.
    fn images_written_since(&self, entry: &Entry) -> bool {
        let Some(access) = self.access() else { return false };
        entry.stamps.iter().any(|(name, stamp)| {
            let now = image_place(name).and_then(|place| access.open_read(&place).ok()?.stamp());
            now.is_none_or(|now| now.written_token() != *stamp)
        })
    }

    /// True when every image of `entry` kept in `images/` is there (an object's image, kept
    /// by its store, is read when it is restored).
    fn has_images(&self, entry: &Entry) -> bool {
        let Some(access) = self.access() else { return false };
        let access = &access;
        let there = |name: &String| image_place(name).is_some_and(|place| access.read_at(&place, 0, 0).is_ok());
        entry.images.iter().filter(|name| !name.starts_with('/')).all(|name| {
            // A damaged file of parts is not taken for one gone: the undo says it cannot read it.
            there(name)
                && aside_images(access, name).map_or_else(
                    |error| error == AsideError::Damaged,
                    |named| named.iter().filter(|name| !name.starts_with('/')).all(there),
                )
        })
    }

    /// The parts of `entry`, read from its line in the log.
    fn parts_of(&self, entry: &Entry) -> Option<Vec<Value>> {
        self.parts_at(entry).or_else(|| self.parts_found(entry))
    }

    /// The parts of the entry's line in the log found where the entry was read.
    fn parts_at(&self, entry: &Entry) -> Option<Vec<Value>> {
        let (at, length) = entry.line;
        let access = &self.access()?;
        // A line may be longer than one read returns (a tree of many files).
        let mut line = Vec::with_capacity(length);
        while line.len() < length {
            let chunk = access.read_at(LOG_FILE, at + line.len() as u64, length - line.len()).ok()?;
            if chunk.is_empty() {
                return None;
            }
            line.extend_from_slice(&chunk);
        }
        let value = serde_json::from_slice::<Value>(&line).ok()?;
        if value.get("id").and_then(Value::as_str) != Some(entry.id.as_str()) {
            return None;
        }
        if value.get(ASIDE_KEY).is_some() {
            return aside_parts(access, &value);
        }
        Some(value.get("parts").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    /// The parts of the entry's line, looked for through the log: a compaction since the
    /// entry was read moved its line (or left only what a dropped entry keeps, no parts).
    fn parts_found(&self, entry: &Entry) -> Option<Vec<Value>> {
        let mut found = None;
        let access = self.access()?;
        each_line(&access, |_, line| {
            if found.is_none()
                && let Ok(value) = serde_json::from_slice::<Value>(line)
                && value.get("id").and_then(Value::as_str) == Some(entry.id.as_str())
                && value.get("intent").is_none()
            {
                found = Some(value);
            }
        })
        .ok()?;
        let found = found?;
        if found.get(ASIDE_KEY).is_some() {
            return aside_parts(&access, &found);
        }
        found.get("parts").and_then(Value::as_array).cloned()
    }

    /// The content of the image `name`: a file of `images/`, or (a path) an object's image
    /// that its store keeps.
    fn image_bytes(&self, name: &str) -> Option<Vec<u8>> {
        if name.starts_with('/') {
            return self.keeper.get()?.read_stored(name).ok();
        }
        read_whole(&self.access()?, &image_place(name)?).ok()
    }

    /// Removes the image `name` (see [`Journal::image_bytes`]) of an entry dropped; for a
    /// file of its parts ([`set_aside_in`]), the images that file names first.
    fn forget_image(&self, access: &PrivilegedAccessor, name: &str) {
        for named in aside_images(access, name).unwrap_or_default() {
            if !named.ends_with(ASIDE_SUFFIX) {
                self.forget_one(access, &named);
            }
        }
        self.forget_one(access, name);
    }

    /// Removes the image `name` alone: a start alone removes each file no line names on its
    /// own account (a file of parts no line names may name images an intent still names).
    fn forget_one(&self, access: &PrivilegedAccessor, name: &str) {
        if name.starts_with('/') {
            if let Some(keeper) = self.keeper.get() {
                keeper.forget_stored(name);
            }
        } else if let Some(place) = image_place(name) {
            let _ = access.delete(&place, false);
        }
    }

    fn undo_part(&self, agent: &AgentAccessor, part: &Value, lines: &mut Vec<String>) -> bool {
        let text = |key: &str| part.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let (kind, path, to) = (text("kind"), text("path"), text("to"));
        let version = part.get("version").and_then(Value::as_str).map(str::to_owned);
        let image = part.get("image").cloned().unwrap_or(Value::Null);
        // A directory's move recorded its tree's version (`tree-…`, which no file's version
        // is): its move back is guarded by the tree.
        let guard = match version {
            Some(tree) if kind == "move" && tree.starts_with("tree-") => Precondition::Tree(tree),
            Some(version) => Precondition::Version(version),
            // A change that left no version (a link or a special file moved, a file whose
            // version could not be taken) has nothing to guard its undo by: never undone
            // whatever is there now (`Entries::state` lists it as not undoable).
            None if needs_version(&kind) => {
                lines.push(format!("skipped {path}: {}", EntryState::NotUndoable.as_str()));
                return false;
            }
            None => Precondition::Any,
        };
        let conflict = |lines: &mut Vec<String>, path: &str, error: &vfs::Error| {
            match error.kind() {
                ErrorKind::VersionMismatch
                | ErrorKind::AlreadyExists
                | ErrorKind::NotFound
                | ErrorKind::DirectoryNotEmpty
                | ErrorKind::NotAFile
                | ErrorKind::NotADirectory => lines.push(format!("conflict {path}: changed since (left as it is)")),
                _ => lines.push(format!("failed {path}: {}", error_text(error))),
            }
            false
        };
        match kind.as_str() {
            "write" | "edit" => {
                if image == json!("absent") {
                    return match agent.delete(&path, false, &guard) {
                        Ok(_) => {
                            lines.push(format!("removed {path}"));
                            true
                        }
                        Err(error) => conflict(lines, &path, &error),
                    };
                }
                let Some((content, mode)) = self.file_of(&image) else {
                    lines.push(format!("failed {path}: its image is gone"));
                    return false;
                };
                match agent.restore(&path, &content, mode, &guard) {
                    Ok(_) => {
                        lines.push(format!("restored {path}"));
                        true
                    }
                    Err(error) => conflict(lines, &path, &error),
                }
            }
            // Only a directory, and (no `recursive`) only an empty one: never a file written
            // at the path since, by this session or another.
            "make_directory" => match agent.delete(&path, false, &Precondition::Directory) {
                Ok(_) => {
                    if !part.get("parent").and_then(Value::as_bool).unwrap_or(false) {
                        lines.push(format!("removed {path}"));
                    }
                    true
                }
                // A parent made on the way is removed only while it is empty.
                Err(_) if part.get("parent").and_then(Value::as_bool).unwrap_or(false) => true,
                Err(error) => conflict(lines, &path, &error),
            },
            "remove" => self.restore_removed(agent, &path, &image, lines),
            "move" => {
                if let Err(error) = agent.move_path(&to, &path, &guard, &Precondition::Absent) {
                    // Something at the place it left (made there since) is that place's
                    // conflict; anything else is the place it went to's.
                    let blocked = if error.kind() == ErrorKind::AlreadyExists { &path } else { &to };
                    return conflict(lines, blocked, &error);
                }
                lines.push(format!("restored {path}"));
                if image == json!("absent") {
                    return true;
                }
                self.restore_removed(agent, &to, &image, lines)
            }
            _ => {
                lines.push(format!("failed {path}: unknown change"));
                false
            }
        }
    }

    fn file_of(&self, image: &Value) -> Option<(Vec<u8>, u32)> {
        let name = image.get("file")?.as_str()?;
        let mode = image.get("mode").and_then(Value::as_u64).and_then(|mode| u32::try_from(mode).ok()).unwrap_or(0o644);
        Some((self.image_bytes(name)?, mode))
    }

    /// Puts back a removed file or tree at `path`, where nothing must be now: a tree's
    /// directories with the modes its image kept (an image from before they were kept, or
    /// of a store that keeps none, leaves them as a new directory is made).
    fn restore_removed(&self, agent: &AgentAccessor, path: &str, image: &Value, lines: &mut Vec<String>) -> bool {
        if let Some(tree) = image.get("tree").and_then(Value::as_array) {
            // The directories made, given the rest of their modes once what goes in them is
            // back, deepest first, the tree's own last.
            let mut made = Vec::new();
            match put_directory(agent, path, mode_of(image)) {
                Ok((true, restored)) => made.extend(restored),
                // A directory there already (an undo of this removal stopped part way, or one
                // made since): the tree comes back into it path by path, each path that holds
                // something else a conflict. So an undo killed in the middle of a tree is
                // finished by running it again.
                Ok((false, _)) if agent.kind_at(path).is_ok_and(|there| there == vfs::EntryKind::Directory) => {}
                Ok((false, _)) => {
                    lines.push(format!("conflict {path}: changed since (left as it is)"));
                    return false;
                }
                // A file made since where the tree goes.
                Err(error) if matches!(error.kind(), ErrorKind::NotADirectory | ErrorKind::AlreadyExists) => {
                    lines.push(format!("conflict {path}: changed since (left as it is)"));
                    return false;
                }
                Err(error) => {
                    lines.push(format!("failed {path}: {}", error_text(&error)));
                    return false;
                }
            }
            let mut clean = true;
            for item in tree {
                let rel = item.get("rel").and_then(Value::as_str).unwrap_or_default();
                let inner = format!("{path}/{rel}");
                let done = if item.get("file").is_some() {
                    match self.file_of(item) {
                        Some((content, mode)) => put_back_file(agent, &inner, &content, mode).map_err(Some),
                        None => Err(None),
                    }
                } else {
                    put_directory(agent, &inner, mode_of(item)).map(|(_, restored)| made.extend(restored)).map_err(Some)
                };
                match done {
                    Ok(()) => {}
                    // Made there since the removal (by another writer while the tree comes
                    // back, or before): left as it is.
                    // (A file where a directory of the tree goes says so, as `failed`: on an
                    // object store, it may be a name the removal took as both.)
                    Err(Some(error)) if error.kind() == ErrorKind::AlreadyExists => {
                        lines.push(format!("conflict {inner}: changed since (left as it is)"));
                        clean = false;
                    }
                    Err(Some(error)) => {
                        lines.push(format!("failed {inner}: {}", error_text(&error)));
                        clean = false;
                    }
                    Err(None) => {
                        lines.push(format!("failed {inner}: its image is gone"));
                        clean = false;
                    }
                }
            }
            for restored in made.iter().rev() {
                if let Err(error) = agent.finish_directory(restored) {
                    lines.push(format!("failed {}: {}", restored.path, error_text(&error)));
                    clean = false;
                }
            }
            lines.push(format!("restored {path}"));
            return clean;
        }
        let Some((content, mode)) = self.file_of(image) else {
            lines.push(format!("failed {path}: its image is gone"));
            return false;
        };
        match agent.restore(path, &content, mode, &Precondition::Absent) {
            Ok(_) => {
                lines.push(format!("restored {path}"));
                true
            }
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                lines.push(format!("conflict {path}: changed since (left as it is)"));
                false
            }
            Err(error) => {
                lines.push(format!("failed {path}: {}", error_text(&error)));
                false
            }
        }
    }
}

/// A tree image as its entry's line keeps it: each file with its image's name (`save` puts
/// it in the journal) and mode, each directory with its mode, the tree's own too.
fn tree_json(
    mode: u32,
    items: &[vfs::TreeItem],
    mut save: impl FnMut(&Saved) -> Result<String, String>,
) -> Result<Value, String> {
    let mut tree = Vec::new();
    for item in items {
        tree.push(match &item.content {
            None => json!({ "rel": item.relative, "mode": item.mode }),
            Some(content) => json!({ "rel": item.relative, "file": save(content)?, "mode": item.mode }),
        });
    }
    Ok(json!({ "tree": tree, "mode": mode }))
}

/// Puts back a file of a tree image at `path`, where nothing must be: a file there that holds
/// it already (put back by an undo of the tree that stopped part way) is taken as back.
fn put_back_file(agent: &AgentAccessor, path: &str, content: &[u8], mode: u32) -> Result<(), vfs::Error> {
    match agent.restore(path, content, mode, &Precondition::Absent) {
        Err(error) if error.kind() == ErrorKind::AlreadyExists && holds_already(agent, path, content, mode) => Ok(()),
        done => done.map(|_| ()),
    }
}

/// True when `path` holds a file with exactly `content` and the permission bits of `mode`:
/// what putting it back would make.
fn holds_already(agent: &AgentAccessor, path: &str, content: &[u8], mode: u32) -> bool {
    // The file itself, not one a link there names.
    if !agent.kind_at(path).is_ok_and(|there| there == vfs::EntryKind::File) {
        return false;
    }
    let Ok(there) = agent.attributes(path) else { return false };
    if there.kind != vfs::EntryKind::File || there.size != content.len() as u64 || there.mode & 0o777 != mode & 0o777 {
        return false;
    }
    let Ok(handle) = agent.open_read(path) else { return false };
    let mut at = 0;
    while at < content.len() {
        match handle.read_at(at as u64, content.len() - at) {
            Ok(bytes) if !bytes.is_empty() && content[at..].starts_with(&bytes) => at += bytes.len(),
            _ => return false,
        }
    }
    handle.size() == content.len() as u64
}

/// Puts back a directory of a tree image at `path`, with its mode when the image kept one
/// (entries from before they were kept: as a new directory is made); whether it was made,
/// and what is left to finish of it ([`AgentAccessor::finish_directory`]).
fn put_directory(
    agent: &AgentAccessor,
    path: &str,
    mode: Option<u32>,
) -> Result<(bool, Option<vfs::RestoredDirectory>), vfs::Error> {
    match mode {
        Some(mode) => agent.restore_directory(path, mode).map(|restored| (restored.created, Some(restored))),
        None => agent.create_directory(path).map(|outcome| (outcome.created, None)),
    }
}

/// An entry line just made, as the size bound counts it: its id, its images' bytes and names.
fn added_entry(line: &Value, bytes: u64) -> (String, u64, Vec<String>, String) {
    let images = line["images"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let tenant = line.get("tenant").and_then(Value::as_str).unwrap_or_default().to_owned();
    (line["id"].as_str().unwrap_or_default().to_owned(), bytes, images, tenant)
}

/// Where the image `name` of an entry's line lies in `images/`: only a plain name, as the
/// journal makes them, lies there (a damaged line's `../journal.jsonl` names nothing).
fn image_place(name: &str) -> Option<String> {
    let plain = !name.is_empty() && !name.starts_with('.') && !name.contains('/');
    plain.then(|| format!("{IMAGES}/{name}"))
}

/// How many of its own finished calls a process remembers (`State::finished`): far more
/// than can finish while one reader reads the log.
const FINISHED_KEPT: usize = 4096;

/// An entry's mark in `Journal::undoing`, taken off when the undo ends.
/// The entries an undo running in this process chose and has yet to reach, with how many
/// undos hold each ([`Journal::pin`]): no size bound drops them, and no journal compacts its log
/// while one of its entries is held. One set for the process, not for each [`Journal`]: a daemon's crews each write
/// through a journal of their own over one directory, and one crew's appends apply the bound
/// to every crew's entries.
static PINNED: std::sync::LazyLock<Mutex<HashMap<String, usize>>> = std::sync::LazyLock::new(Mutex::default);

fn pinned() -> std::sync::MutexGuard<'static, HashMap<String, usize>> {
    PINNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Entries kept from the size bound ([`Journal::pin`]), let go of when dropped.
#[derive(Debug)]
pub struct Pinned {
    ids: Vec<String>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let mut pinned = pinned();
        for id in &self.ids {
            if let Some(holders) = pinned.get_mut(id) {
                *holders -= 1;
                if *holders == 0 {
                    pinned.remove(id);
                }
            }
        }
    }
}

/// Why an undo skips an entry whose log says it is undoable but an image of which is not in
/// `images/` (removed, or replaced by something else, outside vfs): not the size bound's drop.
const IMAGES_GONE: &str =
    "its before images are gone from the journal (removed or damaged outside vfs), so it can never be undone";

/// Why an undo skips an entry an image of which was written to after the change (the file's
/// own inode, kept by link, through a descriptor a process held open on it before).
const IMAGES_WRITTEN: &str = "its before image was written to after the change (by a process that held the file open), so it no longer holds what the change replaced; it is not put back";

/// A session's turn to undo ([`Journal::undo_turn`]), let go of when dropped.
#[derive(Debug)]
pub struct UndoTurn<'j> {
    journal: &'j Journal,
    session: String,
}

impl Drop for UndoTurn<'_> {
    fn drop(&mut self) {
        let (turns, freed) = &self.journal.turns;
        turns.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.session);
        freed.notify_all();
    }
}

struct Undoing<'j> {
    set: &'j Mutex<HashSet<String>>,
    id: String,
}

impl<'j> Undoing<'j> {
    /// Marks `id` as being undone, or `None` when it is already.
    fn take(set: &'j Mutex<HashSet<String>>, id: &str) -> Option<Self> {
        let fresh = set.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id.to_owned());
        fresh.then(|| Self { set, id: id.to_owned() })
    }
}

impl Drop for Undoing<'_> {
    fn drop(&mut self) {
        self.set.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.id);
    }
}

/// True for a part whose undo is guarded by the version its change left (a write's, an
/// edit's, a move's): without one it is not undoable.
fn needs_version(kind: &str) -> bool {
    matches!(kind, "write" | "edit" | "move")
}

/// One directory a stopped tree removal noted as it went (`Keeper::note_taking`).
struct Taken {
    /// Its virtual path.
    directory: String,
    /// Its permission bits, when the record notes them (older records do not).
    mode: Option<u32>,
    /// The virtual path of each file it was taking, with the name of its image.
    files: Vec<(String, String)>,
}

/// The mode a tree image keeps of a directory (the tree's own, or one of its items), or a
/// record of a stopped removal of one of its directories, when it keeps one.
fn mode_of(image: &Value) -> Option<u32> {
    image.get("mode").and_then(Value::as_u64).and_then(|mode| u32::try_from(mode).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path's root is the longest agent-facing root that holds it, by whole names: `/out2`
    /// is not under `/out`; a path under no root has no place.
    #[test]
    fn a_path_is_placed_by_the_longest_root_that_holds_it() {
        let places: Vec<(String, String)> =
            [("/out", "pA"), ("/out/deep", "pB"), ("/src", "pC")].map(|(r, p)| (r.to_owned(), p.to_owned())).to_vec();
        assert_eq!(place_of(&places, "/out/a.txt"), Some(("/out", "pA")));
        assert_eq!(place_of(&places, "/out"), Some(("/out", "pA")));
        assert_eq!(place_of(&places, "/out/deep/x"), Some(("/out/deep", "pB")));
        assert_eq!(place_of(&places, "/out2/x"), None);
        let parts = [json!({ "path": "/src/a", "to": "/out/deep/b" }), json!({ "path": "/elsewhere" })];
        assert_eq!(places_of(&parts, &places), Some(json!({ "/src": "pC", "/out/deep": "pB" })));
        assert_eq!(places_of(&[json!({ "path": "/elsewhere" })], &places), None);
    }

    proptest::proptest! {
        /// The room reckoned for a name is exactly its length as JSON, whatever it holds
        /// (quotes, backslashes, control characters, any Unicode).
        #[test]
        fn json_len_is_the_length_of_the_name_as_json(text in "(?s).{0,40}") {
            proptest::prop_assert_eq!(json_len(&text), serde_json::to_string(&text).unwrap().len() as u64);
        }
    }

    /// The room reckoned for a change's part holds the part as written, for a file, a tree
    /// (its items and its images named again in the entry's list) and a move.
    #[test]
    fn entry_room_holds_the_part_as_written() {
        let path = VirtualPath::new("/w/some \"quoted\" dir").unwrap();
        let to = VirtualPath::new("/w/elsewhere/far/away").unwrap();
        let kept = |index: usize| Saved::Kept { name: format!("1796634069663-fd2c60000000d.303a.{index:x}"), size: 9 };
        let items: Vec<vfs::TreeItem> = (0..50)
            .map(|index| vfs::TreeItem {
                relative: format!("sub/{index}-\u{1}\t\\-é"),
                content: (index % 7 != 0).then(|| kept(index)),
                mode: 0o100_644,
            })
            .collect();
        let images = [
            Image::Absent,
            Image::File { content: kept(0), mode: 0o644 },
            Image::Tree { mode: 0o755, items },
            Image::NotKept("the removal stopped part way"),
        ];
        for image in &images {
            for to in [None, Some(&to)] {
                let mut names = Vec::new();
                let written = match image {
                    Image::Absent => json!("absent"),
                    Image::File { content, mode } => {
                        names.extend(kept_names(Some(image)));
                        json!({ "file": kept_names(Some(image))[0], "mode": mode, "size": content.len() })
                    }
                    Image::Tree { mode, items } => {
                        names.extend(kept_names(Some(image)));
                        tree_json(*mode, items, |content| match content {
                            Saved::Kept { name, .. } => Ok(name.clone()),
                            _ => Err(String::new()),
                        })
                        .unwrap()
                    }
                    Image::NotKept(why) => json!({ "not_kept": why }),
                    _ => unreachable!(),
                };
                let part = json!({
                    "kind": "remove", "path": path, "to": to, "version": "aae45aaf4344ccda", "image": written,
                    "parent": false,
                });
                let paths = json!([path, to]);
                let written = part.to_string().len() + json!(names).to_string().len() + paths.to_string().len();
                let room = entry_room(&path, to, Some(image));
                assert!(written as u64 <= room, "{written} bytes written, {room} reckoned");
            }
        }
    }

    /// An entry's parts and images set aside go into as many files as their bound needs, in
    /// order, each named for the call and the entry; they read back as they were, and a file
    /// that is not the entry's reads as damaged, one that is gone as missing.
    #[test]
    fn parts_set_aside_read_back_whole_from_their_pieces() {
        let directory = tempfile::tempdir().unwrap();
        let (_registry, journal) = attached_beside(directory.path(), "memory://aside:/w:rw", true);
        let access = journal.access().unwrap();
        // Files, and a tree of 300 items (which go apart from their part).
        let tree: Vec<Value> = (0..300)
            .map(|index| json!({ "path": format!("sub/{index}"), "file": format!("c1.2.{index:x}") }))
            .collect();
        let mut parts: Vec<Value> = (0..200)
            .map(|index| json!({ "kind": "remove", "path": format!("/w/t/{index}"), "image": { "file": format!("c1.1.{index:x}") } }))
            .collect();
        parts.insert(100, json!({ "kind": "remove", "path": "/w/tree", "image": { "tree": tree, "mode": 493 } }));
        let images: Vec<String> = (0..400).map(|index| format!("c1.1.{index:x}")).collect();
        let Aside::Written { names, bytes } =
            set_aside_in(&access, "c1", "e1", parts.clone(), images.clone(), 8 * 1024)
        else {
            panic!("not set aside")
        };
        let expected: Vec<String> = (0..names.len()).map(|index| format!("c1.e1.{index}.entry")).collect();
        assert!(names.len() >= 4, "{names:?}");
        assert_eq!(names, expected);
        let sizes: Vec<usize> = names.iter().map(|name| aside_content(&access, name).unwrap().len()).collect();
        assert!(sizes.iter().all(|size| *size <= 8 * 1024 + 100), "{sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>() as u64, bytes);
        let line = json!({ "id": "e1", "parts_in": names });
        assert_eq!(aside_parts(&access, &line).as_ref(), Some(&parts));
        let named: Vec<String> = names.iter().flat_map(|name| aside_images(&access, name).unwrap()).collect();
        assert_eq!(named, images);
        // Another entry's name for the same file, and a file gone.
        assert_eq!(aside_parts(&access, &json!({ "id": "e2", "parts_in": names })), None);
        access
            .write(
                &format!("{IMAGES}/c1.e2.0.entry"),
                &aside_content(&access, &names[0]).unwrap(),
                &Precondition::Absent,
            )
            .unwrap();
        assert_eq!(aside_images(&access, "c1.e2.0.entry"), Err(AsideError::Damaged));
        assert_eq!(aside_images(&access, "c1.e3.0.entry"), Err(AsideError::Missing));
        assert_eq!(aside_images(&access, "c1.1.0"), Ok(Vec::new()));
        // A name this journal does not give (an older build's `ID.entry`) tells nothing.
        assert_eq!(aside_images(&access, "e1.entry"), Err(AsideError::Damaged));
        assert_eq!((aside_piece(16 << 20), aside_piece(1 << 20), aside_piece(0)), (4 << 20, 512 << 10, 1024));
        // Short enough, they stay in the line.
        assert!(matches!(
            set_aside_in(&access, "c1", "e4", parts[..2].to_vec(), images[..2].to_vec(), 8 * 1024),
            Aside::Inline(..)
        ));
    }

    /// The lines of a log as a compaction reads them.
    fn scan_of(values: &[Value]) -> Scan {
        let mut scan = Scan::default();
        for value in values {
            let what = scan.note(value);
            scan.lines.push(Line { len: value.to_string().len(), what });
        }
        scan
    }

    fn entry_of(id: &str, tenant: Option<&str>, undoes: Option<&str>) -> Value {
        let mut line = json!({
            "id": id, "time": "2026-12-07T00:00:00Z", "session": "s", "call": format!("call-{id}"),
            "operation": "write", "paths": ["/w/a.txt"], "images": [format!("{id}.0")], "parts": [],
        });
        if let Some(tenant) = tenant {
            line["tenant"] = json!(tenant);
        }
        if let Some(undone) = undoes {
            line["undoes"] = json!(undone);
        }
        line
    }

    /// Past the bound, a compaction cuts the tenant whose entries take the most room: one
    /// crew's 2,000 changes drop, then forget, their own oldest (in that order, the newest
    /// kept whole), and another crew's two older changes stay whole, as does an operator's
    /// undo (written by a process of no crew) of one of them, which goes with its crew.
    /// With one tenant, the oldest give up first as before.
    #[test]
    fn a_compaction_cuts_the_tenant_that_keeps_the_most() {
        let mut lines = vec![entry_of("b1", Some("beta"), None), entry_of("b2", Some("beta"), None)];
        lines.extend((0..2000).map(|n| entry_of(&format!("a{n:05}"), Some("alpha"), None)));
        lines.push(entry_of("u1", None, Some("b2")));
        let scan = scan_of(&lines);
        let bound = 64 * 1024;
        let (fates, forget) = scan.fates(bound);
        assert_eq!((fates[0], fates[1], fates[2002]), (Fate::Whole, Fate::Whole, Fate::Whole));
        let alpha = &fates[2..2002];
        let forgotten = alpha.iter().take_while(|fate| **fate == Fate::Omitted).count();
        let dropped = alpha[forgotten..].iter().take_while(|fate| **fate == Fate::Dropped).count();
        assert!(forgotten > 0 && dropped > 0, "{forgotten} forgotten, {dropped} dropped");
        assert!(alpha[forgotten + dropped..].iter().all(|fate| *fate == Fate::Whole));
        assert!(forgotten + dropped < 2000, "the newest are kept whole");
        assert_eq!(forget.len(), forgotten + dropped, "their images go");
        assert!(!forget.iter().any(|name| name.starts_with('b') || name.starts_with('u')));
        let kept: u64 = scan.lines.iter().zip(&fates).map(|(line, fate)| line.kept_bytes(*fate)).sum();
        assert!(kept + FORGOTTEN_LINE <= bound, "{kept} bytes kept");

        // One tenant: beta's, the oldest, are forgotten first.
        let one: Vec<Value> = lines
            .iter()
            .cloned()
            .map(|mut line| {
                line.as_object_mut().unwrap().remove("tenant");
                line
            })
            .collect();
        let (fates, _) = scan_of(&one).fates(bound);
        assert_eq!((fates[0], fates[1], fates[2002]), (Fate::Omitted, Fate::Omitted, Fate::Whole));

        // A tenant cut to a share whose newest entry is longer than that share (though shorter
        // than three quarters of the bound) drops that entry alone: its older ones stay whole.
        let mut lines: Vec<Value> = (0..10).map(|n| entry_of(&format!("b{n}"), Some("beta"), None)).collect();
        let mut large = entry_of("big", Some("beta"), None);
        large["parts"] = json!(["x".repeat(30_000)]);
        lines.push(large);
        lines.extend((0..400).map(|n| entry_of(&format!("a{n:05}"), Some("alpha"), None)));
        let (fates, _) = scan_of(&lines).fates(bound);
        assert_eq!(fates[10], Fate::Dropped, "the long entry, alone");
        assert!(fates[..10].iter().all(|fate| *fate == Fate::Whole), "{:?}", &fates[..10]);
    }

    #[test]
    fn fair_shares_give_the_least_wanted_all_and_the_rest_evenly() {
        let wanted: HashMap<&str, u64> = [("a", 1000), ("b", 10), ("c", 300)].into_iter().collect();
        let shares = |room| {
            let shares = fair_shares(&wanted, room);
            (shares["a"], shares["b"], shares["c"])
        };
        assert_eq!(shares(2000), (2000, 2000, 2000), "everything fits: no tenant is cut");
        assert_eq!(shares(610), (300, 10, 300));
        assert_eq!(shares(400), (195, 10, 195));
        assert_eq!(shares(9), (3, 3, 3));
    }

    /// The bound drops the oldest entry of the tenant that keeps the most bytes: one crew's
    /// changes push out its own images before another crew's, and within one tenant the
    /// oldest go first.
    #[test]
    fn the_bound_drops_first_from_the_tenant_that_keeps_the_most() {
        let mut live = Live::default();
        assert_eq!(live.next_to_drop(&HashSet::new()), None);
        live.add("1".to_owned(), 100, vec!["1.0".to_owned()], "b".to_owned());
        live.add("2".to_owned(), 60, vec!["2.0".to_owned()], "a".to_owned());
        assert_eq!(live.next_to_drop(&HashSet::new()).as_deref(), Some("1"));
        assert!(live.apply(&json!({ "id": "3", "image_bytes": 60, "images": ["3.0"], "tenant": "a", "parts": [] })));
        assert_eq!(live.tenants.get("a"), Some(&120));
        assert_eq!(live.next_to_drop(&HashSet::new()).as_deref(), Some("2"), "a keeps 120 bytes, b 100");
        live.remove("2");
        assert_eq!(live.next_to_drop(&HashSet::new()).as_deref(), Some("1"), "b keeps 100 bytes, a 60");
        // As much each: the tenant with the oldest entry.
        live.add("4".to_owned(), 40, vec!["4.0".to_owned()], "a".to_owned());
        assert_eq!(live.next_to_drop(&HashSet::new()).as_deref(), Some("1"));
        live.remove("1");
        assert_eq!(live.tenants.get("b"), None);
        assert_eq!(live.next_to_drop(&HashSet::new()).as_deref(), Some("3"));
        // An entry a running undo chose is passed over: the tenant's next, then another's.
        live.add("5".to_owned(), 10, vec!["5.0".to_owned()], "b".to_owned());
        let pinned = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect::<HashSet<String>>();
        // (a keeps 100 bytes, b 10.)
        assert_eq!(live.next_to_drop(&pinned(&["3"])).as_deref(), Some("4"));
        assert_eq!(live.next_to_drop(&pinned(&["3", "4"])), None, "not b's, which keeps less");
    }

    /// What another process appended is taken in line by line: its entries add their
    /// images, its `dropped` lines take away the entry they name, once however many say so; a
    /// line that is not one of the log's sends the count back to a read of the whole log.
    #[test]
    fn lines_another_process_appended_are_counted_alone() {
        let mut live = Live::default();
        live.add("1".to_owned(), 100, vec!["1.0".to_owned()], String::new());
        assert!(live.apply(&json!({ "id": "2", "image_bytes": 24, "images": ["2.0"], "parts": [] })));
        assert!(live.apply(&json!({ "id": "3", "images": [], "parts": [] })));
        assert!(live.apply(&json!({ "intent": "i", "call": "c", "image_bytes": 7 })));
        assert!(live.apply(&json!({ "settled": "c" })));
        assert!(live.apply(&json!({ "dropped": true, "id": "4", "call": "c" })));
        assert_eq!(
            (live.bytes, live.entries.keys().cloned().collect::<Vec<_>>()),
            (124, vec!["1".to_owned(), "2".to_owned()])
        );
        assert!(live.apply(&json!({ "dropped": "1" })));
        assert!(live.apply(&json!({ "dropped": "1" })), "dropped by two processes at once");
        assert!(live.apply(&json!({ "dropped": "unknown" })));
        assert_eq!(live.bytes, 24);
        assert_eq!(live.entries["2"].images, ["2.0"]);
        assert!(!live.apply(&json!({ "something": "else" })));
        assert!(!live.apply(&json!([1, 2])));
    }

    /// Appends "another process" makes to the log in `directory`: a file of its own, opened
    /// for appending, as another process's would be.
    #[expect(clippy::disallowed_types, reason = "fixture: another process's appends to a journal's log")]
    fn append_as_another(directory: &std::path::Path, line: &Value) -> u64 {
        use std::io::Write as _;
        let text = format!("{line}\n");
        let mut log = std::fs::OpenOptions::new().append(true).open(directory.join("journal.jsonl")).unwrap();
        log.write_all(text.as_bytes()).unwrap();
        text.len() as u64
    }

    /// An entry of one path and its call, with nothing to undo (no parts).
    fn plain_entry(id: &str) -> Value {
        json!({ "id": id, "call": format!("c{id}"), "paths": [format!("/w/{id}")], "parts": [] })
    }

    fn own_line(journal: &Journal, line: &Value) -> u64 {
        let text = format!("{line}\n");
        journal.append(&journal.access().unwrap(), &text, vfs::HeldSyncs::default()).unwrap();
        text.len() as u64
    }

    /// A line longer than [`MAX_LINE`] (no line this journal writes) is skipped without being
    /// held in memory and names nothing, whole or cut short at the log's end; so does a line
    /// that is JSON with an id but no call (`{"id":"x"}`), or with an id longer than
    /// [`MAX_ID`]. The lines around them are read as usual, and a compaction leaves them out.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a hand-made journal's log")]
    fn an_over_long_line_or_a_line_that_is_no_entry_names_nothing() {
        let directory = tempfile::tempdir().unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let entry = plain_entry;
        let first = own_line(&journal, &entry("1"));
        let over_long = format!("{{\"id\":\"{}\",\"call\":\"c\"}}\n", "A".repeat(MAX_LINE + CHUNK));
        let mut log = std::fs::read(directory.path().join("journal.jsonl")).unwrap();
        log.extend_from_slice(over_long.as_bytes());
        log.extend_from_slice(b"{\"id\":\"zzzzzz-bogus\"}\n");
        log.extend_from_slice(format!("{{\"id\":\"{}\",\"call\":\"c\"}}\n", "L".repeat(MAX_ID + 1)).as_bytes());
        log.extend_from_slice(format!("{}\n", entry("2")).as_bytes());
        std::fs::write(directory.path().join("journal.jsonl"), &log).unwrap();
        let ids = |journal: &Journal| -> Vec<String> {
            journal.entries().all().iter().map(|entry| entry.id.clone()).collect()
        };
        assert_eq!(ids(&journal), ["1", "2"]);
        // Cut short at the end (no newline): skipped as well, and the whole lines end before it.
        log.extend_from_slice(over_long.trim_end().as_bytes());
        std::fs::write(directory.path().join("journal.jsonl"), &log).unwrap();
        let read = journal.access().unwrap().open_read(LOG_FILE).unwrap();
        let mut seen = Vec::new();
        let (end, _) = lines_of(&read, 0, u64::MAX, true, |at, line| seen.push((at, line.len()))).unwrap();
        assert_eq!(end, (log.len() - over_long.len() + 1) as u64, "the whole lines end where the cut one begins");
        assert_eq!(seen.len(), 6);
        assert_eq!(seen[1], (first, 0), "the over-long line, handed on empty from where it begins");
        assert_eq!(seen[5], (end, 0), "the cut line, handed on empty from where it begins");
        // A compaction keeps the two entries alone.
        let scan = Scan::read(&read).unwrap();
        let fates: Vec<bool> = scan.lines.iter().map(|line| matches!(line.what, What::Entry { .. })).collect();
        assert_eq!(fates, [true, false, false, false, true]);
    }

    /// Within a batch, each read of the entries takes only what was appended since the last
    /// (another process's entry, a `dropped` line, an undo), and a last line without its
    /// newline is taken once, when it is whole. A log replaced (a compaction), or one found
    /// shorter than what was read, is read whole again. Out of a batch, nothing is kept.
    #[test]
    #[expect(clippy::disallowed_types, reason = "fixture: a journal's log replaced or cut on disk")]
    #[expect(clippy::disallowed_methods, reason = "fixture: a journal's log replaced or cut on disk")]
    fn a_batch_reads_what_was_appended_since_and_a_replaced_log_whole() {
        use std::io::Write as _;
        let directory = tempfile::tempdir().unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let entry = plain_entry;
        let listed = |entries: &Entries| -> Vec<(String, EntryState)> {
            entries.all().iter().map(|entry| (entry.id.clone(), entries.state(entry))).collect()
        };
        let ids = |list: &[(&str, EntryState)]| -> Vec<(String, EntryState)> {
            list.iter().map(|(id, state)| ((*id).to_owned(), *state)).collect()
        };
        own_line(&journal, &entry("1"));
        let batch = journal.batch();
        assert_eq!(listed(&journal.entries()), ids(&[("1", EntryState::Undoable)]));
        append_as_another(directory.path(), &entry("2"));
        append_as_another(directory.path(), &json!({ "dropped": "1" }));
        own_line(&journal, &json!({ "id": "3", "call": "c3", "undoes": "2", "parts": [] }));
        assert_eq!(
            listed(&journal.entries()),
            ids(&[("1", EntryState::Dropped), ("2", EntryState::Undone), ("3", EntryState::Undoable)])
        );
        // Read on from where the last read ended, not from the start: a line already read,
        // changed in place (which nothing that writes the log does), is not read again.
        let log_path = directory.path().join("journal.jsonl");
        let text = std::fs::read(&log_path).unwrap();
        let at = text.windows(8).position(|bytes| bytes == br#""id":"1""#).unwrap() + 6;
        std::os::unix::fs::FileExt::write_all_at(
            &std::fs::File::options().write(true).open(&log_path).unwrap(),
            b"0",
            at as u64,
        )
        .unwrap();
        own_line(&journal, &json!({ "settled": "c9" }));
        assert_eq!(journal.entries().all()[0].id, "1");

        // A line being appended: not an entry until its newline is there, then one.
        let line = entry("4").to_string();
        let mut log = std::fs::OpenOptions::new().append(true).open(&log_path).unwrap();
        log.write_all(line.as_bytes()).unwrap();
        assert_eq!(journal.entries().all().len(), 3);
        log.write_all(b"\n").unwrap();
        assert_eq!(
            journal.entries().all().iter().map(|entry| entry.id.as_str()).collect::<Vec<_>>(),
            ["1", "2", "3", "4"]
        );

        // A compaction's new log, put in place by rename: read whole.
        let compacted = directory.path().join("compacted.jsonl");
        // (longer than what was read: its length does not tell it from the log read)
        let long = json!({ "id": "5", "call": "c5", "paths": ["/w/5"], "parts": [], "pad": "x".repeat(4096) });
        std::fs::write(&compacted, format!("{long}\n")).unwrap();
        std::fs::rename(&compacted, &log_path).unwrap();
        assert_eq!(listed(&journal.entries()), ids(&[("5", EntryState::Undoable)]));
        // The same file, cut shorter than what was read and written again: read whole.
        let longer = format!("{}\n{}\n", entry("6"), entry("7"));
        std::fs::OpenOptions::new().append(true).open(&log_path).unwrap().write_all(longer.as_bytes()).unwrap();
        assert_eq!(journal.entries().all().len(), 3);
        let file = std::fs::OpenOptions::new().write(true).open(&log_path).unwrap();
        file.set_len(0).unwrap();
        (&file).write_all(format!("{}\n", entry("8")).as_bytes()).unwrap();
        assert_eq!(listed(&journal.entries()), ids(&[("8", EntryState::Undoable)]));

        // Out of every batch, what was read is let go of.
        let second = journal.batch();
        drop(batch);
        assert_eq!(journal.batching.lock().unwrap().loaded.entries.len(), 1);
        drop(second);
        assert!(journal.batching.lock().unwrap().loaded.entries.is_empty());
        append_as_another(directory.path(), &entry("9"));
        assert_eq!(journal.entries().all().len(), 2);
        assert!(journal.batching.lock().unwrap().loaded.log.is_none());
    }

    /// What another process appends between this one's appends is noted as the stretch it
    /// takes, found from where each append of this one's landed, and counted alone: its
    /// entry adds its images. A stretch that does not begin a line, or one noted in a log
    /// taken again since, is not counted (the log is then read whole). While the whole log
    /// is read, stretches are still noted; with no count standing, and none being made, the
    /// count is forgotten.
    #[test]
    fn lines_another_process_appends_between_own_appends_are_noted_where_they_lie() {
        let directory = tempfile::tempdir().unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let access = &journal.access().unwrap();
        let first = own_line(&journal, &json!({ "settled": "own-1" }));
        journal.state().counted = true;
        assert_eq!(journal.state().log_end, Some(first));
        let theirs = append_as_another(
            directory.path(),
            &json!({ "id": "2", "image_bytes": 24, "images": ["2.0"], "parts": [] }),
        );
        let second = own_line(&journal, &json!({ "settled": "own-2" }));
        let (unread, generation) = {
            let state = journal.state();
            (state.unread.clone(), state.generation)
        };
        assert_eq!(unread, [(first, first + theirs)]);
        assert_eq!(journal.state().log_end, Some(first + theirs + second));

        let mut live = Live::default();
        assert!(journal.count_unread(access, &mut live, &unread, generation));
        assert_eq!((live.bytes, live.entries["2"].images.clone()), (24, vec!["2.0".to_owned()]));
        assert!(!journal.count_unread(access, &mut Live::default(), &[(first + 1, first + theirs)], generation));
        assert!(!journal.count_unread(access, &mut Live::default(), &unread, generation + 1));

        // A whole read runs: noted all the same.
        {
            let mut state = journal.state();
            (state.counted, state.loading) = (false, true);
        }
        let before = journal.state().log_end.unwrap();
        let more = append_as_another(directory.path(), &json!({ "dropped": "2" }));
        own_line(&journal, &json!({ "settled": "own-3" }));
        let state = journal.state();
        assert_eq!(
            (state.unread.clone(), state.generation),
            (vec![(first, first + theirs), (before, before + more)], generation)
        );
        drop(state);

        // Neither counted nor counting: the stretches mean nothing, and a count under way
        // cannot stand.
        journal.state().loading = false;
        append_as_another(directory.path(), &json!({ "dropped": "3" }));
        own_line(&journal, &json!({ "settled": "own-4" }));
        let state = journal.state();
        assert_eq!((state.unread.clone(), state.generation), (Vec::new(), generation + 1));
    }

    /// A bound that counts the whole log (no count stood) takes in what another process
    /// appended, drops the oldest entry for it, and leaves a count that stands: the stretch
    /// its own `dropped` line found (the other process's entry, read whole already) is not
    /// kept for the next count, and where this process's lines end moves past what was read,
    /// so that the next own append notes nothing.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: the length of a journal's log on disk")]
    fn a_bound_that_read_the_whole_log_leaves_nothing_to_read_again() {
        let directory = tempfile::tempdir().unwrap();
        let mut journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        journal.max_bytes = MIN_MAX_BYTES;
        own_line(&journal, &json!({ "id": "1", "call": "c1", "images": ["c1.0"], "image_bytes": 1000, "parts": [] }));
        let theirs = MIN_MAX_BYTES - 500;
        append_as_another(
            directory.path(),
            &json!({ "id": "2", "call": "c2", "images": ["c2.0"], "image_bytes": theirs, "parts": [] }),
        );
        assert!(!journal.state().counted);
        journal.bound(&journal.access().unwrap(), Vec::new());
        let on_disk = || std::fs::metadata(directory.path().join("journal.jsonl")).unwrap().len();
        {
            let live = journal.live.lock().unwrap();
            assert_eq!((live.bytes, live.entries.keys().cloned().collect::<Vec<_>>()), (theirs, vec!["2".to_owned()]));
            let state = journal.state();
            assert_eq!((state.counted, state.unread.clone(), state.log_end), (true, Vec::new(), Some(on_disk())));
        }
        own_line(&journal, &json!({ "settled": "c1" }));
        assert_eq!(journal.state().unread, []);
        // Counted whole again with nothing to drop (no own append after the read): the
        // other process's line read is not noted at the next own append.
        journal.state().forget_count();
        append_as_another(
            directory.path(),
            &json!({ "id": "3", "call": "c3", "images": ["c3.0"], "image_bytes": 10, "parts": [] }),
        );
        journal.bound(&journal.access().unwrap(), Vec::new());
        assert_eq!(journal.live.lock().unwrap().bytes, theirs + 10);
        own_line(&journal, &json!({ "settled": "c3" }));
        let state = journal.state();
        assert_eq!((state.counted, state.unread.clone(), state.log_end), (true, Vec::new(), Some(on_disk())));
    }

    /// After an append that failed (perhaps part written), the next begins on a line of its
    /// own: what was cut is a line every reader skips, and the next entry is read whole.
    #[test]
    #[expect(clippy::disallowed_types, reason = "fixture: a line cut short in a journal's log")]
    fn after_a_failed_append_the_next_line_stands_alone() {
        let directory = tempfile::tempdir().unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let access = &journal.access().unwrap();
        append_as_another(directory.path(), &json!({ "id": "1", "call": "c1", "parts": [] }));
        std::fs::OpenOptions::new()
            .append(true)
            .open(directory.path().join("journal.jsonl"))
            .and_then(|mut log| std::io::Write::write_all(&mut log, b"{\"id\": \"cu"))
            .unwrap();
        journal.state().cut = true;
        own_line(&journal, &json!({ "id": "2", "call": "c2", "parts": [] }));
        let ids: Vec<String> = load(access).into_iter().map(|entry| entry.id).collect();
        assert_eq!(ids, ["1", "2"]);
        own_line(&journal, &json!({ "id": "3", "call": "c3", "parts": [] }));
        assert_eq!(load(access).len(), 3, "one newline, once");
        assert!(!journal.state().cut);
    }

    /// A real failed append: the file-size limit (`RLIMIT_FSIZE`) cuts a line part way and
    /// refuses the rest, and the lone newline too. The next append, once the limit is raised,
    /// begins on a line of its own: the cut part is a line every reader skips, and the entries
    /// before and after it are read whole. Run in a child process (the limit is the whole
    /// process's), with `SIGXFSZ` ignored so that the write fails instead of ending it.
    #[test]
    fn an_append_cut_by_the_file_size_limit_leaves_a_line_every_reader_skips() {
        let directory = tempfile::tempdir().unwrap();
        let test = "journal::tests::append_cut_by_the_file_size_limit_in_a_child";
        let output = std::process::Command::new("/bin/sh")
            .args(["-c", "trap '' XFSZ; exec \"$@\"", "sh"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", test, "--ignored", "--nocapture", "--test-threads", "1"])
            .env("VFS_TEST_CUT_LOG", directory.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("the cut line stood alone"), "{stdout}");
    }

    /// The child of [`an_append_cut_by_the_file_size_limit_leaves_a_line_every_reader_skips`].
    #[test]
    #[ignore = "run by its parent test, in a process of its own"]
    #[expect(clippy::disallowed_methods, reason = "fixture: the journal's log on disk")]
    fn append_cut_by_the_file_size_limit_in_a_child() {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let Some(directory) = std::env::var_os("VFS_TEST_CUT_LOG") else { return };
        let directory = std::path::PathBuf::from(directory);
        let journal = open_journal(&directory, vfs::ambient_authority()).unwrap();
        let access = &journal.access().unwrap();
        let first = own_line(&journal, &json!({ "id": "1", "call": "c1", "parts": [] }));
        let limit = getrlimit(Resource::Fsize);
        setrlimit(Resource::Fsize, rustix::process::Rlimit { current: Some(first + 10), ..limit }).unwrap();
        let second = format!("{}\n", json!({ "id": "2", "call": "c2", "parts": [] }));
        let failed = journal.append(access, &second, vfs::HeldSyncs::default());
        setrlimit(Resource::Fsize, limit).unwrap();
        assert_eq!(failed, Err(format!("{LOG_FILE}: could not be appended to")));
        assert!(journal.state().cut, "the lone newline was refused too");
        own_line(&journal, &json!({ "id": "3", "call": "c3", "parts": [] }));
        let log = std::fs::read_to_string(directory.join("journal.jsonl")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines.len(), 3, "{log}");
        assert_eq!(lines[1], &second[..10]);
        let ids: Vec<String> = load(access).into_iter().map(|entry| entry.id).collect();
        assert_eq!(ids, ["1", "3"]);
        #[expect(clippy::print_stdout, reason = "the parent test reads that the child ran to its end")]
        {
            println!("the cut line stood alone");
        }
    }

    /// An hour from now: a listing that is not meant to run out of time.
    fn far() -> Instant {
        Instant::now() + Duration::from_hours(1)
    }

    /// A journal in `directory` attached (`sweeps`: as a process that changes things) to a
    /// registry of `mount` and the journal's root, observing it.
    fn attached_beside(
        directory: &std::path::Path,
        mount: &str,
        sweeps: bool,
    ) -> (MountRegistry, std::sync::Arc<Journal>) {
        let journal = std::sync::Arc::new(Journal::new(DEFAULT_MAX_BYTES));
        let journal_root = crate::launch::runner_root(JOURNAL_ROOT);
        let registry = MountRegistry::builder()
            .mount(mount.parse().unwrap())
            .internal(vfs::MountSpec::local(directory.to_path_buf(), journal_root, vfs::Rights::ReadWrite))
            .observe(journal.clone())
            .build(vfs::ambient_authority())
            .unwrap();
        assert!(journal.attach_with(&registry, sweeps));
        (registry, journal)
    }

    /// A start alone removes the images object stores keep for this journal that no line
    /// names (a process killed between the copy and its intent), and leaves those a line
    /// names, those of a call stopped during its change (an intent without an entry), and
    /// those of another journal in the same bucket (another tag).
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "fixture: a journal's log on disk, cut as a killed process leaves it"
    )]
    fn a_start_alone_removes_only_its_own_object_images_that_no_line_names() {
        let (directory, other_directory) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let attach_at = |directory: &std::path::Path, root: &str, rights: &str| {
            attached_beside(directory, &format!("memory://swept-images:{root}:{rights}"), true)
        };
        let attach = |directory: &std::path::Path| attach_at(directory, "/m", "rw");
        let image_of = |journal: &Journal, path: &str| -> String {
            let entries = journal.entries();
            let entry = entries.all().iter().rev().find(|entry| entry.paths == [path]).unwrap().clone();
            let line = serde_json::from_str::<Value>(
                std::fs::read_to_string(directory.path().join("journal.jsonl"))
                    .unwrap()
                    .lines()
                    .find(|line| line.contains(&entry.id))
                    .unwrap(),
            )
            .unwrap();
            line["images"][0].as_str().unwrap().to_owned()
        };
        let (named, orphan, stopped) = {
            let (registry, journal) = attach(directory.path());
            let agent = registry.agent();
            agent.write("/m/a.txt", "one\n", &Precondition::Absent).unwrap();
            agent.write("/m/a.txt", "two\n", &Precondition::Any).unwrap();
            journal.flush();
            let named = image_of(&journal, "/m/a.txt");
            agent.write("/m/b.txt", "one\n", &Precondition::Absent).unwrap();
            agent.write("/m/b.txt", "two\n", &Precondition::Any).unwrap();
            journal.flush();
            let orphan = image_of(&journal, "/m/b.txt");
            agent.write("/m/c.txt", "one\n", &Precondition::Absent).unwrap();
            agent.write("/m/c.txt", "two\n", &Precondition::Any).unwrap();
            journal.flush();
            let stopped = image_of(&journal, "/m/c.txt");
            (named, orphan, stopped)
        };
        // Killed between the copy and its intent: no line names the copy. And killed during
        // a change whose intent was written, with no line naming its image (a tree's images
        // are made after the intent): that call's images are kept.
        let call_of = |path: &str| {
            path.rsplit_once('/').unwrap().1.split_once('-').unwrap().1.split('.').next().unwrap().to_owned()
        };
        let log = std::fs::read_to_string(directory.path().join("journal.jsonl")).unwrap();
        let mut kept: String = log
            .lines()
            .filter(|line| !line.contains(&orphan) && !line.contains(&stopped))
            .flat_map(|line| [line, "\n"])
            .collect();
        kept.push_str(&format!(
            "{}\n",
            json!({ "intent": "i-stopped", "call": call_of(&stopped), "operation": "write_file" })
        ));
        std::fs::write(directory.path().join("journal.jsonl"), kept).unwrap();
        let theirs = {
            let (registry, journal) = attach(other_directory.path());
            registry.agent().write("/m/a.txt", "three\n", &Precondition::Any).unwrap();
            journal.flush();
            let entries = journal.entries();
            let line = serde_json::from_str::<Value>(
                std::fs::read_to_string(other_directory.path().join("journal.jsonl")).unwrap().lines().last().unwrap(),
            )
            .unwrap();
            assert_eq!(entries.all().len(), 1);
            line["images"][0].as_str().unwrap().to_owned()
        };
        let tags: Vec<String> = [&named, &orphan, &theirs]
            .map(|path| path.rsplit_once('/').unwrap().1.split_once('-').unwrap().0.to_owned())
            .into();
        assert_eq!(tags[0], tags[1]);
        assert_ne!(tags[0], tags[2], "each journal has its own tag");

        // What a start alone does (the journals above are never freed in this process: each
        // holds its capability, which holds its registry, which holds it), here with the
        // bucket mounted at another root: the images the lines name are the same objects.
        let at_n = |path: &str| path.replacen("/m/", "/n/", 1);
        // A mount that takes no write is not swept.
        let (_registry, journal) = attach_at(directory.path(), "/n", "ro");
        journal.tidy(&journal.access().unwrap(), COMPACT_FROM);
        assert_eq!(journal.keeper.get().unwrap().read_stored(&at_n(&orphan)).unwrap(), b"one\n");
        let (_registry, journal) = attach_at(directory.path(), "/n", "rw");
        journal.tidy(&journal.access().unwrap(), COMPACT_FROM);
        let keeper = journal.keeper.get().unwrap();
        assert_eq!(keeper.read_stored(&at_n(&named)).unwrap(), b"one\n");
        assert_eq!(keeper.read_stored(&at_n(&orphan)).unwrap_err().kind(), vfs::ErrorKind::NotFound);
        assert_eq!(keeper.read_stored(&at_n(&stopped)).unwrap(), b"one\n");
        assert_eq!(keeper.read_stored(&at_n(&theirs)).unwrap(), b"two\n");
    }

    /// A journal's word is `j` and 32 hex digits, fresh each time it is made; a process that
    /// changes nothing makes none, and a `journal.id` that does not hold such a word gives
    /// none (the images are then named without it, and never swept).
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a journal's word on disk")]
    fn a_journals_word_is_made_only_by_a_process_that_changes_things_and_only_of_its_form() {
        let (one, two) = (fresh_journal_tag(), fresh_journal_tag());
        assert!(is_journal_tag(&one) && is_journal_tag(&two), "{one} {two}");
        assert_ne!(one, two);
        for not in ["", "1712345678901", "J0123456789abcdef0123456789abcdef", "j0123456789ABCDEF0123456789abcdef"] {
            assert!(!is_journal_tag(not), "{not}");
        }
        let directory = tempfile::tempdir().unwrap();
        let attach = |sweeps: bool| attached_beside(directory.path(), "memory://journal-words:/m:rw", sweeps);
        let (_registry, _journal) = attach(false);
        assert!(!directory.path().join("journal.id").exists(), "a dry run writes no word");
        let (registry, journal) = attach(true);
        let word = std::fs::read_to_string(directory.path().join("journal.id")).unwrap();
        assert!(is_journal_tag(word.trim()), "{word}");
        let agent = registry.agent();
        agent.write("/m/w.txt", "one\n", &Precondition::Absent).unwrap();
        agent.write("/m/w.txt", "two\n", &Precondition::Any).unwrap();
        journal.flush();
        let images = journal.keeper.get().unwrap().stored_images(10, far()).paths;
        assert_eq!(images.len(), 1);
        assert!(images[0].starts_with(&format!("/m/.vfs-tmp-journal/{}-", word.trim())), "{images:?}");
        std::fs::write(directory.path().join("journal.id"), "1712345678901\n").unwrap();
        let (_registry, journal) = attach(true);
        assert_eq!(journal.keeper.get().unwrap().stored_images(10, far()).paths, Vec::<String>::new());
        assert_eq!(std::fs::read_to_string(directory.path().join("journal.id")).unwrap(), "1712345678901\n");
    }

    /// A log that another process's compaction replaced is compacted next from its new
    /// length, not from the one this process saw when it attached; a log found longer than
    /// its bound is compacted at twice the bound.
    #[test]
    fn the_next_compaction_is_reckoned_from_the_log_in_use() {
        assert_eq!(compact_at(0, 1 << 20), COMPACT_FROM);
        assert_eq!(compact_at(100 << 10, 1 << 20), 200 << 10);
        assert_eq!(compact_at(10 << 20, 1 << 20), 2 << 20);
        let directory = tempfile::tempdir().unwrap();
        let first = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let mut length = 0;
        while length < 3 * COMPACT_FROM {
            length += own_line(&first, &json!({ "settled": format!("{length}"), "pad": "p".repeat(200) }));
        }
        let second = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        assert_eq!(second.state().compact_at, 2 * length);
        first.compact_if_grown(&first.access().unwrap());
        assert_eq!(first.state().compact_at, COMPACT_FROM, "every `settled` line left out");
        let own = own_line(&second, &json!({ "settled": "second" }));
        let state = second.state();
        assert_eq!((state.compact_at, state.log_end), (COMPACT_FROM, Some(own)));
    }

    /// After a read of the whole log that stopped at `end`, what is left of the stretches
    /// noted meanwhile is what lies past it.
    #[test]
    fn stretches_a_whole_read_covered_are_left_out() {
        assert_eq!(unread_past(&[(10, 20), (30, 40), (50, 60)], 35), [(35, 40), (50, 60)]);
        assert_eq!(unread_past(&[(10, 20)], 20), []);
        assert_eq!(unread_past(&[(10, 20)], 5), [(10, 20)]);
    }

    /// The count of a whole log leaves out an intent without its entry (its call may be
    /// running: its entry comes later, under its own id, with the same images) and the
    /// entries dropped.
    #[test]
    fn a_whole_count_leaves_out_intents_without_their_entry() {
        let directory = tempfile::tempdir().unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        own_line(&journal, &json!({ "intent": "1", "call": "c1", "images": ["c1.0"], "image_bytes": 10 }));
        own_line(&journal, &json!({ "intent": "2", "call": "c2", "images": ["c2.0"], "image_bytes": 20 }));
        own_line(&journal, &json!({ "id": "3", "call": "c2", "images": ["c2.0"], "image_bytes": 20, "parts": [] }));
        own_line(&journal, &json!({ "id": "4", "call": "c4", "images": ["c4.0"], "image_bytes": 40, "parts": [] }));
        own_line(&journal, &json!({ "dropped": "4" }));
        let live = Live::of(load(&journal.access().unwrap()));
        assert_eq!((live.bytes, live.entries.keys().cloned().collect::<Vec<_>>()), (20, vec!["3".to_owned()]));
    }

    /// A log that has grown but is not worth a rewrite is left as it is, and where this
    /// process's last append ended with it: what another process appended since is still
    /// noted as theirs at the next append.
    #[test]
    fn a_compaction_that_rewrites_nothing_keeps_where_the_own_lines_end() {
        let directory = tempfile::tempdir().unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let access = &journal.access().unwrap();
        let (mut end, mut id) = (0, 0);
        while end < COMPACT_FROM {
            end += own_line(
                &journal,
                &json!({ "id": format!("{id:08}"), "call": format!("c{id}"), "parts": [], "pad": "p".repeat(55) }),
            );
            id += 1;
        }
        journal.state().counted = true;
        let theirs = append_as_another(directory.path(), &json!({ "id": "x", "call": "cx", "parts": [] }));
        journal.compact_if_grown(access);
        assert_eq!(journal.state().log_end, Some(end));
        // Tried again once the log has grown by half, not at the next append.
        assert_eq!(journal.state().compact_at, end + theirs + COMPACT_FROM, "half of it is less than 64 KiB");
        own_line(&journal, &json!({ "settled": "own" }));
        assert_eq!(journal.state().unread, [(end, end + theirs)]);
    }

    /// Two processes append to one log while each compacts it as it grows: every entry
    /// either appended is in the log at the end, once (the lines appended while a compaction
    /// wrote the new log are carried into it; a compaction of a log that another replaced
    /// first is not put in place), and what no reader needs is gone.
    #[test]
    fn two_processes_compacting_one_log_as_they_append_lose_no_line() {
        const ROUNDS: usize = 400;
        let directory = tempfile::tempdir().unwrap();
        let journals = [(); 2].map(|()| open_journal(directory.path(), vfs::ambient_authority()).unwrap());
        std::thread::scope(|scope| {
            for (which, journal) in journals.iter().enumerate() {
                scope.spawn(move || {
                    let pad = "p".repeat(600);
                    for round in 0..ROUNDS {
                        let id = format!("{round:05}-{which}");
                        let entry = json!({ "id": id, "call": id, "parts": [], "pad": pad });
                        let settled = json!({ "settled": id, "pad": pad });
                        let lines = format!("{entry}\n{settled}\n");
                        journal.append(&journal.access().unwrap(), &lines, vfs::HeldSyncs::default()).unwrap();
                        journal.compact_if_grown(&journal.access().unwrap());
                    }
                });
            }
        });
        let mut ids = Vec::new();
        let mut settled = 0;
        each_line(&journals[0].access().unwrap(), |_, line| {
            let value: Value = serde_json::from_slice(line).unwrap();
            match value.get("id").and_then(Value::as_str) {
                Some(id) => ids.push(id.to_owned()),
                None => settled += 1,
            }
        })
        .unwrap();
        ids.sort();
        let expected: Vec<String> =
            (0..ROUNDS).flat_map(|round| (0..2).map(move |which| format!("{round:05}-{which}"))).collect();
        assert!(
            ids == expected,
            "{} entries, {} of them distinct",
            ids.len(),
            ids.iter().collect::<HashSet<_>>().len()
        );
        // Each compaction leaves out the `settled` lines before it; those appended since
        // the last one stay.
        assert!(settled < 2 * ROUNDS, "{settled} settled lines left: the log was never compacted");
    }

    /// The log's bound is a quarter of the journal's (it grows to twice that before the next
    /// compaction), and leaves half the write cap for the lines appended while a running
    /// compaction writes the new log (one file, bounded by the cap).
    #[test]
    fn the_log_bound_leaves_room_for_what_is_appended_during_a_compaction() {
        let cap = 16 * 1024 * 1024;
        assert_eq!(log_bound(DEFAULT_MAX_BYTES, cap), cap / 2);
        assert_eq!(log_bound(MIN_MAX_BYTES, cap), COMPACT_FROM);
        assert_eq!(log_bound(1024 * 1024, cap), 256 * 1024);
    }

    #[test]
    fn byte_counts_take_suffixes() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("2M"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_bytes("1G"), Ok(DEFAULT_MAX_BYTES));
        assert_eq!(parse_bytes("x").unwrap_err(), "`x` is not a byte count (digits, optionally followed by K, M or G)");
        assert_eq!(parse_journal_bound("256K"), Ok(MIN_MAX_BYTES));
        assert_eq!(
            parse_journal_bound("100K").unwrap_err(),
            "`100K` is below 256K, the least a journal keeps (its log may grow to 128K before it is compacted, and takes at most half)"
        );
        assert_eq!(
            [0, 1000, 1024, 3 << 20, (1 << 30) + (1 << 20), 5 << 30].map(byte_words),
            ["0", "1000", "1K", "3M", "1025M", "5G"]
        );
    }

    /// The log is read a chunk at a time: a line longer than a chunk (an entry of a tree of
    /// many files) comes whole, with its offset, and an entry's parts are read back from its
    /// line, however long; a cut last line is reported.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: a journal's log on disk")]
    fn lines_longer_than_a_chunk_are_read_whole_and_an_entrys_parts_from_its_line() {
        let directory = tempfile::tempdir().unwrap();
        let pad = "p".repeat(CHUNK + CHUNK / 2);
        let entry = json!({
            "id": "1796417589431-0000000001", "call": "1796417589431-00000001", "operation": "write",
            "paths": ["/w/a.txt"], "parts": [{ "kind": "write", "path": "/w/a.txt", "pad": pad }],
        });
        let content = format!("{{\"settled\": \"x\"}}\n{entry}\n{{\"cut");
        std::fs::write(directory.path().join("journal.jsonl"), &content).unwrap();
        let journal = open_journal(directory.path(), vfs::ambient_authority()).unwrap();
        let access = &journal.access().unwrap();

        let mut lines = Vec::new();
        let (end, read) = each_line(access, |at, line| lines.push((at, line.to_vec()))).unwrap();
        assert_eq!(read - end, 5, "the cut last line is read, and not counted as whole");
        let entry_text = entry.to_string();
        let second = 17u64;
        let offsets: Vec<(u64, usize)> = lines.iter().map(|(at, line)| (*at, line.len())).collect();
        assert_eq!(offsets, [(0, 16), (second, entry_text.len()), (second + entry_text.len() as u64 + 1, 5)]);
        assert!(
            lines[0].1 == b"{\"settled\": \"x\"}" && lines[1].1 == entry_text.as_bytes() && lines[2].1 == b"{\"cut"
        );
        let entries = journal.entries();
        let [read] = entries.all() else { panic!("{:?}", entries.all()) };
        assert_eq!(read.line, (second, entry_text.len()));
        assert!(journal.parts_of(read).as_ref() == entry["parts"].as_array(), "the parts, read back from the line");
    }
}
