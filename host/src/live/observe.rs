//! Watching what reaches a published instance from outside: keys from
//! views, resizes, calls through the socket, and marks a view sets. A session
//! is recorded as a scenario this way (`scenario::record::Recorder`).
//!
//! Observers are called on the serving tasks, in the order things reach the
//! Tick, and must return quickly (no I/O): a slow observer delays the view
//! it is called from.

use crate::session::CallOutcome;
use serde_json::Value;
use std::time::Instant;
use tickbox_protocol::TickText;

/// Told about what reaches one instance from its views and clients.
pub trait Observer: Send + Sync + std::fmt::Debug {
    /// Keys a view sent to the Tick (query answers from the screen model
    /// are not keys and are not reported).
    fn keys(&self, _bytes: &[u8]) {}
    /// The Tick's terminal was resized (to the smallest view).
    fn resized(&self, _cols: u16, _rows: u16) {}
    /// A call sent at `started` through the socket ended with `outcome`.
    /// Calls the host refused before sending, or sent bound to an older
    /// catalog revision, are not reported.
    fn called(&self, _tool: &str, _args: &Value, _started: Instant, _outcome: &CallOutcome) {}
    /// A view set a mark; `screen` is the Tick's screen as text.
    fn mark(&self, _screen: &TickText) {}
    /// A view left.
    fn view_left(&self) {}
    /// A few words for the views' status bars (e.g. that a recording is
    /// on and how many marks it has).
    fn status(&self) -> Option<String> {
        None
    }
}
