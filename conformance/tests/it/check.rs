//! The checker against real processes, through `check::run` and the
//! sandbox's native `Launcher` (the launcher every command uses): the three
//! report renderings, `--only`'s selection, sample args, a Python Tick end
//! to end, real signals (SIGTERM to the group, SIGWINCH from the PTY), and
//! the host and the checker naming the same rule for every host-rule mode
//! of `faulty.py`. The rule-by-rule matrix (each broken Tick fails exactly
//! the rule it breaks) runs without processes, over the in-memory
//! transport, in `conformance/src/check/tests.rs`; the command's exit
//! codes and flags are the binary's, in `cli/tests/it/check.rs`.

use serde_json::Value;
use tickbox_conformance::check::{self, rules, CheckError, Options, Report, Severity, Status};
use tickbox_host::{NativeSpec, SessionConfig};
use tickbox_sandbox::{LaunchError, Launcher};
use tickbox_test_support::{faulty, tick, TempDir};

fn broken(name: &str) -> String {
    tick(&format!("broken/{name}"))
}

fn python(script: &str) -> Vec<String> {
    vec!["python3".into(), script.to_string()]
}

/// The checker's run on the Tick `argv` starts, or why it could not run.
async fn try_check(argv: Vec<String>, opts: &Options) -> Result<Report, CheckError> {
    let name = argv.join(" ");
    let launcher = Launcher::native(NativeSpec::new(argv));
    check::run(&launcher, &name, opts).await
}

async fn run_check(argv: Vec<String>, opts: &Options) -> Report {
    let name = argv.join(" ");
    try_check(argv, opts)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Only these rules (ids or groups), as `--only` selects them.
fn only(ids: &[&str]) -> Options {
    let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    Options {
        rules: rules::select(&ids).expect("known rules"),
        ..Options::default()
    }
}

/// The rule the host names when it refuses the Tick `argv` starts: at its
/// initialization, or at the first read of its state (what `tickbox read`
/// does).
async fn host_refusal(argv: Vec<String>) -> Option<&'static check::Rule> {
    let name = argv.join(" ");
    let launcher = Launcher::native(NativeSpec::new(argv));
    match launcher.open(SessionConfig::default()).await {
        Err(LaunchError::Init(e)) => e.rule,
        Err(e) => panic!("{name}: not refused at initialization: {e}"),
        Ok(session) => {
            let read = session.read().await;
            session.shutdown().await;
            match read {
                Ok(state) => panic!("{name}: the host accepted it: {state:?}"),
                Err(e) => e.rule(),
            }
        }
    }
}

/// One home per rule: for every host-rule fixture (each mode of faulty.py
/// that the host refuses at initialization), the host's error names a rule
/// and the checker fails exactly that rule, because both call the protocol
/// crate's validators.
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
                let rule = host_refusal(faulty(mode))
                    .await
                    .unwrap_or_else(|| panic!("{mode}: the host's refusal names no rule"));
                let report = run_check(faulty(mode), &Options::default()).await;
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

#[tokio::test]
async fn json_report_is_stable_and_passes_only_when_must_rules_hold() {
    // Both checks at once: each mostly waits on its own Tick.
    let defaults = Options::default();
    let (ok, bad) = tokio::join!(
        run_check(python(&tick("counter.py")), &defaults),
        run_check(python(&broken("null_id_reply.py")), &defaults),
    );
    assert!(ok.passed(), "{}", ok.to_text());
    let j = ok.to_json();
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
        // Without allow_mutations `increment` is never called, so nothing
        // updates and the update rules cannot apply.
        ("state.update_seq", "not_applicable"),
    ] {
        assert_eq!(status_of(&j, id), Value::from(want), "{id}: {j}");
    }

    assert!(!bad.passed(), "{}", bad.to_text());
    let j = bad.to_json();
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
}

#[tokio::test]
async fn only_limits_the_report_and_advisories_keep_it_passing() {
    let opts = only(&["lifecycle", "describe.valid"]);
    let report = run_check(python(&broken("ignores_eof.py")), &opts).await;
    assert!(
        report.passed(),
        "an advisory failure alone passes: {}",
        report.to_text()
    );
    let ids: Vec<String> = report.to_json()["rules"]
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

/// Signals are where the process is the point: a resize is SIGWINCH from
/// the PTY, SIGTERM goes to the process group.
#[tokio::test]
async fn real_signals_judge_resizes_and_sigterm() {
    // Both checks at once: each mostly waits on its own Tick.
    let (presentation, sigterm) = (
        only(&["state.no_presentation_updates"]),
        only(&["lifecycle.sigterm"]),
    );
    let (report, sigterm_report) = tokio::join!(
        run_check(python(&broken("resize_update.py")), &presentation),
        run_check(python(&broken("ignores_sigterm.py")), &sigterm),
    );
    assert!(!report.passed(), "{}", report.to_text());
    assert_eq!(
        status_of(&report.to_json(), "state.no_presentation_updates"),
        Value::from("fail")
    );
    let report = sigterm_report;
    assert!(
        report.passed(),
        "an advisory failure alone passes: {}",
        report.to_text()
    );
    assert_eq!(
        status_of(&report.to_json(), "lifecycle.sigterm"),
        Value::from("fail")
    );
}

#[tokio::test]
async fn junit_is_well_formed_xml() {
    let report = run_check(python(&broken("wrong_revision.py")), &Options::default()).await;
    assert!(!report.passed());
    let junit = report.to_junit();
    let dir = TempDir::new("junit");
    let path = dir.path("report.xml");
    std::fs::write(&path, &junit).unwrap();
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
        "{}\n{junit}",
        String::from_utf8_lossy(&py.stderr),
    );
    assert_eq!(
        printed.trim(),
        format!("{} ['call.wrong_revision (§7.2, must)']", rules::ALL.len())
    );
}

#[tokio::test]
async fn text_report_shows_what_was_sent_and_what_came_back() {
    let report = run_check(python(&broken("unknown_tool.py")), &Options::default()).await;
    assert!(!report.passed());
    let text = report.to_text();
    let fail = text
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
    assert!(text.trim_end().ends_with("not applicable"), "{text}");
}

#[tokio::test]
async fn sample_args_drive_mutating_calls() {
    let with_samples = |text: &str| Options {
        allow_mutations: true,
        sample_args: check::parse_sample_args(text).expect("a sample-args document"),
        ..Options::default()
    };
    let counter = || python(&tick("counter.py"));
    let opts = with_samples(r#"{"increment": {"amount": 3}}"#);
    let report = run_check(counter(), &opts).await;
    assert!(report.passed(), "{}", report.to_text());
    let j = report.to_json();
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

    for (text, want) in [
        (
            r#"{"increment": {"amount": "three"}}"#,
            "do not match its input schema",
        ),
        (r#"{"nope": {}}"#, "`nope` is not a tool"),
    ] {
        match try_check(counter(), &with_samples(text)).await {
            Err(e @ CheckError::SampleArgs(_)) => {
                assert!(e.to_string().contains(want), "{text}: {e}")
            }
            Err(e) => panic!("{text}: not a sample-args error: {e}"),
            Ok(r) => panic!("{text}: checked anyway: {}", r.to_text()),
        }
    }
}
