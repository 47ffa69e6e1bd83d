//! The signers policy: which signers a registry or repository needs, read
//! from a TOML file, every rule checked when it is read, matched against
//! canonical names only.
//!
//! ```toml
//! no_match = "deny"                         # or "warn", "allow"; default deny
//!
//! [[require]]
//! references = "oci://ghcr.io/you/ticks/*"  # everything under a path
//! allowed_signers = "allowed_signers"       # OpenSSH's format, beside this file
//!
//! [[require]]
//! references = "oci://localhost:5000/ticks/counter"   # one repository
//! allowed_signers = "counter.allowed"
//! ```
//!
//! **Patterns** are [`Pattern`]s: `oci://HOST[:PORT]/REPO` names one
//! repository, `oci://HOST[:PORT]/PREFIX/*` every repository under
//! `PREFIX/` and `oci://HOST[:PORT]/*` every repository of the registry.
//! The registry is parsed as a reference's is and compared by its
//! [`RegistryId`], so a rule written `oci://localhost/…` covers
//! `oci://LOCALHOST:443/…`, `oci://127.0.0.1/…` and `oci://[::1]/…`. A `*`
//! stands for whole path components: `org/app/*` covers `org/app/x`,
//! never `org/app-evil` nor `org/application` (nor `org/app` itself); a
//! `*` anywhere else, a host wildcard, a tag or digest, a trailing `/`, an
//! uppercase scheme or repository, an empty pattern: each is a rule that
//! could never match what it seems to say, refused when the file is read
//! ([`PolicyError::Rule`], naming the rule), never accepted silently. So
//! is a rule whose allowed-signers file is missing, and two rules with the
//! same pattern however written (which of them applies would be a guess).
//!
//! **Which rule applies**: the most specific that covers the name (an
//! exact repository before any prefix, a longer prefix before a shorter);
//! patterns that cover one name are nested, so there is always one.
//!
//! **No match.** Where a policy is in force, a Tick no rule covers is
//! refused by default (`no_match = "deny"`): a policy that forgot a
//! registry is a gap, not a permission. `warn` runs it with one warning
//! line, `allow` runs it silently (sigstore policy-controller's
//! `no-match-policy`).
//!
//! **Where from.** A policy remembers its [`Source`]: the path, and whether
//! a flag, an environment variable or the default path named it, so a
//! command can say which policy applied and why.
//!
//! **Reading.** The file's shape is [`PolicyFile`] (serde, unknown keys
//! refused); whoever reads files decodes it from TOML (the CLI: this crate
//! has no TOML parser, as the sandbox takes its grants as values) after
//! [`read_text`] has read it within [`MAX_POLICY_BYTES`], and
//! [`Policy::check`] turns it into a policy or the one error that names
//! the rule.

use crate::limits::MAX_POLICY_BYTES;
use crate::reference::{self, Authority, Name, RegistryId, Rule as Grammar};
use std::fmt;
use std::path::{Path, PathBuf};
use tickbox_protocol::text::escape;

/// How a file was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A command-line flag named it (the flag).
    Flag(String),
    /// An environment variable named it (the variable).
    Environment(String),
    /// It is at the default path (or beside the file whose default it is).
    DefaultPath,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "the flag {flag}"),
            Origin::Environment(var) => write!(f, "the environment variable {var}"),
            Origin::DefaultPath => f.write_str("the default path"),
        }
    }
}

/// A file and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    pub origin: Origin,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (from {})", self.path.display(), self.origin)
    }
}

/// Why a pattern can never match what it seems to say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    #[error("the pattern is empty")]
    Empty,
    #[error("a pattern starts with oci:// (lowercase), as references do")]
    Scheme,
    #[error("name a repository (oci://HOST/REPO), everything under a path (oci://HOST/PREFIX/*) or the whole registry (oci://HOST/*)")]
    NoRepository,
    #[error("a host is written whole: no wildcard in it")]
    HostWildcard,
    #[error("{0}")]
    Registry(Grammar),
    #[error("a * stands for whole path components and comes last: oci://HOST/PREFIX/*")]
    Star,
    #[error("a pattern names repositories, not a tag: drop :TAG")]
    Tag,
    #[error("a pattern names repositories, not a digest: drop @sha256:…")]
    Digest,
    #[error("it ends in /: write PREFIX/* for everything under it, or drop the /")]
    TrailingSlash,
    #[error("repositories are lowercase (a reference with uppercase never parses), so it could never match")]
    Uppercase,
    #[error("{}", Grammar::Repository)]
    Repository,
}

/// What a rule covers, by canonical name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    registry: RegistryId,
    scope: Scope,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Scope {
    /// One repository.
    Exact(String),
    /// Every repository under `PREFIX/` (`""`: the whole registry).
    Under(String),
}

