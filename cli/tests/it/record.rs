//! `tickbox run --record FILE`: a live session driven through a real PTY —
//! keys, a resize, a mark, a call from the shell — is written as a
//! scenario that `tickbox test` replays green, and that fails once an
//! expectation in it is edited. (That the native counter fixture the
//! recordings use keeps keys typed while it starts is the native
//! backend's, in `host/tests/it/native.rs`.)

use crate::live::{rendered, World, WAIT};
use crate::util::*;
use serde_json::json;
use std::path::Path;

/// `tickbox read @NAME`'s `/data/value`.
fn value(w: &World, name: &str) -> serde_json::Value {
    let out = w.tickbox(&["read", &format!("@{name}")]);
    if out.code != 0 {
        return serde_json::Value::Null;
    }
    out.json()["data"]["value"].clone()
}

fn wait_value(w: &World, name: &str, want: i64) {
    let mut last = serde_json::Value::Null;
    assert!(
        eventually(WAIT, || {
            last = value(w, name);
            last == json!(want)
        }),
        "the value never became {want}; last {last}"
    );
}

/// How a recorded session ends.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Detach with the detach key then `d`, then `tickbox stop`.
    DetachThenStop,
    /// Detach with the detach key alone (the chord times out), then SIGTERM
    /// to the host.
    LoneDetachThenSigterm,
}

/// Runs `args` under `tickbox run --record FILE` on a PTY: `+` twice (one at
/// a time), a resize, a mark, a live `increment` call from the shell, then
/// detaches (the file is written) and ends the instance (written again).
/// Returns the scenario's text.
fn record_session(w: &World, name: &str, file: &Path, tick: &[&str], end: End) -> String {
    let file_arg = file.to_string_lossy().into_owned();
    let mut args = vec!["run", "--name", name, "--record", &file_arg];
    args.extend_from_slice(tick);
    let mut host = w.pty(&args, 100, 14);
    w.wait_for(name);
    assert!(eventually(WAIT, || !host.cooked()), "the view is raw");
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("REC 0 mark(s)")),
        "{}",
        rendered(&host.text())
    );
    host.type_keys(b"+");
    wait_value(w, name, 1);
    // Keys less than KEY_MERGE apart are one `text` step by design; the
    // wait above can take less than that now that commands start faster,
    // so the second key waits out the merge window (as a person's would).
    // Fixed sleep: the window is a span of time by design, with no event.
    std::thread::sleep(tickbox_runtime::scenario::KEY_MERGE * 3);
    host.type_keys(b"+");
    wait_value(w, name, 2);
    host.resize(90, 12);
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("90x11")),
        "{}",
        rendered(&host.text())
    );
    // The mark chord: the detach key, then `m`; it is not sent to the Tick.
    host.type_keys(b"\x1dm");
    assert!(
        eventually(WAIT, || rendered(&host.text()).contains("REC 1 mark(s)")),
        "{}",
        rendered(&host.text())
    );
    let out = w.tickbox(&[
        "call",
        &format!("@{name}"),
        "increment",
        r#"{"amount":1}"#,
        "--yes",
    ]);
    assert_eq!((out.code, &out.json()["value"]), (0, &json!(3)), "{out:#?}");
    // Detach (the detach key, then any key but `m`, or nothing for 1 s).
    let host_pid = w.wait_for(name)["pid"].as_i64().expect("host pid") as i32;
    match end {
        End::DetachThenStop => host.type_keys(b"\x1dd"),
        End::LoneDetachThenSigterm => host.type_keys(b"\x1d"),
    }
    assert_eq!(host.wait(), 0, "{}", host.text());
    assert!(
        eventually(WAIT, || std::fs::read_to_string(file)
            .is_ok_and(|t| t.contains("call = \"increment\""))),
        "written when the view detached"
    );
    assert_eq!(value(w, name), json!(3), "the chords reached no Tick");
    match end {
        End::DetachThenStop => assert_eq!(w.tickbox(&["stop", name]).code, 0),
        // SAFETY: kill has no memory-safety preconditions.
        End::LoneDetachThenSigterm => assert_eq!(unsafe { libc::kill(host_pid, libc::SIGTERM) }, 0),
    }
    // The host saves before it unpublishes: once gone, the file is final.
    assert!(eventually(WAIT, || w.ls().is_empty()), "{:?}", w.ls());
    std::fs::read_to_string(file).expect("the recording was written")
}

/// `tickbox test FILE --format json`.
fn replay(file: &Path) -> Output {
    tickbox(&["test", &file.to_string_lossy(), "--format", "json"])
}

