//! The handlers: each tool's arguments parsed, the core asked as the calling agent, and the
//! answer rendered (text for the model, structured content for programs).

use serde_json::Value;
use vfs::AgentAccessor;

use super::params::{
    DeleteFileArgs, DirectoryTreeArgs, EditFileArgs, GrepArgs, ListMountsArgs, MoveFileArgs, PathArgs,
    ReadMultipleFilesArgs, ReadTextFileArgs, SearchFilesArgs, SizedListArgs, SortKey, WriteFileArgs,
};
use super::schemas::{AllowedOutput, MediaOutput, MountsOutput};
use super::{Media, ToolOutput, ToolService, session};

pub(super) fn run_list_mounts(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    parse::<ListMountsArgs>(arguments)?;
    let mounts = agent.list_mounts();
    let text = vfs::AgentText::from(mounts_text(&mounts).as_str());
    Ok(tools.success(&text, serde_json::to_value(MountsOutput { mounts }).unwrap_or(Value::Null)))
}

pub(super) fn run_list_allowed_directories(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    parse::<ListMountsArgs>(arguments)?;
    let directories: Vec<String> = agent.list_mounts().into_iter().map(|mount| mount.root).collect();
    let mut text = vfs::AgentText::from("Allowed directories:\n");
    for root in &directories {
        text.composed(root).composed("\n");
    }
    Ok(tools.success(&text, serde_json::to_value(AllowedOutput { directories }).unwrap_or(Value::Null)))
}

pub(super) fn run_list_directory_with_sizes(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: SizedListArgs = parse(arguments)?;
    let sort = match args.sort_by {
        Some(SortKey::Size) => vfs::SortBy::Size,
        Some(SortKey::Name) | None => vfs::SortBy::Name,
    };
    Ok(tools.finish(agent.list_with_sizes(&args.path, sort), vfs::SizedListing::agent_text))
}

pub(super) fn run_read_text_file(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: ReadTextFileArgs = parse(arguments)?;
    let window = vfs::ReadWindow { head: args.head, tail: args.tail, offset: args.offset, limit: args.limit };
    let read = agent.read_text(&args.path, &window);
    if let Ok(read) = &read {
        tools.saw(&read.path, read.version.as_deref());
    }
    let next = read.as_ref().ok().and_then(|read| read.next);
    let mut output = tools.finish(read, vfs::TextRead::agent_text);
    // The file's text goes once, in the text content; the structured content keeps what
    // programs need (version, window, truncation) without a second copy, and says how to
    // read on in the tools' words.
    if let Some(structured) = &mut output.structured {
        if let Value::Object(fields) = structured {
            fields.remove("content");
        }
        crate::words::word_read_on(structured, next);
    }
    Ok(output)
}

pub(super) fn run_read_multiple_files(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: ReadMultipleFilesArgs = parse(arguments)?;
    Ok(match agent.read_multiple(&args.paths) {
        Ok(results) => {
            for read in results.iter().filter_map(|(_, result)| result.as_ref().ok()) {
                tools.saw(&read.path, read.version.as_deref());
            }
            tools.multiple(&results)
        }
        Err(error) => tools.failure(&error),
    })
}

pub(super) fn run_read_media_file(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    let media = match agent.read_media(&args.path) {
        Ok(media) => media,
        Err(error) => return Ok(tools.failure(&error)),
    };
    let mut text = vfs::AgentText::new();
    text.composed("`").passed(media.path.as_str());
    text.composed(&format!("` ({}, {} bytes)", media.mime_type, media.size));
    let structured = MediaOutput { path: media.path.clone(), mime_type: media.mime_type.clone(), size: media.size };
    let mut output = tools.success(&text, serde_json::to_value(structured).unwrap_or(Value::Null));
    output.media = Some(Media { path: media.path, data: media.data, mime_type: media.mime_type });
    Ok(output)
}

pub(super) fn run_write_file(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: WriteFileArgs = parse(arguments)?;
    let mut precondition = match (args.expected_version, args.overwrite) {
        (Some(version), _) => vfs::Precondition::Version(version),
        (None, true) => vfs::Precondition::Any,
        (None, false) => vfs::Precondition::Absent,
    };
    // Read before overwrite: an overwrite replaces only the version the session saw; never
    // seen, the write may only create. The core checks it under the directory's lock.
    let mut guarded = None;
    if precondition == vfs::Precondition::Any
        && let Some((seen, path)) = tools.session_path(&args.path)
    {
        precondition = seen.precondition(&path);
        guarded = Some(path);
    }
    let mut written = agent.write(&args.path, &args.content, &precondition);
    // The file the session saw is gone (a move or a delete, perhaps its own call at the same
    // time): nothing unseen would be lost, so the write creates the file, as it would have
    // had it come after; one made there meanwhile is still refused.
    if gone_since_seen(&written, &precondition, guarded.as_ref()) {
        let again = agent.write(&args.path, &args.content, &vfs::Precondition::Absent);
        if !still_there(&again, guarded.as_ref()) {
            written = again;
        }
    }
    match (&written, &guarded) {
        (Ok(outcome), _) => tools.saw(&outcome.path, outcome.version.as_deref()),
        (Err(error), Some(path)) => {
            if let Some(why) = session::Unread::of(error, path) {
                return Ok(tools.unread(path, why));
            }
        }
        (Err(_), None) => {}
    }
    Ok(tools.finish(written, vfs::WriteOutcome::agent_text))
}

