//! Grants written in TOML: a grant policy file (with where its audit
//! stream goes) and a Tick's manifest. The sandbox takes a [`GrantSpec`]
//! from whoever reads one; this layer is the one that reads files.

use std::path::{Path, PathBuf};
use tickbox_sandbox::grants::{GrantError, GrantSpec};

/// Where an audit stream should go, and what it records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditWish {
    /// A file, or `-` for stderr; `None`: no stream.
    pub to: Option<String>,
    /// Record call arguments (only their SHA-256 otherwise).
    pub args: bool,
    /// Release a call's answer only once its line is on disk.
    pub sync: bool,
}

impl AuditWish {
    /// The `audit`, `audit_args` and `audit_sync` keys of `file`: a
    /// relative `audit` path is relative to the file's directory.
    pub fn from_keys(audit: Option<&str>, args: bool, sync: bool, file: &Path) -> AuditWish {
        let to = audit.map(|a| {
            if a == "-" || Path::new(a).is_absolute() {
                a.to_string()
            } else {
                file.parent()
                    .unwrap_or(Path::new("."))
                    .join(a)
                    .display()
                    .to_string()
            }
        });
        AuditWish { to, args, sync }
    }
}

/// Reads a grant policy file: its grants, and where it asks the audit
/// stream to go (`audit`, relative to the file's directory, with
/// `audit_args` and `audit_sync`). Only a policy has these keys: a
/// manifest is the Tick author's, and an author does not choose where its
/// audit goes.
pub fn read_policy(path: &Path) -> Result<(GrantSpec, AuditWish), GrantError> {
    let err = |why: String| GrantError::Policy {
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
    let keys = ["audit", "audit_args", "audit_sync"];
    if !keys.iter().any(|k| table.contains_key(*k)) {
        // The grants alone, parsed from the text so errors keep their place.
        let spec = toml::from_str(&text).map_err(|e| err(e.message().to_string()))?;
        return Ok((spec, AuditWish::default()));
    }
    let audit = match table.remove("audit") {
        None => None,
        Some(toml::Value::String(s)) => Some(s),
        Some(_) => return Err(err("audit must be a string: a file, or - for stderr".into())),
    };
    let args = match table.remove("audit_args") {
        None => false,
        Some(toml::Value::Boolean(b)) => b,
        Some(_) => return Err(err("audit_args must be true or false".into())),
    };
    let sync = match table.remove("audit_sync") {
        None => false,
        Some(toml::Value::Boolean(b)) => b,
        Some(_) => return Err(err("audit_sync must be true or false".into())),
    };
    let spec = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| err(e.message().to_string()))?;
    Ok((
        spec,
        AuditWish::from_keys(audit.as_deref(), args, sync, path),
    ))
}

/// Reads grants written in TOML: a policy file's grants or a manifest.
pub fn read_grant_file(path: &Path) -> Result<GrantSpec, GrantError> {
    let err = |why: String| GrantError::Policy {
        path: path.display().to_string(),
        why,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    toml::from_str(&text).map_err(|e| err(e.message().to_string()))
}

/// Where a wasm file's manifest is: `NAME.tick.toml` beside `NAME.wasm`.
pub fn manifest_path(path: &Path) -> PathBuf {
    path.with_extension("tick.toml")
}

/// The capabilities a Tick asks for, from its manifest (`None` when there
/// is none). Granted only under a person's approval of the Tick's content
/// ([`crate::consent`]).
pub fn manifest_of(path: &Path) -> Result<Option<GrantSpec>, GrantError> {
    let manifest = manifest_path(path);
    if !manifest.exists() {
        return Ok(None);
    }
    read_grant_file(&manifest).map(Some)
}

/// A requested-grants manifest's text (a pulled Tick's layer), read as a
/// grant file is.
pub fn parse_manifest(text: &str, origin: &str) -> Result<GrantSpec, GrantError> {
    toml::from_str(text).map_err(|e| GrantError::Policy {
        path: format!("{origin} (its requested grants)"),
        why: e.message().to_string(),
    })
}
