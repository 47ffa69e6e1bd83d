//! Every bound of telemetry, in one table: the audit stream's
//! ([`crate::audit`]), the metrics' ([`crate::metrics`]) and
//! OpenTelemetry's ([`crate::otel`]).
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **audit stream** ([`crate::audit`]) | | |
//! | [`MAX_AUDIT_LINE_BYTES`] | 16 KiB | one event line, newline excluded; a longer event is cut (`"cut": true`) |
//! | [`MAX_AUDIT_TEXT_CHARS`] | 1024 | one string an event carries (a path, a message, a name) |
//! | [`AUDIT_QUEUE_EVENTS`] | 4096 | events waiting for the writer; past it they are counted as `lost` |
//! | [`AUDIT_FLUSH_WAIT`] | 2 s | how long the end of a process waits for queued events to be written |
//! | [`AUDIT_BATCH_WAIT`] | 25 ms | how long the writer, once woken, gathers events before writing them as one batch (a line's greatest delay); a synced writer (`QueuedWriter::synced`) does not wait |
//! | [`AUDIT_MERGE_WINDOW`] | 60 s | repeated refusals (or limits) of one kind from one Tick session are merged into one line with a count at most this often, and at the session's end |
//! | [`MAX_AUDIT_SESSION_BYTES`] | 1 MiB | the lines one Tick session's own doings (`used`, `denied`, `limit`) may take; past it they are counted, and one `unrecorded` event at the session's end says how many of each kind were dropped |
//! | [`AUDIT_FILE_MAX_BYTES`] | 16 MiB | an audit file (`--audit FILE`, the policy and MCP-config keys) before it is rotated |
//! | [`AUDIT_FILE_KEEP`] | 3 | rotated files kept beside an audit file (`.1` newest) |
//! | [`LIVE_AUDIT_MAX_BYTES`] | 4 MiB | a live host's audit file before it is rotated |
//! | [`LIVE_AUDIT_KEEP`] | 3 | rotated files kept beside it (`.1` newest) |
//! | [`LIVE_AUDIT_ENDED_HOSTS`] | 32 | ended live hosts whose audit files a starting host leaves (the newest), so a script of `tickbox run` hosts cannot fill the runtime directory |
//! | [`MAX_AUDIT_USES`] | 256 | distinct uses (`used` events) recorded per Tick session; past it one `unrecorded` event says the record is incomplete |
//! | [`MAX_AUDIT_READ_BYTES`] | 64 MiB | one audit file read back (`tickbox policy suggest`) |
//! | **metrics** ([`crate::metrics`]) | | |
//! | [`MAX_METRIC_TOOLS_PER_TICK`] | 64 | distinct `tool` label values one Tick's series carry (and as many `bound` values); calls of any other tool are counted under `tool="(other)"` |
//! | [`MAX_METRIC_LABEL_CHARS`] | 128 | characters of one label value a Tick chose (a tool name), before escaping; a longer one is cut and ends in `…` |
//! | **OpenTelemetry** ([`crate::otel`]) | | |
//! | [`OTEL_QUEUE_SPANS`] | 2048 | finished spans waiting for the exporter; past it a span is dropped and counted (`tickbox.telemetry.dropped`) |
//! | [`OTEL_BATCH_SPANS`] | 512 | spans in one export request |
//! | [`MAX_OTEL_TEXT_CHARS`] | 256 | characters of one string a Tick or client chose (a tool name, an error message), before escaping; a longer one is cut and ends in `…` |
//! | [`MAX_OTEL_SERIES`] | 256 | attribute sets one metric keeps; the rest fold into one series marked `otel.metric.overflow` |
//! | [`MAX_OTEL_OPEN_SESSIONS`] | 1024 | Tick sessions whose span waits for its end; later sessions' calls start traces of their own |
//! | [`MAX_OTEL_RESPONSE_BYTES`] | 64 KiB | a receiver's answer the exporter reads |
//! | [`OTEL_DEFAULT_TIMEOUT`] | 10 s | one export request, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise |
//! | [`OTEL_DEFAULT_SPAN_DELAY`] | 5 s | how long spans wait to be batched, unless `OTEL_BSP_SCHEDULE_DELAY` says otherwise |
//! | [`OTEL_DEFAULT_METRIC_INTERVAL`] | 60 s | how often metrics are exported, unless `OTEL_METRIC_EXPORT_INTERVAL` says otherwise |
//! | [`OTEL_WARN_INTERVAL`] | 60 s | at most one warning about failed exports per interval (the first at once) |
//! | [`OTEL_FLUSH_WAIT`] | 5 s | how long the end of a process waits for the last export |
//!
//! A unit test checks the table's values against the constants.

use std::time::Duration;

/// One audit event line, newline excluded. An event longer than this is
/// written with its strings shortened and `"cut": true`, never split.
pub const MAX_AUDIT_LINE_BYTES: usize = 16 * 1024;

/// The characters of one string an audit event carries; more is cut (the
/// event says `"cut": true`).
pub const MAX_AUDIT_TEXT_CHARS: usize = 1024;

