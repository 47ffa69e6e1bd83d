//! Ticks named `oci://…`: the registry flags, the one resolution every
//! command shares, and `tickbox pull` / `tickbox push`.
//!
//! A reference is resolved once per process (a tag to its manifest digest,
//! the layers into the store) and every later start in the same process
//! (an MCP restart, `tickbox test`'s fresh instances) reuses that digest,
//! so what was verified is what runs. The wasm starts pinned to its layer
//! digest ([`Launcher::pinned`](tickbox_runtime::Launcher::pinned)): the
//! sandbox checks the bytes it compiles against it.

use super::exit::Exit;
use clap::Args;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use tickbox_registry::{Pulled, Reference, Registry, RegistryConfig, RegistryError};

/// Exit codes of `pull` and `push`.
pub const HELP: &str = "\
References are oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:DIGEST.
Plain HTTP is used only for loopback registries and those named with
--insecure-registry; credentials come from $DOCKER_CONFIG/config.json, else
~/.docker/config.json (inline auth entries), anonymous otherwise. Pulled
Ticks are kept in $TICKBOX_STORE_DIR, else $XDG_CACHE_HOME/tickbox/oci, else
~/.cache/tickbox/oci; `tickbox cache ls|clean` shows and empties it.

Exit codes:
  0    success (stdout: one JSON document)
  2    usage error: a malformed reference, an unreadable file
  3    the registry or the store failed, or refused what it was sent
       (stderr names the rule; nothing unverified is stored)";

/// How to reach registries (every command that takes a Tick).
#[derive(Args, Clone, Default)]
pub struct RegistryOpts {
    /// Allow plain HTTP to this registry HOST or HOST:PORT (loopback registries need no flag; repeatable)
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registry: Vec<String>,
    /// Trust the CA certificates in this PEM file for registries, besides the webpki roots
    #[arg(long = "registry-ca", value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
}

impl RegistryOpts {
    fn config(&self) -> Result<RegistryConfig, Exit> {
        let store = super::env::store_dir()
            .ok_or_else(|| Exit::usage("no Tick store: set TICKBOX_STORE_DIR or HOME"))?;
        Ok(RegistryConfig {
            store,
            insecure: self.insecure_registry.clone(),
            credentials: super::env::docker_config(),
            ca_file: self.registry_ca.clone(),
        })
    }
}

/// `tickbox pull REF`.
#[derive(Args)]
pub struct PullArgs {
    /// The Tick: oci://HOST[:PORT]/REPO:TAG or …@sha256:DIGEST
    #[arg(value_name = "REF")]
    pub reference: String,
    /// Largest wasm layer accepted
    #[arg(long, value_name = "SIZE")]
    pub max_wasm_size: Option<String>,
    #[command(flatten)]
    pub registry: RegistryOpts,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
}

/// `tickbox push REF WASM`.
#[derive(Args)]
pub struct PushArgs {
    /// Where: oci://HOST[:PORT]/REPO:TAG
    #[arg(value_name = "REF")]
    pub reference: String,
    /// The .wasm file
    #[arg(value_name = "WASM")]
    pub wasm: PathBuf,
    /// What the Tick asks for (NAME.tick.toml); default: the one beside WASM, if any
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryOpts,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
}

/// Parses a reference, as a usage error when it is not one.
pub fn parse(reference: &str) -> Result<Reference, Exit> {
    reference.parse().map_err(Exit::usage)
}

fn registry_failure(e: RegistryError) -> Exit {
    match e {
        RegistryError::Reference(_) => Exit::usage(e),
        e => Exit::session(e),
    }
}

/// Runs `f` on a thread of its own with its own runtime: resolution is
/// called from synchronous code that may itself be inside a runtime.
fn blocking<T: Send>(
    f: impl FnOnce(&tokio::runtime::Runtime) -> Result<T, RegistryError> + Send,
) -> Result<T, RegistryError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| RegistryError::Connect {
                    host: "-".into(),
                    why: format!("cannot start a runtime: {e}"),
                })?;
            f(&rt)
        })
        .join()
        .unwrap_or_else(|_| {
            Err(RegistryError::Connect {
                host: "-".into(),
                why: "the pull failed unexpectedly".into(),
            })
        })
    })
}

/// References resolved by this process, by what was written.
static RESOLVED: Mutex<Option<HashMap<String, Pulled>>> = Mutex::new(None);

