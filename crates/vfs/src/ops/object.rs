//! The operations on object-storage mounts (feature `s3`).
//!
//! Same contracts as the local operations, mapped onto the store: read windows are ranged
//! GETs; listings use delimiters (a directory is a prefix); `version` is the object's `ETag`;
//! `write_file` without `overwrite` is a create-if-absent put and `expectedVersion` a
//! conditional put; `create_directory` writes nothing; `move_file` is copy-if-absent then
//! delete (not atomic); a recursive delete removes every object under the prefix.

use std::collections::HashMap;

use base64::Engine as _;
use ignore::gitignore::Gitignore;

use super::pattern::exclude_set;
use super::walk::{EntryKind, ListEntry, Listing, NameSearch, Tree, TreeNode};
use super::{
    Context, CreateDirOutcome, DeleteOutcome, Edit, EditOptions, EditOutcome, FileInfo, MediaRead, ReadWindow,
    TextRead, WriteOptions, WriteOutcome, rfc3339,
};
use crate::error::Error;
use crate::path::VirtualPath;
use crate::registry::TreeChange;
use crate::spec::Access;
use crate::storage::object::{ObjectInfo, ObjectRoot, PutWhen, StoreError};
use crate::text::{agent_text, code};

/// An object mount and the path inside it.
pub(crate) struct Target {
    pub(crate) mount: usize,
    pub(crate) rel: Vec<String>,
}

impl Error {
    /// Describes a store failure to an agent without the store's own text (which names the
    /// bucket and endpoint); the failure is logged for the operator.
    pub(crate) fn store(path: &VirtualPath, error: StoreError) -> Self {
        match error {
            StoreError::NotFound => Error::not_found(path),
            StoreError::AlreadyExists => Error::already_exists(path),
            StoreError::Precondition => Error::version_mismatch(path, "a newer one"),
            StoreError::Other(error) => {
                tracing::warn!(target: "vfs::object", %path, error = %error, "object store request failed");
                Error::store_failed(path)
            }
        }
    }
}

