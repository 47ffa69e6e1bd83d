//! An MCP Streamable HTTP server as a client on raw TCP sees it: one
//! request per connection (`Connection: close`), the status, headers and
//! JSON-RPC messages of the answer (plain JSON or SSE `data:` lines), and
//! the requests the door's tests send by hand (half a head, a body
//! trickled or too big, a probe without the token).
//!
//! Whoever runs the server (`tickbox mcp --http` in the CLI's tests, the
//! facade in this process in tickbox-mcp's) hands out an [`Endpoint`]:
//! where it listens and the token it wants.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::JoinHandle;
use std::time::Duration;

/// A guard against hangs, not a timing assertion: generous, as the
/// machine may be loaded.
const PATIENCE: Duration = Duration::from_secs(60);

/// Where an MCP HTTP server listens, and the token it wants.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `HOST:PORT`.
    pub addr: String,
    /// Sent by [`Endpoint::post`] unless the request has its own
    /// `Authorization`.
    pub token: Option<String>,
}

impl Endpoint {
    /// One HTTP/1.1 request; the status, the headers (lower-case names)
    /// and the JSON-RPC messages of the body (plain JSON or SSE `data:`).
    pub fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> (u16, Vec<(String, String)>, Vec<Value>) {
        self.post_as(self.token.as_deref(), path, headers, body)
    }

    /// [`Endpoint::post`] with this token (none: no `Authorization`),
    /// unless `headers` has its own `Authorization`.
    pub fn post_as(
        &self,
        token: Option<&str>,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> (u16, Vec<(String, String)>, Vec<Value>) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut headers = headers.to_vec();
        if let Some(b) = &bearer {
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            {
                headers.push(("Authorization", b));
            }
        }
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let body = body.to_string();
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nConnection: close\r\n\
             Content-Length: {}\r\n",
            self.addr,
            body.len()
        );
        for (k, v) in &headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).expect("read the response");
        let (status, headers, body) = crate::response(&raw);
        (
            status,
            headers,
            json_messages(&String::from_utf8_lossy(&body)),
        )
    }
}

/// The JSON-RPC messages of a body: plain JSON lines or SSE `data:` lines.
fn json_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:").or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.is_object())
        .collect()
}

/// The value of the header `name` (lower-case).
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Opens an MCP session (`initialize`, then `notifications/initialized`)
/// with these extra headers; its id.
pub fn initialize_http(server: &Endpoint, extra: &[(&str, &str)]) -> String {
    initialize_http_at(server, extra, "2025-11-25")
}

/// [`initialize_http`] asking for the protocol revision `version` (which
/// the server must accept).
pub fn initialize_http_at(server: &Endpoint, extra: &[(&str, &str)], version: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "raw-http", "version": "0"}}});
    let (status, headers, messages) = server.post("/mcp", extra, &init);
    assert_eq!(status, 200, "{headers:?} {messages:?}");
    assert_eq!(
        messages[0]["result"]["serverInfo"]["name"], "tickbox",
        "{messages:?}"
    );
    assert_eq!(
        messages[0]["result"]["protocolVersion"], version,
        "{messages:?}"
    );
    let session = header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_string();
    let mut with_session = extra.to_vec();
    with_session.push(("Mcp-Session-Id", &session));
    let (status, _, _) = server.post(
        "/mcp",
        &with_session,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202);
    session
}

/// One raw HTTP/1.1 request (`Connection: close`), its body written by a
/// second thread so an early answer is read while the body still goes
/// out; the status and the response text. The body may be shared (an
/// `Arc`) by a test that keeps it, to send it without a copy.
pub fn raw<B: AsRef<[u8]> + Send + 'static>(
    server: &Endpoint,
    head: &str,
    body: B,
) -> (u16, String) {
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        let _ = writer.write_all(body.as_ref());
    });
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let _ = sending.join();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    (status, text)
}

/// A POST head for `body_len` bytes of JSON to /mcp with the server's token.
pub fn post_head(server: &Endpoint, session: Option<&str>, body_len: usize) -> String {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Authorization: Bearer {}\r\nContent-Length: {body_len}\r\n",
        server.addr,
        server.token.as_deref().unwrap()
    );
    if let Some(id) = session {
        head.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// Whether the server closed `s` (EOF or reset) within the patience.
pub fn closed_by_server(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Sends one request `head` on `s` and reads its answer, a head and a
/// short text that ends with a newline (as every refusal and 404 of the
/// door does), keeping the connection open.
pub fn send_for_short_answer(s: &mut TcpStream, head: &str) -> String {
    s.write_all(head.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"\n") || !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).to_string()
}

/// DELETE of a session; the status.
pub fn delete(server: &Endpoint, session: &str) -> u16 {
    let head = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         Authorization: Bearer {}\r\nMcp-Session-Id: {session}\r\n\r\n",
        server.addr,
        server.token.as_deref().unwrap()
    );
    raw(server, &head, Vec::<u8>::new()).0
}

