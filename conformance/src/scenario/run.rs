//! Running one scenario against a fresh instance of its Tick.
//!
//! Steps run in order; the first that fails ends the scenario (the Tick is
//! then shut down). Expectations are checked against the latest state and
//! screen and retried every [`POLL`] until they hold or their timeout
//! passes, because a Tick handles keys and redraws asynchronously; the
//! failure then shows what was there last.
//!
//! With virtual time (a deterministic wasm component), the runner also waits
//! for the guest to be idle (blocked in `wasi:io/poll`, see
//! [`tickbox_sandbox::virtual_time`]) after every key, resize and call
//! and before every `advance`, so input and time reach the guest in the same
//! order on every run; and `wait_for` moves virtual time itself, jumping to
//! the guest's next timer whenever it is idle and the predicate does not
//! hold (bounded by the step's timeout in virtual time, [`MAX_WAIT_JUMPS`]
//! and [`WAIT_REAL_MAX`]).

use super::diff;
use super::files::{self, FileError};
use super::fixtures::{self as fixture, FixtureTable};
use super::model::{Action, CallExpect, Check, Scenario, DEFAULT_SEED};
use super::trace::{self, Direction, Recorder, StepRecord, Trace};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_host::session::{CallOutcome, Session, SessionConfig};
use tickbox_protocol::codes;
use tickbox_protocol::TickText;
use tickbox_sandbox::virtual_time::VirtualClock;

/// Stands in for a budget too large to add to the clock: a year.
const MAX_TIMEOUT_CLAMP: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often an expectation is re-checked while it does not hold.
pub const POLL: Duration = Duration::from_millis(20);
/// Bound on waiting for a deterministic guest to be idle after a step.
pub const IDLE_MAX: Duration = Duration::from_secs(5);
/// How long the screen must be quiet before [`RunOptions::update`] takes a
/// snapshot.
pub const SNAPSHOT_QUIET: Duration = Duration::from_millis(200);
/// Bound on that wait.
pub const SNAPSHOT_SETTLE_MAX: Duration = Duration::from_secs(3);
/// Most timer jumps one `wait_for` makes on virtual time.
pub const MAX_WAIT_JUMPS: u64 = 100_000;
/// Real-time bound on one `wait_for` on virtual time.
pub const WAIT_REAL_MAX: Duration = Duration::from_secs(120);
/// How long one idle check waits while a call is in flight on virtual time.
pub const CALL_IDLE_SLICE: Duration = Duration::from_millis(100);
/// While a call is in flight on virtual time and the guest is idle: how
/// long the runner waits for an answer already written before it moves the
/// clock.
pub const CALL_ANSWER_GRACE: Duration = Duration::from_millis(20);
/// How long no frame may pass before a traced step's record is written.
pub const TRACE_QUIET: Duration = Duration::from_millis(5);
/// Bound on that wait.
pub const TRACE_QUIET_MAX: Duration = Duration::from_millis(500);
/// Largest snapshot file read.
pub const MAX_SNAPSHOT_BYTES: u64 = 1024 * 1024;
/// Default wall-time budget of one scenario, from its Tick's start to its
/// last step ([`RunOptions::budget`]): 5 minutes. A legal file could
/// otherwise run for weeks (10,000 steps of 10 minutes each).
pub const DEFAULT_SCENARIO_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Default wall-time budget of a whole suite's run, all its scenarios
/// together: 30 minutes.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The wall time one scenario may take, and how the report names that
/// bound when it is passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeBudget {
    /// The wall time, from the Tick's start to the end of the last step.
    pub limit: Duration,
    /// The bound as the report names it, e.g. "the scenario's time budget
    /// of 5m (timeout)".
    pub bound: String,
}

impl Default for TimeBudget {
    fn default() -> Self {
        TimeBudget {
            limit: DEFAULT_SCENARIO_TIMEOUT,
            bound: format!(
                "the scenario's time budget of {}s (timeout)",
                DEFAULT_SCENARIO_TIMEOUT.as_secs()
            ),
        }
    }
}

/// How a scenario's Tick runs, which decides what can be virtual: the
/// host's one name for it.
pub use tickbox_host::TickKind;
use tickbox_sandbox::launch::{Launch, LaunchOptions};

/// A scenario's Tick, ready to start.
#[derive(Clone)]
pub struct Prepared {
    /// What kind of Tick it is.
    pub kind: TickKind,
    /// Starts it, with the clock to give a wasm guest.
    pub launch: Arc<dyn Launch>,
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Write snapshots instead of comparing them.
    pub update: bool,
    /// Overrides every scenario's seed.
    pub seed: Option<u64>,
    /// Session timeouts (a scenario's `call_timeout` overrides the call timeout).
    pub session: SessionConfig,
    /// Most timer jumps one `wait_for` makes on virtual time ([`MAX_WAIT_JUMPS`]).
    pub max_wait_jumps: u64,
    /// Wall time the whole scenario may take ([`DEFAULT_SCENARIO_TIMEOUT`]).
    pub budget: TimeBudget,
    /// Record a trace of the run ([`ScenarioResult::trace`]).
    pub trace: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            update: false,
            seed: None,
            session: SessionConfig::default(),
            max_wait_jumps: MAX_WAIT_JUMPS,
            budget: TimeBudget::default(),
            trace: false,
        }
    }
}

/// Why a step failed: the step, what it expected, what was there.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// 1-based step number (0: before the first step).
    pub step: usize,
    /// The step's kind and, if given, its name.
    pub action: String,
    /// What the step expected or did.
    pub expected: String,
    /// What was there, one line each (diffs, values), already escaped.
    pub found: Vec<String>,
}

/// How a scenario ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every step passed.
    Passed,
    /// A step failed.
    Failed(Failure),
    /// The Tick could not be started or initialized.
    StartFailed(String),
    /// The scenario cannot run as written (e.g. `advance` for a native Tick).
    Invalid(String),
}

