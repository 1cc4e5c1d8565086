//! `vfs serve --listen` as a server people run, by raw HTTP: state under the 2026-07-28
//! protocol (no sessions), the answers a person or a browser meets, and the bounds that keep
//! one client from holding the daemon.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::eqnice;
use crate::http::{Daemon, INITIALIZE, Response, TOKEN, UNAUTHORIZED};
use crate::util::TestDir;

/// A `tools/call` of the 2026-07-28 protocol: no session, the version and the client in
/// `_meta` and in the headers.
fn modern_call(daemon: &Daemon, token: &str, id: u64, tool: &str, arguments: &serde_json::Value) -> (String, bool) {
    modern_call_with(daemon, token, id, tool, arguments, &[])
}

/// [`modern_call`] with `extra` headers.
fn modern_call_with(
    daemon: &Daemon,
    token: &str,
    id: u64,
    tool: &str,
    arguments: &serde_json::Value,
    extra: &[(&str, &str)],
) -> (String, bool) {
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            },
        },
    });
    let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", tool)];
    headers.extend_from_slice(extra);
    let response = daemon.post("/mcp", Some(token), &headers, &request.to_string());
    assert_eq!(response.status, 200, "{response:?}");
    let message = messages(&response)
        .into_iter()
        .find(|message| message["id"] == id)
        .unwrap_or_else(|| panic!("no response to {id}: {}", response.body));
    let result = &message["result"];
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text: {message}")).to_owned();
    (text, result["isError"] == true)
}

/// The JSON-RPC messages of a response, whether it is JSON or an event stream.
fn messages(response: &Response) -> Vec<serde_json::Value> {
    if let Ok(message) = serde_json::from_str::<serde_json::Value>(&response.body) {
        return vec![message];
    }
    response
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .collect()
}

fn log_files(test: &TestDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(test.path().join("logs"))
        .expect("the log directory")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn without_sessions_a_token_keeps_its_reads_and_one_log_file() {
    let test = TestDir::new();
    test.file("out/notes.txt", "one\n");
    let daemon = Daemon::start(&test, &["--mount", "out:/output:rw", "--llm-log", "logs"], Some(TOKEN));
    // A request refused before any tool runs leaves no file.
    assert_eq!(daemon.post("/mcp", None, &[], INITIALIZE).status, 401);
    assert_eq!(log_files(&test), Vec::<String>::new());

    // Read in one request, edit in the next: the token's memory holds between them.
    let (text, error) =
        modern_call(&daemon, TOKEN, 1, "read_text_file", &serde_json::json!({"path": "/output/notes.txt"}));
    assert_eq!((text.as_str(), error), ("one\n", false));
    let edit = serde_json::json!({"path": "/output/notes.txt", "edits": [{"oldText": "one", "newText": "two"}]});
    let (text, error) = modern_call(&daemon, TOKEN, 2, "edit_file", &edit);
    assert!(!error, "{text}");
    assert!(text.starts_with("edited `/output/notes.txt` (1 replacement)"), "{text}");
    assert_eq!(std::fs::read_to_string(test.path().join("out/notes.txt")).unwrap(), "two\n");
    let files = log_files(&test);
    assert_eq!(files.len(), 1, "{files:?}");
    let log = std::fs::read_to_string(test.path().join("logs").join(&files[0])).unwrap();
    let tools: Vec<String> = log
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["tool"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools, ["read_text_file", "edit_file"]);

    // A session of the handshake protocol has its own memory and file, made with its first
    // call: a session that calls nothing leaves none.
    let response = daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE);
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(log_files(&test).len(), 1);
    let session = response.header("mcp-session-id").unwrap().to_owned();
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    daemon.post("/mcp", Some(TOKEN), &headers, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let edit = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "edit_file", "arguments": {"path": "/output/notes.txt", "edits": [{"oldText": "two", "newText": "three"}]}},
    });
    let answer = daemon.post("/mcp", Some(TOKEN), &headers, &edit.to_string());
    let message = messages(&answer).into_iter().find(|message| message["id"] == 2).expect("an answer");
    assert_eq!(message["result"]["isError"], true, "{message}");
    assert_eq!(
        message["result"]["content"][0]["text"],
        "read `/output/notes.txt` first (you have not read it in this session); read it whole, or pass the `expectedVersion` that `get_file_info` reports"
    );
    assert_eq!(log_files(&test).len(), 2);
}

