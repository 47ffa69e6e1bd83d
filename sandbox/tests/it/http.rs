//! Outgoing `wasi:http` under origin grants, through the wire: the
//! `httpget` guest (tests/guests) sends requests to loopback servers run
//! by the test, and the test reads what the guest saw from its `get`
//! tool's result.
//!
//! The granted origin is the positive control; another port, another
//! spelling of the host, another scheme and no grant at all are refused
//! with `HTTP-request-denied`; redirects are not followed; the response
//! body bound, the first-byte timeout, the per-Tick concurrency bound and
//! the request body bound each give the guest an error code; HTTPS works
//! against a loopback TLS server whose test CA is granted as `http_ca`,
//! and fails with `TLS-certificate-error` without it.

use crate::guest::attempt_in;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use tickbox_sandbox::limits::{MAX_CONCURRENT_REQUESTS, MAX_REQUEST_BODY, MAX_RESPONSE_BODY};
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::*;

/// The host's response body bound, as the guest counts it.
const MAX_RESPONSE_BODY_BYTES: usize = MAX_RESPONSE_BODY as usize;
/// The host's request body bound, as the guest counts it.
const MAX_REQUEST_BODY_BYTES: usize = MAX_REQUEST_BODY as usize;

/// Outgoing HTTP to these origins.
fn allow(origins: &[&str]) -> GrantSpec {
    GrantSpec {
        allow_http: origins.iter().map(|o| o.to_string()).collect(),
        ..GrantSpec::default()
    }
}

/// `spec` with the test CA in `ca` trusted too.
fn with_ca(spec: GrantSpec, ca: &str) -> GrantSpec {
    GrantSpec {
        http_ca: Some(ca.to_string()),
        ..spec
    }
}

/// Starts the httpget guest under `grants` and calls its `get` tool with
/// `args`: what the guest saw.
async fn get(args: Value, grants: &GrantSpec) -> Value {
    let guest = build_wasm("tests/guests", "httpget", "wasm32-wasip2");
    attempt_in(&guest.to_string_lossy(), "get", args, grants).await
}

fn read_head(conn: &mut impl Read) -> Option<(String, usize)> {
    let mut reader = BufReader::new(conn);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let path = first.split_whitespace().nth(1)?.to_string();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    // Read the body (the tests' bodies are small or refused before sending).
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, length))
}

/// Answers one connection by its path.
fn serve(mut conn: impl Read + Write, port: u16, stop: &AtomicBool) {
    let Some((path, length)) = read_head(&mut conn) else {
        return;
    };
    let reply = |conn: &mut dyn Write, status: &str, extra: &str, body: &[u8]| {
        let _ = write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n",
            body.len()
        );
        let _ = conn.write_all(body);
        let _ = conn.flush();
    };
    match path.as_str() {
        "/hello" => reply(&mut conn, "200 OK", "", b"hello from loopback"),
        "/length" => reply(&mut conn, "200 OK", "", length.to_string().as_bytes()),
        "/redirect" => reply(
            &mut conn,
            "302 Found",
            &format!("Location: http://localhost:{port}/hello\r\n"),
            b"",
        ),
        // No length: the body runs to the close, past the bound.
        "/big" => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            let chunk = vec![b'y'; 64 * 1024];
            for _ in 0..(MAX_RESPONSE_BODY_BYTES / chunk.len() + 4) {
                if conn.write_all(&chunk).is_err() {
                    break;
                }
            }
        }
        // A declared length past the bound.
        "/declared" => {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                MAX_RESPONSE_BODY_BYTES + 1
            );
            let _ = conn.flush();
        }
        // Never answers: holds the connection until the client gives up
        // and closes it, or the test ends (each read wakes at the
        // connection's read timeout to look at `stop`).
        "/silent" => {
            let mut byte = [0u8; 1];
            while !stop.load(Ordering::Relaxed) {
                match conn.read(&mut byte) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
        }
        _ => reply(&mut conn, "404 Not Found", "", b"no such path"),
    }
}

