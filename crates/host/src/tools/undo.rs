//! `list_changes` and `undo_changes`: the agent's side of the journal (`--journal`), over this
//! session's own changes only, with the rights of the session's mounts.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use vfs::AgentAccessor;

use super::{ToolOutput, ToolService, parse};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListChangesArgs {
    /// Most changes to list, newest first (default 50).
    limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct UndoChangesArgs {
    /// How many of your newest changes to undo (default 1); an undo does not count.
    count: Option<usize>,
    /// Undo your changes back to this one, included (an id from `list_changes`); an undo's id
    /// redoes it.
    change_id: Option<String>,
}

/// One change of the session.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct ChangeRow {
    /// The change's id.
    id: String,
    /// `write`, `edit`, `make_directory`, `remove`, `move`, or `undo`.
    operation: String,
    /// The virtual paths it changed.
    paths: Vec<String>,
    /// When (RFC 3339 UTC).
    time: String,
    /// `undoable`, `undone`, `not undoable` or `dropped`.
    state: String,
}

/// `list_changes`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct ChangesOutput {
    /// Your changes, newest first.
    changes: Vec<ChangeRow>,
}

/// `undo_changes`' structured content.
#[derive(Debug, serde::Serialize, JsonSchema)]
pub(super) struct UndoOutput {
    /// One line per path: `restored P`, `removed P`, `conflict P: changed since (left as it is)`.
    lines: Vec<String>,
    /// True when everything asked was undone (always, in a result that is not an error: a
    /// conflict makes the result an error, its lines in the text).
    undone: bool,
}

/// What both tools answer when the journal's log cannot be read: not "no changes".
const UNREADABLE: &str = "the journal of changes cannot be read now, so your changes cannot be listed or undone; tell the operator, whose log says why";

fn refusal(text: &str) -> ToolOutput {
    ToolOutput { text: text.to_owned(), structured: None, media: None, is_error: true, notes: Vec::new() }
}

pub(super) fn run_list_changes(
    tools: &ToolService,
    _: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: ListChangesArgs = parse(arguments)?;
    let Some((journal, session)) = &tools.journal else { return Ok(refusal("no journal is kept")) };
    if args.limit == Some(0) {
        return Ok(refusal("`limit` must be at least 1 (it is how many of your changes to list)"));
    }
    let entries = journal.entries();
    if entries.unreadable() {
        return Ok(refusal(UNREADABLE));
    }
    let rows: Vec<ChangeRow> = entries
        .all()
        .iter()
        .rev()
        .filter(|entry| entry.session == **session)
        .take(args.limit.unwrap_or(50))
        .map(|entry| ChangeRow {
            id: entry.id.clone(),
            operation: entry.operation.clone(),
            paths: entry.paths.clone(),
            time: entry.time.clone(),
            state: entries.state(entry).as_str().to_owned(),
        })
        .collect();
    let mut text = String::new();
    for row in &rows {
        text.push_str(&format!(
            "{}  {}  {}  {}  {}\n",
            row.id,
            row.time,
            row.operation,
            vfs::escape_controls(&row.paths.join(" -> ")),
            row.state
        ));
    }
    if rows.is_empty() {
        text.push_str("no changes in this session\n");
    }
    let structured = serde_json::to_value(ChangesOutput { changes: rows }).unwrap_or(Value::Null);
    Ok(tools.success(&vfs::AgentText::from(text.as_str()), structured))
}

pub(super) fn run_undo_changes(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: UndoChangesArgs = parse(arguments)?;
    let Some((journal, session)) = &tools.journal else { return Ok(refusal("no journal is kept")) };
    if args.count == Some(0) {
        return Ok(refusal("`count` must be at least 1 (it is how many of your newest changes to undo)"));
    }
    let started = std::time::Instant::now();
    let budget = agent.budget();
    let out_of_time = || budget.is_cancelled() || budget.time().is_some_and(|time| started.elapsed() >= time);
    // One `undo_changes` of this session at a time: the next chooses from what this one left.
    let Some(_turn) = journal.undo_turn(session, out_of_time) else {
        return Ok(refusal(
            "nothing was undone: another `undo_changes` of this session was still running when this call's time ran out; call again once it has answered",
        ));
    };
    // Each undo judges its entry from the log as it is then: read once, then what was
    // appended since.
    let _batch = journal.batch();
    let entries = journal.entries();
    if entries.unreadable() {
        return Ok(refusal(UNREADABLE));
    }
    let chosen: Vec<&crate::Entry> = match &args.change_id {
        Some(id) => {
            let Some(target) = entries.find_of(id, Some(session)) else {
                // Named back only when it has the form of an id (bounded, one word).
                let named = if id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
                    format!("`{id}`")
                } else {
                    "with that id".to_owned()
                };
                return Ok(refusal(&format!(
                    "no change {named} of this session (or the prefix names more than one); `list_changes` lists them"
                )));
            };
            if target.undoes.is_some() {
                vec![target]
            } else {
                let mine = entries.undoable_newest(Some(session));
                let through = mine.iter().position(|entry| entry.id == target.id).map_or(0, |at| at + 1);
                mine.into_iter().take(through).collect()
            }
        }
        None => entries.undoable_newest(Some(session)).into_iter().take(args.count.unwrap_or(1)).collect(),
    };
    // Newest changes that can never be undone would be met again at each call with a count:
    // said how to reach the older ones. (Judged before the undo, which takes images away.)
    let stuck = |entry: &&crate::Entry| match entries.state(entry) {
        crate::EntryState::NotUndoable | crate::EntryState::Dropped => true,
        crate::EntryState::Undoable => journal.images_gone(entry),
        crate::EntryState::Undone => false,
    };
    let never = args.change_id.is_none() && !chosen.is_empty() && chosen.iter().all(stuck);
    // Kept from the size bound until reached: the undo's own entries add to the journal.
    let _pinned = journal.pin(chosen.iter().map(|entry| entry.id.as_str()));
    let mut lines = Vec::new();
    let mut clean = true;
    // Each change is undone whole; between two, the call's time limit and cancellation are
    // heeded, so that an undo of many changes ends as any call does, with what is left said.
    for (at, entry) in chosen.iter().enumerate() {
        if at > 0 && out_of_time() {
            let left = chosen.len() - at;
            lines.push(format!(
                "stopped: the call's time ran out with {left} more to undo; call `undo_changes` again for {}",
                if left == 1 { "it" } else { "them" }
            ));
            clean = false;
            break;
        }
        let (mut done, undone) = journal.undo(agent, entry, session, agent.budget().call_id());
        lines.append(&mut done);
        clean &= undone;
    }
    if lines.is_empty() {
        lines.push("nothing to undo".to_owned());
    }
    if never {
        lines.push(format!(
            "(they never can be: to undo older changes, give `count` {} or more, or a `changeId` from `list_changes`)",
            chosen.len() + 1
        ));
    }
    let text = format!("{}\n", lines.join("\n"));
    if !clean {
        // An error result is its text alone: structured content is the success's (its
        // output schema), as for every tool.
        return Ok(refusal(&text));
    }
    let structured = serde_json::to_value(UndoOutput { lines, undone: clean }).unwrap_or(Value::Null);
    Ok(tools.success(&vfs::AgentText::from(text.as_str()), structured))
}
