//! Exact-text edits with a unified diff.
//!
//! An edit names text that must occur exactly once (or `replaceAll`), so an agent never changes
//! a place it did not mean; the count is in the error when it does not. Replacement text is
//! literal (`$1` stays `$1`), a CRLF file keeps CRLF, and the diff names virtual paths only.

use super::{Context, Precondition};
use crate::budget::Deadline;
use crate::changes::{Before, ChangeKind};
use crate::error::Error;
use crate::gate;
use crate::hint::Argument;
use crate::path::VirtualPath;
use crate::storage::{Kind, Located, PutWhen};
use crate::text::{AgentText, agent_text, code, passed};

/// One replacement.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Edit {
    /// Text to find, exactly.
    pub old_text: String,
    /// Text to put in its place.
    pub new_text: String,
}

/// Options of `edit_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOptions {
    /// Replace every occurrence instead of requiring exactly one.
    pub replace_all: bool,
    /// Compute the diff without writing.
    pub dry_run: bool,
    /// What must be at the file when it is read for the edit, under the directory's lock
    /// (default: [`Precondition::Any`], the file as it is then). An edit needs a file, so
    /// [`Precondition::Absent`] refuses whatever file is there.
    pub precondition: Precondition,
}

impl Default for EditOptions {
    /// One match required, written, under [`Precondition::Any`].
    fn default() -> Self {
        Self { replace_all: false, dry_run: false, precondition: Precondition::Any }
    }
}

/// The result of an edit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EditOutcome {
    /// The file.
    pub path: VirtualPath,
    /// A unified diff naming the virtual path.
    pub diff: String,
    /// False for a dry run.
    pub applied: bool,
    /// How many places changed.
    pub replacements: usize,
    /// The version after the edit (or the current one, for a dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl EditOutcome {
    /// The agent-facing text: the diff, with a header line.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`EditOutcome::to_text`] as its pieces: the diff is passed byte for byte.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let verb = if self.applied { "edited " } else { "dry run, nothing written: " };
        let count = format!(" ({} replacement{})\n", self.replacements, if self.replacements == 1 { "" } else { "s" });
        agent_text![verb, code(&self.path), count, passed(&self.diff)]
    }
}

/// What bounds an edit: the most bytes the result may have, and the call's clock.
pub(crate) struct Bounds<'a> {
    pub(crate) cap: u64,
    pub(crate) deadline: &'a Deadline,
}

/// Applies `edits` in order to `content`; returns the new content and the replacement count.
/// The size of each intermediate result is known before it is built, so an edit that would
/// pass the cap (`replaceAll` of `a` by `aa`, again and again) is refused without building it.
pub(crate) fn apply(
    path: &VirtualPath,
    content: &str,
    edits: &[Edit],
    replace_all: bool,
    bounds: &Bounds<'_>,
) -> Result<(String, usize), Error> {
    let crlf = content.contains("\r\n");
    let mut current = content.to_owned();
    let mut total = 0;
    for (index, edit) in edits.iter().enumerate() {
        bounds.deadline.check()?;
        if edit.old_text.is_empty() {
            return Err(Error::invalid_argument(agent_text![
                format!("edit {}: `", index + 1),
                Argument::OldText,
                "` is empty"
            ]));
        }
        let (old, new) = if crlf && !edit.old_text.contains("\r\n") {
            (edit.old_text.replace('\n', "\r\n"), edit.new_text.replace('\n', "\r\n"))
        } else {
            (edit.old_text.clone(), edit.new_text.clone())
        };
        let count = current.matches(old.as_str()).count();
        if count == 0 || (count > 1 && !replace_all) {
            return Err(Error::edit_mismatch(path, index + 1, count));
        }
        let replaced = if replace_all { count } else { 1 };
        let size = (current.len() as u64 - (old.len() * replaced) as u64)
            .saturating_add((new.len() as u64).saturating_mul(replaced as u64));
        if size > bounds.cap {
            return Err(Error::too_large(
                Some(path),
                agent_text![format!(
                    "edit {} would make the file {size} bytes, more than the {}-byte edit cap",
                    index + 1,
                    bounds.cap
                )],
            ));
        }
        current =
            if replace_all { current.replace(old.as_str(), &new) } else { current.replacen(old.as_str(), &new, 1) };
        total += count;
    }
    Ok((current, total))
}

/// Longest a diff is worked on: past it, the diff is coarser (whole changed regions), never wrong.
const DIFF_TIME: std::time::Duration = std::time::Duration::from_secs(2);

