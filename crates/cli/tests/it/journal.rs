use std::os::unix::fs::PermissionsExt as _;

use crate::eqnice;
use crate::util::{Run, TestDir, signal};

const LAUNCH: [&str; 5] = ["--mount", "./w:/w:rw", "--journal", "j", "--no-read-before-edit"];

/// One tool call with the journal on (each a process of its own: a restart between every
/// change and its undo).
fn call(test: &TestDir, tool: &str, arguments: &str) -> Run {
    let mut args = vec!["call", tool, arguments];
    args.extend(LAUNCH);
    let run = test.run(&args);
    assert_eq!(run.code, 0, "{tool} {arguments}: {run:?}");
    run
}

fn undo(test: &TestDir, selection: &[&str]) -> Run {
    let mut args = vec!["undo"];
    args.extend(selection);
    args.extend(LAUNCH);
    test.run(&args)
}

/// `vfs journal list --json`, parsed.
fn list(test: &TestDir) -> Vec<serde_json::Value> {
    let run = test.run(&["journal", "list", "--journal", "j", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    serde_json::from_str(&run.stdout).expect("a JSON array")
}

/// `operation state paths` of each entry, newest first.
fn summary(test: &TestDir) -> Vec<String> {
    list(test)
        .iter()
        .map(|entry| {
            let paths: Vec<&str> =
                entry["paths"].as_array().unwrap().iter().map(|path| path.as_str().unwrap()).collect();
            format!("{} {} {}", entry["operation"].as_str().unwrap(), entry["state"].as_str().unwrap(), paths.join(" "))
        })
        .collect()
}

fn mode(test: &TestDir, relative: &str) -> u32 {
    std::fs::metadata(test.path().join(relative)).unwrap().permissions().mode() & 0o7777
}

#[test]
fn every_operation_is_undone_exactly_binary_content_and_mode_too() {
    let test = TestDir::new();
    let binary = [0u8, 159, 146, 150, 255, b'\n', 0];
    test.dir("w");
    std::fs::write(test.path().join("w/data.bin"), binary).unwrap();
    std::fs::set_permissions(test.path().join("w/data.bin"), std::fs::Permissions::from_mode(0o640)).unwrap();
    test.file("w/edit.txt", "alpha\nbeta\n");
    test.file("w/move.txt", "moved\n");
    test.file("w/tree/a.txt", "a\n");
    test.file("w/tree/sub/b.txt", "b\n");
    // Programs: an agent's edit leaves a file without execute bits; the undo gives them back.
    std::fs::set_permissions(test.path().join("w/edit.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(test.path().join("w/tree/sub/b.txt"), std::fs::Permissions::from_mode(0o750)).unwrap();

    call(&test, "write_file", r#"{"path": "/w/data.bin", "content": "text now\n", "overwrite": true}"#);
    call(&test, "write_file", r#"{"path": "/w/new/deep/n.txt", "content": "new\n"}"#);
    call(&test, "edit_file", r#"{"path": "/w/edit.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}"#);
    assert_eq!(mode(&test, "w/edit.txt"), 0o644);
    call(&test, "move_file", r#"{"source": "/w/move.txt", "destination": "/w/moved.txt"}"#);
    call(&test, "delete_file", r#"{"path": "/w/tree", "recursive": true}"#);
    call(&test, "create_directory", r#"{"path": "/w/made"}"#);
    assert_eq!(
        summary(&test),
        [
            "make_directory undoable /w/made",
            "remove undoable /w/tree",
            "move undoable /w/move.txt /w/moved.txt",
            "edit undoable /w/edit.txt",
            "write undoable /w/new/deep/n.txt",
            "write undoable /w/data.bin",
        ]
    );

    let run = undo(&test, &["--last", "6"]);
    eqnice!(
        "removed /w/made\nrestored /w/tree\nrestored /w/move.txt\nrestored /w/edit.txt\nremoved /w/new/deep/n.txt\nrestored /w/data.bin\n",
        run.stdout
    );
    eqnice!("", run.stderr);
    assert_eq!(run.code, 0);
    assert_eq!(std::fs::read(test.path().join("w/data.bin")).unwrap(), binary);
    assert_eq!(mode(&test, "w/data.bin"), 0o640);
    assert_eq!(std::fs::read_to_string(test.path().join("w/edit.txt")).unwrap(), "alpha\nbeta\n");
    assert_eq!(mode(&test, "w/edit.txt"), 0o755);
    assert_eq!(mode(&test, "w/tree/sub/b.txt"), 0o750);
    assert_eq!(std::fs::read_to_string(test.path().join("w/move.txt")).unwrap(), "moved\n");
    assert_eq!(std::fs::read_to_string(test.path().join("w/tree/a.txt")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(test.path().join("w/tree/sub/b.txt")).unwrap(), "b\n");
    let mut names: Vec<String> = std::fs::read_dir(test.path().join("w"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // The create's parents went with it; the move's destination and the made directory too.
    assert_eq!(names, ["data.bin", "edit.txt", "move.txt", "tree"]);
    let states = summary(&test);
    assert_eq!(states.len(), 12);
    assert!(states[6..].iter().all(|state| state.contains(" undone ")), "{states:?}");
    assert!(states[..6].iter().all(|state| state.starts_with("undo undoable ")), "{states:?}");
    eqnice!("nothing to undo\n", undo(&test, &["--last", "1"]).stdout);
}

/// `w/a.txt` (`one`) and `w/b.txt` (`bee`), each overwritten by a journaled call.
fn two_overwrites() -> TestDir {
    let test = TestDir::new();
    test.file("w/a.txt", "one\n");
    test.file("w/b.txt", "bee\n");
    call(&test, "write_file", r#"{"path": "/w/a.txt", "content": "two\n", "overwrite": true}"#);
    call(&test, "write_file", r#"{"path": "/w/b.txt", "content": "bee two\n", "overwrite": true}"#);
    test
}

#[test]
fn a_path_changed_since_is_a_conflict_left_as_it_is_and_the_rest_is_undone() {
    let test = two_overwrites();
    std::fs::write(test.path().join("w/a.txt"), "outside\n").unwrap();
    let run = undo(&test, &["--last", "2"]);
    eqnice!("restored /w/b.txt\nconflict /w/a.txt: changed since (left as it is)\n", run.stdout);
    assert_eq!(run.code, 1);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "outside\n");
    assert_eq!(std::fs::read_to_string(test.path().join("w/b.txt")).unwrap(), "bee\n");
    assert_eq!(summary(&test), ["undo undoable /w/b.txt", "write undone /w/b.txt", "write undoable /w/a.txt"]);
}

#[test]
fn a_reader_gone_from_stdout_ends_the_output_not_the_undo() {
    let test = two_overwrites();
    let mut args = vec!["undo", "--last", "2"];
    args.extend(LAUNCH);
    assert_eq!(test.run_with_closed_stdout(&args), (0, String::new()));
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "one\n");
    assert_eq!(std::fs::read_to_string(test.path().join("w/b.txt")).unwrap(), "bee\n");
    assert_eq!(test.run_with_closed_stdout(&["journal", "list", "--journal", "j"]), (0, String::new()));
    let mut args = vec!["call", "read_text_file", r#"{"path": "/w/a.txt"}"#];
    args.extend(LAUNCH);
    assert_eq!(test.run_with_closed_stdout(&args), (0, String::new()));
}

/// Neither output can be written (a full disk): the undo still runs to its end, and a refused
/// launch still exits 2 (an `eprintln!` panicked, 101, after the first entry).
#[test]
fn outputs_that_cannot_be_written_end_neither_an_undo_nor_a_refusal() {
    let test = two_overwrites();
    let mut args = vec!["undo", "--last", "2"];
    args.extend(LAUNCH);
    assert_eq!(test.run_with_full_outputs(&args), 0);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "one\n");
    assert_eq!(std::fs::read_to_string(test.path().join("w/b.txt")).unwrap(), "bee\n");
    assert_eq!(test.run_with_full_outputs(&["mounts", "--mount", "bad"]), 2);
}

#[test]
fn undoing_an_undo_redoes_the_change_and_the_dry_run_changes_nothing() {
    let test = TestDir::new();
    test.file("w/a.txt", "one\n");
    call(&test, "write_file", r#"{"path": "/w/a.txt", "content": "two\n", "overwrite": true}"#);
    let dry = undo(&test, &["--last", "1", "--dry-run"]);
    let write_id = list(&test)[0]["id"].as_str().unwrap().to_owned();
    eqnice!(format!("would undo {write_id} write /w/a.txt\n"), dry.stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "two\n");

    eqnice!("restored /w/a.txt\n", undo(&test, &["--change", &write_id[..8]]).stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "one\n");
    let undo_id = list(&test)[0]["id"].as_str().unwrap().to_owned();
    // `--last` never counts an undo; `--change` names one to redo.
    eqnice!("nothing to undo\n", undo(&test, &["--last", "1"]).stdout);
    let redo = undo(&test, &["--change", &undo_id]);
    eqnice!("restored /w/a.txt\n", redo.stdout);
    assert_eq!(redo.code, 0);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "two\n");
    assert_eq!(summary(&test), ["undo undoable /w/a.txt", "undo undone /w/a.txt", "write undoable /w/a.txt"]);
    let again = undo(&test, &["--change", &undo_id]);
    eqnice!(format!("skipped {undo_id}: undone\n"), again.stdout);
    assert_eq!(again.code, 1);
}

#[test]
fn the_size_bound_drops_the_oldest_images_first_and_lists_them_as_dropped() {
    let test = TestDir::new();
    // 256 KiB (the least bound) hold one image of 150,000 bytes beside the log, not two.
    test.file("w/a.txt", &"a".repeat(150_000));
    test.file("w/b.txt", &"b".repeat(150_000));
    let bounded = |tool: &str, arguments: &str| {
        let mut args = vec!["call", tool, arguments, "--journal-max-bytes", "256K"];
        args.extend(LAUNCH);
        assert_eq!(test.run(&args).code, 0);
    };
    bounded("write_file", r#"{"path": "/w/a.txt", "content": "A\n", "overwrite": true}"#);
    bounded("write_file", r#"{"path": "/w/b.txt", "content": "B\n", "overwrite": true}"#);
    assert_eq!(summary(&test), ["write undoable /w/b.txt", "write dropped /w/a.txt"]);
    let images: u64 = std::fs::read_dir(test.path().join("j/images"))
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    assert_eq!(images, 150_000);
    let run = undo(&test, &["--last", "2"]);
    let dropped = list(&test).iter().find(|entry| entry["state"] == "dropped").unwrap()["id"].clone();
    eqnice!(format!("restored /w/b.txt\nskipped {}: dropped\n", dropped.as_str().unwrap()), run.stdout);
    assert_eq!(run.code, 1);
    assert!(test.run(&["call", "write_file", "{}", "--journal-max-bytes", "lots"]).stderr.contains(
        "invalid value 'lots' for '--journal-max-bytes <BYTES>': `lots` is not a byte count (digits, optionally followed by K, M or G)"
    ));
    let small = test.run(&["call", "write_file", "{}", "--journal-max-bytes", "1K"]);
    assert_eq!(small.code, 2);
    assert!(
        small.stderr.contains(
            "invalid value '1K' for '--journal-max-bytes <BYTES>': `1K` is below 256K, the least a journal keeps (its log may grow to 128K before it is compacted, and takes at most half)"
        ),
        "{}",
        small.stderr
    );
}

#[test]
fn the_journal_is_invisible_to_agents_and_listed_with_sessions_calls_and_times() {
    let test = TestDir::new();
    test.file("w/a.txt", "one\n");
    call(&test, "write_file", r#"{"path": "/w/a.txt", "content": "two\n", "overwrite": true}"#);
    for tool in ["read_text_file", "list_directory", "get_file_info", "delete_file"] {
        let ask = |path: &str| {
            let arguments = format!(r#"{{"path": "{path}"}}"#);
            let mut args = vec!["call", tool, arguments.as_str()];
            args.extend(LAUNCH);
            test.run(&args)
        };
        let internal = ask("/llm-journal/journal.jsonl");
        let unknown = ask("/no-such-root/journal.jsonl");
        eqnice!(unknown.stdout.replace("/no-such-root", "/llm-journal"), internal.stdout);
        assert_eq!(unknown.code, internal.code);
        test.assert_no_leak(&internal.stdout);
    }
    let listing = call(&test, "list_directory", r#"{"path": "/"}"#);
    eqnice!("[DIR] w\n", listing.stdout);

    let entries = list(&test);
    assert_eq!(entries.len(), 1);
    let entry = entries[0].as_object().unwrap();
    let mut keys: Vec<&str> = entry.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["call", "id", "operation", "paths", "session", "state", "time"]);
    let time = entry["time"].as_str().unwrap();
    assert_eq!(time.len(), "2026-12-02T19:00:00Z".len(), "{time}");
    assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{time}");
    let session = entry["session"].as_str().unwrap();
    let text = test.run(&["journal", "list", "--journal", "j", "--session", session]);
    eqnice!(format!("{}  {time}  {session}  write  /w/a.txt  undoable\n", entry["id"].as_str().unwrap()), text.stdout);
    eqnice!("", test.run(&["journal", "list", "--journal", "j", "--session", "another"]).stdout);
    eqnice!(
        "[]\n",
        test.run(&["journal", "list", "--journal", "j", "--json", "--since", "2999-01-01T00:00:00Z"]).stdout
    );
    // Any RFC 3339 spelling of a time, to the second: the entry's own second, with a
    // fraction and an offset of zero, still includes it.
    let own_second = time.replace('Z', ".5+00:00");
    for since in ["2000-01-01T00:00:00Z", "2000-01-01T05:00:00+05:00", own_second.as_str()] {
        let all = test.run(&["journal", "list", "--journal", "j", "--json", "--since", since]);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&all.stdout).unwrap().as_array().unwrap().len(),
            1,
            "{since}"
        );
    }
    let bad = test.run(&["journal", "list", "--journal", "j", "--since", "yesterday"]);
    assert_eq!(bad.code, 2);
    eqnice!(
        "error: --since `yesterday` is not an RFC 3339 time\n\nhint: write it like 2026-12-02T19:00:00Z (UTC) or \
         2026-12-02T20:00:00+01:00\n",
        bad.stderr
    );
}

/// Entries a compaction forgot past the log's bound (the log then keeps only their count and
/// times) are said last in the listing, and on stderr beside `--json`, whose array holds
/// entries only; a `--since` after the newest of them leaves the line out.
#[test]
fn the_entries_forgotten_past_the_logs_bound_are_counted_in_the_listing() {
    let test = TestDir::new();
    test.file("w/a.txt", "one\n");
    call(&test, "write_file", r#"{"path": "/w/a.txt", "content": "two\n", "overwrite": true}"#);
    let log = test.path().join("j/journal.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(
        "{\"settled\":\"forgotten\",\"forgotten\":41,\"oldest\":\"2026-11-01T08:00:00Z\",\"newest\":\"2026-11-30T17:59:59Z\"}\n",
    );
    std::fs::write(&log, text).unwrap();
    let entry = &list(&test)[0];
    let (id, time, session) =
        (entry["id"].as_str().unwrap(), entry["time"].as_str().unwrap(), entry["session"].as_str().unwrap());
    let note = "(41 older entries, made 2026-11-01T08:00:00Z to 2026-11-30T17:59:59Z, forgotten: past its bound \
                the log keeps no line of them)\n";
    let run = test.run(&["journal", "list", "--journal", "j"]);
    eqnice!(format!("{id}  {time}  {session}  write  /w/a.txt  undoable\n{note}"), run.stdout);
    let run = test.run(&["journal", "list", "--journal", "j", "--json"]);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&run.stdout).unwrap().as_array().unwrap().len(), 1);
    eqnice!(note, run.stderr);
    let run = test.run(&["journal", "list", "--journal", "j", "--since", "2026-12-01T00:00:00Z"]);
    eqnice!(format!("{id}  {time}  {session}  write  /w/a.txt  undoable\n"), run.stdout);
    // The undo reads past the line: it names no call.
    let run = undo(&test, &["--last", "1"]);
    eqnice!("restored /w/a.txt\n", run.stdout);
}

#[test]
fn a_journal_inside_a_writable_mount_is_refused_and_undo_needs_one() {
    let test = TestDir::new();
    test.dir("w");
    let run = test.run(&["call", "list_directory", r#"{"path": "/w"}"#, "--mount", "./w:/w:rw", "--journal", "w/j"]);
    assert_eq!(run.code, 2, "{run:?}");
    let run = test.run(&["undo", "--last", "1", "--mount", "./w:/w:rw"]);
    assert_eq!(run.code, 2);
    eqnice!(
        "error: `vfs undo` needs --journal DIR (or a settings file with `journal`)\n\nhint: name the journal the \
         changes were made with, and the same mounts\n",
        run.stderr
    );
}

/// A journal whose log cannot be opened (a directory in its place) is refused at the launch of
/// a process that changes things and by the listing, rather than refusing every change or
/// listing an empty journal; `vfs undo` refuses a journal directory that does not exist
/// rather than making it and finding nothing to undo.
#[test]
fn a_journal_whose_log_cannot_be_opened_or_that_does_not_exist_is_refused_in_one_line() {
    let test = TestDir::new();
    test.dir("w");
    test.dir("j/journal.jsonl");
    let why = "cannot use `[TMP]/j` as the journal: its log `journal.jsonl` cannot be opened to be written: the host \
               reported: is a directory";
    let hint = "hint: the log must be a regular file, or absent: move away what is there, or give --journal another \
                directory";
    let launch = ["--mount", "./w:/w:rw", "--journal", "j"];
    let run = test.run(&[&["check"][..], &launch].concat());
    assert_eq!(run.code, 2, "{run:?}");
    eqnice!(format!("{why}\n"), test.redact(&run.stdout));
    let run = test.run(&[&["call", "list_directory", r#"{"path": "/w"}"#][..], &launch].concat());
    assert_eq!(run.code, 2, "{run:?}");
    eqnice!(format!("error: {why}\n\n{hint}\n"), test.redact(&run.stderr));
    let run = test.run(&["journal", "list", "--journal", "j"]);
    assert_eq!(run.code, 2, "{run:?}");
    eqnice!(
        "error: cannot use `j` as the journal: its log `journal.jsonl` cannot be read: it is a directory, not a \
         file\n\nhint: the log must be a regular file, or absent: move away what is there\n",
        run.stderr
    );
    let run = test.run(&["undo", "--last", "1", "--mount", "./w:/w:rw", "--journal", "missing"]);
    assert_eq!(run.code, 2, "{run:?}");
    eqnice!(
        "error: cannot use `[TMP]/missing` as the journal: the directory does not exist\n\nhint: name the directory \
         the changes were journaled in, as they were made with --journal DIR\n",
        test.redact(&run.stderr)
    );
    assert!(!test.path().join("missing").exists(), "not made");
}

/// One MCP session over stdio, its calls one after the other.
struct Session {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Session {
    fn start(test: &TestDir) -> Self {
        Self::start_with(test, &[])
    }

    fn start_with(test: &TestDir, more: &[&str]) -> Self {
        Self::spawn(test, more, std::process::Stdio::null())
    }

    /// [`Session::start`], with the server's stderr to read.
    fn heard(test: &TestDir) -> (Self, std::io::BufReader<std::process::ChildStderr>) {
        let mut session = Self::spawn(test, &[], std::process::Stdio::piped());
        let stderr = std::io::BufReader::new(session.child.stderr.take().unwrap());
        (session, stderr)
    }

    fn spawn(test: &TestDir, more: &[&str], stderr: std::process::Stdio) -> Self {
        use std::io::Write as _;
        let mut args = vec!["serve"];
        args.extend(LAUNCH);
        args.extend(more);
        let mut child = test
            .command(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn vfs serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut session = Self { child, stdin, stdout, next: 1 };
        session.send(r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}"#);
        writeln!(session.stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
        session
    }

    fn send(&mut self, body: &str) -> serde_json::Value {
        use std::io::{BufRead as _, Write as _};
        let id = self.next;
        self.next += 1;
        writeln!(self.stdin, r#"{{"jsonrpc":"2.0","id":{id},{body}}}"#).unwrap();
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the server ended");
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// The text of a tool's result, and whether it is an error.
    fn call(&mut self, tool: &str, arguments: &str) -> (String, bool) {
        let answer =
            self.send(&format!(r#""method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}"#));
        let result = &answer["result"];
        (result["content"][0]["text"].as_str().unwrap_or_default().to_owned(), result["isError"] == true)
    }

    fn tools(&mut self) -> Vec<String> {
        let answer = self.send(r#""method":"tools/list""#);
        answer["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_agent_undoes_its_own_changes_only_with_the_same_guards() {
    let test = TestDir::new();
    test.file("w/mine.txt", "mine\n");
    test.file("w/theirs.txt", "theirs\n");
    let mut mine = Session::start(&test);
    let mut theirs = Session::start(&test);
    let tools = mine.tools();
    assert!(tools.contains(&"list_changes".to_owned()) && tools.contains(&"undo_changes".to_owned()), "{tools:?}");
    assert!(!mine.call("write_file", r#"{"path":"/w/mine.txt","content":"MINE\n","overwrite":true}"#).1);
    assert!(!theirs.call("write_file", r#"{"path":"/w/theirs.txt","content":"THEIRS\n","overwrite":true}"#).1);
    assert!(!mine.call("write_file", r#"{"path":"/w/made.txt","content":"made\n"}"#).1);
    let (listed, _) = mine.call("list_changes", "{}");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert!(
        lines[0].ends_with("  write  /w/made.txt  undoable") && lines[1].ends_with("  write  /w/mine.txt  undoable"),
        "{listed}"
    );
    let theirs_id = list(&test).iter().find(|entry| entry["paths"][0] == "/w/theirs.txt").unwrap()["id"].clone();
    let (refused, error) = mine.call("undo_changes", &format!(r#"{{"changeId":{theirs_id}}}"#));
    assert!(error);
    eqnice!(
        format!(
            "no change `{}` of this session (or the prefix names more than one); `list_changes` lists them",
            theirs_id.as_str().unwrap()
        ),
        refused
    );

    let (undone, error) = mine.call("undo_changes", r#"{"count":5}"#);
    eqnice!("removed /w/made.txt\nrestored /w/mine.txt\n", undone);
    assert!(!error);
    assert_eq!(std::fs::read_to_string(test.path().join("w/mine.txt")).unwrap(), "mine\n");
    assert_eq!(std::fs::read_to_string(test.path().join("w/theirs.txt")).unwrap(), "THEIRS\n");
    assert!(!test.path().join("w/made.txt").exists());
    eqnice!("nothing to undo\n", mine.call("undo_changes", "{}").0);
    // The other session sees its own change only, none of mine (undone or not).
    let (listed, _) = theirs.call("list_changes", "{}");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 1, "{listed}");
    assert!(lines[0].ends_with("  write  /w/theirs.txt  undoable"), "{listed}");

    // A conflict is the agent's to see too.
    assert!(!theirs.call("write_file", r#"{"path":"/w/theirs.txt","content":"again\n","overwrite":true}"#).1);
    std::fs::write(test.path().join("w/theirs.txt"), "outside\n").unwrap();
    let (conflict, error) = theirs.call("undo_changes", "{}");
    eqnice!("conflict /w/theirs.txt: changed since (left as it is)\n", conflict);
    assert!(error);
}

#[test]
fn the_journal_tools_are_listed_only_with_a_journal_and_a_writable_mount() {
    let test = TestDir::new();
    test.dir("w");
    let listed = |args: &[&str]| {
        let mut all = vec!["tools"];
        all.extend(args);
        let run = test.run(&all);
        assert_eq!(run.code, 0, "{run:?}");
        let tools: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
        tools.iter().any(|tool| tool["name"] == "undo_changes")
            && tools.iter().any(|tool| tool["name"] == "list_changes")
    };
    assert!(listed(&["--mount", "./w:/w:rw", "--journal", "j"]));
    assert!(!listed(&["--mount", "./w:/w:rw"]));
    assert!(!listed(&["--mount", "./w:/w:ro", "--journal", "j"]));
}

/// "No delete" (`rwnd`) is a rule for agents: the operator's `vfs undo` of a file an agent
/// created there removes it, with the same launch options the change was made with.
#[test]
fn the_operators_undo_removes_a_file_an_agent_created_in_an_rwnd_mount() {
    let test = TestDir::new();
    test.dir("k");
    let launch = ["--mount", "./k:/k:rwnd", "--journal", "j", "--no-read-before-edit"];
    let mut args = vec!["call", "write_file", r#"{"path": "/k/new.txt", "content": "made\n"}"#];
    args.extend(launch);
    assert_eq!(test.run(&args).code, 0);
    // An agent may not delete there.
    let mut args = vec!["call", "delete_file", r#"{"path": "/k/new.txt"}"#];
    args.extend(launch);
    let refused = test.run(&args);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(test.path().join("k/new.txt").exists());
    let mut args = vec!["undo", "--last", "1"];
    args.extend(launch);
    let run = test.run(&args);
    assert_eq!(run.code, 0, "{run:?}");
    eqnice!("removed /k/new.txt\n", run.stdout);
    assert!(!test.path().join("k/new.txt").exists());
}

/// A directory's move is undone only while the directory holds what the move left: a file
/// changed or added in it since (outside vfs, or by another call) makes the undo a conflict,
/// and the tree stays where it is, as it is. Untouched, it moves back.
#[test]
fn a_directory_moved_is_moved_back_only_while_its_tree_is_as_the_move_left_it() {
    let test = TestDir::new();
    test.file("w/d/a.txt", "a\n");
    test.file("w/d/sub/b.txt", "b\n");
    call(&test, "move_file", r#"{"source": "/w/d", "destination": "/w/e"}"#);
    std::fs::write(test.path().join("w/e/a.txt"), "outside\n").unwrap();
    let run = undo(&test, &["--last", "1"]);
    eqnice!("conflict /w/e: changed since (left as it is)\n", run.stdout);
    assert_eq!(run.code, 1);
    assert_eq!(std::fs::read_to_string(test.path().join("w/e/a.txt")).unwrap(), "outside\n");
    assert!(!test.path().join("w/d").exists());

    // A file added by another call makes it a conflict too; removed again, the tree is as
    // the move left it, and the undo goes through.
    test.file("w/p/x.txt", "x\n");
    call(&test, "move_file", r#"{"source": "/w/p", "destination": "/w/q"}"#);
    let moved = list(&test)[0]["id"].as_str().unwrap().to_owned();
    call(&test, "write_file", r#"{"path": "/w/q/new.txt", "content": "new\n"}"#);
    let run = undo(&test, &["--change", &moved]);
    eqnice!("conflict /w/q: changed since (left as it is)\n", run.stdout);
    call(&test, "delete_file", r#"{"path": "/w/q/new.txt"}"#);
    let run = undo(&test, &["--change", &moved]);
    eqnice!("restored /w/p\n", run.stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("w/p/x.txt")).unwrap(), "x\n");

    // A tree left untouched since its move moves back.
    test.file("w/t/x.txt", "x\n");
    call(&test, "move_file", r#"{"source": "/w/t", "destination": "/w/u"}"#);
    let run = undo(&test, &["--last", "1"]);
    eqnice!("restored /w/t\n", run.stdout);
    assert_eq!(run.code, 0);
    assert_eq!(std::fs::read_to_string(test.path().join("w/t/x.txt")).unwrap(), "x\n");
}

/// A directory moved, then a file in it edited: undoing both puts the file's bytes and its mode
/// back (exactly, whatever the umask: `0664` here), then the tree (a small tree's guard
/// compares its files' contents and modes). A tree whose files pass 16 MiB in all is compared
/// by its files' sizes and times instead, not read: untouched, it moves back; a content change
/// that keeps the size and the modification time (`touch -d`), a file renamed away and back, a
/// file's or a directory's mode, a link pointed elsewhere each make the undo a conflict.
#[test]
#[expect(clippy::disallowed_types, reason = "fixture: a sparse 40 MiB file")]
fn a_moved_tree_moves_back_after_the_undo_of_an_edit_in_it_and_a_large_tree_is_compared_unread() {
    use std::os::unix::fs::PermissionsExt as _;
    let test = TestDir::new();
    test.file("w/s/a.txt", "alpha\n");
    test.file("w/s/b.txt", "beta\n");
    let shared = test.path().join("w/s/a.txt");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o664)).unwrap();
    call(&test, "move_file", r#"{"source": "/w/s", "destination": "/w/d"}"#);
    call(&test, "edit_file", r#"{"path": "/w/d/a.txt", "edits": [{"oldText": "alpha", "newText": "gamma"}]}"#);
    let run = undo(&test, &["--last", "2"]);
    eqnice!("restored /w/d/a.txt\nrestored /w/s\n", run.stdout);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::read_to_string(&shared).unwrap(), "alpha\n");
    assert_eq!(std::fs::metadata(&shared).unwrap().permissions().mode() & 0o777, 0o664);
    assert!(!test.path().join("w/d").exists());

    test.file("w/big/small.txt", "value=1\n");
    test.dir("w/big/sub");
    std::os::unix::fs::symlink("small.txt", test.path().join("w/big/link")).unwrap();
    let large = std::fs::File::create(test.path().join("w/big/large.bin")).unwrap();
    large.set_len(40 << 20).unwrap();
    call(&test, "move_file", r#"{"source": "/w/big", "destination": "/w/moved"}"#);
    let run = undo(&test, &["--last", "1"]);
    eqnice!("restored /w/big\n", run.stdout);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(std::fs::metadata(test.path().join("w/big/large.bin")).unwrap().len(), 40 << 20);

    let moved = test.path().join("w/moved");
    let changes: [(&str, &dyn Fn()); 5] = [
        ("same size, same modification time", &|| {
            let small = moved.join("small.txt");
            let modified = std::fs::metadata(&small).unwrap().modified().unwrap();
            std::fs::write(&small, "value=2\n").unwrap();
            std::fs::File::options().write(true).open(&small).unwrap().set_modified(modified).unwrap();
        }),
        ("renamed away and back", &|| {
            let away = test.path().join("w/away.bin");
            std::fs::rename(moved.join("large.bin"), &away).unwrap();
            std::fs::rename(&away, moved.join("large.bin")).unwrap();
        }),
        ("a file's mode", &|| {
            std::fs::set_permissions(moved.join("small.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
        }),
        ("a directory's mode", &|| {
            std::fs::set_permissions(moved.join("sub"), std::fs::Permissions::from_mode(0o700)).unwrap();
        }),
        ("a link pointed elsewhere", &|| {
            std::fs::remove_file(moved.join("link")).unwrap();
            std::os::unix::fs::symlink("large.bin", moved.join("link")).unwrap();
        }),
    ];
    for (what, change) in changes {
        call(&test, "move_file", r#"{"source": "/w/big", "destination": "/w/moved"}"#);
        change();
        let run = undo(&test, &["--last", "1"]);
        eqnice!(
            format!("{what}: conflict /w/moved: changed since (left as it is)\n"),
            format!("{what}: {}", run.stdout)
        );
        assert_eq!(run.code, 1, "{what}");
        std::fs::rename(&moved, test.path().join("w/big")).unwrap();
    }

    // Which way a tree is hashed depends on its visible files alone: a hidden `.env` past
    // 16 MiB leaves a small tree hashed by content, so the undo of an edit in it and of its
    // move go through (hashed by times, the edit's undo would make the move's a conflict,
    // and the outcome would tell an agent the hidden file's size).
    test.file("w/h/a.txt", "alpha\n");
    let secret = std::fs::File::create(test.path().join("w/h/.env")).unwrap();
    secret.set_len(17 << 20).unwrap();
    call(&test, "move_file", r#"{"source": "/w/h", "destination": "/w/i"}"#);
    call(&test, "edit_file", r#"{"path": "/w/i/a.txt", "edits": [{"oldText": "alpha", "newText": "gamma"}]}"#);
    let run = undo(&test, &["--last", "2"]);
    eqnice!("restored /w/i/a.txt\nrestored /w/h\n", run.stdout);
    assert_eq!(run.code, 0, "{run:?}");

    // A refused delete of a directory that is not empty (no `recursive`, as a shell's
    // `rmdir`) images nothing in it: its files' change times, which a hidden file's hash
    // counts, stay as they were, and the move still undoes.
    test.file("w/r/x.txt", "x\n");
    test.file("w/r/.env", "SECRET=1\n");
    call(&test, "move_file", r#"{"source": "/w/r", "destination": "/w/t"}"#);
    let mut args = vec!["call", "delete_file", r#"{"path": "/w/t"}"#];
    args.extend(LAUNCH);
    assert_eq!(test.run(&args).code, 1);
    let run = undo(&test, &["--last", "1"]);
    eqnice!("restored /w/r\n", run.stdout);
    assert_eq!(run.code, 0, "{run:?}");
}

/// Private, read-only, shared, mode-0 and set-group-ID directories deleted in a moved tree
/// (itself set-group-ID), both undone: the restore gives each directory its mode back, the
/// bits a directory without the owner's would lack after what goes in it (`ro` takes its file
/// only then), so the tree is as the move left it and moves back.
#[test]
fn a_deleted_trees_directories_come_back_with_their_modes_and_its_moved_parent_moves_back() {
    use std::os::unix::fs::PermissionsExt as _;
    let test = TestDir::new();
    test.file("w/p/sub/b.txt", "b\n");
    test.file("w/p/sub/ro/c.txt", "c\n");
    test.dir("w/p/sub/shared");
    test.dir("w/p/sub/none");
    test.dir("w/p/sub/group/inner");
    // The tree's parent gives its group to what is made in it (set-group-ID): a directory
    // put back there still gets exactly the mode it had.
    let modes = [
        ("w/p", 0o2775),
        ("w/p/sub", 0o700),
        ("w/p/sub/ro", 0o555),
        ("w/p/sub/shared", 0o1777),
        ("w/p/sub/none", 0),
        ("w/p/sub/group/inner", 0o2700),
        ("w/p/sub/group", 0o2750),
    ];
    for (directory, mode) in modes {
        std::fs::set_permissions(test.path().join(directory), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    call(&test, "move_file", r#"{"source": "/w/p", "destination": "/w/q"}"#);
    call(&test, "delete_file", r#"{"path": "/w/q/sub", "recursive": true}"#);
    let run = undo(&test, &["--last", "2"]);
    eqnice!("restored /w/q/sub\nrestored /w/p\n", run.stdout);
    assert_eq!(run.code, 0, "{run:?}");
    for (directory, mode) in modes {
        let found = std::fs::metadata(test.path().join(directory)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(found, mode, "{directory}: {found:o}");
    }
    assert_eq!(std::fs::read_to_string(test.path().join("w/p/sub/ro/c.txt")).unwrap(), "c\n");
}

/// A change is undone only through a launch that mounts its roots where they were: one journal
/// shared by two selections of `/output` (two crews' settings entries, chosen by id) never
/// restores one's file into the other's directory; the dry run says so too.
#[test]
fn a_change_is_undone_only_through_the_mounts_it_was_made_with() {
    const ID_A: &str = "01J9Z3K4M5N6P7Q8R9S0T1V2W3";
    const ID_B: &str = "01J9Z3K4M5N6P7Q8R9S0T1V2W4";
    let test = TestDir::new();
    test.file("outA/f.txt", "secret of A\n");
    test.dir("outB");
    test.file(
        "vfs.json",
        &format!(r#"{{"mounts": ["{ID_A}|./outA:/output:rw", "{ID_B}|./outB:/output:rw"], "journal": "j"}}"#),
    );
    let with = |id: &'static str| ["--settings", "vfs.json", "--mount-id", id, "--no-read-before-edit"];
    let mut args = vec!["call", "delete_file", r#"{"path": "/output/f.txt"}"#];
    args.extend(with(ID_A));
    assert_eq!(test.run(&args).code, 0);
    let id = list(&test)[0]["id"].as_str().unwrap().to_owned();
    let skipped = format!(
        "skipped {id}: /output is mounted from another place than when the change was made (undo it with the mounts it was made with)\n"
    );
    for dry in [true, false] {
        let mut args = vec!["undo", "--last", "1"];
        if dry {
            args.push("--dry-run");
        }
        args.extend(with(ID_B));
        let run = test.run(&args);
        eqnice!(if dry { format!("would be {skipped}") } else { skipped.clone() }, run.stdout);
        assert_eq!(run.code, 1, "{run:?}");
        assert!(!test.path().join("outB/f.txt").exists());
    }
    let mut args = vec!["undo", "--last", "1"];
    args.extend(with(ID_A));
    let run = test.run(&args);
    eqnice!("restored /output/f.txt\n", run.stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("outA/f.txt")).unwrap(), "secret of A\n");

    // A mount nested in the root since, which now holds the path, is another place too; so
    // is a root no longer mounted.
    test.file("outA/x/g.txt", "g\n");
    test.dir("other");
    let mut args = vec!["call", "delete_file", r#"{"path": "/output/x/g.txt"}"#];
    args.extend(with(ID_A));
    assert_eq!(test.run(&args).code, 0);
    let id = list(&test)[0]["id"].as_str().unwrap().to_owned();
    let mut args = vec!["undo", "--last", "1", "--mount", "./other:/output/x:rw"];
    args.extend(with(ID_A));
    let run = test.run(&args);
    eqnice!(
        format!(
            "skipped {id}: /output/x/g.txt now lies in another mount, /output/x (undo it with the mounts it was made with)\n"
        ),
        run.stdout
    );
    assert_eq!(run.code, 1);
    assert!(!test.path().join("other/g.txt").exists());
    let run = test.run(&["undo", "--last", "1", "--journal", "j", "--mount", "./other:/elsewhere:rw"]);
    eqnice!(format!("skipped {id}: /output is not mounted (undo it with the mounts it was made with)\n"), run.stdout);
    assert!(!test.path().join("outA/x/g.txt").exists());
}

/// A project directory renamed since its changes is another place: the undo skips them, and
/// `--any-place` undoes them through the mounts as given.
#[test]
fn any_place_undoes_changes_made_before_the_project_directory_was_renamed() {
    let test = TestDir::new();
    test.file("before/a.txt", "a\n");
    let made = ["--mount", "./before:/w:rw", "--journal", "j", "--no-read-before-edit"];
    let mut args = vec!["call", "delete_file", r#"{"path": "/w/a.txt"}"#];
    args.extend(made);
    assert_eq!(test.run(&args).code, 0);
    std::fs::rename(test.path().join("before"), test.path().join("after")).unwrap();
    let id = list(&test)[0]["id"].as_str().unwrap().to_owned();
    let now = ["--mount", "./after:/w:rw", "--journal", "j", "--no-read-before-edit"];
    let mut args = vec!["undo", "--last", "1"];
    args.extend(now);
    let run = test.run(&args);
    eqnice!(
        format!(
            "skipped {id}: /w is mounted from another place than when the change was made (undo it with the mounts it was made with)\n"
        ),
        run.stdout
    );
    args.push("--any-place");
    let run = test.run(&args);
    eqnice!("restored /w/a.txt\n", run.stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("after/a.txt")).unwrap(), "a\n");
}

/// An undo puts a file's mode back exactly (bits the umask or the agent's write took
/// included) only while the file has the mode that write left; a mode narrowed since (an
/// operator's `chmod 600`) is kept, never widened.
#[test]
fn an_undo_keeps_a_mode_narrowed_since_the_change() {
    use std::os::unix::fs::PermissionsExt as _;
    let test = TestDir::new();
    let file = test.path().join("w/s.txt");
    test.file("w/s.txt", "alpha\n");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    let edit = r#"{"path": "/w/s.txt", "edits": [{"oldText": "alpha", "newText": "gamma"}]}"#;
    call(&test, "edit_file", edit);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    eqnice!("restored /w/s.txt\n", undo(&test, &["--last", "1"]).stdout);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "alpha\n");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
}

/// The journal from a settings file (`journal`, relative to the file; `journal_max_bytes`, a
/// number or a string with the flag's suffixes), for `call`, `undo` and the rest; a flag given
/// wins; a bound below the least is refused in one line naming the file.
#[test]
fn the_journal_can_come_from_the_settings_file() {
    let test = TestDir::new();
    test.dir("w");
    test.file("conf/vfs.json", r#"{"mounts": ["../w:/w:rw"], "journal": "../j", "journal_max_bytes": "512K"}"#);
    let settings = ["--settings", "conf/vfs.json", "--no-read-before-edit"];
    let mut args = vec!["call", "write_file", r#"{"path": "/w/a.txt", "content": "a\n"}"#];
    args.extend(settings);
    assert_eq!(test.run(&args).code, 0);
    assert_eq!(summary(&test), ["write undoable /w/a.txt"]);
    // `vfs journal list` finds it through the file too; a file without `journal` is refused.
    let run = test.run(&["journal", "list", "--settings", "conf/vfs.json", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let listed: Vec<serde_json::Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(listed, list(&test));
    test.file("conf/bare.json", r#"{"mounts": ["../w:/w:rw"]}"#);
    let run = test.run(&["journal", "list", "--settings", "conf/bare.json"]);
    assert_eq!(run.code, 2, "{run:?}");
    eqnice!(
        "error: the settings file `conf/bare.json` names no `journal`\n\nhint: add \"journal\": \"DIR\" to it, or pass --journal DIR\n",
        run.stderr
    );
    let mut args = vec!["undo", "--last", "1"];
    args.extend(settings);
    let run = test.run(&args);
    eqnice!("removed /w/a.txt\n", run.stdout);
    assert_eq!(run.code, 0);
    // The flag wins over the key.
    let mut args = vec!["call", "write_file", r#"{"path": "/w/b.txt", "content": "b\n"}"#, "--journal", "k"];
    args.extend(settings);
    assert_eq!(test.run(&args).code, 0);
    assert!(test.path().join("k/journal.jsonl").exists());
    assert_eq!(summary(&test).len(), 2, "the settings' journal has the write and its undo only");

    // A bound below the least, and one that is not a byte count (it named serde's untagged
    // enum): each refused in one line that says so.
    let refused = |name: &str, bound: &str| {
        test.file(name, &format!(r#"{{"mounts": ["../w:/w:rw"], "journal": "../j", "journal_max_bytes": {bound}}}"#));
        let run = test.run(&["call", "list_directory", r#"{"path": "/w"}"#, "--settings", name]);
        assert_eq!(run.code, 2, "{run:?}");
        run.stderr
    };
    let stderr = refused("conf/small.json", "1000");
    assert!(
        stderr.starts_with(
            "error: invalid settings file `conf/small.json`: journal_max_bytes: `1000` is below 256K, the least a journal keeps"
        ),
        "{stderr}"
    );
    let stderr = refused("conf/negative.json", "-1");
    assert!(
        stderr.starts_with(
            "error: invalid settings file `conf/negative.json`: invalid type: integer `-1`, expected a byte count, like 1073741824 or \"1G\" at line 1"
        ),
        "{stderr}"
    );
}

/// An agent's undo names the request that asked for it: each undo entry has a call of its
/// own (so a crash in one undo is never hidden by another's entry) and `asked_by`, the call id
/// on the `undo_changes` line of the exchange log. The operator's undo has no `asked_by`.
#[test]
fn an_agents_undo_names_its_undo_changes_call_as_asked_by() {
    let test = TestDir::new();
    test.dir("w");
    let mut session = Session::start_with(&test, &["--llm-log", "logs"]);
    assert!(!session.call("write_file", r#"{"path":"/w/a.txt","content":"a\n"}"#).1);
    assert!(!session.call("write_file", r#"{"path":"/w/b.txt","content":"b\n"}"#).1);
    let (undone, error) = session.call("undo_changes", r#"{"count": 2}"#);
    eqnice!("removed /w/b.txt\nremoved /w/a.txt\n", undone);
    assert!(!error);
    drop(session);
    let logs: Vec<std::path::PathBuf> =
        std::fs::read_dir(test.path().join("logs")).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = std::fs::read_to_string(&logs[0]).unwrap();
    let asked: Vec<String> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|line| line["tool"] == "undo_changes")
        .map(|line| line["call"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(asked.len(), 1);
    let undos: Vec<serde_json::Value> = list(&test).into_iter().filter(|entry| entry["operation"] == "undo").collect();
    assert_eq!(undos.len(), 2);
    for undo in &undos {
        assert_eq!(undo["asked_by"].as_str(), Some(asked[0].as_str()), "{undo}");
        assert_ne!(undo["call"].as_str(), Some(asked[0].as_str()), "{undo}");
    }
    assert_ne!(undos[0]["call"], undos[1]["call"]);

    let run = undo(&test, &["--change", undos[0]["id"].as_str().unwrap()]);
    eqnice!("restored /w/a.txt\n", run.stdout);
    let newest = &list(&test)[0];
    assert_eq!((&newest["session"], newest.get("asked_by")), (&serde_json::json!("operator"), None));
}

/// An entry is durable once its call is answered: a server killed (`SIGKILL`) right after the
/// answer leaves the entry whole and undoable, and the operator's undo puts the file back.
#[test]
fn a_change_answered_is_journaled_whole_when_the_server_is_killed_right_after() {
    let test = TestDir::new();
    test.file("w/a.txt", "before\n");
    let mut session = Session::start(&test);
    assert!(!session.call("write_file", r#"{"path":"/w/a.txt","content":"after\n","overwrite":true}"#).1);
    session.child.kill().unwrap();
    session.child.wait().unwrap();
    assert_eq!(summary(&test), ["write undoable /w/a.txt"]);
    let run = undo(&test, &["--last", "1"]);
    eqnice!("restored /w/a.txt\n", run.stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "before\n");
}

#[test]
fn a_damaged_journals_paths_are_one_line_each_in_the_listing_and_the_dry_run() {
    let test = TestDir::new();
    test.dir("w");
    call(&test, "write_file", r#"{"path":"/w/a.txt","content":"mine\n"}"#);
    let forged = serde_json::json!({
        "call": "c-forged", "id": "9999999999999-forged", "images": [], "operation": "make_directory",
        "parts": [{ "kind": "make_directory", "path": "/w/x\nremoved /w/forged", "parent": false }],
        "paths": ["/w/x\nremoved /w/forged"], "session": "s\u{1b}[31m", "time": "2026-12-01T00:00:00Z", "undoes": null,
    });
    let log = test.path().join("j/journal.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str("{}\n[]\n");
    text.push_str(&(forged.to_string() + "\n"));
    std::fs::write(&log, text).unwrap();
    let listed = test.run(&["journal", "list", "--journal", "j"]);
    let first = listed.stdout.lines().next().unwrap();
    eqnice!(
        "9999999999999-forged  2026-12-01T00:00:00Z  s\\u{1b}[31m  make_directory  /w/x\\nremoved /w/forged  undoable",
        first
    );
    assert_eq!(listed.stdout.lines().count(), 2, "{listed:?}");
    let dry = undo(&test, &["--last", "1", "--dry-run"]);
    eqnice!("would undo 9999999999999-forged make_directory /w/x\\nremoved /w/forged\n", dry.stdout);
}

/// An incomplete entry (a change another process is making now, or one a crash cut) is no
/// change to undo: `--last N` passes over it to the newest changes that are whole, and
/// `--change` still names it (and skips it, saying why).
#[test]
fn the_last_changes_to_undo_pass_over_an_incomplete_one() {
    let test = TestDir::new();
    test.file("w/a.txt", "before\n");
    call(&test, "write_file", r#"{"path":"/w/a.txt","content":"after\n","overwrite":true}"#);
    let running = serde_json::json!({
        "intent": "9999999999999-running", "call": "c-running", "operation": "write", "paths": ["/w/b.txt"],
        "images": [], "session": "s-other", "time": "2026-12-07T00:00:00Z",
    });
    let log = test.path().join("j/journal.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&(running.to_string() + "\n"));
    std::fs::write(&log, text).unwrap();
    assert_eq!(summary(&test), ["write not undoable /w/b.txt", "write undoable /w/a.txt"]);
    eqnice!("restored /w/a.txt\n", undo(&test, &["--last", "1"]).stdout);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "before\n");
    let named = undo(&test, &["--change", "9999999999999-running"]);
    assert_eq!(named.code, 1);
    eqnice!(
        "skipped 9999999999999-running: not undoable (incomplete: vfs stopped during this change, or could not write \
         its entry; the change may or may not have been made)\n",
        named.stdout
    );
}

/// `w/big`: 4 directories of 1,000 empty files, a tree whose journaled delete (or undo) takes
/// long enough for a signal to arrive in its middle.
fn big_tree(test: &TestDir) {
    tree_of(test, 4);
}

/// `w/big/d0` … : `directories` directories of 1,000 empty files each.
fn tree_of(test: &TestDir, directories: usize) {
    for directory in 0..directories {
        let directory = test.dir(&format!("w/big/d{directory}"));
        for file in 0..1000 {
            std::fs::write(directory.join(format!("f{file}")), "").unwrap();
        }
    }
}

/// Waits (at most a minute) until `done` holds, looking every 5 ms.
fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} did not happen within a minute");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// True once the delete of `w/big` has taken its first file (it goes in name order).
fn delete_begun(test: &TestDir) -> bool {
    !test.path().join("w/big/d0/f0").exists()
}

/// A signal in the middle of a journaled tree delete lets the delete finish (its files were
/// moved into the journal one by one, and only its entry, written at its end, says where they
/// belong): `vfs call` (SIGTERM) and `vfs serve` over stdio (SIGINT) end once it has, its entry
/// is whole, and the tree comes back whole. A second signal ends the server at once (exit 130).
#[test]
fn a_signal_in_the_middle_of_a_tree_delete_lets_it_finish_and_a_second_stops_at_once() {
    use std::io::{BufRead as _, Write as _};
    let files = |test: &TestDir| walkdir_count(&test.path().join("w"));
    let test = TestDir::new();
    big_tree(&test);
    a_signalled_delete_finishes(&test, "TERM");
    eqnice!("restored /w/big\n", undo(&test, &["--last", "1"]).stdout);
    assert_eq!(files(&test), 4_000);

    let mut session = serving_a_tree_delete(&test);
    signal(&session.child, "INT");
    assert_eq!(session.child.wait().unwrap().code(), Some(0), "ended once the delete had");
    assert_eq!(summary(&test)[0], "remove undoable /w/big");
    assert!(!test.path().join("w/big").exists());

    // Two signals sent back to back may arrive as one (a process has one pending signal of
    // each kind): the second is sent once the first has been told, while the delete (of a
    // larger tree, here) goes on.
    tree_of(&test, 16);
    let (mut session, mut stderr) = Session::heard(&test);
    writeln!(session.stdin, "{DELETE_BIG}").unwrap();
    until("the delete's start", || delete_begun(&test));
    let mut told = String::new();
    stderr.read_line(&mut told).unwrap();
    assert!(told.contains(": serving /w (rw) over MCP on stdin/stdout;"), "the start-up line: {told}");
    signal(&session.child, "TERM");
    told.clear();
    stderr.read_line(&mut told).unwrap();
    eqnice!(
        "vfs: stopping once the calls running have ended or stopped; a second SIGTERM or Ctrl-C stops at once\n",
        told
    );
    assert!(test.path().join("w/big").exists(), "the delete of 16,000 files went on meanwhile");
    signal(&session.child, "TERM");
    assert_eq!(session.child.wait().unwrap().code(), Some(130), "ended at once by the second");
    assert!(walkdir_count(&test.path().join("w/big")) > 0, "ended before the delete had");
}

/// SIGHUP (the terminal closed) stops as SIGTERM does: the delete in progress finishes, its
/// entry is whole (red team: its default action ended the daemon at once, the delete cut and
/// its entry incomplete).
#[test]
fn a_hangup_in_the_middle_of_a_tree_delete_lets_it_finish() {
    let test = TestDir::new();
    big_tree(&test);
    a_signalled_delete_finishes(&test, "HUP");
}

/// `vfs call` deleting `w/big`, sent the signal `name` once the delete has begun: the delete
/// finishes (exit 0, its answer whole), stderr says the process stops once the call has ended,
/// and its entry is whole.
fn a_signalled_delete_finishes(test: &TestDir, name: &str) {
    let mut args = vec!["call", "delete_file", r#"{"path":"/w/big","recursive":true}"#];
    args.extend(LAUNCH);
    let child =
        test.command(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    until("the delete's start", || delete_begun(test));
    signal(&child, name);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{name}: {output:?}");
    eqnice!("deleted directory `/w/big`\n", String::from_utf8_lossy(&output.stdout));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .ends_with("vfs: stopping once the call has ended or stopped; a second SIGTERM or Ctrl-C stops at once\n"),
        "{name}: {stderr}"
    );
    assert_eq!(summary(test), ["remove undoable /w/big"]);
}

/// `SIGKILL` in the middle of a journaled tree delete leaves an incomplete entry and the files
/// it took in `images/`, with its record of which image each one was and of each directory's
/// mode: `vfs undo --change ID` puts them back, and the tree is whole again, directories with
/// their modes. (Before, nothing named them.)
#[test]
fn a_tree_delete_killed_part_way_is_put_back_by_the_undo_of_its_incomplete_entry() {
    let test = TestDir::new();
    big_tree(&test);
    let modes = [("w/big", 0o750), ("w/big/d0", 0o700), ("w/big/d1", 0o1777), ("w/big/d2", 0o711)];
    let mode_of = |path: &str| std::fs::metadata(test.path().join(path)).unwrap().permissions().mode() & 0o7777;
    for (path, mode) in modes {
        std::fs::set_permissions(test.path().join(path), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut args = vec!["call", "delete_file", r#"{"path":"/w/big","recursive":true}"#];
    args.extend(LAUNCH);
    let mut child =
        test.command(&args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    // Once a directory is gone whole, so that the undo must make one again.
    until("the first directory's removal", || !test.path().join("w/big/d0").exists());
    signal(&child, "KILL");
    child.wait().unwrap();
    let left = walkdir_count(&test.path().join("w/big"));
    assert!(left < 4_000 && left > 0, "{left} files left: the kill came before the delete ended");
    let entries = list(&test);
    assert_eq!(summary(&test), ["remove not undoable /w/big"]);
    assert_eq!(entries[0]["incomplete"], true);
    let id = entries[0]["id"].as_str().unwrap();
    let dry = undo(&test, &["--change", id, "--dry-run"]);
    eqnice!(
        format!("would put back {id} /w/big: {} files it took before vfs stopped during it\n", 4_000 - left),
        dry.stdout
    );
    let run = undo(&test, &["--change", id]);
    assert_eq!(
        (run.code, run.stdout.lines().filter(|line| line.starts_with("restored /w/big/")).count()),
        (0, 4_000 - left)
    );
    assert_eq!(walkdir_count(&test.path().join("w/big")), 4_000);
    assert_eq!(modes.map(|(path, _)| (path, mode_of(path))), modes);
    assert_eq!(summary(&test), ["undo undoable /w/big", "remove undone /w/big"]);
}

/// A signal during `vfs undo` stops it between two entries: the one being undone is undone
/// whole, the rest are left and said so.
#[test]
fn a_signal_during_an_undo_stops_it_after_the_entry_being_undone() {
    let test = TestDir::new();
    test.file("w/a.txt", "before\n");
    big_tree(&test);
    call(&test, "write_file", r#"{"path":"/w/a.txt","content":"after\n","overwrite":true}"#);
    call(&test, "delete_file", r#"{"path":"/w/big","recursive":true}"#);
    let mut args = vec!["undo", "--last", "2"];
    args.extend(LAUNCH);
    let child =
        test.command(&args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    until("the tree's restore", || test.path().join("w/big").exists());
    signal(&child, "TERM");
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    eqnice!("restored /w/big\nstopped by a signal: 1 more entry not undone\n", String::from_utf8_lossy(&output.stdout));
    assert_eq!(walkdir_count(&test.path().join("w/big")), 4_000);
    assert_eq!(std::fs::read_to_string(test.path().join("w/a.txt")).unwrap(), "after\n");
}

/// `SIGKILL` in the middle of `vfs undo` of a tree's removal leaves the tree part way back;
/// `vfs undo --last 1` again finishes it: what the first put back is taken as back, the rest
/// comes back (red team: it was a conflict for the whole tree, since its directory was there,
/// and the files not yet back lay only in `images/`).
#[test]
fn an_undo_of_a_tree_killed_part_way_is_finished_by_running_it_again() {
    let test = TestDir::new();
    big_tree(&test);
    for file in 0..1000 {
        std::fs::write(test.path().join(format!("w/big/d3/f{file}")), format!("content {file}\n")).unwrap();
    }
    call(&test, "delete_file", r#"{"path":"/w/big","recursive":true}"#);
    let mut args = vec!["undo", "--last", "1"];
    args.extend(LAUNCH);
    let mut child =
        test.command(&args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    // Counted while the undo writes (a staged file may go between the listing and its look).
    let restored =
        |directory: &str| std::fs::read_dir(test.path().join(directory)).map_or(0, |entries| entries.flatten().count());
    until("the first files' restore", || restored("w/big/d0") >= 100);
    signal(&child, "KILL");
    child.wait().unwrap();
    let back = walkdir_count(&test.path().join("w/big"));
    assert!(back < 4_000, "{back} files back: the kill came before the undo ended");
    let run = undo(&test, &["--last", "1"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "restored /w/big\n"), "{run:?}");
    // Besides the tree, at most the temporary file of the write the kill cut (vfs's own name,
    // which no agent sees, removed with its directory: docs/architecture.md).
    let left = walkdir_count(&test.path().join("w/big"));
    let temporaries: Vec<String> = (0..4)
        .flat_map(|directory| std::fs::read_dir(test.path().join(format!("w/big/d{directory}"))).unwrap())
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".vfs-tmp-"))
        .collect();
    assert!(temporaries.len() <= 1, "{temporaries:?}");
    assert_eq!(left - temporaries.len(), 4_000);
    for file in [0, 500, 999] {
        let content = std::fs::read_to_string(test.path().join(format!("w/big/d3/f{file}"))).unwrap();
        assert_eq!(content, format!("content {file}\n"));
    }
}

/// The request of a recursive delete of `/w/big`.
const DELETE_BIG: &str = r#"{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/w/big","recursive":true}}}"#;

/// A server over stdio that has begun to delete `/w/big` (its answer is not waited for).
fn serving_a_tree_delete(test: &TestDir) -> Session {
    use std::io::Write as _;
    let mut session = Session::start(test);
    writeln!(session.stdin, "{DELETE_BIG}").unwrap();
    until("the delete's start", || delete_begun(test));
    session
}

/// How many files lie below `directory`.
fn walkdir_count(directory: &std::path::Path) -> usize {
    std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() { walkdir_count(&entry.path()) } else { 1 }
        })
        .sum()
}
