//! The `tickbox` command line: argument parsing, opening a Tick, and the
//! one-shot commands.

mod attach;
mod audit;
mod cache;
mod check;
mod compile;
mod consent;
mod env;
mod exit;
mod inspect;
mod logging;
mod ls;
mod mcp;
mod new;
mod oci;
mod open;
mod otel;
mod policy;
mod registry_flags;
mod remote;
mod review;
mod run;
mod show_trace;
mod signals;
mod stdio;
mod terminal;
mod test;
mod trust;
mod watch;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use exit::Exit;
use open::{Opened, TickArgs, TickOpts};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tickbox_runtime::live::wire::CallReply;
use tickbox_runtime::protocol::{Descriptor, PreparedCall, TickText};
use tickbox_runtime::text;

#[derive(Parser)]
#[command(name = "tickbox", version, about = "Run Ticks, native or sandboxed, from the shell", after_help = exit::HELP)]
struct Cli {
    /// Log to stderr (-v info, -vv debug); RUST_LOG also works
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Tick's descriptor (tick/describe) as JSON
    #[command(after_help = exit::HELP)]
    Describe(TickArgs),
    /// Print the Tick's state (tick/read) as JSON
    #[command(after_help = exit::HELP)]
    Read(TickArgs),
    /// Call a tool: tickbox call TICK TOOL [ARGS_JSON] [--yes], or tickbox call TOOL [ARGS_JSON] --yes -- COMMAND...
    #[command(after_help = exit::HELP)]
    Call(CallArgs),
    /// Print the Tick's view screen as text after initialization
    #[command(after_help = exit::HELP)]
    Screen(TickArgs),
    /// Print how the Tick runs: backend, what it was granted, what it asks for, its tools
    #[command(after_help = exit::HELP)]
    Info(TickArgs),
    /// Serve the Tick (or the Ticks of --config) to an MCP client over stdio
    #[command(after_help = mcp::HELP)]
    Mcp(mcp::McpArgs),
    /// Check a Tick against every Tick-side rule of the protocol: tickbox check TICK [--format text|json|junit]
    #[command(after_help = check::HELP)]
    Check(check::CheckArgs),
    /// Run scenario files against fresh instances of their Ticks: tickbox test FILE|DIR... [--format text|json|junit]
    #[command(after_help = test::help())]
    Test(test::TestArgs),
    /// Host a Tick with this terminal as its view, published as a live instance (Ctrl-] detaches)
    Run(run::RunArgs),
    /// Make this terminal a view of a live instance (Ctrl-] detaches)
    Attach(attach::AttachArgs),
    /// List live instances (JSON lines, or a table on a terminal); removes stale ones; -a adds those ended in the last hour
    Ls(ls::LsArgs),
    /// Print an instance's retained output: a live one's screen, an ended one's last lines
    Logs(ls::LogsArgs),
    /// Serve a web page on loopback that shows the Tick live (screen, state, tools, protocol frames) and drives it
    Inspect(inspect::InspectArgs),
    /// Print the Tick's state as one JSON line per delivery (latest only, merged count, trimmed to 16 KiB)
    #[command(after_help = exit::HELP)]
    Watch(watch::WatchArgs),
    /// End a live instance: its Tick is terminated
    Stop(remote::StopArgs),
    /// Show or empty the compile cache of wasm Ticks: tickbox cache ls|clean
    #[command(after_help = cache::HELP)]
    Cache(cache::CacheArgs),
    /// Compile wasm Ticks with Cranelift into the compile cache ahead of their first start: tickbox compile TICK...
    #[command(after_help = compile::HELP)]
    Compile(compile::CompileArgs),
    /// Fetch a Tick from a registry into the store, verified against its digest: tickbox pull oci://HOST/REPO:TAG
    #[command(after_help = oci::HELP)]
    Pull(oci::PullArgs),
    /// Publish a .wasm Tick (and its NAME.tick.toml) to a registry as a Wasm OCI artifact: tickbox push oci://HOST/REPO:TAG WASM
    #[command(after_help = oci::HELP)]
    Push(oci::PushArgs),
    /// Show who signed a Tick in a registry, checked against the signers policy or --allowed-signers: tickbox verify oci://HOST/REPO:TAG
    #[command(after_help = oci::HELP)]
    Verify(oci::VerifyArgs),
    /// Pin registry references to the digests they resolve to now, in a lock file (default ./tickbox.lock, where --locked reads): tickbox lock oci://HOST/REPO:TAG...
    #[command(after_help = oci::HELP)]
    Lock(oci::LockArgs),
    /// Create a Tick project that builds and passes `tickbox check`: tickbox new PATH [--lang rust|c|python|js|go]
    #[command(after_help = new::HELP)]
    New(new::NewArgs),
    /// Approve what a wasm Tick's manifest asks for, for its current content: tickbox trust PATH [--updates] | ls | revoke DIGEST|PATH|REF
    #[command(after_help = trust::HELP)]
    Trust(trust::TrustArgs),
    /// Suggest the least policy file that allows what Ticks used (tickbox policy suggest AUDIT...), or show which signers policy, lock and trust store apply (tickbox policy show [REF])
    #[command(after_help = policy::HELP)]
    Policy(policy::PolicyArgs),
}

