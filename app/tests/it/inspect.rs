//! The inspector through `tickbox_app::inspect`, its page server in
//! process on a loopback port: its door attacked through the wire (raw
//! HTTP: no token, a wrong token, the right one in a cookie or the query,
//! a foreign `Host`, a foreign or missing `Origin`, each beside a request
//! that gets in), its bounds (event streams, action bodies) hit and passed
//! back under, calls checked by the host and confirmed for the revision,
//! a hostile Tick's markup carried only as data, a trimmed state shown as
//! trimmed, a live instance (published in process, as `tickbox run
//! --name` publishes it) inspected through its socket to its end, and the
//! page driven in headless Chromium (Debian's chromium and chromedriver
//! through Selenium, `tests/browser/inspect_page.py`): the counter's
//! screen, a confirmed call, a key typed into the screen, the host's
//! refusal of bad arguments, an export, the hostile Tick running nothing,
//! the same for a live instance.
//!
//! The screenshot in README (`docs/inspect.png`) is the counter test's:
//! `INSPECT_SCREENSHOT=$PWD/docs/inspect.png cargo test -p tickbox-app --test it inspect::the_counter`.
//!
//! What needs the binary (`--open`, the printed URL, exit codes) is
//! `cli/tests/it/inspect.rs`.

use crate::live::{command, native_counter, runtime, Hosted};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::ops::Deref;
use std::sync::Arc;
use tickbox_app::inspect::{self, server, AuditRing, Inspector};
use tickbox_app::{App, AuditWish, Request, Session, SessionConfig, Target};
use tickbox_host::live::Registry;
use tickbox_protocol::limits::CALL_TIMEOUT;
use tickbox_telemetry::audit::Origin;
use tickbox_test_support::inspect_page::{drive, header, Page, PAGE_PATIENCE as PATIENCE};
use tickbox_test_support::*;
use tokio::runtime::Runtime;

/// The inspector's page server on a random loopback port, on a runtime of
/// its own: dropping it ends everything it started (a Tick it started,
/// a live instance's streams, its connections), as ending `tickbox
/// inspect` does.
struct Inspect {
    page: Page,
    session: Option<Arc<Session>>,
    rt: Option<Runtime>,
}

impl Inspect {
    /// The inspector of the Tick `request` starts, its audit stream the
    /// page's audit export (as `tickbox inspect TICK` starts it).
    fn start(mut request: Request) -> Inspect {
        let rt = runtime();
        let (inspector, session) = rt.block_on(async {
            let app = App::new(crate::settings(None));
            let audit = Arc::new(AuditRing::default());
            app.also_audit_into(audit.clone());
            request.audit = app
                .audit(Origin::Cli, &AuditWish::default(), &[])
                .expect("an audit stream");
            let launcher = app.launcher(&request).expect("a launcher");
            let record = |kind, size| app.record_tick(&request, kind, size);
            inspect::start_local(&launcher, SessionConfig::default(), audit, record)
                .await
                .expect("the Tick starts")
        });
        Inspect::serve(rt, inspector, Some(session))
    }

    /// The inspector of the live instance `name` in `registry` (as
    /// `tickbox inspect @NAME` reaches it).
    fn live(registry: &Registry, name: &str) -> Inspect {
        let rt = runtime();
        let inspector = rt
            .block_on(inspect::connect_live(registry, name, CALL_TIMEOUT))
            .unwrap_or_else(|e| panic!("cannot inspect @{name}: {e}"));
        Inspect::serve(rt, inspector, None)
    }

    fn serve(rt: Runtime, inspector: Arc<Inspector>, session: Option<Arc<Session>>) -> Inspect {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("its address").to_string();
        let token = server::new_token().expect("a token");
        assert!(
            token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()),
            "32 random bytes as hex: {token}"
        );
        rt.spawn(server::serve(
            inspector,
            listener,
            token.clone(),
            std::future::pending(),
        ));
        Inspect {
            page: Page { addr, token },
            session,
            rt: Some(rt),
        }
    }
}

