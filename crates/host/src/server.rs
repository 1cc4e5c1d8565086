//! The MCP server over stdio, with the official Rust SDK (`rmcp`).
//!
//! stdout carries only the protocol. `vfs serve` runs this on a single-threaded runtime: a
//! client's messages are read, answered and written on one thread, and a tool call on local
//! mounts runs in place (a call waits for the one before it, as it would from a client that
//! sends one request at a time). With an object-storage mount, calls go to the blocking pool,
//! still one at a time and in the order they came, so the server keeps reading (pings,
//! cancellations) while the network answers. stdin and stdout, when they are
//! pipes or sockets, are driven by the event loop directly.
//! Client-sent roots are ignored: the operator's mounts are the whole of what an agent can
//! reach, and a client (which acts for the agent) must not be able to widen it.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::tools::{CallError, ToolService};

/// The MCP server: a [`ToolService`] behind the protocol.
#[derive(Debug, Clone)]
pub struct VfsServer {
    tools: ToolService,
    /// Object-storage calls take turns, in the order they came (Tokio's mutex is fair).
    turns: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl VfsServer {
    /// A server for these tools.
    #[must_use]
    pub fn new(tools: ToolService) -> Self {
        Self { tools, turns: std::sync::Arc::default() }
    }

    /// A one-line summary of the tools listed, for the operator's start-up line.
    #[must_use]
    pub fn tool_summary(&self) -> String {
        crate::tools::listed_names(&self.tools.listed_tools())
    }
}

impl ServerHandler for VfsServer {
    fn get_info(&self) -> ServerConfig {
        let instructions = format!(
            "Files are reached by virtual paths under the mounts below; call list_mounts for details.\n\n{}",
            self.tools.registry().prompt_table()
        );
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("vfs", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.tools.registry().scrub(&instructions).into_owned())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.listed_tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tools = self.tools.clone();
        let name = request.name.into_owned();
        let arguments = request.arguments;
        // The tools are synchronous file work. Local work is short and bounded: it runs in
        // place, which saves a hand-off to another thread and back per call (about 15 us of a
        // 100 us read over a pipe). A registry with an object store waits on the network, so
        // its calls go to the blocking pool and the server keeps reading requests meanwhile.
        let flavor = tokio::runtime::Handle::current().runtime_flavor();
        let outcome = if self.tools.registry().has_object_storage() {
            // One at a time and in order, as in place: a read sent right after a write must
            // see it.
            let _turn = self.turns.lock().await;
            tokio::task::spawn_blocking(move || tools.call(&name, arguments)).await.map_err(|error| {
                tracing::error!(%error, "a tool call panicked");
                ErrorData::internal_error("the tool failed unexpectedly", None)
            })?
        } else if flavor == tokio::runtime::RuntimeFlavor::MultiThread {
            tokio::task::block_in_place(move || tools.call(&name, arguments))
        } else {
            tools.call(&name, arguments)
        };
        match outcome {
            Ok(output) => Ok(output.to_call_result().into()),
            Err(error @ (CallError::UnknownTool(_) | CallError::InvalidArguments { .. })) => {
                Err(ErrorData::invalid_params(error.to_string(), None))
            }
        }
    }
}

/// Longest message accepted on stdin (the SDK's own default bound).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Serves `tools` over stdin/stdout until the client disconnects. A client that closes the
/// connection before initializing (stdin at end of file) is a normal end, not an error.
///
/// stdin passes through a filter before it reaches the SDK: a line that is not JSON at all gets
/// the JSON-RPC parse error (`-32700`, `id: null`) that the SDK would drop silently, and the
/// server keeps serving. stdout is written by one task, line by line, so those answers never
/// interleave with the SDK's messages.
pub async fn serve_stdio(tools: ToolService) -> std::io::Result<()> {
    let (to_server, from_client) = tokio::io::duplex(64 * 1024);
    let (to_client, from_server) = tokio::io::duplex(64 * 1024);
    let (parse_errors, parse_errors_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let (input, output) = stdio();
    tokio::spawn(pump_input(input, to_server, parse_errors));
    let output = tokio::spawn(pump_output(from_server, parse_errors_rx, output));
    let served = match VfsServer::new(tools).serve((from_client, to_client)).await {
        Ok(server) => server.waiting().await.map(|_| ()).map_err(std::io::Error::other),
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("the client closed the connection before initializing");
            Ok(())
        }
        Err(error) => Err(std::io::Error::other(error.to_string())),
    };
    // The server's end of the output pipe is closed now; let the writer drain it.
    let written = output.await.map_err(std::io::Error::other)?;
    served.and(written)
}

type Input = Box<dyn AsyncRead + Unpin + Send>;
type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// stdin and stdout as readiness-driven streams when they are pipes (as MCP clients spawn
/// servers), else Tokio's `stdin()`/`stdout()`. Those hand every read and write to a
/// blocking-pool thread and back: two thread hand-offs per message that a pipe registered with
/// the event loop does without.
///
/// Non-blocking mode is a flag of the open file, which every process holding that end of the
/// pipe shares (a shell that started `vfs serve`, the next command of a script). So the pipe
/// is opened afresh through `/proc/self/fd`, which gives this process a file of its own, and
/// only that one is made non-blocking. Anything else (a socket, a terminal, a file, no
/// `/proc`) keeps Tokio's blocking stdin and stdout and leaves the inherited flags alone.
fn stdio() -> (Input, Output) {
    // Tokio checks that what it opened is a FIFO; a socket cannot be opened this way at all.
    let options = tokio::net::unix::pipe::OpenOptions::new();
    let input = options
        .open_receiver("/proc/self/fd/0")
        .map_or_else(|_| Box::new(tokio::io::stdin()) as Input, |pipe| Box::new(pipe) as Input);
    let output = options
        .open_sender("/proc/self/fd/1")
        .map_or_else(|_| Box::new(tokio::io::stdout()) as Output, |pipe| Box::new(pipe) as Output);
    (input, output)
}

/// What one bounded line read found.
enum Line {
    /// A complete line (without its newline), or the last bytes before end of file.
    Text,
    /// The line was longer than the bound and was skipped.
    TooLong,
    /// End of file.
    End,
}

/// Reads one `\n`-terminated line into `buffer`, never holding more than `limit` bytes.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buffer: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    buffer.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if too_long {
                Line::TooLong
            } else if buffer.is_empty() {
                Line::End
            } else {
                Line::Text
            });
        }
        let (chunk, found) = match available.iter().position(|&byte| byte == b'\n') {
            Some(index) => (&available[..index], Some(index + 1)),
            None => (available, None),
        };
        if !too_long {
            if buffer.len() + chunk.len() > limit {
                too_long = true;
                buffer.clear();
            } else {
                buffer.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(available.len());
        reader.consume(used);
        if found.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Text });
        }
    }
}

