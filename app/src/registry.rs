//! Ticks named `oci://…`: the signers policy and the lock that apply, and
//! the one resolution every start shares.
//!
//! A reference is resolved once per [`App`](crate::App) (a tag to its
//! manifest digest, the layers into the store) and every later start (an
//! MCP restart, `tickbox test`'s fresh instances) reuses that digest, so
//! what was verified is what runs.

use crate::{AppError, Notice, Settings};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tickbox_registry::lock::{self, Lock, LockError, LockFile};
use tickbox_registry::policy::{
    self, Decision, NoMatch, Origin, Policy, PolicyError, PolicyFile, Source,
};
use tickbox_registry::signature::Verdict;
use tickbox_registry::{Pulled, Reference, Registry, RegistryConfig, RegistryError};

/// How references are pulled and checked: the caller's registry settings.
#[derive(Clone, Debug, Default)]
pub struct RegistrySettings {
    /// Registries that may be reached over plain HTTP.
    pub insecure: Vec<String>,
    /// More CA certificates for registries over HTTPS.
    pub ca_file: Option<PathBuf>,
    /// The signers policy the request names (else [`Settings::signers`],
    /// else the default file).
    pub signers: Option<Source>,
    /// The lock file the request names (else `tickbox.lock` beside `beside`).
    pub lock: Option<Source>,
    /// Refuse a reference the lock does not pin, and any drift from it.
    pub locked: bool,
    /// The file whose directory holds the default lock (a policy or MCP config).
    pub beside: Option<PathBuf>,
    /// Use no lock at all (`tickbox lock` re-resolving).
    pub ignore_lock: bool,
}

impl RegistrySettings {
    /// These settings, with the default lock beside `file` unless a
    /// place was chosen already.
    pub fn lock_beside(&self, file: Option<&Path>) -> RegistrySettings {
        let mut o = self.clone();
        if o.beside.is_none() {
            o.beside = file.map(Path::to_path_buf);
        }
        o
    }

    /// The lock file in force, if any: the named one, else the default
    /// path when it exists (or `locked` requires it).
    pub fn lock_source(&self) -> Option<Source> {
        if self.ignore_lock {
            return None;
        }
        match &self.lock {
            Some(source) => Some(source.clone()),
            None => {
                let path = lock::default_path(self.beside.as_deref());
                (self.locked || !lock::nothing_at(&path)).then_some(Source {
                    path,
                    origin: Origin::DefaultPath,
                })
            }
        }
    }

    /// Where the lock is kept when nobody names one.
    pub fn default_lock_path(&self) -> PathBuf {
        lock::default_path(self.beside.as_deref())
    }

    /// The signers policy in force, if any: a named one must be a file.
    pub fn policy_source(&self, settings: &Settings) -> Result<Option<Source>, AppError> {
        if let Some(source) = self.signers.clone().or_else(|| settings.signers.clone()) {
            if !source.path.is_file() {
                return Err(AppError::Usage(format!(
                    "the signers policy {}, named by {}, is not a readable file",
                    source.path.display(),
                    source.origin
                )));
            }
            return Ok(Some(source));
        }
        Ok(settings
            .default_signers_file
            .clone()
            .filter(|p| !lock::nothing_at(p))
            .map(|path| Source {
                path,
                origin: Origin::DefaultPath,
            }))
    }

    /// The signers policy in force, read and checked.
    pub fn signers_policy(&self, settings: &Settings) -> Result<Option<Policy>, AppError> {
        match self.policy_source(settings)? {
            Some(source) => read_signers(source).map(Some),
            None => Ok(None),
        }
    }

    /// The registry client's configuration.
    pub fn config(&self, settings: &Settings) -> Result<RegistryConfig, AppError> {
        let store = settings.store_dir.clone().ok_or(AppError::NoStore)?;
        Ok(RegistryConfig {
            store,
            insecure: self.insecure.clone(),
            credentials: settings.docker_config.clone(),
            ca_file: self.ca_file.clone(),
            deadlines: Default::default(),
        })
    }
}

/// Reads and checks a signers policy.
pub fn read_signers(source: Source) -> Result<Policy, AppError> {
    let text = policy::read_text(&source.path).map_err(AppError::usage)?;
    let file: PolicyFile = toml::from_str(&text).map_err(|e| {
        AppError::usage(PolicyError::Read {
            path: source.path.clone(),
            why: tickbox_host::text::escape(e.message()),
        })
    })?;
    Policy::check(file, source).map_err(AppError::usage)
}

