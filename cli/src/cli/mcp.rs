//! `tickbox mcp`: host Ticks for an MCP client over stdio.
//!
//! Starts every Tick first (a Tick that fails to start is one stderr line
//! and exit 3, before any MCP traffic), then serves MCP until the client
//! closes stdin, then stops the Ticks. The facade itself lives in
//! [`tickbox_runtime::mcp`].

use super::consent::{self, Asking};
use super::exit::Exit;
use super::open::{self, TickOpts, TickSpec};
use super::signals::Signals;
use clap::Args;
use std::os::fd::FromRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use tickbox_app::token::{self, Token};
use tickbox_app::{Request, Target};
use tickbox_runtime::mcp::http::metrics::MetricsEndpoint;
use tickbox_runtime::mcp::http::{Drained, NamedClient};
use tickbox_runtime::mcp::limits::INSTANCE_IDLE_TIMEOUT;
use tickbox_runtime::mcp::{
    valid_tick_name, Clients, Config, Facade, FacadeOptions, Grants, HostedTick, Instances,
    PerClient, Start, TickEntry, TickSource,
};
use tickbox_runtime::session::Session;
use tickbox_telemetry::audit::Origin;
use tickbox_telemetry::metrics::{Metrics, TickMetrics};

/// Exit codes of `tickbox mcp`.
pub const HELP: &str = "\
Exit codes:
  0    the MCP client closed stdin, or (with --http) a drain after SIGTERM or
       SIGINT answered every request in flight; every Tick was stopped
  2    usage or config error, a tool name MCP cannot take (a clash, or over 64
       characters), a wasm Tick whose manifest asks for grants no one approved
       for its content (tickbox mcp never asks; `tickbox trust PATH` approves),
       or a token file others may read (also a named client's, --clients), a
       metrics token that is the MCP token, or two clients with one token;
       stderr names it
  3    a Tick could not start or failed initialization, the MCP handshake failed, or
       the --http or --metrics address cannot be bound
  130  interrupted; the Ticks were stopped. With --http: a signal before serving
       began, a second signal while draining, or requests still in flight when
       the drain timeout passed (they were cut off)

Stdout carries only MCP frames; diagnostics go to stderr (-v for more).

With --http ADDR it serves MCP Streamable HTTP on http://ADDR/mcp instead of
stdio, until SIGTERM or SIGINT, and then drains: /readyz answers 503 at once,
a new session and every new request of an open one get 503 (notifications and
DELETE still pass), the requests in flight finish and are answered, and it
exits 0 as soon as none is left, or 130 when --drain-timeout (default 30 s)
passes first or a second signal comes. Every MCP request needs
a token, also on loopback, as `Authorization: Bearer TOKEN` or `?token=TOKEN`:
read from --token-file (a file only you may read: mode 0600 or stricter, else
exit 2), or generated at start, written to a 0600 file in tickbox's per-user
directory (its path is printed to stderr; removed at exit) and printed once,
in the URL of the `serving MCP on` line. GET /healthz (200 while serving) and
GET /readyz (200 while a new session can be taken: every Tick runs and no
session or per-client instance cap is reached; else 503) answer without the token.

With --clients FILE (or the ticks file's `clients` key), each NAME = \"TOKEN_FILE\"
line names a client with a token of its own: a request carrying it is that
client's (MCP 2026-07-28 has no sessions), and a Tick with instances =
\"per-client\" gives each such client an instance of its own, as it gives
one to each session and to the stdio connection.

With --metrics ADDR (beside --http) it also serves Prometheus metrics on
http://ADDR/metrics: calls and their durations per Tick and tool, refusals by
kind, limits hit, live Ticks, the host's resident memory and the MCP sessions
open. A bare PORT means 127.0.0.1:PORT; any other interface only when named.
A scraper needs a token of its own (never the MCP token), sent as
`Authorization: Bearer TOKEN`: read from --metrics-token-file (mode 0600 or
stricter, else exit 2), or generated into a 0600 file whose path the
`serving metrics on` line names (removed at exit).";

#[derive(Args)]
pub struct McpArgs {
    /// The Tick: a path to an executable or a .wasm file
    #[arg(value_name = "TICK")]
    pub tick: Option<String>,
    /// Host the Ticks listed in this TOML file instead of one TICK (alias
    /// --ticks, for launchers that take --config themselves)
    #[arg(long, visible_alias = "ticks", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The Tick's name in tick://NAME/state (default: the last part of its kind)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Serve MCP Streamable HTTP on this address (e.g. 127.0.0.1:8765) instead of stdio
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// With --http: the token every request must carry, read from this file
    /// (mode 0600 or stricter); without it a token is generated
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// With --http: named clients, each with a bearer token of its own: a
    /// TOML file of NAME = "TOKEN_FILE" lines (each token file mode 0600 or
    /// stricter); overrides the ticks file's `clients` key
    #[arg(long, value_name = "FILE", requires = "http")]
    pub clients: Option<PathBuf>,
    /// With --http: also serve Prometheus metrics on http://ADDR/metrics (a
    /// bare PORT is 127.0.0.1:PORT)
    #[arg(long, value_name = "ADDR", requires = "http", value_parser = metrics_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// With --metrics: the token a scraper must send, read from this file
    /// (mode 0600 or stricter; not the MCP token); without it one is generated
    #[arg(long, value_name = "FILE", requires = "metrics")]
    pub metrics_token_file: Option<PathBuf>,
    /// With --http: after SIGTERM or SIGINT, wait at most this many seconds
    /// for the requests in flight before exiting (default 30)
    #[arg(long, value_name = "SECONDS", requires = "http",
          value_parser = clap::value_parser!(u64).range(1..=MAX_DRAIN_SECS))]
    pub drain_timeout: Option<u64>,
    /// Threads that run the host and its wasm Ticks: 1 (the default over
    /// stdio) answers fastest, more run CPU-bound tools of different Ticks
    /// in parallel (default with --http: 2)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_WORKERS as i64))]
    pub workers: Option<u16>,
    #[command(flatten)]
    pub opts: TickOpts,
}

