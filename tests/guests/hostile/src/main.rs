//! A hostile but protocol-conforming Tick for the sandbox tests.
//!
//! Every tool tries one thing a sandbox must stop (or, for the positive
//! controls, allow) and reports what happened as its result:
//! `{"ok": true, ...}` or `{"ok": false, "error": "..."}`. Tools that break
//! the guest itself (memory, recursion, floods, spinning) never answer.
//!
//! With `FAULT=<mode>` in its environment it also breaks one protocol rule,
//! so the host-core misbehaviour tests run against a wasm Tick too.

use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod term {
    wit_bindgen::generate!({
        world: "tick-terminal",
        path: "../../../wit",
        with: {
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
        },
    });
    pub use tickbox::terminal::terminal::*;
}

fn draw(text: &str) {
    draw_bytes(text.as_bytes());
}

/// One draw: the terminal interface in a component, stderr otherwise.
fn draw_bytes(bytes: &[u8]) {
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    term::draw(bytes);
    #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
    {
        let _ = std::io::stderr().lock().write_all(bytes);
    }
}

/// Everything a terminal program can send to take over a person's
/// terminal: titles, clipboard, hyperlinks, device strings, queries, mode
/// switches, a C1 CSI, a bidi override. A view must pass none of it on.
const TAKEOVER: &[u8] = b"\x1b]0;pwned-title\x07\x1b]2;pwned-title2\x1b\\\x1b]52;c;cm0gLXJmIH4=\x07\
\x1b]8;;http://evil.example/\x1b\\hyperlink\x1b]8;;\x1b\\ \x1bPq#0;2;0;0;0\x1b\\\x1b_apc\x1b\\\x1b^pm\x1b\\\
\x1b[c\x1b[>c\x1b[6n\x1bP$qm\x1b\\\x1b]52;c;?\x07\x1b]11;?\x07\x1b[?1000h\x1b[?1003h\x1b[?1006h\x1b[?2004h\x1b[>1u\x1b=\x1b[?1h\
\x1b[?1049h\x07\xc2\x9b31m\x1b[1;32mTAKEOVER-DONE\x1b[0m \xe2\x80\xaeexe.txt\r\n";

