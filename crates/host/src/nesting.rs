//! A bound on how deep a crew file nests flow collections, checked before the YAML parser
//! sees the file.
//!
//! The scanner behind `serde_norway` (libyaml) keeps one simple-key slot per open flow
//! collection (`[` or `{`) and visits the open slots for every token, so its time grows with
//! the file's length times its flow depth: a 240 KB crew file of `[` keeps a core busy for
//! about 90 s before the parser's recursion limit answers. This module walks the bytes once
//! and refuses the file at the first line that opens more collections than a crew needs.
//!
//! A count of brackets alone would be wrong both ways: brackets inside a quoted or block
//! scalar, a comment or a tag open nothing, while a quote inside a plain scalar (`it's`) opens
//! nothing either, and taking it for one would hide every bracket after it. So the walk
//! follows the scanner's own rules for where a token starts and where it ends (libyaml's
//! `yaml_parser_fetch_next_token` and the scalar scanners, `unsafe-libyaml-norway` 0.2):
//! comments, quoted, plain and block scalars, tags, anchors, directives, document markers,
//! every line break the scanner knows (CR, LF, CRLF, U+0085, U+2028, U+2029), and the block
//! indentation that ends a plain or block scalar. It keeps only what decides a token's
//! extent: the flow depth, whether a simple key may start, the block indentation stack and
//! the block context's pending simple key. Where the scanner would stop with an error, the
//! walk goes on: the parser will refuse that file anyway, and going on never hides a bracket.
//!
//! Nesting in block style (indented lines, `- - - x`) costs the scanner nothing per level:
//! the parser's recursion limit refuses it in linear time, so it is left to the parser.

/// The deepest a crew file may nest flow collections. A `mounts:` block needs one level; the
/// framework's own keys rarely need more than a few.
pub(crate) const MAX_FLOW_DEPTH: usize = 64;

/// The line (1-based) where a file first opens more flow collections than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooDeep {
    pub(crate) line: usize,
}

/// Walks `text` as the YAML scanner would and refuses it at the first `[` or `{` that opens
/// a collection deeper than `limit`.
pub(crate) fn check_flow_depth(text: &str, limit: usize) -> Result<(), TooDeep> {
    Walk::new(text.as_bytes(), limit).run().map(|_| ())
}

/// Where a token started: what the scanner's simple-key slot remembers.
#[derive(Debug, Clone, Copy)]
struct Mark {
    index: usize,
    line: usize,
    column: usize,
}

/// The scanner's state, reduced to what decides where tokens start and end.
struct Walk<'t> {
    bytes: &'t [u8],
    /// The byte offset of the next character.
    position: usize,
    /// Where the stream starts (after a byte order mark): the scanner's index counts from here.
    start: usize,
    line: usize,
    /// In characters, as the scanner counts columns.
    column: usize,
    flow: usize,
    deepest: usize,
    limit: usize,
    /// The block indentation (`-1` before any block collection) and the enclosing ones.
    indent: isize,
    indents: Vec<isize>,
    simple_key_allowed: bool,
    /// The pending simple key of the block context (flow level 0), while it is possible: a
    /// `:` after it opens a block mapping at its column, which moves the indentation.
    block_key: Option<Mark>,
}

/// A simple key goes stale past this many bytes (or at the next line), as in the scanner.
const SIMPLE_KEY_SPAN: usize = 1024;

impl<'t> Walk<'t> {
    fn new(bytes: &'t [u8], limit: usize) -> Self {
        let start = if bytes.starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
        Self {
            bytes,
            position: start,
            start,
            line: 0,
            column: 0,
            flow: 0,
            deepest: 0,
            limit,
            indent: -1,
            indents: Vec::new(),
            simple_key_allowed: true,
            block_key: None,
        }
    }

    /// The deepest flow nesting of the whole text, or the line that passed the limit.
    fn run(mut self) -> Result<usize, TooDeep> {
        loop {
            self.skip_to_token();
            self.stale_key();
            self.unroll(self.column_signed());
            if self.is_end(0) {
                return Ok(self.deepest);
            }
            self.token()?;
        }
    }

    /// A directive or a document marker, which only start a line; false if neither is here.
    fn line_start_token(&mut self) -> bool {
        let directive = self.column == 0 && self.at(0) == b'%';
        let marker =
            self.column == 0 && (self.starts_with(b"---") || self.starts_with(b"...")) && self.is_blank_or_end(3);
        if !directive && !marker {
            return false;
        }
        self.unroll(-1);
        self.remove_key();
        self.simple_key_allowed = false;
        if marker {
            self.advance_by(3);
        } else {
            // A directive's name and values hold no structure; it eats its line break.
            while !self.is_break_or_end(0) {
                self.advance();
            }
            self.skip_line();
        }
        true
    }

