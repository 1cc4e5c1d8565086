//! Two calls of one session at once, racing a tree check against the act it guards ("Hold the
//! line, round 3", class 1; `docs/adr/0006-atomic-tree-guards.md`): a recursive delete while a
//! directory holding `.env` and `.git` is moved into its tree, and a move of a directory to a
//! mount without its rules while a hidden file is moved into it, and a move judged at its new
//! place while a file is written into it, and an undo's guarded move beside a write of its
//! source. Each round starts both calls
//! on a barrier, one of them after a small varying delay, and requires the answers that some
//! order of the two calls gives: both calls succeed where that order lets them, a refusal is
//! the exact one that order gives, and no protected file is deleted or carried out of its
//! protection.
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk and look at them")]

mod common;

use std::sync::Barrier;
use std::time::Duration;

use common::Fixture;
use vfs::{AgentAccessor, MountRegistry, NameRule, Precondition};

const ROUNDS: u64 = 200;
const SECRET: &str = "SECRET-VALUE-31337";

/// A small, reproducible spread of delays: up to `span` microseconds, different every round.
fn delay(round: u64, span: u64) -> Duration {
    let mut state = round.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    state ^= state >> 31;
    state = state.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    state ^= state >> 29;
    Duration::from_micros(state % span)
}

/// Runs `first` and `second` at once, `second` after `pause`, and returns both answers.
fn race<A: Send, B: Send>(
    pause: Duration,
    first: impl FnOnce() -> A + Send,
    second: impl FnOnce() -> B + Send,
) -> (A, B) {
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        let one = scope.spawn(|| {
            barrier.wait();
            first()
        });
        let two = scope.spawn(|| {
            barrier.wait();
            std::thread::sleep(pause);
            second()
        });
        (one.join().unwrap(), two.join().unwrap())
    })
}

/// A tree big enough that its walk takes a while: `count` files in a few directories.
fn fill(fixture: &Fixture, directory: &str, count: usize) {
    for index in 0..count {
        fixture.file(&format!("{directory}/part{}/file{index:03}.txt", index % 4), "data\n");
    }
}

/// `p/stage` holding 40 files, mounted at `/p` with the mount string's `rights` and the
/// default name rules: the directory the move tests move to `/p/cfg`.
fn stage_under(rights: &str) -> (Fixture, MountRegistry) {
    let fixture = Fixture::new();
    fill(&fixture, "p/stage", 40);
    let registry = MountRegistry::builder()
        .mount(fixture.spec("p", "/p", rights))
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    (fixture, registry)
}

/// The moves of `/p/stage` to `/p/cfg`, and their refusal when files would land on `landing`.
const MOVED: &str = "moved `/p/stage` to `/p/cfg`";

fn refused_onto(landing: &str) -> String {
    format!("cannot move `/p/stage` to `/p/cfg`: files in it would land on {landing}")
}

fn defaults(fixture: &Fixture) -> (MountRegistry, AgentAccessor) {
    let registry = MountRegistry::builder()
        .mount(fixture.spec("p", "/p", "rw"))
        .name_rules(NameRule::defaults())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    (registry, agent)
}

#[test]
fn a_recursive_delete_never_takes_a_protected_directory_moved_into_its_tree() {
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fill(&fixture, "p/d", 40);
        fixture.file("p/carrier/.env", SECRET);
        fixture.file("p/carrier/.git/HEAD", "ref: refs/heads/main\n");
        fixture.file("p/carrier/readme.txt", "carried\n");
        let (_registry, agent) = defaults(&fixture);
        let (deleted, moved) = race(
            delay(round, 800),
            || agent.delete("/p/d", true, &Precondition::Any),
            || agent.move_path("/p/carrier", "/p/d/carrier", &Precondition::Any, &Precondition::Absent),
        );
        // The move has nothing against it in either order: before the delete it lands in
        // the tree, after it it makes `/p/d` again.
        let moved = moved.unwrap_or_else(|error| panic!("round {round}: the move failed: {error}"));
        assert_eq!(moved.to_text(), "moved `/p/carrier` to `/p/d/carrier`");
        match deleted {
            Ok(outcome) => {
                assert_eq!(outcome.to_text(), "deleted directory `/p/d`");
            }
            Err(error) => {
                assert_eq!(
                    error.to_string(),
                    "cannot delete `/p/d`: it holds environment files inside, which are hidden from you",
                    "round {round}"
                );
            }
        }
        assert_eq!(fixture.read("p/d/carrier/.env"), SECRET, "round {round}: `.env` was deleted");
        assert_eq!(fixture.read("p/d/carrier/.git/HEAD"), "ref: refs/heads/main\n", "round {round}");
        assert_eq!(fixture.read("p/d/carrier/readme.txt"), "carried\n", "round {round}");
    }
}

