//! OpenTelemetry: traces and metrics of what Ticks do, exported over OTLP
//! (HTTP, JSON encoding) to whatever collector `OTEL_EXPORTER_OTLP_*`
//! names.
//!
//! **One place notices an event.** Like [`crate::metrics`], an [`Otel`]
//! is an [`AuditObserver`]: the audit stream's events are its only input,
//! so the sandbox and the session are not instrumented a second time. A
//! `start` event opens a *session span* (one per Tick session, ended by
//! the session's `end`); each `call` event becomes a *call span*, a child
//! of its session's span. A call that answered an MCP request (the event
//! carries [`McpCall`]) follows OpenTelemetry's MCP semantic conventions:
//! a server span named `tools/call {tool}` with `mcp.method.name`,
//! `gen_ai.tool.name`, `gen_ai.operation.name` (`execute_tool`),
//! `mcp.session.id` (over HTTP), `mcp.protocol.version`,
//! `jsonrpc.request.id`, `network.transport`, and on failure `error.type`
//! and an error status whose description is the tool's message. A
//! request the facade answered itself (an [`Event::McpRequest`]: a
//! `tools/call` of its own tools or refused before it was sent, and
//! `initialize`, `tools/list` and the `resources/*` methods) is the same
//! kind of server span, so every `tools/call` a client makes shows up. A `traceparent` the
//! client sent in the request's `_meta` makes the call span a child of
//! the client's span (linked to the session span). Metrics are aggregated
//! here and exported every interval, cumulative: the MCP convention's
//! `mcp.server.operation.duration` and `mcp.server.session.duration` (a
//! point per [`Event::McpSessionEnd`]),
//! and tickbox's own call durations, refusals, limits, live Ticks and the
//! spans this exporter dropped.
//!
//! **Off and free when not asked for.** The CLI makes an [`Otel`] only
//! when an OTLP endpoint is configured; without one, no observer is added
//! to any audit handle, no thread runs and nothing is allocated per call.
//!
//! **Never in the way.** Observing a call builds its span and offers it
//! to a bounded queue ([`OTEL_QUEUE_SPANS`]) with `try_send`; a full queue
//! (a receiver that is slow or down) drops the span and counts it
//! (`tickbox.telemetry.dropped`), never making a Tick, a call or the
//! host wait. One thread (`tickbox-otlp`) batches spans, exports them and
//! the metrics, each request bounded by the configured timeout. An export
//! that fails is one `tracing` warning, then at most one more every
//! [`OTEL_WARN_INTERVAL`] (with the count of failures in between). A
//! process on its way out gives the thread [`OTEL_FLUSH_WAIT`] to send
//! what is left ([`Otel::finish`]).
//!
//! **Never raw, always bounded.** Every string a Tick chose (a tool name,
//! an error message, an end reason's detail) is cut at
//! [`MAX_OTEL_TEXT_CHARS`] and escaped by the one character policy
//! ([`TickText::line`]) before it becomes an attribute, a span name or a
//! status message. Metric series are capped per instrument at
//! [`MAX_OTEL_SERIES`] (the rest fold into one series marked
//! `otel.metric.overflow`), and session spans waiting for their end at
//! [`MAX_OTEL_OPEN_SESSIONS`].
//!
//! The HTTP client is not here: the CLI hands [`Otel::start`] an
//! [`OtlpPost`] (hyper), so this crate needs no HTTP stack.
//!
//! **By job.** This file keeps the books: it turns events into spans and
//! aggregates series (the observer). `endpoint` holds where they go (the
//! configuration and the [`OtlpPost`] seam), `wire` encodes them as
//! OTLP/JSON, and `export` is the thread that sends them.

use crate::audit::{outcome_name, AuditObserver, DenialKind, Event, McpCall, McpTransport, Origin};
pub use crate::limits::{
    MAX_OTEL_OPEN_SESSIONS, MAX_OTEL_RESPONSE_BYTES, MAX_OTEL_SERIES, MAX_OTEL_TEXT_CHARS,
    OTEL_BATCH_SPANS, OTEL_DEFAULT_METRIC_INTERVAL, OTEL_DEFAULT_SPAN_DELAY, OTEL_DEFAULT_TIMEOUT,
    OTEL_FLUSH_WAIT, OTEL_QUEUE_SPANS, OTEL_WARN_INTERVAL,
};
use crate::metrics::CALL_SECONDS_BUCKETS;
use crate::outcome::{CallOutcome, UnknownReason};
use crate::util::lock;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tickbox_protocol::text::{self, TickText};

mod endpoint;
mod export;
mod wire;

pub use endpoint::{Endpoint, OtelConfig, OtlpPost};
use export::Exporter;
pub use export::THREAD_NAME;

