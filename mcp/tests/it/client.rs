//! The facade driven by a real MCP client (rmcp's) over the stdio serve
//! loop on an in-memory pipe: handshake, tools and their annotations,
//! calls, catalog changes, state subscriptions and their trimming, dying
//! Ticks, the end of the client's input, a wasm Tick, and a 2026-07-28
//! client. A stale call after a catalog change is refused without a
//! process, with a fast catalog poll, in `mcp/src/tests.rs`.
// `resources/subscribe` is what clients before 2026-07-28 use; it stays tested.
#![allow(deprecated)]

use crate::{hosted, logs, native, wasm};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, JsonObject, ReadResourceRequestParams,
    ResourceUpdatedNotificationParam, SubscribeRequestParams, Tool,
};
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RoleClient, RunningService,
};
use rmcp::ClientHandler;
use serde_json::{json, Value};
use std::future::Future;
use std::time::Duration;
use tickbox_mcp::{Facade, FacadeError, Grants, HostedTick};
use tickbox_sandbox::Launcher;
use tickbox_test_support::{
    alive, build_wasm, eventually, eventually_async, eventually_await, faulty, tick, TempDir,
};
use tokio::sync::mpsc;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(30);

pub(crate) async fn soon<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {PATIENCE:?}"))
}

/// What the server told the client on its own.
#[derive(Debug, PartialEq)]
pub(crate) enum Note {
    ToolsChanged,
    ResourceUpdated(String),
}

pub(crate) struct Recorder(mpsc::UnboundedSender<Note>);

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        let _ = self.0.send(Note::ToolsChanged);
    }
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(Note::ResourceUpdated(params.uri));
    }
}

/// The facade serving its Ticks, with an initialized client.
pub(crate) struct Mcp {
    pub(crate) client: RunningService<RoleClient, Recorder>,
    notes: mpsc::UnboundedReceiver<Note>,
    served: tokio::task::JoinHandle<Result<(), FacadeError>>,
}

async fn start(launcher: Launcher, name: Option<&str>) -> Mcp {
    start_with(launcher, name, ClientLifecycleMode::Initialize).await
}

async fn start_with(launcher: Launcher, name: Option<&str>, lifecycle: ClientLifecycleMode) -> Mcp {
    let tick = hosted(&launcher, name, Grants::default()).await;
    serve_ticks(vec![tick], lifecycle).await
}

/// The facade serving `ticks` over the stdio loop, and a client that
/// began with `lifecycle`.
pub(crate) async fn serve_ticks(ticks: Vec<HostedTick>, lifecycle: ClientLifecycleMode) -> Mcp {
    logs();
    let facade = Facade::new(ticks).await.expect("the facade starts");
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(theirs);
    let served = tokio::spawn(facade.serve(read, write));
    let (tx, notes) = mpsc::unbounded_channel();
    let client = soon(
        "initialize",
        Recorder(tx).serve_with_lifecycle(tokio::io::split(ours), lifecycle),
    )
    .await
    .expect("the MCP handshake succeeds");
    Mcp {
        client,
        notes,
        served,
    }
}

/// The counter (tests/ticks/counter.py), natively.
fn counter() -> Launcher {
    native(vec!["python3".into(), tick("counter.py")], &[])
}

impl Mcp {
    pub(crate) async fn tools(&self) -> Vec<Tool> {
        soon("tools/list", self.client.list_all_tools())
            .await
            .expect("tools/list")
    }

