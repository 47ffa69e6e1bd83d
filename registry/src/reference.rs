//! `oci://HOST[:PORT]/REPO:TAG` and `oci://HOST[:PORT]/REPO@sha256:…`, and
//! the one canonical form every comparison of registries uses.
//!
//! The grammar is the distribution spec's, checked whole before anything
//! touches the network: a repository is lowercase path components, a tag
//! at most 128 characters of `[A-Za-z0-9_.-]`, a digest `sha256:` and 64
//! lowercase hex digits (the one algorithm tickbox checks). A reference
//! always names a tag or a digest: no implicit `latest`, which would make
//! what runs depend on who pushed last.
//!
//! **Canonical form.** A registry can be written many ways that reach the
//! same server; a rule, a lock entry or an approval written one way must
//! cover every other way, or a spelling is a way around it. So a reference
//! is parsed into an [`Authority`] (what tickbox dials) written one way:
//!
//! - the host is lowercased (DNS names are case-insensitive);
//! - the port is a decimal number (leading zeros read as decimal: `:0443`
//!   is 443), and 443 is dropped: without a port tickbox dials 443 for
//!   every registry (HTTPS, and for loopback or insecure registries plain
//!   HTTP on that same port), so `:443` and no port are one registry. Any
//!   other port is kept: a loopback registry on plain HTTP at `:5000` and
//!   one at `:5001` are different registries;
//! - an IPv4 address is four decimal numbers from 0 to 255 without leading
//!   zeros; other spellings (`127.000.000.001`, `0177.0.0.1`, `127.1`,
//!   `2130706433`, `0x7f.0.0.1`) are refused rather than compared as typed,
//!   since resolvers read some of them as octal or as one number;
//! - an IPv6 address is bracketed (`[::1]`) and written in its compressed
//!   form (RFC 5952); IPv4 inside IPv6 (`[::ffff:127.0.0.1]`) and the
//!   unspecified addresses (`0.0.0.0`, `[::]`) are refused;
//! - a trailing dot, empty labels, `_` and non-ASCII names are refused.
//!
//! The identity of a registry, [`RegistryId`], is its authority except
//! for loopback: `localhost`, any address in 127.0.0.0/8 and `[::1]`, in
//! any case, are one registry, `localhost[:PORT]`, since every one of them
//! reaches this machine (who can serve on one loopback address here can
//! serve on the others). Names under `.localhost` are not among them: a
//! resolver need not keep them on this machine (RFC 6761 asks it to; glibc
//! asks DNS), so they are names like any other, never allowed plain HTTP
//! as loopback, and a rule for `localhost` does not cover them. Rules
//! match, lock entries and approvals are kept by [`Name`] (identity and
//! repository); what is dialed stays the authority as written, in its
//! canonical spelling, which is also what a reference prints as.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

pub use tickbox_trust::digest::{BadDigest, Digest, Hasher};

/// The scheme that marks a Tick named by registry reference.
pub const SCHEME: &str = "oci://";

/// Longest host name (DNS).
const MAX_HOST_CHARS: usize = 253;
/// Longest label of a host name (DNS).
const MAX_LABEL_CHARS: usize = 63;
/// Longest port written (leading zeros included).
const MAX_PORT_DIGITS: usize = 8;
/// The port dialed when none is written (and so dropped when written).
pub const DEFAULT_PORT: u16 = 443;

/// Which rule of the grammar a string breaks: the second half of a
/// one-line refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rule {
    #[error("it starts with oci://")]
    Scheme,
    #[error("oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:…")]
    Shape,
    #[error("the port is a number from 1 to 65535")]
    Port,
    #[error("the registry host is a name, an IPv4 address or a bracketed IPv6 address")]
    Host,
    #[error("an IPv4 address is four decimal numbers from 0 to 255 without leading zeros")]
    Ipv4,
    #[error("an IPv6 address is written [ADDRESS] with no zone, and IPv4 addresses as themselves")]
    Ipv6,
    #[error("0.0.0.0 and [::] are not the address of a registry")]
    Unspecified,
    #[error("name a tag (REPO:TAG) or a digest (REPO@sha256:…); there is no implicit latest")]
    NoTarget,
    #[error("a tag is 1 to 128 of A-Z a-z 0-9 _ . - and does not start with . or -")]
    Tag,
    #[error("a digest tickbox checks is sha256: and 64 lowercase hex digits")]
    Digest,
    #[error("a repository is lowercase components (a-z 0-9 separated by . _ __ or -) joined by /, at most 255 characters")]
    Repository,
}

/// A string that is not a Tick reference: it, escaped, and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a Tick reference: {rule}")]
pub struct BadReference {
    /// The string, escaped for a person to read.
    pub shown: String,
    pub rule: Rule,
}

