//! Recording a live session as a scenario file.
//!
//! A [`Recorder`] watches one published instance (it is the instance's
//! [`tickbox_host::live::Observer`]) and turns what happens into scenario steps:
//!
//! - **keys** from any attached view: the raw bytes are decoded into the
//!   scenario's key names ([`decode`]): characters typed one at a time become
//!   `key` steps, several at once `text` (or `keys` when named keys are
//!   among them); bytes with no name (an unknown escape sequence, a control
//!   character such as `\x1c`) are kept in a `text` step with TOML escapes,
//!   and bytes that are not UTF-8 in a `bytes` step (hex). Whatever the
//!   form, replaying a step sends exactly the bytes that were typed. Key
//!   frames less than [`KEY_MERGE`] apart are one step;
//! - **resizes** of the Tick's terminal (the smallest view's size) as
//!   `resize` steps, and its size at the start as `[tick] size`;
//! - **tool calls** made to the instance through the live socket
//!   (`tickbox call @NAME`, mutating ones included) as `call` steps that
//!   expect the recorded outcome: exactly the result (`result`), or the
//!   error code (`error`). TOML has no null: a result whose objects hold null
//!   members is recorded as `result_subset` without them, and a result with
//!   null elsewhere (or an unknown outcome) is recorded with no expectation
//!   and a comment. Calls the Tick could not have executed (refused by the
//!   host before sending, or bound to an older catalog revision) are not
//!   recorded;
//! - **marks** the person sets (the view's mark chord) as `expect_screen`
//!   snapshot steps: the screen at that moment is written next to the
//!   scenario as `STEM.mark-N.snap`, trimmed as a run with
//!   [`super::RunOptions::update`] trims it.
//!
//! **Time.** A wasm component is recorded as `deterministic = true`: the
//! real time that passed between two events becomes an `advance` step, so
//! the replay moves the guest's virtual clock (and fires its timers) as the
//! session did, without waiting. A native Tick or a preview-1 module
//! (`deterministic = false`) replays on real time: steps follow each other
//! as fast as the Tick takes them, and a mark's expectation is retried for
//! up to [`REAL_TIME_MARK_TIMEOUT`], so it waits for the screen the person
//! saw rather than for a fixed time.
//!
//! Everything is bounded: [`MAX_RECORDED_STEPS`] steps, [`MAX_RECORD_BYTES`]
//! of scenario text (so the file loads), [`MAX_MARKS`] marks holding at
//! most [`MAX_SNAPSHOTS_BYTES`] together, [`MAX_RECORDED_VALUE`] bytes for
//! one call's args or result. Past a bound, recording stops (or the one
//! value is left out) and the file says so in a comment. The file is
//! written atomically ([`Recorder::save`]; a temporary file renamed over
//! it), snapshots first.

use super::diff;
use super::keys;
use super::model::{self, Action};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tickbox_host::session::CallOutcome;
use tickbox_host::util::lock;
use tickbox_protocol::TickText;
use tickbox_sandbox::grants::GrantSpec;

/// Most steps a recording holds (advances included).
pub const MAX_RECORDED_STEPS: usize = 5_000;
/// Largest scenario text a recording writes: what `tickbox test` reads.
pub const MAX_RECORD_BYTES: usize = model::MAX_SCENARIO_BYTES as usize;
/// Most marks (snapshots) in one recording.
pub const MAX_MARKS: usize = 100;
/// Most snapshot bytes one recording keeps, all marks together.
pub const MAX_SNAPSHOTS_BYTES: usize = 16 * 1024 * 1024;
/// Largest rendering of one call's args or expected result.
pub const MAX_RECORDED_VALUE: usize = 64 * 1024;
/// Key frames closer together than this are one step.
pub const KEY_MERGE: Duration = Duration::from_millis(10);
/// Timeout of a mark's expectation when the replay runs on real time.
pub const REAL_TIME_MARK_TIMEOUT: &str = "10s";
/// Room kept for the closing comments when the step text is bounded.
const FOOTER_RESERVE: usize = 1024;

/// How a recorded Tick's time is replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordTime {
    /// A wasm component: virtual time, with `advance` steps for the time
    /// that passed between events.
    Virtual,
    /// A preview-1 module: `deterministic = false`, real time.
    RealWasm,
    /// A native Tick: real time (the `deterministic` key is not written).
    Native,
}

/// The `[tick]` table of a recording: how the live Tick was started.
#[derive(Debug, Clone)]
pub struct RecordTick {
    /// An executable or a `.wasm` file (absolute).
    pub path: Option<PathBuf>,
    /// A native command line.
    pub command: Vec<String>,
    /// Where a native command ran (absolute).
    pub cwd: Option<PathBuf>,
    /// Every grant and bound the session had (the one grant type: `dir`
    /// host paths and `http_ca` absolute), written whole so a replay runs
    /// under the same walls.
    pub grants: GrantSpec,
    /// The Tick's terminal size when recording started.
    pub size: (u16, u16),
    /// How time is replayed.
    pub time: RecordTime,
}