#[test]
fn a_directory_move_never_carries_a_hidden_file_moved_into_it_to_a_mount_without_the_rule() {
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fill(&fixture, "p/d", 40);
        fixture.file("p/carrier/server.key", SECRET);
        fixture.mkdir("q");
        let rules = format!("{}:/p:rw;**/*.key:hidden", fixture.path("p").display());
        let registry = MountRegistry::builder()
            .mount(rules.parse().unwrap())
            .mount(fixture.spec("q", "/q", "rw"))
            .build(vfs::ambient_authority())
            .unwrap();
        let agent = registry.agent();
        let (directory, carrier) = race(
            delay(round, 800),
            || agent.move_path("/p/d", "/q/d", &Precondition::Any, &Precondition::Absent),
            || agent.move_path("/p/carrier", "/p/d/carrier", &Precondition::Any, &Precondition::Absent),
        );
        let carrier = carrier.unwrap_or_else(|error| panic!("round {round}: the carrier's move failed: {error}"));
        assert_eq!(carrier.to_text(), "moved `/p/carrier` to `/p/d/carrier`");
        match directory {
            Ok(outcome) => {
                assert_eq!(outcome.to_text(), "moved `/p/d` to `/q/d`");
            }
            Err(error) => {
                assert_eq!(
                    error.to_string(),
                    "cannot move `/p/d`: it holds names the operator hides inside, which are hidden from you",
                    "round {round}"
                );
            }
        }
        assert!(!fixture.path("q/d/carrier").exists(), "round {round}: the hidden file reached `/q`");
        assert_eq!(fixture.read("p/d/carrier/server.key"), SECRET, "round {round}");
        let error = agent.read_text("/q/d/carrier/server.key", &vfs::ReadWindow::default()).unwrap_err();
        assert_eq!(error.kind(), vfs::ErrorKind::NotFound, "round {round}");
    }
}

/// Read before delete against a write beside it: a recursive delete of a tree whose every file
/// the caller has seen, while another call creates a new file in it. Some order of the two
/// calls must explain the answers: the write first, and the delete is refused on the new,
/// unseen file (which stays); the delete first, and the write either makes its directories
/// again (a write creates missing parents) or, having found its directory before it was
/// removed, answers that it changed. Each round at least one call succeeds, and a file that
/// was written is never deleted unseen.
#[test]
fn a_recursive_delete_never_takes_a_file_written_into_its_tree_meanwhile() {
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fill(&fixture, "p/d", 40);
        let (_registry, agent) = defaults(&fixture);
        let mut seen = std::collections::HashMap::new();
        for index in 0..40 {
            let path = format!("/p/d/part{}/file{index:03}.txt", index % 4);
            let version = agent.info(&path).unwrap().version.unwrap();
            seen.insert(path, version);
        }
        let seen_at = |path: &vfs::VirtualPath| {
            seen.get(path.as_str()).cloned().map_or(Precondition::Absent, Precondition::Version)
        };
        let (deleted, written) = race(
            delay(round, 800),
            || agent.delete_seen("/p/d", true, &seen_at),
            || agent.write("/p/d/part3/new.txt", "theirs\n", &vfs::Precondition::Absent),
        );
        match (deleted, written) {
            (Ok(deleted), Err(error)) => {
                assert_eq!(deleted.to_text(), "deleted directory `/p/d`", "round {round}");
                // Found gone, or (the directory was found, then removed) changed meanwhile.
                assert!(
                    matches!(error.kind(), vfs::ErrorKind::NotFound | vfs::ErrorKind::Changed),
                    "round {round}: {error}"
                );
                assert!(!fixture.path("p/d").exists(), "round {round}");
            }
            (Err(error), Ok(written)) => {
                assert!(written.created, "round {round}");
                // Refused on the new file, which the caller has not seen (so nothing was to be
                // there); or, the write having made its directory again after the delete had
                // emptied `/p/d`, the last removal found `/p/d` changed.
                let refused = (error.kind(), error.unmet(), error.path().map(vfs::VirtualPath::as_str));
                assert!(
                    matches!(
                        refused,
                        (vfs::ErrorKind::AlreadyExists, Some(vfs::Unmet::Absent), Some("/p/d/part3/new.txt"))
                            | (vfs::ErrorKind::Changed, None, Some("/p/d" | "/p/d/part3"))
                    ),
                    "round {round}: {error}"
                );
                assert_eq!(fixture.read("p/d/part3/new.txt"), "theirs\n", "round {round}: the new file was lost");
            }
            (Ok(deleted), Ok(written)) => {
                assert_eq!(deleted.to_text(), "deleted directory `/p/d`", "round {round}");
                assert!(written.created, "round {round}");
                assert_eq!(fixture.read("p/d/part3/new.txt"), "theirs\n", "round {round}: the new file was lost");
                let left: Vec<_> =
                    std::fs::read_dir(fixture.path("p/d")).unwrap().map(|entry| entry.unwrap().file_name()).collect();
                assert_eq!(left, ["part3"], "round {round}: the delete came first, the rest is gone");
            }
            (deleted, written) => panic!("round {round}: no order gives these answers: {deleted:?} and {written:?}"),
        }
    }
}

