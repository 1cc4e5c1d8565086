//! The mount-string grammar (`docs/design.md`, contracts; `docs/mounts.md`): `[<ulid>|]<physical>:<virtual>[:<rights>][;<subpath>:<rights>]*`.
//!
//! A sub-path is a literal path (an override: its own rights for a subtree) or a glob, and
//! besides `ro`, `rw` and `rwnd` it may be `hidden`. A glob or a `hidden` sub-path is a rule
//! ([`SubPathRule`]): it only takes away (hides, or keeps read-only), so a glob may not grant
//! `rw` or `rwnd`, and no override may lie inside a hidden sub-path.
//!
//! Parsing happens once, at launch, on operator input. Every refusal is one line that names the
//! part that is wrong and the rule, with the fix in a separate [`SpecError::hint`] so that
//! operator hints never mix with agent-facing text. `Display` writes the canonical form, and
//! parsing it gives back an equal [`MountSpec`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::policy::{RuleEffect, anchored_glob, folded, is_glob, same_name};

/// What a mount (or a sub-path of it) lets an agent do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rights {
    /// `ro`: read only.
    ReadOnly,
    /// `rw`: read, write, create and delete.
    ReadWrite,
    /// `rwnd`: read, write and create, but never delete.
    ReadWriteNoDelete,
}

/// One kind of access an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reading content, metadata or listings.
    Read,
    /// Creating or changing files and directories.
    Write,
    /// Removing files and directories (also the source side of a move).
    Delete,
}

impl Rights {
    /// The grammar token: `ro`, `rw` or `rwnd`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Rights::ReadOnly => "ro",
            Rights::ReadWrite => "rw",
            Rights::ReadWriteNoDelete => "rwnd",
        }
    }

    /// True when these rights grant `access`.
    #[must_use]
    pub fn allows(self, access: Access) -> bool {
        match (self, access) {
            (_, Access::Read) | (Rights::ReadWrite, _) | (Rights::ReadWriteNoDelete, Access::Write) => true,
            (Rights::ReadOnly, _) | (Rights::ReadWriteNoDelete, Access::Delete) => false,
        }
    }
}

impl fmt::Display for Rights {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

impl FromStr for Rights {
    type Err = ();

    fn from_str(token: &str) -> Result<Self, ()> {
        match token.to_ascii_lowercase().as_str() {
            "ro" => Ok(Rights::ReadOnly),
            "rw" => Ok(Rights::ReadWrite),
            "rwnd" => Ok(Rights::ReadWriteNoDelete),
            _ => Err(()),
        }
    }
}

impl Access {
    /// A short verb for denial texts: `read`, `write`, `delete`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Delete => "delete",
        }
    }
}

/// A ULID naming a settings entry, so that a crew or `--mount-id` can select it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MountId(String);

impl MountId {
    /// Parses a 26-character Crockford base32 ULID; stored in upper case.
    pub fn new(text: &str) -> Result<Self, &'static str> {
        const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
        if text.len() != 26 {
            return Err("a mount id is a ULID: 26 characters of Crockford base32");
        }
        let upper = text.to_ascii_uppercase();
        if !upper.chars().all(|character| ALPHABET.contains(character)) {
            return Err("a mount id is a ULID: only the characters 0-9 and A-Z without I, L, O, U");
        }
        if upper.as_bytes()[0] > b'7' {
            return Err("a mount id is a ULID: its first character is 0 to 7");
        }
        Ok(Self(upper))
    }

    /// The canonical (upper-case) text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MountId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl FromStr for MountId {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text)
    }
}

/// A validated virtual mount root such as `/src` or `/src/vendor`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MountRoot(String);

impl MountRoot {
    /// Validates a root: `/` then segments of `[A-Za-z0-9._-]`, no `.`/`..`, not `/` alone.
    /// A trailing slash is dropped.
    pub fn new(text: &str) -> Result<Self, &'static str> {
        let bytes = text.as_bytes();
        if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
            return Err("a virtual root is not a drive path; write it like `/src`");
        }
        if !text.starts_with('/') {
            return Err("a virtual root starts with `/`, like `/src`");
        }
        let trimmed = text.strip_suffix('/').unwrap_or(text);
        if trimmed.is_empty() {
            return Err("the virtual root cannot be `/` alone; name it, like `/src`");
        }
        // The limits of a virtual path (`VirtualPath`), which every root must be.
        if trimmed.len() > crate::path::MAX_PATH_BYTES {
            return Err("a virtual root is at most 4096 bytes long");
        }
        for segment in trimmed[1..].split('/') {
            if segment.is_empty() {
                return Err("a virtual root has no empty segments (`//`)");
            }
            if segment == "." || segment == ".." {
                return Err("a virtual root has no `.` or `..` segments");
            }
            if !segment.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-')) {
                return Err("a virtual root's segments use only letters, digits, `.`, `_` and `-`");
            }
            if segment.len() > crate::path::MAX_SEGMENT_BYTES {
                return Err("a virtual root's segments are at most 255 bytes long");
            }
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The root text, like `/src`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments of the root.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0[1..].split('/')
    }
}

impl fmt::Display for MountRoot {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl FromStr for MountRoot {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text)
    }
}

/// A sub-path override: a relative, canonical path inside a mount with its own rights.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubPathRights {
    segments: Vec<String>,
    rights: Rights,
}

impl SubPathRights {
    /// The same override with `rights`.
    #[must_use]
    pub(crate) fn with_rights(&self, rights: Rights) -> Self {
        Self { segments: self.segments.clone(), rights }
    }

    /// The override's segments, relative to the mount root.
    #[must_use]
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The path as written, like `vendor/lib`.
    #[must_use]
    pub fn path(&self) -> String {
        self.segments.join("/")
    }

    /// The rights the override grants.
    #[must_use]
    pub fn rights(&self) -> Rights {
        self.rights
    }
}

/// A sub-path rule of a mount string: a glob (or a literal path) anchored at the mount's root,
/// and what it does to what it matches (`;**/*.key:hidden`, `;secrets:hidden`, `;docs/*.md:ro`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubPathRule {
    glob: String,
    effect: RuleEffect,
}

impl SubPathRule {
    /// The glob as written, relative to the mount root.
    #[must_use]
    pub fn glob(&self) -> &str {
        &self.glob
    }

    /// What it does.
    #[must_use]
    pub fn effect(&self) -> RuleEffect {
        self.effect
    }

    /// The grammar token: `hidden` or `ro`.
    fn token(&self) -> &'static str {
        match self.effect {
            RuleEffect::Hidden => "hidden",
            RuleEffect::ReadOnly => "ro",
        }
    }
}

