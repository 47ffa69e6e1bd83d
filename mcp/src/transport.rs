//! The facade's own stdio framing for MCP: bounded lines in, whole frames
//! out, and an answer for every request, even a malformed one.
//!
//! rmcp's stdio transport drops a line that is not JSON without a word (a
//! client waiting for that request's answer then waits forever) and ends
//! the session on a notification that comes before `initialize`. This
//! transport sits in front of rmcp's service loop and keeps the wire honest:
//!
//! - a line longer than [`MAX_FRAME_BYTES`] is refused (`-32600`, id
//!   `null`) and skipped up to its newline; memory stays within the bound
//!   plus one read chunk, whatever the client sends;
//! - a line that is not JSON gets `-32700` (id `null`); JSON that is not a
//!   JSON-RPC message gets `-32600`; a request whose params do not fit its
//!   method gets `-32602` with its id; a batch (an array) gets `-32600`;
//! - notifications and responses that arrive before a lifecycle started
//!   (no `initialize`, no request carrying the 2026-07-28 metadata) are
//!   dropped with a log line instead of ending the session;
//! - at most [`MAX_PENDING_REQUESTS`] requests are in flight; the next gets
//!   `-32001` at once, and an id still in flight cannot be reused;
//! - `notifications/cancelled` for a pending `tools/call` is not passed on:
//!   a call still waiting for its turn at the Tick is answered at once as
//!   `cancelled` (not executed); a Tick call cannot be taken back once
//!   sent, so a sent call runs to its end and its result says that the
//!   cancellation came too late ([`Tracking::take_cancelled`]). Other
//!   requests (list, read, describe) have no effects and are cancelled as
//!   usual.
//!
//! Frames are written by one writer task ([`LineTransport::new`] returns
//! it), one whole frame per write, so a cancelled sender can never leave
//! half a frame on the wire.

use bytes::BytesMut;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode,
    ErrorData, GetMeta, JsonRpcMessage, ProtocolVersion, Request, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tickbox_host::util::lock;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The longest line (one JSON-RPC message) the facade reads from a client.
/// A Tick line is at most 8 MiB (§2.3), so no legal call needs more.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// How many requests of one client may be in flight at once.
pub const MAX_PENDING_REQUESTS: usize = 64;

/// How many encoded frames may wait for the writer.
pub const OUTBOX_FRAMES: usize = 64;

/// The error code for a request refused because too many are in flight.
pub const BUSY: i32 = -32001;

/// How much is read from the client at a time.
const READ_CHUNK: usize = 64 * 1024;

/// What the transport and the request handlers share about one client.
#[derive(Debug, Default)]
pub struct Tracking {
    /// Requests read and not yet answered; `true` for `tools/call`.
    pending: HashMap<RequestId, bool>,
    /// `tools/call` requests the client asked to cancel.
    cancelled: HashSet<RequestId>,
    /// Whether a lifecycle started (see the module docs).
    started: bool,
    /// Woken whenever a `tools/call` is cancelled, for calls still waiting
    /// for their turn at the Tick ([`Tracking::cancel_signal`]).
    signal: Arc<tokio::sync::Notify>,
}

impl Tracking {
    /// A fresh, shareable record for one client.
    pub fn shared() -> Arc<Mutex<Tracking>> {
        Arc::new(Mutex::new(Tracking::default()))
    }

    /// Whether the client asked to cancel this `tools/call`; forgets it.
    pub fn take_cancelled(this: &Mutex<Tracking>, id: &RequestId) -> bool {
        lock(this).cancelled.remove(id)
    }

    /// What a call waiting for its turn watches: it is woken on every
    /// cancellation and then asks [`Tracking::take_cancelled`].
    pub fn cancel_signal(this: &Mutex<Tracking>) -> Arc<tokio::sync::Notify> {
        lock(this).signal.clone()
    }

