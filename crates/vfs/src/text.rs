//! Agent-bound text, kept as the pieces it was built from.
//!
//! Everything vfs tells an agent is made of two kinds of pieces. *Composed* pieces are what the
//! server writes itself: fixed wording, numbers, version tokens, mount roots and rights. Passed
//! pieces are what it only carries: file contents, diffs and grep lines, names read from disk,
//! and the agent's own input (paths, patterns, tool names), echoed as given. Composed pieces
//! are built from virtual paths and fixed wording, so no physical path can be in them by
//! construction; the registry's fail-closed scrub still looks at them, and at nothing else. A
//! passed piece is never rewritten: a file that mentions a physical path comes back as it is
//! (rewriting it would lose data and tell an agent which guesses are real).
//!
//! Where a text refers to an operation, one of its arguments, or says what to do next, it
//! holds the value ([`Operation`], [`Argument`], [`Hint`]), not a front end's words for it:
//! the front end that renders the text words it ([`AgentText::render_with`]), and the words
//! are composed pieces. `Display` uses the core's own [`Neutral`] wording.
//!
//! Names read from disk may hold control characters; in text they are escaped (`\n`, `\x1b`),
//! so a file name cannot forge lines of a listing. Structured content keeps the exact name.

use std::borrow::Cow;
use std::fmt;

use crate::hint::{Argument, Hint, Neutral, Operation, Wording};
use crate::path::VirtualPath;

/// Text for an agent: composed pieces, passed pieces and terms a front end words (see the
/// module documentation).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AgentText {
    pieces: Vec<Piece>,
}

#[derive(Clone, PartialEq, Eq)]
enum Piece {
    Composed(String),
    Passed(String),
    /// Worded by the front end that renders the text; composed once worded.
    Term(Term),
}

/// What a [`Piece::Term`] refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Term {
    Operation(Operation),
    Argument(Argument),
    Hint(Hint),
}

impl Term {
    fn words(self, wording: &dyn Wording) -> &'static str {
        match self {
            Term::Operation(operation) => wording.operation(operation),
            Term::Argument(argument) => wording.argument(argument),
            Term::Hint(hint) => wording.hint(hint),
        }
    }
}

impl AgentText {
    /// Empty text.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends wording the server composed (checked by the scrub).
    pub fn composed(&mut self, text: &str) -> &mut Self {
        if text.is_empty() {
            return self;
        }
        match self.pieces.last_mut() {
            // Adjacent composed pieces are scrubbed as one, so that nothing hides in a seam.
            Some(Piece::Composed(last)) => last.push_str(text),
            _ => self.pieces.push(Piece::Composed(text.to_owned())),
        }
        self
    }

    /// Appends data or the agent's own input, passed byte for byte.
    pub fn passed(&mut self, text: &str) -> &mut Self {
        if !text.is_empty() {
            self.pieces.push(Piece::Passed(text.to_owned()));
        }
        self
    }

    /// Appends a name read from disk (or a path built from such names), control characters
    /// escaped.
    pub fn name(&mut self, text: &str) -> &mut Self {
        self.passed(&escape_controls(text))
    }

    /// Appends a virtual path in backticks: `` `/src/a.txt` ``. The path is passed (it is the
    /// agent's input, or built from names on disk), with control characters escaped.
    pub fn code(&mut self, path: &VirtualPath) -> &mut Self {
        self.composed("`").name(path.as_str()).composed("`")
    }

    /// Appends what to do next, worded by the front end that renders the text.
    pub fn hint(&mut self, hint: Hint) -> &mut Self {
        self.pieces.push(Piece::Term(Term::Hint(hint)));
        self
    }

    /// Appends the name of an operation, worded by the front end that renders the text.
    pub fn operation(&mut self, operation: Operation) -> &mut Self {
        self.pieces.push(Piece::Term(Term::Operation(operation)));
        self
    }

    /// Appends the name of an argument, worded by the front end that renders the text.
    pub fn argument(&mut self, argument: Argument) -> &mut Self {
        self.pieces.push(Piece::Term(Term::Argument(argument)));
        self
    }

    /// Appends other text, keeping its pieces.
    pub fn append(&mut self, other: &AgentText) -> &mut Self {
        for piece in &other.pieces {
            match piece {
                Piece::Composed(text) => self.composed(text),
                Piece::Passed(text) => self.passed(text),
                Piece::Term(term) => {
                    self.pieces.push(Piece::Term(*term));
                    &mut *self
                }
            };
        }
        self
    }

