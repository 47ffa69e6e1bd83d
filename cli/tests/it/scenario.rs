//! `tickbox test`: the committed scenarios for every example pass, a
//! deliberately wrong one fails with a readable diff, virtual time makes
//! screens byte-identical across runs, and every exit code is reachable.

use crate::util::*;
use std::path::{Path, PathBuf};

/// The directory the wasm examples are built into, as scenarios name it
/// (`${TICKBOX_WASM_DIR}/counter.wasm`).
pub(crate) fn wasm_dir() -> String {
    // Building one example builds the whole examples workspace.
    let counter = build_wasm("examples", "counter", "wasm32-wasip2");
    counter
        .parent()
        .expect("wasm dir")
        .to_string_lossy()
        .into_owned()
}

fn test(args: &[&str]) -> Output {
    let dir = wasm_dir();
    // Scenarios read only the variables the command line allows.
    let mut argv = vec!["test".to_string(), "--allow-env=TICKBOX_WASM_DIR".into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    tickbox_env(&argv, &[("TICKBOX_WASM_DIR", dir.as_str())])
}

/// The C counter's build directory (`examples/c`, built once per run by
/// `langs::c_counter`), which its scenarios name as `${TICKBOX_C_DIR}`.
pub(crate) fn c_dir() -> String {
    let (module, _) = crate::langs::c_counter();
    module
        .parent()
        .expect("c dir")
        .to_string_lossy()
        .into_owned()
}

fn repo(p: &str) -> String {
    root().join(p).to_string_lossy().into_owned()
}

#[test]
fn every_example_scenario_passes() {
    let (wasm, c) = (wasm_dir(), c_dir());
    // The Go, Python and JavaScript examples, built (and compiled into the
    // tests' cache) once per test process by the toolchain tests' helper.
    let lang_dir = |lang| {
        let wasm = crate::toolchains::example(lang);
        wasm.parent().unwrap().to_string_lossy().into_owned()
    };
    let go = lang_dir(crate::toolchains::GO);
    let python = lang_dir(crate::toolchains::PYTHON);
    let js = lang_dir(crate::toolchains::JS);
    // Every example at once, each a fresh instance (the Python and
    // JavaScript components are big): a minute was not always enough at a
    // load average of 12, and time is not what this test checks.
    let out = tickbox_within(
        &[
            "test",
            &repo("examples"),
            "--format",
            "json",
            "--allow-env=TICKBOX_WASM_DIR",
            "--allow-env=TICKBOX_C_DIR",
            "--allow-env=TICKBOX_GO_DIR",
            "--allow-env=TICKBOX_PYTHON_DIR",
            "--allow-env=TICKBOX_JS_DIR",
        ],
        &[
            ("TICKBOX_WASM_DIR", wasm.as_str()),
            ("TICKBOX_C_DIR", c.as_str()),
            ("TICKBOX_GO_DIR", go.as_str()),
            ("TICKBOX_PYTHON_DIR", python.as_str()),
            ("TICKBOX_JS_DIR", js.as_str()),
        ],
        PROJECT_SCENARIO_LIMIT,
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let report = out.json();
    assert_eq!(report["format"], 1);
    assert_eq!(report["passed"], true);
    let names: Vec<&str> = report["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap())
        .collect();
    for example in [
        "counter",
        "dashboard",
        "fetch",
        "notes",
        "ticker",
        "c",
        "go",
        "python",
        "js",
    ] {
        assert!(
            names
                .iter()
                .any(|n| n.contains(&format!("examples/{example}/"))),
            "no scenario for {example}: {names:?}"
        );
    }
    for s in report["scenarios"].as_array().unwrap() {
        assert_eq!(s["status"], "passed", "{s}");
        assert_eq!(
            s["written"],
            serde_json::json!([]),
            "a plain run writes nothing"
        );
        let native = s["file"]
            .as_str()
            .unwrap()
            .ends_with("-native.scenario.toml");
        assert_eq!(
            s["seed"].is_u64(),
            !native,
            "wasm scenarios are deterministic: {s}"
        );
    }
}

#[test]
fn a_native_scenario_runs_on_real_time() {
    let out = test(&[
        &repo("tests/scenarios/native-counter.scenario.toml"),
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    let s = &out.json()["scenarios"][0];
    assert_eq!(s["status"], "passed");
    assert_eq!(
        s["seed"],
        serde_json::Value::Null,
        "native Ticks are not deterministic"
    );
}

/// Copies the files `names` of the repository's directory `from` into `to`.
fn copy_into(from: &str, names: &[&str], to: &Path) {
    for name in names {
        std::fs::copy(root().join(from).join(name), to.join(name))
            .unwrap_or_else(|e| panic!("copy {from}/{name}: {e}"));
    }
}

/// `tests/scenarios/failing` copied into a fresh directory: a failing
/// snapshot step writes `NAME.snap.new` beside its snapshot when `CI` is
/// set (as on a CI runner), and a test must not write into the source tree.
fn failing_copy() -> (TempDir, String) {
    let t = TempDir::new("failing-copy");
    copy_into(
        "tests/scenarios/failing",
        &[
            "counter-wrong-screen.scenario.toml",
            "counter-wrong-screen.one.snap",
            "counter-wrong-state.scenario.toml",
        ],
        &t.0,
    );
    let dir = t.0.to_string_lossy().into_owned();
    (t, dir)
}

#[test]
fn a_wrong_expectation_fails_with_a_readable_diff() {
    let (_t, failing) = failing_copy();
    let out = test(&[&failing]);
    out.expect(1, "test: 2 of 2 scenarios failed");
    let text = &out.stdout;
    // The state diff: the step, the expectation, each difference, the value.
    for line in [
        "FAIL    counter with a wrong state expectation",
        "step 2: expect_state",
        "expected: expect the state contains {\"recent\":[{\"seq\":1,\"value\":3}],\"value\":3}",
        "/recent/0/value: expected 3, found 1",
        "/value: expected 3, found 1",
        "state: {\"recent\":[{\"seq\":1,\"value\":1}],\"value\":1}",
        "(virtual time, seed 0: rerun with that seed to reproduce)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // The screen diff against the committed snapshot.
    for line in [
        "FAIL    counter with a wrong snapshot",
        "step 2: expect_screen",
        "expected: expect screen equals snapshot \"one\"",
        "screen diff (- snapshot, + screen):",
        "-   2 |│Counter: 5                            │",
        "+   2 |│Counter: 1                            │",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(text.contains("FAILED: 0 passed, 2 failed"), "{text}");
    // The same failure in JUnit: one <failure> per scenario.
    let junit = test(&[&failing, "--format", "junit"]);
    assert_eq!(junit.code, 1);
    assert!(junit.stdout.starts_with("<?xml"), "{junit:#?}");
    assert!(
        junit
            .stdout
            .contains("tests=\"2\" failures=\"2\" errors=\"0\""),
        "{}",
        junit.stdout
    );
    assert_eq!(junit.stdout.matches("<failure message=").count(), 2);
    assert!(junit.stdout.contains("/value: expected 3, found 1"));
}

/// Copies a scenario under `n` names into a temp dir (its snapshots go
/// beside each copy).
fn copies(t: &TempDir, from: &str, n: usize) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root().join(from)).expect("read scenario");
    (0..n)
        .map(|i| {
            let p = t.path(&format!("run{i:02}.scenario.toml"));
            std::fs::write(&p, &text).expect("write copy");
            p
        })
        .collect()
}

fn snapshots(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".snap"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn virtual_time_gives_identical_screens_on_every_run() {
    // 20 runs of the ticker scenario (timer-driven, advanced by virtual
    // time), in parallel, each writing its own snapshot.
    let t = TempDir::new("scenario-twenty");
    let files = copies(&t, "examples/ticker/scenarios/ticker.scenario.toml", 20);
    let dir = t.0.to_string_lossy().into_owned();
    let out = test(&[&dir, "--update", "-j", "4", "--format", "json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let snaps = snapshots(&t.0);
    assert_eq!(snaps.len(), files.len(), "one snapshot per run: {snaps:?}");
    let first = &snaps[0].1;
    assert!(
        String::from_utf8_lossy(first).contains("sample #5"),
        "{}",
        String::from_utf8_lossy(first)
    );
    for (name, bytes) in &snaps {
        assert_eq!(bytes, first, "{name} differs from {}", snaps[0].0);
    }
    // And the committed snapshot is exactly what these runs drew.
    let committed =
        std::fs::read(root().join("examples/ticker/scenarios/ticker.after-a-minute.snap")).unwrap();
    assert_eq!(&committed, first);
    // A second plain run compares against them and rewrites nothing.
    let again = test(&[&dir, "--format", "json"]);
    assert_eq!(again.code, 0, "{again:#?}");
    assert_eq!(snapshots(&t.0), snaps);
}

#[test]
fn update_writes_snapshots_trimmed_and_a_changed_screen_then_fails() {
    let t = TempDir::new("scenario-update");
    let wasm = format!("{}/counter.wasm", wasm_dir());
    let file = t.path("c.scenario.toml");
    let write = |keys: &str| {
        std::fs::write(
            &file,
            format!(
                "[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nkeys = [{keys}]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"
            ),
        )
        .unwrap();
    };
    write("\"+\"");
    let missing = test(&[&file.to_string_lossy()]);
    missing.expect(1, "1 of 1 scenario failed");
    // The screen waits beside it for review; nothing else is written.
    assert!(
        missing
            .stdout
            .contains("c.end.snap.new: accept or reject it with `tickbox test review`"),
        "{missing:#?}"
    );
    assert!(!t.path("c.end.snap").exists());
    let pending = std::fs::read_to_string(t.path("c.end.snap.new")).unwrap();
    assert!(pending.contains("Counter: 1"), "{pending}");

    // In CI snapshots are never written.
    let ci = tickbox_env(
        &[
            "test",
            "--allow-env=TICKBOX_WASM_DIR",
            &file.to_string_lossy(),
            "--update",
        ],
        &[("TICKBOX_WASM_DIR", wasm_dir().as_str()), ("CI", "true")],
    );
    ci.expect(2, "never written when CI is set");
    let out = test(&[&file.to_string_lossy(), "--update"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("wrote "), "{out:#?}");
    assert!(
        !t.path("c.end.snap.new").exists(),
        "--update answers the pending screen"
    );
    let snap = std::fs::read_to_string(t.path("c.end.snap")).unwrap();
    assert!(snap.contains("Counter: 1"), "{snap}");
    assert!(
        snap.lines().all(|l| l == l.trim_end()),
        "trailing spaces trimmed: {snap:?}"
    );
    assert!(snap.ends_with("┘\n"), "{snap:?}");

    // Two presses now: the snapshot no longer matches.
    write("\"+\", \"+\"");
    let out = test(&[&file.to_string_lossy()]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(out.stdout.contains("+   2 |│Counter: 2"), "{out:#?}");
}

#[test]
fn exit_codes_usage_invalid_and_start_failure() {
    // Invalid scenarios: a native Tick cannot advance virtual time; a step
    // with two actions. Exit 2, each named.
    let out = test(&[&repo("tests/scenarios/invalid")]);
    out.expect(2, "2 scenarios are invalid");
    assert!(
        out.stdout
            .contains("step 1: advance needs virtual time: a native Tick runs on real time"),
        "{out:#?}"
    );
    assert!(
        out.stdout
            .contains("step 1: several actions (key, resize): one per step"),
        "{out:#?}"
    );

    // Virtual time and scratch directories are for wasm Ticks only.
    let t0 = TempDir::new("scenario-native-only");
    let counter = tick("counter.py");
    for (extra, why) in [
        (
            "deterministic = true",
            "deterministic = true applies to wasm Ticks",
        ),
        (
            "scratch = \"/data\"",
            "[tick] scratch applies to wasm Ticks",
        ),
    ] {
        let file = t0.path("native.scenario.toml");
        std::fs::write(
            &file,
            format!(
                "[tick]\ncommand = [\"python3\", {counter:?}]\n{extra}\n[[step]]\nkey = \"+\"\n"
            ),
        )
        .unwrap();
        let out = test(&[&file.to_string_lossy()]);
        out.expect(2, "test: 1 scenario is invalid");
        assert!(out.stdout.contains(why), "{out:#?}");
    }

    // A Tick that cannot start: exit 3.
    let t = TempDir::new("scenario-start");
    let file = t.path("gone.scenario.toml");
    std::fs::write(
        &file,
        "[tick]\npath = \"missing.wasm\"\n[[step]]\nkey = \"+\"\n",
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy(), "--format", "json"]);
    out.expect(3, "test: the Tick of 1 scenario could not start");
    assert_eq!(out.json()["scenarios"][0]["status"], "start_failed");

    // Usage: nothing found, -j 0, a filter that matches nothing.
    test(&[&t.0.join("nothing-here").to_string_lossy()]).expect(2, "nothing-here");
    test(&[&repo("tests/scenarios/failing"), "-j", "0"]).expect(2, "-j must be at least 1");
    test(&[&repo("tests/scenarios/failing"), "--filter", "no-such-name"])
        .expect(2, "--filter matched no scenario");
}

#[test]
fn filter_selects_by_name_or_path() {
    let out = test(&[
        &repo("tests/scenarios/failing"),
        "--filter",
        "wrong-state",
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 1, "{out:#?}");
    let r = out.json();
    assert_eq!(r["scenarios"].as_array().unwrap().len(), 1);
    assert_eq!(
        r["scenarios"][0]["name"],
        "counter with a wrong state expectation"
    );
}

/// The clockwork guest reports its wall and monotonic clocks and random
/// bytes; a scenario whose last step expects an empty result fails and
/// shows what it reported.
fn clockwork_reading(t: &TempDir, deterministic: &str, seed: &str) -> (Output, serde_json::Value) {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let file = t.path(&format!("clock-{deterministic}-{seed}.scenario.toml"));
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\n{deterministic}\n\n[[step]]\ncall = \"now\"\nresult = {{}}\n",
            wasm.to_string_lossy()
        ),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy(), "--seed", seed, "--format", "json"]);
    assert_eq!(out.code, 1, "{out:#?}");
    let found = out.json()["scenarios"][0]["failure"]["found"][0]
        .as_str()
        .unwrap()
        .to_string();
    let json = found.strip_prefix("result ").expect("a result line");
    (out, serde_json::from_str(json).expect("the result as JSON"))
}

#[test]
fn a_wasm_ticks_clocks_and_randomness_are_virtual_and_seeded() {
    let t = TempDir::new("scenario-clock");
    let (out, a) = clockwork_reading(&t, "", "1");
    assert_eq!(out.json()["scenarios"][0]["seed"], 1);
    // 2000-01-01T00:00:00Z, and no monotonic time passes by itself.
    assert_eq!(a["wall_secs"], 946_684_800, "{a}");
    assert_eq!(a["wall_nanos"], 0, "{a}");
    assert_eq!(a["mono_ns"], 0, "{a}");
    let (_, b) = clockwork_reading(&t, "", "1");
    assert_eq!(a, b, "the same seed gives the same random bytes");
    let (_, c) = clockwork_reading(&t, "", "2");
    assert_ne!(a["random"], c["random"], "another seed, other bytes");
    assert_ne!(a["hash"], c["hash"], "std's RandomState is seeded too");
    assert_eq!(a["random"].as_str().unwrap().len(), 32);

    // Opting out: real clocks (now is well after 2000) and real randomness.
    let (out, r) = clockwork_reading(&t, "deterministic = false", "1");
    assert_eq!(out.json()["scenarios"][0]["seed"], serde_json::Value::Null);
    assert!(r["wall_secs"].as_u64().unwrap() > 1_700_000_000, "{r}");
    assert_ne!(r["random"], a["random"]);
}

#[test]
fn advance_moves_the_clocks_a_guest_reads() {
    let t = TempDir::new("scenario-advance");
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let file = t.path("advance.scenario.toml");
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\n\n[[step]]\nadvance = \"90s\"\n\n[[step]]\ncall = \"now\"\nresult_subset = {{ wall_secs = 946684890, mono_ns = 90000000000 }}\n\n[[step]]\nadvance = \"250ms\"\n\n[[step]]\ncall = \"now\"\nresult_subset = {{ wall_nanos = 250000000, mono_ns = 90250000000 }}\n",
            wasm.to_string_lossy()
        ),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy()]);
    assert_eq!(out.code, 0, "{out:#?}");
}

#[test]
fn wait_for_on_virtual_time_jumps_to_the_guests_timers_within_its_timeout() {
    let t = TempDir::new("scenario-wait");
    let wasm = format!("{}/dashboard.wasm", wasm_dir());
    let file = t.path("wait.scenario.toml");
    // A 5-second job: a 2 s wait cannot see it finish, and says why.
    std::fs::write(
        &file,
        format!("[tick]\npath = {wasm:?}\n\n[[step]]\nkey = \"n\"\n\n[[step]]\nwait_for = {{ pointer = \"/jobs/0/status\", equals = \"done\" }}\ntimeout = \"2s\"\n"),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy()]);
    out.expect(1, "1 of 1 scenario failed");
    for line in [
        "/jobs/0/status: expected \"done\", found \"running\"",
        "timed out: +2s of virtual time passed and the guest's next timer is at +2.1s, past the 2s timeout",
    ] {
        assert!(out.stdout.contains(line), "missing {line:?}: {out:#?}");
    }
    // A Tick with no timer left cannot change by itself: the wait ends at once.
    let wasm = format!("{}/counter.wasm", wasm_dir());
    std::fs::write(
        &file,
        format!("[tick]\npath = {wasm:?}\n\n[[step]]\nwait_for = {{ pointer = \"/value\", equals = 1 }}\ntimeout = \"10m\"\n"),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy()]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(
        out.stdout.contains("the guest is idle with no timer pending after +0ns of virtual time: nothing can change any more"),
        "{out:#?}"
    );
    assert!(out.elapsed < std::time::Duration::from_secs(30), "{out:#?}");
}

#[test]
fn the_jobs_bound_is_enforced() {
    let dir = repo("tests/scenarios/native-counter.scenario.toml");
    test(&[&dir, "-j", "257"]).expect(2, "-j 257 is over the limit of 256");
    // Positive control: the limit itself is accepted.
    let out = test(&[&dir, "-j", "256"]);
    assert_eq!(out.code, 0, "{out:#?}");
}

/// A guest that waits for input in a blocking read of stdin (std's
/// `lines()`, not `wasi:io/poll`) is idle too: no step waits for it. A
/// guest that computes is never idle: the runner waits its bound, says so in
/// the report, and goes on.
#[test]
fn a_guest_in_a_blocking_read_is_idle_and_a_busy_one_is_noted_not_hung() {
    let wasm = build_wasm("tests/guests", "benchtick", "wasm32-wasip2");
    let t = TempDir::new("scenario-busy");
    let file = t.path("busy.scenario.toml");
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\n\n[[step]]\ncall = \"get\"\nresult = {{ value = 0 }}\n\n[[step]]\nexpect_state = {{ pointer = \"/value\", equals = 0 }}\n",
            wasm.to_string_lossy()
        ),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy(), "--format", "json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let report = out.json();
    assert_eq!(
        report["scenarios"][0]["notes"],
        serde_json::json!([]),
        "{report}"
    );

    // Busy: a tool that spins until its call timeout.
    let hostile = hostile();
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {hostile:?}\ncall_timeout = \"1s\"\n\n[[step]]\ncall = \"spin\"\nerror = 1\n"
        ),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy(), "--format", "json"]);
    assert_eq!(out.code, 1, "{out:#?}");
    let report = out.json();
    let s = &report["scenarios"][0];
    assert!(
        s["notes"]
            .to_string()
            .contains("did not become idle within 5s"),
        "{report}"
    );
    assert!(
        s["failure"]["found"]
            .to_string()
            .contains("unknown outcome"),
        "{report}"
    );
}

