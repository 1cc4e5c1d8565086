//! `vfs serve --listen`: the streamable HTTP daemon, driven with raw HTTP requests (the MCP
//! behaviour over HTTP is proved with the Python SDK in `tests/test_http.py`).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::eqnice;
use crate::util::TestDir;

pub(crate) const TOKEN: &str = "0123456789abcdef-token";

/// A running daemon; killed when dropped.
pub(crate) struct Daemon {
    child: Child,
    pub(crate) address: SocketAddr,
    pub(crate) status: String,
}

impl Daemon {
    /// Starts `vfs serve --listen 127.0.0.1:0 ARGS` and waits for its start-up line.
    pub(crate) fn start(test: &TestDir, args: &[&str], token: Option<&str>) -> Self {
        Self::start_in(test, args, token, None)
    }

    /// [`Daemon::start`], with at most `descriptors` open files (through `prlimit`) when
    /// given, and its stderr kept in `stderr`.
    pub(crate) fn start_in(
        test: &TestDir,
        args: &[&str],
        token: Option<&str>,
        limited: Option<(u32, &std::sync::Arc<std::sync::Mutex<String>>)>,
    ) -> Self {
        let mut all = vec!["serve", "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let mut command = test.command(&all);
        let kept = limited.map(|(_, kept)| kept.clone());
        if let Some((descriptors, _)) = limited {
            let mut wrapped = std::process::Command::new("prlimit");
            wrapped
                .arg(format!("--nofile={descriptors}:{descriptors}"))
                .arg(command.get_program())
                .args(command.get_args())
                .current_dir(test.path())
                .env_remove("VFS_LOG")
                .env("NO_COLOR", "1");
            command = wrapped;
        }
        command.env_remove("VFS_TOKEN");
        if let Some(token) = token {
            command.env("VFS_TOKEN", token);
        }
        let mut child =
            command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn vfs");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let mut status = String::new();
        stderr.read_line(&mut status).expect("the start-up line");
        // Keep draining stderr so that the daemon never blocks on it.
        std::thread::spawn(move || match kept {
            Some(kept) => {
                let mut line = String::new();
                while stderr.read_line(&mut line).is_ok_and(|read| read > 0) {
                    kept.lock().unwrap().push_str(&line);
                    line.clear();
                }
            }
            None => {
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            }
        });
        let address = status
            .split("at http://")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|address| address.parse().ok())
            .unwrap_or_else(|| panic!("no address in the start-up line: {status}"));
        Self { child, address, status }
    }

