//! What the command line lets a scenario file ask for.
//!
//! A scenario file is untrusted input (it may come with a pull request), so
//! it cannot grant itself what it likes: every `dir` grant must lie under a
//! root the command line names (by default the scenario file's own
//! directory), and the environment is read only for variables the command
//! line lists (`${NAME}` in `path`, `command` and `cwd`, and `env = ["NAME"]`
//! grants, which copy a host variable to the Tick). A scenario that asks for
//! more is refused before anything starts, with one line naming the rule.

use std::path::{Path, PathBuf};

/// Bounds the command line puts on scenario files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Environment variables a scenario's `env` grants may read from this
    /// process (an `env` grant `NAME` with no value); default none.
    pub allow_env: Vec<String>,
    /// Directories under which a scenario's `dir` grants (and `http_ca`)
    /// may lie; empty: the scenario file's own directory tree.
    pub grant_roots: Vec<PathBuf>,
}

impl Policy {
    /// Whether `${name}` and `env = ["name"]` may read the host's variable.
    pub fn env_allowed(&self, name: &str) -> bool {
        self.allow_env.iter().any(|n| n == name)
    }

    /// Refuses a host path a scenario names under `key` (a `dir` grant, the
    /// `http_ca` file) that is not under a grant root.
    /// `host` is already absolute or relative to the working directory;
    /// `base` is the scenario's directory. Both sides are resolved
    /// (symbolic links, `..`) so that neither a link nor a `..` leads out.
    pub fn check_path(&self, key: &str, host: &Path, base: &Path) -> Result<(), String> {
        let real = host.canonicalize().map_err(|e| {
            format!(
                "[tick] {key} {:?}: cannot resolve the host path: {e}",
                host.display().to_string()
            )
        })?;
        let (roots, named) = if self.grant_roots.is_empty() {
            (vec![base.to_path_buf()], "the scenario's directory")
        } else {
            (self.grant_roots.clone(), "grant_root")
        };
        for root in &roots {
            if root.canonicalize().is_ok_and(|r| real.starts_with(r)) {
                return Ok(());
            }
        }
        let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        Err(format!(
            "[tick] {key} {:?} is outside the grant root ({named}: {}); a scenario may grant only paths under it (name another in grant_root)",
            host.display().to_string(),
            shown.join(", ")
        ))
    }

    /// Refuses an `env` grant that copies a host variable not allowed.
    /// `NAME=VALUE` carries its value in the file and reads nothing.
    pub fn check_env_grant(&self, spec: &str) -> Result<(), String> {
        if spec.contains('=') || self.env_allowed(spec) {
            return Ok(());
        }
        Err(format!(
            "[tick] env {spec:?} reads the host's environment variable {spec}, which the run does not allow (allow it with allow_env {spec})"
        ))
    }
}
