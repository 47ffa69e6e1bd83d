//! Counting what Ticks do, for Prometheus: calls and their durations per
//! Tick and tool, refusals by kind, limits hit by bound, live Ticks and the
//! host's resident memory, written in the Prometheus text exposition
//! format (version 0.0.4) by [`Exposition`].
//!
//! **One place notices an event.** The counts come from the audit stream's
//! events ([`crate::audit`]): a [`TickMetrics`] is an
//! [`AuditObserver`] added to a Tick's audit handle
//! ([`Audit::observed_by`](crate::audit::Audit::observed_by)), so the
//! sandbox and the session, which already record each call, denial and
//! limit once, are not instrumented a second time, and a metric and an
//! audit line can never disagree about what happened. Whoever serves the
//! page (the MCP server's `/metrics`, `tickbox mcp --metrics`) makes a
//! [`Metrics`] registry, hands each Tick's launcher a [`TickMetrics`] and
//! names it in the registry once the Tick has its name.
//!
//! **Tick text is bounded and escaped.** Tool names are the Tick's to
//! choose and its catalog may change at any time, so one Tick's series
//! keep at most [`MAX_METRIC_TOOLS_PER_TICK`] tool names; calls of any
//! other tool are counted under `tool="(other)"`. A label value a Tick
//! chose is cut at [`MAX_METRIC_LABEL_CHARS`] and goes through the one
//! character policy ([`text::escape`]: no control, line break or bidi
//! character survives) and then the exposition format's own escapes
//! (`\\`, `\"`, `\n`). Series are kept by that final text, so two names
//! that would print alike are one series, never two samples with the same
//! labels (which would make Prometheus drop the scrape's samples). Help
//! texts and metric names are `&'static str`: no Tick text reaches them.
//!
//! ```
//! use std::sync::Arc;
//! use tickbox_telemetry::audit::{Audit, DenialKind, Origin};
//! use tickbox_telemetry::metrics::{Metrics, TickMetrics};
//! let metrics = Metrics::new();
//! let counter = Arc::new(TickMetrics::default());
//! let audit = Audit::new(Origin::Mcp, vec![]).observed_by(counter.clone()).for_session();
//! audit.denied(DenialKind::Path, "../etc/passwd", "leads out of its granted directory");
//! metrics.add_tick("counter", counter);
//! let page = metrics.page();
//! assert!(page.contains("tickbox_refusals_total{tick=\"counter\",kind=\"path\"} 1\n"));
//! ```

use crate::audit::{outcome_name, AuditObserver, DenialKind, Event};
pub use crate::limits::{MAX_METRIC_LABEL_CHARS, MAX_METRIC_TOOLS_PER_TICK};
use crate::util::lock;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tickbox_protocol::text;

/// The content type of a page [`Exposition`] writes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The label value calls of tools past [`MAX_METRIC_TOOLS_PER_TICK`] are
/// counted under.
pub const OTHER: &str = "(other)";

/// The upper bounds (seconds) of the call-duration histogram's buckets,
/// besides `+Inf`: from half a millisecond (a read-only call on a warm
/// host takes tens of microseconds) to the default call timeout (60 s).
pub const CALL_SECONDS_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The outcomes a call is counted under, as [`outcome_name`] names them.
const OUTCOMES: [&str; 3] = ["ok", "error", "unknown"];

/// The kind of a metric family (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (a `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations in cumulative buckets, with `_sum` and `_count`.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A page in the Prometheus text format, written family by family: a
/// family's `# HELP` and `# TYPE` lines, then its samples, all together
/// (the format wants a family's samples in one group).
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// An empty page.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Starts a family. Its name and help are the host's own text (static
    /// strings), never a Tick's.
    pub fn family(&mut self, name: &'static str, kind: Kind, help: &'static str) {
        debug_assert!(valid_name(name), "{name}");
        // Help text escapes only `\` and line breaks; ours has neither, and
        // the debug assertion keeps it so.
        debug_assert!(!help.contains(['\\', '\n']), "{help}");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
    }

    /// One sample of the family `name` (with `suffix`: `_bucket`, `_sum`,
    /// `_count`, or empty): its labels, each value escaped by
    /// [`label_value`], and its value.
    pub fn sample(
        &mut self,
        name: &'static str,
        suffix: &'static str,
        labels: &[(&'static str, &str)],
        value: impl Value,
    ) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (label, v)) in labels.iter().enumerate() {
                debug_assert!(valid_name(label), "{label}");
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(label);
                self.out.push_str("=\"");
                self.out.push_str(&label_value(v));
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        value.write(&mut self.out);
        self.out.push('\n');
    }

    /// The page.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A sample's value as the format writes it.
pub trait Value {
    /// Appends the value's text.
    fn write(&self, out: &mut String);
}

impl Value for u64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl Value for f64 {
    fn write(&self, out: &mut String) {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            // Rust writes no exponent and the shortest text that reads back
            // as the same number, which Prometheus parses as is.
            let _ = write!(out, "{self}");
        }
    }
}