/// The git look-alike guard against a move beside a write: `HEAD` written into a directory
/// while an `objects` directory is moved into it. Each checks for the other under the
/// directory's lock, so exactly one succeeds each round and the other gets the refusal that
/// order gives; never both, which would leave a directory git takes for a repository.
#[test]
fn a_write_and_a_move_never_make_a_git_look_alike_together() {
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fixture.file("p/r/readme.txt", "plain\n");
        fill(&fixture, "p/objects", 8);
        let (_registry, agent) = defaults(&fixture);
        let (written, moved) = race(
            delay(round, 400),
            || agent.write("/p/r/HEAD", "ref: refs/heads/main\n", &vfs::Precondition::Absent),
            || agent.move_path("/p/objects", "/p/r/objects", &Precondition::Any, &Precondition::Absent),
        );
        match (written, moved) {
            (Ok(written), Err(error)) => {
                assert!(written.created, "round {round}");
                assert_eq!(
                    error.to_string(),
                    "cannot write `/p/r/objects`: beside `HEAD` it would make `/p/r` look like a git repository (git metadata)",
                    "round {round}"
                );
                assert!(fixture.path("p/objects/part0").is_dir(), "round {round}");
            }
            (Err(error), Ok(moved)) => {
                assert_eq!(moved.to_text(), "moved `/p/objects` to `/p/r/objects`", "round {round}");
                assert_eq!(
                    error.to_string(),
                    "cannot write `/p/r/HEAD`: beside `objects` it would make `/p/r` look like a git repository (git metadata)",
                    "round {round}"
                );
                assert!(!fixture.path("p/r/HEAD").exists(), "round {round}");
            }
            (written, moved) => panic!("round {round}: no order gives these answers: {written:?} and {moved:?}"),
        }
    }
}

