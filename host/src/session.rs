//! The host engine: one protocol session with one Tick.
//!
//! A [`Session`] is started from a [`TickIo`] (what a backend yields: the
//! Tick's stdin and stdout, its view and a handle on the process). Three
//! tasks run beside the requests:
//!
//! - the **writer** finishes writing frames to the Tick's stdin, whole and
//!   in the order requests were queued. A request that finds no frame
//!   queued writes its own frame at once, with one non-blocking write, and
//!   hands the writer only what the pipe did not take (`outbox`); either
//!   way a caller that gives up (a timeout, a dropped future) can never
//!   leave half a frame for the next one to be glued to. A frame the Tick
//!   does not take within [`SessionConfig::write_timeout`] ends the session
//!   ([`EndReason::StdinStalled`]): a Tick that stops reading its stdin
//!   never hangs the host;
//! - the **reader** owns the Tick's stdout, splits it into lines
//!   ([`crate::framing`]), classifies each ([`tickbox_protocol::message`]),
//!   hands responses to the request waiting on their id, and checks and keeps
//!   tick/update state;
//! - the **supervisor** owns the process and ends the session: on a violation,
//!   on the end of the Tick's output, or when the host shuts it down.
//!
//! Requests ([`Session::describe`], [`Session::read`], [`Session::call`]) take
//! one of [`MAX_IN_FLIGHT`] slots, so a ninth waits for a free one. A slot is
//! held until the Tick answers or the session ends, even when the caller
//! stopped waiting: a request the Tick has read is in flight whether or not
//! anyone still waits for it. A request's whole life (waiting for a slot,
//! being written, being answered) is inside its deadline. A call is sent
//! once and only once: a timeout, a malformed answer or the end of the
//! session make its outcome [`CallOutcome::Unknown`], never a resend; a call
//! that provably never reached the Tick (its turn to be written had not
//! come, or it is larger than a request line may be) fails with
//! `executed: false` instead.
//!
//! **Invariant:** when a session ends, every request still in flight resolves
//! as ended (calls as unknown outcome), and the Tick process is terminated.

mod outbox;

use crate::framing::{FrameError, LineReader};
use crate::util::lock;
use crate::view::View;
use outbox::Outbox;
use serde_json::{json, Value};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tickbox_protocol::codes;
use tickbox_protocol::limits::{
    CALL_TIMEOUT, INIT_TIMEOUT, MAX_CALL_RESULT_BYTES, MAX_IN_FLIGHT, MAX_LINE_BYTES,
    REQUEST_TIMEOUT, REVISION_BURST, REVISION_INTERVAL, SCREEN_EXCERPT_CHARS,
};
use tickbox_protocol::message::{encode_request, encoded_len, method, parse_line};
use tickbox_protocol::rules::{self, Rule};
use tickbox_protocol::schema::{self, SchemaCache};
use tickbox_protocol::state::{check_read_floor, check_update, parse_state};
use tickbox_protocol::TickText;
use tickbox_protocol::{
    Descriptor, Incoming, PreparedCall, RequestId, ResponseBody, RpcError, TickState, Violation,
};
use tokio::io::AsyncRead;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};

/// A boxed future, for the object-safe process trait.
pub use crate::backend::BoxFuture;

pub use crate::backend::{TickIo, TickProcess};

pub use tickbox_telemetry::outcome::{CallOutcome, EndReason, UnknownReason};

/// Timeouts of a session; the defaults are the protocol's.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// From start to the end of the first tick/read.
    pub init_timeout: Duration,
    /// Each tick/describe and tick/read.
    pub request_timeout: Duration,
    /// Each tick/call before its outcome is unknown.
    pub call_timeout: Duration,
    /// How long one frame may wait for the Tick to take it from its stdin
    /// before the session ends ([`EndReason::StdinStalled`]).
    pub write_timeout: Duration,
    /// A request that finds no frame queued writes its own frame at once
    /// (one non-blocking write) instead of handing it to the writer task;
    /// the default. `false` sends every frame through the writer task, the
    /// benchmark's comparison (BENCHMARKS.md, round trips).
    pub caller_writes: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            init_timeout: INIT_TIMEOUT,
            request_timeout: REQUEST_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
            write_timeout: CALL_TIMEOUT,
            caller_writes: true,
        }
    }
}

/// The error code of a call the host did not send because no request slot
/// came free within its deadline (in JSON-RPC's implementation-defined
/// range; the call is reported with `executed: false`).
pub const NOT_SENT: i64 = -32099;

