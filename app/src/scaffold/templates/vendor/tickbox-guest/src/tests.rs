//! Unit tests: one per protocol duty, driving the dispatcher with in-memory
//! lines and reading back the frames it wrote.

use crate::dispatch::{codes, Runtime};
use crate::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The Appendix A counter, plus a switch that adds a tool at run time.
#[derive(Default)]
struct Counter {
    value: i64,
    recent: Vec<Value>,
    seq: u64,
    big: usize,
    extra_tool: bool,
    cursor: u32,
    ticks: u32,
}

#[derive(Deserialize, JsonSchema)]
struct Increment {
    amount: i64,
}

impl Counter {
    fn change(&mut self, by: i64) {
        self.value += by;
        self.seq += 1;
        self.recent
            .push(json!({"seq": self.seq, "value": self.value}));
    }
}

impl Tick for Counter {
    const KIND: &'static str = "example.counter";
    const TITLE: &'static str = "Counter";
    const DESCRIPTION: &'static str = "Keyboard and tool calls share one value.";
    const RECOVER_WITH: Option<&'static str> = Some("history");
    const SERIES: &'static [Series] = &[Series::newest_last("/recent")];

    fn state(&self) -> impl Serialize {
        let mut v = json!({"value": self.value, "recent": self.recent});
        if self.big > 0 {
            v["big"] = json!("x".repeat(self.big));
        }
        v
    }

    fn tools(&self, t: &mut Tools<Self>) {
        t.add(
            "increment",
            "Add an integer to the counter.",
            Effect::Mutates,
            |c: &mut Counter, a: Increment, _: &mut Ctx| {
                c.change(a.amount);
                Ok(json!({"value": c.value}))
            },
        );
        t.add(
            "history",
            "Read the last 256 changes.",
            Effect::ReadOnly,
            |c: &mut Counter, _: NoArgs, _: &mut Ctx| Ok(json!({"recent": c.recent})),
        );
        t.add(
            "fail",
            "Fails as asked.",
            Effect::Mutates,
            |_: &mut Counter, a: Value, _: &mut Ctx| -> Result<Value, ToolError> {
                if a["executed"] == json!(true) {
                    Err(ToolError::failed("half done"))
                } else {
                    Err(ToolError::rejected("nothing done"))
                }
            },
        );
        t.add(
            "grow",
            "Makes the state huge.",
            Effect::Mutates,
            |c: &mut Counter, _: NoArgs, _: &mut Ctx| {
                c.big = 600 * 1024;
                Ok(json!({}))
            },
        );
        t.add(
            "toggle",
            "Adds or removes the `extra` tool.",
            Effect::Mutates,
            |c: &mut Counter, _: NoArgs, _: &mut Ctx| {
                c.extra_tool = !c.extra_tool;
                Ok(json!({}))
            },
        );
        t.add(
            "tick_every",
            "Starts a 10 ms timer.",
            Effect::Mutates,
            |_: &mut Counter, _: NoArgs, ctx: &mut Ctx| {
                ctx.every(Duration::from_millis(10));
                Ok(json!({}))
            },
        );
        t.add(
            "point",
            "Moves the view's highlight (presentation only) and asks for a redraw.",
            Effect::ReadOnly,
            |c: &mut Counter, _: NoArgs, ctx: &mut Ctx| {
                c.cursor += 1;
                ctx.redraw();
                Ok(json!({}))
            },
        );
        t.add(
            "sneak",
            "Declared read-only, yet changes the value.",
            Effect::ReadOnly,
            |c: &mut Counter, _: NoArgs, _: &mut Ctx| {
                c.change(1);
                Ok(json!({}))
            },
        );
        if self.extra_tool {
            t.add(
                "extra",
                "Exists only sometimes.",
                Effect::ReadOnly,
                |_: &mut Counter, _: NoArgs, _: &mut Ctx| Ok(json!({})),
            );
        }
    }

    fn on_key(&mut self, key: Key, _: &mut Ctx) {
        match key {
            Key::Char('+') => self.change(1),
            Key::Char('-') => self.change(-1),
            // Presentation only: must never become an update.
            Key::Down => self.cursor += 1,
            _ => {}
        }
    }

    fn on_timer(&mut self, _: TimerId, _: &mut Ctx) {
        self.ticks += 1;
        self.change(10);
    }

