//! Ways to run a Tick, and the contract between a backend and the session.
//!
//! Each backend yields a [`TickIo`]: the Tick's stdin and stdout, its
//! [`View`], and a [`TickProcess`] handle the session supervises.
//!
//! - [`native`] — a subprocess whose controlling terminal is a real PTY;
//! - sandboxed wasm guests are the `tickbox-sandbox` crate's;
//! - [`memory`] — both ends in memory, for tests of the engine, the checker
//!   and the MCP facade where the process is not the point;
//! - [`reaper`] — what a native Tick left behind is killed when it ends.

pub mod cgroup;
pub mod memory;
pub mod native;
pub mod reaper;

use crate::view::View;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// How a Tick runs: the one name for it in every layer (the launcher says
/// it, the scenario runner decides what can be virtual by it, `ls` shows
/// its [`label`](TickKind::label)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TickKind {
    /// A subprocess on a real PTY, on real time, with the user's permissions.
    Native,
    /// A sandboxed WASI 0.2 component: virtual clocks, timers and randomness
    /// under `tickbox test`.
    WasmComponent,
    /// A sandboxed WASI preview-1 module: virtual clock readings and
    /// randomness; its sleeps wait real time.
    WasmModule,
}

impl TickKind {
    /// How `ls` and live-instance info name it: `native` or `wasm`.
    pub fn label(self) -> &'static str {
        match self {
            TickKind::Native => "native",
            TickKind::WasmComponent | TickKind::WasmModule => "wasm",
        }
    }

    /// Whether it runs in the sandbox.
    pub fn is_wasm(self) -> bool {
        self != TickKind::Native
    }
}

/// A boxed future, for the object-safe process trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The running Tick as a backend sees it.
pub trait TickProcess: Send {
    /// Resolves when the Tick has ended on its own, describing how
    /// ("exit status 0", "trapped: out of bounds memory access", …).
    fn exited(&mut self) -> BoxFuture<'_, String>;
    /// Terminates the Tick and everything it started. With `graceful`, its
    /// stdin is already closed and it gets a moment to exit by itself first.
    fn terminate(&mut self, graceful: bool) -> BoxFuture<'_, ()>;
    /// Sends SIGTERM to the Tick's process group and returns at once, for
    /// `tickbox check` to see whether the Tick exits by itself (§4.5).
    /// Returns false when the backend has no signals (the default).
    fn sigterm(&mut self) -> bool {
        false
    }
    /// The Tick's memory bound, when the backend has one (wasm): the host
    /// charges what it keeps for the Tick (its compiled schemas) to it.
    fn memory(&self) -> Option<Arc<MemoryCharge>> {
        None
    }
    /// The audit handle of this Tick's session, when its starter keeps
    /// an audit stream: the session records its calls and its end there.
    fn audit(&self) -> Option<tickbox_telemetry::audit::Audit> {
        None
    }
}

/// A process with an audit handle attached (what `Launcher::audited`
/// hands the session); everything else is the inner process's.
pub struct Audited {
    /// The process itself.
    pub inner: Box<dyn TickProcess>,
    /// Its session's audit handle.
    pub audit: tickbox_telemetry::audit::Audit,
}

impl TickProcess for Audited {
    fn exited(&mut self) -> BoxFuture<'_, String> {
        self.inner.exited()
    }
    fn terminate(&mut self, graceful: bool) -> BoxFuture<'_, ()> {
        self.inner.terminate(graceful)
    }
    fn sigterm(&mut self) -> bool {
        self.inner.sigterm()
    }
    fn memory(&self) -> Option<Arc<MemoryCharge>> {
        self.inner.memory()
    }
    fn audit(&self) -> Option<tickbox_telemetry::audit::Audit> {
        Some(self.audit.clone())
    }
}

/// One Tick's memory bound (the `max_memory` grant key), shared by its guest's memories
/// and tables (charged by the sandbox's limiter) and what the host keeps
/// on the Tick's behalf (charged by the session: its compiled schemas). A
/// Tick whose catalog costs the host memory has that much less to grow.
#[derive(Debug)]
pub struct MemoryCharge {
    max: usize,
    guest: AtomicUsize,
    host: AtomicUsize,
}

impl MemoryCharge {
    /// A bound of `max` bytes, nothing charged yet.
    pub fn new(max: u64) -> Arc<MemoryCharge> {
        Arc::new(MemoryCharge {
            max: usize::try_from(max).unwrap_or(usize::MAX),
            guest: AtomicUsize::new(0),
            host: AtomicUsize::new(0),
        })
    }

    /// The bound, in bytes.
    pub fn max(&self) -> usize {
        self.max
    }

    /// What the guest's memories and tables take now.
    pub fn guest(&self) -> usize {
        self.guest.load(Ordering::Relaxed)
    }

    /// What the host keeps for the Tick now.
    pub fn host(&self) -> usize {
        self.host.load(Ordering::Relaxed)
    }

    /// Sets what the host keeps for the Tick to `bytes`, if it fits beside
    /// what the guest takes; otherwise leaves the charge as it was and
    /// returns the bytes that were free.
    pub fn set_host(&self, bytes: usize) -> Result<(), usize> {
        let free = self.max.saturating_sub(self.guest());
        if bytes > free {
            return Err(free);
        }
        self.host.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Records the guest's total (the sandbox's limiter, after a growth).
    pub fn set_guest(&self, bytes: usize) {
        self.guest.store(bytes, Ordering::Relaxed);
    }
}

/// What a backend yields for a session to run.
pub struct TickIo {
    /// The Tick's standard input (host → Tick frames).
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    /// The Tick's standard output (Tick → host frames).
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    /// The Tick's view terminal.
    pub view: Arc<View>,
    /// The process (or guest) to supervise.
    pub process: Box<dyn TickProcess>,
}

// Where every instance id is made; its path here is the public one.
pub use crate::util::new_instance_id;