/// One finished span, waiting in the queue.
#[derive(Debug)]
struct SpanRecord {
    trace: [u8; 16],
    id: [u8; 8],
    parent: Option<[u8; 8]>,
    /// A link to another span of this host (the session's, when the call
    /// has the client's parent).
    link: Option<([u8; 16], [u8; 8])>,
    name: String,
    /// 1 internal, 2 server (OTLP's `SpanKind`).
    kind: u8,
    start: u64,
    end: u64,
    attrs: Vec<(&'static str, Value)>,
    /// An error status and its description.
    error: Option<String>,
}

/// A session span waiting for its `end`.
struct OpenSession {
    trace: [u8; 16],
    id: [u8; 8],
    start: u64,
    tick: String,
    backend: String,
    origin: Origin,
}

/// The upper bounds (seconds) of `mcp.server.session.duration`'s
/// buckets, besides `+Inf`: the ones the MCP convention gives.
pub const MCP_SESSION_SECONDS_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// A histogram's cumulative state, over the bounds its instrument gives.
#[derive(Debug, Clone, Default)]
struct Hist {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    /// One count per bound and one past them (sized at the first record).
    buckets: Vec<u64>,
}

impl Hist {
    fn record(&mut self, secs: f64, bounds: &[f64]) {
        if self.count == 0 || secs < self.min {
            self.min = secs;
        }
        if self.count == 0 || secs > self.max {
            self.max = secs;
        }
        self.count += 1;
        self.sum += secs;
        self.buckets.resize(bounds.len() + 1, 0);
        let i = bounds
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(bounds.len());
        self.buckets[i] += 1;
    }
}

/// A series' attributes: names are the host's, values already bounded
/// and escaped.
type Attrs = Vec<(&'static str, String)>;

/// Series of one instrument, at most [`MAX_OTEL_SERIES`] of them besides
/// the overflow series.
#[derive(Debug)]
struct Capped<V> {
    series: BTreeMap<Attrs, V>,
    overflow: Option<V>,
}

impl<V> Default for Capped<V> {
    fn default() -> Self {
        Capped {
            series: BTreeMap::new(),
            overflow: None,
        }
    }
}

impl<V: Default> Capped<V> {
    fn entry(&mut self, attrs: Attrs) -> &mut V {
        if self.series.contains_key(&attrs) || self.series.len() < MAX_OTEL_SERIES {
            self.series.entry(attrs).or_default()
        } else {
            self.overflow.get_or_insert_with(V::default)
        }
    }

    /// Every series, the overflow one last with `otel.metric.overflow`.
    fn each(&self) -> impl Iterator<Item = (Vec<(&'static str, Value)>, &V)> + '_ {
        let named = self.series.iter().map(|(a, v)| {
            let attrs = a.iter().map(|(k, s)| (*k, json!(s))).collect();
            (attrs, v)
        });
        let overflow = self
            .overflow
            .iter()
            .map(|v| (vec![("otel.metric.overflow", json!(true))], v));
        named.chain(overflow)
    }
}

/// What the metrics add up to so far.
#[derive(Debug, Default)]
struct Aggregates {
    calls: Capped<Hist>,
    mcp: Capped<Hist>,
    mcp_sessions: Capped<Hist>,
    refusals: Capped<u64>,
    limits: Capped<u64>,
    live: Capped<i64>,
}

/// State the observer and the exporter's thread share.
struct Inner {
    config: OtelConfig,
    tx: Mutex<Option<SyncSender<SpanRecord>>>,
    sessions: Mutex<HashMap<Box<str>, OpenSession>>,
    aggregates: Mutex<Aggregates>,
    dropped: AtomicU64,
    /// Sessions not traced as a parent because [`MAX_OTEL_OPEN_SESSIONS`]
    /// were open.
    untracked: AtomicU64,
    ids: AtomicU64,
    seed: u64,
    /// When the metrics began (their start time).
    since: u64,
}

/// The OpenTelemetry observer and its exporter thread; see the module
/// docs. Add it to audit handles with
/// [`Audit::observed_by`](crate::audit::Audit::observed_by).
pub struct Otel {
    inner: Arc<Inner>,
    done: Mutex<Option<Receiver<()>>>,
}

impl std::fmt::Debug for Otel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Otel")
            .field("traces", &self.inner.config.traces)
            .field("metrics", &self.inner.config.metrics)
            .finish()
    }
}

impl Otel {
    /// Starts the exporter's thread, which sends through `post`.
    pub fn start(config: OtelConfig, post: Box<dyn OtlpPost>) -> std::io::Result<Arc<Otel>> {
        Otel::with_queue(config, post, OTEL_QUEUE_SPANS)
    }

    /// [`start`](Self::start) with a queue of `spans` (tests).
    pub fn with_queue(
        config: OtelConfig,
        post: Box<dyn OtlpPost>,
        spans: usize,
    ) -> std::io::Result<Arc<Otel>> {
        let (tx, rx) = sync_channel(spans);
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let inner = Arc::new(Inner {
            config,
            tx: Mutex::new(Some(tx)),
            sessions: Mutex::new(HashMap::new()),
            aggregates: Mutex::new(Aggregates::default()),
            dropped: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
            ids: AtomicU64::new(0),
            seed: seed(),
            since: now_nanos(),
        });
        let shared = inner.clone();
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                Exporter::new(shared, post).run(rx);
                let _ = done_tx.send(());
            })?;
        Ok(Arc::new(Otel {
            inner,
            done: Mutex::new(Some(done_rx)),
        }))
    }

    /// Closes the queue, and waits at most [`OTEL_FLUSH_WAIT`] for the
    /// thread to send what is queued and the metrics once more.
    pub fn finish(&self) {
        self.finish_within(OTEL_FLUSH_WAIT)
    }

    /// [`finish`](Self::finish) with its own wait.
    pub fn finish_within(&self, wait: Duration) {
        lock(&self.inner.tx).take();
        if let Some(done) = lock(&self.done).take() {
            let _ = done.recv_timeout(wait);
        }
    }

    /// Spans dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }
}

impl Inner {
    fn traces(&self) -> bool {
        self.config.traces.is_some()
    }

