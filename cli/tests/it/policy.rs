//! `tickbox policy suggest` through the binary: what needs `tickbox`
//! itself. Suggesting from audit files written by real starts (the notes
//! and fetch examples rerun under the suggestion, read-only grants, one
//! port under `HOST:*`, a hostile Tick's strings only in comments, each
//! rule for a file that is not an audit file) is tickbox-app's and tested
//! through its API in `app/tests/it/policy.rs`; here, a scenario run's
//! audit (`tickbox test --audit`, the CLI's runner) and a bad audit file
//! as one line on stderr and exit 2.

use crate::util::*;
use std::path::Path;

/// `tickbox policy suggest FILES…`, which must succeed; its policy.
fn suggest(files: &[&Path]) -> String {
    let mut argv = vec!["policy".to_string(), "suggest".to_string()];
    argv.extend(files.iter().map(|f| f.display().to_string()));
    let out = tickbox(&argv);
    assert_eq!(out.code, 0, "{out:#?}");
    out.stdout
}

/// A scenario run (`tickbox test --audit`), here the fetch and notes
/// examples' own: the origins the fetch scenario's HTTP fixtures answered
/// are suggested (no grant was in force, nothing was reached; the comment
/// says they were fixtures'), the request no fixture answered is a
/// refusal, and the notes scenario's scratch directory is said to be
/// temporary.
#[test]
fn a_scenario_runs_audit_suggests_the_origins_its_fixtures_answered() {
    let work = TempDir::new("policy-scenario");
    let audit = work.path("a.jsonl");
    let wasm_dir = crate::scenario::wasm_dir();
    let scenarios = root().join("examples");
    let out = tickbox_env(
        &[
            "test",
            "--allow-env=TICKBOX_WASM_DIR",
            "--audit",
            audit.to_str().unwrap(),
            scenarios.join("fetch/scenarios").to_str().unwrap(),
            scenarios
                .join("notes/scenarios/notes.scenario.toml")
                .to_str()
                .unwrap(),
        ],
        &[("TICKBOX_WASM_DIR", wasm_dir.as_str())],
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let policy = suggest(&[&audit]);
    let table: toml::Table = toml::from_str(&policy).unwrap();
    let http: Vec<&str> = table["allow_http"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    assert_eq!(
        http,
        ["http://127.0.0.1:9", "https://api.example.com:443"],
        "{policy}"
    );
    assert!(
        policy.contains("# Answered by a scenario's HTTP fixtures"),
        "{policy}"
    );
    assert!(policy.contains("scratch directory"), "{policy}");
    assert!(
        table["dir"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().is_some_and(|d| d.ends_with("::/notes:rw"))),
        "{policy}"
    );
    // The no-grant scenario's request: refused, and listed as such (it
    // runs without fixtures, so its origin is not suggested).
    assert!(
        policy.contains("#   denied http_origin \"http://127.0.0.1:9/"),
        "{policy}"
    );
}

/// A file that is not an audit file: one line on stderr naming the file
/// and the rule (never the content), exit 2, nothing on stdout, even
/// after a good file. The positive control: the good file alone is read.
/// Each rule is tested in `app/tests/it/policy.rs`.
#[test]
fn a_bad_audit_file_is_one_line_on_stderr_and_exit_2() {
    let work = TempDir::new("policy-bad");
    let good = work.path("good.jsonl");
    let out = tickbox(&["describe", &hostile(), "--audit", good.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(suggest(&[&good]).starts_with("# A least-privilege policy"));
    let secret = "SECRET-LINE-CONTENT";
    let bad = work.path("not-json.jsonl");
    std::fs::write(&bad, format!("{secret}\n")).unwrap();
    let out = tickbox(&[
        "policy",
        "suggest",
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
    ]);
    out.expect(2, "not-json.jsonl:1: not an audit line: not JSON");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(!out.stderr.contains(secret), "{out:#?}");
    assert!(out.stdout.is_empty(), "{out:#?}");
}
