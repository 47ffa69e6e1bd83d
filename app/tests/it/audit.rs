//! The audit stream of Ticks started through [`App::open`], into a file
//! the App's [`audit`](tickbox_app::App::audit) handle writes (as `tickbox
//! call --audit FILE` wires it): what a wasm Tick with grants was granted,
//! called, refused and ran into, each event once and with what was
//! attempted; a hostile Tick's text only escaped; a session past its byte
//! budget saying what was dropped; a file rotated at its bound; the
//! stream a policy's `audit` key names. What the
//! binary decides (`--yes` and the approvals it records, `--audit -` on
//! stderr, exit codes, signals, SIGKILL under `--audit-sync`) stays in
//! `cli/tests/it/audit.rs`.

use crate::{call, settings, Ran};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use tickbox_app::grants::read_policy;
use tickbox_app::{App, AuditWish, Request, Settings, Target};
use tickbox_protocol::text::is_unsafe;
use tickbox_sandbox::GrantSpec;
use tickbox_telemetry::audit::Origin;
use tickbox_test_support::audit::{events, of, session_of};
use tickbox_test_support::{build_wasm, hostile, sha256_of, tick, TempDir};

/// A request for `target` under `grants`, recorded in `file` (call
/// arguments whole when `args`), as `tickbox call … --audit FILE` makes it.
fn audited(app: &App, target: Target, grants: GrantSpec, file: &Path, args: bool) -> Request {
    let mut r = Request::new(target);
    r.grants = grants;
    let wish = AuditWish {
        to: Some(file.display().to_string()),
        args,
        ..AuditWish::default()
    };
    r.audit = app
        .audit(Origin::Cli, &wish, &[])
        .expect("the audit file opens");
    r
}

/// The hostile guest as a start's target.
fn hostile_wasm() -> Target {
    Target::File(PathBuf::from(hostile()))
}

/// Grants of `dir` at `/data` and these other keys.
fn grants(dir: Option<&TempDir>, f: impl FnOnce(&mut GrantSpec)) -> GrantSpec {
    let mut g = GrantSpec::default();
    if let Some(d) = dir {
        g.dir = vec![format!("{}::/data", d.0.display())];
    }
    f(&mut g);
    g
}

/// The tool's JSON result of a call that answered.
fn result(ran: &Ran) -> Value {
    assert_eq!(ran.0, 0, "{ran:?}");
    serde_json::from_str(&ran.1).expect("a JSON result")
}

