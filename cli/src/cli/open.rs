//! Naming and starting a Tick: a path as the first positional, or
//! `-- COMMAND [ARGS...]` at the end for a native Tick.

use super::exit::Exit;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tickbox_runtime::backend::native::NativeSpec;
use tickbox_runtime::backend::wasm::grants::{GrantError, GrantSpec, Grants};
use tickbox_runtime::backend::wasm::{self, WasmEngine, WasmKind};
use tickbox_runtime::protocol::limits::CALL_TIMEOUT;
use tickbox_runtime::session::{Session, SessionConfig};
use tickbox_runtime::{LaunchError, Launcher};

/// A command that takes the Tick as its only positional.
#[derive(Args)]
pub struct TickArgs {
    /// The Tick: a path to an executable or a .wasm file, a registry reference oci://HOST/REPO:TAG (or @sha256:…), or a live instance as @ID or @NAME
    #[arg(value_name = "TICK")]
    pub tick: Option<String>,
    #[command(flatten)]
    pub opts: TickOpts,
}

/// How a command starts its Tick.
#[derive(Args)]
pub struct TickOpts {
    /// Working directory for a native Tick
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Seconds before a call's outcome is reported unknown
    #[arg(long, value_name = "SECONDS", default_value_t = CALL_TIMEOUT.as_secs_f64())]
    pub call_timeout: f64,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
    /// Grant a wasm Tick a directory or a single file (repeatable; `:ro` for read-only; `:rw,max=SIZE` bounds the bytes a component writes through it)
    #[arg(
        long = "dir",
        value_name = "HOST_PATH[::GUEST_PATH][:ro|:rw[,max=SIZE]]"
    )]
    pub dir: Vec<String>,
    /// Let a wasm Tick connect to HOST:PORT (repeatable; PORT may be `*`; a name also allows looking it up)
    #[arg(long = "allow-net", value_name = "HOST:PORT")]
    pub allow_net: Vec<String>,
    /// Let a wasm component send HTTP requests (wasi:http) to this origin: scheme, host and port must match exactly (repeatable)
    #[arg(long = "allow-http", value_name = "http[s]://HOST[:PORT]")]
    pub allow_http: Vec<String>,
    /// Trust the CA certificates in this PEM file for --allow-http https origins, besides the webpki roots
    #[arg(long = "http-ca", value_name = "FILE")]
    pub http_ca: Option<String>,
    /// Pass an environment variable (repeatable; the value comes from tickbox's environment when omitted)
    #[arg(long = "env", value_name = "NAME[=VALUE]")]
    pub env: Vec<String>,
    /// Read grants from a TOML policy file (keys: dir, allow_net, allow_http, http_ca, env, max_memory, max_handles, max_wasm_size, compile_timeout, compile_memory, max_write; and audit, audit_args, audit_sync)
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Append an audit stream to FILE (`-`: stderr): one JSON line per start, call, approval, denial, limit and end (docs/AUDIT.md)
    #[arg(long, value_name = "FILE")]
    pub audit: Option<String>,
    /// Record call arguments in the audit stream (only their SHA-256 otherwise)
    #[arg(long)]
    pub audit_args: bool,
    /// Release a call's answer only once its audit line is written and fdatasync'ed, so an answered call is on record even if the host is killed at once (needs --audit FILE)
    #[arg(long)]
    pub audit_sync: bool,
    /// Who starts the Ticks, for the audit stream: set by the command, not a flag.
    #[arg(skip)]
    pub audit_origin: tickbox_runtime::audit::Origin,
    /// Who else counts the Tick's audit events (`tickbox mcp --metrics`):
    /// set by the command, not a flag.
    #[arg(skip)]
    pub audit_observers: Vec<Arc<dyn tickbox_runtime::audit::AuditObserver>>,
    /// Bound on a wasm Tick's linear memories and tables, all together
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    #[command(flatten)]
    pub bounds: BoundOpts,
    #[command(flatten)]
    pub registry: super::oci::RegistryOpts,
    /// Do not read or write the compile cache for wasm Ticks
    #[arg(long)]
    pub no_cache: bool,
    /// A native Tick's command line, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Who may approve what a wasm Tick's manifest asks for: set by the
    /// command (`tickbox mcp` and `tickbox test` never ask), not a flag.
    #[arg(skip)]
    pub asking: super::consent::Asking,
}

