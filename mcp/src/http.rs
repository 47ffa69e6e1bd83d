//! The facade over MCP Streamable HTTP (`tickbox mcp --http ADDR`).
//!
//! rmcp's [`StreamableHttpService`] speaks the transport; this module puts
//! a small HTTP/1.1 server (hyper) in front of it and guards the door. The
//! walls, in the order a connection meets them:
//!
//! - a connection starts **unauthenticated**: at most
//!   [`MAX_UNAUTHENTICATED`] of them at once, and when a new one arrives
//!   past that, the oldest is closed (so a flood of half-sent request heads
//!   cannot keep out a client that sends its request at once); each must
//!   send a request carrying the token within [`AUTH_TIMEOUT`] of being
//!   accepted, and a request head is at most [`MAX_HEADER_BYTES`];
//! - every request must carry the token, as `Authorization: Bearer TOKEN`
//!   or as the query `?token=TOKEN` (for clients that cannot set headers,
//!   as Jupyter does); 401 otherwise, compared in constant time. There is
//!   always a token: the CLI generates one when none is given;
//! - a browser `Origin` must be a loopback one (403 otherwise), and the
//!   `Host` must name the bound address (rmcp's DNS-rebinding check);
//!   only [`MCP_PATH`] is served (404 elsewhere);
//! - the first authenticated request takes the connection's slot: at most
//!   [`MAX_CONNECTIONS_PER_PEER`] per peer address and [`MAX_CONNECTIONS`]
//!   in all (503 and the connection is closed past them). An authenticated
//!   connection idle for [`IDLE_TIMEOUT`] is closed (hyper's header-read
//!   timeout, which also runs while a keep-alive connection waits);
//! - at most [`MAX_SESSIONS`] MCP sessions (there is one token, so this is
//!   the cap per token); a session idle for
//!   [`HttpOptions::session_idle`] (default [`SESSION_IDLE_TIMEOUT`]) is
//!   closed, and at the cap a new session closes the least recently used
//!   one idle for at least [`SESSION_EVICT_IDLE`] (503 when none is);
//! - a request body is at most [`MAX_FRAME_BYTES`] (like a stdio line;
//!   a larger `Content-Length` is refused before reading), nests at most
//!   [`MAX_BODY_DEPTH`] deep and holds at most [`MAX_BODY_VALUES`] JSON
//!   values, counted by a scan of the bytes before rmcp builds anything
//!   from them (413 naming the bound): a parsed JSON value costs tens of
//!   bytes however short its text, so the value cap, not the byte size,
//!   is what bounds the memory a body costs;
//! - a session ended with `DELETE` is answered 204 (rmcp says 202).
//!
//! Each session is its own [`Connection`] (listing, subscriptions, read
//! marks); all of them share the hosted Ticks. Sessions that negotiate
//! 2026-07-28 are served without a session by rmcp, so each of their
//! requests is bound to the catalog current at that request.

use super::server::{Connection, Facade};
use super::transport::{Tracking, MAX_FRAME_BYTES};
use bytes::{Bytes, BytesMut};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickbox_host::util::lock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The one path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// Authenticated connections at once (default 64); an authenticated
/// request on a new connection past it gets 503 and the connection closes.
pub const MAX_CONNECTIONS: usize = 64;

/// Authenticated connections from one peer address at once (default 48,
/// three quarters of [`MAX_CONNECTIONS`]), so one peer cannot take every
/// slot. On loopback every local client is the same peer: the official
/// conformance suite alone held 26 at once (16 refused two of its
/// scenarios), so the bound leaves room for that.
pub const MAX_CONNECTIONS_PER_PEER: usize = 48;

/// Connections that have not yet sent a request with the token (default
/// 64). Slots are counted after authentication, so these cost no slot; a
/// new connection past this bound closes the oldest unauthenticated one.
/// An attacker then has to open this many connections in the time a real
/// client takes to send one request head to keep it out.
pub const MAX_UNAUTHENTICATED: usize = 64;

