//! `tickbox policy suggest`'s logic: the least-privilege grant policy
//! that would have allowed exactly what the Ticks in some audit files
//! used, with what they were refused as comments. The CLI reads the
//! arguments and prints; this reads the files and writes the TOML.
//!
//! `tickbox policy suggest AUDIT…`: the least-privilege policy file that
//! would have allowed exactly what the Ticks in these audit files used,
//! printed on stdout as the TOML `--policy` reads, with what they were
//! refused listed as comments.
//!
//! **What it reads.** Audit files (`--audit FILE`, a policy's `audit`
//! key, a live host's `host-PID.jsonl` and its rotated `.1`…), any number,
//! merged: sessions from several files and several runs are one union.
//! A recorded scenario (`tickbox run --record`) is run with `tickbox test
//! FILE --audit AUDIT` and its audit read like any other; the recording
//! itself holds the grants in force, not what was used, so it is not read
//! here. Each file is read as untrusted input: a
//! regular file, never through a symbolic link, at most
//! `MAX_AUDIT_READ_BYTES`, each line one JSON object of schema version 1
//! and at most `MAX_AUDIT_LINE_BYTES`, read as typed events by the
//! telemetry crate's reader (`tickbox_telemetry::audit::read`, the one
//! reading of the schema its writer writes); anything else is one line
//! naming the file, the line and the rule (exit 2), never the line's
//! content.
//! Events it does not know (a later tickbox's) are skipped, as the
//! schema's versioning promises they may be added.
//!
//! **What it suggests.** From each wasm session whose `start` is in the
//! files (what was in force), the `used` events (docs/AUDIT.md):
//!
//! - `dir`: each grant that was used, mapped as it was (`HOST::GUEST`),
//!   `:ro` where nothing was written through it in any session, `:rw`
//!   otherwise, with its `max=` kept when every session that had it had
//!   one (the largest); grants never used are left out;
//! - `allow_net`: the narrowest grant of each address used (the granted
//!   host, the port used), and for a name only looked up the grant that
//!   named it;
//! - `allow_http`: each origin requested; `http_ca` kept when an `https`
//!   origin was used under one. In a scenario run with HTTP fixtures no
//!   origin is granted and none is reached: the origins the fixtures
//!   answered are what the Tick needs for real, and are suggested (and
//!   said to be fixtures') even though no grant was in force;
//! - `env`: every name the Tick was given. WASI hands a Tick its whole
//!   environment at start (`wasi:cli/environment` returns every variable
//!   at once), so the host cannot see which ones it reads: given counts as
//!   used, and leaving one out could change what the Tick does. The
//!   values are not in the audit (they may be secrets): each name takes
//!   its value from tickbox's environment when the policy is used;
//! - bounds (`max_memory`, `max_handles`, …, `max_write`): only those set
//!   to other than their default in a recorded run, at the largest value
//!   in force, since the runs showed the Tick works under it;
//! - a preview-1 module's file calls are not seen by the host, so its
//!   directory grants are kept as they were in force.
//!
//! A use counts only if the session's `start` granted it (a write only
//! through a writable grant), or, for an origin, if a scenario run's
//! fixture answered it: the suggestion is never more than the runs had,
//! whatever else a file says. A session whose `start` is not in the
//! files, a native Tick (not sandboxed, so no policy applies) and a
//! record cut short (`unrecorded`, `lost`) are said in comments.
//!
//! **Comments never carry TOML.** Every string from a file that reaches a
//! comment (a path a Tick attempted, a refusal's detail, a Tick's name)
//! goes through the one character policy (`text::escape`): no line break
//! or control character survives, so nothing can end a comment line and
//! start a key. Values are written as TOML strings with every unsafe
//! character as a `\uXXXX` escape, and checked to read back as the grant
//! they stand for.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use tickbox_conformance::scenario::{self, FileError};
use tickbox_host::text;
use tickbox_sandbox::grants::{dir_host, GrantSpec, NetGrant};
use tickbox_sandbox::limits as bounds;
use tickbox_telemetry::audit::read::{self as lines, Entry, ReadError};
use tickbox_telemetry::audit::MAX_AUDIT_READ_BYTES;

/// Distinct refusals (and notes about what was not taken) listed as
/// comments; past it, a count says how many more there were. Refusals are
/// not deduplicated in the stream (a Tick may try the same path a million
/// times), so the listing is bounded here.
pub const MAX_LISTED: usize = 200;

/// One audit file, with the walls of untrusted input.
pub fn read(file: &std::path::Path, shown: &str) -> Result<String, String> {
    scenario::read_regular(file, MAX_AUDIT_READ_BYTES).map_err(|e| match e {
        FileError::Symlink(_) => {
            format!("{shown} is a symbolic link; an audit file is never read through one")
        }
        FileError::TooLarge { len, max, .. } => format!(
            "{shown} is {len} bytes, over the {} MiB an audit file may be (MAX_AUDIT_READ_BYTES)",
            max >> 20
        ),
        FileError::NotText(_) => format!("{shown} is not UTF-8 text: not an audit file"),
        e => e.to_string(),
    })
}

/// Reads and merges audit files as `tickbox policy suggest` does: each
/// through [`read`]'s walls, every line checked ([`Record::add`]), and at
/// least one session's start among them. An error is one line naming the
/// file, the line and the rule, never a line's content.
pub fn record_of(files: &[std::path::PathBuf]) -> Result<Record, String> {
    let mut record = Record::default();
    for file in files {
        let shown = file.display().to_string();
        let text = read(file, &shown)?;
        record.add(&text).map_err(|why| format!("{shown}:{why}"))?;
        record.files.push(shown);
    }
    if record.starts_nothing() {
        return Err(format!(
            "{}: no session starts in them (no start event): nothing to suggest from",
            record.files.join(", ")
        ));
    }
    Ok(record)
}

