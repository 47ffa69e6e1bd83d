//! `tickbox-bench`: measures what a sandboxed Tick costs next to a native
//! one, in one run on one machine, and prints the figures side by side.
//!
//! ```sh
//! cargo run --release --bin tickbox-bench            # full run, ~2 minutes
//! cargo run --release --bin tickbox-bench -- --quick # fewer samples
//! cargo run -p tickbox-bench -- --smoke              # CI: every path once, figures meaningless
//! ```
//!
//! Both sides run the same guest source (`tests/guests/benchtick`), built
//! natively and for wasm32-wasip2 by this program (release, nested cargo).
//! Every figure is a median over samples with the 10th–90th percentile
//! spread; the same figures go to a JSON file (`--json PATH`, default
//! `target/tickbox-bench.json`). BENCHMARKS.md explains each number.
//!
//! For profiling one part: `TICKBOX_BENCH_ONLY_START=1` (200 warm-disk
//! starts), `TICKBOX_BENCH_ONLY_RT=1` (round trips only, every variant interleaved:
//! `round_trips.rs`) or
//! `TICKBOX_BENCH_ONLY_FIRST=1` (first starts and whole-process starts only),
//! `TICKBOX_BENCH_ONLY_TRIM=1` (trimming only, no guests built),
//! `TICKBOX_BENCH_ONLY_SOAK=1` (the live-call soak only),
//! `TICKBOX_BENCH_ONLY_MCP=1` (the MCP rows only, see `mcp.rs`),
//! `TICKBOX_BENCH_ONLY_READY=1` (the facade's ready time at N and 10·N
//! hosted Ticks against linear growth, see `ready.rs`),
//! `TICKBOX_BENCH_ONLY_DENSITY=1` (N Ticks in one host against N
//! `wasmtime run` and N native processes, see `density.rs`),
//! `TICKBOX_BENCH_ONLY_COST=1` (the cost of audit, metrics and
//! OpenTelemetry on an MCP call, `mcp::cost_rows`; `TICKBOX_BENCH_COST_ROUNDS=N`
//! gives a full run N rounds instead of 60),
//! `TICKBOX_BENCH_ONLY_TUITEST=1` (`tickbox test` against tui-test only,
//! every size of the full run; see `tui_test.rs`);
//! `TICKBOX_BENCH_WORKERS=N` changes the runtime's worker threads (0: a
//! current-thread runtime).

mod density;
mod first_start;
mod floor;

mod mcp;
mod ready;
mod registry;
mod round_trips;
mod tui_test;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_runtime::backend::native::{self, NativeSpec};
use tickbox_runtime::backend::wasm::{self, grants::Grants, WasmEngine, WasmSpec};
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig};

/// `--smoke`: every measurement runs with the smallest sizes, so CI can
/// check that the bench still works; its figures mean nothing.
static SMOKE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn smoke() -> bool {
    SMOKE.load(std::sync::atomic::Ordering::Relaxed)
}

/// One measured quantity: samples in its unit.
#[derive(Clone)]
struct Stat {
    unit: &'static str,
    samples: Vec<f64>,
}

impl Stat {
    fn new(unit: &'static str, mut samples: Vec<f64>) -> Stat {
        samples.sort_by(|a, b| a.total_cmp(b));
        Stat { unit, samples }
    }
    fn pct(&self, p: f64) -> f64 {
        if self.samples.is_empty() {
            return f64::NAN;
        }
        let i = ((self.samples.len() - 1) as f64 * p).round() as usize;
        self.samples[i]
    }
    fn median(&self) -> f64 {
        self.pct(0.5)
    }
    fn show(&self) -> String {
        if self.samples.len() == 1 {
            return format!("{} {}", fmt(self.median()), self.unit);
        }
        format!(
            "{} {} ({}–{})",
            fmt(self.median()),
            self.unit,
            fmt(self.pct(0.1)),
            fmt(self.pct(0.9))
        )
    }
    fn json(&self) -> Value {
        json!({"unit": self.unit, "median": self.median(), "p10": self.pct(0.1), "p90": self.pct(0.9), "p99": self.pct(0.99), "n": self.samples.len()})
    }
}

