//! Scenario files: the TOML format, parsed and checked into [`Scenario`].
//!
//! The format is documented in docs/guide/testing.md and
//! described by `scenario.schema.json` next to this module. Every mistake is
//! reported with the file, the step number and what is wrong.

use super::files::FileError;
use super::fixtures::{self, HttpFixture, SeedFile};
use super::keys;
use super::policy::Policy;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tickbox_sandbox::grants::GrantSpec;

/// Largest scenario file read.
pub const MAX_SCENARIO_BYTES: u64 = 1024 * 1024;
/// Most steps in one scenario.
pub const MAX_STEPS: usize = 10_000;
/// Largest terminal size a scenario may set (cols, rows): the view's bound.
pub const MAX_SIZE: (u16, u16) = (
    tickbox_host::view::MAX_VIEW_COLS,
    tickbox_host::view::MAX_VIEW_ROWS,
);
/// Longest timeout a step may set.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Timeout of an `expect_*` step that sets none.
pub const DEFAULT_EXPECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Timeout of a `wait_for` step that sets none.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest regex source accepted (the compiled size is bounded too).
pub const MAX_REGEX_LEN: usize = 4096;
/// Seed used when neither the file nor the run's `seed` setting gives one.
pub const DEFAULT_SEED: u64 = 0;

/// A scenario file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// What is wrong, naming the step when it is one.
    pub message: String,
}

/// One parsed scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// `name`, or the file name without `.scenario.toml`.
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    /// How to start the Tick.
    pub tick: TickSection,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// `[[http]]`: answers to the Tick's `wasi:http` requests, in place of
    /// the network (see `fixtures`); empty: none.
    pub http: Vec<HttpFixture>,
    /// `[files]`: what the scratch directory holds when the Tick starts.
    pub files: Vec<SeedFile>,
}

impl Scenario {
    /// The snapshot files its steps compare the screen with.
    pub fn snapshots(&self) -> Vec<PathBuf> {
        self.steps
            .iter()
            .filter_map(|s| match &s.action {
                Action::WaitFor {
                    check: Check::Snapshot { path, .. },
                    ..
                }
                | Action::Expect {
                    check: Check::Snapshot { path, .. },
                    ..
                } => Some(path.clone()),
                _ => None,
            })
            .collect()
    }
}

/// The `[tick]` table.
#[derive(Debug, Clone, Default)]
pub struct TickSection {
    /// A path to an executable or a `.wasm` file (relative to the scenario).
    pub path: Option<PathBuf>,
    /// A native Tick's command line.
    pub command: Vec<String>,
    /// Working directory of a native Tick (relative to the scenario).
    pub cwd: Option<PathBuf>,
    /// Grants and bounds, the same type and keys as the sandbox flags,
    /// policy files and recordings (`dir` host paths and `http_ca` made
    /// relative to the scenario).
    pub grants: GrantSpec,
    /// A guest path at which a wasm Tick gets a fresh, empty directory for
    /// this run (removed afterwards).
    pub scratch: Option<String>,
    /// Terminal size (cols, rows) set before the Tick initializes.
    pub size: Option<(u16, u16)>,
    /// Virtual time and seeded randomness; `None` is the default (on for wasm).
    pub deterministic: Option<bool>,
    /// Random seed for a deterministic run.
    pub seed: Option<u64>,
    /// Per-call timeout.
    pub call_timeout: Option<Duration>,
}

/// One step: what it does, and where it is in the file.
#[derive(Debug, Clone)]
pub struct Step {
    /// 1-based position in the file.
    pub index: usize,
    /// A label from `name`, if given.
    pub name: Option<String>,
    /// What to do.
    pub action: Action,
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    /// Call a tool (`call`, `args`, then `result`, `result_subset` or `error`).
    Call {
        tool: String,
        args: Value,
        expect: CallExpect,
    },
    /// Send keys (`key`, `keys` or `text`), as the bytes a terminal sends.
    Keys { label: String, bytes: Vec<u8> },
    /// Resize the terminal.
    Resize { cols: u16, rows: u16 },
    /// Move virtual time forward (deterministic wasm Ticks only).
    Advance(Duration),
    /// Wait until a state or screen predicate holds.
    WaitFor { check: Check, timeout: Duration },
    /// A state or screen expectation (retried while the Tick catches up).
    Expect { check: Check, timeout: Duration },
    /// The state's seq has advanced by exactly `n` since the last
    /// `expect_update` (or since initialization).
    ExpectUpdate { n: u64, timeout: Duration },
}

/// What a call should return.
#[derive(Debug, Clone, PartialEq)]
pub enum CallExpect {
    /// Any result (an error fails the step).
    AnyResult,
    /// Exactly this result.
    Result(Value),
    /// A result that contains this (objects: these keys; arrays: same length).
    ResultSubset(Value),
    /// A tool error with this code (and a message containing the text).
    Error { code: i64, contains: Option<String> },
}

/// A predicate over the state or the screen.
#[derive(Debug, Clone)]
pub enum Check {
    /// The value at `pointer` in the state's data equals `value`.
    StateEquals { pointer: String, value: Value },
    /// The value at `pointer` contains `value` (see [`CallExpect::ResultSubset`]).
    StateSubset { pointer: String, value: Value },
    /// The screen contains the text.
    ScreenContains(String),
    /// The screen does not contain the text.
    ScreenLacks(String),
    /// The screen matches the regex.
    ScreenRegex(Regex),
    /// The screen equals the named snapshot file.
    Snapshot { name: String, path: PathBuf },
    /// Cells of the screen have these colours and attributes.
    Style(StyleCheck),
}

/// Which cells a style expectation is about, and what they must have
/// (what is not named is not checked).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StyleCheck {
    /// The first place this text is on the screen (its cells), or
    pub text: Option<String>,
    /// `len` cells (default 1) from row and column (0-based).
    pub at: Option<(u16, u16, u16)>,
    pub fg: Option<Colour>,
    pub bg: Option<Colour>,
    pub bold: Option<bool>,
    pub italic: Option<bool>,
    pub underline: Option<bool>,
    pub inverse: Option<bool>,
}

/// A cell colour as written in a scenario: `default`, one of the eight
/// names (`red`, `bright-red`, …, the 16 ANSI colours), an index `0`–`255`,
/// or `#rrggbb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    Default,
    Index(u8),
    Rgb(u8, u8, u8),
}

/// The eight ANSI colour names, in index order.
pub const COLOUR_NAMES: [&str; 8] = [
    "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white",
];

