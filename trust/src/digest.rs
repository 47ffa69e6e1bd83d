//! Content digests: the SHA-256 of exact bytes, written `sha256:` and 64
//! lowercase hex digits (the OCI form).
//!
//! One type for every crate that pins content: the registry client checks
//! what a registry sends against the digests a manifest names, the store
//! keeps blobs under theirs, and the sandbox refuses to start bytes whose
//! digest is not the one decided on (a verified pull, a person's consent).
//! With one type a digest goes from the registry to the sandbox as itself,
//! never through its text and a second parser that might read it
//! differently.

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;

/// A SHA-256 content digest (`sha256:` + 64 lowercase hex digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(Sha256::digest(bytes).into())
    }

    /// From a finished SHA-256.
    pub fn from_bytes(bytes: [u8; 32]) -> Digest {
        Digest(bytes)
    }

    /// The 64 hex digits, without the algorithm (a store file's name).
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

/// Why a string is not a digest. It does not quote the string: callers
/// that show it escape it first.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a digest tickbox checks is sha256: and 64 lowercase hex digits")]
pub struct BadDigest;

impl FromStr for Digest {
    type Err = BadDigest;
    fn from_str(s: &str) -> Result<Digest, BadDigest> {
        let hex = s.strip_prefix("sha256:").ok_or(BadDigest)?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(BadDigest);
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| BadDigest)?;
        }
        Ok(Digest(out))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
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
        sha2::Digest::update(&mut self.0, bytes);
    }
    /// The digest of everything added.
    pub fn finish(self) -> Digest {
        Digest(self.0.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_one() {
        let d = Digest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.to_string().parse::<Digest>(), Ok(d));
        let mut h = Hasher::default();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(h.finish(), d);
        assert_eq!(d.tag_form(), d.to_string().replace(':', "-"));
        for bad in [
            "",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "sha256:ba7816bf",
            "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a\u{e9}",
        ] {
            assert_eq!(bad.parse::<Digest>(), Err(BadDigest), "{bad:?}");
        }
    }
}
