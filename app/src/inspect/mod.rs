//! The inspector: one page on loopback that shows a Tick live and drives
//! it (`tickbox inspect`). The CLI parses its flags, starts or reaches the
//! Tick and prints the URL; the page's server, its timeline of frames and
//! the picture it keeps of the Tick are here.
//!
//! `tickbox inspect TICK|@NAME [--listen ADDR] [--open]`: one web page that
//! shows a Tick live (its screen, state, tools and frames) and drives it.
//!
//! What the page drives is a [`Target`]: either a Tick this command starts
//! (`TICK`: same flags, grants and consent as the one-shot commands, with
//! taps on its stdin and stdout, [`timeline`]), or a live instance another
//! tickbox process hosts (`@NAME`, [`live`]: the per-user socket's attach,
//! watch, describe and call requests). Everything else is one code path:
//! the target feeds the [`Inspector`]'s picture (state, catalog, ending,
//! a screen model and the timeline), the server ([`server`]) sends that
//! picture to the page, and the page's actions go back through the target.
//! The command runs until SIGINT or SIGTERM, and keeps serving after the
//! Tick ends so the page can still show how it ended and export the session.
//!
//! What reaches the browser is data the page inserts as text:
//! - the **screen** as rows of styled runs drawn from a screen model
//!   (`tickbox_host::render::runs`, the cell filter views use): the
//!   host's own model for a Tick started here; for a live instance a model
//!   of ours fed only the frames the instance's host re-rendered from its
//!   model. No byte the Tick wrote reaches the page as markup or terminal
//!   input;
//! - the **state** (as a subscriber gets it: trimmed to the delivery budget,
//!   with what was cut), the **catalog**, call results and errors, and frame
//!   previews, every string and key through the one character policy for
//!   a reader that decodes JSON (`TickData::inert`);
//! - the page itself, its script and its style are tickbox's, in the
//!   binary (`include_str!`), served with a Content-Security-Policy that
//!   allows no inline script and nothing from elsewhere.
//!
//! The door ([`server`]) is the one every HTTP server of tickbox shares
//! (`tickbox_guard`), as `tickbox mcp --http`'s is: a 32-byte random token
//! on every request but for the page's own files (printed at start in the
//! URL's fragment, which no browser sends anywhere; the page sends it as
//! `Authorization: Bearer`, never as a cookie, which the browser would also
//! send to every other port of 127.0.0.1), `Host` checked against the
//! listen address, `Origin` checked on every request that has one and
//! required on every POST, and the door's bounded connections, head
//! sizes, timeouts and bodies.
//!
//! Why a module of the CLI and not a crate: it is one command's surface,
//! made of pieces other layers own (the session, the live socket's client,
//! the renderer, the HTTP door, the scenario recorder); only the
//! page's assets, the routes and the glue are its own.
//!
//! Every bound, in one table (a unit test checks it against the constants):
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | [`MAX_TIMELINE_FRAMES`] | 1000 | frames kept for the page (older ones are dropped and counted) |
//! | [`FRAME_HOLD_BYTES`] | 4096 | bytes of one frame kept to read its method and id |
//! | [`FRAME_PREVIEW_CHARS`] | 240 | characters of a frame shown in the timeline |
//! | [`MAX_EVENT_CLIENTS`] | 8 | event streams open at once (503 past it) |
//! | [`EVENT_QUEUE`] | 256 | events queued for one slow stream before it is resent whole |
//! | [`MAX_ACTION_BODY_BYTES`] | 256 KiB | one POST body (a call's args, keys, a resize) |
//! | [`MAX_KEY_BYTES`] | 4096 | key bytes in one POST |
//! | [`SCREEN_INTERVAL`] | 50 ms | the shortest time between two screens sent |
//! | [`STATE_INTERVAL`] | 50 ms | the shortest time between two states sent (the subscription's interval) |
//! | [`MAX_AUDIT_KEPT`] | 1000 | audit lines kept for the export |
//! | [`MAX_CHANGED_PATHS`] | 256 | paths of the state one update marks as changed |
//! | [`LIVE_SEND_QUEUE`] | 64 | key and resize frames waiting for a live instance's socket (503 past it) |

