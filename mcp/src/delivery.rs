//! Latest-only delivery of state changes to a subscribed MCP client.
//!
//! The session keeps only the newest state ([`StateSnapshot`]); this loop
//! turns its changes into at most one delivery per interval. Updates that
//! arrive while it waits out the interval are merged into the next delivery,
//! and the client learns how many were merged when it reads the resource.
//!
//! It is deliberately small and self-contained so that the shared delivery
//! module of `tickbox watch` can replace it.

use std::future::Future;
use std::time::Duration;
use tickbox_host::session::StateSnapshot;
use tokio::sync::watch;

/// The shortest time between two deliveries for one Tick.
pub const DELIVERY_INTERVAL: Duration = Duration::from_secs(1);

/// Calls `deliver` with the session's update count whenever a tick/update
/// arrived since the last delivery, then waits `interval` before the next.
///
/// A change that is not an update (a tick/read refreshing the same state)
/// delivers nothing, so reading the resource never triggers a notification
/// about itself. Returns when the session's state channel closes or
/// `deliver` returns `false`.
#[cfg(test)]
pub async fn deliver_latest<F, Fut>(
    mut state: watch::Receiver<StateSnapshot>,
    interval: Duration,
    deliver: F,
) where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = bool>,
{
    let delivered = state.borrow_and_update().updates;
    deliver_latest_from(state, interval, delivered, deliver).await
}

/// `deliver_latest` from a known update count: when the session is
/// already past `delivered`, the first delivery comes at once. A listener
/// that starts a moment after it was promised notifications (an
/// acknowledged `subscriptions/listen`) misses nothing this way.
pub async fn deliver_latest_from<F, Fut>(
    mut state: watch::Receiver<StateSnapshot>,
    interval: Duration,
    mut delivered: u64,
    mut deliver: F,
) where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = bool>,
{
    state.mark_changed();
    while state.changed().await.is_ok() {
        let updates = state.borrow_and_update().updates;
        if updates == delivered {
            continue;
        }
        delivered = updates;
        if !deliver(updates).await {
            return;
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test(start_paused = true)]
    async fn updates_within_an_interval_merge_into_one_delivery() {
        let (tx, rx) = watch::channel(StateSnapshot::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(deliver_latest(rx, Duration::from_secs(1), move |n| {
            log.lock().unwrap().push(n);
            async { true }
        }));
        // Let the loop take its starting point before the first update.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let bump = |n: u64| tx.send_modify(|s| s.updates = n);
        bump(1);
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Three more updates inside the interval: one delivery, with the latest count.
        bump(2);
        bump(3);
        bump(4);
        // A read that changes nothing delivers nothing.
        tx.send_modify(|_| {});
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(*seen.lock().unwrap(), vec![1, 4]);
        drop(tx);
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_listener_catches_up_at_once() {
        let (tx, rx) = watch::channel(StateSnapshot::default());
        tx.send_modify(|s| s.updates = 3);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        // Promised from update 1 on; it starts after update 3.
        let task = tokio::spawn(deliver_latest_from(
            rx,
            Duration::from_secs(1),
            1,
            move |n| {
                log.lock().unwrap().push(n);
                async { true }
            },
        ));
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(*seen.lock().unwrap(), vec![3]);
        // Nothing new: nothing more (positive control of the baseline).
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(*seen.lock().unwrap(), vec![3]);
        drop(tx);
        task.await.unwrap();
    }
}
