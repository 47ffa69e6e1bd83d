//! `tickbox mcp` on the wire, frame by frame: protocol revisions, requests
//! before `initialize`, malformed and oversized frames, the in-flight bound,
//! cancellation of a sent call, the screen tool, capped errors, catalog
//! changes that try to take the facade's names, memory over 50,000
//! requests, and Streamable HTTP (`--http`) with its Origin and token guards.

use crate::util::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tickbox_runtime::mcp::{MAX_FRAME_BYTES, MAX_PENDING_REQUESTS};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `tickbox mcp` child driven with raw JSON-RPC lines.
pub(crate) struct Raw {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// Messages read while waiting for another one.
    held: Vec<Value>,
}

fn shifty() -> Vec<String> {
    vec!["--".into(), "python3".into(), tick("shifty.py")]
}

impl Raw {
    pub(crate) fn start(args: &[String]) -> Raw {
        Raw::start_env(args, &[])
    }

    pub(crate) fn start_env(args: &[String], env: &[(&str, &std::path::Path)]) -> Raw {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .arg("mcp")
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .spawn()
            .expect("spawn tickbox mcp");
        let stdout = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Raw {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr: Some(stderr),
            held: Vec::new(),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to tickbox mcp");
        stdin.flush().unwrap();
    }

    pub(crate) fn send(&mut self, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes());
    }

    /// The next message from the server, whatever it is.
    pub(crate) fn next(&mut self) -> Value {
        if !self.held.is_empty() {
            return self.held.remove(0);
        }
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no frame from tickbox mcp within {PATIENCE:?}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// The answer with this id (other messages are kept for later).
    pub(crate) fn answer(&mut self, id: Value) -> Value {
        if let Some(i) = self
            .held
            .iter()
            .position(|m| m["id"] == id && m.get("method").is_none())
        {
            return self.held.remove(i);
        }
        loop {
            let line = self
                .lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|e| panic!("no answer to {id} within {PATIENCE:?}: {e}"));
            let m: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
            self.held.push(m);
        }
    }