/// Reads and checks a lock file (empty when there is none).
pub fn read_lock(path: &Path) -> Result<Lock, AppError> {
    let Some(text) = lock::read_text(path).map_err(AppError::usage)? else {
        return Ok(Lock::default());
    };
    let file: LockFile = toml::from_str(&text).map_err(|e| {
        AppError::usage(LockError::Read {
            path: path.to_path_buf(),
            why: tickbox_host::text::escape(e.message()),
        })
    })?;
    Lock::check(file, path).map_err(AppError::usage)
}

/// Writes a lock file whole.
pub fn write_lock(l: &Lock, path: &Path) -> Result<(), AppError> {
    let text = toml::to_string(&l.to_file())
        .map_err(|e| AppError::session(format!("cannot write the lock: {e}")))?;
    lock::write_text(path, &format!("{}{text}", lock::HEADER)).map_err(AppError::session)
}

/// Parses a reference.
pub fn parse(reference: &str) -> Result<Reference, AppError> {
    reference.parse().map_err(AppError::usage)
}

/// What an App's resolutions are kept under: the reference's canonical
/// spelling, so that two spellings of one reference in a config are one
/// resolution (a tag that moves in between cannot run two digests).
fn resolution_key(reference: &str) -> Result<String, AppError> {
    // The registry's identity, not its spelling: the loopback's names are
    // one registry, so a tag named both ways is resolved (and runs) once.
    let parsed = parse(reference)?;
    let name = parsed.name();
    Ok(format!(
        "{}/{} {}",
        name.registry(),
        name.repository(),
        parsed.api_reference()
    ))
}

/// Runs registry work on a runtime of its own, off the caller's (which
/// may be a current-thread runtime, or none).
pub fn blocking<T: Send>(
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

fn registry_failure(e: RegistryError) -> AppError {
    match e {
        RegistryError::Reference(_) => AppError::usage(e),
        e => AppError::Registry(e),
    }
}

/// Every signature of a pulled Tick, checked against `allowed`.
pub fn verdicts(
    pulled: &Pulled,
    registry: &RegistrySettings,
    settings: &Settings,
    allowed: &Path,
) -> Result<Vec<Verdict>, AppError> {
    let config = registry.config(settings)?;
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
            tickbox_registry::signature::verify(allowed, &pulled.manifest, s)
                .map_err(AppError::session)
        })
        .collect()
}