/// Why initialization failed (§4.2): the reason and the start of the screen.
#[derive(Debug, Clone, thiserror::Error)]
#[error("initialization failed: {reason}{}", screen_suffix(.screen))]
pub struct InitError {
    /// What went wrong, naming the rule.
    pub reason: String,
    /// The rule the Tick broke, when one did (a start that failed for
    /// another reason, e.g. the Tick exited, has none).
    pub rule: Option<&'static Rule>,
    /// The first characters of the view screen, whitespace folded.
    pub screen: TickText,
    /// The Tick's last words: the last non-blank lines of its screen (at
    /// most [`crate::view::LAST_WORDS_LINES`]), as drawn.
    pub last_words: Vec<TickText>,
}

fn screen_suffix(screen: &TickText) -> String {
    if screen.is_empty() {
        String::new()
    } else {
        format!(" (screen: {screen})")
    }
}

/// Why a tick/describe or tick/read failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The session is over.
    #[error("{0}")]
    Ended(EndReason),
    /// No answer in time.
    #[error("{method} got no response within {}s", .after.as_secs_f32())]
    TimedOut {
        method: &'static str,
        after: Duration,
    },
    /// The Tick answered with an error.
    #[error("{method} failed with error {}: {}", .error.code, .error.message)]
    Rpc {
        method: &'static str,
        error: RpcError,
    },
    /// The answer broke a per-request rule (§3.6), or its result is invalid.
    #[error("{method}: {reason}")]
    Invalid {
        method: &'static str,
        reason: String,
        /// The rule the answer broke.
        rule: Option<&'static Rule>,
    },
    /// The request would be a line longer than the protocol allows; nothing
    /// was sent.
    #[error("{method}: the request is {bytes} bytes encoded, over the {limit}-byte line limit (§3.6); nothing was sent")]
    TooLarge {
        method: &'static str,
        bytes: usize,
        limit: usize,
    },
    /// No request slot came free before the deadline; nothing was sent.
    #[error("{method}: not sent: all {MAX_IN_FLIGHT} request slots stayed busy for {}s", .after.as_secs_f32())]
    NotSent {
        method: &'static str,
        after: Duration,
    },
}

impl RequestError {
    /// The protocol rule the Tick broke, when that is why the request
    /// failed (or why the session it ran in ended).
    pub fn rule(&self) -> Option<&'static Rule> {
        match self {
            RequestError::Ended(end) => end.rule(),
            RequestError::Invalid { rule, .. } => *rule,
            _ => None,
        }
    }
}

/// Something a client of the session may want to know about.
#[derive(Debug, Clone)]
pub enum SessionEvent {
    /// A new latest state, from a tick/update.
    Updated(Arc<TickState>),
    /// The catalog changed (a describe returned a new revision).
    CatalogChanged(Arc<Descriptor>),
    /// The session is over.
    Ended(EndReason),
}

/// Raises its flag when dropped undisarmed: a describe that was abandoned
/// (its future dropped at a deadline) tells its compile on the pool to stop.
struct AbandonOnDrop {
    flag: Arc<std::sync::atomic::AtomicBool>,
    armed: bool,
}

impl AbandonOnDrop {
    fn new() -> AbandonOnDrop {
        AbandonOnDrop {
            flag: Arc::default(),
            armed: true,
        }
    }

    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if self.armed {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
}

/// The latest state and how many updates the session has accepted in all.
#[derive(Debug, Clone, Default)]
pub struct StateSnapshot {
    /// The newest state known (highest seq), if any.
    pub state: Option<Arc<TickState>>,
    /// tick/update notifications accepted so far.
    pub updates: u64,
}

#[derive(Default)]
struct SeqTrack {
    last_update: Option<u64>,
    last_read: Option<u64>,
}

/// A request between being queued and being answered (or the session's end).
struct InFlight {
    /// Where the answer goes; the receiver is gone if the caller gave up.
    tx: oneshot::Sender<ResponseBody>,
    /// Its request slot, held until this entry goes.
    _slot: OwnedSemaphorePermit,
}

type Pending = HashMap<u64, InFlight>;

struct Shared {
    pending: Mutex<Pending>,
    seqs: Mutex<SeqTrack>,
    state: watch::Sender<StateSnapshot>,
    catalog: Mutex<Option<Arc<Descriptor>>>,
    /// The describe result the catalog was parsed from, to tell a repeat
    /// describe (the MCP facade polls) from a change without parsing again.
    catalog_raw: Mutex<Option<Value>>,
    /// This Tick's compiled input schemas, by content: shared by its
    /// revisions, so only a changed schema is compiled again.
    schemas: Arc<Mutex<SchemaCache>>,
    /// How many new revisions the Tick may still have taken now.
    revisions: Mutex<RevisionBucket>,
    /// The Tick's memory bound, when its backend has one: its compiled
    /// schemas are charged to it.
    memory: Option<Arc<crate::backend::MemoryCharge>>,
    /// Where this session records its calls and its end, when its
    /// starter keeps an audit stream ([`tickbox_telemetry::audit`]).
    audit: Option<tickbox_telemetry::audit::Audit>,
    /// Whether its `end` was recorded (once: by a failed start or the
    /// first end). A call still in flight then is recorded after it.
    audit_ended: std::sync::atomic::AtomicBool,
    ended: watch::Sender<Option<EndReason>>,
    events: tokio::sync::broadcast::Sender<SessionEvent>,
    next_id: AtomicU64,
}

/// The rate at which a Tick's new catalog revisions are taken: a burst of
/// [`REVISION_BURST`], then one per [`REVISION_INTERVAL`]. Each new
/// revision costs the host a validation and a compile of what changed; a
/// Tick that changes its revision on every describe gets no more than this.
struct RevisionBucket {
    tokens: u32,
    refilled: tokio::time::Instant,
}

impl RevisionBucket {
    fn new() -> RevisionBucket {
        RevisionBucket {
            tokens: REVISION_BURST,
            refilled: tokio::time::Instant::now(),
        }
    }

