//! `tickbox mcp --http` drained by SIGTERM or SIGINT, through the wire: a
//! call in flight is answered while readiness says "draining", a new
//! session and a new request are refused, and the host exits 0 once the
//! call is done; the drain timeout cuts a call that does not end (130),
//! and a second signal stops at once (130).

use crate::mcp_http::{post_head, probe, raw, try_initialize};
use crate::mcp_wire::{initialize_http, HttpServer};
use crate::util::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Generous: the machine may be loaded.
const PATIENCE: Duration = Duration::from_secs(60);

/// `tickbox mcp --http` on shifty, which logs each `sleep` call it starts
/// to `log`.
fn server(log: &Path, extra: &[&str]) -> HttpServer {
    HttpServer::start_with(
        "127.0.0.1:0",
        extra,
        &[("SHIFTY_LOG", log.to_str().unwrap())],
    )
}

/// A `tools/call sleep` on `session` that stays in flight until the file
/// `until` exists, sent from a thread; joins to the whole response text
/// (empty when the connection closed without one).
fn call_until(server: &HttpServer, session: &str, until: &Path) -> JoinHandle<String> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"until": until.to_str().unwrap()}}})
    .to_string();
    let request = format!("{}{body}", post_head(server, Some(session), body.len()));
    let addr = server.addr.clone();
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE * 3)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        String::from_utf8_lossy(&got).to_string()
    })
}

/// The status of a raw response text (0 when there is none).
fn status_of(text: &str) -> u16 {
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Waits until the Tick has started a `sleep` call (logged by shifty).
fn wait_until_started(log: &Path) {
    assert!(
        eventually(PATIENCE, || std::fs::read_to_string(log)
            .is_ok_and(|t| t.contains("sleep"))),
        "the call never reached the Tick"
    );
}

/// Waits until `/readyz` says draining; the last answer.
fn wait_until_draining(server: &HttpServer) -> (u16, String) {
    let mut last = (0, String::new());
    let draining = eventually(PATIENCE, || {
        last = probe(server, "/readyz");
        last.0 == 503
    });
    assert!(draining, "{last:?}");
    last
}

/// The body of a raw response (after the head).
fn body_of(text: &str) -> &str {
    text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("")
}

/// A `tools/call echo` on `session` as a raw request: status and text.
fn echo_raw(server: &HttpServer, session: &str) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"late": true}}})
    .to_string();
    raw(
        server,
        &post_head(server, Some(session), body.len()),
        body.into_bytes(),
    )
}

/// The JSON-RPC messages of an SSE or JSON response text.
fn messages(text: &str) -> Vec<Value> {
    body_of(text)
        .lines()
        .filter_map(|l| l.strip_prefix("data:").or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v.is_object())
        .collect()
}

#[test]
fn sigterm_drains_a_call_in_flight_refuses_new_work_and_exits_0() {
    let t = TempDir::new("drain");
    let (log, gate) = (t.path("shifty.log"), t.path("gate"));
    let mut server = server(&log, &[]);
    // Before the signal (the control): ready, and a session opens.
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 200, "{text}");
    let session = initialize_http(&server, &[]);
    assert_eq!(echo_raw(&server, &session).0, 200, "a call works before");
    let call = call_until(&server, &session, &gate);
    wait_until_started(&log);

    server.signal(libc::SIGTERM);
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
    assert!(!server.has_exited(), "the call in flight holds the host");

    // The call ends: it is answered, and the host exits 0.
    std::fs::write(&gate, "").unwrap();
    let text = call.join().unwrap();
    assert_eq!(status_of(&text), 200, "{text}");
    let answer = messages(&text)
        .into_iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call in flight: {text}"));
    assert_eq!(
        answer["result"]["structuredContent"]["finished"], 1,
        "{answer}"
    );
    assert_eq!(server.wait_exit(), 0, "{:?}", server.stderr());
    let stderr = server.stderr().join("\n");
    assert!(stderr.contains("SIGTERM: draining"), "{stderr}");
    assert!(stderr.contains("drained after SIGTERM"), "{stderr}");
}

#[test]
fn a_call_past_the_drain_timeout_is_cut_off_with_exit_130() {
    let t = TempDir::new("drain-timeout");
    let (log, gate) = (t.path("shifty.log"), t.path("never"));
    let mut server = server(&log, &["--drain-timeout", "2"]);
    let session = initialize_http(&server, &[]);
    let call = call_until(&server, &session, &gate);
    wait_until_started(&log);
    let signalled = Instant::now();
    // SIGINT drains the same way.
    server.signal(libc::SIGINT);
    wait_until_draining(&server);
    assert_eq!(server.wait_exit(), 130, "{:?}", server.stderr());
    assert!(
        signalled.elapsed() >= Duration::from_secs(2),
        "the drain waited its bound: {:?}",
        signalled.elapsed()
    );
    let stderr = server.stderr().join("\n");
    assert!(
        stderr.contains("the drain timeout (2s, --drain-timeout) passed with 1 request(s) still in flight; they were cut off"),
        "{stderr}"
    );
    // The cut-off call got no answer.
    let text = call.join().unwrap();
    assert!(
        !messages(&text).iter().any(|m| m["id"] == 7),
        "an answer after the bound: {text}"
    );
}

#[test]
fn a_second_signal_while_draining_stops_at_once() {
    let t = TempDir::new("drain-twice");
    let (log, gate) = (t.path("shifty.log"), t.path("never"));
    let mut server = server(&log, &["--drain-timeout", "3600"]);
    let session = initialize_http(&server, &[]);
    let _call = call_until(&server, &session, &gate);
    wait_until_started(&log);
    server.signal(libc::SIGTERM);
    wait_until_draining(&server);
    // Still draining (the control for what the second signal does): the
    // call holds the host for up to an hour.
    assert!(!server.has_exited());
    server.signal(libc::SIGTERM);
    assert_eq!(server.wait_exit(), 130, "{:?}", server.stderr());
    let stderr = server.stderr().join("\n");
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");
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
            let port = crate::registry::free_port();
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

/// Two `tickbox mcp --http` hosts of the counter behind a real HAProxy,
/// configured as documented (`docs/deploy/haproxy.cfg`): new sessions are
/// spread over both (the control: without stickiness a session's requests
/// would land on a host that does not know it), and a real MCP client
/// (the Python SDK) keeps its session and its counter's state, 1, 2, 3, …,
/// while the other host is drained by SIGTERM and stops.
#[test]
fn haproxy_keeps_each_session_on_its_host_while_the_other_drains() {
    let t = TempDir::new("drain-haproxy");
    // One token for both hosts, as a deployment gives it.
    let token = "deployment-token-0123456789abcdef";
    let file = t.path("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let counter = crate::mcp_clients::counter_wasm();
    let cache = crate::mcp_clients::cache_dir();
    let host = || {
        let mut h = HttpServer::start_args(
            &[
                "--http",
                "127.0.0.1:0",
                "--token-file",
                file.to_str().unwrap(),
                &counter,
            ],
            &[("TICKBOX_CACHE_DIR", cache.to_str().unwrap())],
        );
        h.token = Some(token.to_string());
        h
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

    let mut client = std::process::Command::new(crate::mcp_clients::python())
        .arg("sticky_client.py")
        .arg(format!("http://127.0.0.1:{}/mcp?token={token}", lb.port))
        .arg("4")
        .current_dir(crate::mcp_clients::clients_dir())
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
    hosts[other].signal(libc::SIGTERM);
    assert_eq!(hosts[other].wait_exit(), 0, "{:?}", hosts[other].stderr());

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