#[test]
fn a_client_looking_for_oauth_is_told_it_is_not_offered() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &[], Some(TOKEN));

    // OAuth is not offered, and says so.
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/register",
    ] {
        let response = daemon.request("GET", path, &[], "");
        assert_eq!(response.status, 404, "{path}");
        assert_eq!(response.header("content-type"), Some("application/json"));
        eqnice!(
            "{\"error\":\"not found: this server does not offer OAuth; it takes static bearer tokens, sent as `Authorization: Bearer <token>` (ask the operator for one)\"}\n",
            response.body
        );
    }
    let other = daemon.request("GET", "/other", &[], "");
    assert_eq!(
        (other.status, other.body.as_str()),
        (404, "{\"error\":\"not found: the MCP endpoints are /mcp and /mcp/<crew>\"}\n")
    );
}

#[test]
fn bodies_schemes_and_hosts_get_the_answers_of_the_specifications() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &[], Some(TOKEN));

    // The scheme's name is read in any case.
    let lower = daemon.request(
        "POST",
        "/mcp",
        &[
            ("Authorization", &format!("bearer {TOKEN}")),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        INITIALIZE,
    );
    assert_eq!(lower.status, 200, "{lower:?}");

    // A body that is not JSON, or not JSON-RPC, gets a JSON-RPC error.
    let broken = daemon.post("/mcp", Some(TOKEN), &[], "{\"jsonrpc\":");
    assert_eq!(broken.status, 400);
    eqnice!(
        "{\"error\":{\"code\":-32700,\"message\":\"parse error: the message is not valid JSON (EOF while parsing a value at line 1 column 11)\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        broken.body
    );
    let odd = daemon.post("/mcp", Some(TOKEN), &[], "[1, 2]");
    assert_eq!(odd.status, 400);
    eqnice!(
        "{\"error\":{\"code\":-32600,\"message\":\"invalid request: this server takes one message at a time, not a batch (an array of messages); send each by itself\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        odd.body
    );
    // JSON-RPC, but a `tools/call` without its tool: answered with its id, saying so.
    let nameless =
        daemon.post("/mcp", Some(TOKEN), &[], "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{}}");
    assert_eq!(nameless.status, 400);
    eqnice!(
        "{\"error\":{\"code\":-32602,\"message\":\"invalid params: `name` must name the tool to call (a string; `tools/list` lists them)\"},\"id\":5,\"jsonrpc\":\"2.0\"}\n",
        nameless.body
    );
    // What a parse refuses is not JSON either: a number out of range.
    let huge = daemon.post("/mcp", Some(TOKEN), &[], "{\"jsonrpc\":\"2.0\",\"id\":1e999,\"method\":\"ping\"}");
    assert_eq!((huge.status, huge.body.contains("-32700")), (400, true), "{huge:?}");
    // Under the byte bound, five million tiny values in a field no one reads are refused before
    // anything parses them whole (parsed, they took a gigabyte and seconds).
    let many =
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"junk\":[{}]}}", vec!["[]"; 5_000_000].join(","));
    let refused = daemon.post("/mcp", Some(TOKEN), &[], &many);
    assert_eq!(refused.status, 400);
    eqnice!(
        "{\"error\":{\"code\":-32600,\"message\":\"invalid request: the message holds more than 100000 JSON values; send fewer items in one request\"},\"id\":1,\"jsonrpc\":\"2.0\"}\n",
        refused.body
    );

    // The Host check includes the port.
    let mut stream = TcpStream::connect(daemon.address).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{INITIALIZE}",
        daemon.address.port() ^ 1,
        INITIALIZE.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert_eq!(Response::parse(&answer).status, 403, "{answer}");
}

