//! `policy suggest` ([`tickbox_app::policy`]) from audit files written by
//! real starts through [`App::open`]: the notes and fetch examples run
//! under broad grants with an audit stream, a policy is suggested from
//! the files, and the same commands rerun under only that policy give the
//! same results (and, the negative control, fail with one of its lines
//! taken out); a grant used only for reading is suggested read-only, an
//! address under a `HOST:*` grant as that one port; a hostile Tick's
//! strings reach the suggestion only inside comments; files that are not
//! audit files are one line naming the file and the rule.

use crate::{call, read, settings, Ran};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tickbox_app::policy::record_of;
use tickbox_app::{App, AuditWish, Request, Target};
use tickbox_protocol::text::is_unsafe;
use tickbox_sandbox::GrantSpec;
use tickbox_telemetry::audit::Origin;
use tickbox_test_support::{build_wasm, hostile, HelloServer, TempDir};

/// The environment variable the runs grant (given to the Tick, so
/// suggested: see `env` in `app/src/policy.rs`). A suggested `env` entry
/// is a name whose value comes from the process's environment when the
/// policy is used, so the test process has it, set once before any
/// Tick starts (the binary's tests set it for `tickbox`).
const VAR: &str = "TICKBOX_POLICY_TEST";

fn set_var() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var(VAR, "from-the-environment"));
}

fn example(name: &str) -> PathBuf {
    build_wasm("examples", name, "wasm32-wasip2")
}

/// What a start is granted: grants, recorded in an audit file, or a
/// policy file alone (as `--policy FILE` with no other grant flag).
#[derive(Clone)]
enum Under {
    Grants(Box<GrantSpec>, PathBuf),
    Policy(PathBuf),
}

/// The request to start `tick` under `under`, as `tickbox call` makes it.
fn request(app: &App, tick: &Path, under: &Under) -> Request {
    let mut r = Request::new(Target::File(tick.to_path_buf()));
    match under {
        Under::Grants(spec, audit) => {
            r.grants = (**spec).clone();
            let wish = AuditWish {
                to: Some(audit.display().to_string()),
                ..AuditWish::default()
            };
            r.audit = app.audit(Origin::Cli, &wish, &[]).unwrap();
        }
        Under::Policy(p) => r.policy = Some(p.clone()),
    }
    r
}

/// The notes example's script: writes, reads (one of a note that is not
/// there), a delete, and its state between them; each command one start.
async fn notes_script(app: &App, under: &Under) -> Vec<Ran> {
    let r = request(app, &example("notes"), under);
    vec![
        call(app, &r, "write", json!({"name": "todo", "text": "milk"})).await,
        call(app, &r, "write", json!({"name": "ideas", "text": "more"})).await,
        read(app, &r).await,
        call(app, &r, "read", json!({"name": "todo"})).await,
        call(app, &r, "read", json!({"name": "nope"})).await,
        call(app, &r, "delete", json!({"name": "ideas"})).await,
        read(app, &r).await,
    ]
}

/// The fetch example's script: a page from the granted loopback server,
/// and one from an origin no grant names (refused before anything is sent).
async fn fetch_script(app: &App, origin: &str, under: &Under) -> Vec<Ran> {
    let r = request(app, &example("fetch"), under);
    vec![
        call(app, &r, "get", json!({"url": format!("{origin}/hello")})).await,
        call(app, &r, "get", json!({"url": "http://127.0.0.1:9/nothing"})).await,
    ]
}

/// Whether a hostile-guest call's result says it failed (`"ok": false`).
fn refused(ran: &Ran) -> bool {
    ran.0 == 0 && serde_json::from_str::<Value>(&ran.1).is_ok_and(|v| v["ok"] == false)
}

/// The policy suggested from `files`, which must be read; as `tickbox
/// policy suggest` prints it. The App's audit writers are finished first,
/// so every line they were given is in the files.
fn suggest(app: &App, files: &[&Path]) -> String {
    app.finish_audit();
    let files: Vec<PathBuf> = files.iter().map(|f| f.to_path_buf()).collect();
    let record = record_of(&files).unwrap_or_else(|e| panic!("{e}"));
    record.suggest().render(&record).trim_end().to_string()
}

/// An App, a directory for one test's files, and the audit file its
/// runs append to there.
fn audited(tag: &str) -> (App, TempDir, PathBuf) {
    let work = TempDir::new(tag);
    let audit = work.path("a.jsonl");
    (App::new(settings(None)), work, audit)
}

/// A directory holding `hello.txt`, and the grant of it at `/data`
/// (read-write, as `--dir HOST::/data` grants it).
fn hello_at_data(tag: &str) -> (TempDir, GrantSpec) {
    let data = TempDir::new(tag);
    std::fs::write(data.path("hello.txt"), "hello").unwrap();
    let grants = GrantSpec {
        dir: vec![format!("{}::/data", data.0.display())],
        ..GrantSpec::default()
    };
    (data, grants)
}

