//! `/metrics` beside MCP over HTTP, served by the facade in this process
//! with the hosted Ticks' audit streams counted (as `tickbox mcp --http …
//! --metrics` serves it): a real Prometheus server (Debian's
//! `prometheus`, installed by `tests/setup.sh`) scrapes the page and its
//! query API gives back the calls, durations, refusals, limits, live
//! Ticks, sessions and memory the host counted; the page's door (its own
//! token, header only, in neither direction the MCP token; its one path;
//! its own bounded connections, which take no MCP slot); a Tick
//! publishing more tool names than the cap keeps a bounded page, the first
//! names each with their series (the positive control); a hostile tool
//! name only escaped. The flags, the token file and the exit codes stay in
//! `cli/tests/it/metrics.rs`.

use crate::server::{HttpServer, Page};
use crate::{shifty, wasm};
use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tickbox_mcp::http::metrics::{METRICS_MAX_CONNECTIONS, METRICS_MAX_UNAUTHENTICATED};
use tickbox_mcp::Grants;
use tickbox_protocol::text::{escape, is_unsafe};
use tickbox_telemetry::metrics::{label_value, MAX_METRIC_TOOLS_PER_TICK};
use tickbox_test_support::mcp_http::{
    call_tool, closed_by_server, header, initialize_http, send_for_short_answer,
};
use tickbox_test_support::registry::free_port;
use tickbox_test_support::{
    assert_inert_by, build_wasm, eventually, hostile, http, sample, shows_escaped, TempDir,
};

/// How long to wait for Prometheus to start and scrape: generous, since
/// the machine may be loaded; only reached when the test is failing.
const PROMETHEUS_PATIENCE: Duration = Duration::from_secs(180);

impl Page {
    /// `GET path` with `token` (none: no `Authorization`): status, headers
    /// and body.
    pub(crate) fn get(
        &self,
        path: &str,
        token: Option<&str>,
    ) -> (u16, Vec<(String, String)>, String) {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .as_deref()
            .map(|b| vec![("Authorization", b)])
            .unwrap_or_default();
        let (status, headers, body) = http(self.port, "GET", path, &headers, b"");
        (status, headers, String::from_utf8(body).expect("UTF-8"))
    }

