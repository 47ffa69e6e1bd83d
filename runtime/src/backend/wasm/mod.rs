//! Sandboxed Ticks: wasm guests run in-process by wasmtime.
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
//! - **memory**: a `ResourceLimiter` refuses growth of linear memory or
//!   tables past `max_memory`, trapping with a message that names the limit;
//! - **CPU**: epoch interruption; a ticker thread advances the epoch every
//!   [`EPOCH_TICK`] and every guest yields to the scheduler at each tick, so
//!   a guest that never pauses shares the runtime and cannot block the host
//!   or other Ticks. A guest stuck in a call shows up as that call's timeout;
//!   ending the session drops the guest's future at its next yield;
//! - **traps** (stack overflow, unreachable, out of bounds) end the guest's
//!   task and so its session, with a one-line reason;
//! - **output**: stdout goes through the session's line limit; stderr and
//!   drawing go into the view's fixed-size screen model.
//!
//! [`Session`]: crate::session::Session

pub mod cache;
pub mod grants;
pub mod imports;
pub mod pipe;
pub mod terminal;
pub mod virtual_time;
#[cfg(test)]
mod wit_package;

use crate::protocol::limits::{INITIAL_COLS, INITIAL_ROWS, INSTANCE_ID_VAR, TERM_VALUE};
use crate::session::{BoxFuture, TickIo, TickProcess};
use crate::view::View;
use grants::Grants;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;
use wasmtime::component::{Component, Linker as ComponentLinker, ResourceTable};
use wasmtime::{Config, Engine, Linker, Module, ResourceLimiter, Store};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// How often the epoch advances (and a running guest yields).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);
/// How long a guest whose stdin closed may take to return by itself.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// How long a compile may run before a command says it is compiling (the
/// `after` the CLI passes to [`WasmEngine::on_slow_compile`]).
pub const SLOW_COMPILE: Duration = Duration::from_secs(1);
/// Told the path and size of a Tick whose compile is taking a while.
type SlowCompile = Box<dyn Fn(&Path, usize) + Send + Sync>;
/// Table elements counted as this many bytes against `max_memory`.
const TABLE_ELEMENT_BYTES: usize = 8;

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
    /// compiling (see [`imports`]).
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

/// The wasmtime engine, linkers and compile cache shared by all wasm Ticks of
/// one host.
pub struct WasmEngine {
    engine: Engine,
    component_linker: ComponentLinker<GuestState>,
    module_linker: Linker<ModuleState>,
    /// The preview-1 functions `module_linker` defines, for the import check.
    preview1: imports::Preview1,
    cache: Option<cache::Cache>,
    /// Told about compiles that take longer than the duration.
    slow_compile: std::sync::OnceLock<(Duration, SlowCompile)>,
    /// Linked, ready-to-instantiate Ticks by cache key: a second start of
    /// the same wasm in this host skips loading and linking altogether.
    loaded: std::sync::Mutex<std::collections::HashMap<String, Loaded>>,
}

/// A Tick compiled and linked, ready to instantiate.
#[derive(Clone)]
enum Loaded {
    Component(CommandPre<GuestState>),
    Module(wasmtime::InstancePre<ModuleState>),
}

impl WasmEngine {
    /// Builds the engine; `cache_dir` None turns the compile cache off.
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Arc<WasmEngine>, WasmError> {
        let e = |x: wasmtime::Error| WasmError::Engine(format!("{x:#}"));
        let mut cfg = Config::new();
        cfg.epoch_interruption(true);
        cfg.wasm_component_model(true);
        let engine = Engine::new(&cfg).map_err(e)?;

        let mut component_linker = ComponentLinker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut component_linker).map_err(e)?;
        // Name lookup is re-linked with a filter that only resolves granted names.
        component_linker.allow_shadowing(true);
        wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::add_to_linker::<
            GuestState,
            lookup::Filtered,
        >(&mut component_linker, lookup::filtered_view)
        .map_err(e)?;
        // Monotonic clock and poll that follow a guest's virtual clock, if it has one.
        virtual_time::add_to_linker(&mut component_linker).map_err(e)?;
        component_linker.allow_shadowing(false);
        terminal::add_to_linker(&mut component_linker, |s| terminal::TermView {
            state: &mut s.term,
            table: &mut s.table,
        })
        .map_err(e)?;

