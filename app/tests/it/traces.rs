//! Scenario traces as the application layer writes them: scenarios run by
//! `tickbox_conformance`'s runner with a trace, their Ticks started through
//! [`App::launcher`] from [`scenarios::request`], and the traces written by
//! [`scenarios::write_traces`]. asciinema's own player (PyPI `asciinema`,
//! pinned in `tests/players/requirements.txt`) plays one as it is; the
//! frames, states and outcomes are in it; a deterministic scenario's trace
//! is the same file on every run; a chatty Tick's trace stops at its bound.
//! Which scenarios `--trace` traces, the report's lines and `tickbox test
//! show-trace` stay in `cli/tests/it/traces.rs`.

use crate::{prepared, settings};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tickbox_app::{scenarios, App};
use tickbox_conformance::scenario::{self, Outcome, Policy, RunOptions, ScenarioResult};
use tickbox_protocol::text::is_unsafe;
use tickbox_test_support::traces::{
    events, names, records, without_renderer_sequences, MAX_TRACE_BYTES,
};
use tickbox_test_support::{build_wasm, root, tick, TempDir};

/// Writes the scenario `name` on the wasm counter (virtual time), its
/// steps after the `[tick]` table.
fn counter_scenario(dir: &TempDir, name: &str, steps: &str) -> PathBuf {
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let f = dir.path(&format!("{name}.scenario.toml"));
    let text = format!("name = \"{name}\"\n[tick]\npath = {wasm:?}\nsize = [40, 8]\n\n{steps}");
    std::fs::write(&f, text).expect("write scenario");
    f
}

/// A scenario on the counter that passes.
fn passing(dir: &TempDir) -> PathBuf {
    counter_scenario(
        dir,
        "passing",
        "[[step]]\nkeys = [\"+\", \"+\"]\n\n\
         [[step]]\nexpect_state = { pointer = \"/value\", equals = 2 }\n\n\
         [[step]]\nexpect_screen = { contains = \"Counter: 2\" }\n",
    )
}

/// A scenario on the same counter whose second step fails.
fn failing(dir: &TempDir) -> PathBuf {
    counter_scenario(
        dir,
        "failing",
        "[[step]]\nkey = \"+\"\n\n\
         [[step]]\nexpect_state = { pointer = \"/value\", equals = 5 }\ntimeout = \"1s\"\n",
    )
}

/// Runs each scenario once with a trace, as `tickbox test --trace always`
/// does, and writes the traces into `traces`.
async fn traced(files: &[&Path], traces: &Path) -> Vec<ScenarioResult> {
    let app = App::new(settings(None));
    let opts = RunOptions {
        trace: true,
        ..RunOptions::default()
    };
    let mut results = Vec::new();
    for file in files {
        let s = scenario::load(file, &Policy::default()).expect("a valid scenario");
        results.push(scenario::run(&s, &prepared(&app, &s), &opts).await);
    }
    std::fs::create_dir_all(traces).expect("the traces directory");
    scenarios::write_traces(&mut results, traces);
    results
}

