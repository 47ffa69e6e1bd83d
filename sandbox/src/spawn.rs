//! Starting a guest: the WASI context from its grants, instantiation, and
//! the `TickProcess` the session supervises.

use super::*;

pub(crate) fn wasi_builder(
    spec: &WasmSpec,
    resolved: Vec<(String, Vec<IpAddr>)>,
    view: &Arc<View>,
    clock: Option<&virtual_time::VirtualClock>,
    cache_dir: Option<&Path>,
    more_own_state: &[PathBuf],
    audit: Option<&tickbox_telemetry::audit::Audit>,
) -> Result<(WasiCtxBuilder, Vec<grant_area::GrantDir>, Preopens), WasmError> {
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
    let mut preopens = Vec::new();
    let own_state = own_state(cache_dir, more_own_state);
    for d in &spec.grants.dirs {
        let perms = if d.read_only {
            wasmtime_wasi::FsPerms::ReadOnly
        } else {
            wasmtime_wasi::FsPerms::ReadWrite
        };
        let meta = std::fs::metadata(&d.host).map_err(|e| {
            WasmError::Grant(GrantRefused::Path {
                path: d.host.clone(),
                why: e.to_string(),
            })
        })?;
        // Files too: a single-file grant of the cache's key would be as bad.
        grant_area::check_not_own_state(&d.host, &own_state)
            .map_err(|e| WasmError::Grant(GrantRefused::OwnState(e)))?;
        // The grant as the audit names it (a `used` event), as it was given.
        let host = d.host.display().to_string();
        let quota = d
            .max_write
            .map(|max| quota::Quota::named(max, &format!("the max= of dir {}", d.guest)))
            .map(|q| q.audited(audit.cloned()));
        if meta.is_dir() {
            b.preopened_dir(&d.host, &d.guest, perms).map_err(|e| {
                WasmError::Grant(GrantRefused::Path {
                    path: d.host.clone(),
                    why: format!("{e:#}"),
                })
            })?;
            preopens.push(quota::Preopen::new(&d.guest, quota, &host, &d.guest));
        } else {
            // A single file: preopen a private directory that holds only
            // it, under its own name (see `grant_area`).
            let (dir, guest_dir) = grant_area::for_file(&d.host, &d.guest, d.read_only, &instance)
                .map_err(|e| WasmError::Grant(GrantRefused::Area(e)))?;
            b.preopened_dir(dir.path(), &guest_dir, perms)
                .map_err(|e| {
                    WasmError::Grant(GrantRefused::Path {
                        path: d.host.clone(),
                        why: format!("{e:#}"),
                    })
                })?;
            // The name `for_file` gave it in that directory.
            let file = std::path::Path::new(&d.guest)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            preopens
                .push(quota::Preopen::new(&guest_dir, quota, &host, &d.guest).single_file(&file));
            keep.push(dir);
        }
    }
    // The address check is installed whatever the grants, and sockets may
    // be made: with TCP and UDP off, WASI refuses a socket before any
    // address reaches the host, and an attempt with no network grant at
    // all was on no record. Now every connect, send or bind comes here
    // with its address, is refused unless a grant covers it, and the
    // refusal is recorded. A guest with no grant may so hold sockets that
    // reach nothing (unconnected, or bound to the wildcard address with an
    // ephemeral port, never listening), each a handle under
    // `max_handles`.
    {
        let grants = Arc::new(spec.grants.clone());
        let resolved = Arc::new(resolved);
        let audit = audit.cloned();
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
                    match grants.narrowest(addr, &resolved) {
                        Some(grant) => {
                            if let Some(audit) = &audit {
                                audit.used(tickbox_telemetry::audit::Use::Socket {
                                    address: &addr.to_string(),
                                    allow_net: &grant.to_string(),
                                });
                            }
                            true
                        }
                        None => false,
                    }
                }
                _ => false,
            };
            if !ok {
                tracing::info!(%addr, ?usage, "refused a socket use that was not granted");
                if let Some(audit) = &audit {
                    let how = format!("{usage:?} is not covered by an allow_net grant");
                    audit.denied(
                        tickbox_telemetry::audit::DenialKind::Socket,
                        &addr.to_string(),
                        &how,
                    );
                }
            }
            Box::pin(async move { ok })
        });
    }
    Ok((b, keep, preopens))
}

/// Starts a wasm Tick.
pub async fn spawn(engine: &Arc<WasmEngine>, spec: &WasmSpec) -> Result<TickIo, WasmError> {
    spawn_with(engine, spec, None).await
}

/// Starts a wasm Tick whose clocks and randomness are `clock`'s (see
/// [`virtual_time`]); `None` is [`spawn`].
///
/// With [`WasmSpec::audit`], the instance gets its own audit session: a
/// `start` (with the SHA-256 of the very bytes compiled, every grant and
/// bound) once the file is read and known to be wasm, its denials and
/// limits, and an `end` when it cannot be started (the session records
/// the end of a started one).
pub async fn spawn_with(
    engine: &Arc<WasmEngine>,
    spec: &WasmSpec,
    clock: Option<&virtual_time::VirtualClock>,
) -> Result<TickIo, WasmError> {
    spawn_with_options(
        engine,
        spec,
        &launch_options::LaunchOptions::clock(clock.cloned()),
    )
    .await
}

