//! Changing things: atomic writes, directories, moves, deletes, and the logger's appends.
//!
//! Every change to a file goes through [`local::write_atomic`] (temporary file in the same
//! directory, `fsync`, rename), so a failure at any point leaves the previous content, and a
//! link at the target is replaced rather than written through. A read-modify-write holds an
//! advisory lock on the directory, so `expectedVersion` checks and the write they guard cannot
//! be interleaved with another writer's, whether a thread or another process.

use std::io::Write as _;

use super::Context;
use crate::error::Error;
use crate::path::VirtualPath;
use crate::registry::TreeChange;
use crate::spec::Access;
use crate::storage::local::{self, Kind, Replace};
use crate::text::{AgentText, agent_text, code};

/// Options of `write_file`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Replace an existing file (default: refuse).
    pub overwrite: bool,
    /// Fail unless the file's current version is this one (implies `overwrite`).
    pub expected_version: Option<String>,
}

/// The result of a write.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteOutcome {
    /// The virtual path written.
    pub path: VirtualPath,
    /// Bytes written.
    pub bytes: u64,
    /// True when the file did not exist before.
    pub created: bool,
    /// The new version token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl WriteOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`WriteOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        let verb = if self.created { "created " } else { "replaced " };
        let mut text = agent_text![verb, code(&self.path), format!(" ({} bytes", self.bytes)];
        if let Some(version) = &self.version {
            text.composed(&format!(", version {version}"));
        }
        text.composed(")");
        text
    }
}

/// The result of `create_directory`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CreateDirOutcome {
    /// The directory.
    pub path: VirtualPath,
    /// False when it already existed.
    pub created: bool,
}

impl CreateDirOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`CreateDirOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        if self.created {
            agent_text!["created directory ", code(&self.path)]
        } else {
            agent_text!["directory ", code(&self.path), " already exists"]
        }
    }
}

/// The result of `move_file`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MoveOutcome {
    /// Where it was.
    pub source: VirtualPath,
    /// Where it is.
    pub destination: VirtualPath,
    /// True when it crossed file systems and was copied, then removed.
    pub copied: bool,
}

impl MoveOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`MoveOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        agent_text!["moved ", code(&self.source), " to ", code(&self.destination)]
    }
}

/// The result of `delete_file`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeleteOutcome {
    /// What was deleted.
    pub path: VirtualPath,
    /// `file`, `directory` or `link`.
    pub kind: &'static str,
}

impl DeleteOutcome {
    /// The agent-facing text.
    #[must_use]
    pub fn to_text(&self) -> String {
        self.agent_text().to_string()
    }

    /// [`DeleteOutcome::to_text`] as its pieces.
    #[must_use]
    pub fn agent_text(&self) -> AgentText {
        agent_text!["deleted ", self.kind, " ", code(&self.path)]
    }
}

/// A file opened for appending by a privileged logger. Each [`AppendFile::append`] is one
/// `write` on an `O_APPEND` descriptor, so concurrent appends never interleave within a record
/// and a killed process leaves only whole records.
#[derive(Debug)]
pub struct AppendFile {
    file: local::OpenFile,
}

impl AppendFile {
    /// Appends one record (for a JSON-lines log: one line, newline included) and flushes it to
    /// the kernel.
    pub fn append(&mut self, record: &[u8]) -> std::io::Result<()> {
        self.file.write_all(record)?;
        self.file.flush()
    }

    /// Flushes to stable storage.
    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

impl Context<'_> {
    /// Checks `expected` against the current version of `name` in `directory`.
    fn check_version(
        &self,
        directory: &std::os::fd::OwnedFd,
        name: &str,
        expected: &str,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let Some(stat) = local::stat_child(directory, name) else {
            return Err(Error::version_mismatch(path, "none (the file does not exist)"));
        };
        let (mut file, stat) = local::open_file_in(directory, name, stat, path)?;
        let current = local::version_of_file(&self.registry.versions, &mut file, &stat)
            .map_err(|error| Error::io(path, error))?;
        if current == expected { Ok(()) } else { Err(Error::version_mismatch(path, &current)) }
    }