/// The pinned asciinema (tests/setup.sh installs it).
fn asciinema() -> PathBuf {
    let bin = root().join("tests/players/.venv/bin/asciinema");
    assert!(
        bin.exists(),
        "{} is missing: run tests/setup.sh (it installs the pinned asciinema)",
        bin.display()
    );
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_plays_in_asciinema_and_holds_frames_states_and_outcomes_the_same_on_every_run() {
    let dir = TempDir::new("trace-plays");
    let (pass, fail) = (passing(&dir), failing(&dir));
    let first = dir.path("first");
    let results = traced(&[&pass, &fail], &first).await;
    assert_eq!(results[0].outcome, Outcome::Passed, "{:?}", results[0]);
    let trace = first.join("passing.trace.cast");
    assert!(
        results[0]
            .notes
            .contains(&format!("trace: {}", trace.display())),
        "the result names its trace: {:?}",
        results[0].notes
    );
    let text = std::fs::read_to_string(&trace).expect("the passing trace");

    // asciinema's own player prints the screens: feeding what it prints to
    // a terminal emulator of the header's size shows the counter at 2.
    let (header, evs) = events(&text);
    let played = std::process::Command::new(asciinema())
        .arg("cat")
        .arg(&trace)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run asciinema cat");
    assert!(
        played.status.success(),
        "asciinema cat: {}",
        String::from_utf8_lossy(&played.stderr)
    );
    let size = |k: &str| header[k].as_u64().and_then(|n| u16::try_from(n).ok());
    let (w, h) = (size("width"), size("height"));
    assert_eq!((w, h), (Some(40), Some(8)), "the scenario's size");
    let nz = |n| std::num::NonZeroU16::new(n).expect("a size");
    let mut term = vt100::Parser::new(nz(8), nz(40), 0);
    term.process(&played.stdout);
    let shown = term.screen().contents();
    assert!(shown.contains("Counter: 2"), "the player shows: {shown}");
    // Negative control: the player printed screens, not tickbox's records.
    let printed = String::from_utf8_lossy(&played.stdout);
    assert!(!printed.contains("tick/describe"), "{printed}");

    // The frames, each state and each outcome.
    assert_eq!(header["version"], 2);
    assert_eq!(header["tickbox"]["trace"], 1);
    assert_eq!(header["tickbox"]["outcome"], "passed");
    assert_eq!(header["tickbox"]["seed"], 0);
    assert_eq!(header["tickbox"]["cut"], Value::Null);
    let frames = records(&evs, "frame");
    let framed = |dir: &str, needle: &str| {
        frames
            .iter()
            .any(|f| f["dir"] == dir && f["text"].as_str().is_some_and(|t| t.contains(needle)))
    };
    assert!(
        framed("to tick", "tick/describe"),
        "the host's describe is a frame: {frames:?}"
    );
    assert!(
        framed("from tick", "\"value\":2"),
        "the Tick's update to 2 is a frame: {frames:?}"
    );
    let steps = records(&evs, "step");
    let numbers: Vec<u64> = steps.iter().filter_map(|s| s["step"].as_u64()).collect();
    assert_eq!(numbers, [0, 1, 2, 3], "the start and each step: {steps:?}");
    assert!(steps.iter().all(|s| s["outcome"] == "passed"));
    assert!(
        steps[1]["state"]
            .as_str()
            .is_some_and(|s| s.contains("\"value\":2")),
        "the state after the keys: {:?}",
        steps[1]
    );
    let screen = steps[3]["screen"].as_array().expect("a screen");
    assert!(screen
        .iter()
        .any(|r| r.as_str().is_some_and(|r| r.contains("Counter: 2"))));
    let markers: Vec<&str> = evs
        .iter()
        .filter(|e| e.1 == "m")
        .map(|e| e.2.as_str())
        .collect();
    assert_eq!(markers.len(), 4, "{markers:?}");
    assert!(markers[1].starts_with("step 1: key"), "{markers:?}");
    // Times never go back, and each step is at least the pace apart.
    assert!(evs.windows(2).all(|p| p[0].0 <= p[1].0));
    let last = evs.last().expect("events");
    assert!(last.0 >= 1.5, "{last:?}");
    // Screens are the renderer's: nothing else in them is a control.
    for (_, code, data) in &evs {
        if code == "o" {
            let rest = without_renderer_sequences(data);
            assert!(!rest.chars().any(is_unsafe), "{data:?}");
        }
    }

    // The failing one records where it failed and what was there.
    let failed = std::fs::read_to_string(first.join("failing.trace.cast")).expect("its trace");
    let (header, evs) = events(&failed);
    assert_eq!(header["tickbox"]["outcome"], "failed");
    let last = records(&evs, "step").pop().expect("a step");
    assert_eq!(last["step"], 2);
    assert_eq!(last["outcome"], "failed");
    let found = last["found"].as_array().expect("found");
    assert!(
        found.iter().any(|f| f
            .as_str()
            .is_some_and(|f| f.contains("expected 5, found 1"))),
        "{last}"
    );

    // Virtual time: the same scenario gives the same file.
    let second = dir.path("second");
    traced(&[&pass, &fail], &second).await;
    for name in ["passing.trace.cast", "failing.trace.cast"] {
        let again = std::fs::read_to_string(second.join(name)).expect("second trace");
        let before = std::fs::read_to_string(first.join(name)).expect("first trace");
        assert!(
            again == before,
            "{name} differs between runs:\n{before}\n---\n{again}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chatty_ticks_trace_stops_at_its_bound_and_the_report_says_so() {
    let dir = TempDir::new("trace-chatty");
    let scenario = |n: u32| {
        let f = dir.path(&format!("burst{n}.scenario.toml"));
        std::fs::write(
            &f,
            format!(
                "name = \"burst {n}\"\n[tick]\ncommand = [\"python3\", {:?}, \"{n}\"]\n\n\
                 [[step]]\nwait_for = {{ pointer = \"/n\", equals = {n} }}\ntimeout = \"60s\"\n",
                tick("burst.py")
            ),
        )
        .expect("write scenario");
        f
    };
    // 100,000 updates: some 20 MB of frames as a trace records them.
    let (chatty, quiet) = (scenario(100_000), scenario(10));
    let traces = dir.path("traces");
    let results = traced(&[&chatty, &quiet], &traces).await;
    assert_eq!(
        names(&traces),
        ["burst_10.trace.cast", "burst_100000.trace.cast"],
        "{results:?}"
    );
    let big = std::fs::read_to_string(traces.join("burst_100000.trace.cast")).expect("the trace");
    assert!(big.len() <= MAX_TRACE_BYTES, "{} bytes", big.len());
    assert!(
        big.len() > MAX_TRACE_BYTES / 2,
        "filled to near its bound: {} bytes",
        big.len()
    );
    let (header, evs) = events(&big);
    let cut = header["tickbox"]["cut"]
        .as_str()
        .expect("the header says it was cut");
    assert!(cut.contains("MAX_TRACE_BYTES"), "{cut}");
    assert_eq!(records(&evs, "cut").len(), 1);
    assert!(
        records(&evs, "step").iter().any(|s| s["step"] == 1),
        "the last step's outcome is kept: {}",
        &big[big.len().saturating_sub(2000)..]
    );
    // The result's notes (what the report prints) say so.
    assert!(
        results[0]
            .notes
            .iter()
            .any(|n| n.contains("the trace was cut at its bound of 4194304 bytes")),
        "{:?}",
        results[0].notes
    );

    // The positive control: ten updates are all there, nothing cut.
    let small = std::fs::read_to_string(traces.join("burst_10.trace.cast")).expect("the trace");
    let (header, evs) = events(&small);
    assert_eq!(header["tickbox"]["cut"], Value::Null);
    assert_eq!(header["tickbox"]["outcome"], "passed");
    let updates = records(&evs, "frame")
        .iter()
        .filter(|f| {
            f["text"]
                .as_str()
                .is_some_and(|t| t.contains("tick/update"))
        })
        .count();
    assert_eq!(updates, 10, "every update is a frame");
}
