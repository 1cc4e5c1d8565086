//! Reading: text windows, several files at once, media, and file information.
//!
//! Reads are bounded before they start: the byte cap limits what is read from disk, not just
//! what is returned, and skipping lines streams through the file without keeping it, so a
//! window deep in a multi-gigabyte file costs time proportional to the skip but constant memory.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

use base64::Engine as _;

use super::{Context, rfc3339};
use crate::budget::Deadline;
use crate::error::Error;
use crate::gate;
use crate::hint::{Argument, Operation};
use crate::path::VirtualPath;
use crate::storage::Kind;
use crate::storage::local::version_of_bytes;
use crate::text::{AgentText, agent_text, code, name};

/// Which lines of a text file to read. All optional; `head`/`tail` and `offset`/`limit` do not
/// mix. `offset` is 1-based.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadWindow {
    /// The first N lines.
    pub head: Option<u64>,
    /// The last N lines.
    pub tail: Option<u64>,
    /// Start at this line (1-based).
    pub offset: Option<u64>,
    /// At most this many lines.
    pub limit: Option<u64>,
}

/// The result of reading text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TextRead {
    /// The virtual path read.
    pub path: VirtualPath,
    /// The text.
    pub content: String,
    /// The first line returned (1-based; 0 when nothing was returned).
    pub start_line: u64,
    /// How many lines were returned.
    pub line_count: u64,
    /// The file's size in bytes.
    pub size: u64,
    /// True when more of the file follows what was returned.
    pub truncated: bool,
    /// How to read on, when truncated.
    //  (Serialized as a text in the core's words; a front end words it with
    //  `ReadOn::agent_text`. This doc comment is the schema's description, shown to agents.)
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub next: Option<ReadOn>,
    /// The version token, when the whole file was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl TextRead {
    /// What the agent reads: the text, and a note when there is more.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`TextRead::to_text`] as its pieces: the content is passed byte for byte.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = AgentText::new();
        text.passed(&self.content);
        if let Some(next) = &self.next {
            if !self.content.is_empty() && !self.content.ends_with('\n') {
                text.composed("\n");
            }
            text.composed("[").append(&next.agent_text()).composed("]");
        }
        text
    }
}

/// How to read on from a window that stopped before the end of the file: the lines and the
/// sizes involved, as values. The core words no front end's arguments; [`ReadOn::agent_text`]
/// refers to them as [`Argument`]s for the front end to word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadOn {
    /// The last lines asked for exceed the byte cap: the last `lines` whole or partial lines
    /// are shown; page from the start instead.
    TailOverCap {
        /// The byte cap.
        cap: u64,
        /// How many lines are shown.
        lines: u64,
    },
    /// The cap cut inside `line`, shown in part: read on from that line again.
    CutInside {
        /// The byte cap.
        cap: u64,
        /// The line the cap cut.
        line: u64,
        /// The file's size in bytes.
        size: u64,
    },
    /// `line`, the only line shown, is longer than the cap by itself and is cut: read on
    /// from `next`.
    LineOverCap {
        /// The byte cap.
        cap: u64,
        /// The line shown in part.
        line: u64,
        /// The file's size in bytes.
        size: u64,
        /// The line to read on from.
        next: u64,
    },
    /// The cap ended the window at the end of a line: read on from `next`.
    Capped {
        /// The byte cap.
        cap: u64,
        /// The file's size in bytes.
        size: u64,
        /// The line to read on from.
        next: u64,
    },
    /// The window asked for ended before the file did: read on from `next`.
    MoreLines {
        /// The line to read on from.
        next: u64,
    },
}

