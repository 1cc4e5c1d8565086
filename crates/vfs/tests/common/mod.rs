//! Fixture helpers shared by the integration tests: real temporary directories.
#![allow(dead_code, reason = "each test binary uses a different subset")]
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk")]

use std::path::{Path, PathBuf};

use vfs::{MountRegistry, MountSpec};

pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub(crate) fn mkdir(&self, relative: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(&path).unwrap();
        path
    }

    pub(crate) fn file(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub(crate) fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    pub(crate) fn symlink(&self, target: impl AsRef<Path>, relative: &str) {
        std::os::unix::fs::symlink(target, self.path(relative)).unwrap();
    }

    pub(crate) fn spec(&self, relative: &str, root: &str, rights: &str) -> MountSpec {
        format!("{}:{root}:{rights}", self.path(relative).display()).parse().unwrap()
    }
}

/// Asserts that agent-bound text holds no spelling of the fixture's physical directory.
pub(crate) fn assert_no_leak(fixture: &Fixture, registry: &MountRegistry, text: &str) {
    let base = fixture.dir.path().to_string_lossy().into_owned();
    assert!(!text.contains(&base), "physical path leaked: {text}");
    for spelling in registry.physical_spellings() {
        assert!(!text.contains(&spelling), "physical path leaked: {text}");
    }
    assert_eq!(registry.scrub(text), text, "the scrub fired on: {text}");
}
