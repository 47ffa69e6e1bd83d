use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tickbox_conformance::scenario::{
    self, report, Failure, Outcome, Policy, Prepared, RunOptions, Scenario, ScenarioResult,
};
use tickbox_host::backend::native::NativeSpec;
use tickbox_sandbox::{Launch, Launcher, WasmEngine};
use tickbox_test_support::*;

/// A scenario file for the counter example, its last call expecting
/// `value` after `+ +` and an increment of 5.
fn counter_scenario(dir: &TempDir, value: u64) -> std::path::PathBuf {
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let file = dir.path("counter.scenario.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"counter through the library\"\n\
             [tick]\npath = {wasm:?}\nsize = [40, 8]\n\n\
             [[step]]\nkeys = [\"+\", \"+\"]\n\n\
             [[step]]\nexpect_state = {{ pointer = \"/value\", equals = 2 }}\n\n\
             [[step]]\ncall = \"increment\"\nargs = {{ amount = 5 }}\nresult = {{ value = {value} }}\n\n\
             [[step]]\nexpect_screen = {{ contains = \"Counter: {value}\" }}\n"
        ),
    )
    .expect("write scenario");
    file
}

/// Loads `file` and runs it once, its Tick started by the sandbox's
/// launcher with the scenario's own grants.
async fn run(file: &Path) -> ScenarioResult {
    run_with(file, &RunOptions::default()).await
}

/// What `tickbox test` makes of a scenario's `[tick]`: a wasm Tick started
/// by the sandbox's launcher with the scenario's grants, a command started
/// natively in the scenario's directory.
fn prepared(s: &Scenario) -> Prepared {
    let grants = s.tick.grants.resolve().expect("grants");
    let launcher = match &s.tick.path {
        Some(path) => {
            let engine = WasmEngine::new(Some(wasm_cache())).expect("engine");
            Launcher::wasm(engine, path.clone(), grants).expect("launcher")
        }
        None => Launcher::native(NativeSpec {
            argv: s.tick.command.clone(),
            cwd: s.file.parent().map(Path::to_path_buf),
            env: grants.env,
            ..Default::default()
        }),
    };
    Prepared {
        kind: launcher.kind(),
        launch: Arc::new(launcher) as Arc<dyn Launch>,
    }
}

/// Loads `file` and runs it once under `opts`; a scenario that does not
/// load is invalid, as `tickbox test` reports it.
pub(crate) async fn run_with(file: &Path, opts: &RunOptions) -> ScenarioResult {
    run_under(file, &Policy::default(), opts).await
}

/// [`run_with`], the file loaded under `policy` (what a run allows: the
/// host's variables, the grant roots).
pub(crate) async fn run_under(file: &Path, policy: &Policy, opts: &RunOptions) -> ScenarioResult {
    let s = match scenario::load(file, policy) {
        Ok(s) => s,
        Err(e) => {
            let stem = scenario::stem(file);
            return ScenarioResult::not_run(&stem, file.into(), 0, Outcome::Invalid(e.message));
        }
    };
    scenario::run(&s, &prepared(&s), opts).await
}

/// The failure of a result that failed at a step.
fn failure(r: &ScenarioResult) -> &Failure {
    match &r.outcome {
        Outcome::Failed(f) => f,
        other => panic!("expected a failure at a step: {other:?}"),
    }
}

/// Asserts that `r` is invalid for a reason holding `why`.
pub(crate) fn invalid(r: &ScenarioResult, why: &str) {
    match &r.outcome {
        Outcome::Invalid(m) => assert!(m.contains(why), "{why} in: {m}"),
        other => panic!("expected invalid ({why}): {other:?}"),
    }
}

/// The directory the wasm examples are built into.
fn examples_dir() -> PathBuf {
    // Building one example builds the whole examples workspace.
    let counter = build_wasm("examples", "counter", "wasm32-wasip2");
    counter.parent().expect("wasm dir").to_path_buf()
}