/// One parsed mount string.
///
/// ```
/// use vfs::{MountSpec, Rights};
/// let spec: MountSpec = "../data:/src:ro;vendor:rw".parse()?;
/// assert_eq!(spec.root().as_str(), "/src");
/// assert_eq!(spec.rights(), Rights::ReadOnly);
/// assert_eq!(spec.to_string(), "../data:/src:ro;vendor:rw");
/// # Ok::<(), vfs::SpecError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MountSpec {
    id: Option<MountId>,
    physical: String,
    /// What `physical` names, parsed once; the rule it breaks for a spec built in code from
    /// an object URL that is not valid (refused when the registry opens it).
    location: Result<Location, String>,
    root: MountRoot,
    rights: Rights,
    overrides: Vec<SubPathRights>,
    rules: Vec<SubPathRule>,
}

/// Which part of a mount string a [`SpecError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecPart {
    /// The whole string (its shape).
    Shape,
    /// The `<ulid>|` prefix.
    Id,
    /// The physical (host) path.
    Physical,
    /// The virtual root.
    Root,
    /// A rights token.
    Rights,
    /// A `;subpath:rights` override.
    Override,
}

/// A refused mount string: one line for the operator, plus a hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid mount `{spec}`: {message}")]
pub struct SpecError {
    spec: String,
    part: SpecPart,
    message: String,
    hint: String,
}

impl SpecError {
    fn new(spec: &str, part: SpecPart, message: impl Into<String>, hint: impl Into<String>) -> Self {
        // Control characters are shown escaped so that the refusal stays on one line.
        let spec =
            spec.chars()
                .map(|character| {
                    if character.is_control() { character.escape_default().to_string() } else { character.to_string() }
                })
                .collect();
        Self { spec, part, message: message.into(), hint: hint.into() }
    }

    /// The part of the string that is wrong.
    #[must_use]
    pub fn part(&self) -> SpecPart {
        self.part
    }

    /// How to fix it, for a `hint:` line.
    #[must_use]
    pub fn hint(&self) -> &str {
        &self.hint
    }
}

impl MountSpec {
    /// Builds a spec from parts (for embedders that do not start from a string); `physical` is
    /// read as the unquoted physical side of a mount string ([`Location::parse`]).
    #[must_use]
    pub fn new(physical: impl Into<String>, root: MountRoot, rights: Rights) -> Self {
        let physical = physical.into();
        let location = Location::parse(&physical);
        Self { id: None, physical, location, root, rights, overrides: Vec::new(), rules: Vec::new() }
    }

    /// Builds a spec for a directory on this machine, whatever its name looks like.
    #[must_use]
    pub fn local(directory: PathBuf, root: MountRoot, rights: Rights) -> Self {
        let physical = directory.to_string_lossy().into_owned();
        let location = Ok(Location::Local(directory));
        Self { id: None, physical, location, root, rights, overrides: Vec::new(), rules: Vec::new() }
    }

    /// The optional settings-entry id.
    #[must_use]
    pub fn id(&self) -> Option<&MountId> {
        self.id.as_ref()
    }

    /// The physical path as written by the operator (an operator-facing value only).
    #[must_use]
    pub fn physical(&self) -> &str {
        &self.physical
    }

    /// Where the mount's tree lies, parsed once from the physical side; `None` only for a spec
    /// built by [`MountSpec::new`] from an object URL that is not valid.
    #[must_use]
    pub fn location(&self) -> Option<&Location> {
        self.location.as_ref().ok()
    }

    /// The location, or the rule an object URL given to [`MountSpec::new`] breaks.
    #[cfg(feature = "s3")]
    pub(crate) fn checked_location(&self) -> Result<&Location, &str> {
        self.location.as_ref().map_err(String::as_str)
    }

    /// Replaces the physical path (used by launchers that resolve relative paths), read as
    /// [`MountSpec::new`] reads it.
    #[must_use]
    pub fn with_physical(mut self, physical: impl Into<String>) -> Self {
        self.physical = physical.into();
        self.location = Location::parse(&self.physical);
        self
    }

    /// Replaces a local mount's directory (used by launchers that resolve relative paths).
    #[must_use]
    pub fn with_directory(mut self, directory: PathBuf) -> Self {
        self.physical = directory.to_string_lossy().into_owned();
        self.location = Ok(Location::Local(directory));
        self
    }

    /// The virtual root.
    #[must_use]
    pub fn root(&self) -> &MountRoot {
        &self.root
    }

    /// The mount's rights.
    #[must_use]
    pub fn rights(&self) -> Rights {
        self.rights
    }

    /// Replaces the mount's rights.
    #[must_use]
    pub fn with_rights(mut self, rights: Rights) -> Self {
        self.rights = rights;
        self
    }

    /// The sub-path overrides in the order written.
    #[must_use]
    pub fn overrides(&self) -> &[SubPathRights] {
        &self.overrides
    }

    /// The sub-path rules (globs, `hidden` paths) in the order written.
    #[must_use]
    pub fn rules(&self) -> &[SubPathRule] {
        &self.rules
    }
}

const SHAPE_HINT: &str = "write it as `<physical>:<virtual>[:ro|rw|rwnd]`, for example `./out:/output:rw`";

const OBJECT_HINT: &str = "write `s3://bucket[/prefix]` with an S3 bucket name (3 to 63 lowercase letters, digits, `.` and `-`, starting and ending with a letter or digit) and a prefix without empty, `.`, `..` or `.vfs-tmp-…` segments";

/// Where a mount's tree physically lies, parsed once from the physical side of a mount string.
/// It has no `Display`: an operator-facing line shows the spelling the operator wrote
/// ([`MountSpec::physical`]), and nothing agent-facing shows either.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Location {
    /// A directory on this machine, as written (a relative one resolves against the launch's
    /// directory).
    Local(PathBuf),
    /// An object store's bucket and key prefix.
    Object(ObjectUrl),
}

/// `s3://bucket[/prefix]` or `memory://name[/prefix]`, checked: an S3 bucket name, a prefix
/// without empty, `.` or `..` segments.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectUrl {
    scheme: ObjectScheme,
    bucket: String,
    prefix: Vec<String>,
}

/// The object stores vfs knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ObjectScheme {
    /// An S3-compatible bucket (`s3://`).
    S3,
    /// An in-process store (`memory://`).
    Memory,
}

impl ObjectScheme {
    /// `s3` or `memory`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectScheme::S3 => "s3",
            ObjectScheme::Memory => "memory",
        }
    }
}

impl ObjectUrl {
    /// The store.
    #[must_use]
    pub fn scheme(&self) -> ObjectScheme {
        self.scheme
    }

