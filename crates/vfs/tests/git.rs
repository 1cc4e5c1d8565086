//! What git would run, proved with git itself: an agent cannot plant a repository under another
//! name (a bare-repository layout, or `HEAD` and `commondir`) whose `core.fsmonitor` runs at the
//! next `git status`, nor a `.git` file that redirects git to one, nor turn a hook under a
//! configured `core.hooksPath` into its own program. Each test plants the same files directly on
//! disk as a control and shows that git does run them there, so a test fails if the protection
//! goes. Without git installed, each test says so and returns.
#![expect(clippy::disallowed_methods, reason = "tests build fixtures on disk and ask git about them")]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output};

use common::Fixture;
use vfs::{AgentAccessor, Edit, EditOptions, MountRegistry, MountSpec, NameRule, Precondition};

const OVERWRITE: Precondition = Precondition::Any;

/// `config` of a planted repository: its work tree is the directory itself (`core.worktree` is
/// relative to the git directory), so `git status` there reads its `core.fsmonitor` and runs it.
const CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tworktree = .\n\tfsmonitor = \"touch PWNED\"\n";

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
    MountRegistry::builder().mount(spec).name_rules(NameRule::defaults()).build(vfs::ambient_authority()).unwrap()
}

fn refused(answer: Result<impl std::fmt::Debug, vfs::Error>) -> String {
    answer.unwrap_err().to_string()
}

/// What the agent tries, in each order git's markers can come in; everything but the last
/// marker of each directory is allowed.
fn plant_repositories(agent: &AgentAccessor) {
    let beside = |path: &str, partner: &str, directory: &str| {
        format!(
            "cannot write `{path}`: beside `{partner}` it would make `{directory}` look like a git repository (git metadata)"
        )
    };
    // `HEAD` last.
    agent.write("/p/last-head/config", CONFIG, &OVERWRITE).unwrap();
    agent.create_directory("/p/last-head/objects").unwrap();
    agent.create_directory("/p/last-head/refs").unwrap();
    assert_eq!(
        refused(agent.write("/p/last-head/HEAD", "ref: refs/heads/main\n", &OVERWRITE)),
        beside("/p/last-head/HEAD", "objects", "/p/last-head")
    );
    // In any case: a case-insensitive disk opens `head` for `HEAD`.
    assert_eq!(
        refused(agent.write("/p/last-head/head", "ref: refs/heads/main\n", &OVERWRITE)),
        beside("/p/last-head/head", "objects", "/p/last-head")
    );
    // `HEAD` first: then neither `objects` nor `refs`, however they would come.
    agent.write("/p/first-head/config", CONFIG, &OVERWRITE).unwrap();
    agent.write("/p/first-head/HEAD", "ref: refs/heads/main\n", &OVERWRITE).unwrap();
    assert_eq!(
        refused(agent.create_directory("/p/first-head/objects")),
        beside("/p/first-head/objects", "HEAD", "/p/first-head")
    );
    assert_eq!(
        refused(agent.write("/p/first-head/refs/heads/main", "0000\n", &OVERWRITE)),
        beside("/p/first-head/refs/heads/main", "HEAD", "/p/first-head")
    );
    agent.create_directory("/p/stage/refs").unwrap();
    assert_eq!(
        refused(agent.move_path("/p/stage/refs", "/p/first-head/refs", &Precondition::Any, &Precondition::Absent)),
        beside("/p/first-head/refs", "HEAD", "/p/first-head")
    );
    agent.create_directory("/p/stage/objects").unwrap();
    assert_eq!(
        refused(agent.move_path(
            "/p/stage/objects",
            "/p/first-head/objects",
            &Precondition::Any,
            &Precondition::Absent
        )),
        beside("/p/first-head/objects", "HEAD", "/p/first-head")
    );
    // `HEAD` and `commondir` naming a directory that holds `objects`, `refs` and the config.
    agent.write("/p/common/config", CONFIG, &OVERWRITE).unwrap();
    agent.create_directory("/p/common/objects").unwrap();
    agent.create_directory("/p/common/refs").unwrap();
    agent.write("/p/worktree/HEAD", "ref: refs/heads/main\n", &OVERWRITE).unwrap();
    assert_eq!(
        refused(agent.write("/p/worktree/commondir", "../common\n", &OVERWRITE)),
        beside("/p/worktree/commondir", "HEAD", "/p/worktree")
    );
    // A `.git` file that sends git to a directory elsewhere is a `.git` name, read-only.
    assert_eq!(
        refused(agent.write("/p/sub/.git", "gitdir: ../last-head\n", &OVERWRITE)),
        "cannot write `/p/sub/.git`: `/p/sub/.git` is read-only (git metadata)"
    );
    agent.create_directory("/p/sub").unwrap();
}

