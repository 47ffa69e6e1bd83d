//! Log lines on stderr, inert by construction.
//!
//! Every `tracing` event is formatted whole into a buffer and then written
//! as exactly one line: each character of the one policy
//! (`tickbox_runtime::text::is_unsafe`: controls, newlines, bidi, format
//! and default-ignorable characters) becomes a visible escape, whichever
//! field or message it came in. So no value, whoever wrote it and however
//! it was formatted (`%`, `?`, a message argument), can put a control
//! sequence on a person's terminal or forge a second log line. A line is
//! also cut at [`MAX_LOG_LINE_BYTES`], so a Tick's 8 MiB method name costs
//! a bounded line, not 8 MiB of log per attempt.

use std::io::Write;
use tickbox_runtime::text;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The longest log line written, in bytes of the event before escaping
/// (default 8 KiB); the rest is cut and the cut is said on the line.
pub const MAX_LOG_LINE_BYTES: usize = 8 * 1024;

/// Sets up logging to stderr with `filter` (no-op if already set up).
pub fn init(filter: EnvFilter) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(InertStderr)
        // Colours would be escape sequences; the wall would escape them.
        .with_ansi(false)
        .try_init();
}

/// Hands each event its own buffer.
struct InertStderr;

impl<'a> MakeWriter<'a> for InertStderr {
    type Writer = EventLine;

    fn make_writer(&'a self) -> EventLine {
        EventLine(Vec::new())
    }
}

/// One event's formatted bytes; written as one escaped line when dropped.
struct EventLine(Vec<u8>);

impl Write for EventLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Keep a little past the bound, so the cut note can say how much.
        let room = (MAX_LOG_LINE_BYTES + 4).saturating_sub(self.0.len());
        self.0.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventLine {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let line = inert_line(&self.0);
        // One write per line; a failed stderr write has nowhere to go.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// The formatted event as one inert line ending in `\n`.
fn inert_line(event: &[u8]) -> String {
    let cut = event.len() > MAX_LOG_LINE_BYTES;
    let kept = &event[..event.len().min(MAX_LOG_LINE_BYTES)];
    let raw = String::from_utf8_lossy(kept);
    let body = raw.strip_suffix('\n').unwrap_or(&raw);
    let mut line = text::escape(body);
    if cut {
        line.push_str(" … [line cut at the log line bound]");
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_event_is_one_inert_line() {
        let line = inert_line(b"WARN method=\x1b]52;c;aGk=\x07x\r\nFAKE line\xe2\x80\xae\n");
        assert_eq!(line.matches('\n').count(), 1);
        assert!(line.ends_with('\n'));
        assert!(text::is_inert(line.trim_end_matches('\n')), "{line}");
        assert!(line.contains("\\x1b]52"));
    }

    #[test]
    fn a_long_event_is_cut_and_says_so() {
        let line = inert_line(&vec![b'a'; MAX_LOG_LINE_BYTES * 3]);
        assert!(line.len() < MAX_LOG_LINE_BYTES + 100);
        assert!(line.contains("line cut"));
        let short = inert_line(b"plain event\n");
        assert_eq!(short, "plain event\n");
    }
}