    fn metrics(&self) -> bool {
        self.config.metrics.is_some()
    }

    /// A new non-zero id: splitmix64 of a per-process random seed and a
    /// counter (unique within the process; unpredictable enough for ids,
    /// which are not secrets).
    fn next_id(&self) -> u64 {
        loop {
            let n = self.ids.fetch_add(1, Ordering::Relaxed);
            let mut z = self
                .seed
                .wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            if z != 0 {
                return z;
            }
        }
    }

    fn trace_id(&self) -> [u8; 16] {
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&self.next_id().to_be_bytes());
        t[8..].copy_from_slice(&self.next_id().to_be_bytes());
        t
    }

    fn span_id(&self) -> [u8; 8] {
        self.next_id().to_be_bytes()
    }

    fn offer(&self, span: SpanRecord) {
        let tx = lock(&self.tx);
        let Some(tx) = tx.as_ref() else {
            return;
        };
        match tx.try_send(span) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn start(&self, session: Option<&str>, tick: &str, backend: &str, origin: Origin) {
        let tick = bounded(tick);
        if self.metrics() {
            *lock(&self.aggregates)
                .live
                .entry(vec![("tickbox.tick", tick.clone())]) += 1;
        }
        // Kept whichever signals are on: calls and refusals are named by
        // their session's Tick, and the session span needs its start.
        let Some(session) = session else {
            return;
        };
        let mut open = lock(&self.sessions);
        if open.len() >= MAX_OTEL_OPEN_SESSIONS {
            self.untracked.fetch_add(1, Ordering::Relaxed);
            return;
        }
        open.insert(
            session.into(),
            OpenSession {
                trace: self.trace_id(),
                id: self.span_id(),
                start: now_nanos(),
                tick,
                backend: bounded(backend),
                origin,
            },
        );
    }

    fn end(&self, session: Option<&str>, reason: &str) {
        let open = session.and_then(|s| lock(&self.sessions).remove(s));
        if self.metrics() {
            let tick = open.as_ref().map(|o| o.tick.clone());
            if let Some(tick) = tick {
                *lock(&self.aggregates)
                    .live
                    .entry(vec![("tickbox.tick", tick)]) -= 1;
            }
        }
        let Some(open) = open.filter(|_| self.traces()) else {
            return;
        };
        let failed = matches!(
            reason,
            "violation" | "io" | "stdin_stalled" | "start_failed"
        );
        let mut attrs = vec![
            ("tickbox.tick", json!(open.tick)),
            ("tickbox.backend", json!(open.backend)),
            ("tickbox.origin", json!(open.origin.as_str())),
            ("tickbox.session.id", json!(bounded(session.unwrap_or("")))),
            ("tickbox.end.reason", json!(reason)),
        ];
        if failed {
            attrs.push(("error.type", json!(reason)));
        }
        self.offer(SpanRecord {
            trace: open.trace,
            id: open.id,
            parent: None,
            link: None,
            name: "tick session".into(),
            kind: 1,
            start: open.start,
            end: now_nanos(),
            attrs,
            error: failed.then(|| format!("the Tick's session ended: {reason}")),
        });
    }

    fn call(
        &self,
        session: Option<&str>,
        tool: &str,
        mutates: bool,
        outcome: &CallOutcome,
        took: Duration,
        mcp: Option<&McpCall<'_>>,
    ) {
        let (error_type, message) = failure(outcome);
        let tool_shown = bounded(tool);
        let called = mcp.map_or_else(|| tool_shown.clone(), |m| bounded(m.tool));
        let parent_of = session.and_then(|s| {
            lock(&self.sessions)
                .get(s)
                .map(|o| (o.trace, o.id, o.tick.clone()))
        });
        let tick = parent_of.as_ref().map(|p| p.2.clone());
        if self.metrics() {
            let secs = took.as_secs_f64();
            let mut a = lock(&self.aggregates);
            let mut attrs = vec![
                ("gen_ai.tool.name", tool_shown.clone()),
                ("tickbox.call.outcome", outcome_name(outcome).to_string()),
            ];
            if let Some(t) = &tick {
                attrs.push(("tickbox.tick", t.clone()));
            }
            a.calls.entry(attrs).record(secs, &CALL_SECONDS_BUCKETS);
            if let Some(m) = mcp {
                let attrs = mcp_metric_attrs(m, Some(&called), error_type);
                a.mcp.entry(attrs).record(secs, &CALL_SECONDS_BUCKETS);
            }
        }
        if !self.traces() {
            return;
        }
        let end = now_nanos();
        let start = end.saturating_sub(took.as_nanos().min(u64::MAX as u128) as u64);
        let session_span = parent_of.as_ref().map(|p| (p.0, p.1));
        let client = mcp.and_then(|m| m.traceparent).and_then(traceparent);
        let (trace, parent, link) = match (client, session_span) {
            (Some((t, p)), s) => (t, Some(p), s),
            (None, Some((t, p))) => (t, Some(p), None),
            (None, None) => (self.trace_id(), None, None),
        };
        let mut attrs = vec![
            ("gen_ai.operation.name", json!("execute_tool")),
            ("gen_ai.tool.name", json!(called)),
            ("tickbox.tool", json!(tool_shown)),
            ("tickbox.call.mutates", json!(mutates)),
            ("tickbox.call.outcome", json!(outcome_name(outcome))),
        ];
        if let Some(s) = session {
            attrs.push(("tickbox.session.id", json!(bounded(s))));
        }
        if let Some(t) = tick {
            attrs.push(("tickbox.tick", json!(t)));
        }
        let (name, kind) = match mcp {
            Some(m) => {
                mcp_span_attrs(m, &mut attrs);
                (format!("{} {called}", bounded(m.method)), 2)
            }
            None => (format!("execute_tool {called}"), 1),
        };
        if let Some(e) = error_type {
            attrs.push(("error.type", json!(e)));
        }
        if let CallOutcome::Failed { error, .. } = outcome {
            attrs.push(("tickbox.error.code", json!(error.code)));
        }
        self.offer(SpanRecord {
            trace,
            id: self.span_id(),
            parent,
            link,
            name,
            kind,
            start,
            end,
            attrs,
            error: message,
        });
    }

    /// An MCP request the facade answered without a Tick call: a server
    /// span and an operation-duration point like a Tick call's, a child
    /// of the session span of the Tick it was about. Only a `tools/call`
    /// names a tool (and is `execute_tool`).
    fn mcp_request(
        &self,
        session: Option<&str>,
        m: &McpCall<'_>,
        outcome: &str,
        error_type: Option<&str>,
        message: Option<&str>,
        took: Duration,
    ) {
        // A tool the facade does not have is the client's word: not a
        // name a metric series or a span name is made of.
        let tool_call = m.method == "tools/call";
        let known = tool_call && outcome != "unknown_tool";
        let called = bounded(m.tool);
        let parent_of = session.and_then(|s| {
            lock(&self.sessions)
                .get(s)
                .map(|o| (o.trace, o.id, o.tick.clone()))
        });
        if self.metrics() {
            let attrs = mcp_metric_attrs(m, known.then_some(&called), error_type);
            lock(&self.aggregates)
                .mcp
                .entry(attrs)
                .record(took.as_secs_f64(), &CALL_SECONDS_BUCKETS);
        }
        if !self.traces() {
            return;
        }
        let end = now_nanos();
        let start = end.saturating_sub(took.as_nanos().min(u64::MAX as u128) as u64);
        let session_span = parent_of.as_ref().map(|p| (p.0, p.1));
        let (trace, parent, link) = match (m.traceparent.and_then(traceparent), session_span) {
            (Some((t, p)), s) => (t, Some(p), s),
            (None, Some((t, p))) => (t, Some(p), None),
            (None, None) => (self.trace_id(), None, None),
        };
        let mut attrs = Vec::new();
        if tool_call {
            attrs.push(("gen_ai.operation.name", json!("execute_tool")));
            attrs.push(("gen_ai.tool.name", json!(called)));
            attrs.push(("tickbox.call.outcome", json!(bounded(outcome))));
        }
        if let Some(s) = session {
            attrs.push(("tickbox.session.id", json!(bounded(s))));
        }
        if let Some((_, _, tick)) = parent_of {
            attrs.push(("tickbox.tick", json!(tick)));
        }
        mcp_span_attrs(m, &mut attrs);
        if let Some(e) = error_type {
            attrs.push(("error.type", json!(bounded(e))));
        }
        let method = bounded(m.method);
        let name = if known {
            format!("{method} {called}")
        } else {
            method
        };
        self.offer(SpanRecord {
            trace,
            id: self.span_id(),
            parent,
            link,
            name,
            kind: 2,
            start,
            end,
            attrs,
            error: error_type.map(|_| bounded(message.unwrap_or(""))),
        });
    }

    /// An MCP session ended: a point of `mcp.server.session.duration`.
    fn mcp_session_end(
        &self,
        transport: McpTransport,
        version: Option<&str>,
        lasted: Duration,
        error_type: Option<&str>,
    ) {
        if !self.metrics() {
            return;
        }
        let mut attrs = vec![("network.transport", transport_name(transport).to_string())];
        if transport == McpTransport::Http {
            attrs.push(("network.protocol.name", "http".to_string()));
        }
        if let Some(v) = version {
            attrs.push(("mcp.protocol.version", bounded(v)));
        }
        if let Some(e) = error_type {
            attrs.push(("error.type", bounded(e)));
        }
        lock(&self.aggregates)
            .mcp_sessions
            .entry(attrs)
            .record(lasted.as_secs_f64(), &MCP_SESSION_SECONDS_BUCKETS);
    }

    fn refused(&self, session: Option<&str>, what: DenialKind) {
        if !self.metrics() {
            return;
        }
        let mut attrs = vec![("tickbox.refusal.kind", what.as_str().to_string())];
        if let Some(t) = self.tick_of(session) {
            attrs.push(("tickbox.tick", t));
        }
        *lock(&self.aggregates).refusals.entry(attrs) += 1;
    }

    fn limit(&self, session: Option<&str>, bound: &str) {
        if !self.metrics() {
            return;
        }
        let mut attrs = vec![("tickbox.limit.bound", bounded(bound))];
        if let Some(t) = self.tick_of(session) {
            attrs.push(("tickbox.tick", t));
        }
        *lock(&self.aggregates).limits.entry(attrs) += 1;
    }

    fn tick_of(&self, session: Option<&str>) -> Option<String> {
        session.and_then(|s| lock(&self.sessions).get(s).map(|o| o.tick.clone()))
    }
}

