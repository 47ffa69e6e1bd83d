//! The two helpers every telemetry module shares: the poison-tolerant lock
//! and the timestamp every record carries.

use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

/// Locks `m`, taking the data even if a thread panicked while holding it:
/// a recorder's state stays consistent at every step, and a panic in one
/// observer must not turn every later event into another.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `t` as RFC 3339 in UTC, to the millisecond (`2026-12-06T03:41:49.250Z`).
pub(crate) fn rfc3339_millis(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
