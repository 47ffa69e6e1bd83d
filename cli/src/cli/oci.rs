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
use tickbox_registry::lock::{self, Lock, LockError, LockFile};
use tickbox_registry::policy::{
    self, Decision, NoMatch, Origin, Policy, PolicyError, PolicyFile, Source,
};
use tickbox_registry::{Pulled, Reference, Registry, RegistryConfig, RegistryError};

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

/// How to reach registries (every command that takes a Tick).
#[derive(Args, Clone, Default)]
pub struct RegistryOpts {
    /// Allow plain HTTP to this registry HOST or HOST:PORT (loopback registries need no flag; repeatable)
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registry: Vec<String>,
    /// Trust the CA certificates in this PEM file for registries, besides the webpki roots
    #[arg(long = "registry-ca", value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// The signers policy: which signers each registry or repository needs (default: $TICKBOX_SIGNERS, else ~/.config/tickbox/signers.toml when it exists)
    #[arg(long = "signers", value_name = "FILE")]
    pub signers: Option<PathBuf>,
    /// The lock file pinning references to digests (default: tickbox.lock beside --policy or --config, else ./tickbox.lock, where `tickbox lock` writes; read when it exists)
    #[arg(long = "lock", value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Refuse any drift from the lock file: a reference not in it, a tag that moved, another signer
    #[arg(long)]
    pub locked: bool,
    /// The policy or MCP config file the default lock file is beside: set
    /// by the command, not a flag.
    #[arg(skip)]
    pub beside: Option<PathBuf>,
    /// Resolve afresh, without any lock file (`tickbox lock` itself): set
    /// by the command, not a flag.
    #[arg(skip)]
    pub ignore_lock: bool,
}

/// The flag that names the signers policy.
const SIGNERS_FLAG: &str = "--signers";
/// The flag that names the lock file.
const LOCK_FLAG: &str = "--lock";

impl RegistryOpts {
    /// The same options with the default lock file beside `file` (a policy
    /// or MCP config), unless a file is already set for it.
    pub fn lock_beside(&self, file: Option<&std::path::Path>) -> RegistryOpts {
        let mut o = self.clone();
        if o.beside.is_none() {
            o.beside = file.map(std::path::Path::to_path_buf);
        }
        o
    }

    /// The lock file that applies: `--lock FILE`, else the default path
    /// (decided by [`lock::default_path`], where `tickbox lock` writes)
    /// when a file is there or `--locked` wants one.
    pub fn lock_source(&self) -> Option<Source> {
        if self.ignore_lock {
            return None;
        }
        match &self.lock {
            Some(path) => Some(Source {
                path: path.clone(),
                origin: Origin::Flag(LOCK_FLAG.into()),
            }),
            None => {
                let path = lock::default_path(self.beside.as_deref());
                (self.locked || path.exists()).then_some(Source {
                    path,
                    origin: Origin::DefaultPath,
                })
            }
        }
    }

    /// Where the lock file is when none applies (for a report).
    pub fn default_lock_path(&self) -> PathBuf {
        lock::default_path(self.beside.as_deref())
    }

    /// The signers policy file that applies: `--signers FILE`, else
    /// `$TICKBOX_SIGNERS`, else the default path when a file is there. A
    /// file a flag or the variable names must exist: a policy someone
    /// meant to apply never silently does not.
    pub fn policy_source(&self) -> Result<Option<Source>, Exit> {
        let named = match (&self.signers, super::env::signers_env()) {
            (Some(path), _) => Some(Source {
                path: path.clone(),
                origin: Origin::Flag(SIGNERS_FLAG.into()),
            }),
            (None, Some(path)) => Some(Source {
                path,
                origin: Origin::Environment(super::env::SIGNERS.into()),
            }),
            (None, None) => None,
        };
        if let Some(source) = named {
            if !source.path.is_file() {
                return Err(Exit::usage(format!(
                    "the signers policy {}, named by {}, is not a readable file",
                    source.path.display(),
                    source.origin
                )));
            }
            return Ok(Some(source));
        }
        Ok(super::env::default_signers_file()
            .filter(|p| p.exists())
            .map(|path| Source {
                path,
                origin: Origin::DefaultPath,
            }))
    }