    /// The default view (title and state) plus the highlight.
    fn view(&self, frame: &mut Frame) {
        let state = serde_json::to_string_pretty(&self.state()).unwrap_or_default();
        let text = format!("Counter\n\n{state}\nhighlight {}", self.cursor);
        frame.render_widget(Paragraph::new(text), frame.area());
    }
}

struct Harness {
    rt: Runtime<Counter>,
    out: Rc<RefCell<Vec<u8>>>,
    reports: Rc<RefCell<Vec<String>>>,
    screen: Rc<RefCell<Vec<u8>>>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(Counter::default())
    }

    fn with(c: Counter) -> Harness {
        let out = Rc::new(RefCell::new(Vec::new()));
        let reports = Rc::new(RefCell::new(Vec::new()));
        let screen = Rc::new(RefCell::new(Vec::new()));
        let (o, r, s) = (out.clone(), reports.clone(), screen.clone());
        let rt = Runtime::new(
            c,
            (40, 10),
            Box::new(move |b: &[u8]| {
                o.borrow_mut().extend_from_slice(b);
                Ok(())
            }),
            Box::new(move |m: &str| r.borrow_mut().push(m.to_string())),
            Some(Box::new(move |b: &[u8]| {
                s.borrow_mut().extend_from_slice(b)
            })),
        );
        Harness {
            rt,
            out,
            reports,
            screen,
        }
    }

    /// Every frame written since the last call, parsed.
    fn frames(&self) -> Vec<Value> {
        let bytes = std::mem::take(&mut *self.out.borrow_mut());
        let text = String::from_utf8(bytes).expect("utf-8");
        assert!(text.is_empty() || text.ends_with('\n'), "{text:?}");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("each frame is one JSON line"))
            .collect()
    }

    fn send(&mut self, frame: Value) -> Vec<Value> {
        self.rt.line(&frame.to_string());
        self.frames()
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Vec<Value> {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
    }

    fn call(&mut self, id: u64, tool: &str, args: Value) -> Vec<Value> {
        let rev = self.revision();
        self.request(
            id,
            "tick/call",
            json!({"tool": tool, "args": args, "revision": rev}),
        )
    }

    fn revision(&mut self) -> String {
        let r = self.request(999, "tick/describe", json!({}));
        assert_eq!(r.len(), 1, "{r:?}");
        r[0]["result"]["revision"].as_str().unwrap().to_string()
    }
}

fn updates(frames: &[Value]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f["method"] == "tick/update")
        .map(|f| f["params"]["seq"].as_u64().unwrap())
        .collect()
}

fn response(frames: &[Value], id: u64) -> &Value {
    let found: Vec<&Value> = frames.iter().filter(|f| f["id"] == json!(id)).collect();
    assert_eq!(found.len(), 1, "exactly one response to {id}: {frames:?}");
    found[0]
}

#[test]
fn describe_matches_appendix_a() {
    let mut h = Harness::new();
    let r = h.request(1, "tick/describe", json!({}));
    let d = &response(&r, 1)["result"];
    assert_eq!(d["protocol"], 3);
    assert_eq!(d["kind"], "example.counter");
    assert_eq!(d["revision"], "1");
    assert_eq!(d["recover_with"], "history");
    assert_eq!(
        d["state"],
        json!({"series": [{"path": "/recent", "newest": "last"}]})
    );
    assert_eq!(
        d["tools"][0],
        json!({"name": "increment", "description": "Add an integer to the counter.",
               "input_schema": {"type": "object", "properties": {"amount": {"type": "integer"}},
                                "required": ["amount"], "additionalProperties": false},
               "mutates": true})
    );
    assert_eq!(
        d["tools"][1],
        json!({"name": "history", "description": "Read the last 256 changes.",
               "input_schema": {"type": "object", "additionalProperties": false}, "mutates": false})
    );
}

#[test]
fn framing_is_one_line_per_frame_with_the_jsonrpc_tag() {
    let mut h = Harness::new();
    h.rt.line(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tick/describe", "params": {}}).to_string(),
    );
    let bytes = h.out.borrow().clone();
    assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(bytes.last(), Some(&b'\n'));
    let frames = h.frames();
    assert_eq!(frames[0]["jsonrpc"], "2.0");
}

