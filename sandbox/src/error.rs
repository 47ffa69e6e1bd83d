//! Why a wasm Tick could not be loaded, linked or started.

use super::*;

/// Why a wasm Tick could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WasmError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Neither a component nor a core module.
    #[error("{path} is not a wasm component or module (bad header)")]
    NotWasm { path: PathBuf },
    /// It imports something tickbox does not provide; found before
    /// compiling (see `imports.rs`).
    #[error("cannot load {path}: it imports `{import}`, which tickbox does not provide; {offer}")]
    Unsupported {
        path: PathBuf,
        import: String,
        offer: String,
    },
    /// It exports no entry point tickbox can call (`wasi:cli/run@0.2.x` for
    /// a component, `_start` for a module); found before compiling.
    #[error("cannot load {path}: it exports no `{entry}`; a Tick is a WASI command ({hint})")]
    NoEntry {
        path: PathBuf,
        entry: &'static str,
        hint: &'static str,
    },
    /// wasmtime refused to compile or link it.
    #[error("cannot load {path}: {why}")]
    Load { path: PathBuf, why: String },
    /// A grant could not be applied.
    #[error("cannot apply grants: {0}")]
    Grant(GrantRefused),
    /// wasmtime or the host's machinery around it failed at `stage`: not
    /// about this Tick's bytes or grants (those have variants of their
    /// own), so a caller tells them apart by the stage, never the text.
    #[error("cannot start wasmtime ({stage}): {why}")]
    Engine { stage: EngineStage, why: String },
    /// The bytes are not the ones pinned ([`crate::WasmSpec::pin`]).
    #[error(
        "refusing to start {path}: its content is {actual}, not the {expected} it was pinned to"
    )]
    NotPinned {
        path: PathBuf,
        expected: WasmDigest,
        actual: WasmDigest,
    },
    /// The file is larger than `max_wasm_size`.
    #[error("cannot load {path}: it is larger than max_wasm_size ({max} bytes)")]
    TooLarge { path: PathBuf, max: u64 },
    /// It defines more memories or tables than a Tick may have.
    #[error("cannot load {path}: {why}")]
    Declares { path: PathBuf, why: String },
    /// Compiling hit a bound or failed.
    #[error("cannot compile {path}: {source}")]
    Compile {
        path: PathBuf,
        source: compile::CompileError,
    },
}

/// Where [`WasmError::Engine`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineStage {
    /// Building an engine and its linkers (a compiler tier).
    Build,
    /// Starting the thread that paces guests' CPU slices.
    Pacer,
    /// The blocking task that reads or compiles a file did not finish
    /// (it panicked or the runtime shut down).
    Task,
    /// A compile that reported success left no code behind.
    NoCode,
}

impl std::fmt::Display for EngineStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineStage::Build => "building the engine",
            EngineStage::Pacer => "starting the CPU pacer",
            EngineStage::Task => "a blocking task",
            EngineStage::NoCode => "no code was produced",
        })
    }
}

/// Why a grant that parsed cannot be applied to this Tick.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrantRefused {
    /// A granted path cannot be used: missing, unreadable, or it could not
    /// be opened for the guest (or given its private grant area).
    #[error("{}: {why}", path.display())]
    Path {
        /// The path on the host, as granted.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A granted path overlaps tickbox's own state (cache, live-instance
    /// directory): refused whatever the grant says.
    #[error("{0}")]
    OwnState(String),
    /// A single-file grant's private directory could not be made.
    #[error("{0}")]
    Area(String),
    /// The `http_ca` cannot be read or used.
    #[error("{0}")]
    HttpCa(String),
    /// A grant a preview-1 module cannot honour: it needs a component.
    #[error("{grant} needs a component (wasm32-wasip2): {why}")]
    NeedsComponent {
        /// The grant, as the command line spells it.
        grant: &'static str,
        /// Why a module cannot have it.
        why: &'static str,
    },
}