    /// Takes one revision if the rate allows it now.
    fn take(&mut self) -> bool {
        let now = tokio::time::Instant::now();
        let intervals = (now - self.refilled).as_nanos() / REVISION_INTERVAL.as_nanos();
        if intervals > 0 {
            let add = u32::try_from(intervals).unwrap_or(u32::MAX);
            self.tokens = self.tokens.saturating_add(add).min(REVISION_BURST);
            self.refilled += REVISION_INTERVAL * add.min(REVISION_BURST);
            if self.tokens == REVISION_BURST {
                self.refilled = now;
            }
        }
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

impl Shared {
    /// Ends the session once: first reason wins, in-flight requests fail.
    fn finish(&self, reason: EndReason) {
        let first = self.ended.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            *slot = Some(reason.clone());
            true
        });
        if first {
            // Dropping the senders wakes every waiting request, which then
            // reads the reason from `ended`.
            lock(&self.pending).clear();
            if let Some(audit) = self.audit_end() {
                audit.end(&reason);
            }
            let _ = self.events.send(SessionEvent::Ended(reason));
        }
    }

    /// The audit handle, the first time the session's end is recorded.
    fn audit_end(&self) -> Option<&tickbox_telemetry::audit::Audit> {
        let first = !self.audit_ended.swap(true, Ordering::Relaxed);
        self.audit.as_ref().filter(|_| first)
    }

    fn end_reason(&self) -> Option<EndReason> {
        self.ended.borrow().clone()
    }

    fn offer_state(&self, state: TickState, from_update: bool) -> Arc<TickState> {
        let state = Arc::new(state);
        self.state.send_modify(|snap| {
            // Keep the highest seq: a read may legitimately answer with a
            // newer state than an update that arrives right after it (§6.3).
            let newer = snap.state.as_ref().is_none_or(|s| state.seq >= s.seq);
            if newer {
                snap.state = Some(state.clone());
            }
            if from_update {
                snap.updates += 1;
            }
        });
        state
    }
}

enum Trigger {
    /// The reader saw the end of the Tick's output.
    Eof,
    /// The reader saw a violation or an I/O error.
    Fault(EndReason),
    /// The writer found the Tick's stdin closed (a broken pipe): the Tick
    /// has usually exited, and how it exited is the better reason.
    StdinClosed(String),
    /// The host wants the session over; answer when the Tick is gone.
    Shutdown(oneshot::Sender<()>),
}

/// One protocol session with one Tick.
pub struct Session {
    shared: Arc<Shared>,
    outbox: Arc<Outbox>,
    permits: Arc<Semaphore>,
    view: Arc<View>,
    triggers: mpsc::UnboundedSender<Trigger>,
    config: SessionConfig,
}

impl Session {
    /// Starts the session and initializes the Tick (§4.2): tick/describe,
    /// validation, tick/read, within the initialization timeout.
    pub async fn start(io: TickIo, config: SessionConfig) -> Result<Session, InitError> {
        let session = Session::spawn(io, config);
        let init = async {
            let failed = |e: RequestError| (e.to_string(), e.rule());
            let descriptor = session.describe().await.map_err(failed)?;
            session.read().await.map_err(failed)?;
            Ok::<_, (String, Option<&'static Rule>)>(descriptor)
        };
        let result = match tokio::time::timeout(session.config.init_timeout, init).await {
            Ok(r) => r,
            Err(_) => Err((
                format!(
                    "initialization did not finish within {}s (§4.2)",
                    session.config.init_timeout.as_secs_f32()
                ),
                Some(rules::INIT_TIMELY),
            )),
        };
        match result {
            Ok(_) => Ok(session),
            Err((reason, rule)) => {
                // The audit's `end` says why the start failed, not that
                // the host then shut the Tick down.
                if let Some(audit) = session.shared.audit_end() {
                    audit.end_failed(&reason);
                }
                // Whatever the Tick drew on the way out (a version message,
                // a panic) is the most useful context; let it reach the screen.
                if session.end_reason().is_some() {
                    session.view.settle_after_end().await;
                } else {
                    session
                        .view
                        .settle(Duration::from_millis(100), Duration::from_millis(500))
                        .await;
                }
                let screen = session.view.excerpt(SCREEN_EXCERPT_CHARS);
                let last_words = session.view.last_lines(crate::view::LAST_WORDS_LINES);
                session.shutdown().await;
                Err(InitError {
                    reason,
                    rule,
                    screen,
                    last_words,
                })
            }
        }
    }

    /// Starts the tasks without initializing (for tests of the engine itself).
    pub fn spawn(io: TickIo, config: SessionConfig) -> Session {
        let (ended, _) = watch::channel(None);
        let (state, _) = watch::channel(StateSnapshot::default());
        let (events, _) = tokio::sync::broadcast::channel(1024);
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            seqs: Mutex::new(SeqTrack::default()),
            state,
            catalog: Mutex::new(None),
            catalog_raw: Mutex::new(None),
            schemas: Arc::new(Mutex::new(SchemaCache::new())),
            revisions: Mutex::new(RevisionBucket::new()),
            memory: io.process.memory(),
            audit: io.process.audit(),
            audit_ended: std::sync::atomic::AtomicBool::new(false),
            ended,
            events,
            next_id: AtomicU64::new(1),
        });
        let (triggers, triggers_rx) = mpsc::unbounded_channel();
        // Never more than MAX_IN_FLIGHT frames: each holds a slot, and a
        // withdrawn frame leaves the queue with its slot.
        let outbox = Arc::new(Outbox::new(io.stdin, config.caller_writes));
        let writer = tokio::spawn(outbox::write_frames(
            outbox.clone(),
            triggers.clone(),
            config.write_timeout,
        ));
        tokio::spawn(read_frames(io.stdout, shared.clone(), triggers.clone()));
        tokio::spawn(supervise(
            io.process,
            shared.clone(),
            triggers_rx,
            Writer {
                outbox: outbox.clone(),
                task: writer,
            },
        ));
        Session {
            shared,
            outbox,
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            view: io.view,
            triggers,
            config,
        }
    }

