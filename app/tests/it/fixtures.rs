//! Network and file fixtures of a scenario, run as `tickbox test` runs
//! it: loaded by `tickbox_conformance`'s runner, its scratch directory made
//! and seeded by [`scenarios::scratch`], its Tick started through
//! [`App::launcher`]. `[[http]]` entries answer a wasm component's
//! `wasi:http` requests with no network, and `[files]` seeds the scratch
//! directory.
//!
//! The `httpget` guest (tests/guests) reports the status, headers and body
//! it got; a loopback listener the test owns is the witness that no socket
//! is opened while fixtures are set (and, as its positive control, sees the
//! connection the same guest makes under a plain `allow_http` grant). An
//! unmatched request fails its step with one escaped line in every report
//! format; fixture files are read only beside the scenario, never through a
//! link; every bound is hit beside a run at the bound; the notes example
//! reads what `[files]` seeded. A retry starting from the seeded files is
//! `tickbox test --retries`'s, in `cli/tests/it/fixtures.rs`.

use crate::{prepared, settings};
use serde_json::json;
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;
use tickbox_app::{scenarios, App, Request, Target};
use tickbox_conformance::scenario::{
    self, report, Outcome, Policy, RunOptions, ScenarioResult, MAX_FIXTURE_BODY, MAX_HTTP_FIXTURES,
    MAX_SEED_FILES,
};
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::*;

