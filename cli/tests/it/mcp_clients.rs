//! Real MCP clients against `tickbox mcp` serving the example counter
//! (wasm): the Python SDK (its default `mcp.Client()`, which opens with
//! `server/discover`, and the legacy `ClientSession` with `initialize`), the
//! TypeScript SDK and MCP Inspector's CLI, over stdio and Streamable HTTP,
//! and the official conformance suite against a baseline.
//!
//! The client scripts live in `tests/mcp-clients/`; their packages are
//! pinned there and installed by `tests/setup.sh` (npm into
//! `tests/mcp-clients/node_modules`, Python into `tests/mcp-clients/.venv`).
//! A missing client fails its test with one line naming the install command.

use crate::util::*;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(180);

/// What every SDK client checks, in its own words (`ok CHECK` lines).
const SDK_CHECKS: &[&str] = &[
    "tools/list names",
    "tools/list readOnlyHint on history",
    "tools/list annotations on increment",
    "tools/call ok",
    "tools/call tool error",
    "tools/call invalid args",
    "tools/call read-only tool",
    "resources/updated",
    "resources/list",
    "resources/read",
];

pub(crate) fn clients_dir() -> PathBuf {
    root().join("tests/mcp-clients")
}

const NPM_INSTALL: &str = "npm ci --prefix tests/mcp-clients (see tests/setup.sh)";
const PY_INSTALL: &str = "python3 -m venv tests/mcp-clients/.venv && \
     tests/mcp-clients/.venv/bin/pip install -r tests/mcp-clients/requirements.txt (see tests/setup.sh)";

/// The venv's Python with the `mcp` SDK; fails the test when it is missing.
pub(crate) fn python() -> PathBuf {
    let py = clients_dir().join(".venv/bin/python3");
    let ok = Command::new(&py)
        .args(["-c", "import mcp.client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "the MCP Python SDK is not installed; run: {PY_INSTALL}");
    py
}

/// An npm package's directory; fails the test when it is not installed (or
/// node is missing).
fn npm_package(name: &str) -> PathBuf {
    let dir = clients_dir().join("node_modules").join(name);
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        node && dir.join("package.json").is_file(),
        "{name} (npm) is not installed; run: {NPM_INSTALL}"
    );
    dir
}

pub(crate) fn counter_wasm() -> String {
    build_wasm("examples", "counter", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

pub(crate) fn cache_dir() -> PathBuf {
    target_dir().join("test-wasm-cache")
}

/// Runs a client to its end (killed after PATIENCE).
fn run(mut cmd: Command) -> Output {
    cmd.current_dir(clients_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .env("TICKBOX_CACHE_DIR", cache_dir());
    let shown = format!("{cmd:?}");
    finish_within(cmd, &shown, PATIENCE)
}

/// Asserts a client script passed every check it should have made.
fn assert_checks(what: &str, r: &Output, checks: &[&str]) {
    assert_eq!(
        r.code, 0,
        "{what} failed:\n--- stdout\n{}\n--- stderr\n{}",
        r.stdout, r.stderr
    );
    for c in checks {
        assert!(
            r.stdout.lines().any(|l| l == format!("ok {c}")),
            "{what} did not check {c:?}:\n{}",
            r.stdout
        );
    }
}

/// The command that starts `tickbox mcp` on the counter, as a client runs it.
fn stdio_target() -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_tickbox").to_string(),
        "mcp".into(),
        counter_wasm(),
    ]
}

/// `tickbox mcp --http 127.0.0.1:0 ARGS`, stopped with SIGTERM on drop.
struct HttpServer {
    child: Child,
    url: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl HttpServer {
    fn start(args: &[String]) -> HttpServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .env("TICKBOX_CACHE_DIR", cache_dir())
            .spawn()
            .expect("spawn tickbox mcp --http");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("stderr ended before the address")
                .unwrap();
            if let Some(rest) = line.strip_prefix("tickbox mcp: serving MCP on ") {
                break rest.trim().to_string();
            }
        };
        let stderr =
            std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
        HttpServer {
            child,
            url,
            stderr: Some(stderr),
        }
    }

    /// Stops the server; its stderr after the address line.
    fn stop(mut self) -> String {
        self.terminate();
        self.stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }

    fn terminate(&mut self) {
        // SAFETY: a plain kill(2) to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        if !exits_within(self.child.id(), PATIENCE) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.terminate();
        }
    }
}

