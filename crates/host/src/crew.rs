//! Crew definitions: the part of a crew file the service needs, its `mounts:` block.
//!
//! The crew format belongs to the crew framework, so this module reads only `mounts:` and keeps
//! every other key as it was written ([`Crew::definition`]). The file is read beneath its
//! directory's handle with the operator's ambient authority (`launch::read_crew`), a link
//! followed only while it stays inside: exactly what the agents see at `/crew/<file>`.

use vfs::{MountId, MountRoot};

use crate::error::{HostError, Problems};
use crate::nesting::{MAX_FLOW_DEPTH, TooDeep};

/// One entry of a crew's `mounts:` block: `/root` or `<ulid>|/root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrewMount {
    /// The settings entry the crew asks for, if it names one.
    pub id: Option<MountId>,
    /// The virtual root the crew needs.
    pub root: MountRoot,
}

/// A crew definition.
#[derive(Debug, Clone)]
pub struct Crew {
    path: String,
    definition: serde_norway::Value,
    mounts: Vec<CrewMount>,
}

impl Crew {
    /// Parses a crew file. `path` names the file in messages (the operator's spelling).
    ///
    /// The flow nesting is bounded first, in one pass over the text: the YAML scanner's time
    /// grows with the file's length times its flow depth (`crate::nesting`).
    pub(crate) fn parse(path: &str, virtual_path: &str, text: &str) -> Result<Self, Problems> {
        crate::nesting::check_flow_depth(text, MAX_FLOW_DEPTH).map_err(|TooDeep { line }| HostError::CrewNesting {
            path: path.to_owned(),
            line,
            limit: MAX_FLOW_DEPTH,
        })?;
        let definition: serde_norway::Value = serde_norway::from_str(text)
            .map_err(|error| HostError::CrewParse { path: path.to_owned(), reason: one_line(&error.to_string()) })?;
        let block = match &definition {
            serde_norway::Value::Mapping(mapping) => mapping.get("mounts").cloned(),
            serde_norway::Value::Null => None,
            _ => {
                return Err(HostError::CrewParse {
                    path: path.to_owned(),
                    reason: "a crew file is a YAML mapping (keys such as `mounts:`)".to_owned(),
                }
                .into());
            }
        };
        let entries = match block {
            None | Some(serde_norway::Value::Null) => Vec::new(),
            Some(serde_norway::Value::Sequence(entries)) => entries,
            Some(_) => {
                return Err(HostError::CrewParse {
                    path: path.to_owned(),
                    reason: "`mounts:` is a list of `/root` or `<ulid>|/root` entries".to_owned(),
                }
                .into());
            }
        };
        let mut problems = Vec::new();
        let mut mounts: Vec<CrewMount> = Vec::new();
        for entry in entries {
            let serde_norway::Value::String(text) = entry else {
                let written = serde_norway::to_string(&entry).map_or_else(|_| "?".to_owned(), |text| one_line(&text));
                problems.push(HostError::CrewMount {
                    path: path.to_owned(),
                    entry: written,
                    reason: "an entry is a string, `/root` or `<ulid>|/root`".to_owned(),
                });
                continue;
            };
            match parse_entry(&text) {
                Ok(mount) => {
                    if let Some(root) = crate::launch::reserved_root(&mount.root) {
                        let purpose = crate::launch::reserved_purpose(&root);
                        problems.push(HostError::CrewReservedRoot {
                            path: path.to_owned(),
                            entry: text,
                            root,
                            purpose,
                        });
                    } else if mounts.iter().any(|seen| seen.root.as_str().eq_ignore_ascii_case(mount.root.as_str())) {
                        problems.push(HostError::CrewMount {
                            path: path.to_owned(),
                            entry: text,
                            reason: "the root is listed twice; list each root once".to_owned(),
                        });
                    } else {
                        mounts.push(mount);
                    }
                }
                Err(reason) => {
                    problems.push(HostError::CrewMount {
                        path: path.to_owned(),
                        entry: text,
                        reason: reason.to_owned(),
                    });
                }
            }
        }
        if !problems.is_empty() {
            return Err(Problems(problems));
        }
        Ok(Self { path: virtual_path.to_owned(), definition, mounts })
    }

    /// The virtual path the definition was read from, like `/crew/crew.yaml`.
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The whole definition, unknown keys included.
    #[must_use]
    pub fn definition(&self) -> &serde_norway::Value {
        &self.definition
    }

    /// The roots the crew needs.
    #[must_use]
    pub fn mounts(&self) -> &[CrewMount] {
        &self.mounts
    }
}

