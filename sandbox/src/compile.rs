//! Bounded compilation: Cranelift runs in a child process under limits.
//!
//! Compiling is the one step before a guest's own sandbox exists, and a
//! small hostile module can make Cranelift spend minutes of CPU and
//! gigabytes of memory. So a host that has a **compile worker** (the
//! `tickbox` CLI always does: it re-executes itself with the hidden
//! [`WORKER_ARG`] subcommand) compiles each Tick in a child process:
//!
//! - the wasm goes in on the child's stdin, the serialized code comes back on
//!   its stdout, at most [`Bounds::memory`] bytes of it;
//! - the child runs under `RLIMIT_DATA` = [`Bounds::memory`] (heap and every
//!   writable private mapping: an allocation past it fails and the child
//!   aborts) and `RLIMIT_CPU` (a backstop: the timeout × the CPUs, plus one
//!   second), and `PR_SET_PDEATHSIG` so it dies with the host;
//! - the parent kills it when [`Bounds::timeout`] (`compile_timeout`) of
//!   wall time has passed.
//!
//! Whichever bound ends it, the Tick fails to start with one line naming the
//! flag, and nothing else in the host is touched: the wait happens on a
//! blocking thread, never on the async workers. The parent then loads the
//! code with `deserialize`, which re-checks that it was made for this
//! wasmtime version and configuration ([`engine_config`] is shared by both
//! sides).
//!
//! Without a worker (a library embedder that did not configure one) the
//! compile runs in-process, bounded only by the wasm size limit.

use super::WasmKind;
pub use crate::limits::{DEFAULT_COMPILE_MEMORY, DEFAULT_COMPILE_TIMEOUT, DEFAULT_MAX_WASM};
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use tickbox_host::backend::reaper::{self, Reaper};
use wasmtime::{Config, Engine};

/// The hidden subcommand that makes `tickbox` a compile worker.
pub const WORKER_ARG: &str = "__compile-wasm";
/// Bytes of the worker's stderr kept for the error line.
const STDERR_KEEP: u64 = 4096;
/// How often the parent checks on the worker where the kernel has no
/// `pidfd_open` (Linux < 5.3); elsewhere it is woken by the exit itself.
const POLL: Duration = Duration::from_millis(10);

/// The limits one compile runs under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Wall time (`compile_timeout`).
    pub timeout: Duration,
    /// Writable memory of the worker, and the largest code it may return
    /// (`compile_memory`).
    pub memory: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            timeout: DEFAULT_COMPILE_TIMEOUT,
            memory: DEFAULT_COMPILE_MEMORY,
        }
    }
}

pub use crate::compiler::Compiler;

/// The engine configuration for one compiler, the same in the host and in
/// the worker (the compiled code is only valid for an identical
/// configuration).
pub fn engine_config(compiler: Compiler) -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true);
    cfg.wasm_component_model(true);
    if compiler == Compiler::Winch {
        cfg.strategy(wasmtime::Strategy::Winch);
        // Winch compiles the guest's functions; the trampolines and the
        // component model's adapters it hands to Cranelift. Baseline code
        // is short-lived, so those are not optimized either.
        cfg.cranelift_opt_level(wasmtime::OptLevel::None);
    }
    cfg
}

