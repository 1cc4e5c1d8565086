//! The MCP server, with the official Rust SDK (`rmcp`), over stdio (this module) or streamable
//! HTTP (`http`).
//!
//! The protocol loop never runs a tool call itself: each call goes to Tokio's blocking pool,
//! bounded by a semaphore sized to the machine, so pings, listings and other calls are answered
//! while a long search runs. A call carries a cancel flag that the client's
//! `notifications/cancelled` sets (the SDK then sends no answer for it) and, when the request
//! has a `_meta.progressToken`, a progress sink that becomes `notifications/progress`, in order
//! and never after the answer. Writes to one file stay serialized by the store's directory
//! lock; calls sent together may finish in any order, and a call sent after another's answer
//! sees what that one did.
//!
//! stdout carries only the protocol; stdin and stdout, when they are pipes, are driven by the
//! event loop directly. Client-sent roots are ignored: the operator's mounts are the whole of
//! what an agent can reach, and a client (which acts for the agent) must not be able to widen
//! it.
#![expect(
    deprecated,
    reason = "MCP logging (`logging/setLevel`, `notifications/message`) is deprecated by SEP-2577, and still what 2025-11-25 clients use"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig, SetLevelRequestParams,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::client_log::{self, CallLog};
use crate::pool::{Pool, Share};
use crate::tools::{CallError, ToolService};

/// The MCP server: a [`ToolService`] behind the protocol.
#[derive(Debug, Clone)]
pub struct VfsServer {
    /// The tools of this server (stdio), or of the endpoint before any session or principal
    /// is known (HTTP: the server info and the tool list, which are the same for all).
    tools: ToolService,
    /// Over HTTP: whose state a call uses.
    http: Option<HttpState>,
    /// Room for the tool calls that may run at once (shared by every session of a daemon).
    pool: Arc<Pool>,
    /// The share of the long calls of a server with one owner (stdio: all of them); over HTTP
    /// each session and each principal has its own.
    share: Option<Share>,
    /// The least severe level of this session's `notifications/message` (`logging/setLevel`).
    log_threshold: Arc<AtomicU8>,
}

/// Whose read-before-edit memory and exchange log an HTTP call uses. The SDK builds a server
/// for each session of the handshake protocol (before its `initialize`) and for each request
/// of the 2026-07-28 protocol, which has no sessions. A server whose `initialize` ran is a
/// session's and keeps the session's own state; any other call belongs to the principal that
/// authorized it (the token, see `http`), whose state lives as long as the daemon.
#[derive(Debug, Clone)]
struct HttpState {
    endpoint: Arc<crate::http::EndpointState>,
    session: Arc<std::sync::OnceLock<Session>>,
}

/// A session's own tools, and its place under the daemon's session caps (given back when the
/// session ends and this server is dropped).
#[derive(Debug)]
struct Session {
    tools: ToolService,
    /// The session's share of the long calls.
    share: Share,
    _slot: Option<crate::http::SessionSlot>,
}

impl VfsServer {
    /// A server for these tools, with a pool of its own.
    #[must_use]
    pub fn new(tools: ToolService) -> Self {
        let pool = Pool::for_machine();
        let share = Some(pool.whole());
        Self { tools, http: None, pool, share, log_threshold: Arc::new(AtomicU8::new(client_log::DEFAULT_THRESHOLD)) }
    }

    /// A server of an HTTP endpoint, for one session or one request (see [`HttpState`]).
    pub(crate) fn for_endpoint(endpoint: Arc<crate::http::EndpointState>, pool: Arc<Pool>) -> Self {
        Self {
            tools: endpoint.template().clone(),
            http: Some(HttpState { endpoint, session: Arc::default() }),
            pool,
            share: None,
            log_threshold: Arc::new(AtomicU8::new(client_log::DEFAULT_THRESHOLD)),
        }
    }

