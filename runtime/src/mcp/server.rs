//! The MCP server: one [`Facade`] hosts initialized Tick sessions and answers
//! an MCP client through rmcp's [`ServerHandler`].

use super::config::Grants;
use super::delivery::{deliver_latest, DELIVERY_INTERVAL};
use super::names::{map_tools, Mapped, NameError, Target};
use super::outcome::{self, CallError, MAX_RESULT_BYTES};
use crate::delivery::{fit, item_budget};
use crate::protocol::codes::REVISION_MISMATCH;
use crate::protocol::message::encoded_len;
use crate::protocol::{Descriptor, PrepareError};
use crate::session::{CallOutcome, EndReason, Session, UnknownReason};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Implementation, InitializeResult, JsonObject,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
    ServerCapabilities, SubscribeRequestParams, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext, RoleServer, ServerInitializeError};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

/// How often each Tick is asked for its catalog, to notice a new revision
/// before the client's next call.
pub const DESCRIBE_POLL: Duration = Duration::from_secs(1);

/// The scheme of state resources: `tick://NAME/state`.
pub const STATE_URI_PREFIX: &str = "tick://";

/// A Tick to host: an initialized session, its name and its grants.
pub struct HostedTick {
    /// The NAME in tool prefixes and `tick://NAME/state`.
    pub name: String,
    /// The initialized session (shared: the host may also publish it as a
    /// live instance, see [`crate::live::publish`]).
    pub session: Arc<Session>,
    /// What the Tick may reach (decides `openWorldHint`).
    pub grants: Grants,
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

struct Slot {
    name: String,
    session: Arc<Session>,
    grants: Grants,
    /// The catalog this client last listed; calls are bound to it.
    listed: Mutex<Arc<Descriptor>>,
    /// The newest revision the client was told about (listed or announced).
    announced: Mutex<String>,
    subscribed: AtomicBool,
    /// The session's update count when the client last read the state.
    read_mark: AtomicU64,
    /// The session's update count when the facade was built: the state
    /// delivery starts from here, whenever its task first runs.
    start_updates: u64,
    /// When the facade received the state of this seq (for states without `at`).
    received: Mutex<(u64, String)>,
}

struct Inner {
    ticks: Vec<Slot>,
    prefixed: bool,
    /// The names of the last listing (or of the start, before any).
    names: Mutex<Vec<Mapped>>,
}

/// The MCP facade over a set of hosted Ticks. Cheap to clone.
#[derive(Clone)]
pub struct Facade {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Each critical section only swaps a value; a poisoned lock is still sound.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Facade {
    /// Builds the facade. Tool names are prefixed when several Ticks are
    /// hosted; a name that MCP cannot take, or a clash, refuses the start
    /// (and shuts every Tick down).
    pub async fn new(ticks: Vec<HostedTick>) -> Result<Facade, FacadeError> {
        let prefixed = ticks.len() > 1;
        let mut slots = Vec::with_capacity(ticks.len());
        for t in ticks {
            let Some(d) = t.session.descriptor() else {
                // Session::start only returns initialized sessions.
                continue;
            };
            let seq = t.session.state().state.map_or(0, |s| s.seq);
            let start_updates = t.session.watch_state().borrow().updates;
            slots.push(Slot {
                start_updates,
                name: t.name,
                announced: Mutex::new(d.revision.clone()),
                listed: Mutex::new(d),
                session: t.session,
                grants: t.grants,
                subscribed: AtomicBool::new(false),
                read_mark: AtomicU64::new(0),
                received: Mutex::new((seq, now_rfc3339())),
            });
        }
        let facade = Facade {
            inner: Arc::new(Inner {
                ticks: slots,
                prefixed,
                names: Mutex::new(Vec::new()),
            }),
        };
        let errors = facade.map_names();
        if !errors.is_empty() {
            facade.shutdown().await;
            return Err(FacadeError::Names(errors));
        }
        Ok(facade)
    }