/// The worker's side: `tickbox __compile-wasm component|module MAX_BYTES
/// [cranelift|winch]` (Cranelift when the compiler is left out).
/// Reads the wasm from stdin, writes the serialized code to stdout; on
/// failure one line on stderr and exit status 1 (2 for bad arguments).
pub fn worker_main(args: &[String]) -> ExitCode {
    let fail = |code: u8, msg: String| {
        eprintln!("{msg}");
        ExitCode::from(code)
    };
    let usage = || {
        format!(
            "usage: tickbox {WORKER_ARG} component|module MAX_BYTES [cranelift|winch [{INTO_ARG} DIR KEY REPLACES]]"
        )
    };
    let (args, into) = match args {
        [head @ .., into, dir, key, replaces] if into == INTO_ARG && head.len() == 3 => {
            (head, Some((dir, key, replaces)))
        }
        _ => (args, None),
    };
    let (kind, max, compiler) = match args {
        [kind, max, rest @ ..] if rest.len() <= 1 => {
            let compiler = match rest.first() {
                None => Some(Compiler::Cranelift),
                Some(c) => Compiler::parse(c),
            };
            match (kind.as_str(), max.parse::<u64>(), compiler) {
                ("component", Ok(m), Some(c)) => (WasmKind::Component, m, c),
                ("module", Ok(m), Some(c)) => (WasmKind::Module, m, c),
                _ => return fail(2, usage()),
            }
        }
        _ => return fail(2, usage()),
    };
    pad_heap_growth();
    // The engine before the wasm is read: the size bound is checked on the
    // bytes, and the engine is needed either way.
    let engine = match Engine::new(&engine_config(compiler)) {
        Ok(e) => e,
        Err(e) => return fail(1, format!("cannot start wasmtime: {e:#}")),
    };
    let mut wasm = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(max.saturating_add(1))
        .read_to_end(&mut wasm)
    {
        return fail(1, format!("cannot read the wasm: {e}"));
    }
    if wasm.len() as u64 > max {
        return fail(1, format!("the wasm is larger than {max} bytes"));
    }
    if let Some((dir, key, replaces)) = into {
        return match optimize_into_cache(&engine, &wasm, kind, compiler, dir, key, replaces) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(1, e),
        };
    }
    let code = match kind {
        WasmKind::Component => engine.precompile_component(&wasm),
        WasmKind::Module => engine.precompile_module(&wasm),
    };
    match code {
        Ok(code) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(&code).and_then(|_| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(1, format!("cannot write the code: {e}")),
            }
        }
        Err(e) => fail(
            1,
            format!("{e:#}")
                .lines()
                .next()
                .unwrap_or("error")
                .to_string(),
        ),
    }
}

/// How much extra glibc's allocator asks the kernel for each time a heap
/// grows, at most: [`pad_heap_growth`].
const HEAP_PAD_MAX: u64 = 64 << 20;

/// Makes the worker's heaps grow in large steps. Compiling allocates
/// quickly on several threads, and glibc grows each thread's heap by what
/// one allocation needs, one `mprotect` (or `brk`) at a time; the pad lets
/// compile threads grow in few steps. Untouched padding costs address space, not
/// memory, but `RLIMIT_DATA` (the memory bound its parent set) counts it,
/// so the pad is at most a sixteenth of that bound: a compile is refused
/// for memory only when it really comes within that of the bound.
fn pad_heap_growth() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we pass.
        let bound = if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut lim) } == 0 {
            lim.rlim_cur
        } else {
            0
        };
        // rlim_t is u64 here, not on every target.
        #[allow(clippy::unnecessary_cast)]
        let pad = (bound as u64 / 16).min(HEAP_PAD_MAX);
        // SAFETY: mallopt only changes the allocator's tuning; called
        // before any other thread of the worker exists.
        unsafe { libc::mallopt(libc::M_TOP_PAD, pad as libc::c_int) };
    }
}

/// The hash of an engine's compatibility settings that cache keys include.
pub fn engine_hash(engine: &Engine) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    h.finish()
}

/// The worker argument that makes it write the code into the cache itself
/// (see [`optimize_detached`]).
pub const INTO_ARG: &str = "--into-cache";

