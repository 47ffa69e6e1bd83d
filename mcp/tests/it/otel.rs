//! OpenTelemetry over OTLP/HTTP from the facade in this process, into a
//! real receiver on loopback (`tickbox_test_support::otel`): the exporter
//! the CLI starts from the `OTEL_*` variables (here configured directly,
//! with a short batch delay and metric interval so a test waits little),
//! sending through the app layer's client, observing the Tick's audit
//! stream as `tickbox mcp` wires it.
//!
//! - MCP calls over Streamable HTTP and over stdio: a session span and
//!   call spans with the MCP conventions' names and attributes, the calls
//!   children of the session; metrics arrive (`mcp.server.operation.duration`,
//!   `mcp.server.session.duration` when a session ends);
//! - a hostile tool name arrives escaped;
//! - a receiver that stalls or is stopped never slows calls; a stopped one
//!   is one warning, and the spans lost meanwhile are counted.
//!
//! What the binary does (reading the variables, exporting before a
//! one-shot command exits, no exporter without them) stays in
//! `cli/tests/it/otel.rs`.

use crate::raw::Raw;
use crate::server::HttpServer;
use crate::{logs, shifty, PATIENCE};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_app::otlp::HyperPost;
use tickbox_host::SessionConfig;
use tickbox_mcp::http::{Drained, HttpOptions};
use tickbox_protocol::text::{escape, is_unsafe};
use tickbox_sandbox::Launcher;
use tickbox_telemetry::audit::{Audit, Origin};
use tickbox_telemetry::otel::{Endpoint, Otel, OtelConfig, THREAD_NAME};
use tickbox_telemetry::outcome::CallOutcome;
use tickbox_test_support::mcp_http::{call_tool, delete, initialize_http, initialize_http_at};
use tickbox_test_support::otel::{
    attr, histogram_points, named, point_with, string_attr, Receiver,
};
use tickbox_test_support::{assert_inert_by, eventually, shows_escaped, threads};

/// The exporter `tickbox` starts when `OTEL_EXPORTER_OTLP_ENDPOINT` is
/// `endpoint` (both signals), with a short batch delay and metric
/// interval and `service.name` `tickbox-under-test`; `tweak` changes it.
fn exporter(endpoint: &str, tweak: impl FnOnce(&mut OtelConfig)) -> Arc<Otel> {
    let signal = |path| Endpoint::with_signal(endpoint, path).expect("an endpoint");
    let mut config = OtelConfig::new(Some(signal("v1/traces")), Some(signal("v1/metrics")));
    config.span_delay = Duration::from_millis(100);
    config.metric_interval = Duration::from_millis(200);
    config.resource = vec![("service.name".into(), "tickbox-under-test".into())];
    tweak(&mut config);
    Otel::start(config, Box::new(HyperPost::default())).expect("the exporter starts")
}

/// shifty.py, its audit stream (with no file) observed by `otel`, as
/// `tickbox ORIGIN` wires a Tick when telemetry is on.
fn observed(otel: &Arc<Otel>, origin: Origin) -> Launcher {
    shifty(&[]).audited(Some(Audit::new(origin, vec![]).observed_by(otel.clone())))
}

/// Over HTTP, shifty observed by a new exporter to `receiver`.
fn http_server(receiver: &Receiver, options: impl FnOnce(&mut HttpOptions)) -> HttpServer {
    let otel = exporter(&receiver.endpoint(), |_| {});
    HttpServer::start_with(observed(&otel, Origin::Mcp), options)
}