fn fmt(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// A row of the table: one measure, wasm vs native, and the target on their ratio.
struct Row {
    name: &'static str,
    wasm: Option<Stat>,
    native: Option<Stat>,
    /// (description, passes?) when the row carries a target.
    target: Option<(String, bool)>,
}

/// A row measured against an anchor of its own (not the native Tick): a
/// floor, another compiler, another process.
struct Anchored {
    name: String,
    value: Stat,
    /// What the anchor is, and its figure from the same run.
    anchor: Option<(&'static str, Stat)>,
    target: Option<(String, bool)>,
}

impl Anchored {
    fn ratio(&self) -> Option<f64> {
        self.anchor
            .as_ref()
            .map(|(_, a)| self.value.median() / a.median())
    }
}

struct Guests {
    native: PathBuf,
    wasm: PathBuf,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

fn build_guests() -> Result<Guests> {
    build_guests_at(None)
}

/// Builds the bench Tick with the guest workspace's release profile, or with
/// `opt_level` instead (into a target dir of its own, so neither build
/// replaces the other).
fn build_guests_at(opt_level: Option<&str>) -> Result<Guests> {
    let out = match opt_level {
        None => target_dir().join("bench-guests"),
        Some(o) => target_dir().join(format!("bench-guests-o{o}")),
    };
    let manifest = root().join("tests/guests/Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for target in [None, Some("wasm32-wasip2")] {
        let mut cmd = Command::new(&cargo);
        cmd.args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "benchtick",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&out)
        .env_remove("CARGO_TARGET_DIR");
        if let Some(o) = opt_level {
            cmd.args(["--config", &format!("profile.release.opt-level={o}")]);
        }
        if let Some(t) = target {
            cmd.args(["--target", t]);
        }
        let status = cmd
            .status()
            .context("running cargo to build the bench guest")?;
        if !status.success() {
            bail!("building the bench guest failed (is wasm32-wasip2 installed? `rustup target add wasm32-wasip2`)");
        }
    }
    Ok(Guests {
        native: out.join("release/benchtick"),
        wasm: out.join("wasm32-wasip2/release/benchtick.wasm"),
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Backend {
    Wasm,
    Native,
}

struct Bench {
    guests: Guests,
    quick: bool,
    cache_dir: PathBuf,
}

impl Bench {
    fn n(&self, full: usize) -> usize {
        if smoke() {
            (full / 100).max(2)
        } else if self.quick {
            (full / 5).max(3)
        } else {
            full
        }
    }

    async fn start(&self, backend: Backend, engine: &Arc<WasmEngine>) -> Result<Session> {
        self.start_guest(backend, engine, SessionConfig::default(), &self.guests, &[])
            .await
    }

    /// Starts `guests`' build of the bench Tick with `args`.
    async fn start_guest(
        &self,
        backend: Backend,
        engine: &Arc<WasmEngine>,
        config: SessionConfig,
        guests: &Guests,
        args: &[&str],
    ) -> Result<Session> {
        let io = match backend {
            Backend::Native => {
                let argv = std::iter::once(guests.native.to_string_lossy().into_owned())
                    .chain(args.iter().map(|a| a.to_string()));
                native::spawn(&NativeSpec::new(argv))?
            }
            Backend::Wasm => {
                let spec = WasmSpec {
                    path: guests.wasm.clone(),
                    args: args.iter().map(|a| a.to_string()).collect(),
                    grants: Grants::default(),
                    instance_id: None,
                    exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
                    pin: None,
                    audit: None,
                };
                wasm::spawn(engine, &spec).await?
            }
        };
        Ok(Session::start(io, config).await?)
    }

    /// Start-to-initialized, `n` times, each Tick shut down after.
    async fn starts(
        &self,
        backend: Backend,
        n: usize,
        engine: impl Fn() -> Result<Arc<WasmEngine>>,
    ) -> Result<Stat> {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let e = engine()?;
            let t = Instant::now();
            let s = self.start(backend, &e).await?;
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            s.shutdown().await;
        }
        Ok(Stat::new("ms", samples))
    }
}

async fn call(s: &Session, tool: &str, args: Value) -> Result<Value> {
    let d = s.descriptor().context("no catalog")?;
    let c = d.prepare(tool, args)?;
    match s.call(&c).await {
        CallOutcome::Ok(v) => Ok(v),
        other => bail!("{tool}: {other:?}"),
    }
}

/// Per-request latency of `n` sequential requests, in µs.
async fn sequential(s: &Session, n: usize, read: bool) -> Result<Stat> {
    let c = s
        .descriptor()
        .context("no catalog")?
        .prepare("get", json!({}))?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        if read {
            s.read().await?;
        } else if !matches!(s.call(&c).await, CallOutcome::Ok(_)) {
            bail!("get failed");
        }
        if i >= n / 10 {
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(Stat::new("µs", samples))
}

/// [`sequential`] from a task spawned on the runtime's workers.
async fn sequential_task(s: &Arc<Session>, n: usize, read: bool) -> Result<Stat> {
    let s = s.clone();
    tokio::spawn(async move { sequential(&s, n, read).await }).await?
}

/// Effective time per call with 8 in flight: wall time / calls, in µs, per round.
async fn concurrent(s: &Session, rounds: usize, per_round: usize) -> Result<Stat> {
    let c = s
        .descriptor()
        .context("no catalog")?
        .prepare("get", json!({}))?;
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let lanes = (0..8).map(|_| async {
            for _ in 0..per_round / 8 {
                if !matches!(s.call(&c).await, CallOutcome::Ok(_)) {
                    return false;
                }
            }
            true
        });
        let ok = join_all(lanes).await;
        if ok.iter().any(|ok| !ok) {
            bail!("a concurrent call failed");
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / per_round as f64);
    }
    Ok(Stat::new("µs", samples))
}

/// The 8-in-flight row (8 tasks) of a wasm and a native session, with its
/// target: wasm ≤ native.
async fn in_flight_row(
    name: &'static str,
    (wasm, native): (&Arc<Session>, &Arc<Session>),
    rounds: usize,
    per_round: usize,
) -> Result<Row> {
    let w8 = concurrent_tasks(wasm, rounds, per_round).await?;
    let n8 = concurrent_tasks(native, rounds, per_round).await?;
    let r = w8.median() / n8.median();
    Ok(Row {
        name,
        wasm: Some(w8),
        native: Some(n8),
        target: Some((format!("≤ 1× native (got {r:.2}×)"), r <= 1.0)),
    })
}

/// Like [`concurrent`], but each of the 8 lanes is its own spawned task,
/// as 8 clients of a host are (a live connection's task, an MCP request's).
async fn concurrent_tasks(s: &Arc<Session>, rounds: usize, per_round: usize) -> Result<Stat> {
    let c = s
        .descriptor()
        .context("no catalog")?
        .prepare("get", json!({}))?;
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let lanes: Vec<_> = (0..8)
            .map(|_| {
                let (s, c) = (s.clone(), c.clone());
                tokio::spawn(async move {
                    for _ in 0..per_round / 8 {
                        if !matches!(s.call(&c).await, CallOutcome::Ok(_)) {
                            return false;
                        }
                    }
                    true
                })
            })
            .collect();
        for lane in lanes {
            if !lane.await? {
                bail!("a concurrent call failed");
            }
        }
        samples.push(t.elapsed().as_secs_f64() * 1e6 / per_round as f64);
    }
    Ok(Stat::new("µs", samples))
}

async fn join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut futs: Vec<_> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futs.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// CPU seconds used by this process (user + system).
fn self_cpu() -> f64 {
    // SAFETY: getrusage writes into the struct we pass and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Our live child processes (the native Ticks).
fn children() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let fields: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            if fields.get(1).and_then(|p| p.parse::<i32>().ok()) == Some(me) {
                out.push(pid);
            }
        }
    }
    out
}

/// CPU seconds a process has used (user + system, every thread, also those
/// that ended), from `/proc/PID/stat`: counted in clock ticks (10 ms), so a
/// span of a quarter second reads to within 4%. None once it is gone.
fn process_cpu(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command: state is field 3, utime and stime fields 14, 15.
    let f: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok());
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((ticks(11)? + ticks(12)?) / hz)
}

