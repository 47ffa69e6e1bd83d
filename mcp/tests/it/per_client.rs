//! `instances = "per-client"` (issue 42), the facade in this process
//! hosting the example counter with [`PerClient`](tickbox_mcp::PerClient)
//! as `tickbox mcp` does for such an entry: each client gets an instance of
//! its own, against one shared counter as the positive control, on a
//! session-based revision (two Python SDK sessions) and on 2026-07-28 (two
//! named clients); the stdio connection as a client; an expired session's
//! instance stopped with it; the caps per Tick and per host (the error
//! names the bound; an ended client makes room); idle instances stopped,
//! seen as their audit `end`; a hostile client opening sessions in a loop,
//! which keeps the instance count at the cap and the host's memory within
//! a bound; a session answering only to the token that opened it; each
//! instance counted in the Tick's metrics. A clients file whose token file
//! others may read (exit 2) stays in `cli/tests/it/per_client.rs`.

use crate::raw::Raw;
use crate::server::HttpServer;
use crate::{wasm, AuditLines, Hosting, Setup, PATIENCE};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tickbox_mcp::http::{HttpOptions, NamedClient};
use tickbox_mcp::{FacadeOptions, Grants, INSTANCE_CAP};
use tickbox_test_support::mcp_clients::{counter_wasm, python, run};
use tickbox_test_support::mcp_http::{delete, header, initialize_http, probe};
use tickbox_test_support::{eventually, sample, status_kib, Output};

/// The counter as `counter`, one instance per client within these bounds
/// (none: the defaults).
fn counter(max_instances: Option<usize>, idle: Option<Duration>) -> Hosting {
    Hosting {
        per_client: Some((max_instances, idle)),
        ..shared_counter()
    }
}

/// The counter as `counter`, one instance for every client.
fn shared_counter() -> Hosting {
    Hosting::shared(Some("counter"), wasm(&counter_wasm(), &Grants::default()))
}

/// The per-client counter (`max_instances` at most), its audit kept.
fn audited(max_instances: Option<usize>, idle: Option<Duration>) -> (Setup, Arc<AuditLines>) {
    let lines = Arc::new(AuditLines::default());
    let setup = Setup {
        audit: Some(lines.clone()),
        ..Setup::of(vec![counter(max_instances, idle)])
    };
    (setup, lines)
}

/// Serves `ticks` over HTTP with the default options.
fn serve(ticks: Vec<Hosting>) -> HttpServer {
    HttpServer::start_setup(Setup::of(ticks), |_| {})
}

/// One JSON-RPC request of `session`; its one answer.
pub(crate) fn request(server: &HttpServer, session: &str, method: &str, params: Value) -> Value {
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", session)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
    );
    assert_eq!(status, 200, "{method}: {m:?}");
    m.into_iter()
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("{method}: no answer"))
}

/// `increment` by `amount`: the counter's value after it, or the JSON-RPC error.
pub(crate) fn increment(server: &HttpServer, session: &str, amount: i64) -> Result<i64, Value> {
    let m = request(
        server,
        session,
        "tools/call",
        json!({"name": "increment", "arguments": {"amount": amount}}),
    );
    match m["result"]["structuredContent"]["value"].as_i64() {
        Some(v) => Ok(v),
        None => Err(m["error"].clone()),
    }
}

/// The counter's value as `session` reads it.
pub(crate) fn value(server: &HttpServer, session: &str) -> i64 {
    let m = request(
        server,
        session,
        "resources/read",
        json!({"uri": "tick://counter/state"}),
    );
    let text = m["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{m}"));
    let state: Value = serde_json::from_str(text).unwrap();
    state["data"]["value"].as_i64().unwrap()
}

/// Two Python SDK clients at once (`tests/mcp-clients/per_client.py`),
/// run to their end.
fn run_two_python_clients(mode: &str, url_a: &str, url_b: &str) -> Output {
    let mut cmd = Command::new(python());
    cmd.args(["per_client.py", mode, url_a, url_b]);
    run(cmd)
}

