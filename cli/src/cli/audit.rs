//! Where the audit stream goes: the CLI's half of
//! [`tickbox_runtime::audit`] (the events and writers are the host
//! crate's, `docs/AUDIT.md` the schema).
//!
//! The CLI owns every way of asking for one: `--audit FILE` (appended,
//! rotated at `AUDIT_FILE_MAX_BYTES` or `TICKBOX_AUDIT_MAX_SIZE`; `-` for
//! stderr), `--audit-args` and `--audit-sync` on every command that runs a
//! Tick, the `audit`, `audit_args` and `audit_sync` keys of a `--policy`
//! file and of a `tickbox mcp --config` file, and the live host's own
//! file, which `tickbox run` always keeps in the state directory
//! (`$XDG_RUNTIME_DIR/tickbox/audit/host-PID.jsonl`), rotated at
//! `LIVE_AUDIT_MAX_BYTES` (or `TICKBOX_LIVE_AUDIT_MAX_SIZE`). Each
//! destination is opened once per process, so Ticks of one `tickbox mcp`
//! share a file and its writer; [`finish`] gives every writer its bounded
//! time to empty its queue on the way out.
//!
//! `--audit-sync` makes the `--audit` file's writer a synced one
//! (`QueuedWriter::synced`: each batch written and `fdatasync`ed, no
//! gathering) and the handle synced, so a call's answer waits for its
//! line. Only a file can be synced: with `-` or no destination it is a
//! usage error. The live host's own file stays batched.

use super::exit::Exit;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tickbox_runtime::audit::{
    Audit, AuditObserver, AuditSink, LineOut, Origin, Plain, QueuedWriter, RotatingFile,
};

/// Every writer this process opened, by destination (`-` or a path).
static WRITERS: Mutex<Vec<(String, Arc<QueuedWriter>)>> = Mutex::new(Vec::new());

/// Where an audit stream should go: the application layer's type.
pub use tickbox_app::AuditWish as Wanted;

/// The writer for `to` (`-` is stderr), opened once per process; a synced
/// one ([`QueuedWriter::synced`]) when `sync`.
fn writer(
    to: &str,
    sync: bool,
    open: impl FnOnce() -> std::io::Result<Box<dyn LineOut>>,
) -> Result<Arc<QueuedWriter>, Exit> {
    let mut writers = tickbox_runtime::util::lock(&WRITERS);
    // One writer per destination and kind: a synced and a batched one on
    // one file each write whole lines (one append per batch).
    let key = format!("{}{to}", if sync { "sync:" } else { "" });
    if let Some((_, w)) = writers.iter().find(|(k, _)| *k == key) {
        return Ok(w.clone());
    }
    let spawn = if sync {
        QueuedWriter::synced
    } else {
        QueuedWriter::spawn
    };
    let w = open().and_then(spawn).map_err(|e| {
        Exit::usage(format!(
            "--audit {}: cannot open it: {e}",
            tickbox_runtime::text::escape(to)
        ))
    })?;
    writers.push((key, w.clone()));
    Ok(w)
}

/// The sink for an `--audit` destination: stderr, or a file rotated at
/// its bound (`TICKBOX_AUDIT_MAX_SIZE`) with `AUDIT_FILE_KEEP` older ones,
/// synced when `sync`.
fn sink(to: &str, sync: bool) -> Result<Arc<dyn AuditSink>, Exit> {
    let w = if to == "-" {
        writer(to, false, || Ok(Box::new(Plain(std::io::stderr()))))?
    } else {
        let path = PathBuf::from(to);
        let max = super::env::audit_max_bytes();
        let keep = tickbox_runtime::audit::AUDIT_FILE_KEEP;
        writer(to, sync, move || {
            Ok(Box::new(RotatingFile::open(&path, max, keep)?))
        })?
    };
    Ok(w)
}

/// Sinks every audit handle of this process writes to besides the one
/// asked for: the live host's own file.
static EXTRA: Mutex<Vec<Arc<dyn AuditSink>>> = Mutex::new(Vec::new());

/// Adds `sink` to every audit handle made from now on.
pub fn also_into(sink: Arc<dyn AuditSink>) {
    tickbox_runtime::util::lock(&EXTRA).push(sink);
}

/// The audit handle for Ticks started by `origin` with what `wanted`
/// asks (and [`also_into`]'s sinks), its events also handed to
/// `observers` (the MCP server's metrics) and to OpenTelemetry when the
/// `OTEL_*` variables ask for it (`super::otel`); `None` when nothing is
/// audited or observed.
pub fn handle(
    origin: Origin,
    wanted: &Wanted,
    observers: &[Arc<dyn AuditObserver>],
) -> Result<Option<Audit>, Exit> {
    let mut sinks = tickbox_runtime::util::lock(&EXTRA).clone();
    if wanted.sync && wanted.to.as_deref().is_none_or(|to| to == "-") {
        return Err(Exit::usage(
            "--audit-sync: only an audit file can be synced: give --audit FILE (or an audit key naming a file)",
        ));
    }
    if let Some(to) = &wanted.to {
        sinks.push(sink(to, wanted.sync)?);
    }
    // OpenTelemetry, when the standard variables ask for it: one more
    // observer of the same events.
    let otel = super::otel::observer()?;
    if sinks.is_empty() && observers.is_empty() && otel.is_none() {
        return Ok(None);
    }
    let audit = Audit::new(origin, sinks)
        .with_args(wanted.args)
        .synced(wanted.sync)
        .with_session_budget(super::env::audit_session_max_bytes());
    let audit = observers
        .iter()
        .fold(audit, |audit, o| audit.observed_by(o.clone()));
    Ok(Some(match otel {
        Some(o) => audit.observed_by(o),
        None => audit,
    }))
}

/// The live host's own audit file, in the state directory `state`:
/// `audit/host-PID.jsonl`, created 0700/0600, rotated at its bound.
pub fn live_host_sink(state: &Path) -> Result<Arc<dyn AuditSink>, Exit> {
    let dir = state.join("audit");
    let made = {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
    };
    made.map_err(|e| Exit::session(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(format!("host-{}.jsonl", std::process::id()));
    let max = super::env::live_audit_max_bytes();
    let keep = tickbox_runtime::audit::LIVE_AUDIT_KEEP;
    let key = path.display().to_string();
    let w = writer(&key, false, move || {
        Ok(Box::new(RotatingFile::open(&path, max, keep)?))
    })?;
    Ok(w)
}

/// Gives every writer this process opened its bounded time to write what
/// is queued; call once on the way out.
pub fn finish() {
    let writers = std::mem::take(&mut *tickbox_runtime::util::lock(&WRITERS));
    for (_, w) in writers {
        w.finish();
    }
}
