//! tickbox-registry through its public API: the canonical registry
//! identity, the signers policy and the lock file, the total deadline of a
//! request, and signature checking's scratch directory. One test binary;
//! each module is one subject.

mod deadline;
mod identity;
mod lock;
mod policy;
mod scratch;

use std::path::{Path, PathBuf};
use tickbox_registry::lock::{Lock, LockError, LockFile};
use tickbox_registry::policy::{Policy, PolicyError, PolicyFile, Source};

/// Reads a policy file as the CLI does: the crate's bounded read, TOML,
/// the crate's checks.
pub fn read_policy(source: Source) -> Result<Policy, PolicyError> {
    let text = tickbox_registry::policy::read_text(&source.path)?;
    let file: PolicyFile = toml::from_str(&text).map_err(|e| PolicyError::Read {
        path: source.path.clone(),
        why: e.message().to_string(),
    })?;
    Policy::check(file, source)
}

/// A lock file's text, checked as the CLI reads it.
pub fn parse_lock(text: &str, path: &Path) -> Result<Lock, LockError> {
    let file: LockFile = toml::from_str(text).map_err(|e| LockError::Read {
        path: path.to_path_buf(),
        why: e.message().to_string(),
    })?;
    Lock::check(file, path)
}

/// A lock file read as the CLI reads it (a missing one is empty).
pub fn read_lock(path: &Path) -> Result<Lock, LockError> {
    match tickbox_registry::lock::read_text(path)? {
        Some(text) => parse_lock(&text, path),
        None => Ok(Lock::default()),
    }
}

/// A lock file written as the CLI writes it.
pub fn write_lock(l: &Lock, path: &Path) -> Result<(), LockError> {
    let text = toml::to_string(&l.to_file()).unwrap();
    tickbox_registry::lock::write_text(path, &format!("{}{text}", tickbox_registry::lock::HEADER))
}

/// A directory of one test's files, removed when the test ends.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tickbox-registry-it-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
