use std::path::Path;
use std::sync::Arc;
use tickbox_conformance::scenario::{self, Outcome, Policy, Prepared, RunOptions};
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
async fn run(file: &Path) -> scenario::ScenarioResult {
    let s = scenario::load(file, &Policy::default()).expect("a valid scenario");
    let grants = s.tick.grants.resolve().expect("grants");
    let path = s.tick.path.clone().expect("a wasm Tick");
    let engine = WasmEngine::new(None).expect("engine");
    let launcher = Launcher::wasm(engine, path, grants).expect("launcher");
    let prepared = Prepared {
        kind: launcher.kind(),
        launch: Arc::new(launcher) as Arc<dyn Launch>,
    };
    scenario::run(&s, &prepared, &RunOptions::default()).await
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