fn python_client(mode: &str, transport: &str, target: &[String]) -> Output {
    let mut cmd = Command::new(python());
    cmd.arg("python_client.py")
        .args([mode, transport])
        .args(target);
    run(cmd)
}

fn ts_client(transport: &str, target: &[String]) -> Output {
    npm_package("@modelcontextprotocol/sdk");
    let mut cmd = Command::new("node");
    cmd.arg("ts_client.mjs").arg(transport).args(target);
    run(cmd)
}

fn with<'a>(first: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![first];
    v.extend_from_slice(rest);
    v
}

#[test]
fn python_sdk_default_client_over_stdio() {
    let r = python_client("default", "stdio", &stdio_target());
    let checks = with("server/discover", SDK_CHECKS);
    assert_checks("the Python SDK's mcp.Client()", &r, &checks);
    assert_checks("listen", &r, &["subscriptions/listen"]);
}

#[test]
fn python_sdk_legacy_client_session_over_stdio() {
    let r = python_client("legacy", "stdio", &stdio_target());
    let checks = with("initialize", SDK_CHECKS);
    assert_checks("the Python SDK's ClientSession", &r, &checks);
    assert_checks("subscribe", &r, &["resources/subscribe"]);
}

#[test]
fn python_sdk_clients_over_streamable_http() {
    let server = HttpServer::start(&[counter_wasm()]);
    let url = [server.url.clone()];
    let r = python_client("default", "http", &url);
    assert_checks(
        "mcp.Client() over HTTP",
        &r,
        &with("server/discover", SDK_CHECKS),
    );
    let r = python_client("legacy", "http", &url);
    assert_checks(
        "ClientSession over HTTP",
        &r,
        &with("resources/subscribe", SDK_CHECKS),
    );
    // Ending the session (DELETE) is a success the SDK recognizes.
    assert!(
        !r.stderr.contains("Session termination failed"),
        "{}",
        r.stderr
    );
    server.stop();
}

#[test]
fn typescript_sdk_over_stdio() {
    let r = ts_client("stdio", &stdio_target());
    let checks = with("initialize", SDK_CHECKS);
    assert_checks("the TypeScript SDK (stdio)", &r, &checks);
    assert_checks("subscribe", &r, &["resources/subscribe"]);
}

#[test]
fn typescript_sdk_over_streamable_http() {
    let server = HttpServer::start(&[counter_wasm()]);
    let r = ts_client("http", std::slice::from_ref(&server.url));
    let checks = with("resources/subscribe", SDK_CHECKS);
    assert_checks("the TypeScript SDK (HTTP)", &r, &checks);
    server.stop();
}

/// One `mcp-inspector --cli` run (a fresh client and, over stdio, a fresh
/// `tickbox mcp` each time: the CLI does one method per run); its JSON.
fn inspector(target: &[String], method: &[&str]) -> serde_json::Value {
    let dir = npm_package("@modelcontextprotocol/inspector");
    let mut cmd = Command::new("node");
    // What `npx @modelcontextprotocol/inspector --cli` runs.
    cmd.arg(dir.join("cli/build/cli.js"))
        .arg("--cli")
        .args(target)
        .arg("--method")
        .args(method);
    let r = run(cmd);
    assert_eq!(
        r.code, 0,
        "inspector {method:?}: {}\n{}",
        r.stdout, r.stderr
    );
    let json = &r.stdout[r.stdout.find('{').unwrap_or(0)..];
    serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("inspector {method:?} printed no JSON ({e}): {}", r.stdout))
}

