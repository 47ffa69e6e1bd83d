//! tickbox-host's integration tests: the session engine and the native
//! backend through the crate's public API, against real Tick processes
//! (the Python scripts in `tests/ticks/`) and in-memory Ticks.
//!
//! - `delivery` — subscriptions: a burst as a few merged latest-state
//!   deliveries, a wide state trimmed to the budget;
//! - `engine` — per-request faults that leave the session running,
//!   concurrency, state and catalog events, a repeat describe that reuses
//!   the compiled catalog;
//! - `live` — publishing live instances: names claimed without
//!   connecting to any instance, one winner of a race for a name, peers
//!   of another uid refused, a call too long for the Tick's line refused,
//!   a stale socket removed by a listing, a taken registry directory in
//!   the shared temp dir replaced by a private one;
//! - `native` — the native backend: PTY, environment, signals, cleanup,
//!   keys typed while a Tick starts kept;
//! - `writes` — what the host writes to a Tick: deadlines, whole frames
//!   under cancellation, slots held until the answer, the line limit.

mod delivery;
mod engine;
mod live;
mod native;
mod writes;
