//! The write quotas of a Tick: `--max-write`, how many bytes it may write
//! to files through its writable grants, all together; and a grant's own
//! (`--dir HOST::GUEST:rw,max=SIZE`), how many through that grant. A write
//! is counted against every quota that applies, and refused whole if any
//! of them has too little left.
//!
//! Which grant a descriptor belongs to is followed from handle to handle
//! ([`GrantQuotas`]): a preopen is tied to its grant when the guest gets it
//! (`get-directories`), and every descriptor `open-at` makes inherits its
//! parent's grant. Those two are the only ways a component gets a
//! descriptor, and each records (or clears) the entry for the handle it
//! makes, so a reused handle number never keeps a stale grant.
//!
//! Enforced for components on the three ways `wasi:filesystem` writes file
//! data: `descriptor.write` is checked before it runs, and the output
//! streams of `write-via-stream` / `append-via-stream` are wrapped so each
//! write is counted. Past the quota the guest gets an error it handles and
//! its session goes on: `quota` (EDQUOT) from `descriptor.write`, a failed
//! stream write (`last-operation-failed`, which wasi-libc reports as EIO)
//! from a stream. What counts is bytes written,
//! including overwrites (a budget, not a measure of disk use); growing a
//! file with `set-size` makes it sparse and is not counted. A preview-1
//! module's writes go through wasmtime-wasi's internals, where they cannot
//! be metered, so a quota with a preview-1 module is refused at start.

use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// What is left of a write quota (shared by the streams it meters).
#[derive(Clone)]
pub struct Quota {
    left: Arc<AtomicU64>,
    max: u64,
    /// The bound's name for logs: `--max-write` or the grant's.
    name: Arc<str>,
}

impl Quota {
    /// The Tick's quota (`--max-write`) of `max` bytes.
    pub fn new(max: u64) -> Quota {
        Quota::named(max, "--max-write")
    }

    /// A quota of `max` bytes called `name` in logs.
    pub fn named(max: u64, name: &str) -> Quota {
        Quota {
            left: Arc::new(AtomicU64::new(max)),
            max,
            name: name.into(),
        }
    }

    /// Gives back `n` bytes taken by [`Quota::take`].
    fn give_back(&self, n: u64) {
        self.left.fetch_add(n, Ordering::Relaxed);
    }

    /// Spends `n` bytes; false (nothing spent) when fewer are left.
    pub fn take(&self, n: u64) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }

    /// The bound, for messages.
    #[cfg(test)]
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The guest-visible error: EDQUOT, which wasmtime-wasi reports as the
    /// `quota` error code.
    pub fn exceeded(&self) -> std::io::Error {
        tracing::info!(max = self.max, bound = %self.name, "a guest ran into a write quota");
        std::io::Error::from_raw_os_error(libc::EDQUOT)
    }
}

/// Spends `n` bytes from every quota in `quotas`, or from none: the first
/// one with too little left is returned (and the others are given back).
pub fn take_all(quotas: &[Quota], n: u64) -> Result<(), &Quota> {
    for (i, q) in quotas.iter().enumerate() {
        if !q.take(n) {
            for taken in &quotas[..i] {
                taken.give_back(n);
            }
            return Err(q);
        }
    }
    Ok(())
}

/// The grant quotas of a Tick and which descriptor handle falls under
/// which (see the module docs).
#[derive(Default)]
pub struct GrantQuotas {
    /// Every preopen, in order, by the path the guest sees, with its quota.
    preopens: Vec<(String, Option<Quota>)>,
    /// Each descriptor handle under such a preopen.
    handles: HashMap<u32, Quota>,
}

impl GrantQuotas {
    /// Every preopen in the order the WASI context lists them (guest
    /// path, quota).
    pub fn new(preopens: Vec<(String, Option<Quota>)>) -> GrantQuotas {
        GrantQuotas {
            preopens,
            handles: HashMap::new(),
        }
    }

    /// Whether no grant has a quota (nothing to follow).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.preopens.iter().all(|(_, q)| q.is_none())
    }

    /// The guest got handle `rep` for the `index`th preopen, at `guest`.
    /// Two single-file grants may share a guest directory, so the index
    /// decides; the path is checked as well.
    pub fn preopened(&mut self, index: usize, rep: u32, guest: &str) {
        match self.preopens.get(index) {
            Some((p, Some(q))) if p == guest => self.handles.insert(rep, q.clone()),
            _ => self.handles.remove(&rep),
        };
    }

    /// `open-at` on handle `parent` made handle `child`.
    pub fn opened(&mut self, parent: u32, child: u32) {
        match self.handles.get(&parent).cloned() {
            Some(q) => self.handles.insert(child, q),
            None => self.handles.remove(&child),
        };
    }

    /// The grant quota handle `rep` writes under, if any.
    pub fn of(&self, rep: u32) -> Option<&Quota> {
        self.handles.get(&rep)
    }

    /// The quotas a write through handle `rep` counts against: the Tick's,
    /// then its grant's.
    pub fn for_write(&self, tick: Option<&Quota>, rep: u32) -> Vec<Quota> {
        tick.into_iter().chain(self.of(rep)).cloned().collect()
    }
}

/// A file's output stream, metered by every quota that applies.
pub struct QuotaStream {
    pub inner: Box<dyn OutputStream>,
    pub quotas: Vec<Quota>,
}

#[wasmtime_wasi::async_trait]
impl Pollable for QuotaStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for QuotaStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if let Err(q) = take_all(&self.quotas, bytes.len() as u64) {
            return Err(StreamError::LastOperationFailed(q.exceeded().into()));
        }
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_is_spent_exactly_once() {
        let q = Quota::new(100);
        assert!(q.take(60));
        assert!(!q.take(41), "more than is left is refused whole");
        assert!(q.take(40));
        assert!(!q.take(1));
        assert_eq!(q.exceeded().raw_os_error(), Some(libc::EDQUOT));
    }

    #[test]
    fn a_write_takes_from_every_quota_or_from_none() {
        let tick = Quota::new(100);
        let grant = Quota::named(30, "/data");
        let both = [tick.clone(), grant.clone()];
        assert!(take_all(&both, 20).is_ok());
        let refused = take_all(&both, 20).unwrap_err();
        assert_eq!(refused.max(), 30, "the grant's quota refused it");
        // The Tick's quota got its 20 bytes back: 80 left, not 60.
        assert!(tick.take(80));
        assert!(!tick.take(1));
    }

    #[test]
    fn descriptors_inherit_their_grants_quota() {
        let mut g = GrantQuotas::new(vec![
            ("/data".into(), Some(Quota::named(10, "/data"))),
            ("/other".into(), None),
        ]);
        assert!(!g.is_empty());
        g.preopened(0, 3, "/data");
        g.preopened(1, 4, "/other");
        g.opened(3, 7);
        g.opened(7, 8);
        g.opened(4, 9);
        assert!(g.of(8).is_some() && g.of(9).is_none());
        // A handle number reused for a descriptor elsewhere loses the quota.
        g.opened(4, 8);
        assert!(g.of(8).is_none());
    }
}
