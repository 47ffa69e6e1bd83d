//! CPU sharing among wasm guests and the host's own tasks.
//!
//! Every guest runs as a tokio task with epoch interruption: the ticker
//! thread advances the engines' epoch, and a guest that reaches its epoch
//! deadline yields. Two things decide how long a CPU-bound guest holds the
//! thread the host's I/O also runs on (`tickbox mcp` over stdio has only
//! one):
//!
//! - **how it yields**: with wasmtime's own yield the guest wakes itself
//!   at once, so the scheduler always has a task ready and polls the I/O
//!   driver only every `event_interval` (61) polls, which starves requests
//!   behind a spinning guest. A guest here yields with [`tokio::task::yield_now`],
//!   which defers its wake-up until the scheduler has run every other ready
//!   task and polled the driver.
//! - **how long a slice is**: a request to another Tick passes through
//!   several tasks in turn (the stdin reader, the facade, the neighbour
//!   guest, the session's reader, the stdout writer), and a spinning guest
//!   that is back in the queue runs one slice between any two of them. So
//!   while some guest is using its whole slice, the epoch advances every
//!   [`EPOCH_TICK`]; when none has since the last tick, only every
//!   [`IDLE_EPOCH_TICK`], so an idle host does not wake a thousand times a
//!   second.
//!
//! A guest that was waiting (for input, a timer, a pipe) does not run
//! while the epoch advances, so its deadline is long past when it wakes:
//! it would yield at its first instruction. A deadline more than
//! [`STALE_TICKS`] ticks old is renewed without yielding instead, so a
//! call to an idle Tick costs no extra trip through the scheduler.
//!
//! [`GuestYield::Immediate`] brings back the previous behaviour (wasmtime's yield, a
//! fixed 10 ms tick), for benchmarks that compare the two.

pub use crate::limits::{EPOCH_TICK, IDLE_EPOCH_TICK};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::{EngineWeak, Store, UpdateDeadline};

/// A guest whose last deadline came at least this many ticks ago was
/// waiting, not running (a running one meets a deadline every tick, or
/// two when the host's tasks kept it waiting after a yield): its deadline
/// is renewed without a yield.
pub const STALE_TICKS: u64 = 3;

/// How a guest yields when its slice ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuestYield {
    /// Behind every ready task and the I/O driver, with the 1 ms epoch
    /// while guests are CPU-bound (the module docs): the default.
    #[default]
    Deferred,
    /// The way guests yielded before (wasmtime's self-waking yield, every
    /// [`IDLE_EPOCH_TICK`]): only for comparing the two in benchmarks.
    Immediate,
}

/// How the guests of one engine share the CPU: given to the ticker and to
/// every store.
#[derive(Clone)]
pub(crate) struct Pacer {
    /// Some guest reached its deadline since the ticker last looked: the
    /// next tick comes after [`EPOCH_TICK`] rather than [`IDLE_EPOCH_TICK`].
    busy: Arc<AtomicBool>,
    /// Ticks so far, to tell a stale deadline from a used slice.
    ticks: Arc<AtomicU64>,
    /// [`GuestYield::Immediate`] asked for the previous behaviour.
    immediate: bool,
}

impl Pacer {
    pub(crate) fn new(mode: GuestYield) -> Pacer {
        let immediate = mode == GuestYield::Immediate;
        if immediate {
            tracing::info!("guests yield without deferring, every 10 ms");
        }
        Pacer {
            busy: Arc::default(),
            ticks: Arc::default(),
            immediate,
        }
    }

    /// Makes `store`'s guest yield at its epoch deadlines (see the module
    /// docs).
    pub(crate) fn configure<T: 'static>(&self, store: &mut Store<T>) {
        store.set_epoch_deadline(1);
        if self.immediate {
            store.epoch_deadline_async_yield_and_update(1);
            return;
        }
        let busy = self.busy.clone();
        let ticks = self.ticks.clone();
        let mut last = ticks.load(Ordering::Relaxed);
        store.epoch_deadline_callback(move |_| {
            let now = ticks.load(Ordering::Relaxed);
            let stale = now.saturating_sub(last) >= STALE_TICKS;
            last = now;
            if stale {
                return Ok(UpdateDeadline::Continue(1));
            }
            busy.store(true, Ordering::Relaxed);
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(tokio::task::yield_now()),
            ))
        });
    }

    /// Starts the ticker thread. It holds only weak handles and ends with
    /// the engines; the Winch engine joins when it is built.
    pub(crate) fn start_ticker(
        &self,
        cranelift: EngineWeak,
        winch: Arc<OnceLock<EngineWeak>>,
    ) -> std::io::Result<()> {
        let pacer = self.clone();
        std::thread::Builder::new()
            .name("tickbox-epoch".into())
            .spawn(move || {
                while let Some(engine) = cranelift.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    if let Some(w) = winch.get().and_then(|w| w.upgrade()) {
                        w.increment_epoch();
                    }
                    pacer.ticks.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(pacer.next_tick());
                }
            })
            .map(drop)
    }

    /// How long until the next tick.
    fn next_tick(&self) -> Duration {
        if !self.immediate && self.busy.swap(false, Ordering::Relaxed) {
            EPOCH_TICK
        } else {
            IDLE_EPOCH_TICK
        }
    }
}
