//! The audit streams of the facade's Ticks, into one stream as a ticks
//! file's `audit` key has them: a refusal flood from one Tick is a few
//! merged lines while a neighbour's calls are all recorded. How the
//! binary opens the file (the keys, `--audit-sync`, exit 2) is tested in
//! `cli/tests/it/audit.rs`.

use crate::raw::Raw;
use crate::{wasm, AuditLines, Hosting, Setup};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::Arc;
use tickbox_mcp::Grants;
use tickbox_test_support::audit::session_of;
use tickbox_test_support::{hostile, TempDir};

/// The sum of the `count`s of a session's events of this kind (a line
/// without one stands for one), and the number of its lines.
fn counted(session: &[&Value], event: &str, what: &str) -> (usize, u64) {
    let lines: Vec<&&Value> = session
        .iter()
        .filter(|e| e["event"] == event && e["what"] == what)
        .collect();
    let n = lines.iter().map(|e| e["count"].as_u64().unwrap_or(1)).sum();
    (lines.len(), n)
}

/// The red team's flood: a sandboxed Tick with one directory grant
/// looping over refused opens (and, with no network grant at all, over
/// refused connects) wrote one `denied` line per try (109 MiB in 11 s).
/// Now each kind is one line and one merged count, whose counts add up to
/// every try the guest saw refused; the socket attempts are on record
/// though no network grant exists (WASI used to refuse them before the
/// host saw the address); and a neighbour Tick's calls, made while the
/// flood runs, are all recorded.
#[test]
fn a_flood_of_refusals_is_a_few_lines_and_a_neighbours_calls_are_all_recorded() {
    let data = TempDir::new("audit-flood-data");
    let granted = Grants {
        dir: vec![format!("{}::/data", data.0.display())],
        ..Grants::default()
    };
    let lines = Arc::new(AuditLines::default());
    let setup = Setup {
        audit: Some(lines.clone()),
        ..Setup::of(vec![
            Hosting::shared(Some("flood"), wasm(&hostile(), &granted)),
            Hosting::shared(Some("calm"), wasm(&hostile(), &Grants::default())),
        ])
    };
    let mut mcp = Raw::start_setup(setup);
    mcp.initialize("2025-06-18");
    let tries = 20_000u64;
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    // The flood runs while the neighbour is called.
    mcp.send(json!({"jsonrpc": "2.0", "id": 1000, "method": "tools/call",
        "params": {"name": "flood_refuse_loop", "arguments": {"path": "/data/../../etc/passwd", "n": tries}}}));
    let calls = 50;
    for i in 0..calls {
        let r = mcp.call(i, "calm_echo", json!({"i": i}));
        assert_eq!(r["structuredContent"]["i"], i, "{r}");
    }
    let flood = mcp.answer(json!(1000));
    assert_eq!(
        flood["result"]["structuredContent"]["refused"], tries,
        "the guest was refused every time: {flood}"
    );
    let r = mcp.call(
        2000,
        "flood_refuse_loop",
        json!({"addr": addr, "n": tries / 10}),
    );
    assert_eq!(r["structuredContent"]["refused"], tries / 10, "{r}");
    let (served, log) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {log}");

    let all = lines.events();
    let size: usize = all.iter().map(|e| e.to_string().len() + 1).sum();
    let flood = session_of(&all, |e| {
        e["grants"]["dirs"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    });
    let (lines, n) = counted(&flood, "denied", "path");
    assert_eq!(n, tries, "every refused open counted: {flood:#?}");
    assert!(lines <= 3, "{lines} lines for {tries} refusals");
    let (lines, n) = counted(&flood, "denied", "socket");
    assert_eq!(
        n,
        tries / 10,
        "every refused connect counted, no grant needed"
    );
    assert!(lines <= 3, "{lines} lines");
    let socket = flood
        .iter()
        .find(|e| e["event"] == "denied" && e["what"] == "socket")
        .unwrap();
    assert_eq!(socket["attempted"], addr.as_str(), "the address seen");
    let merged = flood
        .iter()
        .find(|e| e["event"] == "denied" && e["count"].is_u64())
        .expect("a merged line");
    assert!(
        merged["first"].is_string() && merged["last"].is_string(),
        "{merged}"
    );
    assert!(
        flood.len() < 12,
        "a few lines for the whole session: {flood:#?}"
    );
    // The neighbour: every call on record.
    let calm = session_of(&all, |e| {
        e["grants"]["dirs"].as_array().is_some_and(|d| d.is_empty())
    });
    let recorded = calm.iter().filter(|e| e["event"] == "call").count();
    assert_eq!(recorded, calls as usize, "{calm:#?}");
    assert!(size < 64 * 1024, "the stream is {size} bytes");
}
