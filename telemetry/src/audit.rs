//! The audit stream: what every Tick was granted, which tools were called
//! with what outcome, what was approved, and what a Tick tried and was
//! refused, as JSON lines (one typed event per line, schema in
//! `docs/AUDIT.md`, version [`AUDIT_VERSION`]).
//!
//! **Why here, below the CLI.** The events happen in three layers: the
//! sandbox sees denials and limits (a socket address, a name, an HTTP
//! origin, a path leading out of a grant, a quota, the memory bound), the
//! session sees calls and the end, the CLI sees approvals and who started
//! the Tick. So the event types and the writer live in a crate below all
//! of them that knows none of them, and each layer is handed an [`Audit`]
//! value (through `Launcher::audited`, the `TickProcess`, the session):
//! none of them knows a file name or a flag. The CLI decides where lines go (`--audit FILE`,
//! `-` for stderr, the policy and MCP-config keys, a live host's rotating
//! file in the state directory) and opens the files through
//! [`QueuedWriter`], [`AppendFile`] and [`RotatingFile`].
//!
//! **What was used, once.** Besides what a Tick was refused, the sandbox
//! records what it used of what it was granted ([`Audit::used`]): a
//! directory grant reached (and whether anything was changed through it),
//! a granted address connected to, a granted name looked up, a granted
//! origin requested. Each distinct use is one `used` event per session,
//! remembered in a set of at most [`MAX_AUDIT_USES`]; past it one
//! `unrecorded` event says the record is incomplete. That record is what
//! `tickbox policy suggest` turns into the least policy that allows it.
//!
//! **Counted as well as written.** Besides line sinks, a handle may carry
//! [`AuditObserver`]s, which get each event as typed facts ([`Event`])
//! instead of a line: the MCP server's `/metrics` counts calls, refusals
//! and limits this way ([`crate::metrics`]), so an event is noticed in one
//! place whichever of the two is asked for. A handle with observers and no
//! sink builds no line at all.
//!
//! **Never in the way.** An event is one push into a bounded queue
//! ([`AUDIT_QUEUE_EVENTS`](crate::limits::AUDIT_QUEUE_EVENTS)) that one writer thread empties in batches,
//! encoding each line there ([`QueuedWriter`]); a queue that is full (a
//! stalled stderr, a slow disk) never makes a Tick or the host wait: the
//! event is counted, and the count goes out as `"lost": N` on the next
//! line written. A line reaches its file at most [`AUDIT_BATCH_WAIT`](crate::limits::AUDIT_BATCH_WAIT)
//! after its event. A process on its way out gives the writer
//! [`AUDIT_FLUSH_WAIT`](crate::limits::AUDIT_FLUSH_WAIT) to finish ([`QueuedWriter::finish`]).
//!
//! **Read back typed.** [`read`] is the one reading of these lines
//! (`tickbox policy suggest`, the benchmarks): typed events, each wall of
//! untrusted input refused by its rule, tested against what this writer
//! writes (merged refusals and `unrecorded` included).
//!
//! **Never raw.** Each line is built as a JSON value, every string cut at
//! [`MAX_AUDIT_TEXT_CHARS`], encoded, and passed through
//! [`text::json_safe`]: every control,
//! line break, bidi or other unsafe character inside a string becomes a
//! `\uXXXX` escape, so a line is the same JSON value and no Tick can forge
//! a line or reach a terminal that shows the file. A line is at most
//! [`MAX_AUDIT_LINE_BYTES`]: a longer event loses its recorded arguments,
//! then has its strings shortened, and says `"cut": true`.
//!
//! ```
//! use std::sync::Arc;
//! use tickbox_telemetry::audit::{Audit, AuditLine, AuditSink, DenialKind, Origin};
//! struct Print;
//! impl AuditSink for Print {
//!     fn offer(&self, event: AuditLine) -> bool {
//!         let line = event.into_line();
//!         assert!(line.contains(r#""event":"denied""#));
//!         assert!(line.contains(r"\u001b")); // the escape, never the byte
//!         true
//!     }
//! }
//! let audit = Audit::new(Origin::Cli, vec![Arc::new(Print)]).for_session();
//! audit.denied(DenialKind::Path, "../\x1b]2;x\x07", "leads out of the grant /data");
//! ```

pub mod read;
mod write;

pub use write::{
    not_regular, open_append, AppendFile, AuditFileError, LineOut, Plain, QueuedWriter,
    RotatingFile,
};

use crate::limits::MAX_AUDIT_TEXT_CHARS;
pub use crate::outcome::AuditSyncError;
use crate::outcome::{CallOutcome, EndReason};

pub use crate::limits::{
    AUDIT_FILE_KEEP, AUDIT_FILE_MAX_BYTES, AUDIT_MERGE_WINDOW, LIVE_AUDIT_ENDED_HOSTS,
    LIVE_AUDIT_KEEP, LIVE_AUDIT_MAX_BYTES, MAX_AUDIT_LINE_BYTES, MAX_AUDIT_READ_BYTES,
    MAX_AUDIT_SESSION_BYTES, MAX_AUDIT_USES,
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tickbox_protocol::text;

/// The version every event carries (`"v"`): it changes when a field
/// changes meaning or goes; new fields and events do not change it.
pub const AUDIT_VERSION: u64 = 1;

/// Room kept on each line for the `"lost": N` the writer may add.
const LOST_ROOM: usize = 32;

/// Who started a Tick (`start`'s `origin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Origin {
    /// A one-shot command (`describe`, `read`, `call`, `screen`, `info`, `watch`).
    #[default]
    Cli,
    /// A live host (`tickbox run`).
    LiveHost,
    /// The MCP facade (`tickbox mcp`).
    Mcp,
    /// A scenario run (`tickbox test`).
    Scenario,
    /// The checker (`tickbox check`).
    Check,
}

impl Origin {
    /// The name events use.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Cli => "cli",
            Origin::LiveHost => "live_host",
            Origin::Mcp => "mcp",
            Origin::Scenario => "scenario",
            Origin::Check => "check",
        }
    }
}

/// What a Tick attempted that the host refused (`denied`'s `what`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DenialKind {
    /// A path that leads out of a granted directory (`..`, a link), or a
    /// write through a read-only grant.
    Path,
    /// A socket address no `allow_net` grant covers (connect, send, bind).
    Socket,
    /// A name lookup of a name no `allow_net` grant names.
    Lookup,
    /// An HTTP request to an origin no `allow_http` grant names.
    HttpOrigin,
    /// A write past a write quota (`max_write`, a grant's `max=`).
    Quota,
}

impl DenialKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [DenialKind; 5] = [
        DenialKind::Path,
        DenialKind::Socket,
        DenialKind::Lookup,
        DenialKind::HttpOrigin,
        DenialKind::Quota,
    ];

    /// The name events use.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialKind::Path => "path",
            DenialKind::Socket => "socket",
            DenialKind::Lookup => "lookup",
            DenialKind::HttpOrigin => "http_origin",
            DenialKind::Quota => "quota",
        }
    }
}

/// What a Tick used of what it was granted (`used`'s `what` and fields).
/// Every value is the host's or the person's (a grant, an address the
/// host formatted), never a string the Tick chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Use<'a> {
    /// The directory (or file) grant `host` → `guest` was reached; `write`
    /// when the Tick asked to change something through it, which a
    /// read-only grant refuses (a file opened for writing, created or
    /// truncated; an entry created, renamed, linked or removed; times
    /// set), whether or not the change then succeeded.
    Dir {
        /// The host path, as granted.
        host: &'a str,
        /// The path the guest sees.
        guest: &'a str,
        /// Changed through it, not only read.
        write: bool,
    },
    /// A socket address the Tick connected or sent to (or received from);
    /// `allow_net` is the narrowest grant that allows it: the granted
    /// host (an address or a name) with the port used.
    Socket {
        /// The address, `IP:PORT`.
        address: &'a str,
        /// `HOST:PORT` as an `allow_net` grant writes it.
        allow_net: &'a str,
    },
    /// A name the Tick looked up, which `allow_net` names (lowercase);
    /// `allow_net` is the grant that names it.
    Lookup {
        /// The name.
        name: &'a str,
        /// The grant that allowed the lookup.
        allow_net: &'a str,
    },
    /// A granted origin an outgoing HTTP request went to; or, with
    /// `fixture`, the origin of a request a scenario's HTTP fixture
    /// answered in place of the network (no grant was in force, and no
    /// connection was made).
    HttpOrigin {
        /// `scheme://host:port`.
        origin: &'a str,
        /// Answered by a fixture.
        fixture: bool,
    },
}