impl Colour {
    /// Parses a colour as written (see [`Colour`]).
    pub fn parse(text: &str) -> Result<Colour, String> {
        let t = text.trim().to_ascii_lowercase();
        if t == "default" {
            return Ok(Colour::Default);
        }
        if let Some(i) = COLOUR_NAMES.iter().position(|n| *n == t) {
            return Ok(Colour::Index(i as u8));
        }
        if let Some(i) = t
            .strip_prefix("bright-")
            .and_then(|n| COLOUR_NAMES.iter().position(|c| *c == n))
        {
            return Ok(Colour::Index(8 + i as u8));
        }
        if let Some(hex) = t.strip_prefix('#').filter(|h| h.len() == 6) {
            let b = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16);
            if let (Ok(r), Ok(g), Ok(bl)) = (b(0), b(2), b(4)) {
                return Ok(Colour::Rgb(r, g, bl));
            }
        }
        if let Ok(i) = t.parse::<u8>() {
            return Ok(Colour::Index(i));
        }
        Err(format!(
            "colour {text:?}: use default, black … white, bright-black … bright-white, 0-255 or #rrggbb"
        ))
    }
}

impl std::fmt::Display for Colour {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Colour::Default => write!(f, "default"),
            Colour::Index(i) if i < 8 => write!(f, "{}", COLOUR_NAMES[usize::from(i)]),
            Colour::Index(i) if i < 16 => write!(f, "bright-{}", COLOUR_NAMES[usize::from(i - 8)]),
            Colour::Index(i) => write!(f, "{i}"),
            Colour::Rgb(r, g, b) => write!(f, "#{r:02x}{g:02x}{b:02x}"),
        }
    }
}

/// A style expectation as written.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct RawStyle {
    text: Option<String>,
    row: Option<u16>,
    col: Option<u16>,
    len: Option<u16>,
    fg: Option<String>,
    bg: Option<String>,
    bold: Option<bool>,
    italic: Option<bool>,
    underline: Option<bool>,
    inverse: Option<bool>,
}

impl RawStyle {
    fn check(&self) -> Result<StyleCheck, String> {
        let at = match (&self.text, self.row, self.col) {
            (Some(t), None, None) if !t.is_empty() && self.len.is_none() => None,
            (None, Some(r), Some(c)) => Some((r, c, self.len.unwrap_or(1).max(1))),
            _ => {
                return Err(
                    "style names its cells by text, or by row and col (with an optional len)"
                        .into(),
                )
            }
        };
        let colour = |c: &Option<String>| c.as_deref().map(Colour::parse).transpose();
        let s = StyleCheck {
            text: self.text.clone(),
            at,
            fg: colour(&self.fg)?,
            bg: colour(&self.bg)?,
            bold: self.bold,
            italic: self.italic,
            underline: self.underline,
            inverse: self.inverse,
        };
        if s.fg.is_none()
            && s.bg.is_none()
            && [s.bold, s.italic, s.underline, s.inverse]
                .iter()
                .all(Option::is_none)
        {
            return Err(
                "style checks at least one of fg, bg, bold, italic, underline, inverse".into(),
            );
        }
        Ok(s)
    }
}

impl Action {
    /// The step's kind as written in the file.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Call { .. } => "call",
            Action::Keys { .. } => "key",
            Action::Resize { .. } => "resize",
            Action::Advance(_) => "advance",
            Action::WaitFor { .. } => "wait_for",
            Action::Expect { check, .. } if check.is_screen() => "expect_screen",
            Action::Expect { .. } => "expect_state",
            Action::ExpectUpdate { .. } => "expect_update",
        }
    }

    /// One line saying what the step does.
    pub fn describe(&self) -> String {
        match self {
            Action::Call { tool, args, expect } => {
                let e = match expect {
                    CallExpect::AnyResult => String::new(),
                    CallExpect::Result(v) => format!(" expecting result {v}"),
                    CallExpect::ResultSubset(v) => format!(" expecting a result containing {v}"),
                    CallExpect::Error {
                        code,
                        contains: None,
                    } => format!(" expecting error {code}"),
                    CallExpect::Error {
                        code,
                        contains: Some(t),
                    } => {
                        format!(" expecting error {code} mentioning {t:?}")
                    }
                };
                format!("call {tool} {args}{e}")
            }
            Action::Keys { label, .. } => format!("key {label}"),
            Action::Resize { cols, rows } => format!("resize to {cols}x{rows}"),
            Action::Advance(d) => format!("advance {d:?}"),
            Action::WaitFor { check, timeout } => {
                format!("wait_for {} (timeout {timeout:?})", check.describe())
            }
            Action::Expect { check, .. } => format!("expect {}", check.describe()),
            Action::ExpectUpdate { n, .. } => format!("expect_update {n}"),
        }
    }
}

impl Check {
    /// Whether the predicate is about the screen.
    pub fn is_screen(&self) -> bool {
        !matches!(self, Check::StateEquals { .. } | Check::StateSubset { .. })
    }

    /// One line saying what is expected.
    pub fn describe(&self) -> String {
        let at = |p: &str| {
            if p.is_empty() {
                "the state".to_string()
            } else {
                format!("state {p}")
            }
        };
        match self {
            Check::StateEquals { pointer, value } => format!("{} == {value}", at(pointer)),
            Check::StateSubset { pointer, value } => format!("{} contains {value}", at(pointer)),
            Check::ScreenContains(t) => format!("screen contains {t:?}"),
            Check::ScreenLacks(t) => format!("screen does not contain {t:?}"),
            Check::ScreenRegex(r) => format!("screen matches /{}/", r.as_str()),
            Check::Snapshot { name, .. } => format!("screen equals snapshot {name:?}"),
            Check::Style(s) => {
                let cells = match (&s.text, s.at) {
                    (Some(t), _) => format!("{t:?}"),
                    (None, Some((r, c, n))) => format!("{n} cell(s) at row {r}, col {c}"),
                    _ => String::new(),
                };
                let mut want = Vec::new();
                if let Some(c) = s.fg {
                    want.push(format!("fg {c}"));
                }
                if let Some(c) = s.bg {
                    want.push(format!("bg {c}"));
                }
                for (name, v) in [
                    ("bold", s.bold),
                    ("italic", s.italic),
                    ("underline", s.underline),
                    ("inverse", s.inverse),
                ] {
                    if let Some(v) = v {
                        want.push(if v {
                            name.to_string()
                        } else {
                            format!("not {name}")
                        });
                    }
                }
                format!("screen shows {cells} with {}", want.join(", "))
            }
        }
    }
}

// ---- the TOML shape ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    name: Option<String>,
    /// Split into [`RawTick`] and a [`GrantSpec`] by key: serde's `flatten`
    /// would let unknown keys through.
    tick: toml::Table,
    #[serde(default)]
    step: Vec<RawStep>,
    #[serde(default)]
    http: Vec<RawHttp>,
    files: Option<toml::Table>,
}

/// One `[[http]]` entry as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    method: Option<String>,
    url: Option<String>,
    url_prefix: Option<String>,
    status: Option<u16>,
    #[serde(default)]
    headers: toml::Table,
    body: Option<String>,
    body_file: Option<String>,
}

