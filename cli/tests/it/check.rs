//! `tickbox check` through real processes, where the process is the point:
//! exit codes, the three report formats, a Python Tick end to end, real
//! signals (SIGTERM to the group, SIGWINCH from the PTY), and the host and
//! the checker naming the same rule for every host-rule mode of
//! `faulty.py`. The rule-by-rule matrix (each broken Tick fails exactly the
//! rule it breaks) runs without processes, over the in-memory transport, in
//! `tickbox-conformance` (`conformance/src/check/tests.rs`), with a Rust twin of
//! each Python fixture in `tests/ticks/broken/`.

use crate::util::*;
use serde_json::Value;
use tickbox_runtime::backend::native::{spawn, NativeSpec};
use tickbox_runtime::check::{self, rules, Options, Report, Severity, Status};

fn broken(name: &str) -> String {
    tick(&format!("broken/{name}"))
}

async fn run_check_argv(argv: Vec<String>, allow_mutations: bool) -> Report {
    let name = argv.join(" ");
    let spec = NativeSpec::new(argv);
    let launch = move || std::future::ready(spawn(&spec).map_err(Into::into));
    let opts = Options {
        allow_mutations,
        ..Options::default()
    };
    check::run(&launch, &name, &opts)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One home per rule: for every host-rule fixture (each mode of faulty.py
/// that the host refuses at initialization), the host's error names a rule
/// id and `tickbox check` fails exactly that rule, because both call the
/// protocol crate's validators.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn host_and_checker_name_the_same_rule() {
    const MODES: &[&str] = &[
        "desc_kind",
        "desc_title",
        "desc_revision",
        "desc_tool_name",
        "desc_tool_dup",
        "desc_schema_type",
        "desc_schema_invalid",
        "desc_recover_mutating",
        "desc_recover_missing",
        "desc_series_path",
        "desc_series_dup",
        "desc_too_big",
        "protocol2",
        "update_null",
        "update_seq",
        "update_big",
        "update_at",
        "no_newline",
        "long_line",
        "invalid_json",
        "jsonrpc_1",
        "null_id",
        "string_id",
    ];
    let jobs: Vec<_> = MODES
        .iter()
        .map(|&mode| {
            tokio::spawn(async move {
                let host = tokio::task::spawn_blocking(move || {
                    tickbox(&with_command(&["read"], &faulty(mode)))
                })
                .await
                .unwrap();
                assert_eq!(host.code, 3, "{mode}: the host refuses it; {host:#?}");
                let rule = rule_named_in(&host.stderr)
                    .unwrap_or_else(|| panic!("{mode}: no rule id in {:?}", host.stderr));
                let report = run_check_argv(faulty(mode), false).await;
                let verdict = report.verdict(rule.id).unwrap();
                assert!(
                    verdict.status == Status::Fail && rule.severity == Severity::Must,
                    "{mode}: host names {}, the checker says {:?}\n{}",
                    rule.id,
                    verdict.status,
                    report.to_text()
                );
            })
        })
        .collect();
    for job in jobs {
        job.await.unwrap();
    }
}

// ----- the CLI: exit codes and formats -----

fn cli_check(extra: &[&str], script: &str) -> Output {
    let mut args = vec!["check".to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--".into(), "python3".into(), script.to_string()]);
    tickbox(&args)
}

#[test]
fn json_report_is_stable_and_exit_code_follows_must_rules() {
    let ok = cli_check(&["--format", "json"], &tick("counter.py"));
    assert_eq!(ok.code, 0, "{ok:#?}");
    let j = ok.json();
    assert_eq!(j["format"], 1);
    assert_eq!(j["passed"], true);
    assert_eq!(j["rules"].as_array().unwrap().len(), rules::ALL.len());
    for key in [
        "id", "section", "severity", "title", "status", "detail", "evidence",
    ] {
        assert!(
            j["rules"][0].get(key).is_some(),
            "rules[].{key} missing: {}",
            j["rules"][0]
        );
    }
    for key in ["pass", "fail", "warn", "not_applicable"] {
        assert!(j["summary"][key].is_u64(), "summary.{key}");
    }
    assert!(j["measurements"]["sessions"].as_u64().unwrap() >= 4);
    // A real process: SIGTERM goes to its group, EOF is a closed pipe.
    for (id, want) in [
        ("describe.valid", "pass"),
        ("call.wrong_revision", "pass"),
        ("call.invalid_args", "pass"),
        ("framing.garbage_ignored", "pass"),
        ("lifecycle.stdin_eof", "pass"),
        ("lifecycle.sigterm", "pass"),
        // Without --allow-mutations `increment` is never called, so
        // nothing updates and the update rules cannot apply.
        ("state.update_seq", "not_applicable"),
    ] {
        assert_eq!(status_of(&j, id), Value::from(want), "{id}: {j}");
    }

    let bad = cli_check(&["--format", "json"], &broken("null_id_reply.py"));
    assert_eq!(bad.code, 1, "{bad:#?}");
    let j = bad.json();
    assert_eq!(j["passed"], false);
    let rule = j["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "framing.no_null_id")
        .unwrap();
    assert_eq!(
        (
            rule["status"].as_str(),
            rule["section"].as_str(),
            rule["severity"].as_str()
        ),
        (Some("fail"), Some("3.2"), Some("must"))
    );
    let ev = &rule["evidence"][0];
    assert!(
        ev["received"][0].as_str().unwrap().contains("\"id\":null"),
        "{ev}"
    );
    assert!(!ev["sent"].as_array().unwrap().is_empty(), "{ev}");
    assert!(bad.stderr.contains("MUST"), "{bad:#?}");
}

#[test]
fn only_limits_the_report_and_advisories_keep_exit_zero() {
    let out = cli_check(
        &["--format", "json", "--only", "lifecycle,describe.valid"],
        &broken("ignores_eof.py"),
    );
    assert_eq!(out.code, 0, "an advisory failure alone passes: {out:#?}");
    let ids: Vec<String> = out.json()["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}={}",
                r["id"].as_str().unwrap(),
                r["status"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            "describe.valid=pass",
            "lifecycle.stdin_eof=fail",
            "lifecycle.sigterm=pass"
        ]
    );
}

/// The status a JSON report gives a rule.
fn status_of(report: &Value, id: &str) -> Value {
    report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {report}"))["status"]
        .clone()
}

/// Signals are where the process is the point: a resize is SIGWINCH from
/// the PTY, SIGTERM goes to the process group.
#[test]
fn real_signals_judge_resizes_and_sigterm() {
    let out = cli_check(
        &[
            "--format",
            "json",
            "--only",
            "state.no_presentation_updates",
        ],
        &broken("resize_update.py"),
    );
    assert_eq!(out.code, 1, "{out:#?}");
    assert_eq!(
        status_of(&out.json(), "state.no_presentation_updates"),
        Value::from("fail")
    );
    let out = cli_check(
        &["--format", "json", "--only", "lifecycle.sigterm"],
        &broken("ignores_sigterm.py"),
    );
    assert_eq!(out.code, 0, "an advisory failure alone passes: {out:#?}");
    assert_eq!(
        status_of(&out.json(), "lifecycle.sigterm"),
        Value::from("fail")
    );
}

#[test]
fn junit_is_well_formed_xml() {
    let out = cli_check(&["--format", "junit"], &broken("wrong_revision.py"));
    assert_eq!(out.code, 1, "{out:#?}");
    let dir = TempDir::new("junit");
    let path = dir.path("report.xml");
    std::fs::write(&path, &out.stdout).unwrap();
    // Python's XML parser is the independent judge of well-formedness.
    let script = "import sys, xml.dom.minidom as m\n\
        d = m.parse(sys.argv[1])\n\
        cases = d.getElementsByTagName('testcase')\n\
        fails = [c.getAttribute('name') for c in cases if c.getElementsByTagName('failure')]\n\
        print(len(cases), fails)";
    let py = std::process::Command::new("python3")
        .args(["-c", script, path.to_str().unwrap()])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&py.stdout);
    assert!(
        py.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&py.stderr),
        out.stdout
    );
    assert_eq!(
        printed.trim(),
        format!("{} ['call.wrong_revision (§7.2, must)']", rules::ALL.len())
    );
}

#[test]
fn text_report_shows_what_was_sent_and_what_came_back() {
    let out = cli_check(&[], &broken("unknown_tool.py"));
    assert_eq!(out.code, 1, "{out:#?}");
    let fail = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("FAIL  call.unknown_tool"))
        .take(4)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(fail.contains("§7.2"), "{fail}");
    assert!(
        fail.contains(
            "why:  a call to an unknown tool was answered with error -32000, not error -32602"
        ),
        "{fail}"
    );
    assert!(fail.contains("sent: {\"jsonrpc\":\"2.0\""), "{fail}");
    assert!(fail.contains("got:  {\"jsonrpc\":\"2.0\""), "{fail}");
    assert!(
        out.stdout.trim_end().ends_with("not applicable"),
        "{}",
        out.stdout
    );
}