/// A registry host in its one spelling.
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Host {
    /// A DNS name, lowercase.
    Name(String),
    V4(Ipv4Addr),
    V6(Ipv6Addr),
}

impl Host {
    /// `localhost`, 127.0.0.0/8 or `::1`: what always reaches this machine.
    pub fn is_loopback(&self) -> bool {
        match self {
            Host::Name(n) => n == "localhost",
            Host::V4(a) => a.is_loopback(),
            Host::V6(a) => a.is_loopback(),
        }
    }

    /// The host as a socket address wants it (IPv6 without brackets).
    pub fn dial(&self) -> String {
        match self {
            Host::Name(n) => n.clone(),
            Host::V4(a) => a.to_string(),
            Host::V6(a) => a.to_string(),
        }
    }

    /// Parses a host as written (IPv6 in brackets), into its one spelling.
    pub fn parse(s: &str) -> Result<Host, Rule> {
        if let Some(inside) = s.strip_prefix('[') {
            let inside = inside.strip_suffix(']').ok_or(Rule::Host)?;
            // A zone (`%eth0`) names an interface, not a registry; std
            // refuses it, and every other odd spelling, as not an address.
            let a: Ipv6Addr = inside.parse().map_err(|_| Rule::Ipv6)?;
            if a.is_unspecified() {
                return Err(Rule::Unspecified);
            }
            // `::ffff:a.b.c.d` and the deprecated `::a.b.c.d` are IPv4
            // addresses in disguise (`::1` is not one of them).
            if a.to_ipv4().is_some() && !a.is_loopback() {
                return Err(Rule::Ipv6);
            }
            return Ok(Host::V6(a));
        }
        if s.is_empty() || s.len() > MAX_HOST_CHARS {
            return Err(Rule::Host);
        }
        let lower = s.to_ascii_lowercase();
        let labels: Vec<&str> = lower.split('.').collect();
        let last = labels.last().copied().unwrap_or_default();
        // A name whose last label is a number is an IPv4 address to every
        // resolver (WHATWG's "ends in a number"): it must be the one form.
        if !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x"))
        {
            let octets: Option<Vec<u8>> = labels
                .iter()
                .map(|l| {
                    let ok = !l.is_empty()
                        && l.len() <= 3
                        && l.bytes().all(|b| b.is_ascii_digit())
                        && (l.len() == 1 || !l.starts_with('0'));
                    if ok {
                        l.parse::<u8>().ok()
                    } else {
                        None
                    }
                })
                .collect();
            return match octets.as_deref() {
                Some(&[a, b, c, d]) => {
                    let a = Ipv4Addr::new(a, b, c, d);
                    if a.is_unspecified() {
                        Err(Rule::Unspecified)
                    } else {
                        Ok(Host::V4(a))
                    }
                }
                _ => Err(Rule::Ipv4),
            };
        }
        let label_ok = |l: &&str| {
            !l.is_empty()
                && l.len() <= MAX_LABEL_CHARS
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if !labels.iter().all(label_ok) {
            return Err(Rule::Host);
        }
        Ok(Host::Name(lower))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::V4(a) => write!(f, "{a}"),
            Host::V6(a) => write!(f, "[{a}]"),
        }
    }
}

/// Where a registry is reached: its host and port in their one spelling
/// (443, the port dialed when none is written, is never written).
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Authority {
    host: Host,
    /// `None` for 443.
    port: Option<u16>,
}

impl Authority {
    /// Parses `HOST[:PORT]` (IPv6 as `[ADDRESS][:PORT]`).
    pub fn parse(s: &str) -> Result<Authority, Rule> {
        let (host, port) = if s.starts_with('[') {
            match s.find(']') {
                Some(end) => {
                    let (h, rest) = s.split_at(end + 1);
                    match rest {
                        "" => (h, None),
                        r => (h, Some(r.strip_prefix(':').ok_or(Rule::Host)?)),
                    }
                }
                None => return Err(Rule::Host),
            }
        } else {
            match s.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (s, None),
            }
        };
        // The host first: `::1` unbracketed is a host error, not a port's.
        let host = Host::parse(host)?;
        let port = match port {
            None => None,
            Some(p) => {
                // Digits only (`+443` and ` 443` parse as numbers in Rust).
                if p.is_empty()
                    || p.len() > MAX_PORT_DIGITS
                    || !p.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(Rule::Port);
                }
                match p.parse::<u32>() {
                    Ok(n) if n == u32::from(DEFAULT_PORT) => None,
                    Ok(n @ 1..=65535) => Some(n as u16),
                    _ => return Err(Rule::Port),
                }
            }
        };
        Ok(Authority { host, port })
    }

    /// The host.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port dialed.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(DEFAULT_PORT)
    }

    /// The port when it is not the default.
    pub fn written_port(&self) -> Option<u16> {
        self.port
    }

    /// Whether this is a registry on this machine (plain HTTP allowed).
    pub fn is_loopback(&self) -> bool {
        self.host.is_loopback()
    }

    /// The registry's identity: every loopback host is `localhost`.
    pub fn id(&self) -> RegistryId {
        let host = if self.is_loopback() {
            "localhost".to_string()
        } else {
            self.host.to_string()
        };
        RegistryId(match self.port {
            Some(p) => format!("{host}:{p}"),
            None => host,
        })
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.host),
            None => write!(f, "{}", self.host),
        }
    }
}

