//! Ways to run a Tick. Each backend yields a [`crate::session::TickIo`]: the
//! Tick's stdin and stdout, its [`crate::view::View`], and a process handle
//! the session supervises.
//!
//! - [`native`] — a subprocess whose controlling terminal is a real PTY;
//! - [`wasm`] — a sandboxed wasm guest in wasmtime, in-process;
//! - [`reaper`] — what a native Tick left behind is killed when it ends.

pub mod native;
pub mod reaper;
pub mod wasm;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A `TICKLOOP_INSTANCE_ID` unique per start: host pid, start time and a counter.
pub fn new_instance_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    format!("tickbox-{}-{t:x}-{n}", std::process::id())
}
