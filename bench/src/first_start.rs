//! First starts (empty compile cache) by compiler, and whole-process starts.
//!
//! - **First start**: a fresh cache directory and a fresh `WasmEngine` with
//!   the `tickbox` binary as its compile worker (the CLI's set-up) per
//!   sample, from spawn to an initialized session. *Tiered* (the default)
//!   compiles with Winch for the start and starts the detached Cranelift
//!   compile; the sample then waits for that compile's entry to land (its
//!   time is the *optimized code ready* row) so samples never overlap.
//!   *Cranelift* compiles optimized code before the start (the old way).
//! - **Process**: whole `tickbox read TICK` processes, wall time, the
//!   variants interleaved run by run so drift hits them alike.

use crate::Stat;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_runtime::backend::wasm::compile::Compiler;
use tickbox_runtime::backend::wasm::{self, grants::Grants, CompilePolicy, WasmEngine, WasmSpec};
use tickbox_runtime::session::{Session, SessionConfig};

/// Starts a wasm Tick and initializes its session.
pub async fn start_wasm(engine: &Arc<WasmEngine>, path: &Path) -> Result<Session> {
    let spec = WasmSpec {
        path: path.to_path_buf(),
        args: vec![],
        grants: Grants::default(),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    };
    let io = wasm::spawn(engine, &spec).await?;
    Ok(Session::start(io, SessionConfig::default()).await?)
}

/// CPU seconds of this process and its waited-for children (the compile
/// workers) so far: on a loaded machine a steadier figure than wall time.
fn cpu_with_children() -> f64 {
    let get = |who| {
        // SAFETY: getrusage writes into the struct we pass and nothing else.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut u) };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    };
    get(libc::RUSAGE_SELF) + get(libc::RUSAGE_CHILDREN)
}

/// What [`first_starts`] measured.
pub struct FirstStarts {
    /// Wall time from spawn to an initialized session, ms.
    pub wall: Stat,
    /// CPU time of the host and its compile worker over the same span, ms.
    pub cpu: Stat,
    /// Tiered only: seconds from the start until the optimized code was in
    /// the cache.
    pub ready: Option<Stat>,
}

/// `n` first starts of `path` under `policy`, each with an empty cache.
pub async fn first_starts(
    tickbox: &Path,
    path: &Path,
    policy: CompilePolicy,
    n: usize,
) -> Result<FirstStarts> {
    let mut starts = Vec::with_capacity(n);
    let mut cpu = Vec::with_capacity(n);
    let mut ready = Vec::new();
    for i in 0..n {
        let dir = std::env::temp_dir().join(format!(
            "tickbox-bench-first-{}-{i}-{:?}",
            std::process::id(),
            policy
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let engine = WasmEngine::with_worker(Some(dir.clone()), Some(tickbox.to_path_buf()))?;
        engine.set_compile_policy(policy);
        let c = cpu_with_children();
        let t = Instant::now();
        let s = start_wasm(&engine, path).await?;
        starts.push(t.elapsed().as_secs_f64() * 1e3);
        cpu.push((cpu_with_children() - c) * 1e3);
        s.shutdown().await;
        if policy == CompilePolicy::Tiered {
            let cache = engine.cache().context("no cache")?;
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                let optimized = cache
                    .entries()
                    .iter()
                    .any(|e| e.compiler == Some(Compiler::Cranelift));
                if optimized {
                    ready.push(t.elapsed().as_secs_f64());
                    // Let the worker exit and be reaped, so its CPU does
                    // not land in the next sample.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    break;
                }
                if Instant::now() > deadline {
                    bail!(
                        "the optimized code of {} never reached the cache",
                        path.display()
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        drop(engine);
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(FirstStarts {
        wall: Stat::new("ms", starts),
        cpu: Stat::new("ms CPU", cpu),
        ready: (!ready.is_empty()).then(|| Stat::new("s", ready)),
    })
}

/// One whole-process command: its wall time in ms (it must exit 0).
fn timed(cmd: &mut Command) -> Result<f64> {
    let t = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        bail!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(ms)
}

/// The `wasmtime` CLI tests/setup.sh installs (`bench/wasmtime/wasmtime`),
/// else one on PATH, if any.
pub fn wasmtime_cli() -> Option<PathBuf> {
    let installed = crate::root().join("bench/wasmtime/wasmtime");
    if installed.is_file() {
        return Some(installed);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("wasmtime"))
        .find(|p| p.is_file())
}

/// What [`process_reads`] measured, ms per whole process.
pub struct ProcessReads {
    pub wasm: Stat,
    /// The native Tick as a user runs it (in a cgroup of its own).
    pub native: Stat,
    /// The same with `TICKBOX_NO_CGROUP=1`: moving a process into a cgroup
    /// waits for an RCU grace period in the kernel, which took 6–14 ms after
    /// other cgroup activity (BENCHMARKS.md), so this is native's best case.
    pub native_no_cgroup: Stat,
    /// `wasmtime run` as a native Tick, without a cgroup as well.
    pub wasmtime: Option<Stat>,
}

/// Whole-process `tickbox read`: the wasm Tick with a warm cache, the same
/// Tick native (with and without its cgroup), and (when a wasmtime CLI is
/// on PATH) the wasm under `wasmtime run` as a native Tick; `n` runs each,
/// interleaved.
pub fn process_reads(tickbox: &Path, wasm: &Path, native: &Path, n: usize) -> Result<ProcessReads> {
    let dir = std::env::temp_dir().join(format!("tickbox-bench-proc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let wasmtime = wasmtime_cli();
    let read_wasm = || {
        let mut c = Command::new(tickbox);
        c.arg("read").arg(wasm).env("TICKBOX_CACHE_DIR", &dir);
        c
    };
    let read_native = || {
        let mut c = Command::new(tickbox);
        c.args(["read", "--"]).arg(native);
        c
    };
    let read_native_no_cgroup = || {
        let mut c = read_native();
        c.env("TICKBOX_NO_CGROUP", "1");
        c
    };
    let read_wasmtime = |cli: &Path| {
        let mut c = Command::new(tickbox);
        c.args(["read", "--"]).arg(cli).arg("run").arg(wasm);
        // Its best case too (see `native_no_cgroup`).
        c.env("TICKBOX_NO_CGROUP", "1");
        c
    };
    // Warm-up: the optimized code into the cache (and page caches).
    let mut c = Command::new(tickbox);
    c.arg("compile").arg(wasm).env("TICKBOX_CACHE_DIR", &dir);
    timed(&mut c)?;
    timed(&mut read_wasm())?;
    timed(&mut read_native())?;
    if let Some(cli) = &wasmtime {
        timed(&mut read_wasmtime(cli))?;
    }
    let (mut w, mut nat, mut bare, mut wt) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        w.push(timed(&mut read_wasm())?);
        nat.push(timed(&mut read_native())?);
        bare.push(timed(&mut read_native_no_cgroup())?);
        if let Some(cli) = &wasmtime {
            wt.push(timed(&mut read_wasmtime(cli))?);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ProcessReads {
        wasm: Stat::new("ms", w),
        native: Stat::new("ms", nat),
        native_no_cgroup: Stat::new("ms", bare),
        wasmtime: (!wt.is_empty()).then(|| Stat::new("ms", wt)),
    })
}
