//! A protocol tap: a Tick's stdin or stdout that hands each whole frame it
//! carries to a [`FrameSink`], changing nothing it carries.
//!
//! Two things watch the frames between a host and a Tick without taking
//! part: a scenario's trace (`tickbox-conformance`) and the inspector's
//! timeline (the CLI). Both wrap the Tick's streams in a [`FrameTap`], which
//! splits the bytes that pass into lines (a frame is one line, §3) and, at
//! each newline, hands the sink the line's head and its length. What to do
//! with a frame is the sink's; how to split a stream is here, once.
//!
//! **Bound:** a tap holds at most [`FrameSink::HOLD_BYTES`] of the line it
//! is in and counts the rest, so a Tick's huge frame costs a watcher a
//! bounded amount whatever the protocol's own line limit. A sink chooses the
//! bound: as much as it keeps or parses of a frame, no more.
//!
//! A tap sees what the stream it wraps actually moved: on a read, the bytes
//! the read filled; on a write, the bytes the inner stream took (a partial
//! write shows only its part, and the rest when it is written). A line
//! unterminated when the stream ends is not a frame and is never handed on.
//!
//! ```
//! use tickbox_host::tap::{FrameSink, FrameTap};
//! use tokio::io::AsyncWriteExt;
//!
//! struct Count(std::sync::atomic::AtomicUsize);
//! impl FrameSink for Count {
//!     const HOLD_BYTES: usize = 64;
//!     fn frame(&self, _head: &[u8], _len: usize) {
//!         self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!     }
//! }
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut stdin = FrameTap::new(Vec::new(), Count(0.into()));
//! stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"tick/read\",\"id\":1}\n").await.unwrap();
//! assert_eq!(stdin.sink().0.load(std::sync::atomic::Ordering::Relaxed), 1);
//! # });
//! ```

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Where a [`FrameTap`] hands the whole frames it sees.
pub trait FrameSink {
    /// Bytes of one frame the tap holds for [`FrameSink::frame`]; the rest
    /// of a longer frame is counted, not kept.
    const HOLD_BYTES: usize;

    /// One whole frame: a line of `len` bytes (its newline excluded) whose
    /// first `head.len()` bytes, at most [`FrameSink::HOLD_BYTES`], are
    /// `head`. `head` is the Tick's bytes, unchecked and maybe cut inside a
    /// UTF-8 character.
    fn frame(&self, head: &[u8], len: usize);

    /// Runs `f` — a write to the stream together with the frames it
    /// completed, or the frames a finished read completed (the read itself
    /// runs outside) — in whatever order the sink needs between its taps;
    /// the default runs it as it is.
    ///
    /// A sink that pairs a request seen by one tap with the response seen
    /// by another holds one lock here: the Tick cannot answer before the
    /// request's write completes, so under the lock the request is always
    /// handed on before its response.
    fn in_order<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
}

/// A stream with every whole line it carries handed to a [`FrameSink`];
/// the bytes pass unchanged, in both directions ([`AsyncRead`] for a
/// Tick's stdout, [`AsyncWrite`] for its stdin).
pub struct FrameTap<T, S> {
    inner: T,
    sink: S,
    line: Line,
}

/// The line a tap is in.
#[derive(Default)]
struct Line {
    /// Its first bytes, at most the sink's `HOLD_BYTES`.
    head: Vec<u8>,
    /// Its length so far.
    len: usize,
}

