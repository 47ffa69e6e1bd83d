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
//! [`Session`]: tickbox_host::session::Session

pub mod cache;
pub mod compile;
pub mod compiler;
pub(crate) mod grant_area;
pub mod grants;
pub mod handles;
pub mod http;
pub(crate) mod imports;
pub mod launch;
pub mod limits;
pub mod memory;
pub(crate) mod pipe;
pub(crate) mod quota;
pub mod slices;
pub(crate) mod terminal;
pub mod virtual_time;
pub mod wit_files;
#[cfg(test)]
mod wit_package;

pub use crate::limits::{EXIT_GRACE, SLOW_COMPILE};
pub use grants::{GrantSpec, Grants};
pub use launch::{LaunchError, Launcher, ProcessHygiene};

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
/// `wasi:filesystem` `open-at` with the handle cap as the guest's error
/// (`insufficient-memory`) rather than a trap.
#[allow(clippy::type_complexity)]
fn open_at_capped(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, path_flags, path, open_flags, flags): (
        Resource<wasmtime_wasi::filesystem::Descriptor>,
        fs_types::PathFlags,
        String,
        fs_types::OpenFlags,
        fs_types::DescriptorFlags,
    ),
) -> Box<
    dyn std::future::Future<
            Output = wasmtime::Result<(
                Result<Resource<wasmtime_wasi::filesystem::Descriptor>, FsErrorCode>,
            )>,
        > + Send
        + '_,
> {
    Box::new(async move {
        let parent = fd.rep();
        let s = store.data_mut();
        // Creating a file is charged to the write quotas (see `quota`).
        let charged = match quota::charge_create(s, parent, path_flags, &path, open_flags).await {
            Ok(charged) => charged,
            Err(code) => return Ok((Err(code),)),
        };
        // Keep the reserve for the guest's short-lived handles (see `handles`).
        let cap = s.table.max_capacity();
        s.table
            .set_max_capacity(cap.saturating_sub(handles::HANDLE_RESERVE));
        let mut view = s.filesystem();
        let opened =
            fs_types::HostDescriptor::open_at(&mut view, fd, path_flags, path, open_flags, flags)
                .await;
        s.table.set_max_capacity(cap);
        if opened.is_err() {
            quota::give_back_all(&charged, quota::ENTRY_COST);
        }
        match opened {
            Ok(r) => {
                // The new descriptor writes under its parent's grant quota.
                s.grant_quotas.opened(parent, r.rep());
                Ok((Ok(r),))
            }
            Err(err) => match err.downcast() {
                Ok(code) => Ok((Err(code),)),
                Err(trap) if handles::is_table_full(&trap) => {
                    tracing::info!("a guest at its handle cap tried to open a file");
                    Ok((Err(FsErrorCode::InsufficientMemory),))
                }
                Err(trap) => Err(trap),
            },
        }
    })
}

/// `descriptor.write`, refused with `quota` past the Tick's write quota or
/// its grant's.
#[allow(clippy::type_complexity)]
fn write_metered(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    (fd, buf, offset): (
        Resource<wasmtime_wasi::filesystem::Descriptor>,
        Vec<u8>,
        u64,
    ),
) -> Box<dyn std::future::Future<Output = wasmtime::Result<(Result<u64, FsErrorCode>,)>> + Send + '_>
{
    Box::new(async move {
        let s = store.data_mut();
        let quotas = s.grant_quotas.for_write(s.quota.as_ref(), fd.rep());
        if let Err(q) = quota::take_all(&quotas, buf.len() as u64) {
            q.exceeded();
            return Ok((Err(FsErrorCode::Quota),));
        }
        let mut view = s.filesystem();
        match fs_types::HostDescriptor::write(&mut view, fd, buf, offset).await {
            Ok(n) => Ok((Ok(n),)),
            Err(err) => err.downcast().map(|code| (Err(code),)),
        }
    })
}

/// `descriptor.write-via-stream` (`offset` Some) or `append-via-stream`,
/// with the stream metered by the Tick's write quota and its grant's.
#[allow(clippy::type_complexity)]
fn stream_metered(
    mut store: wasmtime::StoreContextMut<'_, GuestState>,
    fd: Resource<wasmtime_wasi::filesystem::Descriptor>,
    offset: Option<u64>,
) -> Box<
    dyn std::future::Future<
            Output = wasmtime::Result<(
                Result<Resource<wasmtime_wasi::p2::DynOutputStream>, FsErrorCode>,
            )>,
        > + Send
        + '_,
> {
    Box::new(async move {
        let s = store.data_mut();
        let quotas = s.grant_quotas.for_write(s.quota.as_ref(), fd.rep());
        let mut view = s.filesystem();
        let opened = match offset {
            Some(o) => fs_types::HostDescriptor::write_via_stream(&mut view, fd, o),
            None => fs_types::HostDescriptor::append_via_stream(&mut view, fd),
        };
        let stream = match opened {
            Ok(r) => r,
            Err(err) => return err.downcast().map(|code| (Err(code),)),
        };
        if !quotas.is_empty() {
            // Wrap the stream in place: its table entry (and its link to
            // the descriptor) stays the same.
            let slot = s.table.get_mut(&stream)?;
            let inner =
                std::mem::replace(slot, Box::new(wasmtime_wasi::p2::pipe::ClosedOutputStream));
            *slot = Box::new(quota::QuotaStream { inner, quotas });
        }
        Ok((Ok(stream),))
    })
}

/// WASI preview 1's errno `perm` (operation not permitted).
const P1_ERRNO_PERM: i32 = 63;
/// Told the path and size of a Tick whose compile is taking a while.
type SlowCompile = Box<dyn Fn(&Path, usize) + Send + Sync>;

/// Why a wasm Tick could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WasmError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Neither a component nor a core module.
    #[error("{path} is not a wasm component or module (bad header)")]
    NotWasm { path: PathBuf },
    /// It imports something tickbox does not provide; found before
    /// compiling (see `imports.rs`).
    #[error("cannot load {path}: it imports `{import}`, which tickbox does not provide; {offer}")]
    Unsupported {
        path: PathBuf,
        import: String,
        offer: String,
    },
    /// It exports no entry point tickbox can call (`wasi:cli/run@0.2.x` for
    /// a component, `_start` for a module); found before compiling.
    #[error("cannot load {path}: it exports no `{entry}`; a Tick is a WASI command ({hint})")]
    NoEntry {
        path: PathBuf,
        entry: &'static str,
        hint: &'static str,
    },
    /// wasmtime refused to compile or link it.
    #[error("cannot load {path}: {why}")]
    Load { path: PathBuf, why: String },
    /// A grant could not be applied.
    #[error("cannot apply grants: {0}")]
    Grant(String),
    /// The engine could not be built.
    #[error("cannot start wasmtime: {0}")]
    Engine(String),
    /// The file is larger than `--max-wasm-size`.
    #[error("cannot load {path}: it is larger than --max-wasm-size ({max} bytes)")]
    TooLarge { path: PathBuf, max: u64 },
    /// It defines more memories or tables than a Tick may have.
    #[error("cannot load {path}: {why}")]
    Declares { path: PathBuf, why: String },
    /// Compiling hit a bound or failed.
    #[error("cannot compile {path}: {source}")]
    Compile {
        path: PathBuf,
        source: compile::CompileError,
    },
}

