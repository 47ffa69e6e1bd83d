//! The door of every HTTP server tickbox runs (MCP on `--http`, `/metrics`
//! on `--metrics`, `tickbox inspect`'s page): accepting connections, the
//! token check, connection slots, and the timeouts that keep a silent or
//! slow peer from holding one. Each server has its own [`Gate`] (its own
//! counts and bounds), so a flood at one door takes no slot at the other;
//! what a request is for is the server's handler's business.

use crate::limits::{
    AUTH_TIMEOUT, IDLE_TIMEOUT, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER, MAX_HEADER_BYTES,
    MAX_UNAUTHENTICATED,
};
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
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A response body: whole, or a stream (`tickbox inspect`'s events).
pub type Body = BoxBody<Bytes, Infallible>;

/// Locks `m`, taking the data even if a thread panicked while holding it:
/// the counts are consistent at every step, and one handler's panic must
/// not close the door to everyone after it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A one-line `text/plain` answer.
pub fn plain(status: StatusCode, text: &str) -> Response<Body> {
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
pub fn closing(status: StatusCode, text: &str) -> Response<Body> {
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

/// The connection bounds of a server that has none of its own (MCP's,
/// the inspector's).
pub const DEFAULT_BOUNDS: Bounds = Bounds {
    connections: MAX_CONNECTIONS,
    per_peer: MAX_CONNECTIONS_PER_PEER,
    unauthenticated: MAX_UNAUTHENTICATED,
};

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
    peer: SocketAddr,
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

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::{AUTHORIZATION, COOKIE};

    fn request(uri: &str, headers: &[(hyper::header::HeaderName, &str)]) -> Request<()> {
        let mut r = Request::builder().uri(uri);
        for (name, value) in headers {
            r = r.header(name, *value);
        }
        r.body(()).expect("a request")
    }

    #[test]
    fn a_request_without_the_token_where_allowed_is_refused() {
        let token = "0123456789abcdef";
        let bearer = format!("Bearer {token}");
        let header = request("/", &[(AUTHORIZATION, bearer.as_str())]);
        let query = request(&format!("/?a=1&token={token}"), &[]);
        // Positive controls: the header anywhere, the query where allowed.
        assert!(authorized(&header, token, TokenIn::Header));
        assert!(authorized(&header, token, TokenIn::HeaderOrQuery));
        assert!(authorized(&query, token, TokenIn::HeaderOrQuery));
        // The query where only the header counts; a wrong or partial
        // token; another scheme; a cookie, never a place for it.
        assert!(!authorized(&query, token, TokenIn::Header));
        let wrong = request("/", &[(AUTHORIZATION, "Bearer 0123456789abcdeX")]);
        assert!(!authorized(&wrong, token, TokenIn::HeaderOrQuery));
        let prefix = request("/", &[(AUTHORIZATION, "Bearer 0123")]);
        assert!(!authorized(&prefix, token, TokenIn::HeaderOrQuery));
        let basic = format!("Basic {token}");
        let basic = request("/", &[(AUTHORIZATION, basic.as_str())]);
        assert!(!authorized(&basic, token, TokenIn::HeaderOrQuery));
        let cookie = format!("token={token}");
        let cookie = request("/", &[(COOKIE, cookie.as_str())]);
        assert!(!authorized(&cookie, token, TokenIn::HeaderOrQuery));
        assert_eq!(unauthorized("x").status(), StatusCode::UNAUTHORIZED);
    }

    fn conn(gate: &Gate, peer: &str) -> Conn {
        let (id, _) = gate.arrive();
        Conn {
            id,
            peer: peer.parse().expect("an address"),
            slot: Mutex::new(None),
        }
    }

    #[test]
    fn connections_past_the_bounds_are_refused_and_a_freed_slot_is_taken() {
        let bounds = Bounds {
            connections: 3,
            per_peer: 2,
            unauthenticated: 16,
        };
        let gate = Arc::new(Gate::new("test", bounds));
        let a1 = conn(&gate, "192.0.2.1:1");
        let a2 = conn(&gate, "192.0.2.1:2");
        let a3 = conn(&gate, "192.0.2.1:3");
        assert!(gate.admit(&a1).is_ok() && gate.admit(&a2).is_ok());
        // Admitting a connection twice takes one slot.
        assert!(gate.admit(&a1).is_ok());
        let refused = gate.admit(&a3).expect_err("past the bound per peer");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        // Another peer gets the last slot; then the door is full.
        let b1 = conn(&gate, "192.0.2.2:1");
        assert!(gate.admit(&b1).is_ok());
        let b2 = conn(&gate, "192.0.2.2:2");
        assert!(gate.admit(&b2).is_err(), "past the bound in all");
        // A connection that ends gives its slot back.
        drop(a1);
        assert!(gate.admit(&a3).is_ok());
    }

    #[test]
    fn past_the_unauthenticated_bound_the_oldest_waiting_connection_is_closed() {
        let bounds = Bounds {
            connections: 4,
            per_peer: 4,
            unauthenticated: 2,
        };
        let gate = Gate::new("test", bounds);
        let (_, first) = gate.arrive();
        let (second_id, second) = gate.arrive();
        assert!(!first.is_cancelled() && !second.is_cancelled());
        let (_, third) = gate.arrive();
        assert!(first.is_cancelled(), "the oldest is closed");
        // Positive control: the others stay; one that authenticated
        // (forgotten) leaves room, so the next arrival closes nobody.
        assert!(!second.is_cancelled() && !third.is_cancelled());
        gate.forget(second_id);
        let (_, fourth) = gate.arrive();
        assert!(!third.is_cancelled() && !fourth.is_cancelled());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd") && !same(b"abc", b"ab") && !same(b"", b"a"));
    }
}