    /// The signers policy in force, read and checked (a rule that could
    /// never match is exit 2, naming the rule).
    pub fn signers_policy(&self) -> Result<Option<Policy>, Exit> {
        match self.policy_source()? {
            Some(source) => read_policy(source).map(Some),
            None => Ok(None),
        }
    }
}

/// Reads a signers policy: the bounded read and every rule's check are the
/// registry crate's; the TOML is read here, where files are.
fn read_policy(source: Source) -> Result<Policy, Exit> {
    let text = policy::read_text(&source.path).map_err(Exit::usage)?;
    let file: PolicyFile = toml::from_str(&text).map_err(|e| {
        Exit::usage(PolicyError::Read {
            path: source.path.clone(),
            why: tickbox_runtime::text::escape(e.message()),
        })
    })?;
    Policy::check(file, source).map_err(Exit::usage)
}

/// Reads a lock file (a missing one is empty), as [`read_policy`] does.
fn read_lock(path: &std::path::Path) -> Result<Lock, Exit> {
    let Some(text) = lock::read_text(path).map_err(Exit::usage)? else {
        return Ok(Lock::default());
    };
    let file: LockFile = toml::from_str(&text).map_err(|e| {
        Exit::usage(LockError::Read {
            path: path.to_path_buf(),
            why: tickbox_runtime::text::escape(e.message()),
        })
    })?;
    Lock::check(file, path).map_err(Exit::usage)
}

/// Writes a lock file whole.
fn write_lock(l: &Lock, path: &std::path::Path) -> Result<(), Exit> {
    let text = toml::to_string(&l.to_file())
        .map_err(|e| Exit::session(format!("cannot write the lock: {e}")))?;
    lock::write_text(path, &format!("{}{text}", lock::HEADER)).map_err(Exit::session)
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
            deadlines: Default::default(),
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
    /// Sign the pushed manifest's digest with this SSH private key (ssh-keygen -Y sign -n tickbox) and push the signature beside it
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
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

/// Says once per process, on stderr, that a Tick from a registry runs with
/// no signers policy in force, and how to add one.
fn warn_no_policy(reference: &Reference) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!(
            "tickbox: warning: no signers policy is in force, so {} runs whoever signed it; add one with --signers FILE, ${} or {} ([[require]] references = \"oci://HOST/PREFIX/*\", allowed_signers = \"FILE\")",
            tickbox_runtime::text::escape(&reference.to_string()),
            super::env::SIGNERS,
            super::env::default_signers_file()
                .map(|p| tickbox_runtime::text::escape(&p.display().to_string()))
                .unwrap_or_else(|| "~/.config/tickbox/signers.toml".into()),
        );
    });
}

