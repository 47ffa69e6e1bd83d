//! Pinning a Tick to its content: the SHA-256 of the exact bytes loaded.
//!
//! Whoever decides *which* bytes may run (a registry pull verified against a
//! manifest, a person's consent stored by digest) hands the sandbox a
//! [`WasmDigest`] with the path ([`crate::WasmSpec::pin`]). The sandbox
//! hashes the bytes it has just read, the same buffer it then compiles, and
//! refuses to start on any difference: a file replaced between the
//! decision and the start cannot run under the decision.

use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// A SHA-256 content digest, written `sha256:` and 64 lowercase hex digits
/// (the OCI form).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WasmDigest([u8; 32]);

impl WasmDigest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> WasmDigest {
        WasmDigest(Sha256::digest(bytes).into())
    }

    /// From a finished SHA-256.
    pub fn from_bytes(bytes: [u8; 32]) -> WasmDigest {
        WasmDigest(bytes)
    }

    /// The 64 hex digits, without the algorithm.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for WasmDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for WasmDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a string is not a digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a digest is sha256: and 64 lowercase hex digits")]
pub struct BadDigest;

impl FromStr for WasmDigest {
    type Err = BadDigest;
    fn from_str(s: &str) -> Result<WasmDigest, BadDigest> {
        let hex = s.strip_prefix("sha256:").ok_or(BadDigest)?;
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(BadDigest);
        }
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| BadDigest)?;
        }
        Ok(WasmDigest(out))
    }
}

impl serde::Serialize for WasmDigest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for WasmDigest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WasmDigest, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_is_not_one() {
        let d = WasmDigest::of(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.to_string().parse::<WasmDigest>(), Ok(d));
        for bad in [
            "",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "sha256:ba7816bf",
            "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a\u{e9}",
        ] {
            assert_eq!(bad.parse::<WasmDigest>(), Err(BadDigest), "{bad:?}");
        }
    }
}
