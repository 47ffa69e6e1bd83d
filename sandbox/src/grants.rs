//! What a sandboxed Tick may reach: parsed from grants in their textual form
//! (a policy file, a manifest, a scenario, or the CLI's flags for the keys),
//! applied to a WASI context, and shown to the user.
//!
//! Denied unless granted, each grant by itself:
//!
//! | capability | default | grant key |
//! |---|---|---|
//! | files | none | `dir`: `HOST[::GUEST][:ro\|:rw[,max=SIZE]]`, a directory or a single file |
//! | TCP connect / UDP | none | `allow_net`: `HOST:PORT` per address (`*` for any port) |
//! | name lookup | none | only names given in `allow_net` |
//! | outgoing HTTP (`wasi:http`) | none: every request fails with `HTTP-request-denied` | `allow_http`: `http[s]://HOST[:PORT]` per origin (see [`super::http`] for its bounds); `http_ca`: a `FILE` of CAs to add |
//! | listening sockets | never | — |
//! | environment | `TICKLOOP_INSTANCE_ID`, `TERM` | `env`: `NAME[=VALUE]` |
//! | args, clocks, random | yes | — |
//! | creating symlinks | never | — |
//! | memory and tables, all together | 256 MiB | `max_memory`: `SIZE` |
//! | WASI handles (files, sockets, streams) | 1024 | `max_handles`: `N` |
//! | wasm file size | 64 MiB | `max_wasm_size`: `SIZE` |
//! | compile time (wall) | 60 s | `compile_timeout`: `SECONDS` |
//! | compile memory | 4 GiB | `compile_memory`: `SIZE` |
//! | bytes written to files, 4 KiB per entry created (components) | unbounded | `max_write`: `SIZE` |
//! | the same through one grant; no rename or link across it (components) | unbounded | `dir`: `…:rw,max=SIZE` |
//!
//! A policy file (TOML, under these keys) holds the same grants so a user can
//! keep them per Tick; a manifest shipped beside a Tick (`NAME.tick.toml`)
//! says what the Tick asks for, applied only under a person's approval of
//! the Tick's content ([`crate::consent`]).

pub use crate::limits::{DEFAULT_MAX_MEMORY, MAX_HANDLES_LIMIT, MIN_COMPILE_MEMORY};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why grants in their textual form cannot be resolved. Each names the
/// grant key it is about (the key of a policy file, a config entry or a
/// scenario's `[tick]`, also [`GrantError::key`]), never a command-line
/// flag: the CLI spells the flag.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GrantError {
    /// A `dir` grant is malformed or names nothing.
    #[error("dir {spec}: {why}")]
    Dir { spec: String, why: String },
    /// An `allow_net` grant is malformed.
    #[error("allow_net {spec}: {why}")]
    Net { spec: String, why: String },
    /// An `allow_http` grant is malformed.
    #[error("allow_http {spec}: {why}")]
    Http { spec: String, why: String },
    /// The `http_ca` cannot be used.
    #[error("http_ca {why}")]
    HttpCa { why: String },
    /// An `env` grant is malformed or names an unset variable.
    #[error("env {spec}: {why}")]
    Env { spec: String, why: String },
    /// The `max_memory` bound is malformed.
    #[error("max_memory {spec}: expected a size such as 64MiB, 1G or 1048576")]
    Memory { spec: String },
    /// Another bound (`max_handles`, `max_wasm_size`, `compile_timeout`,
    /// `compile_memory`, `max_write`) is malformed.
    #[error("{key} {spec}: expected {expected}")]
    Bound {
        /// The bound's key.
        key: &'static str,
        spec: String,
        expected: &'static str,
    },
    /// The policy file could not be read or parsed.
    #[error("policy file {path}: {why}")]
    Policy { path: String, why: String },
}

impl GrantError {
    /// The grant key the error is about, when it is about one.
    pub fn key(&self) -> Option<&'static str> {
        Some(match self {
            GrantError::Dir { .. } => "dir",
            GrantError::Net { .. } => "allow_net",
            GrantError::Http { .. } => "allow_http",
            GrantError::HttpCa { .. } => "http_ca",
            GrantError::Env { .. } => "env",
            GrantError::Memory { .. } => "max_memory",
            GrantError::Bound { key, .. } => key,
            GrantError::Policy { .. } => return None,
        })
    }
}

