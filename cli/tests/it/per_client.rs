//! `instances = "per-client"` (issue 42) as the binary reads it: a ticks
//! file's per-client counter served by `tickbox mcp --http` with a clients
//! file, whose named client's token file others may read is refused with
//! one line and exit 2 before anything starts. What a per-client Tick does
//! for its clients (its instances, the caps, idle and expired instances,
//! named clients, stdio, the metrics) is tested in this process in
//! tickbox-mcp's `tests/it/per_client.rs`.

use crate::mcp_clients::counter_wasm;
use crate::mcp_wire::{initialize_http, HttpServer};
use crate::util::*;
use serde_json::json;
use std::time::Duration;
use tickbox_test_support::mcp_http::call_tool;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(120);

/// A clients file naming `alice` and `bob` in `dir`, their tokens in
/// files of mode 0600 (bob's of `bob_mode`).
fn clients_file(dir: &TempDir, bob_mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let tokens = ["alice-token-0123456789", "bob-token-0123456789ab"];
    for (name, token, mode) in [("alice", tokens[0], 0o600), ("bob", tokens[1], bob_mode)] {
        let path = dir.path(&format!("{name}.token"));
        std::fs::write(&path, token).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    std::fs::write(
        dir.path("clients.toml"),
        "alice = \"alice.token\"\nbob = \"bob.token\"\n",
    )
    .unwrap();
}

#[test]
fn a_named_clients_token_file_others_may_read_is_refused() {
    let dir = TempDir::new("named-mode");
    clients_file(&dir, 0o644);
    let config = dir.path("ticks.toml");
    let entry = "instances = \"per-client\"";
    let text = format!(
        "[[tick]]\nname = \"counter\"\npath = \"{}\"\n{entry}\n",
        counter_wasm()
    );
    std::fs::write(&config, text).unwrap();
    let config = config.display().to_string();
    let clients = dir.path("clients.toml").display().to_string();
    let flags = [
        "--http",
        "127.0.0.1:0",
        "--config",
        &config,
        "--clients",
        &clients,
    ];
    let args: Vec<&str> = std::iter::once("mcp").chain(flags).collect();
    let r = tickbox_within(&args, &[], PATIENCE);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let line = r.stderr.trim();
    assert_eq!(line.lines().count(), 1, "one line: {line}");
    assert!(
        line.contains("the token file of client `bob`") && line.contains("chmod 600"),
        "{line}"
    );
    // Positive control: with bob's file private, the server serves.
    clients_file(&dir, 0o600);
    let cache = wasm_cache();
    let server = HttpServer::start_args(&flags, &[("TICKBOX_CACHE_DIR", cache.to_str().unwrap())]);
    let a = initialize_http(&server, &[]);
    let r = call_tool(&server, &a, 1, "increment", json!({"amount": 1}));
    assert_eq!(r["structuredContent"]["value"], 1, "{r}");
}
