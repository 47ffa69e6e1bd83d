//! Starting a Tick by what it is: a [`Launcher`] holds everything needed to
//! start fresh instances of one Tick (a native command line, or a wasm file
//! with its engine and grants), as often as needed.
//!
//! The CLI resolves its `TICK` argument and sandbox flags into one launcher
//! and every command starts its Tick through it: one-shot commands once,
//! `tickbox check` once per checker session (`tickbox-conformance`'s `check::Launch`),
//! `tickbox test` once per scenario (with a virtual clock). A library user
//! does the same:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_host::SessionConfig;
//! use tickbox_sandbox::{Grants, Launcher, WasmEngine};
//! let engine = WasmEngine::new(None)?; // no compile cache
//! // Nothing granted: no files, no network, no environment.
//! let launcher = Launcher::wasm(engine, "counter.wasm".into(), Grants::default())?;
//! let session = launcher.open(SessionConfig::default()).await?;
//! session.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! A start can take [`LaunchOptions`] beyond the launcher's grants: a
//! virtual clock, and `wasi:http` fixtures that answer the guest's requests
//! in place of the network ([`crate::http::HttpFixtures`]; `tickbox test`'s
//! `[[http]]`).
//!
//! Errors are [`LaunchError`]s: why the Tick could not be started (or, from
//! [`Launcher::open`], initialized), each naming the Tick's file or program.

use crate::grants::Grants;
// Its own module (spawn takes it, the launcher hands it on), re-exported
// here where it is documented.
pub use crate::launch_options::LaunchOptions;
use crate::virtual_time::VirtualClock;
use crate::{WasmEngine, WasmError, WasmKind, WasmSpec};
use std::path::PathBuf;
use std::sync::Arc;
use tickbox_host::backend::native::{self, NativeSpec, SpawnError};
use tickbox_host::backend::{BoxFuture, TickIo};
use tickbox_host::session::{InitError, Session, SessionConfig};

/// Why a Tick could not be started or initialized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The native Tick's program could not be started.
    #[error(transparent)]
    Native(#[from] SpawnError),
    /// The wasm Tick could not be loaded, compiled or instantiated.
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// The file named as a wasm Tick has no wasm header.
    #[error("cannot start the Tick: {} is not a readable wasm component or module", path.display())]
    NotWasm {
        /// The file.
        path: PathBuf,
    },
    /// The file named as a wasm Tick cannot be opened or read; when the
    /// process is out of file descriptors, the message names that bound.
    #[error("cannot start the Tick: cannot read {}: {}", path.display(), unreadable(source))]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The Tick started but failed initialization (§4.2); the error
    /// carries its last words.
    #[error(transparent)]
    Init(Box<InitError>),
}