/// The result of one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    /// Its name.
    pub name: String,
    /// Its file.
    pub file: PathBuf,
    /// How it ended.
    pub outcome: Outcome,
    /// Steps in the file.
    pub steps: usize,
    /// Steps that passed.
    pub passed_steps: usize,
    /// Wall time of the run.
    pub duration: Duration,
    /// The seed, when time and randomness were virtual.
    pub seed: Option<u64>,
    /// Snapshots written ([`RunOptions::update`]).
    pub written: Vec<PathBuf>,
    /// Remarks (e.g. a guest that did not become idle in time).
    pub notes: Vec<String>,
    /// Earlier attempts that failed (when a failed scenario is retried), oldest first, with the
    /// seed each ran with: a scenario that passes after one is flaky.
    pub failed_attempts: Vec<(Outcome, Option<u64>)>,
    /// The run's trace, when [`RunOptions::trace`] asked for one and the
    /// Tick was started (see [`trace`](super::trace)).
    pub trace: Option<Trace>,
}

impl ScenarioResult {
    /// A scenario that did not run.
    pub fn not_run(name: &str, file: PathBuf, steps: usize, outcome: Outcome) -> ScenarioResult {
        ScenarioResult {
            name: name.to_string(),
            file,
            outcome,
            steps,
            passed_steps: 0,
            duration: Duration::ZERO,
            seed: None,
            written: Vec::new(),
            notes: Vec::new(),
            failed_attempts: Vec::new(),
            trace: None,
        }
    }

    /// Passed, but only after failing: never reported as plain green.
    pub fn is_flaky(&self) -> bool {
        self.outcome == Outcome::Passed && !self.failed_attempts.is_empty()
    }

    /// Records the attempts that failed before this one. A scenario on
    /// virtual time that passes on a retry with the same seed is not
    /// flaky by chance: something it depends on is not virtual, which the
    /// result's notes say, with both seeds and the first attempt's failure.
    pub fn after_attempts(mut self, failed: Vec<ScenarioResult>) -> ScenarioResult {
        self.failed_attempts = failed.into_iter().map(|a| (a.outcome, a.seed)).collect();
        if self.outcome == Outcome::Passed {
            if let (Some(seed), Some((first, first_seed))) =
                (self.seed, self.failed_attempts.first())
            {
                let what = match first {
                    Outcome::Failed(f) => {
                        format!("step {} ({}) expected {}", f.step, f.action, f.expected)
                    }
                    Outcome::StartFailed(e) | Outcome::Invalid(e) => {
                        e.lines().next().unwrap_or("").to_string()
                    }
                    Outcome::Passed => String::new(),
                };
                self.notes.push(format!(
                    "a determinism bug: on virtual time this scenario failed with seed {} and passed on retry with seed {seed}; the first difference: attempt 1 failed at {what}",
                    first_seed.map_or("none".to_string(), |s| s.to_string())
                ));
            }
        }
        self
    }
}

/// Runs a scenario in a fresh instance of its Tick.
pub async fn run(scenario: &Scenario, prepared: &Prepared, opts: &RunOptions) -> ScenarioResult {
    let mut tracer = None;
    let mut result = run_traced(scenario, prepared, opts, &mut tracer).await;
    if let Some(t) = tracer {
        result.trace = Some(t.finish(&result));
    }
    result
}

/// The trace of one run: its recorder, and the clock its timeline follows
/// (virtual time on a deterministic Tick, else the run's real time).
struct Tracer {
    rec: Arc<Recorder>,
    clock: Option<VirtualClock>,
    started: Instant,
}

impl Tracer {
    fn now(&self, step: usize) -> Duration {
        let t = self
            .clock
            .as_ref()
            .map_or_else(|| self.started.elapsed(), VirtualClock::elapsed);
        trace::timeline(step, t)
    }

    /// The trace of a Tick that never started: no frame and no screen,
    /// only why (of the scenario's size, or 80x24).
    fn unlaunched(scenario: &Scenario, why: &Outcome) -> Tracer {
        let (cols, rows) = scenario.tick.size.unwrap_or((80, 24));
        let t = Tracer {
            rec: Recorder::new(cols, rows),
            clock: None,
            started: Instant::now(),
        };
        t.rec.marker("step 0: start");
        let found = outcome_lines(why);
        let record = StepRecord {
            step: 0,
            action: "start",
            outcome: outcome_name(why),
            expected: "the Tick to start and initialize",
            found: &found,
        };
        t.rec.step(&record, &TickText::default(), None, true);
        t
    }

    /// Step `step` begins: its marker.
    fn begin(&self, step: usize, action: &str) {
        self.rec.at(self.now(step));
        self.rec.marker(&format!("step {step}: {action}"));
    }

    /// Step `step` ended: the screen (rendered from the model once the
    /// view has parsed what it was sent; the Tick is not asked anything,
    /// so tracing changes nothing it sees), the step's outcome and state.
    async fn end(
        &self,
        step: usize,
        view: &tickbox_host::View,
        record: StepRecord<'_>,
        state: impl Fn() -> (Option<Value>, u64),
        last: bool,
    ) {
        view.settle(Duration::ZERO, SNAPSHOT_SETTLE_MAX).await;
        // The guest may have written a frame just before it went idle that
        // the session's reader has not read yet: give the reader until no
        // frame has passed for TRACE_QUIET, so that frame is in this step
        // and not the next (and the trace the same on every run).
        let until = Instant::now() + TRACE_QUIET_MAX;
        loop {
            let seen = self.rec.frames_seen();
            tokio::time::sleep(TRACE_QUIET).await;
            if self.rec.frames_seen() == seen || Instant::now() >= until {
                break;
            }
        }
        // The reader has read every update the taps passed; the session
        // takes each right after, so wait (as long) until it has: the state
        // recorded is then the one those frames made, on every run. An
        // update the session refused never counts, and the bound ends that
        // wait.
        let (mut data, mut taken) = state();
        while taken < self.rec.updates_seen() && Instant::now() < until {
            tokio::time::sleep(TRACE_QUIET).await;
            (data, taken) = state();
        }
        self.rec.at(self.now(step));
        self.rec.screen(&view.snapshot());
        self.rec
            .step(&record, &view.screen_text(), data.as_ref(), last);
    }