#[test]
fn an_allowed_origin_gets_cors_answers_and_another_none() {
    let test = TestDir::new();
    let origin = "https://agents.example.com";
    let daemon = Daemon::start(&test, &["--allowed-origin", origin], Some(TOKEN));
    // CORS: an allowed origin's preflight needs no token; its answers carry the headers a
    // browser client reads; another origin gets none.
    let preflight = [
        ("Origin", origin),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "authorization, content-type, mcp-session-id"),
    ];
    let allowed = daemon.request("OPTIONS", "/mcp", &preflight, "");
    assert_eq!(allowed.status, 204, "{allowed:?}");
    assert_eq!(allowed.header("access-control-allow-origin"), Some(origin));
    assert_eq!(
        allowed.header("access-control-allow-headers"),
        Some(
            "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name"
        )
    );
    assert_eq!(allowed.header("access-control-allow-methods"), Some("GET, POST, DELETE, OPTIONS"));
    let foreign = daemon.request(
        "OPTIONS",
        "/mcp",
        &[("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")],
        "",
    );
    assert_eq!(foreign.status, 403);
    assert_eq!(foreign.header("access-control-allow-origin"), None);
    let unauthorized = daemon.post("/mcp", None, &[("Origin", origin)], INITIALIZE);
    assert_eq!(unauthorized.status, 401);
    assert_eq!(unauthorized.header("access-control-allow-origin"), Some(origin));
    eqnice!(UNAUTHORIZED, unauthorized.body);
    let opened = daemon.post("/mcp", Some(TOKEN), &[("Origin", origin)], INITIALIZE);
    assert_eq!(opened.status, 200);
    assert_eq!(opened.header("access-control-allow-origin"), Some(origin));
    assert_eq!(
        opened.header("access-control-expose-headers"),
        Some("Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate")
    );
}

#[test]
fn a_slow_or_large_request_is_cut_off_while_others_are_served() {
    let test = TestDir::new();
    let daemon = Daemon::start(
        &test,
        &["--header-timeout", "1", "--body-timeout", "1", "--max-request-bytes", "4096"],
        Some(TOKEN),
    );
    // Half a header, then nothing: the connection is closed after the timeout, and another
    // client is served meanwhile.
    let mut slow = TcpStream::connect(daemon.address).unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
    let started = Instant::now();
    assert_eq!(daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE).status, 200);
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(15), "the slow connection was held for {waited:?}");

    // A body that stops halfway: 408.
    let answer = answer_to_the_end(&mut body_begun(&daemon, TOKEN, 100));
    assert_eq!(answer.status, 408, "{answer:?}");
    eqnice!(
        "{\"error\":{\"code\":-32600,\"message\":\"the request body did not arrive in time; send it whole, at once\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        answer.body
    );

    // A body over the cap: 413, without reading it.
    let large =
        format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}", "x".repeat(5000));
    let refused = daemon.post("/mcp", Some(TOKEN), &[], &large);
    assert_eq!(refused.status, 413);
    eqnice!(
        "{\"error\":{\"code\":-32600,\"message\":\"the request body is larger than 4096 bytes\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        refused.body
    );
    assert_eq!(daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE).status, 200, "still serving");
    assert_eq!(daemon.terminate(), Some(0));
}

#[test]
fn past_a_cap_the_answer_is_503_and_the_daemon_goes_on() {
    let test = TestDir::new();
    test.file("tokens", &format!("{TOKEN}\nsecond-token-0123456789\n"));
    let daemon =
        Daemon::start(&test, &["--token-file", "tokens", "--max-sessions", "3", "--max-sessions-per-token", "2"], None);
    // Sessions: two for one token, then 503; another token still gets one; a session ended
    // gives its place back.
    let open = |token: &str| daemon.post("/mcp", Some(token), &[], INITIALIZE);
    let first = open(TOKEN);
    assert_eq!(first.status, 200);
    assert_eq!(open(TOKEN).status, 200);
    let refused = open(TOKEN);
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("5"));
    eqnice!(
        "{\"error\":{\"code\":-32000,\"message\":\"unavailable: the server has as many sessions as it keeps for this token; try again shortly\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        refused.body
    );
    assert_eq!(open("second-token-0123456789").status, 200);
    assert_eq!(open("second-token-0123456789").status, 503, "three sessions in all");
    let session = first.header("mcp-session-id").unwrap();
    let ended = daemon.request(
        "DELETE",
        "/mcp",
        &[("Authorization", &format!("Bearer {TOKEN}")), ("mcp-session-id", session)],
        "",
    );
    assert_eq!(ended.status, 204);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reopened = open(TOKEN).status;
    while reopened == 503 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        reopened = open(TOKEN).status;
    }
    assert_eq!(reopened, 200, "the ended session's place is given back");

    assert_eq!(daemon.terminate(), Some(0));
}

