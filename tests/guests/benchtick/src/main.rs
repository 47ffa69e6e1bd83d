//! A lean counter Tick for `tickbox-bench`: the same source is built as a
//! native binary and as a wasm32-wasip2 component, so the two backends are
//! compared on identical guest code.
//!
//! Tools: `get` (query), `increment` (mutates; emits an update), `hash`
//! (CPU-bound: FNV-1a over `mb` MiB), `flood` (emits `n` updates as fast as
//! it can, then answers).
//!
//! Answers are written like the guest SDK's: in wasm the frames answering
//! the requests of one read go out in one write, natively each at once
//! (`--batch` / `--per-reply` choose one way on both targets).

use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn descriptor() -> Value {
    let obj = json!({"type": "object"});
    json!({"protocol": 3, "kind": "tickbox.bench", "title": "Bench counter",
           "description": "A counter with a CPU-bound tool and an update flood.", "revision": "1",
           "tools": [
               {"name": "get", "description": "Read the value.", "input_schema": obj, "mutates": false},
               {"name": "increment", "description": "Add to the value.", "input_schema": obj, "mutates": true},
               {"name": "hash", "description": "Hash mb MiB.", "input_schema": obj, "mutates": false},
               {"name": "flood", "description": "Emit n updates.", "input_schema": obj, "mutates": true}]})
}

fn fnv(mb: usize) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i * 31 % 251) as u8;
    }
    let mut h: u64 = 0xcbf29ce484222325;
    for round in 0..mb {
        buf[0] = round as u8;
        for &b in &buf {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    h
}

fn main() {
    eprint!("bench counter ready\r\n");
    // As the guest SDK does: in wasm the answers to the requests of one
    // read go out in one write, once no further request is buffered;
    // natively each answer is written at once (holding answers back made
    // the native Tick slower). `--batch` and `--per-reply` choose either
    // on both targets (the bench's comparison).
    let args: Vec<String> = std::env::args().collect();
    let batch = if args.iter().any(|a| a == "--batch") {
        true
    } else if args.iter().any(|a| a == "--per-reply") {
        false
    } else {
        cfg!(target_os = "wasi")
    };
    let (mut value, mut seq) = (0i64, 0u64);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut line = String::new();
    loop {
        if !batch || input.buffer().is_empty() {
            let _ = out.flush();
        }
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(req) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(id) = req.get("id").and_then(Value::as_u64) else { continue };
        let method = req.get("method").and_then(Value::as_str).unwrap_or("");
        let params = req.get("params").cloned().unwrap_or(Value::Null);
        let result = match method {
            "tick/describe" => descriptor(),
            "tick/read" => json!({"seq": seq, "data": {"value": value}}),
            "tick/call" => {
                let args = &params["args"];
                match params["tool"].as_str().unwrap_or("") {
                    "get" => json!({"value": value}),
                    "increment" => {
                        value += args["amount"].as_i64().unwrap_or(1);
                        seq += 1;
                        let _ = writeln!(out, "{}", json!({"jsonrpc":"2.0","method":"tick/update","params":{"seq":seq,"data":{"value":value}}}));
                        json!({"value": value})
                    }
                    "hash" => json!({"hash": fnv(args["mb"].as_u64().unwrap_or(16) as usize)}),
                    "flood" => {
                        let n = args["n"].as_u64().unwrap_or(1000);
                        let mut w = std::io::BufWriter::with_capacity(64 * 1024, &mut out);
                        for _ in 0..n {
                            value += 1;
                            seq += 1;
                            let _ = writeln!(w, "{{\"jsonrpc\":\"2.0\",\"method\":\"tick/update\",\"params\":{{\"seq\":{seq},\"data\":{{\"value\":{value}}}}}}}");
                        }
                        let _ = w.flush();
                        drop(w);
                        json!({"sent": n})
                    }
                    _ => {
                        let _ = writeln!(out, "{}", json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":"unknown tool"}}));
                        continue;
                    }
                }
            }
            _ => {
                let _ = writeln!(out, "{}", json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"unknown method"}}));
                continue;
            }
        };
        let _ = writeln!(out, "{}", json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    let _ = out.flush();
}