/// `--metrics`: `HOST:PORT`, or a bare `PORT` on loopback (127.0.0.1), so
/// that serving the page elsewhere takes naming the interface.
fn metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| {
        "give PORT (on 127.0.0.1) or an address HOST:PORT, e.g. 127.0.0.1:9464".to_string()
    })
}

/// The most `--workers` a host may ask for.
pub const MAX_WORKERS: u16 = 64;

/// The longest `--drain-timeout`, in seconds (an hour): a drain longer
/// than that is a host that never stops.
pub const MAX_DRAIN_SECS: u64 = 3600;

impl McpArgs {
    /// The threads this server runs on. Over stdio there is one client,
    /// whose requests mostly come one at a time: one thread keeps every
    /// wake-up on it (a cross-thread wake-up costs more than a request's
    /// work), while a CPU-bound wasm Tick yields to the
    /// others every epoch tick (1 ms while it spins), behind the host's
    /// ready tasks and I/O (`backend::wasm::slices`). Over HTTP, several
    /// clients share the host: two workers.
    pub fn workers(&self) -> u16 {
        self.workers
            .unwrap_or(if self.http.is_some() { 2 } else { 1 })
    }
}

/// One Tick to start. What can fail in its request is said when it
/// starts, under its label, as every start failure is.
struct Planned {
    name: Option<String>,
    /// How errors name it: its name, else its path or command.
    label: String,
    /// The request, without its call timeout and audit stream.
    request: Result<Request, Exit>,
    call_timeout: f64,
    audit: Result<super::audit::Wanted, Exit>,
    /// For the log of which files apply: the registry flags, the lock
    /// beside this file.
    registry: super::registry_flags::RegistryOpts,
    lock_beside: Option<std::path::PathBuf>,
    grants: Grants,
    /// Shared, or one instance per client with these bounds.
    instances: Instances,
    max_instances: Option<usize>,
    idle_timeout: Option<std::time::Duration>,
    /// With the host, or on first use when its catalog is cached.
    start: Start,
}

