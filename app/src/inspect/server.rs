//! The inspector's HTTP server: the page, its event stream and its actions,
//! behind the door every HTTP server of tickbox shares (`tickbox_guard`:
//! its `Host` and `Origin` checks, token, slots, timeouts and bodies).
//!
//! Every request meets, in order:
//! 1. **`Host`** must name the listen address (`127.0.0.1:PORT`,
//!    `localhost:PORT`, `[::1]:PORT` on loopback; the address itself
//!    otherwise): a page that rebinds its own name to 127.0.0.1 sends its
//!    own name, and is refused (403, DNS rebinding);
//! 2. **`Origin`**, when present, must be this server's own (403); every
//!    POST must have one and a JSON body (`Content-Type: application/json`),
//!    so no other site's form or script can act (a page on another
//!    loopback port is the same site, but not the same origin);
//! 3. **the token**, as `Authorization: Bearer TOKEN` and nowhere else,
//!    compared in constant time (401 without it), on every route but the
//!    page, its script and its style: those are tickbox's own (in the
//!    binary, the same for everyone, no data), so the printed URL can carry
//!    the token in its fragment (`/#token=TOKEN`), which no browser sends to
//!    any server. The page's script takes it from there, keeps it in the
//!    tab's `sessionStorage` (only this origin, i.e. this port, reads it)
//!    and sends it as the header on each request, its event stream too (a
//!    `fetch`, not an `EventSource`, which cannot set headers). Never a
//!    cookie: a browser sends a cookie for 127.0.0.1 to every port there,
//!    another local user's server too, so a `Cookie` header (or a query)
//!    carrying the token is ignored;
//! 4. the door's default connection slots, head bounds and timeouts (a
//!    connection that only fetched the page's files takes no slot and is
//!    closed as an unauthenticated one).
//!
//! Routes: `GET /` (the page), `/inspect.js`, `/inspect.css`, `/events`
//! (Server-Sent Events: `hello` with everything, then `state`, `screen`,
//! `catalog`, `frame` and `ended`), `/api/snapshot` (the `hello` as JSON),
//! `/api/export/scenario`, `/api/export/audit` (404 with the reason for a
//! live instance, whose host keeps the audit stream); `POST /api/call`,
//! `/api/keys`, `/api/resize`. Routes and events are the same whatever the
//! target (a Tick started here or a live instance): the server reads the
//! [`Inspector`]'s picture and hands actions to it. No response sets a
//! cookie. Every response carries the
//! Content-Security-Policy [`CSP`], `nosniff`, `no-referrer` and `no-store`.

