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
//! - a browser `Origin` must be a loopback page's (403 otherwise), and
//!   the `Host` must name a loopback name or the bound address, at any
//!   port (the door's `Loopback` rule, against DNS rebinding);
//!   only [`MCP_PATH`] is served (404 elsewhere; the two probes below are
//!   answered before the token is checked);
//! - the first authenticated request takes the connection's slot: at most
//!   [`MAX_CONNECTIONS_PER_PEER`] per peer address and [`MAX_CONNECTIONS`]
//!   in all (503 and the connection is closed past them). An authenticated
//!   connection idle for [`IDLE_TIMEOUT`] is closed (hyper's header-read
//!   timeout, which also runs while a keep-alive connection waits);
//! - at most [`MAX_SESSIONS`] MCP sessions, and
//!   [`MAX_SESSIONS_PER_CLIENT`] of one named client; a session idle for
//!   [`HttpOptions::session_idle`] (default [`SESSION_IDLE_TIMEOUT`]) is
//!   closed, and at a cap a new session closes the least recently used
//!   one idle for at least [`SESSION_EVICT_IDLE`] (503 when none is): at
//!   a client's own cap one of its own, at the overall cap one of the
//!   client holding the most, so no client makes room at another's cost;
//! - a request body is at most [`MAX_FRAME_BYTES`] (like a stdio line;
//!   a larger `Content-Length` is refused before reading), nests at most
//!   [`MAX_BODY_DEPTH`] deep and holds at most [`MAX_BODY_VALUES`] JSON
//!   values, counted by a scan of the bytes before rmcp builds anything
//!   from them (413 naming the bound): a parsed JSON value costs tens of
//!   bytes however short its text, so the value cap, not the byte size,
//!   is what bounds the memory a body costs;
//! - a session answers only to the token that opened it: a request
//!   carrying another valid token (a named client's, or the server's for
//!   a named client's session) gets 404, as an unknown session would;
//! - a session ended with `DELETE` is answered 204 (rmcp says 202).
//!
//! Two probes for load balancers and orchestrators are answered before
//! the token is checked, with one line and no slot taken (a prober's
//! connection is an unauthenticated one, bounded like any other):
//! `GET` [`HEALTH_PATH`] is 200 while the process serves, and `GET`
//! [`READY_PATH`] is 200 while it can take a new session: every hosted
//! Tick still runs (the facade never restarts one), a new session
//! would get in under [`MAX_SESSIONS`], and its first use of a per-client
//! Tick would get an instance under the caps (`max_instances`); 503
//! naming which is not so otherwise. Neither names a Tick or a tool.
//!
//! The first four walls and the body's are the door every HTTP server of
//! tickbox shares (the `tickbox-guard` crate: accepting, the token check,
//! slots, timeouts, bounded bodies), each
//! server with its own counts and bounds: [`metrics`] serves `/metrics`
//! through its own (`HttpOptions::metrics`, `tickbox mcp --metrics`), so a
//! flood at one takes no slot at the other.
//!
//! **Draining.** When the `stop` future given to [`serve`] resolves (the
//! CLI resolves it on SIGTERM or SIGINT), the server drains instead of
//! closing: `/readyz` answers 503 `not ready: draining` at once (so a load
//! balancer sends no new session here), a new session and every new
//! request of an open session are refused with 503 and a one-line reason,
//! and the requests already in flight (a `tools/call` still running
//! included) finish and are answered. Notifications (a client cancelling
//! its call) and `DELETE` of a session are still taken. As soon as no
//! request is in flight, or when [`HttpOptions::drain_timeout`] (default
//! [`DRAIN_TIMEOUT`]) has passed, the listener closes and [`serve`] returns
//! [`Drained`], saying whether anything was cut off. New requests are
//! refused rather than served because the host is about to exit: a request
//! taken in the drain would either hold the exit to the bound or be cut
//! off by it, and a clear 503 tells the client to start a session
//! elsewhere now.
//!
//! Each session is its own [`Connection`] (listing, subscriptions, read
//! marks); all of them share the hosted Ticks, except those that run an
//! instance per client ([`crate::instance`]): there each session has its
//! own, stopped when the session ends (before a `DELETE` is answered).
//! A request may also carry a named client's token ([`HttpOptions::clients`])
//! instead of the server's: it is then that client's, which is how a
//! 2026-07-28 request, without a session, gets an instance of its own. Sessions that negotiate
//! 2026-07-28 are served without a session by rmcp, so each of their
//! requests is bound to the catalog current at that request.

