//! Reports of a `tickbox test` run: text, JSON (versioned) and JUnit XML.
//!
//! JSON schema [`JSON_FORMAT_VERSION`] (fields are only ever added):
//! `{"format": 1, "passed": bool, "summary": {"passed", "failed",
//! "start_failed", "invalid"}, "scenarios": [{"name", "file", "status":
//! "passed"|"failed"|"start_failed"|"invalid", "steps", "passed_steps",
//! "duration_ms", "seed" (null unless deterministic), "written": [paths],
//! "notes": [..], "failure": null | {"step", "action", "expected", "found":
//! [lines]}, "error": null | "…"}]}`.

use super::run::{Outcome, ScenarioResult};
use crate::check::report::{xml, xml_text};
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write;

/// The `format` field of the JSON report; bumped only on incompatible change.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// Counts of outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Scenarios whose every step passed.
    pub passed: usize,
    /// Scenarios with a failed step.
    pub failed: usize,
    /// Scenarios whose Tick could not start.
    pub start_failed: usize,
    /// Scenarios that cannot run as written.
    pub invalid: usize,
    /// Of the passed, those that failed first (and passed on a retry).
    pub flaky: usize,
}

/// Counts.
pub fn summary(results: &[ScenarioResult]) -> Summary {
    let mut s = Summary::default();
    for r in results {
        match r.outcome {
            Outcome::Passed => {
                s.passed += 1;
                s.flaky += usize::from(r.is_flaky());
            }
            Outcome::Failed(_) => s.failed += 1,
            Outcome::StartFailed(_) => s.start_failed += 1,
            Outcome::Invalid(_) => s.invalid += 1,
        }
    }
    s
}

fn status(o: &Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed(_) => "failed",
        Outcome::StartFailed(_) => "start_failed",
        Outcome::Invalid(_) => "invalid",
    }
}

/// The JSON report.
pub fn to_json(results: &[ScenarioResult]) -> Value {
    let s = summary(results);
    let scenarios: Vec<Value> = results
        .iter()
        .map(|r| {
            let (failure, error) = match &r.outcome {
                Outcome::Failed(f) => (
                    json!({"step": f.step, "action": f.action, "expected": f.expected, "found": f.found}),
                    Value::Null,
                ),
                Outcome::StartFailed(e) | Outcome::Invalid(e) => (Value::Null, json!(e)),
                Outcome::Passed => (Value::Null, Value::Null),
            };
            json!({
                "name": r.name,
                "file": r.file.display().to_string(),
                "status": status(&r.outcome),
                "steps": r.steps,
                "passed_steps": r.passed_steps,
                "duration_ms": (r.duration.as_secs_f64() * 1000.0).round(),
                "seed": r.seed,
                "written": r.written.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "notes": r.notes,
                "flaky": r.is_flaky(),
                "failed_attempts": r.failed_attempts.iter().map(|(o, seed)| json!({
                    "status": status(o),
                    "seed": seed,
                    "lines": attempt_lines(o),
                })).collect::<Vec<_>>(),
                "failure": failure,
                "error": error,
            })
        })
        .collect();
    json!({
        "format": JSON_FORMAT_VERSION,
        "passed": s.failed + s.start_failed + s.invalid == 0,
        "summary": s,
        "scenarios": scenarios,
    })
}

/// The failure of one scenario as indented lines (the text report's body).
/// What a failed attempt was, as report lines (escaped).
fn attempt_lines(o: &Outcome) -> Vec<String> {
    let lines = match o {
        Outcome::Passed => Vec::new(),
        Outcome::Failed(f) => {
            let mut v = vec![
                format!("step {}: {}", f.step, f.action),
                format!("  expected: {}", f.expected),
            ];
            v.extend(f.found.iter().map(|l| format!("  {l}")));
            v
        }
        Outcome::StartFailed(e) | Outcome::Invalid(e) => e.lines().map(String::from).collect(),
    };
    lines.iter().map(|l| clean(l)).collect()
}

fn failure_lines(r: &ScenarioResult) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (o, _)) in r.failed_attempts.iter().enumerate() {
        out.push(format!("attempt {} failed ({}):", i + 1, status(o)));
        out.extend(attempt_lines(o).into_iter().map(|l| format!("  {l}")));
    }
    match &r.outcome {
        Outcome::Passed => {}
        Outcome::Failed(f) => {
            out.push(format!("step {}: {}", f.step, f.action));
            out.push(format!("  expected: {}", f.expected));
            for l in &f.found {
                out.push(format!("  {l}"));
            }
            if let Some(seed) = r.seed {
                out.push(format!(
                    "  (virtual time, seed {seed}: rerun with that seed to reproduce)"
                ));
            }
        }
        Outcome::StartFailed(e) | Outcome::Invalid(e) => out.extend(e.lines().map(String::from)),
    }
    for n in &r.notes {
        out.push(format!("note: {n}"));
    }
    // A start failure can quote the Tick's screen: no control character
    // reaches a terminal or a report from here.
    out.iter().map(|l| clean(l)).collect()
}

