//! Publishing a session: the socket, the peer check, and serving requests.
//!
//! [`publish`] binds `<id>.sock` in the registry and spawns an accept loop;
//! each connection is served by its own task, so a slow or stuck client
//! never holds up another. The [`Published`] handle keeps the instance
//! reachable: dropping it stops accepting and removes the socket (already
//! open views then see their connection close).
//!
//! Views share the Tick's one terminal, sized like tmux (the smallest view;
//! see [`super::viewer`]), which the Tick sees as SIGWINCH (native) or a
//! resize event (wasm). Each view is drawn from the screen model.

use super::claim::{claim, NameClaim};
use super::instance::{error, json_ok, Count, Instance, Sizes};
use super::registry::{authorize, current_uid, valid_name, Registry};
use super::viewer;
use super::wire::{
    read_frame, write_json, CallReply, ErrorKind, Frame, Reply, Request, MAX_CALL_TIMEOUT_MS,
    MAX_FRAME, MAX_WATCH_INTERVAL_MS,
};
use super::{InstanceInfo, LiveError};
use crate::delivery::{item_budget, Delivery, Subscription};
use crate::session::{call_line_len, Session};
use crate::util::rfc3339;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tickbox_protocol::limits::MAX_LINE_BYTES;
use tickbox_protocol::PreparedCall;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

/// How to publish an instance.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// The name asked for; taken names are an error. Without one, the last
    /// component of the Tick's kind (`example.counter` → `counter`), with
    /// `-2`, `-3`, … appended while taken.
    pub name: Option<String>,
    /// How the Tick runs, for `ls`: a [`TickKind::label`](crate::backend::TickKind::label).
    pub backend: String,
    /// The registry; the current user's by default.
    pub registry: Option<Registry>,
    /// The uid allowed to connect; the current user's by default. Tests set
    /// another to see a peer refused.
    pub owner_uid: Option<u32>,
    /// Told about keys, resizes, calls and marks (a session being recorded
    /// as a scenario).
    pub observer: Option<Arc<dyn super::Observer>>,
}

impl PublishOptions {
    /// Defaults for a Tick run by `backend`.
    pub fn new(backend: impl Into<String>) -> PublishOptions {
        PublishOptions {
            name: None,
            backend: backend.into(),
            registry: None,
            owner_uid: None,
            observer: None,
        }
    }
}

/// A published instance; dropping it unpublishes.
pub struct Published {
    instance: Arc<Instance>,
    socket: PathBuf,
    accept: tokio::task::JoinHandle<()>,
    /// The name, held until after the socket is gone (fields drop after `drop`).
    _claim: NameClaim,
    /// Where it is published, which counts the ended records written there.
    registry: Registry,
}

impl Published {
    /// The instance id.
    pub fn id(&self) -> &str {
        &self.instance.id
    }
    /// The instance name.
    pub fn name(&self) -> &str {
        &self.instance.name
    }
    /// The socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
    /// What `ls` shows about it now.
    pub fn info(&self) -> InstanceInfo {
        self.instance.info()
    }
    /// Connections its socket accepted since it was published (a peer
    /// refused by the uid check counts too): what another host's
    /// publishing must leave unchanged, since a name is claimed without
    /// asking any instance.
    pub fn connections_accepted(&self) -> u64 {
        self.instance.accepted.load(Ordering::Relaxed)
    }

    /// Waits (at most `limit`) until no connection is being served: after
    /// the session ends, views are told so and a `stop` gets its answer
    /// before the hosting process goes away.
    pub async fn drain(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.instance.connections.load(Ordering::Relaxed) > 0
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.socket);
        // Leave a record for `ls -a` and `logs`: why it ended, last words.
        let session = &self.instance.session;
        let status = session.end_reason().map_or_else(
            || "the hosting process stopped serving it".to_string(),
            |r| r.to_string(),
        );
        let lines = session.view().last_lines(super::ended::RETAINED_LINES);
        if let Some(dir) = self.socket.parent() {
            super::ended::record(dir, self.instance.info(), status, lines);
            // A host prunes at its first record, so that one-shot hosts
            // (a `tickbox call` each) keep the directory bounded too, and
            // again every that many records it writes.
            let written = self.registry.ended_one();
            if written == 1 || written.is_multiple_of(super::ended::MAX_ENDED_RECORDS) {
                super::ended::prune(dir);
            }
        }
    }
}

fn default_name(kind: &str) -> String {
    let last = kind.rsplit('.').next().unwrap_or(kind);
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if valid_name(&cleaned) {
        cleaned
    } else {
        "tick".into()
    }
}