impl Use<'_> {
    /// The name events use.
    pub fn as_str(&self) -> &'static str {
        match self {
            Use::Dir { .. } => "dir",
            Use::Socket { .. } => "socket",
            Use::Lookup { .. } => "lookup",
            Use::HttpOrigin { .. } => "http_origin",
        }
    }

    /// What makes two uses the same (so each is recorded once).
    fn key(&self) -> String {
        match self {
            Use::Dir { host, guest, write } => format!("dir\0{host}\0{guest}\0{write}"),
            Use::Socket { allow_net, .. } => format!("socket\0{allow_net}"),
            Use::Lookup { name, .. } => format!("lookup\0{name}"),
            Use::HttpOrigin { origin, fixture } => format!("http\0{origin}\0{fixture}"),
        }
    }

    fn fields(&self) -> Value {
        match self {
            Use::Dir { host, guest, write } => json!({
                "what": self.as_str(), "host": host, "guest": guest,
                "access": if *write { "write" } else { "read" },
            }),
            Use::Socket { address, allow_net } => {
                json!({"what": self.as_str(), "address": address, "allow_net": allow_net})
            }
            Use::Lookup { name, allow_net } => {
                json!({"what": self.as_str(), "name": name, "allow_net": allow_net})
            }
            Use::HttpOrigin { origin, fixture } => {
                json!({"what": self.as_str(), "origin": origin, "fixture": fixture})
            }
        }
    }
}

/// What one session has written, held back and dropped; every clone of a
/// session's handle shares it (the sandbox holds several).
#[derive(Default)]
struct Record {
    /// The uses recorded (see [`Audit::used`]).
    seen: HashSet<String>,
    /// The bound on uses was reached and said so.
    full: bool,
    /// Refusals and limits by kind (see [`Audit::denied`]): a handful,
    /// one per denial kind and per bound the host names.
    merges: Vec<Merge>,
    /// Bytes of the lines the Tick caused so far (see
    /// [`MAX_AUDIT_SESSION_BYTES`]).
    spent: u64,
    /// Events past the budget, by event and kind: their count.
    dropped: BTreeMap<(&'static str, String), u64>,
}

/// Repeated refusals (or limits) of one kind in one session.
struct Merge {
    event: &'static str,
    what: String,
    /// When a line about this kind was last written.
    wrote: std::time::Instant,
    /// Those since that line, not yet written.
    held: Option<Held>,
}

/// Refusals of one kind held back: how many, when, and the first's
/// fields as the example.
struct Held {
    count: u64,
    first: SystemTime,
    last: SystemTime,
    example: Map<String, Value>,
}

/// Where events go. The host calls [`offer`](AuditSink::offer) on the
/// paths of Ticks and requests, so it must not block.
pub trait AuditSink: Send + Sync {
    /// Takes one event, or returns false at once when it cannot take it
    /// now.
    fn offer(&self, event: AuditLine) -> bool;

    /// Takes a call's event from a [synced](Audit::synced) handle: a sink
    /// that makes its lines durable returns what resolves once this one's
    /// is written and synced (it never drops it for want of room: each is
    /// held by a call that waits). Others take it as any event, with
    /// nothing to wait for.
    fn offer_synced(&self, event: AuditLine) -> Option<Synced> {
        self.offer(event);
        None
    }
}

/// One line on its way to a synced file: resolves once it is written and
/// synced.
#[derive(Debug)]
pub struct Synced(tokio::sync::oneshot::Receiver<Result<(), AuditSyncError>>);

impl Synced {
    /// A line that will never be synced.
    fn failed(why: AuditSyncError) -> Synced {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = tx.send(Err(why));
        Synced(rx)
    }

    /// Waits until the line is written and synced.
    pub async fn wait(self) -> Result<(), AuditSyncError> {
        self.0.await.unwrap_or(Err(AuditSyncError::Closed))
    }
}

/// What recording a call returned ([`Audit::call_via`]): nothing to wait
/// for, unless the handle is [synced](Audit::synced).
#[derive(Debug, Default)]
pub struct Recorded {
    synced: Vec<Synced>,
}

impl Recorded {
    /// Resolves once every synced sink has written and synced the call's
    /// line; at once when none syncs.
    pub async fn durable(self) -> Result<(), AuditSyncError> {
        for s in self.synced {
            s.wait().await?;
        }
        Ok(())
    }

    /// Whether there is anything to wait for.
    pub fn waits(&self) -> bool {
        !self.synced.is_empty()
    }
}

/// One event on its way to its line. Its one way out is
/// [`into_line`](Self::into_line), which cuts, encodes and escapes it, so
/// no sink can write it raw; and a sink can do that work off the path of
/// the call that made the event ([`QueuedWriter`] does it on its thread).
#[derive(Debug, Clone)]
pub struct AuditLine {
    /// When the event happened (written as `ts`, formatted with the line).
    at: SystemTime,
    body: Body,
}

/// An event's fields, before they are a line.
#[derive(Debug, Clone)]
enum Body {
    /// Any event, as a map of values.
    Fields(Map<String, Value>),
    /// The `call` event, the one made per request: typed, so that making
    /// it on a call's path is a few short copies, not a map of values: the
    /// call's thread only copies short strings, and encoding is the writer's.
    Call(Box<CallLine>),
    /// A line already made: an event a session's budget counts, whose
    /// size must be known before it is taken (they are rare: merged).
    Line(String),
}

/// The `call` event's fields. Declared in the order of their names, the
/// order in which a map of them is written, so that both forms of one
/// event encode to the same bytes (a unit test holds them to it).
#[derive(Debug, Clone, serde::Serialize)]
struct CallLine {
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<Value>,
    args_sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<i64>,
    duration_ms: f64,
    event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    executed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mcp: Option<McpLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    mutates: bool,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(serialize_with = "session_id")]
    session: Option<Arc<str>>,
    tool: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<String>,
    v: u64,
}

/// A `call` event's `mcp` object, its fields in the order of their names.
#[derive(Debug, Clone, serde::Serialize)]
struct McpLine {
    method: String,
    request_id: String,
    session: Option<String>,
    tool: String,
    transport: &'static str,
}

fn session_id<S: serde::Serializer>(id: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_some(&id.as_deref())
}

impl CallLine {
    /// The line written straight from the fields, when their JSON is at
    /// most [`MAX_AUDIT_TEXT_CHARS`] bytes (a call's usually is): then no
    /// string or key in it has more characters than that, so [`encode`]
    /// would cut nothing, and escaped (at most six bytes for one) it stays
    /// within the line bound. `None` for a longer event.
    fn line_as_is(&self) -> Option<String> {
        let json = serde_json::to_string(self).ok()?;
        (json.len() <= MAX_AUDIT_TEXT_CHARS).then(|| text::json_safe(&json))
    }

    /// The line: as it is when short ([`line_as_is`](Self::line_as_is)),
    /// otherwise through [`encode`] like any event.
    fn into_line(mut self, at: SystemTime) -> String {
        self.ts = Some(crate::util::rfc3339_millis(at));
        self.line_as_is()
            .unwrap_or_else(|| encode(serde_json::to_value(&self).unwrap_or_default()))
    }
}

// What `CallLine::line_as_is` relies on: a short line, escaped, fits.
const _: () = assert!(MAX_AUDIT_TEXT_CHARS * 6 <= MAX_AUDIT_LINE_BYTES - LOST_ROOM);

impl AuditLine {
    /// The event's line (no newline): every string cut, encoded, escaped,
    /// within [`MAX_AUDIT_LINE_BYTES`].
    pub fn into_line(self) -> String {
        match self.body {
            Body::Fields(mut event) => {
                event.insert("ts".into(), json!(crate::util::rfc3339_millis(self.at)));
                encode(Value::Object(event))
            }
            Body::Call(call) => call.into_line(self.at),
            Body::Line(line) => line,
        }
    }
}

/// One event as typed facts, for an [`AuditObserver`]: what its line
/// says, borrowed, before any text is cut or escaped (an observer that
/// shows Tick text escapes it for its own sink).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A Tick was started (`start`).
    Start {
        /// Its path or command line.
        tick: &'a str,
        /// How it runs (`wasm component`, `wasm module`, `native`).
        backend: &'a str,
        /// Who started it.
        origin: Origin,
    },
    /// A tool call ended (`call`).
    Call {
        /// The tool, as the Tick's catalog names it (Tick text).
        tool: &'a str,
        /// Whether the tool mutates.
        mutates: bool,
        /// How it ended.
        outcome: &'a CallOutcome,
        /// How long it took.
        took: Duration,
        /// The MCP request it answered, when it came through MCP.
        mcp: Option<&'a McpCall<'a>>,
    },
    /// Something was approved or refused (`approval`).
    Approval {
        /// What (`call`).
        what: &'a str,
        /// About what (a tool).
        subject: &'a str,
        /// Whether it was granted.
        granted: bool,
    },
    /// The host refused what a Tick attempted (`denied`).
    Denied {
        /// What kind of thing.
        what: DenialKind,
        /// What was attempted (Tick text).
        attempted: &'a str,
    },
    /// A Tick ran into a bound (`limit`).
    Limit {
        /// The grant key (`max_memory`, `max_handles`).
        bound: &'a str,
        /// Its value.
        value: u64,
    },
    /// The session ended, or its start failed (`end`).
    End {
        /// The reason's name (`exited`, …, `start_failed`).
        reason: &'a str,
    },
    /// An MCP request the facade answered without a Tick call: a
    /// `tools/call` of its own tools (`tick_state`, `tick_screen`) or one
    /// refused before it was sent (an unknown tool, arguments that do not
    /// fit, a catalog that changed, a cancellation, a Tick that ended),
    /// and the other methods it serves (`initialize`, `tools/list`,
    /// `resources/list`, `resources/read`, `resources/subscribe`,
    /// `resources/unsubscribe`). Observers only: no audit line, as nothing
    /// reached a Tick.
    McpRequest {
        /// The request.
        request: &'a McpCall<'a>,
        /// How it ended: `ok`, the facade's kind of refusal of a
        /// `tools/call` (`invalid_arguments`, `unknown_tool`, …), or
        /// `error` for another method's error answer (the host's words).
        outcome: &'a str,
        /// OpenTelemetry's `error.type` when it failed (`tool_error` for a
        /// result with `isError`, the JSON-RPC code for an error answer).
        error: Option<&'a str>,
        /// What the client was told when it failed (may hold Tick text).
        message: Option<&'a str>,
        /// How long it took.
        took: Duration,
    },
    /// An MCP session ended: an HTTP session deleted, expired, evicted or
    /// closed with the host, or a stdio client gone. Observers only.
    McpSessionEnd {
        /// The transport it came over.
        transport: McpTransport,
        /// The protocol version it negotiated.
        protocol_version: Option<&'a str>,
        /// How long it lasted.
        lasted: Duration,
        /// OpenTelemetry's `error.type` when it ended in an error.
        error: Option<&'a str>,
    },
}

