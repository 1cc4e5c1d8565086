//! The leak checker: does a piece of agent-bound text name a physical path?
//!
//! The registry's scrub is the last line of defence and must never fire; this checker is how a
//! test proves it did not have to. It knows every spelling of every mount's physical base (as
//! given, absolute, canonical, and any alias a test adds, such as a path through a symlinked
//! parent), the process working directory and `$HOME`, each with and without a trailing
//! separator and as JSON writes an escaped slash, plus every internal root name. A match counts
//! only at a path boundary, so `/data2` is not a leak of `/data` and `/src/tmp/x` is not a leak
//! of `/tmp/x`.
#![expect(clippy::disallowed_methods, reason = "fixture: canonicalising the spellings a test knows")]

use std::fmt;

use vfs::MountRegistry;

/// What kind of secret a leak reveals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeakKind {
    /// A spelling of a mount's physical base.
    PhysicalBase,
    /// The process working directory.
    WorkingDirectory,
    /// The home directory.
    Home,
    /// The name of an internal root (such as `/llm-logs`).
    InternalRoot,
    /// A spelling the caller added.
    Extra,
}

/// One leak: what leaked, in which spelling, and where in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// What kind of secret.
    pub kind: LeakKind,
    /// The spelling found.
    pub spelling: String,
    /// Its byte offset in the text.
    pub offset: usize,
}

impl fmt::Display for Leak {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{:?} `{}` at byte {}", self.kind, self.spelling, self.offset)
    }
}

/// Checks agent-bound text against everything a registry must keep secret.
#[derive(Debug, Clone)]
pub struct LeakChecker {
    needles: Vec<(LeakKind, String)>,
    /// Agent-facing roots: a physical spelling equal to one of them (or below one) reads the
    /// same as a legitimate virtual path and cannot be told apart in text.
    agent_roots: Vec<String>,
}

impl LeakChecker {
    /// A checker for `registry`: its mounts' physical spellings, its internal roots, the
    /// working directory and `$HOME`.
    #[must_use]
    pub fn new(registry: &MountRegistry) -> Self {
        let mut checker = Self {
            needles: Vec::new(),
            agent_roots: registry.agent_mounts().into_iter().map(|mount| mount.root).collect(),
        };
        for spelling in registry.physical_spellings() {
            checker.add_path(LeakKind::PhysicalBase, &spelling);
        }
        for view in registry.operator_view() {
            checker.add_path(LeakKind::PhysicalBase, &view.physical);
        }
        if let Ok(directory) = std::env::current_dir() {
            checker.add_path(LeakKind::WorkingDirectory, &directory.to_string_lossy());
        }
        if let Some(home) = std::env::var_os("HOME") {
            checker.add_path(LeakKind::Home, &home.to_string_lossy());
        }
        for root in registry.internal_roots() {
            checker.needles.push((LeakKind::InternalRoot, root));
        }
        checker
    }

    /// Adds a spelling the registry cannot know, such as a path through a symlinked parent that
    /// the test created.
    #[must_use]
    pub fn with_spelling(mut self, spelling: &str) -> Self {
        self.add_path(LeakKind::Extra, spelling);
        self
    }

    /// The spellings checked, for diagnostics.
    #[must_use]
    pub fn spellings(&self) -> Vec<&str> {
        self.needles.iter().map(|(_, needle)| needle.as_str()).collect()
    }

    fn add_path(&mut self, kind: LeakKind, spelling: &str) {
        let mut variants = vec![spelling.to_owned()];
        if spelling.starts_with('/')
            && let Ok(canonical) = std::fs::canonicalize(spelling)
        {
            variants.push(canonical.to_string_lossy().into_owned());
        }
        for variant in variants {
            let trimmed = variant.trim_end_matches(['/', '\\']);
            // A relative spelling (`.`, `data`) is a word, not a path: only absolute ones are
            // recognisable in text, and `/` alone is every path.
            if trimmed.len() <= 1 || !trimmed.starts_with('/') {
                continue;
            }
            if self.agent_roots.iter().any(|root| trimmed == root || trimmed.starts_with(&format!("{root}/"))) {
                continue;
            }
            for needle in [trimmed.to_owned(), trimmed.replace('/', "\\/")] {
                if !self.needles.iter().any(|(_, existing)| *existing == needle) {
                    self.needles.push((kind, needle));
                }
            }
        }
    }

    /// Every leak in `text`.
    #[must_use]
    pub fn check(&self, text: &str) -> Vec<Leak> {
        let mut leaks = Vec::new();
        for (kind, needle) in &self.needles {
            let mut from = 0;
            while let Some(offset) = text[from..].find(needle.as_str()) {
                let start = from + offset;
                let end = start + needle.len();
                let before = text[..start].chars().next_back();
                let after = text[end..].chars().next();
                if before.is_none_or(|character| !is_name_char(character))
                    && after.is_none_or(|character| !is_name_char(character))
                {
                    leaks.push(Leak { kind: *kind, spelling: needle.clone(), offset: start });
                }
                from = start + 1;
                while !text.is_char_boundary(from) {
                    from += 1;
                }
            }
        }
        leaks.sort_by_key(|leak| leak.offset);
        leaks
    }

