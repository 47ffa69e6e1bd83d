//! From a [`Request`] to a [`Launcher`] and an initialized session.

use crate::consent::{self, Asking, Decided, Subject};
use crate::grants::{manifest_of, parse_manifest, read_policy};
use crate::registry::RegistrySettings;
use crate::{App, AppError, Notice};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tickbox_host::backend::native::NativeSpec;
use tickbox_host::session::{Session, SessionConfig};
use tickbox_protocol::limits::CALL_TIMEOUT;
use tickbox_registry::Pulled;
use tickbox_sandbox::grants::{GrantSpec, Grants};
use tickbox_sandbox::{LaunchError, Launcher, WasmDigest, WasmKind};
use tickbox_telemetry::audit::Audit;

/// What to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A file: a `.wasm` Tick (sandboxed) or a native executable (a bare
    /// name is looked up on PATH).
    File(PathBuf),
    /// A registry reference, `oci://HOST/REPO:TAG` or `…@sha256:…`.
    Oci(String),
    /// A native Tick's command line.
    Command(Vec<String>),
}

impl Target {
    /// A Tick named by one string: a registry reference, else a file.
    pub fn named(tick: &str) -> Target {
        if tickbox_registry::is_reference(tick) {
            Target::Oci(tick.to_string())
        } else {
            Target::File(PathBuf::from(tick))
        }
    }

    /// Whether it runs in the sandbox: a registry reference (only wasm is
    /// pulled) or a wasm file.
    pub fn is_sandboxed(&self) -> bool {
        match self {
            Target::Oci(_) => true,
            Target::File(p) => tickbox_sandbox::is_wasm_path(p),
            Target::Command(_) => false,
        }
    }
}

/// Whether a Tick named by a path runs sandboxed (see [`Target::is_sandboxed`]).
pub fn is_sandboxed(path: &Path) -> bool {
    path.to_str().is_some_and(tickbox_registry::is_reference) || tickbox_sandbox::is_wasm_path(path)
}

/// Everything about one start, as typed values.
#[derive(Clone)]
pub struct Request {
    pub target: Target,
    /// The grants and bounds asked for here; they win over the policy file's.
    pub grants: GrantSpec,
    /// A grant policy file, read under [`Request::grants`].
    pub policy: Option<PathBuf>,
    /// A native Tick's working directory.
    pub cwd: Option<PathBuf>,
    /// How long a call may take before its outcome is reported unknown.
    pub call_timeout: Duration,
    /// The audit stream its starts and calls are recorded in.
    pub audit: Option<Audit>,
    /// How an `oci://` Tick is pulled and checked.
    pub registry: RegistrySettings,
    /// Who may approve what its manifest asks for.
    pub asking: Asking,
    /// Neither read nor write the compile cache.
    pub no_cache: bool,
}

impl Request {
    /// A request for `target` with nothing granted, nobody to approve a
    /// manifest's requests and the default call timeout.
    pub fn new(target: Target) -> Request {
        Request {
            target,
            grants: GrantSpec::default(),
            policy: None,
            cwd: None,
            call_timeout: CALL_TIMEOUT,
            audit: None,
            registry: RegistrySettings::default(),
            asking: Asking::Nobody("no approver was given"),
            no_cache: false,
        }
    }

    /// The grants of the policy file with this request's on top.
    pub fn grant_spec(&self) -> Result<GrantSpec, AppError> {
        let mut spec = match &self.policy {
            Some(p) => read_policy(p)?.0,
            None => GrantSpec::default(),
        };
        spec.merge(self.grants.clone());
        Ok(spec)
    }

    /// The registry settings, with the default lock beside the policy file.
    pub fn registry(&self) -> RegistrySettings {
        self.registry.lock_beside(self.policy.as_deref())
    }
}

