//! A published instance as the socket's server and its views share it: the
//! session, its name and counters, and the attached views' sizes. Both
//! `server` (connections) and `viewer` (attach streams) use it; neither
//! uses the other's internals.

use super::wire::{ErrorKind, Reply};
use super::{InstanceInfo, Observer};
use crate::session::Session;
use crate::util::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(super) struct Instance {
    pub(super) session: Arc<Session>,
    pub(super) id: String,
    pub(super) name: String,
    pub(super) backend: String,
    pub(super) started: String,
    pub(super) views: AtomicUsize,
    /// The attached views' sizes (the Tick gets the smallest).
    pub(super) sizes: Sizes,
    /// Connections being served, views and one-shot requests alike.
    pub(super) connections: AtomicUsize,
    /// Connections accepted since publishing, ever.
    pub(super) accepted: AtomicU64,
    pub(super) owner: u32,
    pub(super) observer: Option<Arc<dyn Observer>>,
}

impl Instance {
    pub(super) fn info(&self) -> InstanceInfo {
        let d = self.session.descriptor();
        InstanceInfo {
            id: self.id.clone(),
            name: self.name.clone(),
            kind: d
                .as_ref()
                .map(|d| d.kind.wire().to_string())
                .unwrap_or_default(),
            title: d
                .as_ref()
                .map(|d| d.title.wire().to_string())
                .unwrap_or_default(),
            backend: self.backend.clone(),
            pid: std::process::id(),
            started: self.started.clone(),
            views: self.views.load(Ordering::Relaxed),
            seq: self.session.state().state.map(|s| s.seq),
        }
    }
}

/// The last view id handed out, and each view's Tick area.
type Slots = (u64, HashMap<u64, (u16, u16)>);

/// The sizes of the attached views, and the Tick size they imply.
#[derive(Default)]
pub struct Sizes {
    inner: Mutex<Slots>,
}

impl Sizes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        lock(&self.inner)
    }

    /// A new view's slot.
    pub(super) fn join(&self) -> u64 {
        let mut s = self.lock();
        s.0 += 1;
        s.0
    }

    /// Sets view `id`'s area (`None`: unknown) and returns the smallest area
    /// of all views, the size the Tick should have.
    pub(super) fn set(&self, id: u64, area: Option<(u16, u16)>) -> Option<(u16, u16)> {
        let mut s = self.lock();
        match area {
            Some(a) => s.1.insert(id, a),
            None => s.1.remove(&id),
        };
        let cols = s.1.values().map(|a| a.0).min()?;
        let rows = s.1.values().map(|a| a.1).min()?;
        Some((cols, rows))
    }
}

/// Decrements a counter when dropped (a view detached, a connection ended).
pub(super) struct Count<'a>(pub(super) &'a AtomicUsize);

impl Drop for Count<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(super) fn json_ok<T: serde::Serialize>(v: &T) -> Reply {
    match serde_json::to_value(v) {
        Ok(v) => Reply::Ok(v),
        Err(e) => error(ErrorKind::Session, e),
    }
}

/// An error reply.
pub(super) fn error(kind: ErrorKind, message: impl ToString) -> Reply {
    Reply::Error {
        kind,
        message: message.to_string(),
    }
}