/// `tools/call NAME` with `id` on `session`; the result (the call must
/// be answered with 200).
pub fn call_tool(server: &Endpoint, session: &str, id: u64, name: &str, args: Value) -> Value {
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", session)],
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": args}}),
    );
    assert_eq!(status, 200, "{name}: {m:?}");
    m.into_iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {name}"))["result"]
        .clone()
}

/// A `ping` request (id 1).
pub fn ping() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})
}

/// `tools/call echo` on `session`; the result.
pub fn echo(server: &Endpoint, session: &str, args: Value) -> Value {
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", session)],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "echo", "arguments": args}}),
    );
    assert_eq!(status, 200, "{m:?}");
    m.into_iter()
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the echo"))["result"]
        .clone()
}

/// An `initialize` as a raw request: the status and the response text.
pub fn try_initialize(server: &Endpoint) -> (u16, String) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "late", "version": "0"}}})
    .to_string();
    raw(
        server,
        &post_head(server, None, init.len()),
        init.into_bytes(),
    )
}

/// `GET path` without a token: the status and the response text.
pub fn probe(server: &Endpoint, path: &str) -> (u16, String) {
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    raw(server, &head, Vec::<u8>::new())
}

/// A `tools/call sleep` (shifty.py's) on `session` that stays in flight
/// until the file `until` exists, sent from a thread; joins to the whole
/// response text (empty when the connection closed without one).
pub fn call_until(server: &Endpoint, session: &str, until: &std::path::Path) -> JoinHandle<String> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"until": until.to_str().unwrap()}}})
    .to_string();
    let request = format!("{}{body}", post_head(server, Some(session), body.len()));
    let addr = server.addr.clone();
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE * 3)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        String::from_utf8_lossy(&got).to_string()
    })
}

/// Creates `gate`, ending a [`call_until`] call, and checks its answer: a
/// 200 whose result says the one sleep finished.
pub fn finish_call(gate: &std::path::Path, call: JoinHandle<String>) {
    std::fs::write(gate, "").expect("create the gate file");
    let text = call.join().expect("the call's thread");
    assert_eq!(status_of(&text), 200, "{text}");
    let answer = messages(&text)
        .into_iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call in flight: {text}"));
    assert_eq!(
        answer["result"]["structuredContent"]["finished"], 1,
        "{answer}"
    );
}

/// Checks that a [`call_until`] call cut off by its server got no answer.
pub fn assert_cut_off(call: JoinHandle<String>) {
    let text = call.join().expect("the call's thread");
    assert!(
        !messages(&text).iter().any(|m| m["id"] == 7),
        "an answer after the bound: {text}"
    );
}

/// The status of a raw response text (0 when there is none).
pub fn status_of(text: &str) -> u16 {
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The body of a raw response (after the head).
pub fn body_of(text: &str) -> &str {
    text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("")
}

/// The JSON-RPC messages of an SSE or JSON response text.
pub fn messages(text: &str) -> Vec<Value> {
    json_messages(body_of(text))
}

/// Waits until the Tick has started a `sleep` call (logged by shifty.py
/// to `log`, its `SHIFTY_LOG`).
pub fn wait_until_started(log: &std::path::Path) {
    assert!(
        crate::eventually(PATIENCE, || std::fs::read_to_string(log)
            .is_ok_and(|t| t.contains("sleep"))),
        "the call never reached the Tick"
    );
}

/// Waits until `/readyz` says draining; the last answer.
pub fn wait_until_draining(server: &Endpoint) -> (u16, String) {
    let mut last = (0, String::new());
    let draining = crate::eventually(PATIENCE, || {
        last = probe(server, "/readyz");
        last.0 == 503
    });
    assert!(draining, "{last:?}");
    last
}

/// A `tools/call echo` on `session` as a raw request: status and text.
pub fn echo_raw(server: &Endpoint, session: &str) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"late": true}}})
    .to_string();
    raw(
        server,
        &post_head(server, Some(session), body.len()),
        body.into_bytes(),
    )
}