/// A `[files]` entry given as a table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeed {
    file: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTick {
    path: Option<String>,
    command: Option<Vec<String>>,
    cwd: Option<String>,
    scratch: Option<String>,
    size: Option<[u32; 2]>,
    deterministic: Option<bool>,
    seed: Option<u64>,
    call_timeout: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStep {
    name: Option<String>,
    // Actions: exactly one.
    call: Option<String>,
    key: Option<String>,
    keys: Option<Vec<String>>,
    text: Option<String>,
    bytes: Option<String>,
    resize: Option<[u32; 2]>,
    advance: Option<String>,
    wait_for: Option<RawCheck>,
    expect_state: Option<RawCheck>,
    expect_screen: Option<RawCheck>,
    expect_update: Option<u64>,
    // Modifiers.
    args: Option<Value>,
    result: Option<Value>,
    result_subset: Option<Value>,
    error: Option<i64>,
    error_contains: Option<String>,
    timeout: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    pointer: Option<String>,
    equals: Option<Value>,
    subset: Option<Value>,
    contains: Option<String>,
    lacks: Option<String>,
    regex: Option<String>,
    snapshot: Option<String>,
    style: Option<RawStyle>,
}

/// Parses a duration: a number and a unit, `ms`, `s`, `m` or `h` (`"250ms"`, `"1.5s"`, `"2m"`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. \"250ms\", \"2s\", \"1m\")"))?;
    let scale = match unit.trim() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit (use ms, s, m or h, e.g. \"250ms\")"
            ))
        }
    };
    Duration::try_from_secs_f64(n * scale).map_err(|_| format!("{text:?} is out of range"))
}

fn bounded_timeout(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() || d > MAX_TIMEOUT {
        return Err(format!(
            "timeout {text:?} must be above zero and at most {}s",
            MAX_TIMEOUT.as_secs()
        ));
    }
    Ok(d)
}

/// Expands `${NAME}` from the environment, for the variables `policy`
/// allows; another variable, or an unset one, is an error.
/// `${NAME:-DEFAULT}` takes DEFAULT (as written; a path in it is relative to
/// the scenario's file like any other) when NAME is unset or not allowed,
/// so a scenario can run as checked out without exporting anything, and
/// never reads a variable the command line did not allow.
pub fn expand_env(text: &str, policy: &Policy) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("{text:?}: `${{` without a closing `}}`"))?;
        let (name, default) = match after[..end].split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (&after[..end], None),
        };
        if let Some(d) = default {
            let value = policy
                .env_allowed(name)
                .then(|| std::env::var(name).ok())
                .flatten();
            out.push_str(value.as_deref().unwrap_or(d));
            rest = &after[end + 1..];
            continue;
        }
        if !policy.env_allowed(name) {
            return Err(format!(
                "{text:?}: environment variable {name} is not allowed by the run (allow it with allow_env {name})"
            ));
        }
        let value = std::env::var(name)
            .map_err(|_| format!("{text:?}: environment variable {name} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Joins a relative path to the scenario's directory.
fn relative_to(base: &Path, p: &str) -> PathBuf {
    // A URL (`oci://…`) is a reference, not a file beside the scenario.
    let url = p.contains("://");
    let p = Path::new(p);
    if p.is_absolute() || url {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Makes the host part of a `dir` grant relative to `base` (the
/// scenario's directory).
pub fn dir_grant(base: &Path, grant: &str) -> String {
    // The host part is a prefix of the grant: what follows (`::GUEST`,
    // `:ro`, `:rw,max=SIZE`) is kept as written.
    let host = tickbox_sandbox::grants::dir_host(grant);
    let rest = &grant[host.len()..];
    format!("{}{rest}", relative_to(base, host).display())
}

/// The file stem of a scenario: its name without `.scenario.toml` (or `.toml`).
pub fn stem(file: &Path) -> String {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".scenario.toml")
        .or_else(|| name.strip_suffix(".toml"))
        .unwrap_or(&name)
        .to_string()
}

/// Where a named snapshot of a scenario lives: next to it, as
/// `STEM.NAME.snap`.
pub fn snapshot_path(file: &Path, name: &str) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("."));
    dir.join(format!("{}.{name}.snap", stem(file)))
}

fn valid_snapshot_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Reads and parses a scenario file under the command line's [`Policy`].
/// The file is read only as a regular file, never through a symbolic link
/// (see `files`): an error names the file, never another file's content.
pub fn load(file: &Path, policy: &Policy) -> Result<Scenario, ScenarioError> {
    let err = |message: String| ScenarioError {
        file: file.display().to_string(),
        message,
    };
    let text = super::files::read_regular(file, MAX_SCENARIO_BYTES).map_err(|e| match e {
        FileError::TooLarge { len, max, .. } => err(format!(
            "the file is {len} bytes, over the {max}-byte limit for a scenario"
        )),
        FileError::Symlink(_) => err(
            "refused: a symbolic link; scenario files are read only as regular files, never through a link"
                .into(),
        ),
        e => err(format!("cannot read: {e}")),
    })?;
    parse(&text, file, policy).map_err(err)
}

/// Parses scenario text; `file` locates relative paths and snapshots, and
/// `policy` bounds what the file may ask for.
pub fn parse(text: &str, file: &Path, policy: &Policy) -> Result<Scenario, String> {
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        // toml's message spans several lines with a source excerpt; keep it.
        format!("not a valid scenario: {}", e.to_string().trim_end())
    })?;
    // Absolute, so a relative path in the file means the same from every
    // working directory: a native Tick starts in the scenario's directory,
    // and a path kept relative to the caller's would then point elsewhere.
    let parent = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base_buf = std::path::absolute(parent)
        .map_err(|e| format!("cannot locate the scenario's directory: {e}"))?;
    let base = base_buf.as_path();
    let tick = tick_section(raw.tick, base, policy)?;
    if raw.step.len() > MAX_STEPS {
        return Err(format!(
            "{} steps, over the {MAX_STEPS}-step limit",
            raw.step.len()
        ));
    }
    let mut steps = Vec::with_capacity(raw.step.len());
    for (i, s) in raw.step.into_iter().enumerate() {
        let index = i + 1;
        let name = s.name.clone();
        let action = step(s, file).map_err(|m| format!("step {index}: {m}"))?;
        steps.push(Step {
            index,
            name,
            action,
        });
    }
    if !raw.http.is_empty() && (!tick.grants.allow_http.is_empty() || tick.grants.http_ca.is_some())
    {
        return Err("[[http]] fixtures replace the network, so [tick] allow_http and http_ca cannot be given with them (a fixture answers its URL without any grant)".into());
    }
    let mut total = 0u64;
    let http = http_fixtures(raw.http, base, &mut total)?;
    let files = match raw.files {
        None => Vec::new(),
        Some(_) if tick.scratch.is_none() => {
            return Err(
                "[files] seeds the scratch directory: give [tick] scratch, the guest path the files appear under (e.g. scratch = \"/data\")"
                    .into(),
            )
        }
        Some(table) => seed_files(table, base, &mut total)?,
    };
    Ok(Scenario {
        name: raw.name.unwrap_or_else(|| stem(file)),
        file: file.to_path_buf(),
        tick,
        steps,
        http,
        files,
    })
}

