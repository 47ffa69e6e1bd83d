//! `tickbox inspect`: its door attacked through the wire (raw HTTP on
//! loopback: no token, a wrong token, the right one in a cookie or the
//! query, a foreign `Host`, a foreign or missing `Origin`, each beside a
//! request that gets in), its bounds (event
//! streams, action bodies) hit and passed back under, a hostile Tick's
//! markup carried only as data, a trimmed state shown as trimmed, a live
//! instance (`@NAME`, hosted by `tickbox run`) inspected through its socket
//! to its end, and the page driven in headless Chromium (Debian's chromium
//! and chromedriver through Selenium, `tests/browser/inspect_page.py`): the
//! counter's screen, a confirmed call, a key typed into the screen, the
//! host's refusal of bad arguments, an export, the hostile Tick running
//! nothing, the same for a live instance, and a browser that used the page
//! (opened as `--open` opens it) sending nothing with the token to another
//! user's server on another loopback port (`tests/browser/witness.py`).
//!
//! The screenshot in README (`docs/inspect.png`) is the counter test's:
//! `INSPECT_SCREENSHOT=$PWD/docs/inspect.png cargo test --workspace --test it inspect::the_counter`.

use crate::live::World;
use crate::util::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Generous: the machine may be loaded (two busy cores).
const PATIENCE: Duration = Duration::from_secs(90);

/// `tickbox inspect` on a random loopback port, killed (with its Tick) on drop.
struct Inspect {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
    token: String,
}

impl Inspect {
    fn start(args: &[String]) -> Inspect {
        Inspect::start_env(args, &[])
    }

    /// [`Inspect::start`] with more environment (a live-instance world's).
    fn start_env(args: &[String], env: &[(&str, &str)]) -> Inspect {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .arg("inspect")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .env("TICKBOX_CACHE_DIR", target_dir().join("test-wasm-cache"))
            .env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"))
            .spawn()
            .expect("spawn tickbox inspect");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("stderr ended before the URL")
                .expect("stderr");
            if let Some(url) = line.strip_prefix("tickbox inspect: serving the page on ") {
                break url.to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        let rest = url.strip_prefix("http://").expect("an http URL");
        let (addr, token) = rest
            .split_once("/#token=")
            .expect("a token in the URL's fragment");
        assert!(addr.starts_with("127.0.0.1:"), "loopback by default: {url}");
        assert_eq!(token.len(), 64, "32 random bytes as hex: {url}");
        Inspect {
            child,
            addr: addr.to_string(),
            token: token.to_string(),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/#token={}", self.addr, self.token)
    }

    fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// One raw HTTP/1.1 request with these extra header lines (and `Host`
    /// unless one is given); the status, the head and the body.
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[String],
        body: &str,
    ) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("host:"))
        {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
        (status, head.to_string(), body.to_string())
    }

    fn bearer(&self) -> String {
        format!("Authorization: Bearer {}", self.token)
    }

    /// `GET /api/snapshot` with the token: everything the page is shown.
    fn snapshot(&self) -> Value {
        let (status, _, body) = self.request("GET", "/api/snapshot", &[self.bearer()], "");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).expect("snapshot JSON")
    }

    /// A POST action as the page sends it (token, own Origin, JSON).
    fn act(&self, path: &str, body: &str) -> (u16, String) {
        let (status, _, body) = self.request(
            "POST",
            path,
            &[
                self.bearer(),
                format!("Origin: {}", self.origin()),
                "Content-Type: application/json".into(),
            ],
            body,
        );
        (status, body)
    }
}

