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
    /// The signers policy: which signers each registry or repository needs (default: $TICKBOX_SIGNERS, else ~/.config/tickbox/signers.toml when it exists)
    #[arg(long = "signers", value_name = "FILE")]
    pub signers: Option<PathBuf>,
    /// The lock file pinning references to digests (default: tickbox.lock beside --policy or --config, when it exists)
    #[arg(long = "lock", value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Refuse any drift from the lock file: a reference not in it, a tag that moved, another signer
    #[arg(long)]
    pub locked: bool,
}

impl RegistryOpts {
    /// The same options with the lock file beside `file` (a policy or MCP
    /// config) when none was named and one is there (or `--locked` wants
    /// one).
    pub fn lock_beside(&self, file: Option<&std::path::Path>) -> RegistryOpts {
        let mut o = self.clone();
        if o.lock.is_none() {
            o.lock = file
                .map(|f| {
                    f.parent()
                        .unwrap_or(std::path::Path::new("."))
                        .join(lock::FILE_NAME)
                })
                .filter(|l| o.locked || l.exists());
        }
        o
    }
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

/// One rule of the signers policy.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    /// `oci://HOST[:PORT]/REPO` exactly, or a prefix ending in `*`.
    references: String,
    /// An OpenSSH allowed-signers file (relative to the policy file).
    allowed_signers: PathBuf,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Policy {
    #[serde(default)]
    require: Vec<Rule>,
}

/// The signers policy file in force, if any.
fn policy_file(opts: &RegistryOpts) -> Option<PathBuf> {
    opts.signers
        .clone()
        .or_else(super::env::signers_file)
        .filter(|p| opts.signers.is_some() || p.exists())
}

/// The allowed-signers file the policy names for a Tick (its name without
/// tag or digest), and the rule as written; the most specific rule wins.
fn required_signers(opts: &RegistryOpts, name: &str) -> Result<Option<(PathBuf, String)>, Exit> {
    let Some(file) = policy_file(opts) else {
        return Ok(None);
    };
    let bad = |why: String| Exit::usage(format!("{}: {why}", file.display()));
    let text = std::fs::read_to_string(&file).map_err(|e| bad(e.to_string()))?;
    let policy: Policy = toml::from_str(&text).map_err(|e| bad(e.message().to_string()))?;
    let matches = |r: &Rule| match r.references.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == r.references,
    };
    let best = policy
        .require
        .iter()
        .filter(|r| matches(r))
        .max_by_key(|r| r.references.len());
    Ok(best.map(|r| {
        let base = file.parent().unwrap_or(std::path::Path::new("."));
        (base.join(&r.allowed_signers), r.references.clone())
    }))
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
/// signatures must be theirs and over this very manifest digest; else the
/// Tick is refused before anything runs. Returns the signer.
fn check_signers(pulled: &Pulled, opts: &RegistryOpts) -> Result<Option<String>, Exit> {
    use tickbox_registry::signature::Verdict;
    let Some((allowed, rule)) = required_signers(opts, &pulled.reference.name())? else {
        return Ok(None);
    };
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
        "refusing {}: the signers policy requires a signature by {} for {rule}, and {why}",
        pulled.reference,
        allowed.display()
    )))
}

/// The lock file: references pinned to the manifest digests (and signers)
/// they resolved to when `tickbox lock` ran.
pub mod lock {
    use super::Exit;
    use std::path::Path;

    /// Its usual name.
    pub const FILE_NAME: &str = "tickbox.lock";
    /// Largest lock file read.
    const MAX_BYTES: u64 = 1 << 20;

    /// One locked reference.
    #[derive(serde::Deserialize, serde::Serialize, Clone, Debug, PartialEq)]
    #[serde(deny_unknown_fields)]
    pub struct Entry {
        pub reference: String,
        pub manifest: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub signer: Option<String>,
    }

    #[derive(serde::Deserialize, serde::Serialize, Default)]
    #[serde(deny_unknown_fields)]
    pub struct Lock {
        pub version: u32,
        #[serde(default)]
        pub tick: Vec<Entry>,
    }