/// MCP Inspector's CLI has no subscribe (it ends after one method), so it
/// checks everything else.
#[test]
fn mcp_inspector_cli_over_stdio_and_http() {
    let target = stdio_target();
    let tools = inspector(&target, &["tools/list"]);
    let tool = |name: &str| {
        tools["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{tools}"))
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}: {tools}"))
    };
    assert_eq!(tool("history")["annotations"]["readOnlyHint"], true);
    assert_eq!(tool("tick_state")["annotations"]["readOnlyHint"], true);
    assert_eq!(tool("increment")["annotations"]["readOnlyHint"], false);
    let call = |args: &[&str]| {
        let mut m = vec!["tools/call", "--tool-name"];
        m.extend(args);
        inspector(&target, &m)
    };
    let r = call(&["increment", "--tool-arg", "amount=2"]);
    assert_eq!(
        (&r["isError"], &r["structuredContent"]["value"]),
        (&false.into(), &2.into()),
        "{r}"
    );
    // 2^63 as a JavaScript number: an integer to the schema, refused by the
    // counter itself.
    let r = call(&["increment", "--tool-arg", "amount=9223372036854775807"]);
    let e = &r["structuredContent"]["error"];
    assert_eq!(
        (&r["isError"], &e["kind"]),
        (&true.into(), &"tool_error".into()),
        "{r}"
    );
    let r = call(&["increment", "--tool-arg", "amount=two"]);
    let e = &r["structuredContent"]["error"];
    assert_eq!(
        (&r["isError"], &e["kind"], &e["executed"]),
        (&true.into(), &"invalid_arguments".into(), &false.into()),
        "{r}"
    );
    let r = inspector(&target, &["resources/list"]);
    assert_eq!(r["resources"][0]["uri"], "tick://counter/state", "{r}");
    let r = inspector(
        &target,
        &["resources/read", "--uri", "tick://counter/state"],
    );
    let text = r["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    let state: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(state["tick"], "counter", "{state}");
    assert_eq!(state["data"]["value"], 0, "a fresh counter: {state}");

    // Over Streamable HTTP, calls of two runs reach the same Tick.
    let server = HttpServer::start(&[counter_wasm()]);
    let http = [server.url.clone(), "--transport".into(), "http".into()];
    let r = inspector(
        &http,
        &[
            "tools/call",
            "--tool-name",
            "increment",
            "--tool-arg",
            "amount=3",
        ],
    );
    assert_eq!(r["structuredContent"]["value"], 3, "{r}");
    let r = inspector(&http, &["resources/read", "--uri", "tick://counter/state"]);
    let text = r["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(text.contains(r#""value":3"#), "{text}");
    server.stop();
}

/// The official conformance suite: every active server scenario passes on
/// the counter except those `conformance-baseline.yml` lists (each with the
/// reason it cannot apply to a Tick facade), and the two tool scenarios that
/// call tools by fixed names pass against a Tick that has those names.
#[test]
fn conformance_suite_passes_its_baseline() {
    let dir = npm_package("@modelcontextprotocol/conformance");
    let bin = dir.join("dist/index.js");
    let out = TempDir::new("conformance");
    let conformance = |url: &str, extra: &[&str]| {
        let mut cmd = Command::new("node");
        cmd.arg(&bin)
            .args(["server", "--url", url, "-o"])
            .arg(&out.0)
            .args(extra);
        run(cmd)
    };
    let server = HttpServer::start(&[counter_wasm()]);
    let r = conformance(
        &server.url,
        &["--expected-failures", "conformance-baseline.yml"],
    );
    assert_eq!(
        r.code, 0,
        "conformance suite against the counter:\n{}\n{}",
        r.stdout, r.stderr
    );
    for must in [
        "server-initialize",
        "ping",
        "tools-list",
        "resources-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        assert!(
            r.stdout.lines().any(|l| l.contains(&format!("✓ {must}:"))),
            "{must} should pass:\n{}",
            r.stdout
        );
    }
    server.stop();

    let tools = HttpServer::start(&["--".into(), "python3".into(), tick("mcp_conformance.py")]);
    for scenario in ["tools-call-simple-text", "tools-call-error"] {
        let r = conformance(&tools.url, &["--scenario", scenario]);
        assert_eq!(r.code, 0, "{scenario}:\n{}\n{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("0 failed"), "{scenario}: {}", r.stdout);
    }
    tools.stop();
}
