//! Where audit streams are written: each destination opened once per
//! [`App`] (so the Ticks of one `tickbox mcp` share a file and its
//! writer), the sinks every stream also goes to, and the bounded time each
//! writer gets to empty its queue on the way out ([`App::finish_audit`]).

use crate::{App, AppError, AuditWish};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tickbox_host::util::lock;
use tickbox_telemetry::audit::{
    Audit, AuditObserver, AuditSink, LineOut, Origin, Plain, QueuedWriter, RotatingFile,
};

/// The audit writers and extra sinks of one App.
#[derive(Default)]
pub(crate) struct AuditFiles {
    /// One writer per destination and kind (`sync:` prefixed when synced).
    writers: Mutex<Vec<(String, Arc<QueuedWriter>)>>,
    /// Sinks every audit stream of the App also goes to.
    extra: Mutex<Vec<Arc<dyn AuditSink>>>,
}

impl App {
    fn writer(
        &self,
        to: &str,
        sync: bool,
        open: impl FnOnce() -> std::io::Result<Box<dyn LineOut>>,
    ) -> Result<Arc<QueuedWriter>, AppError> {
        let mut writers = lock(&self.audit.writers);
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
        let w = open().and_then(spawn).map_err(|e| AppError::AuditOpen {
            to: to.to_string(),
            why: e.to_string(),
        })?;
        writers.push((key, w.clone()));
        Ok(w)
    }

    fn sink(&self, to: &str, sync: bool) -> Result<Arc<dyn AuditSink>, AppError> {
        let w = if to == "-" {
            self.writer(to, false, || Ok(Box::new(Plain(std::io::stderr()))))?
        } else {
            let path = PathBuf::from(to);
            let max = self.settings.audit_max_bytes;
            let keep = tickbox_telemetry::audit::AUDIT_FILE_KEEP;
            self.writer(to, sync, move || {
                Ok(Box::new(RotatingFile::open(&path, max, keep)?))
            })?
        };
        Ok(w)
    }

    /// Sends every audit stream this App makes from now on to `sink` too
    /// (a live host's own file, the inspector's export).
    pub fn also_audit_into(&self, sink: Arc<dyn AuditSink>) {
        lock(&self.audit.extra).push(sink);
    }

    /// The audit handle for Ticks started by `origin`, writing where
    /// `wish` says (and to the App's extra sinks), observed by
    /// `observers`; `None` when nothing would read it.
    pub fn audit(
        &self,
        origin: Origin,
        wish: &AuditWish,
        observers: &[Arc<dyn AuditObserver>],
    ) -> Result<Option<Audit>, AppError> {
        let mut sinks = lock(&self.audit.extra).clone();
        let mut observers = observers.to_vec();
        if let Some(o) = &self.observers {
            observers.extend(o.observers()?);
        }
        if wish.sync && wish.to.as_deref().is_none_or(|to| to == "-") {
            return Err(AppError::AuditSyncWithoutFile);
        }
        if let Some(to) = &wish.to {
            sinks.push(self.sink(to, wish.sync)?);
        }
        if sinks.is_empty() && observers.is_empty() {
            return Ok(None);
        }
        let audit = Audit::new(origin, sinks)
            .with_args(wish.args)
            .synced(wish.sync)
            .with_session_budget(self.settings.audit_session_max_bytes);
        Ok(Some(
            observers
                .iter()
                .fold(audit, |audit, o| audit.observed_by(o.clone())),
        ))
    }

