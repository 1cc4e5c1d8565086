//! The fail-closed scrub: the last line of defence on agent-bound text.
//!
//! Types make it hard to put a physical path into an agent-facing string; this module catches
//! one that got through anyway. It runs on what the server composed (see [`crate::AgentText`]),
//! never on data or on the agent's own input, and replaces every known spelling of every mount's
//! physical directory (as given, absolute, canonical; whole paths and URLs, never bare words)
//! and every internal root name with a neutral marker. A hit means a bug upstream, so it logs a
//! warning for the operator.

use std::borrow::Cow;

/// What replaces a physical path in agent-bound text.
pub const REDACTED: &str = "[redacted]";

#[derive(Debug, Clone, Default)]
pub(crate) struct Scrubber {
    /// Physical spellings, longest first so that the most specific wins.
    spellings: Vec<String>,
    /// Internal roots such as `/llm-logs`, matched as whole virtual-path prefixes.
    internal_roots: Vec<String>,
}

fn is_path_char(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-' | b'~') || byte >= 0x80
}

impl Scrubber {
    pub(crate) fn new(
        spellings: impl IntoIterator<Item = String>,
        internal_roots: impl IntoIterator<Item = String>,
        agent_roots: impl IntoIterator<Item = String>,
    ) -> Self {
        let agent_roots: Vec<String> = agent_roots.into_iter().collect();
        let mut spellings: Vec<String> = spellings
            .into_iter()
            .map(|spelling| {
                let trimmed = spelling.trim_end_matches(['/', '\\']);
                if trimmed.is_empty() { spelling } else { trimmed.to_owned() }
            })
            // `/` alone cannot be scrubbed without destroying every path; a physical base that
            // is itself an agent-facing virtual path (mount `/work` at `/work`) reads the same
            // either way, so redacting it would only garble legitimate output.
            .filter(|spelling| {
                // Whole physical spellings only: an absolute path or a URL, never a bare word.
                (spelling.starts_with('/') || spelling.contains("://"))
                    && spelling.len() > 1
                    && !agent_roots.iter().any(|root| spelling == root || spelling.starts_with(&format!("{root}/")))
            })
            .collect();
        spellings.sort_by(|left, right| right.len().cmp(&left.len()).then_with(|| left.cmp(right)));
        spellings.dedup();
        Self { spellings, internal_roots: internal_roots.into_iter().collect() }
    }

    pub(crate) fn spellings(&self) -> &[String] {
        &self.spellings
    }

    /// Replaces every occurrence that stands at a path boundary.
    pub(crate) fn scrub<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut output: Cow<'t, str> = Cow::Borrowed(text);
        let mut fired = false;
        for needle in self.spellings.iter().chain(&self.internal_roots) {
            if !output.contains(needle.as_str()) {
                continue;
            }
            if let Some(replaced) = replace_at_boundaries(&output, needle) {
                fired = true;
                output = Cow::Owned(replaced);
            }
        }
        if fired {
            tracing::warn!(
                target: "vfs::scrub",
                "the redaction scrub replaced a physical path or internal root in agent-bound text; this is a bug, please report it"
            );
        }
        output
    }
}

/// Replaces `needle` where it is not glued to a longer name on either side.
fn replace_at_boundaries(text: &str, needle: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut result = String::with_capacity(text.len());
    let mut last = 0;
    let mut changed = false;
    let mut search_from = 0;
    while let Some(offset) = text[search_from..].find(needle) {
        let start = search_from + offset;
        let end = start + needle.len();
        let before_ok = start == 0 || !is_path_char(bytes[start - 1]);
        let after_ok = end == bytes.len() || !is_path_char(bytes[end]);
        if before_ok && after_ok {
            result.push_str(&text[last..start]);
            result.push_str(REDACTED);
            last = end;
            changed = true;
        }
        search_from = start + needle.len().max(1);
        // Keep `search_from` on a character boundary.
        while !text.is_char_boundary(search_from) {
            search_from += 1;
        }
    }
    if changed {
        result.push_str(&text[last..]);
        Some(result)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrubber() -> Scrubber {
        Scrubber::new(
            ["/home/op/data/".to_owned(), "/home/op".to_owned(), "/work".to_owned(), "/".to_owned()],
            ["/llm-logs".to_owned()],
            ["/work".to_owned(), "/src".to_owned()],
        )
    }

    #[test]
    fn replaces_bases_at_boundaries() {
        let scrub = scrubber();
        assert_eq!(scrub.scrub("open /home/op/data/x failed"), "open [redacted]/x failed");
        assert_eq!(scrub.scrub("`/home/op/data`"), "`[redacted]`");
        assert_eq!(scrub.scrub("at /home/op/other"), "at [redacted]/other");
        assert_eq!(scrub.scrub("see /llm-logs/x"), "see [redacted]/x");
    }

    #[test]
    fn bare_words_are_never_spellings() {
        let scrub = Scrubber::new(["data".to_owned(), "s3://data".to_owned()], [], ["/data".to_owned()]);
        assert_eq!(scrub.spellings(), ["s3://data"]);
        assert_eq!(scrub.scrub("/data/x in s3://data/x"), "/data/x in [redacted]/x");
    }

    #[test]
    fn leaves_lookalikes_alone() {
        let scrub = scrubber();
        for text in ["/home/operator", "/src/home/op/data", "/llm-logs2", "a/home/op", "/work/x"] {
            assert_eq!(scrub.scrub(text), text, "{text}");
            assert!(matches!(scrub.scrub(text), Cow::Borrowed(_)));
        }
    }
}
