//! Real MCP clients run as programs against an MCP server (the
//! `tickbox mcp` process or the facade in a test's own process): the
//! Python SDK, the TypeScript SDK and the official conformance suite, with
//! the example counter as the Tick.
//!
//! The client scripts live in `tests/mcp-clients/`; their packages are
//! pinned there and installed by `tests/setup.sh` (npm into
//! `tests/mcp-clients/node_modules`, Python into `tests/mcp-clients/.venv`).
//! A missing client fails its test with one line naming the install command.

use crate::{build_wasm, finish_within, root, wasm_cache, Output};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A guard against hangs, not a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(180);

/// What every SDK client checks, in its own words (`ok CHECK` lines).
pub const SDK_CHECKS: &[&str] = &[
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

/// Where the client scripts and their packages are.
pub fn clients_dir() -> PathBuf {
    root().join("tests/mcp-clients")
}

const NPM_INSTALL: &str = "npm ci --prefix tests/mcp-clients (see tests/setup.sh)";
const PY_INSTALL: &str = "python3 -m venv tests/mcp-clients/.venv && \
     tests/mcp-clients/.venv/bin/pip install -r tests/mcp-clients/requirements.txt (see tests/setup.sh)";

/// The venv's Python with the `mcp` SDK; fails the test when it is missing.
pub fn python() -> PathBuf {
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
pub fn npm_package(name: &str) -> PathBuf {
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

/// The example counter built for wasm32-wasip2: the Tick every client uses.
pub fn counter_wasm() -> String {
    build_wasm("examples", "counter", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// Runs a client to its end (killed after PATIENCE).
pub fn run(mut cmd: Command) -> Output {
    cmd.current_dir(clients_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        .env("TICKBOX_CACHE_DIR", wasm_cache());
    let shown = format!("{cmd:?}");
    finish_within(cmd, &shown, PATIENCE)
}

/// Asserts a client script passed every check it should have made.
pub fn assert_checks(what: &str, r: &Output, checks: &[&str]) {
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

/// `python_client.py MODE TRANSPORT TARGET...` (MODE `default` or
/// `legacy`; TARGET a command line or a URL), run to its end.
pub fn python_client(mode: &str, transport: &str, target: &[String]) -> Output {
    let mut cmd = Command::new(python());
    cmd.arg("python_client.py")
        .args([mode, transport])
        .args(target);
    run(cmd)
}

/// `ts_client.mjs TRANSPORT TARGET...`, run to its end.
pub fn ts_client(transport: &str, target: &[String]) -> Output {
    npm_package("@modelcontextprotocol/sdk");
    let mut cmd = Command::new("node");
    cmd.arg("ts_client.mjs").arg(transport).args(target);
    run(cmd)
}

/// `first`, then `rest`.
pub fn with<'a>(first: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![first];
    v.extend_from_slice(rest);
    v
}

/// One `mcp-inspector --cli` run against `target` (a command line, or a
/// URL with `--transport http`): a fresh client (and, over stdio, a fresh
/// server) each time, since the CLI does one method per run; its JSON.
pub fn inspector(target: &[String], method: &[&str]) -> serde_json::Value {
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
