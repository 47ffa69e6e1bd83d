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
//! - `claim` — names: unique among the user's live instances across
//!   processes, each a link to its host's one lock file, claimed without
//!   asking other instances;
//! - `server` — [`publish`]: accepting connections and serving one session;
//! - `viewer` — serving one view: frames rendered from the screen model,
//!   keys, resizes, and the smallest-view size policy;
//! - [`client`] — listing, resolving `ID|NAME`, one-shot requests and streams;
//! - [`observe`] — [`Observer`]: keys, resizes, calls and marks as they
//!   reach an instance (what recording a session as a scenario records);
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
//! # async fn demo(session: tickbox_host::session::Session) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use tickbox_host::live::{publish, PublishOptions};
//! let session = Arc::new(session);
//! let published = publish(session.clone(), PublishOptions::new("native")).await?;
//! eprintln!("published as {} ({})", published.name(), published.id());
//! session.ended().await; // serve until the Tick ends; dropping unpublishes
//! # Ok(()) }
//! ```

pub(crate) mod claim;
pub mod client;
pub mod ended;
mod instance;
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
    #[error(
        "the name `{0}` is taken by another live instance (see `tickbox ls`); choose another name"
    )]
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