/// The other per-Tick bounds of a wasm Tick (see the README's sandbox table).
#[derive(Args, Default, Clone)]
pub struct BoundOpts {
    /// Bound on a wasm Tick's open WASI handles: files, sockets, streams
    #[arg(long, value_name = "N")]
    pub max_handles: Option<String>,
    /// Largest .wasm file loaded
    #[arg(long, value_name = "SIZE")]
    pub max_wasm_size: Option<String>,
    /// Seconds compiling a wasm Tick may take
    #[arg(long, value_name = "SECONDS")]
    pub compile_timeout: Option<String>,
    /// Memory the compiler may use for a wasm Tick
    #[arg(long, value_name = "SIZE")]
    pub compile_memory: Option<String>,
    /// Bytes a wasm component may write to files, all grants together; each file or directory it creates costs an entry's worth of it
    #[arg(long, value_name = "SIZE")]
    pub max_write: Option<String>,
}

/// The defaults `--help` shows for the sandbox bounds, from the sandbox's
/// limits table (so help and behaviour cannot disagree): (argument id, text).
/// The command-line flag of a grant key: the key with dashes
/// (`max_memory` is `--max-memory`). The one place that spells it; the
/// libraries name keys only.
pub fn flag_of(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

/// A grant error as a person on the command line reads it: its key
/// written as the flag that gives it (`dir …` → `--dir …`).
pub fn grant_error_line(e: &GrantError) -> String {
    let message = e.to_string();
    match e
        .key()
        .and_then(|key| Some((key, message.strip_prefix(key)?)))
    {
        Some((key, rest)) => format!("{}{rest}", flag_of(key)),
        None => message,
    }
}

/// A spec as the flags that give it (`--dir=X`, `--max-write=1MiB`, …):
/// every field, from the serialized spec, so a field added to the spec
/// reaches this without a change here.
pub fn spec_args(spec: &GrantSpec) -> Vec<String> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(spec) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in fields {
        let values = match value {
            serde_json::Value::Array(items) => items,
            serde_json::Value::Null => Vec::new(),
            one => vec![one],
        };
        for v in values {
            if let serde_json::Value::String(v) = v {
                // `--flag=VALUE`: a value starting with `-` stays a value.
                out.push(format!("{}={v}", flag_of(&key)));
            }
        }
    }
    out
}

pub fn bound_defaults() -> Vec<(&'static str, String)> {
    use tickbox_runtime::backend::wasm::limits;
    vec![
        ("max_memory", size(limits::DEFAULT_MAX_MEMORY)),
        ("max_handles", limits::DEFAULT_MAX_HANDLES.to_string()),
        ("max_wasm_size", size(limits::DEFAULT_MAX_WASM)),
        (
            "compile_timeout",
            limits::DEFAULT_COMPILE_TIMEOUT.as_secs().to_string(),
        ),
        ("compile_memory", size(limits::DEFAULT_COMPILE_MEMORY)),
        (
            "max_write",
            format!("no quota; an entry costs {}", size(limits::ENTRY_COST)),
        ),
    ]
}