/// One directory (or file) grant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirGrant {
    /// Path on the host, as given.
    pub host: PathBuf,
    /// Path the guest sees.
    pub guest: String,
    /// Read-only files and directory.
    pub read_only: bool,
    /// Bytes the guest may write through this grant (`max=`; None: no quota).
    pub max_write: Option<u64>,
}

/// Where a network grant points.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum NetHost {
    /// An IP address.
    Ip(IpAddr),
    /// A name; lookups of exactly this name are allowed, and connections to
    /// what it resolves to.
    Name(String),
}

/// One `allow_net` grant.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct NetGrant {
    /// The host.
    pub host: NetHost,
    /// The port, or `None` for any.
    pub port: Option<u16>,
}

impl std::fmt::Display for NetGrant {
    /// As an `allow_net` grant writes it: `HOST:PORT`, `[V6]:PORT`, `*`
    /// for any port.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            NetHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            NetHost::Ip(ip) => write!(f, "{ip}")?,
            NetHost::Name(name) => write!(f, "{name}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => write!(f, ":*"),
        }
    }
}

impl NetGrant {
    /// Reads one `allow_net` grant as written (`HOST:PORT`, `[V6]:PORT`,
    /// `HOST:*`), with the checks [`GrantSpec::resolve`] makes.
    pub fn parse(spec: &str) -> Result<NetGrant, GrantError> {
        parse_net(spec)
    }

    /// Whether this grant allows everything `other` allows: the same host
    /// (a name without regard to case, an address by value) and any port
    /// or `other`'s one. The one place a grant is compared with a grant.
    pub fn covers(&self, other: &NetGrant) -> bool {
        let host = match (&self.host, &other.host) {
            (NetHost::Ip(a), NetHost::Ip(b)) => same_ip(*a, *b),
            (NetHost::Name(a), NetHost::Name(b)) => a.eq_ignore_ascii_case(b),
            _ => false,
        };
        host && self.port.is_none_or(|p| other.port == Some(p))
    }
}

/// Everything a sandboxed Tick was granted: what it may reach, and
/// (apart, in [`Limits`]) how much it may spend, as wasmtime keeps
/// `WasiCtxBuilder` apart from `StoreLimits`. Serialized as one flat
/// table, the keys policy files, reports and audit `start` events use.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Grants {
    /// Preopened directories and files.
    pub dirs: Vec<DirGrant>,
    /// Network addresses.
    pub net: Vec<NetGrant>,
    /// Origins `wasi:http` requests may go to.
    pub http: Vec<super::http::Origin>,
    /// Extra CA certificates (PEM) for `https` origins.
    pub http_ca: Option<PathBuf>,
    /// Environment variables, with the values the Tick will see.
    #[serde(serialize_with = "env_names")]
    pub env: Vec<(String, String)>,
    /// How much it may spend.
    #[serde(flatten)]
    pub limits: Limits,
}

/// How much a sandboxed Tick may spend and how long the host waits for its
/// compile; the defaults are in [`crate::limits`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    /// Bound on all linear memories and tables together, in bytes.
    pub max_memory: u64,
    /// Bound on the guest's WASI handles (resource table entries).
    pub max_handles: usize,
    /// Largest wasm file loaded, in bytes.
    pub max_wasm_size: u64,
    /// Wall-time bound on compiling, in seconds in reports.
    #[serde(serialize_with = "seconds")]
    pub compile_timeout: Duration,
    /// Memory bound of the compile worker, in bytes.
    pub compile_memory: u64,
    /// Bytes the guest may write to files, all grants together (None: no
    /// quota; a directory grant's own `max=` is in its [`DirGrant`]).
    pub max_write: Option<u64>,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Shows names only: values may be secrets and reports are for humans and logs.
fn env_names<S: serde::Serializer>(env: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(env.iter().map(|(k, _)| k))
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_memory: DEFAULT_MAX_MEMORY,
            max_handles: super::limits::DEFAULT_MAX_HANDLES,
            max_wasm_size: crate::limits::DEFAULT_MAX_WASM,
            compile_timeout: crate::limits::DEFAULT_COMPILE_TIMEOUT,
            compile_memory: crate::limits::DEFAULT_COMPILE_MEMORY,
            max_write: None,
        }
    }
}