/// Events queued for the audit writer. A queue that is full (a stalled
/// stderr, a slow disk) never makes a Tick or the host wait: the event is
/// counted and the count is written with the next event that fits.
pub const AUDIT_QUEUE_EVENTS: usize = 4096;

/// How long a process on its way out waits for its queued audit events to
/// be written.
pub const AUDIT_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// How long the audit writer, once woken by an event, gathers more before
/// writing them as one batch: a stream of calls costs one wake and one
/// write per batch instead of per line. It is the most a line waits
/// (closing the queue cuts it short).
pub const AUDIT_BATCH_WAIT: Duration = Duration::from_millis(25);

/// How long repeated refusals of one kind (a `denied` kind, a `limit`'s
/// bound) from one Tick session are held as a count before one line
/// says how many there were. The first of a kind is written at once; the
/// count of those after it goes out with the next one of the kind once
/// this has passed since the kind's last line, and at the session's end.
/// A Tick looping on a refused open so writes a few lines a minute, not
/// one per try.
pub const AUDIT_MERGE_WINDOW: Duration = Duration::from_secs(60);

/// The bytes of audit lines one Tick session may cause by itself (`used`,
/// `denied`, `limit`; not its `start`, `call`s, approvals or `end`, which
/// the host and the clients cause). Merging keeps a hostile Tick far below
/// it; it is the bound that holds whatever the Tick does. Past it those
/// events are dropped and counted by kind, and one `unrecorded` event at
/// the session's end says how many of each.
pub const MAX_AUDIT_SESSION_BYTES: u64 = 1024 * 1024;

/// The size an audit file (`--audit FILE`, a policy's or an MCP config's
/// `audit` key) may reach before it is rotated: `FILE` becomes `FILE.1`.
/// Four of them (this and [`AUDIT_FILE_KEEP`] older) stay within
/// [`MAX_AUDIT_READ_BYTES`] each, so `policy suggest` reads every one.
pub const AUDIT_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Rotated audit files kept beside an audit file (`FILE.1` is the newest).
pub const AUDIT_FILE_KEEP: usize = 3;

/// The size a live host's audit file may reach before it is rotated.
pub const LIVE_AUDIT_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// Rotated audit files a live host keeps (`FILE.1` is the newest).
pub const LIVE_AUDIT_KEEP: usize = 3;

/// Live hosts no longer running whose audit files a starting host leaves
/// in place (the most recently written); those of older ones it removes,
/// so that the directory holds at most this many ended hosts' files
/// besides the running hosts' own.
pub const LIVE_AUDIT_ENDED_HOSTS: usize = 32;

/// Distinct uses one Tick session records (`used` events: a grant read or
/// written, an address, a name, an origin). Each is recorded once; most
/// are bounded by the grants themselves, but a grant of every port
/// (`HOST:*`) or a name with many addresses is not, so the set that
/// remembers what was recorded is capped: past it, one `used` event of
/// kind `unrecorded` says the record is incomplete, and nothing else is
/// kept or written for that session's uses.
pub const MAX_AUDIT_USES: usize = 256;

/// The largest audit file read back (`tickbox policy suggest`): four times
/// a live host's rotated set, and far more than a one-shot command writes.
/// A file a Tick could grow (one in a directory it may write) cannot make
/// the reader hold more than this.
pub const MAX_AUDIT_READ_BYTES: u64 = 64 * 1024 * 1024;
/// The distinct tool names one Tick's metrics keep a series for (and,
/// separately, the distinct bounds). Tool names are the Tick's to choose
/// and a catalog may change as often as it likes, so without this a Tick
/// publishing thousands of names would grow the host's memory and every
/// scrape without end; past it, calls are counted under `tool="(other)"`.
pub const MAX_METRIC_TOOLS_PER_TICK: usize = 64;

/// The characters of one label value a Tick chose (a tool name), cut
/// before it is escaped: with [`MAX_METRIC_TOOLS_PER_TICK`] it bounds what
/// one Tick's series cost in memory and on the page.
pub const MAX_METRIC_LABEL_CHARS: usize = 128;

/// Finished spans waiting for the OTLP exporter's thread. A receiver that
/// is slow or down never makes a call wait: past this a span is dropped
/// and counted.
pub const OTEL_QUEUE_SPANS: usize = 2048;

/// Spans sent in one OTLP export request.
pub const OTEL_BATCH_SPANS: usize = 512;

/// The characters of one string a Tick or an MCP client chose that
/// telemetry carries (a tool name, an error message), cut before it is
/// escaped.
pub const MAX_OTEL_TEXT_CHARS: usize = 256;

/// Attribute sets (series) one OpenTelemetry metric keeps; past it,
/// observations are added to one series marked `otel.metric.overflow`.
pub const MAX_OTEL_SERIES: usize = 256;

/// Tick sessions whose span is kept open until their end; a host past it
/// still traces the calls, each in a trace of its own.
pub const MAX_OTEL_OPEN_SESSIONS: usize = 1024;