/// Why a file could not be read, naming the open-file bound when the
/// process has reached it: a host of thousands of Ticks holds a few
/// descriptors for each (a published Tick's socket and name lock), and
/// "Too many open files" alone does not say which bound or how to raise it.
fn unreadable(e: &std::io::Error) -> String {
    if e.raw_os_error() != Some(libc::EMFILE) {
        return e.to_string();
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into a valid struct.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    match read {
        true => format!(
            "{e}: this process may hold {} open files (RLIMIT_NOFILE, hard limit {}); raise it (ulimit -n) or host fewer Ticks in one process",
            limit.rlim_cur, limit.rlim_max
        ),
        false => e.to_string(),
    }
}

/// A Tick ready to be started, as often as needed.
#[derive(Clone)]
pub enum Launcher {
    /// A native command line, run with the user's own permissions.
    Native(NativeSpec),
    /// A wasm guest, sandboxed, and the engine that runs it.
    Wasm {
        /// The engine (and compile cache) its instances share.
        engine: Arc<WasmEngine>,
        /// The file, its args and its grants.
        spec: WasmSpec,
        /// Component or core module, from the file's header.
        kind: WasmKind,
    },
}

impl Launcher {
    /// A native Tick.
    pub fn native(spec: NativeSpec) -> Launcher {
        Launcher::Native(spec)
    }

    /// A wasm Tick with these grants. Reads only the file's header; the whole file is read when an instance starts.
    pub fn wasm(
        engine: Arc<WasmEngine>,
        path: PathBuf,
        grants: Grants,
    ) -> Result<Launcher, LaunchError> {
        let kind = match crate::read_kind(&path) {
            Ok(Some(kind)) => kind,
            Ok(None) => return Err(LaunchError::NotWasm { path }),
            Err(source) => return Err(LaunchError::Unreadable { path, source }),
        };
        Ok(Launcher::Wasm {
            engine,
            spec: WasmSpec {
                path,
                args: Vec::new(),
                grants,
                instance_id: None,
                exit_grace: crate::EXIT_GRACE,
                pin: None,
                audit: None,
            },
            kind,
        })
    }

    /// Pins a wasm Tick to its content: every instance refuses to start
    /// unless the bytes it loads have `digest` ([`crate::digest`]). No
    /// effect on a native Tick, whose bytes tickbox does not load.
    pub fn pinned(mut self, digest: crate::WasmDigest) -> Launcher {
        if let Launcher::Wasm { spec, .. } = &mut self {
            spec.pin = Some(digest);
        }
        self
    }

    /// Records every instance this launcher starts in `audit`: each gets
    /// its own audit session with a `start` (a wasm Tick's with its
    /// digest), its denials and limits, its calls and its `end`.
    pub fn audited(mut self, audit: Option<tickbox_telemetry::audit::Audit>) -> Launcher {
        match &mut self {
            Launcher::Native(spec) => spec.audit = audit,
            Launcher::Wasm { spec, .. } => spec.audit = audit,
        }
        self
    }

    /// This launcher for the instances of one client (a per-client Tick's):
    /// each instance's audit `start` names `client`.
    pub fn for_client(&self, client: &str) -> Launcher {
        let mut launcher = self.clone();
        match &mut launcher {
            Launcher::Native(spec) => {
                spec.audit = spec.audit.as_ref().map(|a| a.for_client(client))
            }
            Launcher::Wasm { spec, .. } => {
                spec.audit = spec.audit.as_ref().map(|a| a.for_client(client))
            }
        }
        launcher
    }

    /// How the Tick this launcher starts runs.
    pub fn kind(&self) -> tickbox_host::TickKind {
        match self {
            Launcher::Native(_) => tickbox_host::TickKind::Native,
            Launcher::Wasm { kind, .. } => (*kind).into(),
        }
    }

    /// Starts one instance.
    pub async fn spawn(&self) -> Result<TickIo, LaunchError> {
        self.spawn_with(None).await
    }

    /// Starts one instance; a wasm Tick's clocks and randomness are
    /// `clock`'s when given (a native Tick has no virtual time and ignores it).
    pub async fn spawn_with(&self, clock: Option<&VirtualClock>) -> Result<TickIo, LaunchError> {
        self.start(&LaunchOptions::clock(clock.cloned())).await
    }

    /// Starts one instance with these options (see [`LaunchOptions`]).
    pub async fn start(&self, opts: &LaunchOptions) -> Result<TickIo, LaunchError> {
        match self {
            Launcher::Native(_) if opts.http_fixtures.is_some() => {
                Err(LaunchError::Wasm(WasmError::Grant(
                    crate::GrantRefused::NeedsComponent {
                        grant: "HTTP fixtures",
                        why: "a native Tick is not sandboxed: its requests cannot be answered in place of the network",
                    },
                )))
            }
            Launcher::Native(spec) => spawn_native(spec),
            Launcher::Wasm { engine, spec, .. } => {
                Ok(crate::spawn_with_options(engine, spec, opts).await?)
            }
        }
    }

    /// Starts one instance and initializes it (§4.2).
    pub async fn open(&self, config: SessionConfig) -> Result<Session, LaunchError> {
        let io = self.spawn().await?;
        Session::start(io, config)
            .await
            .map_err(|e| LaunchError::Init(Box::new(e)))
    }
}

/// Starts a native Tick, recorded in its spec's audit stream when it has
/// one (the sandbox records a wasm Tick's start itself, where it has the
/// bytes to hash).
fn spawn_native(spec: &NativeSpec) -> Result<TickIo, LaunchError> {
    let Some(root) = &spec.audit else {
        return Ok(native::spawn(spec)?);
    };
    let audit = root.for_session();
    // What a native Tick is given: the user's permissions, and these
    // variables (names only: values may be secrets).
    let env: Vec<&str> = spec.env.iter().map(|(k, _)| k.as_str()).collect();
    let grants = serde_json::json!({"sandboxed": false, "env": env, "cwd": spec.cwd});
    audit.start(&spec.argv.join(" "), "native", None, grants);
    match native::spawn(spec) {
        Ok(mut io) => {
            io.process = Box::new(tickbox_host::backend::Audited {
                inner: io.process,
                audit,
            });
            Ok(io)
        }
        Err(e) => {
            audit.end_failed(&e.to_string());
            Err(e.into())
        }
    }
}

/// Starts fresh instances of one Tick: the one way every part of tickbox
/// starts a Tick (a command once, `tickbox check` once per checker session,
/// `tickbox test` once per scenario with a virtual clock).
///
/// Any backend fits: a [`Launcher`] (native and wasm Ticks alike), or a
/// closure, e.g. over `tickbox_host::backend::memory::pair` for a Tick
/// that is a task of a test (a closure has no virtual time and ignores
/// the clock).
pub trait Launch: Send + Sync {
    /// Starts one instance with `opts` (a wasm Tick's clocks and
    /// randomness are its clock's when given; its `wasi:http` requests are
    /// answered by its fixtures when given). Says why it cannot be started
    /// otherwise.
    fn launch(&self, opts: LaunchOptions) -> BoxFuture<'_, Result<TickIo, LaunchError>>;
}

impl Launch for Launcher {
    fn launch(&self, opts: LaunchOptions) -> BoxFuture<'_, Result<TickIo, LaunchError>> {
        Box::pin(async move { self.start(&opts).await })
    }
}