/// Grants in their textual form, under the keys a policy file, a manifest
/// and a scenario use (the CLI's flags are these keys with dashes).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GrantSpec {
    /// `dir` grants: `HOST[::GUEST][:ro|:rw[,max=SIZE]]`.
    #[serde(default)]
    pub dir: Vec<String>,
    /// `allow_net` grants: `HOST:PORT`.
    #[serde(default)]
    pub allow_net: Vec<String>,
    /// `allow_http` origins: `http[s]://HOST[:PORT]`.
    #[serde(default)]
    pub allow_http: Vec<String>,
    /// `http_ca`: a PEM file of CAs to trust for `allow_http`.
    #[serde(default)]
    pub http_ca: Option<String>,
    /// `env`: `NAME[=VALUE]`.
    #[serde(default)]
    pub env: Vec<String>,
    /// `max_memory`: a size.
    #[serde(default)]
    pub max_memory: Option<String>,
    /// `max_handles`: a count.
    #[serde(default)]
    pub max_handles: Option<String>,
    /// `max_wasm_size`: a size.
    #[serde(default)]
    pub max_wasm_size: Option<String>,
    /// `compile_timeout`: seconds.
    #[serde(default)]
    pub compile_timeout: Option<String>,
    /// `compile_memory`: a size.
    #[serde(default)]
    pub compile_memory: Option<String>,
    /// `max_write`: a size.
    #[serde(default)]
    pub max_write: Option<String>,
}

