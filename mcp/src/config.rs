//! `ticks.toml`: the Ticks one `tickbox mcp --config` server hosts.
//!
//! ```toml
//! [[tick]]
//! name = "counter"                 # tool prefix and resource name: A-Z a-z 0-9 _ -
//! command = ["python3", "counter.py"]
//!
//! [[tick]]
//! name = "notes"
//! path = "ticks/notes.wasm"        # a path instead of a command
//! call_timeout = 30                # seconds; the protocol's 60 when absent
//! # What the sandbox lets the Tick reach: the grant keys, in the entry.
//! dir = ["./notes"]                # --dir, once per entry
//! allow_http = ["https://api.example.com"]  # --allow-http, once per entry
//! allow_net = ["api.example.com:443"]  # --allow-net, once per entry
//! env = ["TZ=UTC"]                 # --env, once per entry
//! max_memory = "64MiB"             # --max-memory
//! max_handles = "256"              # --max-handles (also max_wasm_size,
//!                                  # compile_timeout, compile_memory, max_write)
//! instances = "per-client"         # an instance per client; "shared" (the default)
//! max_instances = 8                # per-client: instances at once (at most 32)
//! idle_timeout = 120               # per-client: seconds without a request
//!                                  # before an instance stops (default and most 300)
//!
//! [[tick]]
//! name = "clock"
//! path = "ticks/clock.wasm"
//! start = "on-first-use"           # started by its first call, read or subscription
//!                                  # once its catalog is cached; "with-host" (the default)
//! idle_timeout = 60                # on-first-use: stopped after this long unused
//! ```
//!
//! `start = "on-first-use"` leaves a shared wasm Tick unstarted until a
//! client uses it, when the catalog cache holds its catalog
//! ([`crate::catalogs`]); it is stopped again after `idle_timeout` without
//! a request or a subscription, and its state is lost with it. With
//! `instances = "per-client"` it is the template that is left unstarted:
//! the cached catalog lists the Tick until a client starts its own.
//!
//! `instances = "per-client"` gives each client (an MCP session, the
//! stdio connection, a named client) an instance of the Tick of its own,
//! started on its first use and stopped when the client ends or the
//! instance is idle ([`crate::instance`]); `max_instances` at the top of
//! the file lowers the cap on per-client instances of all Ticks (at most
//! 128). Both caps may be lowered, never raised ([`crate::limits`]).
//!
//! Three top-level keys, before the first `[[tick]]`, ask for an audit
//! stream of every Tick the server hosts (`docs/AUDIT.md`): `audit =
//! "audit.jsonl"` (a file, relative to the config's directory, or `-` for
//! stderr; `--audit` wins), `audit_args = true` (`--audit-args`) and
//! `audit_sync = true` (`--audit-sync`: a call's answer waits for its line
//! to be written and synced).
//!
//! The grant keys are [`Grants`] (the sandbox's `GrantSpec`), the same keys
//! as policy files, scenario `[tick]` tables and recordings, each the
//! sandbox flag of the same name, so an entry says exactly what
//! `tickbox mcp [FLAGS] TICK` would. A `[tick.grants]` table with the same
//! keys (the form configs had before) is still read; a key given both ways
//! is refused. Relative paths (`path`,
//! `cwd`, a `command` program containing `/`, `dir`, `http_ca`) are resolved against the
//! directory of the config file, and a Tick runs there unless `cwd` says
//! otherwise, so a config works from wherever the MCP client starts it.

use crate::limits::{
    INSTANCE_IDLE_TIMEOUT, MAX_CONFIG_BYTES, MAX_INSTANCES, MAX_INSTANCES_PER_TICK,
};
use serde::Deserialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The longest Tick name accepted (it prefixes tool names, which MCP caps at 64).
pub const MAX_TICK_NAME: usize = 32;

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the config `{}`: {source}", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not TOML of the expected shape.
    #[error("the config `{}` is not valid: {message}", .path.display())]
    Parse { path: PathBuf, message: String },
    /// An entry breaks a rule.
    #[error("the config `{}`: {entry}: {reason}", .path.display())]
    Invalid {
        path: PathBuf,
        entry: String,
        reason: String,
    },
}