    /// The daemon's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One request on a fresh connection; the whole response, headers lower-cased. Waits for
    /// it up to two minutes: a read the tests make slow on purpose (a file's hole of 1 or 4
    /// GiB) reads at the speed the machine fills its page cache, which on a VM whose memory
    /// the host took back was 150 MB/s (29 s for 4 GiB).
    pub(crate) fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
        let mut stream = TcpStream::connect(self.address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_mins(2))).expect("timeout");
        let mut text = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("\r\n");
        text.push_str(body);
        stream.write_all(text.as_bytes()).expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read the response");
        Response::parse(&answer)
    }

    /// A JSON-RPC POST to `path` with `token`.
    pub(crate) fn post(&self, path: &str, token: Option<&str>, extra: &[(&str, &str)], body: &str) -> Response {
        let bearer = token.map(|token| format!("Bearer {token}"));
        let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        if let Some(bearer) = &bearer {
            headers.push(("Authorization", bearer));
        }
        headers.extend_from_slice(extra);
        self.request("POST", path, &headers, body)
    }

    /// Sends SIGTERM and waits for the exit code.
    pub(crate) fn terminate(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        assert!(sent.success());
        let code = self.child.wait().expect("wait").code();
        std::mem::forget(self);
        code
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Response {
    pub(crate) fn parse(text: &str) -> Self {
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
        let mut lines = head.lines();
        let status =
            lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        Self { status, headers, body: body.to_owned() }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }
}

pub(crate) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

#[test]
fn listening_needs_a_token_of_sixteen_characters_or_more() {
    let test = TestDir::new();
    let run = test.run(&["serve", "--listen", "127.0.0.1:0"]);
    eqnice!(
        "error: --listen needs a bearer token: give --token-file FILE or set VFS_TOKEN\n\nhint: a token file holds one token per line: `TOKEN` grants /mcp, `CREW TOKEN` grants /mcp/CREW; make tokens with `openssl rand -hex 32`\n",
        run.stderr
    );
    assert_eq!(run.code, 2);

    test.file("tokens", "# the team's tokens\n\nshort\n0123456789abcdef\nreview 0123456789abcdef\na b c\n");
    let run = test.run(&["check", "--listen", "127.0.0.1:0", "--token-file", "tokens"]);
    eqnice!(
        "token file `tokens`: line 3: the token is shorter than 16 characters\n\
         token file `tokens`: line 5: `review` is not a crew this daemon hosts (--crew)\n\
         token file `tokens`: line 6: expected `TOKEN` or `CREW TOKEN`\n",
        run.stdout
    );
    assert_eq!(run.code, 2);

    let run = test.run(&["serve", "--listen", "127.0.0.1:0", "--token-file", "missing"]);
    eqnice!(
        "error: token file `missing`: no such file\n\nhint: a token file holds one token per line: `TOKEN` grants /mcp, `CREW TOKEN` grants /mcp/CREW; make tokens with `openssl rand -hex 32`\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
}

#[test]
fn daemon_options_without_listen_are_refused() {
    let test = TestDir::new();
    test.file("tokens", "0123456789abcdef\n");
    let run = test.run(&["serve", "--token-file", "tokens"]);
    eqnice!(
        "error: --token-file needs --listen: only the HTTP daemon takes tokens\n\nhint: add --listen HOST:PORT, like --listen 127.0.0.1:8080\n",
        run.stderr
    );
    assert_eq!(run.code, 2);
    let run = test.run(&["serve", "--allowed-origin", "https://agents.example.com"]);
    eqnice!(
        "error: --allowed-origin needs --listen: only the HTTP daemon checks origins\n\nhint: add --listen HOST:PORT, like --listen 127.0.0.1:8080\n",
        run.stderr
    );
}

/// The body of every `401`: one line that says what the server takes and how to send it.
pub(crate) const UNAUTHORIZED: &str = "{\"error\":{\"code\":-32001,\"message\":\"unauthorized: this server takes static bearer tokens; send `Authorization: Bearer <token>` with a token for this endpoint (ask the operator for one)\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n";

#[test]
fn a_request_without_the_right_token_gets_401_and_other_paths_404() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &[], Some(TOKEN));
    assert!(daemon.status.starts_with("vfs "), "{}", daemon.status);
    assert!(daemon.status.starts_with("vfs 0.1.0: listening at http://127.0.0.1:"), "{}", daemon.status);
    assert!(
        daemon.status.ends_with(" (MCP streamable HTTP); /mcp serves /workspace (ro); stop with SIGTERM or Ctrl-C\n"),
        "{}",
        daemon.status
    );
    let wrong = format!("{TOKEN}x");
    let short = &TOKEN[..TOKEN.len() - 1];
    for (path, token) in [
        ("/mcp", None),
        ("/mcp", Some(wrong.as_str())),
        ("/mcp", Some(short)),
        ("/mcp", Some("")),
        ("/mcp/review", Some(TOKEN)),
        ("/mcp/review", None),
    ] {
        let response = daemon.post(path, token, &[], INITIALIZE);
        assert_eq!(response.status, 401, "{path} {token:?}: {response:?}");
        assert_eq!(response.header("www-authenticate"), Some("Bearer realm=\"vfs\""));
        assert_eq!(response.header("content-type"), Some("application/json"));
        eqnice!(UNAUTHORIZED, response.body);
    }
    let basic = daemon.request("POST", "/mcp", &[("Authorization", &format!("Basic {TOKEN}"))], INITIALIZE);
    assert_eq!(basic.status, 401);
    for path in ["/", "/mcpx", "/mcp/a/b", "/mcp/", "/other"] {
        let response = daemon.post(path, Some(TOKEN), &[], INITIALIZE);
        let expected = if path == "/mcp/" { 200 } else { 404 };
        assert_eq!(response.status, expected, "{path}: {response:?}");
    }
}

