//! The SDK's example Ticks (`examples/`), each built for wasm32-wasip2 and
//! natively from the same source, started through [`App::open`] as
//! `tickbox run` starts them (a `.wasm` sandboxed, a command natively) and
//! driven through a scripted session on both backends: keys, background
//! updates, kills, grants, and `tickbox_conformance`'s checker.

use crate::{call as call_once, read as read_once, settings};
use serde_json::{json, Value};
use tickbox_app::{App, CallOutcome, Opened, Request, Session, Target};
use tickbox_conformance::check::{self, Options};
use tickbox_host::SessionEvent;
use tickbox_protocol::PreparedCall;
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Wasm,
    Native,
}
use Backend::*;

const BOTH: [Backend; 2] = [Wasm, Native];

/// The request for an example: its `.wasm` (sandboxed, under `grants`) or
/// its native build (`grants` may only hold env).
fn request(b: Backend, name: &str, grants: GrantSpec) -> Request {
    let target = match b {
        Wasm => Target::File(build_wasm("examples", name, "wasm32-wasip2")),
        Native => Target::Command(vec![build_native("examples", name)
            .to_string_lossy()
            .into_owned()]),
    };
    let mut request = Request::new(target);
    request.grants = grants;
    request
}

/// Starts an example and initializes it.
async fn open(app: &App, b: Backend, name: &str, grants: GrantSpec) -> Opened {
    app.open(&request(b, name, grants))
        .await
        .unwrap_or_else(|e| panic!("{name} on {b:?} failed to initialize: {e}"))
}

async fn call(s: &Session, tool: &str, args: Value) -> CallOutcome {
    let c = s.descriptor().unwrap().prepare(tool, args).unwrap();
    s.call(&c).await
}

fn ok(outcome: CallOutcome) -> Value {
    match outcome {
        CallOutcome::Ok(v) => v,
        other => panic!("expected a result: {other:?}"),
    }
}

/// Waits for the next `tick/update` whose data satisfies `want`; its seq
/// and data.
async fn update_where(
    events: &mut tokio::sync::broadcast::Receiver<SessionEvent>,
    what: &str,
    want: impl Fn(&Value) -> bool,
) -> (u64, Value) {
    let what = format!("an update with {what}");
    event_where(events, &what, |ev| match ev {
        SessionEvent::Updated(st) if want(st.data.wire()) => {
            Ok(Some((st.seq, st.data.wire().clone())))
        }
        SessionEvent::Ended(why) => Err(format!("the session ended ({why:?})")),
        _ => Ok(None),
    })
    .await
}

