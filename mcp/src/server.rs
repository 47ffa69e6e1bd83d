//! The MCP server: one [`Facade`] hosts initialized Tick sessions; each MCP
//! client gets its own [`Connection`] (rmcp's [`ServerHandler`]) with its own
//! listing, subscriptions and read marks over the shared Ticks.
//!
//! The facade polls each Tick's catalog ([`Session::describe`]; a repeat
//! describe is compared with the last one and costs no schema compilation)
//! and wakes every connection when one changed. The protocol has no
//! notification for a new catalog, so polling is the only way to notice
//! one a Tick makes on its own; catalogs change with what a Tick does, so
//! the poll follows activity: once per [`DESCRIBE_POLL`]
//! ([`FacadeOptions::describe_poll`]) after a state update or a call, and
//! each quiet poll doubles the wait, up to [`DESCRIBE_POLL_BACKOFF`] times
//! that. An idle host's CPU then stays near zero however many Ticks it
//! holds, and a call is never bound to a stale catalog whatever the wait:
//! the Tick refuses a wrong revision (§6.2) and the facade describes anew.
//! A connection tells its client in the way the client's protocol revision
//! wants: unsolicited notifications for sessions that began with
//! `initialize` (2025-06-18, 2025-11-25), the `subscriptions/listen` stream
//! for 2026-07-28.

use super::catalogs::OnFirstUse;
use super::config::Grants;
use super::delivery::{deliver_latest_from, DELIVERY_INTERVAL};
use super::instance::{
    now_rfc3339, Book, ClientName, InUse, Instance, InstanceError, Owner, PerClient, Slot,
};
use super::names::{map_tools, Mapping, NameError, Target};
use super::outcome::{self, CallError, MAX_RESULT_BYTES};
use super::text;
use super::transport::{LineTransport, Tracking, SUPPORTED_VERSIONS};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListResourcesResult, ListToolsResult,
    NumberOrString, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, RequestId, Resource, ResourceContents,
    ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{
    Peer, RequestContext, RoleServer, ServerInitializeError, SubscriptionContext, SubscriptionSink,
};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tickbox_host::delivery::{fit, item_budget};
use tickbox_host::session::{CallOutcome, EndReason, Session, UnknownReason};
use tickbox_host::util::lock;
use tickbox_protocol::codes::REVISION_MISMATCH;
use tickbox_protocol::message::encoded_len;
use tickbox_protocol::{Descriptor, PrepareError};
use tickbox_telemetry::audit::{Audit, McpCall, McpTransport, RequestId as AuditRequestId};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

/// How often each Tick is asked for its catalog, to notice a new revision
/// before the client's next call (the default of
/// [`FacadeOptions::describe_poll`]).
pub const DESCRIBE_POLL: Duration = Duration::from_secs(1);

/// How many times [`FacadeOptions::describe_poll`] a quiet Tick's catalog
/// poll may wait at most (32 s by default): a catalog a Tick changes
/// without any state update or call reaches clients within that.
pub const DESCRIBE_POLL_BACKOFF: u32 = 32;

/// How the facade runs; [`Facade::new`] takes the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FacadeOptions {
    /// How often each Tick is asked for its catalog ([`DESCRIBE_POLL`]).
    /// Shorter notices a new revision sooner and costs a describe each time.
    pub describe_poll: Duration,
    /// Per-client instances of all Ticks at once
    /// ([`MAX_INSTANCES`](crate::limits::MAX_INSTANCES) by default).
    pub max_instances: usize,
}

impl Default for FacadeOptions {
    fn default() -> Self {
        FacadeOptions {
            describe_poll: DESCRIBE_POLL,
            max_instances: crate::limits::MAX_INSTANCES,
        }
    }
}

impl FacadeOptions {
    /// These options with this catalog polling interval.
    pub fn describe_poll(mut self, every: Duration) -> Self {
        self.describe_poll = every;
        self
    }

    /// These options with at most `n` per-client instances in all.
    pub fn max_instances(mut self, n: usize) -> Self {
        self.max_instances = n;
        self
    }
}

/// The JSON-RPC error code of a first use refused at an instance cap
/// (in the implementation-defined server range): nothing was started, and
/// the message and `data.bound` name the bound.
pub const INSTANCE_CAP: i32 = -32010;

/// The scheme of state resources: `tick://NAME/state`.
pub const STATE_URI_PREFIX: &str = "tick://";

/// How many of the host's resource URIs an unknown-resource error names
/// (the rest are counted, and `resources/list` has them all).
const URIS_NAMED_IN_AN_ERROR: usize = 8;

/// A Tick to host: an initialized session, its name and its grants.
pub struct HostedTick {
    /// The NAME in tool prefixes and `tick://NAME/state`.
    pub name: String,
    /// The initialized session (shared: the host may also publish it as a
    /// live instance, see [`tickbox_host::live::publish`]); none for a Tick
    /// left to its first use ([`HostedTick::on_first_use`]).
    pub session: Option<Arc<Session>>,
    /// What the Tick may reach (decides `openWorldHint`).
    pub grants: Grants,
    /// One instance per client, started by this, instead of `session`
    /// for everyone; `session` is then the template that answers listings
    /// (see [`crate::instance`]).
    pub per_client: Option<PerClient>,
    /// A shared Tick started on its first use and stopped when idle
    /// ([`crate::catalogs`]); `session`, when given, is its first instance.
    /// With `per_client`, it is the template that is left unstarted (or,
    /// when given, stopped when idle): the catalog lists the Tick.
    pub on_first_use: Option<OnFirstUse>,
}

impl HostedTick {
    /// `launcher`'s Tick as a `start = "on-first-use"` entry asks: left to
    /// its first use when its catalog is cached; else started and
    /// initialized now (its catalog then cached for the next start).
    pub async fn on_first_use(
        name: String,
        launcher: &tickbox_sandbox::Launcher,
        grants: Grants,
        config: tickbox_host::session::SessionConfig,
        idle_timeout: Duration,
    ) -> Result<HostedTick, tickbox_sandbox::LaunchError> {
        let (session, on_first_use) =
            super::catalogs::start_or_defer(&name, launcher, config, idle_timeout).await?;
        Ok(HostedTick {
            name,
            session,
            grants,
            per_client: None,
            on_first_use,
        })
    }
}

/// Why the facade could not start or serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FacadeError {
    /// Some tools cannot be named for MCP.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Names(Vec<NameError>),
    /// The MCP handshake failed.
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
}

/// A hosted Tick, shared by every connection.
struct Hosted {
    name: String,
    /// The instance every client shares, or a per-client Tick's template;
    /// empty for a Tick started on first use until its first use, and
    /// again after an idle stop.
    shared: Arc<Slot>,
    grants: Grants,
    /// The catalog last seen (of the template), to tell a new one by
    /// identity; a Tick not started yet is listed with it.
    seen: Mutex<Arc<Descriptor>>,
    /// Raised when a client's call reached the template, so its catalog
    /// is polled soon (a call may change it without a state update).
    activity: tokio::sync::Notify,
    /// How a per-client Tick starts a client's instance.
    per_client: Option<PerClient>,
    /// How a Tick started on first use starts.
    on_first_use: Option<OnFirstUse>,
}

impl Hosted {
    /// The instance every client shares (or the template), if it runs.
    fn template(&self) -> Option<Arc<Instance>> {
        self.shared.current()
    }

    /// Whether `instance` is the shared one (or the template).
    fn is_template(&self, instance: &Arc<Instance>) -> bool {
        self.template().is_some_and(|t| Arc::ptr_eq(&t, instance))
    }
}

struct Inner {
    ticks: Vec<Hosted>,
    prefixed: bool,
    /// Bumped whenever a Tick's catalog changed; connections watch it.
    catalogs: watch::Sender<u64>,
    background: Mutex<Vec<JoinHandle<()>>>,
    options: FacadeOptions,
    /// Every client connection made (weakly), so the sessions still open
    /// when the host stops are recorded as ended ([`Facade::shutdown`]).
    connections: Mutex<Vec<Weak<ConnInner>>>,
    /// The per-client instances running, against their caps.
    book: Arc<Book>,
    /// Clients served so far, to name each in logs.
    clients: AtomicU64,
    /// Every per-client instance started (weakly), so the host's stop
    /// waits for those still running.
    started: Mutex<Vec<Weak<Instance>>>,
    /// The named clients' instances, by name (the names are the clients
    /// file's, so this holds at most one entry per line of it).
    named: Mutex<std::collections::HashMap<Arc<str>, Arc<Owner>>>,
    /// The handle MCP-level telemetry goes to, outside any Tick session:
    /// the first hosted Tick's audit stream, without its session
    /// (OpenTelemetry, the observer these events are for, is on every
    /// Tick's stream; none when nothing is audited or observed).
    observed: Option<Audit>,
}