/// The runner's bound on timer jumps in one `wait_for`, through the library.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_stops_at_the_jump_bound() {
    use std::sync::Arc;
    use tickbox_runtime::backend::wasm::{WasmEngine, WasmSpec};
    use tickbox_runtime::scenario::{self, Outcome, Prepared, RunOptions, TickKind};
    use tickbox_runtime::Launcher;
    let wasm_path = PathBuf::from(format!("{}/dashboard.wasm", wasm_dir()));
    let engine = WasmEngine::new(None).expect("engine");
    let spec = WasmSpec {
        path: wasm_path.clone(),
        args: vec![],
        grants: Default::default(),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    };
    let launcher = Launcher::Wasm {
        engine,
        spec,
        kind: tickbox_runtime::backend::wasm::WasmKind::Component,
    };
    let prepared = Prepared {
        kind: TickKind::WasmComponent,
        launch: Arc::new(launcher),
    };
    let text = format!(
        "[tick]\npath = {:?}\n\n[[step]]\nkey = \"n\"\n\n[[step]]\nwait_for = {{ pointer = \"/jobs/0/status\", equals = \"done\" }}\n",
        wasm_path.to_string_lossy()
    );
    let s = scenario::parse(&text, Path::new("jump.scenario.toml"), &Default::default())
        .expect("parses");
    let run = |max| {
        let opts = RunOptions {
            max_wait_jumps: max,
            ..RunOptions::default()
        };
        let (s, prepared) = (s.clone(), prepared.clone());
        async move { scenario::run(&s, &prepared, &opts).await }
    };
    // The job needs 50 jumps of 100 ms.
    let r = run(10).await;
    match &r.outcome {
        Outcome::Failed(f) => {
            assert_eq!(f.step, 2);
            assert!(
                f.found.iter().any(|l| l.contains("gave up after 10 timer jumps (the limit), at +1s virtual")),
                "{f:?}"
            );
        }
        o => panic!("{o:?}"),
    }
    // Positive control: a bound the wait fits in.
    assert_eq!(run(50).await.outcome, Outcome::Passed);
}

