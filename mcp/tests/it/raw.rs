//! A raw-lines client of the stdio serve loop: the facade serves one end
//! of a Unix socket pair on a runtime of its own thread (one thread, as
//! `tickbox mcp` runs over stdio), the test writes and reads JSON-RPC
//! lines on the other.

use crate::{hosted, logs, PATIENCE};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tickbox_mcp::{Facade, FacadeError, Grants};
use tickbox_sandbox::Launcher;

/// The facade over one client's stdio, driven with raw JSON-RPC lines.
pub struct Raw {
    to: UnixStream,
    lines: mpsc::Receiver<String>,
    served: Option<JoinHandle<Result<(), FacadeError>>>,
    /// Messages read while waiting for another one.
    held: Vec<Value>,
}

impl Raw {
    /// Serves `launcher`'s Tick under its default name.
    pub fn start(launcher: Launcher) -> Raw {
        logs();
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        let (ready, started) = mpsc::channel();
        let served = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let tick = hosted(&launcher, None, Grants::default()).await;
                let facade = Facade::new(vec![tick]).await?;
                theirs.set_nonblocking(true).expect("nonblocking");
                let stream = tokio::net::UnixStream::from_std(theirs).expect("a tokio stream");
                let (read, write) = stream.into_split();
                let _ = ready.send(());
                facade.serve(read, write).await
            })
        });
        // A start that fails shows as the thread's panic or error below.
        if started.recv_timeout(PATIENCE).is_err() {
            let outcome = served.join();
            panic!("the facade did not start: {outcome:?}");
        }
        let from = ours.try_clone().expect("clone the socket");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Raw {
            to: ours,
            lines,
            served: Some(served),
            held: Vec::new(),
        }
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.to.write_all(bytes).expect("write to the facade");
    }

    pub fn send(&mut self, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes());
    }

    /// The next message from the server, whatever it is.
    pub fn next(&mut self) -> Value {
        if !self.held.is_empty() {
            return self.held.remove(0);
        }
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no frame from the facade within {PATIENCE:?}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    /// The answer with this id (other messages are kept for later).
    pub fn answer(&mut self, id: Value) -> Value {
        if let Some(i) = self
            .held
            .iter()
            .position(|m| m["id"] == id && m.get("method").is_none())
        {
            return self.held.remove(i);
        }
        loop {
            let line = self
                .lines
                .recv_timeout(PATIENCE)
                .unwrap_or_else(|e| panic!("no answer to {id} within {PATIENCE:?}: {e}"));
            let m: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
            self.held.push(m);
        }
    }

    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(json!(id))
    }

    pub fn initialize(&mut self, version: &str) -> Value {
        let r = self.request(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}),
        );
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        let r = self.request(id, "tools/call", json!({"name": tool, "arguments": args}));
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {tool} answered with an error: {r}"))
    }

    /// Ends the client's input (EOF, as a client that leaves) and waits
    /// for the serve loop to return; its outcome and what was logged.
    pub fn close(mut self) -> (Result<(), FacadeError>, String) {
        let _ = self.to.shutdown(std::net::Shutdown::Write);
        let served = self.served.take().expect("served once");
        assert!(
            tickbox_test_support::eventually(PATIENCE, || served.is_finished()),
            "the serve loop did not return within {PATIENCE:?} of the client leaving"
        );
        let outcome = served.join().expect("the serve loop did not panic");
        (outcome, logs().text())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // The serve loop ends with the client's input; the Ticks with it.
        let _ = self.to.shutdown(std::net::Shutdown::Both);
    }
}