impl Drop for Inspect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn native_counter() -> Vec<String> {
    vec!["--".into(), "python3".into(), tick("counter.py")]
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[test]
fn the_door_wants_the_token_its_own_host_and_its_own_origin() {
    let i = Inspect::start(&native_counter());
    // The page's picture has the first state (sent as a subscriber gets it).
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 0),
        "{}",
        i.snapshot()["state"]
    );
    // No token, a wrong one: 401, on every route with the Tick's data or
    // actions.
    for path in [
        "/api/snapshot",
        "/events",
        "/api/export/scenario",
        "/nothing",
    ] {
        let (status, head, _) = i.request("GET", path, &[], "");
        assert_eq!(status, 401, "{path} without the token");
        assert_eq!(header(&head, "www-authenticate"), Some("Bearer"), "{head}");
    }
    let wrong = "0".repeat(64);
    let (status, _, _) = i.request(
        "GET",
        "/api/snapshot",
        &[format!("Authorization: Bearer {wrong}")],
        "",
    );
    assert_eq!(status, 401, "a wrong token");
    let (status, _, _) = i.request("GET", "/api/snapshot", &[i.bearer()], "");
    assert_eq!(status, 200, "the right one (the control)");

    // The page, its script and its style are public (tickbox's own files:
    // the printed URL's token is in the fragment, which the first load
    // cannot send), with the CSP and no cookie.
    for (path, kind) in [
        ("/", "text/html"),
        ("/inspect.js", "text/javascript"),
        ("/inspect.css", "text/css"),
    ] {
        let (status, head, _) = i.request("GET", path, &[], "");
        assert_eq!(status, 200, "{path}: {head}");
        assert!(
            header(&head, "content-type").is_some_and(|t| t.starts_with(kind)),
            "{path}: {head}"
        );
        assert_eq!(header(&head, "set-cookie"), None, "{path}: {head}");
    }
    let (status, head, body) = i.request("GET", "/", &[], "");
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("<script src=\"/inspect.js\""), "{body}");
    assert!(!body.contains(&i.token), "the page holds no token");
    // Without JavaScript (a headless dump of the DOM) the page says what
    // it needs, rather than only "connecting…".
    assert!(body.contains("<noscript>"), "{body}");
    assert!(body.contains("needs JavaScript"), "{body}");
    let csp = header(&head, "content-security-policy").expect("a CSP");
    for part in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(header(&head, "x-content-type-options"), Some("nosniff"));
    assert_eq!(header(&head, "referrer-policy"), Some("no-referrer"));
    // Only GET: a POST to the page's path is behind the token like any.
    let (status, _, _) = i.request(
        "POST",
        "/",
        &[
            format!("Origin: {}", i.origin()),
            "Content-Type: application/json".into(),
        ],
        "{}",
    );
    assert_eq!(status, 401, "a POST to / without the token");

    // A foreign Host (a rebound name) is refused even with the token.
    for host in [
        "evil.example",
        &format!("evil.example:{}", i.port()),
        "127.0.0.1:1",
    ] {
        let (status, _, body) = i.request(
            "GET",
            "/api/snapshot",
            &[i.bearer(), format!("Host: {host}")],
            "",
        );
        assert_eq!(status, 403, "Host {host}: {body}");
    }
    let (status, _, _) = i.request(
        "GET",
        "/api/snapshot",
        &[i.bearer(), format!("Host: localhost:{}", i.port())],
        "",
    );
    assert_eq!(status, 200, "localhost with our port is ours");

    // Actions: another site's Origin, or none, is refused; ours gets in.
    let key = r#"{"bytes": "+"}"#;
    for origin in [
        Some("http://evil.example".to_string()),
        Some("null".into()),
        Some("http://127.0.0.1:1".into()),
        None,
    ] {
        let mut headers = vec![i.bearer(), "Content-Type: application/json".to_string()];
        if let Some(o) = &origin {
            headers.push(format!("Origin: {o}"));
        }
        let (status, _, body) = i.request("POST", "/api/keys", &headers, key);
        assert_eq!(status, 403, "Origin {origin:?}: {body}");
    }
    let (status, _, _) = i.request(
        "GET",
        "/api/snapshot",
        &[i.bearer(), "Origin: http://evil.example".into()],
        "",
    );
    assert_eq!(status, 403, "a cross-origin read too");
    assert_eq!(
        i.snapshot()["state"]["data"]["value"],
        0,
        "nothing refused reached the Tick"
    );
    let (status, body) = i.act("/api/keys", key);
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 1),
        "the key reached the Tick: {}",
        i.snapshot()
    );
    // A form post (not JSON) is refused even from our own origin.
    let (status, _, _) = i.request(
        "POST",
        "/api/keys",
        &[
            i.bearer(),
            format!("Origin: {}", i.origin()),
            "Content-Type: application/x-www-form-urlencoded".into(),
        ],
        "bytes=%2B",
    );
    assert_eq!(status, 415);
}

/// The token's old carrier was a cookie, and a browser sends a cookie for
/// 127.0.0.1 to every port there: another local user's server got it and
/// used it. Now the token counts only as `Authorization: Bearer`; in a
/// cookie (or the query) it opens nothing, not even a read.
#[test]
fn the_token_counts_only_as_a_header_never_as_a_cookie_or_in_the_query() {
    let i = Inspect::start(&native_counter());
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 0),
        "{}",
        i.snapshot()["state"]
    );
    let t = &i.token;
    let own = format!("Origin: {}", i.origin());
    let json = "Content-Type: application/json".to_string();
    // What the red team did with the stolen cookie: a confirmed mutating
    // call and keys typed into the Tick; reads too.
    let call = r#"{"tool": "increment", "args": {"amount": 5}, "confirm": {"tool": "increment", "revision": "1"}}"#;
    let key = r#"{"bytes": "+"}"#;
    let tries: [(&str, &str, &str); 6] = [
        ("GET", "/api/snapshot", ""),
        ("GET", "/events", ""),
        ("GET", "/api/export/scenario", ""),
        ("GET", "/api/export/audit", ""),
        ("POST", "/api/call", call),
        ("POST", "/api/keys", key),
    ];
    let cookies = [
        format!("Cookie: tickbox-inspect-{}={t}", i.port()),
        format!("Cookie: token={t}"),
        format!("Cookie: a=b; tickbox-inspect-{}={t}; token={t}", i.port()),
    ];
    for cookie in &cookies {
        for (method, path, body) in tries {
            let mut headers = vec![cookie.clone()];
            if method == "POST" {
                headers.extend([own.clone(), json.clone()]);
            }
            let (status, head, _) = i.request(method, path, &headers, body);
            assert_eq!(status, 401, "{cookie} on {method} {path}: {head}");
        }
    }
    // In the query (an EventSource's only way; the page uses none).
    for (method, path, body) in tries {
        let mut headers = Vec::new();
        if method == "POST" {
            headers.extend([own.clone(), json.clone()]);
        }
        let path = format!("{path}?token={t}");
        let (status, head, _) = i.request(method, &path, &headers, body);
        assert_eq!(status, 401, "{method} {path}: {head}");
    }
    assert_eq!(
        i.snapshot()["state"]["data"]["value"],
        0,
        "nothing a refused request carried reached the Tick"
    );
    // The control: the same requests with the header get in (a stale
    // cookie beside it changes nothing), and no answer sets a cookie.
    for (method, path, body) in tries {
        let mut headers = vec![i.bearer(), cookies[0].clone()];
        if method == "POST" {
            headers.extend([own.clone(), json.clone()]);
        }
        if path == "/events" {
            let (status, _s, stream) = open_events(&i);
            assert_eq!(status, 200, "{stream}");
            assert_eq!(header(&stream, "set-cookie"), None, "{stream}");
            continue;
        }
        let (status, head, answer) = i.request(method, path, &headers, body);
        assert_eq!(status, 200, "{method} {path}: {head}\n{answer}");
        assert_eq!(header(&head, "set-cookie"), None, "{method} {path}: {head}");
    }
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 6),
        "the call (5) and the key (1) with the header: {}",
        i.snapshot()["state"]
    );
}