    /// One token, dispatched as `yaml_parser_fetch_next_token` does.
    fn token(&mut self) -> Result<(), TooDeep> {
        if self.line_start_token() {
            return Ok(());
        }
        let byte = self.at(0);
        match byte {
            b'[' | b'{' => {
                self.save_key();
                self.flow += 1;
                if self.flow > self.limit {
                    return Err(TooDeep { line: self.line + 1 });
                }
                self.deepest = self.deepest.max(self.flow);
                self.simple_key_allowed = true;
                self.advance();
            }
            b']' | b'}' => {
                self.remove_key();
                self.flow = self.flow.saturating_sub(1);
                self.simple_key_allowed = false;
                self.advance();
            }
            b',' => {
                self.remove_key();
                self.simple_key_allowed = true;
                self.advance();
            }
            b'-' if self.is_blank_or_end(1) => {
                self.roll(self.column_signed());
                self.remove_key();
                self.simple_key_allowed = true;
                self.advance();
            }
            b'?' if self.flow > 0 || self.is_blank_or_end(1) => {
                self.roll(self.column_signed());
                self.remove_key();
                self.simple_key_allowed = self.flow == 0;
                self.advance();
            }
            b':' if self.flow > 0 || self.is_blank_or_end(1) => {
                self.value();
                self.advance();
            }
            b'*' | b'&' => {
                self.save_key();
                self.simple_key_allowed = false;
                self.advance();
                while is_anchor_char(self.at(0)) {
                    self.advance();
                }
            }
            b'!' => {
                self.save_key();
                self.simple_key_allowed = false;
                self.tag();
            }
            b'|' | b'>' if self.flow == 0 => {
                self.remove_key();
                self.simple_key_allowed = true;
                self.block_scalar();
            }
            b'\'' | b'"' => {
                self.save_key();
                self.simple_key_allowed = false;
                self.quoted(byte == b'\'');
            }
            _ if self.starts_plain() => {
                self.save_key();
                self.simple_key_allowed = false;
                self.plain();
            }
            // "found character that cannot start any token": the parser stops here.
            _ => self.advance(),
        }
        Ok(())
    }

    /// Spaces, comments and line breaks before a token (`yaml_parser_scan_to_next_token`).
    fn skip_to_token(&mut self) {
        loop {
            if self.column == 0 && self.starts_with(b"\xEF\xBB\xBF") {
                self.advance();
            }
            while self.at(0) == b' ' || ((self.flow > 0 || !self.simple_key_allowed) && self.at(0) == b'\t') {
                self.advance();
            }
            if self.at(0) == b'#' {
                while !self.is_break_or_end(0) {
                    self.advance();
                }
            }
            if self.break_width(0) == 0 {
                return;
            }
            self.skip_line();
            if self.flow == 0 {
                self.simple_key_allowed = true;
            }
        }
    }

    /// `:` as a value indicator: after a possible simple key of the block context, the block
    /// mapping starts at the key's column; else at the `:` itself.
    fn value(&mut self) {
        if self.flow > 0 {
            self.simple_key_allowed = false;
            return;
        }
        if let Some(key) = self.block_key.take() {
            self.roll(isize::try_from(key.column).unwrap_or(isize::MAX));
            self.simple_key_allowed = false;
        } else {
            self.roll(self.column_signed());
            self.simple_key_allowed = true;
        }
    }

    /// `!tag` or `!<verbatim>`: the characters a tag URI may hold (`'` among them).
    fn tag(&mut self) {
        if self.at(1) == b'<' {
            self.advance_by(2);
            while is_uri_char(self.at(0), true) {
                self.advance();
            }
            if self.at(0) == b'>' {
                self.advance();
            }
        } else {
            self.advance();
            while is_uri_char(self.at(0), false) {
                self.advance();
            }
        }
    }

    /// A single- or double-quoted scalar, over as many lines as it takes.
    fn quoted(&mut self, single: bool) {
        let quote = if single { b'\'' } else { b'"' };
        self.advance();
        while !self.is_end(0) {
            let byte = self.at(0);
            if single && byte == b'\'' && self.at(1) == b'\'' {
                self.advance_by(2);
            } else if byte == quote {
                self.advance();
                return;
            } else if !single && byte == b'\\' {
                self.advance();
                if self.break_width(0) > 0 {
                    self.skip_line();
                } else {
                    self.advance();
                }
            } else if self.break_width(0) > 0 {
                self.skip_line();
            } else {
                self.advance();
            }
        }
    }

