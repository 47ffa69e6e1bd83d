//! tickbox-runtime: the tickbox host as one crate.
//!
//! A façade over the layer crates, under the module paths the single crate
//! had before it was cut by layer, so existing users keep working:
//!
//! | path | crate |
//! |---|---|
//! | [`protocol`] | `tickbox-protocol`: the wire, limits, rule ids, validators |
//! | [`session`], [`framing`], [`tap`], [`view`], [`render`], [`text`], [`delivery`], [`live`], [`backend`] (native, memory) | `tickbox-host` |
//! | [`audit`], [`metrics`], [`otel`] | `tickbox-telemetry` |
//! | `backend::wasm`, `launch` | `tickbox-sandbox` (feature `wasm`) |
//! | `mcp` | `tickbox-mcp` (feature `wasm`) |
//! | `check`, `scenario` | `tickbox-conformance` (feature `wasm`) |
//!
//! New code can depend on the layer it needs; ARCHITECTURE.md says what
//! each promises. Open a sandboxed wasm Tick (no files, network or
//! environment granted) through a [`Launcher`], call a tool and read the
//! state:
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

/// The Tick protocol: the `tickbox-protocol` crate.
pub use tickbox_protocol as protocol;

pub use tickbox_host::{delivery, framing, live, render, session, tap, text, util, view};
pub use tickbox_telemetry::{audit, metrics, otel};

/// Ways to run a Tick: `tickbox-host`'s backends, and the sandbox as `wasm`.
pub mod backend {
    pub use tickbox_host::backend::*;
    /// Sandboxed wasm Ticks: the `tickbox-sandbox` crate.
    #[cfg(feature = "wasm")]
    pub use tickbox_sandbox as wasm;
}

/// The `tickbox-conformance` crate's checker (`tickbox check`).
#[cfg(feature = "wasm")]
pub use tickbox_conformance::check;
/// The `tickbox-conformance` crate's scenario runner (`tickbox test`).
#[cfg(feature = "wasm")]
pub use tickbox_conformance::scenario;
/// The MCP facade: the `tickbox-mcp` crate.
#[cfg(feature = "wasm")]
pub use tickbox_mcp as mcp;
/// Starting a Tick of either kind: `tickbox-sandbox`'s launcher.
#[cfg(feature = "wasm")]
pub use tickbox_sandbox::launch;

// The curated surface: what opening, using and publishing a Tick needs.
pub use tickbox_host::{
    publish, CallOutcome, EndReason, InitError, NativeSpec, PublishOptions, Published,
    RequestError, Session, SessionConfig, SessionEvent, TickIo, TickKind, TickProcess,
    UnknownReason, View,
};
pub use tickbox_protocol::{Descriptor, PreparedCall, TickState};
#[cfg(feature = "wasm")]
pub use tickbox_sandbox::{GrantSpec, Grants, LaunchError, Launcher, WasmEngine, WasmSpec};