/// Over HTTP: two `tools/call echo` and a failing `fail_big` become
/// server spans named `tools/call TOOL` with the MCP attributes (the
/// session id the client got, each request's id, `tcp`), children of the
/// Tick's session span, which arrives when the host drains; the failing
/// one has `error.type` `tool_error` and the Tick's message, cut to its
/// bound, as its status. `mcp.server.operation.duration` counts the calls.
#[test]
fn mcp_http_calls_are_server_spans_under_the_session_span_and_metrics() {
    let receiver = Receiver::start();
    let mut server = http_server(&receiver, |_| {});
    let session = initialize_http(&server, &[]);
    for id in [11, 12] {
        let r = call_tool(&server, &session, id, "echo", json!({"n": id}));
        assert_eq!(r["isError"], false, "{r}");
    }
    let r = call_tool(&server, &session, 13, "fail_big", json!({"bytes": 5000}));
    assert_eq!(r["isError"], true, "{r}");

    let spans = receiver.spans_until("three call spans", |s| {
        named(s, "tools/call echo").len() == 2 && named(s, "tools/call fail_big").len() == 1
    });
    let echo = named(&spans, "tools/call echo");
    let mut ids = Vec::new();
    for s in &echo {
        assert_eq!(s["kind"], "SPAN_KIND_SERVER", "{s}");
        assert_eq!(string_attr(s, "mcp.method.name"), Some("tools/call"), "{s}");
        assert_eq!(string_attr(s, "gen_ai.tool.name"), Some("echo"), "{s}");
        assert_eq!(
            string_attr(s, "gen_ai.operation.name"),
            Some("execute_tool"),
            "{s}"
        );
        assert_eq!(
            string_attr(s, "mcp.session.id"),
            Some(session.as_str()),
            "{s}"
        );
        assert_eq!(string_attr(s, "network.transport"), Some("tcp"), "{s}");
        assert_eq!(string_attr(s, "network.protocol.name"), Some("http"), "{s}");
        assert_eq!(attr(s, "error.type"), None, "{s}");
        ids.push(string_attr(s, "jsonrpc.request.id").unwrap().to_string());
    }
    ids.sort();
    assert_eq!(ids, ["11", "12"]);
    let failed = named(&spans, "tools/call fail_big")[0];
    assert_eq!(
        string_attr(failed, "error.type"),
        Some("tool_error"),
        "{failed}"
    );
    assert_eq!(failed["status"]["code"], "STATUS_CODE_ERROR", "{failed}");
    let message = failed["status"]["message"].as_str().unwrap();
    assert!(
        message.chars().count() <= tickbox_telemetry::otel::MAX_OTEL_TEXT_CHARS + 1,
        "bounded: {} chars",
        message.chars().count()
    );
    assert!(message.ends_with('…'), "cut, and says so: {message}");

    // Metrics, from the same events.
    receiver.metrics_until(
        "two echo calls in mcp.server.operation.duration",
        "mcp.server.operation.duration",
        |points| {
            points.iter().any(|p| {
                p["count"] == "2"
                    && p["attributes"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|kv| kv["value"]["stringValue"] == "echo"))
            })
        },
    );
    let resource = &receiver.requests()[0]["message"];
    assert!(
        resource.to_string().contains("tickbox-under-test"),
        "the configured service.name: {resource}"
    );

    // The session span ends with the Tick, when the host drains.
    server.drain();
    assert_eq!(server.wait_exit(), Drained::Finished);
    let spans = receiver.spans_until("the session span", |s| !named(s, "tick session").is_empty());
    let sessions = named(&spans, "tick session");
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    let tick_session = sessions[0];
    assert_eq!(string_attr(tick_session, "tickbox.origin"), Some("mcp"));
    for s in named(&spans, "tools/call echo") {
        assert_eq!(s["traceId"], tick_session["traceId"], "one trace");
        assert_eq!(
            s["parentSpanId"], tick_session["spanId"],
            "a child of the session"
        );
    }
    assert!(
        !logs().text().contains("cannot export"),
        "no export failed: {}",
        logs().text()
    );
}

