//! `tickbox mcp` as a process, driven with raw JSON-RPC lines or over
//! `--http`: the harnesses other modules share ([`Raw`], [`HttpServer`]),
//! and what only the binary does: the token it generates for a bind that
//! is not loopback, and `--workers`. The facade's own behaviour on the
//! wire (revisions, bad frames, bounds, cancellation, Streamable HTTP, a
//! spinning Tick's neighbours on one thread and on two) is tested in
//! tickbox-mcp's `tests/it`.

use crate::util::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::ops::{Deref, DerefMut};
use std::process::{Child, Stdio};
use std::time::Duration;
pub(crate) use tickbox_test_support::mcp_http::initialize_http;
use tickbox_test_support::mcp_http::Endpoint;
use tickbox_test_support::mcp_lines::LineClient;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `tickbox mcp` child driven with raw JSON-RPC lines ([`LineClient`]
/// on its stdin and stdout).
pub(crate) struct Raw {
    child: Child,
    client: LineClient,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Deref for Raw {
    type Target = LineClient;

    fn deref(&self) -> &LineClient {
        &self.client
    }
}

impl DerefMut for Raw {
    fn deref_mut(&mut self) -> &mut LineClient {
        &mut self.client
    }
}

fn shifty() -> Vec<String> {
    vec!["--".into(), "python3".into(), tick("shifty.py")]
}

impl Raw {
    pub(crate) fn start(args: &[String]) -> Raw {
        Raw::start_env(args, &[])
    }

    pub(crate) fn start_env(args: &[String], env: &[(&str, &std::path::Path)]) -> Raw {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .arg("mcp")
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, *v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .spawn()
            .expect("spawn tickbox mcp");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Raw {
            child,
            client: LineClient::new(stdin, stdout),
            stderr: Some(stderr),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, at once, and waits for the exit: nothing of the host's
    /// own shutdown runs.
    pub(crate) fn kill_now(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin; returns the exit code and stderr.
    pub(crate) fn close(mut self) -> (i32, String) {
        self.client.close_input();
        let status = wait_for(&mut self.child);
        let stderr = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (status, stderr)
    }
}

fn wait_for(child: &mut Child) -> i32 {
    if !exits_within(child.id(), PATIENCE) {
        let _ = child.kill();
        panic!("tickbox mcp did not exit within {PATIENCE:?}");
    }
    child.wait().expect("wait").code().unwrap_or(-1)
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tickbox mcp --http` on a loopback port, drained with SIGTERM on drop.
/// Its address and the token of the `serving MCP on` line's URL (a
/// generated one) are its [`Endpoint`], which sends requests.
pub(crate) struct HttpServer {
    child: Child,
    endpoint: Endpoint,
    /// The stderr lines before the address line.
    pub(crate) banner: Vec<String>,
    /// The stderr lines after it, as they come.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Told when the reader of stderr reached its end.
    read_all: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    /// The exit code, once a test has waited for it.
    exited: Option<i32>,
}

impl HttpServer {
    pub(crate) fn start(extra: &[&str]) -> HttpServer {
        HttpServer::start_on("127.0.0.1:0", extra)
    }

    fn start_on(bind: &str, extra: &[&str]) -> HttpServer {
        HttpServer::start_with(bind, extra, &[])
    }

    pub(crate) fn start_with(bind: &str, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let shifty = tick("shifty.py");
        let mut args = vec!["--http", bind];
        args.extend_from_slice(extra);
        args.extend(["--", "python3", &shifty]);
        HttpServer::start_args(&args, env)
    }

    /// `tickbox mcp ARGS` (which must serve HTTP: `--http ADDR`).
    pub(crate) fn start_args(args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .arg("mcp")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .spawn()
            .expect("spawn tickbox mcp --http");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut banner = Vec::new();
        let (addr, token) = loop {
            let line = lines
                .next()
                .expect("stderr ended before the address")
                .unwrap();
            if let Some(rest) = line.strip_prefix("tickbox mcp: serving MCP on http://") {
                let (url, query) = rest.split_once('?').unwrap_or((rest, ""));
                let token = query.strip_prefix("token=").map(str::to_string);
                break (url.trim_end_matches("/mcp").to_string(), token);
            }
            banner.push(line);
        };
        // Keep reading stderr so the server never blocks on it.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        let (ended, read_all) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
            let _ = ended.send(());
        });
        HttpServer {
            child,
            endpoint: Endpoint { addr, token },
            banner,
            log,
            read_all: std::sync::Mutex::new(read_all),
            exited: None,
        }
    }

    /// Sends `signal` to the server.
    pub(crate) fn signal(&self, signal: i32) {
        // SAFETY: a plain kill(2) to our own child, not yet waited for.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Whether the server has exited (without waiting).
    pub(crate) fn has_exited(&mut self) -> bool {
        self.exited.is_some() || self.child.try_wait().expect("wait").is_some()
    }

    /// Waits for the server to exit (it must, within the tests' patience)
    /// and returns its exit code.
    pub(crate) fn wait_exit(&mut self) -> i32 {
        let code = wait_for(&mut self.child);
        // Its last lines may still be on their way to `log`: wait for the
        // reader to reach the end of stderr (bounded, should a child of the
        // server still hold the pipe).
        let _ = self
            .read_all
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10));
        self.exited = Some(code);
        code
    }

    /// Its stderr after the address line, so far.
    pub(crate) fn stderr(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Deref for HttpServer {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl DerefMut for HttpServer {
    fn deref_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if self.exited.is_some() {
            return;
        }
        self.signal(libc::SIGTERM);
        let code = wait_for(&mut self.child);
        // Drained (0), or calls a test left running cut off at the drain
        // timeout (130).
        assert!(
            code == 0 || code == 130 || std::thread::panicking(),
            "exit {code} after SIGTERM"
        );
    }
}

/// A bind that is not loopback gets a generated token, printed on stderr.
/// The server listens on every interface for the length of the test, but
/// the test talks to it over loopback only.
#[test]
fn a_non_loopback_bind_generates_a_token_and_requires_it() {
    let mut server = HttpServer::start_on("0.0.0.0:0", &[]);
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
        let (code, stderr) = mcp.close();
        assert_eq!(code, 0, "{stderr}");
    }
}
