//! `tickbox compile TICK…`: optimized code into the compile cache ahead of
//! the first start (CI images, installers).
//!
//! Each wasm Tick goes through the checks and bounds of a start (size,
//! declared memories and tables, imports, the compile worker's timeout and
//! memory) and is compiled with Cranelift into the cache, where a later
//! start loads it in milliseconds; its baseline (Winch) entry, if any, goes.
//! A Tick whose optimized code is already there is not compiled again.

use super::exit::{self, Exit};
use super::open::{self, BoundOpts};
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use tickbox_runtime::backend::native::Hygiene;
use tickbox_runtime::backend::wasm::compile::Bounds;
use tickbox_runtime::backend::wasm::grants::GrantSpec;

/// The exit codes.
pub const HELP: &str = "\
Exit codes:
  0    every Tick's optimized code is in the cache (stdout: one JSON document)
  2    usage error (a bad bound)
  3    a Tick could not be read or compiled, or the cache is off or refused
       (stderr names the first that failed; the others were still compiled)";

#[derive(Args)]
pub struct CompileArgs {
    /// The .wasm Ticks to compile
    #[arg(value_name = "TICK", required = true)]
    pub ticks: Vec<PathBuf>,
    #[command(flatten)]
    pub bounds: BoundOpts,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
}

pub fn run(args: CompileArgs, native: Hygiene) -> Result<(), Exit> {
    let grants = GrantSpec {
        max_wasm_size: args.bounds.max_wasm_size.clone(),
        compile_timeout: args.bounds.compile_timeout.clone(),
        compile_memory: args.bounds.compile_memory.clone(),
        ..GrantSpec::default()
    }
    .resolve()
    .map_err(|e| Exit::usage(super::open::grant_error_line(&e)))?;
    let bounds = Bounds {
        timeout: grants.limits.compile_timeout,
        memory: grants.limits.compile_memory,
    };
    let engine = open::hosting_app(native).engine(false)?;
    if engine.cache().is_none() {
        return Err(Exit::session(
            "the compile cache is off: nothing to compile into (set TICKBOX_CACHE_DIR or HOME)",
        ));
    }
    let mut results = Vec::new();
    let mut first_error = None;
    for path in &args.ticks {
        let done = tickbox_runtime::backend::wasm::read_wasm(path, grants.limits.max_wasm_size)
            .map_err(|e| e.to_string())
            .and_then(|wasm| {
                engine
                    .precompile(path, &wasm, bounds)
                    .map_err(|e| e.to_string())
            });
        match done {
            Ok(p) => results.push(json!({
                "path": path,
                "kind": p.kind,
                "compiler": p.compiler,
                "key": p.key,
                "cached": p.cached,
            })),
            Err(e) => {
                results.push(json!({"path": path, "error": e}));
                first_error.get_or_insert(e);
            }
        }
    }
    let v = json!({"dir": engine.cache().map(|c| c.dir()), "ticks": results});
    super::emit(&v, args.pretty)?;
    match first_error {
        None => Ok(()),
        Some(e) => Err(Exit::new(exit::SESSION, e)),
    }
}