impl GrantSpec {
    /// Every key of a spec, as a policy file, a scenario's `[tick]` table
    /// and a recording write it (a test checks it against the fields).
    pub const KEYS: &'static [&'static str] = &[
        "dir",
        "allow_net",
        "allow_http",
        "http_ca",
        "env",
        "max_memory",
        "max_handles",
        "max_wasm_size",
        "compile_timeout",
        "compile_memory",
        "max_write",
    ];

    /// Splits a table that holds grant keys beside keys of its own (an MCP
    /// config entry, a scenario's `[tick]`): the grant keys ([`Self::KEYS`])
    /// as a spec, the rest as `T`. Both sides refuse keys they do not know,
    /// which serde's `flatten` would let through. Any serde format reaches
    /// it as a JSON object (`serde_json::to_value` of a TOML table).
    pub fn split_from<T: serde::de::DeserializeOwned>(
        table: serde_json::Map<String, serde_json::Value>,
    ) -> Result<(T, GrantSpec), serde_json::Error> {
        let (grants, rest): (serde_json::Map<_, _>, serde_json::Map<_, _>) = table
            .into_iter()
            .partition(|(k, _)| GrantSpec::KEYS.contains(&k.as_str()));
        let rest = serde_json::from_value(serde_json::Value::Object(rest))?;
        let grants = serde_json::from_value(serde_json::Value::Object(grants))?;
        Ok((rest, grants))
    }

    /// Adds another spec's grants to this one (flags on top of a policy file).
    pub fn merge(&mut self, other: GrantSpec) {
        self.dir.extend(other.dir);
        self.allow_net.extend(other.allow_net);
        self.allow_http.extend(other.allow_http);
        if other.http_ca.is_some() {
            self.http_ca = other.http_ca;
        }
        self.env.extend(other.env);
        for (mine, theirs) in [
            (&mut self.max_memory, other.max_memory),
            (&mut self.max_handles, other.max_handles),
            (&mut self.max_wasm_size, other.max_wasm_size),
            (&mut self.compile_timeout, other.compile_timeout),
            (&mut self.compile_memory, other.compile_memory),
            (&mut self.max_write, other.max_write),
        ] {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
    }

    /// Whether the Tick may reach the network (MCP's `openWorldHint`).
    pub fn network(&self) -> bool {
        !self.allow_net.is_empty() || !self.allow_http.is_empty()
    }

    /// Whether any bound (memory, handles, wasm size, compile) is set.
    pub fn has_bounds(&self) -> bool {
        self.max_memory.is_some()
            || self.max_handles.is_some()
            || self.max_wasm_size.is_some()
            || self.compile_timeout.is_some()
            || self.compile_memory.is_some()
            || self.max_write.is_some()
    }

    /// Whether nothing at all is granted (the bounds aside).
    pub fn is_empty(&self) -> bool {
        self.dir.is_empty()
            && self.allow_net.is_empty()
            && self.allow_http.is_empty()
            && self.env.is_empty()
    }

    /// Parses every grant, resolving an `env` grant `NAME` from this process's
    /// environment.
    pub fn resolve(&self) -> Result<Grants, GrantError> {
        let mut g = Grants::default();
        for d in &self.dir {
            g.dirs.push(parse_dir(d)?);
        }
        let mut seen = HashSet::new();
        for n in &self.allow_net {
            let grant = parse_net(n)?;
            if seen.insert(grant.clone()) {
                g.net.push(grant);
            }
        }
        for h in &self.allow_http {
            let origin = super::http::parse_origin(h).map_err(|why| GrantError::Http {
                spec: h.clone(),
                why,
            })?;
            if !g.http.contains(&origin) {
                g.http.push(origin);
            }
        }
        if let Some(ca) = &self.http_ca {
            // Read now, so a bad file is a usage error before anything starts.
            super::http::read_ca_file(Path::new(ca)).map_err(|why| GrantError::HttpCa { why })?;
            if g.http.is_empty() {
                return Err(GrantError::HttpCa {
                    why: format!("{ca}: a CA is for https origins; grant one with allow_http"),
                });
            }
            g.http_ca = Some(PathBuf::from(ca));
        }
        for e in &self.env {
            g.env.push(parse_env(e, |k| std::env::var(k).ok())?);
        }
        if let Some(m) = &self.max_memory {
            g.limits.max_memory =
                parse_size(m).ok_or_else(|| GrantError::Memory { spec: m.clone() })?;
        }
        let bound = |key, spec: &String, expected| GrantError::Bound {
            key,
            spec: spec.clone(),
            expected,
        };
        if let Some(n) = &self.max_handles {
            g.limits.max_handles = n
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| (1..=MAX_HANDLES_LIMIT).contains(&n))
                .ok_or_else(|| bound("max_handles", n, "a count from 1 to 1000000"))?;
        }
        if let Some(m) = &self.max_wasm_size {
            g.limits.max_wasm_size =
                parse_size(m).ok_or_else(|| bound("max_wasm_size", m, "a size such as 64MiB"))?;
        }
        if let Some(t) = &self.compile_timeout {
            g.limits.compile_timeout = t
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| bound("compile_timeout", t, "seconds, more than 0"))?;
        }
        if let Some(m) = &self.max_write {
            g.limits.max_write =
                Some(parse_size(m).ok_or_else(|| bound("max_write", m, "a size such as 100MiB"))?);
        }
        if let Some(m) = &self.compile_memory {
            g.limits.compile_memory = parse_size(m)
                .filter(|&b| b >= MIN_COMPILE_MEMORY)
                .ok_or_else(|| bound("compile_memory", m, "a size of at least 64MiB"))?;
        }
        Ok(g)
    }
}

fn parse_dir(spec: &str) -> Result<DirGrant, GrantError> {
    let err = |why: &str| GrantError::Dir {
        spec: spec.to_string(),
        why: why.to_string(),
    };
    let (rest, read_only, max_write) = match dir_options(spec) {
        Some((rest, opts)) => {
            let mut read_only = None;
            let mut max_write = None;
            for opt in opts.split(',') {
                match opt {
                    "ro" | "rw" if read_only.is_some() => {
                        return Err(err("give one of :ro and :rw"));
                    }
                    "ro" => read_only = Some(true),
                    "rw" => read_only = Some(false),
                    _ => {
                        let size = opt.strip_prefix("max=").unwrap_or_default();
                        max_write = Some(
                            parse_size(size)
                                .ok_or_else(|| err("max= expects a size such as 100MiB"))?,
                        );
                    }
                }
            }
            let read_only = read_only.unwrap_or(false);
            if read_only && max_write.is_some() {
                return Err(err("a read-only grant takes no write quota (max=)"));
            }
            (rest, read_only, max_write)
        }
        None => (spec, false, None),
    };
    let (host, guest) = match rest.split_once("::") {
        Some((h, g)) => (h, g.to_string()),
        None => (rest, rest.to_string()),
    };
    if host.is_empty() || guest.is_empty() {
        return Err(err("expected HOST_PATH[::GUEST_PATH][:ro]"));
    }
    // Options that do not parse are not options: they would be left in
    // the guest path, and the grant would fall back to read-write with no
    // quota (`::/d:RO`). A ':' there is refused instead.
    if guest.contains(':') {
        return Err(err(
            "a guest path cannot contain ':' (the options are ro, rw and max=SIZE, in lowercase; name another guest path with HOST::GUEST)",
        ));
    }
    let meta = std::fs::metadata(host).map_err(|e| err(&format!("cannot use {host}: {e}")))?;
    if !(meta.is_dir() || meta.is_file()) {
        return Err(err("only directories and regular files can be granted"));
    }
    Ok(DirGrant {
        host: PathBuf::from(host),
        guest,
        read_only,
        max_write,
    })
}

