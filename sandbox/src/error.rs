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
    Grant(String),
    /// The engine could not be built.
    #[error("cannot start wasmtime: {0}")]
    Engine(String),
    /// The file is larger than `--max-wasm-size`.
    #[error("cannot load {path}: it is larger than --max-wasm-size ({max} bytes)")]
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
