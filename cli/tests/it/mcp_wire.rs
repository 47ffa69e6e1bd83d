//! `tickbox mcp` as a process, driven with raw JSON-RPC lines or over
//! `--http`: how other modules start it ([`Start`], on test-support's
//! `Raw` and `HttpServer`), and what only the binary does: the token it generates for a bind that
//! is not loopback, and `--workers`. The facade's own behaviour on the
//! wire (revisions, bad frames, bounds, cancellation, Streamable HTTP, a
//! spinning Tick's neighbours on one thread and on two) is tested in
//! tickbox-mcp's `tests/it`.

use crate::util::*;
use serde_json::json;
use std::process::Command;
pub(crate) use tickbox_test_support::mcp_http::initialize_http;
pub(crate) use tickbox_test_support::mcp_process::{HttpServer, Raw};

fn shifty() -> Vec<String> {
    vec!["--".into(), "python3".into(), tick("shifty.py")]
}

/// `tickbox mcp ARGS`, with `env`.
fn mcp<'a>(args: impl IntoIterator<Item = &'a str>, env: &[(&str, &std::ffi::OsStr)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickbox"));
    cmd.arg("mcp").args(args).envs(env.iter().copied());
    cmd
}

/// Starting this binary's `tickbox mcp` as test-support's harnesses.
pub(crate) trait Start: Sized {
    /// `tickbox mcp ARGS`.
    fn start_env(args: &[String], env: &[(&str, &std::path::Path)]) -> Self;
    /// `tickbox mcp ARGS` with no more environment.
    fn start(args: &[String]) -> Self {
        Self::start_env(args, &[])
    }
}

impl Start for Raw {
    fn start_env(args: &[String], env: &[(&str, &std::path::Path)]) -> Raw {
        let env: Vec<_> = env.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
        Raw::spawn(mcp(args.iter().map(String::as_str), &env))
    }
}

/// Starting this binary's `tickbox mcp --http` on a loopback port.
pub(crate) trait StartHttp {
    /// Serving the shifty Tick, with `extra` flags.
    fn start(extra: &[&str]) -> HttpServer {
        HttpServer::start_with("127.0.0.1:0", extra, &[])
    }
    /// On `bind`, with `extra` flags and `env`.
    fn start_with(bind: &str, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let shifty = tick("shifty.py");
        let mut args = vec!["--http", bind];
        args.extend_from_slice(extra);
        args.extend(["--", "python3", &shifty]);
        HttpServer::start_args(&args, env)
    }
    /// `tickbox mcp ARGS` (which must serve HTTP: `--http ADDR`).
    fn start_args(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let env: Vec<_> = env
            .iter()
            .map(|(k, v)| (*k, std::ffi::OsStr::new(v)))
            .collect();
        HttpServer::spawn(mcp(args.iter().copied(), &env))
    }
}

impl StartHttp for HttpServer {}

/// A bind that is not loopback gets a generated token, printed on stderr.
/// The server listens on every interface for the length of the test, but
/// the test talks to it over loopback only.
#[test]
fn a_non_loopback_bind_generates_a_token_and_requires_it() {
    let mut server = HttpServer::start_with("0.0.0.0:0", &[], &[]);
    let token = server
        .token
        .clone()
        .unwrap_or_else(|| panic!("no token on stderr: {:?}", server.banner));
    assert_eq!(token.len(), 64, "32 random bytes in hex: {token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    // Over loopback, to the same server.
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    server.addr = format!("127.0.0.1:{port}");
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, headers, _) = server.post_as(None, "/mcp", &[], &ping);
    assert_eq!(status, 401, "no token: {headers:?}");
    let (status, _, _) = server.post("/mcp", &[("Authorization", "Bearer 00")], &ping);
    assert_eq!(status, 401, "a wrong token");
    let auth = format!("Bearer {token}");
    initialize_http(&server, &[("Authorization", &auth)]);
}

/// How many of a process's threads are tokio workers.
fn tokio_workers(pid: u32) -> usize {
    threads(pid)
        .iter()
        .filter(|t| *t == "tokio-rt-worker")
        .count()
}

#[test]
fn the_host_runs_on_one_thread_over_stdio_unless_given_workers_within_the_bound() {
    for bad in ["0", "65"] {
        let mut args = vec!["mcp".to_string(), "--workers".into(), bad.into()];
        args.extend(shifty());
        tickbox(&args).expect(2, "--workers");
    }
    // Default over stdio: a current-thread runtime, no worker threads.
    // --workers 2: two. Each serves a call and a ping.
    for (workers, want) in [(None, 0), (Some("2"), 2)] {
        let mut args = Vec::new();
        if let Some(n) = workers {
            args.extend(["--workers".to_string(), n.to_string()]);
        }
        args.extend(shifty());
        let mut mcp = Raw::start(&args);
        mcp.initialize("2025-11-25");
        let r = mcp.call(1, "echo", json!({"a": 1}));
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(tokio_workers(mcp.pid()), want, "--workers {workers:?}");
        let p = mcp.request(2, "ping", json!({}));
        assert_eq!(p["result"], json!({}), "{p}");
        // A client's refused requests write no log line each.
        let nope = json!({"name": "nope", "arguments": {}});
        (3..203).for_each(|id| {
            assert!(mcp.request(id, "tools/call", nope.clone())["error"].is_object())
        });
        let (code, stderr) = mcp.close();
        assert!(code == 0 && stderr.lines().count() < 20, "{stderr}");
    }
}
