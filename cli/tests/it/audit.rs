//! The audit stream (`--audit`, docs/AUDIT.md) through the wire: what a
//! wasm Tick with grants was granted, called, approved, refused and ran
//! into, each event once and with what was attempted; a hostile Tick's
//! names only escaped; `--audit -` on stderr and never on stdout; the live
//! host's own file rotated at its bound; the MCP config's `audit` key.

use crate::live::World;
use crate::mcp_wire::Raw;
use crate::util::*;
use serde_json::{json, Value};
use std::net::TcpListener;
use tickbox_runtime::text::is_unsafe;

fn hostile_wasm() -> String {
    hostile()
}

fn httpget() -> String {
    build_wasm("tests/guests", "httpget", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// The audit file's events, each line parsed (a line that is not one JSON
/// object fails the test).
fn events(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}")))
        .collect()
}

/// The events of kind `event` (and, for `denied`, of what `what`).
fn of<'a>(all: &'a [Value], event: &str, what: Option<&str>) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["event"] == event && what.is_none_or(|w| e["what"] == w))
        .collect()
}

/// The events of one session: the one whose `start` satisfies `pick`.
fn session_of(all: &[Value], pick: impl Fn(&Value) -> bool) -> Vec<&Value> {
    let start = all
        .iter()
        .find(|e| e["event"] == "start" && pick(e))
        .unwrap_or_else(|| panic!("no such start in {all:#?}"));
    let id = &start["session"];
    all.iter().filter(|e| &e["session"] == id).collect()
}