/// Runs the MCP server until the client goes away (stdio) or a signal has
/// drained it (HTTP).
pub async fn run(args: McpArgs, signals: Signals, app: &tickbox_app::App) -> Result<(), Exit> {
    default_logging();
    let drain_timeout = args
        .drain_timeout
        .map(std::time::Duration::from_secs)
        .unwrap_or(tickbox_runtime::mcp::http::DRAIN_TIMEOUT);
    let http = match args.http {
        Some(addr) => Some((
            addr,
            token::read_or_generate(args.token_file.as_deref(), "--token-file")?,
        )),
        None => None,
    };
    let metrics_token = match args.metrics {
        Some(_) => Some(token::read_or_generate(
            args.metrics_token_file.as_deref(),
            "--metrics-token-file",
        )?),
        None => None,
    };
    if let (Some((_, mcp)), Some(metrics)) = (&http, &metrics_token) {
        if mcp.token() == metrics.token() {
            return Err(Exit::usage(
                "--metrics-token-file holds the MCP token: give the scraper a token of its own, \
                 so reading metrics never lets anyone call a tool",
            ));
        }
    }
    let metrics_at = args.metrics;
    let clients_flag = args.clients.clone();
    let serves_http = args.http.is_some();
    let (planned, facade_options, clients_key) = plan(args)?;
    let clients = match clients_flag.or(clients_key) {
        Some(file) if serves_http => {
            named_clients(&file, http.as_ref().map(|(_, t)| t), metrics_token.as_ref())?
        }
        Some(file) => {
            tracing::warn!(
                "the clients file {} is for --http only; over stdio the connection is the client",
                file.display()
            );
            Vec::new()
        }
        None => Vec::new(),
    };
    // Which signers policy, lock file and trust store apply, one line each:
    // a client that starts this server with a reduced environment shows.
    if let Some(p) = planned.first() {
        super::oci::log_files(&p.registry.lock_beside(p.lock_beside.as_deref()));
    }
    // Bound before any Tick starts, so a taken port costs nothing.
    let listener = match &http {
        Some((addr, _)) => Some(bind(addr).await?),
        None => None,
    };
    let metrics = match (metrics_at, metrics_token) {
        (Some(addr), Some(token)) => {
            let listener = bind(&addr).await?;
            Some((listener, token, Arc::new(Metrics::new())))
        }
        _ => None,
    };
    // Before any Tick starts (a child could inherit fd 1) and before any
    // frame is written.
    let out = reserve_stdout()
        .map_err(|e| Exit::session(format!("cannot set stdout aside for MCP frames: {e}")))?;
    let mut hosted: Vec<HostedTick> = Vec::new();
    // Each Tick is also a live instance (`tickbox ls`, `attach`, `@NAME`)
    // for as long as the facade serves it.
    let mut published = Vec::new();
    let live = tickbox_app::live::Publisher::open();
    for p in planned {
        let label = p.label;
        // The Tick's audit events are counted from its first (its start);
        // the count is named once the Tick has its name.
        let counts = metrics.as_ref().map(|_| Arc::new(TickMetrics::default()));
        let mut observers: Vec<Arc<dyn tickbox_telemetry::audit::AuditObserver>> = Vec::new();
        if let Some(c) = &counts {
            observers.push(c.clone());
        }
        let (request, audit, call_timeout) = (p.request, p.audit, p.call_timeout);
        let (instances, max_instances, idle_timeout) =
            (p.instances, p.max_instances, p.idle_timeout);
        let (start, grants) = (p.start, p.grants.clone());
        let opened = async {
            let call_timeout = open::call_timeout(call_timeout)?;
            let audit = super::audit::handle(app, Origin::Mcp, &audit?, &observers)?;
            let mut request = request?;
            request.call_timeout = call_timeout;
            request.audit = audit;
            let config = tickbox_runtime::session::SessionConfig {
                call_timeout,
                ..Default::default()
            };
            // A per-client Tick's template answers listings; each client's
            // instance is started by the same launcher, into the same
            // audit stream and counts.
            let per_client = match instances {
                Instances::Shared => None,
                Instances::PerClient => {
                    let spec = PerClient::new(app.launcher(&request)?, config.clone());
                    Some(spec.bounded(max_instances, idle_timeout))
                }
            };
            // On first use: the shared instance, or the template, is left
            // unstarted when its catalog is cached.
            if let (Start::OnFirstUse, Some(name)) = (start, &p.name) {
                let launcher = app.launcher(&request)?;
                let idle = idle_timeout.unwrap_or(INSTANCE_IDLE_TIMEOUT);
                let mut t = HostedTick::on_first_use(name.clone(), &launcher, grants, config, idle)
                    .await
                    .map_err(tickbox_app::AppError::from)?;
                t.per_client = per_client;
                return Ok::<_, Exit>(Err((t, launcher.kind())));
            }
            let opened = app.open(&request).await?;
            Ok(Ok((opened, per_client)))
        };
        match opened.await {
            // Started on first use: published as a live instance only
            // when it started now, as its first instance.
            Ok(Err((t, kind))) => {
                if let Some(session) = &t.session {
                    published.extend(live.publish(session, &t.name, kind.label()).await);
                }
                hosted.push(t);
            }
            Ok(Ok((t, per_client))) => {
                let name = p.name.unwrap_or_else(|| default_name(&t.session));
                if let (Some((_, _, registry)), Some(c)) = (&metrics, counts) {
                    registry.add_tick(&name, c);
                }
                let session = Arc::new(t.session);
                published.extend(live.publish(&session, &name, t.kind.label()).await);
                hosted.push(HostedTick {
                    name,
                    session: Some(session),
                    grants: p.grants,
                    per_client,
                    on_first_use: None,
                });
            }
            Err(e) => {
                for s in hosted.iter().filter_map(|h| h.session.as_ref()) {
                    s.shutdown().await;
                }
                return Err(Exit::new(e.code, format!("Tick `{label}`: {}", e.message)));
            }
        }
    }
    let facade = Facade::with_options(hosted, facade_options)
        .await
        .map_err(Exit::usage)?;
    if let (Some(listener), Some((_, token))) = (listener, http) {
        let served = serve_http(
            &facade,
            listener,
            token,
            clients,
            metrics,
            drain_timeout,
            signals,
        )
        .await;
        facade.shutdown().await;
        drop(published);
        return served;
    }
    tracing::info!(ticks = ?facade.tick_names(), "serving MCP on stdio");
    let out = super::stdio::output(out)
        .map_err(|e| Exit::session(format!("cannot set stdout aside for MCP frames: {e}")))?;
    let served = facade
        .serve(super::stdio::input(), out)
        .await
        .map_err(Exit::session);
    drop(published);
    served
}