    pub(crate) fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(json!(id))
    }

    pub(crate) fn initialize(&mut self, version: &str) -> Value {
        let r = self.request(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub(crate) fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        let r = self.request(id, "tools/call", json!({"name": tool, "arguments": args}));
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {tool} answered with an error: {r}"))
    }

    /// SIGKILL, at once, and waits for the exit: nothing of the host's
    /// own shutdown runs.
    pub(crate) fn kill_now(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin; returns the exit code and stderr.
    pub(crate) fn close(mut self) -> (i32, String) {
        drop(self.stdin.take());
        let status = wait_for(&mut self.child);
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (status, stderr)
    }
}

fn wait_for(child: &mut Child) -> i32 {
    if !exits_within(child.id(), PATIENCE) {
        let _ = child.kill();
        panic!("tickbox mcp did not exit within {PATIENCE:?}");
    }
    child.wait().expect("wait").code().unwrap_or(-1)
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `_meta` a 2026-07-28 request carries instead of a handshake.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

fn error_code(m: &Value) -> i64 {
    m["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error: {m}"))
}

fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn each_supported_revision_is_negotiated() {
    for (asked, got) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        // Older than the facade speaks: its newest revision with initialize.
        ("2024-11-05", "2025-11-25"),
        // 2026-07-28 has no initialize: the same answer, the client decides.
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut mcp = Raw::start(&shifty());
        let r = mcp.initialize(asked);
        assert_eq!(r["result"]["protocolVersion"], got, "asked {asked}: {r}");
        let tools = mcp.request(1, "tools/list", json!({}));
        assert!(
            tools["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.len() == 7),
            "{tools}"
        );
        let (code, stderr) = mcp.close();
        assert_eq!(code, 0, "{stderr}");
    }
}

#[test]
fn requests_before_initialize_are_answered_and_notifications_dropped() {
    let mut mcp = Raw::start(&shifty());
    // The Python SDK's default client opens with server/discover.
    let r = mcp.request(1, "server/discover", json!({"_meta": meta_2026()}));
    let versions = &r["result"]["supportedVersions"];
    assert_eq!(
        versions,
        &json!(["2025-06-18", "2025-11-25", "2026-07-28"]),
        "{r}"
    );
    // Without the per-request metadata: an error, not an exit.
    let r = mcp.request(2, "server/discover", json!({}));
    assert_eq!(error_code(&r), -32602, "{r}");
    let r = mcp.request(3, "tools/list", json!({}));
    assert_eq!(error_code(&r), -32602, "{r}");
    // A notification and a stray response before initialize: dropped.
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    mcp.send(json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    let r = mcp.request(4, "ping", json!({}));
    assert_eq!(r["result"], json!({}), "{r}");
    // Then a legacy client falls back to initialize, and everything works.
    let r = mcp.initialize("2025-11-25");
    assert_eq!(r["result"]["serverInfo"]["name"], "tickbox", "{r}");
    let r = mcp.call(5, "echo", json!({"x": 1}));
    assert_eq!(r["structuredContent"], json!({"x": 1}), "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_2026_client_uses_inline_metadata_without_initialize() {
    let mut mcp = Raw::start(&shifty());
    let r = mcp.request(1, "tools/list", json!({"_meta": meta_2026()}));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "reshape",
            "fail_big",
            "sleep",
            "count",
            "tick_state",
            "tick_screen"
        ]
    );
    let r = mcp.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"y": 2}, "_meta": meta_2026()}),
    );
    assert_eq!(r["result"]["structuredContent"], json!({"y": 2}), "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    // Legacy subscribe is not part of 2026-07-28.
    let r = mcp.request(
        3,
        "resources/subscribe",
        json!({"uri": "tick://shifty/state", "_meta": meta_2026()}),
    );
    assert_eq!(error_code(&r), -32601, "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn malformed_and_oversized_frames_get_errors_and_the_session_goes_on() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    mcp.send_bytes(b"this is not json\n");
    let m = mcp.next();
    assert_eq!((error_code(&m), &m["id"]), (-32700, &Value::Null), "{m}");
    mcp.send_bytes(b"[1, 2]\n");
    let m = mcp.next();
    assert_eq!((error_code(&m), &m["id"]), (-32600, &Value::Null), "{m}");
    assert!(
        m["error"]["message"].as_str().unwrap().contains("batch"),
        "{m}"
    );
    assert!(
        m.as_object().unwrap().contains_key("id"),
        "`id: null` is written: {m}"
    );
    mcp.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 5}));
    let m = mcp.answer(json!(7));
    assert_eq!(error_code(&m), -32602, "{m}");
    // One byte over the line bound: refused unread, named.
    let mut big = vec![b'x'; MAX_FRAME_BYTES + 1];
    big.push(b'\n');
    mcp.send_bytes(&big);
    let m = mcp.next();
    assert_eq!((error_code(&m), &m["id"]), (-32600, &Value::Null), "{m}");
    let msg = m["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&MAX_FRAME_BYTES.to_string()), "{msg}");
    // Positive control: a frame of 1 MiB, under the bound, is served.
    let pad = "p".repeat(1024 * 1024);
    let r = mcp.request(8, "ping", json!({"_meta": {"pad": pad}}));
    assert_eq!(r["result"], json!({}), "{r}");
    let r = mcp.call(9, "echo", json!({"ok": true}));
    assert_eq!(r["structuredContent"], json!({"ok": true}));
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn requests_in_flight_are_bounded() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    for id in 1..=MAX_PENDING_REQUESTS as u64 {
        mcp.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": {"name": "sleep", "arguments": {"seconds": 3}}}));
    }
    // The Tick takes 8 at a time, 3 s each: these all wait.
    let r = mcp.request(1000, "ping", json!({}));
    assert_eq!(error_code(&r), -32001, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not executed"),
        "{r}"
    );
    // Room again once calls finish.
    let first = mcp.answer(json!(1));
    assert_eq!(first["result"]["isError"], false, "{first}");
    let r = mcp.request(2000, "ping", json!({}));
    assert_eq!(r["result"], json!({}), "room again: {r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_reused_id_of_a_pending_request_is_refused() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    mcp.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                    "params": {"name": "sleep", "arguments": {"seconds": 2}}}));
    mcp.send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    let m = mcp.answer(json!(5));
    assert_eq!(error_code(&m), -32600, "{m}");
    assert!(
        m["error"]["message"]
            .as_str()
            .unwrap()
            .contains("still in use"),
        "{m}"
    );
    let m = mcp.answer(json!(5));
    assert_eq!(
        m["result"]["structuredContent"]["slept"].as_f64(),
        Some(2.0),
        "the call itself: {m}"
    );
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_cancelled_call_runs_to_its_end_and_says_so() {
    let dir = TempDir::new("mcp-cancel");
    let log = dir.path("sleeps");
    let mut mcp = Raw::start_env(&shifty(), &[("SHIFTY_LOG", &log)]);
    mcp.initialize("2025-11-25");
    // 3 s: the cancellation must reach tickbox while the Tick still sleeps,
    // a step of milliseconds after the sleep started, even on a loaded machine.
    mcp.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                    "params": {"name": "sleep", "arguments": {"seconds": 3}}}));
    // Cancelled once the Tick has it: too late to take back.
    assert!(
        eventually(PATIENCE, || sleeps_started(&log) == 1),
        "the sleep reached the Tick"
    );
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 5, "reason": "changed my mind"}}),
    );
    let m = mcp.answer(json!(5));
    let result = &m["result"];
    assert_eq!(result["isError"], false, "{m}");
    assert_eq!(result["structuredContent"]["finished"], 1, "{m}");
    assert!(
        text_of(result).contains("cannot be taken back")
            && text_of(result).contains("did not retry"),
        "{m}"
    );
    // It ran once, and only once.
    let r = mcp.call(6, "count", json!({}));
    assert_eq!(r["structuredContent"], json!({"finished": 1}));
    // A call not cancelled carries no such note (positive control).
    let r = mcp.call(7, "echo", json!({}));
    assert!(!text_of(&r).contains("cancelled"), "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

/// How many `sleep` calls reached shifty.py (with `SHIFTY_LOG` at `log`).
fn sleeps_started(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_call_cancelled_while_waiting_for_its_turn_is_answered_unsent() {
    let dir = TempDir::new("mcp-turns");
    let log = dir.path("sleeps");
    let mut mcp = Raw::start_env(&shifty(), &[("SHIFTY_LOG", &log)]);
    mcp.initialize("2025-11-25");
    // The Tick takes 8 calls at a time: these hold every turn for 8 s.
    for id in 1..=8 {
        mcp.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": {"name": "sleep", "arguments": {"seconds": 8}}}));
    }
    assert!(
        eventually(PATIENCE, || sleeps_started(&log) == 8),
        "the 8 sleeps reached the Tick"
    );
    mcp.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                    "params": {"name": "sleep", "arguments": {"seconds": 0.1}}}));
    // tickbox reads its input in order: once the ping is answered, call 9
    // was read and is waiting for its turn.
    let r = mcp.request(1000, "ping", json!({}));
    assert_eq!(r["result"], json!({}), "{r}");
    mcp.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 9, "reason": "changed my mind"}}),
    );
    // Answered at once, before any of the sleeping calls.
    let m = mcp.next();
    assert_eq!(m["id"], 9, "the cancelled call is answered first: {m}");
    let e = &m["result"]["structuredContent"]["error"];
    assert_eq!(m["result"]["isError"], true, "{m}");
    assert_eq!(
        (&e["kind"], &e["executed"]),
        (&json!("cancelled"), &json!(false)),
        "{m}"
    );
    assert!(
        text_of(&m["result"]).contains("before tickbox sent it"),
        "{m}"
    );
    for id in 1..=8 {
        let r = mcp.answer(json!(id));
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    // Only the 8 sleeps ran: the cancelled one never reached the Tick.
    let r = mcp.call(10, "count", json!({}));
    assert_eq!(r["structuredContent"], json!({"finished": 8}), "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn tick_screen_is_trimmed_text_once_with_an_optional_window() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    // The screen is parsed on its own thread: poll until it is drawn.
    let (mut r, mut id) = (Value::Null, 0);
    eventually(PATIENCE, || {
        id += 1;
        r = mcp.call(id, "tick_screen", json!({}));
        text_of(&r).contains("second row")
    });
    assert_eq!(r["content"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r.get("structuredContent"), None, "the screen once: {r}");
    assert_eq!(text_of(&r), "Shifty screen\nsecond row");
    let r = mcp.call(60, "tick_screen", json!({"rows": [1, 2]}));
    assert_eq!(text_of(&r), "second row");
    let r = mcp.call(61, "tick_screen", json!({"rows": [0, 1], "cols": [0, 6]}));
    assert_eq!(text_of(&r), "Shifty");
    let r = mcp.call(62, "tick_screen", json!({"rows": [3, 1]}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        r["structuredContent"]["error"]["kind"], "invalid_arguments",
        "{r}"
    );
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_tool_error_over_the_bound_is_replaced_with_its_code() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    let r = mcp.call(1, "fail_big", json!({"bytes": 7 * 1024 * 1024}));
    let e = &r["structuredContent"]["error"];
    assert_eq!(e["kind"], "response_too_large", "{e}");
    assert_eq!(
        (e["code"].as_i64(), e["executed"].as_bool()),
        (Some(-32000), Some(true))
    );
    let size = r.to_string().len();
    assert!(size < 4096, "the replacement is small: {size} bytes");
    // Positive control: a short error comes whole.
    let r = mcp.call(2, "fail_big", json!({"bytes": 100}));
    let e = &r["structuredContent"]["error"];
    assert_eq!(e["kind"], "tool_error", "{e}");
    assert_eq!(e["tick_message"].as_str().map(str::len), Some(100));
    assert_eq!(e["data"], json!({"why": "asked to"}));
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

fn wait_for_list_changed(mcp: &mut Raw) {
    loop {
        let m = mcp.next();
        if m["method"] == "notifications/tools/list_changed" {
            return;
        }
    }
}

#[test]
fn a_runtime_catalog_cannot_take_the_facade_names_and_titles_are_escaped() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    mcp.request(1, "tools/list", json!({}));
    // A hostile title: escape sequences and a bidi override.
    mcp.call(
        2,
        "reshape",
        json!({"tools": ["extra"], "title": "Evil\u{1b}[2J\u{202e}txt.exe"}),
    );
    wait_for_list_changed(&mut mcp);
    let list = mcp.request(3, "tools/list", json!({}));
    assert!(tool_names(&list).contains(&"extra".to_string()), "{list}");
    let raw = list.to_string();
    assert!(
        !raw.contains('\u{1b}') && !raw.contains('\u{202e}'),
        "{raw}"
    );
    assert!(raw.contains("Evil\\\\x1b[2J\\\\u{202e}txt.exe"), "{raw}");

    // Now the Tick offers `tick_state` itself: its tools are withheld.
    mcp.call(4, "reshape", json!({"tools": ["tick_state"]}));
    wait_for_list_changed(&mut mcp);
    let list = mcp.request(5, "tools/list", json!({}));
    assert_eq!(tool_names(&list), ["tick_state", "tick_screen"], "{list}");
    let desc = list["result"]["tools"][0]["description"].as_str().unwrap();
    assert!(
        desc.contains("withheld") && desc.contains("tick_state"),
        "{desc}"
    );
    // `tick_state` is still the facade's.
    let r = mcp.call(6, "tick_state", json!({}));
    assert_eq!(r["structuredContent"]["tick"], "shifty", "{r}");
    assert_eq!(
        r["structuredContent"]["data"],
        json!({"revision": 3}),
        "{r}"
    );
    // The Tick's own tools are gone for this client.
    let r = mcp.request(7, "tools/call", json!({"name": "echo", "arguments": {}}));
    assert!(r.get("error").is_some(), "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("withheld from tools/list") && stderr.contains("facade tool `tick_state`"),
        "a log line: {stderr}"
    );
}

/// Pipelines `count` requests (pings and calls, alternating), at most
/// `window` outstanding, and checks every answer.
fn pump(mcp: &mut Raw, first_id: u64, count: u64, window: u64) {
    let mut next = first_id;
    let end = first_id + count;
    let mut answered = 0;
    while answered < count {
        while next < end && next - first_id - answered < window {
            let frame = if next.is_multiple_of(2) {
                json!({"jsonrpc": "2.0", "id": next, "method": "ping"})
            } else {
                json!({"jsonrpc": "2.0", "id": next, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"n": next}}})
            };
            mcp.send(frame);
            next += 1;
        }
        let m = mcp.next();
        let id = m["id"].as_u64().unwrap_or_else(|| panic!("{m}"));
        assert!(m.get("result").is_some(), "{m}");
        if !id.is_multiple_of(2) {
            assert_eq!(m["result"]["structuredContent"]["n"], id, "{m}");
        }
        answered += 1;
    }
}

#[test]
fn memory_stays_flat_over_50000_requests() {
    let mut mcp = Raw::start(&shifty());
    mcp.initialize("2025-11-25");
    pump(&mut mcp, 1, 1_000, 16);
    let after_1k = status_kib(mcp.pid(), "VmRSS");
    pump(&mut mcp, 1_001, 49_000, 16);
    let after_50k = status_kib(mcp.pid(), "VmRSS");
    eprintln!("tickbox mcp RSS: {after_1k} KiB after 1,000 requests, {after_50k} KiB after 50,000");
    assert!(
        after_50k * 10 <= after_1k * 11,
        "RSS grew by more than 10%: {after_1k} KiB → {after_50k} KiB"
    );
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

/// The facade polls every Tick's catalog each second; a repeat describe
/// must not validate and compile the schemas again.
#[tokio::test]
async fn a_repeat_describe_reuses_the_compiled_catalog() {
    use std::sync::Arc;
    use tickbox_runtime::backend::native::{spawn, NativeSpec};
    use tickbox_runtime::session::{CallOutcome, Session, SessionConfig};
    let io = spawn(&NativeSpec::new(["python3".to_string(), tick("shifty.py")])).unwrap();
    let s = Session::start(io, SessionConfig::default()).await.unwrap();
    let first = s.descriptor().unwrap();
    let again = s.describe().await.unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "same bytes, same compiled catalog"
    );
    let call = first.prepare("reshape", json!({"tools": ["x"]})).unwrap();
    assert!(matches!(s.call(&call).await, CallOutcome::Ok(_)));
    let changed = s.describe().await.unwrap();
    assert!(!Arc::ptr_eq(&first, &changed), "a new catalog is parsed");
    assert_eq!(changed.revision, "r2");
    assert!(changed.tool("x").is_some());
    let again = s.describe().await.unwrap();
    assert!(Arc::ptr_eq(&changed, &again));
    s.shutdown().await;
}

/// `tickbox mcp --http` on a loopback port, drained with SIGTERM on drop.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) addr: String,
    /// The token of the `serving MCP on` line's URL (a generated one), sent
    /// by [`HttpServer::post`] unless the request has its own.
    pub(crate) token: Option<String>,
    /// The stderr lines before the address line.
    pub(crate) banner: Vec<String>,
    /// The stderr lines after it, as they come.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Told when the reader of stderr reached its end.
    read_all: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    /// The exit code, once a test has waited for it.
    exited: Option<i32>,
}

