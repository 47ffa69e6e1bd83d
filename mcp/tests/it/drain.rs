//! The drain, started by the `stop` future given to `http::serve` (the
//! CLI resolves it on SIGTERM or SIGINT): a call in flight is answered
//! while readiness says "draining", a new session and a new request are
//! refused, and `serve` returns once the call is done; the drain timeout
//! cuts off a call that does not end. Two hosts behind a real HAProxy
//! keep each MCP session on its host while the other is drained.

use crate::server::HttpServer;
use crate::{shifty, wasm, PATIENCE};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tickbox_mcp::http::{Drained, HttpOptions};
use tickbox_mcp::Grants;
use tickbox_test_support::mcp_clients::{clients_dir, counter_wasm, python};
use tickbox_test_support::mcp_http::{
    assert_cut_off, body_of, call_until, echo_raw, finish_call, initialize_http, probe, status_of,
    try_initialize, wait_until_draining, wait_until_started,
};
use tickbox_test_support::registry::free_port;
use tickbox_test_support::{eventually, root, TempDir};

/// The facade over HTTP on shifty, which logs each `sleep` call it starts
/// to `log`, with this drain timeout.
fn server(log: &Path, drain_timeout: Duration) -> HttpServer {
    HttpServer::start_with(
        shifty(&[("SHIFTY_LOG", log.to_str().unwrap())]),
        |o: &mut HttpOptions| o.drain_timeout = drain_timeout,
    )
}

#[test]
fn a_drain_answers_a_call_in_flight_and_refuses_new_work() {
    let t = TempDir::new("drain");
    let (log, gate) = (t.path("shifty.log"), t.path("gate"));
    let mut server = server(&log, tickbox_mcp::http::DRAIN_TIMEOUT);
    // Before the drain (the control): ready, and a session opens.
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 200, "{text}");
    let session = initialize_http(&server, &[]);
    assert_eq!(echo_raw(&server, &session).0, 200, "a call works before");
    let call = call_until(&server, &session, &gate);
    wait_until_started(&log);

    server.drain();
    let (_, ready) = wait_until_draining(&server);
    assert!(
        body_of(&ready).ends_with("not ready: draining\n"),
        "{ready}"
    );
    assert_eq!(probe(&server, "/healthz").0, 200, "alive while draining");
    // A new session: refused, with one line saying why.
    let (status, text) = try_initialize(&server);
    assert_eq!(status, 503, "{text}");
    let why = body_of(&text);
    assert!(why.starts_with("draining: "), "{why}");
    assert_eq!(why.lines().count(), 1, "{why:?}");
    assert!(why.contains("no new MCP sessions"), "{why}");
    // A new call of the open session: refused too (the host is leaving).
    let (status, text) = echo_raw(&server, &session);
    assert_eq!(status, 503, "{text}");
    assert!(body_of(&text).contains("no new requests"), "{text}");
    assert!(!server.has_exited(), "the call in flight holds the server");

    // The call ends: it is answered, and the server returns.
    finish_call(&gate, call);
    assert_eq!(server.wait_exit(), Drained::Finished);
}

#[test]
fn an_open_listen_stream_does_not_hold_a_drain() {
    let t = TempDir::new("drain-listen");
    let mut server = server(&t.path("shifty.log"), Duration::from_secs(120));
    // A 2026-07-28 `subscriptions/listen`: a POST whose answer streams
    // until the client cancels it.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
        "params": {"_meta": meta, "notifications": {"toolsListChanged": true}}})
    .to_string();
    let mut listen = TcpStream::connect(&server.addr).unwrap();
    let head = tickbox_test_support::mcp_http::post_head(&server, None, body.len()).replacen(
        "\r\n\r\n",
        "\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\r\n",
        1,
    );
    listen
        .write_all(format!("{head}{body}").as_bytes())
        .unwrap();
    // The stream's head says it is open.
    let mut seen = [0u8; 512];
    listen.set_read_timeout(Some(PATIENCE)).unwrap();
    let n = listen.read(&mut seen).unwrap();
    let seen = String::from_utf8_lossy(&seen[..n]);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    // The drain finishes without waiting out its bound (120 s): the
    // control, a call in flight, holds it (the tests above).
    server.drain();
    assert_eq!(server.wait_exit(), Drained::Finished);
}

#[test]
fn a_call_past_the_drain_timeout_is_cut_off() {
    let t = TempDir::new("drain-timeout");
    let (log, gate) = (t.path("shifty.log"), t.path("never"));
    let mut server = server(&log, Duration::from_secs(2));
    let session = initialize_http(&server, &[]);
    let call = call_until(&server, &session, &gate);
    wait_until_started(&log);
    let started = Instant::now();
    server.drain();
    wait_until_draining(&server);
    assert_eq!(server.wait_exit(), Drained::TimedOut { in_flight: 1 });
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "the drain waited its bound: {:?}",
        started.elapsed()
    );
    assert_cut_off(call);
}

/// The documented HAProxy config (`docs/deploy/haproxy.cfg`), run with its
/// addresses replaced by these ports; killed on drop.
struct Haproxy {
    child: std::process::Child,
    port: u16,
}