    pub(crate) async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let args: JsonObject = serde_json::from_value(args).expect("args object");
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(args);
        soon(name, self.client.call_tool(params))
            .await
            .unwrap_or_else(|e| panic!("tools/call {name}: {e}"))
    }

    async fn read_state(&self, uri: &str) -> Value {
        let r = soon(
            "resources/read",
            self.client
                .read_resource(ReadResourceRequestParams::new(uri.to_string())),
        )
        .await
        .expect("resources/read");
        let text = match &r.contents[0] {
            rmcp::model::ResourceContents::TextResourceContents { text, .. } => text.clone(),
            other => panic!("expected text contents: {other:?}"),
        };
        serde_json::from_str(&text).expect("the state resource is JSON")
    }

    async fn next_note(&mut self) -> Note {
        soon("a notification", self.notes.recv())
            .await
            .expect("the client is still running")
    }

    /// Closes the client's side (the end of the facade's input) and
    /// returns how the serve loop ended and what was logged.
    pub(crate) async fn close(self) -> (Result<(), FacadeError>, String) {
        let _ = self.client.cancel().await;
        let served = soon("the serve loop to return", self.served)
            .await
            .expect("the serve loop did not panic");
        (served, logs().text())
    }
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn error_of(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "expected an error result: {r:?}");
    structured(r)["error"].clone()
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool `{name}` in {tools:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_tools_with_annotations_and_calls_them() {
    let mcp = start(counter(), Some("counter")).await;

    let info = mcp.client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("tickbox")
    );
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    let caps = &info.capabilities;
    assert_eq!(caps.tools.as_ref().and_then(|t| t.list_changed), Some(true));
    assert_eq!(
        caps.resources.as_ref().and_then(|r| r.subscribe),
        Some(true)
    );

    let tools = mcp.tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["increment", "history", "tick_state", "tick_screen"]);
    let hints = |name: &str| {
        let a = tool(&tools, name).annotations.clone().expect("annotations");
        (a.read_only_hint, a.destructive_hint, a.open_world_hint)
    };
    assert_eq!(hints("increment"), (Some(false), Some(true), Some(false)));
    assert_eq!(hints("history"), (Some(true), Some(false), Some(false)));
    assert_eq!(hints("tick_state"), (Some(true), Some(false), Some(false)));
    let inc = tool(&tools, "increment");
    assert_eq!(
        inc.description.as_deref(),
        Some("Add an integer to the counter.")
    );
    assert_eq!(
        Value::Object((*inc.input_schema).clone()),
        json!({"type": "object", "properties": {"amount": {"type": "integer"}},
               "required": ["amount"], "additionalProperties": false})
    );

    // A read-only tool, then a mutating one.
    let r = mcp.call("history", json!({})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(structured(&r), json!({"recent": []}));
    let r = mcp.call("increment", json!({"amount": 2})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(structured(&r), json!({"value": 2}));
    assert_eq!(text(&r), r#"{"value":2}"#);

    // Args the schema rejects are never sent.
    let r = mcp.call("increment", json!({"amount": "2"})).await;
    let e = error_of(&r);
    assert_eq!(
        (e["kind"].as_str(), e["executed"].as_bool()),
        (Some("invalid_arguments"), Some(false)),
        "{e}"
    );

    let r = mcp.call("tick_state", json!({})).await;
    let s = structured(&r);
    assert_eq!(
        (s["seq"].clone(), s["data"]["value"].clone()),
        (json!(1), json!(2)),
        "{s}"
    );
    assert!(s["at"].as_str().is_some_and(|at| !at.is_empty()), "{s}");
    assert_eq!(s["recover_with"], "history");
    // The redraw travels through the PTY on its own schedule; poll like a person would look again.
    let screen = std::cell::RefCell::new(String::new());
    eventually_await(PATIENCE, || async {
        let now = text(&mcp.call("tick_screen", json!({})).await);
        *screen.borrow_mut() = now;
        screen.borrow().contains("Counter: 2")
    })
    .await;
    let screen = screen.into_inner();
    assert!(screen.contains("Counter: 2"), "{screen}");

    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "a clean end of input: {served:?}: {logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_stops_the_tick() {
    let dir = TempDir::new("mcp-eof");
    let pidfile = dir.path("pid");
    let pf = pidfile.to_string_lossy().to_string();
    let mcp = start(
        native(
            vec!["python3".into(), tick("named.py")],
            &[("TICK_PIDFILE", &pf)],
        ),
        None,
    )
    .await;
    let r = mcp.call("echo", json!({"x": 1})).await;
    assert_eq!(structured(&r), json!({"x": 1}));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("the Tick wrote its pid")
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
    assert!(
        eventually(Duration::from_secs(10), || !alive(pid)),
        "the Tick {pid} outlived the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_a_subscribable_resource_with_merged_counts() {
    let mut mcp = start(counter(), None).await;
    let resources = soon("resources/list", mcp.client.list_all_resources())
        .await
        .expect("resources/list");
    let uri = "tick://counter/state";
    assert_eq!(
        resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
        [uri],
        "the default name is the last part of the kind"
    );
    assert!(
        resources[0]
            .description
            .as_deref()
            .is_some_and(|d| d.contains("`history`")),
        "{:?}",
        resources[0]
    );
    soon(
        "subscribe",
        mcp.client
            .subscribe(SubscribeRequestParams::new(uri.to_string())),
    )
    .await
    .expect("subscribe");

    for _ in 0..3 {
        let r = mcp.call("increment", json!({"amount": 2})).await;
        assert_eq!(r.is_error, Some(false), "{r:?}");
    }
    assert_eq!(mcp.next_note().await, Note::ResourceUpdated(uri.into()));
    let s = mcp.read_state(uri).await;
    assert_eq!(s["data"]["value"], 6, "{s}");
    assert_eq!(s["seq"], 3, "{s}");
    assert_eq!(s["merged_updates"], 3, "three updates since no read: {s}");
    assert_eq!(s["recover_with"], "history", "{s}");
    let s = mcp.read_state(uri).await;
    assert_eq!(
        s["merged_updates"], 0,
        "nothing new since the last read: {s}"
    );

    let missing = mcp
        .client
        .read_resource(ReadResourceRequestParams::new("tick://nope/state"))
        .await;
    let missing = format!("{:?}", missing.expect_err("no such resource"));
    assert!(
        missing.contains("no resource `tick://nope/state`; this server has tick://"),
        "{missing}"
    );
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dying_tick_gives_clean_errors_and_a_log_line() {
    let mcp = start(native(faulty("exit_mid_call"), &[]), None).await;
    let r = mcp.call("misbehave", json!({})).await;
    let e = error_of(&r);
    assert_eq!(e["kind"], "unknown_outcome", "{e}");
    assert_eq!(e["executed"], Value::Null, "nobody knows: {e}");
    let t = text(&r);
    assert!(
        t.contains("unknown outcome") && t.contains("did not retry") && t.contains("exit status 7"),
        "{t}"
    );

    // The server stays up; the Tick's tools now say it is gone, unexecuted.
    let r = mcp.call("echo", json!({})).await;
    let e = error_of(&r);
    assert_eq!(
        (e["kind"].as_str(), e["executed"].as_bool()),
        (Some("tick_ended"), Some(false)),
        "{e}"
    );
    let r = mcp.call("tick_state", json!({})).await;
    assert!(
        structured(&r)["ended"]
            .as_str()
            .is_some_and(|s| s.contains("exit status 7")),
        "{r:?}"
    );
    assert!(!mcp.tools().await.is_empty());

    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
    assert!(
        logged.contains("ended") && logged.contains("exit status 7"),
        "one log line: {logged}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_violation_ends_the_tick_not_the_server() {
    let mcp = start(
        native(
            vec![
                "python3".into(),
                tick("named.py"),
                "echo".into(),
                "garbage".into(),
            ],
            &[],
        ),
        None,
    )
    .await;
    let r = mcp.call("garbage", json!({})).await;
    let e = error_of(&r);
    assert_eq!(e["kind"], "unknown_outcome", "{e}");
    assert!(text(&r).contains("protocol violation"), "{}", text(&r));
    let r = mcp.call("echo", json!({})).await;
    let e = error_of(&r);
    assert_eq!(e["kind"], "tick_ended", "{e}");
    assert!(text(&r).contains("not valid JSON"), "{}", text(&r));
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
    assert!(
        logged.contains("protocol violation"),
        "a log line: {logged}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_flooding_the_host_with_requests_costs_a_few_log_lines() {
    logs();
    // 20,000 requests before its catalog (faulty.py's REQUEST_FLOOD).
    let mcp = start(native(faulty("request_flood"), &[]), None).await;
    let r = mcp.call("echo", json!({"x": 1})).await;
    assert_ne!(r.is_error, Some(true), "the Tick still serves: {r:?}");
    let (served, _) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}");
    // The last count is logged when the session's reader ends, once the
    // Tick's output has closed.
    let counted_all = || logs().text().contains("ignored `more` requests");
    let ended = eventually_async(Duration::from_secs(60), counted_all).await;
    let logged = logs().text();
    assert!(ended, "{logged}");
    let lines: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("sent by the Tick (§3.2)"))
        .collect();
    // The first at once, then one line per interval and one at the end:
    // on a machine slow enough to take several intervals, a few more.
    assert!((2..=10).contains(&lines.len()), "{lines:#?}");
    // Positive control: every request is counted in them.
    let counted: u64 = lines
        .iter()
        .map(|l| {
            l.split("more=")
                .nth(1)
                .and_then(|m| m.split_whitespace().next())
        })
        .map(|m| m.and_then(|m| m.parse::<u64>().ok()).unwrap_or(0))
        .sum();
    let each = lines
        .iter()
        .filter(|l| l.contains("ignoring a request"))
        .count();
    assert_eq!(counted + each as u64, 20_000, "{lines:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_error_says_whether_it_ran_and_big_results_are_replaced() {
    let mcp = start(native(faulty("ok"), &[]), None).await;
    let r = mcp.call("fail", json!({})).await;
    let e = error_of(&r);
    assert_eq!(
        (
            e["kind"].as_str(),
            e["code"].as_i64(),
            e["executed"].as_bool()
        ),
        (Some("tool_error"), Some(-32000), Some(true)),
        "{e}"
    );
    assert_eq!(e["data"], json!({"step": 2}));
    let r = mcp.call("reject", json!({})).await;
    assert_eq!(error_of(&r)["executed"], false);

    // `echo` returns its args: 600 kB is under the Tick's 8 MiB but over the facade's bound.
    let blob = "x".repeat(600 * 1024);
    let r = mcp.call("echo", json!({ "blob": blob })).await;
    let e = error_of(&r);
    assert_eq!(e["kind"], "response_too_large", "{e}");
    assert_eq!(e["limit_bytes"], 512 * 1024);
    assert!(e["observed_bytes"].as_u64().unwrap() > 600 * 1024, "{e}");
    assert!(!text(&r).contains("xxxx"), "never clipped, dropped whole");
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_resource_is_trimmed_to_the_delivery_budget() {
    // burst.py emits 10,000 updates right after initialization; the last
    // carries 2,000 items of a declared series, far over 16 KiB.
    let mcp = start(
        native(
            vec!["python3".into(), tick("burst.py"), "10000".into()],
            &[],
        ),
        None,
    )
    .await;
    let uri = "tick://burst/state";
    let mut merged = 0;
    let s = mcp.read_state(uri).await;
    merged += s["merged_updates"].as_u64().unwrap();
    // 10,000 updates through python3 and a debug build: seconds when idle,
    // far more on a loaded machine.
    let s = std::cell::RefCell::new(s);
    let merged = std::cell::Cell::new(merged);
    eventually_await(PATIENCE * 2, || async {
        if s.borrow()["seq"] == 10_000 {
            return true;
        }
        let next = mcp.read_state(uri).await;
        merged.set(merged.get() + next["merged_updates"].as_u64().unwrap());
        *s.borrow_mut() = next;
        false
    })
    .await;
    let (s, merged) = (s.into_inner(), merged.get());
    assert_eq!(s["seq"], 10_000, "{s}");
    assert_eq!(merged, 10_000, "merged counts add up");
    let len = serde_json::to_string(&s).unwrap().len();
    assert!(len <= 16 * 1024, "{len} bytes");
    let items = s["data"]["items"].as_array().unwrap();
    assert_eq!(items.last().unwrap()["i"], 1999, "the newest end is kept");
    assert_eq!(
        s["trimmed"],
        json!([{"path": "/items", "kept": "newest", "count": items.len(), "of": 2000}])
    );
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
}

/// The whole client story against the bundled counter example, sandboxed:
/// the Tick CI ships, as an MCP client would use it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_uses_the_example_counter_as_a_wasm_tick() {
    let path = build_wasm("examples", "counter", "wasm32-wasip2");
    let mut mcp = start(wasm(path.to_str().unwrap(), &Grants::default()), None).await;
    let tools = mcp.tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for n in ["increment", "history", "tick_state", "tick_screen"] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    let a = tool(&tools, "increment")
        .annotations
        .clone()
        .expect("annotations");
    assert_eq!(
        (a.read_only_hint, a.destructive_hint, a.open_world_hint),
        (Some(false), Some(true), Some(false)),
        "mutating, and no network grant"
    );
    let uri = "tick://counter/state";
    soon(
        "subscribe",
        mcp.client
            .subscribe(SubscribeRequestParams::new(uri.to_string())),
    )
    .await
    .expect("subscribe");
    let r = mcp.call("increment", json!({"amount": 2})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(structured(&r)["value"], 2, "{r:?}");
    let r = mcp.call("history", json!({})).await;
    assert_eq!(r.is_error, Some(false), "a query tool: {r:?}");
    assert_eq!(mcp.next_note().await, Note::ResourceUpdated(uri.into()));
    let s = mcp.read_state(uri).await;
    assert_eq!(s["data"]["value"], 2, "{s}");
    let r = mcp.call("increment", json!({"amount": "two"})).await;
    assert_eq!(
        error_of(&r)["executed"],
        false,
        "bad args are refused unexecuted: {r:?}"
    );
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
}

/// A 2026-07-28 client: `server/discover`, per-request metadata, and change
/// notifications on a `subscriptions/listen` stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_discovers_and_listens() {
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let mcp = start_with(native(faulty("catalog_change"), &[]), None, lifecycle).await;
    let info = mcp.client.peer_info().expect("server info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    let tools = mcp.tools().await;
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let uri = "tick://faulty/state";
    let filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .resource_subscriptions([uri])
        .build();
    let mut stream = soon("subscriptions/listen", mcp.client.peer().listen(filter))
        .await
        .expect("listen");
    assert_eq!(
        stream.acknowledged().resource_subscriptions.as_deref(),
        Some(&[uri.to_string()][..])
    );
    let r = mcp.call("bump", json!({})).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    match soon("resources/updated", stream.next()).await {
        Ok(Some(ServerNotification::ResourceUpdatedNotification(n))) => {
            assert_eq!(n.params.uri, uri)
        }
        other => panic!("expected resources/updated: {other:?}"),
    }
    let r = mcp.call("misbehave", json!({})).await;
    assert_eq!(structured(&r), json!({"revision": "r2"}));
    loop {
        match soon("tools/list_changed", stream.next()).await {
            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => break,
            // A second delivery of the state may come first.
            Ok(Some(ServerNotification::ResourceUpdatedNotification(_))) => continue,
            other => panic!("expected tools/list_changed: {other:?}"),
        }
    }
    let r = mcp.call("echo", json!({"x": 1})).await;
    assert_eq!(error_of(&r)["kind"], "catalog_changed");
    mcp.tools().await;
    let r = mcp.call("echo", json!({"x": 1})).await;
    assert_eq!(structured(&r), json!({"x": 1}));
    drop(stream);
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
}