/// How long a new connection has to send a request carrying the token
/// (default 5 s); it is closed otherwise.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an authenticated connection may wait for, and then read, its
/// next request head (default 30 s); hyper's header-read timeout, which
/// also runs while a keep-alive connection is idle, so it is the idle
/// timeout too. Longer than common clients' own keep-alive expiry (4–5 s),
/// so a client never reuses a connection the server is closing.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest request head, in bytes (default 64 KiB): hyper's read buffer,
/// so also what one connection's unread head can cost.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// MCP sessions at once (default 32). The server has one token, so this is
/// the cap per token.
pub const MAX_SESSIONS: usize = 32;

/// A session with no request for this long is closed (default 5 minutes;
/// [`HttpOptions::session_idle`] overrides it).
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// At [`MAX_SESSIONS`], a new session closes the least recently used one
/// that has been idle at least this long (default 30 s, or the session
/// idle timeout when that is shorter); 503 when none has.
pub const SESSION_EVICT_IDLE: Duration = Duration::from_secs(30);

/// How long a request body may take to arrive, from its head (default
/// 30 s; [`HttpOptions::body_timeout`] overrides it): a token holder
/// trickling a body holds one connection slot, not one forever.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How deep a request body's arrays and objects may nest (default 64).
pub const MAX_BODY_DEPTH: usize = 64;

/// How many JSON values a request body may hold (default 16,384), counted
/// as its brackets, braces, commas and colons outside strings. A parsed
/// value costs tens of bytes (more while rmcp's untagged enums buffer it)
/// even when its text is 2 bytes, so this bounds what parsing a body costs
/// to a few times its size plus a few MiB: two accepted 4 MiB bodies at
/// this bound raised the host's peak by 4.0 times what was sent (5.2 times
/// at 65,536).
pub const MAX_BODY_VALUES: usize = 16_384;

/// How a facade is served over HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Every request must carry it, as `Authorization: Bearer TOKEN` or
    /// `?token=TOKEN`.
    pub token: String,
    /// A session idle this long is closed ([`SESSION_IDLE_TIMEOUT`] by default).
    pub session_idle: Duration,
    /// A request body must arrive within this ([`BODY_TIMEOUT`] by default).
    pub body_timeout: Duration,
}

impl HttpOptions {
    /// The defaults, with this token.
    pub fn new(token: impl Into<String>) -> HttpOptions {
        HttpOptions {
            token: token.into(),
            session_idle: SESSION_IDLE_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A refusal after which the connection is not reused (a body left
/// unread, or no slot for it).
fn closing(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = plain(status, text);
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Constant-time equality, so a wrong token's timing says nothing (also
/// the inspector's token check, `tickbox inspect`).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the request carries the token, in the `Authorization` header or
/// as the `token` query parameter.
fn authorized<B>(req: &Request<B>, token: &str) -> bool {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .is_some_and(|given| same(given, token.as_bytes()));
    let query = req.uri().query().is_some_and(|q| {
        q.split('&')
            .filter_map(|pair| pair.strip_prefix("token="))
            .any(|given| same(given.as_bytes(), token.as_bytes()))
    });
    header | query
}

/// Who holds the connection slots: [`MAX_UNAUTHENTICATED`] connections
/// waiting for their first request with the token (the oldest closed past
/// it), then [`MAX_CONNECTIONS`] authenticated ones, [`MAX_CONNECTIONS_PER_PEER`]
/// per peer address. Shared with `tickbox inspect`'s server, which has the
/// same door.
#[derive(Default)]
pub struct Gate {
    next_id: AtomicU64,
    /// Connections not yet authenticated, oldest first, each with the
    /// token that closes it.
    unauthenticated: Mutex<BTreeMap<u64, CancellationToken>>,
    admitted: Mutex<Admitted>,
}

#[derive(Default)]
struct Admitted {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

impl Gate {
    /// A new connection: its id and what closes it, closing the oldest
    /// unauthenticated connection when there are too many.
    pub fn arrive(&self) -> (u64, CancellationToken) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let close = CancellationToken::new();
        let mut waiting = lock(&self.unauthenticated);
        while waiting.len() >= MAX_UNAUTHENTICATED {
            match waiting.pop_first() {
                Some((_, oldest)) => oldest.cancel(),
                None => break,
            }
        }
        waiting.insert(id, close.clone());
        (id, close)
    }

    /// Connection `id` is authenticated or gone: no longer one of the
    /// unauthenticated ones.
    pub fn forget(&self, id: u64) {
        lock(&self.unauthenticated).remove(&id);
    }

    /// A slot for an authenticated connection from `peer`, or why not.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, String> {
        let mut a = lock(&self.admitted);
        if a.total >= MAX_CONNECTIONS {
            return Err(format!(
                "busy: {MAX_CONNECTIONS} authenticated HTTP connections are open (the limit)"
            ));
        }
        let mine = a.per_peer.entry(peer).or_default();
        if *mine >= MAX_CONNECTIONS_PER_PEER {
            return Err(format!(
                "busy: {MAX_CONNECTIONS_PER_PEER} HTTP connections from {peer} are open (the limit per peer)"
            ));
        }
        *mine += 1;
        a.total += 1;
        Ok(Slot {
            gate: self.clone(),
            peer,
        })
    }
}

/// An authenticated connection's slot, given back when the connection ends.
pub struct Slot {
    gate: Arc<Gate>,
    peer: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut a = lock(&self.gate.admitted);
        a.total -= 1;
        if let Some(n) = a.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                a.per_peer.remove(&self.peer);
            }
        }
    }
}

/// One TCP connection, as [`accept`] hands it to a handler.
pub struct Conn {
    id: u64,
    peer: SocketAddr,
    gate: Arc<Gate>,
    slot: Mutex<Option<Slot>>,
}

impl Conn {
    /// Whether a request on it carried the token and it holds a slot.
    pub fn admitted(&self) -> bool {
        lock(&self.slot).is_some()
    }

