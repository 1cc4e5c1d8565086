use crate::eqnice;
use crate::util::TestDir;

#[test]
fn an_internal_root_and_an_unknown_root_give_byte_identical_output() {
    let test = TestDir::new();
    test.dir("data");
    let launch = ["--mount", "data:/src", "--llm-log", "logs"];
    let ask = |path: &str| {
        let arguments = format!(r#"{{"path": "{path}"}}"#);
        let mut args = vec!["call", "read_text_file", arguments.as_str()];
        args.extend(launch);
        test.run(&args)
    };
    let internal = ask("/llm-logs/x");
    let unknown = ask("/no-such-root/x");
    eqnice!(unknown.stdout, internal.stdout);
    eqnice!(unknown.stderr, internal.stderr);
    assert_eq!(unknown.code, internal.code);
    eqnice!("no mount serves this path; available mounts: `/src` (ro)\n", internal.stdout);
    assert_eq!(internal.code, 1);
    for tool in ["list_directory", "get_file_info", "directory_tree"] {
        let mut internal_args = vec!["call", tool, r#"{"path": "/llm-logs"}"#];
        internal_args.extend(launch);
        let mut unknown_args = vec!["call", tool, r#"{"path": "/no-such-root"}"#];
        unknown_args.extend(launch);
        eqnice!(test.run(&unknown_args).stdout, test.run(&internal_args).stdout);
    }
}

#[test]
fn the_root_listing_does_not_show_internal_mounts() {
    let test = TestDir::new();
    test.dir("data");
    let run = test.run(&["call", "list_directory", r#"{"path": "/"}"#, "--mount", "data:/src", "--llm-log", "logs"]);
    eqnice!("[DIR] src\n", run.stdout);
}

#[test]
fn read_text_file_prints_the_text() {
    let test = TestDir::new();
    test.file("data/notes.txt", "one\ntwo\nthree\n");
    let run = test.run(&["call", "read_text_file", r#"{"path": "/src/notes.txt", "head": 2}"#, "--mount", "data:/src"]);
    test.assert_no_leak(&run.stdout);
    eqnice!("one\ntwo\n[more lines follow; read on with offset: 3]\n", run.stdout);
    assert_eq!(run.code, 0);
}

#[test]
fn a_write_to_a_read_only_mount_names_the_rights() {
    let test = TestDir::new();
    test.dir("data");
    test.dir("out");
    let run = test.run(&[
        "call",
        "write_file",
        r#"{"path": "/src/new.txt", "content": "x"}"#,
        "--mount",
        "data:/src:ro",
        "--mount",
        "out:/output:rw",
    ]);
    eqnice!("cannot write `/src/new.txt`: `/src` is mounted ro; mounts that grant write: `/output` (rw)\n", run.stdout);
    assert_eq!(run.code, 1);
}

#[test]
fn write_then_edit_then_read() {
    let test = TestDir::new();
    test.dir("out");
    let launch = ["--mount", "out:/output:rw"];
    let call = |tool: &str, arguments: &str| {
        let mut args = vec!["call", tool, arguments];
        args.extend(launch);
        test.run(&args)
    };
    let run = call("write_file", r#"{"path": "/output/a/b.txt", "content": "hello world\n"}"#);
    assert_eq!(run.code, 0, "{run:?}");
    test.assert_no_leak(&run.stdout);
    // Each `vfs call` is a session of its own: this one has not read the file.
    let edit = r#"{"path": "/output/a/b.txt", "edits": [{"oldText": "world", "newText": "there"}]}"#;
    let run = call("edit_file", edit);
    eqnice!(
        "read `/output/a/b.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports\n",
        run.stdout
    );
    assert_eq!(run.code, 1);
    let run = test.run(&["call", "edit_file", edit, "--mount", "out:/output:rw", "--no-read-before-edit"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("-hello world\n+hello there\n"), "{}", run.stdout);
    test.assert_no_leak(&run.stdout);
    eqnice!("hello there\n", call("read_text_file", r#"{"path": "/output/a/b.txt"}"#).stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("out/a/b.txt")).unwrap(), "hello there\n");
}

#[test]
fn malformed_calls_are_refused_with_a_hint() {
    let test = TestDir::new();
    let run = test.run(&["call", "no_such_tool"]);
    eqnice!(
        "error: unknown tool `no_such_tool`; list the tools to see which ones this server offers\n\nhint: `vfs tools` lists the tools and their arguments\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
    // Arguments that do not fit the schema are the tool's error, for the model to read.
    let run = test.run(&["call", "read_text_file", r#"{"path": 3}"#]);
    eqnice!(
        "invalid arguments for `read_text_file`: `path` must be a string, not the number 3; write it like `\"path\": \"…\"`\n",
        run.stdout
    );
    assert_eq!(run.code, 1);
    let run = test.run(&["call", "read_text_file", "[]"]);
    eqnice!(
        "error: the arguments must be a JSON object\n\nhint: pass one JSON object, like '{\"path\": \"/workspace/README.md\"}'\n",
        run.stderr
    );
}

#[test]
fn write_tools_are_not_offered_without_a_writable_mount() {
    let test = TestDir::new();
    let run = test.run(&["call", "write_file", r#"{"path": "/workspace/x", "content": ""}"#]);
    eqnice!(
        "error: unknown tool `write_file`; list the tools to see which ones this server offers\n\nhint: `vfs tools` lists the tools and their arguments\n",
        run.stderr
    );
    let names = |run: &crate::util::Run| -> Vec<String> {
        let tools: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        tools.as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap().to_owned()).collect()
    };
    // Without options: every tool, `run_command` (listed only with --allow-run) and the
    // journal's included.
    assert_eq!(names(&test.run(&["tools"])).len(), 20);
    assert_eq!(names(&test.run(&["tools", "--allow-write"])).len(), 17);
    assert_eq!(
        names(&test.run(&["tools", "--mount", ".:/src"])),
        [
            "list_mounts",
            "read_text_file",
            "read_multiple_files",
            "read_media_file",
            "list_directory",
            "directory_tree",
            "search_files",
            "grep",
            "get_file_info",
            "read_file",
            "list_directory_with_sizes",
            "list_allowed_directories"
        ]
    );
}

#[test]
fn the_exchange_log_gets_one_line_per_call() {
    let test = TestDir::new();
    test.file("data/a.txt", "a\n");
    let launch = ["--mount", "data:/src", "--llm-log", "logs"];
    let mut args = vec!["call", "read_text_file", r#"{"path": "/src/a.txt"}"#];
    args.extend(launch);
    assert_eq!(test.run(&args).code, 0);
    let files: Vec<_> =
        std::fs::read_dir(test.path().join("logs")).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("exchanges-"), "{name}");
    assert_eq!(files[0].extension().unwrap(), "jsonl");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1);
    let record: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(record["tool"], "read_text_file");
    assert_eq!(record["arguments"]["path"], "/src/a.txt");
    assert_eq!(record["result"]["isError"], false);
    assert_eq!(record["result"]["text"], "a\n");
    assert!(record["time"].as_str().unwrap().ends_with('Z'));
    assert!(record["durationMs"].is_number());
    // The call's id: milliseconds since the epoch, then the process's tag and its counter
    // (what its changes carry).
    let call = record["call"].as_str().unwrap();
    let (millis, counter) = call.split_once('-').unwrap();
    assert!(millis.len() == 13 && millis.bytes().all(|byte| byte.is_ascii_digit()), "{call}");
    assert!(counter.len() == 13 && counter.bytes().all(|byte| byte.is_ascii_hexdigit()), "{call}");
}

#[test]
fn move_and_delete_honour_expected_version() {
    let test = TestDir::new();
    test.file("out/a.txt", "alpha\n");
    let launch = ["--mount", "out:/output:rw"];
    let run = |tool: &str, arguments: &str| {
        let mut args = vec!["call", tool, arguments];
        args.extend(launch);
        test.run(&args)
    };
    let stale_move =
        run("move_file", r#"{"source": "/output/a.txt", "destination": "/output/b.txt", "expectedVersion": "0"}"#);
    assert_eq!(stale_move.code, 1);
    assert!(
        stale_move.stdout.starts_with("`/output/a.txt` changed since you read it: its version is now `"),
        "{}",
        stale_move.stdout
    );
    let stale_delete = run("delete_file", r#"{"path": "/output/a.txt", "expectedVersion": "0"}"#);
    assert_eq!(stale_delete.code, 1);
    let info = run("get_file_info", r#"{"path": "/output/a.txt"}"#);
    let version = info.stdout.lines().find_map(|line| line.strip_prefix("version: ")).unwrap().to_owned();
    let moved = run(
        "move_file",
        &format!(r#"{{"source": "/output/a.txt", "destination": "/output/b.txt", "expectedVersion": "{version}"}}"#),
    );
    eqnice!("moved `/output/a.txt` to `/output/b.txt`\n", moved.stdout);
    let deleted = run("delete_file", &format!(r#"{{"path": "/output/b.txt", "expectedVersion": "{version}"}}"#));
    eqnice!("deleted file `/output/b.txt`\n", deleted.stdout);
}

/// `--call-timeout` ends a runaway call with a tool error that says what to narrow; out of
/// range, the option is refused.
#[test]
#[expect(clippy::disallowed_types, reason = "fixture: a sparse file is made on disk")]
fn the_call_timeout_ends_a_long_call_with_a_hint() {
    let test = TestDir::new();
    let path = test.file("data/slow.txt", "first\n");
    let file = std::fs::OpenOptions::new().append(true).open(&path).expect("open the fixture");
    // Large enough that no machine reads it within the budget (2 GiB of a hole took 0.5 s).
    file.set_len(64 * 1024 * 1024 * 1024).expect("make a hole");
    let arguments = r#"{"path": "/src/slow.txt", "offset": 3}"#;
    let run = test.run(&["call", "read_text_file", arguments, "--mount", "data:/src", "--call-timeout", "1"]);
    eqnice!(
        "`read_text_file` ran past its 1 s time budget and was stopped; read a window nearer the start (`head`, or `offset` and `limit`)\n",
        run.stdout
    );
    assert_eq!(run.code, 1);
    let run = test.run(&["call", "list_mounts", "--call-timeout", "0"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("invalid value '0' for '--call-timeout <SECONDS>'"), "{}", run.stderr);
}

/// The refusal of a look-alike repository reaches the agent as the library words it, through
/// the tools, and `--no-default-hide` lifts it (`docs/mounts.md`, "What git would run").
#[test]
fn an_agent_cannot_complete_a_repository_under_another_name() {
    let test = TestDir::new();
    test.dir("proj/x/objects");
    test.dir("proj/x/refs");
    let write = |extra: &[&str]| {
        let arguments = r#"{"path": "/p/x/HEAD", "content": "ref: refs/heads/main\n"}"#;
        let mut args = vec!["call", "write_file", arguments, "--mount", "./proj:/p:rw"];
        args.extend(extra);
        test.run(&args)
    };
    let run = write(&[]);
    eqnice!(
        "cannot write `/p/x/HEAD`: beside `objects` it would make `/p/x` look like a git repository (git metadata)\n",
        run.stdout
    );
    assert_eq!(run.code, 1);
    let run = write(&["--no-default-hide"]);
    assert_eq!(run.code, 0, "{}", run.stdout);
}
