//! Crew definitions: the part of a crew file the service needs, its `name:` and its
//! `mounts:` block.
//!
//! The crew format belongs to the crew framework, so this module reads only those two keys and
//! skips every other as the parser reads it, never rejecting one. Skipped, not kept: a YAML
//! alias under a skipped key is never expanded (`serde::de::IgnoredAny`), where the whole file
//! kept as a YAML value expanded every one (a 220 KB file aliasing one anchor of 50,000 items
//! 40,000 times grew past 4 GB). The file is read beneath its directory's handle with the
//! operator's ambient authority (`launch::read_crew`), a link followed only while it stays
//! inside: exactly what the agents see at `/crew/<file>`.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
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

/// A crew file's `name:` key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CrewNameKey {
    /// No `name:` key.
    #[default]
    Absent,
    /// A string.
    Text(String),
    /// Something else (a number, a list, a mapping).
    NotText,
}

/// A crew definition.
#[derive(Debug, Clone)]
pub struct Crew {
    path: String,
    name: CrewNameKey,
    mounts: Vec<CrewMount>,
}

/// The most entries a `mounts:` block may list: far more roots than a crew needs, few enough
/// that every refusal is one line the operator reads.
const MAX_MOUNTS: usize = 256;

/// The longest `mounts:` entry read: a ULID, `|` and the longest root a virtual path allows.
const MAX_ENTRY: usize = 26 + 1 + vfs::MAX_PATH_BYTES;

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
        let fail = |reason: String| Problems::from(HostError::CrewParse { path: path.to_owned(), reason });
        let read = serde_norway::from_str::<TopLevel>(text).map_err(|error| fail(one_line(&error.to_string())))?;
        let (name, mounts) = match read {
            TopLevel::Mapping { name, mounts } => (name, mounts),
            TopLevel::Other { empty: true } => (CrewNameKey::Absent, MountsKey::Absent),
            TopLevel::Other { empty: false } => {
                return Err(fail("a crew file is a YAML mapping (keys such as `mounts:`)".to_owned()));
            }
        };
        let entries = match mounts {
            MountsKey::Absent => Vec::new(),
            MountsKey::List(entries) => entries,
            MountsKey::NotList => {
                return Err(fail("`mounts:` is a list of `/root` or `<ulid>|/root` entries".to_owned()));
            }
        };
        let mut problems = Vec::new();
        let mut mounts: Vec<CrewMount> = Vec::new();
        for text in entries {
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
        Ok(Self { path: virtual_path.to_owned(), name, mounts })
    }

    /// The virtual path the definition was read from, like `/crew/crew.yaml`.
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The `name:` key.
    #[must_use]
    pub fn name_key(&self) -> &CrewNameKey {
        &self.name
    }

    /// The roots the crew needs.
    #[must_use]
    pub fn mounts(&self) -> &[CrewMount] {
        &self.mounts
    }
}

/// A visitor's answer to a bool or a number: one value for all four (each visitor says which).
macro_rules! other_scalars {
    ($value:ty, $answer:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$value, E> {
            Ok($answer)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$value, E> {
            Ok($answer)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$value, E> {
            Ok($answer)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$value, E> {
            Ok($answer)
        }
    };
}

/// What the parser reads of the file: a mapping's `name:` and `mounts:`, or what else it is.
enum TopLevel {
    Mapping {
        name: CrewNameKey,
        mounts: MountsKey,
    },
    /// Empty, `~`, or anything but a mapping (`mounts` alone, a list): refused unless empty.
    Other {
        empty: bool,
    },
}

/// A crew file's `mounts:` key.
#[derive(Default)]
enum MountsKey {
    #[default]
    Absent,
    /// Its entries, each a string (a number or a word is read as its text).
    List(Vec<String>),
    NotList,
}

/// A key of the file's mapping: only `name` and `mounts` matter.
enum Key {
    Name,
    Mounts,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "name" => Key::Name,
                    "mounts" => Key::Mounts,
                    _ => Key::Other,
                })
            }
            other_scalars!(Key, Key::Other);
            fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
                Ok(Key::Other)
            }
        }
        // A key is a scalar: a list or a mapping as a key is refused (no crew writes one) rather
        // than walked, so that no alias is expanded for a key.
        deserializer.deserialize_any(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TopVisitor;
        impl<'de> Visitor<'de> for TopVisitor {
            type Value = TopLevel;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a YAML mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
                let (mut name, mut mounts) = (None, None);
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Name if name.is_some() => return Err(de::Error::custom("the key `name:` is given twice")),
                        Key::Mounts if mounts.is_some() => {
                            return Err(de::Error::custom("the key `mounts:` is given twice"));
                        }
                        Key::Name => name = Some(map.next_value::<NameValue>()?.0),
                        Key::Mounts => mounts = Some(map.next_value::<MountsKey>()?),
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(TopLevel::Mapping { name: name.unwrap_or_default(), mounts: mounts.unwrap_or_default() })
            }
            fn visit_unit<E: de::Error>(self) -> Result<TopLevel, E> {
                Ok(TopLevel::Other { empty: true })
            }
            fn visit_none<E: de::Error>(self) -> Result<TopLevel, E> {
                Ok(TopLevel::Other { empty: true })
            }
            other_scalars!(TopLevel, TopLevel::Other { empty: false });
            fn visit_str<E: de::Error>(self, _: &str) -> Result<TopLevel, E> {
                Ok(TopLevel::Other { empty: false })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TopLevel, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(TopLevel::Other { empty: false })
            }
        }
        deserializer.deserialize_any(TopVisitor)
    }
}

