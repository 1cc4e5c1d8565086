//! The gate: the one code that turns a virtual path into a place an operation may act on, typed
//! by what was authorized there.
//!
//! Every operation used to call routing, the name rules, resolution and the rights check in the
//! right order, and the store's mutating primitives accepted any place resolution returned:
//! nothing but care kept a write from landing where only a read had been checked. Here
//! [`Place`] carries its need as a type ([`Read`], [`Write`], [`Delete`]); only this module
//! builds one, after every check that need asks for, and each mutator of the storage seam
//! (`put`, `make_directory`, `open_append`, `remove`, `rename`, the target of `copy_file`)
//! takes a place of the need it serves. An operation that located for reading and then writes
//! does not compile. A second front end (the FUSE view of the sandbox issue) gets the rules by
//! asking the gate for places, not by replaying them.
//!
//! The quick routes are the gate's too: a read that the store can open in one step from the
//! mount's root ([`Context::open_to_read`]), the metadata of a file found the same way
//! ([`Context::file_info_fast`]) and the directory a `create_directory` may have to make
//! ([`Context::locate_directory_to_make`]). An operation asks for them here and gets the same checks as [`Context::locate`] makes.
//!
//! The places a delete or a move changes come from here claimed ([`Context::claim_to_delete`],
//! [`Context::claim_move`]): found, claimed (`registry::claims`, ADR 0006), found again under
//! the claim, and guarded there: nothing protected at them (by identity), and the walks for
//! protected names inside a tree that a recursive delete or a directory's move would carry
//! out of its protection. The operation gets the places with the claim that keeps them so.
//!
//! What a place does not carry: the checks that must be made again under a directory lock
//! (the git look-alike guard), which the operations repeat where they hold the lock.

use std::marker::PhantomData;
use std::ops::Deref;

use crate::error::{Error, ErrorKind};
use crate::ops::{Context, Precondition};
use crate::path::VirtualPath;
use crate::policy::RuleEffect;
use crate::registry::{Claim, TreeChange};
use crate::spec::Access;
use crate::storage::local::{MAX_DEPTH, OpenFile};
use crate::storage::{Kind, Located, Resolve, Stat};
use crate::text::{agent_text, code};

/// What a place was authorized for. Sealed: the three needs below are all there are.
pub(crate) trait Need: sealed::Sealed {
    /// The access the rights and name rules are asked for.
    const ACCESS: Access;
}

mod sealed {
    pub(crate) trait Sealed {}
    impl Sealed for super::Read {}
    impl Sealed for super::Write {}
    impl Sealed for super::Delete {}
}

/// Reading content, metadata or listings.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Read {}

/// Creating or replacing a file, making a directory, appending; the destination of a move.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Write {}

/// Removing a file or a tree; the source of a move.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Delete {}

impl Need for Read {
    const ACCESS: Access = Access::Read;
}

impl Need for Write {
    const ACCESS: Access = Access::Write;
}

impl Need for Delete {
    const ACCESS: Access = Access::Delete;
}

/// A located place on which `N` was authorized for the caller that located it. Built only by
/// [`Context::locate`] and [`Context::authorize_write`]; it reads as the [`Located`] it holds.
#[derive(Debug, Clone)]
pub(crate) struct Place<N: Need> {
    located: Located,
    need: PhantomData<N>,
}

impl<N: Need> Place<N> {
    /// The place without its authorization: what reads keep (a [`Located`] reaches no mutator).
    pub(crate) fn into_located(self) -> Located {
        self.located
    }
}

impl<N: Need> Deref for Place<N> {
    type Target = Located;

    fn deref(&self) -> &Located {
        &self.located
    }
}

/// A file to read, as [`Context::open_to_read`] found it.
pub(crate) enum ToRead {
    /// Opened in one step from the mount's root: no link and no nested root lay on the way,
    /// so the path as written is the canonical one the checks judged.
    Opened(OpenFile, Stat),
    /// The place, for the store's own open.
    Place(Place<Read>),
}

/// A file's metadata as [`Context::file_info_fast`] found it: what it is, its version, and
/// the rights at its path.
pub(crate) type FastInfo = (Stat, String, &'static str);

/// The places a move changes, as [`Context::claim_move`] claimed and guarded them.
pub(crate) struct Claimed<'r> {
    /// Keeps both places as they were found until it is dropped.
    pub(crate) claim: Claim<'r>,
    /// The source, located for deleting.
    pub(crate) from: Place<Delete>,
    /// What the source is.
    pub(crate) from_stat: Stat,
    /// The destination, located for writing.
    pub(crate) to: Place<Write>,
}

