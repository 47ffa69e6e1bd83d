//! The checker rule by rule, with no process: each fake Tick of [`super::fake`]
//! breaks exactly the rule its Python twin in `tests/ticks/broken/` breaks,
//! and the checker must fail exactly that rule, named with its section and
//! with evidence. The fakes run as tasks over the in-memory transport, on a
//! paused clock: every wait of the checker (quiet period, settle windows,
//! exit grace, request timeouts) passes as soon as nothing else can run, so
//! the suite keeps its production timings and costs no wall time, and the
//! order of events is the same on every run.
//!
//! Exit codes, the report formats and a Python Tick end to end are tested
//! through the CLI (`cli/tests/it/check.rs`), where the process is the point.

use super::fake::{self, FakeLaunch, Fault};
use super::{rules, Options, Report, Severity, Status};
use serde_json::json;
use std::collections::BTreeSet;
use tickbox_host::session::{Session, SessionConfig};

/// Latency is reported, never asserted: these advisories judge real time,
/// which a paused clock does not measure.
const TIMING: &[&str] = &["describe.prompt", "read.prompt"];

async fn run_check(fault: Fault, allow_mutations: bool) -> Report {
    let opts = Options {
        allow_mutations,
        ..Options::default()
    };
    super::run(&FakeLaunch(fault), fault.file(), &opts)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", fault.file()))
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
        // A why that quotes the rule names the section its row shows.
        for e in &v.evidence {
            if e.why.contains(&format!(", {id})")) {
                assert!(
                    e.why.contains(&format!("(§{}, {id})", rule.section)),
                    "{id}: its row says §{} but its why says {:?}",
                    rule.section,
                    e.why
                );
            }
        }
    }
}