/// Starts, all appending to one audit file: a read-only call that reads
/// past its grant, a mutating call (arguments recorded), a connect to an
/// address not granted (beside one to the granted address), an HTTP
/// request to an origin not granted, and a guest that grows past its
/// memory bound. Each denial and the limit is in the stream exactly once,
/// with what was attempted; each session has one start and one end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_start_call_denial_limit_and_end_is_recorded_once() {
    let dir = TempDir::new("audit-run");
    let data = TempDir::new("audit-data");
    std::fs::write(data.path("hello.txt"), "hello").unwrap();
    let file = dir.path("audit.jsonl");
    let app = App::new(settings(None));
    let app = &app;
    let run = |g: GrantSpec, args: bool, tool: &'static str, call_args: Value| {
        let request = audited(app, hostile_wasm(), g, &file, args);
        async move { call(app, &request, tool, call_args).await }
    };

    // A read inside the grant (the positive control) and one leading out.
    let inside = run(
        grants(Some(&data), |_| {}),
        false,
        "read_file",
        json!({"path": "/data/hello.txt"}),
    )
    .await;
    assert_eq!(result(&inside)["value"], "hello");
    let escape = "/data/../../../../etc/passwd";
    let out = run(
        grants(Some(&data), |_| {}),
        false,
        "read_file",
        json!({"path": escape}),
    )
    .await;
    assert_eq!(result(&out)["ok"], false);

    // A mutating call, arguments recorded.
    let out = run(
        grants(Some(&data), |_| {}),
        true,
        "write_file",
        json!({"path": "/data/new.txt", "text": "written"}),
    )
    .await;
    assert_eq!(result(&out)["ok"], true);

    // Sockets: the granted address works, another port is refused.
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = granted.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::Write;
        if let Ok((mut c, _)) = granted.accept() {
            let _ = c.write_all(b"hi");
        }
    });
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = closed.local_addr().unwrap().port();
    drop(closed);
    let net = format!("127.0.0.1:{port}");
    let allow_net = |g: &mut GrantSpec| g.allow_net = vec![net.clone()];
    let out = run(
        grants(None, allow_net),
        false,
        "connect",
        json!({"addr": net}),
    )
    .await;
    assert_eq!(result(&out)["value"], "hi", "positive control");
    server.join().unwrap();
    let refused_addr = format!("127.0.0.1:{other}");
    let out = run(
        grants(None, allow_net),
        false,
        "connect",
        json!({"addr": refused_addr}),
    )
    .await;
    assert_eq!(result(&out)["ok"], false);

    // An HTTP origin not granted (refused before anything connects).
    let httpget = build_wasm("tests/guests", "httpget", "wasm32-wasip2");
    let url = "http://127.0.0.1:1/secret";
    let request = audited(
        app,
        Target::File(httpget),
        grants(None, |g| g.allow_http = vec!["http://127.0.0.1:9".into()]),
        &file,
        false,
    );
    let out = call(app, &request, "get", json!({"url": url})).await;
    assert_eq!(result(&out)["error"], "HttpRequestDenied");

    // Memory: the guest grows past its bound and is stopped.
    let out = run(
        grants(None, |g| g.max_memory = Some("16MiB".into())),
        false,
        "grow",
        json!({"mb": 64}),
    )
    .await;
    assert_eq!(out.0, 3, "the call's outcome is unknown: {out:?}");
    app.finish_audit();

    let all = events(&file);
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(!raw.chars().any(|c| is_unsafe(c) && c != '\n'));
    assert!(
        all.iter().all(|e| e["v"] == 1 && e["ts"].is_string()),
        "{all:#?}"
    );
    // Every start is one session with one start and one end.
    assert_eq!(of(&all, "start", None).len(), 7, "{all:#?}");
    assert_eq!(of(&all, "end", None).len(), 7, "{all:#?}");

    // The escape: one denied path, naming it.
    let paths = of(&all, "denied", Some("path"));
    assert_eq!(paths.len(), 1, "{paths:#?}");
    assert!(
        paths[0]["attempted"]
            .as_str()
            .unwrap()
            .ends_with("../etc/passwd"),
        "{paths:#?}"
    );
    assert_eq!(paths[0]["detail"], "leads out of its granted directory");
    let s = session_of(&all, |e| {
        e["grants"]["dirs"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    });
    assert_eq!(s[0]["event"], "start");
    assert_eq!(s[0]["origin"], "cli");
    assert_eq!(s[0]["backend"], "wasm component");
    assert_eq!(
        s[0]["sha256"],
        sha256_of(Path::new(&hostile())),
        "the very bytes started"
    );
    assert!(s[0]["tick"].as_str().unwrap().ends_with("hostile.wasm"));
    assert!(s[0]["grants"].to_string().contains("/data"), "{}", s[0]);

    // The calls: read-only with a hash of its arguments, the mutating
    // one with them whole (its stream records them).
    let calls = of(&all, "call", None);
    let reads: Vec<_> = calls.iter().filter(|c| c["tool"] == "read_file").collect();
    assert_eq!(reads.len(), 2);
    assert_eq!(reads[1]["mutates"], false);
    assert_eq!(
        reads[1]["outcome"], "ok",
        "the tool answered (with its error)"
    );
    assert_eq!(reads[1]["args"], Value::Null, "arguments only as a hash");
    assert_eq!(reads[1]["args_sha256"].as_str().unwrap().len(), 64);
    assert!(
        !raw.contains("etc/passwd\"}"),
        "the path is not in a call's arguments"
    );
    let writes: Vec<_> = calls.iter().filter(|c| c["tool"] == "write_file").collect();
    assert_eq!(writes.len(), 1, "{calls:#?}");
    assert_eq!(writes[0]["mutates"], true);
    assert_eq!(writes[0]["args"]["text"], "written");
    assert!(writes[0]["duration_ms"].as_f64().unwrap() >= 0.0);

    // Sockets: the refused address once, the granted one never.
    let sockets = of(&all, "denied", Some("socket"));
    assert_eq!(sockets.len(), 1, "{sockets:#?}");
    assert_eq!(sockets[0]["attempted"], refused_addr);
    assert!(!raw.contains(&format!("\"attempted\":\"{net}\"")));

    // The origin, once, with the URL asked for.
    let origins = of(&all, "denied", Some("http_origin"));
    assert_eq!(origins.len(), 1, "{origins:#?}");
    assert_eq!(origins[0]["attempted"], url);

    // The memory bound, once, with its value; the session's end says why.
    let limits = of(&all, "limit", None);
    assert_eq!(limits.len(), 1, "{limits:#?}");
    assert_eq!(limits[0]["bound"], "max_memory");
    assert_eq!(limits[0]["value"], 16 << 20);
    let grown = session_of(&all, |e| e["grants"]["max_memory"] == 16 << 20);
    assert!(grown.iter().any(|e| e["event"] == "limit"), "{grown:#?}");
    let end = grown.iter().find(|e| e["event"] == "end").unwrap();
    assert_eq!(end["reason"], "exited");
    assert!(
        end["detail"]
            .as_str()
            .unwrap()
            .contains("memory limit exceeded"),
        "{end}"
    );
    let call = grown.iter().find(|e| e["event"] == "call").unwrap();
    assert_eq!(call["outcome"], "unknown");
}

