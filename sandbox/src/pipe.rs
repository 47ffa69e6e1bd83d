//! In-memory pipes between the host and a wasm guest's stdin and stdout.
//!
//! wasmtime-wasi's ready-made async stdio puts a tokio task between each end
//! and the guest; every request and response then crosses one more task
//! hand-off each way. These pipes connect the two ends directly: the host's
//! write wakes the guest's pending `poll`, and the guest's write wakes the
//! session's reader. A pipe holds at most [`PIPE_CAPACITY`] bytes; a full
//! pipe makes the writer wait (backpressure), and closing either end is seen
//! by the other (EOF, or a closed stream).

pub use crate::limits::PIPE_CAPACITY;
use bytes::{Buf, Bytes, BytesMut};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use tickbox_host::util::lock;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use wasmtime_wasi::cli::{IsTerminal, StdinStream, StdoutStream};
use wasmtime_wasi::p2::{InputStream, OutputStream, Pollable, StreamError, StreamResult};

#[derive(Default)]
struct State {
    buf: BytesMut,
    writer_closed: bool,
    reader_closed: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<State>>);

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The critical sections only move bytes and wakers; a poisoned lock
        // still holds a consistent buffer.
        lock(&self.0)
    }

    /// Appends what fits of `bytes`; None when the reader is gone. The
    /// reader is woken after the lock is released, so the woken task never
    /// finds the lock still held by its waker.
    fn push_open(&self, bytes: &[u8]) -> Option<usize> {
        let (n, waker) = {
            let mut s = self.lock();
            if s.reader_closed {
                return None;
            }
            let n = bytes.len().min(PIPE_CAPACITY.saturating_sub(s.buf.len()));
            s.buf.extend_from_slice(&bytes[..n]);
            (n, if n > 0 { s.read_waker.take() } else { None })
        };
        if let Some(w) = waker {
            w.wake();
        }
        Some(n)
    }

    fn take(&self, max: usize) -> Bytes {
        self.take_open(max).0
    }

    /// Takes up to `max` bytes, and whether the writer is gone (checked
    /// under the same lock). The writer is woken after the lock is released.
    fn take_open(&self, max: usize) -> (Bytes, bool) {
        let (out, writer_closed, waker) = {
            let mut s = self.lock();
            let n = max.min(s.buf.len());
            let out = s.buf.split_to(n).freeze();
            let waker = if n > 0 { s.write_waker.take() } else { None };
            (out, s.writer_closed, waker)
        };
        if let Some(w) = waker {
            w.wake();
        }
        (out, writer_closed)
    }

    fn close_writer(&self) {
        let mut s = self.lock();
        s.writer_closed = true;
        if let Some(w) = s.read_waker.take() {
            w.wake();
        }
    }

    fn close_reader(&self) {
        let mut s = self.lock();
        s.reader_closed = true;
        s.buf.clear();
        if let Some(w) = s.write_waker.take() {
            w.wake();
        }
    }

    /// Ready to read: bytes are there, or the writer is gone.
    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.lock();
        if !s.buf.is_empty() || s.writer_closed {
            return Poll::Ready(());
        }
        s.read_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// `AsyncRead` for either end that reads.
    fn poll_read_into(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.poll_readable(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let chunk = self.take(buf.remaining());
                buf.put_slice(chunk.chunk());
                Poll::Ready(Ok(()))
            }
        }
    }

    /// `AsyncWrite` for either end that writes.
    fn poll_write_from(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let Some(pushed) = self.push_open(buf) else {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        };
        match pushed {
            0 if !buf.is_empty() => match self.poll_writable(cx) {
                // Room appeared between the push and the check: try again.
                Poll::Ready(()) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Poll::Pending => Poll::Pending,
            },
            n => Poll::Ready(Ok(n)),
        }
    }

    /// Ready to write: there is room, or the reader is gone.
    fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.lock();
        if s.buf.len() < PIPE_CAPACITY || s.reader_closed {
            return Poll::Ready(());
        }
        s.write_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A pipe into the guest's stdin: the host's writer and the guest's stdin.
pub fn stdin() -> (HostWriter, GuestStdin) {
    let shared = Shared::default();
    (HostWriter(shared.clone()), GuestStdin(shared))
}