/// Which kind of wasm binary a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WasmKind {
    /// A WASI 0.2 component.
    Component,
    /// A WASI preview-1 core module.
    Module,
}

impl From<WasmKind> for tickbox_host::TickKind {
    fn from(kind: WasmKind) -> Self {
        match kind {
            WasmKind::Component => tickbox_host::TickKind::WasmComponent,
            WasmKind::Module => tickbox_host::TickKind::WasmModule,
        }
    }
}

/// Tells a component from a core module by the 8-byte header.
pub fn detect(bytes: &[u8]) -> Option<WasmKind> {
    match bytes.get(..8)? {
        [0, b'a', b's', b'm', 1, 0, 0, 0] => Some(WasmKind::Module),
        [0, b'a', b's', b'm', _, _, 1, 0] => Some(WasmKind::Component),
        _ => None,
    }
}

/// The kind of wasm a file holds, from its first 8 bytes only.
pub fn detect_file(path: &Path) -> Option<WasmKind> {
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .ok()?;
    detect(&head)
}

/// Whether a path names a wasm Tick (by extension or header).
pub fn is_wasm_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm") || detect_file(path).is_some()
}

/// Detached optimizing compiles whose worker is still being started (see
/// [`WasmEngine::optimize_in_background`]), with a condition variable that
/// [`settle_detached_starts`] waits on.
static DETACHED_STARTING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// One detached worker being started; counted in [`DETACHED_STARTING`]
/// while it lives.
struct DetachedStart;

impl DetachedStart {
    fn begin() -> DetachedStart {
        *lock(&DETACHED_STARTING.0) += 1;
        DetachedStart
    }
}

impl Drop for DetachedStart {
    fn drop(&mut self) {
        let mut n = lock(&DETACHED_STARTING.0);
        *n = n.saturating_sub(1);
        DETACHED_STARTING.1.notify_all();
    }
}

/// Waits, at most `limit`, until every detached optimizing compile this
/// process decided on has its worker started (the compiles themselves run
/// on). A one-shot command calls it before it exits, so that its first
/// start's optimized code is on its way whatever the timing; true when
/// nothing is left starting.
pub fn settle_detached_starts(limit: Duration) -> bool {
    let (starting, cv) = &DETACHED_STARTING;
    let n = lock(starting);
    let (n, _) = cv
        .wait_timeout_while(n, limit, |n| *n > 0)
        .unwrap_or_else(|p| p.into_inner());
    *n == 0
}

/// How a Tick gets compiled when the cache has no optimized code for it
/// (`$TICKBOX_COMPILER` in the CLI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompilePolicy {
    /// Winch for this start (fast), and Cranelift in a detached compile
    /// worker that writes the optimized code into the cache, where the next
    /// start finds it. Needs a compile worker and the cache; without them,
    /// this is [`CompilePolicy::Cranelift`].
    #[default]
    Tiered,
    /// Cranelift before the Tick starts (optimized code from the first run).
    Cranelift,
    /// Winch only (baseline code, never upgraded).
    Winch,
}

impl CompilePolicy {
    /// `tiered`, `cranelift` or `winch`.
    pub fn parse(s: &str) -> Option<CompilePolicy> {
        match s {
            "tiered" => Some(CompilePolicy::Tiered),
            "cranelift" => Some(CompilePolicy::Cranelift),
            "winch" => Some(CompilePolicy::Winch),
            _ => None,
        }
    }
}

/// One compiler's engine and the linkers bound to it (a store, a linker and
/// the code they use must all come from one engine).
struct Tier {
    engine: Engine,
    component_linker: ComponentLinker<GuestState>,
    module_linker: Linker<ModuleState>,
}

impl Tier {
    /// The engine for `compiler` and the linkers: the same definitions, the
    /// same shadowing, for every compiler.
    fn new(compiler: compile::Compiler) -> wasmtime::Result<Tier> {
        let engine = Engine::new(&compile::engine_config(compiler))?;
        let mut component_linker = ComponentLinker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut component_linker)?;
        // Name lookup is re-linked with a filter that only resolves granted names.
        component_linker.allow_shadowing(true);
        wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::add_to_linker::<
            GuestState,
            lookup::Filtered,
        >(&mut component_linker, lookup::filtered_view)?;
        // Creating symlinks is refused in every grant: the guest could never
        // follow one out of its preopen, but a host tool could, later.
        component_linker
            .instance("wasi:filesystem/types@0.2.12")
            .and_then(|mut fs| {
                fs.func_wrap(
                    "[method]descriptor.symlink-at",
                    |_store,
                     _args: (
                        Resource<wasmtime_wasi::filesystem::Descriptor>,
                        String,
                        String,
                    )| {
                        tracing::info!("refused a symlink creation");
                        Ok((Err::<(), FsErrorCode>(FsErrorCode::NotPermitted),))
                    },
                )
            })?;
        // A guest at its handle cap gets an error from `open-at` (where a
        // guest spends handles by itself), not the trap wasmtime-wasi makes
        // of a full table.
        component_linker
            .instance("wasi:filesystem/types@0.2.12")
            .and_then(|mut fs| {
                fs.func_wrap_async("[method]descriptor.open-at", open_at_capped)?;
                // The write quota (see `quota`).
                fs.func_wrap_async("[method]descriptor.write", write_metered)?;
                fs.func_wrap_async(
                    "[method]descriptor.write-via-stream",
                    |store, (fd, offset)| stream_metered(store, fd, Some(offset)),
                )?;
                fs.func_wrap_async("[method]descriptor.append-via-stream", |store, (fd,)| {
                    stream_metered(store, fd, None)
                })
            })?;
        // Entries a guest creates are charged, moves between grants checked.
        quota::add_to_linker(&mut component_linker)?;
        // Preopens are tied to their grant's write quota as the guest gets them.
        component_linker
            .instance("wasi:filesystem/preopens@0.2.12")
            .and_then(|mut pre| {
                pre.func_wrap("get-directories", |mut store: wasmtime::StoreContextMut<'_, GuestState>, (): ()| {
                    let s = store.data_mut();
                    let mut view = s.filesystem();
                    let dirs = wasmtime_wasi::p2::bindings::filesystem::preopens::Host::get_directories(&mut view)?;
                    for (i, (fd, guest)) in dirs.iter().enumerate() {
                        s.grant_quotas.preopened(i, fd.rep(), guest);
                    }
                    Ok((dirs,))
                })
            })
            ?;
        // Outgoing HTTP for every component; each request is checked against
        // the Tick's origin grants (see `http`), so without a grant a
        // component importing wasi:http starts and its requests are refused.
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut component_linker)?;
        // Monotonic clock and poll that follow a guest's virtual clock, if it has one.
        virtual_time::add_to_linker(&mut component_linker)?;
        component_linker.allow_shadowing(false);
        terminal::add_to_linker(&mut component_linker, |s| terminal::TermView {
            state: &mut s.term,
            table: &mut s.table,
        })?;

        let mut module_linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut module_linker, |s: &mut ModuleState| {
            &mut s.wasi
        })?;
        // The same refusal for preview 1: errno `perm`.
        module_linker.allow_shadowing(true);
        module_linker.func_wrap(
            "wasi_snapshot_preview1",
            "path_symlink",
            |_: wasmtime::Caller<'_, ModuleState>, _: i32, _: i32, _: i32, _: i32, _: i32| {
                tracing::info!("refused a symlink creation");
                P1_ERRNO_PERM
            },
        )?;
        // At the handle cap, opening a file is the guest's error (`mfile`).
        handles::add_path_open(&mut module_linker)?;
        // File timestamps from the virtual clock, for a module that has one.
        virtual_time::add_p1_to_linker(&mut module_linker)?;
        module_linker.allow_shadowing(false);
        Ok(Tier {
            engine,
            component_linker,
            module_linker,
        })
    }
}

