//! `oci://HOST[:PORT]/REPO:TAG` and `oci://HOST[:PORT]/REPO@sha256:…`, and
//! the content digests of the distribution spec.
//!
//! The grammar is the distribution spec's, checked whole before anything
//! touches the network: a repository is lowercase path components, a tag
//! at most 128 characters of `[A-Za-z0-9_.-]`, a digest `sha256:` and 64
//! lowercase hex digits (the one algorithm tickbox checks). A reference
//! always names a tag or a digest: no implicit `latest`, which would make
//! what runs depend on who pushed last.

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;

/// The scheme that marks a Tick named by registry reference.
pub const SCHEME: &str = "oci://";

/// A SHA-256 content digest (`sha256:` + 64 lowercase hex digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// The hex digits without the algorithm (a store file's name).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The OCI referrers tag-scheme name: `sha256-HEX`.
    pub fn tag_form(&self) -> String {
        format!("sha256-{}", self.hex())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Digest {
    type Err = String;
    fn from_str(s: &str) -> Result<Digest, String> {
        let bad = || {
            format!(
                "`{}` is not a digest tickbox checks (sha256: and 64 lowercase hex digits)",
                tickbox_protocol::text::escape(s)
            )
        };
        let hex = s.strip_prefix("sha256:").ok_or_else(bad)?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Digest(out))
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Digest, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A SHA-256 computed while bytes stream by.
#[derive(Default)]
pub struct Hasher(Sha256);

impl Hasher {
    /// Adds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// The digest of everything added.
    pub fn finish(self) -> Digest {
        Digest(self.0.finalize().into())
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

/// A Tick in a registry.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Reference {
    /// `HOST` or `HOST:PORT`, as written.
    pub registry: String,
    /// The host alone.
    pub host: String,
    /// The port, when written.
    pub port: Option<u16>,
    /// The repository path.
    pub repository: String,
    /// The tag or digest.
    pub target: Target,
}

impl Reference {
    /// The same repository at `digest`.
    pub fn at(&self, digest: Digest) -> Reference {
        Reference {
            target: Target::Digest(digest),
            ..self.clone()
        }
    }

    /// `oci://HOST[:PORT]/REPO` without tag or digest: the name a Tick's
    /// versions share (consent's "updates of the same name").
    pub fn name(&self) -> String {
        format!("{SCHEME}{}/{}", self.registry, self.repository)
    }

    /// Whether the registry is this machine (plain HTTP allowed).
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(&self.host)
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

/// `localhost`, or an address in 127.0.0.0/8 or `::1`.
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Tag(t) => write!(f, "{}:{t}", self.name()),
            Target::Digest(d) => write!(f, "{}@{d}", self.name()),
        }
    }
}

/// Whether a TICK argument names a registry reference.
pub fn is_reference(tick: &str) -> bool {
    tick.starts_with(SCHEME)
}

impl FromStr for Reference {
    type Err = String;
    fn from_str(s: &str) -> Result<Reference, String> {
        let shown = tickbox_protocol::text::escape(s);
        let bad = |why: &str| format!("`{shown}` is not a Tick reference: {why}");
        let rest = s
            .strip_prefix(SCHEME)
            .ok_or_else(|| bad("it starts with oci://"))?;
        let (registry, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("oci://HOST[:PORT]/REPO:TAG or oci://HOST[:PORT]/REPO@sha256:…"))?;
        let (host, port) = match registry.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => {
                let port = p
                    .parse::<u16>()
                    .ok()
                    .filter(|&p| p > 0)
                    .ok_or_else(|| bad("the port is a number from 1 to 65535"))?;
                (h, Some(port))
            }
            _ => (registry, None),
        };
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            && !host.starts_with(['.', '-']);
        if !host_ok {
            return Err(bad("the registry host is a name or an IPv4 address"));
        }
        let (repository, target) = if let Some((repo, digest)) = path.split_once('@') {
            // `REPO:TAG@DIGEST` names the digest; the tag is only a label.
            let repo = repo.split_once(':').map_or(repo, |(r, _)| r);
            let digest = digest.parse::<Digest>().map_err(|e| bad(&e))?;
            (repo, Target::Digest(digest))
        } else {
            let (repo, tag) = path
                .rsplit_once(':')
                .ok_or_else(|| bad("name a tag (REPO:TAG) or a digest (REPO@sha256:…); there is no implicit latest"))?;
            if !valid_tag(tag) {
                return Err(bad(
                    "a tag is 1 to 128 of A-Z a-z 0-9 _ . - and does not start with . or -",
                ));
            }
            (repo, Target::Tag(tag.to_string()))
        };
        if !valid_repository(repository) {
            return Err(bad(
                "a repository is lowercase components (a-z 0-9 separated by . _ __ or -) joined by /, at most 255 characters",
            ));
        }
        Ok(Reference {
            registry: registry.to_string(),
            host: host.to_string(),
            port,
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

fn valid_repository(repo: &str) -> bool {
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
        assert_eq!(r.host, "127.0.0.1");
        assert_eq!(r.port, Some(5000));
        assert_eq!(r.repository, "ticks/counter");
        assert_eq!(r.target, Target::Tag("v1".into()));
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/ticks/counter:v1");
        let p: Reference = format!("oci://ghcr.io/a/b-c__d.e@{D}").parse().unwrap();
        assert_eq!(p.digest().unwrap().to_string(), D);
        assert!(!p.is_loopback());
        assert_eq!(p.to_string(), format!("oci://ghcr.io/a/b-c__d.e@{D}"));
        let both: Reference = format!("oci://localhost/x:v2@{D}").parse().unwrap();
        assert_eq!(both.digest().unwrap().to_string(), D);
        assert_eq!(Digest::of(b"abc").to_string(), D);
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
            ("oci://ho st/repo:v1", "host"),
            ("oci://host/repo@sha256:abc", "digest"),
            ("oci://host/repo@md5:abc", "digest"),
        ] {
            let e = bad.parse::<Reference>().unwrap_err();
            assert!(e.contains(rule), "{bad:?}: {e}");
            assert!(!e.contains('\u{1b}'), "raw escape in {e:?}");
        }
    }
}
