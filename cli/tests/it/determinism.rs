//! Deterministic by construction: under `tickbox test`'s virtual time
//! nothing a wasm guest can read differs from one run to the next, not its
//! `TICKLOOP_INSTANCE_ID` (the seed's, not the host's pid and clock), not
//! the timestamps of its files (the virtual epoch, not the host's clock),
//! not the order of a directory's entries (by name, not the host file
//! system's order).
//! Each run is its own `tickbox test` process, so pids and real times
//! differ between them; reports are compared byte for byte with only the
//! wall-clock field `duration_ms` removed.

use crate::util::*;
use serde_json::Value;
use std::path::Path;

/// 2000-01-01T00:00:00Z: the virtual clock's start and every file time a
/// guest reads under virtual time.
const EPOCH: u64 = 946_684_800;

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

/// Runs one scenario file in its own `tickbox test` process (JSON report).
fn run(file: &Path, extra: &[&str]) -> Output {
    let mut argv = vec![
        "test".to_string(),
        file.to_string_lossy().into_owned(),
        "--format".into(),
        "json".into(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    tickbox_env(&argv, &[])
}

/// The result a failing `result = {}` step found, as JSON.
fn found(out: &Output) -> Value {
    assert_eq!(out.code, 1, "the last step is meant to fail: {out:#?}");
    let line = out.json()["scenarios"][0]["failure"]["found"][0]
        .as_str()
        .expect("a found line")
        .to_string();
    let json = line.strip_prefix("result ").expect("a result line");
    serde_json::from_str(json).expect("the result as JSON")
}

/// A scenario whose clockwork guest writes a file in a scratch directory
/// and reports its instance id and the file's times (`files`); its step
/// expects an empty result, so the report shows what the guest read. On
/// virtual time 5 s pass first, so the epoch cannot be mistaken for "now".
fn clockwork_files(t: &TempDir, name: &str, tick_extra: &str) -> std::path::PathBuf {
    let advance = if tick_extra.contains("deterministic = false") {
        ""
    } else {
        "[[step]]\nadvance = \"5s\"\n\n"
    };
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let file = t.path(&format!("{name}.scenario.toml"));
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\nscratch = \"/data\"\n{tick_extra}\n\n{advance}[[step]]\ncall = \"files\"\nargs = {{ dir = \"/data\" }}\nresult = {{}}\n",
            wasm.to_string_lossy()
        ),
    )
    .unwrap();
    file
}

#[test]
fn instance_id_and_file_times_are_the_same_in_every_run() {
    let t = TempDir::new("determinism-files");
    let file = clockwork_files(&t, "files", "seed = 7");
    let first = run(&file, &[]);
    let second = run(&file, &[]);
    let r = found(&first);
    assert_eq!(
        r["instance"], "tickbox-virtual-0000000000000007",
        "the instance id is the seed's: {r}"
    );
    assert_eq!(r["write_error"], Value::Null, "{r}");
    let epoch = serde_json::json!([EPOCH, 0]);
    for time in ["modified", "accessed"] {
        assert_eq!(r["file"][time], epoch, "the file's {time} time: {r}");
        assert_eq!(r["dir"][time], epoch, "the directory's {time} time: {r}");
        assert_eq!(r["after_set"][time], epoch, "after set-times: {r}");
    }
    assert_eq!(r["set_error"], Value::Null, "{r}");
    assert_eq!(r["file"]["len"], 4, "sizes stay real: {r}");
    assert_eq!(
        r["names"],
        serde_json::json!(SORTED),
        "entries by name, not as the host's file system keeps them: {r}"
    );
    // Two processes (other pids, other real times): the same report.
    assert_eq!(
        without_durations(&first.stdout),
        without_durations(&second.stdout)
    );
    // `--seed` decides the id.
    let other = found(&run(&file, &["--seed", "8"]));
    assert_eq!(other["instance"], "tickbox-virtual-0000000000000008");

    // Positive control: on real time (`deterministic = false`) the same
    // scenario reads the host's pid-and-clock id and real file times, and
    // two runs differ: the comparison above can fail.
    let real = clockwork_files(&t, "real", "deterministic = false");
    let a = found(&run(&real, &[]));
    let b = found(&run(&real, &[]));
    let id = a["instance"].as_str().unwrap();
    assert!(
        id.starts_with("tickbox-") && !id.starts_with("tickbox-virtual-"),
        "{a}"
    );
    assert_ne!(a["instance"], b["instance"], "real ids differ per run");
    assert!(
        a["file"]["modified"][0].as_u64().unwrap() > 1_700_000_000,
        "real file times: {a}"
    );
    assert_host_order(&a["names"]);
}

