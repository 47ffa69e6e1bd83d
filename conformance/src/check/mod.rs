//! `tickbox check`: a conformance checker that examines a Tick.
//!
//! The [`tickbox_host::session`] engine enforces the *host's* side of the protocol
//! and ends a session at the first violation. The checker turns that around:
//! it drives a Tick through several fresh sessions with a raw, rule-free
//! `driver`, sends it what a host would (and some things a host never
//! would: stale revisions, unknown tools, invalid args, garbage lines, stdin
//! EOF mid-call, SIGTERM) and reports every Tick-side rule of the spec as
//! pass, fail or not applicable, with the section, what was sent, what came
//! back, and why.
//!
//! Where to read:
//! - [`rules`] — the rule table: stable ids, sections, MUST vs advisory;
//! - `suite` — the sessions and how each yields verdicts;
//! - `driver` — the raw session and its transcript;
//! - `args` — args a tool accepts, and args its schema rejects;
//! - [`report`] — the report and its text, JSON and JUnit renderings.
//!
//! Mutating tools are called only with [`Options::allow_mutations`]: a
//! broken Tick could execute even a call it should refuse.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_conformance::check::{self, Options};
//! use tickbox_host::NativeSpec;
//! use tickbox_sandbox::Launcher;
//! let launcher = Launcher::native(NativeSpec::new(["python3", "counter.py"]));
//! let report = check::run(&launcher, "counter.py", &Options::default()).await?;
//! println!("{}", report.to_text()); // stdout-ok: the example prints its report
//! assert!(report.passed());
//! # Ok(()) }
//! ```

pub(crate) mod args;
pub(crate) mod driver;
#[cfg(test)]
mod fake;
pub mod report;
/// The rule table lives with the validators, in the protocol crate.
pub use tickbox_protocol::rules;
pub(crate) mod suite;

pub use report::{Report, Status, Verdict};
pub use rules::{Rule, Severity};

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tickbox_protocol::limits::CALL_TIMEOUT;
use tickbox_sandbox::launch::LaunchError;

/// Starts a fresh instance of the Tick under check, once per session:
/// the sandbox's one [`Launch`] trait, called without a clock.
pub use tickbox_sandbox::launch::Launch;

/// How long the checker watches an idle Tick for spontaneous changes.
pub const QUIET_PERIOD: Duration = Duration::from_millis(500);
/// How long after a call the checker keeps watching for its effects.
pub const SETTLE: Duration = Duration::from_millis(200);
/// How long the checker waits for a Tick to exit after stdin EOF (once
/// in-flight requests are answered) or after SIGTERM before it reports the
/// §4.5 finding. Not the host's `EXIT_GRACE` (500 ms, after which a host
/// stops a Tick): a checker is a judge, and waits longer so that a Tick
/// that exits on a slow machine is not failed for the machine.
pub const EXIT_WAIT: Duration = Duration::from_secs(2);

/// The checker's waits for things that send no answer: whether a Tick
/// changes by itself, what a call did, whether it exits. Longer waits see
/// slower Ticks; shorter ones finish sooner and may miss a late change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Watching an idle Tick for spontaneous changes ([`QUIET_PERIOD`]).
    pub quiet_period: Duration,
    /// Watching for a call's effects after its answer ([`SETTLE`]).
    pub settle: Duration,
    /// How long a Tick may take to exit after stdin EOF or SIGTERM
    /// ([`EXIT_WAIT`]).
    pub exit_wait: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            quiet_period: QUIET_PERIOD,
            settle: SETTLE,
            exit_wait: EXIT_WAIT,
        }
    }
}

/// What to check and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The rules to report (all by default; see [`rules::select`]).
    pub rules: Vec<&'static Rule>,
    /// Whether mutating tools may be called.
    pub allow_mutations: bool,
    /// Args per tool name, used instead of synthesized ones.
    pub sample_args: BTreeMap<String, Value>,
    /// How long a tool call may take.
    pub call_timeout: Duration,
    /// The checker's waits.
    pub timings: Timings,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rules: rules::ALL.to_vec(),
            allow_mutations: false,
            sample_args: BTreeMap::new(),
            call_timeout: CALL_TIMEOUT,
            timings: Timings::default(),
        }
    }
}

/// Why a check could not produce a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The backend could not start the Tick (nothing was checked). Shown
    /// as the launch error itself, which names the Tick and the cause, as
    /// every other command shows it.
    #[error(transparent)]
    Start(LaunchError),
    /// The sample args file does not fit the Tick's catalog.
    #[error("sample args: {0}")]
    SampleArgs(String),
}

/// Parses a sample-args document: a JSON object mapping tool name → args object.
pub fn parse_sample_args(text: &str) -> Result<BTreeMap<String, Value>, CheckError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| CheckError::SampleArgs(format!("not valid JSON: {e}")))?;
    let Value::Object(map) = v else {
        return Err(CheckError::SampleArgs(
            "must be a JSON object mapping tool names to args objects".into(),
        ));
    };
    map.into_iter()
        .map(|(k, v)| {
            if v.is_object() {
                Ok((k, v))
            } else {
                Err(CheckError::SampleArgs(format!(
                    "args for `{k}` must be a JSON object (§7.1)"
                )))
            }
        })
        .collect()
}

/// Runs the whole suite against the Tick `launch` starts.
///
/// Returns a report whenever the Tick could be started, however badly it
/// behaved; `tick` is how it is named in the report.
pub async fn run(launch: &dyn Launch, tick: &str, opts: &Options) -> Result<Report, CheckError> {
    let mut suite = suite::Suite::new(launch, opts);
    suite.run().await?;
    let measurements = suite.measurements.clone();
    let verdicts = std::mem::take(&mut suite.tally).verdicts(&opts.rules);
    Ok(Report {
        tick: tick.to_string(),
        verdicts,
        measurements,
    })
}

#[cfg(test)]
mod tests;
