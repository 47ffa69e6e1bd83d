//! tickbox-app through its public API: what the `tickbox` binary's
//! commands do, without the binary. One test binary; each module is one
//! subject.
//!
//! - `audit` — the audit file of starts through [`App::open`]: starts,
//!   calls, denials, limits and ends each once, hostile text escaped, a
//!   session's byte budget, rotation at the file's bound, a policy's key;
//! - `consent` — what a wasm Tick's manifest asks for, granted only under
//!   an approval of its exact bytes kept in a private trust store; the
//!   decision, with an [`Approver`](tickbox_app::Approver) of the test's
//!   own in place of the CLI's terminal prompt;
//! - `examples` — the SDK's example Ticks (`examples/`), built for
//!   wasm32-wasip2 and natively and started through [`App::open`], each
//!   driven through a scripted session on both backends, and each passing
//!   `tickbox_conformance`'s checker;
//! - `fixtures` — a scenario's `[[http]]` answers (no socket opened, a
//!   miss one escaped line in every report) and `[files]` seeding its
//!   scratch directory, run as `tickbox test` runs it; their walls and
//!   bounds;
//! - `inspect` — the inspector's page server in process: its door, its
//!   bounds, confirmed calls, exports, a hostile Tick's markup as data,
//!   trimming, a live instance to its end, and the page in headless
//!   Chromium;
//! - `live` — a Tick published as `tickbox run --name` publishes it and
//!   driven through its socket: the smallest view sizes its terminal,
//!   view keys reach a wasm Tick (the harness `inspect` and `views` use);
//! - `policy` — `policy suggest` from audit files written by real starts
//!   through [`App::open`], and the suggested policy rerun;
//! - `registry` — Ticks from a real registry on loopback (and a fake one):
//!   pulls, pushes, the signers policy, the lock, consent for pulled
//!   Ticks, and `policy show`'s report;
//! - `traces` — scenario traces started through [`App::launcher`] and
//!   written by `scenarios::write_traces`: played by asciinema, the same
//!   on every run, cut at their bound.
//!
//! What needs the binary (exit codes, the one line on stderr, the
//! terminal prompt, `tickbox mcp` and `tickbox test` choosing that nobody
//! is asked) stays in `cli/tests/it`.

mod audit;
mod consent;
mod examples;
mod fixtures;
mod inspect;
mod live;
mod policy;
mod registry;
mod traces;
mod views;

use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tickbox_app::{
    scenarios, App, AppError, CallOutcome, Notice, Notices, Opened, Request, Settings,
};
use tickbox_conformance::scenario::{Prepared, Scenario};
use tickbox_test_support::wasm_cache;

/// Settings as the CLI fills them with no `TICKBOX_*` variable set, but
/// for where things are kept: compiled wasm in the build's own cache (as
/// the binary's tests keep it), approvals in `trust` (none: nowhere).
pub fn settings(trust: Option<PathBuf>) -> Settings {
    Settings {
        cache_dir: Some(wasm_cache()),
        cache_max_bytes: tickbox_sandbox::limits::DEFAULT_CACHE_MAX_BYTES,
        trust_dir: trust,
        audit_max_bytes: tickbox_telemetry::audit::AUDIT_FILE_MAX_BYTES,
        audit_session_max_bytes: tickbox_telemetry::audit::MAX_AUDIT_SESSION_BYTES,
        ..Settings::default()
    }
}

/// The notices an App gave, kept for the test to read.
#[derive(Default)]
pub struct Said(Mutex<Vec<Notice>>);

impl Said {
    /// The notices given since the last look (and forgets them).
    pub fn take(&self) -> Vec<Notice> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Notices for Said {
    fn notice(&self, notice: &Notice) {
        self.0.lock().unwrap().push(notice.clone());
    }
}

/// What one start and one command gave, as `tickbox call` and `tickbox
/// read` report it: the exit code they document (0 a result, 1 a tool
/// error, 2 a usage error, 3 a Tick that failed) and the output, the
/// result or error as JSON (or the error's one line).
pub type Ran = (i32, String);

/// A start that failed, as the CLI's exit code and line.
fn not_started(e: AppError) -> Ran {
    (if e.is_usage() { 2 } else { 3 }, e.to_string())
}

/// Starts `request`'s Tick, calls `tool` with `args`, shuts it down.
pub async fn call(app: &App, request: &Request, tool: &str, args: Value) -> Ran {
    let tick = match app.open(request).await {
        Ok(t) => t,
        Err(e) => return not_started(e),
    };
    let ran = call_in(&tick, tool, args).await;
    tick.close().await;
    ran
}

/// Calls `tool` in a Tick that is running.
pub async fn call_in(tick: &Opened, tool: &str, args: Value) -> Ran {
    let catalog = tick.session.descriptor().expect("initialized");
    let call = match catalog.prepare(tool, args) {
        Ok(c) => c,
        Err(e) => return (2, e.to_string()),
    };
    match tick.session.call(&call).await {
        CallOutcome::Ok(v) => (0, v.to_string()),
        CallOutcome::Failed { error, .. } => (1, serde_json::to_string(&error).unwrap()),
        CallOutcome::Unknown(why) => (3, format!("{why:?}")),
    }
}

/// Starts `request`'s Tick, reads its state, shuts it down.
pub async fn read(app: &App, request: &Request) -> Ran {
    let tick = match app.open(request).await {
        Ok(t) => t,
        Err(e) => return not_started(e),
    };
    let ran = match tick.session.read().await {
        Ok(state) => (0, serde_json::to_string(&*state).unwrap()),
        Err(e) => (3, e.to_string()),
    };
    tick.close().await;
    ran
}

/// Why nobody is asked, for the scenarios' requests.
const NOBODY: &str = "a scenario runs unattended in this test";

/// What `tickbox test` starts for `s`'s `[tick]`: the app's launcher of
/// [`scenarios::request`], nobody asked.
pub fn prepared(app: &App, s: &Scenario) -> Prepared {
    let launcher = app
        .launcher(&scenarios::request(s, NOBODY))
        .expect("a launcher");
    Prepared {
        kind: launcher.kind(),
        launch: Arc::new(launcher),
    }
}
