//! `tickbox inspect @NAME`: a live instance as the page's target, driven
//! through the per-user socket its host serves (`tickbox_host::live`),
//! with the requests `attach`, `watch @NAME` and `call @NAME` use:
//!
//! - **screen**: one `attach` stream. The host re-renders its screen model
//!   into `O` frames (the renderer's short list of sequences, never the
//!   Tick's bytes); they are fed into a screen model of ours ([`View`]),
//!   and the page is drawn from that model with the same cell filter as
//!   for a Tick started here. Keys go up as `K` frames, the page's panel
//!   size as a resize (the inspector is one more view: the Tick's terminal
//!   is as large as the smallest one);
//! - **state**: one `watch` stream; its deliveries are what
//!   `tickbox watch @NAME` prints (trimmed by the host, with the cuts);
//! - **tools**: a fresh `describe` before every call (the catalog may have
//!   changed), checked and confirmed here as for a Tick started here, then
//!   a `call` bound to the revision it was checked against, so a catalog
//!   that changes in between makes the Tick refuse it (-32004) rather than
//!   run it unapproved;
//! - **ending**: the view stream's `ended` (with the last words), the
//!   watch stream's, or the socket closing without one (its host is gone).
//!
//! The timeline shows the frames of these connections (`c1`, `c2`, … in
//! the id column), as they cross the socket: the protocol between the host
//! and the Tick belongs to the hosting process and is not visible here.
//! Only the same user reaches the socket (the registry's 0700 directory,
//! the 0600 socket and the host's `SO_PEERCRED` check); the inspector adds
//! nothing to that but its own door in front of the page.

use super::timeline::{Dir, Kind, Timeline};
use super::{Exit, Inspector, NotSent, FRAME_HOLD_BYTES, LIVE_SEND_QUEUE, STATE_INTERVAL};
use crate::live::{exit_of, REPLY_GRACE};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tickbox_conformance::scenario::{RecordTick, RecordTime};
use tickbox_host::live::client::{self, Connection};
use tickbox_host::live::wire::{
    read_frame, write_frame, CallReply, ErrorKind, Frame, Reply, Request,
};
use tickbox_host::live::{InstanceInfo, Registry};
use tickbox_host::session::{CallOutcome, UnknownReason};
use tickbox_host::view::{Terminal, View};
use tickbox_protocol::limits::REQUEST_TIMEOUT;
use tickbox_protocol::{Descriptor, PreparedCall, RpcError, TickData};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

/// What the audit export says for a live instance.
pub const NO_AUDIT: &str =
    "a live instance's audit stream is written by the process that hosts it \
(start it with `tickbox run --audit FILE`); the inspector of a live instance has none of its own";

/// Why a view's stream ended without the host saying the Tick ended.
const LOST: &str = "the live instance's host closed the connection without saying the Tick ended \
(the hosting process was stopped or killed?)";

/// A live instance as the page's target.
pub struct LiveTick {
    info: InstanceInfo,
    socket: PathBuf,
    /// Our screen model, fed the host's re-rendered frames.
    view: Arc<View>,
    /// Keys and resizes for the attach stream's writer.
    to_host: mpsc::Sender<Frame>,
    timeline: Arc<Timeline>,
    /// Connections opened so far: each one's frames carry its number.
    conns: AtomicU64,
    call_timeout: Duration,
}

/// The streams a live target runs on, handed to [`drive`] once the
/// inspector that shows them exists.
pub struct Streams {
    /// The catalog the Tick reported at the start.
    pub catalog: Arc<Descriptor>,
    view: Arc<View>,
    attach: (OwnedReadHalf, OwnedWriteHalf, String),
    outgoing: mpsc::Receiver<Frame>,
    watch: (OwnedReadHalf, OwnedWriteHalf, String),
}

/// Where our screen model's terminal goes: its resizes become the view's
/// resizes on the socket. Nothing else is sent: the model's answers to
/// terminal queries (the only thing a model sends as input) would be
/// answers to the host's renderer, which asks none, so they are dropped;
/// the page's keys go up through [`LiveTick::keys`].
struct HostTerminal(mpsc::Sender<Frame>);

