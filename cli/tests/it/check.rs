//! `tickbox check`: conforming Ticks pass, and each deliberately broken Tick
//! under tests/ticks/broken fails exactly the rule it breaks, named with its
//! section. The broken-Tick matrix runs through the library (one process, no
//! binary); exit codes and the three formats run through the CLI.

use crate::util::*;
use serde_json::Value;
use std::collections::BTreeSet;
use tickbox_runtime::backend::native::{spawn, NativeSpec};
use tickbox_runtime::check::{self, rules, Options, Report, Severity, Status};

/// Latency is reported, never asserted: these advisories may fire on a
/// loaded machine and are ignored by every test.
const TIMING: &[&str] = &["describe.prompt", "read.prompt"];

fn broken(name: &str) -> String {
    tick(&format!("broken/{name}"))
}

async fn run_check(script: &str, allow_mutations: bool) -> Report {
    run_check_argv(vec!["python3".into(), script.into()], allow_mutations).await
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

fn failing(report: &Report, severity: Severity) -> BTreeSet<String> {
    report
        .verdicts
        .iter()
        .filter(|v| v.status == Status::Fail && v.rule.severity == severity)
        .filter(|v| !TIMING.contains(&v.rule.id))
        .map(|v| v.rule.id.to_string())
        .collect()
}

/// Exactly these MUST rules fail (and so the check fails iff there are any),
/// these advisory rules fail (others may not, timing aside), and each failure
/// names its section and carries evidence.
fn expect(report: &Report, must: &[&str], advisory: &[&str]) {
    let text = report.to_text();
    let set = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        failing(report, Severity::Must),
        set(must),
        "MUST failures\n{text}"
    );
    assert_eq!(
        failing(report, Severity::Advisory),
        set(advisory),
        "advisory failures\n{text}"
    );
    assert_eq!(report.passed(), must.is_empty(), "{text}");
    for id in must.iter().chain(advisory) {
        let v = report.verdict(id).unwrap();
        let rule = rules::lookup(id).unwrap();
        assert!(
            text.contains(&format!(
                "{}  {id}",
                if rule.severity == Severity::Must {
                    "FAIL"
                } else {
                    "warn"
                }
            )) && text.contains(&format!("§{}", rule.section)),
            "{id} §{} not shown as failing:\n{text}",
            rule.section
        );
        assert!(
            !v.evidence.is_empty() && v.evidence.iter().all(|e| !e.why.is_empty()),
            "{id} has no evidence: {v:?}"
        );
    }
}

#[tokio::test]
async fn the_counter_passes() {
    let r = run_check(&tick("counter.py"), false).await;
    expect(&r, &[], &[]);
    // Without --allow-mutations `increment` is never called, so nothing
    // updates and the update rules cannot apply.
    assert_eq!(
        r.verdict("state.update_seq").unwrap().status,
        Status::NotApplicable
    );
    for id in [
        "describe.valid",
        "call.wrong_revision",
        "call.invalid_args",
        "framing.garbage_ignored",
        "lifecycle.sigterm",
    ] {
        assert_eq!(
            r.verdict(id).unwrap().status,
            Status::Pass,
            "{id}\n{}",
            r.to_text()
        );
    }
}

#[tokio::test]
async fn the_counter_passes_with_mutations() {
    let r = run_check(&tick("counter.py"), true).await;
    expect(&r, &[], &[]);
    for id in [
        "state.update_seq",
        "state.update_valid",
        "state.update_size",
        "state.read_floor",
    ] {
        assert_eq!(
            r.verdict(id).unwrap().status,
            Status::Pass,
            "{id}\n{}",
            r.to_text()
        );
    }
}

#[tokio::test]
async fn the_broken_ticks_base_passes() {
    expect(&run_check(&broken("base.py"), true).await, &[], &[]);
}

/// One test per broken Tick: `name(file, allow_mutations, [MUST ids], [advisory ids])`.
macro_rules! broken_tick {
    ($($test:ident: $file:literal, $mutations:literal, [$($must:literal),*], [$($adv:literal),*];)*) => {$(
        #[tokio::test]
        async fn $test() {
            let r = run_check(&broken($file), $mutations).await;
            expect(&r, &[$($must),*], &[$($adv),*]);
        }
    )*};
}

