//! What `tickbox test` itself decides about scenario files as untrusted
//! input: native Ticks only when allowed (`--sandboxed-only`, `CI`,
//! `--allow-native`), the flags that widen what a scenario may name
//! (`--grant-root`, `--allow-env`), and the time budgets' flags and the
//! run's budget. Each attack has its normal case beside it. The walls
//! themselves (grant roots, variables, links, names, a scenario's budget)
//! are the runner's: `conformance/tests/it/scenario_walls.rs`.

use crate::util::*;
use std::path::Path;

fn test(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut argv = vec!["test"];
    argv.extend_from_slice(args);
    tickbox_env(&argv, env)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn native_scenarios_run_only_when_allowed() {
    let native = s(&root().join("tests/scenarios/native-counter.scenario.toml"));
    let refused = "refused: a native Tick runs with your permissions, and only sandboxed (wasm) Ticks may run";
    let out = test(&[&native, "--sandboxed-only"], &[]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(out.stdout.contains(refused), "{out:#?}");
    assert!(out.stdout.contains("(--sandboxed-only)"), "{out:#?}");

    // CI set: the same, by default; CI=false is not CI.
    let out = test(&[&native], &[("CI", "true")]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(
        out.stdout.contains("(the default when CI is set)"),
        "{out:#?}"
    );
    assert!(out.stdout.contains("pass --allow-native"), "{out:#?}");
    // Opting back in, and CI=false: the native Tick runs and passes.
    let out = test(&[&native, "--allow-native"], &[("CI", "true")]);
    assert_eq!(out.code, 0, "{out:#?}");
    let out = test(&[&native], &[("CI", "false")]);
    assert_eq!(out.code, 0, "{out:#?}");
    test(&[&native, "--allow-native", "--sandboxed-only"], &[]).expect(2, "cannot be used with");

    // Positive control: a wasm Tick runs under both.
    let t = TempDir::new("walls-sandboxed");
    let file = t.path("wasm.scenario.toml");
    counter_scenario_at(&file, "", PRESS_TWICE);
    let out = test(&[&s(&file), "--sandboxed-only"], &[("CI", "1")]);
    assert_eq!(out.code, 0, "{out:#?}");
}

#[test]
fn dir_grants_stay_under_the_grant_root() {
    let t = TempDir::new("walls-root");
    let here = t.path("here");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::create_dir_all(t.path("outside")).unwrap();
    let file = here.join("g.scenario.toml");
    counter_scenario_at(&file, "dir = [\"../outside\"]", PRESS_TWICE);
    let out = test(&[&s(&file)], &[]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(out.stdout.contains("is outside the grant root"), "{out:#?}");
    // A root the command line names widens it.
    let out = test(&[&s(&file), "--grant-root", &s(&t.0)], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    test(&[&s(&file), "--grant-root", &s(&t.path("none"))], &[]).expect(2, "not a directory");
}

#[test]
fn environment_variables_are_read_only_when_allowed() {
    let t = TempDir::new("walls-env");
    let file = t.path("e.scenario.toml");
    let secret = ("WALLS_SECRET", "hunter2-do-not-print");
    counter_scenario_at(&file, "env = [\"WALLS_SECRET\"]", PRESS_TWICE);
    let out = test(&[&s(&file)], &[secret]);
    out.expect(2, "test: 1 scenario is invalid");
    assert!(
        out.stdout.contains("allow it with allow_env WALLS_SECRET"),
        "{out:#?}"
    );
    assert!(!format!("{out:?}").contains(secret.1), "{out:#?}");
    // Positive control: --allow-env lets it through.
    let out = test(&[&s(&file), "--allow-env", "WALLS_SECRET"], &[secret]);
    assert_eq!(out.code, 0, "{out:#?}");
    test(&[&s(&file), "--allow-env", "A=B"], &[]).expect(2, "give a variable's name");
}

#[test]
fn scenarios_and_runs_stop_at_their_time_budget() {
    let t = TempDir::new("walls-time");
    let (a, b) = (t.path("a.scenario.toml"), t.path("b.scenario.toml"));
    forever_scenario_at(&a);
    let out = test(&[&s(&a), "--timeout", "2s"], &[]);
    out.expect(1, "1 of 1 scenario failed");
    assert!(
        out.stdout
            .contains("stopped: the scenario ran past the scenario's time budget (--timeout 2s)"),
        "{out:#?}"
    );
    assert!(out.elapsed < std::time::Duration::from_secs(50), "{out:#?}");

    // The run's budget: the first scenario uses it up, the second never
    // starts (one at a time).
    forever_scenario_at(&b);
    let out = test(&[&s(&t.0), "-j", "1", "--run-timeout", "2s"], &[]);
    out.expect(1, "2 of 2 scenarios failed");
    assert!(
        out.stdout
            .contains("stopped: the scenario ran past the run's time budget (--run-timeout 2s)"),
        "{out:#?}"
    );
    assert!(
        out.stdout
            .contains("not run: the run's time budget (--run-timeout 2s) was used up"),
        "{out:#?}"
    );
    test(&[&s(&a), "--timeout", "0s"], &[]).expect(2, "--timeout \"0s\": give a duration");
    test(&[&s(&a), "--run-timeout", "25h"], &[]).expect(2, "at most 24h");

    // Positive control: a scenario within its budget passes.
    let native = s(&root().join("tests/scenarios/native-counter.scenario.toml"));
    let out = test(&[&native, "--timeout", "2m", "--run-timeout", "3m"], &[]);
    assert_eq!(out.code, 0, "{out:#?}");
}