/// How many default names (`counter`, `counter-2`, …) publishing tries.
const MAX_NAME_TRIES: usize = 1000;

/// Publishes `session` (an initialized one) as a live instance.
///
/// A name is claimed atomically (`live::claim`) before the socket is
/// bound, so of two hosts publishing the same name at the same instant
/// exactly one gets it. The claim is the whole check: publishing never
/// connects to another instance's socket, so a host publishing N Ticks
/// costs N claims, not a listing of every instance before each (which
/// made N publishes N(N−1)/2 connections).
pub async fn publish(session: Arc<Session>, opts: PublishOptions) -> Result<Published, LiveError> {
    let registry = match opts.registry {
        Some(r) => r,
        None => Registry::open()?,
    };
    let dir_error = |source| LiveError::Dir {
        path: registry.dir().to_path_buf(),
        source,
    };
    let host = registry.host_lock().map_err(dir_error)?;
    let try_claim = |name: &str| -> Result<Option<NameClaim>, LiveError> {
        claim(registry.dir(), name, &host).map_err(dir_error)
    };
    let (name, held) = match opts.name {
        Some(n) if !valid_name(&n) => return Err(LiveError::BadName(n)),
        Some(n) => match try_claim(&n)? {
            Some(c) => (n, c),
            None => return Err(LiveError::NameTaken(n)),
        },
        None => {
            let base = default_name(
                &session
                    .descriptor()
                    .map(|d| d.kind.wire().to_string())
                    .unwrap_or_default(),
            );
            let mut found = None;
            for n in 1..=MAX_NAME_TRIES {
                let name = if n == 1 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                if let Some(c) = try_claim(&name)? {
                    found = Some((name, c));
                    break;
                }
            }
            found.ok_or_else(|| LiveError::NameTaken(format!("{base}-{MAX_NAME_TRIES}")))?
        }
    };
    let (id, socket) = loop {
        let id = super::claim::new_id();
        let path = registry.socket(&id);
        if !path.exists() {
            break (id, path);
        }
    };
    // Bound and made 0600 under a name `list` ignores, then renamed into
    // place: between bind and listen a connect is refused, and a `list`
    // running then (`tickbox ls`, resolving `@NAME`) would take the socket
    // for a stale one and remove it.
    let pending = socket.with_extension("sock.new");
    let bind_error = |source| LiveError::Bind {
        path: socket.clone(),
        source,
    };
    let _ = std::fs::remove_file(&pending);
    let listener = UnixListener::bind(&pending).map_err(bind_error)?;
    // The directory is 0700 already; 0600 on the socket is the second lock.
    std::fs::set_permissions(&pending, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&pending, &socket))
        .map_err(|e| {
            let _ = std::fs::remove_file(&pending);
            bind_error(e)
        })?;
    let instance = Arc::new(Instance {
        session,
        id,
        name,
        backend: opts.backend,
        started: rfc3339(SystemTime::now()),
        views: AtomicUsize::new(0),
        sizes: Sizes::default(),
        connections: AtomicUsize::new(0),
        accepted: AtomicU64::new(0),
        owner: opts.owner_uid.unwrap_or_else(current_uid),
        observer: opts.observer,
    });
    let accept = tokio::spawn(accept_loop(listener, instance.clone()));
    tracing::info!(id = %instance.id, name = %instance.name, socket = %socket.display(), "published");
    Ok(Published {
        instance,
        socket,
        accept,
        _claim: held,
        registry,
    })
}

