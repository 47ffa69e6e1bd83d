//! tickbox-host: the host side of the Tick protocol, without a sandbox.
//!
//! A Tick is a terminal program that speaks newline-delimited JSON-RPC on
//! stdin/stdout (the Tick protocol, version 3) while a person uses its
//! terminal. This crate is what every way of running a Tick shares:
//!
//! - [`session`] — the engine: initialization, multiplexed requests, state,
//!   violations, call outcomes;
//! - [`framing`] — async line reading over the protocol crate's framer;
//! - [`tap`] — a Tick's stream that hands each whole frame it carries to a
//!   watcher (a scenario's trace, the inspector's timeline), within a bound;
//! - [`backend`] — the [`TickIo`]/[`TickProcess`] contract every backend
//!   yields, native Ticks (a subprocess on a real PTY, [`backend::native`]),
//!   both ends in memory for tests ([`backend::memory`]), and the process
//!   hygiene native Ticks need (reaper, cgroups);
//! - [`view`] — the Tick's terminal as a screen model, parsed off the async
//!   workers, and [`render`] — what a person's terminal is shown, generated
//!   from that model;
//! - [`text`] — Tick-supplied text and its escaped ways out;
//! - [`delivery`] — subscriptions: latest state, merged counts, trimming (§6.4);
//! - [`util`] — the poison-tolerant lock and RFC 3339 timestamps;
//! - [`live`] — live instances: publishing Ticks on Unix sockets, clients
//!   (views, one-shot requests, watches) in other processes, and the state
//!   directory every part of tickbox keeps its files in.
//!
//! The session records its calls and its end into the audit handle its
//! process carries (`tickbox_telemetry::audit::Audit`); what becomes of
//! the events (lines, metrics, OpenTelemetry) is `tickbox-telemetry`'s,
//! and nothing here knows an exporter. The wasm sandbox
//! (`tickbox-sandbox`) builds on this crate; nothing here knows wasmtime,
//! MCP or scenario files. Start reading at
//! [`Session::start`].
//!
//! A native Tick, started and initialized:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_host::backend::native::{spawn, NativeSpec};
//! use tickbox_host::session::{Session, SessionConfig};
//! let io = spawn(&NativeSpec::new(["python3", "counter.py"]))?;
//! let session = Session::start(io, SessionConfig::default()).await?; // describe + read (§4.2)
//! println!("{}", session.read().await?.data); // stdout-ok: the example prints the state
//! session.shutdown().await;
//! # Ok(()) }
//! ```

pub mod backend;
pub mod delivery;
pub mod framing;
pub mod limits;
pub mod live;
pub mod places;
pub mod render;
pub mod session;
pub mod tap;
pub mod text;
pub mod throttle;
pub mod util;
pub mod view;

pub use backend::native::NativeSpec;
pub use backend::{TickIo, TickKind, TickProcess};
pub use live::{publish, PublishOptions, Published};
pub use session::{
    CallOutcome, EndReason, InitError, RequestError, Session, SessionConfig, SessionEvent,
    UnknownReason,
};
pub use view::View;
