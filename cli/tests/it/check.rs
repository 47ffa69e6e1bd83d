//! `tickbox check` as a command: its exit codes (0 when every MUST rule
//! holds, an advisory failure alone included; 1 with one line counting the
//! broken MUST rules; 2 for usage errors and sample args that do not fit;
//! 3 for a Tick that cannot start), the report on stdout in the format
//! asked, and `--list-rules`. The checker itself (the three reports, a
//! selection of rules, sample args, real signals, the host and the checker
//! naming the same rule) is tested through tickbox-conformance's API in its
//! `tests/it/check.rs`, and rule by rule without processes in
//! `conformance/src/check/tests.rs`.

use crate::util::*;
use tickbox_runtime::check::rules;

fn broken(name: &str) -> String {
    tick(&format!("broken/{name}"))
}

fn cli_check(extra: &[&str], script: &str) -> Output {
    let mut args = vec!["check".to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--".into(), "python3".into(), script.to_string()]);
    tickbox(&args)
}

#[test]
fn the_exit_code_follows_must_rules_and_the_report_is_in_the_format_asked() {
    // Sample args that fit the Tick's catalog, and two that do not.
    let dir = TempDir::new("samples");
    let sample = |name: &str, text: &str| {
        std::fs::write(dir.path(name), text).unwrap();
        dir.path(name).to_string_lossy().into_owned()
    };
    let (fits, wrong, list) = (
        sample("fits.json", r#"{"increment": {"amount": 3}}"#),
        sample("wrong.json", r#"{"increment": {"amount": "three"}}"#),
        sample("list.json", "[]"),
    );
    let (counter, null_id, ignores_eof) = (
        tick("counter.py"),
        broken("null_id_reply.py"),
        broken("ignores_eof.py"),
    );
    // The checks run at once: each mostly waits on its own Tick.
    let [ok, bad, advisory, fits, wrong, list] = std::thread::scope(|s| {
        [
            (vec!["--format", "json"], &counter),
            (vec!["--format", "junit"], &null_id),
            // `--only` with commas.
            (vec!["--only", "lifecycle,describe.valid"], &ignores_eof),
            (vec!["--allow-mutations", "--sample-args", &fits], &counter),
            (vec!["--sample-args", &wrong], &counter),
            (vec!["--sample-args", &list], &counter),
        ]
        .map(|(extra, script)| s.spawn(move || cli_check(&extra, script)))
        .map(|check| check.join().expect("the check ran"))
    });
    assert_eq!(ok.code, 0, "{ok:#?}");
    assert_eq!(ok.json()["passed"], true);
    assert_eq!(bad.code, 1, "{bad:#?}");
    assert!(bad.stdout.starts_with("<?xml"), "{bad:#?}");
    assert!(bad.stderr.contains("MUST rules broken"), "{bad:#?}");
    // An advisory failure alone exits 0.
    let out = advisory;
    assert_eq!(out.code, 0, "an advisory failure alone passes: {out:#?}");
    assert!(
        out.stdout.contains("lifecycle.stdin_eof"),
        "the text report: {out:#?}"
    );
    assert!(!out.stdout.contains("call.unknown_tool"), "{out:#?}");
    // Sample args that do not fit the Tick's catalog: a usage error.
    assert_eq!(fits.code, 0, "{fits:#?}");
    wrong.expect(2, "do not match its input schema");
    list.expect(2, "must be a JSON object");
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