/// The most of an OTLP receiver's answer that is read.
pub const MAX_OTEL_RESPONSE_BYTES: usize = 64 * 1024;

/// One OTLP export request's time, by default.
pub const OTEL_DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long finished spans wait to be sent together, by default.
pub const OTEL_DEFAULT_SPAN_DELAY: Duration = Duration::from_secs(5);

/// How often metrics are exported, by default.
pub const OTEL_DEFAULT_METRIC_INTERVAL: Duration = Duration::from_secs(60);

/// At most one warning about failed OTLP exports per this interval.
pub const OTEL_WARN_INTERVAL: Duration = Duration::from_secs(60);

/// How long a process on its way out waits for its last OTLP export.
pub const OTEL_FLUSH_WAIT: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states each value; a constant that changes
    /// without its row fails here.
    #[test]
    fn the_table_states_every_value() {
        let checks: &[(&str, String)] = &[
            (
                "MAX_AUDIT_LINE_BYTES",
                format!("| {} KiB |", MAX_AUDIT_LINE_BYTES / 1024),
            ),
            (
                "MAX_AUDIT_TEXT_CHARS",
                format!("| {MAX_AUDIT_TEXT_CHARS} |"),
            ),
            ("AUDIT_QUEUE_EVENTS", format!("| {AUDIT_QUEUE_EVENTS} |")),
            (
                "AUDIT_FLUSH_WAIT",
                format!("| {} s |", AUDIT_FLUSH_WAIT.as_secs()),
            ),
            (
                "AUDIT_BATCH_WAIT",
                format!("| {} ms |", AUDIT_BATCH_WAIT.as_millis()),
            ),
            (
                "LIVE_AUDIT_MAX_BYTES",
                format!("| {} MiB |", LIVE_AUDIT_MAX_BYTES >> 20),
            ),
            ("LIVE_AUDIT_KEEP", format!("| {LIVE_AUDIT_KEEP} |")),
            (
                "LIVE_AUDIT_ENDED_HOSTS",
                format!("| {LIVE_AUDIT_ENDED_HOSTS} |"),
            ),
            (
                "AUDIT_MERGE_WINDOW",
                format!("| {} s |", AUDIT_MERGE_WINDOW.as_secs()),
            ),
            (
                "MAX_AUDIT_SESSION_BYTES",
                format!("| {} MiB |", MAX_AUDIT_SESSION_BYTES >> 20),
            ),
            (
                "AUDIT_FILE_MAX_BYTES",
                format!("| {} MiB |", AUDIT_FILE_MAX_BYTES >> 20),
            ),
            ("AUDIT_FILE_KEEP", format!("| {AUDIT_FILE_KEEP} |")),
            ("MAX_AUDIT_USES", format!("| {MAX_AUDIT_USES} |")),
            (
                "MAX_AUDIT_READ_BYTES",
                format!("| {} MiB |", MAX_AUDIT_READ_BYTES >> 20),
            ),
            (
                "MAX_METRIC_TOOLS_PER_TICK",
                format!("| {MAX_METRIC_TOOLS_PER_TICK} |"),
            ),
            (
                "MAX_METRIC_LABEL_CHARS",
                format!("| {MAX_METRIC_LABEL_CHARS} |"),
            ),
            ("OTEL_QUEUE_SPANS", format!("| {OTEL_QUEUE_SPANS} |")),
            ("OTEL_BATCH_SPANS", format!("| {OTEL_BATCH_SPANS} |")),
            ("MAX_OTEL_TEXT_CHARS", format!("| {MAX_OTEL_TEXT_CHARS} |")),
            ("MAX_OTEL_SERIES", format!("| {MAX_OTEL_SERIES} |")),
            (
                "MAX_OTEL_OPEN_SESSIONS",
                format!("| {MAX_OTEL_OPEN_SESSIONS} |"),
            ),
            (
                "MAX_OTEL_RESPONSE_BYTES",
                format!("| {} KiB |", MAX_OTEL_RESPONSE_BYTES / 1024),
            ),
            (
                "OTEL_DEFAULT_TIMEOUT",
                format!("| {} s |", OTEL_DEFAULT_TIMEOUT.as_secs()),
            ),
            (
                "OTEL_DEFAULT_SPAN_DELAY",
                format!("| {} s |", OTEL_DEFAULT_SPAN_DELAY.as_secs()),
            ),
            (
                "OTEL_DEFAULT_METRIC_INTERVAL",
                format!("| {} s |", OTEL_DEFAULT_METRIC_INTERVAL.as_secs()),
            ),
            (
                "OTEL_WARN_INTERVAL",
                format!("| {} s |", OTEL_WARN_INTERVAL.as_secs()),
            ),
            (
                "OTEL_FLUSH_WAIT",
                format!("| {} s |", OTEL_FLUSH_WAIT.as_secs()),
            ),
        ];
        tickbox_test_support::check_limits_table(include_str!("limits.rs"), checks);
    }
}