/// Writes `policy` to `file`: what a rerun is granted.
fn policy_file(file: PathBuf, policy: &str) -> Under {
    std::fs::write(&file, policy).unwrap();
    Under::Policy(file)
}

fn empty(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
}

fn files_in(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let text = std::fs::read_to_string(e.path()).unwrap();
            (e.file_name().to_string_lossy().into_owned(), text)
        })
        .collect();
    v.sort();
    v
}

/// The notes and fetch examples under broad grants (a directory, another
/// one read-only, every port of loopback, two origins, a variable), each
/// appending to its own audit file; the policy suggested from both files
/// (merged) grants exactly the notes directory read-write, the one origin
/// fetched and the variable, and says what it left out and what was
/// refused. Rerun under only the policy every command gives the same
/// outcome and output, and leaves the same files. The negative control:
/// the policy without its `dir` line, or without its origin, makes the
/// rerun fail.
#[tokio::test]
async fn a_suggested_policy_reproduces_the_notes_and_fetch_examples() {
    set_var();
    let app = App::new(settings(None));
    let work = TempDir::new("policy-examples");
    let notes_dir = TempDir::new("policy-notes");
    let other = TempDir::new("policy-other");
    let server = HelloServer::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let notes_audit = work.path("notes.jsonl");
    let fetch_audit = work.path("fetch.jsonl");
    let broad = GrantSpec {
        dir: vec![
            format!("{}::/notes", notes_dir.0.display()),
            format!("{}::/other:ro", other.0.display()),
        ],
        allow_net: vec!["127.0.0.1:*".into()],
        allow_http: vec![origin.clone(), "http://127.0.0.1:1".into()],
        env: vec![VAR.into()],
        ..GrantSpec::default()
    };

    let notes_before = notes_script(
        &app,
        &Under::Grants(Box::new(broad.clone()), notes_audit.clone()),
    )
    .await;
    let fetch_before = fetch_script(
        &app,
        &origin,
        &Under::Grants(Box::new(broad), fetch_audit.clone()),
    )
    .await;
    let files_before = files_in(&notes_dir.0);
    // The scripts did what they say (so the comparison below means something).
    assert_eq!(notes_before[0].0, 0, "{notes_before:#?}");
    assert!(notes_before[3].1.contains("milk"), "{:#?}", notes_before[3]);
    assert_eq!(notes_before[4].0, 1, "no such note: a tool error");
    assert_eq!(files_before, [("todo.txt".into(), "milk".into())]);
    assert_eq!(fetch_before[0].0, 0, "{fetch_before:#?}");
    assert!(fetch_before[0].1.contains(HelloServer::BODY));
    assert_eq!(
        fetch_before[1].0, 1,
        "the ungranted origin: {fetch_before:#?}"
    );

    let policy = suggest(&app, &[&notes_audit, &fetch_audit]);
    // Each use is in the stream once per session, however often the Tick
    // did it (the notes Tick stats, lists and opens its directory many
    // times in each run).
    for audit in [&notes_audit, &fetch_audit] {
        let mut seen = std::collections::BTreeSet::new();
        for line in std::fs::read_to_string(audit).unwrap().lines() {
            let e: Value = serde_json::from_str(line).unwrap();
            if e["event"] == "used" {
                let mut key = e.clone();
                key["ts"] = Value::Null;
                assert!(seen.insert(key.to_string()), "twice: {line}");
            }
        }
        assert!(!seen.is_empty(), "uses recorded in {}", audit.display());
    }
    let table: toml::Table =
        toml::from_str(&policy).unwrap_or_else(|e| panic!("not TOML ({e}):\n{policy}"));
    let grant = format!("{}::/notes:rw", notes_dir.0.display());
    assert_eq!(
        table,
        toml::from_str(&format!(
            "dir = [{grant:?}]\nallow_http = [{origin:?}]\nenv = [{VAR:?}]"
        ))
        .unwrap(),
        "exactly what was used:\n{policy}"
    );
    // What was granted and left out, and what was refused, as comments.
    for said in [
        format!("#   dir \"{}::/other:ro\"", other.0.display()),
        "#   allow_net \"127.0.0.1:*\"".to_string(),
        "#   allow_http \"http://127.0.0.1:1\"".to_string(),
        "#   denied http_origin \"http://127.0.0.1:9/nothing\"".to_string(),
    ] {
        assert!(policy.contains(&said), "{said} in:\n{policy}");
    }
    let only_policy = policy_file(work.path("suggested.toml"), &policy);

    empty(&notes_dir.0);
    assert_eq!(notes_script(&app, &only_policy).await, notes_before);
    assert_eq!(files_in(&notes_dir.0), files_before);
    assert_eq!(
        fetch_script(&app, &origin, &only_policy).await,
        fetch_before
    );

    // Negative control: one line less, and the rerun no longer matches.
    let without = |line: &str, name: &str| {
        let kept: Vec<&str> = policy.lines().filter(|l| l.trim() != line).collect();
        assert_eq!(
            kept.len() + 1,
            policy.lines().count(),
            "{line} in:\n{policy}"
        );
        policy_file(work.path(name), &kept.join("\n"))
    };
    empty(&notes_dir.0);
    let no_dir = notes_script(&app, &without(&format!("{grant:?},"), "no-dir.toml")).await;
    assert_ne!(no_dir[0], notes_before[0], "{no_dir:#?}");
    assert_eq!(no_dir[0].0, 1, "the write fails: {no_dir:#?}");
    assert!(files_in(&notes_dir.0).is_empty());
    let no_http = without(&format!("{origin:?},"), "no-http.toml");
    let no_origin = fetch_script(&app, &origin, &no_http).await;
    assert_eq!(no_origin[0].0, 1, "{no_origin:#?}");
    assert!(
        no_origin[0].1.contains("HTTP-request-denied"),
        "{no_origin:#?}"
    );
}

