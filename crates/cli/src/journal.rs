//! `vfs journal list` and `vfs undo`: the operator's side of the journal (`--journal DIR`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use vfs_host::{Entries, Entry, Journal};

use crate::{LaunchArgs, Refusal, output};

/// `vfs journal …`.
#[derive(Debug, Subcommand)]
pub(crate) enum JournalCommand {
    /// One line per change, newest first: id, time, session, operation, virtual paths, state
    /// (`undoable`, `undone`, `not undoable`, `dropped`); then, when the log forgot older
    /// entries past its bound, how many and when they were made.
    #[command(group = clap::ArgGroup::new("where").required(true).multiple(true).args(["journal", "settings"]))]
    List {
        /// The journal directory (as given to `--journal`).
        #[arg(long = "journal", value_name = "DIR")]
        journal: Option<PathBuf>,
        /// A settings file whose `journal` names the directory (`--journal`, given, wins).
        #[arg(long = "settings", value_name = "FILE")]
        settings: Option<PathBuf>,
        /// Only the changes of this session.
        #[arg(long, value_name = "S")]
        session: Option<String>,
        /// Only the changes made at or after this time (RFC 3339, like `2026-12-02T19:00:00Z` or
        /// `2026-12-02T20:00:00+01:00`; to the second).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Print a JSON array instead.
        #[arg(long)]
        json: bool,
    },
}

/// Which changes `vfs undo` undoes.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub(crate) struct Selection {
    /// The newest N changes that are neither undone nor undos themselves.
    #[arg(long, value_name = "N")]
    last: Option<usize>,
    /// The change with this id (or an id prefix of at least 6 characters); an undo's id redoes.
    #[arg(long, value_name = "ID")]
    change: Option<String>,
    /// Every change of the call with this id (the exchange log's `call`).
    #[arg(long, value_name = "ID")]
    call: Option<String>,
    /// Every change of this session.
    #[arg(long = "session", value_name = "S")]
    session: Option<String>,
}

pub(crate) fn list(command: JournalCommand, authority: vfs::AmbientAuthority) -> anyhow::Result<ExitCode> {
    let JournalCommand::List { journal, settings, session, since, json } = command;
    let journal = match (journal, settings) {
        (Some(journal), _) => journal,
        (None, Some(settings)) => {
            let current_dir = std::env::current_dir()?;
            match vfs_host::settings_journal(&settings, &current_dir, authority)? {
                Some(journal) => journal,
                None => {
                    return Err(Refusal {
                        message: format!("the settings file `{}` names no `journal`", settings.display()),
                        hint: Some("add \"journal\": \"DIR\" to it, or pass --journal DIR".to_owned()),
                    }
                    .into());
                }
            }
        }
        (None, None) => unreachable!("clap requires --journal or --settings"),
    };
    let since = match since.as_deref().map(|text| (text, utc_second(text))) {
        None => None,
        Some((_, Some(utc))) => Some(utc),
        Some((text, None)) => {
            return Err(Refusal {
                message: format!("--since `{text}` is not an RFC 3339 time"),
                hint: Some("write it like 2026-12-02T19:00:00Z (UTC) or 2026-12-02T20:00:00+01:00".to_owned()),
            }
            .into());
        }
    };
    let opened = vfs_host::open_journal(&journal, authority).map_err(vfs_host::Problems::from)?;
    let entries = opened.entries();
    let shown: Vec<&Entry> = entries
        .all()
        .iter()
        .map(std::sync::Arc::as_ref)
        .rev()
        .filter(|entry| session.as_ref().is_none_or(|session| &entry.session == session))
        .filter(|entry| since.as_ref().is_none_or(|since| entry.time.as_str() >= since.as_str()))
        .collect();
    // Entries older than every listed one that the log no longer holds, said where they
    // would be listed (last, the oldest end), when the listing reaches back to them.
    let forgotten = entries
        .forgotten()
        .filter(|forgotten| since.as_ref().is_none_or(|since| forgotten.newest.as_str() >= since.as_str()))
        .map(forgotten_note);
    if json {
        let array: Vec<serde_json::Value> = shown.iter().map(|entry| entries.json(entry)).collect();
        output::json(&serde_json::Value::Array(array));
        // The array holds entries only: the note goes to stderr.
        if let Some(note) = forgotten {
            output::status(&note);
        }
    } else {
        // One line an entry, whatever a damaged log holds: control characters escaped.
        for entry in shown {
            output::line(&vfs::escape_controls(&format!(
                "{}  {}  {}  {}  {}  {}",
                entry.id,
                entry.time,
                entry.session,
                entry.operation,
                entry.paths.join(" -> "),
                entries.state_text(entry)
            )));
        }
        if let Some(note) = forgotten {
            output::line(&note);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The line that says how many older entries the log forgot past its bound, and when they
/// were made.
fn forgotten_note(forgotten: &vfs_host::Forgotten) -> String {
    let entries = if forgotten.count == 1 { "entry" } else { "entries" };
    format!(
        "({} older {entries}, made {} to {}, forgotten: past its bound the log keeps no line of them)",
        forgotten.count, forgotten.oldest, forgotten.newest
    )
}

/// An RFC 3339 time (`2026-12-02T19:00:00Z`, `2026-12-02T20:00:00.250+01:00`, `t` or a space
/// for `T`, `z` for `Z`) in the form every vfs surface writes: UTC, to the second (a fraction
/// is cut: an entry's time is kept to the second). `None` for anything else, a day that does
/// not exist (`2026-02-30`) included.
fn utc_second(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = bytes.get(range)?;
        digits
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits.iter().fold(0, |value, digit| value * 10 + i64::from(digit - b'0')))
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    let separators = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, byte)| bytes[at] != byte) || !matches!(bytes[10], b'T' | b't' | b' ') {
        return None;
    }
    let mut rest = &bytes[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|byte| byte.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = &fraction[digits..];
    }
    let offset = match rest {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let [h1, h2, m1, m2] = digits.map(|digit| i64::from(digit - b'0'));
            let (hours, minutes) = (h1 * 10 + h2, m1 * 10 + m2);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let minutes = hours * 60 + minutes;
            if *sign == b'-' { -minutes } else { minutes }
        }
        _ => return None,
    };
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    // A leap second (`:60`) is the last minute of a UTC day only, and counts as its last second.
    if second == 60 && (hour * 60 + minute - offset).rem_euclid(1440) != 1439 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset * 60;
    // An offset can carry a time past the years four digits write (`9999-12-31T23:59:59-00:01`):
    // it is kept in them, so that the times still compare as text.
    let (first, last) = (days_from_civil(0, 1, 1)? * 86_400, days_from_civil(9999, 12, 31)? * 86_400 + 86_399);
    Some(vfs::rfc3339(seconds.clamp(first, last)))
}