/// Escapes unsafe characters (a line has no newline left to keep).
fn clean(line: &str) -> String {
    tickbox_host::text::escape(line)
}

/// The text report: one line per scenario, the failure under it.
pub fn to_text(results: &[ScenarioResult]) -> String {
    let mut out = String::new();
    for r in results {
        let tag = match r.outcome {
            Outcome::Passed if r.is_flaky() => "FLAKY",
            Outcome::Passed => "pass",
            Outcome::Failed(_) => "FAIL",
            Outcome::StartFailed(_) => "START",
            Outcome::Invalid(_) => "INVALID",
        };
        // The name and the path come from files: one line each, whatever
        // they contain, so no name can forge a report line.
        let _ = writeln!(
            out,
            "{tag:7} {} ({}, {}/{} steps, {} ms)",
            clean(&r.name),
            clean(&r.file.display().to_string()),
            r.passed_steps,
            r.steps,
            r.duration.as_millis()
        );
        for p in &r.written {
            let _ = writeln!(out, "        wrote {}", clean(&p.display().to_string()));
        }
        for l in failure_lines(r) {
            let _ = writeln!(out, "        {l}");
        }
    }
    let s = summary(results);
    let ok = s.failed + s.start_failed + s.invalid == 0;
    let _ = writeln!(
        out,
        "{}: {} passed{}, {} failed, {} could not start, {} invalid",
        if ok { "PASSED" } else { "FAILED" },
        s.passed,
        if s.flaky > 0 {
            format!(" ({} flaky)", s.flaky)
        } else {
            String::new()
        },
        s.failed,
        s.start_failed,
        s.invalid
    );
    out
}

