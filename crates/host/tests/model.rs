//! A model-based test of the doctrine: random sequences of agent tool calls, with relaunches in
//! between, against a tree that holds every kind of protection at once, and after every step
//! the invariants that must hold whatever the agent did.
//!
//! The tree (one temporary directory, `S`):
//!
//! | physical | virtual | protection |
//! |---|---|---|
//! | `S/outer` | `/w` (rw) | overrides `proj/lib:ro`, `proj/keep:rwnd`, `sys/logsro:ro`; rules `area/vault:hidden`, `area/docs/*.md:ro`, `area/cfg/*.toml:ro` (no `cfg` at launch), `**/*.secret:hidden`, `area/café:hidden` (written in NFC, held on disk in NFD) |
//! | `S/outer/nest/inner` | `/r` (ro) | a read-only mount nested in the writable one |
//! | `S/outer/sys/logsro/logs` | `/llm-logs` (internal) | the exchange log, under the read-only override |
//! | `S/out` | `/o` (rw) | a second writable mount, for moves across mounts |
//!
//! The model is what must not change: every byte under `proj/lib`, `sys/logsro` (the exchange log files
//! this run appends aside), the nested mount and the hidden `area/vault` and `area/café`, and
//! every `.md` file of `area/docs`, each where the launch found it, and no `.toml` ever in `area/cfg`; every file under `proj/keep` still there; the
//! directories `nest` and `nest/inner` where the launch found them; no file planted in another
//! case of a protected place (`proj/LIB/x`), or in the other Unicode normalization of one
//! (`area/café/x` beside the disk's `area/cafe\u{301}`), which a disk that ignores case or
//! normalization would have put inside it. After every step: those
//! hold, no answer names a physical path, the internal root, its file names or its content, or
//! shows a hidden file's name or content, a file just written reads back byte for byte, and the
//! server answered.
//!
//! A lane of concurrent calls (`Step::Together`) makes two calls of one session at once, as a
//! client that does not wait for answers does, and checks the same invariants after both have
//! answered, with two more that a race between a tree check and its act would break
//! (`docs/adr/0006-atomic-tree-guards.md`): the files the name rules protect by name
//! (`plain/.env`, `plain/.git/HEAD`) and the hidden files of the mount string are all still
//! there, whatever moved them, and no file hidden by `/w`'s own rules is in `/o`, which has none.
//!
//! The FUSE lane (`fuse_lane`) makes the agent's calls as a shell makes them, through the view
//! `run_command`'s commands see, and checks the same invariants on the disk. Its journal lane
//! (`run_undone`) makes them with `--journal`, then undoes every entry: the tree is back to its
//! start, but where an undo needs a right the change did not.
//!
//! CI runs a fixed number of cases (`VFS_MODEL_CASES`, default 256, of up to 40 steps;
//! `VFS_MODEL_FUSE_CASES`, default 64, of up to 30 operations, for the FUSE lane, and as many
//! of up to 19 for its journal lane). A long
//! campaign: `VFS_MODEL_CASES=20000 cargo test --release -p vfs-host --test model`
//! (`docs/compliance.md`).
#![expect(clippy::disallowed_methods, reason = "fixture: the test builds and inspects the tree on disk")]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde_json::{Value, json};
use vfs_compliance::leak::LeakChecker;
use vfs_host::{ExchangeLogger, LaunchOptions, ToolService};

/// Content the internal root holds; no answer may ever carry it.
const SECRET: &str = "SECRET-LOG-CONTENT-7f3a";

/// Content of the files the mount string hides; no answer may ever carry it.
const HIDDEN: &str = "SECRET-HIDDEN-PLACE-91c2";

/// The virtual paths the agent tries, every way of spelling them included.
const PATHS: &[&str] = &[
    "/w",
    "/w/proj",
    "/w/sys",
    "/w/proj/lib",
    "/w/proj/lib/a.txt",
    "/w/proj/lib/deep",
    "/w/proj/lib/deep/b.txt",
    "/w/./proj/lib/../lib/a.txt",
    "/w/plain/../proj/lib/deep",
    "/w/proj/keep",
    "/w/proj/keep/k.txt",
    "/w/nest",
    "/w/nest/inner",
    "/w/nest/inner/data.txt",
    "/w/nest/side.txt",
    "/w/sys/logsro",
    "/w/sys/logsro/notes.txt",
    "/w/sys/logsro/logs",
    "/w/sys/logsro/logs/secret.jsonl",
    "/w/plain",
    "/w/plain/x.txt",
    "/w/tmp",
    "/w/tmp/lib",
    "/w/tmp/x.txt",
    "/r",
    "/r/data.txt",
    "/o",
    "/o/x.txt",
    "/o/dir",
    "/llm-logs",
    "/llm-logs/secret.jsonl",
    "/w/area",
    "/w/area/vault",
    "/w/area/vault/token.txt",
    "/w/area/./docs/../vault",
    "/w/area/docs",
    "/w/area/docs/g.md",
    "/w/area/docs/new.md",
    "/w/area/docs/x.txt",
    "/w/area/notes.secret",
    "/w/tmp/vault",
    // A place whose rule (`area/cfg/*.toml:ro`) has nothing to protect at launch: no `.toml`
    // may ever appear there, written, moved there alone or with its directory.
    "/w/area/cfg",
    "/w/area/cfg/x.toml",
    "/w/tmp/x.toml",
    // The hidden `café`, in the disk's NFD and in the NFC the rule is written in.
    "/w/area/cafe\u{301}",
    "/w/area/cafe\u{301}/menu.txt",
    "/w/area/caf\u{e9}",
    "/w/area/caf\u{e9}/menu.txt",
    "/w/area/CAFE\u{301}/menu.txt",
    "/w/area/CAF\u{c9}/menu.txt",
    // Other cases of protected places: on a case-insensitive disk they are the same place.
    "/w/proj/LIB/a.txt",
    "/w/proj/Lib/deep",
    "/w/SYS/logsro/notes.txt",
    "/w/AREA/vault/token.txt",
    "/w/area/Vault",
    "/w/area/DOCS/n.MD",
    "/w/area/notes.SECRET",
];