/// Whether `name` is a metric or label name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A label value as the page writes it, between its quotes: every unsafe
/// character (controls, line breaks, bidi, …) as a visible escape
/// ([`text::escape`], so nothing a Tick chose reaches a terminal that
/// shows the page raw), then the format's escapes for `\` and `"`. No line
/// break is left to escape: the first step made each one visible.
pub fn label_value(v: &str) -> String {
    let safe = text::escape(v);
    if !safe.contains(['\\', '"', '\n']) {
        return safe;
    }
    let mut out = String::with_capacity(safe.len() + 8);
    for c in safe.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The text a series is kept under for a label value a Tick chose: cut at
/// [`MAX_METRIC_LABEL_CHARS`] (marked `…`) and through the character
/// policy. [`label_value`] leaves it as it is but for the format's own
/// escapes, which map distinct texts to distinct texts, so two series
/// never print the same labels.
fn series_key(raw: &str) -> Box<str> {
    let cut = text::truncate(raw, MAX_METRIC_LABEL_CHARS);
    if cut.len() < raw.len() {
        text::escape(&format!("{cut}…")).into()
    } else {
        text::escape(raw).into()
    }
}

/// Series keyed by a label value a Tick chose, at most
/// [`MAX_METRIC_TOOLS_PER_TICK`] of them besides [`OTHER`].
#[derive(Debug, Clone, Default)]
struct Capped<V> {
    series: BTreeMap<Box<str>, V>,
}

impl<V: Default> Capped<V> {
    /// The series for `raw`, or the [`OTHER`] series once the cap is
    /// reached by other names. A name that is already kept keeps counting
    /// under its own label.
    fn entry(&mut self, raw: &str) -> &mut V {
        let key = series_key(raw);
        let named = self.series.len() - usize::from(self.series.contains_key(OTHER));
        let key = if self.series.contains_key(&key) || named < MAX_METRIC_TOOLS_PER_TICK {
            key
        } else {
            OTHER.into()
        };
        self.series.entry(key).or_default()
    }
}

/// One tool's series.
#[derive(Debug, Clone, Default)]
struct ToolSeries {
    /// Calls by outcome, in [`OUTCOMES`] order.
    calls: [u64; 3],
    /// Calls by duration bucket (not cumulative; the page sums them), the
    /// last one past every bound.
    buckets: [u64; CALL_SECONDS_BUCKETS.len() + 1],
    /// Every call's duration, in seconds.
    seconds: f64,
}

impl ToolSeries {
    fn observe(&mut self, outcome: &str, took: Duration) {
        if let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) {
            self.calls[i] += 1;
        }
        let secs = took.as_secs_f64();
        let bucket = CALL_SECONDS_BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(CALL_SECONDS_BUCKETS.len());
        self.buckets[bucket] += 1;
        self.seconds += secs;
    }
}

/// What one Tick's events added up to.
#[derive(Debug, Clone, Default)]
struct Counts {
    tools: Capped<ToolSeries>,
    /// Refusals by kind, in [`DenialKind::ALL`] order.
    refusals: [u64; DenialKind::ALL.len()],
    limits: Capped<u64>,
    started: u64,
    ended: u64,
}

/// One Tick's counts: an [`AuditObserver`] for the audit handle its
/// launcher is given. Counting takes a short lock and never waits on I/O.
#[derive(Debug, Default)]
pub struct TickMetrics {
    counts: Mutex<Counts>,
}

