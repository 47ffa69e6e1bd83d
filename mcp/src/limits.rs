//! Bounds of `tickbox-mcp` on the Tick instances it starts for clients
//! (`instances = "per-client"` in a ticks file, [`crate::instance`]). A
//! ticks file may lower each (the key in the row), never raise it. The
//! HTTP server's own bounds (connections, sessions, bodies) are beside it
//! in `http.rs`.
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **per-client instances** (`instance`) | | |
//! | [`MAX_INSTANCES_PER_TICK`] | 32 | instances of one per-client Tick at once (`max_instances` in its `[[tick]]`); the next client's first use of it is refused with an error naming the bound |
//! | [`MAX_INSTANCES`] | 128 | per-client instances of every Tick of the host at once (`max_instances` at the top of the ticks file); the shared instances and each per-client Tick's template are not counted |
//! | [`INSTANCE_IDLE_TIMEOUT`] | 300 s | how long a per-client instance, or a shared one started on first use, may go without a request before it is stopped (`idle_timeout`); the next use starts a new one, from the Tick's initial state |
//! | **files** (`config`) | | |
//! | [`MAX_CONFIG_BYTES`] | 1024 KiB | a ticks file or a clients file read; a larger one is refused naming the bound |
//! | **the catalog cache** (`catalogs`) | | |
//! | [`MAX_CACHED_CATALOG_BYTES`] | 512 KiB | a cached catalog (`start = "on-first-use"`): as large as a tick/describe result may be; a larger entry is ignored and the Tick starts with the host |
//!
//! A unit test checks the table's values against the constants.

use std::time::Duration;

/// Instances of one per-client Tick at once. As many as the HTTP server
/// has sessions (`http::MAX_SESSIONS`), so by default every session can
/// have one of each Tick.
pub const MAX_INSTANCES_PER_TICK: usize = 32;

/// Per-client instances of all Ticks at once: what bounds the memory and
/// processes a host spends on its clients whatever the number of
/// per-client Ticks in its file.
pub const MAX_INSTANCES: usize = 128;

/// A per-client instance with no request for this long is stopped. As
/// long as an HTTP session may stay idle (`http::SESSION_IDLE_TIMEOUT`),
/// so an instance outlives no session by default; named clients
/// (2026-07-28) have no session, and this is what ends their instances.
pub const INSTANCE_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A cached catalog's payload: the largest tick/describe result the
/// protocol lets a Tick send (its re-encoded size), so every catalog that
/// was accepted fits and nothing larger is read.
pub const MAX_CACHED_CATALOG_BYTES: u64 = tickbox_protocol::limits::MAX_DESCRIPTOR_BYTES as u64;

/// The largest ticks file or clients file read: far more than thousands
/// of entries take, and a file such as `/dev/zero` is refused, not read
/// until memory runs out.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states each value; a constant that changes
    /// without its row fails here.
    #[test]
    fn the_table_states_every_value() {
        use tickbox_host::util::{limits_row, limits_rows};
        let doc = include_str!("limits.rs");
        let checks = [
            (
                "MAX_INSTANCES_PER_TICK",
                format!("| {MAX_INSTANCES_PER_TICK} |"),
            ),
            ("MAX_INSTANCES", format!("| {MAX_INSTANCES} |")),
            (
                "INSTANCE_IDLE_TIMEOUT",
                format!("| {} s |", INSTANCE_IDLE_TIMEOUT.as_secs()),
            ),
            (
                "MAX_CONFIG_BYTES",
                format!("| {} KiB |", MAX_CONFIG_BYTES / 1024),
            ),
            (
                "MAX_CACHED_CATALOG_BYTES",
                format!("| {} KiB |", MAX_CACHED_CATALOG_BYTES / 1024),
            ),
        ];
        for (name, want) in &checks {
            let row = limits_row(doc, name);
            assert!(
                row.is_some_and(|r| r.contains(want.as_str())),
                "{name}: want {want} in {row:?}"
            );
        }
        assert_eq!(limits_rows(doc).len(), checks.len(), "every row is checked");
        const { assert!(MAX_INSTANCES_PER_TICK <= MAX_INSTANCES) };
    }
}
