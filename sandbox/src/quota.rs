//! The write quotas of a Tick: `max_write`, how many bytes it may write
//! to files through its writable grants, all together; and a grant's own
//! (`max=SIZE` on a `dir` grant, `HOST::GUEST:rw,max=SIZE`), how many
//! through that grant. A write
//! is counted against every quota that applies, and refused whole if any
//! of them has too little left.
//!
//! Which grant a descriptor belongs to is followed from handle to handle
//! ([`GrantHandles`], which the audit's record of used grants shares): a preopen is tied to its grant when the guest gets it
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
//!
//! **Entries.** Bytes alone do not bound what a Tick leaves on disk: an
//! empty file or directory costs an inode and a directory block whatever
//! its size. So every entry a component creates in a metered place is
//! charged [`ENTRY_COST`] bytes against the same quotas its writes count
//! against (the Tick's and its grant's): `open-at` with `create` when
//! nothing was at the path (checked with `stat-at` first, so opening an
//! existing file with `create`, as `std::fs::write` does, costs nothing),
//! `create-directory-at`, and `link-at`. Past the quota the guest gets
//! `quota`. Like bytes, entries are a budget: removing one gives nothing
//! back. Under `max_write = "40KiB"` a Tick may create 10 empty entries,
//! under `max_write = "1KiB"` none (it may still write into files that exist).
//!
//! **Moves between grants.** A file written where no quota (or another
//! one) applies and then renamed or hard-linked into a metered grant would
//! bring its bytes in uncounted. So `rename-at` and `link-at` between two
//! descriptors of different grants, when either grant has its own quota,
//! are refused with `cross-device` (EXDEV): what `mv` and most libraries
//! then do is copy and remove, and the copy is a metered write. Within one
//! grant, and between grants without quotas, they work as before.
//! (Preview-1 modules take no quota at all, see above, so there is nothing
//! to charge there.)

pub use crate::limits::ENTRY_COST;
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
    /// The bound's name for logs: `max_write` or the grant's.
    name: Arc<str>,
    /// Where a write refused past it is recorded (`denied`, `quota`).
    audit: Option<tickbox_telemetry::audit::Audit>,
}

impl Quota {
    /// The Tick's quota (`max_write`) of `max` bytes.
    pub fn new(max: u64) -> Quota {
        Quota::named(max, "max_write")
    }

    /// A quota of `max` bytes called `name` in logs.
    pub fn named(max: u64, name: &str) -> Quota {
        Quota {
            left: Arc::new(AtomicU64::new(max)),
            max,
            name: name.into(),
            audit: None,
        }
    }

    /// Records each write refused past this quota in `audit`.
    pub fn audited(mut self, audit: Option<tickbox_telemetry::audit::Audit>) -> Quota {
        self.audit = audit;
        self
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
        if let Some(audit) = &self.audit {
            let detail = format!("{} of {} bytes", self.name, self.max);
            audit.denied(
                tickbox_telemetry::audit::DenialKind::Quota,
                "a write",
                &detail,
            );
        }
        std::io::Error::from_raw_os_error(libc::EDQUOT)
    }
}

