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
//! - the parent kills it when [`Bounds::timeout`] (`--compile-timeout`) of
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
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use wasmtime::{Config, Engine};

/// The hidden subcommand that makes `tickbox` a compile worker.
pub const WORKER_ARG: &str = "__compile-wasm";
/// Default `--compile-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `--compile-memory`.
pub const DEFAULT_MEMORY: u64 = 4 << 30;
/// Default `--max-wasm-size` (componentize-py output is about 40 MiB).
pub const DEFAULT_MAX_WASM: u64 = 64 << 20;
/// Bytes of the worker's stderr kept for the error line.
const STDERR_KEEP: u64 = 4096;
/// How often the parent checks on the worker.
const POLL: Duration = Duration::from_millis(10);

/// The limits one compile runs under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Wall time (`--compile-timeout`).
    pub timeout: Duration,
    /// Writable memory of the worker, and the largest code it may return
    /// (`--compile-memory`).
    pub memory: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            timeout: DEFAULT_TIMEOUT,
            memory: DEFAULT_MEMORY,
        }
    }
}

/// Which of wasmtime's compilers made a piece of code.
///
/// **Winch** is wasmtime's baseline compiler: one pass per function, no
/// optimisation, several times faster to compile than **Cranelift**, whose
/// code runs faster. The two make code for differently configured engines
/// (Winch uses its own calling convention), so each has its own [`Engine`]
/// and its own cache entries. Both get the same configuration otherwise:
/// epoch interruption, the component model, and the same limits at run time,
/// so what a guest can do does not depend on the compiler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compiler {
    /// The optimizing compiler (what a Tick runs with in the long run).
    Cranelift,
    /// The baseline compiler (a fast first start).
    Winch,
}

impl Compiler {
    /// The name used on the command line, in cache keys and in `cache ls`.
    pub fn name(self) -> &'static str {
        match self {
            Compiler::Cranelift => "cranelift",
            Compiler::Winch => "winch",
        }
    }

    /// The compiler named `s`, if any.
    pub fn parse(s: &str) -> Option<Compiler> {
        match s {
            "cranelift" => Some(Compiler::Cranelift),
            "winch" => Some(Compiler::Winch),
            _ => None,
        }
    }
}

impl std::fmt::Display for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The engine configuration for one compiler, the same in the host and in
/// the worker (the compiled code is only valid for an identical
/// configuration).
pub fn engine_config(compiler: Compiler) -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true);
    cfg.wasm_component_model(true);
    if compiler == Compiler::Winch {
        cfg.strategy(wasmtime::Strategy::Winch);
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
    let engine = match Engine::new(&engine_config(compiler)) {
        Ok(e) => e,
        Err(e) => return fail(1, format!("cannot start wasmtime: {e:#}")),
    };
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
/// wall-time bound as an `alarm` that survives `exec` (SIGALRM ends it).
/// The wasm goes in through a sealed-off memory file as stdin, so the
/// worker gets every byte however soon its parent exits; the worker
/// recomputes the key from those bytes. Its output goes nowhere. The caller
/// waits for the returned child if it lives long enough.
pub fn optimize_detached(
    worker: &Path,
    wasm: &[u8],
    kind: WasmKind,
    bounds: Bounds,
    dir: &Path,
    key: &str,
    replaces: &str,
) -> Result<std::process::Child, CompileError> {
    let io = |e: std::io::Error| CompileError::Worker(e.to_string());
    let input = memory_file(wasm).map_err(io)?;
    let kind_arg = match kind {
        WasmKind::Component => "component",
        WasmKind::Module => "module",
    };
    let (mem, cpu_secs) = (bounds.memory, cpu_backstop(bounds.timeout));
    let wall_secs = (bounds.timeout.as_secs_f64().ceil() as u64).clamp(1, u32::MAX as u64) as u32;
    let mut cmd = Command::new(worker);
    cmd.arg(WORKER_ARG)
        .arg(kind_arg)
        .arg(wasm.len().to_string())
        .arg(Compiler::Cranelift.name())
        .arg(INTO_ARG)
        .arg(dir)
        .arg(key)
        .arg(replaces)
        .stdin(Stdio::from(input))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("RUST_LOG");
    // SAFETY: runs between fork and exec; setrlimit, setsid and alarm are
    // async-signal-safe and nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            set_limits(mem, cpu_secs)?;
            libc::setsid();
            libc::alarm(wall_secs);
            Ok(())
        });
    }
    crate::backend::reaper::spawn_known(&mut cmd)
        .map_err(|e| CompileError::Worker(format!("{}: {e}", worker.display())))
}

/// An anonymous memory file holding `bytes`, positioned at its start.
fn memory_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    use std::io::Seek;
    use std::os::fd::FromRawFd;
    // SAFETY: a valid C string; the flags only ask for close-on-exec.
    let fd = unsafe { libc::memfd_create(c"tickbox-wasm".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
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
    #[error("compiling took longer than --compile-timeout ({secs} s); the worker was killed")]
    Timeout { secs: f64 },
    /// The memory bound was hit (or the code was larger than it).
    #[error("compiling needed more than --compile-memory ({bytes} bytes); the worker was stopped")]
    Memory { bytes: u64 },
    /// The CPU backstop fired.
    #[error("compiling used more CPU than --compile-timeout allows; the worker was stopped")]
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
    worker: &Path,
    wasm: &[u8],
    kind: WasmKind,
    compiler: Compiler,
    bounds: Bounds,
) -> Result<Vec<u8>, CompileError> {
    let kind_arg = match kind {
        WasmKind::Component => "component",
        WasmKind::Module => "module",
    };
    let cpu_secs = cpu_backstop(bounds.timeout);
    let mem = bounds.memory;
    let mut cmd = Command::new(worker);
    cmd.arg(WORKER_ARG)
        .arg(kind_arg)
        .arg(wasm.len().to_string())
        .arg(compiler.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG");
    // SAFETY: runs between fork and exec; setrlimit and prctl are
    // async-signal-safe and nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            set_limits(mem, cpu_secs)?;
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = crate::backend::reaper::spawn_known(&mut cmd)
        .map_err(|e| CompileError::Worker(format!("{}: {e}", worker.display())))?;
    let pid = child.id();
    let result = supervise(&mut child, wasm, bounds);
    crate::backend::reaper::forget(pid);
    result
}

/// Feeds the worker, collects its output and enforces the deadline.
fn supervise(
    child: &mut std::process::Child,
    wasm: &[u8],
    bounds: Bounds,
) -> Result<Vec<u8>, CompileError> {
    let mem = bounds.memory;
    let (Some(mut stdin), Some(mut stdout), Some(mut stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(CompileError::Worker(
            "the worker's pipes are missing".into(),
        ));
    };
    std::thread::scope(|s| {
        // The pipes are drained on their own threads so that a full pipe
        // never stalls the worker and the deadline below stays exact.
        let feeder = s.spawn(move || {
            let _ = stdin.write_all(wasm);
        });
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
        let start = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Ok(st),
                Ok(None) if start.elapsed() >= bounds.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(CompileError::Timeout {
                        secs: bounds.timeout.as_secs_f64(),
                    });
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(CompileError::Worker(e.to_string()));
                }
            }
        };
        let _ = feeder.join();
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