/// The MCP request a call answered (`call`'s `mcp`): what OpenTelemetry's
/// MCP conventions name a server span by ([`crate::otel`]). Borrowed from
/// the request as it is served, so making one costs nothing.
#[derive(Debug, Clone, Copy)]
pub struct McpCall<'a> {
    /// The JSON-RPC method (`tools/call`).
    pub method: &'a str,
    /// The tool name the client called (the facade's, which may differ
    /// from the Tick's own name of the tool); empty for a method other
    /// than `tools/call`.
    pub tool: &'a str,
    /// The `Mcp-Session-Id` the request came with (Streamable HTTP).
    pub session: Option<&'a str>,
    /// The JSON-RPC request id.
    pub request_id: RequestId<'a>,
    /// The transport it came over.
    pub transport: McpTransport,
    /// A W3C `traceparent` the client sent in the request's `_meta`.
    pub traceparent: Option<&'a str>,
    /// The MCP protocol version of the request: the one negotiated at
    /// `initialize`, or the request's own (2026-07-28).
    pub protocol_version: Option<&'a str>,
}

/// A JSON-RPC request id, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum RequestId<'a> {
    /// A number.
    Number(i64),
    /// A string (the client's text).
    Text(&'a str),
}

impl std::fmt::Display for RequestId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::Text(t) => f.write_str(t),
        }
    }
}

/// The MCP transport a request came over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTransport {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl McpTransport {
    /// The name events use (`stdio`, `http`).
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Stdio => "stdio",
            McpTransport::Http => "http",
        }
    }
}

/// Gets every event of the handles it was added to
/// ([`Audit::observed_by`]) as typed facts. Called on the paths of Ticks
/// and requests, like [`AuditSink::offer`], so it must not block: count,
/// do not wait.
pub trait AuditObserver: Send + Sync {
    /// One event, as it happens, in the session of `session`.
    fn observe(&self, session: Option<&str>, event: &Event<'_>);
}

/// The audit handle layers pass down: where lines go, who started the
/// Tick, whether call arguments are recorded, and (after
/// [`for_session`](Audit::for_session)) which Tick session events belong
/// to. Cheap to clone.
#[derive(Clone)]
pub struct Audit {
    shared: Arc<Shared>,
    session: Option<Arc<str>>,
    /// The client whose own instance this handle's sessions are (a
    /// per-client Tick's; [`Audit::for_client`]), named in `start`.
    client: Option<Arc<str>>,
    /// What this session wrote, merged and dropped; every clone of a
    /// session's handle shares it (the sandbox holds several).
    record: Arc<Mutex<Record>>,
}

struct Shared {
    sinks: Vec<Arc<dyn AuditSink>>,
    observers: Vec<Arc<dyn AuditObserver>>,
    origin: Origin,
    args: bool,
    /// A call's answer waits for its line to be synced ([`Audit::synced`]).
    sync: bool,
    /// What each session's own doings may write ([`MAX_AUDIT_SESSION_BYTES`]).
    budget: u64,
    /// How long repeated refusals are held ([`AUDIT_MERGE_WINDOW`]; tests
    /// shorten it).
    merge_window: Duration,
    /// What every session id of this handle starts with: unique to this
    /// process and the handle ([`session_prefix`]).
    prefix: String,
    next: AtomicU64,
}

/// A session id's start, unique per process and handle: the pid, when the
/// handle was made, and how many handles this process made before it (two
/// made in the same microsecond still differ).
fn session_prefix() -> String {
    static HANDLES: AtomicU64 = AtomicU64::new(0);
    let made = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    let handle = HANDLES.fetch_add(1, Ordering::Relaxed);
    format!("tickbox-{}-{made:x}-{handle}", std::process::id())
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit")
            .field("origin", &self.shared.origin)
            .field("sinks", &self.shared.sinks.len())
            .field("observers", &self.shared.observers.len())
            .field("session", &self.session)
            .finish()
    }
}

impl Audit {
    /// An audit stream into `sinks` (each line goes to every one) for
    /// Ticks started by `origin`; arguments are recorded as a hash.
    pub fn new(origin: Origin, sinks: Vec<Arc<dyn AuditSink>>) -> Audit {
        Audit {
            shared: Arc::new(Shared {
                sinks,
                observers: Vec::new(),
                origin,
                args: false,
                sync: false,
                budget: MAX_AUDIT_SESSION_BYTES,
                merge_window: AUDIT_MERGE_WINDOW,
                prefix: session_prefix(),
                next: AtomicU64::new(1),
            }),
            session: None,
            client: None,
            record: Arc::default(),
        }
    }

    /// This handle for the instances one client gets of a per-client Tick:
    /// each session's `start` names `client` (its MCP session, a named
    /// client or the stdio connection), so the instance's own lines are
    /// tied to whoever it was started for.
    pub fn for_client(&self, client: &str) -> Audit {
        Audit {
            shared: self.shared.clone(),
            session: self.session.clone(),
            client: Some(client.into()),
            record: Arc::default(),
        }
    }

    /// Records call arguments whole (escaped) instead of as their SHA-256.
    pub fn with_args(self, args: bool) -> Audit {
        self.remade(|s| s.args = args)
    }

    /// Makes every call's record durable before its answer: the session
    /// awaits [`Recorded::durable`], which waits for each sink that syncs
    /// ([`QueuedWriter::synced`]) to have written and synced the call's
    /// line. Sinks that do not sync are not waited for.
    pub fn synced(self, sync: bool) -> Audit {
        self.remade(|s| s.sync = sync)
    }

    /// Sets the bytes each session's own doings may write (default
    /// [`MAX_AUDIT_SESSION_BYTES`]).
    pub fn with_session_budget(self, bytes: u64) -> Audit {
        self.remade(|s| s.budget = bytes)
    }

    /// Sets how long repeated refusals are held (tests).
    #[cfg(test)]
    fn with_merge_window(self, window: Duration) -> Audit {
        self.remade(|s| s.merge_window = window)
    }

    /// Whether calls wait for their line to be synced.
    pub fn syncs(&self) -> bool {
        self.shared.sync
    }

    /// Also hands every event to `observer`, as typed facts.
    pub fn observed_by(self, observer: Arc<dyn AuditObserver>) -> Audit {
        self.remade(|s| s.observers.push(observer))
    }

    /// This handle with its shared part copied and changed by `change`
    /// (before any session is made from it: sessions made earlier keep
    /// the old one).
    fn remade(self, change: impl FnOnce(&mut Shared)) -> Audit {
        let mut shared = Shared {
            sinks: self.shared.sinks.clone(),
            observers: self.shared.observers.clone(),
            origin: self.shared.origin,
            args: self.shared.args,
            sync: self.shared.sync,
            budget: self.shared.budget,
            merge_window: self.shared.merge_window,
            prefix: self.shared.prefix.clone(),
            next: AtomicU64::new(self.shared.next.load(Ordering::Relaxed)),
        };
        change(&mut shared);
        Audit {
            shared: Arc::new(shared),
            session: self.session,
            client: self.client,
            record: self.record,
        }
    }

    /// Who starts the Ticks of this stream.
    pub fn origin(&self) -> Origin {
        self.shared.origin
    }

    /// Whether call arguments are recorded whole.
    pub fn records_args(&self) -> bool {
        self.shared.args
    }

    /// A handle for one new Tick session: every event it writes carries
    /// the same `session` id, unique to this process and time.
    pub fn for_session(&self) -> Audit {
        let n = self.shared.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", self.shared.prefix);
        Audit {
            shared: self.shared.clone(),
            session: Some(id.into()),
            client: self.client.clone(),
            record: Arc::default(),
        }
    }