/// Days from 1970-01-01 to the date (Howard Hinnant's days-from-civil, the inverse of the one
/// [`vfs::rfc3339`] uses); `None` for a day its month does not have.
fn days_from_civil(year: i64, month: i64, day: i64) -> Option<i64> {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let length = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=length).contains(&day) {
        return None;
    }
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some(era * 146_097 + day_of_era - 719_468)
}

/// The entries `selection` names, newest first.
fn selected<'e>(entries: &'e Entries, selection: &Selection) -> Result<Vec<&'e Entry>, Refusal> {
    if let Some(count) = selection.last {
        // An incomplete entry is a change another process is making now, or one a crash cut:
        // no change to undo, so not one of the last N (`--change ID` still names it).
        return Ok(entries.undoable_newest(None).into_iter().filter(|entry| !entry.incomplete).take(count).collect());
    }
    if let Some(id) = &selection.change {
        return entries.find(id).map(|entry| vec![entry]).ok_or_else(|| Refusal {
            message: format!("no change `{id}` in the journal (or the prefix names more than one)"),
            hint: Some("`vfs journal list --journal DIR` shows the ids".to_owned()),
        });
    }
    if let Some(call) = &selection.call {
        return Ok(entries.undoable_newest(None).into_iter().filter(|entry| &entry.call == call).collect());
    }
    Ok(entries.undoable_newest(selection.session.as_deref()))
}

/// How `vfs undo` goes about it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UndoHow {
    /// `--dry-run`: say what would be undone, change nothing.
    pub(crate) dry_run: bool,
    /// `--any-place`: undo whatever place the roots are mounted from now.
    pub(crate) any_place: bool,
}

