//! Real MCP clients start `tickbox mcp` serving the example counter (wasm)
//! as their stdio server, as a person's client does: the Python SDK (its
//! default `mcp.Client()`, which opens with `server/discover`, and the
//! legacy `ClientSession` with `initialize`), the TypeScript SDK and MCP
//! Inspector's CLI. The same clients over Streamable HTTP and the
//! official conformance suite run against the facade in process, in
//! tickbox-mcp's `tests/it/sdks.rs`; the clients and their installs are
//! `tickbox_test_support::mcp_clients`.

use crate::mcp_wire::HttpServer;
use crate::util::{finish_within, root, StartHttp, TempDir};
pub(crate) use tickbox_test_support::mcp_clients::counter_wasm;
use tickbox_test_support::mcp_clients::{
    assert_checks, inspector, npm_package, python_client, ts_client, with, PATIENCE, SDK_CHECKS,
};

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

/// docs/guide/mcp.md's MCP Inspector lines, each as written there, in
/// `bash` with the `tickbox` under test on PATH, in a folder holding the
/// `counter.wasm`, `ticks.toml` and `token` they name: `npx PACKAGE@VERSION`
/// runs the Inspector the tests install, which must be the version the
/// page names, and the third line's server is `tickbox mcp --http` with
/// that token file, its address put where the line says 127.0.0.1:8765.
/// Each lists the counter's tools.
#[test]
fn the_mcp_guides_inspector_lines_run_as_written() {
    let page = "docs/guide/mcp.md";
    let text = std::fs::read_to_string(root().join(page)).expect(page);
    let block = text
        .split_once("<!-- run by mcp_clients::the_mcp_guides_inspector_lines_run_as_written -->")
        .and_then(|(_, after)| after.split_once("```sh\n"))
        .and_then(|(_, after)| after.split_once("```"))
        .unwrap_or_else(|| panic!("{page}'s Inspector block"))
        .0;
    let package = npm_package("@modelcontextprotocol/inspector");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(package.join("package.json")).expect("its package.json"),
    )
    .expect("JSON");
    let pinned = format!(
        "@modelcontextprotocol/inspector@{}",
        manifest["version"].as_str().expect("a version")
    );
    let dir = TempDir::new("mcp-guide-inspector");
    std::os::unix::fs::symlink(counter_wasm(), dir.path("counter.wasm")).expect("link");
    std::fs::write(
        dir.path("ticks.toml"),
        "[[tick]]\nname = \"counter\"\npath = \"counter.wasm\"\n",
    )
    .expect("ticks.toml");
    let token = dir.path("token");
    std::fs::write(&token, "a-token-for-the-guides-inspector-line\n").expect("token");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let server = HttpServer::start_args(
        &[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            &token.to_string_lossy(),
            &counter_wasm(),
        ],
        &[],
    );
    let address = server.addr.trim_start_matches("http://").to_string();
    // `npx` as the page uses it: the pinned Inspector's CLI, nothing fetched.
    let npx = format!(
        "npx() {{ [ \"$1\" = '{pinned}' ] || {{ echo \"the tests install {pinned}, not $1\" >&2; return 99; }}; shift; node '{}' \"$@\"; }}",
        package.join("cli/build/cli.js").display()
    );
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_tickbox"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("its directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 3, "{page}: {block}");
    for line in lines {
        let script = format!("{npx}\n{}", line.replace("127.0.0.1:8765", &address));
        let mut cmd = std::process::Command::new("bash");
        cmd.args(["-o", "pipefail", "-c", &script])
            .current_dir(&dir.0)
            .env("PATH", &path)
            .env("TICKBOX_CACHE_DIR", tickbox_test_support::wasm_cache())
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let r = finish_within(cmd, line, PATIENCE);
        assert_eq!(r.code, 0, "{page}: {line}\n{}\n{}", r.stdout, r.stderr);
        let json = &r.stdout[r.stdout.find('{').unwrap_or(0)..];
        let tools: serde_json::Value = serde_json::from_str(json)
            .unwrap_or_else(|e| panic!("{page}: {line} printed no JSON ({e}): {}", r.stdout));
        assert!(
            tools["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "increment")),
            "{page}: {line}: {tools}"
        );
    }
}