    /// The tools, with the state, that this call uses: the server's own (stdio), its session's
    /// (HTTP, handshake protocol), or its principal's (HTTP, 2026-07-28); and the shares of
    /// the long calls its owner and its endpoint hold.
    fn tools_for(&self, context: &RequestContext<RoleServer>) -> Result<(ToolService, Vec<Share>), ErrorData> {
        let Some(http) = &self.http else { return Ok((self.tools.clone(), self.share.iter().cloned().collect())) };
        let endpoint = http.endpoint.share().clone();
        if let Some(session) = http.session.get() {
            return Ok((session.tools.clone(), vec![session.share.clone(), endpoint]));
        }
        let principal = request_extension::<crate::tokens::Principal>(context);
        let Some(principal) = principal else {
            tracing::error!("an HTTP request reached the tools without a principal; this is a bug");
            return Err(ErrorData::internal_error("the server cannot take this request now; try again", None));
        };
        let (tools, share) = http.endpoint.principal(*principal).map_err(|error| {
            tracing::error!(%error, "cannot set up a principal's state");
            ErrorData::internal_error("the server cannot take this request now; try again", None)
        })?;
        Ok((tools, vec![share, endpoint]))
    }

    /// The least severe level of this call's `notifications/message`: the request's own
    /// (`_meta` `io.modelcontextprotocol/logLevel`, the 2026-07-28 way), else its session's
    /// (`logging/setLevel`); a call of the 2026-07-28 protocol that names no level gets none.
    fn threshold_for(&self, context: &RequestContext<RoleServer>) -> Arc<AtomicU8> {
        if let Some(level) = context.meta.log_level() {
            return Arc::new(AtomicU8::new(client_log::rank(level)));
        }
        match &self.http {
            Some(http) if http.session.get().is_none() => Arc::new(AtomicU8::new(client_log::SILENT)),
            _ => self.log_threshold.clone(),
        }
    }

    /// A one-line summary of the tools listed, for the operator's start-up line.
    #[must_use]
    pub fn tool_summary(&self) -> String {
        crate::tools::listed_names(&self.tools)
    }

    /// The tools behind this server.
    #[must_use]
    pub fn tools(&self) -> &ToolService {
        &self.tools
    }
}

impl ServerHandler for VfsServer {
    fn get_info(&self) -> ServerConfig {
        let instructions = format!(
            "Files are reached by virtual paths under the mounts below; call list_mounts for details.\n\n{}",
            self.tools.registry().prompt_table()
        );
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new("vfs", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.tools.registry().scrub(&instructions).into_owned())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // The handshake protocol: this server is one session's, with a state of its own.
        if let Some(http) = &self.http {
            let slot = request_extension::<crate::http::SessionSlot>(&context).cloned();
            let tools =
                http.endpoint.session(slot.as_ref().map(crate::http::SessionSlot::principal)).map_err(|error| {
                    tracing::error!(%error, "cannot set up a session's state");
                    ErrorData::internal_error("the server cannot open a session now; try again", None)
                })?;
            let _ = http.session.set(Session { tools, share: self.pool.owner_share(), _slot: slot });
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // The 2026-07-28 protocol has no `logging/setLevel`: a request names its level in
        // `_meta` instead (see `threshold_for`).
        let modern = context.meta.protocol_version().is_some_and(|version| !version.has_initialize());
        if modern {
            return Err(ErrorData::method_not_found::<rmcp::model::SetLevelRequestMethod>());
        }
        self.log_threshold.store(client_log::rank(request.level), Ordering::Relaxed);
        Ok(())
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
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.into_owned();
        let arguments = request.arguments;
        let (tools, shares) = self.tools_for(&context)?;
        let threshold = self.threshold_for(&context);
        let cancel = Arc::new(AtomicBool::new(false));
        let mut budget = vfs::Budget::unlimited().with_cancel_flag(cancel.clone());
        let progress =
            context.meta.get_progress_token().map(|token| Progress::start(context.peer.clone(), token, cancel.clone()));
        if let Some(progress) = &progress {
            budget = budget.with_progress(progress.sink());
        }
        let ct = context.ct.clone();
        let permit = tokio::select! {
            permit = self.pool.enter(&name, &shares) => permit.ok_or_else(shutting_down)?,
            // Cancelled while waiting: the SDK sends nothing for it.
            () = ct.cancelled() => return Err(shutting_down()),
        };
        let watcher = tokio::spawn(async move {
            ct.cancelled().await;
            cancel.store(true, Ordering::Relaxed);
        });
        let (notices, forwarder) = notices(tools.registry().clone(), threshold, context.peer.clone());
        let outcome = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            client_log::within(notices, || tools.call_with(&name, arguments, budget))
        })
        .await;
        watcher.abort();
        if let Some(progress) = progress {
            // Every progress notification goes out before the answer.
            progress.finish().await;
        }
        // So does every notice (the call's end dropped the sender).
        let _ = forwarder.await;
        let outcome = outcome.map_err(|error| {
            tracing::error!(%error, "a tool call's thread failed");
            ErrorData::internal_error("the tool failed unexpectedly", None)
        })?;
        match outcome {
            Ok(output) => Ok(output.to_call_result().into()),
            Err(error @ CallError::UnknownTool(_)) => Err(ErrorData::invalid_params(error.to_string(), None)),
        }
    }
}