    /// A plain scalar (`yaml_parser_scan_plain_scalar`): it ends at `: `, at ` #`, at a flow
    /// indicator inside a flow collection, at a document marker, or at a line indented no
    /// more than the enclosing block collection.
    fn plain(&mut self) {
        let indent = self.indent + 1;
        let mut leading_blanks = false;
        loop {
            if self.column == 0 && (self.starts_with(b"---") || self.starts_with(b"...")) && self.is_blank_or_end(3) {
                break;
            }
            if self.at(0) == b'#' {
                break;
            }
            while !self.is_blank_or_end(0) {
                let byte = self.at(0);
                if self.flow > 0 && byte == b':' && matches!(self.at(1), b',' | b'?' | b'[' | b']' | b'{' | b'}') {
                    // "found unexpected ':'": the parser stops here.
                    return;
                }
                if (byte == b':' && self.is_blank_or_end(1))
                    || (self.flow > 0 && matches!(byte, b',' | b'[' | b']' | b'{' | b'}'))
                {
                    break;
                }
                self.advance();
            }
            if !(self.is_blank(0) || self.break_width(0) > 0) {
                break;
            }
            while self.is_blank(0) || self.break_width(0) > 0 {
                if self.is_blank(0) {
                    self.advance();
                } else {
                    self.skip_line();
                    leading_blanks = true;
                }
            }
            if self.flow == 0 && self.column_signed() < indent {
                break;
            }
        }
        if leading_blanks {
            self.simple_key_allowed = true;
        }
    }

    /// A literal or folded block scalar (`yaml_parser_scan_block_scalar`): its header, then
    /// every line indented at least as deep as its content.
    fn block_scalar(&mut self) {
        self.advance();
        let mut increment: isize = 0;
        if matches!(self.at(0), b'+' | b'-') {
            self.advance();
            if self.at(0).is_ascii_digit() {
                increment = isize::from(self.at(0) - b'0');
                self.advance();
            }
        } else if self.at(0).is_ascii_digit() {
            increment = isize::from(self.at(0) - b'0');
            self.advance();
            if matches!(self.at(0), b'+' | b'-') {
                self.advance();
            }
        }
        while self.is_blank(0) {
            self.advance();
        }
        if self.at(0) == b'#' {
            while !self.is_break_or_end(0) {
                self.advance();
            }
        }
        if !self.is_break_or_end(0) {
            // "did not find expected comment or line break": the parser stops here.
            return;
        }
        self.skip_line();
        let mut indent = match increment {
            0 => 0,
            _ if self.indent >= 0 => self.indent + increment,
            _ => increment,
        };
        if !self.block_breaks(&mut indent) {
            return;
        }
        while self.column_signed() == indent && !self.is_end(0) {
            while !self.is_break_or_end(0) {
                self.advance();
            }
            self.skip_line();
            if !self.block_breaks(&mut indent) {
                return;
            }
        }
    }

    /// The indentation and empty lines of a block scalar; with `indent` 0, detects it from
    /// the first content line. False where the scanner would stop (a tab as indentation).
    fn block_breaks(&mut self, indent: &mut isize) -> bool {
        let mut widest: isize = 0;
        loop {
            while (*indent == 0 || self.column_signed() < *indent) && self.at(0) == b' ' {
                self.advance();
            }
            widest = widest.max(self.column_signed());
            if (*indent == 0 || self.column_signed() < *indent) && self.at(0) == b'\t' {
                return false;
            }
            if self.break_width(0) == 0 {
                break;
            }
            self.skip_line();
        }
        if *indent == 0 {
            *indent = widest.max(self.indent + 1).max(1);
        }
        true
    }

    /// Whether a plain scalar starts here (the last test of `yaml_parser_fetch_next_token`).
    fn starts_plain(&self) -> bool {
        let byte = self.at(0);
        let indicator = self.is_blank_or_end(0) || b"-?:,[]{}#&*!|>'\"%@`".contains(&byte);
        !indicator
            || (byte == b'-' && !self.is_blank(1))
            || (self.flow == 0 && matches!(byte, b'?' | b':') && !self.is_blank_or_end(1))
    }