    /// The Tick's view.
    pub fn view(&self) -> &Arc<View> {
        &self.view
    }

    /// The current catalog (after initialization, always present).
    pub fn descriptor(&self) -> Option<Arc<Descriptor>> {
        lock(&self.shared.catalog).clone()
    }

    /// The latest state and the number of updates accepted so far.
    pub fn state(&self) -> StateSnapshot {
        self.shared.state.borrow().clone()
    }

    /// Watches the latest state (latest-only: intermediate states may be skipped).
    pub fn watch_state(&self) -> watch::Receiver<StateSnapshot> {
        self.shared.state.subscribe()
    }

    /// Subscribes to session events.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<SessionEvent> {
        self.shared.events.subscribe()
    }

    /// Why the session ended, if it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.shared.end_reason()
    }

    /// Resolves when the session has ended, with the reason.
    pub async fn ended(&self) -> EndReason {
        let mut rx = self.shared.ended.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                return EndReason::Shutdown;
            }
        }
    }

    /// Sends one request and waits for its response body, all within
    /// `timeout`: waiting for a slot, being written and being answered.
    ///
    /// Cancel-safe: dropping the future before the writer took the frame
    /// withdraws it (nothing is written, the slot is freed); after that the
    /// frame is written whole and the slot stays taken until the Tick
    /// answers or the session ends.
    async fn request<P: serde::Serialize>(
        &self,
        method: &'static str,
        params: &P,
        timeout: Duration,
        before_send: impl FnOnce(),
    ) -> Result<ResponseBody, RequestError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let ended = |s: &Shared| RequestError::Ended(s.end_reason().unwrap_or(EndReason::Shutdown));
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = encode_request(RequestId(id), method, params);
        // The bound on what the host sends: the same line limit a Tick must keep.
        let line = frame.len() - 1;
        if line > MAX_LINE_BYTES {
            return Err(RequestError::TooLarge {
                method,
                bytes: line,
                limit: MAX_LINE_BYTES,
            });
        }
        let mut ended_rx = self.shared.ended.subscribe();
        // Wait for a slot, unless the session ends or the deadline passes first.
        let slot = tokio::select! {
            p = self.permits.clone().acquire_owned() => p.map_err(|_| ended(&self.shared))?,
            _ = ended_rx.wait_for(Option::is_some) => return Err(ended(&self.shared)),
            _ = tokio::time::sleep_until(deadline) => {
                return Err(RequestError::NotSent { method, after: timeout })
            }
        };
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.shared.pending);
            // Checked under the lock that `finish` clears, so a request can
            // never be registered after the session ended and wait forever.
            if self.shared.end_reason().is_some() {
                return Err(ended(&self.shared));
            }
            pending.insert(id, InFlight { tx, _slot: slot });
        }
        before_send();
        // Written here and now when the outbox is idle, else queued for
        // the writer task (see `outbox`).
        if self.outbox.submit(id, frame).is_err() {
            lock(&self.shared.pending).remove(&id);
            return Err(ended(&self.shared));
        }
        let queued = Queued {
            shared: &self.shared,
            outbox: &self.outbox,
            id,
            withdrawn: Cell::new(false),
            answered: false,
        };
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(body)) => {
                queued.answered();
                Ok(body)
            }
            Ok(Err(_)) => Err(ended(&self.shared)),
            Err(_) if queued.withdraw() => Err(RequestError::NotSent {
                method,
                after: timeout,
            }),
            // Written (or being written): the slot stays taken until the
            // Tick answers or the session ends; a late answer is discarded.
            Err(_) => Err(RequestError::TimedOut {
                method,
                after: timeout,
            }),
        }
    }

    /// tick/describe: fetches and validates the catalog (§5.3). A new revision
    /// replaces the session's catalog and is announced as an event. A result
    /// equal to the last one returns the same `Arc` without validating and
    /// compiling its schemas again.
    pub async fn describe(&self) -> Result<Arc<Descriptor>, RequestError> {
        const M: &str = method::DESCRIBE;
        let body = self
            .request(M, &json!({}), self.config.request_timeout, || {})
            .await?;
        let raw = result_of(M, body)?;
        let current = lock(&self.shared.catalog).clone();
        if let Some(current) = current {
            if lock(&self.shared.catalog_raw).as_ref() == Some(&raw) {
                return Ok(current);
            }
            if !lock(&self.shared.revisions).take() {
                tracing::debug!(
                    "catalog change not taken yet: over {REVISION_BURST} revisions, \
                     then one per {}s (REVISION_INTERVAL)",
                    REVISION_INTERVAL.as_secs()
                );
                return Ok(current);
            }
        }
        // Validation compiles the input schemas: CPU work a Tick decides,
        // so unless the catalog is cheap by construction (small, no
        // patterns) it runs on the blocking pool, never on an async worker.
        // Its cost is bounded (the pattern limits) and cached per Tick; a
        // start whose deadline passes stops waiting for it at once.
        let schemas = self.shared.schemas.clone();
        // Raised if this describe is dropped before the compile ends (a
        // start deadline passed): the compile on the pool then stops
        // before its next pattern instead of running on for nobody.
        let abandon = AbandonOnDrop::new();
        let flag = abandon.flag.clone();
        let parse = move |raw: Value, cache: &mut SchemaCache| {
            cache.abandon_with(flag.clone());
            let parsed = Descriptor::parse_with(raw, cache);
            (parsed, cache.pattern_bytes())
        };
        // (The cache's lock is only tried here: a compile on the pool may
        // hold it, and an async worker must not wait for one.)
        let inline = match schema::is_cheap(&raw) {
            true => schemas
                .try_lock()
                .ok()
                .map(|mut cache| parse(raw.clone(), &mut cache)),
            false => None,
        };
        let (parsed, kept) = if let Some(parsed) = inline {
            parsed
        } else {
            let parsing = raw.clone();
            tokio::task::spawn_blocking(move || parse(parsing, &mut lock(&schemas)))
                .await
                .map_err(|e| RequestError::Invalid {
                    method: M,
                    reason: format!("the catalog could not be compiled: {e}"),
                    rule: None,
                })?
        };
        abandon.disarm();
        let d = parsed.map_err(|e| RequestError::Invalid {
            method: M,
            reason: e.to_string(),
            rule: Some(e.rule()),
        })?;
        // What the host keeps compiled for this Tick counts against the
        // Tick's own memory bound: a catalog that does not fit beside what
        // the guest uses is refused, and a guest grows only into what the
        // catalog left.
        if let Some(memory) = &self.shared.memory {
            if let Err(free) = memory.set_host(kept) {
                // What this catalog compiled goes (a compile on the pool
                // holding the cache keeps it until the next catalog).
                if let Ok(mut cache) = self.shared.schemas.try_lock() {
                    *cache = SchemaCache::new();
                }
                return Err(RequestError::Invalid {
                    method: M,
                    reason: format!(
                        "the catalog's compiled patterns take {kept} bytes, more than the {free} \
                         bytes the Tick's memory bound (max_memory, {} bytes) leaves beside \
                         what its guest uses",
                        memory.max()
                    ),
                    rule: Some(rules::DESCRIBE_SCHEMAS),
                });
            }
        }
        let d = Arc::new(d);
        let changed = {
            let mut cat = lock(&self.shared.catalog);
            let changed = cat.as_ref().is_some_and(|old| old.revision != d.revision);
            *cat = Some(d.clone());
            *lock(&self.shared.catalog_raw) = Some(raw);
            changed
        };
        if changed {
            let _ = self
                .shared
                .events
                .send(SessionEvent::CatalogChanged(d.clone()));
        }
        Ok(d)
    }

    /// tick/read: fetches the state and checks it against the read floor (§6.3).
    pub async fn read(&self) -> Result<Arc<TickState>, RequestError> {
        const M: &str = method::READ;
        let mut floor = 0;
        let body = self
            .request(M, &json!({}), self.config.request_timeout, || {
                let s = lock(&self.shared.seqs);
                floor = s.last_read.max(s.last_update).unwrap_or(0);
            })
            .await?;
        let raw = result_of(M, body)?;
        let state = parse_state(&raw).map_err(|reason| RequestError::Invalid {
            method: M,
            reason,
            rule: Some(rules::READ_VALID),
        })?;
        check_read_floor(state.seq, Some(floor)).map_err(|f| RequestError::Invalid {
            method: M,
            reason: f.to_string(),
            rule: Some(f.rule),
        })?;
        {
            let mut s = lock(&self.shared.seqs);
            s.last_read = Some(s.last_read.map_or(state.seq, |r| r.max(state.seq)));
        }
        Ok(self.shared.offer_state(state, false))
    }

    /// tick/call: sends a prepared call once and classifies its outcome,
    /// with the session's call timeout.
    pub async fn call(&self, call: &PreparedCall) -> CallOutcome {
        self.call_within(call, self.config.call_timeout).await
    }

    /// tick/call with its own timeout (a client's `call_timeout` setting).
    pub async fn call_within(&self, call: &PreparedCall, timeout: Duration) -> CallOutcome {
        self.call_recorded(call, timeout, None).await
    }

    /// tick/call for an MCP request: the audit's `call` event (and what
    /// observes it, OpenTelemetry's spans) says which request it answered.
    pub async fn call_via(
        &self,
        call: &PreparedCall,
        mcp: &tickbox_telemetry::audit::McpCall<'_>,
    ) -> CallOutcome {
        self.call_recorded(call, self.config.call_timeout, Some(mcp))
            .await
    }

    async fn call_recorded(
        &self,
        call: &PreparedCall,
        timeout: Duration,
        mcp: Option<&tickbox_telemetry::audit::McpCall<'_>>,
    ) -> CallOutcome {
        let started = std::time::Instant::now();
        let outcome = self.call_once(call, timeout).await;
        if let Some(audit) = &self.shared.audit {
            let took = started.elapsed();
            let recorded =
                audit.call_via(&call.tool, call.mutates, &call.args, &outcome, took, mcp);
            // A synced stream: the answer goes out only once its line is
            // written and synced, so an answered call survives the host's
            // being killed the moment after.
            if let Err(e) = recorded.durable().await {
                tracing::warn!(error = %e, "a call's answer withheld: its audit line is not durable");
                return CallOutcome::Unknown(UnknownReason::Unrecorded(e));
            }
        }
        outcome
    }

    /// The audit handle this session records into, if any (the CLI adds
    /// its approvals).
    pub fn audit(&self) -> Option<&tickbox_telemetry::audit::Audit> {
        self.shared.audit.as_ref()
    }

    async fn call_once(&self, call: &PreparedCall, timeout: Duration) -> CallOutcome {
        let params = CallParams {
            tool: &call.tool,
            args: &call.args,
            revision: &call.revision,
        };
        let not_sent = |code: i64, message: String| CallOutcome::Failed {
            error: RpcError {
                code,
                message: message.into(),
                data: None,
            },
            executed: false,
        };
        let body = match self.request(method::CALL, &params, timeout, || {}).await {
            Ok(body) => body,
            Err(RequestError::TimedOut { after, .. }) => {
                return CallOutcome::Unknown(UnknownReason::TimedOut(after))
            }
            Err(RequestError::Ended(r)) => {
                return CallOutcome::Unknown(UnknownReason::SessionEnded(r))
            }
            Err(e @ RequestError::TooLarge { .. }) => {
                return not_sent(codes::INVALID_PARAMS, e.to_string())
            }
            Err(e @ RequestError::NotSent { .. }) => return not_sent(NOT_SENT, e.to_string()),
            Err(other) => return CallOutcome::Unknown(UnknownReason::Malformed(other.to_string())),
        };
        match body {
            ResponseBody::Result(v) => {
                let size = encoded_len(&v);
                if size > MAX_CALL_RESULT_BYTES {
                    return CallOutcome::Unknown(UnknownReason::TooLarge {
                        observed: size,
                        limit: MAX_CALL_RESULT_BYTES,
                    });
                }
                CallOutcome::Ok(v)
            }
            ResponseBody::Error(error) => {
                let executed = codes::executed(error.code);
                CallOutcome::Failed { error, executed }
            }
            ResponseBody::Malformed(why) => CallOutcome::Unknown(UnknownReason::Malformed(why)),
        }
    }

    /// Ends the session: closes the Tick's stdin, gives it a moment, then
    /// terminates it. Returns once the Tick is gone.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.triggers.send(Trigger::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A session dropped without shutdown still stops its Tick; nobody
        // waits for it here, and backends also kill on drop as a last resort.
        let (tx, _rx) = oneshot::channel();
        let _ = self.triggers.send(Trigger::Shutdown(tx));
    }
}

