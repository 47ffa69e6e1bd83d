//! The door of every HTTP server tickbox runs (MCP on `--http`, `/metrics`
//! on `--metrics`): accepting connections, the token check, connection
//! slots, and the timeouts that keep a silent or slow peer from holding
//! one. Each server has its own [`Gate`] (its own counts and bounds), so a
//! flood at one door takes no slot at the other; what a request is for is
//! the server's handler's business.

use super::{AUTH_TIMEOUT, IDLE_TIMEOUT, MAX_HEADER_BYTES};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tickbox_host::util::lock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A response body: whole, or a stream (`tickbox inspect`'s events).
pub type Body = BoxBody<Bytes, Infallible>;

pub(super) fn plain(status: StatusCode, text: &str) -> Response<Body> {
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
pub(super) fn closing(status: StatusCode, text: &str) -> Response<Body> {
    let mut r = plain(status, text);
    r.headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// 401 with `WWW-Authenticate: Bearer`, saying how to get in.
pub fn unauthorized(how: &str) -> Response<Body> {
    let mut r = plain(StatusCode::UNAUTHORIZED, how);
    r.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer"),
    );
    r
}

/// Constant-time equality, so a wrong token's timing says nothing.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where a request may carry its token. Never a cookie: a browser sends
/// a cookie for 127.0.0.1 to every port there, whoever listens on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenIn {
    /// `Authorization: Bearer TOKEN` only.
    Header,
    /// The header, or the query `?token=TOKEN` (for clients that cannot
    /// set headers).
    HeaderOrQuery,
}

/// Whether the request carries `token` where `within` allows.
pub fn authorized<B>(req: &Request<B>, token: &str, within: TokenIn) -> bool {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .is_some_and(|given| same(given, token.as_bytes()));
    let query = within == TokenIn::HeaderOrQuery
        && req.uri().query().is_some_and(|q| {
            q.split('&')
                .filter_map(|pair| pair.strip_prefix("token="))
                .any(|given| same(given.as_bytes(), token.as_bytes()))
        });
    header | query
}

/// How many connections a door lets in.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Authenticated connections at once.
    pub connections: usize,
    /// Authenticated connections from one peer address at once.
    pub per_peer: usize,
    /// Connections that have not sent a request with the token yet; past
    /// it a new connection closes the oldest of them.
    pub unauthenticated: usize,
}

/// Who holds a door's connection slots.
pub struct Gate {
    bounds: Bounds,
    /// What the door serves, for refusals (`HTTP`, `metrics`).
    what: &'static str,
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
    /// A door for `what` (named in refusals) with these bounds.
    pub fn new(what: &'static str, bounds: Bounds) -> Gate {
        Gate {
            bounds,
            what,
            next_id: AtomicU64::new(0),
            unauthenticated: Mutex::new(BTreeMap::new()),
            admitted: Mutex::new(Admitted::default()),
        }
    }