impl AuditObserver for Otel {
    fn observe(&self, session: Option<&str>, event: &Event<'_>) {
        let inner = &self.inner;
        match *event {
            Event::Start {
                tick,
                backend,
                origin,
            } => inner.start(session, tick, backend, origin),
            Event::End { reason } => inner.end(session, reason),
            Event::Call {
                tool,
                mutates,
                outcome,
                took,
                mcp,
            } => inner.call(session, tool, mutates, outcome, took, mcp),
            Event::Denied { what, .. } => inner.refused(session, what),
            Event::Limit { bound, .. } => inner.limit(session, bound),
            Event::McpRequest {
                request,
                outcome,
                error,
                message,
                took,
            } => inner.mcp_request(session, request, outcome, error, message, took),
            Event::McpSessionEnd {
                transport,
                protocol_version,
                lasted,
                error,
            } => inner.mcp_session_end(transport, protocol_version, lasted, error),
            _ => {}
        }
    }
}

/// `error.type` and the status description of a call that failed: a
/// tool's error is `tool_error` (MCP's convention for a result with
/// `isError`) with its message; an unknown outcome is named by why.
fn failure(outcome: &CallOutcome) -> (Option<&'static str>, Option<String>) {
    match outcome {
        CallOutcome::Ok(_) => (None, None),
        CallOutcome::Failed { error, .. } => {
            (Some("tool_error"), Some(bounded(error.message.wire())))
        }
        CallOutcome::Unknown(why) => {
            let kind = match why {
                UnknownReason::TimedOut(_) => "timeout",
                UnknownReason::SessionEnded(_) => "session_ended",
                UnknownReason::Malformed(_) => "malformed_response",
                UnknownReason::TooLarge { .. } => "response_too_large",
                UnknownReason::Reported(_) => "reported",
                UnknownReason::Unrecorded(_) => "unrecorded",
            };
            (Some(kind), Some(bounded(&why.to_string())))
        }
    }
}