impl<'r> Context<'r> {
    /// A file to read at `path`: opened by the store's one-step route where it has one, else
    /// located for reading. Either way routing decided visibility and the name rules judged
    /// the path; on the one-step route, which opens only where no link or nested mount
    /// intervenes, the path is canonical and every right includes read, so the rights cannot
    /// refuse there.
    pub(crate) fn open_to_read(&self, path: &VirtualPath) -> Result<ToRead, Error> {
        let (mount, components) = self.registry.route(self.caller, path)?;
        self.registry.check_names(self.caller, mount, &components, Access::Read, path)?;
        if let Some(opened) = self.store(mount).open_fast(&self.table(), &components, path) {
            debug_assert!(self.registry.visible(self.caller, mount));
            let (file, stat) = opened?;
            return Ok(ToRead::Opened(file, stat));
        }
        Ok(ToRead::Place(self.locate::<Read>(path, true, false)?))
    }

    /// A regular file's metadata, version and rights by the store's one-step route, after the
    /// checks a read needs (a hidden name is missing before the file is opened: neither its
    /// kind nor the time its hash takes may answer for it). `None` where that route does not
    /// apply (a directory, a link or a nested root on the way, an object store): locate it.
    pub(crate) fn file_info_fast(&self, path: &VirtualPath) -> Result<Option<FastInfo>, Error> {
        let (mount, components) = self.registry.route(self.caller, path)?;
        self.registry.check_names(self.caller, mount, &components, Access::Read, path)?;
        match self.store(mount).info_fast(&self.table(), &components, path) {
            Some(Ok((stat, version))) => {
                let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
                self.registry.authorize(self.caller, mount, &rel, Access::Read, path)?;
                let rights = self.registry.mounts[mount].rights_at(&rel).0.as_str();
                Ok(Some((stat, version, rights)))
            }
            Some(Err(error)) if error.kind() != ErrorKind::NotAFile => Err(error),
            _ => Ok(None),
        }
    }

    /// The place of a directory `create_directory` may have to make, located for reading (an
    /// existing directory is an answer that needs no write right; [`Context::authorize_write`]
    /// when it must be made), its parents made on the way. The name rules are judged for a
    /// create first, so that a hidden name is refused as such, like any other create.
    pub(crate) fn locate_directory_to_make(
        &self,
        path: &VirtualPath,
        make_parents: bool,
    ) -> Result<Place<Read>, Error> {
        if self.registry.any_rules() {
            let (mount, components) = self.registry.route(self.caller, path)?;
            self.registry.check_names(self.caller, mount, &components, Access::Write, path)?;
        }
        self.locate::<Read>(path, true, make_parents)
    }

    /// The place to delete at `path`, claimed and guarded: located for deleting (never a mount
    /// root, refused before a claim on a whole mount could wait for anything), found again
    /// under the claim, nothing protected at it, and, for a `recursive` delete of a directory,
    /// no protected name inside it (a walk, under the claim). With what it is.
    pub(crate) fn claim_to_delete(
        &self,
        path: &VirtualPath,
        recursive: bool,
    ) -> Result<(Claim<'r>, Place<Delete>, Stat), Error> {
        let (claim, place) = self.under_claim(
            &[path],
            |place: &Place<Delete>| vec![self.place(place)],
            || {
                let place = self.locate::<Delete>(path, false, false)?;
                if Self::is_root(&place) {
                    return Err(Error::invalid_argument(agent_text![
                        "cannot delete ",
                        code(path),
                        ": it is a mount root"
                    ]));
                }
                Ok(place)
            },
        )?;
        let Some(stat) = self.store(place.mount).stat(&place.node, path)? else {
            return Err(Error::not_found(path));
        };
        self.guard_tree(&place, Some(&stat), TreeChange::Delete, path)?;
        if recursive
            && stat.kind == Kind::Directory
            && let Some((effect, class)) = self.protected_inside(&place, path)?
        {
            return Err(Error::holds_protected("delete", path, &class, effect == RuleEffect::Hidden));
        }
        Ok((claim, place, stat))
    }