/// The detached worker's work: under the compile lock of `key`, unless the
/// entry is there already, compile and store the code, then drop the
/// `replaces` entry (the baseline code it supersedes).
fn optimize_into_cache(
    engine: &Engine,
    wasm: &[u8],
    kind: WasmKind,
    compiler: Compiler,
    dir: &str,
    key: &str,
    replaces: &str,
) -> Result<(), String> {
    // Never made here: a cache removed meanwhile (a test's) stays removed.
    if !Path::new(dir).is_dir() {
        return Err(format!("the cache {dir} is gone"));
    }
    let cache =
        super::cache::Cache::open(dir.into(), engine_hash(engine)).map_err(|e| e.to_string())?;
    // The key is recomputed from the bytes received: whatever the parent
    // said, an entry only ever holds the code of the wasm its key names.
    if cache.key_for(wasm, compiler) != key {
        return Err(format!(
            "the key {key} does not name this wasm's {compiler} code"
        ));
    }
    let Some(lock) = cache.try_lock(key) else {
        return Ok(()); // Another worker is at it.
    };
    if !cache.contains(key) {
        let code = match kind {
            WasmKind::Component => engine.precompile_component(wasm),
            WasmKind::Module => engine.precompile_module(wasm),
        }
        .map_err(|e| {
            format!("{e:#}")
                .lines()
                .next()
                .unwrap_or("error")
                .to_string()
        })?;
        cache.put(key, &code);
        if !cache.contains(key) {
            return Err("the code could not be stored in the cache".into());
        }
    }
    cache.remove(replaces);
    cache.unlock(key, lock);
    Ok(())
}

/// Starts a **detached** worker that compiles `wasm` with Cranelift and
/// writes the code into the cache at `dir` under `key` itself, then removes
/// the entry `replaces` (the Winch code a Tick started with). It outlives a
/// one-shot command (no `PR_SET_PDEATHSIG`, its own session, so a Ctrl-C at
/// the terminal does not reach it either), and so keeps every bound on its
/// own: `RLIMIT_DATA` and `RLIMIT_CPU` as for [`compile_in_worker`], and the
/// wall-time bound (times `BACKGROUND_WALL_FACTOR`) as an `alarm` that
/// survives `exec` (SIGALRM ends it). It runs at `BACKGROUND_NICE`.
/// The wasm goes in as a [`WorkerInput`], so the worker gets every byte
/// however soon its parent exits; the worker recomputes the key from those
/// bytes. Its output goes nowhere. The caller waits for the returned child
/// if it lives long enough.
#[allow(clippy::too_many_arguments)]
pub fn optimize_detached(
    reaper: Option<&Reaper>,
    worker: &Path,
    input: WorkerInput,
    kind: WasmKind,
    bounds: Bounds,
    dir: &Path,
    key: &str,
    replaces: &str,
) -> Result<std::process::Child, CompileError> {
    let (mem, cpu_secs) = (bounds.memory, cpu_backstop(bounds.timeout));
    let wall_secs = (bounds.timeout.as_secs_f64().ceil() as u64)
        .saturating_mul(BACKGROUND_WALL_FACTOR)
        .clamp(1, u32::MAX as u64) as u32;
    let mut cmd = worker_command(worker, input, kind, Compiler::Cranelift);
    cmd.arg(INTO_ARG)
        .arg(dir)
        .arg(key)
        .arg(replaces)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: runs between fork and exec; setrlimit, setsid and alarm are
    // async-signal-safe and nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            set_limits(mem, cpu_secs)?;
            libc::setsid();
            libc::alarm(wall_secs);
            // Lowered, never raised (a host already niced further keeps
            // its value); best effort: a worker at normal priority works.
            if libc::getpriority(libc::PRIO_PROCESS, 0) < BACKGROUND_NICE {
                libc::setpriority(libc::PRIO_PROCESS, 0, BACKGROUND_NICE);
            }
            Ok(())
        });
    }
    reaper::spawn_leaf(reaper, &mut cmd)
        .map_err(|e| CompileError::Worker(format!("{}: {e}", worker.display())))
}

/// The detached optimizing worker's nice value. It runs beside the Tick it
/// optimizes (a first start's session, then the Tick's own work), which
/// should not wait for it: it must not take a CPU from the Tick it
/// optimizes. At this value the scheduler gives it about a tenth of a contended CPU and
/// all of an idle one. Its CPU bound is the foreground one; its wall-time
/// bound is [`BACKGROUND_WALL_FACTOR`] times longer, for the waits its
/// priority adds (a compile stopped there is tried again at the next start).
const BACKGROUND_NICE: libc::c_int = 10;

/// How many times `compile_timeout` the detached worker may take.
const BACKGROUND_WALL_FACTOR: u64 = 4;