    /// Requests in flight (for tests and logs).
    pub fn pending(this: &Mutex<Tracking>) -> usize {
        lock(this).pending.len()
    }
}

/// The Streamable HTTP transport's session header: `http` sets and
/// checks it, the server reads it to name a call's session in the audit.
/// Here, beside the versions both transports accept, so that neither of
/// those files imports the other for it.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// The protocol versions the facade speaks, oldest first.
pub const SUPPORTED_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// rmcp transport over a reader and a writer task (see the module docs).
pub struct LineTransport<R> {
    read: R,
    buf: BytesMut,
    /// Bytes of `buf` already known to hold no newline.
    scanned: usize,
    /// Skipping the rest of an oversized line.
    discarding: bool,
    eof: bool,
    /// Replies the transport makes itself, waiting for room in the outbox.
    local: VecDeque<Vec<u8>>,
    outbox: Option<mpsc::Sender<Vec<u8>>>,
    tracking: Arc<Mutex<Tracking>>,
}

/// Writes each frame whole, in order, until every sender is gone.
async fn write_frames<W: AsyncWrite + Unpin>(mut write: W, mut frames: mpsc::Receiver<Vec<u8>>) {
    while let Some(frame) = frames.recv().await {
        if let Err(e) = write.write_all(&frame).await {
            tracing::info!("cannot write to the MCP client ({e}); it left");
            return;
        }
        if frames.is_empty() {
            if let Err(e) = write.flush().await {
                tracing::info!("cannot flush to the MCP client ({e}); it left");
                return;
            }
        }
    }
    let _ = write.flush().await;
}

fn encode(message: &ServerJsonRpcMessage) -> Vec<u8> {
    let mut v = serde_json::to_vec(message).unwrap_or_else(|e| {
        // Our own types always serialize; say so rather than send nothing.
        format!(
            r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"cannot encode a reply: {e}"}}}}"#
        )
        .into_bytes()
    });
    v.push(b'\n');
    v
}

/// An error reply of the transport's own. JSON-RPC 2.0 wants `"id": null`
/// when the request's id could not be read; rmcp leaves the field out.
fn error_frame(code: ErrorCode, message: String, id: Option<RequestId>) -> Vec<u8> {
    let error = ErrorData::new(code, message, None);
    let mut v = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
    v.push('\n');
    v.into_bytes()
}

