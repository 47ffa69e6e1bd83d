//! The SDK's example Ticks (`examples/`), each built for wasm32-wasip2 and
//! natively from the same source, and each driven through a scripted
//! session on both backends: the CLI for one-shot commands, the library API
//! where a session must stay open (keys, background updates, kills).

use crate::util::*;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use tickbox_runtime::backend::native::{self, NativeSpec};
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{self, WasmEngine, WasmSpec};
use tickbox_runtime::protocol::PreparedCall;
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig};

/// How long a test waits for something that should happen within
/// milliseconds; only reached when the test is failing.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Backend {
    Wasm,
    Native,
}
use Backend::*;

const BOTH: [Backend; 2] = [Wasm, Native];

fn binary(b: Backend, name: &str) -> String {
    let path = match b {
        Wasm => build_wasm("examples", name, "wasm32-wasip2"),
        Native => build_native("examples", name),
    };
    path.to_string_lossy().into_owned()
}

/// argv for `tickbox CMD`: the `.wasm` as the positional, or `-- BINARY`.
fn argv(b: Backend, cmd: &str, name: &str, extra: &[&str]) -> Vec<String> {
    let mut v = vec![cmd.to_string()];
    match b {
        Wasm => {
            v.push(binary(b, name));
            v.extend(extra.iter().map(|s| s.to_string()));
        }
        Native => {
            v.extend(extra.iter().map(|s| s.to_string()));
            v.push("--".into());
            v.push(binary(b, name));
        }
    }
    v
}

fn engine() -> Arc<WasmEngine> {
    static ENGINE: OnceLock<Arc<WasmEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| WasmEngine::new(None).expect("engine"))
        .clone()
}