/// The named clients of a clients file, each token read under
/// `--token-file`'s rule and told apart from the others (exit 2 otherwise).
fn named_clients(
    file: &std::path::Path,
    server: Option<&Token>,
    metrics: Option<&Token>,
) -> Result<Vec<NamedClient>, Exit> {
    let listed = Clients::load(file).map_err(Exit::usage)?;
    let mut clients = Vec::with_capacity(listed.clients.len());
    for (name, path) in listed.clients {
        let what = format!("the token file of client `{name}`");
        let token = token::read_or_generate(Some(&path), &what)?
            .token()
            .to_string();
        clients.push(NamedClient { name, token });
    }
    NamedClient::check_distinct(
        &clients,
        server.map(Token::token),
        metrics.map(Token::token),
    )
    .map_err(Exit::usage)?;
    Ok(clients)
}

/// A listener on `addr`, or exit 3 saying why not.
async fn bind(addr: &std::net::SocketAddr) -> Result<tokio::net::TcpListener, Exit> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Exit::session(format!("cannot listen on {addr}: {e}")))
}

/// For tests: the MCP session idle timeout in milliseconds instead of
/// `http::SESSION_IDLE_TIMEOUT`. Read only here, in the CLI.
use super::env::MCP_HTTP_SESSION_IDLE_MS as SESSION_IDLE_ENV;

/// A duration from the environment in milliseconds (tests), else `default`.
fn millis_from_env(var: &str, default: std::time::Duration) -> Result<std::time::Duration, Exit> {
    match std::env::var(var) {
        Err(_) => Ok(default),
        Ok(v) => match v.parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(std::time::Duration::from_millis(ms)),
            _ => Err(Exit::usage(format!(
                "{var}={v}: must be a number of milliseconds over 0"
            ))),
        },
    }
}