/// Starts a wasm Tick with these options: its clock (see [`spawn_with`])
/// and, when given, the fixtures that answer its `wasi:http` requests
/// instead of the network ([`http::HttpFixtures`]).
pub async fn spawn_with_options(
    engine: &Arc<WasmEngine>,
    spec: &WasmSpec,
    opts: &launch_options::LaunchOptions,
) -> Result<TickIo, WasmError> {
    let audit = spec.audit.as_ref().map(|a| a.for_session());
    let started = spawn_audited(engine, spec, opts, audit.as_ref()).await;
    match (started, audit) {
        (Err(e), Some(audit)) => {
            audit.end_failed(&e.to_string());
            Err(e)
        }
        (Ok(mut io), Some(audit)) => {
            io.process = Box::new(tickbox_host::backend::Audited {
                inner: io.process,
                audit,
            });
            Ok(io)
        }
        (started, None) => started,
    }
}

async fn spawn_audited(
    engine: &Arc<WasmEngine>,
    spec: &WasmSpec,
    opts: &launch_options::LaunchOptions,
    audit: Option<&tickbox_telemetry::audit::Audit>,
) -> Result<TickIo, WasmError> {
    let clock = opts.clock.as_ref();
    let wasm = read_bounded(&spec.path, spec.grants.limits.max_wasm_size).await?;
    tracing::debug!(bytes = wasm.len(), "wasm read");
    if let Some(expected) = spec.pin {
        let actual = WasmDigest::of(&wasm);
        if actual != expected {
            return Err(WasmError::NotPinned {
                path: spec.path.clone(),
                expected,
                actual,
            });
        }
    }
    let kind = detect(&wasm).ok_or_else(|| WasmError::NotWasm {
        path: spec.path.clone(),
    })?;
    if let Some(audit) = audit {
        let backend = match kind {
            WasmKind::Component => "wasm component",
            WasmKind::Module => "wasm module",
        };
        let grants = serde_json::to_value(&spec.grants).unwrap_or_default();
        let digest = WasmDigest::of(&wasm).to_string();
        audit.start(
            &spec.path.display().to_string(),
            backend,
            Some(digest),
            grants,
        );
    }

    let (term, guest_term) = terminal::pair(INITIAL_COLS, INITIAL_ROWS);
    let view = View::new(Box::new(term));
    let (host_stdin, guest_stdin) = pipe::stdin();
    let (guest_stdout, host_stdout) = pipe::stdout();
    let resolved = resolve_names(&spec.grants).await;
    let (mut builder, keep, preopens) = wasi_builder(
        spec,
        resolved,
        &view,
        clock,
        engine.cache().map(|c| c.dir()),
        &engine.own_state,
        audit,
    )?;
    builder.stdin(guest_stdin);
    builder.stdout(guest_stdout);
    if let Some(c) = clock {
        c.install(&mut builder);
    }
    let memory = MemoryCharge::new(spec.grants.limits.max_memory);
    let limiter = memory::Budget::charging(memory.clone()).audited(audit.cloned());
    // Fixtures replace the network whole: the origin grants (and their CA
    // file) are not consulted, so nothing can reach past them.
    let http_policy = match &opts.http_fixtures {
        Some(f) => http::HttpPolicy::fixtures_only(f.clone()),
        None => http::HttpPolicy::new(spec.grants.http.clone(), spec.grants.http_ca.as_deref())
            .map_err(|e| WasmError::Grant(GrantRefused::HttpCa(e)))?,
    };
    let max_handles = spec.grants.limits.max_handles;
    let bounds = compile::Bounds {
        timeout: spec.grants.limits.compile_timeout,
        memory: spec.grants.limits.compile_memory,
    };

    // Compiling is CPU-bound (and may wait for a worker): keep it off the
    // async workers.
    let path = spec.path.clone();
    let eng = engine.clone();
    let loaded = tokio::task::spawn_blocking(move || eng.load(&path, &wasm, kind, bounds))
        .await
        .map_err(|e| WasmError::Engine {
            stage: EngineStage::Task,
            why: e.to_string(),
        })??;
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
                quota: spec
                    .grants
                    .limits
                    .max_write
                    .map(|max| quota::Quota::new(max).audited(audit.cloned())),
                grant_handles: quota::GrantHandles::new(preopens),
                lookup_names: spec
                    .grants
                    .lookup_names()
                    .into_iter()
                    .map(|name| {
                        let grant = spec.grants.naming(&name).map(|g| g.to_string());
                        (name, grant.unwrap_or_default())
                    })
                    .collect(),
                clock: clock.cloned(),
                listings: Default::default(),
                http_ctx: wasmtime_wasi_http::WasiHttpCtx::new(),
                http_hooks: http::Hooks::new(http_policy).audited(audit.cloned()),
                audit: audit.cloned(),
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
        Loaded::Module(_) if opts.http_fixtures.is_some() => {
            return Err(WasmError::Grant(GrantRefused::NeedsComponent {
                grant: "HTTP fixtures",
                why: "a preview-1 module cannot import wasi:http",
            }));
        }
        Loaded::Module(_) if !spec.grants.http.is_empty() => {
            return Err(WasmError::Grant(GrantRefused::NeedsComponent {
                grant: "allow_http",
                why: "a preview-1 module cannot import wasi:http",
            }));
        }
        Loaded::Module(_) if spec.grants.limits.max_write.is_some() => {
            return Err(WasmError::Grant(GrantRefused::NeedsComponent {
                grant: "max_write",
                why: "a preview-1 module's writes cannot be metered",
            }));
        }
        Loaded::Module(_) if spec.grants.dirs.iter().any(|d| d.max_write.is_some()) => {
            return Err(WasmError::Grant(GrantRefused::NeedsComponent {
                grant: "a dir write quota (max=)",
                why: "a preview-1 module's writes cannot be metered",
            }));
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
pub(crate) async fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, WasmError> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_bounded_blocking(&owned, max))
        .await
        .map_err(|e| WasmError::Engine {
            stage: EngineStage::Task,
            why: e.to_string(),
        })?
}