fn kinds(session: &[&Value]) -> Vec<String> {
    session
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn sha256_file(path: &str) -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).unwrap();
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// Runs, all appending to one audit file: a read-only call that reads past
/// its grant, a mutating call approved with `--yes` (arguments recorded),
/// one refused for want of it, a connect to an address not granted (beside
/// one to the granted address), an HTTP request to an origin not granted,
/// and a guest that grows past `--max-memory`. Each denial and the limit
/// is in the stream exactly once, with what was attempted; each session
/// has one start and one end.
#[test]
fn each_start_call_approval_denial_limit_and_end_is_recorded_once() {
    let dir = TempDir::new("audit-run");
    let data = TempDir::new("audit-data");
    std::fs::write(data.path("hello.txt"), "hello").unwrap();
    let file = dir.path("audit.jsonl");
    let audit = file.to_str().unwrap();
    let wasm = hostile_wasm();
    let grant = format!("{}::/data", data.0.display());
    let call = |tool: &str, args: Value, extra: &[&str]| {
        let args = args.to_string();
        let mut argv = vec!["call", wasm.as_str(), tool, args.as_str(), "--audit", audit];
        argv.extend_from_slice(extra);
        tickbox(&argv)
    };

    // A read inside the grant (the positive control) and one leading out.
    let inside = call(
        "read_file",
        json!({"path": "/data/hello.txt"}),
        &["--dir", &grant],
    );
    assert_eq!(inside.json()["value"], "hello", "{inside:#?}");
    let escape = "/data/../../../../etc/passwd";
    let out = call("read_file", json!({"path": escape}), &["--dir", &grant]);
    assert_eq!(out.json()["ok"], false, "{out:#?}");

    // A mutating call, approved on the command line, arguments recorded.
    let out = call(
        "write_file",
        json!({"path": "/data/new.txt", "text": "written"}),
        &["--dir", &grant, "--yes", "--audit-args"],
    );
    assert_eq!(out.json()["ok"], true, "{out:#?}");
    // And one refused: no --yes.
    call(
        "write_file",
        json!({"path": "/data/no.txt", "text": "x"}),
        &["--dir", &grant],
    )
    .expect(2, "approval required");

    // Sockets: the granted address works, another port is refused.
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = granted.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::Write;
        if let Ok((mut c, _)) = granted.accept() {
            let _ = c.write_all(b"hi");
        }
    });
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = closed.local_addr().unwrap().port();
    drop(closed);
    let net = format!("127.0.0.1:{port}");
    let out = call("connect", json!({"addr": net}), &["--allow-net", &net]);
    assert_eq!(out.json()["value"], "hi", "positive control: {out:#?}");
    server.join().unwrap();
    let refused_addr = format!("127.0.0.1:{other}");
    let out = call(
        "connect",
        json!({"addr": refused_addr}),
        &["--allow-net", &net],
    );
    assert_eq!(out.json()["ok"], false, "{out:#?}");

    // An HTTP origin not granted (refused before anything connects).
    let http = httpget();
    let url = "http://127.0.0.1:1/secret";
    let args = json!({"url": url}).to_string();
    let out = tickbox(&[
        "call",
        &http,
        "get",
        &args,
        "--yes",
        "--allow-http",
        "http://127.0.0.1:9",
        "--audit",
        audit,
    ]);
    assert_eq!(out.json()["error"], "HttpRequestDenied", "{out:#?}");

    // Memory: the guest grows past its bound and is stopped.
    let out = call("grow", json!({"mb": 64}), &["--max-memory", "16MiB"]);
    assert_eq!(out.code, 4, "the call's outcome is unknown: {out:#?}");

    let all = events(&file);
    let raw = std::fs::read_to_string(&file).unwrap();
    assert!(!raw.chars().any(|c| is_unsafe(c) && c != '\n'));
    assert!(
        all.iter().all(|e| e["v"] == 1 && e["ts"].is_string()),
        "{all:#?}"
    );
    // Every run is one session with one start and one end.
    assert_eq!(of(&all, "start", None).len(), 8, "{all:#?}");
    assert_eq!(of(&all, "end", None).len(), 8, "{all:#?}");

    // The escape: one denied path, naming it.
    let paths = of(&all, "denied", Some("path"));
    assert_eq!(paths.len(), 1, "{paths:#?}");
    assert!(
        paths[0]["attempted"]
            .as_str()
            .unwrap()
            .ends_with("../etc/passwd"),
        "{paths:#?}"
    );
    assert_eq!(paths[0]["detail"], "leads out of its granted directory");
    let s = session_of(&all, |e| {
        e["grants"]["dirs"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    });
    assert_eq!(s[0]["event"], "start");
    assert_eq!(s[0]["origin"], "cli");
    assert_eq!(s[0]["backend"], "wasm component");
    assert_eq!(s[0]["sha256"], sha256_file(&wasm), "the very bytes started");
    assert!(s[0]["tick"].as_str().unwrap().ends_with("hostile.wasm"));
    assert!(s[0]["grants"].to_string().contains("/data"), "{}", s[0]);

    // The calls: read-only with a hash of its arguments, the mutating
    // one with them whole (it asked for --audit-args).
    let calls = of(&all, "call", None);
    let reads: Vec<_> = calls.iter().filter(|c| c["tool"] == "read_file").collect();
    assert_eq!(reads.len(), 2);
    assert_eq!(reads[1]["mutates"], false);
    assert_eq!(
        reads[1]["outcome"], "ok",
        "the tool answered (with its error)"
    );
    assert_eq!(reads[1]["args"], Value::Null, "arguments only as a hash");
    assert_eq!(reads[1]["args_sha256"].as_str().unwrap().len(), 64);
    assert!(
        !raw.contains("etc/passwd\"}"),
        "the path is not in a call's arguments"
    );
    let writes: Vec<_> = calls.iter().filter(|c| c["tool"] == "write_file").collect();
    assert_eq!(
        writes.len(),
        1,
        "the refused call was never sent: {calls:#?}"
    );
    assert_eq!(writes[0]["mutates"], true);
    assert_eq!(writes[0]["args"]["text"], "written");
    assert!(writes[0]["duration_ms"].as_f64().unwrap() >= 0.0);

    // Approvals: `write_file` granted by --yes, then refused; httpget's
    // `get` (it mutates) granted by --yes.
    let all_approvals = of(&all, "approval", None);
    assert_eq!(all_approvals.len(), 3, "{all_approvals:#?}");
    let approvals: Vec<_> = all_approvals
        .iter()
        .filter(|a| a["subject"] == "write_file")
        .collect();
    assert_eq!(approvals.len(), 2, "{approvals:#?}");
    assert_eq!(approvals[0]["granted"], true);
    assert_eq!(approvals[0]["subject"], "write_file");
    assert!(approvals[0]["by"].as_str().unwrap().contains("--yes"));
    assert_eq!(approvals[1]["granted"], false);

    // Sockets: the refused address once, the granted one never.
    let sockets = of(&all, "denied", Some("socket"));
    assert_eq!(sockets.len(), 1, "{sockets:#?}");
    assert_eq!(sockets[0]["attempted"], refused_addr);
    assert!(!raw.contains(&format!("\"attempted\":\"{net}\"")));

    // The origin, once, with the URL asked for.
    let origins = of(&all, "denied", Some("http_origin"));
    assert_eq!(origins.len(), 1, "{origins:#?}");
    assert_eq!(origins[0]["attempted"], url);

    // The memory bound, once, with its value; the session's end says why.
    let limits = of(&all, "limit", None);
    assert_eq!(limits.len(), 1, "{limits:#?}");
    assert_eq!(limits[0]["bound"], "max_memory");
    assert_eq!(limits[0]["value"], 16 << 20);
    let grown = session_of(&all, |e| e["grants"]["max_memory"] == 16 << 20);
    assert!(kinds(&grown).contains(&"limit".to_string()), "{grown:#?}");
    let end = grown.iter().find(|e| e["event"] == "end").unwrap();
    assert_eq!(end["reason"], "exited");
    assert!(
        end["detail"]
            .as_str()
            .unwrap()
            .contains("memory limit exceeded"),
        "{end}"
    );
    let call = grown.iter().find(|e| e["event"] == "call").unwrap();
    assert_eq!(call["outcome"], "unknown");
}

