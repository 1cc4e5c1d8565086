//! The MCP server over streamable HTTP (`vfs serve --listen`), with the SDK's own transport and
//! sessions.
//!
//! Each endpoint is a path: `/mcp` for the launch's own mounts, `/mcp/<crew>` for each hosted
//! crew. Every session of an endpoint gets its own [`VfsServer`] (its own exchange log file and
//! its own call state); all sessions share one pool of running calls. Before anything reaches
//! the SDK a request must carry a bearer token that grants its endpoint: without one, or with
//! one that grants only another endpoint, the answer is `401` with `WWW-Authenticate: Bearer`,
//! the same for a crew that does not exist. Tokens are compared in constant time and never
//! logged. The SDK then checks `Host` and `Origin` against the listen address, `localhost` and
//! what the operator allowed (`403` otherwise), the protection against DNS rebinding that the
//! specification asks for.
//!
//! On SIGTERM or SIGINT the server stops accepting connections, lets the running calls finish
//! within a grace period, then ends the sessions (each exchange log is synced to disk as its
//! session ends).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::server::{VfsServer, default_pool};
use crate::tools::ToolService;

/// Builds the tools for one new session of an endpoint (a fresh exchange log each time).
pub type SessionFactory = Arc<dyn Fn() -> std::io::Result<ToolService> + Send + Sync>;

/// One endpoint: `/mcp` (`crew` is `None`) or `/mcp/<crew>`.
pub struct Endpoint {
    /// The crew's name, for `/mcp/<crew>`; `None` for `/mcp`.
    pub crew: Option<String>,
    /// Builds each session's tools.
    pub sessions: SessionFactory,
}

/// Who may reach which endpoint: each token grants `/mcp` (`crew` `None`) or one crew's
/// endpoint.
#[derive(Clone, Default)]
pub struct Tokens {
    grants: Vec<(Option<String>, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves.
        formatter.debug_struct("Tokens").field("count", &self.grants.len()).finish()
    }
}

impl Tokens {
    /// Adds a token for `/mcp` (`crew` `None`) or `/mcp/<crew>`.
    pub fn grant(&mut self, crew: Option<String>, token: String) {
        self.grants.push((crew, token));
    }

    /// True when no token was given.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// True when a token grants `/mcp`.
    #[must_use]
    pub fn grants_default(&self) -> bool {
        self.grants.iter().any(|(crew, _)| crew.is_none())
    }

    /// The crews that have a token.
    pub fn crews(&self) -> impl Iterator<Item = &str> {
        self.grants.iter().filter_map(|(crew, _)| crew.as_deref())
    }

    /// True when `token` grants the endpoint of `crew`. Every grant is compared, each in
    /// constant time, so the time taken says nothing about which token came close.
    fn allows(&self, crew: Option<&str>, token: &[u8]) -> bool {
        let mut allowed = false;
        for (endpoint, secret) in &self.grants {
            let same = same_secret(secret.as_bytes(), token);
            allowed |= same && endpoint.as_deref() == crew;
        }
        allowed
    }
}

/// Compares two secrets without stopping at the first difference.
fn same_secret(expected: &[u8], given: &[u8]) -> bool {
    let mut difference = expected.len() ^ given.len();
    for index in 0..expected.len().max(given.len()) {
        let left = expected.get(index).copied().unwrap_or(0);
        let right = given.get(index).copied().unwrap_or(0);
        difference |= usize::from(left ^ right);
    }
    std::hint::black_box(difference) == 0
}

/// How the daemon listens.
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

struct State {
    endpoints: BTreeMap<Option<String>, StreamableHttpService<VfsServer, LocalSessionManager>>,
    tokens: Tokens,
}

/// Serves `endpoints` until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn serve_http(listener: Listener, endpoints: Vec<Endpoint>, options: HttpOptions) -> std::io::Result<()> {
    serve_until(listener, endpoints, options, shutdown_signal()).await
}