pub mod live;
pub mod server;
pub mod timeline;

use crate::AppError as Exit;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tickbox_conformance::scenario::{RecordTick, Recorder};
use tickbox_host::delivery::{item_budget, Delivery, Subscription};
use tickbox_host::live::Registry;
use tickbox_host::session::{CallOutcome, Session, SessionConfig, SessionEvent};
use tickbox_host::text::{self, TickData};
use tickbox_host::util::lock;
use tickbox_host::view::View;
use tickbox_protocol::{Descriptor, PreparedCall, TickText};
use tickbox_sandbox::Launcher;
use tickbox_telemetry::audit::{AuditLine, AuditSink};
use timeline::{Dir, Timeline};
use tokio::sync::watch;

/// Frames kept for the page; older ones are dropped and counted.
pub const MAX_TIMELINE_FRAMES: usize = 1000;
/// Bytes of one frame kept to read its method and id (and its preview).
pub const FRAME_HOLD_BYTES: usize = 4096;
/// Characters of a frame the timeline shows.
pub const FRAME_PREVIEW_CHARS: usize = 240;
/// Event streams (`/events`) open at once; 503 past it.
pub const MAX_EVENT_CLIENTS: usize = 8;
/// Events queued for one stream; a stream that falls further behind is
/// sent the whole picture again instead.
pub const EVENT_QUEUE: usize = 256;
/// The largest POST body: a call's args, keys or a resize.
pub const MAX_ACTION_BODY_BYTES: usize = 256 * 1024;
/// Key bytes in one POST to `/api/keys`.
pub const MAX_KEY_BYTES: usize = 4096;
/// The shortest time between two screens sent to the page: a Tick that
/// draws constantly costs one snapshot per interval.
pub const SCREEN_INTERVAL: Duration = Duration::from_millis(50);
/// The shortest time between two states sent to the page: a Tick that
/// updates constantly costs one trimmed delivery per interval (updates in
/// between are merged and counted, as for `tickbox watch`).
pub const STATE_INTERVAL: Duration = Duration::from_millis(50);
/// Audit lines kept for the page's export (the oldest dropped first).
pub const MAX_AUDIT_KEPT: usize = 1000;
/// Paths of the state listed as changed by one update; past it the page
/// highlights the first ones only.
pub const MAX_CHANGED_PATHS: usize = 256;
/// Key and resize frames waiting to be written to a live instance's socket;
/// a host that stops reading them makes the page's keys fail (503) instead
/// of piling up here.
pub const LIVE_SEND_QUEUE: usize = 64;

/// Audit lines kept in memory for the export; the writer never waits.
#[derive(Default)]
pub struct AuditRing(Mutex<VecDeque<String>>);

impl AuditSink for AuditRing {
    fn offer(&self, event: AuditLine) -> bool {
        let line = event.into_line();
        let mut lines = lock(&self.0);
        if lines.len() >= MAX_AUDIT_KEPT {
            lines.pop_front();
        }
        lines.push_back(line);
        true
    }
}

/// What the page drives. The page, the server and the exports see only
/// this (through [`Inspector`]), so both kinds share every code path but
/// the few below.
pub enum Target {
    /// A Tick this command started: its session, and its audit stream.
    Local {
        session: Arc<Session>,
        audit: Arc<AuditRing>,
    },
    /// A live instance another process hosts, through its socket (boxed:
    /// it is the larger of the two, and there is one per process).
    Live(Box<live::LiveTick>),
}

/// Why a call was not sent (nothing ran).
pub enum NotSent {
    /// The arguments or the call itself are wrong (400).
    Invalid(String),
    /// The Tick cannot take calls: it ended, or its host cannot be reached (409).
    Unavailable(String),
}

impl Target {
    /// The screen model the page's screen is drawn from.
    fn view(&self) -> &Arc<View> {
        match self {
            Target::Local { session, .. } => session.view(),
            Target::Live(l) => l.view(),
        }
    }