#[test]
fn sample_args_drive_mutating_calls() {
    let dir = TempDir::new("samples");
    let path = dir.path("args.json");
    std::fs::write(&path, r#"{"increment": {"amount": 3}}"#).unwrap();
    let p = path.to_str().unwrap();
    let out = cli_check(
        &["--format", "json", "--allow-mutations", "--sample-args", p],
        &tick("counter.py"),
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let j = out.json();
    let notes = j["measurements"]["notes"].to_string();
    assert!(notes.contains("`increment`"), "{notes}");
    for id in [
        "state.update_seq",
        "state.update_valid",
        "state.update_size",
        "state.read_floor",
    ] {
        assert_eq!(status_of(&j, id), Value::from("pass"), "{id}: {j}");
    }

    std::fs::write(&path, r#"{"increment": {"amount": "three"}}"#).unwrap();
    cli_check(&["--sample-args", p], &tick("counter.py"))
        .expect(2, "do not match its input schema");
    std::fs::write(&path, r#"{"nope": {}}"#).unwrap();
    cli_check(&["--sample-args", p], &tick("counter.py")).expect(2, "`nope` is not a tool");
}

#[test]
fn usage_errors_and_unstartable_ticks() {
    cli_check(&["--only", "no.such_rule"], &tick("counter.py")).expect(2, "unknown rule");
    let out = tickbox(&["check", "/nonexistent/tick"]);
    out.expect(3, "does not exist");
    // One line naming the cause, with its context said once.
    assert_eq!(
        out.stderr.matches("cannot start the Tick:").count(),
        1,
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("`/nonexistent/tick` does not exist"),
        "{}",
        out.stderr
    );
    let out = tickbox(&["check", "--list-rules"]);
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout.lines().count(), rules::ALL.len());
}

/// The rule the CLI's error line names: its `(§S, group.name)`, or the
/// §4.3 version refusal, whose wording the protocol fixes. Only a test
/// reading the command's stderr from outside needs this: inside the
/// workspace an error carries its rule as a value.
fn rule_named_in(message: &str) -> Option<&'static check::Rule> {
    if message.contains("unsupported Tick protocol version") {
        return Some(rules::DESCRIBE_PROTOCOL);
    }
    rules::ALL
        .iter()
        .copied()
        .find(|r| message.contains(&format!(", {})", r.id)))
}