impl Inspect {
    /// Waits until the page's picture of the counter's state has `value`
    /// (sent as a subscriber gets it).
    fn value_becomes(&self, value: i64) {
        assert!(
            eventually(PATIENCE, || self.snapshot()["state"]["data"]["value"]
                == value),
            "{}",
            self.snapshot()["state"]
        );
    }
}

impl Deref for Inspect {
    type Target = Page;
    fn deref(&self) -> &Page {
        &self.page
    }
}

impl Drop for Inspect {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            if let Some(session) = self.session.take() {
                rt.block_on(session.shutdown());
            }
            rt.shutdown_timeout(PATIENCE);
        }
    }
}

#[test]
fn the_door_wants_the_token_its_own_host_and_its_own_origin() {
    let i = Inspect::start(native_counter());
    // The page's picture has the first state (sent as a subscriber gets it).
    i.value_becomes(0);
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
    let i = Inspect::start(native_counter());
    i.value_becomes(0);
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
            let (status, _s, stream) = i.open_events();
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

/// The page's `increment 2` on a counter at 0: the host checks the
/// arguments (400, in its words), a mutating call asks for a confirmation
/// naming the tool and the catalog's revision (409), one for another
/// revision is none and nothing unconfirmed runs (`value` reads the
/// counter), and the confirmed call runs, answered with its latency.
fn increment_is_checked_then_confirmed(i: &Inspect, value: impl Fn() -> Value) {
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
    assert_eq!(
        asked["confirm"],
        json!({"tool": "increment", "revision": "1"})
    );
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}, "confirm": {"tool": "increment", "revision": "0"}}"#,
    );
    assert_eq!(
        status, 409,
        "a confirmation for another revision is none: {body}"
    );
    assert_eq!(value(), 0, "nothing unconfirmed ran");
    let (status, body) = i.act(
        "/api/call",
        r#"{"tool": "increment", "args": {"amount": 2}, "confirm": {"tool": "increment", "revision": "1"}}"#,
    );
    assert_eq!(status, 200, "{body}");
    let done: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(done["ok"]["value"], 2, "{done}");
    assert!(done["latency_ms"].is_u64(), "{done}");
}

/// The timeline has the call `method` going to `peer` and its answer
/// coming back, with the call's latency.
fn answered_with_latency(frames: &[Value], method: &str, peer: &str) {
    let call = frames
        .iter()
        .find(|f| f["method"] == method && f["dir"] == format!("to {peer}"))
        .unwrap_or_else(|| panic!("no {method} in {frames:?}"));
    let answer = frames
        .iter()
        .find(|f| f["id"] == call["id"] && f["dir"] == format!("from {peer}") && f["method"] == "")
        .unwrap_or_else(|| panic!("no answer in {frames:?}"));
    assert!(answer["latency_ms"].is_u64(), "{answer}");
}