/// tick/call params, in the field order of the spec (§7.1).
#[derive(serde::Serialize)]
struct CallParams<'a> {
    tool: &'a str,
    args: &'a Value,
    revision: &'a str,
}

fn result_of(method: &'static str, body: ResponseBody) -> Result<Value, RequestError> {
    match body {
        ResponseBody::Result(v) => Ok(v),
        ResponseBody::Error(error) => Err(RequestError::Rpc { method, error }),
        ResponseBody::Malformed(reason) => Err(RequestError::Invalid {
            method,
            reason: format!("{reason} (§3.6)"),
            rule: Some(rules::FRAMING_RESPONSE_SHAPE),
        }),
    }
}

/// The size of a call's request line, newline excluded, with the longest id
/// the host may give it: callers that must refuse an oversized call before
/// handing it over (the live socket, the CLI) compare this with
/// [`MAX_LINE_BYTES`].
pub fn call_line_len(call: &PreparedCall) -> usize {
    let params = CallParams {
        tool: &call.tool,
        args: &call.args,
        revision: &call.revision,
    };
    encode_request(RequestId(u64::MAX), method::CALL, &params).len() - 1
}

/// A submitted request's claim on its pending entry.
struct Queued<'a> {
    shared: &'a Shared,
    outbox: &'a Outbox,
    id: u64,
    withdrawn: Cell<bool>,
    /// The Tick answered: the frame was written, nothing to withdraw.
    answered: bool,
}