impl TickMetrics {
    fn snapshot(&self) -> Counts {
        lock(&self.counts).clone()
    }
}

impl AuditObserver for TickMetrics {
    fn observe(&self, _session: Option<&str>, event: &Event<'_>) {
        let mut c = lock(&self.counts);
        match *event {
            Event::Start { .. } => c.started += 1,
            Event::End { .. } => c.ended += 1,
            Event::Call {
                tool,
                outcome,
                took,
                ..
            } => c.tools.entry(tool).observe(outcome_name(outcome), took),
            Event::Denied { what, .. } => {
                if let Some(i) = DenialKind::ALL.iter().position(|k| *k == what) {
                    c.refusals[i] += 1;
                }
            }
            Event::Limit { bound, .. } => *c.limits.entry(bound) += 1,
            // Approvals are not counted (no MCP request leads to one).
            _ => {}
        }
    }
}

/// The Ticks a page reports on, by name.
#[derive(Debug, Default)]
pub struct Metrics {
    ticks: Mutex<Vec<(Box<str>, Arc<TickMetrics>)>>,
    /// Pages written, for a scraper to see its own effect on the host.
    scrapes: AtomicU64,
}

impl Metrics {
    /// A registry with no Ticks yet.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Reports `tick`'s counts (including those from before this call)
    /// under `tick="NAME"`. The host names its Ticks (the MCP server's
    /// names are unique), so the number of Ticks is the host's to bound.
    pub fn add_tick(&self, name: &str, tick: Arc<TickMetrics>) {
        lock(&self.ticks).push((series_key(name), tick));
    }

    /// Writes every family this registry has: the Ticks' and the host's.
    pub fn write(&self, page: &mut Exposition) {
        let scrapes = self.scrapes.fetch_add(1, Ordering::Relaxed) + 1;
        let ticks: Vec<(Box<str>, Counts)> = lock(&self.ticks)
            .iter()
            .map(|(name, t)| (name.clone(), t.snapshot()))
            .collect();

        page.family(
            "tickbox_calls_total",
            Kind::Counter,
            "Tool calls that reached a Tick, by Tick, tool and outcome (ok, error, unknown).",
        );
        for (tick, c) in &ticks {
            for (tool, s) in &c.tools.series {
                for (outcome, n) in OUTCOMES.iter().zip(s.calls) {
                    let labels = [("tick", &**tick), ("tool", &**tool), ("outcome", *outcome)];
                    page.sample("tickbox_calls_total", "", &labels, n);
                }
            }
        }

        page.family(
            "tickbox_call_duration_seconds",
            Kind::Histogram,
            "How long tool calls took, from sending to the outcome, by Tick and tool.",
        );
        let bounds: Vec<String> = CALL_SECONDS_BUCKETS
            .iter()
            .map(|b| {
                let mut s = String::new();
                b.write(&mut s);
                s
            })
            .collect();
        for (tick, c) in &ticks {
            for (tool, s) in &c.tools.series {
                let mut below = 0u64;
                for (i, n) in s.buckets.iter().enumerate() {
                    below += n;
                    let le = bounds.get(i).map_or("+Inf", String::as_str);
                    let labels = [("tick", &**tick), ("tool", &**tool), ("le", le)];
                    page.sample("tickbox_call_duration_seconds", "_bucket", &labels, below);
                }
                let labels = [("tick", &**tick), ("tool", &**tool)];
                page.sample("tickbox_call_duration_seconds", "_sum", &labels, s.seconds);
                page.sample("tickbox_call_duration_seconds", "_count", &labels, below);
            }
        }

        page.family(
            "tickbox_refusals_total",
            Kind::Counter,
            "What a Tick attempted and the host refused, by Tick and kind (path, socket, lookup, http_origin, quota).",
        );
        for (tick, c) in &ticks {
            for (kind, n) in DenialKind::ALL.iter().zip(c.refusals) {
                let labels = [("tick", &**tick), ("kind", kind.as_str())];
                page.sample("tickbox_refusals_total", "", &labels, n);
            }
        }

        page.family(
            "tickbox_limits_total",
            Kind::Counter,
            "Times a Tick ran into a bound, by Tick and bound (max_memory, max_handles).",
        );
        for (tick, c) in &ticks {
            for (bound, n) in &c.limits.series {
                let labels = [("tick", &**tick), ("bound", &**bound)];
                page.sample("tickbox_limits_total", "", &labels, *n);
            }
        }

        page.family(
            "tickbox_ticks_live",
            Kind::Gauge,
            "Running instances of each hosted Tick: 1 while a shared Tick runs, 0 once it ended; for a per-client Tick, its template and each client's instance.",
        );
        for (tick, c) in &ticks {
            let live = c.started.saturating_sub(c.ended);
            page.sample("tickbox_ticks_live", "", &[("tick", &**tick)], live);
        }

        if let Some(rss) = resident_bytes() {
            page.family(
                "tickbox_host_resident_memory_bytes",
                Kind::Gauge,
                "The host process's resident memory (VmRSS), wasm Ticks included; native Ticks are processes of their own.",
            );
            page.sample("tickbox_host_resident_memory_bytes", "", &[], rss);
        }

        page.family(
            "tickbox_metrics_scrapes_total",
            Kind::Counter,
            "Metrics pages this host has written.",
        );
        page.sample("tickbox_metrics_scrapes_total", "", &[], scrapes);
    }