/// A loopback HTTP (or HTTPS, with `tls`) server; stopped and joined on drop.
struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // Blocking: the thread sleeps in accept, and drop wakes it with one
        // last connection (`wake_listener`).
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conns: Vec<JoinHandle<()>> = Vec::new();
            let mut open: Vec<std::net::TcpStream> = Vec::new();
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((c, _)) => {
                        let _ = c.set_read_timeout(Some(Duration::from_secs(20)));
                        if let Ok(twin) = c.try_clone() {
                            open.push(twin);
                        }
                        let (s, tls) = (s.clone(), tls.clone());
                        conns.push(std::thread::spawn(move || match tls {
                            None => serve(c, port, &s),
                            Some(config) => {
                                let Ok(server) = rustls::ServerConnection::new(config) else {
                                    return;
                                };
                                serve(rustls::StreamOwned::new(server, c), port, &s);
                            }
                        }));
                    }
                    Err(_) => break,
                }
            }
            // A connection held open (`/silent`) ends now, not at its read
            // timeout.
            for c in &open {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Server {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, scheme: &str, host: &str, path: &str) -> String {
        format!("{scheme}://{host}:{}{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        wake_listener(self.port);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[tokio::test]
async fn only_the_granted_origin_is_reached() {
    let server = Server::start(None);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let grant = allow(&[&origin]);
    // Positive control.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/hello")}),
        &grant,
    )
    .await;
    assert_eq!(
        (&r["status"], &r["body"], &r["error"]),
        (&json!(200), &json!("hello from loopback"), &Value::Null),
        "{r}"
    );
    // Without a grant the component still starts; its request is refused.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/hello")}),
        &GrantSpec::default(),
    )
    .await;
    assert_eq!(r["error"], "HttpRequestDenied", "no grant: {r}");
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    for (url, why) in [
        (
            format!("http://127.0.0.1:{other_port}/hello"),
            "another port",
        ),
        (
            server.url("http", "localhost", "/hello"),
            "another spelling of the host",
        ),
        (server.url("https", "127.0.0.1", "/hello"), "https"),
        (server.url("ftp", "127.0.0.1", "/hello"), "another scheme"),
    ] {
        let r = get(json!({ "url": url }), &grant).await;
        assert_eq!(r["error"], "HttpRequestDenied", "{why}: {r}");
        assert_eq!(r["status"], Value::Null, "{why}: {r}");
    }
    // A refused request never connected.
    other.set_nonblocking(true).unwrap();
    assert!(other.accept().is_err(), "the other port saw a connection");
}

#[tokio::test]
async fn a_redirect_is_handed_to_the_guest_not_followed() {
    let server = Server::start(None);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/redirect")}),
        &allow(&[&origin]),
    )
    .await;
    assert_eq!(
        (&r["status"], &r["error"]),
        (&json!(302), &Value::Null),
        "{r}"
    );
    // Following it by hand goes to `localhost`, which is not granted.
    let r = get(
        json!({"url": server.url("http", "localhost", "/hello")}),
        &allow(&[&origin]),
    )
    .await;
    assert_eq!(r["error"], "HttpRequestDenied", "{r}");
}

#[tokio::test]
async fn response_bodies_past_the_bound_are_cut() {
    let server = Server::start(None);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let grant = allow(&[&origin]);
    // Streamed without a length: the guest reads up to the bound (less the
    // chunk that would cross it), then its stream fails.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/big")}),
        &grant,
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let read = r["body_len"].as_u64().unwrap() as usize;
    assert!(read <= MAX_RESPONSE_BODY_BYTES, "read {read} bytes");
    assert!(
        read >= MAX_RESPONSE_BODY_BYTES - 128 * 1024,
        "read only {read} bytes"
    );
    // wasmtime-wasi-http 48 hands a body error to the guest as a stream
    // error without a wasi:http code (`http-error-code` is none), so the
    // guest reports its text, which names the bound.
    assert_eq!(
        r["error"],
        format!("HTTP response body size exceeds limit: {MAX_RESPONSE_BODY} bytes"),
        "{r}"
    );
    // A declared length past the bound fails the response itself.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/declared")}),
        &grant,
    )
    .await;
    assert_eq!(
        (&r["error"], &r["status"]),
        (&json!("HttpResponseBodySize"), &Value::Null),
        "{r}"
    );
}