/// True when a change guarded by the version the session saw at `guarded` (`precondition`)
/// was refused as changed since: then it is tried once more where nothing must be, which
/// goes through only if the file is gone (moved or deleted meanwhile, perhaps by the
/// session's own call at the same time), and otherwise is refused as changed, as before.
/// (Told "read it first", the agent read a file that was no longer there.)
fn gone_since_seen<T>(
    result: &Result<T, vfs::Error>,
    precondition: &vfs::Precondition,
    guarded: Option<&vfs::VirtualPath>,
) -> bool {
    let (Err(error), vfs::Precondition::Version(_), Some(path)) = (result, precondition, guarded) else {
        return false;
    };
    session::Unread::of(error, path) == Some(session::Unread::Changed)
}

/// True when the second try of [`gone_since_seen`] found a file at `guarded` after all: the
/// first refusal (changed since the session saw it) is the answer.
fn still_there<T>(result: &Result<T, vfs::Error>, guarded: Option<&vfs::VirtualPath>) -> bool {
    match (result, guarded) {
        (Err(error), Some(path)) => session::Unread::of(error, path) == Some(session::Unread::Never),
        _ => false,
    }
}

pub(super) fn run_edit_file(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: EditFileArgs = parse(arguments)?;
    let edits: Vec<vfs::Edit> =
        args.edits.into_iter().map(|edit| vfs::Edit { old_text: edit.old_text, new_text: edit.new_text }).collect();
    let mut options = vfs::EditOptions {
        replace_all: args.replace_all,
        dry_run: args.dry_run,
        precondition: args.expected_version.map_or(vfs::Precondition::Any, vfs::Precondition::Version),
    };
    // Read before edit (a dry run changes nothing and needs no read): the version the session
    // saw guards the edit in the store, under its lock; never seen, the precondition is that
    // no file be there, so whatever file is there when the edit runs is refused as unread, and
    // a place that is missing or not a file gets the answer it would get anyway.
    let mut guarded = None;
    if !options.dry_run
        && options.precondition == vfs::Precondition::Any
        && let Some((seen, path)) = tools.session_path(&args.path)
    {
        options.precondition = seen.precondition(&path);
        guarded = Some(path);
    }
    let edited = agent.edit(&args.path, &edits, &options);
    match (&edited, &guarded) {
        (Ok(outcome), _) if outcome.applied => tools.saw(&outcome.path, outcome.version.as_deref()),
        (Err(error), Some(path)) => {
            if let Some(why) = session::Unread::of(error, path) {
                return Ok(tools.unread(path, why));
            }
        }
        _ => {}
    }
    Ok(tools.finish(edited, vfs::EditOutcome::agent_text))
}

pub(super) fn run_create_directory(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    Ok(tools.finish(agent.create_directory(&args.path), vfs::CreateDirOutcome::agent_text))
}

pub(super) fn run_list_directory(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    Ok(tools.finish(agent.list(&args.path), vfs::Listing::agent_text))
}

pub(super) fn run_directory_tree(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: DirectoryTreeArgs = parse(arguments)?;
    Ok(tools.finish(agent.tree(&args.path, args.max_depth, &args.exclude_patterns), vfs::Tree::agent_text))
}

pub(super) fn run_search_files(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: SearchFilesArgs = parse(arguments)?;
    let found = agent.search_files(&args.path, &args.pattern, &args.exclude_patterns);
    Ok(tools.finish(found, vfs::NameSearch::agent_text))
}

pub(super) fn run_grep(tools: &ToolService, agent: &AgentAccessor, arguments: &Value) -> Result<ToolOutput, String> {
    let args: GrepArgs = parse(arguments)?;
    let cap = tools.registry.limits().matches;
    let capped = args.max_results.filter(|&asked| asked > cap);
    let wide = args.context.filter(|&asked| asked > vfs::GrepRequest::MAX_CONTEXT);
    let request = vfs::GrepRequest {
        pattern: args.pattern,
        path: args.path,
        include: args.include,
        case_insensitive: args.case_insensitive,
        literal: args.literal,
        context: args.context,
        max_results: args.max_results,
    };
    let mut output = tools.finish(agent.grep(&request), vfs::GrepResult::agent_text);
    if let Some(asked) = capped {
        output.notes.push(format!("[`maxResults` {asked} is above the cap: at most {cap} matches are returned]"));
    }
    if let Some(asked) = wide {
        let most = vfs::GrepRequest::MAX_CONTEXT;
        output
            .notes
            .push(format!("[`context` {asked} is above the cap: at most {most} lines are shown around each match]"));
    }
    Ok(output)
}