/// Adds `n` bytes to the fixtures' running total, refusing past its bound.
fn charge(total: &mut u64, n: u64, what: &str) -> Result<(), String> {
    *total = total.saturating_add(n);
    if *total > fixtures::MAX_FIXTURE_TOTAL {
        return Err(format!(
            "{what}: the fixtures' bodies and files come to over the {}-byte limit together",
            fixtures::MAX_FIXTURE_TOTAL
        ));
    }
    Ok(())
}

fn http_fixtures(
    raw: Vec<RawHttp>,
    base: &Path,
    total: &mut u64,
) -> Result<Vec<HttpFixture>, String> {
    if raw.len() > fixtures::MAX_HTTP_FIXTURES {
        return Err(format!(
            "{} [[http]] entries, over the {}-entry limit",
            raw.len(),
            fixtures::MAX_HTTP_FIXTURES
        ));
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, h) in raw.into_iter().enumerate() {
        let index = i + 1;
        let at = |m: String| format!("[[http]] {index}: {m}");
        let (text, prefix) = match (&h.url, &h.url_prefix) {
            (Some(u), None) => (u, false),
            (None, Some(u)) => (u, true),
            _ => return Err(at("give exactly one of url and url_prefix".into())),
        };
        let key = if prefix { "url_prefix" } else { "url" };
        let (origin, path) =
            fixtures::parse_url(text).map_err(|e| at(format!("{key} {text:?}: {e}")))?;
        let method = h.method.unwrap_or_else(|| "GET".into());
        if !fixtures::is_token(&method) || method.len() > 64 {
            return Err(at(format!(
                "method {method:?}: give an HTTP method as sent, e.g. GET or POST"
            )));
        }
        let status = h.status.unwrap_or(200);
        if !(100..=599).contains(&status) {
            return Err(at(format!("status {status}: give 100-599")));
        }
        if h.headers.len() > fixtures::MAX_FIXTURE_HEADERS {
            return Err(at(format!(
                "{} headers, over the {}-header limit",
                h.headers.len(),
                fixtures::MAX_FIXTURE_HEADERS
            )));
        }
        let mut headers = Vec::with_capacity(h.headers.len());
        for (name, value) in h.headers {
            let toml::Value::String(value) = value else {
                return Err(at(format!("header {name:?}: give its value as a string")));
            };
            if !fixtures::is_token(&name) {
                return Err(at(format!(
                    "header name {name:?} is not a token (RFC 9110)"
                )));
            }
            if !fixtures::is_header_value(&value) || value.len() > 8192 {
                return Err(at(format!(
                    "header {name:?}: a value is visible ASCII, spaces and tabs, at most 8192 bytes"
                )));
            }
            charge(
                total,
                (name.len() + value.len()) as u64,
                &at("headers".into()),
            )?;
            headers.push((name.to_ascii_lowercase(), value));
        }
        let body = match (h.body, h.body_file) {
            (Some(_), Some(_)) => return Err(at("give body or body_file, not both".into())),
            (Some(b), None) => {
                if b.len() as u64 > fixtures::MAX_FIXTURE_BODY {
                    return Err(at(format!(
                        "body is {} bytes, over the {}-byte limit",
                        b.len(),
                        fixtures::MAX_FIXTURE_BODY
                    )));
                }
                b.into_bytes()
            }
            (None, Some(f)) => {
                fixtures::read_source(base, &f, fixtures::MAX_FIXTURE_BODY, "body_file")
                    .map_err(at)?
            }
            (None, None) => Vec::new(),
        };
        charge(total, body.len() as u64, &at("body".into()))?;
        out.push(HttpFixture {
            index,
            method,
            origin,
            path,
            prefix,
            response: tickbox_sandbox::http::FixtureResponse {
                status,
                headers,
                body: fixtures::body(body),
            },
        });
    }
    Ok(out)
}

fn seed_files(table: toml::Table, base: &Path, total: &mut u64) -> Result<Vec<SeedFile>, String> {
    if table.len() > fixtures::MAX_SEED_FILES {
        return Err(format!(
            "[files]: {} files, over the {}-file limit",
            table.len(),
            fixtures::MAX_SEED_FILES
        ));
    }
    let mut out = Vec::with_capacity(table.len());
    for (name, value) in table {
        let at = |m: String| format!("[files] {name:?}: {m}");
        let path = fixtures::relative_path(&name).map_err(at)?;
        let content = match value {
            toml::Value::String(text) => text.into_bytes(),
            v @ toml::Value::Table(_) => {
                let src: RawSeed = v.try_into().map_err(|e: toml::de::Error| {
                    at(format!(
                        "give text or {{ file = \"PATH\" }}: {}",
                        e.message()
                    ))
                })?;
                fixtures::read_source(base, &src.file, fixtures::MAX_SEED_FILE, "file")
                    .map_err(at)?
            }
            _ => return Err(at("give text or { file = \"PATH\" }".into())),
        };
        if content.len() as u64 > fixtures::MAX_SEED_FILE {
            return Err(at(format!(
                "{} bytes, over the {}-byte limit",
                content.len(),
                fixtures::MAX_SEED_FILE
            )));
        }
        charge(total, content.len() as u64, &format!("[files] {name:?}"))?;
        out.push(SeedFile { path, content });
    }
    fixtures::check_seed_paths(&out)?;
    Ok(out)
}

