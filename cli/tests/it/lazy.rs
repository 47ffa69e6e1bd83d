//! `start = "on-first-use"` (issue 42) as the binary reads it: a ticks
//! file's counter starts with the host while its catalog is not cached
//! (the positive control), and from the next start on is listed from the
//! cache and started by its first call. What a lazy Tick does for its
//! clients (listings, first use, idle stop, a tampered or oversized
//! entry, a changed grant) is tested in this process in tickbox-mcp's
//! `tests/it/lazy.rs`.

use crate::mcp_clients::counter_wasm;
use crate::mcp_wire::{initialize_http, HttpServer, StartHttp};
use crate::util::*;
use serde_json::json;
use std::time::Duration;
use tickbox_test_support::eventually;
use tickbox_test_support::mcp_http::call_tool;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(120);

/// The audit's `start` lines in `file`, once there is one.
fn starts(file: &std::path::Path) -> Vec<serde_json::Value> {
    let read = || {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "start")
            .collect::<Vec<_>>()
    };
    eventually(PATIENCE, || !read().is_empty());
    read()
}

/// Now, as the audit's `ts` writes it (UTC, milliseconds), so the two
/// compare as text.
fn now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.%3NZ"])
        .output()
        .expect("date runs");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_ticks_file_entry_on_first_use_starts_lazily_once_its_catalog_is_cached() {
    let dir = TempDir::new("lazy-cli");
    let cache = dir.private_dir("cache");
    let config = dir.path("ticks.toml");
    let text = format!(
        "[[tick]]\nname = \"counter\"\npath = \"{}\"\nstart = \"on-first-use\"\n",
        counter_wasm()
    );
    std::fs::write(&config, text).unwrap();
    let config = config.display().to_string();
    let env = [("TICKBOX_CACHE_DIR", cache.to_str().unwrap())];
    // The first start has nothing cached (the control): the Tick starts
    // with the host, before any client came. The second is lazy: the Tick
    // starts only once the call was sent.
    for (run, lazy) in [false, true].into_iter().enumerate() {
        let audit = dir.path(&format!("audit-{run}.jsonl"));
        let audit_flag = audit.display().to_string();
        let flags = [
            "--http",
            "127.0.0.1:0",
            "--config",
            &config,
            "--audit",
            &audit_flag,
        ];
        let server = HttpServer::start_args(&flags, &env);
        let a = initialize_http(&server, &[]);
        let before = now();
        let r = call_tool(&server, &a, 1, "increment", json!({"amount": 2}));
        assert_eq!(r["structuredContent"]["value"], 2, "{r}");
        let started = starts(&audit);
        assert_eq!(started.len(), 1, "{started:?}");
        let at = started[0]["ts"].as_str().unwrap_or_default().to_string();
        let after_the_call = at >= before;
        let with_the_host = at <= before;
        assert!(
            if lazy { after_the_call } else { with_the_host },
            "lazy: {lazy}, started at {at}, the call sent after {before}"
        );
    }
}