    /// Saves a simple key of the block context here, when one may start.
    fn save_key(&mut self) {
        if self.flow == 0 && self.simple_key_allowed {
            self.block_key = Some(Mark { index: self.position - self.start, line: self.line, column: self.column });
        }
    }

    fn remove_key(&mut self) {
        if self.flow == 0 {
            self.block_key = None;
        }
    }

    /// A simple key is possible on its own line and for a bounded span only.
    fn stale_key(&mut self) {
        let index = self.position - self.start;
        if self.block_key.is_some_and(|key| key.line < self.line || key.index + SIMPLE_KEY_SPAN < index) {
            self.block_key = None;
        }
    }

    fn roll(&mut self, column: isize) {
        if self.flow == 0 && self.indent < column {
            self.indents.push(self.indent);
            self.indent = column;
        }
    }

    fn unroll(&mut self, column: isize) {
        if self.flow == 0 {
            while self.indent > column {
                self.indent = self.indents.pop().unwrap_or(-1);
            }
        }
    }

    fn column_signed(&self) -> isize {
        isize::try_from(self.column).unwrap_or(isize::MAX)
    }

    /// The byte `offset` bytes ahead; 0 past the end (the scanner's end marker).
    fn at(&self, offset: usize) -> u8 {
        self.bytes.get(self.position + offset).copied().unwrap_or(0)
    }

    fn starts_with(&self, prefix: &[u8]) -> bool {
        self.bytes[self.position..].starts_with(prefix)
    }

    /// The end of the stream; a NUL character ends it for the scanner too (and the reader
    /// refuses it).
    fn is_end(&self, offset: usize) -> bool {
        self.at(offset) == 0
    }

    fn is_blank(&self, offset: usize) -> bool {
        matches!(self.at(offset), b' ' | b'\t')
    }

    /// The width in bytes of the line break at `offset` (CRLF counts as one), 0 if none.
    fn break_width(&self, offset: usize) -> usize {
        match (self.at(offset), self.at(offset + 1), self.at(offset + 2)) {
            (b'\r', b'\n', _) | (0xC2, 0x85, _) => 2,
            (b'\r' | b'\n', _, _) => 1,
            (0xE2, 0x80, 0xA8 | 0xA9) => 3,
            _ => 0,
        }
    }

    fn is_break_or_end(&self, offset: usize) -> bool {
        self.break_width(offset) > 0 || self.is_end(offset)
    }

    fn is_blank_or_end(&self, offset: usize) -> bool {
        self.is_blank(offset) || self.is_break_or_end(offset)
    }

    /// Steps over one character.
    fn advance(&mut self) {
        let width = match self.at(0) {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        if self.position < self.bytes.len() {
            self.position = (self.position + width).min(self.bytes.len());
            self.column += 1;
        }
    }

    fn advance_by(&mut self, characters: usize) {
        for _ in 0..characters {
            self.advance();
        }
    }

    /// Steps over one line break, if there is one.
    fn skip_line(&mut self) {
        let width = self.break_width(0);
        if width > 0 {
            self.position += width;
            self.line += 1;
            self.column = 0;
        }
    }
}

/// What an anchor or alias name may hold.
fn is_anchor_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-')
}

