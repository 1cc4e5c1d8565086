//! Name rules: secrets hidden, `.git` read-only, in every agent-facing mount.
//!
//! Mount a project and its `.env`, private keys and cloud credentials come with it, and a
//! writable `.git/` lets an agent plant a hook that runs the next time a person uses git. A
//! name rule is a glob on names (`*.key`, `.env.*`) or on a short run of names
//! (`.docker/config.json`), matched against every component of the canonical path that
//! resolution reached (`docs/design.md`, rule 5), so no spelling (`./`, `..`, `//`, a link
//! from outside the rule) gets around it. A path with a hidden component is absent to agents:
//! a read, an info, an edit, a move or a delete of it is answered like a missing file, walks
//! skip it without opening it, and creating such a name is refused with the rule's class,
//! never the rule. A path with a read-only component may be read, never changed.
//!
//! Because a rule is about names, not places, a move keeps what it protects protected: a
//! directory moved elsewhere still holds `a.key`, still hidden. A delete is the one change that
//! could reach a protected name through a visible one, so deleting a directory that holds one
//! is refused. The rules apply to agents only; the exchange logger's capability never sees
//! them.
//!
//! Names are compared regardless of ASCII case, so that on a case-insensitive disk (macOS, a
//! casefolded directory, a FAT or SMB mount) no spelling of `.env` opens it; on a
//! case-sensitive disk a rule also covers `.ENV`, a different file, which errs on the side of
//! hiding. For the same reason names are judged in one Unicode normalization, NFC: a rule and
//! every name it is matched against (as the agent wrote it, or as the disk holds it) are
//! folded to NFC first, so that `café` written with a combining accent (NFD, as macOS and many
//! archives write it) is the `café` of the rule. An ASCII name is NFC already and is judged as
//! it is, without a copy.
//!
//! `**` stands for any number of names, as in gitignore: `a/**/b` is `b` anywhere below an
//! `a`, `**/x` is `x` anywhere. A trailing `/**` (`notes/**`) also covers `notes` itself,
//! which gitignore leaves out: a directory whose content is hidden would otherwise stand
//! there empty, its timestamps and the refusals of what an agent tries in it telling that
//! something is inside. What a rule hides or keeps read-only, it does with everything inside.
//!
//! A rule written in a mount string (`--mount "./proj:/p:rw;**/*.key:hidden;secrets:hidden"`)
//! is about places instead: it is anchored at that mount's root and matched against the whole
//! path from there (`**` crosses directories). Since a place can be carried elsewhere, a move
//! of a directory is refused when a protection inside it would not hold at the destination
//! (the same holds for name rules spanning several names, like `.docker/config.json`).
//!
//! A mount string may loosen a read-only name rule at one place of its mount: an override that
//! grants writes where the rule holds (`;.git:rw`) lifts the rule at and below that place, in
//! that mount only, so an agent can commit there. A hidden name cannot be loosened: an override
//! that grants writes inside one is refused at launch.
//!
//! git also takes a directory under any name for a repository when it holds `HEAD` beside
//! `objects` and `refs` (or beside `commondir`). Where the default `.git` rule holds, the
//! operations refuse to make one (`Context::guard_git_directory`); this module only says where
//! that is ([`NamePolicy::guards_git_directories`]).

use std::borrow::Cow;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use unicode_normalization::{IsNormalized, UnicodeNormalization as _, is_nfc_quick};

use crate::spec::Rights;

/// What a rule does to the names it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleEffect {
    /// Absent to agents.
    Hidden,
    /// Readable, never changed.
    ReadOnly,
}

impl RuleEffect {
    /// `hidden` or `read-only`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RuleEffect::Hidden => "hidden",
            RuleEffect::ReadOnly => "read-only",
        }
    }
}

/// One name rule, as the operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameRule {
    /// The glob, like `*.key` or `.docker/config.json`.
    pub glob: String,
    /// Globs of names this rule leaves alone, like `*.pub` for private keys.
    pub except: Vec<String>,
    /// What it does.
    pub effect: RuleEffect,
    /// What it protects, in words an agent may read (`private keys`), never the glob.
    pub class: String,
    /// Why the rule exists, for the operator's documentation.
    pub reason: String,
    /// Where it came from (`default`, `--hide`, `settings …`, `--mount /p`).
    pub origin: String,
    /// The mount root a mount-string rule is anchored at (the glob matches the path from
    /// there); `None` for a name rule, which holds in every agent-facing mount.
    pub scope: Option<String>,
}

impl NameRule {
    fn new(glob: &str, except: &[&str], effect: RuleEffect, class: &str, reason: &str) -> Self {
        Self {
            glob: glob.to_owned(),
            except: except.iter().map(|&text| text.to_owned()).collect(),
            effect,
            class: class.to_owned(),
            reason: reason.to_owned(),
            origin: "default".to_owned(),
            scope: None,
        }
    }

    /// A rule of the operator's (`--hide GLOB`, a settings file's `hide`).
    #[must_use]
    pub fn hide(glob: &str, origin: &str) -> Self {
        Self {
            glob: glob.to_owned(),
            except: Vec::new(),
            effect: RuleEffect::Hidden,
            class: "names the operator hides".to_owned(),
            reason: "the operator's rule".to_owned(),
            origin: origin.to_owned(),
            scope: None,
        }
    }

    /// A rule written in the mount string of the mount at `root` (`;**/*.key:hidden`,
    /// `;docs/*.md:ro`), anchored at that root.
    #[must_use]
    pub fn in_mount(glob: &str, effect: RuleEffect, root: &str) -> Self {
        let class = match effect {
            RuleEffect::Hidden => "names the operator hides",
            RuleEffect::ReadOnly => "paths the operator keeps read-only",
        };
        Self {
            glob: glob.to_owned(),
            except: Vec::new(),
            effect,
            class: class.to_owned(),
            reason: "the operator's rule".to_owned(),
            origin: format!("--mount {root}"),
            scope: Some(root.to_owned()),
        }
    }