/// The wasmtime engines, linkers and compile cache shared by all wasm Ticks
/// of one host. The Cranelift engine is built at once; the Winch engine
/// when a Tick first needs it.
pub struct WasmEngine {
    cranelift: Tier,
    /// Built on first use: a warm start never pays for it.
    winch: std::sync::OnceLock<Result<Tier, String>>,
    /// The Winch engine for the epoch ticker, once it exists.
    winch_epoch: Arc<std::sync::OnceLock<wasmtime::EngineWeak>>,
    /// How guests yield and how fast the epoch advances.
    pacer: slices::Pacer,
    /// The preview-1 functions the module linkers define, for the import check.
    preview1: imports::Preview1,
    cache: Option<cache::Cache>,
    /// Why the cache directory was refused, if it was.
    cache_refused: Option<String>,
    /// The executable that compiles under bounds (see [`compile`]); None
    /// compiles in-process.
    worker: Option<PathBuf>,
    /// Told about compiles that take longer than the duration.
    slow_compile: std::sync::OnceLock<(Duration, SlowCompile)>,
    policy: std::sync::Mutex<CompilePolicy>,
    /// Linked, ready-to-instantiate Ticks by (Cranelift) cache key: a
    /// second start of the same wasm in this host skips loading and linking
    /// altogether. A Winch-compiled entry leaves when its optimized code is
    /// in the cache, so the next start in this host loads that.
    loaded: std::sync::Mutex<std::collections::HashMap<String, Loaded>>,
    /// Keys whose optimized compile this host started and still waits for.
    optimizing: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// A Tick compiled and linked, ready to instantiate.
#[derive(Clone)]
enum Loaded {
    Component(CommandPre<GuestState>),
    Module(wasmtime::InstancePre<ModuleState>),
}

/// What [`WasmEngine::precompile`] did for one Tick.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Precompiled {
    /// The Tick's kind.
    pub kind: WasmKind,
    /// The compiler whose code is now in the cache.
    pub compiler: compile::Compiler,
    /// The cache key of the entry.
    pub key: String,
    /// Whether it was already there (nothing was compiled).
    pub cached: bool,
}

/// How a [`WasmEngine`] is built: what a library user can set, with the
/// defaults [`EngineOptions::default`] gives.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Where compiled code is kept; None turns the compile cache off
    /// (default: None; the CLI passes [`cache::default_dir`] or its override).
    pub cache_dir: Option<PathBuf>,
    /// The cache's size cap (default [`limits::DEFAULT_CACHE_MAX_BYTES`]).
    pub cache_max_bytes: u64,
    /// A `tickbox` executable to compile in, under bounds (default: None,
    /// compile in-process).
    pub worker: Option<PathBuf>,
    /// How guests yield at their slice's end (default [`GuestYield::Deferred`]).
    pub guest_yield: GuestYield,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            cache_dir: None,
            cache_max_bytes: limits::DEFAULT_CACHE_MAX_BYTES,
            worker: None,
            guest_yield: GuestYield::Deferred,
        }
    }
}

