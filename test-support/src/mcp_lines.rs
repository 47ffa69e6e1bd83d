//! An MCP client speaking raw JSON-RPC lines, frame by frame, to whatever
//! serves MCP over a byte stream: the `tickbox mcp` process's stdin and
//! stdout in the CLI's tests, the facade's stdio loop on a socket pair in
//! tickbox-mcp's. Messages that arrive while the test waits for another
//! one are kept, in order, for later.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc;
use std::time::Duration;

/// A guard against hangs, not a timing assertion: generous, as the
/// machine may be loaded.
const PATIENCE: Duration = Duration::from_secs(60);

/// Raw JSON-RPC lines to a server and back.
pub struct LineClient {
    to: Option<Box<dyn Write + Send>>,
    lines: mpsc::Receiver<String>,
    /// Messages read while waiting for another one.
    held: Vec<Value>,
}

impl LineClient {
    /// Writes to `to`; a thread reads `from` line by line until it ends.
    pub fn new(to: impl Write + Send + 'static, from: impl Read + Send + 'static) -> LineClient {
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        LineClient {
            to: Some(Box::new(to)),
            lines,
            held: Vec::new(),
        }
    }

    /// Writes these bytes as they are.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let to = self.to.as_mut().expect("input open");
        to.write_all(bytes).expect("write to the server");
        to.flush().expect("flush to the server");
    }

    /// Writes one frame as a line.
    pub fn send(&mut self, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes());
    }

    /// Drops the writer: a server reading a pipe sees the end of its input.
    pub fn close_input(&mut self) {
        drop(self.to.take());
    }

    /// The next message from the server, whatever it is.
    pub fn next_message(&mut self) -> Value {
        if !self.held.is_empty() {
            return self.held.remove(0);
        }
        let line = self
            .lines
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("no frame from the server within {PATIENCE:?}: {e}"));
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

    /// One request and its answer.
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(json!(id))
    }

    /// The `initialize` handshake at `version`; its answer.
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

    /// `tools/call`; its result (a JSON-RPC error fails the test).
    pub fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        let r = self.request(id, "tools/call", json!({"name": tool, "arguments": args}));
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {tool} answered with an error: {r}"))
    }
}

/// The tool names of a `tools/list` answer, in order.
pub fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

/// A tool's annotation hint (`openWorldHint`, `readOnlyHint`, ...) in a
/// `tools/list` answer; the tool must be listed.
pub fn tool_hint(list: &Value, tool: &str, hint: &str) -> Option<bool> {
    list["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
        .unwrap_or_else(|| panic!("no tool `{tool}` in {list}"))["annotations"][hint]
        .as_bool()
}