    /// The default rules, on unless the operator turns them off (`--no-default-hide`).
    #[must_use]
    pub fn defaults() -> Vec<Self> {
        use RuleEffect::{Hidden, ReadOnly};
        let env = "environment files";
        let keys = "private keys";
        let credentials = "credentials";
        let env_reason = "environment files hold API keys and passwords; the checked-in templates stay visible";
        let key_reason = "private keys (TLS, SSH); public keys stay visible";
        vec![
            NameRule::new(".env", &[], Hidden, env, env_reason),
            NameRule::new(".env.*", &[".env.example", ".env.sample", ".env.template"], Hidden, env, env_reason),
            NameRule::new("*.pem", &[], Hidden, keys, key_reason),
            NameRule::new("*.key", &[], Hidden, keys, key_reason),
            NameRule::new("id_rsa*", &["*.pub"], Hidden, keys, key_reason),
            NameRule::new("id_ed25519*", &["*.pub"], Hidden, keys, key_reason),
            NameRule::new("id_ecdsa*", &["*.pub"], Hidden, keys, key_reason),
            NameRule::new("id_dsa*", &["*.pub"], Hidden, keys, key_reason),
            NameRule::new(".ssh", &[], Hidden, credentials, "SSH keys, known hosts and configuration"),
            NameRule::new(".aws", &[], Hidden, credentials, "AWS credentials and configuration"),
            NameRule::new(".netrc", &[], Hidden, credentials, "passwords for FTP, HTTP and git hosts"),
            NameRule::new(".git-credentials", &[], Hidden, credentials, "git's stored passwords and tokens"),
            NameRule::new(".pypirc", &[], Hidden, credentials, "PyPI upload tokens"),
            NameRule::new(".npmrc", &[], Hidden, credentials, "npm registry tokens"),
            NameRule::new(".docker/config.json", &[], Hidden, credentials, "container registry logins"),
            NameRule::new(
                ".git",
                &[],
                ReadOnly,
                "git metadata",
                "a hook or config planted in .git runs the next time a person uses git",
            ),
        ]
    }
}

/// A glob of the rules that cannot be compiled or cannot match a name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the name rule `{}` is not valid: {}",
    crate::text::escape_controls(glob),
    crate::text::escape_controls(reason)
)]
pub struct RuleError {
    /// The glob as given.
    pub glob: String,
    /// Why.
    pub reason: String,
}

/// A name rule lifted at one place of one mount by an override of its mount string that grants
/// writes there (`;.git:rw`), as the operator sees it (`vfs mounts`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loosening {
    /// The virtual path at and below which the rule does not hold, like `/p/.git`.
    pub place: String,
    /// The loosened rule's glob, like `.git`.
    pub glob: String,
    /// The loosened rule's class, like `git metadata`.
    pub class: String,
    /// The override's rights there.
    pub rights: Rights,
    /// Where the loosening came from: `loosened by the mount string of /p`.
    pub origin: String,
}

/// `name` in Unicode normalization form C, the form exceptions are judged in: borrowed when it
/// is in NFC already, as every ASCII name is.
pub(crate) fn nfc(name: &str) -> Cow<'_, str> {
    if name.is_ascii() || is_nfc_quick(name.chars()) == IsNormalized::Yes {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(name.nfc().collect())
    }
}

/// `text` (a name, a path or a rule's glob) in the form rules are judged in, which ignore ASCII
/// case: NFC, with the ASCII letters of a name past ASCII in lower case while it is decomposed,
/// so that an accented letter folds as its base letter does (`CAFÉ`, and `CAFE` with a
/// combining accent, are `café`). Borrowed for ASCII, the fast path of a listing: no copy, no
/// table lookup.
pub(crate) fn folded(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(text.nfd().map(|character| character.to_ascii_lowercase()).nfc().collect())
    }
}

/// True when two names are one place on a disk that ignores case and Unicode normalization
/// (macOS, a casefolded directory, a FAT or SMB mount), as far as rules see it: how
/// protections are read.
pub(crate) fn same_name(first: &str, second: &str) -> bool {
    if first.is_ascii() && second.is_ascii() {
        first.eq_ignore_ascii_case(second)
    } else {
        folded(first).eq_ignore_ascii_case(&folded(second))
    }
}

/// One rule, as judgements read it.
#[derive(Debug)]
struct Compiled {
    effect: RuleEffect,
    class: String,
}

/// The compiled rules.
#[derive(Debug, Default)]
pub(crate) struct NamePolicy {
    rules: Vec<NameRule>,
    compiled: Vec<Compiled>,
    /// The rules' glob sets, compiled once, when first needed (see [`Matchers`]).
    matchers: Matchers,
    /// True when a rule is anchored at the mount root or spans any number of names.
    whole_paths: bool,
    /// The longest span.
    longest: usize,
    /// What the last name of a path must look like for any rule to match it.
    could: Prefilter,
    /// The places of this mount (its overrides' paths, as written) where name rules are lifted,
    /// each with the rules' indices in `compiled`.
    loosened: Vec<(Vec<String>, Vec<usize>)>,
    /// The index of the default `.git` rule, when it is among the rules: it also keeps an agent
    /// from making a git directory under another name (`Context::guard_git_directory`).
    git: Option<usize>,
}

/// The glob sets of a policy's rules, compiled from the parsed globs the first time a name is
/// judged or when [`NamePolicy::compile`] asks. Every glob was parsed when the policy was made
/// (a malformed rule is refused at once); what is left is turning the sets into automata,
/// which for the default rules is most of a launch's own time (about 1.3 ms of 1.7 ms in
/// `vfs serve`, before its first answer). A server may have it done on another thread while it
/// starts ([`MountRegistryBuilder::defer_name_rules`](crate::MountRegistryBuilder::defer_name_rules));
/// a judgement made meanwhile waits for it.
#[derive(Debug, Default)]
struct Matchers {
    pending: Pending,
    built: std::sync::OnceLock<Result<Sets, RuleError>>,
}

/// The parsed globs, in the sets they are compiled into.
#[derive(Debug, Default)]
struct Pending {
    spans: Vec<(usize, GlobSetBuilder, Vec<usize>)>,
    deep: Option<(GlobSetBuilder, Vec<usize>)>,
    anchored: Option<(GlobSetBuilder, Vec<usize>)>,
    /// Each rule's exceptions, with the rule's glob (named when they cannot be compiled).
    excepts: Vec<Option<(GlobSetBuilder, String)>>,
}

/// The compiled sets, each glob with its index in `compiled`.
#[derive(Debug)]
struct Sets {
    /// One set per span.
    spans: Vec<(usize, GlobSet, Vec<usize>)>,
    /// The name rules with a `**` inside (`a/**/b`), which span any number of names: matched
    /// as `**/<rule>` against the path from the mount's root.
    deep: Option<(GlobSet, Vec<usize>)>,
    /// The rules anchored at the mount root.
    anchored: Option<(GlobSet, Vec<usize>)>,
    /// Each rule's exceptions: names its glob matches that it lets pass.
    excepts: Vec<Option<GlobSet>>,
}

impl Matchers {
    fn get(&self) -> &Result<Sets, RuleError> {
        self.built.get_or_init(|| {
            let pending = &self.pending;
            let pair =
                |(set, indices): &(GlobSetBuilder, Vec<usize>)| build_set(set, "").map(|set| (set, indices.clone()));
            Ok(Sets {
                spans: pending
                    .spans
                    .iter()
                    .map(|(span, set, indices)| build_set(set, "").map(|set| (*span, set, indices.clone())))
                    .collect::<Result<_, _>>()?,
                deep: pending.deep.as_ref().map(pair).transpose()?,
                anchored: pending.anchored.as_ref().map(pair).transpose()?,
                excepts: pending
                    .excepts
                    .iter()
                    .map(|except| except.as_ref().map(|(set, glob)| build_set(set, glob)).transpose())
                    .collect::<Result<_, _>>()?,
            })
        })
    }
}

