//! Deterministic by construction, across processes: every example
//! scenario, run three times by `tickbox test` (each its own process, so
//! pids and real times differ between them), gives the same report and
//! the same screens, and the screens are the committed snapshots. Reports
//! are compared byte for byte with only the wall-clock field
//! `duration_ms` removed. What a guest reads under virtual time (its
//! instance id, file times, directory order) is tested through the
//! sandbox's library, in its `virtual_time` tests.

use crate::util::*;
use serde_json::Value;
use std::path::Path;

/// A JSON report with each scenario's `duration_ms` (wall-clock time, the
/// one field that may differ between identical runs) removed, as text.
fn without_durations(report: &str) -> String {
    let mut v: Value = serde_json::from_str(report).expect("a JSON report");
    for s in v["scenarios"].as_array_mut().expect("scenarios") {
        let removed = s.as_object_mut().unwrap().remove("duration_ms");
        assert!(removed.is_some(), "the report has durations: {s}");
    }
    serde_json::to_string_pretty(&v).unwrap()
}

/// Copies every example scenario into `into` (snapshots left behind, so
/// `--update` writes them all), each under its example's name, with the
/// fixture files beside it (`body_file`, `[files]` sources); returns how
/// many scenarios.
fn copy_example_scenarios(into: &Path) -> usize {
    let mut n = 0;
    for example in std::fs::read_dir(root().join("examples")).unwrap() {
        let dir = example.unwrap().path().join("scenarios");
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        for f in files {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".snap") || name.ends_with(".snap.new") || !f.is_file() {
                continue;
            }
            std::fs::copy(&f, into.join(&name)).unwrap();
            n += usize::from(name.ends_with(".scenario.toml"));
        }
    }
    n
}

/// Snapshot files by name, with their bytes.
type Snapshots = Vec<(String, Vec<u8>)>;

/// The snapshots in `dir`, by name, and removes them.
fn take_snapshots(dir: &Path) -> Snapshots {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".snap") {
            v.push((name, std::fs::read(&p).unwrap()));
            std::fs::remove_file(&p).unwrap();
        }
    }
    v.sort();
    v
}

#[test]
fn every_example_scenario_gives_the_same_report_and_screens_in_every_run() {
    let (wasm, c) = (crate::scenario::wasm_dir(), crate::scenario::c_dir());
    let lang_dir = |lang| {
        let wasm = crate::toolchains::example(lang);
        wasm.parent().unwrap().to_string_lossy().into_owned()
    };
    let go = lang_dir(crate::toolchains::GO);
    let python = lang_dir(crate::toolchains::PYTHON);
    let js = lang_dir(crate::toolchains::JS);
    let env = [
        ("TICKBOX_WASM_DIR", wasm.as_str()),
        ("TICKBOX_C_DIR", c.as_str()),
        ("TICKBOX_GO_DIR", go.as_str()),
        ("TICKBOX_PYTHON_DIR", python.as_str()),
        ("TICKBOX_JS_DIR", js.as_str()),
    ];
    let t = TempDir::new("determinism-examples");
    let copied = copy_example_scenarios(&t.0);
    assert!(copied >= 11, "every example's scenarios: {copied}");
    let dir = t.0.to_string_lossy().into_owned();
    // Three runs, each its own process writing every snapshot afresh.
    let runs: Vec<(String, Snapshots)> = (0..3)
        .map(|_| {
            let out = tickbox_within(
                &[
                    "test",
                    &dir,
                    "--update",
                    "--format",
                    "json",
                    // Scenario files read only the variables named here, and
                    // the C counter's native scenario is ours.
                    "--allow-native",
                    "--allow-env",
                    "TICKBOX_WASM_DIR",
                    "--allow-env",
                    "TICKBOX_C_DIR",
                    "--allow-env",
                    "TICKBOX_GO_DIR",
                    "--allow-env",
                    "TICKBOX_PYTHON_DIR",
                    "--allow-env",
                    "TICKBOX_JS_DIR",
                ],
                &env,
                std::time::Duration::from_secs(600),
            );
            assert_eq!(out.code, 0, "{out:#?}");
            let report = out.json();
            assert_eq!(report["passed"], true, "{report}");
            assert_eq!(
                report["scenarios"].as_array().unwrap().len(),
                copied,
                "{report}"
            );
            (without_durations(&out.stdout), take_snapshots(&t.0))
        })
        .collect();
    let (report, snaps) = &runs[0];
    assert!(
        snaps.len() >= 6,
        "the examples' snapshots were written: {snaps:?}"
    );
    // Each written snapshot is the committed one (so runs on this machine
    // draw what was committed elsewhere).
    for (name, bytes) in snaps {
        let committed = std::fs::read_dir(root().join("examples"))
            .unwrap()
            .map(|e| e.unwrap().path().join("scenarios").join(name))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{name} is not committed"));
        assert_eq!(
            &std::fs::read(&committed).unwrap(),
            bytes,
            "{name} differs from {}",
            committed.display()
        );
    }
    for (i, (r, s)) in runs.iter().enumerate().skip(1) {
        assert_eq!(r, report, "run {i}'s report differs from run 0's");
        assert_eq!(s, snaps, "run {i}'s screens differ from run 0's");
    }
}