/// `--audit -`: the stream is on stderr; stdout carries only the result.
#[test]
fn audit_to_dash_goes_to_stderr_and_never_stdout() {
    let wasm = hostile_wasm();
    let out = tickbox(&["call", &wasm, "echo", r#"{"a":1}"#, "--audit", "-"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json(), json!({"a": 1}), "stdout is the result alone");
    assert!(!out.stdout.contains("\"event\""), "{out:#?}");
    let lines: Vec<Value> = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["start", "call", "end"], "{out:#?}");
}

/// The corpus `tests/ticks/corpus.py` puts in every string a Tick
/// controls, in Rust.
fn corpus() -> String {
    "[\x1b]2;pwned-title\x07\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2K\u{9b}31m\x7f\r\nFORGED line\u{202e}\u{2066}\u{200b}\u{feff}\u{ad}\u{34f}\u{115f}\u{3164}\u{ffa0}\u{fe0f}\u{180e}\u{2028}\u{2029}\u{e0001}\u{e0041}\u{e007f}]".to_string()
}

/// A hostile Tick's text through every event it reaches (the start's
/// command line, a call's arguments and error message, an approval, a
/// denied path, a limit, the end): the file has no raw control, line
/// break or bidi character, and (the positive control) the text is all
/// there, escaped, the same JSON value.
#[test]
fn a_hostile_ticks_names_reach_the_audit_file_only_escaped() {
    let dir = TempDir::new("audit-hostile");
    let file = dir.path("audit.jsonl");
    let audit = file.to_str().unwrap();
    let c = corpus();
    // A native corpus Tick: its command line, arguments and error message.
    let args = json!({"x": c}).to_string();
    let script = tick("corpus.py");
    let out = tickbox(&[
        "call",
        "fail",
        &args,
        "--audit",
        audit,
        "--audit-args",
        "--",
        "python3",
        &script,
        &c,
    ]);
    assert_eq!(out.code, 1, "{out:#?}");
    // A wasm Tick: a path with the corpus leading out of its grant, a
    // mutating call approved, and its memory bound.
    let data = TempDir::new("audit-hostile-data");
    let grant = format!("{}::/data", data.0.display());
    let wasm = hostile_wasm();
    let path = format!("/data/../{c}");
    let args = json!({"path": path, "text": c}).to_string();
    let out = tickbox(&[
        "call",
        &wasm,
        "write_file",
        &args,
        "--yes",
        "--dir",
        &grant,
        "--audit",
        audit,
        "--audit-args",
        "--max-memory",
        "16MiB",
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    let out = tickbox(&[
        "call",
        &wasm,
        "grow",
        r#"{"mb": 64}"#,
        "--audit",
        audit,
        "--max-memory",
        "16MiB",
    ]);
    assert_eq!(out.code, 4, "{out:#?}");

    let raw = std::fs::read_to_string(&file).unwrap();
    if let Some((i, ch)) = raw
        .char_indices()
        .find(|(_, ch)| is_unsafe(*ch) && *ch != '\n')
    {
        panic!("a raw U+{:04X} at byte {i} of the audit file", ch as u32);
    }
    assert!(
        !raw.lines().any(|l| l.starts_with("FORGED")),
        "a forged line"
    );
    assert!(
        raw.contains("\\u202e") && raw.contains("\\u001b"),
        "escaped, not dropped"
    );
    let all = events(&file);
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    for k in ["start", "call", "approval", "denied", "limit", "end"] {
        assert!(kinds.contains(&k), "no {k} event: {kinds:?}");
    }
    // Decoded, the values are the corpus itself.
    let native = session_of(&all, |e| e["backend"] == "native");
    assert!(
        native[0]["tick"].as_str().unwrap().ends_with(&c),
        "{}",
        native[0]
    );
    let failed = native.iter().find(|e| e["event"] == "call").unwrap();
    assert_eq!(failed["message"], c.as_str());
    assert_eq!(failed["args"]["x"], c.as_str());
    let denied = of(&all, "denied", Some("path"));
    assert_eq!(denied.len(), 1, "{denied:#?}");
    assert_eq!(denied[0]["attempted"], format!("../{c}"));
    let call = all
        .iter()
        .find(|e| e["event"] == "call" && e["tool"] == "write_file")
        .unwrap();
    assert_eq!(call["args"]["text"], c.as_str());
}

/// A live host writes its own audit file in the state directory, rotated
/// at its bound (set low for the test), older files kept beside it.
#[test]
fn the_live_hosts_audit_file_rotates_at_its_bound() {
    let w = World::new("audit-live");
    let counter = tick("counter.py");
    let bound: u64 = 2048;
    let _host = w.pty_env(
        &["run", "--name", "au", "--", "python3", &counter],
        80,
        24,
        &[("TICKBOX_LIVE_AUDIT_MAX_SIZE", "2KiB")],
    );
    w.wait_for("au");
    let calls = 12;
    for _ in 0..calls {
        let out = w.tickbox(&["call", "@au", "history"]);
        assert_eq!(out.code, 0, "{out:#?}");
    }
    let audit_dir = w.dir.path("tickbox/audit");
    let files = || -> Vec<std::path::PathBuf> {
        let mut f: Vec<_> = std::fs::read_dir(&audit_dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        f.sort();
        f
    };
    // The host writes from its own thread: wait for every call to land.
    let count_calls = || -> usize {
        files()
            .iter()
            .flat_map(|p| events(p))
            .filter(|e| e["event"] == "call")
            .count()
    };
    assert!(
        eventually(std::time::Duration::from_secs(30), || count_calls()
            == calls),
        "{} calls recorded in {:?}",
        count_calls(),
        files()
    );
    let found = files();
    let current: Vec<_> = found
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(current.len(), 1, "one file per host: {found:?}");
    let rotated = current[0].with_extension("jsonl.1");
    assert!(rotated.exists(), "rotated at the bound: {found:?}");
    for f in &found {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(
            size <= bound,
            "{} is {size} bytes, over {bound}",
            f.display()
        );
    }
    let all: Vec<Value> = found.iter().flat_map(|p| events(p)).collect();
    let start = all
        .iter()
        .find(|e| e["event"] == "start")
        .expect("the start kept");
    assert_eq!(start["origin"], "live_host");
}

/// `tickbox mcp --config` with `audit` (relative to the config) and
/// `audit_args`: every hosted Tick's start, calls and end, from MCP.
#[test]
fn an_mcp_configs_audit_key_records_its_ticks() {
    let dir = TempDir::new("audit-mcp");
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!(
            "audit = \"audit.jsonl\"\naudit_args = true\n\n[[tick]]\nname = \"c\"\ncommand = [\"python3\", \"{}\"]\n",
            tick("counter.py")
        ),
    )
    .unwrap();
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    let r = mcp.call(2, "history", json!({}));
    assert_ne!(r["isError"], true, "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
    let all = events(&dir.path("audit.jsonl"));
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["start", "call", "end"], "{all:#?}");
    assert_eq!(all[0]["origin"], "mcp");
    assert_eq!(all[1]["tool"], "history");
    assert_eq!(all[1]["args"], json!({}), "audit_args = true");
    // Positive control of the key: without it, no file.
    std::fs::write(
        &config,
        format!(
            "[[tick]]\nname = \"c\"\ncommand = [\"python3\", \"{}\"]\n",
            tick("counter.py")
        ),
    )
    .unwrap();
    std::fs::remove_file(dir.path("audit.jsonl")).unwrap();
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    mcp.call(2, "history", json!({}));
    let (code, _) = mcp.close();
    assert_eq!(code, 0);
    assert!(!dir.path("audit.jsonl").exists());
}

/// A policy file's `audit` key (relative to the policy's directory), and a
/// destination that cannot be opened is one line and exit 2.
#[test]
fn a_policy_names_the_stream_and_a_bad_destination_is_one_line() {
    let dir = TempDir::new("audit-policy");
    let policy = dir.path("policy.toml");
    std::fs::write(&policy, "audit = \"p.jsonl\"\nmax_memory = \"64MiB\"\n").unwrap();
    let wasm = hostile_wasm();
    let p = policy.to_str().unwrap();
    let out = tickbox(&["call", &wasm, "echo", "{}", "--policy", p]);
    assert_eq!(out.code, 0, "{out:#?}");
    let all = events(&dir.path("p.jsonl"));
    assert_eq!(all[0]["event"], "start", "{all:#?}");
    assert_eq!(all[0]["grants"]["max_memory"], 64 << 20);
    // A link planted where the file goes is not followed.
    let link = dir.path("link.jsonl");
    std::os::unix::fs::symlink(dir.path("elsewhere"), &link).unwrap();
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        link.to_str().unwrap(),
    ]);
    out.expect(2, "--audit");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(!dir.path("elsewhere").exists());
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        "/nonexistent/dir/a.jsonl",
    ]);
    out.expect(2, "cannot open");
}