/// A directory granted read-write but only read in the recorded runs is
/// suggested `:ro`; the reads rerun the same under it, and a write under
/// it is refused (it really is read-only). The positive control is the
/// first test's `:rw` for the notes example, which writes (and whose
/// `create_dir_all` asks to create its directory even when it only
/// reads, which a read-only grant refuses).
#[tokio::test]
async fn a_grant_only_read_is_suggested_read_only() {
    let (app, work, audit) = audited("policy-ro");
    let (data, grants) = hello_at_data("policy-ro-data");
    let wasm = PathBuf::from(hostile());
    let reads = |under: Under| {
        let r = request(&app, &wasm, &under);
        let app = &app;
        async move {
            vec![
                call(app, &r, "read_file", json!({"path": "/data/hello.txt"})).await,
                call(app, &r, "read_file", json!({"path": "/data/missing.txt"})).await,
            ]
        }
    };
    let before = reads(Under::Grants(Box::new(grants), audit.clone())).await;
    assert!(before[0].1.contains("hello"), "{before:#?}");
    assert!(refused(&before[1]), "{before:#?}");
    let policy = suggest(&app, &[&audit]);
    let table: toml::Table = toml::from_str(&policy).unwrap();
    let ro = format!("{}::/data:ro", data.0.display());
    assert_eq!(
        table["dir"].as_array().unwrap(),
        &[toml::Value::from(ro)],
        "{policy}"
    );
    let only = policy_file(work.path("p.toml"), &policy);
    assert_eq!(reads(only.clone()).await, before);
    let r = request(&app, &wasm, &only);
    let write = call(
        &app,
        &r,
        "write_file",
        json!({"path": "/data/new.txt", "text": "x"}),
    )
    .await;
    assert!(
        refused(&write),
        "a write through the suggested grant: {write:#?}"
    );
    assert!(!data.path("new.txt").exists());
}

/// A connect under `127.0.0.1:*` is suggested as that one address and
/// port: the connect reruns under the policy, and another port is refused
/// under it (the grant really is that narrow).
#[tokio::test]
async fn an_address_under_an_any_port_grant_is_suggested_as_its_port() {
    let (app, work, audit) = audited("policy-net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::Write;
        for _ in 0..2 {
            if let Ok((mut c, _)) = listener.accept() {
                let _ = c.write_all(b"hi");
            }
        }
    });
    let wasm = PathBuf::from(hostile());
    let addr = format!("127.0.0.1:{port}");
    let connect = |to: String, under: Under| {
        let r = request(&app, &wasm, &under);
        let app = &app;
        async move { call(app, &r, "connect", json!({ "addr": to })).await }
    };
    let broad = GrantSpec {
        allow_net: vec!["127.0.0.1:*".into()],
        ..GrantSpec::default()
    };
    let before = connect(addr.clone(), Under::Grants(Box::new(broad), audit.clone())).await;
    assert!(before.1.contains("hi"), "{before:#?}");
    let policy = suggest(&app, &[&audit]);
    let table: toml::Table = toml::from_str(&policy).unwrap();
    assert_eq!(
        table["allow_net"].as_array().unwrap(),
        &[toml::Value::from(addr.clone())],
        "{policy}"
    );
    let only = policy_file(work.path("p.toml"), &policy);
    assert_eq!(connect(addr, only.clone()).await, before);
    server.join().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = format!("127.0.0.1:{}", closed.local_addr().unwrap().port());
    let refusal = connect(other, only).await;
    assert!(refused(&refusal), "another port is refused: {refusal:#?}");
}