async fn accept_loop(listener: UnixListener, instance: Arc<Instance>) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                instance.accepted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(conn, instance.clone()));
            }
            Err(e) => {
                // Out of descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "accepting a live-instance connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve(conn: UnixStream, inst: Arc<Instance>) {
    inst.connections.fetch_add(1, Ordering::Relaxed);
    let _served = Count(&inst.connections);
    let cred = conn.peer_cred();
    let (mut r, mut w) = conn.into_split();
    // The peer check comes before reading anything the peer sent.
    let allowed = match cred {
        Ok(c) => authorize(c.uid(), inst.owner).map_err(|e| e.to_string()),
        Err(e) => Err(format!("refused: cannot read the peer's credentials: {e}")),
    };
    if let Err(message) = allowed {
        tracing::warn!(%message, "refusing a live-instance connection");
        let _ = write_json(&mut w, &error(ErrorKind::Refused, message)).await;
        return;
    }
    let request = match read_frame(&mut r).await {
        Ok(Some(Frame::Json(v))) => serde_json::from_value::<Request>(v)
            .map_err(|e| format!("not a live-instance request: {e}")),
        Ok(Some(_)) => Err("the first frame must be a JSON request".into()),
        Ok(None) => return,
        Err(e) => Err(e.to_string()),
    };
    let request = match request {
        Ok(r) => r,
        Err(message) => {
            let _ = write_json(&mut w, &error(ErrorKind::Usage, message)).await;
            return;
        }
    };
    let session = &inst.session;
    let reply = match request {
        Request::Attach { cols, rows, status } => {
            return viewer::serve(client_frames(r), w, &inst, (cols, rows), status).await
        }
        Request::Watch { interval_ms } if interval_ms > MAX_WATCH_INTERVAL_MS => error(
            ErrorKind::Usage,
            format!(
                "the watch interval {interval_ms} ms is over the {MAX_WATCH_INTERVAL_MS} ms limit"
            ),
        ),
        Request::Watch { interval_ms } => {
            return watch(r, w, &inst, Duration::from_millis(interval_ms)).await
        }
        Request::Info => json_ok(&inst.info()),
        Request::Describe => match session.describe().await {
            Ok(d) => Reply::Ok(d.raw.clone()),
            Err(e) => error(ErrorKind::Session, e),
        },
        Request::Read => match session.read().await {
            Ok(state) => json_ok(&*state),
            Err(e) => error(ErrorKind::Session, e),
        },
        // To our own client over the socket, which types it again.
        Request::Screen => Reply::Ok(session.view().screen_text().wire().into()),
        Request::Call {
            tool,
            args,
            revision,
            timeout_ms,
        } => {
            call(
                session,
                inst.observer.as_deref(),
                tool,
                args,
                revision,
                timeout_ms,
            )
            .await
        }
        Request::Stop => {
            session.shutdown().await;
            Reply::Ok(serde_json::Value::Null)
        }
    };
    let _ = write_json(&mut w, &deliverable(reply, MAX_FRAME)).await;
}

/// A reply that fits one socket frame of `limit` bytes. Replies carry at
/// most a call result (8 MiB, checked by the session) or a line the Tick
/// wrote, so this is a backstop; but a reply that does not fit must still
/// reach the client with the right meaning, never as a dropped connection:
/// a result becomes an unknown outcome (the call ran, its result cannot be
/// delivered), a tool error keeps its code and `executed` with its message
/// cut and its data left out, anything else becomes a session error.
fn deliverable(reply: Reply, limit: usize) -> Reply {
    let size = |r: &Reply| serde_json::to_vec(r).map_or(usize::MAX, |v| v.len());
    let len = size(&reply);
    if len <= limit {
        return reply;
    }
    let too_large = format!(
        "response_too_large: the reply is {len} bytes encoded, over the live socket's {limit}-byte frame"
    );
    let call = match &reply {
        Reply::Ok(v) => serde_json::from_value::<CallReply>(v.clone()).ok(),
        _ => None,
    };
    let smaller = match call {
        Some(CallReply::Ok { .. }) => json_ok(&CallReply::Unknown { reason: too_large }),
        Some(CallReply::Failed {
            code,
            message,
            executed,
            ..
        }) => {
            let message = message.wire();
            let mut end = message.len().min(limit / 4);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            json_ok(&CallReply::Failed {
                code,
                message: format!("{}… ({too_large})", &message[..end]).into(),
                data: None,
                executed,
            })
        }
        _ => error(ErrorKind::Session, too_large),
    };
    if size(&smaller) <= limit {
        smaller
    } else {
        error(ErrorKind::Session, "response_too_large")
    }
}