    /// Who is on the other end.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Takes a slot for this connection, once a request on it carried the
    /// token (a no-op when it has one); why not when the bounds are full.
    pub fn admit(&self) -> Result<(), String> {
        let mut slot = lock(&self.slot);
        if slot.is_none() {
            *slot = Some(self.gate.admit(self.peer.ip())?);
            self.gate.forget(self.id);
        }
        Ok(())
    }
}

/// What every request handler shares.
struct Shared {
    service: StreamableHttpService<Connection, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    token: Box<str>,
    /// When each session this server created last had a request.
    last_used: Mutex<HashMap<Arc<str>, Instant>>,
    evict_idle: Duration,
    body_timeout: Duration,
}

/// Serves the facade on `listener` until `stop` resolves; the Ticks keep
/// running (the caller shuts the facade down).
pub async fn serve(
    facade: Facade,
    listener: TcpListener,
    options: HttpOptions,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    let ct = CancellationToken::new();
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !local.ip().is_unspecified() {
        hosts.push(local.ip().to_string());
    }
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins([
            "http://localhost:*",
            "http://127.0.0.1:*",
            "http://[::1]:*",
            "https://localhost:*",
            "https://127.0.0.1:*",
        ])
        .with_max_request_body_bytes(MAX_FRAME_BYTES)
        .with_cancellation_token(ct.clone());
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(options.session_idle);
    let sessions = Arc::new(manager);
    let factory = facade.clone();
    let service = StreamableHttpService::new(
        move || Ok(Connection::new(factory.clone(), Tracking::shared())),
        sessions.clone(),
        config,
    );
    let gate = Arc::new(Gate::default());
    let shared = Arc::new(Shared {
        service,
        sessions,
        token: options.token.into_boxed_str(),
        last_used: Mutex::new(HashMap::new()),
        evict_idle: SESSION_EVICT_IDLE.min(options.session_idle),
        body_timeout: options.body_timeout,
    });
    let handle = move |req: Request<Incoming>, conn: Arc<Conn>| {
        let shared = shared.clone();
        async move { shared.handle(req, &conn).await }
    };
    accept(listener, gate, ct.clone(), stop, handle).await;
    ct.cancel();
    Ok(())
}

/// A response body: whole, or a stream (the inspector's event stream).
pub type Body = BoxBody<Bytes, Infallible>;

/// Accepts connections on `listener` until `stop` resolves (or `ct` is
/// cancelled, which also closes every open connection), each served by
/// `handle` behind the door [`Gate`] keeps: a connection that has not been
/// admitted (`handle` calls [`Conn::admit`] once a request carries the
/// token) within [`AUTH_TIMEOUT`] is closed, and so is the oldest
/// unauthenticated one past [`MAX_UNAUTHENTICATED`]; request heads are at
/// most [`MAX_HEADER_BYTES`] and must arrive within [`IDLE_TIMEOUT`].
/// `tickbox mcp --http` and `tickbox inspect` both serve through it.
pub async fn accept<F, Fut>(
    listener: TcpListener,
    gate: Arc<Gate>,
    ct: CancellationToken,
    stop: impl Future<Output = ()>,
    handle: F,
) where
    F: Fn(Request<Incoming>, Arc<Conn>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Body>> + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES);
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    // Out of descriptors, say: give the others a moment.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
            _ = ct.cancelled() => break,
        };
        let (id, evicted) = gate.arrive();
        let conn = Arc::new(Conn {
            id,
            peer,
            gate: gate.clone(),
            slot: Mutex::new(None),
        });
        let service = {
            let (handle, conn) = (handle.clone(), conn.clone());
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let answer = handle(req, conn.clone());
                async move { Ok::<_, Infallible>(answer.await) }
            })
        };
        let (ct, gate, builder) = (ct.clone(), gate.clone(), builder.clone());
        tokio::spawn(async move {
            let serving = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(serving);
            let deadline = tokio::time::sleep(AUTH_TIMEOUT);
            tokio::pin!(deadline);
            let mut waiting_for_auth = true;
            loop {
                tokio::select! {
                    r = serving.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(%peer, "HTTP connection ended: {e}");
                        }
                        break;
                    }
                    _ = evicted.cancelled() => {
                        tracing::debug!(%peer, "closed: the oldest of {MAX_UNAUTHENTICATED} unauthenticated connections");
                        break;
                    }
                    _ = &mut deadline, if waiting_for_auth => {
                        if !conn.admitted() {
                            tracing::debug!(%peer, "closed: no request with the token within {AUTH_TIMEOUT:?}");
                            break;
                        }
                        waiting_for_auth = false;
                    }
                    _ = ct.cancelled() => break,
                }
            }
            gate.forget(id);
        });
    }
}

