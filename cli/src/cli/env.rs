//! The environment variables tickbox reads: this module is the one place
//! that reads `TICKBOX_*` (the library crates take these as values).

use std::path::PathBuf;
use tickbox_runtime::backend::wasm::{
    cache, consent, grants::parse_size, limits, places, CompilePolicy, GuestYield,
};

/// Where compiled code is kept (default: `$XDG_CACHE_HOME/tickbox/wasm`,
/// else `~/.cache/tickbox/wasm`; [`cache::default_dir`]).
pub const CACHE_DIR: &str = "TICKBOX_CACHE_DIR";
/// Where approvals of Ticks' requested grants are kept (default:
/// `$XDG_CONFIG_HOME/tickbox/trust`, else `~/.config/tickbox/trust`;
/// [`consent::default_dir`]).
pub const TRUST_DIR: &str = "TICKBOX_TRUST_DIR";
/// The compile cache's size cap (a size such as `512MiB`; default 1 GiB,
/// [`limits::DEFAULT_CACHE_MAX_BYTES`]).
pub const CACHE_MAX_SIZE: &str = "TICKBOX_CACHE_MAX_SIZE";
/// How Ticks without optimized code in the cache are compiled: `tiered`
/// (default), `cranelift` or `winch`.
pub const COMPILER: &str = "TICKBOX_COMPILER";
/// Set (to anything), native Ticks get no cgroup (the subreaper remains).
pub const NO_CGROUP: &str = "TICKBOX_NO_CGROUP";
/// `immediate`: guests yield the way they did before the deferred yield
/// (benchmarks compare the two); `deferred`, the default.
pub const GUEST_YIELD: &str = "TICKBOX_GUEST_YIELD";
/// The async runtime's shape for any command, `current-thread` or
/// `multi-thread` (the bench compares them); by default each command
/// picks its own.
pub const RUNTIME: &str = "TICKBOX_RUNTIME";
/// How long an idle MCP HTTP session lives, in milliseconds (tests).
pub const MCP_HTTP_SESSION_IDLE_MS: &str = "TICKBOX_MCP_HTTP_SESSION_IDLE_MS";
/// How long an MCP HTTP request body may take to arrive, in milliseconds
/// (tests).
pub const MCP_HTTP_BODY_TIMEOUT_MS: &str = "TICKBOX_MCP_HTTP_BODY_TIMEOUT_MS";

/// Overrides the size at which a live host's audit file is rotated (a
/// size such as `64KiB`; default `LIVE_AUDIT_MAX_BYTES`, 4 MiB).
pub const LIVE_AUDIT_MAX_SIZE: &str = "TICKBOX_LIVE_AUDIT_MAX_SIZE";
/// Overrides the size at which an audit file (`--audit FILE`, a policy's
/// or an MCP config's `audit` key) is rotated (a size; default
/// `AUDIT_FILE_MAX_BYTES`, 16 MiB).
pub const AUDIT_MAX_SIZE: &str = "TICKBOX_AUDIT_MAX_SIZE";
/// Overrides the bytes of audit lines one Tick session's own doings may
/// write (a size; default `MAX_AUDIT_SESSION_BYTES`, 1 MiB).
pub const AUDIT_SESSION_MAX_SIZE: &str = "TICKBOX_AUDIT_SESSION_MAX_SIZE";

/// Where Ticks pulled from registries are kept (default: `tickbox/oci`
/// beside the compile cache's default, `~/.cache/tickbox/oci`).
pub const STORE_DIR: &str = "TICKBOX_STORE_DIR";
/// Docker's own variable: the directory of `config.json` with registry
/// credentials (default `~/.docker`).
pub const DOCKER_CONFIG: &str = "DOCKER_CONFIG";

/// The signers policy file, which must exist (default:
/// `$XDG_CONFIG_HOME/tickbox/signers.toml`, else
/// `~/.config/tickbox/signers.toml`, when it exists).
pub const SIGNERS: &str = "TICKBOX_SIGNERS";

/// The signers policy file `$TICKBOX_SIGNERS` names, if it is set.
pub fn signers_env() -> Option<PathBuf> {
    path_var(SIGNERS)
}

/// A variable naming a file or directory: `None` when unset or empty; a
/// relative path made absolute against the working directory now, so that
/// what tickbox reports and compares is where it reads.
fn path_var(name: &str) -> Option<PathBuf> {
    let value = std::env::var_os(name).filter(|v| !v.is_empty())?;
    let path = PathBuf::from(value);
    Some(std::path::absolute(&path).unwrap_or(path))
}

/// The signers policy's default path: `$XDG_CONFIG_HOME/tickbox/signers.toml`,
/// else `~/.config/tickbox/signers.toml`.
pub fn default_signers_file() -> Option<PathBuf> {
    Some(places::config_home()?.join("tickbox").join("signers.toml"))
}