fn parse_entry(text: &str) -> Result<CrewMount, &'static str> {
    let (id, root) = match text.split_once('|') {
        Some((id, root)) => (Some(MountId::new(id.trim())?), root.trim()),
        None => (None, text.trim()),
    };
    let root = MountRoot::new(root)?;
    Ok(CrewMount { id, root })
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_unknown_keys_and_reads_mounts() {
        let text = "name: review\nagents: [a, b]\nmounts:\n  - /src\n  - 01J9Z3K4M5N6P7Q8R9S0T1V2W3|/output\n";
        let crew = Crew::parse("crew.yaml", "/crew/crew.yaml", text).unwrap();
        assert_eq!(crew.mounts().len(), 2);
        assert_eq!(crew.mounts()[1].id.as_ref().unwrap().as_str(), "01J9Z3K4M5N6P7Q8R9S0T1V2W3");
        assert!(crew.definition().get("agents").is_some());
    }

    #[test]
    fn refuses_malformed_entries_one_line_each() {
        let text = "mounts:\n  - src\n  - nope|/x\n  - 3\n";
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", text).unwrap_err();
        assert_eq!(problems.0.len(), 3);
        assert_eq!(
            problems.0[0].to_string(),
            "invalid crew mount `src` in `crew.yaml`: a virtual root starts with `/`, like `/src`"
        );
    }

    /// A crew file cannot write lines of its own, or terminal controls, into the operator's
    /// output: what it wrote is named with its control characters escaped.
    #[test]
    fn an_entrys_control_characters_are_escaped_in_its_refusal() {
        let text = "mounts: [\"/s\\nerror: all is fine\", \"/e\\e[2J\\0x\"]\n";
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", text).unwrap_err();
        let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "invalid crew mount `/s\\nerror: all is fine` in `crew.yaml`: a virtual root's segments use only letters, digits, `.`, `_` and `-`"
        );
        assert_eq!(
            lines[1],
            "invalid crew mount `/e\\u{1b}[2J\\u{0}x` in `crew.yaml`: a virtual root's segments use only letters, digits, `.`, `_` and `-`"
        );
        assert!(lines.iter().all(|line| !line.chars().any(char::is_control)));
    }

    /// A 240 KB file of `[` used to keep the YAML scanner busy for about 90 s before its
    /// recursion limit answered; the nesting bound refuses it in one pass.
    #[test]
    fn refuses_deep_flow_nesting_before_parsing() {
        let text = format!("name: deep\nmounts: {}", "[".repeat(240_000));
        let problems = Crew::parse("crews/deep/crew.yaml", "/crew/crew.yaml", &text).unwrap_err();
        assert_eq!(
            problems.to_string(),
            "invalid crew `crews/deep/crew.yaml`: line 2 nests flow collections (`[…]`, `{…}`) more than 64 deep, the most a crew file may; write that part as indented YAML, or nest it less"
        );
        let text = format!("mounts: [/src]\nagents: {}{}\n", "[".repeat(64), "]".repeat(64));
        assert_eq!(Crew::parse("crew.yaml", "/crew/crew.yaml", &text).unwrap().mounts().len(), 1);
    }

    /// A reserved root is the runner's: the refusal says what it serves there, and the hint
    /// does not suggest mounting it (that is refused too).
    #[test]
    fn refuses_reserved_roots_saying_what_they_are() {
        let text = "mounts: [/crew, /crews/x, /crews-2, /script, /llm-logs, /crew2]\n";
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", text).unwrap_err();
        let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "invalid crew mount `/crew` in `crew.yaml`: `/crew` is where the runner serves the crew's own directory, read-only; a crew cannot name a reserved root in `mounts:`",
                "invalid crew mount `/crews/x` in `crew.yaml`: `/crews` is where the daemon mounts the hosted crews' directories, each hidden from the other crews; a crew cannot name a reserved root in `mounts:`",
                "invalid crew mount `/crews-2` in `crew.yaml`: `/crews-2` is where the daemon mounts the hosted crews' directories, each hidden from the other crews; a crew cannot name a reserved root in `mounts:`",
                "invalid crew mount `/script` in `crew.yaml`: `/script` is kept for the runner's own use; a crew cannot name a reserved root in `mounts:`",
                "invalid crew mount `/llm-logs` in `crew.yaml`: `/llm-logs` is the internal exchange log (`--llm-log`), which agents never see; a crew cannot name a reserved root in `mounts:`",
            ]
        );
        let hints: Vec<String> = problems.iter().filter_map(HostError::hint).collect();
        assert_eq!(hints[0], "drop the entry: every crew sees its own directory at `/crew` without listing it");
        assert_eq!(
            hints[4],
            "drop the entry, or list a root of the crew's own, like `/llm-logs-files`, and provide it with --mount or the settings file"
        );
    }

    #[test]
    fn refuses_a_mounts_block_that_is_not_a_list() {
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", "mounts: /src\n").unwrap_err();
        assert_eq!(
            problems.to_string(),
            "invalid crew `crew.yaml`: `mounts:` is a list of `/root` or `<ulid>|/root` entries"
        );
    }
}