impl WasmEngine {
    /// Builds the engine; `cache_dir` None turns the compile cache off.
    /// Compiles in-process (see [`WasmEngine::with_worker`]).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Arc<WasmEngine>, WasmError> {
        WasmEngine::with_worker(cache_dir, None)
    }

    /// Builds the engine with a compile worker: `worker` is a `tickbox`
    /// executable run as `tickbox __compile-wasm` under the Tick's compile
    /// bounds. A cache directory that fails the ownership checks is not
    /// used (see [`WasmEngine::cache_refused`]).
    pub fn with_worker(
        cache_dir: Option<PathBuf>,
        worker: Option<PathBuf>,
    ) -> Result<Arc<WasmEngine>, WasmError> {
        WasmEngine::with_options(EngineOptions {
            cache_dir,
            worker,
            ..EngineOptions::default()
        })
    }

    /// Builds the engine with every option given (the CLI's way: it is the
    /// one that reads flags and the environment).
    pub fn with_options(options: EngineOptions) -> Result<Arc<WasmEngine>, WasmError> {
        let EngineOptions {
            cache_dir,
            cache_max_bytes,
            worker,
            guest_yield,
        } = options;
        let e = |x: wasmtime::Error| WasmError::Engine(format!("{x:#}"));
        let cranelift = Tier::new(compile::Compiler::Cranelift).map_err(e)?;
        let engine = &cranelift.engine;
        let module_linker = &cranelift.module_linker;
        // Listing a linker's definitions takes a store; an empty one will do.
        let preview1 = {
            let mut store = Store::new(
                engine,
                ModuleState {
                    wasi: WasiCtxBuilder::new().build_p1(),
                    limiter: memory::Budget::new(0),
                    virtual_files: false,
                },
            );
            let names: Vec<(String, String)> = module_linker
                .iter(&mut store)
                .map(|(m, n, _)| (m.to_string(), n.to_string()))
                .collect();
            imports::Preview1::new(names.iter().map(|(m, n)| (m.as_str(), n.as_str())))
        };
        let engine_hash = compile::engine_hash(engine);
        let (cache, cache_refused) = match cache_dir.map(|d| cache::Cache::open(d, engine_hash)) {
            None => (None, None),
            Some(Ok(c)) => (Some(c.with_max_bytes(cache_max_bytes)), None),
            Some(Err(err)) => {
                tracing::warn!(error = %err, "running without the compile cache");
                (None, Some(err.to_string()))
            }
        };
        // The ticker holds only weak handles: it ends with the engines.
        let weak = engine.weak();
        let winch_epoch: Arc<std::sync::OnceLock<wasmtime::EngineWeak>> = Arc::default();
        let pacer = slices::Pacer::new(guest_yield);
        pacer
            .start_ticker(weak, winch_epoch.clone())
            .map_err(|x| WasmError::Engine(x.to_string()))?;
        Ok(Arc::new(WasmEngine {
            loaded: Default::default(),
            optimizing: Default::default(),
            slow_compile: Default::default(),
            policy: Default::default(),
            cranelift,
            winch: Default::default(),
            winch_epoch,
            pacer,
            preview1,
            cache,
            cache_refused,
            worker,
        }))
    }

    /// Why the compile cache is off although a directory was given: one
    /// line for the user (the CLI prints it as a warning).
    pub fn cache_refused(&self) -> Option<&str> {
        self.cache_refused.as_deref()
    }

    /// The compile cache in use, if any.
    pub fn cache(&self) -> Option<&cache::Cache> {
        self.cache.as_ref()
    }

    /// Sets how Ticks without optimized code in the cache are compiled
    /// (default [`CompilePolicy::Tiered`]).
    pub fn set_compile_policy(&self, policy: CompilePolicy) {
        *lock(&self.policy) = policy;
    }

    /// The policy in effect: tiering needs both the worker (to outlive a
    /// one-shot command) and the cache (to hand the code to the next start).
    fn policy(&self) -> CompilePolicy {
        let p = *lock(&self.policy);
        if p == CompilePolicy::Tiered && (self.worker.is_none() || self.cache.is_none()) {
            CompilePolicy::Cranelift
        } else {
            p
        }
    }

    /// The engine and linkers of one compiler (Winch's built on first use).
    fn tier(&self, compiler: compile::Compiler) -> Result<&Tier, WasmError> {
        match compiler {
            compile::Compiler::Cranelift => Ok(&self.cranelift),
            compile::Compiler::Winch => self
                .winch
                .get_or_init(|| {
                    let tier = Tier::new(compile::Compiler::Winch).map_err(|e| format!("{e:#}"))?;
                    let _ = self.winch_epoch.set(tier.engine.weak());
                    Ok(tier)
                })
                .as_ref()
                .map_err(|e| WasmError::Engine(e.clone())),
        }
    }

    /// Sets what is called (once per compile, from a helper thread) when
    /// compiling a Tick takes longer than `after`, with its path and size,
    /// so a command can say why nothing happens yet. Only the first call has
    /// an effect.
    pub fn on_slow_compile(
        &self,
        after: Duration,
        f: impl Fn(&Path, usize) + Send + Sync + 'static,
    ) {
        let _ = self.slow_compile.set((after, Box::new(f)));
    }

    /// Runs a compile (`f`, in-process or through the worker), telling the
    /// slow-compile callback if it takes a while.
    fn noticing_slow<R>(&self, path: &Path, wasm: &[u8], f: impl FnOnce() -> R) -> R {
        let Some((after, notice)) = self.slow_compile.get() else {
            return f();
        };
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            // Ends as soon as `done` is dropped: the scope never outlives
            // the compile by more than a wakeup.
            s.spawn(move || {
                if wait.recv_timeout(*after) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                    notice(path, wasm.len());
                }
            });
            let compiled = f();
            drop(done);
            compiled
        })
    }

    /// The checks every wasm passes before anything compiles it: declared
    /// memories and tables, then imports and the entry point (refusing an
    /// import takes milliseconds, compiling a large component tens of
    /// seconds).
    fn check_before_compiling(
        &self,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
    ) -> Result<(), WasmError> {
        memory::check_declared(wasm).map_err(|why| WasmError::Declares {
            path: path.to_path_buf(),
            why,
        })?;
        imports::check(wasm, kind, &self.preview1).map_err(|r| match r {
            imports::Refusal::Import(u) => WasmError::Unsupported {
                path: path.to_path_buf(),
                import: u.import,
                offer: u.offer,
            },
            imports::Refusal::NoEntry if kind == WasmKind::Component => WasmError::NoEntry {
                path: path.to_path_buf(),
                entry: "wasi:cli/run@0.2.x",
                hint: "build against the `tick` world in tickbox's wit/",
            },
            imports::Refusal::NoEntry => WasmError::NoEntry {
                path: path.to_path_buf(),
                entry: "_start",
                hint: "build an executable, not a reactor or library",
            },
        })
    }

    /// Compiles or loads, then links, a Tick; reuses one already linked.
    fn load(
        self: &Arc<Self>,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
        bounds: compile::Bounds,
    ) -> Result<Loaded, WasmError> {
        use compile::Compiler::{Cranelift, Winch};
        let key = self.cache.as_ref().map(|c| c.key_for(wasm, Cranelift));
        if let Some(k) = &key {
            if let Some(l) = lock(&self.loaded).get(k) {
                return Ok(l.clone());
            }
        }
        self.check_before_compiling(path, wasm, kind)?;
        tracing::debug!("imports and declared limits checked");
        let loaded = match self.policy() {
            CompilePolicy::Cranelift => {
                self.code(Cranelift, path, wasm, kind, key.as_deref(), bounds, true)?
            }
            CompilePolicy::Winch => {
                let key = self.cache.as_ref().map(|c| c.key_for(wasm, Winch));
                self.code(Winch, path, wasm, kind, key.as_deref(), bounds, true)?
            }
            CompilePolicy::Tiered => {
                // The optimized code when the cache has it; else Winch's now
                // and Cranelift's in the background (the policy is Tiered
                // only with a cache, so there is a key).
                match self.code(Cranelift, path, wasm, kind, key.as_deref(), bounds, false)? {
                    Some(l) => Some(l),
                    None => {
                        let winch_key = self.cache.as_ref().map(|c| c.key_for(wasm, Winch));
                        match self.code(Winch, path, wasm, kind, winch_key.as_deref(), bounds, true)
                        {
                            Ok(l) => {
                                if let (Some(k), Some(wk)) = (&key, &winch_key) {
                                    self.optimize_in_background(path, wasm, kind, bounds, k, wk);
                                }
                                l
                            }
                            // Winch does not implement every instruction
                            // Cranelift does: what Winch refuses, Cranelift
                            // compiles now, so the compiler never changes
                            // what a guest can do. A bound that was hit
                            // (time, memory) stays an error.
                            Err(WasmError::Compile {
                                source: compile::CompileError::Invalid(why),
                                ..
                            })
                            | Err(WasmError::Load { why, .. }) => {
                                tracing::info!(%why, "winch refused the wasm; compiling with cranelift");
                                self.code(
                                    Cranelift,
                                    path,
                                    wasm,
                                    kind,
                                    key.as_deref(),
                                    bounds,
                                    true,
                                )?
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
        };
        let loaded = loaded.ok_or_else(|| WasmError::Engine("no code was produced".into()))?;
        if let Some(k) = key {
            self.loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(k, loaded.clone());
        }
        Ok(loaded)
    }

    /// Starts the detached Cranelift compile of a Tick that runs on Winch's
    /// code (see [`compile::optimize_detached`]); once in this host. When it
    /// ends, the Winch-compiled entry leaves `loaded`, so the next start in
    /// this host finds the optimized code in the cache. A failure only costs
    /// the optimized code: the Tick runs on.
    ///
    /// The worker is started from a helper thread, off the Tick's start:
    /// starting a process waits for its `exec`, a millisecond or more on
    /// an idle machine and several on a busy one, which a first start
    /// need not wait for. A one-shot command waits for that start (not
    /// the compile) before it exits: [`settle_detached_starts`].
    fn optimize_in_background(
        self: &Arc<Self>,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
        bounds: compile::Bounds,
        key: &str,
        winch_key: &str,
    ) {
        let (Some(worker), Some(cache)) = (&self.worker, &self.cache) else {
            return;
        };
        if !self
            .optimizing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string())
        {
            return;
        }
        // The wasm's copy for the worker is made here, so the thread needs
        // no copy of its own.
        let input = match compile::WorkerInput::new(wasm) {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot start the optimizing compile");
                self.end_optimizing(key, false);
                return;
            }
        };
        let weak = Arc::downgrade(self);
        let (worker, dir) = (worker.clone(), cache.dir().to_path_buf());
        let (path, owned_key, winch_key) =
            (path.to_path_buf(), key.to_string(), winch_key.to_string());
        let starting = DetachedStart::begin();
        let spawned = std::thread::Builder::new()
            .name("tickbox-optimize".into())
            .spawn(move || {
                let key = owned_key;
                let child =
                    compile::optimize_detached(&worker, input, kind, bounds, &dir, &key, &winch_key);
                drop(starting);
                let ended = |loaded: bool| {
                    if let Some(engine) = weak.upgrade() {
                        engine.end_optimizing(&key, loaded);
                    }
                };
                let mut child = match child {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot start the optimizing compile");
                        ended(false);
                        return;
                    }
                };
                tracing::info!(path = %path.display(), pid = child.id(), "optimizing compile started (cranelift, in the background)");
                // Waits for (and so reaps) the worker in a host that lives
                // that long; a one-shot command exits before and leaves it
                // to init.
                let status = child.wait();
                tickbox_host::backend::reaper::forget(child.id());
                tracing::info!(?status, "optimizing compile ended");
                ended(true);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the optimizing compile's thread");
            self.end_optimizing(key, false);
        }
    }

    /// The optimizing compile of `key` is over (or never started): another
    /// may start. After a compile that ran, the Winch-compiled entry also
    /// leaves `loaded`, so the next start finds the optimized code.
    fn end_optimizing(&self, key: &str, compiled: bool) {
        if compiled {
            self.loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(key);
        }
        self.optimizing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Loads `compiler`'s code for a Tick from the cache under `key`, or
    /// (with `compile_if_missing`) compiles it and stores it there, then
    /// links it. None: not in the cache and not asked to compile.
    #[allow(clippy::too_many_arguments)]
    fn code(
        &self,
        compiler: compile::Compiler,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
        key: Option<&str>,
        bounds: compile::Bounds,
        compile_if_missing: bool,
    ) -> Result<Option<Loaded>, WasmError> {
        // A compile that will be needed starts before the engine it loads
        // into is built, so the two overlap (a first start's Winch engine).
        let early = self.start_early(compiler, wasm, kind, key, bounds, compile_if_missing);
        if early.is_some() {
            tracing::debug!("{compiler} worker started ahead of its engine");
        }
        let tier = self.tier(compiler)?;
        let link = |why: wasmtime::Error| WasmError::Load {
            path: path.to_path_buf(),
            why: format!("{why:#}"),
        };
        let loaded = match kind {
            WasmKind::Component => self
                .compiled::<Component>(
                    tier,
                    early,
                    compiler,
                    path,
                    wasm,
                    kind,
                    key,
                    bounds,
                    compile_if_missing,
                )?
                .map(|c| c.link(tier)),
            WasmKind::Module => self
                .compiled::<Module>(
                    tier,
                    early,
                    compiler,
                    path,
                    wasm,
                    kind,
                    key,
                    bounds,
                    compile_if_missing,
                )?
                .map(|m| m.link(tier)),
        };
        loaded.transpose().map_err(link)
    }

    /// A compile worker started ahead of [`WasmEngine::tier`] when the
    /// compile is certain (asked for, not in the cache) and the engine it
    /// loads into does not exist yet; None otherwise, or when it cannot
    /// start (the ordinary path then reports why).
    fn start_early(
        &self,
        compiler: compile::Compiler,
        wasm: &[u8],
        kind: WasmKind,
        key: Option<&str>,
        bounds: compile::Bounds,
        compile_if_missing: bool,
    ) -> Option<compile::Running> {
        let worker = self.worker.as_ref()?;
        let unbuilt = compiler == compile::Compiler::Winch && self.winch.get().is_none();
        let missing = match (&self.cache, key) {
            (Some(cache), Some(key)) => !cache.contains(key),
            _ => true,
        };
        if !(compile_if_missing && unbuilt && missing) {
            return None;
        }
        compile::start_worker(worker, wasm, kind, compiler, bounds).ok()
    }

    /// Compiles a component or module, or loads it from the disk cache
    /// under `key` (None when the cache is off); `early` is a worker
    /// already started for it.
    #[allow(clippy::too_many_arguments)]
    fn compiled<T: Compiled>(
        &self,
        tier: &Tier,
        early: Option<compile::Running>,
        compiler: compile::Compiler,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
        key: Option<&str>,
        bounds: compile::Bounds,
        compile_if_missing: bool,
    ) -> Result<Option<T>, WasmError> {
        let load = |e: wasmtime::Error| WasmError::Load {
            path: path.to_path_buf(),
            why: format!("{e:#}"),
        };
        let cache = self.cache.as_ref().zip(key);
        if let Some((cache, key)) = cache {
            if let Some(entry) = cache.get(key) {
                // SAFETY: the bytes passed the MAC under this user's secret
                // key, so tickbox wrote them, from `serialize` or its own
                // worker, for this engine configuration (the key covers the
                // wasm, tickbox's version, the compatibility hash and the
                // compiler); wasmtime re-checks version and config too.
                match unsafe { T::deserialize(&tier.engine, entry.code()) } {
                    Ok(c) => {
                        tracing::info!("loaded {compiler} code from the cache");
                        return Ok(Some(c));
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "compile cache entry refused; rebuilding");
                        cache.remove(key);
                    }
                }
            }
        }
        if !compile_if_missing {
            return Ok(None);
        }
        tracing::info!(path = %path.display(), bytes = wasm.len(), "compiling with {compiler}");
        let (c, bytes) = match &self.worker {
            Some(worker) => {
                let bytes = self
                    .noticing_slow(path, wasm, || match early {
                        Some(running) => running.finish(),
                        None => compile::compile_in_worker(worker, wasm, kind, compiler, bounds),
                    })
                    .map_err(|source| WasmError::Compile {
                        path: path.to_path_buf(),
                        source,
                    })?;
                tracing::debug!(bytes = bytes.len(), "{compiler} worker done");
                // SAFETY: our own worker produced these bytes with the same
                // engine configuration, just now; wasmtime checks version
                // and configuration before using them.
                let c = unsafe { T::deserialize(&tier.engine, &bytes) }.map_err(load)?;
                tracing::debug!("{compiler} code loaded");
                (c, Some(bytes))
            }
            None => {
                let c = self
                    .noticing_slow(path, wasm, || T::compile(&tier.engine, wasm))
                    .map_err(load)?;
                let bytes = cache.and_then(|_| c.serialize().ok());
                (c, bytes)
            }
        };
        if let (Some((cache, key)), Some(bytes)) = (cache, bytes) {
            cache.put(key, &bytes);
            tracing::debug!("{compiler} code stored in the cache");
        }
        Ok(Some(c))
    }

    /// Compiles a Tick with Cranelift into the cache unless its optimized
    /// code is already there (`tickbox compile`, for CI images and
    /// installers), under the same checks and bounds as a start, and drops
    /// its baseline (Winch) entry. Needs the cache.
    pub fn precompile(
        &self,
        path: &Path,
        wasm: &[u8],
        bounds: compile::Bounds,
    ) -> Result<Precompiled, WasmError> {
        use compile::Compiler::{Cranelift, Winch};
        let kind = detect(wasm).ok_or_else(|| WasmError::NotWasm {
            path: path.to_path_buf(),
        })?;
        let cache = self.cache.as_ref().ok_or_else(|| WasmError::Load {
            path: path.to_path_buf(),
            why: "the compile cache is off, so there is nowhere to put the code".into(),
        })?;
        self.check_before_compiling(path, wasm, kind)?;
        let key = cache.key_for(wasm, Cranelift);
        let cached = cache.contains(&key);
        if !cached {
            self.code(Cranelift, path, wasm, kind, Some(&key), bounds, true)?;
        }
        cache.remove(&cache.key_for(wasm, Winch));
        Ok(Precompiled {
            kind,
            compiler: Cranelift,
            key,
            cached,
        })
    }
}

/// Compiled code of either kind, so the cache logic exists once.
trait Compiled: Sized {
    fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self>;
    fn serialize(&self) -> wasmtime::Result<Vec<u8>>;
    /// # Safety
    /// The bytes must be what `serialize` (or `Engine::precompile_*`)
    /// produced with an engine of the same configuration.
    unsafe fn deserialize(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self>;
    /// Links it with the tier's linkers, ready to instantiate.
    fn link(&self, tier: &Tier) -> wasmtime::Result<Loaded>;
}

impl Compiled for Component {
    fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self> {
        Component::new(engine, wasm)
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Component::serialize(self)
    }
    unsafe fn deserialize(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Component::deserialize(engine, bytes) }
    }
    fn link(&self, tier: &Tier) -> wasmtime::Result<Loaded> {
        tier.component_linker
            .instantiate_pre(self)
            .and_then(CommandPre::new)
            .map(Loaded::Component)
    }
}

impl Compiled for Module {
    fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self> {
        Module::new(engine, wasm)
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Module::serialize(self)
    }
    unsafe fn deserialize(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Self> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Module::deserialize(engine, bytes) }
    }
    fn link(&self, tier: &Tier) -> wasmtime::Result<Loaded> {
        tier.module_linker.instantiate_pre(self).map(Loaded::Module)
    }
}

/// What to run, and with what.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    /// The `.wasm` file.
    pub path: PathBuf,
    /// Arguments after `argv[0]` (the file name).
    pub args: Vec<String>,
    /// Everything granted.
    pub grants: Grants,
    /// `TICKLOOP_INSTANCE_ID`; when absent, a fresh one, or under virtual
    /// time the seed's ([`virtual_time::instance_id`]).
    pub instance_id: Option<String>,
    /// How long the guest may take to return by itself once its stdin is
    /// closed, before it is stopped ([`EXIT_GRACE`]).
    pub exit_grace: Duration,
}

