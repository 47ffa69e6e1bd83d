//! How the facade's start-up grows with the number of Ticks it hosts
//! (issue 42): one `tickbox mcp --ticks FILE` given N copies of the example
//! counter (wasm, warm compile cache) and, in the same run, one given
//! 10·N, each timed from its spawn to its answer to `tools/list` (after
//! `initialize`), the way an MCP client meets it. The anchor is linear
//! growth, ten times the N host's time: a ratio near 1× (below it, the
//! fixed cost of a process start is spread thinner) is linear, a
//! quadratic start-up shows as about 10×. The sizes are sampled in
//! alternation, so both see the same load; each host has a private
//! live-instance directory (`XDG_RUNTIME_DIR`), so instances the person
//! runs are neither counted nor disturbed.
//!
//! Also reported: the resident memory each Tick adds once ready, the
//! 10·N host's less the N host's over the 9·N Ticks between them (so the
//! process's own memory is not spread over its Ticks).
//! `TICKBOX_BENCH_ONLY_READY=1` runs these rows alone;
//! `TICKBOX_BENCH_READY_N=N` changes N.

use super::mcp::{counter_wasm, mcp_command, Peer};
use super::{rss_mib, smoke, tickbox_binary, Anchored, Stat};
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The smaller host's Ticks: (full run, `--quick`, `--smoke`).
const N: (usize, usize, usize) = (100, 30, 2);
/// Samples of each size: (full run, `--quick`, `--smoke`).
const ROUNDS: (usize, usize, usize) = (5, 3, 1);
/// The bound on 1,000 Ticks' start-up, judged when 10·N is 1,000.
const READY_1000_SECS: f64 = 2.0;
/// Growth this far over linear fails the row's target: N^1.2 over a
/// decade is 1.6×, the quadratic start-up issue 42 measured (N^1.6) 4×.
const MAX_OVER_LINEAR: f64 = 2.0;

/// A `--ticks` file of `n` copies of `wasm`, named `c1`…`cN`.
pub(crate) fn ticks_file(dir: &Path, wasm: &Path, n: usize) -> Result<PathBuf> {
    ticks_file_starting(dir, wasm, n, Start::WithHost)
}

/// When the Ticks of a bench host start (the ticks file's `start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    WithHost,
    OnFirstUse,
}

/// [`ticks_file`] with every entry starting as `start` says.
pub(crate) fn ticks_file_starting(
    dir: &Path,
    wasm: &Path,
    n: usize,
    start: Start,
) -> Result<PathBuf> {
    let (suffix, line) = match start {
        Start::WithHost => ("", ""),
        Start::OnFirstUse => ("-on-first-use", "start = \"on-first-use\"\n"),
    };
    let path = dir.join(format!("ticks-{n}{suffix}.toml"));
    let wasm = wasm.to_str().context("the counter's path is not UTF-8")?;
    let mut text = String::new();
    for i in 1..=n {
        text += &format!(
            "[[tick]]\nname = \"c{i}\"\npath = {}\n{line}\n",
            json!(wasm)
        );
    }
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The live-instance directory a bench host publishes in: on tmpfs, as
/// `$XDG_RUNTIME_DIR` is where systemd makes it (`/run/user/UID`), when
/// `/dev/shm` is there; otherwise `fallback`. On a disk file system, the
/// thousands of sockets and name links a big host makes and removes cost
/// the file system's own bookkeeping (ext4's inode reuse checks grew with
/// every run), which is not what the rows measure.
pub(crate) fn runtime_dir(tag: &str, fallback: PathBuf) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join(format!("tickbox-bench-{tag}-{}", std::process::id()))
    } else {
        fallback
    }
}

