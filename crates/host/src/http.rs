//! The MCP server over streamable HTTP (`vfs serve --listen`), with the SDK's own transport and
//! sessions.
//!
//! Each endpoint is a path: `/mcp` for the launch's own mounts, `/mcp/<crew>` for each hosted
//! crew. Before anything reaches the SDK a request must carry a bearer token that grants its
//! endpoint: without one, or with one that grants only another endpoint, the answer is `401`
//! with `WWW-Authenticate: Bearer realm="vfs"` and a JSON body that says how to pass a token,
//! the same for a crew that does not exist. Tokens are compared in constant time and never
//! logged. The token that authorized a request is its [`Principal`].
//!
//! Whose state a call uses depends on the protocol generation the client speaks. Under the
//! handshake protocol (2025-11-25 and before) each MCP session gets its own read-before-edit
//! memory and exchange log file. The 2026-07-28 protocol has no sessions: every request stands
//! alone, so the memory and the log belong to the principal, for as long as the daemon runs
//! (ADR 0005). Either way a log file is created with its first record, never empty.
//!
//! The daemon is meant to face clients it does not trust to behave:
//! - a request's headers must arrive within `header_timeout`, and its body within
//!   `body_timeout`; a body larger than `max_request_bytes` is refused with `413` before it is
//!   read whole; the bodies held at once (from their arrival until their answers are sent) are
//!   at most `max_bodies_bytes` in all and a quarter of that for one token, past which a body
//!   gets `503` with `Retry-After` ([`Bodies`]), so that a token sending many large bodies at
//!   once cannot fill the daemon's memory; a body that is not JSON gets the JSON-RPC parse error (`-32700`), and one
//!   of more than 100,000 values an invalid request (`-32600`), before anything parses it
//!   whole (`crate::json_check`);
//! - at most `max_connections` connections are served at once, at most `max_sessions` sessions
//!   live at once and at most `max_sessions_per_token` for one token; past a cap the answer is
//!   `503` with `Retry-After`, and no session already open is touched. A connection that has
//!   not yet shown a valid token gives way: at the connection cap, a new connection closes one
//!   of those ([`Connections`]: from the address holding the most), so that clients without a
//!   token, which cost nothing to open, cannot keep every token holder out; so do a token's
//!   connections past `max_connections_per_token`, so that one tenant cannot hold them all.
//!   When all are kept, at most [`BUSY_AT_ONCE`] new ones wait (up to [`BUSY_TIMEOUT`]) to be
//!   told `503`, and the rest are closed unanswered;
//! - a session idle for `session_idle` ends (its log file is synced and closed); its client
//!   gets `404` for it and starts another, as the specification says;
//! - a failing `accept` (out of descriptors) pauses and warns instead of spinning.
//!
//! The `Host` header must name the listen address or `localhost` with the listening port, or
//! a host the operator allowed; a browser `Origin` must be the listen address's, localhost's or
//! one the operator allowed (`403` otherwise): the protection against DNS rebinding that the
//! specification asks for. Allowed origins get CORS answers (a preflight needs no token);
//! others get none. The OAuth discovery paths answer a JSON `404` saying that this server takes
//! static bearer tokens, so that a client looking for OAuth stops with a clear reason.
//!
//! On SIGTERM or SIGINT the server stops accepting connections, lets the running calls finish
//! within a grace period, then ends the sessions (each exchange log is synced to disk as its
//! session ends).

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, header};
use http_body_util::{BodyExt as _, Full, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::pool::{Pool, Share};
use crate::server::VfsServer;
use crate::tokens::{Principal, Tokens};
use crate::tools::ToolService;

/// Builds the tools for one session, or one principal, of an endpoint (each with an exchange
/// log file of its own, created with its first record).
pub type SessionFactory = Arc<dyn Fn() -> std::io::Result<ToolService> + Send + Sync>;

/// One endpoint: `/mcp` (`crew` is `None`) or `/mcp/<crew>`.
pub struct Endpoint {
    /// The crew's name, for `/mcp/<crew>`; `None` for `/mcp`.
    pub crew: Option<String>,
    /// Builds each session's tools.
    pub sessions: SessionFactory,
}

/// How the daemon listens, and the bounds that keep one client from holding it.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (port 0 picks a free port; the start-up line names it).
    pub listen: SocketAddr,
    /// The bearer tokens.
    pub tokens: Tokens,
    /// More `Host` values to accept, besides the listen address and `localhost`.
    pub allowed_hosts: Vec<String>,
    /// More browser origins to accept, besides the listen address and `localhost`.
    pub allowed_origins: Vec<String>,
    /// How long running calls may take to finish after SIGTERM or SIGINT.
    pub grace: Duration,
    /// How long a client may take to send a request's headers (also the longest an idle
    /// connection stays open between requests).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived.
    pub body_timeout: Duration,
    /// Most connections served at once.
    pub max_connections: usize,
    /// Most connections of one token kept from being displaced at the cap.
    pub max_connections_per_token: usize,
    /// Most sessions (handshake protocol) alive at once, over all endpoints.
    pub max_sessions: usize,
    /// Most sessions alive at once for one token.
    pub max_sessions_per_token: usize,
    /// Most requests (POST and DELETE) of one token whose answers are on their way at once.
    pub max_requests_per_token: usize,
    /// Most tool calls of one session (or, under 2026-07-28, one token) that run at once; the
    /// rest wait their turn. `None`: the pool's size (four per core).
    pub max_calls_per_session: Option<usize>,
    /// A session with no request for this long ends.
    pub session_idle: Duration,
    /// The largest request body accepted.
    pub max_request_bytes: usize,
    /// Most bytes of request bodies held at once, over every token (a body is held from its
    /// arrival until its answer is sent); one token holds at most a quarter of them, and at
    /// least one body of `max_request_bytes`.
    pub max_bodies_bytes: usize,
}

impl HttpOptions {
    /// The defaults for `listen`, sized to the process's open-file limit `descriptors` (each
    /// connection is a descriptor, and each session may hold a log file).
    #[must_use]
    pub fn new(listen: SocketAddr, tokens: Tokens, descriptors: u64) -> Self {
        let connections = usize::try_from(descriptors / 4).unwrap_or(usize::MAX).clamp(16, 4096);
        Self {
            listen,
            tokens,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            grace: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connections: connections,
            max_connections_per_token: (connections / 4).max(4),
            max_sessions: connections,
            max_sessions_per_token: (connections / 4).max(4),
            max_requests_per_token: (connections / 4).max(4),
            max_calls_per_session: None,
            session_idle: Duration::from_mins(30),
            max_request_bytes: 16 * 1024 * 1024,
            max_bodies_bytes: 16 * 16 * 1024 * 1024,
        }
    }
}

/// A bound listener, ready to serve: bind first, so that the start-up line can name the port.
pub struct Listener {
    listener: tokio::net::TcpListener,
    address: SocketAddr,
}

impl Listener {
    /// Binds the listen address.
    pub async fn bind(address: SocketAddr) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        Ok(Self { listener, address })
    }

    /// The address bound (with the port chosen, for port 0).
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

/// One endpoint's state: what builds a session's or a principal's tools, and the principals'
/// tools, kept for the daemon's run.
pub(crate) struct EndpointState {
    factory: SessionFactory,
    template: ToolService,
    /// Each principal's tools and share of the long calls.
    principals: Mutex<HashMap<Principal, (ToolService, Share)>>,
    /// What each token's sessions remember together ([`crate::tools::SeenBudget`]).
    seen: Mutex<HashMap<Principal, Arc<crate::tools::SeenBudget>>>,
    pool: Arc<Pool>,
    /// The endpoint's share of the long calls.
    share: Share,
}

impl std::fmt::Debug for EndpointState {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("EndpointState").finish_non_exhaustive()
    }
}

impl EndpointState {
    fn new(factory: SessionFactory, pool: Arc<Pool>, share: Share) -> std::io::Result<Self> {
        let template = factory()?;
        Ok(Self { factory, template, principals: Mutex::default(), seen: Mutex::default(), pool, share })
    }

    /// The endpoint's share of the long calls.
    pub(crate) fn share(&self) -> &Share {
        &self.share
    }

    /// The endpoint's tools without a state of anyone's: for its server info and tool list.
    pub(crate) fn template(&self) -> &ToolService {
        &self.template
    }

    /// A new session's tools, for `principal` when known: what its sessions remember is
    /// bounded together.
    pub(crate) fn session(&self, principal: Option<Principal>) -> std::io::Result<ToolService> {
        let tools = (self.factory)()?;
        let Some(principal) = principal else { return Ok(tools) };
        let budget = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(principal)
            .or_insert_with(|| crate::tools::SeenBudget::new(crate::tools::MAX_SEEN_BYTES_PER_TOKEN))
            .clone();
        Ok(tools.seen_within(budget))
    }

    /// The principal's tools, made with its first request.
    pub(crate) fn principal(&self, principal: Principal) -> std::io::Result<(ToolService, Share)> {
        let mut principals = self.principals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(held) = principals.get(&principal) {
            return Ok(held.clone());
        }
        let held = ((self.factory)()?, self.pool.owner_share());
        principals.insert(principal, held.clone());
        Ok(held)
    }
}