/// Which registry this is, as every rule, lock entry and approval compares
/// it: the canonical authority, with every loopback host `localhost`. Made
/// only from a parsed [`Authority`], so no raw string is ever compared as
/// one.
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct RegistryId(String);

impl RegistryId {
    /// The identity's text (`HOST[:PORT]`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RegistryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A repository in a registry, by identity: `oci://REGISTRY/REPO`, the
/// name a Tick's versions share (what rules match, what consent's "updates
/// of the same name" and the lock compare).
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Name {
    registry: RegistryId,
    repository: String,
}

impl Name {
    /// The registry's identity.
    pub fn registry(&self) -> &RegistryId {
        &self.registry
    }

    /// The repository path.
    pub fn repository(&self) -> &str {
        &self.repository
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)
    }
}

/// What a reference points at.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Target {
    /// A tag, resolved to a digest once per command (or by the lock file).
    Tag(String),
    /// A manifest digest: pinned.
    Digest(Digest),
}

/// A Tick in a registry. Two references are equal when they name the same
/// thing: the same [`Name`] and target, however the registry was written.
#[derive(Clone, Debug)]
pub struct Reference {
    authority: Authority,
    repository: String,
    target: Target,
}

impl PartialEq for Reference {
    fn eq(&self, other: &Reference) -> bool {
        self.name() == other.name() && self.target == other.target
    }
}

impl Eq for Reference {}

impl std::hash::Hash for Reference {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
        self.target.hash(state);
    }
}

impl Reference {
    /// The same repository at `digest`.
    pub fn at(&self, digest: Digest) -> Reference {
        Reference {
            target: Target::Digest(digest),
            ..self.clone()
        }
    }

    /// Where the registry is dialed.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }

    /// The registry's identity.
    pub fn registry(&self) -> RegistryId {
        self.authority.id()
    }

    /// The repository path.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag or digest.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The repository by identity, without tag or digest.
    pub fn name(&self) -> Name {
        Name {
            registry: self.registry(),
            repository: self.repository.clone(),
        }
    }

    /// Whether the registry is this machine (plain HTTP allowed).
    pub fn is_loopback(&self) -> bool {
        self.authority.is_loopback()
    }

    /// The digest, when pinned.
    pub fn digest(&self) -> Option<Digest> {
        match self.target {
            Target::Digest(d) => Some(d),
            Target::Tag(_) => None,
        }
    }

    /// The tag or digest as the distribution API's `<reference>`.
    pub fn api_reference(&self) -> String {
        match &self.target {
            Target::Tag(t) => t.clone(),
            Target::Digest(d) => d.to_string(),
        }
    }
}

/// Whether a host as a URL writes it (`localhost`, an address, IPv6 with
/// or without brackets, any case) is loopback. Used for URLs a registry
/// sends; a host that does not parse is not loopback.
pub fn is_loopback_host(host: &str) -> bool {
    let bracketed;
    let host = if host.contains(':') && !host.starts_with('[') {
        bracketed = format!("[{host}]");
        bracketed.as_str()
    } else {
        host
    };
    Host::parse(host).is_ok_and(|h| h.is_loopback())
}

/// The canonical spelling: what a person reads, and what dials the same
/// registry as what was written.
impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.authority, self.repository)?;
        match &self.target {
            Target::Tag(t) => write!(f, ":{t}"),
            Target::Digest(d) => write!(f, "@{d}"),
        }
    }
}

/// Whether a TICK argument names a registry reference.
pub fn is_reference(tick: &str) -> bool {
    tick.starts_with(SCHEME)
}

/// Splits `oci://AUTHORITY/PATH`; the authority parsed.
pub(crate) fn split(s: &str) -> Result<(Authority, &str), Rule> {
    let rest = s.strip_prefix(SCHEME).ok_or(Rule::Scheme)?;
    let (authority, path) = rest.split_once('/').ok_or(Rule::Shape)?;
    Ok((Authority::parse(authority)?, path))
}

