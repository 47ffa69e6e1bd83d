//! Virtual time and seeded randomness for a wasm Tick (`tickbox test`).
//!
//! A wasm guest reads time and randomness only through WASI host functions,
//! so a host can make its whole run reproducible. A [`VirtualClock`] handed
//! to [`super::spawn_with`] makes, for that one guest:
//!
//! - **wall clock** (`wasi:clocks/wall-clock`): starts at [`START_WALL`]
//!   (2000-01-01T00:00:00Z) and moves only when the host calls
//!   [`VirtualClock::advance`];
//! - **monotonic clock** (`wasi:clocks/monotonic-clock`): starts at
//!   [`START_MONOTONIC`] and moves with the wall clock;
//! - **timers** (`subscribe-duration`, `subscribe-instant`; components only):
//!   a pollable is ready once virtual time reaches its deadline. `advance`
//!   steps through the deadlines the guest waits on, in order, moving the
//!   clock to each one and letting the guest handle it before the next, so
//!   a periodic timer fires as often as it would in real time;
//! - **random** (`wasi:random/random`, `insecure`, `insecure-seed`): bytes
//!   from a SplitMix64 stream of the seed (one stream per interface), the
//!   same on every machine.
//!
//! What is **not** virtual: a preview-1 module's sleeps (`poll_oneoff`) wait
//! real time (its clock readings and randomness are virtual), so `advance` is
//! refused for modules; the CPU time a guest takes; the order in which the
//! host delivers input relative to a guest that is busy (the scenario runner
//! waits for the guest to be idle, see below, to keep that order fixed).
//!
//! **Idle**: the guest is idle when it is blocked waiting for input or time
//! (its wait found nothing ready and nothing has woken it since; still so
//! after [`IDLE_QUIET`]): in `wasi:io/poll` (`poll`,
//! `pollable.block`, which std's `sleep` uses too) or in a blocking read
//! (`input-stream.blocking-read`, `blocking-skip`: std's `stdin().read`).
//! Components are linked with versions of those that count the waits.
//! Everything else looks busy: computing, a blocking write, flush or splice
//! (waiting for the host to take output), a host call in progress; waiting
//! for such a guest to be idle gives up after the caller's bound. A
//! preview-1 module has no idle signal at all (its `poll_oneoff` and
//! `fd_read` are wasmtime-wasi's own).
//!
//! - **instance id** (`TICKLOOP_INSTANCE_ID`): [`instance_id`] of the seed
//!   rather than the host's pid and start time, so nothing the guest is
//!   given differs from one run to the next;
//! - **file timestamps** (`descriptor.stat`, `stat-at`; components only):
//!   every access, modification and status-change time a guest reads is
//!   [`FILE_TIME`], the virtual epoch, whatever the host's files say (real
//!   times would differ on every run, and lie in the future of the guest's
//!   clock); `set-times`/`set-times-at` with `now` set the virtual wall
//!   clock's time on the host's file rather than the host's. A preview-1
//!   module's `fd_filestat_get`/`path_filestat_get` read the same epoch
//!   (its `fd_filestat_set_times` with `now` still sets the host's time on
//!   the host's file, which the guest never reads back);
//! - **directory order**: a listing comes in name order, not the host
//!   file system's ([`listing`]).
//!
//! Everything a guest controls is bounded: an `advance` fires at most
//! [`MAX_ADVANCE_FIRINGS`] timer deadlines, and a single `advance` spans at
//! most [`MAX_ADVANCE`].

pub mod listing;

pub use crate::limits::{MAX_ADVANCE, MAX_ADVANCE_FIRINGS};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use tickbox_host::util::lock;
use tokio::sync::watch;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::clocks::{HostMonotonicClock, HostWallClock};
use wasmtime_wasi::p2::{subscribe, DynPollable, Pollable};

/// The virtual wall clock's start: 2000-01-01T00:00:00Z, in seconds since the Unix epoch.
pub const START_WALL: Duration = Duration::from_secs(946_684_800);
/// The virtual monotonic clock's start, in nanoseconds: not zero, so a guest
/// that subtracts a little from "now" does not underflow.
pub const START_MONOTONIC: u64 = 1_000_000_000_000;
/// How long a guest must stay blocked to count as idle, after its wait
/// found nothing ready. Only a confirmation: "blocked" is exact (see
/// [`VirtualClock::wait_idle`]), so this can be short.
pub const IDLE_QUIET: Duration = Duration::from_millis(1);
/// What a guest under virtual time reads as every timestamp of every file
/// (access, modification, status change): the virtual epoch, [`START_WALL`].
/// Fixed rather than the clock's current time, so a file does not seem to
/// change as time advances, and no file is newer than the guest's clock.
pub const FILE_TIME: Duration = START_WALL;
/// Bound on waiting for the guest to handle one fired deadline.
pub const STEP_SETTLE_MAX: Duration = Duration::from_secs(5);