#[test]
fn a_foreign_origin_or_host_gets_403() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &["--allowed-origin", "https://agents.example.com"], Some(TOKEN));
    let foreign = daemon.post("/mcp", Some(TOKEN), &[("Origin", "http://evil.example")], INITIALIZE);
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let allowed = daemon.post("/mcp", Some(TOKEN), &[("Origin", "https://agents.example.com")], INITIALIZE);
    assert_eq!(allowed.status, 200, "{allowed:?}");
    let local = format!("http://localhost:{}", daemon.address.port());
    let allowed = daemon.post("/mcp", Some(TOKEN), &[("Origin", &local)], INITIALIZE);
    assert_eq!(allowed.status, 200, "{allowed:?}");

    // DNS rebinding: a page of evil.example that resolves its name to 127.0.0.1.
    let mut stream = TcpStream::connect(daemon.address).expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: evil.example:{}\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{INITIALIZE}",
        daemon.address.port(),
        INITIALIZE.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    assert_eq!(Response::parse(&answer).status, 403, "{answer}");
}

#[test]
fn a_sigterm_right_after_the_start_up_line_shuts_the_daemon_down_gracefully() {
    // The line says "stop with SIGTERM": from the moment it is out, SIGTERM is a graceful
    // shutdown (exit 0), never the signal's default action (the daemon listened for it only
    // once it served, after the line, before).
    let test = TestDir::new();
    for round in 0..20 {
        let daemon = Daemon::start(&test, &[], Some(TOKEN));
        assert_eq!(daemon.terminate(), Some(0), "round {round}");
    }
}

