//! The MCP rows: a read-only `tools/call` through `tickbox mcp` serving the
//! example counter (wasm) against the same tool on a FastMCP server (the MCP
//! Python SDK's high-level server, `bench/mcp/fastmcp_counter.py`), with
//! the same client in the same run, and the parts of tickbox's round trip.
//!
//! The client is this program: one blocking thread writing a JSON-RPC line
//! to the server's stdin and reading lines from its stdout until the
//! answer, so both servers see the same client cost. The anchor needs
//! Python with `mcp` (tests/mcp-clients/.venv, made by tests/setup.sh, or any
//! `python3` that has it); without it the FastMCP rows are skipped with a
//! note.
//!
//! Rows, tickbox in the `wasm` column and the anchor in `native`:
//! - `tools/call` of `history` (read-only) — the headline ratio;
//! - `ping` — MCP over stdio with no tool: pipes, framing, rmcp;
//! - `tools/call` of `tick_state` — the facade's dispatch with no Tick call;
//! - `tick/call history` in-process — the engine and the Tick, no MCP;
//! - a line echoed by `cat` — the floor of two pipes and two wake-ups;
//! - fairness (`fair_rows`): the counter's `history` beside a Tick that
//!   spins in a call (the hostile test guest's `spin`), under one
//!   `tickbox mcp --config`, on one thread and with `--workers 2`, and the
//!   idle call, each against the previous way guests yielded
//!   (`TICKBOX_GUEST_YIELD=immediate`, see `backend::wasm::slices`) in the
//!   same run; p50 and p99 are printed on stderr.
//!
//! Every `tickbox mcp` here runs the counter's optimized (Cranelift) code:
//! with the default tiered compiler a fresh cache would serve the whole run
//! from Winch's baseline code, which is what a first start gets, not what a
//! host serves after it (`TICKBOX_BENCH_MCP_COMPILER=tiered` measures that).
//!
//! `TICKBOX_BENCH_MCP_BASELINE=TICKBOX[:COUNTER_WASM]` adds a before/after
//! comparison in the same run: that `tickbox` binary (and counter) is
//! served beside the current one, and their `tools/call` and `ping`
//! samples are taken in alternating blocks, so both see the same load.

use crate::{root, target_dir, tickbox_binary, Row, Stat};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_runtime::backend::wasm::{self, grants::Grants, WasmEngine, WasmSpec};
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig};

/// A server on pipes, driven one line at a time.
pub(crate) struct Peer {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    line: String,
}

impl Peer {
    pub(crate) fn spawn(cmd: Command) -> Result<Peer> {
        Peer::spawn_with_stderr(cmd, Stdio::null())
    }

    /// [`Peer::spawn`] with the peer's stderr going to `stderr`.
    pub(crate) fn spawn_with_stderr(mut cmd: Command, stderr: Stdio) -> Result<Peer> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let stdin = child.stdin.take().context("stdin")?;
        let out = BufReader::new(child.stdout.take().context("stdout")?);
        Ok(Peer {
            child,
            stdin,
            out,
            line: String::new(),
        })
    }

    /// Writes `frame` and its newline in one write, as MCP clients do: the
    /// line split over two writes woke the peer twice (once for a line
    /// without its end), which both the host and the process anchors paid
    /// on every request and no real client makes them pay.
    fn send(&mut self, frame: &str) -> Result<()> {
        let mut line = Vec::with_capacity(frame.len() + 1);
        line.extend_from_slice(frame.as_bytes());
        line.push(b'\n');
        self.stdin.write_all(&line)?;
        Ok(())
    }

    /// Reads lines until the one answering `id` (notifications are skipped).
    fn answer(&mut self, id: u64) -> Result<Value> {
        loop {
            self.line.clear();
            if self.out.read_line(&mut self.line)? == 0 {
                bail!("the server closed its stdout");
            }
            let m: Value = serde_json::from_str(&self.line)?;
            if m["id"] == id && m.get("method").is_none() {
                if m.get("error").is_some() {
                    bail!("request {id} failed: {m}");
                }
                return Ok(m);
            }
        }
    }

    pub(crate) fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value> {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&frame.to_string())?;
        self.answer(id)
    }

    pub(crate) fn initialize(&mut self) -> Result<()> {
        self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "tickbox-bench", "version": "0"}}),
        )?;
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
    }

    /// µs per round trip of `n` requests, no warm-up; ids from `next_id`.
    fn samples(
        &mut self,
        n: usize,
        method: &str,
        params: &Value,
        next_id: &mut u64,
    ) -> Result<Vec<f64>> {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let id = *next_id;
            *next_id += 1;
            let frame =
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
            let t = Instant::now();
            self.send(&frame)?;
            let m = self.answer(id)?;
            let elapsed = t.elapsed();
            if m["result"]["isError"] == true {
                bail!("{method} answered an error result: {m}");
            }
            samples.push(elapsed.as_secs_f64() * 1e6);
        }
        Ok(samples)
    }

    /// ms per `tools/call` of `tool` (read-only), `n` of them, each after
    /// `gap` (so they arrive at any point of a spinning neighbour's slice).
    fn spaced_calls(
        &mut self,
        n: usize,
        tool: &str,
        gap: Duration,
        next_id: &mut u64,
    ) -> Result<Stat> {
        let params = json!({"name": tool, "arguments": {}});
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            std::thread::sleep(gap);
            samples.extend(self.samples(1, "tools/call", &params, next_id)?);
        }
        Ok(Stat::new(
            "ms",
            samples.iter().map(|us| us / 1000.0).collect(),
        ))
    }

    /// µs per round trip of `n` requests (a tenth more first, as warm-up).
    fn round_trips(&mut self, n: usize, method: &str, params: &Value) -> Result<Stat> {
        let mut next_id = 1;
        self.samples(n / 10, method, params, &mut next_id)?;
        Ok(Stat::new(
            "µs",
            self.samples(n, method, params, &mut next_id)?,
        ))
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn stop(mut self) {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The example counter for wasm32-wasip2, built with a nested cargo (into
/// the dir the integration tests build the examples in, so it is warm).
pub(crate) fn counter_wasm() -> Result<PathBuf> {
    let out = target_dir().join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "counter"])
        .args(["--target", "wasm32-wasip2", "--manifest-path"])
        .arg(root().join("examples/Cargo.toml"))
        .arg("--target-dir")
        .arg(&out)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .status()
        .context("running cargo to build the example counter")?;
    if !status.success() {
        bail!("building examples/counter for wasm32-wasip2 failed");
    }
    Ok(out.join("wasm32-wasip2/release/counter.wasm"))
}

/// The hostile test guest for wasm32-wasip2 (its `spin` tool never
/// returns), built like the counter.
fn spinner_wasm() -> Result<PathBuf> {
    let out = target_dir().join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "--quiet", "-p", "hostile"])
        .args(["--target", "wasm32-wasip2", "--manifest-path"])
        .arg(root().join("tests/guests/Cargo.toml"))
        .arg("--target-dir")
        .arg(&out)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .status()
        .context("running cargo to build the hostile test guest")?;
    if !status.success() {
        bail!("building tests/guests/hostile for wasm32-wasip2 failed");
    }
    Ok(out.join("wasm32-wasip2/release/hostile.wasm"))
}