/// The sessions alive, counted over the daemon, by token and by endpoint, so that a cap is
/// checked before a session is made. A session holds its [`SessionSlot`] for as long as it
/// lives.
///
/// Where several endpoints have tokens (crews), each is kept a share of the sessions
/// ([`Shares`]): another endpoint takes sessions past its own share only while
/// that leaves room for every endpoint's share not yet taken. The cap per token alone could
/// not do that: a crew given four token lines took every session at the default caps (a
/// quarter of them each), and another crew's first `initialize` got `503` for as long as
/// they lived (30 minutes idle).
#[derive(Debug)]
struct Sessions {
    counts: Mutex<SessionCounts>,
    max: usize,
    max_per_token: usize,
    /// What each endpoint is kept of them.
    shares: Shares,
}

/// What each endpoint that has tokens (a crew's, or `/mcp`) is kept of something capped at
/// `max` (sessions; connections kept from being displaced), so that a crew given many token
/// lines cannot take it all: half of `max` shared out evenly among the endpoints (none where
/// there is one), or as much as the endpoint's token lines may hold at `per_token` each, if
/// less. An endpoint takes more than its share only while that leaves every other endpoint the
/// part of its share it does not hold.
#[derive(Debug)]
struct Shares {
    max: usize,
    /// Each token's endpoint, by number (`Tokens::endpoints`).
    endpoint_of: Vec<usize>,
    /// Each endpoint's share, by number.
    kept: Vec<usize>,
}

impl Shares {
    fn new(max: usize, per_token: usize, tokens: &Tokens) -> Self {
        let (endpoint_of, endpoints) = tokens.endpoints();
        let share = if endpoints > 1 { max / (2 * endpoints) } else { 0 };
        let mut kept = vec![0usize; endpoints];
        for endpoint in &endpoint_of {
            kept[*endpoint] = kept[*endpoint].saturating_add(per_token);
        }
        for kept in &mut kept {
            *kept = (*kept).min(share);
        }
        Self { max, endpoint_of, kept }
    }

    /// The endpoint `principal`'s token opens.
    fn endpoint(&self, principal: Principal) -> usize {
        self.endpoint_of.get(principal.0).copied().unwrap_or(0)
    }

    /// True when `endpoint` may take one more, where the endpoints hold `held` each and `all`
    /// together.
    fn allows(&self, endpoint: usize, held: &HashMap<usize, usize>, all: usize) -> bool {
        let holds = |endpoint: usize| held.get(&endpoint).copied().unwrap_or(0);
        if holds(endpoint) < self.kept.get(endpoint).copied().unwrap_or(0) {
            return true;
        }
        let owed: usize = self
            .kept
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != endpoint)
            .map(|(other, kept)| kept.saturating_sub(holds(other)))
            .sum();
        self.max.saturating_sub(all) > owed
    }
}

/// Why no session could be made.
const SESSIONS_FULL: &str = "the server has as many sessions as it keeps for this token";
const ENDPOINT_FULL: &str = "the server has as many sessions as it keeps for this endpoint";

#[derive(Debug, Default)]
struct SessionCounts {
    all: usize,
    by_token: HashMap<Principal, usize>,
    by_endpoint: HashMap<usize, usize>,
    /// Each session's id and the token that opened it, while the session lives: a request
    /// that names it with another token is answered as for a session that does not exist.
    owners: HashMap<String, (Principal, std::sync::Weak<SlotInner>)>,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, SessionCounts> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn new(max: usize, max_per_token: usize, tokens: &Tokens) -> Self {
        Self { counts: Mutex::default(), max, max_per_token, shares: Shares::new(max, max_per_token, tokens) }
    }

    /// A place for one more session of `principal`, or why there is none: past the cap over
    /// all or that of the token, or past the endpoint's share where the rest is kept for the
    /// other endpoints' shares.
    fn reserve(self: &Arc<Self>, principal: Principal) -> Result<SessionSlot, &'static str> {
        let endpoint = self.shares.endpoint(principal);
        let mut counts = self.lock();
        let mine = counts.by_token.get(&principal).copied().unwrap_or(0);
        if counts.all >= self.max || mine >= self.max_per_token {
            return Err(SESSIONS_FULL);
        }
        if !self.shares.allows(endpoint, &counts.by_endpoint, counts.all) {
            return Err(ENDPOINT_FULL);
        }
        counts.all += 1;
        *counts.by_token.entry(principal).or_default() += 1;
        *counts.by_endpoint.entry(endpoint).or_default() += 1;
        Ok(SessionSlot { held: Arc::new(SlotInner { sessions: self.clone(), principal, endpoint }) })
    }

    /// Records that the session `id` was opened with the slot `slot` (its token's).
    fn bind(&self, id: &str, slot: &SessionSlot) {
        let mut counts = self.lock();
        counts.owners.retain(|_, (_, alive)| alive.strong_count() > 0);
        counts.owners.insert(id.to_owned(), (slot.held.principal, Arc::downgrade(&slot.held)));
    }

    /// The token that opened the live session `id`, if it is one.
    fn owner(&self, id: &str) -> Option<Principal> {
        let counts = self.lock();
        counts.owners.get(id).filter(|(_, alive)| alive.strong_count() > 0).map(|(owner, _)| *owner)
    }
}

/// What a request of another token's session names instead of it: no session has this id
/// (the SDK's are UUIDs), so the answer is exactly that of an unknown session.
const NO_SESSION: &str = "-";

/// One session's place under the caps; the place is given back when the last clone is dropped
/// (the session ended, or its handshake never completed).
#[derive(Debug, Clone)]
pub(crate) struct SessionSlot {
    held: Arc<SlotInner>,
}

impl SessionSlot {
    /// The token whose session this is.
    pub(crate) fn principal(&self) -> Principal {
        self.held.principal
    }
}

#[derive(Debug)]
struct SlotInner {
    sessions: Arc<Sessions>,
    principal: Principal,
    endpoint: usize,
}

impl Drop for SlotInner {
    fn drop(&mut self) {
        let mut counts = self.sessions.lock();
        counts.all = counts.all.saturating_sub(1);
        if let Some(count) = counts.by_token.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.by_token.remove(&self.principal);
            }
        }
        if let Some(count) = counts.by_endpoint.get_mut(&self.endpoint) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.by_endpoint.remove(&self.endpoint);
            }
        }
    }
}

struct State {
    endpoints: BTreeMap<Option<String>, StreamableHttpService<VfsServer, LocalSessionManager>>,
    tokens: Tokens,
    sessions: Arc<Sessions>,
    running: Arc<Running>,
    requests: Arc<Requests>,
    owners: Arc<Owners>,
    origins: Vec<String>,
    body_timeout: Duration,
    max_request_bytes: usize,
    bodies: Arc<Bodies>,
}

/// Serves `endpoints` until SIGTERM or SIGINT, then shuts down gracefully. The signals are
/// listened for from the first poll; a caller that announces the server first takes
/// [`shutdown_signal`] before it and calls [`serve_until`].
pub async fn serve_http(listener: Listener, endpoints: Vec<Endpoint>, options: HttpOptions) -> std::io::Result<()> {
    serve_until(listener, endpoints, options, shutdown_signal()?).await
}

/// Serves until `stop` completes (a signal, or a test's trigger).
pub async fn serve_until(
    listener: Listener,
    endpoints: Vec<Endpoint>,
    options: HttpOptions,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let pool = Pool::for_machine();
    let sessions_end = CancellationToken::new();
    let state = Arc::new(State::new(listener.address, endpoints, &options, &pool, sessions_end.clone())?);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    accept_until(&listener, &state, &options, &graceful, stop).await;
    drop(listener);
    tracing::info!("stopping: no new connections; waiting for running calls");
    let deadline = tokio::time::Instant::now() + options.grace;
    while pool.busy() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sessions_end.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(2), graceful.shutdown()).await;
    Ok(())
}

impl State {
    /// Each endpoint's SDK service, with its sessions' idle expiry, and the daemon's bounds.
    fn new(
        address: SocketAddr,
        endpoints: Vec<Endpoint>,
        options: &HttpOptions,
        pool: &Arc<Pool>,
        sessions_end: CancellationToken,
    ) -> std::io::Result<Self> {
        let (config, origins) = sdk_config(address, options, sessions_end);
        let mut services = BTreeMap::new();
        let several = endpoints.len() > 1;
        for endpoint in endpoints {
            // With several endpoints (hosted crews), none may take the whole long lane.
            let share = if several { pool.endpoint_share() } else { pool.whole() };
            let state = Arc::new(EndpointState::new(endpoint.sessions, pool.clone(), share)?);
            let pool = pool.clone();
            let mut manager = LocalSessionManager::default();
            manager.session_config.keep_alive = Some(options.session_idle);
            let service = StreamableHttpService::new(
                move || Ok(VfsServer::for_endpoint(state.clone(), pool.clone())),
                Arc::new(manager),
                config.clone(),
            );
            services.insert(endpoint.crew, service);
        }
        let sessions = Arc::new(Sessions::new(options.max_sessions, options.max_sessions_per_token, &options.tokens));
        Ok(Self {
            endpoints: services,
            tokens: options.tokens.clone(),
            sessions,
            running: Arc::default(),
            requests: Arc::new(Requests { counts: Mutex::default(), max: options.max_requests_per_token }),
            owners: Arc::new(Owners {
                running: Mutex::default(),
                each: options.max_calls_per_session.unwrap_or_else(|| pool.capacity()),
            }),
            origins,
            body_timeout: options.body_timeout,
            max_request_bytes: options.max_request_bytes,
            bodies: Bodies::new(options.max_bodies_bytes, options.max_request_bytes),
        })
    }
}

