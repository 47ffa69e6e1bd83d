//! tickbox-conformance's integration tests, through the crate's public
//! API: a scenario file loaded, run against a real wasm guest (the counter
//! example, built once per run by the shared harness) started by the
//! sandbox's launcher on virtual time, and judged.
//!
//! - `scenario` — a scenario that holds passes, one that does not fails at
//!   its step with what was found, and virtual time makes two runs alike.

mod scenario;
