//! `tickbox test --trace` and `tickbox test show-trace`: which scenarios
//! get a trace and that the report names it, that `show-trace` replays
//! every step or the one asked for, that a hostile Tick's trace, the report
//! and the replay carry no raw control character, and that `show-trace`
//! refuses a symbolic link and a file that is not a trace with one line.
//! What a trace holds (played by asciinema, the same on every run, cut at
//! its bound) is tested through the application layer in
//! `app/tests/it/traces.rs`; how a tampered trace reads back, escaped,
//! through `tickbox_conformance` in `conformance/tests/it/traces.rs`.

use crate::tick_text::{assert_inert, shows_escaped};
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tickbox_test_support::traces::{
    events, names, records, tampered, without_renderer_sequences, MAX_TRACE_BYTES,
};

/// A scenario on the wasm counter (virtual time) that passes.
fn passing(dir: &TempDir) -> PathBuf {
    let f = dir.path("passing.scenario.toml");
    std::fs::write(
        &f,
        format!(
            "name = \"passing\"\n[tick]\npath = \"{}/counter.wasm\"\nsize = [40, 8]\n\n\
             [[step]]\nkeys = [\"+\", \"+\"]\n\n\
             [[step]]\nexpect_state = {{ pointer = \"/value\", equals = 2 }}\n\n\
             [[step]]\nexpect_screen = {{ contains = \"Counter: 2\" }}\n",
            crate::scenario::wasm_dir()
        ),
    )
    .unwrap();
    f
}

/// A scenario on the same counter whose second step fails.
fn failing(dir: &TempDir) -> PathBuf {
    let f = dir.path("failing.scenario.toml");
    std::fs::write(
        &f,
        format!(
            "name = \"failing\"\n[tick]\npath = \"{}/counter.wasm\"\nsize = [40, 8]\n\n\
             [[step]]\nkey = \"+\"\n\n\
             [[step]]\nexpect_state = {{ pointer = \"/value\", equals = 5 }}\ntimeout = \"1s\"\n",
            crate::scenario::wasm_dir()
        ),
    )
    .unwrap();
    f
}

fn test_traced(files: &[&Path], when: &str, traces: &Path, extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec!["test".into()];
    args.extend(files.iter().map(|f| f.to_string_lossy().into_owned()));
    args.extend(["--trace".into(), when.into(), "--trace-dir".into()]);
    args.push(traces.to_string_lossy().into_owned());
    args.extend(extra.iter().map(|s| s.to_string()));
    tickbox_within(&args, &[], std::time::Duration::from_secs(180))
}

#[test]
fn on_failure_traces_only_the_failing_scenario_and_always_traces_both() {
    let dir = TempDir::new("trace-modes");
    let (pass, fail) = (passing(&dir), failing(&dir));
    let traces = dir.path("on-failure");
    let out = test_traced(&[&pass, &fail], "on-failure", &traces, &[]);
    assert_eq!(out.code, 1, "the failing scenario fails: {out:#?}");
    assert_eq!(names(&traces), ["failing.trace.cast"], "{out:#?}");
    let written = traces.join("failing.trace.cast");
    assert!(
        out.stdout
            .contains(&format!("note: trace: {}", written.display())),
        "the report names the trace: {out:#?}"
    );
    let (header, _) = events(&std::fs::read_to_string(&written).unwrap());
    assert_eq!(header["tickbox"]["outcome"], "failed");
    assert_eq!(header["tickbox"]["scenario"], "failing");

    let traces = dir.path("always");
    let out = test_traced(&[&pass, &fail], "always", &traces, &[]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert_eq!(
        names(&traces),
        ["failing.trace.cast", "passing.trace.cast"],
        "{out:#?}"
    );
    // Off (the default): nothing is written, and no directory made.
    let traces = dir.path("off");
    let out = test_traced(&[&pass], "off", &traces, &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(!traces.exists(), "--trace off writes nothing");

    // A Tick that never started still leaves a trace saying why.
    let missing = dir.path("missing.scenario.toml");
    std::fs::write(
        &missing,
        "name = \"missing\"\n[tick]\npath = \"nowhere/absent.wasm\"\n\n[[step]]\nkey = \"+\"\n",
    )
    .unwrap();
    let traces = dir.path("unstarted");
    let out = test_traced(&[&missing], "on-failure", &traces, &[]);
    assert_eq!(out.code, 3, "{out:#?}");
    let (header, evs) =
        events(&std::fs::read_to_string(traces.join("missing.trace.cast")).unwrap());
    assert_eq!(header["tickbox"]["outcome"], "start failed");
    let start = records(&evs, "step").pop().unwrap();
    assert!(
        start["found"][0]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{start}"
    );
}

#[test]
fn a_hostile_ticks_trace_and_its_replay_carry_no_raw_control_character() {
    let dir = TempDir::new("trace-hostile");
    let file = dir.path("corpus.scenario.toml");
    crate::tick_text::write_corpus_scenario(&file);
    let traces = dir.path("traces");
    let out = test_traced(&[&file], "on-failure", &traces, &["--allow-native"]);
    assert_eq!(out.code, 1, "the step fails: {out:#?}");
    assert_inert("the report", &out.stdout);
    let written = names(&traces);
    assert_eq!(written.len(), 1, "{written:?}");
    assert!(
        written[0].ends_with(".trace.cast") && written[0].chars().all(|c| c.is_ascii_graphic()),
        "a sanitised name: {written:?}"
    );
    let path = traces.join(&written[0]);
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes
            .iter()
            .all(|&b| (b >= 0x20 && b != 0x7f) || b == b'\n'),
        "no raw control byte in the file"
    );
    let text = String::from_utf8(bytes).unwrap();
    assert_inert("the trace file", &text);
    let (header, evs) = events(&text);
    assert_inert("the header's strings", &header.to_string());
    for (_, code, data) in &evs {
        match code.as_str() {
            "o" => assert_inert("a screen", &without_renderer_sequences(data)),
            _ => {
                assert_inert("a marker or record", data);
                if code == "t" {
                    let mut all = String::new();
                    let v: Value = serde_json::from_str(data).unwrap();
                    collect(&v, &mut all);
                    assert_inert("a record's strings", &all);
                }
            }
        }
    }
    // The positive control: the corpus is in the trace, escaped.
    let frames = records(&evs, "frame");
    assert!(
        frames
            .iter()
            .any(|f| f["text"].as_str().unwrap().contains("\\u202e")
                || f["text"].as_str().unwrap().contains("\\u{202e}")),
        "the frames carry the corpus escaped: {frames:?}"
    );
    assert!(shows_escaped(&header["tickbox"]["scenario"].to_string()));

    let shown = tickbox(&["test", "show-trace", path.to_str().unwrap()]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert_inert("show-trace stdout", &shown.stdout);
    assert_inert("show-trace stderr", &shown.stderr);
    assert!(shows_escaped(&shown.stdout), "{shown:#?}");
    assert!(
        !shown
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("FORGED")),
        "no line the corpus began: {shown:#?}"
    );
}

fn collect(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Array(a) => a.iter().for_each(|i| collect(i, out)),
        Value::Object(m) => m.iter().for_each(|(k, i)| {
            out.push_str(k);
            collect(i, out)
        }),
        _ => {}
    }
}