impl Haproxy {
    fn start(dir: &TempDir, a: &str, b: &str) -> Haproxy {
        let documented = std::fs::read_to_string(root().join("docs/deploy/haproxy.cfg"))
            .expect("docs/deploy/haproxy.cfg");
        for placeholder in ["127.0.0.1:8700", "127.0.0.1:8701", "127.0.0.1:8702"] {
            assert!(
                documented.contains(placeholder),
                "{placeholder} in the config"
            );
        }
        // A port taken between choosing and binding makes it exit: try another.
        for _ in 0..5 {
            let port = free_port();
            let config = dir.path("haproxy.cfg");
            std::fs::write(
                &config,
                documented
                    .replace("127.0.0.1:8700", &format!("127.0.0.1:{port}"))
                    .replace("127.0.0.1:8701", a)
                    .replace("127.0.0.1:8702", b),
            )
            .unwrap();
            // Debian installs it in /usr/sbin, which a non-root PATH may lack.
            let program = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
                .into_iter()
                .find(|p| std::path::Path::new(p).exists())
                .unwrap_or("haproxy");
            let mut child = std::process::Command::new(program)
                .args(["-db", "-f"])
                .arg(&config)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(dir.path("haproxy.log")).unwrap())
                .spawn()
                .expect("haproxy (Debian package haproxy; tests/setup.sh installs it)");
            let mut exited = || child.try_wait().ok().flatten().is_some();
            let up = eventually(PATIENCE, || {
                exited() || TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            if up && !exited() {
                return Haproxy { child, port };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "haproxy did not start: {}",
            std::fs::read_to_string(dir.path("haproxy.log")).unwrap_or_default()
        );
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `host` knows `session`: a `ping` on it, straight to the host.
fn knows(host: &HttpServer, session: &str) -> bool {
    let (status, _, _) = host.post(
        "/mcp",
        &[("Mcp-Session-Id", session)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    );
    assert!(status == 200 || status == 404, "ping: {status}");
    status == 200
}

/// A raw `initialize` through the balancer at `port`: the session id.
fn initialize_through(port: u16, token: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "through-haproxy", "version": "0"}}})
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\n\
         Authorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to haproxy");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(format!("{head}{body}").as_bytes()).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got).to_string();
    assert_eq!(status_of(&text), 200, "{text}");
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id: {text}"))
}

/// The counter's value on `host`, read over a session of its own.
fn counter_on(host: &HttpServer) -> i64 {
    let session = initialize_http(host, &[]);
    let (status, _, m) = host.post(
        "/mcp",
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "tick_state", "arguments": {}}}),
    );
    assert_eq!(status, 200, "{m:?}");
    let answer = m.iter().find(|m| m["id"] == 2).expect("an answer");
    answer["result"]["structuredContent"]["data"]["value"]
        .as_i64()
        .unwrap_or_else(|| panic!("no value: {answer}"))
}

/// Two facades serving the counter over HTTP behind a real HAProxy,
/// configured as documented (`docs/deploy/haproxy.cfg`): new sessions are
/// spread over both (the control: without stickiness a session's requests
/// would land on a host that does not know it), and a real MCP client
/// (the Python SDK) keeps its session and its counter's state, 1, 2, 3, …,
/// while the other host is drained and stops.
#[test]
fn haproxy_keeps_each_session_on_its_host_while_the_other_drains() {
    let t = TempDir::new("drain-haproxy");
    // One token for both hosts, as a deployment gives it.
    let token = "deployment-token-0123456789abcdef";
    let counter = counter_wasm();
    let host = || {
        HttpServer::start_with(wasm(&counter, &Grants::default()), |o: &mut HttpOptions| {
            o.token = token.to_string()
        })
    };
    let mut hosts = [host(), host()];
    let addr = |h: &HttpServer| h.addr.trim_start_matches("http://").to_string();
    let lb = Haproxy::start(&t, &addr(&hosts[0]), &addr(&hosts[1]));

    // The control: new sessions go to both hosts (round robin, once
    // HAProxy's checks have found both ready).
    let mut on = [0, 0];
    let spread = eventually(PATIENCE, || {
        let session = initialize_through(lb.port, token);
        for (i, h) in hosts.iter().enumerate() {
            if knows(h, &session) {
                on[i] += 1;
            }
        }
        on[0] > 0 && on[1] > 0
    });
    assert!(spread, "new sessions did not reach both hosts: {on:?}");

    let mut client = std::process::Command::new(python())
        .arg("sticky_client.py")
        .arg(format!("http://127.0.0.1:{}/mcp?token={token}", lb.port))
        .arg("4")
        .current_dir(clients_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the Python MCP client");
    let (tx, lines) = std::sync::mpsc::channel();
    let stdout = client.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let stderr = client.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::BufReader::new(stderr).read_to_string(&mut text);
        text
    });
    let mut values = Vec::new();
    let next = |until: &str, values: &mut Vec<i64>| loop {
        let line = lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("the client ended, or said nothing for {PATIENCE:?}"));
        if line == until {
            return;
        }
        let v = line
            .strip_prefix("value ")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("unexpected client line {line:?}"));
        values.push(v);
    };
    next("paused", &mut values);
    assert_eq!(values, [1, 2, 3, 4], "one counter, one host");

    // Which host holds the session: the one whose counter moved.
    let counts = [counter_on(&hosts[0]), counter_on(&hosts[1])];
    let holder = match counts {
        [4, 0] => 0,
        [0, 4] => 1,
        other => panic!("the calls were spread over both hosts: {other:?}"),
    };
    let other = 1 - holder;
    hosts[other].drain();
    assert_eq!(hosts[other].wait_exit(), Drained::Finished);

    // The session goes on where it was: 5, 6, 7, 8.
    client.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    next("done", &mut values);
    let status = client.wait().unwrap();
    let errors = errors.join().unwrap();
    assert!(status.success(), "the client failed: {errors}");
    assert_eq!(values, [1, 2, 3, 4, 5, 6, 7, 8], "{errors}");
    // A new session still gets in, on the host that is left.
    let session = initialize_through(lb.port, token);
    assert!(knows(&hosts[holder], &session));
}