        let mut module_linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut module_linker, |s: &mut ModuleState| {
            &mut s.wasi
        })
        .map_err(e)?;
        // Listing a linker's definitions takes a store; an empty one will do.
        let preview1 = {
            let mut store = Store::new(
                &engine,
                ModuleState {
                    wasi: WasiCtxBuilder::new().build_p1(),
                    limiter: Limiter { max: 0 },
                },
            );
            let names: Vec<(String, String)> = module_linker
                .iter(&mut store)
                .map(|(m, n, _)| (m.to_string(), n.to_string()))
                .collect();
            imports::Preview1::new(names.iter().map(|(m, n)| (m.as_str(), n.as_str())))
        };

        let cache = cache_dir.map(|d| {
            cache::Cache::new(d, {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                engine.precompile_compatibility_hash().hash(&mut h);
                h.finish()
            })
        });
        // The ticker holds only a weak handle: it ends with the engine.
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("tickbox-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|x| WasmError::Engine(x.to_string()))?;
        Ok(Arc::new(WasmEngine {
            loaded: Default::default(),
            slow_compile: Default::default(),
            engine,
            component_linker,
            module_linker,
            preview1,
            cache,
        }))
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

    /// Compiles, telling the slow-compile callback if it takes a while.
    fn compile<T: Compiled>(&self, path: &Path, wasm: &[u8]) -> wasmtime::Result<T> {
        let Some((after, notice)) = self.slow_compile.get() else {
            return T::compile(&self.engine, wasm);
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
            let compiled = T::compile(&self.engine, wasm);
            drop(done);
            compiled
        })
    }

    /// Compiles or loads, then links, a Tick; reuses one already linked.
    fn load(&self, path: &Path, wasm: &[u8], kind: WasmKind) -> Result<Loaded, WasmError> {
        let link = |why: wasmtime::Error| WasmError::Load {
            path: path.to_path_buf(),
            why: format!("{why:#}"),
        };
        let key = self.cache.as_ref().map(|c| c.key(wasm));
        if let Some(k) = &key {
            if let Some(l) = self.loaded.lock().unwrap_or_else(|p| p.into_inner()).get(k) {
                return Ok(l.clone());
            }
        }
        // Before compiling: refusing an import takes milliseconds, compiling
        // a large component tens of seconds.
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
        })?;
        let loaded = match kind {
            WasmKind::Component => {
                let c: Component = self.compiled(path, wasm, key.as_deref())?;
                Loaded::Component(
                    self.component_linker
                        .instantiate_pre(&c)
                        .and_then(CommandPre::new)
                        .map_err(link)?,
                )
            }
            WasmKind::Module => {
                let m: Module = self.compiled(path, wasm, key.as_deref())?;
                Loaded::Module(self.module_linker.instantiate_pre(&m).map_err(link)?)
            }
        };
        if let Some(k) = key {
            self.loaded
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(k, loaded.clone());
        }
        Ok(loaded)
    }

    /// Compiles a component or module, or loads it from the disk cache
    /// under `key` (None when the cache is off).
    fn compiled<T: Compiled>(
        &self,
        path: &Path,
        wasm: &[u8],
        key: Option<&str>,
    ) -> Result<T, WasmError> {
        let load = |e: wasmtime::Error| WasmError::Load {
            path: path.to_path_buf(),
            why: format!("{e:#}"),
        };
        let (Some(cache), Some(key)) = (&self.cache, key) else {
            return self.compile(path, wasm).map_err(load);
        };
        if let Some(file) = cache.get(key) {
            // SAFETY: the bytes are exactly what `serialize` produced for
            // this engine configuration: the key covers the wasm, tickbox's
            // version and the engine's compatibility hash, and the checksum
            // covers the bytes. wasmtime re-checks version and config too.
            match unsafe { T::deserialize_file(&self.engine, &file) } {
                Ok(c) => return Ok(c),
                Err(err) => {
                    tracing::warn!(error = %err, "compile cache entry refused; rebuilding");
                    cache.remove(key);
                }
            }
        }
        let c: T = self.compile(path, wasm).map_err(load)?;
        if let Ok(bytes) = c.serialize() {
            cache.put(key, &bytes);
        }
        Ok(c)
    }
}