#[test]
fn calls_are_validated_by_the_host_and_mutating_ones_confirmed_for_the_revision() {
    let i = Inspect::start(&native_counter());
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 0),
        "{}",
        i.snapshot()["state"]
    );
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": "x"}}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("is not of type"),
        "the host's message: {body}"
    );
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}}"#,
    );
    assert_eq!(status, 409, "a mutating call needs a confirmation: {body}");
    let asked: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(asked["confirm"]["tool"], "increment");
    assert_eq!(asked["confirm"]["revision"], "1");
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}, "confirm": {"tool": "increment", "revision": "0"}}"#,
    );
    assert_eq!(
        status, 409,
        "a confirmation for another revision is none: {body}"
    );
    assert_eq!(
        i.snapshot()["state"]["data"]["value"],
        0,
        "nothing unconfirmed ran"
    );
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}, "confirm": {"tool": "increment", "revision": "1"}}"#,
    );
    assert_eq!(status, 200, "{body}");
    let done: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(done["ok"]["value"], 2, "{done}");
    assert!(done["latency_ms"].is_u64(), "{done}");
    // The state follows as a subscriber's delivery (within an interval).
    let mut snap = Value::Null;
    assert!(
        eventually(PATIENCE, || {
            snap = i.snapshot();
            snap["state"]["data"]["value"] == 2
        }),
        "{snap}"
    );
    assert!(snap["state"]["seq"].as_u64() >= Some(1), "{snap}");
    let changed = snap["state"]["changed"].as_array().unwrap();
    assert!(changed.iter().any(|p| p == "/value"), "{snap}");
    // The timeline has the call both ways, the response with its latency.
    let frames = snap["frames"].as_array().unwrap();
    let call = frames
        .iter()
        .find(|f| f["method"] == "tick/call" && f["dir"] == "to tick")
        .unwrap_or_else(|| panic!("no call in {frames:?}"));
    let answer = frames
        .iter()
        .find(|f| f["id"] == call["id"] && f["dir"] == "from tick" && f["method"] == "")
        .unwrap_or_else(|| panic!("no answer in {frames:?}"));
    assert!(answer["latency_ms"].is_u64(), "{answer}");
    // The exports: a scenario with the call, the audit stream with the
    // approval and the call.
    let (status, _, scenario) = i.request("GET", "/api/export/scenario", &[i.bearer()], "");
    assert_eq!(status, 200);
    assert!(
        scenario.contains("call = \"increment\"") && scenario.contains("amount = 2"),
        "{scenario}"
    );
    let (status, _, audit) = i.request("GET", "/api/export/audit", &[i.bearer()], "");
    assert_eq!(status, 200);
    assert!(
        audit.contains("\"event\":\"approval\"") && audit.contains("\"event\":\"call\""),
        "{audit}"
    );
}

/// The markup the hostile Tick puts in every string.
const MARKUP: [&str; 3] = [
    "<script>window.__pwned",
    "<img src=x onerror=",
    "<svg onload=",
];