pub(crate) fn undo(
    launch: LaunchArgs,
    selection: &Selection,
    how: UndoHow,
    authority: vfs::AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    let UndoHow { dry_run, any_place } = how;
    let mut options = launch.into_options()?;
    // Each undo syncs what it restored once (`Journal::undo`), not each file twice: 3.6-4.1 s
    // -> 1.1-1.3 s for 10,000 files (docs/performance.md, the journal).
    options.defer_syncs = true;
    // The operator is not an agent: `rwnd`'s "no delete" does not hold for the undo.
    options.operator_deletes = true;
    // A dry run changes nothing, the journal's images included.
    options.journal_unswept = dry_run;
    // A journal named by mistake is refused, not made empty.
    options.journal_existing = true;
    let composed = vfs_host::compose(&options, authority)?;
    // The journal may come from the flag or from the settings file's `journal`.
    let Some(journal) = composed.journal() else {
        return Err(Refusal {
            message: "`vfs undo` needs --journal DIR (or a settings file with `journal`)".to_owned(),
            hint: Some("name the journal the changes were made with, and the same mounts".to_owned()),
        }
        .into());
    };
    let journal: &Journal = journal;
    if any_place {
        journal.undo_from_any_place();
    }
    // Each undo judges its entry from the log as it is then: read once, then what was
    // appended since.
    let _batch = journal.batch();
    let entries = journal.entries();
    let chosen = selected(&entries, selection)?;
    if chosen.is_empty() {
        output::line("nothing to undo");
    }
    // Kept from the size bound until reached: the undo's own entries add to the journal.
    let _pinned = journal.pin(chosen.iter().map(|entry| entry.id.as_str()));
    let agent = composed.registry().agent();
    let mut clean = true;
    // A signal stops the undo between two entries, never in the middle of one (`stopping`).
    let stop = crate::stopping::flag_on_first_signal("stopping once the entry being undone is undone")?;
    let total = chosen.len();
    for (done, entry) in chosen.into_iter().enumerate() {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            let left = total - done;
            output::line(&format!(
                "stopped by a signal: {left} more entr{} not undone",
                if left == 1 { "y" } else { "ies" }
            ));
            clean = false;
            break;
        }
        if dry_run {
            // What the undo would do: the same skips, said as they would be.
            let taken = journal.taken_count(entry);
            let would = match entries.skipped(entry).or_else(|| journal.misplaced(entry)) {
                Some(_) if taken > 0 => format!(
                    "would put back {} {}: {taken} file{} it took before vfs stopped during it",
                    entry.id,
                    entry.paths.join(" "),
                    if taken == 1 { "" } else { "s" }
                ),
                Some(skipped) => {
                    clean = false;
                    format!("would be {skipped}")
                }
                None => format!("would undo {} {} {}", entry.id, entry.operation, entry.paths.join(" -> ")),
            };
            output::line(&vfs::escape_controls(&would));
            continue;
        }
        let (lines, undone) = journal.undo(&agent, entry, vfs_host::OPERATOR_SESSION, None);
        for line in lines {
            output::line(&line);
        }
        clean &= undone;
    }
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(crate::TOOL_ERROR) })
}

#[cfg(test)]
mod tests {
    use super::utc_second;

    #[test]
    fn since_takes_rfc_3339_times_to_the_second_in_utc() {
        let cases = [
            ("2026-12-02T19:00:00Z", "2026-12-02T19:00:00Z"),
            ("2026-12-02t19:00:00z", "2026-12-02T19:00:00Z"),
            ("2026-12-02 19:00:00Z", "2026-12-02T19:00:00Z"),
            ("2026-12-02T19:00:00.999Z", "2026-12-02T19:00:00Z"),
            ("2026-12-02T20:30:00+01:30", "2026-12-02T19:00:00Z"),
            ("2026-12-02T00:00:00-05:00", "2026-12-02T05:00:00Z"),
            ("2026-01-01T00:30:00+01:00", "2025-12-31T23:30:00Z"),
            ("2024-02-29T12:00:00Z", "2024-02-29T12:00:00Z"),
            ("2016-12-31T23:59:60Z", "2016-12-31T23:59:59Z"),
            ("2016-12-31T18:59:60-05:00", "2016-12-31T23:59:59Z"),
            ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z"),
            ("9999-12-31T23:59:59-00:01", "9999-12-31T23:59:59Z"),
            ("0000-01-01T00:00:00+00:01", "0000-01-01T00:00:00Z"),
        ];
        for (given, utc) in cases {
            assert_eq!(utc_second(given).as_deref(), Some(utc), "{given}");
        }
        for not in [
            "",
            "yesterday",
            "2026-12-02",
            "2026-12-02T19:00:00",
            "2026-12-02T19:00Z",
            "2026-02-30T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T19:00:00.Z",
            "2026-12-02T19:00:00+0100",
            "2026-12-02T19:00:00+24:00",
            "2026-12-02T19:00:00Zjunk",
            "2026-12-02X19:00:00Z",
            "+026-12-02T19:00:00Z",
            "2026-12-02T19:00:60Z",
            "2016-12-31T23:59:60+01:00",
        ] {
            assert_eq!(utc_second(not), None, "{not}");
        }
    }
}
