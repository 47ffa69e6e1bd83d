//! The engine: one wasmtime `Engine` per compiler tier, the linkers, the
//! compile cache and worker, compile policy, and loading a Tick to the
//! point where it can be instantiated.

use super::*;

/// The detached work of one engine still under way: optimizing compiles
/// whose worker is being started (see [`WasmEngine::optimize_in_background`])
/// and baseline code being written to the cache (`put_detached`), and the
/// condition variable [`WasmEngine::settle_detached_starts`] waits on;
/// shared with the threads that do it.
#[derive(Debug, Default)]
pub(crate) struct DetachedStarts {
    starting: std::sync::Mutex<usize>,
    changed: std::sync::Condvar,
}

impl DetachedStarts {
    /// Waits, at most `limit`, until no start is in progress; true when
    /// none is left.
    fn settle(&self, limit: Duration) -> bool {
        let n = lock(&self.starting);
        let (n, _) = self
            .changed
            .wait_timeout_while(n, limit, |n| *n > 0)
            .unwrap_or_else(|p| p.into_inner());
        *n == 0
    }
}

/// One detached worker being started; counted in its engine's
/// [`DetachedStarts`] while it lives.
pub(crate) struct DetachedStart(Arc<DetachedStarts>);

impl DetachedStart {
    fn begin(starts: &Arc<DetachedStarts>) -> DetachedStart {
        *lock(&starts.starting) += 1;
        DetachedStart(starts.clone())
    }
}