/// A cheap test that most names fail: the last name of each rule as a literal, a prefix or a
/// suffix, else "anything" (then every name takes the glob sets). A listing asks it once per
/// entry, so it must cost far less than a glob match. Like the rules, it ignores ASCII case.
#[derive(Debug)]
struct Prefilter {
    literals: Vec<String>,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
    anything: bool,
    /// The first bytes of the literals and prefixes, and the last bytes of the suffixes, in
    /// both cases: a name that starts and ends with none of them is settled by two lookups.
    first: [bool; 256],
    last: [bool; 256],
}

impl Default for Prefilter {
    fn default() -> Self {
        Self {
            literals: Vec::new(),
            prefixes: Vec::new(),
            suffixes: Vec::new(),
            anything: false,
            first: [false; 256],
            last: [false; 256],
        }
    }
}

/// Marks `byte` in `table` in both ASCII cases.
fn mark(table: &mut [bool; 256], byte: u8) {
    table[usize::from(byte.to_ascii_lowercase())] = true;
    table[usize::from(byte.to_ascii_uppercase())] = true;
}

impl Prefilter {
    fn add(&mut self, glob: &str) {
        let last = glob.rsplit('/').next().unwrap_or(glob);
        let wild = |text: &str| text.contains(['*', '?', '[', ']', '{', '}', '\\']);
        if !wild(last) {
            mark(&mut self.first, last.as_bytes()[0]);
            self.literals.push(last.to_owned());
        } else if let Some(prefix) = last.strip_suffix('*').filter(|prefix| !wild(prefix) && !prefix.is_empty()) {
            mark(&mut self.first, prefix.as_bytes()[0]);
            self.prefixes.push(prefix.to_owned());
        } else if let Some(suffix) = last.strip_prefix('*').filter(|suffix| !wild(suffix) && !suffix.is_empty()) {
            mark(&mut self.last, suffix.as_bytes()[suffix.len() - 1]);
            self.suffixes.push(suffix.to_owned());
        } else {
            self.anything = true;
        }
    }

    fn could_match(&self, name: &str) -> bool {
        let bytes = name.as_bytes();
        let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else { return false };
        if !(self.anything || self.first[usize::from(first)] || self.last[usize::from(last)]) {
            return false;
        }
        let equal_at = |text: &str, at: usize| {
            bytes.get(at..at + text.len()).is_some_and(|part| part.eq_ignore_ascii_case(text.as_bytes()))
        };
        self.anything
            || (self.last[usize::from(last)]
                && self
                    .suffixes
                    .iter()
                    .any(|suffix| bytes.len() >= suffix.len() && equal_at(suffix, bytes.len() - suffix.len())))
            || (self.first[usize::from(first)]
                && (self.prefixes.iter().any(|prefix| equal_at(prefix, 0))
                    || self.literals.iter().any(|literal| literal.len() == bytes.len() && equal_at(literal, 0))))
    }
}

/// The longest run of names a rule may span (`**` aside).
const MAX_SPAN: usize = 4;

/// True when `text` holds a glob's special characters (else it is a literal path).
pub(crate) fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '[', '{'])
}

/// A glob as it is matched: in NFC (and [`folded`] with `fold`), and without a trailing `/**`,
/// since what a rule hides or keeps read-only it does with everything inside (`notes/**` is
/// `notes` and all it holds).
fn stem(text: &str, fold: bool) -> String {
    let text = if fold { folded(text) } else { nfc(text) };
    let mut stem: &str = &text;
    while let Some(shorter) = stem.strip_suffix("/**").filter(|shorter| !shorter.is_empty()) {
        stem = shorter;
    }
    stem.to_owned()
}

/// The shape of a name rule's glob: the pattern it matches ([`folded`] for a rule, in NFC for an
/// exception; without a leading `**/` or a trailing `/**`) and how many names it spans, `None`
/// when a `**` lets it span any number.
struct Shape {
    pattern: String,
    span: Option<usize>,
}

/// A name rule's glob; `fold` makes it ignore ASCII case (rules do; their exceptions do not,
/// so that `.ENV.EXAMPLE` next to `.env.example` on a case-sensitive disk stays hidden).
fn glob(text: &str, fold: bool) -> Result<(globset::Glob, Shape), RuleError> {
    let fail = |reason: &str| RuleError { glob: text.to_owned(), reason: reason.to_owned() };
    if text.is_empty() {
        return Err(fail("it is empty"));
    }
    if text.len() > 1024 {
        return Err(fail("it is longer than 1024 bytes"));
    }
    let stemmed = stem(text, fold);
    let pattern = stemmed.strip_prefix("**/").unwrap_or(&stemmed);
    // A rule is judged on runs of as many names as it has parts, so an alternative may not
    // change the count: `{a/b,c}` would never hide a bare `c`.
    if slash_in_alternative(pattern) {
        return Err(fail("a `{…}` alternative cannot hold a `/`; write one rule for each alternative"));
    }
    if pattern.starts_with('/') || pattern.ends_with('/') {
        return Err(fail("a name rule matches names anywhere, like `*.key` or `.docker/config.json`; drop the `/`"));
    }
    let names: Vec<&str> = pattern.split('/').collect();
    if names.iter().any(|name| name.is_empty() || *name == "." || *name == "..") {
        return Err(fail("each part is a name, a glob of one name or `**` (no empty, `.` or `..` parts)"));
    }
    if names.iter().filter(|name| **name != "**").count() > MAX_SPAN {
        return Err(fail("it spans more than 4 names"));
    }
    // Any `**` (a part, or one globset reads inside a `{…}`) may span names: such a rule is
    // matched against the whole path, which is right for every rule, only slower.
    let span = (!pattern.contains("**")).then_some(names.len());
    let matched = if span.is_some() { pattern.to_owned() } else { format!("**/{pattern}") };
    let glob = GlobBuilder::new(&matched)
        .literal_separator(true)
        .case_insensitive(fold)
        .build()
        .map_err(|error| fail(&error.kind().to_string()))?;
    Ok((glob, Shape { pattern: pattern.to_owned(), span }))
}

/// True when a `/` stands inside a `{…}` group of `text`, read as globset reads it: a `[…]`
/// class is one character whatever it holds (a `]` first in it, or after `!` or `^`, is
/// part of it), and `\\` escapes the next character.
fn slash_in_alternative(text: &str) -> bool {
    let mut depth = 0usize;
    let mut characters = text.chars().peekable();
    while let Some(character) = characters.next() {
        match character {
            '\\' => {
                characters.next();
            }
            '[' => {
                if characters.peek().is_some_and(|next| matches!(next, '!' | '^')) {
                    characters.next();
                }
                if characters.peek() == Some(&']') {
                    characters.next();
                }
                for inside in characters.by_ref() {
                    if inside == ']' {
                        break;
                    }
                }
            }
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            '/' if depth > 0 => return true,
            _ => {}
        }
    }
    false
}