#[test]
fn unparseable_lines_and_unusable_ids_get_no_reply() {
    let mut h = Harness::new();
    for line in [
        "{not json",
        "",
        "[1,2]",
        r#"{"jsonrpc":"2.0","method":"tick/read"}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tick/read"}"#,
        r#"{"jsonrpc":"2.0","id":"7","method":"tick/read"}"#,
        r#"{"jsonrpc":"2.0","id":-1,"method":"tick/read"}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tick/read"}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
    ] {
        h.rt.line(line);
        assert!(h.frames().is_empty(), "{line} must not be answered");
    }
    // And nothing the SDK ever writes carries id null.
    let r = h.request(5, "tick/nope", json!({}));
    assert_eq!(response(&r, 5)["error"]["code"], codes::METHOD_NOT_FOUND);
}

#[test]
fn every_request_gets_exactly_one_response_with_its_id() {
    let mut h = Harness::new();
    let rev = h.revision();
    for (id, method, params) in [
        (1, "tick/describe", json!({})),
        (2, "tick/read", json!({})),
        (
            3,
            "tick/call",
            json!({"tool": "increment", "args": {"amount": 1}, "revision": rev}),
        ),
        (
            4,
            "tick/call",
            json!({"tool": "nope", "args": {}, "revision": rev}),
        ),
        (5, "tick/other", json!({})),
        (6, "tick/read", json!({"unknown": "params are ignored"})),
    ] {
        let r = h.request(id, method, params);
        let resp = response(&r, id);
        assert!(
            resp.get("result").is_some() != resp.get("error").is_some(),
            "exactly one of result and error: {resp}"
        );
    }
    let r = h.send(json!({"jsonrpc": "1.0", "id": 9, "method": "tick/read"}));
    assert_eq!(response(&r, 9)["error"]["code"], codes::INVALID_REQUEST);
}

#[test]
fn a_call_updates_state_before_it_responds() {
    let mut h = Harness::new();
    let r = h.request(2, "tick/read", json!({}));
    assert_eq!(
        response(&r, 2)["result"],
        json!({"seq": 0, "data": {"value": 0, "recent": []}})
    );
    let r = h.call(3, "increment", json!({"amount": 2}));
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(
        r[0],
        json!({"jsonrpc": "2.0", "method": "tick/update",
        "params": {"seq": 1, "data": {"value": 2, "recent": [{"seq": 1, "value": 2}]}}})
    );
    assert_eq!(
        r[1],
        json!({"jsonrpc": "2.0", "id": 3, "result": {"value": 2}})
    );
}

#[test]
fn seq_grows_strictly_and_reads_never_fall_below_the_last_update() {
    let mut h = Harness::new();
    let mut all = Vec::new();
    for i in 0..5 {
        all.extend(updates(&h.call(10 + i, "increment", json!({"amount": 1}))));
        h.rt.keys(b"+");
        all.extend(updates(&h.frames()));
        let read = h.request(100 + i, "tick/read", json!({}));
        let seq = response(&read, 100 + i)["result"]["seq"].as_u64().unwrap();
        assert!(
            seq >= *all.last().unwrap(),
            "read {seq} below update {all:?}"
        );
    }
    assert!(all.windows(2).all(|w| w[1] > w[0]), "{all:?}");
    assert_eq!(all.len(), 10);
}

#[test]
fn only_business_changes_become_updates() {
    let mut h = Harness::new();
    // Presentation: a cursor key, a resize, reads, describes and queries.
    h.rt.keys(b"\x1b[B\x1b[B");
    h.rt.resize(100, 40);
    h.request(1, "tick/read", json!({}));
    h.request(2, "tick/describe", json!({}));
    let r = h.call(3, "history", json!({}));
    assert!(updates(&r).is_empty());
    assert!(updates(&h.frames()).is_empty());
    assert_eq!(h.rt.tick().cursor, 2);
    assert!(!h.screen.borrow().is_empty(), "redraws still happen");
    // A key that changes the value: exactly one update.
    h.rt.keys(b"+");
    assert_eq!(updates(&h.frames()), vec![1]);
}