    fn finish(self, r: &ScenarioResult) -> Trace {
        self.rec.finish(&trace::Summary {
            scenario: &r.name,
            file: &r.file.display().to_string(),
            seed: r.seed,
            outcome: outcome_name(&r.outcome),
            steps: r.steps,
            passed_steps: r.passed_steps,
        })
    }
}

/// The trace of a scenario whose Tick was never started (the command line
/// could not make its launcher, e.g. a missing file): the start's record
/// and why, so traces kept on failure leave one for every failure.
pub fn unstarted_trace(scenario: &Scenario, result: &ScenarioResult) -> Trace {
    Tracer::unlaunched(scenario, &result.outcome).finish(result)
}

/// What a start that failed found, one line each.
fn outcome_lines(o: &Outcome) -> Vec<String> {
    match o {
        Outcome::Failed(f) => f.found.clone(),
        Outcome::StartFailed(e) | Outcome::Invalid(e) => e.lines().map(String::from).collect(),
        Outcome::Passed => Vec::new(),
    }
}

/// How a trace names an outcome.
fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Passed => "passed",
        Outcome::Failed(_) => "failed",
        Outcome::StartFailed(_) => "start failed",
        Outcome::Invalid(_) => "invalid",
    }
}

async fn run_traced(
    scenario: &Scenario,
    prepared: &Prepared,
    opts: &RunOptions,
    tracer: &mut Option<Tracer>,
) -> ScenarioResult {
    let started = Instant::now();
    // Past this, the current step is abandoned and the Tick shut down; a
    // budget too large for the clock is no bound at all.
    let deadline = tokio::time::Instant::now()
        .checked_add(opts.budget.limit)
        .unwrap_or_else(|| tokio::time::Instant::now() + MAX_TIMEOUT_CLAMP);
    let over = || format!("stopped: the scenario ran past {}", opts.budget.bound);
    // Running out of time is the scenario's failure (exit 1) whenever it
    // happens, starting included: a slow start is not a Tick that cannot.
    let over_at_start = || {
        Outcome::Failed(Failure {
            step: 0,
            action: "start".into(),
            expected: "the Tick to start within the time budget".into(),
            found: vec![format!("{} while its Tick started", over())],
        })
    };
    let mut result = ScenarioResult::not_run(
        &scenario.name,
        scenario.file.clone(),
        scenario.steps.len(),
        Outcome::Passed,
    );
    let deterministic = match (prepared.kind, scenario.tick.deterministic) {
        (TickKind::Native, Some(true)) => {
            result.outcome = Outcome::Invalid(
                "deterministic = true applies to wasm Ticks: a native Tick runs on real time (use wait_for)".into(),
            );
            return result;
        }
        (TickKind::Native, _) | (_, Some(false)) => false,
        _ => true,
    };
    for s in &scenario.steps {
        if let Action::Advance(_) = s.action {
            let why = match (prepared.kind, deterministic) {
                (TickKind::Native, _) => "a native Tick runs on real time; use wait_for for anything timed",
                (_, false) => "this scenario sets deterministic = false, so time is real",
                (TickKind::WasmModule, _) => "a preview-1 module's timers wait real time; advance needs a component (wasm32-wasip2)",
                _ => continue,
            };
            result.outcome = Outcome::Invalid(format!(
                "step {}: advance needs virtual time: {why}",
                s.index
            ));
            return result;
        }
    }
    if !scenario.http.is_empty() && prepared.kind != TickKind::WasmComponent {
        result.outcome = Outcome::Invalid(
            "[[http]] fixtures answer wasi:http requests, which only a wasm component (wasm32-wasip2) makes".into(),
        );
        return result;
    }
    let clock = deterministic
        .then(|| VirtualClock::new(opts.seed.or(scenario.tick.seed).unwrap_or(DEFAULT_SEED)));
    result.seed = clock.as_ref().map(VirtualClock::seed);
    // A fresh table per run: a retry starts with no misses of its own.
    let fixtures =
        (!scenario.http.is_empty()).then(|| Arc::new(FixtureTable::new(scenario.http.clone())));
    let launch = LaunchOptions {
        clock: clock.clone(),
        http_fixtures: fixtures
            .clone()
            .map(|f| f as Arc<dyn tickbox_sandbox::http::HttpFixtures>),
    };

    let mut io = match tokio::time::timeout_at(deadline, prepared.launch.launch(launch)).await {
        Ok(Ok(io)) => io,
        Ok(Err(e)) => {
            result.outcome = Outcome::StartFailed(start_failure(&e));
            *tracer = opts
                .trace
                .then(|| Tracer::unlaunched(scenario, &result.outcome));
            return result;
        }
        Err(_) => {
            result.outcome = over_at_start();
            *tracer = opts
                .trace
                .then(|| Tracer::unlaunched(scenario, &result.outcome));
            result.duration = started.elapsed();
            return result;
        }
    };
    if let Some((cols, rows)) = scenario.tick.size {
        io.view.resize(cols, rows);
    }
    let view = io.view.clone();
    if opts.trace {
        // Every frame either way passes the taps, which copy whole lines
        // into the trace and change nothing they carry.
        let (cols, rows) = view.size();
        let rec = Recorder::new(cols, rows);
        io.stdin = Box::new(rec.tap(io.stdin, Direction::ToTick));
        io.stdout = Box::new(rec.tap(io.stdout, Direction::FromTick));
        let t = Tracer {
            rec,
            clock: clock.clone(),
            started,
        };
        t.begin(0, "start");
        *tracer = Some(t);
    }
    // The start's record, when the start is where the run ends.
    let start_failed = |tracer: &Option<Tracer>, why: &Outcome| {
        let found = outcome_lines(why);
        let t = tracer.as_ref().map(|t| (t.rec.clone(), t.now(0)));
        let view = view.clone();
        let outcome = outcome_name(why);
        async move {
            if let Some((rec, now)) = t {
                view.settle(Duration::ZERO, SNAPSHOT_SETTLE_MAX).await;
                rec.at(now);
                rec.screen(&view.snapshot());
                let record = StepRecord {
                    step: 0,
                    action: "start",
                    outcome,
                    expected: "the Tick to start and initialize",
                    found: &found,
                };
                rec.step(&record, &view.screen_text(), None, true);
            }
        }
    };
    let mut config = opts.session.clone();
    if let Some(t) = scenario.tick.call_timeout {
        config.call_timeout = t;
    }
    let call_timeout = config.call_timeout;
    let session = match tokio::time::timeout_at(deadline, Session::start(io, config)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            result.outcome = Outcome::StartFailed(e.to_string());
            start_failed(&*tracer, &result.outcome).await;
            result.duration = started.elapsed();
            return result;
        }
        Err(_) => {
            result.outcome = over_at_start();
            start_failed(&*tracer, &result.outcome).await;
            result.duration = started.elapsed();
            return result;
        }
    };
    let mut runner = Runner {
        session: &session,
        clock: clock.filter(|_| prepared.kind == TickKind::WasmComponent),
        update: opts.update,
        max_wait_jumps: opts.max_wait_jumps,
        call_timeout,
        base_seq: 0,
        result: &mut result,
        fixtures,
    };
    runner.base_seq = runner.seq();
    if runner.clock.is_some() {
        runner.idle(None).await;
    } else {
        // On real time there is no idle signal: give the Tick a moment after
        // initialization (it may still be setting up its terminal, and keys
        // typed before that can be lost or echoed) until its PTY takes keys
        // as typed, or else until its screen is quiet.
        session
            .view()
            .settle_for_keys(SNAPSHOT_QUIET, SNAPSHOT_SETTLE_MAX)
            .await;
    }
    if let Some(t) = tracer.as_ref() {
        let record = StepRecord {
            step: 0,
            action: "start",
            outcome: "passed",
            expected: "",
            found: &[],
        };
        let last = scenario.steps.is_empty();
        t.end(0, &view, record, || runner.data_taken(), last).await;
    }
    let mut outcome = Outcome::Passed;
    // A request made while the Tick started: no step made it.
    if let Some(miss) = runner.missed() {
        outcome = Outcome::Failed(Failure {
            step: 0,
            action: "start".into(),
            expected: "every HTTP request the Tick makes to be answered by a [[http]] fixture"
                .into(),
            found: vec![miss],
        });
    }
    for (i, s) in scenario.steps.iter().enumerate() {
        if outcome != Outcome::Passed {
            break;
        }
        let label = match &s.name {
            Some(n) => format!("{} ({n})", s.action.kind()),
            None => s.action.kind().to_string(),
        };
        let what = match &s.name {
            Some(n) => format!("{} ({n})", s.action.describe()),
            None => s.action.describe(),
        };
        if let Some(t) = tracer.as_ref() {
            t.begin(s.index, &what);
        }
        let done = tokio::time::timeout_at(deadline, runner.step(&s.action))
            .await
            .unwrap_or_else(|_| Err((s.action.describe(), vec![over()])));
        // A request no fixture answered fails the step it was made in,
        // first among what was found: whatever else the step saw followed
        // from it.
        let done = match (runner.missed(), done) {
            (None, done) => done,
            (Some(miss), Ok(())) => Err((s.action.describe(), vec![miss])),
            (Some(miss), Err((expected, found))) => Err((expected, [vec![miss], found].concat())),
        };
        if let Some(t) = tracer.as_ref() {
            let (outcome, expected, found) = match &done {
                Ok(()) => ("passed", "", &[][..]),
                Err((e, f)) => ("failed", e.as_str(), f.as_slice()),
            };
            let record = StepRecord {
                step: s.index,
                action: &what,
                outcome,
                expected,
                found,
            };
            let last = done.is_err() || i + 1 == scenario.steps.len();
            t.end(s.index, &view, record, || runner.data_taken(), last)
                .await;
        }
        if let Err((expected, found)) = done {
            outcome = Outcome::Failed(Failure {
                step: s.index,
                action: label,
                expected,
                found,
            });
            break;
        }
        runner.result.passed_steps += 1;
    }
    session.shutdown().await;
    result.outcome = outcome;
    result.duration = started.elapsed();
    result
}