/// What a tag may hold; `,`, `[` and `]` only inside `!<…>`.
fn is_uri_char(byte: u8, verbatim: bool) -> bool {
    is_anchor_char(byte) || b";/?:@&=+$.%!~*'()".contains(&byte) || (verbatim && matches!(byte, b',' | b'[' | b']'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deepest(text: &str) -> usize {
        Walk::new(text.as_bytes(), usize::MAX).run().unwrap_or_else(|_| unreachable!("no limit"))
    }

    macro_rules! depth {
        ($name:ident, $text:expr, $expected:expr) => {
            #[test]
            fn $name() {
                assert_eq!(deepest($text), $expected, "{:?}", $text);
            }
        };
    }

    depth!(flow_collections_nest, "a: [b, {c: [d]}]\n", 3);
    depth!(json_is_yaml, r#"{"a": [1, {"b": [2]}], "c": {}}"#, 4);
    depth!(closed_collections_do_not_add_up, "a: [[b]]\nc: [[d]]\n", 2);
    depth!(single_quotes_hide_brackets, "a: '[[[[ it''s ]]'\nb: [c]\n", 1);
    depth!(double_quotes_hide_brackets, "a: \"[[ \\\" [[\"\nb: [c]\n", 1);
    depth!(quotes_span_lines, "a: \"x\n  [[[\"\nb: [c]\n", 1);
    depth!(crlf_inside_quotes, "a: 'x\r\n[[['\r\nb: [c]\r\n", 1);
    depth!(a_comment_hides_brackets, "a: b # [[[[\nc: [d] # [[\n", 1);
    depth!(a_comment_inside_a_flow, "a: [ # [[[\n  b]\n", 1);
    depth!(a_literal_block_hides_brackets, "a: |\n  [[[[\n  ]\nb: [c]\n", 1);
    depth!(a_folded_block_with_indicators, "a: >2-\n   [[[\n  [[\nb: [c]\n", 1);
    depth!(a_block_scalar_ends_at_a_shallower_line, "a:\n  - |\n    [[\n  - [[x]]\n", 2);
    depth!(brackets_inside_a_block_plain_scalar, "a: x[[[[y\n", 0);
    depth!(a_flow_plain_scalar_stops_at_a_bracket, "a: [x[[y]]]\n", 3);
    depth!(an_apostrophe_in_a_plain_scalar_opens_nothing, "a: it's\nb: [[c]]\n", 2);
    depth!(a_quote_that_continues_a_plain_scalar, "a: b\n  'c\nd: [[e]]\n", 2);
    depth!(a_quote_after_a_plain_word_in_a_flow, "[a 'b, [[c]]]\n", 3);
    depth!(a_tag_may_hold_an_apostrophe, "a: !x'y [[b]]\n", 2);
    depth!(a_verbatim_tag_may_hold_brackets, "a: !<x[[> [b]\n", 1);
    depth!(an_anchor_and_an_alias, "a: &x [[b]]\nc: *x\n", 2);
    depth!(unicode_line_separator_ends_a_comment, "a: b # x\u{2028}c: [[d]]\n", 2);
    depth!(next_line_ends_a_comment, "# x\u{85}[[[y]]]\n", 3);
    depth!(a_directive_holds_no_structure, "%TAG !e! tag:x,2000:[[\n--- [[a]]\n", 2);
    depth!(every_document_counts, "a: 1\n---\n[[[b]]]\n", 3);
    depth!(a_byte_order_mark_is_skipped, "\u{feff}[[a]]\n", 2);
    depth!(multibyte_text_keeps_columns, "é: |\n  [[\nb: [c]\n", 1);

    #[test]
    fn refuses_at_the_line_that_passes_the_limit() {
        let text = format!("name: deep\nmounts:\n  - {}\n", "[".repeat(120_000));
        assert_eq!(check_flow_depth(&text, MAX_FLOW_DEPTH), Err(TooDeep { line: 3 }));
        let text = format!("mounts: [{}{}]\n", "[".repeat(63), "]".repeat(63));
        assert_eq!(check_flow_depth(&text, MAX_FLOW_DEPTH), Ok(()));
    }

    /// The nesting of a parsed value, keys included.
    fn value_depth(value: &serde_norway::Value) -> usize {
        match value {
            serde_norway::Value::Sequence(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
            serde_norway::Value::Mapping(mapping) => {
                1 + mapping.iter().map(|(key, value)| value_depth(key).max(value_depth(value))).max().unwrap_or(0)
            }
            serde_norway::Value::Tagged(tagged) => value_depth(&tagged.value),
            _ => 0,
        }
    }

    /// Flow nodes that are not collections: plain, quoted and tagged scalars that hold
    /// brackets, quotes and comment signs the scanner must not take for structure.
    const FLOW_LEAVES: &[&str] = &[
        "a",
        "x y",
        "it's",
        "a#b",
        "é",
        "-1",
        "'[[ it''s {'",
        "\"[\\\" {\"",
        "'two\n  [lines'",
        "\"x\n  ] {\"",
        "!t v",
        "!e'x v",
        "&n v",
        "!<t[,]> v",
    ];

    /// Block values after `key:`: block scalars, multi-line plain scalars, comments.
    const BLOCK_VALUES: &[&str] = &[
        " |\n  [[[ it's\n  'x\n",
        " >-\n  {{ #\n\n  ]] \"\n",
        " |2\n   [[\n  ]]\n",
        " it's [[\n  'continued [[\n",
        " # [[ '\n  value\n",
        " plain\n",
        "\n  - it's\n  - x\n",
    ];

    /// A flow node and the flow depth it nests.
    fn flow_node() -> impl proptest::strategy::Strategy<Value = (String, usize)> {
        use proptest::strategy::Strategy as _;
        let leaf = proptest::sample::select(FLOW_LEAVES).prop_map(|text| (text.to_owned(), 0));
        leaf.prop_recursive(5, 32, 4, |inner| {
            proptest::prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(|items| {
                    let depth = 1 + items.iter().map(|(_, depth)| *depth).max().unwrap_or(0);
                    let texts: Vec<&str> = items.iter().map(|(text, _)| text.as_str()).collect();
                    (format!("[{}]", texts.join(", ")), depth)
                }),
                proptest::collection::vec(inner, 0..3).prop_map(|items| {
                    let depth = 1 + items.iter().map(|(_, depth)| *depth).max().unwrap_or(0);
                    let texts: Vec<String> =
                        items.iter().enumerate().map(|(index, (text, _))| format!("k{index}: {text}")).collect();
                    (format!("{{{}}}", texts.join(", ")), depth)
                }),
            ]
        })
    }

    /// A crew-like document and the flow depth it nests.
    fn document() -> impl proptest::strategy::Strategy<Value = (String, usize)> {
        use proptest::strategy::Strategy as _;
        let value = proptest::prop_oneof![
            flow_node().prop_map(|(text, depth)| (format!(" {text} # [[ '\n"), depth)),
            proptest::sample::select(BLOCK_VALUES).prop_map(|text| (text.to_owned(), 0)),
        ];
        proptest::collection::vec(value, 1..6).prop_map(|values| {
            let depth = values.iter().map(|(_, depth)| *depth).max().unwrap_or(0);
            let lines: Vec<String> =
                values.iter().enumerate().map(|(index, (value, _))| format!("key{index}:{value}")).collect();
            let text = lines.concat();
            (text, depth)
        })
    }

    /// Pieces of YAML, good and bad, that change where tokens start and end.
    const PIECES: &[&str] = &[
        "a",
        "b: ",
        "- ",
        "? ",
        ": ",
        ":",
        "[",
        "]",
        "{",
        "}",
        ", ",
        "'",
        "\"",
        "''",
        "\\\"",
        "\\",
        " #",
        "#",
        " ",
        "  ",
        "\n",
        "\n  ",
        "\r\n",
        "\t",
        "|",
        ">",
        "|2",
        "!t",
        "!<u>",
        "&a ",
        "*a",
        "it's",
        "x[y",
        "\u{2028}",
        "\u{85}",
        "---\n",
        "...\n",
        "%YAML 1.2\n",
        "é",
        "-1",
    ];

    /// Inserts `insert` into `text` at the character boundary nearest `at` (a fraction).
    fn insert_at(text: &mut String, at: f64, insert: &str) {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a position in a short test string"
        )]
        let mut index = (text.len() as f64 * at) as usize;
        while !text.is_char_boundary(index) {
            index -= 1;
        }
        text.insert_str(index, insert);
    }

    proptest::proptest! {
        /// On crew-like documents the parser accepts, the walk finds exactly the flow depth
        /// they were built with.
        #[test]
        fn finds_the_depth_of_valid_documents((text, depth) in document()) {
            if serde_norway::from_str::<serde_norway::Value>(&text).is_ok() {
                proptest::prop_assert_eq!(deepest(&text), depth, "{:?}", text);
            }
        }

        /// On those documents broken by pieces of YAML, good and bad, and by 150 `[`, the walk
        /// agrees with the parser: it never counts less flow nesting than the parser met (a
        /// file the parser refused for its recursion limit is refused by the walk too), and
        /// never more than a parsed value nests.
        #[test]
        fn agrees_with_the_parser_on_broken_documents(
            (mut text, _) in document(),
            pieces in proptest::collection::vec((proptest::sample::select(PIECES), 0.0..1.0f64), 0..6),
            deep in proptest::option::of(0.0..1.0f64),
        ) {
            for (piece, at) in pieces {
                insert_at(&mut text, at, piece);
            }
            if let Some(at) = deep {
                insert_at(&mut text, at, &"[".repeat(150));
            }
            let walked = deepest(&text);
            match serde_norway::from_str::<serde_norway::Value>(&text) {
                Ok(value) => proptest::prop_assert!(walked <= value_depth(&value), "{:?}: {}", text, walked),
                // An alias of an enclosing node nests without brackets: not this walk's business.
                Err(error) if error.to_string().starts_with("recursion limit exceeded") && !text.contains('*') => {
                    proptest::prop_assert!(walked > MAX_FLOW_DEPTH, "{:?}: {}", text, walked);
                }
                Err(_) => {}
            }
        }
    }
}
