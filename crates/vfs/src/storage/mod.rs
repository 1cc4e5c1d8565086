//! Storage backends: where a resolved name leads, and the only code that touches a disk.
//!
//! Resolution, rights, visibility and the tools live above this module and speak only in
//! virtual paths and handles; a backend turns a mount-relative, canonical list of segments into
//! handles and bytes. Today there is one backend, [`local`], built on directory handles
//! (`openat` with `O_NOFOLLOW`, one component at a time). The object-storage backend of a later
//! issue plugs in here (see `docs/adr/0001-handle-based-confinement.md`).

pub(crate) mod local;