/// Writes `text` as the scenario `name` in `dir`.
fn scenario_file(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let file = dir.path(name);
    std::fs::write(&file, text).expect("write scenario");
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_that_holds_passes_and_one_that_does_not_fails_at_its_step() {
    let dir = TempDir::new("conformance-scenario");
    let good = counter_scenario(&dir, 7);
    let result = run(&good).await;
    assert_eq!(result.outcome, Outcome::Passed, "{result:?}");
    assert_eq!((result.passed_steps, result.steps), (4, 4));
    // Virtual time and a fixed seed: a second run is the same run.
    let again = run(&good).await;
    assert_eq!(again.outcome, Outcome::Passed, "{again:?}");
    assert_eq!(again.seed, result.seed);

    // The control: the same file expecting the wrong value fails at the
    // call, the third step, saying what came back.
    let bad_dir = TempDir::new("conformance-scenario-bad");
    let bad = counter_scenario(&bad_dir, 8);
    let result = run(&bad).await;
    match &result.outcome {
        Outcome::Failed(f) => {
            assert_eq!(f.step, 3, "{f:?}");
            assert!(f.found.iter().any(|l| l.contains('7')), "{f:?}");
        }
        other => panic!("expected a failure at the call: {other:?}"),
    }
    assert_eq!(result.passed_steps, 2);
}

/// Copies a scenario under `n` names into `t`, its Tick named by its
/// built path (its snapshots go beside each copy).
fn copies(t: &TempDir, from: &str, n: usize) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root().join(from)).expect("read scenario");
    let text = text.replace(
        "${TICKBOX_WASM_DIR:-../../target/wasm32-wasip2/release}",
        &examples_dir().display().to_string(),
    );
    (0..n)
        .map(|i| scenario_file(t, &format!("run{i:02}.scenario.toml"), &text))
        .collect()
}

