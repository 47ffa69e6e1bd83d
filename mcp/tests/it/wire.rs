//! The stdio serve loop on the wire, frame by frame: protocol revisions,
//! requests before `initialize`, malformed and oversized frames, the
//! in-flight bound, cancellation of a sent call and of one waiting for its
//! turn, the screen tool, capped errors, catalog changes that try to take
//! the facade's names, and memory over 50,000 requests.

use crate::raw::Raw;
use crate::{native, shifty, Hosting, Setup, PATIENCE};
use serde_json::{json, Value};
use tickbox_mcp::{MAX_FRAME_BYTES, MAX_PENDING_REQUESTS};
use tickbox_test_support::mcp_lines::tool_names;
use tickbox_test_support::{eventually, faulty, status_kib, TempDir};

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
        let mut mcp = Raw::start(shifty(&[]));
        let r = mcp.initialize(asked);
        assert_eq!(r["result"]["protocolVersion"], got, "asked {asked}: {r}");
        let tools = mcp.request(1, "tools/list", json!({}));
        assert!(
            tools["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.len() == 7),
            "{tools}"
        );
        let (served, logged) = mcp.close();
        assert!(served.is_ok(), "{served:?}: {logged}");
    }
}

/// Ticks that stop answering `tick/describe` are asked at once when a
/// client lists the tools: the listing waits one request timeout, not one
/// for each such Tick, and lists their last catalogs.
#[test]
fn ticks_that_stop_describing_cost_a_listing_one_timeout_not_one_each() {
    use tickbox_protocol::limits::REQUEST_TIMEOUT;
    let silent = |name| Hosting::shared(Some(name), native(faulty("describe_once"), &[]));
    let mut mcp = Raw::start_setup(Setup::of(vec![
        silent("a"),
        silent("b"),
        silent("c"),
        Hosting::shared(Some("s"), shifty(&[])),
    ]));
    mcp.initialize("2025-11-25");
    let started = std::time::Instant::now();
    let names = tool_names(&mcp.request(1, "tools/list", json!({})));
    let took = started.elapsed();
    for prefix in ["a_", "b_", "c_", "s_"] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "{prefix}: {names:?}"
        );
    }
    // Control: the Ticks were asked and did not answer (one timeout passed).
    assert!(took >= REQUEST_TIMEOUT, "{took:?}");
    // Asked one after another, the three would take three timeouts.
    assert!(took < 2 * REQUEST_TIMEOUT, "{took:?}");
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn requests_before_initialize_are_answered_and_notifications_dropped() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn a_2026_client_uses_inline_metadata_without_initialize() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn malformed_and_oversized_frames_get_errors_and_the_session_goes_on() {
    let mut mcp = Raw::start(shifty(&[]));
    mcp.initialize("2025-11-25");
    mcp.send_bytes(b"this is not json\n");
    let m = mcp.next_message();
    assert_eq!((error_code(&m), &m["id"]), (-32700, &Value::Null), "{m}");
    mcp.send_bytes(b"[1, 2]\n");
    let m = mcp.next_message();
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
    let m = mcp.next_message();
    assert_eq!((error_code(&m), &m["id"]), (-32600, &Value::Null), "{m}");
    let msg = m["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&MAX_FRAME_BYTES.to_string()), "{msg}");
    // Positive control: a frame of 1 MiB, under the bound, is served.
    let pad = "p".repeat(1024 * 1024);
    let r = mcp.request(8, "ping", json!({"_meta": {"pad": pad}}));
    assert_eq!(r["result"], json!({}), "{r}");
    let r = mcp.call(9, "echo", json!({"ok": true}));
    assert_eq!(r["structuredContent"], json!({"ok": true}));
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn requests_in_flight_are_bounded() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn a_reused_id_of_a_pending_request_is_refused() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn a_cancelled_call_runs_to_its_end_and_says_so() {
    let dir = TempDir::new("mcp-cancel");
    let log = dir.path("sleeps");
    let mut mcp = Raw::start(shifty(&[("SHIFTY_LOG", log.to_str().unwrap())]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
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
    let mut mcp = Raw::start(shifty(&[("SHIFTY_LOG", log.to_str().unwrap())]));
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
    let m = mcp.next_message();
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn tick_screen_is_trimmed_text_once_with_an_optional_window() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[test]
fn a_tool_error_over_the_bound_is_replaced_with_its_code() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}

fn wait_for_list_changed(mcp: &mut Raw) {
    loop {
        let m = mcp.next_message();
        if m["method"] == "notifications/tools/list_changed" {
            return;
        }
    }
}

#[test]
fn a_runtime_catalog_cannot_take_the_facade_names_and_titles_are_escaped() {
    let mut mcp = Raw::start(shifty(&[]));
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
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
    assert!(
        logged.contains("withheld from tools/list") && logged.contains("facade tool `tick_state`"),
        "a log line: {logged}"
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
        let m = mcp.next_message();
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
    if !crate::alone("wire::memory_stays_flat_over_50000_requests") {
        return;
    }
    let mut mcp = Raw::start(shifty(&[]));
    mcp.initialize("2025-11-25");
    pump(&mut mcp, 1, 1_000, 16);
    let after_1k = status_kib(std::process::id(), "VmRSS");
    pump(&mut mcp, 1_001, 49_000, 16);
    let after_50k = status_kib(std::process::id(), "VmRSS");
    eprintln!(
        "facade process RSS: {after_1k} KiB after 1,000 requests, {after_50k} KiB after 50,000"
    );
    assert!(
        after_50k * 10 <= after_1k * 11,
        "RSS grew by more than 10%: {after_1k} KiB → {after_50k} KiB"
    );
    let (served, logged) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {logged}");
}
