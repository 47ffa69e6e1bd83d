//! Reading an audit file as the tests check it: its events, parsed line
//! by line, and the events of one kind or of one session.

use serde_json::Value;
use std::path::Path;

/// The audit file's events, each line parsed (a line that is not one JSON
/// object fails the test; a missing file has none).
pub fn events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}")))
        .collect()
}

/// The events of kind `event` (and, for `denied`, of what `what`).
pub fn of<'a>(all: &'a [Value], event: &str, what: Option<&str>) -> Vec<&'a Value> {
    all.iter()
        .filter(|e| e["event"] == event && what.is_none_or(|w| e["what"] == w))
        .collect()
}

/// The events of one session: the one whose `start` satisfies `pick`.
pub fn session_of(all: &[Value], pick: impl Fn(&Value) -> bool) -> Vec<&Value> {
    let start = all
        .iter()
        .find(|e| e["event"] == "start" && pick(e))
        .unwrap_or_else(|| panic!("no such start in {all:#?}"));
    let id = &start["session"];
    all.iter().filter(|e| &e["session"] == id).collect()
}
