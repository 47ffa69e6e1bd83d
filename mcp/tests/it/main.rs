//! tickbox-mcp's integration tests: the facade served in this process
//! through its public API, over the stdio serve loop ([`Facade::serve`] on
//! a socket pair) or Streamable HTTP ([`tickbox_mcp::http::serve`] on a
//! loopback port the test binds), with real Ticks (native processes and
//! wasm guests) opened through the sandbox's `Launcher`. One test binary;
//! each module is one subject.
//!
//! - `audit` — the hosted Ticks' audit streams: a refusal flood merged
//!   beside a neighbour's calls, all recorded;
//! - `wire` — the stdio loop frame by frame: protocol revisions, requests
//!   before `initialize`, malformed and oversized frames, the in-flight
//!   bound, cancellation, the screen tool, capped errors, catalog changes
//!   that try to take the facade's names, memory over 50,000 requests;
//! - `client` — a real MCP client (rmcp's): tools and their annotations,
//!   calls, state subscriptions and their trimming, dying Ticks, a wasm
//!   Tick, a 2026-07-28 client that discovers and listens;
//! - `prefixes` — several Ticks behind one facade: tools and resources
//!   under each Tick's name, hints from its grants;
//! - `http` — Streamable HTTP: sessions over the shared Ticks, Origin and
//!   path checks, the bearer token;
//! - `guard` — the HTTP door's walls attacked over raw TCP beside a client
//!   that still gets in: half-sent heads, slots per peer, the session cap
//!   and idle expiry, bounded bodies and what they cost, the probes;
//! - `fairness` — a wasm Tick spinning in a call adds little to its
//!   neighbour's calls, on one thread and on two;
//! - `drain` — the drain a `stop` future starts: a call in flight
//!   answered while new work is refused, the drain timeout, and two
//!   servers behind a real HAProxy, one drained;
//! - `schema_bomb` — a Tick churning costly catalogs beside a neighbour
//!   that stays fast, the host's memory bounded;
//! - `metrics` — `/metrics` beside MCP scraped by a real Prometheus, its
//!   door, a bounded page, a hostile tool name escaped;
//! - `otel` — spans and metrics sent to a real OTLP receiver: calls over
//!   HTTP and stdio, the facade's own tools, sessions timed when they end,
//!   a hostile tool name escaped, a stalled or stopped receiver;
//! - `per_client` — one instance of a Tick per client: sessions, named
//!   clients, stdio, the caps, idle and expired instances, the metrics;
//! - `tick_text` — a hostile corpus in every string a Tick controls
//!   reaches no listing, result or resource raw, and still shows escaped;
//! - `sdks` — real MCP clients run as programs (the Python and TypeScript
//!   SDKs, MCP Inspector's CLI) and the official conformance suite, over
//!   Streamable HTTP.
//!
//! `raw` and `server` are the two harnesses (a raw-lines stdio client, an
//! HTTP server on its own runtime). What needs the `tickbox` binary (its
//! flags, exit codes, token files, signals, the stdio process a client
//! spawns, and real MCP SDKs that start it as their stdio server) stays in
//! `cli/tests/it`.

mod audit;
mod client;
mod drain;
mod fairness;
mod guard;
mod http;
mod lazy;
mod metrics;
mod otel;
mod per_client;
mod prefixes;
mod raw;
mod schema_bomb;
mod sdks;
mod server;
mod tick_text;
mod wire;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tickbox_host::{NativeSpec, SessionConfig};
use tickbox_mcp::{default_tick_name, FacadeOptions, Grants, HostedTick, PerClient};
use tickbox_sandbox::{EngineOptions, GuestYield, Launcher, WasmEngine};
use tickbox_telemetry::audit::{Audit, AuditLine, AuditSink, Origin};
use tickbox_telemetry::metrics::{Metrics, TickMetrics};
use tickbox_test_support::{tick, wasm_cache};

/// A guard against hangs, not a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A native Tick: `argv` with these extra environment variables.
pub fn native(argv: Vec<String>, env: &[(&str, &str)]) -> Launcher {
    let mut spec = NativeSpec::new(argv);
    spec.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Launcher::native(spec)
}

/// shifty.py (tests/ticks): seven tools, one of which reshapes its own
/// catalog; with `SHIFTY_LOG` it logs each `sleep` call it starts.
pub fn shifty(env: &[(&str, &str)]) -> Launcher {
    native(vec!["python3".into(), tick("shifty.py")], env)
}

/// A wasm Tick with these grants, compiled into the build's own cache (as
/// the other crates' tests keep it).
pub fn wasm(path: &str, grants: &Grants) -> Launcher {
    wasm_on(&engine(GuestYield::Deferred), path, grants)
}

/// An engine compiling into the build's own cache, its guests yielding at
/// their slices' ends as `guest_yield` says.
pub fn engine(guest_yield: GuestYield) -> Arc<WasmEngine> {
    WasmEngine::with_options(EngineOptions {
        cache_dir: Some(wasm_cache()),
        guest_yield,
        ..EngineOptions::default()
    })
    .expect("the wasm engine")
}

/// A wasm Tick with these grants on `engine`.
pub fn wasm_on(engine: &Arc<WasmEngine>, path: &str, grants: &Grants) -> Launcher {
    let grants = grants.resolve().expect("the grants resolve");
    Launcher::wasm(engine.clone(), path.into(), grants).expect("a wasm file")
}

