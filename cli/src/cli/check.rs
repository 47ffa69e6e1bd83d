//! `tickbox check`: run the conformance suite against a Tick and print the
//! report (text, JSON or JUnit) on stdout. Logs go to stderr only.

use super::exit::{self, Exit};
use super::open::{TickOpts, TickSpec};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

use tickbox_runtime::check::{self, rules, CheckError, Options};

/// Exit code when at least one MUST rule failed.
pub const FAILED: u8 = 1;

/// The exit codes of `tickbox check`.
pub const HELP: &str = "\
Exit codes:
  0    every MUST rule passed or was not applicable (advisory warnings allowed)
  1    at least one MUST rule failed (the report says which, with its section)
  2    usage error: bad flags, unknown --only rule, bad --sample-args
  3    the Tick could not be started
  130  interrupted; the Tick was stopped

Rules: tickbox check --list-rules. Mutating tools are called only with
--allow-mutations; --sample-args FILE gives args per tool as a JSON object,
e.g. {\"increment\": {\"amount\": 1}}.";

/// Report formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    /// One line per rule, with evidence under each failure
    Text,
    /// One JSON document (its schema: docs/guide/check.md)
    Json,
    /// JUnit XML for CI systems
    Junit,
}

#[derive(Args)]
pub struct CheckArgs {
    /// The Tick: a path to an executable or a .wasm file
    #[arg(value_name = "TICK")]
    pub tick: Option<String>,
    /// Report format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Report only these rules or groups (repeat, or separate with commas)
    #[arg(long, value_name = "RULE", value_delimiter = ',')]
    pub only: Vec<String>,
    /// Also call tools declared mutates: true (they may have real effects)
    #[arg(long)]
    pub allow_mutations: bool,
    /// A JSON file mapping tool names to args objects for the calls the check makes
    #[arg(long, value_name = "FILE")]
    pub sample_args: Option<PathBuf>,
    /// Print the rule table and exit
    #[arg(long)]
    pub list_rules: bool,
    #[command(flatten)]
    pub opts: TickOpts,
}

fn list_rules() -> String {
    let mut out = String::new();
    for r in rules::ALL {
        out.push_str(&format!(
            "{:32} §{:5} {:8} {}\n",
            r.id,
            r.section,
            r.severity.as_str(),
            r.title
        ));
    }
    out
}

/// Runs `tickbox check`.
pub async fn run(args: CheckArgs, app: &tickbox_app::App) -> Result<(), Exit> {
    if args.list_rules {
        return super::emit_text(list_rules().trim_end());
    }
    let selected = rules::select(&args.only).map_err(Exit::usage)?;
    if !(args.opts.call_timeout.is_finite() && args.opts.call_timeout > 0.0) {
        return Err(Exit::usage(
            "--call-timeout must be a positive number of seconds",
        ));
    }
    let sample_args = match &args.sample_args {
        None => Default::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                Exit::usage(format!("cannot read --sample-args {}: {e}", path.display()))
            })?;
            check::parse_sample_args(&text).map_err(Exit::usage)?
        }
    };
    let spec = args.opts.spec(args.tick.clone())?;
    let name = match &spec {
        TickSpec::Path(p) => p.clone(),
        TickSpec::Command(argv) => argv.join(" "),
        TickSpec::Live(t) => format!("@{t}"),
    };
    let options = Options {
        rules: selected,
        allow_mutations: args.allow_mutations,
        sample_args,
        call_timeout: Duration::from_secs_f64(args.opts.call_timeout),
        ..Options::default()
    };
    // The same launcher every other command uses, so `.wasm` Ticks and the
    // sandbox flags work here too.
    let mut opts = args.opts;
    opts.audit_origin = tickbox_telemetry::audit::Origin::Check;
    let launch = super::open::launcher(app, spec, &opts)?;
    let report = match check::run(&launch, &name, &options).await {
        Ok(r) => r,
        Err(e @ CheckError::Start(_)) => return Err(Exit::new(exit::SESSION, e)),
        Err(e @ CheckError::SampleArgs(_)) => return Err(Exit::usage(e)),
        // Any error added later cannot have checked anything.
        Err(e) => return Err(Exit::new(exit::SESSION, e)),
    };
    match args.format {
        Format::Text => super::emit_text(report.to_text().trim_end())?,
        Format::Json => super::emit(&report.to_json(), opts.pretty)?,
        Format::Junit => super::emit_text(report.to_junit().trim_end())?,
    }
    if report.passed() {
        Ok(())
    } else {
        let s = report.summary();
        Err(Exit::new(
            FAILED,
            format!("check failed: {} MUST rules broken", s.fail),
        ))
    }
}
