use crate::eqnice;
use crate::util::TestDir;

const ID_A: &str = "01J9Z3K4M5N6P7Q8R9S0T1V2W3";
const ID_B: &str = "01J9Z3K4M5N6P7Q8R9S0T1V2W4";

#[test]
fn reserved_roots_are_refused_in_one_line_before_serving() {
    let test = TestDir::new();
    test.dir("data");
    for root in ["/crew", "/crews", "/crews-2", "/script", "/llm-logs", "/llm-journal", "/crew/sub"] {
        let spec = format!("data:{root}");
        let run = test.run(&["serve", "--mount", &spec]);
        let first = root.split('/').nth(1).unwrap();
        eqnice!(
            format!(
                "error: the mount `{spec}` claims `/{first}`, a reserved root: this command reserves `/crew`, `/crews`, `/crews-N`, `/script`, `/llm-logs` and `/llm-journal`; rename the mount, for example to `/{first}-files`\n"
            ),
            run.stderr
        );
        assert_eq!(run.code, 2);
        eqnice!("", run.stdout);
    }
}

#[test]
fn lookalikes_of_reserved_roots_are_fine() {
    let test = TestDir::new();
    test.dir("data");
    let run = test.run(&["check", "--mount", "data:/crews-x", "--mount", "data:/crew2"]);
    eqnice!("OK\n", run.stdout);
    assert_eq!(run.code, 0);
}

#[test]
fn a_bad_mount_string_is_one_line_with_a_hint() {
    let test = TestDir::new();
    let run = test.run(&["serve", "--mount", "./out:/output:rx"]);
    assert_eq!(run.code, 2);
    let mut lines = run.stderr.lines();
    let first = lines.next().unwrap();
    assert!(first.starts_with("error: invalid mount `./out:/output:rx`: "), "{first}");
    assert_eq!(lines.next(), Some(""));
    assert!(lines.next().unwrap().starts_with("hint: "));
}

#[test]
fn check_lists_every_problem_one_per_line() {
    let test = TestDir::new();
    let run = test.run(&["check", "--mount", "xx:/script", "--mount-id", "nope"]);
    eqnice!(
        "the mount `xx:/script` claims `/script`, a reserved root: this command reserves `/crew`, `/crews`, `/crews-N`, `/script`, `/llm-logs` and `/llm-journal`; rename the mount, for example to `/script-files`\n\
         invalid --mount-id `nope`: a mount id is a ULID: 26 characters of Crockford base32\n",
        run.stdout
    );
    assert_eq!(run.code, 2);
}