/// Over stdio: a call is a server span with `pipe`, the request's id and
/// no MCP session id (stdio has none), and the session span is sent when
/// the client leaves. While it runs, the exporter's thread is there.
#[test]
fn mcp_stdio_calls_are_spans_too_and_the_exporter_is_a_thread() {
    let receiver = Receiver::start();
    let otel = exporter(&receiver.endpoint(), |_| {});
    let mut mcp = Raw::start(observed(&otel, Origin::Mcp));
    mcp.initialize("2025-11-25");
    let r = mcp.call(5, "echo", json!({"a": 1}));
    assert_eq!(r["isError"], false, "{r}");
    let ours = threads(std::process::id());
    assert!(ours.iter().any(|t| t == THREAD_NAME), "{ours:?}");
    let (served, log) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {log}");
    let spans = receiver.spans_until("the call and the session", |s| {
        !named(s, "tools/call echo").is_empty() && !named(s, "tick session").is_empty()
    });
    let call = named(&spans, "tools/call echo")[0];
    let session = named(&spans, "tick session")[0];
    assert_eq!(string_attr(call, "network.transport"), Some("pipe"));
    assert_eq!(string_attr(call, "jsonrpc.request.id"), Some("5"));
    assert_eq!(
        attr(call, "mcp.session.id"),
        None,
        "stdio has no MCP session"
    );
    assert_eq!(call["parentSpanId"], session["spanId"]);
    // The audit session id ties the spans to the audit stream's lines.
    assert!(string_attr(session, "tickbox.session.id").is_some_and(|s| !s.is_empty()));
    assert_eq!(
        string_attr(call, "tickbox.session.id"),
        string_attr(session, "tickbox.session.id")
    );
}

/// A tool name with terminal controls, a line break, bidi and separator
/// characters, and quotes (the metrics test's, which MCP withholds: a
/// live client calls it by its own name, straight through the session).
const HOSTILE_TOOL: &str =
    "x\"} 1e9\nforged\r\n\x1b]2;pwned\x07\u{9b}31m\u{202e}\u{2028}\u{e0041}\\";

/// A hostile tool name, called through the session as a live client
/// calls it, reaches the receiver only escaped: in the span's name and in
/// `gen_ai.tool.name`, all there (the positive control), and no raw
/// unsafe character anywhere in the request.
#[test]
fn a_hostile_tool_name_arrives_escaped() {
    let receiver = Receiver::start();
    let otel = exporter(&receiver.endpoint(), |_| {});
    let launcher = observed(&otel, Origin::Cli);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let session = launcher
            .open(SessionConfig::default())
            .await
            .expect("shifty starts");
        let call = |tool: &str, args| {
            session
                .descriptor()
                .unwrap()
                .prepare(tool, args)
                .unwrap_or_else(|e| panic!("{tool:?}: {e}"))
        };
        let reshape = call("reshape", json!({"tools": [HOSTILE_TOOL]}));
        let r = session.call(&reshape).await;
        assert!(matches!(r, CallOutcome::Ok(_)), "reshaped: {r:?}");
        session.describe().await.expect("the new catalog");
        let hostile = call(HOSTILE_TOOL, json!({"n": 1}));
        let r = session.call(&hostile).await;
        assert!(matches!(r, CallOutcome::Ok(_)), "the hostile call: {r:?}");
        session.shutdown().await;
    });
    let shown = escape(HOSTILE_TOOL);
    let name = format!("execute_tool {shown}");
    let spans = receiver.spans_until("the hostile call's span", |s| !named(s, &name).is_empty());
    let span = named(&spans, &name)[0];
    assert_eq!(string_attr(span, "gen_ai.tool.name"), Some(shown.as_str()));
    let mut all = String::new();
    for r in receiver.requests() {
        let raw = r["raw"].as_str().unwrap();
        assert_inert_by("an OTLP request", raw, is_unsafe);
        assert!(!raw.contains("\nforged"), "no raw line break");
        all.push_str(raw);
    }
    assert!(shows_escaped(&all), "the bidi override, escaped: {all}");
}