    pub(crate) fn write(&self, input: &str, content: &[u8], options: &WriteOptions) -> Result<WriteOutcome, Error> {
        let path = Self::parse(input)?;
        let cap = self.registry.limits.write_bytes;
        if content.len() as u64 > cap {
            return Err(Error::too_large(
                Some(&path),
                agent_text![format!("the content has {} bytes, more than the {cap}-byte write cap", content.len())],
            ));
        }
        #[cfg(feature = "s3")]
        if let Some(target) = self.object_target(&path)? {
            return self.object_write(&target, path, content, options);
        }
        let resolved = self.locate(&path, Access::Write, false, true)?;
        let Some(name) = &resolved.name else {
            return Err(Error::not_a_file(&path));
        };
        let _lock = local::lock_directory(&resolved.parent, &path)?;
        let existing = local::stat_child(&resolved.parent, name);
        let mut mode = 0o666;
        if let Some(stat) = existing {
            match stat.kind {
                Kind::Symlink => return Err(Error::symlink(&path)),
                Kind::Directory => return Err(Error::not_a_file(&path)),
                Kind::Special => return Err(Error::unsupported(&path)),
                Kind::File => {}
            }
            mode = stat.mode;
            match &options.expected_version {
                Some(expected) => self.check_version(&resolved.parent, name, expected, &path)?,
                None if !options.overwrite => return Err(Error::already_exists(&path)),
                None => {}
            }
        } else if options.expected_version.is_some() {
            return Err(Error::version_mismatch(&path, "none (the file does not exist)"));
        }
        let replace = if existing.is_some() { Replace::Always } else { Replace::Never };
        let bytes = local::write_atomic(
            &resolved.parent,
            name,
            &mut &content[..],
            replace,
            mode,
            self.registry.sync_writes,
            &path,
        )?;
        Ok(WriteOutcome { path, bytes, created: existing.is_none(), version: local::version_of_bytes(content) })
    }

    pub(crate) fn create_directory(&self, input: &str) -> Result<CreateDirOutcome, Error> {
        let path = Self::parse(input)?;
        #[cfg(feature = "s3")]
        if let Some(target) = self.object_target(&path)? {
            return self.object_create_directory(&target, path);
        }
        let resolved = self.locate(&path, Access::Read, true, true)?;
        match (resolved.kind(), &resolved.name) {
            (Some(Kind::Directory), _) | (_, None) => Ok(CreateDirOutcome { path, created: false }),
            (Some(_), _) => Err(Error::not_a_directory(&path)),
            (None, Some(name)) => {
                if resolved.rel.len() > local::MAX_DEPTH {
                    return Err(Error::too_deep(&path, local::MAX_DEPTH));
                }
                self.registry.authorize(self.caller, resolved.mount, &resolved.rel, Access::Write, &path)?;
                let created = local::make_directory(&resolved.parent, name, &path)?;
                Ok(CreateDirOutcome { path, created })
            }
        }
    }