/// What a Tick is granted: the same grants, with the same syntax, as the
/// sandbox flags and policy files (`dir`, `allow_net`, `env`, `max_memory`).
pub use tickbox_sandbox::grants::GrantSpec as Grants;

/// How an entry names its Tick.
#[derive(Debug, Clone, PartialEq)]
pub enum TickSource {
    /// A path to an executable or a `.wasm` file.
    Path(String),
    /// A native Tick's command line.
    Command(Vec<String>),
}

/// One hosted Tick.
#[derive(Debug, Clone, PartialEq)]
pub struct TickEntry {
    /// Prefix of its tools and the NAME of `tick://NAME/state`.
    pub name: String,
    /// What to start.
    pub source: TickSource,
    /// Where it runs.
    pub cwd: Option<PathBuf>,
    /// Seconds before a call's outcome is unknown.
    pub call_timeout: Option<f64>,
    /// What it may reach.
    pub grants: Grants,
    /// One instance for every client, or one per client.
    pub instances: Instances,
    /// Per-client: instances at once, when lower than the default.
    pub max_instances: Option<usize>,
    /// Per-client, or started on first use: how long an instance may go
    /// without a request.
    pub idle_timeout: Option<std::time::Duration>,
    /// When the shared instance starts.
    pub start: Start,
}

/// When a Tick's shared instance starts (`start` in its entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Start {
    /// With the host (`"with-host"`, the default).
    #[default]
    WithHost,
    /// On its first use, when its catalog is cached (`"on-first-use"`).
    OnFirstUse,
}

/// Whom a Tick's instance serves (`instances` in its entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Instances {
    /// One instance, shared by every client (`"shared"`, the default).
    #[default]
    Shared,
    /// An instance of its own for each client (`"per-client"`).
    PerClient,
}

/// A parsed and checked config.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The Ticks, in file order.
    pub ticks: Vec<TickEntry>,
    /// Where the audit stream goes: `-` (stderr) or a file, resolved
    /// against the config's directory.
    pub audit: Option<String>,
    /// Whether call arguments are recorded whole in the audit stream.
    pub audit_args: bool,
    /// Whether a call's answer waits for its audit line to be synced.
    pub audit_sync: bool,
    /// Per-client instances of all Ticks at once, when lower than the default.
    pub max_instances: Option<usize>,
    /// The named clients' file ([`Clients`]), resolved against the
    /// config's directory.
    pub clients: Option<PathBuf>,
}

/// A clients file: each named client of `tickbox mcp --http` and the file
/// holding its bearer token.
///
/// ```toml
/// alice = "alice.token"     # a file only its owner may read (mode 0600)
/// bob = "/etc/tickbox/bob.token"
/// ```
///
/// A request whose token is a named client's is that client's: MCP
/// 2026-07-28 has no sessions, so over HTTP this is how the host tells
/// clients apart (their own instances of per-client Ticks, the client
/// named in audit lines and spans). Names follow the Tick name rule; a
/// relative token file is beside the clients file.
#[derive(Debug, Clone, PartialEq)]
pub struct Clients {
    /// Each client's name and token file, in file order.
    pub clients: Vec<(String, PathBuf)>,
}

/// A ticks or clients file, at most [`MAX_CONFIG_BYTES`] of it: one byte
/// more tells a larger file apart, which is refused naming the bound.
fn read_bounded(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read;
    let read = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text))
        .map_err(read)?;
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError::Parse {
            path: path.to_path_buf(),
            message: format!("it is larger than MAX_CONFIG_BYTES ({MAX_CONFIG_BYTES} bytes)"),
        });
    }
    Ok(text)
}

