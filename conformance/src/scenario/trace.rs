//! Traces of scenario runs ([`super::RunOptions::trace`]): one file per scenario
//! that asciinema's players play as it is, and that `tickbox test
//! show-trace` replays step by step.
//!
//! A trace is an [asciicast v2] file: a JSON header line, then one
//! `[time, code, data]` line per event, `time` in seconds from the start.
//!
//! - The header has the keys players read (`version` 2, `width`, `height`,
//!   `title`, `env`) and one more, `"tickbox"`, an object: `trace` (this
//!   format's version, [`TRACE_FORMAT`]), `scenario`, `file`, `seed` (null
//!   on real time), `outcome` (`passed`, `failed`, `start failed`,
//!   `invalid`), `steps`, `passed_steps`, `cut` (null, or why the trace was
//!   cut at [`MAX_TRACE_BYTES`]) and `max_bytes`.
//! - `"o"` events are the screen as tickbox's own renderer draws it from
//!   the screen model ([`tickbox_host::render`]) after the start and after
//!   each step: cursor moves, colours and erases only, never a byte the
//!   Tick wrote.
//! - `"r"` events are the resize steps (`COLSxROWS`).
//! - `"m"` events (markers) open each step, their label `step N: ACTION`;
//!   players show them as chapters, and `asciinema play -m` pauses there.
//! - `"t"` events ([`TRACE_CODE`]) are tickbox's records, the data a JSON
//!   object encoded as a string (asciinema's own parser takes only string
//!   data): `{"kind": "frame", "dir": "to tick" | "from tick", "text"}`
//!   for each protocol frame, `{"kind": "step", "step", "action",
//!   "outcome", "expected", "found": [..], "screen": [rows], "state"}`
//!   after the start (step 0, `action` "start") and after each step, and
//!   `{"kind": "cut", "why"}` where the trace was cut.
//!
//! The format says players ignore event codes they do not know, and
//! asciinema's do: the Python CLI (2.x) prints and plays only `"o"`; the
//! Rust CLI (3.x) reads any other code as an opaque event whose data must
//! be a string (hence the string-encoded records); the web player applies
//! `"o"`, `"i"`, `"r"` and `"m"` and skips the rest. Extra header keys are
//! ignored by all three.
//!
//! Every string in a trace is escaped with the project's one character
//! policy ([`tickbox_protocol::text`]) before it is written, and every line
//! is [`json_safe`], so the file has no raw control, bidi or format
//! character anywhere; the screen events carry only the renderer's own
//! sequences. The timeline is virtual time plus [`TRACE_STEP_PACE`] per
//! step on a deterministic Tick, so its trace is the same on every run;
//! real time on a native one.
//!
//! Bounds (`crate::limits`): a trace is at most [`MAX_TRACE_BYTES`]; once
//! frames, screens and steps reach it less [`TRACE_RESERVE_BYTES`] the rest
//! is counted, not kept, and the trace ends with the last step's outcome
//! and a `cut` record, which the report names.
//!
//! [asciicast v2]: https://docs.asciinema.org/manual/asciicast/v2/

/// The bound on a trace file, written and read (`crate::limits`).
pub use crate::limits::MAX_TRACE_BYTES;
use crate::limits::{
    MAX_TRACE_FOUND_CHARS, MAX_TRACE_FRAME_CHARS, MAX_TRACE_SCREEN_CHARS, MAX_TRACE_STATE_CHARS,
    TRACE_RESERVE_BYTES, TRACE_STEP_PACE,
};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tickbox_host::render::Renderer;
use tickbox_host::tap::{FrameSink, FrameTap};
use tickbox_protocol::text::{escape, json_safe, truncate, TickText};

/// This trace format's version (the header's `tickbox.trace`).
pub const TRACE_FORMAT: u64 = 1;
/// The event code of tickbox's own records in a trace.
pub const TRACE_CODE: &str = "t";
/// The suffix of trace files.
pub const TRACE_SUFFIX: &str = ".trace.cast";
/// Room the header always has at the end of a trace (its strings are
/// clipped to [`HEADER_FIELD_CHARS`] before escaping, so it is far less).
const HEADER_ROOM: usize = 8 * 1024;
/// Characters of a name, path or label kept in a header or marker.
const HEADER_FIELD_CHARS: usize = 200;
/// Bytes of one frame held while its line is read: the characters kept
/// are at most [`MAX_TRACE_FRAME_CHARS`], and a character has at most 4.
const FRAME_HOLD_BYTES: usize = MAX_TRACE_FRAME_CHARS * 4;

