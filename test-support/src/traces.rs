//! Reading a scenario trace (`NAME.trace.cast`, asciicast v2 with
//! tickbox's records) as a test checks it: its header and events decoded,
//! tickbox's records of one kind, the screens without the renderer's own
//! sequences; and a tampered trace, as someone might hand-edit one.

use serde_json::Value;

/// The bound on a trace file, as `conformance/src/limits.rs` has it.
pub const MAX_TRACE_BYTES: usize = 4 << 20;

/// One event: (time, code, data).
pub type Event = (f64, String, String);

/// A trace's header and its events, decoded.
pub fn events(text: &str) -> (Value, Vec<Event>) {
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header")).expect("JSON header");
    let events = lines
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let e = e.as_array().expect("an event is an array");
            assert_eq!(e.len(), 3, "[time, code, data]: {l}");
            (
                e[0].as_f64().expect("time"),
                e[1].as_str().expect("code").to_string(),
                e[2].as_str().expect("string data").to_string(),
            )
        })
        .collect();
    (header, events)
}

/// tickbox's records (`"t"` events) of one kind.
pub fn records(events: &[Event], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.1 == "t")
        .map(|e| serde_json::from_str::<Value>(&e.2).expect("a record is JSON"))
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// The screen events' data with the renderer's own sequences taken out
/// (cursor position, SGR, erases, cursor visibility): what is left must
/// hold no control character at all.
pub fn without_renderer_sequences(data: &str) -> String {
    let mut out = String::new();
    let mut rest = data;
    while let Some(at) = rest.find("\x1b[") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let params = tail
            .find(|c: char| !(c.is_ascii_digit() || c == ';' || c == '?'))
            .unwrap_or(tail.len());
        match tail[params..].chars().next() {
            Some('H' | 'm' | 'K' | 'J' | 'l' | 'h') => rest = &tail[params + 1..],
            // Anything else stays, so the caller sees its ESC.
            _ => {
                out.push('\x1b');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The file names in `dir`, sorted (none when it does not exist).
pub fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A trace as someone might hand-edit one: escape sequences, bidi and C1
/// characters in every string `show-trace` prints.
pub fn tampered() -> String {
    let evil = "\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[2J\u{9b}31m\u{202e}\r\nFORGED";
    let header = serde_json::json!({
        "version": 2, "width": 20, "height": 4,
        "tickbox": {"trace": 1, "scenario": evil, "file": evil, "seed": 0,
                    "outcome": evil, "cut": evil},
    });
    let step = serde_json::json!({
        "kind": "step", "step": 1, "action": evil, "outcome": evil, "expected": evil,
        "found": [evil], "screen": [evil, evil], "state": evil,
    });
    let frame = serde_json::json!({"kind": "frame", "dir": evil, "text": evil});
    format!(
        "{header}\n{}\n{}\n{}\n",
        serde_json::json!([0.0, "o", evil]),
        serde_json::json!([0.0, "t", frame.to_string()]),
        serde_json::json!([0.5, "t", step.to_string()]),
    )
}