/// The nine names the guests create (`f` first, then eight in an order
/// that is neither this one nor its reverse), by name.
const SORTED: [&str; 9] = ["a", "c", "e", "f", "h", "m", "q", "x", "z"];

/// Positive control for the entry order: on real time a listing holds the
/// same names in the host file system's own order, which is not by name
/// (ext4 keeps a hash order, tmpfs and others creation order; the guests
/// create in neither the names' order nor its reverse), so the check of
/// the sorted order above can fail.
fn assert_host_order(names: &Value) {
    let names: Vec<&str> = names
        .as_array()
        .unwrap_or_else(|| panic!("a listing: {names}"))
        .iter()
        .map(|n| n.as_str().expect("a name"))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, SORTED, "the same names: {names:?}");
    assert_ne!(names, SORTED, "the host's order is not by name: {names:?}");
}

/// A scenario for the hostile guest built for preview 1: it writes
/// `/data/f`, then (with `list`) eight more files in an order that is not
/// their names', and its last step expects an empty result from `stat` of
/// the file, or (with `list`) from `list_dir` of the directory, so the
/// report shows what the module read.
fn preview1_scenario(t: &TempDir, name: &str, extra: &str, list: bool) -> std::path::PathBuf {
    let wasm = hostile_p1();
    let write = |path: &str| {
        format!("[[step]]\ncall = \"write_file\"\nargs = {{ path = \"/data/{path}\", text = \"x\" }}\nresult_subset = {{ ok = true }}\n\n")
    };
    let mut steps = write("f");
    let last = if list {
        for n in ["m", "c", "x", "a", "q", "h", "z", "e"] {
            steps.push_str(&write(n));
        }
        "[[step]]\ncall = \"list_dir\"\nargs = { path = \"/data\" }\nresult = {}\n"
    } else {
        "[[step]]\ncall = \"stat\"\nargs = { path = \"/data/f\" }\nresult = {}\n"
    };
    let file = t.path(&format!("{name}.scenario.toml"));
    std::fs::write(
        &file,
        format!("[tick]\npath = {wasm:?}\nscratch = \"/data\"\n{extra}\n\n{steps}{last}"),
    )
    .unwrap();
    file
}

#[test]
fn a_preview1_modules_file_times_are_virtual_too() {
    let t = TempDir::new("determinism-p1");
    let virt = found(&run(&preview1_scenario(&t, "p1", "", false), &[]));
    assert_eq!(virt["ok"], true, "{virt}");
    assert_eq!(virt["modified"], EPOCH, "{virt}");
    assert_eq!(virt["accessed"], EPOCH, "{virt}");
    assert_eq!(virt["len"], 1, "{virt}");
    // Positive control: real time shows the host's clock.
    let real = found(&run(
        &preview1_scenario(&t, "p1-real", "deterministic = false", false),
        &[],
    ));
    assert!(real["modified"].as_u64().unwrap() > 1_700_000_000, "{real}");
}

#[test]
fn a_preview1_modules_directory_lists_by_name_too() {
    let t = TempDir::new("determinism-p1-dir");
    let virt = found(&run(&preview1_scenario(&t, "p1-dir", "", true), &[]));
    assert_eq!(virt["ok"], true, "{virt}");
    assert_eq!(virt["value"], serde_json::json!(SORTED), "{virt}");
    // Positive control: real time lists in the host file system's order.
    let real = found(&run(
        &preview1_scenario(&t, "p1-dir-real", "deterministic = false", true),
        &[],
    ));
    assert_host_order(&real["value"]);
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