/// A finished trace: the file's text, and whether it was cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The whole file: header and events, one per line.
    pub text: String,
    /// Why it was cut (it kept what fitted in [`MAX_TRACE_BYTES`]), if it was.
    pub cut: Option<String>,
}

/// Which way a protocol frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Host to Tick (its stdin).
    ToTick,
    /// Tick to host (its stdout).
    FromTick,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::ToTick => "to tick",
            Direction::FromTick => "from tick",
        }
    }
}

/// One step's outcome as a trace records it (every string already what
/// the runner reports: the recorder escapes and clips it again).
pub(crate) struct StepRecord<'a> {
    pub step: usize,
    pub action: &'a str,
    pub outcome: &'a str,
    pub expected: &'a str,
    pub found: &'a [String],
}

/// What the header says about the run as a whole.
pub(crate) struct Summary<'a> {
    pub scenario: &'a str,
    pub file: &'a str,
    pub seed: Option<u64>,
    pub outcome: &'a str,
    pub steps: usize,
    pub passed_steps: usize,
}

/// Records one run: shared by the runner and the taps on the Tick's stdin
/// and stdout, each event appended under one lock.
pub(crate) struct Recorder {
    inner: Mutex<Inner>,
    /// Held by the taps around a write to the Tick with the frames it
    /// completed, and around the frames a read completed: the Tick cannot
    /// answer before the request's write completes, so a response is never
    /// recorded before its request (the same trace on every run).
    order: Mutex<()>,
}

struct Inner {
    body: String,
    width: u16,
    height: u16,
    /// The screen's size in the last event that drew it.
    size: (u16, u16),
    now: Duration,
    renderer: Renderer,
    /// Frames, screens and steps left out since the trace filled up.
    left_out: u64,
    /// Frames seen in all, kept or not.
    seen: u64,
    /// `tick/update` notifications among the frames from the Tick.
    updates: u64,
    cut: bool,
}

/// Whether a whole frame from the Tick is a `tick/update` notification
/// (parsed only when the method's name appears in it).
fn is_update(frame: &[u8]) -> bool {
    const METHOD: &[u8] = b"tick/update";
    frame.windows(METHOD.len()).any(|w| w == METHOD)
        && serde_json::from_slice::<Value>(frame)
            .is_ok_and(|v| v.get("method").and_then(Value::as_str) == Some("tick/update"))
}

