//! The facade with no process: a Tick written in Rust over the in-memory
//! transport, a client speaking raw MCP lines over in-memory pipes, and the
//! catalog polled every few milliseconds ([`FacadeOptions::describe_poll`])
//! instead of every second, so noticing a new revision takes no waiting.

use super::{Facade, FacadeOptions, Grants, HostedTick};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tickbox_host::backend::memory::{self, MemoryTick};
use tickbox_host::session::{Session, SessionConfig};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// How long the client waits for a message that should come at once; only
/// reached when the test is failing.
const PATIENCE: Duration = Duration::from_secs(20);

/// A Tick in memory that answers each request with what `answer` makes
/// of it (a `result` or `error` member), until the host closes its input.
async fn fake_tick(tick: MemoryTick, mut answer: impl FnMut(&Value) -> Value) {
    let MemoryTick {
        stdin,
        mut stdout,
        control: _alive,
        ..
    } = tick;
    let mut lines = BufReader::new(stdin).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(req) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let mut frame = json!({"jsonrpc": "2.0", "id": req["id"]});
        if let (Some(f), Value::Object(b)) = (frame.as_object_mut(), answer(&req)) {
            f.extend(b);
        }
        if stdout
            .write_all(format!("{frame}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// A Tick with tools `echo` (returns its args) and `misbehave` (switches
/// the catalog to revision r2); a call bound to another revision is refused
/// with -32004, unexecuted.
async fn shifting_tick(tick: MemoryTick) {
    let mut revision = "r1";
    fake_tick(tick, move |req| {
        let params = &req["params"];
        match req["method"].as_str() {
            Some("tick/describe") => json!({"result": {
            "protocol": 3, "kind": "test.shifting", "title": "Shifting",
            "description": "changes its catalog", "revision": revision,
            "tools": [
                {"name": "echo", "description": "Return args.",
                 "input_schema": {"type": "object"}, "mutates": false},
                {"name": "misbehave", "description": "Switch to r2.",
                 "input_schema": {"type": "object"}, "mutates": false},
            ]}}),
            Some("tick/read") => json!({"result": {"seq": 0, "data": {}}}),
            Some("tick/call") if params["revision"] != revision => {
                json!({"error": {"code": -32004, "message": "the tool catalog changed"}})
            }
            Some("tick/call") if params["tool"] == "misbehave" => {
                revision = "r2";
                json!({"result": {"revision": revision}})
            }
            Some("tick/call") => json!({"result": params["args"]}),
            _ => json!({"error": {"code": -32601, "message": "no such method"}}),
        }
    })
    .await
}

/// An MCP client speaking raw lines.
struct Client {
    to: DuplexStream,
    from: Lines<BufReader<DuplexStream>>,
    held: Vec<Value>,
}

impl Client {
    async fn send(&mut self, frame: Value) {
        let line = format!("{frame}\n");
        self.to.write_all(line.as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        if !self.held.is_empty() {
            return self.held.remove(0);
        }
        let line = tokio::time::timeout(PATIENCE, self.from.next_line())
            .await
            .expect("a message from the facade")
            .unwrap()
            .expect("the facade's output is open");
        serde_json::from_str(&line).unwrap()
    }

    async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let m = self.next_unheld().await;
            if m["id"] == id && m.get("method").is_none() {
                return m;
            }
            self.held.push(m);
        }
    }

    async fn next_unheld(&mut self) -> Value {
        let held = std::mem::take(&mut self.held);
        let m = self.next().await;
        self.held = held;
        m
    }

    /// A tools/call's result.
    async fn call(&mut self, id: u64, tool: &str, args: Value) -> Value {
        let r = self
            .request(id, "tools/call", json!({"name": tool, "arguments": args}))
            .await;
        r["result"].clone()
    }
}

/// The facade over one Tick (its session started on `io`) serving a
/// client over in-memory pipes, the client initialized (2025-06-18); and
/// the serving task.
async fn serve_initialized(
    name: &str,
    io: tickbox_host::backend::TickIo,
    options: FacadeOptions,
) -> (
    Client,
    tokio::task::JoinHandle<Result<(), crate::server::FacadeError>>,
) {
    let session = Arc::new(Session::start(io, SessionConfig::default()).await.unwrap());
    let hosted = HostedTick {
        name: name.into(),
        session: Some(session),
        grants: Grants::default(),
        per_client: None,
        on_first_use: None,
    };
    let facade = Facade::with_options(vec![hosted], options).await.unwrap();
    let (client_to, facade_from) = tokio::io::duplex(64 * 1024);
    let (facade_to, client_from) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn(facade.serve(facade_from, facade_to));
    let mut mcp = Client {
        to: client_to,
        from: BufReader::new(client_from).lines(),
        held: Vec::new(),
    };
    mcp.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "0"}}),
    )
    .await;
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    (mcp, serving)
}