fn httpget() -> String {
    build_wasm("tests/guests", "httpget", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

fn notes() -> String {
    build_wasm("examples", "notes", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// Loads `file` and runs it once as `tickbox test` does with no flags: a
/// file that does not load is invalid, its scratch directory is made and
/// seeded, its Tick started through the app's launcher.
pub async fn run(file: &Path) -> ScenarioResult {
    let mut s = match scenario::load(file, &Policy::default()) {
        Ok(s) => s,
        Err(e) => {
            let o = Outcome::Invalid(e.message);
            return ScenarioResult::not_run(&scenario::stem(file), file.into(), 0, o);
        }
    };
    let _scratch = match scenarios::scratch(&mut s) {
        Ok(dir) => dir,
        Err(o) => return ScenarioResult::not_run(&s.name, file.into(), s.steps.len(), o),
    };
    let app = App::new(settings(None));
    scenario::run(&s, &prepared(&app, &s), &RunOptions::default()).await
}

/// Asserts `r` passed, showing its report if not.
fn passed(r: &ScenarioResult) {
    assert_eq!(
        r.outcome,
        Outcome::Passed,
        "{}",
        report::to_text(std::slice::from_ref(r))
    );
}

/// The reason `r` is invalid; any other outcome fails the test.
fn invalid(r: &ScenarioResult) -> &str {
    match &r.outcome {
        Outcome::Invalid(why) => why,
        other => panic!("expected an invalid scenario: {other:?}"),
    }
}

/// The text report of `r` alone, as `tickbox test` prints it.
fn text(r: &ScenarioResult) -> String {
    report::to_text(std::slice::from_ref(r))
}

/// A loopback listener nobody answers: any connection to it waits in its
/// queue, where [`Witness::connections`] finds it.
struct Witness {
    listener: TcpListener,
    port: u16,
}

impl Witness {
    fn new() -> Witness {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        Witness { listener, port }
    }

    /// Connections made so far (a connection completes in the kernel's
    /// queue without an accept, and stays there after its client closes).
    fn connections(&self) -> usize {
        let mut n = 0;
        loop {
            match self.listener.accept() {
                Ok(_) => n += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return n,
                Err(e) => panic!("accept: {e}"),
            }
        }
    }
}

/// Writes a scenario for the httpget guest: `fixtures` (`[[http]]` tables
/// and anything else at the top level), then `steps`.
fn scenario(file: &Path, fixtures: &str, steps: &str) {
    std::fs::write(
        file,
        format!("[tick]\npath = {:?}\n\n{fixtures}\n{steps}", httpget()),
    )
    .unwrap();
}

/// A TOML basic string: anything but printable ASCII as `\uXXXX`.
fn toml_str(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// A `get` step expecting a subset of the result.
fn get(url: &str, expect: &str) -> String {
    format!(
        "[[step]]\ncall = \"get\"\nargs = {{ url = {} }}\nresult_subset = {expect}\n\n",
        toml_str(url)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_answer_status_headers_and_bodies_and_no_socket_is_opened() {
    let witness = Witness::new();
    let origin = format!("http://127.0.0.1:{}", witness.port);
    let t = TempDir::new("fixtures-answer");
    std::fs::create_dir_all(t.path("bodies")).unwrap();
    std::fs::write(t.path("bodies/page.bin"), b"from a file \xff").unwrap();
    let file = t.path("answer.scenario.toml");
    let fixtures = format!(
        r#"
[[http]]
url = "{origin}/inline"
status = 201
headers = {{ x-fixture = "inline", content-type = "text/plain" }}
body = "canned inline"

[[http]]
url = "{origin}/file?v=1"
body_file = "bodies/page.bin"

[[http]]
method = "POST"
url_prefix = "{origin}/api/"
status = 202
body = "posted"

[[http]]
url = "https://fixture.invalid/tls"
body = "no TLS, no name lookup"
"#
    );
    let mut steps = get(
        &format!("{origin}/inline"),
        r#"{ status = 201, headers = { x-fixture = "inline", content-type = "text/plain" }, body = "canned inline", body_len = 13 }"#,
    );
    steps += &get(
        &format!("{origin}/file?v=1"),
        "{ status = 200, body = \"from a file \\uFFFD\", body_len = 13 }",
    );
    // A POST with a body, answered by the prefix entry.
    steps += &format!(
        "[[step]]\ncall = \"get\"\nargs = {{ url = \"{origin}/api/items?x=1\", body_bytes = 100 }}\nresult_subset = {{ status = 202, body = \"posted\" }}\n\n"
    );
    steps += &get(
        "https://fixture.invalid/tls",
        "{ status = 200, body = \"no TLS, no name lookup\" }",
    );
    scenario(&file, &fixtures, &steps);
    let r = run(&file).await;
    passed(&r);
    assert_eq!(r.passed_steps, 4);
    assert_eq!(
        witness.connections(),
        0,
        "a fixture's origin is a loopback listener: nothing may connect to it"
    );

    // Positive control for the witness: the same guest under a real grant
    // and no fixtures does connect (and gives up waiting for an answer).
    let mut request = Request::new(Target::File(httpget().into()));
    request.grants = GrantSpec {
        allow_http: vec![origin.clone()],
        ..Default::default()
    };
    let app = App::new(settings(None));
    let args = json!({"url": format!("{origin}/inline"), "first_byte_timeout_ms": 300});
    let (code, out) = crate::call(&app, &request, "get", args).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        eventually(Duration::from_secs(30), || witness.connections() > 0),
        "the witness saw no connection from a granted request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmatched_request_fails_its_step_with_one_escaped_line() {
    let t = TempDir::new("fixtures-miss");
    let file = t.path("miss.scenario.toml");
    let fixtures = "[[http]]\nurl = \"http://127.0.0.1:9/known\"\nbody = \"known\"\n";
    // The guest gets HTTP-request-denied and says so: the expectation holds,
    // and still the step fails, because a request went unanswered.
    // What a URL can carry past wasi:http's checks: bidi overrides, C1
    // controls and line separators (C0 controls are refused earlier).
    let hostile = "http://127.0.0.1:9/\u{202e}gpj.exe\u{85}?q=\u{2028}end";
    let mut steps = get(
        "http://127.0.0.1:9/known",
        "{ status = 200, body = \"known\" }",
    );
    steps += &get(hostile, "{ error = \"HttpRequestDenied\" }");
    scenario(&file, fixtures, &steps);
    let escaped = "GET http://127.0.0.1:9/\\u{202e}gpj.exe\\x85?q=\\u{2028}end";
    let line = "no [[http]] fixture answers the Tick's request";

    let r = run(&file).await;
    assert!(matches!(r.outcome, Outcome::Failed(_)), "{r:?}");
    assert_eq!(r.passed_steps, 1, "the matched request passed: {r:?}");
    let results = [r];
    let text = report::to_text(&results);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(line)).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains(escaped), "{}", lines[0]);
    assert!(
        lines[0].contains("the Tick got HTTP-request-denied"),
        "{}",
        lines[0]
    );
    assert!(text.contains("step 2: call"), "{text}");

    let json = report::to_json(&results)["scenarios"][0].to_string();
    assert!(json.contains(line), "{json}");
    assert!(json.contains(&escaped.replace('\\', "\\\\")), "{json}");
    let junit = report::to_junit(&results);
    assert!(junit.contains(escaped), "{junit}");

    // The JSON report holds the step's own args as they were; the binary
    // escapes them when it prints (`cli/tests/it/fixtures.rs`).
    for (format, out) in [("text", text), ("junit", junit)] {
        for c in ['\u{202e}', '\u{85}', '\u{2028}'] {
            assert!(!out.contains(c), "{format}: raw {c:?} in {out}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_files_are_read_only_beside_the_scenario_and_never_through_a_link() {
    let t = TempDir::new("fixtures-walls");
    let here = t.path("here");
    let outside = t.path("outside");
    std::fs::create_dir_all(here.join("ok")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "TOP-SECRET-CONTENT").unwrap();
    std::fs::write(here.join("ok/body.txt"), "a body beside the scenario").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), here.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, here.join("linkdir")).unwrap();
    let secret = outside.join("secret.txt");
    let cases = [
        ("link.txt", "is a symbolic link"),
        ("linkdir/secret.txt", "is a symbolic link"),
        (
            "../outside/secret.txt",
            "`..`, `.` and empty parts are refused",
        ),
        (secret.to_str().unwrap(), "an absolute path is refused"),
        ("ok/missing.txt", "does not exist"),
    ];
    for (body_file, why) in cases {
        let file = here.join("wall.scenario.toml");
        let fixtures = format!("[[http]]\nurl = \"http://h/x\"\nbody_file = {body_file:?}\n");
        scenario(&file, &fixtures, &get("http://h/x", "{ status = 200 }"));
        let r = run(&file).await;
        invalid(&r);
        let text = text(&r);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("body_file")).collect();
        assert_eq!(lines.len(), 1, "{body_file}: one line: {text}");
        assert!(lines[0].contains(why), "{body_file}: {}", lines[0]);
        assert!(
            lines[0].contains(&format!("{body_file:?}")),
            "names the file: {}",
            lines[0]
        );
        assert!(!text.contains("TOP-SECRET"), "{text}");
    }
    // The same through [files]: a link as a source is refused too.
    let file = here.join("seed.scenario.toml");
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\nscratch = \"/notes\"\n\n[files]\n\"a.txt\" = {{ file = \"link.txt\" }}\n",
            notes()
        ),
    )
    .unwrap();
    let r = run(&file).await;
    assert!(invalid(&r).contains("is a symbolic link"), "{r:?}");
    assert!(!text(&r).contains("TOP-SECRET"), "{r:?}");

    // Positive control: a regular file in a subdirectory beside the scenario.
    let file = here.join("ok.scenario.toml");
    let fixtures = "[[http]]\nurl = \"http://h/x\"\nbody_file = \"ok/body.txt\"\n";
    scenario(
        &file,
        fixtures,
        &get("http://h/x", "{ body = \"a body beside the scenario\" }"),
    );
    passed(&run(&file).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_over_their_bounds_are_refused_and_at_them_run() {
    let t = TempDir::new("fixtures-bounds");
    let entries = |n: usize| {
        (0..n)
            .map(|i| format!("[[http]]\nurl = \"http://h/{i}\"\nbody = \"{i}\"\n"))
            .collect::<String>()
    };
    let last = MAX_HTTP_FIXTURES - 1;
    let steps = get(
        &format!("http://h/{last}"),
        &format!("{{ body = \"{last}\" }}"),
    );
    let file = t.path("count.scenario.toml");
    scenario(&file, &entries(MAX_HTTP_FIXTURES), &steps);
    passed(&run(&file).await);
    scenario(&file, &entries(MAX_HTTP_FIXTURES + 1), &steps);
    let r = run(&file).await;
    let why = invalid(&r);
    assert!(
        why.contains("257 [[http]] entries, over the 256-entry limit"),
        "{why}"
    );

    // A body file at the bound reaches the guest whole; one byte more is
    // refused naming the file and the bound.
    let bound = MAX_FIXTURE_BODY as usize;
    std::fs::write(t.path("big.bin"), vec![b'b'; bound]).unwrap();
    let file = t.path("body.scenario.toml");
    let big = "[[http]]\nurl = \"http://h/big\"\nbody_file = \"big.bin\"\n";
    scenario(
        &file,
        big,
        &get("http://h/big", &format!("{{ body_len = {bound} }}")),
    );
    passed(&run(&file).await);
    std::fs::write(t.path("big.bin"), vec![b'b'; bound + 1]).unwrap();
    let r = run(&file).await;
    let why = invalid(&r);
    assert!(
        why.contains("body_file \"big.bin\" is 1048577 bytes, over the 1048576-byte limit"),
        "{why}"
    );

    // Too many headers, and [files] past its count.
    let headers: Vec<String> = (0..65).map(|i| format!("h{i} = \"v\"")).collect();
    let file = t.path("headers.scenario.toml");
    let fixtures = format!(
        "[[http]]\nurl = \"http://h/x\"\nheaders = {{ {} }}\n",
        headers.join(", ")
    );
    scenario(&file, &fixtures, "");
    invalid(&run(&file).await);
    let files = |n: usize| {
        (0..n)
            .map(|i| format!("\"f{i}.txt\" = \"{i}\"\n"))
            .collect::<String>()
    };
    let file = t.path("files.scenario.toml");
    let notes_at = |n: usize| {
        format!(
            "[tick]\npath = {:?}\nscratch = \"/notes\"\n\n[files]\n{}\n[[step]]\ncall = \"read\"\nargs = {{ name = \"f255\" }}\nresult = {{ name = \"f255\", text = \"255\" }}\n",
            notes(),
            files(n)
        )
    };
    std::fs::write(&file, notes_at(MAX_SEED_FILES)).unwrap();
    passed(&run(&file).await);
    std::fs::write(&file, notes_at(MAX_SEED_FILES + 1)).unwrap();
    let r = run(&file).await;
    let why = invalid(&r);
    assert!(why.contains("257 files, over the 256-file limit"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_seed_the_scratch_directory_the_tick_reads() {
    let t = TempDir::new("fixtures-files");
    std::fs::create_dir_all(t.path("seeds")).unwrap();
    std::fs::write(t.path("seeds/ideas.txt"), "a scenario for every example").unwrap();
    let file = t.path("notes.scenario.toml");
    let tick = format!("[tick]\npath = {:?}\nscratch = \"/notes\"\n", notes());
    let body = |files: &str| {
        format!(
            "{tick}\n[files]\n{files}\n\
             [[step]]\ncall = \"read\"\nargs = {{ name = \"todo\" }}\nresult = {{ name = \"todo\", text = \"milk\" }}\n\n\
             [[step]]\ncall = \"read\"\nargs = {{ name = \"ideas\" }}\nresult = {{ name = \"ideas\", text = \"a scenario for every example\" }}\n"
        )
    };
    let good = "\"todo.txt\" = \"milk\"\n\"ideas.txt\" = { file = \"seeds/ideas.txt\" }\n\"archive/old.txt\" = \"kept in a subdirectory\"\n";
    std::fs::write(&file, body(good)).unwrap();
    let r = run(&file).await;
    passed(&r);
    assert_eq!(r.passed_steps, 2);

    // Without the seed the same steps fail: the files are what the Tick read.
    std::fs::write(&file, body("")).unwrap();
    let r = run(&file).await;
    assert!(matches!(r.outcome, Outcome::Failed(_)), "{r:?}");
    assert!(text(&r).contains("no note named"), "{r:?}");

    for (files, why) in [
        (
            "\"../escape.txt\" = \"x\"\n",
            "`..`, `.` and empty parts are refused",
        ),
        ("\"/etc/x.txt\" = \"x\"\n", "an absolute path is refused"),
        (
            "\"a/./b.txt\" = \"x\"\n",
            "`..`, `.` and empty parts are refused",
        ),
        ("\"a.txt\" = 3\n", "give text or { file = \"PATH\" }"),
        ("\"a\" = \"x\"\n\"a/b\" = \"y\"\n", "cannot be under it"),
    ] {
        std::fs::write(&file, body(&format!("{good}{files}"))).unwrap();
        let r = run(&file).await;
        assert!(invalid(&r).contains(why), "{files}: {r:?}");
    }
    // [files] needs the scratch directory it seeds.
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\n\n[files]\n\"todo.txt\" = \"milk\"\n",
            notes()
        ),
    )
    .unwrap();
    let r = run(&file).await;
    let why = invalid(&r);
    assert!(
        why.contains("[files] seeds the scratch directory: give [tick] scratch"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixtures_replace_the_network_and_only_for_wasm_components() {
    let t = TempDir::new("fixtures-kinds");
    let file = t.path("grant.scenario.toml");
    // An origin grant beside fixtures would be a way around them.
    std::fs::write(
        &file,
        format!(
            "[tick]\npath = {:?}\nallow_http = [\"http://127.0.0.1:9\"]\n\n[[http]]\nurl = \"http://h/x\"\n",
            httpget()
        ),
    )
    .unwrap();
    let r = run(&file).await;
    let why = invalid(&r);
    assert!(
        why.contains("[tick] allow_http and http_ca cannot be given with them"),
        "{why}"
    );
    // A native Tick has no wasi:http to answer.
    std::fs::write(
        &file,
        format!(
            "[tick]\ncommand = [\"python3\", {:?}]\n\n[[http]]\nurl = \"http://h/x\"\n",
            tick("counter.py")
        ),
    )
    .unwrap();
    let r = run(&file).await;
    let why = invalid(&r);
    assert!(
        why.contains("only a wasm component (wasm32-wasip2) makes"),
        "{why}"
    );
    // Positive control: the native Tick without fixtures runs.
    std::fs::write(
        &file,
        format!(
            "[tick]\ncommand = [\"python3\", {:?}]\n",
            tick("counter.py")
        ),
    )
    .unwrap();
    passed(&run(&file).await);
}