#[derive(Args)]
struct CallArgs {
    /// [TICK] TOOL [ARGS_JSON]; TICK is omitted when the command follows `--`
    #[arg(value_name = "TICK TOOL ARGS_JSON", num_args = 1..=3, required = true)]
    positionals: Vec<String>,
    /// Approve a call to a tool that mutates
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    tick: TickOpts,
}

/// Entry point: parse, run, map the result to an exit code.
pub fn main() -> ExitCode {
    // A compile worker (see backend::wasm::compile) is this executable run
    // by a host; it speaks pipes, not the command line.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(tickbox_runtime::backend::wasm::compile::WORKER_ARG)
    {
        return tickbox_runtime::backend::wasm::compile::worker_main(&argv[2..]);
    }
    let matches = with_defaults(Cli::command())
        .try_get_matches()
        .unwrap_or_else(|e| usage_error(e, &argv));
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => usage_error(e, &argv),
    };
    init_logging(cli.verbose);
    tracing::debug!("command line parsed");
    if let Err(e) = env::check() {
        return fail(Exit::usage(e));
    }
    // Orphans of native Ticks come back to this process, to be swept on the
    // way out (see backend::reaper); every child this binary starts is a
    // Tick or a compile worker, registered as such.
    let cgroups = if env::no_cgroup() {
        tickbox_runtime::backend::cgroup::Cgroups::off("TICKBOX_NO_CGROUP is set")
    } else {
        tickbox_runtime::backend::cgroup::Cgroups::default()
    };
    let hygiene = tickbox_runtime::launch::ProcessHygiene::install(cgroups);
    // These own the terminal or their signals (a view or a watch of a live
    // instance ends without stopping its Tick), so they run apart from the
    // one-shot commands below; `run` forks before any thread exists.
    let command = match cli.command {
        Command::Run(args) => return run::main(args, cli.verbose, hygiene.native()),
        Command::Attach(args) => return attach::main(args),
        Command::New(args) => {
            return match new::run(args) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            }
        }
        Command::Watch(args) if args.is_live() => {
            // A live instance is hosted elsewhere: nothing is started here.
            return attach::runtime_main(async move { watch::run(args, &open::app()).await });
        }
        Command::Compile(args) => {
            return match compile::run(args, hygiene.native()) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            }
        }
        Command::Cache(args) => {
            return match cache::run(args) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            }
        }
        Command::Pull(args) => {
            let pretty = args.pretty;
            return match oci::pull(args).and_then(|v| emit(&v, pretty)) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            };
        }
        Command::Push(args) => {
            let pretty = args.pretty;
            return match oci::push(args).and_then(|v| emit(&v, pretty)) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            };
        }
        Command::Lock(args) => {
            return match oci::lock_command(args).and_then(|v| emit(&v, false)) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            };
        }
        Command::Verify(args) => {
            let pretty = args.pretty;
            return match oci::verify(args).and_then(|v| emit(&v, pretty)) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            };
        }
        Command::Trust(args) => {
            return match trust::run(args) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            }
        }
        // Reads files and prints; no Tick runs, so no async runtime.
        Command::Policy(args) => {
            return match policy::run(args) {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            }
        }
        other => other,
    };
    let workers = match &command {
        _ if one_shot(&command) => 1,
        Command::Mcp(args) => args.workers(),
        _ => 2,
    };
    // The one application context of this process: its engines, the
    // references it resolved and its audit writers (finished below).
    let app = Arc::new(open::hosting_app(hygiene.native()));
    let runtime = match new_runtime(workers) {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    // Before the command runs: a signal its thread is too blocked to take
    // (an open of a FIFO) still ends it.
    signals::watchdog();
    let code = runtime.block_on(async {
        let signals = signals::Signals::listen();
        tokio::select! {
            r = run(command, signals.clone(), app.clone()) => match r {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            },
            sig = signals.stopping() => fail(Exit::new(exit::INTERRUPTED, format!("interrupted by {sig}; the Tick was stopped"))),
        }
    });
    // Dropping the runtime drops every task; backends kill their Tick on drop.
    runtime.shutdown_timeout(Duration::from_secs(2));
    // Every session has recorded its end by now: what is queued is written.
    app.finish_audit();
    // Every session span has ended too: what is queued is exported (the
    // app's observers were finished with its writers).
    hygiene.finish(&app.engines());
    code
}