/// CPU seconds of our children so far.
fn children_cpu() -> f64 {
    children().into_iter().filter_map(process_cpu).sum()
}

/// Proportional set size of a process in bytes (shared pages split fairly).
fn pss(pid: i32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    kib_field(&text, "Pss:") * 1024.0
}

fn kib_field(text: &str, key: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
}

fn self_rss() -> f64 {
    kib_field(
        &std::fs::read_to_string("/proc/self/status").unwrap_or_default(),
        "VmRSS:",
    ) * 1024.0
}

/// Updates ingested per second while the Tick floods, and CPU µs per update.
async fn updates(s: &Session, n: u64, rounds: usize) -> Result<(Stat, Stat)> {
    let mut rate = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..rounds {
        let before = s.state().updates;
        let (c0, k0) = (self_cpu(), children_cpu());
        let t = Instant::now();
        // The call's answer comes after its updates on the same stream, so
        // when it returns every update has been parsed, checked and kept.
        call(s, "flood", json!({"n": n})).await?;
        let secs = t.elapsed().as_secs_f64();
        let used = (self_cpu() - c0) + (children_cpu() - k0);
        let got = s.state().updates - before;
        if got != n {
            bail!("expected {n} updates, ingested {got}");
        }
        rate.push(n as f64 / secs);
        cpu.push(used * 1e6 / n as f64);
    }
    Ok((Stat::new("updates/s", rate), Stat::new("µs CPU", cpu)))
}

/// Starts `n` idle Ticks at once; returns (time to start all, bytes per Tick).
async fn density(
    bench: &Bench,
    backend: Backend,
    n: usize,
    engine: &Arc<WasmEngine>,
) -> Result<(Stat, Stat)> {
    // Warm the code path (and the wasm in-memory cache) outside the measure.
    bench.start(backend, engine).await?.shutdown().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss0 = self_rss();
    let t = Instant::now();
    let sessions = join_all((0..n).map(|_| bench.start(backend, engine))).await;
    let elapsed = t.elapsed().as_secs_f64() * 1e3;
    let sessions: Vec<Session> = sessions.into_iter().collect::<Result<_>>()?;
    // Let the Ticks settle into idleness before looking at memory.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let host = self_rss() - rss0;
    let kids: f64 = children().iter().map(|&p| pss(p)).sum();
    let per = (host + kids) / n as f64 / (1024.0 * 1024.0);
    for s in &sessions {
        s.shutdown().await;
    }
    drop(sessions);
    Ok((Stat::new("ms", vec![elapsed]), Stat::new("MiB", vec![per])))
}

fn ratio(w: &Option<Stat>, n: &Option<Stat>) -> Option<f64> {
    Some(w.as_ref()?.median() / n.as_ref()?.median())
}

/// The state the trimming row trims: 50,000 small items in about 512 KiB
/// (a declared series of 25,000 numbers, an undeclared array of 25,000
/// short strings, one longer string), the shape that made the first
/// trimmer take seconds.
fn wide_state() -> (
    tickbox_runtime::protocol::TickState,
    tickbox_runtime::protocol::Descriptor,
) {
    let recent: Vec<Value> = (0..25_000).map(|i| json!(i)).collect();
    let names: Vec<Value> = (0..25_000).map(|i| json!(format!("name-{i:06}"))).collect();
    let mut data = json!({"recent": recent, "names": names, "note": ""});
    // The note fills the state up to exactly 512 KiB encoded.
    let fill =
        (512 * 1024usize).saturating_sub(tickbox_runtime::protocol::message::encoded_len(&data));
    data["note"] = json!("n".repeat(fill));
    let descriptor = tickbox_runtime::protocol::Descriptor::parse(json!({
        "protocol": 3, "kind": "bench.wide", "title": "wide", "description": "",
        "revision": "1", "tools": [], "state": {"series": [{"path": "/recent", "newest": "last"}]}
    }))
    .expect("a valid descriptor");
    let state = tickbox_runtime::protocol::TickState {
        seq: 1,
        data: data.into(),
        at: None,
    };
    (state, descriptor)
}

