//! Test harness shared by every module: what needs the `tickbox` binary
//! or the library crates here, over the workspace-wide harness of
//! `tickbox-test-support` (re-exported whole).

pub(crate) use crate::mcp_wire::{Start, StartHttp};
pub use tickbox_test_support::*;

use std::{path::Path, path::PathBuf, process::Command, process::Stdio};
use std::{time::Duration, time::Instant};

/// Runs `tickbox` with these args (and env), failing the test after 60 s.
pub fn tickbox_env<S: AsRef<str>>(args: &[S], env: &[(&str, &str)]) -> Output {
    tickbox_within(args, env, Duration::from_secs(60))
}

/// Runs `tickbox` with these args and environment, killing it (and failing
/// the test) after `limit`: for the few tests whose tickbox may take long
/// on a loaded machine without that being the failure.
pub fn tickbox_within<S: AsRef<str>>(args: &[S], env: &[(&str, &str)], limit: Duration) -> Output {
    tickbox_in(Path::new("."), args, env, limit)
}

/// [`tickbox_within`] with `cwd` as the working directory.
pub fn tickbox_in<S: AsRef<str>>(
    cwd: &Path,
    args: &[S],
    env: &[(&str, &str)],
    limit: Duration,
) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickbox"));
    cmd.current_dir(cwd);
    cmd.args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        // `CI` changes what `tickbox test` runs (only sandboxed Ticks): the
        // tests that need it set it themselves, whatever CI runs them.
        .env_remove("CI")
        // Compiled wasm goes to the build's own cache, not the user's home.
        .env("TICKBOX_CACHE_DIR", wasm_cache())
        // Pulled Ticks too (the registry tests give each test its own).
        .env("TICKBOX_STORE_DIR", target_dir().join("test-oci-store"))
        // Approvals are never read from or written to the user's home: a
        // store no test writes (the consent tests pass a private one each).
        .env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let shown = format!(
        "tickbox {:?}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>()
    );
    finish_within(cmd, &shown, limit)
}

/// Runs `tickbox` with these args.
pub fn tickbox<S: AsRef<str>>(args: &[S]) -> Output {
    tickbox_env(args, &[])
}

/// `tickbox <cmd> [extra...] -- <argv...>`
pub fn with_command(cmd: &[&str], argv: &[String]) -> Vec<String> {
    let mut v: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    v.push("--".into());
    v.extend(argv.iter().cloned());
    v
}

// ----- sessions through the library (langs.rs, toolchains.rs) -----

use serde_json::Value;
use std::sync::Arc;
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{self, WasmEngine, WasmSpec};
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig, SessionEvent};

/// An initialized session on a wasm Tick, in real time, through the library.
pub async fn open_wasm_session(
    engine: &Arc<WasmEngine>,
    path: PathBuf,
    grants: GrantSpec,
) -> Session {
    let spec = WasmSpec {
        path,
        args: vec![],
        grants: grants.resolve().expect("grants"),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    };
    let io = wasm::spawn(engine, &spec).await.expect("spawn wasm");
    Session::start(io, SessionConfig::default())
        .await
        .expect("initialize")
}

