//! Ticks named `oci://…`: the one resolution every command shares, and
//! `tickbox pull` / `tickbox push` (the registry flags are
//! `registry_flags`).
//!
//! A reference is resolved once per process (a tag to its manifest digest,
//! the layers into the store) and every later start in the same process
//! (an MCP restart, `tickbox test`'s fresh instances) reuses that digest,
//! so what was verified is what runs. The wasm starts pinned to its layer
//! digest ([`Launcher::pinned`](tickbox_runtime::Launcher::pinned)): the
//! sandbox checks the bytes it compiles against it.

use super::exit::Exit;
use super::registry_flags::{RegistryOpts, LOCK_FLAG, SIGNERS_FLAG};
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use tickbox_registry::policy::{Decision, Origin, Source};
use tickbox_registry::{Pulled, Reference};

/// Exit codes of `pull` and `push`.
pub const HELP: &str = "\
References are oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:DIGEST.
Plain HTTP is used only for loopback registries and those named with
--insecure-registry; credentials come from $DOCKER_CONFIG/config.json, else
~/.docker/config.json (inline auth entries), anonymous otherwise. Pulled
Ticks are kept in $TICKBOX_STORE_DIR, else $XDG_CACHE_HOME/tickbox/oci, else
~/.cache/tickbox/oci; `tickbox cache ls|clean` shows and empties it.
Registries are compared in one canonical form (host lowercased, :443
dropped, every loopback address `localhost`). The signers policy
(--signers, else $TICKBOX_SIGNERS, else ~/.config/tickbox/signers.toml)
names whose signatures each registry or repository needs; a Tick no rule
covers is refused unless it says no_match = \"warn\" or \"allow\". `tickbox
policy show [REF]` prints which policy, lock and trust store apply.

Exit codes:
  0    success (stdout: one JSON document)
  2    usage error: a malformed reference, an unreadable file, a signers
       policy or lock file that cannot be used (a rule that could never
       match, named)
  3    the registry or the store failed, or refused what it was sent, or
       the signers policy refused the Tick (stderr names the rule or the
       bound; nothing unverified is stored or run)";

pub fn parse(reference: &str) -> Result<Reference, Exit> {
    Ok(tickbox_app::registry::parse(reference)?)
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
    /// Sign the pushed manifest's digest with this SSH private key (ssh-keygen -Y sign -n tickbox) and push the signature beside it
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryOpts,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
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
        "requested": p.requested.is_some(),
        "fetched": p.fetched,
        "signer": p.signer,
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
    let pulled = super::open::app().resolve(&args.reference, &args.registry.settings(), max)?;
    Ok(describe(&pulled))
}

/// `tickbox push`.
pub fn push(args: PushArgs) -> Result<Value, Exit> {
    let push = tickbox_app::registry::Push {
        reference: args.reference,
        wasm: args.wasm,
        manifest: args.manifest,
        sign: args.sign,
    };
    let pushed = super::open::app().push(&push, &args.registry.settings())?;
    Ok(json!({
        "reference": pushed.reference.to_string(),
        "manifest": pushed.manifest.to_string(),
        "wasm": pushed.wasm.to_string(),
        "requested": pushed.requested,
        "signature": pushed.signature.map(|s| s.to_string()),
    }))
}

/// `tickbox verify REF`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The Tick: oci://HOST[:PORT]/REPO:TAG or …@sha256:DIGEST
    #[arg(value_name = "REF")]
    pub reference: String,
    /// Check against this allowed-signers file instead of the signers policy's
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    #[command(flatten)]
    pub registry: RegistryOpts,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
}

/// `tickbox verify`: who signed what. Succeeds when a signature by an
/// allowed signer is over this manifest; exit 3 otherwise.
pub fn verify(args: VerifyArgs) -> Result<Value, Exit> {
    let parsed = parse(&args.reference)?;
    // The pull alone: the signers policy is applied below, with its
    // verdicts shown, rather than refusing inside a resolve.
    let app = super::open::app();
    let (pulled, _) = app.fetch(
        &args.reference,
        &args.registry.settings(),
        tickbox_runtime::backend::wasm::limits::DEFAULT_MAX_WASM,
    )?;
    let (allowed, rule) = match &args.allowed_signers {
        Some(f) => (f.clone(), None),
        None => match args.registry.signers_policy()? {
            Some(policy) => match policy.decide(&parsed.name()) {
                Decision::Require(r) => (r.allowed_signers.clone(), Some(r.written.clone())),
                Decision::NoMatch(_) => {
                    return Err(Exit::usage(format!(
                        "no rule of the signers policy {} covers {}: pass --allowed-signers FILE",
                        policy.source(),
                        parsed.name()
                    )))
                }
            },
            None => {
                return Err(Exit::usage(format!(
                    "no signers policy is in force for {}: pass --allowed-signers FILE or --signers FILE",
                    parsed.name()
                )))
            }
        },
    };
    let verdicts = tickbox_app::registry::verdicts(
        &pulled,
        &args.registry.settings(),
        app.settings(),
        &allowed,
    )?;
    let valid = verdicts
        .iter()
        .any(|v| matches!(v, tickbox_registry::signature::Verdict::Valid { .. }));
    let v = json!({
        "reference": pulled.reference.to_string(),
        "manifest": pulled.manifest.to_string(),
        "allowed_signers": allowed,
        "rule": rule,
        // Each verdict with its words: `other_key` alone says little.
        "signatures": verdicts.iter().map(|v| {
            let mut j = json!(v);
            j["why"] = json!(v.explain());
            j
        }).collect::<Vec<_>>(),
        "verified": valid,
    });
    if valid {
        Ok(v)
    } else {
        // The verdicts still go to stdout: they say why.
        super::emit(&v, args.pretty)?;
        Err(Exit::session(format!(
            "{}: no signature by a signer in {} over this manifest",
            pulled.reference,
            allowed.display()
        )))
    }
}

/// `tickbox lock REF...`.
#[derive(Args)]
pub struct LockArgs {
    /// References to pin (tags are resolved now)
    #[arg(value_name = "REF", required = true)]
    pub references: Vec<String>,
    #[command(flatten)]
    pub registry: RegistryOpts,
}

/// `tickbox lock`: resolves each reference (checking signers as a start
/// would) and writes its digest and signer into the lock file.
pub fn lock_command(args: LockArgs) -> Result<Value, Exit> {
    let (path, written) = super::open::app().lock(&args.references, &args.registry.settings())?;
    let locked: Vec<Value> = written
        .iter()
        .map(|e| json!({"reference": e.reference.to_string(), "manifest": e.manifest, "signer": e.signer}))
        .collect();
    Ok(json!({"lock": path, "locked": locked}))
}

/// The trust store's directory and how it was found.
fn trust_source() -> Option<Source> {
    super::env::trust_dir_found().map(|(path, by_env)| Source {
        path,
        origin: if by_env {
            Origin::Environment(super::env::TRUST_DIR.into())
        } else {
            Origin::DefaultPath
        },
    })
}

/// Which signers policy, lock file and trust store apply under `opts`,
/// and for `reference` what the policy decides (`tickbox policy show`).
pub fn files_report(opts: &RegistryOpts, reference: Option<&str>) -> Result<Value, Exit> {
    Ok(tickbox_app::registry::files_report(
        &opts.settings(),
        &super::env::settings(),
        trust_source(),
        reference,
    )?)
}

/// The `tracing` target of [`log_files`]' lines (`tickbox mcp` shows it by
/// default).
pub const FILES_TARGET: &str = "tickbox::files";

/// Logs (one line per file, through `tracing`) which signers policy, lock
/// file and trust store apply and how each was found: `tickbox mcp` says
/// it at start, so an MCP client that starts it with a reduced
/// environment (no `$TICKBOX_SIGNERS`) is visible in its log.
pub fn log_files(opts: &RegistryOpts) {
    match opts.policy_source() {
        Ok(Some(s)) => tracing::info!(target: FILES_TARGET, "signers policy: {s}"),
        Ok(None) => tracing::info!(
            target: FILES_TARGET,
            "signers policy: none (no {SIGNERS_FLAG}, no ${}, nothing at {}): Ticks from registries run unchecked",
            super::env::SIGNERS,
            super::env::default_signers_file()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "the default path (no HOME)".into())
        ),
        Err(e) => tracing::info!(target: FILES_TARGET, "signers policy: {}", e.message),
    }
    match opts.lock_source() {
        Some(s) => tracing::info!(target: FILES_TARGET, "lock file: {s}"),
        None => tracing::info!(
            target: FILES_TARGET,
            "lock file: none (no {LOCK_FLAG}, nothing at {})",
            opts.default_lock_path().display()
        ),
    }
    match trust_source() {
        Some(s) => tracing::info!(target: FILES_TARGET, "trust store: {s}"),
        None => {
            tracing::info!(target: FILES_TARGET, "trust store: none (no ${}, no HOME)", super::env::TRUST_DIR)
        }
    }
}
