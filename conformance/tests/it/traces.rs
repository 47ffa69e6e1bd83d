//! Reading a trace back (`tickbox test show-trace`'s lines) through
//! `tickbox_conformance::scenario::trace`: a trace file is untrusted input,
//! so a hand-edited one prints escaped. Refusing a symbolic link or a file
//! that is not a trace, with one line, stays in `cli/tests/it/traces.rs`.

use tickbox_conformance::scenario::trace;
use tickbox_protocol::text::is_unsafe;
use tickbox_test_support::traces::tampered;

/// What `show-trace --all` prints of a trace: its heading, each step, and
/// why it was cut.
fn shown(view: &trace::TraceView) -> String {
    let mut lines = view.heading();
    for s in &view.steps {
        lines.extend(s.lines());
    }
    if let Some(why) = &view.cut {
        lines.push(format!("cut: {why}"));
    }
    lines.join("\n")
}

#[test]
fn show_trace_prints_a_tampered_trace_escaped() {
    let view = trace::parse(&tampered()).expect("a trace, however edited");
    let text = shown(&view);
    let raw: Vec<char> = text
        .chars()
        .filter(|c| is_unsafe(*c) && *c != '\n')
        .collect();
    assert!(raw.is_empty(), "raw {raw:?} in:\n{text}");
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("FORGED")),
        "{text}"
    );
    // Each field got through, escaped (the positive control).
    let escaped = text.matches("\\x1b]52;c;").count();
    assert!(
        escaped >= 10,
        "every field is shown escaped ({escaped}): {text}"
    );
    assert!(
        text.contains("\\u{202e}") || text.contains("\\u202e") || text.contains("\\u{202E}"),
        "{text}"
    );
}
