//! Claims on trees, so that a check of what lies inside a tree and the act it guards happen as
//! one step for every other move and delete of the process (ADR 0006).
//!
//! A recursive delete walks its tree for protected names, then removes the tree; a move of a
//! directory walks it for protections that would not hold at the destination, then renames
//! it. Calls of one session run in parallel, so without claims another move could bring a
//! directory holding `.env` into the tree between the walk and the act, and the protected
//! file would be deleted, or carried to a mount without the rule. A move or delete claims
//! every place it changes (a delete its tree, a move its source and its destination) before
//! it checks them, and holds the claims until it has acted; a claim that overlaps one held
//! (the same place, one inside the other) waits until that one is released. A write, a
//! stage's commit and a new directory claim their own place, so that none lands in a tree
//! between a move's walk and its rename (a file brought under a rule of the tree's new place).
//!
//! Places are physical (a store's tree base, then the canonical path inside it) and the table
//! is the process's own, not a registry's: two mounts of one directory, in one registry or in
//! the registries of two crews a daemon serves, are one tree. Another process is not excluded.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::budget::Deadline;
use crate::error::Error;
use crate::path::VirtualPath;

/// How often a waiting claim looks at its call's cancel flag.
const POLL: Duration = Duration::from_millis(50);

/// A place a claim covers, with everything below: its store's tree base
/// (`Backend::tree_base`), then the canonical path inside it. Never shown to anyone.
pub(crate) type Place = Vec<String>;

/// The claims held now.
pub(crate) struct TreeClaims {
    held: Mutex<Held>,
    released: Condvar,
}

struct Held {
    next: u64,
    claims: Vec<(u64, Place)>,
}

/// The process's claims: every registry's moves, deletes and writes claim here.
pub(crate) static CLAIMS: TreeClaims = TreeClaims::new();

/// Held while a call checks and changes its places; dropping it releases them.
pub(crate) struct Claim<'c> {
    claims: &'c TreeClaims,
    id: u64,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut held = self.claims.lock();
        held.claims.retain(|(id, _)| *id != self.id);
        drop(held);
        self.claims.released.notify_all();
    }
}

/// True when one place lies at or inside the other. Segments are compared regardless of ASCII
/// case, as the name rules are (resolution rule 13): on a case-insensitive disk `D/x` is `d/x`.
fn overlaps(left: &Place, right: &Place) -> bool {
    left.iter().zip(right).all(|(left, right)| left.eq_ignore_ascii_case(right))
}

impl TreeClaims {
    pub(crate) const fn new() -> Self {
        Self { held: Mutex::new(Held { next: 0, claims: Vec::new() }), released: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        // A panic while the list was held cannot leave it half changed (each change is one
        // `push` or `retain`), so a poisoned list is still the truth.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims every place of `places` (of the call's `paths`) at once, waiting while any
    /// overlaps a claim held by another call, for as long as the call's clock allows (a wait
    /// past it ends the call as timed out, saying what it waited for; a cancel as cancelled).
    /// All at once, so two calls never each hold one place the other waits for.
    pub(crate) fn claim(
        &self,
        places: &[Place],
        deadline: &Deadline,
        paths: &[&VirtualPath],
    ) -> Result<Claim<'_>, Error> {
        let mut held = self.lock();
        loop {
            let busy = places.iter().any(|place| held.claims.iter().any(|(_, other)| overlaps(place, other)));
            if !busy {
                let id = held.next;
                held.next += 1;
                held.claims.extend(places.iter().map(|place| (id, place.clone())));
                return Ok(Claim { claims: self, id });
            }
            deadline.check_waiting(paths)?;
            let wait = deadline.at().map_or(POLL, |at| at.saturating_duration_since(Instant::now()).min(POLL));
            held = self.released.wait_timeout(held, wait).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(key: usize, rel: &str) -> Place {
        std::iter::once(format!("tree{key}"))
            .chain(rel.split('/').filter(|segment| !segment.is_empty()).map(str::to_owned))
            .collect()
    }

    #[test]
    fn places_overlap_at_or_inside_each_other_in_one_tree() {
        assert!(overlaps(&place(0, "a/b"), &place(0, "a/b")));
        assert!(overlaps(&place(0, "a"), &place(0, "a/b/c")));
        assert!(overlaps(&place(0, "a/b/c"), &place(0, "A")));
        assert!(!overlaps(&place(0, "a/b"), &place(0, "a/c")));
        assert!(!overlaps(&place(0, "ab"), &place(0, "a")));
        assert!(!overlaps(&place(0, "a"), &place(1, "a")));
    }

    fn path(text: &str) -> VirtualPath {
        VirtualPath::new(text).unwrap()
    }

    #[test]
    fn an_overlapping_claim_waits_for_the_release() {
        let claims = TreeClaims::new();
        let first = claims.claim(&[place(0, "a")], &Deadline::never(), &[&path("/w/a")]).unwrap();
        // Another tree, and a sibling, are not held up.
        drop(claims.claim(&[place(1, "a"), place(0, "b")], &Deadline::never(), &[&path("/w/b")]).unwrap());
        let released = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _second = claims.claim(&[place(0, "a/b")], &Deadline::never(), &[&path("/w/a/b")]).unwrap();
                assert!(released.load(std::sync::atomic::Ordering::SeqCst));
            });
            std::thread::sleep(Duration::from_millis(30));
            released.store(true, std::sync::atomic::Ordering::SeqCst);
            drop(first);
        });
    }

    /// A call whose time runs out while it waits for another's claim is told what it waited
    /// for, not to narrow a request it cannot narrow.
    #[test]
    fn a_claim_that_waits_past_its_calls_time_says_what_it_waited_for() {
        let claims = TreeClaims::new();
        let _held = claims.claim(&[place(0, "a")], &Deadline::never(), &[&path("/w/a")]).unwrap();
        let deadline =
            crate::Budget::unlimited().with_time(Duration::from_millis(20)).start(crate::hint::Operation::Write);
        let Err(error) = claims.claim(&[place(0, "a/b/new.txt")], &deadline, &[&path("/w/a/b/new.txt")]) else {
            panic!("the claim did not wait");
        };
        assert_eq!(
            (error.kind(), error.to_string()),
            (
                crate::ErrorKind::TimedOut,
                "`write` was stopped at its 1 s time budget while it waited for another call moving or deleting `/w/a/b/new.txt`, a directory above it or something inside it; try again once that call has answered".to_owned()
            )
        );
        // A move waits for either of its places: both are named.
        let deadline =
            crate::Budget::unlimited().with_time(Duration::from_millis(20)).start(crate::hint::Operation::Move);
        let Err(error) = claims.claim(&[place(0, "c"), place(0, "a/d")], &deadline, &[&path("/w/c"), &path("/w/a/d")])
        else {
            panic!("the claim did not wait");
        };
        assert_eq!(
            error.to_string(),
            "`move` was stopped at its 1 s time budget while it waited for another call moving or deleting `/w/c` or `/w/a/d`, a directory above one of them or something inside one; try again once that call has answered"
        );
    }
}
