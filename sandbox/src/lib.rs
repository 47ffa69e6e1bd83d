//! tickbox-sandbox: Ticks sandboxed in wasmtime, and the [`Launcher`] that
//! starts a Tick of either kind.
//!
//! This crate builds on `tickbox-host` (the session engine and the
//! [`TickIo`] contract) and adds what untrusted code needs: WASI components
//! and modules with nothing granted by default and every resource bounded.
//! It knows no MCP, no scenario files and no TOML: grants arrive as a
//! [`GrantSpec`] (serde) or resolved [`Grants`], from whoever read them.
//!
//! A `.wasm` Tick is either a WASI 0.2 component (`wasm32-wasip2`) or a WASI
//! preview-1 core module (`wasm32-wasip1`), told apart by the header. It runs
//! on a tokio task; its stdin and stdout are in-memory pipes carrying the
//! same protocol lines as a native Tick's, so the same [`Session`] engine
//! hosts both.
//!
//! What a guest can reach is exactly its [`grants::Grants`]; see that module
//! for the table. Where each limit is enforced:
//!
//! - **memory**: one budget per Tick ([`memory`]): the sum of its linear
//!   memories and tables stays under `max_memory`, growth past it traps with
//!   a message naming the limit, and a wasm defining more memories or tables
//!   than a Tick may have is refused before compiling;
//! - **compilation**: a size bound on the wasm, and a worker process with a
//!   deadline and a memory bound ([`compile`]);
//! - **handles**: the guest's WASI resource table is capped (`max_handles`),
//!   so open files and sockets are bounded per Tick: opening a file at the
//!   cap is the guest's error (`insufficient-memory` for a component's
//!   `open-at`, `mfile` for preview 1's `path_open`, see [`handles`]), any
//!   other full-table push traps the guest; random-bytes requests are capped at
//!   [`limits::MAX_RANDOM_BYTES`] (every bound and default is in [`limits`]);
//! - **symlinks**: creating one is refused in every grant;
//! - **CPU**: epoch interruption; a ticker thread advances the epoch every
//!   [`EPOCH_TICK`] while a guest is CPU-bound, and every guest yields to
//!   the scheduler at each tick behind the host's ready tasks ([`slices`]),
//!   so a guest that never pauses shares the runtime and cannot block the
//!   host or other Ticks. A guest stuck in a call shows up as that call's timeout;
//!   ending the session drops the guest's future at its next yield;
//! - **traps** (stack overflow, unreachable, out of bounds) end the guest's
//!   task and so its session, with a one-line reason;
//! - **output**: stdout goes through the session's line limit; stderr and
//!   drawing go into the view's fixed-size screen model.
//!
//! Where things are. The roles: [`engine`](WasmEngine) (tiers, linkers,
//! cache, compile policy; `engine.rs`), `kind.rs` (component or module),
//! `error.rs` ([`WasmError`]), `guest.rs` (a running Tick's store data),
//! `spawn.rs` (the WASI context from the grants, instantiation, the
//! process handle), [`launch`] (either kind of Tick). Each capability is
//! one place from its grant to its wiring: files (`files.rs` shadows,
//! `grant_area`, `quota`, [`handles`]), network (`net.rs`), HTTP
//! ([`http`]), terminal (`terminal.rs`), clocks and randomness
//! ([`virtual_time`]), memory ([`memory`]), CPU ([`slices`]). What each
//! may spend is [`limits`]; what each may reach, [`grants`].
//!
//! [`Session`]: tickbox_host::session::Session

pub mod cache;
pub mod compile;
pub mod compiler;
pub mod consent;
pub mod digest;
pub(crate) mod grant_area;
pub mod grants;
pub mod handles;
pub mod http;
pub(crate) mod imports;
pub mod launch;
mod launch_options;
pub mod limits;
pub mod memory;
pub(crate) mod pipe;
/// The XDG base directories, by the host crate's one rule.
pub use tickbox_host::places;
pub(crate) mod quota;
pub mod slices;
pub(crate) mod terminal;
mod time_shadows;
pub mod virtual_time;
pub mod wit_files;
#[cfg(test)]
mod wit_package;

mod engine;
mod error;
mod files;
mod guest;
mod kind;
mod net;
mod spawn;

pub use engine::*;
pub use error::*;
pub(crate) use files::*;
pub use guest::*;
pub use kind::*;
pub(crate) use net::*;
pub use spawn::*;

pub use crate::limits::{EXIT_GRACE, SLOW_COMPILE};
pub use digest::WasmDigest;
pub use grants::{GrantSpec, Grants};
pub use launch::{Launch, LaunchError, LaunchOptions, Launcher, ProcessHygiene};

use tickbox_host::backend::reaper::Reaper;
use tickbox_host::backend::MemoryCharge;
use tickbox_host::session::{BoxFuture, TickIo, TickProcess};
use tickbox_host::util::lock;
use tickbox_host::view::View;
use tickbox_protocol::limits::{INITIAL_COLS, INITIAL_ROWS, INSTANCE_ID_VAR, TERM_VALUE};

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;
use wasmtime::component::{Component, Linker as ComponentLinker, Resource, ResourceTable};
use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::bindings::filesystem::types::{self as fs_types, ErrorCode as FsErrorCode};
use wasmtime_wasi::p2::bindings::CommandPre;
// wasmtime-wasi's view of a `WasiView`'s filesystem: what the linker shadows
// hand to its `HostDescriptor` functions.
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

pub use slices::{GuestYield, EPOCH_TICK, IDLE_EPOCH_TICK};
