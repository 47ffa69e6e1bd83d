//! Tick text through the facade: one hostile corpus (`tests/ticks/corpus.py`
//! puts it in every string a Tick controls) in the tool listing, every
//! tool's result and the state resource, decoded as a client decodes them.
//! None may carry the corpus's characters raw (the one policy,
//! `text::is_unsafe`), and each must still carry the text, escaped (the
//! positive control: nothing was dropped to pass). The binary's sinks
//! (stdout, stderr, logs, `ls`) are the CLI's `tick_text` tests.

use crate::native;
use crate::raw::Raw;
use serde_json::{json, Value};
use tickbox_protocol::text::is_unsafe;
use tickbox_test_support::{assert_inert_by, shows_escaped, tick};

/// Every string (and key) of a decoded JSON value, in one text.
fn strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push(' ');
        }
        Value::Array(a) => a.iter().for_each(|i| strings(i, out)),
        Value::Object(m) => m.iter().for_each(|(k, i)| {
            out.push_str(k);
            out.push(' ');
            strings(i, out)
        }),
        _ => {}
    }
}

/// A decoded value carries none of the corpus raw (line breaks and tabs
/// are data inside a JSON string); its text.
fn assert_inert_value(sink: &str, v: &Value) -> String {
    let mut all = String::new();
    strings(v, &mut all);
    assert_inert_by(sink, &all.replace(['\n', '\t'], " "), is_unsafe);
    all
}

#[test]
fn one_hostile_corpus_reaches_no_mcp_result_raw() {
    let corpus = native(vec!["python3".into(), tick("corpus.py")], &[]);
    let mut mcp = Raw::start_setup(crate::Setup::of(vec![crate::Hosting::shared(
        Some("corpus"),
        corpus,
    )]));
    mcp.initialize("2025-06-18");
    let listed = mcp.request(1, "tools/list", json!({}));
    let all = assert_inert_value("tools/list", &listed);
    assert!(
        shows_escaped(&all),
        "descriptions carry the corpus escaped: {listed}"
    );
    let names: Vec<String> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let named = |suffix: &str| -> String {
        names
            .iter()
            .find(|n| n.ends_with(suffix))
            .unwrap_or_else(|| panic!("no tool ending in {suffix}: {names:?}"))
            .clone()
    };
    for (id, suffix) in [
        (2, "tick_state"),
        (3, "tick_screen"),
        (4, "echo"),
        (5, "fail"),
    ] {
        let tool = named(suffix);
        let r = mcp.request(id, "tools/call", json!({"name": tool, "arguments": {}}));
        assert!(r.get("result").is_some(), "{tool}: {r}");
        let all = assert_inert_value(&tool, &r);
        assert!(
            shows_escaped(&all),
            "{tool} carries the corpus escaped: {r}"
        );
    }
    let read = mcp.request(6, "resources/read", json!({"uri": "tick://corpus/state"}));
    assert_inert_value("resources/read", &read);
    let (served, log) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {log}");
}
