//! The HTTP door's walls, each attacked over raw TCP sockets next to a
//! client that still gets in: half-sent request heads, connection slots
//! per peer, the session cap and idle expiry, request bodies bounded in
//! bytes, depth and values (and the memory they cost), a trickled body,
//! and the probes answered without the token (`/healthz`, `/readyz`).

use crate::server::HttpServer;
use crate::PATIENCE;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;
use tickbox_mcp::http::{
    HttpOptions, MAX_BODY_DEPTH, MAX_BODY_VALUES, MAX_CONNECTIONS_PER_PEER, MAX_SESSIONS,
    MAX_UNAUTHENTICATED,
};
use tickbox_mcp::{Grants, MAX_FRAME_BYTES};
use tickbox_test_support::mcp_http::{
    closed_by_server, delete, echo, initialize_http, ping, post_head, probe, raw,
    send_for_short_answer, try_initialize,
};
use tickbox_test_support::{eventually, hostile, status_kib};

#[test]
fn half_sent_heads_do_not_lock_out_a_client_with_the_token() {
    let server = HttpServer::start();
    // Three times the unauthenticated bound, each head cut off mid-way.
    let mut heads: Vec<TcpStream> = (0..MAX_UNAUTHENTICATED * 3)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).expect("connect");
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
                .unwrap();
            s
        })
        .collect();
    // A client that sends its request at once gets in, and calls.
    let session = initialize_http(&server, &[]);
    let r = echo(&server, &session, json!({"after": "heads"}));
    assert_eq!(r["structuredContent"], json!({"after": "heads"}), "{r}");
    // The oldest heads were closed to make room, the rest at the
    // authentication timeout: none is left holding anything.
    for (i, s) in heads.iter_mut().enumerate() {
        assert!(closed_by_server(s), "half-sent head {i} is still open");
    }
    let r = echo(&server, &session, json!({"still": true}));
    assert_eq!(r["structuredContent"], json!({"still": true}), "{r}");
}

/// Opens a keep-alive connection and sends one authenticated request on
/// it; the connection and the response's first bytes.
fn authenticated_connection(server: &HttpServer) -> (TcpStream, String) {
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let head = format!(
        "GET /elsewhere?token={} HTTP/1.1\r\nHost: {}\r\n\r\n",
        server.token.as_deref().unwrap(),
        server.addr
    );
    let got = send_for_short_answer(&mut s, &head);
    (s, got)
}

#[test]
fn authenticated_connections_are_bounded_per_peer() {
    let server = HttpServer::start();
    let mut held = Vec::new();
    for i in 0..MAX_CONNECTIONS_PER_PEER {
        let (s, text) = authenticated_connection(&server);
        assert!(text.starts_with("HTTP/1.1 404"), "connection {i}: {text}");
        held.push(s);
    }
    let (mut extra, text) = authenticated_connection(&server);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.contains(&format!(
            "{MAX_CONNECTIONS_PER_PEER} HTTP connections from 127.0.0.1"
        )),
        "{text}"
    );
    assert!(
        closed_by_server(&mut extra),
        "refused connections are closed"
    );
    // One ends: its slot is free again.
    drop(held.pop());
    assert!(
        eventually(PATIENCE, || authenticated_connection(&server)
            .1
            .starts_with("HTTP/1.1 404")),
        "a slot given back"
    );
}

#[test]
fn sessions_are_capped_and_an_ended_one_makes_room() {
    let server = HttpServer::start();
    let sessions: Vec<String> = (0..MAX_SESSIONS)
        .map(|_| initialize_http(&server, &[]))
        .collect();
    let (status, text) = try_initialize(&server);
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains(&format!("{MAX_SESSIONS} MCP sessions are open (the limit)")),
        "{text}"
    );
    // Requests of open sessions are still served at the cap.
    let r = echo(&server, &sessions[5], json!({"at": "cap"}));
    assert_eq!(r["structuredContent"], json!({"at": "cap"}), "{r}");
    assert_eq!(delete(&server, &sessions[0]), 204);
    let (status, text) = try_initialize(&server);
    assert_eq!(status, 200, "{text}");
}

#[test]
fn idle_sessions_expire_and_do_not_keep_out_a_new_client() {
    // Sessions idle 2 s are closed (the default is minutes).
    let server = HttpServer::start_with(crate::shifty(&[]), |o: &mut HttpOptions| {
        o.session_idle = Duration::from_secs(2)
    });
    let sessions: Vec<String> = (0..MAX_SESSIONS)
        .map(|_| initialize_http(&server, &[]))
        .collect();
    let busy = &sessions[0];
    // The busy session keeps calling; the 31 others only initialized.
    let got_in = eventually(PATIENCE, || {
        let r = echo(&server, busy, json!({"busy": true}));
        assert_eq!(r["structuredContent"], json!({"busy": true}), "{r}");
        try_initialize(&server).0 == 200
    });
    assert!(got_in, "a new client got in once the idle sessions expired");
    let (status, _, _) = server.post("/mcp", &[("Mcp-Session-Id", &sessions[1])], &ping());
    assert_eq!(status, 404, "an idle session was closed");
    let r = echo(&server, busy, json!({"still": "here"}));
    assert_eq!(r["structuredContent"], json!({"still": "here"}), "{r}");
}