    impl Lock {
        /// Reads a lock file; a missing one is empty.
        pub fn read(path: &Path) -> Result<Lock, Exit> {
            use std::io::Read;
            let bad = |why: String| Exit::usage(format!("{}: {why}", path.display()));
            let file = match std::fs::File::open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Lock {
                        version: 1,
                        tick: Vec::new(),
                    })
                }
                Err(e) => return Err(bad(e.to_string())),
            };
            let mut text = String::new();
            file.take(MAX_BYTES + 1)
                .read_to_string(&mut text)
                .map_err(|e| bad(e.to_string()))?;
            if text.len() as u64 > MAX_BYTES {
                return Err(bad(format!("larger than {MAX_BYTES} bytes")));
            }
            let lock: Lock = toml::from_str(&text).map_err(|e| bad(e.message().to_string()))?;
            if lock.version != 1 {
                return Err(bad(format!(
                    "version {} is not one this tickbox reads (1)",
                    lock.version
                )));
            }
            Ok(lock)
        }

        /// The entry of a reference, as written.
        pub fn get(&self, reference: &str) -> Option<&Entry> {
            self.tick.iter().find(|e| e.reference == reference)
        }

        /// Adds or replaces an entry.
        pub fn set(&mut self, entry: Entry) {
            match self
                .tick
                .iter_mut()
                .find(|e| e.reference == entry.reference)
            {
                Some(e) => *e = entry,
                None => self.tick.push(entry),
            }
            self.tick.sort_by(|a, b| a.reference.cmp(&b.reference));
        }

        /// Writes the file whole (a new file renamed over the old).
        pub fn write(&self, path: &Path) -> Result<(), Exit> {
            let text = format!(
                "# Written by `tickbox lock`: each reference pinned to the manifest it\n# resolved to (and who signed it). `--locked` refuses any drift.\n{}",
                toml::to_string(self).map_err(|e| Exit::session(format!("cannot write the lock: {e}")))?
            );
            let tmp = path.with_extension(format!("lock.{}", std::process::id()));
            std::fs::write(&tmp, text)
                .and_then(|_| std::fs::rename(&tmp, path))
                .map_err(|e| Exit::session(format!("{}: {e}", path.display())))
        }
    }
}

/// What the lock says about a reference: the reference to resolve instead
/// (pinned) and the entry, or a refusal under `--locked`.
fn locked_target(reference: &str, opts: &RegistryOpts) -> Result<Option<lock::Entry>, Exit> {
    let Some(path) = &opts.lock else {
        if opts.locked {
            return Err(Exit::usage("--locked needs a lock file: --lock FILE, or tickbox.lock beside --policy or --config"));
        }
        return Ok(None);
    };
    let lock = lock::Lock::read(path)?;
    match lock.get(reference) {
        Some(e) => Ok(Some(e.clone())),
        None if opts.locked && parse(reference)?.digest().is_none() => Err(Exit::usage(format!(
            "--locked: {reference} is not in {} (run `tickbox lock {reference} --lock {}`)",
            path.display(),
            path.display()
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
    let entry = locked_target(reference, opts)?;
    let config = opts.config()?;
    // A locked tag is not resolved again: its digest is what runs. Under
    // --locked the tag is asked for too, to refuse one that moved.
    let target = match &entry {
        Some(e) => parsed.at(e.manifest.parse().map_err(|why: String| {
            Exit::usage(format!(
                "{}: {why}",
                opts.lock
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""))
                    .display()
            ))
        })?),
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
        if now.to_string() != e.manifest {
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
        None => match required_signers(&args.registry, &parsed.name())? {
            Some((f, r)) => (f, Some(r)),
            None => {
                return Err(Exit::usage(format!(
                    "no signers policy names {}: pass --allowed-signers FILE or --signers FILE",
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
    let path = args
        .registry
        .lock
        .clone()
        .unwrap_or_else(|| PathBuf::from(lock::FILE_NAME));
    let mut file = lock::Lock::read(&path)?;
    file.version = 1;
    // Resolved afresh: the lock is what is being written.
    let fresh = RegistryOpts {
        lock: None,
        locked: false,
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
            reference: r.clone(),
            manifest: pulled.manifest.to_string(),
            signer: pulled.signer.clone(),
        };
        out.push(json!({"reference": r, "manifest": entry.manifest, "signer": entry.signer}));
        file.set(entry);
    }
    file.write(&path)?;
    Ok(json!({"lock": path, "locked": out}))
}