#[test]
fn an_oversized_state_is_reported_and_never_sent() {
    let mut h = Harness::new();
    let r = h.call(1, "grow", json!({}));
    assert!(
        updates(&r).is_empty(),
        "a 600 KiB update would end the session"
    );
    assert_eq!(response(&r, 1)["result"], json!({}));
    let reports = h.reports.borrow().join("\n");
    assert!(reports.contains("tick/update allows 524288"), "{reports}");
    assert!(reports.contains("query tools"), "{reports}");
}

#[test]
fn a_stale_revision_is_refused_without_running() {
    let mut h = Harness::new();
    let r = h.request(
        4,
        "tick/call",
        json!({"tool": "increment", "args": {"amount": 1}, "revision": "0"}),
    );
    let e = &response(&r, 4)["error"];
    assert_eq!(e["code"], codes::REVISION_CHANGED);
    assert!(updates(&r).is_empty());
    assert_eq!(h.rt.tick().value, 0, "not executed");
    let r = h.request(
        5,
        "tick/call",
        json!({"tool": "increment", "args": {"amount": 1}}),
    );
    assert_eq!(
        response(&r, 5)["error"]["code"],
        codes::REVISION_CHANGED,
        "missing revision"
    );
}

#[test]
fn unknown_tools_and_invalid_args_are_refused_without_running() {
    let mut h = Harness::new();
    for (id, tool, args) in [
        (1, "nope", json!({})),
        (2, "increment", json!({})),
        (3, "increment", json!({"amount": "two"})),
        (4, "increment", json!({"amount": 1, "extra": true})),
        (5, "increment", json!([1])),
        (6, "history", json!({"x": 1})),
        (7, "increment", json!({"amount": 1.5})),
    ] {
        let r = h.call(id, tool, args);
        assert_eq!(
            response(&r, id)["error"]["code"],
            codes::INVALID_PARAMS,
            "{tool}"
        );
        assert!(updates(&r).is_empty());
    }
    assert_eq!(h.rt.tick().value, 0);
    // Missing args means {} (§7.1).
    let rev = h.revision();
    let r = h.request(8, "tick/call", json!({"tool": "history", "revision": rev}));
    assert!(response(&r, 8).get("result").is_some());
}

#[test]
fn tool_errors_carry_the_authors_choice_of_code() {
    let mut h = Harness::new();
    let r = h.call(1, "fail", json!({"executed": true}));
    assert_eq!(
        response(&r, 1)["error"],
        json!({"code": -32000, "message": "half done"})
    );
    let r = h.call(2, "fail", json!({"executed": false}));
    assert_eq!(response(&r, 2)["error"]["code"], -32602);
    // `?` on an ordinary error is "executed": it may have had effects.
    let e: ToolError = std::io::Error::other("disk full").into();
    assert_eq!(e.error_code(), -32000);
}

#[test]
fn catalog_changes_bump_the_revision_and_invalidate_old_calls() {
    let mut h = Harness::new();
    assert_eq!(h.revision(), "1");
    h.call(1, "toggle", json!({}));
    assert_eq!(h.revision(), "2");
    let r = h.request(2, "tick/describe", json!({}));
    let names: Vec<&str> = response(&r, 2)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"extra"), "{names:?}");
    let r = h.request(
        3,
        "tick/call",
        json!({"tool": "extra", "args": {}, "revision": "1"}),
    );
    assert_eq!(response(&r, 3)["error"]["code"], codes::REVISION_CHANGED);
    h.call(4, "toggle", json!({}));
    assert_eq!(h.revision(), "3", "removing a tool is a change too");
    // Unchanged catalogs keep their revision across events.
    h.rt.keys(b"+");
    assert_eq!(updates(&h.frames()).len(), 1);
    assert_eq!(h.revision(), "3");
}

#[test]
fn timers_fire_in_the_background_and_emit_updates() {
    let mut h = Harness::new();
    h.call(1, "tick_every", json!({}));
    let due = h.rt.next_deadline().expect("a timer is set");
    h.rt.timers(due);
    assert_eq!(h.rt.tick().ticks, 1);
    assert_eq!(updates(&h.frames()), vec![1]);
    // Far behind schedule: one call, not a burst.
    h.rt.timers(Instant::now() + Duration::from_secs(5));
    assert_eq!(h.rt.tick().ticks, 2);
    assert!(h.rt.next_deadline().unwrap() > Instant::now() + Duration::from_secs(5));
}

