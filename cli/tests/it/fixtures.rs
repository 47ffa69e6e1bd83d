//! What `tickbox test` itself adds to scenarios' fixtures: an unmatched
//! request's hostile URL printed escaped in its JSON report, and
//! `--retries` starting each attempt from the seeded scratch directory.
//! What `[[http]]` and `[files]` fixtures do is the runner's, tested in
//! `app/tests/it/fixtures.rs`.

use crate::util::*;
use std::time::Duration;

#[test]
fn an_unmatched_request_fails_its_step_with_one_escaped_line() {
    let t = TempDir::new("fixtures-miss");
    let file = t.path("miss.scenario.toml");
    // What a URL can carry past wasi:http's checks: bidi overrides, C1
    // controls and line separators, in the step's args and the miss.
    let hostile = "http://127.0.0.1:9/\u{202e}gpj.exe\u{85}?q=\u{2028}end";
    let text = format!(
        "[tick]\npath = {:?}\n\n[[http]]\nurl = \"http://127.0.0.1:9/known\"\n\n\
         [[step]]\ncall = \"get\"\nargs = {{ url = \"{hostile}\" }}\n",
        build_wasm("tests/guests", "httpget", "wasm32-wasip2")
    );
    std::fs::write(&file, text).unwrap();
    let file = file.to_string_lossy();
    let args = ["test", &file, "--format", "json"];
    let out = tickbox_within(&args, &[], Duration::from_secs(300));
    assert_eq!(out.code, 1, "{out:#?}");
    let found = out.json()["scenarios"][0]["failure"]["found"].to_string();
    assert!(found.contains("no [[http]] fixture answers"), "{found}");
    for c in ['\u{202e}', '\u{85}', '\u{2028}'] {
        assert!(!out.stdout.contains(c), "raw {c:?} in {out:#?}");
    }
}

/// A retry starts from what `[files]` seeds, not from what the failed
/// attempt wrote: the first step reads the seeded text, the second
/// overwrites it, the third always fails. A retry in the same directory
/// would fail at step 1; a fresh one fails at step 3 again. The positive
/// control is the first attempt itself (it passes steps 1 and 2).
#[test]
fn a_retry_starts_from_the_seeded_files_not_the_failed_attempts() {
    let t = TempDir::new("fixtures-retry-scratch");
    let file = t.path("retry.scenario.toml");
    let text = format!(
        "[tick]\npath = {:?}\nscratch = \"/notes\"\n\n[files]\n\"todo.txt\" = \"milk\"\n\n\
         [[step]]\ncall = \"read\"\nargs = {{ name = \"todo\" }}\nresult = {{ name = \"todo\", text = \"milk\" }}\n\n\
         [[step]]\ncall = \"write\"\nargs = {{ name = \"todo\", text = \"eggs\" }}\n\n\
         [[step]]\ncall = \"read\"\nargs = {{ name = \"todo\" }}\nresult = {{ name = \"todo\", text = \"never\" }}\n",
        build_wasm("examples", "notes", "wasm32-wasip2")
    );
    std::fs::write(&file, text).unwrap();
    let file = file.to_string_lossy();
    let args = ["test", &file, "--retries", "1", "--format", "json"];
    let out = tickbox_within(&args, &[], Duration::from_secs(300));
    assert_eq!(out.code, 1, "{out:#?}");
    let r = &out.json()["scenarios"][0];
    let earlier = r["failed_attempts"].as_array().expect("failed_attempts");
    assert_eq!(earlier.len(), 1, "one retry: {out:#?}");
    assert!(
        earlier[0]["lines"].to_string().contains("step 3"),
        "the first attempt passed steps 1 and 2: {out:#?}"
    );
    assert_eq!(
        r["passed_steps"], 2,
        "the retry read the seeded text: {out:#?}"
    );
    assert_eq!(r["failure"]["step"], 3, "{out:#?}");
}