/// A size as `--max-memory` and the others take it: the largest binary
/// unit that divides it (`256MiB`, `4GiB`, `4KiB`), else bytes.
pub(crate) fn size(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Which Tick to start.
#[derive(Clone)]
pub enum TickSpec {
    /// A path given as the first positional.
    Path(String),
    /// `-- COMMAND [ARGS...]`.
    Command(Vec<String>),
    /// `@ID` or `@NAME`: a live instance (see `tickbox ls`), without the `@`.
    Live(String),
}

impl TickSpec {
    /// Classifies a TICK positional: `@…` names a live instance.
    pub fn parse(tick: &str) -> TickSpec {
        match tick.strip_prefix('@') {
            Some(target) => TickSpec::Live(target.to_string()),
            None => TickSpec::Path(tick.to_string()),
        }
    }
}

impl TickArgs {
    /// Resolves the Tick named on the command line.
    pub fn spec(&self) -> Result<TickSpec, Exit> {
        self.opts.spec(self.tick.clone())
    }
}

impl TickOpts {
    /// Resolves the Tick given its path positional, if any, and `-- COMMAND`.
    pub fn spec(&self, path: Option<String>) -> Result<TickSpec, Exit> {
        match (path, self.command.is_empty()) {
            (Some(p), true) => Ok(TickSpec::parse(&p)),
            (None, false) => Ok(TickSpec::Command(self.command.clone())),
            (Some(p), false) => Err(Exit::usage(format!(
                "name the Tick once: either `{p}` or `-- {}`",
                self.command.join(" ")
            ))),
            (None, true) => Err(Exit::usage(
                "no Tick given: pass a path, or `-- COMMAND [ARGS...]` at the end",
            )),
        }
    }

    /// The grants from the policy file and the flags.
    pub fn grant_spec(&self) -> Result<GrantSpec, Exit> {
        let mut spec = match &self.policy {
            Some(p) => read_policy(p).map_err(Exit::usage)?.0,
            None => GrantSpec::default(),
        };
        spec.merge(GrantSpec {
            dir: self.dir.clone(),
            allow_net: self.allow_net.clone(),
            allow_http: self.allow_http.clone(),
            http_ca: self.http_ca.clone(),
            env: self.env.clone(),
            max_memory: self.max_memory.clone(),
            max_handles: self.bounds.max_handles.clone(),
            max_wasm_size: self.bounds.max_wasm_size.clone(),
            compile_timeout: self.bounds.compile_timeout.clone(),
            compile_memory: self.bounds.compile_memory.clone(),
            max_write: self.bounds.max_write.clone(),
        });
        Ok(spec)
    }

    /// Where the audit stream goes: `--audit` (with `--audit-args` and
    /// `--audit-sync`), else the policy file's `audit` key (with its
    /// `audit_args` and `audit_sync`, which the flags can only add to).
    pub fn audit_wanted(&self) -> Result<super::audit::Wanted, Exit> {
        if let Some(to) = &self.audit {
            return Ok(super::audit::Wanted {
                to: Some(to.clone()),
                args: self.audit_args,
                sync: self.audit_sync,
            });
        }
        let mut wanted = match &self.policy {
            Some(p) => read_policy(p).map_err(Exit::usage)?.1,
            None => super::audit::Wanted::default(),
        };
        wanted.args |= self.audit_args;
        wanted.sync |= self.audit_sync;
        Ok(wanted)
    }

    pub fn config(&self) -> Result<SessionConfig, Exit> {
        Ok(SessionConfig {
            call_timeout: call_timeout(self.call_timeout)?,
            ..SessionConfig::default()
        })
    }
}

/// `--call-timeout` as a duration: positive and at most a day (the bound
/// the live socket accepts too).
pub fn call_timeout(seconds: f64) -> Result<Duration, Exit> {
    let max = tickbox_runtime::live::wire::MAX_CALL_TIMEOUT_MS as f64 / 1000.0;
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= max) {
        return Err(Exit::usage(format!(
            "--call-timeout must be a positive number of seconds, at most {max}"
        )));
    }
    Ok(Duration::from_secs_f64(seconds))
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
        pulled: Option<Box<tickbox_registry::Pulled>>,
    },
}

/// An initialized Tick.
pub struct Opened {
    pub session: Session,
    pub backend: Backend,
    /// How it runs.
    pub kind: tickbox_runtime::TickKind,
}

impl Opened {
    /// Shuts the Tick down and waits until it is gone.
    pub async fn close(self) {
        self.session.shutdown().await;
    }
}

/// Whether a TICK path names a sandboxed Tick: a registry reference (only
/// wasm is pulled) or a wasm file.
pub fn is_sandboxed(path: &Path) -> bool {
    path.to_str().is_some_and(tickbox_registry::is_reference) || wasm::is_wasm_path(path)
}

