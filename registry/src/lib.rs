//! tickbox-registry: Ticks named by `oci://` reference.
//!
//! - [`reference`](mod@reference): the reference grammar and the canonical
//!   registry identity ([`RegistryId`], [`Name`]) every comparison uses;
//!   content [`Digest`]s (`tickbox_trust`'s, shared with the sandbox);
//! - [`client`]: the distribution API (pull, push), every read bounded
//!   ([`limits`]) and every byte checked against the digest it was asked
//!   for while it streams;
//! - [`store`]: the content-addressed store, trusted like the compile cache;
//! - [`layout`]: the CNCF Wasm OCI artifact, plus the requested-grants layer;
//! - [`auth`]: Docker config credentials and the registry token flow;
//! - [`policy`]: the signers policy (which signers a registry or repository
//!   needs), every rule checked when read and matched by canonical name;
//! - [`lock`](mod@lock): the lock file pinning references to digests.
//!
//! Why its own small client rather than a general OCI crate: the maintained
//! Rust clients read manifests, tokens and error bodies whole, with no
//! bound, and a registry is untrusted input. The transport is hyper and
//! rustls (ring), which the sandbox's `wasi:http` already builds, so this
//! crate adds no new dependency tree.
//!
//! This crate knows no flags and no environment variables: the CLI fills a
//! [`RegistryConfig`], finds the policy and lock files and says how it
//! found them ([`policy::Origin`]).

pub mod auth;
pub mod client;
pub mod error;
pub mod http;
pub mod layout;
pub mod limits;
pub mod lock;
pub mod policy;
pub mod reference;
pub mod signature;
pub mod store;

pub use client::{Deadlines, Pulled, Registry, RegistryConfig};
pub use error::RegistryError;
pub use lock::Lock;
pub use policy::Policy;
pub use reference::{is_reference, Authority, Digest, Name, Reference, RegistryId, Target};
pub use store::Store;