/// Serves MCP Streamable HTTP until SIGTERM or SIGINT, then drains (see
/// `tickbox_runtime::mcp::http`): Ok once every request in flight was
/// answered, exit 130 when the drain timeout cut some off. A second signal
/// while draining is `main`'s: it stops everything at once (130).
#[allow(clippy::too_many_arguments)]
async fn serve_http(
    facade: &Facade,
    listener: tokio::net::TcpListener,
    token: Token,
    clients: Vec<NamedClient>,
    metrics: Option<(tokio::net::TcpListener, Token, Arc<Metrics>)>,
    drain_timeout: std::time::Duration,
    signals: Signals,
) -> Result<(), Exit> {
    let addr = listener
        .local_addr()
        .map_err(|e| Exit::session(format!("cannot read the bound address: {e}")))?;
    let mut options = tickbox_runtime::mcp::http::HttpOptions::new(String::new());
    options.clients = clients;
    options.session_idle = millis_from_env(
        SESSION_IDLE_ENV,
        tickbox_runtime::mcp::http::SESSION_IDLE_TIMEOUT,
    )?;
    options.body_timeout = millis_from_env(
        super::env::MCP_HTTP_BODY_TIMEOUT_MS,
        tickbox_runtime::mcp::http::BODY_TIMEOUT,
    )?;
    // The token is printed once, on the last line (the one a launcher or a
    // test waits for; port 0 becomes real here), and never logged.
    let (_file, url) = match token {
        Token::Given { token, file } => {
            eprintln!(
                "tickbox mcp: every request needs the token in {}, as \
                 `Authorization: Bearer TOKEN` or ?token=TOKEN",
                file.display()
            );
            options.token = token;
            (None, format!("http://{addr}/mcp"))
        }
        Token::Generated(token) => {
            let file = token::write_file(&format!("mcp-http-{}.token", addr.port()), &token)?;
            eprintln!(
                "tickbox mcp: every request needs the token, as `Authorization: Bearer TOKEN` \
                 or ?token=TOKEN; it is in {} (mode 0600, removed at exit)",
                file.path().display()
            );
            let url = format!("http://{addr}/mcp?token={token}");
            options.token = token;
            (Some(file), url)
        }
    };
    let _metrics_file = match metrics {
        Some((listener, token, metrics)) => {
            let (file, endpoint) = metrics_endpoint(listener, token, metrics)?;
            options.metrics = Some(endpoint);
            file
        }
        None => None,
    };
    options.drain_timeout = drain_timeout;
    // From here a first signal drains; before, it stopped the Ticks while
    // they started (nothing was served yet, so nothing to finish).
    signals.drain_on_first();
    let signal = std::sync::OnceLock::new();
    let stop = async {
        let sig = signals.nth(1).await;
        let _ = signal.set(sig);
        eprintln!(
            "tickbox mcp: {sig}: draining: no new sessions or requests; waiting up to {}s for \
             the requests in flight (a second signal stops at once)",
            drain_timeout.as_secs()
        );
    };
    eprintln!("tickbox mcp: serving MCP on {url}");
    let drained = tickbox_runtime::mcp::http::serve(facade.clone(), listener, options, stop)
        .await
        .map_err(|e| Exit::session(format!("HTTP serving failed: {e}")))?;
    let sig = signal.get().copied().unwrap_or("a signal");
    match drained {
        Drained::Finished => {
            eprintln!("tickbox mcp: drained after {sig}; stopping the Ticks");
            Ok(())
        }
        Drained::TimedOut { in_flight } => Err(Exit::new(
            super::exit::INTERRUPTED,
            format!(
                "drained after {sig}, but the drain timeout ({}s, --drain-timeout) passed with \
                 {in_flight} request(s) still in flight; they were cut off and the Ticks were \
                 stopped",
                drain_timeout.as_secs()
            ),
        )),
    }
}

/// The `/metrics` endpoint on `listener`, its token written to a file
/// when generated (the file is removed when it is dropped), and one
/// stderr line saying where the page and its token are. The token itself
/// is never printed: a scraper reads it from a file.
fn metrics_endpoint(
    listener: tokio::net::TcpListener,
    token: Token,
    metrics: Arc<Metrics>,
) -> Result<(Option<token::TokenFile>, MetricsEndpoint), Exit> {
    let addr = listener
        .local_addr()
        .map_err(|e| Exit::session(format!("cannot read the metrics address: {e}")))?;
    let (file, token, where_) = match token {
        Token::Given { token, file } => {
            let shown = file.display().to_string();
            (None, token, shown)
        }
        Token::Generated(token) => {
            let file = token::write_file(&format!("mcp-metrics-{}.token", addr.port()), &token)?;
            let shown = format!("{}, mode 0600, removed at exit", file.path().display());
            (Some(file), token, shown)
        }
    };
    if !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "metrics are served beyond loopback, in plain HTTP: whoever can reach the address and \
             sees the traffic can read the token and the page"
        );
    }
    eprintln!(
        "tickbox mcp: serving metrics on http://{addr}/metrics (token in {where_}; a scraper \
         sends it as `Authorization: Bearer TOKEN`)"
    );
    let endpoint = MetricsEndpoint {
        listener,
        token,
        metrics,
    };
    Ok((file, endpoint))
}