/// The MCP facade over a set of hosted Ticks. Cheap to clone.
#[derive(Clone)]
pub struct Facade {
    inner: Arc<Inner>,
}

impl Facade {
    /// Builds the facade. Tool names are prefixed when several Ticks are
    /// hosted; a name that MCP cannot take, or a clash, refuses the start
    /// (and shuts every Tick down).
    pub async fn new(ticks: Vec<HostedTick>) -> Result<Facade, FacadeError> {
        Facade::with_options(ticks, FacadeOptions::default()).await
    }

    /// [`Facade::new`] with these options.
    pub async fn with_options(
        ticks: Vec<HostedTick>,
        options: FacadeOptions,
    ) -> Result<Facade, FacadeError> {
        let prefixed = ticks.len() > 1;
        let mut hosted = Vec::with_capacity(ticks.len());
        for t in ticks {
            let d = match (&t.session, &t.on_first_use) {
                (Some(s), _) => s.descriptor(),
                (None, Some(lazy)) => Some(lazy.catalog.clone()),
                (None, None) => None,
            };
            let Some(d) = d else {
                // Session::start only returns initialized sessions.
                continue;
            };
            let shared = Slot::new();
            if let Some(session) = t.session {
                let instance = Instance::new(session, None);
                if let Some(lazy) = &t.on_first_use {
                    instance.reaper(Arc::downgrade(&shared), lazy.idle_timeout);
                }
                shared.current.send_replace(Some(instance));
            }
            hosted.push(Hosted {
                name: t.name,
                shared,
                grants: t.grants,
                seen: Mutex::new(d),
                activity: tokio::sync::Notify::new(),
                per_client: t.per_client,
                on_first_use: t.on_first_use,
            });
        }
        let observed = hosted
            .iter()
            .find_map(|t| match t.template() {
                Some(i) => i.session.audit().cloned(),
                None => t.on_first_use.as_ref().and_then(|l| l.audit().cloned()),
            })
            .map(|a| a.without_session());
        let book = Book::new(hosted.len(), options.max_instances);
        let facade = Facade {
            inner: Arc::new(Inner {
                ticks: hosted,
                prefixed,
                catalogs: watch::channel(0).0,
                background: Mutex::new(Vec::new()),
                options,
                connections: Mutex::new(Vec::new()),
                book,
                clients: AtomicU64::new(0),
                started: Mutex::new(Vec::new()),
                named: Mutex::new(std::collections::HashMap::new()),
                observed,
            }),
        };
        let catalogs = facade.current_catalogs();
        let errors = facade.map(&catalogs, &vec![true; catalogs.len()]).errors;
        if !errors.is_empty() {
            facade.shutdown().await;
            return Err(FacadeError::Names(errors));
        }
        facade.start_background();
        Ok(facade)
    }

    /// The names of the hosted Ticks, in order.
    pub fn tick_names(&self) -> Vec<String> {
        self.inner.ticks.iter().map(|s| s.name.clone()).collect()
    }

    /// How many hosted Ticks have ended (crashed, exited, hit a bound): the
    /// facade never restarts one, so their tools stay unusable.
    pub fn ended_ticks(&self) -> usize {
        self.inner
            .ticks
            .iter()
            .filter(|t| {
                t.template()
                    .is_some_and(|i| i.session.end_reason().is_some())
            })
            .count()
    }

    /// Serves one MCP client over this reader and writer until it goes
    /// away (end of input), then stops every Tick.
    pub async fn serve<R, W>(self, read: R, write: W) -> Result<(), FacadeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let served = self.serve_client(read, write).await;
        self.shutdown().await;
        served
    }

    /// Serves one MCP client over this reader and writer until it goes
    /// away; the Ticks keep running for other clients.
    pub async fn serve_client<R, W>(&self, read: R, write: W) -> Result<(), FacadeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let tracking = Tracking::shared();
        let (transport, writer) = LineTransport::new(read, write, tracking.clone());
        let writer = tokio::spawn(writer);
        let connection = Connection::new(self.clone(), tracking, McpTransport::Stdio);
        let result = match connection
            .clone()
            .serve_with_ct(transport, Default::default())
            .await
        {
            Ok(running) => {
                let quit = running.waiting().await;
                tracing::info!(?quit, "the MCP client went away");
                let error = match quit {
                    Ok(rmcp::service::QuitReason::JoinError(_)) | Err(_) => Some("internal_error"),
                    Ok(_) => None,
                };
                connection.inner.end_session(error);
                Ok(())
            }
            Err(ServerInitializeError::ConnectionClosed(_)) => {
                tracing::info!("the MCP client left before initializing");
                Ok(())
            }
            Err(e) => Err(FacadeError::Handshake(e.to_string())),
        };
        // Every frame already handed to the writer reaches the client.
        let _ = writer.await;
        result
    }

    /// Stops every hosted Tick and waits until they are gone; the MCP
    /// sessions still open end with it.
    pub async fn shutdown(&self) {
        let open: Vec<_> = lock(&self.inner.connections)
            .drain(..)
            .filter_map(|c| c.upgrade())
            .collect();
        for c in open {
            c.end_session(None);
        }
        for t in lock(&self.inner.background).drain(..) {
            t.abort();
        }
        lock(&self.inner.named).clear();
        let started: Vec<_> = lock(&self.inner.started)
            .drain(..)
            .filter_map(|i| i.upgrade())
            .collect();
        for i in started {
            i.release();
            i.session.shutdown().await;
        }
        for t in &self.inner.ticks {
            if let Some(i) = t.template() {
                i.session.shutdown().await;
            }
        }
    }

    /// Ends the client of the HTTP session `id` (its `DELETE`): its
    /// per-client instances leave the caps and have stopped when this
    /// returns, so the answer comes after them.
    pub async fn end_http_session(&self, id: &str) {
        let open: Vec<_> = lock(&self.inner.connections)
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| c.http_session.get().is_some_and(|s| &**s == id))
            .collect();
        for c in open {
            for instance in c.owner.take_all() {
                instance.session.shutdown().await;
            }
            c.end_session(None);
        }
    }

    /// Per-client instances running now, in all (capped by
    /// [`FacadeOptions::max_instances`]).
    pub fn client_instances(&self) -> usize {
        self.inner.book.running()
    }

    /// Why a new client could not get an instance of some per-client Tick
    /// now (a cap is reached), for `/readyz`; None when it could, or when
    /// no Tick runs one per client.
    pub fn instances_full(&self) -> Option<String> {
        let caps: Vec<Option<usize>> = self
            .inner
            .ticks
            .iter()
            .map(|t| t.per_client.as_ref().map(|p| p.max_instances))
            .collect();
        self.inner.book.full(&caps)
    }

    fn current_catalogs(&self) -> Vec<Arc<Descriptor>> {
        self.inner
            .ticks
            .iter()
            .map(|t| {
                t.template()
                    .and_then(|i| i.session.descriptor())
                    .unwrap_or_else(|| lock(&t.seen).clone())
            })
            .collect()
    }

    fn map(&self, catalogs: &[Arc<Descriptor>], changed: &[bool]) -> Mapping {
        let pairs: Vec<(&str, &Descriptor)> = self
            .inner
            .ticks
            .iter()
            .zip(catalogs)
            .map(|(t, d)| (t.name.as_str(), d.as_ref()))
            .collect();
        map_tools(&pairs, self.inner.prefixed, changed)
    }

    /// Per Tick: the catalog poller and the end watcher (the state clock
    /// is each instance's own).
    fn start_background(&self) {
        let mut tasks = lock(&self.inner.background);
        for index in 0..self.inner.ticks.len() {
            let me = self.clone();
            tasks.push(tokio::spawn(async move { me.poll_catalog(index).await }));
            let me = self.clone();
            tasks.push(tokio::spawn(async move { me.watch_end(index).await }));
        }
    }

    /// Polls one Tick's catalog for as long as it runs ([`Self::poll_instance`]);
    /// a Tick started on first use is polled while an instance of it runs,
    /// and from its next start again after an idle stop.
    async fn poll_catalog(&self, index: usize) {
        let t = &self.inner.ticks[index];
        let mut running = t.shared.current.subscribe();
        loop {
            // A Tick started on first use has nothing to poll until it
            // runs: thousands of them cost no wake-ups while unused.
            let instance = match running.wait_for(Option::is_some).await {
                Ok(current) => current.clone(),
                Err(_) => return,
            };
            let Some(instance) = instance else {
                continue;
            };
            self.poll_instance(index, &instance).await;
            // Any other Tick never starts again.
            if t.on_first_use.is_none() {
                return;
            }
            let gone =
                |c: &Option<Arc<Instance>>| !c.as_ref().is_some_and(|i| Arc::ptr_eq(i, &instance));
            if running.wait_for(gone).await.is_err() {
                return;
            }
        }
    }

    /// Polls the catalog of the Tick at `index` through `instance` (its
    /// shared one or template) until that instance ends, following its
    /// activity (see the module docs): after a state update or a call, at
    /// most once per `describe_poll`; while it is quiet, each unchanged
    /// catalog doubles the wait, up to [`DESCRIBE_POLL_BACKOFF`] times.
    async fn poll_instance(&self, index: usize, instance: &Arc<Instance>) {
        let t = &self.inner.ticks[index];
        let base = self.inner.options.describe_poll;
        let quiet_most = base.saturating_mul(DESCRIBE_POLL_BACKOFF);
        let mut state = instance.session.watch_state();
        let mut wait = base;
        let mut last = tokio::time::Instant::now();
        loop {
            let active = tokio::select! {
                _ = tokio::time::sleep_until(last + wait) => false,
                changed = state.changed() => {
                    if changed.is_err() {
                        return; // The session is gone.
                    }
                    true
                }
                _ = t.activity.notified() => true,
            };
            if active {
                // However busy the Tick, one describe per interval.
                tokio::time::sleep_until(last + base).await;
                state.borrow_and_update();
            }
            if instance.session.end_reason().is_some() {
                return;
            }
            last = tokio::time::Instant::now();
            let before = lock(&t.seen).clone();
            let changed = match self.fresh_catalog(index).await {
                Ok(d) => !Arc::ptr_eq(&d, &before),
                Err(e) => {
                    tracing::debug!(tick = %t.name, "polling the catalog failed: {e}");
                    false
                }
            };
            wait = if active || changed {
                base
            } else {
                wait.saturating_mul(2).min(quiet_most)
            };
        }
    }

    /// Describes the Tick now; wakes the connections when its catalog changed.
    async fn fresh_catalog(
        &self,
        index: usize,
    ) -> Result<Arc<Descriptor>, tickbox_host::session::RequestError> {
        let t = &self.inner.ticks[index];
        let Some(template) = t.template() else {
            // Not started (on first use): listed with the catalog last seen.
            return Ok(lock(&t.seen).clone());
        };
        let d = template.session.describe().await?;
        self.catalog_seen(index, &d);
        Ok(d)
    }

    /// Notes the catalog of the shared instance (or template); whether it
    /// is another than the one last seen (the connections were woken).
    fn catalog_seen(&self, index: usize, d: &Arc<Descriptor>) -> bool {
        let mut seen = lock(&self.inner.ticks[index].seen);
        if Arc::ptr_eq(&seen, d) {
            return false;
        }
        // The same catalog described again (a Tick started on first use
        // starts with the one it had): nothing for the connections to hear.
        if seen.raw == d.raw {
            *seen = d.clone();
            return false;
        }
        tracing::debug!(
            tick = %self.inner.ticks[index].name,
            "catalog revision {} → {}",
            seen.revision,
            d.revision
        );
        *seen = d.clone();
        drop(seen);
        self.inner.catalogs.send_modify(|n| *n += 1);
        true
    }

    async fn watch_end(&self, index: usize) {
        let t = &self.inner.ticks[index];
        // A Tick started on first use is stopped when idle and may start
        // again: its instances' ends are no end of the Tick.
        let Some(template) = t.template().filter(|_| t.on_first_use.is_none()) else {
            return;
        };
        let reason = template.session.ended().await;
        if reason == EndReason::Shutdown {
            return;
        }
        tracing::error!(
            tick = %t.name,
            "the Tick `{}` ended: {reason}; its tools now answer with tick_ended errors",
            t.name
        );
    }
}