/// The host path of a `dir` grant (`HOST[::GUEST][:OPTIONS]`), as given:
/// what a caller bounding grants (a scenario's grant root) must check.
pub fn dir_host(spec: &str) -> &str {
    let rest = dir_options(spec).map_or(spec, |(rest, _)| rest);
    rest.split_once("::").map_or(rest, |(host, _)| host)
}

/// Splits a `dir` grant into the path part and its options (`ro`, `rw`,
/// `max=SIZE`, comma-separated after the last `:`), when it has options.
fn dir_options(spec: &str) -> Option<(&str, &str)> {
    let (rest, opts) = spec.rsplit_once(':')?;
    let is_option = |o: &str| o == "ro" || o == "rw" || o.starts_with("max=");
    (!rest.is_empty() && !rest.ends_with(':') && opts.split(',').all(is_option))
        .then_some((rest, opts))
}

fn parse_net(spec: &str) -> Result<NetGrant, GrantError> {
    let err = |why: &str| GrantError::Net {
        spec: spec.to_string(),
        why: why.to_string(),
    };
    let (host, port) = spec
        .rsplit_once(':')
        .ok_or_else(|| err("expected HOST:PORT (PORT may be *)"))?;
    let port = match port {
        "*" => None,
        p => Some(
            p.parse::<u16>()
                .map_err(|_| err("the port must be 0-65535 or *"))?,
        ),
    };
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return Err(err("the host is empty"));
    }
    if host == "*" || host.contains('/') {
        return Err(err(
            "grant hosts one at a time: wildcards and ranges are not accepted",
        ));
    }
    let host = match host.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() => return Err(err("the unspecified address is not a host")),
        Ok(ip) => NetHost::Ip(ip),
        Err(_)
            if host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') =>
        {
            NetHost::Name(host.to_ascii_lowercase())
        }
        Err(_) => return Err(err("the host is neither an IP address nor a DNS name")),
    };
    Ok(NetGrant { host, port })
}

fn parse_env(
    spec: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<(String, String), GrantError> {
    let err = |why: &str| GrantError::Env {
        spec: spec.to_string(),
        why: why.to_string(),
    };
    let (name, value) = match spec.split_once('=') {
        Some((n, v)) => (n, Some(v.to_string())),
        None => (spec, None),
    };
    if name.is_empty() || name.contains('\0') {
        return Err(err("expected NAME or NAME=VALUE"));
    }
    let value = match value {
        Some(v) => v,
        None => {
            lookup(name).ok_or_else(|| err("not set in tickbox's environment; give NAME=VALUE"))?
        }
    };
    Ok((name.to_string(), value))
}

/// Parses `64MiB`, `64M`, `1G`, `1048576`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&b| b > 0)
}

impl Grants {
    /// Names the guest may look up.
    pub fn lookup_names(&self) -> Vec<String> {
        self.net
            .iter()
            .filter_map(|g| match &g.host {
                NetHost::Name(n) => Some(n.clone()),
                NetHost::Ip(_) => None,
            })
            .collect()
    }

    /// Whether the guest holds any network grant.
    pub fn has_network(&self) -> bool {
        !self.net.is_empty()
    }

    /// The per-address rule: is this (resolved) address granted? `resolved`
    /// holds what each granted name resolved to when the Tick started.
    pub fn allows(&self, addr: SocketAddr, resolved: &[(String, Vec<IpAddr>)]) -> bool {
        self.covering(addr, resolved).is_some()
    }

