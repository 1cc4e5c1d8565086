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
    /// (`undoable`, `undone`, `not undoable`, `dropped`).
    List {
        /// The journal directory (as given to `--journal`).
        #[arg(long = "journal", value_name = "DIR")]
        journal: PathBuf,
        /// Only the changes of this session.
        #[arg(long, value_name = "S")]
        session: Option<String>,
        /// Only the changes made at or after this time (RFC 3339, like `2026-12-02T19:00:00Z`).
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
    let JournalCommand::List { journal, session, since, json } = command;
    if let Some(since) = &since
        && !is_rfc3339(since)
    {
        return Err(Refusal {
            message: format!("--since `{since}` is not an RFC 3339 UTC time"),
            hint: Some("write it like 2026-12-02T19:00:00Z".to_owned()),
        }
        .into());
    }
    let opened = vfs_host::open_journal(&journal, authority).map_err(vfs_host::Problems::from)?;
    let entries = opened.entries();
    let shown: Vec<&Entry> = entries
        .all()
        .iter()
        .rev()
        .filter(|entry| session.as_ref().is_none_or(|session| &entry.session == session))
        .filter(|entry| since.as_ref().is_none_or(|since| entry.time.as_str() >= since.as_str()))
        .collect();
    if json {
        let array: Vec<serde_json::Value> = shown.iter().map(|entry| entries.json(entry)).collect();
        output::json(&serde_json::Value::Array(array));
    } else {
        for entry in shown {
            output::line(&format!(
                "{}  {}  {}  {}  {}  {}",
                entry.id,
                entry.time,
                entry.session,
                entry.operation,
                entry.paths.join(" -> "),
                entries.state_text(entry)
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `2026-12-02T19:00:00Z`: the form every vfs surface writes.
fn is_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| bytes[range].iter().all(u8::is_ascii_digit);
    bytes.len() == 20
        && digits(0..4)
        && bytes[4] == b'-'
        && digits(5..7)
        && bytes[7] == b'-'
        && digits(8..10)
        && bytes[10] == b'T'
        && digits(11..13)
        && bytes[13] == b':'
        && digits(14..16)
        && bytes[16] == b':'
        && digits(17..19)
        && bytes[19] == b'Z'
}

/// The entries `selection` names, newest first.
fn selected<'e>(entries: &'e Entries, selection: &Selection) -> Result<Vec<&'e Entry>, Refusal> {
    if let Some(count) = selection.last {
        return Ok(entries.undoable_newest(None).into_iter().take(count).collect());
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

pub(crate) fn undo(
    launch: LaunchArgs,
    selection: &Selection,
    dry_run: bool,
    authority: vfs::AmbientAuthority,
) -> anyhow::Result<ExitCode> {
    let mut options = launch.into_options()?;
    // Each undo syncs what it restored once (`Journal::undo`), not each file twice: 3.6-4.1 s
    // -> 1.1-1.3 s for 10,000 files (docs/performance.md, the journal).
    options.defer_syncs = true;
    // A dry run changes nothing, the journal's images included.
    options.journal_unswept = dry_run;
    if options.journal.is_none() {
        return Err(Refusal {
            message: "`vfs undo` needs --journal DIR".to_owned(),
            hint: Some("name the journal the changes were made with, and the same mounts".to_owned()),
        }
        .into());
    }
    let composed = vfs_host::compose(&options, authority)?;
    let journal: &Journal = composed.journal().ok_or_else(|| anyhow::anyhow!("the journal did not open"))?;
    let entries = journal.entries();
    let chosen = selected(&entries, selection)?;
    if chosen.is_empty() {
        output::line("nothing to undo");
    }
    let agent = composed.registry().agent();
    let mut clean = true;
    for entry in chosen {
        if dry_run {
            // What the undo would do: the same skips, said as they would be.
            match entries.skipped(entry) {
                Some(skipped) => {
                    output::line(&format!("would be {skipped}"));
                    clean = false;
                }
                None => {
                    output::line(&format!("would undo {} {} {}", entry.id, entry.operation, entry.paths.join(" -> ")));
                }
            }
            continue;
        }
        let (lines, undone) = journal.undo(&agent, entry, vfs_host::OPERATOR_SESSION);
        for line in lines {
            output::line(&line);
        }
        clean &= undone;
    }
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(crate::TOOL_ERROR) })
}