/// A unified diff naming the virtual path, cut after `cap` bytes at a hunk boundary (with a
/// note saying so). Lines are compared for at most [`DIFF_TIME`] (or until the call's clock runs
/// out), so a large edit cannot spend the call on its diff.
pub(crate) fn unified_diff(path: &VirtualPath, before: &str, after: &str, cap: u64, deadline: &Deadline) -> String {
    let name = path.as_str();
    let mut limit = std::time::Instant::now() + DIFF_TIME;
    if let Some(at) = deadline.at() {
        limit = limit.min(at);
    }
    let diff = similar::TextDiff::configure().deadline(limit).diff_lines(before, after);
    let mut unified = diff.unified_diff();
    unified.context_radius(3).header(name, name);
    let mut text = String::new();
    let mut hunks = unified.iter_hunks();
    while let Some(hunk) = hunks.next() {
        if text.is_empty() {
            text = format!("--- {name}\n+++ {name}\n");
        }
        let hunk = hunk.to_string();
        if (text.len() + hunk.len()) as u64 > cap {
            let header = format!("--- {name}\n+++ {name}\n").len();
            let rest = hunks.count();
            if text.len() == header {
                // The first change alone passes the cap: its first lines, rather than nothing.
                let room = usize::try_from(cap).unwrap_or(usize::MAX).saturating_sub(header);
                // Cut at a newline's byte, so never inside a character.
                let shown = hunk.as_bytes()[..room.min(hunk.len())]
                    .iter()
                    .rposition(|&byte| byte == b'\n')
                    .map_or(0, |end| end + 1);
                text.push_str(&hunk[..shown]);
                text.push_str(&format!(
                    "[diff cut at the {cap}-byte cap inside this change{}; read the file to see the rest]\n",
                    if rest == 0 {
                        String::new()
                    } else {
                        format!(", and {rest} more change{} not shown", plural(rest))
                    }
                ));
            } else {
                let rest = rest + 1;
                text.push_str(&format!(
                    "[diff cut at the {cap}-byte cap; {rest} more change{} not shown; read the file to see them]\n",
                    plural(rest)
                ));
            }
            break;
        }
        text.push_str(&hunk);
    }
    text
}

fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

