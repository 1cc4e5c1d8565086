//! Temporary directory layouts: the on-disk side of the kit's scenarios and of the battery.
//!
//! A scenario describes the host side (files, links, FIFOs, places *outside* every mount) in
//! physical terms and then looks only through a registry; this module is the physical half, so
//! it is the one place of the kit that touches the disk directly.
#![expect(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "fixture: the kit builds and inspects on-disk layouts for tests"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use vfs::{MountSpec, SpecError};

/// A temporary directory, removed on drop. Relative names are `/`-separated.
#[derive(Debug)]
pub struct Layout {
    dir: tempfile::TempDir,
}

impl Default for Layout {
    fn default() -> Self {
        Self::new()
    }
}

impl Layout {
    /// A fresh, empty temporary directory.
    ///
    /// # Panics
    /// When the temporary directory cannot be created.
    #[must_use]
    pub fn new() -> Self {
        Self { dir: tempfile::tempdir().expect("a temporary directory") }
    }

    /// The base directory (physical: for building specs and for leak checks only).
    #[must_use]
    pub fn base(&self) -> &Path {
        self.dir.path()
    }

    /// The physical path of `relative`.
    #[must_use]
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Creates a directory and its parents.
    ///
    /// # Panics
    /// On any I/O error (a broken fixture is a broken test).
    #[expect(clippy::must_use_candidate, reason = "chaining is optional")]
    pub fn mkdir(&self, relative: &str) -> &Self {
        std::fs::create_dir_all(self.path(relative)).expect("create a fixture directory");
        self
    }

    /// Writes a file, creating its parents.
    ///
    /// # Panics
    /// On any I/O error.
    pub fn file(&self, relative: &str, content: impl AsRef<[u8]>) -> &Self {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a fixture directory");
        }
        std::fs::write(path, content).expect("write a fixture file");
        self
    }

    /// Creates a symbolic link at `relative` pointing to `target` (as written).
    ///
    /// # Panics
    /// On any I/O error.
    pub fn symlink(&self, target: impl AsRef<Path>, relative: &str) -> &Self {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create a fixture directory");
        }
        std::os::unix::fs::symlink(target, path).expect("create a fixture link");
        self
    }

    /// Creates a hard link at `relative` to the existing `existing`.
    ///
    /// # Panics
    /// On any I/O error.
    #[expect(clippy::must_use_candidate, reason = "chaining is optional")]
    pub fn hard_link(&self, existing: &str, relative: &str) -> &Self {
        std::fs::hard_link(self.path(existing), self.path(relative)).expect("create a fixture hard link");
        self
    }

    /// Removes a file or link (not following it), or a directory tree.
    pub fn remove(&self, relative: &str) {
        let path = self.path(relative);
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_dir() => {
                let _ = std::fs::remove_dir_all(path);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(path);
            }
            Err(_) => {}
        }
    }

    /// Sets a file's length (a sparse file when growing).
    ///
    /// # Panics
    /// On any I/O error.
    pub fn set_len(&self, relative: &str, length: u64) {
        let file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(self.path(relative));
        file.and_then(|file| file.set_len(length)).expect("size a fixture file");
    }

    /// Writes `bytes` at `offset` of an existing file.
    ///
    /// # Panics
    /// On any I/O error.
    pub fn write_at(&self, relative: &str, offset: u64, bytes: &[u8]) {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(self.path(relative)).expect("open a fixture file");
        file.write_all_at(bytes, offset).expect("write a fixture file");
    }

    /// The content of a file, or `None` when it cannot be read.
    #[must_use]
    pub fn read(&self, relative: &str) -> Option<String> {
        std::fs::read_to_string(self.path(relative)).ok()
    }

    /// True when something (a file, a directory, a link, even dangling) exists at `relative`.
    #[must_use]
    pub fn exists(&self, relative: &str) -> bool {
        std::fs::symlink_metadata(self.path(relative)).is_ok()
    }

    /// Every entry under `relative` (not following links) with its kind and content: a
    /// snapshot to compare before and after, to prove nothing there changed.
    #[must_use]
    pub fn snapshot(&self, relative: &str) -> Snapshot {
        let mut entries = BTreeMap::new();
        snapshot_into(&self.path(relative), "", &mut entries);
        Snapshot(entries)
    }

    /// A mount string for `relative` at `root` with `rights` (which may carry overrides, as in
    /// `rw;vendor:ro`).
    pub fn spec(&self, relative: &str, root: &str, rights: &str) -> Result<MountSpec, SpecError> {
        let physical = self.path(relative).to_string_lossy().into_owned();
        let physical = if physical.contains([':', ';', '|']) { format!("\"{physical}\"") } else { physical };
        format!("{physical}:{root}:{rights}").parse()
    }
}

/// What [`Layout::snapshot`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<String, String>);

fn snapshot_into(path: &Path, relative: &str, entries: &mut BTreeMap<String, String>) {
    let Ok(metadata) = std::fs::symlink_metadata(path) else {
        return;
    };
    let kind = metadata.file_type();
    let description = if kind.is_symlink() {
        format!("link -> {}", std::fs::read_link(path).map(|target| target.display().to_string()).unwrap_or_default())
    } else if kind.is_dir() {
        "dir".to_owned()
    } else if kind.is_file() {
        if metadata.len() > 1024 * 1024 {
            format!("file of {} bytes", metadata.len())
        } else {
            format!("file {:?}", String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()))
        }
    } else {
        "special".to_owned()
    };
    entries.insert(relative.to_owned(), description);
    if kind.is_dir()
        && let Ok(children) = std::fs::read_dir(path)
    {
        for child in children.flatten() {
            let name = child.file_name().to_string_lossy().into_owned();
            let child_relative = if relative.is_empty() { name } else { format!("{relative}/{name}") };
            snapshot_into(&child.path(), &child_relative, entries);
        }
    }
}