thread_local! {
    /// Files `open_many` was told to hold past its call.
    static HELD: std::cell::RefCell<Vec<std::fs::File>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn fault() -> String {
    std::env::var("FAULT").unwrap_or_default()
}

fn send(v: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn raw(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

fn tool(name: &str, mutates: bool) -> Value {
    json!({"name": name, "description": format!("Try: {name}."), "input_schema": {"type": "object"}, "mutates": mutates})
}

fn descriptor() -> Value {
    let names = [
        "echo", "read_file", "list_dir", "connect", "lookup", "env", "grow", "spin", "recurse", "stderr_flood",
        "stdout_flood", "term", "read_keys", "misbehave", "draw_takeover", "draw_flood", "draw_big",
        "open_many", "symlink", "stat", "refuse_loop",
    ];
    let mut tools: Vec<Value> = names.iter().map(|n| tool(n, false)).collect();
    tools.push(tool("write_file", true));
    tools.push(tool("udp_send", true));
    tools.push(tool("create_many", true));
    tools.push(tool("rename", true));
    tools.push(tool("hard_link", true));
    json!({"protocol": if fault() == "protocol2" { 2 } else { 3 }, "kind": "test.hostile", "title": "Hostile",
           "description": "Tries to escape its sandbox, one tool at a time.", "revision": "1", "tools": tools})
}

fn outcome<T: Into<Value>>(r: std::io::Result<T>) -> Value {
    match r {
        Ok(v) => json!({"ok": true, "value": v.into()}),
        Err(e) => json!({"ok": false, "error": e.to_string()}),
    }
}

/// An I/O failure as the guest sees it: the message, its kind and the
/// raw error number (wasi-libc's), so tests can tell `quota` from
/// `cross-device` from anything else.
fn failure(e: &std::io::Error) -> Value {
    json!({"ok": false, "error": e.to_string(), "kind": format!("{:?}", e.kind()), "errno": e.raw_os_error()})
}

fn done(r: std::io::Result<()>) -> Value {
    match r {
        Ok(()) => json!({"ok": true}),
        Err(e) => failure(&e),
    }
}

fn arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

#[inline(never)]
fn recurse(n: u64) -> u64 {
    let pad = [n; 64];
    if n == 0 {
        return 0;
    }
    std::hint::black_box(&pad);
    1 + recurse(n - 1) + std::hint::black_box(pad[3]) * 0
}

fn call(tool: &str, args: &Value) -> Value {
    match tool {
        "echo" => args.clone(),
        "read_file" => outcome(std::fs::read_to_string(arg(args, "path"))),
        "write_file" => outcome(std::fs::write(arg(args, "path"), arg(args, "text")).map(|_| "written")),
        "list_dir" => outcome(std::fs::read_dir(arg(args, "path")).map(|d| {
            d.filter_map(|e| e.ok()).map(|e| Value::from(e.file_name().to_string_lossy().into_owned())).collect::<Vec<_>>()
        })),
        "connect" => outcome(std::net::TcpStream::connect(arg(args, "addr")).and_then(|mut s| {
            let mut buf = String::new();
            s.read_to_string(&mut buf)?;
            Ok(buf)
        })),
        "udp_send" => outcome(
            std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"hello", arg(args, "addr")).map(|n| n as u64)),
        ),
        "lookup" => outcome(std::net::ToSocketAddrs::to_socket_addrs(&(arg(args, "name"), 80)).map(|a| {
            a.map(|x| Value::from(x.ip().to_string())).collect::<Vec<_>>()
        })),
        "env" => json!({"value": std::env::var(arg(args, "name")).ok(),
                         "all": std::env::vars().map(|(k, _)| k).collect::<Vec<_>>()}),
        "grow" => {
            let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(0) as usize;
            let mut v: Vec<u8> = Vec::new();
            v.resize(mb << 20, 1);
            json!({"ok": true, "len": std::hint::black_box(&v).len()})
        }
        "spin" => {
            let mut i: u64 = 0;
            loop {
                i = std::hint::black_box(i.wrapping_add(1));
                if i % (1 << 24) == 0 {
                    eprint!(".");
                }
            }
        }
        "recurse" => json!({"depth": recurse(u64::MAX / 2)}),
        "open_many" => {
            // Holds every handle it gets until the call ends, or with
            // `"hold": true` for the rest of its life (later calls then run
            // at the cap). `errno` is the raw error number of the failure.
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(1);
            let mut held = Vec::new();
            let mut error = None;
            let mut errno = None;
            for _ in 0..n {
                match std::fs::File::open(arg(args, "path")) {
                    Ok(f) => held.push(f),
                    Err(e) => {
                        error = Some(e.to_string());
                        errno = e.raw_os_error();
                        break;
                    }
                }
            }
            let opened = held.len();
            if args.get("hold").and_then(Value::as_bool) == Some(true) {
                HELD.with(|h| h.borrow_mut().extend(held));
            }
            json!({"ok": error.is_none(), "opened": opened, "error": error, "errno": errno})
        }
        "refuse_loop" => {
            // Tries `n` times what its sandbox refuses (the audit's flood):
            // opening `path`, or with `addr` connecting there; counts the
            // refusals.
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(1);
            let addr = arg(args, "addr");
            let mut refused = 0u64;
            for _ in 0..n {
                let tried = if addr.is_empty() {
                    std::fs::File::open(arg(args, "path")).map(drop)
                } else {
                    std::net::TcpStream::connect(addr).map(drop)
                };
                refused += u64::from(tried.is_err());
            }
            json!({"ok": true, "tries": n, "refused": refused})
        }
        "create_many" => {
            // Creates `n` empty entries `<path>/e0`, `e1`, ... (files, or
            // directories with `"dirs": true`) until one fails.
            let n = args.get("n").and_then(Value::as_u64).unwrap_or(1);
            let dirs = args.get("dirs").and_then(Value::as_bool) == Some(true);
            let mut created = 0u64;
            for i in 0..n {
                let p = format!("{}/e{i}", arg(args, "path"));
                let r = if dirs { std::fs::create_dir(&p) } else { std::fs::File::create(&p).map(drop) };
                if let Err(e) = r {
                    let mut v = failure(&e);
                    v["created"] = created.into();
                    return v;
                }
                created += 1;
            }
            json!({"ok": true, "created": created})
        }
        "rename" => done(std::fs::rename(arg(args, "from"), arg(args, "to"))),
        "hard_link" => done(std::fs::hard_link(arg(args, "from"), arg(args, "to"))),
        "stat" => match std::fs::metadata(arg(args, "path")) {
            Ok(m) => {
                let secs = |t: std::io::Result<std::time::SystemTime>| {
                    t.ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_secs())
                };
                json!({"ok": true, "len": m.len(), "modified": secs(m.modified()), "accessed": secs(m.accessed())})
            }
            Err(e) => failure(&e),
        },
        "stderr_flood" => {
            let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(1) as usize;
            let chunk = vec![b'x'; 1 << 20];
            let mut err = std::io::stderr().lock();
            for _ in 0..mb {
                let _ = err.write_all(&chunk);
            }
            json!({"ok": true, "mb": mb})
        }
        "draw_takeover" => {
            draw_bytes(TAKEOVER);
            json!({"ok": true})
        }
        "draw_flood" => {
            // Full resets, the most expensive input for a screen model.
            let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(1) as usize;
            let chunk = b"\x1bc".repeat(32 * 1024);
            for _ in 0..mb * 16 {
                draw_bytes(&chunk);
            }
            draw("FLOOD-DONE\r\n");
            json!({"ok": true, "mb": mb})
        }
        "draw_big" => {
            // One single draw of `mb` MiB, ending with a marker.
            let mb = args.get("mb").and_then(Value::as_u64).unwrap_or(1) as usize;
            let mut big = b"0123456789abcdef".repeat(mb << 16);
            big.extend_from_slice(b"\x1b[2J\x1b[HBIG-DONE\r\n");
            draw_bytes(&big);
            json!({"ok": true, "bytes": big.len()})
        }
        "stdout_flood" => {
            let chunk = vec![b'y'; 1 << 20];
            let mut out = std::io::stdout().lock();
            loop {
                if out.write_all(&chunk).is_err() {
                    return json!({"ok": false});
                }
            }
        }
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        "symlink" => {
            // In the first preopen: a link named `link` pointing at `target`.
            let dirs = wasip2::filesystem::preopens::get_directories();
            match dirs.first() {
                None => json!({"ok": false, "error": "no preopen"}),
                Some((dir, _)) => match dir.symlink_at(arg(args, "target"), "link") {
                    Ok(()) => json!({"ok": true}),
                    Err(e) => json!({"ok": false, "error": format!("{e:?}")}),
                },
            }
        }
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        "term" => {
            let s = term::get_size();
            json!({"cols": s.cols, "rows": s.rows, "generation": s.generation})
        }
        #[cfg(all(target_os = "wasi", target_env = "p2"))]
        "read_keys" => {
            let keys = term::keys();
            let mut got = Vec::new();
            for _ in 0..200 {
                match keys.read(64) {
                    Ok(b) if !b.is_empty() => got.extend(b),
                    Ok(_) if !got.is_empty() => break,
                    Ok(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                    Err(_) => break,
                }
            }
            json!({"keys": String::from_utf8_lossy(&got)})
        }
        _ => json!({"ok": false, "error": "unsupported here"}),
    }
}

fn main() {
    draw("hostile ready\r\n");
    let mut seq = 0u64;
    let mode = fault();
    if mode == "stray_stdout" {
        raw("hello from a confused guest\n");
    }
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(req) = serde_json::from_str::<Value>(&line) else { continue };
        let (Some(id), Some(method)) = (req.get("id").cloned(), req.get("method").and_then(Value::as_str)) else {
            continue;
        };
        let params = req.get("params").cloned().unwrap_or(json!({}));
        match method {
            "tick/describe" => match mode.as_str() {
                "invalid_json" => raw("{not json\n"),
                "jsonrpc_1" => send(json!({"jsonrpc": "1.0", "id": id, "result": descriptor()})),
                "null_id" => send(json!({"jsonrpc": "2.0", "id": null, "result": descriptor()})),
                "no_newline" => {
                    raw(&json!({"jsonrpc": "2.0", "id": id, "result": descriptor()}).to_string());
                    std::process::exit(0);
                }
                _ => send(json!({"jsonrpc": "2.0", "id": id, "result": descriptor()})),
            },
            "tick/read" => {
                match mode.as_str() {
                    "update_null" => send(json!({"jsonrpc": "2.0", "method": "tick/update", "params": {"seq": 1, "data": null}})),
                    "update_seq" => {
                        for _ in 0..2 {
                            send(json!({"jsonrpc": "2.0", "method": "tick/update", "params": {"seq": 4, "data": {}}}));
                        }
                    }
                    _ => {}
                }
                send(json!({"jsonrpc": "2.0", "id": id, "result": {"seq": seq, "data": {"calls": seq}}}))
            }
            "tick/call" => {
                let tool = params.get("tool").and_then(Value::as_str).unwrap_or("");
                let args = params.get("args").cloned().unwrap_or(json!({}));
                if tool == "misbehave" {
                    match mode.as_str() {
                        "both" => send(json!({"jsonrpc": "2.0", "id": id, "result": 1, "error": {"code": -32000, "message": "x"}})),
                        "exit_mid_call" => std::process::exit(7),
                        "unknown_id" => {
                            send(json!({"jsonrpc": "2.0", "id": 9999, "result": "stale"}));
                            send(json!({"jsonrpc": "2.0", "id": id, "result": {"fine": true}}));
                        }
                        "read_floor" => {
                            send(json!({"jsonrpc": "2.0", "method": "tick/update", "params": {"seq": 5, "data": {}}}));
                            send(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                        }
                        _ => send(json!({"jsonrpc": "2.0", "id": id, "result": {"mode": mode}})),
                    }
                    continue;
                }
                let result = call(tool, &args);
                if tool != "echo" && tool != "term" && tool != "read_keys" && tool != "env" {
                    seq += 1;
                    send(json!({"jsonrpc": "2.0", "method": "tick/update", "params": {"seq": seq, "data": {"calls": seq}}}));
                }
                send(json!({"jsonrpc": "2.0", "id": id, "result": result}));
            }
            _ => send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown method"}})),
        }
    }
}
