//! tickbox-runtime: the host side of the Tick protocol.
//!
//! A Tick is a terminal program that speaks newline-delimited JSON-RPC on
//! stdin/stdout (the Tick protocol, version 3) while a person uses its
//! terminal. This crate hosts Ticks:
//!
//! - [`protocol`] — message types, limits and the validation rules of the spec;
//! - [`framing`] — newline framing with the line limit;
//! - [`session`] — the engine: initialization, multiplexed requests, state,
//!   violations, call outcomes;
//! - [`backend`] — ways to run a Tick: a native subprocess on a real PTY, or a
//!   sandboxed wasm guest;
//! - [`view`] — the Tick's terminal as a screen model, parsed off the async
//!   workers, and [`render`] — what a person's terminal is shown, generated
//!   from that model;
//! - [`text`] — Tick-supplied text made safe for a terminal;
//! - [`delivery`] — subscriptions: latest state, merged counts, trimming (§6.4);
//! - [`live`] — live instances: publishing Ticks on Unix sockets, and clients
//!   (views, one-shot requests, watches) in other processes;
//! - [`mcp`] — the MCP facade: hosted Ticks served to any MCP client;
//! - [`check`] — `tickbox check`: examines a Tick against every Tick-side rule.
//!
//! Start reading at [`session::Session::start`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_runtime::backend::native::{NativeSpec, spawn};
//! use tickbox_runtime::session::{Session, SessionConfig, CallOutcome};
//! let io = spawn(&NativeSpec::new(["python3", "note.py"]))?;
//! let session = Session::start(io, SessionConfig::default()).await?;
//! let catalog = session.descriptor().expect("initialized");
//! let call = catalog.prepare("set_note", serde_json::json!({"text": "hi"}))?;
//! if let CallOutcome::Ok(result) = session.call(&call).await {
//!     println!("{result}"); // stdout-ok: the example prints its result
//! }
//! session.shutdown().await;
//! # Ok(()) }
//! ```

pub mod backend;
pub mod check;
pub mod delivery;
pub mod framing;
pub mod live;
pub mod mcp;
pub mod protocol;
pub mod render;
pub mod session;
pub mod text;
pub mod view;