/// Trimming a 512 KiB state of 50,000 items to the 16 KiB delivery budget,
/// against encoding the same state once (the anchor, same run).
fn trim_rows(quick: bool) -> Vec<Row> {
    use tickbox_runtime::delivery::{item_budget, Delivery};
    use tickbox_runtime::protocol::message::encoded_len;
    let (state, descriptor) = wide_state();
    let bytes = encoded_len(state.data.wire());
    let n = if smoke() {
        3
    } else if quick {
        20
    } else {
        100
    };
    let mut trim = Vec::new();
    let mut encode = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let d = Delivery::new(&state, 1, &descriptor, item_budget(1));
        trim.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(d.encoded_len() <= item_budget(1) && !d.data.is_null());
        let t = Instant::now();
        let v = serde_json::to_vec(&state.data).unwrap_or_default();
        encode.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(v);
    }
    let (trim, encode) = (Stat::new("ms", trim), Stat::new("ms", encode));
    let median = trim.median();
    let ratio = median / encode.median();
    eprintln!(
        "trimmed a {bytes}-byte state of 50,000 items: {}",
        trim.show()
    );
    vec![
        Row {
            name: "trim 512 KiB / 50,000 items to 16 KiB (host)",
            wasm: None,
            native: Some(trim),
            target: Some((
                format!("≤ 50 ms (got {median:.1} ms, {ratio:.1}× one encoding)"),
                median <= 50.0,
            )),
        },
        Row {
            name: "encode the same state once (anchor)",
            wasm: None,
            native: Some(encode),
            target: None,
        },
    ]
}

/// The `tickbox` binary beside this one, built if missing.
fn tickbox_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let beside = exe.with_file_name("tickbox");
    if !beside.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        // The profile this bench was built with (`--smoke` in CI runs debug).
        let profile: &[&str] = if cfg!(debug_assertions) {
            &[]
        } else {
            &["--release"]
        };
        let status = Command::new(cargo)
            .arg("build")
            .args(profile)
            .args(["--quiet", "--bin", "tickbox", "--manifest-path"])
            .arg(root().join("cli/Cargo.toml"))
            .status()?;
        if !status.success() || !beside.exists() {
            bail!("could not build the tickbox binary the bench runs");
        }
    }
    Ok(beside)
}

/// Resident memory of a process, MiB.
fn rss_mib(pid: u32) -> f64 {
    kib_field(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default(),
        "VmRSS:",
    ) / 1024.0
}

