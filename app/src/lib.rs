//! tickbox-app: the application layer, from a request to a running Tick.
//!
//! Everything between "start this Tick with these grants" and an
//! initialized session lives here, once, for every user: the `tickbox`
//! command line, `tickbox mcp`'s config, `tickbox test`'s scenarios and
//! programs that embed tickbox. It reads the grant policy file and the
//! Tick's manifest, pulls an `oci://` Tick and checks it against the
//! signers policy and the lock, decides consent (asking a person only
//! through the caller's [`Approver`]), and starts the Tick through the
//! sandbox's [`Launcher`](tickbox_sandbox::Launcher).
//!
//! Where to start: fill a [`Settings`] (the CLI does it from its
//! environment; a library reads none), make one [`App`] (it owns the
//! engines, the resolved references, the audit writers and where notices
//! go, so two Apps in one process share nothing), describe a start as a
//! [`Request`] and call [`App::open`] (or [`App::launcher`] to start
//! instances later). Errors are [`AppError`]s, one variant per rule; the
//! caller words them and chooses exit codes.
//!
//! Modules: [`open`] (request → launcher → session), [`registry`]
//! (`oci://` resolution under the signers policy and the lock, `policy
//! show`'s report), [`consent`] (the decision; the prompt is the
//! caller's [`Approver`]), [`grants`] (grant policy files and manifests),
//! [`policy`] (`policy suggest` from audit files), [`inspect`] (the
//! inspector's page server), [`live`] (live instances' errors).
//! `examples/embed` is a whole embedding program.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_app::{App, Request, Settings, Target};
//! let app = App::new(Settings {
//!     store_dir: Some("/tmp/tickbox-store".into()),
//!     ..Settings::default()
//! });
//! let mut request = Request::new(Target::Oci("oci://localhost:5000/counter:1".into()));
//! request.registry.signers = Some(tickbox_app::source("signers.toml".into()));
//! request.registry.locked = true;
//! let tick = app.open(&request).await?; // refused unless signed as the policy says
//! let catalog = tick.session.descriptor().expect("initialized");
//! let call = catalog.prepare("increment", serde_json::json!({"amount": 2}))?;
//! if let tickbox_app::CallOutcome::Ok(result) = tick.session.call(&call).await {
//!     println!("{result}"); // stdout-ok: the example prints its result
//! }
//! tick.close().await;
//! # Ok(()) }
//! ```

mod audit;
pub mod consent;
mod error;
pub mod grants;
pub mod inspect;
pub mod live;
pub mod open;
pub mod otlp;
pub mod policy;
pub mod registry;
pub mod scaffold;
pub mod scenarios;
mod settings;
pub mod token;

pub use consent::{Answer, Approver, Asking, Decided, Subject, Unanswered};
pub use error::AppError;
pub use grants::AuditWish;
pub use open::{is_sandboxed, Backend, Opened, Request, Target};
pub use registry::RegistrySettings;
pub use settings::Settings;
/// The session an [`Opened`] Tick is driven through.
pub use tickbox_host::{CallOutcome, Session, SessionConfig};

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use tickbox_registry::policy::{Origin, Source};
use tickbox_registry::Pulled;
use tickbox_sandbox::WasmEngine;

/// Something worth telling the person while a Tick starts; the caller
/// words it and chooses where it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Notice {
    /// A large Tick compiles to native code (the first start is slow).
    Compiling {
        name: String,
        megabytes: f64,
        /// Whether the result is kept in the compile cache.
        cached: bool,
    },
    /// The compile cache cannot be used (why); Ticks run without it.
    CacheRefused(String),
    /// No signers policy is in force, so a pulled Tick runs whoever signed
    /// it (said once per App).
    NoSignersPolicy {
        reference: String,
        default_file: Option<PathBuf>,
    },
    /// No rule of the signers policy covers the Tick, and the policy says
    /// `no_match = "warn"`.
    NoRuleCovers { policy: String, name: String },
    /// The manifest asks for a directory the grants do not map.
    UnmappedDir { guest: String },
}

/// Where [`Notice`]s go.
pub trait Notices: Send + Sync {
    fn notice(&self, notice: &Notice);
}

/// Observers every audit stream of an [`App`] also gets (the CLI's
/// OpenTelemetry exporter), started the first time a stream is made.
pub trait Observers: Send + Sync {
    /// The observers, started now if they were not yet.
    fn observers(&self) -> Result<Vec<Arc<dyn tickbox_telemetry::audit::AuditObserver>>, AppError>;
    /// Gives them their bounded time to send what is left (on the way out).
    fn finish(&self) {}
}

