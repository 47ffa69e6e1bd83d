//! tickbox-sandbox's integration tests, through the crate's public API.
//!
//! - `http` — outgoing `wasi:http` under origin grants against loopback
//!   HTTP and HTTPS servers: origins, redirects, body bounds, timeouts,
//!   requests in flight, the test CA;
//! - `launch` — the `Launcher`: a wasm Tick (a guest built once per run by
//!   the shared harness) and a native one opened by what they are, and
//!   each way a start fails as its own `LaunchError`;
//! - `sharing` — Ticks of one component share one compile and one cache
//!   entry, started one by one or together.

mod http;
mod launch;
mod sharing;