#[test]
fn keys_reach_the_tick_and_redraw_the_view() {
    let mut h = Harness::new();
    // Keys of one read are one event: one update with the end result.
    h.rt.keys(b"++-");
    assert_eq!(updates(&h.frames()), vec![1]);
    assert_eq!(h.rt.tick().value, 1);
    // Separate reads, separate updates.
    h.rt.keys(b"+");
    h.rt.keys(b"-");
    assert_eq!(updates(&h.frames()), vec![2, 3]);
    assert_eq!(h.rt.tick().value, 1);
    // Two changes in one read (the value ends where it was; the list of
    // recent changes grew by two): one update, not two.
    h.rt.keys(b"+-");
    assert_eq!(updates(&h.frames()), vec![4]);
    // Presentation-only keys in one read: none.
    h.rt.keys(b"\x1b[B\x1b[B");
    assert!(updates(&h.frames()).is_empty());
    let mut parser = vt100::Parser::new(
        std::num::NonZeroU16::new(10).unwrap(),
        std::num::NonZeroU16::new(40).unwrap(),
        0,
    );
    parser.process(&h.screen.borrow());
    let screen = parser.screen().contents();
    assert!(screen.starts_with("Counter"), "{screen}");
    assert!(
        screen.contains("\"value\": 1"),
        "default view shows the state: {screen}"
    );
}

#[derive(Default)]
struct Broken;
impl Tick for Broken {
    const KIND: &'static str = "test.broken";
    const TITLE: &'static str = " ";
    const DESCRIPTION: &'static str = "";
    const RECOVER_WITH: Option<&'static str> = Some("nothing");
    fn state(&self) -> impl Serialize {
        Value::Null
    }
}