/// Why a request body is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// Over the byte bound given to [`read_body`].
    #[error("request body too large: over {0} bytes (the limit)")]
    TooLarge(usize),
    /// Nested deeper than [`MAX_BODY_DEPTH`].
    #[error(
        "request body too deep: arrays and objects nest over {MAX_BODY_DEPTH} levels (the limit)"
    )]
    TooDeep,
    /// More than [`MAX_BODY_VALUES`] JSON values.
    #[error("request body too large: over {MAX_BODY_VALUES} JSON values (the limit)")]
    TooManyValues,
    /// The connection failed while the body was read.
    #[error("cannot read the request body: {0}")]
    Read(String),
    /// Not all there within the time given to [`read_body`].
    #[error("request body too slow: not all there {0:?} after its head (the limit)")]
    Slow(Duration),
}

/// A scan of JSON text that counts values and nesting without building
/// anything, fed chunk by chunk as the body arrives.
#[derive(Default)]
struct Shape {
    depth: usize,
    values: usize,
    in_string: bool,
    escaped: bool,
}

impl Shape {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), BodyError> {
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    if self.depth > MAX_BODY_DEPTH {
                        return Err(BodyError::TooDeep);
                    }
                    self.count()?;
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                b',' | b':' => self.count()?,
                _ => {}
            }
        }
        Ok(())
    }

    fn count(&mut self) -> Result<(), BodyError> {
        self.values += 1;
        if self.values > MAX_BODY_VALUES {
            return Err(BodyError::TooManyValues);
        }
        Ok(())
    }
}

/// The whole body, within `max` bytes ([`MAX_FRAME_BYTES`] for MCP),
/// [`MAX_BODY_DEPTH`] and [`MAX_BODY_VALUES`] and `within` of its head;
/// refused as soon as a bound is passed.
pub async fn read_body(
    headers: &hyper::HeaderMap,
    mut body: Incoming,
    within: Duration,
    max: usize,
) -> Result<Bytes, BodyError> {
    let deadline = tokio::time::Instant::now() + within;
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge(max));
    }
    let mut collected = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
    let mut shape = Shape::default();
    loop {
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            return Err(BodyError::Slow(within));
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.len() > max - collected.len() {
            return Err(BodyError::TooLarge(max));
        }
        if let Err(e) = shape.feed(&data) {
            let _ =
                tokio::time::timeout_at(deadline, drain(body, collected.len() + data.len(), max))
                    .await;
            return Err(e);
        }
        collected.extend_from_slice(&data);
    }
    Ok(collected.freeze())
}

