//! Every bound of the door, in one table: what a connection may cost
//! before and after it has shown the token, and what a request body may
//! cost. These are the defaults of every server behind the door (MCP's,
//! `tickbox inspect`'s); a server with bounds of its own (`/metrics`)
//! gives its own [`crate::door::Bounds`] instead of
//! [`crate::door::DEFAULT_BOUNDS`], which these make.
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | **connections** ([`crate::door`]) | | |
//! | [`MAX_CONNECTIONS`] | 64 | authenticated connections at once; past it a new one gets 503 and is closed |
//! | [`MAX_CONNECTIONS_PER_PEER`] | 48 | authenticated connections from one peer address at once |
//! | [`MAX_UNAUTHENTICATED`] | 64 | connections that have not yet sent the token; past it a new one closes the oldest |
//! | [`AUTH_TIMEOUT`] | 5 s | how long a new connection has to send a request carrying the token |
//! | [`IDLE_TIMEOUT`] | 30 s | how long a connection may wait for, then read, its next request head |
//! | [`MAX_HEADER_BYTES`] | 64 KiB | one request head (hyper's read buffer) |
//! | **request bodies** ([`crate::body`]) | | |
//! | [`BODY_TIMEOUT`] | 30 s | how long a request body may take to arrive, from its head |
//! | [`MAX_BODY_DEPTH`] | 64 | how deep a JSON body's arrays and objects may nest |
//! | [`MAX_BODY_VALUES`] | 16384 | JSON values in one body |
//! | [`MAX_DRAIN_BYTES`] | 8 MiB | the most of a refused body read and dropped, so its refusal is not lost to a reset |
//!
//! A unit test checks the table's values against the constants.

use std::time::Duration;

/// Authenticated connections at once; an authenticated request on a new
/// connection past it gets 503 and the connection closes.
pub const MAX_CONNECTIONS: usize = 64;

/// Authenticated connections from one peer address at once (three
/// quarters of [`MAX_CONNECTIONS`]), so one peer cannot take every slot.
/// On loopback every local client is the same peer: the official MCP
/// conformance suite alone held 26 at once, so the bound leaves room for
/// that.
pub const MAX_CONNECTIONS_PER_PEER: usize = 48;

/// Connections that have not yet sent a request with the token. Slots are
/// counted after authentication, so these cost no slot; a new connection
/// past this bound closes the oldest unauthenticated one. An attacker then
/// has to open this many connections in the time a real client takes to
/// send one request head to keep it out.
pub const MAX_UNAUTHENTICATED: usize = 64;

/// How long a new connection has to send a request carrying the token; it
/// is closed otherwise.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an authenticated connection may wait for, and then read, its
/// next request head; hyper's header-read timeout, which also runs while
/// a keep-alive connection is idle, so it is the idle timeout too. Longer
/// than common clients' own keep-alive expiry (4–5 s), so a client never
/// reuses a connection the server is closing.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest request head, in bytes: hyper's read buffer, so also what
/// one connection's unread head can cost.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// How long a request body may take to arrive, from its head: a token
/// holder trickling a body holds one connection slot, not one forever.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How deep a request body's arrays and objects may nest.
pub const MAX_BODY_DEPTH: usize = 64;

/// How many JSON values a request body may hold, counted as its brackets,
/// braces, commas and colons outside strings. A parsed value costs tens of
/// bytes even when its text is 2 bytes, so this bounds what parsing a
/// body costs to a few times its size plus a few MiB.
pub const MAX_BODY_VALUES: usize = 16_384;

/// The most of a refused body that is read and dropped: closing a socket
/// with unread data resets it, and the client could lose the answer that
/// says why. As large as the largest body any server takes (an MCP
/// frame), so a refusal for depth or values still reaches its client.
pub const MAX_DRAIN_BYTES: usize = 8 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states each value; a constant that changes
    /// without its row fails here.
    #[test]
    fn the_table_states_every_value() {
        let checks: &[(&str, String)] = &[
            ("MAX_CONNECTIONS", format!("| {MAX_CONNECTIONS} |")),
            (
                "MAX_CONNECTIONS_PER_PEER",
                format!("| {MAX_CONNECTIONS_PER_PEER} |"),
            ),
            ("MAX_UNAUTHENTICATED", format!("| {MAX_UNAUTHENTICATED} |")),
            ("AUTH_TIMEOUT", format!("| {} s |", AUTH_TIMEOUT.as_secs())),
            ("IDLE_TIMEOUT", format!("| {} s |", IDLE_TIMEOUT.as_secs())),
            (
                "MAX_HEADER_BYTES",
                format!("| {} KiB |", MAX_HEADER_BYTES / 1024),
            ),
            ("BODY_TIMEOUT", format!("| {} s |", BODY_TIMEOUT.as_secs())),
            ("MAX_BODY_DEPTH", format!("| {MAX_BODY_DEPTH} |")),
            ("MAX_BODY_VALUES", format!("| {MAX_BODY_VALUES} |")),
            (
                "MAX_DRAIN_BYTES",
                format!("| {} MiB |", MAX_DRAIN_BYTES >> 20),
            ),
        ];
        tickbox_test_support::check_limits_table(include_str!("limits.rs"), checks);
    }
}