/// Store data of a component guest.
pub struct GuestState {
    ctx: WasiCtx,
    table: ResourceTable,
    term: terminal::TermState,
    limiter: memory::Budget,
    quota: Option<quota::Quota>,
    /// The grants' own write quotas (`--dir …:max=SIZE`).
    grant_quotas: quota::GrantQuotas,
    lookup_names: Vec<String>,
    /// Virtual time and seeded randomness (`tickbox test`), or real ones.
    clock: Option<virtual_time::VirtualClock>,
    /// `wasi:http` state and the origin policy its requests go through.
    http_ctx: wasmtime_wasi_http::WasiHttpCtx,
    http_hooks: http::Hooks,
}

impl wasmtime_wasi_http::WasiHttpView for GuestState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// Store data of a preview-1 module guest.
pub struct ModuleState {
    wasi: wasmtime_wasi::p1::WasiP1Ctx,
    limiter: memory::Budget,
    /// Under virtual time: file timestamps read as its epoch.
    virtual_files: bool,
}

mod lookup {
    //! `wasi:sockets/ip-name-lookup` that only resolves granted names.
    use super::GuestState;
    use wasmtime::component::{HasData, Resource};
    use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{Host, HostResolveAddressStream};
    use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddress, Network};
    use wasmtime_wasi::p2::{DynPollable, SocketError};
    use wasmtime_wasi::sockets::WasiSocketsCtxView;

    pub struct Filtered;
    impl HasData for Filtered {
        type Data<'a> = FilteredView<'a>;
    }

    pub struct FilteredView<'a> {
        inner: WasiSocketsCtxView<'a>,
        names: &'a [String],
    }

    pub fn filtered_view(s: &mut GuestState) -> FilteredView<'_> {
        let names = &s.lookup_names;
        // Split borrows: the sockets view borrows ctx and table, the filter
        // borrows the names; all three are distinct fields.
        let inner = WasiSocketsCtxView {
            ctx: s.ctx.sockets(),
            table: &mut s.table,
        };
        FilteredView { inner, names }
    }

    impl Host for FilteredView<'_> {
        fn resolve_addresses(
            &mut self,
            network: Resource<Network>,
            name: String,
        ) -> Result<
            Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
            SocketError,
        > {
            if !self.names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
                tracing::info!(%name, "refused a name lookup that was not granted");
                return Err(ErrorCode::AccessDenied.into());
            }
            self.inner.resolve_addresses(network, name)
        }
    }

    impl HostResolveAddressStream for FilteredView<'_> {
        fn resolve_next_address(
            &mut self,
            r: Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
        ) -> Result<Option<IpAddress>, SocketError> {
            self.inner.resolve_next_address(r)
        }
        fn subscribe(
            &mut self,
            r: Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
        ) -> wasmtime::Result<Resource<DynPollable>> {
            HostResolveAddressStream::subscribe(&mut self.inner, r)
        }
        fn drop(
            &mut self,
            r: Resource<wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream>,
        ) -> wasmtime::Result<()> {
            HostResolveAddressStream::drop(&mut self.inner, r)
        }
    }

    impl wasmtime_wasi::p2::bindings::sockets::network::HostNetwork for FilteredView<'_> {
        fn drop(&mut self, this: Resource<Network>) -> wasmtime::Result<()> {
            wasmtime_wasi::p2::bindings::sockets::network::HostNetwork::drop(&mut self.inner, this)
        }
    }

    impl wasmtime_wasi::p2::bindings::sockets::network::Host for FilteredView<'_> {
        fn convert_error_code(&mut self, error: SocketError) -> wasmtime::Result<ErrorCode> {
            self.inner.convert_error_code(error)
        }
        fn network_error_code(
            &mut self,
            err: Resource<wasmtime_wasi::p2::bindings::io::error::Error>,
        ) -> wasmtime::Result<Option<ErrorCode>> {
            self.inner.network_error_code(err)
        }
    }
}

