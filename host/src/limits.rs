//! Every bound of the host crate's own making, in one table (the protocol's
//! numbers are `tickbox_protocol::limits`, the sandbox's its own
//! `limits`, the audit stream's, metrics' and OpenTelemetry's
//! `tickbox_telemetry::limits`).
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **stopping a Tick** (either kind) | | |
//! | [`EXIT_GRACE`] | 500 ms | a Tick's time to exit by itself after its stdin closed (a native one's process, a wasm guest's `run`) |
//! | [`TERM_GRACE`] | 500 ms | a native Tick's time after SIGTERM before SIGKILL |
//! | [`LAST_DRAW_WAIT`] | 2 s | once a Tick has ended, the longest wait for what it drew on its way out to reach its screen (its last words); only a process it left holding its PTY makes the wait this long |
//! | **a Tick's view** ([`crate::view`]) | | |
//! | [`VIEW_PARSER_LINGER`] | 500 ms | how long a view's parser thread waits for more of what the Tick draws before it ends (the next draw starts another), so an idle Tick holds no thread |
//! | **what a Tick sends that the host ignores** | | |
//! | [`IGNORED_REQUEST_LOG_INTERVAL`] | 10 s | how often at most a session logs the requests its Tick sends (the first at once, the rest counted into one line per interval and one at the end) |
//! | **the live-instance directory** | | |
//! | [`LIVE_SCRATCH_STALE`] | 60 s | age past which a socket or record being written (`<id>.sock.new`, `<id>.ended.tmp`) counts as left by a host that died, and `tickbox ls` removes it |
//! | **a person's keys** | | |
//! | [`KEY_QUEUE`] | 256 | key chunks queued for a Tick that does not read its terminal (either kind) |
//!
//! A unit test checks the table's values against the constants.

use std::time::Duration;

/// How long a Tick whose stdin was closed may take to exit by itself
/// before it is stopped, by default: one grace for both kinds, since a
/// Tick's author cannot tell which kind a host runs it as.
pub const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How long after SIGTERM before SIGKILL, for a native Tick's process
/// group, by default.
pub const TERM_GRACE: Duration = Duration::from_millis(500);

/// Once a Tick has ended, how long at most the host waits for the end of
/// its terminal's output (a PTY's reader reaching its end), so what it drew
/// on its way out is on the screen before its last words are taken.
pub const LAST_DRAW_WAIT: Duration = Duration::from_secs(2);

/// How long a view's parser thread waits for more drawn bytes before it
/// ends: long enough that a Tick drawing frames keeps its thread (a frame
/// every 100 ms and faster never waits for a new one), short enough that
/// thousands of idle Ticks in one host hold no thread each.
pub const VIEW_PARSER_LINGER: Duration = Duration::from_millis(500);

/// How often at most a session logs the requests its Tick sends, which
/// the host never answers (§3.2): the first is logged at once, the rest
/// counted and named in one line per interval and one when the session
/// ends, so a Tick cannot write log lines at the rate it sends requests.
pub const IGNORED_REQUEST_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// How old a socket or record being written in the live-instance
/// directory (`<id>.sock.new`, `<id>.ended.tmp`) must be before a sweep
/// takes it for what a host that died left: a live host renames each into
/// place within milliseconds.
pub const LIVE_SCRATCH_STALE: Duration = Duration::from_secs(60);

/// Key chunks queued for a Tick that does not read its terminal; past it a
/// view's keys are dropped, never buffered without bound.
pub const KEY_QUEUE: usize = 256;

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
            ("EXIT_GRACE", format!("| {} ms |", EXIT_GRACE.as_millis())),
            ("TERM_GRACE", format!("| {} ms |", TERM_GRACE.as_millis())),
            (
                "LAST_DRAW_WAIT",
                format!("| {} s |", LAST_DRAW_WAIT.as_secs()),
            ),
            (
                "VIEW_PARSER_LINGER",
                format!("| {} ms |", VIEW_PARSER_LINGER.as_millis()),
            ),
            ("KEY_QUEUE", format!("| {KEY_QUEUE} |")),
            (
                "LIVE_SCRATCH_STALE",
                format!("| {} s |", LIVE_SCRATCH_STALE.as_secs()),
            ),
            (
                "IGNORED_REQUEST_LOG_INTERVAL",
                format!("| {} s |", IGNORED_REQUEST_LOG_INTERVAL.as_secs()),
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