/// What each of two Python SDK clients read after the first incremented by 2.
fn two_python_clients(mode: &str, url_a: &str, url_b: &str) -> Value {
    let r = run_two_python_clients(mode, url_a, url_b);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", r.stdout))
}

#[test]
fn python_sdk_sessions_each_get_a_counter_of_their_own() {
    let server = serve(vec![counter(None, None)]);
    let seen = two_python_clients("legacy", &server.url(), &server.url());
    assert_eq!(
        seen,
        json!({"a": 2, "b": 0}),
        "each session its own counter"
    );

    // Positive control: the same clients of a shared counter see one value.
    let server = serve(vec![shared_counter()]);
    let seen = two_python_clients("legacy", &server.url(), &server.url());
    assert_eq!(seen, json!({"a": 2, "b": 2}), "a shared counter");
}

/// The JSON-RPC error of a first use refused at a cap: its code, and the
/// bound named in its message and data.
fn assert_at_cap(error: &Value, bound: &str, limit: u64) {
    assert_eq!(error["code"], INSTANCE_CAP, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("({bound} = {limit})")),
        "{message}"
    );
    assert_eq!(error["data"]["limit"], limit, "{error}");
}

/// An instance that fails to start: the client's error carries what the
/// Tick said escaped (here tool names with a CSI and a bidi override).
#[test]
fn an_instance_that_cannot_start_is_reported_with_the_ticks_text_escaped() {
    let dir = tickbox_test_support::TempDir::new("per-client-hostile");
    let started = dir.path("started");
    // The template starts as itself; every later start names two tools alike.
    let script = format!(
        "if [ -e '{m}' ]; then exec python3 '{t}' \"x\u{9b}2J\u{202e}\" \"x\u{9b}2J\u{202e}\"; \
         else touch '{m}'; exec python3 '{t}' echo; fi",
        m = started.display(),
        t = tickbox_test_support::tick("named.py"),
    );
    let launcher = crate::native(vec!["sh".into(), "-c".into(), script], &[]);
    let server = serve(vec![Hosting {
        per_client: Some((None, None)),
        ..Hosting::shared(Some("named"), launcher)
    }]);
    let session = initialize_http(&server, &[]);
    let m = request(
        &server,
        &session,
        "tools/call",
        json!({"name": "echo", "arguments": {}}),
    );
    let message = m["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{m}"));
    assert!(message.contains("could not start an instance"), "{message}");
    assert!(
        message.contains("\\x9b2J") && message.contains("\\u{202e}"),
        "{message}"
    );
    assert!(
        !message.contains(['\u{9b}', '\u{202e}']),
        "raw: {message:?}"
    );
}

#[test]
fn the_instance_caps_refuse_a_new_client_until_one_ends() {
    let server = serve(vec![counter(Some(2), None)]);
    let [a, b, c] = [(); 3].map(|_| initialize_http(&server, &[]));
    assert_eq!(increment(&server, &a, 1), Ok(1));
    assert_eq!(increment(&server, &b, 5), Ok(5), "each its own counter");
    let refused = increment(&server, &c, 1).unwrap_err();
    assert_at_cap(&refused, "max_instances", 2);
    // A load balancer hears of it: a new session would be refused too.
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("a Tick runs 2 per-client instances, its max_instances")
            && !text.contains("counter"),
        "{text}"
    );
    // The clients that hold instances keep them at the cap.
    assert_eq!(increment(&server, &a, 1), Ok(2));
    // An ended client (DELETE) makes room before its answer.
    assert_eq!(delete(&server, &a), 204);
    assert_eq!(probe(&server, "/readyz").0, 200, "room for one more");
    assert_eq!(increment(&server, &c, 1), Ok(1), "a fresh counter for c");
    assert_eq!(value(&server, &b), 5);

    // The host's cap counts every per-client Tick's instances.
    let setup = Setup {
        facade: FacadeOptions::default().max_instances(1),
        ..Setup::of(vec![counter(None, None)])
    };
    let server = HttpServer::start_setup(setup, |_| {});
    let [a, b] = [(); 2].map(|_| initialize_http(&server, &[]));
    assert_eq!(increment(&server, &a, 1), Ok(1));
    let refused = increment(&server, &b, 1).unwrap_err();
    assert_at_cap(
        &refused,
        "max_instances (the host's, at the top of the ticks file)",
        1,
    );
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains("1 per-client instances run in this host, its max_instances"),
        "{text}"
    );
    assert_eq!(delete(&server, &a), 204);
    assert_eq!(increment(&server, &b, 1), Ok(1));
}