/// The connections served now, oldest first, each with its address and the token it has
/// shown. Within the cap every connection is served; at it, a new one takes the place of one
/// that is not kept (which is closed: from the address holding the most, an idle one before
/// one answering a request, then the oldest), and only when every one is kept is the new one
/// refused. A connection is kept once a request on it carried a
/// valid token, up to `per_token` connections of one token. A connection that never sends a
/// valid request costs its opener nothing, so without this a client with no token could fill
/// the cap and keep every token holder out, one header timeout after another; and a token
/// holder could keep every other one out by holding connections open. A token holder's
/// connection shows its token with its first request's headers, milliseconds after it opens.
/// Where several endpoints have tokens, each is kept its share of the connections kept
/// ([`Shares`]), so that a crew given many token lines cannot keep every connection and
/// leave another crew's new ones refused.
struct Connections {
    max: usize,
    per_token: usize,
    shares: Shares,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    by_id: BTreeMap<u64, Admitted>,
    kept_by_token: HashMap<Principal, usize>,
    kept_by_endpoint: HashMap<usize, usize>,
    kept_all: usize,
}

/// One served connection.
struct Admitted {
    /// The address it came from.
    peer: std::net::IpAddr,
    /// The token its first valid request carried.
    owner: Option<Principal>,
    /// Never displaced: it showed a token, within that token's share.
    kept: bool,
    /// Requests on it being answered now (until their responses' heads are sent).
    busy: usize,
    /// Cancelled to close it.
    closed: CancellationToken,
}

impl Connections {
    fn new(max: usize, per_token: usize, tokens: &Tokens) -> Self {
        Self { max, per_token, shares: Shares::new(max, per_token, tokens), open: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for a new connection from `peer`: a free one, or that of a connection not kept
    /// (closing it), from the address that holds the most of those (so that a client opening
    /// connections without end from one address displaces its own, never a token holder's
    /// that is still sending its first headers from another), idle ones first, then the
    /// oldest; `None` when every connection served is kept.
    fn admit(self: &Arc<Self>, peer: std::net::IpAddr) -> Option<Slot> {
        let mut open = self.lock();
        if open.by_id.len() >= self.max {
            let mut by_peer: HashMap<std::net::IpAddr, usize> = HashMap::new();
            for admitted in open.by_id.values().filter(|admitted| !admitted.kept) {
                *by_peer.entry(admitted.peer).or_default() += 1;
            }
            let most = by_peer.values().copied().max()?;
            let displaced = open
                .by_id
                .iter()
                .filter(|(_, admitted)| !admitted.kept && by_peer.get(&admitted.peer) == Some(&most))
                .min_by_key(|(id, admitted)| (admitted.busy > 0, **id))
                .map(|(id, _)| *id)?;
            if let Some(displaced) = open.by_id.remove(&displaced) {
                displaced.closed.cancel();
            }
        }
        open.next += 1;
        let id = open.next;
        let closed = CancellationToken::new();
        open.by_id.insert(id, Admitted { peer, owner: None, kept: false, busy: 0, closed: closed.clone() });
        Some(Slot { connection: Arc::new(Connection { connections: self.clone(), id }), closed })
    }
}

/// One connection as its requests know it.
struct Connection {
    connections: Arc<Connections>,
    id: u64,
}

impl Connection {
    /// A request on it carried a valid token of `principal`: the connection is that token's,
    /// and kept while the token has fewer than its share kept and its endpoint may keep one
    /// more ([`Shares::allows`]); checked again at each request, so a connection past a share
    /// is kept once another has closed.
    fn shown(&self, principal: Principal) {
        let connections = &self.connections;
        let endpoint = connections.shares.endpoint(principal);
        let mut open = connections.lock();
        let kept = open.kept_by_token.get(&principal).copied().unwrap_or(0);
        let Some(admitted) = open.by_id.get_mut(&self.id) else { return };
        let owner = *admitted.owner.get_or_insert(principal);
        if admitted.kept || owner != principal || kept >= connections.per_token {
            return;
        }
        // Judged only for a connection that could be kept (most requests come on one that
        // is, or cannot be).
        if !connections.shares.allows(endpoint, &open.kept_by_endpoint, open.kept_all) {
            return;
        }
        let Some(admitted) = open.by_id.get_mut(&self.id) else { return };
        admitted.kept = true;
        *open.kept_by_token.entry(principal).or_default() += 1;
        *open.kept_by_endpoint.entry(endpoint).or_default() += 1;
        open.kept_all += 1;
    }

    /// Counts a request being answered on it until the guard is dropped.
    fn busy(self: &Arc<Self>) -> Busy {
        if let Some(admitted) = self.connections.lock().by_id.get_mut(&self.id) {
            admitted.busy += 1;
        }
        Busy(self.clone())
    }
}

/// A request being answered on a [`Connection`].
struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(admitted) = self.0.connections.lock().by_id.get_mut(&self.0.id) {
            admitted.busy = admitted.busy.saturating_sub(1);
        }
    }
}

/// A connection's place among the [`Connections`], given back when it ends.
struct Slot {
    connection: Arc<Connection>,
    closed: CancellationToken,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.connection.connections.lock();
        let Some(gone) = open.by_id.remove(&self.connection.id) else { return };
        let (true, Some(owner)) = (gone.kept, gone.owner) else { return };
        let endpoint = self.connection.connections.shares.endpoint(owner);
        open.kept_all = open.kept_all.saturating_sub(1);
        if let Some(count) = open.kept_by_token.get_mut(&owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.kept_by_token.remove(&owner);
            }
        }
        if let Some(count) = open.kept_by_endpoint.get_mut(&endpoint) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.kept_by_endpoint.remove(&endpoint);
            }
        }
    }
}

/// How many connections past the cap are answered `503` at once; the others are closed.
const BUSY_AT_ONCE: usize = 64;

/// The most a connection buffers of what it reads: a request's head must fit (past it,
/// `431`), and a body is read on in pieces of at most this. hyper's own default, about 400
/// KB, let connections with no token, each sending a head that never ends, hold 360 MB
/// among 3,000 of them until the head's time limit.
const READ_BUFFER: usize = 32 * 1024;

/// How long a connection past the cap may take to send its request's head before it is
/// closed unanswered.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Accepts and serves connections until `stop` completes: within the connection cap (past it,
/// in place of the oldest connection that has shown no token, else one `503` and the
/// connection closes), each with the header timeout.
async fn accept_until(
    listener: &Listener,
    state: &Arc<State>,
    options: &HttpOptions,
    graceful: &hyper_util::server::graceful::GracefulShutdown,
    stop: impl Future<Output = ()>,
) {
    let connections =
        Arc::new(Connections::new(options.max_connections, options.max_connections_per_token, &options.tokens));
    let busy_slots = Arc::new(tokio::sync::Semaphore::new(BUSY_AT_ONCE));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(options.header_timeout).max_buf_size(READ_BUFFER);
    tokio::pin!(stop);
    let mut failures = 0_u32;
    loop {
        let accepted = tokio::select! {
            accepted = listener.listener.accept() => accepted,
            () = &mut stop => return,
        };
        let (stream, peer) = match accepted {
            Ok((stream, peer)) => {
                failures = 0;
                // An answer goes out in pieces (its head, the event, the end of a chunked or
                // event-stream body): with Nagle's algorithm on, the last small piece waited for
                // the client's delayed acknowledgement, 40 ms a call.
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, "cannot turn Nagle's algorithm off for a connection");
                }
                (stream, peer.ip().to_canonical())
            }
            Err(error) => {
                // Out of descriptors, most often: pause instead of spinning, longer each time
                // (up to a second), and say so.
                failures = failures.saturating_add(1);
                let pause = Duration::from_millis(50 * u64::from(failures.min(20)));
                tracing::warn!(%error, pause_ms = pause.as_millis(), "cannot accept a connection; pausing");
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let io = TokioIo::new(stream);
        let Some(slot) = connections.admit(peer) else {
            // Every connection is kept: this one is told so, by a task of its own that waits
            // for its request's head no longer than `BUSY_TIMEOUT`, and past `BUSY_AT_ONCE` of
            // those it is closed unanswered, so that connections opened without end cost a
            // bounded number of tasks and descriptors.
            let Ok(permit) = busy_slots.clone().try_acquire_owned() else {
                drop(io);
                continue;
            };
            let mut busy = builder.clone();
            busy.keep_alive(false).header_read_timeout(BUSY_TIMEOUT);
            let connection = busy.serve_connection(
                io,
                hyper::service::service_fn(|_| async {
                    Ok::<_, Infallible>(unavailable("the server has as many connections as it serves at once"))
                }),
            );
            tokio::spawn(async move {
                let _permit = permit;
                let _ = tokio::time::timeout(BUSY_TIMEOUT * 2, connection).await;
            });
            continue;
        };
        let state = state.clone();
        let connection = slot.connection.clone();
        let service = hyper::service::service_fn(move |request| route(state.clone(), connection.clone(), request));
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            tokio::select! {
                served = connection => if let Err(error) = served {
                    tracing::debug!(%error, "an HTTP connection ended with an error");
                },
                () = slot.closed.cancelled() => {
                    tracing::debug!("a connection not kept gave its place to a new one");
                }
            }
            drop(slot);
        });
    }
}