impl HttpServer {
    pub(crate) fn start(extra: &[&str]) -> HttpServer {
        HttpServer::start_on("127.0.0.1:0", extra)
    }

    fn start_on(bind: &str, extra: &[&str]) -> HttpServer {
        HttpServer::start_with(bind, extra, &[])
    }

    pub(crate) fn start_with(bind: &str, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let shifty = tick("shifty.py");
        let mut args = vec!["--http", bind];
        args.extend_from_slice(extra);
        args.extend(["--", "python3", &shifty]);
        HttpServer::start_args(&args, env)
    }

    /// `tickbox mcp ARGS` (which must serve HTTP: `--http ADDR`).
    pub(crate) fn start_args(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .arg("mcp")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .spawn()
            .expect("spawn tickbox mcp --http");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut banner = Vec::new();
        let (addr, token) = loop {
            let line = lines
                .next()
                .expect("stderr ended before the address")
                .unwrap();
            if let Some(rest) = line.strip_prefix("tickbox mcp: serving MCP on http://") {
                let (url, query) = rest.split_once('?').unwrap_or((rest, ""));
                let token = query.strip_prefix("token=").map(str::to_string);
                break (url.trim_end_matches("/mcp").to_string(), token);
            }
            banner.push(line);
        };
        // Keep reading stderr so the server never blocks on it.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        let (ended, read_all) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
            let _ = ended.send(());
        });
        HttpServer {
            child,
            addr,
            token,
            banner,
            log,
            read_all: std::sync::Mutex::new(read_all),
            exited: None,
        }
    }

    /// Sends `signal` to the server.
    pub(crate) fn signal(&self, signal: i32) {
        // SAFETY: a plain kill(2) to our own child, not yet waited for.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Whether the server has exited (without waiting).
    pub(crate) fn has_exited(&mut self) -> bool {
        self.exited.is_some() || self.child.try_wait().expect("wait").is_some()
    }

    /// Waits for the server to exit (it must, within the tests' patience)
    /// and returns its exit code.
    pub(crate) fn wait_exit(&mut self) -> i32 {
        let code = wait_for(&mut self.child);
        // Its last lines may still be on their way to `log`: wait for the
        // reader to reach the end of stderr (bounded, should a child of the
        // server still hold the pipe).
        let _ = self
            .read_all
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10));
        self.exited = Some(code);
        code
    }

    /// Its stderr after the address line, so far.
    pub(crate) fn stderr(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The server's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One HTTP/1.1 request; the status, the headers (lower-case names)
    /// and the JSON-RPC messages of the body (plain JSON or SSE `data:`).
    pub(crate) fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> (u16, Vec<(String, String)>, Vec<Value>) {
        self.post_as(self.token.as_deref(), path, headers, body)
    }

    /// [`HttpServer::post`] with this token (none: no `Authorization`),
    /// unless `headers` has its own `Authorization`.
    pub(crate) fn post_as(
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
        let mut s = std::net::TcpStream::connect(&self.addr).expect("connect");
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
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, rest) = text.split_once("\r\n\r\n").expect("a whole response");
        let mut head_lines = head.lines();
        let status: u16 = head_lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers: Vec<(String, String)> = head_lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        let messages = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:").or(Some(l)))
            .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
            .filter(|v| v.is_object())
            .collect();
        (status, headers, messages)
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if self.exited.is_some() {
            return;
        }
        self.signal(libc::SIGTERM);
        let code = wait_for(&mut self.child);
        // Drained (0), or calls a test left running cut off at the drain
        // timeout (130).
        assert!(
            code == 0 || code == 130 || std::thread::panicking(),
            "exit {code} after SIGTERM"
        );
    }
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