    /// The catalog to check a call against, as the Tick reports it now.
    async fn catalog(&self) -> Result<Arc<Descriptor>, NotSent> {
        match self {
            Target::Local { session, .. } => session
                .descriptor()
                .ok_or_else(|| NotSent::Unavailable("the Tick has no catalog".into())),
            // Described again, as `tickbox call @NAME` does: the live Tick's
            // catalog may have changed since the page last saw it.
            Target::Live(l) => l.describe().await,
        }
    }

    /// Sends a prepared (and, for a mutating tool, confirmed) call once.
    async fn call(&self, prepared: &PreparedCall) -> Result<CallOutcome, NotSent> {
        match self {
            Target::Local { session, .. } => {
                if let Some(audit) = session.audit().filter(|_| prepared.mutates) {
                    audit.approval(
                        "call",
                        &prepared.tool,
                        true,
                        "the inspector page (confirmed)",
                    );
                }
                Ok(session.call(prepared).await)
            }
            // The live host records the call in its own audit stream.
            Target::Live(l) => l.call(prepared).await,
        }
    }

    /// Key bytes for the Tick's terminal.
    fn keys(&self, bytes: &[u8]) -> Result<(), String> {
        match self {
            Target::Local { session, .. } => {
                session.view().send_input(bytes);
                Ok(())
            }
            Target::Live(l) => l.keys(bytes),
        }
    }

    /// The audit lines kept so far, or why there are none.
    fn audit_lines(&self) -> Result<String, &'static str> {
        match self {
            Target::Local { audit, .. } => {
                let lines = lock(&audit.0);
                let mut out = String::new();
                for l in lines.iter() {
                    out.push_str(l);
                    out.push('\n');
                }
                Ok(out)
            }
            Target::Live(_) => Err(live::NO_AUDIT),
        }
    }

    /// What the page says about the target (strings inert).
    fn describe(&self) -> Value {
        match self {
            Target::Local { .. } => json!({
                "kind": "local",
                "timeline": "Every frame between the host and the Tick (its stdin and stdout).",
                "audit": true,
            }),
            Target::Live(l) => l.describe_target(),
        }
    }
}

/// What the server shares: the target and the picture the page is shown.
/// The target's drivers keep the picture current; the server only reads
/// it (and subscribes to it) and sends actions to the target.
pub struct Inspector {
    target: Target,
    timeline: Arc<Timeline>,
    recorder: Recorder,
    /// A live target's scenario export names no Tick: this says so.
    scenario_note: Option<String>,
    /// The state event last made (see [`Inspector::set_state`]).
    state: watch::Sender<Value>,
    /// The catalog as the page reads it, or null.
    catalog: watch::Sender<Value>,
    /// How the Tick ended, once it has.
    ended: watch::Sender<Option<Value>>,
    /// The state data last shown, the paths its update changed, and the
    /// updates counted so far.
    last_state: Mutex<(Value, Vec<String>, u64)>,
}

/// Keeps the picture of a Tick started here current: its state as a
/// subscriber gets it, catalog changes, and how it ended.
pub async fn drive_local(inspector: Arc<Inspector>, session: Arc<Session>) {
    let mut sub = Subscription::new(&session, STATE_INTERVAL, true);
    let mut events = session.events();
    let mut events_open = true;
    loop {
        tokio::select! {
            next = sub.next(&session) => {
                // None: the session ended and its last state went out.
                let Some((state, merged)) = next else { break };
                let Some(catalog) = session.descriptor() else { continue };
                // Trimmed as `tickbox watch` trims (on the blocking pool).
                let delivery = Delivery::build(state, merged, catalog, item_budget(1)).await;
                match serde_json::to_value(&delivery) {
                    Ok(d) => inspector.set_state(&d),
                    Err(e) => tracing::warn!(error = %e, "a delivery did not serialize"),
                }
            }
            ev = events.recv(), if events_open => match ev {
                Ok(SessionEvent::CatalogChanged(d)) => inspector.set_catalog(&d),
                Ok(_) => {}
                // Missed some: the session has the newest catalog anyway.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    if let Some(d) = session.descriptor() {
                        inspector.set_catalog(&d);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => events_open = false,
            },
        }
    }
    let reason = session.ended().await;
    let last_words = session
        .view()
        .last_lines(tickbox_host::view::LAST_WORDS_LINES);
    inspector.set_ended(&reason.to_string(), &last_words);
}

