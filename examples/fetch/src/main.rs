//! Fetches pages over plain HTTP from addresses the user granted.
//!
//! Sandboxed, a Tick reaches no network at all until the user grants an
//! address: `tickbox call fetch.wasm get '{"addr":"127.0.0.1:8080","path":"/"}' --yes --allow-net 127.0.0.1:8080`.
//! Without the grant the connection is refused and the tool says which
//! grant is missing; nothing was fetched, so the error is "not executed".
//!
//! The fetch is a blocking `std::net` request inside the call: fine for a
//! quick local request. A slow download would instead start from a tool
//! that returns at once and continue in timer steps (see the dashboard).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use tickbox_guest::prelude::*;

/// Bytes of a response kept; the rest is dropped (results stay small).
const MAX_BODY: usize = 16 * 1024;
/// Fetches listed in state.
const IN_STATE: usize = 10;

#[derive(Default)]
struct Fetch {
    fetched: u64,
    recent: Vec<Value>,
    last_body: String,
}

#[derive(Deserialize, JsonSchema)]
struct Get {
    /// `host:port` of the server, e.g. `127.0.0.1:8080`; must be granted.
    addr: String,
    /// The path to request, starting with `/`.
    #[serde(default = "root")]
    path: String,
}

fn root() -> String {
    "/".into()
}

impl Fetch {
    fn get(&mut self, a: Get, _: &mut Ctx) -> Result<Value, ToolError> {
        if !a.path.starts_with('/') || a.path.contains(char::is_whitespace) {
            return Err(ToolError::rejected(
                "path must start with / and have no spaces",
            ));
        }
        let mut conn = TcpStream::connect(&a.addr).map_err(|e| {
            // Nothing was sent, so nothing happened anywhere.
            ToolError::rejected(format!(
                "cannot connect to {}: {e}; a sandboxed Tick needs `--allow-net {}`",
                a.addr, a.addr
            ))
        })?;
        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
        let host = a.addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(&a.addr);
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: tickbox-example-fetch\r\nConnection: close\r\n\r\n",
            a.path
        );
        conn.write_all(request.as_bytes())?;
        let mut raw = Vec::new();
        conn.take(MAX_BODY as u64 + 4096).read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| ToolError::failed("the server did not answer with HTTP"))?;
        let body: String = body.chars().take(MAX_BODY).collect();
        self.fetched += 1;
        self.recent.push(json!({
            "n": self.fetched, "addr": a.addr, "path": a.path,
            "status": status, "bytes": body.len(),
        }));
        if self.recent.len() > IN_STATE {
            self.recent.remove(0);
        }
        self.last_body = body.clone();
        Ok(json!({ "status": status, "body": body }))
    }
}

impl Tick for Fetch {
    const KIND: &'static str = "example.fetch";
    const TITLE: &'static str = "Fetch";
    const DESCRIPTION: &'static str = "Fetches pages over HTTP from granted addresses.";
    const SERIES: &'static [Series] = &[Series::newest_last("/recent")];

    fn state(&self) -> impl Serialize {
        json!({ "fetched": self.fetched, "recent": self.recent })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        // Mutates: each fetch is recorded in this Tick's state (§5.6).
        tools.add(
            "get",
            "Fetch a path from host:port over HTTP/1.0 and return status and body.",
            Effect::Mutates,
            Self::get,
        );
    }

    fn view(&self, frame: &mut Frame) {
        let [list, body] =
            Layout::vertical([Constraint::Length(8), Constraint::Min(3)]).areas(frame.area());
        let lines: Vec<Line> = self
            .recent
            .iter()
            .rev()
            .map(|r| {
                Line::from(format!(
                    "#{} {}{} → {} ({} bytes)",
                    r["n"],
                    r["addr"].as_str().unwrap_or(""),
                    r["path"].as_str().unwrap_or(""),
                    r["status"],
                    r["bytes"]
                ))
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Fetches ")),
            list,
        );
        frame.render_widget(
            Paragraph::new(self.last_body.as_str())
                .wrap(Wrap { trim: false })
                .block(Block::default().borders(Borders::ALL).title(" Last body ")),
            body,
        );
    }
}

tickbox_guest::main!(Fetch);