type StepResult = Result<(), (String, Vec<String>)>;

struct Runner<'a> {
    session: &'a Session,
    /// The guest's clock, when it is a component whose idleness we can see.
    clock: Option<VirtualClock>,
    update: bool,
    max_wait_jumps: u64,
    /// The session's call timeout: also the most virtual time one call may
    /// move the clock.
    call_timeout: Duration,
    base_seq: u64,
    result: &'a mut ScenarioResult,
    /// The run's `[[http]]` answers, whose misses fail the step.
    fixtures: Option<Arc<FixtureTable>>,
}

impl Runner<'_> {
    /// One line for the requests no fixture answered since the last look.
    fn missed(&self) -> Option<String> {
        let (shown, count) = self.fixtures.as_ref()?.take_misses();
        (count > 0).then(|| fixture::miss_line(&shown, count))
    }

    fn seq(&self) -> u64 {
        self.session.state().state.map_or(0, |s| s.seq)
    }

    /// The state's raw value, for comparisons; every report line shows
    /// it through `diff::render`, which escapes it.
    fn data(&self) -> Option<Value> {
        self.session.state().state.map(|s| s.data.wire().clone())
    }

    /// The state and how many updates the session has taken.
    fn data_taken(&self) -> (Option<Value>, u64) {
        let snapshot = self.session.state();
        let data = snapshot.state.map(|s| s.data.wire().clone());
        (data, snapshot.updates)
    }

    /// The screen's raw text, for comparisons and snapshot files; reports
    /// show it through `screen_lines` and the diff, which escape it.
    fn screen(&self) -> String {
        self.session.view().screen_text().wire().to_string()
    }

    /// Waits for a deterministic guest to be idle (woken since `mark`, when given).
    async fn idle(&mut self, mark: Option<u64>) {
        if let Some(c) = &self.clock {
            if !c.wait_idle(mark, IDLE_MAX).await {
                self.result.notes.push(format!(
                    "the guest did not become idle within {}s (it may be blocked outside wasi:io/poll)",
                    IDLE_MAX.as_secs()
                ));
            }
        }
    }

    fn mark(&self) -> Option<u64> {
        self.clock.as_ref().map(VirtualClock::activity)
    }

    fn ended(&self) -> Option<String> {
        self.session
            .end_reason()
            .map(|r| format!("the session ended: {r}"))
    }

    async fn step(&mut self, action: &Action) -> StepResult {
        let describe = action.describe();
        match action {
            Action::Call { tool, args, expect } => self.call(tool, args, expect, describe).await,
            Action::Keys { bytes, .. } => {
                self.live(&describe)?;
                let mark = self.mark();
                self.session.view().send_input(bytes);
                self.idle(mark).await;
                Ok(())
            }
            Action::Resize { cols, rows } => {
                self.live(&describe)?;
                let mark = self.mark();
                self.session.view().resize(*cols, *rows);
                self.idle(mark).await;
                Ok(())
            }
            Action::Advance(by) => {
                self.live(&describe)?;
                let Some(clock) = self.clock.clone() else {
                    return Err((describe, vec!["this Tick has no virtual clock".into()]));
                };
                self.idle(None).await;
                match clock.advance(*by).await {
                    Ok(done) => {
                        if done.unsettled > 0 {
                            self.result.notes.push(format!(
                                "advance {by:?}: after {} of {} timer deadlines the guest did not become idle in time",
                                done.unsettled, done.firings
                            ));
                        }
                        Ok(())
                    }
                    Err(e) => Err((describe, vec![e.to_string()])),
                }
            }
            Action::WaitFor { check, timeout } if self.clock.is_some() => self
                .wait_virtual(check, *timeout)
                .await
                .map_err(|found| (describe, found)),
            Action::WaitFor { check, timeout } => self
                .eventually(check, *timeout)
                .await
                .map_err(|found| (format!("{describe}: timed out"), found)),
            Action::Expect { check, timeout } => {
                if let (true, Check::Snapshot { path, .. }) = (self.update, check) {
                    return self
                        .write_snapshot(path)
                        .await
                        .map_err(|e| (describe, vec![e]));
                }
                // On virtual time the check sees the guest's settled state,
                // so an intermediate state cannot make it pass by chance.
                if let Err(found) = self.barrier().await {
                    return Err((describe, found));
                }
                match (self.eventually(check, *timeout).await, check) {
                    (Ok(()), _) => Ok(()),
                    // A snapshot that differs (or is missing) is never
                    // overwritten here: the screen goes beside it as
                    // NAME.snap.new, for `tickbox test review`.
                    (Err(mut found), Check::Snapshot { path, .. }) => {
                        found.push(match self.write_pending(path).await {
                            Ok(new) => format!(
                                "the screen is in {}: accept or reject it with `tickbox test review`",
                                new.display()
                            ),
                            Err(e) => e,
                        });
                        Err((describe, found))
                    }
                    (Err(found), _) => Err((describe, found)),
                }
            }
            Action::ExpectUpdate { n, timeout } => self.expect_update(*n, *timeout, describe).await,
        }
    }

    fn live(&self, describe: &str) -> StepResult {
        match self.ended() {
            Some(e) => Err((describe.to_string(), vec![e])),
            None => Ok(()),
        }
    }

    async fn call(
        &mut self,
        tool: &str,
        args: &Value,
        expect: &CallExpect,
        describe: String,
    ) -> StepResult {
        self.live(&describe)?;
        // Like any client, describe first: the catalog may have changed
        // (§5.4), and a call bound to an old revision is refused (-32004).
        let catalog = match self.session.describe().await {
            Ok(c) => c,
            Err(e) => return Err((describe, vec![format!("tick/describe failed: {e}")])),
        };
        // The host checks the tool name and args against the catalog before
        // sending, as for any client; a refusal counts as error -32602
        // (invalid params), so `error = -32602` expects it.
        let prepared = match catalog.prepare(tool, args.clone()) {
            Ok(p) => p,
            Err(e)
                if matches!(expect, CallExpect::Error { code: codes::INVALID_PARAMS, contains }
                if contains.as_deref().is_none_or(|t| e.to_string().contains(t))) =>
            {
                return Ok(())
            }
            Err(e) => {
                return Err((
                    describe,
                    vec![format!("not sent (error {}): {e}", codes::INVALID_PARAMS)],
                ))
            }
        };
        let outcome = self.call_on_time(&prepared).await;
        self.idle(None).await;
        let found = match &outcome {
            CallOutcome::Ok(v) => format!("result {}", diff::render(v)),
            CallOutcome::Failed { error, executed } => format!(
                "error {}: {} (executed: {executed})",
                error.code,
                tickbox_host::text::escape(&diff::clip(
                    error.message.wire(),
                    diff::MAX_VALUE_CHARS
                ))
            ),
            CallOutcome::Unknown(why) => format!("unknown outcome: {why}"),
        };
        match (expect, &outcome) {
            (CallExpect::AnyResult, CallOutcome::Ok(_)) => Ok(()),
            (CallExpect::Error { code, contains }, CallOutcome::Failed { error, .. })
                if error.code == *code
                    && contains
                        .as_deref()
                        .is_none_or(|t| error.message.wire().contains(t)) =>
            {
                Ok(())
            }
            (CallExpect::Result(want), CallOutcome::Ok(got)) => {
                let d = diff::differences(want, got, false);
                if d.is_empty() {
                    Ok(())
                } else {
                    Err((describe, [vec![found], d].concat()))
                }
            }
            (CallExpect::ResultSubset(want), CallOutcome::Ok(got)) => {
                let d = diff::differences(want, got, true);
                if d.is_empty() {
                    Ok(())
                } else {
                    Err((describe, [vec![found], d].concat()))
                }
            }
            _ => Err((describe, vec![found])),
        }
    }

    /// Makes the call; on virtual time, moves the clock while it is in
    /// flight, by `wait_for`'s rule: whenever the guest is idle (woken since
    /// the call was sent, then blocked in `wasi:io/poll`) and has not
    /// answered, virtual time jumps to its next timer, as long as that is
    /// within the call timeout of virtual time from the call's start and
    /// within [`MAX_WAIT_JUMPS`]. So a tool that sleeps on a timer returns
    /// instead of waiting for the real call timeout. With no timer to jump
    /// to, the call is left to answer or time out on its own.
    async fn call_on_time(&mut self, prepared: &tickbox_protocol::PreparedCall) -> CallOutcome {
        let Some(clock) = self.clock.clone() else {
            return self.session.call(prepared).await;
        };
        let limit = self.call_timeout;
        let start = clock.elapsed();
        let mut mark = Some(clock.activity());
        let mut jumps = 0u64;
        let mut jumping = true;
        let call = self.session.call(prepared);
        tokio::pin!(call);
        loop {
            tokio::select! {
                outcome = &mut call => return outcome,
                idle = clock.wait_idle(mark, CALL_IDLE_SLICE), if jumping => {
                    if !idle {
                        continue;
                    }
                    // The guest may have answered just before it went idle,
                    // with the answer still on its way through the session's
                    // reader: give that a moment, so a timer is never jumped
                    // past an answer already given.
                    if let Ok(outcome) = tokio::time::timeout(CALL_ANSWER_GRACE, &mut call).await {
                        return outcome;
                    }
                    let now = clock.elapsed();
                    let next = clock.pending_timers().into_iter().find(|d| *d > now);
                    match next {
                        Some(d) if d - start <= limit && jumps < self.max_wait_jumps => {
                            jumps += 1;
                            mark = Some(clock.activity());
                            if let Err(e) = clock.advance(d - now).await {
                                self.result.notes.push(format!("a call's timer jump stopped: {e}"));
                                jumping = false;
                            }
                        }
                        _ => jumping = false,
                    }
                }
            }
        }
    }

    /// `wait_for` on virtual time: whenever the guest is idle and the
    /// predicate does not hold, virtual time jumps to the guest's next timer
    /// deadline, as long as that is within `timeout` of virtual time from
    /// the start of the wait. Before each check a `tick/read` acts as a
    /// barrier: its answer comes after every update the guest wrote before
    /// it, so the state checked is exactly the guest's.
    async fn wait_virtual(&mut self, check: &Check, timeout: Duration) -> Result<(), Vec<String>> {
        let Some(clock) = self.clock.clone() else {
            return self.eventually(check, timeout).await;
        };
        let start = clock.elapsed();
        let real_deadline = Instant::now() + WAIT_REAL_MAX;
        let mut jumps = 0u64;
        loop {
            self.barrier().await?;
            let found = match self.holds(check, None) {
                Ok(()) => return Ok(()),
                Err(found) => found,
            };
            let now = clock.elapsed();
            let next = clock.pending_timers().into_iter().find(|d| *d > now);
            let stop = match next {
                _ if Instant::now() >= real_deadline => Some(format!(
                    "gave up after {}s of real time (+{:?} virtual)",
                    WAIT_REAL_MAX.as_secs(),
                    now - start
                )),
                _ if jumps >= self.max_wait_jumps => Some(format!(
                    "gave up after {} timer jumps (the limit), at +{:?} virtual",
                    self.max_wait_jumps,
                    now - start
                )),
                Some(d) if d - start <= timeout => None,
                Some(d) => Some(format!(
                    "timed out: +{:?} of virtual time passed and the guest's next timer is at +{:?}, past the {timeout:?} timeout",
                    now - start,
                    d - start
                )),
                None => Some(format!(
                    "the guest is idle with no timer pending after +{:?} of virtual time: nothing can change any more",
                    now - start
                )),
            };
            if let Some(why) = stop {
                return Err([found, vec![why]].concat());
            }
            let d = next.unwrap_or(now);
            jumps += 1;
            if let Err(e) = clock.advance(d - now).await {
                return Err([found, vec![e.to_string()]].concat());
            }
        }
    }

    /// With virtual time: waits until the guest is idle, then makes a
    /// `tick/read`, whose answer comes after every update the guest wrote
    /// before it, and waits until the guest is idle again (the read woke it,
    /// and it re-subscribes its timers on the way back). The state and the
    /// screen are then exactly the guest's, and nothing changes until the
    /// next input or time step. Without virtual time it does nothing.
    async fn barrier(&mut self) -> Result<(), Vec<String>> {
        let Some(clock) = self.clock.clone() else {
            return Ok(());
        };
        self.idle(None).await;
        let mark = clock.activity();
        if let Err(e) = self.session.read().await {
            return Err(vec![format!("tick/read failed: {e}")]);
        }
        self.idle(Some(mark)).await;
        // The view parses on its own thread: wait until it has parsed what
        // the guest drew (quiet 0: nothing queued or being parsed).
        self.session
            .view()
            .settle(Duration::ZERO, SNAPSHOT_SETTLE_MAX)
            .await;
        Ok(())
    }

    /// Checks `check` until it holds or `timeout` passes; the error is what
    /// was there at the last check.
    async fn eventually(&self, check: &Check, timeout: Duration) -> Result<(), Vec<String>> {
        let deadline = Instant::now() + timeout;
        // A snapshot is read once: it does not change during the run.
        let snapshot = match check {
            Check::Snapshot { path, name } => Some(read_snapshot(path, name)?),
            _ => None,
        };
        // Woken by a new state or a screen change, so a wait ends as soon as
        // its condition can hold; POLL stays the longest sleep, for what
        // neither announces (the session's end, the deadline).
        let mut state = self.session.watch_state();
        let mut screen = self.session.view().changes();
        loop {
            state.borrow_and_update();
            screen.borrow_and_update();
            let found = match self.holds(check, snapshot.as_deref()) {
                Ok(()) => return Ok(()),
                Err(found) => found,
            };
            if let Some(e) = self.ended() {
                return Err([found, vec![e]].concat());
            }
            if Instant::now() >= deadline {
                return Err(found);
            }
            tokio::select! {
                _ = changed(&mut state) => {}
                _ = changed(&mut screen) => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    fn holds(&self, check: &Check, snapshot: Option<&str>) -> Result<(), Vec<String>> {
        match check {
            Check::StateEquals { pointer, value } | Check::StateSubset { pointer, value } => {
                let subset = matches!(check, Check::StateSubset { .. });
                let Some(data) = self.data() else {
                    return Err(vec!["no state yet".into()]);
                };
                let Some(at) = data.pointer(pointer) else {
                    return Err(vec![
                        format!("nothing at {pointer} in the state"),
                        format!("state: {}", diff::render(&data)),
                    ]);
                };
                let d: Vec<String> = diff::differences(value, at, subset)
                    .into_iter()
                    .map(|l| match l.strip_prefix("(root)") {
                        Some(rest) if !pointer.is_empty() => format!("{pointer}{rest}"),
                        _ if l.starts_with('/') => format!("{pointer}{l}"),
                        _ => l,
                    })
                    .collect();
                if d.is_empty() {
                    Ok(())
                } else {
                    let shown = if pointer.is_empty() { "state" } else { pointer };
                    Err([d, vec![format!("{shown}: {}", diff::render(at))]].concat())
                }
            }
            Check::ScreenContains(t) | Check::ScreenLacks(t) => {
                let screen = self.screen();
                let want = matches!(check, Check::ScreenContains(_));
                if screen.contains(t.as_str()) == want {
                    Ok(())
                } else {
                    Err(screen_lines(&screen))
                }
            }
            Check::ScreenRegex(re) => {
                let screen = self.screen();
                if re.is_match(&screen) {
                    Ok(())
                } else {
                    Err(screen_lines(&screen))
                }
            }
            Check::Style(want) => style_holds(&self.session.view().snapshot(), want),
            Check::Snapshot { .. } => {
                let screen = diff::normalize_screen(&self.screen());
                let want = snapshot.unwrap_or_default();
                if screen == want {
                    Ok(())
                } else {
                    let mut lines = vec!["screen diff (- snapshot, + screen):".to_string()];
                    lines.extend(diff::screen_diff(want, &screen));
                    Err(lines)
                }
            }
        }
    }

    /// Writes the settled screen as the pending snapshot `path` + `.new`.
    async fn write_pending(&mut self, path: &std::path::Path) -> Result<PathBuf, String> {
        let new = pending_path(path);
        self.session
            .view()
            .settle(SNAPSHOT_QUIET, SNAPSHOT_SETTLE_MAX)
            .await;
        let screen = diff::normalize_screen(&self.screen());
        files::write_regular(&new, &screen)
            .map_err(|e| format!("cannot write the pending snapshot: {e}"))?;
        self.result.written.push(new.clone());
        Ok(new)
    }

    async fn write_snapshot(&mut self, path: &std::path::Path) -> Result<(), String> {
        self.barrier().await.map_err(|e| e.join("; "))?;
        self.session
            .view()
            .settle(SNAPSHOT_QUIET, SNAPSHOT_SETTLE_MAX)
            .await;
        let screen = diff::normalize_screen(&self.screen());
        // Never through a link: a link (even dangling) at the snapshot's
        // name is refused before anything is read or written.
        match files::read_regular(path, MAX_SNAPSHOT_BYTES) {
            Ok(old) if old == screen => return Ok(()),
            Err(e @ (FileError::Symlink(_) | FileError::NotRegular(_))) => {
                return Err(format!("refused to write the snapshot: {e}"))
            }
            _ => {}
        }
        files::write_regular(path, &screen)
            .map_err(|e| format!("cannot write the snapshot: {e}"))?;
        // A pending screen for it is answered by this one.
        let _ = files::remove_regular(&pending_path(path));
        self.result.written.push(path.to_path_buf());
        Ok(())
    }

    async fn expect_update(&mut self, n: u64, timeout: Duration, describe: String) -> StepResult {
        if let Err(found) = self.barrier().await {
            return Err((describe, found));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let advanced = self.seq().saturating_sub(self.base_seq);
            if advanced >= n {
                let seq = self.seq();
                if advanced == n {
                    self.base_seq = seq;
                    return Ok(());
                }
                return Err((
                    describe,
                    vec![format!(
                        "seq advanced by {advanced} (from {} to {seq})",
                        self.base_seq
                    )],
                ));
            }
            let stop = self.ended().or_else(|| {
                (Instant::now() >= deadline).then(|| format!("timed out after {timeout:?}"))
            });
            if let Some(why) = stop {
                return Err((
                    describe,
                    vec![
                        format!(
                            "seq advanced by {advanced} (from {} to {})",
                            self.base_seq,
                            self.seq()
                        ),
                        why,
                    ],
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Resolves when `rx` sees a new value; never, once its sender is gone (the
/// caller's poll takes over), so a closed channel cannot spin a loop.
async fn changed<T>(rx: &mut tokio::sync::watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Whether the cells a style expectation names have what it asks; the
/// error says, per differing cell, what is there.
fn style_holds(
    screen: &vt100::Screen,
    want: &crate::scenario::model::StyleCheck,
) -> Result<(), Vec<String>> {
    use crate::scenario::model::Colour;
    let (rows, cols) = screen.size();
    let (rows, cols) = (rows.get(), cols.get());
    let cells: Vec<(u16, u16)> = match (&want.text, want.at) {
        (Some(text), _) => {
            // The first row holding the text, by characters (a wide
            // character is one cell here, as the screen text has it).
            let found = (0..rows).find_map(|r| {
                let line: Vec<char> = screen.contents_between(r, 0, r, cols).chars().collect();
                let needle: Vec<char> = text.chars().collect();
                line.windows(needle.len())
                    .position(|w| w == needle.as_slice())
                    .map(|c| (r, c as u16, needle.len() as u16))
            });
            match found {
                Some((r, c, n)) => (c..c + n).map(|c| (r, c)).collect(),
                None => return Err(vec![format!("{text:?} is not on the screen")]),
            }
        }
        (None, Some((r, c, n))) => (c..c.saturating_add(n)).map(|c| (r, c)).collect(),
        _ => Vec::new(),
    };
    let colour = |c: vt100::Color| match c {
        vt100::Color::Default => Colour::Default,
        vt100::Color::Idx(i) => Colour::Index(i),
        vt100::Color::Rgb(r, g, b) => Colour::Rgb(r, g, b),
    };
    let mut found = Vec::new();
    for (r, c) in cells {
        let Some(cell) = screen.cell(r, c) else {
            found.push(format!("row {r}, col {c} is off the {cols}x{rows} screen"));
            continue;
        };
        let mut wrong = Vec::new();
        if let Some(w) = want.fg.filter(|w| *w != colour(cell.fgcolor())) {
            wrong.push(format!("fg {} (not {w})", colour(cell.fgcolor())));
        }
        if let Some(w) = want.bg.filter(|w| *w != colour(cell.bgcolor())) {
            wrong.push(format!("bg {} (not {w})", colour(cell.bgcolor())));
        }
        for (name, w, is) in [
            ("bold", want.bold, cell.bold()),
            ("italic", want.italic, cell.italic()),
            ("underline", want.underline, cell.underline()),
            ("inverse", want.inverse, cell.inverse()),
        ] {
            if w.is_some_and(|w| w != is) {
                wrong.push(if is {
                    name.to_string()
                } else {
                    format!("not {name}")
                });
            }
        }
        if !wrong.is_empty() {
            found.push(format!(
                "row {r}, col {c} {:?}: {}",
                cell.contents(),
                wrong.join(", ")
            ));
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(found)
    }
}

/// Where the screen goes when a snapshot does not match: `NAME.snap.new`.
pub fn pending_path(snapshot: &std::path::Path) -> PathBuf {
    let mut s = snapshot.as_os_str().to_os_string();
    s.push(".new");
    PathBuf::from(s)
}

fn read_snapshot(path: &std::path::Path, name: &str) -> Result<String, Vec<String>> {
    match files::read_regular(path, MAX_SNAPSHOT_BYTES) {
        Ok(text) => Ok(diff::normalize_screen(&text)),
        Err(e @ FileError::Missing(_)) => Err(vec![format!("snapshot {name:?}: {e}")]),
        // A link, a FIFO, a big file: refused, naming the file, never
        // showing what it points to.
        Err(e) => Err(vec![format!("snapshot {name:?} refused: {e}")]),
    }
}

/// The screen, framed, for a failure report.
fn screen_lines(screen: &str) -> Vec<String> {
    let normalized = diff::normalize_screen(screen);
    let mut out = vec!["screen:".to_string()];
    out.extend(
        normalized
            .lines()
            .take(diff::MAX_DIFF_LINES)
            .map(|l| format!("  |{}", diff::printable(l))),
    );
    out
}

/// A launch error as a scenario's start failure: one sentence that says the
/// Tick could not start, whichever layer refused it (the native backend's
/// and the launcher's own errors already say so; the others are prefixed).
fn start_failure(e: &tickbox_sandbox::LaunchError) -> String {
    use tickbox_host::backend::native::SpawnError;
    use tickbox_sandbox::LaunchError;
    match e {
        LaunchError::Native(
            SpawnError::NotFound(_) | SpawnError::NotExecutable(_) | SpawnError::Spawn { .. },
        )
        | LaunchError::NotWasm { .. }
        | LaunchError::Unreadable { .. } => e.to_string(),
        _ => format!("cannot start the Tick: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_read_normalized_and_bounded() {
        let dir = std::env::temp_dir().join(format!("tickbox-snap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.x.snap");
        let missing = read_snapshot(&f, "x").unwrap_err();
        assert!(missing[0].starts_with("snapshot \"x\""), "{missing:?}");
        std::fs::write(&f, "a  \nb\n\n").unwrap();
        assert_eq!(read_snapshot(&f, "x").unwrap(), "a\nb\n");
        std::fs::write(&f, vec![b'a'; MAX_SNAPSHOT_BYTES as usize]).unwrap();
        assert!(read_snapshot(&f, "x").is_ok(), "exactly the limit is read");
        std::fs::write(&f, vec![b'a'; MAX_SNAPSHOT_BYTES as usize + 1]).unwrap();
        let big = read_snapshot(&f, "x").unwrap_err();
        assert!(big[0].contains("over the 1048576-byte limit"), "{big:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failure_screen_is_framed_escaped_and_bounded() {
        let long = "x".repeat(diff::MAX_LINE_CHARS + 50);
        let screen = format!("top\u{7}\n{long}\n");
        let lines = screen_lines(&screen);
        assert_eq!(lines[0], "screen:");
        assert_eq!(lines[1], "  |top\\x07");
        assert!(lines[2].contains("… ("), "clipped: {}", lines[2]);
        let many: String = (0..1000).map(|i| format!("{i}\n")).collect();
        assert_eq!(screen_lines(&many).len(), diff::MAX_DIFF_LINES + 1);
    }
}
