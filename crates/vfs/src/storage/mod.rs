//! Storage backends: where a resolved name leads, and the only code that touches a disk.
//!
//! Resolution, rights, visibility and the tools live above this module and speak only in
//! virtual paths and handles; a backend turns a mount-relative, canonical list of segments into
//! handles and bytes. Today there is one backend, [`local`], built on directory handles
//! (`openat` with `O_NOFOLLOW`, one component at a time). The object-storage backend of a later
//! issue plugs in here (see `docs/adr/0001-handle-based-confinement.md`).

pub(crate) mod local;
#[cfg(feature = "s3")]
pub(crate) mod object;

use crate::registry::ConfigError;
use crate::spec::MountSpec;

/// A mount's storage: a local directory, or (feature `s3`) an object store.
pub(crate) enum Backend {
    Local(local::LocalRoot),
    #[cfg(feature = "s3")]
    Object(object::ObjectRoot),
}

impl Backend {
    /// Opens the storage a spec names: `s3://…` and `memory://…` are object stores, anything
    /// else a local directory.
    pub(crate) fn open(spec: &MountSpec) -> Result<Self, ConfigError> {
        let physical = spec.physical();
        if physical.starts_with("s3://") || physical.starts_with("memory://") {
            #[cfg(feature = "s3")]
            return object::ObjectRoot::open(spec).map(Backend::Object);
            #[cfg(not(feature = "s3"))]
            return Err(ConfigError::Store {
                root: spec.root().as_str().to_owned(),
                physical: physical.to_owned(),
                reason: "this build has no object-storage support (cargo feature `s3`)".to_owned(),
            });
        }
        local::LocalRoot::open(spec).map(Backend::Local)
    }

    /// The identity of a local root, for physical nesting; object stores have none.
    #[cfg_attr(not(feature = "s3"), expect(clippy::unnecessary_wraps, reason = "object stores have none"))]
    pub(crate) fn identity(&self) -> Option<(u64, u64)> {
        match self {
            Backend::Local(root) => Some(root.identity()),
            #[cfg(feature = "s3")]
            Backend::Object(_) => None,
        }
    }

    /// Every physical spelling the scrub must know.
    pub(crate) fn spellings(&self) -> &[String] {
        match self {
            Backend::Local(root) => root.spellings(),
            #[cfg(feature = "s3")]
            Backend::Object(root) => root.spellings(),
        }
    }

    /// The local root, if this is one. Handle-based walks only run on local mounts:
    /// operations route object mounts to their own implementation first.
    #[cfg_attr(not(feature = "s3"), expect(clippy::unnecessary_wraps, reason = "object stores are not local"))]
    pub(crate) fn local(&self) -> Option<&local::LocalRoot> {
        match self {
            Backend::Local(root) => Some(root),
            #[cfg(feature = "s3")]
            Backend::Object(_) => None,
        }
    }

    /// The object root, if this is one.
    #[cfg(feature = "s3")]
    pub(crate) fn object(&self) -> Option<&object::ObjectRoot> {
        match self {
            Backend::Object(root) => Some(root),
            Backend::Local(_) => None,
        }
    }
}
