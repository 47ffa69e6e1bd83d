//! `tickbox test`: run scenario files against fresh instances of their
//! Ticks, in parallel, and print a report (text, JSON or JUnit) on stdout.

use super::consent::NOBODY_TEST;
use super::exit::{self, Exit};
use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_app::scenarios::{self, write_traces};
use tickbox_app::App;
use tickbox_runtime::scenario::{
    self, report, trace, Outcome, Policy, Prepared, RunOptions, Scenario, ScenarioResult,
    TimeBudget,
};
use tickbox_runtime::Launcher;

/// `tickbox test`'s help after the options: its exit codes and rules, the
/// defaults and bounds read from their constants.
pub fn help() -> String {
    let minutes = |d: Duration| format!("{}m", d.as_secs() / 60);
    format!(
        "\
Exit codes (the first that applies):
  2    usage error, a scenario file that is invalid or cannot run as written, or a
       wasm Tick whose manifest asks for grants no one approved for its content
       (tickbox test never asks; `tickbox trust PATH` approves)
  3    a Tick could not be started or initialized
  1    a step of a scenario failed (the report shows the step, the expectation
       and what was there)
  0    every scenario passed
  130  interrupted; every Tick was stopped

Scenario files (TOML) are documented in docs/guide/testing.md;
a directory is searched for *.scenario.toml. Wasm Ticks run with virtual time
and seeded randomness unless the scenario sets deterministic = false.

Scenario files are untrusted input. A scenario may grant directories only
under its own directory (or --grant-root DIR) and read environment variables
(${{NAME}}, env = [\"NAME\"]) only if --allow-env NAME names them; scenario and
snapshot files are never read or written through a symbolic link. [[http]]
fixtures answer a wasm Tick's HTTP requests in place of the network (no
socket is opened; a request none answers fails its step), and [files] seeds
the scratch directory; both read files only beside the scenario. When the
CI environment variable is set (to anything but \"\", 0 or false), only
sandboxed (wasm) Ticks run, as with --sandboxed-only; --allow-native runs
native ones too. Each scenario has --timeout (default {scenario_timeout}), the whole
run --run-timeout (default {run_timeout}).

--trace on-failure|always writes a trace per scenario into --trace-dir
(default target/tickbox-traces): NAME.trace.cast, an asciicast v2 file that
asciinema plays as it is, with the protocol frames, each state and each
step's outcome in it (at most {trace_max_mib} MiB; a cut trace says so in the report).
`tickbox test show-trace FILE` replays one step by step.",
        scenario_timeout = minutes(scenario::DEFAULT_SCENARIO_TIMEOUT),
        run_timeout = minutes(scenario::DEFAULT_RUN_TIMEOUT),
        trace_max_mib = trace::MAX_TRACE_BYTES >> 20,
    )
}

/// When `tickbox test` writes a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TraceMode {
    /// Never
    Off,
    /// For each scenario that failed, could not start, or was flaky (its first failed attempt)
    OnFailure,
    /// For every scenario that ran
    Always,
}

/// Where traces go unless --trace-dir says otherwise (relative to the
/// current directory, like cargo's own output).
pub const DEFAULT_TRACE_DIR: &str = "target/tickbox-traces";

/// Report formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// One line per scenario, the failure under it
    Text,
    /// One JSON document (format 1; docs/guide/testing.md)
    Json,
    /// JUnit XML for CI systems
    Junit,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TestArgs {
    #[command(subcommand)]
    pub command: Option<TestCommand>,
    /// Scenario files, or directories searched for *.scenario.toml
    #[arg(value_name = "FILE|DIR", required = true)]
    pub paths: Vec<PathBuf>,
    /// Scenarios run at once [default: the number of cores]
    #[arg(short = 'j', long = "jobs", value_name = "N")]
    pub jobs: Option<usize>,
    /// Report format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write snapshots (STEM.NAME.snap next to the scenario) instead of comparing them
    #[arg(long)]
    pub update: bool,
    /// Run a scenario that failed or could not start up to N more times, each in a fresh instance; one that passes then is reported flaky, never plain green
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub retries: u32,
    /// Run only the K-th of N disjoint parts of the suite, split by scenario path (for a CI matrix)
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Run only scenarios whose name or file path contains this text (repeatable)
    #[arg(long, value_name = "TEXT")]
    pub filter: Vec<String>,
    /// Random seed for deterministic wasm Ticks (overrides the scenarios' seed)
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Do not read or write the compile cache for wasm Ticks
    #[arg(long)]
    pub no_cache: bool,
    /// Append an audit stream of every scenario's Tick to FILE (`-`: stderr; docs/AUDIT.md)
    #[arg(long, value_name = "FILE")]
    pub audit: Option<String>,
    /// Record call arguments in the audit stream (only their SHA-256 otherwise)
    #[arg(long)]
    pub audit_args: bool,
    /// Release a call's answer only once its audit line is written and fdatasync'ed (needs --audit FILE)
    #[arg(long)]
    pub audit_sync: bool,
    /// Pretty-print the JSON report
    #[arg(long)]
    pub pretty: bool,
    /// Run only sandboxed (wasm) Ticks: a scenario with a native Tick is refused [default when CI is set]
    #[arg(long)]
    pub sandboxed_only: bool,
    /// Run native Ticks even when CI is set (they run with your permissions)
    #[arg(long, conflicts_with = "sandboxed_only")]
    pub allow_native: bool,
    /// A directory under which scenarios may grant directories (repeatable) [default: each scenario's own directory]
    #[arg(long, value_name = "DIR")]
    pub grant_root: Vec<PathBuf>,
    /// An environment variable scenarios may read, as ${NAME} or env = ["NAME"] (repeatable) [default: none]
    #[arg(long, value_name = "NAME")]
    pub allow_env: Vec<String>,
    /// Wall time one scenario may take, e.g. 90s or 5m [default: 5m]
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Wall time the whole run may take; scenarios not finished by then fail [default: 30m]
    #[arg(long, value_name = "DURATION")]
    pub run_timeout: Option<String>,
    /// Write a trace of each scenario (NAME.trace.cast: an asciinema cast with the protocol frames, states and step outcomes)
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = TraceMode::Off)]
    pub trace: TraceMode,
    /// The directory traces are written to [default: target/tickbox-traces]
    #[arg(long, value_name = "DIR")]
    pub trace_dir: Option<PathBuf>,
}

