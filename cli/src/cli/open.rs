//! Naming and starting a Tick: a path as the first positional, or
//! `-- COMMAND [ARGS...]` at the end for a native Tick.

use super::exit::Exit;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tickbox_runtime::backend::native::Hygiene;
use tickbox_runtime::backend::wasm::grants::{GrantError, GrantSpec};
use tickbox_runtime::protocol::limits::CALL_TIMEOUT;
use tickbox_runtime::session::SessionConfig;

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
    pub audit_origin: tickbox_telemetry::audit::Origin,
    /// Who else counts the Tick's audit events (`tickbox mcp --metrics`):
    /// set by the command, not a flag.
    #[arg(skip)]
    pub audit_observers: Vec<Arc<dyn tickbox_telemetry::audit::AuditObserver>>,
    /// Bound on a wasm Tick's linear memories and tables, all together
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    #[command(flatten)]
    pub bounds: BoundOpts,
    #[command(flatten)]
    pub registry: super::registry_flags::RegistryOpts,
    /// Do not read or write the compile cache for wasm Ticks
    #[arg(long)]
    pub no_cache: bool,
    /// A native Tick's command line, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
    /// Who may approve what a wasm Tick's manifest asks for: set by the
    /// command (`tickbox mcp` and `tickbox test` never ask), not a flag.
    #[arg(skip)]
    pub asking: Option<super::consent::Asking>,
}

/// The other per-Tick bounds of a wasm Tick (the sandbox table in docs/guide/sandbox.md).
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

/// The defaults `--help` shows for the sandbox bounds, from the sandbox's
/// limits table (so help and behaviour cannot disagree): (argument id, text).
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