    /// The hints the text carries, in order.
    pub fn hints(&self) -> impl Iterator<Item = Hint> + '_ {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Term(Term::Hint(hint)) => Some(*hint),
            _ => None,
        })
    }

    /// True when nothing was appended.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The text in the core's own wording ([`Neutral`]), with every composed piece passed
    /// through `scrub` and every passed piece as it is.
    pub fn render(&self, scrub: impl FnMut(&str) -> Cow<'_, str>) -> String {
        self.render_with(&Neutral, scrub)
    }

    /// The text with what it refers to worded by `wording` (a front end's), every composed
    /// piece (the words with the wording around them) passed through `scrub` and every passed
    /// piece as it is.
    pub fn render_with(&self, wording: &dyn Wording, mut scrub: impl FnMut(&str) -> Cow<'_, str>) -> String {
        let mut text = String::with_capacity(self.pieces.iter().map(|piece| piece.text(wording).len()).sum());
        // A term's words and the composed pieces beside it are one run, scrubbed as one, so
        // that nothing hides in a seam between them. Passed pieces (a file's content, a
        // tree's names) go straight into the text, never copied on the way.
        let mut run: Option<Cow<'_, str>> = None;
        for piece in &self.pieces {
            if let Piece::Passed(passed) = piece {
                if let Some(words) = run.take() {
                    text.push_str(&scrub(&words));
                }
                text.push_str(passed);
                continue;
            }
            let words = piece.text(wording);
            run = Some(match run.take() {
                None => Cow::Borrowed(words),
                Some(mut joined) => {
                    joined.to_mut().push_str(words);
                    joined
                }
            });
        }
        if let Some(words) = run {
            text.push_str(&scrub(&words));
        }
        text
    }

    /// The text as `wording` words it, unscrubbed (a front end's `Display`).
    #[must_use]
    pub fn to_string_with(&self, wording: &dyn Wording) -> String {
        self.pieces.iter().map(|piece| piece.text(wording)).collect()
    }
}

impl Piece {
    fn text<'p>(&'p self, wording: &dyn Wording) -> &'p str {
        match self {
            Piece::Composed(text) | Piece::Passed(text) => text,
            Piece::Term(term) => term.words(wording),
        }
    }
}

impl fmt::Display for AgentText {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for piece in &self.pieces {
            formatter.write_str(piece.text(&Neutral))?;
        }
        Ok(())
    }
}

impl fmt::Debug for AgentText {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), formatter)
    }
}

impl From<&str> for AgentText {
    /// Composed text.
    fn from(text: &str) -> Self {
        let mut agent = Self::new();
        agent.composed(text);
        agent
    }
}

/// Builds an [`AgentText`] from pieces: string literals and `String`s are composed; wrap what
/// is passed in [`passed`], [`name`] or [`code`].
macro_rules! agent_text {
    ($($piece:expr),* $(,)?) => {{
        let mut text = $crate::text::AgentText::new();
        $( $crate::text::Push::push_onto($piece, &mut text); )*
        text
    }};
}
pub(crate) use agent_text;

/// What [`agent_text!`] accepts.
pub(crate) trait Push {
    fn push_onto(self, text: &mut AgentText);
}

impl Push for &str {
    fn push_onto(self, text: &mut AgentText) {
        text.composed(self);
    }
}

impl Push for String {
    fn push_onto(self, text: &mut AgentText) {
        text.composed(&self);
    }
}

impl Push for &String {
    fn push_onto(self, text: &mut AgentText) {
        text.composed(self);
    }
}

impl Push for &AgentText {
    fn push_onto(self, text: &mut AgentText) {
        text.append(self);
    }
}

impl Push for Hint {
    fn push_onto(self, text: &mut AgentText) {
        text.hint(self);
    }
}

impl Push for Operation {
    fn push_onto(self, text: &mut AgentText) {
        text.operation(self);
    }
}

impl Push for Argument {
    fn push_onto(self, text: &mut AgentText) {
        text.argument(self);
    }
}

/// A passed piece (data, the agent's input), for [`agent_text!`].
pub(crate) struct Passed<'a>(pub(crate) &'a str);

/// A passed name from disk, control characters escaped, for [`agent_text!`].
pub(crate) struct Name<'a>(pub(crate) &'a str);

/// A virtual path in backticks, for [`agent_text!`].
pub(crate) struct Code<'a>(pub(crate) &'a VirtualPath);

impl Push for Passed<'_> {
    fn push_onto(self, text: &mut AgentText) {
        text.passed(self.0);
    }
}

impl Push for Name<'_> {
    fn push_onto(self, text: &mut AgentText) {
        text.name(self.0);
    }
}

impl Push for Code<'_> {
    fn push_onto(self, text: &mut AgentText) {
        text.code(self.0);
    }
}