fn tick_section(table: toml::Table, base: &Path, policy: &Policy) -> Result<TickSection, String> {
    let table = match serde_json::to_value(table) {
        Ok(serde_json::Value::Object(table)) => table,
        _ => return Err("[tick]: not a table of plain values".into()),
    };
    let (t, mut grants): (RawTick, GrantSpec) =
        GrantSpec::split_from(table).map_err(|e| format!("[tick]: {e}"))?;
    let expand_env = |text: &str| expand_env(text, policy);
    let path = t
        .path
        .map(|p| expand_env(&p).map(|p| relative_to(base, &p)))
        .transpose()
        .map_err(|e| format!("[tick] path: {e}"))?;
    let command = t
        .command
        .unwrap_or_default()
        .iter()
        .map(|a| expand_env(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("[tick] command: {e}"))?;
    match (&path, command.is_empty()) {
        (Some(_), false) => return Err("[tick]: give either path or command, not both".into()),
        (None, true) => {
            return Err("[tick]: no Tick: give path (an executable or .wasm) or command".into())
        }
        _ => {}
    }
    let size = match t.size {
        None => None,
        Some([c, r]) => {
            if c == 0 || r == 0 || c > MAX_SIZE.0 as u32 || r > MAX_SIZE.1 as u32 {
                return Err(format!(
                    "[tick] size [{c}, {r}]: cols and rows must be 1..={} and 1..={}",
                    MAX_SIZE.0, MAX_SIZE.1
                ));
            }
            Some((c as u16, r as u16))
        }
    };
    grants.dir = grants.dir.iter().map(|d| dir_grant(base, d)).collect();
    for d in &grants.dir {
        let host = Path::new(tickbox_sandbox::grants::dir_host(d));
        policy.check_path("dir", host, base)?;
    }
    // The CA file is read by the host: bounded like a directory grant.
    if let Some(ca) = grants.http_ca.take() {
        let ca = relative_to(base, &ca);
        policy.check_path("http_ca", &ca, base)?;
        grants.http_ca = Some(ca.display().to_string());
    }
    for e in &grants.env {
        policy.check_env_grant(e)?;
    }
    let call_timeout = t
        .call_timeout
        .map(|d| bounded_timeout(&d))
        .transpose()
        .map_err(|e| format!("[tick] call_timeout: {e}"))?;
    Ok(TickSection {
        path,
        command,
        cwd: t
            .cwd
            .map(|c| expand_env(&c).map(|c| relative_to(base, &c)))
            .transpose()
            .map_err(|e| format!("[tick] cwd: {e}"))?,
        grants,
        scratch: match t.scratch {
            Some(g) if !g.starts_with('/') => {
                return Err(format!(
                    "[tick] scratch {g:?}: give the guest path, e.g. \"/data\""
                ))
            }
            other => other,
        },
        size,
        deterministic: t.deterministic,
        seed: t.seed,
        call_timeout,
    })
}

fn step(s: RawStep, file: &Path) -> Result<Action, String> {
    let actions = [
        ("call", s.call.is_some()),
        ("key", s.key.is_some()),
        ("keys", s.keys.is_some()),
        ("text", s.text.is_some()),
        ("bytes", s.bytes.is_some()),
        ("resize", s.resize.is_some()),
        ("advance", s.advance.is_some()),
        ("wait_for", s.wait_for.is_some()),
        ("expect_state", s.expect_state.is_some()),
        ("expect_screen", s.expect_screen.is_some()),
        ("expect_update", s.expect_update.is_some()),
    ];
    let given: Vec<&str> = actions.iter().filter(|a| a.1).map(|a| a.0).collect();
    let kind = match given.as_slice() {
        [one] => *one,
        [] => {
            return Err(format!(
                "no action: give one of {}",
                actions.map(|a| a.0).join(", ")
            ))
        }
        many => {
            return Err(format!(
                "several actions ({}): one per step",
                many.join(", ")
            ))
        }
    };
    let allowed: &[&str] = match kind {
        "call" => &["args", "result", "result_subset", "error", "error_contains"],
        "wait_for" | "expect_state" | "expect_screen" | "expect_update" => &["timeout"],
        _ => &[],
    };
    for (m, present) in [
        ("args", s.args.is_some()),
        ("result", s.result.is_some()),
        ("result_subset", s.result_subset.is_some()),
        ("error", s.error.is_some()),
        ("error_contains", s.error_contains.is_some()),
        ("timeout", s.timeout.is_some()),
    ] {
        if present && !allowed.contains(&m) {
            return Err(format!("`{m}` does not apply to a `{kind}` step"));
        }
    }
    let timeout = |default: Duration| -> Result<Duration, String> {
        s.timeout
            .as_deref()
            .map(bounded_timeout)
            .transpose()
            .map(|t| t.unwrap_or(default))
    };
    Ok(match kind {
        "call" => {
            let args = s.args.clone().unwrap_or(Value::Object(Default::default()));
            if !args.is_object() {
                return Err("call args must be a table (a JSON object, §7.1)".into());
            }
            let expect = match (&s.result, &s.result_subset, s.error) {
                (None, None, None) => CallExpect::AnyResult,
                (Some(v), None, None) => CallExpect::Result(v.clone()),
                (None, Some(v), None) => CallExpect::ResultSubset(v.clone()),
                (None, None, Some(code)) => CallExpect::Error {
                    code,
                    contains: s.error_contains.clone(),
                },
                _ => return Err("give at most one of result, result_subset, error".into()),
            };
            if s.error_contains.is_some() && s.error.is_none() {
                return Err("error_contains needs error (the expected code)".into());
            }
            Action::Call {
                tool: s.call.clone().unwrap_or_default(),
                args,
                expect,
            }
        }
        "key" => {
            let k = s.key.as_deref().unwrap_or_default();
            Action::Keys {
                label: k.to_string(),
                bytes: keys::encode(k)?,
            }
        }
        "keys" => {
            let list = s.keys.as_deref().unwrap_or_default();
            if list.is_empty() || list.len() > keys::MAX_KEYS {
                return Err(format!("keys: give 1 to {} keys", keys::MAX_KEYS));
            }
            let mut bytes = Vec::new();
            for k in list {
                bytes.extend(keys::encode(k)?);
            }
            Action::Keys {
                label: list.join(" "),
                bytes,
            }
        }
        "text" => {
            let t = s.text.as_deref().unwrap_or_default();
            if t.is_empty() || t.len() > keys::MAX_TEXT {
                return Err(format!("text: 1 to {} bytes", keys::MAX_TEXT));
            }
            Action::Keys {
                label: format!("{t:?}"),
                bytes: t.as_bytes().to_vec(),
            }
        }
        "bytes" => {
            let hex = s.bytes.as_deref().unwrap_or_default();
            let bytes = parse_hex(hex)?;
            if bytes.is_empty() || bytes.len() > keys::MAX_TEXT {
                return Err(format!("bytes: 1 to {} bytes", keys::MAX_TEXT));
            }
            Action::Keys {
                label: format!("bytes {hex}"),
                bytes,
            }
        }
        "resize" => {
            let [c, r] = s.resize.unwrap_or_default();
            if c == 0 || r == 0 || c > MAX_SIZE.0 as u32 || r > MAX_SIZE.1 as u32 {
                return Err(format!(
                    "resize [{c}, {r}]: cols and rows must be 1..={} and 1..={}",
                    MAX_SIZE.0, MAX_SIZE.1
                ));
            }
            Action::Resize {
                cols: c as u16,
                rows: r as u16,
            }
        }
        "advance" => {
            let d = parse_duration(s.advance.as_deref().unwrap_or_default())?;
            let max = tickbox_sandbox::virtual_time::MAX_ADVANCE;
            if d > max {
                return Err(format!(
                    "advance {:?} is longer than the {max:?} limit",
                    s.advance.as_deref().unwrap_or_default()
                ));
            }
            Action::Advance(d)
        }
        "wait_for" => {
            let check = check(s.wait_for.as_ref(), "wait_for", file)?;
            if matches!(check, Check::Snapshot { .. }) {
                return Err("wait_for cannot wait for a snapshot; use expect_screen".into());
            }
            Action::WaitFor {
                check,
                timeout: timeout(DEFAULT_WAIT_TIMEOUT)?,
            }
        }
        "expect_state" => {
            let check = check(s.expect_state.as_ref(), "expect_state", file)?;
            if check.is_screen() {
                return Err("expect_state takes pointer with equals or subset".into());
            }
            Action::Expect {
                check,
                timeout: timeout(DEFAULT_EXPECT_TIMEOUT)?,
            }
        }
        "expect_screen" => {
            let check = check(s.expect_screen.as_ref(), "expect_screen", file)?;
            if !check.is_screen() {
                return Err("expect_screen takes contains, lacks, regex, snapshot or style".into());
            }
            Action::Expect {
                check,
                timeout: timeout(DEFAULT_EXPECT_TIMEOUT)?,
            }
        }
        _ => Action::ExpectUpdate {
            n: s.expect_update.unwrap_or_default(),
            timeout: timeout(DEFAULT_EXPECT_TIMEOUT)?,
        },
    })
}

/// Hex digits, two per byte (`"1b5b41"`), for input that is not UTF-8.
fn parse_hex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) || hex.len() > 2 * keys::MAX_TEXT {
        return Err(format!(
            "bytes: give an even number of hex digits, at most {} (two per byte)",
            2 * keys::MAX_TEXT
        ));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bytes: {hex:?} is not hex digits (e.g. \"1b5b41\")"))
        })
        .collect()
}

