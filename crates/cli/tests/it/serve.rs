use crate::util::TestDir;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn responses(stdout: &str) -> Vec<serde_json::Value> {
    stdout.lines().map(|line| serde_json::from_str(line).expect("every stdout line is a JSON-RPC message")).collect()
}

fn by_id(messages: &[serde_json::Value], id: u64) -> &serde_json::Value {
    messages.iter().find(|message| message["id"] == id).unwrap_or_else(|| panic!("no response {id}: {messages:?}"))
}

#[test]
fn serves_over_stdio_and_survives_bad_input() {
    let test = TestDir::new();
    test.file("data/a.txt", "hi\n");
    let input = [
        INITIALIZE,
        INITIALIZED,
        "this is not json",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/src/a.txt"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":7}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","id":8}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/llm-logs/x"}}}"#,
    ]
    .join("\n")
        + "\n";
    let run = test.run_with_input(&["serve", "--mount", "data:/src", "--llm-log", "logs"], &input);
    test.assert_no_leak(&run.stdout);
    let messages = responses(&run.stdout);
    let parse_errors: Vec<_> = messages.iter().filter(|message| message["error"]["code"] == -32700).collect();
    assert_eq!(parse_errors.len(), 1, "{messages:?}");
    assert_eq!(parse_errors[0]["id"], serde_json::Value::Null);
    assert_eq!(by_id(&messages, 2)["result"]["content"][0]["text"], "hi\n");
    let structured = &by_id(&messages, 2)["result"]["structuredContent"];
    assert_eq!(structured["path"], "/src/a.txt");
    assert_eq!((structured["lineCount"].as_u64(), structured["truncated"].as_bool()), (Some(1), Some(false)));
    assert_eq!(structured.get("content"), None, "the file's text is sent once, as text content");
    assert_eq!(by_id(&messages, 3)["error"]["code"], -32602);
    let invalid = &by_id(&messages, 4)["result"];
    assert_eq!(invalid["isError"], true);
    assert_eq!(
        invalid["content"][0]["text"],
        "invalid arguments for `read_text_file`: `path` must be a string, not the number 7; write it like `\"path\": \"…\"`"
    );
    let tools = by_id(&messages, 5)["result"]["tools"].as_array().unwrap().len();
    assert_eq!(tools, 12, "read-only mounts list no write tools");
    assert_eq!(by_id(&messages, 7)["error"]["code"], -32601);
    let denied = &by_id(&messages, 6)["result"];
    assert_eq!(denied["isError"], true);
    assert_eq!(denied["content"][0]["text"], "no mount serves this path; available mounts: `/src` (ro)");
    // One operator line on stderr says what is served and how to connect.
    let first = run.stderr.lines().next().unwrap();
    assert!(first.contains("serving /src (ro) over MCP on stdin/stdout"), "{first}");
    assert_eq!(run.code, 0);
}

#[test]
fn a_client_that_leaves_before_initializing_ends_the_server_cleanly() {
    let test = TestDir::new();
    let run = test.run_with_input(&["serve"], "");
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "");
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}

#[test]
fn a_refused_launch_serves_nothing() {
    let test = TestDir::new();
    let run = test.run_with_input(&["serve", "--mount", "missing:/src"], INITIALIZE);
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert_eq!(
        test.redact(&run.stderr),
        "error: the directory `[TMP]/missing` for mount `/src` does not exist\n\nhint: create the directory first, or fix the path\n"
    );
}

/// The same conversation whatever stdin and stdout are: pipes (the other tests), regular files
/// (read with Tokio's blocking stdin), or a socket pair (as some clients spawn servers).
fn conversation() -> String {
    [
        INITIALIZE,
        INITIALIZED,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/src/a.txt"}}}"#,
    ]
    .join("\n")
        + "\n"
}

fn assert_answered(stdout: &str) {
    let messages = responses(stdout);
    assert_eq!(by_id(&messages, 1)["result"]["serverInfo"]["name"], "vfs");
    assert_eq!(by_id(&messages, 2)["result"]["content"][0]["text"], "hi\n");
}

