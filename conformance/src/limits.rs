//! Bounds of `tickbox-conformance` that are not part of a scenario file's
//! grammar: what a trace of a scenario run (`RunOptions::trace`) may
//! hold. (The bounds of the file format itself are beside its parser in
//! `scenario/model.rs`; the runner's waits in `scenario/run.rs`.)
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **traces** (`RunOptions::trace`, `trace::parse`) | | |
//! | [`MAX_TRACE_BYTES`] | 4 MiB | one trace file, written and read (`show-trace` refuses a larger one) |
//! | [`TRACE_RESERVE_BYTES`] | 64 KiB | kept back for the header, the last step's outcome and the note that the trace was cut |
//! | [`MAX_TRACE_FRAME_CHARS`] | 4096 | one protocol frame as recorded (the rest is counted, not kept) |
//! | [`MAX_TRACE_SCREEN_CHARS`] | 16,384 | one step's screen text |
//! | [`MAX_TRACE_STATE_CHARS`] | 16,384 | one step's state, as JSON text |
//! | [`MAX_TRACE_FOUND_CHARS`] | 16,384 | one step's outcome: what it expected and what was there |
//! | [`TRACE_STEP_PACE`] | 500 ms | added to virtual time per step, so a player shows each step |
//!
//! A unit test checks the table's values against the constants.

use std::time::Duration;

/// Largest trace file: past it the trace keeps only its header, the last
/// step's outcome and a note that it was cut (and the report says so), so
/// a chatty Tick cannot make traces unbounded. `show-trace` reads no more.
pub const MAX_TRACE_BYTES: usize = 4 << 20;
/// Part of [`MAX_TRACE_BYTES`] that frames, screens and steps never take:
/// the header, the last step's record and the cut note always fit in it
/// (each is bounded by the constants below).
pub const TRACE_RESERVE_BYTES: usize = 64 << 10;
/// Characters of one protocol frame kept in a trace; a longer frame is
/// clipped there and says how many bytes it had.
pub const MAX_TRACE_FRAME_CHARS: usize = 4096;
/// Characters of one step's screen text kept in a trace.
pub const MAX_TRACE_SCREEN_CHARS: usize = 16 * 1024;
/// Characters of one step's state (JSON text) kept in a trace.
pub const MAX_TRACE_STATE_CHARS: usize = 16 * 1024;
/// Characters of one step's outcome (expected and found) kept in a trace.
pub const MAX_TRACE_FOUND_CHARS: usize = 16 * 1024;
/// How far apart consecutive steps are in a trace's timeline beyond the
/// virtual time between them: keys and calls take no virtual time, and a
/// player would otherwise show every step at the same instant.
pub const TRACE_STEP_PACE: Duration = Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states each value; a constant that changes
    /// without its row fails here.
    #[test]
    fn the_table_states_every_value() {
        let doc = include_str!("limits.rs");
        let rows = tickbox_host::util::limits_rows(doc);
        let row = |name: &str| {
            tickbox_host::util::limits_row(doc, name).unwrap_or_else(|| panic!("{name} has no row"))
        };
        let thousands = |n: usize| {
            let s = n.to_string();
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i).is_multiple_of(3) && s.len() > 4 {
                    out.push(',');
                }
                out.push(c);
            }
            out
        };
        let checks: &[(&str, String)] = &[
            (
                "MAX_TRACE_BYTES",
                format!("| {} MiB |", MAX_TRACE_BYTES >> 20),
            ),
            (
                "TRACE_RESERVE_BYTES",
                format!("| {} KiB |", TRACE_RESERVE_BYTES >> 10),
            ),
            (
                "MAX_TRACE_FRAME_CHARS",
                format!("| {} |", thousands(MAX_TRACE_FRAME_CHARS)),
            ),
            (
                "MAX_TRACE_SCREEN_CHARS",
                format!("| {} |", thousands(MAX_TRACE_SCREEN_CHARS)),
            ),
            (
                "MAX_TRACE_STATE_CHARS",
                format!("| {} |", thousands(MAX_TRACE_STATE_CHARS)),
            ),
            (
                "MAX_TRACE_FOUND_CHARS",
                format!("| {} |", thousands(MAX_TRACE_FOUND_CHARS)),
            ),
            (
                "TRACE_STEP_PACE",
                format!("| {} ms |", TRACE_STEP_PACE.as_millis()),
            ),
        ];
        for (name, want) in checks {
            assert!(row(name).contains(want.as_str()), "{name}: want {want}");
        }
        assert_eq!(rows.len(), checks.len(), "every row is checked");
        // The reserve holds the bounded records it is kept for.
        const { assert!(TRACE_RESERVE_BYTES < MAX_TRACE_BYTES / 8) };
    }
}