/// A receiver that accepts connections and never answers: calls keep
/// being answered while the exporter waits out its 30 s timeout, all of
/// them in less time than one export takes to fail.
#[test]
fn a_stalled_receiver_never_slows_calls() {
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", stalled.local_addr().unwrap());
    let otel = exporter(&endpoint, |c| c.timeout = Duration::from_secs(30));
    let mut mcp = Raw::start(observed(&otel, Origin::Mcp));
    mcp.initialize("2025-11-25");
    let started = Instant::now();
    for id in 1..=200 {
        let r = mcp.call(id, "echo", json!({"id": id}));
        assert_eq!(r["isError"], false, "{r}");
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "200 calls took {took:?}: longer than one stalled export (30 s)"
    );
    let (served, log) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {log}");
    drop(stalled);
}

/// The warning a failed export logs.
const CANNOT_EXPORT: &str = "cannot export telemetry over OTLP";

/// A receiver stopped mid-run: calls go on being answered, the failures
/// are one warning (not one per export), and once a receiver is back on
/// the same port the spans lost meanwhile are counted
/// (`tickbox.telemetry.dropped`) and new spans arrive.
#[test]
fn a_stopped_receiver_is_one_warning_and_its_losses_are_counted() {
    let mut receiver = Receiver::start();
    let port = receiver.port;
    let otel = exporter(&receiver.endpoint(), |c| {
        c.span_delay = Duration::from_millis(20)
    });
    let server = HttpServer::start_with(observed(&otel, Origin::Mcp), |_| {});
    let session = initialize_http(&server, &[]);
    call_tool(&server, &session, 1, "echo", json!({}));
    receiver.spans_until("the first call (the positive control)", |s| {
        named(s, "tools/call echo").len() == 1
    });
    receiver.stop();
    // Calls while nobody receives, each answered; waiting for the warning
    // (eventually) makes sure failed exports happened.
    let mut id = 2;
    let warned = eventually(PATIENCE, || {
        call_tool(&server, &session, id, "echo", json!({}));
        id += 1;
        logs().text().contains(CANNOT_EXPORT)
    });
    assert!(warned, "{}", logs().text());
    for _ in 0..20 {
        call_tool(&server, &session, id, "echo", json!({}));
        id += 1;
    }
    let receiver = Receiver::start_on(port);
    let mut last = Vec::new();
    let counted = eventually(tickbox_test_support::otel::PATIENCE, || {
        last = receiver.latest_metrics();
        last.iter()
            .find(|m| m["name"] == "tickbox.telemetry.dropped")
            .and_then(|m| m["sum"]["dataPoints"][0]["asInt"].as_str())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    });
    assert!(counted, "tickbox.telemetry.dropped: {last:#?}");
    call_tool(&server, &session, id, "echo", json!({"after": true}));
    receiver.spans_until("a call after the receiver is back", |s| {
        !named(s, "tools/call echo").is_empty()
    });
    let warnings = logs().text().matches(CANNOT_EXPORT).count();
    assert_eq!(warnings, 1, "one rate-limited warning: {}", logs().text());
}