/// Waits until the view's screen shows `needle`.
async fn screen_shows(s: &Session, needle: &str) -> String {
    shows(|| s.view().screen_text().wire().to_string(), needle).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_describes_itself_as_in_appendix_a() {
    let expected = json!({
        "protocol": 3, "kind": "example.counter", "title": "Counter",
        "description": "Keyboard and tool calls share one value.", "revision": "1",
        "tools": [
            {"name": "increment", "description": "Add an integer to the counter.",
             "input_schema": {"type": "object", "properties": {"amount": {"type": "integer"}},
                              "required": ["amount"], "additionalProperties": false},
             "mutates": true},
            {"name": "history", "description": "Read the last 256 changes.",
             "input_schema": {"type": "object", "additionalProperties": false}, "mutates": false}],
        "recover_with": "history", "state": {"series": [{"path": "/recent", "newest": "last"}]}
    });
    let app = App::new(settings(None));
    for b in BOTH {
        let tick = open(&app, b, "counter", GrantSpec::default()).await;
        assert_eq!(tick.session.descriptor().unwrap().raw, expected, "{b:?}");
        tick.close().await;
        let request = request(b, "counter", GrantSpec::default());
        let (code, state) = read_once(&app, &request).await;
        assert_eq!(code, 0, "{b:?}: {state}");
        assert_eq!(
            serde_json::from_str::<Value>(&state).unwrap(),
            json!({"seq": 0, "data": {"value": 0, "recent": []}}),
            "{b:?}"
        );
        let (code, result) = call_once(&app, &request, "increment", json!({"amount": 2})).await;
        assert_eq!((code, result.as_str()), (0, r#"{"value":2}"#), "{b:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_keys_and_tools_share_one_value() {
    let app = App::new(settings(None));
    for b in BOTH {
        let tick = open(&app, b, "counter", GrantSpec::default()).await;
        let s = &tick.session;
        screen_shows(s, "Counter: 0").await;
        let mut events = s.events();
        // A person types + in the view: exactly one update, value + 1.
        s.view().send_input(b"+");
        let (seq, data) = update_where(&mut events, "value 1", |d| d["value"] == 1).await;
        assert_eq!(seq, 1, "{b:?}");
        assert_eq!(data["recent"], json!([{"seq": 1, "value": 1}]), "{b:?}");
        screen_shows(s, "Counter: 1").await;
        // The next change is seq 2: no update came in between.
        assert_eq!(
            ok(call(s, "increment", json!({"amount": 2})).await),
            json!({"value": 3})
        );
        let (seq, _) = update_where(&mut events, "value 3", |d| d["value"] == 3).await;
        assert_eq!(seq, 2, "{b:?}");
        s.view().send_input(b"-");
        let (seq, _) = update_where(&mut events, "value 2", |d| d["value"] == 2).await;
        assert_eq!(seq, 3, "{b:?}");
        assert_eq!(s.state().updates, 3, "{b:?}: one update per change");
        assert_eq!(s.read().await.unwrap().seq, 3, "{b:?}");
        let history = ok(call(s, "history", json!({})).await);
        assert_eq!(history["recent"].as_array().unwrap().len(), 3, "{b:?}");
        // A resize repaints at the new size and is not an update. Until the
        // Tick repaints, the screen model only clips the old 120-column
        // frame, whose top border has no corner within 50 columns.
        s.view().resize(50, 8);
        let repainted = |text: &str| {
            let lines: Vec<&str> = text.lines().collect();
            lines
                .first()
                .is_some_and(|l| l.chars().count() == 50 && l.ends_with('┐'))
                && lines.get(7).is_some_and(|l| l.ends_with('┘'))
        };
        let mut screen = String::new();
        eventually_async(PATIENCE, || {
            screen = s.view().screen_text().wire().to_string();
            repainted(&screen)
        })
        .await;
        assert!(repainted(&screen), "{b:?}: not redrawn at 50x8:\n{screen}");
        assert_eq!(s.read().await.unwrap().seq, 3, "{b:?}");
        tick.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_refuses_what_the_host_did_not_filter() {
    let app = App::new(settings(None));
    for b in BOTH {
        let tick = open(&app, b, "counter", GrantSpec::default()).await;
        let s = &tick.session;
        // Calls the host would never prepare, sent raw: the Tick checks too.
        let raw = |tool: &str, args: Value, revision: &str| PreparedCall {
            tool: tool.into(),
            args,
            revision: revision.into(),
            mutates: true,
        };
        for (c, code) in [
            (raw("increment", json!({"amount": 1}), "0"), -32004),
            (raw("increment", json!({"amount": "x"}), "1"), -32602),
            (
                raw("increment", json!({"amount": 1, "more": 1}), "1"),
                -32602,
            ),
            (raw("decrement", json!({}), "1"), -32602),
        ] {
            match s.call(&c).await {
                CallOutcome::Failed { error, executed } => {
                    assert_eq!((error.code, executed), (code, false), "{b:?} {c:?}")
                }
                other => panic!("{b:?} {c:?}: {other:?}"),
            }
        }
        assert_eq!(s.state().updates, 0, "{b:?}: nothing ran");
        tick.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_are_durable_across_restarts_and_kills() {
    let app = App::new(settings(None));
    for b in BOTH {
        let dir = TempDir::new("notes");
        let host_dir = dir.0.to_string_lossy().into_owned();
        let grants = match b {
            Wasm => GrantSpec {
                dir: vec![format!("{host_dir}::/notes")],
                ..Default::default()
            },
            Native => GrantSpec {
                env: vec![format!("NOTES_DIR={host_dir}")],
                ..Default::default()
            },
        };
        let tick = open(&app, b, "notes", grants.clone()).await;
        let s = &tick.session;
        let written = ok(call(s, "write", json!({"name": "todo", "text": "milk"})).await);
        assert_eq!(written, json!({"name": "todo", "bytes": 4}), "{b:?}");
        // On disk when the response arrives, while the Tick still runs.
        assert_eq!(
            std::fs::read_to_string(dir.path("todo.txt")).unwrap(),
            "milk"
        );
        let left: Vec<_> = std::fs::read_dir(&dir.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec!["todo.txt"], "{b:?}: no temp files remain");
        let data = s.read().await.unwrap().data.wire().clone();
        assert_eq!(
            data["notes"],
            json!([{"name": "todo", "bytes": 4}]),
            "{b:?}"
        );
        match call(s, "read", json!({"name": "nope"})).await {
            CallOutcome::Failed { error, executed } => {
                assert_eq!((error.code, executed), (-32602, false), "{b:?}")
            }
            other => panic!("{other:?}"),
        }
        ok(call(s, "write", json!({"name": "todo", "text": "milk, eggs"})).await);
        // Kill without any shutdown: natively SIGKILL, in wasm the guest's
        // task is dropped. Nothing is saved at exit, so nothing is lost.
        match b {
            Native => {
                let pid = pid_with_env("NOTES_DIR", &host_dir).expect("the notes process");
                unsafe { libc::kill(pid, libc::SIGKILL) };
                tokio::time::timeout(PATIENCE, s.ended())
                    .await
                    .expect("the session ends when the Tick is killed");
            }
            Wasm => drop(tick),
        }
        let tick = open(&app, b, "notes", grants).await;
        assert_eq!(
            ok(call(&tick.session, "read", json!({"name": "todo"})).await),
            json!({"name": "todo", "text": "milk, eggs"}),
            "{b:?}"
        );
        tick.close().await;
    }
    // Without the grant the sandboxed Tick says which grant it needs, and
    // a write fails without running.
    let ungranted = open(&app, Wasm, "notes", GrantSpec::default()).await;
    let data = ungranted.session.read().await.unwrap().data.wire().clone();
    let problem = data["problem"].as_str().unwrap_or("");
    assert!(problem.contains("--dir HOST_DIR::/notes"), "{data}");
    let write = json!({"name": "a", "text": "b"});
    match call(&ungranted.session, "write", write).await {
        CallOutcome::Failed { executed, .. } => assert!(!executed),
        other => panic!("a write without the grant: {other:?}"),
    }
    ungranted.close().await;
}

/// The pid of the process whose environment has `key=value`.
fn pid_with_env(key: &str, value: &str) -> Option<i32> {
    let needle = format!("{key}={value}");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == std::process::id() as i32 {
            continue;
        }
        if let Ok(env) = std::fs::read(entry.path().join("environ")) {
            if env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
                return Some(pid);
            }
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ticker_updates_in_the_background() {
    let app = App::new(settings(None));
    for b in BOTH {
        let tick = open(&app, b, "ticker", GrantSpec::default()).await;
        let s = &tick.session;
        let d = s.descriptor().unwrap();
        assert_eq!(
            d.raw["state"]["series"],
            json!([{"path": "/samples", "newest": "last"}])
        );
        assert_eq!(d.raw["recover_with"], "samples");
        let mut events = s.events();
        // No calls: updates arrive on the Tick's own timer.
        let mut seqs = Vec::new();
        for n in 1..=3 {
            let (seq, data) = update_where(&mut events, "a sample", |d| {
                d["samples"].as_array().is_some_and(|a| !a.is_empty())
            })
            .await;
            assert!(
                data["samples"].as_array().unwrap().len() >= n.min(20),
                "{b:?}"
            );
            seqs.push(seq);
        }
        assert!(seqs.windows(2).all(|w| w[1] > w[0]), "{b:?}: {seqs:?}");
        match call(s, "set_interval", json!({"ms": 1})).await {
            CallOutcome::Failed { error, executed } => {
                assert_eq!((error.code, executed), (-32602, false), "{b:?}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ok(call(s, "set_interval", json!({"ms": 50})).await),
            json!({"interval_ms": 50})
        );
        update_where(&mut events, "the new interval", |d| d["interval_ms"] == 50).await;
        let samples = ok(call(s, "samples", json!({"last": 2})).await);
        assert_eq!(samples["samples"].as_array().unwrap().len(), 2, "{b:?}");
        screen_shows(s, "every 50 ms").await;
        tick.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_reaches_granted_addresses_only() {
    let server = HelloServer::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let args = json!({ "url": format!("{origin}/hello") });
    let expected = json!({"status": 200, "body": "hello from the test server"}).to_string();
    let app = App::new(settings(None));
    // Sandboxed without a grant: refused before anything was sent.
    let tick = open(&app, Wasm, "fetch", GrantSpec::default()).await;
    match call(&tick.session, "get", args.clone()).await {
        CallOutcome::Failed { error, executed } => {
            assert_eq!((error.code, executed), (-32602, false));
            let needed = format!("--allow-http {origin}");
            assert!(error.message.wire().contains(&needed), "{error:?}");
        }
        other => panic!("a fetch without the grant: {other:?}"),
    }
    tick.close().await;
    // With the grant, and natively (a native Tick is not sandboxed).
    let granted = GrantSpec {
        allow_http: vec![origin.clone()],
        ..Default::default()
    };
    for (b, grants) in [(Wasm, granted), (Native, GrantSpec::default())] {
        let ran = call_once(&app, &request(b, "fetch", grants), "get", args.clone()).await;
        assert_eq!(ran, (0, expected.clone()), "{b:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_records_what_it_fetched() {
    let server = HelloServer::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let app = App::new(settings(None));
    for b in BOTH {
        // A native Tick is not sandboxed: it takes no grant.
        let grants = match b {
            Wasm => GrantSpec {
                allow_http: vec![origin.clone()],
                ..Default::default()
            },
            Native => GrantSpec::default(),
        };
        let tick = open(&app, b, "fetch", grants).await;
        let s = &tick.session;
        let mut events = s.events();
        let r = ok(call(s, "get", json!({ "url": origin })).await);
        assert_eq!(r["status"], 200, "{b:?}");
        let (_, data) = update_where(&mut events, "one fetch", |d| d["fetched"] == 1).await;
        assert_eq!(data["recent"][0]["url"], origin.as_str(), "{b:?}");
        screen_shows(s, "hello from the test server").await;
        tick.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_jobs_outlive_their_call_and_the_view_is_usable() {
    let app = App::new(settings(None));
    for b in BOTH {
        let tick = open(&app, b, "dashboard", GrantSpec::default()).await;
        let s = &tick.session;
        let before = s.descriptor().unwrap();
        assert!(before.tool("cancel_job").is_none());
        let mut events = s.events();
        // The call returns at once; the job reports through updates (§7.3).
        let r = ok(call(s, "start_job", json!({"name": "build", "seconds": 1})).await);
        assert_eq!(r, json!({"id": 1, "status": "running"}), "{b:?}");
        // The catalog grew a tool, so it has a new revision, and a call
        // approved against the old one is refused without running.
        let after = s.describe().await.unwrap();
        assert_ne!(after.revision, before.revision, "{b:?}");
        assert!(after.tool("cancel_job").is_some(), "{b:?}");
        let stale = PreparedCall {
            tool: "start_job".into(),
            args: json!({"name": "stale", "seconds": 1}),
            revision: before.revision.clone(),
            mutates: true,
        };
        match s.call(&stale).await {
            CallOutcome::Failed { error, executed } => {
                assert_eq!((error.code, executed), (-32004, false), "{b:?}")
            }
            other => panic!("{other:?}"),
        }
        let (_, data) = update_where(&mut events, "job 1 done", |d| {
            d["jobs"][0]["status"] == "done"
        })
        .await;
        assert_eq!(data["jobs"][0]["progress"], 100, "{b:?}");
        assert_eq!(data["running"], 0, "{b:?}");
        // Keyboard: `n` starts a job, `c` cancels the selected one.
        s.view().send_input(b"n");
        update_where(&mut events, "job 2 running", |d| {
            d["jobs"][1]["status"] == "running"
        })
        .await;
        screen_shows(s, "job 2").await;
        s.view().send_input(b"\x1b[B");
        s.view().send_input(b"c");
        update_where(&mut events, "job 2 cancelled", |d| {
            d["jobs"][1]["status"] == "cancelled"
        })
        .await;
        screen_shows(s, "cancelled").await;
        tick.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_passes_tickbox_check() {
    let app = App::new(settings(None));
    // The checks run at once: each mostly waits on its Tick (the checker's
    // quiet periods and settles), and no two share a Tick or a directory.
    let mut checks = tokio::task::JoinSet::new();
    for b in BOTH {
        for name in ["counter", "notes", "ticker", "fetch", "dashboard"] {
            let dir = TempDir::new("check");
            let grants = match b {
                Wasm => GrantSpec {
                    dir: vec![format!("{}::/notes", dir.0.display())],
                    ..Default::default()
                },
                Native => GrantSpec {
                    env: vec![format!("NOTES_DIR={}", dir.0.display())],
                    ..Default::default()
                },
            };
            let options = Options {
                // fetch's only tool needs a server; the others are safe to call.
                allow_mutations: name != "fetch",
                ..Options::default()
            };
            let launcher = app.launcher(&request(b, name, grants)).expect("a launcher");
            checks.spawn(async move {
                let report = check::run(&launcher, name, &options)
                    .await
                    .unwrap_or_else(|e| panic!("{name} on {b:?}: {e}"));
                drop(dir);
                (b, name, report)
            });
        }
    }
    let mut checked = 0;
    while let Some(done) = checks.join_next().await {
        let (b, name, report) = done.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        assert!(report.passed(), "{name} on {b:?}:\n{}", report.to_text());
        assert!(
            report.to_text().contains("PASSED"),
            "{name} on {b:?}: {}",
            report.to_text()
        );
        checked += 1;
    }
    assert_eq!(checked, 10, "every example on both backends");
}