/// What the HTTP layer attached to the request that `context` answers (the SDK hands the
/// request's head to the handler).
fn request_extension<T: Send + Sync + 'static>(context: &RequestContext<RoleServer>) -> Option<&T> {
    context.extensions.get::<http::request::Parts>().and_then(|parts| parts.extensions.get::<T>())
}

/// A call's notices: where its warnings go (at or above `threshold`), and the task that sends
/// them to the client as `notifications/message`, scrubbed, until the call ends.
fn notices(
    registry: vfs::MountRegistry,
    threshold: Arc<AtomicU8>,
    peer: Peer<RoleServer>,
) -> (CallLog, tokio::task::JoinHandle<()>) {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<(LoggingLevel, String)>();
    let forwarder = tokio::spawn(async move {
        while let Some((level, text)) = receiver.recv().await {
            let text = registry.scrub(&text).into_owned();
            let mut notice = LoggingMessageNotificationParam::new(level, serde_json::Value::String(text));
            notice.logger = Some("vfs".to_owned());
            if peer.notify_logging_message(notice).await.is_err() {
                break;
            }
        }
    });
    (CallLog::new(threshold, sender), forwarder)
}

fn shutting_down() -> ErrorData {
    ErrorData::internal_error("the server is shutting down", None)
}

/// One call's progress notifications: the vfs sink feeds a channel, and one task sends them to
/// the client in order.
struct Progress {
    sender: tokio::sync::mpsc::UnboundedSender<vfs::Progress>,
    forwarder: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Sends the call's progress to `peer`, until the call ends or `cancelled` is set (a
    /// cancelled call's client expects nothing more for it: a report queued before the
    /// cancellation is dropped, not sent after it).
    fn start(peer: Peer<RoleServer>, token: ProgressToken, cancelled: Arc<AtomicBool>) -> Self {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<vfs::Progress>();
        let forwarder = tokio::spawn(async move {
            while let Some(progress) = receiver.recv().await {
                if cancelled.load(Ordering::Relaxed) {
                    break;
                }
                #[expect(clippy::cast_precision_loss, reason = "counts of files fit an f64's mantissa")]
                let mut param =
                    ProgressNotificationParam::new(token.clone(), progress.done as f64).with_message(progress.message);
                if let Some(total) = progress.total {
                    #[expect(clippy::cast_precision_loss, reason = "counts of files fit an f64's mantissa")]
                    let total = total as f64;
                    param = param.with_total(total);
                }
                if peer.notify_progress(param).await.is_err() {
                    break;
                }
            }
        });
        Self { sender, forwarder }
    }

    fn sink(&self) -> vfs::ProgressSink {
        let sender = self.sender.clone();
        Arc::new(move |progress| {
            let _ = sender.send(progress);
        })
    }

    /// Waits until every notification sent so far is out (the call's sinks are gone).
    async fn finish(self) {
        drop(self.sender);
        let _ = self.forwarder.await;
    }
}

/// Longest message accepted on stdin (the SDK's own default bound).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Serves `tools` over stdin/stdout until the client disconnects. A client that closes the
/// connection before initializing (stdin at end of file) is a normal end, not an error.
///
/// stdin passes through a filter before it reaches the SDK: a line that is not valid JSON (also
/// a number out of range, a string that is not UTF-8) gets the JSON-RPC parse error (`-32700`)
/// that the SDK would drop silently, and JSON that is no MCP message the answer the SDK would
/// give without the request's id or a reason (`json_check::screen`); each carries the request's
/// id where it could be read, and the server keeps serving. stdout is written by one task, line
/// by line, so those answers never interleave with the SDK's messages. What waits for stdout
/// is bounded: at most 256 requests are read and not yet answered on stdout, and at most 64
/// parse errors wait to be written; past that the server stops reading stdin until the client
/// reads its answers.
pub async fn serve_stdio(server: VfsServer) -> std::io::Result<()> {
    serve_stdio_until(server, std::future::pending()).await
}