/// The Tick store: `$TICKBOX_STORE_DIR`, else `oci` beside the compile
/// cache's default directory.
pub fn store_dir() -> Option<PathBuf> {
    path_var(STORE_DIR)
        .or_else(|| cache::default_dir().and_then(|d| d.parent().map(|p| p.join("oci"))))
}

/// The Docker config file with registry credentials:
/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
pub fn docker_config() -> Option<PathBuf> {
    match path_var(DOCKER_CONFIG) {
        Some(d) => Some(d.join("config.json")),
        None => Some(places::home()?.join(".docker/config.json")),
    }
}

/// The compile cache's directory: `$TICKBOX_CACHE_DIR`, else the XDG default.
pub fn cache_dir() -> Option<PathBuf> {
    path_var(CACHE_DIR).or_else(cache::default_dir)
}

/// The trust store's directory: `$TICKBOX_TRUST_DIR`, else the XDG default.
pub fn trust_dir() -> Option<PathBuf> {
    trust_dir_found().map(|(path, _)| path)
}

/// The trust store's directory and whether the variable named it.
pub fn trust_dir_found() -> Option<(PathBuf, bool)> {
    match path_var(TRUST_DIR) {
        Some(d) => Some((d, true)),
        None => consent::default_dir().map(|d| (d, false)),
    }
}

/// The compile cache's size cap: `$TICKBOX_CACHE_MAX_SIZE`, else the
/// default.
pub fn cache_max_bytes() -> u64 {
    size_or(CACHE_MAX_SIZE, limits::DEFAULT_CACHE_MAX_BYTES)
}

/// `$TICKBOX_COMPILER`, if set: the policy, or the one-line error.
pub fn compile_policy() -> Option<Result<CompilePolicy, String>> {
    let v = std::env::var(COMPILER).ok()?;
    Some(
        CompilePolicy::parse(&v)
            .ok_or_else(|| format!("{COMPILER}={v}: expected tiered, cranelift or winch")),
    )
}

/// The size a live host's audit file is rotated at:
/// `$TICKBOX_LIVE_AUDIT_MAX_SIZE`, else the default.
pub fn live_audit_max_bytes() -> u64 {
    size_or(
        LIVE_AUDIT_MAX_SIZE,
        tickbox_telemetry::audit::LIVE_AUDIT_MAX_BYTES,
    )
}

/// The size an audit file is rotated at: `$TICKBOX_AUDIT_MAX_SIZE`, else
/// the default.
pub fn audit_max_bytes() -> u64 {
    size_or(
        AUDIT_MAX_SIZE,
        tickbox_telemetry::audit::AUDIT_FILE_MAX_BYTES,
    )
}

/// What one Tick session's own audit events may take:
/// `$TICKBOX_AUDIT_SESSION_MAX_SIZE`, else the default.
pub fn audit_session_max_bytes() -> u64 {
    size_or(
        AUDIT_SESSION_MAX_SIZE,
        tickbox_telemetry::audit::MAX_AUDIT_SESSION_BYTES,
    )
}

/// The size variables and the least size each takes: an audit file
/// rotated below 1 KiB would hold less than one event.
const SIZES: &[(&str, u64)] = &[
    (CACHE_MAX_SIZE, 1),
    (LIVE_AUDIT_MAX_SIZE, 1024),
    (AUDIT_MAX_SIZE, 1024),
    (AUDIT_SESSION_MAX_SIZE, 1),
];

/// The variables that take one of a few words, and those words.
const CHOICES: &[(&str, &[&str])] = &[
    (GUEST_YIELD, &["immediate", "deferred"]),
    (RUNTIME, &["multi-thread", "current-thread"]),
];

/// A variable's value, `None` when it is unset; one line naming it when
/// it is not text.
fn var(name: &str) -> Result<Option<String>, String> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name}: not UTF-8 text")),
    }
}

/// A size variable: `None` when unset, else its size or one line naming
/// the variable and what it takes.
fn size_var(name: &str) -> Result<Option<u64>, String> {
    let least = SIZES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(1, |(_, least)| *least);
    let Some(v) = var(name)? else {
        return Ok(None);
    };
    match parse_size(&v) {
        Some(n) if n >= least => Ok(Some(n)),
        Some(_) => Err(format!("{name}={v}: at least {least} bytes")),
        None => Err(format!(
            "{name}={v}: expected a size such as 4096, 64KiB or 16MiB"
        )),
    }
}

/// A size variable's value, or `default` when it is unset. [`check`]
/// refused any other value before a command ran, so no value that cannot
/// be used comes here.
fn size_or(name: &str, default: u64) -> u64 {
    size_var(name).ok().flatten().unwrap_or(default)
}

