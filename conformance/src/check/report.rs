//! Check reports and their three renderings.
//!
//! - **text** — one line per rule, with why / sent / got under each failure;
//! - **json** — one document, schema [`JSON_FORMAT_VERSION`] (documented in
//!   docs/guide/check.md); fields are only ever added;
//! - **junit** — JUnit XML: one `<testcase>` per rule, MUST failures as
//!   `<failure>`, not-applicable rules as `<skipped>`, advisory failures as
//!   passing cases with a `WARNING` in `<system-out>` (so CI stays green
//!   exactly when the exit code is 0).
//!
//! Everything a Tick sent is untrusted: it reaches reports only as
//! [`tickbox_protocol::message::excerpt`]s (escaped, bounded), and the XML
//! writer escapes it again and drops characters XML cannot carry.

use super::rules::{Rule, Severity};
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Write;

/// The `format` field of the JSON report; bumped only on incompatible change.
pub const JSON_FORMAT_VERSION: u32 = 1;

/// A rule's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The Tick kept the rule everywhere it was exercised.
    Pass,
    /// The Tick broke the rule at least once.
    Fail,
    /// Nothing in the run could exercise the rule (the reason says why).
    NotApplicable,
}

/// One instance of a failure: why, what was sent, what came back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// Why this is a failure.
    pub why: String,
    /// Lines the checker wrote (excerpts).
    pub sent: Vec<String>,
    /// Lines the Tick wrote (excerpts).
    pub received: Vec<String>,
}

/// The verdict on one rule.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The rule.
    pub rule: &'static Rule,
    /// Its outcome.
    pub status: Status,
    /// For a failure the first reason; for a pass what was observed; for
    /// not applicable why not.
    pub detail: String,
    /// Up to five failure instances.
    pub evidence: Vec<Evidence>,
}

/// Numbers the run measured (reported, never asserted).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurements {
    /// Fresh Tick sessions started.
    pub sessions: u32,
    /// Latency of the first tick/describe, which includes the Tick's startup, in ms.
    pub startup_describe_ms: Option<f64>,
    /// Latency of every answered tick/describe after the first, in ms.
    pub describe_ms: Vec<f64>,
    /// Latency of every answered tick/read after initialization, in ms.
    pub read_ms: Vec<f64>,
    /// Encoded size of the descriptor.
    pub descriptor_bytes: Option<usize>,
    /// Median encoded size of non-null state data seen.
    pub state_bytes_median: Option<usize>,
    /// Largest encoded size of state data seen.
    pub state_bytes_max: Option<usize>,
    /// Whether the state changed by itself during the quiet period.
    pub spontaneous_updates: bool,
    /// Time from stdin EOF to exit.
    pub exit_after_eof_ms: Option<f64>,
    /// Time from SIGTERM to exit.
    pub exit_after_sigterm_ms: Option<f64>,
    /// What else the run did (e.g. mutating tools called).
    pub notes: Vec<String>,
}

/// The result of `tickbox check`.
#[derive(Debug, Clone)]
pub struct Report {
    /// How the Tick was named on the command line.
    pub tick: String,
    /// One verdict per selected rule, in table order.
    pub verdicts: Vec<Verdict>,
    /// What was measured.
    pub measurements: Measurements,
}

/// Counts of verdicts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Rules passed.
    pub pass: usize,
    /// MUST rules failed.
    pub fail: usize,
    /// Advisory rules failed.
    pub warn: usize,
    /// Rules not applicable.
    pub not_applicable: usize,
}

impl Report {
    /// Whether every MUST rule passed or was not applicable.
    pub fn passed(&self) -> bool {
        self.summary().fail == 0
    }