/// The wasm a worker reads on its stdin: a memory file made once from the
/// bytes, so the worker reads it at its own pace whatever its parent does.
pub struct WorkerInput {
    file: std::fs::File,
    len: usize,
}

impl WorkerInput {
    /// A copy of `wasm` for a worker.
    pub fn new(wasm: &[u8]) -> Result<WorkerInput, CompileError> {
        let file = memory_file(wasm).map_err(|e| CompileError::Worker(e.to_string()))?;
        Ok(WorkerInput {
            file,
            len: wasm.len(),
        })
    }
}

/// `tickbox __compile-wasm KIND LEN COMPILER` reading `input`, without the
/// host's `RUST_LOG`: what every worker command starts as.
fn worker_command(
    worker: &Path,
    input: WorkerInput,
    kind: WasmKind,
    compiler: Compiler,
) -> Command {
    let kind_arg = match kind {
        WasmKind::Component => "component",
        WasmKind::Module => "module",
    };
    let mut cmd = Command::new(worker);
    cmd.arg(WORKER_ARG)
        .arg(kind_arg)
        .arg(input.len.to_string())
        .arg(compiler.name())
        .stdin(Stdio::from(input.file))
        .env_remove("RUST_LOG");
    cmd
}

/// An anonymous memory file holding `bytes`, positioned at its start (an
/// unnamed file in the temporary directory where the kernel has no
/// `memfd_create`).
fn memory_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::Seek;
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // SAFETY: a valid C string; the flags only ask for close-on-exec.
    let fd = unsafe { libc::memfd_create(c"tickbox-wasm".as_ptr(), libc::MFD_CLOEXEC) };
    let mut f = if fd >= 0 {
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        unsafe { std::fs::File::from_raw_fd(fd) }
    } else {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(std::env::temp_dir())?
    };
    f.write_all(bytes)?;
    f.seek(std::io::SeekFrom::Start(0))?;
    Ok(f)
}

/// The CPU-time backstop for a wall-time bound: the timeout × the CPUs,
/// plus one second.
fn cpu_backstop(timeout: Duration) -> u64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    (timeout.as_secs_f64().ceil() as u64)
        .saturating_mul(cpus)
        .saturating_add(1)
}

/// `RLIMIT_DATA` = `mem` and `RLIMIT_CPU` = `cpu_secs` (hard limit one
/// second later). Async-signal-safe: called between fork and exec.
fn set_limits(mem: u64, cpu_secs: u64) -> std::io::Result<()> {
    let data = libc::rlimit {
        rlim_cur: mem as libc::rlim_t,
        rlim_max: mem as libc::rlim_t,
    };
    let cpu = libc::rlimit {
        rlim_cur: cpu_secs as libc::rlim_t,
        rlim_max: cpu_secs.saturating_add(1) as libc::rlim_t,
    };
    // SAFETY: setrlimit with valid pointers has no other preconditions.
    if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &data) } != 0
        || unsafe { libc::setrlimit(libc::RLIMIT_CPU, &cpu) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Why a bounded compile did not produce code; one line each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// The wall-time bound passed.
    #[error("compiling took longer than compile_timeout ({secs} s); the worker was killed")]
    Timeout { secs: f64 },
    /// The memory bound was hit (or the code was larger than it).
    #[error("compiling needed more than compile_memory ({bytes} bytes); the worker was stopped")]
    Memory { bytes: u64 },
    /// The CPU backstop fired.
    #[error("compiling used more CPU than compile_timeout allows; the worker was stopped")]
    Cpu,
    /// The compiler refused the wasm (invalid, unsupported features).
    #[error("{0}")]
    Invalid(String),
    /// The worker could not be run.
    #[error("cannot run the compile worker: {0}")]
    Worker(String),
}

/// Compiles `wasm` in a worker process under `bounds`; the serialized code.
pub fn compile_in_worker(
    reaper: Option<&Reaper>,
    worker: &Path,
    wasm: &[u8],
    kind: WasmKind,
    compiler: Compiler,
    bounds: Bounds,
) -> Result<Vec<u8>, CompileError> {
    start_worker(reaper, worker, wasm, kind, compiler, bounds)?.finish()
}