pub(super) fn run_get_file_info(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: PathArgs = parse(arguments)?;
    Ok(tools.finish(agent.info(&args.path), vfs::FileInfo::agent_text))
}

pub(super) fn run_move_file(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: MoveFileArgs = parse(arguments)?;
    let at_source = args.expected_version.map_or(vfs::Precondition::Any, vfs::Precondition::Version);
    let mut at_destination = if args.overwrite { vfs::Precondition::Any } else { vfs::Precondition::Absent };
    // Read before replace: a move onto an existing file replaces it, as an overwrite does, so
    // it replaces only the version the session saw there; never seen, the move may only
    // create. The core checks it under the directories' locks, just before the rename, and
    // never replaces a directory.
    let mut guarded = None;
    if args.overwrite
        && let Some((seen, destination)) = tools.session_path(&args.destination)
    {
        at_destination = seen.precondition(&destination);
        guarded = Some(destination);
    }
    let mut moved = agent.move_path(&args.source, &args.destination, &at_source, &at_destination);
    // As for a write: the file the session saw at the destination is gone since.
    if gone_since_seen(&moved, &at_destination, guarded.as_ref()) {
        let again = agent.move_path(&args.source, &args.destination, &at_source, &vfs::Precondition::Absent);
        if !still_there(&again, guarded.as_ref()) {
            moved = again;
        }
    }
    match (&moved, &guarded) {
        (Ok(outcome), _) => {
            if let Some(seen) = &tools.seen {
                seen.forget(&outcome.destination);
                seen.moved(&outcome.source, &outcome.destination);
            }
        }
        // Only the destination's refusal: the source's is the agent's own `expectedVersion`.
        (Err(error), Some(destination)) => {
            if let Some(why) = session::Unread::of(error, destination) {
                return Ok(tools.unread(destination, why));
            }
        }
        (Err(_), None) => {}
    }
    Ok(tools.finish(moved, vfs::MoveOutcome::agent_text))
}

pub(super) fn run_delete_file(
    tools: &ToolService,
    agent: &AgentAccessor,
    arguments: &Value,
) -> Result<ToolOutput, String> {
    let args: DeleteFileArgs = parse(arguments)?;
    // Read before delete: a delete loses what a file held, as an overwrite does, so a file
    // goes only at the version the session saw (never seen: only if no file is there), and a
    // recursive delete only when every file of the tree does (checked by the store under its
    // locks); a link or an empty directory is deleted as before. An `expectedVersion` the
    // agent passes guards instead.
    let guarded = tools.seen.as_ref().filter(|_| args.expected_version.is_none());
    let deleted = match (guarded, args.expected_version) {
        (Some(seen), _) => agent.delete_seen(&args.path, args.recursive, &|path| seen.precondition(path)),
        (None, expected) => {
            let precondition = expected.map_or(vfs::Precondition::Any, vfs::Precondition::Version);
            agent.delete(&args.path, args.recursive, &precondition)
        }
    };
    match (&deleted, guarded) {
        (Ok(outcome), _) => {
            if let Some(seen) = &tools.seen {
                seen.forget(&outcome.path);
            }
        }
        // The refusal of a precondition the session passed names the file it was for: the
        // one asked for, or a file in the directory.
        (Err(error), Some(_)) => {
            if let Some(file) = error.path()
                && let Some(why) = session::Unread::of(error, file)
            {
                let asked = vfs::VirtualPath::new(&args.path).ok();
                return Ok(match asked {
                    Some(directory) if directory != *file => tools.unread_inside(&directory, file, why),
                    _ => tools.unread(file, why),
                });
            }
        }
        (Err(_), None) => {}
    }
    Ok(tools.finish(deleted, vfs::DeleteOutcome::agent_text))
}

/// The arguments, already checked against the schema (`arguments::check`): what serde still
/// refuses is inside a list of objects (an edit without `newText`), and its message names it.
pub(super) fn parse<T: serde::de::DeserializeOwned>(arguments: &Value) -> Result<T, String> {
    serde_json::from_value(arguments.clone()).map_err(|error| error.to_string())
}

pub(super) fn mounts_text(mounts: &[vfs::MountInfo]) -> String {
    if mounts.is_empty() {
        return "no mounts are available".to_owned();
    }
    let mut text = String::new();
    for mount in mounts {
        text.push_str(&format!("{} ({})\n", mount.root, mount.rights));
        for item in &mount.overrides {
            text.push_str(&format!("  {} ({})\n", item.path, item.rights));
        }
    }
    text
}
