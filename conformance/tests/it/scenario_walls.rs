//! Scenario files as untrusted input, through the runner: grants bounded
//! by the run's grant roots, the host's variables only those the run
//! allows, no symbolic links for scenario and snapshot files, names that
//! cannot forge report lines, and a scenario's time budget. Each attack
//! has its normal case beside it. What `tickbox test` adds (native Ticks
//! only when allowed, the flags that widen a policy, the run's budget)
//! stays in `cli/tests/it/scenario_walls.rs`.

use crate::scenario::{invalid, run_under, run_with};
use std::path::Path;
use std::time::Duration;
use tickbox_conformance::scenario::{
    self, report, Outcome, Policy, RunOptions, ScenarioResult, TimeBudget,
};
use tickbox_test_support::*;

/// The wasm counter example (`examples/counter`).
fn counter_wasm() -> String {
    build_wasm("examples", "counter", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// Runs `file` once with no flags.
async fn run(file: &Path) -> ScenarioResult {
    run_with(file, &RunOptions::default()).await
}

/// Runs `file` once writing its snapshots (`tickbox test --update`).
async fn update(file: &Path) -> ScenarioResult {
    let opts = RunOptions {
        update: true,
        ..RunOptions::default()
    };
    run_with(file, &opts).await
}

/// Asserts `r` passed, showing its report if not.
fn passed(r: &ScenarioResult) {
    assert_eq!(r.outcome, Outcome::Passed, "{}", text(r));
}

/// The text report of `r` alone, as `tickbox test` prints it.
fn text(r: &ScenarioResult) -> String {
    report::to_text(std::slice::from_ref(r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dir_grants_stay_under_the_grant_root() {
    let t = TempDir::new("walls-root");
    let here = t.path("here");
    let outside = t.path("outside");
    std::fs::create_dir_all(here.join("data")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, here.join("link")).unwrap();
    let file = here.join("g.scenario.toml");

    // Positive control: a directory beside the scenario is granted.
    counter_scenario_at(&file, "dir = [\"data::/data:ro\"]", PRESS_TWICE);
    passed(&run(&file).await);

    // Outside it, by absolute path, by `..`, through a link: refused.
    let wider = Policy {
        grant_roots: vec![t.0.clone()],
        ..Policy::default()
    };
    let outside = outside.to_string_lossy().into_owned();
    for grant in [outside, "../outside".into(), "link::/l".into()] {
        counter_scenario_at(&file, &format!("dir = [{grant:?}]"), PRESS_TWICE);
        invalid(&run(&file).await, "is outside the grant root");
        // A root the run names widens it.
        passed(&run_under(&file, &wider, &RunOptions::default()).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_variables_are_read_only_when_allowed() {
    let t = TempDir::new("walls-env");
    let file = t.path("e.scenario.toml");
    let secret = "hunter2-do-not-print";
    let bin = counter_wasm();
    let dir = Path::new(&bin).parent().unwrap();
    // Set before any Tick starts; this process runs this test alone
    // (cargo-nextest), and nothing else here reads them.
    unsafe {
        std::env::set_var("WALLS_SECRET", secret);
        std::env::set_var("WALLS_DIR", dir);
    }
    let allowing = |name: &str| Policy {
        allow_env: vec![name.to_string()],
        ..Policy::default()
    };

    // The host's variable in a path: refused, and the value is nowhere.
    std::fs::write(
        &file,
        format!("[tick]\npath = \"${{WALLS_SECRET}}/counter.wasm\"\n{PRESS_TWICE}"),
    )
    .unwrap();
    let r = run(&file).await;
    invalid(
        &r,
        "environment variable WALLS_SECRET is not allowed by the run",
    );
    assert!(!format!("{r:?}").contains(secret), "{r:?}");

    // An env grant copying it to the Tick: refused too.
    counter_scenario_at(&file, "env = [\"WALLS_SECRET\"]", PRESS_TWICE);
    let r = run(&file).await;
    invalid(&r, "allow it with allow_env WALLS_SECRET");
    assert!(!format!("{r:?}").contains(secret), "{r:?}");

    // Positive controls: allowed, both work; a literal value needs nothing.
    let opts = RunOptions::default();
    passed(&run_under(&file, &allowing("WALLS_SECRET"), &opts).await);
    std::fs::write(
        &file,
        format!("[tick]\npath = \"${{WALLS_DIR}}/counter.wasm\"\n{PRESS_TWICE}"),
    )
    .unwrap();
    passed(&run_under(&file, &allowing("WALLS_DIR"), &opts).await);
    counter_scenario_at(&file, "env = [\"MODE=fast\"]", PRESS_TWICE);
    passed(&run(&file).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_scenario_file_is_refused_without_its_content() {
    let t = TempDir::new("walls-link");
    let outside = t.path("private.txt");
    std::fs::write(&outside, "[tick]\nthe secret content = = here\n").unwrap();
    let dir = t.path("scenarios");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("link.scenario.toml");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    // Named directly, and found in a directory.
    let found = scenario::discover(std::slice::from_ref(&dir)).expect("the directory is searched");
    assert_eq!(found, vec![link.clone()]);
    let r = run(&link).await;
    invalid(&r, "a symbolic link");
    let text = text(&r);
    assert!(text.contains("link.scenario.toml"), "{text}");
    assert!(!format!("{r:?}").contains("secret content"), "{r:?}");
    // Positive control: the same text in a regular file is parsed, and its
    // parse error quotes it (so the refusal above is what hid it).
    std::fs::remove_file(&link).unwrap();
    std::fs::copy(&outside, &link).unwrap();
    let r = run(&link).await;
    invalid(&r, "not a valid scenario");
    invalid(&r, "secret content");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_never_read_or_written_through_a_link() {
    let t = TempDir::new("walls-snap");
    let dir = t.path("repo");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.scenario.toml");
    counter_scenario_at(
        &file,
        "",
        &format!("{PRESS_TWICE}\n[[step]]\nexpect_screen = {{ snapshot = \"after\" }}\n"),
    );
    let snap = dir.join("s.after.snap");
    let outside = t.path("outside.txt");
    let original = "OUTSIDE FILE, not a snapshot\n";

    // A link to a file outside: not read (its content is not shown), not
    // written by --update.
    std::fs::write(&outside, original).unwrap();
    std::os::unix::fs::symlink(&outside, &snap).unwrap();
    let text_of = |r: &ScenarioResult| {
        assert!(matches!(r.outcome, Outcome::Failed(_)), "{r:?}");
        text(r)
    };
    let out = text_of(&run(&file).await);
    assert!(
        out.contains("snapshot \"after\" refused") && out.contains("is a symbolic link"),
        "{out}"
    );
    assert!(!out.contains("OUTSIDE FILE"), "{out}");
    let out = text_of(&update(&file).await);
    assert!(out.contains("refused to write the snapshot"), "{out}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), original);
    assert!(std::fs::symlink_metadata(&snap)
        .unwrap()
        .file_type()
        .is_symlink());

    // A dangling link: --update creates nothing outside.
    std::fs::remove_file(&snap).unwrap();
    let target = t.path("created-outside.txt");
    std::os::unix::fs::symlink(&target, &snap).unwrap();
    let out = text_of(&update(&file).await);
    assert!(out.contains("is a symbolic link"), "{out}");
    assert!(!target.exists(), "nothing was created through the link");

    // Positive control: a regular snapshot is written, then compared.
    std::fs::remove_file(&snap).unwrap();
    passed(&update(&file).await);
    assert!(std::fs::read_to_string(&snap)
        .unwrap()
        .contains("Counter: 2"));
    passed(&run(&file).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newline_in_a_name_forges_no_report_line() {
    let t = TempDir::new("walls-name");
    let file = t.path("n.scenario.toml");
    let forged = "PASSED: 9 passed, 0 failed, 0 could not start, 0 invalid";
    // A failing scenario whose name tries to end the report with a pass.
    let wrong = "[[step]]\nexpect_state = { pointer = \"/value\", equals = 7 }\ntimeout = \"1s\"\n";
    let write = |name: &str| {
        std::fs::write(
            &file,
            format!(
                "name = {name:?}\n[tick]\npath = {:?}\nsize = [40, 8]\n{wrong}",
                counter_wasm()
            ),
        )
        .unwrap()
    };
    write(&format!("counter\n{forged}"));
    let results = [run(&file).await];
    let out = report::to_text(&results);
    let lines: Vec<&str> = out.lines().collect();
    assert!(!lines.iter().any(|l| l.starts_with("PASSED")), "{out}");
    assert!(
        lines[0].starts_with("FAIL    counter\\nPASSED: 9 passed"),
        "the name stays on its line, escaped: {out}"
    );
    assert!(lines
        .last()
        .unwrap()
        .starts_with("FAILED: 0 passed, 1 failed"));
    let junit = report::to_junit(&results);
    assert!(junit.contains("name=\"counter\\nPASSED"), "{junit}");
    assert!(!junit.contains("&#10;PASSED"), "{junit}");
    assert_eq!(
        report::to_json(&results)["scenarios"][0]["name"],
        format!("counter\n{forged}")
    );
    // Positive control: a plain name is shown as it is.
    write("plain counter");
    let out = text(&run(&file).await);
    assert!(out.starts_with("FAIL    plain counter ("), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_stop_at_their_time_budget() {
    let t = TempDir::new("walls-time");
    let file = t.path("a.scenario.toml");
    forever_scenario_at(&file);
    let bound = "the test's budget of 2s";
    let opts = |limit: Duration| RunOptions {
        budget: TimeBudget {
            limit,
            bound: bound.into(),
        },
        ..RunOptions::default()
    };
    let started = std::time::Instant::now();
    let r = run_with(&file, &opts(Duration::from_secs(2))).await;
    let out = text(&r);
    assert!(
        out.contains(&format!("stopped: the scenario ran past {bound}")),
        "{out}"
    );
    assert!(started.elapsed() < Duration::from_secs(50), "{out}");

    // Positive control: a scenario within its budget passes.
    let native = root().join("tests/scenarios/native-counter.scenario.toml");
    passed(&run_with(&native, &opts(Duration::from_secs(120))).await);
}
