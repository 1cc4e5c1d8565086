//! Compiling the agent's patterns: name globs, exclude patterns and regular expressions.
//!
//! A pattern is agent input, and compiling one can cost far more than its length suggests: a
//! glob of 150,000 brace branches makes the glob compiler panic, and a regular expression can
//! compile to an automaton of hundreds of megabytes. So every pattern is bounded before it is
//! compiled (its length, the number of exclude patterns, the compiled size of a regular
//! expression), a panic inside a compiler becomes an error, and every refusal names the
//! argument and what to do instead.

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};

use crate::error::{Error, ErrorKind};
use crate::hint::{Argument, Hint};
use crate::mount::Limits;
use crate::text::{agent_text, passed};

/// Largest compiled regular expression (the automaton, before any search), in bytes.
const REGEX_SIZE: usize = 4 * 1024 * 1024;
/// Largest cache of the lazy DFA a search builds as it goes, in bytes.
const DFA_SIZE: usize = 8 * 1024 * 1024;

/// Runs a compiler that may panic on hostile input; a panic is `None`.
fn guarded<T>(compile: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(compile)).ok()
}

/// Refuses a pattern longer than `most` bytes, naming the argument.
fn check_length(argument: Argument, pattern: &str, most: usize) -> Result<(), Error> {
    if pattern.len() > most {
        return Err(Error::too_large(
            None,
            agent_text![
                "`",
                argument,
                format!(
                    "` has {} bytes, more than the {most}-byte limit for a pattern; use a shorter one",
                    pattern.len()
                )
            ],
        ));
    }
    Ok(())
}

/// A glob on names, or on relative paths when it holds a `/` (then `*` stops at `/`).
/// `argument` is the argument named in refusals (the pattern, the include glob).
pub(crate) fn glob(argument: Argument, pattern: &str, limits: &Limits) -> Result<GlobMatcher, Error> {
    check_length(argument, pattern, limits.glob_bytes)?;
    let by_path = pattern.contains('/');
    let compiled =
        guarded(|| GlobBuilder::new(pattern).literal_separator(by_path).build().map(|glob| glob.compile_matcher()));
    match compiled {
        Some(Ok(matcher)) => Ok(matcher),
        Some(Err(error)) => Err(Error::invalid_argument(agent_text![
            "`",
            argument,
            "`: `",
            passed(pattern),
            format!("` is not a valid glob ({}); try `*.rs` or `**/*.md`", error.kind())
        ])),
        None => Err(too_complex(argument)),
    }
}

fn too_complex(argument: Argument) -> Error {
    Error::too_large(None, agent_text!["`", argument, "` is too complex to compile; use a simpler pattern"])
}

/// Exclude patterns: each matches a name or a relative path at any depth.
pub(crate) fn exclude_set(patterns: &[String], limits: &Limits) -> Result<GlobSet, Error> {
    if patterns.len() > limits.excludes {
        return Err(Error::too_large(
            None,
            agent_text![
                format!("{} `", patterns.len()),
                Argument::Excludes,
                format!("` given, at most {}; combine them with braces, like `{{target,dist}}`", limits.excludes)
            ],
        ));
    }
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        check_length(Argument::Excludes, pattern, limits.glob_bytes)?;
        let pattern = pattern.trim_end_matches('/');
        for candidate in [pattern.to_owned(), format!("**/{pattern}"), format!("**/{pattern}/**")] {
            let glob = Glob::new(&candidate).map_err(|error| {
                Error::invalid_argument(agent_text![
                    "exclude pattern `",
                    passed(pattern),
                    format!("` is not a valid glob ({})", error.kind())
                ])
            })?;
            builder.add(glob);
        }
    }
    match guarded(|| builder.build()) {
        Some(Ok(set)) => Ok(set),
        // Each was a valid glob above: together they pass the matcher's size limit.
        Some(Err(_)) => Err(Error::too_large(
            None,
            agent_text!["the `", Argument::Excludes, "` together are too large to compile; use fewer or simpler ones"],
        )),
        None => Err(too_complex(Argument::Excludes)),
    }
}

/// The content search's matcher, bounded in compiled size and search cache.
pub(crate) fn regex(
    pattern: &str,
    case_insensitive: bool,
    literal: bool,
    limits: &Limits,
) -> Result<RegexMatcher, Error> {
    if pattern.is_empty() {
        return Err(Error::invalid_argument(agent_text!["`", Argument::Pattern, "` is empty"]));
    }
    check_length(Argument::Pattern, pattern, limits.regex_bytes)?;
    let compiled = guarded(|| {
        RegexMatcherBuilder::new()
            .case_insensitive(case_insensitive)
            .fixed_strings(literal)
            .line_terminator(Some(b'\n'))
            .size_limit(REGEX_SIZE)
            .dfa_size_limit(DFA_SIZE)
            .build(pattern)
    });
    match compiled {
        Some(Ok(matcher)) => Ok(matcher),
        Some(Err(error)) if error.to_string().contains("size limit") => Err(Error::hinted(
            ErrorKind::TooLarge,
            agent_text![
                "`",
                Argument::Pattern,
                "` compiles to more than the size limit (long repetitions such as `\\w{1000}` grow it); \
                 simplify it, or ",
                Hint::Literal
            ],
            Hint::Literal,
        )),
        Some(Err(_)) => Err(Error::hinted(
            ErrorKind::InvalidArgument,
            agent_text!["`", passed(pattern), "` is not a valid regular expression; ", Hint::Literal],
            Hint::Literal,
        )),
        None => Err(too_complex(Argument::Pattern)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_patterns_are_refused_before_they_are_compiled() {
        let limits = Limits::default();
        let branches: String = (0..150_000).map(|index| format!("a{index}")).collect::<Vec<_>>().join(",");
        let error = glob(Argument::Pattern, &format!("{{{branches}}}"), &limits).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`pattern` has 1088891 bytes, more than the 1024-byte limit for a pattern; use a shorter one"
        );
        let nested = format!("{}a{}", "{".repeat(400), "}".repeat(400));
        assert_eq!(glob(Argument::Include, &nested, &limits).unwrap_err().kind(), crate::ErrorKind::InvalidArgument);
        let error = regex("\\w{1000}\\w{1000}\\w{1000}", false, false, &limits).unwrap_err();
        assert!(error.to_string().starts_with("`pattern` compiles to more than the size limit"), "{error}");
        assert_eq!((error.kind(), error.hint()), (crate::ErrorKind::TooLarge, Some(Hint::Literal)));
        let error = regex("(", false, false, &limits).unwrap_err();
        assert_eq!((error.kind(), error.hint()), (crate::ErrorKind::InvalidArgument, Some(Hint::Literal)));
        assert_eq!(
            error.to_string(),
            "`(` is not a valid regular expression; ask for a literal search to search for the text as written"
        );
        let excludes = vec!["x".to_owned(); 65];
        assert_eq!(
            exclude_set(&excludes, &limits).unwrap_err().to_string(),
            "65 `excludes` given, at most 64; combine them with braces, like `{target,dist}`"
        );
        assert!(regex("fn main", false, false, &limits).is_ok());
    }
}