    /// The names of the hosted Ticks, in order.
    pub fn tick_names(&self) -> Vec<String> {
        self.inner.ticks.iter().map(|s| s.name.clone()).collect()
    }

    /// Serves one MCP client over this reader and writer until it goes
    /// away (end of input), then stops every Tick.
    pub async fn serve<R, W>(self, read: R, write: W) -> Result<(), FacadeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let running = match self
            .clone()
            .serve_with_ct((read, write), Default::default())
            .await
        {
            Ok(r) => r,
            Err(ServerInitializeError::ConnectionClosed(_)) => {
                tracing::info!("the MCP client left before initializing");
                self.shutdown().await;
                return Ok(());
            }
            Err(e) => {
                self.shutdown().await;
                return Err(FacadeError::Handshake(e.to_string()));
            }
        };
        let tasks = self.start_background(running.peer().clone());
        let quit = running.waiting().await;
        tracing::info!(?quit, "the MCP client went away; stopping the Ticks");
        for t in tasks {
            t.abort();
        }
        self.shutdown().await;
        Ok(())
    }

    /// Stops every hosted Tick and waits until they are gone.
    pub async fn shutdown(&self) {
        for slot in &self.inner.ticks {
            slot.session.shutdown().await;
        }
    }

    /// Per Tick: the catalog poller, the state delivery and the end watcher.
    fn start_background(&self, peer: Peer<RoleServer>) -> Vec<JoinHandle<()>> {
        let mut tasks = Vec::new();
        for index in 0..self.inner.ticks.len() {
            let (me, p) = (self.clone(), peer.clone());
            tasks.push(tokio::spawn(async move { me.poll_catalog(index, p).await }));
            let (me, p) = (self.clone(), peer.clone());
            tasks.push(tokio::spawn(async move { me.deliver(index, p).await }));
            let (me, p) = (self.clone(), peer.clone());
            tasks.push(tokio::spawn(async move { me.watch_end(index, p).await }));
        }
        tasks
    }

    async fn poll_catalog(&self, index: usize, peer: Peer<RoleServer>) {
        let slot = &self.inner.ticks[index];
        loop {
            tokio::time::sleep(DESCRIBE_POLL).await;
            if slot.session.end_reason().is_some() {
                return;
            }
            match slot.session.describe().await {
                Ok(d) => {
                    self.catalog_seen(index, &d.revision, &peer).await;
                }
                Err(e) => tracing::debug!(tick = %slot.name, "polling the catalog failed: {e}"),
            }
        }
    }

    async fn deliver(&self, index: usize, peer: Peer<RoleServer>) {
        let slot = &self.inner.ticks[index];
        let uri = state_uri(&slot.name);
        let state = slot.session.watch_state();
        deliver_latest(state, DELIVERY_INTERVAL, slot.start_updates, |_| {
            // Record when this state arrived, for states that carry no `at`.
            if let Some(s) = slot.session.state().state {
                let mut r = lock(&slot.received);
                if r.0 != s.seq {
                    *r = (s.seq, now_rfc3339());
                }
            }
            let subscribed = slot.subscribed.load(Ordering::Relaxed);
            let (peer, uri) = (peer.clone(), uri.clone());
            async move {
                if subscribed {
                    let param = ResourceUpdatedNotificationParam::new(uri);
                    // A failed send means the client is gone; serve() ends then.
                    return peer.notify_resource_updated(param).await.is_ok();
                }
                true
            }
        })
        .await;
    }

    async fn watch_end(&self, index: usize, peer: Peer<RoleServer>) {
        let slot = &self.inner.ticks[index];
        let reason = slot.session.ended().await;
        if reason == EndReason::Shutdown {
            return;
        }
        tracing::error!(
            tick = %slot.name,
            "the Tick `{}` ended: {reason}; its tools now answer with tick_ended errors",
            slot.name
        );
        if slot.subscribed.load(Ordering::Relaxed) {
            let param = ResourceUpdatedNotificationParam::new(state_uri(&slot.name));
            let _ = peer.notify_resource_updated(param).await;
        }
    }

