//! The HTTP daemon's plan: its endpoints, the registry behind each, and the tokens that open
//! them.
//!
//! `/mcp` serves the launch's own mounts; each `--crew` is hosted at `/mcp/<name>` with a
//! registry of its own: its directory at `/crew` (read-only) and the roots its `mounts:` block
//! selects, nothing else. The daemon mounts the hosted crews' directories read-only at
//! `/crews`, `/crews-1`, `/crews-2`, … in launch order (the runner roots the design reserves).
//! Each definition is read with the operator's [`AmbientAuthority`] beneath its directory, as
//! the crew's agents see it at `/crew` (`launch::read_crew`).
//!
//! Isolation between crews is the registries' own rules, not a second mechanism: in every
//! endpoint's registry, every *other* crew's directory is an internal mount at its runner root.
//! An internal mount is absent to agents (byte for byte a missing name, rule 4 and 7 of
//! `docs/design.md`), and a launch where a writable mount holds one is refused (rule 12). So
//! no crew can read, detect or plant into another crew's definition, this launch or the next.
//! A crew's own definition is kept out of its agents' reach as in a stdio launch
//! (`launch::crew_out_of_reach`).
//! Each crew's sessions log into their own folder `<--llm-log>/<name>/`.

use std::path::Path;

use vfs::{AmbientAuthority, MountRoot, MountSpec, Rights, Visibility};

use crate::crew::Crew;
use crate::error::{HostError, Problems};
use crate::launch::{
    CrewPlace, Entry, Launch, LaunchOptions, Sources, absolute, compose_from, crew_out_of_reach, crew_place, finish,
    path_text, read_crew, read_limit, runner_root, select, sources, unprovided,
};
use crate::tokens::Tokens;

/// One endpoint of the daemon.
#[derive(Debug, Clone)]
pub struct Served {
    crew: Option<HostedCrew>,
    launch: Launch,
}

/// A hosted crew's names: its endpoint's and its runner root.
#[derive(Debug, Clone)]
struct HostedCrew {
    name: String,
    runner_root: MountRoot,
}

impl Served {
    /// The endpoint's path: `/mcp` or `/mcp/<crew>`.
    #[must_use]
    pub fn path(&self) -> String {
        match &self.crew {
            Some(crew) => format!("/mcp/{}", crew.name),
            None => "/mcp".to_owned(),
        }
    }

    /// The hosted crew's name; `None` for `/mcp`.
    #[must_use]
    pub fn crew_name(&self) -> Option<&str> {
        self.crew.as_ref().map(|crew| crew.name.as_str())
    }

    /// Where the daemon mounts the hosted crew's directory (`/crews`, `/crews-1`, …).
    #[must_use]
    pub fn runner_root(&self) -> Option<&MountRoot> {
        self.crew.as_ref().map(|crew| &crew.runner_root)
    }

    /// The endpoint's launch: its registry, crew and exchange log folder.
    #[must_use]
    pub fn launch(&self) -> &Launch {
        &self.launch
    }
}

/// What the daemon serves.
#[derive(Debug, Clone)]
pub struct Hosting {
    /// The tokens (`None` when none were given and none were required).
    pub tokens: Option<Tokens>,
    /// The endpoints: `/mcp` first when it is served, then the crews in launch order.
    pub endpoints: Vec<Served>,
}