/// Why a recording could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the recording {path}: {source}")]
pub struct RecordError {
    /// The file that could not be written.
    pub path: PathBuf,
    /// Why.
    pub source: std::io::Error,
}

/// One key as decoded from a view's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A key with a name (`enter`, `up`, `ctrl-c`, `alt-x`).
    Name(String),
    /// A printable character.
    Char(char),
    /// Bytes with no name: an unknown escape sequence, a control character
    /// without a name, a C1 or bidi character, or bytes that are not UTF-8.
    Raw(Vec<u8>),
}

/// The named keys that start with ESC, longest first within a prefix.
const ESC_NAMES: &[&str] = &[
    "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12", "pageup", "pagedown", "insert", "delete",
    "backtab", "up", "down", "right", "left", "home", "end", "f1", "f2", "f3", "f4",
];

/// Decodes terminal input into keys; encoding the tokens back
/// ([`keys::encode`] for names and characters, the bytes of `Raw`) gives
/// exactly `bytes`.
pub fn decode(bytes: &[u8]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let (token, len) = decode_one(&bytes[i..]);
        i += len;
        // Raw bytes in a row stay one token.
        match (out.last_mut(), token) {
            (Some(Token::Raw(prev)), Token::Raw(more))
                if std::str::from_utf8(prev).is_err() == std::str::from_utf8(&more).is_err() =>
            {
                prev.extend(more)
            }
            (_, t) => out.push(t),
        }
    }
    out
}

fn decode_one(b: &[u8]) -> (Token, usize) {
    let first = b[0];
    match first {
        0x1b => {
            let rest = &b[1..];
            let named = ESC_NAMES
                .iter()
                .filter_map(|n| keys::encode(n).ok().map(|seq| (*n, seq)))
                .filter(|(_, seq)| b.starts_with(seq))
                .max_by_key(|(_, seq)| seq.len());
            if let Some((name, seq)) = named {
                return (Token::Name(name.to_string()), seq.len());
            }
            match rest.first() {
                None => (Token::Name("esc".into()), 1),
                // An escape sequence without a name: CSI or SS3, kept whole.
                Some(b'[') => {
                    let end = rest[1..]
                        .iter()
                        .position(|c| (0x40..=0x7e).contains(c))
                        .map(|p| p + 3);
                    match end {
                        Some(n) if rest[1..n - 2].iter().all(|c| (0x20..=0x3f).contains(c)) => {
                            (Token::Raw(b[..n].to_vec()), n)
                        }
                        _ => (Token::Name("esc".into()), 1),
                    }
                }
                Some(b'O') if rest.len() >= 2 => (Token::Raw(b[..3].to_vec()), 3),
                Some(_) => match decode_one(rest) {
                    (Token::Char(c), n) => (Token::Name(format!("alt-{c}")), n + 1),
                    (Token::Name(name), n) if !name.starts_with("alt-") && n == 1 => {
                        (Token::Name(format!("alt-{name}")), 2)
                    }
                    _ => (Token::Name("esc".into()), 1),
                },
            }
        }
        b'\r' => (Token::Name("enter".into()), 1),
        b'\t' => (Token::Name("tab".into()), 1),
        0x7f => (Token::Name("backspace".into()), 1),
        0x01..=0x1a => (
            Token::Name(format!("ctrl-{}", (first - 1 + b'a') as char)),
            1,
        ),
        0x00 | 0x1c..=0x1f => (Token::Raw(vec![first]), 1),
        _ => {
            let len = match first {
                0x20..=0x7e => 1,
                0xc2..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf4 => 4,
                _ => return (Token::Raw(vec![first]), 1),
            };
            match b.get(..len).and_then(|s| std::str::from_utf8(s).ok()) {
                Some(s) => {
                    let c = s.chars().next().unwrap_or(' ');
                    if tickbox_host::text::is_unsafe(c) {
                        (Token::Raw(s.as_bytes().to_vec()), len)
                    } else {
                        (Token::Char(c), len)
                    }
                }
                None => (Token::Raw(vec![first]), 1),
            }
        }
    }
}

pub use tickbox_host::text::toml_string;

fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        toml_string(k)
    }
}

