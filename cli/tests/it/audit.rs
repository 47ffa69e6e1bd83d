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

/// An MCP config hosting two hostile wasm Ticks into one audit file:
/// `flood` (one `--dir` grant, no network grant) and `calm`.
fn two_ticks(dir: &TempDir, data: &TempDir, extra: &str) -> std::path::PathBuf {
    let wasm = hostile_wasm();
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!(
            "audit = \"audit.jsonl\"\n{extra}\n[[tick]]\nname = \"flood\"\npath = \"{wasm}\"\ndir = [\"{}::/data\"]\n\n[[tick]]\nname = \"calm\"\npath = \"{wasm}\"\n",
            data.0.display()
        ),
    )
    .unwrap();
    config
}

/// The sum of the `count`s of a session's events of this kind (a line
/// without one stands for one).
fn counted(session: &[&Value], event: &str, what: &str) -> (usize, u64) {
    let lines: Vec<&&Value> = session
        .iter()
        .filter(|e| e["event"] == event && e["what"] == what)
        .collect();
    let n = lines.iter().map(|e| e["count"].as_u64().unwrap_or(1)).sum();
    (lines.len(), n)
}

/// The red team's flood: a sandboxed Tick with one `--dir` grant looping
/// over refused opens (and, with no network grant at all, over refused
/// connects) wrote one `denied` line per try (109 MiB in 11 s). Now each
/// kind is one line and one merged count, whose counts add up to every
/// try the guest saw refused; the socket attempts are on record though no
/// network grant exists (WASI used to refuse them before the host saw the
/// address); and a neighbour Tick's calls, made while the flood runs, are
/// all recorded.
#[test]
fn a_flood_of_refusals_is_a_few_lines_and_a_neighbours_calls_are_all_recorded() {
    let dir = TempDir::new("audit-flood");
    let data = TempDir::new("audit-flood-data");
    let config = two_ticks(&dir, &data, "");
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    let tries = 20_000u64;
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    // The flood runs while the neighbour is called.
    mcp.send(json!({"jsonrpc": "2.0", "id": 1000, "method": "tools/call",
        "params": {"name": "flood_refuse_loop", "arguments": {"path": "/data/../../etc/passwd", "n": tries}}}));
    let calls = 50;
    for i in 0..calls {
        let r = mcp.call(i, "calm_echo", json!({"i": i}));
        assert_eq!(r["structuredContent"]["i"], i, "{r}");
    }
    let flood = mcp.answer(json!(1000));
    assert_eq!(
        flood["result"]["structuredContent"]["refused"], tries,
        "the guest was refused every time: {flood}"
    );
    let r = mcp.call(
        2000,
        "flood_refuse_loop",
        json!({"addr": addr, "n": tries / 10}),
    );
    assert_eq!(r["structuredContent"]["refused"], tries / 10, "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");

    let file = dir.path("audit.jsonl");
    let size = std::fs::metadata(&file).unwrap().len();
    let all = events(&file);
    let flood = session_of(&all, |e| {
        e["grants"]["dirs"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
    });
    let (lines, n) = counted(&flood, "denied", "path");
    assert_eq!(n, tries, "every refused open counted: {flood:#?}");
    assert!(lines <= 3, "{lines} lines for {tries} refusals");
    let (lines, n) = counted(&flood, "denied", "socket");
    assert_eq!(
        n,
        tries / 10,
        "every refused connect counted, no grant needed"
    );
    assert!(lines <= 3, "{lines} lines");
    let socket = flood
        .iter()
        .find(|e| e["event"] == "denied" && e["what"] == "socket")
        .unwrap();
    assert_eq!(socket["attempted"], addr.as_str(), "the address seen");
    let merged = flood
        .iter()
        .find(|e| e["event"] == "denied" && e["count"].is_u64())
        .expect("a merged line");
    assert!(
        merged["first"].is_string() && merged["last"].is_string(),
        "{merged}"
    );
    assert!(
        flood.len() < 12,
        "a few lines for the whole session: {flood:#?}"
    );
    // The neighbour: every call on record.
    let calm = session_of(&all, |e| {
        e["grants"]["dirs"].as_array().is_some_and(|d| d.is_empty())
    });
    let recorded = calm.iter().filter(|e| e["event"] == "call").count();
    assert_eq!(recorded, calls as usize, "{calm:#?}");
    assert!(size < 64 * 1024, "the file is {size} bytes");
}

/// A session's own events past its byte budget (set low here) are
/// dropped and counted, and one `unrecorded` event says how many of each
/// kind, before its end; the budget's positive control is the default,
/// under which the same run is recorded whole.
#[test]
fn a_session_past_its_budget_says_what_was_dropped() {
    let data = TempDir::new("audit-budget-data");
    let grant = format!("{}::/data", data.0.display());
    let wasm = hostile_wasm();
    let run = |budget: Option<&str>| {
        let dir = TempDir::new("audit-budget");
        let file = dir.path("audit.jsonl");
        let args = json!({"path": "/data/../x", "n": 100}).to_string();
        let mut env = vec![];
        if let Some(b) = budget {
            env.push(("TICKBOX_AUDIT_SESSION_MAX_SIZE", b));
        }
        let out = tickbox_env(
            &[
                "call",
                &wasm,
                "refuse_loop",
                &args,
                "--dir",
                &grant,
                "--audit",
                file.to_str().unwrap(),
            ],
            &env,
        );
        assert_eq!(out.json()["refused"], 100, "{out:#?}");
        (events(&file), dir)
    };
    let (all, _d) = run(Some("400"));
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        ["start", "denied", "call", "unrecorded", "end"],
        "{all:#?}"
    );
    let u = &all[3];
    assert_eq!(u["bound"], 400);
    assert_eq!(u["dropped"]["denied"]["path"], 99, "the merged count: {u}");
    // Positive control: under the default budget, the count is written.
    let (all, _d) = run(None);
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(
        kinds,
        ["start", "denied", "call", "denied", "end"],
        "{all:#?}"
    );
    assert_eq!(all[3]["count"], 99);
}

