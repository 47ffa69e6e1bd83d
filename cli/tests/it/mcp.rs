//! `tickbox mcp` as the process an MCP client spawns, driven with raw
//! JSON-RPC lines over the binary's stdin/stdout: a config file hosting
//! several Ticks under prefixes, bad starts as one line and a documented
//! exit code, and stdout carrying only MCP frames. The facade's own
//! behaviour (tools, calls, subscriptions, dying Ticks) is tested in
//! process, with a real MCP client, in tickbox-mcp's `tests/it`.

use crate::mcp_wire::Raw;
use crate::util::*;
use serde_json::{json, Value};
use std::process::Stdio;
use tickbox_test_support::mcp_lines::tool_hint;

/// A config's entries become the Ticks `tickbox mcp` hosts, each under
/// its name, a command or a path, with its own grants (what the facade
/// makes of several Ticks is tickbox-mcp's `prefixes` test).
#[test]
fn a_config_hosts_several_ticks_under_prefixes() {
    let dir = TempDir::new("mcp-config");
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[tick]]
name = "counter"
command = ["python3", "{counter}"]

[[tick]]
name = "web"
path = "{hostile}"
[tick.grants]
allow_net = ["127.0.0.1:9"]
"#,
            counter = tick("counter.py"),
            hostile = hostile(),
        ),
    )
    .unwrap();
    let cache = wasm_cache();
    let mut mcp = Raw::start_env(
        &["--config".into(), config.to_string_lossy().to_string()],
        &[("TICKBOX_CACHE_DIR", &cache)],
    );
    mcp.initialize("2025-11-25");
    let list = mcp.request(1, "tools/list", json!({}));
    let open_world = |n: &str| tool_hint(&list, n, "openWorldHint");
    assert_eq!(open_world("web_echo"), Some(true), "the entry's grant");
    assert_eq!(open_world("counter_increment"), Some(false));
    let r = mcp.call(2, "counter_increment", json!({"amount": 1}));
    assert_eq!(r["structuredContent"], json!({"value": 1}));
    let r = mcp.call(3, "web_echo", json!({"u": 1}));
    assert_eq!(r["structuredContent"], json!({"u": 1}));
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn bad_starts_are_one_line_and_a_documented_code() {
    let named = tick("named.py");
    // Two tools that map to the same MCP name.
    let out = tickbox(&["mcp", "--", "python3", &named, "x y", "x_y"]);
    out.expect(2, "tool name clash: `x_y`");
    // A name MCP cannot take.
    let long = "n".repeat(65);
    tickbox(&["mcp", "--", "python3", &named, &long]).expect(2, "at most 64");
    // No Tick, a missing config, both at once.
    tickbox(&["mcp"]).expect(2, "no Tick given");
    tickbox(&["mcp", "--config", "/nonexistent/ticks.toml"]).expect(2, "cannot read the config");
    tickbox(&["mcp", "--config", "x.toml", &named]).expect(2, "give no TICK");
    // A Tick that fails initialization: exit 3, before any MCP traffic.
    let out = tickbox(&with_command(&["mcp"], &faulty("protocol2")));
    out.expect(3, "unsupported Tick protocol version 2");
    assert_eq!(out.stdout, "", "nothing on stdout");
    // The client leaves at once: a clean exit.
    let out = tickbox(&with_command(&["mcp"], &faulty("ok")));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "");
}

#[test]
fn stdout_carries_only_mcp_frames() {
    use std::io::{BufRead, BufReader, Write};
    // Debug logging on, and a Tick that draws on its terminal: none of it
    // may reach stdout.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
        .args(["-vv", "mcp", "--", "python3", &tick("counter.py")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let frames = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",
               "capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"increment","arguments":{"amount":1}}}),
        json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"tick_screen"}}),
    ];
    for f in &frames {
        writeln!(stdin, "{f}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answered = Vec::new();
    let mut lines = stdout.lines();
    while answered.len() < 4 {
        let line = lines
            .next()
            .expect("stdout ended before every answer")
            .unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a stdout line that is not JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if let Some(id) = v["id"].as_u64() {
            answered.push(id);
        }
    }
    // Requests are served concurrently: answers come in any order.
    answered.sort();
    assert_eq!(answered, [1, 2, 3, 4]);
    drop(stdin);
    for line in lines {
        let line = line.unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a stdout line that is not JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("DEBUG"),
        "the logs went to stderr: {stderr}"
    );
}