/// The client leaves: that ends the service, which stops the Tick.
async fn close(
    mcp: Client,
    serving: tokio::task::JoinHandle<Result<(), crate::server::FacadeError>>,
) {
    drop(mcp);
    tokio::time::timeout(PATIENCE, serving)
        .await
        .expect("the facade stops when its client leaves")
        .unwrap()
        .unwrap();
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_catalog_change_sends_list_changed_and_refuses_stale_calls() {
    let (io, tick) = memory::pair();
    tokio::spawn(shifting_tick(tick));
    let options = FacadeOptions::default().describe_poll(Duration::from_millis(20));
    let (mut mcp, serving) = serve_initialized("shifting", io, options).await;
    let list = mcp.request(1, "tools/list", json!({})).await;
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"),
        "{list}"
    );

    // `misbehave` switches the Tick to revision r2.
    let r = mcp.call(2, "misbehave", json!({})).await;
    assert_eq!(r["structuredContent"], json!({"revision": "r2"}), "{r}");
    // The facade notices by itself, without another call.
    loop {
        let m = mcp.next().await;
        if m["method"] == "notifications/tools/list_changed" {
            break;
        }
    }

    // A call bound to the old listing is refused and never executed.
    let r = mcp.call(3, "echo", json!({"x": 1})).await;
    assert_eq!(r["isError"], true, "{r}");
    let e = &r["structuredContent"]["error"];
    assert_eq!(e["kind"], "catalog_changed", "{e}");
    assert_eq!(e["executed"], false);
    assert_eq!(
        (
            e["listed_revision"].as_str(),
            e["current_revision"].as_str()
        ),
        (Some("r1"), Some("r2"))
    );
    assert!(text(&r).contains("list the tools again"), "{}", text(&r));

    // After listing again the same call goes through.
    mcp.request(4, "tools/list", json!({})).await;
    let r = mcp.call(5, "echo", json!({"x": 1})).await;
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"], json!({"x": 1}));

    close(mcp, serving).await;
}

#[test]
fn each_named_client_has_a_token_of_its_own() {
    use crate::http::NamedClient;
    let client = |name: &str, token: &str| NamedClient {
        name: name.into(),
        token: token.into(),
    };
    let two = [client("a", "t1"), client("b", "t2")];
    assert!(NamedClient::check_distinct(&two, Some("server"), Some("scraper")).is_ok());
    let shared = [client("a", "t1"), client("b", "t1")];
    let e = NamedClient::check_distinct(&shared, None, None).unwrap_err();
    assert!(e.contains("`a` and `b` have the same token"), "{e}");
    let e = NamedClient::check_distinct(&two, Some("t2"), None).unwrap_err();
    assert!(e.contains("client `b` has the server's token"), "{e}");
    let e = NamedClient::check_distinct(&two, None, Some("t1")).unwrap_err();
    assert!(
        e.contains("client `a` has the metrics scraper's token"),
        "{e}"
    );
}