/// The JUnit XML report: one `<testcase>` per scenario; failed steps are
/// `<failure>`, Ticks that could not start and invalid scenarios `<error>`.
pub fn to_junit(results: &[ScenarioResult]) -> String {
    let s = summary(results);
    let errors = s.start_failed + s.invalid;
    let total: f64 = results.iter().map(|r| r.duration.as_secs_f64()).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"tickbox test\" tests=\"{}\" failures=\"{}\" errors=\"{errors}\" time=\"{total:.3}\">",
        results.len(),
        s.failed
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"tickbox test\" tests=\"{}\" failures=\"{}\" errors=\"{errors}\" skipped=\"0\" time=\"{total:.3}\">",
        results.len(),
        s.failed
    );
    for r in results {
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
            xml(&clean(&r.file.display().to_string())),
            xml(&clean(&r.name)),
            r.duration.as_secs_f64()
        );
        let body = failure_lines(r).join("\n");
        // Failed attempts of a scenario that passed in the end, in the form
        // JUnit readers (Surefire, Jenkins, GitLab) show as flaky.
        if r.outcome == Outcome::Passed {
            for (o, _) in &r.failed_attempts {
                let lines = attempt_lines(o);
                let _ = write!(
                    out,
                    "\n      <flakyFailure message=\"{}\" type=\"{}\">{}</flakyFailure>",
                    xml(lines.first().map_or("", String::as_str)),
                    status(o),
                    xml_text(&lines.join("\n"))
                );
            }
            if !r.failed_attempts.is_empty() {
                out.push_str("\n    ");
            }
        }
        match &r.outcome {
            Outcome::Passed => {}
            Outcome::Failed(f) => {
                let _ = write!(
                    out,
                    "\n      <failure message=\"{}\">{}</failure>\n    ",
                    xml(&clean(&format!(
                        "step {} ({}): {}",
                        f.step, f.action, f.expected
                    ))),
                    xml_text(&body)
                );
            }
            Outcome::StartFailed(e) | Outcome::Invalid(e) => {
                let kind = if matches!(r.outcome, Outcome::Invalid(_)) {
                    "invalid"
                } else {
                    "start"
                };
                let _ = write!(
                    out,
                    "\n      <error type=\"{kind}\" message=\"{}\">{}</error>\n    ",
                    xml(&clean(e)),
                    xml_text(&body)
                );
            }
        }
        let _ = writeln!(out, "</testcase>");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::run::Failure;
    use std::time::Duration;

    fn results() -> Vec<ScenarioResult> {
        let mut pass = ScenarioResult::not_run("ok", "a.scenario.toml".into(), 2, Outcome::Passed);
        pass.passed_steps = 2;
        let mut fail = ScenarioResult::not_run(
            "bad <one>",
            "b.scenario.toml".into(),
            3,
            Outcome::Failed(Failure {
                step: 2,
                action: "expect_screen".into(),
                expected: "screen contains \"Counter: 9\"".into(),
                found: vec!["screen:".into(), "  |Counter: 1 \u{1}".into()],
            }),
        );
        fail.seed = Some(4);
        fail.duration = Duration::from_millis(12);
        let start = ScenarioResult::not_run(
            "gone",
            "c.scenario.toml".into(),
            1,
            Outcome::StartFailed("cannot start the Tick: no such file".into()),
        );
        vec![pass, fail, start]
    }

    #[test]
    fn a_pass_after_a_failure_is_flaky_in_every_format_and_on_virtual_time_a_bug() {
        let first = ScenarioResult::not_run(
            "f",
            "f.scenario.toml".into(),
            2,
            Outcome::Failed(Failure {
                step: 1,
                action: "expect_state".into(),
                expected: "value 2".into(),
                found: vec!["value 3".into()],
            }),
        );
        let mut first = first;
        first.seed = Some(7);
        let mut pass = ScenarioResult::not_run("f", "f.scenario.toml".into(), 2, Outcome::Passed);
        pass.seed = Some(7);
        let r = vec![pass.after_attempts(vec![first])];
        assert!(r[0].is_flaky());
        let text = to_text(&r);
        assert!(text.starts_with("FLAKY"), "{text}");
        assert!(text.contains("attempt 1 failed (failed):"), "{text}");
        assert!(text.contains("(1 flaky)"), "{text}");
        assert!(
            text.contains("a determinism bug") && text.contains("seed 7"),
            "{text}"
        );
        let j = to_json(&r);
        assert_eq!(j["scenarios"][0]["flaky"], true);
        assert_eq!(j["scenarios"][0]["status"], "passed");
        assert_eq!(j["scenarios"][0]["failed_attempts"][0]["seed"], 7);
        let x = to_junit(&r);
        assert!(
            x.contains("<flakyFailure message=\"step 1: expect_state\" type=\"failed\">"),
            "{x}"
        );
        assert!(!x.contains("<failure"), "{x}");
    }

    #[test]
    fn text_json_and_junit_say_the_same() {
        let r = results();
        let t = to_text(&r);
        assert!(t.contains("FAIL    bad <one>"), "{t}");
        assert!(t.contains("step 2: expect_screen"), "{t}");
        assert!(t.contains("seed 4: rerun with that seed"), "{t}");
        assert!(
            t.contains("FAILED: 1 passed, 1 failed, 1 could not start, 0 invalid"),
            "{t}"
        );
        let j = to_json(&r);
        assert_eq!(j["format"], 1);
        assert_eq!(j["passed"], false);
        assert_eq!(j["summary"]["failed"], 1);
        assert_eq!(j["scenarios"][1]["failure"]["step"], 2);
        assert_eq!(j["scenarios"][2]["status"], "start_failed");
        let x = to_junit(&r);
        assert!(x.contains("tests=\"3\" failures=\"1\" errors=\"1\""), "{x}");
        assert!(x.contains("name=\"bad &lt;one&gt;\""));
        assert!(x.contains("<error type=\"start\""));
        assert!(!x.contains('\u{1}'));
        assert!(!t.contains('\u{1}'), "escaped in text too: {t}");
        assert!(t.contains("\\x01"), "{t}");
        assert_eq!(
            x.matches("<testcase ").count(),
            x.matches("</testcase>").count()
        );
    }

    /// A name from a file cannot add a line to the text report or a raw
    /// line break to JUnit; the JSON report carries it as a JSON string.
    #[test]
    fn a_name_with_a_newline_stays_on_its_line() {
        let forged = "x\nPASSED: 9 passed, 0 failed, 0 could not start, 0 invalid";
        let r = vec![ScenarioResult::not_run(
            forged,
            "n\u{202e}.scenario.toml".into(),
            0,
            Outcome::Invalid("step 1: bad\nPASSED: forged".into()),
        )];
        let t = to_text(&r);
        assert_eq!(
            t.lines().filter(|l| l.starts_with("PASSED")).count(),
            0,
            "{t}"
        );
        assert!(t.contains("INVALID x\\nPASSED: 9 passed"), "{t}");
        assert!(t.contains("n\\u{202e}.scenario.toml"), "{t}");
        let x = to_junit(&r);
        assert!(!x.contains("&#10;PASSED"), "{x}");
        assert!(x.contains("name=\"x\\nPASSED"), "{x}");
        let j = to_json(&r);
        assert_eq!(j["scenarios"][0]["name"], forged);
    }
}
