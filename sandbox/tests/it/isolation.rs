//! A wasm Tick's faults stay its own: memory past its bound, traps,
//! output floods, a guest that never yields and broken protocol each end
//! (or fail) only that Tick's session, with a reason naming the rule, while
//! a neighbour on the same engine keeps answering; preview-1 modules are
//! held to the same walls; the terminal bridge carries drawing, keys and
//! resizes.

use crate::guest::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_host::view::VIEW_QUEUE_BYTES;
use tickbox_host::{CallOutcome, EndReason, Session, SessionConfig, UnknownReason};
use tickbox_protocol::limits::MAX_LINE_BYTES;
use tickbox_sandbox::{GrantSpec, Launcher, WasmEngine, WasmKind};
use tickbox_test_support::*;

fn max_memory(size: &str) -> GrantSpec {
    GrantSpec {
        max_memory: Some(size.into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn memory_past_the_limit_ends_the_session_naming_it() {
    let why = attempt_fails("grow", json!({"mb": 100}), &max_memory("32MiB")).await;
    assert!(why.contains("memory limit exceeded"), "{why}");
    assert!(why.contains("max_memory is 33554432 bytes"), "{why}");
    let v = attempt("grow", json!({"mb": 8}), &max_memory("32MiB")).await;
    assert_eq!(v["ok"], true, "within the limit: {v}");
}

#[tokio::test]
async fn output_floods_are_bounded() {
    let why = attempt_fails("stdout_flood", json!({}), &GrantSpec::default()).await;
    assert!(why.contains("a line exceeds 8388608 bytes"), "{why}");
    // 16 MiB of stderr: 256 times the view's queue (the only buffer between
    // the guest's stderr and the screen model), twice stdout's line limit,
    // so nothing can hold it and the guest goes on only as fast as the view
    // parses. Not more: every byte goes through the screen model, parsed at
    // most half a core (`PARSE_CPU_BUDGET`), within the call's time limit
    // on a loaded 2-core debug build.
    const FLOOD_MIB: usize = 16;
    const _: () =
        assert!(FLOOD_MIB << 20 >= 256 * VIEW_QUEUE_BYTES && FLOOD_MIB << 20 >= 2 * MAX_LINE_BYTES);
    let v = attempt(
        "stderr_flood",
        json!({"mb": FLOOD_MIB}),
        &GrantSpec::default(),
    )
    .await;
    assert_eq!(v, json!({"ok": true, "mb": FLOOD_MIB}));
}

#[tokio::test]
async fn preview1_modules_run_sandboxed_too() {
    let wasm = hostile_p1();
    let none = GrantSpec::default();
    let v = attempt_in(&wasm, "echo", json!({"p1": true}), &none).await;
    assert_eq!(v, json!({"p1": true}));
    let v = attempt_in(&wasm, "read_file", json!({"path": "/etc/passwd"}), &none).await;
    assert!(denied(&v), "{v}");
    let s = open(&wasm, &none).await;
    assert!(
        shows(&s, "hostile ready").await,
        "a p1 module's view is its stderr"
    );
    s.shutdown().await;
    let launcher = Launcher::wasm(engine(), wasm.into(), none.resolve().unwrap()).unwrap();
    assert!(
        matches!(
            launcher,
            Launcher::Wasm {
                kind: WasmKind::Module,
                ..
            }
        ),
        "told apart by its header"
    );
}

#[tokio::test]
async fn host_rules_hold_for_wasm_ticks() {
    let fault = |f: &str| GrantSpec {
        env: vec![format!("FAULT={f}")],
        ..Default::default()
    };
    for (f, rule) in [
        ("invalid_json", "not valid JSON"),
        ("stray_stdout", "not valid JSON"),
        ("jsonrpc_1", "jsonrpc must be"),
        ("null_id", "neither an integer id nor a method"),
        ("no_newline", "without a final newline"),
        ("update_null", "data is null"),
        ("update_seq", "seq 4 is not greater than 4"),
        (
            "protocol2",
            "unsupported Tick protocol version 2; this host speaks Tick protocol 3",
        ),
    ] {
        let why = refused(&hostile(), &fault(f)).await;
        assert!(why.contains(rule), "{f}: {why}");
    }
    let why = attempt_fails("misbehave", json!({}), &fault("both")).await;
    assert!(why.contains("both result and error"), "{why}");
    // WASI 0.2 carries only success or failure, so exit(7) arrives as status 1.
    let why = attempt_fails("misbehave", json!({}), &fault("exit_mid_call")).await;
    assert!(why.contains("exit status 1"), "{why}");
    let v = attempt("misbehave", json!({}), &fault("unknown_id")).await;
    assert_eq!(v, json!({"fine": true}));
}

/// Whether the Tick's screen shows `text` within the harness's patience
/// (the view parses on its own thread, so it may lag the Tick's drawing).
async fn shows(s: &Session, text: &str) -> bool {
    eventually_async(PATIENCE, || s.view().screen_text().wire().contains(text)).await
}

async fn start(engine: &Arc<WasmEngine>, config: SessionConfig) -> Session {
    open_on(engine, &hostile(), &GrantSpec::default(), config)
        .await
        .expect("the Tick starts")
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
    assert!(
        shows(&s, "hostile ready").await,
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