/// Serves until `stop` completes (a signal, or a test's trigger).
pub async fn serve_until(
    listener: Listener,
    endpoints: Vec<Endpoint>,
    options: HttpOptions,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let pool = default_pool();
    let capacity = pool.available_permits();
    let sessions_end = CancellationToken::new();
    let config = sdk_config(listener.address, &options, sessions_end.clone());
    let services = endpoints
        .into_iter()
        .map(|endpoint| {
            let (factory, pool) = (endpoint.sessions, pool.clone());
            let service = StreamableHttpService::new(
                move || factory().map(|tools| VfsServer::with_pool(tools, pool.clone())),
                Arc::new(LocalSessionManager::default()),
                config.clone(),
            );
            (endpoint.crew, service)
        })
        .collect();
    let state = Arc::new(State { endpoints: services, tokens: options.tokens.clone() });
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                let service = hyper::service::service_fn(move |request| route(state.clone(), request));
                let connection = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "an HTTP connection ended with an error");
                    }
                });
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    tracing::info!("stopping: no new connections; waiting for running calls");
    let deadline = tokio::time::Instant::now() + options.grace;
    while pool.available_permits() < capacity && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sessions_end.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(2), graceful.shutdown()).await;
    Ok(())
}

/// The SDK's configuration: sessions, and the `Host` and `Origin` checks.
fn sdk_config(address: SocketAddr, options: &HttpOptions, end: CancellationToken) -> StreamableHttpServerConfig {
    let port = address.port();
    let host = match address.ip() {
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    let mut hosts: Vec<String> = ["localhost".to_owned(), "127.0.0.1".to_owned(), "[::1]".to_owned(), host.clone()]
        .into_iter()
        .flat_map(|name| [format!("{name}:{port}"), name])
        .collect();
    hosts.extend(options.allowed_hosts.iter().cloned());
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]", host.as_str()]
        .iter()
        .flat_map(|name| [format!("http://{name}:{port}"), format!("https://{name}:{port}")])
        .collect();
    origins.extend(options.allowed_origins.iter().cloned());
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_cancellation_token(end)
}

type Body = BoxBody<Bytes, Infallible>;

/// `/mcp` and `/mcp/<crew>`: the bearer token first, then the SDK.
async fn route(state: Arc<State>, request: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = request.uri().path();
    let crew = match path.strip_prefix("/mcp") {
        Some("" | "/") => None,
        Some(rest) => match rest.strip_prefix('/') {
            Some(name) if !name.is_empty() && !name.contains('/') => Some(name.to_owned()),
            _ => return Ok(plain(StatusCode::NOT_FOUND, "not found: the MCP endpoints are /mcp and /mcp/<crew>\n")),
        },
        None => return Ok(plain(StatusCode::NOT_FOUND, "not found: the MCP endpoints are /mcp and /mcp/<crew>\n")),
    };
    let token = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let service = state.endpoints.get(&crew);
    let allowed = token.is_some_and(|token| state.tokens.allows(crew.as_deref(), token.as_bytes()));
    match service {
        Some(service) if allowed => {
            let ending = request.method() == http::Method::DELETE;
            let response = service.handle(request).await;
            Ok(if ending { ended(response) } else { response })
        }
        // An unknown crew answers as a known one without the right token.
        _ => Ok(unauthorized()),
    }
}

/// The SDK answers a session's `DELETE` with `202 Accepted`; the session is gone by then, and
/// clients expect `200` or `204` (the Python SDK logs a warning for anything else).
fn ended(response: Response<Body>) -> Response<Body> {
    if response.status() != StatusCode::ACCEPTED {
        return response;
    }
    let (mut parts, _) = response.into_parts();
    parts.status = StatusCode::NO_CONTENT;
    parts.headers.remove(http::header::CONTENT_TYPE);
    parts.headers.remove(http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Full::new(Bytes::new()).boxed())
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    response
}

fn unauthorized() -> Response<Body> {
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "unauthorized: send `Authorization: Bearer <token>` with a token for this endpoint\n",
    );
    response
        .headers_mut()
        .insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer realm=\"vfs\""));
    response
}

/// Completes on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
    tracing::info!("a shutdown signal arrived");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_grants_only_its_own_endpoint() {
        let mut tokens = Tokens::default();
        tokens.grant(None, "default-secret".to_owned());
        tokens.grant(Some("review".to_owned()), "review-secret".to_owned());
        assert!(tokens.allows(None, b"default-secret"));
        assert!(tokens.allows(Some("review"), b"review-secret"));
        assert!(!tokens.allows(Some("review"), b"default-secret"));
        assert!(!tokens.allows(None, b"review-secret"));
        assert!(!tokens.allows(Some("other"), b"review-secret"));
        assert!(!tokens.allows(None, b"default-secre"));
        assert!(!tokens.allows(None, b"default-secrets"));
        assert!(!tokens.allows(None, b""));
        assert_eq!(format!("{tokens:?}"), "Tokens { count: 2 }");
    }
}