/// Plans the daemon: reads the crews and the tokens, and composes each endpoint's registry.
/// `/mcp` is served when no crew is hosted or when a token grants it. With `require_tokens`,
/// no token at all is refused; without, tokens are read only when given (`vfs mounts`).
/// `authority` opens the host paths the options name (see [`crate::compose`]) and the token file.
pub fn host(
    options: &LaunchOptions,
    token_file: Option<&Path>,
    environment: Option<&str>,
    require_tokens: bool,
    authority: AmbientAuthority,
) -> Result<Hosting, Problems> {
    let mut problems = Vec::new();
    let loaded = load_crews(options, &mut problems, authority);
    if !problems.is_empty() {
        return Err(Problems(problems));
    }
    let names: Vec<String> = loaded.iter().map(|crew| crew.name.clone()).collect();
    let tokens = if require_tokens || token_file.is_some() || environment.is_some() {
        Some(tokens(token_file, environment, &options.current_dir, &names, require_tokens, authority)?)
    } else {
        None
    };
    let hidden: Vec<Entry> = loaded.iter().map(Loaded::hidden).collect();
    let sources = sources(options, &mut problems, authority);
    if !problems.is_empty() {
        return Err(Problems(problems));
    }

    let mut endpoints = Vec::new();
    if loaded.is_empty() || tokens.as_ref().is_some_and(Tokens::grants_default) {
        match compose_from(options, sources.clone(), Vec::new(), None, &hidden, authority) {
            Ok(launch) => endpoints.push(Served { crew: None, launch }),
            Err(Problems(found)) => problems.extend(found),
        }
    }
    for (index, crew) in loaded.iter().enumerate() {
        let others: Vec<Entry> =
            hidden.iter().enumerate().filter(|(other, _)| *other != index).map(|(_, entry)| entry.clone()).collect();
        match compose_crew(options, &sources, crew, others, authority) {
            Ok(launch) => endpoints.push(Served {
                crew: Some(HostedCrew { name: crew.name.clone(), runner_root: crew.root.clone() }),
                launch,
            }),
            Err(Problems(found)) => problems.extend(
                found.into_iter().map(|source| HostError::InCrew { crew: crew.name.clone(), source: Box::new(source) }),
            ),
        }
    }
    if let Some(file) = token_file
        && let Ok(in_file) = self::tokens(Some(file), None, &options.current_dir, &names, false, authority)
    {
        problems.extend(tokens_out_of_reach(file, &in_file, &options.current_dir, &endpoints, authority));
    }
    dedupe(&mut problems);
    if problems.is_empty() { Ok(Hosting { tokens, endpoints }) } else { Err(Problems(problems)) }
}

/// The endpoints whose agents could read the token file while it holds a token of another
/// endpoint (`in_file`), theirs to take: each refused in one line. A file of their own
/// endpoint's tokens alone gives them nothing they do not have.
fn tokens_out_of_reach(
    file: &Path,
    in_file: &Tokens,
    current_dir: &Path,
    endpoints: &[Served],
    authority: AmbientAuthority,
) -> Vec<HostError> {
    let Ok(canonical) = vfs::host_path::canonical(&absolute(current_dir, file), authority) else { return Vec::new() };
    endpoints
        .iter()
        .filter_map(|served| {
            let endpoint = served.crew.as_ref().map(|crew| crew.name.as_str());
            if !in_file.grants_other_than(endpoint) {
                return None;
            }
            let found = served.launch.registry().reaches_file(&canonical, vfs::Access::Read)?;
            let refusal = HostError::TokensReadable {
                file: path_text(file),
                root: found.root,
                physical: found.physical,
                at: found.path,
            };
            Some(match &served.crew {
                Some(crew) => HostError::InCrew { crew: crew.name.clone(), source: Box::new(refusal) },
                None => refusal,
            })
        })
        .collect()
}

/// A hosted crew as read: where it lives, its definition, its name and runner root.
struct Loaded {
    place: CrewPlace,
    crew: Crew,
    name: String,
    root: MountRoot,
}

impl Loaded {
    /// The crew's directory as an internal mount at its runner root, for the other endpoints.
    fn hidden(&self) -> Entry {
        Entry {
            spec: MountSpec::local(self.place.directory.clone(), self.root.clone(), Rights::ReadOnly),
            visibility: Visibility::Internal,
            origin: format!("runner (hosted crew `{}`)", self.name),
        }
    }
}

/// The runner root of the crew at `index` in launch order: `/crews`, `/crews-1`, ….
fn crews_root(index: usize) -> MountRoot {
    if index == 0 { runner_root("/crews") } else { runner_root(&format!("/crews-{index}")) }
}

/// Reads every `--crew` beneath its directory, gives each its runner root (`/crews`,
/// `/crews-1`, …) and names them.
fn load_crews(options: &LaunchOptions, problems: &mut Vec<HostError>, authority: AmbientAuthority) -> Vec<Loaded> {
    let mut places = Vec::new();
    for path in &options.crews {
        match crew_place(options, path, authority) {
            Ok(place) => places.push(place),
            Err(error) => problems.push(error),
        }
    }
    for (index, first) in places.iter().enumerate() {
        for second in &places[index + 1..] {
            let (outer, inner) = if first.directory.components().count() <= second.directory.components().count() {
                (&first.directory, &second.directory)
            } else {
                (&second.directory, &first.directory)
            };
            if inner.starts_with(outer) {
                problems.push(HostError::SharedCrewDirectory {
                    first: first.shown.clone(),
                    second: second.shown.clone(),
                    directory: path_text(outer),
                });
            }
        }
    }
    if !problems.is_empty() || places.is_empty() {
        return Vec::new();
    }
    let mut loaded: Vec<Loaded> = Vec::new();
    for (index, place) in places.into_iter().enumerate() {
        let root = crews_root(index);
        let crew = match read_crew(&place, authority) {
            Ok(crew) => crew,
            Err(Problems(found)) => {
                problems.extend(found);
                continue;
            }
        };
        let name = match crew_name(&place, &crew) {
            Ok(name) => name,
            Err(error) => {
                problems.push(error);
                continue;
            }
        };
        if let Some(first) = loaded.iter().find(|other| other.name == name) {
            problems.push(HostError::DuplicateCrew { name, first: first.place.shown.clone(), second: place.shown });
            continue;
        }
        loaded.push(Loaded { place, crew, name, root });
    }
    loaded
}