#[test]
fn a_hostile_ticks_markup_reaches_the_page_only_as_data() {
    let i = Inspect::start(&["--".into(), "python3".into(), tick("webhostile.py")]);
    assert!(
        eventually(PATIENCE, || {
            let s = i.snapshot();
            s["screen"]["lines"].to_string().contains("SCREEN") && s["state"]["seq"].is_u64()
        }),
        "the screen and the state"
    );
    let (status, body) = i.act("/api/call", r#"{"tool": "fail", "args": {}}"#);
    assert_eq!(status, 200, "{body}");
    let snap = i.snapshot();
    let raw = serde_json::to_string(&snap).unwrap();
    for m in MARKUP {
        // Carried as data: in the catalog, the state, the screen, an error.
        for part in ["catalog", "state", "screen"] {
            assert!(
                snap[part].to_string().contains(m),
                "{part} lacks {m}: {}",
                snap[part]
            );
        }
        assert!(body.contains(m), "the error carries {m}: {body}");
    }
    // Terminal controls are escaped visibly, never raw, anywhere.
    for (what, text) in [("snapshot", &raw), ("call", &body)] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
            "{what}: {text}"
        );
    }
    assert!(
        snap["catalog"]["title"]
            .as_str()
            .unwrap()
            .contains("\\x1b]2;pwned-title"),
        "{}",
        snap["catalog"]
    );
    // The event stream's first event carries the same data.
    let (status, _s, stream) = open_events(&i);
    assert_eq!(status, 200, "{stream}");
    assert!(stream.contains("text/event-stream"), "{stream}");
    assert!(stream.contains("<img src=x onerror="), "{stream}");
    assert!(!stream.contains('\u{1b}'), "{stream}");
    // The page never parses text as markup: no sink that would in its script.
    let (status, _, js) = i.request("GET", "/inspect.js", &[i.bearer()], "");
    assert_eq!(status, 200);
    assert!(js.contains("textContent"), "the script as served: {js}");
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        "setTimeout(\"",
        "srcdoc",
    ] {
        assert!(!js.contains(sink), "the page's script uses {sink}");
    }
}

/// The browser test's Python, or why it cannot run.
fn browser_python() -> std::path::PathBuf {
    let py = root().join("tests/browser/.venv/bin/python3");
    assert!(
        py.exists()
            && std::path::Path::new("/usr/bin/chromium").exists()
            && std::path::Path::new("/usr/bin/chromedriver").exists(),
        "the browser tests need tests/setup.sh (chromium, chromium-driver, tests/browser/.venv)"
    );
    py
}

/// Runs the page driver in its own process group, killed whole (driver,
/// chromedriver, chromium) if it outlives its deadline; what it saw.
fn drive(args: &[String]) -> Value {
    drive_env(args, &[])
}