/// The guest's stderr: it goes to the view, like a native Tick's (§3.1).
#[derive(Clone)]
struct ViewStderr(Arc<View>);

impl IsTerminal for ViewStderr {
    fn is_terminal(&self) -> bool {
        true
    }
}

impl StdoutStream for ViewStderr {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(ViewWriter(self.0.clone()))
    }
}

struct ViewWriter(Arc<View>);

impl AsyncWrite for ViewWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        // Pending while the view's queue is full: the guest waits, the
        // async worker does not.
        self.0.poll_feed(cx, buf).map(Ok)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// tickbox's own state directories, which no grant may overlap: the compile
/// cache and the live-instance directory (which holds the grant area).
fn own_state(cache_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut own = Vec::new();
    own.extend(cache::default_dir());
    own.extend(cache_dir.map(Path::to_path_buf));
    if let Ok(r) = tickbox_host::live::Registry::open() {
        own.push(r.dir().to_path_buf());
    }
    own
}

/// Resolves granted names once at start, for the per-address check.
async fn resolve_names(grants: &Grants) -> Vec<(String, Vec<IpAddr>)> {
    let mut out = Vec::new();
    for name in grants.lookup_names() {
        let ips = match tokio::net::lookup_host((name.as_str(), 0)).await {
            Ok(addrs) => addrs.map(|a| a.ip()).collect(),
            Err(e) => {
                tracing::warn!(%name, error = %e, "a granted name does not resolve");
                Vec::new()
            }
        };
        out.push((name, ips));
    }
    out
}