fn snapshots(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".snap"))
        .map(|e| {
            let bytes = std::fs::read(e.path()).expect("read snapshot");
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn virtual_time_gives_identical_screens_on_every_run() {
    // 20 runs of the ticker scenario (timer-driven, advanced by virtual
    // time), four at a time, each writing its own snapshot.
    let t = TempDir::new("scenario-twenty");
    let files = copies(&t, "examples/ticker/scenarios/ticker.scenario.toml", 20);
    for four in files.chunks(4) {
        let runs: Vec<_> = four
            .iter()
            .cloned()
            .map(|f| {
                tokio::spawn(async move {
                    let update = RunOptions {
                        update: true,
                        ..RunOptions::default()
                    };
                    run_with(&f, &update).await
                })
            })
            .collect();
        for run in runs {
            let r = run.await.expect("a run");
            assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
        }
    }
    let snaps = snapshots(&t.0);
    assert_eq!(snaps.len(), files.len(), "one snapshot per run: {snaps:?}");
    let first = &snaps[0].1;
    let text = String::from_utf8_lossy(first);
    assert!(text.contains("sample #5"), "{text}");
    for (name, bytes) in &snaps {
        assert_eq!(bytes, first, "{name} differs from {}", snaps[0].0);
    }
    // And the committed snapshot is exactly what these runs drew.
    let committed = root().join("examples/ticker/scenarios/ticker.after-a-minute.snap");
    assert_eq!(
        &std::fs::read(committed).expect("committed snapshot"),
        first
    );
    // A second plain run compares against them and rewrites nothing.
    let again = run(&files[0]).await;
    assert_eq!(again.outcome, Outcome::Passed, "{again:?}");
    assert_eq!(again.written, Vec::<PathBuf>::new());
    assert_eq!(snapshots(&t.0), snaps);
}

/// The clockwork guest reports its wall and monotonic clocks and random
/// bytes; a scenario whose last step expects an empty result fails and
/// shows what it reported.
async fn clockwork_reading(
    t: &TempDir,
    deterministic: &str,
    seed: u64,
) -> (ScenarioResult, serde_json::Value) {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let file = scenario_file(
        t,
        &format!("clock-{}-{seed}.scenario.toml", deterministic.len()),
        &format!(
            "[tick]\npath = {wasm:?}\n{deterministic}\n\n[[step]]\ncall = \"now\"\nresult = {{}}\n"
        ),
    );
    let opts = RunOptions {
        seed: Some(seed),
        ..RunOptions::default()
    };
    let r = run_with(&file, &opts).await;
    let found = failure(&r).found[0].clone();
    let json = found.strip_prefix("result ").expect("a result line");
    let reading = serde_json::from_str(json).expect("the result as JSON");
    (r, reading)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_ticks_clocks_and_randomness_are_virtual_and_seeded() {
    let t = TempDir::new("scenario-clock");
    let (r, a) = clockwork_reading(&t, "", 1).await;
    assert_eq!(r.seed, Some(1));
    // 2000-01-01T00:00:00Z, and no monotonic time passes by itself.
    assert_eq!(a["wall_secs"], 946_684_800, "{a}");
    assert_eq!(a["wall_nanos"], 0, "{a}");
    assert_eq!(a["mono_ns"], 0, "{a}");
    let (_, b) = clockwork_reading(&t, "", 1).await;
    assert_eq!(a, b, "the same seed gives the same random bytes");
    let (_, c) = clockwork_reading(&t, "", 2).await;
    assert_ne!(a["random"], c["random"], "another seed, other bytes");
    assert_ne!(a["hash"], c["hash"], "std's RandomState is seeded too");
    assert_eq!(a["random"].as_str().expect("random").len(), 32);

    // Opting out: real clocks (now is well after 2000) and real randomness.
    let (r, real) = clockwork_reading(&t, "deterministic = false", 1).await;
    assert_eq!(r.seed, None);
    assert!(
        real["wall_secs"].as_u64().expect("wall_secs") > 1_700_000_000,
        "{real}"
    );
    assert_ne!(real["random"], a["random"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_moves_the_clocks_a_guest_reads() {
    let t = TempDir::new("scenario-advance");
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let file = scenario_file(
        &t,
        "advance.scenario.toml",
        &format!(
            "[tick]\npath = {wasm:?}\n\n[[step]]\nadvance = \"90s\"\n\n[[step]]\ncall = \"now\"\nresult_subset = {{ wall_secs = 946684890, mono_ns = 90000000000 }}\n\n[[step]]\nadvance = \"250ms\"\n\n[[step]]\ncall = \"now\"\nresult_subset = {{ wall_nanos = 250000000, mono_ns = 90250000000 }}\n"
        ),
    );
    let r = run(&file).await;
    assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_on_virtual_time_jumps_to_the_guests_timers_within_its_timeout() {
    let t = TempDir::new("scenario-wait");
    let dashboard = examples_dir().join("dashboard.wasm");
    // A 5-second job: a 2 s wait cannot see it finish, and says why.
    let file = scenario_file(
        &t,
        "wait.scenario.toml",
        &format!("[tick]\npath = {dashboard:?}\n\n[[step]]\nkey = \"n\"\n\n[[step]]\nwait_for = {{ pointer = \"/jobs/0/status\", equals = \"done\" }}\ntimeout = \"2s\"\n"),
    );
    let r = run(&file).await;
    let found = failure(&r).found.join("\n");
    for line in [
        "/jobs/0/status: expected \"done\", found \"running\"",
        "timed out: +2s of virtual time passed and the guest's next timer is at +2.1s, past the 2s timeout",
    ] {
        assert!(found.contains(line), "missing {line:?}: {found}");
    }
    // A Tick with no timer left cannot change by itself: the wait ends at once.
    let counter = examples_dir().join("counter.wasm");
    let file = scenario_file(
        &t,
        "idle.scenario.toml",
        &format!("[tick]\npath = {counter:?}\n\n[[step]]\nwait_for = {{ pointer = \"/value\", equals = 1 }}\ntimeout = \"10m\"\n"),
    );
    let started = std::time::Instant::now();
    let r = run(&file).await;
    let found = failure(&r).found.join("\n");
    assert!(
        found.contains("the guest is idle with no timer pending after +0ns of virtual time: nothing can change any more"),
        "{found}"
    );
    assert!(started.elapsed() < Duration::from_secs(30), "{r:?}");
}

/// A guest that waits for input in a blocking read of stdin (std's
/// `lines()`, not `wasi:io/poll`) is idle too: no step waits for it. A
/// guest that computes is never idle: the runner waits its bound, says so in
/// the result, and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_in_a_blocking_read_is_idle_and_a_busy_one_is_noted_not_hung() {
    let wasm = build_wasm("tests/guests", "benchtick", "wasm32-wasip2");
    let t = TempDir::new("scenario-busy");
    let file = scenario_file(
        &t,
        "idle.scenario.toml",
        &format!(
            "[tick]\npath = {wasm:?}\n\n[[step]]\ncall = \"get\"\nresult = {{ value = 0 }}\n\n[[step]]\nexpect_state = {{ pointer = \"/value\", equals = 0 }}\n"
        ),
    );
    let r = run(&file).await;
    assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
    assert_eq!(r.notes, Vec::<String>::new());

    // Busy: a tool that spins until its call timeout.
    let hostile = hostile();
    let file = scenario_file(
        &t,
        "busy.scenario.toml",
        &format!(
            "[tick]\npath = {hostile:?}\ncall_timeout = \"1s\"\n\n[[step]]\ncall = \"spin\"\nerror = 1\n"
        ),
    );
    let r = run(&file).await;
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("did not become idle within 5s")),
        "{r:?}"
    );
    let found = failure(&r).found.join("\n");
    assert!(found.contains("unknown outcome"), "{found}");
}

/// The runner's bound on timer jumps in one `wait_for`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_stops_at_the_jump_bound() {
    let t = TempDir::new("scenario-jumps");
    let dashboard = examples_dir().join("dashboard.wasm");
    let file = scenario_file(
        &t,
        "jump.scenario.toml",
        &format!(
            "[tick]\npath = {dashboard:?}\n\n[[step]]\nkey = \"n\"\n\n[[step]]\nwait_for = {{ pointer = \"/jobs/0/status\", equals = \"done\" }}\n"
        ),
    );
    let jumps = |max| RunOptions {
        max_wait_jumps: max,
        ..RunOptions::default()
    };
    // The job needs 50 jumps of 100 ms.
    let r = run_with(&file, &jumps(10)).await;
    let f = failure(&r);
    assert_eq!(f.step, 2);
    assert!(
        f.found
            .iter()
            .any(|l| l.contains("gave up after 10 timer jumps (the limit), at +1s virtual")),
        "{f:?}"
    );
    // Positive control: a bound the wait fits in.
    assert_eq!(run_with(&file, &jumps(50)).await.outcome, Outcome::Passed);
}

/// A preview-1 module reads virtual clocks too, but its sleeps are real, so
/// `advance` is refused for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview1_module_gets_virtual_readings_and_no_advance() {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip1");
    let t = TempDir::new("scenario-p1");
    let tick = format!("[tick]\npath = {wasm:?}\n");
    let file = scenario_file(
        &t,
        "p1.scenario.toml",
        &format!("{tick}\n[[step]]\ncall = \"now\"\nresult_subset = {{ wall_secs = 946684800, mono_ns = 0 }}\n"),
    );
    let r = run(&file).await;
    assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
    let file = scenario_file(
        &t,
        "p1-advance.scenario.toml",
        &format!("{tick}\n[[step]]\nadvance = \"1s\"\n"),
    );
    invalid(
        &run(&file).await,
        "a preview-1 module's timers wait real time; advance needs a component (wasm32-wasip2)",
    );
}

/// A tool that sleeps on a timer inside the call returns on virtual time:
/// the clock jumps to its timer while the guest is idle and the call is in
/// flight (up to the call timeout of virtual time), so the call takes no
/// real time; a sleep past the call timeout is not jumped and times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_sleeps_moves_virtual_time() {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let t = TempDir::new("scenario-nap");
    let nap = |name: &str, call_timeout: &str, seconds: u64| {
        scenario_file(
            &t,
            name,
            &format!(
                "[tick]\npath = {wasm:?}\ncall_timeout = \"{call_timeout}\"\n\n[[step]]\ncall = \"nap\"\nargs = {{ seconds = {seconds} }}\nresult = {{ slept_ns = {} }}\n",
                seconds * 1_000_000_000
            ),
        )
    };
    // 50 s of sleep inside one call, well within a 60 s call timeout.
    let r = run(&nap("long.scenario.toml", "60s", 50)).await;
    assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
    assert!(
        r.duration < Duration::from_secs(30),
        "the sleep was virtual: {r:?}"
    );
    // Past the call timeout: not jumped, so the call times out (2 s real).
    let r = run(&nap("past.scenario.toml", "2s", 5)).await;
    let found = failure(&r).found.join("\n");
    assert!(found.contains("unknown outcome"), "{found}");
}

/// A native Tick runs on real time: no seed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_scenario_runs_on_real_time() {
    let file = root().join("tests/scenarios/native-counter.scenario.toml");
    let r = run(&file).await;
    assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
    assert_eq!(r.seed, None, "native Ticks are not deterministic");
}