/// [`serve_stdio`], and when `stop` completes (the operator's signal), as if stdin had ended
/// there, with every request still running cancelled: a call stops where it safely can (one
/// that has begun to change files finishes). Returns once no tool call is running (each keeps
/// its blocking thread to its end, answered or not), so that no change is cut in the middle;
/// the caller may then end the runtime without waiting for its other blocking threads (stdin's
/// read, on a terminal or a socket, never ends by itself).
pub async fn serve_stdio_until(
    server: VfsServer,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (to_server, from_client) = tokio::io::duplex(64 * 1024);
    let (to_client, from_server) = tokio::io::duplex(64 * 1024);
    let (parse_errors, parse_errors_rx) = tokio::sync::mpsc::channel::<Vec<u8>>(MAX_PARSE_ERRORS);
    let in_flight = std::sync::Arc::new(InFlight::new(MAX_IN_FLIGHT));
    let (input, output) = stdio();
    let pool = server.pool.clone();
    tokio::spawn(pump_input(input, to_server, parse_errors, in_flight.clone(), stop));
    let output = tokio::spawn(pump_output(from_server, parse_errors_rx, output, in_flight));
    let served = match server.serve((from_client, to_client)).await {
        Ok(server) => server.waiting().await.map(|_| ()).map_err(std::io::Error::other),
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("the client closed the connection before initializing");
            Ok(())
        }
        Err(error) => Err(std::io::Error::other(error.to_string())),
    };
    // The server's end of the output pipe is closed now; let the writer drain it.
    let written = output.await.map_err(std::io::Error::other)?;
    // A call cancelled (or whose answer had nowhere to go) may still be changing files on its
    // blocking thread: the server ends once none is.
    while pool.busy() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    served.and(written)
}

/// Most requests read from stdin and not yet answered on stdout.
const MAX_IN_FLIGHT: usize = 256;
/// Most parse errors waiting to be written to stdout.
const MAX_PARSE_ERRORS: usize = 64;
/// Longest the server waits, once stdin ends, for the calls it read to be answered.
const DRAIN: std::time::Duration = std::time::Duration::from_mins(2);

/// The requests read and not yet answered, by id, bounded: a client that sends requests and
/// never reads the answers makes the server stop reading, not grow.
struct InFlight {
    open: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    room: tokio::sync::Semaphore,
    /// Woken when the last open request is answered.
    idle: tokio::sync::Notify,
}

impl InFlight {
    fn new(capacity: usize) -> Self {
        Self {
            open: std::sync::Mutex::default(),
            room: tokio::sync::Semaphore::new(capacity),
            idle: tokio::sync::Notify::new(),
        }
    }

    /// Waits until every request read so far is answered (or cancelled).
    async fn drained(&self) {
        loop {
            let notified = self.idle.notified();
            if self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_empty() {
                return;
            }
            notified.await;
        }
    }

    /// Waits for room, then counts a request with this id (its JSON text). Returns false, and
    /// counts nothing, when a request with the same id is still open: its answer could not be
    /// told from the new one's.
    async fn start(&self, id: String) -> bool {
        if self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(&id) {
            return false;
        }
        if let Ok(permit) = self.room.acquire().await {
            permit.forget();
        }
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.contains_key(&id) {
            self.room.add_permits(1);
            return false;
        }
        open.insert(id, 1);
        true
    }

    /// The ids (their JSON text) of the requests read and not yet answered.
    fn open_ids(&self) -> Vec<String> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect()
    }

    /// The request with this id was answered (or cancelled, so it will not be).
    fn finish(&self, id: &str) {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = open.get_mut(id) {
            *count -= 1;
            if *count == 0 {
                open.remove(id);
            }
            self.room.add_permits(1);
            if open.is_empty() {
                self.idle.notify_waiters();
            }
        }
    }
}

/// What the in-flight count needs of a message: its id, and its method if it has one.
#[derive(serde::Deserialize)]
struct Envelope {
    #[serde(default)]
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<CancelParams>,
}

#[derive(serde::Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId", default)]
    request_id: Option<serde_json::Value>,
}

/// A request's id as a key: a string or an integer (anything else the SDK refuses without an
/// id, so it is not counted).
fn id_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::String(_) => Some(id.to_string()),
        serde_json::Value::Number(number) if number.is_i64() || number.is_u64() => Some(id.to_string()),
        _ => None,
    }
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
    /// The line was longer than the bound and was skipped; the buffer keeps its first bytes
    /// (at most [`HEAD_KEPT`]), where a request's id is read.
    TooLong,
    /// End of file.
    End,
}