/// The soak: a host (`tickbox mcp`, which publishes its Tick) serves
/// `total` calls made exactly as `tickbox call @soak increment --yes` makes
/// them (resolve, a fresh describe, the call bound to its revision: three
/// connections each), with a `watch` attached throughout. Its RSS after
/// 1,000 calls against after all of them tells whether anything grows per
/// call or per connection.
async fn soak(guests: &Guests, quick: bool) -> Result<Vec<Row>> {
    use tickbox_runtime::live::wire::Request;
    use tickbox_runtime::live::{client, Registry};
    let tickbox = tickbox_binary()?;
    let dir = std::env::temp_dir().join(format!("tickbox-bench-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let registry = Registry::at(dir.join("tickbox"))?;
    let mut host = Command::new(&tickbox)
        .args(["mcp", "--name", "soak", "--"])
        .arg(&guests.native)
        .env("XDG_RUNTIME_DIR", &dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let pid = host.id();
    let result = async {
        let deadline = Instant::now() + Duration::from_secs(30);
        while client::resolve(&registry, "soak").await.is_err() {
            if Instant::now() > deadline {
                bail!("the soak host never published its Tick");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut watch = client::connect(&registry, "soak").await?;
        watch.start(Request::Watch { interval_ms: 20 }).await?;
        let watched = tokio::spawn(async move {
            let mut n = 0u64;
            while let Ok(Some(_)) = watch.next().await {
                n += 1;
            }
            n
        });
        let total = if smoke() {
            1_100
        } else if quick {
            5_000
        } else {
            20_000
        };
        let mut early = 0.0;
        let t = Instant::now();
        for i in 1..=total {
            let raw = client::connect(&registry, "soak")
                .await?
                .request(Request::Describe)
                .await?;
            let catalog = tickbox_runtime::protocol::Descriptor::parse(raw)?;
            let call = catalog.prepare("increment", json!({}))?;
            let reply = client::connect(&registry, "soak")
                .await?
                .request(Request::Call {
                    tool: call.tool,
                    args: call.args,
                    revision: call.revision,
                    timeout_ms: Some(60_000),
                })
                .await?;
            if reply["outcome"] != "ok" {
                bail!("soak call {i} failed: {reply}");
            }
            if i == 1_000 {
                early = rss_mib(pid);
            }
        }
        let per_call = t.elapsed().as_secs_f64() * 1e3 / total as f64;
        let late = rss_mib(pid);
        watched.abort();
        Ok((total, early, late, per_call))
    }
    .await;
    drop(host.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while host.try_wait().ok().flatten().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let _ = host.kill();
    let _ = host.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let (total, early, late, per_call) = result?;
    let growth = late / early;
    eprintln!("soak: {total} calls, RSS {early:.1} MiB after 1,000, {late:.1} MiB after all ({per_call:.2} ms a call)");
    Ok(vec![
        Row {
            name: "soak: host RSS after 1,000 live calls (watch attached)",
            wasm: None,
            native: Some(Stat::new("MiB", vec![early])),
            target: None,
        },
        Row {
            name: if quick {
                "soak: host RSS after 5,000 live calls"
            } else {
                "soak: host RSS after 20,000 live calls"
            },
            wasm: None,
            native: Some(Stat::new("MiB", vec![late])),
            target: Some((
                format!("≤ 1.10× the RSS after 1,000 (got {growth:.3}×)"),
                growth <= 1.10,
            )),
        },
        Row {
            name: "soak: one live call (resolve, describe, call)",
            wasm: None,
            native: Some(Stat::new("ms", vec![per_call])),
            target: None,
        },
    ])
}

async fn run(quick: bool, json_path: PathBuf) -> Result<()> {
    if std::env::var_os("TICKBOX_BENCH_ONLY_TRIM").is_some() {
        print_table(&trim_rows(quick));
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_MCP").is_some() {
        print_table(&mcp::rows(quick).await?);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_READY").is_some() {
        print_anchored(&ready::rows(quick).await?);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_DENSITY").is_some() {
        print_anchored(&density::rows(quick).await?);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_COST").is_some() {
        print_table(&mcp::cost_rows(quick).await?);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_TUITEST").is_some() {
        // The full sizes even with --quick: this switch is for the figures.
        let rows = tui_test::rows(&tickbox_binary()?, &tui_test_sizes(false))?;
        print_anchored(&rows);
        return Ok(());
    }
    eprintln!("building the bench guest (native and wasm32-wasip2)…");
    let guests = build_guests()?;
    if std::env::var_os("TICKBOX_BENCH_ONLY_SOAK").is_some() {
        print_table(&soak(&guests, quick).await?);
        return Ok(());
    }
    let cache_dir =
        std::env::temp_dir().join(format!("tickbox-bench-cache-{}", std::process::id()));
    let bench = Bench {
        guests,
        quick,
        cache_dir: cache_dir.clone(),
    };
    let engine = WasmEngine::new(Some(cache_dir.clone()))?;
    let mut rows = Vec::new();

    eprintln!("start…");
    // Populate the disk cache once.
    bench.start(Backend::Wasm, &engine).await?.shutdown().await;
    if std::env::var_os("TICKBOX_BENCH_ONLY_RT").is_some() {
        round_trips::run(&bench, &engine).await?;
        let _ = std::fs::remove_dir_all(&cache_dir);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_FIRST").is_some() {
        let tickbox = tickbox_binary()?;
        let mut anchored = first_start_rows(&tickbox, &bench).await?;
        anchored.extend(process_rows(&tickbox, &bench)?);
        print_anchored(&anchored);
        let _ = std::fs::remove_dir_all(&cache_dir);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_REGISTRY").is_some() {
        let tickbox = tickbox_binary()?;
        let n = if smoke() {
            2
        } else if bench.quick {
            5
        } else {
            15
        };
        print_anchored(&registry::rows(&tickbox, &bench.guests.wasm, n)?);
        let _ = std::fs::remove_dir_all(&cache_dir);
        return Ok(());
    }
    if std::env::var_os("TICKBOX_BENCH_ONLY_START").is_some() {
        let s = bench
            .starts(Backend::Wasm, 200, || {
                Ok(WasmEngine::new(Some(bench.cache_dir.clone()))?)
            })
            .await?;
        eprintln!("warm disk start {}", s.show());
        let _ = std::fs::remove_dir_all(&cache_dir);
        return Ok(());
    }
    let warm_disk = bench
        .starts(Backend::Wasm, bench.n(20), || {
            Ok(WasmEngine::new(Some(bench.cache_dir.clone()))?)
        })
        .await?;
    let warm_mem = bench
        .starts(Backend::Wasm, bench.n(30), || Ok(engine.clone()))
        .await?;
    let cold = bench
        .starts(Backend::Wasm, bench.n(5), || Ok(WasmEngine::new(None)?))
        .await?;
    let native_start = bench
        .starts(Backend::Native, bench.n(30), || Ok(engine.clone()))
        .await?;
    let r = ratio(&Some(warm_disk.clone()), &Some(native_start.clone())).unwrap_or(f64::NAN);
    rows.push(Row {
        name: "start, warm disk cache",
        wasm: Some(warm_disk),
        native: Some(native_start.clone()),
        target: Some((format!("≤ 0.5× native (got {r:.2}×)"), r <= 0.5)),
    });
    rows.push(Row {
        name: "start, warm in-process",
        wasm: Some(warm_mem),
        native: Some(native_start.clone()),
        target: None,
    });
    rows.push(Row {
        name: "start, no cache",
        wasm: Some(cold),
        native: Some(native_start),
        target: None,
    });

    eprintln!("first starts…");
    let tickbox = tickbox_binary()?;
    let mut anchored = first_start_rows(&tickbox, &bench).await?;

    eprintln!("round trips…");
    let w = Arc::new(bench.start(Backend::Wasm, &engine).await?);
    let nt = Arc::new(bench.start(Backend::Native, &engine).await?);
    let n = bench.n(3000);
    // Round trips are called from a task on the runtime's workers, where a
    // host's callers are (a live connection's task, an MCP request's); a
    // caller off the workers (this `block_on` future) is a row of its own.
    let (wc, nc) = (
        sequential_task(&w, n, false).await?,
        sequential_task(&nt, n, false).await?,
    );
    let r = ratio(&Some(wc.clone()), &Some(nc.clone())).unwrap_or(f64::NAN);
    rows.push(Row {
        name: "tick/call round trip",
        wasm: Some(wc),
        native: Some(nc),
        target: Some((format!("≤ 0.5× native (got {r:.2}×)"), r <= 0.5)),
    });
    let (wr, nr) = (
        sequential_task(&w, n, true).await?,
        sequential_task(&nt, n, true).await?,
    );
    let r = ratio(&Some(wr.clone()), &Some(nr.clone())).unwrap_or(f64::NAN);
    rows.push(Row {
        name: "tick/read round trip",
        wasm: Some(wr),
        native: Some(nr),
        target: Some((format!("≤ 0.5× native (got {r:.2}×)"), r <= 0.5)),
    });
    anchored.extend(floor_rows(&bench, &rows, n).await?);
    rows.push(Row {
        name: "tick/call round trip, caller off the workers (block_on)",
        wasm: Some(sequential(&w, n, false).await?),
        native: Some(sequential(&nt, n, false).await?),
        target: None,
    });
    let rounds = bench.n(10);
    let per_round = if smoke() { 80 } else { 4000 };
    rows.push(
        in_flight_row(
            "tick/call, 8 in flight (per call; 8 tasks)",
            (&w, &nt),
            rounds,
            per_round,
        )
        .await?,
    );
    rows.push(Row {
        name: "tick/call, 8 in flight (per call; one block_on future)",
        wasm: Some(concurrent(&w, rounds, per_round).await?),
        native: Some(concurrent(&nt, rounds, per_round).await?),
        target: None,
    });
    if !quick && !smoke() {
        // The same source at cargo's release default (opt-level 3) on both
        // sides: the guest workspace builds for size ("s"), which costs the
        // wasm guest's code more than the native one (BENCHMARKS.md).
        eprintln!("  8 in flight, bench Tick at opt-level 3…");
        let o3 = build_guests_at(Some("3"))?;
        let cfg = SessionConfig::default();
        let w3 = Arc::new(
            bench
                .start_guest(Backend::Wasm, &engine, cfg.clone(), &o3, &[])
                .await?,
        );
        let n3 = Arc::new(
            bench
                .start_guest(Backend::Native, &engine, cfg, &o3, &[])
                .await?,
        );
        rows.push(
            in_flight_row(
                "tick/call, 8 in flight (8 tasks; opt-level 3 Tick)",
                (&w3, &n3),
                rounds,
                per_round,
            )
            .await?,
        );
        for s in [w3, n3] {
            if let Ok(s) = Arc::try_unwrap(s) {
                s.shutdown().await;
            }
        }
    }

    eprintln!("updates…");
    let flood = if smoke() {
        2_000
    } else if quick {
        50_000
    } else {
        200_000
    };
    let ((wu, wcpu), (nu, ncpu)) = (
        updates(&w, flood, bench.n(5)).await?,
        updates(&nt, flood, bench.n(5)).await?,
    );
    let min_rate = wu.median().min(nu.median());
    rows.push(Row {
        name: "updates ingested",
        wasm: Some(wu),
        native: Some(nu),
        target: Some((
            format!("≥ 100000/s on both (slowest {min_rate:.0}/s)"),
            min_rate >= 100_000.0,
        )),
    });
    rows.push(Row {
        name: "CPU per update (host + Tick)",
        wasm: Some(wcpu),
        native: Some(ncpu),
        target: None,
    });

    eprintln!("sandbox tax…");
    let mut hw = Vec::new();
    let mut hn = Vec::new();
    for _ in 0..bench.n(5) {
        let t = Instant::now();
        call(&w, "hash", json!({"mb": 16})).await?;
        hw.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        call(&nt, "hash", json!({"mb": 16})).await?;
        hn.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (hw, hn) = (Stat::new("ms", hw), Stat::new("ms", hn));
    let r = hw.median() / hn.median();
    rows.push(Row {
        name: "hash 16 MiB (CPU-bound tool)",
        wasm: Some(hw),
        native: Some(hn),
        target: Some((format!("≤ 1.5× native (got {r:.2}×)"), r <= 1.5)),
    });
    w.shutdown().await;
    nt.shutdown().await;

    eprintln!("density…");
    let (n_small, n_big) = if smoke() {
        (5, 10)
    } else if quick {
        (50, 200)
    } else {
        (100, 1000)
    };
    let (t100, m100) = density(&bench, Backend::Wasm, n_small, &engine).await?;
    let (tn, mn) = density(&bench, Backend::Native, n_small, &engine).await?;
    rows.push(Row {
        name: if quick {
            "start 50 idle Ticks at once"
        } else {
            "start 100 idle Ticks at once"
        },
        wasm: Some(t100),
        native: Some(tn),
        target: None,
    });
    rows.push(Row {
        name: if quick {
            "memory per idle Tick (50)"
        } else {
            "memory per idle Tick (100)"
        },
        wasm: Some(m100),
        native: Some(mn),
        target: None,
    });
    let (t1000, m1000) = density(&bench, Backend::Wasm, n_big, &engine).await?;
    let per = m1000.median();
    rows.push(Row {
        name: if quick {
            "start 200 idle wasm Ticks"
        } else {
            "start 1000 idle wasm Ticks"
        },
        wasm: Some(t1000),
        native: None,
        target: None,
    });
    rows.push(Row {
        name: if quick {
            "memory per idle wasm Tick (200)"
        } else {
            "memory per idle wasm Tick (1000)"
        },
        wasm: Some(m1000),
        native: None,
        target: Some((format!("≤ 2 MiB (got {per:.2})"), per <= 2.0)),
    });

    eprintln!("trimming…");
    rows.extend(trim_rows(quick));
    eprintln!("soak…");
    rows.extend(soak(&bench.guests, quick).await?);
    eprintln!("mcp…");
    rows.extend(mcp::rows(quick).await?);
    eprintln!("facade ready time at N and 10·N Ticks…");
    anchored.extend(ready::rows(quick).await?);
    eprintln!("density: N Ticks in one host against N processes…");
    anchored.extend(density::rows(quick).await?);
    eprintln!("cost of audit, metrics and OpenTelemetry…");
    rows.extend(mcp::cost_rows(quick).await?);

    eprintln!("process starts…");
    anchored.extend(process_rows(&tickbox, &bench)?);
    eprintln!("registry…");
    let n = if smoke() {
        2
    } else if bench.quick {
        5
    } else {
        15
    };
    anchored.extend(registry::rows(&tickbox, &bench.guests.wasm, n)?);
    eprintln!("tickbox test against tui-test…");
    // The anchor is a Node package that tests/setup.sh installs: where it
    // cannot run, the other figures still stand, and the table says why
    // these are missing (so a broken install is seen, not hidden).
    let tui_test_missing = match tui_test::rows(&tickbox, &tui_test_sizes(quick)) {
        Ok(rows) => {
            anchored.extend(rows);
            None
        }
        Err(e) => Some(format!("{e:#}")),
    };

    if smoke() {
        println!("smoke run (--smoke): every measurement ran once at its smallest size; the figures mean nothing");
    }
    print_table(&rows);
    print_anchored(&anchored);
    if let Some(why) = &tui_test_missing {
        println!("\ntickbox test against tui-test: not measured: {why}");
    }
    let doc = json!({
        "tui_test_not_measured": tui_test_missing,
        "machine": machine(),
        "quick": quick,
        "smoke": smoke(),
        "anchored": anchored.iter().map(|r| json!({
            "name": r.name,
            "value": r.value.json(),
            "anchor": r.anchor.as_ref().map(|(what, a)| json!({"what": what, "stat": a.json()})),
            "ratio": r.ratio(),
            "target": r.target.as_ref().map(|(t, ok)| json!({"target": t, "met": ok})),
        })).collect::<Vec<_>>(),
        "rows": rows.iter().map(|r| json!({
            "name": r.name,
            "wasm": r.wasm.as_ref().map(Stat::json),
            "native": r.native.as_ref().map(Stat::json),
            "ratio": ratio(&r.wasm, &r.native),
            "target": r.target.as_ref().map(|(t, ok)| json!({"target": t, "met": ok})),
        })).collect::<Vec<_>>(),
    });
    if let Some(dir) = json_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    eprintln!("figures written to {}", json_path.display());
    let _ = std::fs::remove_dir_all(&cache_dir);
    Ok(())
}

/// How much of `tickbox test` against tui-test to measure: the quick run
/// (and CI's smoke) keeps the one-scenario pair and `tickbox test`'s own
/// `-j 2` against `-j 1`, and leaves tui-test's suites (a minute) to the
/// full run.
fn tui_test_sizes(quick: bool) -> tui_test::Sizes {
    if smoke() {
        tui_test::Sizes {
            one: 1,
            suite: 2,
            suite_runs: 1,
            anchor_suites: false,
        }
    } else if quick {
        tui_test::Sizes {
            one: 3,
            suite: 4,
            suite_runs: 1,
            anchor_suites: false,
        }
    } else {
        tui_test::Sizes {
            one: 7,
            suite: 8,
            suite_runs: 3,
            anchor_suites: true,
        }
    }
}

/// First starts with an empty cache, tiered (Winch, then Cranelift in the
/// background) against Cranelift up front, for the bench Tick and every
/// wasm in `$TICKBOX_BENCH_FIRST_START` (paths, `:`-separated: e.g. the
/// examples' counter and a componentize-py Tick).
async fn first_start_rows(tickbox: &Path, bench: &Bench) -> Result<Vec<Anchored>> {
    use tickbox_runtime::backend::wasm::CompilePolicy;
    let mut wasms = vec![bench.guests.wasm.clone()];
    if let Some(extra) = std::env::var_os("TICKBOX_BENCH_FIRST_START") {
        wasms.extend(std::env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()));
    }
    let mut out = Vec::new();
    for path in wasms {
        let bytes = std::fs::metadata(&path)
            .with_context(|| format!("{}", path.display()))?
            .len();
        let mb = bytes as f64 / 1e6;
        let big = bytes > 4_000_000;
        let n = match (big, bench.quick) {
            (true, true) => 1,
            (true, false) => 3,
            (false, _) => bench.n(10),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        eprintln!("  {name} ({mb:.2} MB), {n} first starts each way…");
        let tiered = first_start::first_starts(tickbox, &path, CompilePolicy::Tiered, n).await?;
        let cranelift =
            first_start::first_starts(tickbox, &path, CompilePolicy::Cranelift, n).await?;
        let got = tiered.wall.median();
        let target = if bytes < 1_000_000 {
            Some((format!("≤ 30 ms (got {got:.1} ms)"), got <= 30.0))
        } else if bytes > 10_000_000 {
            Some((format!("≤ 5 s (got {:.2} s)", got / 1e3), got <= 5000.0))
        } else {
            None
        };
        out.push(Anchored {
            name: format!("first start, empty cache, tiered: {name} ({mb:.2} MB)"),
            value: tiered.wall,
            anchor: Some(("Cranelift first", cranelift.wall)),
            target,
        });
        out.push(Anchored {
            name: format!("  CPU of that start (host + compile worker): {name}"),
            value: tiered.cpu,
            anchor: Some(("Cranelift first", cranelift.cpu)),
            target: None,
        });
        if let Some(ready) = tiered.ready {
            out.push(Anchored {
                name: format!("  optimized code in the cache after: {name}"),
                value: ready,
                anchor: None,
                target: None,
            });
        }
    }
    Ok(out)
}

/// The engine's round trips against the floor (a blocking pipe loop to the
/// same native Tick, no engine), measured right after them.
async fn floor_rows(bench: &Bench, rows: &[Row], n: usize) -> Result<Vec<Anchored>> {
    let native = bench.guests.native.clone();
    let (call_floor, read_floor) = tokio::task::spawn_blocking(move || {
        Ok::<_, anyhow::Error>((
            floor::floor(&native, n, false)?,
            floor::floor(&native, n, true)?,
        ))
    })
    .await??;
    let mut out = Vec::new();
    for (row, floor, what) in [
        ("tick/call round trip", call_floor, "tick/call"),
        ("tick/read round trip", read_floor, "tick/read"),
    ] {
        let Some(r) = rows.iter().find(|r| r.name == row) else {
            continue;
        };
        out.push(Anchored {
            name: format!("{what} floor: blocking pipe loop, native Tick, no engine"),
            value: floor.clone(),
            anchor: None,
            target: None,
        });
        for (backend, stat, limit) in [("native", &r.native, 3.0), ("wasm", &r.wasm, 2.0)] {
            let Some(stat) = stat else { continue };
            let ratio = stat.median() / floor.median();
            out.push(Anchored {
                name: format!("{what} round trip, {backend} engine"),
                value: stat.clone(),
                anchor: Some(("floor", floor.clone())),
                target: Some((
                    format!("≤ {limit}× the floor (got {ratio:.2}×)"),
                    ratio <= limit,
                )),
            });
        }
    }
    Ok(out)
}

/// Whole-process `tickbox read` of the bench Tick: wasm with a warm cache
/// against native, and against the wasm under `wasmtime run` when a
/// wasmtime CLI is on PATH.
fn process_rows(tickbox: &Path, bench: &Bench) -> Result<Vec<Anchored>> {
    let n = if smoke() {
        2
    } else if bench.quick {
        7
    } else {
        21
    };
    let reads = first_start::process_reads(tickbox, &bench.guests.wasm, &bench.guests.native, n)?;
    let wasm = reads.wasm;
    // The target is judged against native's best case (no cgroup), so a
    // kernel wait on native's side cannot make it look met.
    let r = wasm.median() / reads.native_no_cgroup.median();
    let mut out = vec![
        Anchored {
            name: format!("whole process: tickbox read, wasm, warm cache ({n} interleaved runs)"),
            value: wasm.clone(),
            anchor: Some(("tickbox read -- native", reads.native)),
            target: None,
        },
        Anchored {
            name: "whole process: tickbox read, wasm, warm cache".into(),
            value: wasm.clone(),
            anchor: Some(("the same, TICKBOX_NO_CGROUP=1", reads.native_no_cgroup)),
            target: Some((format!("≤ 0.6× native (got {r:.2}×)"), r <= 0.6)),
        },
    ];
    match reads.wasmtime {
        Some(wt) => {
            let r = wasm.median() / wt.median();
            out.push(Anchored {
                name: "whole process: tickbox read, wasm, warm cache".into(),
                value: wasm,
                anchor: Some(("tickbox read -- wasmtime run", wt)),
                target: Some((format!("≤ 0.3× (got {r:.2}×)"), r <= 0.3)),
            });
        }
        None => eprintln!("  no wasmtime CLI on PATH: the `wasmtime run` anchor is left out"),
    }
    Ok(out)
}

/// The target column: whether the row met its target, and the target.
fn target_cell(target: &Option<(String, bool)>) -> String {
    match target {
        Some((t, true)) => format!("met: {t}"),
        Some((t, false)) => format!("NOT MET: {t}"),
        None => String::new(),
    }
}

fn print_anchored(rows: &[Anchored]) {
    if rows.is_empty() {
        return;
    }
    let w0 = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(10);
    let anchor = |r: &Anchored| {
        r.anchor
            .as_ref()
            .map(|(what, a)| format!("{what}: {}", a.show()))
            .unwrap_or_else(|| "—".into())
    };
    let w1 = rows
        .iter()
        .map(|r| r.value.show().chars().count())
        .max()
        .unwrap_or(5);
    let w2 = rows
        .iter()
        .map(|r| anchor(r).chars().count())
        .max()
        .unwrap_or(6);
    let mut out = format!(
        "\n{:<w0$}  {:<w1$}  {:<w2$}  {:>6}  target\n",
        "measure (against its own anchor)", "value", "anchor", "ratio"
    );
    for r in rows {
        let ratio = r
            .ratio()
            .map(|x| format!("{x:.2}×"))
            .unwrap_or_else(|| "—".into());
        let target = target_cell(&r.target);
        out += &format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>6}  {}\n",
            r.name,
            r.value.show(),
            anchor(r),
            ratio,
            target
        );
    }
    print!("{out}");
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("")
        .trim()
        .to_string();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    json!({"cpu": model, "cores": cores, "os": std::env::consts::OS})
}

fn print_table(rows: &[Row]) {
    let w0 = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(10);
    let cell = |s: &Option<Stat>| s.as_ref().map(Stat::show).unwrap_or_else(|| "—".into());
    let w1 = rows
        .iter()
        .map(|r| cell(&r.wasm).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let w2 = rows
        .iter()
        .map(|r| cell(&r.native).chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    // The table is the command's result: it goes to stdout.
    let mut out = String::new();
    out += &format!(
        "{:<w0$}  {:<w1$}  {:<w2$}  {:>6}  target\n",
        "measure", "wasm", "native", "ratio"
    );
    for r in rows {
        let ratio = ratio(&r.wasm, &r.native)
            .map(|x| format!("{x:.2}×"))
            .unwrap_or_else(|| "—".into());
        let target = target_cell(&r.target);
        out += &format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>6}  {}\n",
            r.name,
            cell(&r.wasm),
            cell(&r.native),
            ratio,
            target
        );
    }
    print!("{out}");
}

fn main() -> Result<()> {
    let mut quick = false;
    let mut json_path = target_dir().join("tickbox-bench.json");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--smoke" => {
                quick = true;
                SMOKE.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            "--json" => json_path = PathBuf::from(args.next().context("--json needs a path")?),
            "-h" | "--help" => {
                println!("usage: tickbox-bench [--quick|--smoke] [--json PATH]"); // stdout-ok: help is the result
                return Ok(());
            }
            other => {
                bail!("unknown argument {other}; usage: tickbox-bench [--quick|--smoke] [--json PATH]")
            }
        }
    }
    // Two workers, the shape of the `tickbox` CLI's runtime for hosts; 0 is
    // a current-thread runtime (the one-shot commands' shape).
    let workers: usize = std::env::var("TICKBOX_BENCH_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(2);
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    rt.block_on(run(quick, json_path))
}