/// A start that failed, with the Tick's last words when it got as far
/// as initializing.
impl From<LaunchError> for AppError {
    fn from(e: LaunchError) -> AppError {
        match e {
            LaunchError::Init(e) => AppError::Start {
                last_words: e.last_words.clone(),
                message: e.to_string(),
            },
            e => AppError::Start {
                message: e.to_string(),
                last_words: Vec::new(),
            },
        }
    }
}

/// How a Tick was started, for `tickbox info`.
// One per opened Tick: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Backend {
    /// A subprocess with the user's own permissions.
    Native { argv: Vec<String> },
    /// A sandboxed guest.
    Wasm {
        path: PathBuf,
        kind: WasmKind,
        grants: Grants,
        requested: Option<Box<GrantSpec>>,
        /// The registry reference it was pulled by, pinned.
        pulled: Option<Box<Pulled>>,
    },
}

/// An initialized Tick.
pub struct Opened {
    pub session: Session,
    pub backend: Backend,
    /// How it runs.
    pub kind: tickbox_host::TickKind,
}

impl Opened {
    /// Shuts the Tick down and waits until it is gone.
    pub async fn close(self) {
        self.session.shutdown().await;
    }
}

impl App {
    /// Resolves a request into the sandbox's launcher, recording its
    /// starts in the request's audit stream; starts nothing yet.
    pub fn launcher(&self, request: &Request) -> Result<Launcher, AppError> {
        Ok(self.unaudited(request)?.audited(request.audit.clone()))
    }

    /// Starts and initializes a Tick.
    pub async fn open(&self, request: &Request) -> Result<Opened, AppError> {
        let launcher = self.launcher(request)?;
        let config = SessionConfig {
            call_timeout: request.call_timeout,
            ..SessionConfig::default()
        };
        let session = launcher.open(config).await?;
        Ok(Opened {
            session,
            backend: self.backend(&launcher),
            kind: launcher.kind(),
        })
    }