#[test]
fn show_trace_refuses_a_symlink_and_a_file_that_is_not_a_trace_with_one_line() {
    let dir = TempDir::new("trace-walls");
    let real = dir.path("real.trace.cast");
    std::fs::write(&real, tampered()).unwrap();
    let link = dir.path("link.trace.cast");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = tickbox(&["test", "show-trace", link.to_str().unwrap()]);
    out.expect(2, "is a symbolic link; a trace is never read through one");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(
        out.stderr.contains(link.to_str().unwrap()),
        "names the file"
    );
    assert!(
        out.stdout.is_empty() && !out.stderr.contains("52;c"),
        "{out:#?}"
    );
    // The positive control: the file itself is read.
    let ok = tickbox(&["test", "show-trace", real.to_str().unwrap()]);
    assert_eq!(ok.code, 0, "{ok:#?}");

    // Not a trace: the rule, never the content.
    let other = dir.path("notes.txt");
    std::fs::write(&other, "secret\u{1b}]0;x\u{7} not a trace\n").unwrap();
    let out = tickbox(&["test", "show-trace", other.to_str().unwrap()]);
    out.expect(2, "line 1 is not the header of a tickbox trace");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(
        !out.stderr.contains("secret") && out.stdout.is_empty(),
        "{out:#?}"
    );
    let broken = dir.path("broken.trace.cast");
    let mut text = tampered();
    text.push_str("[1.0, \"t\", \"secret\"]\n");
    std::fs::write(&broken, text).unwrap();
    let out = tickbox(&["test", "show-trace", broken.to_str().unwrap()]);
    out.expect(2, "line 5 is not a tickbox record");
    assert!(!out.stderr.contains("secret"), "{out:#?}");
    // Past the bound: refused before it is parsed.
    let big = dir.path("big.trace.cast");
    std::fs::write(&big, "x".repeat(MAX_TRACE_BYTES + 1)).unwrap();
    let out = tickbox(&["test", "show-trace", big.to_str().unwrap()]);
    out.expect(2, "over the 4194304-byte limit");
}

/// `show-trace` replays a trace: off a terminal, every step, or the one
/// `--step` names (exit 2 for one it lacks); a cut trace says so.
#[test]
fn show_trace_replays_every_step_or_the_one_asked_for() {
    let dir = TempDir::new("trace-show");
    let traces = dir.path("traces");
    let out = test_traced(&[&passing(&dir)], "always", &traces, &[]);
    assert_eq!(out.code, 0, "{out:#?}");
    let trace = traces.join("passing.trace.cast");
    let path = trace.to_str().unwrap();
    let shown = tickbox(&["test", "show-trace", path]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    for needle in [
        "trace of passing",
        "outcome: passed; virtual time, seed 0",
        "step 0: start — passed",
        "step 2: expect state /value == 2 — passed",
        "|│Counter: 2",
        "state: {",
        "to tick: {",
        "from tick: {",
    ] {
        assert!(shown.stdout.contains(needle), "{needle:?} in {shown:#?}");
    }
    assert!(!shown.stdout.contains("cut: "), "{shown:#?}");
    let one = tickbox(&["test", "show-trace", path, "--step", "1"]);
    assert_eq!(one.code, 0, "{one:#?}");
    assert!(one.stdout.contains("step 1: key"), "{one:#?}");
    assert!(!one.stdout.contains("step 2:"), "{one:#?}");
    tickbox(&["test", "show-trace", path, "--step", "9"]).expect(2, "has no step 9");
    // The same trace, its header saying it was cut.
    let text = std::fs::read_to_string(&trace).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(head).unwrap();
    header["tickbox"]["cut"] = "the trace was cut at its bound".into();
    let cut = dir.path("cut.trace.cast");
    std::fs::write(&cut, format!("{header}\n{rest}")).unwrap();
    let shown = tickbox(&["test", "show-trace", cut.to_str().unwrap()]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert!(
        shown.stdout.contains("cut: the trace was cut"),
        "{}",
        shown.stdout
    );
}
