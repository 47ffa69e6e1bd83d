//! The native backend: how a Tick is started, its PTY, and that nothing it
//! starts outlives the session.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tickbox_host::backend::native::{spawn, NativeSpec};
use tickbox_host::session::{CallOutcome, Session, SessionConfig};
use tickbox_test_support::*;

async fn probe(s: &Session, tool: &str) -> Value {
    let call = s.descriptor().unwrap().prepare(tool, json!({})).unwrap();
    match s.call(&call).await {
        CallOutcome::Ok(v) => v,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_tick_gets_a_pty_its_own_session_and_its_environment() {
    let dir = TempDir::new("probe-cwd");
    let mut spec = NativeSpec::new(["python3", &tick("probe.py")]);
    spec.cwd = Some(dir.0.clone());
    let s = Session::start(spawn(&spec).unwrap(), SessionConfig::default())
        .await
        .unwrap();
    let env = probe(&s, "env").await;
    assert!(
        env["instance_id"].as_str().is_some_and(|id| !id.is_empty()),
        "{env}"
    );
    assert_eq!(env["term"], "xterm-256color");
    assert!(env["executable"].as_str().unwrap().starts_with('/'));
    assert_eq!(
        env["cwd"].as_str().unwrap(),
        dir.0.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(env["stderr_isatty"], true, "stderr is the PTY");
    assert_eq!(
        (env["stdin_isatty"].clone(), env["stdout_isatty"].clone()),
        (json!(false), json!(false)),
        "protocol on pipes"
    );
    assert_eq!(env["controlling_tty"], true);
    assert_eq!(env["session_leader"], true);
    assert_eq!(env["foreground"], true);
    assert_eq!(env["size"], json!([120, 30]));
    // The PTY reader thread may still be delivering what the probe drew.
    assert!(
        eventually_async(PATIENCE, || s
            .view()
            .screen_text()
            .wire()
            .contains("probe ready"))
        .await,
        "{}",
        s.view().screen_text()
    );

    let first = probe(&s, "env").await["instance_id"].clone();
    let other = Session::start(spawn(&spec).unwrap(), SessionConfig::default())
        .await
        .unwrap();
    assert_ne!(
        probe(&other, "env").await["instance_id"],
        first,
        "unique per start"
    );
    other.shutdown().await;

    s.view().resize(100, 40);
    let ok = {
        let deadline = Instant::now() + PATIENCE;
        loop {
            // Each probe is a round trip to the Tick: the wait is paced by
            // its answers, not by a timer.
            let w = probe(&s, "winch").await;
            if w["winches"].as_u64().unwrap_or(0) >= 1 && w["size"] == json!([100, 40]) {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
        }
    };
    assert!(ok, "resizing the PTY sends SIGWINCH");
    s.shutdown().await;
}

#[tokio::test]
async fn argv0_is_resolved_to_an_absolute_path() {
    let s = Session::start(
        spawn(&NativeSpec::new(["python3", &tick("probe.py")])).unwrap(),
        SessionConfig::default(),
    )
    .await
    .unwrap();
    // python3 itself was found on PATH and started by absolute path.
    let exe = probe(&s, "env").await["executable"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(exe.starts_with('/'), "{exe}");
    s.shutdown().await;
}

#[tokio::test]
async fn a_well_behaved_tick_costs_no_waiting() {
    // The grace before SIGTERM made long (it is 500 ms): a host that waited
    // it out instead of seeing the counter exit on stdin EOF would take
    // 30 s; one that sees it takes as long as python3 needs to exit
    // (milliseconds; a few seconds at worst on a loaded machine).
    let mut spec = NativeSpec::new(["python3", &tick("counter.py")]);
    spec.exit_grace = Duration::from_secs(30);
    let s = Session::start(spawn(&spec).unwrap(), SessionConfig::default())
        .await
        .unwrap();
    let t = Instant::now();
    s.shutdown().await;
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        t.elapsed()
    );
}

/// A Tick that ignores stdin EOF and SIGTERM goes through the whole
/// escalation (grace, SIGTERM, grace, SIGKILL), with its group. The graces
/// are shortened: waiting them out is not what this test is about.
#[tokio::test]
async fn a_stubborn_tick_and_its_children_are_killed() {
    let dir = TempDir::new("stubborn");
    let pids = dir.path("pids");
    let mut spec = NativeSpec::new(faulty("stubborn"));
    spec.env
        .push(("TICK_PIDS".into(), pids.to_string_lossy().into_owned()));
    spec.exit_grace = Duration::from_millis(50);
    spec.term_grace = Duration::from_millis(50);
    let s = Session::start(spawn(&spec).unwrap(), SessionConfig::default())
        .await
        .unwrap();
    s.read().await.unwrap();
    s.shutdown().await;
    let text = std::fs::read_to_string(&pids).unwrap();
    let ids: Vec<i32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    for pid in ids {
        assert!(
            eventually(PATIENCE, || !alive(pid)),
            "pid {pid} outlived the session"
        );
    }
}

/// The native counter fixture (the one `tickbox run --record`'s tests
/// record) keeps keys that reach its terminal before it has set it up (it
/// enters cbreak first thing, with TCSANOW: tty's default TCSAFLUSH would
/// discard them). The keys are written the moment the process is spawned,
/// long before Python has started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_counter_keeps_keys_typed_while_it_starts() {
    let io = spawn(&NativeSpec::new([
        "python3".to_string(),
        tick("counter.py"),
    ]))
    .expect("spawn");
    io.view.send_input(b"+++");
    let s = Session::start(io, SessionConfig::default())
        .await
        .expect("initialize");
    let value = std::cell::RefCell::new(Value::Null);
    eventually_await(Duration::from_secs(20), || async {
        let now = s.read().await.expect("read").data.wire()["value"].clone();
        *value.borrow_mut() = now;
        *value.borrow() == json!(3)
    })
    .await;
    assert_eq!(
        value.into_inner(),
        json!(3),
        "keys typed at start were lost"
    );
    s.shutdown().await;
}