/// The command line with the sandbox bounds' defaults added to their help,
/// in every subcommand that takes them.
fn with_defaults(mut cmd: clap::Command) -> clap::Command {
    let defaults = open::bound_defaults();
    for (id, default) in &defaults {
        if cmd.get_arguments().any(|a| a.get_id() == *id) {
            cmd = cmd.mut_arg(*id, |a| {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                a.help(format!("{help} [default: {default}]"))
            });
        }
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, with_defaults);
    }
    cmd
}

/// Whether a command starts one Tick, does one thing and ends (describe,
/// read, call, screen, info): it runs on a current-thread runtime.
fn one_shot(command: &Command) -> bool {
    matches!(
        command,
        Command::Describe(_)
            | Command::Read(_)
            | Command::Call(_)
            | Command::Screen(_)
            | Command::Info(_)
    )
}

/// The async runtime a command runs on, with `workers` threads. One
/// thread is a current-thread runtime: none to start, and every wake-up
/// (the Tick's answer, a wasm guest's turn, an MCP request's task) stays
/// on it, so a command serving one Tick or one client pays no cross-thread
/// wake-ups. Compiles and blocking file work still go to the blocking
/// pool, a wasm guest still yields at every epoch tick, and a native Tick's
/// PTY and the view keep their own threads. Hosts of many Ticks and many
/// clients (check, test, watch, run, mcp --http …) get two workers.
/// `TICKBOX_RUNTIME=multi-thread` or `current-thread` overrides the shape
/// for any command (for comparison).
fn new_runtime(workers: u16) -> Result<tokio::runtime::Runtime, Exit> {
    let single = env::runtime_single().unwrap_or(workers <= 1);
    let built = if single {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(usize::from(workers.max(2)))
            .enable_all()
            .build()
    };
    built.map_err(|e| Exit::session(format!("cannot start the async runtime: {e}")))
}

fn fail(e: Exit) -> ExitCode {
    // A closed stdout ends a command quietly: the reader chose to stop.
    if e.message.is_empty() {
        return ExitCode::from(e.code);
    }
    // Messages quote the Tick (tool errors, init errors, violations): one
    // line, every control and bidi character escaped.
    eprintln!("tickbox: {}", text::escape(&e.message));
    if !e.last_words.is_empty() {
        eprintln!("  the Tick's last words (the end of its screen):");
        for line in &e.last_words {
            eprintln!("  | {line}");
        }
    }
    ExitCode::from(e.code)
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let filter = match (verbose, std::env::var("RUST_LOG")) {
        (0, Ok(spec)) => EnvFilter::new(spec),
        (0, Err(_)) => return,
        (1, _) => EnvFilter::new("info"),
        _ => EnvFilter::new("debug"),
    };
    // Logs go to stderr only: stdout is the command's result.
    logging::init(filter);
}

