//! The lock file: references pinned to the manifest digests (and signers)
//! they resolved to when `tickbox lock` ran.
//!
//! ```toml
//! version = 1
//!
//! [[tick]]
//! reference = "oci://ghcr.io/you/ticks/counter:v1"
//! manifest = "sha256:…"
//! signer = "you@example.com"
//! ```
//!
//! Entries are kept by canonical reference: an entry written
//! `oci://127.0.0.1:5000/x:v1` is the entry of `oci://LOCALHOST:5000/x:v1`
//! too (the same [`Name`](crate::Name) and tag), so no spelling of a
//! reference escapes its entry, and two entries for one reference are
//! refused. Where the lock is when no flag names it is decided once, in
//! [`default_path`]: `tickbox lock` writes there and `--locked` reads
//! there.
//!
//! The file's shape is [`LockFile`] (serde); whoever reads files decodes
//! and encodes it as TOML (the CLI), [`read_text`] and [`write_text`] do
//! the bounded read and the replacing write, and [`Lock::check`] the rest.

use crate::limits::MAX_LOCK_BYTES;
use crate::reference::{Digest, Reference};
use std::path::{Path, PathBuf};

/// Its usual name.
pub const FILE_NAME: &str = "tickbox.lock";
/// The one format version this tickbox reads and writes.
pub const VERSION: u32 = 1;

/// The lock file when none is named: `tickbox.lock` beside `beside` (a
/// policy or MCP config file whose references it pins), else in the
/// working directory.
pub fn default_path(beside: Option<&Path>) -> PathBuf {
    match beside {
        Some(file) => file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .join(FILE_NAME),
        None => PathBuf::from(FILE_NAME),
    }
}

/// One locked reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub reference: Reference,
    pub manifest: Digest,
    /// Who signed it, when a signers policy asked.
    pub signer: Option<String>,
}

/// A lock file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Not readable, too large, or not the lock's TOML.
    #[error("the lock file {path}: {why}")]
    Read { path: PathBuf, why: String },
    /// A version this tickbox does not read.
    #[error("the lock file {path}: version {version} is not one this tickbox reads ({VERSION})")]
    Version { path: PathBuf, version: u32 },
    /// An entry whose reference does not parse.
    #[error("the lock file {path}: entry {index}: {why}")]
    Entry {
        path: PathBuf,
        index: usize,
        why: String,
    },
    /// Two entries for one reference (however written).
    #[error("the lock file {path}: entry {index} locks {reference} again (entry {first})")]
    Duplicate {
        path: PathBuf,
        index: usize,
        first: usize,
        reference: String,
    },
    /// The file could not be written.
    #[error("cannot write the lock file {path}: {why}")]
    Write { path: PathBuf, why: String },
}

/// One `[[tick]]` table as written.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The reference as `tickbox lock` was given it (compared in its
    /// canonical form).
    pub reference: String,
    /// The manifest digest it resolved to, which is what runs.
    pub manifest: Digest,
    /// The signer the signers policy found, when one applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

/// The lock file as written.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LockFile {
    /// The format's version: 1.
    pub version: u32,
    /// The locked references, `[[tick]]` tables.
    #[serde(default)]
    pub tick: Vec<LockEntry>,
}

/// The comment a written lock file starts with.
pub const HEADER: &str = "# Written by `tickbox lock`: each reference pinned to the manifest it\n# resolved to (and who signed it). `--locked` refuses any drift.\n";

/// A lock file's text, read within [`MAX_LOCK_BYTES`]; `None` when there
/// is no file (an empty lock).
pub fn read_text(path: &Path) -> Result<Option<String>, LockError> {
    use std::io::Read;
    let bad = |why: String| LockError::Read {
        path: path.to_path_buf(),
        why,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && nothing_at(path) => return Ok(None),
        Err(e) => return Err(bad(e.to_string())),
    };
    let mut text = Vec::new();
    file.take(MAX_LOCK_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    if text.len() as u64 > MAX_LOCK_BYTES {
        return Err(bad(format!(
            "larger than {MAX_LOCK_BYTES} bytes (MAX_LOCK_BYTES)"
        )));
    }
    String::from_utf8(text)
        .map(Some)
        .map_err(|_| bad("not UTF-8 text".into()))
}

/// Whether nothing at all is at a file's path, the one case in which a
/// lock, or a signers policy at its default path, is absent. A link to
/// nowhere or a path that cannot be looked at is something: it is read,
/// and its error named, rather than taken for "no lock" or "no policy"
/// (`Path::exists` says false for both).
pub fn nothing_at(path: &Path) -> bool {
    matches!(path.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Writes a lock file whole: a new file beside it (created exclusively),
/// renamed over the old, so a reader sees the old file or the new one.
pub fn write_text(path: &Path, text: &str) -> Result<(), LockError> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    // Process-wide because the scratch names it numbers share one
    // directory whoever writes there: two writers in this process must
    // never pick the same name.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| FILE_NAME.into());
    let tmp = path.with_file_name(format!(
        ".{name}.{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|_| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(LockError::Write {
            path: path.to_path_buf(),
            why: e.to_string(),
        });
    }
    Ok(())
}

/// A lock file's entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    entries: Vec<Entry>,
}

impl Lock {
    /// Checks a lock file read from `path`: its version, each entry's
    /// reference, one entry per reference.
    pub fn check(file: LockFile, path: &Path) -> Result<Lock, LockError> {
        if file.version != VERSION {
            return Err(LockError::Version {
                path: path.to_path_buf(),
                version: file.version,
            });
        }
        let mut lock = Lock::default();
        for (i, e) in file.tick.into_iter().enumerate() {
            let index = i + 1;
            let reference: Reference = e.reference.parse().map_err(|why| LockError::Entry {
                path: path.to_path_buf(),
                index,
                why: format!("{why}"),
            })?;
            // A reference pinned by digest names its manifest itself: an
            // entry that maps it to another would make the lock, a file a
            // checkout can carry, choose what runs in place of the pin.
            if let Some(pinned) = reference.digest().filter(|d| *d != e.manifest) {
                return Err(LockError::Entry {
                    path: path.to_path_buf(),
                    index,
                    why: format!(
                        "{reference} is pinned to {pinned}, and the entry's manifest is {}",
                        e.manifest
                    ),
                });
            }
            if let Some(first) = lock.entries.iter().position(|x| x.reference == reference) {
                return Err(LockError::Duplicate {
                    path: path.to_path_buf(),
                    index,
                    first: first + 1,
                    reference: reference.to_string(),
                });
            }
            lock.entries.push(Entry {
                reference,
                manifest: e.manifest,
                signer: e.signer,
            });
        }
        Ok(lock)
    }

    /// The entry of a reference, however either was written.
    pub fn get(&self, reference: &Reference) -> Option<&Entry> {
        self.entries.iter().find(|e| e.reference == *reference)
    }

    /// Adds an entry, or replaces the one of the same reference.
    pub fn set(&mut self, entry: Entry) {
        match self
            .entries
            .iter_mut()
            .find(|e| e.reference == entry.reference)
        {
            Some(e) => *e = entry,
            None => self.entries.push(entry),
        }
        self.entries
            .sort_by_key(|e| (e.reference.name(), e.reference.to_string()));
    }

    /// The entries, in the file's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The file as written (references in their canonical spelling).
    pub fn to_file(&self) -> LockFile {
        LockFile {
            version: VERSION,
            tick: self
                .entries
                .iter()
                .map(|e| LockEntry {
                    reference: e.reference.to_string(),
                    manifest: e.manifest,
                    signer: e.signer.clone(),
                })
                .collect(),
        }
    }
}
