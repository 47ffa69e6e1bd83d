//! `tickbox mcp --http` drained by SIGTERM or SIGINT, through the wire: a
//! call in flight is answered while readiness says "draining", a new
//! session and a new request are refused, and the host exits 0 once the
//! call is done; the drain timeout cuts a call that does not end (130),
//! and a second signal stops at once (130).

use crate::mcp_http::{post_head, probe, raw, try_initialize};
use crate::mcp_wire::{initialize_http, HttpServer};
use crate::util::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Generous: the machine may be loaded.
const PATIENCE: Duration = Duration::from_secs(60);

/// `tickbox mcp --http` on shifty, which logs each `sleep` call it starts
/// to `log`.
fn server(log: &Path, extra: &[&str]) -> HttpServer {
    HttpServer::start_with(
        "127.0.0.1:0",
        extra,
        &[("SHIFTY_LOG", log.to_str().unwrap())],
    )
}

/// A `tools/call sleep` on `session` that stays in flight until the file
/// `until` exists, sent from a thread; joins to the whole response text
/// (empty when the connection closed without one).
fn call_until(server: &HttpServer, session: &str, until: &Path) -> JoinHandle<String> {
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

/// The status of a raw response text (0 when there is none).
fn status_of(text: &str) -> u16 {
    text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// Waits until the Tick has started a `sleep` call (logged by shifty).
fn wait_until_started(log: &Path) {
    assert!(
        eventually(PATIENCE, || std::fs::read_to_string(log)
            .is_ok_and(|t| t.contains("sleep"))),
        "the call never reached the Tick"
    );
}

/// Waits until `/readyz` says draining; the last answer.
fn wait_until_draining(server: &HttpServer) -> (u16, String) {
    let mut last = (0, String::new());
    let draining = eventually(PATIENCE, || {
        last = probe(server, "/readyz");
        last.0 == 503
    });
    assert!(draining, "{last:?}");
    last
}

/// The body of a raw response (after the head).
fn body_of(text: &str) -> &str {
    text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("")
}

/// A `tools/call echo` on `session` as a raw request: status and text.
fn echo_raw(server: &HttpServer, session: &str) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"late": true}}})
    .to_string();
    raw(
        server,
        &post_head(server, Some(session), body.len()),
        body.into_bytes(),
    )
}

/// The JSON-RPC messages of an SSE or JSON response text.
fn messages(text: &str) -> Vec<Value> {
    body_of(text)
        .lines()
        .filter_map(|l| l.strip_prefix("data:").or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.is_object())
        .collect()
}

#[test]
fn sigterm_drains_a_call_in_flight_refuses_new_work_and_exits_0() {
    let t = TempDir::new("drain");
    let (log, gate) = (t.path("shifty.log"), t.path("gate"));
    let mut server = server(&log, &[]);
    // Before the signal (the control): ready, and a session opens.
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 200, "{text}");
    let session = initialize_http(&server, &[]);
    assert_eq!(echo_raw(&server, &session).0, 200, "a call works before");
    let call = call_until(&server, &session, &gate);
    wait_until_started(&log);

    server.signal(libc::SIGTERM);
    let (_, ready) = wait_until_draining(&server);
    assert!(body_of(&ready).ends_with("not ready: draining\n"), "{ready}");
    assert_eq!(probe(&server, "/healthz").0, 200, "alive while draining");
    // A new session: refused, with one line saying why.
    let (status, text) = try_initialize(&server);
    assert_eq!(status, 503, "{text}");
    let why = body_of(&text);
    assert!(why.starts_with("draining: "), "{why}");
    assert_eq!(why.lines().count(), 1, "{why:?}");
    assert!(why.contains("no new MCP sessions"), "{why}");
    // A new call of the open session: refused too (the host is leaving).
    let (status, text) = echo_raw(&server, &session);
    assert_eq!(status, 503, "{text}");
    assert!(body_of(&text).contains("no new requests"), "{text}");
    assert!(!server.has_exited(), "the call in flight holds the host");

    // The call ends: it is answered, and the host exits 0.
    std::fs::write(&gate, "").unwrap();
    let text = call.join().unwrap();
    assert_eq!(status_of(&text), 200, "{text}");
    let answer = messages(&text)
        .into_iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call in flight: {text}"));
    assert_eq!(
        answer["result"]["structuredContent"]["finished"], 1,
        "{answer}"
    );
    assert_eq!(server.wait_exit(), 0, "{:?}", server.stderr());
    let stderr = server.stderr().join("\n");
    assert!(stderr.contains("SIGTERM: draining"), "{stderr}");
    assert!(stderr.contains("drained after SIGTERM"), "{stderr}");
}

#[test]
fn a_call_past_the_drain_timeout_is_cut_off_with_exit_130() {
    let t = TempDir::new("drain-timeout");
    let (log, gate) = (t.path("shifty.log"), t.path("never"));
    let mut server = server(&log, &["--drain-timeout", "2"]);
    let session = initialize_http(&server, &[]);
    let call = call_until(&server, &session, &gate);
    wait_until_started(&log);
    let signalled = Instant::now();
    // SIGINT drains the same way.
    server.signal(libc::SIGINT);
    wait_until_draining(&server);
    assert_eq!(server.wait_exit(), 130, "{:?}", server.stderr());
    assert!(
        signalled.elapsed() >= Duration::from_secs(2),
        "the drain waited its bound: {:?}",
        signalled.elapsed()
    );
    let stderr = server.stderr().join("\n");
    assert!(
        stderr.contains("the drain timeout (2s, --drain-timeout) passed with 1 request(s) still in flight; they were cut off"),
        "{stderr}"
    );
    // The cut-off call got no answer.
    let text = call.join().unwrap();
    assert!(
        !messages(&text).iter().any(|m| m["id"] == 7),
        "an answer after the bound: {text}"
    );
}

#[test]
fn a_second_signal_while_draining_stops_at_once() {
    let t = TempDir::new("drain-twice");
    let (log, gate) = (t.path("shifty.log"), t.path("never"));
    let mut server = server(&log, &["--drain-timeout", "3600"]);
    let session = initialize_http(&server, &[]);
    let _call = call_until(&server, &session, &gate);
    wait_until_started(&log);
    server.signal(libc::SIGTERM);
    wait_until_draining(&server);
    // Still draining (the control for what the second signal does): the
    // call holds the host for up to an hour.
    assert!(!server.has_exited());
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait_exit(), 130, "{:?}", server.stderr());
    let stderr = server.stderr().join("\n");
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");
}
