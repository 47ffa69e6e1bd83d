//! tickbox-runtime: the host side of the Tick protocol.
//!
//! A Tick is a terminal program that speaks newline-delimited JSON-RPC on
//! stdin/stdout (the Tick protocol, version 3) while a person uses its
//! terminal. This crate hosts Ticks:
//!
//! - [`protocol`] — message types, limits and the validation rules of the spec;
//! - [`framing`] — async line reading over the protocol crate's framer;
//! - [`session`] — the engine: initialization, multiplexed requests, state,
//!   violations, call outcomes;
//! - [`launch`] — the [`Launcher`]: a Tick (native command line or wasm
//!   file with its grants) ready to be started as often as needed;
//! - [`backend`] — ways to run a Tick (a native subprocess on a real PTY, a
//!   sandboxed wasm guest, or both ends in memory for tests) and the
//!   [`TickIo`]/[`TickProcess`] contract they share;
//! - [`view`] — the Tick's terminal as a screen model, parsed off the async
//!   workers, and [`render`] — what a person's terminal is shown, generated
//!   from that model;
//! - [`text`] — Tick-supplied text made safe for a terminal;
//! - [`delivery`] — subscriptions: latest state, merged counts, trimming (§6.4);
//! - [`live`] — live instances: publishing Ticks on Unix sockets, and clients
//!   (views, one-shot requests, watches) in other processes;
//! - [`mcp`] — the MCP facade: hosted Ticks served to any MCP client;
//! - [`check`] — `tickbox check`: examines a Tick against every Tick-side rule;
//! - [`scenario`] — `tickbox test`: scenario files (calls, keys, virtual
//!   time, state and screen expectations) run against fresh instances.
//!
//! The protocol's rules themselves (envelope, limits, framing, validators
//! with rule ids) are the `tickbox-protocol` crate, re-exported as
//! [`protocol`]. Start reading at [`Session::start`]; the most used types are
//! re-exported at the crate root.
//!
//! Open a sandboxed wasm Tick (no files, network or environment granted)
//! through a [`Launcher`], call a tool and read the state:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_runtime::{CallOutcome, Grants, Launcher, SessionConfig, WasmEngine};
//! let engine = WasmEngine::new(None)?; // no compile cache
//! let launcher = Launcher::wasm(engine, "counter.wasm".into(), Grants::default())?;
//! let session = launcher.open(SessionConfig::default()).await?; // describe + read (§4.2)
//! let catalog = session.descriptor().expect("initialized");
//! let call = catalog.prepare("increment", serde_json::json!({"amount": 2}))?;
//! match session.call(&call).await {
//!     CallOutcome::Ok(result) => println!("{result}"), // stdout-ok: the example prints its result
//!     CallOutcome::Failed { error, executed } => eprintln!("{} (executed: {executed})", error.message),
//!     CallOutcome::Unknown(why) => eprintln!("unknown outcome, never retried: {why}"),
//! }
//! println!("{}", session.read().await?.data); // stdout-ok: the example prints the state
//! session.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! A native Tick is the same with [`Launcher::native`], and a test can
//! run the engine with no process at all over [`backend::memory::pair`].

pub mod backend;
pub mod check;
pub mod delivery;
pub mod framing;
pub mod launch;
pub mod live;
#[cfg(feature = "wasm")]
pub mod mcp;
pub mod render;
#[cfg(feature = "wasm")]
pub mod scenario;
pub mod session;
pub mod text;
pub mod view;

/// The Tick protocol: the `tickbox-protocol` crate, re-exported.
pub use tickbox_protocol as protocol;

// The curated surface: what opening, using and publishing a Tick needs.
pub use backend::native::NativeSpec;
#[cfg(feature = "wasm")]
pub use backend::wasm::grants::{GrantSpec, Grants};
#[cfg(feature = "wasm")]
pub use backend::wasm::{WasmEngine, WasmSpec};
pub use backend::{TickIo, TickProcess};
pub use launch::{LaunchError, Launcher};
pub use live::{publish, PublishOptions, Published};
pub use protocol::{Descriptor, PreparedCall, TickState};
pub use session::{
    CallOutcome, EndReason, InitError, RequestError, Session, SessionConfig, SessionEvent,
    UnknownReason,
};
pub use view::View;