/// Refuses, before any command runs, a variable tickbox reads that is set
/// to a value it cannot use: the setting fails closed with one line naming
/// the variable and what it takes, never with the default in its place.
pub fn check() -> Result<(), String> {
    if let Some(line) = places::relative() {
        return Err(line);
    }
    for (name, _) in SIZES {
        size_var(name)?;
    }
    for (name, words) in CHOICES {
        if let Some(v) = var(name)? {
            if !words.contains(&v.as_str()) {
                return Err(format!("{name}={v}: expected {}", words.join(" or ")));
            }
        }
    }
    if let Some(policy) = compile_policy() {
        policy?;
    }
    Ok(())
}

/// `$TICKBOX_RUNTIME`: whether a command's async runtime is one thread
/// (`Some(true)`), workers (`Some(false)`), or left to the command.
pub fn runtime_single() -> Option<bool> {
    match var(RUNTIME).ok().flatten()?.as_str() {
        "current-thread" => Some(true),
        "multi-thread" => Some(false),
        _ => None,
    }
}

/// Whether `$TICKBOX_NO_CGROUP` is set.
pub fn no_cgroup() -> bool {
    std::env::var_os(NO_CGROUP).is_some()
}

/// `$TICKBOX_GUEST_YIELD`: `immediate`, else deferred.
pub fn guest_yield() -> GuestYield {
    if std::env::var(GUEST_YIELD).is_ok_and(|v| v == "immediate") {
        GuestYield::Immediate
    } else {
        GuestYield::Deferred
    }
}

/// The application layer's settings, from the environment.
pub fn settings() -> tickbox_app::Settings {
    tickbox_app::Settings {
        cache_dir: cache_dir(),
        cache_max_bytes: cache_max_bytes(),
        guest_yield: guest_yield(),
        trust_dir: trust_dir(),
        compile_policy: compile_policy(),
        store_dir: store_dir(),
        docker_config: docker_config(),
        signers: signers_env().map(|path| tickbox_registry::policy::Source {
            path,
            origin: tickbox_registry::policy::Origin::Environment(SIGNERS.into()),
        }),
        default_signers_file: default_signers_file(),
        // Compiling runs in a worker: this same executable.
        compile_worker: std::env::current_exe().ok(),
        audit_max_bytes: audit_max_bytes(),
        audit_session_max_bytes: audit_session_max_bytes(),
        // The process's hygiene is no variable: `main` installs it.
        native: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    /// docs/reference/environment.md, from this module: each variable it
    /// names, with its doc comment, in the order written here.
    fn page() -> String {
        let mut rows = Vec::new();
        let mut doc: Vec<&str> = Vec::new();
        for line in include_str!("env.rs").lines() {
            let line = line.trim();
            if let Some(text) = line.strip_prefix("///") {
                doc.push(text.trim());
                continue;
            }
            let name = line
                .strip_prefix("pub const ")
                .and_then(|rest| rest.split_once(": &str = \""))
                .and_then(|(_, value)| value.strip_suffix("\";"));
            if let Some(name) = name {
                // Intra-doc links read as plain code here.
                let text = doc.join(" ").replace("[`", "`").replace("`]", "`");
                rows.push(format!("| `{name}` | {text} |"));
            }
            doc.clear();
        }
        format!(
            "# Environment variables\n\n\
             Generated from `cli/src/cli/env.rs`, the one place the `tickbox` \
             command reads them (the libraries take these settings as values); \
             rewrite it with `TICKBOX_BLESS=1 cargo nextest run -p tickbox --bin tickbox env`.\n\n\
             A variable set to a value tickbox cannot take is refused before any \
             command runs: one line naming it and what it takes, exit 2, never \
             the default in its place. The XDG base directories (`XDG_CONFIG_HOME`, \
             `XDG_CACHE_HOME`, `XDG_RUNTIME_DIR`) and `HOME` place the defaults; \
             an empty one counts as unset, and a relative one is refused. \
             The OpenTelemetry variables (`OTEL_*`) are in \
             [The audit trail, metrics and OpenTelemetry](../guide/audit-trail.md).\n\n\
             | variable | what it sets |\n|---|---|\n{}\n",
            rows.join("\n")
        )
    }

    #[test]
    fn the_environment_reference_is_this_module() {
        let page = page();
        // Positive control: the reading found the variables, docs and all.
        assert!(
            page.contains("| `TICKBOX_CACHE_DIR` | Where compiled code is kept (default"),
            "{page}"
        );
        assert_eq!(page.matches("\n| `").count(), 15, "{page}");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/reference/environment.md");
        if std::env::var_os("TICKBOX_BLESS").is_some() {
            std::fs::write(&path, &page).unwrap();
            return;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == page,
            "docs/reference/environment.md is not what env.rs says; rewrite it with \
             `TICKBOX_BLESS=1 cargo nextest run -p tickbox --bin tickbox env`"
        );
    }
}
