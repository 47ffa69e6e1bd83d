//! Fetches pages over HTTP(S) from origins the user granted.
//!
//! Sandboxed, a Tick reaches no network at all until the user grants an
//! origin: `tickbox call fetch.wasm get '{"url":"http://127.0.0.1:8080/"}' --yes --allow-http http://127.0.0.1:8080`.
//! The request goes through `wasi:http` (the SDK's [`tickbox_guest::http`]):
//! the host checks the origin (scheme, host and port), does TLS for
//! `https://`, and follows no redirects. Without the grant the host refuses
//! with `HTTP-request-denied` and the tool says which grant is missing;
//! nothing was sent, so the error is "not executed".
//!
//! The fetch blocks inside the call: fine for a quick request. A slow
//! download would instead start from a tool that returns at once and
//! continue in timer steps (see the dashboard).

use tickbox_guest::http;
use tickbox_guest::prelude::*;

/// Bytes of a response read; a longer body is an error (results stay small).
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
    /// `http://host:port/path` or `https://...`; its origin must be granted.
    url: String,
}

/// `scheme://host[:port]` of a URL, for the grant the user would give.
fn origin(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    match url[after..].find(['/', '?', '#']) {
        Some(i) => &url[..after + i],
        None => url,
    }
}

impl Fetch {
    fn get(&mut self, a: Get, _: &mut Ctx) -> Result<Value, ToolError> {
        let mut request = http::Request::new("GET", &a.url);
        request.max_body = MAX_BODY;
        let response = request.send().map_err(|e| match e {
            // Nothing was sent, so nothing happened anywhere.
            http::Error::Url(_) => {
                ToolError::rejected(format!("{e}; give http://host:port/path or https://..."))
            }
            http::Error::Code(c) if c == "HTTP-request-denied" => ToolError::rejected(format!(
                "{c}: a sandboxed Tick needs `--allow-http {}`",
                origin(&a.url)
            )),
            http::Error::Code(c) if c == "connection-refused" => {
                ToolError::rejected(format!("cannot connect to {}: {c}", origin(&a.url)))
            }
            other => ToolError::failed(other.to_string()),
        })?;
        let body = String::from_utf8_lossy(&response.body).into_owned();
        self.fetched += 1;
        self.recent.push(json!({
            "n": self.fetched, "url": a.url,
            "status": response.status, "bytes": response.body.len(),
        }));
        if self.recent.len() > IN_STATE {
            self.recent.remove(0);
        }
        self.last_body = body.clone();
        Ok(json!({ "status": response.status, "body": body }))
    }
}

impl Tick for Fetch {
    const KIND: &'static str = "example.fetch";
    const TITLE: &'static str = "Fetch";
    const DESCRIPTION: &'static str = "Fetches pages over HTTP(S) from granted origins.";
    const SERIES: &'static [Series] = &[Series::newest_last("/recent")];

    fn state(&self) -> impl Serialize {
        json!({ "fetched": self.fetched, "recent": self.recent })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        // Mutates: each fetch is recorded in this Tick's state (§5.6).
        tools.add(
            "get",
            "GET a URL over HTTP(S) and return status and body (redirects are not followed).",
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
                    "#{} {} → {} ({} bytes)",
                    r["n"],
                    r["url"].as_str().unwrap_or(""),
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