/// The `TICKLOOP_INSTANCE_ID` of a guest under virtual time with `seed`:
/// a function of the seed alone (the same on every run, unlike the host's
/// pid and clock, which a normal instance id carries).
pub fn instance_id(seed: u64) -> String {
    format!("tickbox-virtual-{seed:016x}")
}

/// Why an `advance` stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdvanceError {
    /// The span is longer than [`MAX_ADVANCE`].
    #[error("advance of {0:?} is longer than the {MAX_ADVANCE:?} limit")]
    TooLong(Duration),
    /// The guest's timers fired more than [`MAX_ADVANCE_FIRINGS`] times.
    #[error("advance stopped after {limit} timer firings (the limit) at +{at:?}: the Tick's timers are too frequent for this span")]
    TooManyFirings { limit: u64, at: Duration },
}

/// What an `advance` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Advanced {
    /// Timer deadlines the clock stopped at on the way.
    pub firings: u64,
    /// Deadlines after which the guest did not become idle within [`STEP_SETTLE_MAX`].
    pub unsettled: u64,
}

/// One guest's virtual clocks, timers and random seed. Cheap to clone; all
/// clones are the same clock.
#[derive(Clone)]
pub struct VirtualClock {
    inner: Arc<Inner>,
}

struct Inner {
    /// Virtual nanoseconds since the start.
    elapsed: watch::Sender<u64>,
    /// Deadlines (virtual elapsed nanos) of the timer pollables alive in the guest, by id.
    timers: Mutex<BTreeMap<u64, u64>>,
    next_timer: AtomicU64,
    /// Guest waits in `wasi:io/poll` in progress.
    in_poll: AtomicUsize,
    /// The guest's current wait found nothing ready and nothing has woken
    /// it since (see [`watched`]).
    blocked: AtomicBool,
    /// Bumped whenever the guest becomes blocked or starts a wait, so
    /// [`VirtualClock::wait_idle`] sleeps until something changes.
    changes: watch::Sender<u64>,
    /// Guest waits in `wasi:io/poll` begun so far.
    polls: AtomicU64,
    seed: u64,
}

impl std::fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualClock")
            .field("elapsed", &self.elapsed())
            .field("seed", &self.inner.seed)
            .finish()
    }
}

impl VirtualClock {
    /// A clock at the start, with random bytes from `seed`.
    pub fn new(seed: u64) -> VirtualClock {
        VirtualClock {
            inner: Arc::new(Inner {
                elapsed: watch::Sender::new(0),
                timers: Mutex::default(),
                next_timer: AtomicU64::new(0),
                in_poll: AtomicUsize::new(0),
                blocked: AtomicBool::new(false),
                changes: watch::Sender::new(0),
                polls: AtomicU64::new(0),
                seed,
            }),
        }
    }

    /// The seed random bytes come from.
    pub fn seed(&self) -> u64 {
        self.inner.seed
    }