impl Drop for DetachedStart {
    fn drop(&mut self) {
        let mut n = lock(&self.0.starting);
        *n = n.saturating_sub(1);
        self.0.changed.notify_all();
    }
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
pub(crate) struct Tier {
    pub(crate) engine: Engine,
    pub(crate) component_linker: ComponentLinker<GuestState>,
    pub(crate) module_linker: Linker<ModuleState>,
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
        files::add_entry_shadows(&mut component_linker)?;
        // The other calls that reach a grant, so its use is recorded.
        files::add_use_notes(&mut component_linker)?;
        // Preopens are tied to their grant's write quota as the guest gets them.
        component_linker
            .instance("wasi:filesystem/preopens@0.2.12")
            .and_then(|mut pre| {
                pre.func_wrap("get-directories", |mut store: wasmtime::StoreContextMut<'_, GuestState>, (): ()| {
                    let s = store.data_mut();
                    let mut view = s.filesystem();
                    let dirs = wasmtime_wasi::p2::bindings::filesystem::preopens::Host::get_directories(&mut view)?;
                    for (i, (fd, guest)) in dirs.iter().enumerate() {
                        s.grant_handles.preopened(i, fd.rep(), guest);
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
        time_shadows::add_to_linker(&mut component_linker)?;
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
        time_shadows::add_p1_to_linker(&mut module_linker)?;
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
    pub(crate) cranelift: Tier,
    /// Built on first use: a warm start never pays for it.
    pub(crate) winch: std::sync::OnceLock<Result<Tier, String>>,
    /// The Winch engine for the epoch ticker, once it exists.
    pub(crate) winch_epoch: Arc<std::sync::OnceLock<wasmtime::EngineWeak>>,
    /// How guests yield and how fast the epoch advances.
    pub(crate) pacer: slices::Pacer,
    /// The preview-1 functions the module linkers define, for the import check.
    pub(crate) preview1: imports::Preview1,
    pub(crate) cache: Option<Arc<cache::Cache>>,
    /// Why the cache directory was refused, if it was.
    pub(crate) cache_refused: Option<String>,
    /// The executable that compiles under bounds (see [`compile`]); None
    /// compiles in-process.
    pub(crate) worker: Option<PathBuf>,
    /// More of tickbox's own state no grant may overlap ([`EngineOptions::own_state`]).
    pub(crate) own_state: Vec<PathBuf>,
    /// Told about compiles that take longer than the duration.
    pub(crate) slow_compile: std::sync::OnceLock<(Duration, SlowCompile)>,
    pub(crate) policy: std::sync::Mutex<CompilePolicy>,
    /// Linked, ready-to-instantiate Ticks by (Cranelift) cache key, or
    /// without a cache by the wasm's digest ([`WasmEngine::memo_key`]): a
    /// second start of the same wasm in this host skips loading and linking
    /// altogether, so the Ticks of one component share one compiled code.
    /// A Winch-compiled entry leaves when its optimized code is in the
    /// cache, so the next start in this host loads that.
    pub(crate) loaded: std::sync::Mutex<std::collections::HashMap<String, Loaded>>,
    /// One gate per key being loaded: Ticks of one component started
    /// together wait for the first one's compile instead of each compiling.
    pub(crate) loading:
        std::sync::Mutex<std::collections::HashMap<String, Arc<std::sync::Mutex<()>>>>,
    /// Compiles this engine ran (in-process or in its worker), the
    /// background optimizing compiles excepted.
    pub(crate) compiles: std::sync::atomic::AtomicU64,
    /// Keys whose optimized compile this host started and still waits for.
    pub(crate) optimizing: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Detached optimizing compiles whose worker is being started.
    pub(crate) detached: Arc<DetachedStarts>,
    /// Where compile workers are registered as this process's own children
    /// ([`EngineOptions::reaper`]).
    pub(crate) reaper: Option<Reaper>,
}

/// A Tick compiled and linked, ready to instantiate.
#[derive(Clone)]
pub(crate) enum Loaded {
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
    /// More of tickbox's own state that no grant may overlap, beyond the
    /// default places (e.g. a trust store moved elsewhere; default: none).
    pub own_state: Vec<PathBuf>,
    /// The process's subreaper bookkeeping, when it is a subreaper: every
    /// compile worker is registered in it, so a sweep never takes one for
    /// an orphan (default: none; the process must then not sweep).
    pub reaper: Option<Reaper>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            cache_dir: None,
            cache_max_bytes: limits::DEFAULT_CACHE_MAX_BYTES,
            worker: None,
            guest_yield: GuestYield::Deferred,
            own_state: Vec::new(),
            reaper: None,
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
            own_state,
            reaper,
        } = options;
        let e = |x: wasmtime::Error| WasmError::Engine {
            stage: EngineStage::Build,
            why: format!("{x:#}"),
        };
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
            .map_err(|x| WasmError::Engine {
                stage: EngineStage::Pacer,
                why: x.to_string(),
            })?;
        Ok(Arc::new(WasmEngine {
            loaded: Default::default(),
            loading: Default::default(),
            compiles: Default::default(),
            optimizing: Default::default(),
            slow_compile: Default::default(),
            policy: Default::default(),
            cranelift,
            winch: Default::default(),
            winch_epoch,
            pacer,
            preview1,
            cache: cache.map(Arc::new),
            cache_refused,
            worker,
            own_state,
            detached: Default::default(),
            reaper,
        }))
    }

    /// Waits, at most `limit`, until every detached optimizing compile this
    /// engine decided on has its worker started (the compiles themselves
    /// run on) and every baseline code it is storing is stored. A one-shot
    /// command calls it before it exits, so that its first start's code is
    /// cached or on its way whatever the timing; true when nothing is left.
    pub fn settle_detached_starts(&self, limit: Duration) -> bool {
        self.detached.settle(limit)
    }

    /// Stores a tiered first start's baseline code in the cache on a
    /// thread of its own, while the Tick starts: the MAC over tens of MB of
    /// code and the write took a sixth of a large component's first start.
    /// It counts as a detached start, so a one-shot command waits for it
    /// before it exits ([`WasmEngine::settle_detached_starts`]). Only for
    /// tiered starts: should the write not land, the optimized code the
    /// detached compile stores serves the next start anyway. (That compile
    /// also removes this entry when it lands; it takes seconds where the
    /// write takes a fraction of one, and an entry left behind is only
    /// cache space, evicted like any other.)
    fn put_detached(&self, cache: &Arc<cache::Cache>, key: &str, bytes: Vec<u8>) {
        let starting = DetachedStart::begin(&self.detached);
        let (cache, key) = (cache.clone(), key.to_string());
        let spawned = std::thread::Builder::new()
            .name("tickbox-cache-put".into())
            .spawn(move || {
                cache.put(&key, &bytes);
                tracing::debug!("winch code stored in the cache");
                drop(starting);
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no thread to store the baseline code; it is not cached");
        }
    }

    /// Why the compile cache is off although a directory was given: one
    /// line for the user (the CLI prints it as a warning).
    pub fn cache_refused(&self) -> Option<&str> {
        self.cache_refused.as_deref()
    }

    /// The compile cache in use, if any.
    pub fn cache(&self) -> Option<&cache::Cache> {
        self.cache.as_deref()
    }

    /// How many compiles this engine has run for Ticks' starts (in-process
    /// or in its compile worker; the background optimizing compiles of
    /// [`CompilePolicy::Tiered`] are not counted). Starting many Ticks of
    /// one component compiles it at most once.
    pub fn compiles(&self) -> u64 {
        self.compiles.load(std::sync::atomic::Ordering::Relaxed)
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
                .map_err(|e| WasmError::Engine {
                    stage: EngineStage::Build,
                    why: e.clone(),
                }),
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
    pub(crate) fn load(
        self: &Arc<Self>,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
        bounds: compile::Bounds,
    ) -> Result<Loaded, WasmError> {
        use compile::Compiler::Cranelift;
        let key = self.cache.as_ref().map(|c| c.key_for(wasm, Cranelift));
        let memo = key.clone().unwrap_or_else(|| self.memo_key(wasm));
        if let Some(l) = lock(&self.loaded).get(&memo) {
            return Ok(l.clone());
        }
        // One load per component at a time: the others wait for it here,
        // then find its code in `loaded`.
        let gate = lock(&self.loading).entry(memo.clone()).or_default().clone();
        let _turn = lock(&gate);
        if let Some(l) = lock(&self.loaded).get(&memo) {
            return Ok(l.clone());
        }
        let loaded = self.load_uncached(path, wasm, kind, bounds, key);
        if let Ok(l) = &loaded {
            lock(&self.loaded).insert(memo.clone(), l.clone());
        }
        // Waiters still hold the gate's Arc; a later start finds `loaded`
        // (or, after a failure, tries again under a new gate).
        lock(&self.loading).remove(&memo);
        loaded
    }

    /// The key of a Tick's code in `loaded` when there is no cache (and so
    /// no cache key): its digest and the compiler the policy picks.
    fn memo_key(&self, wasm: &[u8]) -> String {
        use sha2::{Digest, Sha256};
        let compiler = match self.policy() {
            CompilePolicy::Winch => compile::Compiler::Winch,
            CompilePolicy::Tiered | CompilePolicy::Cranelift => compile::Compiler::Cranelift,
        };
        let digest = Sha256::digest(wasm);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}-{compiler}-uncached")
    }

    /// [`WasmEngine::load`] past the in-memory memo: checks, then loads
    /// from the cache or compiles per the policy.
    fn load_uncached(
        self: &Arc<Self>,
        path: &Path,
        wasm: &[u8],
        kind: WasmKind,
        bounds: compile::Bounds,
        key: Option<String>,
    ) -> Result<Loaded, WasmError> {
        use compile::Compiler::{Cranelift, Winch};
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
        loaded.ok_or_else(|| WasmError::Engine {
            stage: EngineStage::NoCode,
            why: "the compile reported success".into(),
        })
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
    /// the compile) before it exits: [`WasmEngine::settle_detached_starts`].
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
        // One attempt per key in OPTIMIZE_RETRY_AFTER, whichever host made
        // it and however it ended: the code it made is found by the next
        // start, and one that failed is not paid for again at every start.
        if !attempt_optimizing(cache, key) {
            tracing::debug!(path = %path.display(), "an optimizing compile of this Tick started recently; it runs on its baseline code");
            self.end_optimizing(key, false);
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
        let reaper = self.reaper.clone();
        let starting = DetachedStart::begin(&self.detached);
        let spawned = std::thread::Builder::new()
            .name("tickbox-optimize".into())
            .spawn(move || {
                let key = owned_key;
                let child = compile::optimize_detached(
                    reaper.as_ref(),
                    &worker,
                    input,
                    kind,
                    bounds,
                    &dir,
                    &key,
                    &winch_key,
                );
                let ended = |loaded: bool| {
                    if let Some(engine) = weak.upgrade() {
                        engine.end_optimizing(&key, loaded);
                    }
                };
                // The start is over once it is logged, not before: a
                // one-shot command waits for `starting` and then exits, so
                // the line that says how it went must already be out.
                let mut child = match child {
                    Ok(c) => {
                        tracing::info!(path = %path.display(), pid = c.id(), "optimizing compile started (cranelift, in the background)");
                        drop(starting);
                        c
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot start the optimizing compile");
                        drop(starting);
                        ended(false);
                        return;
                    }
                };
                // Waits for (and so reaps) the worker in a host that lives
                // that long; a one-shot command exits before and leaves it
                // to init.
                let status = child.wait();
                tickbox_host::backend::reaper::forget(reaper.as_ref(), child.id());
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
        compile::start_worker(self.reaper.as_ref(), worker, wasm, kind, compiler, bounds).ok()
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
        self.compiles
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (c, bytes) = match &self.worker {
            Some(worker) => {
                let bytes = self
                    .noticing_slow(path, wasm, || match early {
                        Some(running) => running.finish(),
                        None => compile::compile_in_worker(
                            self.reaper.as_ref(),
                            worker,
                            wasm,
                            kind,
                            compiler,
                            bounds,
                        ),
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
            if compiler == compile::Compiler::Winch && self.policy() == CompilePolicy::Tiered {
                self.put_detached(cache, key, bytes);
            } else {
                cache.put(key, &bytes);
                tracing::debug!("{compiler} code stored in the cache");
            }
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
pub(crate) trait Compiled: Sized {
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

#[cfg(test)]
mod detached_start_tests {
    use super::{DetachedStart, DetachedStarts};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn settling_waits_for_a_start_in_progress_and_no_longer() {
        let starts = Arc::new(DetachedStarts::default());
        let start = DetachedStart::begin(&starts);
        // Another engine's starts are its own: nothing to wait for there.
        assert!(DetachedStarts::default().settle(Duration::ZERO));
        let t = Instant::now();
        // While it is in progress, a short wait gives up and says so.
        assert!(!starts.settle(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        let ender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(start);
        });
        let t = Instant::now();
        assert!(starts.settle(Duration::from_secs(20)));
        // Woken by the end of the start, not by the limit.
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        ender.join().unwrap();
    }
}

/// Records in `cache` that a background optimizing compile of `key`
/// starts now, unless one started less than
/// [`OPTIMIZE_RETRY_AFTER`](crate::limits::OPTIMIZE_RETRY_AFTER) ago
/// (false then). The record is a cache entry of its own (MAC-checked like
/// every entry, so nobody else's file can stop a compile).
fn attempt_optimizing(cache: &crate::cache::Cache, key: &str) -> bool {
    let record = cache.key_of("optimizing", &[key.as_bytes()]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let started = cache
        .get_within(&record, 32)
        .and_then(|e| std::str::from_utf8(e.code()).ok()?.parse::<u64>().ok());
    if started
        .is_some_and(|at| now.saturating_sub(at) < crate::limits::OPTIMIZE_RETRY_AFTER.as_secs())
    {
        return false;
    }
    cache.put(&record, now.to_string().as_bytes());
    true
}

#[cfg(test)]
mod optimize_attempt_tests {
    #[test]
    fn one_optimizing_compile_per_tick_and_retry_interval_in_all_hosts_sharing_a_cache() {
        let dir =
            std::env::temp_dir().join(format!("tickbox-optimize-attempt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = crate::cache::Cache::open(dir.clone(), 1).unwrap();
        assert!(super::attempt_optimizing(&cache, "tick-a"), "the first");
        assert!(
            !super::attempt_optimizing(&cache, "tick-a"),
            "again, at once"
        );
        // Another host opening the same cache sees the attempt too.
        let other = crate::cache::Cache::open(dir.clone(), 1).unwrap();
        assert!(!super::attempt_optimizing(&other, "tick-a"));
        // Positive control: another Tick's compile is its own.
        assert!(super::attempt_optimizing(&other, "tick-b"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