/// A Tick call checked and holding its turn ([`Connection::ready_call`]).
struct ReadyCall {
    prepared: tickbox_protocol::PreparedCall,
    /// The catalog revision it is bound to.
    listed: String,
    /// The turn at the Tick, held until the call ends.
    _turn: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// What one client knows about one Tick.
struct ClientTick {
    /// The catalog this client last listed; calls are bound to it.
    listed: Mutex<Arc<Descriptor>>,
    /// The newest revision the client was told about (listed or announced).
    announced: Mutex<String>,
    /// Subscribed with `resources/subscribe` (sessions with `initialize`).
    subscribed: AtomicBool,
    /// The session's update count when the client last read the state.
    read_mark: AtomicU64,
    /// The use a `resources/subscribe` holds of a Tick started on first
    /// use: a subscribed Tick is never idle.
    held: Mutex<Option<InUse>>,
}

struct ConnInner {
    facade: Facade,
    ticks: Vec<ClientTick>,
    /// The names of the last listing (or of the start, before any).
    mapping: Mutex<Mapping>,
    tracking: Arc<std::sync::Mutex<Tracking>>,
    /// The notification tasks of a session that began with `initialize`.
    legacy: Mutex<Option<JoinSet<()>>>,
    /// How the client came.
    transport: McpTransport,
    /// The MCP session, once one began (`initialize`, or over stdio a
    /// first request carrying 2026-07-28 metadata): its protocol version
    /// and when it began.
    session: Mutex<Option<(ProtocolVersion, Instant)>>,
    /// Its end was recorded (once: by the transport, the host's stop or
    /// the drop).
    ended: AtomicBool,
    /// This client's instances of per-client Ticks (a session's, or the
    /// stdio connection's; a named client's is the facade's).
    owner: Arc<Owner>,
    /// The `Mcp-Session-Id` of an HTTP session, once a request carried it.
    http_session: std::sync::OnceLock<Arc<str>>,
}

impl ConnInner {
    /// Records the end of this client's MCP session, once
    /// (`mcp.server.session.duration`); nothing when no session began.
    fn end_session(&self, error: Option<&str>) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        self.owner.stop_all();
        let Some((version, began)) = lock(&self.session).clone() else {
            return;
        };
        if let Some(audit) = &self.facade.inner.observed {
            audit.mcp_session_end(
                self.transport,
                Some(version.as_str()),
                began.elapsed(),
                error,
            );
        }
    }

    /// The protocol version of a request: its own (2026-07-28), else the
    /// session's. Over stdio, a first request with a version of its own
    /// begins the session when `initialize` did not.
    fn version_of(&self, context: &RequestContext<RoleServer>) -> Option<ProtocolVersion> {
        let own = context.meta.protocol_version();
        let mut session = lock(&self.session);
        if let (Some(v), None, McpTransport::Stdio) = (&own, &*session, self.transport) {
            *session = Some((v.clone(), Instant::now()));
        }
        own.or_else(|| session.as_ref().map(|(v, _)| v.clone()))
    }
}

/// An HTTP session's connection is dropped by rmcp when the session ends
/// (`DELETE`, idle expiry, eviction); a stdio one when its client left.
impl Drop for ConnInner {
    fn drop(&mut self) {
        self.end_session(None);
    }
}

/// One MCP client's view of the facade: its rmcp [`ServerHandler`].
#[derive(Clone)]
pub struct Connection {
    inner: Arc<ConnInner>,
}

/// Where a connection's notifications go.
#[derive(Clone)]
enum Notifier {
    /// A session that began with `initialize`: unsolicited notifications.
    Legacy(Peer<RoleServer>),
    /// A `subscriptions/listen` stream (2026-07-28).
    Listen(SubscriptionSink),
}

impl Notifier {
    /// Whether this way of notifying applies (a 2026-07-28 session gets
    /// nothing outside its listen streams).
    fn applies(&self) -> bool {
        match self {
            Notifier::Legacy(peer) => peer.peer_info().is_some(),
            Notifier::Listen(_) => true,
        }
    }

    /// Sends `tools/list_changed`; false when the client is gone.
    async fn tools_changed(&self) -> bool {
        match self {
            Notifier::Legacy(peer) => peer.notify_tool_list_changed().await.is_ok(),
            Notifier::Listen(sink) => sink.notify_tool_list_changed().await.is_ok(),
        }
    }

    /// Sends `resources/updated`; false when the client is gone.
    async fn resource_updated(&self, uri: String) -> bool {
        match self {
            Notifier::Legacy(peer) => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .is_ok(),
            Notifier::Listen(sink) => sink.notify_resource_updated(uri).await.is_ok(),
        }
    }
}

