//! A Tick that reports what it reads from its clocks and random sources, so
//! tests can tell virtual time and seeded randomness from real ones.
//!
//! Tool `now` (query): `wall_secs`/`wall_nanos` (wall clock since the Unix
//! epoch), `mono_ns` (monotonic time since the Tick started), `random` (16
//! bytes of `wasi:random/random`, hex) and `hash` (std's `RandomState`,
//! seeded from the host).
//!
//! Tool `nap` (`{"seconds": N}`): sleeps N seconds inside the call (std's
//! sleep: a monotonic-clock timer and `pollable.block`), then returns
//! `slept_ns`, the monotonic time that passed.
//!
//! Tool `files` (`{"dir": "/data"}`): its `TICKLOOP_INSTANCE_ID`, then
//! writes `<dir>/f` and reads back the file's and the directory's
//! timestamps (`stat`), then sets the file's modification time to "now"
//! and reads it again, then creates eight more files in a fixed order that
//! is not the names' order and lists the directory (`names`, as read): what
//! a guest can learn about the host from its environment and its files.
//!
//! It waits for input in `wasi:io/poll` (not a blocking read), like the SDK
//! does, so a host can see when it is idle.

use serde_json::{json, Value};
use std::hash::BuildHasher;
use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn descriptor() -> Value {
    let obj = json!({"type": "object"});
    json!({"protocol": 3, "kind": "tickbox.clockwork", "title": "Clockwork",
           "description": "Reports its clocks and random bytes.", "revision": "1",
           "tools": [
               {"name": "now", "description": "Read the clocks and random sources.", "input_schema": obj, "mutates": false},
               {"name": "files", "description": "Report the instance id and file timestamps.", "input_schema": {"type": "object", "properties": {"dir": {"type": "string"}}}, "mutates": true},
               {"name": "nap", "description": "Sleep inside the call.", "input_schema": {"type": "object", "properties": {"seconds": {"type": "integer", "minimum": 0, "maximum": 3600}}}, "mutates": false}]})
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
fn random_hex() -> String {
    wasip2::random::random::get_random_bytes(16)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
fn random_hex() -> String {
    String::new()
}

/// Reads some stdin bytes, waiting in `wasi:io/poll`; empty at the end.
#[cfg(all(target_os = "wasi", target_env = "p2"))]
fn read_some(stdin: &wasip2::io::streams::InputStream) -> Vec<u8> {
    let p = stdin.subscribe();
    wasip2::io::poll::poll(&[&p]);
    drop(p);
    stdin.read(64 * 1024).unwrap_or_default()
}

fn main() {
    let start = Instant::now();
    eprint!("clockwork ready\r\n");
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    let stdin = wasip2::cli::stdin::get_stdin();
    let mut pending: Vec<u8> = Vec::new();
    loop {
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        let chunk = read_some(&stdin);
        #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
        let chunk = {
            use std::io::Read;
            let mut b = vec![0u8; 64 * 1024];
            let n = std::io::stdin().read(&mut b).unwrap_or(0);
            b.truncate(n);
            b
        };
        if chunk.is_empty() {
            return;
        }
        pending.extend(chunk);
        while let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            answer(&line, start);
        }
    }
}

fn answer(line: &[u8], start: Instant) {
    let Ok(req) = serde_json::from_slice::<Value>(line) else { return };
    let Some(id) = req.get("id").and_then(Value::as_u64) else { return };
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    let result = match req.get("method").and_then(Value::as_str).unwrap_or("") {
        "tick/describe" => descriptor(),
        "tick/read" => json!({"seq": 0, "data": {}}),
        "tick/call" => match params["tool"].as_str().unwrap_or("") {
            "now" => {
                let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                json!({
                    "wall_secs": wall.as_secs(),
                    "wall_nanos": wall.subsec_nanos(),
                    "mono_ns": start.elapsed().as_nanos() as u64,
                    "random": random_hex(),
                    "hash": std::collections::hash_map::RandomState::new().hash_one(1u8),
                })
            }
            "files" => files(params["args"]["dir"].as_str().unwrap_or("/data")),
            "nap" => {
                let secs = params["args"]["seconds"].as_u64().unwrap_or(0).min(3600);
                let t0 = Instant::now();
                std::thread::sleep(std::time::Duration::from_secs(secs));
                json!({"slept_ns": t0.elapsed().as_nanos() as u64})
            }
            _ => json!(null),
        },
        _ => json!(null),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", json!({"jsonrpc": "2.0", "id": id, "result": result}));
    let _ = out.flush();
}

/// A file time as seconds and nanoseconds since the Unix epoch.
fn time(t: std::io::Result<SystemTime>) -> Value {
    match t.map(|t| t.duration_since(UNIX_EPOCH)) {
        Ok(Ok(d)) => json!([d.as_secs(), d.subsec_nanos()]),
        Ok(Err(_)) => json!("before the epoch"),
        Err(e) => json!(e.to_string()),
    }
}

fn stat(path: &str) -> Value {
    match std::fs::metadata(path) {
        Ok(m) => json!({"modified": time(m.modified()), "accessed": time(m.accessed()), "len": m.len()}),
        Err(e) => json!(e.to_string()),
    }
}

/// Creates eight files in an order that is neither the names' order nor
/// its reverse, then lists `dir` in the order the host gave the entries.
fn names(dir: &str) -> Value {
    for name in ["m", "c", "x", "a", "q", "h", "z", "e"] {
        if let Err(e) = std::fs::write(format!("{dir}/{name}"), b"") {
            return json!(e.to_string());
        }
    }
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()).unwrap_or_else(|e| e.to_string()))
            .collect(),
        Err(e) => json!(e.to_string()),
    }
}

fn files(dir: &str) -> Value {
    let file = format!("{dir}/f");
    let written = std::fs::write(&file, b"tick").map_err(|e| e.to_string()).err();
    let before = stat(&file);
    let set = std::fs::File::options()
        .write(true)
        .open(&file)
        .and_then(|f| f.set_modified(SystemTime::now()))
        .map_err(|e| e.to_string())
        .err();
    json!({
        "instance": std::env::var("TICKLOOP_INSTANCE_ID").ok(),
        "write_error": written,
        "file": before,
        "dir": stat(dir),
        "set_error": set,
        "after_set": stat(&file),
        "names": names(dir),
    })
}