    /// Virtual time since the start.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(*self.inner.elapsed.borrow())
    }

    /// Deadlines (virtual time since the start) of the timers the guest holds, soonest first.
    pub fn pending_timers(&self) -> Vec<Duration> {
        let mut v: Vec<u64> = lock(&self.inner.timers).values().copied().collect();
        v.sort_unstable();
        v.into_iter().map(Duration::from_nanos).collect()
    }

    /// A mark for [`VirtualClock::wait_idle`]: guest waits begun so far.
    pub fn activity(&self) -> u64 {
        self.inner.polls.load(Ordering::SeqCst)
    }

    /// Whether the guest is blocked in `wasi:io/poll` right now.
    pub fn in_poll(&self) -> bool {
        self.inner.in_poll.load(Ordering::SeqCst) > 0
    }

    /// Whether the guest's current wait found nothing ready and nothing
    /// has woken it since.
    pub fn blocked(&self) -> bool {
        self.in_poll() && self.inner.blocked.load(Ordering::SeqCst)
    }

    /// Waits until the guest is idle: in a wait (`wasi:io/poll` or a
    /// blocking read) that found nothing ready, with no waker fired since,
    /// still so after [`IDLE_QUIET`]; and (when `after` is given) in a wait
    /// begun after that mark, i.e. it has woken since. "Blocked" is exact:
    /// the wait's future returned pending and none of the wakers it gave out
    /// has fired, so a pollable that became ready (input, a due timer) makes
    /// it busy at once. False if `max` passed first.
    pub async fn wait_idle(&self, after: Option<u64>, max: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max;
        let mut changes = self.inner.changes.subscribe();
        loop {
            changes.borrow_and_update();
            let mark = self.activity();
            if after.is_none_or(|a| mark > a) && self.blocked() {
                tokio::time::sleep(IDLE_QUIET).await;
                if self.blocked() && self.activity() == mark {
                    return true;
                }
                continue;
            }
            // Woken by the next wait or block; the sender lives in `inner`.
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return false;
            }
        }
    }

    /// Moves virtual time forward by `by`, stopping at each timer deadline
    /// the guest waits on in between and letting the guest handle it (up to
    /// [`STEP_SETTLE_MAX`] each) before moving on.
    pub async fn advance(&self, by: Duration) -> Result<Advanced, AdvanceError> {
        self.advance_with(by, MAX_ADVANCE_FIRINGS, STEP_SETTLE_MAX)
            .await
    }

    async fn advance_with(
        &self,
        by: Duration,
        max_firings: u64,
        settle: Duration,
    ) -> Result<Advanced, AdvanceError> {
        if by > MAX_ADVANCE {
            return Err(AdvanceError::TooLong(by));
        }
        let start = *self.inner.elapsed.borrow();
        let target = start.saturating_add(u64::try_from(by.as_nanos()).unwrap_or(u64::MAX));
        let mut done = Advanced::default();
        loop {
            let now = *self.inner.elapsed.borrow();
            let next = lock(&self.inner.timers)
                .values()
                .copied()
                .filter(|&d| d > now && d <= target)
                .min();
            let Some(next) = next else { break };
            if done.firings >= max_firings {
                return Err(AdvanceError::TooManyFirings {
                    limit: max_firings,
                    at: Duration::from_nanos(now - start),
                });
            }
            done.firings += 1;
            let mark = self.activity();
            self.inner.elapsed.send_replace(next);
            if !self.wait_idle(Some(mark), settle).await {
                done.unsettled += 1;
            }
        }
        self.inner.elapsed.send_replace(target);
        Ok(done)
    }

    /// The guest's wall clock.
    fn wall(&self) -> VirtualWall {
        VirtualWall(self.clone())
    }

    /// The guest's monotonic clock readings.
    fn monotonic(&self) -> VirtualMonotonic {
        VirtualMonotonic(self.clone())
    }

    pub(crate) fn now_monotonic(&self) -> u64 {
        START_MONOTONIC.saturating_add(self.elapsed_nanos())
    }

    /// The virtual time passed since the start, in nanoseconds.
    pub(crate) fn elapsed_nanos(&self) -> u64 {
        *self.inner.elapsed.borrow()
    }

    /// Installs the virtual clocks and seeded random generators.
    pub(super) fn install(&self, b: &mut wasmtime_wasi::WasiCtxBuilder) {
        let seed = self.inner.seed;
        b.wall_clock(self.wall());
        b.monotonic_clock(self.monotonic());
        b.secure_random(SplitMix64::new(seed, 1));
        b.insecure_random(SplitMix64::new(seed, 2));
        let mut s = SplitMix64::new(seed, 3);
        b.insecure_random_seed((u128::from(s.next()) << 64) | u128::from(s.next()));
    }

    pub(crate) fn subscribe(
        &self,
        table: &mut ResourceTable,
        deadline: u64,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        let id = self.inner.next_timer.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.timers).insert(id, deadline);
        let timer = table.push(VirtualDeadline {
            clock: self.clone(),
            id,
            deadline,
            yielded: false,
        })?;
        subscribe(table, timer)
    }

    fn enter_poll(&self) -> PollGuard {
        self.inner.blocked.store(false, Ordering::SeqCst);
        self.inner.polls.fetch_add(1, Ordering::SeqCst);
        self.inner.in_poll.fetch_add(1, Ordering::SeqCst);
        self.inner.changes.send_modify(|n| *n += 1);
        PollGuard(self.clone())
    }
}