impl ReadOn {
    /// The line a next window starts at, when reading on goes forward.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        match *self {
            ReadOn::TailOverCap { .. } => None,
            ReadOn::CutInside { line, .. } => Some(line),
            ReadOn::LineOverCap { next, .. } | ReadOn::Capped { next, .. } | ReadOn::MoreLines { next } => Some(next),
        }
    }

    /// The note, with the window's arguments as terms a front end words.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = AgentText::new();
        let offset = |text: &mut AgentText, line: u64| {
            text.composed("read on with ").argument(Argument::Offset).composed(&format!(": {line}"));
        };
        let or_window = |text: &mut AgentText| {
            text.composed(" (or use ")
                .argument(Argument::Head)
                .composed("/")
                .argument(Argument::Tail)
                .composed("/")
                .argument(Argument::Limit)
                .composed(")");
        };
        match *self {
            ReadOn::TailOverCap { cap, lines } => {
                text.composed(&format!(
                    "the last lines exceed the {cap}-byte cap; showing the last {lines} whole or partial lines; use "
                ))
                .argument(Argument::Offset)
                .composed("/")
                .argument(Argument::Limit)
                .composed(" to page from the start");
            }
            ReadOn::CutInside { cap, line, size } => {
                text.composed(&format!(
                    "truncated at the {cap}-byte cap inside line {line}; the file has {size} bytes; "
                ));
                offset(&mut text, line);
                or_window(&mut text);
            }
            ReadOn::LineOverCap { cap, line, size, next } => {
                text.composed(&format!(
                    "line {line} alone is longer than the {cap}-byte cap and is cut; the file has {size} bytes; "
                ));
                offset(&mut text, next);
            }
            ReadOn::Capped { cap, size, next } => {
                text.composed(&format!("truncated at the {cap}-byte cap; the file has {size} bytes; "));
                offset(&mut text, next);
                or_window(&mut text);
            }
            ReadOn::MoreLines { next } => {
                text.composed("more lines follow; ");
                offset(&mut text, next);
            }
        }
        text
    }
}

impl serde::Serialize for ReadOn {
    /// The note in the core's own words (a front end replaces it with its own).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.agent_text().to_string())
    }
}

/// One file's outcome in `read_multiple_files`: the path as given, and its text or its error.
pub type FileResult = (String, Result<TextRead, Error>);

/// A media file as base64.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MediaRead {
    /// The virtual path read.
    pub path: VirtualPath,
    /// The MIME type guessed from the extension.
    pub mime_type: String,
    /// The content, base64.
    pub data: String,
    /// Size in bytes.
    pub size: u64,
}

/// What `get_file_info` reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileInfo {
    /// The virtual path.
    pub path: VirtualPath,
    /// `file` or `directory`.
    pub kind: &'static str,
    /// Size in bytes (0 for a directory).
    pub size: u64,
    /// Last modification, RFC 3339 UTC.
    pub modified: String,
    /// The rights at this path.
    pub rights: &'static str,
    /// The opaque version token (files only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl FileInfo {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`FileInfo::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let mut text = agent_text![
            "path: ",
            name(self.path.as_str()),
            format!(
                "\nkind: {}\nsize: {}\nmodified: {}\nrights: {}\n",
                self.kind, self.size, self.modified, self.rights
            )
        ];
        if let Some(version) = &self.version {
            text.composed(&format!("version: {version}\n"));
        }
        text
    }
}

const BINARY_PROBE: usize = 8 * 1024;