#[test]
fn calls_are_validated_by_the_host_and_mutating_ones_confirmed_for_the_revision() {
    let i = Inspect::start(native_counter());
    i.value_becomes(0);
    increment_is_checked_then_confirmed(&i, || i.snapshot()["state"]["data"]["value"].clone());
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
    answered_with_latency(frames, "tick/call", "tick");
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
    let i = Inspect::start(command(vec!["python3".into(), tick("webhostile.py")]));
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
    let (status, _s, stream) = i.open_events();
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

#[test]
fn the_counter_in_headless_chromium() {
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let i = Inspect::start(Request::new(Target::File(wasm)));
    let dir = TempDir::new("inspect-shot");
    let shot = std::env::var("INSPECT_SCREENSHOT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| dir.path("inspect.png"));
    let seen = drive(
        &[
            "counter".into(),
            i.url(),
            shot.to_string_lossy().into_owned(),
        ],
        &[],
    );
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
    let i = Inspect::start(command(vec!["python3".into(), tick("webhostile.py")]));
    let seen = drive(&["hostile".into(), i.url()], &[]);
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

#[test]
fn event_streams_and_action_bodies_are_bounded_and_the_bound_still_works() {
    let i = Inspect::start(native_counter());
    // MAX_EVENT_CLIENTS (8) streams get in ...
    let mut open: Vec<TcpStream> = (0..8)
        .map(|n| {
            let (status, s, _) = i.open_events();
            assert_eq!(status, 200, "stream {n} is within the bound");
            s
        })
        .collect();
    // ... the ninth is refused ...
    let (status, _, _) = i.open_events();
    assert_eq!(status, 503, "a ninth stream");
    // ... and once one closes, its slot comes back (the server notices the
    // close when it next writes to it: the keys below make events).
    drop(open.pop());
    let mut admitted = None;
    assert!(
        eventually(PATIENCE, || {
            let (status, s, _) = i.open_events();
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
    let i = Inspect::start(command(faulty("wide")));
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
    let c = Inspect::start(native_counter());
    assert!(eventually(PATIENCE, || c.snapshot()["state"]["seq"].is_u64()));
    assert_eq!(c.snapshot()["state"]["trimmed"], json!([]));
    let seen = drive(&["trimmed".into(), i.url(), c.url()], &[]);
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

#[test]
fn a_live_instance_is_inspected_through_its_socket_to_its_end() {
    let w = Hosted::counter("inspect-live", "c");
    // Nothing by another name: refused at once, not a usage error (the
    // CLI's exit 3), no page served.
    let refused = w
        .rt()
        .block_on(inspect::connect_live(&w.registry, "d", CALL_TIMEOUT));
    let Err(e) = refused else {
        panic!("@d was inspected")
    };
    assert!(e.to_string().contains("no live instance"), "{e}");
    assert!(!e.is_usage(), "{e}");
    let i = Inspect::live(&w.registry, "c");
    // The door is the same: the token is wanted (and the control gets in).
    let (status, _, _) = i.request("GET", "/api/snapshot", &[], "");
    assert_eq!(status, 401);
    let snap = i.snapshot();
    assert_eq!(snap["target"]["kind"], "live", "{}", snap["target"]);
    assert_eq!(snap["target"]["name"], "c");
    assert_eq!(snap["target"]["audit"], false);
    // Published with no terminal of its own, the instance had no view.
    assert!(
        eventually(PATIENCE, || w.views() == 1),
        "the inspector is one more view: {}",
        w.views()
    );
    // The screen (from the host's frames) and the state (its watch).
    let screen_has = |needle: &str| i.snapshot()["screen"]["lines"].to_string().contains(needle);
    assert!(
        eventually(PATIENCE, || screen_has("Counter: 0")),
        "{}",
        i.snapshot()["screen"]
    );
    i.value_becomes(0);
    assert_eq!(i.snapshot()["state"]["trimmed"], json!([]));
    // Calls: the host's validation, then a confirmation for the revision.
    increment_is_checked_then_confirmed(&i, || w.value());
    i.value_becomes(2);
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
    assert_eq!(w.value(), 3, "the instance agrees");
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
    answered_with_latency(frames, "call", "host");
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
    let other = Inspect::live(&w.registry, "c");
    assert!(eventually(PATIENCE, || w.views() == 2));
    drop(other);
    assert!(
        eventually(PATIENCE, || w.views() == 1),
        "its view left with it"
    );
    assert_eq!(w.value(), 3);
    // The end: the page is told how it ended and keeps serving.
    w.stop();
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
    let w = Hosted::counter("inspect-live-page", "lc");
    let i = Inspect::live(&w.registry, "lc");
    // The driver asks for the instance to be stopped (from outside, as
    // `tickbox stop` would) by creating this file, then waits for the page
    // to say it ended.
    let dir = TempDir::new("inspect-live-page-stop");
    let stop = dir.path("stop");
    let driver = std::thread::spawn({
        let args = vec![
            "live".to_string(),
            i.url(),
            stop.to_string_lossy().into_owned(),
            "lc".into(),
        ];
        move || drive(&args, &[])
    });
    assert!(
        eventually(PATIENCE * 5, || stop.exists() || driver.is_finished()),
        "the driver never asked for the stop"
    );
    if stop.exists() {
        w.stop();
    }
    let seen = driver
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
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
