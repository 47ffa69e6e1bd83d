//! Small helpers every layer shares, so each has one spelling.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Locks `m`, taking the data even if a thread panicked while holding it.
///
/// tickbox's critical sections are short updates of counters, queues and
/// maps that leave the data consistent at every step; a panic in one is a
/// bug already reported, and poisoning would turn it into a panic in every
/// later caller: a host that must never panic on what a Tick sends
/// cannot let one bug cascade through every session.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `t` as RFC 3339 in UTC, to the second (`2026-12-02T03:41:49Z`).
pub fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `t` as RFC 3339 in UTC, to the millisecond.
pub fn rfc3339_millis(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A `TICKLOOP_INSTANCE_ID` unique per start: host pid, start time and a counter.
pub fn new_instance_id() -> String {
    // Process-wide because uniqueness is: two contexts in one process
    // (two Apps, two tests) must never hand out the same id.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    format!("tickbox-{}-{t:x}-{n}", std::process::id())
}

/// Whether a process runs under `pid`, whoever's it is (`kill(2)` with
/// signal 0: only "no such process" says it does not). Files named after
/// a process are left alone while it may be theirs.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The rows of a `limits.rs` module's doc table (`//! | [`NAME`] | … |`):
/// each layer's limits table is checked against its constants by a unit
/// test, and this is the one reading of that table.
pub fn limits_rows(doc: &str) -> Vec<&str> {
    doc.lines().filter(|l| l.starts_with("//! | [`")).collect()
}

/// The row of [`limits_rows`] that names `name`.
pub fn limits_row<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let link = format!("[`{name}`]");
    limits_rows(doc).into_iter().find(|l| l.contains(&link))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_528_509_250);
        assert_eq!(rfc3339(t), "2026-12-06T03:41:49Z");
        assert_eq!(rfc3339_millis(t), "2026-12-06T03:41:49.250Z");
        assert!(tickbox_protocol::state::is_rfc3339(&rfc3339(
            SystemTime::now()
        )));
    }

    #[test]
    fn a_poisoned_lock_still_opens() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