/// Gives `n` bytes back to every quota in `quotas` (all of them spent by a
/// [`take_all`] whose operation then failed).
pub fn give_back_all(quotas: &[Quota], n: u64) {
    for q in quotas {
        q.give_back(n);
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

/// One preopen of a Tick: the path the guest sees it at, the quota of
/// its grant, the grant as the audit names it, and which of its uses were
/// recorded.
pub struct Preopen {
    /// The guest path of the preopened directory (a single-file grant's
    /// is the file's directory).
    pub at: String,
    /// The grant's own write quota (`max=`).
    pub quota: Option<Quota>,
    /// The grant's host path, as granted.
    pub host: String,
    /// The grant's guest path (a single file's own).
    pub guest: String,
    /// For a single-file grant, the file's name in its private directory:
    /// nothing else may be made there.
    file: Option<String>,
    read_noted: bool,
    write_noted: bool,
}

impl Preopen {
    /// A preopen at `at` of the grant `host` → `guest`.
    pub fn new(at: &str, quota: Option<Quota>, host: &str, guest: &str) -> Preopen {
        Preopen {
            at: at.to_string(),
            quota,
            host: host.to_string(),
            guest: guest.to_string(),
            file: None,
            read_noted: false,
            write_noted: false,
        }
    }

    /// This preopen as a single-file grant's private directory, which
    /// holds only `file`.
    pub fn single_file(mut self, file: &str) -> Preopen {
        self.file = Some(file.to_string());
        self
    }
}

/// Which grant each descriptor handle of a Tick falls under (see the
/// module docs): for the grant's write quota, and for the audit's record
/// of which grants were used (`files::note_use`).
#[derive(Default)]
pub struct GrantHandles {
    /// Every preopen, in order.
    preopens: Vec<Preopen>,
    /// Each descriptor handle under a preopen: the preopen's index.
    handles: HashMap<u32, usize>,
}

impl GrantHandles {
    /// Every preopen in the order the WASI context lists them.
    pub fn new(preopens: Vec<Preopen>) -> GrantHandles {
        GrantHandles {
            preopens,
            handles: HashMap::new(),
        }
    }

    /// Whether no grant has a quota (nothing to meter).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.preopens.iter().all(|p| p.quota.is_none())
    }

    /// The guest got handle `rep` for the `index`th preopen, at `guest`.
    /// Two single-file grants may share a guest directory, so the index
    /// decides; the path is checked as well.
    pub fn preopened(&mut self, index: usize, rep: u32, guest: &str) {
        match self.preopens.get(index) {
            Some(p) if p.at == guest => self.handles.insert(rep, index),
            _ => self.handles.remove(&rep),
        };
    }

    /// `open-at` on handle `parent` made handle `child`.
    pub fn opened(&mut self, parent: u32, child: u32) {
        match self.handles.get(&parent).copied() {
            Some(i) => self.handles.insert(child, i),
            None => self.handles.remove(&child),
        };
    }

    /// The one file's name when handle `rep` is under a single-file
    /// grant's private directory: the grant is that file, so no other
    /// entry may be made, moved or linked there.
    pub fn single_file(&self, rep: u32) -> Option<&str> {
        let i = *self.handles.get(&rep)?;
        self.preopens.get(i)?.file.as_deref()
    }

    /// The grant quota handle `rep` writes under, if any.
    pub fn of(&self, rep: u32) -> Option<&Quota> {
        let i = *self.handles.get(&rep)?;
        self.preopens.get(i)?.quota.as_ref()
    }

    /// The grant behind handle `rep`, the first time it is used this way
    /// (`write`: changed through; a write counts as a read too), so the
    /// caller records it; `None` when it was already recorded or `rep` is
    /// under no grant.
    pub fn first_use(&mut self, rep: u32, write: bool) -> Option<&Preopen> {
        let i = *self.handles.get(&rep)?;
        let p = self.preopens.get_mut(i)?;
        let new = if write { !p.write_noted } else { !p.read_noted };
        p.read_noted = true;
        p.write_noted |= write;
        new.then_some(&*p)
    }

    /// Whether a rename or hard link between the directories behind
    /// handles `a` and `b` would move an entry into or out of a metered
    /// grant from another grant (see the module docs): the two are under
    /// different grant quotas, or only one of them is under one.
    pub fn crosses_a_metered_grant(&self, a: u32, b: u32) -> bool {
        match (self.of(a), self.of(b)) {
            (None, None) => false,
            (Some(x), Some(y)) => !Arc::ptr_eq(&x.left, &y.left),
            _ => true,
        }
    }

    /// Whether either handle is under a single-file grant's private
    /// directory ([`GrantHandles::single_file`]), where a rename or a link
    /// would make or move an entry beside the granted file.
    pub fn touches_a_single_file(&self, a: u32, b: u32) -> bool {
        self.single_file(a).is_some() || self.single_file(b).is_some()
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
        let mut g = GrantHandles::new(vec![
            Preopen::new("/data", Some(Quota::named(10, "/data")), "d", "/data"),
            Preopen::new("/other", None, "o", "/other"),
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

    #[test]
    fn each_grant_is_used_first_once_per_kind_whatever_the_handle() {
        let mut g = GrantHandles::new(vec![
            Preopen::new("/data", None, "/srv/data", "/data"),
            Preopen::new("/etc", None, "/srv/etc", "/etc/app.toml"),
        ]);
        g.preopened(0, 3, "/data");
        g.preopened(1, 4, "/etc");
        g.opened(3, 7);
        let first = |g: &mut GrantHandles, rep, write| {
            g.first_use(rep, write)
                .map(|p| (p.host.clone(), p.guest.clone()))
        };
        assert_eq!(
            first(&mut g, 7, false),
            Some(("/srv/data".into(), "/data".into())),
            "a descriptor opened under a grant names the grant"
        );
        assert_eq!(first(&mut g, 3, false), None, "the same grant, read again");
        assert!(first(&mut g, 3, true).is_some(), "its first write");
        assert_eq!(first(&mut g, 7, true), None);
        // A write first counts as the read too.
        assert!(first(&mut g, 4, true).is_some());
        assert_eq!(first(&mut g, 4, false), None);
        assert_eq!(first(&mut g, 99, false), None, "a handle under no grant");
    }

    #[test]
    fn moves_are_cross_grant_only_when_a_metered_grant_is_on_one_side() {
        let mut g = GrantHandles::new(vec![
            Preopen::new("/q", Some(Quota::named(10, "/q")), "q", "/q"),
            Preopen::new("/r", Some(Quota::named(10, "/r")), "r", "/r"),
            Preopen::new("/free", None, "f", "/free"),
            Preopen::new("/free2", None, "f2", "/free2"),
        ]);
        g.preopened(0, 1, "/q");
        g.preopened(1, 2, "/r");
        g.preopened(2, 3, "/free");
        g.preopened(3, 4, "/free2");
        g.opened(1, 5); // a directory inside /q
        assert!(!g.crosses_a_metered_grant(1, 5), "within one grant");
        assert!(!g.crosses_a_metered_grant(3, 4), "no quota on either side");
        assert!(g.crosses_a_metered_grant(3, 1), "into a metered grant");
        assert!(g.crosses_a_metered_grant(5, 3), "out of one");
        assert!(
            g.crosses_a_metered_grant(1, 2),
            "between two metered grants"
        );
    }

    #[test]
    fn a_failed_operation_gives_its_charge_back() {
        let tick = Quota::new(2 * ENTRY_COST);
        let grant = Quota::named(ENTRY_COST, "/q");
        let both = [tick.clone(), grant.clone()];
        assert!(take_all(&both, ENTRY_COST).is_ok());
        give_back_all(&both, ENTRY_COST);
        assert!(
            take_all(&both, ENTRY_COST).is_ok(),
            "charged again after the refund"
        );
        assert!(
            take_all(&both, ENTRY_COST).is_err(),
            "the grant's one entry is spent"
        );
        assert!(
            tick.take(ENTRY_COST),
            "the refused take left the Tick's share"
        );
    }
}