/// Compiled code of either kind, so the cache logic exists once.
trait Compiled: Sized {
    fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self>;
    fn serialize(&self) -> wasmtime::Result<Vec<u8>>;
    /// # Safety
    /// The file must hold what `serialize` produced with an engine of the
    /// same configuration.
    unsafe fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self>;
}

impl Compiled for Component {
    fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self> {
        Component::new(engine, wasm)
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Component::serialize(self)
    }
    unsafe fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Component::deserialize_file(engine, path) }
    }
}

impl Compiled for Module {
    fn compile(engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Self> {
        Module::new(engine, wasm)
    }
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        Module::serialize(self)
    }
    unsafe fn deserialize_file(engine: &Engine, path: &Path) -> wasmtime::Result<Self> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { Module::deserialize_file(engine, path) }
    }
}

/// What to run, and with what.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    /// The `.wasm` file.
    pub path: PathBuf,
    /// Arguments after argv[0] (the file name).
    pub args: Vec<String>,
    /// Everything granted.
    pub grants: Grants,
    /// `TICKLOOP_INSTANCE_ID`; a fresh one when absent.
    pub instance_id: Option<String>,
}

/// Enforces `max_memory` on linear memory and tables, and remembers a refusal
/// so the session's end reason can name the limit.
struct Limiter {
    max: usize,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            // An error (not `Ok(false)`) traps the guest with this message,
            // which then becomes the session's end reason.
            wasmtime::bail!(
                "memory limit exceeded: the guest asked to grow linear memory from {current} to {desired} bytes; --max-memory is {} bytes",
                self.max
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired.saturating_mul(TABLE_ELEMENT_BYTES) > self.max {
            wasmtime::bail!(
                "memory limit exceeded: the guest asked to grow a table from {current} to {desired} elements; --max-memory is {} bytes",
                self.max
            );
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        32
    }
    fn tables(&self) -> usize {
        32
    }
    fn memories(&self) -> usize {
        8
    }
}

/// Store data of a component guest.
pub struct GuestState {
    ctx: WasiCtx,
    table: ResourceTable,
    term: terminal::TermState,
    limiter: Limiter,
    lookup_names: Vec<String>,
    /// Virtual time and seeded randomness (`tickbox test`), or real ones.
    clock: Option<virtual_time::VirtualClock>,
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
    limiter: Limiter,
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

fn wasi_builder(
    spec: &WasmSpec,
    resolved: Vec<(String, Vec<IpAddr>)>,
    view: &Arc<View>,
) -> Result<(WasiCtxBuilder, Vec<tempdir::TempGrantDir>), WasmError> {
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
    b.env(
        INSTANCE_ID_VAR,
        spec.instance_id
            .clone()
            .unwrap_or_else(super::new_instance_id),
    );
    b.env("TERM", TERM_VALUE);
    for (k, v) in &spec.grants.env {
        b.env(k, v);
    }
    b.stderr(ViewStderr(view.clone()));
    let mut keep = Vec::new();
    for d in &spec.grants.dirs {
        let perms = if d.read_only {
            wasmtime_wasi::FsPerms::ReadOnly
        } else {
            wasmtime_wasi::FsPerms::ReadWrite
        };
        let meta = std::fs::metadata(&d.host)
            .map_err(|e| WasmError::Grant(format!("{}: {e}", d.host.display())))?;
        if meta.is_dir() {
            b.preopened_dir(&d.host, &d.guest, perms)
                .map_err(|e| WasmError::Grant(format!("{}: {e:#}", d.host.display())))?;
        } else {
            // A single file: preopen a private directory that holds only a
            // hard link to it, under the file's own name.
            let (dir, guest_dir) =
                tempdir::for_file(&d.host, &d.guest).map_err(WasmError::Grant)?;
            b.preopened_dir(dir.path(), &guest_dir, perms)
                .map_err(|e| WasmError::Grant(format!("{}: {e:#}", d.host.display())))?;
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
    Ok((b, keep))
}

mod tempdir {
    //! Private directories that expose one granted file.
    use std::path::{Path, PathBuf};

    /// Removed when the guest ends.
    pub struct TempGrantDir(PathBuf);

    impl TempGrantDir {
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempGrantDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Links `file` into a fresh 0700 directory; returns it and the guest
    /// directory path to preopen it at (the guest path's parent).
    pub fn for_file(file: &Path, guest: &str) -> Result<(TempGrantDir, String), String> {
        use std::os::unix::fs::DirBuilderExt;
        let guest_path = Path::new(guest);
        let (Some(parent), Some(fname)) = (guest_path.parent(), guest_path.file_name()) else {
            return Err(format!(
                "{guest}: a file grant needs a guest path with a file name"
            ));
        };
        let dir = std::env::temp_dir().join(format!(
            "tickbox-grant-{}-{}",
            std::process::id(),
            super::super::new_instance_id()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let dir = TempGrantDir(dir);
        // A hard link shares the file itself: writes through it reach the
        // original, and nothing else of its directory is exposed.
        std::fs::hard_link(file, dir.0.join(fname)).map_err(|e| {
            format!(
                "{}: cannot grant a single file here ({e}); grant its directory instead",
                file.display()
            )
        })?;
        let parent = parent.to_string_lossy();
        let parent = if parent.is_empty() {
            ".".to_string()
        } else {
            parent.into_owned()
        };
        Ok((dir, parent))
    }
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
    let wasm = tokio::fs::read(&spec.path)
        .await
        .map_err(|source| WasmError::Read {
            path: spec.path.clone(),
            source,
        })?;
    let kind = detect(&wasm).ok_or_else(|| WasmError::NotWasm {
        path: spec.path.clone(),
    })?;

    let (term, guest_term) = terminal::pair(INITIAL_COLS, INITIAL_ROWS);
    let view = View::new(Box::new(term));
    let (host_stdin, guest_stdin) = pipe::stdin();
    let (guest_stdout, host_stdout) = pipe::stdout();
    let resolved = resolve_names(&spec.grants).await;
    let (mut builder, keep) = wasi_builder(spec, resolved, &view)?;
    builder.stdin(guest_stdin);
    builder.stdout(guest_stdout);
    if let Some(c) = clock {
        c.install(&mut builder);
    }
    let limiter = Limiter {
        max: usize::try_from(spec.grants.max_memory).unwrap_or(usize::MAX),
    };

    // Compiling is CPU-bound: keep it off the async workers.
    let path = spec.path.clone();
    let eng = engine.clone();
    let loaded = tokio::task::spawn_blocking(move || eng.load(&path, &wasm, kind))
        .await
        .map_err(|e| WasmError::Engine(e.to_string()))??;
    let task = match loaded {
        Loaded::Component(pre) => {
            let state = GuestState {
                ctx: builder.build(),
                table: ResourceTable::new(),
                term: guest_term(view.clone()),
                limiter,
                lookup_names: spec.grants.lookup_names(),
                clock: clock.cloned(),
            };
            let mut store = Store::new(&engine.engine, state);
            store.limiter(|s| &mut s.limiter);
            store.set_epoch_deadline(1);
            store.epoch_deadline_async_yield_and_update(1);
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
                    Err(e) => describe_error(&e),
                }
            })
        }
        Loaded::Module(pre) => {
            let state = ModuleState {
                wasi: builder.build_p1(),
                limiter,
            };
            let mut store = Store::new(&engine.engine, state);
            store.limiter(|s| &mut s.limiter);
            store.set_epoch_deadline(1);
            store.epoch_deadline_async_yield_and_update(1);
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
                    Err(e) => describe_error(&e),
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
        }),
    })
}

/// One line for how a guest ended with an error.
fn describe_error(e: &wasmtime::Error) -> String {
    if let Some(exit) = e.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return format!("exit status {}", exit.0);
    }
    // Our limiter's message, when present, is the most precise reason.
    for cause in e.chain() {
        let text = cause.to_string();
        if text.starts_with("memory limit exceeded") {
            return text;
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

    fn terminate(&mut self, graceful: bool) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if graceful && tokio::time::timeout(EXIT_GRACE, self.join()).await.is_ok() {
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