/// [`drive`] with more environment (a live-instance world's, for the
/// `tickbox stop` the driver runs).
fn drive_env(args: &[String], env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(browser_python());
    cmd.arg(root().join("tests/browser/inspect_page.py"))
        .args(args)
        .envs(env.iter().copied())
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = finish_within_group(cmd, Duration::from_secs(400));
    assert_eq!(
        out.code, 0,
        "the page driver failed: {}\n{}",
        out.stdout, out.stderr
    );
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// Runs `cmd` (stdout and stderr piped) to its end within `limit`, then
/// kills its whole process group: a browser a failing driver left behind
/// goes too, and so does everything when the test fails on the way.
fn finish_within_group(cmd: Command, limit: Duration) -> Output {
    struct Group(i32);
    impl Drop for Group {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the process group this test created.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
    finish_within_guarded(cmd, "the page driver", limit, |pid| Group(pid as i32))
}

#[test]
fn the_counter_in_headless_chromium() {
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let i = Inspect::start(&[wasm.to_string_lossy().into_owned()]);
    let dir = TempDir::new("inspect-shot");
    let shot = std::env::var("INSPECT_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path("inspect.png"));
    let seen = drive(&[
        "counter".into(),
        i.url(),
        shot.to_string_lossy().into_owned(),
    ]);
    let s = |k: &str| seen[k].as_str().unwrap_or_default().to_string();
    assert!(
        !s("address_bar").contains("token"),
        "the token left the address bar: {seen}"
    );
    assert!(s("first_screen").contains("Counter: 0"), "{seen}");
    let confirm = s("confirm_text");
    assert!(
        confirm.contains("increment") && confirm.contains("revision 1"),
        "{seen}"
    );
    assert!(s("increment_outcome").contains("\"value\": 3"), "{seen}");
    assert!(s("state_meta_after_call").contains("seq 1"), "{seen}");
    assert!(
        seen["changed_after_call"].to_string().contains("value"),
        "{seen}"
    );
    assert!(s("screen_after_key").contains("Counter: 4"), "{seen}");
    assert!(
        s("bad_args_outcome").contains("is not of type"),
        "the host's message: {seen}"
    );
    assert_eq!(seen["confirm_shown_for_bad_args"], false, "{seen}");
    assert!(
        s("timeline").contains("tick/call") && s("timeline").contains("tick/update"),
        "{seen}"
    );
    assert_eq!(s("title"), "tickbox inspect");
    // The export link fetches with the token (a plain link could not send
    // it) and saves what it got.
    let scenario = s("scenario_export");
    assert!(
        scenario.contains("call = \"increment\"") && scenario.contains("key = \"+\""),
        "{seen}"
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "a PNG of the page"
    );
    assert_eq!(i.snapshot()["state"]["data"]["value"], 4);
}

#[test]
fn a_hostile_tick_runs_nothing_in_headless_chromium() {
    let i = Inspect::start(&["--".into(), "python3".into(), tick("webhostile.py")]);
    let seen = drive(&["hostile".into(), i.url()]);
    let s = |k: &str| seen[k].as_str().unwrap_or_default().to_string();
    // The payloads are on the page, as text ...
    for m in MARKUP {
        for part in [
            "title_shown",
            "tools_text",
            "state_text",
            "screen_text",
            "fail_outcome",
        ] {
            assert!(s(part).contains(m), "{part} shows {m} as text: {seen}");
        }
    }
    // ... and nothing of them ran or became an element.
    assert_eq!(seen["pwned"], Value::Null, "{seen}");
    assert_eq!(s("document_title"), "tickbox inspect", "{seen}");
    assert_eq!(seen["scripts"], 1, "only the page's own script: {seen}");
    assert_eq!(seen["imgs"], 0, "{seen}");
    assert_eq!(seen["svgs"], 0, "{seen}");
}

/// Another user's web server on another loopback port
/// (`tests/browser/witness.py`, which becomes `nobody` before it listens):
/// every request it got, read off its stdout on a thread.
struct Witness {
    child: Child,
    port: u16,
    uid: u64,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Witness {
    fn start() -> Witness {
        let mut child = Command::new("python3")
            .arg(root().join("tests/browser/witness.py"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the witness");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let Ok(first) = lines.recv_timeout(PATIENCE) else {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let _ = child.wait();
            panic!("the witness never listened: {err}");
        };
        let hello: Value = serde_json::from_str(&first).expect("the witness's first line");
        Witness {
            child,
            port: hello["port"].as_u64().expect("its port") as u16,
            uid: hello["uid"].as_u64().expect("its uid"),
            lines,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops it; every request it recorded.
    fn requests(mut self) -> Vec<Value> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(PATIENCE) {
                Ok(line) => seen.push(serde_json::from_str(&line).expect("a request's line")),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return seen,
                Err(e) => panic!("the witness's output never ended: {e}"),
            }
        }
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The values of the request's headers named `name`.
fn witnessed<'a>(request: &'a Value, name: &str) -> Vec<&'a str> {
    request["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h[0].as_str().is_some_and(|k| k.eq_ignore_ascii_case(name)))
        .filter_map(|h| h[1].as_str())
        .collect()
}

/// The attack the cookie let through: a browser that used the page visits
/// a server another local user runs on another loopback port. Opened the
/// way `--open` opens it (the 0600 file a stand-in xdg-open is handed),
/// the page uses the token (its event stream, a key, a reload), then goes
/// to the witness twice (navigated to by the page, and typed). The witness
/// gets nothing with the token in it; the control is a cookie set on the
/// inspector's origin, which it does get: cookies cross ports.
#[test]
fn the_token_reaches_no_other_loopback_port_in_headless_chromium() {
    use std::os::unix::fs::PermissionsExt;
    let witness = Witness::start();
    // SAFETY: geteuid(2) reads the process's effective uid and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_ne!(witness.uid, 0, "the witness is another user (nobody)");
    }
    // `--open` with a stand-in for xdg-open that says which file it got.
    let dir = TempDir::new("inspect-crossport");
    let bin = dir.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = dir.path("opened");
    let xdg_open = bin.join("xdg-open");
    std::fs::write(
        &xdg_open,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > '{0}.part' && mv '{0}.part' '{0}'\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&xdg_open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let xdg = dir.private_dir("xdg");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut args = vec!["--open".to_string()];
    args.extend(native_counter());
    let i = Inspect::start_env(
        &args,
        &[("XDG_RUNTIME_DIR", xdg.to_str().unwrap()), ("PATH", &path)],
    );
    assert!(
        eventually(PATIENCE, || record.exists()),
        "xdg-open was never run"
    );
    let opened = std::path::PathBuf::from(std::fs::read_to_string(&record).unwrap());
    let mode = std::fs::metadata(&opened).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", opened.display());
    let forward = std::fs::read_to_string(&opened).unwrap();
    assert!(
        forward.contains(&format!("url={}\"", i.url())),
        "the file forwards to the printed URL: {forward}"
    );

    let control = format!("tickbox-control=c{}x{}", std::process::id(), witness.port);
    let seen = drive(&[
        "crossport".into(),
        opened.to_string_lossy().into_owned(),
        witness.url(),
        control.clone(),
    ]);
    let s = |k: &str| seen[k].as_str().unwrap_or_default().to_string();
    // The page got in and used the token, through a reload too.
    assert!(s("first_screen").contains("Counter: 0"), "{seen}");
    assert!(s("screen_after_key").contains("Counter: 1"), "{seen}");
    assert!(s("screen_after_reload").contains("Counter: 1"), "{seen}");
    assert!(
        s("screen_after_reload_and_key").contains("Counter: 2"),
        "{seen}"
    );
    assert_eq!(i.snapshot()["state"]["data"]["value"], 2);
    assert_eq!(
        s("address_bar"),
        format!("{}/", i.origin()),
        "the token left the address bar: {seen}"
    );
    assert!(!s("page_cookies").contains(&i.token[..16]), "{seen}");
    assert!(s("page_cookies_with_control").contains(&control), "{seen}");

    let requests = witness.requests();
    let visit = |path: &str| {
        requests
            .iter()
            .find(|r| r["path"] == path)
            .unwrap_or_else(|| panic!("the witness never saw {path}: {requests:?}"))
    };
    // The control: the cookie the inspector's origin holds reached the
    // other port, on both visits ...
    for path in ["/from-the-page", "/typed"] {
        let cookies = witnessed(visit(path), "cookie");
        assert!(
            cookies.iter().any(|c| c.contains(&control)),
            "{path}: the control cookie crossed ports: {cookies:?}"
        );
    }
    // ... and nothing with the token did: no cookie, header, path or body
    // (nor half of it), and no credentials at all.
    let all = serde_json::to_string(&requests).unwrap();
    for part in [&i.token[..], &i.token[..32], &i.token[32..]] {
        assert!(
            !all.contains(part),
            "the witness saw the token: {requests:#?}"
        );
    }
    for r in &requests {
        assert!(witnessed(r, "authorization").is_empty(), "{r}");
    }

    // The `--open` file goes when the inspector ends (SIGTERM).
    // SAFETY: kill(2) on the inspector this test started.
    unsafe { libc::kill(i.child.id() as i32, libc::SIGTERM) };
    assert!(
        eventually(PATIENCE, || !opened.exists()),
        "--open's file outlived the inspector: {}",
        opened.display()
    );
}

/// An event stream opened by hand: the status, the connection (open, with
/// the whole `hello` event read when the status is 200) and what was read.
fn open_events(i: &Inspect) -> (u16, TcpStream, String) {
    let mut s = TcpStream::connect(&i.addr).expect("connect");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: {}\r\n{}\r\n\r\n",
        i.addr,
        i.bearer()
    )
    .unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let text = String::from_utf8_lossy(&seen).to_string();
        if let Some(status) = text
            .split_once("\r\n")
            .and_then(|(line, _)| line.split(' ').nth(1))
            .and_then(|c| c.parse::<u16>().ok())
        {
            let hello = text.split_once("event: hello").map(|(_, rest)| rest);
            if status != 200 || hello.is_some_and(|rest| rest.contains("\n\n")) {
                return (status, s, text);
            }
        }
        let n = s.read(&mut buf).expect("the event stream");
        assert!(n > 0, "the stream ended: {text}");
        seen.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn event_streams_and_action_bodies_are_bounded_and_the_bound_still_works() {
    let i = Inspect::start(&native_counter());
    // MAX_EVENT_CLIENTS (8) streams get in ...
    let mut open: Vec<TcpStream> = (0..8)
        .map(|n| {
            let (status, s, _) = open_events(&i);
            assert_eq!(status, 200, "stream {n} is within the bound");
            s
        })
        .collect();
    // ... the ninth is refused ...
    let (status, _, _) = open_events(&i);
    assert_eq!(status, 503, "a ninth stream");
    // ... and once one closes, its slot comes back (the server notices the
    // close when it next writes to it: the keys below make events).
    drop(open.pop());
    let mut admitted = None;
    assert!(
        eventually(PATIENCE, || {
            let (status, s, _) = open_events(&i);
            if status == 200 {
                admitted = Some(s);
                return true;
            }
            let _ = i.act("/api/keys", r#"{"bytes": "+"}"#);
            false
        }),
        "a closed stream's slot never came back"
    );
    drop(open);

    // MAX_ACTION_BODY_BYTES (256 KiB): a body of exactly that many bytes
    // is taken (a resize whose padding the action ignores) ...
    let limit = 256 * 1024;
    let body_of = |len: usize| {
        let head = r#"{"cols": 70, "rows": 20, "pad": ""#;
        let tail = r#""}"#;
        format!("{head}{}{tail}", "x".repeat(len - head.len() - tail.len()))
    };
    let at = body_of(limit);
    assert_eq!(at.len(), limit);
    let (status, body) = i.act("/api/resize", &at);
    assert_eq!(status, 200, "a body at the bound: {body}");
    assert!(
        eventually(PATIENCE, || i.snapshot()["screen"]["cols"] == 70),
        "the resize at the bound reached the Tick: {}",
        i.snapshot()["screen"]["cols"]
    );
    // ... one byte more is refused, whether its length is declared (the
    // answer comes before any of the body is sent) ...
    let over = body_of(limit + 1);
    let head = |framing: &str| {
        format!(
            "POST /api/resize HTTP/1.1\r\nHost: {}\r\n{}\r\nOrigin: {}\r\nContent-Type: application/json\r\nConnection: close\r\n{framing}\r\n",
            i.addr,
            i.bearer(),
            i.origin()
        )
    };
    let answer = |s: &mut TcpStream| {
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        String::from_utf8_lossy(&raw).to_string()
    };
    let mut s = TcpStream::connect(&i.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(head(&format!("Content-Length: {}\r\n", over.len())).as_bytes())
        .unwrap();
    let text = answer(&mut s);
    assert!(text.starts_with("HTTP/1.1 413"), "declared over: {text}");
    // ... or only found out as it arrives (chunked: the chunk's end and the
    // body's are held back until the answer is read, so the server has read
    // everything sent when it answers and closes).
    let mut s = TcpStream::connect(&i.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(head("Transfer-Encoding: chunked\r\n").as_bytes())
        .unwrap();
    s.write_all(format!("{:x}\r\n{over}", over.len()).as_bytes())
        .unwrap();
    let text = answer(&mut s);
    assert!(text.starts_with("HTTP/1.1 413"), "streamed over: {text}");
    assert_eq!(
        i.snapshot()["screen"]["cols"],
        70,
        "nothing refused was applied"
    );
    drop(admitted);
}

#[test]
fn the_state_panel_says_what_trimming_cut() {
    // The faulty Tick's wide state (about 480 KB) is trimmed as a
    // subscriber gets it, with the cuts named; the page shows them.
    let mut wide = vec!["--".to_string()];
    wide.extend(faulty("wide"));
    let i = Inspect::start(&wide);
    let mut snap = Value::Null;
    assert!(
        eventually(PATIENCE, || {
            snap = i.snapshot();
            snap["state"]["seq"].is_u64()
        }),
        "no state: {snap}"
    );
    let state = &snap["state"];
    assert!(
        state.to_string().len() <= 17 * 1024,
        "within the delivery budget: {} bytes",
        state.to_string().len()
    );
    let log = state["data"]["log"].as_array().unwrap();
    assert_eq!(
        log.last().unwrap(),
        "entry number 14999 of the log",
        "the series keeps its newest end"
    );
    let trimmed = state["trimmed"].as_array().unwrap();
    assert!(
        trimmed
            .iter()
            .any(|c| c["path"] == "/log" && c["kept"] == "newest" && c["of"] == 15000),
        "{trimmed:?}"
    );
    // The counter's small state is whole, and says so (the control).
    let c = Inspect::start(&native_counter());
    assert!(eventually(PATIENCE, || c.snapshot()["state"]["seq"].is_u64()));
    assert_eq!(c.snapshot()["state"]["trimmed"], json!([]));
    let seen = drive(&["trimmed".into(), i.url(), c.url()]);
    let note = seen["trimmed_note"].as_str().unwrap_or_default();
    assert!(
        note.contains("/log: kept its newest") && note.contains("of 15000"),
        "{seen}"
    );
    assert!(seen["trimmed_marks"].as_u64() >= Some(1), "{seen}");
    assert_eq!(
        seen["control_note_shown"], false,
        "no note for a whole state: {seen}"
    );
}

/// `tickbox run --name NAME` hosting the native counter in a world of its
/// own, listed. Bound as `let (_host, w)`, the world drops first: it stops
/// the instance (and kills its host if it does not stop), then the host's
/// terminal goes.
fn live_counter(tag: &str, name: &str) -> (crate::live::Pty, World) {
    let w = World::new(tag);
    let counter = tick("counter.py");
    let host = w.pty(&["run", "--name", name, "--", "python3", &counter], 100, 30);
    w.wait_for(name);
    (host, w)
}

#[test]
fn a_live_instance_is_inspected_through_its_socket_to_its_end() {
    let w = World::new("inspect-live-none");
    // Nothing by that name: refused at once (exit 3), no page served.
    let out = tickbox_within(&["inspect", "@c"], &w.env(), PATIENCE);
    assert_eq!(out.code, 3, "{out:#?}");
    assert!(out.stderr.contains("no live instance"), "{out:#?}");
    drop(w);

    let (_host, w) = live_counter("inspect-live", "c");
    let i = Inspect::start_env(&["@c".into()], &w.env());
    // The door is the same: the token is wanted (and the control gets in).
    let (status, _, _) = i.request("GET", "/api/snapshot", &[], "");
    assert_eq!(status, 401);
    let snap = i.snapshot();
    assert_eq!(snap["target"]["kind"], "live", "{}", snap["target"]);
    assert_eq!(snap["target"]["name"], "c");
    assert_eq!(snap["target"]["audit"], false);
    assert!(
        eventually(PATIENCE, || w.wait_for("c")["views"] == 2),
        "the inspector is one more view: {}",
        w.wait_for("c")
    );
    // The screen (from the host's frames) and the state (its watch).
    let screen_has = |needle: &str| i.snapshot()["screen"]["lines"].to_string().contains(needle);
    assert!(
        eventually(PATIENCE, || screen_has("Counter: 0")),
        "{}",
        i.snapshot()["screen"]
    );
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 0),
        "{}",
        i.snapshot()["state"]
    );
    assert_eq!(i.snapshot()["state"]["trimmed"], json!([]));
    // Calls: the host's validation, then a confirmation for the revision.
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": "x"}}"#,
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("is not of type"), "{body}");
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}}"#,
    );
    assert_eq!(status, 409, "{body}");
    let asked: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        asked["confirm"],
        json!({"tool": "increment", "revision": "1"})
    );
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}, "confirm": {"tool": "increment", "revision": "0"}}"#,
    );
    assert_eq!(status, 409, "another revision's confirmation: {body}");
    assert_eq!(
        w.tickbox(&["read", "@c"]).json()["data"]["value"],
        0,
        "nothing unconfirmed ran"
    );
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}, "confirm": {"tool": "increment", "revision": "1"}}"#,
    );
    assert_eq!(status, 200, "{body}");
    let done: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(done["ok"]["value"], 2, "{done}");
    assert!(done["latency_ms"].is_u64(), "{done}");
    assert!(
        eventually(PATIENCE, || i.snapshot()["state"]["data"]["value"] == 2),
        "{}",
        i.snapshot()["state"]
    );
    assert!(eventually(PATIENCE, || screen_has("Counter: 2")));
    // A key typed on the page reaches the Tick through the view stream.
    let (status, body) = i.act("/api/keys", r#"{"bytes": "+"}"#);
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(PATIENCE, || screen_has("Counter: 3")),
        "{}",
        i.snapshot()["screen"]
    );
    assert!(eventually(PATIENCE, || i.snapshot()["state"]["data"]
        ["value"]
        == 3));
    let read = w.tickbox(&["read", "@c"]);
    assert_eq!(
        read.json()["data"]["value"],
        3,
        "the instance agrees: {read:#?}"
    );
    // The panel's size becomes the view's (our model follows at once).
    let (status, _) = i.act("/api/resize", r#"{"cols": 60, "rows": 20}"#);
    assert_eq!(status, 200);
    let snap = i.snapshot();
    assert_eq!(
        (&snap["screen"]["cols"], &snap["screen"]["rows"]),
        (&json!(60), &json!(20))
    );
    // The timeline is the socket's: the call asked and answered (with its
    // latency), and no host↔Tick frame (another process has those).
    let frames = snap["frames"].as_array().unwrap();
    let call = frames
        .iter()
        .find(|f| f["method"] == "call" && f["dir"] == "to host")
        .unwrap_or_else(|| panic!("no call in {frames:?}"));
    let answer = frames
        .iter()
        .find(|f| f["id"] == call["id"] && f["dir"] == "from host" && f["method"] == "")
        .unwrap_or_else(|| panic!("no answer in {frames:?}"));
    assert!(answer["latency_ms"].is_u64(), "{answer}");
    for method in ["attach", "watch", "describe", "keys", "output", "delivery"] {
        assert!(
            frames.iter().any(|f| f["method"] == method),
            "no {method} frame in {frames:?}"
        );
    }
    assert!(
        !frames
            .iter()
            .any(|f| f["dir"] == "to tick" || f["dir"] == "from tick"),
        "{frames:?}"
    );
    // Exports: the scenario has the call and the key, and says it names no
    // Tick; the audit stream is the host's, and the page is told why.
    let (status, _, scenario) = i.request("GET", "/api/export/scenario", &[i.bearer()], "");
    assert_eq!(status, 200);
    assert!(
        scenario.contains("call = \"increment\"")
            && scenario.contains("amount = 2")
            && scenario.contains("key = \"+\"")
            && scenario.contains("names no Tick"),
        "{scenario}"
    );
    let (status, _, why) = i.request("GET", "/api/export/audit", &[i.bearer()], "");
    assert_eq!(status, 404, "{why}");
    assert!(why.contains("--audit"), "{why}");
    assert_eq!(snap["ended"], Value::Null, "not ended yet");
    // A second inspector that goes away leaves the instance as it was.
    let other = Inspect::start_env(&["@c".into()], &w.env());
    assert!(eventually(PATIENCE, || w.wait_for("c")["views"] == 3));
    drop(other);
    assert!(
        eventually(PATIENCE, || w.wait_for("c")["views"] == 2),
        "its view left with it"
    );
    assert_eq!(w.tickbox(&["read", "@c"]).json()["data"]["value"], 3);
    // The end: the page is told how it ended and keeps serving.
    let stopped = w.tickbox(&["stop", "c"]);
    assert_eq!(stopped.code, 0, "{stopped:#?}");
    // The view stream's ending carries the last words (the watch stream's,
    // which may come first, does not).
    let mut ended = Value::Null;
    assert!(
        eventually(PATIENCE, || {
            ended = i.snapshot()["ended"].clone();
            ended["last_words"].to_string().contains("Counter: 3")
        }),
        "the page was never told, with the last words: {ended}"
    );
    assert!(
        ended["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{ended}"
    );
    let (status, body) = i.act("/api/call", r#"{"tool": "history", "args": {}}"#);
    assert_eq!(status, 409, "no calls after the end: {body}");
}

#[test]
fn a_live_counter_in_headless_chromium() {
    let (_host, w) = live_counter("inspect-live-page", "lc");
    let i = Inspect::start_env(&["@lc".into()], &w.env());
    let seen = drive_env(
        &[
            "live".into(),
            i.url(),
            env!("CARGO_BIN_EXE_tickbox").into(),
            "lc".into(),
        ],
        &w.env(),
    );
    let s = |k: &str| seen[k].as_str().unwrap_or_default().to_string();
    assert!(s("first_screen").contains("Counter: 0"), "{seen}");
    assert!(s("target").contains("live instance @lc"), "{seen}");
    assert_eq!(s("timeline_title"), "Live socket", "{seen}");
    assert!(s("timeline_note").contains("live socket"), "{seen}");
    assert_eq!(seen["audit_link_shown"], false, "{seen}");
    assert!(s("no_audit").contains("host"), "{seen}");
    let confirm = s("confirm_text");
    assert!(
        confirm.contains("increment") && confirm.contains("revision 1"),
        "{seen}"
    );
    assert!(s("increment_outcome").contains("\"value\": 3"), "{seen}");
    assert!(s("state_after_call").contains("\"value\": 3"), "{seen}");
    assert!(s("screen_after_key").contains("Counter: 4"), "{seen}");
    assert!(s("state_after_key").contains("\"value\": 4"), "{seen}");
    let timeline = s("timeline");
    assert!(
        timeline.contains("→ host") && timeline.contains("call") && !timeline.contains("tick/call"),
        "{seen}"
    );
    assert!(s("ended").contains("ended"), "{seen}");
    assert_eq!(i.snapshot()["state"]["data"]["value"], 4);
}