    fn unaudited(&self, request: &Request) -> Result<Launcher, AppError> {
        let grant_spec = request.grant_spec()?;
        if let Target::File(path) = &request.target {
            let p = path.display();
            let meta = std::fs::metadata(path);
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                return Err(AppError::Session(format!(
                    "cannot start the Tick: `{p}` is a directory: give a Tick's executable or .wasm file (or `-- COMMAND`)"
                )));
            }
            // A bare name (no `/`, not .wasm) is looked up on PATH by the
            // native launcher, which says so itself.
            let missing = meta.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
            let s = path.to_string_lossy();
            if missing && (s.contains('/') || s.ends_with(".wasm")) {
                return Err(AppError::Session(format!(
                    "cannot start the Tick: `{p}` does not exist"
                )));
            }
        }
        let argv = match &request.target {
            Target::Oci(reference) => return self.oci_launcher(reference, grant_spec, request),
            Target::File(path) if tickbox_sandbox::is_wasm_path(path) => {
                return self.wasm_launcher(path.clone(), grant_spec, request)
            }
            Target::File(path) => vec![path.to_string_lossy().into_owned()],
            Target::Command(argv) => argv.clone(),
        };
        // Native Ticks run with the user's own permissions: a sandbox grant
        // would promise a confinement that does not exist, so it is refused.
        if !grant_spec.dir.is_empty()
            || !grant_spec.allow_net.is_empty()
            || !grant_spec.allow_http.is_empty()
            || grant_spec.http_ca.is_some()
            || grant_spec.has_bounds()
            || request.policy.is_some()
        {
            return Err(AppError::NativeGrants);
        }
        let grants = grant_spec.resolve()?;
        Ok(Launcher::native(NativeSpec {
            argv,
            cwd: request.cwd.clone(),
            env: grants.env,
            hygiene: self.settings().native.clone(),
            ..Default::default()
        }))
    }

    /// A Tick from a registry: resolved once per App into the store, then
    /// started from there pinned to its wasm layer's digest.
    fn oci_launcher(
        &self,
        reference: &str,
        grant_spec: GrantSpec,
        request: &Request,
    ) -> Result<Launcher, AppError> {
        if request.cwd.is_some() {
            return Err(AppError::CwdOnWasm);
        }
        let flags = grant_spec.resolve()?;
        let (pulled, pin, decided) = self.pull_and_decide(
            reference,
            flags.limits.max_wasm_size,
            &request.registry(),
            &request.asking,
        )?;
        let grants = match &decided {
            Some(d) => self.with_requested(&d.requested, grant_spec)?,
            None => flags,
        };
        let engine = self.engine(request.no_cache)?;
        Ok(Launcher::wasm(engine, pulled.wasm.clone(), grants)
            .map_err(AppError::session)?
            .pinned(pin))
    }

    /// A reference resolved (once per App), the wasm digest its start is
    /// pinned to, and what its requested-grants layer asks for as a
    /// consent subject (`None`: it asks for nothing).
    pub fn pulled_subject(
        &self,
        reference: &str,
        max_wasm: u64,
        registry: &RegistrySettings,
    ) -> Result<(Pulled, WasmDigest, Option<Subject>), AppError> {
        let pulled = self.resolve(reference, registry, max_wasm)?;
        // One digest type from the registry to the sandbox: handed over as it is.
        let pin = pulled.wasm_digest;
        let subject = match &pulled.requested {
            None => None,
            Some(text) => {
                let requested =
                    parse_manifest(text, &pulled.reference.to_string()).map_err(AppError::usage)?;
                consent::subject_of_pulled(
                    pulled.reference.name().to_string(),
                    pulled.reference.to_string(),
                    pin,
                    pulled.signer.clone(),
                    requested,
                )?
            }
        };
        Ok((pulled, pin, subject))
    }

    /// Resolves a reference (once per App) and decides what its
    /// requested-grants layer may add: granted only under an approval of
    /// this content by this signer, as for a local file.
    pub fn pull_and_decide(
        &self,
        reference: &str,
        max_wasm: u64,
        registry: &RegistrySettings,
        asking: &Asking,
    ) -> Result<(Pulled, WasmDigest, Option<Decided>), AppError> {
        let (pulled, pin, subject) = self.pulled_subject(reference, max_wasm, registry)?;
        if let Asking::Decided(d) = asking {
            return Ok((pulled, pin, d.as_deref().cloned()));
        }
        let Some(subject) = subject else {
            return Ok((pulled, pin, None));
        };
        consent::decide(&subject, asking, &consent::trust_dir(&self.settings)?)?;
        let decided = Decided {
            digest: pin,
            requested: subject.requested,
        };
        Ok((pulled, pin, Some(decided)))
    }

    /// Decides what a local wasm file's manifest may add: `None` when it
    /// asks for nothing (or was decided to get nothing).
    pub fn decide_file(&self, path: &Path, asking: &Asking) -> Result<Option<Decided>, AppError> {
        if let Asking::Decided(d) = asking {
            return Ok(d.as_deref().cloned());
        }
        let Some(subject) = consent::subject_of(path, None)? else {
            return Ok(None);
        };
        consent::decide(&subject, asking, &consent::trust_dir(&self.settings)?)?;
        Ok(Some(Decided {
            digest: subject.digest,
            requested: subject.requested,
        }))
    }

    fn wasm_launcher(
        &self,
        path: PathBuf,
        grant_spec: GrantSpec,
        request: &Request,
    ) -> Result<Launcher, AppError> {
        if request.cwd.is_some() {
            return Err(AppError::CwdOnWasm);
        }
        let mut grants = grant_spec.resolve()?;
        // Only the header here: the whole file is read when an instance starts.
        if tickbox_sandbox::detect_file(&path).is_none() {
            return Err(AppError::Start {
                message: LaunchError::NotWasm { path }.to_string(),
                last_words: Vec::new(),
            });
        }
        // What the manifest asks for is granted only under an approval of
        // these very bytes (asked for here, before anything of the Tick
        // runs); a malformed manifest is a usage error, found before the
        // engine exists.
        let decided = self.decide_file(&path, &request.asking)?;
        if let Some(d) = &decided {
            grants = self.with_requested(&d.requested, grant_spec)?;
        }
        let engine = self.engine(request.no_cache)?;
        let launcher = Launcher::wasm(engine, path, grants).map_err(AppError::session)?;
        // Started only if the bytes are still the ones approved.
        Ok(match decided {
            Some(d) => launcher.pinned(d.digest),
            None => launcher,
        })
    }

    /// The grants of an approved request together with the caller's: the
    /// caller's win on every bound; a requested directory is only a guest
    /// path, granted where the caller maps it (`dir = "HOST::GUEST"`).
    fn with_requested(&self, requested: &GrantSpec, flags: GrantSpec) -> Result<Grants, AppError> {
        let mut spec = requested.clone();
        spec.dir.clear();
        spec.merge(flags);
        let grants = spec.resolve()?;
        let guests: Vec<String> = grants.dirs.iter().map(|d| d.guest.clone()).collect();
        for guest in consent::unmapped_dirs(requested, &guests) {
            self.notice(&Notice::UnmappedDir { guest });
        }
        Ok(grants)
    }

    /// How the Tick a launcher starts runs, for `tickbox info`.
    fn backend(&self, launcher: &Launcher) -> Backend {
        match launcher {
            Launcher::Native(spec) => Backend::Native {
                argv: spec.argv.clone(),
            },
            Launcher::Wasm { spec, kind, .. } => {
                let pulled = self.pulled_as(&spec.path);
                // Read (and found well-formed) when the launcher was made.
                let requested = match &pulled {
                    Some(p) => p
                        .requested
                        .as_deref()
                        .and_then(|t| parse_manifest(t, "").ok()),
                    None => manifest_of(&spec.path).ok().flatten(),
                };
                Backend::Wasm {
                    path: spec.path.clone(),
                    kind: *kind,
                    grants: spec.grants.clone(),
                    requested: requested.map(Box::new),
                    pulled: pulled.map(Box::new),
                }
            }
        }
    }
}