    /// This handle without its session: events about no one Tick session
    /// (an MCP session's end) go to the same sinks and observers.
    pub fn without_session(&self) -> Audit {
        Audit {
            shared: self.shared.clone(),
            session: None,
            client: self.client.clone(),
            record: Arc::default(),
        }
    }

    /// This handle's session id, when it has one.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// `start`: a Tick was started. `tick` names it (a path, an argv),
    /// `backend` how it runs, `sha256` its wasm's digest, `grants` every
    /// grant and bound in force.
    pub fn start(&self, tick: &str, backend: &str, sha256: Option<String>, grants: Value) {
        self.notify(Event::Start {
            tick,
            backend,
            origin: self.shared.origin,
        });
        let mut fields = json!({
            "origin": self.shared.origin.as_str(),
            "tick": tick,
            "backend": backend,
            "sha256": sha256,
            "grants": grants,
        });
        if let Some(client) = &self.client {
            fields["client"] = json!(client.as_ref());
        }
        self.emit("start", fields);
    }

    /// `call`: a tool call and its outcome. What it returns resolves
    /// once the line is durable, when the handle is [`synced`](Self::synced).
    pub fn call(
        &self,
        tool: &str,
        mutates: bool,
        args: &Value,
        outcome: &CallOutcome,
        took: Duration,
    ) -> Recorded {
        self.call_via(tool, mutates, args, outcome, took, None)
    }

    /// [`call`](Self::call) for a call that answered an MCP request `mcp`
    /// (the line gets an `mcp` object).
    pub fn call_via(
        &self,
        tool: &str,
        mutates: bool,
        args: &Value,
        outcome: &CallOutcome,
        took: Duration,
        mcp: Option<&McpCall<'_>>,
    ) -> Recorded {
        self.notify(Event::Call {
            tool,
            mutates,
            outcome,
            took,
            mcp,
        });
        if !self.writes_lines() {
            // Hashing the arguments is the costly part of a line.
            return Recorded::default();
        }
        let (code, message, executed, reason) = match outcome {
            CallOutcome::Ok(_) => (None, None, None, None),
            CallOutcome::Failed { error, executed } => (
                Some(error.code),
                Some(error.message.wire().to_string()),
                Some(*executed),
                None,
            ),
            CallOutcome::Unknown(why) => (None, None, None, Some(why.to_string())),
        };
        let line = CallLine {
            args: self.shared.args.then(|| args.clone()),
            args_sha256: sha256_hex(args.to_string().as_bytes()),
            code,
            duration_ms: took.as_secs_f64() * 1000.0,
            event: "call",
            executed,
            mcp: mcp.map(|m| McpLine {
                method: m.method.to_string(),
                request_id: m.request_id.to_string(),
                session: m.session.map(str::to_string),
                tool: m.tool.to_string(),
                transport: m.transport.as_str(),
            }),
            message,
            mutates,
            outcome: outcome_name(outcome),
            reason,
            session: self.session.clone(),
            tool: tool.to_string(),
            ts: None,
            v: AUDIT_VERSION,
        };
        let event = AuditLine {
            at: SystemTime::now(),
            body: Body::Call(Box::new(line)),
        };
        if !self.shared.sync {
            self.offer(event);
            return Recorded::default();
        }
        Recorded {
            synced: self
                .shared
                .sinks
                .iter()
                .filter_map(|sink| sink.offer_synced(event.clone()))
                .collect(),
        }
    }

    /// `approval`: `what` (a call, a manifest's requests) about `subject`
    /// (a tool, a digest) was granted or refused, `by` whom.
    pub fn approval(&self, what: &str, subject: &str, granted: bool, by: &str) {
        self.notify(Event::Approval {
            what,
            subject,
            granted,
        });
        self.emit(
            "approval",
            json!({"what": what, "subject": subject, "granted": granted, "by": by}),
        );
    }

    /// `denied`: the Tick attempted `attempted` and the host refused it;
    /// `detail` says where or why.
    ///
    /// Each refusal reaches observers (metrics count every one), but only
    /// the first of its kind in a session is written at once: later ones
    /// of the kind are counted and written as one merged line (`count`,
    /// `first`, `last`, the first of them as the example) at most every
    /// [`AUDIT_MERGE_WINDOW`] and at the session's end, so a Tick that
    /// loops on a refused open writes a few lines, not one per try.
    pub fn denied(&self, what: DenialKind, attempted: &str, detail: &str) {
        self.notify(Event::Denied { what, attempted });
        if !self.writes_lines() {
            return;
        }
        self.merged(
            "denied",
            what.as_str(),
            json!({"what": what.as_str(), "attempted": attempted, "detail": detail}),
        );
    }

    /// `used`: the Tick used this of what it was granted. Each distinct
    /// use is recorded once per session; after [`MAX_AUDIT_USES`] of them
    /// one `used` event of kind `unrecorded` says the record is
    /// incomplete, and later uses are neither kept nor written, so a Tick
    /// touching ever new addresses grows neither the host's memory nor the
    /// file.
    pub fn used(&self, what: Use<'_>) {
        // Not counted by observers (metrics): uses are for the record.
        if !self.writes_lines() {
            return;
        }
        let key = what.key();
        let cut = {
            let mut uses = crate::util::lock(&self.record);
            if uses.seen.contains(&key) {
                return;
            }
            if uses.seen.len() >= MAX_AUDIT_USES {
                if uses.full {
                    return;
                }
                uses.full = true;
                true
            } else {
                uses.seen.insert(key);
                false
            }
        };
        let (kind, fields) = if cut {
            let detail = format!(
                "more than {MAX_AUDIT_USES} distinct uses in this session: the later ones are not recorded"
            );
            (
                "unrecorded",
                json!({"what": "unrecorded", "bound": MAX_AUDIT_USES, "detail": detail}),
            )
        } else {
            (what.as_str(), what.fields())
        };
        let mut record = crate::util::lock(&self.record);
        self.budgeted(&mut record, "used", kind, fields, 1);
    }

    /// `limit`: the Tick ran into `bound` (the grant key) of `value`;
    /// `detail` says what it asked for.
    /// Merged by bound, as refusals are ([`denied`](Self::denied)).
    pub fn limit(&self, bound: &str, value: u64, detail: &str) {
        self.notify(Event::Limit { bound, value });
        if !self.writes_lines() {
            return;
        }
        self.merged(
            "limit",
            bound,
            json!({"bound": bound, "value": value, "detail": detail}),
        );
    }

    /// `end`: the session ended, and why. `exit_code` is the Tick's exit
    /// status when it exited with one.
    pub fn end(&self, reason: &EndReason) {
        let (kind, exit_code) = match reason {
            EndReason::Violation(_) => ("violation", None),
            EndReason::Exited(how) => ("exited", exit_status(how)),
            EndReason::Io(_) => ("io", None),
            EndReason::StdinStalled(_) => ("stdin_stalled", None),
            EndReason::Shutdown => ("shutdown", None),
        };
        self.notify(Event::End { reason: kind });
        self.close_record();
        self.emit(
            "end",
            json!({"reason": kind, "detail": reason.to_string(), "exit_code": exit_code}),
        );
    }

    /// `end` for a Tick that never got as far as a session (it could not
    /// be started or failed before its first request).
    pub fn end_failed(&self, why: &str) {
        self.notify(Event::End {
            reason: "start_failed",
        });
        self.close_record();
        self.emit(
            "end",
            json!({"reason": "start_failed", "detail": why, "exit_code": null}),
        );
    }

    /// An MCP request the facade answered itself ([`Event::McpRequest`]):
    /// handed to observers only, no line is written.
    pub fn mcp_request(
        &self,
        request: &McpCall<'_>,
        outcome: &str,
        error: Option<&str>,
        message: Option<&str>,
        took: Duration,
    ) {
        self.notify(Event::McpRequest {
            request,
            outcome,
            error,
            message,
            took,
        });
    }

    /// An MCP session ended ([`Event::McpSessionEnd`]): handed to
    /// observers only, no line is written.
    pub fn mcp_session_end(
        &self,
        transport: McpTransport,
        protocol_version: Option<&str>,
        lasted: Duration,
        error: Option<&str>,
    ) {
        self.notify(Event::McpSessionEnd {
            transport,
            protocol_version,
            lasted,
            error,
        });
    }

    /// Whether any line sink takes this handle's events (observers alone
    /// need no line).
    fn writes_lines(&self) -> bool {
        !self.shared.sinks.is_empty()
    }