impl Recorder {
    /// A recorder for a screen of `cols` × `rows`.
    pub(crate) fn new(cols: u16, rows: u16) -> Arc<Recorder> {
        Arc::new(Recorder {
            inner: Mutex::new(Inner {
                body: String::new(),
                width: cols.max(1),
                height: rows.max(1),
                size: (cols.max(1), rows.max(1)),
                now: Duration::ZERO,
                renderer: Renderer::new(cols, rows),
                left_out: 0,
                seen: 0,
                updates: 0,
                cut: false,
            }),
            order: Mutex::new(()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        tickbox_host::util::lock(&self.inner)
    }

    /// How many frames have passed the taps so far.
    pub(crate) fn frames_seen(&self) -> u64 {
        self.lock().seen
    }

    /// How many `tick/update` notifications came from the Tick so far: a
    /// step's state is recorded once the session has taken that many.
    pub(crate) fn updates_seen(&self) -> u64 {
        self.lock().updates
    }

    /// Events from now on happen at `t` (never earlier than the last).
    pub(crate) fn at(&self, t: Duration) {
        let mut i = self.lock();
        i.now = i.now.max(t);
    }

    /// A step begins: its marker.
    pub(crate) fn marker(&self, label: &str) {
        let label = escape(truncate(label, HEADER_FIELD_CHARS));
        self.lock().push("m", &label, false);
    }

    /// One whole protocol frame (a line without its newline), of `len`
    /// bytes of which `kept` were held.
    fn frame(&self, dir: Direction, kept: &[u8], len: usize) {
        let update = dir == Direction::FromTick && is_update(kept);
        let mut i = self.lock();
        i.seen += 1;
        i.updates += u64::from(update);
        if i.cut {
            // Not even escaped: past the bound a chatty Tick costs only a count.
            i.left_out += 1;
            return;
        }
        let whole = String::from_utf8_lossy(kept);
        let shown = truncate(&whole, MAX_TRACE_FRAME_CHARS);
        let mut text = escape(shown);
        if kept.len() < len || shown.len() < whole.len() {
            text.push_str(&format!(" … ({len} bytes in all)"));
        }
        let record = json!({"kind": "frame", "dir": dir.name(), "text": text});
        i.push(TRACE_CODE, &record.to_string(), false);
    }

    /// The screen, rendered from the model (only what changed since the
    /// last one); a screen of another size than the last is a resize
    /// first (an `"r"` event, then a full repaint).
    pub(crate) fn screen(&self, screen: &vt100::Screen) {
        let mut i = self.lock();
        if i.cut {
            i.left_out += 1;
            return;
        }
        let (rows, cols) = screen.size();
        let size = (cols.get(), rows.get());
        if size != i.size {
            i.size = size;
            i.renderer.resize(size.0, size.1);
            i.push("r", &format!("{}x{}", size.0, size.1), false);
        }
        let bytes = i.renderer.render(screen, None);
        if !bytes.is_empty() {
            // The renderer writes cell text as UTF-8 and ASCII sequences.
            let data = String::from_utf8_lossy(&bytes).into_owned();
            if !i.push("o", &data, false) {
                // A partial repaint must not be followed by a diff against
                // what the player never got: repaint all next time.
                let (w, h) = i.size;
                i.renderer.resize(w, h);
            }
        }
    }

    /// A step's outcome with the screen and state after it; `last` is the
    /// scenario's last record, which always fits (the reserve is for it),
    /// cut down to what does.
    pub(crate) fn step(
        &self,
        r: &StepRecord<'_>,
        screen: &TickText,
        state: Option<&Value>,
        last: bool,
    ) {
        let found = clip_lines(r.found, MAX_TRACE_FOUND_CHARS);
        // Each row is escaped by `clip_lines` on its way into the record.
        let rows: Vec<&str> = screen.wire().lines().collect();
        let screen = clip_lines(&rows, MAX_TRACE_SCREEN_CHARS);
        let state = state.map(|v| {
            let text = json_safe(&v.to_string());
            clip_text(&text, MAX_TRACE_STATE_CHARS)
        });
        let record = |screen: &[String], state: Option<&String>, found: &[String]| {
            json!({
                "kind": "step",
                "step": r.step,
                "action": escape(truncate(r.action, HEADER_FIELD_CHARS)),
                "outcome": escape(r.outcome),
                "expected": clip_text(&escape(r.expected), MAX_TRACE_FOUND_CHARS),
                "found": found,
                "screen": screen,
                "state": state,
            })
            .to_string()
        };
        let mut i = self.lock();
        if i.push(TRACE_CODE, &record(&screen, state.as_ref(), &found), last) || !last {
            return;
        }
        // The last record did not fit whole even in the reserve: keep its
        // outcome and the first of what was found.
        let short = clip_lines(&found, 1024);
        i.push(TRACE_CODE, &record(&[], None, &short), true);
    }

    /// The header and everything in it, then the events: the file.
    pub(crate) fn finish(&self, s: &Summary<'_>) -> Trace {
        let mut i = self.lock();
        let cut = i.cut.then(|| {
            format!(
                "the trace was cut at its bound of {MAX_TRACE_BYTES} bytes (MAX_TRACE_BYTES): {} frames, screens and steps were left out",
                i.left_out
            )
        });
        if let Some(why) = &cut {
            i.push("m", "trace cut", true);
            let record = json!({"kind": "cut", "why": why}).to_string();
            i.push(TRACE_CODE, &record, true);
        }
        let clip = |t: &str| escape(truncate(t, HEADER_FIELD_CHARS));
        let header = json!({
            "version": 2,
            "width": i.width,
            "height": i.height,
            "title": format!("tickbox test: {}", clip(s.scenario)),
            "env": {"TERM": "xterm-256color"},
            "tickbox": {
                "trace": TRACE_FORMAT,
                "scenario": clip(s.scenario),
                "file": clip(s.file),
                "seed": s.seed,
                "outcome": s.outcome,
                "steps": s.steps,
                "passed_steps": s.passed_steps,
                "cut": cut,
                "max_bytes": MAX_TRACE_BYTES,
            }
        });
        let mut text = json_safe(&header.to_string());
        text.push('\n');
        text.push_str(&i.body);
        Trace { text, cut }
    }
}

impl Inner {
    /// Appends one event; false when it did not fit (and the trace is
    /// then cut). `reserve` events may use the reserve.
    fn push(&mut self, code: &str, data: &str, reserve: bool) -> bool {
        let limit = if reserve {
            MAX_TRACE_BYTES - HEADER_ROOM
        } else {
            MAX_TRACE_BYTES - TRACE_RESERVE_BYTES
        };
        if self.cut && !reserve {
            self.left_out += 1;
            return false;
        }
        // Milliseconds, so a time prints the same on every run.
        let t = (self.now.as_millis() as f64) / 1000.0;
        let line = json_safe(&json!([t, code, data]).to_string());
        if self.body.len() + line.len() + 1 > limit {
            self.cut = true;
            self.left_out += 1;
            return false;
        }
        self.body.push_str(&line);
        self.body.push('\n');
        true
    }
}

/// `text` cut to `max` characters, saying how long it was.
fn clip_text(text: &str, max: usize) -> String {
    let kept = truncate(text, max);
    if kept.len() == text.len() {
        text.to_string()
    } else {
        format!("{kept} … ({} bytes in all)", text.len())
    }
}

/// Lines escaped, as many as fit in `max` characters together; the last
/// says how many were left out.
fn clip_lines<S: AsRef<str>>(lines: &[S], max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut used = 0;
    for (n, l) in lines.iter().enumerate() {
        let l = escape(l.as_ref());
        let chars = l.chars().count();
        if used + chars > max {
            out.push(format!("… ({} more lines)", lines.len() - n));
            break;
        }
        used += chars;
        out.push(l);
    }
    out
}

/// The timeline's time of an event in step `step` at virtual (or real)
/// time `t`.
pub(crate) fn timeline(step: usize, t: Duration) -> Duration {
    t + TRACE_STEP_PACE * u32::try_from(step).unwrap_or(u32::MAX)
}

/// The trace's end of a tap on one of a Tick's streams: each whole frame
/// that passes one way ([`Recorder::tap`]).
pub(crate) struct Frames {
    recorder: Arc<Recorder>,
    dir: Direction,
}

impl FrameSink for Frames {
    const HOLD_BYTES: usize = FRAME_HOLD_BYTES;

    fn frame(&self, head: &[u8], len: usize) {
        self.recorder.frame(self.dir, head, len);
    }

    /// Under the recorder's order lock (see [`Recorder`]'s `order`).
    fn in_order<R>(&self, f: impl FnOnce() -> R) -> R {
        let _order = tickbox_host::util::lock(&self.recorder.order);
        f()
    }
}

impl Recorder {
    /// A Tick's stdin or stdout with every whole line it carries recorded
    /// as a frame going `dir`; what passes through is not changed.
    pub(crate) fn tap<T>(self: &Arc<Recorder>, inner: T, dir: Direction) -> FrameTap<T, Frames> {
        FrameTap::new(
            inner,
            Frames {
                recorder: self.clone(),
                dir,
            },
        )
    }
}

// ---- reading a trace back (`tickbox test show-trace`) ----

/// A trace as `show-trace` reads it: every string is the file's, so it
/// is carried as [`TickText`] (a trace file is untrusted input: it may
/// have been edited by hand).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceView {
    /// The scenario's name.
    pub scenario: TickText,
    /// Its file.
    pub file: TickText,
    /// The seed, on virtual time.
    pub seed: Option<u64>,
    /// How it ended.
    pub outcome: TickText,
    /// Why the trace was cut, if it was.
    pub cut: Option<TickText>,
    /// The screen's size when the trace began.
    pub size: (u64, u64),
    /// The start (step 0) and each step, in order.
    pub steps: Vec<TraceStep>,
}

/// One step of a trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TraceStep {
    /// Its number (0: the start).
    pub step: u64,
    /// What it did.
    pub action: TickText,
    /// `passed`, `failed`, ...
    pub outcome: TickText,
    /// What it expected (for a failed step).
    pub expected: TickText,
    /// What was there (for a failed step).
    pub found: Vec<TickText>,
    /// The screen after it, row by row.
    pub screen: Vec<TickText>,
    /// The state after it, as JSON text.
    pub state: Option<TickText>,
    /// The protocol frames during it: direction and text.
    pub frames: Vec<(TickText, TickText)>,
}

impl TraceView {
    /// What the trace is of, as `show-trace` prints it first (every
    /// string escaped: `TickText`'s `Display`).
    pub fn heading(&self) -> Vec<String> {
        let seed = self.seed.map_or("real time".to_string(), |s| {
            format!("virtual time, seed {s}")
        });
        vec![
            format!("trace of {} ({})", self.scenario, self.file),
            format!(
                "outcome: {}; {seed}; screen {}x{}; {} records",
                self.outcome,
                self.size.0,
                self.size.1,
                self.steps.len()
            ),
        ]
    }
}

impl TraceStep {
    /// The step as `show-trace` prints it, every string escaped.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![
            String::new(),
            format!("step {}: {} — {}", self.step, self.action, self.outcome),
        ];
        if !self.expected.is_empty() {
            out.push(format!("  expected: {}", self.expected));
        }
        out.extend(self.found.iter().map(|f| format!("  found: {f}")));
        if !self.screen.is_empty() {
            out.push("  screen:".into());
            out.extend(self.screen.iter().map(|r| format!("    |{r}")));
        }
        if let Some(state) = &self.state {
            out.push(format!("  state: {state}"));
        }
        if !self.frames.is_empty() {
            out.push(format!("  frames ({}):", self.frames.len()));
            out.extend(
                self.frames
                    .iter()
                    .map(|(dir, text)| format!("    {dir}: {text}")),
            );
        }
        out
    }
}