fn assert_status(r: &Report, ids: &[&str], status: Status) {
    for id in ids {
        assert_eq!(
            r.verdict(id).unwrap().status,
            status,
            "{id}\n{}",
            r.to_text()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_base_passes() {
    let r = run_check(Fault::None, false).await;
    expect(&r, &[], &[]);
    // Without --allow-mutations `add` is never called, so nothing updates
    // and the update rules cannot apply.
    assert_status(&r, &["state.update_seq"], Status::NotApplicable);
    assert_status(
        &r,
        &[
            "describe.valid",
            "call.wrong_revision",
            "call.invalid_args",
            "framing.garbage_ignored",
            "lifecycle.stdin_eof",
            "lifecycle.sigterm",
        ],
        Status::Pass,
    );
}

#[tokio::test(start_paused = true)]
async fn the_base_passes_with_mutations() {
    let r = run_check(Fault::None, true).await;
    expect(&r, &[], &[]);
    assert_status(
        &r,
        &[
            "state.update_seq",
            "state.update_valid",
            "state.update_size",
            "state.read_floor",
        ],
        Status::Pass,
    );
}

/// One test per fault: `name: Fault::X, allow_mutations, [MUST ids], [advisory ids];`.
macro_rules! broken_tick {
    ($($test:ident: $fault:expr, $mutations:literal, [$($must:literal),*], [$($adv:literal),*];)*) => {
        $(
            #[tokio::test(start_paused = true)]
            async fn $test() {
                let r = run_check($fault, $mutations).await;
                expect(&r, &[$($must),*], &[$($adv),*]);
            }
        )*
    };
}

broken_tick! {
    replying_id_null_to_garbage: Fault::NullIdReply, false, ["framing.no_null_id", "framing.garbage_ignored"], [];
    replying_to_unparseable_lines: Fault::GarbageReply, false, ["framing.garbage_ignored", "framing.one_response"], [];
    executing_a_stale_revision: Fault::WrongRevision, false, ["call.wrong_revision"], [];
    not_checking_args: Fault::NoArgCheck, false, ["call.invalid_args"], [];
    update_seq_going_backwards: Fault::UpdateSeqBackwards, true, ["state.update_seq"], [];
    reading_below_the_last_update: Fault::ReadBelowUpdate, true, ["state.read_floor"], [];
    describe_with_side_effects: Fault::DescribeSideEffect, false, ["describe.no_side_effects"], [];
    ignoring_stdin_eof: Fault::IgnoresEof, false, [], ["lifecycle.stdin_eof"];
    ignoring_sigterm: Fault::IgnoresSigterm, false, [], ["lifecycle.sigterm"];
    interleaving_concurrent_answers: Fault::Interleaved, false,
        ["framing.no_interleave", "framing.protocol_only", "framing.one_response", "call.concurrent"],
        ["lifecycle.stdin_eof"];
    unterminated_final_message: Fault::Unterminated, false, ["framing.newline"], [];
    query_tool_that_mutates: Fault::MutatesDishonest, false, [], ["tools.mutates_honest"];
    banner_on_stdout: Fault::StrayStdout, false, ["framing.protocol_only"], [];
    wrong_code_for_unknown_method: Fault::UnknownMethod, false, ["call.unknown_method"], [];
    executed_code_for_unknown_tool: Fault::UnknownTool, false, ["call.unknown_tool"], [];
    mutating_recover_with: Fault::RecoverMutating, false, ["describe.valid", "describe.recover_with"], [];
    protocol_version_two: Fault::ProtocolTwo, false, ["describe.valid", "describe.protocol"], [];
    unconventional_kind: Fault::KindNaming, false, [], ["describe.kind_naming"];
    answering_twice: Fault::DuplicateResponse, false, ["framing.one_response"], [];
    null_update_data: Fault::NullUpdate, true, ["state.update_valid"], [];
    large_state: Fault::BigState, false, [], ["state.typical_size"];
    requests_to_the_host: Fault::SendsRequest, false, ["framing.no_requests"], [];
    // The driver stops reading at the over-long line, as a host would end
    // the session there, so initialization cannot finish either.
    line_over_8_mib: Fault::LongLine, false,
        ["framing.line_limit", "init.timely", "describe.valid", "framing.one_response"], [];
    refusing_after_acting: Fault::RefusesAfterActing, true, ["call.not_executed_no_effect"], [];
    update_on_resize: Fault::ResizeUpdate, false, ["state.no_presentation_updates"], [];
    both_result_and_error: Fault::BothResultError, false, ["framing.response_shape", "call.unknown_method"], [];
}

/// Every Python fixture in `tests/ticks/broken/` has a fake twin, and every
/// fake a test above.
#[test]
fn every_broken_tick_has_a_fake_and_a_test() {
    let here = include_str!("tests.rs");
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/ticks/broken");
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".py") {
            files.insert(name);
        }
    }
    let twins: BTreeSet<String> = Fault::ALL.iter().map(|f| f.file().to_string()).collect();
    assert_eq!(files, twins, "tests/ticks/broken and the fakes differ");
    for fault in Fault::ALL.iter().filter(|f| **f != Fault::None) {
        assert!(
            here.contains(&format!(": Fault::{fault:?},")),
            "{fault:?} has no test"
        );
    }
}

/// What the host says of a fake used as a host uses a Tick (initialize,
/// call `add`, read), as a rule id: its initialization refused, its session
/// ended by a violation, or a request failed naming a rule.
async fn host_verdict(fault: Fault) -> Option<&'static str> {
    let session = match Session::start(fake::start(fault), SessionConfig::default()).await {
        Ok(s) => s,
        Err(e) => return Some(e.rule.map_or("(no rule)", |r| r.id)),
    };
    let mut named = None;
    if let Some(catalog) = session.descriptor() {
        if let Ok(call) = catalog.prepare("add", json!({"amount": 1})) {
            let _ = session.call(&call).await;
        }
    }
    if let Err(e) = session.read().await {
        named = e.rule().map(|r| r.id);
    }
    if let Some(end) = session.end_reason() {
        named = end.rule().map(|r| r.id).or(named);
    }
    session.shutdown().await;
    named
}

/// One home per rule: for every fake the host refuses or ends a session
/// over, it names the same rule id the checker fails, because both call the
/// protocol crate's validators. (`cli/tests/it/check.rs` does the same for
/// every host-rule mode of `faulty.py`, through the `tickbox` binary.)
#[tokio::test(start_paused = true)]
async fn host_and_checker_name_the_same_rule_for_every_fake() {
    let mut caught = BTreeSet::new();
    for &fault in Fault::ALL {
        let Some(rule) = host_verdict(fault).await else {
            continue;
        };
        caught.insert(fault.file());
        let report = run_check(fault, true).await;
        let failing = failing(&report, Severity::Must);
        assert!(
            failing.contains(rule),
            "{}: the host names {rule}, the checker fails {failing:?}\n{}",
            fault.file(),
            report.to_text()
        );
    }
    // The faults a host meets in ordinary use; the others need the
    // checker's probes (garbage, stale revisions, concurrency, signals), or
    // are tolerated by a host (a request from the Tick is ignored, a second
    // response to an id is dropped).
    let expected: BTreeSet<&str> = [
        "long_line.py",
        "null_update.py",
        "protocol_two.py",
        "read_below_update.py",
        "recover_mutating.py",
        "stray_stdout.py",
        "update_seq_backwards.py",
    ]
    .into_iter()
    .collect();
    assert_eq!(caught, expected);
}
