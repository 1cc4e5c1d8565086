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
    assert_eq!(by_id(&messages, 2)["result"]["structuredContent"]["path"], "/src/a.txt");
    assert_eq!(by_id(&messages, 3)["error"]["code"], -32602);
    assert_eq!(by_id(&messages, 4)["error"]["code"], -32602);
    let tools = by_id(&messages, 5)["result"]["tools"].as_array().unwrap().len();
    assert_eq!(tools, 9, "read-only mounts list no write tools");
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