/// `tickbox mcp TICK…` (a wasm path, or `--config FILE`) with the bench's
/// cache and compiler (module docs).
pub(crate) fn mcp_command(
    tickbox: &std::path::Path,
    tick: &[&OsStr],
    cache: &std::path::Path,
) -> Command {
    let compiler =
        std::env::var("TICKBOX_BENCH_MCP_COMPILER").unwrap_or_else(|_| "cranelift".into());
    let mut cmd = Command::new(tickbox);
    cmd.arg("mcp")
        .args(tick)
        .env("TICKBOX_CACHE_DIR", cache)
        .env("TICKBOX_COMPILER", compiler);
    cmd
}

/// A Python that has the MCP SDK, if there is one.
fn python_with_mcp() -> Option<PathBuf> {
    let venv = root().join("tests/mcp-clients/.venv/bin/python3");
    [venv, PathBuf::from("python3")].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import mcp.server.mcpserver"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// µs per in-process `tick/call history` of the same wasm counter.
async fn in_process(wasm: PathBuf, cache: PathBuf, n: usize) -> Result<Stat> {
    let engine: Arc<WasmEngine> = WasmEngine::new(Some(cache))?;
    let spec = WasmSpec {
        path: wasm,
        args: vec![],
        grants: Grants::default(),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    };
    let s = Session::start(wasm::spawn(&engine, &spec).await?, SessionConfig::default()).await?;
    let c = s
        .descriptor()
        .context("no catalog")?
        .prepare("history", json!({}))?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let t = Instant::now();
        if !matches!(s.call(&c).await, CallOutcome::Ok(_)) {
            bail!("history failed");
        }
        if i >= n / 10 {
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    s.shutdown().await;
    Ok(Stat::new("µs", samples))
}

/// µs per line echoed through `cat`: two pipes, two wake-ups, no protocol.
fn pipe_floor(n: usize) -> Result<Stat> {
    let mut cat = Peer::spawn(Command::new("cat"))?;
    let mut samples = Vec::with_capacity(n);
    let frame = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
    for i in 0..n + n / 10 {
        let t = Instant::now();
        cat.send(frame)?;
        cat.answer(1)?;
        if i >= n / 10 {
            samples.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    cat.stop();
    Ok(Stat::new("µs", samples))
}

/// `n` round trips each of the current and the baseline server, in ten
/// alternating blocks (after a tenth of warm-up each).
fn interleaved(
    current: &mut Peer,
    baseline: &mut Peer,
    n: usize,
    method: &str,
    params: &Value,
) -> Result<(Stat, Stat)> {
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut ia, mut ib) = (1_000_000u64, 1_000_000u64);
    current.samples(n / 10, method, params, &mut ia)?;
    baseline.samples(n / 10, method, params, &mut ib)?;
    for round in 0..10 {
        let block = n / 10;
        if round % 2 == 0 {
            a.extend(current.samples(block, method, params, &mut ia)?);
            b.extend(baseline.samples(block, method, params, &mut ib)?);
        } else {
            b.extend(baseline.samples(block, method, params, &mut ib)?);
            a.extend(current.samples(block, method, params, &mut ia)?);
        }
    }
    Ok((Stat::new("µs", a), Stat::new("µs", b)))
}

/// One host's way of sharing the CPU, for the fairness rows.
#[derive(Clone, Copy)]
struct Shape {
    /// `--workers`, None for the default (one thread over stdio).
    workers: Option<&'static str>,
    /// The previous yield (`TICKBOX_GUEST_YIELD=immediate`).
    immediate: bool,
}

/// ms per `history` call of the counter while the other Tick of the same
/// `tickbox mcp --config` spins in a call; `n` calls a few ms apart.
fn beside_spinner(mut cmd: Command, shape: Shape, n: usize) -> Result<Stat> {
    if let Some(w) = shape.workers {
        cmd.args(["--workers", w]);
    }
    if shape.immediate {
        cmd.env("TICKBOX_GUEST_YIELD", "immediate");
    }
    let mut host = Peer::spawn(cmd)?;
    host.initialize()?;
    let mut id = 1;
    // Warm both Ticks (the spinner's catalog is read at start).
    host.samples(
        5,
        "tools/call",
        &json!({"name": "counter_history", "arguments": {}}),
        &mut id,
    )?;
    // Never answered: the spinner keeps a core busy until the host stops.
    host.send(
        &json!({"jsonrpc": "2.0", "id": 0x7fff_ffff, "method": "tools/call",
                "params": {"name": "spinner_spin", "arguments": {}}})
        .to_string(),
    )?;
    std::thread::sleep(Duration::from_millis(100));
    let stat = host.spaced_calls(n, "counter_history", Duration::from_millis(7), &mut id)?;
    host.stop();
    Ok(stat)
}

/// The fairness rows (module docs).
async fn fair_rows(n: usize, counter: PathBuf, cache: PathBuf) -> Result<Vec<Row>> {
    let spinner = spinner_wasm()?;
    let tickbox = tickbox_binary()?;
    let config = cache.join("fair-ticks.toml");
    std::fs::create_dir_all(&cache)?;
    std::fs::write(
        &config,
        format!(
            "[[tick]]\nname = \"counter\"\npath = {:?}\ncall_timeout = 3600\n\n\
             [[tick]]\nname = \"spinner\"\npath = {:?}\ncall_timeout = 3600\n",
            counter.to_string_lossy(),
            spinner.to_string_lossy()
        ),
    )?;
    let command = move || {
        mcp_command(
            &tickbox,
            &[OsStr::new("--config"), config.as_os_str()],
            &cache,
        )
    };
    // Fewer calls for the previous behaviour: each takes ~300 ms.
    let slow_n = (n / 3).max(5);
    let (rows, idle) = tokio::task::spawn_blocking(move || -> Result<_> {
        let mut rows = Vec::new();
        for (workers, name) in [
            (None, "MCP neighbour tools/call beside a spinning Tick, 1 thread, ms (deferred yield | previous yield)"),
            (Some("2"), "MCP neighbour tools/call beside a spinning Tick, --workers 2, ms (deferred yield | previous yield)"),
        ] {
            let now = beside_spinner(command(), Shape { workers, immediate: false }, n)?;
            let before =
                beside_spinner(command(), Shape { workers, immediate: true }, slow_n)?;
            eprintln!(
                "mcp fair: workers {}: neighbour p50 {:.2} ms p99 {:.2} ms; previous yield p50 {:.2} ms p99 {:.2} ms",
                workers.unwrap_or("1"),
                now.median(),
                now.pct(0.99),
                before.median(),
                before.pct(0.99)
            );
            rows.push(Row { name, wasm: Some(now), native: Some(before), target: None });
        }
        // Idle: the same host with nothing spinning, both yields interleaved.
        let mut current = Peer::spawn(command())?;
        let mut previous = command();
        previous.env("TICKBOX_GUEST_YIELD", "immediate");
        let mut previous = Peer::spawn(previous)?;
        current.initialize()?;
        previous.initialize()?;
        let history = json!({"name": "counter_history", "arguments": {}});
        let idle = interleaved(&mut current, &mut previous, n * 5, "tools/call", &history)?;
        current.stop();
        previous.stop();
        Ok((rows, idle))
    })
    .await??;
    let (idle_now, idle_before) = idle;
    eprintln!(
        "mcp fair: idle tools/call p50 {:.1} µs p99 {:.1} µs; previous yield p50 {:.1} µs p99 {:.1} µs",
        idle_now.median(),
        idle_now.pct(0.99),
        idle_before.median(),
        idle_before.pct(0.99)
    );
    let mut rows = rows;
    rows.push(Row {
        name: "MCP tools/call idle, 2 Ticks, 1 thread (deferred yield | previous yield)",
        wasm: Some(idle_now),
        native: Some(idle_before),
        target: None,
    });
    Ok(rows)
}

/// The before/after rows of `TICKBOX_BENCH_MCP_BASELINE` (module docs).
async fn baseline_rows(n: usize, wasm: PathBuf, cache: PathBuf) -> Result<Vec<Row>> {
    let Some(spec) = std::env::var_os("TICKBOX_BENCH_MCP_BASELINE") else {
        return Ok(vec![]);
    };
    let spec = spec.to_string_lossy().into_owned();
    let (bin, base_wasm) = match spec.split_once(':') {
        Some((b, w)) => (PathBuf::from(b), PathBuf::from(w)),
        None => (PathBuf::from(&spec), wasm.clone()),
    };
    let tickbox = tickbox_binary()?;
    let (a, b) = tokio::task::spawn_blocking(move || -> Result<_> {
        let mut current = Peer::spawn(mcp_command(&tickbox, &[wasm.as_os_str()], &cache))?;
        let mut baseline = Peer::spawn(mcp_command(
            &bin,
            &[base_wasm.as_os_str()],
            &cache.join("baseline"),
        ))?;
        current.initialize()?;
        baseline.initialize()?;
        let history = json!({"name": "history", "arguments": {}});
        let call = interleaved(&mut current, &mut baseline, n, "tools/call", &history)?;
        let ping = interleaved(&mut current, &mut baseline, n, "ping", &json!({}))?;
        current.stop();
        baseline.stop();
        Ok((call, ping))
    })
    .await??;
    let ((call, base_call), (ping, base_ping)) = (a, b);
    eprintln!(
        "mcp: interleaved tools/call {} vs baseline {} ({:.2}×); ping {} vs baseline {}",
        call.show(),
        base_call.show(),
        call.median() / base_call.median(),
        ping.show(),
        base_ping.show()
    );
    Ok(vec![
        Row {
            name: "MCP tools/call interleaved (this build | baseline build)",
            wasm: Some(call),
            native: Some(base_call),
            target: None,
        },
        Row {
            name: "MCP ping interleaved (this build | baseline build)",
            wasm: Some(ping),
            native: Some(base_ping),
            target: None,
        },
    ])
}

/// The MCP rows (see the module docs). `n` round trips per figure.
pub async fn rows(quick: bool) -> Result<Vec<Row>> {
    let n = if crate::smoke() {
        20
    } else if quick {
        300
    } else {
        2000
    };
    let wasm = counter_wasm()?;
    let cache = std::env::temp_dir().join(format!("tickbox-bench-mcp-{}", std::process::id()));
    let tickbox = tickbox_binary()?;
    let history = json!({"name": "history", "arguments": {}});

    let cmd = mcp_command(&tickbox, &[wasm.as_os_str()], &cache);
    let (tb_call, tb_ping, tb_state) = tokio::task::spawn_blocking(move || -> Result<_> {
        let mut tb = Peer::spawn(cmd)?;
        tb.initialize()?;
        let call = tb.round_trips(n, "tools/call", &history)?;
        let ping = tb.round_trips(n, "ping", &json!({}))?;
        let state = tb.round_trips(
            n,
            "tools/call",
            &json!({"name": "tick_state", "arguments": {}}),
        )?;
        tb.stop();
        Ok((call, ping, state))
    })
    .await??;
    let engine = in_process(wasm.clone(), cache.clone(), n).await?;
    let before_after = baseline_rows(n, wasm.clone(), cache.clone()).await?;
    let fair_n = if crate::smoke() {
        4
    } else if quick {
        100
    } else {
        300
    };
    let fair = fair_rows(fair_n, wasm, cache.join("fair")).await?;
    let floor = tokio::task::spawn_blocking(move || pipe_floor(n)).await??;
    let _ = std::fs::remove_dir_all(&cache);

    let anchor = match python_with_mcp() {
        None => {
            eprintln!(
                "mcp: FastMCP anchor skipped: no python3 with the `mcp` package \
                 (python3 -m venv tests/mcp-clients/.venv && \
                 tests/mcp-clients/.venv/bin/pip install -r tests/mcp-clients/requirements.txt)"
            );
            None
        }
        Some(py) => {
            let mut cmd = Command::new(py);
            cmd.arg(root().join("bench/mcp/fastmcp_counter.py"));
            let history = json!({"name": "history", "arguments": {}});
            Some(
                tokio::task::spawn_blocking(move || -> Result<_> {
                    let mut fm = Peer::spawn(cmd)?;
                    fm.initialize()?;
                    let call = fm.round_trips(n, "tools/call", &history)?;
                    let ping = fm.round_trips(n, "ping", &json!({}))?;
                    fm.stop();
                    Ok((call, ping))
                })
                .await??,
            )
        }
    };
    eprintln!(
        "mcp: tickbox tools/call {}, ping {}, tick_state {}; in-process call {}; cat floor {}",
        tb_call.show(),
        tb_ping.show(),
        tb_state.show(),
        engine.show(),
        floor.show()
    );
    let (fm_call, fm_ping) = match anchor {
        Some((c, p)) => {
            eprintln!("mcp: FastMCP tools/call {}, ping {}", c.show(), p.show());
            (Some(c), Some(p))
        }
        None => (None, None),
    };
    let target = fm_call.as_ref().map(|fm| {
        let r = tb_call.median() / fm.median();
        let yes = |ok: bool| if ok { "met" } else { "not met" };
        (
            format!(
                "≤ 0.2× FastMCP (#15): {}; ≤ 0.1× (#17): {} (got {r:.3}×)",
                yes(r <= 0.2),
                yes(r <= 0.1)
            ),
            r <= 0.1,
        )
    });
    let mut rows = vec![
        Row {
            name: if fm_call.is_some() {
                "MCP tools/call read-only (tickbox mcp wasm | FastMCP)"
            } else {
                "MCP tools/call read-only (tickbox mcp wasm | FastMCP skipped: no python mcp)"
            },
            wasm: Some(tb_call),
            native: fm_call,
            target,
        },
        Row {
            name: "MCP ping (tickbox mcp | FastMCP)",
            wasm: Some(tb_ping),
            native: fm_ping,
            target: None,
        },
        Row {
            name: "MCP tools/call tick_state (facade only, no Tick call)",
            wasm: Some(tb_state),
            native: None,
            target: None,
        },
        Row {
            name: "tick/call history in-process (engine + wasm Tick, no MCP)",
            wasm: Some(engine),
            native: None,
            target: None,
        },
        Row {
            name: "pipe floor: a line echoed by cat (same client)",
            wasm: None,
            native: Some(floor),
            target: None,
        },
    ];
    rows.extend(before_after);
    rows.extend(fair);
    Ok(rows)
}

/// A `tickbox mcp --http` server driven by a keep-alive HTTP/1.1 client of
/// this program's own (one connection, one request at a time), for the
/// rows that need the HTTP transport: `--metrics` is served beside it only.
struct HttpPeer {
    child: Child,
    reader: BufReader<std::net::TcpStream>,
    writer: std::net::TcpStream,
    addr: String,
    token: String,
    session: String,
}

impl HttpPeer {
    /// Starts `tickbox mcp --http 127.0.0.1:0 EXTRA… COUNTER` and opens an
    /// MCP session.
    fn start(
        tickbox: &std::path::Path,
        wasm: &std::path::Path,
        cache: &std::path::Path,
        extra: &[&OsStr],
        env: &[(&str, String)],
    ) -> Result<HttpPeer> {
        let mut cmd = mcp_command(tickbox, &[], cache);
        cmd.args(["--http", "127.0.0.1:0"])
            .args(extra)
            .arg(wasm)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
        let mut lines = BufReader::new(child.stderr.take().context("stderr")?).lines();
        let url = loop {
            let Some(line) = lines.next() else {
                bail!("tickbox mcp --http ended before serving");
            };
            let line = line?;
            if let Some(rest) = line.strip_prefix("tickbox mcp: serving MCP on http://") {
                break rest.to_string();
            }
        };
        // Keep its stderr read, so the server never blocks on it.
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        let (addr, token) = url
            .split_once("/mcp?token=")
            .context("no generated token in the serving line")?;
        let writer = std::net::TcpStream::connect(addr)?;
        writer.set_nodelay(true)?;
        let reader = BufReader::new(writer.try_clone()?);
        let mut peer = HttpPeer {
            child,
            reader,
            writer,
            addr: addr.to_string(),
            token: token.to_string(),
            session: String::new(),
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "tickbox-bench", "version": "0"}}});
        let (headers, _) = peer.post(&init.to_string())?;
        peer.session = headers
            .iter()
            .find(|(k, _)| k == "mcp-session-id")
            .map(|(_, v)| v.clone())
            .context("no Mcp-Session-Id")?;
        peer.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(peer)
    }

    /// One POST to /mcp on the kept connection: the headers (lower-case
    /// names) and the body.
    fn post(&mut self, body: &str) -> Result<(Vec<(String, String)>, String)> {
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n",
            self.addr,
            self.token,
            body.len()
        );
        if !self.session.is_empty() {
            req.push_str(&format!("Mcp-Session-Id: {}\r\n", self.session));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.writer.write_all(req.as_bytes())?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("not an HTTP status line: {line:?}"))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_lowercase(), v.trim().to_string()));
            }
        }
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                line.clear();
                self.reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim(), 16)
                    .with_context(|| format!("a bad chunk size {line:?}"))?;
                let mut chunk = vec![0u8; size + 2];
                std::io::Read::read_exact(&mut self.reader, &mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            let mut chunk = vec![0u8; n];
            std::io::Read::read_exact(&mut self.reader, &mut chunk)?;
            body = chunk;
        }
        let body = String::from_utf8(body)?;
        if !(200..300).contains(&status) {
            bail!("HTTP {status}: {body}");
        }
        Ok((headers, body))
    }

    /// µs per `tools/call` round trip, `n` of them; ids from `next_id`.
    fn samples(&mut self, n: usize, params: &Value, next_id: &mut u64) -> Result<Vec<f64>> {
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let id = *next_id;
            *next_id += 1;
            let frame =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
                    .to_string();
            let t = Instant::now();
            let (_, body) = self.post(&frame)?;
            let elapsed = t.elapsed();
            let answer = body
                .lines()
                .filter_map(|l| l.strip_prefix("data:").or(Some(l)))
                .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
                .find(|m| m["id"] == id)
                .with_context(|| format!("no answer to {id} in {body:?}"))?;
            if answer["result"]["isError"] != false {
                bail!("tools/call answered {answer}");
            }
            samples.push(elapsed.as_secs_f64() * 1e6);
        }
        Ok(samples)
    }

    fn stop(mut self) {
        // SAFETY: a plain kill(2) to our own child, not yet waited for.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rounds of the cost rows: each starts fresh hosts of every
/// configuration and measures each once, back to back, so a ratio taken
/// within a round compares like with like, and one host's luck (its
/// address layout, its threads' CPUs) is one round's, not the whole row's.
/// Sixty: one round's ratio spans 0.8–1.4 on the 2-core VM, and the
/// median of twenty moved by ±4% from run to run, too much to judge 5%.
const COST_ROUNDS: usize = 60;

/// One configuration of the cost rows' hosts: its extra arguments and
/// environment.
type HostConfig<'a> = (&'a [&'a OsStr], &'a [(&'a str, String)]);

/// What [`one_round`] measured of one configuration's hosts, round by round.
#[derive(Default)]
struct PeerCost {
    /// Every round trip, µs.
    wall: Vec<f64>,
    /// Per round: the median round trip of its block, µs.
    round_wall: Vec<f64>,
    /// Per round: the host process's CPU time per call in its block, µs.
    round_cpu: Vec<f64>,
}

/// A host's CPU time so far, µs ([`crate::process_cpu`]).
fn cpu_us(pid: u32) -> Result<f64> {
    crate::process_cpu(pid as i32)
        .map(|s| s * 1e6)
        .with_context(|| format!("no CPU time for the host {pid}: has it ended?"))
}

/// The work audit and metrics add to one read-only MCP call, measured
/// where it is done rather than as the difference of two noisy hosts:
/// `Audit::call_via` as the facade makes it (with the metrics' counter
/// observing) into an audit file, `n` events, then the writer drained; CPU
/// time of this process (the writer thread's encoding and batched writes
/// included) per event, one sample per round.
fn added_work(dir: &std::path::Path, n: usize) -> Result<Stat> {
    use tickbox_telemetry::audit::{
        AppendFile, Audit, McpCall, McpTransport, Origin, QueuedWriter, RequestId,
    };
    use tickbox_telemetry::metrics::TickMetrics;
    let args = json!({});
    let outcome = tickbox_runtime::CallOutcome::Ok(json!({"recent": []}));
    let mut samples = Vec::new();
    for round in 0..6 {
        let path = dir.join(format!("added-{round}.jsonl"));
        let writer = QueuedWriter::spawn(Box::new(AppendFile::open(&path)?))?;
        let audit = Audit::new(Origin::Mcp, vec![writer.clone()])
            .observed_by(Arc::new(TickMetrics::default()))
            .for_session();
        let before = crate::self_cpu();
        for i in 0..n {
            let mcp = McpCall {
                method: "tools/call",
                tool: "history",
                session: Some("0123456789abcdef0123456789abcdef"),
                request_id: RequestId::Number(i as i64),
                transport: McpTransport::Http,
                traceparent: None,
                protocol_version: Some("2025-11-25"),
            };
            let took = Duration::from_micros(150);
            audit.call_via("history", false, &args, &outcome, took, Some(&mcp));
        }
        writer.finish();
        let per_event = (crate::self_cpu() - before) * 1e6 / n as f64;
        recorded_calls(&path, n)?;
        // The first round warms the allocator and the file's pages.
        if round > 0 {
            samples.push(per_event);
        }
    }
    Ok(Stat::new("µs CPU", samples))
}

/// Reads the calls the file records back through the telemetry crate's
/// typed reader: no more than the `n` made (the file is this round's),
/// and says so on stderr when fewer were written than made (a full queue
/// drops events, counted as `lost` on a later line): the row then
/// measured a writer that had less to write.
fn recorded_calls(path: &std::path::Path, n: usize) -> Result<()> {
    use tickbox_telemetry::audit::read::{parse_line, Entry};
    let text = std::fs::read_to_string(path)?;
    let (mut calls, mut lost) = (0u64, 0u64);
    for line in text.lines() {
        let read = parse_line(line).with_context(|| path.display().to_string())?;
        lost += read.lost;
        calls += u64::from(matches!(read.entry, Entry::Call(_)));
    }
    anyhow::ensure!(
        calls + lost <= n as u64,
        "{} records {calls} calls and {lost} lost, more than the {n} made",
        path.display()
    );
    if calls < n as u64 {
        eprintln!("  added work: {calls} of {n} calls written ({lost} counted lost)");
    }
    Ok(())
}

/// One round of the cost rows: a tenth of a block of warm-up on each
/// peer, then a block of `block` `tools/call` round trips on each, in an
/// order turned `turn` places on, so over the rounds every peer sees the
/// same load; each block also takes the host's CPU time per call, and goes
/// into the peer's `costs`.
fn one_round(
    peers: &mut [HttpPeer],
    block: usize,
    params: &Value,
    turn: usize,
    costs: &mut [PeerCost],
) -> Result<()> {
    let mut id = 1_000_000u64;
    for p in peers.iter_mut() {
        p.samples((block / 10).max(1), params, &mut id)?;
    }
    let k = peers.len();
    for j in 0..k {
        let i = (turn + j) % k;
        let pid = peers[i].child.id();
        let before = cpu_us(pid)?;
        let samples = peers[i].samples(block, params, &mut id)?;
        let cpu = cpu_us(pid)? - before;
        let cost = &mut costs[i];
        cost.round_wall
            .push(Stat::new("µs", samples.clone()).median());
        cost.round_cpu.push(cpu / block as f64);
        cost.wall.extend(samples);
    }
    Ok(())
}

/// Per round, `with`'s figure over `without`'s: the spread of these is what
/// the machine's noise does to one comparison.
fn round_ratios(with: &[f64], without: &[f64]) -> Stat {
    Stat::new("×", with.iter().zip(without).map(|(w, o)| w / o).collect())
}

/// An OTLP receiver for the OpenTelemetry row: answers every request
/// `200 {}` and keeps nothing (the row measures the host's side).
fn otlp_sink() -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(match stream.try_clone() {
                    Ok(s) => s,
                    Err(_) => return,
                });
                let mut writer = stream;
                loop {
                    let mut line = String::new();
                    let mut length = 0usize;
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; length];
                    if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
                        return;
                    }
                    let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(format!("http://{addr}"))
}

/// The cost rows (issue 27's item 6): a read-only `tools/call history`
/// over Streamable HTTP with the audit stream (to a file) and `/metrics`
/// on, each alone and together, and with OpenTelemetry (OTLP to a
/// loopback sink) on as well, against the same host with all of them
/// off, sampled in alternating blocks in one run, on fresh hosts every
/// round.
pub async fn cost_rows(quick: bool) -> Result<Vec<Row>> {
    // Blocks of a thousand calls (a fifth of a second each) in a full run:
    // shorter ones let one scheduling hiccup, or the host's own once-a-
    // second work (the catalog poll), decide a round's ratio.
    let (n, rounds) = if crate::smoke() {
        (20, 2)
    } else if quick {
        (2000, 6)
    } else {
        // More rounds for a closer median (`TICKBOX_BENCH_COST_ROUNDS`),
        // a thousand calls each.
        let rounds = std::env::var("TICKBOX_BENCH_COST_ROUNDS")
            .ok()
            .and_then(|r| r.parse::<usize>().ok())
            .filter(|r| *r > 0)
            .unwrap_or(COST_ROUNDS);
        (rounds * 1000, rounds)
    };
    let wasm = counter_wasm()?;
    let cache = std::env::temp_dir().join(format!("tickbox-bench-cost-{}", std::process::id()));
    std::fs::create_dir_all(&cache)?;
    let tickbox = tickbox_binary()?;
    let audit = cache.join("audit.jsonl");
    let synced_audit = cache.join("audit-sync.jsonl");
    let sink = otlp_sink()?;
    let (costs, added) = tokio::task::spawn_blocking({
        let cache = cache.clone();
        move || -> Result<(Vec<PeerCost>, Stat)> {
            let audited: [&OsStr; 2] = [OsStr::new("--audit"), audit.as_os_str()];
            // `--audit-sync`: every answer waits for its line's write and
            // fdatasync (its own file, so the batched host's is not synced).
            let synced: [&OsStr; 3] = [
                OsStr::new("--audit"),
                synced_audit.as_os_str(),
                OsStr::new("--audit-sync"),
            ];
            let counted: [&OsStr; 2] = [OsStr::new("--metrics"), OsStr::new("0")];
            let both: Vec<&OsStr> = audited.iter().chain(counted.iter()).copied().collect();
            let otel = vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", sink),
                ("OTEL_BSP_SCHEDULE_DELAY", "1000".to_string()),
                ("OTEL_METRIC_EXPORT_INTERVAL", "1000".to_string()),
            ];
            // A first host compiles the Tick into the cache and goes: so
            // every measured host loads the same cached code, none runs
            // code it compiled itself.
            HttpPeer::start(&tickbox, &wasm, &cache, &[], &[])?.stop();
            let history = json!({"name": "history", "arguments": {}});
            let configs: [HostConfig; 7] = [
                (&[], &[]),
                (&audited, &[]),
                (&counted, &[]),
                (&both, &[]),
                (&both, &otel),
                // The control: a second host with everything off. What it
                // differs from the first by is the floor of the rows that
                // compare two hosts.
                (&[], &[]),
                (&synced, &[]),
            ];
            // Fresh hosts every round: two processes of one configuration
            // differ by up to 10% for the whole of their lives (a host is
            // lucky or not), so hosts kept for a whole run measure their
            // luck as much as their configuration.
            let mut costs: Vec<PeerCost> = configs.iter().map(|_| PeerCost::default()).collect();
            for round in 0..rounds {
                let mut peers = Vec::with_capacity(configs.len());
                for (extra, env) in &configs {
                    peers.push(HttpPeer::start(&tickbox, &wasm, &cache, extra, env)?);
                }
                let measured = one_round(&mut peers, n / rounds, &history, round, &mut costs);
                for p in peers {
                    p.stop();
                }
                measured?;
            }
            // With the hosts gone, this process has the machine to itself.
            let added = added_work(&cache, n)?;
            Ok((costs, added))
        }
    })
    .await??;
    let _ = std::fs::remove_dir_all(&cache);
    let [off, audit_only, metrics_only, on, all, off_again, audit_synced]: [PeerCost; 7] = costs
        .try_into()
        .map_err(|_| anyhow::anyhow!("seven configurations"))?;
    // The goal is judged per round (both figures from the same minute of
    // the machine), on the median over rounds; the range shows the noise.
    let goal = |what: &str, r: &Stat| {
        let m = r.median();
        (
            format!(
                "≤ 1.05× (#27): {} ({what}: median of {} rounds' ratios {m:.3}×, range {:.2}–{:.2})",
                if m <= 1.05 { "met" } else { "not met" },
                r.samples.len(),
                r.pct(0.0),
                r.pct(1.0),
            ),
            m <= 1.05,
        )
    };
    let wall = |c: &PeerCost| Stat::new("µs", c.wall.clone());
    let cpu = |c: &PeerCost| Stat::new("µs CPU", c.round_cpu.clone());
    eprintln!(
        "mcp cost, audit synced | audit batched: wall per round {}, host CPU per round {}",
        round_ratios(&audit_synced.round_wall, &audit_only.round_wall).show(),
        round_ratios(&audit_synced.round_cpu, &audit_only.round_cpu).show(),
    );
    for (name, c) in [
        ("audit", &audit_only),
        ("metrics", &metrics_only),
        ("audit + metrics", &on),
        ("+ OpenTelemetry", &all),
        ("all off again (a second host, the control)", &off_again),
        ("audit synced (--audit-sync)", &audit_synced),
    ] {
        eprintln!(
            "mcp cost, {name} | off: wall per round {}, host CPU per round {}",
            round_ratios(&c.round_wall, &off.round_wall).show(),
            round_ratios(&c.round_cpu, &off.round_cpu).show(),
        );
    }
    // The decisive row: what audit and metrics add, measured where it is
    // done, over what a call costs the host with both off (its CPU per call,
    // median of rounds: the smaller anchor, so the larger ratio).
    let anchor = Stat::new("µs CPU", off.round_cpu.clone()).median();
    let r = (anchor + added.median()) / anchor;
    let added_target = (
        format!(
            "≤ 1.05× (#27): {} (a call with both on costs (off + added) / off = {r:.3}× of one with both off)",
            if r <= 1.05 { "met" } else { "not met" }
        ),
        r <= 1.05,
    );
    Ok(vec![
        Row {
            name: "audit + metrics: CPU they add per call (in-process, writer included) | host CPU per call, both off",
            wasm: Some(added),
            native: Some(cpu(&off)),
            target: Some(added_target),
        },
        Row {
            name: "MCP tools/call read-only over HTTP, audit + metrics on | both off (one run, fresh hosts each round)",
            wasm: Some(wall(&on)),
            native: Some(wall(&off)),
            target: Some(goal("wall", &round_ratios(&on.round_wall, &off.round_wall))),
        },
        Row {
            name: "  the same, host CPU per call (tickbox and guest, every thread)",
            wasm: Some(cpu(&on)),
            native: Some(cpu(&off)),
            target: Some(goal("CPU", &round_ratios(&on.round_cpu, &off.round_cpu))),
        },
        Row {
            name: "  control: a second host with all off | the first (same run)",
            wasm: Some(wall(&off_again)),
            native: Some(wall(&off)),
            target: None,
        },
        Row {
            name: "  control, host CPU per call",
            wasm: Some(cpu(&off_again)),
            native: Some(cpu(&off)),
            target: None,
        },
        Row {
            name: "MCP tools/call read-only over HTTP, audit only | off (same run)",
            wasm: Some(wall(&audit_only)),
            native: Some(wall(&off)),
            target: None,
        },
        Row {
            name: "MCP tools/call read-only over HTTP, audit synced (--audit-sync: write + fdatasync before each answer) | off (same run)",
            wasm: Some(wall(&audit_synced)),
            native: Some(wall(&off)),
            target: None,
        },
        Row {
            name: "  audit synced | audit batched (same run)",
            wasm: Some(wall(&audit_synced)),
            native: Some(wall(&audit_only)),
            target: None,
        },
        Row {
            name: "  audit synced | audit batched, host CPU per call",
            wasm: Some(cpu(&audit_synced)),
            native: Some(cpu(&audit_only)),
            target: None,
        },
        Row {
            name: "MCP tools/call read-only over HTTP, metrics only | off (same run)",
            wasm: Some(wall(&metrics_only)),
            native: Some(wall(&off)),
            target: None,
        },
        Row {
            name: "MCP tools/call read-only over HTTP, audit + metrics + OpenTelemetry on | all off (same run)",
            wasm: Some(wall(&all)),
            native: Some(wall(&off)),
            target: Some(goal("wall", &round_ratios(&all.round_wall, &off.round_wall))),
        },
        Row {
            name: "  the same, host CPU per call",
            wasm: Some(cpu(&all)),
            native: Some(cpu(&off)),
            target: Some(goal("CPU", &round_ratios(&all.round_cpu, &off.round_cpu))),
        },
    ])
}
