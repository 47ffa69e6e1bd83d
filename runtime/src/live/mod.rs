//! Live instances: Ticks running in one tickbox process, reachable from others.
//!
//! Every tickbox process that hosts Ticks (`tickbox run`, `tickbox mcp`)
//! publishes each of them with [`publish`]: a Unix socket in the per-user
//! [`Registry`] directory, served until the returned [`Published`] handle is
//! dropped. Other processes of the same user find instances there
//! ([`client::list`], [`client::connect`]) and use them: `tickbox ls`,
//! `tickbox attach`, `tickbox describe|read|call|screen @NAME`,
//! `tickbox watch @NAME`.
//!
//! - `registry` — the directory (`$XDG_RUNTIME_DIR/tickbox/`, or
//!   `$TMPDIR/tickbox-<uid>/`), its permission checks, and the peer check;
//! - [`wire`] — the socket protocol: frames, requests and replies;
//! - `server` — [`publish`]: accepting connections and serving one session;
//! - `viewer` — serving one view: frames rendered from the screen model,
//!   keys, resizes, and the smallest-view size policy;
//! - [`client`] — listing, resolving `ID|NAME`, one-shot requests and streams;
//! - [`observe`] — [`Observer`]: keys, resizes, calls and marks as they
//!   reach an instance (what `tickbox run --record` records);
//! - [`ended`] — records of ended instances (`ls -a`, `logs`): exit status
//!   and last words, kept for an hour.
//!
//! # Security
//!
//! Only the user who runs the host may reach its instances. The directory is
//! created 0700 and must be owned by that user (a directory someone else made
//! is refused, never used), each socket is 0600, and the server checks every
//! connection's peer credentials (`SO_PEERCRED`) against its own uid before
//! reading a byte of the request (`registry::authorize`).
//!
//! # Views and the protocol session
//!
//! **Invariant:** a view (an `attach` connection) only ever touches the
//! Tick's [`crate::view::View`]: keys, resizes, output. Attaching,
//! detaching or a view crashing never sends anything to the Tick's stdin and
//! never ends the session (§1.2). Only the explicit `stop` request ends it.
//!
//! ```no_run
//! # async fn demo(session: tickbox_runtime::session::Session) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use tickbox_runtime::live::{publish, PublishOptions};
//! let session = Arc::new(session);
//! let published = publish(session.clone(), PublishOptions::new("native")).await?;
//! eprintln!("published as {} ({})", published.name(), published.id());
//! session.ended().await; // serve until the Tick ends; dropping unpublishes
//! # Ok(()) }
//! ```

pub(crate) mod claim;
pub mod client;
pub mod ended;
pub mod observe;
pub(crate) mod registry;
pub(crate) mod server;
pub(crate) mod viewer;
pub mod wire;

pub use observe::Observer;
pub use registry::Registry;
pub use server::{publish, PublishOptions, Published};

use serde::{Deserialize, Serialize};

/// What `tickbox ls` shows about one live instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceInfo {
    /// Short unique id (hex).
    pub id: String,
    /// Unique name among the live instances, e.g. `counter`.
    pub name: String,
    /// The Tick's self-declared kind (§5.4).
    pub kind: String,
    /// The Tick's title.
    pub title: String,
    /// How it runs: `native` or `wasm`.
    pub backend: String,
    /// The hosting process.
    pub pid: u32,
    /// When it was published (RFC 3339, UTC).
    pub started: String,
    /// Views attached right now.
    pub views: usize,
    /// The seq of the latest state.
    pub seq: Option<u64>,
}

/// Why a live-instance operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// The registry directory could not be created or inspected.
    #[error("cannot use the live-instance directory {path}: {source}")]
    Dir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The registry directory is not safe to use.
    #[error("refusing the live-instance directory {path}: {why}")]
    UnsafeDir {
        path: std::path::PathBuf,
        why: String,
    },
    /// The instance's socket could not be created.
    #[error("cannot create the socket {path}: {source}")]
    Bind {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The name asked for cannot be used.
    #[error("invalid instance name `{0}`: use letters, digits, `.`, `_` and `-`")]
    BadName(String),
    /// Another live instance already has this name.
    #[error("the name `{0}` is taken by another live instance (see `tickbox ls`); choose another with --name")]
    NameTaken(String),
    /// No live instance has this id or name.
    #[error("no live instance named `{target}`{}", available_suffix(.available))]
    NotFound {
        target: String,
        available: Vec<String>,
    },
    /// Connecting to an instance failed.
    #[error("cannot reach the live instance `{target}`: {source}")]
    Connect {
        target: String,
        source: std::io::Error,
    },
    /// The peer is another user (server side), or the server refused us.
    #[error("refused: {0}")]
    Refused(String),
    /// The host answered with an error.
    #[error("{message}")]
    Remote {
        /// What kind of failure, for the exit code.
        kind: wire::ErrorKind,
        /// The host's message.
        message: String,
    },
    /// The socket protocol was broken (or the connection dropped mid-message).
    #[error("live-instance socket: {0}")]
    Wire(String),
}

fn available_suffix(names: &[String]) -> String {
    if names.is_empty() {
        "; no Ticks are live (start one with `tickbox run`)".into()
    } else {
        format!("; live: {}", names.join(", "))
    }
}

/// Formats a Unix time as RFC 3339 UTC with seconds.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_are_rfc3339() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_910_400 + 3_723);
        let s = rfc3339(t);
        assert_eq!(s, "2026-11-29T01:02:03Z");
        assert!(crate::protocol::state::is_rfc3339(&s));
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    }
}