pub mod metrics;

use super::instance::ClientName;
use super::server::{Connection, Facade};
use super::transport::{Tracking, MAX_FRAME_BYTES, SESSION_HEADER};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickbox_guard::body::{read_body, BodyError};
use tickbox_guard::door::{self, closing, plain, Body};
use tickbox_guard::origin::{self, Loopback};
use tickbox_host::util::lock;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The door's bounds this server is held to: the guard's defaults, the
/// same as every server behind the door that has none of its own.
pub use tickbox_guard::limits::{
    AUTH_TIMEOUT, BODY_TIMEOUT, IDLE_TIMEOUT, MAX_BODY_DEPTH, MAX_BODY_VALUES, MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_PEER, MAX_HEADER_BYTES, MAX_UNAUTHENTICATED,
};

/// The one path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// The liveness probe: 200 while the process serves (no token needed).
pub const HEALTH_PATH: &str = "/healthz";

/// The readiness probe: 200 while a new session can be taken, else 503
/// (no token needed).
pub const READY_PATH: &str = "/readyz";

/// MCP sessions at once (default 32), named clients' and the server
/// token's together.
pub const MAX_SESSIONS: usize = 32;

/// MCP sessions one named client may hold at once: half of
/// [`MAX_SESSIONS`], so no client can hold every session and keep the
/// others out. The server's own token (no named client) may hold them all.
pub const MAX_SESSIONS_PER_CLIENT: usize = MAX_SESSIONS / 2;

/// A session with no request for this long is closed (default 5 minutes;
/// [`HttpOptions::session_idle`] overrides it).
pub const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// At [`MAX_SESSIONS`], a new session closes the least recently used one
/// that has been idle at least this long (default 30 s, or the session
/// idle timeout when that is shorter); 503 when none has.
pub const SESSION_EVICT_IDLE: Duration = Duration::from_secs(30);

/// How long a drain waits for the requests in flight (default 30 s;
/// [`HttpOptions::drain_timeout`] overrides it). Past it the listener
/// closes and what is still running is cut off. Longer than most tool
/// calls, shorter than the 90 s a service manager (systemd's
/// `TimeoutStopSec`) gives a stop by default, so the host exits on its own
/// before it is killed.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How a facade is served over HTTP.
#[derive(Debug)]
pub struct HttpOptions {
    /// Every request must carry it, as `Authorization: Bearer TOKEN` or
    /// `?token=TOKEN`.
    pub token: String,
    /// A session idle this long is closed ([`SESSION_IDLE_TIMEOUT`] by default).
    pub session_idle: Duration,
    /// A request body must arrive within this ([`BODY_TIMEOUT`] by default).
    pub body_timeout: Duration,
    /// Also serve `/metrics` on a listener of its own ([`metrics`]).
    pub metrics: Option<metrics::MetricsEndpoint>,
    /// How long a drain waits for the requests in flight
    /// ([`DRAIN_TIMEOUT`] by default).
    pub drain_timeout: Duration,
    /// Named clients, each with a token of its own, accepted as well as
    /// `token`: a request carrying one is that client's (see
    /// [`crate::instance`]).
    pub clients: Vec<NamedClient>,
}

/// A client named by its own bearer token (a clients file's line).
#[derive(Debug, Clone)]
pub struct NamedClient {
    /// Its name, as audit lines and spans give it.
    pub name: String,
    /// The token its requests carry.
    pub token: String,
}