/// The longest crew name: it is a URL segment and a folder name.
const MAX_NAME: usize = 64;

/// The crew's `name:` key, else its directory's name (for a directory) or its file's stem.
fn crew_name(place: &CrewPlace, crew: &Crew) -> Result<String, HostError> {
    let fail = |name: &str, reason| HostError::CrewName {
        path: place.shown.clone(),
        name: name.escape_debug().to_string(),
        reason,
    };
    let name = match crew.name_key() {
        crate::crew::CrewNameKey::Text(name) => name.clone(),
        crate::crew::CrewNameKey::NotText => return Err(fail("", "the `name:` key is not a string")),
        crate::crew::CrewNameKey::Absent => {
            let from = if place.given_directory {
                place.directory.file_name().map(|name| name.to_string_lossy().into_owned())
            } else {
                Path::new(&place.file).file_stem().map(|stem| stem.to_string_lossy().into_owned())
            };
            from.unwrap_or_default()
        }
    };
    if name.is_empty() {
        return Err(fail(&name, "it is empty"));
    }
    if name.len() > MAX_NAME {
        return Err(fail(&name, "it is longer than 64 characters"));
    }
    if name.starts_with('.') {
        return Err(fail(&name, "it starts with `.`"));
    }
    if !name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.')) {
        return Err(fail(&name, "only letters, digits, `-`, `_` and `.` may name an endpoint"));
    }
    Ok(name)
}

/// One hosted crew's registry: the roots its `mounts:` block selects, its directory at
/// `/crew`, the other crews' directories hidden, and its own log folder.
fn compose_crew(
    options: &LaunchOptions,
    sources: &Sources,
    loaded: &Loaded,
    others: Vec<Entry>,
    authority: AmbientAuthority,
) -> Result<Launch, Problems> {
    let only: Vec<&MountRoot> = loaded.crew.mounts().iter().map(|mount| &mount.root).collect();
    let mut problems = Vec::new();
    let mut selected =
        select(&sources.flags, &sources.mount_ids, &sources.settings, Some(&loaded.crew), Some(&only), &mut problems);
    problems.extend(unprovided(&loaded.crew, &selected));
    if !problems.is_empty() {
        return Err(Problems(problems));
    }
    selected.push(Entry {
        spec: MountSpec::local(loaded.place.directory.clone(), runner_root("/crew"), Rights::ReadOnly),
        visibility: Visibility::AgentFacing,
        origin: format!("runner (--crew, hosted at {})", loaded.root),
    });
    selected.extend(others);
    let options = sources.journal_over(options);
    let launch =
        finish(&options, selected, &sources.rules, Some(loaded.crew.clone()), Some(loaded.name.clone()), authority)?;
    crew_out_of_reach(&launch, &loaded.place)?;
    Ok(launch)
}

/// Shortest token accepted: a guessable token is no authentication.
const MIN_TOKEN_CHARS: usize = 16;

/// The bearer tokens of the HTTP daemon: from `--token-file` (one per line: `TOKEN` grants
/// `/mcp`, `CREW TOKEN` grants `/mcp/CREW`; blank lines and `#` comments are ignored) and from
/// `VFS_TOKEN` (a token for `/mcp`). `crews` are the hosted crews' names: a line for any other
/// crew is refused. With `required`, no token at all is refused: authentication is never off.
/// `authority` opens the token file.
pub fn tokens(
    token_file: Option<&Path>,
    environment: Option<&str>,
    current_dir: &Path,
    crews: &[String],
    required: bool,
    authority: AmbientAuthority,
) -> Result<Tokens, Problems> {
    let mut tokens = Tokens::default();
    let mut problems = Vec::new();
    if let Some(file) = token_file {
        let shown = path_text(file);
        match vfs::host_path::read_text_file(&absolute(current_dir, file), read_limit(), authority) {
            Ok(text) => parse_tokens(&shown, &text, crews, &mut tokens, &mut problems),
            Err(reason) => problems.push(HostError::TokenFileRead { path: shown, reason }),
        }
    }
    if let Some(token) = environment.map(str::trim).filter(|token| !token.is_empty()) {
        if token.chars().count() < MIN_TOKEN_CHARS {
            problems.push(HostError::TokenFile {
                path: "VFS_TOKEN".to_owned(),
                reason: format!("the token is shorter than {MIN_TOKEN_CHARS} characters"),
            });
        }
        tokens.grant(None, token.to_owned());
    }
    if required && problems.is_empty() && tokens.is_empty() {
        problems.push(HostError::NoToken);
    }
    if problems.is_empty() { Ok(tokens) } else { Err(Problems(problems)) }
}

