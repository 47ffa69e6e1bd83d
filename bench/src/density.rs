//! Density (issue 42): N wasm Ticks in one host, against N processes, in
//! one run. For each N: one `tickbox mcp --ticks FILE` given N copies of
//! the bench Tick (`tests/guests/benchtick`, warm compile cache), against
//! N `wasmtime run` processes of the same component and N native builds of
//! the same source, each a Tick of its own on its stdio. (The bench Tick
//! rather than the example counter: the SDK's components import tickbox's
//! terminal interface, which `wasmtime run` cannot provide.) Three figures
//! per side:
//!
//! - **ready**: seconds from the first spawn until every Tick answers (the
//!   host: `initialize` and `tools/list` answered; a process: its
//!   `tick/describe`, all of them);
//! - **memory per Tick**: the host's resident memory over that of a host
//!   of one Tick, spread over the N − 1 others; a process's proportional
//!   set size (PSS: shared pages split among the processes sharing them,
//!   so N processes are not charged N times for one library);
//! - **a call at a random Tick**: `increment` by `tools/call` to the host,
//!   by `tick/call` to a process, one at a time; median and 99th
//!   percentile.
//!
//! Beside each host, one of the same N Ticks with `start = "on-first-use"`
//! and their catalog cached (a host of one ran first and cached it): its
//! ready time and memory before any call, and its calls (the first at each
//! Tick starts it), against the host whose Ticks started with it.
//!
//! The process anchors run only for the sizes this machine can hold:
//! [`WASMTIME_MAX`] and [`NATIVE_MAX`]; larger sizes say so. `wasmtime` is
//! found on PATH (BENCHMARKS.md says where to get one); without it its
//! anchor is left out, with a line saying so.
//! `TICKBOX_BENCH_ONLY_DENSITY=1` runs these rows alone;
//! `TICKBOX_BENCH_DENSITY_N=100,1000` chooses the sizes.

use super::first_start::wasmtime_cli;
use super::mcp::{mcp_command, Peer};
use super::ready::{runtime_dir, ticks_file_starting, Start};
use super::{build_guests, pss, rss_mib, smoke, tickbox_binary, Anchored, Stat};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The sizes: (full run, `--quick`, `--smoke`).
const SIZES: (&[usize], &[usize], &[usize]) = (&[100, 1000, 10_000], &[30, 300], &[2]);
/// Calls at random Ticks per size: (full run, `--quick`, `--smoke`).
const CALLS: (usize, usize, usize) = (2000, 300, 10);
/// The most `wasmtime run` processes started at once: an idle one holds
/// about 32 MiB, so 100 fill 3 GiB.
const WASMTIME_MAX: usize = 100;
/// The most native counter processes started at once (about 2 MiB each).
const NATIVE_MAX: usize = 1000;

const MIB: f64 = 1024.0 * 1024.0;
/// Issue 42's bounds on this machine: seconds to ready at 1,000 and at
/// 10,000 Ticks, MiB per idle Tick, a call's median at 1,000 (µs).
const READY_1000_S: f64 = 2.0;
const READY_10000_S: f64 = 20.0;
const MIB_PER_TICK: f64 = 0.4;
const CALL_MEDIAN_1000_US: f64 = 150.0;

/// What one side measured at one size.
struct Side {
    ready_s: f64,
    mib_per_tick: f64,
    call_us: Stat,
}

/// A small generator for the random Tick of each call: the same sequence
/// on every side, no dependency.
struct Pick(u64);

