//! tickbox-trust: the checks tickbox makes before it trusts something it
//! did not make in this process, each written once for every crate that
//! makes it.
//!
//! - [`private_dir`] — a directory tickbox keeps trusted state in (the
//!   compile cache, the trust store of approvals, the store of pulled
//!   Ticks) is a real directory, the user's, that nobody else can write;
//!   [`NotPrivate`] says which part of that rule a directory breaks.
//! - [`digest`] — content is pinned by its SHA-256 ([`Digest`]): one type
//!   from the registry's manifest to the sandbox's check of the bytes it
//!   compiles.
//! - [`tls`] — a TLS server is trusted by the webpki roots (Mozilla's) plus
//!   the CAs a person gave, over ring, speaking HTTP/1.1: the one client
//!   configuration of the sandbox's `wasi:http` and the registry client.
//!
//! Why a crate of its own: the sandbox (`tickbox-sandbox`) and the registry
//! client (`tickbox-registry`) both need these checks, and the only crate
//! they share is the protocol's, whose subject is the wire. This one is a
//! leaf: it depends on no other tickbox crate, so either can use it
//! without an arrow up.

pub mod digest;
pub mod private_dir;
pub mod tls;

pub use digest::Digest;
pub use private_dir::NotPrivate;