    /// The verdict on a rule, by id.
    pub fn verdict(&self, id: &str) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.rule.id == id)
    }

    /// Counts.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for v in &self.verdicts {
            match (v.status, v.rule.severity) {
                (Status::Pass, _) => s.pass += 1,
                (Status::Fail, Severity::Must) => s.fail += 1,
                (Status::Fail, Severity::Advisory) => s.warn += 1,
                (Status::NotApplicable, _) => s.not_applicable += 1,
            }
        }
        s
    }

    /// The JSON report.
    pub fn to_json(&self) -> Value {
        let rules: Vec<Value> = self
            .verdicts
            .iter()
            .map(|v| {
                json!({
                    "id": v.rule.id,
                    "section": v.rule.section,
                    "severity": v.rule.severity,
                    "title": v.rule.title,
                    "status": v.status,
                    "detail": v.detail,
                    "evidence": v.evidence,
                })
            })
            .collect();
        json!({
            "format": JSON_FORMAT_VERSION,
            "tick": self.tick,
            "passed": self.passed(),
            "summary": self.summary(),
            "rules": rules,
            "measurements": self.measurements,
        })
    }

    /// The text report.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "tickbox check {}", self.tick);
        let width = self
            .verdicts
            .iter()
            .map(|v| v.rule.id.len())
            .max()
            .unwrap_or(0);
        for v in &self.verdicts {
            let tag = match (v.status, v.rule.severity) {
                (Status::Pass, _) => "pass",
                (Status::Fail, Severity::Must) => "FAIL",
                (Status::Fail, Severity::Advisory) => "warn",
                (Status::NotApplicable, _) => "n/a ",
            };
            let section = format!("§{}", v.rule.section);
            let _ = write!(
                out,
                "{tag}  {:width$}  {section:5}  {}",
                v.rule.id, v.rule.title
            );
            if v.status == Status::Fail {
                let _ = writeln!(out);
                for e in &v.evidence {
                    let _ = writeln!(out, "        why:  {}", e.why);
                    for s in &e.sent {
                        let _ = writeln!(out, "        sent: {s}");
                    }
                    for r in &e.received {
                        let _ = writeln!(out, "        got:  {r}");
                    }
                }
            } else if v.detail.is_empty() {
                let _ = writeln!(out);
            } else {
                let _ = writeln!(out, " ({})", v.detail);
            }
        }
        for n in &self.measurements.notes {
            let _ = writeln!(out, "note: {n}");
        }
        let s = self.summary();
        let _ = writeln!(
            out,
            "{}: {} passed, {} failed, {} advisory warnings, {} not applicable",
            if self.passed() { "PASSED" } else { "FAILED" },
            s.pass,
            s.fail,
            s.warn,
            s.not_applicable
        );
        out
    }

    /// The JUnit XML report.
    pub fn to_junit(&self) -> String {
        let s = self.summary();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"tickbox check\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">",
            self.verdicts.len(),
            s.fail,
            s.not_applicable
        );
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">",
            xml(&format!("tickbox check {}", self.tick)),
            self.verdicts.len(),
            s.fail,
            s.not_applicable
        );
        for v in &self.verdicts {
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\">",
                xml(&format!("tick.{}", v.rule.group())),
                xml(&format!(
                    "{} (§{}, {})",
                    v.rule.id,
                    v.rule.section,
                    v.rule.severity.as_str()
                ))
            );
            let body = evidence_text(v);
            match (v.status, v.rule.severity) {
                (Status::Pass, _) => {}
                (Status::Fail, Severity::Must) => {
                    let _ = write!(
                        out,
                        "\n      <failure type=\"must\" message=\"{}\">{}</failure>\n    ",
                        xml(&v.detail),
                        xml_text(&body)
                    );
                }
                (Status::Fail, Severity::Advisory) => {
                    let _ = write!(
                        out,
                        "\n      <system-out>{}</system-out>\n    ",
                        xml_text(&format!("WARNING (advisory): {body}"))
                    );
                }
                (Status::NotApplicable, _) => {
                    let _ = write!(
                        out,
                        "\n      <skipped message=\"{}\"/>\n    ",
                        xml(&v.detail)
                    );
                }
            }
            let _ = writeln!(out, "</testcase>");
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

fn evidence_text(v: &Verdict) -> String {
    let mut s = format!("{}\n", v.rule.title);
    for e in &v.evidence {
        let _ = writeln!(s, "why:  {}", e.why);
        for l in &e.sent {
            let _ = writeln!(s, "sent: {l}");
        }
        for l in &e.received {
            let _ = writeln!(s, "got:  {l}");
        }
    }
    s
}

/// Escapes text for XML element content: like [`xml`], but newlines and tabs
/// stay as they are (they only need escaping inside attribute values).
pub fn xml_text(s: &str) -> String {
    xml(s).replace("&#10;", "\n").replace("&#9;", "\t")
}

/// Escapes text for XML content and attribute values, dropping characters
/// XML 1.0 cannot represent at all (the one XML escaper:
/// [`tickbox_host::text::xml_markup`]).
pub fn xml(s: &str) -> String {
    tickbox_host::text::xml_markup(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::rules;

    fn report() -> Report {
        Report {
            tick: "t <&> \"x\"".into(),
            verdicts: vec![
                Verdict {
                    rule: rules::DESCRIBE_VALID,
                    status: Status::Pass,
                    detail: "ok".into(),
                    evidence: vec![],
                },
                Verdict {
                    rule: rules::FRAMING_NO_NULL_ID,
                    status: Status::Fail,
                    detail: "a response has id: null".into(),
                    evidence: vec![Evidence {
                        why: "bad <id>".into(),
                        sent: vec!["x\u{1}y".into()],
                        received: vec!["]]>".into()],
                    }],
                },
                Verdict {
                    rule: rules::DESCRIBE_KIND_NAMING,
                    status: Status::Fail,
                    detail: "kind".into(),
                    evidence: vec![],
                },
                Verdict {
                    rule: rules::LIFECYCLE_SIGTERM,
                    status: Status::NotApplicable,
                    detail: "wasm".into(),
                    evidence: vec![],
                },
            ],
            measurements: Measurements::default(),
        }
    }

    #[test]
    fn summary_and_verdict() {
        let r = report();
        assert_eq!(
            r.summary(),
            Summary {
                pass: 1,
                fail: 1,
                warn: 1,
                not_applicable: 1
            }
        );
        assert!(!r.passed());
        let j = r.to_json();
        assert_eq!(j["format"], 1);
        assert_eq!(j["rules"][1]["status"], "fail");
        assert_eq!(j["rules"][1]["severity"], "must");
        assert_eq!(j["rules"][3]["status"], "not_applicable");
        assert!(r.to_text().contains("FAIL  framing.no_null_id"));
    }

    #[test]
    fn junit_escapes_everything_a_tick_sent() {
        let x = report().to_junit();
        assert!(x.contains("<failure type=\"must\" message=\"a response has id: null\">"));
        assert!(x.contains("bad &lt;id&gt;"));
        assert!(x.contains("]]&gt;"));
        assert!(!x.contains('\u{1}'));
        assert!(x.contains("t &lt;&amp;&gt; &quot;x&quot;"));
        assert!(x.contains("<skipped message=\"wasm\"/>"));
        assert!(x.contains("WARNING (advisory)"));
        // Balanced: one open and one close per case.
        assert_eq!(
            x.matches("<testcase ").count(),
            x.matches("</testcase>").count()
        );
    }
}