    /// The whole page: [`write`](Self::write) into a new [`Exposition`].
    pub fn page(&self) -> String {
        let mut page = Exposition::new();
        self.write(&mut page);
        page.finish()
    }
}

/// This process's resident memory in bytes (`VmRSS` of
/// `/proc/self/status`), when the system has it.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Audit, Origin};
    use crate::outcome::{CallOutcome, EndReason, UnknownReason};
    use serde_json::json;

    fn counted() -> (Arc<TickMetrics>, Audit) {
        let t = Arc::new(TickMetrics::default());
        let audit = Audit::new(Origin::Mcp, vec![])
            .observed_by(t.clone())
            .for_session();
        (t, audit)
    }

    fn call(audit: &Audit, tool: &str, outcome: &CallOutcome, ms: u64) {
        audit.call(tool, false, &json!({}), outcome, Duration::from_millis(ms));
    }

    /// The samples of `page` whose line starts with `prefix`.
    fn lines<'a>(page: &'a str, prefix: &str) -> Vec<&'a str> {
        page.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn a_page_has_every_family_once_with_help_type_and_its_samples() {
        let metrics = Metrics::new();
        let (t, audit) = counted();
        audit.start("counter.wasm", "wasm component", None, json!({}));
        call(&audit, "increment", &CallOutcome::Ok(json!(1)), 3);
        call(&audit, "increment", &CallOutcome::Ok(json!(2)), 700);
        call(
            &audit,
            "history",
            &CallOutcome::Unknown(UnknownReason::TimedOut(Duration::from_secs(1))),
            2,
        );
        audit.denied(DenialKind::Socket, "10.0.0.1:22", "connect");
        audit.limit("max_memory", 1 << 20, "grow");
        metrics.add_tick("counter", t);
        let page = metrics.page();
        for family in [
            "tickbox_calls_total counter",
            "tickbox_call_duration_seconds histogram",
            "tickbox_refusals_total counter",
            "tickbox_limits_total counter",
            "tickbox_ticks_live gauge",
            "tickbox_host_resident_memory_bytes gauge",
        ] {
            let name = family.split(' ').next().unwrap();
            assert_eq!(
                lines(&page, &format!("# TYPE {family}")).len(),
                1,
                "{family}: {page}"
            );
            assert_eq!(lines(&page, &format!("# HELP {name} ")).len(), 1);
        }
        let has = |line: &str| {
            assert!(page.lines().any(|l| l == line), "no `{line}` in:\n{page}");
        };
        has(r#"tickbox_calls_total{tick="counter",tool="increment",outcome="ok"} 2"#);
        has(r#"tickbox_calls_total{tick="counter",tool="increment",outcome="error"} 0"#);
        has(r#"tickbox_calls_total{tick="counter",tool="history",outcome="unknown"} 1"#);
        // Cumulative buckets: 3 ms is in le=0.005 and up, 700 ms from le=1.
        has(
            r#"tickbox_call_duration_seconds_bucket{tick="counter",tool="increment",le="0.0025"} 0"#,
        );
        has(
            r#"tickbox_call_duration_seconds_bucket{tick="counter",tool="increment",le="0.005"} 1"#,
        );
        has(r#"tickbox_call_duration_seconds_bucket{tick="counter",tool="increment",le="0.5"} 1"#);
        has(r#"tickbox_call_duration_seconds_bucket{tick="counter",tool="increment",le="1"} 2"#);
        has(r#"tickbox_call_duration_seconds_bucket{tick="counter",tool="increment",le="+Inf"} 2"#);
        has(r#"tickbox_call_duration_seconds_sum{tick="counter",tool="increment"} 0.703"#);
        has(r#"tickbox_call_duration_seconds_count{tick="counter",tool="increment"} 2"#);
        has(r#"tickbox_refusals_total{tick="counter",kind="socket"} 1"#);
        has(r#"tickbox_refusals_total{tick="counter",kind="http_origin"} 0"#);
        has(r#"tickbox_limits_total{tick="counter",bound="max_memory"} 1"#);
        has(r#"tickbox_ticks_live{tick="counter"} 1"#);
        audit.end(&EndReason::Shutdown);
        let page = metrics.page();
        assert!(
            page.contains("tickbox_ticks_live{tick=\"counter\"} 0\n"),
            "{page}"
        );
        let rss = lines(&page, "tickbox_host_resident_memory_bytes ")[0];
        let bytes: u64 = rss.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(
            bytes > 1 << 20,
            "a running test has over 1 MiB resident: {rss}"
        );
        // Every line is a comment or `name{labels} value`, and the page ends
        // in a newline, as the format asks.
        assert!(page.ends_with('\n'));
        for l in page.lines() {
            assert!(l.starts_with("# ") || l.starts_with("tickbox_"), "{l}");
        }
    }

    #[test]
    fn label_values_are_escaped_for_the_format_and_for_terminals() {
        assert_eq!(label_value("plain"), "plain");
        assert_eq!(label_value(r#"a"b"#), r#"a\"b"#);
        assert_eq!(label_value(r"a\b"), r"a\\b");
        // A line break becomes the visible `\n` (two characters), which the
        // format then writes as `\\n`: a reader decodes `\n`, never a break.
        assert_eq!(label_value("a\nb"), r"a\\nb");
        assert_eq!(label_value("t\x1b]0;x\x07"), r"t\\x1b]0;x\\x07");
        assert_eq!(label_value("abc\u{202e}exe"), r"abc\\u{202e}exe");
        // Through a whole page: a hostile tool name forges no line or label.
        let metrics = Metrics::new();
        let (t, audit) = counted();
        let hostile = "x\"} 1e9\ntickbox_calls_total{tick=\"forged\u{2028}\\";
        call(&audit, hostile, &CallOutcome::Ok(json!(1)), 1);
        metrics.add_tick("hostile\n", t);
        let page = metrics.page();
        assert!(!page.chars().any(|c| text::is_unsafe(c) && c != '\n'));
        assert!(!page.contains("forged\"}"), "{page}");
        let calls = lines(&page, "tickbox_calls_total{");
        assert_eq!(calls.len(), 3, "one tool, three outcomes: {page}");
        // Positive control: the name is all there, escaped.
        assert!(
            calls[0].starts_with(
                r#"tickbox_calls_total{tick="hostile\\n",tool="x\"} 1e9\\ntickbox_calls_total{tick=\"forged\\u{2028}\\",outcome="#
            ),
            "{}",
            calls[0]
        );
    }

    #[test]
    fn one_ticks_tool_names_are_capped_and_the_rest_fold_into_other() {
        let metrics = Metrics::new();
        let (t, audit) = counted();
        let ok = CallOutcome::Ok(json!(1));
        for i in 0..MAX_METRIC_TOOLS_PER_TICK * 20 {
            call(&audit, &format!("tool{i:05}"), &ok, 1);
        }
        // A tool kept before the cap keeps its own series afterwards.
        call(&audit, "tool00000", &ok, 1);
        // A Tick naming a tool "(other)" adds to the fold, not a duplicate.
        call(&audit, OTHER, &ok, 1);
        metrics.add_tick("many", t);
        let page = metrics.page();
        let ok_lines = lines(&page, "tickbox_calls_total{");
        let ok_lines: Vec<_> = ok_lines.iter().filter(|l| l.contains("\"ok\"")).collect();
        assert_eq!(ok_lines.len(), MAX_METRIC_TOOLS_PER_TICK + 1, "{page}");
        let count_of = |tool: &str| -> u64 {
            let line =
                format!("tickbox_calls_total{{tick=\"many\",tool=\"{tool}\",outcome=\"ok\"}} ");
            page.lines()
                .find_map(|l| l.strip_prefix(line.as_str()))
                .unwrap_or_else(|| panic!("no {tool} in {page}"))
                .parse()
                .unwrap()
        };
        // Positive control: the first names each have their series.
        assert_eq!(count_of("tool00000"), 2);
        assert_eq!(
            count_of(&format!("tool{:05}", MAX_METRIC_TOOLS_PER_TICK - 1)),
            1
        );
        let folded = (MAX_METRIC_TOOLS_PER_TICK * 19 + 1) as u64;
        assert_eq!(count_of(OTHER), folded);
        assert!(!page.contains(&format!("tool{:05}\"", MAX_METRIC_TOOLS_PER_TICK)));
        // Every sample's labels are distinct (Prometheus drops duplicates).
        let samples: Vec<&str> = page
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').unwrap().0)
            .collect();
        let distinct: std::collections::BTreeSet<_> = samples.iter().collect();
        assert_eq!(distinct.len(), samples.len());
        // The page stays small: 65 tools' series, whatever was called.
        assert!(page.len() < 256 * 1024, "{}", page.len());
    }

    #[test]
    fn long_names_are_cut_and_names_that_print_alike_are_one_series() {
        let metrics = Metrics::new();
        let (t, audit) = counted();
        let ok = CallOutcome::Ok(json!(1));
        let long = "n".repeat(MAX_METRIC_LABEL_CHARS * 100);
        call(&audit, &long, &ok, 1);
        call(&audit, &format!("{long}-other-tail"), &ok, 1);
        // The escape character and its visible escape print alike.
        call(&audit, "a\x1b", &ok, 1);
        call(&audit, "a\\x1b", &ok, 1);
        metrics.add_tick("t", t);
        let page = metrics.page();
        let cut = format!("{}…", "n".repeat(MAX_METRIC_LABEL_CHARS));
        let line = format!("tickbox_calls_total{{tick=\"t\",tool=\"{cut}\",outcome=\"ok\"}} 2");
        assert!(page.lines().any(|l| l == line), "{page}");
        let line = r#"tickbox_calls_total{tick="t",tool="a\\x1b",outcome="ok"} 2"#;
        assert!(page.lines().any(|l| l == line), "{page}");
        assert_eq!(lines(&page, "tickbox_calls_total{").len(), 2 * 3);
    }

    #[test]
    fn observing_is_what_the_audit_records_and_needs_no_line_sink() {
        // A handle with an observer and a sink: both see the same events.
        #[derive(Default)]
        struct Lines(Mutex<Vec<String>>);
        impl crate::audit::AuditSink for Lines {
            fn offer(&self, event: crate::audit::AuditLine) -> bool {
                lock(&self.0).push(event.into_line());
                true
            }
        }
        let sink = Arc::new(Lines::default());
        let t = Arc::new(TickMetrics::default());
        let audit = Audit::new(Origin::Cli, vec![sink.clone()])
            .observed_by(t.clone())
            .with_args(true)
            .for_session();
        audit.denied(DenialKind::Quota, "a write", "max_write");
        audit.denied(DenialKind::Lookup, "example.com", "no grant");
        call(&audit, "t", &CallOutcome::Ok(json!(1)), 1);
        let c = t.snapshot();
        assert_eq!(c.refusals, [0, 0, 1, 0, 1]);
        assert_eq!(c.tools.series["t"].calls, [1, 0, 0]);
        assert_eq!(lock(&sink.0).len(), 3, "and each is one line too");
        assert!(lock(&sink.0)[2].contains("\"args\""), "with_args kept");
    }
}