impl<R: AsyncRead + Send + Unpin + 'static> LineTransport<R> {
    /// The transport and its writer task (spawn it; it ends once the
    /// transport and every frame in flight are gone, after writing them).
    pub fn new<W: AsyncWrite + Send + Unpin + 'static>(
        read: R,
        write: W,
        tracking: Arc<Mutex<Tracking>>,
    ) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::channel(OUTBOX_FRAMES);
        (
            LineTransport {
                read,
                buf: BytesMut::new(),
                scanned: 0,
                discarding: false,
                eof: false,
                local: VecDeque::new(),
                outbox: Some(tx),
                tracking,
            },
            write_frames(write, rx),
        )
    }

    fn refuse_oversized(&mut self) {
        tracing::warn!("a client frame is over {MAX_FRAME_BYTES} bytes; refusing it");
        self.local.push_back(error_frame(
            ErrorCode::INVALID_REQUEST,
            format!(
                "invalid request: the frame is over the {MAX_FRAME_BYTES}-byte limit for one \
                 line; it was skipped unread"
            ),
            None,
        ));
    }

    /// Classifies one line; a message for rmcp, or nothing (a reply may
    /// have been queued in `local`).
    fn on_line(&mut self, line: &[u8]) -> Option<ClientJsonRpcMessage> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let mut value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                tracing::info!("a client frame is not JSON ({e}); answering -32700");
                self.local.push_back(error_frame(
                    ErrorCode::PARSE_ERROR,
                    format!("parse error: the frame is not valid JSON ({e})"),
                    None,
                ));
                return None;
            }
        };
        if let Some(message) = plain_tool_call(&mut value) {
            return self.admit(message);
        }
        let Value::Object(obj) = &value else {
            let what = if value.is_array() {
                "a batch; MCP does not use JSON-RPC batches"
            } else {
                "not a JSON-RPC message object"
            };
            self.local.push_back(error_frame(
                ErrorCode::INVALID_REQUEST,
                format!("invalid request: the frame is {what}"),
                None,
            ));
            return None;
        };
        let id: Option<RequestId> = obj
            .get("id")
            .and_then(|v| serde_json::from_value(v.clone()).ok());
        let method = obj.get("method").and_then(Value::as_str).map(str::to_owned);
        let has_id = obj.contains_key("id");
        let message: ClientJsonRpcMessage = match serde_json::from_value(value) {
            Ok(m) => m,
            Err(e) => {
                if method.is_some() && !has_id {
                    // A notification gets no answer, even a bad one.
                    tracing::info!("dropping a malformed notification: {e}");
                } else if let (Some(method), Some(_)) = (&method, &id) {
                    self.local.push_back(error_frame(
                        ErrorCode::INVALID_PARAMS,
                        format!("invalid params for `{method}`: {e}"),
                        id,
                    ));
                } else {
                    self.local.push_back(error_frame(
                        ErrorCode::INVALID_REQUEST,
                        format!("invalid request: {e}"),
                        id,
                    ));
                }
                return None;
            }
        };
        self.admit(message)
    }

    /// Lifecycle, in-flight and cancellation bookkeeping for a parsed message.
    fn admit(&mut self, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        let mut t = lock(&self.tracking);
        match &message {
            JsonRpcMessage::Request(r) => {
                if t.pending.contains_key(&r.id) {
                    let id = r.id.clone();
                    drop(t);
                    self.local.push_back(error_frame(
                        ErrorCode::INVALID_REQUEST,
                        format!("invalid request: id {id} is still in use by a pending request"),
                        Some(id),
                    ));
                    return None;
                }
                if t.pending.len() >= MAX_PENDING_REQUESTS {
                    let id = r.id.clone();
                    drop(t);
                    self.local.push_back(error_frame(
                        ErrorCode(BUSY),
                        format!(
                            "server busy: {MAX_PENDING_REQUESTS} requests are already in flight \
                             (the limit); this one was not executed"
                        ),
                        Some(id),
                    ));
                    return None;
                }
                if !t.started && starts_lifecycle(&r.request) {
                    t.started = true;
                }
                let is_call = matches!(r.request, ClientRequest::CallToolRequest(_));
                t.pending.insert(r.id.clone(), is_call);
                Some(message)
            }
            _ if !t.started => {
                tracing::info!("dropping a client message that came before initialize");
                None
            }
            JsonRpcMessage::Notification(n) => {
                let ClientNotification::CancelledNotification(c) = &n.notification else {
                    return Some(message);
                };
                let Some(id) = c.params.request_id.clone() else {
                    return Some(message);
                };
                match t.pending.get(&id) {
                    Some(true) => {
                        tracing::info!(
                            %id,
                            "the client cancelled a tools/call; a Tick call cannot be taken \
                             back once sent, so it runs to its end and its result says so"
                        );
                        t.cancelled.insert(id);
                        t.signal.notify_waiters();
                        None
                    }
                    Some(false) => {
                        // rmcp drops the answer of a cancelled request, so it
                        // will never pass `send`.
                        t.pending.remove(&id);
                        Some(message)
                    }
                    None => None,
                }
            }
            _ => Some(message),
        }
    }
}