    /// The bucket (or the in-process store's name).
    #[must_use]
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The key prefix's segments.
    #[must_use]
    pub fn prefix(&self) -> &[String] {
        &self.prefix
    }
}

impl Location {
    /// Reads an unquoted physical side. **The one rule:** text that starts with a URL scheme
    /// of two or more characters (a letter, then letters, digits, `+`, `.` or `-`) and `://`
    /// is an object URL, and must be a valid `s3://` or `memory://` one; anything else is a
    /// local path (a one-letter scheme is a drive letter, `C://x`). A quoted physical side is
    /// always a local path: quoting is how a directory named like a URL is mounted.
    ///
    /// # Errors
    /// The rule an object URL breaks: an unknown scheme, no bucket, a bucket S3 would not
    /// name, a prefix with an empty, `.` or `..` segment. The bucket goes into request URLs as
    /// written, so only S3's own bucket names pass: a `.` or `..` "bucket" would be normalised
    /// away by the URL and land in another mount's bucket, and upper case or `%` could name
    /// the same bucket two ways and slip past the nesting check. One trailing `/` is allowed.
    pub fn parse(physical: &str) -> Result<Location, String> {
        let Some((scheme, rest)) = url_scheme(physical) else {
            return Ok(Location::Local(PathBuf::from(physical)));
        };
        let scheme = match scheme {
            "s3" => ObjectScheme::S3,
            "memory" => ObjectScheme::Memory,
            other => {
                return Err(format!(
                    "`{other}://` is not an object store vfs knows (`s3://`, `memory://`); quote a local path that looks like a URL"
                ));
            }
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let mut parts = rest.split('/');
        let bucket = parts.next().unwrap_or_default();
        let prefix: Vec<&str> = parts.collect();
        if bucket.is_empty() {
            return Err(format!("the URL `{physical}` names no bucket"));
        }
        if scheme == ObjectScheme::S3 && !valid_bucket(bucket) {
            return Err(format!("`{bucket}` is not an S3 bucket name"));
        }
        if prefix.iter().any(|segment| segment.is_empty() || matches!(*segment, "." | "..")) {
            return Err(format!("the prefix of `{physical}` has an empty, `.` or `..` segment"));
        }
        // vfs's own names (a journal's image area) are never served, not even as a mount.
        if let Some(reserved) =
            prefix.iter().find(|segment| segment.starts_with(crate::storage::local::TEMPORARY_PREFIX))
        {
            return Err(format!(
                "the prefix of `{physical}` has the segment `{reserved}`: names that begin with `.vfs-tmp-` are vfs's own"
            ));
        }
        let prefix = prefix.into_iter().map(str::to_owned).collect();
        Ok(Location::Object(ObjectUrl { scheme, bucket: bucket.to_owned(), prefix }))
    }

    /// The local directory, for a local location.
    #[must_use]
    pub fn local(&self) -> Option<&Path> {
        match self {
            Location::Local(path) => Some(path),
            Location::Object(_) => None,
        }
    }
}

/// S3's bucket naming rules: 3 to 63 characters of `[a-z0-9.-]`, a letter or digit at both
/// ends, no `..`, not shaped like an IPv4 address.
fn valid_bucket(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let edge = |byte: Option<&u8>| byte.is_some_and(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit());
    let ip_like = bucket.split('.').count() == 4 && bucket.bytes().all(|byte| byte.is_ascii_digit() || byte == b'.');
    (3..=63).contains(&bytes.len())
        && bytes.iter().all(|&byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'.' || byte == b'-')
        && edge(bytes.first())
        && edge(bytes.last())
        && !bucket.contains("..")
        && !ip_like
}

/// `s3://bucket/x` → (`s3`, `bucket/x`): the one test of "is this an object URL"
/// ([`Location::parse`]); a one-letter scheme is a drive letter.
fn url_scheme(physical: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = physical.split_once("://")?;
    let mut characters = scheme.chars();
    let first = characters.next()?;
    (scheme.len() >= 2
        && first.is_ascii_alphabetic()
        && characters.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
    .then_some((scheme, rest))
}

/// Whether a local path must be quoted to read back as itself (an object URL never is).
fn needs_quotes(physical: &str) -> bool {
    let body = strip_drive(physical).unwrap_or(physical);
    let bytes = physical.as_bytes();
    // `A` or `A:` alone would read back as a drive letter followed by the virtual root.
    let drive_like = bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && (bytes.len() == 1 || (bytes[1] == b':' && !matches!(bytes.get(2), Some(b'\\' | b'/'))));
    drive_like
        || physical.is_empty()
        || body.contains([':', ';', '|'])
        || url_scheme(physical).is_some()
        || physical.ends_with('\\')
        || physical.starts_with('"')
}

/// `C:\x` / `C:/x` / `C:` → the text after the drive letter and colon.
fn strip_drive(physical: &str) -> Option<&str> {
    let bytes = physical.as_bytes();
    if bytes.len() >= 2
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && (bytes.len() == 2 || matches!(bytes[2], b'\\' | b'/'))
    {
        Some(&physical[2..])
    } else {
        None
    }
}

impl FromStr for MountSpec {
    type Err = SpecError;

    /// Parses `[<ulid>|]<physical>:<virtual>[:<rights>][;<subpath>:<rights>]*` in steps: the
    /// string's shape, the id, the physical side, the root and rights, the overrides.
    fn from_str(spec: &str) -> Result<Self, SpecError> {
        check_shape(spec)?;
        let (id, rest) = split_id(spec)?;
        let parsed = (|| {
            let (physical, location, rest) = split_physical(spec, rest)?;
            let mut parts = rest.split(';');
            let (root, rights) = parse_head(spec, parts.next().unwrap_or_default())?;
            let (overrides, rules) = parse_overrides(spec, parts)?;
            Ok(Self { id, physical: physical.to_owned(), location: Ok(location), root, rights, overrides, rules })
        })();
        parsed.map_err(|error: SpecError| match drive_reading(rest) {
            // `w:/w:rw` meant a directory `w`: say why it was read otherwise.
            Some((letter, after)) if matches!(error.part, SpecPart::Root | SpecPart::Shape) => SpecError {
                hint: format!(
                    "`{letter}:{after}` reads as a drive path (one letter, then `:`); for a directory named `{letter}`, write `./{letter}:{after}`"
                ),
                ..error
            },
            _ => error,
        })
    }
}

/// `w:/x…` → (`w`, `/x…`): a spec whose physical side reads as a drive path, where a
/// one-letter directory name was likely meant.
fn drive_reading(rest: &str) -> Option<(char, &str)> {
    let mut characters = rest.chars();
    let letter = characters.next().filter(char::is_ascii_alphabetic)?;
    let after = rest[1..].strip_prefix(':')?;
    after.starts_with('/').then_some((letter, after))
}

fn check_shape(spec: &str) -> Result<(), SpecError> {
    if spec.trim().is_empty() {
        return Err(SpecError::new(spec, SpecPart::Shape, "the mount string is empty", SHAPE_HINT));
    }
    if spec.chars().any(char::is_control) {
        return Err(SpecError::new(spec, SpecPart::Shape, "the mount string contains a control character", SHAPE_HINT));
    }
    Ok(())
}

/// The optional `<ulid>|` before the physical side (a quoted physical side has none).
fn split_id(spec: &str) -> Result<(Option<MountId>, &str), SpecError> {
    if spec.starts_with('"') {
        return Ok((None, spec));
    }
    let Some((candidate, after)) = spec.split_once('|') else { return Ok((None, spec)) };
    let id = MountId::new(candidate).map_err(|rule| {
        SpecError::new(
            spec,
            SpecPart::Id,
            format!("the id `{candidate}` before `|` is not valid: {rule}"),
            "use a ULID such as `01HZY3M5Q8V7K2N4P6R8T0W2X4|./data:/src:ro`, or quote a physical path that contains `|`",
        )
    })?;
    Ok((Some(id), after))
}

/// The physical side (quoted, a drive path, an object URL, or everything up to the first `:`),
/// what it names, and what follows its `:`.
fn split_physical<'s>(spec: &str, rest: &'s str) -> Result<(&'s str, Location, &'s str), SpecError> {
    let quoted = rest.starts_with('"');
    let (physical, rest) = match rest.strip_prefix('"') {
        Some(quoted) => split_quoted(spec, quoted)?,
        None => split_unquoted(spec, rest)?,
    };
    if physical.is_empty() {
        return Err(SpecError::new(
            spec,
            SpecPart::Physical,
            "the physical path is empty",
            "name a directory on this machine, for example `./data:/src:ro`",
        ));
    }
    let location = if quoted {
        Location::Local(PathBuf::from(physical))
    } else {
        Location::parse(physical).map_err(|rule| SpecError::new(spec, SpecPart::Physical, rule, OBJECT_HINT))?
    };
    Ok((physical, location, rest))
}

fn split_quoted<'s>(spec: &str, quoted: &'s str) -> Result<(&'s str, &'s str), SpecError> {
    let Some(end) = quoted.find('"') else {
        return Err(SpecError::new(
            spec,
            SpecPart::Physical,
            "the quoted physical path has no closing `\"`",
            "close the quotes, for example `\"a:b\":/src:ro`",
        ));
    };
    let Some(rest) = quoted[end + 1..].strip_prefix(':') else {
        return Err(SpecError::new(
            spec,
            SpecPart::Shape,
            "a `:` and the virtual root must follow the quoted physical path",
            SHAPE_HINT,
        ));
    };
    Ok((&quoted[..end], rest))
}