fn check(c: Option<&RawCheck>, kind: &str, file: &Path) -> Result<Check, String> {
    let Some(c) = c else {
        return Err(format!("{kind} is missing"));
    };
    let set = [
        ("equals", c.equals.is_some()),
        ("subset", c.subset.is_some()),
        ("contains", c.contains.is_some()),
        ("lacks", c.lacks.is_some()),
        ("regex", c.regex.is_some()),
        ("snapshot", c.snapshot.is_some()),
        ("style", c.style.is_some()),
    ];
    let given: Vec<&str> = set.iter().filter(|a| a.1).map(|a| a.0).collect();
    let [one] = given.as_slice() else {
        return Err(format!(
            "{kind} needs exactly one of equals, subset (with an optional pointer), contains, lacks, regex, snapshot, style; got {}",
            if given.is_empty() { "none".to_string() } else { given.join(", ") }
        ));
    };
    let pointer = c.pointer.clone().unwrap_or_default();
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "pointer {pointer:?} is not a JSON pointer (RFC 6901): it must start with '/'"
        ));
    }
    if c.pointer.is_some() && !matches!(*one, "equals" | "subset") {
        return Err(format!("pointer applies to equals and subset, not {one}"));
    }
    Ok(match *one {
        "equals" => Check::StateEquals {
            pointer,
            value: c.equals.clone().unwrap_or_default(),
        },
        "subset" => Check::StateSubset {
            pointer,
            value: c.subset.clone().unwrap_or_default(),
        },
        "contains" => Check::ScreenContains(non_empty(c.contains.as_deref(), "contains")?),
        "lacks" => Check::ScreenLacks(non_empty(c.lacks.as_deref(), "lacks")?),
        "regex" => {
            let src = c.regex.as_deref().unwrap_or_default();
            if src.len() > MAX_REGEX_LEN {
                return Err(format!(
                    "regex is {} bytes, over the {MAX_REGEX_LEN}-byte limit",
                    src.len()
                ));
            }
            let re = regex::RegexBuilder::new(src)
                .multi_line(true)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("regex {src:?}: {e}"))?;
            Check::ScreenRegex(re)
        }
        "style" => Check::Style(
            c.style
                .as_ref()
                .map(RawStyle::check)
                .transpose()?
                .unwrap_or_default(),
        ),
        _ => {
            let name = c.snapshot.clone().unwrap_or_default();
            if !valid_snapshot_name(&name) {
                return Err(format!(
                    "snapshot name {name:?}: use 1 to 64 letters, digits, '-' or '_'"
                ));
            }
            Check::Snapshot {
                path: snapshot_path(file, &name),
                name,
            }
        }
    })
}

