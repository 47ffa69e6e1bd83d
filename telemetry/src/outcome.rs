//! How a session and a call end: the outcomes the session produces and the
//! audit, metrics and OpenTelemetry record.
//!
//! Here, below the host, because they are what the audit records: the
//! host's session returns them (and `tickbox_host::session` re-exports
//! them as part of its API), and every recorder reads them without
//! knowing the session.

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tickbox_protocol::rules::Rule;
use tickbox_protocol::{RpcError, Violation};

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EndReason {
    /// The Tick broke a session-ending rule.
    #[error(transparent)]
    Violation(#[from] Violation),
    /// The Tick's output ended: it exited, crashed or was stopped by its sandbox.
    #[error("the Tick ended: {0}")]
    Exited(String),
    /// Reading the Tick's output failed.
    #[error("reading the Tick's output failed: {0}")]
    Io(String),
    /// The Tick did not take a request from its stdin in time: it stopped
    /// reading, so nothing more can be sent to it.
    #[error("the Tick stopped reading its stdin: a request could not be written within {}s", .0.as_secs_f32())]
    StdinStalled(Duration),
    /// The host shut the session down.
    #[error("the host ended the session")]
    Shutdown,
}

impl EndReason {
    /// The protocol rule the Tick broke, when that is why the session ended.
    pub fn rule(&self) -> Option<&'static Rule> {
        match self {
            EndReason::Violation(v) => Some(v.rule()),
            _ => None,
        }
    }
}

/// Why a call's outcome is unknown: it may or may not have taken effect.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum UnknownReason {
    /// No answer within the call timeout (§7.3).
    #[error("no response within {}s", .0.as_secs_f32())]
    TimedOut(Duration),
    /// The session ended while the call was in flight.
    #[error("the session ended while the call was in flight: {0}")]
    SessionEnded(EndReason),
    /// Both or neither of result and error, or an ill-formed error (§3.6).
    #[error("malformed response (§3.6): {0}")]
    Malformed(String),
    /// The result is larger than the limit (§3.6); it is never clipped.
    #[error("response_too_large: the result is {observed} bytes encoded, over the {limit}-byte limit (§3.6)")]
    TooLarge { observed: usize, limit: usize },
    /// Reported by another party that ran the call: a live instance's host
    /// (its words, over the live socket), or a client of that socket that
    /// lost the answer on the way. Text from another process, which may
    /// carry the Tick's words: a `TickText`, escaped on every way out.
    #[error("{0}")]
    Reported(tickbox_protocol::TickText),
    /// The call ran, but its audit line could not be made durable on a
    /// synced audit stream ([`crate::audit::Audit::synced`]), so its
    /// answer is withheld: nothing is answered that is not on record.
    #[error("the call ran but is not on record, so its result is withheld: {0}")]
    Unrecorded(AuditSyncError),
}

/// How a tick/call ended, as the host classifies it (§3.4, §7.3).
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool returned this result.
    Ok(Value),
    /// The tool returned an error; `executed` says whether it may have had effects.
    Failed { error: RpcError, executed: bool },
    /// The host cannot know whether the call took effect. Never resent.
    Unknown(UnknownReason),
}

/// Why a call's line did not become durable ([`crate::audit::Recorded::durable`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditSyncError {
    /// The write or the sync failed (a full disk, an I/O error).
    #[error("audit sync: the call's line was not written and synced: {0}")]
    Failed(Arc<str>),
    /// The writer was closed first (the process is on its way out).
    #[error("audit sync: the audit stream closed before the call's line was synced")]
    Closed,
}
