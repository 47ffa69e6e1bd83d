//! Reaching live instances (`tickbox run`'s hosts) over the per-user socket.

use crate::AppError;
use std::sync::Arc;
use std::time::Duration;
use tickbox_host::live::{self, LiveError, Published, Registry};
use tickbox_host::session::Session;

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