impl Terminal for HostTerminal {
    fn send_input(&self, _: &[u8]) {}

    fn resize(&self, cols: u16, rows: u16) {
        let Ok(v) = serde_json::to_value(Reply::Resize { cols, rows }) else {
            return;
        };
        if self.0.try_send(Frame::Json(v)).is_err() {
            tracing::warn!(
                "the live instance's host is not reading this view's frames: a resize was dropped"
            );
        }
    }
}

/// How a one-shot request failed.
enum Failure {
    /// The host answered with an error (or that the session is over).
    Answered(ErrorKind, String),
    /// No usable answer: the connection failed or timed out.
    Lost(String),
}

impl Failure {
    fn not_sent(self) -> NotSent {
        match self {
            Failure::Answered(ErrorKind::Usage, m) => NotSent::Invalid(m),
            Failure::Answered(_, m) | Failure::Lost(m) => NotSent::Unavailable(m),
        }
    }
}

/// The frame's name in the timeline: a request's `op`, a reply's kind.
fn name_of(v: &Value) -> String {
    if let Some(op) = v["op"].as_str() {
        return op.to_string();
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

/// Puts one frame of connection `conn` on the timeline.
fn note(timeline: &Timeline, dir: Dir, conn: &str, frame: &Frame, kind: Kind) {
    let head = |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(FRAME_HOLD_BYTES)]).into_owned();
    let (method, size, preview) = match frame {
        Frame::Json(v) => {
            let text = v.to_string();
            let method = if kind == Kind::Response {
                String::new()
            } else {
                name_of(v)
            };
            (method, text.len(), text)
        }
        Frame::Output(b) => ("output".into(), b.len(), head(b)),
        Frame::Keys(b) => ("keys".into(), b.len(), head(b)),
    };
    timeline.record(dir, kind, &method, Some(conn), size, &preview);
}

/// A request's first reply: its value, or the host's error.
fn first_reply(frame: Option<Frame>) -> Result<Value, Failure> {
    match frame {
        Some(Frame::Json(v)) => match serde_json::from_value::<Reply>(v) {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Error { kind, message }) => Err(Failure::Answered(kind, message)),
            Ok(Reply::Ended { reason, .. }) => Err(Failure::Answered(ErrorKind::Session, reason)),
            Ok(other) => Err(Failure::Lost(format!("an unexpected reply {other:?}"))),
            Err(e) => Err(Failure::Lost(format!("an unreadable reply: {e}"))),
        },
        Some(_) => Err(Failure::Lost("an unexpected frame".into())),
        None => Err(Failure::Lost(
            "the host closed the connection before answering".into(),
        )),
    }
}

/// A call's outcome as the live host classified it.
fn outcome_of(reply: CallReply) -> CallOutcome {
    match reply {
        CallReply::Ok { result } => CallOutcome::Ok(result),
        CallReply::Failed {
            code,
            message,
            data,
            executed,
        } => CallOutcome::Failed {
            error: RpcError {
                code,
                message,
                data,
            },
            executed,
        },
        CallReply::Unknown { reason } => {
            CallOutcome::Unknown(UnknownReason::Reported(reason.into()))
        }
    }
}

