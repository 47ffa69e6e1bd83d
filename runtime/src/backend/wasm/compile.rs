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

/// The engine configuration, the same in the host and in the worker (the
/// compiled code is only valid for an identical configuration).
pub fn engine_config() -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true);
    cfg.wasm_component_model(true);
    cfg
}

/// The worker's side: `tickbox __compile-wasm component|module MAX_BYTES`.
/// Reads the wasm from stdin, writes the serialized code to stdout; on
/// failure one line on stderr and exit status 1 (2 for bad arguments).
pub fn worker_main(args: &[String]) -> ExitCode {
    let fail = |code: u8, msg: String| {
        eprintln!("{msg}");
        ExitCode::from(code)
    };
    let (kind, max) = match args {
        [kind, max] => match (kind.as_str(), max.parse::<u64>()) {
            ("component", Ok(m)) => (WasmKind::Component, m),
            ("module", Ok(m)) => (WasmKind::Module, m),
            _ => {
                return fail(
                    2,
                    format!("usage: tickbox {WORKER_ARG} component|module MAX_BYTES"),
                )
            }
        },
        _ => {
            return fail(
                2,
                format!("usage: tickbox {WORKER_ARG} component|module MAX_BYTES"),
            )
        }
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
    let engine = match Engine::new(&engine_config()) {
        Ok(e) => e,
        Err(e) => return fail(1, format!("cannot start wasmtime: {e:#}")),
    };
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
    bounds: Bounds,
) -> Result<Vec<u8>, CompileError> {
    let kind_arg = match kind {
        WasmKind::Component => "component",
        WasmKind::Module => "module",
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let cpu_secs = (bounds.timeout.as_secs_f64().ceil() as u64)
        .saturating_mul(cpus)
        .saturating_add(1);
    let mem = bounds.memory;
    let mut cmd = Command::new(worker);
    cmd.arg(WORKER_ARG)
        .arg(kind_arg)
        .arg(wasm.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG");
    // SAFETY: runs between fork and exec; setrlimit and prctl are
    // async-signal-safe and nothing here allocates.
    unsafe {
        cmd.pre_exec(move || {
            let data = libc::rlimit {
                rlim_cur: mem as libc::rlim_t,
                rlim_max: mem as libc::rlim_t,
            };
            let cpu = libc::rlimit {
                rlim_cur: cpu_secs as libc::rlim_t,
                rlim_max: cpu_secs.saturating_add(1) as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &data) != 0
                || libc::setrlimit(libc::RLIMIT_CPU, &cpu) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
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
