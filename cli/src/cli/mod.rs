//! The `tickbox` command line: argument parsing, opening a Tick, and the
//! one-shot commands.

mod attach;
mod check;
mod exit;
mod ls;
mod mcp;
mod open;
mod remote;
mod run;
mod terminal;
mod test;
mod watch;

use clap::{Args, Parser, Subcommand};
use exit::Exit;
use open::{Opened, TickArgs, TickOpts};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;
use tickbox_runtime::live::wire::CallReply;
use tickbox_runtime::protocol::{Descriptor, PreparedCall};

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
    #[command(after_help = test::HELP)]
    Test(test::TestArgs),
    /// Host a Tick with this terminal as its view, published as a live instance (Ctrl-] detaches)
    Run(run::RunArgs),
    /// Make this terminal a view of a live instance (Ctrl-] detaches)
    Attach(attach::AttachArgs),
    /// List live instances (JSON lines, or a table on a terminal); removes stale ones
    Ls(ls::LsArgs),
    /// Print the Tick's state as one JSON line per delivery (latest only, merged count, trimmed to 16 KiB)
    #[command(after_help = exit::HELP)]
    Watch(watch::WatchArgs),
    /// End a live instance: its Tick is terminated
    Stop(remote::StopArgs),
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
    let cli = Cli::parse();
    init_logging(cli.verbose);
    // These own the terminal or their signals (a view or a watch of a live
    // instance ends without stopping its Tick), so they run apart from the
    // one-shot commands below; `run` forks before any thread exists.
    let command = match cli.command {
        Command::Run(args) => return run::main(args, cli.verbose),
        Command::Attach(args) => return attach::main(args),
        Command::Watch(args) if args.is_live() => return attach::runtime_main(watch::run(args)),
        other => other,
    };
    let runtime = match new_runtime() {
        Ok(rt) => rt,
        Err(e) => return fail(e),
    };
    let code = runtime.block_on(async {
        tokio::select! {
            r = run(command) => match r {
                Ok(()) => ExitCode::from(exit::OK),
                Err(e) => fail(e),
            },
            sig = interrupted() => fail(Exit::new(exit::INTERRUPTED, format!("interrupted by {sig}; the Tick was stopped"))),
        }
    });
    // Dropping the runtime drops every task; backends kill their Tick on drop.
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}

/// The async runtime every command runs on.
fn new_runtime() -> Result<tokio::runtime::Runtime, Exit> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Exit::session(format!("cannot start the async runtime: {e}")))
}

fn fail(e: Exit) -> ExitCode {
    eprintln!("tickbox: {}", e.message);
    ExitCode::from(e.code)
}

async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
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
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Writes the command's result to stdout as one JSON document and a newline.
fn emit(value: &Value, pretty: bool) -> Result<(), Exit> {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    let text = text.map_err(|e| Exit::session(format!("cannot encode the result: {e}")))?;
    emit_text(&text)
}

fn emit_text(text: &str) -> Result<(), Exit> {
    let mut out = std::io::stdout().lock();
    // A closed stdout (e.g. `| head`) is the reader's choice, not our failure.
    let _ = writeln!(out, "{text}").and_then(|_| out.flush());
    Ok(())
}

async fn run(command: Command) -> Result<(), Exit> {
    if let Some(done) = remote::try_run(&command).await {
        return done;
    }
    match command {
        Command::Describe(args) => {
            let t = open::open(args.spec()?, &args.opts).await?;
            let d = t
                .session
                .descriptor()
                .ok_or_else(|| Exit::session("no descriptor after initialization"))?;
            let r = emit(&d.raw, args.opts.pretty);
            t.close().await;
            r
        }
        Command::Read(args) => {
            let t = open::open(args.spec()?, &args.opts).await?;
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
            let t = open::open(args.spec()?, &args.opts).await?;
            // A Tick usually draws right after starting; wait until it pauses.
            t.session
                .view()
                .settle(Duration::from_millis(200), Duration::from_secs(2))
                .await;
            let text = t.session.view().screen_text();
            t.close().await;
            emit_text(&text)
        }
        Command::Call(args) => call(args).await,
        Command::Info(args) => {
            let t = open::open(args.spec()?, &args.opts).await?;
            let v = info(&t);
            t.close().await;
            emit(&v, args.opts.pretty)
        }
        Command::Mcp(args) => mcp::run(args).await,
        Command::Check(args) => check::run(args).await,
        Command::Test(args) => test::run(args).await,
        Command::Ls(args) => ls::run(args).await,
        Command::Watch(args) => watch::run(args).await,
        Command::Run(_) | Command::Attach(_) | Command::Stop(_) => {
            Err(Exit::usage("handled before the runtime starts"))
        }
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
        } => {
            v["backend"] = json!("wasm");
            v["path"] = json!(path);
            v["wasm"] = json!(kind);
            v["granted"] = serde_json::to_value(grants).unwrap_or(Value::Null);
            v["requested"] = serde_json::to_value(requested).unwrap_or(Value::Null);
        }
    }
    v
}

async fn call(args: CallArgs) -> Result<(), Exit> {
    let mut pos = args.positionals.iter().cloned();
    let tick = if args.tick.command.is_empty() {
        pos.next()
    } else {
        None
    };
    let tool = pos.next().ok_or_else(|| Exit::usage("call needs a TOOL"))?;
    let call_args = parse_call_args(pos.next().as_ref())?;
    let spec = args.tick.spec(tick)?;
    let t = open::open(spec, &args.tick).await?;
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
    let prepared = approve(&catalog, tool, call_args, yes)?;
    report_call(tool, t.session.call(&prepared).await.into(), pretty)
}

/// Prepares a call against `catalog`; a mutating tool needs `yes`.
fn approve(
    catalog: &Descriptor,
    tool: &str,
    call_args: Value,
    yes: bool,
) -> Result<PreparedCall, Exit> {
    let prepared = catalog.prepare(tool, call_args).map_err(Exit::usage)?;
    if prepared.mutates && !yes {
        let description = catalog
            .tool(tool)
            .map(|t| t.description.as_str())
            .unwrap_or_default();
        eprintln!(
            "tool:        {tool}\ndescription: {description}\nargs:        {}",
            prepared.args
        );
        return Err(Exit::usage(format!(
            "approval required: `{tool}` mutates; nothing was sent; re-run with --yes to call it"
        )));
    }
    Ok(prepared)
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