/// The SDK's configuration (sessions, the `Host` and `Origin` checks), and the origins that
/// get CORS answers.
fn sdk_config(
    address: SocketAddr,
    options: &HttpOptions,
    end: CancellationToken,
) -> (StreamableHttpServerConfig, Vec<String>) {
    let port = address.port();
    let host = match address.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    let names = ["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned(), host];
    // The port is part of the check: a name alone would accept any port (the SDK reads a
    // portless entry so), and a page served from another port of this machine is another
    // origin. Only port 80 may be left out, as clients do.
    let mut hosts: Vec<String> = names.iter().map(|name| format!("{name}:{port}")).collect();
    if port == 80 {
        hosts.extend(names.iter().cloned());
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> =
        names.iter().flat_map(|name| [format!("http://{name}:{port}"), format!("https://{name}:{port}")]).collect();
    origins.extend(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins.clone())
        .with_max_request_body_bytes(options.max_request_bytes)
        // A fresh session stream opens with a priming event (id `0`), which `CommonIds`
        // relies on to number the real events apart from it: set here, not left to the SDK's
        // default. (No event store is set either: the SDK's session cache is the one
        // `resume_after` and `CommonIds` are written against.)
        .with_sse_retry(Some(SSE_RETRY))
        .with_cancellation_token(end);
    (config, origins)
}

type Body = BoxBody<Bytes, Infallible>;

/// The paths of OAuth discovery and registration, which this server does not offer.
const OAUTH_PATHS: [&str; 6] = [
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
    "/register",
    "/authorize",
    "/token",
];

/// `/mcp` and `/mcp/<crew>`: CORS, the bearer token, the body's bounds and the session caps
/// first, then the SDK.
async fn route(
    state: Arc<State>,
    connection: Arc<Connection>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let _busy = connection.busy();
    let origin = request.headers().get(header::ORIGIN).cloned();
    let cors = origin.filter(|origin| origin.to_str().is_ok_and(|origin| state.origins.iter().any(|o| o == origin)));
    let mut response = answer(&state, &connection, request, cors.is_some()).await;
    if let Some(origin) = cors {
        add_cors(response.headers_mut(), origin);
    }
    Ok(response)
}

async fn answer(state: &State, connection: &Connection, request: Request<Incoming>, cors: bool) -> Response<Body> {
    let path = request.uri().path();
    if request.method() == Method::OPTIONS {
        // A browser's preflight: no token is sent with it. An allowed origin gets the CORS
        // headers (added by `route`); any other gets none, and the browser stops there.
        return if cors { empty(StatusCode::NO_CONTENT) } else { json_error(StatusCode::FORBIDDEN, FORBIDDEN_ORIGIN) };
    }
    if OAUTH_PATHS.iter().any(|oauth| path == *oauth || path.starts_with(&format!("{oauth}/"))) {
        return json_error(StatusCode::NOT_FOUND, NO_OAUTH);
    }
    let crew = match path.strip_prefix("/mcp") {
        Some("" | "/") => None,
        Some(rest) => match rest.strip_prefix('/') {
            Some(name) if !name.is_empty() && !name.contains('/') => Some(name.to_owned()),
            _ => return json_error(StatusCode::NOT_FOUND, NOT_FOUND),
        },
        None => return json_error(StatusCode::NOT_FOUND, NOT_FOUND),
    };
    // A connection that shows a valid token is a token holder's: kept within the token's
    // share ([`Connections`]).
    let principal = bearer(request.headers())
        .and_then(|token| state.tokens.principal(crew.as_deref(), token))
        .inspect(|principal| connection.shown(*principal));
    let (Some(service), Some(principal)) = (state.endpoints.get(&crew), principal) else {
        // An unknown crew answers as a known one without the right token.
        return unauthorized();
    };
    // A token's requests in flight are bounded, so that one tenant's load cannot take every
    // connection the daemon serves (a session's own GET stream is bounded by the session caps).
    let slot = if request.method() == Method::GET {
        None
    } else {
        match Requests::start(&state.requests, principal) {
            Some(slot) => Some(slot),
            None => return unavailable("the server has as many requests running as it takes for this token"),
        }
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(principal);
    let (body, held) = if parts.method == Method::POST {
        let mut held = Bodies::hold(&state.bodies, principal);
        match read_body(state, &parts, body, &mut held).await {
            Ok(body) => (body, Some(held)),
            Err(response) => return response,
        }
    } else {
        (Bytes::new(), None)
    };
    let opening = match session_of(state, &mut parts, &body, principal) {
        Ok(opening) => opening,
        Err(refusal) => return *refusal,
    };
    let stream = (parts.method == Method::GET).then(|| resume_after(&mut parts.headers));
    // A request of a session whose id is that of one still running would take over its
    // answer's route: refused, as over stdio, and the running one answered as usual.
    let session = parts.headers.get(SESSION_HEADER).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let mut guard = None;
    let request = request_id(&body);
    if let (true, Some(session), Some((id, _))) = (parts.method == Method::POST, session, &request) {
        match Running::start(&state.running, session, id.to_string()) {
            Some(started) => guard = Some(started),
            None => return id_still_running(id),
        }
    }
    // A tool call waits for room among its owner's (its session's, or under 2026-07-28 its
    // token's); nothing else does (a ping, a cancellation, an answer to the server).
    let owner = match (&parts.method, request) {
        (&Method::POST, Some((_, true))) => {
            // A session is an owner of its own only while it is one: under 2026-07-28 a
            // header naming none (a new id on each request) would make each call an owner.
            let session = session_named(&parts).filter(|id| state.sessions.owner(id) == Some(principal));
            Some(Owners::enter(&state.owners, (principal, session)).await)
        }
        _ => None,
    };
    let ending = parts.method == Method::DELETE;
    let response = service.handle(Request::from_parts(parts, Full::new(body))).await;
    if let Some(slot) = opening
        && let Some(id) = response.headers().get(SESSION_HEADER).and_then(|value| value.to_str().ok())
    {
        state.sessions.bind(id, &slot);
    }
    if response.status().is_server_error() {
        return redacted(response).await;
    }
    let response = if ending { ended(response) } else { response };
    let response = if let Some(opened) = stream { CommonIds::over(response, opened) } else { response };
    // The id, and the token's place among its requests, are free again once the answer has
    // been sent (or the client has gone).
    if guard.is_none() && slot.is_none() && owner.is_none() && held.is_none() {
        return response;
    }
    response.map(|body| Guarded { body, _held: (guard, slot, owner, held) }.boxed())
}

/// The session a request names, if any.
fn session_named(parts: &http::request::Parts) -> Option<String> {
    parts.headers.get(SESSION_HEADER).and_then(|value| value.to_str().ok()).map(str::to_owned)
}

/// The tool calls of each owner (a session, or a token under the 2026-07-28 protocol) being
/// answered, at most `each` at once; the others wait their turn, in order, never refused.
/// Each call costs the daemon's cores its parsing, a service and its answer besides its
/// tool's work, which the pool's lanes do not bound. By default one owner may fill the pool
/// (parallel reads of an object store wait on the network, not the cores); an operator
/// serving several crews may bound each lower: with 2, another crew's one-line read p99 under
/// 32 clients of one crew was 3.4-4.0 ms against 5.5-7.9 ms unbounded (`bench/tenants.py`,
/// release build, 2026-12-06).
struct Owners {
    running: Mutex<HashMap<OwnerKey, Arc<tokio::sync::Semaphore>>>,
    each: usize,
}

/// An owner of calls: a token, and the session it named, if any.
type OwnerKey = (Principal, Option<String>);

impl Owners {
    /// Waits for room for one more call of `owner`.
    async fn enter(owners: &Arc<Self>, owner: OwnerKey) -> OwnerTurn {
        let semaphore = {
            let mut running = owners.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            running.entry(owner.clone()).or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(owners.each))).clone()
        };
        let permit = semaphore.acquire_owned().await.expect("an owner's semaphore is never closed");
        OwnerTurn { owners: owners.clone(), owner, permit: Some(permit) }
    }
}

/// One call's turn among its owner's; the owner is forgotten when no call of it runs or waits.
struct OwnerTurn {
    owners: Arc<Owners>,
    owner: OwnerKey,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Drop for OwnerTurn {
    fn drop(&mut self) {
        drop(self.permit.take());
        let mut running = self.owners.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let std::collections::hash_map::Entry::Occupied(entry) = running.entry(self.owner.clone())
            && Arc::strong_count(entry.get()) == 1
        {
            entry.remove();
        }
    }
}

/// The request bodies held at once (from their arrival until their answers are sent), in
/// bytes: at most `room` in all, and `per_token` for one token. Without it the bodies in memory
/// were bounded only by the requests in flight: one token sending 300 bodies of 15 MB at once
/// held 2.9 GB, and another crew's one-line reads took up to 12.7 s meanwhile (red team,
/// 2026-12-07, debug build). A body past either bound is answered `503` with `Retry-After`.
struct Bodies {
    room: Arc<tokio::sync::Semaphore>,
    per_token: usize,
    held: Mutex<HashMap<Principal, usize>>,
}

/// Why a body could not be held: the words of its `503`.
#[derive(Debug)]
struct Unheld(&'static str);

impl std::fmt::Display for Unheld {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.0)
    }
}

impl std::error::Error for Unheld {}

/// One request's body bytes among the [`Bodies`], given back when dropped.
struct HeldBytes {
    bodies: Arc<Bodies>,
    principal: Principal,
    bytes: usize,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Bodies {
    /// `max` bytes in all (at least one body of `largest`), a quarter of them for one token
    /// (at least one body of `largest`).
    fn new(max: usize, largest: usize) -> Arc<Self> {
        // The semaphore counts in `u32`s at a time; four GiB is far past any body.
        let room = max.max(largest).min(u32::MAX as usize);
        Arc::new(Self {
            room: Arc::new(tokio::sync::Semaphore::new(room)),
            per_token: (room / 4).max(largest).min(room),
            held: Mutex::default(),
        })
    }

    /// Nothing held yet for a request of `principal`.
    fn hold(bodies: &Arc<Self>, principal: Principal) -> HeldBytes {
        HeldBytes { bodies: bodies.clone(), principal, bytes: 0, permit: None }
    }
}

impl HeldBytes {
    /// Holds `more` bytes besides those held; refused, holding nothing more, past the token's
    /// share or the whole.
    fn grow(&mut self, more: usize) -> Result<(), &'static str> {
        const TOKEN: &str = "the server holds as many request bytes as it takes for this token";
        const ALL: &str = "the server holds as many request bytes as it takes";
        if more == 0 {
            return Ok(());
        }
        let bodies = &self.bodies;
        let mut held = bodies.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine = held.get(&self.principal).copied().unwrap_or(0);
        if mine.saturating_add(more) > bodies.per_token {
            return Err(TOKEN);
        }
        let count = u32::try_from(more).map_err(|_| TOKEN)?;
        let permit = bodies.room.clone().try_acquire_many_owned(count).map_err(|_| ALL)?;
        held.insert(self.principal, mine + more);
        self.bytes += more;
        match &mut self.permit {
            Some(permits) => permits.merge(permit),
            None => self.permit = Some(permit),
        }
        Ok(())
    }
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        let mut held = self.bodies.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = held.get_mut(&self.principal) {
            *count = count.saturating_sub(self.bytes);
            if *count == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

/// True when a request names at most one session, with an id the server could have given:
/// one line of visible ASCII (the protocol's rule), at most [`SESSION_ID_MAX`] bytes. The SDK
/// reads a header it cannot read as text as no header, so an `initialize` with one would
/// open a session that [`session_of`] counted as named: outside the caps, and with no owner.
fn session_header_valid(headers: &http::HeaderMap) -> bool {
    let mut values = headers.get_all(SESSION_HEADER).iter();
    match (values.next(), values.next()) {
        (None, _) => true,
        (Some(value), None) => {
            let bytes = value.as_bytes();
            !bytes.is_empty() && bytes.len() <= SESSION_ID_MAX && bytes.iter().all(|byte| (0x21..=0x7e).contains(byte))
        }
        (Some(_), Some(_)) => false,
    }
}

/// The longest session id a request may name (the SDK's are UUIDs, 36 bytes).
const SESSION_ID_MAX: usize = 256;

/// The session a request opens (the slot it takes under the caps) or names: one named with
/// another token than the one that opened it (of the same endpoint: each endpoint has
/// sessions of its own) is answered as a session that does not exist, so that a leaked id
/// gives no other token its changes, reads or log.
fn session_of(
    state: &State,
    parts: &mut http::request::Parts,
    body: &Bytes,
    principal: Principal,
) -> Result<Option<SessionSlot>, Box<Response<Body>>> {
    if !session_header_valid(&parts.headers) {
        return Err(Box::new(jsonrpc_error(StatusCode::BAD_REQUEST, -32600, BAD_SESSION_HEADER)));
    }
    if parts.method == Method::POST && !parts.headers.contains_key(SESSION_HEADER) && is_initialize(body) {
        // A new session of the handshake protocol: within the caps, or not at all.
        let slot = state.sessions.reserve(principal).map_err(|why| Box::new(unavailable(why)))?;
        parts.extensions.insert(slot.clone());
        return Ok(Some(slot));
    }
    if let Some(id) = parts.headers.get(SESSION_HEADER).and_then(|value| value.to_str().ok())
        && state.sessions.owner(id).is_some_and(|owner| owner != principal)
    {
        parts.headers.insert(SESSION_HEADER, header::HeaderValue::from_static(NO_SESSION));
    }
    Ok(None)
}

/// Each token's requests whose answers are on their way.
#[derive(Debug)]
struct Requests {
    counts: Mutex<HashMap<Principal, usize>>,
    max: usize,
}

/// One request's place among its token's, given back when dropped.
struct RequestSlot {
    requests: Arc<Requests>,
    principal: Principal,
}

impl Requests {
    fn start(requests: &Arc<Self>, principal: Principal) -> Option<RequestSlot> {
        let mut counts = requests.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(principal).or_default();
        if *count >= requests.max {
            return None;
        }
        *count += 1;
        Some(RequestSlot { requests: requests.clone(), principal })
    }
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        let mut counts = self.requests.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.principal);
            }
        }
    }
}