/// Reads a wasm file of at most `max` bytes (`max_wasm_size`), as a
/// start does.
pub fn read_wasm(path: &Path, max: u64) -> Result<Vec<u8>, WasmError> {
    read_bounded_blocking(path, max)
}

pub(crate) fn read_bounded_blocking(path: &Path, max: u64) -> Result<Vec<u8>, WasmError> {
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
pub(crate) fn describe_error(e: &wasmtime::Error, max_handles: usize) -> String {
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
                "handle limit exceeded: the guest holds {max_handles} WASI handles (open files, sockets, streams); max_handles is {max_handles}"
            );
        }
    }
    if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
        return format!("the guest trapped: {trap}");
    }
    // ENOMEM from a mapping: an io::Error, or rustix's errno as text.
    let out_of_memory = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOMEM))
            || c.to_string()
                .ends_with(&format!("(os error {})", libc::ENOMEM))
    });
    if out_of_memory {
        if let Some(line) = maps_exhausted(process_maps(), max_map_count()) {
            return line;
        }
    }
    let text = format!("{e}");
    format!(
        "the guest failed: {}",
        text.lines().next().unwrap_or("unknown error")
    )
}

/// How many memory mappings this process holds (`/proc/self/maps`).
fn process_maps() -> Option<usize> {
    std::fs::read_to_string("/proc/self/maps")
        .ok()
        .map(|m| m.lines().count())
}

/// The most memory mappings Linux lets one process hold.
fn max_map_count() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A failed mapping is named as the bound it ran into when the process
/// holds nearly every mapping `vm.max_map_count` allows: each wasm Tick
/// holds a few (its memory, its memory image, its stack and their guards),
/// so a host of thousands of Ticks meets this bound before it runs out of
/// memory, and "Cannot allocate memory" alone would send a person looking
/// for memory that is there.
fn maps_exhausted(maps: Option<usize>, max: Option<usize>) -> Option<String> {
    let (maps, max) = (maps?, max?);
    (maps.saturating_mul(10) >= max.saturating_mul(9)).then(|| {
        format!(
            "cannot map the guest's memory: this process holds {maps} of the {max} memory mappings Linux allows one process (vm.max_map_count); each wasm Tick holds about {MAPS_PER_TICK}: raise vm.max_map_count or host fewer Ticks in one process"
        )
    })
}

/// Memory mappings one idle wasm Tick holds, as counted in
/// `/proc/PID/maps` of a host of 1,000: its linear memory with its guard,
/// the copy-on-write image of its initial memory, its stack with its guard
/// page, and its tables.
const MAPS_PER_TICK: usize = 7;

/// The guest's task.
pub(crate) struct WasmProcess {
    pub(crate) task: Option<tokio::task::JoinHandle<String>>,
    pub(crate) outcome: Option<String>,
    pub(crate) exit_grace: Duration,
    pub(crate) memory: Arc<MemoryCharge>,
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
mod tests {
    use super::maps_exhausted;

    #[test]
    fn a_failed_mapping_near_the_map_count_names_the_bound() {
        let line = maps_exhausted(Some(65_000), Some(65_530)).expect("named");
        assert!(line.contains("vm.max_map_count"), "{line}");
        assert!(line.contains("65000 of the 65530"), "{line}");
        // Controls: far below the bound, or the counts unknown, it is not
        // this bound, and the error is told as it came.
        assert_eq!(maps_exhausted(Some(7_000), Some(65_530)), None);
        assert_eq!(maps_exhausted(None, Some(65_530)), None);
        assert_eq!(maps_exhausted(Some(65_000), None), None);
    }
}