/// Writes the command's result to stdout as one JSON document and a newline.
fn emit(value: &Value, pretty: bool) -> Result<(), Exit> {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    let text = text.map_err(|e| Exit::session(format!("cannot encode the result: {e}")))?;
    // The same JSON value, with C1, DEL and bidi characters as \u escapes.
    write_stdout(&text::json_safe(&text))
}

/// Writes text that may quote the Tick (screen, reports, tables) to stdout,
/// control and bidi characters escaped, line breaks kept. A closed stdout
/// (`| head -1`: EPIPE, as Rust ignores SIGPIPE) is the reader's choice,
/// not our failure: it ends the command at once with exit 0
/// ([`Exit::stdout_closed`]), so a streaming command (`watch`) stops instead
/// of writing into the void.
fn emit_text(text: &str) -> Result<(), Exit> {
    write_stdout(&text::escape_lines(text))
}

/// [`emit_text`] for text a Tick controls (its screen), by its own way out.
pub(crate) fn emit_tick_text(text: &TickText) -> Result<(), Exit> {
    write_stdout(&text.lines())
}

fn write_stdout(text: &str) -> Result<(), Exit> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Exit::stdout_closed()),
        Err(e) => Err(Exit::session(format!(
            "cannot write the result to stdout: {e}"
        ))),
    }
}

async fn run(
    command: Command,
    signals: signals::Signals,
    app: Arc<tickbox_app::App>,
) -> Result<(), Exit> {
    if let Some(done) = remote::try_run(&command).await {
        return done;
    }
    match command {
        Command::Describe(args) => {
            let t = open::open(&app, args.spec()?, &args.opts).await?;
            let d = t
                .session
                .descriptor()
                .ok_or_else(|| Exit::session("no descriptor after initialization"))?;
            let r = emit(&d.raw, args.opts.pretty);
            t.close().await;
            r
        }
        Command::Read(args) => {
            let t = open::open(&app, args.spec()?, &args.opts).await?;
            let state = t
                .session
                .state()
                .state
                .ok_or_else(|| Exit::session("no state after initialization"))?;
            let v = serde_json::to_value(&*state).map_err(|e| Exit::session(e.to_string()))?;
            let r = emit(&v, args.opts.pretty);
            t.close().await;
            r
        }
        Command::Screen(args) => {
            let t = open::open(&app, args.spec()?, &args.opts).await?;
            // A Tick usually draws right after starting; wait until it pauses.
            t.session
                .view()
                .settle(Duration::from_millis(200), Duration::from_secs(2))
                .await;
            let text = t.session.view().screen_text();
            t.close().await;
            emit_tick_text(&text)
        }
        Command::Call(args) => call(args, &app).await,
        Command::Info(args) => {
            let t = open::open(&app, args.spec()?, &args.opts).await?;
            let v = info(&t);
            t.close().await;
            emit(&v, args.opts.pretty)
        }
        Command::Mcp(args) => mcp::run(args, signals, &app).await,
        Command::Check(args) => check::run(args, &app).await,
        Command::Test(args) => test::run(args, app.clone()).await,
        Command::Ls(args) => ls::run(args).await,
        Command::Logs(args) => ls::logs(args).await,
        Command::Watch(args) => watch::run(args, &app).await,
        Command::Inspect(args) => inspect::run(args, &app).await,
        Command::Run(_)
        | Command::Attach(_)
        | Command::Stop(_)
        | Command::Cache(_)
        | Command::Compile(_)
        | Command::Pull(_)
        | Command::Push(_)
        | Command::Verify(_)
        | Command::Lock(_)
        | Command::New(_)
        | Command::Trust(_)
        | Command::Policy(_) => Err(Exit::usage("handled before the runtime starts")),
    }
}