impl Pattern {
    /// Whether the pattern covers a repository.
    pub fn covers(&self, name: &Name) -> bool {
        if *name.registry() != self.registry {
            return false;
        }
        let repo = name.repository();
        match &self.scope {
            Scope::Exact(r) => repo == r,
            Scope::Under(p) if p.is_empty() => true,
            // At a `/` boundary only: `org/app/` is a prefix of
            // `org/app/x`, never of `org/app-evil`.
            Scope::Under(p) => repo
                .strip_prefix(p.as_str())
                .is_some_and(|rest| rest.starts_with('/')),
        }
    }

    /// How specific it is: an exact repository before any prefix, a
    /// longer prefix before a shorter.
    fn specificity(&self) -> (bool, usize) {
        match &self.scope {
            Scope::Exact(r) => (true, r.len()),
            Scope::Under(p) => (false, p.len()),
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Pattern, PatternError> {
        if s.is_empty() {
            return Err(PatternError::Empty);
        }
        if !s.starts_with(reference::SCHEME) {
            return Err(PatternError::Scheme);
        }
        let rest = &s[reference::SCHEME.len()..];
        // `oci://*.example.com/…`, `oci://docker.io*`: a host glob would
        // match hosts nobody meant (`attacker.com/x.example.com/…`).
        if rest.split('/').next().unwrap_or_default().contains('*') {
            return Err(PatternError::HostWildcard);
        }
        let (authority, path) = rest.split_once('/').ok_or(PatternError::NoRepository)?;
        let registry = Authority::parse(authority)
            .map_err(PatternError::Registry)?
            .id();
        if path.is_empty() {
            return Err(PatternError::NoRepository);
        }
        let (repo, under) = match path.strip_suffix("/*") {
            _ if path == "*" => ("", true),
            // `oci://HOST//*` is no spelling of the whole registry.
            Some("") => return Err(PatternError::Repository),
            Some(prefix) => (prefix, true),
            None => (path, false),
        };
        if repo.contains('*') {
            return Err(PatternError::Star);
        }
        if repo.contains('@') {
            return Err(PatternError::Digest);
        }
        if repo.contains(':') {
            return Err(PatternError::Tag);
        }
        if repo.ends_with('/') {
            return Err(PatternError::TrailingSlash);
        }
        if repo.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(PatternError::Uppercase);
        }
        // `oci://HOST/*` has no prefix: the whole registry.
        let whole_registry = under && repo.is_empty();
        if !whole_registry && !reference::valid_repository(repo) {
            return Err(PatternError::Repository);
        }
        let scope = if under {
            Scope::Under(repo.to_string())
        } else {
            Scope::Exact(repo.to_string())
        };
        Ok(Pattern { registry, scope })
    }
}

/// The canonical spelling (what a person reads in a report).
impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}/", reference::SCHEME, self.registry)?;
        match &self.scope {
            Scope::Exact(r) => f.write_str(r),
            Scope::Under(p) if p.is_empty() => f.write_str("*"),
            Scope::Under(p) => write!(f, "{p}/*"),
        }
    }
}

/// What to do with a Tick no rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoMatch {
    /// Refuse it (the default).
    #[default]
    Deny,
    /// Run it, with one warning line.
    Warn,
    /// Run it.
    Allow,
}

impl fmt::Display for NoMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoMatch::Deny => "deny",
            NoMatch::Warn => "warn",
            NoMatch::Allow => "allow",
        })
    }
}

/// One `[[require]]` rule, checked.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Its place in the file, from 1.
    pub index: usize,
    /// `references` as written (escaped when shown).
    pub written: String,
    /// What it covers.
    pub pattern: Pattern,
    /// The allowed-signers file (relative paths resolved beside the policy).
    pub allowed_signers: PathBuf,
}

impl Rule {
    /// `rule N (references = "…")`, escaped.
    pub fn label(&self) -> String {
        label(self.index, &self.written)
    }
}

fn label(index: usize, written: &str) -> String {
    format!("rule {index} (references = \"{}\")", escape(written))
}

/// What the policy says about a Tick.
#[derive(Debug, Clone, Copy)]
pub enum Decision<'a> {
    /// This rule applies: a signature by one of its signers is required.
    Require(&'a Rule),
    /// No rule covers it; the policy's `no_match` says what happens.
    NoMatch(NoMatch),
}