#[test]
#[expect(clippy::disallowed_types, reason = "fixture: the server's stdin and stdout are files here")]
fn serves_when_stdin_and_stdout_are_files() {
    let test = TestDir::new();
    test.file("data/a.txt", "hi\n");
    let input = test.file("input.jsonl", &conversation());
    let output = test.path().join("output.jsonl");
    let status = test
        .command(&["serve", "--mount", "data:/src"])
        .stdin(std::fs::File::open(input).unwrap())
        .stdout(std::fs::File::create(&output).unwrap())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert_answered(&std::fs::read_to_string(output).unwrap());
}

#[test]
fn serves_over_a_socket_pair() {
    use std::io::{BufRead as _, Write as _};
    let test = TestDir::new();
    test.file("data/a.txt", "hi\n");
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let theirs_out = theirs.try_clone().unwrap();
    let mut child = test
        .command(&["serve", "--mount", "data:/src"])
        .stdin(std::os::fd::OwnedFd::from(theirs))
        .stdout(std::os::fd::OwnedFd::from(theirs_out))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    (&ours).write_all(conversation().as_bytes()).unwrap();
    let mut reader = std::io::BufReader::new(&ours);
    let mut stdout = String::new();
    for _ in 0..2 {
        reader.read_line(&mut stdout).unwrap();
    }
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
    assert_answered(&stdout);
}

/// A file whose last line lies behind a 2 GiB hole: reading from line 2 scans the hole, a call
/// that runs for a while (and stops at once when cancelled).
#[expect(clippy::disallowed_types, reason = "fixture: a sparse file is made on disk")]
fn slow_file(test: &TestDir) {
    let path = test.file("data/slow.txt", "first\n");
    let file = std::fs::OpenOptions::new().append(true).open(&path).expect("open the fixture");
    file.set_len(2 * 1024 * 1024 * 1024).expect("make a hole");
    drop(file);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open the fixture");
    std::io::Write::write_all(&mut file, b"\nlast\n").expect("write the last line");
}

const SLOW_READ: &str = r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/src/slow.txt","offset":3}}}"#;

/// The protocol loop never runs a call itself: a ping and a listing sent behind a long call are
/// answered before it.
#[test]
fn calls_run_concurrently_and_a_ping_never_waits() {
    let test = TestDir::new();
    slow_file(&test);
    test.file("data/a.txt", "a\n");
    let input = [
        INITIALIZE,
        INITIALIZED,
        SLOW_READ,
        r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"/src"}}}"#,
    ]
    .join("\n")
        + "\n";
    let run = test.run_with_input(&["serve", "--mount", "data:/src"], &input);
    let messages = responses(&run.stdout);
    let position = |id: u64| messages.iter().position(|message| message["id"] == id).expect("answered");
    assert!(position(11) < position(10), "the ping waited for the long call: {messages:?}");
    assert!(position(12) < position(10), "the listing waited for the long call: {messages:?}");
    assert_eq!(by_id(&messages, 10)["result"]["content"][0]["text"], "last\n");
    assert_eq!(run.code, 0);
}

/// `notifications/cancelled` stops the call, and no answer is sent for it; the server goes on.
#[test]
fn a_cancelled_call_gets_no_answer_and_the_server_goes_on() {
    let test = TestDir::new();
    slow_file(&test);
    let input = [
        INITIALIZE,
        INITIALIZED,
        SLOW_READ,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":10,"reason":"no longer needed"}}"#,
        r#"{"jsonrpc":"2.0","id":11,"method":"ping"}"#,
    ]
    .join("\n")
        + "\n";
    let run = test.run_with_input(&["serve", "--mount", "data:/src"], &input);
    let messages = responses(&run.stdout);
    assert!(messages.iter().all(|message| message["id"] != 10), "a cancelled call was answered: {messages:?}");
    assert_eq!(by_id(&messages, 11)["result"], serde_json::json!({}));
    assert_eq!(run.code, 0);
}