impl Queued<'_> {
    /// Takes the frame back if no byte of it was written; then the entry
    /// (and its slot) goes. Returns whether it was withdrawn, i.e. provably
    /// never written.
    fn withdraw(&self) -> bool {
        if !self.withdrawn.get() && self.outbox.withdraw(self.id) {
            self.withdrawn.set(true);
            lock(&self.shared.pending).remove(&self.id);
        }
        self.withdrawn.get()
    }

    fn answered(mut self) {
        self.answered = true;
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        // A caller dropped mid-request: withdraw if still possible; a frame
        // already started is written whole and keeps its slot.
        if !self.answered {
            self.withdraw();
        }
    }
}

/// The writer task and the outbox it serves, to stop it between frames.
struct Writer {
    outbox: Arc<Outbox>,
    task: tokio::task::JoinHandle<()>,
}

/// Closes the Tick's stdin (EOF for the Tick): at once between frames; a
/// writer stuck on a Tick that does not read is stopped where it is (the
/// Tick is being terminated anyway, and nothing follows the partial frame).
async fn close_stdin(writer: Writer) {
    let Writer { outbox, mut task } = writer;
    outbox.close();
    if tokio::time::timeout(Duration::from_millis(50), &mut task)
        .await
        .is_err()
    {
        task.abort();
    }
    // Whether the writer closed it or was stopped mid-frame, stdin goes now.
    outbox.drop_stdin();
}