/// The requests of sessions whose answers are still on their way, by session and request id.
#[derive(Debug, Default)]
struct Running(Mutex<std::collections::HashSet<(String, String)>>);

/// One running request's place in [`Running`], given back when dropped.
struct RunningGuard {
    running: Arc<Running>,
    key: (String, String),
}

impl Running {
    fn start(running: &Arc<Self>, session: String, id: String) -> Option<RunningGuard> {
        let key = (session, id);
        let fresh = running.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.clone());
        fresh.then(|| RunningGuard { running: running.clone(), key })
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.running.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.key);
    }
}

/// A response body that holds its request's places (its id in its session, its place among
/// its token's requests, its body's bytes) until it is sent whole or dropped.
struct Guarded {
    body: Body,
    _held: (Option<RunningGuard>, Option<RequestSlot>, Option<OwnerTurn>, Option<HeldBytes>),
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The session's own stream (the `GET` without a request's event id), with the ids it gives
/// its events moved on by one.
///
/// The SDK numbers that stream's events `0, 1, 2…`, and a fresh stream opens with a priming
/// event whose id is `0` as well, so a client that resumes with `Last-Event-ID: 0` may have seen
/// the priming event alone or the first real event: the SDK replays from the event it names,
/// and gave the second client that event again. Here the real events leave as `1, 2, 3…` (the
/// priming event keeps its `0`), so the id a client sends back is exactly the SDK's index of the
/// first event it has not seen, which is where the SDK's replay starts. The stream is rewritten
/// line by line (an `id:` line is the only one touched); a line split across frames waits for
/// its end.
struct CommonIds {
    body: Body,
    /// Bytes after the last whole line sent.
    pending: Vec<u8>,
    /// The next id line is the priming event's (a fresh stream's first event).
    priming: bool,
    done: bool,
}

impl CommonIds {
    fn new(body: Body, opened: bool) -> Self {
        Self { body, pending: Vec::new(), priming: opened, done: false }
    }

    /// The answer to a `GET`, its events' ids mended when it is a stream of events; `opened`
    /// says whether the stream is a fresh one (the `GET` had no `Last-Event-ID`).
    fn over(response: Response<Body>, opened: bool) -> Response<Body> {
        let events = response.status() == StatusCode::OK
            && response
                .headers()
                .get(header::CONTENT_TYPE)
                .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
        if events { response.map(|body| Self::new(body, opened).boxed()) } else { response }
    }

    /// `lines` with each event id moved on by one, but the priming event's.
    fn rewrite(&mut self, lines: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(lines.len() + 8);
        for line in lines.split_inclusive(|&byte| byte == b'\n') {
            let Some(value) = line.strip_prefix(b"id:") else {
                out.extend_from_slice(line);
                continue;
            };
            let priming = std::mem::take(&mut self.priming);
            let (value, end) = split_line_end(value.strip_prefix(b" ").unwrap_or(value));
            let next = std::str::from_utf8(value)
                .ok()
                .and_then(|value| value.parse::<u64>().ok())
                .and_then(|index| index.checked_add(1));
            match next {
                Some(next) if !priming => {
                    out.extend_from_slice(format!("id: {next}").as_bytes());
                    out.extend_from_slice(end);
                }
                _ => out.extend_from_slice(line),
            }
        }
        Bytes::from(out)
    }
}

/// A line without its end (`\n` or `\r\n`), and that end.
fn split_line_end(line: &[u8]) -> (&[u8], &[u8]) {
    let without = line.strip_suffix(b"\n").unwrap_or(line);
    let without = without.strip_suffix(b"\r").unwrap_or(without);
    line.split_at(without.len())
}

impl hyper::body::Body for CommonIds {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match std::pin::Pin::new(&mut this.body).poll_frame(context) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    this.done = true;
                    if this.pending.is_empty() {
                        return Poll::Ready(None);
                    }
                    let rest = std::mem::take(&mut this.pending);
                    return Poll::Ready(Some(Ok(hyper::body::Frame::data(this.rewrite(&rest)))));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.pending.extend_from_slice(&data);
                        let Some(last) = this.pending.iter().rposition(|&byte| byte == b'\n') else { continue };
                        let rest = this.pending.split_off(last + 1);
                        let whole = std::mem::replace(&mut this.pending, rest);
                        return Poll::Ready(Some(Ok(hyper::body::Frame::data(this.rewrite(&whole)))));
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(never))) => match never {},
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done || (self.pending.is_empty() && self.body.is_end_stream())
    }
}

/// The id of a request (a message with a method and an id), if the body is one.
fn request_id(body: &[u8]) -> Option<(serde_json::Value, bool)> {
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(default)]
        id: Option<serde_json::Value>,
        #[serde(default, borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let message = serde_json::from_slice::<Message<'_>>(body).ok()?;
    let method = message.method?;
    Some((message.id?, method == "tools/call"))
}

