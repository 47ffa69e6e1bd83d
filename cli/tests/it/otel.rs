//! OpenTelemetry over OTLP/HTTP, through the real binary, into a receiver
//! the test starts on loopback: `tests/otel/receiver.py`, which decodes
//! every request with the official OTLP classes (PyPI's
//! `opentelemetry-proto`, pinned in `tests/otel/requirements.txt`,
//! installed by `tests/setup.sh` into `tests/otel/.venv`), strictly (an
//! unknown field fails), and writes what it got as JSON lines.
//!
//! - MCP calls over Streamable HTTP and over stdio: a session span and
//!   call spans with the MCP conventions' names and attributes, the calls
//!   children of the session; metrics arrive (`mcp.server.operation.duration`);
//! - a one-shot `tickbox call` exports its spans too;
//! - nothing is sent and no exporter thread runs without the variables
//!   (the positive control: the same run with them);
//! - a hostile tool name arrives escaped;
//! - a receiver that stalls or is stopped never slows calls; a stopped one
//!   is one warning, and the spans lost meanwhile are counted.

use crate::mcp_wire::{initialize_http, HttpServer, Raw};
use crate::tick_text::{assert_inert, shows_escaped};
use crate::util::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tickbox_runtime::text::escape;
use tickbox_telemetry::otel::THREAD_NAME;

/// How long to wait for telemetry to arrive: generous, since the machine
/// may be loaded; only reached when a test is failing.
const PATIENCE: Duration = Duration::from_secs(120);

/// The receiver's Python (the venv `tests/setup.sh` makes).
fn python() -> PathBuf {
    let p = root().join("tests/otel/.venv/bin/python3");
    assert!(
        p.exists(),
        "{} is missing: run tests/setup.sh (it installs tests/otel/requirements.txt)",
        p.display()
    );
    p
}

/// A running `tests/otel/receiver.py`; killed on drop.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
    _dir: TempDir,
}

impl Receiver {
    fn start() -> Receiver {
        Receiver::start_on(0)
    }