impl Context<'_> {
    pub(crate) fn read_text(&self, input: &str, window: &ReadWindow) -> Result<TextRead, Error> {
        let mut result = self.read_text_once(input, window);
        // A name swapped during the call (a link or a directory where a file was) is retried a
        // couple of times before the agent is told.
        for _ in 0..2 {
            if !matches!(&result, Err(error) if error.kind() == crate::ErrorKind::Changed) {
                break;
            }
            result = self.read_text_once(input, window);
        }
        result
    }

    fn read_text_once(&self, input: &str, window: &ReadWindow) -> Result<TextRead, Error> {
        validate_window(window)?;
        let path = Self::parse(input)?;
        let cap = self.registry.limits.read_bytes;
        let located = match self.open_to_read(&path)? {
            gate::ToRead::Opened(file, stat) => {
                return window_read(path, window, stat.size, file, cap, &self.deadline, |content| {
                    version_of_bytes(content.as_bytes())
                });
            }
            gate::ToRead::Place(place) => place,
        };
        // A window from the first line needs at most `cap + 1` bytes (the extra byte tells
        // "exactly at the cap" from "more follows"): a store that can fetch them with the open
        // saves a request.
        let from_start = window.tail.is_none() && window.offset.unwrap_or(1) == 1;
        let opened = self.store(located.mount).open_file(&located.node, from_start.then_some(cap + 1), &path)?;
        let token = opened.token;
        let version_of = |content: &str| token.or_else(|| version_of_bytes(content.as_bytes()));
        match opened.first {
            Some(bytes) => window_read_bytes(path, window, opened.size, bytes, cap, &self.deadline, version_of),
            None => window_read(path, window, opened.size, opened.reader, cap, &self.deadline, version_of),
        }
    }

    pub(crate) fn read_multiple(&self, paths: &[String]) -> Result<Vec<FileResult>, Error> {
        let limit = self.registry.limits.files_per_call;
        if paths.is_empty() {
            return Err(Error::invalid_argument(agent_text![
                "`",
                Argument::Paths,
                "` is empty; give one or more virtual paths"
            ]));
        }
        if paths.len() > limit {
            return Err(Error::too_large(
                None,
                agent_text![format!("{} paths given, at most {limit} per call; split the list", paths.len())],
            ));
        }
        let budget = self.registry.limits.read_bytes.saturating_mul(4);
        let mut used = 0u64;
        let mut results = Vec::with_capacity(paths.len());
        let total = paths.len() as u64;
        // The first report goes out at the start: one file may take long to read.
        self.deadline.progress(0, Some(total), || format!("0 of {total} files read"));
        for (done, input) in (1u64..).zip(paths) {
            if used >= budget {
                let skipped =
                    format!("skipped: this call's results reached {budget} bytes; read the rest in another call");
                results.push((input.clone(), Err(Error::too_large(None, agent_text![skipped]))));
                continue;
            }
            let result = self.deadline.check().and_then(|()| self.read_text(input, &ReadWindow::default()));
            if let Ok(read) = &result {
                used += read.content.len() as u64;
            }
            results.push((input.clone(), result));
            self.deadline.progress(done, Some(total), || format!("{done} of {total} files read"));
        }
        Ok(results)
    }

    pub(crate) fn read_media(&self, input: &str) -> Result<MediaRead, Error> {
        let path = Self::parse(input)?;
        let located = self.locate::<gate::Read>(&path, true, false)?;
        let cap = self.registry.limits.media_bytes;
        let (bytes, _, _) = self.store(located.mount).read_all(&located.node, cap, &path)?;
        Ok(MediaRead {
            mime_type: mime_type(path.file_name().unwrap_or_default()).to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
            size: bytes.len() as u64,
            path,
        })
    }

    pub(crate) fn info(&self, input: &str) -> Result<FileInfo, Error> {
        let path = Self::parse(input)?;
        // Directories (and everything the quick route leaves alone) take the component walk.
        if let Some((stat, version, rights)) = self.file_info_fast(&path)? {
            let modified = rfc3339(stat.modified.0);
            return Ok(FileInfo { path, kind: "file", size: stat.size, modified, rights, version: Some(version) });
        }
        let located = self.locate::<gate::Read>(&path, true, false)?;
        let store = self.store(located.mount);
        let Some(stat) = store.stat(&located.node, &path)? else {
            return Err(Error::not_found(&path));
        };
        let rights = self.rights_at(&located);
        // A directory's size is 0: what the file system reports counts entries on some file
        // systems, hidden ones included.
        let (kind, size, version) = match stat.kind {
            Kind::Directory => ("directory", 0, None),
            Kind::File => ("file", stat.size, store.version(&located.node, &path)?),
            Kind::Special | Kind::Symlink => return Err(Error::unsupported(&path)),
        };
        Ok(FileInfo { path, kind, size, modified: rfc3339(stat.modified.0), rights, version })
    }
}