#[test]
fn initialize_with_the_token_opens_a_session_and_sigterm_ends_the_daemon() {
    let test = TestDir::new();
    test.file("notes.txt", "hello\n");
    let daemon = Daemon::start(&test, &[], Some(TOKEN));
    let response = daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE);
    assert_eq!(response.status, 200, "{response:?}");
    let session = response.header("mcp-session-id").expect("a session id").to_owned();
    assert!(response.body.contains(r#""serverInfo":{"name":"vfs""#), "{}", response.body);
    let version = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let initialized =
        daemon.post("/mcp", Some(TOKEN), &version, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(initialized.status, 202, "{initialized:?}");
    let read = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/workspace/notes.txt"}}}"#;
    let answer = daemon.post("/mcp", Some(TOKEN), &version, read);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains(r#""text":"hello\n""#), "{}", answer.body);
    // Another session's id is no key: a request without the session gets no answer from it.
    let foreign = daemon.post("/mcp", Some(TOKEN), &[("mcp-session-id", "not-a-session")], read);
    assert_eq!(foreign.status, 404, "{foreign:?}");
    let bearer = format!("Bearer {TOKEN}");
    let ended = daemon.request("DELETE", "/mcp", &[("Authorization", &bearer), ("mcp-session-id", &session)], "");
    assert_eq!(ended.status, 204, "{ended:?}");
    assert_eq!(daemon.terminate(), Some(0));
}

#[test]
fn a_session_answers_only_the_token_that_opened_it() {
    // Another token of the same endpoint that learns a session's id gets what any unknown id
    // gets: the session's reads, changes and undo stay its opener's.
    let test = TestDir::new();
    test.file("notes.txt", "hello\n");
    test.file("tokens", &format!("{TOKEN}\n{OTHER}\n"));
    let daemon = Daemon::start(&test, &["--token-file", "tokens"], None);
    let opened = daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE);
    assert_eq!(opened.status, 200, "{opened:?}");
    let session = opened.header("mcp-session-id").expect("a session id").to_owned();
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(daemon.post("/mcp", Some(TOKEN), &headers, initialized).status, 202);
    let read = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/workspace/notes.txt"}}}"#;
    let unknown = daemon.post("/mcp", Some(OTHER), &[("mcp-session-id", "not-a-session")], read);
    assert_eq!((unknown.status, unknown.body.as_str()), (404, "Not Found: Session not found"));
    let foreign = daemon.post("/mcp", Some(OTHER), &headers, read);
    assert_eq!((foreign.status, foreign.body.as_str()), (unknown.status, unknown.body.as_str()), "{foreign:?}");
    let other_bearer = format!("Bearer {OTHER}");
    let end =
        |id: &str| daemon.request("DELETE", "/mcp", &[("Authorization", &other_bearer), ("mcp-session-id", id)], "");
    let (unknown, foreign) = (end("not-a-session"), end(&session));
    assert_eq!((foreign.status, foreign.body.as_str()), (unknown.status, unknown.body.as_str()), "{foreign:?}");
    // A session header the SDK cannot read as text it takes for none, and an `initialize`
    // with one opened a session that no cap counted and no token owned: refused, as are
    // two headers and an id longer than any the server gives.
    let refused = serde_json::json!({
        "jsonrpc": "2.0", "id": null,
        "error": {
            "code": -32600,
            "message": "invalid request: `Mcp-Session-Id` must be one header of visible ASCII characters (at most 256), the id the server gave at `initialize`",
        },
    });
    let long = "s".repeat(257);
    let odd: [&[(&str, &str)]; 4] = [
        &[("mcp-session-id", "\u{e9}")],
        &[("mcp-session-id", "a b")],
        &[("mcp-session-id", long.as_str())],
        &[("mcp-session-id", session.as_str()), ("mcp-session-id", session.as_str())],
    ];
    for headers in odd {
        let answer = daemon.post("/mcp", Some(OTHER), headers, INITIALIZE);
        let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
        assert_eq!((answer.status, body), (400, refused.clone()), "{headers:?}");
    }
    // And the session lives on for its own token.
    let answer = daemon.post("/mcp", Some(TOKEN), &headers, read);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains(r#""text":"hello\n""#), "{}", answer.body);
    assert_eq!(daemon.terminate(), Some(0));
}

#[test]
fn a_request_head_longer_than_the_read_buffer_is_refused_before_any_token_check() {
    // Each connection buffers at most 32 KiB of a request's head: a client with no token can
    // no longer make every connection hold hyper's default of about 400 KB.
    let test = TestDir::new();
    test.file("notes.txt", "hello\n");
    let daemon = Daemon::start(&test, &[], Some(TOKEN));
    // A head that never ends: refused once it passes the buffer, not at its time limit.
    let mut stream = TcpStream::connect(daemon.address).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nX-Padding: {}", daemon.address, "p".repeat(40 * 1024));
    stream.write_all(head.as_bytes()).expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert_eq!(answer.lines().next(), Some("HTTP/1.1 431 Request Header Fields Too Large"), "{answer}");
    let fits = "p".repeat(16 * 1024);
    let answer = daemon.post("/mcp", Some(TOKEN), &[("x-padding", fits.as_str())], INITIALIZE);
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(daemon.terminate(), Some(0));
}

/// A second token for `/mcp`.
const OTHER: &str = "another-token-0123456789";

/// An initialized MCP session on `path`, by raw HTTP.
struct Session<'a> {
    daemon: &'a Daemon,
    path: String,
    token: String,
    id: String,
    next: std::cell::Cell<u64>,
}

impl<'a> Session<'a> {
    fn open(daemon: &'a Daemon, path: &str, token: &str) -> Self {
        let response = daemon.post(path, Some(token), &[], INITIALIZE);
        assert_eq!(response.status, 200, "{path}: {response:?}");
        let id = response.header("mcp-session-id").expect("a session id").to_owned();
        let session = Self { daemon, path: path.to_owned(), token: token.to_owned(), id, next: 2.into() };
        let initialized = session.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(initialized.status, 202, "{initialized:?}");
        session
    }

    fn send(&self, body: &str) -> Response {
        let headers = [("mcp-session-id", self.id.as_str()), ("mcp-protocol-version", "2025-06-18")];
        self.daemon.post(&self.path, Some(&self.token), &headers, body)
    }

    /// Calls a tool; returns the result's text and whether it is an error.
    fn call(&self, tool: &str, arguments: &serde_json::Value) -> (String, bool) {
        let id = self.next.get();
        self.next.set(id + 1);
        let request = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": *arguments}
        });
        let response = self.send(&request.to_string());
        assert_eq!(response.status, 200, "{response:?}");
        let message: serde_json::Value = response
            .body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .find(|message| message["id"] == id)
            .unwrap_or_else(|| panic!("no response to {id}: {}", response.body));
        let result = &message["result"];
        let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {message}")).to_owned();
        (text, result["isError"] == true)
    }
}