fn split_unquoted<'s>(spec: &str, rest: &'s str) -> Result<(&'s str, &'s str), SpecError> {
    let skip = if strip_drive(rest).is_some() {
        2
    } else if let Some((_, body)) = url_scheme(rest) {
        rest.len() - body.len()
    } else {
        0
    };
    let Some(colon) = rest[skip..].find(':').map(|index| index + skip) else {
        return Err(SpecError::new(
            spec,
            SpecPart::Shape,
            "there is no `:` between the physical path and the virtual root",
            SHAPE_HINT,
        ));
    };
    let physical = &rest[..colon];
    if physical.contains('"') {
        return Err(SpecError::new(
            spec,
            SpecPart::Physical,
            "a `\"` may only open and close a quoted physical path",
            "quote the whole physical path, for example `\"my:dir\":/src:ro`",
        ));
    }
    Ok((physical, &rest[colon + 1..]))
}

/// `<virtual>[:<rights>]`.
fn parse_head(spec: &str, head: &str) -> Result<(MountRoot, Rights), SpecError> {
    let (root_text, rights_text) = match head.split_once(':') {
        Some((root, rights)) => (root, Some(rights)),
        None => (head, None),
    };
    let root = MountRoot::new(root_text).map_err(|rule| {
        SpecError::new(
            spec,
            SpecPart::Root,
            format!("the virtual root `{root_text}` is not valid: {rule}"),
            "use a root such as `/src` or `/output`",
        )
    })?;
    let rights = match rights_text {
        None => Rights::ReadOnly,
        Some(token) => parse_rights(spec, token)?,
    };
    Ok((root, rights))
}

const OVERRIDE_HINT: &str =
    "write sub-paths as `;<subpath>:<ro|rw|rwnd|hidden>`, for example `;vendor:ro` or `;**/*.key:hidden`";

/// `;<subpath>:<rights>`, each sub-path once: literal paths with rights are overrides; globs
/// and `hidden` paths are rules, which only take away.
fn parse_overrides<'s>(
    spec: &str,
    parts: impl Iterator<Item = &'s str>,
) -> Result<(Vec<SubPathRights>, Vec<SubPathRule>), SpecError> {
    let mut overrides: Vec<SubPathRights> = Vec::new();
    let mut rules: Vec<SubPathRule> = Vec::new();
    for part in parts {
        let Some((path, token)) = part.rsplit_once(':') else {
            return Err(SpecError::new(
                spec,
                SpecPart::Override,
                format!("the override `{part}` has no rights"),
                OVERRIDE_HINT,
            ));
        };
        let hidden = token.eq_ignore_ascii_case("hidden");
        if !hidden && !is_glob(path) {
            let segments = parse_subpath(spec, path)?;
            // Sub-paths that differ only in case or in Unicode normalization are one place on
            // a disk that ignores them, and two rights for one place would leave the answer
            // to the order they came in.
            let same = |existing: &SubPathRights| {
                existing.segments.len() == segments.len()
                    && existing.segments.iter().zip(&segments).all(|(a, b)| same_name(a, b))
            };
            if overrides.iter().any(same) {
                return Err(SpecError::new(
                    spec,
                    SpecPart::Override,
                    format!("the sub-path `{path}` has two overrides"),
                    "keep one override per sub-path (sub-paths that differ only in case or Unicode normalization count as one)",
                ));
            }
            overrides.push(SubPathRights { segments, rights: parse_subpath_rights(spec, token)? });
            continue;
        }
        let effect = if hidden { RuleEffect::Hidden } else { glob_effect(spec, path, token)? };
        if let Err(error) = anchored_glob(path) {
            return Err(SpecError::new(
                spec,
                SpecPart::Override,
                format!("the sub-path `{path}` is not valid: {}", error.reason),
                "write a path or glob relative to the mount root, for example `;secrets:hidden` or `;**/*.key:hidden`",
            ));
        }
        if rules.iter().any(|existing| existing.glob == path) {
            return Err(SpecError::new(
                spec,
                SpecPart::Override,
                format!("the sub-path `{path}` has two rules"),
                "keep one rule per sub-path",
            ));
        }
        rules.push(SubPathRule { glob: path.to_owned(), effect });
    }
    check_inside_hidden(spec, &overrides, &rules)?;
    Ok((overrides, rules))
}