/// Every preopen's guest path and write quota, in order (see `quota`).
type PreopenQuotas = Vec<(String, Option<quota::Quota>)>;

fn wasi_builder(
    spec: &WasmSpec,
    resolved: Vec<(String, Vec<IpAddr>)>,
    view: &Arc<View>,
    clock: Option<&virtual_time::VirtualClock>,
    cache_dir: Option<&Path>,
) -> Result<(WasiCtxBuilder, Vec<grant_area::GrantDir>, PreopenQuotas), WasmError> {
    use wasmtime_wasi::sockets::SocketAddrUse;
    let mut b = WasiCtxBuilder::new();
    let name = spec
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tick.wasm".into());
    let mut argv = vec![name];
    argv.extend(spec.args.iter().cloned());
    b.args(&argv);
    let instance = spec
        .instance_id
        .clone()
        .unwrap_or_else(tickbox_host::backend::new_instance_id);
    // Under virtual time the guest's id is the seed's, so a run is
    // reproducible; `instance` (unique) still names its grant area.
    let guest_id = match (&spec.instance_id, clock) {
        (None, Some(c)) => virtual_time::instance_id(c.seed()),
        _ => instance.clone(),
    };
    b.env(INSTANCE_ID_VAR, &guest_id);
    b.env("TERM", TERM_VALUE);
    for (k, v) in &spec.grants.env {
        b.env(k, v);
    }
    b.stderr(ViewStderr(view.clone()));
    // The host allocates what the guest asks for here: keep it small.
    b.max_random_size(limits::MAX_RANDOM_BYTES);
    let mut keep = Vec::new();
    let mut quotas = Vec::new();
    let own_state = own_state(cache_dir);
    for d in &spec.grants.dirs {
        let perms = if d.read_only {
            wasmtime_wasi::FsPerms::ReadOnly
        } else {
            wasmtime_wasi::FsPerms::ReadWrite
        };
        let meta = std::fs::metadata(&d.host)
            .map_err(|e| WasmError::Grant(format!("{}: {e}", d.host.display())))?;
        // Files too: a single-file grant of the cache's key would be as bad.
        grant_area::check_not_own_state(&d.host, &own_state).map_err(WasmError::Grant)?;
        let quota = d
            .max_write
            .map(|max| quota::Quota::named(max, &format!("--dir …::{}:max", d.guest)));
        if meta.is_dir() {
            b.preopened_dir(&d.host, &d.guest, perms)
                .map_err(|e| WasmError::Grant(format!("{}: {e:#}", d.host.display())))?;
            quotas.push((d.guest.clone(), quota));
        } else {
            // A single file: preopen a private directory that holds only
            // it, under its own name (see `grant_area`).
            let (dir, guest_dir) = grant_area::for_file(&d.host, &d.guest, d.read_only, &instance)
                .map_err(WasmError::Grant)?;
            b.preopened_dir(dir.path(), &guest_dir, perms)
                .map_err(|e| WasmError::Grant(format!("{}: {e:#}", d.host.display())))?;
            quotas.push((guest_dir.clone(), quota));
            keep.push(dir);
        }
    }
    if spec.grants.has_network() {
        let grants = Arc::new(spec.grants.clone());
        let resolved = Arc::new(resolved);
        b.allow_tcp(true)
            .allow_udp(true)
            .allow_ip_name_lookup(!spec.grants.lookup_names().is_empty());
        b.socket_addr_check(move |addr, usage| {
            let ok = match usage {
                // Implicit binds before connect/send use the wildcard address
                // and port 0; nothing else may bind, and nothing may listen.
                SocketAddrUse::TcpBind | SocketAddrUse::UdpBind => {
                    addr.ip().is_unspecified() && addr.port() == 0
                }
                SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend | SocketAddrUse::UdpReceive => {
                    grants.allows(addr, &resolved)
                }
                _ => false,
            };
            if !ok {
                tracing::info!(%addr, ?usage, "refused a socket use that was not granted");
            }
            Box::pin(async move { ok })
        });
    }
    Ok((b, keep, quotas))
}

/// Starts a wasm Tick.
pub async fn spawn(engine: &Arc<WasmEngine>, spec: &WasmSpec) -> Result<TickIo, WasmError> {
    spawn_with(engine, spec, None).await
}