/// Why a file is not a trace: the rule it breaks, never its content.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The first line is not an asciicast v2 header with a `tickbox` key.
    #[error("line 1 is not the header of a tickbox trace (asciicast v2 with a \"tickbox\" object, trace format {TRACE_FORMAT})")]
    Header,
    /// An event line is not `[time, code, data]`.
    #[error("line {0} is not an asciicast event [time, code, data]")]
    Event(usize),
    /// A tickbox record is not a JSON object with a known `kind`.
    #[error(
        "line {0} is not a tickbox record (a JSON object with a \"kind\", encoded as a string)"
    )]
    Record(usize),
}

/// Reads a trace's text (already bounded by [`MAX_TRACE_BYTES`]).
pub fn parse(text: &str) -> Result<TraceView, TraceError> {
    let mut lines = text.lines().enumerate();
    let header: Value = lines
        .next()
        .and_then(|(_, l)| serde_json::from_str(l).ok())
        .ok_or(TraceError::Header)?;
    let meta = header
        .get("tickbox")
        .filter(|_| header.get("version") == Some(&json!(2)))
        .filter(|m| m.get("trace") == Some(&json!(TRACE_FORMAT)))
        .ok_or(TraceError::Header)?;
    let s = |v: &Value, key: &str| TickText::new(v.get(key).and_then(Value::as_str).unwrap_or(""));
    let mut view = TraceView {
        scenario: s(meta, "scenario"),
        file: s(meta, "file"),
        seed: meta.get("seed").and_then(Value::as_u64),
        outcome: s(meta, "outcome"),
        cut: meta.get("cut").and_then(Value::as_str).map(TickText::new),
        size: (
            header.get("width").and_then(Value::as_u64).unwrap_or(0),
            header.get("height").and_then(Value::as_u64).unwrap_or(0),
        ),
        steps: Vec::new(),
    };
    let mut frames = Vec::new();
    for (n, line) in lines {
        let n = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        let event: Value = serde_json::from_str(line).map_err(|_| TraceError::Event(n))?;
        let (Some(_), Some(code), Some(data)) = (
            event.get(0).and_then(Value::as_f64),
            event.get(1).and_then(Value::as_str),
            event.get(2),
        ) else {
            return Err(TraceError::Event(n));
        };
        if code != TRACE_CODE {
            // Screens, markers and resizes are for players.
            continue;
        }
        let record: Value = data
            .as_str()
            .and_then(|d| serde_json::from_str(d).ok())
            .filter(Value::is_object)
            .ok_or(TraceError::Record(n))?;
        let texts = |key: &str| -> Vec<TickText> {
            record
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| TickText::new(v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default()
        };
        match record.get("kind").and_then(Value::as_str) {
            Some("frame") => {
                frames.push((s(&record, "dir"), s(&record, "text")));
            }
            Some("step") => view.steps.push(TraceStep {
                step: record.get("step").and_then(Value::as_u64).unwrap_or(0),
                action: s(&record, "action"),
                outcome: s(&record, "outcome"),
                expected: s(&record, "expected"),
                found: texts("found"),
                screen: texts("screen"),
                state: record
                    .get("state")
                    .and_then(Value::as_str)
                    .map(TickText::new),
                frames: std::mem::take(&mut frames),
            }),
            Some("cut") => {
                view.cut.get_or_insert_with(|| s(&record, "why"));
            }
            _ => return Err(TraceError::Record(n)),
        }
    }
    // Frames after the last step (a session that ended mid-step).
    if !frames.is_empty() {
        view.steps.push(TraceStep {
            step: view.steps.last().map_or(0, |s| s.step + 1),
            action: TickText::new("(frames after the last step)"),
            frames,
            ..TraceStep::default()
        });
    }
    Ok(view)
}

/// A file name for a scenario's trace: its name with everything but ASCII
/// letters, digits, `-`, `_` and `.` replaced by `_` (never a leading
/// `.`, never empty, at most 100 characters), and [`TRACE_SUFFIX`].
pub fn file_name(scenario: &str) -> String {
    let mut name: String = scenario
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if name.starts_with('.') {
        name.replace_range(0..1, "_");
    }
    if name.is_empty() {
        name.push_str("scenario");
    }
    name + TRACE_SUFFIX
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a frame whose method is `tick/update` counts, wherever the
    /// words appear otherwise.
    #[test]
    fn updates_are_told_by_their_method() {
        let update = br#"{"jsonrpc":"2.0","method":"tick/update","params":{"seq":1,"data":{}}}"#;
        assert!(is_update(update));
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"result":{"note":"tick/update"}}"#[..],
            br#"{"jsonrpc":"2.0","method":"tick/log","params":{"m":"tick/update"}}"#,
            br#"not json tick/update"#,
        ] {
            assert!(!is_update(other), "{}", String::from_utf8_lossy(other));
        }
    }

    fn summary() -> Summary<'static> {
        Summary {
            scenario: "s",
            file: "s.scenario.toml",
            seed: Some(0),
            outcome: "passed",
            steps: 1,
            passed_steps: 1,
        }
    }

    fn screen(text: &[u8]) -> vt100::Screen {
        let nz = |n| std::num::NonZeroU16::new(n).unwrap();
        let mut p = vt100::Parser::new(nz(4), nz(20), 0);
        p.process(text);
        p.screen().clone()
    }

    #[test]
    fn a_trace_round_trips_escaped_and_bounded_per_frame() {
        let rec = Recorder::new(20, 4);
        rec.marker("step 1: keys \u{1b}]0;x\u{7}");
        let mut tap = rec.tap(Vec::<u8>::new(), Direction::FromTick);
        tap.see(b"{\"a\":\"\x1b]52;c;x\x07\"}\n{\"b\"");
        tap.see(b":1}\n");
        let long = vec![b'x'; FRAME_HOLD_BYTES * 3];
        tap.see(&long);
        tap.see(b"\n");
        rec.screen(&screen(b"hello\x1b]0;title\x07"));
        rec.at(Duration::from_millis(1500));
        rec.step(
            &StepRecord {
                step: 1,
                action: "keys",
                outcome: "passed",
                expected: "",
                found: &[],
            },
            &TickText::from("hello\n\u{202e}x"),
            Some(&json!({"n": "\u{9b}31m"})),
            true,
        );
        let t = rec.finish(&summary());
        assert!(t.cut.is_none());
        assert!(
            !t.text
                .chars()
                .any(|c| tickbox_protocol::text::is_unsafe(c) && c != '\n'),
            "nothing unsafe raw: {}",
            t.text
        );
        let v = parse(&t.text).unwrap();
        assert_eq!(v.steps.len(), 1);
        let s = &v.steps[0];
        assert_eq!(s.frames.len(), 3);
        assert_eq!(s.frames[0].1.wire(), "{\"a\":\"\\x1b]52;c;x\\x07\"}");
        assert_eq!(s.frames[1].1.wire(), "{\"b\":1}");
        assert!(
            s.frames[2]
                .1
                .wire()
                .ends_with(&format!(" … ({} bytes in all)", FRAME_HOLD_BYTES * 3)),
            "a long frame is clipped and says so"
        );
        assert_eq!(s.screen[1].wire(), "\\u{202e}x");
        assert_eq!(s.state.as_ref().unwrap().wire(), "{\"n\":\"\\u009b31m\"}");
        // The screen event is the renderer's: no OSC from the model.
        assert!(!t.text.contains("\\u001b]"), "{}", t.text);
        assert!(t.text.lines().nth(1).unwrap().starts_with("[0.0,\"m\","));
        assert!(t.text.contains("[1.5,\"t\","), "{}", t.text);
    }

    #[test]
    fn a_chatty_tick_fills_the_trace_to_its_bound_and_the_last_step_still_fits() {
        let rec = Recorder::new(20, 4);
        let mut tap = rec.tap(Vec::<u8>::new(), Direction::FromTick);
        let frame = format!("{{\"jsonrpc\":\"2.0\",\"pad\":\"{}\"}}\n", "y".repeat(1000));
        for _ in 0..(MAX_TRACE_BYTES / 1000 + 10) {
            tap.see(frame.as_bytes());
        }
        let big_screen = "z".repeat(MAX_TRACE_SCREEN_CHARS * 2);
        rec.step(
            &StepRecord {
                step: 3,
                action: "expect",
                outcome: "failed",
                expected: "something",
                found: &["what was there".to_string()],
            },
            &TickText::from(big_screen.as_str()),
            None,
            true,
        );
        let t = rec.finish(&summary());
        assert!(t.text.len() <= MAX_TRACE_BYTES, "{}", t.text.len());
        let why = t.cut.expect("cut");
        assert!(why.contains("MAX_TRACE_BYTES"), "{why}");
        let v = parse(&t.text).unwrap();
        assert!(v.cut.is_some());
        let last = v
            .steps
            .iter()
            .find(|s| s.step == 3)
            .expect("the last step is kept");
        assert_eq!(last.outcome.wire(), "failed");
        assert!(last.screen.last().unwrap().wire().starts_with("… ("));
        // The positive control: a few frames are all kept, nothing cut.
        let rec = Recorder::new(20, 4);
        let mut tap = rec.tap(Vec::<u8>::new(), Direction::ToTick);
        for _ in 0..100 {
            tap.see(frame.as_bytes());
        }
        let t = rec.finish(&summary());
        assert!(t.cut.is_none());
        assert_eq!(t.text.lines().count(), 101);
    }

    #[test]
    fn files_that_are_not_traces_are_refused_by_rule_without_their_content() {
        for (text, want) in [
            ("", TraceError::Header),
            (
                "{\"version\":2,\"width\":1,\"height\":1}",
                TraceError::Header,
            ),
            (
                "{\"version\":2,\"tickbox\":{\"trace\":1}}\n[1,\"o\"]\n",
                TraceError::Event(2),
            ),
            (
                "{\"version\":2,\"tickbox\":{\"trace\":1}}\n[1,\"t\",\"secret\\u001b]0;x\"]\n",
                TraceError::Record(2),
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e, want);
            assert!(!e.to_string().contains("secret"));
        }
    }

    #[test]
    fn trace_file_names_are_sanitised() {
        assert_eq!(file_name("counter"), "counter.trace.cast");
        assert_eq!(file_name("../x/\u{1b}]0;y"), "_._x___0_y.trace.cast");
        assert_eq!(file_name(""), "scenario.trace.cast");
        assert_eq!(file_name(&"a".repeat(300)).len(), 100 + TRACE_SUFFIX.len());
    }
}