fn parse_error(message: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32700, "message": message },
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// Copies client lines to the SDK; answers lines that are not JSON with a parse error.
async fn pump_input<R, W>(input: R, mut to_server: W, parse_errors: tokio::sync::mpsc::UnboundedSender<Vec<u8>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        let answer = match read_line(&mut reader, &mut line, MAX_LINE_BYTES).await {
            Ok(Line::End) => break,
            Err(error) => {
                tracing::warn!(%error, "cannot read stdin");
                break;
            }
            Ok(Line::TooLong) => Some(parse_error("parse error: the message is longer than 16 MiB")),
            Ok(Line::Text) if line.iter().all(u8::is_ascii_whitespace) => None,
            Ok(Line::Text) => match serde_json::from_slice::<serde::de::IgnoredAny>(&line) {
                Ok(_) => {
                    line.push(b'\n');
                    if to_server.write_all(&line).await.is_err() {
                        break; // The server has stopped.
                    }
                    None
                }
                Err(_) => Some(parse_error("parse error: the message is not JSON")),
            },
        };
        if let Some(answer) = answer {
            tracing::warn!("answered a message that is not JSON with a parse error");
            if parse_errors.send(answer).is_err() {
                break;
            }
        }
    }
    let _ = to_server.shutdown().await;
}

/// Writes the SDK's messages and the parse errors to stdout, whole lines only.
async fn pump_output<R, W>(
    from_server: R,
    mut parse_errors: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    mut output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(from_server);
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        tokio::select! {
            read = reader.read_until(b'\n', &mut line) => {
                if read? == 0 {
                    break;
                }
                output.write_all(&line).await?;
                output.flush().await?;
                line.clear();
            }
            answer = parse_errors.recv(), if errors_open => match answer {
                Some(answer) => {
                    output.write_all(&answer).await?;
                    output.flush().await?;
                }
                None => errors_open = false,
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_a_long_line_is_skipped_whole() {
        let mut input: &[u8] = b"short\n0123456789abc\nnext\nlast";
        let mut buffer = Vec::new();
        let mut seen = Vec::new();
        loop {
            match read_line(&mut input, &mut buffer, 8).await.unwrap() {
                Line::Text => seen.push(String::from_utf8(buffer.clone()).unwrap()),
                Line::TooLong => seen.push("<too long>".to_owned()),
                Line::End => break,
            }
        }
        assert_eq!(seen, ["short", "<too long>", "next", "last"]);
    }

    #[tokio::test]
    async fn lines_that_are_not_json_get_a_parse_error_and_the_rest_pass() {
        let input: &[u8] = b"{\"a\":1}\nnot json\n\n[1,2]\n";
        let (to_server, mut from_client) = tokio::io::duplex(1024);
        let (errors, mut errors_rx) = tokio::sync::mpsc::unbounded_channel();
        pump_input(input, to_server, errors).await;
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut from_client, &mut passed).await.unwrap();
        assert_eq!(passed, "{\"a\":1}\n[1,2]\n");
        let answer = errors_rx.recv().await.unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["error"]["code"], -32700);
        assert!(answer["id"].is_null());
        assert!(errors_rx.recv().await.is_none());
    }
}