use super::{Exit, SCREEN_INTERVAL};
use super::{
    Inspector, NotSent, EVENT_QUEUE, MAX_ACTION_BODY_BYTES, MAX_EVENT_CLIENTS, MAX_KEY_BYTES,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tickbox_guard::body::read_body;
use tickbox_guard::door::DEFAULT_BOUNDS;
use tickbox_guard::door::{accept, authorized, unauthorized, Body, Conn, Gate, TokenIn};
use tickbox_guard::limits::BODY_TIMEOUT;
use tickbox_guard::origin::{same_origin, wrong_host, wrong_origin, Hosts};
use tickbox_host::session::CallOutcome;
use tickbox_host::text::{self, TickData};
use tokio::sync::{broadcast, mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

/// The Content-Security-Policy of every response: tickbox's own script
/// and style only, no inline script, no frames, nothing from elsewhere.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_JS: &str = include_str!("page.js");
const PAGE_CSS: &str = include_str!("page.css");

/// How often an idle event stream is sent a comment, so a closed one is
/// noticed and gives its slot back.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// A new token, as `tickbox mcp --http` makes one.
pub fn new_token() -> Result<String, Exit> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Exit::session(format!("cannot make a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What every handler shares.
struct Shared {
    inspector: Arc<Inspector>,
    token: String,
    /// `Host` values this server answers to.
    hosts: Hosts,
    streams: Arc<Semaphore>,
    /// Events for every open stream, as SSE text.
    events: broadcast::Sender<Arc<str>>,
    /// The connection slots of this server's door.
    gate: Arc<Gate>,
}

/// Serves the page until `stop` resolves.
pub async fn serve(
    inspector: Arc<Inspector>,
    listener: tokio::net::TcpListener,
    token: String,
    stop: impl Future<Output = ()>,
) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
    let hosts = Hosts::of(local);
    let ct = CancellationToken::new();
    // The door's default bounds, with counts of its own.
    let gate = Arc::new(Gate::new("inspect", DEFAULT_BOUNDS));
    let shared = Arc::new(Shared {
        inspector: inspector.clone(),
        token,
        hosts,
        streams: Arc::new(Semaphore::new(MAX_EVENT_CLIENTS)),
        events: broadcast::channel(EVENT_QUEUE).0,
        gate: gate.clone(),
    });
    let pump = tokio::spawn(pump(inspector, shared.events.clone(), ct.clone()));
    let handle = move |req: Request<Incoming>, conn: Arc<Conn>| {
        let shared = shared.clone();
        async move { shared.handle(req, &conn).await }
    };
    accept(listener, gate, handle, ct.clone(), stop).await;
    ct.cancel();
    let _ = pump.await;
}

/// One SSE event's text.
fn sse(event: &str, data: &Value) -> Arc<str> {
    // serde_json escapes line breaks, so `data` is one line; json_safe
    // takes care of U+2028/2029 and the rest of the one policy.
    let data = text::json_safe(&data.to_string());
    Arc::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// Turns changes of the inspector's picture into events for every stream:
/// new frames, states, screens (at most one per [`SCREEN_INTERVAL`]),
/// catalogs and the ending. The picture is the same for every target, so
/// this loop does not know which one it shows.
async fn pump(inspector: Arc<Inspector>, out: broadcast::Sender<Arc<str>>, ct: CancellationToken) {
    let mut frames = inspector.timeline.subscribe();
    let mut states = inspector.state.subscribe();
    let mut catalogs = inspector.catalog.subscribe();
    let mut endings = inspector.ended.subscribe();
    let mut screens = inspector.target.view().changes();
    let mut screens_open = true;
    let mut last_screen = Instant::now() - SCREEN_INTERVAL;
    loop {
        tokio::select! {
            _ = ct.cancelled() => return,
            f = frames.recv() => match f {
                Ok(f) => {
                    let _ = out.send(sse("frame", &json!(f)));
                }
                // Fell behind: the ring has them; every page starts over.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let _ = out.send(sse("hello", &inspector.hello()));
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            // The inspector holds every sender: these never close.
            Ok(()) = states.changed() => {
                let state = states.borrow_and_update().clone();
                let _ = out.send(sse("state", &state));
            },
            Ok(()) = catalogs.changed() => {
                let catalog = catalogs.borrow_and_update().clone();
                let _ = out.send(sse("catalog", &catalog));
            },
            Ok(()) = endings.changed() => {
                let ended = endings.borrow_and_update().clone();
                if let Some(e) = ended {
                    let _ = out.send(sse("ended", &e));
                }
            },
            changed = screens.changed(), if screens_open => match changed {
                Ok(()) => {
                    // A Tick drawing constantly costs one snapshot per interval.
                    tokio::time::sleep_until((last_screen + SCREEN_INTERVAL).into()).await;
                    screens.borrow_and_update();
                    last_screen = Instant::now();
                    let _ = out.send(sse("screen", &inspector.screen()));
                }
                Err(_) => screens_open = false,
            },
        }
    }
}

/// A streamed response body fed from a channel: the event stream.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    respond(status, "text/plain; charset=utf-8", format!("{text}\n"))
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    respond(status, "application/json", text::json_safe(&v.to_string()))
}

/// The headers every answer carries, whatever it is.
fn harden(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    r
}

impl Shared {
    async fn handle(&self, req: Request<Incoming>, conn: &Conn) -> Response<Body> {
        harden(self.route(req, conn).await)
    }

    async fn route(&self, req: Request<Incoming>, conn: &Conn) -> Response<Body> {
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if !self.hosts.allows(&host) {
            tracing::info!(peer = %conn.peer(), host = %text::escape(&host), "refused a request for another host");
            return wrong_host();
        }
        let origin = req
            .headers()
            .get(hyper::header::ORIGIN)
            .map(|o| o.to_str().unwrap_or("?").to_string());
        if !same_origin(origin.as_deref(), &host) {
            tracing::info!(peer = %conn.peer(), "refused a request from another origin");
            return wrong_origin();
        }
        let path = req.uri().path().to_string();
        // The page's own files need no token: the printed URL keeps it in
        // its fragment, which the browser sends to no server, so the first
        // load cannot carry it. They hold no data (the same bytes for
        // everyone, from the binary); everything the Tick shows or takes
        // is behind the token.
        if req.method() == Method::GET {
            match path.as_str() {
                "/" => return respond(StatusCode::OK, "text/html; charset=utf-8", PAGE_HTML),
                "/inspect.js" => {
                    return respond(StatusCode::OK, "text/javascript; charset=utf-8", PAGE_JS)
                }
                "/inspect.css" => {
                    return respond(StatusCode::OK, "text/css; charset=utf-8", PAGE_CSS)
                }
                _ => {}
            }
        }
        // The header only: a cookie would be the browser's to send to
        // every port of 127.0.0.1, and a query ends up in histories.
        if !authorized(&req, &self.token, TokenIn::Header) {
            tracing::info!(peer = %conn.peer(), "refused a request without the token");
            return unauthorized(
                "unauthorized: open the URL tickbox inspect printed at start (its #token= is the token the page sends)",
            );
        }
        if let Err(refused) = self.gate.admit(conn) {
            return *refused;
        }
        if req.method() == Method::POST {
            if origin.is_none() {
                return plain(
                    StatusCode::FORBIDDEN,
                    "forbidden: an action needs the Origin header (browsers send it)",
                );
            }
            let json = req
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            if !json {
                return plain(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "an action's body must be application/json",
                );
            }
            let (parts, body) = req.into_parts();
            let body =
                match read_body(&parts.headers, body, BODY_TIMEOUT, MAX_ACTION_BODY_BYTES).await {
                    Ok(b) => b,
                    Err(e) => return plain(StatusCode::PAYLOAD_TOO_LARGE, &e.to_string()),
                };
            let body: Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                Err(e) => return plain(StatusCode::BAD_REQUEST, &format!("not JSON: {e}")),
            };
            return match path.as_str() {
                "/api/call" => self.call(&body).await,
                "/api/keys" => self.keys(&body),
                "/api/resize" => self.resize(&body),
                _ => plain(StatusCode::NOT_FOUND, "not found"),
            };
        }
        if req.method() != Method::GET {
            return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET and POST");
        }
        match path.as_str() {
            "/events" => self.events(),
            "/api/snapshot" => json_response(StatusCode::OK, &self.inspector.hello()),
            "/api/export/scenario" => {
                let mut r = respond(
                    StatusCode::OK,
                    "application/toml; charset=utf-8",
                    self.inspector.scenario(),
                );
                r.headers_mut().insert(
                    hyper::header::CONTENT_DISPOSITION,
                    HeaderValue::from_static("attachment; filename=\"inspect.scenario.toml\""),
                );
                r
            }
            "/api/export/audit" => {
                let lines = match self.inspector.target.audit_lines() {
                    Ok(lines) => lines,
                    Err(why) => return plain(StatusCode::NOT_FOUND, why),
                };
                let mut r = respond(StatusCode::OK, "application/jsonl; charset=utf-8", lines);
                r.headers_mut().insert(
                    hyper::header::CONTENT_DISPOSITION,
                    HeaderValue::from_static("attachment; filename=\"inspect.audit.jsonl\""),
                );
                r
            }
            _ => plain(StatusCode::NOT_FOUND, "not found"),
        }
    }

    /// The event stream: `hello` with everything, then what the pump sends;
    /// a stream that falls behind gets `hello` again.
    fn events(&self) -> Response<Body> {
        let Ok(permit) = self.streams.clone().try_acquire_owned() else {
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("busy: {MAX_EVENT_CLIENTS} event streams are open (the limit)"),
            );
        };
        let (tx, rx) = mpsc::channel::<Bytes>(EVENT_QUEUE);
        let mut events = self.events.subscribe();
        let inspector = self.inspector.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let hello = sse("hello", &inspector.hello());
            if tx.send(Bytes::from(hello.to_string())).await.is_err() {
                return;
            }
            loop {
                let next = tokio::select! {
                    e = events.recv() => e,
                    _ = tokio::time::sleep(KEEPALIVE) => Ok(Arc::from(": keep-alive\n\n")),
                };
                let text = match next {
                    Ok(t) => t,
                    Err(broadcast::error::RecvError::Lagged(_)) => sse("hello", &inspector.hello()),
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                // The page closed the stream: its slot comes free.
                if tx.send(Bytes::from(text.to_string())).await.is_err() {
                    return;
                }
            }
        });
        let mut r = Response::new(ChannelBody(rx).boxed());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        r
    }

    /// `POST /api/call {tool, args, confirm?: {tool, revision}}`: the
    /// host's validation first (400 with its message), against the catalog
    /// the Tick reports now, then, for a tool that mutates, a confirmation
    /// naming this tool and that catalog's revision (409 says what to
    /// confirm), then the call once.
    async fn call(&self, body: &Value) -> Response<Body> {
        let refused = |status: StatusCode, kind: &str, message: String| {
            json_response(
                status,
                &json!({"error": {"kind": kind, "message": text::escape(&message)}}),
            )
        };
        let not_sent = |e: NotSent| match e {
            NotSent::Invalid(m) => refused(StatusCode::BAD_REQUEST, "invalid", m),
            NotSent::Unavailable(m) => refused(StatusCode::CONFLICT, "ended", m),
        };
        let tool = body["tool"].as_str().unwrap_or_default().to_string();
        let args = body.get("args").cloned().unwrap_or_else(|| json!({}));
        if !args.is_object() {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid",
                "the args must be a JSON object (§7.1)".into(),
            );
        }
        let catalog = match self.inspector.catalog_for_call().await {
            Ok(c) => c,
            Err(e) => return not_sent(e),
        };
        let prepared = match catalog.prepare(&tool, args.clone()) {
            Ok(p) => p,
            Err(e) => return refused(StatusCode::BAD_REQUEST, "invalid", e.to_string()),
        };
        let line = tickbox_host::session::call_line_len(&prepared);
        let limit = tickbox_protocol::limits::MAX_LINE_BYTES;
        if line > limit {
            return refused(
                StatusCode::BAD_REQUEST,
                "invalid",
                format!("the call's request line would be {line} bytes, over the {limit}-byte line limit (§3.6); nothing was sent"),
            );
        }
        if prepared.mutates {
            let confirmed = body["confirm"]["tool"].as_str() == Some(tool.as_str())
                && body["confirm"]["revision"].as_str() == Some(catalog.revision.as_str());
            if !confirmed {
                return json_response(
                    StatusCode::CONFLICT,
                    &json!({"confirm": {"tool": text::escape(&tool), "revision": text::escape(&catalog.revision)},
                            "message": format!("`{}` mutates: confirm the call for catalog revision {}", text::escape(&tool), text::escape(&catalog.revision))}),
                );
            }
        }
        let (outcome, latency_ms) = match self.inspector.call(&prepared, &args).await {
            Ok(o) => o,
            Err(e) => return not_sent(e),
        };
        let answer = match outcome {
            CallOutcome::Ok(v) => json!({"ok": TickData::new(v).inert(), "latency_ms": latency_ms}),
            CallOutcome::Failed { error, executed } => json!({
                "error": {
                    "kind": "tool",
                    "code": error.code,
                    "message": error.message.line(),
                    "data": TickData::new(error.data.unwrap_or(Value::Null)).inert(),
                    "executed": executed,
                },
                "latency_ms": latency_ms,
            }),
            CallOutcome::Unknown(why) => json!({
                "error": {"kind": "unknown", "message": format!("unknown outcome: {}; it was not resent", text::escape(&why.to_string()))},
                "latency_ms": latency_ms,
            }),
        };
        json_response(StatusCode::OK, &answer)
    }

    /// `POST /api/keys {bytes}`: key bytes to the Tick's terminal.
    fn keys(&self, body: &Value) -> Response<Body> {
        let Some(bytes) = body["bytes"].as_str() else {
            return plain(StatusCode::BAD_REQUEST, "keys need {\"bytes\": \"...\"}");
        };
        if bytes.len() > MAX_KEY_BYTES {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("at most {MAX_KEY_BYTES} key bytes at once (the limit)"),
            );
        }
        if let Err(why) = self.inspector.keys(bytes.as_bytes()) {
            return plain(StatusCode::SERVICE_UNAVAILABLE, &text::escape(&why));
        }
        json_response(StatusCode::OK, &json!({"sent": bytes.len()}))
    }

    /// `POST /api/resize {cols, rows}`: the Tick's terminal size, within
    /// the view's bounds.
    fn resize(&self, body: &Value) -> Response<Body> {
        use tickbox_host::view::{MAX_VIEW_COLS, MAX_VIEW_ROWS};
        let dim = |k: &str, max: u16| {
            body[k]
                .as_u64()
                .filter(|n| (1..=u64::from(max)).contains(n))
                .map(|n| n as u16)
        };
        let (Some(cols), Some(rows)) = (dim("cols", MAX_VIEW_COLS), dim("rows", MAX_VIEW_ROWS))
        else {
            return plain(
                StatusCode::BAD_REQUEST,
                &format!("a resize needs cols 1..={MAX_VIEW_COLS} and rows 1..={MAX_VIEW_ROWS}"),
            );
        };
        self.inspector.resize(cols, rows);
        json_response(StatusCode::OK, &json!({"cols": cols, "rows": rows}))
    }
}

/// `--open`: the default browser opens a 0600 file in the per-user state
/// directory that forwards to the URL, so the token appears on no command
/// line (which other local users can read in /proc). The file is removed
/// when the returned guard drops.
pub fn open_in_browser(url: &str, port: u16) -> Option<RemoveOnDrop> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let registry = tickbox_host::live::Registry::open().ok()?;
    let path = registry.dir().join(format!("inspect-{port}-open.html"));
    let page = format!(
        "<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url={url}\"><title>tickbox inspect</title>\n"
    );
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut f| f.write_all(page.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "tickbox inspect: cannot write {}: {e}; open the URL yourself",
            path.display()
        );
        return None;
    }
    let guard = RemoveOnDrop(path.clone());
    match std::process::Command::new("xdg-open")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        // xdg-open hands the file over and exits; reap it off this thread.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => eprintln!("tickbox inspect: cannot run xdg-open ({e}); open the URL yourself"),
    }
    Some(guard)
}

/// A file removed when this drops.
pub struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