broken_tick! {
    replying_id_null_to_garbage: "null_id_reply.py", false, ["framing.no_null_id", "framing.garbage_ignored"], [];
    replying_to_unparseable_lines: "garbage_reply.py", false, ["framing.garbage_ignored", "framing.one_response"], [];
    executing_a_stale_revision: "wrong_revision.py", false, ["call.wrong_revision"], [];
    not_checking_args: "no_arg_check.py", false, ["call.invalid_args"], [];
    update_seq_going_backwards: "update_seq_backwards.py", true, ["state.update_seq"], [];
    reading_below_the_last_update: "read_below_update.py", true, ["state.read_floor"], [];
    describe_with_side_effects: "describe_side_effect.py", false, ["describe.no_side_effects"], [];
    ignoring_stdin_eof: "ignores_eof.py", false, [], ["lifecycle.stdin_eof"];
    ignoring_sigterm: "ignores_sigterm.py", false, [], ["lifecycle.sigterm"];
    interleaving_concurrent_answers: "interleaved.py", false,
        ["framing.no_interleave", "framing.protocol_only", "framing.one_response", "call.concurrent"],
        ["lifecycle.stdin_eof"];
    unterminated_final_message: "unterminated.py", false, ["framing.newline"], [];
    query_tool_that_mutates: "mutates_dishonest.py", false, [], ["tools.mutates_honest"];
    banner_on_stdout: "stray_stdout.py", false, ["framing.protocol_only"], [];
    wrong_code_for_unknown_method: "unknown_method.py", false, ["call.unknown_method"], [];
    executed_code_for_unknown_tool: "unknown_tool.py", false, ["call.unknown_tool"], [];
    mutating_recover_with: "recover_mutating.py", false, ["describe.valid", "describe.recover_with"], [];
    protocol_version_two: "protocol_two.py", false, ["describe.valid", "describe.protocol"], [];
    unconventional_kind: "kind_naming.py", false, [], ["describe.kind_naming"];
    answering_twice: "duplicate_response.py", false, ["framing.one_response"], [];
    null_update_data: "null_update.py", true, ["state.update_valid"], [];
    large_state: "big_state.py", false, [], ["state.typical_size"];
    requests_to_the_host: "sends_request.py", false, ["framing.no_requests"], [];
    // The driver stops reading at the over-long line, as a host would end
    // the session there, so initialization cannot finish either.
    line_over_8_mib: "long_line.py", false,
        ["framing.line_limit", "init.timely", "describe.valid", "framing.one_response"], [];
    refusing_after_acting: "refuses_after_acting.py", true, ["call.not_executed_no_effect"], [];
    update_on_resize: "resize_update.py", false, ["state.no_presentation_updates"], [];
    both_result_and_error: "both_result_error.py", false, ["framing.response_shape", "call.unknown_method"], [];
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
                let rule = host_rule(&host.stderr)
                    .unwrap_or_else(|| panic!("{mode}: no rule id in {:?}", host.stderr));
                let report = run_check_argv(faulty(mode), false).await;
                let failing = failing(&report, Severity::Must);
                assert!(
                    failing.contains(rule),
                    "{mode}: host names {rule}, the checker fails {failing:?}\n{}",
                    report.to_text()
                );
            })
        })
        .collect();
    for job in jobs {
        job.await.unwrap();
    }
}

/// The rule id a host error names: `(§S, group.name)`, or the §4.3 version
/// message, whose wording the protocol fixes.
fn host_rule(stderr: &str) -> Option<&'static str> {
    if stderr.contains("unsupported Tick protocol version") {
        return Some(rules::DESCRIBE_PROTOCOL.id);
    }
    rules::ALL
        .iter()
        .find(|r| stderr.contains(&format!(", {})", r.id)))
        .map(|r| r.id)
}

#[test]
fn every_broken_tick_has_a_test() {
    let here = std::fs::read_to_string(root().join("cli/tests/it/check.rs")).unwrap();
    for entry in std::fs::read_dir(root().join("tests/ticks/broken")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".py") && name != "base.py" {
            assert!(here.contains(&format!("\"{name}\"")), "{name} has no test");
        }
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
    let status = |id: &str| {
        j["rules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("state.update_seq"), Value::from("pass"));

    std::fs::write(&path, r#"{"increment": {"amount": "three"}}"#).unwrap();
    cli_check(&["--sample-args", p], &tick("counter.py"))
        .expect(2, "do not match its input schema");
    std::fs::write(&path, r#"{"nope": {}}"#).unwrap();
    cli_check(&["--sample-args", p], &tick("counter.py")).expect(2, "`nope` is not a tool");
}

#[test]
fn usage_errors_and_unstartable_ticks() {
    cli_check(&["--only", "no.such_rule"], &tick("counter.py")).expect(2, "unknown rule");
    tickbox(&["check", "/nonexistent/tick"]).expect(3, "not found");
    let out = tickbox(&["check", "--list-rules"]);
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout.lines().count(), rules::ALL.len());
}
