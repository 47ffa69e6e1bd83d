//! Warnings a Tick or a client can cause at any rate, logged at a bounded
//! one: [`Throttle`].

use crate::util::lock;

/// A warning a Tick or a client can cause as often as it likes, logged at
/// most once per [`IGNORED_REQUEST_LOG_INTERVAL`](crate::limits::IGNORED_REQUEST_LOG_INTERVAL):
/// the first at once, then one line per interval saying how many were not
/// logged since, so log lines never come at the rate of what causes them.
#[derive(Debug, Default)]
pub struct Throttle(std::sync::Mutex<(Option<std::time::Instant>, u64)>);

impl Throttle {
    /// One more occurrence: `Some(n)` when it is to be logged, `n` the
    /// occurrences since the last logged one that were not.
    pub fn hit(&self) -> Option<u64> {
        let mut state = lock(&self.0);
        let (logged_at, unlogged) = &mut *state;
        let now = std::time::Instant::now();
        if logged_at
            .is_some_and(|at| now.duration_since(at) < crate::limits::IGNORED_REQUEST_LOG_INTERVAL)
        {
            *unlogged += 1;
            return None;
        }
        *logged_at = Some(now);
        Some(std::mem::take(unlogged))
    }

    /// The occurrences since the last logged one, for a last line.
    pub fn unlogged(&self) -> u64 {
        lock(&self.0).1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_logs_the_first_and_counts_the_rest_of_an_interval() {
        let t = Throttle::default();
        // Positive control: the first occurrence is logged.
        assert_eq!(t.hit(), Some(0));
        for _ in 0..10_000 {
            assert_eq!(t.hit(), None);
        }
        assert_eq!(t.unlogged(), 10_000);
    }
}