/// A glob's rights: `ro` only, since a glob takes away and never grants.
fn glob_effect(spec: &str, path: &str, token: &str) -> Result<RuleEffect, SpecError> {
    match parse_subpath_rights(spec, token)? {
        Rights::ReadOnly => Ok(RuleEffect::ReadOnly),
        rights => Err(SpecError::new(
            spec,
            SpecPart::Override,
            format!("the glob `{path}` cannot grant `{rights}`: a glob may only be `ro` or `hidden`"),
            "grant writes with a literal sub-path, like `;vendor:rw`, and narrow them with globs, like `;**/*.lock:ro`",
        )),
    }
}

/// Refuses an override at or inside a hidden sub-path, where it could only mean "show this
/// part of what is hidden", which a hidden path does not allow.
fn check_inside_hidden(spec: &str, overrides: &[SubPathRights], rules: &[SubPathRule]) -> Result<(), SpecError> {
    for hidden in rules.iter().filter(|rule| rule.effect == RuleEffect::Hidden) {
        let Ok(glob) = anchored_glob(&hidden.glob) else { continue };
        let matcher = glob.compile_matcher();
        for item in overrides {
            let segments = item.segments();
            if (1..=segments.len()).any(|end| matcher.is_match(&*folded(&segments[..end].join("/")))) {
                return Err(SpecError::new(
                    spec,
                    SpecPart::Override,
                    format!(
                        "the override `{}:{}` lies inside `{}`, which is hidden",
                        item.path(),
                        item.rights,
                        hidden.glob
                    ),
                    "a hidden path is absent with everything in it; hide the names inside it instead, for example `;secrets/*.key:hidden`",
                ));
            }
        }
    }
    Ok(())
}

fn parse_rights(spec: &str, token: &str) -> Result<Rights, SpecError> {
    token.parse().map_err(|()| {
        SpecError::new(
            spec,
            SpecPart::Rights,
            format!("rights must be `ro`, `rw` or `rwnd`, not `{token}`"),
            "use `ro` (read only), `rw` (read and write) or `rwnd` (read and write, no delete)",
        )
    })
}

/// A sub-path's rights token (`hidden` is taken before this).
fn parse_subpath_rights(spec: &str, token: &str) -> Result<Rights, SpecError> {
    token.parse().map_err(|()| {
        SpecError::new(
            spec,
            SpecPart::Rights,
            format!("a sub-path's rights must be `ro`, `rw`, `rwnd` or `hidden`, not `{token}`"),
            "use `ro` (read only), `rw` (read and write), `rwnd` (read and write, no delete) or `hidden` (absent to agents)",
        )
    })
}

fn parse_subpath(spec: &str, path: &str) -> Result<Vec<String>, SpecError> {
    let fail = |rule: &str| {
        SpecError::new(
            spec,
            SpecPart::Override,
            format!("the sub-path `{path}` is not valid: {rule}"),
            "write a relative path inside the mount, for example `;vendor/lib:ro`",
        )
    };
    if path.is_empty() {
        return Err(fail("it is empty"));
    }
    if path.starts_with('/') {
        return Err(fail("it must be relative to the mount root"));
    }
    let segments: Vec<String> = path.split('/').map(str::to_owned).collect();
    if segments.iter().any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err(fail("it must be canonical (no empty, `.` or `..` segments)"));
    }
    if path.contains('"') {
        return Err(fail("it must not contain `\"`"));
    }
    Ok(segments)
}

