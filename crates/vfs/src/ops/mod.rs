//! File operations, written once for every caller.
//!
//! Each operation follows the same shape: parse the virtual path, route it to a mount (steps 3
//! and 4 of DESIGN 4.2), resolve beneath the mount's handle (steps 6 to 8), ask the registry
//! for the rights on the *effective* mount and canonical path that resolution reached (steps 5
//! and 7), act on the handles resolution returned, and describe the outcome in virtual paths
//! only. Every result is bounded and says when it was truncated and how to narrow.

mod edit;
mod grep;
#[cfg(feature = "s3")]
mod object;
mod pattern;
mod read;
mod walk;
mod write;

use std::sync::Arc;

pub use edit::{Edit, EditOptions, EditOutcome};

pub use grep::{GrepLine, GrepRequest, GrepResult};
pub use read::{FileInfo, FileResult, MediaRead, ReadWindow, TextRead};
pub use walk::{EntryKind, ListEntry, Listing, NameSearch, Tree, TreeNode};
pub use write::{AppendFile, CreateDirOutcome, DeleteOutcome, MoveOutcome, WriteOptions, WriteOutcome};

use crate::access::Caller;
use crate::budget::Deadline;
use crate::error::Error;
use crate::path::VirtualPath;
use crate::registry::{RegistryInner, TreeChange};
use crate::spec::Access;
use crate::storage::local::{self, Resolved, WalkOptions};

/// One request's view: the registry, who is asking, and the call's clock.
pub(crate) struct Context<'r> {
    pub(crate) registry: &'r RegistryInner,
    pub(crate) caller: Caller,
    pub(crate) deadline: Deadline,
    /// Entries a walk could not read (permissions, I/O errors, too many open files); a result
    /// that skipped any says so and is marked truncated.
    pub(crate) unreadable: std::cell::Cell<usize>,
}

impl<'r> Context<'r> {
    pub(crate) fn new(registry: &'r RegistryInner, caller: Caller, deadline: Deadline) -> Self {
        Self { registry, caller, deadline, unreadable: std::cell::Cell::new(0) }
    }

    /// Counts an entry a walk had to skip because of an error other than "it vanished".
    pub(crate) fn skipped_unreadable(&self) {
        self.unreadable.set(self.unreadable.get() + 1);
    }

    /// Parses agent input into a virtual path.
    pub(crate) fn parse(path: &str) -> Result<VirtualPath, Error> {
        VirtualPath::new(path).map_err(|error| Error::invalid_path(&error))
    }

    /// Routes and resolves `path`, then checks `access` on where resolution landed.
    pub(crate) fn locate(
        &self,
        path: &VirtualPath,
        access: Access,
        follow_final: bool,
        create_parents: bool,
    ) -> Result<Resolved, Error> {
        let (mount, components) = self.registry.route(self.caller, path)?;
        if create_parents {
            if components.len() > local::MAX_DEPTH + 1 {
                return Err(Error::too_deep(path, local::MAX_DEPTH));
            }
            // The lexical rights first, so that a refused write creates no parent directory;
            // the rights where resolution lands are checked again below.
            let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
            self.registry.authorize(self.caller, mount, &rel, access, path)?;
        }
        let gate = |mount: usize, rel: &[String]| {
            if rel.len() > local::MAX_DEPTH {
                return Err(Error::too_deep(path, local::MAX_DEPTH));
            }
            self.registry.authorize(self.caller, mount, rel, Access::Write, path)
        };
        let options = WalkOptions { follow_final, create_parents: if create_parents { Some(&gate) } else { None } };
        let resolved = local::resolve(self.registry, self.caller, path, mount, &components, &options)?;
        self.registry.authorize(self.caller, resolved.mount, &resolved.rel, access, path)?;
        Ok(resolved)
    }

    /// Refuses `change` of the tree at `rel` of `mount` when something inside it is protected
    /// (see `RegistryInner::guard_tree`); `stat` is the tree's own, when known.
    pub(crate) fn guard_tree(
        &self,
        mount: usize,
        rel: &[String],
        stat: Option<local::Stat>,
        change: TreeChange,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let identity = stat.filter(|stat| stat.kind == local::Kind::Directory).map(|stat| stat.identity());
        self.registry.guard_tree(self.caller, mount, rel, identity, change, path)
    }

    /// The rights string at a resolved place, for `get_file_info`.
    pub(crate) fn rights_at(&self, resolved: &Resolved) -> &'static str {
        self.registry.mounts[resolved.mount].rights_at(&resolved.rel).0.as_str()
    }

    /// True when a directory entry is another mount's root that this caller may not see
    /// (an internal directory lying physically inside a visible mount).
    pub(crate) fn hidden_entry(&self, directory: &std::os::fd::OwnedFd, entry: &local::Entry) -> bool {
        if entry.kind != local::Kind::Directory {
            return false;
        }
        if !self.registry.identities.keys().any(|&(_, inode)| inode == entry.inode) {
            return false;
        }
        match local::stat_child(directory, &entry.name) {
            Some(stat) => {
                self.registry.mount_at(stat.identity()).is_some_and(|mount| !self.registry.visible(self.caller, mount))
            }
            // Vanished: nothing to show either way.
            None => true,
        }
    }
}

/// A shared handle, as the walk uses it.
pub(crate) type Handle = Arc<std::os::fd::OwnedFd>;

/// Formats seconds since the epoch as RFC 3339 UTC (`2026-11-30T02:13:39Z`), the form every
/// vfs surface uses for time (modification times, exchange-log stamps).
#[must_use]
pub fn rfc3339(seconds: i64) -> String {
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        second_of_day / 3600,
        second_of_day % 3600 / 60,
        second_of_day % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_796_004_819), "2026-11-30T02:13:39Z");
        assert_eq!(super::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }
}