impl Line {
    /// Takes in bytes that passed, handing `sink` each line they finish.
    fn see<S: FrameSink>(&mut self, mut bytes: &[u8], sink: &S) {
        while !bytes.is_empty() {
            let (part, rest, whole) = match bytes.iter().position(|&b| b == b'\n') {
                Some(n) => (&bytes[..n], &bytes[n + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = S::HOLD_BYTES.saturating_sub(self.head.len());
            self.head.extend_from_slice(&part[..part.len().min(room)]);
            self.len += part.len();
            if whole {
                sink.frame(&self.head, self.len);
                self.head.clear();
                self.len = 0;
            }
            bytes = rest;
        }
    }
}

impl<T, S: FrameSink> FrameTap<T, S> {
    /// Taps `inner`, handing its frames to `sink`.
    pub fn new(inner: T, sink: S) -> FrameTap<T, S> {
        FrameTap {
            inner,
            sink,
            line: Line::default(),
        }
    }

    /// The sink the frames go to.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// Hands on the frames in bytes that passed the tap some other way
    /// than through its stream (tests feed a sink this way), under the
    /// sink's order.
    pub fn see(&mut self, bytes: &[u8]) {
        let FrameTap { sink, line, .. } = self;
        sink.in_order(|| line.see(bytes, sink));
    }
}

impl<T: AsyncRead + Unpin, S: FrameSink + Unpin> AsyncRead for FrameTap<T, S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let FrameTap { inner, sink, line } = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            sink.in_order(|| line.see(&buf.filled()[before..], sink));
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin, S: FrameSink + Unpin> AsyncWrite for FrameTap<T, S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let FrameTap { inner, sink, line } = self.get_mut();
        // The write is polled, never awaited, so whatever the sink holds
        // around it is held for one non-blocking write at most.
        sink.in_order(|| {
            let polled = Pin::new(inner).poll_write(cx, buf);
            if let Poll::Ready(Ok(n)) = polled {
                line.see(&buf[..n], sink);
            }
            polled
        })
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Keeps every frame handed to it, and whether each came inside
    /// `in_order`.
    #[derive(Default)]
    struct Kept {
        frames: Mutex<Vec<(Vec<u8>, usize, bool)>>,
        inside: Arc<AtomicBool>,
    }

    impl FrameSink for Kept {
        const HOLD_BYTES: usize = 8;
        fn frame(&self, head: &[u8], len: usize) {
            let inside = self.inside.load(Ordering::SeqCst);
            self.frames
                .lock()
                .unwrap()
                .push((head.to_vec(), len, inside));
        }
        fn in_order<R>(&self, f: impl FnOnce() -> R) -> R {
            assert!(!self.inside.swap(true, Ordering::SeqCst), "not nested");
            let r = f();
            self.inside.store(false, Ordering::SeqCst);
            r
        }
    }

    impl Kept {
        fn taken(&self) -> Vec<(Vec<u8>, usize, bool)> {
            std::mem::take(&mut self.frames.lock().unwrap())
        }
    }

    /// A reader that returns its chunks one read at a time, as a pipe does.
    struct Chunks(VecDeque<&'static [u8]>);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(chunk) = self.0.pop_front() {
                buf.put_slice(chunk);
            }
            Poll::Ready(Ok(()))
        }
    }

    /// A writer that takes at most `max` bytes a write, and notes whether
    /// each write ran inside the sink's order.
    struct Short {
        taken: Vec<u8>,
        max: usize,
        inside: Arc<AtomicBool>,
        outside_writes: usize,
    }

    impl AsyncWrite for Short {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if !self.inside.load(Ordering::SeqCst) {
                self.outside_writes += 1;
            }
            let n = buf.len().min(self.max);
            self.taken.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn frames_split_across_reads_pass_whole_and_unchanged() {
        let chunks = [
            &b"{\"id\":1,"[..],
            b"\"result\":{}}\n{\"me",
            b"thod\":\"tick/update\"}\n\n",
            b"{\"unterminated\"",
        ];
        let mut tap = FrameTap::new(Chunks(chunks.into_iter().collect()), Kept::default());
        let mut passed = Vec::new();
        tap.read_to_end(&mut passed).await.unwrap();
        assert_eq!(passed, chunks.concat(), "the bytes pass unchanged");
        let frames = tap.sink().taken();
        let lens: Vec<usize> = frames.iter().map(|f| f.1).collect();
        // Two frames and an empty line; the unterminated tail is no frame.
        assert_eq!(lens, [20, 24, 0]);
        assert_eq!(frames[0].0, b"{\"id\":1,");
        assert_eq!(frames[1].0, b"{\"method");
        assert!(frames.iter().all(|f| f.2), "handed on inside the order");
    }

    #[tokio::test]
    async fn a_frame_longer_than_the_hold_bound_is_counted_not_kept() {
        let long = [b'x'; 100];
        let mut tap = FrameTap::new(Vec::new(), Kept::default());
        tap.write_all(&long).await.unwrap();
        tap.write_all(b"\nshort\n").await.unwrap();
        let frames = tap.sink().taken();
        assert_eq!(frames.len(), 2);
        assert_eq!((frames[0].0.len(), frames[0].1), (Kept::HOLD_BYTES, 100));
        // The positive control: a frame within the bound is held whole,
        // and the long one left no bytes behind in the next.
        assert_eq!((frames[1].0.as_slice(), frames[1].1), (&b"short"[..], 5));
    }

    #[tokio::test]
    async fn partial_writes_are_seen_as_the_stream_took_them_inside_the_order() {
        let sink = Kept::default();
        let inner = Short {
            taken: Vec::new(),
            max: 3,
            inside: sink.inside.clone(),
            outside_writes: 0,
        };
        let mut tap = FrameTap::new(inner, sink);
        let sent = b"{\"id\":2}\n{\"id\":3}\n";
        tap.write_all(sent).await.unwrap();
        assert_eq!(tap.inner.taken, sent, "the bytes pass unchanged");
        assert_eq!(tap.inner.outside_writes, 0, "every write inside the order");
        let frames = tap.sink().taken();
        let heads: Vec<&[u8]> = frames.iter().map(|f| f.0.as_slice()).collect();
        assert_eq!(heads, [&b"{\"id\":2}"[..], b"{\"id\":3}"]);
        assert!(frames.iter().all(|f| f.2));
        // A write the stream refuses shows nothing.
        tap.inner.max = 0;
        assert_eq!(tap.write(b"\n").await.unwrap(), 0);
        assert!(tap.sink().taken().is_empty());
    }
}