/// Starts a wasm Tick whose clocks and randomness are `clock`'s (see
/// [`virtual_time`]); `None` is [`spawn`].
pub async fn spawn_with(
    engine: &Arc<WasmEngine>,
    spec: &WasmSpec,
    clock: Option<&virtual_time::VirtualClock>,
) -> Result<TickIo, WasmError> {
    let wasm = read_bounded(&spec.path, spec.grants.max_wasm_size).await?;
    tracing::debug!(bytes = wasm.len(), "wasm read");
    let kind = detect(&wasm).ok_or_else(|| WasmError::NotWasm {
        path: spec.path.clone(),
    })?;

    let (term, guest_term) = terminal::pair(INITIAL_COLS, INITIAL_ROWS);
    let view = View::new(Box::new(term));
    let (host_stdin, guest_stdin) = pipe::stdin();
    let (guest_stdout, host_stdout) = pipe::stdout();
    let resolved = resolve_names(&spec.grants).await;
    let (mut builder, keep, grant_quotas) = wasi_builder(
        spec,
        resolved,
        &view,
        clock,
        engine.cache().map(|c| c.dir()),
    )?;
    builder.stdin(guest_stdin);
    builder.stdout(guest_stdout);
    if let Some(c) = clock {
        c.install(&mut builder);
    }
    let memory = MemoryCharge::new(spec.grants.max_memory);
    let limiter = memory::Budget::charging(memory.clone());
    let http_policy =
        http::HttpPolicy::new(spec.grants.http.clone(), spec.grants.http_ca.as_deref())
            .map_err(WasmError::Grant)?;
    let max_handles = spec.grants.max_handles;
    let bounds = compile::Bounds {
        timeout: spec.grants.compile_timeout,
        memory: spec.grants.compile_memory,
    };

    // Compiling is CPU-bound (and may wait for a worker): keep it off the
    // async workers.
    let path = spec.path.clone();
    let eng = engine.clone();
    let loaded = tokio::task::spawn_blocking(move || eng.load(&path, &wasm, kind, bounds))
        .await
        .map_err(|e| WasmError::Engine(e.to_string()))??;
    let task = match loaded {
        Loaded::Component(pre) => {
            let state = GuestState {
                ctx: builder.build(),
                table: {
                    let mut t = ResourceTable::new();
                    t.set_max_capacity(max_handles);
                    t
                },
                term: guest_term(view.clone()),
                limiter,
                quota: spec.grants.max_write.map(quota::Quota::new),
                grant_quotas: quota::GrantQuotas::new(grant_quotas),
                lookup_names: spec.grants.lookup_names(),
                clock: clock.cloned(),
                http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
                http_hooks: http::Hooks::new(http_policy),
            };
            // The engine the code was made for (Cranelift's or Winch's).
            let mut store = Store::new(pre.instance_pre().engine(), state);
            store.limiter(|s| &mut s.limiter);
            engine.pacer.configure(&mut store);
            tokio::spawn(async move {
                let _keep = keep;
                let result = async {
                    let cmd = pre.instantiate_async(&mut store).await?;
                    cmd.wasi_cli_run().call_run(&mut store).await
                }
                .await;
                match result {
                    Ok(Ok(())) => "exited normally".to_string(),
                    Ok(Err(())) => "exited with an error status".to_string(),
                    Err(e) => describe_error(&e, max_handles),
                }
            })
        }
        Loaded::Module(_) if !spec.grants.http.is_empty() => {
            return Err(WasmError::Grant(
                "--allow-http needs a component (wasm32-wasip2): a preview-1 module cannot import wasi:http".into(),
            ));
        }
        Loaded::Module(_) if spec.grants.max_write.is_some() => {
            return Err(WasmError::Grant(
                "--max-write needs a component (wasm32-wasip2): a preview-1 module's writes cannot be metered".into(),
            ));
        }
        Loaded::Module(_) if spec.grants.dirs.iter().any(|d| d.max_write.is_some()) => {
            return Err(WasmError::Grant(
                "a --dir write quota (max=) needs a component (wasm32-wasip2): a preview-1 module's writes cannot be metered".into(),
            ));
        }
        Loaded::Module(pre) => {
            let mut wasi = builder.build_p1();
            wasi.ctx().table.set_max_capacity(max_handles);
            let state = ModuleState {
                wasi,
                limiter,
                virtual_files: clock.is_some(),
            };
            let mut store = Store::new(pre.module().engine(), state);
            store.limiter(|s| &mut s.limiter);
            engine.pacer.configure(&mut store);
            tokio::spawn(async move {
                let _keep = keep;
                let result = async {
                    let instance = pre.instantiate_async(&mut store).await?;
                    let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
                    start.call_async(&mut store, ()).await
                }
                .await;
                match result {
                    Ok(()) => "exited normally".to_string(),
                    Err(e) => describe_error(&e, max_handles),
                }
            })
        }
    };
    tracing::info!(path = %spec.path.display(), ?kind, "started wasm Tick");
    Ok(TickIo {
        stdin: Box::new(host_stdin),
        stdout: Box::new(host_stdout),
        view,
        process: Box::new(WasmProcess {
            task: Some(task),
            outcome: None,
            exit_grace: spec.exit_grace,
            memory,
        }),
    })
}

/// Reads a wasm file, refusing one larger than `max` bytes before reading it.
/// One blocking task does the open, the size check and the read: through
/// `tokio::fs` each of those (and each chunk) was a hop of its own to the
/// blocking pool and back, on the path of every start.
async fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, WasmError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_bounded_blocking(&owned, max))
        .await
        .map_err(|e| WasmError::Engine(e.to_string()))?
}

fn read_bounded_blocking(path: &Path, max: u64) -> Result<Vec<u8>, WasmError> {
    use std::io::Read;
    let read = |source| WasmError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let len = file.metadata().map_err(read)?.len();
    let too_large = || WasmError::TooLarge {
        path: path.to_path_buf(),
        max,
    };
    if len > max {
        return Err(too_large());
    }
    // The file may grow after the check: read at most one byte past the bound.
    let mut wasm = Vec::with_capacity(len as usize);
    file.take(max.saturating_add(1))
        .read_to_end(&mut wasm)
        .map_err(read)?;
    if wasm.len() as u64 > max {
        return Err(too_large());
    }
    Ok(wasm)
}

/// One line for how a guest ended with an error; `max_handles` is its
/// handle bound, named when the guest ran into it.
fn describe_error(e: &wasmtime::Error, max_handles: usize) -> String {
    if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return format!("exit status {}", exit.0);
    }
    // Our limiter's message, when present, is the most precise reason.
    for cause in e.chain() {
        let text = cause.to_string();
        if text.starts_with("memory limit exceeded") {
            return text;
        }
        // wasmtime-wasi traps when a guest's resource table is full.
        if text.contains("resource table has no free keys") {
            return format!(
                "handle limit exceeded: the guest holds {max_handles} WASI handles (open files, sockets, streams); --max-handles is {max_handles}"
            );
        }
    }
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        return format!("the guest trapped: {trap}");
    }
    let text = format!("{e}");
    format!(
        "the guest failed: {}",
        text.lines().next().unwrap_or("unknown error")
    )
}

/// The guest's task.
struct WasmProcess {
    task: Option<tokio::task::JoinHandle<String>>,
    outcome: Option<String>,
    exit_grace: Duration,
    memory: Arc<MemoryCharge>,
}

impl WasmProcess {
    async fn join(&mut self) -> String {
        if let Some(o) = &self.outcome {
            return o.clone();
        }
        let Some(task) = self.task.as_mut() else {
            return "stopped".into();
        };
        let o = match task.await {
            Ok(o) => o,
            Err(e) if e.is_cancelled() => "stopped by the host".into(),
            Err(_) => "the guest's task panicked".into(),
        };
        self.task = None;
        self.outcome = Some(o.clone());
        o
    }
}

impl TickProcess for WasmProcess {
    fn exited(&mut self) -> BoxFuture<'_, String> {
        Box::pin(self.join())
    }

    fn memory(&self) -> Option<Arc<MemoryCharge>> {
        Some(self.memory.clone())
    }

    fn terminate(&mut self, graceful: bool) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if graceful
                && tokio::time::timeout(self.exit_grace, self.join())
                    .await
                    .is_ok()
            {
                return;
            }
            if let Some(task) = &self.task {
                // Dropping the guest's future at its next yield (at most one
                // epoch tick away) stops it and frees its store.
                task.abort();
            }
            self.join().await;
        })
    }
}

impl Drop for WasmProcess {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod detached_start_tests {
    use super::{settle_detached_starts, DetachedStart};
    use std::time::{Duration, Instant};

    #[test]
    fn settling_waits_for_a_start_in_progress_and_no_longer() {
        let start = DetachedStart::begin();
        let t = Instant::now();
        // While it is in progress, a short wait gives up and says so.
        assert!(!settle_detached_starts(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        let ender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(start);
        });
        let t = Instant::now();
        assert!(settle_detached_starts(Duration::from_secs(20)));
        // Woken by the end of the start, not by the limit.
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        ender.join().unwrap();
    }
}