impl Clients {
    /// Reads and checks a clients file (the token files are the reader's
    /// to open: only the binary reads secrets).
    pub fn load(path: &Path) -> Result<Clients, ConfigError> {
        let text = read_bounded(path)?;
        let invalid = |entry: String, reason: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            entry,
            reason,
        };
        let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.message().to_string(),
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut clients = Vec::with_capacity(table.len());
        for (name, file) in table {
            let shown = format!("client `{}`", tickbox_host::text::escape(&name));
            if !valid_tick_name(&name) {
                return Err(invalid(
                    shown,
                    format!("a client's name must be 1 to {MAX_TICK_NAME} of A-Z a-z 0-9 _ -"),
                ));
            }
            let Some(file) = file.as_str() else {
                return Err(invalid(shown, "give the path of its token file".into()));
            };
            clients.push((name, PathBuf::from(resolve(base, file))));
        }
        if clients.is_empty() {
            return Err(invalid(
                "clients".into(),
                "no client is named; add NAME = \"TOKEN_FILE\" lines".into(),
            ));
        }
        Ok(Clients { clients })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    /// The hosted Ticks, `[[tick]]` tables (each split into a
    /// [`RawEntry`] and its grant keys).
    #[serde(default)]
    tick: Vec<serde_json::Map<String, serde_json::Value>>,
    /// Where the audit stream goes: `-` (stderr) or a file, relative to
    /// the ticks file.
    audit: Option<String>,
    /// Whether the audit stream records call arguments.
    #[serde(default)]
    audit_args: bool,
    /// Whether a call's answer waits for its audit line to be synced.
    #[serde(default)]
    audit_sync: bool,
    /// Per-client instances of all Ticks at once: at most 128 (the
    /// default), lower to spend less.
    max_instances: Option<usize>,
    /// With `--http`: a clients file (name = token file, each 0600)
    /// naming the clients by their bearer tokens, relative to the ticks
    /// file (`--clients` wins).
    clients: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    /// The Tick's MCP name: 1 to 32 of `A-Z a-z 0-9 _ -`, unique in the file.
    name: String,
    /// An executable, a `.wasm` file or an `oci://` reference (a path
    /// relative to the ticks file's directory).
    path: Option<String>,
    /// A command and its arguments (instead of `path`).
    command: Option<Vec<String>>,
    /// A native Tick's working directory.
    cwd: Option<String>,
    /// Seconds a tool call may take before its outcome is unknown.
    call_timeout: Option<f64>,
    /// `"shared"` (the default): one instance serves every client;
    /// `"per-client"`: each client (an MCP session, the stdio connection,
    /// a named client) gets an instance of its own on its first use.
    instances: Option<String>,
    /// With `"per-client"`: instances of this Tick at once, at most 32 (the
    /// default).
    max_instances: Option<usize>,
    /// With `"per-client"` or `start = "on-first-use"`: seconds an
    /// instance may go without a request before it is stopped (default 300).
    idle_timeout: Option<f64>,
    /// `"with-host"` (the default): the Tick starts when the host does;
    /// `"on-first-use"`: a wasm Tick whose catalog is in the catalog cache
    /// starts on its first call, read or subscription, and is stopped
    /// again after `idle_timeout` unused (its state is lost); with
    /// `"per-client"`, its template is never started.
    start: Option<String>,
    /// A `[tick.grants]` table of grant keys: the same as giving them in
    /// the entry (the form earlier configs used).
    #[serde(default)]
    grants: Option<Grants>,
}

/// An entry and its grants, from the flat keys and a nested `grants` table.
fn entry_of(
    table: serde_json::Map<String, serde_json::Value>,
) -> Result<(RawEntry, Grants), String> {
    if let Some(serde_json::Value::Object(nested)) = table.get("grants") {
        if let Some(key) = nested.keys().find(|k| table.contains_key(*k)) {
            return Err(format!(
                "`{key}` is given both in the entry and in [tick.grants]: give it once"
            ));
        }
    }
    let (mut entry, mut grants): (RawEntry, Grants) =
        Grants::split_from(table).map_err(|e| e.to_string())?;
    if let Some(nested) = entry.grants.take() {
        grants.merge(nested);
    }
    Ok((entry, grants))
}

