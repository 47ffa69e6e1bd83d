//! Real MCP SDKs, run as programs, against the facade over Streamable
//! HTTP in this process: the Python SDK (its default `mcp.Client()`, which
//! opens with `server/discover`, and the legacy `ClientSession` with
//! `initialize`), the TypeScript SDK, MCP Inspector's CLI, and the
//! official conformance suite against its baseline. Each client checks what it saw and prints `ok
//! CHECK` lines (`tests/mcp-clients/`); the same clients over stdio start
//! the `tickbox mcp` process, in the CLI's tests.

use crate::server::HttpServer;
use crate::{native, wasm};
use std::process::Command;
use tickbox_mcp::Grants;
use tickbox_test_support::mcp_clients::{
    assert_checks, counter_wasm, inspector, npm_package, python_client, run, ts_client, with,
    SDK_CHECKS,
};
use tickbox_test_support::{tick, TempDir};

/// The example counter, sandboxed, with nothing granted.
fn counter() -> tickbox_sandbox::Launcher {
    wasm(&counter_wasm(), &Grants::default())
}

#[test]
fn python_sdk_clients_over_streamable_http() {
    let server = HttpServer::start_with(counter(), |_| {});
    let url = [server.url()];
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
}

#[test]
fn typescript_sdk_over_streamable_http() {
    let server = HttpServer::start_with(counter(), |_| {});
    let r = ts_client("http", &[server.url()]);
    let checks = with("resources/subscribe", SDK_CHECKS);
    assert_checks("the TypeScript SDK (HTTP)", &r, &checks);
}

/// Over Streamable HTTP, calls of two `mcp-inspector --cli` runs (two
/// clients, one method each) reach the same Tick.
#[test]
fn mcp_inspector_cli_over_streamable_http() {
    let server = HttpServer::start_with(counter(), |_| {});
    let http = [server.url(), "--transport".into(), "http".into()];
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
    let server = HttpServer::start_with(counter(), |_| {});
    let r = conformance(
        &server.url(),
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

    let tools = HttpServer::start_with(
        native(vec!["python3".into(), tick("mcp_conformance.py")], &[]),
        |_| {},
    );
    for scenario in ["tools-call-simple-text", "tools-call-error"] {
        let r = conformance(&tools.url(), &["--scenario", scenario]);
        assert_eq!(r.code, 0, "{scenario}:\n{}\n{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("0 failed"), "{scenario}: {}", r.stdout);
    }
}
