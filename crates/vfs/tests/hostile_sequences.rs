//! Sequences of calls that try to carry a protected file out of its protection, and launches
//! that would let an agent tell an internal root from a missing name. Each test is one example
//! an attacker tried; `crates/host/tests/model.rs` tries random sequences of them.
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk")]

mod common;

use common::Fixture;
use vfs::{ConfigError, Edit, EditOptions, MountRegistry, MountSpec, Precondition, ReadWindow};

fn spec(text: &str) -> MountSpec {
    text.parse().unwrap()
}

/// `/ov` (rw) with `dir/vendor` read-only and `dir/keep` no-delete.
fn overrides() -> (Fixture, MountRegistry) {
    let fixture = Fixture::new();
    fixture.file("ov/dir/vendor/lib.txt", "library\n");
    fixture.file("ov/dir/keep/kept.txt", "kept\n");
    fixture.file("ov/dir/own.txt", "own\n");
    fixture.file("ov/stage/vendor/lib.txt", "planted\n");
    let text = format!("{}:/ov:rw;dir/vendor:ro;dir/keep:rwnd;later/vendor:ro", fixture.path("ov").display());
    let registry = MountRegistry::builder().mount(spec(&text)).build(vfs::ambient_authority()).unwrap();
    (fixture, registry)
}

const OVERWRITE: Precondition = Precondition::Any;