/// The Tick a reference names, in the store and verified; the same
/// resolution for the whole process.
pub fn resolve(reference: &str, opts: &RegistryOpts, max_wasm: u64) -> Result<Pulled, Exit> {
    if let Some(p) = tickbox_runtime::util::lock(&RESOLVED)
        .as_ref()
        .and_then(|m| m.get(reference))
    {
        return Ok(p.clone());
    }
    let parsed = parse(reference)?;
    let config = opts.config()?;
    let pulled = blocking(|rt| {
        let registry = Registry::new(config)?;
        rt.block_on(registry.pull(&parsed, max_wasm, true))
    })
    .map_err(registry_failure)?;
    if pulled.fetched {
        tracing::info!(reference = %pulled.reference, wasm = %pulled.wasm_digest, "pulled");
    }
    tickbox_runtime::util::lock(&RESOLVED)
        .get_or_insert_with(HashMap::new)
        .insert(reference.to_string(), pulled.clone());
    Ok(pulled)
}

/// The pinned form of a reference this process resolved.
pub fn pinned(reference: &str) -> Option<String> {
    tickbox_runtime::util::lock(&RESOLVED)
        .as_ref()?
        .get(reference)
        .map(|p| p.reference.to_string())
}

/// The pull this process made of the wasm at `path` (a store path), if any.
pub fn pulled_as(path: &std::path::Path) -> Option<Pulled> {
    tickbox_runtime::util::lock(&RESOLVED)
        .as_ref()?
        .values()
        .find(|p| p.wasm == path)
        .cloned()
}

/// What `pull` prints about a Tick.
pub fn describe(p: &Pulled) -> Value {
    json!({
        "reference": p.reference.to_string(),
        "manifest": p.manifest.to_string(),
        "wasm": {
            "digest": p.wasm_digest.to_string(),
            "bytes": std::fs::metadata(&p.wasm).map(|m| m.len()).unwrap_or(0),
            "path": p.wasm,
        },
        "requested": p.requested.as_ref().map(|_| true).unwrap_or(false),
        "fetched": p.fetched,
    })
}

/// `tickbox pull`.
pub fn pull(args: PullArgs) -> Result<Value, Exit> {
    let max = match &args.max_wasm_size {
        Some(s) => tickbox_runtime::backend::wasm::grants::parse_size(s).ok_or_else(|| {
            Exit::usage(format!(
                "--max-wasm-size {s}: expected a size such as 64MiB"
            ))
        })?,
        None => tickbox_runtime::backend::wasm::limits::DEFAULT_MAX_WASM,
    };
    let pulled = resolve(&args.reference, &args.registry, max)?;
    Ok(describe(&pulled))
}

/// `tickbox push`.
pub fn push(args: PushArgs) -> Result<Value, Exit> {
    let reference = parse(&args.reference)?;
    if reference.digest().is_some() {
        return Err(Exit::usage(
            "push to a tag (REPO:TAG); the digest is what the push makes",
        ));
    }
    let max = tickbox_runtime::backend::wasm::limits::DEFAULT_MAX_WASM;
    let wasm = tickbox_runtime::backend::wasm::read_wasm(&args.wasm, max).map_err(Exit::usage)?;
    let kind = tickbox_runtime::backend::wasm::detect(&wasm).ok_or_else(|| {
        Exit::usage(format!(
            "{}: not a wasm component or module",
            args.wasm.display()
        ))
    })?;
    let manifest = args
        .manifest
        .clone()
        .or_else(|| Some(args.wasm.with_extension("tick.toml")).filter(|p| p.exists()));
    let requested = match &manifest {
        Some(p) => {
            // Checked as tickbox will read it after a pull.
            super::open::read_grant_file(p).map_err(Exit::usage)?;
            Some(
                std::fs::read_to_string(p)
                    .map_err(|e| Exit::usage(format!("{}: {e}", p.display())))?,
            )
        }
        None => None,
    };
    let component = kind == tickbox_runtime::backend::wasm::WasmKind::Component;
    let config = args.registry.config()?;
    let digest = blocking(|rt| {
        let registry = Registry::new(config)?;
        rt.block_on(registry.push(&reference, &wasm, component, requested.as_deref()))
    })
    .map_err(registry_failure)?;
    Ok(json!({
        "reference": reference.at(digest).to_string(),
        "manifest": digest.to_string(),
        "wasm": tickbox_registry::Digest::of(&wasm).to_string(),
        "requested": requested.is_some(),
    }))
}