fn registry_failure(e: RegistryError) -> Exit {
    match e {
        RegistryError::Reference(_) => Exit::usage(e),
        // The library names the setting; the command line names its flag.
        RegistryError::Insecure { ref host } => {
            let flag = format!("pass --insecure-registry {host} to allow plain HTTP");
            Exit::session(format!("{e}; {}", tickbox_runtime::text::escape(&flag)))
        }
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

/// Every signature of a pulled Tick, checked against `allowed`.
fn verdicts(
    pulled: &Pulled,
    opts: &RegistryOpts,
    allowed: &std::path::Path,
) -> Result<Vec<tickbox_registry::signature::Verdict>, Exit> {
    let config = opts.config()?;
    let pinned = pulled.reference.clone();
    let offline_first = !pulled.fetched;
    let sigs = blocking(|rt| {
        let registry = Registry::new(config)?;
        let mut sigs = rt.block_on(registry.signatures(&pinned, !offline_first))?;
        if sigs.is_empty() && offline_first {
            // Pulled earlier without signatures at hand: ask the registry.
            sigs = rt
                .block_on(registry.signatures(&pinned, true))
                .unwrap_or_default();
        }
        Ok(sigs)
    })
    .map_err(registry_failure)?;
    sigs.iter()
        .map(|s| {
            tickbox_registry::signature::verify(allowed, &pulled.manifest, s).map_err(Exit::session)
        })
        .collect()
}

/// Where the signers policy names signers for this Tick, one of its
/// signatures must be theirs and over this very manifest digest; where no
/// rule covers it, the policy's `no_match` decides (deny by default);
/// else the Tick is refused before anything runs. Returns the signer.
fn check_signers(pulled: &Pulled, opts: &RegistryOpts) -> Result<Option<String>, Exit> {
    use tickbox_registry::signature::Verdict;
    let Some(policy) = opts.signers_policy()? else {
        warn_no_policy(&pulled.reference);
        return Ok(None);
    };
    let name = pulled.reference.name();
    let rule = match policy.decide(&name) {
        Decision::Require(rule) => rule,
        Decision::NoMatch(NoMatch::Allow) => return Ok(None),
        Decision::NoMatch(NoMatch::Warn) => {
            eprintln!(
                "tickbox: warning: no rule of the signers policy {} covers {name}; it runs unchecked (no_match = \"warn\")",
                tickbox_runtime::text::escape(&policy.source().to_string()),
            );
            return Ok(None);
        }
        Decision::NoMatch(NoMatch::Deny) => {
            return Err(Exit::session(format!(
                "refusing {}: no rule of the signers policy {} covers {name}, and no_match is deny (add a [[require]] rule that covers it, or set no_match = \"warn\" or \"allow\")",
                pulled.reference,
                policy.source(),
            )))
        }
    };
    let allowed = rule.allowed_signers.clone();
    let rule = rule.label();
    let verdicts = verdicts(pulled, opts, &allowed)?;
    if let Some(Verdict::Valid { signer }) =
        verdicts.iter().find(|v| matches!(v, Verdict::Valid { .. }))
    {
        return Ok(Some(signer.clone()));
    }
    let why = if verdicts.is_empty() {
        "it is unsigned".to_string()
    } else if let Some(Verdict::OtherDigest { signer }) = verdicts
        .iter()
        .find(|v| matches!(v, Verdict::OtherDigest { .. }))
    {
        format!("{signer}'s signature is not over this digest")
    } else {
        format!(
            "its {} signature(s) are by keys {} does not list",
            verdicts.len(),
            allowed.display()
        )
    };
    Err(Exit::session(format!(
        "refusing {}: the signers policy {} requires a signature by {} for {name} ({rule}), and {why}",
        pulled.reference,
        policy.source(),
        allowed.display()
    )))
}

/// What the lock says about a reference: its entry (the digest to run
/// instead), or a refusal under `--locked`.
fn locked_target(parsed: &Reference, opts: &RegistryOpts) -> Result<Option<lock::Entry>, Exit> {
    let Some(source) = opts.lock_source() else {
        return Ok(None);
    };
    let lock = read_lock(&source.path)?;
    match lock.get(parsed) {
        Some(e) => Ok(Some(e.clone())),
        None if opts.locked && parsed.digest().is_none() => Err(Exit::usage(format!(
            "--locked: {parsed} is not in the lock file {source} (run `tickbox lock {parsed} --lock {}`)",
            source.path.display()
        ))),
        None => Ok(None),
    }
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
    let (mut pulled, entry) = fetch(reference, opts, max_wasm)?;
    pulled.signer = check_signers(&pulled, opts)?;
    if let Some(e) = &entry {
        if e.signer.is_some() && e.signer != pulled.signer {
            let drift = format!(
                "{reference}: the lock records signer {}, the signature now checked is by {}",
                e.signer.as_deref().unwrap_or("none"),
                pulled
                    .signer
                    .as_deref()
                    .unwrap_or("nobody (no signers policy applies)")
            );
            if opts.locked {
                return Err(Exit::session(format!("--locked: {drift}")));
            }
            tracing::warn!("{drift}");
        }
    }
    tickbox_runtime::util::lock(&RESOLVED)
        .get_or_insert_with(HashMap::new)
        .insert(reference.to_string(), pulled.clone());
    Ok(pulled)
}

/// The pull itself, under the lock file (a locked tag runs its locked
/// digest; `--locked` refuses a moved tag), before any signers policy is
/// applied; with the lock's entry for the reference.
fn fetch(
    reference: &str,
    opts: &RegistryOpts,
    max_wasm: u64,
) -> Result<(Pulled, Option<lock::Entry>), Exit> {
    let parsed = parse(reference)?;
    let entry = locked_target(&parsed, opts)?;
    let config = opts.config()?;
    // A locked tag is not resolved again: its digest is what runs. Under
    // --locked the tag is asked for too, to refuse one that moved.
    let target = match &entry {
        Some(e) => parsed.at(e.manifest),
        None => parsed.clone(),
    };
    let check_tag = opts.locked && entry.is_some() && parsed.digest().is_none();
    let (pulled, now) = blocking(|rt| {
        let registry = Registry::new(config)?;
        let pulled = rt.block_on(registry.pull(&target, max_wasm, true))?;
        let now = if check_tag {
            Some(rt.block_on(registry.fetch_manifest(&parsed))?.1)
        } else {
            None
        };
        Ok((pulled, now))
    })
    .map_err(registry_failure)?;
    if let (Some(now), Some(e)) = (now, &entry) {
        if now != e.manifest {
            return Err(Exit::session(format!(
                "--locked: the tag {reference} moved: the lock has {}, the registry now {now} (run `tickbox lock` to accept it)",
                e.manifest
            )));
        }
    }
    if pulled.fetched {
        tracing::info!(reference = %pulled.reference, wasm = %pulled.wasm_digest, "pulled");
    }
    Ok((pulled, entry))
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
    let key = args.sign.clone();
    let (digest, signature) = blocking(|rt| {
        let registry = Registry::new(config)?;
        let digest =
            rt.block_on(registry.push(&reference, &wasm, component, requested.as_deref()))?;
        let Some(key) = key else {
            return Ok((digest, None));
        };
        let signature = tickbox_registry::signature::sign(&key, &digest).map_err(|e| {
            RegistryError::Config {
                path: key.clone(),
                why: e.to_string(),
            }
        })?;
        let manifest = registry
            .store()
            .read(&digest, tickbox_registry::limits::MAX_MANIFEST_BYTES)?;
        let subject = tickbox_registry::layout::Descriptor::of(
            tickbox_registry::layout::MANIFEST_MEDIA_TYPE,
            &manifest,
        );
        let sig = rt.block_on(registry.push_signature(&reference, &subject, &signature))?;
        Ok((digest, Some(sig)))
    })
    .map_err(registry_failure)?;
    Ok(json!({
        "reference": reference.at(digest).to_string(),
        "manifest": digest.to_string(),
        "wasm": tickbox_registry::Digest::of(&wasm).to_string(),
        "requested": requested.is_some(),
        "signature": signature.map(|s| s.to_string()),
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
    let (pulled, _) = fetch(
        &args.reference,
        &args.registry,
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
    let verdicts = verdicts(&pulled, &args.registry, &allowed)?;
    let valid = verdicts
        .iter()
        .any(|v| matches!(v, tickbox_registry::signature::Verdict::Valid { .. }));
    let v = json!({
        "reference": pulled.reference.to_string(),
        "manifest": pulled.manifest.to_string(),
        "allowed_signers": allowed,
        "rule": rule,
        "signatures": verdicts,
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
    // Where `--locked` reads when no flag names a file (one decision).
    let path = args
        .registry
        .lock
        .clone()
        .unwrap_or_else(|| args.registry.default_lock_path());
    let mut file = read_lock(&path)?;
    // Resolved afresh: the lock is what is being written.
    let fresh = RegistryOpts {
        lock: None,
        locked: false,
        ignore_lock: true,
        ..args.registry.clone()
    };
    let mut out = Vec::new();
    for r in &args.references {
        let pulled = resolve(
            r,
            &fresh,
            tickbox_runtime::backend::wasm::limits::DEFAULT_MAX_WASM,
        )?;
        let entry = lock::Entry {
            reference: parse(r)?,
            manifest: pulled.manifest,
            signer: pulled.signer.clone(),
        };
        out.push(json!({"reference": entry.reference.to_string(), "manifest": entry.manifest, "signer": entry.signer}));
        file.set(entry);
    }
    write_lock(&file, &path)?;
    Ok(json!({"lock": path, "locked": out}))
}

/// How a file was found, for a report: `{"found": "flag"|"environment"|
/// "default"|"none", "by": FLAG or VARIABLE}`.
fn found(origin: Option<&Origin>) -> Value {
    match origin {
        None => json!({"found": "none"}),
        Some(Origin::Flag(flag)) => json!({"found": "flag", "by": flag}),
        Some(Origin::Environment(var)) => json!({"found": "environment", "by": var}),
        Some(Origin::DefaultPath) => json!({"found": "default"}),
    }
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
/// where each was found, and for `reference` what the policy decides and
/// what the lock holds (`tickbox policy show`). A policy that cannot be
/// used is its error (exit 2, naming the rule).
pub fn files_report(opts: &RegistryOpts, reference: Option<&str>) -> Result<Value, Exit> {
    let policy = opts.signers_policy()?;
    let signers = match &policy {
        Some(p) => {
            let mut v = found(Some(&p.source().origin));
            v["path"] = json!(p.source().path);
            v["no_match"] = json!(p.no_match());
            v["rules"] = p
                .rules()
                .iter()
                .map(|r| {
                    json!({
                        "rule": r.index,
                        "references": r.written,
                        "pattern": r.pattern.to_string(),
                        "allowed_signers": r.allowed_signers,
                    })
                })
                .collect();
            v
        }
        None => {
            let mut v = found(None);
            v["default"] = json!(super::env::default_signers_file());
            v
        }
    };
    let lock_source = opts.lock_source();
    let lock_file = match &lock_source {
        Some(s) => Some(read_lock(&s.path)?),
        None => None,
    };
    let lock = match &lock_source {
        Some(s) => {
            let mut v = found(Some(&s.origin));
            v["path"] = json!(s.path);
            v["exists"] = json!(s.path.exists());
            v["entries"] = json!(lock_file.as_ref().map_or(0, |l| l.entries().len()));
            v
        }
        None => {
            let mut v = found(None);
            v["default"] = json!(opts.default_lock_path());
            v
        }
    };
    let trust = match trust_source() {
        Some(s) => {
            let mut v = found(Some(&s.origin));
            v["path"] = json!(s.path);
            v
        }
        None => found(None),
    };
    let mut out = json!({"signers": signers, "lock": lock, "trust": trust});
    if let Some(r) = reference {
        let parsed = parse(r)?;
        let name = parsed.name();
        let decision = match &policy {
            None => json!({"outcome": "no_policy"}),
            Some(p) => match p.decide(&name) {
                Decision::Require(rule) => json!({
                    "outcome": "require",
                    "rule": rule.index,
                    "references": rule.written,
                    "pattern": rule.pattern.to_string(),
                    "allowed_signers": rule.allowed_signers,
                }),
                Decision::NoMatch(setting) => json!({"outcome": "no_match", "no_match": setting}),
            },
        };
        let locked = lock_file
            .as_ref()
            .and_then(|l| l.get(&parsed))
            .map(|e| json!({"reference": e.reference.to_string(), "manifest": e.manifest, "signer": e.signer}));
        out["reference"] = json!({
            "reference": parsed.to_string(),
            "name": name.to_string(),
            "decision": decision,
            "locked": locked,
        });
    }
    Ok(out)
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