fn info(t: &Opened) -> Value {
    use serde_json::json;
    let d = t.session.descriptor();
    let tools: Vec<Value> = d
        .iter()
        .flat_map(|d| d.tools.iter())
        .map(|tool| json!({"name": tool.name, "mutates": tool.mutates}))
        .collect();
    let mut v = json!({
        "kind": d.as_ref().map(|d| d.kind.clone()),
        "title": d.as_ref().map(|d| d.title.clone()),
        "revision": d.as_ref().map(|d| d.revision.clone()),
        "tools": tools,
    });
    match &t.backend {
        open::Backend::Native { argv } => {
            v["backend"] = json!("native");
            v["command"] = json!(argv);
            v["granted"] = json!("not sandboxed: a native Tick can access everything you can");
        }
        open::Backend::Wasm {
            path,
            kind,
            grants,
            requested,
            pulled,
        } => {
            v["backend"] = json!("wasm");
            v["path"] = json!(path);
            if let Some(p) = pulled {
                v["reference"] = json!(p.reference.to_string());
                v["digest"] = json!(p.wasm_digest.to_string());
            }
            v["wasm"] = json!(kind);
            v["granted"] = serde_json::to_value(grants).unwrap_or(Value::Null);
            v["requested"] = serde_json::to_value(requested).unwrap_or(Value::Null);
        }
    }
    v
}

async fn call(args: CallArgs, app: &tickbox_app::App) -> Result<(), Exit> {
    let mut pos = args.positionals.iter().cloned();
    let tick = if args.tick.command.is_empty() {
        pos.next()
    } else {
        None
    };
    let tool = pos.next().ok_or_else(|| Exit::usage("call needs a TOOL"))?;
    let call_args = parse_call_args(pos.next().as_ref())?;
    let spec = args.tick.spec(tick)?;
    let t = open::open(app, spec, &args.tick).await?;
    let result = call_opened(&t, &tool, call_args, args.yes, args.tick.pretty).await;
    t.close().await;
    result
}

/// Parses ARGS_JSON: a JSON object, `{}` when absent.
fn parse_call_args(text: Option<&String>) -> Result<Value, Exit> {
    let call_args = match text {
        None => Value::Object(Default::default()),
        Some(text) => serde_json::from_str::<Value>(text)
            .map_err(|e| Exit::usage(format!("ARGS_JSON is not valid JSON: {e}")))?,
    };
    if !call_args.is_object() {
        return Err(Exit::usage("ARGS_JSON must be a JSON object (§7.1)"));
    }
    Ok(call_args)
}

async fn call_opened(
    t: &Opened,
    tool: &str,
    call_args: Value,
    yes: bool,
    pretty: bool,
) -> Result<(), Exit> {
    let catalog = t
        .session
        .descriptor()
        .ok_or_else(|| Exit::session("no descriptor after initialization"))?;
    let prepared = approve(&catalog, tool, call_args, yes, t.session.audit())?;
    let outcome = t.session.call(&prepared).await;
    let reply = report_call(tool, outcome.into(), pretty);
    match reply {
        // A Tick that died mid-call: show how its screen ended, once what
        // it drew on its way out has reached the screen.
        Err(e) if t.session.end_reason().is_some() => {
            let view = t.session.view();
            view.settle_after_end().await;
            Err(e.with_last_words(view.last_lines(tickbox_runtime::view::LAST_WORDS_LINES)))
        }
        other => other,
    }
}