    /// The two places a move changes, claimed together and guarded: the source located for
    /// deleting ([`Context::move_source`]), the destination for writing
    /// ([`Context::move_destination`]), both found again under the claim; then, for a
    /// directory, no protected name inside it that the move would carry out of its
    /// protection, and none that a rule at the destination would protect (walks, under the
    /// claim).
    pub(crate) fn claim_move(
        &self,
        source: &VirtualPath,
        destination: &VirtualPath,
        at_destination: &Precondition,
    ) -> Result<Claimed<'r>, Error> {
        let (claim, ((from, from_stat), to)) = self.under_claim(
            &[source, destination],
            |((from, _), to): &((Place<Delete>, Stat), Place<Write>)| vec![self.place(from), self.place(to)],
            || Ok((self.move_source(source, destination)?, self.move_destination(destination, at_destination)?)),
        )?;
        if from_stat.kind == Kind::Directory {
            if let Some((effect, class)) = self.protection_lost(&from, &to, source)? {
                return Err(Error::holds_protected("move", source, &class, effect == RuleEffect::Hidden));
            }
            // Nor may it bring a file where a write could not create it.
            if let Some((effect, class)) = self.protection_gained(&from, &to, source)? {
                return Err(Error::would_be_protected(source, destination, &class, effect == RuleEffect::Hidden));
            }
        }
        Ok(Claimed { claim, from, from_stat, to })
    }

    /// The source of a move: located for deleting, not a mount root or a special file,
    /// nothing protected at it, and not an ancestor of the destination.
    pub(crate) fn move_source(
        &self,
        source: &VirtualPath,
        destination: &VirtualPath,
    ) -> Result<(Place<Delete>, Stat), Error> {
        let from = self.locate::<Delete>(source, false, false)?;
        if Self::is_root(&from) {
            return Err(Error::invalid_argument(agent_text!["cannot move ", code(source), ": it is a mount root"]));
        }
        let Some(stat) = self.store(from.mount).stat(&from.node, source)? else {
            return Err(Error::not_found(source));
        };
        if stat.kind == Kind::Special {
            return Err(Error::unsupported(source));
        }
        self.guard_tree(&from, Some(&stat), TreeChange::MoveFrom, source)?;
        if destination.starts_with(source) && destination != source {
            return Err(Error::invalid_argument(agent_text!["cannot move ", code(source), " into itself"]));
        }
        Ok((from, stat))
    }

    /// The destination of a move, located for writing: nothing protected at or below it,
    /// checked lexically first (so that a refused move makes no parent directory on its way)
    /// and by identity where the store landed, and never a mount root. Where `at_destination`
    /// needs something there, no parent is made either: a missing one answers as the
    /// missing file (`Context::locate_present`).
    fn move_destination(
        &self,
        destination: &VirtualPath,
        at_destination: &Precondition,
    ) -> Result<Place<Write>, Error> {
        let (routed, components) = self.registry.route(self.caller, destination)?;
        let components: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
        self.registry.guard_tree(self.caller, routed, &components, None, TreeChange::MoveTo, destination)?;
        let to = match at_destination {
            Precondition::Any | Precondition::Absent => self.locate::<Write>(destination, false, true)?,
            _ => self.locate_present(destination, &|| Error::version_mismatch(destination, crate::ops::NO_FILE))?,
        };
        if Self::is_root(&to) {
            // No precondition could let a mount root be replaced: not an "already exists".
            return Err(Error::invalid_argument(agent_text![
                "cannot move onto ",
                code(destination),
                ": it is a mount root"
            ]));
        }
        self.guard_tree(&to, None, TreeChange::MoveTo, destination)?;
        Ok(to)
    }

    /// Routes and locates `path`, then checks `N` on where the store landed, and returns the
    /// place typed by it. With `create_parents`, missing directories on the way are created
    /// (local stores; object stores have none to create) after the rights there are checked.
    pub(crate) fn locate<N: Need>(
        &self,
        path: &VirtualPath,
        follow_final: bool,
        create_parents: bool,
    ) -> Result<Place<N>, Error> {
        self.locate_as(path, follow_final, create_parents, None)
    }

    /// [`Context::locate`] for writing a file that must be there already (a write guarded by
    /// its version): its parents are judged as a write's are, and where one is missing, so
    /// is the file: the answer is `missing`'s, and no directory is made on the way (a write
    /// refused makes none).
    pub(crate) fn locate_present(
        &self,
        path: &VirtualPath,
        missing: &dyn Fn() -> Error,
    ) -> Result<Place<Write>, Error> {
        self.locate_as(path, false, true, Some(missing))
    }

    fn locate_as<N: Need>(
        &self,
        path: &VirtualPath,
        follow_final: bool,
        create_parents: bool,
        missing: Option<&dyn Fn() -> Error>,
    ) -> Result<Place<N>, Error> {
        let access = N::ACCESS;
        let (mount, components) = self.registry.route(self.caller, path)?;
        // The name rules first, on the path as written: a hidden name answers as a missing
        // one before resolution can tell what is there (the canonical path is judged below).
        // Without `create_parents` the place must exist (a read, an edit, a delete, a move's
        // source), so a hidden one is missing whatever the access; creating one is refused
        // as such by `authorize`.
        let judged = if create_parents { access } else { Access::Read };
        if !create_parents {
            self.registry.check_names(self.caller, mount, &components, judged, path)?;
        }
        if create_parents {
            if components.len() > MAX_DEPTH + 1 {
                return Err(Error::too_deep(path, MAX_DEPTH));
            }
            // The lexical rights first, so that a refused write creates no parent directory;
            // the rights where resolution lands are checked again below.
            self.authorize_as_written(mount, &components, access, path)?;
        }
        let gate = |mount: usize, rel: &[String]| {
            if rel.len() > MAX_DEPTH {
                return Err(Error::too_deep(path, MAX_DEPTH));
            }
            self.registry.authorize(self.caller, mount, rel, Access::Write, path)?;
            self.guard_git_directory(mount, rel, Access::Write, path)?;
            missing.map_or(Ok(()), |missing| Err(missing()))
        };
        // A directory made on the way is a change of its own (`crate::changes`).
        let made = |mount: usize, rel: &[String]| {
            let root = self.registry.mounts[mount].root_path.clone();
            let directory = rel.iter().fold(root, |directory, name| directory.join_trusted(name));
            let image = self.keeps_images(&directory).then_some(crate::changes::Image::Absent);
            self.made_on_the_way(&directory, image.as_ref());
        };
        let options = Resolve {
            follow_final,
            create_parents: if create_parents { Some(&gate) } else { None },
            made: if create_parents { Some(&made) } else { None },
        };
        let located = self.store(mount).locate(&self.table(), mount, &components, &options, path)?;
        if judged != access {
            // A hidden place that must exist is missing, before `authorize` judges the names
            // again for `access` (a read-only name refuses a change).
            self.registry.check_names(self.caller, located.mount, &located.rel, judged, path)?;
        }
        self.registry.authorize(self.caller, located.mount, &located.rel, access, path)?;
        if access == Access::Write {
            self.guard_git_directory(located.mount, &located.rel, access, path)?;
        }
        Ok(Place { located, need: PhantomData })
    }

    /// The rights where `path` lies as written (`mount` and `components`, as routed): a change
    /// through a read-only mount's path is refused even where resolution would land in a
    /// writable mount nested in it. [`Context::locate`] checks it before it makes parents; a
    /// stage in place, which makes none, checks it too.
    pub(crate) fn authorize_as_written(
        &self,
        mount: usize,
        components: &[&str],
        access: Access,
        path: &VirtualPath,
    ) -> Result<(), Error> {
        let rel: Vec<String> = components.iter().map(|&segment| segment.to_owned()).collect();
        self.registry.authorize(self.caller, mount, &rel, access, path)
    }

    /// The same place, authorized for writing as well: the rights and the name rules at its
    /// canonical path, its depth, and the git look-alike guard. For `create_directory`, which
    /// locates for reading (an existing directory is an answer that needs no write right) and
    /// needs the write only when it has to make the directory.
    pub(crate) fn authorize_write(&self, place: Place<Read>, path: &VirtualPath) -> Result<Place<Write>, Error> {
        let located = place.located;
        if located.rel.len() > MAX_DEPTH {
            return Err(Error::too_deep(path, MAX_DEPTH));
        }
        self.registry.authorize(self.caller, located.mount, &located.rel, Access::Write, path)?;
        self.guard_git_directory(located.mount, &located.rel, Access::Write, path)?;
        Ok(Place { located, need: PhantomData })
    }
}
