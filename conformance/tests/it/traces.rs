//! Reading a trace back (`tickbox test show-trace`'s lines) through
//! `tickbox_conformance::scenario::trace`: a trace file is untrusted input,
//! so a hand-edited one prints escaped. Refusing a symbolic link or a file
//! that is not a trace, with one line, stays in `cli/tests/it/traces.rs`.

use tickbox_conformance::scenario::trace;
use tickbox_protocol::text::is_unsafe;
use tickbox_test_support::traces::tampered;
use tickbox_test_support::{assert_inert_by, shows_escaped};

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
    assert_inert_by("show-trace's lines", &text, is_unsafe);
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
    assert!(shows_escaped(&text), "{text}");
}