/// The waker a guest's wait hands to what it waits on: firing it marks the
/// guest busy before waking its task.
struct FlagWaker {
    clock: VirtualClock,
    fired: AtomicBool,
    real: Waker,
}

impl Wake for FlagWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::SeqCst);
        self.clock.inner.blocked.store(false, Ordering::SeqCst);
        self.real.wake_by_ref();
    }
}

/// Runs one guest wait (`fut`), counting it as a wait (`enter_poll`) and
/// keeping the clock's `blocked` flag exact: set when the wait returns
/// pending, cleared when any waker it gave out fires. A wake that races the
/// pending return is seen through the waker's own `fired` flag, checked
/// after `blocked` is set. Wakers from earlier rounds may fire late and
/// clear the flag spuriously; they also wake the task, whose next round
/// sets it again.
pub(crate) async fn watched<F: Future>(clock: Option<&VirtualClock>, fut: F) -> F::Output {
    let Some(clock) = clock else {
        return fut.await;
    };
    let _wait = clock.enter_poll();
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let flag = Arc::new(FlagWaker {
            clock: clock.clone(),
            fired: AtomicBool::new(false),
            real: cx.waker().clone(),
        });
        let waker = Waker::from(flag.clone());
        match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(v) => {
                clock.inner.blocked.store(false, Ordering::SeqCst);
                Poll::Ready(v)
            }
            Poll::Pending => {
                clock.inner.blocked.store(true, Ordering::SeqCst);
                if flag.fired.load(Ordering::SeqCst) {
                    clock.inner.blocked.store(false, Ordering::SeqCst);
                }
                clock.inner.changes.send_modify(|n| *n += 1);
                Poll::Pending
            }
        }
    })
    .await
}

/// Counts a guest wait in `wasi:io/poll` while it lasts (also when the
/// guest's future is dropped mid-wait).
struct PollGuard(VirtualClock);

impl Drop for PollGuard {
    fn drop(&mut self) {
        self.0.inner.blocked.store(false, Ordering::SeqCst);
        self.0.inner.in_poll.fetch_sub(1, Ordering::SeqCst);
    }
}

struct VirtualWall(VirtualClock);

impl HostWallClock for VirtualWall {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        START_WALL + self.0.elapsed()
    }
}

struct VirtualMonotonic(VirtualClock);

impl HostMonotonicClock for VirtualMonotonic {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        self.0.now_monotonic()
    }
}

/// A timer pollable: ready once virtual time reaches the deadline.
struct VirtualDeadline {
    clock: VirtualClock,
    id: u64,
    deadline: u64,
    yielded: bool,
}

#[wasmtime_wasi::async_trait]
impl Pollable for VirtualDeadline {
    async fn ready(&mut self) {
        let mut rx = self.clock.inner.elapsed.subscribe();
        if *rx.borrow() >= self.deadline {
            // A deadline already due is ready at once, but yield once first:
            // a guest polling in a loop with a zero timeout must not starve
            // the runtime (wasmtime-wasi's own clock does the same).
            if !self.yielded {
                self.yielded = true;
                tokio::task::yield_now().await;
            }
            return;
        }
        let deadline = self.deadline;
        // The sender lives as long as this pollable's clock: no error.
        let _ = rx.wait_for(|&now| now >= deadline).await;
    }
}

impl Drop for VirtualDeadline {
    fn drop(&mut self) {
        lock(&self.clock.inner.timers).remove(&self.id);
    }
}

