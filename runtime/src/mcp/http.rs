//! The facade over MCP Streamable HTTP (`tickbox mcp --http ADDR`).
//!
//! rmcp's [`StreamableHttpService`] speaks the transport; this module puts
//! a small HTTP/1.1 server (hyper) in front of it and guards the door:
//!
//! - only [`MCP_PATH`] is served (404 elsewhere);
//! - a browser `Origin` must be a loopback one (403 otherwise), and the
//!   `Host` must name the bound address (rmcp's DNS-rebinding check);
//! - with a token, every request must carry `Authorization: Bearer TOKEN`
//!   (401 otherwise; compared in constant time). The CLI requires a token
//!   for any bind that is not loopback;
//! - at most [`MAX_CONNECTIONS`] TCP connections and [`MAX_SESSIONS`] MCP
//!   sessions at once (503 past them); a request body is at most
//!   [`MAX_FRAME_BYTES`], like a stdio line;
//! - a session ended with `DELETE` is answered 204 (rmcp says 202).
//!
//! Each session is its own [`Connection`] (listing, subscriptions, read
//! marks); all of them share the hosted Ticks. Sessions that negotiate
//! 2026-07-28 are served without a session by rmcp, so each of their
//! requests is bound to the catalog current at that request.

use super::server::{Connection, Facade};
use super::transport::{Tracking, MAX_FRAME_BYTES};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The one path the server answers on.
pub const MCP_PATH: &str = "/mcp";

/// Open TCP connections at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 64;

/// MCP sessions at once; a new one past it gets 503.
pub const MAX_SESSIONS: usize = 32;

/// How a facade is served over HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// When set, every request must carry `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
}

type Body = BoxBody<Bytes, Infallible>;

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Constant-time equality, so a wrong token's timing says nothing.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    req.headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .is_some_and(|given| same(given, token.as_bytes()))
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
    let sessions = Arc::new(LocalSessionManager::default());
    let factory = facade.clone();
    let service = StreamableHttpService::new(
        move || Ok(Connection::new(factory.clone(), Tracking::shared())),
        sessions.clone(),
        config,
    );
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let token: Option<Arc<str>> = options.token.map(Arc::from);
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "over {MAX_CONNECTIONS} HTTP connections; closing this one");
            continue;
        };
        let (service, sessions, token) = (service.clone(), sessions.clone(), token.clone());
        let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
            let (service, sessions, token) = (service.clone(), sessions.clone(), token.clone());
            async move { Ok::<_, Infallible>(handle(req, &service, &sessions, token, peer).await) }
        });
        let ct = ct.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, "HTTP connection ended: {e}");
                    }
                }
                _ = ct.cancelled() => conn.as_mut().graceful_shutdown(),
            }
            drop(slot);
        });
    }
    ct.cancel();
    Ok(())
}

async fn handle(
    req: Request<Incoming>,
    service: &StreamableHttpService<Connection, LocalSessionManager>,
    sessions: &LocalSessionManager,
    token: Option<Arc<str>>,
    peer: SocketAddr,
) -> Response<Body> {
    if req.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "not found: MCP is served on /mcp");
    }
    if let Some(token) = &token {
        if !authorized(&req, token) {
            tracing::info!(%peer, "refused a request without the bearer token");
            let mut r = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send Authorization: Bearer TOKEN (tickbox printed it at start)",
            );
            r.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return r;
        }
    }
    let new_session = !req.headers().contains_key("mcp-session-id");
    if new_session
        && req.method() == hyper::Method::POST
        && sessions.sessions.read().await.len() >= MAX_SESSIONS
    {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("busy: {MAX_SESSIONS} MCP sessions are open (the limit)"),
        );
    }
    let delete = req.method() == hyper::Method::DELETE;
    let mut response = service.handle(req).await;
    // rmcp ends a session with 202; clients (the Python SDK) take 200/204
    // as success and log a "termination failed" for anything else.
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}