/// With `_meta.progressToken`, a long call sends `notifications/progress` before its answer.
#[test]
fn a_long_multi_file_read_reports_progress_before_its_answer() {
    let test = TestDir::new();
    slow_file(&test);
    test.file("data/a.txt", "a\n");
    let call = r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"read_multiple_files","arguments":{"paths":["/src/a.txt","/src/slow.txt","/src/a.txt"]},"_meta":{"progressToken":"p-20"}}}"#;
    let input = [INITIALIZE, INITIALIZED, call].join("\n") + "\n";
    let run = test.run_with_input(&["serve", "--mount", "data:/src"], &input);
    let messages = responses(&run.stdout);
    let answer = messages.iter().position(|message| message["id"] == 20).expect("answered");
    let progress: Vec<&serde_json::Value> =
        messages.iter().filter(|message| message["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "no progress: {messages:?}");
    for note in &progress {
        assert_eq!(note["params"]["progressToken"], "p-20");
        assert_eq!(note["params"]["total"], 3.0);
        let done = note["params"]["progress"].as_f64().unwrap();
        assert_eq!(note["params"]["message"], format!("{done} of 3 files read"));
    }
    let last = messages.iter().rposition(|message| message["method"] == "notifications/progress").unwrap();
    assert!(last < answer, "progress after the answer: {messages:?}");
}

/// The server makes its own copy of the pipe non-blocking, never the open file it inherited:
/// after it exits, another holder of the same pipe end still blocks as it expects (here, a
/// write into a full pipe waits for the reader instead of failing).
#[test]
fn the_inherited_pipe_stays_blocking() {
    use std::io::{Read as _, Write as _};
    let test = TestDir::new();
    test.file("data/a.txt", "hi\n");
    let (mut reader, writer) = std::io::pipe().unwrap();
    let ours = writer.try_clone().unwrap();
    let mut child = test
        .command(&["serve", "--mount", "data:/src"])
        .stdin(std::process::Stdio::piped())
        .stdout(writer)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(conversation().as_bytes()).unwrap();
    // Closing stdin ends the server; its answers wait in the pipe.
    assert!(child.wait().unwrap().success());
    let filler = std::thread::spawn(move || {
        let mut ours = ours;
        ours.write_all(&vec![0u8; 1024 * 1024])
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut received = Vec::new();
    reader.read_to_end(&mut received).unwrap();
    filler.join().unwrap().expect("a blocking write waits for the reader");
    let answers = received.iter().position(|&byte| byte == 0).unwrap();
    assert_answered(std::str::from_utf8(&received[..answers]).unwrap());
    assert_eq!(received.len() - answers, 1024 * 1024);
}

/// JSON that a lenient reader would skip (a number out of range, nesting deeper than 128, a
/// string that is not UTF-8) gets an error like any other malformed line, and so does JSON that
/// is no MCP request (a batch, no `jsonrpc`, a `tools/call` without its tool or with arguments
/// that are no object): each answered with the request's id where it could be read, saying
/// what is wrong, and the server goes on. (The SDK answered these with no id, or "method not
/// found" and the method's name.)
#[test]
fn every_malformed_line_gets_an_answer_with_its_id() {
    use std::io::{Read as _, Write as _};
    let test = TestDir::new();
    let mut child = test
        .command(&["serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn vfs");
    let mut input: Vec<u8> = Vec::new();
    for line in [INITIALIZE, INITIALIZED, r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":1e999}}"#] {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"x":{}{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    input.extend_from_slice(nested.as_bytes());
    input.push(b'\n');
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":{\"x\":\"\xff\xfe\"}}\n");
    // JSON, but not a request the SDK answers with its id and a reason.
    for line in [
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_text_file","arguments":[]}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#,
        r#"{"id":8,"method":"tools/list"}"#,
        r#"[{"jsonrpc":"2.0","id":9,"method":"ping"}]"#,
    ] {
        input.extend_from_slice(line.as_bytes());
        input.push(b'\n');
    }
    input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&input).unwrap();
    drop(stdin);
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert!(child.wait().unwrap().success());
    let messages = responses(&stdout);
    // Each answered with its id (read before what went wrong), and what is wrong.
    let errors: Vec<(serde_json::Value, i64, String)> = messages
        .iter()
        .filter(|message| message.get("error").is_some())
        .map(|message| {
            let error = &message["error"];
            (message["id"].clone(), error["code"].as_i64().unwrap(), error["message"].as_str().unwrap().to_owned())
        })
        .collect();
    let expected = [
        (2.into(), -32700, "parse error: the message is not valid JSON (number out of range at line 1 column 59)"),
        (
            3.into(),
            -32600,
            "invalid request: the message nests arrays and objects more than 128 deep; send flatter arguments",
        ),
        (
            4.into(),
            -32700,
            "parse error: the message is not valid JSON (invalid unicode code point at line 1 column 56)",
        ),
        (6.into(), -32602, "invalid params: `arguments` must be an object of the tool's arguments"),
        (7.into(), -32602, "invalid params: `name` must name the tool to call (a string; `tools/list` lists them)"),
        (8.into(), -32600, "invalid request: `jsonrpc` must be \"2.0\""),
        (
            serde_json::Value::Null,
            -32600,
            "invalid request: this server takes one message at a time, not a batch (an array of messages); send each by itself",
        ),
    ];
    let expected: Vec<(serde_json::Value, i64, String)> =
        expected.into_iter().map(|(id, code, message)| (id, code, message.to_owned())).collect();
    assert_eq!(errors, expected);
    assert_eq!(by_id(&messages, 5)["result"], serde_json::json!({}));
}

/// Writes `line` to a server that never has its stdout read, for two seconds, and returns how
/// many bytes the server took: a bounded server stops reading once its answers back up.
fn bytes_taken_without_reading(line: &str) -> usize {
    use std::io::Write as _;
    let test = TestDir::new();
    let mut child = test
        .command(&["serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn vfs");
    let mut stdin = child.stdin.take().unwrap();
    let taken = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = taken.clone();
    let line = format!("{line}\n");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(format!("{INITIALIZE}\n{INITIALIZED}\n").as_bytes());
        // At most 64 MiB; a server that keeps reading takes it all within the two seconds.
        for _ in 0..(64 * 1024 * 1024 / line.len()) {
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
            counter.fetch_add(line.len(), std::sync::atomic::Ordering::Relaxed);
        }
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    let taken = taken.load(std::sync::atomic::Ordering::Relaxed);
    child.kill().unwrap();
    child.wait().unwrap();
    writer.join().unwrap();
    taken
}

#[test]
fn a_client_that_never_reads_makes_the_server_stop_reading_junk() {
    let junk = "x".repeat(1023);
    let taken = bytes_taken_without_reading(&junk);
    // The pipes hold some 130 KiB, 64 parse errors wait; the rest stays with the client.
    assert!(taken < 4 * 1024 * 1024, "the server took {taken} bytes of junk it could not answer");
}

#[test]
fn a_client_that_never_reads_makes_the_server_stop_reading_requests() {
    let ping = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
    let taken = bytes_taken_without_reading(ping);
    // 256 requests in flight, plus what the pipes hold.
    assert!(taken < 1024 * 1024, "the server took {taken} bytes of requests it could not answer");
}

/// A request that reuses the id of one still running is refused (`-32600`, with that id) and
/// not carried out; the running one is answered as usual.
#[test]
fn a_request_reusing_a_running_id_is_refused() {
    let test = TestDir::new();
    slow_file(&test);
    let input = [
        INITIALIZE,
        INITIALIZED,
        SLOW_READ,
        r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"create_directory","arguments":{"path":"/src/made"}}}"#,
    ]
    .join("\n")
        + "\n";
    let run = test.run_with_input(&["serve", "--mount", "data:/src:rw"], &input);
    let messages = responses(&run.stdout);
    let tens: Vec<&serde_json::Value> = messages.iter().filter(|message| message["id"] == 10).collect();
    assert_eq!(tens.len(), 2, "{messages:?}");
    assert_eq!(
        tens[0],
        &serde_json::json!({"jsonrpc": "2.0", "id": 10, "error": {"code": -32600, "message": "invalid request: a request with this id is still running; give each request an id of its own"}})
    );
    assert_eq!(tens[1]["result"]["content"][0]["text"], "last\n");
    assert!(!test.path().join("data/made").exists(), "the refused request was carried out");
    assert_eq!(run.code, 0);
}

/// Once a call is cancelled, no more progress is sent for it: the client (the TypeScript SDK
/// reports one as an error, "unknown token") hears nothing of it after the cancellation.
#[test]
fn no_progress_follows_a_cancellation() {
    use std::io::{BufRead as _, Write as _};
    let test = TestDir::new();
    for index in 0..400 {
        test.file(&format!("data/big/f{index:03}.txt"), &"alpha beta gamma delta\n".repeat(4000));
    }
    let mut child = test
        .command(&["serve", "--mount", "data:/src"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn vfs");
    let mut stdin = child.stdin.take().expect("stdin");
    let (lines, received) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(serde_json::from_str(&line).expect("a JSON-RPC line")).is_err() {
                break;
            }
        }
    });
    let grep = r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"grep","arguments":{"pattern":"\\bzeta\\w+\\s+needle","path":"/src/big"},"_meta":{"progressToken":"p-30"}}}"#;
    writeln!(stdin, "{INITIALIZE}\n{INITIALIZED}\n{grep}").unwrap();
    let wait = std::time::Duration::from_secs(30);
    loop {
        let message = received.recv_timeout(wait).expect("a progress report before the answer");
        assert_ne!(message["id"], 30, "the grep ended before it could be cancelled: {message}");
        if message["method"] == "notifications/progress" {
            break;
        }
    }
    let cancel =
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":30,"reason":"no longer needed"}}"#;
    let ping = r#"{"jsonrpc":"2.0","id":31,"method":"ping"}"#;
    writeln!(stdin, "{cancel}\n{ping}").unwrap();
    // Whatever was on its way before the cancellation arrived comes before the ping's answer;
    // after it, nothing more of the cancelled call.
    loop {
        let message = received.recv_timeout(wait).expect("the ping's answer");
        if message["id"] == 31 {
            break;
        }
    }
    let after: Vec<serde_json::Value> =
        std::iter::from_fn(|| received.recv_timeout(std::time::Duration::from_millis(1500)).ok()).collect();
    assert_eq!(after, Vec::<serde_json::Value>::new(), "sent after the cancellation");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A server over stdio on sockets (as Node's `child_process` gives a child its stdio), its
/// input end, its output read line by line, and the time it started.
struct SocketServer {
    child: std::process::Child,
    input: std::os::unix::net::UnixStream,
    output: std::io::BufReader<std::os::unix::net::UnixStream>,
}

impl SocketServer {
    fn start(test: &TestDir, args: &[&str]) -> Self {
        use std::io::{BufRead as _, Write as _};
        let (mut input, theirs_in) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ours_out, theirs_out) = std::os::unix::net::UnixStream::pair().unwrap();
        let child = test
            .command(&[&["serve"][..], args].concat())
            .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs_in)))
            .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut output = std::io::BufReader::new(ours_out);
        writeln!(input, "{INITIALIZE}\n{INITIALIZED}").unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        assert!(line.contains("\"id\":1"), "{line}");
        Self { child, input, output }
    }

    /// The exit status, waiting at most 20 seconds (then the child is killed and `None`).
    fn exit_within_20_s(&mut self) -> Option<i32> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