/// Three writes at once into a directory: `HEAD`, and a file in each of `objects` and `refs`,
/// whose directories are made on the way. Whatever the order, the answers are those of some
/// order of the three: `HEAD` alone, or the two others (the first to come refuses those after
/// it), and the directory never holds `HEAD` beside `objects` or `refs`. (A directory made on
/// the way was judged before it was made, outside the lock a write beside it takes: all three
/// succeeded in 17 of 30 rounds through the MCP tools.)
#[test]
fn three_writes_at_once_never_make_a_git_look_alike_with_the_directories_they_make() {
    let refused = |path: &str, partner: &str| {
        format!(
            "cannot write `{path}`: beside `{partner}` it would make `/p/r` look like a git repository (git metadata)"
        )
    };
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fixture.file("p/r/readme.txt", "plain\n");
        let (_registry, agent) = defaults(&fixture);
        let barrier = Barrier::new(3);
        let write = |path: &str, pause: Duration| {
            barrier.wait();
            std::thread::sleep(pause);
            agent.write(path, "x\n", &Precondition::Absent).map(|_| ()).map_err(|error| error.to_string())
        };
        let (head, objects, refs) = std::thread::scope(|scope| {
            let head = scope.spawn(|| write("/p/r/HEAD", delay(round, 300)));
            let objects = scope.spawn(|| write("/p/r/objects/info/x", delay(round + ROUNDS, 300)));
            let refs = scope.spawn(|| write("/p/r/refs/heads/x", delay(round + 2 * ROUNDS, 300)));
            (head.join().unwrap(), objects.join().unwrap(), refs.join().unwrap())
        });
        let there = |name: &str| fixture.path(&format!("p/r/{name}")).exists();
        match (head, objects, refs) {
            (Ok(()), Err(objects), Err(refs)) => {
                assert_eq!(objects, refused("/p/r/objects/info/x", "HEAD"), "round {round}");
                assert_eq!(refs, refused("/p/r/refs/heads/x", "HEAD"), "round {round}");
                assert!(!there("objects") && !there("refs"), "round {round}");
            }
            (Err(head), Ok(()), Ok(())) => {
                // Beside whichever of the two was made first.
                let beside = [refused("/p/r/HEAD", "objects"), refused("/p/r/HEAD", "refs")];
                assert!(beside.contains(&head), "round {round}: {head}");
                assert!(!there("HEAD"), "round {round}");
            }
            (head, objects, refs) => {
                panic!("round {round}: no order gives these answers: {head:?}, {objects:?}, {refs:?}")
            }
        }
    }
}

/// Claims are the process's, not a registry's: the same race as the first test, with the move
/// made by another registry (a second crew of the daemon) that mounts the directory's parent
/// at another root.
#[test]
fn a_recursive_delete_never_takes_a_protected_directory_another_registry_moves_in() {
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fill(&fixture, "p/w/d", 40);
        fixture.file("p/w/carrier/.env", SECRET);
        fixture.file("p/w/carrier/readme.txt", "carried\n");
        let (_first, agent) = {
            let registry = MountRegistry::builder()
                .mount(fixture.spec("p", "/p", "rw"))
                .name_rules(NameRule::defaults())
                .build(vfs::ambient_authority())
                .unwrap();
            let agent = registry.agent();
            (registry, agent)
        };
        let second = MountRegistry::builder()
            .mount(fixture.spec("p/w", "/w", "rw"))
            .name_rules(NameRule::defaults())
            .build(vfs::ambient_authority())
            .unwrap();
        let other = second.agent();
        let (deleted, moved) = race(
            delay(round, 800),
            || agent.delete("/p/w/d", true, &Precondition::Any),
            || other.move_path("/w/carrier", "/w/d/carrier", &Precondition::Any, &Precondition::Absent),
        );
        let moved = moved.unwrap_or_else(|error| panic!("round {round}: the move failed: {error}"));
        assert_eq!(moved.to_text(), "moved `/w/carrier` to `/w/d/carrier`");
        match deleted {
            Ok(outcome) => assert_eq!(outcome.to_text(), "deleted directory `/p/w/d`"),
            Err(error) => assert_eq!(
                error.to_string(),
                "cannot delete `/p/w/d`: it holds environment files inside, which are hidden from you",
                "round {round}"
            ),
        }
        assert_eq!(fixture.read("p/w/d/carrier/.env"), SECRET, "round {round}: `.env` was deleted");
        assert_eq!(fixture.read("p/w/d/carrier/readme.txt"), "carried\n", "round {round}");
    }
}