/// A `tools/call TOOL` body whose `arguments` are `{"x": INNER}`.
fn call_body(tool: &str, inner: &str) -> Vec<u8> {
    call_body_id(9, tool, inner)
}

/// [`call_body`] with this request id (calls in flight at once on one
/// session need their own).
fn call_body_id(id: u64, tool: &str, inner: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{"x":{inner}}}}}}}"#
    )
    .into_bytes()
}

#[test]
fn request_bodies_are_bounded_in_bytes_depth_and_values_and_memory_stays_near_their_size() {
    if !crate::alone(
        "guard::request_bodies_are_bounded_in_bytes_depth_and_values_and_memory_stays_near_their_size",
    ) {
        return;
    }
    let server = HttpServer::start();
    let session = initialize_http(&server, &[]);
    // Positive control: a normal call, and one with 64 KiB of text.
    let r = echo(&server, &session, json!({"n": [1, 2, 3]}));
    assert_eq!(r["structuredContent"], json!({"n": [1, 2, 3]}), "{r}");
    let text = "t".repeat(64 * 1024);
    let r = echo(&server, &session, json!({"text": text}));
    assert_eq!(
        r["structuredContent"]["text"].as_str().map(str::len),
        Some(text.len())
    );

    // Declared over the byte bound: refused from the head alone.
    let head = post_head(&server, Some(&session), MAX_FRAME_BYTES + 1);
    let (status, text) = raw(&server, &head, Vec::<u8>::new());
    assert_eq!(status, 413, "{text}");
    assert!(
        text.contains(&format!("over {MAX_FRAME_BYTES} bytes (the limit)")),
        "{text}"
    );
    // Nested past the depth bound.
    let deep = format!(
        "{}{}",
        "[".repeat(MAX_BODY_DEPTH + 10),
        "]".repeat(MAX_BODY_DEPTH + 10)
    );
    let body = call_body("echo", &deep);
    let (status, text) = raw(
        &server,
        &post_head(&server, Some(&session), body.len()),
        body,
    );
    assert_eq!(status, 413, "{text}");
    assert!(
        text.contains(&format!("over {MAX_BODY_DEPTH} levels (the limit)")),
        "{text}"
    );

    // Every body of what follows is made now and kept to the end: the
    // server runs in this process, so the peak it reaches counts only
    // the server's own memory when the test's is all there before.
    // The red team's body: 8 MiB of small numbers, two at once.
    let numbers = format!("[{}1]", "1,".repeat(MAX_FRAME_BYTES / 2 - 64));
    let body = call_body("echo", &numbers);
    assert!(body.len() <= MAX_FRAME_BYTES && body.len() > MAX_FRAME_BYTES - 256);
    let refused_bodies: [Arc<[u8]>; 2] = [body.clone().into(), body.clone().into()];
    // Two bodies under every bound, accepted: 4 MiB each (so the call
    // still fits a Tick line), as many values as allowed, short strings.
    let per = MAX_FRAME_BYTES / 2 / (MAX_BODY_VALUES - 16) - 4;
    let item = format!("\"{}\"", "v".repeat(per));
    let items = vec![item; MAX_BODY_VALUES - 16];
    let list = format!("[{}]", items.join(","));
    let accepted_bodies: [Arc<[u8]>; 2] = [
        call_body_id(20, "count", &list).into(),
        call_body_id(21, "count", &list).into(),
    ];
    let before = status_kib(std::process::id(), "VmHWM");
    let results: Vec<(u16, String)> = std::thread::scope(|scope| {
        let sends: Vec<_> = refused_bodies
            .iter()
            .map(|body| {
                let head = post_head(&server, Some(&session), body.len());
                let server = &server;
                scope.spawn(move || raw(server, &head, Arc::clone(body)))
            })
            .collect();
        sends.into_iter().map(|s| s.join().unwrap()).collect()
    });
    for (status, text) in &results {
        assert_eq!(*status, 413, "{text}");
        assert!(
            text.contains(&format!("over {MAX_BODY_VALUES} JSON values (the limit)")),
            "{text}"
        );
    }
    let refused = status_kib(std::process::id(), "VmHWM");

    let results: Vec<Value> = std::thread::scope(|scope| {
        let sends: Vec<_> = accepted_bodies
            .iter()
            .map(|body| {
                assert!(body.len() <= MAX_FRAME_BYTES, "{}", body.len());
                let head = post_head(&server, Some(&session), body.len());
                let server = &server;
                scope.spawn(move || raw(server, &head, Arc::clone(body)))
            })
            .collect();
        sends
            .into_iter()
            .zip(20..)
            .map(|(s, id)| {
                let (status, text) = s.join().unwrap();
                assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);
                let data = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
                    .find(|m| m["id"] == id)
                    .unwrap_or_else(|| panic!("no answer: {}", &text[..text.len().min(300)]));
                data
            })
            .collect()
    });
    for r in &results {
        assert!(r.get("result").is_some(), "{r}");
    }
    let accepted = status_kib(std::process::id(), "VmHWM");
    let mib = |kib: u64| kib as f64 / 1024.0;
    eprintln!(
        "peak RSS: {:.1} MiB before, {:.1} MiB after two refused 8 MiB bodies of numbers, \
         {:.1} MiB after two accepted 4 MiB bodies at the value bound",
        mib(before),
        mib(refused),
        mib(accepted)
    );
    // Refused bodies are scanned, never parsed: well under one body's size.
    assert!(
        refused - before < 8 * 1024,
        "two refused bodies raised the peak by {:.1} MiB",
        mib(refused - before)
    );
    // Accepted ones cost a few times their size (8 MiB in all), not the
    // hundreds of MiB a parse of unbounded values cost.
    assert!(
        accepted - before < 5 * 8 * 1024,
        "two accepted bodies raised the peak by {:.1} MiB",
        mib(accepted - before)
    );
    let r = echo(&server, &session, json!({"after": "bodies"}));
    assert_eq!(r["structuredContent"], json!({"after": "bodies"}), "{r}");
    drop((numbers, items, refused_bodies, accepted_bodies));
}