/// A preview-1 module reads virtual clocks too, but its sleeps are real, so
/// `advance` is refused for it.
#[test]
fn a_preview1_module_gets_virtual_readings_and_no_advance() {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip1");
    let t = TempDir::new("scenario-p1");
    let file = t.path("p1.scenario.toml");
    let tick = format!("[tick]\npath = {:?}\n", wasm.to_string_lossy());
    std::fs::write(
        &file,
        format!("{tick}\n[[step]]\ncall = \"now\"\nresult_subset = {{ wall_secs = 946684800, mono_ns = 0 }}\n"),
    )
    .unwrap();
    let out = test(&[&file.to_string_lossy()]);
    assert_eq!(out.code, 0, "{out:#?}");
    std::fs::write(&file, format!("{tick}\n[[step]]\nadvance = \"1s\"\n")).unwrap();
    let out = test(&[&file.to_string_lossy()]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(
        out.stdout.contains(
            "a preview-1 module's timers wait real time; advance needs a component (wasm32-wasip2)"
        ),
        "{out:#?}"
    );
}

/// A tool that sleeps on a timer inside the call returns on virtual time:
/// the clock jumps to its timer while the guest is idle and the call is in
/// flight (up to the call timeout of virtual time), so the call takes no
/// real time; a sleep past the call timeout is not jumped and times out.
#[test]
fn a_call_that_sleeps_moves_virtual_time() {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let t = TempDir::new("scenario-nap");
    let file = t.path("nap.scenario.toml");
    let scenario = |call_timeout: &str, seconds: u64| {
        format!(
            "[tick]\npath = {:?}\ncall_timeout = \"{call_timeout}\"\n\n[[step]]\ncall = \"nap\"\nargs = {{ seconds = {seconds} }}\nresult = {{ slept_ns = {} }}\n",
            wasm.to_string_lossy(),
            seconds * 1_000_000_000
        )
    };
    // 50 s of sleep inside one call, well within a 60 s call timeout.
    std::fs::write(&file, scenario("60s", 50)).unwrap();
    let out = test(&[&file.to_string_lossy(), "--format", "json"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let report = out.json();
    let ms = report["scenarios"][0]["duration_ms"]
        .as_f64()
        .expect("duration_ms");
    assert!(ms < 30_000.0, "the sleep was virtual: {report}");
    // Past the call timeout: not jumped, so the call times out (2 s real).
    std::fs::write(&file, scenario("2s", 5)).unwrap();
    let out = test(&[&file.to_string_lossy()]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stdout.contains("unknown outcome"), "{out:#?}");
}

/// `--shard K/N` through the wire: N runs of the same suite report
/// disjoint sets of scenario files whose union is the whole suite (a CI
/// matrix's runners), each on its own; an empty shard is not a failure.
#[test]
fn shards_split_a_suite_into_disjoint_parts_that_cover_it() {
    let t = TempDir::new("shards");
    // Twelve scenarios that are refused before any Tick starts (a native
    // Tick under --sandboxed-only): the report still names each file.
    for i in 0..12 {
        std::fs::write(
            t.path(&format!("s{i:02}.scenario.toml")),
            format!("name = \"s{i}\"\n[tick]\ncommand = [\"true\"]\n[[step]]\nkeys = [\"a\"]\n"),
        )
        .unwrap();
    }
    let dir = t.0.display().to_string();
    let files = |args: &[&str]| -> Vec<String> {
        let mut argv = vec![dir.as_str(), "--sandboxed-only", "--format", "json"];
        argv.extend(args);
        let out = test(&argv);
        if out.stdout.trim().is_empty() || out.json()["scenarios"].as_array().unwrap().is_empty() {
            return Vec::new();
        }
        assert_eq!(out.code, 2, "{out:#?}");
        out.json()["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["file"].as_str().unwrap().to_string())
            .collect()
    };
    let all = files(&[]);
    assert_eq!(all.len(), 12);
    for n in [2, 3, 5] {
        let mut union = Vec::new();
        for k in 1..=n {
            let part = files(&["--shard", &format!("{k}/{n}")]);
            assert!(part.len() < 12 || n == 1, "shard {k}/{n} took everything");
            union.extend(part);
        }
        union.sort();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(union, sorted, "{n} shards: disjoint and complete");
    }
    test(&[dir.as_str(), "--shard", "3/2"]).expect(2, "shard \"3/2\": give K/N");
}

/// `--retries N`: a scenario that fails and then passes is reported as
/// flaky in the text and JUnit reports (exit 0, never plain green); without
/// retries the same first failure fails the run.
#[test]
fn a_scenario_that_passes_on_retry_is_reported_flaky() {
    let t = TempDir::new("flaky");
    let counter = repo("tests/ticks/counter.py");
    // The Tick exits at once on its first start, and runs on its second.
    let scenario = t.path("flaky.scenario.toml");
    std::fs::write(
        &scenario,
        format!(
            "name = \"flaky start\"\n[tick]\ncommand = [\"sh\", \"-c\", \"if [ -e started ]; then exec python3 {counter}; else touch started; exit 1; fi\"]\n\n[[step]]\ncall = \"increment\"\nargs = {{ amount = 2 }}\nresult = {{ value = 2 }}\n"
        ),
    )
    .unwrap();
    let file = scenario.display().to_string();
    let out = test(&[&file]);
    assert_eq!(out.code, 3, "{out:#?}");
    std::fs::remove_file(t.path("started")).unwrap();
    let out = test(&[&file, "--retries", "1"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.starts_with("FLAKY"), "{out:#?}");
    assert!(
        out.stdout.contains("attempt 1 failed (start_failed)"),
        "{out:#?}"
    );
    assert!(out.stdout.contains("1 passed (1 flaky)"), "{out:#?}");
    std::fs::remove_file(t.path("started")).unwrap();
    let out = test(&[&file, "--retries", "1", "--format", "junit"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout.contains("<flakyFailure message="),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("<failure"), "{}", out.stdout);
    test(&[&file, "--retries", "11"]).expect(2, "--retries 11 is over the limit");
}

/// `${NAME:-DEFAULT}`: the example scenarios run as checked out, next to
/// the documented build's output, without exporting or allowing anything;
/// a variable the command line allows still wins.
#[test]
fn example_scenarios_run_without_exporting_variables() {
    let t = TempDir::new("defaults");
    let scenarios = t.path("counter/scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    copy_into(
        "examples/counter/scenarios",
        &[
            "counter.scenario.toml",
            "counter.start.snap",
            "counter.after.snap",
        ],
        &scenarios,
    );
    // Where `cargo build --manifest-path examples/Cargo.toml` puts it,
    // relative to the scenario.
    let release = t.path("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&release).unwrap();
    std::fs::copy(
        build_wasm("examples", "counter", "wasm32-wasip2"),
        release.join("counter.wasm"),
    )
    .unwrap();
    let dir = t.path("counter").display().to_string();
    let out = tickbox_env(
        &["test", dir.as_str()],
        &[("TICKBOX_WASM_DIR", "/nonexistent")],
    );
    assert_eq!(out.code, 0, "not allowed, so not read: {out:#?}");
    let out = tickbox_env(
        &["test", dir.as_str(), "--allow-env", "TICKBOX_WASM_DIR"],
        &[("TICKBOX_WASM_DIR", "/nonexistent")],
    );
    out.expect(3, "could not start");
    assert!(out.stdout.contains("/nonexistent/counter.wasm"), "{out:#?}");
}

/// The review flow: a mismatch leaves NAME.snap.new; `tickbox test review`
/// lists it when no one can answer, `--accept` makes it the snapshot (the
/// scenario then passes), `--reject` drops it, and a .snap no scenario
/// uses is reported.
#[test]
fn pending_snapshots_are_reviewed_accepted_or_rejected() {
    let t = TempDir::new("review");
    let wasm = format!("{}/counter.wasm", wasm_dir());
    let file = t.path("c.scenario.toml");
    let write = |keys: &str| {
        std::fs::write(
            &file,
            format!(
                "[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nkeys = [{keys}]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"
            ),
        )
        .unwrap();
    };
    let dir = t.0.display().to_string();
    let review = |extra: &[&str]| {
        let mut a = vec!["test", "review", dir.as_str()];
        a.extend(extra);
        tickbox(&a)
    };
    write("\"+\"");
    test(&[&file.to_string_lossy()]).expect(1, "failed");
    std::fs::write(t.path("c.old.snap"), "gone\n").unwrap();
    let listed = review(&[]);
    listed.expect(1, "test review: 1 snapshot pending");
    assert!(
        listed.stdout.contains("pending: ") && listed.stdout.contains("c.end.snap.new"),
        "{listed:#?}"
    );
    let accepted = review(&["--accept"]);
    assert_eq!(accepted.code, 0, "{accepted:#?}");
    assert!(
        accepted.stdout.contains("accepted ")
            && accepted.stdout.contains("unreferenced: ")
            && accepted.stdout.contains("c.old.snap"),
        "{accepted:#?}"
    );
    assert!(std::fs::read_to_string(t.path("c.end.snap"))
        .unwrap()
        .contains("Counter: 1"));
    assert!(!t.path("c.end.snap.new").exists());
    let out = test(&[&file.to_string_lossy()]);
    assert_eq!(out.code, 0, "the accepted snapshot matches: {out:#?}");
    // A changed screen, rejected: the snapshot stays as it was.
    write("\"+\", \"+\"");
    test(&[&file.to_string_lossy()]).expect(1, "failed");
    assert!(t.path("c.end.snap.new").exists());
    let rejected = review(&["--reject"]);
    assert_eq!(rejected.code, 0, "{rejected:#?}");
    assert!(!t.path("c.end.snap.new").exists());
    assert!(std::fs::read_to_string(t.path("c.end.snap"))
        .unwrap()
        .contains("Counter: 1"));
}

/// On a terminal, review shows the diff and asks; the answer is typed.
#[test]
fn review_asks_on_a_terminal() {
    let w = crate::live::World::new("review-tty");
    let wasm = format!("{}/counter.wasm", wasm_dir());
    let file = w.dir.path("c.scenario.toml");
    std::fs::write(
        &file,
        format!("[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"),
    )
    .unwrap();
    test(&[&file.to_string_lossy()]).expect(1, "failed");
    let dir = w.dir.0.display().to_string();
    let mut pty = w.pty(&["test", "review", &dir], 100, 30);
    assert!(
        crate::util::eventually(crate::live::WAIT, || pty
            .text()
            .contains("[a]ccept, [r]eject, [s]kip?")),
        "{}",
        pty.text()
    );
    assert!(
        pty.text().contains("(new):") && pty.text().contains("Counter: 0"),
        "{}",
        pty.text()
    );
    pty.type_keys(b"a\r");
    assert_eq!(pty.wait(), 0, "{}", pty.text());
    assert!(pty.text().contains("accepted "), "{}", pty.text());
    assert!(w.dir.path("c.end.snap").exists());
}

/// `expect_screen = { style = … }`: colours and attributes of the cells of
/// a text (or of a row and column span), with what is there when they
/// differ.
#[test]
fn screen_expectations_check_colours_and_attributes() {
    let t = TempDir::new("style");
    let rogue = repo("tests/ticks/rogue.py");
    let file = t.path("style.scenario.toml");
    let write = |style: &str| {
        std::fs::write(
            &file,
            format!(
                "[tick]\ncommand = [\"python3\", {rogue:?}]\n\n[[step]]\nwait_for = {{ contains = \"ROGUE-READY\" }}\n\n[[step]]\nexpect_screen = {{ style = {style} }}\ntimeout = \"2s\"\n"
            ),
        )
        .unwrap();
    };
    let f = file.display().to_string();
    // The Tick draws it bold and green.
    write("{ text = \"ROGUE-READY\", fg = \"green\", bold = true, underline = false }");
    let out = test(&[&f]);
    assert_eq!(out.code, 0, "{out:#?}");
    write("{ text = \"ROGUE-READY\", fg = \"red\" }");
    let out = test(&[&f]);
    out.expect(1, "failed");
    assert!(out.stdout.contains("fg green (not red)"), "{out:#?}");
    write("{ row = 0, col = 0, len = 3, bg = \"#102030\" }");
    test(&[&f]).expect(1, "failed");
    // Mistakes are the scenario's, named in the report.
    for (style, rule) in [
        ("{ text = \"ROGUE-READY\" }", "at least one of fg"),
        ("{ text = \"x\", fg = \"puce\" }", "use default, black"),
        (
            "{ text = \"x\", row = 1, bold = true }",
            "by text, or by row and col",
        ),
    ] {
        write(style);
        let out = test(&[&f]);
        out.expect(2, "invalid");
        assert!(out.stdout.contains(rule), "{style}: {out:#?}");
    }
}

/// A scenario's relative paths mean the same from every working directory:
/// the C example as a newcomer has it (built into `build/` beside its
/// scenarios, no variable set), tested from the folder above it, from its
/// scenarios folder and from elsewhere by absolute path. Its native
/// scenario starts the Tick in the scenario's folder, which once made the
/// relative path point to the wrong place from anywhere but there.
#[test]
fn the_c_example_scenarios_pass_from_every_working_directory() {
    let (module, native) = crate::langs::c_counter();
    let dir = TempDir::new("c-from-anywhere");
    let project = dir.path("c");
    std::fs::create_dir_all(project.join("build")).unwrap();
    std::fs::create_dir_all(project.join("scenarios")).unwrap();
    for entry in std::fs::read_dir(root().join("examples/c/scenarios")).unwrap() {
        let from = entry.unwrap().path();
        std::fs::copy(
            &from,
            project.join("scenarios").join(from.file_name().unwrap()),
        )
        .unwrap();
    }
    let run = |cwd: &Path, target: &str| {
        tickbox_in(
            cwd,
            &["test", target, "--allow-native", "--format", "json"],
            &[],
            PROJECT_SCENARIO_LIMIT,
        )
    };
    // Positive control first: with nothing built the Tick cannot start, and
    // the report says so once ("cannot start the Tick" not doubled).
    let out = run(&dir.0, "c");
    assert_eq!(out.code, 3, "a Tick that cannot start: {out:#?}");
    assert!(out.stdout.contains("cannot start the Tick"), "{out:#?}");
    assert!(
        !out.stdout
            .contains("cannot start the Tick: cannot start the Tick"),
        "{}",
        out.stdout
    );
    std::fs::copy(&module, project.join("build/counter.wasm")).unwrap();
    std::fs::copy(&native, project.join("build/counter")).unwrap();
    let absolute = project.to_string_lossy().into_owned();
    for (cwd, target) in [
        (dir.0.clone(), "c"),
        (project.join("scenarios"), "."),
        (std::env::temp_dir(), absolute.as_str()),
    ] {
        let out = run(&cwd, target);
        assert_eq!(out.code, 0, "from {}: {out:#?}", cwd.display());
        let report = out.json();
        let statuses: Vec<&str> = report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            ["passed", "passed"],
            "from {}: {report}",
            cwd.display()
        );
    }
}