/// Reads a line window from any `Read + Seek` and describes it; shared by every backend. Each
/// read checks the call's clock, so skipping to a window deep in a huge file ends at the
/// call's time budget.
pub(crate) fn window_read(
    path: VirtualPath,
    window: &ReadWindow,
    size: u64,
    reader: impl Read + Seek,
    cap: u64,
    deadline: &Deadline,
    version_of: impl FnOnce(&str) -> Option<String>,
) -> Result<TextRead, Error> {
    let reader = deadline.reader(reader);
    let read = if let Some(count) = window.tail {
        read_tail(reader, size, count, cap)
    } else {
        let offset = window.offset.unwrap_or(1).max(1);
        let limit = window.head.or(window.limit);
        read_forward(reader, offset, limit, cap, size)
    }
    .map_err(|error| deadline.io_error(&path, error))?;
    finish_window(path, window, size, read, cap, version_of)
}

/// Decodes a window that was read and describes what follows it.
fn finish_window(
    path: VirtualPath,
    window: &ReadWindow,
    size: u64,
    read: Window,
    cap: u64,
    version_of: impl FnOnce(&str) -> Option<String>,
) -> Result<TextRead, Error> {
    let content = decode(&path, read.bytes)?;
    let whole = read.start_line <= 1 && !read.more && window.tail.is_none_or(|_| read.start_line == 1);
    let version = if whole { version_of(&content) } else { None };
    let next = if read.more && window.tail.is_some() {
        Some(ReadOn::TailOverCap { cap, lines: read.line_count })
    } else if read.more {
        let first = read.start_line.max(1);
        let next_line = first + read.line_count;
        // The cap may cut the last line shown. Paging on from the next line would skip the
        // rest of it, so point back at it, unless it is the only line shown (it alone is
        // longer than the cap, and pointing back would never get past it).
        let cut = read.capped && !content.is_empty() && !content.ends_with('\n');
        Some(if cut && read.line_count >= 2 {
            ReadOn::CutInside { cap, line: next_line - 1, size }
        } else if cut {
            ReadOn::LineOverCap { cap, line: first, size, next: next_line }
        } else if read.capped {
            ReadOn::Capped { cap, size, next: next_line }
        } else {
            ReadOn::MoreLines { next: next_line }
        })
    } else {
        None
    };
    Ok(TextRead {
        path,
        content,
        start_line: if read.line_count == 0 { 0 } else { read.start_line },
        line_count: read.line_count,
        size,
        truncated: read.more,
        next,
        version,
    })
}

/// [`window_read`] over bytes already in memory: the first `bytes.len()` bytes of a file of
/// `size` bytes (all of it, or at least `cap + 1` bytes). A window from the first line is cut
/// out of the buffer in place, with no second copy and no line-by-line loop.
pub(crate) fn window_read_bytes(
    path: VirtualPath,
    window: &ReadWindow,
    size: u64,
    bytes: Vec<u8>,
    cap: u64,
    deadline: &Deadline,
    version_of: impl FnOnce(&str) -> Option<String>,
) -> Result<TextRead, Error> {
    if window.tail.is_some() || window.offset.unwrap_or(1) > 1 {
        return window_read(path, window, size, io::Cursor::new(bytes), cap, deadline, version_of);
    }
    let read = take_forward(bytes, window.head.or(window.limit), cap);
    finish_window(path, window, size, read, cap, version_of)
}

/// What [`read_forward`] returns for a window from the first line, computed on a buffer.
pub(crate) fn take_forward(mut bytes: Vec<u8>, limit: Option<u64>, cap: u64) -> Window {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let limit_end = match limit {
        Some(0) => Some(0),
        Some(limit) => {
            let nth = usize::try_from(limit - 1).unwrap_or(usize::MAX);
            memchr::memchr_iter(b'\n', &bytes).nth(nth).map(|index| index + 1)
        }
        None => None,
    };
    let end = limit_end.unwrap_or(bytes.len());
    let (more, capped) = if end > cap { (true, true) } else { (end < bytes.len(), false) };
    bytes.truncate(end.min(cap));
    let line_count = memchr_count(&bytes) + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
    Window { bytes, start_line: 1, line_count, more, capped }
}