/// How much of a line past the bound is kept to read its id from: a request's id comes early
/// (`{"jsonrpc":"2.0","id":…`), its arguments after.
const HEAD_KEPT: usize = 4096;

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
                let room = HEAD_KEPT.min(limit).saturating_sub(buffer.len());
                buffer.truncate(HEAD_KEPT.min(limit));
                buffer.extend_from_slice(&chunk[..room.min(chunk.len())]);
                buffer.shrink_to(HEAD_KEPT);
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

/// The answer to a message refused before the SDK sees it ([`crate::json_check::screen`]),
/// as a line: with the request's id when it could be read, else `null`.
fn error_answer(refusal: &crate::json_check::Refusal) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": refusal.id,
        "error": { "code": refusal.code, "message": refusal.message },
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// The answer to a request that reuses the id of one still running (`-32600`, with that id).
fn duplicate_id(id: Option<&serde_json::Value>) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": "invalid request: a request with this id is still running; give each request an id of its own",
        },
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// Copies client lines to the SDK; answers lines that are not valid JSON with a parse error,
/// and a request that reuses a running request's id with an invalid-request error.
async fn pump_input<R, W>(
    input: R,
    mut to_server: W,
    parse_errors: tokio::sync::mpsc::Sender<Vec<u8>>,
    in_flight: std::sync::Arc<InFlight>,
    stop: impl Future<Output = ()>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    let mut stop = std::pin::pin!(stop);
    let mut stopped = false;
    loop {
        let read = tokio::select! {
            read = read_line(&mut reader, &mut line, MAX_LINE_BYTES) => read,
            () = &mut stop => {
                cancel_all(&mut to_server, &in_flight).await;
                stopped = true;
                break;
            }
        };
        let answer = match read {
            Ok(Line::End) => break,
            Err(error) => {
                tracing::warn!(%error, "cannot read stdin");
                break;
            }
            // Answered with its id when one could be read from its head.
            Ok(Line::TooLong) => Some(error_answer(&crate::json_check::Refusal {
                code: -32700,
                message: "parse error: the message is longer than 16 MiB".to_owned(),
                id: crate::json_check::check(&line).1,
            })),
            Ok(Line::Text) if line.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Line::Text) => crate::json_check::screen(&line).map(|refusal| error_answer(&refusal)),
        };
        if let Some(answer) = answer {
            tracing::warn!("answered a message that is not valid JSON-RPC with an error");
            if parse_errors.send(answer).await.is_err() {
                break;
            }
            continue;
        }
        if let Ok(envelope) = serde_json::from_slice::<Envelope>(&line)
            && envelope.jsonrpc.as_deref() == Some("2.0")
        {
            match (envelope.method.as_deref(), envelope.id.as_ref().and_then(id_key)) {
                (Some("notifications/cancelled"), _) => {
                    // A cancelled request is not answered: it leaves the count.
                    let cancelled = envelope.params.and_then(|params| params.request_id);
                    if let Some(key) = cancelled.as_ref().and_then(id_key) {
                        in_flight.finish(&key);
                    }
                }
                (Some(_), Some(key)) if !in_flight.start(key.clone()).await => {
                    // Refused, not carried out: one answer per id.
                    tracing::warn!("refused a request whose id is still in use");
                    let refusal = duplicate_id(envelope.id.as_ref());
                    if parse_errors.send(refusal).await.is_err() {
                        break;
                    }
                    continue;
                }
                _ => {}
            }
        }
        line.push(b'\n');
        if to_server.write_all(&line).await.is_err() {
            break; // The server has stopped.
        }
    }
    // The client has said all it will: the calls it sent are still answered (each within its
    // time budget) before the connection closes; a stop meanwhile cancels them (a client that
    // closes stdin, then sends SIGTERM, as the protocol's shutdown goes).
    if !stopped {
        tokio::select! {
            _ = tokio::time::timeout(DRAIN, in_flight.drained()) => {}
            () = &mut stop => cancel_all(&mut to_server, &in_flight).await,
        }
    }
    let _ = to_server.shutdown().await;
}