impl Context<'_> {
    /// The object mount serving `path`, if it is one (after routing for this caller).
    /// With no object mount at all this answers `None` without routing: the local path that
    /// follows routes once and gives any unknown-root answer itself.
    pub(crate) fn object_target(&self, path: &VirtualPath) -> Result<Option<Target>, Error> {
        if !self.registry.object_mounts {
            return Ok(None);
        }
        let (mount, components) = self.registry.route(self.caller, path)?;
        if self.registry.mounts[mount].storage.object().is_none() {
            return Ok(None);
        }
        Ok(Some(Target { mount, rel: components.iter().map(|&segment| segment.to_owned()).collect() }))
    }

    fn root(&self, target: &Target) -> &ObjectRoot {
        self.registry.mounts[target.mount].storage.object().expect("the target is an object mount")
    }

    fn allow(&self, target: &Target, access: Access, path: &VirtualPath) -> Result<(), Error> {
        self.registry.authorize(self.caller, target.mount, &target.rel, access, path)
    }

    pub(crate) fn object_read_text(
        &self,
        target: &Target,
        path: VirtualPath,
        window: &ReadWindow,
    ) -> Result<TextRead, Error> {
        self.allow(target, Access::Read, &path)?;
        let root = self.root(target);
        let cap = self.registry.limits.read_bytes;
        if window.tail.is_none() && window.offset.unwrap_or(1) == 1 {
            // A window from the first line never needs more than `cap + 1` bytes (the extra
            // byte tells "exactly at the cap" from "more follows"): one GET, no HEAD.
            let Some((bytes, info)) = root
                .get_first(&target.rel, cap.saturating_add(1), false)
                .map_err(|error| Error::store(&path, error))?
            else {
                return Err(self.missing(target, &path));
            };
            let token = info.token();
            return super::read::window_read_bytes(path, window, info.size, bytes, cap, &self.deadline, |_| token);
        }
        let Some(info) = root.head(&target.rel).map_err(|error| Error::store(&path, error))? else {
            return Err(self.missing(target, &path));
        };
        let token = info.token();
        let reader = root.reader(&target.rel, &info);
        super::read::window_read(path, window, info.size, reader, cap, &self.deadline, |_| token)
    }

    /// "Does not exist", or "is a directory" when the name is a prefix.
    fn missing(&self, target: &Target, path: &VirtualPath) -> Error {
        match self.root(target).is_directory(&target.rel) {
            Ok(true) => Error::not_a_file(path),
            Ok(false) => Error::not_found(path),
            Err(error) => Error::store(path, error),
        }
    }

    /// The raw bytes of an object (for media and cross-mount moves), at most `cap`.
    pub(crate) fn object_read_bytes(
        &self,
        target: &Target,
        path: &VirtualPath,
        cap: u64,
    ) -> Result<(Vec<u8>, Option<String>), Error> {
        self.allow(target, Access::Read, path)?;
        let root = self.root(target);
        let Some((bytes, info)) =
            root.get_first(&target.rel, cap.saturating_add(1), true).map_err(|error| Error::store(path, error))?
        else {
            return Err(self.missing(target, path));
        };
        if info.size > cap {
            return Err(Error::too_large(
                Some(path),
                agent_text![format!("the file has {} bytes, more than the {cap}-byte cap", info.size)],
            ));
        }
        Ok((bytes, info.token()))
    }

    pub(crate) fn object_read_media(&self, target: &Target, path: VirtualPath) -> Result<MediaRead, Error> {
        let cap = self.registry.limits.media_bytes;
        let (bytes, _) = self.object_read_bytes(target, &path, cap)?;
        Ok(MediaRead {
            mime_type: super::read::mime_type(path.file_name().unwrap_or_default()).to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(&bytes),
            size: bytes.len() as u64,
            path,
        })
    }

    pub(crate) fn object_info(&self, target: &Target, path: VirtualPath) -> Result<FileInfo, Error> {
        self.allow(target, Access::Read, &path)?;
        let root = self.root(target);
        let rights = self.registry.mounts[target.mount].rights_at(&target.rel).0.as_str();
        if let Some(info) = root.head(&target.rel).map_err(|error| Error::store(&path, error))? {
            return Ok(FileInfo {
                path,
                kind: "file",
                size: info.size,
                modified: rfc3339(info.modified),
                rights,
                version: info.token(),
            });
        }
        if root.is_directory(&target.rel).map_err(|error| Error::store(&path, error))? {
            return Ok(FileInfo { path, kind: "directory", size: 0, modified: rfc3339(0), rights, version: None });
        }
        Err(Error::not_found(&path))
    }

    pub(crate) fn object_write(
        &self,
        target: &Target,
        path: VirtualPath,
        content: &[u8],
        options: &WriteOptions,
    ) -> Result<WriteOutcome, Error> {
        self.allow(target, Access::Write, &path)?;
        if target.rel.is_empty() {
            return Err(Error::not_a_file(&path));
        }
        let root = self.root(target);
        let existing = root.head(&target.rel).map_err(|error| Error::store(&path, error))?;
        let when = match (&existing, &options.expected_version) {
            (Some(_), Some(expected)) => PutWhen::Version(expected.clone()),
            (Some(_), None) if options.overwrite => PutWhen::Always,
            (Some(_), None) => return Err(Error::already_exists(&path)),
            (None, Some(_)) => return Err(Error::version_mismatch(&path, "none (the file does not exist)")),
            (None, None) => PutWhen::Absent,
        };
        let version = match root.put(&target.rel, content.to_vec(), when) {
            Ok(version) => version,
            Err(StoreError::Precondition) => {
                let current = root.head(&target.rel).ok().flatten().and_then(|info| info.token()).unwrap_or_default();
                return Err(Error::version_mismatch(&path, &current));
            }
            Err(error) => return Err(Error::store(&path, error)),
        };
        Ok(WriteOutcome { path, bytes: content.len() as u64, created: existing.is_none(), version })
    }

    pub(crate) fn object_edit(
        &self,
        target: &Target,
        path: VirtualPath,
        edits: &[Edit],
        options: &EditOptions,
    ) -> Result<EditOutcome, Error> {
        let access = if options.dry_run { Access::Read } else { Access::Write };
        self.allow(target, access, &path)?;
        let cap = self.registry.limits.write_bytes;
        let (bytes, token) = self.object_read_bytes(target, &path, cap)?;
        if let Some(expected) = &options.expected_version
            && token.as_deref() != Some(expected.as_str())
        {
            return Err(Error::version_mismatch(&path, token.as_deref().unwrap_or_default()));
        }
        let before = String::from_utf8(bytes).map_err(|_| {
            Error::invalid_argument(agent_text![code(&path), " is not UTF-8 text; it cannot be edited as text"])
        })?;
        let bounds = super::edit::Bounds { cap, deadline: &self.deadline };
        let (after, replacements) = super::edit::apply(&path, &before, edits, options.replace_all, &bounds)?;
        let diff = super::edit::unified_diff(&path, &before, &after, self.registry.limits.read_bytes, &self.deadline);
        if options.dry_run {
            return Ok(EditOutcome { path, diff, applied: false, replacements, version: token });
        }
        let when = token.map_or(PutWhen::Always, PutWhen::Version);
        let version = match self.root(target).put(&target.rel, after.into_bytes(), when) {
            Ok(version) => version,
            Err(StoreError::Precondition) => return Err(Error::version_mismatch(&path, "a newer one")),
            Err(error) => return Err(Error::store(&path, error)),
        };
        Ok(EditOutcome { path, diff, applied: true, replacements, version })
    }

    pub(crate) fn object_create_directory(
        &self,
        target: &Target,
        path: VirtualPath,
    ) -> Result<CreateDirOutcome, Error> {
        let root = self.root(target);
        if root.head(&target.rel).map_err(|error| Error::store(&path, error))?.is_some() {
            return Err(Error::not_a_directory(&path));
        }
        let exists = root.is_directory(&target.rel).map_err(|error| Error::store(&path, error))?;
        if !exists {
            self.allow(target, Access::Write, &path)?;
        }
        // Directories are prefixes: nothing is written until a file is.
        Ok(CreateDirOutcome { path, created: !exists })
    }

    pub(crate) fn object_list(&self, target: &Target, path: VirtualPath) -> Result<Listing, Error> {
        self.allow(target, Access::Read, &path)?;
        let root = self.root(target);
        let (directories, files) = root.list_directory(&target.rel).map_err(|error| Error::store(&path, error))?;
        if directories.is_empty() && files.is_empty() && !target.rel.is_empty() {
            return Err(if root.head(&target.rel).map_err(|error| Error::store(&path, error))?.is_some() {
                Error::not_a_directory(&path)
            } else {
                Error::not_found(&path)
            });
        }
        let mut entries: Vec<ListEntry> = directories
            .into_iter()
            .map(|name| ListEntry { name, kind: EntryKind::Directory })
            .chain(files.into_iter().map(|(name, _)| ListEntry { name, kind: EntryKind::File }))
            .collect();
        entries.sort_by(|left, right| left.name.cmp(&right.name));
        let total = entries.len();
        entries.truncate(self.registry.limits.entries);
        Ok(Listing { truncated: entries.len() < total, total, entries, path })
    }

    /// Every object below the target, bounded; `true` when more exist.
    fn object_walk(&self, target: &Target, path: &VirtualPath) -> Result<(Vec<Vec<String>>, bool), Error> {
        let (objects, truncated) = self.object_walk_with_info(target, path)?;
        Ok((objects.into_iter().map(|(parts, _)| parts).collect(), truncated))
    }

    /// Every object below `path` (bounded), as mount-relative parts below it, with metadata.
    #[expect(clippy::type_complexity, reason = "a private helper's result, used in two places")]
    fn object_walk_with_info(
        &self,
        target: &Target,
        path: &VirtualPath,
    ) -> Result<(Vec<(Vec<String>, ObjectInfo)>, bool), Error> {
        self.allow(target, Access::Read, path)?;
        let limit = self.registry.limits.entries.saturating_mul(8);
        self.root(target).list_all(&target.rel, limit).map_err(|error| Error::store(path, error))
    }

    pub(crate) fn object_tree(
        &self,
        target: &Target,
        path: VirtualPath,
        max_depth: usize,
        excludes: &[String],
    ) -> Result<Tree, Error> {
        let excluded = exclude_set(excludes, &self.registry.limits)?;
        let (objects, mut truncated) = self.object_walk(target, &path)?;
        let limit = self.registry.limits.entries;
        let mut entries: Vec<TreeNode> = Vec::new();
        let mut count = 0usize;
        'objects: for parts in objects {
            let mut level = &mut entries;
            for (depth, name) in parts.iter().enumerate() {
                let relative = parts[..=depth].join("/");
                if excluded.is_match(&relative) || excluded.is_match(name) || depth >= max_depth {
                    continue 'objects;
                }
                let is_file = depth + 1 == parts.len();
                let position = if let Some(position) = level.iter().position(|node| node.name == *name) {
                    position
                } else {
                    if count >= limit {
                        truncated = true;
                        break 'objects;
                    }
                    count += 1;
                    let kind = if is_file { EntryKind::File } else { EntryKind::Directory };
                    let children = (!is_file && depth + 1 < max_depth).then(Vec::new);
                    level.push(TreeNode { name: name.clone(), kind, children });
                    level.len() - 1
                };
                match level[position].children.as_mut() {
                    Some(children) => level = children,
                    None => continue 'objects,
                }
            }
        }
        Ok(Tree { path, entries, count, truncated, unreadable: 0 })
    }

    #[expect(clippy::needless_pass_by_value, reason = "mirrors the local operation's signature")]
    pub(crate) fn object_search_files(
        &self,
        target: &Target,
        path: VirtualPath,
        matcher: &globset::GlobMatcher,
        by_path: bool,
        excludes: &[String],
    ) -> Result<NameSearch, Error> {
        let excluded = exclude_set(excludes, &self.registry.limits)?;
        let (objects, mut truncated) = self.object_walk(target, &path)?;
        let limit = self.registry.limits.entries;
        let mut seen = std::collections::BTreeSet::new();
        'objects: for parts in objects {
            for depth in 0..parts.len() {
                let relative = parts[..=depth].join("/");
                if excluded.is_match(&relative) || excluded.is_match(&parts[depth]) {
                    continue 'objects;
                }
                let subject = if by_path { relative.as_str() } else { parts[depth].as_str() };
                if matcher.is_match(subject) && seen.insert(relative.clone()) && seen.len() > limit {
                    truncated = true;
                    break 'objects;
                }
            }
        }
        let matches = seen
            .into_iter()
            .take(limit)
            .map(|relative| relative.split('/').fold(path.clone(), |path, name| path.join_trusted(name)))
            .collect();
        Ok(NameSearch { matches, truncated, unreadable: 0 })
    }

    /// Content search over every object below the target, streaming each one.
    pub(crate) fn object_grep(
        &self,
        target: &Target,
        path: &VirtualPath,
        include: Option<&(bool, globset::GlobMatcher)>,
        search: &mut dyn FnMut(&VirtualPath, &mut dyn std::io::Read) -> bool,
    ) -> Result<(usize, bool), Error> {
        let root = self.root(target);
        if let Some(info) = root.head(&target.rel).map_err(|error| Error::store(path, error))? {
            // A single object.
            self.allow(target, Access::Read, path)?;
            let mut reader = self.deadline.reader(root.reader(&target.rel, &info));
            let more = search(path, &mut reader);
            self.deadline.check()?;
            return Ok((1, !more));
        }
        let (objects, truncated) = self.object_walk_with_info(target, path)?;
        let ignores = self.object_gitignores(target, path, &objects);
        let mut files = 0;
        for (parts, info) in objects {
            self.deadline.check()?;
            // As in a local tree: nothing under `.git`, nothing a `.gitignore` at or below the
            // searched directory excludes.
            if parts[..parts.len() - 1].iter().any(|name| name == ".git") || ignored(&ignores, path, &parts) {
                continue;
            }
            let relative = parts.join("/");
            if let Some((by_path, glob)) = include {
                let subject = if *by_path { relative.as_str() } else { parts.last().map_or("", String::as_str) };
                if !glob.is_match(subject) {
                    continue;
                }
            }
            let mut rel = target.rel.clone();
            rel.extend(parts.iter().cloned());
            let file_path = parts.iter().fold(path.clone(), |path, name| path.join_trusted(name));
            files += 1;
            let mut reader = self.deadline.reader(root.reader(&rel, &info));
            if !search(&file_path, &mut reader) {
                return Ok((files, true));
            }
        }
        Ok((files, truncated))
    }

    /// The `.gitignore` objects among `objects`, as matchers keyed by their directory's parts.
    fn object_gitignores(
        &self,
        target: &Target,
        path: &VirtualPath,
        objects: &[(Vec<String>, ObjectInfo)],
    ) -> HashMap<Vec<String>, Gitignore> {
        let root = self.root(target);
        let mut ignores = HashMap::new();
        for (parts, info) in objects {
            let Some((name, directory)) = parts.split_last() else { continue };
            if name != ".gitignore" || info.size > super::grep::MAX_GITIGNORE_BYTES {
                continue;
            }
            let mut rel = target.rel.clone();
            rel.extend(parts.iter().cloned());
            let Ok(Some((bytes, _))) = root.get_first(&rel, super::grep::MAX_GITIGNORE_BYTES + 1, true) else {
                continue;
            };
            // As in a local walk, a `.gitignore` that is not UTF-8 is not used.
            let Ok(text) = String::from_utf8(bytes) else { continue };
            let directory_path = directory.iter().fold(path.clone(), |path, name| path.join_trusted(name));
            if let Some(matcher) = super::grep::gitignore_matcher(&directory_path, &text) {
                ignores.insert(directory.to_vec(), matcher);
            }
        }
        ignores
    }

    pub(crate) fn object_delete(
        &self,
        target: &Target,
        path: VirtualPath,
        recursive: bool,
        expected_version: Option<&str>,
    ) -> Result<DeleteOutcome, Error> {
        self.allow(target, Access::Delete, &path)?;
        if target.rel.is_empty() {
            return Err(Error::invalid_argument(agent_text!["cannot delete ", code(&path), ": it is a mount root"]));
        }
        self.guard_tree(target.mount, &target.rel, None, TreeChange::Delete, &path)?;
        let root = self.root(target);
        if let Some(info) = root.head(&target.rel).map_err(|error| Error::store(&path, error))? {
            if let Some(expected) = expected_version
                && info.token().as_deref() != Some(expected)
            {
                return Err(Error::version_mismatch(&path, info.token().as_deref().unwrap_or_default()));
            }
            root.delete(&target.rel).map_err(|error| Error::store(&path, error))?;
            return Ok(DeleteOutcome { path, kind: "file" });
        }
        if !root.is_directory(&target.rel).map_err(|error| Error::store(&path, error))? {
            return Err(Error::not_found(&path));
        }
        if !recursive {
            return Err(Error::not_empty(&path));
        }
        loop {
            let (objects, more) = root.list_all(&target.rel, 1000).map_err(|error| Error::store(&path, error))?;
            for (parts, _) in &objects {
                let mut rel = target.rel.clone();
                rel.extend(parts.iter().cloned());
                root.delete(&rel).map_err(|error| Error::store(&path, error))?;
            }
            if !more || objects.is_empty() {
                break;
            }
        }
        Ok(DeleteOutcome { path, kind: "directory" })
    }

    /// Moves within one object mount: copy (if absent, unless `overwrite`), then delete. Not
    /// atomic: a failure between the two leaves both copies, never neither.
    #[expect(clippy::needless_pass_by_value, reason = "the caller hands over the parsed paths")]
    pub(crate) fn object_move_within(
        &self,
        from: &Target,
        to: &Target,
        source: VirtualPath,
        destination: VirtualPath,
        overwrite: bool,
    ) -> Result<(), Error> {
        let root = self.root(from);
        if from.rel == to.rel {
            // Onto itself: nothing moves (a copy, then a delete of the source, would lose it).
            return match root.head(&from.rel).map_err(|error| Error::store(&source, error))? {
                Some(_) if overwrite => Ok(()),
                Some(_) => Err(Error::already_exists(&destination)),
                None => Err(Error::not_found(&source)),
            };
        }
        if root.head(&from.rel).map_err(|error| Error::store(&source, error))?.is_none() {
            return Err(if root.is_directory(&from.rel).unwrap_or(false) {
                Error::invalid_argument(agent_text![
                    "cannot move directory ",
                    code(&source),
                    " in object storage; move its files one by one"
                ])
            } else {
                Error::not_found(&source)
            });
        }
        root.copy(&from.rel, &to.rel, overwrite).map_err(|error| Error::store(&destination, error))?;
        root.delete(&from.rel).map_err(|error| Error::store(&source, error))?;
        Ok(())
    }
}

/// True when the `.gitignore` matchers (keyed by directory parts below `base`) exclude the
/// object at `parts` or one of the directories above it: for each, the deepest matcher with
/// an opinion decides, as in a local walk.
fn ignored(ignores: &HashMap<Vec<String>, Gitignore>, base: &VirtualPath, parts: &[String]) -> bool {
    if ignores.is_empty() {
        return false;
    }
    let mut subject = base.clone();
    for end in 1..=parts.len() {
        subject = subject.join_trusted(&parts[end - 1]);
        let is_directory = end < parts.len();
        for depth in (0..end).rev() {
            let Some(matcher) = ignores.get(&parts[..depth]) else { continue };
            let found = matcher.matched(std::path::Path::new(subject.as_str()), is_directory);
            if found.is_ignore() {
                return true;
            }
            if found.is_whitelist() {
                break;
            }
        }
    }
    false
}