/// The request bodies held at once are bounded in bytes, over all tokens and for each: a body
/// past its token's share or past the whole gets `503` with `Retry-After` before it is read,
/// another token's body within the room is served meanwhile, and a body's bytes are given back
/// once its answer is sent.
#[test]
fn request_bodies_held_at_once_are_bounded_for_each_token_and_in_all() {
    let test = TestDir::new();
    test.file("tokens", &format!("{TOKEN}\nsecond-token-0123456789\nthird-token-0123456789\n"));
    // Room for two bodies of 4,000 bytes in all, one for each token (a quarter of the room,
    // at least one largest body).
    let daemon = Daemon::start(
        &test,
        &["--token-file", "tokens", "--max-request-bytes", "4096", "--max-request-bytes-held", "8192"],
        None,
    );
    // A body of 4,000 bytes that has arrived in part: its bytes are held meanwhile. The
    // pings are small enough that two of them fit in a token's share (one whose answer was
    // read may still be held a moment), and too large to fit beside a begun body.
    let ping = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"{}\"}}", "x".repeat(500));
    let refusal = |what: &str| {
        format!(
            "{{\"error\":{{\"code\":-32000,\"message\":\"unavailable: the server holds as many request bytes as it takes{what}; try again shortly\"}},\"id\":null,\"jsonrpc\":\"2.0\"}}\n"
        )
    };
    // The first token's second body: past its share.
    let (mut first, refused) = held_body(&daemon, TOKEN, 4000, || daemon.post("/mcp", Some(TOKEN), &[], &ping));
    assert_eq!(refused.header("retry-after"), Some("5"));
    eqnice!(refusal(" for this token"), refused.body);
    // A body without a declared length is counted as it arrives: refused at its first chunk.
    let mut chunked = TcpStream::connect(daemon.address).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n100\r\n{}\r\n",
        daemon.address,
        " ".repeat(256)
    );
    chunked.write_all(head.as_bytes()).unwrap();
    let answer = answer_to_the_end(&mut chunked);
    assert_eq!(answer.status, 503, "{answer:?}");
    eqnice!(refusal(" for this token"), answer.body);
    // Another token's body fits in the room left, and is answered.
    assert_eq!(daemon.post("/mcp", Some("second-token-0123456789"), &[], &ping).status, 400, "read whole and answered");
    // The room is full: a third token's body is refused too.
    let (_second, full) = held_body(&daemon, "second-token-0123456789", 4000, || {
        daemon.post("/mcp", Some("third-token-0123456789"), &[], &ping)
    });
    eqnice!(refusal(""), full.body);
    // The first body ends (answered): its bytes are given back.
    first.write_all(&[b' '; 3999]).unwrap();
    first.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = [0; 12];
    first.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 400", "a body that is not a request of MCP is answered");
    drop(first);
    let until_free = Instant::now() + Duration::from_secs(10);
    let mut served = daemon.post("/mcp", Some(TOKEN), &[], &ping).status;
    while served == 503 && Instant::now() < until_free {
        std::thread::sleep(Duration::from_millis(20));
        served = daemon.post("/mcp", Some(TOKEN), &[], &ping).status;
    }
    assert_eq!(served, 400, "held no more");
    assert_eq!(daemon.terminate(), Some(0));
}

/// Past `--max-connections`, a new connection takes the place of the oldest one that has shown
/// no valid token (which is closed), so that connections anyone can open for nothing cannot
/// keep token holders out; only when every connection served is a token holder's does a new
/// one get one 503 and close. Once one is let go, the daemon serves again.
#[test]
fn past_the_connection_cap_a_connection_without_a_token_gives_way_then_the_answer_is_503() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &["--max-connections", "2"], Some(TOKEN));
    // Connections without a token, each having sent the start of a request (the daemon
    // accepts them in the order they were opened).
    let stranger = || {
        let mut stream = TcpStream::connect(daemon.address).unwrap();
        stream.write_all(b"POST /mcp HTTP/1.1\r\n").unwrap();
        stream
    };
    let holder = || token_holder(&daemon);
    let (closed, open) = (closed_by_the_daemon, still_open);

    let (mut first, mut second) = (stranger(), stranger());
    assert_eq!(daemon.request("GET", "/other", &[], "").status, 404, "served in the oldest stranger's place");
    assert!(closed(&mut first), "the oldest connection without a token was closed");
    assert_eq!(open(&mut second), Ok(()), "the other one is still served");

    let (mut one, two) = (holder(), holder());
    assert!(closed(&mut second), "a token holder took the last stranger's place");
    let busy = daemon.request("GET", "/mcp", &[], "");
    assert_eq!(busy.status, 503, "{busy:?}");
    assert_eq!(busy.header("retry-after"), Some("5"));
    assert_eq!(open(&mut one), Ok(()), "a token holder's connection is never displaced");
    drop(two);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut served = daemon.request("GET", "/other", &[], "").status;
    while served == 503 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        served = daemon.request("GET", "/other", &[], "").status;
    }
    assert_eq!(served, 404);
    assert_eq!(daemon.terminate(), Some(0));
}