    /// The narrowest grant that allows this (resolved) address: the host
    /// of the first grant covering it (an address or a name), with the
    /// port used. What the audit records as used, and what a suggested
    /// policy grants.
    pub fn narrowest(
        &self,
        addr: SocketAddr,
        resolved: &[(String, Vec<IpAddr>)],
    ) -> Option<NetGrant> {
        self.covering(addr, resolved).map(|g| NetGrant {
            host: g.host.clone(),
            port: Some(addr.port()),
        })
    }

    /// The first grant covering this (resolved) address.
    fn covering(&self, addr: SocketAddr, resolved: &[(String, Vec<IpAddr>)]) -> Option<&NetGrant> {
        self.net.iter().find(|g| {
            let port_ok = g.port.is_none_or(|p| p == addr.port());
            let ip_ok = match &g.host {
                NetHost::Ip(ip) => same_ip(*ip, addr.ip()),
                NetHost::Name(n) => resolved
                    .iter()
                    .any(|(name, ips)| name == n && ips.iter().any(|ip| same_ip(*ip, addr.ip()))),
            };
            port_ok && ip_ok
        })
    }

    /// The first grant that names `name` (a lookup of it is allowed).
    pub fn naming(&self, name: &str) -> Option<&NetGrant> {
        self.net
            .iter()
            .find(|g| matches!(&g.host, NetHost::Name(n) if n.eq_ignore_ascii_case(name)))
    }
}