/// A mount-string rule's glob, matched against the whole path from the mount's root: `*`
/// stays within one name, `**` crosses any number (a trailing `/**` covers the directory
/// itself too); a path without glob characters is taken literally, and `\` is a character of
/// a name, never an escape (write `[*]` for a literal `*`). Matched on [`folded`] paths.
pub(crate) fn anchored_glob(text: &str) -> Result<globset::Glob, RuleError> {
    anchored(text).map(|(glob, _)| glob)
}

/// [`anchored_glob`], and the text the prefilter looks at ([`folded`], unescaped).
fn anchored(text: &str) -> Result<(globset::Glob, String), RuleError> {
    let fail = |reason: &str| RuleError { glob: text.to_owned(), reason: reason.to_owned() };
    if text.is_empty() {
        return Err(fail("it is empty"));
    }
    if text.len() > 1024 {
        return Err(fail("it is longer than 1024 bytes"));
    }
    if text.starts_with('/') {
        return Err(fail("it must be relative to the mount root"));
    }
    if text.split('/').any(|name| name.is_empty() || name == "." || name == "..") {
        return Err(fail("it must be canonical (no empty, `.` or `..` segments)"));
    }
    let stemmed = stem(text, true);
    let pattern = if is_glob(text) { stemmed.clone() } else { globset::escape(&stemmed) };
    let glob = GlobBuilder::new(&pattern)
        .literal_separator(true)
        .case_insensitive(true)
        .backslash_escape(false)
        .build()
        .map_err(|error| fail(&error.kind().to_string()))?;
    Ok((glob, stemmed))
}

/// Runs `judge` on `names` [`folded`]: on `names` themselves when all are ASCII, as nearly every
/// path is (no copy).
fn with_keys<R>(names: &[&str], judge: impl FnOnce(&[&str]) -> R) -> R {
    if names.iter().all(|name| name.is_ascii()) {
        return judge(names);
    }
    let keys: Vec<Cow<'_, str>> = names.iter().map(|name| folded(name)).collect();
    let keys: Vec<&str> = keys.iter().map(AsRef::as_ref).collect();
    judge(&keys)
}

fn build_set(set: &GlobSetBuilder, glob: &str) -> Result<GlobSet, RuleError> {
    set.build().map_err(|error| RuleError { glob: glob.to_owned(), reason: error.to_string() })
}

/// A set of globs, each with its index in `compiled`, kept only when it holds any.
fn finish(set: GlobSetBuilder, indices: Vec<usize>) -> Option<(GlobSetBuilder, Vec<usize>)> {
    (!indices.is_empty()).then_some((set, indices))
}

impl NamePolicy {
    /// Parses `rules` and groups them for compiling: name rules into one glob set per span
    /// (and one for those a `**` lets span any number of names), anchored rules (those with a
    /// scope) into one set matched against the path from the mount's root. The sets are
    /// compiled when first needed ([`Matchers`]); [`NamePolicy::compile`] does it at once.
    pub(crate) fn new(rules: Vec<NameRule>) -> Result<Self, RuleError> {
        let mut compiled = Vec::with_capacity(rules.len());
        let mut excepts = Vec::with_capacity(rules.len());
        let mut by_span: Vec<(usize, GlobSetBuilder, Vec<usize>)> = Vec::new();
        let mut deep = (GlobSetBuilder::new(), Vec::new());
        let mut anchored = (GlobSetBuilder::new(), Vec::new());
        let mut could = Prefilter::default();
        for (index, rule) in rules.iter().enumerate() {
            excepts.push(if rule.except.is_empty() {
                None
            } else {
                let mut set = GlobSetBuilder::new();
                for text in &rule.except {
                    set.add(glob(text, false)?.0);
                }
                Some((set, rule.glob.clone()))
            });
            compiled.push(Compiled { effect: rule.effect, class: rule.class.clone() });
            if rule.scope.is_some() {
                let (matcher, text) = self::anchored(&rule.glob)?;
                anchored.0.add(matcher);
                anchored.1.push(index);
                could.add(&text);
                continue;
            }
            let (matcher, shape) = glob(&rule.glob, true)?;
            could.add(&shape.pattern);
            let Some(span) = shape.span else {
                deep.0.add(matcher);
                deep.1.push(index);
                continue;
            };
            if let Some((_, set, indices)) = by_span.iter_mut().find(|(each, _, _)| *each == span) {
                set.add(matcher);
                indices.push(index);
            } else {
                let mut set = GlobSetBuilder::new();
                set.add(matcher);
                by_span.push((span, set, vec![index]));
            }
        }
        let longest = by_span.iter().map(|(span, _, _)| *span).max().unwrap_or(0);
        let deep = finish(deep.0, deep.1);
        let anchored = finish(anchored.0, anchored.1);
        let whole_paths = deep.is_some() || anchored.is_some();
        let git = rules.iter().position(|rule| rule.origin == "default" && rule.glob == ".git" && rule.scope.is_none());
        let pending = Pending { spans: by_span, deep, anchored, excepts };
        let matchers = Matchers { pending, built: std::sync::OnceLock::new() };
        Ok(Self { rules, compiled, matchers, whole_paths, longest, could, loosened: Vec::new(), git })
    }

    /// Compiles the rules' glob sets now, if nothing has yet; an error names a rule set too
    /// large to compile. Until it has succeeded, no judgement lets a name pass that a rule
    /// could match (see [`NamePolicy::matches`]).
    pub(crate) fn compile(&self) -> Result<(), RuleError> {
        self.matchers.get().as_ref().map(drop).map_err(Clone::clone)
    }

    /// Makes this policy's sets a failed compile, for the tests of what such a policy allows.
    #[cfg(test)]
    pub(crate) fn fail_compile_for_test(&self) {
        let failure = RuleError { glob: String::new(), reason: "compiled regex exceeds size limit".to_owned() };
        let _ = self.matchers.built.set(Err(failure));
    }

    /// Lifts the name rules `rules` (indices into the rules this policy was built from) at and
    /// below `place`, a path from the mount's root compared exactly as written: the loosening an
    /// override of the mount string asked for (`;.git:rw`).
    pub(crate) fn loosen(&mut self, place: Vec<String>, rules: Vec<usize>) {
        self.loosened.push((place, rules));
    }

    /// The rules this policy was built from.
    pub(crate) fn rules(&self) -> &[NameRule] {
        &self.rules
    }

    /// How deep below a directory a move must look for protections that would not survive
    /// it: the names that rules spanning several names could join with the directory's own
    /// path, or every depth when a rule is anchored at the mount root or spans any number of
    /// names. Zero: a move keeps every protection (each rule looks at one name, and names
    /// travel with the move).
    pub(crate) fn move_depth(&self) -> usize {
        if self.whole_paths { usize::MAX } else { self.longest.saturating_sub(1) }
    }

