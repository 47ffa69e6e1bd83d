//! The write quota of a Tick (`--max-write`): how many bytes it may write
//! to files through its writable grants, all together.
//!
//! Enforced for components on the three ways `wasi:filesystem` writes file
//! data: `descriptor.write` is checked before it runs, and the output
//! streams of `write-via-stream` / `append-via-stream` are wrapped so each
//! write is counted. Past the quota the guest gets `quota` (EDQUOT): an
//! error it handles, its session goes on. What counts is bytes written,
//! including overwrites (a budget, not a measure of disk use); growing a
//! file with `set-size` makes it sparse and is not counted. A preview-1
//! module's writes go through wasmtime-wasi's internals, where they cannot
//! be metered, so a quota with a preview-1 module is refused at start.

use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// What is left of a Tick's write quota (shared by its streams).
#[derive(Clone)]
pub struct Quota {
    left: Arc<AtomicU64>,
    max: u64,
}

impl Quota {
    /// A quota of `max` bytes.
    pub fn new(max: u64) -> Quota {
        Quota {
            left: Arc::new(AtomicU64::new(max)),
            max,
        }
    }

    /// Spends `n` bytes; false (nothing spent) when fewer are left.
    pub fn take(&self, n: u64) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }

    /// The guest-visible error: EDQUOT, which wasmtime-wasi reports as the
    /// `quota` error code.
    pub fn exceeded(&self) -> std::io::Error {
        tracing::info!(max = self.max, "a guest ran into its write quota");
        std::io::Error::from_raw_os_error(libc::EDQUOT)
    }
}

/// A file's output stream, metered.
pub struct QuotaStream {
    pub inner: Box<dyn OutputStream>,
    pub quota: Quota,
}

#[wasmtime_wasi::async_trait]
impl Pollable for QuotaStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for QuotaStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if !self.quota.take(bytes.len() as u64) {
            return Err(StreamError::LastOperationFailed(
                self.quota.exceeded().into(),
            ));
        }
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_is_spent_exactly_once() {
        let q = Quota::new(100);
        assert!(q.take(60));
        assert!(!q.take(41), "more than is left is refused whole");
        assert!(q.take(40));
        assert!(!q.take(1));
        assert_eq!(q.exceeded().raw_os_error(), Some(libc::EDQUOT));
    }
}
