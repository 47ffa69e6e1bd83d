//! `TICKBOX_BENCH_ONLY_RT=1`: the engine's round trips against the floor,
//! every variant interleaved in each pass so the machine's load falls on
//! all of them alike.
//!
//! Per pass, for the wasm and the native bench Tick: sequential `tick/call`
//! round trips with the engine as shipped (a caller writes its own frame
//! when no frame is queued) and with every frame sent through the writer
//! task (`SessionConfig::caller_writes = false`, the engine before), each
//! from two callers: the bench's `block_on` thread, and a task spawned on
//! the runtime's workers (where `tickbox run`'s socket connections and
//! `tickbox mcp`'s requests call from). Then the floor (a blocking pipe loop
//! to the native Tick, no engine). Besides the latency, each figure has the
//! process's CPU time and context switches per call (`getrusage`, all
//! threads of this process; the native Tick's own are not counted), which
//! load moves less than wall time. Last, 8 calls in flight (wall time per
//! call), from one `block_on` future and from 8 spawned tasks.
//! `TICKBOX_BENCH_RT_PASSES` sets the number of passes (default 3),
//! `TICKBOX_BENCH_RT_FILTER=TEXT` runs only the lines starting with TEXT (for
//! `perf stat` of one variant; "floor" selects the floor),
//! `TICKBOX_BENCH_RT_GUESTS=s,o3,s+batch,…` compares builds and write
//! patterns of the bench Tick (see `run`; BENCHMARKS.md, "8 in flight").

use crate::{concurrent, floor, sequential, Backend, Bench, Stat};
use anyhow::Result;
use std::sync::Arc;
use tickbox_runtime::backend::wasm::WasmEngine;
use tickbox_runtime::session::{Session, SessionConfig};

/// CPU seconds and context switches (voluntary + involuntary) of this process.
fn usage() -> (f64, f64) {
    // SAFETY: getrusage writes into the struct we pass and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        tv(u.ru_utime) + tv(u.ru_stime),
        (u.ru_nvcsw + u.ru_nivcsw) as f64,
    )
}

/// Sequential calls with the process's CPU µs and context switches per call.
async fn measured(s: &Arc<Session>, n: usize, spawned: bool) -> Result<(Stat, f64, f64)> {
    let (cpu0, cs0) = usage();
    let stat = if spawned {
        let s = s.clone();
        tokio::spawn(async move { sequential(&s, n, false).await }).await??
    } else {
        sequential(s, n, false).await?
    };
    let (cpu1, cs1) = usage();
    let calls = (n + n / 10) as f64;
    Ok((stat, (cpu1 - cpu0) * 1e6 / calls, (cs1 - cs0) / calls))
}

/// 8 in flight, with CPU µs and context switches per call.
async fn measured8(
    s: &Arc<Session>,
    rounds: usize,
    per_round: usize,
    spawned: bool,
) -> Result<(Stat, f64, f64)> {
    let (cpu0, cs0) = usage();
    let stat = if spawned {
        crate::concurrent_tasks(s, rounds, per_round).await?
    } else {
        concurrent(s, rounds, per_round).await?
    };
    let (cpu1, cs1) = usage();
    let calls = (rounds * per_round) as f64;
    Ok((stat, (cpu1 - cpu0) * 1e6 / calls, (cs1 - cs0) / calls))
}

fn wanted(line: &str) -> bool {
    std::env::var("TICKBOX_BENCH_RT_FILTER").map_or(true, |f| line.starts_with(&f))
}

pub async fn run(bench: &Bench, engine: &Arc<WasmEngine>) -> Result<()> {
    let passes: usize = std::env::var("TICKBOX_BENCH_RT_PASSES")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3);
    let n = bench.n(3000);
    let writer_only = SessionConfig {
        caller_writes: false,
        ..SessionConfig::default()
    };
    // Builds of the bench Tick to compare (`TICKBOX_BENCH_RT_GUESTS`,
    // comma-separated): `s` is the guest workspace's profile (opt-level
    // "s"), `o3` the same source at opt-level 3; `+batch` / `+per-reply`
    // run it with `--batch` (one write per read) or `--per-reply` (one
    // write per answer) on both targets, instead of the SDK's choice (batch
    // in wasm, per answer natively).
    let wanted_guests = std::env::var("TICKBOX_BENCH_RT_GUESTS").unwrap_or_else(|_| "s".into());
    let mut builds: Vec<(String, crate::Guests, Vec<&str>)> = Vec::new();
    for g in wanted_guests.split(',').filter(|g| !g.is_empty()) {
        let (build, args) = match g.split_once('+') {
            Some((b, "per-reply")) => (b, vec!["--per-reply"]),
            Some((b, "batch")) => (b, vec!["--batch"]),
            None => (g, vec![]),
            Some(_) => anyhow::bail!("unknown guest variant {g}"),
        };
        let guests = match build {
            "s" => crate::Guests {
                native: bench.guests.native.clone(),
                wasm: bench.guests.wasm.clone(),
            },
            "o3" => crate::build_guests_at(Some("3"))?,
            other => anyhow::bail!("unknown guest build {other}"),
        };
        builds.push((g.to_string(), guests, args));
    }
    let mut sessions = Vec::new();
    for (backend, name) in [(Backend::Wasm, "wasm"), (Backend::Native, "native")] {
        for (variant, config) in [
            ("caller writes", SessionConfig::default()),
            ("writer task", writer_only.clone()),
        ] {
            for (g, guests, args) in &builds {
                let variant = if builds.len() > 1 {
                    format!("{variant} [{g}]")
                } else {
                    variant.to_string()
                };
                let s = bench
                    .start_guest(backend, engine, config.clone(), guests, args)
                    .await?;
                sessions.push((name, variant, Arc::new(s)));
            }
        }
    }
    let rounds = bench.n(10);
    for pass in 1..=passes {
        eprintln!("pass {pass} ({n} sequential calls each; CPU and context switches of this process per call)");
        // The floor is left out when only some lines run (for a profile of
        // them); the ratios are then NaN.
        let f = if wanted("floor") {
            let native = bench.guests.native.clone();
            tokio::task::spawn_blocking(move || floor::floor(&native, n, false)).await??
        } else {
            Stat::new("µs", vec![])
        };
        eprintln!("  floor                              {}", f.show());
        for (name, variant, s) in &sessions {
            for (caller, spawned) in [("block_on", false), ("task", true)] {
                let label = format!("{name:<6} {variant:<13} {caller:<8}");
                if !wanted(&label) {
                    continue;
                }
                let (stat, cpu, cs) = measured(s, n, spawned).await?;
                eprintln!(
                    "  {label}   {}  {:.2}× floor  cpu {cpu:.1} µs  cs {cs:.2}",
                    stat.show(),
                    stat.median() / f.median()
                );
            }
        }
        for (name, variant, s) in &sessions {
            for (caller, spawned) in [("block_on", false), ("tasks", true)] {
                let label = format!("8 in flight {name:<6} {variant:<13} {caller:<8}");
                if !wanted(&label) {
                    continue;
                }
                let (stat, cpu, cs) = measured8(s, rounds, 4000, spawned).await?;
                eprintln!(
                    "  {label}   {} per call  cpu {cpu:.1} µs  cs {cs:.2}",
                    stat.show()
                );
            }
        }
    }
    for (_, _, s) in sessions {
        s.shutdown().await;
    }
    Ok(())
}