/// Resolves the TICK and the sandbox flags into the library's launcher,
/// recording its starts in the audit stream the flags or the policy ask
/// for; starts nothing yet.
pub fn launcher(spec: TickSpec, args: &TickOpts) -> Result<Launcher, Exit> {
    let audit = super::audit::handle(
        args.audit_origin,
        &args.audit_wanted()?,
        &args.audit_observers,
    )?;
    Ok(unaudited(spec, args)?.audited(audit))
}

fn unaudited(spec: TickSpec, args: &TickOpts) -> Result<Launcher, Exit> {
    let grant_spec = args.grant_spec()?;
    if let TickSpec::Path(p) = &spec {
        let path = Path::new(p);
        if !tickbox_registry::is_reference(p) {
            let meta = std::fs::metadata(path);
            if meta.as_ref().is_ok_and(|m| m.is_dir()) {
                return Err(Exit::session(format!(
                    "cannot start the Tick: `{p}` is a directory: give a Tick's executable or .wasm file (or `-- COMMAND`)"
                )));
            }
            // A bare name (no `/`, not .wasm) is looked up on PATH by the
            // native launcher, which says so itself.
            let missing = meta.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
            if missing && (p.contains('/') || p.ends_with(".wasm")) {
                return Err(Exit::session(format!(
                    "cannot start the Tick: `{p}` does not exist"
                )));
            }
        }
    }
    let argv = match spec {
        TickSpec::Path(p) if tickbox_registry::is_reference(&p) => {
            return oci_launcher(&p, grant_spec, args)
        }
        TickSpec::Path(p) if wasm::is_wasm_path(std::path::Path::new(&p)) => {
            return wasm_launcher(PathBuf::from(p), grant_spec, args)
        }
        TickSpec::Path(p) => vec![p],
        TickSpec::Command(argv) => argv,
        TickSpec::Live(t) => {
            return Err(Exit::usage(format!(
                "`@{t}` names a live instance, which this command cannot use"
            )))
        }
    };
    // Native Ticks run with the user's own permissions: a sandbox grant
    // would promise a confinement that does not exist, so it is refused.
    if !grant_spec.dir.is_empty()
        || !grant_spec.allow_net.is_empty()
        || !grant_spec.allow_http.is_empty()
        || grant_spec.http_ca.is_some()
        || grant_spec.has_bounds()
        || args.policy.is_some()
    {
        return Err(Exit::usage(
            "--dir, --allow-net, --allow-http, --http-ca, --max-memory, --max-handles, --max-wasm-size, --compile-timeout, --compile-memory, --max-write and --policy apply to wasm Ticks only; a native Tick runs with your own permissions",
        ));
    }
    let grants = grant_spec
        .resolve()
        .map_err(|e| Exit::usage(grant_error_line(&e)))?;
    Ok(Launcher::native(NativeSpec {
        argv,
        cwd: args.cwd.clone(),
        env: grants.env,
        ..Default::default()
    }))
}

/// A Tick from a registry: resolved once per process into the store, then
/// started from there pinned to its wasm layer's digest.
fn oci_launcher(reference: &str, grant_spec: GrantSpec, args: &TickOpts) -> Result<Launcher, Exit> {
    if args.cwd.is_some() {
        return Err(Exit::usage(
            "--cwd applies to native Ticks; grant a wasm Tick a directory with --dir",
        ));
    }
    let flags = grant_spec
        .resolve()
        .map_err(|e| Exit::usage(grant_error_line(&e)))?;
    let (pulled, pin, decided) = pull_and_decide(reference, flags.limits.max_wasm_size, args)?;
    let grants = match &decided {
        Some(d) => {
            let grants = with_requested(&d.requested, grant_spec)?;
            let guests: Vec<String> = grants.dirs.iter().map(|d| d.guest.clone()).collect();
            for note in super::consent::unmapped_dirs(&d.requested, &guests) {
                notice(&note);
            }
            grants
        }
        None => flags,
    };
    let engine = engine(args.no_cache)?;
    Ok(Launcher::wasm(engine, pulled.wasm.clone(), grants)
        .map_err(Exit::session)?
        .pinned(pin))
}

