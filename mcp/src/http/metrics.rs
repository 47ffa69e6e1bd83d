//! `/metrics` beside MCP over HTTP (`tickbox mcp --http … --metrics
//! ADDR`): the host's [`Metrics`] and the MCP sessions open, in the
//! Prometheus text format, on a listener of its own.
//!
//! The page names the hosted Ticks and their tools and says how often and
//! how long each was called: not what an arbitrary local user should read,
//! so, like MCP, it is never served without a token, also on loopback. Its
//! token is not MCP's: a scraper's configuration is read by more people
//! and processes than an agent's, and reading counts must not let anyone
//! call a tool. The walls, in the order a connection meets them:
//!
//! - its own door (`tickbox_guard::door`, the code MCP's uses): at most
//!   [`METRICS_MAX_UNAUTHENTICATED`] connections that have not sent the
//!   token (a new one past that closes the oldest), each with
//!   [`super::AUTH_TIMEOUT`] to send a request carrying it, heads of at
//!   most [`super::MAX_HEADER_BYTES`] read within
//!   [`super::IDLE_TIMEOUT`]; at most [`METRICS_MAX_CONNECTIONS`]
//!   authenticated connections (503 past it). A flood here takes no MCP
//!   slot;
//! - the token only as `Authorization: Bearer TOKEN` (401 otherwise,
//!   compared in constant time): a scraper sends headers, and a token in
//!   the URL would be shown on Prometheus's own targets page;
//! - only `GET`/`HEAD` of [`METRICS_PATH`] (404 elsewhere, 405 for other
//!   methods); the page's size is bounded by the Ticks the host runs and
//!   `tickbox_telemetry::limits::MAX_METRIC_TOOLS_PER_TICK` tools each.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::sync::Arc;
use tickbox_guard::door::{self, Body};
use tickbox_telemetry::metrics::{Exposition, Kind, Metrics, CONTENT_TYPE};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The one path the metrics listener answers on.
pub const METRICS_PATH: &str = "/metrics";

/// Authenticated connections to `/metrics` at once, from one peer or all
/// together (default 8): a scraper keeps one connection alive; the rest is
/// room for a person with `curl` and a second scraper.
pub const METRICS_MAX_CONNECTIONS: usize = 8;

/// Connections to `/metrics` that have not sent the token yet (default
/// 16); a new one past it closes the oldest.
pub const METRICS_MAX_UNAUTHENTICATED: usize = 16;

const METRICS_DOOR: door::Bounds = door::Bounds {
    connections: METRICS_MAX_CONNECTIONS,
    per_peer: METRICS_MAX_CONNECTIONS,
    unauthenticated: METRICS_MAX_UNAUTHENTICATED,
};

/// Where and for whom `/metrics` is served, beside MCP
/// ([`HttpOptions::metrics`](super::HttpOptions::metrics)).
pub struct MetricsEndpoint {
    /// The bound listener (the CLI binds it before any Tick starts).
    pub listener: TcpListener,
    /// Every request must carry it as `Authorization: Bearer TOKEN`.
    pub token: String,
    /// What the page reports: the hosted Ticks' counts.
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for MetricsEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token: options end up in debug logs.
        f.debug_struct("MetricsEndpoint")
            .field("listener", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

struct Shared {
    token: Box<str>,
    metrics: Arc<Metrics>,
    sessions: Arc<LocalSessionManager>,
    gate: Arc<door::Gate>,
}

/// Serves `/metrics` until `close` is cancelled (when MCP stops serving).
pub(super) async fn serve(
    endpoint: MetricsEndpoint,
    sessions: Arc<LocalSessionManager>,
    close: CancellationToken,
) {
    let gate = Arc::new(door::Gate::new("metrics", METRICS_DOOR));
    let shared = Arc::new(Shared {
        token: endpoint.token.into_boxed_str(),
        metrics: endpoint.metrics,
        sessions,
        gate: gate.clone(),
    });
    let handle = move |req: Request<Incoming>, conn: Arc<door::Conn>| {
        let shared = shared.clone();
        async move { shared.handle(req, &conn).await }
    };
    let stop = close.clone().cancelled_owned();
    door::accept(endpoint.listener, gate, handle, close, stop).await;
}

impl Shared {
    async fn handle(&self, req: Request<Incoming>, conn: &door::Conn) -> Response<Body> {
        if !door::authorized(&req, &self.token, door::TokenIn::Header) {
            tracing::info!(peer = %conn.peer(), "refused a metrics request without the metrics token");
            return door::unauthorized(
                "unauthorized: send Authorization: Bearer TOKEN with the metrics token (tickbox said where it is at start)",
            );
        }
        if let Err(refused) = self.gate.admit(conn) {
            return *refused;
        }
        if req.uri().path() != METRICS_PATH {
            return door::plain(
                StatusCode::NOT_FOUND,
                "not found: metrics are served on /metrics",
            );
        }
        let head = req.method() == Method::HEAD;
        if !head && req.method() != Method::GET {
            let mut r = door::plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed: GET /metrics",
            );
            r.headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        let page = self.page().await;
        let body = if head {
            Bytes::new()
        } else {
            Bytes::from(page)
        };
        let mut r = Response::new(Full::new(body).boxed());
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static(CONTENT_TYPE),
        );
        r
    }

    /// The host's families and the MCP sessions open now.
    async fn page(&self) -> String {
        let mut page = Exposition::new();
        self.metrics.write(&mut page);
        let open = self.sessions.sessions.read().await.len();
        page.family(
            "tickbox_mcp_sessions",
            Kind::Gauge,
            "MCP sessions open on the Streamable HTTP server.",
        );
        page.sample("tickbox_mcp_sessions", "", &[], open as u64);
        page.finish()
    }
}