#[tokio::test]
async fn request_bodies_past_the_bound_are_refused() {
    let server = Server::start(None);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let grant = allow(&[&origin]);
    // Positive control: a body at the bound arrives whole.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/length"), "body_bytes": MAX_REQUEST_BODY_BYTES}),
        &grant,
    ).await;
    assert_eq!(
        (&r["status"], &r["body"]),
        (&json!(200), &json!(MAX_REQUEST_BODY_BYTES.to_string())),
        "{r}"
    );
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/length"), "body_bytes": MAX_REQUEST_BODY_BYTES + 1}),
        &grant,
    ).await;
    assert_eq!(r["error"], "HttpRequestBodySize", "{r}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = Server::start(None);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/silent"), "first_byte_timeout_ms": 500}),
        &allow(&[&origin]),
    )
    .await;
    assert_eq!(r["error"], "ConnectionReadTimeout", "{r}");
}

/// Requests in flight past the per-Tick bound fail at once; the others
/// run (here into their timeout, since the server never answers).
#[tokio::test]
async fn requests_in_flight_are_bounded_per_tick() {
    let server = Server::start(None);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let count = MAX_CONCURRENT_REQUESTS + 2;
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/silent"),
               "first_byte_timeout_ms": 1000, "count": count}),
        &allow(&[&origin]),
    )
    .await;
    let errors: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["error"].as_str().unwrap_or(""))
        .collect();
    let limited = errors
        .iter()
        .filter(|e| **e == "ConnectionLimitReached")
        .count();
    let timed_out = errors
        .iter()
        .filter(|e| **e == "ConnectionReadTimeout")
        .count();
    assert_eq!(
        (timed_out, limited),
        (MAX_CONCURRENT_REQUESTS, 2),
        "{errors:?}"
    );
    // The slots come back: the next request goes through.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/hello"), "count": 2}),
        &allow(&[&origin]),
    )
    .await;
    assert_eq!(r["results"][1]["status"], 200, "{r}");
}

/// A test CA and a certificate it signs for 127.0.0.1, as PEM files and a
/// server configuration.
fn test_pki(dir: &TempDir) -> (std::path::PathBuf, Arc<rustls::ServerConfig>) {
    let (ca, leaf, key) = loopback_pki("tickbox test CA");
    let ca_file = dir.path("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    (ca_file, Arc::new(config))
}

#[tokio::test]
async fn https_to_a_loopback_server_with_a_test_ca() {
    let dir = TempDir::new("http-ca");
    let (ca, config) = test_pki(&dir);
    let server = Server::start(Some(config));
    let origin = format!("https://127.0.0.1:{}", server.port);
    let url = server.url("https", "127.0.0.1", "/hello");
    let ca = ca.to_string_lossy().into_owned();
    let r = get(json!({ "url": url }), &with_ca(allow(&[&origin]), &ca)).await;
    assert_eq!(
        (&r["status"], &r["body"]),
        (&json!(200), &json!("hello from loopback")),
        "{r}"
    );
    // Without the CA the certificate does not verify.
    let r = get(json!({ "url": url }), &allow(&[&origin])).await;
    assert_eq!(r["error"], "TlsCertificateError", "{r}");
    // Plain http to the same port is another origin.
    let r = get(
        json!({"url": server.url("http", "127.0.0.1", "/hello")}),
        &with_ca(allow(&[&origin]), &ca),
    )
    .await;
    assert_eq!(r["error"], "HttpRequestDenied", "{r}");
}

/// The bounds hold whatever the guest does: a connection to a port where
/// nothing listens is an error code too, not a host failure.
#[tokio::test]
async fn a_closed_port_is_connection_refused() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let origin = format!("http://127.0.0.1:{port}");
    let r = get(json!({ "url": format!("{origin}/") }), &allow(&[&origin])).await;
    assert_eq!(r["error"], "ConnectionRefused", "{r}");
}