/// The value of `name:`.
struct NameValue(CrewNameKey);

impl<'de> Deserialize<'de> for NameValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl<'de> Visitor<'de> for NameVisitor {
            type Value = NameValue;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<NameValue, E> {
                Ok(NameValue(CrewNameKey::Text(name.to_owned())))
            }
            other_scalars!(NameValue, NameValue(CrewNameKey::NotText));
            fn visit_unit<E: de::Error>(self) -> Result<NameValue, E> {
                Ok(NameValue(CrewNameKey::NotText))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NameValue, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(NameValue(CrewNameKey::NotText))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NameValue, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(NameValue(CrewNameKey::NotText))
            }
        }
        deserializer.deserialize_any(NameVisitor)
    }
}

impl<'de> Deserialize<'de> for MountsKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MountsVisitor;
        impl<'de> Visitor<'de> for MountsVisitor {
            type Value = MountsKey;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a list of `/root` or `<ulid>|/root` entries")
            }
            fn visit_unit<E: de::Error>(self) -> Result<MountsKey, E> {
                Ok(MountsKey::Absent)
            }
            other_scalars!(MountsKey, MountsKey::NotList);
            fn visit_str<E: de::Error>(self, _: &str) -> Result<MountsKey, E> {
                Ok(MountsKey::NotList)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MountsKey, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MountsKey::NotList)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MountsKey, A::Error> {
                let mut entries = Vec::new();
                while let Some(Entry(text)) = seq.next_element::<Entry>()? {
                    if entries.len() == MAX_MOUNTS {
                        return Err(de::Error::custom(format!(
                            "more than {MAX_MOUNTS} entries, more roots than a crew needs;"
                        )));
                    }
                    entries.push(text);
                }
                Ok(MountsKey::List(entries))
            }
        }
        deserializer.deserialize_any(MountsVisitor)
    }
}

/// One entry of `mounts:`: a scalar's text, at most [`MAX_ENTRY`] bytes.
struct Entry(String);

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl Visitor<'_> for EntryVisitor {
            type Value = Entry;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an entry `/root` or `<ulid>|/root`")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Entry, E> {
                if text.len() > MAX_ENTRY {
                    return Err(E::custom(format!(
                        "a `mounts:` entry of {} bytes; an entry is `/root` or `<ulid>|/root`",
                        text.len()
                    )));
                }
                Ok(Entry(text.to_owned()))
            }
        }
        // A string only: a list or a mapping in `mounts:` is refused where it stands, never
        // walked (an alias there is not expanded).
        deserializer.deserialize_str(EntryVisitor)
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
        assert_eq!(crew.name_key(), &CrewNameKey::Text("review".to_owned()));
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

    /// The framework's keys are skipped unread, their aliases unexpanded: one anchor of 50,000
    /// items aliased 40,000 times (220 KB) grew past 4 GB when the file was kept whole.
    #[test]
    fn aliases_under_the_frameworks_keys_are_never_expanded() {
        let text = format!("a: &a [{}]\nb: [{}]\nmounts: [/src]\n", "x,".repeat(50_000), "*a,".repeat(40_000));
        let crew = Crew::parse("crew.yaml", "/crew/crew.yaml", &text).unwrap();
        assert_eq!(crew.mounts().len(), 1);
        assert_eq!(crew.name_key(), &CrewNameKey::Absent);
        // In `mounts:`, an alias of a list is refused where it stands.
        let text = format!("a: &a [{}]\nmounts: [{}]\n", "x,".repeat(50_000), "*a,".repeat(40_000));
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", &text).unwrap_err();
        assert_eq!(
            problems.to_string(),
            "invalid crew `crew.yaml`: mounts[0]: invalid type: sequence, expected an entry `/root` or `<ulid>|/root` at line 1 column 4"
        );
        // An alias of a short string is read, up to the most entries a crew lists.
        let text = format!("s: &s /src\nmounts: [{}]\n", "*s,".repeat(40_000));
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", &text).unwrap_err();
        assert_eq!(
            problems.to_string(),
            "invalid crew `crew.yaml`: mounts: more than 256 entries, more roots than a crew needs; at line 2 column 9"
        );
    }

    #[test]
    fn an_empty_file_needs_no_roots_and_a_key_given_twice_is_refused() {
        let crew = Crew::parse("crew.yaml", "/crew/crew.yaml", "").unwrap();
        assert_eq!((crew.mounts().len(), crew.name_key()), (0, &CrewNameKey::Absent));
        let problems = Crew::parse("crew.yaml", "/crew/crew.yaml", "mounts: [/a]\nmounts: [/b]\n").unwrap_err();
        assert_eq!(problems.to_string(), "invalid crew `crew.yaml`: the key `mounts:` is given twice");
        let crew = Crew::parse("crew.yaml", "/crew/crew.yaml", "name: ~\n").unwrap();
        assert_eq!(crew.name_key(), &CrewNameKey::NotText);
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