fn parse_tokens(shown: &str, text: &str, crews: &[String], tokens: &mut Tokens, problems: &mut Vec<HostError>) {
    for (number, line) in (1..).zip(text.lines()) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fail = |reason: String| HostError::TokenFile {
            path: shown.to_owned(),
            reason: format!("line {number}: {reason}"),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let (crew, token) = match words.as_slice() {
            [token] => (None, *token),
            [crew, token] => (Some((*crew).to_owned()), *token),
            _ => {
                problems.push(fail("expected `TOKEN` or `CREW TOKEN`".to_owned()));
                continue;
            }
        };
        if token.chars().count() < MIN_TOKEN_CHARS {
            problems.push(fail(format!("the token is shorter than {MIN_TOKEN_CHARS} characters")));
            continue;
        }
        if let Some(crew) = &crew
            && !crews.contains(crew)
        {
            problems.push(fail(format!("`{crew}` is not a crew this daemon hosts (--crew)")));
            continue;
        }
        tokens.grant(crew, token.to_owned());
    }
}

/// Drops repeated lines (a `--mount-id` problem is found once per endpoint).
fn dedupe(problems: &mut Vec<HostError>) {
    let mut seen = std::collections::HashSet::new();
    problems.retain(|problem| {
        let line = match problem {
            HostError::InCrew { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        seen.insert(line)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token file an endpoint's agents could read (every endpoint's token, theirs to take)
    /// is refused for that endpoint, naming the mount and the fix (red team: a crew read the
    /// token file through a read-only mount and took another crew's token); a hidden one, and
    /// one out of every mount, are not.
    #[test]
    #[expect(clippy::disallowed_methods, reason = "fixture: crews, directories and a token file on disk")]
    fn a_token_file_agents_could_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        for crew in ["alpha", "beta"] {
            std::fs::create_dir_all(base.join(format!("crews/{crew}"))).unwrap();
            std::fs::write(base.join(format!("crews/{crew}/crew.yaml")), format!("name: {crew}\nmounts: [/{crew}]\n"))
                .unwrap();
            std::fs::create_dir_all(base.join(format!("data/{crew}"))).unwrap();
        }
        let tokens = "alpha aaaaaaaaaaaaaaaaaaaaaaaa\nbeta bbbbbbbbbbbbbbbbbbbbbbbb\n";
        std::fs::write(base.join("data/alpha/tokens"), tokens).unwrap();
        std::fs::write(base.join("tokens"), tokens).unwrap();
        let check = |token_file: &str, alpha: &str, hide: &[&str]| -> String {
            let options = LaunchOptions {
                mounts: vec![format!("data/alpha:/alpha:{alpha}"), "data/beta:/beta:rw".to_owned()],
                crews: vec![base.join("crews/alpha"), base.join("crews/beta")],
                hide: hide.iter().map(|&glob| glob.to_owned()).collect(),
                current_dir: base.to_path_buf(),
                ..LaunchOptions::default()
            };
            match host(&options, Some(Path::new(token_file)), None, true, vfs::ambient_authority()) {
                Ok(_) => "OK".to_owned(),
                Err(problems) => problems.to_string().replace(&base.display().to_string(), "[TMP]"),
            }
        };
        let refused = "crew `alpha`: the token file `data/alpha/tokens` lies inside `/alpha` (`[TMP]/data/alpha`) at `/alpha/tokens`, where agents may read it, and holds another endpoint's token, which they could take: move the token file out of every mount, or hide it (`--hide`)";
        assert_eq!(check("data/alpha/tokens", "rw", &[]), refused);
        assert_eq!(check("data/alpha/tokens", "ro", &[]), refused);
        assert_eq!(check("data/alpha/tokens", "ro", &["tokens"]), "OK");
        assert_eq!(check("tokens", "rw", &[]), "OK");
        // Its own endpoint's tokens alone: nothing to take.
        std::fs::write(base.join("data/alpha/tokens"), "alpha aaaaaaaaaaaaaaaaaaaaaaaa\n").unwrap();
        assert_eq!(check("data/alpha/tokens", "ro", &[]), "OK");
    }
}
