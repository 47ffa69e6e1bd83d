//! `tickbox policy suggest` through the real binary: the notes and fetch
//! examples run under broad grants with `--audit`, a policy is suggested
//! from the audit files, and the same commands rerun under only that
//! policy give the same results (and, the negative control, fail with one
//! of its lines taken out); a grant used only for reading is suggested
//! read-only, an address under a `HOST:*` grant as that one port; a
//! hostile Tick's strings reach the suggestion only inside comments; bad
//! audit files are one line and exit 2.

use crate::examples::Server;
use crate::util::*;
use serde_json::{json, Value};
use std::path::Path;
use tickbox_runtime::text::is_unsafe;

/// The environment variable the runs grant (given to the Tick, so
/// suggested: see `env` in `app/src/policy.rs`), set in both runs.
const VAR: &str = "TICKBOX_POLICY_TEST";

fn example(name: &str) -> String {
    build_wasm("examples", name, "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// What a command gave: its exit code and stdout (the command's result).
type Ran = (i32, String);

/// Runs `tickbox ARGS… GRANTS…` with `VAR` set.
fn run(args: &[&str], grants: &[String]) -> Ran {
    let mut argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    argv.extend(grants.iter().cloned());
    let out = tickbox_env(&argv, &[(VAR, "from-the-environment")]);
    (out.code, out.stdout)
}

/// The notes example's script: writes, reads (one of a note that is not
/// there), a delete, and its state between them.
fn notes_script(grants: &[String]) -> Vec<Ran> {
    let notes = example("notes");
    let n = notes.as_str();
    vec![
        run(
            &[
                "call",
                n,
                "write",
                r#"{"name":"todo","text":"milk"}"#,
                "--yes",
            ],
            grants,
        ),
        run(
            &[
                "call",
                n,
                "write",
                r#"{"name":"ideas","text":"more"}"#,
                "--yes",
            ],
            grants,
        ),
        run(&["read", n], grants),
        run(&["call", n, "read", r#"{"name":"todo"}"#], grants),
        run(&["call", n, "read", r#"{"name":"nope"}"#], grants),
        run(
            &["call", n, "delete", r#"{"name":"ideas"}"#, "--yes"],
            grants,
        ),
        run(&["read", n], grants),
    ]
}

/// The fetch example's script: a page from the granted loopback server,
/// and one from an origin no grant names (refused before anything is sent).
fn fetch_script(origin: &str, grants: &[String]) -> Vec<Ran> {
    let fetch = example("fetch");
    let page = json!({"url": format!("{origin}/hello")}).to_string();
    let refused = json!({"url": "http://127.0.0.1:9/nothing"}).to_string();
    vec![
        run(&["call", &fetch, "get", &page, "--yes"], grants),
        run(&["call", &fetch, "get", &refused, "--yes"], grants),
    ]
}

/// Whether a hostile-guest call's result says it failed (`"ok": false`).
fn refused(ran: &Ran) -> bool {
    ran.0 == 0 && serde_json::from_str::<Value>(&ran.1).is_ok_and(|v| v["ok"] == false)
}

/// `tickbox policy suggest FILES…`, which must succeed; its policy.
fn suggest(files: &[&Path]) -> String {
    let mut argv = vec!["policy".to_string(), "suggest".to_string()];
    argv.extend(files.iter().map(|f| f.display().to_string()));
    let out = tickbox(&argv);
    assert_eq!(out.code, 0, "{out:#?}");
    out.stdout
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
/// refused. Rerun under only `--policy` (no other grant flag) every
/// command gives the same exit code and the same output, and leaves the
/// same files. The negative control: the policy without its `dir` line,
/// or without its origin, makes the rerun fail.
#[test]
fn a_suggested_policy_reproduces_the_notes_and_fetch_examples() {
    let work = TempDir::new("policy-examples");
    let notes_dir = TempDir::new("policy-notes");
    let other = TempDir::new("policy-other");
    let server = Server::start();
    let origin = format!("http://127.0.0.1:{}", server.port);
    let notes_audit = work.path("notes.jsonl");
    let fetch_audit = work.path("fetch.jsonl");
    let broad = |audit: &Path| -> Vec<String> {
        [
            "--dir",
            &format!("{}::/notes", notes_dir.0.display()),
            "--dir",
            &format!("{}::/other:ro", other.0.display()),
            "--allow-net",
            "127.0.0.1:*",
            "--allow-http",
            &origin,
            "--allow-http",
            "http://127.0.0.1:1",
            "--env",
            VAR,
            "--audit",
            audit.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };

    let notes_before = notes_script(&broad(&notes_audit));
    let fetch_before = fetch_script(&origin, &broad(&fetch_audit));
    let files_before = files_in(&notes_dir.0);
    // The scripts did what they say (so the comparison below means something).
    assert_eq!(notes_before[0].0, 0, "{notes_before:#?}");
    assert!(notes_before[3].1.contains("milk"), "{:#?}", notes_before[3]);
    assert_eq!(notes_before[4].0, 1, "no such note: a tool error");
    assert_eq!(files_before, [("todo.txt".into(), "milk".into())]);
    assert_eq!(fetch_before[0].0, 0, "{fetch_before:#?}");
    assert!(fetch_before[0].1.contains("hello from the test server"));
    assert_eq!(
        fetch_before[1].0, 1,
        "the ungranted origin: {fetch_before:#?}"
    );

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
    let policy = suggest(&[&notes_audit, &fetch_audit]);
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
    let file = work.path("suggested.toml");
    std::fs::write(&file, &policy).unwrap();
    let only_policy = vec!["--policy".to_string(), file.display().to_string()];

    empty(&notes_dir.0);
    assert_eq!(notes_script(&only_policy), notes_before);
    assert_eq!(files_in(&notes_dir.0), files_before);
    assert_eq!(fetch_script(&origin, &only_policy), fetch_before);

    // Negative control: one line less, and the rerun no longer matches.
    let without = |line: &str, name: &str| {
        let kept: Vec<&str> = policy.lines().filter(|l| l.trim() != line).collect();
        assert_eq!(
            kept.len() + 1,
            policy.lines().count(),
            "{line} in:\n{policy}"
        );
        let f = work.path(name);
        std::fs::write(&f, kept.join("\n")).unwrap();
        vec!["--policy".to_string(), f.display().to_string()]
    };
    empty(&notes_dir.0);
    let no_dir = notes_script(&without(&format!("{grant:?},"), "no-dir.toml"));
    assert_ne!(no_dir[0], notes_before[0], "{no_dir:#?}");
    assert_eq!(no_dir[0].0, 1, "the write fails: {no_dir:#?}");
    assert!(files_in(&notes_dir.0).is_empty());
    let no_origin = fetch_script(&origin, &without(&format!("{origin:?},"), "no-http.toml"));
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
#[test]
fn a_grant_only_read_is_suggested_read_only() {
    let work = TempDir::new("policy-ro");
    let data = TempDir::new("policy-ro-data");
    std::fs::write(data.path("hello.txt"), "hello").unwrap();
    let audit = work.path("a.jsonl");
    let wasm = hostile();
    let grants = vec![
        "--dir".to_string(),
        format!("{}::/data", data.0.display()),
        "--audit".to_string(),
        audit.display().to_string(),
    ];
    let reads = |grants: &[String]| {
        vec![
            run(
                &["call", &wasm, "read_file", r#"{"path":"/data/hello.txt"}"#],
                grants,
            ),
            run(
                &[
                    "call",
                    &wasm,
                    "read_file",
                    r#"{"path":"/data/missing.txt"}"#,
                ],
                grants,
            ),
        ]
    };
    let before = reads(&grants);
    assert!(before[0].1.contains("hello"), "{before:#?}");
    assert!(refused(&before[1]), "{before:#?}");
    let policy = suggest(&[&audit]);
    let table: toml::Table = toml::from_str(&policy).unwrap();
    let ro = format!("{}::/data:ro", data.0.display());
    assert_eq!(
        table["dir"].as_array().unwrap(),
        &[toml::Value::from(ro)],
        "{policy}"
    );
    let file = work.path("p.toml");
    std::fs::write(&file, &policy).unwrap();
    let only = vec!["--policy".to_string(), file.display().to_string()];
    assert_eq!(reads(&only), before);
    let write = run(
        &[
            "call",
            &wasm,
            "write_file",
            r#"{"path":"/data/new.txt","text":"x"}"#,
            "--yes",
        ],
        &only,
    );
    assert!(
        refused(&write),
        "a write through the suggested grant: {write:#?}"
    );
    assert!(!data.path("new.txt").exists());
}

/// A connect under `127.0.0.1:*` is suggested as that one address and
/// port: the connect reruns under the policy, and another port is refused
/// under it (the grant really is that narrow).
#[test]
fn an_address_under_an_any_port_grant_is_suggested_as_its_port() {
    let work = TempDir::new("policy-net");
    let audit = work.path("a.jsonl");
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
    let wasm = hostile();
    let addr = format!("127.0.0.1:{port}");
    let connect = |to: &str, grants: &[String]| {
        run(
            &["call", &wasm, "connect", &json!({ "addr": to }).to_string()],
            grants,
        )
    };
    let broad = vec![
        "--allow-net".to_string(),
        "127.0.0.1:*".to_string(),
        "--audit".to_string(),
        audit.display().to_string(),
    ];
    let before = connect(&addr, &broad);
    assert!(before.1.contains("hi"), "{before:#?}");
    let policy = suggest(&[&audit]);
    let table: toml::Table = toml::from_str(&policy).unwrap();
    assert_eq!(
        table["allow_net"].as_array().unwrap(),
        &[toml::Value::from(addr.clone())],
        "{policy}"
    );
    let file = work.path("p.toml");
    std::fs::write(&file, &policy).unwrap();
    let only = vec!["--policy".to_string(), file.display().to_string()];
    assert_eq!(connect(&addr, &only), before);
    server.join().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = format!("127.0.0.1:{}", closed.local_addr().unwrap().port());
    let refusal = connect(&other, &only);
    assert!(refused(&refusal), "another port is refused: {refusal:#?}");
}

/// What a hostile Tick attempts (a path with line breaks, quotes, `]`, a
/// table header and a key, terminal sequences and bidi controls) reaches
/// the suggestion only inside comment lines, escaped: the file parses as
/// TOML with only the grant that was used, no line starts a table or a
/// key the suggestion did not write, and no raw control or bidi character
/// is in it. The positive control: the refusal is listed, its text whole.
#[test]
fn a_hostile_ticks_strings_reach_the_suggestion_only_inside_comments() {
    let work = TempDir::new("policy-hostile");
    let data = TempDir::new("policy-hostile-data");
    std::fs::write(data.path("hello.txt"), "hello").unwrap();
    let audit = work.path("a.jsonl");
    let wasm = hostile();
    let grants = vec![
        "--dir".to_string(),
        format!("{}::/data", data.0.display()),
        "--audit".to_string(),
        audit.display().to_string(),
    ];
    let injected = "x\"]\n[evil]\nallow_net = [\"0.0.0.0:1\"]\r\ndir = [\"/::/\"] # \u{2028}\u{202e}\x1b]2;t\x07";
    let read = |path: &str| {
        run(
            &[
                "call",
                &wasm,
                "read_file",
                &json!({ "path": path }).to_string(),
            ],
            &grants,
        )
    };
    let inside = read("/data/hello.txt");
    assert!(inside.1.contains("hello"), "{inside:#?}");
    let attempted = format!("/data/../{injected}");
    let out = read(&attempted);
    assert!(refused(&out), "{out:#?}");
    let raw = std::fs::read_to_string(&audit).unwrap();
    assert!(raw.contains("\"denied\""), "the attempt is refused: {raw}");

    let policy = suggest(&[&audit]);
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
    let escaped = tickbox_runtime::text::escape(&format!("../{injected}"));
    let refusal = policy
        .lines()
        .find(|l| l.starts_with("#   denied path"))
        .unwrap_or_else(|| panic!("no refusal listed:\n{policy}"));
    assert!(refusal.contains(&escaped), "{refusal}");
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

/// Input that is not an audit file: one line on stderr naming the file
/// and the rule (never the content), exit 2, nothing on stdout. Each case
/// beside the positive control, a real audit file that is read.
#[test]
fn bad_audit_files_are_one_line_and_exit_2() {
    let work = TempDir::new("policy-bad");
    let good = work.path("good.jsonl");
    let out = tickbox(&["describe", &hostile(), "--audit", good.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(suggest(&[&good]).starts_with("# A least-privilege policy"));

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
        .set_len(tickbox_runtime::audit::MAX_AUDIT_READ_BYTES + 1)
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
        // A bad file after a good one still fails the command (the file
        // without a start alone: beside the good one there is a start).
        let mut argv = vec!["policy", "suggest"];
        if file != no_start.as_path() {
            argv.push(good.to_str().unwrap());
        }
        argv.push(file.to_str().unwrap());
        let out = tickbox(&argv);
        out.expect(2, rule);
        assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
        assert!(!out.stderr.contains(secret), "{out:#?}");
        assert!(out.stdout.is_empty(), "{out:#?}");
    }
}