/// What a hostile Tick attempts (a path with line breaks, quotes, `]`, a
/// table header and a key, terminal sequences and bidi controls) reaches
/// the suggestion only inside comment lines, escaped: the file parses as
/// TOML with only the grant that was used, no line starts a table or a
/// key the suggestion did not write, and no raw control or bidi character
/// is in it. The positive control: the refusal is listed, its text whole.
#[tokio::test]
async fn a_hostile_ticks_strings_reach_the_suggestion_only_inside_comments() {
    let (app, _work, audit) = audited("policy-hostile");
    let (data, grants) = hello_at_data("policy-hostile-data");
    let r = request(
        &app,
        Path::new(&hostile()),
        &Under::Grants(Box::new(grants), audit.clone()),
    );
    let injected = "x\"]\n[evil]\nallow_net = [\"0.0.0.0:1\"]\r\ndir = [\"/::/\"] # \u{2028}\u{202e}\x1b]2;t\x07";
    let inside = call(&app, &r, "read_file", json!({"path": "/data/hello.txt"})).await;
    assert!(inside.1.contains("hello"), "{inside:#?}");
    let attempted = format!("/data/../{injected}");
    let out = call(&app, &r, "read_file", json!({ "path": attempted })).await;
    assert!(refused(&out), "{out:#?}");

    let policy = suggest(&app, &[&audit]);
    let raw = std::fs::read_to_string(&audit).unwrap();
    assert!(raw.contains("\"denied\""), "the attempt is refused: {raw}");
    assert!(
        !policy.chars().any(|c| is_unsafe(c) && c != '\n'),
        "{policy:?}"
    );
    let table: toml::Table =
        toml::from_str(&policy).unwrap_or_else(|e| panic!("not TOML ({e}):\n{policy}"));
    let used = format!("{}::/data:ro", data.0.display());
    assert_eq!(
        table,
        toml::from_str(&format!("dir = [{used:?}]")).unwrap(),
        "{policy}"
    );
    for line in policy.lines() {
        let t = line.trim();
        let ours = t.is_empty()
            || t.starts_with('#')
            || t == "dir = ["
            || t == "]"
            || t == format!("{used:?},");
        assert!(ours, "a line the suggestion did not write: {line:?}");
    }
    // Positive control: the refusal is there, escaped, with all its text.
    let escaped = tickbox_protocol::text::escape(&format!("../{injected}"));
    let refusal = policy
        .lines()
        .find(|l| l.starts_with("#   denied path"))
        .unwrap_or_else(|| panic!("no refusal listed:\n{policy}"));
    assert!(refusal.contains(&escaped), "{refusal}");
}

/// Input that is not an audit file: one line naming the file and the
/// rule (never the content), and nothing suggested. Each case beside the
/// positive control, a real audit file that is read; a bad file after a
/// good one still fails.
#[tokio::test]
async fn bad_audit_files_are_one_line_naming_the_file_and_the_rule() {
    let app = App::new(settings(None));
    let work = TempDir::new("policy-bad");
    let good = work.path("good.jsonl");
    // A start recorded (`tickbox describe --audit`): the Tick started,
    // described and shut down.
    let under = Under::Grants(Box::default(), good.clone());
    let r = request(&app, Path::new(&hostile()), &under);
    app.open(&r).await.expect("started").close().await;
    assert!(suggest(&app, &[&good]).starts_with("# A least-privilege policy"));

    let secret = "SECRET-LINE-CONTENT";
    let write = |name: &str, text: &str| {
        let p = work.path(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let not_json = write("not-json.jsonl", &format!("{secret}\n"));
    let version = write(
        "v2.jsonl",
        &format!("{{\"v\":2,\"event\":\"start\",\"session\":\"{secret}\"}}\n"),
    );
    let no_start = write(
        "no-start.jsonl",
        "{\"v\":1,\"event\":\"end\",\"session\":\"s\",\"reason\":\"exited\"}\n",
    );
    let big = work.path("big.jsonl");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(tickbox_telemetry::audit::MAX_AUDIT_READ_BYTES + 1)
        .unwrap();
    let link = work.path("link.jsonl");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let cases: [(&Path, &str); 5] = [
        (&not_json, "not-json.jsonl:1: not an audit line: not JSON"),
        (&version, "v2.jsonl:1: audit schema version 2"),
        (&no_start, "no session starts in them"),
        (&big, "MAX_AUDIT_READ_BYTES"),
        (&link, "is a symbolic link"),
    ];
    for (file, rule) in cases {
        // The file without a start alone: beside the good one there is a start.
        let mut files = Vec::new();
        if file != no_start.as_path() {
            files.push(good.clone());
        }
        files.push(file.to_path_buf());
        let Err(line) = record_of(&files) else {
            panic!("{} was read", file.display());
        };
        assert!(line.contains(rule), "{rule} in: {line}");
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(!line.contains(secret), "{line}");
    }
}