pub(crate) fn initialize_http(server: &HttpServer, extra: &[(&str, &str)]) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw-http", "version": "0"}}});
    let (status, headers, messages) = server.post("/mcp", extra, &init);
    assert_eq!(status, 200, "{headers:?} {messages:?}");
    assert_eq!(
        messages[0]["result"]["serverInfo"]["name"], "tickbox",
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

#[test]
fn streamable_http_serves_sessions_over_the_shared_ticks() {
    let server = HttpServer::start(&[]);
    let a = initialize_http(&server, &[]);
    let b = initialize_http(&server, &[]);
    assert_ne!(a, b, "one session per client");
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &a)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(status, 200);
    assert_eq!(tool_names(&m[0]).len(), 7, "{m:?}");
    let call = |session: &str, id: u64, name: &str, args: Value| {
        let (status, _, m) = server.post(
            "/mcp",
            &[("Mcp-Session-Id", session)],
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": name, "arguments": args}}),
        );
        assert_eq!(status, 200, "{m:?}");
        m.into_iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}"))
    };
    let r = call(&a, 2, "echo", json!({"from": "a"}));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"from": "a"}),
        "{r}"
    );
    // Session b calls the same Tick: it sees a's finished call.
    call(&a, 3, "sleep", json!({"seconds": 0.1}));
    let r = call(&b, 4, "count", json!({}));
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"finished": 1}),
        "{r}"
    );
    // Only /mcp is served.
    let (status, _, _) = server.post("/other", &[], &json!({}));
    assert_eq!(status, 404);
    // A browser page from elsewhere is refused; a loopback one is fine.
    let (status, _, _) = server.post(
        "/mcp",
        &[("Origin", "http://evil.example")],
        &json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    );
    assert_eq!(status, 403);
    initialize_http(&server, &[("Origin", "http://localhost:3000")]);
}