impl fmt::Display for MountSpec {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(id) = &self.id {
            write!(formatter, "{id}|")?;
        }
        if matches!(self.location, Ok(Location::Local(_))) && needs_quotes(&self.physical) {
            write!(formatter, "\"{}\"", self.physical)?;
        } else {
            formatter.write_str(&self.physical)?;
        }
        write!(formatter, ":{}:{}", self.root, self.rights)?;
        for item in &self.overrides {
            write!(formatter, ";{}:{}", item.path(), item.rights)?;
        }
        for rule in &self.rules {
            write!(formatter, ";{}:{}", rule.glob, rule.token())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! parses {
        ($name:ident, $input:expr, $physical:expr, $root:expr, $rights:expr, $display:expr) => {
            #[test]
            fn $name() {
                let spec: MountSpec = $input.parse().unwrap();
                assert_eq!(spec.physical(), $physical);
                assert_eq!(spec.root().as_str(), $root);
                assert_eq!(spec.rights(), $rights);
                assert_eq!(spec.to_string(), $display);
                assert_eq!(spec.to_string().parse::<MountSpec>().unwrap(), spec);
            }
        };
    }

    macro_rules! refuses {
        ($name:ident, $input:expr, $part:expr, $message:expr) => {
            #[test]
            fn $name() {
                let error = $input.parse::<MountSpec>().unwrap_err();
                assert_eq!(error.part(), $part);
                assert_eq!(error.to_string(), $message);
                assert!(!error.hint().is_empty());
            }
        };
    }

    parses!(default_ro, "../data:/src", "../data", "/src", Rights::ReadOnly, "../data:/src:ro");
    parses!(rw, "./out:/output:rw", "./out", "/output", Rights::ReadWrite, "./out:/output:rw");
    parses!(rwnd_upper, "./out:/output:RWND", "./out", "/output", Rights::ReadWriteNoDelete, "./out:/output:rwnd");
    parses!(trailing_slash_root, "/data:/output/:rw", "/data", "/output", Rights::ReadWrite, "/data:/output:rw");
    parses!(drive_letter, "C:\\data:/src:ro", "C:\\data", "/src", Rights::ReadOnly, "C:\\data:/src:ro");
    parses!(drive_forward, "d:/x/y:/src", "d:/x/y", "/src", Rights::ReadOnly, "d:/x/y:/src:ro");
    parses!(quoted_colon, "\"a:b\":/x:ro", "a:b", "/x", Rights::ReadOnly, "\"a:b\":/x:ro");
    parses!(quoted_semicolon, "\"a;b\":/x:rw", "a;b", "/x", Rights::ReadWrite, "\"a;b\":/x:rw");
    parses!(quoted_trailing_backslash, "\"C:\\dir\\\":/x", "C:\\dir\\", "/x", Rights::ReadOnly, "\"C:\\dir\\\":/x:ro");
    parses!(one_letter, "\"A\":/src:rw", "A", "/src", Rights::ReadWrite, "\"A\":/src:rw");
    parses!(letter_colon, "\"a:\":/src:rw", "a:", "/src", Rights::ReadWrite, "\"a:\":/src:rw");
    parses!(
        s3_url,
        "s3://team-data/inputs:/src:ro",
        "s3://team-data/inputs",
        "/src",
        Rights::ReadOnly,
        "s3://team-data/inputs:/src:ro"
    );
    parses!(
        s3_bucket_only,
        "s3://bucket:/output:rw",
        "s3://bucket",
        "/output",
        Rights::ReadWrite,
        "s3://bucket:/output:rw"
    );
    parses!(nested_root, "/d:/src/vendor:ro", "/d", "/src/vendor", Rights::ReadOnly, "/d:/src/vendor:ro");
    parses!(spaces, "/my data:/src", "/my data", "/src", Rights::ReadOnly, "/my data:/src:ro");
    parses!(
        with_overrides,
        "/w:/work:rw;vendor:ro;vendor/gen:rwnd",
        "/w",
        "/work",
        Rights::ReadWrite,
        "/w:/work:rw;vendor:ro;vendor/gen:rwnd"
    );
    parses!(
        with_id,
        "01hzy3m5q8v7k2n4p6r8t0w2x4|./data:/src:ro",
        "./data",
        "/src",
        Rights::ReadOnly,
        "01HZY3M5Q8V7K2N4P6R8T0W2X4|./data:/src:ro"
    );

    parses!(
        with_rules,
        "/w:/work:rw;docs:ro;**/*.key:hidden;secrets:HIDDEN;docs/*.md:ro",
        "/w",
        "/work",
        Rights::ReadWrite,
        "/w:/work:rw;docs:ro;**/*.key:hidden;secrets:hidden;docs/*.md:ro"
    );

    #[test]
    fn rules_are_kept_apart_from_overrides() {
        let spec: MountSpec = "/w:/work:rw;docs:ro;**/*.key:hidden;secrets:hidden;docs/*.md:ro".parse().unwrap();
        assert_eq!(spec.overrides().iter().map(SubPathRights::path).collect::<Vec<_>>(), ["docs"]);
        let rules: Vec<(&str, RuleEffect)> = spec.rules().iter().map(|rule| (rule.glob(), rule.effect())).collect();
        assert_eq!(
            rules,
            [("**/*.key", RuleEffect::Hidden), ("secrets", RuleEffect::Hidden), ("docs/*.md", RuleEffect::ReadOnly)]
        );
    }

    refuses!(
        glob_granting_writes,
        "/w:/work:ro;**/*.md:rw",
        SpecPart::Override,
        "invalid mount `/w:/work:ro;**/*.md:rw`: the glob `**/*.md` cannot grant `rw`: a glob may only be `ro` or `hidden`"
    );
    refuses!(
        glob_granting_rwnd,
        "/w:/work:ro;out/*:rwnd",
        SpecPart::Override,
        "invalid mount `/w:/work:ro;out/*:rwnd`: the glob `out/*` cannot grant `rwnd`: a glob may only be `ro` or `hidden`"
    );
    refuses!(
        rule_twice,
        "/w:/work:rw;a/*:ro;a/*:hidden",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;a/*:ro;a/*:hidden`: the sub-path `a/*` has two rules"
    );
    refuses!(
        override_inside_hidden,
        "/w:/work:rw;secrets:hidden;secrets/public:ro",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;secrets:hidden;secrets/public:ro`: the override `secrets/public:ro` lies inside `secrets`, which is hidden"
    );
    refuses!(
        override_on_hidden,
        "/w:/work:ro;secrets:rw;secrets:hidden",
        SpecPart::Override,
        "invalid mount `/w:/work:ro;secrets:rw;secrets:hidden`: the override `secrets:rw` lies inside `secrets`, which is hidden"
    );
    refuses!(
        override_inside_hidden_glob,
        "/w:/work:ro;**/*.key:hidden;a.key/x:rw",
        SpecPart::Override,
        "invalid mount `/w:/work:ro;**/*.key:hidden;a.key/x:rw`: the override `a.key/x:rw` lies inside `**/*.key`, which is hidden"
    );
    refuses!(
        absolute_rule,
        "/w:/work:rw;/x*:hidden",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;/x*:hidden`: the sub-path `/x*` is not valid: it must be relative to the mount root"
    );
    refuses!(
        dotdot_rule,
        "/w:/work:rw;../*.key:hidden",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;../*.key:hidden`: the sub-path `../*.key` is not valid: it must be canonical (no empty, `.` or `..` segments)"
    );
    refuses!(
        unclosed_class,
        "/w:/work:rw;a/[b:ro",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;a/[b:ro`: the sub-path `a/[b` is not valid: unclosed character class; missing ']'"
    );
    refuses!(
        rule_bad_token,
        "/w:/work:rw;*.key:hide",
        SpecPart::Rights,
        "invalid mount `/w:/work:rw;*.key:hide`: a sub-path's rights must be `ro`, `rw`, `rwnd` or `hidden`, not `hide`"
    );

    parses!(
        double_star_rules,
        "/w:/work:rw;docs/**/*.md:ro;notes/**:hidden",
        "/w",
        "/work",
        Rights::ReadWrite,
        "/w:/work:rw;docs/**/*.md:ro;notes/**:hidden"
    );
    refuses!(
        override_on_a_directory_hidden_with_what_it_holds,
        "/w:/work:rw;notes/**:hidden;notes:rw",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;notes/**:hidden;notes:rw`: the override `notes:rw` lies inside `notes/**`, which is hidden"
    );
    refuses!(
        override_twice_in_another_normalization,
        "/w:/work:rw;caf\u{e9}:ro;cafe\u{301}:rw",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;caf\u{e9}:ro;cafe\u{301}:rw`: the sub-path `cafe\u{301}` has two overrides"
    );
    refuses!(
        override_inside_hidden_in_another_normalization,
        "/w:/work:rw;caf\u{e9}:hidden;cafe\u{301}/menu:ro",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;caf\u{e9}:hidden;cafe\u{301}/menu:ro`: the override `cafe\u{301}/menu:ro` lies inside `caf\u{e9}`, which is hidden"
    );

    #[test]
    fn overrides_are_kept() {
        let spec: MountSpec = "/w:/work:rw;vendor/lib:ro".parse().unwrap();
        assert_eq!(spec.overrides()[0].segments(), ["vendor", "lib"]);
        assert_eq!(spec.overrides()[0].rights(), Rights::ReadOnly);
    }

    refuses!(empty, "", SpecPart::Shape, "invalid mount ``: the mount string is empty");
    refuses!(
        no_colon,
        "./data",
        SpecPart::Shape,
        "invalid mount `./data`: there is no `:` between the physical path and the virtual root"
    );
    refuses!(
        bad_rights,
        "./out:/output:rx",
        SpecPart::Rights,
        "invalid mount `./out:/output:rx`: rights must be `ro`, `rw` or `rwnd`, not `rx`"
    );
    refuses!(
        empty_rights,
        "./out:/output:",
        SpecPart::Rights,
        "invalid mount `./out:/output:`: rights must be `ro`, `rw` or `rwnd`, not ``"
    );
    refuses!(
        relative_root,
        "./out:output",
        SpecPart::Root,
        "invalid mount `./out:output`: the virtual root `output` is not valid: a virtual root starts with `/`, like `/src`"
    );
    refuses!(
        slash_root,
        "./out:/",
        SpecPart::Root,
        "invalid mount `./out:/`: the virtual root `/` is not valid: the virtual root cannot be `/` alone; name it, like `/src`"
    );
    refuses!(
        s3_dot_bucket,
        "s3://./team:/data:rw",
        SpecPart::Physical,
        "invalid mount `s3://./team:/data:rw`: `.` is not an S3 bucket name"
    );
    refuses!(
        s3_upper_case_bucket,
        "s3://Team/x:/data",
        SpecPart::Physical,
        "invalid mount `s3://Team/x:/data`: `Team` is not an S3 bucket name"
    );
    refuses!(
        s3_percent_bucket,
        "s3://%74eam:/data",
        SpecPart::Physical,
        "invalid mount `s3://%74eam:/data`: `%74eam` is not an S3 bucket name"
    );
    refuses!(
        s3_ip_bucket,
        "s3://10.0.0.1:/data",
        SpecPart::Physical,
        "invalid mount `s3://10.0.0.1:/data`: `10.0.0.1` is not an S3 bucket name"
    );
    refuses!(
        s3_no_bucket,
        "s3://:/data",
        SpecPart::Physical,
        "invalid mount `s3://:/data`: the URL `s3://` names no bucket"
    );
    refuses!(
        s3_dotdot_prefix,
        "s3://team/a/../b:/data",
        SpecPart::Physical,
        "invalid mount `s3://team/a/../b:/data`: the prefix of `s3://team/a/../b` has an empty, `.` or `..` segment"
    );
    refuses!(
        s3_reserved_prefix_segment,
        "s3://team/work/.vfs-tmp-journal:/data",
        SpecPart::Physical,
        "invalid mount `s3://team/work/.vfs-tmp-journal:/data`: the prefix of `s3://team/work/.vfs-tmp-journal` has the segment `.vfs-tmp-journal`: names that begin with `.vfs-tmp-` are vfs's own"
    );
    refuses!(
        s3_empty_prefix_segment,
        "s3://team//b:/data",
        SpecPart::Physical,
        "invalid mount `s3://team//b:/data`: the prefix of `s3://team//b` has an empty, `.` or `..` segment"
    );
    parses!(
        s3_trailing_slash,
        "s3://team.data-1/in/:/src",
        "s3://team.data-1/in/",
        "/src",
        Rights::ReadOnly,
        "s3://team.data-1/in/:/src:ro"
    );
    parses!(
        memory_any_name,
        "memory://Any_Name/x:/m:rw",
        "memory://Any_Name/x",
        "/m",
        Rights::ReadWrite,
        "memory://Any_Name/x:/m:rw"
    );

    #[test]
    fn bucket_names_follow_s3_rules() {
        for good in ["abc", "a-b.c9", &"a".repeat(63)] {
            assert!(super::valid_bucket(good), "{good}");
        }
        for bad in ["ab", &"a".repeat(64), "-ab", "ab-", ".ab", "a..b", "a_b", "aBc", "192.168.1.1", "a b", "a%b"] {
            assert!(!super::valid_bucket(bad), "{bad}");
        }
    }

    /// A root is a virtual path: within its limits, or refused here (it panicked when the
    /// registry was built).
    #[test]
    fn a_root_past_a_virtual_paths_limits_is_refused() {
        let longest = format!("/{}", "a".repeat(255));
        assert_eq!(MountRoot::new(&longest).map(|root| root.as_str().len()), Ok(256));
        assert!(crate::VirtualPath::new(&longest).is_ok());
        assert_eq!(
            MountRoot::new(&format!("/{}", "a".repeat(256))).unwrap_err(),
            "a virtual root's segments are at most 255 bytes long"
        );
        let deep = format!("/{}", vec!["b".repeat(200); 21].join("/"));
        assert_eq!(MountRoot::new(&deep).unwrap_err(), "a virtual root is at most 4096 bytes long");
        let under = format!("/{}", vec!["b".repeat(200); 20].join("/"));
        assert!(MountRoot::new(&under).is_ok() && crate::VirtualPath::new(&under).is_ok());
    }

    refuses!(
        dotdot_root,
        "./out:/a/..:rw",
        SpecPart::Root,
        "invalid mount `./out:/a/..:rw`: the virtual root `/a/..` is not valid: a virtual root has no `.` or `..` segments"
    );
    refuses!(
        space_in_root,
        "./out:/my out",
        SpecPart::Root,
        "invalid mount `./out:/my out`: the virtual root `/my out` is not valid: a virtual root's segments use only letters, digits, `.`, `_` and `-`"
    );
    refuses!(
        double_slash_root,
        "./out://x",
        SpecPart::Root,
        "invalid mount `./out://x`: the virtual root `//x` is not valid: a virtual root has no empty segments (`//`)"
    );
    refuses!(
        drive_root,
        "./out:C",
        SpecPart::Root,
        "invalid mount `./out:C`: the virtual root `C` is not valid: a virtual root starts with `/`, like `/src`"
    );
    refuses!(empty_physical, ":/src", SpecPart::Physical, "invalid mount `:/src`: the physical path is empty");
    refuses!(
        unclosed_quote,
        "\"abc:/src",
        SpecPart::Physical,
        "invalid mount `\"abc:/src`: the quoted physical path has no closing `\"`"
    );
    refuses!(
        stray_quote,
        "a\"b:/src",
        SpecPart::Physical,
        "invalid mount `a\"b:/src`: a `\"` may only open and close a quoted physical path"
    );
    refuses!(
        bad_id,
        "nope|./d:/src",
        SpecPart::Id,
        "invalid mount `nope|./d:/src`: the id `nope` before `|` is not valid: a mount id is a ULID: 26 characters of Crockford base32"
    );
    refuses!(
        override_without_rights,
        "/w:/work:rw;vendor",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;vendor`: the override `vendor` has no rights"
    );
    refuses!(
        override_absolute,
        "/w:/work:rw;/vendor:ro",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;/vendor:ro`: the sub-path `/vendor` is not valid: it must be relative to the mount root"
    );
    refuses!(
        override_dotdot,
        "/w:/work:rw;a/../b:ro",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;a/../b:ro`: the sub-path `a/../b` is not valid: it must be canonical (no empty, `.` or `..` segments)"
    );
    refuses!(
        override_twice,
        "/w:/work:rw;a:ro;a:rw",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;a:ro;a:rw`: the sub-path `a` has two overrides"
    );
    refuses!(
        override_twice_in_another_case,
        "/w:/work:rw;VENDOR:rw;vendor:ro",
        SpecPart::Override,
        "invalid mount `/w:/work:rw;VENDOR:rw;vendor:ro`: the sub-path `vendor` has two overrides"
    );
    refuses!(
        override_bad_rights,
        "/w:/work:rw;a:xx",
        SpecPart::Rights,
        "invalid mount `/w:/work:rw;a:xx`: a sub-path's rights must be `ro`, `rw`, `rwnd` or `hidden`, not `xx`"
    );
    refuses!(
        control,
        "/w\n:/work",
        SpecPart::Shape,
        "invalid mount `/w\\n:/work`: the mount string contains a control character"
    );

    #[test]
    fn hints_give_a_fix() {
        let error = "./out:/output:rx".parse::<MountSpec>().unwrap_err();
        assert_eq!(error.hint(), "use `ro` (read only), `rw` (read and write) or `rwnd` (read and write, no delete)");
    }

    /// `w:/w:rw` reads as the drive path `w:/w` mounted at `rw`: the refusal says so, and how
    /// to name a directory `w`. A drive path's other mistakes keep their own hints.
    #[test]
    fn a_one_letter_directory_read_as_a_drive_is_named_in_the_hint() {
        let root = "w:/w:rw".parse::<MountSpec>().unwrap_err();
        assert_eq!(
            root.to_string(),
            "invalid mount `w:/w:rw`: the virtual root `rw` is not valid: a virtual root starts with `/`, like `/src`"
        );
        assert_eq!(
            root.hint(),
            "`w:/w:rw` reads as a drive path (one letter, then `:`); for a directory named `w`, write `./w:/w:rw`"
        );
        let shape = "d:/data".parse::<MountSpec>().unwrap_err();
        assert_eq!(shape.part(), SpecPart::Shape);
        assert_eq!(
            shape.hint(),
            "`d:/data` reads as a drive path (one letter, then `:`); for a directory named `d`, write `./d:/data`"
        );
        let rights = "C:/data:/src:rx".parse::<MountSpec>().unwrap_err();
        assert_eq!(rights.hint(), "use `ro` (read only), `rw` (read and write) or `rwnd` (read and write, no delete)");
        assert_eq!("./w:/w:rw".parse::<MountSpec>().unwrap().root.as_str(), "/w");
    }

    refuses!(
        unknown_scheme,
        "ftp://host/x:/src",
        SpecPart::Physical,
        "invalid mount `ftp://host/x:/src`: `ftp://` is not an object store vfs knows (`s3://`, `memory://`); quote a local path that looks like a URL"
    );
    parses!(
        quoted_url_is_a_path,
        "\"s3://team-data\":/src",
        "s3://team-data",
        "/src",
        Rights::ReadOnly,
        "\"s3://team-data\":/src:ro"
    );
    parses!(drive_with_slashes, "C://data:/src", "C://data", "/src", Rights::ReadOnly, "C://data:/src:ro");

    /// The one rule of "is this an object URL" (`Location::parse`), wherever a location is made:
    /// a mount string, `MountSpec::new`, `MountSpec::local`.
    #[test]
    fn a_location_is_parsed_once_by_one_rule() {
        let location = |text: &str| text.parse::<MountSpec>().unwrap().location().cloned();
        let Some(Location::Object(url)) = location("s3://team-data/in/put/:/src") else { panic!("an object URL") };
        assert_eq!(
            (url.scheme(), url.bucket(), url.prefix()),
            (ObjectScheme::S3, "team-data", &["in".to_owned(), "put".to_owned()][..])
        );
        let Some(Location::Object(url)) = location("memory://Any/x:/m") else { panic!("an object URL") };
        assert_eq!((url.scheme().as_str(), url.bucket()), ("memory", "Any"));
        assert_eq!(location("./data:/src"), Some(Location::Local(PathBuf::from("./data"))));
        assert_eq!(location("\"memory://x\":/src"), Some(Location::Local(PathBuf::from("memory://x"))));
        assert_eq!(location("C://data:/src"), Some(Location::Local(PathBuf::from("C://data"))));
        let root = || MountRoot::new("/r").unwrap();
        // Built in code, the same rule; an object URL that breaks it is refused when opened.
        let built = MountSpec::new("s3://team-data", root(), Rights::ReadOnly);
        assert!(matches!(built.location(), Some(Location::Object(_))));
        assert_eq!(MountSpec::new("ftp://x", root(), Rights::ReadOnly).location(), None);
        assert_eq!(MountSpec::new("s3://Team", root(), Rights::ReadOnly).location(), None);
        // A directory named like a URL is a local path, and shows quoted so that it reads back.
        let odd = MountSpec::local(PathBuf::from("/srv/s3://odd"), root(), Rights::ReadOnly);
        assert_eq!(odd.location(), Some(&Location::Local(PathBuf::from("/srv/s3://odd"))));
        let named = MountSpec::local(PathBuf::from("s3://odd"), root(), Rights::ReadOnly);
        assert_eq!(named.to_string(), "\"s3://odd\":/r:ro");
        assert_eq!(named.to_string().parse::<MountSpec>().unwrap(), named);
        let moved = "./data:/src".parse::<MountSpec>().unwrap().with_directory(PathBuf::from("/base/data"));
        assert_eq!(
            (moved.physical(), moved.location()),
            ("/base/data", Some(&Location::Local(PathBuf::from("/base/data"))))
        );
    }

    #[test]
    fn rights_table() {
        assert!(Rights::ReadOnly.allows(Access::Read));
        assert!(!Rights::ReadOnly.allows(Access::Write));
        assert!(!Rights::ReadOnly.allows(Access::Delete));
        assert!(Rights::ReadWrite.allows(Access::Delete));
        assert!(Rights::ReadWriteNoDelete.allows(Access::Write));
        assert!(!Rights::ReadWriteNoDelete.allows(Access::Delete));
    }
}
