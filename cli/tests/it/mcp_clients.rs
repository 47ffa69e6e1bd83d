//! Real MCP clients start `tickbox mcp` serving the example counter (wasm)
//! as their stdio server, as a person's client does: the Python SDK (its
//! default `mcp.Client()`, which opens with `server/discover`, and the
//! legacy `ClientSession` with `initialize`), the TypeScript SDK and MCP
//! Inspector's CLI. The same clients over Streamable HTTP and the
//! official conformance suite run against the facade in process, in
//! tickbox-mcp's `tests/it/sdks.rs`; the clients and their installs are
//! `tickbox_test_support::mcp_clients`.

use tickbox_test_support::mcp_clients::{
    assert_checks, inspector, python_client, ts_client, with, SDK_CHECKS,
};
pub(crate) use tickbox_test_support::mcp_clients::{cache_dir, counter_wasm};

/// The command that starts `tickbox mcp` on the counter, as a client runs it.
fn stdio_target() -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_tickbox").to_string(),
        "mcp".into(),
        counter_wasm(),
    ]
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

/// MCP Inspector's CLI has no subscribe (it ends after one method), so it
/// checks everything else; over Streamable HTTP it is tickbox-mcp's
/// `sdks::mcp_inspector_cli_over_streamable_http`.
#[test]
fn mcp_inspector_cli_over_stdio() {
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
}