/// Seconds from spawning `tickbox mcp --ticks FILE` to its `tools/list`
/// answer, and its resident MiB then.
fn ready_once(
    tickbox: &Path,
    ticks: &Path,
    n: usize,
    cache: &Path,
    run: &Path,
) -> Result<(f64, f64)> {
    let mut cmd = mcp_command(tickbox, &["--ticks".as_ref(), ticks.as_os_str()], cache);
    cmd.env("XDG_RUNTIME_DIR", run);
    let t = Instant::now();
    let mut host = Peer::spawn(cmd)?;
    host.initialize()?;
    let tools = host.request(1, "tools/list", json!({}))?;
    let secs = t.elapsed().as_secs_f64();
    let listed = tools["result"]["tools"].as_array().map_or(0, Vec::len);
    if listed < n {
        bail!("tools/list of {n} hosted counters named {listed} tools");
    }
    let mib = rss_mib(host.pid());
    host.stop();
    Ok((secs, mib))
}

/// The rows (module docs).
pub async fn rows(quick: bool) -> Result<Vec<Anchored>> {
    let pick = |(full, q, s): (usize, usize, usize)| {
        if smoke() {
            s
        } else if quick {
            q
        } else {
            full
        }
    };
    let n = std::env::var("TICKBOX_BENCH_READY_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| pick(N));
    let rounds = pick(ROUNDS);
    let wasm = counter_wasm()?;
    let tickbox = tickbox_binary()?;
    let dir = std::env::temp_dir().join(format!("tickbox-bench-ready-{}", std::process::id()));
    let (cache, run) = (dir.join("cache"), runtime_dir("ready", dir.join("run")));
    std::fs::create_dir_all(&dir)?;
    std::fs::create_dir_all(&run)?;
    let run_dir = run.clone();
    let small = ticks_file(&dir, &wasm, n)?;
    let big = ticks_file(&dir, &wasm, 10 * n)?;
    eprintln!(
        "  ready of {n} and {} hosted counters, {rounds} each…",
        10 * n
    );
    let measured = tokio::task::spawn_blocking(move || -> Result<_> {
        // Warm: the counter's optimized code in the cache, the binary paged in.
        ready_once(&tickbox, &small, n, &cache, &run)?;
        let (mut at_n, mut at_10n, mut mib) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            let (mut small_mib, mut big_mib) = (0.0, 0.0);
            for big_one in order {
                if big_one {
                    let (s, m) = ready_once(&tickbox, &big, 10 * n, &cache, &run)?;
                    at_10n.push(s);
                    big_mib = m;
                } else {
                    let (s, m) = ready_once(&tickbox, &small, n, &cache, &run)?;
                    at_n.push(s);
                    small_mib = m;
                }
            }
            mib.push((big_mib - small_mib) / (9 * n) as f64);
        }
        Ok((at_n, at_10n, mib))
    })
    .await;
    let _ = std::fs::remove_dir_all(&run_dir);
    let _ = std::fs::remove_dir_all(&dir);
    let (at_n, at_10n, mib) = measured??;
    let linear = Stat::new("s", at_n.iter().map(|s| s * 10.0).collect());
    let big = Stat::new("s", at_10n);
    let over = big.median() / linear.median();
    let mut rows = vec![
        Anchored {
            name: format!("tickbox mcp ready (initialize + tools/list), {n} counters"),
            value: Stat::new("s", at_n),
            anchor: None,
            target: None,
        },
        Anchored {
            name: format!("tickbox mcp ready, {} counters", 10 * n),
            value: big.clone(),
            anchor: Some(("linear: 10 × the N host", linear)),
            target: Some((
                format!("≤ {MAX_OVER_LINEAR}× linear (got {over:.2}×)"),
                over <= MAX_OVER_LINEAR,
            )),
        },
        Anchored {
            name: format!("  resident memory per Tick, {n} to {} counters", 10 * n),
            value: Stat::new("MiB", mib),
            anchor: None,
            target: None,
        },
    ];
    if 10 * n == 1000 {
        let got = big.median();
        rows.push(Anchored {
            name: "tickbox mcp ready, 1000 counters (issue 42's bound)".into(),
            value: big,
            anchor: None,
            target: Some((
                format!("≤ {READY_1000_SECS} s (got {got:.2} s)"),
                got <= READY_1000_SECS,
            )),
        });
    }
    Ok(rows)
}
