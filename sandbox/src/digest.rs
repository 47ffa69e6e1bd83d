//! Pinning a Tick to its content: the SHA-256 of the exact bytes loaded.
//!
//! Whoever decides *which* bytes may run (a registry pull verified against a
//! manifest, a person's consent stored by digest) hands the sandbox a
//! [`WasmDigest`] with the path ([`crate::WasmSpec::pin`]). The sandbox
//! hashes the bytes it has just read, the same buffer it then compiles, and
//! refuses to start on any difference: a file replaced between the
//! decision and the start cannot run under the decision.
//!
//! [`WasmDigest`] is `tickbox_trust::Digest`, the registry's digest too: a
//! pulled Tick's layer digest is handed over as it is, never re-parsed
//! from its text.

pub use tickbox_trust::digest::{BadDigest, Digest as WasmDigest};
