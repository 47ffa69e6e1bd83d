//! Every bound of the registry client and the store, in one table. A
//! registry is untrusted: whatever it sends is read within these.
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | [`MAX_MANIFEST_BYTES`] | 4 MiB | a manifest or referrers index read (the distribution registry's own push limit) |
//! | [`MAX_TICK_MANIFEST_BYTES`] | 64 KiB | the requested-grants layer (`NAME.tick.toml`) |
//! | [`MAX_SIGNATURE_BYTES`] | 64 KiB | a signature layer |
//! | [`MAX_SIGNATURES`] | 16 | signatures of one manifest looked at |
//! | [`MAX_TOKEN_BYTES`] | 64 KiB | a bearer-token answer |
//! | [`MAX_ERROR_BYTES`] | 16 KiB | an error answer's body, read for its message |
//! | [`MAX_CREDENTIALS_BYTES`] | 1 MiB | the Docker config file read |
//! | [`MAX_CA_BYTES`] | 1 MiB | the CA file read (`RegistryConfig::ca_file`) |
//! | [`MAX_REDIRECTS`] | 3 | redirects followed for one blob |
//! | [`CONNECT_TIMEOUT`] | 10 s | TCP connect and TLS handshake |
//! | [`RESPONSE_TIMEOUT`] | 30 s | from a request sent to its answer's head |
//! | [`STALL_TIMEOUT`] | 30 s | between two pieces of a body |
//! | [`TOKEN_DEADLINE`] | 60 s | a bearer-token request, from its first connect to the last byte of its answer |
//! | [`MANIFEST_DEADLINE`] | 60 s | a manifest, index or referrers request (GET or PUT), the same way, its 401 and token included |
//! | [`BLOB_DEADLINE`] | 600 s | a blob request, the same way: a GET with its redirects, or an upload's HEAD, POST and PUT |
//! | [`MAX_POLICY_BYTES`] | 1 MiB | the signers policy file read |
//! | [`MAX_LOCK_BYTES`] | 1 MiB | the lock file read |
//! | [`MAX_STORE_BYTES`] | 4096 MiB | the store of pulled blobs, least recently used evicted past it |
//!
//! The size of a wasm layer is bounded by the Tick's own `max_wasm_size`
//! (declared size and streamed bytes both). The per-wait timeouts bound
//! each wait; the deadlines bound a whole request, so a registry that
//! sends a byte just inside every per-wait bound still fails, with one
//! line naming the deadline (a caller may set shorter ones through
//! [`crate::RegistryConfig::deadlines`]). A unit test checks the table
//! against the constants.

use std::time::Duration;

/// Largest manifest (or referrers index) read.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Largest requested-grants layer read.
pub const MAX_TICK_MANIFEST_BYTES: u64 = 64 << 10;
/// Largest signature layer read.
pub const MAX_SIGNATURE_BYTES: u64 = 64 << 10;
/// Signatures of one manifest looked at, at most.
pub const MAX_SIGNATURES: usize = 16;
/// Largest bearer-token answer read.
pub const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// Largest error body read for its message.
pub const MAX_ERROR_BYTES: u64 = 16 << 10;
/// Largest Docker config file read.
pub const MAX_CREDENTIALS_BYTES: u64 = 1 << 20;
/// Largest CA file read.
pub const MAX_CA_BYTES: u64 = 1 << 20;
/// Redirects followed for one blob.
pub const MAX_REDIRECTS: usize = 3;
/// TCP connect and TLS handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// From a request sent to its answer's head.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Between two pieces of a body.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A whole bearer-token request.
pub const TOKEN_DEADLINE: Duration = Duration::from_secs(60);
/// A whole manifest (index, referrers) request.
pub const MANIFEST_DEADLINE: Duration = Duration::from_secs(60);
/// A whole blob request (a wasm layer of `max_wasm_size` must arrive in
/// it: 64 MiB in 10 minutes is about 110 KB/s).
pub const BLOB_DEADLINE: Duration = Duration::from_secs(600);
/// Largest signers policy file read.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;
/// Largest lock file read.
pub const MAX_LOCK_BYTES: u64 = 1 << 20;
/// The store's blobs in all: past it the least recently used (read or
/// written) are removed after a blob is written, never that blob, so a
/// registry moving a tag on every pull cannot fill the disk. An evicted
/// blob is pulled again when next needed.
pub const MAX_STORE_BYTES: u64 = 4 << 30;

#[cfg(test)]
mod tests {
    /// Each row of the module's table names the constant's value.
    #[test]
    fn the_table_matches_the_constants() {
        use super::*;
        let doc = include_str!("limits.rs");
        let row = |name: &str| {
            doc.lines()
                .find(|l| l.starts_with("//! | [`") && l.contains(&format!("[`{name}`]")))
                .unwrap_or_else(|| panic!("no row for {name}"))
                .to_string()
        };
        let size = |n: u64| {
            if n.is_multiple_of(1 << 20) {
                format!("{} MiB", n >> 20)
            } else {
                format!("{} KiB", n >> 10)
            }
        };
        for (name, value) in [
            ("MAX_MANIFEST_BYTES", size(MAX_MANIFEST_BYTES)),
            ("MAX_TICK_MANIFEST_BYTES", size(MAX_TICK_MANIFEST_BYTES)),
            ("MAX_SIGNATURE_BYTES", size(MAX_SIGNATURE_BYTES)),
            ("MAX_SIGNATURES", MAX_SIGNATURES.to_string()),
            ("MAX_TOKEN_BYTES", size(MAX_TOKEN_BYTES)),
            ("MAX_ERROR_BYTES", size(MAX_ERROR_BYTES)),
            ("MAX_CREDENTIALS_BYTES", size(MAX_CREDENTIALS_BYTES)),
            ("MAX_CA_BYTES", size(MAX_CA_BYTES)),
            ("MAX_REDIRECTS", MAX_REDIRECTS.to_string()),
            (
                "CONNECT_TIMEOUT",
                format!("{} s", CONNECT_TIMEOUT.as_secs()),
            ),
            (
                "RESPONSE_TIMEOUT",
                format!("{} s", RESPONSE_TIMEOUT.as_secs()),
            ),
            ("STALL_TIMEOUT", format!("{} s", STALL_TIMEOUT.as_secs())),
            ("TOKEN_DEADLINE", format!("{} s", TOKEN_DEADLINE.as_secs())),
            (
                "MANIFEST_DEADLINE",
                format!("{} s", MANIFEST_DEADLINE.as_secs()),
            ),
            ("BLOB_DEADLINE", format!("{} s", BLOB_DEADLINE.as_secs())),
            ("MAX_POLICY_BYTES", size(MAX_POLICY_BYTES)),
            ("MAX_LOCK_BYTES", size(MAX_LOCK_BYTES)),
            ("MAX_STORE_BYTES", size(MAX_STORE_BYTES)),
        ] {
            let r = row(name);
            assert!(
                r.contains(&format!("| {value} |")),
                "{name}: {r} lacks {value}"
            );
        }
    }
}
