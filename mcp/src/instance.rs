//! The running instances behind a hosted Tick: the one every client
//! shares (the default), or one per client (`instances = "per-client"`).
//!
//! A per-client Tick is given as a [`PerClient`]: a [`Launcher`] that
//! starts one more instance of the very Tick the host started (the same
//! file or reference and the same grants), with its bounds. The instance the
//! host started at its own start is the Tick's **template**: it answers
//! `tools/list` and `resources/list` for a client that has not used the
//! Tick yet (an instance of the same digest with the same grants has the
//! same catalog), and no client's call or read ever reaches it (with
//! `start = "on-first-use"` and a cached catalog no template runs at all:
//! the catalog lists the Tick, [`crate::catalogs`]). A client's
//! first use of the Tick (a call, a read, a subscription) starts its own
//! instance; from then on its listings, calls, reads and notifications
//! are that instance's. Only the template's catalog is polled: should a
//! client's own instance change its catalog, the client hears of it from
//! the call that is refused for it (`catalog_changed`), and its next
//! `tools/list` lists the instance's.
//!
//! Who a client is: an MCP session (`Mcp-Session-Id`, 2025-06-18 and
//! 2025-11-25), the stdio connection, or a named client whose bearer token
//! named it (2026-07-28, which has no sessions). Each is an `Owner` with
//! one slot per hosted Tick; a session's owner ends with the session
//! (`DELETE`, expiry, the end of stdin) and takes its instances with it,
//! a named client's lives as long as the host and loses its instances to
//! the idle timeout only.
//!
//! The bounds ([`crate::limits`]): at most `max_instances` instances of one
//! Tick and [`MAX_INSTANCES`](crate::limits::MAX_INSTANCES) per-client
//! instances in all, counted by a `Book`; past either, the first use is
//! refused at once with an error naming the bound (`InstanceError::AtCap`), never
//! queued. An instance with no request for `idle_timeout` is stopped
//! (`Instance::reaper`); its state is lost, and the client's next use
//! starts a new instance from the Tick's initial state.
//!
//! Each instance is a Tick session of its own: its audit events carry its
//! own session id, its `start` names the client it was started for, and
//! its calls name the MCP session or the client they came from, so what an
//! instance costs is charged to it and to whom.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tickbox_host::session::{Session, SessionConfig};
use tickbox_host::util::lock;
use tickbox_protocol::limits::MAX_IN_FLIGHT;
use tickbox_sandbox::Launcher;
use tokio::sync::{watch, Semaphore};
use tokio::task::AbortHandle;

/// The named client a request's bearer token named (put in the
/// request's extensions by the HTTP server, after the token check).
#[derive(Debug, Clone)]
pub(crate) struct ClientName(pub(crate) Arc<str>);

/// How a per-client Tick starts an instance, and its bounds.
#[derive(Clone)]
pub struct PerClient {
    /// Starts one more instance of the Tick: the template's launcher (a
    /// registry reference stays pinned to the digest verified at the
    /// host's start; a file is read again, and a catalog changed with it
    /// is the client's to list).
    pub launcher: Launcher,
    /// The session timeouts of each instance.
    pub config: SessionConfig,
    /// Instances of this Tick at once (at most
    /// [`MAX_INSTANCES_PER_TICK`](crate::limits::MAX_INSTANCES_PER_TICK)).
    pub max_instances: usize,
    /// An instance with no request this long is stopped
    /// ([`INSTANCE_IDLE_TIMEOUT`](crate::limits::INSTANCE_IDLE_TIMEOUT) by default).
    pub idle_timeout: Duration,
}

impl PerClient {
    /// One instance per client, started by `launcher`, with the default
    /// bounds.
    pub fn new(launcher: Launcher, config: SessionConfig) -> PerClient {
        PerClient {
            launcher,
            config,
            max_instances: crate::limits::MAX_INSTANCES_PER_TICK,
            idle_timeout: crate::limits::INSTANCE_IDLE_TIMEOUT,
        }
    }

    /// With the bounds a ticks file's entry gave, where it gave them (the
    /// config checked that they only lower the defaults).
    pub fn bounded(mut self, max_instances: Option<usize>, idle_timeout: Option<Duration>) -> Self {
        self.max_instances = max_instances.unwrap_or(self.max_instances);
        self.idle_timeout = idle_timeout.unwrap_or(self.idle_timeout);
        self
    }
}

