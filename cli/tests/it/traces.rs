//! `tickbox test --trace` and `tickbox test show-trace`: which scenarios
//! get a trace, that asciinema's own player plays one as it is (PyPI
//! `asciinema`, pinned in `tests/players/requirements.txt`), that the
//! frames, states and outcomes are in it, that a deterministic scenario's
//! trace is the same file on every run, that a hostile Tick's trace and
//! its replay carry no raw control character, that a chatty Tick's trace
//! stops at its bound, and that `show-trace` treats a trace file as
//! untrusted input (escaped when tampered with, no symbolic links, one
//! line for a file that is not a trace).

use crate::tick_text::{assert_inert, shows_escaped};
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use tickbox_runtime::text::is_unsafe;

/// The bound on a trace file, as `conformance/src/limits.rs` has it.
const MAX_TRACE_BYTES: usize = 4 << 20;

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

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A trace's header and its events, decoded.
fn events(text: &str) -> (Value, Vec<(f64, String, String)>) {
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header")).expect("JSON header");
    let events = lines
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let e = e.as_array().expect("an event is an array");
            assert_eq!(e.len(), 3, "[time, code, data]: {l}");
            (
                e[0].as_f64().expect("time"),
                e[1].as_str().expect("code").to_string(),
                e[2].as_str().expect("string data").to_string(),
            )
        })
        .collect();
    (header, events)
}