/// What `tickbox test` does besides running scenarios.
#[derive(Subcommand)]
pub enum TestCommand {
    /// Walk the pending snapshots (NAME.snap.new, left by a screen that did not match): each diff, then accept, reject or skip; and list .snap files no scenario uses
    Review(super::review::ReviewArgs),
    /// Replay a trace written by --trace, step by step: each step's outcome, the screen after it, the state and the protocol frames
    ShowTrace(super::show_trace::ShowTraceArgs),
}

/// Most retries of one scenario.
pub const MAX_RETRIES: u32 = 10;

/// Most scenarios run at once.
pub const MAX_JOBS: usize = 256;

/// Longest `--timeout` or `--run-timeout` accepted: a day.
pub const MAX_BUDGET: Duration = Duration::from_secs(24 * 3600);

/// The environment variable that, set, makes `tickbox test` run only
/// sandboxed Ticks unless `--allow-native` is given. CI systems set it
/// (GitHub Actions, GitLab CI, and others set `CI=true`).
pub const CI_VAR: &str = "CI";

/// Whether `CI` is set to something that means yes (not "", "0" or "false").
fn in_ci() -> bool {
    std::env::var(CI_VAR).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "FALSE" | "False"))
}

/// A default budget as the flag would take it ("5m").
fn minutes(d: Duration) -> String {
    match d.as_secs() {
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// What the command line allows and bounds, for every scenario of a run.
struct Rules {
    policy: Policy,
    /// Why only sandboxed Ticks run, when they do.
    sandboxed_only: Option<&'static str>,
    scenario_budget: TimeBudget,
    run_deadline: Instant,
    run_bound: String,
}

impl Rules {
    fn from_args(args: &TestArgs) -> Result<Rules, Exit> {
        let sandboxed_only = if args.sandboxed_only {
            Some("--sandboxed-only")
        } else if !args.allow_native && in_ci() {
            Some("the default when CI is set")
        } else {
            None
        };
        for n in &args.allow_env {
            if n.is_empty() || n.contains('=') || n.contains('\0') {
                return Err(Exit::usage(format!(
                    "--allow-env {n:?}: give a variable's name (no '=')"
                )));
            }
        }
        for r in &args.grant_root {
            if !std::fs::metadata(r).is_ok_and(|m| m.is_dir()) {
                return Err(Exit::usage(format!(
                    "--grant-root {}: not a directory",
                    r.display()
                )));
            }
        }
        let budget = |flag: &str, given: &Option<String>, default: Duration| {
            let text = given.clone().unwrap_or_else(|| minutes(default));
            let text = text.as_str();
            let d = scenario::parse_duration(text)
                .ok()
                .filter(|d| !d.is_zero() && *d <= MAX_BUDGET)
                .ok_or_else(|| {
                    Exit::usage(format!(
                        "--{flag} {text:?}: give a duration above zero and at most 24h, e.g. 90s or 5m"
                    ))
                })?;
            Ok::<_, Exit>((d, format!("--{flag} {text}")))
        };
        let (per, per_flag) = budget("timeout", &args.timeout, scenario::DEFAULT_SCENARIO_TIMEOUT)?;
        let (total, run_flag) = budget(
            "run-timeout",
            &args.run_timeout,
            scenario::DEFAULT_RUN_TIMEOUT,
        )?;
        Ok(Rules {
            policy: Policy {
                allow_env: args.allow_env.clone(),
                grant_roots: args.grant_root.clone(),
            },
            sandboxed_only,
            scenario_budget: TimeBudget {
                limit: per,
                bound: format!("the scenario's time budget ({per_flag})"),
            },
            run_deadline: Instant::now() + total,
            run_bound: format!("the run's time budget ({run_flag})"),
        })
    }

    /// The budget of a scenario starting now: its own, or what is left of
    /// the run's if that is less; `None` when the run's is used up.
    fn budget_now(&self) -> Option<TimeBudget> {
        let left = self.run_deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            None
        } else if left < self.scenario_budget.limit {
            Some(TimeBudget {
                limit: left,
                bound: self.run_bound.clone(),
            })
        } else {
            Some(self.scenario_budget.clone())
        }
    }
}

/// The launcher of a scenario's `[tick]` (its request is the application
/// layer's), with the audit stream of the command line, never the
/// scenario file's.
fn launcher(app: &App, s: &Scenario, args: &TestArgs) -> Result<Launcher, Exit> {
    let wanted = super::audit::Wanted {
        to: args.audit.clone(),
        args: args.audit_args,
        sync: args.audit_sync,
    };
    let audit = super::audit::handle(
        app,
        tickbox_telemetry::audit::Origin::Scenario,
        &wanted,
        &[],
    )?;
    let mut request = tickbox_app::scenarios::request(s, NOBODY_TEST);
    request.audit = audit;
    request.no_cache = args.no_cache;
    Ok(app.launcher(&request)?)
}

fn prepare(l: Launcher) -> Prepared {
    Prepared {
        kind: l.kind(),
        launch: Arc::new(l),
    }
}

/// One scenario, from its file to its result.
async fn one(
    app: Arc<App>,
    file: PathBuf,
    args: Arc<TestArgs>,
    rules: Arc<Rules>,
    filter: Arc<Vec<String>>,
) -> Option<ScenarioResult> {
    let s = match scenario::load(&file, &rules.policy) {
        Ok(s) => s,
        Err(e) => {
            return Some(ScenarioResult::not_run(
                &scenario::stem(&file),
                file,
                0,
                Outcome::Invalid(e.message),
            ))
        }
    };
    let path = file.display().to_string();
    if !filter.is_empty()
        && !filter
            .iter()
            .any(|f| s.name.contains(f) || path.contains(f))
    {
        return None;
    }
    let is_wasm = s
        .tick
        .path
        .as_deref()
        .is_some_and(super::open::is_sandboxed);
    if let (Some(why), false) = (rules.sandboxed_only, is_wasm) {
        let o = Outcome::Invalid(format!(
            "refused: a native Tick runs with your permissions, and only sandboxed (wasm) Ticks may run ({why}); pass --allow-native to run it"
        ));
        return Some(ScenarioResult::not_run(&s.name, file, s.steps.len(), o));
    }
    let Some(budget) = rules.budget_now() else {
        let o = Outcome::Failed(scenario::Failure {
            step: 0,
            action: "timeout".into(),
            expected: "to start".into(),
            found: vec![format!("not run: {} was used up", rules.run_bound)],
        });
        return Some(ScenarioResult::not_run(&s.name, file, s.steps.len(), o));
    };
    // A fresh empty directory for `scratch`, removed when the run is over.
    let mut s = s;
    let scratch = match scenarios::scratch(&mut s) {
        Ok(dir) => dir,
        Err(o) => return Some(ScenarioResult::not_run(&s.name, file, s.steps.len(), o)),
    };
    let prepared = match launcher(&app, &s, &args) {
        Ok(l) => prepare(l),
        Err(e) => {
            let o = if e.code == exit::USAGE {
                Outcome::Invalid(format!("[tick]: {}", e.message))
            } else {
                Outcome::StartFailed(e.message)
            };
            let mut r = ScenarioResult::not_run(&s.name, file, s.steps.len(), o);
            if args.trace != TraceMode::Off {
                r.trace = Some(scenario::unstarted_trace(&s, &r));
            }
            return Some(r);
        }
    };
    let mut opts = RunOptions {
        update: args.update,
        seed: args.seed,
        budget,
        trace: args.trace != TraceMode::Off,
        ..RunOptions::default()
    };
    let mut failed = Vec::new();
    loop {
        let r = scenario::run(&s, &prepared, &opts).await;
        let retry = matches!(r.outcome, Outcome::Failed(_) | Outcome::StartFailed(_))
            && failed.len() < args.retries as usize;
        match (retry, rules.budget_now()) {
            (true, Some(budget)) => {
                if let Some(Err(e)) = scratch.as_ref().map(|d| d.reset(&s.files)) {
                    let mut r = r.after_attempts(failed);
                    r.outcome = Outcome::StartFailed(e);
                    return Some(r);
                }
                failed.push(r);
                opts.budget = budget;
            }
            _ => {
                // A flaky scenario's trace is of where it failed.
                let first_failed = failed.first().and_then(|f| f.trace.clone());
                let mut r = r.after_attempts(failed);
                r.trace = match args.trace {
                    TraceMode::Off => None,
                    _ if r.is_flaky() => first_failed,
                    TraceMode::OnFailure if r.outcome == Outcome::Passed => None,
                    TraceMode::OnFailure | TraceMode::Always => r.trace,
                };
                return Some(r);
            }
        }
    }
}

/// Runs `tickbox test`.
pub async fn run(args: TestArgs, app: Arc<App>) -> Result<(), Exit> {
    match args.command {
        Some(TestCommand::Review(r)) => return super::review::run(r),
        Some(TestCommand::ShowTrace(t)) => return super::show_trace::run(t),
        None => {}
    }
    let files = scenario::discover(&args.paths).map_err(Exit::usage)?;
    if files.is_empty() {
        return Err(Exit::usage(
            "no scenario files found (a directory is searched for *.scenario.toml)",
        ));
    }
    let files = match &args.shard {
        None => files,
        Some(text) => {
            let shard = scenario::Shard::parse(text).map_err(Exit::usage)?;
            let mine: Vec<PathBuf> = files.into_iter().filter(|f| shard.holds(f)).collect();
            if mine.is_empty() {
                // An empty shard of a small suite is not a failure of CI.
                eprintln!("tickbox: test: shard {text} holds no scenario of this suite");
                return emit_report(&[], args.format, args.pretty);
            }
            mine
        }
    };
    if args.retries > MAX_RETRIES {
        return Err(Exit::usage(format!(
            "--retries {} is over the limit of {MAX_RETRIES}",
            args.retries
        )));
    }
    let jobs = match args.jobs {
        Some(0) => return Err(Exit::usage("-j must be at least 1")),
        Some(n) if n > MAX_JOBS => {
            return Err(Exit::usage(format!(
                "-j {n} is over the limit of {MAX_JOBS}"
            )))
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    if args.update && in_ci() {
        return Err(Exit::usage(
            "--update: snapshots are never written when CI is set (a mismatch leaves NAME.snap.new for `tickbox test review`)",
        ));
    }
    let rules = Arc::new(Rules::from_args(&args)?);
    let trace_dir = args
        .trace_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_TRACE_DIR));
    if args.trace != TraceMode::Off {
        // Made before anything runs, so a directory that cannot be is one
        // line now rather than a note per scenario later.
        std::fs::create_dir_all(&trace_dir).map_err(|e| {
            Exit::usage(format!(
                "--trace-dir {}: cannot make the directory: {e}",
                trace_dir.display()
            ))
        })?;
    }
    let format = args.format;
    let pretty = args.pretty;
    let filter = Arc::new(args.filter.clone());
    let args = Arc::new(args);
    // One context for the run: scenarios share the engine and what they
    // resolved (a reference is verified once, then every start runs it).
    let permits = Arc::new(tokio::sync::Semaphore::new(jobs));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, file) in files.into_iter().enumerate() {
        let (args, filter, permits) = (args.clone(), filter.clone(), permits.clone());
        let (rules, app) = (rules.clone(), app.clone());
        tasks.spawn(async move {
            // The semaphore is never closed, so acquiring cannot fail.
            let _permit = permits.acquire_owned().await.ok();
            (i, one(app, file, args, rules, filter).await)
        });
    }
    let mut results: Vec<(usize, ScenarioResult)> = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok((i, Some(r))) => results.push((i, r)),
            Ok((_, None)) => {}
            Err(e) => return Err(Exit::session(format!("a scenario task failed: {e}"))),
        }
    }
    results.sort_by_key(|r| r.0);
    let mut results: Vec<ScenarioResult> = results.into_iter().map(|r| r.1).collect();
    write_traces(&mut results, &trace_dir);
    if results.is_empty() {
        return Err(Exit::usage("--filter matched no scenario"));
    }
    emit_report(&results, format, pretty)?;
    let s = report::summary(&results);
    if s.invalid > 0 {
        Err(Exit::usage(match s.invalid {
            1 => "test: 1 scenario is invalid".to_string(),
            n => format!("test: {n} scenarios are invalid"),
        }))
    } else if s.start_failed > 0 {
        Err(Exit::session(match s.start_failed {
            1 => "test: the Tick of 1 scenario could not start".to_string(),
            n => format!("test: the Ticks of {n} scenarios could not start"),
        }))
    } else if s.failed > 0 {
        Err(Exit::new(
            super::exit::SCENARIO_FAILED,
            format!("test: {} of {} failed", s.failed, scenarios(results.len())),
        ))
    } else {
        Ok(())
    }
}

/// "1 scenario", "2 scenarios".
fn scenarios(n: usize) -> String {
    match n {
        1 => "1 scenario".to_string(),
        n => format!("{n} scenarios"),
    }
}

/// Prints the report in its format on stdout.
fn emit_report(results: &[ScenarioResult], format: Format, pretty: bool) -> Result<(), Exit> {
    match format {
        Format::Text => super::emit_text(report::to_text(results).trim_end()),
        Format::Json => super::emit(&report::to_json(results), pretty),
        Format::Junit => super::emit_text(report::to_junit(results).trim_end()),
    }
}