/// Whether a Tick name is usable: 1 to 32 of `A-Z a-z 0-9 _ -`.
pub fn valid_tick_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TICK_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// The name of a Tick nobody named: the last dot-separated part of its
/// kind (`example.counter` → `counter`), every other character `_`, at
/// most `MAX_TICK_NAME` (32); `tick` when nothing is left.
pub fn default_tick_name(kind: &str) -> String {
    let last = kind.rsplit('.').next().unwrap_or("");
    let name: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_TICK_NAME)
        .collect();
    if name.is_empty() {
        "tick".into()
    } else {
        name
    }
}

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_bounded(path)?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Absolute, so that a relative program is not joined to `cwd` twice.
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        Config::parse(&text, &base).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            },
            ConfigError::Invalid { entry, reason, .. } => ConfigError::Invalid {
                path: path.to_path_buf(),
                entry,
                reason,
            },
            other => other,
        })
    }

    /// Parses config text; relative paths are resolved against `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::new(),
            message: e.message().to_string(),
        })?;
        let invalid = |entry: String, reason: String| ConfigError::Invalid {
            path: PathBuf::new(),
            entry,
            reason,
        };
        if raw.tick.is_empty() {
            return Err(invalid(
                "[[tick]]".into(),
                "no Tick is configured; add at least one [[tick]] entry".into(),
            ));
        }
        let mut seen = HashSet::new();
        let mut ticks = Vec::with_capacity(raw.tick.len());
        for (i, table) in raw.tick.into_iter().enumerate() {
            let named = table
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("")
                .to_string();
            let entry = format!("tick #{} `{}`", i + 1, tickbox_host::text::escape(&named));
            let (e, grants) = entry_of(table).map_err(|why| invalid(entry.clone(), why))?;
            if !valid_tick_name(&e.name) {
                return Err(invalid(
                    entry,
                    format!("name must be 1 to {MAX_TICK_NAME} of A-Z a-z 0-9 _ -"),
                ));
            }
            if !seen.insert(e.name.clone()) {
                return Err(invalid(entry, "the name is used twice".into()));
            }
            let source = match (e.path, e.command) {
                (Some(p), None) => TickSource::Path(resolve(base, &p)),
                (None, Some(mut argv)) if !argv.is_empty() => {
                    if argv[0].contains('/') {
                        argv[0] = resolve(base, &argv[0]);
                    }
                    TickSource::Command(argv)
                }
                (None, Some(_)) => return Err(invalid(entry, "command is empty".into())),
                _ => {
                    return Err(invalid(
                        entry,
                        "give exactly one of `path` and `command`".into(),
                    ))
                }
            };
            if let Some(t) = e.call_timeout {
                if !(t.is_finite() && t > 0.0) {
                    return Err(invalid(
                        entry,
                        "call_timeout must be a positive number of seconds".into(),
                    ));
                }
            }
            if let Some(bad) = grants.env.iter().find(|v| !v.contains('=')) {
                return Err(invalid(
                    entry,
                    format!("env entry `{bad}` is not NAME=VALUE"),
                ));
            }
            let mut grants = grants;
            grants.dir = grants.dir.iter().map(|d| resolve(base, d)).collect();
            grants.http_ca = grants.http_ca.map(|ca| resolve(base, &ca));
            let start =
                start_of(e.start.as_deref(), &source).map_err(|why| invalid(entry.clone(), why))?;
            let (instances, max_instances, idle_timeout) = instances_of(
                e.instances.as_deref(),
                e.max_instances,
                e.idle_timeout,
                start,
            )
            .map_err(|why| invalid(entry.clone(), why))?;
            let cwd = Some(match e.cwd {
                Some(dir) => PathBuf::from(resolve(base, &dir)),
                None => base.to_path_buf(),
            });
            ticks.push(TickEntry {
                name: e.name,
                source,
                cwd,
                call_timeout: e.call_timeout,
                grants,
                instances,
                max_instances,
                idle_timeout,
                start,
            });
        }
        if let Some(n) = raw.max_instances {
            if n == 0 || n > MAX_INSTANCES {
                return Err(invalid(
                    "max_instances".into(),
                    format!("must be 1 to {MAX_INSTANCES} (the host's cap on per-client instances), got {n}"),
                ));
            }
        }
        let audit = raw.audit.map(|a| match a.as_str() {
            "-" => a,
            _ => base.join(&a).display().to_string(),
        });
        Ok(Config {
            ticks,
            audit,
            audit_args: raw.audit_args,
            audit_sync: raw.audit_sync,
            max_instances: raw.max_instances,
            clients: raw.clients.map(|c| PathBuf::from(resolve(base, &c))),
        })
    }
}