/// Everything the files say, by session.
#[derive(Default)]
pub struct Record {
    /// The files read, as shown.
    pub files: Vec<String>,
    /// By session id, in the order they first appear.
    sessions: BTreeMap<String, Session>,
    order: Vec<String>,
    /// Events the writers said they dropped (`lost`).
    lost: u64,
    /// Events written shortened (`cut`).
    cut: u64,
}

/// One Tick session's events.
#[derive(Default)]
struct Session {
    start: Option<Start>,
    uses: Vec<Used>,
    /// Each refusal and how many it stands for (a merged line's `count`).
    refusals: Vec<(String, u64)>,
    /// Its uses passed the audit's bound (`unrecorded`).
    unrecorded: bool,
    /// Events its budget dropped (an `unrecorded` event's total).
    dropped: u64,
}

/// A `start`: the Tick and what was in force.
struct Start {
    tick: String,
    backend: String,
    /// Who started it (`scenario` for `tickbox test`).
    origin: String,
    sha256: Option<String>,
    grants: Value,
}

/// One `used` event.
enum Used {
    Dir {
        host: String,
        guest: String,
        write: bool,
    },
    Net {
        allow_net: String,
    },
    Lookup {
        name: String,
        allow_net: String,
    },
    Http {
        origin: String,
        /// Answered by a scenario's HTTP fixture, not the network.
        fixture: bool,
    },
}