/// Over HTTP: the facade's own tools (`tick_state`, `tick_screen`) and a
/// call of a tool the facade does not have are server spans like a Tick
/// call's, and every span and operation-duration point carries the
/// version the session negotiated. `mcp.server.session.duration` gets a
/// point when a session ends, with its version and transport: none while
/// both sessions are open (the negative control, after the calls' points
/// arrived), one when the client deletes its session, the other's when
/// the host stops.
#[test]
fn facade_tools_are_spans_and_an_http_session_is_timed_when_it_ends() {
    let receiver = Receiver::start();
    let mut server = http_server(&receiver, |_| {});
    let old = initialize_http_at(&server, &[], "2025-06-18");
    let new = initialize_http_at(&server, &[], "2025-11-25");
    let r = call_tool(&server, &old, 1, "tick_state", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let r = call_tool(&server, &old, 2, "tick_screen", json!({"rows": "x"}));
    assert_eq!(r["isError"], true, "a refused argument: {r}");
    let r = call_tool(&server, &new, 3, "echo", json!({"n": 3}));
    assert_eq!(r["isError"], false, "{r}");
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &new)],
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "no_such_tool", "arguments": {}}}),
    );
    assert_eq!(status, 200);
    assert_eq!(m[0]["error"]["code"], -32602, "{m:?}");

    let spans = receiver.spans_until("four tools/call spans", |s| {
        named(s, "tools/call tick_state").len() == 1
            && named(s, "tools/call tick_screen").len() == 1
            && named(s, "tools/call echo").len() == 1
            && named(s, "tools/call").len() == 1
    });
    let state = named(&spans, "tools/call tick_state")[0];
    assert_eq!(state["kind"], "SPAN_KIND_SERVER", "{state}");
    for (k, v) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "tick_state"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.protocol.version", "2025-06-18"),
        ("mcp.session.id", old.as_str()),
        ("jsonrpc.request.id", "1"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
    ] {
        assert_eq!(string_attr(state, k), Some(v), "{k}: {state}");
    }
    assert_eq!(attr(state, "error.type"), None, "{state}");
    let screen = named(&spans, "tools/call tick_screen")[0];
    assert_eq!(string_attr(screen, "error.type"), Some("tool_error"));
    assert_eq!(
        string_attr(screen, "tickbox.call.outcome"),
        Some("invalid_arguments")
    );
    assert_eq!(screen["status"]["code"], "STATUS_CODE_ERROR", "{screen}");
    let echo = named(&spans, "tools/call echo")[0];
    assert_eq!(
        string_attr(echo, "mcp.protocol.version"),
        Some("2025-11-25"),
        "a Tick call carries its session's version: {echo}"
    );
    let unknown = named(&spans, "tools/call")[0];
    assert_eq!(string_attr(unknown, "error.type"), Some("-32602"));
    assert_eq!(
        string_attr(unknown, "gen_ai.tool.name"),
        Some("no_such_tool")
    );
    // The other methods the facade serves are server spans too.
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &old)],
        &json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
    );
    assert_eq!((status, &m[0]["result"]), (200, &json!({})), "{m:?}");
    let initialized = receiver.spans_until("both initialize spans and the ping", |s| {
        named(s, "initialize").len() == 2 && named(s, "ping").len() == 1
    });
    let ping = named(&initialized, "ping")[0];
    assert_eq!(ping["kind"], "SPAN_KIND_SERVER", "{ping}");
    assert_eq!(string_attr(ping, "mcp.method.name"), Some("ping"), "{ping}");
    assert_eq!(string_attr(ping, "jsonrpc.request.id"), Some("9"), "{ping}");
    assert_eq!(attr(ping, "error.type"), None, "{ping}");
    let versions: Vec<_> = named(&initialized, "initialize")
        .iter()
        .map(|s| string_attr(s, "mcp.protocol.version"))
        .collect();
    assert!(versions.contains(&Some("2025-06-18")), "{versions:?}");
    assert!(versions.contains(&Some("2025-11-25")), "{versions:?}");
    let (_, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &new)],
        &json!({"jsonrpc": "2.0", "id": 8, "method": "resources/read",
                "params": {"uri": "tick://nowhere/state"}}),
    );
    assert!(m[0]["error"]["code"].is_i64(), "{m:?}");
    let spans = receiver.spans_until("the resources/read span", |s| {
        !named(s, "resources/read").is_empty()
    });
    let read = named(&spans, "resources/read")[0];
    assert_eq!(
        string_attr(read, "error.type").map(str::to_string),
        Some(m[0]["error"]["code"].to_string()),
        "{read}"
    );
    assert_eq!(attr(read, "gen_ai.operation.name"), None, "not a tool call");
    assert_eq!(
        string_attr(read, "mcp.protocol.version"),
        Some("2025-11-25")
    );

    // A Tick tool refused before it was sent (the catalog changed since
    // the session listed it) is a span too, though no Tick call was made.
    let r = call_tool(&server, &old, 5, "reshape", json!({"tools": ["extra_one"]}));
    assert_eq!(r["isError"], false, "{r}");
    let relisted = eventually(PATIENCE, || {
        let (_, _, m) = server.post(
            "/mcp",
            &[("Mcp-Session-Id", &old)],
            &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
        );
        m.iter().any(|m| m.to_string().contains("extra_one"))
    });
    assert!(relisted, "the new catalog is seen");
    let r = call_tool(&server, &new, 7, "echo", json!({"n": 7}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["error"]["kind"], "catalog_changed");
    let spans = receiver.spans_until("the refused call's span", |s| {
        named(s, "tools/call echo")
            .iter()
            .any(|e| string_attr(e, "jsonrpc.request.id") == Some("7"))
    });
    let refused = named(&spans, "tools/call echo")
        .into_iter()
        .find(|e| string_attr(e, "jsonrpc.request.id") == Some("7"))
        .unwrap();
    assert_eq!(
        string_attr(refused, "tickbox.call.outcome"),
        Some("catalog_changed"),
        "{refused}"
    );
    assert_eq!(string_attr(refused, "error.type"), Some("tool_error"));
    assert_eq!(
        attr(refused, "tickbox.tool"),
        None,
        "never sent to the Tick"
    );

    // Every call's point has arrived, and no session has ended: none.
    let metrics = receiver.metrics_until(
        "the calls' operation points",
        "mcp.server.operation.duration",
        |p| {
            point_with(p, "gen_ai.tool.name", "tick_state").is_some()
                && point_with(p, "gen_ai.tool.name", "echo").is_some()
        },
    );
    let ops = histogram_points(&metrics, "mcp.server.operation.duration");
    let state_point = point_with(&ops, "gen_ai.tool.name", "tick_state").unwrap();
    assert_eq!(
        string_attr(state_point, "mcp.protocol.version"),
        Some("2025-06-18")
    );
    assert!(
        !ops.iter().any(|p| p.to_string().contains("no_such_tool")),
        "a tool the client made up is no series: {ops:#?}"
    );
    assert!(
        metrics
            .iter()
            .any(|m| m["name"] == "mcp.server.session.duration"),
        "the instrument is there: {metrics:#?}"
    );
    assert_eq!(
        histogram_points(&metrics, "mcp.server.session.duration"),
        Vec::<Value>::new(),
        "no session has ended"
    );

    // The client ends one session.
    assert_eq!(delete(&server, &old), 204);
    let metrics = receiver.metrics_until(
        "the deleted session's duration",
        "mcp.server.session.duration",
        |p| !p.is_empty(),
    );
    let sessions = histogram_points(&metrics, "mcp.server.session.duration");
    assert_eq!(sessions.len(), 1, "only the deleted one: {sessions:#?}");
    let ended = &sessions[0];
    assert_eq!(ended["count"], "1", "{ended}");
    assert_eq!(
        string_attr(ended, "mcp.protocol.version"),
        Some("2025-06-18")
    );
    assert_eq!(string_attr(ended, "network.transport"), Some("tcp"));
    assert_eq!(string_attr(ended, "network.protocol.name"), Some("http"));
    assert_eq!(attr(ended, "error.type"), None, "{ended}");
    assert!(ended["sum"].as_f64().unwrap() > 0.0, "{ended}");
    assert_eq!(
        string_attr(&sessions[0], "mcp.protocol.version"),
        Some("2025-06-18"),
        "not the open one"
    );

    // The other ends with the host.
    server.drain();
    assert_eq!(server.wait_exit(), Drained::Finished);
    let metrics = receiver.metrics_until(
        "the open session's duration at the host's stop",
        "mcp.server.session.duration",
        |p| p.len() == 2,
    );
    let sessions = histogram_points(&metrics, "mcp.server.session.duration");
    let at_stop = point_with(&sessions, "mcp.protocol.version", "2025-11-25")
        .unwrap_or_else(|| panic!("{sessions:#?}"));
    assert_eq!(at_stop["count"], "1", "{at_stop}");
    // The facade's spans are children of the Tick's session span.
    let spans = receiver.spans_until("the session span", |s| !named(s, "tick session").is_empty());
    let tick_session = named(&spans, "tick session")[0];
    let state = named(&spans, "tools/call tick_state")[0];
    assert_eq!(state["parentSpanId"], tick_session["spanId"]);
}