/// A reference resolved (once per process), the wasm digest its start is
/// pinned to, and what its requested-grants layer asks for as a consent
/// subject (`None`: it asks for nothing).
pub fn pulled_subject(
    reference: &str,
    max_wasm: u64,
    registry: &super::oci::RegistryOpts,
) -> Result<
    (
        tickbox_registry::Pulled,
        tickbox_runtime::backend::wasm::WasmDigest,
        Option<super::consent::Subject>,
    ),
    Exit,
> {
    let pulled = super::oci::resolve(reference, registry, max_wasm)?;
    let pin: tickbox_runtime::backend::wasm::WasmDigest = pulled
        .wasm_digest
        .to_string()
        .parse()
        .map_err(|e| Exit::session(format!("{}: {e}", pulled.reference)))?;
    let subject = match &pulled.requested {
        None => None,
        Some(text) => {
            let requested =
                parse_manifest(text, &pulled.reference.to_string()).map_err(Exit::usage)?;
            super::consent::subject_of_pulled(
                pulled.reference.name(),
                pulled.reference.to_string(),
                pin,
                pulled.signer.clone(),
                requested,
            )?
        }
    };
    Ok((pulled, pin, subject))
}

/// Resolves a reference (once per process) and decides what its
/// requested-grants layer may add: granted only under an approval of this
/// content by this signer, as for a local file (`tickbox run` decides
/// before it forks, then the host takes that decision).
pub fn pull_and_decide(
    reference: &str,
    max_wasm: u64,
    args: &TickOpts,
) -> Result<
    (
        tickbox_registry::Pulled,
        tickbox_runtime::backend::wasm::WasmDigest,
        Option<super::consent::Decided>,
    ),
    Exit,
> {
    let registry = args.registry.lock_beside(args.policy.as_deref());
    let (pulled, pin, subject) = pulled_subject(reference, max_wasm, &registry)?;
    if let super::consent::Asking::Decided(d) = &args.asking {
        return Ok((pulled, pin, d.as_deref().cloned()));
    }
    let Some(subject) = subject else {
        return Ok((pulled, pin, None));
    };
    super::consent::decide(&subject, &args.asking)?;
    let decided = super::consent::Decided {
        digest: pin,
        requested: subject.requested,
    };
    Ok((pulled, pin, Some(decided)))
}

/// A requested-grants manifest's text, read as a grant file is.
fn parse_manifest(text: &str, origin: &str) -> Result<GrantSpec, GrantError> {
    toml::from_str(text).map_err(|e| GrantError::Policy {
        path: format!("{origin} (its requested grants)"),
        why: e.message().to_string(),
    })
}

fn wasm_launcher(path: PathBuf, grant_spec: GrantSpec, args: &TickOpts) -> Result<Launcher, Exit> {
    if args.cwd.is_some() {
        return Err(Exit::usage(
            "--cwd applies to native Ticks; grant a wasm Tick a directory with --dir",
        ));
    }
    let mut grants = grant_spec
        .resolve()
        .map_err(|e| Exit::usage(grant_error_line(&e)))?;
    // Only the header here: the whole file is read when an instance starts.
    if wasm::detect_file(&path).is_none() {
        return Err(Exit::session(LaunchError::NotWasm { path }));
    }
    // What the manifest asks for is granted only under an approval of
    // these very bytes (asked for here, before anything of the Tick runs);
    // a malformed manifest is a usage error, found before the engine exists.
    let decided = super::consent::for_file(&path, &args.asking)?;
    if let Some(d) = &decided {
        grants = with_requested(&d.requested, grant_spec)?;
        let guests: Vec<String> = grants.dirs.iter().map(|d| d.guest.clone()).collect();
        for note in super::consent::unmapped_dirs(&d.requested, &guests) {
            notice(&note);
        }
    }
    let engine = engine(args.no_cache)?;
    let launcher = Launcher::wasm(engine, path, grants).map_err(Exit::session)?;
    // Started only if the bytes are still the ones approved.
    Ok(match decided {
        Some(d) => launcher.pinned(d.digest),
        None => launcher,
    })
}