#[test]
fn each_http_session_keeps_its_own_reads_before_edits() {
    let test = TestDir::new();
    test.file("out/a.txt", "one\n");
    let daemon = Daemon::start(&test, &["--mount", "out:/output:rw"], Some(TOKEN));
    let (first, second) = (Session::open(&daemon, "/mcp", TOKEN), Session::open(&daemon, "/mcp", TOKEN));
    let path = serde_json::json!({"path": "/output/a.txt"});
    let edit = |to: &str, from: &str| serde_json::json!({"path": "/output/a.txt", "edits": [{"oldText": from, "newText": to}]});
    assert_eq!(first.call("read_text_file", &path), ("one\n".to_owned(), false));
    // The first session's read is not the second's.
    assert_eq!(
        second.call("edit_file", &edit("two", "one")),
        (
            "read `/output/a.txt` first (you have not read it in this session); read it whole, or pass the \
             `expectedVersion` that `get_file_info` reports"
                .to_owned(),
            true
        )
    );
    assert!(!first.call("edit_file", &edit("two", "one")).1);
    assert_eq!(second.call("read_text_file", &path), ("two\n".to_owned(), false));
    assert!(!second.call("edit_file", &edit("three", "two")).1);
    // The second session's edit is a change behind the first one's back.
    assert_eq!(
        first.call("edit_file", &edit("four", "three")),
        ("read `/output/a.txt` first (it changed since you read it)".to_owned(), true)
    );
    assert_eq!(std::fs::read_to_string(test.path().join("out/a.txt")).unwrap(), "three\n");
}

const REVIEW_TOKEN: &str = "review-token-0123456789";
const BUILD_TOKEN: &str = "build-token-0123456789";

/// Two crews: `review` (a directory, named by it) needs /src; `builder` (a file named
/// `build.yaml`, named by its key) needs /output.
fn two_crews(test: &TestDir) {
    test.file("data/readme.txt", "source\n");
    test.dir("out");
    test.file("crews/review/crew.yaml", "agents: [reader]\nmounts: [/src]\n");
    test.file("crews/review/notes.txt", "review notes\n");
    test.file("crews/build/build.yaml", "name: builder\nmounts: [/output]\n");
    test.file("tokens", &format!("# per crew\nreview {REVIEW_TOKEN}\nbuilder {BUILD_TOKEN}\n"));
}

const TWO_CREWS: [&str; 10] = [
    "--mount",
    "data:/src:ro",
    "--mount",
    "out:/output:rw",
    "--crew",
    "crews/review",
    "--crew",
    "crews/build/build.yaml",
    "--token-file",
    "tokens",
];

#[test]
fn each_hosted_crew_has_its_endpoint_and_sees_only_its_own_roots() {
    let test = TestDir::new();
    two_crews(&test);
    let daemon = Daemon::start(&test, &TWO_CREWS, None);
    assert!(
        daemon.status.ends_with(
            " (MCP streamable HTTP); /mcp/review serves /crew (ro), /src (ro); /mcp/builder serves /crew (ro), /output (rw); stop with SIGTERM or Ctrl-C\n"
        ),
        "{}",
        daemon.status
    );
    let review = Session::open(&daemon, "/mcp/review", REVIEW_TOKEN);
    let builder = Session::open(&daemon, "/mcp/builder", BUILD_TOKEN);

    let read = |session: &Session, path: &str| session.call("read_text_file", &serde_json::json!({"path": path}));
    assert_eq!(read(&review, "/src/readme.txt"), ("source\n".to_owned(), false));
    assert_eq!(read(&review, "/crew/notes.txt"), ("review notes\n".to_owned(), false));
    assert_eq!(read(&builder, "/crew/build.yaml"), ("name: builder\nmounts: [/output]\n".to_owned(), false));

    // Another crew's roots and directory answer exactly as a root that does not exist.
    let missing = read(&review, "/nothing/crew.yaml");
    assert_eq!(missing, ("no mount serves this path; available mounts: `/crew` (ro), `/src` (ro)".to_owned(), true));
    for path in ["/output/x.txt", "/crews/crew.yaml", "/crews-1/build.yaml", "/crews-1"] {
        let other = read(&review, path);
        assert_eq!(other.0.replace(path, "/nothing/crew.yaml"), missing.0, "{path}");
        assert!(other.1);
    }
    let listing = review.call("list_directory", &serde_json::json!({"path": "/"}));
    assert_eq!(listing, ("[DIR] crew\n[DIR] src\n".to_owned(), false));
    let listing = builder.call("list_directory", &serde_json::json!({"path": "/"}));
    assert_eq!(listing, ("[DIR] crew\n[DIR] output\n".to_owned(), false));

    // The builder writes its own root; review cannot reach it.
    let wrote = builder.call("write_file", &serde_json::json!({"path": "/output/built.txt", "content": "ok\n"}));
    assert!(!wrote.1, "{wrote:?}");
    assert_eq!(std::fs::read_to_string(test.path().join("out/built.txt")).unwrap(), "ok\n");

    // A crew's token opens its own endpoint only; /mcp has no token, so it is not served.
    assert_eq!(daemon.post("/mcp/review", Some(BUILD_TOKEN), &[], INITIALIZE).status, 401);
    assert_eq!(daemon.post("/mcp/builder", Some(REVIEW_TOKEN), &[], INITIALIZE).status, 401);
    assert_eq!(daemon.post("/mcp", Some(REVIEW_TOKEN), &[], INITIALIZE).status, 401);
}

