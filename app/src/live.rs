//! Reaching live instances (`tickbox run`'s hosts) over the per-user socket.

use crate::AppError;
use std::sync::Arc;
use std::time::Duration;
use tickbox_host::live::wire::{CallReply, Request};
use tickbox_host::live::{self, client, LiveError, Published, Registry};
use tickbox_host::session::Session;
use tickbox_protocol::limits::REQUEST_TIMEOUT;
use tickbox_protocol::PreparedCall;

/// How much longer than the host's own deadline a client waits for its
/// reply: the host answers a timeout itself, so this only runs out when the
/// host is stopped, wedged or gone.
pub const REPLY_GRACE: Duration = Duration::from_secs(3);

/// A live instance's error as an application error: the caller's
/// mistakes (a bad or taken name, a request the host calls a usage error)
/// apart from an instance that cannot be reached.
pub fn exit_of(e: LiveError) -> AppError {
    match e {
        LiveError::Remote {
            kind: tickbox_host::live::wire::ErrorKind::Usage,
            message,
        } => AppError::Usage(message),
        LiveError::BadName(_) | LiveError::NameTaken(_) => AppError::usage(e),
        other => AppError::session(other),
    }
}

/// Publishes the Ticks a host serves (`tickbox mcp`) as live instances,
/// all through one registry handle, so that all of their names point at
/// one host lock (one descriptor for the host, not one per Tick).
/// Publishing is never fatal: the MCP client does not depend on it, so a
/// failure is logged and the Tick served unpublished.
pub struct Publisher {
    registry: Option<Registry>,
}

impl Publisher {
    /// The current user's registry, or a publisher that logs why it
    /// publishes nothing.
    pub fn open() -> Publisher {
        let registry = Registry::open()
            .inspect_err(|e| tracing::warn!(error = %e, "no Tick is published as a live instance"))
            .ok();
        Publisher { registry }
    }

    /// Publishes `session` under `name` or, if a live instance has that
    /// name already, the next free one; `backend` is what `ls` shows.
    pub async fn publish(
        &self,
        session: &Arc<Session>,
        name: &str,
        backend: &str,
    ) -> Option<Published> {
        let registry = self.registry.clone()?;
        let mut options = live::PublishOptions::new(backend);
        options.registry = Some(registry);
        options.name = Some(name.to_string());
        let result = match live::publish(session.clone(), options.clone()).await {
            Err(LiveError::NameTaken(_)) => {
                options.name = None;
                live::publish(session.clone(), options).await
            }
            other => other,
        };
        result
            .inspect_err(
                |e| tracing::warn!(tick = name, error = %e, "not published as a live instance"),
            )
            .ok()
    }
}

/// How a call sent to a live instance ended.
#[derive(Debug)]
pub enum Called {
    /// The host's reply: the Tick's result or error.
    Replied(CallReply),
    /// Sent, but its outcome is unknown (why): the Tick may have had it,
    /// so it is never resent.
    Unknown(String),
}

/// Sends `prepared` (approved against its revision) to the live instance
/// `target` names in `registry`, with `timeout` as the host's deadline
/// for it, and waits that long plus [`REPLY_GRACE`] (a stopped or wedged
/// host never hangs the caller). Until the request has left nothing can
/// have run: a failure then is an error (a usage error when the host
/// calls it one). Once it has left, anything but a reply (the host
/// killed, the connection lost, an unreadable or oversized reply, the
/// deadline) is [`Called::Unknown`].
pub async fn call(
    registry: &Registry,
    target: &str,
    prepared: PreparedCall,
    timeout: Duration,
) -> Result<Called, AppError> {
    let mut conn = tokio::time::timeout(REQUEST_TIMEOUT, client::connect(registry, target))
        .await
        .map_err(|_| AppError::session(format!("the live instance `{target}` did not answer")))?
        .map_err(exit_of)?;
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let request = Request::Call {
        tool: prepared.tool,
        args: prepared.args,
        revision: prepared.revision,
        timeout_ms: Some(timeout_ms),
    };
    tokio::time::timeout(REQUEST_TIMEOUT, conn.send_request(&request))
        .await
        .map_err(|_| {
            AppError::session(format!(
                "the live instance `{target}` did not take the call"
            ))
        })?
        .map_err(exit_of)?;
    // The host answers its own timeout; ours is only for a host that cannot.
    let limit = timeout + timeout / 20 + REPLY_GRACE;
    let reply = match tokio::time::timeout(limit, conn.reply()).await {
        Ok(Ok(v)) => v,
        // The host refused before sending anything to the Tick.
        Ok(Err(e @ (LiveError::Remote { .. } | LiveError::Refused(_)))) => return Err(exit_of(e)),
        Ok(Err(e)) => {
            return Ok(Called::Unknown(format!(
                "the host did not deliver the outcome ({e})"
            )))
        }
        Err(_) => {
            return Ok(Called::Unknown(format!(
                "the host sent no reply within {:.1}s",
                limit.as_secs_f64()
            )))
        }
    };
    Ok(match serde_json::from_value(reply) {
        Ok(reply) => Called::Replied(reply),
        Err(e) => Called::Unknown(format!("unreadable call reply from the host: {e}")),
    })
}