/// One running instance of a hosted Tick and what the facade keeps about it.
pub(crate) struct Instance {
    pub(crate) session: Arc<Session>,
    /// When the facade received the state of this seq (for states without `at`).
    pub(crate) received: Arc<Mutex<(u64, String)>>,
    /// Turns at the Tick for this facade's calls (as many as the Tick
    /// takes at once); a call waiting here can still be cancelled.
    pub(crate) turns: Arc<Semaphore>,
    /// Requests using it now, and when the last one began or ended.
    uses: Mutex<(usize, Instant)>,
    /// Its place in the [`Book`] (none for a shared instance or a
    /// template), given back when it is stopped or dropped.
    charge: Mutex<Option<Charge>>,
    /// Its own tasks (the state clock, the idle reaper), stopped with it.
    tasks: Mutex<Vec<AbortHandle>>,
}

pub(crate) fn now_rfc3339() -> String {
    tickbox_host::util::rfc3339_millis(std::time::SystemTime::now())
}

impl Instance {
    /// An instance of an initialized session; `charge` when it counts
    /// against the caps.
    pub(crate) fn new(session: Arc<Session>, charge: Option<Charge>) -> Arc<Instance> {
        let seq = session.state().state.map_or(0, |s| s.seq);
        let received = Arc::new(Mutex::new((seq, now_rfc3339())));
        let clock = tokio::spawn(stamp_states(session.watch_state(), received.clone()));
        Arc::new(Instance {
            session,
            received,
            turns: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            uses: Mutex::new((0, Instant::now())),
            charge: Mutex::new(charge),
            tasks: Mutex::new(vec![clock.abort_handle()]),
        })
    }

    /// Gives its place under the caps back: it is being stopped, and a
    /// client waiting for a place must not wait for the stop to finish.
    pub(crate) fn release(&self) {
        lock(&self.charge).take();
    }

    /// Marks a request using this instance until the guard is dropped:
    /// an instance in use is never idle.
    pub(crate) fn begin_use(self: &Arc<Instance>) -> InUse {
        let mut u = lock(&self.uses);
        u.0 += 1;
        u.1 = Instant::now();
        InUse(self.clone())
    }

    /// How long it has had no request (zero while one runs).
    fn idle_for(&self) -> Duration {
        let u = lock(&self.uses);
        if u.0 > 0 {
            Duration::ZERO
        } else {
            u.1.elapsed()
        }
    }

    /// Stops the instance after `idle` without a request, and empties
    /// `slot` (if it still holds this instance) so the next use starts
    /// another. Holds the instance only weakly: a client that ends drops
    /// it without waiting for this.
    pub(crate) fn reaper(self: &Arc<Instance>, slot: Weak<Slot>, idle: Duration) {
        let me = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            loop {
                let left = match me.upgrade() {
                    Some(i) if i.session.end_reason().is_some() => return,
                    Some(i) => idle.saturating_sub(i.idle_for()),
                    None => return,
                };
                if left.is_zero() {
                    break;
                }
                tokio::time::sleep(left).await;
            }
            let Some(instance) = me.upgrade() else {
                return;
            };
            if let Some(slot) = slot.upgrade() {
                slot.current.send_if_modified(|c| {
                    let ours = c.as_ref().is_some_and(|i| Arc::ptr_eq(i, &instance));
                    if ours {
                        *c = None;
                    }
                    ours
                });
            }
            tracing::info!(
                "stopping an instance idle for {}s (idle_timeout)",
                idle.as_secs_f32()
            );
            instance.release();
            instance.session.shutdown().await;
        });
        lock(&self.tasks).push(task.abort_handle());
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

/// A request's use of an instance ([`Instance::begin_use`]).
pub(crate) struct InUse(Arc<Instance>);

impl InUse {
    /// The instance in use.
    pub(crate) fn instance(&self) -> &Arc<Instance> {
        &self.0
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut u = lock(&self.0.uses);
        u.0 -= 1;
        u.1 = Instant::now();
    }
}