impl Connection {
    /// A new client of `facade` over `transport`; `tracking` is shared
    /// with its transport.
    pub fn new(
        facade: Facade,
        tracking: Arc<std::sync::Mutex<Tracking>>,
        transport: McpTransport,
    ) -> Connection {
        let catalogs = facade.current_catalogs();
        let mapping = facade.map(&catalogs, &vec![false; catalogs.len()]);
        let ticks: Vec<ClientTick> = catalogs
            .into_iter()
            .map(|d| ClientTick {
                announced: Mutex::new(d.revision.clone()),
                listed: Mutex::new(d),
                subscribed: AtomicBool::new(false),
                read_mark: AtomicU64::new(0),
                held: Mutex::new(None),
            })
            .collect();
        let who = format!(
            "{} client {}",
            transport.as_str(),
            facade.inner.clients.fetch_add(1, Ordering::Relaxed) + 1
        );
        let owner = Owner::new(who, ticks.len());
        let inner = Arc::new(ConnInner {
            facade,
            ticks,
            mapping: Mutex::new(mapping),
            tracking,
            legacy: Mutex::new(None),
            transport,
            session: Mutex::new(None),
            ended: AtomicBool::new(false),
            owner,
            http_session: std::sync::OnceLock::new(),
        });
        {
            let mut all = lock(&inner.facade.inner.connections);
            all.retain(|c| c.strong_count() > 0);
            all.push(Arc::downgrade(&inner));
        }
        Connection { inner }
    }

    fn hosted(&self, index: usize) -> &Hosted {
        &self.inner.facade.inner.ticks[index]
    }

    /// The client a request comes from: this connection (a session, or
    /// stdio); for a 2026-07-28 request over HTTP, which has no session,
    /// the named client its token named, or none.
    fn owner(&self, context: &RequestContext<RoleServer>) -> Option<Arc<Owner>> {
        let parts = context.extensions.get::<::http::request::Parts>();
        let sessionless =
            self.inner.transport == McpTransport::Http && context.meta.protocol_version().is_some();
        if sessionless {
            let name = parts.and_then(|p| p.extensions.get::<ClientName>())?;
            let f = &self.inner.facade.inner;
            let mut named = lock(&f.named);
            let owner = named
                .entry(name.0.clone())
                .or_insert_with(|| Owner::new(format!("client {}", name.0), f.ticks.len()));
            return Some(owner.clone());
        }
        let id = parts
            .and_then(|p| p.headers.get(super::transport::SESSION_HEADER))
            .and_then(|v| v.to_str().ok());
        if let (Some(id), None) = (id, self.inner.http_session.get()) {
            let _ = self.inner.http_session.set(id.into());
        }
        Some(self.inner.owner.clone())
    }

    /// The instance a client sees of the Tick at `index` without using it:
    /// its own when it has one, else the shared instance or the template.
    fn current(&self, owner: Option<&Owner>, index: usize) -> Option<Arc<Instance>> {
        let t = self.hosted(index);
        let own = t
            .per_client
            .as_ref()
            .and(owner)
            .and_then(|o| o.current(index));
        own.or_else(|| t.template())
    }

    /// The instance a client's use of the Tick at `index` goes to, in use
    /// until the guard drops: the shared one, or the client's own, started
    /// now when it has none (the JSON-RPC error names the cap it hit).
    async fn instance(&self, owner: Option<&Owner>, index: usize) -> Result<InUse, McpError> {
        let t = self.hosted(index);
        let Some(spec) = &t.per_client else {
            if let Some(lazy) = &t.on_first_use {
                return self.first_use(index, lazy).await;
            }
            // Started with the host, and kept until the host stops.
            return t.template().map(|i| i.begin_use()).ok_or_else(|| {
                McpError::internal_error(format!("the Tick `{}` is not running", t.name), None)
            });
        };
        let Some(owner) = owner else {
            return Err(McpError::invalid_request(
                format!(
                    "the Tick `{}` runs one instance per client, and this request names no \
                     client: MCP 2026-07-28 has no sessions, so over HTTP a client is named by \
                     a token of its own (a clients file); use such a token, or a session \
                     (initialize)",
                    t.name
                ),
                None,
            ));
        };
        let f = &self.inner.facade.inner;
        // The audit names the client as its calls do: its MCP session, or
        // (sessionless, or stdio) how the facade names the owner.
        let client = match self.inner.http_session.get() {
            Some(id) => id.to_string(),
            None => owner.who.clone(),
        };
        owner
            .instance(index, &t.name, &client, spec, &f.book, &f.started)
            .await
            .map_err(|e| match &e {
                InstanceError::AtCap { bound, limit, .. } => McpError::new(
                    rmcp::model::ErrorCode(INSTANCE_CAP),
                    e.to_string(),
                    Some(json!({"bound": bound, "limit": limit, "tick": t.name})),
                ),
                InstanceError::Start { .. } | InstanceError::FirstUse { .. } => {
                    McpError::internal_error(e.to_string(), None)
                }
            })
    }

    /// The shared instance of a Tick started on first use, in use; started
    /// now when none runs (the request waits for its start, within the
    /// start's own bounds). A catalog other than the one listed so far is
    /// cached, and the clients are told of it as of any new catalog.
    async fn first_use(&self, index: usize, lazy: &OnFirstUse) -> Result<InUse, McpError> {
        let t = self.hosted(index);
        let f = &self.inner.facade.inner;
        let start = async {
            let session = lazy.launcher.open(lazy.config.clone()).await.map_err(|e| {
                InstanceError::FirstUse {
                    tick: t.name.clone(),
                    // The reason may carry the Tick's last words.
                    reason: text::description(&e.to_string()),
                }
            })?;
            tracing::info!(
                tick = %t.name,
                audit_session = session.audit().and_then(|a| a.session()).unwrap_or("-"),
                "started on its first use"
            );
            Ok(Instance::new(Arc::new(session), None))
        };
        let used = t
            .shared
            .get_or_start(lazy.idle_timeout, &f.started, start)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        if let Some(d) = used.instance().session.descriptor() {
            if self.inner.facade.catalog_seen(index, &d) {
                lazy.refresh(&d);
            }
        }
        Ok(used)
    }

    /// Starts the tasks that tell this client about catalog and state
    /// changes; they stop when the returned set is dropped. `uris` fixes
    /// the Ticks whose state changes are wanted (a listen stream); `None`
    /// follows `resources/subscribe`. `owner` is the client whose
    /// instances of per-client Ticks are followed (as each starts, and
    /// again after an idle stop starts another).
    ///
    /// The tasks hold the connection weakly: when rmcp drops it (the
    /// client left, an HTTP session closed), its tasks stop with it.
    fn notifications(
        &self,
        out: Notifier,
        uris: Option<HashSet<usize>>,
        owner: Option<Arc<Owner>>,
    ) -> JoinSet<()> {
        let mut tasks = JoinSet::new();
        let weak = Arc::downgrade(&self.inner);
        let tools = match &out {
            Notifier::Legacy(_) => true,
            Notifier::Listen(sink) => sink.accepted().tools_list_changed == Some(true),
        };
        if tools {
            let (weak, out) = (weak.clone(), out.clone());
            let owner = owner.as_ref().map(Arc::downgrade);
            let mut catalogs = self.inner.facade.inner.catalogs.subscribe();
            let count = self.inner.ticks.len();
            tasks.spawn(async move {
                loop {
                    for index in 0..count {
                        let Some(inner) = weak.upgrade() else {
                            return;
                        };
                        let owner = owner.as_ref().and_then(Weak::upgrade);
                        if !(Connection { inner })
                            .announce(index, &out, owner.as_deref())
                            .await
                        {
                            return;
                        }
                    }
                    if catalogs.changed().await.is_err() {
                        return;
                    }
                }
            });
        }
        for index in 0..self.inner.ticks.len() {
            let follows_subscribe = match &uris {
                Some(set) if !set.contains(&index) => continue,
                Some(_) => false,
                None => true,
            };
            let (weak, out) = (weak.clone(), out.clone());
            let uri = state_uri(&self.hosted(index).name);
            // A per-client Tick's instance is this client's, once it has
            // one; a shared Tick's is the one instance.
            // A Tick started on first use is followed through its
            // place, as a client's own instance is.
            let hosted = self.hosted(index);
            let mut own = match (&hosted.per_client, &owner, &hosted.on_first_use) {
                (Some(_), Some(o), _) => Some(o.slots[index].current.subscribe()),
                (Some(_), None, _) => continue,
                (None, _, Some(_)) => Some(hosted.shared.current.subscribe()),
                (None, _, None) => None,
            };
            let shared = hosted.template().map(|i| i.session.clone());
            // A listen stream is told about any state this client has not
            // read yet; a legacy session counts from now.
            let mut from_now = follows_subscribe;
            let mut delivered = self.inner.ticks[index].read_mark.load(Ordering::Relaxed);
            tasks.spawn(async move {
                let want = || {
                    !follows_subscribe
                        || weak
                            .upgrade()
                            .is_some_and(|c| c.ticks[index].subscribed.load(Ordering::Relaxed))
                };
                loop {
                    let session = match &mut own {
                        None => match &shared {
                            Some(s) => s.clone(),
                            None => return,
                        },
                        Some(slot) => {
                            let Ok(current) = slot.wait_for(Option::is_some).await else {
                                return;
                            };
                            let Some(instance) = current.as_ref() else {
                                continue;
                            };
                            instance.session.clone()
                        }
                    };
                    if from_now {
                        delivered = session.state().updates;
                    }
                    // A new instance counts its updates from zero.
                    from_now = true;
                    let delivery = deliver_latest_from(
                        session.watch_state(),
                        DELIVERY_INTERVAL,
                        delivered,
                        |_| {
                            let send = want() && out.applies();
                            let (out, uri) = (out.clone(), uri.clone());
                            async move { !send || out.resource_updated(uri).await }
                        },
                    );
                    tokio::select! {
                        _ = delivery => {}
                        reason = session.ended() => {
                            // Readers learn it from the state's `ended` field.
                            if reason != EndReason::Shutdown && want() && out.applies() {
                                out.resource_updated(uri.clone()).await;
                            }
                        }
                    }
                    let Some(slot) = &mut own else {
                        return;
                    };
                    // Until this instance leaves the slot (an idle stop),
                    // there is nothing more to follow.
                    drop(session);
                    if slot.wait_for(Option::is_none).await.is_err() {
                        return;
                    }
                }
            });
        }
        tasks
    }