/// Every `--audit FILE` is rotated at its bound (set low here), the older
/// files kept beside it, by processes appending to it one after another.
#[test]
fn an_audit_file_rotates_at_its_bound() {
    let dir = TempDir::new("audit-rotate");
    let file = dir.path("audit.jsonl");
    let wasm = hostile_wasm();
    let runs = 6;
    for i in 0..runs {
        let args = json!({"i": i}).to_string();
        let out = tickbox_env(
            &[
                "call",
                &wasm,
                "echo",
                &args,
                "--audit",
                file.to_str().unwrap(),
                "--audit-args",
            ],
            &[("TICKBOX_AUDIT_MAX_SIZE", "2KiB")],
        );
        assert_eq!(out.code, 0, "{out:#?}");
    }
    let files: Vec<std::path::PathBuf> = std::iter::once(file.clone())
        .chain((1..=3).map(|n| dir.path(&format!("audit.jsonl.{n}"))))
        .filter(|p| p.exists())
        .collect();
    assert!(files.len() >= 2, "rotated: {files:?}");
    assert!(
        !dir.path("audit.jsonl.4").exists(),
        "three older files kept"
    );
    for f in &files {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(size <= 2048, "{} is {size} bytes", f.display());
    }
    // The newest run is in the newest file.
    let newest = events(&file);
    assert!(
        newest
            .iter()
            .any(|e| e["event"] == "call" && e["args"]["i"] == runs - 1),
        "{newest:#?}"
    );
}

/// Which of these calls (by the `nonce` in their recorded arguments) are
/// not in the audit file: the detector of the SIGKILL test.
fn missing_calls(file: &std::path::Path, nonces: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let recorded: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| e["event"] == "call")
        .collect();
    nonces
        .iter()
        .filter(|n| !recorded.iter().any(|e| e["args"]["nonce"] == n.as_str()))
        .cloned()
        .collect()
}