#[test]
fn nested_object_prefixes_are_refused_before_any_store_is_contacted() {
    let test = TestDir::new();
    let run = test.run(&["check", "--mount", "s3://team/work:/work:rw", "--mount", "s3://team/work/vendor:/vendor:ro"]);
    eqnice!(
        "`s3://team/work/vendor` for mount `/vendor` lies inside `s3://team/work` for mount `/work`: object-storage mounts cannot nest\n",
        run.stdout
    );
    assert_eq!(run.code, 2);
    let run = test.run(&["serve", "--mount", "s3://team/work:/work:rw", "--mount", "s3://team/work/vendor:/vendor:ro"]);
    eqnice!(
        "error: `s3://team/work/vendor` for mount `/vendor` lies inside `s3://team/work` for mount `/work`: object-storage mounts cannot nest\n\n\
         hint: give the mounts prefixes side by side, such as `s3://bucket/work` and `s3://bucket/vendor`, or keep only the outer one\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
}

#[test]
fn no_mount_serves_the_current_directory_read_only_at_workspace() {
    let test = TestDir::new();
    let run = test.run(&["mounts", "--no-default-hide"]);
    eqnice!(
        "ROOT        RIGHTS  VISIBILITY    ORIGIN                       PHYSICAL\n\
         /workspace  ro      agent-facing  default (current directory)  [TMP]\n",
        test.redact(&run.stdout)
    );
    let run = test.run(&["mounts", "--allow-write", "--prompt", "--no-default-hide"]);
    eqnice!(
        "## Available File Mounts\n\n| mount | rights | access |\n|---|---|---|\n| /workspace | rw | read, write, create, delete |\n",
        run.stdout
    );
}

/// The name rules follow the mount table, each with its effect, class, origin and exceptions;
/// the agents' prompt says in one sentence what is hidden, never the globs.
#[test]
fn the_name_rules_are_shown_with_their_origin() {
    let test = TestDir::new();
    test.file("vfs.json", r#"{"mounts": ["./:/src"], "hide": ["*.sqlite"]}"#);
    let run = test.run(&["mounts", "--settings", "vfs.json", "--hide", "secrets", "--hide", "**/*.dump"]);
    let rules = run.stdout.split("\n\n").nth(1).unwrap_or_default();
    let lines: Vec<&str> = rules.lines().collect();
    assert_eq!(lines[0], "RULE                 EFFECT     CLASS                     ORIGIN             EXCEPT");
    assert_eq!(
        lines[2],
        ".env.*               hidden     environment files         default            .env.example, .env.sample, .env.template"
    );
    assert_eq!(lines[16], ".git                 read-only  git metadata              default");
    assert_eq!(lines[17], "*.sqlite             hidden     names the operator hides  settings vfs.json");
    assert_eq!(lines[18], "secrets              hidden     names the operator hides  --hide");
    assert_eq!(lines[19], "**/*.dump            hidden     names the operator hides  --hide");
    assert_eq!(lines.len(), 20);
    let run = test.run(&["mounts", "--prompt", "--settings", "vfs.json"]);
    eqnice!(
        "## Available File Mounts\n\n| mount | rights | access |\n|---|---|---|\n| /src | ro | read only |\n\n\
         Secrets (environment files, private keys, credentials, names the operator hides) are hidden: such names do not exist for you and cannot be created; you may read but not change git metadata.\n",
        run.stdout
    );
    // Rules written in a mount string hold in that mount only, anchored at its root.
    test.dir("data");
    let run = test.run(&[
        "mounts",
        "--no-default-hide",
        "--mount",
        "./data:/w:rw;**/*.key:hidden;secrets:hidden;docs/*.md:ro",
    ]);
    let rules = run.stdout.split("\n\n").nth(1).unwrap_or_default();
    eqnice!(
        "RULE          EFFECT     CLASS                               ORIGIN      EXCEPT\n\
         /w/**/*.key   hidden     names the operator hides            --mount /w\n\
         /w/secrets    hidden     names the operator hides            --mount /w\n\
         /w/docs/*.md  read-only  paths the operator keeps read-only  --mount /w\n",
        rules
    );
    let run =
        test.run(&["mounts", "--prompt", "--no-default-hide", "--mount", "./data:/w:rw;secrets:hidden;docs/*.md:ro"]);
    eqnice!(
        "## Available File Mounts\n\n| mount | rights | access |\n|---|---|---|\n| /w | rw | read, write, create, delete |\n\n\
         Secrets (names the operator hides) are hidden: such names do not exist for you and cannot be created; you may read but not change paths the operator keeps read-only.\n",
        run.stdout
    );
    let run = test.run(&["check", "--mount", "./data:/w:rw;**/*.md:rw"]);
    eqnice!(
        "invalid mount `./data:/w:rw;**/*.md:rw`: the glob `**/*.md` cannot grant `rw`: a glob may only be `ro` or `hidden`\n",
        run.stdout
    );
    let run = test.run(&["check", "--hide", "a/../b"]);
    eqnice!(
        "the name rule `a/../b` is not valid: each part is a name, a glob of one name or `**` (no empty, `.` or `..` parts)\n",
        run.stdout
    );
}

/// `**` works in `--hide`, a settings file's `hide` and a mount string's rules alike, as
/// gitignore reads it, except that `notes/**` also hides `notes` itself.
#[test]
fn double_stars_are_taken_wherever_a_glob_is() {
    let test = TestDir::new();
    test.file("proj/notes/a.txt", "secret\n");
    test.file("proj/src/notes/b.txt", "secret\n");
    test.file("proj/a/x/b", "secret\n");
    test.file("proj/deep/secret.txt", "secret\n");
    test.file("proj/docs/sub/guide.md", "# guide\n");
    test.file("vfs.json", r#"{"mounts": ["./proj:/p:rw;docs/**/*.md:ro"], "hide": ["notes/**"]}"#);
    let launch = ["--settings", "vfs.json", "--hide", "**/secret.txt", "--hide", "a/**/b"];
    let call = |tool: &str, arguments: &str| {
        let mut args = vec!["call", tool, arguments];
        args.extend(launch);
        test.run(&args)
    };
    let run = call("search_files", r#"{"path": "/p", "pattern": "*"}"#);
    eqnice!("/p/a\n/p/a/x\n/p/deep\n/p/docs\n/p/docs/sub\n/p/docs/sub/guide.md\n/p/src\n", run.stdout);
    let run = call("list_directory", r#"{"path": "/p/notes"}"#);
    eqnice!("`/p/notes` does not exist\n", run.stdout);
    let run = call("write_file", r#"{"path": "/p/docs/sub/guide.md", "content": "x"}"#);
    eqnice!(
        "cannot write `/p/docs/sub/guide.md`: `/p/docs/sub/guide.md` is read-only (paths the operator keeps read-only)\n",
        run.stdout
    );
    let mut args = vec!["mounts"];
    args.extend(launch);
    let run = test.run(&args);
    let rules = run.stdout.split("\n\n").nth(1).unwrap_or_default();
    let own: Vec<&str> = rules.lines().skip(17).collect();
    assert_eq!(
        own,
        [
            "notes/**             hidden     names the operator hides            settings vfs.json",
            "**/secret.txt        hidden     names the operator hides            --hide",
            "a/**/b               hidden     names the operator hides            --hide",
            "/p/docs/**/*.md      read-only  paths the operator keeps read-only  --mount /p"
        ]
    );
}

/// An override that grants writes where the default `.git` rule holds loosens it there, for
/// that mount only, and says so; a hidden name cannot be loosened.
#[test]
fn a_mount_string_loosens_the_git_rule_for_its_mount() {
    let test = TestDir::new();
    test.file("proj/.git/HEAD", "ref: refs/heads/main\n");
    test.file("other/.git/HEAD", "ref: refs/heads/main\n");
    let launch = ["--mount", "./proj:/p:rw;.git:rw", "--mount", "./other:/o:rw"];
    let mut args = vec!["mounts"];
    args.extend(launch);
    let run = test.run(&args);
    let mut parts = run.stdout.split("\n\n");
    eqnice!(
        "ROOT     RIGHTS  VISIBILITY    ORIGIN                          PHYSICAL\n\
         /o       rw      agent-facing  --mount                         [TMP]/other\n\
         /p       rw      agent-facing  --mount                         [TMP]/proj\n\
         /p/.git  rw      agent-facing  override of /p, loosens `.git`\n",
        test.redact(&format!("{}\n", parts.next().unwrap_or_default()))
    );
    let rules: Vec<&str> = parts.next().unwrap_or_default().lines().skip(16).collect();
    assert_eq!(
        rules,
        [
            ".git                 read-only      git metadata       default",
            "/p/.git              writable (rw)  git metadata       loosened by the mount string of /p"
        ]
    );
    let write = |path: &str| {
        let arguments = format!(r#"{{"path": "{path}", "content": "ref: refs/heads/topic\n", "overwrite": true}}"#);
        let mut args = vec!["call", "write_file", arguments.as_str(), "--no-read-before-edit"];
        args.extend(launch);
        test.run(&args)
    };
    let run = write("/p/.git/HEAD");
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("proj/.git/HEAD")).unwrap(), "ref: refs/heads/topic\n");
    let run = write("/o/.git/HEAD");
    eqnice!("cannot write `/o/.git/HEAD`: `/o/.git` is read-only (git metadata)\n", run.stdout);
    let mut args = vec!["mounts", "--prompt"];
    args.extend(launch);
    let run = test.run(&args);
    assert!(
        run.stdout.ends_with("you may read but not change git metadata (except in `/p/.git`).\n"),
        "{}",
        run.stdout
    );
    let run = test.run(&["serve", "--mount", "./proj:/p:rw;.ssh:rw"]);
    eqnice!(
        "error: the override `.ssh:rw` of mount `/p` lies inside `/p/.ssh`, which the name rule `.ssh` (default) hides: a hidden name cannot be loosened\n\n\
         hint: drop the override: hidden names stay hidden in every mount, and only a read-only rule (the default `.git`) can be loosened for one; `--no-default-hide` turns every default rule off\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
    let run = test.run(&["check", "--mount", "./proj:/p:rw;deploy/secrets:rw", "--hide", "secrets"]);
    eqnice!(
        "the override `deploy/secrets:rw` of mount `/p` lies inside `/p/deploy/secrets`, which the name rule `secrets` (--hide) hides: a hidden name cannot be loosened\n",
        run.stdout
    );
}

#[test]
fn the_operator_table_shows_physical_paths_rights_visibility_and_origin() {
    let test = TestDir::new();
    test.dir("data/vendor");
    test.dir("out");
    let run =
        test.run(&["mounts", "--mount", "data:/src:ro;vendor:rw", "--mount", "./out:/output:rw", "--llm-log", "logs"]);
    let run = crate::util::Run { stdout: run.stdout.split("\n\n").next().unwrap_or_default().to_owned() + "\n", ..run };
    eqnice!(
        "ROOT         RIGHTS  VISIBILITY    ORIGIN              PHYSICAL\n\
         /llm-logs    rw      internal      runner (--llm-log)  [TMP]/logs\n\
         /output      rw      agent-facing  --mount             [TMP]/out\n\
         /src         ro      agent-facing  --mount             [TMP]/data\n\
         /src/vendor  rw      agent-facing  override of /src\n",
        test.redact(&run.stdout)
    );
}

#[test]
fn settings_paths_resolve_against_the_settings_directory() {
    let test = TestDir::new();
    test.file("conf/data/a.txt", "from settings\n");
    test.file("conf/vfs.json", r#"{"mounts": ["./data:/src"], "internal_mounts": []}"#);
    let run = test.run(&["call", "read_text_file", r#"{"path": "/src/a.txt"}"#, "--settings", "conf/vfs.json"]);
    eqnice!("from settings\n", run.stdout);
    assert_eq!(run.code, 0);
}

#[test]
fn a_mount_flag_replaces_the_settings_entries_of_its_root() {
    let test = TestDir::new();
    test.file("one/a.txt", "one\n");
    test.file("two/a.txt", "two\n");
    test.file("flag/a.txt", "flag\n");
    test.file("vfs.json", &format!(r#"{{"mounts": ["{ID_A}|one:/src", "{ID_B}|two:/src"]}}"#));
    let run = test.run(&[
        "call",
        "read_text_file",
        r#"{"path": "/src/a.txt"}"#,
        "--settings",
        "vfs.json",
        "--mount",
        "flag:/src",
    ]);
    eqnice!("flag\n", run.stdout);
}

#[test]
fn a_root_declared_twice_needs_a_selection() {
    let test = TestDir::new();
    test.file("one/a.txt", "one\n");
    test.file("two/a.txt", "two\n");
    test.file("vfs.json", &format!(r#"{{"mounts": ["{ID_A}|one:/src", "{ID_B}|two:/src"]}}"#));
    let run = test.run(&["serve", "--settings", "vfs.json"]);
    eqnice!(
        format!(
            "error: the root `/src` is declared 2 times in the settings and nothing selects one: pass `--mount-id <ULID>` with one of `{ID_A}`, `{ID_B}`, or `--mount` for `/src`\n"
        ),
        run.stderr
    );
    assert_eq!(run.code, 2);
    // Entries without ids: the fix cannot be an id they do not carry (it offered "(no id)").
    test.file("plain.json", r#"{"mounts": ["one:/src"], "internal_mounts": ["two:/src"]}"#);
    let run = test.run(&["check", "--settings", "plain.json"]);
    eqnice!(
        "the root `/src` is declared 2 times in the settings and nothing selects one: pass `--mount` for `/src`, or give the entries ids (`<ULID>|` before each) and pass `--mount-id <ULID>`\n",
        run.stdout
    );
    assert_eq!(run.code, 2);
    let run = test.run(&[
        "call",
        "read_text_file",
        r#"{"path": "/src/a.txt"}"#,
        "--settings",
        "vfs.json",
        "--mount-id",
        ID_B,
    ]);
    eqnice!("two\n", run.stdout);
}

#[test]
fn unknown_and_duplicate_ids_are_refused() {
    let test = TestDir::new();
    test.dir("one");
    test.file("vfs.json", &format!(r#"{{"mounts": ["{ID_A}|one:/src"]}}"#));
    let run = test.run(&["check", "--settings", "vfs.json", "--mount-id", ID_B]);
    eqnice!(
        format!(
            "--mount-id names the mount id `{ID_B}`, but no settings entry carries it: check the id against the settings file's `<ulid>|` prefixes\n"
        ),
        run.stdout
    );
    test.file("dup.json", &format!(r#"{{"mounts": ["{ID_A}|one:/src", "{ID_A}|one:/other"]}}"#));
    let run = test.run(&["check", "--settings", "dup.json"]);
    eqnice!(format!("two settings entries carry the mount id `{ID_A}`: give each entry its own ULID\n"), run.stdout);
}

#[test]
fn a_bad_settings_file_is_one_line() {
    let test = TestDir::new();
    test.file("vfs.json", r#"{"mount": []}"#);
    let run = test.run(&["check", "--settings", "vfs.json"]);
    eqnice!(
        "invalid settings file `vfs.json`: unknown field `mount`, expected one of `mounts`, `internal_mounts`, `hide`, \
         `journal`, `journal_max_bytes` at line 1 column 8\n",
        run.stdout
    );
    let run = test.run(&["check", "--settings", "missing.json"]);
    eqnice!("cannot read settings file `missing.json`: no such file\n", run.stdout);
    // Anything but an object is said so (before, `[1]` was "expected a sequence").
    for not_an_object in ["[1]", "[[[[", "\"x\"", ""] {
        test.file("vfs.json", not_an_object);
        let run = test.run(&["check", "--settings", "vfs.json"]);
        eqnice!(
            "invalid settings file `vfs.json`: the settings file must hold one JSON object, like {\"mounts\": \
             [\"./src:/src:ro\"]}\n",
            run.stdout
        );
        assert_eq!(run.code, 2);
    }
    // An empty journal path would name the settings file's own directory.
    test.file("cfg/vfs.json", r#"{"journal": ""}"#);
    let run = test.run(&["check", "--settings", "cfg/vfs.json"]);
    eqnice!(
        "invalid settings file `cfg/vfs.json`: journal: the path is empty; name the journal's directory, like \
         \"journal\": \"./journal\"\n",
        run.stdout
    );
    assert!(!test.path().join("cfg/journal.jsonl").exists());
}

#[test]
fn a_crew_directory_is_mounted_at_crew_and_read_through_the_vfs() {
    let test = TestDir::new();
    test.file("src/main.rs", "fn main() {}\n");
    test.file("crews/review/crew.yaml", "name: review\nagents: [reader]\nmounts:\n  - /src\n");
    let run = test.run(&["mounts", "--crew", "crews/review", "--mount", "src:/src", "--no-default-hide"]);
    eqnice!(
        "ROOT   RIGHTS  VISIBILITY    ORIGIN           PHYSICAL\n\
         /crew  ro      agent-facing  runner (--crew)  [TMP]/crews/review\n\
         /src   ro      agent-facing  --mount          [TMP]/src\n",
        test.redact(&run.stdout)
    );
    let run = test.run(&[
        "call",
        "read_text_file",
        r#"{"path": "/crew/crew.yaml", "head": 1}"#,
        "--crew",
        "crews/review",
        "--mount",
        "src:/src",
    ]);
    eqnice!("name: review\n[more lines follow; read on with offset: 2]\n", run.stdout);
}

#[test]
fn a_single_file_crew_is_addressed_under_crew() {
    let test = TestDir::new();
    test.file("team.yaml", "mounts: [/workspace]\n");
    let run = test.run(&["call", "list_directory", r#"{"path": "/crew"}"#, "--crew", "team.yaml"]);
    assert!(run.stdout.contains("[FILE] team.yaml"), "{}", run.stdout);
    assert_eq!(run.code, 0);
}

#[test]
fn crew_refusals_name_the_fix() {
    let test = TestDir::new();
    test.dir("one");
    test.file("vfs.json", &format!(r#"{{"mounts": ["{ID_A}|one:/src", "{ID_B}|one:/data"]}}"#));
    test.file("needs.yaml", "mounts: [/output]\n");
    let run = test.run(&["check", "--crew", "needs.yaml", "--settings", "vfs.json"]);
    eqnice!(
        "the crew needs `/output`, but nothing provides it: pass `--mount <dir>:/output`, or add an entry for `/output` to the settings file\n",
        run.stdout
    );
    test.file("other.yaml", &format!("mounts: ['{ID_B}|/src']\n"));
    let run = test.run(&["check", "--crew", "other.yaml", "--settings", "vfs.json"]);
    eqnice!(
        format!(
            "the crew lists `{ID_B}|/src`, but the settings entry `{ID_B}` mounts `/data`: fix the root in the crew's `mounts:` block or the id\n"
        ),
        run.stdout
    );
    test.file("bad.yaml", "mounts: ['src']\n");
    let run = test.run(&["serve", "--crew", "bad.yaml", "--settings", "vfs.json"]);
    eqnice!(
        "error: invalid crew mount `src` in `bad.yaml`: a virtual root starts with `/`, like `/src`\n\n\
         hint: a crew's `mounts:` block is a list of `/root` or `<ulid>|/root`, like `mounts: [\"/src\", \"01J9Z3K4M5N6P7Q8R9S0T1V2W3|/output\"]`\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
    let run = test.run(&["check", "--crew", "nowhere"]);
    eqnice!("cannot read crew `nowhere`: no such file or directory\n", run.stdout);
}

/// A crew that lists a reserved root learns what the runner serves there, and is not told to
/// mount it (a mount on a reserved root is refused too).
#[test]
fn a_crew_cannot_name_a_reserved_root() {
    let test = TestDir::new();
    test.file("crews/a/crew.yaml", "mounts: [/workspace, /crew]\n");
    let run = test.run(&["serve", "--crew", "crews/a"]);
    eqnice!(
        "error: invalid crew mount `/crew` in `crews/a/crew.yaml`: `/crew` is where the runner serves the crew's own directory, read-only; a crew cannot name a reserved root in `mounts:`\n\n\
         hint: drop the entry: every crew sees its own directory at `/crew` without listing it\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
    test.file("crews/b/crew.yaml", "mounts: [/llm-logs]\n");
    let run = test.run(&["check", "--crew", "crews/b", "--llm-log", "logs"]);
    eqnice!(
        "invalid crew mount `/llm-logs` in `crews/b/crew.yaml`: `/llm-logs` is the internal exchange log (`--llm-log`), which agents never see; a crew cannot name a reserved root in `mounts:`\n",
        run.stdout
    );
    assert_eq!(run.code, 2);
}

/// A crew whose directory is also served writable could rewrite its own `mounts:` block and be
/// served, at its next start, a root the operator gave only to others: refused by `check`,
/// `serve` and the daemon alike; served read-only, it is fine.
#[test]
fn a_crew_directory_served_writable_is_refused() {
    let test = TestDir::new();
    test.file("crews/a/crew.yaml", "mounts: [/work]\n");
    let line = "the crew file `crews/a/crew.yaml` lies inside `/work` (`[TMP]/crews/a`) at `/work/crew.yaml`, which is mounted rw; a crew could rewrite its own `mounts:` block for its next start: mount `/work` read-only, or move the crew directory out of it";
    let run = test.run(&["check", "--mount", "./crews/a:/work:rw", "--crew", "crews/a"]);
    eqnice!(format!("{line}\n"), test.redact(&run.stdout));
    assert_eq!(run.code, 2);
    let run = test.run(&["serve", "--mount", "./crews/a:/work:rw", "--crew", "crews/a"]);
    eqnice!(format!("error: {line}\n"), test.redact(&run.stderr));
    assert_eq!(run.code, 2);
    test.file("tokens", "a 0123456789abcdef0123456789abcdef\n");
    let daemon = [
        "check",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        "tokens",
        "--mount",
        "./crews/a:/work:rw",
        "--crew",
        "crews/a",
    ];
    let run = test.run(&daemon);
    eqnice!(format!("crew `a`: {line}\n"), test.redact(&run.stdout));
    assert_eq!(run.code, 2);
    let run = test.run(&["check", "--mount", "./crews/a:/work:ro", "--crew", "crews/a"]);
    eqnice!("OK\n", run.stdout);
    assert_eq!(run.code, 0);
}

/// Why a writable mount that holds the crew directory is refused even though the directory,
/// nested in it, stays read-only in that launch: a crew path that runs through the mount (a
/// link in it) can be replaced by a directory an agent writes, and the next start reads that.
#[test]
fn a_crew_planted_inside_a_writable_mount_is_refused_at_the_next_start() {
    let test = TestDir::new();
    test.file("crews/a/crew.yaml", "mounts: [/work]\n");
    test.dir("secret");
    test.dir("work");
    std::os::unix::fs::symlink("../crews/a", test.path().join("work/link")).unwrap();
    let launch = ["--mount", "./work:/work:rw", "--mount", "./secret:/secret", "--crew", "work/link"];
    let run = test.run(&[&["check"], &launch[..]].concat());
    eqnice!("OK\n", run.stdout);
    let run = test.run(&[&["call", "delete_file", r#"{"path": "/work/link"}"#], &launch[..]].concat());
    eqnice!("deleted link `/work/link`\n", run.stdout);
    // The same session goes on writing; each `vfs call` is a launch of its own, and this one
    // can no longer name the crew it just unlinked.
    let plant = r#"{"path": "/work/link/crew.yaml", "content": "mounts: [/work, /secret]\n"}"#;
    let run = test.run(&["call", "write_file", plant, "--mount", "./work:/work:rw"]);
    assert!(run.stdout.starts_with("created `/work/link/crew.yaml` (25 bytes"), "{}", run.stdout);
    let run = test.run(&[&["check"], &launch[..]].concat());
    eqnice!(
        "the crew file `work/link/crew.yaml` lies inside `/work` (`[TMP]/work`) at `/work/link/crew.yaml`, which is mounted rw; a crew could rewrite its own `mounts:` block for its next start: mount `/work` read-only, or move the crew directory out of it\n",
        test.redact(&run.stdout)
    );
    assert_eq!(run.code, 2);
}

/// A 240 KB crew file of nested brackets used to keep a core busy for about 90 s before the
/// YAML parser refused it; the nesting bound refuses it in one pass, before parsing.
#[test]
fn a_deeply_nested_crew_file_is_refused_before_parsing() {
    let test = TestDir::new();
    test.file("crews/deep/crew.yaml", &format!("name: deep\nmounts: {}", "[".repeat(240_000)));
    let run = test.run(&["check", "--crew", "crews/deep"]);
    eqnice!(
        "invalid crew `crews/deep/crew.yaml`: line 2 nests flow collections (`[…]`, `{…}`) more than 64 deep, the most a crew file may; write that part as indented YAML, or nest it less\n",
        run.stdout
    );
    assert_eq!(run.code, 2);
    let run = test.run(&["serve", "--crew", "crews/deep"]);
    eqnice!(
        "error: invalid crew `crews/deep/crew.yaml`: line 2 nests flow collections (`[…]`, `{…}`) more than 64 deep, the most a crew file may; write that part as indented YAML, or nest it less\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
    // The crew file is read through the VFS with its read cap: a larger file is refused unread.
    test.file("big.yaml", &format!("mounts: [/workspace]\nnotes: '{}'\n", "x".repeat(300_000)));
    let run = test.run(&["check", "--crew", "big.yaml"]);
    eqnice!("cannot read crew `big.yaml`: the crew file is larger than 262144 bytes, the most it may be\n", run.stdout);
}

/// The settings file is JSON read into a fixed shape: nesting is refused at the first bracket
/// where a string belongs, and `serde_json` bounds any nesting at 128 levels in linear time.
#[test]
fn a_deeply_nested_settings_file_is_refused_at_its_first_bracket() {
    let test = TestDir::new();
    test.file("vfs.json", &format!(r#"{{"mounts": {}"#, "[".repeat(240_000)));
    let run = test.run(&["check", "--settings", "vfs.json"]);
    eqnice!(
        "invalid settings file `vfs.json`: invalid type: sequence, expected a string at line 1 column 12\n",
        run.stdout
    );
    assert_eq!(run.code, 2);
}

#[test]
fn the_crew_id_selects_among_entries_of_one_root() {
    let test = TestDir::new();
    test.file("one/a.txt", "one\n");
    test.file("two/a.txt", "two\n");
    test.file("vfs.json", &format!(r#"{{"mounts": ["{ID_A}|one:/src", "{ID_B}|two:/src"]}}"#));
    test.file("crew/crew.yaml", &format!("mounts:\n  - {ID_B}|/src\nunknown_key: kept\n"));
    let run =
        test.run(&["call", "read_text_file", r#"{"path": "/src/a.txt"}"#, "--settings", "vfs.json", "--crew", "crew"]);
    eqnice!("two\n", run.stdout);
    // `--mount-id` comes before the crew's id.
    let run = test.run(&[
        "call",
        "read_text_file",
        r#"{"path": "/src/a.txt"}"#,
        "--settings",
        "vfs.json",
        "--crew",
        "crew",
        "--mount-id",
        ID_A,
    ]);
    eqnice!("one\n", run.stdout);
}

#[test]
fn the_log_directory_is_created_if_missing() {
    let test = TestDir::new();
    let run = test.run(&["call", "list_mounts", "{}", "--llm-log", "deep/logs"]);
    eqnice!("/workspace (ro)\n", run.stdout);
    let entries: Vec<_> = std::fs::read_dir(test.path().join("deep/logs")).unwrap().collect();
    assert_eq!(entries.len(), 1);
}

#[test]
fn help_has_examples_and_exit_codes() {
    let test = TestDir::new();
    let run = test.run(&["--help"]);
    assert!(run.stdout.contains("Examples:\n  vfs serve\n"), "{}", run.stdout);
    assert!(run.stdout.contains("Exit codes:\n  0  success\n"), "{}", run.stdout);
    assert_eq!(run.code, 0);
}

/// A launch from a directory removed meanwhile is refused like any launch (exit 2), with a
/// hint; it exited 1.
#[test]
fn a_current_directory_that_is_gone_is_a_refused_launch() {
    let test = TestDir::new();
    test.dir("gone");
    let data = test.dir("data");
    let output = std::process::Command::new("sh")
        .current_dir(test.path())
        .args(["-c", r#"cd gone && rmdir ../gone && exec "$@""#, "sh", env!("CARGO_BIN_EXE_vfs"), "mounts", "--mount"])
        .arg(format!("{}:/src", data.display()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "error: cannot determine the current directory: No such file or directory (os error 2)\n\nhint: run vfs from a directory that exists (relative paths resolve against it)\n"
    );
    assert_eq!(output.status.code(), Some(2));
}

/// A settings file that begins with a byte order mark is read (it was "expected value at line 1
/// column 1").
#[test]
fn a_settings_file_with_a_byte_order_mark_is_read() {
    let test = TestDir::new();
    test.file("data/a.txt", "a\n");
    test.file("bom.json", "\u{feff}{\"mounts\": [\"data:/src\"]}");
    let run = test.run(&["call", "read_text_file", r#"{"path": "/src/a.txt"}"#, "--settings", "bom.json"]);
    eqnice!("a\n", run.stdout);
    assert_eq!(run.code, 0);
}
