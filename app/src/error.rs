//! What can stop a request on its way to a running Tick. One variant per
//! rule, so the caller chooses its own words (the CLI names its flags) and
//! its own exit code; the messages here name settings by their keys.

use std::path::PathBuf;
use tickbox_protocol::TickText;
use tickbox_registry::RegistryError;
use tickbox_sandbox::grants::GrantError;

/// A request that did not become a running Tick.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A grant, bound or grant file that cannot be used as written.
    #[error("{0}")]
    Grant(#[from] GrantError),
    /// A working directory asked for a sandboxed Tick, whose files are its grants.
    #[error("cwd applies to native Ticks; grant a wasm Tick a directory with dir")]
    CwdOnWasm,
    /// A sandbox grant asked for a native Tick, which runs with the user's
    /// own permissions: the grant would promise a confinement that does not exist.
    #[error("dir, allow_net, allow_http, http_ca, the bounds and a grant policy apply to wasm Ticks only; a native Tick runs with your own permissions")]
    NativeGrants,
    /// A request the caller got wrong: a malformed reference, manifest,
    /// signers policy or lock file, a Tick that is not there to start.
    #[error("{0}")]
    Usage(String),
    /// The registry or the store failed, or refused what it was sent.
    #[error("{0}")]
    Registry(RegistryError),
    /// The signers policy refused the Tick (the message names the rule).
    #[error("{0}")]
    Refused(String),
    /// `locked`: a reference the lock file does not hold.
    #[error("locked: {reference} is not in the lock file {lock}")]
    NotLocked {
        reference: String,
        lock: String,
        path: PathBuf,
    },
    /// `locked`: what the lock recorded is not what is there now.
    #[error("locked: {0}")]
    Drift(String),
    /// No directory for pulled Ticks.
    #[error("no Tick store: set the store directory or HOME")]
    NoStore,
    /// No directory for approvals.
    #[error("no trust store: set the trust directory or HOME")]
    NoTrustStore,
    /// The manifest's requests were not approved (nobody could answer, or
    /// the person said no): nothing was started or stored.
    #[error("{0}")]
    NotApproved(String),
    /// Asking for an approval failed.
    #[error("cannot ask for an approval: {0}")]
    Prompt(String),
    /// The person interrupted the approval prompt.
    #[error("interrupted at the approval prompt; nothing was started or stored")]
    Interrupted,
    /// An audit destination cannot be opened.
    #[error("audit {to}: cannot open it: {why}")]
    AuditOpen { to: String, why: String },
    /// Only a file can be synced (`audit_sync` without an audit file).
    #[error("audit_sync: only an audit file can be synced")]
    AuditSyncWithoutFile,
    /// The Tick could not start or failed initialization.
    #[error("{message}")]
    Start {
        message: String,
        /// The last lines of its screen, when it drew any.
        last_words: Vec<TickText>,
    },
    /// Anything else that failed while starting (an engine, a file read).
    #[error("{0}")]
    Session(String),
}

impl AppError {
    /// Whether the request itself is at fault (the caller's usage error),
    /// rather than the registry, the store or the Tick.
    pub fn is_usage(&self) -> bool {
        match self {
            AppError::Grant(_)
            | AppError::CwdOnWasm
            | AppError::NativeGrants
            | AppError::Usage(_)
            | AppError::NotLocked { .. }
            | AppError::NoStore
            | AppError::NoTrustStore
            | AppError::NotApproved(_)
            | AppError::Prompt(_)
            | AppError::AuditOpen { .. }
            | AppError::AuditSyncWithoutFile => true,
            AppError::Registry(RegistryError::Reference(_)) => true,
            AppError::Registry(_)
            | AppError::Refused(_)
            | AppError::Drift(_)
            | AppError::Interrupted
            | AppError::Start { .. }
            | AppError::Session(_) => false,
        }
    }

    pub(crate) fn usage(e: impl std::fmt::Display) -> Self {
        AppError::Usage(e.to_string())
    }

    pub(crate) fn session(e: impl std::fmt::Display) -> Self {
        AppError::Session(e.to_string())
    }
}