    pub(crate) fn move_path(
        &self,
        source_input: &str,
        destination_input: &str,
        overwrite: bool,
        expected_version: Option<&str>,
    ) -> Result<MoveOutcome, Error> {
        let source = Self::parse(source_input)?;
        let destination = Self::parse(destination_input)?;
        #[cfg(feature = "s3")]
        {
            let from = self.object_target(&source)?;
            let to = self.object_target(&destination)?;
            if from.is_some() || to.is_some() {
                return self.move_across(source, destination, from, to, overwrite, expected_version);
            }
        }
        let from = self.locate(&source, Access::Delete, false, false)?;
        let Some(from_name) = &from.name else {
            return Err(Error::invalid_argument(agent_text!["cannot move ", code(&source), ": it is a mount root"]));
        };
        let Some(from_stat) = from.stat else {
            return Err(Error::not_found(&source));
        };
        if from_stat.kind == Kind::Special {
            return Err(Error::unsupported(&source));
        }
        self.guard_tree(from.mount, &from.rel, Some(from_stat), TreeChange::MoveFrom, &source)?;
        if destination.starts_with(&source) && destination != source {
            return Err(Error::invalid_argument(agent_text!["cannot move ", code(&source), " into itself"]));
        }
        // Lexically first, so that a refused move creates no parent directory.
        let (routed, components) = self.registry.route(self.caller, &destination)?;
        let components: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
        self.guard_tree(routed, &components, None, TreeChange::MoveTo, &destination)?;
        let to = self.locate(&destination, Access::Write, false, true)?;
        let Some(to_name) = &to.name else {
            return Err(Error::already_exists(&destination));
        };
        self.guard_tree(to.mount, &to.rel, None, TreeChange::MoveTo, &destination)?;
        let _lock = local::lock_directory(&from.parent, &source)?;
        if let Some(expected) = expected_version {
            self.check_version(&from.parent, from_name, expected, &source)?;
        }
        if let Some(existing) = local::stat_child(&to.parent, to_name) {
            if !overwrite {
                return Err(Error::already_exists(&destination));
            }
            if existing.kind == Kind::Directory {
                return Err(Error::invalid_argument(agent_text![
                    "cannot replace directory ",
                    code(&destination),
                    "; delete it first"
                ]));
            }
        }
        let replace = if overwrite { Replace::Always } else { Replace::Never };
        match local::rename(&from.parent, from_name, &to.parent, to_name, replace, &destination) {
            Ok(()) => Ok(MoveOutcome { source, destination, copied: false }),
            Err(error) if error.kind() == crate::ErrorKind::Io && is_cross_device(&error) => {
                if from_stat.kind != Kind::File {
                    return Err(Error::invalid_argument(agent_text![
                        "cannot move directory ",
                        code(&source),
                        " to another file system; move its files one by one"
                    ]));
                }
                let (mut file, stat) = local::open_file_in(&from.parent, from_name, from_stat, &source)?;
                local::write_atomic(
                    &to.parent,
                    to_name,
                    &mut file,
                    replace,
                    stat.mode,
                    self.registry.sync_writes,
                    &destination,
                )?;
                local::remove_file(&from.parent, from_name, &source)?;
                Ok(MoveOutcome { source, destination, copied: true })
            }
            Err(error) => Err(error),
        }
    }

    pub(crate) fn delete(
        &self,
        input: &str,
        recursive: bool,
        expected_version: Option<&str>,
    ) -> Result<DeleteOutcome, Error> {
        let path = Self::parse(input)?;
        #[cfg(feature = "s3")]
        if let Some(target) = self.object_target(&path)? {
            return self.object_delete(&target, path, recursive, expected_version);
        }
        let resolved = self.locate(&path, Access::Delete, false, false)?;
        let Some(name) = &resolved.name else {
            return Err(Error::invalid_argument(agent_text!["cannot delete ", code(&path), ": it is a mount root"]));
        };
        let Some(stat) = resolved.stat else {
            return Err(Error::not_found(&path));
        };
        self.guard_tree(resolved.mount, &resolved.rel, Some(stat), TreeChange::Delete, &path)?;
        let _lock = local::lock_directory(&resolved.parent, &path)?;
        if let Some(expected) = expected_version {
            self.check_version(&resolved.parent, name, expected, &path)?;
        }
        let kind = match stat.kind {
            Kind::Directory => {
                if recursive {
                    let registry = self.registry;
                    let holds_mount = |identity| registry.holds_mount(identity);
                    local::remove_tree(&resolved.parent, name, &path, &holds_mount, 0)?;
                } else {
                    local::remove_directory(&resolved.parent, name, &path)?;
                }
                "directory"
            }
            Kind::Symlink => {
                local::remove_file(&resolved.parent, name, &path)?;
                "link"
            }
            Kind::File | Kind::Special => {
                local::remove_file(&resolved.parent, name, &path)?;
                "file"
            }
        };
        Ok(DeleteOutcome { path, kind })
    }