impl FromStr for Reference {
    type Err = BadReference;
    fn from_str(s: &str) -> Result<Reference, BadReference> {
        let bad = |rule| BadReference {
            shown: tickbox_protocol::text::escape(s),
            rule,
        };
        let (authority, path) = split(s).map_err(bad)?;
        let (repository, target) = if let Some((repo, digest)) = path.split_once('@') {
            // `REPO:TAG@DIGEST` names the digest; the tag is only a label.
            let repo = repo.split_once(':').map_or(repo, |(r, _)| r);
            let digest = digest.parse::<Digest>().map_err(|_| bad(Rule::Digest))?;
            (repo, Target::Digest(digest))
        } else {
            let (repo, tag) = path.rsplit_once(':').ok_or(bad(Rule::NoTarget))?;
            if !valid_tag(tag) {
                return Err(bad(Rule::Tag));
            }
            (repo, Target::Tag(tag.to_string()))
        };
        if !valid_repository(repository) {
            return Err(bad(Rule::Repository));
        }
        Ok(Reference {
            authority,
            repository: repository.to_string(),
            target,
        })
    }
}

fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// The distribution spec's repository grammar.
pub(crate) fn valid_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|component| {
            // [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
            let b = component.as_bytes();
            let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
                return false;
            }
            let mut i = 0;
            while i < b.len() {
                if alnum(b[i]) {
                    i += 1;
                    continue;
                }
                let start = i;
                while i < b.len() && !alnum(b[i]) {
                    i += 1;
                }
                let sep = &component[start..i];
                if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|c| c == b'-')) {
                    return false;
                }
            }
            true
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn the_forms_parse_and_print_back() {
        let r: Reference = "oci://127.0.0.1:5000/ticks/counter:v1".parse().unwrap();
        assert_eq!(r.authority().host(), &Host::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(r.authority().port(), 5000);
        assert_eq!(r.repository(), "ticks/counter");
        assert_eq!(r.target(), &Target::Tag("v1".into()));
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/ticks/counter:v1");
        assert_eq!(r.name().to_string(), "oci://localhost:5000/ticks/counter");
        let p: Reference = format!("oci://ghcr.io/a/b-c__d.e@{D}").parse().unwrap();
        assert_eq!(p.digest().unwrap().to_string(), D);
        assert!(!p.is_loopback());
        assert_eq!(p.to_string(), format!("oci://ghcr.io/a/b-c__d.e@{D}"));
        let both: Reference = format!("oci://localhost/x:v2@{D}").parse().unwrap();
        assert_eq!(both.digest().unwrap().to_string(), D);
        assert_eq!(Digest::of(b"abc").to_string(), D);
        let v6: Reference = "oci://[0:0::1]:5000/x:v1".parse().unwrap();
        assert_eq!(v6.to_string(), "oci://[::1]:5000/x:v1");
        assert_eq!(v6.authority().host().dial(), "::1");
        assert_eq!(v6, r.clone().with_repository("x"));
    }

    impl Reference {
        fn with_repository(mut self, repo: &str) -> Reference {
            self.repository = repo.into();
            self
        }
    }

    #[test]
    fn what_is_not_a_reference_is_refused_naming_the_rule() {
        for (bad, rule) in [
            ("/tmp/x.wasm", "oci://"),
            ("oci://host", "REPO"),
            ("oci://host/repo", "no implicit latest"),
            ("oci://host/Repo:v1", "lowercase"),
            ("oci://host/re..po:v1", "lowercase"),
            ("oci://host/repo:.v1", "a tag"),
            ("oci://host/repo:v1\u{1b}]52;c;x\u{7}", "a tag"),
            ("oci://host:0/repo:v1", "port"),
            ("oci://host:99999/repo:v1", "port"),
            ("oci://host:+443/repo:v1", "port"),
            ("oci://host:/repo:v1", "port"),
            ("oci://ho st/repo:v1", "host"),
            ("oci://host./repo:v1", "host"),
            ("oci://127.000.000.001/repo:v1", "IPv4"),
            ("oci://0x7f.0.0.1/repo:v1", "IPv4"),
            ("oci://[::ffff:127.0.0.1]/repo:v1", "IPv6"),
            ("oci://0.0.0.0:5000/repo:v1", "0.0.0.0"),
            ("oci://host/repo@sha256:abc", "digest"),
            ("oci://host/repo@md5:abc", "digest"),
        ] {
            let e = bad.parse::<Reference>().unwrap_err().to_string();
            assert!(e.contains(rule), "{bad:?}: {e}");
            assert!(!e.contains('\u{1b}'), "raw escape in {e:?}");
        }
    }
}