/// A `tools/call` request in its plain form (exactly `jsonrpc` "2.0", an
/// integer or string `id`, `method` and `params`; `params` exactly a string
/// `name` and, optionally, an object of `arguments`), as the message rmcp
/// would read from it; `None` for anything else, which rmcp reads. rmcp
/// reads a message as an untagged enum over buffered content, copying every
/// key and string, which cost more than all the rest the facade does to
/// take in a call; the plain form is what clients send for nearly every
/// call. Takes the arguments out of `value` only when it answers.
fn plain_tool_call(value: &mut Value) -> Option<ClientJsonRpcMessage> {
    let obj = value.as_object_mut()?;
    if obj.len() != 4
        || obj.get("jsonrpc")?.as_str()? != "2.0"
        || obj.get("method")?.as_str()? != "tools/call"
    {
        return None;
    }
    let id = match obj.get("id")? {
        Value::Number(n) => RequestId::Number(n.as_i64()?),
        Value::String(s) => RequestId::String(s.as_str().into()),
        _ => return None,
    };
    let params = obj.get_mut("params")?.as_object_mut()?;
    let with_arguments = match params.get("arguments") {
        None => false,
        Some(Value::Object(_)) => true,
        Some(_) => return None,
    };
    if params.len() != 1 + usize::from(with_arguments) {
        return None;
    }
    let mut call = CallToolRequestParams::new(params.get("name")?.as_str()?.to_owned());
    if let Some(Value::Object(arguments)) = params.remove("arguments") {
        call = call.with_arguments(arguments);
    }
    Some(JsonRpcMessage::request(
        ClientRequest::CallToolRequest(Request::new(call)),
        id,
    ))
}