    /// Tells the client once per new revision that a Tick's catalog is not
    /// the one it listed. False when the client is gone.
    async fn announce(&self, index: usize, out: &Notifier, owner: Option<&Owner>) -> bool {
        let Some(current) = self
            .current(owner, index)
            .and_then(|i| i.session.descriptor())
            .or_else(|| Some(lock(&self.hosted(index).seen).clone()))
        else {
            return true;
        };
        if !out.applies() {
            // Not this notifier's to tell (a 2026-07-28 session hears it on
            // its listen stream, which must still see it as news).
            return true;
        }
        let c = &self.inner.ticks[index];
        let listed = lock(&c.listed).revision.clone();
        if current.revision == listed {
            return true;
        }
        {
            let mut announced = lock(&c.announced);
            if *announced == current.revision {
                return true;
            }
            *announced = current.revision.clone();
        }
        tracing::info!(
            tick = %self.hosted(index).name,
            "catalog revision {listed} → {}; sending tools/list_changed",
            current.revision
        );
        out.tools_changed().await
    }

    fn tool_list(&self) -> Vec<Tool> {
        let mapping = lock(&self.inner.mapping).clone();
        mapping
            .names
            .iter()
            .filter_map(|m| {
                let t = self.hosted(m.tick);
                let listed = lock(&self.inner.ticks[m.tick].listed).clone();
                let read_only = || {
                    ToolAnnotations::new()
                        .read_only(true)
                        .destructive(false)
                        .idempotent(true)
                        .open_world(false)
                };
                let title = text::title(listed.title.wire());
                let (description, schema, annotations) = match &m.target {
                    Target::Tick(name) => {
                        let tool = listed.tool(name)?;
                        let mut schema = match &tool.input_schema {
                            Value::Object(o) => o.clone(),
                            _ => JsonObject::new(),
                        };
                        // MCP wants `type: object` at the top; Tick args are always an object.
                        schema
                            .entry("type")
                            .or_insert_with(|| Value::String("object".into()));
                        // A schema's titles, descriptions and names are the
                        // Tick's text too, read by clients and models.
                        let mut inert = Value::Object(schema);
                        tickbox_host::text::inert_value(&mut inert);
                        let Value::Object(schema) = inert else {
                            unreachable!("an object stays an object")
                        };
                        let annotations = ToolAnnotations::new()
                            .read_only(!tool.mutates)
                            .destructive(tool.mutates)
                            .open_world(t.grants.network());
                        (
                            text::description(tool.description.wire()),
                            schema,
                            annotations,
                        )
                    }
                    Target::State => {
                        let withheld = match &mapping.withheld.get(m.tick) {
                            Some(Some(why)) => format!(
                                " Its own tools are withheld: its catalog has names MCP cannot \
                                 take ({}).",
                                text::description(why)
                            ),
                            _ => String::new(),
                        };
                        (
                            format!(
                                "Read the current state of the Tick `{}` ({title}): seq, data, \
                                 at, and how many updates were merged since your last read. \
                                 Changes nothing.{withheld}",
                                t.name
                            ),
                            closed_schema(),
                            read_only(),
                        )
                    }
                    Target::Screen => (
                        format!(
                            "Read the terminal screen of the Tick `{}` ({title}) as text: what a \
                             person using it sees, trailing blanks trimmed. Optional `rows` and \
                             `cols` ([first, end), 0-based) read a part of it. Changes nothing.",
                            t.name
                        ),
                        screen_schema(),
                        read_only(),
                    ),
                };
                Some(
                    Tool::new(m.name.clone(), description, Arc::new(schema))
                        .with_annotations(annotations),
                )
            })
            .collect()
    }

    /// Refreshes every catalog (the client's own instance's, for a
    /// per-client Tick it has used), binds calls to it and maps the names
    /// again.
    async fn relist(&self, owner: Option<&Owner>) {
        let mut catalogs = Vec::new();
        let mut changed = Vec::new();
        let current: Vec<_> = (0..self.inner.ticks.len())
            .map(|index| self.current(owner, index))
            .collect();
        // Every running Tick is asked at once: one after another, a Tick
        // that never answers `tick/describe` would add its whole request
        // timeout to every client's listing, once per such Tick.
        let fresh = futures_util::future::join_all(current.iter().enumerate().map(
            |(index, instance)| async move {
                match instance {
                    Some(i) if i.session.end_reason().is_none() => {
                        self.fresh_catalog(index, i).await.ok()
                    }
                    _ => None,
                }
            },
        ))
        .await;
        for (((index, c), instance), fresh) in
            self.inner.ticks.iter().enumerate().zip(current).zip(fresh)
        {
            let old = lock(&c.listed).clone();
            let d = match instance {
                Some(instance) => fresh
                    .or_else(|| instance.session.descriptor())
                    .unwrap_or(old.clone()),
                // Not started (on first use): the catalog last seen.
                None => lock(&self.hosted(index).seen).clone(),
            };
            changed.push(!Arc::ptr_eq(&old, &d));
            *lock(&c.announced) = d.revision.clone();
            *lock(&c.listed) = d.clone();
            catalogs.push(d);
        }
        let mapping = self.inner.facade.map(&catalogs, &changed);
        let before = lock(&self.inner.mapping).withheld.clone();
        for (index, why) in mapping.withheld.iter().enumerate() {
            if let Some(why) = why {
                if changed[index] || before.get(index) != Some(&Some(why.clone())) {
                    tracing::warn!(
                        tick = %self.hosted(index).name,
                        "catalog revision {} withheld from tools/list: {why}",
                        catalogs[index].revision
                    );
                }
            }
        }
        *lock(&self.inner.mapping) = mapping;
    }