/// A pipe out of the guest's stdout: the guest's stdout and the host's reader.
pub fn stdout() -> (GuestStdout, HostReader) {
    let shared = Shared::default();
    (GuestStdout(shared.clone()), HostReader(shared))
}

/// The host's end of the guest's stdin.
pub struct HostWriter(Shared);

impl AsyncWrite for HostWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write_from(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.close_writer();
        Poll::Ready(Ok(()))
    }
}

impl Drop for HostWriter {
    fn drop(&mut self) {
        self.0.close_writer();
    }
}

/// The host's end of the guest's stdout.
pub struct HostReader(Shared);

impl AsyncRead for HostReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.0.poll_read_into(cx, buf)
    }
}

impl Drop for HostReader {
    fn drop(&mut self) {
        self.0.close_reader();
    }
}

/// The guest's stdin, as WASI sees it. Every handle the guest opens reads
/// the same pipe; the pipe closes for the host when the guest's context goes.
pub struct GuestStdin(Shared);

impl Drop for GuestStdin {
    fn drop(&mut self) {
        self.0.close_reader();
    }
}

impl IsTerminal for GuestStdin {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for GuestStdin {
    fn async_stream(&self) -> Box<dyn AsyncRead + Send + Sync> {
        Box::new(StdinHandle(self.0.clone()))
    }
    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(StdinHandle(self.0.clone()))
    }
}

/// One guest handle on stdin.
struct StdinHandle(Shared);

#[wasmtime_wasi::async_trait]
impl Pollable for StdinHandle {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.0.poll_readable(cx)).await
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for StdinHandle {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        let (chunk, writer_closed) = self.0.take_open(size);
        if chunk.is_empty() && size > 0 && writer_closed {
            return Err(StreamError::Closed);
        }
        Ok(chunk)
    }

    /// The guest's blocking read (how `std`'s and wasi-libc's `read` of
    /// stdin wait): waits for bytes or the writer's end on the pipe itself,
    /// then takes them, with no `ready()` future boxed on each call.
    async fn blocking_read(&mut self, size: usize) -> StreamResult<Bytes> {
        loop {
            std::future::poll_fn(|cx| self.0.poll_readable(cx)).await;
            let chunk = self.read(size)?;
            // Empty only for a zero-byte read: readable means bytes are
            // there or the writer is gone (then `read` said Closed).
            if !chunk.is_empty() || size == 0 {
                return Ok(chunk);
            }
        }
    }
}

impl AsyncRead for StdinHandle {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.0.poll_read_into(cx, buf)
    }
}

/// The guest's stdout, as WASI sees it.
pub struct GuestStdout(Shared);

impl Drop for GuestStdout {
    fn drop(&mut self) {
        self.0.close_writer();
    }
}

impl IsTerminal for GuestStdout {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStdout {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(StdoutHandle(self.0.clone()))
    }
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(StdoutHandle(self.0.clone()))
    }
}

/// One guest handle on stdout.
struct StdoutHandle(Shared);

#[wasmtime_wasi::async_trait]
impl Pollable for StdoutHandle {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.0.poll_writable(cx)).await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for StdoutHandle {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let mut rest: &[u8] = &bytes;
        // `check_write` promised room for these bytes; a guest that writes
        // more than it was promised is told so rather than silently cut.
        while !rest.is_empty() {
            let Some(n) = self.0.push_open(rest) else {
                return Err(StreamError::Closed);
            };
            if n == 0 {
                return Err(StreamError::Trap(wasmtime::format_err!(
                    "write exceeded the permitted size"
                )));
            }
            rest = &rest[n..];
        }
        Ok(())
    }

    /// The guest's `blocking-write-and-flush` (how `std`'s and wasi-libc's
    /// `write` of stdout go out): waits for room in the pipe and appends,
    /// until every byte is in. A write here is complete once in the pipe
    /// (`flush` has nothing to do), so the default's flush and its second
    /// wait for room are left out. Backpressure is unchanged: a full pipe
    /// makes the guest wait; a gone reader is `Closed`, as before.
    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> StreamResult<()> {
        let mut rest: &[u8] = &bytes;
        while !rest.is_empty() {
            std::future::poll_fn(|cx| self.0.poll_writable(cx)).await;
            let Some(n) = self.0.push_open(rest) else {
                return Err(StreamError::Closed);
            };
            rest = &rest[n..];
        }
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        let s = self.0.lock();
        if s.reader_closed {
            return Err(StreamError::Closed);
        }
        Ok(PIPE_CAPACITY.saturating_sub(s.buf.len()))
    }
}

