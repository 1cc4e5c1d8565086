//! What git would run, proved with git itself: an agent cannot turn a hook under a configured
//! `core.hooksPath` into its own program. Each test plants the same files directly on
//! disk as a control and shows that git does run them there, so a test fails if the protection
//! goes. Without git installed, each test says so and returns.
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk and ask git about them")]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};

use common::Fixture;
use vfs::{Edit, EditOptions, MountRegistry, MountSpec, NameRule, WriteOptions};

const OVERWRITE: WriteOptions = WriteOptions { overwrite: true, expected_version: None };

/// True when git runs; otherwise prints why the test does not run and returns false.
fn git_available(test: &str) -> bool {
    match Command::new("git").arg("--version").output() {
        Ok(output) if output.status.success() => true,
        _ => {
            #[expect(clippy::print_stderr, reason = "a skipped test says why, rather than pass silently")]
            {
                eprintln!("skipping {test}: git is not installed (these tests prove the rules with git itself)");
            }
            false
        }
    }
}

/// Runs git in `directory` as a person would, with a clean environment: no global or system
/// configuration, and no discovery above the fixture (`GIT_CEILING_DIRECTORIES`).
fn git(fixture: &Fixture, directory: &Path, args: &[&str]) -> Output {
    let home = fixture.mkdir("home");
    let mut command = Command::new("git");
    for variable in ["GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"] {
        command.env_remove(variable);
    }
    command
        .current_dir(directory)
        .args(args)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", home.join("gitconfig"))
        .env("GIT_CEILING_DIRECTORIES", fixture.dir.path())
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("run git")
}

/// True when a `PWNED` file appeared anywhere below `directory`: the planted command ran.
fn pwned(directory: &Path) -> bool {
    std::fs::read_dir(directory).unwrap().any(|entry| {
        let entry = entry.unwrap();
        entry.file_name() == "PWNED" || (entry.file_type().unwrap().is_dir() && pwned(&entry.path()))
    })
}

fn registry(fixture: &Fixture, mount: &str) -> MountRegistry {
    let spec: MountSpec = format!("{}:{mount}", fixture.path("p").display()).parse().unwrap();
    MountRegistry::builder().mount(spec).name_rules(NameRule::defaults()).build().unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A repository whose hooks live in the work tree (`core.hooksPath = hooks`), with an executable
/// `pre-commit` that succeeds.
fn repository_with_hooks(fixture: &Fixture, name: &str) {
    let repository = fixture.mkdir(name);
    assert!(git(fixture, &repository, &["init", "-q", "-b", "main"]).status.success());
    assert!(git(fixture, &repository, &["config", "core.hooksPath", "hooks"]).status.success());
    let hook = fixture.file(&format!("{name}/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn an_agent_cannot_make_a_hook_its_own_program() {
    if !git_available("an_agent_cannot_make_a_hook_its_own_program") {
        return;
    }
    let fixture = Fixture::new();
    repository_with_hooks(&fixture, "p");
    let registry = registry(&fixture, "/p:rw");
    let agent = registry.agent();
    // Replacing the hook keeps its read and write bits, never its execute bits; a new hook has
    // none; an edit drops them too.
    agent.write("/p/hooks/pre-commit", "#!/bin/sh\ntouch PWNED\n", &OVERWRITE).unwrap();
    assert_eq!(mode(&fixture.path("p/hooks/pre-commit")) & 0o111, 0);
    agent.write("/p/hooks/post-commit", "#!/bin/sh\ntouch PWNED\n", &OVERWRITE).unwrap();
    assert_eq!(mode(&fixture.path("p/hooks/post-commit")) & 0o111, 0);
    let script = fixture.file("p/build.sh", "#!/bin/sh\necho build\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    let edit = [Edit { old_text: "echo build".to_owned(), new_text: "touch PWNED".to_owned() }];
    agent.edit("/p/build.sh", &edit, &EditOptions::default()).unwrap();
    assert_eq!(mode(&script) & 0o111, 0);
    let commit = git(&fixture, &fixture.path("p"), &["commit", "-q", "--allow-empty", "-m", "a person commits"]);
    assert!(commit.status.success(), "{}", String::from_utf8_lossy(&commit.stderr));
    assert!(!pwned(&fixture.path("p")), "git ran a hook the agent wrote");
    // The control: the same overwrite on disk, which keeps the mode, makes git run it.
    repository_with_hooks(&fixture, "control");
    std::fs::write(fixture.path("control/hooks/pre-commit"), "#!/bin/sh\ntouch PWNED\n").unwrap();
    git(&fixture, &fixture.path("control"), &["commit", "-q", "--allow-empty", "-m", "a person commits"]);
    assert!(fixture.path("control/PWNED").is_file(), "git did not run the hook overwritten on disk");
}