/// The SDK's own answer to a failure inside the server (a session that cannot be made, a
/// stream that cannot be opened) carries the failure's text, which may name what only the
/// operator may know (a directory, a file's name). The operator's log gets it; the client
/// gets one line as redacted as a tool's error.
async fn redacted(response: Response<Body>) -> Response<Body> {
    let status = response.status();
    let body = tokio::time::timeout(Duration::from_secs(1), Limited::new(response.into_body(), 4096).collect()).await;
    let text = match body {
        Ok(Ok(collected)) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        _ => String::new(),
    };
    tracing::warn!(status = status.as_u16(), body = %text, "the MCP transport failed a request");
    jsonrpc_error(
        status,
        -32603,
        "internal error: the server could not take this request; the operator's log has the details",
    )
}

const SESSION_HEADER: &str = "mcp-session-id";

/// The request's bearer token (the scheme's name is read in any case, as HTTP authentication schemes are).
fn bearer(headers: &http::HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    Some(token.trim_ascii())
}

/// Resumption replays the events *after* `Last-Event-ID`. The SDK's session cache replays
/// from the event with that id itself, so a client that resumes gets its last event twice;
/// for an event of a request's stream (`<index>/<request>`) the id is moved on by one before
/// the SDK reads it. The session's own stream (`<index>` ids) is mended on the way out
/// instead, by [`CommonIds`]: the id a client sends back there already names the next event.
/// Whether the `GET` opens a stream afresh (no `Last-Event-ID`), whose first event is then
/// the priming one.
fn resume_after(headers: &mut http::HeaderMap) -> bool {
    let Some(last) = headers.get(LAST_EVENT_ID).and_then(|value| value.to_str().ok()) else { return true };
    let Some((index, request)) = last.split_once('/') else { return false };
    let (Ok(index), Ok(_)) = (index.parse::<u64>(), request.parse::<u64>()) else { return false };
    if let Some(next) = index.checked_add(1)
        && let Ok(value) = HeaderValue::from_str(&format!("{next}/{request}"))
    {
        headers.insert(LAST_EVENT_ID, value);
    }
    false
}

const LAST_EVENT_ID: &str = "last-event-id";

/// How long a client waits before it reconnects a stream that ended, as the priming event of
/// each stream tells it.
const SSE_RETRY: Duration = Duration::from_secs(3);

/// The body, read within its size and time bounds, and checked to be JSON: the answers for a
/// body too large, too slow or not JSON are the server's own, before anything is parsed
/// further.
async fn read_body(
    state: &State,
    parts: &http::request::Parts,
    body: Incoming,
    held: &mut HeldBytes,
) -> Result<Bytes, Response<Body>> {
    let too_large = || {
        jsonrpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            &format!("the request body is larger than {} bytes", state.max_request_bytes),
        )
    };
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > state.max_request_bytes as u64) {
        return Err(too_large());
    }
    // Room for the body among those held: all of it at once when its length is declared,
    // else frame by frame as it arrives.
    if let Some(length) = declared
        && let Err(why) = held.grow(usize::try_from(length).unwrap_or(usize::MAX))
    {
        return Err(unavailable(why));
    }
    let limited = Limited::new(body, state.max_request_bytes);
    let collect = async {
        // Within the bound (checked above) and held already.
        let mut collected = Vec::with_capacity(declared.map_or(0, |length| usize::try_from(length).unwrap_or(0)));
        let mut limited = std::pin::pin!(limited);
        while let Some(frame) = limited.frame().await {
            let Ok(data) = frame?.into_data() else { continue };
            if declared.is_none() {
                held.grow(data.len())
                    .map_err(|why| Box::new(Unheld(why)) as Box<dyn std::error::Error + Send + Sync>)?;
            }
            collected.extend_from_slice(&data);
        }
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(Bytes::from(collected))
    };
    let body = match tokio::time::timeout(state.body_timeout, collect).await {
        Err(_) => {
            return Err(jsonrpc_error(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                "the request body did not arrive in time; send it whole, at once",
            ));
        }
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Ok(Err(error)) if let Some(why) = error.downcast_ref::<Unheld>().map(|unheld| unheld.0) => {
            return Err(unavailable(why));
        }
        Ok(Err(_)) => return Err(jsonrpc_error(StatusCode::BAD_REQUEST, -32600, "the request body could not be read")),
        Ok(Ok(collected)) => collected,
    };
    if let Some(refusal) = crate::json_check::screen(&body) {
        return Err(json_response(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({
                "jsonrpc": "2.0",
                "id": refusal.id,
                "error": { "code": refusal.code, "message": refusal.message },
            }),
        ));
    }
    if serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&body).is_err() {
        return Err(jsonrpc_error(
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: the body is not one JSON-RPC 2.0 request, notification or response of MCP",
        ));
    }
    Ok(body)
}

/// True when the body is an `initialize` request (the only request that opens a session).
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow, default)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method<'_>>(body).is_ok_and(|message| message.method.as_deref() == Some("initialize"))
}

/// The SDK answers a session's `DELETE` with `202 Accepted`; the session is gone by then, and
/// clients expect `200` or `204` (the Python SDK logs a warning for anything else).
fn ended(response: Response<Body>) -> Response<Body> {
    if response.status() != StatusCode::ACCEPTED {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    parts.status = StatusCode::NO_CONTENT;
    parts.headers.remove(header::CONTENT_TYPE);
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Full::new(Bytes::new()).boxed())
}

const NOT_FOUND: &str = "not found: the MCP endpoints are /mcp and /mcp/<crew>";
const NO_OAUTH: &str = "not found: this server does not offer OAuth; it takes static bearer tokens, sent as `Authorization: Bearer <token>` (ask the operator for one)";
const FORBIDDEN_ORIGIN: &str = "forbidden: this origin is not allowed (the operator allows more with --allowed-origin)";
const BAD_SESSION_HEADER: &str = "invalid request: `Mcp-Session-Id` must be one header of visible ASCII characters (at most 256), the id the server gave at `initialize`";
const UNAUTHORIZED: &str = "unauthorized: this server takes static bearer tokens; send `Authorization: Bearer <token>` with a token for this endpoint (ask the operator for one)";

/// The CORS headers for an allowed origin.
fn add_cors(headers: &mut http::HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, DELETE, OPTIONS"));
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name",
        ),
    );
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"),
    );
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::new()).boxed());
    *response.status_mut() = status;
    response
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut text = serde_json::to_vec(body).unwrap_or_default();
    text.push(b'\n');
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A plain JSON error, for what is not a JSON-RPC exchange (a wrong path, a refused origin).
fn json_error(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, &serde_json::json!({ "error": message }))
}

/// A JSON-RPC error without an id (the request's was not read, or not trusted).
fn jsonrpc_error(status: StatusCode, code: i32, message: &str) -> Response<Body> {
    json_response(
        status,
        &serde_json::json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } }),
    )
}

fn unauthorized() -> Response<Body> {
    let mut response = jsonrpc_error(StatusCode::UNAUTHORIZED, -32001, UNAUTHORIZED);
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"vfs\""));
    response
}

/// `400` for a request of a session whose id is that of one still running.
fn id_still_running(id: &serde_json::Value) -> Response<Body> {
    json_response(
        StatusCode::BAD_REQUEST,
        &serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32600,
                "message": "invalid request: a request with this id is still running; give each request an id of its own",
            },
        }),
    )
}

