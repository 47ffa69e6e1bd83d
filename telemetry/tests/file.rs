//! The audit trail through the crate's public API, as a host writes it and
//! `tickbox policy suggest` reads it: events recorded into a rotating file
//! by the queued writer, then read back line by line by the typed reader.

use std::sync::Arc;
use std::time::Duration;
use tickbox_telemetry::audit::read::{parse_line, Entry};
use tickbox_telemetry::audit::{Audit, AuditSink, DenialKind, Origin, QueuedWriter, RotatingFile};
use tickbox_telemetry::outcome::CallOutcome;
use tickbox_test_support::TempDir;

#[test]
fn what_the_file_writer_writes_the_typed_reader_reads() {
    let dir = TempDir::new("telemetry-file");
    let path = dir.path("audit.jsonl");
    let file = RotatingFile::open(&path, 1 << 20, 2).expect("open the audit file");
    let writer = QueuedWriter::spawn(Box::new(file)).expect("start the writer");
    let audit = Audit::new(Origin::Cli, vec![writer.clone() as Arc<dyn AuditSink>]).for_session();

    audit.start("t.wasm", "wasm component", None, serde_json::json!({}));
    let args = serde_json::json!({"n": 1});
    let ok = CallOutcome::Ok(serde_json::json!({"total": 1}));
    audit.call("add", true, &args, &ok, Duration::from_millis(2));
    // A hostile path, with a line break and an escape, reads back as given.
    for _ in 0..3 {
        audit.denied(DenialKind::Path, "../\u{1b}]0;x\n/etc", "leads out");
    }
    audit.end(&tickbox_telemetry::outcome::EndReason::Shutdown);
    writer.finish();

    let text = std::fs::read_to_string(&path).expect("read the audit file");
    let lines: Vec<_> = text
        .lines()
        .map(|l| parse_line(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        text.lines().all(|l| !l.contains('\u{1b}')),
        "no raw escape in the file: {text}"
    );
    let session = audit.session().map(str::to_string);
    assert!(lines.iter().all(|l| l.session == session), "{text}");
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| match &l.entry {
            Entry::Start(_) => "start",
            Entry::Call(_) => "call",
            Entry::Denied(_) => "denied",
            Entry::End(_) => "end",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds.first(), Some(&"start"), "{text}");
    assert_eq!(kinds.last(), Some(&"end"), "{text}");
    // The three refusals of one kind are merged: one example, their count.
    let denied: Vec<_> = lines
        .iter()
        .filter_map(|l| match &l.entry {
            Entry::Denied(d) => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(denied.iter().map(|d| d.times()).sum::<u64>(), 3, "{text}");
    assert!(denied.len() < 3, "merged, not one line each: {text}");
    assert_eq!(denied[0].attempted, "../\u{1b}]0;x\n/etc");
    let Some(Entry::Call(call)) = lines
        .iter()
        .map(|l| &l.entry)
        .find(|e| matches!(e, Entry::Call(_)))
    else {
        panic!("no call line: {text}")
    };
    assert_eq!(call.tool.as_deref(), Some("add"));
    assert_eq!(call.outcome.as_deref(), Some("ok"));

    // Control: a line that is not the schema's is refused, naming a rule.
    assert!(parse_line(r#"{"v":99,"event":"start"}"#).is_err());
}