/// Prepares a call against `catalog`; a mutating tool needs `yes`. The
/// decision on a mutating tool is recorded in `audit`.
fn approve(
    catalog: &Descriptor,
    tool: &str,
    call_args: Value,
    yes: bool,
    audit: Option<&tickbox_telemetry::audit::Audit>,
) -> Result<PreparedCall, Exit> {
    let prepared = catalog.prepare(tool, call_args).map_err(Exit::usage)?;
    // The host's output is bounded like the Tick's: refused before sending.
    let line = tickbox_runtime::session::call_line_len(&prepared);
    let limit = tickbox_runtime::protocol::limits::MAX_LINE_BYTES;
    if line > limit {
        return Err(Exit::usage(format!(
            "the call's request line would be {line} bytes, over the {limit}-byte line limit (§3.6); nothing was sent"
        )));
    }
    if let Some(audit) = audit.filter(|_| prepared.mutates) {
        let by = if yes {
            "the command line (--yes)"
        } else {
            "nobody: --yes was not given"
        };
        audit.approval("call", tool, yes, by);
    }
    if prepared.mutates && !yes {
        let description = catalog
            .tool(tool)
            .map(|t| t.description.wire())
            .unwrap_or_default();
        eprint!("{}", approval_prompt(tool, &prepared.args, description));
        return Err(Exit::usage(format!(
            "approval required: `{tool}` mutates; nothing was sent; re-run with --yes to call it"
        )));
    }
    Ok(prepared)
}

/// Most characters of a tool description the approval prompt shows.
const APPROVAL_DESCRIPTION_CHARS: usize = 2000;

/// What a person reads before approving a call: the tool and the args, and
/// the description set apart as the Tick's own words (a Tick cannot make it
/// look like tickbox's text: every line is prefixed and escaped).
fn approval_prompt(tool: &str, args: &Value, description: &str) -> String {
    let args = text::json_safe(&args.to_string());
    let mut out = format!(
        "tool:        {}\nargs:        {args}\nthe Tick describes this tool as (its words, not tickbox's):\n",
        text::escape(tool)
    );
    let shown = text::truncate(description, APPROVAL_DESCRIPTION_CHARS);
    for line in shown.lines() {
        out.push_str("  | ");
        out.push_str(&text::escape(line));
        out.push('\n');
    }
    if shown.len() < description.len() {
        let more = description.chars().count() - APPROVAL_DESCRIPTION_CHARS;
        out.push_str(&format!("  | ... ({more} more characters not shown)\n"));
    }
    out
}

/// Prints a call's outcome and picks the exit code.
fn report_call(tool: &str, outcome: CallReply, pretty: bool) -> Result<(), Exit> {
    match outcome {
        CallReply::Ok { result } => emit(&result, pretty),
        CallReply::Failed {
            code,
            message,
            data,
            executed,
        } => {
            let body = serde_json::json!({
                "code": code, "message": message,
                "data": data.unwrap_or(Value::Null), "executed": executed,
            });
            emit(&body, pretty)?;
            let effect = if executed {
                "may have had effects"
            } else {
                "was not executed"
            };
            Err(Exit::new(
                exit::TOOL_ERROR,
                format!("`{tool}` failed with error {code} ({effect}): {message}"),
            ))
        }
        CallReply::Unknown { reason } => Err(Exit::new(
            exit::UNKNOWN_OUTCOME,
            format!("unknown outcome for `{tool}`: {reason}; it was not resent"),
        )),
    }
}

/// A command-line error, as clap prints it, with a hint where a command
/// line was given as the Tick without `--` (`tickbox describe python3
/// x.py`): the first word became TICK, the rest is "unexpected".
fn usage_error(e: clap::Error, argv: &[String]) -> ! {
    use clap::error::ErrorKind;
    let takes_tick = [
        "describe", "read", "call", "screen", "info", "check", "run", "watch", "mcp", "inspect",
    ];
    let sub = argv.get(1).map(String::as_str).unwrap_or_default();
    if e.kind() == ErrorKind::UnknownArgument
        && takes_tick.contains(&sub)
        && !argv.iter().any(|a| a == "--")
    {
        let _ = e.print();
        let rest: Vec<&str> = argv[2..].iter().map(String::as_str).collect();
        eprintln!(
            "\ntip: to run a command as the Tick, put it after `--`: tickbox {sub} -- {}",
            text::escape(&rest.join(" "))
        );
        std::process::exit(i32::from(exit::USAGE));
    }
    e.exit()
}