/// What a Tick sent that the host ignores, logged through a
/// [`Throttle`](crate::throttle::Throttle), and at the end (when dropped) how
/// many since the last line. Requests are warnings (the Tick expects an
/// answer it never gets, §3.2); the rest (other notifications, answers to
/// ids not in flight) are debug lines.
struct Ignored {
    /// `None` for requests; what the rest are.
    what: Option<&'static str>,
    throttle: crate::throttle::Throttle,
}

impl Ignored {
    fn new(what: Option<&'static str>) -> Ignored {
        Ignored {
            what,
            throttle: Default::default(),
        }
    }

    fn seen(&mut self, name: &dyn std::fmt::Display) {
        let Some(more) = self.throttle.hit() else {
            return;
        };
        match self.what {
            None => tracing::warn!(
                method = %name,
                more,
                "ignoring a request sent by the Tick (§3.2), and `more` since the last such line"
            ),
            Some(what) => tracing::debug!(
                what,
                name = %name,
                more,
                "ignoring what the Tick sent, and `more` since the last such line"
            ),
        }
    }
}

impl Drop for Ignored {
    fn drop(&mut self) {
        let more = self.throttle.unlogged();
        match self.what {
            _ if more == 0 => {}
            None => tracing::warn!(
                more,
                "ignored `more` requests sent by the Tick (§3.2) since the last such line"
            ),
            Some(what) => tracing::debug!(
                what,
                more,
                "ignored `more` more messages of this kind from the Tick since the last such line"
            ),
        }
    }
}