/// The grants of an approved request together with the person's: the
/// flags and policy win on every bound; a requested directory is only a
/// guest path, granted where the person maps it (`--dir HOST::GUEST`).
fn with_requested(requested: &GrantSpec, flags: GrantSpec) -> Result<Grants, Exit> {
    let mut spec = requested.clone();
    spec.dir.clear();
    spec.merge(flags);
    spec.resolve()
        .map_err(|e| Exit::usage(grant_error_line(&e)))
}

/// Reads a policy file (`--policy`): its grants, and where it asks the
/// audit stream to go (`audit`, relative to the file's directory, and
/// `audit_args`). Only a policy has these keys: a manifest is the Tick
/// author's, and an author does not choose where its audit goes.
pub fn read_policy(path: &Path) -> Result<(GrantSpec, super::audit::Wanted), GrantError> {
    let err = |why: String| GrantError::Policy {
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
    let keys = ["audit", "audit_args", "audit_sync"];
    if !keys.iter().any(|k| table.contains_key(*k)) {
        // The grants alone, parsed from the text so errors keep their place.
        let spec = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
        return Ok((spec, super::audit::Wanted::default()));
    }
    let audit = match table.remove("audit") {
        None => None,
        Some(toml::Value::String(s)) => Some(s),
        Some(_) => return Err(err("audit must be a string: a file, or - for stderr".into())),
    };
    let args = match table.remove("audit_args") {
        None => false,
        Some(toml::Value::Boolean(b)) => b,
        Some(_) => return Err(err("audit_args must be true or false".into())),
    };
    let sync = match table.remove("audit_sync") {
        None => false,
        Some(toml::Value::Boolean(b)) => b,
        Some(_) => return Err(err("audit_sync must be true or false".into())),
    };
    let spec = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| err(e.message().to_string()))?;
    Ok((
        spec,
        super::audit::from_keys(audit.as_deref(), args, sync, path),
    ))
}

