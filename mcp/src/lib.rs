//! The MCP facade: any MCP client uses hosted Ticks through one server, over
//! stdio or MCP Streamable HTTP ([`http`]).
//!
//! `tickbox mcp` starts one or more Ticks, initializes them, and serves the
//! Model Context Protocol (via the official Rust SDK, `rmcp` 3) on its own
//! stdin/stdout for as long as the client stays. It speaks MCP 2026-07-28
//! (`server/discover`, per-request metadata, `subscriptions/listen`) and the
//! `initialize` revisions 2025-11-25 and 2025-06-18
//! ([`SUPPORTED_VERSIONS`]), over its own bounded line framing
//! (`transport`). It keeps what the Tick
//! protocol guarantees: a call is bound to the catalog revision the client
//! approved, a call is never resent, and state is latest-only.
//!
//! | Tick protocol | MCP |
//! |---|---|
//! | catalog tool `NAME` | tool `NAME`, or `TICK_NAME` when several Ticks are hosted (`names`) |
//! | tool `description`, `input_schema` | `description`, `inputSchema` (`type: object` added when missing) |
//! | `mutates` | `readOnlyHint = !mutates`, `destructiveHint = mutates` |
//! | network grant ([`Grants::network`]) | `openWorldHint` |
//! | `tick/call` result | `structuredContent` (objects as is, other values as `{"result": …}`) and the JSON as text |
//! | error response | `isError` result, `{"error": {kind: "tool_error", code, message, data, executed}}`; over 512 KiB: `response_too_large` with code and `executed` kept |
//! | unknown outcome (§7.3) | `isError`, `kind: "unknown_outcome"`, `executed: null`; never retried |
//! | result over 512 KiB | `isError`, `kind: "response_too_large"` with observed and limit bytes |
//! | new `revision` | `notifications/tools/list_changed`; calls refused (`catalog_changed`) until the next `tools/list`; a catalog with names MCP cannot take (or the facade's) has its tools withheld (`names`) |
//! | title, tool descriptions | control and bidi characters escaped, length-bounded (`text`) |
//! | `notifications/cancelled` of a call waiting for its turn | answered at once: `isError`, `kind: "cancelled"`, `executed: false`; never sent (over HTTP it is never sent either, but rmcp drops the answer of any cancelled request) |
//! | `notifications/cancelled` of a sent call | ignored (a call cannot be taken back); the result says so. Over HTTP rmcp drops the answer of a cancelled request (the call still runs once) |
//! | `tick/read`, `tick/update` | resource `tick://NAME/state`, subscribable; tool `tick_state` |
//! | latest-only delivery | `notifications/resources/updated` at most once per [`DELIVERY_INTERVAL`]; `merged_updates` on read; the state is trimmed to 16 KiB by [`tickbox_host::delivery::fit`] (`trimmed` lists the cuts) |
//! | `recover_with` | named (as its MCP tool name) in the state and the resource description |
//! | the view | tool `tick_screen`: the screen as text, once, trailing blanks trimmed; optional `rows`/`cols` window |
//!
//! Where to start reading: [`Facade::new`] takes initialized
//! sessions, [`Facade::serve`] runs the MCP session of one client
//! (a [`Connection`]), `outcome` turns call outcomes into results.
//!
//! **Invariant:** the facade writes nothing but MCP frames to the writer it
//! serves on; its diagnostics go through `tracing`, which the CLI sends to
//! stderr. The CLI also points the process's own fd 1 at stderr, so no
//! stray print can reach the client.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_host::backend::native::{spawn, NativeSpec};
//! use tickbox_mcp::{Facade, Grants, HostedTick};
//! use tickbox_host::session::{Session, SessionConfig};
//! let io = spawn(&NativeSpec::new(["python3", "counter.py"]))?;
//! let session = std::sync::Arc::new(Session::start(io, SessionConfig::default()).await?);
//! let tick = HostedTick {
//!     name: "counter".into(),
//!     session: Some(session),
//!     grants: Grants::default(),
//!     per_client: None,
//!     on_first_use: None,
//! };
//! let facade = Facade::new(vec![tick]).await?;
//! facade.serve(tokio::io::stdin(), tokio::io::stdout()).await?;
//! # Ok(()) }
//! ```

pub mod catalogs;
pub(crate) mod config;
pub(crate) mod delivery;
pub mod http;
pub mod instance;
pub mod limits;
pub(crate) mod names;
pub(crate) mod outcome;
pub(crate) mod server;
pub(crate) mod text;
pub(crate) mod transport;

pub use config::{
    default_tick_name, valid_tick_name, Clients, Config, ConfigError, Grants, Instances, Start,
    TickEntry, TickSource,
};
pub use delivery::DELIVERY_INTERVAL;
pub use instance::PerClient;
pub use names::NameError;
pub use outcome::MAX_RESULT_BYTES;
pub use server::{
    state_uri, Connection, Facade, FacadeError, FacadeOptions, HostedTick, DESCRIBE_POLL,
    DESCRIBE_POLL_BACKOFF, INSTANCE_CAP, STATE_URI_PREFIX,
};
pub use transport::{MAX_FRAME_BYTES, MAX_PENDING_REQUESTS, SUPPORTED_VERSIONS};

#[cfg(test)]
mod tests;