/// A token's connections past `--max-connections-per-token` are kept only while there is
/// room: at the cap they give way to a new connection as those without a token do, an idle
/// one before one answering a request, and the token's connections within its share never.
/// (When none is idle, the oldest answering one goes: `http::tests`, where no timing decides
/// which connection is answering.)
#[test]
fn past_a_tokens_share_of_connections_its_further_ones_give_way_idle_first() {
    let test = TestDir::new();
    let daemon = Daemon::start(
        &test,
        &[
            "--max-connections",
            "3",
            "--max-connections-per-token",
            "1",
            "--max-request-bytes",
            "4096",
            "--max-request-bytes-held",
            "8192",
        ],
        Some(TOKEN),
    );
    let (closed, open) = (closed_by_the_daemon, still_open);
    // The token's first connection (kept), then one in the middle of a request (its headers
    // and token sent, its body not), known to be answering by the bytes of its body held,
    // then an idle one after an answered request.
    let mut kept = token_holder(&daemon);
    let ping = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"{}\"}}", "x".repeat(500));
    let (mut first, _) = held_body(&daemon, TOKEN, 4000, || daemon.post("/mcp", Some(TOKEN), &[], &ping));
    let mut idle = token_holder(&daemon);
    assert_eq!(daemon.request("GET", "/other", &[], "").status, 404, "served in the idle surplus one's place");
    assert!(closed(&mut idle), "the token's idle connection past its share gave way");
    assert_eq!(open(&mut first), Ok(()), "the one answering a request did not");
    assert_eq!(open(&mut kept), Ok(()), "the one within the share did not");
    assert_eq!(daemon.terminate(), Some(0));
}

/// The one answer the daemon sends on `stream` before it closes it (waiting at most 20 s).
fn answer_to_the_end(stream: &mut TcpStream) -> Response {
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    Response::parse(&String::from_utf8_lossy(&answer))
}

/// A connection that has sent a request's head, with `token` and a body of `length` bytes,
/// and the body's first byte: the daemon is reading the body (and holds its bytes).
fn body_begun(daemon: &Daemon, token: &str, length: usize) -> TcpStream {
    let mut stream = TcpStream::connect(daemon.address).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {length}\r\n\r\n{{",
        daemon.address
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

/// A body of `length` bytes begun for `token` ([`body_begun`]) and known to be held: `probe`
/// is sent until it is refused with `503` (its answer is returned). A probe whose bytes are
/// counted before the begun body's head is read can leave no room for that body, which is
/// then refused at once: it is begun again.
fn held_body(daemon: &Daemon, token: &str, length: usize, probe: impl Fn() -> Response) -> (TcpStream, Response) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut begun = body_begun(daemon, token, length);
        while Instant::now() < deadline {
            let answer = probe();
            if answered(&mut begun) {
                break;
            }
            if answer.status == 503 {
                return (begun, answer);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(Instant::now() < deadline, "no probe was refused while a body of {length} bytes was begun");
    }
}

/// True when the daemon has answered on `stream`, or closed it.
fn answered(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let peeked = stream.peek(&mut [0; 1]);
    stream.set_nonblocking(false).unwrap();
    !matches!(&peeked, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
}

/// A token holder's connection, kept open after one answered request (a body that is not
/// JSON, answered `400` with the parse error).
fn token_holder(daemon: &Daemon) -> TcpStream {
    let mut stream = TcpStream::connect(daemon.address).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\nx",
        daemon.address
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let answer = read_one_response(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("-32700"), "{answer}");
    stream
}

/// True when the daemon closes `stream` within ten seconds.
fn closed_by_the_daemon(stream: &mut TcpStream) -> bool {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let read = stream.read(&mut [0; 64]);
    matches!(&read, Ok(0)) || read.is_err_and(|error| error.kind() == std::io::ErrorKind::ConnectionReset)
}

/// `Ok` when `stream` is still open and silent (nothing to read for 300 ms); otherwise what
/// the read gave, so that a failure says whether the connection was closed or answered.
fn still_open(stream: &mut TcpStream) -> Result<(), String> {
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buffer = [0; 64];
    match stream.read(&mut buffer) {
        Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Ok(()),
        Err(error) => Err(format!("the read failed: {error}")),
        Ok(count) => Err(format!("the read gave {:?}", String::from_utf8_lossy(&buffer[..count]))),
    }
}

/// Reads one HTTP response with a `Content-Length` body from a connection kept open.
fn read_one_response(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut byte = [0_u8];
    while !bytes.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "the connection ended before the headers");
        bytes.push(byte[0]);
    }
    let headers = String::from_utf8(bytes.clone()).unwrap();
    let length: usize = headers
        .lines()
        .find_map(|line| {
            line.to_ascii_lowercase().strip_prefix("content-length:").map(|value| value.trim().parse().unwrap())
        })
        .expect("a Content-Length");
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    bytes.extend(body);
    String::from_utf8(bytes).unwrap()
}

#[test]
fn an_idle_session_ends_and_its_client_is_told() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &["--session-idle", "1"], Some(TOKEN));
    let response = daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE);
    let session = response.header("mcp-session-id").unwrap().to_owned();
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    daemon.post("/mcp", Some(TOKEN), &headers, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(daemon.post("/mcp", Some(TOKEN), &headers, ping).status, 200);
    std::thread::sleep(Duration::from_millis(2500));
    let gone = daemon.post("/mcp", Some(TOKEN), &headers, ping);
    assert_eq!(gone.status, 404, "{gone:?}");
}