#[test]
fn a_read_only_sub_path_cannot_be_moved_away_edited_and_moved_back() {
    let (fixture, registry) = overrides();
    let agent = registry.agent();
    assert_eq!(
        agent.write("/ov/dir/vendor/lib.txt", "pwned", &OVERWRITE).unwrap_err().to_string(),
        "cannot write `/ov/dir/vendor/lib.txt`: `/ov/dir/vendor` is mounted ro; mounts that grant write: `/ov` (rw)"
    );
    assert_eq!(
        agent.move_path("/ov/dir", "/ov/tmp", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot move `/ov/dir`: `/ov/dir/vendor` inside it is mounted ro, which does not grant delete"
    );
    assert_eq!(
        agent
            .move_path("/ov/./stage/../dir", "/ov/tmp", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot move `/ov/dir`: `/ov/dir/vendor` inside it is mounted ro, which does not grant delete"
    );
    assert_eq!(
        agent.delete("/ov/dir", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/ov/dir`: `/ov/dir/vendor` inside it is mounted ro, which does not grant delete"
    );
    assert_eq!(fixture.read("ov/dir/vendor/lib.txt"), "library\n");
    // What is not protected moves as before.
    agent.move_path("/ov/dir/own.txt", "/ov/own.txt", &Precondition::Any, &Precondition::Absent).unwrap();
}

#[test]
fn a_protection_holds_in_any_case_and_a_grant_only_as_written() {
    // On a case-insensitive disk `dir/VENDOR` is `dir/vendor`: the override must hold for
    // every spelling. This disk is case-sensitive, so the writes would create new
    // directories; they are refused all the same, and nothing is created.
    let (fixture, registry) = overrides();
    let agent = registry.agent();
    for path in ["/ov/dir/VENDOR/lib.txt", "/ov/DIR/Vendor/lib.txt"] {
        assert_eq!(
            agent.write(path, "pwned", &OVERWRITE).unwrap_err().to_string(),
            format!("cannot write `{path}`: `/ov/dir/vendor` is mounted ro; mounts that grant write: `/ov` (rw)")
        );
    }
    assert!(!fixture.path("ov/dir/VENDOR").exists() && !fixture.path("ov/DIR").exists());
    fixture.file("ov/DIR/vendor/x.txt", "x\n");
    assert_eq!(
        agent.move_path("/ov/DIR", "/ov/elsewhere", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot move `/ov/DIR`: `/ov/dir/vendor` inside it is mounted ro, which does not grant delete"
    );
    // A sub-path that grants more grants it only to the name as written.
    fixture.file("ro/out/a.txt", "a\n");
    fixture.file("ro/OUT/a.txt", "a\n");
    let text = format!("{}:/ro:ro;out:rw", fixture.path("ro").display());
    let registry = MountRegistry::builder().mount(spec(&text)).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    agent.write("/ro/out/a.txt", "changed\n", &OVERWRITE).unwrap();
    assert_eq!(
        agent.write("/ro/OUT/a.txt", "changed\n", &OVERWRITE).unwrap_err().to_string(),
        "cannot write `/ro/OUT/a.txt`: `/ro` is mounted ro; mounts that grant write: `/ro/out` (rw)"
    );
}

#[test]
fn a_sub_path_that_grants_more_cannot_take_its_own_name_out_of_the_mount() {
    // `out:rw` under a read-only mount grants changes to what is inside `out`; deleting or
    // moving `out` itself would change the read-only mount's listing.
    let fixture = Fixture::new();
    fixture.file("ro/out/a.txt", "a\n");
    fixture.file("ro/cfg.toml", "k = 1\n");
    fixture.file("nd/tmp/t.txt", "t\n");
    fixture.file("w/.keep", "");
    let ro = format!("{}:/ro:ro;out:rw;cfg.toml:rw", fixture.path("ro").display());
    let nd = format!("{}:/nd:rwnd;tmp:rw", fixture.path("nd").display());
    let w = format!("{}:/w:rw", fixture.path("w").display());
    let registry = MountRegistry::builder()
        .mount(spec(&ro))
        .mount(spec(&nd))
        .mount(spec(&w))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let refusal = |path: &str, scope: &str, rights: &str| {
        format!(
            "cannot delete `{path}`: `{scope}`, which holds it, is mounted {rights}, which does not grant delete \
             (its own rights cover what is inside it)"
        )
    };
    assert_eq!(
        agent.delete("/ro/out", true, &Precondition::Any).unwrap_err().to_string(),
        refusal("/ro/out", "/ro", "ro")
    );
    assert_eq!(
        agent.move_path("/ro/out", "/w/out", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        refusal("/ro/out", "/ro", "ro")
    );
    agent.read_text("/ro/cfg.toml", &ReadWindow::default()).unwrap();
    assert_eq!(
        agent.delete("/ro/cfg.toml", false, &Precondition::Any).unwrap_err().to_string(),
        refusal("/ro/cfg.toml", "/ro", "ro")
    );
    assert_eq!(
        agent
            .move_path("/ro/cfg.toml", "/w/cfg.toml", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        refusal("/ro/cfg.toml", "/ro", "ro")
    );
    assert_eq!(
        agent.delete("/nd/tmp", true, &Precondition::Any).unwrap_err().to_string(),
        refusal("/nd/tmp", "/nd", "rwnd")
    );
    assert_eq!(fixture.read("ro/out/a.txt"), "a\n");
    assert_eq!(fixture.read("ro/cfg.toml"), "k = 1\n");
    assert_eq!(fixture.read("nd/tmp/t.txt"), "t\n");
    // What the overrides grant still works: inside `out` and `tmp`, and on `cfg.toml`'s content.
    agent.write("/ro/cfg.toml", "k = 2\n", &OVERWRITE).unwrap();
    agent.move_path("/ro/out/a.txt", "/ro/out/b.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    agent.read_text("/nd/tmp/t.txt", &ReadWindow::default()).unwrap();
    agent.delete("/nd/tmp/t.txt", false, &Precondition::Any).unwrap();
    assert_eq!(fixture.read("ro/cfg.toml"), "k = 2\n");
    assert_eq!(fixture.read("ro/out/b.txt"), "a\n");
    assert!(!fixture.path("nd/tmp/t.txt").exists());
}

#[test]
fn a_staged_directory_cannot_be_moved_onto_a_read_only_sub_path() {
    let (fixture, registry) = overrides();
    let agent = registry.agent();
    // `later/vendor` does not exist yet: the rule is on the path, not on what is there now.
    assert_eq!(
        agent.move_path("/ov/stage", "/ov/later", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot move to `/ov/later`: `/ov/later/vendor` inside it is mounted ro, which does not grant write"
    );
    assert_eq!(
        agent
            .move_path("/ov/stage/vendor", "/ov/later/vendor", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot write `/ov/later/vendor`: `/ov/later/vendor` is mounted ro; mounts that grant write: `/ov` (rw)"
    );
    assert!(!fixture.path("ov/later").exists(), "a refused move creates no parent directory");
    assert_eq!(fixture.read("ov/stage/vendor/lib.txt"), "planted\n");
}

#[test]
fn a_no_delete_sub_path_cannot_be_moved_or_deleted_with_its_parent() {
    let (fixture, registry) = overrides();
    let agent = registry.agent();
    agent.write("/ov/dir/keep/new.txt", "created\n", &Precondition::Absent).unwrap();
    for (result, verb) in [
        (agent.move_path("/ov/dir", "/ov/elsewhere", &Precondition::Any, &Precondition::Absent).map(|_| ()), "move"),
        (agent.delete("/ov/dir", true, &Precondition::Any).map(|_| ()), "delete"),
    ] {
        // `dir/vendor` (ro) comes first in the mount string; drop it to see `dir/keep` refuse.
        assert_eq!(
            result.unwrap_err().to_string(),
            format!("cannot {verb} `/ov/dir`: `/ov/dir/vendor` inside it is mounted ro, which does not grant delete")
        );
    }
    let text = format!("{}:/ov:rw;dir/keep:rwnd", fixture.path("ov").display());
    let registry = MountRegistry::builder().mount(spec(&text)).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    assert_eq!(
        agent.delete("/ov/dir", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/ov/dir`: `/ov/dir/keep` inside it is mounted rwnd, which does not grant delete"
    );
    assert_eq!(
        agent.move_path("/ov/dir", "/ov/x", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot move `/ov/dir`: `/ov/dir/keep` inside it is mounted rwnd, which does not grant delete"
    );
    // Creating below a no-delete part is what it grants: a move onto it is allowed.
    agent.move_path("/ov/stage", "/ov/dir/keep/stage", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(fixture.read("ov/dir/keep/kept.txt"), "kept\n");
    assert_eq!(fixture.read("ov/dir/keep/new.txt"), "created\n");
}

/// `/w` (rw) over `outer`, `/r` (ro) over `outer/p/ro`.
fn nested() -> (Fixture, MountRegistry) {
    let fixture = Fixture::new();
    fixture.file("outer/p/ro/data.txt", "read-only data\n");
    fixture.file("outer/p/sibling.txt", "sibling\n");
    let registry = build_nested(&fixture);
    (fixture, registry)
}

fn build_nested(fixture: &Fixture) -> MountRegistry {
    MountRegistry::builder()
        .mount(fixture.spec("outer", "/w", "rw"))
        .mount(fixture.spec("outer/p/ro", "/r", "ro"))
        .build(vfs::ambient_authority())
        .unwrap()
}

#[test]
fn directories_that_hold_a_nested_mount_stay_in_place_across_launches() {
    let (fixture, registry) = nested();
    let agent = registry.agent();
    let pinned = "`/w/p`: it holds the mount `/r`, whose place stays as the launch found it";
    assert_eq!(
        agent.move_path("/w/p", "/w/moved", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        format!("cannot move {pinned}")
    );
    assert_eq!(
        agent.delete("/w/p", true, &Precondition::Any).unwrap_err().to_string(),
        format!("cannot delete {pinned}")
    );
    assert_eq!(
        agent.move_path("/w/p/ro", "/w/q", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot delete `/w/p/ro`: `/r` is mounted ro; mounts that grant delete: `/w` (rw)"
    );
    assert_eq!(
        agent.write("/w/p/ro/data.txt", "forged", &OVERWRITE).unwrap_err().to_string(),
        "cannot write `/w/p/ro/data.txt`: `/r` is mounted ro; mounts that grant write: `/w` (rw)"
    );
    // What lies beside the nested mount still moves.
    agent.move_path("/w/p/sibling.txt", "/w/sibling.txt", &Precondition::Any, &Precondition::Absent).unwrap();
    drop(registry);
    // The next launch finds `/r` where it was, with its own content.
    let registry = build_nested(&fixture);
    let read = registry.agent().read_text("/r/data.txt", &ReadWindow::default()).unwrap();
    assert_eq!(read.content, "read-only data\n");
    assert_eq!(fixture.read("outer/p/ro/data.txt"), "read-only data\n");
}

#[test]
fn an_internal_root_inside_a_writable_part_is_refused_at_launch() {
    let fixture = Fixture::new();
    fixture.mkdir("outer/sub/logs");
    let refused = MountRegistry::builder()
        .mount(fixture.spec("outer", "/w", "rw"))
        .internal(fixture.spec("outer/sub/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap_err();
    assert!(matches!(refused, ConfigError::InternalInsideWritable { .. }), "{refused}");
    let physical = fixture.path("outer/sub/logs").display().to_string();
    assert_eq!(
        refused.to_string(),
        format!(
            "the internal root `/llm-logs` (`{physical}`) lies inside `/w` at `/w/sub/logs`, which is mounted rw; an agent could tell that something is there"
        )
    );
    assert_eq!(
        refused.hint(),
        "put the internal directory outside the mount, or make that part read-only with a sub-path override (`;part:ro`)"
    );
    // A no-delete part creates names too.
    let text = format!("{}:/w:ro;sub:rwnd", fixture.path("outer").display());
    let refused = MountRegistry::builder()
        .mount(spec(&text))
        .internal(fixture.spec("outer/sub/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap_err();
    assert!(matches!(refused, ConfigError::InternalInsideWritable { rights: vfs::Rights::ReadWriteNoDelete, .. }));
    // Under a read-only override, or in a read-only mount, it is allowed.
    let text = format!("{}:/w:rw;sub:ro", fixture.path("outer").display());
    MountRegistry::builder()
        .mount(spec(&text))
        .internal(fixture.spec("outer/sub/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    MountRegistry::builder()
        .mount(fixture.spec("outer", "/w", "ro"))
        .internal(fixture.spec("outer/sub/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    // A read-only mount nested in the writable one decides for what lies inside it.
    MountRegistry::builder()
        .mount(fixture.spec("outer", "/w", "rw"))
        .mount(fixture.spec("outer/sub", "/s", "ro"))
        .internal(fixture.spec("outer/sub/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
}

#[test]
fn a_mount_of_the_internal_directory_or_inside_it_is_refused() {
    let fixture = Fixture::new();
    fixture.mkdir("m/logs/day");
    for (agent, rights) in [("m/logs", "rw"), ("m/logs", "ro"), ("m/logs/day", "ro")] {
        let refused = MountRegistry::builder()
            .mount(fixture.spec(agent, "/w", rights))
            .internal(fixture.spec("m/logs", "/llm-logs", "rw"))
            .build(vfs::ambient_authority())
            .unwrap_err();
        let physical = fixture.path(agent).display().to_string();
        assert_eq!(
            refused.to_string(),
            format!(
                "the mount `/w` (`{physical}`) serves the directory of the internal root `/llm-logs`, or a part of it"
            )
        );
    }
}

#[test]
fn an_internal_root_nested_virtually_with_an_agent_facing_one_is_refused() {
    let fixture = Fixture::new();
    fixture.mkdir("src");
    fixture.mkdir("hidden");
    for (agent, internal) in [("/src", "/src/secret"), ("/src/inner", "/src")] {
        let refused = MountRegistry::builder()
            .mount(fixture.spec("src", agent, "ro"))
            .internal(fixture.spec("hidden", internal, "rw"))
            .build(vfs::ambient_authority())
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!("the internal root `{internal}` and the agent-facing root `{agent}` nest in one another")
        );
    }
}

/// Every tool's answer about `/w/sub/logs…` (an internal root under a read-only override) is
/// the answer about `/w/sub/gone…` (nothing) with the name swapped.
#[test]
fn an_internal_root_under_a_read_only_part_answers_as_a_missing_name() {
    let fixture = Fixture::new();
    fixture.file("outer/sub/logs/exchanges.jsonl", "{\"secret\": 1}\n");
    fixture.file("outer/sub/notes.txt", "notes\n");
    fixture.file("outer/rw/x.txt", "x\n");
    fixture.symlink("../sub/logs", "outer/rw/to-logs");
    fixture.symlink("../sub/gone", "outer/rw/to-gone");
    let text = format!("{}:/w:rw;sub:ro", fixture.path("outer").display());
    let registry = MountRegistry::builder()
        .mount(spec(&text))
        .internal(fixture.spec("outer/sub/logs", "/llm-logs", "rw"))
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let answer = |name: &str| -> Vec<String> {
        let edit = [Edit { old_text: "a".into(), new_text: "b".into() }];
        let outcomes = [
            agent.read_text(&format!("/w/sub/{name}"), &ReadWindow::default()).map(|read| read.to_text()),
            agent
                .read_text(&format!("/w/sub/{name}/exchanges.jsonl"), &ReadWindow::default())
                .map(|read| read.to_text()),
            agent
                .read_text(&format!("/w/rw/to-{name}/exchanges.jsonl"), &ReadWindow::default())
                .map(|read| read.to_text()),
            agent.list(&format!("/w/sub/{name}")).map(|listing| listing.to_text()),
            agent.info(&format!("/w/sub/{name}")).map(|info| info.to_text()),
            agent.write(&format!("/w/sub/{name}"), "x", &Precondition::Absent).map(|outcome| outcome.to_text()),
            agent.write(&format!("/w/sub/{name}/x.txt"), "x", &OVERWRITE).map(|outcome| outcome.to_text()),
            agent.write(&format!("/w/rw/to-{name}/x.txt"), "x", &OVERWRITE).map(|outcome| outcome.to_text()),
            agent.edit(&format!("/w/sub/{name}/exchanges.jsonl"), &edit, &EditOptions::default()).map(|o| o.to_text()),
            agent.create_directory(&format!("/w/sub/{name}")).map(|outcome| outcome.to_text()),
            agent.create_directory(&format!("/w/sub/{name}/deeper")).map(|outcome| outcome.to_text()),
            agent.delete(&format!("/w/sub/{name}"), true, &Precondition::Any).map(|outcome| outcome.to_text()),
            agent.delete("/w/sub", false, &Precondition::Any).map(|outcome| outcome.to_text()),
            agent
                .move_path(&format!("/w/sub/{name}"), "/w/rw/moved", &Precondition::Any, &Precondition::Absent)
                .map(|outcome| outcome.to_text()),
            agent
                .move_path("/w/rw/x.txt", &format!("/w/sub/{name}"), &Precondition::Any, &Precondition::Absent)
                .map(|outcome| outcome.to_text()),
            agent.tree(&format!("/w/sub/{name}"), None, &[]).map(|tree| tree.to_text()),
            agent.search_files(&format!("/w/sub/{name}"), "*", &[]).map(|found| found.to_text()),
        ];
        outcomes.into_iter().map(|outcome| outcome.unwrap_or_else(|error| error.to_string())).collect()
    };
    let hidden = answer("logs");
    let missing: Vec<String> = answer("gone").into_iter().map(|text| text.replace("gone", "logs")).collect();
    assert_eq!(hidden, missing);
    // What holds the internal root shows nothing of it.
    assert_eq!(agent.list("/w/sub").unwrap().to_text(), "[FILE] notes.txt\n");
    assert_eq!(
        agent.tree("/w", None, &[]).unwrap().to_text(),
        "/w/\n  rw/\n    to-gone (link)\n    to-logs (link)\n    x.txt\n  sub/\n    notes.txt\n"
    );
    let found = agent.grep(&vfs::GrepRequest { pattern: "secret".into(), ..Default::default() }).unwrap();
    assert_eq!(found.matches, 0);
    assert_eq!(fixture.read("outer/sub/logs/exchanges.jsonl"), "{\"secret\": 1}\n");
}

#[cfg(feature = "s3")]
#[test]
fn overrides_protect_their_sub_paths_on_object_storage_too() {
    let bucket = format!("memory://hostile-{}", std::process::id());
    let text = format!("{bucket}:/ov:rw;dir/vendor:ro;later/vendor:ro");
    let registry = MountRegistry::builder().mount(spec(&text)).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    // Seed through a second registry without the override, as an operator would upload.
    let seeding =
        MountRegistry::builder().mount(spec(&format!("{bucket}:/ov:rw"))).build(vfs::ambient_authority()).unwrap();
    seeding.agent().write("/ov/dir/vendor/lib.txt", "library\n", &Precondition::Absent).unwrap();
    seeding.agent().write("/ov/stage/vendor/lib.txt", "planted\n", &Precondition::Absent).unwrap();
    assert_eq!(
        agent.delete("/ov/dir", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/ov/dir`: `/ov/dir/vendor` inside it is mounted ro, which does not grant delete"
    );
    assert_eq!(
        agent
            .move_path("/ov/stage/vendor/lib.txt", "/ov/later", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot move to `/ov/later`: `/ov/later/vendor` inside it is mounted ro, which does not grant write"
    );
    let read = agent.read_text("/ov/dir/vendor/lib.txt", &ReadWindow::default()).unwrap();
    assert_eq!(read.content, "library\n");
    // A move onto itself keeps the object.
    agent
        .move_path("/ov/stage/vendor/lib.txt", "/ov/stage/vendor/lib.txt", &Precondition::Any, &Precondition::Any)
        .unwrap();
    assert_eq!(
        agent
            .move_path(
                "/ov/stage/vendor/lib.txt",
                "/ov/stage/vendor/lib.txt",
                &Precondition::Any,
                &Precondition::Absent
            )
            .unwrap_err()
            .to_string(),
        "`/ov/stage/vendor/lib.txt` already exists; ask for an overwrite to replace it"
    );
    let read = agent.read_text("/ov/stage/vendor/lib.txt", &ReadWindow::default()).unwrap();
    assert_eq!(read.content, "planted\n");
}

/// A bucket named like a word (`data`) is a physical spelling only as a whole URL: paths that
/// contain the word pass as they are.
#[cfg(feature = "s3")]
#[test]
fn a_bucket_named_like_a_root_does_not_garble_paths() {
    let registry =
        MountRegistry::builder().mount(spec("memory://data:/data:rw")).build(vfs::ambient_authority()).unwrap();
    let agent = registry.agent();
    let written = agent.write("/data/data/x.txt", "data\n", &Precondition::Absent).unwrap();
    let version = written.version.clone().unwrap();
    assert_eq!(
        registry.render(&written.agent_text()),
        format!("created `/data/data/x.txt` (5 bytes, version {version})")
    );
    let listing = agent.list("/data").unwrap();
    assert_eq!(registry.render(&listing.agent_text()), "[DIR] data\n");
    assert_eq!(registry.scrub("stored in memory://data/x"), "stored in [redacted]/x");
}