/// `expect_screen = { style = … }`: colours and attributes of the cells of
/// a text (or of a row and column span), with what is there when they
/// differ; mistakes in the expectation are the scenario's, named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screen_expectations_check_colours_and_attributes() {
    let t = TempDir::new("style");
    let rogue = root().join("tests/ticks/rogue.py");
    let styled = |n: usize, style: &str| {
        scenario_file(
            &t,
            &format!("style{n}.scenario.toml"),
            &format!(
                "[tick]\ncommand = [\"python3\", {rogue:?}]\n\n[[step]]\nwait_for = {{ contains = \"ROGUE-READY\" }}\n\n[[step]]\nexpect_screen = {{ style = {style} }}\ntimeout = \"2s\"\n"
            ),
        )
    };
    // The Tick draws it bold and green.
    let file = styled(
        0,
        "{ text = \"ROGUE-READY\", fg = \"green\", bold = true, underline = false }",
    );
    let r = run(&file).await;
    assert_eq!(r.outcome, Outcome::Passed, "{r:?}");
    let r = run(&styled(1, "{ text = \"ROGUE-READY\", fg = \"red\" }")).await;
    let found = failure(&r).found.join("\n");
    assert!(found.contains("fg green (not red)"), "{found}");
    let r = run(&styled(
        2,
        "{ row = 0, col = 0, len = 3, bg = \"#102030\" }",
    ))
    .await;
    failure(&r);
    for (i, (style, rule)) in [
        ("{ text = \"ROGUE-READY\" }", "at least one of fg"),
        ("{ text = \"x\", fg = \"puce\" }", "use default, black"),
        (
            "{ text = \"x\", row = 1, bold = true }",
            "by text, or by row and col",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        invalid(&run(&styled(3 + i, style)).await, rule);
    }
}