    /// A new connection: its id and what closes it, closing the oldest
    /// unauthenticated connection when there are too many.
    fn arrive(&self) -> (u64, CancellationToken) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let close = CancellationToken::new();
        let mut waiting = lock(&self.unauthenticated);
        while waiting.len() >= self.bounds.unauthenticated {
            match waiting.pop_first() {
                Some((_, oldest)) => oldest.cancel(),
                None => break,
            }
        }
        waiting.insert(id, close.clone());
        (id, close)
    }

    fn forget(&self, id: u64) {
        lock(&self.unauthenticated).remove(&id);
    }

    /// Gives `conn`, which has just sent the token, its slot (once), or
    /// the refusal (503, the connection closed) when none is free, boxed:
    /// it is the rare path.
    pub fn admit(self: &Arc<Self>, conn: &Conn) -> Result<(), Box<Response<Body>>> {
        if conn.admitted() {
            return Ok(());
        }
        match self.slot(conn.peer.ip()) {
            Ok(slot) => {
                *lock(&conn.slot) = Some(slot);
                self.forget(conn.id);
                Ok(())
            }
            Err(why) => {
                tracing::warn!(peer = %conn.peer, "{why}");
                Err(Box::new(closing(StatusCode::SERVICE_UNAVAILABLE, &why)))
            }
        }
    }

    /// A slot for an authenticated connection from `peer`, or why not.
    fn slot(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, String> {
        let Bounds {
            connections,
            per_peer,
            ..
        } = self.bounds;
        let what = self.what;
        let mut a = lock(&self.admitted);
        if a.total >= connections {
            return Err(format!(
                "busy: {connections} authenticated {what} connections are open (the limit)"
            ));
        }
        let mine = a.per_peer.entry(peer).or_default();
        if *mine >= per_peer {
            return Err(format!(
                "busy: {per_peer} {what} connections from {peer} are open (the limit per peer)"
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
struct Slot {
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
    pub(super) peer: SocketAddr,
    slot: Mutex<Option<Slot>>,
}

impl Conn {
    fn admitted(&self) -> bool {
        lock(&self.slot).is_some()
    }

    /// Who is on the other end.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
}

/// Serves connections from `listener` through `handle` until `stop`
/// resolves; each connection ends when `close` is cancelled (the caller
/// cancels it when it is done serving). Every connection is HTTP/1.1 with
/// a request head of at most [`MAX_HEADER_BYTES`], read within
/// [`IDLE_TIMEOUT`], and must send a request `handle` admits through
/// `gate` within [`AUTH_TIMEOUT`] of being accepted.
pub async fn accept<H, F>(
    listener: TcpListener,
    gate: Arc<Gate>,
    handle: H,
    close: CancellationToken,
    stop: impl Future<Output = ()>,
) where
    H: Fn(Request<Incoming>, Arc<Conn>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
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
        };
        // A response goes out in several writes (the head, then each
        // chunk of an SSE stream): with Nagle's algorithm on, each write
        // after the first waits for the client's delayed ACK, 40 ms on
        // Linux, on every request of a kept-alive connection.
        let _ = stream.set_nodelay(true);
        let (id, evicted) = gate.arrive();
        let conn = Arc::new(Conn {
            id,
            peer,
            slot: Mutex::new(None),
        });
        let handler = {
            let (handle, conn) = (handle.clone(), conn.clone());
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let served = handle(req, conn.clone());
                async move { Ok::<_, Infallible>(served.await) }
            })
        };
        let (close, gate, builder) = (close.clone(), gate.clone(), builder.clone());
        let unauthenticated = gate.bounds.unauthenticated;
        tokio::spawn(async move {
            let serving = builder.serve_connection(TokioIo::new(stream), handler);
            tokio::pin!(serving);
            let deadline = tokio::time::sleep(AUTH_TIMEOUT);
            tokio::pin!(deadline);
            let mut waiting_for_auth = true;
            let mut closing = false;
            loop {
                tokio::select! {
                    r = serving.as_mut() => {
                        if let Err(e) = r {
                            tracing::debug!(%peer, "HTTP connection ended: {e}");
                        }
                        break;
                    }
                    _ = evicted.cancelled() => {
                        tracing::debug!(%peer, "closed: the oldest of {unauthenticated} unauthenticated connections");
                        break;
                    }
                    _ = &mut deadline, if waiting_for_auth => {
                        if !conn.admitted() {
                            tracing::debug!(%peer, "closed: no request with the token within {AUTH_TIMEOUT:?}");
                            break;
                        }
                        waiting_for_auth = false;
                    }
                    // Closing lets a response hyper is still writing go
                    // out whole (a drain's last answers: their bodies have
                    // ended, but the bytes may not be flushed yet), and
                    // closes an idle keep-alive connection at once. A
                    // stream that never ends (an SSE GET) holds its task
                    // until the process exits, as before.
                    _ = close.cancelled(), if !closing => {
                        closing = true;
                        serving.as_mut().graceful_shutdown();
                    }
                }
            }
            gate.forget(id);
        });
    }
}
