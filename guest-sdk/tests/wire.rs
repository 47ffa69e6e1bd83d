//! The SDK through its public API and its wire: a Tick written with
//! `impl Tick`, run by the SDK's own entry point as a native process, and
//! spoken to on its stdin and stdout as a host would.
//!
//! The Tick is this test binary itself: run again with [`CHILD`] set, the
//! test below becomes the Tick (`tickbox_guest::__run`, what `main!`
//! expands to) instead of the host. The test harness (quiet) prints its own
//! preamble on stdout before any test runs; the host side skips those
//! lines, up to the first line that is JSON, and checks that they are the
//! harness's.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use tickbox_guest::prelude::*;

/// Set in the re-run test binary that plays the Tick.
const CHILD: &str = "TICKBOX_GUEST_WIRE_TEST_TICK";
/// How long one answer may take: a bound for a hang, not a measure.
const ANSWER: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Tally {
    total: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// How much to add.
    n: i64,
}

impl Tick for Tally {
    const KIND: &'static str = "test.tally";
    const TITLE: &'static str = "Tally";
    const DESCRIPTION: &'static str = "Adds numbers.";

    fn state(&self) -> impl Serialize {
        json!({ "total": self.total })
    }

    fn tools(&self, tools: &mut Tools<Self>) {
        tools.add(
            "add",
            "Add a number.",
            Effect::Mutates,
            |t: &mut Tally, a: Add, _: &mut Ctx| {
                t.total += a.n;
                Ok(json!({ "total": t.total }))
            },
        );
    }
}

/// The host's side of one Tick process.
struct Host {
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<String>,
    child: std::process::Child,
    next_id: i64,
}

impl Host {
    fn start(test: &str) -> Host {
        let mut child = Command::new(std::env::current_exe().expect("this test binary"))
            .args([
                "--exact",
                test,
                "--nocapture",
                "--test-threads=1",
                "--quiet",
            ])
            .env(CHILD, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run this test binary as the Tick");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Host {
            stdin: child.stdin.take().expect("piped stdin"),
            lines,
            child,
            next_id: 1,
        }
    }

    /// The next JSON line; the harness's preamble lines are skipped.
    fn next(&mut self) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(ANSWER)
                .expect("a line from the Tick in time");
            if line.starts_with('{') {
                return serde_json::from_str(&line).expect("a JSON line");
            }
            assert!(
                line.is_empty() || line.starts_with("running "),
                "only the harness's preamble may precede the protocol: {line:?}"
            );
        }
    }

    /// Sends a request and returns its response, collecting the
    /// notifications that came before it.
    fn request(&mut self, method: &str, params: Value, notes: &mut Vec<Value>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").expect("write a request");
        loop {
            let msg = self.next();
            if msg.get("id") == Some(&json!(id)) {
                return msg;
            }
            notes.push(msg);
        }
    }
}

#[test]
fn a_tick_made_with_the_sdk_answers_describe_read_and_call_on_its_stdio() {
    if std::env::var_os(CHILD).is_some() {
        tickbox_guest::__run(Tally::default);
        return;
    }
    let mut host =
        Host::start("a_tick_made_with_the_sdk_answers_describe_read_and_call_on_its_stdio");
    let mut notes = Vec::new();

    let described = host.request("tick/describe", json!({}), &mut notes);
    let result = &described["result"];
    assert_eq!(result["protocol"], tickbox_guest::PROTOCOL, "{described}");
    assert_eq!(result["kind"], "test.tally", "{described}");
    let tools = result["tools"].as_array().expect("a tool catalog");
    assert_eq!(tools.len(), 1, "{described}");
    assert_eq!(tools[0]["name"], "add");
    assert_eq!(tools[0]["mutates"], true);
    assert_eq!(
        tools[0]["input_schema"]["properties"]["n"]["description"],
        "How much to add."
    );

    let revision = result["revision"].clone();
    let read = host.request("tick/read", json!({}), &mut notes);
    assert_eq!(read["result"]["data"], json!({"total": 0}), "{read}");
    let first_seq = read["result"]["seq"].as_u64().expect("a seq");

    let called = host.request(
        "tick/call",
        json!({"tool": "add", "args": {"n": 5}, "revision": revision}),
        &mut notes,
    );
    assert_eq!(called["result"], json!({"total": 5}), "{called}");

    // Control: arguments the schema refuses are refused, unexecuted.
    let refused = host.request(
        "tick/call",
        json!({"tool": "add", "args": {"n": "five"}, "revision": revision}),
        &mut notes,
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let read = host.request("tick/read", json!({}), &mut notes);
    assert_eq!(read["result"]["data"], json!({"total": 5}), "{read}");
    assert!(
        read["result"]["seq"].as_u64().unwrap() > first_seq,
        "{read}"
    );

    // The change was announced as a tick/update, and nothing else was sent.
    let updates: Vec<_> = notes
        .iter()
        .filter(|n| n["method"] == "tick/update")
        .collect();
    assert!(
        !updates.is_empty(),
        "no tick/update after a mutating call: {notes:?}"
    );
    assert_eq!(updates.len(), notes.len(), "{notes:?}");

    // At stdin's end the Tick exits.
    drop(host.stdin);
    let (done, exited) = mpsc::channel();
    let mut child = host.child;
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let status = exited.recv_timeout(ANSWER).expect("the Tick exits at EOF");
    assert!(status.expect("wait").success());
}