impl NamedClient {
    /// The rule on a server's clients: each token tells its client apart,
    /// from every other client and from the server's own token (`server`),
    /// or the host could not say who called; and none is the metrics
    /// scraper's (`metrics`), or reading metrics would let one call tools.
    /// Err names the clients.
    pub fn check_distinct(
        clients: &[NamedClient],
        server: Option<&str>,
        metrics: Option<&str>,
    ) -> Result<(), String> {
        for (i, c) in clients.iter().enumerate() {
            if let Some(other) = clients[..i].iter().find(|o| o.token == c.token) {
                return Err(format!(
                    "clients `{}` and `{}` have the same token: give each client its own, so the host can tell them apart",
                    other.name, c.name
                ));
            }
            if server == Some(c.token.as_str()) {
                return Err(format!(
                    "client `{}` has the server's token (--token-file): give it one of its own",
                    c.name
                ));
            }
            if metrics == Some(c.token.as_str()) {
                return Err(format!(
                    "client `{}` has the metrics scraper's token (--metrics-token-file): give it one of its own",
                    c.name
                ));
            }
        }
        Ok(())
    }
}

/// How a drain ended (what [`serve`] returns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every request in flight when the drain began was answered.
    Finished,
    /// The drain timeout passed with this many requests still in flight;
    /// they were cut off.
    TimedOut {
        /// Requests still in flight at the bound.
        in_flight: usize,
    },
}

impl HttpOptions {
    /// The defaults, with this token.
    pub fn new(token: impl Into<String>) -> HttpOptions {
        HttpOptions {
            token: token.into(),
            session_idle: SESSION_IDLE_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            metrics: None,
            drain_timeout: DRAIN_TIMEOUT,
            clients: Vec::new(),
        }
    }
}

/// What every request handler shares.
struct Shared {
    facade: Facade,
    service: StreamableHttpService<Connection, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
    token: Box<str>,
    /// The named clients' names and tokens.
    clients: Vec<(Arc<str>, Box<str>)>,
    gate: Arc<door::Gate>,
    /// The `Host` and `Origin` a request may carry.
    loopback: Loopback,
    /// When each session this server created last had a request.
    last_used: Mutex<HashMap<Arc<str>, Instant>>,
    /// Who opened each session: the named client whose token opened it,
    /// or none for the server's token. A session answers only to the
    /// token that opened it.
    opened_by: Mutex<HashMap<Arc<str>, Option<Arc<str>>>>,
    /// Held by a request that opens a session from its room check until
    /// the session is counted as its opener's: checks made at once would
    /// all see the same count and let every one of them past the caps.
    opening: tokio::sync::Mutex<()>,
    /// The ids of the requests being served, per session ([`IdInUse`]).
    ids_in_use: IdsInUse,
    evict_idle: Duration,
    body_timeout: Duration,
    /// Set once when the drain begins; never cleared.
    draining: AtomicBool,
    /// POST requests being handled or answered, counted from their head to
    /// the end of their response body (a `tools/call`'s answer comes on an
    /// SSE body that ends once the result is sent).
    in_flight: Arc<watch::Sender<usize>>,
}

/// One POST in flight, counted in [`Shared::in_flight`] until dropped (with
/// the response body it rides on, or with the handler when it returns early).
struct InFlight(Arc<watch::Sender<usize>>);