    /// On `port` (0: any free one).
    fn start_on(port: u16) -> Receiver {
        let dir = TempDir::new("otel-receiver");
        let out = dir.path("got.jsonl");
        let mut child = Command::new(python())
            .arg(root().join("tests/otel/receiver.py"))
            .arg("--out")
            .arg(&out)
            .arg("--port")
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the receiver's first line");
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the receiver did not start: {line:?}"));
        Receiver {
            child,
            port,
            out,
            _dir: dir,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far: the complete lines (the receiver may be
    /// writing the next one as this reads).
    fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Every span of every trace request so far.
    fn spans(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for r in self.requests() {
            assert_eq!(r.get("error"), None, "the receiver refused a request: {r}");
            for rs in r["message"]["resourceSpans"]
                .as_array()
                .into_iter()
                .flatten()
            {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    out.extend(ss["spans"].as_array().cloned().unwrap_or_default());
                }
            }
        }
        out
    }

    /// Every metric of the latest metrics request.
    fn latest_metrics(&self) -> Vec<Value> {
        let requests = self.requests();
        let Some(last) = requests.iter().rev().find(|r| r["path"] == "/v1/metrics") else {
            return Vec::new();
        };
        assert_eq!(
            last.get("error"),
            None,
            "the receiver refused a request: {last}"
        );
        let mut out = Vec::new();
        for rm in last["message"]["resourceMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                out.extend(sm["metrics"].as_array().cloned().unwrap_or_default());
            }
        }
        out
    }

    /// Waits until the spans satisfy `ok`; returns them.
    fn spans_until(&self, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut last = Vec::new();
        let found = eventually(PATIENCE, || {
            last = self.spans();
            ok(&last)
        });
        assert!(found, "{what}: not within {PATIENCE:?}; spans: {last:#?}");
        last
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The environment that turns telemetry on, sending to `endpoint` soon
/// (a short batch delay and metric interval, so a test waits little).
fn otel_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_string()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".into()),
        ("OTEL_SERVICE_NAME", "tickbox-under-test".into()),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// An attribute's value (as the receiver decoded it: `{"stringValue": …}`).
fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

fn string_attr<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    attr(span, key)?["stringValue"].as_str()
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// `tools/call NAME` with `id` on an HTTP session; the result.
fn http_call(server: &HttpServer, session: &str, id: u64, name: &str, args: Value) -> Value {
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

/// The names of the threads of process `pid`.
fn threads(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
    {
        let Ok(t) = t else { continue };
        if let Ok(name) = std::fs::read_to_string(t.path().join("comm")) {
            out.push(name.trim().to_string());
        }
    }
    out
}

fn shifty_args(http: bool) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if http {
        v.extend(["--http".into(), "127.0.0.1:0".into()]);
    }
    v.extend([
        "--name".into(),
        "shifty".into(),
        "--".into(),
        "python3".into(),
        tick("shifty.py"),
    ]);
    v
}

/// `tickbox mcp --http`: two `tools/call echo` and a failing `fail_big`
/// become server spans named `tools/call TOOL` with the MCP attributes
/// (the session id the client got, each request's id, `tcp`), children
/// of the Tick's session span, which arrives when the host drains; the
/// failing one has `error.type` `tool_error` and the Tick's message, cut
/// to its bound, as its status. `mcp.server.operation.duration` counts
/// the calls.
#[test]
fn mcp_http_calls_are_server_spans_under_the_session_span_and_metrics() {
    let receiver = Receiver::start();
    let env = otel_env(&receiver.endpoint());
    let args = shifty_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = HttpServer::start_args(&args, &borrowed(&env));
    let session = initialize_http(&server, &[]);
    for id in [11, 12] {
        let r = http_call(&server, &session, id, "echo", json!({"n": id}));
        assert_eq!(r["isError"], false, "{r}");
    }
    let r = http_call(&server, &session, 13, "fail_big", json!({"bytes": 5000}));
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
    let mut last = Vec::new();
    let counted = eventually(PATIENCE, || {
        last = receiver.latest_metrics();
        last.iter()
            .find(|m| m["name"] == "mcp.server.operation.duration")
            .and_then(|m| m["histogram"]["dataPoints"].as_array())
            .is_some_and(|points| {
                points.iter().any(|p| {
                    p["count"] == "2"
                        && p["attributes"].as_array().is_some_and(|a| {
                            a.iter().any(|kv| kv["value"]["stringValue"] == "echo")
                        })
                })
            })
    });
    assert!(counted, "mcp.server.operation.duration: {last:#?}");
    let resource = &receiver.requests()[0]["message"];
    assert!(
        resource.to_string().contains("tickbox-under-test"),
        "OTEL_SERVICE_NAME is the service.name: {resource}"
    );

    // The session span ends with the Tick, when the host drains.
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait_exit(), 0, "{:?}", server.stderr());
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
        !server.stderr().iter().any(|l| l.contains("cannot export")),
        "no export failed: {:?}",
        server.stderr()
    );
}

/// `tickbox mcp` over stdio: a call is a server span with `pipe`, the
/// request's id and no MCP session id (stdio has none), and the session
/// span is sent at exit. While it runs, the exporter's thread is there.
#[test]
fn mcp_stdio_calls_are_spans_too_and_the_exporter_is_a_thread() {
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let env = otel_env(&endpoint);
    let env: Vec<(&str, &Path)> = env
        .iter()
        .map(|(k, v)| (*k, Path::new(v.as_str())))
        .collect();
    let mut mcp = Raw::start_env(&shifty_args(false), &env);
    mcp.initialize("2025-11-25");
    let r = mcp.call(5, "echo", json!({"a": 1}));
    assert_eq!(r["isError"], false, "{r}");
    assert!(
        threads(mcp.pid()).iter().any(|t| t == THREAD_NAME),
        "{:?}",
        threads(mcp.pid())
    );
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
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

/// Not only MCP: a one-shot `tickbox call` exports its session and its
/// call (an internal span, `execute_tool TOOL`, the GenAI convention) before it exits.
#[test]
fn a_one_shot_call_exports_its_spans_before_it_exits() {
    let receiver = Receiver::start();
    let env = otel_env(&receiver.endpoint());
    let shifty = vec!["python3".to_string(), tick("shifty.py")];
    let out = tickbox_env(
        &with_command(&["call", "echo", r#"{"x":1}"#], &shifty),
        &borrowed(&env),
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let spans = receiver.spans();
    let call = named(&spans, "execute_tool echo");
    assert_eq!(call.len(), 1, "{spans:#?}");
    assert_eq!(call[0]["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(attr(call[0], "mcp.method.name"), None, "not an MCP call");
    let session = named(&spans, "tick session");
    assert_eq!(session.len(), 1, "{spans:#?}");
    assert_eq!(string_attr(session[0], "tickbox.origin"), Some("cli"));
    assert_eq!(call[0]["parentSpanId"], session[0]["spanId"]);
    assert!(
        receiver
            .requests()
            .iter()
            .any(|r| r["path"] == "/v1/metrics"),
        "the metrics are sent at exit too"
    );
}

/// Without the variables nothing is sent and no exporter thread runs;
/// the positive control is the same run with them (the thread is there
/// and the receiver gets requests).
#[test]
fn without_the_variables_nothing_is_sent_and_no_thread_runs() {
    for (k, _) in std::env::vars() {
        assert!(
            !k.starts_with("OTEL_EXPORTER_OTLP"),
            "the test's own environment sets {k}: this test needs it unset"
        );
    }
    let receiver = Receiver::start();
    let run = |env: &[(&str, &Path)]| -> (Vec<String>, String) {
        let mut mcp = Raw::start_env(&shifty_args(false), env);
        mcp.initialize("2025-11-25");
        for id in 1..=3 {
            let r = mcp.call(id, "echo", json!({"id": id}));
            assert_eq!(r["isError"], false, "{r}");
        }
        let threads = threads(mcp.pid());
        let (code, stderr) = mcp.close();
        assert_eq!(code, 0, "{stderr}");
        (threads, stderr)
    };
    let (unset_threads, _) = run(&[]);
    assert!(
        !unset_threads.iter().any(|t| t == THREAD_NAME),
        "{unset_threads:?}"
    );
    assert!(!unset_threads.is_empty(), "the threads were read");
    assert_eq!(receiver.requests().len(), 0, "nothing was sent");

    let endpoint = receiver.endpoint();
    let (set_threads, _) = run(&[("OTEL_EXPORTER_OTLP_ENDPOINT", Path::new(&endpoint))]);
    assert!(
        set_threads.iter().any(|t| t == THREAD_NAME),
        "{set_threads:?}"
    );
    receiver.spans_until("the positive control's spans", |s| {
        named(s, "tools/call echo").len() == 3
    });
}

/// A tool name with terminal controls, a line break, bidi and separator
/// characters, and quotes (the metrics test's, which MCP withholds: a
/// live client calls it by its own name).
const HOSTILE_TOOL: &str =
    "x\"} 1e9\nforged\r\n\x1b]2;pwned\x07\u{9b}31m\u{202e}\u{2028}\u{e0041}\\";

/// A hostile tool name reaches the receiver only escaped: in the span's
/// name and in `gen_ai.tool.name`, all there (the positive control), and
/// no raw unsafe character anywhere in the request.
#[test]
fn a_hostile_tool_name_arrives_escaped() {
    let state = TempDir::new("otel-hostile");
    let runtime = state.private_dir("run");
    let runtime = runtime.to_str().unwrap().to_string();
    let receiver = Receiver::start();
    let mut env = otel_env(&receiver.endpoint());
    env.push(("XDG_RUNTIME_DIR", runtime.clone()));
    let args = shifty_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = HttpServer::start_args(&args, &borrowed(&env));
    let session = initialize_http(&server, &[]);
    http_call(
        &server,
        &session,
        1,
        "reshape",
        json!({"tools": [HOSTILE_TOOL]}),
    );
    let out = tickbox_env(
        &["call", "@shifty", HOSTILE_TOOL, r#"{"n":1}"#],
        &[("XDG_RUNTIME_DIR", runtime.as_str())],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let shown = escape(HOSTILE_TOOL);
    let name = format!("execute_tool {shown}");
    let spans = receiver.spans_until("the hostile call's span", |s| !named(s, &name).is_empty());
    let span = named(&spans, &name)[0];
    assert_eq!(string_attr(span, "gen_ai.tool.name"), Some(shown.as_str()));
    for r in receiver.requests() {
        let raw = r["raw"].as_str().unwrap();
        assert_inert("an OTLP request", raw);
        assert!(!raw.contains("\nforged"), "no raw line break");
    }
    let all: String = receiver
        .requests()
        .iter()
        .map(|r| r["raw"].as_str().unwrap().to_string())
        .collect();
    assert!(shows_escaped(&all), "the bidi override, escaped: {all}");
}

/// A receiver that accepts connections and never answers: calls keep
/// being answered while the exporter waits out its 30 s timeout, all of
/// them in less time than one export takes to fail.
#[test]
fn a_stalled_receiver_never_slows_calls() {
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", stalled.local_addr().unwrap());
    let mut env = otel_env(&endpoint);
    env.push(("OTEL_EXPORTER_OTLP_TIMEOUT", "30000".into()));
    let env: Vec<(&str, &Path)> = env
        .iter()
        .map(|(k, v)| (*k, Path::new(v.as_str())))
        .collect();
    let mut mcp = Raw::start_env(&shifty_args(false), &env);
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
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
    drop(stalled);
}

/// A receiver stopped mid-run: calls go on being answered, the failures
/// are one warning (not one per export), and once a receiver is back on
/// the same port the spans lost meanwhile are counted
/// (`tickbox.telemetry.dropped`) and new spans arrive.
#[test]
fn a_stopped_receiver_is_one_warning_and_its_losses_are_counted() {
    let mut receiver = Receiver::start();
    let port = receiver.port;
    let mut env = otel_env(&receiver.endpoint());
    env.push(("OTEL_BSP_SCHEDULE_DELAY", "20".into()));
    let args = shifty_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = HttpServer::start_args(&args, &borrowed(&env));
    let session = initialize_http(&server, &[]);
    http_call(&server, &session, 1, "echo", json!({}));
    receiver.spans_until("the first call (the positive control)", |s| {
        named(s, "tools/call echo").len() == 1
    });
    receiver.stop();
    // Calls while nobody receives, each answered; waiting for the warning
    // (eventually) makes sure failed exports happened.
    let mut id = 2;
    let warned = eventually(PATIENCE, || {
        http_call(&server, &session, id, "echo", json!({}));
        id += 1;
        server
            .stderr()
            .iter()
            .any(|l| l.contains("cannot export telemetry over OTLP"))
    });
    assert!(warned, "{:?}", server.stderr());
    for _ in 0..20 {
        http_call(&server, &session, id, "echo", json!({}));
        id += 1;
    }
    let receiver = Receiver::start_on(port);
    let mut last = Vec::new();
    let counted = eventually(PATIENCE, || {
        last = receiver.latest_metrics();
        last.iter()
            .find(|m| m["name"] == "tickbox.telemetry.dropped")
            .and_then(|m| m["sum"]["dataPoints"][0]["asInt"].as_str())
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
    });
    assert!(counted, "tickbox.telemetry.dropped: {last:#?}");
    http_call(&server, &session, id, "echo", json!({"after": true}));
    receiver.spans_until("a call after the receiver is back", |s| {
        !named(s, "tools/call echo").is_empty()
    });
    let warnings = server
        .stderr()
        .iter()
        .filter(|l| l.contains("cannot export telemetry over OTLP"))
        .count();
    assert_eq!(
        warnings,
        1,
        "one rate-limited warning: {:?}",
        server.stderr()
    );
}

/// `initialize` over HTTP asking for `version`; the session id.
fn initialize_http_at(server: &HttpServer, version: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "otel-test", "version": "0"}}});
    let (status, headers, messages) = server.post("/mcp", &[], &init);
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(messages[0]["result"]["protocolVersion"], version);
    let session = crate::mcp_wire::header(&headers, "mcp-session-id")
        .expect("a session id")
        .to_string();
    let (status, _, _) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202);
    session
}

/// The data points of the histogram `name` in the latest metrics request.
fn histogram_points(metrics: &[Value], name: &str) -> Vec<Value> {
    metrics
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["histogram"]["dataPoints"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// Waits for a metrics request whose histogram `name` satisfies `ok`;
/// returns that request's metrics.
fn metrics_until(
    receiver: &Receiver,
    what: &str,
    name: &str,
    ok: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut last = Vec::new();
    let found = eventually(PATIENCE, || {
        last = receiver.latest_metrics();
        ok(&histogram_points(&last, name))
    });
    assert!(found, "{what}: not within {PATIENCE:?}; metrics: {last:#?}");
    last
}

/// A point whose attribute `key` is `value`.
fn point_with<'a>(points: &'a [Value], key: &str, value: &str) -> Option<&'a Value> {
    points.iter().find(|p| string_attr(p, key) == Some(value))
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
    let env = otel_env(&receiver.endpoint());
    let args = shifty_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut server = HttpServer::start_args(&args, &borrowed(&env));
    let old = initialize_http_at(&server, "2025-06-18");
    let new = initialize_http_at(&server, "2025-11-25");
    let r = http_call(&server, &old, 1, "tick_state", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let r = http_call(&server, &old, 2, "tick_screen", json!({"rows": "x"}));
    assert_eq!(r["isError"], true, "a refused argument: {r}");
    let r = http_call(&server, &new, 3, "echo", json!({"n": 3}));
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
    let r = http_call(&server, &old, 5, "reshape", json!({"tools": ["extra_one"]}));
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
    let r = http_call(&server, &new, 7, "echo", json!({"n": 7}));
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
    let metrics = metrics_until(
        &receiver,
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
    assert_eq!(crate::mcp_http::delete(&server, &old), 204);
    let metrics = metrics_until(
        &receiver,
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
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait_exit(), 0, "{:?}", server.stderr());
    let metrics = metrics_until(
        &receiver,
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
    let env = otel_env(&receiver.endpoint());
    let env: Vec<(&str, &Path)> = env
        .iter()
        .map(|(k, v)| (*k, Path::new(v.as_str())))
        .collect();
    let mut mcp = Raw::start_env(&shifty_args(false), &env);
    mcp.initialize("2025-06-18");
    let r = mcp.call(7, "tick_state", json!({}));
    assert_eq!(r["isError"], false, "{r}");
    let metrics = metrics_until(
        &receiver,
        "the call's operation point",
        "mcp.server.operation.duration",
        |p| point_with(p, "gen_ai.tool.name", "tick_state").is_some(),
    );
    assert_eq!(
        histogram_points(&metrics, "mcp.server.session.duration"),
        Vec::<Value>::new(),
        "the client is still there"
    );
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
    let metrics = metrics_until(
        &receiver,
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
    let mut env = otel_env(&receiver.endpoint());
    env.push(("TICKBOX_MCP_HTTP_SESSION_IDLE_MS", "1500".into()));
    let args = shifty_args(true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = HttpServer::start_args(&args, &borrowed(&env));
    let _session = initialize_http_at(&server, "2025-11-25");
    let metrics = metrics_until(
        &receiver,
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
