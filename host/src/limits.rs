//! Every bound of the host crate's own making, in one table (the protocol's
//! numbers are `tickbox_protocol::limits`, the sandbox's its own
//! `limits`): the audit stream's ([`crate::audit`]) and the metrics'
//! ([`crate::metrics`]).
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **audit stream** ([`crate::audit`]) | | |
//! | [`MAX_AUDIT_LINE_BYTES`] | 16 KiB | one event line, newline excluded; a longer event is cut (`"cut": true`) |
//! | [`MAX_AUDIT_TEXT_CHARS`] | 1024 | one string an event carries (a path, a message, a name) |
//! | [`AUDIT_QUEUE_EVENTS`] | 4096 | events waiting for the writer; past it they are counted as `lost` |
//! | [`AUDIT_FLUSH_WAIT`] | 2 s | how long the end of a process waits for queued events to be written |
//! | [`LIVE_AUDIT_MAX_BYTES`] | 4 MiB | a live host's audit file before it is rotated |
//! | [`LIVE_AUDIT_KEEP`] | 3 | rotated files kept beside it (`.1` newest) |
//! | **metrics** ([`crate::metrics`]) | | |
//! | [`MAX_METRIC_TOOLS_PER_TICK`] | 64 | distinct `tool` label values one Tick's series carry (and as many `bound` values); calls of any other tool are counted under `tool="(other)"` |
//! | [`MAX_METRIC_LABEL_CHARS`] | 128 | characters of one label value a Tick chose (a tool name), before escaping; a longer one is cut and ends in `…` |
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

/// The size a live host's audit file may reach before it is rotated.
pub const LIVE_AUDIT_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// Rotated audit files a live host keeps (`FILE.1` is the newest).
pub const LIVE_AUDIT_KEEP: usize = 3;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states each value; a constant that changes
    /// without its row fails here.
    #[test]
    fn the_table_states_every_value() {
        let doc = include_str!("limits.rs");
        let rows = crate::util::limits_rows(doc);
        let row = |name: &str| {
            crate::util::limits_row(doc, name).unwrap_or_else(|| panic!("{name} has no row"))
        };
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
                "LIVE_AUDIT_MAX_BYTES",
                format!("| {} MiB |", LIVE_AUDIT_MAX_BYTES >> 20),
            ),
            ("LIVE_AUDIT_KEEP", format!("| {LIVE_AUDIT_KEEP} |")),
            (
                "MAX_METRIC_TOOLS_PER_TICK",
                format!("| {MAX_METRIC_TOOLS_PER_TICK} |"),
            ),
            (
                "MAX_METRIC_LABEL_CHARS",
                format!("| {MAX_METRIC_LABEL_CHARS} |"),
            ),
        ];
        for (name, value) in checks {
            assert!(
                row(name).contains(value.as_str()),
                "{name}'s row should say {value}: {}",
                row(name)
            );
        }
        assert_eq!(rows.len(), checks.len(), "a row without a check");
    }
}