/// Records when each new state arrived, for states that carry no `at`.
async fn stamp_states(
    mut state: watch::Receiver<tickbox_host::session::StateSnapshot>,
    received: Arc<Mutex<(u64, String)>>,
) {
    while state.changed().await.is_ok() {
        let seq = state.borrow_and_update().state.as_ref().map(|s| s.seq);
        if let Some(seq) = seq {
            let mut r = lock(&received);
            if r.0 != seq {
                *r = (seq, now_rfc3339());
            }
        }
    }
}

/// Why a client's first use of a per-client Tick got no instance.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InstanceError {
    /// A cap was reached; nothing was started.
    #[error(
        "at the instance cap: {count} instances {of} are running, the most allowed \
         ({bound} = {limit}); nothing was started: try again when another client has ended \
         or an idle instance was stopped (idle_timeout)"
    )]
    AtCap {
        /// What is counted: `of the Tick `NAME`` or `in this host`.
        of: String,
        /// The bound's name, as the ticks file's key.
        bound: &'static str,
        count: usize,
        limit: usize,
    },
    /// The instance could not start or initialize.
    #[error("the Tick `{tick}` could not start an instance for this client: {reason}")]
    Start { tick: String, reason: String },
    /// A Tick started on first use could not start.
    #[error("the Tick `{tick}` (start = \"on-first-use\") could not start: {reason}")]
    FirstUse { tick: String, reason: String },
}

/// The per-client instances running, per Tick and in all, against their caps.
pub(crate) struct Book {
    counts: Mutex<(usize, Vec<usize>)>,
    /// The host's cap ([`crate::limits::MAX_INSTANCES`] or lower).
    limit: usize,
}

/// One instance's place in the [`Book`], given back when dropped.
pub(crate) struct Charge {
    book: Arc<Book>,
    tick: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut c = lock(&self.book.counts);
        c.0 -= 1;
        c.1[self.tick] -= 1;
    }
}

impl Book {
    pub(crate) fn new(ticks: usize, limit: usize) -> Arc<Book> {
        Arc::new(Book {
            counts: Mutex::new((0, vec![0; ticks])),
            limit,
        })
    }

    /// A place for one more instance of the Tick at `tick` (named `name`,
    /// at most `per_tick` of it), or the cap that is reached.
    pub(crate) fn charge(
        self: &Arc<Book>,
        tick: usize,
        name: &str,
        per_tick: usize,
    ) -> Result<Charge, InstanceError> {
        let mut c = lock(&self.counts);
        if c.1[tick] >= per_tick {
            return Err(InstanceError::AtCap {
                of: format!("of the Tick `{name}`"),
                bound: "max_instances",
                count: c.1[tick],
                limit: per_tick,
            });
        }
        if c.0 >= self.limit {
            return Err(InstanceError::AtCap {
                of: "in this host".into(),
                bound: "max_instances (the host's, at the top of the ticks file)",
                count: c.0,
                limit: self.limit,
            });
        }
        c.0 += 1;
        c.1[tick] += 1;
        Ok(Charge {
            book: self.clone(),
            tick,
        })
    }

    /// Per-client instances running now, in all.
    pub(crate) fn running(&self) -> usize {
        lock(&self.counts).0
    }

    /// Why a new client's first use of a per-client Tick would be refused
    /// now: the host's cap, or the cap of the Tick at an index of
    /// `per_tick` (its `max_instances`; None for a shared Tick), reached.
    /// Names no Tick: `/readyz` answers without the token.
    pub(crate) fn full(&self, per_tick: &[Option<usize>]) -> Option<String> {
        let c = lock(&self.counts);
        if per_tick.iter().all(Option::is_none) {
            return None;
        }
        if c.0 >= self.limit {
            return Some(format!(
                "{} per-client instances run in this host, its max_instances",
                c.0
            ));
        }
        per_tick.iter().zip(&c.1).find_map(|(cap, &n)| {
            cap.is_some_and(|cap| n >= cap)
                .then(|| format!("a Tick runs {n} per-client instances, its max_instances"))
        })
    }
}

/// One client's place for its instance of one Tick, or the place of a
/// shared Tick started on first use.
pub(crate) struct Slot {
    /// The instance, once started (none again after an idle stop).
    pub(crate) current: watch::Sender<Option<Arc<Instance>>>,
    /// Held while an instance starts, so two first uses at once start one.
    starting: tokio::sync::Mutex<()>,
}