/// A signal ends a server whose stdin is a socket (or a terminal) left open and idle: the
/// read of stdin, which never ends by itself there, is not waited for. (When the first signal
/// came to wait for the calls, the runtime's end waited for that read, and the server never
/// ended.)
#[test]
fn a_signal_ends_a_server_whose_stdin_is_a_socket_left_open() {
    let test = TestDir::new();
    test.dir("w");
    let mut server = SocketServer::start(&test, &["--mount", "./w:/w:rw"]);
    crate::util::signal(&server.child, "TERM");
    assert_eq!(server.exit_within_20_s(), Some(0));
    drop((server.input, server.output));
}

/// A signal after the client closed stdin (the protocol's own order of shutdown: close stdin,
/// then SIGTERM) cancels the calls still running, rather than waiting for them to end.
#[test]
fn a_signal_after_stdin_closed_cancels_the_calls_still_running() {
    use std::io::Write as _;
    if !crate::run::can_run() {
        return;
    }
    let test = TestDir::new();
    test.dir("w");
    let mut server = SocketServer::start(&test, &["--mount", "./w:/w:rw", "--allow-run"]);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo started > /w/started; sleep 120","timeoutSeconds":300}}}"#;
    writeln!(server.input, "{call}").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while !test.path().join("w/started").exists() {
        assert!(std::time::Instant::now() < deadline, "the command did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    server.input.shutdown(std::net::Shutdown::Write).unwrap();
    crate::util::signal(&server.child, "TERM");
    assert_eq!(server.exit_within_20_s(), Some(0), "ended without waiting for the two minutes' command");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut server.output, &mut rest).unwrap();
    assert_eq!(rest, "", "a cancelled call is not answered");
}