/// Over stdio: `tick_state` is a span with `pipe` and the negotiated
/// version; `mcp.server.session.duration` has no point while the client
/// is there (after the call's point arrived) and one, `pipe`, with the
/// version, when it leaves.
#[test]
fn a_stdio_session_is_timed_when_its_client_leaves() {
    let receiver = Receiver::start();
    let otel = exporter(&receiver.endpoint(), |_| {});
    let mut mcp = Raw::start(observed(&otel, Origin::Mcp));
    mcp.initialize("2025-06-18");
    let r = mcp.call(7, "tick_state", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let metrics = receiver.metrics_until(
        "the call's operation point",
        "mcp.server.operation.duration",
        |p| point_with(p, "gen_ai.tool.name", "tick_state").is_some(),
    );
    assert_eq!(
        histogram_points(&metrics, "mcp.server.session.duration"),
        Vec::<Value>::new(),
        "the client is still there"
    );
    let (served, log) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {log}");
    let metrics = receiver.metrics_until(
        "the session's duration at exit",
        "mcp.server.session.duration",
        |p| !p.is_empty(),
    );
    let sessions = histogram_points(&metrics, "mcp.server.session.duration");
    assert_eq!(sessions.len(), 1, "{metrics:#?}");
    assert_eq!(sessions[0]["count"], "1");
    assert_eq!(
        string_attr(&sessions[0], "mcp.protocol.version"),
        Some("2025-06-18")
    );
    assert_eq!(string_attr(&sessions[0], "network.transport"), Some("pipe"));
    assert_eq!(attr(&sessions[0], "network.protocol.name"), None);
    let spans = receiver.spans_until("the tick_state span", |s| {
        !named(s, "tools/call tick_state").is_empty()
    });
    let state = named(&spans, "tools/call tick_state")[0];
    assert_eq!(string_attr(state, "network.transport"), Some("pipe"));
    assert_eq!(string_attr(state, "jsonrpc.request.id"), Some("7"));
    assert_eq!(
        string_attr(state, "mcp.protocol.version"),
        Some("2025-06-18")
    );
}

/// An HTTP session that expires (idle past its bound) ends like a deleted
/// one: a point of `mcp.server.session.duration`, at least the idle bound
/// long.
#[test]
fn an_expired_http_session_is_timed_too() {
    let receiver = Receiver::start();
    let server = http_server(&receiver, |o| o.session_idle = Duration::from_millis(1500));
    let _session = initialize_http_at(&server, &[], "2025-11-25");
    let metrics = receiver.metrics_until(
        "the expired session's duration",
        "mcp.server.session.duration",
        |p| !p.is_empty(),
    );
    let sessions = histogram_points(&metrics, "mcp.server.session.duration");
    assert_eq!(sessions.len(), 1, "{sessions:#?}");
    assert_eq!(
        string_attr(&sessions[0], "mcp.protocol.version"),
        Some("2025-11-25")
    );
    let lasted = sessions[0]["sum"].as_f64().unwrap();
    assert!(lasted >= 1.4, "idle for its bound first: {lasted}");
}