/// A compile worker at work: started before the host's own preparations
/// (an engine to build) so that its compile overlaps them. Dropped
/// unfinished, it is killed.
pub struct Running {
    /// Where the worker is registered, to be forgotten once reaped.
    reaper: Option<Reaper>,
    child: Option<std::process::Child>,
    bounds: Bounds,
    started: Instant,
}

/// Starts a compile worker on `wasm` under `bounds`, all of which count
/// from now. The wasm goes in as a memory file on the worker's stdin, so
/// the worker reads it as soon as its engine is built, whatever the host
/// does meanwhile (a first start builds its own engine).
pub fn start_worker(
    reaper: Option<&Reaper>,
    worker: &Path,
    wasm: &[u8],
    kind: WasmKind,
    compiler: Compiler,
    bounds: Bounds,
) -> Result<Running, CompileError> {
    let cpu_secs = cpu_backstop(bounds.timeout);
    let mem = bounds.memory;
    let mut cmd = worker_command(worker, WorkerInput::new(wasm)?, kind, compiler);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: runs between fork and exec; setrlimit and prctl are
    // async-signal-safe and nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            set_limits(mem, cpu_secs)?;
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let started = Instant::now();
    let child = reaper::spawn_leaf(reaper, &mut cmd)
        .map_err(|e| CompileError::Worker(format!("{}: {e}", worker.display())))?;
    Ok(Running {
        reaper: reaper.cloned(),
        child: Some(child),
        bounds,
        started,
    })
}

impl Running {
    /// Waits for the worker's code under the bounds.
    pub fn finish(mut self) -> Result<Vec<u8>, CompileError> {
        let Some(mut child) = self.child.take() else {
            return Err(CompileError::Worker("the worker is gone".into()));
        };
        let pid = child.id();
        let result = supervise(&mut child, self.started, self.bounds);
        reaper::forget(self.reaper.as_ref(), pid);
        result
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            reaper::forget(self.reaper.as_ref(), child.id());
        }
    }
}

/// Collects the worker's output and enforces the deadline, which counts
/// from `started`.
fn supervise(
    child: &mut std::process::Child,
    started: Instant,
    bounds: Bounds,
) -> Result<Vec<u8>, CompileError> {
    let mem = bounds.memory;
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(CompileError::Worker(
            "the worker's pipes are missing".into(),
        ));
    };
    std::thread::scope(|s| {
        // The pipes are drained on their own threads so that a full pipe
        // never stalls the worker and the deadline below stays exact.
        let reader = s.spawn(move || {
            let mut code = Vec::new();
            let r = (&mut stdout)
                .take(mem.saturating_add(1))
                .read_to_end(&mut code);
            // Drain anything beyond the bound so the worker is not stuck.
            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
            r.map(|_| code)
        });
        let errors = s.spawn(move || {
            let mut text = Vec::new();
            let _ = (&mut stderr).take(STDERR_KEEP).read_to_end(&mut text);
            let _ = std::io::copy(&mut stderr, &mut std::io::sink());
            String::from_utf8_lossy(&text).into_owned()
        });
        let exit = ExitWatch::new(child.id());
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Ok(st),
                Ok(None) if started.elapsed() >= bounds.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(CompileError::Timeout {
                        secs: bounds.timeout.as_secs_f64(),
                    });
                }
                Ok(None) => exit.wait(bounds.timeout.saturating_sub(started.elapsed())),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(CompileError::Worker(e.to_string()));
                }
            }
        };
        let code = reader.join().unwrap_or_else(|_| Ok(Vec::new()));
        let errors = errors.join().unwrap_or_default();
        let status = status?;
        let first_line = errors.lines().next().unwrap_or("").trim().to_string();
        let out_of_memory = errors.contains("memory allocation of")
            || errors.contains("Cannot allocate memory")
            || errors.contains("out of memory");
        match (status.code(), status.signal()) {
            (Some(0), _) => {
                let code = code.map_err(|e| CompileError::Worker(e.to_string()))?;
                if code.len() as u64 > mem {
                    return Err(CompileError::Memory { bytes: mem });
                }
                Ok(code)
            }
            _ if out_of_memory => Err(CompileError::Memory { bytes: mem }),
            (_, Some(libc::SIGXCPU)) | (_, Some(libc::SIGKILL)) => Err(CompileError::Cpu),
            // Rust aborts when an allocation fails, which under
            // RLIMIT_DATA means the memory bound.
            (_, Some(libc::SIGABRT)) => Err(CompileError::Memory { bytes: mem }),
            (Some(_), _) if !first_line.is_empty() => Err(CompileError::Invalid(first_line)),
            _ => Err(CompileError::Worker(format!(
                "the worker ended with {status}"
            ))),
        }
    })
}