/// The Ticks to start, the facade's options and the ticks file's clients file.
type Plan = (Vec<Planned>, FacadeOptions, Option<PathBuf>);

fn plan(args: McpArgs) -> Result<Plan, Exit> {
    let Some(path) = args.config else {
        if let Some(name) = &args.name {
            if !valid_tick_name(name) {
                return Err(Exit::usage(format!(
                    "--name `{name}` must be 1 to 32 of A-Z a-z 0-9 _ -"
                )));
            }
        }
        let spec = args.opts.spec(args.tick)?;
        let grants = args.opts.grant_spec()?;
        let mut opts = args.opts;
        opts.asking = Some(Asking::Nobody(consent::NOBODY_MCP));
        let label = args.name.clone().unwrap_or_else(|| describe_spec(&spec));
        let planned = Planned {
            name: args.name,
            label,
            request: super::open::unaudited(spec, &opts),
            call_timeout: opts.call_timeout,
            audit: opts.audit_wanted(),
            lock_beside: opts.policy.clone(),
            registry: opts.registry,
            grants,
            instances: Instances::Shared,
            max_instances: None,
            idle_timeout: None,
            start: Start::WithHost,
        };
        return Ok((vec![planned], FacadeOptions::default(), None));
    };
    if args.tick.is_some() || !args.opts.command.is_empty() || args.name.is_some() {
        return Err(Exit::usage(
            "--config names the Ticks; give no TICK, `-- COMMAND` or --name with it",
        ));
    }
    if let Some(flag) = grant_flag_given(&args.opts) {
        return Err(Exit::usage(format!(
            "{flag} is not taken with --config: each Tick's grants and bounds are the keys of its [[tick]] entry"
        )));
    }
    let config = Config::load(&path).map_err(Exit::usage)?;
    let flags = args.opts;
    // The config's audit keys, unless the command line names a stream.
    let audit = match &flags.audit {
        Some(to) => super::audit::Wanted {
            to: Some(to.clone()),
            args: flags.audit_args,
            sync: flags.audit_sync,
        },
        None => super::audit::Wanted {
            to: config.audit.clone(),
            args: flags.audit_args | config.audit_args,
            sync: flags.audit_sync | config.audit_sync,
        },
    };
    let mut options = FacadeOptions::default();
    if let Some(n) = config.max_instances {
        options = options.max_instances(n);
    }
    let planned = config
        .ticks
        .into_iter()
        .map(|entry| planned(entry, &flags, &audit, &path))
        .collect();
    Ok((planned, options, config.clients))
}

/// The first grant or bound flag given, which a ticks file's entries set
/// for themselves: taken silently, it would bound nothing.
fn grant_flag_given(o: &TickOpts) -> Option<&'static str> {
    let b = &o.bounds;
    [
        ("--dir", !o.dir.is_empty()),
        ("--allow-net", !o.allow_net.is_empty()),
        ("--allow-http", !o.allow_http.is_empty()),
        ("--http-ca", o.http_ca.is_some()),
        ("--env", !o.env.is_empty()),
        ("--policy", o.policy.is_some()),
        ("--max-memory", o.max_memory.is_some()),
        ("--max-handles", b.max_handles.is_some()),
        ("--max-wasm-size", b.max_wasm_size.is_some()),
        ("--compile-timeout", b.compile_timeout.is_some()),
        ("--compile-memory", b.compile_memory.is_some()),
        ("--max-write", b.max_write.is_some()),
    ]
    .into_iter()
    .find_map(|(flag, given)| given.then_some(flag))
}

