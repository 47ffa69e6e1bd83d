//! tickbox-host's integration tests: the session engine and the native
//! backend through the crate's public API, against real Tick processes
//! (the Python scripts in `tests/ticks/`) and in-memory Ticks.
//!
//! - `engine` — per-request faults that leave the session running,
//!   concurrency, state and catalog events, a repeat describe that reuses
//!   the compiled catalog;
//! - `live` — publishing live instances: names claimed without
//!   connecting to any instance;
//! - `native` — the native backend: PTY, environment, signals, cleanup;
//! - `writes` — what the host writes to a Tick: deadlines, whole frames
//!   under cancellation, slots held until the answer, the line limit.

mod engine;
mod live;
mod native;
mod writes;
