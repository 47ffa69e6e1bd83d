//! Shared helpers of the fuzz targets: driving tickbox's async readers over
//! in-memory bytes without a runtime, in chunks the input chooses.
//!
//! Every target calls public functions only (`parse_line`, `LineReader`,
//! `Descriptor::parse`, `check_update`, `read_frame`, `fit`, the SDK's
//! `fuzzing` entry points), so when the protocol code moves to its own
//! crate a target changes its `use` lines and nothing else.

use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, ReadBuf};

/// Runs a future that never waits on anything but an in-memory reader.
/// Returns `None` if it would block (which in-memory input never makes it).
pub fn run<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    // A reader over a slice is always ready; a bounded number of polls
    // guards against a future that waits for something else.
    for _ in 0..1_000_000 {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
    }
    None
}

/// A reader over `data` that returns at most `chunk` bytes per read, so
/// buffer compaction and lines split across reads are exercised.
pub struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl<'a> Chunked<'a> {
    pub fn new(data: &'a [u8], chunk: usize) -> Chunked<'a> {
        Chunked {
            data,
            chunk: chunk.max(1),
        }
    }
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.chunk.min(self.data.len()).min(buf.remaining());
        let (head, rest) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = rest;
        Poll::Ready(Ok(()))
    }
}