/// Sends a call the client prepared and approved against `revision`.
async fn call(
    session: &Session,
    observer: Option<&dyn super::Observer>,
    tool: String,
    args: serde_json::Value,
    revision: String,
    timeout_ms: Option<u64>,
) -> Reply {
    if let Some(reason) = session.end_reason() {
        return error(ErrorKind::Session, reason);
    }
    let timeout = match timeout_ms {
        Some(0) => return error(ErrorKind::Usage, "the call timeout must be positive"),
        Some(ms) if ms > MAX_CALL_TIMEOUT_MS => {
            return error(
                ErrorKind::Usage,
                format!("the call timeout {ms} ms is over the {MAX_CALL_TIMEOUT_MS} ms limit"),
            )
        }
        ms => ms.map(Duration::from_millis),
    };
    let Some(catalog) = session.descriptor() else {
        return error(ErrorKind::Session, "the Tick has no catalog yet");
    };
    // What the observer is told: only calls the Tick could execute.
    let observed = observer
        .filter(|_| catalog.revision == revision)
        .map(|o| (o, tool.clone(), args.clone()));
    let prepared = if catalog.revision == revision {
        // The host checks args against the schema before sending (§7.2).
        match catalog.prepare(&tool, args) {
            Ok(p) => p,
            Err(e) => return error(ErrorKind::Usage, e),
        }
    } else {
        // Approved against another catalog: send it bound to that revision,
        // so the Tick refuses it with -32004 without executing (§5.5, §10).
        PreparedCall {
            mutates: catalog.tool(&tool).is_none_or(|t| t.mutates),
            tool,
            args,
            revision,
        }
    };
    // The host's own output is bounded too: a call that would be a line
    // over the protocol's limit is refused here, before anything is sent.
    let line = call_line_len(&prepared);
    if line > MAX_LINE_BYTES {
        return error(
            ErrorKind::Usage,
            format!("the call's request line would be {line} bytes, over the {MAX_LINE_BYTES}-byte line limit (§3.6); nothing was sent"),
        );
    }
    let started = std::time::Instant::now();
    let outcome = match timeout {
        Some(t) => session.call_within(&prepared, t).await,
        None => session.call(&prepared).await,
    };
    if let Some((o, tool, args)) = observed {
        o.called(&tool, &args, started, &outcome);
    }
    json_ok(&CallReply::from(outcome))
}

/// Forwards the client's frames to a channel, so the serving loop can wait
/// on them in a `select!` (reading a frame is not cancel-safe).
fn client_frames(mut r: OwnedReadHalf) -> mpsc::Receiver<Frame> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        while let Ok(Some(frame)) = read_frame(&mut r).await {
            if tx.send(frame).await.is_err() {
                break;
            }
        }
    });
    rx
}

async fn watch(r: OwnedReadHalf, mut w: OwnedWriteHalf, inst: &Instance, interval: Duration) {
    let session = &inst.session;
    let mut sub = Subscription::new(session, interval, false);
    if write_json(&mut w, &json_ok(&inst.info())).await.is_err() {
        return;
    }
    let mut from_client = client_frames(r);
    loop {
        tokio::select! {
            next = sub.next(session) => {
                let Some((state, merged)) = next else {
                    let reason = session.end_reason().map(|r| r.to_string()).unwrap_or_default();
                    let _ = write_json(
                        &mut w,
                        &Reply::Ended {
                            reason,
                            last_words: Vec::new(),
                        },
                    )
                    .await;
                    break;
                };
                let Some(catalog) = session.descriptor() else { break };
                // Trimming runs on the blocking pool: a large state must not
                // hold up the workers that answer every other connection.
                let delivery = Delivery::build(state, merged, catalog, item_budget(1)).await;
                let reply = match serde_json::to_value(&delivery) {
                    Ok(v) => Reply::Delivery(v),
                    Err(e) => error(ErrorKind::Session, e),
                };
                if write_json(&mut w, &reply).await.is_err() {
                    break;
                }
            }
            // The watcher went away.
            None = from_client.recv() => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_undeliverable_reply_keeps_its_meaning() {
        let big = "x".repeat(5000);
        let ok = json_ok(&CallReply::Ok {
            result: json!({"s": big}),
        });
        assert_eq!(deliverable(ok.clone(), 10_000), ok, "fits: unchanged");
        let Reply::Ok(v) = deliverable(ok, 1000) else {
            panic!()
        };
        assert!(matches!(
            serde_json::from_value(v).unwrap(),
            CallReply::Unknown { reason } if reason.contains("response_too_large")
        ));
        let failed = json_ok(&CallReply::Failed {
            code: -32000,
            message: big.as_str().into(),
            data: Some(json!(big)),
            executed: true,
        });
        let Reply::Ok(v) = deliverable(failed, 2000) else {
            panic!()
        };
        match serde_json::from_value(v).unwrap() {
            CallReply::Failed {
                code,
                data,
                executed,
                ..
            } => {
                assert_eq!((code, data, executed), (-32000, None, true))
            }
            other => panic!("{other:?}"),
        }
        let read = Reply::Ok(json!({"seq": 1, "data": big}));
        assert!(matches!(
            deliverable(read, 1000),
            Reply::Error {
                kind: ErrorKind::Session,
                ..
            }
        ));
    }
}