impl Record {
    /// Adds the events of one file. An error is `LINE: why`, naming the
    /// rule, never the line's content.
    pub fn add(&mut self, text: &str) -> Result<(), String> {
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            self.add_line(line).map_err(|why| format!("{n}: {why}"))?;
        }
        Ok(())
    }

    /// One line, read by the telemetry crate's typed reader (the schema
    /// the writer writes), joined to its session.
    fn add_line(&mut self, line: &str) -> Result<(), ReadError> {
        let read = lines::parse_line(line)?;
        self.lost += read.lost;
        if read.cut {
            self.cut += 1;
        }
        // An event of no session (none is written today) has nothing to join.
        let Some(id) = read.session else {
            return Ok(());
        };
        if !self.sessions.contains_key(&id) {
            self.order.push(id.clone());
        }
        let s = self.sessions.entry(id).or_default();
        match read.entry {
            // The first start of a session is the one in force.
            Entry::Start(start) if s.start.is_none() => {
                s.start = Some(Start {
                    tick: start.tick,
                    backend: start.backend,
                    origin: start.origin.unwrap_or_default(),
                    sha256: start.sha256,
                    grants: start.grants,
                });
            }
            Entry::Used(used) => match used {
                lines::Use::Dir {
                    host,
                    guest,
                    access,
                } => s.uses.push(Used::Dir {
                    host,
                    guest,
                    write: access == lines::Access::Write,
                }),
                lines::Use::Socket { allow_net } => s.uses.push(Used::Net { allow_net }),
                lines::Use::Lookup { name, allow_net } => {
                    s.uses.push(Used::Lookup { name, allow_net })
                }
                lines::Use::HttpOrigin { origin, fixture } => {
                    s.uses.push(Used::Http { origin, fixture })
                }
                lines::Use::Unrecorded => s.unrecorded = true,
                // A kind of use a later tickbox records.
                _ => {}
            },
            Entry::Denied(refusal) => {
                let line = format!(
                    "denied {} {}: {}",
                    comment_text(&refusal.what),
                    quoted(&refusal.attempted),
                    comment_text(&refusal.detail)
                );
                s.refusals.push((line, refusal.times()));
            }
            Entry::Limit(limit) => {
                let line = format!(
                    "limit {} {}: {}",
                    comment_text(&limit.bound),
                    limit.value,
                    comment_text(&limit.detail)
                );
                s.refusals.push((line, limit.times()));
            }
            // The session's own events passed their budget: how many of
            // each kind were dropped.
            Entry::Unrecorded(dropped) => s.dropped += dropped.total(),
            // Calls, approvals, ends and what a later tickbox adds.
            _ => {}
        }
        Ok(())
    }

    /// The union of what every session used, checked against what its
    /// start granted.
    /// Whether no session started in the files read (nothing to suggest from).
    pub fn starts_nothing(&self) -> bool {
        self.sessions.values().all(|s| s.start.is_none())
    }

    /// The policy the sessions read would have needed.
    pub fn suggest(&self) -> Suggestion {
        let mut out = Suggestion::default();
        // Names only looked up: their grant, unless an address used covers them.
        let mut looked_up: BTreeMap<String, String> = BTreeMap::new();
        let mut used_https = false;
        let mut cas: BTreeSet<String> = BTreeSet::new();
        let mut wasm_sessions = Vec::new();
        for id in &self.order {
            let s = &self.sessions[id];
            let Some(start) = &s.start else {
                if !s.uses.is_empty() {
                    out.note(format!(
                        "session {}: its start is not in these files (an older rotated file?), so its {} uses are not taken",
                        comment_text(id),
                        s.uses.len()
                    ));
                }
                continue;
            };
            for (r, n) in &s.refusals {
                *out.refusals.entry(r.clone()).or_default() += n;
            }
            if s.dropped > 0 {
                out.incomplete.push(format!(
                    "session {} passed its audit budget: {} of its events are not recorded",
                    comment_text(id),
                    s.dropped
                ));
            }
            if s.unrecorded {
                out.incomplete.push(format!(
                    "session {} used more than the audit records per session: uses past the bound are missing",
                    comment_text(id)
                ));
            }
            if start.backend == "native" {
                out.native.insert(comment_text(&start.tick));
                continue;
            }
            out.ticks.insert(match &start.sha256 {
                Some(d) => format!("{} ({})", comment_text(&start.tick), comment_text(d)),
                None => comment_text(&start.tick),
            });
            if start.origin == "scenario" && !granted_dirs(&start.grants).is_empty() {
                out.scenario_dirs = true;
            }
            let g = &start.grants;
            wasm_sessions.push(g);
            let dirs = granted_dirs(g);
            let module = start.backend == "wasm module";
            if module {
                // Its file calls are not seen: keep its directories as they were.
                for d in &dirs {
                    out.add_dir(d, !d.read_only);
                }
                out.note(format!(
                    "{} is a preview-1 module, whose file uses the host cannot see: its directories are kept as granted",
                    comment_text(&start.tick)
                ));
            }
            for name in g["env"].as_array().into_iter().flatten() {
                if let Some(name) = name.as_str() {
                    out.env.insert(name.to_string());
                }
            }
            let nets = granted_nets(g);
            let origins: Vec<&str> = g["http"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let ca = g["http_ca"].as_str();
            for u in &s.uses {
                match u {
                    Used::Dir { host, guest, write } => {
                        match dirs.iter().find(|d| &d.host == host && &d.guest == guest) {
                            Some(d) if *write && d.read_only => out.note(format!(
                                "session {}: a write through the read-only {} is not taken",
                                comment_text(id),
                                quoted(&format!("{host}::{guest}"))
                            )),
                            Some(d) => out.add_dir(d, *write),
                            None => out.not_granted(id, "dir", &format!("{host}::{guest}")),
                        }
                    }
                    Used::Net { allow_net } => {
                        if nets.iter().any(|n| n.covers(allow_net)) {
                            out.net.insert(allow_net.clone());
                        } else {
                            out.not_granted(id, "allow_net", allow_net);
                        }
                    }
                    Used::Lookup { name, allow_net } => {
                        let named = nets
                            .iter()
                            .any(|n| n.spec == *allow_net && n.host.eq_ignore_ascii_case(name));
                        if named {
                            looked_up
                                .entry(name.to_ascii_lowercase())
                                .or_insert_with(|| allow_net.clone());
                        } else {
                            out.not_granted(id, "allow_net", allow_net);
                        }
                    }
                    Used::Http {
                        origin,
                        fixture: true,
                    } => {
                        // No grant is in force beside fixtures, and only a
                        // scenario run has them: the origin is what the
                        // Tick needs for real, checked as a grant when the
                        // policy is written.
                        if start.origin == "scenario" {
                            out.http.insert(origin.clone());
                            out.fixtures.insert(origin.clone());
                        } else {
                            out.not_granted(id, "allow_http", origin);
                        }
                    }
                    Used::Http { origin, .. } => {
                        if origins.contains(&origin.as_str()) {
                            out.http.insert(origin.clone());
                            if origin.starts_with("https://") {
                                used_https = true;
                                if let Some(ca) = ca {
                                    cas.insert(ca.to_string());
                                }
                            }
                        } else {
                            out.not_granted(id, "allow_http", origin);
                        }
                    }
                }
            }
            // What this session had and nobody used is listed after the union.
            for d in dirs {
                out.granted.insert(("dir", d.key()));
            }
            for n in nets {
                out.granted.insert(("allow_net", n.spec));
            }
            for o in origins {
                out.granted.insert(("allow_http", o.to_string()));
            }
        }
        for (name, grant) in looked_up {
            let covered = out
                .net
                .iter()
                .any(|n| NetSpec::parse(n).is_some_and(|n| n.host.eq_ignore_ascii_case(&name)));
            if !covered {
                out.net.insert(grant);
            }
        }
        if used_https {
            out.http_ca = cas.into_iter().collect();
        }
        out.bounds = bounds_in_force(&wasm_sessions);
        if self.lost > 0 {
            out.incomplete.push(format!(
                "{} events were dropped by a writer that fell behind (lost)",
                self.lost
            ));
        }
        if self.cut > 0 {
            out.incomplete
                .push(format!("{} events were written shortened (cut)", self.cut));
        }
        out
    }
}

/// A directory grant in force, from a start's `grants.dirs`.
#[derive(Clone)]
struct DirGrant {
    host: String,
    guest: String,
    read_only: bool,
    max_write: Option<u64>,
}

impl DirGrant {
    fn key(&self) -> String {
        let mode = if self.read_only { "ro" } else { "rw" };
        format!("{}::{}:{mode}", self.host, self.guest)
    }
}

fn granted_dirs(g: &Value) -> Vec<DirGrant> {
    g["dirs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            Some(DirGrant {
                host: d["host"].as_str()?.to_string(),
                guest: d["guest"].as_str()?.to_string(),
                read_only: d["read_only"].as_bool()?,
                max_write: d["max_write"].as_u64(),
            })
        })
        .collect()
}

/// An `allow_net` grant as written, and its host.
struct NetSpec {
    host: String,
    spec: String,
}

impl NetSpec {
    /// Reads `HOST:PORT` as `allow_net` writes it (IPv6 in brackets).
    fn parse(spec: &str) -> Option<NetSpec> {
        let (host, port) = spec.rsplit_once(':')?;
        if port != "*" {
            port.parse::<u16>().ok()?;
        }
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        Some(NetSpec {
            host: host.to_string(),
            spec: spec.to_string(),
        })
    }