impl Slot {
    /// An empty place.
    pub(crate) fn new() -> Arc<Slot> {
        Arc::new(Slot {
            current: watch::channel(None).0,
            starting: tokio::sync::Mutex::new(()),
        })
    }

    /// The instance here, if one was started (and not idle-stopped).
    pub(crate) fn current(&self) -> Option<Arc<Instance>> {
        self.current.borrow().clone()
    }

    /// The instance here, in use; started by `start` when there is none
    /// (one start for any number of first uses at once), then stopped when
    /// idle for `idle`, and kept in `started` so the host's stop waits for it.
    pub(crate) async fn get_or_start<F>(
        self: &Arc<Slot>,
        idle: Duration,
        started: &Mutex<Vec<Weak<Instance>>>,
        start: F,
    ) -> Result<InUse, InstanceError>
    where
        F: std::future::Future<Output = Result<Arc<Instance>, InstanceError>>,
    {
        if let Some(i) = self.current() {
            return Ok(i.begin_use());
        }
        let _starting = self.starting.lock().await;
        if let Some(i) = self.current() {
            return Ok(i.begin_use());
        }
        let instance = start.await?;
        instance.reaper(Arc::downgrade(self), idle);
        {
            let mut all = lock(started);
            all.retain(|i| i.strong_count() > 0);
            all.push(Arc::downgrade(&instance));
        }
        let used = instance.begin_use();
        self.current.send_replace(Some(instance));
        Ok(used)
    }
}

/// A client: its slots, one per hosted Tick (only per-client Ticks use theirs).
pub(crate) struct Owner {
    /// How logs name it: an MCP session, `stdio`, or `client NAME`.
    pub(crate) who: String,
    pub(crate) slots: Vec<Arc<Slot>>,
}

impl Owner {
    pub(crate) fn new(who: String, ticks: usize) -> Arc<Owner> {
        let slots = (0..ticks).map(|_| Slot::new()).collect();
        Arc::new(Owner { who, slots })
    }

    /// This client's instance of the Tick at `tick`, if it has one.
    pub(crate) fn current(&self, tick: usize) -> Option<Arc<Instance>> {
        self.slots[tick].current()
    }

    /// This client's instance of the Tick at `tick`, started now if it has
    /// none: charged in `book`, stopped when idle for the spec's time; its
    /// audit `start` names `client`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn instance(
        &self,
        tick: usize,
        name: &str,
        client: &str,
        spec: &PerClient,
        book: &Arc<Book>,
        started: &Mutex<Vec<Weak<Instance>>>,
    ) -> Result<InUse, InstanceError> {
        let start = async {
            let charge = book.charge(tick, name, spec.max_instances)?;
            let session = spec
                .launcher
                .for_client(client)
                .open(spec.config.clone())
                .await
                .map_err(|e| InstanceError::Start {
                    tick: name.into(),
                    // The reason may quote the Tick (its catalog, its last
                    // words), and the client reads it as the error's message.
                    reason: crate::text::description(&e.to_string()),
                })?;
            // The audit session id links the instance's own lines to its client.
            tracing::info!(
                tick = name,
                client = %self.who,
                audit_session = session.audit().and_then(|a| a.session()).unwrap_or("-"),
                "started a per-client instance"
            );
            Ok(Instance::new(Arc::new(session), Some(charge)))
        };
        self.slots[tick]
            .get_or_start(spec.idle_timeout, started, start)
            .await
    }

    /// Takes every instance from this client's slots (its session ended),
    /// their places under the caps given back; the caller stops them.
    pub(crate) fn take_all(&self) -> Vec<Arc<Instance>> {
        let taken: Vec<_> = self
            .slots
            .iter()
            .filter_map(|slot| slot.current.send_replace(None))
            .collect();
        for instance in &taken {
            tracing::info!(client = %self.who, "stopping a per-client instance: its client ended");
            instance.release();
        }
        taken
    }

    /// Stops every instance of this client in the background.
    pub(crate) fn stop_all(&self) {
        for instance in self.take_all() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move { instance.session.shutdown().await });
                }
                // No runtime left: dropping the session stops it.
                Err(_) => drop(instance),
            }
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.stop_all();
    }
}