/// `passed(x)` in [`agent_text!`].
pub(crate) fn passed(text: &str) -> Passed<'_> {
    Passed(text)
}

/// `name(x)` in [`agent_text!`].
pub(crate) fn name(text: &str) -> Name<'_> {
    Name(text)
}

/// `code(path)` in [`agent_text!`].
pub(crate) fn code(path: &VirtualPath) -> Code<'_> {
    Code(path)
}

/// Escapes the characters that would break a line-based text: control characters (C0, DEL,
/// C1) and the Unicode line and paragraph separators, as `\n`, `\t`, `\r` or `\u{…}`.
#[must_use]
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let needs = |character: char| character.is_control() || matches!(character, '\u{2028}' | '\u{2029}');
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        match character {
            '\n' => escaped.push_str("\\n"),
            '\t' => escaped.push_str("\\t"),
            '\r' => escaped.push_str("\\r"),
            other if needs(other) => escaped.push_str(&format!("\\u{{{:x}}}", u32::from(other))),
            other => escaped.push(other),
        }
    }
    Cow::Owned(escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_composed_pieces_are_scrubbed() {
        let path = VirtualPath::new("/src/home/op").unwrap();
        let text = agent_text!["read ", code(&path), ": ", passed("/home/op says hi"), " from /home/op"];
        assert_eq!(text.to_string(), "read `/src/home/op`: /home/op says hi from /home/op");
        let rendered = text.render(|piece| Cow::Owned(piece.replace("/home/op", "[x]")));
        assert_eq!(rendered, "read `/src/home/op`: /home/op says hi from [x]");
    }

    #[test]
    fn adjacent_composed_pieces_are_scrubbed_as_one() {
        let text = agent_text!["/home", "/op"];
        assert_eq!(text.render(|piece| Cow::Owned(piece.replace("/home/op", "[x]"))), "[x]");
    }

    /// A front end's words, to tell them from the core's own.
    struct Loud;

    impl Wording for Loud {
        fn operation(&self, _: Operation) -> &'static str {
            "OP"
        }
        fn argument(&self, _: Argument) -> &'static str {
            "ARG"
        }
        fn hint(&self, hint: Hint) -> &'static str {
            match hint {
                Hint::Overwrite => "/home/op OVERWRITE",
                _ => "OTHER",
            }
        }
    }

    #[test]
    fn terms_are_worded_by_the_renderer_and_scrubbed_with_the_words_around_them() {
        let text =
            agent_text!["`", Operation::Grep, "` and `", Argument::OldText, "`; ", passed("/home/op"), Hint::Overwrite];
        assert_eq!(text.to_string(), "`grep` and `old_text`; /home/opask for an overwrite to replace it");
        assert_eq!(text.to_string_with(&Loud), "`OP` and `ARG`; /home/op/home/op OVERWRITE");
        // The passed piece stays as it is; the words are composed, scrubbed with the composed
        // text beside them as one.
        let mut seen = Vec::new();
        let rendered = text.render_with(&Loud, |piece| {
            seen.push(piece.to_owned());
            Cow::Owned(piece.replace("/home/op", "[x]"))
        });
        assert_eq!(rendered, "`OP` and `ARG`; /home/op[x] OVERWRITE");
        assert_eq!(seen, ["`OP` and `ARG`; ", "/home/op OVERWRITE"]);
        assert_eq!(text.render(|piece| Cow::Borrowed(piece)), text.to_string());
    }

    #[test]
    fn a_text_carries_its_hints_through_append() {
        let mut text = agent_text!["[truncated; ", Hint::Truncated(Operation::Tree), "]"];
        assert_eq!(text.hints().collect::<Vec<_>>(), [Hint::Truncated(Operation::Tree)]);
        let mut outer = AgentText::from("a ");
        outer.append(&text).hint(Hint::Literal);
        assert_eq!(outer.hints().collect::<Vec<_>>(), [Hint::Truncated(Operation::Tree), Hint::Literal]);
        text = AgentText::from("plain");
        assert_eq!(text.hints().count(), 0);
    }

    #[test]
    fn names_from_disk_cannot_forge_lines() {
        assert_eq!(
            escape_controls("a\nb\tc\r\u{1b}[31md\u{7f}\u{85}\u{2028}"),
            "a\\nb\\tc\\r\\u{1b}[31md\\u{7f}\\u{85}\\u{2028}"
        );
        assert!(matches!(escape_controls("plain name.txt"), Cow::Borrowed(_)));
        let mut text = AgentText::new();
        text.name("x\ny");
        assert_eq!(text.to_string(), "x\\ny");
    }
}