impl AsyncWrite for StdoutHandle {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write_from(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_cross_and_eof_follows_the_writer() {
        let (mut host, guest) = stdin();
        let mut handle = guest.p2_stream();
        host.write_all(b"hello\n").await.unwrap();
        handle.ready().await;
        assert_eq!(&handle.read(3).unwrap()[..], b"hel");
        assert_eq!(&handle.read(100).unwrap()[..], b"lo\n");
        assert!(
            handle.read(10).unwrap().is_empty(),
            "empty, not closed, while the writer lives"
        );
        host.shutdown().await.unwrap();
        handle.ready().await;
        assert!(matches!(handle.read(10), Err(StreamError::Closed)));
    }

    #[tokio::test]
    async fn a_full_pipe_waits_and_a_gone_reader_breaks_it() {
        let (guest, mut host) = stdout();
        let mut handle = guest.p2_stream();
        assert_eq!(handle.check_write().unwrap(), PIPE_CAPACITY);
        handle
            .write(Bytes::from(vec![b'x'; PIPE_CAPACITY]))
            .unwrap();
        assert_eq!(
            handle.check_write().unwrap(),
            0,
            "full: the guest must wait"
        );
        let mut buf = vec![0u8; 1000];
        let n = host.read(&mut buf).await.unwrap();
        assert_eq!(n, 1000);
        assert_eq!(handle.check_write().unwrap(), 1000);
        drop(host);
        assert!(matches!(handle.check_write(), Err(StreamError::Closed)));
        drop(handle);
        drop(guest);
    }

    #[tokio::test]
    async fn a_blocking_write_waits_for_room_and_a_gone_reader_ends_it() {
        let (guest, mut host) = stdout();
        let mut handle = guest.p2_stream();
        handle
            .write(Bytes::from(vec![b'x'; PIPE_CAPACITY - 10]))
            .unwrap();
        // 100 bytes with room for 10: the write waits until the host reads.
        let mut write = handle.blocking_write_and_flush(Bytes::from(vec![b'y'; 100]));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(
            write.as_mut().poll(&mut cx).is_pending(),
            "a full pipe waits"
        );
        let mut all = vec![0u8; PIPE_CAPACITY];
        let mut got = host.read(&mut all).await.unwrap();
        write.await.unwrap();
        while got < PIPE_CAPACITY + 90 {
            let mut buf = vec![0u8; PIPE_CAPACITY];
            let n = host.read(&mut buf).await.unwrap();
            all.truncate(got);
            all.extend_from_slice(&buf[..n]);
            got += n;
        }
        all.truncate(got);
        let (x, y) = all.split_at(PIPE_CAPACITY - 10);
        assert!(x.iter().all(|&b| b == b'x'));
        assert_eq!(y, &[b'y'; 100][..], "every byte, once, in order");
        drop(host);
        let gone = handle.blocking_write_and_flush(Bytes::from_static(b"z"));
        assert!(matches!(gone.await, Err(StreamError::Closed)));
    }

    #[tokio::test]
    async fn a_blocking_read_waits_for_bytes_then_sees_the_end() {
        let (mut host, guest) = stdin();
        let mut handle = guest.p2_stream();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        {
            let mut read = handle.blocking_read(100);
            assert!(read.as_mut().poll(&mut cx).is_pending(), "nothing yet");
            host.write_all(b"one\ntwo\n").await.unwrap();
            assert_eq!(&read.await.unwrap()[..], b"one\ntwo\n");
        }
        host.shutdown().await.unwrap();
        assert!(matches!(
            handle.blocking_read(10).await,
            Err(StreamError::Closed)
        ));
    }

    #[tokio::test]
    async fn the_host_sees_eof_when_the_guest_context_goes() {
        let (guest, mut host) = stdout();
        let mut handle = guest.p2_stream();
        handle.write(Bytes::from_static(b"last\n")).unwrap();
        drop(handle);
        drop(guest);
        let mut all = Vec::new();
        host.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"last\n");
    }
}