impl App {
    /// The `[tick]` table of a recording (`tickbox run --record`, the
    /// inspector's export): the Tick as `request` started it, a reference
    /// pinned, paths made absolute so the scenario runs from anywhere.
    pub fn record_tick(
        &self,
        request: &Request,
        kind: tickbox_host::TickKind,
        size: (u16, u16),
    ) -> tickbox_conformance::scenario::RecordTick {
        use tickbox_conformance::scenario::{dir_grant, RecordTick, RecordTime};
        use tickbox_host::TickKind;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let grants = request.grant_spec().unwrap_or_default();
        let time = match kind {
            TickKind::Native => RecordTime::Native,
            TickKind::WasmComponent => RecordTime::Virtual,
            TickKind::WasmModule => RecordTime::RealWasm,
        };
        let native = time == RecordTime::Native;
        let (path, command) = match &request.target {
            // A reference is recorded pinned, so a replay runs the same bytes.
            Target::Oci(r) => (
                Some(PathBuf::from(self.pinned(r).unwrap_or_else(|| r.clone()))),
                Vec::new(),
            ),
            Target::File(p) => (Some(abs(p)), Vec::new()),
            Target::Command(argv) => (None, argv.clone()),
        };
        RecordTick {
            path,
            cwd: native.then(|| request.cwd.as_deref().map_or_else(|| cwd.clone(), abs)),
            command,
            // The whole spec: every grant and bound the session had, with
            // the host paths absolute so the scenario runs from anywhere.
            grants: GrantSpec {
                dir: grants.dir.iter().map(|d| dir_grant(&cwd, d)).collect(),
                http_ca: grants
                    .http_ca
                    .as_deref()
                    .map(|c| abs(Path::new(c)).display().to_string()),
                ..grants.clone()
            },
            size,
            time,
        }
    }
}