/// Starts an example through the library API. `grants` apply to wasm;
/// `env` is passed to both.
async fn open(b: Backend, name: &str, grants: GrantSpec, env: &[(&str, &str)]) -> Session {
    let path = binary(b, name);
    let io = match b {
        Wasm => {
            let mut grants = grants.resolve().expect("grants");
            grants
                .env
                .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            let spec = WasmSpec {
                path: path.into(),
                args: vec![],
                grants,
                instance_id: None,
                exit_grace: wasm::EXIT_GRACE,
                pin: None,
                audit: None,
            };
            wasm::spawn(&engine(), &spec).await.expect("spawn wasm")
        }
        Native => {
            let mut spec = NativeSpec::new([path]);
            spec.env = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            native::spawn(&spec).expect("spawn native")
        }
    };
    Session::start(io, SessionConfig::default())
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

#[test]
fn counter_describes_itself_as_in_appendix_a() {
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
    for b in BOTH {
        let out = tickbox(&argv(b, "describe", "counter", &[]));
        assert_eq!(out.code, 0, "{b:?}: {out:#?}");
        assert_eq!(out.json(), expected, "{b:?}");
        let out = tickbox(&argv(b, "read", "counter", &[]));
        assert_eq!(
            out.json(),
            json!({"seq": 0, "data": {"value": 0, "recent": []}}),
            "{b:?}"
        );
        let out = tickbox(&argv(
            b,
            "call",
            "counter",
            &["increment", r#"{"amount":2}"#, "--yes"],
        ));
        assert_eq!(out.json(), json!({"value": 2}), "{b:?}: {out:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_keys_and_tools_share_one_value() {
    for b in BOTH {
        let s = open(b, "counter", GrantSpec::default(), &[]).await;
        screen_shows(&s, "Counter: 0").await;
        let mut events = s.events();
        // A person types + in the view: exactly one update, value + 1.
        s.view().send_input(b"+");
        let (seq, data) = update_where(&mut events, "value 1", |d| d["value"] == 1).await;
        assert_eq!(seq, 1, "{b:?}");
        assert_eq!(data["recent"], json!([{"seq": 1, "value": 1}]), "{b:?}");
        screen_shows(&s, "Counter: 1").await;
        // The next change is seq 2: no update came in between.
        assert_eq!(
            ok(call(&s, "increment", json!({"amount": 2})).await),
            json!({"value": 3})
        );
        let (seq, _) = update_where(&mut events, "value 3", |d| d["value"] == 3).await;
        assert_eq!(seq, 2, "{b:?}");
        s.view().send_input(b"-");
        let (seq, _) = update_where(&mut events, "value 2", |d| d["value"] == 2).await;
        assert_eq!(seq, 3, "{b:?}");
        assert_eq!(s.state().updates, 3, "{b:?}: one update per change");
        assert_eq!(s.read().await.unwrap().seq, 3, "{b:?}");
        let history = ok(call(&s, "history", json!({})).await);
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
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_refuses_what_the_host_did_not_filter() {
    for b in BOTH {
        let s = open(b, "counter", GrantSpec::default(), &[]).await;
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
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_are_durable_across_restarts_and_kills() {
    for b in BOTH {
        let dir = TempDir::new("notes");
        let host_dir = dir.0.to_string_lossy().into_owned();
        let grant = format!("{host_dir}::/notes");
        let (grants, env): (GrantSpec, Vec<(&str, &str)>) = match b {
            Wasm => (
                GrantSpec {
                    dir: vec![grant.clone()],
                    ..Default::default()
                },
                vec![],
            ),
            Native => (GrantSpec::default(), vec![("NOTES_DIR", host_dir.as_str())]),
        };
        let s = open(b, "notes", grants.clone(), &env).await;
        let written = ok(call(&s, "write", json!({"name": "todo", "text": "milk"})).await);
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
        match call(&s, "read", json!({"name": "nope"})).await {
            CallOutcome::Failed { error, executed } => {
                assert_eq!((error.code, executed), (-32602, false), "{b:?}")
            }
            other => panic!("{other:?}"),
        }
        ok(call(&s, "write", json!({"name": "todo", "text": "milk, eggs"})).await);
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
            Wasm => drop(s),
        }
        let s = open(b, "notes", grants, &env).await;
        assert_eq!(
            ok(call(&s, "read", json!({"name": "todo"})).await),
            json!({"name": "todo", "text": "milk, eggs"}),
            "{b:?}"
        );
        s.shutdown().await;
    }
    // Through the CLI, and without the grant it fails cleanly.
    let dir = TempDir::new("notes-cli");
    let grant = format!("{}::/notes", dir.0.display());
    let out = tickbox(&argv(
        Wasm,
        "call",
        "notes",
        &[
            "write",
            r#"{"name":"a","text":"b"}"#,
            "--yes",
            "--dir",
            &grant,
        ],
    ));
    assert_eq!(out.json(), json!({"name": "a", "bytes": 1}), "{out:#?}");
    let out = tickbox(&argv(Wasm, "read", "notes", &["--dir", &grant]));
    assert_eq!(
        out.json()["data"]["notes"],
        json!([{"name": "a", "bytes": 1}])
    );
    let out = tickbox(&argv(Wasm, "read", "notes", &[]));
    let problem = out.json()["data"]["problem"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(problem.contains("--dir HOST_DIR::/notes"), "{out:#?}");
    let out = tickbox(&argv(
        Wasm,
        "call",
        "notes",
        &["write", r#"{"name":"a","text":"b"}"#, "--yes"],
    ));
    assert_eq!(out.code, 1, "{out:#?}");
    assert_eq!(out.json()["executed"], false, "{out:#?}");
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
    for b in BOTH {
        let s = open(b, "ticker", GrantSpec::default(), &[]).await;
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
        match call(&s, "set_interval", json!({"ms": 1})).await {
            CallOutcome::Failed { error, executed } => {
                assert_eq!((error.code, executed), (-32602, false), "{b:?}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            ok(call(&s, "set_interval", json!({"ms": 50})).await),
            json!({"interval_ms": 50})
        );
        update_where(&mut events, "the new interval", |d| d["interval_ms"] == 50).await;
        let samples = ok(call(&s, "samples", json!({"last": 2})).await);
        assert_eq!(samples["samples"].as_array().unwrap().len(), 2, "{b:?}");
        screen_shows(&s, "every 50 ms").await;
        s.shutdown().await;
    }
}

/// A loopback HTTP server answering every request with one body.
pub(crate) use tickbox_test_support::HelloServer as Server;

#[test]
fn fetch_reaches_granted_addresses_only() {
    let server = Server::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let args = json!({ "url": format!("{origin}/hello") }).to_string();
    let expected = json!({"status": 200, "body": "hello from the test server"});
    // Sandboxed without a grant: refused before anything was sent.
    let out = tickbox(&argv(Wasm, "call", "fetch", &["get", &args, "--yes"]));
    assert_eq!(out.code, 1, "{out:#?}");
    let err = out.json();
    assert_eq!(
        (err["code"].clone(), err["executed"].clone()),
        (json!(-32602), json!(false))
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&format!("--allow-http {origin}")),
        "{err}"
    );
    // With the grant, and natively (a native Tick is not sandboxed).
    let out = tickbox(&argv(
        Wasm,
        "call",
        "fetch",
        &["get", &args, "--yes", "--allow-http", &origin],
    ));
    assert_eq!(out.json(), expected, "{out:#?}");
    let out = tickbox(&argv(Native, "call", "fetch", &["get", &args, "--yes"]));
    assert_eq!(out.json(), expected, "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_records_what_it_fetched() {
    let server = Server::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    for b in BOTH {
        let grants = GrantSpec {
            allow_http: vec![origin.clone()],
            ..Default::default()
        };
        let s = open(b, "fetch", grants, &[]).await;
        let mut events = s.events();
        let r = ok(call(&s, "get", json!({ "url": origin })).await);
        assert_eq!(r["status"], 200, "{b:?}");
        let (_, data) = update_where(&mut events, "one fetch", |d| d["fetched"] == 1).await;
        assert_eq!(data["recent"][0]["url"], origin.as_str(), "{b:?}");
        screen_shows(&s, "hello from the test server").await;
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_jobs_outlive_their_call_and_the_view_is_usable() {
    for b in BOTH {
        let s = open(b, "dashboard", GrantSpec::default(), &[]).await;
        let before = s.descriptor().unwrap();
        assert!(before.tool("cancel_job").is_none());
        let mut events = s.events();
        // The call returns at once; the job reports through updates (§7.3).
        let r = ok(call(&s, "start_job", json!({"name": "build", "seconds": 1})).await);
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
        screen_shows(&s, "job 2").await;
        s.view().send_input(b"\x1b[B");
        s.view().send_input(b"c");
        update_where(&mut events, "job 2 cancelled", |d| {
            d["jobs"][1]["status"] == "cancelled"
        })
        .await;
        screen_shows(&s, "cancelled").await;
        s.shutdown().await;
    }
}

#[test]
fn every_example_passes_tickbox_check() {
    for b in BOTH {
        for name in ["counter", "notes", "ticker", "fetch", "dashboard"] {
            let dir = TempDir::new("check");
            let grant = match b {
                Wasm => format!("--dir={}::/notes", dir.0.display()),
                Native => format!("--env=NOTES_DIR={}", dir.0.display()),
            };
            let mut extra = vec![grant.as_str()];
            // fetch's only tool needs a server; the others are safe to call.
            if name != "fetch" {
                extra.push("--allow-mutations");
            }
            let out = tickbox(&argv(b, "check", name, &extra));
            assert_eq!(
                out.code, 0,
                "{name} on {b:?}:\n{}\n{}",
                out.stdout, out.stderr
            );
            assert!(
                out.stdout.contains("PASSED"),
                "{name} on {b:?}: {}",
                out.stdout
            );
        }
    }
}