    /// The page, scraped with its token.
    pub(crate) fn scrape(&self) -> String {
        let (status, _, body) = self.get("/metrics", Some(&self.token));
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// The page of a server started metered.
fn page(server: &HttpServer) -> &Page {
    server.page.as_ref().expect("served with /metrics")
}

/// shifty.py alone, metered.
fn metered_shifty() -> HttpServer {
    HttpServer::start_metered(vec![(Some("shifty"), shifty(&[]))])
}

/// `tools/call NAME` on `session`; the result.
fn call(server: &HttpServer, session: &str, name: &str, args: Value) -> Value {
    call_tool(server, session, 7, name, args)
}

/// A running Prometheus server on loopback scraping one target every
/// second (a slow scrape has 900 ms), its storage in a temp dir; killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Prometheus {
    /// Scraping `page`, with its token from a file (as a scraper keeps it).
    fn start(page: &Page) -> Prometheus {
        let dir = TempDir::new("prometheus");
        let token_file = dir.path("token");
        std::fs::write(&token_file, &page.token).unwrap();
        let target_port = page.port;
        let config = dir.path("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n\
                 scrape_configs:\n  - job_name: tickbox\n    authorization:\n      \
                 credentials_file: {}\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n",
                token_file.display()
            ),
        )
        .unwrap();
        // A port taken between choosing and binding makes it exit: try another.
        let log = || std::fs::read_to_string(dir.path("prometheus.log")).unwrap_or_default();
        for _ in 0..5 {
            let port = free_port();
            let stderr = std::fs::File::create(dir.path("prometheus.log")).unwrap();
            let mut child = Command::new("prometheus")
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .expect("prometheus (Debian package prometheus; tests/setup.sh installs it)");
            let mut exited = || child.try_wait().ok().flatten().is_some();
            let ready = eventually(PROMETHEUS_PATIENCE, || {
                exited()
                    || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                        && http(port, "GET", "/-/ready", &[], b"").0 == 200
            });
            if ready && !exited() {
                return Prometheus { child, port, dir };
            }
            let gone = exited();
            let _ = child.kill();
            let _ = child.wait();
            assert!(
                gone,
                "prometheus not ready in {PROMETHEUS_PATIENCE:?}: {}",
                log()
            );
        }
        panic!("prometheus did not start");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path("prometheus.log")).unwrap_or_default()
    }

    /// An instant query through the HTTP API: each series' labels and value.
    fn query(&self, q: &str) -> Vec<(Value, f64)> {
        let path = format!("/api/v1/query?query={}", percent(q));
        let (status, _, body) = http(self.port, "GET", &path, &[], b"");
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        assert_eq!(status, 200, "{q}: {v}");
        v["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let value = r["value"][1].as_str().unwrap_or("NaN").parse().unwrap();
                (r["metric"].clone(), value)
            })
            .collect()
    }

    /// Waits until `q` gives one series whose value satisfies `ok`; panics
    /// with what it last gave (and Prometheus's log) otherwise.
    fn wait_for(&self, q: &str, ok: impl Fn(f64) -> bool) -> Value {
        let found = self.wait_until(q, |r| r.len() == 1 && ok(r[0].1));
        found[0].0.clone()
    }

    /// Waits until what `q` gives satisfies `ok`, and returns it; panics
    /// with what it last gave (and Prometheus's log) otherwise.
    fn wait_until(&self, q: &str, ok: impl Fn(&[(Value, f64)]) -> bool) -> Vec<(Value, f64)> {
        let mut last = Vec::new();
        let found = eventually(PROMETHEUS_PATIENCE, || {
            last = self.query(q);
            ok(&last)
        });
        assert!(
            found,
            "{q} gave {last:?} after {PROMETHEUS_PATIENCE:?}; targets: {}; log: {}",
            self.targets(),
            self.log()
        );
        last
    }

    fn targets(&self) -> String {
        String::from_utf8_lossy(&http(self.port, "GET", "/api/v1/targets", &[], b"").2).into()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` percent-encoded for a query string.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Two Ticks behind one facade with `/metrics`: the example counter
/// (wasm), called three times, and the hostile guest with a directory
/// grant and a 16 MiB memory bound, which reads inside its grant (the
/// control), reads past it (one `path` refusal) and grows past its bound
/// (one `max_memory` limit, and the Tick ends). A real Prometheus scrapes
/// the page with the token from its file, and its query API gives back
/// each of these, the durations, the live Ticks, the one MCP session and
/// the host's memory.
#[test]
fn a_real_prometheus_scrapes_calls_refusals_limits_and_sessions() {
    let data = TempDir::new("metrics-data");
    std::fs::write(data.path("hello.txt"), "hello").unwrap();
    let counter = build_wasm("examples", "counter", "wasm32-wasip2");
    let grants = Grants {
        dir: vec![format!("{}::/data", data.0.display())],
        max_memory: Some("16MiB".into()),
        ..Grants::default()
    };
    let server = HttpServer::start_metered(vec![
        (
            Some("counter"),
            wasm(counter.to_str().unwrap(), &Grants::default()),
        ),
        (Some("hostile"), wasm(&hostile(), &grants)),
    ]);
    let page = page(&server);
    let session = initialize_http(&server, &[]);
    for _ in 0..3 {
        let r = call(&server, &session, "counter_increment", json!({"amount": 2}));
        assert_eq!(r["isError"], false, "{r}");
    }
    let r = call(
        &server,
        &session,
        "hostile_read_file",
        json!({"path": "/data/hello.txt"}),
    );
    assert_eq!(r["structuredContent"]["value"], "hello", "{r}");
    let r = call(
        &server,
        &session,
        "hostile_read_file",
        json!({"path": "/data/../../../../etc/passwd"}),
    );
    assert_eq!(r["structuredContent"]["ok"], false, "{r}");
    let r = call(&server, &session, "hostile_grow", json!({"mb": 64}));
    assert_eq!(r["isError"], true, "past its memory bound: {r}");

    // The page itself first, so a failure here says so without Prometheus.
    let scraped = page.scrape();
    let has = |series: &str, value: f64| {
        assert_eq!(
            sample(&scraped, series),
            Some(value),
            "{series} in:\n{scraped}"
        );
    };
    has(
        r#"tickbox_calls_total{tick="counter",tool="increment",outcome="ok"}"#,
        3.0,
    );
    has(r#"tickbox_refusals_total{tick="hostile",kind="path"}"#, 1.0);
    has(
        r#"tickbox_limits_total{tick="hostile",bound="max_memory"}"#,
        1.0,
    );

    let prometheus = Prometheus::start(page);
    prometheus.wait_for(r#"up{job="tickbox"}"#, |v| v == 1.0);
    let series = prometheus.wait_for(
        r#"tickbox_calls_total{tick="counter",tool="increment",outcome="ok"}"#,
        |v| v == 3.0,
    );
    assert_eq!(series["instance"], format!("127.0.0.1:{}", page.port));
    prometheus.wait_for(
        r#"tickbox_calls_total{tick="hostile",tool="read_file",outcome="ok"}"#,
        |v| v == 2.0,
    );
    prometheus.wait_for(
        r#"tickbox_call_duration_seconds_count{tick="counter",tool="increment"}"#,
        |v| v == 3.0,
    );
    prometheus.wait_for(
        r#"tickbox_call_duration_seconds_bucket{tick="counter",tool="increment",le="+Inf"}"#,
        |v| v == 3.0,
    );
    prometheus.wait_for(
        r#"tickbox_call_duration_seconds_sum{tick="counter",tool="increment"}"#,
        |v| v > 0.0 && v < 180.0,
    );
    prometheus.wait_for(
        r#"tickbox_refusals_total{tick="hostile",kind="path"}"#,
        |v| v == 1.0,
    );
    // Positive control of the refusal: the counter was refused nothing.
    prometheus.wait_for(
        r#"tickbox_refusals_total{tick="counter",kind="path"}"#,
        |v| v == 0.0,
    );
    prometheus.wait_for(
        r#"tickbox_limits_total{tick="hostile",bound="max_memory"}"#,
        |v| v == 1.0,
    );
    prometheus.wait_for(r#"tickbox_ticks_live{tick="counter"}"#, |v| v == 1.0);
    prometheus.wait_for(r#"tickbox_ticks_live{tick="hostile"}"#, |v| v == 0.0);
    prometheus.wait_for("tickbox_mcp_sessions", |v| v == 1.0);
    prometheus.wait_for("tickbox_host_resident_memory_bytes", |v| v > 1_048_576.0);
}

/// The page's door: never without its token, also on loopback; the token
/// only as a header (a URL would show it on Prometheus's targets page);
/// neither token opens the other door; one path, `GET` only.
#[test]
fn the_page_needs_its_own_token_and_serves_only_its_path() {
    let server = metered_shifty();
    let page = page(&server);
    let token = page.token.clone();
    let mcp_token = server.token.clone().expect("the MCP token");
    assert_ne!(token, mcp_token);

    let (status, headers, _) = page.get("/metrics", None);
    assert_eq!(status, 401, "{headers:?}");
    assert_eq!(header(&headers, "www-authenticate"), Some("Bearer"));
    assert_eq!(
        page.get("/metrics", Some(&mcp_token)).0,
        401,
        "not the MCP token"
    );
    assert_eq!(page.get("/metrics", Some("0123456789abcdef")).0, 401);
    let in_query = format!("/metrics?token={token}");
    assert_eq!(page.get(&in_query, None).0, 401, "the header only");
    // And the metrics token opens no MCP request.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(server.post_as(Some(&token), "/mcp", &[], &ping).0, 401);

    // Positive control: the token as a header gets the page.
    let (status, headers, body) = page.get("/metrics", Some(&token));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(
        sample(&body, r#"tickbox_ticks_live{tick="shifty"}"#),
        Some(1.0),
        "{body}"
    );
    assert_eq!(sample(&body, "tickbox_mcp_sessions"), Some(0.0));
    assert_eq!(page.get("/", Some(&token)).0, 404);
    assert_eq!(page.get("/mcp", Some(&token)).0, 404);
    let bearer = format!("Bearer {token}");
    let (status, _, _) = http(
        page.port,
        "POST",
        "/metrics",
        &[("Authorization", &bearer)],
        b"",
    );
    assert_eq!(status, 405);

    // A session opened on MCP is on the page.
    let _session = initialize_http(&server, &[]);
    assert_eq!(sample(&page.scrape(), "tickbox_mcp_sessions"), Some(1.0));
}

/// A Tick that publishes three times as many tool names as one Tick's
/// series may carry, and has each called: the page keeps the first names
/// each under its own `tool` (the positive control: they are counted one
/// by one) and the rest under `tool="(other)"`, and every call is counted.
#[test]
fn a_tick_publishing_thousands_of_tool_names_keeps_a_bounded_page() {
    let server = metered_shifty();
    let page = page(&server);
    let session = initialize_http(&server, &[]);
    let names: Vec<String> = (0..MAX_METRIC_TOOLS_PER_TICK * 3)
        .map(|i| format!("t{i:04}"))
        .collect();
    call(&server, &session, "reshape", json!({"tools": names}));
    let (status, _, _) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    assert_eq!(status, 200);
    // `reshape` took one series, so MAX - 1 of these get their own.
    let called = MAX_METRIC_TOOLS_PER_TICK + 10;
    for name in &names[..called] {
        let r = call(&server, &session, name, json!({"n": name}));
        assert_eq!(r["isError"], false, "{name}: {r}");
    }
    let scraped = page.scrape();
    let tools: Vec<&str> = scraped
        .lines()
        .filter(|l| {
            l.starts_with(r#"tickbox_calls_total{tick="shifty","#) && l.contains(r#"outcome="ok""#)
        })
        .map(|l| {
            l.split("tool=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(tools.len(), MAX_METRIC_TOOLS_PER_TICK + 1, "{scraped}");
    assert!(tools.contains(&"(other)"), "{tools:?}");
    let ok = |tool: &str| {
        let series = format!(r#"tickbox_calls_total{{tick="shifty",tool="{tool}",outcome="ok"}}"#);
        sample(&scraped, &series)
    };
    assert_eq!(ok("reshape"), Some(1.0));
    assert_eq!(ok("t0000"), Some(1.0));
    let last_kept = format!("t{:04}", MAX_METRIC_TOOLS_PER_TICK - 2);
    assert_eq!(ok(&last_kept), Some(1.0));
    let first_folded = format!("t{:04}", MAX_METRIC_TOOLS_PER_TICK - 1);
    assert_eq!(ok(&first_folded), None);
    let folded = called - (MAX_METRIC_TOOLS_PER_TICK - 1);
    assert_eq!(ok("(other)"), Some(folded as f64));
    let histograms = scraped
        .lines()
        .filter(|l| l.starts_with("tickbox_call_duration_seconds_count{"))
        .count();
    assert_eq!(histograms, MAX_METRIC_TOOLS_PER_TICK + 1);
}

/// Opens a keep-alive connection to the page's port and sends one
/// request with the token for a path it does not serve (a short answer);
/// the connection and the answer's text.
fn held_connection(page: &Page, token: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(("127.0.0.1", page.port)).expect("connect");
    s.set_read_timeout(Some(PROMETHEUS_PATIENCE)).unwrap();
    let head = format!(
        "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    // Both answers (404, 503) end their text with a newline.
    let got = send_for_short_answer(&mut s, &head);
    (s, got)
}

/// The page's door is its own: half-sent heads past its bound are closed
/// (the oldest first, the rest at the authentication timeout) and do not
/// keep out a scraper with the token; authenticated connections stop at
/// `METRICS_MAX_CONNECTIONS` (503, closed), and while they are all held
/// MCP still takes a client: the page's connections take no MCP slot.
#[test]
fn the_pages_door_is_bounded_and_takes_no_mcp_slot() {
    let server = metered_shifty();
    let page = page(&server);
    let token = page.token.clone();
    let mut heads: Vec<TcpStream> = (0..METRICS_MAX_UNAUTHENTICATED * 3)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", page.port)).expect("connect");
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz")
                .unwrap();
            s
        })
        .collect();
    // Positive control: a scraper sending its request at once gets in.
    assert!(page
        .scrape()
        .contains("tickbox_ticks_live{tick=\"shifty\"} 1\n"));
    for (i, s) in heads.iter_mut().enumerate() {
        assert!(closed_by_server(s), "half-sent head {i} is still open");
    }

    let mut held = Vec::new();
    for i in 0..METRICS_MAX_CONNECTIONS {
        let (s, text) = held_connection(page, &token);
        assert!(text.starts_with("HTTP/1.1 404"), "connection {i}: {text}");
        held.push(s);
    }
    let (mut extra, text) = held_connection(page, &token);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.contains(&format!(
            "{METRICS_MAX_CONNECTIONS} authenticated metrics connections"
        )),
        "{text}"
    );
    assert!(
        closed_by_server(&mut extra),
        "refused connections are closed"
    );
    // Every page slot is held, and MCP still serves a new client.
    let session = initialize_http(&server, &[]);
    let r = call(&server, &session, "echo", json!({"while": "held"}));
    assert_eq!(r["structuredContent"], json!({"while": "held"}), "{r}");
    // One held connection ends: its slot is free again.
    drop(held.pop());
    assert!(
        eventually(PROMETHEUS_PATIENCE, || held_connection(page, &token)
            .1
            .starts_with("HTTP/1.1 404")),
        "a slot given back"
    );
}

/// A tool name with the corpus's kinds of characters (terminal controls,
/// a line break, bidi and separator characters) and the format's own
/// (quotes, a backslash), shaped to forge a sample of another Tick.
const HOSTILE_TOOL: &str = "x\"} 1e9\ntickbox_calls_total{tick=\"forged\",tool=\"t\",outcome=\"ok\"} 7\r\n\x1b]2;pwned\x07\u{9b}31m\u{202e}\u{2028}\u{e0041}\\";

/// A Tick publishes [`HOSTILE_TOOL`] and a live client calls it through
/// its session (MCP withholds a name it cannot take; a live instance's
/// clients call tools by their own names): the page carries no raw unsafe character and no
/// forged sample, only the name escaped (the positive control), and a
/// real Prometheus parses the page (`up` is 1) and reads the label back as
/// the escaped text, with no series of the forged Tick.
#[test]
fn a_hostile_tool_name_reaches_the_page_and_prometheus_only_escaped() {
    let server = metered_shifty();
    let page = page(&server);
    let session = initialize_http(&server, &[]);
    call(
        &server,
        &session,
        "reshape",
        json!({"tools": [HOSTILE_TOOL]}),
    );
    let r = server.call_through(0, HOSTILE_TOOL, json!({"n": 1}));
    assert!(r.is_ok(), "{r:?}");

    let scraped = page.scrape();
    assert_inert_by("/metrics", &scraped, is_unsafe);
    assert!(shows_escaped(&scraped), "{scraped}");
    for line in scraped.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            !line.starts_with(r#"tickbox_calls_total{tick="forged""#),
            "a forged sample: {line}"
        );
    }
    let series = format!(
        r#"tickbox_calls_total{{tick="shifty",tool="{}",outcome="ok"}}"#,
        label_value(HOSTILE_TOOL)
    );
    assert_eq!(
        sample(&scraped, &series),
        Some(1.0),
        "{series} in:\n{scraped}"
    );
    assert!(
        !label_value(HOSTILE_TOOL).contains('\n'),
        "one line per sample"
    );

    let prometheus = Prometheus::start(page);
    prometheus.wait_for(r#"up{job="tickbox"}"#, |v| v == 1.0);
    let shown = escape(HOSTILE_TOOL);
    prometheus.wait_until(r#"tickbox_calls_total{tick="shifty",outcome="ok"}"#, |r| {
        r.iter()
            .any(|(m, v)| m["tool"] == shown.as_str() && *v == 1.0)
    });
    assert_eq!(
        prometheus.query(r#"tickbox_calls_total{tick="forged"}"#),
        Vec::new(),
        "no series of the forged Tick"
    );
}
