//! Virtual paths: the only path currency an agent ever sees.
//!
//! A [`VirtualPath`] is checked and canonicalised once, when it is built (`docs/design.md`, resolution rules 1
//! and 2), so every later stage (routing, rights, confinement) works on a value that cannot be
//! malformed. There is deliberately no conversion to or from a host path: the only way from a
//! virtual path to the disk is resolution beneath a mount's directory handle.

use std::fmt;
use std::str::FromStr;

/// The longest virtual path accepted, in bytes. Longer input is refused before any work.
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest single segment accepted, in bytes (the common file-name limit).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// An absolute, `/`-separated, canonical virtual path such as `/src/app/main.rs`.
///
/// Built only through [`VirtualPath::new`] (or `FromStr`/`Deserialize`, which share the same
/// validator): NUL and control characters, relative paths, drive paths and `~` are refused;
/// `//` collapses, `.` is dropped and `..` is applied lexically, never above `/`. A backslash is
/// an ordinary character, not a separator.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VirtualPath {
    text: String,
}

/// Why a string is not a virtual path. The message states the rule and never echoes the input,
/// so it is safe to show to an agent whatever the agent sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParsePathError {
    /// The string was empty.
    #[error("invalid path: the path is empty; virtual paths look like `/src/main.rs`")]
    Empty,
    /// A drive path such as `C:\data` or `C:/data`.
    #[error("invalid path: drive paths are not virtual paths; use a mount root such as `/src/main.rs`")]
    DrivePath,
    /// A path starting with `~`.
    #[error("invalid path: `~` is not expanded; virtual paths start at a mount root such as `/src`")]
    Tilde,
    /// A path that does not start with `/`.
    #[error("invalid path: virtual paths are absolute and start with `/`, like `/src/main.rs`")]
    NotAbsolute,
    /// A NUL byte anywhere in the path.
    #[error("invalid path: the path contains a NUL character")]
    Nul,
    /// A control character (U+0000 to U+001F, U+007F to U+009F).
    #[error("invalid path: the path contains a control character")]
    Control,
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error("invalid path: the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// One segment is longer than [`MAX_SEGMENT_BYTES`].
    #[error("invalid path: a path segment is longer than {MAX_SEGMENT_BYTES} bytes")]
    SegmentTooLong,
}

impl VirtualPath {
    /// Validates and canonicalises `input` (`docs/design.md`, resolution rules 1 and 2).
    ///
    /// ```
    /// use vfs::VirtualPath;
    /// let path = VirtualPath::new("/src//app/./lib/../main.rs")?;
    /// assert_eq!(path.as_str(), "/src/app/main.rs");
    /// assert_eq!(path.root(), Some("src"));
    /// assert!(VirtualPath::new("src/main.rs").is_err());
    /// # Ok::<(), vfs::ParsePathError>(())
    /// ```
    pub fn new(input: &str) -> Result<Self, ParsePathError> {
        validate(input).map(|text| Self { text })
    }

    /// The virtual root `/`.
    #[must_use]
    pub fn root_path() -> Self {
        Self { text: "/".to_owned() }
    }

    /// The canonical text, always starting with `/`.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True for the virtual root `/`.
    #[must_use]
    pub fn is_root(&self) -> bool {
        self.text.len() == 1
    }

    /// The first segment (`src` for `/src/main.rs`), or `None` for `/`.
    #[must_use]
    pub fn root(&self) -> Option<&str> {
        self.components().next()
    }

    /// The segments, in order, without separators.
    #[must_use]
    pub fn components(&self) -> impl DoubleEndedIterator<Item = &str> + Clone {
        self.text[1..].split('/').filter(|segment| !segment.is_empty())
    }

    /// The last segment, or `None` for `/`.
    #[must_use]
    pub fn file_name(&self) -> Option<&str> {
        self.components().next_back()
    }

    /// The parent path (`/` is its own parent).
    #[must_use]
    pub fn parent(&self) -> Self {
        match self.text.rfind('/') {
            Some(0) | None => Self::root_path(),
            Some(index) => Self { text: self.text[..index].to_owned() },
        }
    }

    /// This path with one more segment. `name` must be a single plain segment (no `/`, not
    /// `.` or `..`); anything else is validated like agent input.
    pub fn join(&self, name: &str) -> Result<Self, ParsePathError> {
        if self.is_root() { Self::new(&format!("/{name}")) } else { Self::new(&format!("{}/{name}", self.text)) }
    }

    /// Joins segments known to be plain names (from a directory listing) without re-parsing.
    pub(crate) fn join_trusted(&self, name: &str) -> Self {
        debug_assert!(!name.contains('/') && name != "." && name != ".." && !name.is_empty());
        let mut text = String::with_capacity(self.text.len() + 1 + name.len());
        text.push_str(&self.text);
        if !self.is_root() {
            text.push('/');
        }
        text.push_str(name);
        Self { text }
    }

    /// True when an agent (or an undo) could name this path: it passes [`VirtualPath::new`] as
    /// it is. A path joined from names read from disk may not (a control character in a name,
    /// more than [`MAX_PATH_BYTES`] in all), and what is there cannot be put back by path.
    pub(crate) fn is_spelled(&self) -> bool {
        validate(&self.text).is_ok_and(|text| text == self.text)
    }

    /// True when `self` is `ancestor` or lies below it at a segment boundary.
    #[must_use]
    pub fn starts_with(&self, ancestor: &VirtualPath) -> bool {
        ancestor.is_root()
            || self.text == ancestor.text
            || (self.text.starts_with(&ancestor.text) && self.text.as_bytes().get(ancestor.text.len()) == Some(&b'/'))
    }
}

fn is_control(character: char) -> bool {
    character.is_control()
}