/// Reads grants written in TOML: a policy file (`--policy`) or a Tick's
/// manifest. The sandbox takes a [`GrantSpec`] from whoever reads one; the
/// CLI is the one that reads files.
pub fn read_grant_file(path: &Path) -> Result<GrantSpec, GrantError> {
    let err = |why: String| GrantError::Policy {
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    toml::from_str(&text).map_err(|e| err(e.message().to_string()))
}

/// The capabilities a Tick asks for, from `NAME.tick.toml` beside
/// `NAME.wasm` (`None` when there is none). Granted only under a person's
/// approval of the Tick's content ([`super::consent`]).
pub fn manifest_of(path: &Path) -> Result<Option<GrantSpec>, GrantError> {
    let manifest = path.with_extension("tick.toml");
    if !manifest.exists() {
        return Ok(None);
    }
    read_grant_file(&manifest).map(Some)
}

/// How the Tick a launcher starts runs, for `tickbox info`.
fn backend(launcher: &Launcher) -> Backend {
    match launcher {
        Launcher::Native(spec) => Backend::Native {
            argv: spec.argv.clone(),
        },
        Launcher::Wasm { spec, kind, .. } => {
            let pulled = super::oci::pulled_as(&spec.path);
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

/// Starts and initializes a Tick.
pub async fn open(spec: TickSpec, args: &TickOpts) -> Result<Opened, Exit> {
    let config = args.config()?;
    let launcher = launcher(spec, args)?;
    let session = launcher.open(config).await.map_err(|e| match e {
        LaunchError::Init(e) => {
            let last_words = e.last_words.clone();
            Exit::session(e).with_last_words(last_words)
        }
        e => Exit::session(e),
    })?;
    Ok(Opened {
        session,
        backend: backend(&launcher),
        kind: launcher.kind(),
    })
}

/// Where [`notice`] sends its lines when stderr is not the person's
/// terminal (`tickbox run`'s host, whose stderr is a log or /dev/null).
static NOTICES: std::sync::Mutex<Option<NoticeSink>> = std::sync::Mutex::new(None);

/// Where notices go instead of stderr.
pub type NoticeSink = Box<dyn Fn(&str) + Send>;

/// Tells the person something about the start while they wait (a long
/// first compile): one line on stderr, or wherever [`redirect_notices`]
/// said.
pub fn notice(text: &str) {
    match tickbox_runtime::util::lock(&NOTICES).as_ref() {
        Some(send) => send(text),
        None => eprintln!("tickbox: {}", tickbox_runtime::text::escape(text)),
    }
}

/// Sends [`notice`]s to `to` from now on (`None`: back to stderr).
pub fn redirect_notices(to: Option<NoticeSink>) {
    *tickbox_runtime::util::lock(&NOTICES) = to;
}

/// The engine shared by every wasm Tick this process starts.
pub fn engine(no_cache: bool) -> Result<Arc<WasmEngine>, Exit> {
    static CACHED: std::sync::OnceLock<Arc<WasmEngine>> = std::sync::OnceLock::new();
    static UNCACHED: std::sync::OnceLock<Arc<WasmEngine>> = std::sync::OnceLock::new();
    let (cell, dir) = if no_cache {
        (&UNCACHED, None)
    } else {
        (&CACHED, super::env::cache_dir())
    };
    if let Some(e) = cell.get() {
        return Ok(e.clone());
    }
    // Compiling runs in a worker: this same executable, under the Tick's
    // compile bounds.
    let worker = std::env::current_exe().ok();
    let e = WasmEngine::with_options(wasm::EngineOptions {
        cache_dir: dir,
        cache_max_bytes: super::env::cache_max_bytes(),
        worker,
        guest_yield: super::env::guest_yield(),
        // No grant may reach the approvals wherever they are kept: a Tick
        // that could write them could approve itself.
        own_state: super::env::trust_dir().into_iter().collect(),
    })
    .map_err(Exit::session)?;
    // How Ticks without optimized code in the cache are compiled.
    if let Some(policy) = super::env::compile_policy() {
        e.set_compile_policy(policy.map_err(Exit::usage)?);
    }
    if let Some(why) = e.cache_refused() {
        eprintln!("tickbox: warning: {why}; running without the compile cache");
    }
    let cached = e.cache().is_some();
    // A large component (componentize-py/-js) compiles for tens of seconds on
    // its first start: say so rather than leave a blank screen. Stderr only.
    e.on_slow_compile(wasm::SLOW_COMPILE, move |path, size| {
        let name = path
            .file_name()
            .unwrap_or(path.as_os_str())
            .to_string_lossy();
        let mb = size as f64 / 1_000_000.0;
        notice(&if cached {
            format!("compiling {name} ({mb:.1} MB) to native code, cached afterwards…")
        } else {
            format!("compiling {name} ({mb:.1} MB) to native code (--no-cache)…")
        });
    });
    Ok(cell.get_or_init(|| e).clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_becomes_the_flags_that_give_it() {
        let spec = GrantSpec {
            dir: vec!["a".into(), "b:ro".into()],
            http_ca: Some("ca.pem".into()),
            max_write: Some("-1MiB".into()),
            ..GrantSpec::default()
        };
        let args = spec_args(&spec);
        for arg in [
            "--dir=a",
            "--dir=b:ro",
            "--http-ca=ca.pem",
            "--max-write=-1MiB",
        ] {
            assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
        }
        assert_eq!(args.len(), 4, "{args:?}");
    }

    /// The library's message names the key; the command line's, the flag.
    #[test]
    fn grant_errors_name_the_flag_on_the_command_line() {
        let spec = |f: fn(&mut GrantSpec)| {
            let mut g = GrantSpec::default();
            f(&mut g);
            g.resolve().unwrap_err()
        };
        for (e, cli) in [
            (
                spec(|g| g.dir = vec!["/no/such/dir".into()]),
                "--dir /no/such/dir",
            ),
            (
                spec(|g| g.max_memory = Some("lots".into())),
                "--max-memory lots",
            ),
            (
                spec(|g| g.max_handles = Some("0".into())),
                "--max-handles 0",
            ),
            (
                spec(|g| g.allow_net = vec!["*:80".into()]),
                "--allow-net *:80",
            ),
        ] {
            assert!(
                grant_error_line(&e).starts_with(cli),
                "{}",
                grant_error_line(&e)
            );
        }
        let policy = GrantError::Policy {
            path: "p.toml".into(),
            why: "bad".into(),
        };
        assert_eq!(grant_error_line(&policy), policy.to_string());
    }
}