/// The protected parts of the tree and, for `area/docs`, the names kept read-only there, in
/// lower case: a file whose lower-cased path falls in one, spelled otherwise than the part,
/// is one the agent planted where a case-insensitive disk would have put it inside.
const FOLDED_PARTS: &[(&str, Option<&str>)] = &[
    ("outer/proj/lib/", None),
    ("outer/sys/logsro/", None),
    ("outer/area/vault/", None),
    ("outer/area/docs/", Some(".md")),
    ("outer/area/cfg/", Some(".toml")),
    ("outer/area/cafe\u{301}/", None),
];

/// The NFC spellings of the hidden `area/cafe\u{301}`, ASCII in lower case (`É` is `E` with an
/// accent, so it folds as `E` does): nothing may be planted there either.
const OTHER_NORMALIZATIONS: &[&str] = &["outer/area/caf\u{e9}/", "outer/area/caf\u{c9}/"];

/// The content of the read-only `.git/HEAD`, which the name rules keep wherever it is moved.
const GIT_HEAD: &str = "ref: refs/heads/model\n";

const CONTENTS: &[&str] = &["pwned\n", "a\nb\n", "", "line one\r\nline two\r\n"];

#[derive(Debug, Clone)]
enum Step {
    Read(&'static str),
    ReadMultiple(&'static str, &'static str),
    Write(&'static str, &'static str, bool),
    Edit(&'static str, bool, bool),
    CreateDirectory(&'static str),
    List(&'static str),
    Tree(&'static str),
    Search(&'static str),
    Grep(&'static str),
    Info(&'static str),
    Move(&'static str, &'static str, bool),
    Delete(&'static str, bool),
    Relaunch,
    /// Two calls at once, in one session.
    Together(Box<Step>, Box<Step>),
}

fn path() -> impl Strategy<Value = &'static str> {
    prop::sample::select(PATHS)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => call(),
        1 => Just(Step::Relaunch),
        3 => (call(), call()).prop_map(|(first, second)| Step::Together(Box::new(first), Box::new(second))),
    ]
}

/// One tool call.
fn call() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => path().prop_map(Step::Read),
        1 => (path(), path()).prop_map(|(first, second)| Step::ReadMultiple(first, second)),
        1 => (path(), prop::sample::select(CONTENTS), any::<bool>())
            .prop_map(|(path, content, overwrite)| Step::Write(path, content, overwrite)),
        1 => (path(), any::<bool>(), any::<bool>()).prop_map(|(path, all, dry)| Step::Edit(path, all, dry)),
        1 => path().prop_map(Step::CreateDirectory),
        1 => path().prop_map(Step::List),
        1 => path().prop_map(Step::Tree),
        1 => path().prop_map(Step::Search),
        1 => path().prop_map(Step::Grep),
        1 => path().prop_map(Step::Info),
        3 => (path(), path(), any::<bool>()).prop_map(|(from, to, overwrite)| Step::Move(from, to, overwrite)),
        3 => (path(), any::<bool>()).prop_map(|(path, recursive)| Step::Delete(path, recursive)),
    ]
}

impl Step {
    fn call(&self) -> (&'static str, Value) {
        match *self {
            Step::Read(path) => ("read_text_file", json!({ "path": path })),
            Step::ReadMultiple(first, second) => ("read_multiple_files", json!({ "paths": [first, second] })),
            Step::Write(path, content, overwrite) => {
                ("write_file", json!({ "path": path, "content": content, "overwrite": overwrite }))
            }
            Step::Edit(path, all, dry) => (
                "edit_file",
                json!({ "path": path, "edits": [{ "oldText": "a", "newText": "A" }], "replaceAll": all, "dryRun": dry }),
            ),
            Step::CreateDirectory(path) => ("create_directory", json!({ "path": path })),
            Step::List(path) => ("list_directory", json!({ "path": path })),
            Step::Tree(path) => ("directory_tree", json!({ "path": path })),
            Step::Search(path) => ("search_files", json!({ "path": path, "pattern": "*" })),
            Step::Grep(path) => ("grep", json!({ "pattern": "SECRET|data|a", "path": path })),
            Step::Info(path) => ("get_file_info", json!({ "path": path })),
            Step::Move(from, to, overwrite) => {
                ("move_file", json!({ "source": from, "destination": to, "overwrite": overwrite }))
            }
            Step::Delete(path, recursive) => ("delete_file", json!({ "path": path, "recursive": recursive })),
            Step::Relaunch | Step::Together(..) => ("", Value::Null),
        }
    }
}

/// The tree, and what the model says must stay.
struct World {
    dir: tempfile::TempDir,
    options: LaunchOptions,
    protected: BTreeMap<String, Vec<u8>>,
    kept: Vec<PathBuf>,
    pinned: Vec<(PathBuf, u64)>,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let root = root.as_path();
        for (name, content) in [
            ("outer/proj/lib/a.txt", "library a\n"),
            ("outer/proj/lib/deep/b.txt", "library b\n"),
            ("outer/proj/keep/k.txt", "kept\n"),
            ("outer/nest/inner/data.txt", "read-only data\n"),
            ("outer/nest/side.txt", "beside the nested mount\n"),
            ("outer/sys/logsro/notes.txt", "notes\n"),
            ("outer/plain/x.txt", "plain a\n"),
            ("out/x.txt", "other mount a\n"),
            ("outer/area/vault/token.txt", HIDDEN),
            ("outer/area/notes.secret", HIDDEN),
            ("outer/area/docs/g.md", "a guide\n"),
            ("outer/area/docs/x.txt", "a draft\n"),
            ("outer/area/cafe\u{301}/menu.txt", HIDDEN),
            ("outer/plain/.env", HIDDEN),
            ("outer/plain/.git/HEAD", GIT_HEAD),
        ] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        std::fs::create_dir_all(root.join("outer/sys/logsro/logs")).unwrap();
        std::fs::write(root.join("outer/sys/logsro/logs/secret.jsonl"), format!("{{\"x\": \"{SECRET}\"}}\n")).unwrap();
        let options = LaunchOptions {
            mounts: vec![
                "outer:/w:rw;proj/lib:ro;proj/keep:rwnd;sys/logsro:ro;area/vault:hidden;area/docs/*.md:ro;area/cfg/*.toml:ro;**/*.secret:hidden;area/caf\u{e9}:hidden"
                    .to_owned(),
                "outer/nest/inner:/r:ro".to_owned(),
                "out:/o:rw".to_owned(),
            ],
            llm_log: Some(PathBuf::from("outer/sys/logsro/logs")),
            current_dir: root.to_path_buf(),
            ..LaunchOptions::default()
        };
        let mut world = Self { dir, options, protected: BTreeMap::new(), kept: Vec::new(), pinned: Vec::new() };
        world.protected = world.snapshot();
        world.kept = files_under(&root.join("outer/proj/keep"));
        world.pinned = ["outer/nest", "outer/nest/inner"]
            .iter()
            .map(|name| {
                let path = root.join(name);
                let inode = std::fs::metadata(&path).unwrap().ino();
                (path, inode)
            })
            .collect();
        world
    }

    /// Every byte under the read-only and hidden parts, the exchange log files of this run
    /// aside, and the `.md` files the mount string keeps read-only.
    fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let root = self.dir.path();
        let mut files = BTreeMap::new();
        for part in [
            "outer/proj/lib",
            "outer/sys/logsro",
            "outer/nest/inner",
            "outer/area/vault",
            "outer/area/docs",
            "outer/area/cafe\u{301}",
        ] {
            for file in files_under(&root.join(part)) {
                let name = file.file_name().unwrap().to_string_lossy().into_owned();
                if name.starts_with("exchanges-")
                    || (part == "outer/area/docs" && file.extension().is_none_or(|extension| extension != "md"))
                {
                    continue;
                }
                let key = file.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                files.insert(key, std::fs::read(&file).unwrap());
            }
        }
        files
    }

    fn launch(&self) -> (ToolService, LeakChecker) {
        let launch = vfs_host::compose(&self.options, vfs::ambient_authority()).unwrap();
        let logger = ExchangeLogger::open(launch.registry()).unwrap();
        let checker = LeakChecker::new(launch.registry()).with_spelling(&self.dir.path().to_string_lossy());
        // The model is about rights and places; the read-before-edit rule (its own model:
        // `tests/read_before_edit.rs`) would only make the attacker's edits rarer.
        (ToolService::new(launch.registry().clone(), logger).read_before_edit(false), checker)
    }

    fn check_invariants(&self, after: &str) -> Result<(), TestCaseError> {
        let now = self.snapshot();
        prop_assert_eq!(&now, &self.protected, "a protected byte changed after {}", after);
        for file in &self.kept {
            prop_assert!(file.exists(), "{} (no delete) is gone after {}", file.display(), after);
        }
        for file in files_under(&self.dir.path().join("outer")) {
            let key = file.strip_prefix(self.dir.path()).unwrap().to_string_lossy().into_owned();
            let folded = key.to_ascii_lowercase();
            let planted = FOLDED_PARTS.iter().any(|(part, suffix)| {
                folded.starts_with(part)
                    && !key.starts_with(part)
                    && suffix.is_none_or(|suffix| !folded[part.len()..].contains('/') && folded.ends_with(suffix))
            });
            prop_assert!(!planted, "{} was planted in another case after {}", key, after);
            prop_assert!(
                !OTHER_NORMALIZATIONS.iter().any(|part| folded.starts_with(part)),
                "{} was planted in another normalization after {}",
                key,
                after
            );
        }
        // Nothing was there for `area/cfg/*.toml:ro` to protect, and the agent can author none.
        let authored: Vec<PathBuf> = files_under(&self.dir.path().join("outer/area/cfg"))
            .into_iter()
            .filter(|file| file.parent().and_then(Path::file_name) == Some("cfg".as_ref()))
            .filter(|file| file.extension().is_some_and(|extension| extension == "toml"))
            .collect();
        prop_assert!(authored.is_empty(), "{:?} appeared under `area/cfg/*.toml:ro` after {}", authored, after);
        for (path, inode) in &self.pinned {
            let found = std::fs::metadata(path).map(|metadata| metadata.ino()).ok();
            prop_assert_eq!(found, Some(*inode), "{} moved after {}", path.display(), after);
        }
        // What the rules protect by name may move with its directory, but never goes away:
        // the agent cannot read, write or name a hidden file, nor delete a directory holding
        // one; and `/o` has no rules, so what `/w`'s own rules hide must never reach it.
        let (mut hidden, mut heads) = (Vec::new(), 0);
        for file in files_under(self.dir.path()) {
            let content = std::fs::read(&file).unwrap_or_default();
            let key = file.strip_prefix(self.dir.path()).unwrap().to_string_lossy().into_owned();
            if content == HIDDEN.as_bytes() {
                hidden.push(key);
            } else if content == GIT_HEAD.as_bytes() && key.ends_with(".git/HEAD") {
                heads += 1;
            }
        }
        prop_assert_eq!(hidden.len(), 4, "a hidden file is gone after {}: {:?}", after, hidden);
        prop_assert_eq!(heads, 1, "`.git/HEAD` is gone after {}", after);
        let escaped = hidden.iter().filter(|key| key.starts_with("out/") && !key.ends_with("/.env")).count();
        prop_assert_eq!(escaped, 0, "a file `/w` hides reached `/o` after {}: {:?}", after, hidden);
        Ok(())
    }
}

fn files_under(directory: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(directory) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            found.extend(files_under(&path));
        } else {
            found.push(path);
        }
    }
    found.sort();
    found
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let world = World::new();
    let (mut tools, mut checker) = world.launch();
    for step in steps {
        if matches!(step, Step::Relaunch) {
            (tools, checker) = world.launch();
            world.check_invariants("a relaunch")?;
            continue;
        }
        let described = format!("{step:?}");
        if let Step::Together(first, second) = step {
            // Both start at once; the invariants are checked once both have answered.
            let barrier = std::sync::Barrier::new(2);
            let call = |step: &Step| {
                let (name, arguments) = step.call();
                barrier.wait();
                tools.call(name, arguments.as_object().cloned())
            };
            let (one, two) = std::thread::scope(|scope| {
                let one = scope.spawn(|| call(first));
                let two = scope.spawn(|| call(second));
                (one.join().unwrap(), two.join().unwrap())
            });
            check_answer(&world, &checker, first, &format!("{first:?} in {described}"), &one)?;
            check_answer(&world, &checker, second, &format!("{second:?} in {described}"), &two)?;
            world.check_invariants(&described)?;
            continue;
        }
        let (name, arguments) = step.call();
        let output = tools.call(name, arguments.as_object().cloned());
        check_answer(&world, &checker, step, &described, &output)?;
        if let (Step::Write(path, content, _), Ok(output)) = (step, &output)
            && !output.is_error
        {
            let read = tools.call("read_text_file", json!({ "path": path }).as_object().cloned()).unwrap();
            prop_assert_eq!(&read.text, content, "{} did not read back byte for byte", path);
        }
        world.check_invariants(&described)?;
    }
    Ok(())
}

/// What no answer may show: a physical path, the internal root's names or content, a hidden
/// file's name or content.
fn check_answer(
    world: &World,
    checker: &LeakChecker,
    step: &Step,
    described: &str,
    output: &Result<vfs_host::ToolOutput, vfs_host::CallError>,
) -> Result<(), TestCaseError> {
    {
        let texts: Vec<String> = match output {
            Ok(output) => {
                let mut texts = vec![output.text.clone()];
                texts.extend(output.structured.as_ref().map(Value::to_string));
                texts
            }
            Err(error) => vec![error.to_string()],
        };
        for text in &texts {
            // The agent's own input is echoed as given: `read_multiple_files` labels each
            // result with the path it was given, the internal root included.
            let text = match step {
                Step::ReadMultiple(first, second) => text.replace(first, "<label>").replace(second, "<label>"),
                _ => text.clone(),
            };
            let leaks = checker.check(&text);
            prop_assert!(leaks.is_empty(), "{described} leaked {leaks:?}: {text}");
            prop_assert!(!text.contains(SECRET), "{described} showed internal content: {text}");
            prop_assert!(!text.contains("exchanges-"), "{described} named an exchange log: {text}");
            prop_assert!(!text.contains("secret.jsonl") || described.contains("secret.jsonl"), "{described}: {text}");
            prop_assert!(!text.contains(HIDDEN), "{described} showed hidden content: {text}");
            for name in ["vault", "token.txt", "notes.secret", "menu.txt", ".env"] {
                // (The agent may make a `vault` of its own elsewhere; the hidden one is at the root.)
                let own = name == "vault" && world.dir.path().join("outer/tmp/vault").exists();
                prop_assert!(
                    !text.contains(name) || described.contains(name) || own,
                    "{described} named {name}: {text}"
                );
            }
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("VFS_MODEL_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_sequence_of_calls_breaks_the_doctrine(steps in prop::collection::vec(step(), 1..40)) {
        run(&steps)?;
    }
}

/// The sequences an attacker tried by hand, replayed through the model's invariants.
#[test]
fn the_known_attacks_fail() {
    let attacks: Vec<Vec<Step>> = vec![
        // Move the read-only part away, edit it, move it back.
        vec![
            Step::Move("/w/proj/lib", "/w/tmp", false),
            Step::Move("/w/proj", "/w/tmp", false),
            Step::Edit("/w/tmp/lib/a.txt", true, false),
            Step::Move("/w/tmp", "/w/proj", false),
        ],
        // Delete the read-only part with its parent.
        vec![Step::Delete("/w/proj/lib", true), Step::Delete("/w/proj", true), Step::Delete("/w", true)],
        // Stage a directory and move it onto the read-only part.
        vec![
            Step::Write("/w/tmp/lib/a.txt", "pwned\n", false),
            Step::Delete("/w/proj/lib", true),
            Step::Move("/w/tmp/lib", "/w/proj/lib", true),
        ],
        // Move the directory that holds the nested mount, recreate it, relaunch.
        vec![
            Step::Move("/w/nest", "/w/tmp", false),
            Step::CreateDirectory("/w/nest/inner"),
            Step::Write("/w/nest/inner/data.txt", "forged\n", true),
            Step::Relaunch,
            Step::Read("/r/data.txt"),
        ],
        // Reach the exchange log through the part that holds it.
        vec![
            Step::Move("/w/sys/logsro", "/w/tmp", false),
            Step::Move("/w/sys", "/w/tmp", false),
            Step::List("/w/sys/logsro/logs"),
            Step::Delete("/w/sys/logsro", true),
            Step::Read("/w/sys/logsro/logs/secret.jsonl"),
            Step::ReadMultiple("/llm-logs/secret.jsonl", "/w/sys/logsro/logs/secret.jsonl"),
        ],
        // Carry a hidden or read-only place out of its protection by moving what holds it.
        vec![
            Step::Move("/w/area", "/w/tmp", false),
            Step::Move("/w/area/docs", "/w/tmp", false),
            Step::Move("/w/area/docs/g.md", "/w/tmp/x.txt", false),
            Step::Write("/w/tmp/vault", "x", false),
            Step::Move("/w/tmp/vault", "/w/area/vault", true),
            Step::Delete("/w/area", true),
            Step::Read("/w/tmp/vault/token.txt"),
            Step::Grep("/w"),
            Step::Tree("/w/area"),
        ],
        // Race a tree check against its act: delete a tree while a directory holding `.env`
        // and `.git` moves into it; move a tree to the mount without rules while a hidden
        // file's directory moves into it.
        vec![
            Step::CreateDirectory("/w/tmp"),
            Step::Together(
                Box::new(Step::Delete("/w/tmp", true)),
                Box::new(Step::Move("/w/plain", "/w/tmp/lib", false)),
            ),
            Step::Write("/w/tmp/x.txt", "a\n", true),
            Step::Together(
                Box::new(Step::Move("/w/tmp", "/o/dir", false)),
                Box::new(Step::Move("/w/area", "/w/tmp/vault", false)),
            ),
        ],
        // Bring a file under a rule of a new place: a directory holding `x.toml` moved to
        // `area/cfg`, a file moved there alone, and a write racing the directory's move.
        vec![
            Step::Write("/w/tmp/x.toml", "pwned\n", false),
            Step::Move("/w/tmp", "/w/area/cfg", false),
            Step::Move("/w/tmp/x.toml", "/w/area/cfg/x.toml", false),
            Step::Delete("/w/tmp/x.toml", false),
            Step::CreateDirectory("/w/tmp"),
            Step::Together(
                Box::new(Step::Write("/w/tmp/x.toml", "pwned\n", false)),
                Box::new(Step::Move("/w/tmp", "/w/area/cfg", false)),
            ),
        ],
        // Take a no-delete file away by moving its directory, or itself.
        vec![
            Step::Move("/w/proj/keep", "/o/dir", false),
            Step::Move("/w/proj", "/o/dir", false),
            Step::Delete("/w/proj", true),
            Step::Move("/w/proj/keep/k.txt", "/o/x.txt", true),
        ],
    ];
    for attack in attacks {
        if let Err(error) = run(&attack) {
            panic!("{attack:?}: {error}");
        }
    }
}

/// The FUSE lane: the same tree and the same invariants, the agent's calls made by a shell
/// through the view (`std::fs` against its mountpoint), as `run_command`'s commands make them.
mod fuse_lane {
    use std::path::{Path, PathBuf};
    use std::sync::mpsc;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::{CONTENTS, HIDDEN, PATHS, SECRET, World};

    /// Longest one operation may take before the watchdog aborts the view's connection (which
    /// ends every request waiting on it with `ENOTCONN`) and fails the case.
    const PATIENCE: Duration = Duration::from_secs(20);

    #[derive(Debug, Clone)]
    pub(super) enum Op {
        Read(&'static str),
        Write(&'static str, &'static str),
        Append(&'static str, &'static str),
        Truncate(&'static str),
        Mkdir(&'static str),
        List(&'static str),
        Rename(&'static str, &'static str),
        RemoveFile(&'static str),
        RemoveDir(&'static str),
        RemoveTree(&'static str),
        /// Two operations at once, from two threads.
        Together(Box<Op>, Box<Op>),
    }

    fn path() -> impl Strategy<Value = &'static str> {
        prop::sample::select(PATHS)
    }

    fn single() -> impl Strategy<Value = Op> {
        prop_oneof![
            1 => path().prop_map(Op::Read),
            1 => (path(), prop::sample::select(CONTENTS)).prop_map(|(path, content)| Op::Write(path, content)),
            1 => (path(), prop::sample::select(CONTENTS)).prop_map(|(path, content)| Op::Append(path, content)),
            1 => path().prop_map(Op::Truncate),
            1 => path().prop_map(Op::Mkdir),
            1 => path().prop_map(Op::List),
            3 => (path(), path()).prop_map(|(from, to)| Op::Rename(from, to)),
            1 => path().prop_map(Op::RemoveFile),
            1 => path().prop_map(Op::RemoveDir),
            2 => path().prop_map(Op::RemoveTree),
        ]
    }

    pub(super) fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => single(),
            2 => (single(), single()).prop_map(|(first, second)| Op::Together(Box::new(first), Box::new(second))),
        ]
    }

    /// What an operation returned that the invariants look at: bytes read, names listed.
    #[derive(Debug)]
    enum Seen {
        Bytes(Vec<u8>),
        Names(Vec<String>),
        Nothing,
    }

    fn apply(mountpoint: &Path, op: &Op) -> std::io::Result<Seen> {
        let at = |path: &str| mountpoint.join(path.trim_start_matches('/'));
        match *op {
            Op::Read(path) => std::fs::read(at(path)).map(Seen::Bytes),
            Op::Write(path, content) => std::fs::write(at(path), content).map(|()| Seen::Nothing),
            Op::Append(path, content) => {
                use std::io::Write as _;
                #[expect(clippy::disallowed_types, reason = "fixture: a shell's append, through the view")]
                let mut file = std::fs::OpenOptions::new().append(true).open(at(path))?;
                file.write_all(content.as_bytes()).map(|()| Seen::Nothing)
            }
            Op::Truncate(path) => {
                #[expect(clippy::disallowed_types, reason = "fixture: a shell's truncation, through the view")]
                let file = std::fs::OpenOptions::new().write(true).open(at(path))?;
                file.set_len(0).map(|()| Seen::Nothing)
            }
            Op::Mkdir(path) => std::fs::create_dir_all(at(path)).map(|()| Seen::Nothing),
            Op::List(path) => std::fs::read_dir(at(path)).map(|entries| {
                Seen::Names(entries.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect())
            }),
            Op::Rename(from, to) => std::fs::rename(at(from), at(to)).map(|()| Seen::Nothing),
            Op::RemoveFile(path) => std::fs::remove_file(at(path)).map(|()| Seen::Nothing),
            Op::RemoveDir(path) => std::fs::remove_dir(at(path)).map(|()| Seen::Nothing),
            Op::RemoveTree(path) => std::fs::remove_dir_all(at(path)).map(|()| Seen::Nothing),
            Op::Together(..) => Ok(Seen::Nothing),
        }
    }

    fn connection(mountpoint: &Path) -> PathBuf {
        crate::common::connection(mountpoint)
    }

    /// Runs `ops` at once, each on its own thread, and returns what each returned; an
    /// operation that does not answer within [`PATIENCE`] aborts the connection.
    fn watched(mountpoint: &Path, connection: &Path, ops: &[&Op]) -> Result<Vec<std::io::Result<Seen>>, TestCaseError> {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(ops.len()));
        let receivers: Vec<mpsc::Receiver<std::io::Result<Seen>>> = ops
            .iter()
            .map(|op| {
                let (sender, receiver) = mpsc::channel();
                let (mountpoint, op, barrier) = (mountpoint.to_owned(), (*op).clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let _ = sender.send(apply(&mountpoint, &op));
                });
                receiver
            })
            .collect();
        let mut results = Vec::new();
        for (receiver, op) in receivers.iter().zip(ops) {
            let Ok(result) = receiver.recv_timeout(PATIENCE) else {
                crate::common::abort(connection);
                return Err(TestCaseError::fail(format!("{op:?} got no answer from the view within {PATIENCE:?}")));
            };
            results.push(result);
        }
        Ok(results)
    }

    fn check_seen(world: &World, op: &Op, described: &str, seen: &std::io::Result<Seen>) -> Result<(), TestCaseError> {
        match seen {
            Ok(Seen::Bytes(bytes)) => {
                let text = String::from_utf8_lossy(bytes);
                prop_assert!(!text.contains(SECRET), "{described} showed internal content");
                prop_assert!(!text.contains(HIDDEN), "{described} showed hidden content");
            }
            Ok(Seen::Names(names)) => {
                let Op::List(path) = op else { return Ok(()) };
                for name in names {
                    prop_assert!(!name.starts_with("exchanges-") && name != "llm-logs", "{described} listed {name}");
                    let own_vault = name == "vault" && world.dir.path().join("outer/tmp/vault").exists();
                    let hidden = ["vault", "token.txt", "notes.secret", "menu.txt", ".env", "cafe\u{301}"];
                    prop_assert!(
                        !hidden.contains(&name.as_str())
                            || own_vault
                            || (name == "vault" && !path.starts_with("/w/area")),
                        "{described} listed the hidden {name}"
                    );
                }
            }
            Ok(Seen::Nothing) | Err(_) => {}
        }
        Ok(())
    }

    pub(super) fn run(ops: &[Op]) -> Result<(), TestCaseError> {
        let world = World::new();
        let launch = vfs_host::compose(&world.options, vfs::ambient_authority()).unwrap();
        // Outside the tree: the invariants walk the tree on the disk, not through the view.
        let outside = tempfile::tempdir().unwrap();
        let mountpoint = outside.path().to_owned();
        let view = match vfs_fuse::mount(launch.registry(), &mountpoint, &vfs_fuse::FuseOptions::default()) {
            Ok(view) => view,
            Err(error) => {
                assert!(
                    std::env::var_os("VFS_REQUIRE_FUSE").is_none(),
                    "VFS_REQUIRE_FUSE is set, but the view cannot be mounted: {error}"
                );
                return Ok(());
            }
        };
        let connection = connection(&mountpoint);
        let outcome = (|| {
            for op in ops {
                let described = format!("{op:?}");
                let singles: Vec<&Op> = match op {
                    Op::Together(first, second) => vec![first, second],
                    _ => vec![op],
                };
                let results = watched(&mountpoint, &connection, &singles)?;
                for (single, result) in singles.iter().zip(&results) {
                    check_seen(&world, single, &described, result)?;
                    if let (Op::Write(path, content), Ok(_), false) = (single, result, matches!(op, Op::Together(..))) {
                        let read = watched(&mountpoint, &connection, &[&Op::Read(path)])?.remove(0);
                        let Ok(Seen::Bytes(bytes)) = read else {
                            return Err(TestCaseError::fail(format!("{path} written through the view reads {read:?}")));
                        };
                        prop_assert_eq!(bytes, content.as_bytes(), "{} did not read back byte for byte", path);
                    }
                }
                world.check_invariants(&described)?;
            }
            Ok(())
        })();
        // The case's own failure first: a watchdog's abort also fails the unmount.
        let unmounted = view.unmount();
        outcome?;
        unmounted.unwrap();
        Ok(())
    }

    /// Every file (bytes) and directory (`None`) under `root`, by relative path, but the
    /// exchange log's files.
    fn tree(root: &Path) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
        let mut found = std::collections::BTreeMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(directory) = stack.pop() {
            for entry in std::fs::read_dir(&directory).unwrap().flatten() {
                let path = entry.path();
                let key = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if entry.file_type().unwrap().is_dir() {
                    found.insert(key, None);
                    stack.push(path);
                } else if !entry.file_name().to_string_lossy().starts_with("exchanges-") {
                    found.insert(key, Some(std::fs::read(&path).unwrap()));
                }
            }
        }
        found
    }

    /// The journal lane: the same shell operations through the view with `--journal`, then
    /// every entry undone as the operator, newest first. The tree is back to its start byte for
    /// byte, but where an undo needs a right the act did not (a file made in the `rwnd` scope
    /// `proj/keep` is removed by a delete, which `rwnd` refuses: that undo fails, says so, and
    /// leaves that path as the change left it).
    pub(super) fn run_undone(ops: &[Op]) -> Result<(), TestCaseError> {
        let mut world = World::new();
        let journal = tempfile::tempdir().unwrap();
        world.options.journal = Some(journal.path().join("journal"));
        let start = tree(world.dir.path());
        let launch = vfs_host::compose(&world.options, vfs::ambient_authority()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let mountpoint = outside.path().to_owned();
        let Ok(view) = vfs_fuse::mount(launch.registry(), &mountpoint, &vfs_fuse::FuseOptions::default()) else {
            return Err(TestCaseError::fail("the view could not be mounted"));
        };
        let connection = connection(&mountpoint);
        let applied: Result<(), TestCaseError> = (|| {
            for op in ops {
                let singles: Vec<&Op> = match op {
                    Op::Together(first, second) => vec![first, second],
                    _ => vec![op],
                };
                watched(&mountpoint, &connection, &singles)?;
            }
            Ok(())
        })();
        let unmounted = view.unmount();
        applied?;
        unmounted.unwrap();
        let journal = launch.journal().unwrap();
        journal.flush();
        let agent = launch.registry().agent();
        let physical = |path: &str| path.replacen("/w/", "outer/", 1).replacen("/o/", "out/", 1);
        let related = |path: &str, other: &str| {
            path == other || path.starts_with(&format!("{other}/")) || other.starts_with(&format!("{path}/"))
        };
        // An undo needs the rights its own act needs: removing what a change made is a delete,
        // which an `rwnd` scope (`proj/keep`) or a directory holding a read-only scope refuses.
        // Such an entry's paths are left as the change left them.
        let mut lines = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        for entry in journal.entries().undoable_newest(None) {
            let (undone, _) = journal.undo(&agent, entry, "operator", None);
            for line in &undone {
                if line.starts_with("restored ") || line.starts_with("removed ") {
                    continue;
                }
                // A conflict is an older change's, on what a refused undo left behind.
                let conflict = line
                    .strip_prefix("conflict ")
                    .and_then(|rest| rest.split_once(':'))
                    .map(|(path, _)| physical(path))
                    .is_some_and(|path| refused.iter().any(|refused| related(&path, refused)));
                let rights = line.contains("grant delete");
                prop_assert!(
                    rights || conflict,
                    "an undo line that is neither a restore nor a refusal of rights: {line}\n{lines:#?}\n{undone:#?}"
                );
                refused.extend(entry.paths.iter().map(|path| physical(path)));
            }
            lines.extend(undone);
        }
        let end = tree(world.dir.path());
        for path in start.keys().chain(end.keys()) {
            let explained = refused.iter().any(|refused| related(path, refused));
            if !explained {
                prop_assert_eq!(start.get(path), end.get(path), "`{}` differs after every undo: {:#?}", path, lines);
            }
        }
        Ok(())
    }

    pub(super) fn can_mount() -> bool {
        crate::common::can_mount("the FUSE lane")
    }
}

fn fuse_cases() -> u32 {
    std::env::var("VFS_MODEL_FUSE_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuse_cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_shell_change_through_the_view_is_journaled_and_undone_exactly(
        ops in prop::collection::vec(fuse_lane::op(), 1..20)
    ) {
        if fuse_lane::can_mount() {
            fuse_lane::run_undone(&ops)?;
        }
    }

    #[test]
    fn no_sequence_of_shell_operations_through_the_view_breaks_the_doctrine(
        ops in prop::collection::vec(fuse_lane::op(), 1..30)
    ) {
        if fuse_lane::can_mount() {
            fuse_lane::run(&ops)?;
        }
    }
}

/// The attacks of [`the_known_attacks_fail`], made by a shell through the view.
#[test]
fn the_known_attacks_fail_through_the_view() {
    use fuse_lane::Op;
    if !fuse_lane::can_mount() {
        return;
    }
    let attacks: Vec<Vec<Op>> = vec![
        vec![
            Op::Rename("/w/proj/lib", "/w/tmp"),
            Op::Rename("/w/proj", "/w/tmp"),
            Op::Write("/w/tmp/lib/a.txt", "pwned\n"),
            Op::Rename("/w/tmp", "/w/proj"),
        ],
        vec![Op::RemoveTree("/w/proj/lib"), Op::RemoveTree("/w/proj"), Op::RemoveTree("/w")],
        vec![
            Op::Mkdir("/w/tmp/lib"),
            Op::Write("/w/tmp/lib/a.txt", "pwned\n"),
            Op::RemoveTree("/w/proj/lib"),
            Op::Rename("/w/tmp/lib", "/w/proj/lib"),
        ],
        vec![
            Op::Rename("/w/nest", "/w/tmp"),
            Op::Mkdir("/w/nest/inner"),
            Op::Write("/w/nest/inner/data.txt", "forged\n"),
            Op::Read("/r/data.txt"),
        ],
        vec![
            Op::Rename("/w/sys/logsro", "/w/tmp"),
            Op::Rename("/w/sys", "/w/tmp"),
            Op::List("/w/sys/logsro/logs"),
            Op::RemoveTree("/w/sys/logsro"),
            Op::Read("/w/sys/logsro/logs/secret.jsonl"),
            Op::Read("/llm-logs/secret.jsonl"),
        ],
        vec![
            Op::Rename("/w/area", "/w/tmp"),
            Op::Rename("/w/area/docs", "/w/tmp"),
            Op::Rename("/w/area/docs/g.md", "/w/tmp/x.txt"),
            Op::Append("/w/area/docs/g.md", "pwned\n"),
            Op::Truncate("/w/area/docs/g.md"),
            Op::Write("/w/tmp/vault", "x"),
            Op::Rename("/w/tmp/vault", "/w/area/vault"),
            Op::RemoveTree("/w/area"),
            Op::Read("/w/area/vault/token.txt"),
            Op::List("/w/area"),
        ],
        vec![
            Op::Mkdir("/w/tmp"),
            Op::Together(Box::new(Op::RemoveTree("/w/tmp")), Box::new(Op::Rename("/w/plain", "/w/tmp/lib"))),
            Op::Together(Box::new(Op::Rename("/w/tmp", "/o/dir")), Box::new(Op::Rename("/w/area", "/w/tmp/vault"))),
        ],
        vec![
            Op::Rename("/w/proj/keep", "/o/dir"),
            Op::Rename("/w/proj", "/o/dir"),
            Op::RemoveTree("/w/proj"),
            Op::Rename("/w/proj/keep/k.txt", "/o/x.txt"),
            Op::RemoveFile("/w/proj/keep/k.txt"),
            Op::Truncate("/w/proj/keep/k.txt"),
        ],
    ];
    for attack in attacks {
        if let Err(error) = fuse_lane::run(&attack) {
            panic!("{attack:?}: {error}");
        }
    }
}

/// Journal-lane cases the random search found, kept: a directory moved to the other mount and
/// then refused an `rmdir` (not empty) once imaged every file in it, moving their change times,
/// and the move's undo was a conflict.
#[test]
fn the_journal_lane_cases_found_before_undo_exactly() {
    use fuse_lane::Op;
    if !fuse_lane::can_mount() {
        return;
    }
    let found = [vec![
        Op::Together(Box::new(Op::Rename("/w/plain", "/o/dir")), Box::new(Op::Read("/w"))),
        Op::Together(Box::new(Op::RemoveDir("/o/dir")), Box::new(Op::Read("/w"))),
    ]];
    for ops in found {
        if let Err(error) = fuse_lane::run_undone(&ops) {
            panic!("{ops:?}: {error}");
        }
    }
}