/// Compares addresses, treating IPv4-mapped IPv6 as the IPv4 address.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_flags_cover_every_field() {
        let serde_json::Value::Object(fields) = serde_json::to_value(GrantSpec::default()).unwrap()
        else {
            panic!("a spec serializes as an object")
        };
        let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        let mut want = GrantSpec::KEYS.to_vec();
        keys.sort_unstable();
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    #[test]
    fn dir_host_is_the_host_part_whatever_the_options() {
        for (spec, host) in [
            ("data", "data"),
            ("data::/d", "data"),
            ("/abs:ro", "/abs"),
            ("rel::/g:rw,max=1MiB", "rel"),
            ("rel:rw,max=1MiB", "rel"),
            ("a:b", "a:b"),
        ] {
            assert_eq!(dir_host(spec), host, "{spec}");
        }
    }

    #[test]
    fn dir_grants_parse() {
        let tmp = std::env::temp_dir();
        let t = tmp.to_str().unwrap();
        let g = parse_dir(&format!("{t}::/data:ro")).unwrap();
        assert_eq!((g.guest.as_str(), g.read_only), ("/data", true));
        let g = parse_dir(t).unwrap();
        assert_eq!((g.guest.as_str(), g.read_only), (t, false));
        assert!(parse_dir("/no/such/dir::/x")
            .unwrap_err()
            .to_string()
            .contains("cannot use"));
        assert!(parse_dir("::/x").is_err());
        // Options: rw, and a write quota for the grant.
        let g = parse_dir(&format!("{t}::/data:rw,max=100MiB")).unwrap();
        assert_eq!(
            (g.guest.as_str(), g.read_only, g.max_write),
            ("/data", false, Some(100 << 20))
        );
        let g = parse_dir(&format!("{t}::/data:max=1KiB")).unwrap();
        assert_eq!((g.read_only, g.max_write), (false, Some(1024)));
        let e = |spec: String| parse_dir(&spec).unwrap_err().to_string();
        assert!(e(format!("{t}::/d:ro,max=1MiB")).contains("read-only grant takes no write quota"));
        assert!(e(format!("{t}::/d:rw,max=lots")).contains("max= expects a size"));
        assert!(e(format!("{t}::/d:ro,rw")).contains("one of :ro and :rw"));
        // Options that do not parse never leave a writable grant behind.
        for bad in [
            "::/d:RO",
            "::/d:ro ",
            "::/d:rw,MAX=1MiB",
            "::/d:readonly",
            "",
        ] {
            let spec = if bad.is_empty() {
                format!("{t}:RO")
            } else {
                format!("{t}{bad}")
            };
            assert!(e(spec.clone()).contains("cannot contain ':'"), "{spec}");
        }
    }

    #[test]
    fn net_grants_are_per_address() {
        let g = Grants {
            net: vec![
                parse_net("127.0.0.1:8080").unwrap(),
                parse_net("[::1]:*").unwrap(),
                parse_net("Example.COM:443").unwrap(),
            ],
            ..Grants::default()
        };
        let resolved = vec![(
            "example.com".to_string(),
            vec!["93.184.216.34".parse().unwrap()],
        )];
        let ok = |s: &str| g.allows(s.parse().unwrap(), &resolved);
        assert!(ok("127.0.0.1:8080"));
        assert!(!ok("127.0.0.1:8081"), "another port on a granted host");
        assert!(!ok("127.0.0.2:8080"), "another host on a granted port");
        assert!(ok("[::1]:1") && ok("[::1]:65535"));
        assert!(
            ok("[::ffff:127.0.0.1]:8080"),
            "IPv4-mapped is the same host"
        );
        assert!(ok("93.184.216.34:443") && !ok("93.184.216.34:80"));
        // What the audit records as used: the covering grant's host, the
        // port used, written as a grant is.
        let narrowest = |s: &str| {
            g.narrowest(s.parse().unwrap(), &resolved)
                .map(|n| n.to_string())
        };
        assert_eq!(narrowest("[::1]:8443").as_deref(), Some("[::1]:8443"));
        assert_eq!(
            narrowest("93.184.216.34:443").as_deref(),
            Some("example.com:443"),
            "a name's address is used under the name"
        );
        assert_eq!(narrowest("127.0.0.2:8080"), None);
        assert_eq!(parse_net("[::1]:*").unwrap().to_string(), "[::1]:*");
        assert_eq!(
            g.naming("EXAMPLE.com").map(|n| n.to_string()).as_deref(),
            Some("example.com:443")
        );
        for written in ["127.0.0.1:8080", "[::1]:*", "example.com:443"] {
            assert_eq!(parse_net(written).unwrap().to_string(), written);
        }
        assert_eq!(g.lookup_names(), vec!["example.com"]);
        for bad in [
            "localhost",
            "*:80",
            "0.0.0.0:80",
            "10.0.0.0/8:80",
            "host:http",
            "a b:1",
        ] {
            assert!(parse_net(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_grants_name_or_value() {
        let lookup = |k: &str| (k == "HOME").then(|| "/home/me".to_string());
        assert_eq!(
            parse_env("HOME", lookup).unwrap(),
            ("HOME".into(), "/home/me".into())
        );
        assert_eq!(
            parse_env("MODE=a=b", lookup).unwrap(),
            ("MODE".into(), "a=b".into())
        );
        assert!(parse_env("UNSET_THING", lookup)
            .unwrap_err()
            .to_string()
            .contains("not set"));
    }

    #[test]
    fn sizes_and_policy_files() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("0"), None);
        let spec: GrantSpec = toml::from_str(
            "dir = [\"/tmp::/t:ro\"]\nallow_net = [\"127.0.0.1:1\"]\nmax_memory = \"32MiB\"",
        )
        .unwrap();
        let g = spec.resolve().unwrap();
        assert_eq!(
            (g.dirs.len(), g.net.len(), g.limits.max_memory),
            (1, 1, 32 << 20)
        );
        assert!(
            toml::from_str::<GrantSpec>("network = true").is_err(),
            "unknown keys are refused"
        );
    }

    /// The library names grant keys (what policy files, config entries,
    /// manifests and scenarios write), never a command-line flag.
    #[test]
    fn errors_name_the_grant_key() {
        let spec = |f: fn(&mut GrantSpec)| {
            let mut g = GrantSpec::default();
            f(&mut g);
            g.resolve().unwrap_err()
        };
        let cases = [
            (
                spec(|g| g.dir = vec!["/no/such/dir".into()]),
                "dir /no/such/dir",
                "dir",
            ),
            (
                spec(|g| g.max_memory = Some("lots".into())),
                "max_memory lots",
                "max_memory",
            ),
            (
                spec(|g| g.max_handles = Some("0".into())),
                "max_handles 0",
                "max_handles",
            ),
            (
                spec(|g| g.allow_net = vec!["*:80".into()]),
                "allow_net *:80",
                "allow_net",
            ),
        ];
        for (e, message, key) in cases {
            assert!(e.to_string().starts_with(message), "{e}");
            assert_eq!(e.key(), Some(key));
            assert!(!e.to_string().contains("--"), "{e}");
        }
    }
}