fn assert_replays_and_fails_when_edited(file: &Path, text: &str) {
    let out = replay(file);
    assert_eq!(out.code, 0, "{text}\n{out:#?}");
    let report = out.json();
    assert_eq!(report["passed"], true, "{report}");
    let steps = report["scenarios"][0]["passed_steps"].as_u64().unwrap();
    assert!(steps >= 5, "{report}");

    // A wrong call expectation fails, with the step and the diff.
    let wrong = text.replace("result = { value = 3 }", "result = { value = 4 }");
    assert_ne!(wrong, text);
    std::fs::write(file, &wrong).unwrap();
    let out = tickbox(&["test", &file.to_string_lossy()]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stdout.contains("call increment"), "{out:#?}");
    assert!(
        out.stdout.contains('4') && out.stdout.contains('3'),
        "{out:#?}"
    );

    // So does a snapshot that no longer matches the screen.
    std::fs::write(file, text).unwrap();
    let snap = file.with_file_name(format!(
        "{}.mark-1.snap",
        file.file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".scenario.toml")
    ));
    let shown = std::fs::read_to_string(&snap).unwrap();
    std::fs::write(&snap, shown.replace("Counter: 2", "Counter: 5")).unwrap();
    let out = tickbox(&["test", &file.to_string_lossy()]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stdout.contains("Counter: 5"), "{out:#?}");
    std::fs::write(&snap, shown).unwrap();
    assert_eq!(replay(file).code, 0, "restored, green again");
}

#[test]
fn a_recorded_wasm_session_replays_green_on_virtual_time() {
    let w = World::new("record-wasm");
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let t = TempDir::new("record-wasm-out");
    let file = t.path("live.scenario.toml");
    let text = record_session(
        &w,
        "rc",
        &file,
        &[&wasm.to_string_lossy()],
        End::DetachThenStop,
    );
    // What the session did, in the scenario's own terms.
    for want in [
        "deterministic = true",
        "size = [120, 30]",
        "[[step]]\nkey = \"+\"\n",
        "resize = [100, 13]",
        "resize = [90, 11]",
        "expect_screen = { snapshot = \"mark-1\" }",
        "call = \"increment\"\nargs = { amount = 1 }\nresult = { value = 3 }",
        "advance = \"",
    ] {
        assert!(text.contains(want), "{want:?} missing in:\n{text}");
    }
    assert_eq!(text.matches("key = \"+\"").count(), 2, "{text}");
    assert!(
        !text.contains("key = \"m\""),
        "the chord is not a key: {text}"
    );
    let snap = std::fs::read_to_string(t.path("live.mark-1.snap")).unwrap();
    assert!(snap.contains("Counter: 2"), "{snap}");
    assert!(!snap.lines().any(|l| l.ends_with(' ')), "trimmed: {snap:?}");
    assert_replays_and_fails_when_edited(&file, &text);
}

/// Every grant and bound of the session is written (the one grant type),
/// and the recording replays green with them.
#[test]
fn a_recording_keeps_every_grant_and_bound() {
    let w = World::new("record-grants");
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let t = TempDir::new("record-grants-out");
    std::fs::create_dir_all(t.path("data")).unwrap();
    let file = t.path("grants.scenario.toml");
    let data = format!("{}::/data:rw,max=2MiB", t.path("data").display());
    let text = record_session(
        &w,
        "rg",
        &file,
        &[
            "--dir",
            &data,
            "--allow-http",
            "http://127.0.0.1:9",
            "--max-write",
            "1MiB",
            "--max-handles",
            "64",
            "--max-memory",
            "128MiB",
            "--env",
            "MODE=fast",
            &wasm.to_string_lossy(),
        ],
        End::DetachThenStop,
    );
    for want in [
        format!("dir = [{data:?}]"),
        "allow_http = [\"http://127.0.0.1:9\"]".into(),
        "env = [\"MODE=fast\"]".into(),
        "max_memory = \"128MiB\"".into(),
        "max_handles = \"64\"".into(),
        "max_write = \"1MiB\"".into(),
    ] {
        assert!(text.contains(&want), "{want} missing in:\n{text}");
    }
    assert!(!text.contains("Not recorded"), "{text}");
    assert_replays_and_fails_when_edited(&file, &text);
}

#[test]
fn a_recorded_native_session_replays_green_on_real_time() {
    let w = World::new("record-native");
    let t = TempDir::new("record-native-out");
    let file = t.path("native.scenario.toml");
    let counter = tick("counter.py");
    let text = record_session(
        &w,
        "rn",
        &file,
        &["--", "python3", &counter],
        End::LoneDetachThenSigterm,
    );
    assert!(!text.contains("deterministic"), "{text}");
    assert!(!text.contains("advance"), "real time: {text}");
    assert!(text.contains("command = [\"python3\""), "{text}");
    assert!(text.contains("timeout = \"10s\""), "a mark waits: {text}");
    assert_replays_and_fails_when_edited(&file, &text);
}

#[test]
fn record_refuses_a_file_it_cannot_write() {
    let w = World::new("record-bad");
    let t = TempDir::new("record-bad-out");
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let out = w.tickbox(&[
        "run",
        "--record",
        &t.path("no/such/dir/x.scenario.toml").to_string_lossy(),
        &wasm.to_string_lossy(),
    ]);
    out.expect(2, "cannot write in");
    let out = w.tickbox(&[
        "run",
        "--record",
        &t.0.to_string_lossy(),
        &wasm.to_string_lossy(),
    ]);
    out.expect(2, "is a directory");
}