/// `tests/scenarios/failing` copied into a fresh directory (a failing
/// snapshot step writes `NAME.snap.new` beside its snapshot, and a test
/// must not write into the source tree), its Ticks named by their built
/// paths.
fn failing_copy(t: &TempDir) -> Vec<PathBuf> {
    let from = root().join("tests/scenarios/failing");
    std::fs::copy(
        from.join("counter-wrong-screen.one.snap"),
        t.path("counter-wrong-screen.one.snap"),
    )
    .expect("copy the snapshot");
    let wasm_dir = examples_dir().display().to_string();
    [
        "counter-wrong-screen.scenario.toml",
        "counter-wrong-state.scenario.toml",
    ]
    .iter()
    .map(|name| {
        let text = std::fs::read_to_string(from.join(name)).expect("read scenario");
        scenario_file(t, name, &text.replace("${TICKBOX_WASM_DIR}", &wasm_dir))
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_expectation_fails_with_a_readable_diff() {
    let t = TempDir::new("failing-copy");
    let mut results = Vec::new();
    for file in failing_copy(&t) {
        results.push(run(&file).await);
    }
    let text = report::to_text(&results);
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
    let junit = report::to_junit(&results);
    assert!(junit.starts_with("<?xml"), "{junit}");
    assert!(
        junit.contains("tests=\"2\" failures=\"2\" errors=\"0\""),
        "{junit}"
    );
    assert_eq!(junit.matches("<failure message=").count(), 2);
    assert!(junit.contains("/value: expected 3, found 1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_writes_snapshots_trimmed_and_a_changed_screen_then_fails() {
    let t = TempDir::new("scenario-update");
    let wasm = examples_dir().join("counter.wasm");
    let write = |keys: &str| {
        scenario_file(
            &t,
            "c.scenario.toml",
            &format!(
                "[tick]\npath = {wasm:?}\nsize = [30, 5]\n\n[[step]]\nkeys = [{keys}]\n\n[[step]]\nwait_for = {{ contains = \"Counter\" }}\n\n[[step]]\nexpect_screen = {{ snapshot = \"end\" }}\n"
            ),
        )
    };
    let file = write("\"+\"");
    let missing = run(&file).await;
    // The screen waits beside it for review; nothing else is written.
    let found = failure(&missing).found.join("\n");
    assert!(
        found.contains("c.end.snap.new: accept or reject it with `tickbox test review`"),
        "{found}"
    );
    assert!(!t.path("c.end.snap").exists());
    let pending = std::fs::read_to_string(t.path("c.end.snap.new")).expect("pending");
    assert!(pending.contains("Counter: 1"), "{pending}");

    let update = RunOptions {
        update: true,
        ..RunOptions::default()
    };
    let updated = run_with(&file, &update).await;
    assert_eq!(updated.outcome, Outcome::Passed, "{updated:?}");
    assert_eq!(updated.written, vec![t.path("c.end.snap")]);
    let text = report::to_text(std::slice::from_ref(&updated));
    assert!(text.contains("wrote "), "{text}");
    assert!(
        !t.path("c.end.snap.new").exists(),
        "an update answers the pending screen"
    );
    let snap = std::fs::read_to_string(t.path("c.end.snap")).expect("the snapshot");
    assert!(snap.contains("Counter: 1"), "{snap}");
    assert!(
        snap.lines().all(|l| l == l.trim_end()),
        "trailing spaces trimmed: {snap:?}"
    );
    assert!(snap.ends_with("┘\n"), "{snap:?}");

    // Two presses now: the snapshot no longer matches.
    let file = write("\"+\", \"+\"");
    let changed = run(&file).await;
    let text = report::to_text(std::slice::from_ref(&changed));
    failure(&changed);
    assert!(text.contains("+   2 |│Counter: 2"), "{text}");
}