    /// Describes `instance` of the Tick at `index` now: the facade's
    /// catalog when it is the shared one or the template (which wakes the
    /// connections when it changed), the client's own otherwise.
    async fn fresh_catalog(
        &self,
        index: usize,
        instance: &Arc<Instance>,
    ) -> Result<Arc<Descriptor>, tickbox_host::session::RequestError> {
        if self.hosted(index).is_template(instance) {
            self.inner.facade.fresh_catalog(index).await
        } else {
            instance.session.describe().await
        }
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        id: &RequestId,
        cancelled: &CancellationToken,
        from: &Requester<'_>,
        owner: Option<&Owner>,
    ) -> Result<CallToolResult, McpError> {
        let began = Instant::now();
        let name = params.name.to_string();
        let request = from.request("tools/call", &name, id);
        let found = lock(&self.inner.mapping).find(&name).cloned();
        let Some(mapped) = found else {
            let message = format!("unknown tool `{name}`; list the tools again");
            if let Some(audit) = &self.inner.facade.inner.observed {
                let code = rmcp::model::ErrorCode::INVALID_PARAMS.0.to_string();
                audit.mcp_request(
                    &request,
                    "unknown_tool",
                    Some(&code),
                    Some(&message),
                    began.elapsed(),
                );
            }
            return Err(McpError::invalid_params(message, None));
        };
        let args = params.arguments.unwrap_or_default();
        let instance = match self.instance(owner, mapped.tick).await {
            Ok(i) => i,
            Err(e) => {
                if let Some(audit) = &self.inner.facade.inner.observed {
                    let code = e.code.0.to_string();
                    audit.mcp_request(
                        &request,
                        "no_instance",
                        Some(&code),
                        Some(&e.message),
                        began.elapsed(),
                    );
                }
                return Err(e);
            }
        };
        let instance = instance.instance();
        // Answered here (the facade's own tools, or a Tick call refused
        // before it was sent) or by the Tick (its audit event is the span).
        let (result, sent) = match mapped.target {
            Target::State if !args.is_empty() => (
                CallError::InvalidArguments {
                    tool: name.clone(),
                    reason: "this tool takes no arguments".into(),
                }
                .into_result(),
                false,
            ),
            Target::State => {
                let view = self.state_view(mapped.tick, instance).await;
                let text = view.to_string();
                (outcome::facade(&name, view, text), false)
            }
            Target::Screen => (
                match self.screen(instance, &args).await {
                    Ok(text) => outcome::bounded(
                        &name,
                        CallToolResult::success(vec![ContentBlock::text(text)]),
                    ),
                    Err(reason) => CallError::InvalidArguments {
                        tool: name.clone(),
                        reason,
                    }
                    .into_result(),
                },
                false,
            ),
            Target::Tick(tool) => {
                let (called, sent) = self
                    .call_tick(
                        mapped.tick,
                        instance,
                        &tool,
                        Value::Object(args),
                        id,
                        cancelled,
                        &request,
                    )
                    .await;
                let result = match called {
                    Ok(v) => outcome::success(&name, v),
                    Err(e) => {
                        tracing::info!(tick = %self.hosted(mapped.tick).name, "{}: {e}", e.kind());
                        e.into_result()
                    }
                };
                (result, sent)
            }
        };
        if !sent {
            if let Some(audit) = instance.session.audit() {
                let (kind, message) = outcome::failure_of(&result);
                audit.mcp_request(
                    &request,
                    kind.unwrap_or("ok"),
                    kind.map(|_| "tool_error"),
                    message,
                    began.elapsed(),
                );
            }
        }
        Ok(result)
    }

    /// The screen as text: the window asked for, trailing blanks and empty
    /// trailing rows trimmed.
    async fn screen(&self, instance: &Instance, args: &JsonObject) -> Result<String, String> {
        let view = instance.session.view();
        // Output the Tick wrote just before may still be on its way through
        // the PTY; let it land so the agent sees what a person would.
        view.settle(Duration::from_millis(50), Duration::from_millis(500))
            .await;
        let (cols, rows) = view.size();
        if let Some(extra) = args.keys().find(|k| *k != "rows" && *k != "cols") {
            return Err(format!(
                "unknown argument `{extra}`; it takes `rows` and `cols`"
            ));
        }
        let (r0, r1) = window(args.get("rows"), rows, "rows")?;
        let (c0, c1) = window(args.get("cols"), cols, "cols")?;
        let lines = view.screen_rows(c0, c1 - c0);
        // The screen may have shrunk since its size was read (a person's
        // view resized it): the window is cut to the rows there are.
        let rows = screen_window(&lines, r0, r1);
        let mut lines: Vec<&str> = rows.iter().map(|l| l.trim_end()).collect();
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        Ok(lines.join("\n"))
    }

    /// Exactly one tick/call, bound to the catalog this client last
    /// listed; and whether it was sent to the Tick (one refused before was
    /// not, and has no audit event).
    #[allow(clippy::too_many_arguments)]
    async fn call_tick(
        &self,
        index: usize,
        instance: &Arc<Instance>,
        tool: &str,
        args: Value,
        id: &RequestId,
        cancelled: &CancellationToken,
        mcp: &McpCall<'_>,
    ) -> (Result<Value, CallError>, bool) {
        match self
            .ready_call(index, instance, tool, args, id, cancelled)
            .await
        {
            Ok(ready) => (
                self.send_call(index, instance, tool, ready, mcp).await,
                true,
            ),
            Err(e) => (Err(e), false),
        }
    }

    /// A call checked (the Tick runs, the catalog is the one listed, the
    /// arguments fit) and holding its turn at the Tick; nothing sent yet.
    async fn ready_call(
        &self,
        index: usize,
        instance: &Arc<Instance>,
        tool: &str,
        args: Value,
        id: &RequestId,
        cancelled: &CancellationToken,
    ) -> Result<ReadyCall, CallError> {
        let t = self.hosted(index);
        if let Some(reason) = instance.session.end_reason() {
            return Err(CallError::TickEnded {
                tick: t.name.clone(),
                tool: tool.into(),
                reason: reason.to_string(),
            });
        }
        let listed = lock(&self.inner.ticks[index].listed).clone();
        if let Some(current) = instance.session.descriptor() {
            if current.revision != listed.revision {
                if t.is_template(instance) {
                    self.inner.facade.catalog_seen(index, &current);
                }
                return Err(CallError::CatalogChanged {
                    tick: t.name.clone(),
                    tool: tool.into(),
                    listed: listed.revision.clone(),
                    current: current.revision.clone(),
                });
            }
        }
        let prepared = listed.prepare(tool, args).map_err(|e| match e {
            PrepareError::InvalidArgs { reason, .. } => CallError::InvalidArguments {
                tool: tool.into(),
                reason: format!("the arguments do not match its input schema: {reason}"),
            },
            other => CallError::InvalidArguments {
                tool: tool.into(),
                reason: other.to_string(),
            },
        })?;
        // A cancellation that comes while the call waits for its turn is
        // honoured (nothing was sent); after that the call runs to its end
        // (see `transport`).
        let turn = self.turn(instance, tool, id, cancelled).await?;
        Ok(ReadyCall {
            prepared,
            listed: listed.revision.clone(),
            _turn: turn,
        })
    }

    /// Sends a ready call to the Tick and makes its outcome the client's.
    async fn send_call(
        &self,
        index: usize,
        instance: &Arc<Instance>,
        tool: &str,
        ready: ReadyCall,
        mcp: &McpCall<'_>,
    ) -> Result<Value, CallError> {
        let t = self.hosted(index);
        let prepared = &ready.prepared;
        let changed = |current: String| CallError::CatalogChanged {
            tick: t.name.clone(),
            tool: tool.into(),
            listed: ready.listed.clone(),
            current,
        };
        let outcome = instance.session.call_via(prepared, mcp).await;
        if t.is_template(instance) {
            t.activity.notify_one();
        }
        match outcome {
            CallOutcome::Ok(v) => Ok(v),
            CallOutcome::Failed { error, .. } if error.code == REVISION_MISMATCH => {
                // The Tick moved on before our poll noticed: learn the new
                // revision now so the client hears about it.
                let current = match self.fresh_catalog(index, instance).await {
                    Ok(d) => d.revision.clone(),
                    Err(_) => "unknown".into(),
                };
                Err(changed(current))
            }
            CallOutcome::Failed { error, executed } => Err(CallError::Tool {
                tool: tool.into(),
                code: error.code,
                message: error.message,
                data: error.data,
                executed,
            }),
            CallOutcome::Unknown(UnknownReason::TooLarge { observed, limit }) => {
                Err(CallError::TooLarge {
                    tool: tool.into(),
                    observed,
                    limit,
                })
            }
            CallOutcome::Unknown(reason) => {
                let reason = match reason {
                    UnknownReason::SessionEnded(end) => {
                        format!("the Tick `{}` ended before answering ({end})", t.name)
                    }
                    UnknownReason::TimedOut(after) => {
                        format!("no answer came within {}s", after.as_secs_f32())
                    }
                    other => format!("its answer was unusable: {other}"),
                };
                Err(CallError::Unknown {
                    tool: tool.into(),
                    reason,
                    mutates: prepared.mutates,
                })
            }
        }
    }