fn non_empty(t: Option<&str>, what: &str) -> Result<String, String> {
    match t {
        Some(t) if !t.is_empty() => Ok(t.to_string()),
        _ => Err(format!("{what} must not be empty")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Scenario, String> {
        parse(text, Path::new("/s/demo.scenario.toml"), &Policy::default())
    }

    #[test]
    fn a_full_scenario_parses() {
        let s = p(r#"
            [tick]
            path = "counter.wasm"
            size = [80, 24]
            seed = 7

            [[step]]
            call = "increment"
            args = { amount = 2 }
            result = { value = 2 }

            [[step]]
            keys = ["+", "ctrl-c", "up", "enter"]

            [[step]]
            advance = "1.5s"

            [[step]]
            wait_for = { pointer = "/count", equals = 3 }
            timeout = "2s"

            [[step]]
            expect_screen = { snapshot = "after-two" }

            [[step]]
            expect_update = 2
        "#)
        .unwrap();
        assert_eq!(s.name, "demo");
        assert_eq!(s.tick.path, Some(PathBuf::from("/s/counter.wasm")));
        assert_eq!(s.tick.size, Some((80, 24)));
        assert_eq!(s.steps.len(), 6);
        match &s.steps[1].action {
            Action::Keys { bytes, .. } => assert_eq!(bytes, b"+\x03\x1b[A\r"),
            a => panic!("{a:?}"),
        }
        match &s.steps[2].action {
            Action::Advance(d) => assert_eq!(*d, Duration::from_millis(1500)),
            a => panic!("{a:?}"),
        }
        match &s.steps[4].action {
            Action::Expect {
                check: Check::Snapshot { path, .. },
                ..
            } => assert_eq!(path, Path::new("/s/demo.after-two.snap")),
            a => panic!("{a:?}"),
        }
    }

    #[test]
    fn mistakes_name_the_step_and_the_rule() {
        let tick = "[tick]\npath = \"t.wasm\"\n";
        let cases = [
            (
                "[[step]]\ncall = \"x\"\nkey = \"a\"\n",
                "step 1: several actions (call, key)",
            ),
            ("[[step]]\ntimeout = \"1s\"\n", "step 1: no action"),
            ("[[step]]\nkey = \"nope\"\n", "unknown key \"nope\""),
            ("[[step]]\nresize = [0, 5]\n", "cols and rows must be"),
            ("[[step]]\nadvance = \"5 parsecs\"\n", "unknown unit"),
            (
                "[[step]]\nexpect_state = { contains = \"x\" }\n",
                "expect_state takes pointer",
            ),
            (
                "[[step]]\nexpect_screen = { regex = \"(\" }\n",
                "regex \"(\"",
            ),
            (
                "[[step]]\nexpect_screen = { snapshot = \"../x\" }\n",
                "snapshot name",
            ),
            (
                "[[step]]\nexpect_state = { pointer = \"count\", equals = 1 }\n",
                "not a JSON pointer",
            ),
            (
                "[[step]]\nkey = \"a\"\ntimeout = \"1s\"\n",
                "`timeout` does not apply to a `key` step",
            ),
            (
                "[[step]]\nwait_for = { contains = \"x\" }\ntimeout = \"11m\"\n",
                "at most 600s",
            ),
            ("[[step]]\ncall = \"x\"\nargs = 3\n", "must be a table"),
            ("[[step]]\nbogus = 1\n", "unknown field `bogus`"),
        ];
        for (steps, want) in cases {
            let e = p(&format!("{tick}{steps}")).unwrap_err();
            assert!(e.contains(want), "{steps:?}: {e}");
        }
        assert!(p("[tick]\n").unwrap_err().contains("no Tick"));
        assert!(p("[tick]\npath = \"a\"\ncommand = [\"b\"]\n")
            .unwrap_err()
            .contains("not both"));
        // Environment variables: only those the command line allows are
        // read, and an allowed one must be set.
        assert!(p("[tick]\npath = \"${HOME}/t.wasm\"\n")
            .unwrap_err()
            .contains("HOME is not allowed by the run (allow it with allow_env HOME)"));
        let allow = |name: &str| Policy {
            allow_env: vec![name.into()],
            ..Policy::default()
        };
        let f = Path::new("/s/demo.scenario.toml");
        assert!(parse("[tick]\npath = \"${HOME}/t.wasm\"\n", f, &allow("HOME")).is_ok());
        assert!(parse(
            "[tick]\npath = \"${TICKBOX_SURELY_UNSET_VAR}\"\n",
            f,
            &allow("TICKBOX_SURELY_UNSET_VAR")
        )
        .unwrap_err()
        .contains("TICKBOX_SURELY_UNSET_VAR is not set"));
        assert!(p("[tick]\npath = \"t.wasm\"\nenv = [\"HOME\"]\n")
            .unwrap_err()
            .contains("allow it with allow_env HOME"));
        assert!(parse(
            "[tick]\npath = \"t.wasm\"\nenv = [\"HOME\"]\n",
            f,
            &allow("HOME")
        )
        .is_ok());
        assert!(p("[tick]\npath = \"t.wasm\"\nenv = [\"MODE=fast\"]\n").is_ok());
        // `${NAME:-DEFAULT}`: the default where the variable is not allowed
        // (it is not read) or not set; the value where it is both.
        let tick = |s: Scenario| s.tick.path.unwrap().display().to_string();
        let d = "[tick]\npath = \"${HOME:-../build}/t.wasm\"\n";
        assert_eq!(
            tick(parse(d, f, &Policy::default()).unwrap()),
            "/s/../build/t.wasm"
        );
        let home = std::env::var("HOME").unwrap();
        assert_eq!(
            tick(parse(d, f, &allow("HOME")).unwrap()),
            format!("{home}/t.wasm")
        );
        let unset = "[tick]\npath = \"${TICKBOX_SURELY_UNSET_VAR:-/opt/x}/t.wasm\"\n";
        assert_eq!(
            tick(parse(unset, f, &allow("TICKBOX_SURELY_UNSET_VAR")).unwrap()),
            "/opt/x/t.wasm"
        );
    }

    #[test]
    fn http_fixtures_and_files_parse_and_their_mistakes_name_the_entry() {
        let tick = "[tick]\npath = \"t.wasm\"\nscratch = \"/data\"\n";
        let s = p(&format!(
            "{tick}[[http]]\nurl = \"https://API.example.com/a?b=1\"\nstatus = 404\nheaders = {{ Content-Type = \"text/plain\" }}\nbody = \"x\"\n\n[[http]]\nmethod = \"POST\"\nurl_prefix = \"http://127.0.0.1:8080\"\n\n[files]\n\"a/b.txt\" = \"hi\"\n"
        ))
        .unwrap();
        assert_eq!(s.http.len(), 2);
        assert_eq!(s.http[0].origin.to_string(), "https://api.example.com:443");
        assert_eq!(s.http[0].path, "/a?b=1");
        assert_eq!(s.http[0].method, "GET", "the default method");
        assert_eq!(s.http[0].response.status, 404);
        assert_eq!(
            s.http[0].response.headers,
            [("content-type".to_string(), "text/plain".to_string())]
        );
        assert!(s.http[1].prefix && s.http[1].path == "/");
        assert_eq!(s.files[0].path, Path::new("a/b.txt"));
        assert_eq!(s.files[0].content, b"hi");
        let cases = [
            (
                "[[http]]\nbody = \"x\"\n",
                "[[http]] 1: give exactly one of url and url_prefix",
            ),
            (
                "[[http]]\nurl = \"ftp://h/\"\n",
                "[[http]] 1: url \"ftp://h/\": the scheme must be http or https",
            ),
            (
                "[[http]]\nurl = \"http://h/\"\nstatus = 99\n",
                "status 99: give 100-599",
            ),
            (
                "[[http]]\nurl = \"http://h/\"\nmethod = \"G T\"\n",
                "give an HTTP method",
            ),
            (
                "[[http]]\nurl = \"http://h/\"\nheaders = { \"a b\" = \"v\" }\n",
                "is not a token",
            ),
            (
                "[[http]]\nurl = \"http://h/\"\nheaders = { a = \"v\\r\\nx: y\" }\n",
                "a value is visible ASCII",
            ),
            (
                "[[http]]\nurl = \"http://h/\"\nbody = \"x\"\nbody_file = \"f\"\n",
                "not both",
            ),
            (
                "[[http]]\nurl = \"http://h/\"\nbogus = 1\n",
                "unknown field `bogus`",
            ),
            ("[files]\n\"../x\" = \"y\"\n", "[files] \"../x\": `..`"),
            (
                "[files]\n\"x\" = { path = \"y\" }\n",
                "give text or { file = \"PATH\" }",
            ),
        ];
        for (rest, want) in cases {
            let e = p(&format!("{tick}{rest}")).unwrap_err();
            assert!(e.contains(want), "{rest:?}: {e}");
        }
        let e = p("[tick]\npath = \"t.wasm\"\nallow_http = [\"http://h\"]\n[[http]]\nurl = \"http://h/\"\n")
            .unwrap_err();
        assert!(e.contains("cannot be given with them"), "{e}");
        let e = p("[tick]\npath = \"t.wasm\"\n[files]\n\"a\" = \"b\"\n").unwrap_err();
        assert!(e.contains("give [tick] scratch"), "{e}");
        // The body bound, inline: at it and one past.
        let body = |n: usize| {
            format!(
                "{tick}[[http]]\nurl = \"http://h/\"\nbody = \"{}\"\n",
                "b".repeat(n)
            )
        };
        assert!(p(&body(fixtures::MAX_FIXTURE_BODY as usize)).is_ok());
        assert!(p(&body(fixtures::MAX_FIXTURE_BODY as usize + 1))
            .unwrap_err()
            .contains("over the 1048576-byte limit"));
    }

    #[test]
    fn colours_parse_every_way_they_are_written() {
        for (text, c) in [
            ("default", Colour::Default),
            ("red", Colour::Index(1)),
            ("bright-white", Colour::Index(15)),
            ("196", Colour::Index(196)),
            ("#0a0B0c", Colour::Rgb(10, 11, 12)),
        ] {
            assert_eq!(Colour::parse(text), Ok(c), "{text}");
            assert_eq!(Colour::parse(&c.to_string()), Ok(c), "{c}");
        }
        for bad in ["puce", "#12345", "256", "bright-", ""] {
            assert!(Colour::parse(bad).is_err(), "{bad}");
        }
    }

    /// `dir` grants are made relative to the scenario and must lie under
    /// its directory (or a root the policy names), links resolved.
    #[test]
    fn dir_grants_stay_under_the_grant_root() {
        let root = std::env::temp_dir().join(format!("tickbox-roots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (here, other) = (root.join("here"), root.join("other"));
        std::fs::create_dir_all(here.join("data")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::os::unix::fs::symlink(&other, here.join("out")).unwrap();
        let file = here.join("g.scenario.toml");
        let with = |dir: &str, policy: &Policy| {
            parse(
                &format!("[tick]\npath = \"t.wasm\"\ndir = [{dir:?}]\n"),
                &file,
                policy,
            )
        };
        let strict = Policy::default();
        let s = with("data::/data:rw,max=1MiB", &strict).unwrap();
        assert_eq!(
            s.tick.grants.dir,
            [format!(
                "{}::/data:rw,max=1MiB",
                here.join("data").display()
            )]
        );
        for outside in [
            other.display().to_string(),
            "../other".to_string(),
            "out::/o:ro".to_string(),
        ] {
            let e = with(&outside, &strict).unwrap_err();
            assert!(e.contains("is outside the grant root"), "{outside}: {e}");
        }
        let wide = Policy {
            grant_roots: vec![root.clone()],
            ..Policy::default()
        };
        assert!(with("../other", &wide).is_ok());
        assert!(with("out", &wide).is_ok());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_step_bound_is_enforced() {
        let mut text = String::from("[tick]\npath = \"t.wasm\"\n");
        for _ in 0..MAX_STEPS {
            text.push_str("[[step]]\nkey = \"a\"\n");
        }
        assert_eq!(p(&text).unwrap().steps.len(), MAX_STEPS);
        text.push_str("[[step]]\nkey = \"a\"\n");
        assert!(p(&text).unwrap_err().contains("10000-step limit"));
    }

    /// Every committed scenario is valid by `scenario.schema.json` and by
    /// the parser; a scenario with two actions in a step is neither.
    #[test]
    fn the_schema_and_the_parser_agree_on_the_committed_scenarios() {
        let schema: Value =
            serde_json::from_str(include_str!("scenario.schema.json")).expect("schema is JSON");
        let validator = jsonschema::validator_for(&schema).expect("schema compiles");
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf();
        let files =
            crate::scenario::discover(&[root.join("examples"), root.join("tests/scenarios")])
                .expect("scenarios");
        assert!(files.len() >= 8, "{files:?}");
        // No environment changes in a test: substitute every committed
        // scenario's `${TICKBOX_…}` (`TICKBOX_<LANG>_DIR`, the SDKs'
        // `TICKBOX_SDK_COUNTER`) here.
        let dirs = regex::Regex::new(r"\$\{TICKBOX_[A-Z_]+\}").unwrap();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let text = dirs.replace_all(&text, "/nonexistent").into_owned();
            let doc: Value = toml::from_str(&text).unwrap();
            let schema_ok = validator.is_valid(&doc);
            let parse_ok = parse(&text, &f, &Policy::default()).is_ok();
            let bad = f.ends_with("invalid/bad-step.scenario.toml");
            assert_eq!(schema_ok, !bad, "schema on {}", f.display());
            assert_eq!(parse_ok, !bad, "parser on {}", f.display());
        }
    }

    #[test]
    fn size_regex_and_file_bounds() {
        let tick = "[tick]\npath = \"t.wasm\"\n";
        let at = |steps: &str| p(&format!("{tick}{steps}"));
        assert!(at("[[step]]\nresize = [1000, 500]\n").is_ok());
        assert!(at("[[step]]\nresize = [1001, 500]\n")
            .unwrap_err()
            .contains("1..=1000"));
        assert!(at("[[step]]\nresize = [1000, 501]\n")
            .unwrap_err()
            .contains("1..=500"));
        let re = |n: usize| {
            format!(
                "[[step]]\nexpect_screen = {{ regex = \"{}\" }}\n",
                "a".repeat(n)
            )
        };
        assert!(at(&re(MAX_REGEX_LEN)).is_ok());
        assert!(at(&re(MAX_REGEX_LEN + 1))
            .unwrap_err()
            .contains("4096-byte limit"));
        let keys = |n: usize| format!("[[step]]\nkeys = [{}]\n", vec!["\"a\""; n].join(","));
        assert!(at(&keys(keys::MAX_KEYS)).is_ok());
        assert!(at(&keys(keys::MAX_KEYS + 1))
            .unwrap_err()
            .contains("1 to 1024 keys"));
        let text = |n: usize| format!("[[step]]\ntext = \"{}\"\n", "a".repeat(n));
        assert!(at(&text(keys::MAX_TEXT)).is_ok());
        assert!(at(&text(keys::MAX_TEXT + 1))
            .unwrap_err()
            .contains("1 to 65536 bytes"));

        let dir = std::env::temp_dir().join(format!("tickbox-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("big.scenario.toml");
        let mut body = String::from(tick);
        body.push_str(&"# padding\n".repeat(MAX_SCENARIO_BYTES as usize / 10));
        std::fs::write(&f, &body[..MAX_SCENARIO_BYTES as usize]).unwrap();
        assert!(
            load(&f, &Policy::default()).is_ok(),
            "exactly the limit is read"
        );
        std::fs::write(&f, format!("{body}# one more line\n")).unwrap();
        let e = load(&f, &Policy::default()).unwrap_err();
        assert!(e.message.contains("over the 1048576-byte limit"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1e400s").is_err());
    }
}
