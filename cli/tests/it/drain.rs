//! `tickbox mcp --http` drained by SIGTERM or SIGINT, through the wire:
//! the signal starts the drain, a call in flight is answered and the host
//! exits 0; the drain timeout (`--drain-timeout`) cuts a call that does
//! not end (130), and a second signal stops at once (130). What the drain
//! itself refuses and answers, and two hosts behind HAProxy, are tested
//! on the facade in tickbox-mcp's `tests/it`.

use crate::mcp_wire::{initialize_http, HttpServer};
use crate::util::*;
use std::path::Path;
use std::time::{Duration, Instant};
use tickbox_test_support::mcp_http::{
    assert_cut_off, body_of, call_until, echo_raw, finish_call, probe, try_initialize,
    wait_until_draining, wait_until_started,
};

/// `tickbox mcp --http` on shifty, which logs each `sleep` call it starts
/// to `log`.
fn server(log: &Path, extra: &[&str]) -> HttpServer {
    HttpServer::start_with(
        "127.0.0.1:0",
        extra,
        &[("SHIFTY_LOG", log.to_str().unwrap())],
    )
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
    wait_until_draining(&server);
    // New work is refused (what each refusal says is the facade's test).
    let (status, text) = try_initialize(&server);
    assert_eq!(status, 503, "{text}");
    assert!(body_of(&text).starts_with("draining: "), "{text}");
    assert!(!server.has_exited(), "the call in flight holds the host");

    // The call ends: it is answered, and the host exits 0.
    finish_call(&gate, call);
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
    assert_cut_off(call);
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