/// Waits for a child's exit without polling: a `pidfd` becomes readable
/// when the process ends, so the parent wakes at once rather than up to
/// [`POLL`] later (a tenth of a small Tick's first start). Where the kernel
/// has no `pidfd_open`, [`ExitWatch::wait`] sleeps [`POLL`].
struct ExitWatch(Option<std::os::fd::OwnedFd>);

impl ExitWatch {
    fn new(pid: u32) -> ExitWatch {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        let fd = (fd >= 0).then(|| {
            // SAFETY: the fd was just returned by the kernel and nobody else owns it.
            unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as libc::c_int) }
        });
        ExitWatch(fd)
    }

    /// Returns when the process has ended, `limit` has passed, or a signal
    /// interrupted the wait (the caller checks again in every case).
    fn wait(&self, limit: Duration) {
        use std::os::fd::AsRawFd;
        let Some(fd) = &self.0 else {
            std::thread::sleep(POLL.min(limit));
            return;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up, so a wait never ends just short of the deadline.
        let ms = limit.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// An executable that ignores its arguments and waits, standing in for
    /// a worker that has not finished.
    fn sleeper(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tickbox-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("worker");
        std::fs::write(&path, "#!/bin/sh\nexec sleep 30\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn alive(pid: u32) -> bool {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_worker_started_early_and_never_used_is_killed_and_reaped() {
        let worker = sleeper("early-drop");
        let reaper = Reaper::default();
        let running = start_worker(
            Some(&reaper),
            &worker,
            b"\0asm\x01\0\0\0",
            WasmKind::Module,
            Compiler::Winch,
            Bounds::default(),
        )
        .unwrap();
        let pid = running.child.as_ref().unwrap().id();
        assert!(alive(pid), "positive control: the worker runs");
        // Registered in the reaper it was handed, so a sweep spares it.
        assert!(reaper.knows(pid));
        drop(running);
        // Killed and waited for: not even a zombie is left.
        assert!(!alive(pid), "the worker {pid} outlived its Running");
        assert!(!reaper.knows(pid), "a reaped worker is forgotten");
        let _ = std::fs::remove_dir_all(worker.parent().unwrap());
    }

    #[test]
    fn a_worker_started_early_keeps_the_wall_time_bound() {
        let worker = sleeper("early-timeout");
        let bounds = Bounds {
            timeout: Duration::from_millis(300),
            ..Bounds::default()
        };
        let t = Instant::now();
        let running = start_worker(
            None,
            &worker,
            b"\0asm\x01\0\0\0",
            WasmKind::Module,
            Compiler::Winch,
            bounds,
        )
        .unwrap();
        let err = running.finish().unwrap_err();
        assert!(matches!(err, CompileError::Timeout { .. }), "{err:?}");
        // Woken by the deadline, not by the sleeper's own end 30 s later.
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        assert!(
            t.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        let _ = std::fs::remove_dir_all(worker.parent().unwrap());
    }

    #[test]
    fn the_exit_watch_wakes_when_the_process_ends() {
        let mut child = Command::new("sleep").arg("0.2").spawn().unwrap();
        let watch = ExitWatch::new(child.id());
        assert!(watch.0.is_some(), "pidfd_open is available on this kernel");
        let t = Instant::now();
        watch.wait(Duration::from_secs(20));
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(child.wait().unwrap().success());
    }
}