    /// What the rules say of the entry at `within` (its path inside a walk or a listing, one or
    /// more names, the last of them `name`) below `parent` (the names from the mount's root to
    /// the walk's start), looking only at the runs of names that end at it (its ancestors were
    /// judged on the way). The walk already holds `name`: finding it again in `within` would
    /// cost a listing more than the prefilter does.
    pub(crate) fn entry<S: AsRef<str>>(&self, parent: &[S], within: &str, name: &str) -> Option<(RuleEffect, &str)> {
        debug_assert!(within.ends_with(name), "`{name}` is the last name of `{within}`");
        if !self.could.could_match(&folded(name)) {
            return None;
        }
        let mut names: Vec<&str> = parent.iter().map(AsRef::as_ref).collect();
        names.extend(within.split('/'));
        let lifted = self.lifted(&names);
        with_keys(&names, |keys| self.at_end(keys, name, &lifted))
    }

    /// True when the default `.git` rule holds at the path `rel` (from the mount's root): it is
    /// among the rules, and no override of the mount string lifts it there (`;.git:rw`). Where
    /// it holds, an agent may not make a directory look like a git repository under another
    /// name either.
    pub(crate) fn guards_git_directories<S: AsRef<str>>(&self, rel: &[S]) -> bool {
        let Some(git) = self.git else { return false };
        let names: Vec<&str> = rel.iter().map(AsRef::as_ref).collect();
        !self.lifted(&names).contains(&git)
    }

    /// True when there is no rule.
    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules lifted for the path `names` (as written or as the disk holds it): those of
    /// every loosened place it lies at or below. Compared exactly, as an override grants: on
    /// a case-sensitive disk `.GIT` is another directory than the `.git` an operator loosened.
    fn lifted(&self, names: &[&str]) -> Vec<usize> {
        let mut lifted = Vec::new();
        for (place, rules) in &self.loosened {
            if place.len() <= names.len() && place.iter().zip(names).all(|(part, name)| part == name) {
                lifted.extend_from_slice(rules);
            }
        }
        lifted
    }

    /// Calls `found` with the index of each rule that matches the path `names` (from the
    /// mount's root, [`folded`]) at its last name, or as a whole for an anchored rule, leaving
    /// out the rules `lifted` and those an exception lets the last name pass (`exact`, that
    /// name as written: exceptions do not fold case); stops when `found` returns true. Rules
    /// whose sets could not be compiled ([`NamePolicy::compile`]) all match: the policy fails
    /// closed.
    fn matches(&self, names: &[&str], exact: &str, lifted: &[usize], found: &mut dyn FnMut(usize) -> bool) {
        let Some(last) = names.last() else { return };
        if !self.could.could_match(last) {
            return;
        }
        let Ok(sets) = self.matchers.get() else {
            for index in 0..self.compiled.len() {
                if !lifted.contains(&index) && found(index) {
                    return;
                }
            }
            return;
        };
        let whole = self.whole_paths.then(|| names.join("/"));
        if let (Some((set, indices)), Some(whole)) = (&sets.anchored, &whole) {
            for matched in set.matches(whole) {
                if found(indices[matched]) {
                    return;
                }
            }
        }
        let windows = sets.spans.iter().filter(|(span, _, _)| *span <= names.len());
        let windows = windows.map(|(span, set, indices)| {
            let window =
                if *span == 1 { Cow::Borrowed(*last) } else { Cow::Owned(names[names.len() - span..].join("/")) };
            (set, indices, window)
        });
        let deep =
            sets.deep.iter().zip(&whole).map(|((set, indices), whole)| (set, indices, Cow::Borrowed(whole.as_str())));
        for (set, indices, text) in windows.chain(deep) {
            for matched in set.matches(&*text) {
                let index = indices[matched];
                if lifted.contains(&index)
                    || sets.excepts[index].as_ref().is_some_and(|except| except.is_match(&*nfc(exact)))
                {
                    continue;
                }
                if found(index) {
                    return;
                }
            }
        }
    }

    /// What the rules say of the path `names` (from the mount's root, [`folded`]; the last
    /// name `exact` as written), looking only at the runs of names that end at its last name
    /// and at the whole path (the walk has judged its ancestors already): hidden when any rule
    /// hides it, else read-only when any keeps it.
    fn at_end(&self, names: &[&str], exact: &str, lifted: &[usize]) -> Option<(RuleEffect, &str)> {
        let mut decided: Option<&Compiled> = None;
        self.matches(names, exact, lifted, &mut |index| {
            let rule = &self.compiled[index];
            decided = Some(rule);
            rule.effect == RuleEffect::Hidden
        });
        decided.map(|rule| (rule.effect, rule.class.as_str()))
    }

    /// What the rules say of a whole path: hidden when any component is, else read-only when
    /// any is, with the class and how many names lead to the component that decided.
    pub(crate) fn judge<S: AsRef<str>>(&self, rel: &[S]) -> Option<(RuleEffect, &str, usize)> {
        if self.is_empty() || !rel.iter().any(|name| self.could.could_match(&folded(name.as_ref()))) {
            return None;
        }
        let names: Vec<&str> = rel.iter().map(AsRef::as_ref).collect();
        let lifted = self.lifted(&names);
        with_keys(&names, |keys| {
            let mut read_only = None;
            for end in 1..=keys.len() {
                match self.at_end(&keys[..end], names[end - 1], &lifted) {
                    Some((RuleEffect::Hidden, class)) => return Some((RuleEffect::Hidden, class, end)),
                    Some((RuleEffect::ReadOnly, class)) if read_only.is_none() => {
                        read_only = Some((RuleEffect::ReadOnly, class, end));
                    }
                    _ => {}
                }
            }
            read_only
        })
    }