#[test]
fn streamable_http_requires_the_bearer_token_it_was_given() {
    let dir = TempDir::new("mcp-token");
    let file = dir.path("token");
    let token = "s3cret-token-0123456789abcdef";
    std::fs::write(&file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = HttpServer::start(&["--token-file", file.to_str().unwrap()]);
    assert_eq!(server.token, None, "a given token is not printed");
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, headers, _) = server.post("/mcp", &[], &ping);
    assert_eq!(status, 401);
    assert_eq!(header(&headers, "www-authenticate"), Some("Bearer"));
    let (status, _, _) = server.post("/mcp", &[("Authorization", "Bearer wrong")], &ping);
    assert_eq!(status, 401);
    let auth = format!("Bearer {token}");
    initialize_http(&server, &[("Authorization", &auth)]);
}

/// A bind that is not loopback gets a generated token, printed on stderr.
/// The server listens on every interface for the length of the test, but
/// the test talks to it over loopback only.
#[test]
fn a_non_loopback_bind_generates_a_token_and_requires_it() {
    let mut server = HttpServer::start_on("0.0.0.0:0", &[]);
    let token = server
        .token
        .clone()
        .unwrap_or_else(|| panic!("no token on stderr: {:?}", server.banner));
    assert_eq!(token.len(), 64, "32 random bytes in hex: {token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    // Over loopback, to the same server.
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    server.addr = format!("127.0.0.1:{port}");
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, headers, _) = server.post_as(None, "/mcp", &[], &ping);
    assert_eq!(status, 401, "no token: {headers:?}");
    let (status, _, _) = server.post("/mcp", &[("Authorization", "Bearer 00")], &ping);
    assert_eq!(status, 401, "a wrong token");
    let auth = format!("Bearer {token}");
    initialize_http(&server, &[("Authorization", &auth)]);
}