/// `tickbox inspect TICK`: starts `launcher`'s Tick with its stdin and
/// stdout tapped into the page's timeline, and makes the inspector of it,
/// kept current by [`drive_local`]. `audit` is the ring the page's audit
/// export reads: the App must already audit into it
/// ([`App::also_audit_into`](crate::App::also_audit_into)) when the
/// launcher's request got its audit stream. `record` makes the scenario
/// export's `[tick]` from how the Tick runs and its terminal's size.
pub async fn start_local(
    launcher: &Launcher,
    config: SessionConfig,
    audit: Arc<AuditRing>,
    record: impl FnOnce(tickbox_host::TickKind, (u16, u16)) -> RecordTick,
) -> Result<(Arc<Inspector>, Arc<Session>), Exit> {
    let timeline = Timeline::new();
    let mut io = launcher.spawn().await.map_err(Exit::session)?;
    io.stdin = Box::new(timeline.tap(io.stdin, Dir::ToTick));
    io.stdout = Box::new(timeline.tap(io.stdout, Dir::FromTick));
    let session = Session::start(io, config).await.map_err(|e| Exit::Start {
        last_words: e.last_words.clone(),
        message: e.to_string(),
    })?;
    let session = Arc::new(session);
    let record = record(launcher.kind(), session.view().size());
    let target = Target::Local {
        session: session.clone(),
        audit,
    };
    let inspector = Arc::new(Inspector::new(target, timeline, &record, None));
    if let Some(d) = session.descriptor() {
        inspector.set_catalog(&d);
    }
    tokio::spawn(drive_local(inspector.clone(), session.clone()));
    Ok((inspector, session))
}

/// `tickbox inspect @NAME`: the inspector of the live instance `target`
/// names in `registry`, reached through its socket and kept current by
/// [`live::drive`]; calls wait at most `call_timeout`.
pub async fn connect_live(
    registry: &Registry,
    target: &str,
    call_timeout: Duration,
) -> Result<Arc<Inspector>, Exit> {
    let timeline = Timeline::new();
    let (tick, streams) =
        live::LiveTick::connect(registry, target, timeline.clone(), call_timeout).await?;
    let record = tick.record_tick();
    let note = tick.scenario_note();
    let catalog = streams.catalog.clone();
    let inspector = Arc::new(Inspector::new(
        Target::Live(Box::new(tick)),
        timeline,
        &record,
        Some(note),
    ));
    inspector.set_catalog(&catalog);
    live::drive(inspector.clone(), streams);
    Ok(inspector)
}

/// The catalog as the page reads it (strings inert).
fn catalog_json(d: &Descriptor) -> Value {
    let tools: Vec<Value> = d
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name.wire(),
                "description": t.description.wire(),
                "input_schema": t.input_schema,
                "mutates": t.mutates,
            })
        })
        .collect();
    TickData::new(json!({
        "kind": d.kind.wire(),
        "title": d.title.wire(),
        "description": d.description.wire(),
        "revision": d.revision,
        "tools": tools,
    }))
    .inert()
}

impl Inspector {
    /// The inspector of `target`, its frames in `timeline`; `record`
    /// is the `[tick]` of its scenario export.
    pub fn new(
        target: Target,
        timeline: Arc<Timeline>,
        record: &tickbox_conformance::scenario::RecordTick,
        scenario_note: Option<String>,
    ) -> Inspector {
        // The recorder only ever renders text here (the page's export); the
        // path names the file in the replay hint, as the download is named.
        let scratch = std::env::temp_dir().join("inspect.scenario.toml");
        Inspector {
            target,
            timeline,
            recorder: Recorder::new(scratch, record),
            scenario_note,
            state: watch::channel(
                json!({"seq": null, "data": null, "merged": 0, "changed": [], "updates": 0, "trimmed": []}),
            )
            .0,
            catalog: watch::channel(Value::Null).0,
            ended: watch::channel(None).0,
            last_state: Mutex::new((Value::Null, Vec::new(), 0)),
        }
    }