#[test]
fn each_instance_is_counted_in_the_ticks_metrics() {
    let setup = Setup {
        metered: true,
        ..Setup::of(vec![counter(None, None)])
    };
    let server = HttpServer::start_setup(setup, |_| {});
    let page = server.page.as_ref().expect("served with /metrics");
    let live = r#"tickbox_ticks_live{tick="counter"}"#;
    let calls = r#"tickbox_calls_total{tick="counter",tool="increment",outcome="ok"}"#;
    // Positive control: the template alone, before any client used it.
    assert_eq!(sample(&page.scrape(), live), Some(1.0));
    let [a, b] = [(); 2].map(|_| initialize_http(&server, &[]));
    assert_eq!(increment(&server, &a, 1), Ok(1));
    assert_eq!(increment(&server, &b, 1), Ok(1));
    let scraped = page.scrape();
    assert_eq!(sample(&scraped, live), Some(3.0), "{scraped}");
    assert_eq!(sample(&scraped, calls), Some(2.0), "{scraped}");
    // A client's end is its instance's.
    assert_eq!(delete(&server, &a), 204);
    assert_eq!(sample(&page.scrape(), live), Some(2.0));
}

/// The Tick sessions that started and those that ended, by audit session id.
pub(crate) fn starts_and_ends(events: &[Value]) -> (Vec<String>, Vec<String>) {
    let of = |kind: &str| {
        events
            .iter()
            .filter(|e| e["event"] == kind)
            .map(|e| e["session"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    (of("start"), of("end"))
}

/// Whom each audit `start` so far was for (its `client`; null for a
/// shared instance or a template).
pub(crate) fn start_clients(audit: &AuditLines) -> Vec<Value> {
    let events = audit.events();
    let starts = events.iter().filter(|e| e["event"] == "start");
    starts.map(|e| e["client"].clone()).collect()
}

/// The audit's `start` events once there are `n` of them (exactly `n`).
pub(crate) fn starts_within(audit: &AuditLines, n: usize) -> Vec<String> {
    eventually(PATIENCE, || starts_and_ends(&audit.events()).0.len() >= n);
    let (starts, _) = starts_and_ends(&audit.events());
    assert_eq!(starts.len(), n, "{starts:?}");
    starts
}

#[test]
fn an_idle_instance_is_stopped_and_the_next_use_starts_a_fresh_one() {
    let (setup, audit) = audited(None, Some(Duration::from_secs(1)));
    let server = HttpServer::start_setup(setup, |_| {});
    let a = initialize_http(&server, &[]);
    assert_eq!(increment(&server, &a, 3), Ok(3));
    // The template's start, then a's instance's, which names a's session
    // (the template's names no client).
    let starts = starts_within(&audit, 2);
    let instance = starts[1].clone();
    let clients = start_clients(&audit);
    assert_eq!(clients, [Value::Null, json!(a)], "{:?}", audit.events());
    let stopped = eventually(PATIENCE, || {
        starts_and_ends(&audit.events()).1.contains(&instance)
    });
    assert!(stopped, "the idle instance ended: {:?}", audit.events());
    // Positive control: the template, in no client's use, is never idle-stopped.
    let (_, ends) = starts_and_ends(&audit.events());
    assert!(!ends.contains(&starts[0]), "{ends:?}");
    // The session lives on; its next use starts a new instance from zero.
    assert_eq!(value(&server, &a), 0);
    starts_within(&audit, 3);
}

#[test]
fn an_expired_session_takes_its_instance_with_it() {
    // Sessions idle 1.5 s expire; the instance's own idle timeout is the
    // default minutes, so only the session's end can stop it.
    let (setup, audit) = audited(None, None);
    let server = HttpServer::start_setup(setup, |o: &mut HttpOptions| {
        o.session_idle = Duration::from_millis(1500)
    });
    let a = initialize_http(&server, &[]);
    assert_eq!(increment(&server, &a, 2), Ok(2));
    let starts = starts_within(&audit, 2);
    let ended = eventually(PATIENCE, || {
        starts_and_ends(&audit.events()).1.contains(&starts[1])
    });
    assert!(
        ended,
        "the expired session's instance ended: {:?}",
        audit.events()
    );
    // The session is gone with it; a new client starts from zero.
    let (status, _, _) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &a)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    );
    assert_eq!(status, 404, "the session expired");
    let b = initialize_http(&server, &[]);
    assert_eq!(increment(&server, &b, 1), Ok(1));
}

/// The most the host's memory may grow while a hostile client starts and
/// ends instances in a loop: a leak of a small part of an instance per
/// loop would pass it within the loop's count.
const HOSTILE_GROWTH_KIB: u64 = 16 * 1024;

/// How many sessions the hostile client opens and ends.
const HOSTILE_LOOPS: usize = 120;

#[test]
fn a_client_opening_sessions_in_a_loop_stays_within_the_caps_and_a_memory_bound() {
    if !crate::alone(
        "per_client::a_client_opening_sessions_in_a_loop_stays_within_the_caps_and_a_memory_bound",
    ) {
        return;
    }
    let cap = 3;
    let (setup, audit) = audited(Some(cap), None);
    let server = HttpServer::start_setup(setup, |_| {});
    let rss = || status_kib(std::process::id(), "VmRSS");
    // Warm: one instance started and ended, so the loop's first start
    // costs what every later one does.
    let first = initialize_http(&server, &[]);
    assert_eq!(increment(&server, &first, 1), Ok(1));
    assert_eq!(delete(&server, &first), 204);
    let before = rss();
    // Sessions that are never ended hold instances up to the cap; the rest
    // are refused.
    let held: Vec<String> = (0..cap + 2)
        .map(|_| initialize_http(&server, &[]))
        .collect();
    let outcomes: Vec<_> = held.iter().map(|s| increment(&server, s, 1)).collect();
    assert!(outcomes[..cap].iter().all(|o| o == &Ok(1)), "{outcomes:?}");
    for refused in &outcomes[cap..] {
        assert_at_cap(refused.as_ref().unwrap_err(), "max_instances", cap as u64);
    }
    // With the cap taken, the loop's own sessions get no instance ...
    for _ in 0..HOSTILE_LOOPS / 2 {
        let s = initialize_http(&server, &[]);
        assert!(increment(&server, &s, 1).is_err());
        assert_eq!(delete(&server, &s), 204);
    }
    // ... and once one held session ends, each loop starts and ends one.
    assert_eq!(delete(&server, &held[0]), 204);
    for _ in 0..HOSTILE_LOOPS / 2 {
        let s = initialize_http(&server, &[]);
        assert_eq!(increment(&server, &s, 1), Ok(1));
        assert_eq!(delete(&server, &s), 204);
    }
    let after = rss();
    // Every instance ever started: the template, the warm one, the held
    // ones and the loop's; and every one ended: the warm one, the first
    // held one and each loop's (each before its DELETE was answered).
    starts_within(&audit, 1 + 1 + cap + HOSTILE_LOOPS / 2);
    let all_ended = eventually(PATIENCE, || {
        starts_and_ends(&audit.events()).1.len() >= 2 + HOSTILE_LOOPS / 2
    });
    assert!(all_ended, "{:?}", starts_and_ends(&audit.events()).1);
    // At no point did more than the cap of them run (the template, first,
    // is not counted).
    let mut running = 0usize;
    let mut most = 0usize;
    for e in audit.events().iter().skip(1) {
        match e["event"].as_str() {
            Some("start") => running += 1,
            Some("end") => running = running.saturating_sub(1),
            _ => {}
        }
        most = most.max(running);
    }
    assert_eq!(most, cap, "per-client instances running at once, at most");
    assert!(
        after.saturating_sub(before) < HOSTILE_GROWTH_KIB,
        "the host grew from {before} KiB to {after} KiB"
    );
}

/// The tokens of the named clients `alice` and `bob`.
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

/// Named clients `alice` and `bob` (a clients file's lines), each with
/// its own token.
fn named_clients(o: &mut HttpOptions) {
    o.clients = [("alice", ALICE), ("bob", BOB)]
        .map(|(name, token)| NamedClient {
            name: name.into(),
            token: token.into(),
        })
        .to_vec();
}

#[test]
fn a_named_client_cannot_hold_every_session_and_keep_another_out() {
    use tickbox_mcp::http::MAX_SESSIONS_PER_CLIENT;
    use tickbox_test_support::mcp_http::{try_initialize, Endpoint};
    let server = HttpServer::start_setup(Setup::of(vec![shared_counter()]), named_clients);
    let as_client = |token: &str| Endpoint {
        addr: server.addr.clone(),
        token: Some(token.into()),
    };
    let (alice, bob) = (as_client(ALICE), as_client(BOB));
    for _ in 0..MAX_SESSIONS_PER_CLIENT {
        initialize_http(&alice, &[]);
    }
    // None of alice's is idle long enough to make room: refused, naming
    // the cap per client.
    let (status, text) = try_initialize(&alice);
    assert_eq!(status, 503, "{text}");
    let cap = format!(
        "client `alice` has {MAX_SESSIONS_PER_CLIENT} MCP sessions open (the limit per client)"
    );
    assert!(text.contains(&cap), "{text}");
    // Positive control: the other client still gets in, while the host
    // is under its overall cap.
    initialize_http(&bob, &[]);
}

/// Sessions opened at once are counted against the caps one by one: a
/// burst of one client's `initialize` requests opens exactly its cap.
#[test]
fn a_burst_of_initializes_opens_no_more_sessions_than_the_cap() {
    use tickbox_mcp::http::MAX_SESSIONS_PER_CLIENT;
    use tickbox_test_support::mcp_http::{try_initialize, Endpoint};
    let server = HttpServer::start_setup(Setup::of(vec![shared_counter()]), named_clients);
    let alice = Endpoint {
        addr: server.addr.clone(),
        token: Some(ALICE.into()),
    };
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let burst: Vec<_> = (0..2 * MAX_SESSIONS_PER_CLIENT)
            .map(|_| s.spawn(|| try_initialize(&alice).0))
            .collect();
        burst.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let opened = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(opened, MAX_SESSIONS_PER_CLIENT, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}"
    );
}