/// A JSON value as a one-line TOML value; `None` when TOML cannot hold it
/// (null, an integer above `i64::MAX`). Checked by parsing it back.
pub fn toml_value(v: &Value) -> Option<String> {
    let text = render_value(v)?;
    let back: toml::Table = toml::from_str(&format!("v = {text}")).ok()?;
    let back = serde_json::to_value(back.get("v")?).ok()?;
    (back == *v).then_some(text)
}

fn render_value(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) if n.is_f64() && f.is_finite() => format!("{f:?}"),
            _ => return None,
        },
        Value::String(s) => toml_string(s),
        Value::Array(items) => {
            let parts: Option<Vec<String>> = items.iter().map(render_value).collect();
            format!("[{}]", parts?.join(", "))
        }
        Value::Object(map) if map.is_empty() => "{}".to_string(),
        Value::Object(map) => {
            let parts: Option<Vec<String>> = map
                .iter()
                .map(|(k, v)| render_value(v).map(|v| format!("{} = {v}", toml_key(k))))
                .collect();
            format!("{{ {} }}", parts?.join(", "))
        }
    })
}

/// The value without its objects' null members; `None` when a null sits
/// anywhere else (the value itself, an array element).
fn without_null_members(v: &Value) -> Option<Value> {
    Some(match v {
        Value::Null => return None,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(without_null_members)
                .collect::<Option<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| without_null_members(v).map(|v| (k.clone(), v)))
                .collect::<Option<_>>()?,
        ),
        other => other.clone(),
    })
}

/// The `[[step]]` blocks that replay `bytes`, in order. Each block is
/// checked by parsing it back; a block that would not send exactly its
/// bytes is replaced by a `bytes` step.
pub fn key_steps(bytes: &[u8]) -> Vec<String> {
    let tokens = decode(bytes);
    // Segments: runs of UTF-8 tokens, and runs of non-UTF-8 bytes.
    let mut segments: Vec<(bool, Vec<Token>)> = Vec::new();
    for t in tokens {
        let utf8 = !matches!(&t, Token::Raw(b) if std::str::from_utf8(b).is_err());
        match segments.last_mut() {
            Some((u, list)) if *u == utf8 => list.push(t),
            _ => segments.push((utf8, vec![t])),
        }
    }
    let mut out = Vec::new();
    for (utf8, list) in segments {
        let raw: Vec<u8> = list.iter().flat_map(token_bytes).collect();
        let block = if !utf8 {
            format!("[[step]]\nbytes = \"{}\"\n", hex(&raw))
        } else {
            let single = |t: &Token| match t {
                Token::Name(n) => Some(n.clone()),
                Token::Char(c) => Some(c.to_string()),
                Token::Raw(_) => None,
            };
            let text = String::from_utf8_lossy(&raw).into_owned();
            match list.as_slice() {
                [one] if single(one).is_some() => format!(
                    "[[step]]\nkey = {}\n",
                    toml_string(&single(one).unwrap_or_default())
                ),
                many if many.iter().all(|t| matches!(t, Token::Char(_))) => {
                    format!("[[step]]\ntext = {}\n", toml_string(&text))
                }
                many if many.len() <= keys::MAX_KEYS
                    && many.iter().all(|t| single(t).is_some()) =>
                {
                    let names: Vec<String> = many
                        .iter()
                        .filter_map(single)
                        .map(|n| toml_string(&n))
                        .collect();
                    format!("[[step]]\nkeys = [{}]\n", names.join(", "))
                }
                _ => format!("[[step]]\ntext = {}\n", toml_string(&text)),
            }
        };
        if replays(&block).as_deref() == Some(raw.as_slice()) {
            out.push(block);
        } else {
            out.push(format!("[[step]]\nbytes = \"{}\"\n", hex(&raw)));
        }
    }
    out
}

