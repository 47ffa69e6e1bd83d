//! MCP servers as processes (`tickbox mcp`), for the tests that need the
//! binary: [`Raw`] on its stdio, driven with raw JSON-RPC lines, and
//! [`HttpServer`] over `--http` on a loopback port, drained with SIGTERM
//! when dropped. Each is spawned from a command the test builds, so this
//! crate needs no tickbox binary of its own.

use crate::exits_within;
use crate::mcp_http::Endpoint;
use crate::mcp_lines::LineClient;
use std::io::{BufRead, BufReader, Read};
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A guard against hangs, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `tickbox mcp` child driven with raw JSON-RPC lines ([`LineClient`]
/// on its stdin and stdout).
pub struct Raw {
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

impl Raw {
    /// Spawns `cmd` (an MCP server on its stdio: `tickbox mcp ARGS`) with
    /// its stdin, stdout and stderr piped.
    pub fn spawn(mut cmd: Command) -> Raw {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .spawn()
            .expect("spawn the MCP server");
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, at once, and waits for the exit: nothing of the host's
    /// own shutdown runs.
    pub fn kill_now(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Closes stdin; returns the exit code and stderr.
    pub fn close(mut self) -> (i32, String) {
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
pub struct HttpServer {
    child: Child,
    endpoint: Endpoint,
    /// The stderr lines before the address line.
    pub banner: Vec<String>,
    /// The stderr lines after it, as they come.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Told when the reader of stderr reached its end.
    read_all: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    /// The exit code, once a test has waited for it.
    exited: Option<i32>,
}

impl HttpServer {
    /// Spawns `cmd` (`tickbox mcp ARGS`, which must serve HTTP: `--http
    /// ADDR`) and reads its stderr up to the `serving MCP on` line.
    pub fn spawn(mut cmd: Command) -> HttpServer {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .spawn()
            .expect("spawn the MCP HTTP server");
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
    pub fn signal(&self, signal: i32) {
        // SAFETY: a plain kill(2) to our own child, not yet waited for.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Whether the server has exited (without waiting).
    pub fn has_exited(&mut self) -> bool {
        self.exited.is_some() || self.child.try_wait().expect("wait").is_some()
    }

    /// Waits for the server to exit (it must, within the tests' patience)
    /// and returns its exit code.
    pub fn wait_exit(&mut self) -> i32 {
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
    pub fn stderr(&self) -> Vec<String> {
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