/// A Tick with one read-only tool `echo`, whose catalog revision is what
/// `revision` holds when it is described; it records when (in tokio's
/// time) each describe came.
async fn watched_tick(
    tick: MemoryTick,
    revision: Arc<std::sync::Mutex<&'static str>>,
    describes: Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>,
) {
    fake_tick(tick, move |req| match req["method"].as_str() {
        Some("tick/describe") => {
            describes.lock().unwrap().push(tokio::time::Instant::now());
            json!({"result": {
                "protocol": 3, "kind": "test.watched", "title": "Watched",
                "description": "counts its describes", "revision": *revision.lock().unwrap(),
                "tools": [{"name": "echo", "description": "Return args.",
                           "input_schema": {"type": "object"}, "mutates": false}]}})
        }
        Some("tick/read") => json!({"result": {"seq": 0, "data": {}}}),
        Some("tick/call") => json!({"result": req["params"]["args"]}),
        _ => json!({"error": {"code": -32601, "message": "no such method"}}),
    })
    .await
}

/// On tokio's paused clock (no real waiting): a quiet Tick's catalog is
/// polled less and less often, down to one poll per
/// `DESCRIBE_POLL_BACKOFF` intervals, so an idle host costs next to no
/// CPU; a call brings the poll back to once per interval at once; and a
/// catalog the Tick changes on its own still reaches the client within
/// the longest wait.
#[tokio::test(start_paused = true)]
async fn a_quiet_ticks_catalog_is_polled_less_often_and_a_call_brings_the_poll_back() {
    use tokio::time::{Duration as D, Instant};
    let revision = Arc::new(std::sync::Mutex::new("r1"));
    let describes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (io, tick) = memory::pair();
    tokio::spawn(watched_tick(tick, revision.clone(), describes.clone()));
    let every = super::DESCRIBE_POLL;
    let quiet_most = every * super::DESCRIBE_POLL_BACKOFF;
    let (mut mcp, serving) = serve_initialized("watched", io, FacadeOptions::default()).await;
    mcp.request(1, "tools/list", json!({})).await;

    // Ten minutes of quiet: with a poll per interval that would be 600
    // describes; backing off, it is the doubling steps and then one per
    // longest wait.
    let quiet = D::from_secs(600);
    let from = Instant::now();
    describes.lock().unwrap().clear();
    tokio::time::sleep(quiet).await;
    let polls = describes.lock().unwrap().len() as u32;
    // At least ten times fewer than one per interval, and never none.
    let most = (quiet.as_secs_f64() / every.as_secs_f64() / 10.0) as u32;
    assert!(
        (3..=most).contains(&polls),
        "{polls} polls in {quiet:?} of quiet (expected 3 to {most}: still polled, rarely)"
    );
    let gaps: Vec<D> = describes
        .lock()
        .unwrap()
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    assert!(
        gaps.iter().all(|g| *g <= quiet_most + every),
        "a quiet poll waited longer than {quiet_most:?}: {gaps:?}"
    );
    assert!(from.elapsed() >= quiet);

    // A call: the next poll comes within one interval, and the ones after
    // it at the short interval again.
    describes.lock().unwrap().clear();
    let called = Instant::now();
    let r = mcp.call(2, "echo", json!({"x": 1})).await;
    assert_eq!(r["isError"], false, "{r}");
    tokio::time::sleep(every * 4).await;
    let after: Vec<D> = describes
        .lock()
        .unwrap()
        .iter()
        .map(|t| *t - called)
        .collect();
    assert!(
        after
            .first()
            .is_some_and(|d| *d <= every + D::from_millis(10)),
        "no poll within {every:?} of a call: {after:?}"
    );
    assert!(
        after.len() >= 2,
        "the poll did not return to its short interval: {after:?}"
    );

    // A catalog the Tick changes on its own, after a long quiet: the
    // client hears of it within the longest wait.
    tokio::time::sleep(quiet).await;
    *revision.lock().unwrap() = "r2";
    let changed = Instant::now();
    let noticed = tokio::time::timeout(quiet_most + every * 2, async {
        loop {
            if mcp.next().await["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
    })
    .await;
    assert!(
        noticed.is_ok(),
        "a catalog changed during quiet was not announced within {:?}",
        quiet_most + every * 2
    );
    assert!(changed.elapsed() <= quiet_most + every * 2);

    close(mcp, serving).await;
}