#[test]
fn broken_declarations_are_named_to_the_author() {
    let reports = Rc::new(RefCell::new(Vec::<String>::new()));
    let out = Rc::new(RefCell::new(Vec::<u8>::new()));
    let (r, o) = (reports.clone(), out.clone());
    let mut rt = Runtime::new(
        Broken,
        (10, 10),
        Box::new(move |b: &[u8]| {
            o.borrow_mut().extend_from_slice(b);
            Ok(())
        }),
        Box::new(move |m: &str| r.borrow_mut().push(m.into())),
        None,
    );
    assert!(reports.borrow()[0].contains("TITLE must not be empty"));
    rt.line(r#"{"jsonrpc":"2.0","id":1,"method":"tick/describe","params":{}}"#);
    let v: Value = serde_json::from_slice(&out.borrow()).unwrap();
    assert_eq!(v["error"]["code"], codes::INTERNAL);
    // A null state reads as "no content yet".
    out.borrow_mut().clear();
    rt.line(r#"{"jsonrpc":"2.0","id":2,"method":"tick/read","params":{}}"#);
    let v: Value = serde_json::from_slice(&out.borrow()).unwrap();
    assert_eq!(v["result"], json!({"seq": 0, "data": null}));
}

#[test]
fn schemas_are_closed_and_free_of_rust_noise() {
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// The note's name.
        name: String,
        count: Option<u32>,
    }
    let s = crate::schema_for::<Args>();
    assert_eq!(s["additionalProperties"], false);
    assert_eq!(s["properties"]["name"]["description"], "The note's name.");
    assert!(
        s.get("$schema").is_none() && s.get("title").is_none(),
        "{s}"
    );
    assert!(!s.to_string().contains("uint32"), "{s}");
    // Even a free-form `Value` takes an object (§7.1).
    assert_eq!(crate::schema_for::<Value>(), json!({"type": "object"}));
}

#[test]
fn cached_schemas_keep_same_named_types_apart() {
    // Two argument types with one name in two modules: a cache keyed by the
    // name would hand the second tool the first one's schema.
    mod a {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        pub struct Args {
            pub left: i64,
        }
    }
    mod b {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[allow(dead_code)]
        pub struct Args {
            pub right: String,
        }
    }
    // Built twice, as the SDK does after every event: the second build comes
    // from the cache and must be the same.
    for _ in 0..2 {
        let mut tools = crate::catalog::Tools::<()>::default();
        tools.add(
            "a",
            "A.",
            Effect::ReadOnly,
            |_: &mut (), _: a::Args, _: &mut Ctx| Ok(json!({})),
        );
        tools.add(
            "b",
            "B.",
            Effect::ReadOnly,
            |_: &mut (), _: b::Args, _: &mut Ctx| Ok(json!({})),
        );
        assert_eq!(*tools.list[0].schema, crate::schema_for::<a::Args>());
        assert_eq!(*tools.list[1].schema, crate::schema_for::<b::Args>());
        assert!(tools.list[0].schema["properties"].get("left").is_some());
        assert!(tools.list[1].schema["properties"].get("right").is_some());
    }
}

#[test]
fn a_read_only_call_that_changes_nothing_draws_nothing() {
    let mut h = Harness::new();
    h.revision();
    h.screen.borrow_mut().clear();
    let r = h.call(1, "history", json!({}));
    assert_eq!(response(&r, 1)["result"], json!({"recent": []}));
    assert!(h.screen.borrow().is_empty(), "no redraw after history");
    // A read-only tool that changes the view asks for its redraw.
    h.call(2, "point", json!({}));
    let drawn = String::from_utf8(std::mem::take(&mut *h.screen.borrow_mut())).unwrap();
    assert!(drawn.contains('1'), "the highlight is drawn: {drawn:?}");
    // Positive control: a mutating call redraws.
    h.call(3, "increment", json!({"amount": 5}));
    let drawn = String::from_utf8(std::mem::take(&mut *h.screen.borrow_mut())).unwrap();
    assert!(drawn.contains('5'), "the new value is drawn: {drawn:?}");
    // A read-only tool that changes the state anyway (dishonest) still
    // gets its update and its redraw.
    let r = h.call(4, "sneak", json!({}));
    assert_eq!(updates(&r), vec![2]);
    let drawn = String::from_utf8(std::mem::take(&mut *h.screen.borrow_mut())).unwrap();
    assert!(drawn.contains('6'), "the changed value is drawn: {drawn:?}");
}

/// Each write a runtime made, in order.
type Writes = Rc<RefCell<Vec<Vec<u8>>>>;

/// A runtime whose output records each write separately.
fn recording() -> (Runtime<Counter>, Writes) {
    let writes = Rc::new(RefCell::new(Vec::new()));
    let w = writes.clone();
    let rt = Runtime::new(
        Counter::default(),
        (40, 10),
        Box::new(move |b: &[u8]| {
            w.borrow_mut().push(b.to_vec());
            Ok(())
        }),
        Box::new(|_: &str| {}),
        None,
    );
    (rt, writes)
}

/// The frames of one write: whole lines of JSON, nothing after the last newline.
fn frames_of(write: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(write).expect("utf-8");
    assert!(
        text.ends_with('\n'),
        "a write ends with a whole frame: {text:?}"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).expect("each frame is one JSON line"))
        .collect()
}

fn request_line(id: u64, method: &str, params: Value) -> String {
    let mut line =
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    line.push('\n');
    line
}

#[test]
fn the_answers_to_one_read_go_out_in_one_write_in_order() {
    let (mut rt, writes) = recording();
    let mut framer = tickbox_protocol::framing::LineFramer::new();
    let call = |id, tool: &str, args: Value| {
        request_line(
            id,
            "tick/call",
            json!({"tool": tool, "args": args, "revision": "1"}),
        )
    };
    let read = [
        request_line(1, "tick/read", json!({})),
        call(2, "increment", json!({"amount": 3})),
        "not json\n".to_string(),
        call(3, "history", json!({})),
        request_line(4, "tick/describe", json!({})),
    ]
    .concat();
    rt.input(&mut framer, read.as_bytes()).unwrap();
    let writes = std::mem::take(&mut *writes.borrow_mut());
    assert_eq!(writes.len(), 1, "one write for the whole read");
    let frames = frames_of(&writes[0]);
    // Request order, and the update before the response of the call that
    // made it; the line that is not JSON is dropped unanswered.
    let order: Vec<String> = frames
        .iter()
        .map(|f| match f.get("id") {
            Some(id) => id.to_string(),
            None => f["method"].as_str().unwrap().to_string(),
        })
        .collect();
    assert_eq!(order, ["1", "tick/update", "2", "3", "4"], "{frames:?}");
    assert_eq!(updates(&frames), vec![1]);
    assert_eq!(response(&frames, 2)["result"], json!({"value": 3}));
}

