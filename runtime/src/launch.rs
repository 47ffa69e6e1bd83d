//! Starting a Tick by what it is: a [`Launcher`] holds everything needed to
//! start fresh instances of one Tick (a native command line, or a wasm file
//! with its engine and grants), as often as needed.
//!
//! The CLI resolves its `TICK` argument and sandbox flags into one launcher
//! and every command starts its Tick through it: one-shot commands once,
//! `tickbox check` once per checker session ([`crate::check::Launch`]),
//! `tickbox test` once per scenario (with a virtual clock). A library user
//! does the same:
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tickbox_runtime::{Grants, Launcher, SessionConfig, WasmEngine};
//! let engine = WasmEngine::new(None)?; // no compile cache
//! // Nothing granted: no files, no network, no environment.
//! let launcher = Launcher::wasm(engine, "counter.wasm".into(), Grants::default())?;
//! let session = launcher.open(SessionConfig::default()).await?;
//! session.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Errors are [`LaunchError`]s: why the Tick could not be started (or, from
//! [`Launcher::open`], initialized), each naming the Tick's file or program.

use crate::backend::native::{self, NativeSpec, SpawnError};
#[cfg(feature = "wasm")]
use crate::backend::wasm::grants::{GrantError, GrantSpec, Grants};
#[cfg(feature = "wasm")]
use crate::backend::wasm::virtual_time::VirtualClock;
#[cfg(feature = "wasm")]
use crate::backend::wasm::{self, WasmEngine, WasmError, WasmKind, WasmSpec};
use crate::backend::{BoxFuture, TickIo};
use crate::session::{InitError, Session, SessionConfig};
#[cfg(feature = "wasm")]
use std::path::{Path, PathBuf};
#[cfg(feature = "wasm")]
use std::sync::Arc;

/// Why a Tick could not be started or initialized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The native Tick's program could not be started.
    #[error(transparent)]
    Native(#[from] SpawnError),
    /// The wasm Tick could not be loaded, compiled or instantiated.
    #[cfg(feature = "wasm")]
    #[error(transparent)]
    Wasm(#[from] WasmError),
    /// The file named as a wasm Tick has no wasm header (or cannot be read).
    #[cfg(feature = "wasm")]
    #[error("cannot start the Tick: {} is not a readable wasm component or module", path.display())]
    NotWasm {
        /// The file.
        path: PathBuf,
    },
    /// The Tick's capability manifest (`NAME.tick.toml`) is malformed.
    #[cfg(feature = "wasm")]
    #[error(transparent)]
    Manifest(GrantError),
    /// The Tick started but failed initialization (§4.2); the error
    /// carries its last words.
    #[error(transparent)]
    Init(Box<InitError>),
}

/// A Tick ready to be started, as often as needed.
#[derive(Clone)]
pub enum Launcher {
    /// A native command line, run with the user's own permissions.
    Native(NativeSpec),
    /// A wasm guest, sandboxed, and the engine that runs it.
    #[cfg(feature = "wasm")]
    Wasm {
        /// The engine (and compile cache) its instances share.
        engine: Arc<WasmEngine>,
        /// The file, its args and its grants.
        spec: WasmSpec,
        /// Component or core module, from the file's header.
        kind: WasmKind,
        /// The capabilities the Tick asks for in `NAME.tick.toml` beside
        /// its `.wasm`: shown to the user, never granted.
        requested: Option<Box<GrantSpec>>,
    },
}

impl Launcher {
    /// A native Tick.
    pub fn native(spec: NativeSpec) -> Launcher {
        Launcher::Native(spec)
    }

    /// A wasm Tick with these grants. Reads only the file's header (and
    /// its manifest, if any); the whole file is read when an instance starts.
    #[cfg(feature = "wasm")]
    pub fn wasm(
        engine: Arc<WasmEngine>,
        path: PathBuf,
        grants: Grants,
    ) -> Result<Launcher, LaunchError> {
        let kind =
            wasm::detect_file(&path).ok_or_else(|| LaunchError::NotWasm { path: path.clone() })?;
        let requested = manifest_of(&path)?.map(Box::new);
        Ok(Launcher::Wasm {
            engine,
            spec: WasmSpec {
                path,
                args: Vec::new(),
                grants,
                instance_id: None,
                exit_grace: wasm::EXIT_GRACE,
            },
            kind,
            requested,
        })
    }

    /// Starts one instance.
    pub async fn spawn(&self) -> Result<TickIo, LaunchError> {
        match self {
            Launcher::Native(spec) => Ok(native::spawn(spec)?),
            #[cfg(feature = "wasm")]
            Launcher::Wasm { engine, spec, .. } => Ok(wasm::spawn(engine, spec).await?),
        }
    }

    /// Starts one instance; a wasm Tick's clocks and randomness are
    /// `clock`'s when given (a native Tick has no virtual time and ignores it).
    #[cfg(feature = "wasm")]
    pub async fn spawn_with(&self, clock: Option<&VirtualClock>) -> Result<TickIo, LaunchError> {
        match self {
            Launcher::Native(spec) => Ok(native::spawn(spec)?),
            Launcher::Wasm { engine, spec, .. } => Ok(wasm::spawn_with(engine, spec, clock).await?),
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

impl crate::check::Launch for Launcher {
    fn launch(&self) -> BoxFuture<'_, Result<TickIo, LaunchError>> {
        Box::pin(self.spawn())
    }
}

/// The capabilities a Tick asks for, from `NAME.tick.toml` beside
/// `NAME.wasm` (`None` when there is none). Shown to the user, never granted.
#[cfg(feature = "wasm")]
pub fn manifest_of(path: &Path) -> Result<Option<GrantSpec>, LaunchError> {
    let manifest = path.with_extension("tick.toml");
    if !manifest.exists() {
        return Ok(None);
    }
    GrantSpec::from_file(&manifest)
        .map(Some)
        .map_err(LaunchError::Manifest)
}