impl crate::App {
    /// The signer the policy requires and found, `None` when no rule
    /// applies; an error names the rule a Tick fails.
    fn check_signers(
        &self,
        pulled: &Pulled,
        registry: &RegistrySettings,
    ) -> Result<Option<String>, AppError> {
        let Some(policy) = registry.signers_policy(&self.settings)? else {
            // Said once per App: every start of one process shares it.
            if !self
                .said_no_policy
                .swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                self.notice(&Notice::NoSignersPolicy {
                    reference: pulled.reference.to_string(),
                    default_file: self.settings.default_signers_file.clone(),
                });
            }
            return Ok(None);
        };
        let name = pulled.reference.name();
        let rule = match policy.decide(&name) {
            Decision::Require(rule) => rule,
            Decision::NoMatch(NoMatch::Allow) => return Ok(None),
            Decision::NoMatch(NoMatch::Warn) => {
                self.notice(&Notice::NoRuleCovers {
                    policy: policy.source().to_string(),
                    name: name.to_string(),
                });
                return Ok(None);
            }
            Decision::NoMatch(NoMatch::Deny) => {
                return Err(AppError::Refused(format!(
                    "refusing {}: no rule of the signers policy {} covers {name}, and no_match is deny (add a [[require]] rule that covers it, or set no_match = \"warn\" or \"allow\")",
                    pulled.reference,
                    policy.source(),
                )))
            }
        };
        let allowed = rule.allowed_signers.clone();
        let rule = rule.label();
        let verdicts = verdicts(pulled, registry, &self.settings, &allowed)?;
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
        Err(AppError::Refused(format!(
            "refusing {}: the signers policy {} requires a signature by {} for {name} ({rule}), and {why}",
            pulled.reference,
            policy.source(),
            allowed.display()
        )))
    }

    /// Resolves a reference once per App: pulled (or found in the store),
    /// its signature checked against the signers policy, pinned by the lock.
    pub fn resolve(
        &self,
        reference: &str,
        registry: &RegistrySettings,
        max_wasm: u64,
    ) -> Result<Pulled, AppError> {
        let key = resolution_key(reference)?;
        if let Some(p) = tickbox_host::util::lock(&self.resolved).get(&key) {
            return Ok(p.clone());
        }
        let (mut pulled, entry) = self.fetch(reference, registry, max_wasm)?;
        pulled.signer = self.check_signers(&pulled, registry)?;
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
                if registry.locked {
                    return Err(AppError::Drift(drift));
                }
                tracing::warn!("{drift}");
            }
        }
        tickbox_host::util::lock(&self.resolved).insert(key, pulled.clone());
        Ok(pulled)
    }

    /// Pulls a reference (pinned by the lock) without checking its
    /// signatures (`tickbox verify` shows them instead).
    pub fn fetch(
        &self,
        reference: &str,
        registry: &RegistrySettings,
        max_wasm: u64,
    ) -> Result<(Pulled, Option<lock::Entry>), AppError> {
        let parsed = parse(reference)?;
        let entry = locked_target(&parsed, registry)?;
        let config = registry.config(&self.settings)?;
        // A locked tag is not resolved again: its digest is what runs. Under
        // `locked` the tag is asked for too, to refuse one that moved.
        let target = match &entry {
            Some(e) => parsed.at(e.manifest),
            None => parsed.clone(),
        };
        let check_tag = registry.locked && entry.is_some() && parsed.digest().is_none();
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
                return Err(AppError::Drift(format!(
                    "the tag {reference} moved: the lock has {}, the registry now {now} (run `tickbox lock` to accept it)",
                    e.manifest
                )));
            }
        }
        if pulled.fetched {
            tracing::info!(reference = %pulled.reference, wasm = %pulled.wasm_digest, "pulled");
        }
        Ok((pulled, entry))
    }

    /// The pinned form of a reference this App resolved.
    pub fn pinned(&self, reference: &str) -> Option<String> {
        let key = resolution_key(reference).ok()?;
        tickbox_host::util::lock(&self.resolved)
            .get(&key)
            .map(|p| p.reference.to_string())
    }

    /// The Tick this App pulled into `path`, if any.
    pub fn pulled_as(&self, path: &Path) -> Option<Pulled> {
        tickbox_host::util::lock(&self.resolved)
            .values()
            .find(|p| p.wasm == path)
            .cloned()
    }
}

/// A Tick to push: its wasm, the grants it requests (a manifest), and
/// the SSH key that signs it, if any.
#[derive(Clone, Debug)]
pub struct Push {
    /// Where it goes: a tag (`oci://HOST[:PORT]/REPO:TAG`).
    pub reference: String,
    /// The component or module.
    pub wasm: PathBuf,
    /// The manifest of requested grants (else `WASM.tick.toml` when it exists).
    pub manifest: Option<PathBuf>,
    /// An SSH private key: the manifest digest is signed with it and the
    /// signature pushed as a referrer.
    pub sign: Option<PathBuf>,
}

/// What a push made.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// The reference pinned to the manifest the push made.
    pub reference: Reference,
    /// The manifest's digest.
    pub manifest: tickbox_registry::Digest,
    /// The wasm layer's digest.
    pub wasm: tickbox_registry::Digest,
    /// Whether a manifest of requested grants went with it.
    pub requested: bool,
    /// The signature's manifest digest, when signed.
    pub signature: Option<tickbox_registry::Digest>,
}