/// Out of descriptors, `accept` fails at once, again and again: the daemon pauses and says
/// so instead of spinning, and serves again once descriptors are free.
#[test]
fn out_of_descriptors_the_accept_loop_pauses_and_recovers() {
    let test = TestDir::new();
    let kept = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let daemon = Daemon::start_in(&test, &["--max-connections", "1000"], Some(TOKEN), Some((48, &kept)));
    let pid = daemon.pid();
    let held: Vec<TcpStream> = (0..80).filter_map(|_| TcpStream::connect(daemon.address).ok()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(2));
    let spent = cpu_seconds(pid) - before;
    assert!(spent < 0.5, "the accept loop spun: {spent:.2} s of CPU in 2 s");
    assert!(
        kept.lock().unwrap().contains("cannot accept a connection; pausing"),
        "no warning: {}",
        kept.lock().unwrap()
    );
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut status = 0;
    while status != 200 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        status = daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE).status;
    }
    assert_eq!(status, 200, "the daemon did not serve again");
}

/// The process's user and system CPU seconds, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the daemon's stat");
    let fields: Vec<&str> = stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// In a session, a request that reuses the id of one still running is refused (it would take
/// over the running one's answer), as over stdio; the running one is answered as usual.
#[test]
fn a_session_request_reusing_a_running_id_is_refused() {
    let test = TestDir::new();
    slow_file(&test);
    let daemon = std::sync::Arc::new(Daemon::start(&test, &["--mount", "data:/src"], Some(TOKEN)));
    let response = daemon.post("/mcp", Some(TOKEN), &[], INITIALIZE);
    let session = response.header("mcp-session-id").unwrap().to_owned();
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    daemon.post("/mcp", Some(TOKEN), &headers, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let slow = r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/src/slow.txt","offset":3}}}"#;
    let running = {
        let (daemon, session) = (daemon.clone(), session.clone());
        // A probe below may hold the id when the slow read arrives: it tries again then.
        std::thread::spawn(move || {
            let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let answer = daemon.post("/mcp", Some(TOKEN), &headers, slow);
                if answer.status != 400 || Instant::now() > deadline {
                    return answer;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Until the daemon has read the slow read, a ping with its id is answered at once; from
    // then on it is refused.
    let again = r#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut refused = daemon.post("/mcp", Some(TOKEN), &headers, again);
    while refused.status == 200 && !running.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        refused = daemon.post("/mcp", Some(TOKEN), &headers, again);
    }
    assert_eq!(refused.status, 400, "{refused:?}");
    eqnice!(
        "{\"error\":{\"code\":-32600,\"message\":\"invalid request: a request with this id is still running; give each request an id of its own\"},\"id\":10,\"jsonrpc\":\"2.0\"}\n",
        refused.body
    );
    let answer = running.join().unwrap();
    let message = messages(&answer).into_iter().find(|message| message["id"] == 10).expect("the slow read's answer");
    assert_eq!(message["result"]["content"][0]["text"], "last\n");
    // Once answered, the id may be used again.
    let reused = daemon.post("/mcp", Some(TOKEN), &headers, again);
    assert_eq!(reused.status, 200, "{reused:?}");
}

/// `data/slow.txt`: its last line lies behind a 1 GiB hole, so a read from line 3 runs for a
/// while.
#[expect(clippy::disallowed_types, reason = "fixture: a sparse file is made on disk")]
fn slow_file(test: &TestDir) {
    let path = test.file("data/slow.txt", "first\n");
    let file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.set_len(1024 * 1024 * 1024).unwrap();
    drop(file);
    std::io::Write::write_all(&mut std::fs::OpenOptions::new().append(true).open(&path).unwrap(), b"\nlast\n").unwrap();
}

/// One token's requests in flight are bounded; another token is served meanwhile, and the
/// first is again once its request is answered.
#[test]
fn a_tokens_requests_in_flight_are_bounded_and_others_go_on() {
    let test = TestDir::new();
    slow_file(&test);
    test.file("tokens", &format!("{TOKEN}\nsecond-token-0123456789\n"));
    let args =
        ["--mount", "data:/src", "--token-file", "tokens", "--max-requests-per-token", "1", "--call-timeout", "600"];
    let daemon = std::sync::Arc::new(Daemon::start(&test, &args, None));
    let call = |id: u64, path: &str, offset: u64| {
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"}}"#;
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"{path}","offset":{offset}}},{meta}}}}}"#
        )
    };
    let headers =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "read_text_file")];
    let running = {
        let (daemon, slow) = (daemon.clone(), call(1, "/src/slow.txt", 3));
        // A probe below may hold the place when the slow read arrives: like a client told
        // to retry, it tries again.
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let answer = daemon.post("/mcp", Some(TOKEN), &headers, &slow);
                if answer.status != 503 || Instant::now() > deadline {
                    return answer;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // The slow read holds the token's one place once the daemon has read it; until then a
    // quick call still finds room (it answers at once: the file looks binary from line 1).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut refused = daemon.post("/mcp", Some(TOKEN), &headers, &call(2, "/src/slow.txt", 1));
    while refused.status == 200 && !running.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        refused = daemon.post("/mcp", Some(TOKEN), &headers, &call(2, "/src/slow.txt", 1));
    }
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("5"));
    eqnice!(
        "{\"error\":{\"code\":-32000,\"message\":\"unavailable: the server has as many requests running as it takes for this token; try again shortly\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
        refused.body
    );
    let other = daemon.post("/mcp", Some("second-token-0123456789"), &headers, &call(3, "/src/slow.txt", 1));
    assert_eq!(other.status, 200, "{other:?}");
    let answer = running.join().unwrap();
    let message = messages(&answer).into_iter().find(|message| message["id"] == 1).expect("the slow read's answer");
    assert_eq!(message["result"]["content"][0]["text"], "last\n");
    let again = daemon.post("/mcp", Some(TOKEN), &headers, &call(4, "/src/slow.txt", 1));
    assert_eq!(again.status, 200, "{again:?}");
}