    /// Called with a revision the Tick reported: when it is not the one the
    /// client listed, tells the client once per new revision.
    async fn catalog_seen(&self, index: usize, revision: &str, peer: &Peer<RoleServer>) {
        let slot = &self.inner.ticks[index];
        let listed = lock(&slot.listed).revision.clone();
        if revision == listed {
            return;
        }
        {
            let mut announced = lock(&slot.announced);
            if *announced == revision {
                return;
            }
            *announced = revision.to_string();
        }
        tracing::info!(tick = %slot.name, "catalog revision {listed} → {revision}; sending tools/list_changed");
        if let Err(e) = peer.notify_tool_list_changed().await {
            tracing::warn!("cannot send tools/list_changed: {e}");
        }
    }

    fn tool_list(&self) -> Vec<Tool> {
        let names = lock(&self.inner.names).clone();
        names
            .iter()
            .filter_map(|m| {
                let slot = &self.inner.ticks[m.tick];
                let listed = lock(&slot.listed).clone();
                let read_only = || {
                    ToolAnnotations::new()
                        .read_only(true)
                        .destructive(false)
                        .idempotent(true)
                        .open_world(false)
                };
                let title = &listed.title;
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
                        let annotations = ToolAnnotations::new()
                            .read_only(!tool.mutates)
                            .destructive(tool.mutates)
                            .open_world(slot.grants.network());
                        (tool.description.clone(), schema, annotations)
                    }
                    Target::State => (
                        format!(
                            "Read the current state of the Tick `{}` ({title}): seq, data, at, \
                             and how many updates were merged since your last read. Changes nothing.",
                            slot.name
                        ),
                        closed_schema(),
                        read_only(),
                    ),
                    Target::Screen => (
                        format!(
                            "Read the terminal screen of the Tick `{}` ({title}) as text: what a \
                             person using it sees. Changes nothing.",
                            slot.name
                        ),
                        closed_schema(),
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

    /// Refreshes every catalog, binds calls to it and maps the names again.
    async fn relist(&self) {
        for slot in &self.inner.ticks {
            let fresh = if slot.session.end_reason().is_none() {
                slot.session.describe().await.ok()
            } else {
                None
            };
            let d = fresh
                .or_else(|| slot.session.descriptor())
                .unwrap_or_else(|| lock(&slot.listed).clone());
            *lock(&slot.announced) = d.revision.clone();
            *lock(&slot.listed) = d;
        }
        for e in self.map_names() {
            tracing::warn!("left out of tools/list: {e}");
        }
    }

    /// Maps the listed catalogs to MCP names; returns the tools left out.
    fn map_names(&self) -> Vec<NameError> {
        let catalogs: Vec<(String, Arc<Descriptor>)> = self
            .inner
            .ticks
            .iter()
            .map(|s| (s.name.clone(), lock(&s.listed).clone()))
            .collect();
        let pairs: Vec<(&str, &Descriptor)> = catalogs
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_ref()))
            .collect();
        let (names, errors) = map_tools(&pairs, self.inner.prefixed);
        *lock(&self.inner.names) = names;
        errors
    }

    async fn call(
        &self,
        params: CallToolRequestParams,
        peer: &Peer<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let name = params.name.to_string();
        let mapped = lock(&self.inner.names)
            .iter()
            .find(|m| m.name == name)
            .cloned()
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!("unknown tool `{name}`; list the tools again"),
                    None,
                )
            })?;
        let args = Value::Object(params.arguments.unwrap_or_default());
        let slot = &self.inner.ticks[mapped.tick];
        match mapped.target {
            Target::State | Target::Screen if args.as_object().is_some_and(|a| !a.is_empty()) => {
                Ok(CallError::InvalidArguments {
                    tool: name,
                    reason: "this tool takes no arguments".into(),
                }
                .into_result())
            }
            Target::State => {
                let view = self.state_view(mapped.tick).await;
                let text = view.to_string();
                Ok(outcome::facade(&name, view, text))
            }
            Target::Screen => {
                let view = slot.session.view();
                // Output the Tick wrote just before may still be on its way
                // through the PTY; let it land so the agent sees what a
                // person would.
                view.settle(
                    std::time::Duration::from_millis(50),
                    std::time::Duration::from_millis(500),
                )
                .await;
                let (cols, rows) = view.size();
                let text = view.screen_text();
                let structured =
                    json!({"tick": slot.name, "cols": cols, "rows": rows, "text": text});
                Ok(outcome::facade(&name, structured, text))
            }
            Target::Tick(tool) => Ok(match self.call_tick(mapped.tick, &tool, args, peer).await {
                Ok(v) => outcome::success(&name, v),
                Err(e) => {
                    tracing::info!(tick = %slot.name, "{}: {e}", e.kind());
                    e.into_result()
                }
            }),
        }
    }

    /// Exactly one tick/call, bound to the catalog this client last listed.
    async fn call_tick(
        &self,
        index: usize,
        tool: &str,
        args: Value,
        peer: &Peer<RoleServer>,
    ) -> Result<Value, CallError> {
        let slot = &self.inner.ticks[index];
        if let Some(reason) = slot.session.end_reason() {
            return Err(CallError::TickEnded {
                tick: slot.name.clone(),
                tool: tool.into(),
                reason: reason.to_string(),
            });
        }
        let listed = lock(&slot.listed).clone();
        let changed = |current: String| CallError::CatalogChanged {
            tick: slot.name.clone(),
            tool: tool.into(),
            listed: listed.revision.clone(),
            current,
        };
        if let Some(current) = slot.session.descriptor() {
            if current.revision != listed.revision {
                self.catalog_seen(index, &current.revision, peer).await;
                return Err(changed(current.revision.clone()));
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
        match slot.session.call(&prepared).await {
            CallOutcome::Ok(v) => Ok(v),
            CallOutcome::Failed { error, .. } if error.code == REVISION_MISMATCH => {
                // The Tick moved on before our poll noticed: learn the new
                // revision now so the client hears about it.
                let current = match slot.session.describe().await {
                    Ok(d) => {
                        self.catalog_seen(index, &d.revision, peer).await;
                        d.revision.clone()
                    }
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
                        format!("the Tick `{}` ended before answering ({end})", slot.name)
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

    /// The state as the client reads it, and the merged-update count since
    /// its previous read.
    async fn state_view(&self, index: usize) -> Value {
        let slot = &self.inner.ticks[index];
        let ended = slot.session.end_reason();
        if ended.is_none() {
            // Fresh from the Tick when it answers; the kept state otherwise.
            if let Err(e) = slot.session.read().await {
                tracing::debug!(tick = %slot.name, "tick/read failed, using the kept state: {e}");
            }
        }
        let snap = slot.session.state();
        let previous = slot.read_mark.swap(snap.updates, Ordering::Relaxed);
        let recover_with = self.recover_tool(index);
        let series = slot
            .session
            .descriptor()
            .map(|d| d.series.clone())
            .unwrap_or_default();
        let (seq, data, at) = match &snap.state {
            Some(s) => {
                let at = s.at.clone().unwrap_or_else(|| {
                    let r = lock(&slot.received);
                    if r.0 == s.seq {
                        r.1.clone()
                    } else {
                        now_rfc3339()
                    }
                });
                (json!(s.seq), s.data.clone(), json!(at))
            }
            None => (Value::Null, Value::Null, Value::Null),
        };
        let mut view = json!({
            "tick": slot.name,
            "seq": seq,
            "data": null,
            "at": at,
            "merged_updates": snap.updates.saturating_sub(previous),
            "recover_with": recover_with,
            "ended": ended.map(|e| e.to_string()),
            "trimmed": [],
        });
        // The same budget and trimming as every subscription delivery (§6.4).
        let (data, trimmed) = fit(&data, &series, item_budget(1), |data, cuts| {
            view["data"] = data.clone();
            view["trimmed"] = serde_json::to_value(cuts).unwrap_or_default();
            encoded_len(&view)
        });
        view["data"] = data;
        view["trimmed"] = serde_json::to_value(trimmed).unwrap_or_default();
        view
    }

    /// The MCP name of the Tick's recover_with tool, as the client calls it.
    fn recover_tool(&self, index: usize) -> Option<String> {
        let rw = lock(&self.inner.ticks[index].listed).recover_with.clone()?;
        lock(&self.inner.names)
            .iter()
            .find(|m| m.tick == index && m.target == Target::Tick(rw.clone()))
            .map(|m| m.name.clone())
    }

    fn slot_for_uri(&self, uri: &str) -> Result<usize, McpError> {
        self.inner
            .ticks
            .iter()
            .position(|s| state_uri(&s.name) == uri)
            .ok_or_else(|| {
                McpError::resource_not_found(
                    format!(
                        "no resource `{uri}`; this server has {}",
                        self.uris().join(", ")
                    ),
                    None,
                )
            })
    }

    fn uris(&self) -> Vec<String> {
        self.inner
            .ticks
            .iter()
            .map(|s| state_uri(&s.name))
            .collect()
    }
}

/// `tick://NAME/state`.
pub fn state_uri(name: &str) -> String {
    format!("{STATE_URI_PREFIX}{name}/state")
}

fn closed_schema() -> JsonObject {
    match json!({"type": "object", "properties": {}, "additionalProperties": false}) {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

const INSTRUCTIONS: &str = "\
Each tool runs on a hosted Tick, a terminal program a person may be using at the same time. \
Calls are bound to the tool catalog you last listed: when a Tick's catalog changes you receive \
notifications/tools/list_changed and calls are refused, unexecuted, until you list the tools again. \
tickbox never retries a call; when an outcome is unknown it says so, and you decide. \
Each Tick's state is the resource tick://NAME/state (subscribe to be told when it changes); \
its `*tick_state` and `*tick_screen` tools read the state and the screen.";

impl ServerHandler for Facade {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("tickbox", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.relist().await;
        Ok(ListToolsResult::with_all_items(self.tool_list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        self.call(request, &context.peer).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = self
            .inner
            .ticks
            .iter()
            .enumerate()
            .map(|(index, slot)| {
                let d = lock(&slot.listed).clone();
                let recover = match self.recover_tool(index) {
                    Some(rw) => {
                        format!(" To rebuild what merged updates dropped, call its `{rw}` tool.")
                    }
                    None => String::new(),
                };
                Resource::new(state_uri(&slot.name), format!("{} state", slot.name))
                    .with_title(format!("{} state", d.title))
                    .with_description(format!(
                        "The latest state of the Tick `{}`: seq, data, at, and how many updates \
                         were merged since your last read.{recover}",
                        slot.name
                    ))
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, McpError> {
        let index = self.slot_for_uri(&request.uri)?;
        let text = self.state_view(index).await.to_string();
        if text.len() > MAX_RESULT_BYTES {
            return Err(McpError::internal_error(
                format!(
                    "response_too_large: the state is {} bytes encoded, over the {MAX_RESULT_BYTES}-byte limit; it was not clipped",
                    text.len()
                ),
                Some(json!({"observed_bytes": text.len(), "limit_bytes": MAX_RESULT_BYTES})),
            ));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            text,
            request.uri,
        )
        .with_mime_type("application/json")]))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let index = self.slot_for_uri(&request.uri)?;
        self.inner.ticks[index]
            .subscribed
            .store(true, Ordering::Relaxed);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let index = self.slot_for_uri(&request.uri)?;
        self.inner.ticks[index]
            .subscribed
            .store(false, Ordering::Relaxed);
        Ok(())
    }
}