impl crate::App {
    /// Pushes a Tick (and its signature, when a key is given). The wasm
    /// and the manifest are checked as a pull will read them.
    pub fn push(&self, push: &Push, registry: &RegistrySettings) -> Result<Pushed, AppError> {
        let reference = parse(&push.reference)?;
        if reference.digest().is_some() {
            return Err(AppError::usage(
                "push to a tag (REPO:TAG); the digest is what the push makes",
            ));
        }
        let max = tickbox_sandbox::limits::DEFAULT_MAX_WASM;
        let wasm = tickbox_sandbox::read_wasm(&push.wasm, max).map_err(AppError::usage)?;
        let kind = tickbox_sandbox::detect(&wasm).ok_or_else(|| {
            AppError::Usage(format!(
                "{}: not a wasm component or module",
                push.wasm.display()
            ))
        })?;
        let manifest = push
            .manifest
            .clone()
            .or_else(|| Some(push.wasm.with_extension("tick.toml")).filter(|p| p.exists()));
        let requested = match &manifest {
            Some(p) => {
                crate::grants::read_grant_file(p)?;
                Some(
                    std::fs::read_to_string(p)
                        .map_err(|e| AppError::Usage(format!("{}: {e}", p.display())))?,
                )
            }
            None => None,
        };
        let component = kind == tickbox_sandbox::WasmKind::Component;
        let config = registry.config(&self.settings)?;
        let key = push.sign.clone();
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
        Ok(Pushed {
            reference: reference.at(digest),
            manifest: digest,
            wasm: tickbox_registry::Digest::of(&wasm),
            requested: requested.is_some(),
            signature,
        })
    }

    /// Resolves each reference afresh (checking signers as a start
    /// would) and records its digest and signer in the lock file the
    /// settings name (else the default path, where `locked` reads).
    /// Returns the file and the entries written.
    pub fn lock(
        &self,
        references: &[String],
        registry: &RegistrySettings,
    ) -> Result<(PathBuf, Vec<lock::Entry>), AppError> {
        let path = registry
            .lock
            .as_ref()
            .map(|s| s.path.clone())
            .unwrap_or_else(|| registry.default_lock_path());
        let mut file = read_lock(&path)?;
        // Resolved afresh: the lock is what is being written.
        let fresh = RegistrySettings {
            lock: None,
            locked: false,
            ignore_lock: true,
            ..registry.clone()
        };
        let mut written = Vec::new();
        for r in references {
            let pulled = self.resolve(r, &fresh, tickbox_sandbox::limits::DEFAULT_MAX_WASM)?;
            let entry = lock::Entry {
                reference: parse(r)?,
                manifest: pulled.manifest,
                signer: pulled.signer.clone(),
            };
            file.set(entry.clone());
            written.push(entry);
        }
        write_lock(&file, &path)?;
        Ok((path, written))
    }
}

fn locked_target(
    parsed: &Reference,
    registry: &RegistrySettings,
) -> Result<Option<lock::Entry>, AppError> {
    let Some(source) = registry.lock_source() else {
        return Ok(None);
    };
    let lock = read_lock(&source.path)?;
    match lock.get(parsed) {
        Some(e) => Ok(Some(e.clone())),
        None if registry.locked && parsed.digest().is_none() => Err(AppError::NotLocked {
            reference: parsed.to_string(),
            lock: source.to_string(),
            path: source.path.clone(),
        }),
        None => Ok(None),
    }
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

/// Which signers policy, lock file and trust store (`trust`, found by
/// the caller) apply under `opts`,
/// where each was found, and for `reference` what the policy decides and
/// what the lock holds (`tickbox policy show`). A policy that cannot be
/// used is its error (exit 2, naming the rule).
pub fn files_report(
    opts: &RegistrySettings,
    settings: &Settings,
    trust: Option<Source>,
    reference: Option<&str>,
) -> Result<Value, AppError> {
    let policy = opts.signers_policy(settings)?;
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
            v["default"] = json!(settings.default_signers_file);
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
    let trust = match trust {
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_reference_is_resolved_once_under_every_spelling() {
        let key = |r: &str| super::resolution_key(r).unwrap();
        for other in [
            "oci://LocalHost:5000/t/c:v1",
            "oci://127.0.0.1:5000/t/c:v1",
            "oci://[::1]:5000/t/c:v1",
        ] {
            assert_eq!(key(other), key("oci://localhost:5000/t/c:v1"), "{other}");
        }
        // Positive controls: another tag, port or repository is another resolution.
        for other in [
            "oci://localhost:5000/t/c:v2",
            "oci://localhost:5001/t/c:v1",
            "oci://localhost:5000/t/cc:v1",
            "oci://localhost:5000/t/c@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            assert_ne!(key("oci://localhost:5000/t/c:v1"), key(other), "{other}");
        }
    }
}