    /// A live host's own audit file in the state directory `state`:
    /// `audit/host-PID.jsonl`, created 0700/0600, rotated at `max` bytes.
    pub fn live_host_sink(&self, state: &Path, max: u64) -> Result<Arc<dyn AuditSink>, AppError> {
        let dir = state.join("audit");
        let made = {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
        };
        made.map_err(|e| AppError::Session(format!("cannot create {}: {e}", dir.display())))?;
        // The files of hosts that ended: their audit, and their `-v` logs.
        let keep = tickbox_telemetry::audit::LIVE_AUDIT_ENDED_HOSTS;
        prune_ended_hosts(&dir, ".jsonl", keep);
        prune_ended_hosts(state, ".log", keep);
        let path = dir.join(format!("host-{}.jsonl", std::process::id()));
        let keep = tickbox_telemetry::audit::LIVE_AUDIT_KEEP;
        let key = path.display().to_string();
        let w = self.writer(&key, false, move || {
            Ok(Box::new(RotatingFile::open(&path, max, keep)?))
        })?;
        Ok(w)
    }

    /// Gives every writer this App opened its bounded time to write what
    /// is queued; call once on the way out, after the sessions have ended.
    pub fn finish_audit(&self) {
        let writers = std::mem::take(&mut *lock(&self.audit.writers));
        for (_, w) in writers {
            w.finish();
        }
        if let Some(o) = &self.observers {
            o.finish();
        }
    }
}

/// Removes the files `host-PID{suffix}` (and their rotations, `.N`) of
/// live hosts that no longer run, but those of the `keep` most recently
/// written: each `tickbox run` host writes its own audit (and with `-v`
/// its log), and a script of many would otherwise fill the runtime
/// directory. A process that runs under that PID, whoever it is, keeps its
/// files: they may be its own.
fn prune_ended_hosts(dir: &Path, suffix: &str, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut hosts: std::collections::HashMap<
        u32,
        (std::time::SystemTime, Vec<std::path::PathBuf>),
    > = std::collections::HashMap::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("host-"))
            .and_then(|n| n.split_once(suffix))
            .and_then(|(pid, rest)| {
                let rotation = rest.is_empty()
                    || rest
                        .strip_prefix('.')
                        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
                rotation.then(|| pid.parse::<u32>().ok()).flatten()
            })
        else {
            continue;
        };
        let written = e
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        let host = hosts
            .entry(pid)
            .or_insert((std::time::UNIX_EPOCH, Vec::new()));
        host.0 = host.0.max(written);
        host.1.push(e.path());
    }
    let mut ended: Vec<_> = hosts
        .into_iter()
        .filter(|(pid, _)| !tickbox_host::util::process_exists(*pid))
        .map(|(_, host)| host)
        .collect();
    ended.sort_by_key(|host| std::cmp::Reverse(host.0));
    for (_, files) in ended.into_iter().skip(keep) {
        for f in files {
            let _ = std::fs::remove_file(f);
        }
    }
}

#[cfg(test)]
mod prune_tests {
    use super::*;

    #[test]
    fn ended_hosts_audit_files_are_kept_to_a_bound_and_running_ones_never_removed() {
        let dir = std::env::temp_dir().join(format!("tickbox-live-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // PIDs above pid_max: hosts that ended. Each with a rotation.
        let ended: Vec<u32> = (0..10).map(|n| 2_147_483_000 + n).collect();
        for pid in &ended {
            for name in [format!("host-{pid}.jsonl"), format!("host-{pid}.jsonl.1")] {
                std::fs::write(dir.join(name), "{}\n").unwrap();
            }
        }
        let mine = dir.join(format!("host-{}.jsonl", std::process::id()));
        std::fs::write(&mine, "{}\n").unwrap();
        // Not an audit file of a host: left alone.
        std::fs::write(dir.join("host-12.jsonl.bak"), "").unwrap();
        prune_ended_hosts(&dir, ".jsonl", 4);
        let left = std::fs::read_dir(&dir).unwrap().count();
        // Four ended hosts' two files, the running host's and the stranger.
        assert_eq!(left, 4 * 2 + 1 + 1);
        assert!(mine.exists(), "a running host's file is never removed");
        // Their `-v` logs, by the same rule, leave the audit files alone.
        for pid in &ended {
            std::fs::write(dir.join(format!("host-{pid}.log")), "").unwrap();
        }
        prune_ended_hosts(&dir, ".log", 4);
        let left = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(left, 4 * 2 + 1 + 1 + 4);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