/// Starts and initializes one instance, hosted under `name` (or the name
/// the CLI gives it: the last part of its kind).
pub async fn hosted(launcher: &Launcher, name: Option<&str>, grants: Grants) -> HostedTick {
    let session = launcher
        .open(SessionConfig::default())
        .await
        .unwrap_or_else(|e| panic!("the Tick starts: {e}"));
    let name = name.map(str::to_string).unwrap_or_else(|| {
        default_tick_name(session.descriptor().expect("initialized").kind.wire())
    });
    HostedTick {
        name,
        session: Some(Arc::new(session)),
        grants,
        per_client: None,
        on_first_use: None,
    }
}

/// A Tick to host and how: under `name` (none: its default), shared by
/// every client or, with `per_client`, one instance per client within
/// these bounds (instances of this Tick at once, idle timeout; none: the
/// defaults), as a ticks file's `instances = "per-client"` entry asks.
/// `grants` are what the facade is told the Tick may reach (a network
/// grant makes its tools open-world); the launcher holds what the sandbox
/// enforces.
pub struct Hosting {
    pub name: Option<&'static str>,
    pub launcher: Launcher,
    pub per_client: Option<(Option<usize>, Option<Duration>)>,
    pub grants: Grants,
    /// Shared and started on first use, stopped after this long idle, as
    /// a ticks file's `start = "on-first-use"` entry asks (its catalog
    /// cached in the launcher's compile cache).
    pub on_first_use: Option<Duration>,
}

impl Hosting {
    /// `launcher`'s Tick under `name`, shared, nothing granted.
    pub fn shared(name: Option<&'static str>, launcher: Launcher) -> Hosting {
        Hosting {
            name,
            launcher,
            per_client: None,
            grants: Grants::default(),
            on_first_use: None,
        }
    }
}

/// What a facade hosts, as `tickbox mcp` sets it up: its Ticks; counted
/// for `/metrics` when `metered`; every Tick's audit stream (template and
/// instances) also into `audit`; the facade's own options.
pub struct Setup {
    pub ticks: Vec<Hosting>,
    pub metered: bool,
    pub audit: Option<Arc<dyn AuditSink>>,
    pub facade: FacadeOptions,
}

impl Setup {
    /// These Ticks, nothing counted or audited, the default options.
    pub fn of(ticks: Vec<Hosting>) -> Setup {
        Setup {
            ticks,
            metered: false,
            audit: None,
            facade: FacadeOptions::default(),
        }
    }

    /// Starts and initializes every Tick (each per-client one's template),
    /// its audit stream counted in the returned registry when metered.
    pub async fn host(self) -> (Vec<HostedTick>, Arc<Metrics>) {
        let registry = Arc::new(Metrics::new());
        let mut hosted_ticks = Vec::new();
        for t in self.ticks {
            // Counted from the Tick's start, named once it has its name.
            let counts = Arc::new(TickMetrics::default());
            let mut launcher = t.launcher;
            if self.metered || self.audit.is_some() {
                let sinks = self.audit.iter().cloned().collect();
                let mut audit = Audit::new(Origin::Mcp, sinks);
                if self.metered {
                    audit = audit.observed_by(counts.clone());
                }
                launcher = launcher.audited(Some(audit));
            }
            let mut tick = match (t.on_first_use, t.name) {
                (Some(idle), Some(name)) => HostedTick::on_first_use(
                    name.into(),
                    &launcher,
                    t.grants,
                    SessionConfig::default(),
                    idle,
                )
                .await
                .unwrap_or_else(|e| panic!("the Tick starts: {e}")),
                _ => hosted(&launcher, t.name, t.grants).await,
            };
            tick.per_client = t.per_client.map(|(max, idle)| {
                PerClient::new(launcher.clone(), SessionConfig::default()).bounded(max, idle)
            });
            if self.metered {
                registry.add_tick(&tick.name, counts);
            }
            hosted_ticks.push(tick);
        }
        (hosted_ticks, registry)
    }
}

/// Audit lines kept in memory, as a file would have them.
#[derive(Default)]
pub struct AuditLines(Mutex<Vec<String>>);

impl AuditLines {
    /// Every event so far, parsed.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

impl AuditSink for AuditLines {
    fn offer(&self, event: AuditLine) -> bool {
        self.0.lock().unwrap().push(event.into_line());
        true
    }
}

/// Whether the calling test may measure this process's memory: it runs
/// alone in it. Under cargo-nextest every test has a process of its own;
/// under `cargo test` tests share one, so the test is run again by itself
/// in a child process (its outcome checked here) and the caller returns.
pub fn alone(test: &str) -> bool {
    const ALONE: &str = "TICKBOX_MCP_IT_ALONE";
    if std::env::var_os(ALONE).is_some()
        || std::env::var("NEXTEST_EXECUTION_MODE").is_ok_and(|m| m == "process-per-test")
    {
        return true;
    }
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("this test binary"));
    cmd.args([test, "--exact", "--nocapture"])
        .env(ALONE, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = tickbox_test_support::finish_within(cmd, test, PATIENCE * 10);
    assert_eq!(out.code, 0, "{test}, alone in a process: {out:#?}");
    false
}

/// Every log line the facade wrote in this process, as the CLI's stderr
/// would show them.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// This process's log, collected from the first call on (at `info`, the
/// CLI's default level).
pub fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        logs
    })
}

impl Logs {
    /// What was logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