#[test]
fn a_read_that_ends_mid_line_keeps_the_rest_for_the_next_read() {
    let (mut rt, writes) = recording();
    let mut framer = tickbox_protocol::framing::LineFramer::new();
    let all = (1..=5)
        .map(|id| request_line(id, "tick/read", json!({})))
        .collect::<String>();
    // Cut inside the third request, then inside the fifth.
    let cut1 = all.find("\"id\":3").unwrap() + 3;
    let cut2 = all.find("\"id\":5").unwrap() + 2;
    let mut seen = Vec::new();
    for (i, part) in [&all[..cut1], &all[cut1..cut2], &all[cut2..]]
        .into_iter()
        .enumerate()
    {
        rt.input(&mut framer, part.as_bytes()).unwrap();
        let w = std::mem::take(&mut *writes.borrow_mut());
        assert_eq!(w.len(), 1, "read {i}: one write");
        seen.extend(frames_of(&w[0]).iter().map(|f| f["id"].as_u64().unwrap()));
    }
    assert_eq!(seen, [1, 2, 3, 4, 5], "every answer, once, in order");
    assert_eq!(framer.pending(), 0);
    // A read without a complete line writes nothing.
    rt.input(&mut framer, b"{\"jsonrpc\"").unwrap();
    assert!(writes.borrow().is_empty());
}

#[test]
fn a_full_batch_goes_out_at_a_frame_boundary() {
    use crate::dispatch::MAX_HELD;
    let (mut rt, writes) = recording();
    let mut framer = tickbox_protocol::framing::LineFramer::new();
    // Descriptors of a few KiB each: enough of them pass the bound.
    let one = {
        rt.input(
            &mut framer,
            request_line(0, "tick/describe", json!({})).as_bytes(),
        )
        .unwrap();
        writes.borrow_mut().pop().unwrap().len()
    };
    let n = (3 * MAX_HELD / one + 1) as u64;
    let read = (1..=n)
        .map(|id| request_line(id, "tick/describe", json!({})))
        .collect::<String>();
    rt.input(&mut framer, read.as_bytes()).unwrap();
    let w = std::mem::take(&mut *writes.borrow_mut());
    assert!(w.len() >= 3, "the batch was written in parts: {}", w.len());
    let mut ids = Vec::new();
    for (i, part) in w.iter().enumerate() {
        if i + 1 < w.len() {
            assert!(part.len() >= MAX_HELD, "a part goes out once full");
            assert!(part.len() < MAX_HELD + one, "and no later");
        }
        ids.extend(frames_of(part).iter().map(|f| f["id"].as_u64().unwrap()));
    }
    assert_eq!(ids, (1..=n).collect::<Vec<_>>(), "none lost, in order");
}

#[test]
fn a_line_over_the_limit_ends_input_after_the_frames_before_it() {
    let (mut rt, writes) = recording();
    let mut framer = tickbox_protocol::framing::LineFramer::with_limit(200);
    let mut read = request_line(1, "tick/read", json!({}));
    read.push_str(&"x".repeat(300));
    assert!(rt.input(&mut framer, read.as_bytes()).is_err());
    let w = std::mem::take(&mut *writes.borrow_mut());
    assert_eq!(w.len(), 1);
    assert_eq!(frames_of(&w[0])[0]["id"], json!(1));
}

#[test]
fn outside_a_read_frames_go_out_at_once() {
    let (mut rt, writes) = recording();
    rt.line(request_line(1, "tick/read", json!({})).trim_end());
    assert_eq!(writes.borrow().len(), 1, "a lone line is answered at once");
    rt.keys(b"+");
    assert_eq!(writes.borrow().len(), 2, "a key's update goes out at once");
    assert_eq!(updates(&frames_of(&writes.borrow()[1])), vec![1]);
    // Held frames wait for release, then go out in one write.
    rt.hold();
    rt.keys(b"+");
    rt.line(request_line(2, "tick/read", json!({})).trim_end());
    assert_eq!(writes.borrow().len(), 2, "held");
    rt.release();
    assert_eq!(writes.borrow().len(), 3);
    let last = frames_of(&writes.borrow()[2]);
    assert_eq!(updates(&last), vec![2]);
    assert_eq!(response(&last, 2)["result"]["seq"], json!(2));
}