/// An entry's `instances`, `max_instances` and `idle_timeout`, checked:
/// an unknown `instances` and a bound without `"per-client"` are refused,
/// and a bound may only lower its default.
fn instances_of(
    instances: Option<&str>,
    max: Option<usize>,
    idle: Option<f64>,
    start: Start,
) -> Result<(Instances, Option<usize>, Option<std::time::Duration>), String> {
    let kind = match instances {
        None | Some("shared") => Instances::Shared,
        Some("per-client") => Instances::PerClient,
        Some(other) => {
            return Err(format!(
                "instances = `{}`: give \"shared\" or \"per-client\"",
                tickbox_host::text::escape(other)
            ))
        }
    };
    if kind == Instances::Shared {
        if let Some(key) = [
            ("max_instances", max.is_some()),
            ("idle_timeout", idle.is_some() && start == Start::WithHost),
        ]
        .into_iter()
        .find_map(|(k, given)| given.then_some(k))
        {
            return Err(match key {
                "idle_timeout" => "`idle_timeout` applies only to instances = \"per-client\" \
                                   or start = \"on-first-use\""
                    .into(),
                _ => format!("`{key}` applies only to instances = \"per-client\""),
            });
        }
    }
    if let Some(n) = max {
        if n == 0 || n > MAX_INSTANCES_PER_TICK {
            return Err(format!(
                "max_instances must be 1 to {MAX_INSTANCES_PER_TICK} (the cap per Tick), got {n}"
            ));
        }
    }
    let idle = match idle {
        None => None,
        Some(t) if t.is_finite() && t > 0.0 && t <= INSTANCE_IDLE_TIMEOUT.as_secs_f64() => {
            Some(std::time::Duration::from_secs_f64(t))
        }
        Some(_) => {
            return Err(format!(
                "idle_timeout must be a positive number of seconds, at most {}",
                INSTANCE_IDLE_TIMEOUT.as_secs()
            ))
        }
    };
    Ok((kind, max, idle))
}

/// An entry's `start`, checked: an unknown value is refused, and so is
/// `"on-first-use"` where it cannot apply.
fn start_of(start: Option<&str>, source: &TickSource) -> Result<Start, String> {
    let start = match start {
        None | Some("with-host") => return Ok(Start::WithHost),
        Some("on-first-use") => Start::OnFirstUse,
        Some(other) => {
            return Err(format!(
                "start = `{}`: give \"with-host\" or \"on-first-use\"",
                tickbox_host::text::escape(other)
            ))
        }
    };
    // A command's catalog depends on more than tickbox can digest (the
    // interpreter, the scripts it loads, the environment): nothing could
    // key its cached catalog.
    if let TickSource::Command(_) = source {
        return Err(
            "start = \"on-first-use\" needs a wasm Tick (`path`): a `command` \
                    always starts with the host"
                .into(),
        );
    }
    Ok(start)
}