/// An entry's request: its own grants, cwd and call timeout, typed as
/// the config file wrote them; the flags given next to --config add the
/// audit stream, registry settings, cache and defaults.
fn planned(
    entry: TickEntry,
    flags: &TickOpts,
    audit: &super::audit::Wanted,
    config: &std::path::Path,
) -> Planned {
    let target = match entry.source {
        TickSource::Path(p) => Target::named(&p),
        TickSource::Command(argv) => Target::Command(argv),
    };
    let mut request = Request::new(target);
    // A wasm Tick has no working directory on the host: its files are its grants.
    request.cwd = if request.target.is_sandboxed() {
        None
    } else {
        entry.cwd.or_else(|| flags.cwd.clone())
    };
    request.grants = entry.grants.clone();
    request.no_cache = flags.no_cache;
    // References named in the config are locked beside it.
    let registry = flags.registry.lock_beside(Some(config));
    request.registry = registry.settings();
    // No MCP request leads to an approval: a Tick whose manifest asks
    // for what nobody approved is refused before MCP traffic starts.
    request.asking = Asking::Nobody(consent::NOBODY_MCP);
    Planned {
        label: entry.name.clone(),
        name: Some(entry.name),
        request: Ok(request),
        call_timeout: entry.call_timeout.unwrap_or(flags.call_timeout),
        // The config's audit keys (or the flags), for every Tick it names.
        audit: Ok(audit.clone()),
        lock_beside: None,
        registry,
        grants: entry.grants,
        instances: entry.instances,
        max_instances: entry.max_instances,
        idle_timeout: entry.idle_timeout,
        start: entry.start,
    }
}

fn describe_spec(spec: &TickSpec) -> String {
    match spec {
        TickSpec::Path(p) => p.clone(),
        TickSpec::Command(argv) => argv.join(" "),
        TickSpec::Live(t) => format!("@{t}"),
    }
}

/// The name of a Tick the command line did not name: its kind's
/// (`tickbox_mcp::default_tick_name`).
fn default_name(session: &Session) -> String {
    let kind = session
        .descriptor()
        .map(|d| d.kind.clone())
        .unwrap_or_default();
    tickbox_runtime::mcp::default_tick_name(kind.wire())
}

/// Warnings and errors reach stderr even without -v: a Tick that dies is
/// worth a line in the MCP client's server log. Not rmcp's warning for
/// every error answer: a client sending refused requests in a loop would
/// write a line per request (the answer itself tells the client). A no-op
/// when -v or RUST_LOG already set up logging.
fn default_logging() {
    super::logging::init(tracing_subscriber::EnvFilter::new(format!(
        "warn,rmcp=error,{}=info",
        super::oci::FILES_TARGET
    )));
}

/// Keeps the real stdout for MCP frames only: returns a writer on a
/// duplicate of fd 1 and points fd 1 at stderr, so that anything else that
/// writes to "stdout" (a stray print, a library) ends up on stderr.
fn reserve_stdout() -> std::io::Result<std::fs::File> {
    // SAFETY: plain fd syscalls; the duplicate is owned by the File alone.
    unsafe {
        let fd = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(2, 1) < 0 {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(std::fs::File::from_raw_fd(fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        args: McpArgs,
    }

    fn plan_of(line: &[&str]) -> Result<Plan, Exit> {
        plan(
            Line::try_parse_from([&["mcp"], line].concat())
                .unwrap()
                .args,
        )
    }

    /// A grant or bound flag next to --config would bound nothing (each
    /// entry has its own): refused, naming the flag, before the file is read.
    #[test]
    fn grant_flags_are_refused_with_a_ticks_file() {
        for (flag, value) in [
            ("--max-write", "1KiB"),
            ("--dir", "/tmp"),
            ("--allow-net", "127.0.0.1:80"),
            ("--env", "HOME"),
            ("--policy", "p.toml"),
            ("--max-memory", "1MiB"),
            ("--compile-timeout", "1"),
        ] {
            let e = plan_of(&["--config", "/nonexistent/ticks.toml", flag, value])
                .err()
                .unwrap_or_else(|| panic!("{flag} was taken"));
            assert_eq!(e.code, 2);
            assert!(
                e.message
                    .starts_with(&format!("{flag} is not taken with --config")),
                "{}",
                e.message
            );
        }
        // Control: the flags --config does take reach the file, which is
        // then what fails.
        let e = plan_of(&[
            "--config",
            "/nonexistent/ticks.toml",
            "--no-cache",
            "--audit",
            "-",
        ])
        .err()
        .expect("no such file");
        assert!(
            e.message.contains("cannot read the config"),
            "{}",
            e.message
        );
    }
}