/// Rounds of: a fresh `tickbox mcp` (wasm Tick, audit arguments recorded,
/// `extra` flags), one `tools/call` answered, SIGKILL at once. The nonces
/// of the calls whose answer came, each round's file.
fn answered_then_killed(
    dir: &TempDir,
    tag: &str,
    rounds: usize,
    extra: &[&str],
) -> Vec<(String, std::path::PathBuf)> {
    let wasm = hostile_wasm();
    (0..rounds)
        .map(|round| {
            let file = dir.path(&format!("{tag}-{round}.jsonl"));
            let mut args: Vec<String> = vec![
                "--audit".into(),
                file.display().to_string(),
                "--audit-args".into(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            args.push(wasm.clone());
            let mut mcp = Raw::start(&args);
            mcp.initialize("2025-06-18");
            let nonce = format!("{tag}-{round}-{}", std::process::id());
            let r = mcp.call(1, "echo", json!({"nonce": nonce}));
            // The answer is here: the host dies now, before anything else.
            mcp.kill_now();
            assert_eq!(r["structuredContent"]["nonce"], nonce.as_str(), "{r}");
            (nonce, file)
        })
        .collect()
}

/// `--audit-sync`: a call's answer is released only once its line is
/// written and fdatasync'ed, so SIGKILL right after the answer never
/// loses it: many rounds, nothing missing. Positive controls of the
/// detector: without `--audit-sync` the batching (25 ms) loses the line
/// of a call killed right after its answer in some rounds, and a line
/// removed by hand from a synced file is reported missing.
#[test]
fn an_answered_call_survives_sigkill_under_audit_sync() {
    let dir = TempDir::new("audit-sync");
    let synced = answered_then_killed(&dir, "synced", 20, &["--audit-sync"]);
    for (nonce, file) in &synced {
        assert_eq!(
            missing_calls(file, std::slice::from_ref(nonce)),
            Vec::<String>::new(),
            "an answered call is not on record: {}",
            std::fs::read_to_string(file).unwrap_or_default()
        );
    }
    // Positive control: batched (25 ms), the detector sees a line missing
    // within a few rounds (each round's kill comes well within the batch
    // wait; up to 20 rounds, so a loaded machine's stall in one is not the
    // test's failure).
    let lost = (0..20).find(|round| {
        let (n, f) = answered_then_killed(&dir, &format!("batched{round}"), 1, &[]).remove(0);
        !missing_calls(&f, std::slice::from_ref(&n)).is_empty()
    });
    assert!(lost.is_some(), "no batched round lost its call line");
    // Positive control: a line removed by hand is reported.
    let (nonce, file) = &synced[0];
    let text = std::fs::read_to_string(file).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains(nonce.as_str()))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(file, kept).unwrap();
    let reported = missing_calls(file, std::slice::from_ref(nonce));
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(&reported[0], nonce);
}

/// The `audit_sync` key of an MCP config and of a policy file, and
/// `--audit-sync` with no file to sync (one line, exit 2).
#[test]
fn audit_sync_keys_and_a_stream_that_cannot_be_synced() {
    let dir = TempDir::new("audit-sync-keys");
    let data = TempDir::new("audit-sync-keys-data");
    let config = two_ticks(&dir, &data, "audit_sync = true\naudit_args = true");
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    let r = mcp.call(1, "calm_echo", json!({"nonce": "keyed"}));
    mcp.kill_now();
    assert_eq!(r["structuredContent"]["nonce"], "keyed");
    let nonce = ["keyed".to_string()];
    assert!(missing_calls(&dir.path("audit.jsonl"), &nonce).is_empty());

    let wasm = hostile_wasm();
    let policy = dir.path("policy.toml");
    std::fs::write(
        &policy,
        "audit = \"p.jsonl\"\naudit_sync = true\naudit_args = true\n",
    )
    .unwrap();
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        r#"{"nonce":"policy"}"#,
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(missing_calls(&dir.path("p.jsonl"), &["policy".to_string()]).is_empty());
    std::fs::write(&policy, "audit_sync = \"yes\"\n").unwrap();
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    out.expect(2, "audit_sync must be true or false");

    for argv in [
        vec!["call", wasm.as_str(), "echo", "{}", "--audit-sync"],
        vec![
            "call",
            wasm.as_str(),
            "echo",
            "{}",
            "--audit",
            "-",
            "--audit-sync",
        ],
    ] {
        let out = tickbox(&argv);
        out.expect(2, "only an audit file can be synced");
        assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    }
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// An audit path that is not a regular file (a FIFO with or without a
/// reader, a directory, a device), from the flag, a policy's key or an MCP
/// config's, is one line and exit 2 at once: opening a FIFO used to wait
/// for a reader for ever. A regular file is the positive control.
#[test]
fn an_audit_path_that_is_not_a_regular_file_is_one_line_and_exit_2_at_once() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = TempDir::new("audit-fifo");
    let fifo = dir.path("audit.fifo");
    mkfifo(&fifo);
    let wasm = hostile_wasm();
    let quick = std::time::Duration::from_secs(30);
    let refused = |argv: &[&str]| {
        let out = tickbox_within(argv, &[], quick);
        out.expect(2, "not a regular file");
        assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    };
    let f = fifo.to_str().unwrap();
    refused(&["call", &wasm, "echo", "{}", "--audit", f]);
    // With a reader on it, where an open for writing succeeds at once.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    refused(&["call", &wasm, "echo", "{}", "--audit", f, "--audit-sync"]);
    drop(reader);
    refused(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        dir.0.to_str().unwrap(),
    ]);
    refused(&["call", &wasm, "echo", "{}", "--audit", "/dev/null"]);
    let policy = dir.path("policy.toml");
    std::fs::write(&policy, "audit = \"audit.fifo\"\n").unwrap();
    refused(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!("audit = \"audit.fifo\"\n\n[[tick]]\nname = \"h\"\npath = \"{wasm}\"\n"),
    )
    .unwrap();
    let out = tickbox_within(&["mcp", "--config", config.to_str().unwrap()], &[], quick);
    out.expect(2, "not a regular file");
    // Positive control: a regular file.
    let plain = dir.path("plain.jsonl");
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(events(&plain)[0]["event"], "start");
}