    /// Every rule that protects the path `rel` or a directory above it, by its index in the
    /// rules this policy was built from (no loosening applied): what an override there would
    /// loosen, or may not.
    pub(crate) fn protecting<S: AsRef<str>>(&self, rel: &[S]) -> Vec<usize> {
        let names: Vec<&str> = rel.iter().map(AsRef::as_ref).collect();
        let mut protecting = Vec::new();
        with_keys(&names, |keys| {
            for end in 1..=keys.len() {
                self.matches(&keys[..end], names[end - 1], &[], &mut |index| {
                    if !protecting.contains(&index) {
                        protecting.push(index);
                    }
                    false
                });
            }
        });
        protecting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(policy: &NamePolicy, path: &str) -> Option<(RuleEffect, String, usize)> {
        let rel: Vec<String> = path.split('/').map(str::to_owned).collect();
        policy.judge(&rel).map(|(effect, class, end)| (effect, class.to_owned(), end))
    }

    #[test]
    fn the_defaults_hide_secrets_and_keep_templates_and_public_keys() {
        let policy = NamePolicy::new(NameRule::defaults()).unwrap();
        let hidden = |class: &str, end: usize| Some((RuleEffect::Hidden, class.to_owned(), end));
        assert_eq!(judge(&policy, ".env"), hidden("environment files", 1));
        assert_eq!(judge(&policy, "app/.env.local"), hidden("environment files", 2));
        assert_eq!(judge(&policy, "app/.env.example"), None);
        assert_eq!(judge(&policy, ".env.sample"), None);
        assert_eq!(judge(&policy, ".env.template"), None);
        assert_eq!(judge(&policy, "certs/server.pem"), hidden("private keys", 2));
        assert_eq!(judge(&policy, "home/.ssh"), hidden("credentials", 2));
        assert_eq!(judge(&policy, "home/.ssh/known_hosts"), hidden("credentials", 2));
        assert_eq!(judge(&policy, "keys/id_ed25519"), hidden("private keys", 2));
        assert_eq!(judge(&policy, "keys/id_ed25519.pub"), None);
        assert_eq!(judge(&policy, "u/.docker/config.json"), hidden("credentials", 3));
        assert_eq!(judge(&policy, "u/config.json"), None);
        assert_eq!(judge(&policy, ".docker/other.json"), None);
        assert_eq!(judge(&policy, "src/main.rs"), None);
        assert_eq!(judge(&policy, "src/keyboard.rs"), None);
        assert_eq!(judge(&policy, ".git/hooks/pre-commit"), Some((RuleEffect::ReadOnly, "git metadata".to_owned(), 1)));
        assert_eq!(judge(&policy, "vendor/.git/config"), Some((RuleEffect::ReadOnly, "git metadata".to_owned(), 2)));
        // Hidden beats read-only on one path.
        assert_eq!(judge(&policy, ".git/.env"), hidden("environment files", 2));
        assert_eq!(judge(&policy, ".gitignore"), None);
    }

    #[test]
    fn rules_ignore_ascii_case() {
        // On a case-insensitive disk `.ENV` opens `.env`: no spelling may reach it.
        let policy = NamePolicy::new(NameRule::defaults()).unwrap();
        let hidden = |class: &str, end: usize| Some((RuleEffect::Hidden, class.to_owned(), end));
        assert_eq!(judge(&policy, ".ENV"), hidden("environment files", 1));
        assert_eq!(judge(&policy, "app/.Env.Local"), hidden("environment files", 2));
        // Exceptions do not fold: on a case-sensitive disk `.ENV.EXAMPLE` is not the template.
        assert_eq!(judge(&policy, "app/.ENV.EXAMPLE"), hidden("environment files", 2));
        assert_eq!(judge(&policy, "app/.env.example"), None);
        assert_eq!(judge(&policy, "certs/SERVER.PEM"), hidden("private keys", 2));
        assert_eq!(judge(&policy, "home/.SSH/config"), hidden("credentials", 2));
        assert_eq!(judge(&policy, "keys/ID_RSA"), hidden("private keys", 2));
        assert_eq!(judge(&policy, "keys/ID_RSA.PUB"), hidden("private keys", 2));
        assert_eq!(judge(&policy, "keys/ID_RSA.pub"), None);
        assert_eq!(judge(&policy, "u/.Docker/Config.JSON"), hidden("credentials", 3));
        assert_eq!(judge(&policy, ".GIT/hooks/x"), Some((RuleEffect::ReadOnly, "git metadata".to_owned(), 1)));
        let placed = NamePolicy::new(vec![
            NameRule::in_mount("secrets", RuleEffect::Hidden, "/p"),
            NameRule::in_mount("docs/*.md", RuleEffect::ReadOnly, "/p"),
        ])
        .unwrap();
        assert_eq!(judge(&placed, "Secrets/token.txt").map(|found| found.2), Some(1));
        assert_eq!(judge(&placed, "DOCS/Guide.MD").map(|found| found.0), Some(RuleEffect::ReadOnly));
        assert_eq!(judge(&placed, "docs/guide.mdx"), None);
    }

    #[test]
    fn operator_globs_are_names_or_short_runs_of_names() {
        let policy =
            NamePolicy::new(vec![NameRule::hide("**/*.sqlite", "--hide"), NameRule::hide("secrets", "--hide")])
                .unwrap();
        assert_eq!(judge(&policy, "db/app.sqlite").map(|found| found.2), Some(2));
        assert_eq!(judge(&policy, "deploy/secrets/token.txt").map(|found| found.2), Some(2));
        for (glob, reason) in [
            ("", "it is empty"),
            ("/etc", "a name rule matches names anywhere, like `*.key` or `.docker/config.json`; drop the `/`"),
            ("a/../b", "each part is a name, a glob of one name or `**` (no empty, `.` or `..` parts)"),
            ("a//b", "each part is a name, a glob of one name or `**` (no empty, `.` or `..` parts)"),
            ("a/b/c/d/e", "it spans more than 4 names"),
            ("a/**/b/c/d/e", "it spans more than 4 names"),
            ("{a/b,c}", "a `{…}` alternative cannot hold a `/`; write one rule for each alternative"),
            ("{a[}]/b,c}", "a `{…}` alternative cannot hold a `/`; write one rule for each alternative"),
            ("{a[!]]/b,c}", "a `{…}` alternative cannot hold a `/`; write one rule for each alternative"),
        ] {
            let error = NamePolicy::new(vec![NameRule::hide(glob, "--hide")]).unwrap_err();
            assert_eq!(error.reason, reason, "{glob}");
        }
        assert!(NamePolicy::new(vec![NameRule::hide("[", "--hide")]).is_err());
        // A `/` outside the group, or a `{` that is a class's character, is fine.
        for glob in ["{a,b}/c", "[{]x/y", ".docker/{config,auth}.json"] {
            assert!(NamePolicy::new(vec![NameRule::hide(glob, "--hide")]).is_ok(), "{glob}");
        }
    }

    #[test]
    fn mount_rules_are_anchored_at_the_root() {
        let policy = NamePolicy::new(vec![
            NameRule::in_mount("**/*.key", RuleEffect::Hidden, "/p"),
            NameRule::in_mount("secrets", RuleEffect::Hidden, "/p"),
            NameRule::in_mount("docs/*.md", RuleEffect::ReadOnly, "/p"),
            NameRule::in_mount("odd]name\\x", RuleEffect::Hidden, "/p"),
        ])
        .unwrap();
        let hidden = |end: usize| Some((RuleEffect::Hidden, "names the operator hides".to_owned(), end));
        assert_eq!(judge(&policy, "a.key"), hidden(1));
        assert_eq!(judge(&policy, "a/b/c.key"), hidden(3));
        assert_eq!(judge(&policy, "a/b/c.key/d"), hidden(3));
        assert_eq!(judge(&policy, "secrets"), hidden(1));
        assert_eq!(judge(&policy, "secrets/token.txt"), hidden(1));
        assert_eq!(judge(&policy, "nested/secrets/token.txt"), None);
        assert_eq!(judge(&policy, "odd]name\\x"), hidden(1));
        assert_eq!(judge(&policy, "oddxname\\x"), None);
        let read_only = Some((RuleEffect::ReadOnly, "paths the operator keeps read-only".to_owned(), 2));
        assert_eq!(judge(&policy, "docs/guide.md"), read_only);
        assert_eq!(judge(&policy, "docs/guide.txt"), None);
        assert_eq!(judge(&policy, "docs/sub/guide.md"), None);
        assert_eq!(judge(&policy, "other/docs/guide.md"), None);
        assert_eq!(policy.move_depth(), usize::MAX);
        // A walk judges an entry by its path from the mount root.
        assert_eq!(policy.entry(&["docs"], "guide.md", "guide.md").map(|found| found.0), Some(RuleEffect::ReadOnly));
        assert_eq!(policy.entry(&["other"], "docs/guide.md", "guide.md"), None);
    }

    #[test]
    fn double_stars_span_any_number_of_names() {
        let hide = |glob: &str| NamePolicy::new(vec![NameRule::hide(glob, "--hide")]).unwrap();
        let hidden_at = |policy: &NamePolicy, path: &str| judge(policy, path).map(|(_, _, end)| end);
        // `notes/**` hides what any `notes` holds, and (unlike gitignore) `notes` itself: an
        // empty-looking directory would still tell that something is inside.
        let notes = hide("notes/**");
        assert_eq!(hidden_at(&notes, "notes"), Some(1));
        assert_eq!(hidden_at(&notes, "notes/a"), Some(1));
        assert_eq!(hidden_at(&notes, "notes/x/y"), Some(1));
        assert_eq!(hidden_at(&notes, "app/notes/x/y"), Some(2));
        assert_eq!(hidden_at(&notes, "NOTES/a"), Some(1));
        assert_eq!(hidden_at(&notes, "notes.txt"), None);
        assert_eq!(hidden_at(&notes, "my-notes/a"), None);
        assert_eq!(notes.move_depth(), 0);
        let secret = hide("**/secret.txt");
        assert_eq!(hidden_at(&secret, "secret.txt"), Some(1));
        assert_eq!(hidden_at(&secret, "a/b/secret.txt"), Some(3));
        assert_eq!(hidden_at(&secret, "a/secret.txt.bak"), None);
        let deep = hide("a/**/b");
        assert_eq!(hidden_at(&deep, "a/b"), Some(2));
        assert_eq!(hidden_at(&deep, "a/x/y/b"), Some(4));
        assert_eq!(hidden_at(&deep, "z/a/x/b/c"), Some(4));
        assert_eq!(hidden_at(&deep, "A/x/B"), Some(3));
        for visible in ["a", "b", "x/b", "a/x", "a/bb", "ba/b"] {
            assert_eq!(hidden_at(&deep, visible), None, "{visible}");
        }
        // A move of a directory can carry a `b` out of its `a`: look all the way down.
        assert_eq!(deep.move_depth(), usize::MAX);
        assert_eq!(deep.entry(&["a"], "x/b", "b").map(|found| found.0), Some(RuleEffect::Hidden));
        assert_eq!(deep.entry(&["z"], "x/b", "b"), None);
        // A trailing `/**` after a `**` part; a `**` inside `{…}`, which globset reads as `*`
        // (a name before `b`), is matched on the whole path all the same.
        assert_eq!(hidden_at(&hide("a/**/b/**"), "a/x/b"), Some(3));
        let alternative = hide("{**,x}/b");
        assert_eq!(hidden_at(&alternative, "b"), None);
        assert_eq!(hidden_at(&alternative, "p/q/b"), Some(3));
        // `**` alone is every name, as `*` is.
        assert_eq!(hidden_at(&hide("**"), "anything/at/all"), Some(1));
    }

    #[test]
    fn double_stars_in_mount_rules_are_anchored() {
        let policy = NamePolicy::new(vec![
            NameRule::in_mount("notes/**", RuleEffect::Hidden, "/p"),
            NameRule::in_mount("docs/**/*.md", RuleEffect::ReadOnly, "/p"),
            NameRule::in_mount("a/**/b", RuleEffect::Hidden, "/p"),
        ])
        .unwrap();
        let found = |path: &str| judge(&policy, path).map(|(effect, _, end)| (effect, end));
        assert_eq!(found("notes"), Some((RuleEffect::Hidden, 1)));
        assert_eq!(found("notes/a"), Some((RuleEffect::Hidden, 1)));
        assert_eq!(found("notes/x/y"), Some((RuleEffect::Hidden, 1)));
        assert_eq!(found("app/notes/a"), None);
        assert_eq!(found("docs/a.md"), Some((RuleEffect::ReadOnly, 2)));
        assert_eq!(found("docs/x/y/a.md"), Some((RuleEffect::ReadOnly, 4)));
        assert_eq!(found("docs/a.txt"), None);
        assert_eq!(found("a.md"), None);
        assert_eq!(found("a/b"), Some((RuleEffect::Hidden, 2)));
        assert_eq!(found("a/x/b/c"), Some((RuleEffect::Hidden, 3)));
        assert_eq!(found("z/a/b"), None);
    }

    #[test]
    fn names_are_judged_in_nfc() {
        const NFC: &str = "caf\u{e9}";
        const NFD: &str = "cafe\u{301}";
        assert!(matches!(nfc("plain.txt"), Cow::Borrowed(_)));
        assert!(matches!(nfc(NFC), Cow::Borrowed(_)));
        assert_eq!(nfc(NFD), NFC);
        assert!(same_name(NFD, "CAF\u{e9}"));
        assert!(!same_name(NFD, "cafe"));
        for (rule, name) in [(NFC, NFD), (NFD, NFC), (NFC, NFC), (NFD, NFD)] {
            let named = NamePolicy::new(vec![NameRule::hide(rule, "--hide")]).unwrap();
            assert_eq!(judge(&named, &format!("menu/{name}/x")).map(|found| found.2), Some(2), "{rule:?} {name:?}");
            assert_eq!(named.entry(&["menu"], name, name).map(|found| found.0), Some(RuleEffect::Hidden));
            let placed =
                NamePolicy::new(vec![NameRule::in_mount(&format!("{rule}/*"), RuleEffect::Hidden, "/p")]).unwrap();
            assert_eq!(judge(&placed, &format!("{name}/x")).map(|found| found.2), Some(2), "{rule:?} {name:?}");
            let suffix = NamePolicy::new(vec![NameRule::hide(&format!("*.{rule}"), "--hide")]).unwrap();
            assert_eq!(judge(&suffix, &format!("a.{name}")).map(|found| found.2), Some(1), "{rule:?} {name:?}");
        }
        // ASCII case folds under an accent too (`CAFÉ`, or `CAFE` and a combining accent, is
        // `café` on a disk that ignores both); letters past ASCII do not (`ſ` is not `s`).
        let named = NamePolicy::new(vec![NameRule::hide(NFD, "--hide")]).unwrap();
        for name in ["CAF\u{e9}", "CAF\u{c9}", "CAFE\u{301}", "Cafe\u{301}"] {
            assert_eq!(judge(&named, name).map(|found| found.2), Some(1), "{name:?}");
        }
        assert!(same_name("CAFE\u{301}", NFC) && same_name("CAF\u{c9}", NFD));
        let s = NamePolicy::new(vec![NameRule::hide("secrets", "--hide")]).unwrap();
        assert_eq!(judge(&s, "\u{17f}ecrets"), None);
        // Exceptions match as written (in NFC): `.env.Exämple` is not the template.
        let mut env = NameRule::hide(".env.*", "--hide");
        env.except = vec![".env.ex\u{e4}mple".to_owned()];
        let env = NamePolicy::new(vec![env]).unwrap();
        assert_eq!(judge(&env, ".env.exa\u{308}mple"), None);
        assert_eq!(judge(&env, ".env.Exa\u{308}mple").map(|found| found.2), Some(1));
        // The agent's spelling and the disk's meet in a rule anywhere in the path.
        let deep = NamePolicy::new(vec![NameRule::hide(&format!("{NFC}/**/menu"), "--hide")]).unwrap();
        assert_eq!(judge(&deep, &format!("{NFD}/x/menu")).map(|found| found.2), Some(3));
        assert_eq!(judge(&deep, "cafe/x/menu"), None);
    }

    #[test]
    fn a_loosened_rule_is_lifted_at_its_place_only() {
        let mut policy = NamePolicy::new(NameRule::defaults()).unwrap();
        let git = policy.rules().iter().position(|rule| rule.glob == ".git").unwrap();
        assert_eq!(policy.protecting(&[".git", "hooks"]), [git]);
        assert!(policy.protecting(&["src", "main.rs"]).is_empty());
        assert_eq!(policy.protecting(&["keys", "a.pem"]).len(), 1);
        policy.loosen(vec![".git".to_owned()], vec![git]);
        assert_eq!(judge(&policy, ".git"), None);
        assert_eq!(judge(&policy, ".git/hooks/pre-commit"), None);
        assert_eq!(policy.entry(&[".git"], "hooks/x", "x"), None);
        // Hidden rules still hold inside; another `.git`, or another spelling, stays read-only.
        assert_eq!(judge(&policy, ".git/.env").map(|found| found.0), Some(RuleEffect::Hidden));
        assert_eq!(judge(&policy, "vendor/.git/config").map(|found| found.0), Some(RuleEffect::ReadOnly));
        assert_eq!(judge(&policy, ".GIT/config").map(|found| found.0), Some(RuleEffect::ReadOnly));
        // A place below the rule's name lifts it below that place only.
        let mut below = NamePolicy::new(NameRule::defaults()).unwrap();
        below.loosen(vec![".git".to_owned(), "objects".to_owned()], vec![git]);
        assert_eq!(judge(&below, ".git/objects/ab/cd"), None);
        assert_eq!(judge(&below, ".git/hooks/x").map(|found| found.0), Some(RuleEffect::ReadOnly));
        assert_eq!(judge(&below, ".git").map(|found| found.0), Some(RuleEffect::ReadOnly));
        // The guard against git directories under other names goes with the `.git` rule.
        assert!(policy.guards_git_directories(&["evil", "HEAD"]));
        assert!(!policy.guards_git_directories(&[".git", "HEAD"]));
        assert!(below.guards_git_directories(&[".git", "HEAD"]));
        assert!(!below.guards_git_directories(&[".git", "objects", "info"]));
        let own = NamePolicy::new(vec![NameRule::hide("*.key", "--hide")]).unwrap();
        assert!(!own.guards_git_directories(&["evil", "HEAD"]));
    }

    #[test]
    fn moves_look_as_deep_as_the_rules_reach() {
        assert_eq!(NamePolicy::new(vec![NameRule::hide("*.key", "--hide")]).unwrap().move_depth(), 0);
        assert_eq!(NamePolicy::new(NameRule::defaults()).unwrap().move_depth(), 1);
        assert_eq!(NamePolicy::new(vec![NameRule::hide("a/b/c", "--hide")]).unwrap().move_depth(), 2);
    }

    /// Judgements of a policy whose sets are compiled on first need, made from several threads
    /// at once while another compiles them, equal those of a policy compiled at once.
    #[test]
    fn sets_compiled_on_first_need_judge_as_sets_compiled_at_once() {
        let paths = [
            ".env",
            "app/.env.local",
            "app/.env.example",
            "app/.ENV.EXAMPLE",
            "keys/id_ed25519",
            "keys/id_ed25519.pub",
            "u/.Docker/Config.JSON",
            ".git/hooks/pre-commit",
            "src/main.rs",
        ];
        let eager = NamePolicy::new(NameRule::defaults()).unwrap();
        eager.compile().unwrap();
        let expected: Vec<_> = paths.iter().map(|path| judge(&eager, path)).collect();
        for _ in 0..20 {
            let deferred = std::sync::Arc::new(NamePolicy::new(NameRule::defaults()).unwrap());
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
            let judges: Vec<_> = (0..4)
                .map(|thread| {
                    let (deferred, barrier) = (deferred.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        if thread == 0 {
                            deferred.compile().unwrap();
                        }
                        paths.iter().map(|path| judge(&deferred, path)).collect::<Vec<_>>()
                    })
                })
                .collect();
            for judged in judges {
                assert_eq!(judged.join().unwrap(), expected);
            }
        }
    }

    /// A policy whose sets could not be compiled lets no name through that a rule could
    /// match: every rule holds there (hidden beats read-only), exceptions included; a name no
    /// rule could match is judged as before.
    #[test]
    fn sets_that_could_not_be_compiled_fail_closed() {
        let policy = NamePolicy::new(NameRule::defaults()).unwrap();
        policy.fail_compile_for_test();
        assert_eq!(
            policy.compile().unwrap_err().to_string(),
            "the name rule `` is not valid: compiled regex exceeds size limit"
        );
        let hidden = |class: &str, end: usize| Some((RuleEffect::Hidden, class.to_owned(), end));
        assert_eq!(judge(&policy, ".env"), hidden("environment files", 1));
        assert_eq!(judge(&policy, "app/.env.example"), hidden("environment files", 2));
        assert_eq!(judge(&policy, "keys/id_ed25519.pub"), hidden("environment files", 2));
        assert_eq!(judge(&policy, ".git/hooks/pre-commit"), hidden("environment files", 1));
        assert_eq!(judge(&policy, "src/main.rs"), None);
        assert_eq!(policy.protecting(&["notes.key"]).len(), NameRule::defaults().len());
    }
}