    /// Waits for a turn at the Tick, unless the client cancels the call
    /// first: over stdio the transport records the cancellation
    /// ([`Tracking`]); over HTTP rmcp cancels the request's token (and
    /// drops its answer), so the call is at least never sent.
    async fn turn(
        &self,
        t: &Instance,
        tool: &str,
        id: &RequestId,
        cancelled: &CancellationToken,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, CallError> {
        let signal = Tracking::cancel_signal(&self.inner.tracking);
        loop {
            // Registered before the check, so a cancellation in between
            // still wakes this wait.
            let woken = signal.notified();
            if Tracking::take_cancelled(&self.inner.tracking, id) {
                return Err(CallError::Cancelled { tool: tool.into() });
            }
            tokio::select! {
                biased;
                _ = woken => continue,
                _ = cancelled.cancelled() => return Err(CallError::Cancelled { tool: tool.into() }),
                permit = t.turns.clone().acquire_owned() => {
                    if Tracking::take_cancelled(&self.inner.tracking, id) || cancelled.is_cancelled() {
                        return Err(CallError::Cancelled { tool: tool.into() });
                    }
                    // Never closed (it lives as long as the facade).
                    return Ok(permit.ok());
                }
            }
        }
    }

    /// The state as the client reads it, and the merged-update count since
    /// its previous read.
    async fn state_view(&self, index: usize, instance: &Instance) -> Value {
        let t = self.hosted(index);
        let ended = instance.session.end_reason();
        if ended.is_none() {
            // Fresh from the Tick when it answers; the kept state otherwise.
            if let Err(e) = instance.session.read().await {
                tracing::debug!(tick = %t.name, "tick/read failed, using the kept state: {e}");
            }
        }
        let snap = instance.session.state();
        let previous = self.inner.ticks[index]
            .read_mark
            .swap(snap.updates, Ordering::Relaxed);
        let recover_with = self.recover_tool(index);
        let series = instance
            .session
            .descriptor()
            .map(|d| d.series.clone())
            .unwrap_or_default();
        let (seq, state, at) = match &snap.state {
            Some(s) => {
                let at = s.at.clone().unwrap_or_else(|| {
                    let r = lock(&instance.received);
                    if r.0 == s.seq {
                        r.1.clone()
                    } else {
                        now_rfc3339()
                    }
                });
                (json!(s.seq), Some(s.clone()), json!(at))
            }
            None => (Value::Null, None, Value::Null),
        };
        let mut view = json!({
            "tick": t.name,
            "seq": seq,
            "data": null,
            "at": at,
            "merged_updates": snap.updates.saturating_sub(previous),
            "recover_with": recover_with,
            "ended": ended.map(|e| e.to_string()),
            "trimmed": [],
        });
        // Copying, escaping and trimming a state is linear in its size (up
        // to the protocol's frame bound): done on the blocking pool, as
        // every subscription delivery's, so a large state read in a loop
        // never holds up the async workers that serve everything else.
        let Some(state) = state else {
            tickbox_host::text::inert_value(&mut view);
            return view;
        };
        let fallback = view.clone();
        tokio::task::spawn_blocking(move || {
            let data = state.data.inert();
            // The same budget and trimming as every subscription delivery (§6.4).
            let (data, trimmed) = fit(&data, &series, item_budget(1), |data, cuts| {
                view["data"] = data.clone();
                view["trimmed"] = serde_json::to_value(cuts).unwrap_or_default();
                encoded_len(&view)
            });
            view["data"] = data;
            view["trimmed"] = serde_json::to_value(trimmed).unwrap_or_default();
            // The state is the Tick's text: inert before a client or a model
            // reads it (escaping only lengthens it; the size check after
            // this sees the final bytes).
            tickbox_host::text::inert_value(&mut view);
            view
        })
        .await
        .unwrap_or_else(|_| {
            let mut view = fallback;
            tickbox_host::text::inert_value(&mut view);
            view
        })
    }

    /// The MCP name of the Tick's recover_with tool, as the client calls it.
    fn recover_tool(&self, index: usize) -> Option<String> {
        let rw = lock(&self.inner.ticks[index].listed).recover_with.clone()?;
        lock(&self.inner.mapping)
            .names
            .iter()
            .find(|m| m.tick == index && m.target == Target::Tick(rw.clone()))
            .map(|m| m.name.clone())
    }

    /// `resources/read` of the state of the Tick at `index` (none: the URI
    /// names no hosted Tick).
    async fn read_state(
        &self,
        request: ReadResourceRequestParams,
        index: Option<usize>,
        owner: Option<&Owner>,
    ) -> Result<ReadResourceResponse, McpError> {
        let index = match index {
            Some(i) => i,
            None => self.slot_for_uri(&request.uri)?,
        };
        let instance = self.instance(owner, index).await?;
        let text = self
            .state_view(index, instance.instance())
            .await
            .to_string();
        if text.len() > MAX_RESULT_BYTES {
            return Err(McpError::internal_error(
                format!(
                    "response_too_large: the state is {} bytes encoded, over the {MAX_RESULT_BYTES}-byte limit; it was not clipped",
                    text.len()
                ),
                Some(json!({"observed_bytes": text.len(), "limit_bytes": MAX_RESULT_BYTES})),
            ));
        }
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri).with_mime_type("application/json")
        ])
        .into())
    }

    /// Hands observers (OpenTelemetry) a request other than `tools/call`
    /// the facade answered: `method`, about the Tick at `index` if any,
    /// begun at `began`, and the error it was answered with, if any.
    fn served(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        index: Option<usize>,
        began: Instant,
        failed: Option<&McpError>,
    ) {
        let owner = self.owner(context);
        let instance = index.and_then(|i| self.current(owner.as_deref(), i));
        let audit = instance.as_ref().and_then(|i| i.session.audit()).or(self
            .inner
            .facade
            .inner
            .observed
            .as_ref());
        let Some(audit) = audit else {
            return;
        };
        let from = Requester::of(context, self.inner.version_of(context));
        let request = from.request(method, "", &context.id);
        let code = failed.map(|e| e.code.0.to_string());
        audit.mcp_request(
            &request,
            if failed.is_some() { "error" } else { "ok" },
            code.as_deref(),
            failed.map(|e| e.message.as_ref()),
            began.elapsed(),
        );
    }

    /// `resources/subscribe` and `unsubscribe`: marks the Tick behind
    /// `uri` as subscribed or not, and records the request as served. A
    /// subscription is a use: it starts the client's own instance of a
    /// per-client Tick.
    async fn set_subscribed(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        uri: &str,
        on: bool,
    ) -> Result<(), McpError> {
        let began = Instant::now();
        let mut slot = self.slot_for_uri(uri);
        let mut held = None;
        if let (Ok(index), true) = (&slot, on) {
            let owner = self.owner(context);
            match self.instance(owner.as_deref(), *index).await {
                Ok(used) => held = Some(used),
                Err(e) => slot = Err(e),
            }
        }
        if let Ok(index) = slot {
            let c = &self.inner.ticks[index];
            c.subscribed.store(on, Ordering::Relaxed);
            // A subscription keeps a Tick started on first use from being
            // idle-stopped until it is dropped.
            let lazy = self.hosted(index).on_first_use.is_some();
            *lock(&c.held) = held.filter(|_| lazy);
        }
        let index = slot.as_ref().ok().copied();
        self.served(context, method, index, began, slot.as_ref().err());
        slot.map(|_| ())
    }

    fn slot_for_uri(&self, uri: &str) -> Result<usize, McpError> {
        let ticks = &self.inner.facade.inner.ticks;
        // Compared by name, with nothing formatted per Tick: a host may
        // hold thousands.
        let name = uri
            .strip_prefix(STATE_URI_PREFIX)
            .and_then(|rest| rest.strip_suffix("/state"));
        name.and_then(|name| ticks.iter().position(|s| s.name == name))
            .ok_or_else(|| {
                // The URIs named in the error are a few: the message stays
                // short however many Ticks the host holds.
                let some: Vec<String> = ticks
                    .iter()
                    .take(URIS_NAMED_IN_AN_ERROR)
                    .map(|s| state_uri(&s.name))
                    .collect();
                let more = ticks.len().saturating_sub(some.len());
                let more = match more {
                    0 => String::new(),
                    n => format!(" and {n} more (resources/list)"),
                };
                McpError::resource_not_found(
                    format!(
                        "no resource `{}`; this server has {}{more}",
                        text::title(uri),
                        some.join(", ")
                    ),
                    None,
                )
            })
    }

    fn uris(&self) -> Vec<String> {
        self.inner
            .facade
            .inner
            .ticks
            .iter()
            .map(|s| state_uri(&s.name))
            .collect()
    }
}

/// Rows `r0..r1` of `lines`, cut to the rows there are (none when the
/// screen has fewer than `r0`).
fn screen_window(lines: &[String], r0: u16, r1: u16) -> &[String] {
    let end = usize::from(r1).min(lines.len());
    lines.get(usize::from(r0)..end).unwrap_or(&[])
}

/// Reads an optional `[first, end)` window argument, clamped to `size`.
fn window(arg: Option<&Value>, size: u16, what: &str) -> Result<(u16, u16), String> {
    let Some(arg) = arg else {
        return Ok((0, size));
    };
    let bad = || format!("`{what}` must be [first, end) with 0 <= first < end, got {arg}");
    let pair = arg.as_array().filter(|a| a.len() == 2).ok_or_else(bad)?;
    let n = |v: &Value| v.as_u64().ok_or_else(bad);
    let (first, end) = (n(&pair[0])?, n(&pair[1])?.min(u64::from(size)));
    if first >= end {
        return Err(bad());
    }
    // Both are at most `size` here.
    Ok((first as u16, end as u16))
}

