//! What one start of a Tick gets besides its launcher's file and grants:
//! [`LaunchOptions`], documented with the launcher (`crate::launch`).
//!
//! A module of its own so that `spawn`, which starts a wasm guest with
//! them, and `launch`, which hands them on, need not import each other
//! (issue 40).

use crate::http::HttpFixtures;
use crate::virtual_time::VirtualClock;
use std::sync::Arc;

/// What one start of a Tick gets besides its launcher's file and grants.
#[derive(Clone, Default)]
pub struct LaunchOptions {
    /// Virtual time and seeded randomness for a wasm guest (`tickbox
    /// test`); a native Tick has no virtual time and ignores it.
    pub clock: Option<VirtualClock>,
    /// Canned answers to a wasm component's `wasi:http` requests, consulted
    /// *instead of* the network: with them no request leaves the host,
    /// whatever origins are granted (see [`crate::http`]). A native Tick
    /// is not sandboxed and cannot take them; a preview-1 module has no
    /// `wasi:http` and is refused with them.
    pub http_fixtures: Option<Arc<dyn HttpFixtures>>,
}

impl LaunchOptions {
    /// Options with this clock only.
    pub fn clock(clock: Option<VirtualClock>) -> LaunchOptions {
        LaunchOptions {
            clock,
            http_fixtures: None,
        }
    }
}

impl std::fmt::Debug for LaunchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchOptions")
            .field("clock", &self.clock.as_ref().map(VirtualClock::seed))
            .field("http_fixtures", &self.http_fixtures.is_some())
            .finish()
    }
}