impl Pick {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

/// One host of `n` counters publishing in `run`: ready, its resident MiB,
/// and `calls` calls at random Ticks (µs each).
fn host(
    tickbox: &Path,
    wasm: &Path,
    dir: &Path,
    run: &Path,
    (n, start): (usize, Start),
    calls: usize,
) -> Result<(f64, f64, Vec<f64>)> {
    let ticks = ticks_file_starting(dir, wasm, n, start)?;
    let mut cmd = mcp_command(
        tickbox,
        &["--ticks".as_ref(), ticks.as_os_str()],
        &dir.join("cache"),
    );
    cmd.env("XDG_RUNTIME_DIR", run);
    let log = dir.join(format!("host-{n}.log"));
    let t = Instant::now();
    let mut peer = Peer::spawn_with_stderr(cmd, std::fs::File::create(&log)?.into())?;
    // A host that ends while starting says why on stderr: its last line.
    let why = |e: anyhow::Error| {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        let last = said.lines().last().unwrap_or("").to_string();
        e.context(format!("the host of {n} Ticks: {last}"))
    };
    peer.initialize().map_err(why)?;
    let tools = peer.request(1, "tools/list", json!({})).map_err(why)?;
    let ready = t.elapsed().as_secs_f64();
    let listed = tools["result"]["tools"].as_array().map_or(0, Vec::len);
    if listed < n {
        bail!("tools/list of {n} hosted bench Ticks named {listed} tools");
    }
    let mib = rss_mib(peer.pid());
    let mut pick = Pick(n as u64);
    let mut us = Vec::with_capacity(calls);
    for id in 0..calls {
        let name = format!("c{}_increment", pick.next(n) + 1);
        let t = Instant::now();
        let answer = peer.request(
            2 + id as u64,
            "tools/call",
            json!({"name": name, "arguments": {}}),
        )?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
        if answer["result"]["isError"] != false {
            bail!("{name} failed: {answer}");
        }
    }
    peer.stop();
    Ok((ready, mib, us))
}

/// `n` processes of one Tick command: ready, PSS per process, and `calls`
/// `tick/call`s at random processes (µs each).
fn processes(command: &[&Path], n: usize, calls: usize) -> Result<Side> {
    let t = Instant::now();
    let mut ticks = Vec::with_capacity(n);
    for _ in 0..n {
        let mut cmd = Command::new(command[0]);
        cmd.args(&command[1..]);
        ticks.push(Peer::spawn(cmd)?);
    }
    let mut revision = String::new();
    for (i, tick) in ticks.iter_mut().enumerate() {
        let described = tick.request(i as u64, "tick/describe", json!({}))?;
        revision = described["result"]["revision"]
            .as_str()
            .context("a describe without a revision")?
            .to_string();
    }
    let ready_s = t.elapsed().as_secs_f64();
    let pss_mib: f64 = ticks.iter().map(|p| pss(p.pid() as i32) / MIB).sum();
    let mut pick = Pick(n as u64);
    let mut us = Vec::with_capacity(calls);
    for id in 0..calls {
        let tick = &mut ticks[pick.next(n)];
        let t = Instant::now();
        tick.request(
            (n + id) as u64,
            "tick/call",
            json!({"tool": "increment", "args": {}, "revision": revision}),
        )?;
        us.push(t.elapsed().as_secs_f64() * 1e6);
    }
    for tick in ticks {
        tick.stop();
    }
    Ok(Side {
        ready_s,
        mib_per_tick: pss_mib / n as f64,
        call_us: Stat::new("µs", us),
    })
}

/// The rows (module docs).
pub async fn rows(quick: bool) -> Result<Vec<Anchored>> {
    let sizes: Vec<usize> = match std::env::var("TICKBOX_BENCH_DENSITY_N") {
        Ok(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .context("TICKBOX_BENCH_DENSITY_N: sizes, comma-separated")
            })
            .collect::<Result<_>>()?,
        Err(_) if smoke() => SIZES.2.to_vec(),
        Err(_) if quick => SIZES.1.to_vec(),
        Err(_) => SIZES.0.to_vec(),
    };
    let calls = if smoke() {
        CALLS.2
    } else if quick {
        CALLS.1
    } else {
        CALLS.0
    };
    let guests = build_guests()?;
    let (wasm, native) = (guests.wasm, guests.native);
    let wasmtime = wasmtime_cli();
    if wasmtime.is_none() {
        eprintln!("  no wasmtime CLI on PATH: the `wasmtime run` anchor is left out");
    }
    let tickbox = tickbox_binary()?;
    let dir = std::env::temp_dir().join(format!("tickbox-bench-density-{}", std::process::id()));
    let run = runtime_dir("density", dir.join("run"));
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(&run)?;
    let host_run = run.clone();
    let measured = tokio::task::spawn_blocking(move || -> Result<Vec<Anchored>> {
        let run = host_run;
        // Warm: the counter's code in the compile cache; the one-Tick host's
        // memory is what the others are measured over.
        let (_, one_mib, _) = host(&tickbox, &wasm, &dir, &run, (1, Start::WithHost), 0)?;
        // The same for Ticks started on first use: the first host of one
        // starts it (nothing cached) and caches its catalog, which every
        // copy shares; the second holds it unstarted.
        host(&tickbox, &wasm, &dir, &run, (1, Start::OnFirstUse), 0)?;
        let (_, one_lazy_mib, _) = host(&tickbox, &wasm, &dir, &run, (1, Start::OnFirstUse), 0)?;
        let mut rows = Vec::new();
        for &n in &sizes {
            eprintln!("  {n} Ticks: one host, one of Ticks started on first use, then processes…");
            let (ready_s, mib, us) =
                match host(&tickbox, &wasm, &dir, &run, (n, Start::WithHost), calls) {
                    Ok(measured) => measured,
                    Err(e) => {
                        // Reported, and the other sizes still measured.
                        eprintln!("  {n} Ticks in one host failed: {e:#}");
                        continue;
                    }
                };
            let hosted = Side {
                ready_s,
                mib_per_tick: (mib - one_mib) / (n.max(2) - 1) as f64,
                call_us: Stat::new("µs", us),
            };
            match host(&tickbox, &wasm, &dir, &run, (n, Start::OnFirstUse), calls) {
                Ok((ready_s, mib, us)) => rows.extend(lazy_rows(
                    n,
                    &Side {
                        ready_s,
                        mib_per_tick: (mib - one_lazy_mib) / (n.max(2) - 1) as f64,
                        call_us: Stat::new("µs", us),
                    },
                    &hosted,
                )),
                Err(e) => eprintln!("  {n} Ticks started on first use failed: {e:#}"),
            }
            let wasmtime = match &wasmtime {
                Some(cli) if n <= WASMTIME_MAX => {
                    Some(processes(&[cli, Path::new("run"), &wasm], n, calls)?)
                }
                _ => None,
            };
            let native = (n <= NATIVE_MAX)
                .then(|| processes(&[&native], n, calls))
                .transpose()?;
            rows.extend(side_rows(n, &hosted, wasmtime.as_ref(), native.as_ref()));
        }
        Ok(rows)
    })
    .await;
    let _ = std::fs::remove_dir_all(&run);
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("tickbox-bench-density-{}", std::process::id())),
    );
    measured?
}