/// SIGTERM and SIGINT reach a command blocked in an open before its Tick
/// starts: a `--policy` that is a FIFO whose writer never writes (a read
/// that waits for ever) and a Tick path that is a FIFO with no writer.
/// Each used to ignore both signals; now it ends with exit 130 and one
/// line. The positive control: the same command with a regular policy
/// file runs.
#[test]
fn a_signal_ends_a_command_blocked_opening_a_fifo() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = TempDir::new("audit-fifo-signal");
    let wasm = hostile_wasm();
    let policy = dir.path("policy.fifo");
    mkfifo(&policy);
    let tick_fifo = dir.path("tick.wasm");
    mkfifo(&tick_fifo);
    let cases: [(&[&str], i32); 2] = [
        (
            &[
                "call",
                &wasm,
                "echo",
                "{}",
                "--policy",
                policy.to_str().unwrap(),
            ],
            libc::SIGTERM,
        ),
        (
            &["call", tick_fifo.to_str().unwrap(), "echo", "{}"],
            libc::SIGINT,
        ),
    ];
    for (argv, signal) in cases {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .args(argv)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .env("TICKBOX_CACHE_DIR", target_dir().join("test-wasm-cache"))
            .env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"))
            .spawn()
            .unwrap();
        // Blocked once it holds the FIFO's other end: an open for writing
        // that does not block succeeds only when a reader is there.
        let fifo = if argv.contains(&"--policy") {
            &policy
        } else {
            &tick_fifo
        };
        let mut writer = None;
        assert!(
            eventually(std::time::Duration::from_secs(60), || {
                writer = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(fifo)
                    .ok();
                writer.is_some()
            }),
            "tickbox never opened the FIFO"
        );
        // SAFETY: kill(2) of the child this test started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let ended = exits_within(child.id(), std::time::Duration::from_secs(30));
        if !ended {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        assert!(ended, "{argv:?} ignored the signal");
        let mut stderr = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert_eq!(status.code(), Some(130), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("interrupted"), "{stderr}");
        drop(writer);
    }
    // Positive control: a regular policy file.
    let plain = dir.path("policy.toml");
    std::fs::write(&plain, "max_memory = \"64MiB\"\n").unwrap();
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--policy",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
}