/// A signers policy that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Not readable, too large, or not the policy's TOML.
    #[error("the signers policy {path}: {why}")]
    Read { path: PathBuf, why: String },
    /// A rule that could never match what it seems to say.
    #[error("the signers policy {path}: {rule}: {why}")]
    Rule {
        path: PathBuf,
        /// `rule N (references = "…")`.
        rule: String,
        why: PatternError,
    },
    /// A rule whose allowed-signers file is not there.
    #[error(
        "the signers policy {path}: {rule}: its allowed_signers file {file} is not a readable file"
    )]
    Signers {
        path: PathBuf,
        rule: String,
        file: PathBuf,
    },
    /// Two rules with the same pattern (however written).
    #[error(
        "the signers policy {path}: {rule} repeats rule {first}: both cover exactly {pattern}"
    )]
    Duplicate {
        path: PathBuf,
        rule: String,
        first: usize,
        pattern: String,
    },
}

/// One `[[require]]` table as written.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequireRule {
    /// `oci://HOST[:PORT]/REPO`, `…/PREFIX/*` or `…/*`.
    pub references: String,
    /// An OpenSSH allowed-signers file (relative to the policy file).
    pub allowed_signers: PathBuf,
}

/// The policy file as written: `no_match` and the `[[require]]` rules.
#[derive(Debug, Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// What happens to a reference no rule covers: `deny` (the default),
    /// `warn` or `allow`.
    #[serde(default)]
    pub no_match: NoMatch,
    /// The rules, `[[require]]` tables; the most specific one that covers
    /// a reference applies.
    #[serde(default)]
    pub require: Vec<RequireRule>,
}

/// A policy file's text, read within [`MAX_POLICY_BYTES`].
pub fn read_text(path: &Path) -> Result<String, PolicyError> {
    use std::io::Read;
    let bad = |why: String| PolicyError::Read {
        path: path.to_path_buf(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut text = Vec::new();
    file.take(MAX_POLICY_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| bad(e.to_string()))?;
    if text.len() as u64 > MAX_POLICY_BYTES {
        return Err(bad(format!(
            "larger than {MAX_POLICY_BYTES} bytes (MAX_POLICY_BYTES)"
        )));
    }
    String::from_utf8(text).map_err(|_| bad("not UTF-8 text".into()))
}

/// A signers policy in force.
#[derive(Debug, Clone)]
pub struct Policy {
    source: Source,
    no_match: NoMatch,
    rules: Vec<Rule>,
}

impl Policy {
    /// Checks every rule of a policy file read from `source.path`:
    /// allowed-signers files are resolved beside it and must exist.
    pub fn check(file: PolicyFile, source: Source) -> Result<Policy, PolicyError> {
        let path = source.path.clone();
        let base = path.parent().unwrap_or(Path::new("."));
        let mut rules: Vec<Rule> = Vec::with_capacity(file.require.len());
        for (i, r) in file.require.into_iter().enumerate() {
            let index = i + 1;
            let pattern: Pattern = r.references.parse().map_err(|why| PolicyError::Rule {
                path: path.clone(),
                rule: label(index, &r.references),
                why,
            })?;
            if let Some(first) = rules.iter().find(|x| x.pattern == pattern) {
                return Err(PolicyError::Duplicate {
                    path: path.clone(),
                    rule: label(index, &r.references),
                    first: first.index,
                    pattern: pattern.to_string(),
                });
            }
            let allowed_signers = base.join(&r.allowed_signers);
            if r.allowed_signers.as_os_str().is_empty() || !allowed_signers.is_file() {
                return Err(PolicyError::Signers {
                    path: path.clone(),
                    rule: label(index, &r.references),
                    file: allowed_signers,
                });
            }
            rules.push(Rule {
                index,
                written: r.references,
                pattern,
                allowed_signers,
            });
        }
        Ok(Policy {
            source,
            no_match: file.no_match,
            rules,
        })
    }

    /// The rule that applies to a repository (the most specific that
    /// covers it), or what happens without one.
    pub fn decide(&self, name: &Name) -> Decision<'_> {
        self.rules
            .iter()
            .filter(|r| r.pattern.covers(name))
            .max_by_key(|r| r.pattern.specificity())
            .map_or(Decision::NoMatch(self.no_match), Decision::Require)
    }

    /// Where it was read from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// What happens to a Tick no rule covers.
    pub fn no_match(&self) -> NoMatch {
        self.no_match
    }

    /// The rules, in file order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_print_canonically() {
        for (written, shown) in [
            ("oci://LOCALHOST:0443/ticks/*", "oci://localhost/ticks/*"),
            ("oci://127.0.0.1:5000/a", "oci://localhost:5000/a"),
            ("oci://Ghcr.IO/*", "oci://ghcr.io/*"),
        ] {
            assert_eq!(written.parse::<Pattern>().unwrap().to_string(), shown);
        }
    }
}
