//! tickbox-sandbox's integration tests, through the crate's public API.
//!
//! - `guest` — what the tests share: a test guest opened through the
//!   `Launcher` under a `GrantSpec`, its tools called;
//! - `http` — outgoing `wasi:http` under origin grants against loopback
//!   HTTP and HTTPS servers: origins, redirects, body bounds, timeouts,
//!   requests in flight, the test CA;
//! - `launch` — the `Launcher`: a wasm Tick (a guest built once per run by
//!   the shared harness) and a native one opened by what they are, and
//!   each way a start fails as its own `LaunchError`;
//! - `sharing` — Ticks of one component share one compile and one cache
//!   entry, started one by one or together;
//! - `grants` — a hostile guest reaches exactly its grants: files,
//!   sockets, name lookups, environment, no symbolic links, never
//!   tickbox's own state;
//! - `isolation` — memory past its bound, traps, floods, a guest that
//!   never yields and broken protocol end only that Tick's session;
//!   preview-1 modules; the terminal bridge;
//! - `memory` — memories and tables a Tick may define, the size bound;
//! - `handles` — handle caps for components and preview-1 modules;
//! - `quota` — write quotas, per Tick and per grant;
//! - `entries` — files, directories and hard links a Tick creates count
//!   against its write quota, and moves into or out of a metered grant are
//!   refused;
//! - `cache` — the compile cache: private, MAC-checked, capped;
//! - `catalog` — a catalog's costly patterns bounded, and charged to the
//!   Tick's memory bound;
//! - `views` — live views of a wasm Tick: bounded sizes, a drawing flood
//!   that stalls nothing;
//! - `virtual_time` — under a virtual clock a guest's instance id, file
//!   times and directory order are the same on every start.

mod cache;
mod catalog;
mod entries;
mod grants;
mod guest;
mod handles;
mod http;
mod isolation;
mod launch;
mod memory;
mod quota;
mod sharing;
mod views;
mod virtual_time;