impl<F, Fut> Launch for F
where
    F: Fn() -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<TickIo, LaunchError>> + Send + 'static,
{
    /// A closure has no virtual time and no `wasi:http`: it ignores the
    /// clock, and fixtures (which it could not honour) are refused.
    fn launch(&self, opts: LaunchOptions) -> BoxFuture<'_, Result<TickIo, LaunchError>> {
        if opts.http_fixtures.is_some() {
            return Box::pin(async {
                Err(LaunchError::Wasm(WasmError::Grant(
                    crate::GrantRefused::NeedsComponent {
                        grant: "HTTP fixtures",
                        why: "this Tick is not a wasm component",
                    },
                )))
            });
        }
        Box::pin(self())
    }
}

/// What a process that starts Ticks must do once, in order, as one value.
///
/// [`install`](ProcessHygiene::install) at start, before any Tick: the
/// process becomes a child subreaper (orphans of native Ticks come back to
/// it), kills what native Ticks of a SIGKILLed host left in their cgroups,
/// and raises its open-file limit. What it decided is a value,
/// [`native`](ProcessHygiene::native), handed to whatever starts Ticks
/// (every [`NativeSpec`]'s `hygiene`, and the reaper in every engine's
/// `EngineOptions`): a child started without it is not registered, and a
/// sweep would take it for an orphan. [`finish`](ProcessHygiene::finish)
/// on the way out, after every session ended: lets the workers of the
/// given engines' optimizing compiles be started (they outlive the
/// process), then kills and reaps whatever a native Tick left outside its
/// process group. Opt-in, because an embedder with children of its own
/// must not become a subreaper. Dropping it without `finish` does nothing
/// (a forked child or an early exit must not sweep).
#[must_use = "call finish() on the way out"]
#[derive(Debug)]
pub struct ProcessHygiene {
    native: native::Hygiene,
}

/// How long [`ProcessHygiene::finish`] waits for detached compile workers
/// to be started.
pub const SETTLE_DETACHED: std::time::Duration = std::time::Duration::from_secs(2);

impl ProcessHygiene {
    /// Makes this process fit to host Ticks, native ones getting cgroups as
    /// `cgroups` says; see the type's docs.
    pub fn install(cgroups: tickbox_host::backend::cgroup::Cgroups) -> ProcessHygiene {
        let reaper = tickbox_host::backend::reaper::become_subreaper();
        tickbox_host::backend::cgroup::sweep_stale();
        let nofile = native::raise_fd_limit();
        ProcessHygiene {
            native: native::Hygiene {
                reaper: Some(reaper),
                cgroups,
                nofile,
            },
        }
    }

    /// What was decided, for every native Tick and engine of this process.
    pub fn native(&self) -> native::Hygiene {
        self.native.clone()
    }

    /// Cleans up on the way out, after the detached starts of `engines`;
    /// see the type's docs.
    pub fn finish(self, engines: &[Arc<WasmEngine>]) {
        let deadline = std::time::Instant::now() + SETTLE_DETACHED;
        for engine in engines {
            engine.settle_detached_starts(
                deadline.saturating_duration_since(std::time::Instant::now()),
            );
        }
        if let Some(reaper) = &self.native.reaper {
            reaper.sweep();
        }
    }
}