/// `503` with `Retry-After`: a cap is reached; nothing already served is touched.
fn unavailable(what: &str) -> Response<Body> {
    let mut response =
        jsonrpc_error(StatusCode::SERVICE_UNAVAILABLE, -32000, &format!("unavailable: {what}; try again shortly"));
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

/// A future that completes on SIGTERM, SIGINT or SIGHUP, each listened for from this call on
/// (so a signal that comes between it and the future's first poll is not lost, and does not
/// end the process by its default action: SIGHUP's, when the terminal a daemon runs in closed,
/// ended it at once, its calls unanswered and a journaled delete cut). Call it within the
/// runtime.
///
/// # Errors
/// The runtime cannot listen for the signals.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut hangup = signal(SignalKind::hangup())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
            _ = hangup.recv() => {}
        }
        tracing::info!("a shutdown signal arrived");
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handshake sessions of one token share one bound on what they remember (a token may
    /// open hundreds); another token's have their own.
    #[test]
    fn the_sessions_of_one_token_share_one_bound_on_what_they_remember() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap().to_owned();
        let factory: SessionFactory = Arc::new(move || {
            let spec = vfs::MountSpec::new(&path, vfs::MountRoot::new("/w").unwrap(), "rw".parse().unwrap());
            let registry = vfs::MountRegistry::builder().mount(spec).build(vfs::ambient_authority()).unwrap();
            Ok(ToolService::new(registry, None))
        });
        let pool = Arc::new(Pool::new(8));
        let state = EndpointState::new(factory, pool.clone(), pool.whole()).unwrap();
        let sessions = [
            state.session(Some(Principal(0))).unwrap(),
            state.session(Some(Principal(0))).unwrap(),
            state.session(Some(Principal(1))).unwrap(),
        ];
        let counts = |state: &EndpointState| {
            let budgets = state.seen.lock().unwrap();
            (Arc::strong_count(&budgets[&Principal(0)]), Arc::strong_count(&budgets[&Principal(1)]))
        };
        assert_eq!(counts(&state), (3, 2), "the map's, and one for each session");
        drop(sessions);
        assert_eq!(counts(&state), (1, 1));
    }

    /// Bodies arriving at once are held within their token's share and within the room: of
    /// eight at once, each a quarter of the room, one per token is held when two tokens send
    /// them (a share is one body), and four in all when eight do; every other is refused, none
    /// is held past a bound, and all is given back with the requests.
    #[test]
    fn bodies_arriving_at_once_are_held_within_the_share_and_the_room() {
        let at_once = |bodies: &Arc<Bodies>, tokens: usize| -> Vec<(usize, Result<(), &'static str>)> {
            std::thread::scope(|scope| {
                let runs: Vec<_> = (0..8)
                    .map(|index| {
                        scope.spawn(move || {
                            let mut held = Bodies::hold(bodies, Principal(index % tokens));
                            let grown = held.grow(1000);
                            (index % tokens, grown, held)
                        })
                    })
                    .collect();
                let results: Vec<_> = runs.into_iter().map(|run| run.join().unwrap()).collect();
                results.into_iter().map(|(token, grown, _held)| (token, grown)).collect()
            })
        };
        for _ in 0..50 {
            // Room for four bodies of 1,000 bytes; a token's share is one of them.
            let bodies = Bodies::new(4000, 1000);
            let two = at_once(&bodies, 2);
            for token in [0, 1] {
                let mine: Vec<_> = two.iter().filter(|(owner, _)| *owner == token).map(|(_, grown)| *grown).collect();
                assert_eq!(mine.iter().filter(|grown| grown.is_ok()).count(), 1, "{mine:?}");
                assert!(mine.iter().filter_map(|grown| grown.err()).all(|why| why.ends_with("for this token")));
            }
            let eight = at_once(&bodies, 8);
            assert_eq!(eight.iter().filter(|(_, grown)| grown.is_ok()).count(), 4, "{eight:?}");
            assert!(eight.iter().filter_map(|(_, grown)| grown.err()).all(|why| why.ends_with("as it takes")));
            assert!(bodies.held.lock().unwrap().is_empty());
            assert_eq!(bodies.room.available_permits(), 4000);
        }
    }

    /// An owner's calls past its bound wait their turn, in order, and are never refused;
    /// another owner's do not wait; an owner with nothing running or waiting is forgotten.
    #[tokio::test]
    async fn an_owners_calls_past_its_bound_wait_their_turn() {
        let owners = Arc::new(Owners { running: Mutex::default(), each: 1 });
        let one = (Principal(0), Some("session".to_owned()));
        let first = Owners::enter(&owners, one.clone()).await;
        let mut second = Box::pin(Owners::enter(&owners, one.clone()));
        let soon = Duration::from_millis(50);
        assert!(tokio::time::timeout(soon, &mut second).await.is_err(), "the second waits for the first");
        let other = tokio::time::timeout(soon, Owners::enter(&owners, (Principal(0), None))).await;
        assert!(other.is_ok(), "another owner does not wait");
        drop(other);
        drop(first);
        let second = tokio::time::timeout(soon, second).await.expect("its turn once the first is done");
        assert_eq!(owners.running.lock().unwrap().len(), 1);
        drop(second);
        assert!(owners.running.lock().unwrap().is_empty(), "an owner with no call is forgotten");
    }

    const HOME: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    /// A client opening connections without end from one address displaces its own, never
    /// another address's that is still sending its first headers; with as many not kept at
    /// two addresses, the oldest goes.
    #[test]
    fn at_the_cap_the_address_with_the_most_connections_not_kept_gives_way() {
        let connections = Arc::new(Connections::new(4, 1, &Tokens::default()));
        let flood = std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9));
        let older: Vec<Slot> = (0..3).map(|_| connections.admit(flood).unwrap()).collect();
        let fresh = connections.admit(HOME).unwrap();
        let flooding: Vec<Slot> = (0..20).map(|_| connections.admit(flood).unwrap()).collect();
        assert!(!fresh.closed.is_cancelled(), "the other address's fresh connection stays");
        assert!(older.iter().all(|slot| slot.closed.is_cancelled()));
        let left: Vec<&Slot> = flooding.iter().filter(|slot| !slot.closed.is_cancelled()).collect();
        assert_eq!(left.len(), 3, "the flood holds what is left");
        // Another from the fresh one's address: the flood still holds the most, and gives way.
        let second = connections.admit(HOME).unwrap();
        assert!(left[0].closed.is_cancelled() && !left[1].closed.is_cancelled());
        // Two each: the oldest goes, here the first from the other address.
        let _third = connections.admit(HOME).unwrap();
        assert!(fresh.closed.is_cancelled() && !left[1].closed.is_cancelled() && !second.closed.is_cancelled());
        // Two each again: the flood's oldest.
        let _again = connections.admit(flood).unwrap();
        assert!(left[1].closed.is_cancelled() && !left[2].closed.is_cancelled() && !second.closed.is_cancelled());
    }

    /// Four token lines for the crew `alpha` (principals 0 to 3), one for `beta` (4).
    fn two_crews_tokens() -> Tokens {
        let mut tokens = Tokens::default();
        for token in ["a", "b", "c", "d"] {
            tokens.grant(Some("alpha".to_owned()), token.repeat(16));
        }
        tokens.grant(Some("beta".to_owned()), "e".repeat(16));
        tokens
    }

    /// Two crews on 8 connections, two kept a token: alpha, with four token lines, keeps six
    /// (its tokens could keep all eight), so that at the cap beta's new connection takes the
    /// place of one of alpha's not kept, and is kept itself. (Before, alpha kept all eight and
    /// beta's was refused.)
    #[test]
    fn a_crew_with_many_tokens_cannot_keep_every_connection() {
        let tokens = two_crews_tokens();
        let connections = Arc::new(Connections::new(8, 2, &tokens));
        let alpha: Vec<Slot> = (0..8)
            .map(|index| {
                let slot = connections.admit(HOME).unwrap();
                slot.connection.shown(Principal(index / 2));
                slot
            })
            .collect();
        let kept =
            |slot: &Slot| connections.lock().by_id.get(&slot.connection.id).is_some_and(|admitted| admitted.kept);
        assert_eq!(alpha.iter().filter(|slot| kept(slot)).count(), 6, "two are left for beta");
        let beta = connections.admit(HOME).expect("beta's connection is admitted at the cap");
        beta.connection.shown(Principal(4));
        assert!(kept(&beta), "and kept");
        assert_eq!(alpha.iter().filter(|slot| slot.closed.is_cancelled()).count(), 1, "in place of one of alpha's");
        let open = connections.lock();
        assert_eq!(
            (open.kept_all, open.kept_by_endpoint.get(&0), open.kept_by_endpoint.get(&1)),
            (7, Some(&6), Some(&1))
        );
        drop(open);
        drop((alpha, beta));
        let open = connections.lock();
        assert_eq!((open.kept_all, open.kept_by_endpoint.len(), open.kept_by_token.len()), (0, 0, 0));
    }

    /// At the cap: the oldest connection not kept goes, an idle one before one answering a
    /// request; a token's connections are kept up to its share, and one past it is kept once
    /// another of the token's has closed; when all are kept, none goes and the new one is
    /// refused.
    #[test]
    fn at_the_cap_the_oldest_connection_not_kept_gives_way_idle_ones_first() {
        let connections = Arc::new(Connections::new(4, 1, &Tokens::default()));
        let (one, other) = (Principal(0), Principal(1));
        let kept = connections.admit(HOME).unwrap();
        kept.connection.shown(one);
        let busy_older = connections.admit(HOME).unwrap();
        busy_older.connection.shown(one);
        let _answering_older = busy_older.connection.busy();
        let busy_newer = connections.admit(HOME).unwrap();
        let _answering_newer = busy_newer.connection.busy();
        let other_kept = connections.admit(HOME).unwrap();
        other_kept.connection.shown(other);
        // Full: both not kept are answering, so the oldest of them goes.
        let newest = connections.admit(HOME).unwrap();
        assert!(busy_older.closed.is_cancelled());
        assert!(!busy_newer.closed.is_cancelled() && !kept.closed.is_cancelled() && !other_kept.closed.is_cancelled());
        drop(busy_older);
        // Idle before answering, whatever their age.
        let last = connections.admit(HOME).unwrap();
        assert!(newest.closed.is_cancelled() && !busy_newer.closed.is_cancelled());
        drop(newest);
        // Past the share, kept once the token's kept one has closed.
        last.connection.shown(one);
        busy_newer.connection.shown(one);
        let open = connections.lock();
        assert!(!open.by_id[&last.connection.id].kept);
        drop(open);
        drop(kept);
        last.connection.shown(one);
        assert!(connections.lock().by_id[&last.connection.id].kept);
        assert_eq!(connections.lock().kept_by_token[&one], 1);
        // Full again: an idle one goes before the one answering; then, with it the only one
        // not kept, the one answering; once all are kept, a new one is refused.
        let fourth = connections.admit(HOME).unwrap();
        let fifth = connections.admit(HOME).unwrap();
        assert!(fourth.closed.is_cancelled() && !busy_newer.closed.is_cancelled());
        fifth.connection.shown(Principal(2));
        let sixth = connections.admit(HOME).unwrap();
        assert!(busy_newer.closed.is_cancelled(), "the one answering went before any kept one");
        sixth.connection.shown(Principal(3));
        assert!(connections.admit(HOME).is_none(), "every connection is kept");
        assert!(!last.closed.is_cancelled() && !other_kept.closed.is_cancelled());
        assert_eq!(connections.lock().by_id.len(), 4);
    }

    #[test]
    fn a_token_grants_only_its_own_endpoint() {
        let mut tokens = Tokens::default();
        tokens.grant(None, "default-secret".to_owned());
        tokens.grant(Some("review".to_owned()), "review-secret".to_owned());
        assert_eq!(tokens.principal(None, b"default-secret"), Some(Principal(0)));
        assert_eq!(tokens.principal(Some("review"), b"review-secret"), Some(Principal(1)));
        assert_eq!(tokens.principal(Some("review"), b"default-secret"), None);
        assert_eq!(tokens.principal(None, b"review-secret"), None);
        assert_eq!(tokens.principal(Some("other"), b"review-secret"), None);
        assert_eq!(tokens.principal(None, b"default-secre"), None);
        assert_eq!(tokens.principal(None, b"default-secrets"), None);
        assert_eq!(tokens.principal(None, b""), None);
        assert_eq!(format!("{tokens:?}"), "Tokens { count: 2 }");
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        let with = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            bearer(&headers).map(<[u8]>::to_vec)
        };
        assert_eq!(with("Bearer abc"), Some(b"abc".to_vec()));
        assert_eq!(with("bearer abc"), Some(b"abc".to_vec()));
        assert_eq!(with("BEARER  abc "), Some(b"abc".to_vec()));
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bearer"), None);
        assert_eq!(with("Bearerabc"), None);
    }

    #[test]
    fn session_caps_hold_over_all_and_per_token_and_free_with_the_session() {
        let mut tokens = Tokens::default();
        for token in ["a", "b", "c"] {
            tokens.grant(None, token.repeat(16));
        }
        let sessions = Arc::new(Sessions::new(3, 2, &tokens));
        let first = sessions.reserve(Principal(0)).unwrap();
        let second = sessions.reserve(Principal(0)).unwrap();
        assert_eq!(sessions.reserve(Principal(0)).unwrap_err(), SESSIONS_FULL, "a third session of one token");
        let other = sessions.reserve(Principal(1)).unwrap();
        assert_eq!(sessions.reserve(Principal(2)).unwrap_err(), SESSIONS_FULL, "a fourth session in all");
        let kept = first.clone();
        drop(first);
        assert!(sessions.reserve(Principal(2)).is_err(), "a clone still holds the place");
        drop(kept);
        let third = sessions.reserve(Principal(2)).unwrap();
        drop((second, other, third));
        let counts = sessions.lock();
        assert_eq!((counts.all, counts.by_token.len(), counts.by_endpoint.len()), (0, 0, 0));
    }

    /// Two crews on 16 sessions, four a token: the crew with four token lines takes twelve
    /// (its four tokens could take all sixteen), and the other crew's four are still there;
    /// past them the other crew waits too, and a session ended gives its place back. With
    /// three endpoints each keeps two (a sixth of half).
    #[test]
    fn each_endpoint_keeps_its_share_of_the_sessions_whatever_another_holds() {
        let mut tokens = two_crews_tokens();
        let sessions = Arc::new(Sessions::new(16, 4, &tokens));
        assert_eq!(sessions.shares.kept, [4, 4]);
        let mut alpha = Vec::new();
        for token in 0..4 {
            for _ in 0..3 {
                alpha.push(sessions.reserve(Principal(token)).unwrap());
            }
        }
        assert_eq!(sessions.reserve(Principal(3)).unwrap_err(), ENDPOINT_FULL, "alpha past twelve");
        let beta: Vec<SessionSlot> = (0..4).map(|_| sessions.reserve(Principal(4)).unwrap()).collect();
        assert_eq!(sessions.reserve(Principal(4)).unwrap_err(), SESSIONS_FULL, "sixteen in all");
        drop(alpha.pop());
        assert_eq!(sessions.reserve(Principal(4)).unwrap_err(), SESSIONS_FULL, "beta's four are its token's cap");
        alpha.push(sessions.reserve(Principal(3)).unwrap());
        drop(beta);
        assert_eq!(sessions.lock().by_endpoint.get(&1), None);

        tokens.grant(None, "f".repeat(16));
        let three = Arc::new(Sessions::new(12, 12, &tokens));
        assert_eq!(three.shares.kept, [2, 2, 2]);
        let held: Vec<SessionSlot> = (0..8).map(|_| three.reserve(Principal(0)).unwrap()).collect();
        assert_eq!(three.reserve(Principal(1)).unwrap_err(), ENDPOINT_FULL, "two kept for each other endpoint");
        let others = [three.reserve(Principal(4)).unwrap(), three.reserve(Principal(5)).unwrap()];
        assert_eq!(three.reserve(Principal(0)).unwrap_err(), ENDPOINT_FULL, "one still owed to /mcp");
        drop((held, others, alpha));

        // An endpoint is kept no more than its tokens may open: at two a token, beta's one
        // token is kept two of the 64 (not the 16 of its share, which no one could use), and
        // alpha's four are kept eight.
        let tokens = two_crews_tokens();
        let wide = Arc::new(Sessions::new(64, 16, &tokens));
        assert_eq!(wide.shares.kept, [16, 16]);
        let narrow = Arc::new(Sessions::new(64, 2, &tokens));
        assert_eq!(narrow.shares.kept, [8, 2]);
    }

    #[test]
    fn a_resumed_request_stream_starts_after_the_last_event() {
        let resumed = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(LAST_EVENT_ID, HeaderValue::from_str(value).unwrap());
            assert!(!resume_after(&mut headers));
            headers[LAST_EVENT_ID].to_str().unwrap().to_owned()
        };
        assert_eq!(resumed("3/0"), "4/0");
        assert_eq!(resumed("0/17"), "1/17");
        assert_eq!(resumed("5"), "5");
        assert_eq!(resumed("x/1"), "x/1");
        assert_eq!(resumed("18446744073709551615/1"), "18446744073709551615/1");
        assert!(resume_after(&mut http::HeaderMap::new()), "a GET without an id opens a stream");
    }

    /// The body `frames` make, read through [`CommonIds`].
    async fn through_common_ids(frames: &[&str], fresh: bool) -> String {
        /// A body that hands out its frames one at a time.
        struct Frames(std::collections::VecDeque<Bytes>);
        impl hyper::body::Body for Frames {
            type Data = Bytes;
            type Error = Infallible;
            fn poll_frame(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
                std::task::Poll::Ready(self.get_mut().0.pop_front().map(|data| Ok(hyper::body::Frame::data(data))))
            }
        }
        let body = Frames(frames.iter().map(|frame| Bytes::copy_from_slice(frame.as_bytes())).collect()).boxed();
        let collected = CommonIds::new(body, fresh).collect().await.unwrap().to_bytes();
        String::from_utf8(collected.to_vec()).unwrap()
    }

    /// `CommonIds` numbers a fresh stream's events apart from its priming event: the SDK must
    /// send one.
    #[test]
    fn the_sdk_primes_each_stream_and_keeps_its_own_events() {
        let options = HttpOptions::new("127.0.0.1:8080".parse().unwrap(), Tokens::default(), 1024);
        let (config, _) = sdk_config("127.0.0.1:8080".parse().unwrap(), &options, CancellationToken::new());
        assert_eq!(config.sse_retry, Some(SSE_RETRY));
    }

    #[tokio::test]
    async fn the_sessions_own_stream_gives_each_event_an_id_of_its_own() {
        let fresh = ["data:\nid: 0\nretry: 3000\n\n", "data: {\"a\":1}\nid: 0\n\n", ":\n\n", "data: {}\nid: 1\n\n"];
        assert_eq!(
            through_common_ids(&fresh, true).await,
            "data:\nid: 0\nretry: 3000\n\ndata: {\"a\":1}\nid: 1\n\n:\n\ndata: {}\nid: 2\n\n"
        );
        // A resumed stream has no priming event; a request's ids and odd ids pass as they are.
        let resumed = ["data: {}\nid: 4\n\ndata: {}\nid:7\r\n\r\n", "data: {}\nid: 2/3\n\nid: x\n\n"];
        assert_eq!(
            through_common_ids(&resumed, false).await,
            "data: {}\nid: 5\n\ndata: {}\nid: 8\r\n\r\ndata: {}\nid: 2/3\n\nid: x\n\n"
        );
        // A line split across frames is rewritten whole; a last line without its end is sent.
        assert_eq!(
            through_common_ids(&["data: {}\ni", "d: 1", "1\n\nid: 3"], false).await,
            "data: {}\nid: 12\n\nid: 4"
        );
        assert_eq!(through_common_ids(&["id: 18446744073709551615\n"], false).await, "id: 18446744073709551615\n");
    }

    #[tokio::test]
    async fn a_transport_failure_reaches_the_client_redacted() {
        let mut failed = Response::new(
            Full::new(Bytes::from_static(b"fail to create session: /srv/logs/exchanges-x.jsonl")).boxed(),
        );
        *failed.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        let answer = redacted(failed).await;
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            String::from_utf8_lossy(&body),
            "{\"error\":{\"code\":-32603,\"message\":\"internal error: the server could not take this request; the operator's log has the details\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n"
        );
    }

    #[test]
    fn an_initialize_is_told_from_other_messages() {
        assert!(is_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#));
        assert!(!is_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#));
        assert!(!is_initialize(br#"[{"method":"initialize"}]"#));
        assert!(!is_initialize(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
    }
}