#[test]
fn a_sessionless_request_is_audited_as_its_client_whatever_session_header_it_sends() {
    use tickbox_test_support::mcp_http::Endpoint;
    let (setup, audit) = audited(None, None);
    let server = HttpServer::start_setup(setup, named_clients);
    let alice = Endpoint {
        addr: server.addr.clone(),
        token: Some(ALICE.into()),
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let call = |id: u64, headers: &[(&str, &str)]| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "increment", "arguments": {"amount": 1}, "_meta": meta}});
        let mut headers = headers.to_vec();
        // 2026-07-28 repeats the version, method and tool in headers.
        headers.extend([
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "increment"),
        ]);
        let (status, _, answer) = alice.post("/mcp", &headers, &body);
        assert_eq!(status, 200, "{answer:?}");
    };
    // Positive control: without the header, alice by her token.
    call(1, &[]);
    call(2, &[("Mcp-Session-Id", "bob")]);
    let sessions: Vec<Value> = audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "call")
        .map(|e| e["mcp"]["session"].clone())
        .collect();
    assert_eq!(sessions, [json!("alice"), json!("alice")]);
}

#[test]
fn named_clients_on_2026_07_28_each_get_a_counter_of_their_own() {
    let (setup, audit) = audited(None, None);
    let server = HttpServer::start_setup(setup, named_clients);
    let url_as = |token: &str| format!("http://{}/mcp?token={token}", server.addr);
    // The SDK's default client speaks 2026-07-28: no session, the token
    // names the client.
    let seen = two_python_clients("default", &url_as(ALICE), &url_as(BOB));
    assert_eq!(
        seen,
        json!({"a": 2, "b": 0}),
        "each named client its own counter"
    );
    // Positive control: two connections with alice's token are one client,
    // whose counter kept its 2.
    let seen = two_python_clients("default", &url_as(ALICE), &url_as(ALICE));
    assert_eq!(seen, json!({"a": 4, "b": 4}), "one client, one counter");
    // The audit names the client where a session id would be.
    let calls: Vec<Value> = audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "call")
        .collect();
    assert!(
        calls.iter().any(|c| c["mcp"]["session"] == "alice")
            && calls.iter().all(|c| c["mcp"]["session"] != "bob"),
        "alice called, bob only read: {calls:?}"
    );
    // The server's own token names no client: 2026-07-28 has no session to
    // be one, so a per-client Tick refuses it.
    let token = server.token.clone().unwrap();
    let r = run_two_python_clients("default", &url_as(&token), &url_as(&token));
    assert_ne!(r.code, 0, "{}", r.stdout);
    assert!(r.stderr.contains("names no client"), "{}", r.stderr);
}