/// The attributes of an MCP request's `mcp.server.operation.duration`
/// point: the method, the tool (when one is named), `execute_tool`, the
/// transport, the protocol version and `error.type`.
fn mcp_metric_attrs(m: &McpCall<'_>, tool: Option<&String>, error_type: Option<&str>) -> Attrs {
    let mut attrs = vec![("mcp.method.name", bounded(m.method))];
    if let Some(t) = tool {
        attrs.push(("gen_ai.tool.name", t.clone()));
    }
    if m.method == "tools/call" {
        attrs.push(("gen_ai.operation.name", "execute_tool".to_string()));
    }
    attrs.push(("network.transport", transport_name(m.transport).to_string()));
    if let Some(v) = m.protocol_version {
        attrs.push(("mcp.protocol.version", bounded(v)));
    }
    if let Some(e) = error_type {
        attrs.push(("error.type", bounded(e)));
    }
    attrs
}

/// The MCP attributes of a server span: the method, the request id, the
/// session id, the transport and the protocol version.
fn mcp_span_attrs(m: &McpCall<'_>, attrs: &mut Vec<(&'static str, Value)>) {
    attrs.push(("mcp.method.name", json!(bounded(m.method))));
    attrs.push((
        "jsonrpc.request.id",
        json!(bounded(&m.request_id.to_string())),
    ));
    if let Some(s) = m.session {
        attrs.push(("mcp.session.id", json!(bounded(s))));
    }
    attrs.push(("network.transport", json!(transport_name(m.transport))));
    if m.transport == McpTransport::Http {
        attrs.push(("network.protocol.name", json!("http")));
    }
    if let Some(v) = m.protocol_version {
        attrs.push(("mcp.protocol.version", json!(bounded(v))));
    }
}

/// `network.transport` for an MCP transport (`pipe` for stdio, `tcp` for
/// HTTP, as the convention says).
fn transport_name(t: McpTransport) -> &'static str {
    match t {
        McpTransport::Stdio => "pipe",
        McpTransport::Http => "tcp",
    }
}

/// Text a Tick (or a client) may have chosen, as telemetry carries it:
/// cut at [`MAX_OTEL_TEXT_CHARS`] (ending in `…`) and escaped by the one
/// character policy.
pub fn bounded(raw: &str) -> String {
    let cut = text::truncate(raw, MAX_OTEL_TEXT_CHARS);
    if cut.len() < raw.len() {
        TickText::new(format!("{cut}…")).line()
    } else {
        TickText::new(raw).line()
    }
}