/// A crew given many token lines cannot take every session: with 8 sessions, 2 a token, and
/// four tokens for `review`, `review` opens six and is then refused for its endpoint, and
/// `builder`'s two are still there. (Before, `review` took all eight and `builder`'s first
/// `initialize` got `503`.)
#[test]
fn a_crew_with_many_tokens_leaves_another_crew_its_share_of_the_sessions() {
    let test = TestDir::new();
    two_crews(&test);
    let review: Vec<String> = (0..4).map(|line| format!("review-token-{line}-0123456789")).collect();
    let lines: Vec<String> = review.iter().map(|token| format!("review {token}\n")).collect();
    test.file("tokens", &format!("{}builder {BUILD_TOKEN}\n", lines.concat()));
    let mut args = TWO_CREWS.to_vec();
    args.extend_from_slice(&["--max-sessions", "8", "--max-sessions-per-token", "2"]);
    let daemon = Daemon::start(&test, &args, None);
    let open = |path: &str, token: &str| daemon.post(path, Some(token), &[], INITIALIZE);
    let opened: Vec<u16> = review
        .iter()
        .flat_map(|token| [open("/mcp/review", token), open("/mcp/review", token)])
        .map(|response| response.status)
        .collect();
    assert_eq!(opened, [200, 200, 200, 200, 200, 200, 503, 503]);
    let refused = open("/mcp/review", &review[3]);
    assert_eq!(refused.status, 503);
    eqnice!(
        "{\"error\":{\"code\":-32000,\"message\":\"unavailable: the server has as many sessions as it keeps for this endpoint; try again shortly\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        refused.body
    );
    assert_eq!(open("/mcp/builder", BUILD_TOKEN).status, 200);
    assert_eq!(open("/mcp/builder", BUILD_TOKEN).status, 200);
    assert_eq!(open("/mcp/builder", BUILD_TOKEN).status, 503, "eight in all");
    assert_eq!(daemon.terminate(), Some(0));
}