pub(crate) fn validate_window(window: &ReadWindow) -> Result<(), Error> {
    let lines = [window.head, window.tail, window.limit];
    if lines.iter().flatten().any(|&count| count == 0) {
        return Err(Error::invalid_argument(agent_text![
            "`",
            Argument::Head,
            "`, `",
            Argument::Tail,
            "` and `",
            Argument::Limit,
            "` must be at least 1"
        ]));
    }
    if window.offset == Some(0) {
        return Err(Error::invalid_argument(agent_text![
            "`",
            Argument::Offset,
            "` is 1-based: the first line is `",
            Argument::Offset,
            ": 1`"
        ]));
    }
    if window.head.is_some() && window.tail.is_some() {
        return Err(Error::invalid_argument(agent_text![
            "give `",
            Argument::Head,
            "` or `",
            Argument::Tail,
            "`, not both"
        ]));
    }
    if (window.head.is_some() || window.tail.is_some()) && (window.offset.is_some() || window.limit.is_some()) {
        return Err(Error::invalid_argument(agent_text![
            "`",
            Argument::Head,
            "`/`",
            Argument::Tail,
            "` do not mix with `",
            Argument::Offset,
            "`/`",
            Argument::Limit,
            "`; use one pair"
        ]));
    }
    Ok(())
}

/// Bytes read and where they sit in the file.
pub(crate) struct Window {
    pub(crate) bytes: Vec<u8>,
    pub(crate) start_line: u64,
    pub(crate) line_count: u64,
    /// More content follows.
    pub(crate) more: bool,
    /// The byte cap stopped the read.
    pub(crate) capped: bool,
}

/// Skips `offset - 1` lines without keeping them, then reads up to `limit` lines or `cap` bytes.
pub(crate) fn read_forward(
    file: impl Read,
    offset: u64,
    limit: Option<u64>,
    cap: u64,
    size: u64,
) -> io::Result<Window> {
    // A buffer no larger than the file (plus one byte to see the end in one read), at most 64 KiB.
    let capacity = usize::try_from(size.saturating_add(1)).unwrap_or(usize::MAX).clamp(512, 64 * 1024);
    let mut reader = BufReader::with_capacity(capacity, file);
    let mut skipped = 0u64;
    while skipped + 1 < offset {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(Window { bytes: Vec::new(), start_line: offset, line_count: 0, more: false, capped: false });
        }
        if let Some(index) = memchr(b'\n', buffer) {
            reader.consume(index + 1);
            skipped += 1;
        } else {
            let length = buffer.len();
            reader.consume(length);
        }
    }
    let mut bytes = Vec::new();
    let mut lines = 0u64;
    loop {
        if limit.is_some_and(|limit| lines >= limit) {
            let more = !reader.fill_buf()?.is_empty();
            return Ok(Window { bytes, start_line: offset, line_count: lines, more, capped: false });
        }
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                lines += 1;
            }
            return Ok(Window { bytes, start_line: offset, line_count: lines, more: false, capped: false });
        }
        let room = (cap as usize).saturating_sub(bytes.len());
        if room == 0 {
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                lines += 1;
            }
            return Ok(Window { bytes, start_line: offset, line_count: lines, more: true, capped: true });
        }
        let (take, newline) = match memchr(b'\n', buffer) {
            Some(index) => (index + 1, true),
            None => (buffer.len(), false),
        };
        let take_now = take.min(room);
        bytes.extend_from_slice(&buffer[..take_now]);
        reader.consume(take_now);
        if newline && take_now == take {
            lines += 1;
        }
    }
}