/// A token's tool calls past `--max-calls-per-session` (under 2026-07-28 a token is the
/// session) wait their turn and are answered, never refused; its listing of the tools is not
/// a tool call and does not wait, and another token's call goes on meanwhile.
#[test]
fn a_tokens_calls_past_its_bound_wait_their_turn_and_others_go_on() {
    let test = TestDir::new();
    slower_file(&test);
    test.file("tokens", &format!("{TOKEN}\nsecond-token-0123456789\n"));
    // The slow read is never cut by the call's time budget, however slow the machine.
    let args =
        ["--mount", "data:/src", "--token-file", "tokens", "--max-calls-per-session", "1", "--call-timeout", "600"];
    let daemon = std::sync::Arc::new(Daemon::start(&test, &args, None));
    let before = read_so_far(&daemon);
    let slow = {
        let daemon = daemon.clone();
        std::thread::spawn(move || {
            let answer = modern_call(
                &daemon,
                TOKEN,
                1,
                "read_text_file",
                &serde_json::json!({"path": "/src/slow.txt", "offset": 3}),
            );
            (answer, Instant::now())
        })
    };
    // The slow read holds the token's one place once the daemon reads the file's hole (a
    // fixed pause was not enough on a loaded machine).
    let waited = Instant::now();
    while read_so_far(&daemon) < before + (256 << 20) {
        assert!(waited.elapsed() < Duration::from_mins(1), "the slow read never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let listing = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}});
    let listed_tools = daemon.post(
        "/mcp",
        Some(TOKEN),
        &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")],
        &listing.to_string(),
    );
    assert_eq!(listed_tools.status, 200, "{listed_tools:?}");
    assert!(
        messages(&listed_tools).iter().any(|message| message["id"] == 2 && message["result"]["tools"].is_array()),
        "{listed_tools:?}"
    );
    let listed = Instant::now();
    let other = modern_call(
        &daemon,
        "second-token-0123456789",
        3,
        "get_file_info",
        &serde_json::json!({"path": "/src/slow.txt"}),
    );
    assert!(!other.1, "{}", other.0);
    let others = Instant::now();
    // A session id no session has is no owner of its own: without a session, the token is
    // the owner whatever the header says (a new id on each call once made each its own).
    let quick = modern_call_with(
        &daemon,
        TOKEN,
        4,
        "get_file_info",
        &serde_json::json!({"path": "/src/slow.txt"}),
        &[("mcp-session-id", "made-up-session-4")],
    );
    // Judged by what the daemon had read when it answered, not by the clients' clocks (the
    // slow read's thread may see its answer after this one sees the next).
    let read_when_quick = read_so_far(&daemon);
    assert!(!quick.1, "{}", quick.0);
    let ((text, failed), slow_done) = slow.join().unwrap();
    assert_eq!((text.as_str(), failed), ("last\n", false));
    assert!(listed < slow_done, "the listing was answered while the slow read ran");
    assert!(others < slow_done, "another token's call was answered while the slow read ran");
    assert!(
        read_when_quick >= before + (4 << 30),
        "the same token's second call waited for its turn: answered when {} bytes were read",
        read_when_quick - before
    );
}

/// The bytes the daemon's process has read so far (`rchar` of `/proc/PID/io`).
#[expect(clippy::disallowed_methods, reason = "fixture: the process table")]
fn read_so_far(daemon: &Daemon) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{}/io", daemon.pid())).unwrap();
    io.lines().find_map(|line| line.strip_prefix("rchar: ")).unwrap().trim().parse().unwrap()
}

/// `data/slow.txt` with its last line behind a 4 GiB hole: a read from line 3 runs for
/// seconds even on a quiet machine.
#[expect(clippy::disallowed_types, reason = "fixture: a sparse file is made on disk")]
fn slower_file(test: &TestDir) {
    let path = test.file("data/slow.txt", "first\n");
    let file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    file.set_len(4 * 1024 * 1024 * 1024).unwrap();
    drop(file);
    std::io::Write::write_all(&mut std::fs::OpenOptions::new().append(true).open(&path).unwrap(), b"\nlast\n").unwrap();
}

/// With every connection kept, connections opened without end and sending nothing cost the
/// daemon a bounded number of descriptors (each told `503` waits for its request's head at
/// most two seconds, and at most 64 wait at once; the rest are closed unanswered), and it
/// answers `503` again once they are gone.
#[test]
fn past_the_cap_connections_sending_nothing_cost_a_bounded_number_of_descriptors() {
    let test = TestDir::new();
    let daemon = Daemon::start(&test, &["--max-connections", "2"], Some(TOKEN));
    let descriptors = || std::fs::read_dir(format!("/proc/{}/fd", daemon.pid())).unwrap().count();
    let _kept = [token_holder(&daemon), token_holder(&daemon)];
    let before = descriptors();
    let mut silent: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(daemon.address).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = descriptors();
    assert!(during <= before + 64 + 8, "{during} descriptors with 300 silent connections, {before} before");
    for stream in &mut silent {
        assert!(closed_by_the_daemon(stream), "a silent connection was left open");
    }
    drop(silent);
    let busy = daemon.request("GET", "/mcp", &[], "");
    assert_eq!(busy.status, 503, "{busy:?}");
    assert_eq!(daemon.terminate(), Some(0));
}