    /// Whether this grant allows the narrower grant `spec` (the sandbox's
    /// [`NetGrant::covers`]).
    fn covers(&self, spec: &str) -> bool {
        match (NetGrant::parse(&self.spec), NetGrant::parse(spec)) {
            (Ok(grant), Ok(narrower)) => grant.covers(&narrower),
            _ => false,
        }
    }
}

/// The `allow_net` grants of a start's `grants.net` (`{host, port}`).
fn granted_nets(g: &Value) -> Vec<NetSpec> {
    g["net"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| {
            let host = n["host"].as_str()?;
            let port = match &n["port"] {
                Value::Null => "*".to_string(),
                p => p.as_u64()?.to_string(),
            };
            let spec = if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            };
            NetSpec::parse(&spec)
        })
        .collect()
}

/// The bounds set to other than their default in some run: `(key, value)`
/// at the largest value in force (a run that had no quota makes
/// `max_write` unbounded again).
fn bounds_in_force(sessions: &[&Value]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let sizes: [(&str, u64); 4] = [
        ("max_memory", bounds::DEFAULT_MAX_MEMORY),
        ("max_handles", bounds::DEFAULT_MAX_HANDLES as u64),
        ("max_wasm_size", bounds::DEFAULT_MAX_WASM),
        ("compile_memory", bounds::DEFAULT_COMPILE_MEMORY),
    ];
    for (key, default) in sizes {
        let largest = sessions.iter().filter_map(|g| g[key].as_u64()).max();
        if let Some(v) = largest.filter(|&v| v != default) {
            let text = if key == "max_handles" {
                v.to_string()
            } else {
                size(v)
            };
            out.push((key, text));
        }
    }
    let timeout = sessions
        .iter()
        .filter_map(|g| g["compile_timeout"].as_f64())
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
    if let Some(t) = timeout.filter(|&t| t != bounds::DEFAULT_COMPILE_TIMEOUT.as_secs_f64()) {
        out.push(("compile_timeout", t.to_string()));
    }
    // Bounded only if every run was: one without a quota wrote unbounded.
    let quotas: Option<Vec<u64>> = sessions.iter().map(|g| g["max_write"].as_u64()).collect();
    if let Some(max) = quotas.and_then(|q| q.into_iter().max()) {
        out.push(("max_write", size(max)));
    }
    out
}

/// A directory chosen: written anywhere, and its quotas in force.
struct DirChoice {
    grant: DirGrant,
    write: bool,
    /// Every session's `max=` for it (`None`: that one had none).
    quotas: Vec<Option<u64>>,
}