/// A size as `--max-memory` and the others take it (`256MiB`).
pub(crate) fn size(bytes: u64) -> String {
    tickbox_app::policy::size(bytes)
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
            Some(p) => tickbox_app::grants::read_policy(p).map_err(Exit::usage)?.0,
            None => GrantSpec::default(),
        };
        spec.merge(self.flag_grants());
        Ok(spec)
    }

    /// The grants the flags give.
    pub fn flag_grants(&self) -> GrantSpec {
        GrantSpec {
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
        }
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
            Some(p) => tickbox_app::grants::read_policy(p).map_err(Exit::usage)?.1,
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

pub use tickbox_app::{is_sandboxed, Backend, Opened};
use tickbox_app::{App, AppError, Notice, Notices, Request, Target};

/// The request a command's flags make for `spec`, for the application
/// layer: grants, bounds, policy file, audit stream, registry settings and
/// who may approve, as typed values.
pub fn request(app: &App, spec: TickSpec, args: &TickOpts) -> Result<Request, Exit> {
    let call_timeout = call_timeout(args.call_timeout)?;
    let mut request = unaudited(spec, args)?;
    request.call_timeout = call_timeout;
    request.audit = super::audit::handle(
        app,
        args.audit_origin,
        &args.audit_wanted()?,
        &args.audit_observers,
    )?;
    Ok(request)
}

/// [`request`] without its audit stream, with the default call timeout.
pub fn unaudited(spec: TickSpec, args: &TickOpts) -> Result<Request, Exit> {
    let target = match spec {
        TickSpec::Path(p) => Target::named(&p),
        TickSpec::Command(argv) => Target::Command(argv),
        TickSpec::Live(t) => {
            return Err(Exit::usage(format!(
                "`@{t}` names a live instance, which this command cannot use"
            )))
        }
    };
    let mut request = Request::new(target);
    request.grants = args.flag_grants();
    request.policy = args.policy.clone();
    request.cwd = args.cwd.clone();
    request.registry = args.registry.settings();
    request.asking = args
        .asking
        .clone()
        .unwrap_or_else(super::consent::Terminal::asking);
    request.no_cache = args.no_cache;
    Ok(request)
}

/// Resolves the TICK and the sandbox flags into the library's launcher;
/// starts nothing yet.
pub fn launcher(
    app: &App,
    spec: TickSpec,
    args: &TickOpts,
) -> Result<tickbox_runtime::Launcher, Exit> {
    Ok(app.launcher(&request(app, spec, args)?)?)
}

/// Starts and initializes a Tick.
pub async fn open(app: &App, spec: TickSpec, args: &TickOpts) -> Result<Opened, Exit> {
    Ok(app.open(&request(app, spec, args)?).await?)
}

/// An application error in the command line's words: settings named by
/// their flags and variables, with the exit code the command documents.
pub fn exit_of(e: AppError) -> Exit {
    use tickbox_registry::RegistryError;
    match e {
        AppError::Grant(e) => Exit::usage(grant_error_line(&e)),
        AppError::CwdOnWasm => Exit::usage(
            "--cwd applies to native Ticks; grant a wasm Tick a directory with --dir",
        ),
        AppError::NativeGrants => Exit::usage(
            "--dir, --allow-net, --allow-http, --http-ca, --max-memory, --max-handles, --max-wasm-size, --compile-timeout, --compile-memory, --max-write and --policy apply to wasm Ticks only; a native Tick runs with your own permissions",
        ),
        AppError::Registry(ref r @ RegistryError::Insecure { ref host }) => {
            let flag = format!("pass --insecure-registry {host} to allow plain HTTP");
            Exit::session(format!("{r}; {}", tickbox_runtime::text::escape(&flag)))
        }
        AppError::NotLocked {
            reference,
            lock,
            path,
        } => Exit::usage(format!(
            "--locked: {reference} is not in the lock file {lock} (run `tickbox lock {reference} --lock {}`)",
            path.display()
        )),
        AppError::Drift(why) => Exit::session(format!("--locked: {why}")),
        AppError::NoStore => Exit::usage(format!(
            "no Tick store: set {} or HOME",
            super::env::STORE_DIR
        )),
        AppError::NoTrustStore => Exit::usage(format!(
            "no trust store: set {} or HOME",
            super::env::TRUST_DIR
        )),
        AppError::AuditOpen { to, why } => Exit::usage(format!(
            "--audit {}: cannot open it: {why}",
            tickbox_runtime::text::escape(&to)
        )),
        AppError::AuditSyncWithoutFile => Exit::usage(
            "--audit-sync: only an audit file can be synced: give --audit FILE (or an audit key naming a file)",
        ),
        AppError::Prompt(why) => Exit::usage(format!("cannot ask on the terminal: {why}")),
        AppError::Interrupted => Exit::new(super::exit::INTERRUPTED, e),
        AppError::Start {
            message,
            last_words,
        } => Exit::session(message).with_last_words(last_words),
        e if e.is_usage() => Exit::usage(e),
        e => Exit::session(e),
    }
}

impl From<AppError> for Exit {
    fn from(e: AppError) -> Exit {
        exit_of(e)
    }
}

/// Where notices go instead of stderr (`tickbox run`'s host, whose stderr
/// is a log or /dev/null).
pub type NoticeSink = Box<dyn Fn(&str) + Send>;

/// The command line's [`Notices`]: one line on stderr, or wherever
/// [`Stderr::redirect`] said.
#[derive(Default)]
pub struct Stderr {
    to: std::sync::Mutex<Option<NoticeSink>>,
}

impl Stderr {
    /// Sends notices to `to` from now on (`None`: back to stderr).
    pub fn redirect(&self, to: Option<NoticeSink>) {
        *tickbox_runtime::util::lock(&self.to) = to;
    }

    /// Says one line.
    pub fn say(&self, text: &str) {
        match tickbox_runtime::util::lock(&self.to).as_ref() {
            Some(send) => send(text),
            None => eprintln!("tickbox: {}", tickbox_runtime::text::escape(text)),
        }
    }
}

impl Notices for Stderr {
    fn notice(&self, notice: &Notice) {
        let e = |s: &str| tickbox_runtime::text::escape(s);
        match notice {
            Notice::Compiling {
                name,
                megabytes,
                cached,
            } => self.say(&if *cached {
                format!("compiling {name} ({megabytes:.1} MB) to native code, cached afterwards…")
            } else {
                format!("compiling {name} ({megabytes:.1} MB) to native code (--no-cache)…")
            }),
            Notice::CacheRefused(why) => {
                eprintln!("tickbox: warning: {why}; running without the compile cache")
            }
            Notice::NoSignersPolicy {
                reference,
                default_file,
            } => eprintln!(
                "tickbox: warning: no signers policy is in force, so {} runs whoever signed it; add one with --signers FILE, ${} or {} ([[require]] references = \"oci://HOST/PREFIX/*\", allowed_signers = \"FILE\")",
                e(reference),
                super::env::SIGNERS,
                default_file
                    .as_ref()
                    .map(|p| e(&p.display().to_string()))
                    .unwrap_or_else(|| "~/.config/tickbox/signers.toml".into()),
            ),
            Notice::NoRuleCovers { policy, name } => eprintln!(
                "tickbox: warning: no rule of the signers policy {} covers {name}; it runs unchecked (no_match = \"warn\")",
                e(policy),
            ),
            Notice::UnmappedDir { guest } => self.say(&format!(
                "the Tick asks for the directory {guest}; it is not granted until you map one with --dir HOST::{guest}"
            )),
        }
    }
}

/// The application context of a command that starts no Tick and no
/// compile worker (it needs none of the process's hygiene), its notices on
/// stderr.
pub fn app() -> App {
    hosting_app(Hygiene::default())
}

/// The application context a command runs its Ticks in, under the
/// process's hygiene (`main`'s `ProcessHygiene`), its notices on stderr.
pub fn hosting_app(native: Hygiene) -> App {
    app_with(std::sync::Arc::new(Stderr::default()), native)
}

/// [`hosting_app`], its notices going to `notices`.
pub fn app_with(notices: std::sync::Arc<Stderr>, native: Hygiene) -> App {
    let settings = tickbox_app::Settings {
        native,
        ..super::env::settings()
    };
    App::with_notices(settings, notices)
        .observed_by(std::sync::Arc::new(super::otel::Telemetry::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
