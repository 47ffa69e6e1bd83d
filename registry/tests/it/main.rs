//! tickbox-registry through its public API: the canonical registry
//! identity, the signers policy and the lock file, the total deadline of a
//! request, and signature checking's scratch directory. One test binary;
//! each module is one subject.

mod deadline;
mod identity;
mod lock;
mod policy;
mod scratch;

use std::path::Path;
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

/// The harness's temporary directory, removed when the test ends.
pub use tickbox_test_support::TempDir;
