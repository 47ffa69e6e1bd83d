//! Reaching live instances (`tickbox run`'s hosts) over the per-user socket.

use crate::AppError;
use std::time::Duration;
use tickbox_host::live::LiveError;

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
