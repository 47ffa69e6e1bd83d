//! The wasm sandbox: a hostile guest tries one escape per tool; each must be
//! contained and reported, and the positive controls must work.

use crate::util::*;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{spawn, WasmEngine, WasmSpec};
use tickbox_runtime::protocol::limits::MAX_LINE_BYTES;
use tickbox_runtime::session::{CallOutcome, EndReason, Session, SessionConfig, UnknownReason};
use tickbox_runtime::view::VIEW_QUEUE_BYTES;

/// `tickbox call <hostile> TOOL ARGS [flags...]`, expecting a JSON result.
fn attempt(tool: &str, args: Value, flags: &[&str]) -> Value {
    let out = attempt_raw(tool, args, flags);
    assert_eq!(out.code, 0, "{out:#?}");
    out.json()
}

fn attempt_raw(tool: &str, args: Value, flags: &[&str]) -> Output {
    let wasm = hostile();
    let mut argv = vec![
        "call".to_string(),
        wasm,
        tool.to_string(),
        args.to_string(),
        "--yes".into(),
    ];
    argv.extend(flags.iter().map(|s| s.to_string()));
    tickbox(&argv)
}

fn denied(v: &Value) -> bool {
    v["ok"] == json!(false)
}

/// A granted directory with a file, a subdirectory and a symlink pointing out.
fn data_dir() -> TempDir {
    let dir = TempDir::new("sandbox-data");
    std::fs::write(dir.path("hello.txt"), "hello from the host").unwrap();
    std::fs::create_dir(dir.path("sub")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path("passwd-link")).unwrap();
    std::os::unix::fs::symlink("../", dir.path("up")).unwrap();
    dir
}

#[test]
fn no_file_is_reachable_without_a_grant() {
    let v = attempt("read_file", json!({"path": "/etc/passwd"}), &[]);
    assert!(denied(&v), "{v}");
    let v = attempt("list_dir", json!({"path": "/"}), &[]);
    assert!(denied(&v), "{v}");
    let v = attempt("read_file", json!({"path": "etc/passwd"}), &[]);
    assert!(denied(&v), "{v}");
}

#[test]
fn a_granted_dir_is_readable_and_nothing_beyond_it() {
    let dir = data_dir();
    let grant = format!("{}::/data", dir.0.display());
    let flags = ["--dir", grant.as_str()];
    let v = attempt("read_file", json!({"path": "/data/hello.txt"}), &flags);
    assert_eq!(
        v,
        json!({"ok": true, "value": "hello from the host"}),
        "positive control"
    );
    for path in [
        "/data/../../../../etc/passwd",
        "/data/sub/../../etc/passwd",
        "/etc/passwd",
        "/data/passwd-link",
        "/data/up/hello.txt",
    ] {
        let v = attempt("read_file", json!({"path": path}), &flags);
        assert!(denied(&v), "{path} must not be readable: {v}");
    }
    let v = attempt("list_dir", json!({"path": "/data"}), &flags);
    let mut names: Vec<String> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["hello.txt", "passwd-link", "sub", "up"]);
    // Writes are allowed in a read-write grant, and land in the host dir.
    let v = attempt(
        "write_file",
        json!({"path": "/data/new.txt", "text": "hi"}),
        &flags,
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(std::fs::read_to_string(dir.path("new.txt")).unwrap(), "hi");
}

#[test]
fn a_read_only_grant_refuses_writes() {
    let dir = data_dir();
    let grant = format!("{}::/data:ro", dir.0.display());
    let flags = ["--dir", grant.as_str()];
    let v = attempt("read_file", json!({"path": "/data/hello.txt"}), &flags);
    assert_eq!(v["value"], "hello from the host", "positive control: {v}");
    for path in ["/data/hello.txt", "/data/new.txt", "/data/sub/new.txt"] {
        let v = attempt(
            "write_file",
            json!({"path": path, "text": "overwrite"}),
            &flags,
        );
        assert!(denied(&v), "{path}: {v}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path("hello.txt")).unwrap(),
        "hello from the host"
    );
    assert!(!dir.path("new.txt").exists());
}

#[test]
fn a_single_file_can_be_granted_without_its_directory() {
    let dir = data_dir();
    std::fs::write(dir.path("secret.txt"), "not for the guest").unwrap();
    let grant = format!("{}::/cfg/hello.txt:ro", dir.path("hello.txt").display());
    let flags = ["--dir", grant.as_str()];
    let v = attempt("read_file", json!({"path": "/cfg/hello.txt"}), &flags);
    assert_eq!(v["value"], "hello from the host", "{v}");
    let v = attempt("read_file", json!({"path": "/cfg/secret.txt"}), &flags);
    assert!(denied(&v), "{v}");
    let v = attempt("list_dir", json!({"path": "/cfg"}), &flags);
    assert_eq!(v["value"], json!(["hello.txt"]), "{v}");
}

/// A loopback server that answers each connection with a greeting.
fn greeter() -> (
    u16,
    std::thread::JoinHandle<()>,
    Arc<std::sync::atomic::AtomicBool>,
) {
    // Blocking: the thread sleeps in accept until a client comes, and the
    // test wakes it to stop with one last connection (`wake_listener`).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut c, _)) => {
                    let _ = c.write_all(b"greetings");
                }
                Err(_) => break,
            }
        }
    });
    (port, h, stop)
}

