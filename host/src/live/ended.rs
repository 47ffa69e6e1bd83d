//! Ended instances: what `tickbox ls -a` and `tickbox logs` show after a
//! Tick is gone.
//!
//! When a [`super::Published`] handle drops, it leaves a record
//! `<id>.ended.json` in the registry directory: the instance's info, when
//! and why it ended, and its last words (the last non-blank lines of its
//! screen, as drawn, typed as the Tick's text). Records are kept for
//! [`ENDED_RETENTION`]; listing removes older ones and keeps at most
//! [`MAX_ENDED_RECORDS`], and so does a host at its first record and every
//! that many records it writes after (a host of thousands of Ticks that
//! stops writes that many; a script of one-shot commands starts a host per
//! command). The directory is the registry's (0700, ours), and
//! each record is written to a temporary file and renamed into place.

use super::registry::Registry;
use super::InstanceInfo;
use crate::util::rfc3339;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
use tickbox_protocol::TickText;

/// How long an ended instance stays listed.
pub const ENDED_RETENTION: Duration = Duration::from_secs(60 * 60);
/// Most ended records kept (the newest).
pub const MAX_ENDED_RECORDS: usize = 100;
/// Lines of the screen a record keeps.
pub const RETAINED_LINES: usize = 100;
/// Characters kept of each retained line.
pub const RETAINED_LINE_CHARS: usize = 1000;
/// Characters kept of the Tick's title and kind and of the end reason
/// (which may quote the Tick): a Tick's descriptor may be far longer.
pub const RETAINED_FIELD_CHARS: usize = 1000;
/// The largest record read back: the retained lines and fields, each
/// escaped at worst into a few bytes a character, and room for the rest.
/// A larger file (tickbox writes none) is skipped with a warning.
pub const MAX_ENDED_RECORD_BYTES: u64 =
    (8 * (RETAINED_LINES * RETAINED_LINE_CHARS + 3 * RETAINED_FIELD_CHARS) + 64 * 1024) as u64;

const SUFFIX: &str = ".ended.json";

/// An instance that has ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndedInstance {
    /// What `ls` showed about it while it was live (`views` is 0).
    #[serde(flatten)]
    pub info: InstanceInfo,
    /// When it ended (RFC 3339, UTC).
    pub ended: String,
    /// Why: the session's end reason (e.g. `the Tick ended: exit status 3`).
    pub status: String,
    /// The last lines of its screen, as the Tick drew them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_lines: Vec<TickText>,
}

fn path(registry_dir: &std::path::Path, id: &str) -> PathBuf {
    registry_dir.join(format!("{id}{SUFFIX}"))
}