/// Lines longer than this are parsed on the blocking pool ([`read_frames`]).
const BLOCKING_PARSE_BYTES: usize = 64 * 1024;

async fn read_frames(
    stdout: Box<dyn AsyncRead + Send + Unpin>,
    shared: Arc<Shared>,
    triggers: mpsc::UnboundedSender<Trigger>,
) {
    let mut lines = LineReader::new(stdout);
    let mut requests = Ignored::new(None);
    let mut notifications = Ignored::new(Some("a notification"));
    let mut strays = Ignored::new(Some("an answer to an id not in flight"));
    let trigger = loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break Trigger::Eof,
            Err(FrameError::Violation(v)) => break Trigger::Fault(v.into()),
            Err(FrameError::Io(e)) => break Trigger::Fault(EndReason::Io(e.to_string())),
        };
        // Parsing is linear in the line (up to the frame bound): a large
        // one is parsed on the blocking pool, so a Tick writing big frames
        // in a loop costs the async workers that serve everything else
        // nothing but a hand-off. Lines stay in order: the next is read
        // once this one is parsed.
        let parsed = if line.len() > BLOCKING_PARSE_BYTES {
            tokio::task::spawn_blocking(move || parse_line(&line))
                .await
                .unwrap_or_else(|_| {
                    Err(Violation::InvalidJson {
                        detail: "the parse did not finish".into(),
                        excerpt: String::new(),
                    })
                })
        } else {
            parse_line(&line)
        };
        match parsed {
            Err(v) => break Trigger::Fault(v.into()),
            Ok(Incoming::Response { id, body }) => {
                // Removing the entry frees the request's slot, whether or not
                // its caller still waits.
                let waiter = u64::try_from(id)
                    .ok()
                    .and_then(|id| lock(&shared.pending).remove(&id));
                match waiter {
                    Some(entry) => {
                        let _ = entry.tx.send(body);
                    }
                    None => strays.seen(&id),
                }
            }
            Ok(Incoming::Update(params)) => {
                let checked = {
                    let mut seqs = lock(&shared.seqs);
                    let checked = check_update(&params, seqs.last_update);
                    if let Ok(s) = &checked {
                        seqs.last_update = Some(s.seq);
                    }
                    checked
                };
                match checked {
                    Ok(state) => {
                        let state = shared.offer_state(state, true);
                        let _ = shared.events.send(SessionEvent::Updated(state));
                    }
                    Err(finding) => break Trigger::Fault(Violation::BadUpdate(finding).into()),
                }
            }
            Ok(Incoming::OtherNotification(m)) => notifications.seen(&m),
            Ok(Incoming::Request(m)) => requests.seen(&m),
        }
    };
    let _ = triggers.send(trigger);
}

async fn supervise(
    mut process: Box<dyn TickProcess>,
    shared: Arc<Shared>,
    mut triggers: mpsc::UnboundedReceiver<Trigger>,
    writer: Writer,
) {
    let mut done: Vec<oneshot::Sender<()>> = Vec::new();
    let graceful = match triggers.recv().await {
        None => false,
        Some(Trigger::Eof) => {
            // The output ended; the process is normally gone or going. Ask how
            // it ended so the reason says "trapped: …" or "exit status 1".
            let how = tokio::time::timeout(Duration::from_millis(500), process.exited()).await;
            let how = how.unwrap_or_else(|_| "it closed its standard output".into());
            shared.finish(EndReason::Exited(how));
            false
        }
        Some(Trigger::Fault(reason)) => {
            tracing::warn!(%reason, "ending the session");
            shared.finish(reason);
            false
        }
        Some(Trigger::StdinClosed(why)) => {
            // A Tick that closed its stdin has usually exited (a race with
            // the reader's EOF): report how, so "exit status 63" or the trap
            // reaches the person rather than "broken pipe".
            let how = tokio::time::timeout(Duration::from_millis(500), process.exited()).await;
            shared.finish(match how {
                Ok(how) => EndReason::Exited(how),
                Err(_) => EndReason::Io(why),
            });
            false
        }
        Some(Trigger::Shutdown(tx)) => {
            done.push(tx);
            shared.finish(EndReason::Shutdown);
            true
        }
    };
    close_stdin(writer).await;
    process.terminate(graceful).await;
    // Anyone else who asked for a shutdown meanwhile is answered too.
    triggers.close();
    while let Ok(t) = triggers.try_recv() {
        if let Trigger::Shutdown(tx) = t {
            done.push(tx);
        }
    }
    for tx in done {
        let _ = tx.send(());
    }
}