    /// A refusal or limit of `what` (see [`denied`](Self::denied)): the
    /// first of its kind written, later ones held and counted, their count
    /// written once [`AUDIT_MERGE_WINDOW`] has passed since the kind's
    /// last line.
    fn merged(&self, event: &'static str, what: &str, fields: Value) {
        let Value::Object(fields) = fields else {
            return;
        };
        let now = SystemTime::now();
        let mono = std::time::Instant::now();
        let mut record = crate::util::lock(&self.record);
        let i = match record
            .merges
            .iter()
            .position(|m| m.event == event && m.what == what)
        {
            Some(i) => i,
            None => {
                record.merges.push(Merge {
                    event,
                    what: what.to_string(),
                    wrote: mono,
                    held: None,
                });
                self.budgeted(&mut record, event, what, Value::Object(fields), 1);
                return;
            }
        };
        let m = &mut record.merges[i];
        let held = m.held.get_or_insert(Held {
            count: 0,
            first: now,
            last: now,
            example: fields,
        });
        held.count += 1;
        held.last = now;
        if mono.duration_since(m.wrote) < self.shared.merge_window {
            return;
        }
        m.wrote = mono;
        if let Some(held) = m.held.take() {
            self.write_held(&mut record, event, what, held);
        }
    }

    /// One merged line: the example's fields with how many there were and
    /// when the first and the last was.
    fn write_held(&self, record: &mut Record, event: &'static str, what: &str, held: Held) {
        let mut fields = held.example;
        fields.insert("count".into(), json!(held.count));
        fields.insert(
            "first".into(),
            json!(crate::util::rfc3339_millis(held.first)),
        );
        fields.insert("last".into(), json!(crate::util::rfc3339_millis(held.last)));
        self.budgeted(record, event, what, Value::Object(fields), held.count);
    }

    /// Before a session's `end`: every count still held is written, then
    /// (once) what the budget dropped.
    fn close_record(&self) {
        if !self.writes_lines() {
            return;
        }
        let mut record = crate::util::lock(&self.record);
        let merges = std::mem::take(&mut record.merges);
        for m in merges {
            if let Some(held) = m.held {
                self.write_held(&mut record, m.event, &m.what, held);
            }
        }
        let dropped = std::mem::take(&mut record.dropped);
        if dropped.is_empty() {
            return;
        }
        let total: u64 = dropped.values().sum();
        let mut by_event: Map<String, Value> = Map::new();
        for ((event, what), n) in dropped {
            let kinds = by_event
                .entry(event)
                .or_insert_with(|| Value::Object(Map::new()));
            kinds[what] = json!(n);
        }
        let budget = self.shared.budget;
        drop(record);
        self.emit(
            "unrecorded",
            json!({
                "bound": budget,
                "dropped": by_event,
                "detail": format!("this session's own events passed their {budget}-byte budget: {total} of them are not recorded"),
            }),
        );
    }

    /// Writes an event the session's budget counts (`used`, `denied`,
    /// `limit`), made into its line here so its size is known; one that
    /// does not fit is dropped and counted (`events` of them: a merged
    /// line stands for its count).
    fn budgeted(
        &self,
        record: &mut Record,
        event: &'static str,
        what: &str,
        fields: Value,
        events: u64,
    ) {
        let at = SystemTime::now();
        let mut head = self.head(event);
        if let Value::Object(map) = fields {
            head.extend(map);
        }
        head.insert("ts".into(), json!(crate::util::rfc3339_millis(at)));
        let line = encode(Value::Object(head));
        let cost = line.len() as u64 + 1;
        if record.spent + cost > self.shared.budget {
            *record.dropped.entry((event, what.to_string())).or_default() += events;
            return;
        }
        record.spent += cost;
        self.offer(AuditLine {
            at,
            body: Body::Line(line),
        });
    }

    /// The fields every event starts with.
    fn head(&self, event: &str) -> Map<String, Value> {
        let mut head = Map::new();
        head.insert("v".into(), json!(AUDIT_VERSION));
        head.insert("event".into(), json!(event));
        head.insert("session".into(), json!(self.session.as_deref()));
        head
    }

    fn notify(&self, event: Event<'_>) {
        for o in &self.shared.observers {
            o.observe(self.session(), &event);
        }
    }

    fn emit(&self, event: &str, fields: Value) {
        if !self.writes_lines() {
            return;
        }
        let at = SystemTime::now();
        let mut head = self.head(event);
        if let Value::Object(map) = fields {
            head.extend(map);
        }
        self.offer(AuditLine {
            at,
            body: Body::Fields(head),
        });
    }

    /// Hands `event` to every sink. Encoded by each sink, off this path
    /// (see [`AuditLine`]): the event goes whole, cloned only for a second
    /// sink.
    fn offer(&self, event: AuditLine) {
        if let Some((last, rest)) = self.shared.sinks.split_last() {
            for sink in rest {
                sink.offer(event.clone());
            }
            last.offer(event);
        }
    }
}

/// A call outcome's name in events and metrics: `ok`, `error`, `unknown`.
pub fn outcome_name(outcome: &CallOutcome) -> &'static str {
    match outcome {
        CallOutcome::Ok(_) => "ok",
        CallOutcome::Failed { .. } => "error",
        CallOutcome::Unknown(_) => "unknown",
    }
}

/// `"exit status N"` (how backends say a Tick exited) as N.
fn exit_status(how: &str) -> Option<i64> {
    how.strip_prefix("exit status ")?
        .split(|c: char| !c.is_ascii_digit() && c != '-')
        .next()?
        .parse()
        .ok()
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for b in Sha256::digest(bytes) {
        hex.push(HEX[usize::from(b >> 4)] as char);
        hex.push(HEX[usize::from(b & 15)] as char);
    }
    hex
}

/// One event as its line: strings cut, encoded, escaped, within the
/// line bound.
fn encode(mut v: Value) -> String {
    if cut_strings(&mut v, MAX_AUDIT_TEXT_CHARS) {
        v["cut"] = json!(true);
    }
    let limit = MAX_AUDIT_LINE_BYTES - LOST_ROOM;
    let line = safe_line(&v);
    if line.len() <= limit {
        return line;
    }
    // Too long: the recorded arguments go first (their hash stays), then
    // every string is shortened until the line fits.
    v["cut"] = json!(true);
    if let Some(args) = v.get_mut("args") {
        *args = Value::Null;
    }
    for chars in [256, 64, 16] {
        cut_strings(&mut v, chars);
        let line = safe_line(&v);
        if line.len() <= limit {
            return line;
        }
    }
    // Only a structure too large for any string cut (thousands of grants):
    // the event's head is what is left.
    let mut head = Map::new();
    for key in ["v", "ts", "event", "session", "cut"] {
        if let Some(x) = v.get(key) {
            head.insert(key.into(), x.clone());
        }
    }
    safe_line(&Value::Object(head))
}

fn safe_line(v: &Value) -> String {
    text::json_safe(&v.to_string())
}