/// `initialize`, or a request carrying complete 2026-07-28 metadata in a
/// version the facade speaks (what rmcp takes as the start of a session
/// without `initialize`). `ping` and `server/discover` start nothing.
fn starts_lifecycle(request: &ClientRequest) -> bool {
    match request {
        ClientRequest::InitializeRequest(_) => true,
        ClientRequest::PingRequest(_) | ClientRequest::DiscoverRequest(_) => false,
        other => {
            let meta = other.get_meta();
            meta.missing_required_keys(&ProtocolVersion::V_2026_07_28)
                .is_empty()
                && meta
                    .protocol_version()
                    .is_some_and(|v| SUPPORTED_VERSIONS.contains(&v))
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answered = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        if let Some(id) = answered {
            let mut t = lock(&self.tracking);
            t.pending.remove(&id);
            t.cancelled.remove(&id);
        }
        let frame = encode(&item);
        let outbox = self.outbox.clone();
        async move {
            match outbox {
                Some(tx) => tx.send(frame).await.map_err(|_| closed()),
                None => Err(closed()),
            }
        }
    }

    // Cancel-safe: rmcp polls this inside a `select!`. Bytes read stay in
    // `buf` and replies stay in `local` until they are handed on; the only
    // awaits are a read into spare capacity and a channel reservation,
    // neither of which loses anything when dropped.
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            // A reply leaves `local` only with a permit in hand: taken out
            // before the wait, it would be lost when rmcp drops this future.
            while !self.local.is_empty() {
                let Some(tx) = &self.outbox else {
                    return None;
                };
                match tx.reserve().await {
                    Ok(permit) => {
                        if let Some(frame) = self.local.pop_front() {
                            permit.send(frame);
                        }
                    }
                    Err(_) => return None,
                }
            }
            if let Some(i) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                let line = self.buf.split_to(self.scanned + i + 1);
                self.scanned = 0;
                if self.discarding {
                    self.discarding = false;
                    continue;
                }
                if line.len() - 1 > MAX_FRAME_BYTES {
                    self.refuse_oversized();
                    self.discarding = false;
                    continue;
                }
                if let Some(m) = self.on_line(&line[..line.len() - 1]) {
                    return Some(m);
                }
                continue;
            }
            self.scanned = self.buf.len();
            if self.discarding {
                self.buf.clear();
                self.scanned = 0;
            } else if self.buf.len() > MAX_FRAME_BYTES {
                self.refuse_oversized();
                self.buf.clear();
                self.scanned = 0;
                self.discarding = true;
                continue;
            }
            if self.eof {
                return None;
            }
            self.buf.reserve(READ_CHUNK);
            match self.read.read_buf(&mut self.buf).await {
                Ok(0) => {
                    self.eof = true;
                    // A last message without a newline is still a message.
                    if !self.discarding && !self.buf.is_empty() {
                        let line = self.buf.split();
                        self.scanned = 0;
                        if let Some(m) = self.on_line(&line) {
                            return Some(m);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::info!("cannot read from the MCP client: {e}");
                    self.eof = true;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.outbox = None;
        Ok(())
    }
}

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the MCP client is gone")
}

#[cfg(test)]
mod plain_calls {
    use super::*;
    use serde_json::json;

    fn by_rmcp(frame: &Value) -> Value {
        let read: ClientJsonRpcMessage = serde_json::from_value(frame.clone()).unwrap();
        serde_json::to_value(read).unwrap()
    }

    #[test]
    fn a_plain_tool_call_is_read_as_rmcp_reads_it() {
        let frames = [
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "c1_increment", "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": -3, "method": "tools/call",
                   "params": {"name": "c1_get"}}),
            json!({"method": "tools/call", "id": "abc", "jsonrpc": "2.0",
                   "params": {"arguments": {"n": [1, {"x": null}], "s": "é"}, "name": "t"}}),
        ];
        for frame in frames {
            let mut taken = frame.clone();
            let fast = plain_tool_call(&mut taken).expect("a plain call");
            let JsonRpcMessage::Request(r) = &fast else {
                panic!("not a request: {fast:?}");
            };
            assert!(matches!(r.request, ClientRequest::CallToolRequest(_)));
            assert!(r.request.get_meta().is_empty());
            assert_eq!(serde_json::to_value(&fast).unwrap(), by_rmcp(&frame));
        }
    }

    #[test]
    fn anything_but_a_plain_tool_call_is_left_to_rmcp_untouched() {
        let call = |params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let mut others = vec![
            call(json!({"name": "t", "_meta": {"progressToken": 1}})),
            call(json!({"name": "t", "arguments": null})),
            call(json!({"name": "t", "arguments": [1]})),
            call(json!({"name": 5})),
            call(json!({"arguments": {}})),
            call(json!({"name": "t", "requestState": "s"})),
            call(json!(["t"])),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 18446744073709551615u64, "method": "tools/call",
                   "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "t"}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "t"}, "extra": true}),
            json!([1]),
        ];
        for frame in &mut others {
            let before = frame.clone();
            assert!(plain_tool_call(frame).is_none(), "read as plain: {before}");
            assert_eq!(*frame, before, "changed while refusing it");
        }
        // The positive control: the same shape, plain, is taken.
        assert!(plain_tool_call(&mut call(json!({"name": "t"}))).is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `receive` dropped while it waits for room in the outbox (rmcp polls
    /// it inside a `select!`) keeps every reply of its own for the next call.
    #[tokio::test]
    async fn a_cancelled_receive_loses_no_reply() {
        let (tx, mut rx) = mpsc::channel(1);
        let mut t = LineTransport {
            read: tokio::io::empty(),
            buf: BytesMut::new(),
            scanned: 0,
            discarding: false,
            eof: false,
            local: VecDeque::from([b"one\n".to_vec(), b"two\n".to_vec()]),
            outbox: Some(tx.clone()),
            tracking: Default::default(),
        };
        // The outbox is full: `receive` waits, and is dropped while it does.
        tx.send(b"filler\n".to_vec()).await.unwrap();
        drop(tx);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(50), t.receive()).await;
        assert!(waited.is_err(), "it waited for room");
        // Read on, and call again: both replies arrive, in order.
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(f) = rx.recv().await {
                got.push(String::from_utf8(f).unwrap());
            }
            got
        });
        assert!(t.receive().await.is_none(), "the client's end");
        drop(t);
        assert_eq!(reader.await.unwrap(), ["filler\n", "one\n", "two\n"]);
    }
}