impl LiveTick {
    /// Finds the instance `target` names in `registry`, reads its catalog
    /// and opens its view and watch streams. Fails (exit 3) when any of
    /// that fails.
    pub async fn connect(
        registry: &Registry,
        target: &str,
        timeline: Arc<Timeline>,
        call_timeout: Duration,
    ) -> Result<(LiveTick, Streams), Exit> {
        let limit = REQUEST_TIMEOUT + REPLY_GRACE;
        let late = |what: &str| {
            Exit::session(format!(
                "the live instance `{target}` did not answer {what} within {}s",
                limit.as_secs()
            ))
        };
        let info = tokio::time::timeout(limit, client::resolve(registry, target))
            .await
            .map_err(|_| late("its listing"))?
            .map_err(exit_of)?;
        let socket = registry.socket(&info.id);
        let (to_host, outgoing) = mpsc::channel(LIVE_SEND_QUEUE);
        // At the protocol's initial size until the page says its own.
        let view = View::new(Box::new(HostTerminal(to_host.clone())));
        let tick = LiveTick {
            info,
            socket,
            view: view.clone(),
            to_host,
            timeline,
            conns: AtomicU64::new(0),
            call_timeout,
        };
        let catalog = tick.describe().await.map_err(|e| match e {
            NotSent::Invalid(m) | NotSent::Unavailable(m) => Exit::session(format!(
                "cannot read the catalog of `{target}`: {}",
                tickbox_host::text::escape(&m)
            )),
        })?;
        let (cols, rows) = view.size();
        let attach = Request::Attach {
            cols,
            rows,
            status: None,
        };
        let attach = tokio::time::timeout(limit, tick.open_stream(attach))
            .await
            .map_err(|_| late("a view"))?
            .map_err(|e| Exit::session(format!("cannot view `{target}`: {e}")))?;
        let interval_ms = STATE_INTERVAL.as_millis() as u64;
        let watch = tokio::time::timeout(limit, tick.open_stream(Request::Watch { interval_ms }))
            .await
            .map_err(|_| late("a watch"))?
            .map_err(|e| Exit::session(format!("cannot watch `{target}`: {e}")))?;
        tracing::info!(id = %tick.info.id, "inspecting a live instance");
        let streams = Streams {
            catalog,
            view,
            attach,
            outgoing,
            watch,
        };
        Ok((tick, streams))
    }

    pub fn view(&self) -> &Arc<View> {
        &self.view
    }

    /// A new connection and its name on the timeline.
    async fn open(&self) -> Result<(Connection, String), String> {
        let n = self.conns.fetch_add(1, Ordering::Relaxed) + 1;
        let conn = Connection::open(&self.socket, &self.info.name)
            .await
            .map_err(|e| e.to_string())?;
        Ok((conn, format!("c{n}")))
    }

    /// Opens a stream: the request, its first reply, then the halves.
    async fn open_stream(
        &self,
        request: Request,
    ) -> Result<(OwnedReadHalf, OwnedWriteHalf, String), String> {
        let (mut conn, id) = self.open().await?;
        let frame = Frame::Json(serde_json::to_value(&request).map_err(|e| e.to_string())?);
        note(&self.timeline, Dir::ToHost, &id, &frame, Kind::Request);
        conn.send(&frame).await.map_err(|e| e.to_string())?;
        let reply = conn.next().await.map_err(|e| e.to_string())?;
        if let Some(f) = &reply {
            note(&self.timeline, Dir::FromHost, &id, f, Kind::Response);
        }
        match first_reply(reply) {
            Ok(_) => {
                let (r, w) = conn.into_split();
                Ok((r, w, id))
            }
            Err(Failure::Answered(_, m) | Failure::Lost(m)) => Err(m),
        }
    }

    /// A one-shot request within `limit`.
    async fn one_shot(&self, request: Request, limit: Duration) -> Result<Value, Failure> {
        let asked = async {
            let (mut conn, id) = self.open().await.map_err(Failure::Lost)?;
            let v = serde_json::to_value(&request).map_err(|e| Failure::Lost(e.to_string()))?;
            let frame = Frame::Json(v);
            note(&self.timeline, Dir::ToHost, &id, &frame, Kind::Request);
            conn.send(&frame)
                .await
                .map_err(|e| Failure::Lost(e.to_string()))?;
            let reply = conn
                .next()
                .await
                .map_err(|e| Failure::Lost(e.to_string()))?;
            if let Some(f) = &reply {
                note(&self.timeline, Dir::FromHost, &id, f, Kind::Response);
            }
            first_reply(reply)
        };
        tokio::time::timeout(limit, asked)
            .await
            .unwrap_or_else(|_| {
                Err(Failure::Lost(format!(
                    "the live instance did not answer within {}s",
                    limit.as_secs()
                )))
            })
    }