#[test]
fn an_agent_cannot_plant_a_repository_that_git_status_would_run() {
    if !git_available("an_agent_cannot_plant_a_repository_that_git_status_would_run") {
        return;
    }
    let fixture = Fixture::new();
    fixture.mkdir("p");
    let registry = registry(&fixture, "/p:rw");
    plant_repositories(&registry.agent());
    for directory in ["last-head", "last-head/objects", "first-head", "stage", "worktree", "sub"] {
        git(&fixture, &fixture.path(&format!("p/{directory}")), &["status"]);
        assert!(!pwned(&fixture.path("p")), "git ran the agent's command in {directory}");
    }
    // The control: what the agent was refused, put on disk, makes git run the agent's config.
    fixture.file("p/last-head/HEAD", "ref: refs/heads/main\n");
    git(&fixture, &fixture.path("p/last-head/objects"), &["status"]);
    assert!(fixture.path("p/last-head/PWNED").is_file(), "the bare layout did not make git run its fsmonitor");
    std::fs::remove_file(fixture.path("p/last-head/PWNED")).unwrap();
    fixture.file("p/sub/.git", "gitdir: ../last-head\n");
    git(&fixture, &fixture.path("p/sub"), &["status"]);
    assert!(fixture.path("p/last-head/PWNED").is_file(), "the `.git` file did not send git to the planted config");
    fixture.file("p/worktree/commondir", "../common\n");
    fixture.file("p/common/config", "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tworktreeConfig = true\n");
    fixture.file("p/worktree/config.worktree", "[core]\n\tworktree = .\n\tfsmonitor = \"touch PWNED\"\n");
    git(&fixture, &fixture.path("p/worktree"), &["status"]);
    assert!(fixture.path("p/worktree/PWNED").is_file(), "`HEAD` and `commondir` did not make git run the config");
}

#[test]
fn the_guard_goes_with_the_git_rule() {
    if !git_available("the_guard_goes_with_the_git_rule") {
        return;
    }
    let fixture = Fixture::new();
    fixture.mkdir("p/.git/objects");
    fixture.mkdir("p/.git/refs/heads");
    fixture.mkdir("p/vendor/objects");
    fixture.mkdir("p/vendor/refs");
    fixture.file("p/.git/HEAD", "ref: refs/heads/main\n");
    // Where an override loosens `.git`, an agent may change the repository's `HEAD`.
    let loosened = registry(&fixture, "/p:rw;.git:rw");
    let agent = loosened.agent();
    agent.write("/p/.git/HEAD", "ref: refs/heads/topic\n", &OVERWRITE).unwrap();
    assert_eq!(
        refused(agent.write("/p/vendor/HEAD", "ref: refs/heads/main\n", &OVERWRITE)),
        "cannot write `/p/vendor/HEAD`: beside `objects` it would make `/p/vendor` look like a git repository (git metadata)"
    );
    assert_eq!(git(&fixture, &fixture.path("p"), &["symbolic-ref", "HEAD"]).stdout, b"refs/heads/topic\n");
    // Without the default rules (`--no-default-hide`) nothing is guarded.
    let spec: MountSpec = format!("{}:/p:rw", fixture.path("p").display()).parse().unwrap();
    let bare = MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
    bare.agent().write("/p/vendor/HEAD", "ref: refs/heads/main\n", &OVERWRITE).unwrap();
    // An object store is guarded as a disk is (it may be synced to one).
    #[cfg(feature = "s3")]
    {
        let memory: MountSpec = "memory://git-guard:/m:rw".parse().unwrap();
        let objects = MountRegistry::builder()
            .mount(memory)
            .name_rules(NameRule::defaults())
            .build(vfs::ambient_authority())
            .unwrap();
        let agent = objects.agent();
        agent.write("/m/x/objects/info/packs", "", &OVERWRITE).unwrap();
        assert_eq!(
            refused(agent.write("/m/x/HEAD", "ref: refs/heads/main\n", &OVERWRITE)),
            "cannot write `/m/x/HEAD`: beside `objects` it would make `/m/x` look like a git repository (git metadata)"
        );
        // `HEAD` first: a key makes no directory on the way, and a write or a move below
        // `objects` or `refs` beside it is refused as the directory's making is on a disk.
        agent.write("/m/y/HEAD", "ref: refs/heads/main\n", &OVERWRITE).unwrap();
        for below in ["/m/y/objects/info/x", "/m/y/refs/heads/main", "/m/y/Refs/a/b/c"] {
            let partner = below.split('/').nth(3).unwrap();
            assert_eq!(
                refused(agent.write(below, "0\n", &OVERWRITE)),
                format!(
                    "cannot write `{below}`: beside `HEAD` it would make `/m/y` look like a git repository (git metadata)"
                ),
                "{partner}"
            );
        }
        agent.write("/m/stage/main", "0\n", &OVERWRITE).unwrap();
        assert_eq!(
            refused(agent.move_path(
                "/m/stage/main",
                "/m/y/refs/heads/main",
                &Precondition::Any,
                &Precondition::Absent
            )),
            "cannot write `/m/y/refs/heads/main`: beside `HEAD` it would make `/m/y` look like a git repository (git metadata)"
        );
        // Below a `HEAD` directory beside `objects`, likewise.
        assert_eq!(
            refused(agent.write("/m/x/HEAD/a", "0\n", &OVERWRITE)),
            "cannot write `/m/x/HEAD/a`: beside `objects` it would make `/m/x` look like a git repository (git metadata)"
        );
        // Elsewhere such names are names like any other.
        agent.write("/m/z/refs/notes.txt", "notes\n", &OVERWRITE).unwrap();
    }
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