/// The corpus `tests/ticks/corpus.py` puts in every string a Tick
/// controls, in Rust.
fn corpus() -> String {
    "[\x1b]2;pwned-title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2K\u{9b}31m\x7f\r\nFORGED line\u{202e}\u{2066}\u{200b}\u{feff}\u{ad}\u{34f}\u{115f}\u{3164}\u{ffa0}\u{fe0f}\u{180e}\u{2028}\u{2029}\u{e0001}\u{e0041}\u{e007f}]".to_string()
}

/// A hostile Tick's text through every event it reaches (the start's
/// command line, a call's arguments and error message, a denied path, a
/// limit, the end): the file has no raw control, line break or bidi
/// character, and (the positive control) the text is all there, escaped,
/// the same JSON value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_ticks_names_reach_the_audit_file_only_escaped() {
    let dir = TempDir::new("audit-hostile");
    let file = dir.path("audit.jsonl");
    let app = App::new(settings(None));
    let c = corpus();
    // A native corpus Tick: its command line, arguments and error message.
    let native = Target::Command(vec!["python3".into(), tick("corpus.py"), c.clone()]);
    let request = audited(&app, native, GrantSpec::default(), &file, true);
    let out = call(&app, &request, "fail", json!({"x": c})).await;
    assert_eq!(out.0, 1, "{out:?}");
    // A wasm Tick: a path with the corpus leading out of its grant, a
    // mutating call, and its memory bound.
    let data = TempDir::new("audit-hostile-data");
    let bounded = grants(Some(&data), |g| g.max_memory = Some("16MiB".into()));
    let request = audited(&app, hostile_wasm(), bounded.clone(), &file, true);
    let path = format!("/data/../{c}");
    let out = call(
        &app,
        &request,
        "write_file",
        json!({"path": path, "text": c}),
    )
    .await;
    assert_eq!(out.0, 0, "{out:?}");
    let request = audited(&app, hostile_wasm(), bounded, &file, false);
    let out = call(&app, &request, "grow", json!({"mb": 64})).await;
    assert_eq!(out.0, 3, "{out:?}");
    app.finish_audit();

    let raw = std::fs::read_to_string(&file).unwrap();
    if let Some((i, ch)) = raw
        .char_indices()
        .find(|(_, ch)| is_unsafe(*ch) && *ch != '\n')
    {
        panic!("a raw U+{:04X} at byte {i} of the audit file", ch as u32);
    }
    assert!(
        !raw.lines().any(|l| l.starts_with("FORGED")),
        "a forged line"
    );
    assert!(
        raw.contains("\\u202e") && raw.contains("\\u001b"),
        "escaped, not dropped"
    );
    let all = events(&file);
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    for k in ["start", "call", "denied", "limit", "end"] {
        assert!(kinds.contains(&k), "no {k} event: {kinds:?}");
    }
    // Decoded, the values are the corpus itself.
    let native = session_of(&all, |e| e["backend"] == "native");
    assert!(
        native[0]["tick"].as_str().unwrap().ends_with(&c),
        "{}",
        native[0]
    );
    let failed = native.iter().find(|e| e["event"] == "call").unwrap();
    assert_eq!(failed["message"], c.as_str());
    assert_eq!(failed["args"]["x"], c.as_str());
    let denied = of(&all, "denied", Some("path"));
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denied[0]["attempted"], format!("../{c}"));
    let call = all
        .iter()
        .find(|e| e["event"] == "call" && e["tool"] == "write_file")
        .unwrap();
    assert_eq!(call["args"]["text"], c.as_str());
}