    pub(crate) fn open_append(&self, input: &str) -> Result<AppendFile, Error> {
        let path = Self::parse(input)?;
        let resolved = self.locate(&path, Access::Write, false, true)?;
        let Some(name) = &resolved.name else {
            return Err(Error::not_a_file(&path));
        };
        let file = local::open_append(&resolved.parent, name, &path)?;
        Ok(AppendFile { file })
    }
}

#[cfg(feature = "s3")]
impl Context<'_> {
    /// The bytes of a file on either backend, at most `cap`, with its version.
    fn read_raw(
        &self,
        path: &VirtualPath,
        target: Option<&super::object::Target>,
        cap: u64,
    ) -> Result<(Vec<u8>, Option<String>), Error> {
        if let Some(target) = target {
            return self.object_read_bytes(target, path, cap);
        }
        let resolved = self.locate(path, Access::Read, true, false)?;
        let (mut file, stat) = local::open_file(&resolved, path)?;
        if stat.size > cap {
            return Err(Error::too_large(
                Some(path),
                agent_text![format!("the file has {} bytes, more than the {cap}-byte cap", stat.size)],
            ));
        }
        let mut bytes = Vec::with_capacity(stat.size as usize);
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|error| Error::io(path, error))?;
        let version = local::version_of_bytes(&bytes);
        Ok((bytes, version))
    }

    /// A move that involves an object mount: within one object mount, copy then delete; across
    /// backends, read, write (with the destination's rules), then delete the source. Not
    /// atomic: a failure after the write leaves both copies, never neither.
    #[expect(clippy::needless_pass_by_value, reason = "the targets are consumed by this call's flow")]
    fn move_across(
        &self,
        source: VirtualPath,
        destination: VirtualPath,
        from: Option<super::object::Target>,
        to: Option<super::object::Target>,
        overwrite: bool,
        expected_version: Option<&str>,
    ) -> Result<MoveOutcome, Error> {
        // Both sides' rights first, before anything changes.
        if let Some(target) = &from {
            self.registry.authorize(self.caller, target.mount, &target.rel, Access::Delete, &source)?;
            self.guard_tree(target.mount, &target.rel, None, TreeChange::MoveFrom, &source)?;
        } else {
            let resolved = self.locate(&source, Access::Delete, false, false)?;
            self.guard_tree(resolved.mount, &resolved.rel, resolved.stat, TreeChange::MoveFrom, &source)?;
        }
        if let Some(target) = &to {
            self.registry.authorize(self.caller, target.mount, &target.rel, Access::Write, &destination)?;
            self.guard_tree(target.mount, &target.rel, None, TreeChange::MoveTo, &destination)?;
        } else {
            match self.locate(&destination, Access::Write, false, false) {
                Ok(resolved) => {
                    self.guard_tree(resolved.mount, &resolved.rel, None, TreeChange::MoveTo, &destination)?;
                }
                Err(error) if error.kind() != crate::ErrorKind::NotFound => return Err(error),
                Err(_) => {}
            }
        }
        if let (Some(from), Some(to)) = (&from, &to)
            && from.mount == to.mount
        {
            if let Some(expected) = expected_version {
                let (_, version) = self.object_read_bytes(from, &source, self.registry.limits.write_bytes)?;
                if version.as_deref() != Some(expected) {
                    return Err(Error::version_mismatch(&source, version.as_deref().unwrap_or_default()));
                }
            }
            self.object_move_within(from, to, source.clone(), destination.clone(), overwrite)?;
            return Ok(MoveOutcome { source, destination, copied: true });
        }
        let (bytes, version) = self.read_raw(&source, from.as_ref(), self.registry.limits.write_bytes)?;
        if let Some(expected) = expected_version
            && version.as_deref() != Some(expected)
        {
            return Err(Error::version_mismatch(&source, version.as_deref().unwrap_or_default()));
        }
        self.write(destination.as_str(), &bytes, &WriteOptions { overwrite, expected_version: None })?;
        self.delete(source.as_str(), false, None)?;
        Ok(MoveOutcome { source, destination, copied: true })
    }
}

fn is_cross_device(error: &Error) -> bool {
    std::error::Error::source(error)
        .and_then(|source| source.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()))
}