fn validate(input: &str) -> Result<String, ParsePathError> {
    if input.is_empty() {
        return Err(ParsePathError::Empty);
    }
    if input.len() > MAX_PATH_BYTES {
        return Err(ParsePathError::TooLong);
    }
    if input.contains('\0') {
        return Err(ParsePathError::Nul);
    }
    if input.chars().any(is_control) {
        return Err(ParsePathError::Control);
    }
    let bytes = input.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(ParsePathError::DrivePath);
    }
    if input.starts_with('~') {
        return Err(ParsePathError::Tilde);
    }
    if !input.starts_with('/') {
        return Err(ParsePathError::NotAbsolute);
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in input.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            name => {
                if name.len() > MAX_SEGMENT_BYTES {
                    return Err(ParsePathError::SegmentTooLong);
                }
                segments.push(name);
            }
        }
    }
    if segments.is_empty() {
        return Ok("/".to_owned());
    }
    let mut text = String::with_capacity(input.len());
    for segment in segments {
        text.push('/');
        text.push_str(segment);
    }
    Ok(text)
}

impl FromStr for VirtualPath {
    type Err = ParsePathError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        Self::new(input)
    }
}

impl fmt::Display for VirtualPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.text)
    }
}

impl fmt::Debug for VirtualPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "VirtualPath({:?})", self.text)
    }
}

impl AsRef<str> for VirtualPath {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for VirtualPath {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "VirtualPath".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "description": "A virtual path, like `/src/main.rs`." })
    }

    fn inline_schema() -> bool {
        true
    }
}

impl serde::Serialize for VirtualPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for VirtualPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! valid {
        ($name:ident, $input:expr, $canonical:expr) => {
            #[test]
            fn $name() {
                assert_eq!(VirtualPath::new($input).unwrap().as_str(), $canonical);
            }
        };
    }

    macro_rules! invalid {
        ($name:ident, $input:expr, $error:expr) => {
            #[test]
            fn $name() {
                assert_eq!(VirtualPath::new($input).unwrap_err(), $error);
            }
        };
    }

    valid!(root_only, "/", "/");
    valid!(double_slash_root, "//", "/");
    valid!(simple, "/src/main.rs", "/src/main.rs");
    valid!(collapses_slashes, "//src///main.rs", "/src/main.rs");
    valid!(drops_dot, "/src/./main.rs", "/src/main.rs");
    valid!(trailing_slash, "/src/", "/src");
    valid!(applies_parent, "/src/a/../main.rs", "/src/main.rs");
    valid!(parent_never_above_root, "/../../etc/passwd", "/etc/passwd");
    valid!(parent_to_root, "/src/..", "/");
    valid!(backslash_is_literal, "/src/a\\..\\b", "/src/a\\..\\b");
    valid!(percent_is_literal, "/src/%2e%2e/x", "/src/%2e%2e/x");
    valid!(tilde_inside_is_literal, "/src/~user", "/src/~user");
    valid!(unicode, "/src/caf\u{e9}/\u{2215}x", "/src/caf\u{e9}/\u{2215}x");
    valid!(dots_in_names, "/src/...", "/src/...");

    invalid!(empty, "", ParsePathError::Empty);
    invalid!(relative, "src/main.rs", ParsePathError::NotAbsolute);
    invalid!(dot_relative, "./src", ParsePathError::NotAbsolute);
    invalid!(drive_backslash, "C:\\data", ParsePathError::DrivePath);
    invalid!(drive_slash, "c:/data", ParsePathError::DrivePath);
    invalid!(tilde, "~/secret", ParsePathError::Tilde);
    invalid!(nul, "/src/a\0b", ParsePathError::Nul);
    invalid!(newline, "/src/a\nb", ParsePathError::Control);
    invalid!(escape_char, "/src/\u{1b}[31m", ParsePathError::Control);
    invalid!(c1_control, "/src/\u{85}", ParsePathError::Control);
    invalid!(too_long, &format!("/{}", "a/".repeat(3000)), ParsePathError::TooLong);
    invalid!(segment_too_long, &format!("/src/{}", "a".repeat(256)), ParsePathError::SegmentTooLong);

    #[test]
    fn accessors() {
        let path = VirtualPath::new("/src/app/main.rs").unwrap();
        assert_eq!(path.root(), Some("src"));
        assert_eq!(path.file_name(), Some("main.rs"));
        assert_eq!(path.parent().as_str(), "/src/app");
        assert_eq!(path.components().collect::<Vec<_>>(), ["src", "app", "main.rs"]);
        assert_eq!(VirtualPath::root_path().root(), None);
        assert_eq!(VirtualPath::new("/src").unwrap().parent().as_str(), "/");
        assert_eq!(path.join("x").unwrap().as_str(), "/src/app/main.rs/x");
    }

    #[test]
    fn starts_with_respects_segment_boundary() {
        let src = VirtualPath::new("/src").unwrap();
        assert!(VirtualPath::new("/src/a").unwrap().starts_with(&src));
        assert!(src.starts_with(&src));
        assert!(!VirtualPath::new("/src2/a").unwrap().starts_with(&src));
    }

    #[test]
    fn messages_state_the_rule_without_echoing_input() {
        assert_eq!(
            VirtualPath::new("src/x").unwrap_err().to_string(),
            "invalid path: virtual paths are absolute and start with `/`, like `/src/main.rs`"
        );
        assert_eq!(
            VirtualPath::new("/a\0").unwrap_err().to_string(),
            "invalid path: the path contains a NUL character"
        );
    }

    #[test]
    fn deserialize_goes_through_validation() {
        let path: VirtualPath = serde_json::from_str("\"/src/./a\"").unwrap();
        assert_eq!(path.as_str(), "/src/a");
        assert!(serde_json::from_str::<VirtualPath>("\"relative\"").is_err());
    }
}