impl InFlight {
    fn new(count: &Arc<watch::Sender<usize>>) -> InFlight {
        count.send_modify(|n| *n += 1);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The request ids being served, each with its session.
type IdsInUse = Arc<Mutex<HashSet<(Arc<str>, String)>>>;

/// A request id of a session, taken while its request is served (see
/// [`IdInUse::take`]).
struct IdInUse {
    ids: IdsInUse,
    key: (Arc<str>, String),
}

impl IdInUse {
    /// Takes `id` for `session` until the guard is dropped; None when a
    /// request of that session still holds it. rmcp routes an answer by
    /// the id alone: a second request with the id of one in flight would
    /// take over the first one's route, and the first would never be
    /// answered nor its route freed. The stdio transport refuses the same.
    fn take(ids: &IdsInUse, session: &Arc<str>, id: String) -> Option<IdInUse> {
        let key = (session.clone(), id);
        lock(ids).insert(key.clone()).then(|| IdInUse {
            ids: ids.clone(),
            key,
        })
    }
}

impl Drop for IdInUse {
    fn drop(&mut self) {
        lock(&self.ids).remove(&self.key);
    }
}

/// A response body that keeps its request counted in flight, and its id
/// taken, until hyper has taken its last frame and drops it.
struct Counted {
    body: Body,
    _in_flight: Option<InFlight>,
    _id: Option<IdInUse>,
}

impl hyper::body::Body for Counted {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves the facade on `listener` until `stop` resolves, then drains
/// (see the module doc) and returns how the drain ended; the Ticks keep
/// running (the caller shuts the facade down).
pub async fn serve(
    facade: Facade,
    listener: TcpListener,
    options: HttpOptions,
    stop: impl Future<Output = ()>,
) -> std::io::Result<Drained> {
    let local = listener.local_addr()?;
    let ct = CancellationToken::new();
    // `Host` and `Origin` are the door's to check (`Loopback`, in
    // `Shared::handle`), once, for every request: rmcp's own check of
    // them is off.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(MAX_FRAME_BYTES)
        .with_cancellation_token(ct.clone());
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = Some(options.session_idle);
    let sessions = Arc::new(manager);
    let factory = facade.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(Connection::new(
                factory.clone(),
                Tracking::shared(),
                tickbox_telemetry::audit::McpTransport::Http,
            ))
        },
        sessions.clone(),
        config,
    );
    let gate = Arc::new(door::Gate::new("HTTP", tickbox_guard::door::DEFAULT_BOUNDS));
    let shared = Arc::new(Shared {
        facade: facade.clone(),
        service,
        sessions: sessions.clone(),
        token: options.token.into_boxed_str(),
        clients: options
            .clients
            .into_iter()
            .map(|c| (Arc::from(c.name), c.token.into_boxed_str()))
            .collect(),
        gate: gate.clone(),
        loopback: Loopback::of(local),
        last_used: Mutex::new(HashMap::new()),
        opened_by: Mutex::new(HashMap::new()),
        opening: tokio::sync::Mutex::new(()),
        ids_in_use: Default::default(),
        evict_idle: SESSION_EVICT_IDLE.min(options.session_idle),
        body_timeout: options.body_timeout,
        draining: AtomicBool::new(false),
        in_flight: Arc::new(watch::channel(0).0),
    });
    if let Some(endpoint) = options.metrics {
        tokio::spawn(metrics::serve(endpoint, sessions, ct.clone()));
    }
    let drained = {
        let shared = shared.clone();
        let bound = options.drain_timeout;
        async move {
            stop.await;
            shared.draining.store(true, Ordering::SeqCst);
            let mut in_flight = shared.in_flight.subscribe();
            tracing::info!(
                in_flight = *in_flight.borrow(),
                "draining: no new sessions or requests; waiting up to {bound:?} for those in flight"
            );
            // The listener stays open meanwhile: a prober sees 503 and a
            // late client a clear refusal rather than a refused connection.
            let _ = tokio::time::timeout(bound, in_flight.wait_for(|n| *n == 0)).await;
        }
    };
    let handle = {
        let shared = shared.clone();
        move |req: Request<Incoming>, conn: Arc<door::Conn>| {
            let shared = shared.clone();
            async move { shared.handle(req, &conn).await }
        }
    };
    door::accept(listener, gate, handle, ct.clone(), drained).await;
    let left = *shared.in_flight.borrow();
    ct.cancel();
    Ok(if left == 0 {
        Drained::Finished
    } else {
        Drained::TimedOut { in_flight: left }
    })
}

/// The 2026-07-28 method that opens a stream of change notifications.
const LISTEN_METHOD: &str = "subscriptions/listen";

/// The `method` of a JSON-RPC message, read without building the rest.
fn method_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Method {
        method: Option<String>,
    }
    serde_json::from_slice::<Method>(body).ok()?.method
}

/// The id of a body that is one JSON-RPC request (a `method` and an
/// `id`), as its JSON text (`1` and `"1"` are two ids).
fn request_id_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Shape {
        method: Option<serde::de::IgnoredAny>,
        id: Option<serde_json::Value>,
    }
    let shape = serde_json::from_slice::<Shape>(body).ok()?;
    shape.method?;
    Some(shape.id?.to_string())
}