    /// A new catalog for the page (unchanged ones are not resent).
    pub fn set_catalog(&self, d: &Descriptor) {
        let c = catalog_json(d);
        self.catalog.send_if_modified(|old| {
            let changed = *old != c;
            if changed {
                *old = c;
            }
            changed
        });
    }

    /// A delivery of the state (`tickbox watch`'s JSON: seq, at, merged,
    /// recover_with, trimmed, data) made into the page's state event: the
    /// data and everything the Tick named inert, the updates counted, and
    /// the paths that changed since the previous one.
    fn set_state(&self, delivery: &Value) {
        let inert = |v: &Value| TickData::new(v.clone()).inert();
        let data = inert(&delivery["data"]);
        let merged = delivery["merged"].as_u64().unwrap_or(0);
        let mut last = lock(&self.last_state);
        last.2 += merged;
        if data != last.0 {
            let mut changed = Vec::new();
            changed_paths(&last.0, &data, String::new(), &mut changed);
            last.0 = data.clone();
            last.1 = changed;
        }
        let event = json!({
            "seq": delivery["seq"],
            "at": inert(&delivery["at"]),
            "data": data,
            "merged": merged,
            "updates": last.2,
            "changed": last.1,
            // Paths name the Tick's keys; a cut's counts are numbers.
            "trimmed": inert(&delivery["trimmed"]),
            "recover_with": inert(&delivery["recover_with"]),
        });
        drop(last);
        self.state.send_replace(event);
    }

    /// The Tick ended: the reason (a host's words, which may quote the
    /// Tick) and the last lines of its screen, escaped. A later ending
    /// only replaces one without last words (a live instance's watch
    /// stream may say it first, its view then says it with them).
    fn set_ended(&self, reason: &str, last_words: &[TickText]) {
        let words: Vec<String> = last_words.iter().map(|l| text::escape(l.wire())).collect();
        let e = json!({"reason": text::escape(reason), "last_words": words});
        self.ended.send_if_modified(|old| {
            let better = match old {
                None => true,
                Some(o) => {
                    o["last_words"].as_array().is_none_or(Vec::is_empty) && !words.is_empty()
                }
            };
            if better {
                *old = Some(e);
            }
            better
        });
    }

    /// The screen as rows of styled runs, its size and the cursor.
    fn screen(&self) -> Value {
        let view = self.target.view();
        let snap = view.snapshot();
        let (rows, cursor) = tickbox_host::render::runs(&snap);
        let (cols, height) = view.size();
        json!({"cols": cols, "rows": height, "lines": rows, "cursor": cursor})
    }

    /// Everything the page shows, for a new event stream (or one that fell
    /// behind).
    fn hello(&self) -> Value {
        let (frames, dropped) = self.timeline.snapshot();
        // Cloned out, so no watch is held while the rest is gathered.
        let catalog = self.catalog.borrow().clone();
        let state = self.state.borrow().clone();
        let ended = self.ended.borrow().clone();
        json!({
            "target": self.target.describe(),
            "catalog": catalog,
            "state": state,
            "screen": self.screen(),
            "frames": frames,
            "frames_dropped": dropped,
            "ended": ended,
            "limits": {"timeline_frames": MAX_TIMELINE_FRAMES},
        })
    }

    /// The catalog a call is checked against (the page's is updated if
    /// the Tick's changed).
    async fn catalog_for_call(&self) -> Result<Arc<Descriptor>, NotSent> {
        let d = self.target.catalog().await?;
        self.set_catalog(&d);
        Ok(d)
    }

    /// Sends a call and records it for the scenario export; the outcome
    /// and the latency.
    async fn call(
        &self,
        prepared: &PreparedCall,
        args: &Value,
    ) -> Result<(CallOutcome, u64), NotSent> {
        let started = Instant::now();
        let outcome = self.target.call(prepared).await?;
        let latency_ms = started.elapsed().as_millis() as u64;
        self.recorder
            .called(&prepared.tool, args, started, &outcome);
        Ok((outcome, latency_ms))
    }