/// A directory move that walks its tree for rules of its new place (`cfg/*.toml:ro`: nothing
/// in it lands under one) beside a write of an ordinary file into it: both succeed, and the
/// file is whole in one place, the directory's old one or its new one.
#[test]
fn a_directory_move_judged_at_its_new_place_and_a_write_into_it_both_succeed() {
    for round in 0..ROUNDS {
        let (fixture, registry) = stage_under("rw;cfg/*.toml:ro");
        let agent = registry.agent();
        let (written, moved) = race(
            delay(round, 400),
            || agent.write("/p/stage/notes.txt", "mine\n", &Precondition::Absent),
            || agent.move_path("/p/stage", "/p/cfg", &Precondition::Any, &Precondition::Absent),
        );
        assert!(written.is_ok_and(|written| written.created), "round {round}");
        assert_eq!(moved.unwrap().to_text(), MOVED, "round {round}");
        assert!(fixture.path("p/cfg/part0/file000.txt").is_file(), "round {round}");
        let places: Vec<String> = ["p/stage/notes.txt", "p/cfg/notes.txt"]
            .into_iter()
            .filter_map(|place| std::fs::read_to_string(fixture.path(place)).ok())
            .collect();
        assert_eq!(places, ["mine\n"], "round {round}");
    }
}

/// A directory move judged at its new place (`cfg/*.toml:ro`) beside a write of a `.toml` file
/// into it: the write comes first, and the move is refused with the exact refusal of a tree
/// holding such a file, or the move comes first, and the write lands at its path, the
/// directory's old place, made again. Never does the file move with its directory to where
/// the rule makes it read-only (the move's walk and its rename are one step for the writes
/// of the process: each write claims its place, ADR 0006).
#[test]
fn a_file_written_into_a_directory_being_moved_never_lands_under_a_rule_of_its_new_place() {
    let mut orders = [0; 2];
    for round in 0..ROUNDS {
        let (fixture, registry) = stage_under("rw;cfg/*.toml:ro");
        let agent = registry.agent();
        let (written, moved) = race(
            delay(round, 400),
            || agent.write("/p/stage/settings.toml", "mine\n", &Precondition::Absent),
            || agent.move_path("/p/stage", "/p/cfg", &Precondition::Any, &Precondition::Absent),
        );
        assert!(written.is_ok_and(|written| written.created), "round {round}");
        assert!(!fixture.path("p/cfg/settings.toml").exists(), "round {round}: the file landed under the rule");
        assert_eq!(fixture.read("p/stage/settings.toml"), "mine\n", "round {round}");
        match moved {
            Ok(moved) => {
                assert_eq!(moved.to_text(), MOVED, "round {round}");
                assert!(fixture.path("p/cfg/part0/file000.txt").is_file(), "round {round}");
                orders[1] += 1;
            }
            Err(refused) => {
                assert_eq!(
                    refused.to_string(),
                    refused_onto("paths the operator keeps read-only there, which are read-only to you"),
                    "round {round}"
                );
                assert!(!fixture.path("p/cfg").exists(), "round {round}");
                orders[0] += 1;
            }
        }
    }
    // Both orders came up (the delays spread the move across the write).
    assert!(orders.iter().all(|&count| count > 0), "{orders:?}");
}

/// The same with a staged write (the FUSE view's, committed when the file is closed): the
/// commit comes first, and the move is refused as for a tree holding the file, or the move
/// comes first, and the commit writes nothing and says that the place changed. Never does the
/// file land under the rule of the directory's new place.
#[test]
fn a_stage_committed_into_a_directory_being_moved_never_lands_under_a_rule_of_its_new_place() {
    let mut orders = [0; 2];
    for round in 0..ROUNDS {
        let (fixture, registry) = stage_under("rw;cfg/*.toml:ro");
        let agent = registry.agent();
        let mut staged = agent.stage("/p/stage/settings.toml", vfs::StageFrom::Empty).unwrap();
        staged.write_at(0, b"mine\n").unwrap();
        // The commit is quick (a rename): it is the one started after the pause.
        let (moved, committed) = race(
            delay(round, 1500),
            || agent.move_path("/p/stage", "/p/cfg", &Precondition::Any, &Precondition::Absent),
            || staged.commit(&Precondition::Absent),
        );
        assert!(!fixture.path("p/cfg/settings.toml").exists(), "round {round}: the file landed under the rule");
        match (committed, moved) {
            (Ok(committed), Err(refused)) => {
                assert!(committed.created, "round {round}");
                assert_eq!(
                    refused.to_string(),
                    refused_onto("paths the operator keeps read-only there, which are read-only to you"),
                    "round {round}"
                );
                assert_eq!(fixture.read("p/stage/settings.toml"), "mine\n", "round {round}");
                orders[0] += 1;
            }
            (Err(changed), Ok(moved)) => {
                assert_eq!(
                    changed.to_string(),
                    "`/p/stage/settings.toml` changed while vfs was working on it; try again",
                    "round {round}"
                );
                assert_eq!(moved.to_text(), MOVED, "round {round}");
                assert!(!fixture.path("p/stage").exists(), "round {round}");
                assert_eq!(std::fs::read_dir(fixture.path("p/cfg")).unwrap().count(), 4, "round {round}");
                orders[1] += 1;
            }
            (committed, moved) => panic!("round {round}: {committed:?} and {moved:?}"),
        }
    }
    assert!(orders.iter().all(|&count| count > 0), "{orders:?}");
}