/// A deterministic generator (SplitMix64), one stream per `stream` id.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64, stream: u64) -> SplitMix64 {
        SplitMix64(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl rand_core::TryRng for SplitMix64 {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok((self.next() >> 32) as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.next())
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_random_is_the_same_for_the_same_seed_and_differs_by_seed() {
        use rand_core::TryRng;
        let bytes = |seed| {
            let mut b = [0u8; 19];
            SplitMix64::new(seed, 1).try_fill_bytes(&mut b).unwrap();
            b
        };
        assert_eq!(bytes(7), bytes(7));
        assert_ne!(bytes(7), bytes(8));
        assert_ne!(SplitMix64::new(7, 1).next(), SplitMix64::new(7, 2).next());
    }

    #[tokio::test]
    async fn advance_moves_the_readings_and_wakes_due_timers_only() {
        let clock = VirtualClock::new(0);
        assert_eq!(clock.wall().now(), START_WALL);
        assert_eq!(clock.monotonic().now(), START_MONOTONIC);
        let mut table = ResourceTable::new();
        let _early = clock.subscribe(&mut table, 1_000_000_000).unwrap();
        let _late = clock.subscribe(&mut table, 10_000_000_000).unwrap();
        assert_eq!(
            clock.pending_timers(),
            vec![Duration::from_secs(1), Duration::from_secs(10)]
        );
        let mut early = VirtualDeadline {
            clock: clock.clone(),
            id: u64::MAX,
            deadline: 1_000_000_000,
            yielded: false,
        };
        // Not due: still pending after a real wait.
        assert!(
            tokio::time::timeout(Duration::from_millis(20), early.ready())
                .await
                .is_err()
        );
        // No guest polls here, so each stop reports unsettled; bound the wait.
        let settle = Duration::from_millis(1);
        let done = clock
            .advance_with(Duration::from_secs(2), 10, settle)
            .await
            .unwrap();
        assert_eq!(done.firings, 1, "stops at the 1 s deadline only");
        assert_eq!(clock.elapsed(), Duration::from_secs(2));
        assert_eq!(clock.monotonic().now(), START_MONOTONIC + 2_000_000_000);
        assert_eq!(clock.wall().now(), START_WALL + Duration::from_secs(2));
        tokio::time::timeout(Duration::from_secs(5), early.ready())
            .await
            .expect("a due timer is ready");
    }

    #[tokio::test]
    async fn advance_refuses_spans_over_the_limit() {
        let clock = VirtualClock::new(0);
        let err = clock.advance(MAX_ADVANCE + Duration::from_secs(1)).await;
        assert!(matches!(err, Err(AdvanceError::TooLong(_))));
        assert!(err.unwrap_err().to_string().contains("limit"));
        // Positive control: exactly the limit is fine.
        clock.advance(MAX_ADVANCE).await.unwrap();
        assert_eq!(clock.elapsed(), MAX_ADVANCE);
    }

    #[tokio::test]
    async fn advance_stops_at_the_firing_bound() {
        let clock = VirtualClock::new(0);
        let mut table = ResourceTable::new();
        let _timers: Vec<_> = (1..=5u64)
            .map(|s| clock.subscribe(&mut table, s * 1_000_000_000).unwrap())
            .collect();
        let settle = Duration::from_millis(1);
        let err = clock
            .advance_with(Duration::from_secs(10), 3, settle)
            .await
            .unwrap_err();
        assert!(matches!(err, AdvanceError::TooManyFirings { limit: 3, .. }));
        assert!(err.to_string().contains("3 timer firings (the limit)"));
        // Positive control: a bound the timers fit in.
        let clock = VirtualClock::new(0);
        let _timers: Vec<_> = (1..=5u64)
            .map(|s| clock.subscribe(&mut table, s * 1_000_000_000).unwrap())
            .collect();
        let done = clock
            .advance_with(Duration::from_secs(10), 5, settle)
            .await
            .unwrap();
        assert_eq!(done.firings, 5);
        assert_eq!(clock.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_means_a_wait_that_found_nothing_ready_since_the_mark() {
        let clock = VirtualClock::new(0);
        assert!(!clock.wait_idle(None, Duration::from_millis(30)).await);
        let mark = clock.activity();
        // A guest waiting on a timer one second ahead: blocked.
        let c = clock.clone();
        let guest = tokio::spawn(async move {
            let mut timer = VirtualDeadline {
                clock: c.clone(),
                id: u64::MAX,
                deadline: 1_000_000_000,
                yielded: false,
            };
            watched(Some(&c), timer.ready()).await
        });
        assert!(clock.wait_idle(Some(mark), Duration::from_secs(5)).await);
        assert!(clock.blocked());
        // A wait begun before the mark is not "woken since".
        let mark = clock.activity();
        assert!(!clock.wait_idle(Some(mark), Duration::from_millis(30)).await);
        // The timer coming due wakes it: busy at once (the waker fires
        // inside send_replace), then the wait ends.
        clock.inner.elapsed.send_replace(1_000_000_000);
        assert!(!clock.blocked(), "a fired waker is not idle");
        tokio::time::timeout(Duration::from_secs(5), guest)
            .await
            .expect("the wait ends")
            .unwrap();
        assert!(!clock.in_poll() && !clock.blocked());
        // A wait on something already ready is never idle.
        let c = clock.clone();
        watched(Some(&c), async {}).await;
        assert!(!clock.wait_idle(None, Duration::from_millis(30)).await);
    }
}