/// Reads and drops the rest of a refused body, up to `max` bytes in all:
/// closing a socket with unread data resets it, and the client could lose
/// the answer that says why.
async fn drain(mut body: Incoming, mut seen: usize, max: usize) {
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > max {
                return;
            }
        }
    }
}

/// The `method` of a JSON-RPC message, read without building the rest.
fn method_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Method {
        method: Option<String>,
    }
    serde_json::from_slice::<Method>(body).ok()?.method
}

const SESSION_HEADER: &str = "mcp-session-id";

impl Shared {
    async fn handle(&self, req: Request<Incoming>, conn: &Conn) -> Response<Body> {
        if !authorized(&req, &self.token) {
            tracing::info!(peer = %conn.peer, "refused a request without the token");
            let mut r = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send Authorization: Bearer TOKEN (tickbox printed it at start)",
            );
            r.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            return r;
        }
        if let Err(why) = conn.admit() {
            tracing::warn!(peer = %conn.peer, "{why}");
            return closing(StatusCode::SERVICE_UNAVAILABLE, &why);
        }
        if req.uri().path() != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "not found: MCP is served on /mcp");
        }
        let (mut parts, body) = req.into_parts();
        // The token goes no further than this check (rmcp's logs included).
        if parts.uri.query().is_some() {
            let mut uri = std::mem::take(&mut parts.uri).into_parts();
            uri.path_and_query = Some(hyper::http::uri::PathAndQuery::from_static(MCP_PATH));
            parts.uri = hyper::Uri::from_parts(uri).unwrap_or_default();
        }
        let body = match read_body(&parts.headers, body, self.body_timeout, MAX_FRAME_BYTES).await {
            Ok(b) => b,
            Err(e) => {
                tracing::info!(peer = %conn.peer, "{e}");
                let status = match e {
                    BodyError::Slow(_) => StatusCode::REQUEST_TIMEOUT,
                    _ => StatusCode::PAYLOAD_TOO_LARGE,
                };
                return closing(status, &e.to_string());
            }
        };
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(Arc::<str>::from);
        if let Some(id) = &session {
            if let Some(t) = lock(&self.last_used).get_mut(id) {
                *t = Instant::now();
            }
        }
        let opens_session = session.is_none()
            && parts.method == hyper::Method::POST
            && method_of(&body).as_deref() == Some("initialize");
        if opens_session && !self.room_for_a_session().await {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "busy: {MAX_SESSIONS} MCP sessions are open (the limit) and none has been idle for {:?}",
                    self.evict_idle
                ),
            );
        }
        let delete = parts.method == hyper::Method::DELETE;
        let mut response = self
            .service
            .handle(Request::from_parts(parts, Full::new(body)))
            .await;
        if opens_session {
            if let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                self.last_used
                    .lock()
                    .unwrap()
                    .insert(Arc::from(id), Instant::now());
            }
        }
        // rmcp ends a session with 202; clients (the Python SDK) take 200/204
        // as success and log a "termination failed" for anything else.
        if delete && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
        }
        response
    }

    /// Whether a new session may open: under [`MAX_SESSIONS`], or after
    /// closing the least recently used session idle for `evict_idle`.
    async fn room_for_a_session(&self) -> bool {
        let open: Vec<Arc<str>> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect();
        let victim = {
            let mut used = lock(&self.last_used);
            // Forget sessions that ended (idle expiry, DELETE).
            used.retain(|id, _| open.contains(id));
            if open.len() < MAX_SESSIONS {
                return true;
            }
            used.iter()
                .filter(|(_, t)| t.elapsed() >= self.evict_idle)
                .min_by_key(|(_, t)| **t)
                .map(|(id, _)| id.clone())
        };
        let Some(id) = victim else {
            return false;
        };
        tracing::info!("closing the least recently used MCP session to make room for a new one");
        lock(&self.last_used).remove(&id);
        let _ = self.sessions.close_session(&id).await;
        true
    }
}