/// Notices dropped (an embedding program that wants none).
pub struct Quiet;

impl Notices for Quiet {
    fn notice(&self, _: &Notice) {}
}

/// A signers policy or lock file named by the caller.
pub fn source(path: PathBuf) -> Source {
    Source {
        path,
        origin: Origin::Flag("the caller".into()),
    }
}

/// The application context: settings, and what one program shares
/// between its starts (the engines, the references it resolved).
pub struct App {
    settings: Settings,
    notices: Arc<dyn Notices>,
    /// The engine with the compile cache, made at the first wasm start.
    cached: OnceLock<Arc<WasmEngine>>,
    /// The engine without it (`no_cache`).
    uncached: OnceLock<Arc<WasmEngine>>,
    /// References resolved so far: every later start of one reference
    /// runs what was verified the first time.
    resolved: Mutex<HashMap<String, Pulled>>,
    said_no_policy: AtomicBool,
    /// Audit writers and extra sinks.
    audit: audit::AuditFiles,
    /// Observers of every audit stream, if the embedder has some.
    observers: Option<Arc<dyn Observers>>,
}

impl App {
    /// An App whose notices are dropped.
    pub fn new(settings: Settings) -> App {
        App::with_notices(settings, Arc::new(Quiet))
    }

    /// An App whose notices go to `notices`.
    pub fn with_notices(settings: Settings, notices: Arc<dyn Notices>) -> App {
        App {
            settings,
            notices,
            cached: OnceLock::new(),
            uncached: OnceLock::new(),
            resolved: Mutex::new(HashMap::new()),
            said_no_policy: AtomicBool::new(false),
            audit: audit::AuditFiles::default(),
            observers: None,
        }
    }

    /// This App, every audit stream of it also observed by `observers`.
    pub fn observed_by(mut self, observers: Arc<dyn Observers>) -> App {
        self.observers = Some(observers);
        self
    }

    /// The settings it was made with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Tells the person something (through the App's [`Notices`]).
    pub fn notice(&self, notice: &Notice) {
        self.notices.notice(notice);
    }

    /// The engines this App has made so far (what
    /// `tickbox_sandbox::ProcessHygiene::finish` settles).
    pub fn engines(&self) -> Vec<Arc<WasmEngine>> {
        [&self.cached, &self.uncached]
            .into_iter()
            .filter_map(|cell| cell.get().cloned())
            .collect()
    }

    /// The engine shared by every wasm Tick this App starts.
    pub fn engine(&self, no_cache: bool) -> Result<Arc<WasmEngine>, AppError> {
        let (cell, dir) = if no_cache {
            (&self.uncached, None)
        } else {
            (&self.cached, self.settings.cache_dir.clone())
        };
        if let Some(e) = cell.get() {
            return Ok(e.clone());
        }
        let s = &self.settings;
        let e = WasmEngine::with_options(tickbox_sandbox::EngineOptions {
            cache_dir: dir,
            cache_max_bytes: s.cache_max_bytes,
            // Compiling runs in a worker, under the Tick's compile bounds.
            worker: s.compile_worker.clone(),
            guest_yield: s.guest_yield,
            // No grant may reach the approvals wherever they are kept: a
            // Tick that could write them could approve itself.
            own_state: s.trust_dir.iter().cloned().collect(),
            reaper: s.native.reaper.clone(),
        })
        .map_err(AppError::session)?;
        // How Ticks without optimized code in the cache are compiled.
        if let Some(policy) = &s.compile_policy {
            e.set_compile_policy(policy.clone().map_err(AppError::Usage)?);
        }
        if let Some(why) = e.cache_refused() {
            self.notice(&Notice::CacheRefused(why.to_string()));
        }
        let cached = e.cache().is_some();
        // A large component (componentize-py/-js) compiles for tens of
        // seconds on its first start: say so rather than leave a blank screen.
        let notices = self.notices.clone();
        e.on_slow_compile(tickbox_sandbox::SLOW_COMPILE, move |path, size| {
            let name = path
                .file_name()
                .unwrap_or(path.as_os_str())
                .to_string_lossy()
                .into_owned();
            notices.notice(&Notice::Compiling {
                name,
                megabytes: size as f64 / 1_000_000.0,
                cached,
            });
        });
        Ok(cell.get_or_init(|| e).clone())
    }
}