#[test]
fn mounts_and_check_show_the_daemon_each_crew_table() {
    let test = TestDir::new();
    two_crews(&test);
    let mut args = vec!["mounts", "--listen", "127.0.0.1:0", "--no-default-hide"];
    args.extend_from_slice(&TWO_CREWS);
    let run = test.run(&args);
    eqnice!(
        "/mcp/review (crew `review`, hosted at /crews):
ROOT      RIGHTS  VISIBILITY    ORIGIN                             PHYSICAL
/crew     ro      agent-facing  runner (--crew, hosted at /crews)  [TMP]/crews/review
/crews-1  ro      internal      runner (hosted crew `builder`)     [TMP]/crews/build
/src      ro      agent-facing  --mount                            [TMP]/data

/mcp/builder (crew `builder`, hosted at /crews-1):
ROOT     RIGHTS  VISIBILITY    ORIGIN                               PHYSICAL
/crew    ro      agent-facing  runner (--crew, hosted at /crews-1)  [TMP]/crews/build
/crews   ro      internal      runner (hosted crew `review`)        [TMP]/crews/review
/output  rw      agent-facing  --mount                              [TMP]/out
",
        test.redact(&run.stdout)
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    args[0] = "check";
    args.retain(|arg| *arg != "--no-default-hide");
    let run = test.run(&args);
    eqnice!("OK\n", run.stdout);
}

/// A settings file's journal is every endpoint's journal: each hosted crew's table has it, named
/// by the file, beside the crew's own roots.
#[test]
fn the_settings_journal_serves_every_hosted_crew() {
    let test = TestDir::new();
    two_crews(&test);
    test.file("conf/vfs.json", r#"{"journal": "../j", "journal_max_bytes": "512K"}"#);
    let mut args = vec!["mounts", "--listen", "127.0.0.1:0", "--no-default-hide", "--settings", "conf/vfs.json"];
    args.extend_from_slice(&TWO_CREWS);
    let run = test.run(&args);
    eqnice!(
        "/mcp/review (crew `review`, hosted at /crews):
ROOT          RIGHTS  VISIBILITY    ORIGIN                             PHYSICAL
/crew         ro      agent-facing  runner (--crew, hosted at /crews)  [TMP]/crews/review
/crews-1      ro      internal      runner (hosted crew `builder`)     [TMP]/crews/build
/llm-journal  rw      internal      runner (settings conf/vfs.json)    [TMP]/conf/../j
/src          ro      agent-facing  --mount                            [TMP]/data

/mcp/builder (crew `builder`, hosted at /crews-1):
ROOT          RIGHTS  VISIBILITY    ORIGIN                               PHYSICAL
/crew         ro      agent-facing  runner (--crew, hosted at /crews-1)  [TMP]/crews/build
/crews        ro      internal      runner (hosted crew `review`)        [TMP]/crews/review
/llm-journal  rw      internal      runner (settings conf/vfs.json)      [TMP]/conf/../j
/output       rw      agent-facing  --mount                              [TMP]/out
",
        test.redact(&run.stdout)
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The bound is the file's too: one below the least is refused for the daemon as for `call`.
    test.file("conf/vfs.json", r#"{"journal": "../j", "journal_max_bytes": 1000}"#);
    let run = test.run(&args);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("journal_max_bytes: `1000` is below 256K"), "{}", run.stderr);
}

#[test]
fn hosted_crews_are_refused_in_one_line_each() {
    let test = TestDir::new();
    two_crews(&test);
    test.file("crews/twin/crew.yaml", "name: review\n");
    test.file("crews/odd/crew.yaml", "name: \"a b\"\n");
    test.file("crews/review/inner/crew.yaml", "name: inner\n");
    test.file("crews/greedy/crew.yaml", "mounts: [/src, /secret]\n");
    let check = |crews: &[&str]| {
        let mut args = vec!["check", "--listen", "127.0.0.1:0", "--mount", "data:/src:ro", "--mount", "out:/output:rw"];
        for crew in crews {
            args.extend_from_slice(&["--crew", crew]);
        }
        let run = test.command(&args).env("VFS_TOKEN", TOKEN).output().expect("run");
        assert_eq!(run.status.code(), Some(2));
        test.redact(&String::from_utf8(run.stdout).unwrap())
    };
    eqnice!(
        "the crews `crews/review` and `crews/twin` are both named `review`: each crew needs its own endpoint /mcp/<name>\n",
        check(&["crews/review", "crews/twin"])
    );
    eqnice!(
        "crew `crews/odd` is named `a b`, which cannot name an endpoint: only letters, digits, `-`, `_` and `.` may name an endpoint\n",
        check(&["crews/odd"])
    );
    eqnice!(
        "the crews `crews/review` and `crews/review/inner` share the directory `[TMP]/crews/review`: a crew would see the other's files at /crew\n",
        check(&["crews/review", "crews/review/inner"])
    );
    eqnice!(
        "crew `greedy`: the crew needs `/secret`, but nothing provides it: pass `--mount <dir>:/secret`, or add an entry for `/secret` to the settings file\n",
        check(&["crews/greedy"])
    );
    // A crew's directory inside a root another crew may write: it could plant a definition.
    test.file("crew-tokens", &format!("builder {BUILD_TOKEN}\n"));
    let run = test.run(&[
        "check",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        "crew-tokens",
        "--mount",
        ".:/output:rw",
        "--mount",
        "data:/src:ro",
        "--crew",
        "crews/build/build.yaml",
        "--crew",
        "crews/review",
    ]);
    eqnice!(
        "crew `builder`: the internal root `/crews-1` (`[TMP]/crews/review`) lies inside `/output` at `/output/crews/review`, which is mounted rw; an agent could tell that something is there\n",
        test.redact(&run.stdout)
    );

    // Without --listen, one crew at most.
    let run = test.run(&["serve", "--crew", "crews/review", "--crew", "crews/build/build.yaml"]);
    eqnice!(
        "error: --crew is given 2 times, but a stdio server serves one crew\n\nhint: host several crews with the HTTP daemon: add --listen HOST:PORT, like --listen 127.0.0.1:8080\n",
        run.stderr
    );
}