/// Cancels every request read and not yet answered, as the client would
/// (`notifications/cancelled`), so that each call stops where it safely can; they leave the
/// in-flight count.
async fn cancel_all<W: AsyncWrite + Unpin>(to_server: &mut W, in_flight: &InFlight) {
    for key in in_flight.open_ids() {
        let Ok(id) = serde_json::from_str::<serde_json::Value>(&key) else { continue };
        let mut cancel = serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": { "requestId": id, "reason": "the server is stopping" },
        }))
        .unwrap_or_default();
        cancel.push(b'\n');
        if to_server.write_all(&cancel).await.is_err() {
            return;
        }
        in_flight.finish(&key);
    }
}

/// Writes the SDK's messages and the parse errors to stdout, whole lines only. A response
/// leaves the in-flight count once it is written.
async fn pump_output<R, W>(
    from_server: R,
    mut parse_errors: tokio::sync::mpsc::Receiver<Vec<u8>>,
    mut output: W,
    in_flight: std::sync::Arc<InFlight>,
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
                if let Some(key) = response_id(&line) {
                    in_flight.finish(&key);
                }
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

/// The id of a response the SDK wrote (no `method`), as a key. The SDK writes `jsonrpc` and
/// `id` first, so the id is read from the start of the line without parsing a large result;
/// any other shape is parsed whole.
fn response_id(line: &[u8]) -> Option<String> {
    const PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    if let Some(rest) = line.strip_prefix(PREFIX) {
        let mut stream = serde_json::Deserializer::from_slice(rest).into_iter::<serde_json::Value>();
        let id = stream.next()?.ok()?;
        let after = rest.get(stream.byte_offset()..)?;
        // A request from the server to the client has a method after its id; only responses count.
        if after.starts_with(br#","result""#) || after.starts_with(br#","error""#) {
            return id_key(&id);
        }
        return None;
    }
    let envelope = serde_json::from_slice::<Envelope>(line).ok()?;
    if envelope.method.is_some() {
        return None;
    }
    envelope.id.as_ref().and_then(id_key)
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

    /// A line past the bound is answered with the id its head carries (it was `null`, which
    /// left the request unanswered); one whose id comes after its first bytes gets `null`.
    #[tokio::test]
    async fn a_line_past_the_bound_is_answered_with_the_id_at_its_head() {
        let content = "x".repeat(MAX_LINE_BYTES);
        let early = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":4242,\"method\":\"tools/call\",\"params\":{{\"name\":\"write_file\",\"arguments\":{{\"content\":\"{content}\"}}}}}}\n"
        );
        let late = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"x\":\"{content}\",\"id\":7}}\n");
        let input = format!("{early}{late}");
        let (to_server, mut from_client) = tokio::io::duplex(1024);
        let (errors, mut errors_rx) = tokio::sync::mpsc::channel(8);
        let in_flight = std::sync::Arc::new(InFlight::new(8));
        pump_input(input.as_bytes(), to_server, errors, in_flight, std::future::pending()).await;
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut from_client, &mut passed).await.unwrap();
        assert_eq!(passed, "");
        let mut answers = Vec::new();
        while let Some(answer) = errors_rx.recv().await {
            answers.push(String::from_utf8(answer).unwrap());
        }
        assert_eq!(
            answers,
            [
                "{\"error\":{\"code\":-32700,\"message\":\"parse error: the message is longer than 16 MiB\"},\"id\":4242,\"jsonrpc\":\"2.0\"}\n",
                "{\"error\":{\"code\":-32700,\"message\":\"parse error: the message is longer than 16 MiB\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n",
            ]
        );
    }

    #[tokio::test]
    async fn lines_that_are_not_json_rpc_get_an_error_and_the_rest_pass() {
        // A notification passes (a request would wait, unanswered here, for the drain's end).
        let input: &[u8] =
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\nnot json\n\n[1,2]\n{\"a\":1}\n";
        let (to_server, mut from_client) = tokio::io::duplex(1024);
        let (errors, mut errors_rx) = tokio::sync::mpsc::channel(8);
        pump_input(input, to_server, errors, std::sync::Arc::new(InFlight::new(8)), std::future::pending()).await;
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut from_client, &mut passed).await.unwrap();
        assert_eq!(passed, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
        let mut codes = Vec::new();
        while let Some(answer) = errors_rx.recv().await {
            let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
            assert!(answer["id"].is_null());
            codes.push(answer["error"]["code"].as_i64().unwrap());
        }
        assert_eq!(codes, [-32700, -32600, -32600]);
    }
}
