//! The registry flags every command that takes a Tick shares
//! (`--insecure-registry`, `--registry-ca`, `--signers`, `--lock`,
//! `--locked`), and the application layer's registry settings made from
//! them.
//!
//! A module of their own: the commands that take them (`open`, `mcp`,
//! `trust`, `policy`) and `oci`'s pull and push all import them, and `oci`
//! starts its `App` through `open` (issue 40: no two files import each
//! other).

use super::exit::Exit;
use clap::Args;
use std::path::PathBuf;
use tickbox_app::RegistrySettings;
use tickbox_registry::policy::{Origin, Policy, Source};

/// How to reach registries (every command that takes a Tick).
#[derive(Args, Clone, Default)]
pub struct RegistryOpts {
    /// Allow plain HTTP to this registry HOST or HOST:PORT (loopback registries need no flag; repeatable)
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registry: Vec<String>,
    /// Trust the CA certificates in this PEM file for registries, besides the webpki roots
    #[arg(long = "registry-ca", value_name = "FILE")]
    pub registry_ca: Option<PathBuf>,
    /// The signers policy: which signers each registry or repository needs (default: $TICKBOX_SIGNERS, else ~/.config/tickbox/signers.toml when it exists)
    #[arg(long = "signers", value_name = "FILE")]
    pub signers: Option<PathBuf>,
    /// The lock file pinning references to digests (default: tickbox.lock beside --policy or --config, else ./tickbox.lock, where `tickbox lock` writes; read when it exists)
    #[arg(long = "lock", value_name = "FILE")]
    pub lock: Option<PathBuf>,
    /// Refuse any drift from the lock file: a reference not in it, a tag that moved, another signer
    #[arg(long)]
    pub locked: bool,
    /// The policy or MCP config file the default lock file is beside: set
    /// by the command, not a flag.
    #[arg(skip)]
    pub beside: Option<PathBuf>,
    /// Resolve afresh, without any lock file (`tickbox lock` itself): set
    /// by the command, not a flag.
    #[arg(skip)]
    pub ignore_lock: bool,
}

/// The flag that names the signers policy.
pub const SIGNERS_FLAG: &str = "--signers";
/// The flag that names the lock file.
pub const LOCK_FLAG: &str = "--lock";

impl RegistryOpts {
    /// The default lock beside `file` unless a flag placed it already
    /// (a policy file's or an MCP config's directory).
    pub fn lock_beside(&self, file: Option<&std::path::Path>) -> RegistryOpts {
        let mut o = self.clone();
        if o.beside.is_none() {
            o.beside = file.map(std::path::Path::to_path_buf);
        }
        o
    }

    /// The application layer's registry settings: files named by flags
    /// carry the flag that named them.
    pub fn settings(&self) -> RegistrySettings {
        let flag = |path: &PathBuf, flag: &str| Source {
            path: path.clone(),
            origin: Origin::Flag(flag.into()),
        };
        RegistrySettings {
            insecure: self.insecure_registry.clone(),
            ca_file: self.registry_ca.clone(),
            signers: self.signers.as_ref().map(|p| flag(p, SIGNERS_FLAG)),
            lock: self.lock.as_ref().map(|p| flag(p, LOCK_FLAG)),
            locked: self.locked,
            beside: self.beside.clone(),
            ignore_lock: self.ignore_lock,
        }
    }

    pub fn lock_source(&self) -> Option<Source> {
        self.settings().lock_source()
    }

    pub fn default_lock_path(&self) -> PathBuf {
        self.settings().default_lock_path()
    }

    pub fn policy_source(&self) -> Result<Option<Source>, Exit> {
        Ok(self.settings().policy_source(&super::env::settings())?)
    }

    pub fn signers_policy(&self) -> Result<Option<Policy>, Exit> {
        Ok(self.settings().signers_policy(&super::env::settings())?)
    }
}