#[test]
fn a_session_answers_only_to_the_token_that_opened_it() {
    let server = HttpServer::start_setup(Setup::of(vec![counter(None, None)]), named_clients);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "alice", "version": "0"}}});
    let (status, headers, _) = server.post_as(Some(ALICE), "/mcp", &[], &init);
    assert_eq!(status, 200);
    let session = header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_string();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let with = [("Mcp-Session-Id", session.as_str())];
    // Bob's token, and the server's, are valid, but not for alice's session.
    for other in [BOB, server.token.as_deref().unwrap()] {
        let (status, _, _) = server.post_as(Some(other), "/mcp", &with, &ping);
        assert_eq!(status, 404, "another token on alice's session");
    }
    // Positive control: alice's own token.
    let (status, _, m) = server.post_as(Some(ALICE), "/mcp", &with, &ping);
    assert_eq!(status, 200, "{m:?}");
}

#[test]
fn over_stdio_the_connection_is_the_client_and_a_subscription_starts_its_instance() {
    let (setup, audit) = audited(None, None);
    let mut raw = Raw::start_setup(setup);
    raw.initialize("2025-11-25");
    // The template answers the listing: no instance is started for it.
    let listed = raw.request(1, "tools/list", json!({}));
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "increment")),
        "{listed}"
    );
    let template = starts_within(&audit, 1);
    // A subscription is a use: it starts the connection's own instance,
    // whose changes it then follows.
    let r = raw.request(
        2,
        "resources/subscribe",
        json!({"uri": "tick://counter/state"}),
    );
    assert!(r.get("result").is_some(), "{r}");
    starts_within(&audit, 2);
    let r = raw.call(3, "increment", json!({"amount": 4}));
    assert_eq!(r["structuredContent"]["value"], 4, "{r}");
    let updated =
        (0..64).any(|_| raw.next_message()["method"] == "notifications/resources/updated");
    assert!(updated, "the subscription follows the instance");
    let (served, log) = raw.close();
    assert!(served.is_ok(), "{served:?}: {log}");
    // The client's end stopped its instance, and the host's the template.
    let ended = eventually(PATIENCE, || {
        let (starts, ends) = starts_and_ends(&audit.events());
        starts.len() == 2 && starts.iter().all(|s| ends.contains(s))
    });
    assert!(ended, "{:?} ({template:?})", audit.events());
}