    /// Keys from the page, recorded for the scenario export once sent.
    fn keys(&self, bytes: &[u8]) -> Result<(), String> {
        self.target.keys(bytes)?;
        self.recorder.keys(bytes);
        Ok(())
    }

    /// The page's screen panel changed size: the Tick's terminal follows
    /// (for a live instance, through its view: the smallest view wins).
    fn resize(&self, cols: u16, rows: u16) {
        let view = self.target.view();
        if view.size() != (cols, rows) {
            view.resize(cols, rows);
            self.recorder.resized(cols, rows);
        }
    }

    /// The session so far as a `tickbox test` scenario (TOML).
    fn scenario(&self) -> String {
        match &self.scenario_note {
            Some(note) => format!("{note}{}", self.recorder.text()),
            None => self.recorder.text(),
        }
    }
}

/// JSON pointers of what differs between `old` and `new`, at most
/// [`MAX_CHANGED_PATHS`]; a value whose type changed is one path.
fn changed_paths(old: &Value, new: &Value, at: String, out: &mut Vec<String>) {
    if out.len() >= MAX_CHANGED_PATHS || old == new {
        return;
    }
    let escape = |k: &str| k.replace('~', "~0").replace('/', "~1");
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                let path = format!("{at}/{}", escape(k));
                match a.get(k) {
                    Some(o) => changed_paths(o, v, path, out),
                    None if out.len() < MAX_CHANGED_PATHS => out.push(path),
                    None => return,
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, v) in b.iter().enumerate() {
                let path = format!("{at}/{i}");
                match a.get(i) {
                    Some(o) => changed_paths(o, v, path, out),
                    None if out.len() < MAX_CHANGED_PATHS => out.push(path),
                    None => return,
                }
            }
        }
        _ => out.push(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_paths_name_the_leaves_that_changed() {
        let mut out = Vec::new();
        changed_paths(
            &json!({"value": 1, "recent": [{"v": 1}], "same": "x"}),
            &json!({"value": 2, "recent": [{"v": 1}, {"v": 2}], "same": "x", "a/b": true}),
            String::new(),
            &mut out,
        );
        // In the order of the keys (serde_json keeps objects sorted).
        assert_eq!(out, ["/a~1b", "/recent/1", "/value"]);
        let mut none = Vec::new();
        changed_paths(&json!({"a": 1}), &json!({"a": 1}), String::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn the_limits_table_matches_the_constants() {
        let doc = include_str!("mod.rs");
        let row = |name: &str, value: &str| {
            let line = format!("| [`{name}`] | {value} |");
            assert!(
                doc.contains(&line),
                "the table's row for {name} says {value}"
            );
        };
        row("MAX_TIMELINE_FRAMES", &MAX_TIMELINE_FRAMES.to_string());
        row("FRAME_HOLD_BYTES", &FRAME_HOLD_BYTES.to_string());
        row("FRAME_PREVIEW_CHARS", &FRAME_PREVIEW_CHARS.to_string());
        row("MAX_EVENT_CLIENTS", &MAX_EVENT_CLIENTS.to_string());
        row("EVENT_QUEUE", &EVENT_QUEUE.to_string());
        row(
            "MAX_ACTION_BODY_BYTES",
            &format!("{} KiB", MAX_ACTION_BODY_BYTES / 1024),
        );
        row("MAX_KEY_BYTES", &MAX_KEY_BYTES.to_string());
        row(
            "SCREEN_INTERVAL",
            &format!("{} ms", SCREEN_INTERVAL.as_millis()),
        );
        row(
            "STATE_INTERVAL",
            &format!("{} ms", STATE_INTERVAL.as_millis()),
        );
        row("MAX_AUDIT_KEPT", &MAX_AUDIT_KEPT.to_string());
        row("LIVE_SEND_QUEUE", &LIVE_SEND_QUEUE.to_string());
        row("MAX_CHANGED_PATHS", &MAX_CHANGED_PATHS.to_string());
    }
}