/// One size's rows for Ticks started on first use (`start =
/// "on-first-use"`, their catalog cached), against the same host's Ticks
/// started with it: ready and memory before any call, and the calls, of
/// which the first at each Tick starts it.
fn lazy_rows(n: usize, lazy: &Side, eager: &Side) -> Vec<Anchored> {
    let one = |v: f64, unit| Stat::new(unit, vec![v]);
    let against = "Ticks started with the host";
    vec![
        Anchored {
            name: format!("density, {n} Ticks on first use: ready"),
            value: one(lazy.ready_s, "s"),
            anchor: Some((against, one(eager.ready_s, "s"))),
            target: None,
        },
        Anchored {
            name: format!("density, {n} Ticks on first use: MiB per Tick, unstarted"),
            value: one(lazy.mib_per_tick, "MiB"),
            anchor: Some((against, one(eager.mib_per_tick, "MiB"))),
            target: None,
        },
        Anchored {
            name: format!("density, {n} Ticks on first use: a call (a first starts it)"),
            value: lazy.call_us.clone(),
            anchor: Some((against, eager.call_us.clone())),
            target: None,
        },
    ]
}

/// One size's rows: the host's figures, each against the processes'.
fn side_rows(
    n: usize,
    host: &Side,
    wasmtime: Option<&Side>,
    native: Option<&Side>,
) -> Vec<Anchored> {
    let one = |v: f64, unit| Stat::new(unit, vec![v]);
    // The anchor a row shows: `wasmtime run` where it ran, else native.
    let anchor = |f: &dyn Fn(&Side) -> Stat| -> Option<(&'static str, Stat)> {
        match (wasmtime, native) {
            (Some(w), _) => Some(("N × wasmtime run", f(w))),
            (None, Some(p)) => Some(("N native processes", f(p))),
            (None, None) => None,
        }
    };
    let mut rows = vec![
        Anchored {
            name: format!("density, {n} Ticks: ready"),
            value: one(host.ready_s, "s"),
            anchor: anchor(&|s| one(s.ready_s, "s")),
            target: match n {
                1000 => Some((format!("≤ {READY_1000_S} s"), host.ready_s <= READY_1000_S)),
                10_000 => Some((
                    format!("≤ {READY_10000_S} s"),
                    host.ready_s <= READY_10000_S,
                )),
                _ => None,
            },
        },
        Anchored {
            name: format!("density, {n} Ticks: MiB per Tick"),
            value: one(host.mib_per_tick, "MiB"),
            anchor: anchor(&|s| one(s.mib_per_tick, "MiB")),
            target: (n >= 100).then(|| {
                (
                    format!("≤ {MIB_PER_TICK} MiB"),
                    host.mib_per_tick <= MIB_PER_TICK,
                )
            }),
        },
        Anchored {
            name: format!("density, {n} Ticks: a call at a random Tick"),
            value: host.call_us.clone(),
            anchor: anchor(&|s| s.call_us.clone()),
            target: (n == 1000).then(|| {
                let median = host.call_us.median();
                (
                    format!("median ≤ {CALL_MEDIAN_1000_US} µs"),
                    median <= CALL_MEDIAN_1000_US,
                )
            }),
        },
        Anchored {
            name: "  the same, 99th percentile".to_string(),
            value: one(host.call_us.pct(0.99), "µs"),
            anchor: anchor(&|s| one(s.call_us.pct(0.99), "µs")),
            target: None,
        },
    ];
    if let (Some(_), Some(p)) = (wasmtime, native) {
        rows.push(Anchored {
            name: format!("  {n} native processes: ready; MiB; call"),
            value: one(p.ready_s, "s"),
            anchor: Some(("PSS MiB per process", one(p.mib_per_tick, "MiB"))),
            target: None,
        });
        rows.push(Anchored {
            name: format!("  {n} native processes: a call at a random one"),
            value: p.call_us.clone(),
            anchor: None,
            target: None,
        });
    }
    rows
}
