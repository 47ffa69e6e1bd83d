//! Why a Tick could not be pulled, pushed or loaded from the store: one
//! line each, naming the rule or the bound. Whatever a registry said is
//! escaped before it is part of a message.

use crate::reference::Digest;
use std::path::PathBuf;
use std::time::Duration;

/// A registry or store failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The reference does not parse.
    #[error("{0}")]
    Reference(String),
    /// Plain HTTP to a registry that is neither loopback nor named insecure.
    #[error("{host} is not a loopback registry: tickbox speaks HTTPS to it (name it an insecure registry to allow plain HTTP)")]
    Insecure { host: String },
    /// Could not connect, or the TLS handshake failed.
    #[error("cannot reach the registry {host}: {why}")]
    Connect { host: String, why: String },
    /// A wait ran past its bound.
    #[error("the registry {host} did not answer within {secs} s ({what})")]
    Timeout {
        host: String,
        secs: u64,
        what: &'static str,
    },
    /// A request ran past its total deadline ([`crate::limits`]'s
    /// `*_DEADLINE`, or the one [`crate::RegistryConfig::deadlines`] sets).
    #[error("the registry {host} did not finish {what} within {} ({bound})", seconds(.limit))]
    Deadline {
        host: String,
        what: &'static str,
        limit: Duration,
        bound: &'static str,
    },
    /// The registry answered with an error status.
    #[error("the registry {host} answered {status} to {what}{message}")]
    Status {
        host: String,
        status: u16,
        what: String,
        /// `: ` and the registry's own message, escaped; or empty.
        message: String,
    },
    /// An answer that is not what the distribution spec says it is (its
    /// bytes are never echoed).
    #[error("{what}: the registry's answer is not {expected}")]
    Malformed {
        what: String,
        expected: &'static str,
    },
    /// A tag or digest the registry does not have.
    #[error("{reference}: not found in the registry")]
    NotFound { reference: String },
    /// Credentials are needed and there are none, or they were refused.
    #[error("the registry {host} refused access to {repository}: {why}")]
    Unauthorized {
        host: String,
        repository: String,
        why: String,
    },
    /// Something over its bound (declared or streamed).
    #[error("{what} is larger than {bound} ({max} bytes)")]
    TooLarge {
        what: String,
        bound: &'static str,
        max: u64,
    },
    /// Bytes that do not have the digest they were asked for by.
    #[error("{what}: the registry sent content with digest {actual}, not {expected}; nothing was stored")]
    DigestMismatch {
        what: String,
        expected: Digest,
        actual: Digest,
    },
    /// A manifest that is not a Tick artifact.
    #[error("{reference} is not a wasm Tick artifact: {why}")]
    Layout { reference: String, why: String },
    /// The store's directory breaks the private-directory rule: someone
    /// else could plant blobs in it.
    #[error("the Tick store {path}: {rule}")]
    NotPrivate {
        path: PathBuf,
        rule: tickbox_trust::NotPrivate,
    },
    /// The store cannot be written, or a blob in it is not what its name says.
    #[error("the Tick store {path}: {why}")]
    Store { path: PathBuf, why: String },
    /// A pinned reference is not in the store and the network is not to
    /// be used.
    #[error("{reference} is not in the store and this command does not pull (run `tickbox pull {reference}`)")]
    NotStored { reference: String },
    /// The credentials file or CA file is unusable.
    #[error("{path}: {why}")]
    Config { path: PathBuf, why: String },
}

/// `2 s`, `1.5 s`.
fn seconds(d: &Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl RegistryError {
    pub(crate) fn store(path: impl Into<PathBuf>, why: impl std::fmt::Display) -> RegistryError {
        RegistryError::Store {
            path: path.into(),
            why: why.to_string(),
        }
    }
}