fn resolve(base: &Path, p: &str) -> String {
    let path = Path::new(p);
    // A URL (`oci://…`) is a reference, not a file beside the config.
    if path.is_absolute() || p.contains("://") {
        p.to_string()
    } else {
        base.join(path).to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/etc/ticks"))
    }

    #[test]
    fn a_file_past_the_bound_is_refused_naming_it() {
        let dir = std::env::temp_dir().join(format!("tickbox-config-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("ticks.toml");
        // A comment one byte past the bound: valid TOML, but too much.
        let mut text = "#".repeat(MAX_CONFIG_BYTES as usize);
        text.push('\n');
        std::fs::write(&big, &text).unwrap();
        for e in [Config::load(&big).err(), Clients::load(&big).err()] {
            let e = e.expect("refused").to_string();
            assert!(e.contains("MAX_CONFIG_BYTES"), "{e}");
        }
        // Positive control: at the bound it is read (and found empty).
        text.pop();
        std::fs::write(&big, &text).unwrap();
        let e = Config::load(&big)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!e.contains("MAX_CONFIG_BYTES"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn entries_resolve_relative_paths_against_the_config() {
        let c = parse(
            r#"
            [[tick]]
            name = "counter"
            command = ["./counter.py", "--fast"]
            [[tick]]
            name = "notes"
            path = "notes.wasm"
            cwd = "/tmp"
            call_timeout = 5
            [tick.grants]
            dir = ["data"]
            allow_net = ["example.com:443"]
            env = ["TZ=UTC"]
            max_memory = "64MiB"
            "#,
        )
        .unwrap();
        assert_eq!(
            c.ticks[0].source,
            TickSource::Command(vec!["/etc/ticks/./counter.py".into(), "--fast".into()])
        );
        assert_eq!(c.ticks[0].cwd, Some(PathBuf::from("/etc/ticks")));
        assert!(c.ticks[0].grants.is_empty() && !c.ticks[0].grants.network());
        let n = &c.ticks[1];
        assert_eq!(n.source, TickSource::Path("/etc/ticks/notes.wasm".into()));
        assert_eq!(n.cwd, Some(PathBuf::from("/tmp")));
        assert_eq!(n.grants.dir, ["/etc/ticks/data"]);
        assert!(n.grants.network());
        assert_eq!(n.grants.max_memory.as_deref(), Some("64MiB"));
    }

    /// The grant keys sit in the entry itself, the same keys as every other
    /// place grants are written; the nested table reads the same.
    #[test]
    fn grant_keys_sit_in_the_entry_or_in_the_older_nested_table() {
        let flat = parse(
            r#"
            [[tick]]
            name = "notes"
            path = "notes.wasm"
            dir = ["data"]
            allow_net = ["example.com:443"]
            env = ["TZ=UTC"]
            max_memory = "64MiB"
            max_write = "1MiB"
            "#,
        )
        .unwrap();
        let nested = parse(
            r#"
            [[tick]]
            name = "notes"
            path = "notes.wasm"
            dir = ["data"]
            [tick.grants]
            allow_net = ["example.com:443"]
            env = ["TZ=UTC"]
            max_memory = "64MiB"
            max_write = "1MiB"
            "#,
        )
        .unwrap();
        assert_eq!(flat, nested);
        let g = &flat.ticks[0].grants;
        assert_eq!(g.dir, ["/etc/ticks/data"]);
        assert_eq!(
            (g.max_memory.as_deref(), g.max_write.as_deref()),
            (Some("64MiB"), Some("1MiB"))
        );
        assert!(g.network());
    }

    #[test]
    fn a_clients_file_names_each_client_and_its_token_file() {
        let dir = std::env::temp_dir().join(format!("tickbox-clients-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("clients.toml");
        std::fs::write(&path, "alice = \"alice.token\"\nbob = \"/t/bob\"\n").unwrap();
        let c = Clients::load(&path).unwrap();
        assert_eq!(
            c.clients,
            [
                ("alice".to_string(), dir.join("alice.token")),
                ("bob".to_string(), PathBuf::from("/t/bob"))
            ]
        );
        for (text, needle) in [
            ("", "no client is named"),
            ("\"a b\" = \"x\"", "a client's name must be"),
            ("alice = 3", "give the path of its token file"),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = Clients::load(&path).unwrap_err().to_string();
            assert!(e.contains(needle), "expected `{needle}` in: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `instances` is shared unless an entry says per-client; the bounds
    /// come with it.
    #[test]
    fn an_entry_may_ask_for_an_instance_per_client() {
        let c = parse(
            r#"
            max_instances = 10
            [[tick]]
            name = "notes"
            path = "notes.wasm"
            instances = "per-client"
            max_instances = 2
            idle_timeout = 1.5
            [[tick]]
            name = "clock"
            path = "clock.wasm"
            "#,
        )
        .unwrap();
        assert_eq!(c.max_instances, Some(10));
        let (notes, clock) = (&c.ticks[0], &c.ticks[1]);
        assert_eq!(notes.instances, Instances::PerClient);
        assert_eq!(notes.max_instances, Some(2));
        assert_eq!(
            notes.idle_timeout,
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(clock.instances, Instances::Shared);
        assert_eq!((clock.max_instances, clock.idle_timeout), (None, None));
        assert_eq!(
            (notes.start, clock.start),
            (Start::WithHost, Start::WithHost)
        );
    }

    /// A wasm Tick may start on its first use, and be stopped again when
    /// idle; a per-client one's template too.
    #[test]
    fn an_entry_may_start_on_first_use_and_stop_when_idle() {
        let c = parse(
            "[[tick]]\nname = \"clock\"\npath = \"clock.wasm\"\nstart = \"on-first-use\"\nidle_timeout = 2\n\
             [[tick]]\nname = \"notes\"\npath = \"notes.wasm\"\nstart = \"on-first-use\"\ninstances = \"per-client\"",
        )
        .unwrap();
        assert_eq!(c.ticks[1].instances, Instances::PerClient);
        assert_eq!(c.ticks[1].start, Start::OnFirstUse);
        assert_eq!(c.ticks[0].start, Start::OnFirstUse);
        assert_eq!(
            c.ticks[0].idle_timeout,
            Some(std::time::Duration::from_secs(2))
        );
    }

    #[test]
    fn each_rule_names_what_is_wrong() {
        let cases = [
            ("", "no Tick is configured"),
            ("[[tick]]\nname = \"a b\"\npath = \"x\"", "name must be"),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\n[[tick]]\nname = \"a\"\npath = \"y\"",
                "used twice",
            ),
            (
                "[[tick]]\nname = \"a\"",
                "exactly one of `path` and `command`",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ncommand = [\"y\"]",
                "exactly one",
            ),
            ("[[tick]]\nname = \"a\"\ncommand = []", "command is empty"),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ncall_timeout = -1",
                "call_timeout",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\n[tick.grants]\nenv = [\"TZ\"]",
                "not NAME=VALUE",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\n[tick.grants]\nnet = true",
                "unknown field",
            ),
            ("[[tick]]\nname = 3", "invalid type"),
            ("[[tick]]\nname = \"a\"\npath = \"x\"\nnet = true", "unknown field"),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\nmax_memory = \"1MiB\"\n[tick.grants]\nmax_memory = \"2MiB\"",
                "`max_memory` is given both",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ndir = []\n[tick.grants]\ndir = [\"d\"]",
                "`dir` is given both",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ninstances = \"per-session\"",
                "instances = `per-session`: give \"shared\" or \"per-client\"",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\nmax_instances = 2",
                "`max_instances` applies only to instances = \"per-client\"",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ninstances = \"shared\"\nidle_timeout = 2",
                "`idle_timeout` applies only",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ninstances = \"per-client\"\nmax_instances = 33",
                "max_instances must be 1 to 32",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\ninstances = \"per-client\"\nidle_timeout = 301",
                "idle_timeout must be",
            ),
            (
                "max_instances = 129\n[[tick]]\nname = \"a\"\npath = \"x\"",
                "max_instances: must be 1 to 128",
            ),
            (
                "[[tick]]\nname = \"a\"\npath = \"x\"\nstart = \"lazy\"",
                "start = `lazy`: give \"with-host\" or \"on-first-use\"",
            ),
            (
                "[[tick]]\nname = \"a\"\ncommand = [\"x\"]\nstart = \"on-first-use\"",
                "needs a wasm Tick",
            ),
        ];
        for (text, needle) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "expected `{needle}` in: {e}");
        }
    }
}