/// How many of a process's threads are tokio workers.
fn tokio_workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "tokio-rt-worker")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn the_host_runs_on_one_thread_over_stdio_unless_given_workers_within_the_bound() {
    for bad in ["0", "65"] {
        let mut args = vec!["mcp".to_string(), "--workers".into(), bad.into()];
        args.extend(shifty());
        tickbox(&args).expect(2, "--workers");
    }
    // Default over stdio: a current-thread runtime, no worker threads.
    // --workers 2: two. Each serves a call and a ping.
    for (workers, want) in [(None, 0), (Some("2"), 2)] {
        let mut args = Vec::new();
        if let Some(n) = workers {
            args.extend(["--workers".to_string(), n.to_string()]);
        }
        args.extend(shifty());
        let mut mcp = Raw::start(&args);
        mcp.initialize("2025-11-25");
        let r = mcp.call(1, "echo", json!({"a": 1}));
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(tokio_workers(mcp.pid()), want, "--workers {workers:?}");
        let p = mcp.request(2, "ping", json!({}));
        assert_eq!(p["result"], json!({}), "{p}");
        let (code, stderr) = mcp.close();
        assert_eq!(code, 0, "{stderr}");
    }
}

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after `state`.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// `n` read-only calls of `tool`, one at a time and `gap` apart (so they
/// arrive at any point of a neighbour's slice), ids from `first`: each
/// one's latency, sorted.
fn neighbour_latencies(
    mcp: &mut Raw,
    first: u64,
    n: u64,
    tool: &str,
    gap: Duration,
) -> Vec<Duration> {
    let mut out: Vec<Duration> = (first..first + n)
        .map(|id| {
            // Fixed sleep: the gap is this measurement's input (calls
            // that arrive apart, as an agent's do), not a wait for anything.
            std::thread::sleep(gap);
            let t = std::time::Instant::now();
            let r = mcp.call(id, tool, json!({"n": id}));
            let took = t.elapsed();
            assert_eq!(r["isError"], false, "{r}");
            took
        })
        .collect();
    out.sort();
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn a_spinning_tick_adds_little_to_a_neighbours_calls_on_one_thread_and_on_two() {
    // Absolute latencies depend on the machine (BENCHMARKS.md has them,
    // beside their anchor); what must hold on any machine, however busy,
    // is the comparison in one run: beside a spinner, the neighbour's calls
    // are several times faster than with the way guests yielded before
    // (`TICKBOX_GUEST_YIELD=immediate`, which held each call ~300 ms on one
    // thread), on one thread and on two.
    let dir = TempDir::new("mcp-fair");
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!(
            "[[tick]]\nname = \"spinner\"\npath = \"{h}\"\n\n[[tick]]\nname = \"calm\"\npath = \"{h}\"\n",
            h = hostile()
        ),
    )
    .unwrap();
    const CALLS: u64 = 60;
    const GAP: Duration = Duration::from_millis(7);
    let measure = |workers: Option<&str>, immediate: bool| -> (Vec<Duration>, Vec<Duration>) {
        let mut args = vec![
            "--config".to_string(),
            config.to_string_lossy().into_owned(),
        ];
        if let Some(n) = workers {
            args.extend(["--workers".to_string(), n.to_string()]);
        }
        let yield_mode = std::path::Path::new("immediate");
        let env: &[(&str, &std::path::Path)] = if immediate {
            &[("TICKBOX_GUEST_YIELD", yield_mode)]
        } else {
            &[]
        };
        let mut mcp = Raw::start_env(&args, env);
        mcp.initialize("2025-11-25");
        neighbour_latencies(&mut mcp, 1, 10, "calm_echo", GAP);
        // Positive control: the same calls with nothing spinning.
        let control = neighbour_latencies(&mut mcp, 100, CALLS, "calm_echo", GAP);
        // The spinner's call never ends; it takes a whole core meanwhile.
        let before_spin = cpu_seconds(mcp.pid());
        mcp.send(json!({"jsonrpc": "2.0", "id": 999, "method": "tools/call",
                        "params": {"name": "spinner_spin", "arguments": {}}}));
        assert!(
            eventually(Duration::from_secs(60), || cpu_seconds(mcp.pid())
                - before_spin
                > 0.05),
            "the spinner never started"
        );
        let (cpu0, wall0) = (cpu_seconds(mcp.pid()), std::time::Instant::now());
        let spun = neighbour_latencies(&mut mcp, 200, CALLS, "calm_echo", GAP);
        let (cpu, wall) = (cpu_seconds(mcp.pid()) - cpu0, wall0.elapsed().as_secs_f64());
        eprintln!(
            "workers {workers:?}, immediate {immediate}: neighbour call p50/p99 {:?}/{:?} alone, {:?}/{:?} beside a spinner (host CPU {:.0}% of wall)",
            pct(&control, 0.5),
            pct(&control, 0.99),
            pct(&spun, 0.5),
            pct(&spun, 0.99),
            cpu / wall * 100.0
        );
        // The spinner really ran through the measurement (a twentieth of a
        // core at least, even on a machine busy with other builds).
        assert!(
            cpu >= 0.05 * wall,
            "the spinner did not spin: {cpu:.2} s CPU in {wall:.2} s"
        );
        drop(mcp);
        (control, spun)
    };
    let (_, before) = measure(None, true);
    let (control, one) = measure(None, false);
    let (_, two) = measure(Some("2"), false);
    // The positive control: with nothing spinning, calls are faster than
    // the old way beside a spinner (else the comparison shows nothing).
    assert!(
        pct(&control, 0.5) * 4 < pct(&before, 0.5),
        "positive control: {control:?} alone against {before:?} the old way"
    );
    for (name, spun) in [("one thread", &one), ("two workers", &two)] {
        assert!(
            pct(spun, 0.5) * 4 < pct(&before, 0.5),
            "{name}: a spinning Tick held its neighbour's calls: {spun:?}, against {before:?} the old way"
        );
    }
}