/// The same with a new directory (`cfg/*.d:hidden`): made first, the move is refused as for a
/// tree holding it; the move first, the directory is made at its path, the old place made
/// again. Never does the agent's directory land where the rule hides it.
#[test]
fn a_directory_made_in_a_directory_being_moved_never_lands_under_a_rule_of_its_new_place() {
    let mut orders = [0; 2];
    for round in 0..ROUNDS {
        let (fixture, registry) = stage_under("rw;cfg/*.d:hidden");
        let agent = registry.agent();
        let (made, moved) = race(
            delay(round, 400),
            || agent.create_directory("/p/stage/conf.d"),
            || agent.move_path("/p/stage", "/p/cfg", &Precondition::Any, &Precondition::Absent),
        );
        assert!(made.is_ok_and(|made| made.created), "round {round}");
        assert!(!fixture.path("p/cfg/conf.d").exists(), "round {round}: the directory landed under the rule");
        assert!(fixture.path("p/stage/conf.d").is_dir(), "round {round}");
        match moved {
            Ok(moved) => {
                assert_eq!(moved.to_text(), MOVED, "round {round}");
                orders[1] += 1;
            }
            Err(refused) => {
                assert_eq!(
                    refused.to_string(),
                    refused_onto("names the operator hides there, which are hidden from you"),
                    "round {round}"
                );
                orders[0] += 1;
            }
        }
    }
    assert!(orders.iter().all(|&count| count > 0), "{orders:?}");
}

/// An undo's move back, guarded by the version the move left, beside a write of its source:
/// the write always succeeds; the move goes first and carries exactly the content it was
/// guarded for (the write then makes the file again), or the write goes first and the move is
/// refused with the version's mismatch. The guard looked at before anything is claimed
/// (`move_path`) only spares the directories on the way; the one under the locks decides.
#[test]
fn a_guarded_move_beside_a_write_of_its_source_moves_only_what_it_was_guarded_for() {
    let (mut moves, mut refusals) = (0, 0);
    for round in 0..ROUNDS {
        let fixture = Fixture::new();
        fixture.file("p/a.txt", "guarded\n");
        let registry =
            MountRegistry::builder().mount(fixture.spec("p", "/p", "rw")).build(vfs::ambient_authority()).unwrap();
        let agent = registry.agent();
        let version = agent.info("/p/a.txt").unwrap().version.unwrap();
        let (moved, written) = race(
            delay(round, 400),
            || {
                agent.move_path(
                    "/p/a.txt",
                    "/p/back/a.txt",
                    &Precondition::Version(version.clone()),
                    &Precondition::Absent,
                )
            },
            || agent.write("/p/a.txt", "theirs\n", &Precondition::Any),
        );
        assert!(written.is_ok(), "round {round}: {written:?}");
        let read = |place: &str| std::fs::read_to_string(fixture.path(place)).ok();
        match moved {
            Ok(_) => {
                moves += 1;
                assert_eq!(read("p/back/a.txt").as_deref(), Some("guarded\n"), "round {round}");
                assert_eq!(read("p/a.txt").as_deref(), Some("theirs\n"), "round {round}");
            }
            Err(error) => {
                refusals += 1;
                assert_eq!(error.kind(), vfs::ErrorKind::VersionMismatch, "round {round}: {error}");
                assert_eq!(read("p/back/a.txt"), None, "round {round}");
                assert_eq!(read("p/a.txt").as_deref(), Some("theirs\n"), "round {round}");
            }
        }
    }
    assert_eq!(moves + refusals, ROUNDS);
}