#[test]
fn a_token_holder_trickling_a_body_is_cut_off_at_the_body_timeout() {
    // Bodies must be there 1 s after their head (the default is 30 s).
    let server = HttpServer::start_with(crate::shifty(&[]), |o: &mut HttpOptions| {
        o.body_timeout = Duration::from_secs(1)
    });
    let session = initialize_http(&server, &[]);
    // A head for 1000 bytes, then 10, then nothing.
    let mut s = TcpStream::connect(&server.addr).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(post_head(&server, Some(&session), 1000).as_bytes())
        .unwrap();
    s.write_all(b"{\"jsonrpc\"").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request body too slow"), "{answer}");
    assert!(closed_by_server(&mut s), "the connection is closed");
    // Positive control: a body sent at once, on the same session.
    let r = echo(&server, &session, json!({"after": "trickle"}));
    assert_eq!(r["structuredContent"], json!({"after": "trickle"}), "{r}");
}

/// The probes answer without the token (a load balancer's check sends
/// none) and open nothing else: `/healthz` while the process serves,
/// `/readyz` while a new session could get in. At the session cap with
/// none idle enough to give way it is 503 saying so (the liveness probe
/// still 200), and an ended session makes it ready again.
#[test]
fn health_probes_need_no_token_and_readiness_follows_the_session_cap() {
    let server = HttpServer::start();
    let (status, text) = probe(&server, "/healthz");
    assert_eq!(status, 200, "{text}");
    assert!(text.ends_with("alive\n"), "{text}");
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 200, "{text}");
    assert!(text.ends_with("ready\n"), "{text}");
    // The probes open no other door: MCP, and a probe path by another
    // method, still need the token.
    let (status, _) = probe(&server, "/mcp");
    assert_eq!(status, 401);
    let head = format!(
        "POST /readyz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: 2\r\n\r\n",
        server.addr
    );
    assert_eq!(raw(&server, &head, b"{}".to_vec()).0, 401);

    let sessions: Vec<String> = (0..MAX_SESSIONS)
        .map(|_| initialize_http(&server, &[]))
        .collect();
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 503, "{text}");
    assert!(
        text.contains(&format!("{MAX_SESSIONS} MCP sessions are open (the limit)")),
        "{text}"
    );
    assert_eq!(probe(&server, "/healthz").0, 200, "alive at the cap");
    // What readiness said: a new session is refused now.
    assert_eq!(try_initialize(&server).0, 503);
    assert_eq!(delete(&server, &sessions[0]), 204);
    let (status, text) = probe(&server, "/readyz");
    assert_eq!(status, 200, "one ended: ready again: {text}");
}

/// A hosted Tick that ends (here: past its memory bound) is never
/// restarted, so the host stops being ready for new sessions while it
/// stays alive; before that it was ready (the control).
#[test]
fn readiness_ends_when_a_hosted_tick_ends() {
    let grants = Grants {
        max_memory: Some("16MiB".into()),
        ..Grants::default()
    };
    let server = HttpServer::start_with(crate::wasm(&hostile(), &grants), |_| {});
    assert_eq!(probe(&server, "/readyz").0, 200, "ready while it runs");
    let session = initialize_http(&server, &[]);
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "grow", "arguments": {"mb": 64}}}),
    );
    assert_eq!(status, 200, "{m:?}");
    let mut last = (0, String::new());
    let unready = eventually(PATIENCE, || {
        last = probe(&server, "/readyz");
        last.0 == 503
    });
    assert!(unready, "{last:?}");
    assert!(last.1.contains("1 of the hosted Ticks ended"), "{}", last.1);
    assert_eq!(
        probe(&server, "/healthz").0,
        200,
        "the process still serves"
    );
}