/// Reads the last `count` lines, backwards in chunks, never more than `cap` bytes.
pub(crate) fn read_tail(mut file: impl Read + Seek, size: u64, count: u64, cap: u64) -> io::Result<Window> {
    const CHUNK: u64 = 64 * 1024;
    let mut position = size;
    let mut collected: Vec<u8> = Vec::new();
    // A final newline ends the last line; it does not start a new one.
    let mut needed_newlines = count.saturating_add(1);
    let mut trailing_checked = false;
    let mut start_found = false;
    while position > 0 && (collected.len() as u64) < cap {
        let length = CHUNK.min(position).min(cap - collected.len() as u64);
        position -= length;
        file.seek(SeekFrom::Start(position))?;
        let mut chunk = vec![0u8; length as usize];
        file.read_exact(&mut chunk)?;
        if !trailing_checked {
            trailing_checked = true;
            if !chunk.ends_with(b"\n") {
                needed_newlines -= 1;
            }
        }
        let mut cut = None;
        for (index, &byte) in chunk.iter().enumerate().rev() {
            if byte == b'\n' {
                needed_newlines -= 1;
                if needed_newlines == 0 {
                    cut = Some(index + 1);
                    break;
                }
            }
        }
        chunk.extend_from_slice(&collected);
        collected = chunk;
        if let Some(cut) = cut {
            collected.drain(..cut);
            start_found = true;
            break;
        }
    }
    let reached_start = start_found || position == 0;
    let line_count = memchr_count(&collected) + u64::from(!collected.is_empty() && !collected.ends_with(b"\n"));
    Ok(Window {
        bytes: collected,
        // The first line number is unknown without counting from the start; report 1 only when
        // the window reaches the start of the file.
        start_line: u64::from(reached_start && !start_found),
        line_count,
        more: !reached_start,
        capped: !reached_start,
    })
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    memchr::memchr(needle, haystack)
}

fn memchr_count(haystack: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', haystack).count() as u64
}

/// Bytes to text: refuses binary content, trims a character cut by the cap.
pub(crate) fn decode(path: &VirtualPath, mut bytes: Vec<u8>) -> Result<String, Error> {
    if bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) {
        return Err(Error::invalid_argument(agent_text![
            code(path),
            " looks binary (it contains NUL bytes); use ",
            Operation::ReadMedia,
            " for images and audio"
        ]));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(error) => {
            let utf8 = error.utf8_error();
            if utf8.error_len().is_none() {
                bytes = error.into_bytes();
                bytes.truncate(utf8.valid_up_to());
                Ok(String::from_utf8(bytes).unwrap_or_default())
            } else {
                Err(Error::invalid_argument(agent_text![
                    code(path),
                    " is not UTF-8 text; use ",
                    Operation::ReadMedia,
                    " for binary content"
                ]))
            }
        }
    }
}

pub(crate) fn mime_type(name: &str) -> &'static str {
    let extension = name.rsplit_once('.').map(|(_, extension)| extension.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" | "oga" => "audio/ogg",
        "flac" => "audio/flac",
        "m4a" => "audio/mp4",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::{Window, read_forward, take_forward};

    fn parts(window: &Window) -> (&[u8], u64, u64, bool, bool) {
        (&window.bytes, window.start_line, window.line_count, window.more, window.capped)
    }

    /// The in-memory cut agrees with the streaming reader on every small case: each cap, each
    /// line limit, with and without a final newline, and given only the first `cap + 1` bytes.
    #[test]
    fn take_forward_agrees_with_read_forward() {
        let texts = ["", "a", "a\n", "a\nb", "a\nb\n", "\n\n\n", "ab\ncd\nef", "é\nxyz\n\nq", "long line\nx\n"];
        let mut cases = 0;
        for text in texts {
            let full = text.as_bytes();
            for cap in 0..=full.len() as u64 + 2 {
                for limit in [None, Some(1), Some(2), Some(3), Some(10)] {
                    let streamed =
                        read_forward(std::io::Cursor::new(full), 1, limit, cap, full.len() as u64).expect("reads");
                    let first = full[..full.len().min(cap as usize + 1)].to_vec();
                    let cut = take_forward(first, limit, cap);
                    assert_eq!(parts(&cut), parts(&streamed), "text {text:?}, cap {cap}, limit {limit:?}");
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 5 * texts.iter().map(|text| text.len() + 3).sum::<usize>());
    }
}