/// A `tickbox new` project, as generated, is out of this checkout's reach,
/// as on a machine with only the tickbox binary: outside the repository,
/// under no directory holding a `Cargo.toml` (cargo would take it for the
/// project's workspace), and no file of it names the repository's path.
pub fn out_of_the_checkouts_reach(project: &Path) {
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read the project") {
            let path = entry.expect("read the project").path();
            if path.is_dir() {
                files(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let root = root().canonicalize().expect("the repository");
    let project = project.canonicalize().expect("the project");
    assert!(
        !project.starts_with(&root),
        "{} is in the repository",
        project.display()
    );
    for dir in project.ancestors().skip(1) {
        assert!(
            !dir.join("Cargo.toml").exists(),
            "{} holds a Cargo.toml",
            dir.display()
        );
    }
    let mut all = Vec::new();
    files(&project, &mut all);
    assert!(!all.is_empty());
    let needle = root.to_string_lossy().into_owned();
    for file in all {
        let text = String::from_utf8_lossy(&std::fs::read(&file).expect("read")).into_owned();
        assert!(
            !text.contains(&needle),
            "{} names the repository ({needle})",
            file.display()
        );
    }
}

/// The tools of the Appendix A counter, in every language and in every
/// `tickbox new` project.
pub const COUNTER_TOOLS: [&str; 3] = ["increment", "history", "auto"];

/// The Appendix A counter's catalog, as every language's counter describes it.
pub fn assert_counter_catalog(d: &Value) {
    assert_counter_tools(d);
    assert_eq!(d["kind"], "example.counter");
}

/// A counter's tools, by name, and the `recover_with` tool among them.
pub fn assert_counter_tools(d: &Value) {
    assert_eq!(d["recover_with"], "history");
    let names: Vec<&str> = d["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, COUNTER_TOOLS, "{d}");
}

/// How long `tickbox test` may take on a `tickbox new` project's scenario:
/// a big component (Python, JavaScript) that is not in the compile cache
/// yet compiles for minutes on a loaded 2-core machine.
pub const PROJECT_SCENARIO_LIMIT: Duration = Duration::from_secs(600);

/// `tickbox test PROJECT/scenarios` (plus `extra` args, with `env`) on a
/// `tickbox new` project named `name` that was built: its one scenario,
/// `scenarios/NAME.scenario.toml`, runs the build's `NAME.wasm` and passes
/// every step.
pub fn project_scenario_passes(project: &Path, name: &str, extra: &[&str], env: &[(&str, &str)]) {
    let scenarios = project.join("scenarios");
    let file = scenarios.join(format!("{name}.scenario.toml"));
    assert!(file.is_file(), "no {}", file.display());
    let dir = scenarios.to_string_lossy().into_owned();
    let mut args = vec!["test", dir.as_str(), "--format", "json"];
    args.extend(extra);
    let out = tickbox_within(&args, env, PROJECT_SCENARIO_LIMIT);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let report = out.json();
    let ran = report["scenarios"].as_array().expect("scenarios");
    assert_eq!(ran.len(), 1, "{report}");
    assert_eq!(ran[0]["status"], "passed", "{report}");
    assert!(
        ran[0]["name"]
            .as_str()
            .unwrap_or("")
            .starts_with(&format!("{name}: ")),
        "the scenario is named after the project: {report}"
    );
    assert_eq!(ran[0]["steps"], ran[0]["passed_steps"], "{report}");
    assert!(ran[0]["steps"].as_u64() > Some(3), "{report}");
}

/// Calls `tool` and returns its result; any other outcome fails the test.
pub async fn call_ok(s: &Session, tool: &str, args: Value) -> Value {
    let c = s.descriptor().unwrap().prepare(tool, args).unwrap();
    match s.call(&c).await {
        CallOutcome::Ok(v) => v,
        other => panic!("{tool}: expected a result, got {other:?}"),
    }
}

/// Waits for the next `tick/update` whose data satisfies `want`; its seq
/// and data.
pub async fn update_where(
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

/// Waits for an update whose value is at least `value`; its seq.
pub async fn value_reaches(
    events: &mut tokio::sync::broadcast::Receiver<SessionEvent>,
    value: i64,
) -> u64 {
    let what = format!("a value of at least {value}");
    update_where(events, &what, |d| d["value"].as_i64() >= Some(value))
        .await
        .0
}

/// The Appendix A counter's `auto` timer fires while the Tick waits for
/// requests (five steps with no request in flight, one update each), and
/// `auto 0` stops it.
pub async fn timer_runs_between_requests(s: &Session) {
    let mut events = s.events();
    let first = s.read().await.unwrap();
    let start = first.data.wire()["value"].as_i64().unwrap();
    assert_eq!(
        call_ok(s, "auto", serde_json::json!({"every_ms": 20})).await,
        serde_json::json!({"every_ms": 20})
    );
    let running = Instant::now();
    let seq = value_reaches(&mut events, start + 5).await;
    // What five steps take on this machine now (100 ms when idle).
    let five_steps = running.elapsed();
    assert!(seq >= first.seq + 5, "one update per step: seq {seq}");
    screen_shows(s, "every 20 ms").await;
    call_ok(s, "auto", serde_json::json!({"every_ms": 0})).await;
    // Stopped: over twice the time five steps just took, at most the one
    // step that was under way lands, where a timer still running would add
    // about ten (it just did five in half the time). A slower machine
    // stretches the wait with the steps, so it cannot fail for being slow.
    let stopped = s.read().await.unwrap().seq;
    let quiet = (five_steps * 2).max(Duration::from_millis(300));
    // Fixed sleep: it shows that nothing happens (no more steps), and an
    // absence has no event to wait for.
    tokio::time::sleep(quiet).await;
    let after = s.read().await.unwrap().seq;
    assert!(
        after <= stopped + 1,
        "auto 0 stops the timer: seq {stopped} when stopped, {after} {quiet:?} later"
    );
}

/// Waits until the view's screen shows `needle`.
pub async fn screen_shows(s: &Session, needle: &str) -> String {
    shows(|| s.view().screen_text().wire().to_string(), needle).await
}