/// The policy and its comments.
#[derive(Default)]
pub struct Suggestion {
    dirs: BTreeMap<(String, String), DirChoice>,
    net: BTreeSet<String>,
    http: BTreeSet<String>,
    http_ca: Vec<String>,
    env: BTreeSet<String>,
    bounds: Vec<(&'static str, String)>,
    /// Every grant in force in some wasm session, as `(key, value)`.
    granted: BTreeSet<(&'static str, String)>,
    ticks: BTreeSet<String>,
    native: BTreeSet<String>,
    /// Origins a scenario's fixtures answered.
    fixtures: BTreeSet<String>,
    /// A scenario run had directories (its scratch one is temporary).
    scenario_dirs: bool,
    /// Each refusal line (already escaped) and how often.
    refusals: BTreeMap<String, u64>,
    /// What was not taken and why (already escaped), at most [`MAX_LISTED`].
    notes: Vec<String>,
    notes_past: usize,
    pub incomplete: Vec<String>,
}

impl Suggestion {
    fn note(&mut self, line: String) {
        if self.notes.contains(&line) {
            return;
        }
        if self.notes.len() < MAX_LISTED {
            self.notes.push(line);
        } else {
            self.notes_past += 1;
        }
    }

    fn not_granted(&mut self, session: &str, key: &str, value: &str) {
        self.note(format!(
            "session {}: a use of {key} {} that its start did not grant is not taken",
            comment_text(session),
            quoted(value)
        ));
    }

    fn add_dir(&mut self, d: &DirGrant, write: bool) {
        let c = self
            .dirs
            .entry((d.host.clone(), d.guest.clone()))
            .or_insert_with(|| DirChoice {
                grant: d.clone(),
                write: false,
                quotas: Vec::new(),
            });
        c.write |= write;
        c.quotas.push(d.max_write);
    }

    /// The policy file: a header, the grants, then what was left out and
    /// refused, as comments.
    pub fn render(&self, record: &Record) -> String {
        let mut o = String::new();
        let sessions = record
            .sessions
            .values()
            .filter(|s| s.start.is_some())
            .count();
        let files: Vec<String> = record.files.iter().map(|f| comment_text(f)).collect();
        let _ = writeln!(
            o,
            "# A least-privilege policy suggested by `tickbox policy suggest` from {sessions} session(s)"
        );
        let _ = writeln!(o, "# in {}.", files.join(", "));
        o.push_str(
            "# It allows what the recorded runs used and nothing more: read it before you use\n\
             # it (--policy FILE); a run that takes another path may need more.\n",
        );
        for t in &self.ticks {
            let _ = writeln!(o, "# Tick: {t}");
        }
        for n in &self.native {
            let _ = writeln!(
                o,
                "# Not sandboxed, so no policy applies (a native Tick): {n}"
            );
        }
        if self.scenario_dirs {
            o.push_str(
                "# Some sessions are scenario runs (tickbox test): a scratch directory they were\n\
                 # granted was temporary; map a directory of yours in its place.\n",
            );
        }
        for why in &self.incomplete {
            let _ = writeln!(
                o,
                "# INCOMPLETE RECORD: {why}; this policy may allow too little."
            );
        }
        let mut skipped = Vec::new();
        let mut dirs = Vec::new();
        for c in self.dirs.values() {
            let d = &c.grant;
            let mode = if c.write { "rw" } else { "ro" };
            let quota: Option<Vec<u64>> = c.quotas.iter().copied().collect();
            let spec = match quota.and_then(|q| q.into_iter().max()) {
                Some(max) if c.write => format!("{}::{}:rw,max={}", d.host, d.guest, size(max)),
                _ => format!("{}::{}:{mode}", d.host, d.guest),
            };
            // The value must read back as this very grant.
            let back = spec
                .rsplit_once(':')
                .and_then(|(rest, _)| rest.split_once("::"));
            if back == Some((d.host.as_str(), d.guest.as_str())) && dir_host(&spec) == d.host {
                dirs.push(spec);
            } else {
                skipped.push(("dir", spec));
            }
        }
        let check = |key: &'static str, values: &BTreeSet<String>, skipped: &mut Vec<_>| {
            let mut ok = Vec::new();
            for v in values {
                let mut spec = GrantSpec::default();
                match key {
                    "allow_net" => spec.allow_net = vec![v.clone()],
                    _ => spec.allow_http = vec![v.clone()],
                }
                if spec.resolve().is_ok() {
                    ok.push(v.clone());
                } else {
                    skipped.push((key, v.clone()));
                }
            }
            ok
        };
        let net = check("allow_net", &self.net, &mut skipped);
        let http = check("allow_http", &self.http, &mut skipped);
        let env: Vec<String> = self
            .env
            .iter()
            .filter(|n| {
                let ok = !n.is_empty() && !n.contains(['=', '\0']);
                if !ok {
                    skipped.push(("env", n.to_string()));
                }
                ok
            })
            .cloned()
            .collect();
        let relative = self.dirs.keys().any(|(host, _)| !host.starts_with('/'));
        let why = relative.then_some(
            "# A relative host path is as it was given: relative to the directory tickbox\n\
             # runs in, not to this file.\n",
        );
        array(&mut o, "dir", &dirs, why);
        array(&mut o, "allow_net", &net, None);
        let fixtures: String = http
            .iter()
            .filter(|h| self.fixtures.contains(*h))
            .map(|h| format!("#   {}\n", quoted(h)))
            .collect();
        let why = (!fixtures.is_empty()).then(|| {
            format!(
                "# Answered by a scenario's HTTP fixtures in the recorded runs, never reached;\n\
                 # granted here so the Tick reaches them for real:\n{fixtures}"
            )
        });
        array(&mut o, "allow_http", &http, why.as_deref());
        if let Some(ca) = self.http_ca.first() {
            o.push('\n');
            o.push_str("# The CA file the https origins above were reached under.\n");
            let _ = writeln!(o, "http_ca = {}", text::toml_string(ca));
            for other in &self.http_ca[1..] {
                let _ = writeln!(o, "# (another run used {})", quoted(other));
            }
        }
        array(
            &mut o,
            "env",
            &env,
            Some(
                "# Given to the Tick at start: WASI hands it the whole environment at once, so\n\
                 # which it read cannot be seen. Each takes its value from tickbox's environment.\n",
            ),
        );
        if !self.bounds.is_empty() {
            o.push_str("\n# Bounds set in the recorded runs (the largest where they differ).\n");
            for (key, value) in &self.bounds {
                let _ = writeln!(o, "{key} = {}", text::toml_string(value));
            }
        }
        let suggested: BTreeSet<(&str, String)> = dirs
            .iter()
            .map(|d| ("dir", d.clone()))
            .chain(net.iter().map(|n| ("allow_net", n.clone())))
            .chain(http.iter().map(|h| ("allow_http", h.clone())))
            .collect();
        let unused: Vec<String> = self
            .granted
            .iter()
            .filter(|(key, value)| !self.is_used(key, value, &suggested))
            .map(|(key, value)| format!("{key} {}", quoted(value)))
            .collect();
        comments(
            &mut o,
            "Granted in the recorded runs but not used (left out):",
            unused.iter().map(|u| (u.clone(), 1)),
            0,
        );
        comments(
            &mut o,
            "Refused in the recorded runs:",
            self.refusals.iter().map(|(r, n)| (r.clone(), *n)),
            0,
        );
        let skipped: Vec<String> = skipped
            .into_iter()
            .map(|(key, v)| format!("{key} {}: it does not read back as a grant", quoted(&v)))
            .chain(self.notes.iter().cloned())
            .collect();
        comments(
            &mut o,
            "Not taken:",
            skipped.into_iter().map(|s| (s, 1)),
            self.notes_past,
        );
        o
    }

    /// Whether a grant in force covers something suggested.
    fn is_used(&self, key: &str, value: &str, suggested: &BTreeSet<(&str, String)>) -> bool {
        match key {
            // Whatever its mode in the run that had it.
            "dir" => self.dirs.keys().any(|(host, guest)| {
                [":ro", ":rw"]
                    .iter()
                    .any(|mode| value == format!("{host}::{guest}{mode}"))
            }),
            "allow_net" => NetSpec::parse(value).is_some_and(|g| {
                suggested
                    .iter()
                    .any(|(k, v)| *k == "allow_net" && g.covers(v))
            }),
            _ => suggested.contains(&(key, value.to_string())),
        }
    }
}

/// `KEY = [ … ]`, one value a line, when there are values.
fn array(o: &mut String, key: &str, values: &[String], why: Option<&str>) {
    if values.is_empty() {
        return;
    }
    o.push('\n');
    if let Some(why) = why {
        o.push_str(why);
    }
    let _ = writeln!(o, "{key} = [");
    for v in values {
        let _ = writeln!(o, "    {},", text::toml_string(v));
    }
    o.push_str("]\n");
}

/// A block of `#` lines under `title`: at most [`MAX_LISTED`] entries
/// (each already escaped), with a count of the rest.
fn comments(o: &mut String, title: &str, lines: impl Iterator<Item = (String, u64)>, past: usize) {
    let lines: Vec<(String, u64)> = lines.collect();
    if lines.is_empty() && past == 0 {
        return;
    }
    let _ = write!(o, "\n# {title}\n");
    for (line, n) in lines.iter().take(MAX_LISTED) {
        if *n > 1 {
            let _ = writeln!(o, "#   {line} ({n} times)");
        } else {
            let _ = writeln!(o, "#   {line}");
        }
    }
    let more = lines.len().saturating_sub(MAX_LISTED) + past;
    if more > 0 {
        let _ = writeln!(o, "#   … and {more} more");
    }
}

/// A string from a file, for a comment: one line, every control, line
/// break and bidi character a visible escape.
fn comment_text(s: &str) -> String {
    text::escape(s)
}

/// [`comment_text`] in quotes, so where it starts and ends is plain.
fn quoted(s: &str) -> String {
    format!("\"{}\"", comment_text(s))
}

/// A size as the bounds take it: the largest binary unit that divides it
/// (`256MiB`, `4GiB`, `4KiB`), else bytes.
pub fn size(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tickbox_telemetry::audit::MAX_AUDIT_LINE_BYTES;

    /// The one comparison of grants (the sandbox's) as the suggestion uses it.
    #[test]
    fn a_grant_covers_its_host_at_its_port_or_any_port() {
        let g = |s: &str| NetGrant::parse(s).unwrap();
        assert!(g("example.com:*").covers(&g("EXAMPLE.com:443")));
        assert!(g("example.com:443").covers(&g("example.com:443")));
        assert!(!g("example.com:443").covers(&g("example.com:80")));
        assert!(!g("example.com:443").covers(&g("example.com:*")));
        assert!(!g("example.com:*").covers(&g("other.example:443")));
        assert!(g("[::ffff:127.0.0.1]:80").covers(&g("127.0.0.1:80")));
        let n = NetSpec::parse("example.com:*").unwrap();
        assert!(n.covers("example.com:8080") && !n.covers("example.org:8080"));
    }

    fn line(v: Value) -> String {
        v.to_string()
    }

    fn start(session: &str, grants: Value) -> String {
        line(
            json!({"v": 1, "ts": "t", "event": "start", "session": session,
            "origin": "cli", "tick": "notes.wasm", "backend": "wasm component",
            "sha256": "sha256:ab", "grants": grants}),
        )
    }

    fn used(session: &str, fields: Value) -> String {
        let mut v = json!({"v": 1, "ts": "t", "event": "used", "session": session});
        v.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        line(v)
    }

    fn grants(dirs: Value, net: Value, http: Value) -> Value {
        json!({"dirs": dirs, "net": net, "http": http, "http_ca": null, "env": ["MODE"],
            "max_memory": bounds::DEFAULT_MAX_MEMORY, "max_handles": bounds::DEFAULT_MAX_HANDLES,
            "max_wasm_size": bounds::DEFAULT_MAX_WASM,
            "compile_timeout": bounds::DEFAULT_COMPILE_TIMEOUT.as_secs_f64(),
            "compile_memory": bounds::DEFAULT_COMPILE_MEMORY, "max_write": null})
    }

    fn suggest(lines: &[String]) -> (String, toml::Table) {
        let mut r = Record::default();
        r.add(&lines.join("\n")).unwrap();
        r.files.push("a.jsonl".into());
        let text = r.suggest().render(&r);
        let table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        (text, table)
    }

    #[test]
    fn uses_merge_into_the_least_policy_and_only_what_was_granted() {
        let g = grants(
            json!([
                {"host": "/n", "guest": "/notes", "read_only": false, "max_write": null},
                {"host": "/r", "guest": "/ref", "read_only": false, "max_write": null},
                {"host": "/x", "guest": "/x", "read_only": true, "max_write": null}
            ]),
            json!([{"host": "127.0.0.1", "port": null}, {"host": "example.com", "port": 443}]),
            json!(["http://127.0.0.1:8080", "http://127.0.0.1:9"]),
        );
        let lines = [
            start("a", g.clone()),
            used(
                "a",
                json!({"what": "dir", "host": "/n", "guest": "/notes", "access": "read"}),
            ),
            used(
                "a",
                json!({"what": "dir", "host": "/r", "guest": "/ref", "access": "read"}),
            ),
            used(
                "a",
                json!({"what": "socket", "address": "127.0.0.1:5000", "allow_net": "127.0.0.1:5000"}),
            ),
            used(
                "a",
                json!({"what": "lookup", "name": "example.com", "allow_net": "example.com:443"}),
            ),
            used(
                "a",
                json!({"what": "http_origin", "origin": "http://127.0.0.1:8080"}),
            ),
            // Not granted by its start: never taken.
            used(
                "a",
                json!({"what": "dir", "host": "/", "guest": "/", "access": "write"}),
            ),
            used(
                "a",
                json!({"what": "dir", "host": "/x", "guest": "/x", "access": "write"}),
            ),
            used(
                "a",
                json!({"what": "http_origin", "origin": "http://evil.example:80"}),
            ),
            // A second session writes where the first only read.
            start("b", g),
            used(
                "b",
                json!({"what": "dir", "host": "/n", "guest": "/notes", "access": "write"}),
            ),
            // Uses of a session whose start is elsewhere.
            used(
                "c",
                json!({"what": "dir", "host": "/c", "guest": "/c", "access": "read"}),
            ),
        ];
        let (text, t) = suggest(&lines);
        assert_eq!(
            t["dir"].as_array().unwrap(),
            &[
                toml::Value::from("/n::/notes:rw"),
                toml::Value::from("/r::/ref:ro")
            ],
            "{text}"
        );
        assert_eq!(
            t["allow_net"].as_array().unwrap(),
            &[
                toml::Value::from("127.0.0.1:5000"),
                toml::Value::from("example.com:443")
            ],
            "{text}"
        );
        assert_eq!(
            t["allow_http"].as_array().unwrap(),
            &[toml::Value::from("http://127.0.0.1:8080")]
        );
        assert_eq!(t["env"].as_array().unwrap(), &[toml::Value::from("MODE")]);
        let keys: Vec<&String> = t.keys().collect();
        assert_eq!(keys, ["allow_http", "allow_net", "dir", "env"], "{text}");
        // What was granted and unused, and what was not taken, is said.
        assert!(text.contains("#   dir \"/x::/x:ro\""), "{text}");
        assert!(
            text.contains("#   allow_http \"http://127.0.0.1:9\""),
            "{text}"
        );
        assert!(
            text.contains("a write through the read-only \"/x::/x\""),
            "{text}"
        );
        assert!(text.contains("allow_http \"http://evil.example:80\" that its start did not grant"));
        assert!(text.contains("session c: its start is not in these files"));
        // The suggested spec parses as the policy reader parses it.
        let spec: GrantSpec = toml::from_str(&text).unwrap();
        assert_eq!(spec.dir.len(), 2);
    }

    #[test]
    fn a_hostile_string_never_ends_a_comment_or_adds_a_key() {
        let hostile = "x\"]\n[evil]\nallow_net = [\"0.0.0.0:1\"]\r\n# \u{2028}dir = [\"/\"]\u{202e}\x1b]2;t\x07";
        let mut g = grants(json!([]), json!([]), json!([]));
        g["env"] = json!([]);
        let lines = [
            line(
                json!({"v": 1, "ts": "t", "event": "start", "session": hostile,
                "origin": "cli", "tick": hostile, "backend": "wasm component",
                "sha256": hostile, "grants": g}),
            ),
            line(
                json!({"v": 1, "ts": "t", "event": "denied", "session": hostile,
                "what": hostile, "attempted": hostile, "detail": hostile}),
            ),
            line(
                json!({"v": 1, "ts": "t", "event": "limit", "session": hostile,
                "bound": hostile, "value": 1, "detail": hostile}),
            ),
            used(
                hostile,
                json!({"what": "dir", "host": hostile, "guest": hostile, "access": "read"}),
            ),
        ];
        let (text, t) = suggest(&lines);
        assert!(t.is_empty(), "no key at all: {t:?}\n{text}");
        for l in text.lines() {
            assert!(l.is_empty() || l.starts_with('#'), "{l:?}");
            assert!(!l.chars().any(text::is_unsafe), "{l:?}");
        }
        // Positive control: the refusal is there, escaped, whole.
        let escaped = text::escape(hostile);
        assert!(
            text.contains(&format!("denied {escaped} \"{escaped}\": {escaped}")),
            "{text}"
        );
        // And a value (a grant's path) with the same characters is a TOML
        // string of the same value.
        let v = text::toml_string(hostile);
        let back: toml::Table = toml::from_str(&format!("k = {v}")).unwrap();
        assert_eq!(back["k"].as_str(), Some(hostile));
        assert!(!v.chars().any(text::is_unsafe));
    }

    #[test]
    fn bad_input_names_the_line_and_the_rule_never_the_content() {
        let bad = |text: &str| {
            let mut r = Record::default();
            r.add(text).unwrap_err()
        };
        let secret = "SECRET-CONTENT";
        assert!(bad(&format!("{secret}\n")).starts_with("1: not an audit line: not JSON"));
        assert!(!bad(&format!("{secret}\n")).contains(secret));
        let ok = start("a", json!({}));
        assert!(bad(&format!("{ok}\n[1,2]")).starts_with("2: not an audit line: not a JSON object"));
        assert_eq!(
            bad(r#"{"v":2,"event":"start","session":"a"}"#),
            "1: audit schema version 2; this tickbox reads version 1"
        );
        assert!(bad(r#"{"event":"start"}"#).contains("no schema version"));
        let long = format!("{{\"v\":1,\"x\":\"{}\"}}", "a".repeat(MAX_AUDIT_LINE_BYTES));
        assert!(bad(&long).contains("MAX_AUDIT_LINE_BYTES"));
        assert!(bad(r#"{"v":1,"event":"used","session":"a","what":"dir"}"#)
            .contains("without its field host"));
        // Positive controls: blank lines and events of a later tickbox pass.
        let mut r = Record::default();
        r.add(&format!(
            "{ok}\n\n{}\n",
            r#"{"v":1,"event":"future","session":"a","x":1}"#
        ))
        .unwrap();
        assert_eq!(r.sessions.len(), 1);
    }

    #[test]
    fn bounds_and_quotas_are_kept_only_as_set_in_the_runs() {
        let mut a = grants(
            json!([{"host": "/n", "guest": "/n", "read_only": false, "max_write": 1048576}]),
            json!([]),
            json!([]),
        );
        a["max_memory"] = json!(32u64 << 20);
        a["max_write"] = json!(4096);
        let mut b = a.clone();
        b["max_memory"] = json!(64u64 << 20);
        b["dirs"][0]["max_write"] = json!(2u64 << 20);
        let lines = [
            start("a", a),
            start("b", b.clone()),
            used(
                "a",
                json!({"what": "dir", "host": "/n", "guest": "/n", "access": "write"}),
            ),
            used(
                "b",
                json!({"what": "dir", "host": "/n", "guest": "/n", "access": "write"}),
            ),
        ];
        let (text, t) = suggest(&lines);
        assert_eq!(t["max_memory"].as_str(), Some("64MiB"), "{text}");
        assert_eq!(t["max_write"].as_str(), Some("4KiB"));
        assert_eq!(t["dir"][0].as_str(), Some("/n::/n:rw,max=2MiB"));
        assert!(t.get("max_handles").is_none(), "defaults are not written");
        // One run without a quota: unbounded again.
        let mut c = b;
        c["max_write"] = Value::Null;
        c["dirs"][0]["max_write"] = Value::Null;
        let mut lines = lines.to_vec();
        lines.push(start("c", c));
        lines.push(used(
            "c",
            json!({"what": "dir", "host": "/n", "guest": "/n", "access": "write"}),
        ));
        let (_, t) = suggest(&lines);
        assert!(t.get("max_write").is_none());
        assert_eq!(t["dir"][0].as_str(), Some("/n::/n:rw"));
    }

    #[test]
    fn origins_a_scenarios_fixtures_answered_are_suggested_and_said_to_be() {
        let mut g = grants(json!([]), json!([]), json!([]));
        g["env"] = json!([]);
        let mut start = start("s", g);
        start = start.replace("\"origin\":\"cli\"", "\"origin\":\"scenario\"");
        let lines = [
            start,
            used(
                "s",
                json!({"what": "http_origin", "origin": "https://api.example.com:443", "fixture": true}),
            ),
            // Positive control: a use that no fixture answered and no grant allowed.
            used(
                "s",
                json!({"what": "http_origin", "origin": "http://elsewhere.example:80", "fixture": false}),
            ),
        ];
        let (text, t) = suggest(&lines);
        assert_eq!(
            t["allow_http"].as_array().unwrap(),
            &[toml::Value::from("https://api.example.com:443")],
            "{text}"
        );
        assert!(
            text.contains("# Answered by a scenario's HTTP fixtures"),
            "{text}"
        );
        assert!(
            text.contains("#   \"https://api.example.com:443\""),
            "{text}"
        );
        assert!(text.contains("\"http://elsewhere.example:80\" that its start did not grant"));
        // Only a scenario run has fixtures: the same use in another is not taken.
        let cli = [
            lines[0].replace("\"origin\":\"scenario\"", "\"origin\":\"cli\""),
            lines[1].clone(),
        ];
        let (text, t) = suggest(&cli);
        assert!(t.get("allow_http").is_none(), "{text}");
    }

    #[test]
    fn a_merged_refusal_counts_as_many_and_a_passed_budget_is_incomplete() {
        let g = grants(json!([]), json!([]), json!([]));
        let denied = |extra: Value| {
            let mut e = json!({"v": 1, "ts": "t", "event": "denied", "session": "a",
                "what": "path", "attempted": "../x", "detail": "leads out"});
            if let (Value::Object(e), Value::Object(x)) = (&mut e, extra) {
                e.extend(x);
            }
            line(e)
        };
        let lines = [
            start("a", g),
            denied(json!({})),
            denied(json!({"count": 41, "first": "t", "last": "t"})),
            line(
                json!({"v": 1, "ts": "t", "event": "unrecorded", "session": "a",
                "bound": 1024, "dropped": {"used": {"socket": 5}, "denied": {"lookup": 2}},
                "detail": "…"}),
            ),
        ];
        let (text, _) = suggest(&lines);
        assert!(
            text.contains("denied path \"../x\": leads out (42 times)"),
            "{text}"
        );
        assert!(
            text.contains(
                "# INCOMPLETE RECORD: session a passed its audit budget: 7 of its events"
            ),
            "{text}"
        );
        // Positive control: without the merged line and the budget's
        // event, one refusal and a complete record.
        let (text, _) = suggest(&lines[..2]);
        assert!(text.contains("denied path \"../x\": leads out\n"), "{text}");
        assert!(!text.contains("INCOMPLETE"), "{text}");
    }

    #[test]
    fn an_incomplete_record_says_so() {
        let g = grants(json!([]), json!([]), json!([]));
        let lines = [
            start("a", g),
            used(
                "a",
                json!({"what": "unrecorded", "bound": 256, "detail": "…"}),
            ),
            line(json!({"v": 1, "ts": "t", "event": "end", "session": "a", "lost": 3})),
        ];
        let (text, _) = suggest(&lines);
        assert!(
            text.contains("# INCOMPLETE RECORD: session a used more than"),
            "{text}"
        );
        assert!(
            text.contains("# INCOMPLETE RECORD: 3 events were dropped"),
            "{text}"
        );
        // Positive control: a complete record says nothing of the kind.
        let (text, _) = suggest(&[start("b", grants(json!([]), json!([]), json!([])))]);
        assert!(!text.contains("INCOMPLETE"), "{text}");
    }
}