#[test]
fn sockets_reach_only_granted_addresses() {
    let (port, h, stop) = greeter();
    let (other, h2, stop2) = greeter();
    let addr = format!("127.0.0.1:{port}");
    let v = attempt("connect", json!({"addr": addr}), &[]);
    assert!(denied(&v), "no grant, no socket: {v}");
    let v = attempt("connect", json!({"addr": addr}), &["--allow-net", &addr]);
    assert_eq!(
        v,
        json!({"ok": true, "value": "greetings"}),
        "positive control"
    );
    // A grant is per address: the same host on another port stays closed.
    let v = attempt(
        "connect",
        json!({"addr": format!("127.0.0.1:{other}")}),
        &["--allow-net", &addr],
    );
    assert!(denied(&v), "{v}");
    let v = attempt(
        "udp_send",
        json!({"addr": format!("127.0.0.1:{other}")}),
        &["--allow-net", &addr],
    );
    assert!(denied(&v), "{v}");
    // A granted name resolves, and connects to what it resolves to.
    let named = format!("localhost:{port}");
    let v = attempt("connect", json!({"addr": named}), &["--allow-net", &named]);
    assert_eq!(v["value"], "greetings", "{v}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    stop2.store(true, std::sync::atomic::Ordering::Relaxed);
    wake_listener(port);
    wake_listener(other);
    h.join().unwrap();
    h2.join().unwrap();
}

#[test]
fn name_lookup_is_only_for_granted_names() {
    let v = attempt("lookup", json!({"name": "localhost"}), &[]);
    assert!(denied(&v), "{v}");
    let v = attempt(
        "lookup",
        json!({"name": "localhost"}),
        &["--allow-net", "127.0.0.1:80"],
    );
    assert!(denied(&v), "an IP grant allows no lookups: {v}");
    let v = attempt(
        "lookup",
        json!({"name": "localhost"}),
        &["--allow-net", "localhost:80"],
    );
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn only_named_environment_variables_pass() {
    let wasm = hostile();
    let secret = [("TICKBOX_TEST_SECRET", "hunter2")];
    let call = |flags: &[&str]| {
        let mut argv = vec![
            "call",
            wasm.as_str(),
            "env",
            r#"{"name":"TICKBOX_TEST_SECRET"}"#,
        ];
        argv.extend(flags);
        tickbox_env(&argv, &secret).json()
    };
    let v = call(&[]);
    assert_eq!(v["value"], Value::Null, "{v}");
    let mut all: Vec<&str> = v["all"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, vec!["TERM", "TICKLOOP_INSTANCE_ID"]);
    assert_eq!(call(&["--env", "TICKBOX_TEST_SECRET"])["value"], "hunter2");
    assert_eq!(
        call(&["--env", "TICKBOX_TEST_SECRET=other"])["value"],
        "other"
    );
}

#[test]
fn memory_past_the_limit_ends_the_session_naming_it() {
    let out = attempt_raw("grow", json!({"mb": 100}), &["--max-memory", "32MiB"]);
    out.expect(4, "memory limit exceeded");
    assert!(
        out.stderr.contains("max_memory is 33554432 bytes"),
        "{out:#?}"
    );
    let v = attempt("grow", json!({"mb": 8}), &["--max-memory", "32MiB"]);
    assert_eq!(v["ok"], true, "within the limit: {v}");
}

#[test]
fn traps_end_the_session_with_one_line() {
    let out = attempt_raw("recurse", json!({}), &[]);
    out.expect(4, "the guest trapped");
    // One error line (no backtrace), then the Tick's last words.
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert!(lines[0].starts_with("tickbox: "), "{out:#?}");
    assert_eq!(
        &lines[1..],
        [
            "  the Tick's last words (the end of its screen):",
            "  | hostile ready"
        ],
        "{out:#?}"
    );
}

#[test]
fn output_floods_are_bounded() {
    attempt_raw("stdout_flood", json!({}), &[]).expect(4, "a line exceeds 8388608 bytes");
    // 16 MiB of stderr: 256 times the view's queue (the only buffer between
    // the guest's stderr and the screen model), twice stdout's line limit,
    // so nothing can hold it and the guest goes on only as fast as the view
    // parses. Not more: every byte goes through the screen model, parsed at
    // most half a core (`PARSE_CPU_BUDGET`); 100 MiB took longer than the
    // 60 s call limit (the harness's and the call's own) on a loaded 2-core
    // debug build.
    const FLOOD_MIB: usize = 16;
    const _: () =
        assert!(FLOOD_MIB << 20 >= 256 * VIEW_QUEUE_BYTES && FLOOD_MIB << 20 >= 2 * MAX_LINE_BYTES);
    let v = attempt("stderr_flood", json!({"mb": FLOOD_MIB}), &[]);
    assert_eq!(v, json!({"ok": true, "mb": FLOOD_MIB}));
}

#[test]
fn bad_grants_are_usage_errors() {
    let wasm = hostile();
    tickbox(&["read", &wasm, "--dir", "/no/such/dir"]).expect(2, "--dir /no/such/dir");
    tickbox(&["read", &wasm, "--allow-net", "*:80"]).expect(2, "wildcards");
    tickbox(&["read", &wasm, "--env", "TICKBOX_SURELY_UNSET_VAR"]).expect(2, "not set");
    tickbox(&["read", &wasm, "--max-memory", "lots"]).expect(2, "--max-memory lots");
    tickbox(&[
        "read",
        "--dir",
        "/tmp",
        "--",
        "python3",
        &tick("counter.py"),
    ])
    .expect(2, "wasm Ticks only");
    let dir = TempDir::new("notwasm");
    std::fs::write(dir.path("x.wasm"), "not wasm").unwrap();
    tickbox(&["read", dir.path("x.wasm").to_str().unwrap()]).expect(3, "not a readable wasm");
}

#[test]
fn policy_files_grant_and_info_shows_grants_and_requests() {
    let dir = data_dir();
    let policy = dir.path("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "dir = [\"{}::/data:ro\"]\nallow_net = [\"127.0.0.1:9\"]\nmax_memory = \"64MiB\"\n",
            dir.0.display()
        ),
    )
    .unwrap();
    let p = policy.to_str().unwrap();
    let v = attempt(
        "read_file",
        json!({"path": "/data/hello.txt"}),
        &["--policy", p],
    );
    assert_eq!(v["value"], "hello from the host");
    // A manifest may not name a host path: refused before anything starts.
    let copy = dir.path("asker.wasm");
    std::fs::copy(hostile(), &copy).unwrap();
    let c = copy.to_str().unwrap();
    std::fs::write(
        dir.path("asker.tick.toml"),
        "dir = [\"/etc::/etc\"]\nenv = [\"HOME\"]\n",
    )
    .unwrap();
    tickbox(&["info", c, "--policy", p]).expect(2, "guest paths only");
    // A guest path is what it may ask for; granted only once approved
    // (`consent` tests the rest), and even then the host directory is the
    // person's to map: /etc stays out of reach.
    std::fs::write(
        dir.path("asker.tick.toml"),
        "dir = [\"/etc\"]\nenv = [\"HOME\"]\n",
    )
    .unwrap();
    tickbox(&["info", c, "--policy", p]).expect(2, "tickbox trust");
    // Apart from the granted directory: no grant may contain the store.
    let trust = TempDir::new("sandbox-trust");
    let env = [("TICKBOX_TRUST_DIR", trust.0.to_str().unwrap())];
    assert_eq!(tickbox_env(&["trust", c], &env).code, 0);
    let out = tickbox_env(&["info", c, "--policy", p], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let info = out.json();
    assert_eq!(info["backend"], "wasm");
    assert_eq!(info["wasm"], "component");
    assert_eq!(info["granted"]["max_memory"], 64 << 20);
    assert_eq!(info["granted"]["dirs"][0]["guest"], "/data");
    assert_eq!(info["granted"]["dirs"][0]["read_only"], true);
    assert_eq!(info["granted"]["dirs"].as_array().unwrap().len(), 1);
    assert_eq!(info["granted"]["env"], json!(["HOME"]));
    assert_eq!(
        info["granted"]["net"][0],
        json!({"host": "127.0.0.1", "port": 9})
    );
    assert_eq!(info["requested"]["dir"], json!(["/etc"]));
    let out = tickbox_env(&["call", c, "read_file", r#"{"path":"/etc/passwd"}"#], &env);
    assert!(out.stderr.contains("--dir HOST::/etc"), "{out:#?}");
    let v = out.json();
    assert!(denied(&v), "the manifest's dir was not mapped: {v}");
}

#[test]
fn preview1_modules_run_sandboxed_too() {
    let wasm = hostile_p1();
    let out = tickbox(&["call", &wasm, "echo", r#"{"p1":true}"#]);
    assert_eq!(out.json(), json!({"p1": true}), "{out:#?}");
    let v = tickbox(&["call", &wasm, "read_file", r#"{"path":"/etc/passwd"}"#]).json();
    assert!(denied(&v), "{v}");
    let out = tickbox(&["screen", &wasm]);
    assert!(
        out.stdout.contains("hostile ready"),
        "a p1 module's view is its stderr: {out:#?}"
    );
    let out = tickbox(&["info", &wasm]);
    assert_eq!(out.json()["wasm"], "module");
}

#[test]
fn host_rules_hold_for_wasm_ticks() {
    let wasm = hostile();
    let with_fault = |cmd: &[&str], fault: &str| {
        let mut argv: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        argv.insert(1, wasm.clone());
        argv.push("--env".into());
        argv.push(format!("FAULT={fault}"));
        tickbox(&argv)
    };
    with_fault(&["read"], "invalid_json").expect(3, "not valid JSON");
    with_fault(&["read"], "stray_stdout").expect(3, "not valid JSON");
    with_fault(&["read"], "jsonrpc_1").expect(3, "jsonrpc must be");
    with_fault(&["read"], "null_id").expect(3, "neither an integer id nor a method");
    with_fault(&["read"], "no_newline").expect(3, "without a final newline");
    with_fault(&["read"], "update_null").expect(3, "data is null");
    with_fault(&["read"], "update_seq").expect(3, "seq 4 is not greater than 4");
    with_fault(&["read"], "protocol2").expect(
        3,
        "unsupported Tick protocol version 2; this host speaks Tick protocol 3",
    );
    with_fault(&["call", "misbehave"], "both").expect(4, "both result and error");
    // WASI 0.2 carries only success or failure, so exit(7) arrives as status 1.
    with_fault(&["call", "misbehave"], "exit_mid_call").expect(4, "the Tick ended: exit status 1");
    let out = with_fault(&["call", "misbehave"], "unknown_id");
    assert_eq!(out.json(), json!({"fine": true}), "{out:#?}");
}

#[test]
fn the_compile_cache_is_used_and_never_trusted_blindly() {
    let cache = TempDir::new("cache");
    let c = cache.0.to_str().unwrap();
    let wasm = hostile();
    let run = |extra: &[&str]| {
        let mut argv = vec!["describe", wasm.as_str()];
        argv.extend(extra);
        tickbox_env(
            &argv,
            &[("TICKBOX_CACHE_DIR", c), ("TICKBOX_COMPILER", "cranelift")],
        )
    };
    let entries = || {
        let mut v: Vec<_> = std::fs::read_dir(&cache.0)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    assert_eq!(run(&["--no-cache"]).code, 0);
    assert!(entries().is_empty(), "--no-cache writes nothing");
    assert_eq!(run(&[]).code, 0);
    let files = entries();
    assert_eq!(files.len(), 2, "the entry and the MAC key: {files:?}");
    let blob = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap()
        .clone();
    // A hit refreshes the entry's time (LRU) but never rewrites it.
    let before = std::fs::read(&blob).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&blob).unwrap());
    assert_eq!(run(&[]).code, 0);
    assert_eq!(
        std::fs::read(&blob).unwrap(),
        before,
        "a warm start reuses the entry"
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&blob).unwrap()),
        ino,
        "a warm start reuses the entry"
    );
    // Corrupt the entry: it is detected, ignored and rebuilt.
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    let out = run(&[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_ne!(
        std::fs::read(&blob).unwrap(),
        bytes,
        "the corrupt entry was replaced"
    );
}

fn engine() -> Arc<WasmEngine> {
    WasmEngine::new(None).expect("engine")
}

async fn start(engine: &Arc<WasmEngine>, config: SessionConfig) -> Session {
    let spec = WasmSpec {
        path: hostile().into(),
        args: vec![],
        grants: GrantSpec::default().resolve().unwrap(),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    };
    Session::start(spawn(engine, &spec).await.expect("spawn"), config)
        .await
        .expect("initialize")
}

async fn call(s: &Session, tool: &str, args: Value) -> CallOutcome {
    let c = s.descriptor().unwrap().prepare(tool, args).unwrap();
    s.call(&c).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runaway_guest_costs_only_its_own_session() {
    let engine = engine();
    let config = SessionConfig {
        call_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let runaway = Arc::new(start(&engine, config.clone()).await);
    let neighbour = start(&engine, config).await;
    let r = runaway.clone();
    let spinning = tokio::spawn(async move { call(&r, "spin", json!({})).await });
    // While one guest spins, the other answers, again and again.
    for i in 0..20 {
        assert_eq!(
            call(&neighbour, "echo", json!({"i": i})).await,
            CallOutcome::Ok(json!({"i": i}))
        );
    }
    assert_eq!(
        spinning.await.unwrap(),
        CallOutcome::Unknown(UnknownReason::TimedOut(Duration::from_secs(2)))
    );
    // The guest spins on past its call's deadline, drawing a dot every 2^24
    // turns: how far apart the dots come here, now, is the positive
    // control for the quiet window below.
    let mut gap = Duration::ZERO;
    for _ in 0..3 {
        let drawn = runaway.view().bytes_drawn();
        let t = Instant::now();
        assert!(
            eventually_async(PATIENCE, || runaway.view().bytes_drawn() > drawn).await,
            "the spinning guest draws"
        );
        gap = gap.max(t.elapsed());
    }
    // Ending the session stops the spinning guest: its output stops growing.
    // The view parses on its own thread, so drawing already written may
    // still be parsed just after the end; what must happen is that the
    // count settles (equal over four of the longest gaps between dots)
    // soon, where a guest still running would keep it growing until the
    // deadline.
    runaway.shutdown().await;
    let quiet = (gap * 4).max(Duration::from_millis(300));
    let mut drawn = runaway.view().bytes_drawn();
    let mut unchanged_since = Instant::now();
    let settled = eventually_async(PATIENCE, || {
        let now = runaway.view().bytes_drawn();
        if now != drawn {
            (drawn, unchanged_since) = (now, Instant::now());
        }
        unchanged_since.elapsed() >= quiet
    })
    .await;
    assert!(
        settled,
        "the guest still runs after its session ended: {drawn} bytes drawn and growing \
         (a dot every {gap:?} or less before the end)"
    );
    assert_eq!(
        call(&neighbour, "echo", json!({})).await,
        CallOutcome::Ok(json!({}))
    );
    neighbour.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_guest_ends_only_its_session() {
    let engine = engine();
    let a = start(&engine, SessionConfig::default()).await;
    let b = start(&engine, SessionConfig::default()).await;
    match call(&a, "recurse", json!({})).await {
        CallOutcome::Unknown(UnknownReason::SessionEnded(EndReason::Exited(why))) => {
            assert!(why.contains("trapped"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        call(&b, "echo", json!({"x": 1})).await,
        CallOutcome::Ok(json!({"x": 1}))
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_terminal_bridge_carries_drawing_keys_and_resizes() {
    let engine = engine();
    let s = start(&engine, SessionConfig::default()).await;
    // The view parses on its own thread: let it catch up.
    assert!(
        eventually_async(PATIENCE, || s
            .view()
            .screen_text()
            .wire()
            .contains("hostile ready"))
        .await,
        "drawn through the terminal interface"
    );
    assert_eq!(
        call(&s, "term", json!({})).await,
        CallOutcome::Ok(json!({"cols": 120, "rows": 30, "generation": 0}))
    );
    s.view().resize(100, 40);
    assert_eq!(
        call(&s, "term", json!({})).await,
        CallOutcome::Ok(json!({"cols": 100, "rows": 40, "generation": 1}))
    );
    s.view().send_input(b"+-q");
    assert_eq!(
        call(&s, "read_keys", json!({})).await,
        CallOutcome::Ok(json!({"keys": "+-q"}))
    );
    // The guest exits on stdin EOF, or is ended after EXIT_GRACE (0.5 s):
    // 5 s leaves a loaded machine room and still fails a shutdown that
    // hangs on the terminal bridge.
    let t = Instant::now();
    s.shutdown().await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        t.elapsed()
    );
}