/// Whether a body asks for new work: a JSON-RPC request (a `method` and an
/// `id`), or anything not read as one message (a batch, a malformed body).
/// A notification (`notifications/cancelled` for a call in flight) or a
/// response to the server's own request does not.
fn asks_for_work(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Shape {
        method: Option<serde::de::IgnoredAny>,
        id: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Shape>(body) {
        Ok(m) => m.method.is_some() && m.id.is_some(),
        Err(_) => true,
    }
}

/// The refusal of a new session while draining.
const DRAINING_NEW_SESSION: &str =
    "draining: this host is shutting down and takes no new MCP sessions; start one on another host";

/// The refusal of a new request of an open session while draining.
const DRAINING_NEW_REQUEST: &str =
    "draining: this host is shutting down and takes no new requests; \
     the calls in flight finish, then the session ends: start a new one on another host";

impl Shared {
    async fn handle(&self, req: Request<Incoming>, conn: &door::Conn) -> Response<Body> {
        if let Some(answer) = self.probe(&req).await {
            return answer;
        }
        let within = door::TokenIn::HeaderOrQuery;
        // The server's token, or a named client's (which names the client).
        let client = if door::authorized(&req, &self.token, within) {
            Some(None)
        } else {
            self.clients
                .iter()
                .find(|(_, token)| door::authorized(&req, token, within))
                .map(|(name, _)| Some(ClientName(name.clone())))
        };
        let Some(client) = client else {
            tracing::info!(peer = %conn.peer(), "refused a request without the token");
            return door::unauthorized(
                "unauthorized: send Authorization: Bearer TOKEN (tickbox printed it at start)",
            );
        };
        if let Err(refused) = self.gate.admit(conn) {
            return *refused;
        }
        if req.uri().path() != MCP_PATH {
            return plain(StatusCode::NOT_FOUND, "not found: MCP is served on /mcp");
        }
        let draining = self.draining.load(Ordering::SeqCst);
        // A GET opens a server-to-client stream that would never end on
        // its own: nothing to finish, so nothing to start while draining.
        if draining && req.method() == hyper::Method::GET {
            return closing(StatusCode::SERVICE_UNAVAILABLE, DRAINING_NEW_REQUEST);
        }
        // Counted before its body is read, so a drain that begins while it
        // arrives still waits for it.
        let in_flight =
            (req.method() == hyper::Method::POST).then(|| InFlight::new(&self.in_flight));
        let (mut parts, body) = req.into_parts();
        let client_name = client.as_ref().map(|c| c.0.clone());
        if let Some(client) = client {
            parts.extensions.insert(client);
        }
        // The token goes no further than this check (rmcp's logs included).
        if parts.uri.query().is_some() {
            let mut uri = std::mem::take(&mut parts.uri).into_parts();
            uri.path_and_query = Some(hyper::http::uri::PathAndQuery::from_static(MCP_PATH));
            parts.uri = hyper::Uri::from_parts(uri).unwrap_or_default();
        }
        let body = match read_body(&parts.headers, body, self.body_timeout, MAX_FRAME_BYTES).await {
            Ok(b) => b,
            Err(e) => {
                tracing::info!(peer = %conn.peer(), "{e}");
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
            // Another client's session is, to this one, no session at all.
            let opener = lock(&self.opened_by).get(id).cloned();
            if opener.is_some_and(|by| by != client_name) {
                tracing::info!(peer = %conn.peer(), "refused a request for a session another token opened");
                return plain(
                    StatusCode::NOT_FOUND,
                    "session not found: no session of yours has this Mcp-Session-Id",
                );
            }
            if let Some(t) = lock(&self.last_used).get_mut(id) {
                *t = Instant::now();
            }
        }
        let method = method_of(&body);
        let opens_session = session.is_none()
            && parts.method == hyper::Method::POST
            && method.as_deref() == Some("initialize");
        // A 2026-07-28 `subscriptions/listen` is a stream that ends only
        // when its client cancels it, as a GET's does: nothing a drain
        // could wait to finish, so it is not counted.
        let in_flight = in_flight.filter(|_| method.as_deref() != Some(LISTEN_METHOD));
        let id_in_use = match (&session, request_id_of(&body)) {
            (Some(session), Some(id)) if parts.method == hyper::Method::POST => {
                match IdInUse::take(&self.ids_in_use, session, id) {
                    Some(taken) => Some(taken),
                    None => {
                        tracing::info!(peer = %conn.peer(), "refused a request whose id is in use");
                        return plain(
                            StatusCode::BAD_REQUEST,
                            "invalid request: a request of this session with the same id is still being served",
                        );
                    }
                }
            }
            _ => None,
        };
        // A request that was in flight when the drain began is served
        // (checked as it began); one that begins after is refused.
        if draining && parts.method == hyper::Method::POST && asks_for_work(&body) {
            let why = if session.is_none() {
                DRAINING_NEW_SESSION
            } else {
                DRAINING_NEW_REQUEST
            };
            tracing::info!(peer = %conn.peer(), "refused a request: draining");
            return closing(StatusCode::SERVICE_UNAVAILABLE, why);
        }
        let opening = match opens_session {
            true => Some(self.opening.lock().await),
            false => None,
        };
        if opens_session {
            if let Err(busy) = self.room_for_a_session(&client_name).await {
                return plain(StatusCode::SERVICE_UNAVAILABLE, &busy);
            }
        }
        if let Some(refused) = self.foreign(&parts.headers, conn) {
            return refused;
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
                let id = Arc::<str>::from(id);
                lock(&self.opened_by).insert(id.clone(), client_name);
                lock(&self.last_used).insert(id, Instant::now());
            }
        }
        drop(opening);
        // rmcp ends a session with 202; clients (the Python SDK) take 200/204
        // as success and log a "termination failed" for anything else.
        if delete && response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            // The client has ended: its instances are stopped before it
            // hears so, and their places are free for the next client.
            if let Some(id) = &session {
                self.facade.end_http_session(id).await;
                lock(&self.opened_by).remove(id);
            }
        }
        if in_flight.is_none() && id_in_use.is_none() {
            return response;
        }
        response.map(|body| {
            Counted {
                body,
                _in_flight: in_flight,
                _id: id_in_use,
            }
            .boxed()
        })
    }

    /// The refusal of a request whose `Host` does not name this server or
    /// whose `Origin` is not a loopback page (DNS rebinding, a page from
    /// elsewhere), or None.
    fn foreign(&self, headers: &hyper::HeaderMap, conn: &door::Conn) -> Option<Response<Body>> {
        let header =
            |name: hyper::header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("?"));
        let host = header(hyper::header::HOST).unwrap_or_default();
        if !self.loopback.allows_host(host) {
            tracing::info!(peer = %conn.peer(), "refused a request for another host");
            return Some(origin::wrong_host());
        }
        if !Loopback::allows_origin(header(hyper::header::ORIGIN)) {
            tracing::info!(peer = %conn.peer(), "refused a request from another origin");
            return Some(origin::wrong_origin());
        }
        None
    }

    /// The answer to a liveness or readiness probe (`GET`/`HEAD` of
    /// [`HEALTH_PATH`] or [`READY_PATH`]), or None for any other request.
    /// One line of the host's own words: no Tick text, nothing a token
    /// would protect.
    async fn probe<B>(&self, req: &Request<B>) -> Option<Response<Body>> {
        if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
            return None;
        }
        match req.uri().path() {
            HEALTH_PATH => Some(plain(StatusCode::OK, "alive")),
            READY_PATH if self.draining.load(Ordering::SeqCst) => Some(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "not ready: draining",
            )),
            READY_PATH => Some(match self.not_ready().await {
                None => plain(StatusCode::OK, "ready"),
                Some(why) => plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("not ready: {why}"),
                ),
            }),
            _ => None,
        }
    }

    /// Why a new session could not be served now, if it could not: a
    /// hosted Tick has ended, or the sessions are at their cap with none
    /// idle long enough to give way. Reads only; closes nothing.
    async fn not_ready(&self) -> Option<String> {
        let ended = self.facade.ended_ticks();
        if ended > 0 {
            return Some(format!(
                "{ended} of the hosted Ticks ended; tickbox does not restart them"
            ));
        }
        // A new session would be refused its own instance at its first use.
        if let Some(why) = self.facade.instances_full() {
            return Some(why);
        }
        let open = self.open_sessions().await;
        if open.len() < MAX_SESSIONS {
            return None;
        }
        let used = lock(&self.last_used);
        let evictable = open
            .iter()
            .any(|id| used.get(id).is_some_and(|t| t.elapsed() >= self.evict_idle));
        (!evictable).then(|| {
            format!(
                "{MAX_SESSIONS} MCP sessions are open (the limit) and none has been idle for {:?}",
                self.evict_idle
            )
        })
    }

    /// The ids of the sessions open now.
    async fn open_sessions(&self) -> Vec<Arc<str>> {
        self.sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect()
    }

    /// Whether `opener` (a named client, or `None` for the server's own
    /// token) may open a new session: under its own cap
    /// ([`MAX_SESSIONS_PER_CLIENT`], a named client's) and under
    /// [`MAX_SESSIONS`], or after closing a session idle for `evict_idle`:
    /// at its own cap one of its own, at the overall cap one of whoever
    /// holds the most, so no client's sessions make room for another's
    /// while it holds less. Err says which cap, for the 503.
    async fn room_for_a_session(&self, opener: &Option<Arc<str>>) -> Result<(), String> {
        let open = self.open_sessions().await;
        let (victim, busy) = {
            let mut used = lock(&self.last_used);
            let mut opened_by = lock(&self.opened_by);
            // Forget sessions that ended (idle expiry, DELETE).
            used.retain(|id, _| open.contains(id));
            opened_by.retain(|id, _| open.contains(id));
            let by = |id: &Arc<str>| opened_by.get(id).cloned().flatten();
            let mut held: HashMap<Option<Arc<str>>, usize> = HashMap::new();
            for id in &open {
                *held.entry(by(id)).or_default() += 1;
            }
            let own = held.get(opener).copied().unwrap_or(0);
            let at_own_cap = opener.is_some() && own >= MAX_SESSIONS_PER_CLIENT;
            if !at_own_cap && open.len() < MAX_SESSIONS {
                return Ok(());
            }
            let from = if at_own_cap {
                opener.clone()
            } else {
                let most = held.values().copied().max().unwrap_or(0);
                // The holder of the most sessions; of several, the opener
                // itself when it is one of them.
                match held.get(opener) {
                    Some(&n) if n == most => opener.clone(),
                    _ => held
                        .iter()
                        .filter(|(_, n)| **n == most)
                        .map(|(who, _)| who.clone())
                        .next()
                        .flatten(),
                }
            };
            let victim = open
                .iter()
                .filter(|id| by(id) == from)
                .filter_map(|id| used.get(id).map(|t| (id, *t)))
                .filter(|(_, t)| t.elapsed() >= self.evict_idle)
                .min_by_key(|(_, t)| *t)
                .map(|(id, _)| id.clone());
            let busy = if at_own_cap {
                format!(
                    "busy: client `{}` has {MAX_SESSIONS_PER_CLIENT} MCP sessions open (the limit per client) and none has been idle for {:?}",
                    opener.as_deref().unwrap_or_default(),
                    self.evict_idle
                )
            } else {
                format!(
                    "busy: {MAX_SESSIONS} MCP sessions are open (the limit) and none has been idle for {:?}",
                    self.evict_idle
                )
            };
            (victim, busy)
        };
        let Some(id) = victim else {
            return Err(busy);
        };
        tracing::info!("closing the least recently used MCP session to make room for a new one");
        lock(&self.last_used).remove(&id);
        let _ = self.sessions.close_session(&id).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::asks_for_work;

    /// What a drain refuses (new work) and lets through (a notification
    /// such as a cancel, a response to the server's own request).
    #[test]
    fn only_requests_and_unreadable_bodies_ask_for_work() {
        let call = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#;
        assert!(asks_for_work(call));
        assert!(asks_for_work(
            br#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#
        ));
        assert!(asks_for_work(
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#
        ));
        assert!(asks_for_work(b"{not json"));
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#;
        assert!(!asks_for_work(cancel));
        assert!(!asks_for_work(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#));
    }
}
