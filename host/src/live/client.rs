//! The client side: listing instances, resolving `ID|NAME`, requests.
//!
//! [`list`] asks every socket in the registry for its [`InstanceInfo`] and
//! removes sockets nobody listens on (their host died without cleaning up).
//! [`connect`] resolves a target (an id, a name, either with a leading `@`)
//! and opens a [`Connection`], on which a one-shot [`Connection::request`]
//! or a stream ([`Connection::start`], then [`Connection::next`] and
//! [`Connection::send`]) runs.

use super::registry::Registry;
use super::wire::{read_frame, write_frame, write_json, Frame, Reply, Request};
use super::{InstanceInfo, LiveError};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

/// How long `ls` waits for one instance to answer.
const INFO_TIMEOUT: Duration = Duration::from_secs(2);

/// Every live instance in the registry, by start time; stale sockets are
/// removed, and the names and host locks of hosts that died
/// (each lock taken before anything of its goes).
pub async fn list(registry: &Registry) -> Vec<InstanceInfo> {
    let dir = registry.dir().to_path_buf();
    if let Ok(swept) = tokio::task::spawn_blocking(move || super::claim::sweep(&dir)).await {
        if swept > 0 {
            tracing::info!(swept, "removed the names and locks of hosts that are gone");
        }
    }
    let mut found = Vec::new();
    for (id, path) in registry.sockets() {
        let conn = match UnixStream::connect(&path).await {
            Ok(c) => c,
            Err(e) => {
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                ) {
                    // Nobody listens: the host is gone.
                    tracing::info!(%id, "removing a stale live-instance socket");
                    let _ = std::fs::remove_file(&path);
                } else {
                    tracing::warn!(%id, error = %e, "cannot reach a live instance");
                }
                continue;
            }
        };
        let info = tokio::time::timeout(
            INFO_TIMEOUT,
            Connection::from_stream(conn, id.clone()).request(Request::Info),
        )
        .await;
        match info {
            Ok(Ok(v)) => match serde_json::from_value::<InstanceInfo>(v) {
                Ok(info) => found.push(info),
                Err(e) => tracing::warn!(%id, error = %e, "unreadable instance info"),
            },
            Ok(Err(e)) => tracing::warn!(%id, error = %e, "instance info failed"),
            Err(_) => tracing::warn!(%id, "a live instance did not answer in time"),
        }
    }
    found.sort_by(|a, b| a.started.cmp(&b.started).then(a.id.cmp(&b.id)));
    found
}

/// Finds the instance `target` names: an exact id first, then a name.
pub async fn resolve(registry: &Registry, target: &str) -> Result<InstanceInfo, LiveError> {
    let target = target.strip_prefix('@').unwrap_or(target);
    let all = list(registry).await;
    if let Some(i) = all.iter().find(|i| i.id == target) {
        return Ok(i.clone());
    }
    if let Some(i) = all.iter().find(|i| i.name == target) {
        return Ok(i.clone());
    }
    Err(LiveError::NotFound {
        target: target.into(),
        available: all.into_iter().map(|i| i.name).collect(),
    })
}

/// Resolves `target` and connects to it.
pub async fn connect(registry: &Registry, target: &str) -> Result<Connection, LiveError> {
    let info = resolve(registry, target).await?;
    Connection::open(&registry.socket(&info.id), &info.name).await
}

/// One connection to a live instance.
pub struct Connection {
    r: OwnedReadHalf,
    w: OwnedWriteHalf,
    target: String,
}

impl Connection {
    /// Connects to the socket at `path`; `target` names it in errors.
    pub async fn open(path: &Path, target: &str) -> Result<Connection, LiveError> {
        let conn = UnixStream::connect(path)
            .await
            .map_err(|source| LiveError::Connect {
                target: target.into(),
                source,
            })?;
        Ok(Connection::from_stream(conn, target.into()))
    }

    fn from_stream(conn: UnixStream, target: String) -> Connection {
        let (r, w) = conn.into_split();
        Connection { r, w, target }
    }

    fn lost(&self, why: impl std::fmt::Display) -> LiveError {
        LiveError::Wire(format!("the connection to `{}` failed: {why}", self.target))
    }

    /// Sends `request` and waits for its first reply's value.
    pub async fn start(&mut self, request: Request) -> Result<Value, LiveError> {
        self.send_request(&request).await?;
        self.reply().await
    }

    /// Sends a request without waiting for the reply: a caller that must
    /// know whether its request left (a call: after this, a lost
    /// connection is an unknown outcome) uses this and [`Connection::reply`].
    pub async fn send_request(&mut self, request: &Request) -> Result<(), LiveError> {
        write_json(&mut self.w, request)
            .await
            .map_err(|e| self.lost(e))
    }

    /// Waits for the first reply to the request sent, and its value.
    pub async fn reply(&mut self) -> Result<Value, LiveError> {
        match self.next().await? {
            Some(Frame::Json(v)) => match serde_json::from_value::<Reply>(v) {
                Ok(Reply::Ok(v)) => Ok(v),
                Ok(Reply::Error { kind, message }) => Err(match kind {
                    super::wire::ErrorKind::Refused => LiveError::Refused(message),
                    kind => LiveError::Remote { kind, message },
                }),
                Ok(Reply::Ended { reason, .. }) => Err(LiveError::Remote {
                    kind: super::wire::ErrorKind::Session,
                    message: reason,
                }),
                Ok(other) => Err(self.lost(format!("unexpected reply {other:?}"))),
                Err(e) => Err(self.lost(format!("unreadable reply: {e}"))),
            },
            Some(other) => Err(self.lost(format!("unexpected frame {other:?}"))),
            None => Err(self.lost("it closed before answering")),
        }
    }

    /// A one-shot request.
    pub async fn request(mut self, request: Request) -> Result<Value, LiveError> {
        self.start(request).await
    }

    /// The next frame of a stream; `None` when the host closed it.
    pub async fn next(&mut self) -> Result<Option<Frame>, LiveError> {
        match read_frame(&mut self.r).await {
            Ok(f) => Ok(f),
            Err(e) => Err(self.lost(e)),
        }
    }

    /// Sends a frame on a stream.
    pub async fn send(&mut self, frame: &Frame) -> Result<(), LiveError> {
        write_frame(&mut self.w, frame)
            .await
            .map_err(|e| self.lost(e))
    }

    /// The two halves, for a view that reads and writes concurrently.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (self.r, self.w)
    }
}