/// Writes the record of an instance that ended (best effort: a failure is
/// logged, never fatal).
pub(super) fn record(
    registry_dir: &std::path::Path,
    mut info: InstanceInfo,
    status: String,
    last_lines: Vec<TickText>,
) {
    info.views = 0;
    let cut = |s: &str| crate::text::truncate(s, RETAINED_FIELD_CHARS).to_string();
    info.title = cut(&info.title);
    info.kind = cut(&info.kind);
    let status = cut(&status);
    let last_lines = last_lines
        .into_iter()
        .map(|l| TickText::from(crate::text::truncate(l.wire(), RETAINED_LINE_CHARS)))
        .collect();
    let record = EndedInstance {
        ended: rfc3339(SystemTime::now()),
        info,
        status,
        last_lines,
    };
    let final_path = path(registry_dir, &record.info.id);
    let tmp = final_path.with_extension("tmp");
    let written = serde_json::to_vec(&record)
        .map_err(std::io::Error::other)
        .and_then(|bytes| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            std::fs::rename(&tmp, &final_path)
        });
    if let Err(e) = written {
        tracing::warn!(path = %final_path.display(), error = %e, "cannot record an ended instance");
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The records in `dir` still to keep, oldest first: older and surplus
/// ones are removed.
fn kept(dir: &std::path::Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    found.sort();
    let now = SystemTime::now();
    let surplus = found.len().saturating_sub(MAX_ENDED_RECORDS);
    let mut out = Vec::new();
    for (i, (modified, p)) in found.into_iter().enumerate() {
        let old = now.duration_since(modified).unwrap_or_default() > ENDED_RETENTION;
        if old || i < surplus {
            let _ = std::fs::remove_file(&p);
        } else {
            out.push(p);
        }
    }
    out
}

/// Removes older and surplus records. A host calls it at its first record
/// and every [`MAX_ENDED_RECORDS`] records it writes, so hosts leave at
/// most about twice that many behind each when nobody lists them, however
/// many one-shot hosts come and go, for the price of one directory scan
/// per host and per that many records.
pub(super) fn prune(registry_dir: &std::path::Path) {
    kept(registry_dir);
}

/// The ended instances of the last [`ENDED_RETENTION`], oldest first;
/// older and surplus records are removed.
pub fn list(registry: &Registry) -> Vec<EndedInstance> {
    let mut out = Vec::new();
    for p in kept(registry.dir()) {
        // Records are small, but a file someone else put here is not read
        // whole: one byte past the bound tells it apart.
        let mut bytes = Vec::new();
        let read = std::fs::File::open(&p)
            .and_then(|f| f.take(MAX_ENDED_RECORD_BYTES + 1).read_to_end(&mut bytes));
        if read.is_err() {
            continue;
        }
        if bytes.len() as u64 > MAX_ENDED_RECORD_BYTES {
            tracing::warn!(
                path = %p.display(),
                "an ended record larger than MAX_ENDED_RECORD_BYTES ({MAX_ENDED_RECORD_BYTES}) is skipped"
            );
            continue;
        }
        match serde_json::from_slice::<EndedInstance>(&bytes) {
            Ok(r) => out.push(r),
            Err(e) => tracing::warn!(path = %p.display(), error = %e, "unreadable ended record"),
        }
    }
    out
}

/// The newest ended instance with this id or name.
pub fn find(registry: &Registry, target: &str) -> Option<EndedInstance> {
    let target = target.strip_prefix('@').unwrap_or(target);
    let all = list(registry);
    all.iter()
        .rev()
        .find(|r| r.info.id == target)
        .or_else(|| all.iter().rev().find(|r| r.info.name == target))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, title: String) -> InstanceInfo {
        InstanceInfo {
            id: id.into(),
            name: id.into(),
            kind: "k".repeat(600_000),
            title,
            backend: "native".into(),
            pid: 1,
            started: "2026-01-01T00:00:00Z".into(),
            views: 0,
            seq: None,
        }
    }

    #[test]
    fn a_record_keeps_its_bound_whatever_the_tick_declared() {
        let dir = std::env::temp_dir().join(format!("tickbox-ended-{}", std::process::id()));
        let registry = Registry::at(&dir).unwrap();
        // A title and kind far over the bound, as a descriptor may declare.
        record(
            registry.dir(),
            info("aa", "t".repeat(600_000)),
            "s".repeat(600_000),
            vec![],
        );
        // Positive control: a record within the bound is kept as it was.
        record(
            registry.dir(),
            info("bb", "counter".into()),
            "ended".into(),
            vec![],
        );
        let listed = list(&registry);
        assert_eq!(listed.len(), 2);
        let long = listed.iter().find(|r| r.info.id == "aa").unwrap();
        assert_eq!(
            (
                long.info.title.len(),
                long.info.kind.len(),
                long.status.len()
            ),
            (
                RETAINED_FIELD_CHARS,
                RETAINED_FIELD_CHARS,
                RETAINED_FIELD_CHARS
            )
        );
        let short = listed.iter().find(|r| r.info.id == "bb").unwrap();
        assert_eq!(
            (short.info.title.as_str(), short.status.as_str()),
            ("counter", "ended")
        );
        // A file past the bound (not one tickbox wrote) is skipped.
        let big = vec![b' '; MAX_ENDED_RECORD_BYTES as usize + 1];
        std::fs::write(path(registry.dir(), "cc"), big).unwrap();
        assert_eq!(list(&registry).len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