/// Cuts every string (and key) in `v` to at most `max` characters;
/// whether anything was cut.
fn cut_strings(v: &mut Value, max: usize) -> bool {
    match v {
        Value::String(s) => {
            let cut = text::truncate(s, max);
            if cut.len() < s.len() {
                *s = format!("{cut}…");
                return true;
            }
            false
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| cut_strings(i, max) | c),
        Value::Object(map) => {
            let mut cut = false;
            if map.keys().any(|k| k.chars().count() > max) {
                let old = std::mem::take(map);
                for (k, x) in old {
                    map.insert(text::truncate(&k, max).to_string(), x);
                }
                cut = true;
            }
            map.values_mut().fold(cut, |c, x| cut_strings(x, max) | c)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Lines kept in memory.
    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);
    impl AuditSink for Lines {
        fn offer(&self, event: AuditLine) -> bool {
            crate::util::lock(&self.0).push(event.into_line());
            true
        }
    }

    fn parsed(lines: &Lines) -> Vec<Value> {
        crate::util::lock(&lines.0)
            .iter()
            .map(|l| serde_json::from_str(l).expect("a line is JSON"))
            .collect()
    }

    #[test]
    fn every_event_is_one_safe_json_line_with_a_version() {
        let lines = Arc::new(Lines::default());
        let audit = Audit::new(Origin::Mcp, vec![lines.clone()]).for_session();
        let hostile = "a\x1b]2;t\x07\r\nFORGED \u{202e}\u{2028}b";
        audit.start(hostile, "native", None, json!({"env": [hostile]}));
        audit.approval("call", hostile, false, "--yes absent");
        audit.denied(DenialKind::Lookup, hostile, hostile);
        audit.limit("max_memory", 1 << 20, hostile);
        audit.end(&EndReason::Exited(format!("exit status 3 {hostile}")));
        let raw = crate::util::lock(&lines.0).clone();
        assert_eq!(raw.len(), 5);
        for line in &raw {
            assert!(
                !line.chars().any(text::is_unsafe),
                "a raw unsafe character: {line}"
            );
            assert!(line.len() <= MAX_AUDIT_LINE_BYTES);
        }
        let v = parsed(&lines);
        // Positive control: the text is all there, the same JSON value.
        assert_eq!(v[0]["tick"], hostile);
        assert_eq!(v[0]["origin"], "mcp");
        assert_eq!(v[2]["attempted"], hostile);
        assert_eq!(v[4]["exit_code"], 3);
        assert!(v.iter().all(|e| e["v"] == AUDIT_VERSION));
        assert!(v.iter().all(|e| e["session"] == v[0]["session"]));
        let events: Vec<&str> = v.iter().map(|e| e["event"].as_str().unwrap()).collect();
        assert_eq!(events, ["start", "approval", "denied", "limit", "end"]);
    }

    /// The events kept as they were offered, before they are lines.
    #[derive(Default)]
    struct Events(Mutex<Vec<AuditLine>>);
    impl AuditSink for Events {
        fn offer(&self, event: AuditLine) -> bool {
            crate::util::lock(&self.0).push(event);
            true
        }
    }

    #[test]
    fn a_call_line_is_its_fields_under_the_one_encoding_rule() {
        // The typed `call` event is written straight from its fields when
        // nothing needs cutting: that must be the very line `encode` makes
        // of the same fields as a map (their order, escapes, cuts, bound).
        let events = Arc::new(Events::default());
        let plain = Audit::new(Origin::Mcp, vec![events.clone()]).for_session();
        let whole = Audit::new(Origin::Mcp, vec![events.clone()])
            .with_args(true)
            .for_session();
        let hostile = "a\x1b]2;t\x07\r\nFORGED \u{202e}\u{2028}b";
        let long = "x".repeat(MAX_AUDIT_TEXT_CHARS + 5);
        let huge = "y\u{7}".repeat(MAX_AUDIT_LINE_BYTES);
        let failed = |message: &str| CallOutcome::Failed {
            error: tickbox_protocol::RpcError {
                code: -32001,
                message: message.into(),
                data: None,
            },
            executed: true,
        };
        let unknown =
            CallOutcome::Unknown(crate::outcome::UnknownReason::Malformed(hostile.into()));
        let mcp = McpCall {
            method: "tools/call",
            tool: hostile,
            session: Some("s-1"),
            request_id: RequestId::Text(hostile),
            transport: McpTransport::Http,
            traceparent: None,
            protocol_version: None,
        };
        let took = Duration::from_micros(1234);
        let args = json!({"q": hostile});
        let ok = CallOutcome::Ok(json!(1));
        for audit in [&plain, &whole] {
            audit.call_via("count", false, &json!({}), &ok, took, None);
            audit.call_via(hostile, true, &args, &ok, took, Some(&mcp));
            audit.call_via("count", false, &args, &failed(hostile), took, Some(&mcp));
            audit.call_via(&long, false, &args, &unknown, took, None);
            audit.call_via("count", false, &args, &failed(&huge), took, Some(&mcp));
        }
        // A line too long to write as it is, with nothing in it to cut.
        let wordy = "w".repeat(MAX_AUDIT_TEXT_CHARS - 1);
        plain.call_via(&wordy, false, &args, &ok, took, None);
        // Every string within its cut, the line over its bound once escaped.
        let bells = "\u{7}".repeat(MAX_AUDIT_TEXT_CHARS);
        let wide = McpCall {
            tool: &bells,
            ..mcp
        };
        plain.call_via(&bells, false, &args, &failed(&bells), took, Some(&wide));
        let events = std::mem::take(&mut *crate::util::lock(&events.0));
        assert_eq!(events.len(), 12);
        let mut ways = HashSet::new();
        for event in events {
            let Body::Call(call) = &event.body else {
                panic!("a call event that is not typed")
            };
            let mut fields = call.clone();
            fields.ts = Some(crate::util::rfc3339_millis(event.at));
            let as_is = fields.line_as_is().is_some();
            let Value::Object(map) = serde_json::to_value(&*fields).unwrap() else {
                panic!("not an object")
            };
            let expected = AuditLine {
                at: event.at,
                body: Body::Fields(map),
            }
            .into_line();
            let line = event.into_line();
            assert_eq!(line, expected);
            assert!(!line.chars().any(text::is_unsafe), "{line}");
            assert!(line.len() <= MAX_AUDIT_LINE_BYTES);
            ways.insert((as_is, line.contains(r#""cut":true"#)));
        }
        // Positive control: every way was taken: written as it is (also
        // with recorded arguments); through `encode` with nothing cut; and
        // through `encode`, cut (a long string, a line over its bound).
        assert_eq!(
            ways,
            HashSet::from([(true, false), (false, false), (false, true)])
        );
    }

    #[test]
    fn each_use_is_recorded_once_per_session_and_the_set_is_bounded() {
        let lines = Arc::new(Lines::default());
        let root = Audit::new(Origin::Cli, vec![lines.clone()]);
        let audit = root.for_session();
        let dir = |write| Use::Dir {
            host: "/srv/notes",
            guest: "/notes",
            write,
        };
        for _ in 0..3 {
            audit.used(dir(false));
            audit.clone().used(dir(true));
            audit.used(Use::HttpOrigin {
                origin: "http://127.0.0.1:8080",
                fixture: false,
            });
        }
        // Another session records its own uses again.
        root.for_session().used(dir(false));
        let v = parsed(&lines);
        let kinds: Vec<(&str, &str)> = v
            .iter()
            .map(|e| {
                (
                    e["what"].as_str().unwrap(),
                    e["access"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("dir", "read"),
                ("dir", "write"),
                ("http_origin", ""),
                ("dir", "read")
            ]
        );
        assert!(v.iter().all(|e| e["event"] == "used"));
        assert_eq!(v[0]["host"], "/srv/notes");
        assert_eq!(v[0]["guest"], "/notes");
        assert_ne!(v[3]["session"], v[0]["session"]);

        // A Tick connecting to ever new ports of a `HOST:*` grant: the
        // bound, one `unrecorded`, then nothing more.
        crate::util::lock(&lines.0).clear();
        let busy = root.for_session();
        for port in 0..(MAX_AUDIT_USES as u32 * 3) {
            let address = format!("127.0.0.1:{port}");
            busy.used(Use::Socket {
                address: &address,
                allow_net: &address,
            });
        }
        let v = parsed(&lines);
        assert_eq!(v.len(), MAX_AUDIT_USES + 1, "the bound and one more line");
        assert!(v[..MAX_AUDIT_USES].iter().all(|e| e["what"] == "socket"));
        let last = &v[MAX_AUDIT_USES];
        assert_eq!(last["what"], "unrecorded");
        assert_eq!(last["bound"], MAX_AUDIT_USES);
        assert_eq!(
            crate::util::lock(&busy.record).seen.len(),
            MAX_AUDIT_USES,
            "nothing is kept past the bound"
        );
        // Positive control: a use already recorded is not a new one.
        crate::util::lock(&lines.0).clear();
        busy.used(Use::Socket {
            address: "127.0.0.1:0",
            allow_net: "127.0.0.1:0",
        });
        assert!(crate::util::lock(&lines.0).is_empty());
    }

    #[test]
    fn arguments_are_a_hash_unless_recorded() {
        let lines = Arc::new(Lines::default());
        let args = json!({"secret": "hunter2"});
        let outcome = CallOutcome::Ok(json!(1));
        let hashed = Audit::new(Origin::Cli, vec![lines.clone()]).for_session();
        hashed.call("t", false, &args, &outcome, Duration::from_millis(3));
        let whole = Audit::new(Origin::Cli, vec![lines.clone()])
            .with_args(true)
            .for_session();
        whole.call("t", true, &args, &outcome, Duration::from_millis(3));
        let v = parsed(&lines);
        assert!(!crate::util::lock(&lines.0)[0].contains("hunter2"));
        assert_eq!(v[0]["args_sha256"], sha256_hex(args.to_string().as_bytes()));
        assert_eq!(v[0]["args"], Value::Null);
        assert_eq!(v[1]["args"], args, "positive control: recorded when asked");
        assert_eq!(v[1]["mutates"], true);
        assert_eq!(v[1]["outcome"], "ok");
    }

    #[test]
    fn a_long_event_is_cut_to_the_line_bound_not_split() {
        let lines = Arc::new(Lines::default());
        let audit = Audit::new(Origin::Cli, vec![lines.clone()])
            .with_args(true)
            .for_session();
        // One long string is cut to its bound; many of them pass the line's.
        let long = json!({"x": "y".repeat(MAX_AUDIT_TEXT_CHARS * 2)});
        audit.call(
            "t",
            false,
            &long,
            &CallOutcome::Ok(json!(1)),
            Duration::ZERO,
        );
        let big: Map<String, Value> = (0..100)
            .map(|i| (format!("k{i}"), json!("z".repeat(MAX_AUDIT_TEXT_CHARS))))
            .collect();
        let big = Value::Object(big);
        audit.call("t", false, &big, &CallOutcome::Ok(json!(1)), Duration::ZERO);
        let many: Vec<String> = (0..5000).map(|i| format!("/d{i}")).collect();
        audit.start("t", "wasm", None, json!({"dir": many}));
        let raw = crate::util::lock(&lines.0).clone();
        assert_eq!(raw.len(), 3);
        for line in &raw {
            assert!(line.len() <= MAX_AUDIT_LINE_BYTES, "{}", line.len());
        }
        let v = parsed(&lines);
        assert_eq!(v[0]["cut"], true);
        let kept = v[0]["args"]["x"].as_str().unwrap();
        assert_eq!(
            kept.chars().count(),
            MAX_AUDIT_TEXT_CHARS + 1,
            "cut, with …"
        );
        assert_eq!(v[1]["cut"], true);
        assert_eq!(
            v[1]["args"],
            Value::Null,
            "too long whole: only the hash stays"
        );
        assert_eq!(v[1]["args_sha256"], sha256_hex(big.to_string().as_bytes()));
        assert_eq!(v[2]["event"], "start");
        assert_eq!(v[2]["cut"], true);
    }

    /// A writer that waits until told, like a stalled stderr.
    struct Stalled(Arc<Mutex<Vec<String>>>, std::sync::mpsc::Receiver<()>);
    impl LineOut for Stalled {
        fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()> {
            let _ = self.1.recv();
            crate::util::lock(&self.0).extend(lines.iter().cloned());
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_never_waits_and_counts_what_it_lost() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let (go, wait) = std::sync::mpsc::channel();
        let w = QueuedWriter::with_queue(Box::new(Stalled(written.clone(), wait)), 2).unwrap();
        let audit = Audit::new(Origin::Cli, vec![w.clone()]).for_session();
        let started = std::time::Instant::now();
        for i in 0..50 {
            // Approvals: not merged, each is a line (as limits were before
            // repeated ones were merged).
            audit.approval("call", &i.to_string(), true, "");
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "offering never waits for the writer"
        );
        for _ in 0..100 {
            let _ = go.send(());
        }
        audit.end(&EndReason::Shutdown);
        w.finish_within(Duration::from_secs(20));
        let lines = crate::util::lock(&written).clone();
        let lost: u64 = lines
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter_map(|v| v["lost"].as_u64())
            .sum();
        // What was written and what was counted lost add up to what was offered.
        assert_eq!(lines.len() as u64 + lost, 51, "{lines:?}");
        assert!(lost > 0, "a queue of 2 behind a stalled writer loses lines");
    }

    /// Counts its writes; the first waits until told.
    struct Counted {
        lines: Arc<Mutex<Vec<String>>>,
        writes: Arc<AtomicU64>,
        /// Told when the first write starts; then waits to be told.
        first: Option<(std::sync::mpsc::Sender<()>, std::sync::mpsc::Receiver<()>)>,
    }
    impl LineOut for Counted {
        fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()> {
            if let Some((started, go)) = self.first.take() {
                let _ = started.send(());
                let _ = go.recv();
            }
            self.writes.fetch_add(1, Ordering::Relaxed);
            crate::util::lock(&self.lines).extend(lines.iter().cloned());
            Ok(())
        }
    }

    #[test]
    fn events_are_written_in_batches_in_order_and_without_waiting_for_the_end() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let writes = Arc::new(AtomicU64::new(0));
        let (go, wait) = std::sync::mpsc::channel();
        let (started, writing) = std::sync::mpsc::channel();
        let w = QueuedWriter::spawn(Box::new(Counted {
            lines: lines.clone(),
            writes: writes.clone(),
            first: Some((started, wait)),
        }))
        .unwrap();
        let audit = Audit::new(Origin::Cli, vec![w.clone()]).for_session();
        // The first event wakes the writer, whose write then stalls: the
        // next 99 wait in the queue and go out as one batch.
        // Approvals: each one line (limits of one bound are merged).
        let event = |i: u64| audit.approval("call", &i.to_string(), true, "");
        event(0);
        writing.recv().unwrap();
        let written = |n: usize| {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while crate::util::lock(&lines).len() < n && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            crate::util::lock(&lines).len()
        };
        for i in 1..100 {
            event(i);
        }
        go.send(()).unwrap();
        // Written without `finish`: the writer was woken, not left asleep.
        assert_eq!(written(100), 100);
        assert_eq!(
            writes.load(Ordering::Relaxed),
            2,
            "one write for the first event, one for the 99 queued behind it"
        );
        let values: Vec<u64> = crate::util::lock(&lines)
            .iter()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["subject"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert_eq!(values, (0..100).collect::<Vec<u64>>(), "in order");
        // Positive control: asleep again on an empty queue, one more event
        // still wakes it.
        event(100);
        assert_eq!(written(101), 101);
        w.finish_within(Duration::from_secs(20));
        assert_eq!(writes.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_rotating_file_keeps_its_bound_and_its_old_files() {
        let dir = std::env::temp_dir().join(format!("tickbox-audit-rot-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.jsonl");
        let mut f = RotatingFile::open(&path, 100, 2).unwrap();
        for i in 0..20 {
            f.write_lines(&[format!("{{\"n\":{i:030}}}")]).unwrap();
        }
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(size(&path) <= 100 && size(&path) > 0);
        assert!(size(&dir.join("a.jsonl.1")) > 0 && size(&dir.join("a.jsonl.2")) > 0);
        assert!(!dir.join("a.jsonl.3").exists(), "only `keep` old files");
        let newest = std::fs::read_to_string(&path).unwrap();
        assert!(newest.contains(&format!("{:030}", 19)), "{newest}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn audit_files_are_not_opened_through_a_link() {
        let dir = std::env::temp_dir().join(format!("tickbox-audit-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, "").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("link")).unwrap();
        assert!(open_append(&dir.join("link")).is_err());
        assert!(open_append(&dir.join("plain")).is_ok(), "positive control");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Counts every event an observer sees.
    #[derive(Default)]
    struct Seen(AtomicU64);
    impl AuditObserver for Seen {
        fn observe(&self, _: Option<&str>, _: &Event<'_>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn repeated_refusals_of_a_kind_are_one_line_and_a_count() {
        let lines = Arc::new(Lines::default());
        let seen = Arc::new(Seen::default());
        let audit = Audit::new(Origin::Cli, vec![lines.clone()])
            .observed_by(seen.clone())
            .for_session();
        for i in 0..10_000 {
            audit.denied(DenialKind::Path, &format!("../x{i}"), "leads out");
        }
        for _ in 0..500 {
            audit.denied(DenialKind::Socket, "127.0.0.1:9", "not granted");
            audit.limit("max_handles", 64, "an open at the cap");
        }
        let before_end = crate::util::lock(&lines.0).len();
        assert_eq!(before_end, 3, "the first of each kind, at once");
        audit.end(&EndReason::Shutdown);
        let v = parsed(&lines);
        let shown: Vec<(String, String, u64)> = v
            .iter()
            .map(|e| {
                (
                    e["event"].as_str().unwrap().to_string(),
                    e["what"]
                        .as_str()
                        .or(e["bound"].as_str())
                        .unwrap_or("")
                        .to_string(),
                    e["count"].as_u64().unwrap_or(1),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("denied".into(), "path".into(), 1),
                ("denied".into(), "socket".into(), 1),
                ("limit".into(), "max_handles".into(), 1),
                ("denied".into(), "path".into(), 9_999),
                ("denied".into(), "socket".into(), 499),
                ("limit".into(), "max_handles".into(), 499),
                ("end".into(), "".into(), 1),
            ]
        );
        // The merged line: one example (the first held), its times.
        assert_eq!(v[0]["attempted"], "../x0");
        assert_eq!(v[3]["attempted"], "../x1");
        assert!(v[3]["first"].as_str().unwrap() <= v[3]["last"].as_str().unwrap());
        assert_eq!(v[3]["detail"], "leads out");
        // Positive control: every refusal still reached the observer (the
        // metrics count each), only the lines are merged.
        assert_eq!(seen.0.load(Ordering::Relaxed), 10_000 + 1000 + 1);
        // Another session is not merged with this one.
        crate::util::lock(&lines.0).clear();
        let other = Audit::new(Origin::Cli, vec![lines.clone()]).for_session();
        other.denied(DenialKind::Path, "../y", "leads out");
        assert_eq!(parsed(&lines)[0]["attempted"], "../y");
    }

    #[test]
    fn a_long_run_of_refusals_says_its_count_every_window() {
        // The window decides, not a wait: one that has always passed
        // writes each held count with the next refusal; one that never
        // passes holds them all until the end.
        let counts = |window: Duration| {
            let lines = Arc::new(Lines::default());
            let audit = Audit::new(Origin::Cli, vec![lines.clone()])
                .with_merge_window(window)
                .for_session();
            for path in ["../a", "../b", "../c", "../d"] {
                audit.denied(DenialKind::Path, path, "leads out");
            }
            let before_end = parsed(&lines).len();
            audit.end(&EndReason::Shutdown);
            let shown: Vec<(String, u64, String)> = parsed(&lines)
                .iter()
                .map(|e| {
                    (
                        e["event"].as_str().unwrap().to_string(),
                        e["count"].as_u64().unwrap_or(1),
                        e["attempted"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            (before_end, shown)
        };
        let line = |event: &str, n: u64, at: &str| (event.to_string(), n, at.to_string());
        let (before_end, passed) = counts(Duration::ZERO);
        assert_eq!(before_end, 4, "each count written with the next refusal");
        assert_eq!(
            passed,
            [
                line("denied", 1, "../a"),
                line("denied", 1, "../b"),
                line("denied", 1, "../c"),
                line("denied", 1, "../d"),
                line("end", 1, ""),
            ]
        );
        // Positive control: within the window, held until the end.
        let (before_end, held) = counts(Duration::from_secs(3600));
        assert_eq!(before_end, 1, "held within the window");
        assert_eq!(
            held,
            [
                line("denied", 1, "../a"),
                line("denied", 3, "../b"),
                line("end", 1, ""),
            ]
        );
    }

    #[test]
    fn a_sessions_own_events_stop_at_its_budget_and_say_what_was_dropped() {
        let lines = Arc::new(Lines::default());
        let root = Audit::new(Origin::Cli, vec![lines.clone()]).with_session_budget(2048);
        let busy = root.for_session();
        let neighbour = root.for_session();
        for port in 0..200u32 {
            let address = format!("127.0.0.1:{port}");
            busy.used(Use::Socket {
                address: &address,
                allow_net: &address,
            });
            busy.denied(DenialKind::Lookup, &format!("n{port}"), "no grant names it");
            busy.call(
                "t",
                false,
                &json!({}),
                &CallOutcome::Ok(json!(1)),
                Duration::ZERO,
            );
            neighbour.used(Use::Socket {
                address: &address,
                allow_net: &address,
            });
        }
        busy.end(&EndReason::Shutdown);
        let v = parsed(&lines);
        let of = |audit: &Audit| -> Vec<&Value> {
            v.iter()
                .filter(|e| e["session"] == audit.session().unwrap())
                .collect()
        };
        let mine = of(&busy);
        let own: usize = mine
            .iter()
            .filter(|e| ["used", "denied", "limit"].contains(&e["event"].as_str().unwrap()))
            .map(|e| serde_json::to_string(e).unwrap().len() + 1)
            .sum();
        assert!(own <= 2048 + 64, "own events within the budget: {own}");
        let calls = mine.iter().filter(|e| e["event"] == "call").count();
        assert_eq!(calls, 200, "calls are not the Tick's doing: all recorded");
        let unrecorded: Vec<_> = mine.iter().filter(|e| e["event"] == "unrecorded").collect();
        assert_eq!(unrecorded.len(), 1, "{mine:#?}");
        let u = unrecorded[0];
        assert_eq!(u["bound"], 2048);
        let written_uses = mine.iter().filter(|e| e["event"] == "used").count() as u64;
        assert_eq!(
            written_uses + u["dropped"]["used"]["socket"].as_u64().unwrap(),
            200,
            "what was written and what was dropped add up: {u}"
        );
        // The lookups: the first written or dropped, the rest merged into
        // one line, written or dropped with its count.
        let written_lookups: u64 = mine
            .iter()
            .filter(|e| e["event"] == "denied")
            .map(|e| e["count"].as_u64().unwrap_or(1))
            .sum();
        assert_eq!(
            written_lookups + u["dropped"]["denied"]["lookup"].as_u64().unwrap_or(0),
            200,
            "{u}"
        );
        let ends: Vec<_> = mine.iter().map(|e| e["event"].as_str().unwrap()).collect();
        assert_eq!(ends[ends.len() - 2..], ["unrecorded", "end"]);
        // Positive control: the neighbour's budget is its own.
        let theirs = of(&neighbour);
        assert!(theirs.iter().all(|e| e["event"] == "used"));
        assert!(theirs.len() > written_uses as usize, "{}", theirs.len());
    }

    /// Notes each write and sync, in order; fails when told.
    struct Syncs {
        log: Arc<Mutex<Vec<String>>>,
        fail: bool,
    }
    impl LineOut for Syncs {
        fn write_lines(&mut self, lines: &[String]) -> std::io::Result<()> {
            let mut log = crate::util::lock(&self.log);
            log.extend(lines.iter().map(|l| format!("write {l}")));
            Ok(())
        }
        fn sync(&mut self) -> std::io::Result<()> {
            if self.fail {
                return Err(std::io::Error::other("disk full"));
            }
            crate::util::lock(&self.log).push("sync".into());
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_synced_call_waits_for_its_line_to_be_written_and_synced() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let w = QueuedWriter::synced(Box::new(Syncs {
            log: log.clone(),
            fail: false,
        }))
        .unwrap();
        let audit = Audit::new(Origin::Mcp, vec![w.clone()])
            .synced(true)
            .for_session();
        let ok = CallOutcome::Ok(json!(1));
        for i in 0..20 {
            let recorded = audit.call(&format!("t{i}"), false, &json!({}), &ok, Duration::ZERO);
            assert!(recorded.waits());
            recorded.durable().await.unwrap();
            // Its line is written, and a sync came after it.
            let log = crate::util::lock(&log).clone();
            let at = log
                .iter()
                .position(|l| l.contains(&format!("\"tool\":\"t{i}\"")))
                .expect("written before the answer");
            assert!(log[at..].iter().any(|l| l == "sync"), "{log:?}");
        }
        w.finish_within(Duration::from_secs(20));
        // Closed: a call is refused at once, not left waiting.
        let late = audit.call("late", false, &json!({}), &ok, Duration::ZERO);
        assert_eq!(late.durable().await, Err(AuditSyncError::Closed));

        // A sync that fails is the call's error.
        let failing = QueuedWriter::synced(Box::new(Syncs {
            log: Arc::new(Mutex::new(Vec::new())),
            fail: true,
        }))
        .unwrap();
        let audit = Audit::new(Origin::Mcp, vec![failing.clone()])
            .synced(true)
            .for_session();
        let r = audit.call("t", false, &json!({}), &ok, Duration::ZERO);
        assert!(matches!(r.durable().await, Err(AuditSyncError::Failed(_))));
        failing.finish_within(Duration::from_secs(20));

        // Positive control: a handle that is not synced waits for nothing,
        // and a batched writer never syncs.
        let log = Arc::new(Mutex::new(Vec::new()));
        let batched = QueuedWriter::spawn(Box::new(Syncs {
            log: log.clone(),
            fail: false,
        }))
        .unwrap();
        let audit = Audit::new(Origin::Mcp, vec![batched.clone()]).for_session();
        assert!(!audit
            .call("t", false, &json!({}), &ok, Duration::ZERO)
            .waits());
        let synced_handle = Audit::new(Origin::Mcp, vec![batched.clone()])
            .synced(true)
            .for_session();
        assert!(!synced_handle
            .call("t", false, &json!({}), &ok, Duration::ZERO)
            .waits());
        batched.finish_within(Duration::from_secs(20));
        assert!(!crate::util::lock(&log).iter().any(|l| l == "sync"));
    }

    #[test]
    fn an_audit_path_that_is_not_a_regular_file_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("tickbox-audit-kind-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // A reader on it, so an open for writing would succeed at once: the
        // check on the opened file refuses it too.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags_nonblock()
            .open(&fifo)
            .unwrap();
        let started = std::time::Instant::now();
        for path in [fifo.as_path(), dir.as_path(), Path::new("/dev/null")] {
            let e = open_append(path).expect_err("refused");
            assert!(e.to_string().contains("not a regular file"), "{e}");
        }
        drop(reader);
        // And with no reader, where a blocking open would wait for ever.
        let e = open_append(&fifo).expect_err("refused");
        assert!(e.to_string().contains("a fifo"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10));
        // Positive control: a regular file, new or existing, opens.
        assert!(open_append(&dir.join("plain")).is_ok());
        assert!(open_append(&dir.join("plain")).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    trait NonBlock {
        fn custom_flags_nonblock(&mut self) -> &mut Self;
    }
    impl NonBlock for std::fs::OpenOptions {
        fn custom_flags_nonblock(&mut self) -> &mut Self {
            use std::os::unix::fs::OpenOptionsExt;
            self.custom_flags(libc::O_NONBLOCK)
        }
    }

    #[test]
    fn writers_taking_turns_on_one_rotating_file_keep_its_bound_together() {
        let dir = std::env::temp_dir().join(format!("tickbox-audit-turns-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.jsonl");
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        // Like one `tickbox call` after another on one --audit file: each
        // opens it, writes a little, and goes.
        for i in 0..30 {
            let mut f = RotatingFile::open(&path, 200, 2).unwrap();
            f.write_lines(&[format!("{{\"n\":{i:040}}}")]).unwrap();
        }
        assert!(size(&path) <= 200, "{}", size(&path));
        assert!(size(&dir.join("a.jsonl.1")) > 0);
        // Two open at once: the second notices the first rotated the file
        // away and writes to the new one.
        let mut a = RotatingFile::open(&path, 200, 2).unwrap();
        let mut b = RotatingFile::open(&path, 200, 2).unwrap();
        for i in 0..10 {
            a.write_lines(&[format!("{{\"a\":{i:040}}}")]).unwrap();
            b.write_lines(&[format!("{{\"b\":{i:040}}}")]).unwrap();
        }
        for p in [path.clone(), dir.join("a.jsonl.1"), dir.join("a.jsonl.2")] {
            assert!(size(&p) <= 200, "{}: {}", p.display(), size(&p));
        }
        let newest = std::fs::read_to_string(&path).unwrap();
        assert!(newest.contains(&format!("{:040}", 9)), "{newest}");
        assert!(!dir.join("a.jsonl.3").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