fn token_bytes(t: &Token) -> Vec<u8> {
    match t {
        Token::Name(n) => keys::encode(n).unwrap_or_default(),
        Token::Char(c) => c.to_string().into_bytes(),
        Token::Raw(b) => b.clone(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes one key step sends, by the scenario parser itself.
fn replays(block: &str) -> Option<Vec<u8>> {
    let text = format!("[tick]\npath = \"t.wasm\"\n{block}");
    let s = model::parse(&text, Path::new("check.scenario.toml"), &Default::default()).ok()?;
    match &s.steps.first()?.action {
        Action::Keys { bytes, .. } => Some(bytes.clone()),
        _ => None,
    }
}

/// A duration as a scenario writes it: whole milliseconds.
fn duration_text(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// Records one live session; see the module docs.
#[derive(Debug)]
pub struct Recorder {
    file: PathBuf,
    header: String,
    time: RecordTime,
    inner: Mutex<Inner>,
    /// Notified when a view leaves, so the host saves what it has.
    save_wanted: tokio::sync::Notify,
}

#[derive(Debug)]
struct Inner {
    /// When the last step happened (for the next `advance`).
    last: Instant,
    steps: Vec<String>,
    bytes: usize,
    /// Keys not yet made into steps: bytes, first and last arrival.
    pending: Vec<u8>,
    pending_at: Option<(Instant, Instant)>,
    /// Marks: snapshot name and screen.
    marks: Vec<(String, String)>,
    snapshot_bytes: usize,
    notes: Vec<String>,
    /// A bound was reached: nothing more is recorded.
    full: bool,
    calls_skipped: usize,
}

impl Recorder {
    /// Starts recording to `file` (written by [`Recorder::save`]).
    pub fn new(file: PathBuf, tick: &RecordTick) -> Recorder {
        Recorder {
            header: header(&file, tick),
            file,
            time: tick.time,
            inner: Mutex::new(Inner {
                last: Instant::now(),
                steps: Vec::new(),
                bytes: 0,
                pending: Vec::new(),
                pending_at: None,
                marks: Vec::new(),
                snapshot_bytes: 0,
                notes: Vec::new(),
                full: false,
                calls_skipped: 0,
            }),
            save_wanted: tokio::sync::Notify::new(),
        }
    }

    /// The scenario file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Steps recorded so far (pending keys not counted).
    pub fn steps(&self) -> usize {
        lock(&self.inner).steps.len()
    }

    /// For status bars: `REC N mark(s)`.
    pub fn status(&self) -> String {
        format!("REC {} mark(s)", lock(&self.inner).marks.len())
    }

    /// Resolves when a view has left since the last call: time to save.
    pub async fn save_wanted(&self) {
        self.save_wanted.notified().await
    }

    /// Keys a view sent to the Tick.
    pub fn keys(&self, bytes: &[u8]) {
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        if inner.full {
            return;
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let merge = match inner.pending_at {
                Some((_, last)) => {
                    now.duration_since(last) < KEY_MERGE && inner.pending.len() < keys::MAX_TEXT
                }
                None => false,
            };
            if !merge {
                self.flush_keys(&mut inner);
                inner.pending_at = Some((now, now));
            }
            let room = keys::MAX_TEXT - inner.pending.len();
            let take = rest.len().min(room);
            inner.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if let Some((first, _)) = inner.pending_at {
                inner.pending_at = Some((first, now));
            }
            if !rest.is_empty() {
                // Full: the next chunk starts a step of its own.
                self.flush_keys(&mut inner);
                inner.pending_at = Some((now, now));
            }
        }
    }

    /// The Tick's terminal was resized.
    pub fn resized(&self, cols: u16, rows: u16) {
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        self.flush_keys(&mut inner);
        self.event(
            &mut inner,
            now,
            now,
            format!("[[step]]\nresize = [{cols}, {rows}]\n"),
        );
    }

    /// A call made through the live socket, sent at `started`, ended with `outcome`.
    pub fn called(&self, tool: &str, args: &Value, started: Instant, outcome: &CallOutcome) {
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        self.flush_keys(&mut inner);
        let Some(args_text) = toml_value(args).filter(|t| t.len() <= MAX_RECORDED_VALUE) else {
            inner.calls_skipped += 1;
            let note = format!(
                "# call {} not recorded: its args hold null or are over {MAX_RECORDED_VALUE} bytes in TOML\n",
                toml_string(tool)
            );
            self.event(&mut inner, started, now, note);
            return;
        };
        let mut block = format!(
            "[[step]]\ncall = {}\nargs = {args_text}\n",
            toml_string(tool)
        );
        match outcome {
            CallOutcome::Ok(result) => {
                let exact = toml_value(result).filter(|t| t.len() <= MAX_RECORDED_VALUE);
                let subset = || {
                    without_null_members(result)
                        .and_then(|v| toml_value(&v))
                        .filter(|t| t.len() <= MAX_RECORDED_VALUE)
                };
                match (exact, subset()) {
                    (Some(t), _) => block.push_str(&format!("result = {t}\n")),
                    (None, Some(t)) => block.push_str(&format!(
                        "# TOML has no null: the result's null members are left out\nresult_subset = {t}\n"
                    )),
                    (None, None) => block.push_str(&format!(
                        "# the result is not expected: it holds null outside an object member, or is over {MAX_RECORDED_VALUE} bytes in TOML\n"
                    )),
                }
            }
            CallOutcome::Failed { error, .. } => {
                block.push_str(&format!("error = {}\n", error.code));
            }
            CallOutcome::Unknown(why) => block.push_str(&format!(
                "# the outcome was unknown ({}); no expectation\n",
                toml_string(&why.to_string())
            )),
        }
        self.event(&mut inner, started, now, block);
    }

    /// The person set a mark: `screen` is what the Tick's screen showed.
    pub fn mark(&self, screen: &str) {
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        self.flush_keys(&mut inner);
        if inner.full {
            return;
        }
        let n = inner.marks.len() + 1;
        let snapshot = diff::normalize_screen(screen);
        if inner.marks.len() >= MAX_MARKS {
            inner.notes.push(format!(
                "a mark was left out: {MAX_MARKS} marks is the limit"
            ));
            return;
        }
        if snapshot.len() as u64 > super::run::MAX_SNAPSHOT_BYTES
            || inner.snapshot_bytes + snapshot.len() > MAX_SNAPSHOTS_BYTES
        {
            inner.notes.push(format!(
                "mark {n} was left out: its screen ({} bytes) is over the snapshot limit ({} bytes each, {MAX_SNAPSHOTS_BYTES} in all)",
                snapshot.len(),
                super::run::MAX_SNAPSHOT_BYTES
            ));
            return;
        }
        let name = format!("mark-{n}");
        let mut block =
            format!("[[step]]\nname = \"mark {n}\"\nexpect_screen = {{ snapshot = \"{name}\" }}\n");
        if self.time != RecordTime::Virtual {
            block.push_str(&format!("timeout = \"{REAL_TIME_MARK_TIMEOUT}\"\n"));
        }
        if self.event(&mut inner, now, now, block) {
            inner.snapshot_bytes += snapshot.len();
            inner.marks.push((name, snapshot));
        }
    }

    /// A view left: the host should save.
    pub fn view_left(&self) {
        self.save_wanted.notify_one();
    }

    /// Makes the pending keys into steps.
    fn flush_keys(&self, inner: &mut Inner) {
        let Some((at, last)) = inner.pending_at.take() else {
            return;
        };
        let bytes = std::mem::take(&mut inner.pending);
        let blocks = key_steps(&bytes);
        let mut first = true;
        for b in blocks {
            // The advance goes before the first block only.
            let when = if first { at } else { inner.last };
            first = false;
            if !self.event(inner, when, last, b) {
                return;
            }
        }
    }

    /// Adds `block` as happening at `at` (preceded by an `advance` on
    /// virtual time) and ending at `end`. False when a bound stopped it.
    fn event(&self, inner: &mut Inner, at: Instant, end: Instant, block: String) -> bool {
        if inner.full {
            return false;
        }
        let mut blocks = Vec::new();
        if self.time == RecordTime::Virtual {
            let mut gap = at.saturating_duration_since(inner.last);
            // Whole milliseconds; a span over the advance limit is split.
            let max = tickbox_sandbox::virtual_time::MAX_ADVANCE;
            while gap >= Duration::from_millis(1) {
                let d = Duration::from_millis(gap.min(max).as_millis() as u64);
                blocks.push(format!("[[step]]\nadvance = \"{}\"\n", duration_text(d)));
                gap -= d;
            }
        }
        blocks.push(block);
        let size: usize = blocks.iter().map(|b| b.len() + 1).sum();
        let budget = MAX_RECORD_BYTES.saturating_sub(self.header.len() + FOOTER_RESERVE);
        if inner.steps.len() + blocks.len() > MAX_RECORDED_STEPS || inner.bytes + size > budget {
            inner.full = true;
            inner.notes.push(format!(
                "recording stopped after {} steps: the limit is {MAX_RECORDED_STEPS} steps and {MAX_RECORD_BYTES} bytes of scenario",
                inner.steps.len()
            ));
            return false;
        }
        inner.bytes += size;
        inner.steps.extend(blocks);
        inner.last = end.max(at);
        true
    }

    /// The scenario text as it stands, pending keys included.
    pub fn text(&self) -> String {
        let mut inner = lock(&self.inner);
        self.flush_keys(&mut inner);
        let mut out = self.header.clone();
        for n in &inner.notes {
            out.push_str(&format!("# note: {n}\n"));
        }
        if inner.calls_skipped > 0 {
            out.push_str(&format!(
                "# note: {} call(s) could not be recorded (see the comments below)\n",
                inner.calls_skipped
            ));
        }
        for s in &inner.steps {
            out.push('\n');
            out.push_str(s);
        }
        out
    }

    /// Writes the snapshots, then the scenario, each atomically (a
    /// temporary file in the same directory, renamed over the target).
    /// Returns the files written.
    pub fn save(&self) -> Result<Vec<PathBuf>, RecordError> {
        let text = self.text();
        let marks = lock(&self.inner).marks.clone();
        let mut written = Vec::new();
        for (name, screen) in marks {
            let path = model::snapshot_path(&self.file, &name);
            write_atomically(&path, screen.as_bytes())?;
            written.push(path);
        }
        write_atomically(&self.file, text.as_bytes())?;
        written.push(self.file.clone());
        Ok(written)
    }
}

impl tickbox_host::live::Observer for Recorder {
    fn keys(&self, bytes: &[u8]) {
        self.keys(bytes)
    }
    fn resized(&self, cols: u16, rows: u16) {
        self.resized(cols, rows)
    }
    fn called(&self, tool: &str, args: &Value, started: Instant, outcome: &CallOutcome) {
        self.called(tool, args, started, outcome)
    }
    fn mark(&self, screen: &TickText) {
        // A snapshot file holds the screen as drawn: it is compared byte
        // for byte later, and shown only through the diff's escaping.
        self.mark(screen.wire())
    }
    fn view_left(&self) {
        self.view_left()
    }
    fn status(&self) -> Option<String> {
        Some(self.status())
    }
}

/// Writes `bytes` to a fresh temporary file next to `path` and renames it
/// over `path`, so a reader sees the old file or the new one, never half.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RecordError> {
    use std::io::Write;
    let err = |source| RecordError {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}

fn header(file: &Path, tick: &RecordTick) -> String {
    let mut h = format!(
        "# Recorded by `tickbox run --record` at {}; replay with `tickbox test {}`.\n",
        tickbox_host::util::rfc3339(std::time::SystemTime::now()),
        file.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    h.push_str(match tick.time {
        RecordTime::Virtual => "# Time: virtual on replay; each `advance` is the real time that passed between two events.\n",
        RecordTime::RealWasm | RecordTime::Native => "# Time: real on replay; steps run as fast as the Tick takes them, marks wait for their screen.\n",
    });
    h.push_str(
        "# Calls expect the recorded result exactly; loosen to result_subset where it varies.\n",
    );
    // A replay is bounded by its command line: say what it must allow.
    let g = &tick.grants;
    if !g.dir.is_empty() || g.http_ca.is_some() {
        h.push_str("# Its grants name host paths: replay with `--grant-root DIR` for a directory holding them.\n");
    }
    let reads: Vec<String> = g
        .env
        .iter()
        .filter(|e| !e.contains('='))
        .map(|e| format!("--allow-env {}", tickbox_host::text::escape(e)))
        .collect();
    if !reads.is_empty() {
        h.push_str(&format!(
            "# It reads the host's environment: replay with {}.\n",
            reads.join(" ")
        ));
    }
    h.push_str("\n[tick]\n");
    let path = |p: &Path| toml_string(&p.to_string_lossy());
    let list = |items: &[String]| {
        items
            .iter()
            .map(|s| toml_string(s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(p) = &tick.path {
        h.push_str(&format!("path = {}\n", path(p)));
    }
    if !tick.command.is_empty() {
        h.push_str(&format!("command = [{}]\n", list(&tick.command)));
    }
    if let Some(c) = &tick.cwd {
        h.push_str(&format!("cwd = {}\n", path(c)));
    }
    // Every key of the grant type, in its own order, from its serialized
    // form: a key added to `GrantSpec` is recorded without a change here.
    if let Ok(Value::Object(fields)) = serde_json::to_value(g) {
        for key in GrantSpec::KEYS {
            match fields.get(*key) {
                Some(Value::Array(items)) if !items.is_empty() => {
                    let items: Vec<String> = items
                        .iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect();
                    h.push_str(&format!("{key} = [{}]\n", list(&items)));
                }
                Some(Value::String(v)) => h.push_str(&format!("{key} = {}\n", toml_string(v))),
                _ => {}
            }
        }
    }
    h.push_str(&format!("size = [{}, {}]\n", tick.size.0, tick.size.1));
    match tick.time {
        RecordTime::Virtual => h.push_str("deterministic = true\n"),
        RecordTime::RealWasm => h.push_str("deterministic = false\n"),
        RecordTime::Native => {}
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encode_all(tokens: &[Token]) -> Vec<u8> {
        tokens.iter().flat_map(token_bytes).collect()
    }

    #[test]
    fn keys_decode_to_names() {
        let t = decode(b"+\x1b[A\r\x03\x1bx\x1b\x7f\x1b[15~\x1b");
        assert_eq!(
            t,
            vec![
                Token::Char('+'),
                Token::Name("up".into()),
                Token::Name("enter".into()),
                Token::Name("ctrl-c".into()),
                Token::Name("alt-x".into()),
                Token::Name("alt-backspace".into()),
                Token::Name("f5".into()),
                Token::Name("esc".into()),
            ]
        );
        // No name: a mouse report, SS3 cursor keys, ctrl-\, a bidi override, bad UTF-8.
        let t = decode(b"\x1b[<0;3;4M\x1bOA\x1c\xe2\x80\xae\xff");
        assert_eq!(
            t,
            vec![
                Token::Raw(b"\x1b[<0;3;4M\x1bOA\x1c\xe2\x80\xae".to_vec()),
                Token::Raw(vec![0xff]),
            ]
        );
    }

    #[test]
    fn every_byte_string_replays_exactly() {
        // A small PRNG: bytes biased towards ESC, '[', digits and ASCII.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let alphabet = b"\x1b[O~;0123ABCDHFZPQRS+aq\r\t\x7f\x03\x1c\x00 \xc3\xa9\xe2\x80\xae\xff";
        for _ in 0..2000 {
            let len = (x % 12) as usize;
            let mut bytes = Vec::new();
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            x = x.wrapping_add(1);
            assert_eq!(encode_all(&decode(&bytes)), bytes, "{bytes:?}");
            let steps = key_steps(&bytes);
            let replayed: Vec<u8> = steps.iter().flat_map(|s| replays(s).unwrap()).collect();
            assert_eq!(replayed, bytes, "{steps:?}");
        }
    }

    #[test]
    fn key_steps_are_readable() {
        assert_eq!(key_steps(b"+"), ["[[step]]\nkey = \"+\"\n"]);
        assert_eq!(key_steps(b"\x1b[B"), ["[[step]]\nkey = \"down\"\n"]);
        assert_eq!(key_steps(b"hello"), ["[[step]]\ntext = \"hello\"\n"]);
        assert_eq!(
            key_steps(b"ab\r"),
            ["[[step]]\nkeys = [\"a\", \"b\", \"enter\"]\n"]
        );
        assert_eq!(key_steps(b"\x1c"), ["[[step]]\ntext = \"\\u001C\"\n"]);
        assert_eq!(
            key_steps(b"a\xff"),
            ["[[step]]\nkey = \"a\"\n", "[[step]]\nbytes = \"ff\"\n"]
        );
    }

    #[test]
    fn values_render_as_toml_or_not_at_all() {
        let v = json!({"value": 3, "list": [1, 2.5, "x\"y"], "odd key": {"deep": true}, "e": {}});
        let t = toml_value(&v).unwrap();
        assert!(t.contains("\"odd key\" = { deep = true }"), "{t}");
        assert_eq!(toml_value(&json!(null)), None);
        assert_eq!(toml_value(&json!([1, null])), None);
        assert_eq!(toml_value(&json!(u64::MAX)), None);
        assert_eq!(toml_value(&json!(1e300)).as_deref(), Some("1e300"));
        assert_eq!(
            without_null_members(&json!({"a": null, "b": [{"c": null, "d": 1}]})),
            Some(json!({"b": [{"d": 1}]}))
        );
        assert_eq!(without_null_members(&json!({"a": [null]})), None);
        assert_eq!(
            toml_string("a\u{1b}\u{202e}\u{1F600}"),
            "\"a\\u001B\\u202E\u{1F600}\""
        );
    }

    /// A recording grants what the session had (here `/`): replaying it
    /// takes a grant root that covers it.
    fn everywhere() -> super::super::Policy {
        super::super::Policy {
            grant_roots: vec![PathBuf::from("/")],
            ..Default::default()
        }
    }

    fn tick(time: RecordTime) -> RecordTick {
        RecordTick {
            path: Some(PathBuf::from("/x/counter.wasm")),
            command: vec![],
            cwd: None,
            // A directory that exists, so the grant root check can resolve it.
            grants: GrantSpec {
                dir: vec!["/::/data:ro".into()],
                env: vec!["A=b".into()],
                allow_http: vec!["http://127.0.0.1:9".into()],
                max_write: Some("1MiB".into()),
                max_handles: Some("64".into()),
                ..GrantSpec::default()
            },
            size: (80, 24),
            time,
        }
    }

    #[test]
    fn a_recording_parses_as_the_scenario_it_describes() {
        let dir = std::env::temp_dir().join(format!("tickbox-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("r.scenario.toml");
        let r = Recorder::new(file.clone(), &tick(RecordTime::Virtual));
        r.keys(b"+");
        std::thread::sleep(Duration::from_millis(30));
        r.keys(b"+");
        r.resized(100, 40);
        r.mark("Counter: 2   \n\n\n");
        let t0 = Instant::now();
        r.called(
            "increment",
            &json!({}),
            t0,
            &CallOutcome::Ok(json!({"value": 3, "note": null})),
        );
        r.called("bad", &json!({"x": null}), t0, &CallOutcome::Ok(json!(1)));
        let written = r.save().unwrap();
        assert_eq!(written.len(), 2);
        let snap = std::fs::read_to_string(dir.join("r.mark-1.snap")).unwrap();
        assert_eq!(snap, "Counter: 2\n");
        let s = model::load(&file, &everywhere()).unwrap();
        assert_eq!(s.tick.size, Some((80, 24)));
        assert_eq!(s.tick.deterministic, Some(true));
        let kinds: Vec<&str> = s.steps.iter().map(|s| s.action.kind()).collect();
        // key, advance, key, advance?, resize, advance?, mark, advance?, call
        assert_eq!(kinds.first(), Some(&"key"));
        assert!(kinds.contains(&"advance"), "{kinds:?}");
        assert_eq!(
            kinds
                .iter()
                .filter(|k| **k != "advance")
                .copied()
                .collect::<Vec<_>>(),
            ["key", "key", "resize", "expect_screen", "call"]
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("result_subset = { value = 3 }"), "{text}");
        assert!(text.contains("# call \"bad\" not recorded"), "{text}");
        // Every grant and bound is kept, in the grant type's keys.
        for want in [
            "dir = [\"/::/data:ro\"]",
            "allow_http = [\"http://127.0.0.1:9\"]",
            "env = [\"A=b\"]",
            "max_handles = \"64\"",
            "max_write = \"1MiB\"",
            "replay with `--grant-root DIR`",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert_eq!(s.tick.grants.max_write.as_deref(), Some("1MiB"));
        assert_eq!(s.tick.grants.max_handles.as_deref(), Some("64"));
        assert!(!dir.read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains(".tmp-")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_call_value_over_the_bound_is_left_out_with_a_comment() {
        let r = Recorder::new(
            PathBuf::from("/x/v.scenario.toml"),
            &tick(RecordTime::Native),
        );
        let t0 = Instant::now();
        let fits = "a".repeat(MAX_RECORDED_VALUE - 2);
        let over = "a".repeat(MAX_RECORDED_VALUE);
        r.called("f", &json!({}), t0, &CallOutcome::Ok(json!(fits)));
        r.called("g", &json!({}), t0, &CallOutcome::Ok(json!(over)));
        r.called("h", &json!({ "s": over }), t0, &CallOutcome::Ok(json!(1)));
        let text = r.text();
        assert!(
            text.contains(&format!("result = \"{fits}\"")),
            "exactly the bound fits"
        );
        assert!(text.contains("call = \"g\"\nargs = {}\n# the result is not expected"));
        assert!(text.contains("# call \"h\" not recorded"));
        let s = model::parse(&text, Path::new("/x/v.scenario.toml"), &everywhere()).unwrap();
        assert_eq!(s.steps.len(), 2);
    }

    #[test]
    fn real_time_recordings_have_no_advances_and_marks_wait() {
        let r = Recorder::new(
            PathBuf::from("/x/n.scenario.toml"),
            &tick(RecordTime::Native),
        );
        r.keys(b"+");
        std::thread::sleep(Duration::from_millis(20));
        r.mark("x");
        let text = r.text();
        assert!(!text.contains("advance"), "{text}");
        assert!(!text.contains("deterministic"), "{text}");
        assert!(text.contains("timeout = \"10s\""), "{text}");
    }

    #[test]
    fn the_step_and_mark_bounds_stop_the_recording() {
        let r = Recorder::new(
            PathBuf::from("/x/b.scenario.toml"),
            &tick(RecordTime::Native),
        );
        for i in 0..MAX_RECORDED_STEPS + 10 {
            r.resized(10 + (i % 2) as u16, 10);
        }
        assert_eq!(r.steps(), MAX_RECORDED_STEPS);
        let text = r.text();
        assert!(
            text.contains("recording stopped after 5000 steps: the limit is 5000 steps"),
            "{}",
            &text[..2000]
        );
        assert!(text.len() <= MAX_RECORD_BYTES);

        let r = Recorder::new(
            PathBuf::from("/x/m.scenario.toml"),
            &tick(RecordTime::Native),
        );
        for _ in 0..MAX_MARKS + 1 {
            r.mark("x");
        }
        assert_eq!(r.steps(), MAX_MARKS);
        assert!(r.text().contains("100 marks is the limit"));

        // The byte bound: large keys fill the scenario before the step bound.
        let r = Recorder::new(
            PathBuf::from("/x/k.scenario.toml"),
            &tick(RecordTime::Native),
        );
        for _ in 0..100 {
            r.keys(&vec![b'a'; keys::MAX_TEXT]);
            r.resized(10, 10);
        }
        let text = r.text();
        assert!(text.len() <= MAX_RECORD_BYTES, "{}", text.len());
        assert!(text.contains("recording stopped after"), "bounded");
        assert!(model::parse(&text, Path::new("/x/k.scenario.toml"), &everywhere()).is_ok());
    }
}