/// A session's own events past its byte budget (set low here) are
/// dropped and counted, and one `unrecorded` event says how many of each
/// kind, before its end; the budget's positive control is the default,
/// under which the same run is recorded whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_past_its_budget_says_what_was_dropped() {
    let data = TempDir::new("audit-budget-data");
    let run = |budget: Option<u64>| {
        let data = &data;
        async move {
            let dir = TempDir::new("audit-budget");
            let file = dir.path("audit.jsonl");
            let mut s: Settings = settings(None);
            if let Some(b) = budget {
                s.audit_session_max_bytes = b;
            }
            let app = App::new(s);
            let request = audited(
                &app,
                hostile_wasm(),
                grants(Some(data), |_| {}),
                &file,
                false,
            );
            let args = json!({"path": "/data/../x", "n": 100});
            let out = call(&app, &request, "refuse_loop", args).await;
            assert_eq!(result(&out)["refused"], 100);
            app.finish_audit();
            (events(&file), dir)
        }
    };
    let (all, _d) = run(Some(400)).await;
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        ["start", "denied", "call", "unrecorded", "end"],
        "{all:#?}"
    );
    let u = &all[3];
    assert_eq!(u["bound"], 400);
    assert_eq!(u["dropped"]["denied"]["path"], 99, "the merged count: {u}");
    // Positive control: under the default budget, the count is written.
    let (all, _d) = run(None).await;
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        ["start", "denied", "call", "denied", "end"],
        "{all:#?}"
    );
    assert_eq!(all[3]["count"], 99);
}

/// An audit file is rotated at its bound (set low here), the older files
/// kept beside it, by Apps appending to it one after another (as
/// processes do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_file_rotates_at_its_bound() {
    let dir = TempDir::new("audit-rotate");
    let file = dir.path("audit.jsonl");
    let runs = 6;
    for i in 0..runs {
        let app = App::new(Settings {
            audit_max_bytes: 2048,
            ..settings(None)
        });
        let request = audited(&app, hostile_wasm(), GrantSpec::default(), &file, true);
        let out = call(&app, &request, "echo", json!({"i": i})).await;
        assert_eq!(out.0, 0, "{out:?}");
        app.finish_audit();
    }
    let files: Vec<PathBuf> = std::iter::once(file.clone())
        .chain((1..=3).map(|n| dir.path(&format!("audit.jsonl.{n}"))))
        .filter(|p| p.exists())
        .collect();
    assert!(files.len() >= 2, "rotated: {files:?}");
    assert!(
        !dir.path("audit.jsonl.4").exists(),
        "three older files kept"
    );
    for f in &files {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(size <= 2048, "{} is {size} bytes", f.display());
    }
    // The newest run is in the newest file.
    let newest = events(&file);
    assert!(
        newest
            .iter()
            .any(|e| e["event"] == "call" && e["args"]["i"] == runs - 1),
        "{newest:#?}"
    );
}

/// A policy file's `audit` key names the stream (relative to the policy's
/// directory) its starts are recorded in, under the policy's grants; its
/// `audit_args` and `audit_sync` keys record the arguments and make the
/// stream one whose calls wait for their line on disk (and must be
/// booleans).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_names_the_stream() {
    let dir = TempDir::new("audit-policy");
    let policy = dir.path("policy.toml");
    let keys = "audit = \"p.jsonl\"\naudit_args = true\naudit_sync = true\n";
    std::fs::write(&policy, format!("{keys}max_memory = \"64MiB\"\n")).unwrap();
    let app = App::new(settings(None));
    let (_, wish) = read_policy(&policy).expect("the policy reads");
    let mut request = Request::new(hostile_wasm());
    request.policy = Some(policy);
    let audit = app
        .audit(Origin::Cli, &wish, &[])
        .expect("the stream opens");
    assert!(audit.as_ref().is_some_and(|a| a.syncs()), "audit_sync");
    request.audit = audit;
    let out = call(&app, &request, "echo", json!({"nonce": "policy"})).await;
    assert_eq!(out.0, 0, "{out:?}");
    app.finish_audit();
    let all = events(&dir.path("p.jsonl"));
    assert_eq!(all[0]["event"], "start", "{all:#?}");
    assert_eq!(all[0]["grants"]["max_memory"], 64 << 20);
    let calls = of(&all, "call", None);
    assert_eq!(
        calls[0]["args"]["nonce"], "policy",
        "audit_args: {calls:#?}"
    ); // A key of the wrong type is refused, naming it.
    std::fs::write(dir.path("bad.toml"), "audit_sync = \"yes\"\n").unwrap();
    let bad = read_policy(&dir.path("bad.toml")).map(|_| ()).unwrap_err();
    assert!(
        bad.to_string().contains("audit_sync must be true or false"),
        "{bad}"
    );
}