    /// The Tick's catalog as it reports it now (a fresh tick/describe).
    pub async fn describe(&self) -> Result<Arc<Descriptor>, NotSent> {
        let raw = self
            .one_shot(Request::Describe, REQUEST_TIMEOUT + REPLY_GRACE)
            .await
            .map_err(Failure::not_sent)?;
        Descriptor::parse(raw)
            .map(Arc::new)
            .map_err(|e| NotSent::Unavailable(format!("the live Tick's catalog is invalid: {e}")))
    }

    /// Sends a call the inspector prepared (and had confirmed) against
    /// `prepared.revision`. Until the request has left nothing can have
    /// run (an error is [`NotSent`]); after, anything but a reply is an
    /// unknown outcome, never resent (as `tickbox call @NAME`).
    pub async fn call(&self, prepared: &PreparedCall) -> Result<CallOutcome, NotSent> {
        let timeout_ms = u64::try_from(self.call_timeout.as_millis()).unwrap_or(u64::MAX);
        let request = Request::Call {
            tool: prepared.tool.clone(),
            args: prepared.args.clone(),
            revision: prepared.revision.clone(),
            timeout_ms: Some(timeout_ms),
        };
        let frame = serde_json::to_value(&request)
            .map(Frame::Json)
            .map_err(|e| NotSent::Invalid(e.to_string()))?;
        let unreachable = |why: String| {
            NotSent::Unavailable(format!("the live instance did not take the call: {why}"))
        };
        let (mut conn, id) = tokio::time::timeout(REQUEST_TIMEOUT, self.open())
            .await
            .map_err(|_| unreachable("no connection".into()))?
            .map_err(unreachable)?;
        note(&self.timeline, Dir::ToHost, &id, &frame, Kind::Request);
        tokio::time::timeout(REQUEST_TIMEOUT, conn.send(&frame))
            .await
            .map_err(|_| unreachable("the request could not be written".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let unknown = |why: String| {
            Ok(CallOutcome::Unknown(UnknownReason::Reported(
                format!("{why}; it was not resent").into(),
            )))
        };
        // The host answers its own timeout; ours is for a host that cannot.
        let t = self.call_timeout;
        let limit = t + t / 20 + REPLY_GRACE;
        let reply = match tokio::time::timeout(limit, conn.next()).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return unknown(format!("the host did not deliver the outcome ({e})")),
            Err(_) => {
                return unknown(format!(
                    "the host sent no reply within {:.1}s",
                    limit.as_secs_f64()
                ))
            }
        };
        if let Some(f) = &reply {
            note(&self.timeline, Dir::FromHost, &id, f, Kind::Response);
        }
        match first_reply(reply) {
            Ok(v) => match serde_json::from_value::<CallReply>(v) {
                Ok(r) => Ok(outcome_of(r)),
                Err(e) => unknown(format!("an unreadable call reply from the host: {e}")),
            },
            // The host refused before sending anything to the Tick.
            Err(f @ Failure::Answered(..)) => Err(f.not_sent()),
            Err(Failure::Lost(why)) => {
                unknown(format!("the host did not deliver the outcome ({why})"))
            }
        }
    }

    /// Key bytes for the Tick, through the view stream.
    pub fn keys(&self, bytes: &[u8]) -> Result<(), String> {
        use mpsc::error::TrySendError;
        self.to_host
            .try_send(Frame::Keys(bytes.to_vec()))
            .map_err(|e| match e {
                TrySendError::Full(_) => format!(
                    "the live instance's host is not taking keys ({LIVE_SEND_QUEUE} frames wait)"
                ),
                TrySendError::Closed(_) => "the view of the live instance has closed".into(),
            })
    }

    /// What the page says about the instance.
    pub fn describe_target(&self) -> Value {
        TickData::new(json!({
            "kind": "live",
            "name": self.info.name,
            "id": self.info.id,
            "backend": self.info.backend,
            "pid": self.info.pid,
            "timeline": "The frames of the live socket between this inspector and the instance's host \
(c1, c2, … are its connections). The protocol between that host and the Tick belongs to the other process and is not shown.",
            "audit": false,
            "audit_note": NO_AUDIT,
        }))
        .inert()
    }

    /// The `[tick]` of the scenario export: what the inspector knows,
    /// which is not how the Tick was started.
    pub fn record_tick(&self) -> RecordTick {
        RecordTick {
            path: None,
            command: Vec::new(),
            cwd: None,
            grants: Default::default(),
            size: self.view.size(),
            // A wasm Tick of unknown kind replays on real time, which
            // either kind takes.
            time: if self.info.backend == "native" {
                RecordTime::Native
            } else {
                RecordTime::RealWasm
            },
        }
    }

    /// The comment that opens the scenario export: its `[tick]` names no
    /// Tick, and the person must add it.
    pub fn scenario_note(&self) -> String {
        use tickbox_host::text::escape;
        format!(
            "# Exported by `tickbox inspect @{}` from a live instance (kind {}, {}) that another\n\
             # process started: the inspector does not know how, so [tick] below names no Tick.\n\
             # Add its `path` (or `command`) and its grants before `tickbox test`.\n",
            escape(&self.info.name),
            escape(&self.info.kind),
            escape(&self.info.backend),
        )
    }
}

/// Runs a live target's streams for `inspector`: the view's output into
/// our screen model and its ending, the page's keys and resizes out, and
/// the watch's deliveries into the state.
pub fn drive(inspector: Arc<Inspector>, streams: Streams) {
    let Streams {
        view,
        attach: (mut r, mut w, view_id),
        mut outgoing,
        watch: (mut watch_r, watch_w, watch_id),
        ..
    } = streams;
    let timeline = inspector.timeline.clone();
    // Keys and resizes, in the order the page sent them.
    tokio::spawn({
        let (timeline, id) = (timeline.clone(), view_id.clone());
        async move {
            while let Some(frame) = outgoing.recv().await {
                note(&timeline, Dir::ToHost, &id, &frame, Kind::Other);
                if write_frame(&mut w, &frame).await.is_err() {
                    break;
                }
            }
        }
    });
    tokio::spawn({
        let (inspector, timeline) = (inspector.clone(), timeline.clone());
        async move {
            let (reason, last_words) = loop {
                let frame = match read_frame(&mut r).await {
                    Ok(Some(f)) => f,
                    Ok(None) => break (LOST.to_string(), Vec::new()),
                    Err(e) => break (format!("{LOST}: {e}"), Vec::new()),
                };
                note(&timeline, Dir::FromHost, &view_id, &frame, Kind::Other);
                match frame {
                    // Re-rendered by the host: parsed into our model only.
                    Frame::Output(bytes) => view.draw(&bytes).await,
                    Frame::Json(v) => match serde_json::from_value::<Reply>(v) {
                        Ok(Reply::Ended { reason, last_words }) => break (reason, last_words),
                        Ok(Reply::Error { message, .. }) => {
                            break (format!("the host closed the view: {message}"), Vec::new())
                        }
                        _ => {}
                    },
                    Frame::Keys(_) => {}
                }
            };
            inspector.set_ended(&reason, &last_words);
        }
    });
    tokio::spawn(async move {
        // Held open: the host ends a watch when its client's side closes.
        let _watching = watch_w;
        loop {
            let frame = match read_frame(&mut watch_r).await {
                Ok(Some(f)) => f,
                Ok(None) | Err(_) => break,
            };
            note(&timeline, Dir::FromHost, &watch_id, &frame, Kind::Other);
            if let Frame::Json(v) = frame {
                match serde_json::from_value::<Reply>(v) {
                    Ok(Reply::Delivery(d)) => inspector.set_state(&d),
                    Ok(Reply::Ended { reason, .. }) => {
                        inspector.set_ended(&reason, &[]);
                        break;
                    }
                    Ok(Reply::Error { message, .. }) => {
                        tracing::warn!(message = %tickbox_host::text::escape(&message), "the watch of the live instance failed");
                        break;
                    }
                    _ => {}
                }
            }
        }
    });
}