impl Context<'_> {
    pub(crate) fn edit(&self, input: &str, edits: &[Edit], options: &EditOptions) -> Result<EditOutcome, Error> {
        let path = Self::parse(input)?;
        if edits.is_empty() {
            return Err(Error::invalid_argument(agent_text![
                "`",
                Argument::Edits,
                "` is empty; give at least one {",
                Argument::OldText,
                ", ",
                Argument::NewText,
                "}"
            ]));
        }
        let most = self.registry.limits.edits_per_call;
        if edits.len() > most {
            return Err(Error::too_large(
                None,
                agent_text![format!(
                    "{} edits given, at most {most} per call; split them over several calls",
                    edits.len()
                )],
            ));
        }
        // A dry run changes nothing and needs only the read right; only an edit's place can be
        // written to.
        let place = if options.dry_run {
            Err(self.locate::<gate::Read>(&path, false, false)?)
        } else {
            Ok(self.locate::<gate::Write>(&path, false, false)?)
        };
        let located: &Located = match &place {
            Ok(place) => place,
            Err(place) => place,
        };
        if Self::is_root(located) {
            return Err(Error::not_a_file(&path));
        }
        let store = self.store(located.mount);
        let _lock = store.lock(&located.node, &path)?;
        match store.restat(&located.node, &path)? {
            None => return Err(Error::not_found(&path)),
            Some(stat) if stat.kind == Kind::Symlink => return Err(Error::symlink(&path)),
            Some(_) => {}
        }
        let cap = self.registry.limits.write_bytes;
        let (bytes, token, stat) = store.read_all(&located.node, cap, &path)?;
        options.precondition.check_file(&path, token.as_deref())?;
        let before = String::from_utf8(bytes).map_err(|_| {
            Error::invalid_argument(agent_text![code(&path), " is not UTF-8 text; it cannot be edited as text"])
        })?;
        let bounds = Bounds { cap, deadline: &self.deadline };
        let (after, replacements) = apply(&path, &before, edits, options.replace_all, &bounds)?;
        let diff = unified_diff(&path, &before, &after, self.registry.limits.read_bytes, &self.deadline);
        let Ok(place) = &place else {
            return Ok(EditOutcome { path, diff, applied: false, replacements, version: token });
        };
        // Under a directory lock nobody wrote since the read; without one, the put is
        // conditional on the version read.
        let when = match &token {
            Some(token) if !store.capabilities().locks => PutWhen::Version(token.clone()),
            _ => PutWhen::Any,
        };
        let was = Before::File { size: stat.size, version: token };
        let image =
            self.keeps_images(&path).then(|| self.file_image_of(store, &place.node, before.as_bytes(), stat.mode));
        self.intends(ChangeKind::Edit, &path, None, &was, image.as_ref())
            .inspect_err(|_| self.forget_image(image.as_ref()))?;
        let version = store
            .put(
                place,
                after.as_bytes(),
                &when,
                crate::storage::NewMode::Masked(super::authored_mode(stat.mode)),
                &path,
            )
            .inspect_err(|_| self.forget_image(image.as_ref()))?;
        self.changed(ChangeKind::Edit, &path, None, &was, version.as_deref(), image.as_ref());
        Ok(EditOutcome { path, diff, applied: true, replacements, version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> VirtualPath {
        VirtualPath::new("/w/a.txt").unwrap()
    }

    fn bounds() -> Bounds<'static> {
        static NEVER: std::sync::LazyLock<Deadline> = std::sync::LazyLock::new(Deadline::never);
        Bounds { cap: 1024, deadline: &NEVER }
    }

    fn edit(old: &str, new: &str) -> Edit {
        Edit { old_text: old.into(), new_text: new.into() }
    }

    #[test]
    fn unique_match_replaces_literally() {
        let (text, count) = apply(&path(), "a $x b", &[edit("$x", "$1")], false, &bounds()).unwrap();
        assert_eq!((text.as_str(), count), ("a $1 b", 1));
    }

    #[test]
    fn ambiguous_match_names_the_count() {
        let error = apply(&path(), "x x x", &[edit("x", "y")], false, &bounds()).unwrap_err();
        // The hint is a value the front end words; `Display` is the core's own wording.
        assert_eq!(error.hint(), Some(crate::Hint::ReplaceAll));
        assert_eq!(
            error.to_string(),
            "edit 1 for `/w/a.txt`: `old_text` matches 3 places; add surrounding lines to make it unique, or ask to replace every occurrence"
        );
        let (text, count) = apply(&path(), "x x x", &[edit("x", "y")], true, &bounds()).unwrap();
        assert_eq!((text.as_str(), count), ("y y y", 3));
    }

    #[test]
    fn missing_match_is_an_error() {
        let error = apply(&path(), "abc", &[edit("zzz", "y")], false, &bounds()).unwrap_err();
        assert_eq!(error.hint(), None);
        assert_eq!(
            error.to_string(),
            "edit 1 for `/w/a.txt`: `old_text` was not found; read the file and copy the text exactly"
        );
    }

    #[test]
    fn crlf_is_preserved() {
        let (text, _) =
            apply(&path(), "one\r\ntwo\r\nthree\r\n", &[edit("one\ntwo", "uno\ndos")], false, &bounds()).unwrap();
        assert_eq!(text, "uno\r\ndos\r\nthree\r\n");
    }

    /// `replaceAll` of `a` by `aa`, many times over: refused when the next result would pass
    /// the cap, before it is built.
    #[test]
    fn growth_past_the_cap_is_refused_before_it_is_built() {
        let edits = vec![edit("a", "aa"); 26];
        let error = apply(&path(), &"a".repeat(100), &edits, true, &bounds()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`/w/a.txt`: edit 4 would make the file 1600 bytes, more than the 1024-byte edit cap"
        );
    }

    /// A diff larger than its cap stops at a hunk boundary and says what it left out.
    #[test]
    fn a_large_diff_is_cut_with_a_note() {
        let before = (0..200).map(|line| format!("line {line}\n")).collect::<Vec<_>>().concat();
        let after = before.replace("line 1", "LINE 1");
        let diff = unified_diff(&path(), &before, &after, 200, &Deadline::never());
        assert!(diff.starts_with("--- /w/a.txt\n+++ /w/a.txt\n@@ -1,5 +1,5 @@\n line 0\n-line 1\n+LINE 1\n"), "{diff}");
        assert!(diff.ends_with("more changes not shown; read the file to see them]\n"), "{diff}");
        assert!(diff.len() < 400, "{}", diff.len());
        assert_eq!(unified_diff(&path(), "same\n", "same\n", 200, &Deadline::never()), "");
    }

    /// A first change larger than the cap shows its first lines, cut at a line's end.
    #[test]
    fn a_first_change_past_the_cap_shows_its_first_lines() {
        let before = "keep\n".to_owned() + &"old\n".repeat(100) + "keep\n";
        let after = "keep\n".to_owned() + &"new\n".repeat(100) + "keep\n";
        let diff = unified_diff(&path(), &before, &after, 80, &Deadline::never());
        assert_eq!(
            diff,
            "--- /w/a.txt\n+++ /w/a.txt\n@@ -1,102 +1,102 @@\n keep\n-old\n-old\n-old\n-old\n-old\n\
             [diff cut at the 80-byte cap inside this change; read the file to see the rest]\n"
        );
        // A cut that falls inside a character of more than one byte backs off to a line's end.
        let wide = "keep\n".to_owned() + &"é".repeat(40) + "\n";
        let diff = unified_diff(&path(), &wide, &wide.replace("keep", "KEEP"), 60, &Deadline::never());
        assert_eq!(
            diff,
            "--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,2 @@\n-keep\n+KEEP\n\
             [diff cut at the 60-byte cap inside this change; read the file to see the rest]\n"
        );
        let two = before.clone() + &"same\n".repeat(10) + "x\n";
        let diff = unified_diff(&path(), &two, &(after + &"same\n".repeat(10) + "y\n"), 80, &Deadline::never());
        assert!(
            diff.ends_with("-old\n[diff cut at the 80-byte cap inside this change, and 1 more change not shown; read the file to see the rest]\n"),
            "{diff}"
        );
    }

    #[test]
    fn diff_names_virtual_paths() {
        let diff = unified_diff(&path(), "a\nb\n", "a\nc\n", 1024, &Deadline::never());
        assert_eq!(diff, "--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
    }
}