/// `tick://NAME/state`.
pub fn state_uri(name: &str) -> String {
    format!("{STATE_URI_PREFIX}{name}/state")
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

fn closed_schema() -> JsonObject {
    object(json!({"type": "object", "properties": {}, "additionalProperties": false}))
}

fn screen_schema() -> JsonObject {
    let range = |what: &str| {
        json!({
            "type": "array", "items": {"type": "integer", "minimum": 0},
            "minItems": 2, "maxItems": 2,
            "description": format!("[first, end) {what}, 0-based; all when left out")
        })
    };
    object(json!({
        "type": "object",
        "properties": {"rows": range("rows"), "cols": range("columns")},
        "additionalProperties": false
    }))
}

const INSTRUCTIONS: &str = "\
Each tool runs on a hosted Tick, a terminal program a person may be using at the same time. \
Calls are bound to the tool catalog you last listed: when a Tick's catalog changes you receive \
notifications/tools/list_changed and calls are refused, unexecuted, until you list the tools again. \
tickbox never retries a call; when an outcome is unknown it says so, and you decide. \
A call cannot be cancelled once it was sent to the Tick: it runs to its end, once. \
Each Tick's state is the resource tick://NAME/state (subscribe to be told when it changes); \
its `*tick_state` and `*tick_screen` tools read the state and the screen.";

/// The note added to a call's result when the client cancelled it too late.
const CANCELLED_TOO_LATE: &str = "note: you cancelled this call after tickbox had sent it to \
the Tick; a Tick call cannot be taken back, so it ran to its end and this is its outcome. \
tickbox did not retry it.";

impl ServerHandler for Connection {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        ServerConfig::new(capabilities)
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_server_info(Implementation::new("tickbox", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(SUPPORTED_VERSIONS)
    }

    /// Answered by the facade alone; a span like every other request, so a
    /// client's keep-alive traffic is seen in a trace (and its rate in the
    /// operation histogram).
    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        self.served(&context, "ping", None, Instant::now(), None);
        Ok(())
    }

    /// A session with `initialize` gets unsolicited notifications from now on.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let tasks = self.notifications(
            Notifier::Legacy(context.peer.clone()),
            None,
            Some(self.inner.owner.clone()),
        );
        *lock(&self.inner.legacy) = Some(tasks);
        let began = Instant::now();
        let negotiated = self.negotiate_initialize(&request);
        if let Ok(result) = &negotiated {
            let mut session = lock(&self.inner.session);
            if session.is_none() {
                *session = Some((result.protocol_version.clone(), Instant::now()));
            }
        }
        self.served(
            &context,
            "initialize",
            None,
            began,
            negotiated.as_ref().err(),
        );
        negotiated
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let began = Instant::now();
        self.relist(self.owner(&context).as_deref()).await;
        let listed = ListToolsResult::with_all_items(self.tool_list());
        self.served(&context, "tools/list", None, began, None);
        Ok(listed)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Every result passes one wall on its way out: whatever a Tick put
        // in it (values, messages, screen text) reaches the client inert.
        // The version is for observers only: not looked up without any.
        let version = self
            .inner
            .facade
            .inner
            .observed
            .as_ref()
            .and_then(|_| self.inner.version_of(&context));
        let from = Requester::of(&context, version);
        let owner = self.owner(&context);
        let called = self
            .call(request, &context.id, &context.ct, &from, owner.as_deref())
            .await;
        let mut result = outcome::inert(called?);
        if Tracking::take_cancelled(&self.inner.tracking, &context.id) {
            result.content.push(ContentBlock::text(CANCELLED_TOO_LATE));
        }
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let began = Instant::now();
        let resources = self
            .inner
            .ticks
            .iter()
            .enumerate()
            .map(|(index, c)| {
                let t = self.hosted(index);
                let d = lock(&c.listed).clone();
                let recover = match self.recover_tool(index) {
                    Some(rw) => {
                        format!(" To rebuild what merged updates dropped, call its `{rw}` tool.")
                    }
                    None => String::new(),
                };
                Resource::new(state_uri(&t.name), format!("{} state", t.name))
                    .with_title(format!("{} state", text::title(d.title.wire())))
                    .with_description(format!(
                        "The latest state of the Tick `{}`: seq, data, at, and how many updates \
                         were merged since your last read.{recover}",
                        t.name
                    ))
                    .with_mime_type("application/json")
            })
            .collect();
        self.served(&context, "resources/list", None, began, None);
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let began = Instant::now();
        let index = self.slot_for_uri(&request.uri).ok();
        let owner = self.owner(&context);
        let read = self.read_state(request, index, owner.as_deref()).await;
        self.served(
            &context,
            "resources/read",
            index,
            began,
            read.as_ref().err(),
        );
        read
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.set_subscribed(&context, "resources/subscribe", &request.uri, true)
            .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.set_subscribed(&context, "resources/unsubscribe", &request.uri, false)
            .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let known: HashSet<String> = self.uris().into_iter().collect();
        let mut accepted = SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|on| *on);
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|u| known.contains(*u))
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        // By a map: a client's list (up to a body's values) against
        // thousands of Ticks would otherwise be their product in compares.
        let known: HashMap<String, usize> = self
            .uris()
            .into_iter()
            .enumerate()
            .map(|(index, uri)| (uri, index))
            .collect();
        let uris: HashSet<usize> = context
            .accepted()
            .resource_subscriptions
            .iter()
            .flatten()
            .filter_map(|u| known.get(u).copied())
            .collect();
        // A subscription is a use: the client's instances of the
        // per-client Ticks it follows start now.
        let owner = self.owner(context.request_context());
        let mut held = Vec::new();
        for index in &uris {
            let used = self.instance(owner.as_deref(), *index).await?;
            // A listened-to Tick started on first use is never idle.
            if self.hosted(*index).on_first_use.is_some() {
                held.push(used);
            }
        }
        let tasks = self.notifications(Notifier::Listen(context.sink().clone()), Some(uris), owner);
        context.cancelled().await;
        drop(tasks);
        drop(held);
        Ok(())
    }
}

/// Where a request came from, as the audit's `call` event (and
/// OpenTelemetry's MCP spans) name it: borrowed from the request's
/// context, so nothing is allocated for a call that nobody records.
struct Requester<'a> {
    transport: McpTransport,
    /// The `Mcp-Session-Id` header of a Streamable HTTP request.
    session: Option<&'a str>,
    /// A W3C `traceparent` in the request's `_meta`.
    traceparent: Option<&'a str>,
    /// The request's protocol version (see [`ConnInner::version_of`]).
    version: Option<ProtocolVersion>,
}

impl<'a> Requester<'a> {
    /// rmcp's HTTP transport puts the request's head into the context's
    /// extensions; stdio has none.
    fn of(
        context: &'a RequestContext<RoleServer>,
        version: Option<ProtocolVersion>,
    ) -> Requester<'a> {
        let parts = context.extensions.get::<::http::request::Parts>();
        // A 2026-07-28 request has no session: rmcp neither routes nor
        // checks an `Mcp-Session-Id` it carries, so only the named client
        // its token named may stand where a session id would (the header
        // would let a client write another's name into the audit).
        let sessionless = parts.is_some() && context.meta.protocol_version().is_some();
        let client = || {
            parts
                .and_then(|p| p.extensions.get::<ClientName>())
                .map(|c| &*c.0)
        };
        Requester {
            transport: if parts.is_some() {
                McpTransport::Http
            } else {
                McpTransport::Stdio
            },
            session: if sessionless {
                client()
            } else {
                parts
                    .and_then(|p| p.headers.get(super::transport::SESSION_HEADER))
                    .and_then(|v| v.to_str().ok())
                    .or_else(client)
            },
            traceparent: context.meta.get_traceparent(),
            version,
        }
    }

    /// The request `method` with `id`, of `tool` (the client's name for
    /// it) for a `tools/call`, empty for any other method.
    fn request<'b>(&'b self, method: &'b str, tool: &'b str, id: &'b RequestId) -> McpCall<'b> {
        McpCall {
            method,
            tool,
            session: self.session,
            request_id: match id {
                NumberOrString::Number(n) => AuditRequestId::Number(*n),
                NumberOrString::String(s) => AuditRequestId::Text(s),
            },
            transport: self.transport,
            traceparent: self.traceparent,
            protocol_version: self.version.as_ref().map(ProtocolVersion::as_str),
        }
    }
}

#[cfg(test)]
mod screen_tests {
    #[test]
    fn a_window_past_a_screen_that_shrank_is_cut_not_a_panic() {
        let lines: Vec<String> = ["a", "b"].map(String::from).to_vec();
        // Rows 30..40 were on the screen when its size was read.
        assert!(super::screen_window(&lines, 30, 40).is_empty());
        assert_eq!(super::screen_window(&lines, 1, 40), ["b"]);
        // Positive control: a window within the screen.
        assert_eq!(super::screen_window(&lines, 0, 1), ["a"]);
    }
}
