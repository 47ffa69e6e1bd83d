//! Where a user's files are kept by default: the XDG base directories,
//! read by one rule for every default tickbox uses (the live-instance
//! directory here; the sandbox's compile cache and trust store; the CLI's
//! store of pulled Ticks and its signers policy).
//!
//! A base directory counts only when its variable holds an absolute path:
//! an empty value is unset and a relative one is ignored, as the XDG spec
//! says. Otherwise `XDG_CONFIG_HOME=` would make the working directory (a
//! cloned repository, say) the place a person's signers policy and
//! approvals are read from, and the policy actually written would stop
//! applying without a word. A command refuses a relative value outright
//! ([`relative`], one line naming it); the defaults here never resolve
//! against the working directory either way.
//!
//! This is the one place outside the CLI that reads these variables: the
//! live registry must be found by every process of the user, and the
//! sandbox keeps a Tick's grants off the user's default state directories
//! whatever directories an embedder configured.

use std::path::PathBuf;

/// The variables [`relative`] checks.
const VARIABLES: [&str; 4] = [
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "HOME",
];

/// A variable's value when it is an absolute path.
fn absolute(name: &str) -> Option<PathBuf> {
    let value = PathBuf::from(std::env::var_os(name)?);
    value.is_absolute().then_some(value)
}

/// The user's home directory (`$HOME`), when it is an absolute path.
pub fn home() -> Option<PathBuf> {
    absolute("HOME")
}

/// `$XDG_CONFIG_HOME`, else `~/.config`.
pub fn config_home() -> Option<PathBuf> {
    absolute("XDG_CONFIG_HOME").or_else(|| Some(home()?.join(".config")))
}

/// `$XDG_CACHE_HOME`, else `~/.cache`.
pub fn cache_home() -> Option<PathBuf> {
    absolute("XDG_CACHE_HOME").or_else(|| Some(home()?.join(".cache")))
}

/// `$XDG_RUNTIME_DIR`, when it is set to an absolute path.
pub fn runtime_dir() -> Option<PathBuf> {
    absolute("XDG_RUNTIME_DIR")
}

/// One line naming a base-directory variable set to a relative path
/// (`XDG_CONFIG_HOME=.config: must be an absolute path`), for a command to
/// refuse instead of running with its defaults somewhere else.
pub fn relative() -> Option<String> {
    VARIABLES.iter().find_map(|name| {
        let value = std::env::var_os(name)?;
        let path = PathBuf::from(&value);
        (!value.is_empty() && !path.is_absolute()).then(|| {
            format!(
                "{name}={}: must be an absolute path (an XDG base directory)",
                path.display()
            )
        })
    })
}
