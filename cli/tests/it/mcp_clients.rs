//! Real MCP clients start `tickbox mcp` serving the example counter (wasm)
//! as their stdio server, as a person's client does: the Python SDK (its
//! default `mcp.Client()`, which opens with `server/discover`, and the
//! legacy `ClientSession` with `initialize`), the TypeScript SDK and MCP
//! Inspector's CLI (over stdio and `--http`). The same SDKs over
//! Streamable HTTP and the official conformance suite run against the
//! facade in process, in tickbox-mcp's `tests/it/sdks.rs`; the clients and
//! their installs are `tickbox_test_support::mcp_clients`.

use crate::util::*;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tickbox_test_support::mcp_clients::{
    assert_checks, npm_package, python_client, run, ts_client, with, SDK_CHECKS,
};
pub(crate) use tickbox_test_support::mcp_clients::{cache_dir, counter_wasm};

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(180);

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
fn typescript_sdk_over_stdio() {
    let r = ts_client("stdio", &stdio_target());
    let checks = with("initialize", SDK_CHECKS);
    assert_checks("the TypeScript SDK (stdio)", &r, &checks);
    assert_checks("subscribe", &r, &["resources/subscribe"]);
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