/// A W3C `traceparent` (`00-TRACE-SPAN-FLAGS`): its trace and span ids,
/// when well-formed and not all zero.
fn traceparent(s: &str) -> Option<([u8; 16], [u8; 8])> {
    let mut parts = s.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2
        || version == "ff"
        || flags.len() != 2
        || !hex_ok(version)
        || !hex_ok(flags)
    {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let mut t = [0u8; 16];
    let mut p = [0u8; 8];
    unhex(trace, &mut t)?;
    unhex(span, &mut p)?;
    (t != [0; 16] && p != [0; 8]).then_some((t, p))
}

fn hex_ok(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn unhex(s: &str, out: &mut [u8]) -> Option<()> {
    if s.len() != out.len() * 2 || !hex_ok(s) {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(())
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos().min(u64::MAX as u128) as u64)
        .unwrap_or(0)
}

/// A per-process seed for ids: from the kernel, else the time and pid.
fn seed() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    now_nanos() ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Audit, RequestId};
    use crate::outcome::EndReason;
    use std::time::Instant;
    use tickbox_protocol::RpcError;

    /// Bodies posted, by path.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<(String, Value)>>>);
    impl OtlpPost for Kept {
        fn post(
            &mut self,
            to: &Endpoint,
            _: &[(String, String)],
            body: Vec<u8>,
            _: Duration,
        ) -> Result<(), String> {
            let v = serde_json::from_slice(&body).expect("JSON");
            lock(&self.0).push((to.path.clone(), v));
            Ok(())
        }
    }

    fn config() -> OtelConfig {
        OtelConfig::new(
            Some(Endpoint::parse("http://127.0.0.1:1/v1/traces").unwrap()),
            Some(Endpoint::parse("http://127.0.0.1:1/v1/metrics").unwrap()),
        )
    }

    fn spans(kept: &Kept) -> Vec<Value> {
        lock(&kept.0)
            .iter()
            .filter(|(p, _)| p == "/v1/traces")
            .flat_map(|(_, v)| {
                v["resourceSpans"][0]["scopeSpans"][0]["spans"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }

    fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
        span["attributes"]
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| &a["value"])
    }

    #[test]
    fn endpoints_parse_as_the_variables_give_them() {
        let e = Endpoint::with_signal("http://collector:4318", "v1/traces").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("collector", 4318, "/v1/traces")
        );
        let e = Endpoint::with_signal("http://127.0.0.1:4318/", "v1/metrics").unwrap();
        assert_eq!(e.path, "/v1/metrics");
        let e = Endpoint::parse("http://[::1]:9/x").unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 9));
        assert_eq!(Endpoint::parse("http://h").unwrap().port, 80);
        assert!(Endpoint::parse("https://h:4318")
            .unwrap_err()
            .contains("https"));
        assert!(Endpoint::parse("ftp://h").is_err());
        assert!(Endpoint::parse("http://u:p@h/").is_err());
        assert!(Endpoint::parse("http://h:x/").is_err());
    }

    #[test]
    fn sessions_and_mcp_calls_become_spans_with_the_conventions() {
        let kept = Kept::default();
        let otel = Otel::start(config(), Box::new(kept.clone())).unwrap();
        let audit = Audit::new(Origin::Mcp, vec![])
            .observed_by(otel.clone())
            .for_session();
        audit.start("counter.wasm", "wasm component", None, json!({}));
        let mcp = McpCall {
            method: "tools/call",
            tool: "counter_increment",
            session: Some("sess-1"),
            request_id: RequestId::Number(7),
            transport: McpTransport::Http,
            traceparent: None,
            protocol_version: Some("2025-11-25"),
        };
        audit.call_via(
            "increment",
            true,
            &json!({}),
            &CallOutcome::Ok(json!(1)),
            Duration::from_millis(2),
            Some(&mcp),
        );
        let failed = CallOutcome::Failed {
            error: RpcError {
                code: -32000,
                message: "bad\x1b]2;x\x07\nline".into(),
                data: None,
            },
            executed: false,
        };
        audit.call(
            "history",
            false,
            &json!({}),
            &failed,
            Duration::from_millis(1),
        );
        audit.denied(DenialKind::Path, "../x", "out");
        audit.end(&EndReason::Shutdown);
        otel.finish_within(Duration::from_secs(20));
        let s = spans(&kept);
        assert_eq!(s.len(), 3, "{s:?}");
        let session = s.iter().find(|x| x["name"] == "tick session").unwrap();
        let call = s
            .iter()
            .find(|x| x["name"] == "tools/call counter_increment")
            .unwrap();
        let plain = s
            .iter()
            .find(|x| x["name"] == "execute_tool history")
            .unwrap();
        assert_eq!(call["kind"], 2);
        assert_eq!(call["traceId"], session["traceId"]);
        assert_eq!(call["parentSpanId"], session["spanId"]);
        assert_eq!(
            attr(call, "mcp.method.name").unwrap()["stringValue"],
            "tools/call"
        );
        assert_eq!(
            attr(call, "gen_ai.tool.name").unwrap()["stringValue"],
            "counter_increment"
        );
        assert_eq!(
            attr(call, "tickbox.tool").unwrap()["stringValue"],
            "increment"
        );
        assert_eq!(
            attr(call, "mcp.session.id").unwrap()["stringValue"],
            "sess-1"
        );
        assert_eq!(
            attr(call, "jsonrpc.request.id").unwrap()["stringValue"],
            "7"
        );
        assert_eq!(
            attr(call, "gen_ai.operation.name").unwrap()["stringValue"],
            "execute_tool"
        );
        assert_eq!(
            attr(call, "mcp.protocol.version").unwrap()["stringValue"],
            "2025-11-25"
        );
        assert!(attr(plain, "mcp.protocol.version").is_none());
        assert_eq!(call["status"]["code"], 0);
        assert_eq!(plain["status"]["code"], 2);
        assert_eq!(
            attr(plain, "error.type").unwrap()["stringValue"],
            "tool_error"
        );
        let message = plain["status"]["message"].as_str().unwrap();
        assert!(!message.chars().any(text::is_unsafe), "{message:?}");
        assert_eq!(message, r"bad\x1b]2;x\x07\nline", "escaped, all there");
        assert!(attr(plain, "mcp.method.name").is_none(), "not an MCP call");
        let metrics: Vec<Value> = lock(&kept.0)
            .iter()
            .filter(|(p, _)| p == "/v1/metrics")
            .map(|(_, v)| v.clone())
            .collect();
        let last = metrics.last().expect("metrics sent at the end");
        let names: Vec<&str> = last["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"mcp.server.operation.duration"),
            "{names:?}"
        );
        assert!(names.contains(&"tickbox.refusals"), "{names:?}");
    }

    #[test]
    fn a_client_traceparent_is_the_parent_and_the_session_a_link() {
        let kept = Kept::default();
        let otel = Otel::start(config(), Box::new(kept.clone())).unwrap();
        let audit = Audit::new(Origin::Mcp, vec![])
            .observed_by(otel.clone())
            .for_session();
        audit.start("t", "native", None, json!({}));
        let trace = "0af7651916cd43dd8448eb211c80319c";
        let tp = format!("00-{trace}-b7ad6b7169203331-01");
        let mcp = McpCall {
            method: "tools/call",
            tool: "t",
            session: None,
            request_id: RequestId::Text("a"),
            transport: McpTransport::Stdio,
            traceparent: Some(&tp),
            protocol_version: None,
        };
        audit.call_via(
            "t",
            false,
            &json!({}),
            &CallOutcome::Ok(json!(1)),
            Duration::ZERO,
            Some(&mcp),
        );
        // Positive control: a malformed one is ignored.
        let bad = McpCall {
            traceparent: Some("00-zz-b7ad6b7169203331-01"),
            ..mcp
        };
        audit.call_via(
            "t",
            false,
            &json!({}),
            &CallOutcome::Ok(json!(1)),
            Duration::ZERO,
            Some(&bad),
        );
        audit.end(&EndReason::Shutdown);
        otel.finish_within(Duration::from_secs(20));
        let s = spans(&kept);
        let session = s.iter().find(|x| x["name"] == "tick session").unwrap();
        let calls: Vec<&Value> = s.iter().filter(|x| x["name"] == "tools/call t").collect();
        assert_eq!(calls[0]["traceId"], trace);
        assert_eq!(calls[0]["parentSpanId"], "b7ad6b7169203331");
        assert_eq!(calls[0]["links"][0]["spanId"], session["spanId"]);
        assert_eq!(
            attr(calls[0], "network.transport").unwrap()["stringValue"],
            "pipe"
        );
        assert_eq!(calls[1]["traceId"], session["traceId"]);
        assert_eq!(calls[1]["parentSpanId"], session["spanId"]);
    }

    /// The points of the metric `name` in the last metrics request.
    fn points(kept: &Kept, name: &str) -> Vec<Value> {
        let kept = lock(&kept.0);
        let last = &kept
            .iter()
            .rev()
            .find(|(p, _)| p == "/v1/metrics")
            .expect("metrics sent")
            .1;
        last["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))["histogram"]["dataPoints"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn facade_answers_and_mcp_session_ends_follow_the_conventions() {
        let kept = Kept::default();
        let otel = Otel::start(config(), Box::new(kept.clone())).unwrap();
        let base = Audit::new(Origin::Mcp, vec![]).observed_by(otel.clone());
        let audit = base.for_session();
        audit.start("counter.wasm", "wasm component", None, json!({}));
        let state = McpCall {
            method: "tools/call",
            tool: "tick_state",
            session: Some("sess-1"),
            request_id: RequestId::Number(3),
            transport: McpTransport::Http,
            traceparent: None,
            protocol_version: Some("2025-06-18"),
        };
        audit.mcp_request(&state, "ok", None, None, Duration::from_millis(1));
        let screen = McpCall {
            tool: "tick_screen",
            request_id: RequestId::Number(4),
            ..state
        };
        audit.mcp_request(
            &screen,
            "invalid_arguments",
            Some("tool_error"),
            Some("bad `rows`\x1b[2J"),
            Duration::from_millis(1),
        );
        let unknown = McpCall {
            tool: "made\nup",
            request_id: RequestId::Number(5),
            ..state
        };
        base.without_session().mcp_request(
            &unknown,
            "unknown_tool",
            Some("-32602"),
            Some("unknown tool"),
            Duration::ZERO,
        );
        let list = McpCall {
            method: "tools/list",
            tool: "",
            request_id: RequestId::Number(6),
            ..state
        };
        base.without_session()
            .mcp_request(&list, "ok", None, None, Duration::ZERO);
        // Positive control for the session metric: one ended in error,
        // one not, over both transports.
        base.without_session().mcp_session_end(
            McpTransport::Http,
            Some("2025-06-18"),
            Duration::from_secs(2),
            None,
        );
        base.without_session().mcp_session_end(
            McpTransport::Stdio,
            Some("2025-11-25"),
            Duration::from_millis(30),
            Some("internal_error"),
        );
        audit.end(&EndReason::Shutdown);
        otel.finish_within(Duration::from_secs(20));
        let s = spans(&kept);
        let session = s.iter().find(|x| x["name"] == "tick session").unwrap();
        let state = s
            .iter()
            .find(|x| x["name"] == "tools/call tick_state")
            .unwrap();
        assert_eq!(state["kind"], 2);
        assert_eq!(state["parentSpanId"], session["spanId"]);
        assert_eq!(state["status"]["code"], 0);
        for (k, v) in [
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", "tick_state"),
            ("gen_ai.operation.name", "execute_tool"),
            ("mcp.protocol.version", "2025-06-18"),
            ("mcp.session.id", "sess-1"),
            ("jsonrpc.request.id", "3"),
            ("network.transport", "tcp"),
            ("tickbox.call.outcome", "ok"),
        ] {
            assert_eq!(attr(state, k).unwrap()["stringValue"], v, "{k}");
        }
        let screen = s
            .iter()
            .find(|x| x["name"] == "tools/call tick_screen")
            .unwrap();
        assert_eq!(screen["status"]["code"], 2);
        assert_eq!(screen["status"]["message"], "bad `rows`\\x1b[2J");
        assert_eq!(
            attr(screen, "error.type").unwrap()["stringValue"],
            "tool_error"
        );
        let unknown = s.iter().find(|x| x["name"] == "tools/call").unwrap();
        assert_eq!(
            attr(unknown, "error.type").unwrap()["stringValue"],
            "-32602"
        );
        assert!(unknown.get("parentSpanId").is_none(), "no Tick session");
        let list = s.iter().find(|x| x["name"] == "tools/list").unwrap();
        assert_eq!(list["kind"], 2);
        assert!(
            attr(list, "gen_ai.operation.name").is_none(),
            "not a tool call"
        );
        assert!(attr(list, "gen_ai.tool.name").is_none());
        assert_eq!(
            attr(list, "mcp.protocol.version").unwrap()["stringValue"],
            "2025-06-18"
        );
        let ops = points(&kept, "mcp.server.operation.duration");
        assert_eq!(ops.len(), 4, "{ops:?}");
        let listed = ops
            .iter()
            .find(|p| p.to_string().contains("tools/list"))
            .unwrap();
        assert!(attr(listed, "gen_ai.operation.name").is_none(), "{listed}");
        assert!(
            ops.iter().all(|p| !p.to_string().contains("made")),
            "an unknown tool's name makes no series: {ops:?}"
        );
        let sessions = points(&kept, "mcp.server.session.duration");
        assert_eq!(sessions.len(), 2, "{sessions:?}");
        let http = sessions
            .iter()
            .find(|p| p.to_string().contains("\"tcp\""))
            .unwrap();
        assert_eq!(http["count"], "1");
        assert_eq!(http["sum"], 2.0);
        assert_eq!(
            attr(http, "mcp.protocol.version").unwrap()["stringValue"],
            "2025-06-18"
        );
        assert_eq!(
            attr(http, "network.protocol.name").unwrap()["stringValue"],
            "http"
        );
        assert!(attr(http, "error.type").is_none());
        assert_eq!(
            http["explicitBounds"].as_array().unwrap().len(),
            MCP_SESSION_SECONDS_BUCKETS.len()
        );
        let stdio = sessions
            .iter()
            .find(|p| p.to_string().contains("\"pipe\""))
            .unwrap();
        assert_eq!(
            attr(stdio, "error.type").unwrap()["stringValue"],
            "internal_error"
        );
    }

    /// An exporter that never answers, like a stalled receiver.
    struct Stalled(Receiver<()>);
    impl OtlpPost for Stalled {
        fn post(
            &mut self,
            _: &Endpoint,
            _: &[(String, String)],
            _: Vec<u8>,
            _: Duration,
        ) -> Result<(), String> {
            let _ = self.0.recv();
            Err("stalled".into())
        }
    }

    #[test]
    fn a_stalled_receiver_never_makes_a_call_wait_and_drops_are_counted() {
        let (go, wait) = std::sync::mpsc::channel();
        let mut c = config();
        c.span_delay = Duration::from_millis(1);
        let otel = Otel::with_queue(c, Box::new(Stalled(wait)), 4).unwrap();
        let audit = Audit::new(Origin::Cli, vec![])
            .observed_by(otel.clone())
            .for_session();
        let started = Instant::now();
        for _ in 0..1000 {
            audit.call(
                "t",
                false,
                &json!({}),
                &CallOutcome::Ok(json!(1)),
                Duration::ZERO,
            );
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never waits");
        // The thread takes at most one batch before its first export
        // stalls (how many depends on scheduling: 104 in one run, fewer
        // under load); the queue holds 4; every other span is dropped and
        // counted.
        let least = 1000 - OTEL_BATCH_SPANS - 4;
        assert!(otel.dropped() >= least as u64, "{}", otel.dropped());
        drop(go);
        otel.finish_within(Duration::from_secs(20));
    }

    #[test]
    fn series_are_capped_and_names_bounded() {
        let kept = Kept::default();
        let mut c = config();
        c.traces = None;
        let otel = Otel::start(c, Box::new(kept.clone())).unwrap();
        let audit = Audit::new(Origin::Cli, vec![])
            .observed_by(otel.clone())
            .for_session();
        for i in 0..MAX_OTEL_SERIES * 3 {
            audit.call(
                &format!("t{i}"),
                false,
                &json!({}),
                &CallOutcome::Ok(json!(1)),
                Duration::ZERO,
            );
        }
        let long = "n".repeat(MAX_OTEL_TEXT_CHARS * 10);
        assert_eq!(bounded(&long).chars().count(), MAX_OTEL_TEXT_CHARS + 1);
        otel.finish_within(Duration::from_secs(20));
        let kept = lock(&kept.0);
        assert!(
            kept.iter().all(|(p, _)| p == "/v1/metrics"),
            "no traces asked for"
        );
        let metrics = &kept.last().unwrap().1["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
        let calls = metrics
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "tickbox.call.duration")
            .unwrap();
        let points = calls["histogram"]["dataPoints"].as_array().unwrap();
        assert_eq!(points.len(), MAX_OTEL_SERIES + 1);
        let overflow = points.last().unwrap();
        assert_eq!(overflow["attributes"][0]["key"], "otel.metric.overflow");
        assert_eq!(overflow["count"], (MAX_OTEL_SERIES * 2).to_string());
    }
}