/// tickbox's records (`"t"` events) of one kind.
fn records(events: &[(f64, String, String)], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.1 == "t")
        .map(|e| serde_json::from_str::<Value>(&e.2).expect("a record is JSON"))
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// The screen events' data with the renderer's own sequences taken out
/// (cursor position, SGR, erases, cursor visibility): what is left must
/// hold no control character at all.
fn without_renderer_sequences(data: &str) -> String {
    let mut out = String::new();
    let mut rest = data;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let params = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ';' || c == '?'))
            .unwrap_or(tail.len());
        match tail[params..].chars().next() {
            Some('H' | 'm' | 'K' | 'J' | 'l' | 'h') => rest = &tail[params + 1..],
            // Anything else stays, so the caller sees its ESC.
            _ => {
                out.push('\x1b');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
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
fn a_trace_plays_in_asciinema_and_holds_frames_states_and_outcomes_the_same_on_every_run() {
    let dir = TempDir::new("trace-plays");
    let (pass, fail) = (passing(&dir), failing(&dir));
    let first = dir.path("first");
    let out = test_traced(&[&pass, &fail], "always", &first, &[]);
    assert_eq!(out.code, 1, "{out:#?}");
    let trace = first.join("passing.trace.cast");
    let text = std::fs::read_to_string(&trace).unwrap();

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
    let (w, h) = (
        header["width"].as_u64().unwrap() as u16,
        header["height"].as_u64().unwrap() as u16,
    );
    assert_eq!((w, h), (40, 8), "the scenario's size");
    let nz = |n| std::num::NonZeroU16::new(n).unwrap();
    let mut term = vt100::Parser::new(nz(h), nz(w), 0);
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
    assert!(
        frames
            .iter()
            .any(|f| f["dir"] == "to tick" && f["text"].as_str().unwrap().contains("tick/describe")),
        "the host's describe is a frame: {frames:?}"
    );
    assert!(
        frames
            .iter()
            .any(|f| f["dir"] == "from tick" && f["text"].as_str().unwrap().contains("\"value\":2")),
        "the Tick's update to 2 is a frame: {frames:?}"
    );
    let steps = records(&evs, "step");
    let numbers: Vec<u64> = steps.iter().map(|s| s["step"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1, 2, 3], "the start and each step: {steps:?}");
    assert!(steps.iter().all(|s| s["outcome"] == "passed"));
    assert!(
        steps[1]["state"].as_str().unwrap().contains("\"value\":2"),
        "the state after the keys: {:?}",
        steps[1]
    );
    assert!(steps[3]["screen"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r.as_str().unwrap().contains("Counter: 2")));
    let markers: Vec<&str> = evs
        .iter()
        .filter(|e| e.1 == "m")
        .map(|e| e.2.as_str())
        .collect();
    assert_eq!(markers.len(), 4, "{markers:?}");
    assert!(markers[1].starts_with("step 1: key"), "{markers:?}");
    // Times never go back, and each step is at least the pace apart.
    assert!(evs.windows(2).all(|p| p[0].0 <= p[1].0));
    assert!(evs.last().unwrap().0 >= 1.5, "{:?}", evs.last());
    // Screens are the renderer's: nothing else in them is a control.
    for (_, code, data) in &evs {
        if code == "o" {
            let rest = without_renderer_sequences(data);
            assert!(!rest.chars().any(is_unsafe), "{data:?}");
        }
    }

    // The failing one records where it failed and what was there.
    let failed = std::fs::read_to_string(first.join("failing.trace.cast")).unwrap();
    let (header, evs) = events(&failed);
    assert_eq!(header["tickbox"]["outcome"], "failed");
    let last = records(&evs, "step").pop().unwrap();
    assert_eq!(last["step"], 2);
    assert_eq!(last["outcome"], "failed");
    assert!(
        last["found"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().contains("expected 5, found 1")),
        "{last}"
    );

    // Virtual time: the same scenario gives the same file.
    let second = dir.path("second");
    let out = test_traced(&[&pass, &fail], "always", &second, &[]);
    assert_eq!(out.code, 1, "{out:#?}");
    for name in ["passing.trace.cast", "failing.trace.cast"] {
        let again = std::fs::read_to_string(second.join(name)).unwrap();
        let before = std::fs::read_to_string(first.join(name)).unwrap();
        assert!(
            again == before,
            "{name} differs between runs:\n{before}\n---\n{again}"
        );
    }

    // show-trace replays it: off a terminal, every step.
    let shown = tickbox(&["test", "show-trace", trace.to_str().unwrap()]);
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
    let one = tickbox(&["test", "show-trace", trace.to_str().unwrap(), "--step", "1"]);
    assert_eq!(one.code, 0, "{one:#?}");
    assert!(one.stdout.contains("step 1: key"), "{one:#?}");
    assert!(!one.stdout.contains("step 2:"), "{one:#?}");
    let none = tickbox(&["test", "show-trace", trace.to_str().unwrap(), "--step", "9"]);
    none.expect(2, "has no step 9");
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
fn a_chatty_ticks_trace_stops_at_its_bound_and_the_report_says_so() {
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
        .unwrap();
        f
    };
    // 100,000 updates: some 20 MB of frames as a trace records them.
    let (chatty, quiet) = (scenario(100_000), scenario(10));
    let traces = dir.path("traces");
    let out = test_traced(&[&chatty, &quiet], "always", &traces, &["--allow-native"]);
    assert_eq!(
        names(&traces),
        ["burst_10.trace.cast", "burst_100000.trace.cast"],
        "{out:#?}"
    );
    let big = std::fs::read_to_string(traces.join("burst_100000.trace.cast")).unwrap();
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
    assert!(
        out.stdout
            .contains("note: the trace was cut at its bound of 4194304 bytes"),
        "the report says so: {}",
        out.stdout
    );
    let shown = tickbox(&[
        "test",
        "show-trace",
        traces.join("burst_100000.trace.cast").to_str().unwrap(),
    ]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert!(
        shown.stdout.contains("cut: the trace was cut"),
        "{}",
        shown.stdout
    );

    // The positive control: ten updates are all there, nothing cut.
    let small = std::fs::read_to_string(traces.join("burst_10.trace.cast")).unwrap();
    let (header, evs) = events(&small);
    assert_eq!(header["tickbox"]["cut"], Value::Null);
    assert_eq!(header["tickbox"]["outcome"], "passed");
    let updates = records(&evs, "frame")
        .iter()
        .filter(|f| f["text"].as_str().unwrap().contains("tick/update"))
        .count();
    assert_eq!(updates, 10, "every update is a frame");
}

/// A trace as someone might hand-edit one: escape sequences, bidi and C1
/// characters in every string show-trace prints.
fn tampered() -> String {
    let evil = "\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[2J\u{9b}31m\u{202e}\r\nFORGED";
    let header = serde_json::json!({
        "version": 2, "width": 20, "height": 4,
        "tickbox": {"trace": 1, "scenario": evil, "file": evil, "seed": 0,
                    "outcome": evil, "cut": evil},
    });
    let step = serde_json::json!({
        "kind": "step", "step": 1, "action": evil, "outcome": evil, "expected": evil,
        "found": [evil], "screen": [evil, evil], "state": evil,
    });
    let frame = serde_json::json!({"kind": "frame", "dir": evil, "text": evil});
    format!(
        "{header}\n{}\n{}\n{}\n",
        serde_json::json!([0.0, "o", evil]),
        serde_json::json!([0.0, "t", frame.to_string()]),
        serde_json::json!([0.5, "t", step.to_string()]),
    )
}

#[test]
fn show_trace_prints_a_tampered_trace_escaped() {
    let dir = TempDir::new("trace-tampered");
    let f = dir.path("evil.trace.cast");
    std::fs::write(&f, tampered()).unwrap();
    let shown = tickbox(&["test", "show-trace", f.to_str().unwrap(), "--all"]);
    assert_eq!(shown.code, 0, "{shown:#?}");
    assert_inert("show-trace stdout", &shown.stdout);
    assert_inert("show-trace stderr", &shown.stderr);
    assert!(
        !shown
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("FORGED")),
        "{shown:#?}"
    );
    // Each field got through, escaped (the positive control).
    let escaped = shown.stdout.matches("\\x1b]52;c;").count();
    assert!(
        escaped >= 10,
        "every field is shown escaped ({escaped}): {shown:#?}"
    );
    assert!(shows_escaped(&shown.stdout));
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