    /// Panics with the leaks when `text` has any.
    ///
    /// # Panics
    /// When `text` names anything the checker knows.
    pub fn assert_clean(&self, text: &str) {
        let leaks = self.check(text);
        assert!(
            leaks.is_empty(),
            "agent-bound text leaks {}: {text:?}",
            leaks.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        );
    }
}

/// Characters that continue a file name: a match glued to one is a different name.
fn is_name_char(character: char) -> bool {
    character.is_alphanumeric() || matches!(character, '.' | '_' | '-' | '~')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::Layout;

    fn registry(layout: &Layout) -> MountRegistry {
        layout.mkdir("data").mkdir("logs");
        MountRegistry::builder()
            .mount(layout.spec("data", "/src", "ro").unwrap())
            .internal(layout.spec("logs", "/llm-logs", "rw").unwrap())
            .build(vfs::ambient_authority())
            .unwrap()
    }

    #[test]
    fn finds_every_spelling_of_a_base() {
        let layout = Layout::new();
        let checker = LeakChecker::new(&registry(&layout));
        let base = layout.path("data").to_string_lossy().into_owned();
        let canonical = std::fs::canonicalize(layout.path("data")).unwrap().to_string_lossy().into_owned();
        for text in [
            format!("open {base} failed"),
            format!("`{base}/`"),
            format!("{base}/a.txt"),
            format!("{canonical}/x"),
            format!("\"{}\"", base.replace('/', "\\/")),
        ] {
            assert!(!checker.check(&text).is_empty(), "{text}");
        }
    }

    #[test]
    fn finds_a_spelling_through_a_symlinked_parent() {
        let real = Layout::new();
        real.mkdir("data");
        let alias = Layout::new();
        alias.symlink(real.base(), "alias");
        let through = alias.path("alias/data").to_string_lossy().into_owned();
        let spec = format!("{through}:/src:ro").parse().unwrap();
        let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
        let checker = LeakChecker::new(&registry);
        let canonical = std::fs::canonicalize(real.path("data")).unwrap().to_string_lossy().into_owned();
        for text in [format!("at {through}/a.txt"), format!("at {canonical}/a.txt"), format!("{through}/")] {
            assert_eq!(checker.check(&text)[0].kind, LeakKind::PhysicalBase, "{text}");
        }
        // A spelling the registry cannot know is added by the test that made it.
        let other = Layout::new();
        other.symlink(real.base(), "second");
        let second = other.path("second/data").to_string_lossy().into_owned();
        assert!(checker.check(&second).is_empty());
        assert_eq!(checker.with_spelling(&second).check(&second)[0].kind, LeakKind::Extra);
    }

    #[test]
    fn finds_internal_roots_working_directory_and_home() {
        let layout = Layout::new();
        let checker = LeakChecker::new(&registry(&layout));
        assert_eq!(checker.check("see /llm-logs/x.jsonl")[0].kind, LeakKind::InternalRoot);
        assert_eq!(checker.check("/llm-logs")[0].kind, LeakKind::InternalRoot);
        let directory = std::env::current_dir().unwrap().to_string_lossy().into_owned();
        if directory.len() > 1 {
            assert!(!checker.check(&format!("cwd {directory}/x")).is_empty());
        }
        if let Some(home) = std::env::var_os("HOME").map(|home| home.to_string_lossy().into_owned())
            && home.len() > 1
        {
            assert!(checker.check(&format!("{home}/.ssh")).iter().any(|leak| leak.kind == LeakKind::Home));
        }
    }

    #[test]
    fn ignores_lookalikes_at_name_boundaries() {
        let layout = Layout::new();
        let checker = LeakChecker::new(&registry(&layout));
        let base = layout.path("data").to_string_lossy().into_owned();
        for text in [
            format!("{base}2/x"),
            format!("{base}-old"),
            format!("/src{base}"),
            "/llm-logs2/x".to_owned(),
            "/src/llm-logs".to_owned(),
            "/src/a.txt: cannot write".to_owned(),
        ] {
            assert_eq!(checker.check(&text), Vec::new(), "{text}");
        }
    }

    #[test]
    fn a_physical_base_equal_to_an_agent_root_is_not_a_leak() {
        // Mounting `/x` at `/x` makes the two spellings identical; text cannot tell them apart.
        let checker = LeakChecker { needles: Vec::new(), agent_roots: vec!["/work".to_owned()] };
        let mut checker = checker;
        checker.add_path(LeakKind::PhysicalBase, "/work");
        checker.add_path(LeakKind::PhysicalBase, "/work/main");
        assert!(checker.needles.is_empty());
        checker.add_path(LeakKind::PhysicalBase, "/srv/data/");
        assert_eq!(checker.spellings(), ["/srv/data", "\\/srv\\/data"]);
    }
}
