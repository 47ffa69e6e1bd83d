//! The way to a Tick's stdin: whole frames in order, written by the caller
//! when it can, by the writer task when it cannot.
//!
//! The [`Outbox`] holds the Tick's stdin and the frames waiting for it under
//! one lock. A request whose frame finds the outbox idle (no frame queued or
//! half-written) writes it itself, at once, without blocking: one
//! non-blocking write, which for a request line almost always takes the
//! whole frame. So a round trip needs no hand-off to the writer task (a
//! wake-up of another worker thread, and back).
//!
//! Anything the caller cannot finish at once is the writer's: the rest of a
//! frame the pipe did not take whole (the frame is then *started* and stays
//! at the front of the queue until it is written whole), a frame the pipe
//! took none of, and every frame that finds others queued before it. So the
//! guarantees are the writer's, whoever writes:
//!
//! - frames go out whole and in queue order: the fast path runs only when
//!   nothing is queued, and the hand-over of a partly written frame happens
//!   under the same lock, in the same synchronous step as the write, so no
//!   cancellation (which can only happen at an `.await`) and no other frame
//!   can come between;
//! - a frame not yet started can be withdrawn ([`Outbox::withdraw`]); a
//!   started one is written whole, or the session ends (a write that cannot
//!   finish within the stall timeout, or fails, ends it: nothing is written
//!   after a partial frame);
//! - nothing is written once the outbox is closed.

use crate::util::lock;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{EndReason, Trigger};

type Stdin = Box<dyn AsyncWrite + Send + Unpin>;

/// One request line, with the request id it belongs to.
struct Frame {
    id: u64,
    bytes: Vec<u8>,
}

struct State {
    /// `None` once closed or after a failed write (dropping it closes the
    /// pipe: EOF for the Tick).
    stdin: Option<Stdin>,
    /// Frames in order; the front one may be started.
    queue: VecDeque<Frame>,
    /// The front frame is started: some of its bytes may be in the pipe, so
    /// it is written whole or the session ends; it can no longer be withdrawn.
    started: bool,
    /// Bytes of the front frame written so far.
    written: usize,
    /// The writer task, when it waits for a frame.
    writer: Option<Waker>,
    /// False once closing or failed: no new frame is taken.
    open: bool,
    /// Whether a caller may write its own frame (`SessionConfig::caller_writes`).
    caller_writes: bool,
}

/// The Tick's stdin and the frames waiting for it.
pub(super) struct Outbox {
    state: Mutex<State>,
}

/// The outbox is closed: the session is ending, nothing more is written.
#[derive(Debug)]
pub(super) struct Closed;

/// What the writer task does next.
enum Turn {
    /// Write the front frame (it is now started).
    Frame,
    /// Close stdin: the outbox was closed between frames.
    Close,
}

impl Outbox {
    pub(super) fn new(stdin: Stdin, caller_writes: bool) -> Outbox {
        Outbox {
            state: Mutex::new(State {
                stdin: Some(stdin),
                queue: VecDeque::new(),
                started: false,
                written: 0,
                writer: None,
                open: true,
                caller_writes,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Each critical section moves bytes and flags; a poisoned lock
        // still holds a consistent queue (a frame is popped only when whole).
        lock(&self.state)
    }

    /// Sends a request's frame: written here and now when the outbox is
    /// idle and the pipe takes it, else queued for the writer task (with
    /// whatever part of it was written here). Never waits.
    pub(super) fn submit(&self, id: u64, bytes: Vec<u8>) -> Result<(), Closed> {
        let mut s = self.lock();
        if !s.open {
            return Err(Closed);
        }
        if s.queue.is_empty() && s.caller_writes {
            if let Some(stdin) = s.stdin.as_mut() {
                // The waker is never used: a frame the pipe does not take
                // whole goes to the writer, which polls again with its own.
                let mut cx = Context::from_waker(Waker::noop());
                let written = match Pin::new(&mut **stdin).poll_write(&mut cx, &bytes) {
                    Poll::Ready(Ok(n)) => n,
                    // Nothing written: Pending, or an error the writer will
                    // meet again and report as the session's end.
                    _ => 0,
                };
                if written == bytes.len() {
                    if let Poll::Ready(Ok(())) = Pin::new(&mut **stdin).poll_flush(&mut cx) {
                        return Ok(());
                    }
                }
                if written > 0 {
                    // Part of the frame is in the pipe: from here on it is
                    // the writer's to finish, before any other frame.
                    s.started = true;
                    s.written = written;
                }
            }
        }
        s.queue.push_back(Frame { id, bytes });
        if let Some(w) = s.writer.take() {
            w.wake();
        }
        Ok(())
    }

    /// Takes back request `id`'s frame if no byte of it was written.
    /// Returns whether it was withdrawn; false means it was written (or is
    /// being written, and will be whole).
    pub(super) fn withdraw(&self, id: u64) -> bool {
        let mut s = self.lock();
        match s.queue.iter().position(|f| f.id == id) {
            Some(0) if s.started => false,
            Some(i) => {
                s.queue.remove(i);
                true
            }
            None => false,
        }
    }

    /// Stops taking frames; the writer closes stdin once no frame is half
    /// written.
    pub(super) fn close(&self) {
        let mut s = self.lock();
        s.open = false;
        if let Some(w) = s.writer.take() {
            w.wake();
        }
    }

    /// Drops stdin wherever the writer is (after it was stopped mid-frame):
    /// the Tick sees EOF, and nothing follows the partial frame.
    pub(super) fn drop_stdin(&self) {
        let stdin = {
            let mut s = self.lock();
            s.open = false;
            s.stdin.take()
        };
        drop(stdin);
    }

    fn poll_turn(&self, cx: &mut Context<'_>) -> Poll<Turn> {
        let mut s = self.lock();
        if !s.open && !s.started {
            return Poll::Ready(Turn::Close);
        }
        if !s.queue.is_empty() {
            s.started = true;
            return Poll::Ready(Turn::Frame);
        }
        s.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Writes the rest of the front frame and flushes; pops it when whole.
    fn poll_front(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut guard = self.lock();
        let s = &mut *guard;
        let (Some(stdin), Some(front)) = (s.stdin.as_mut(), s.queue.front()) else {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the Tick's stdin was closed",
            )));
        };
        while s.written < front.bytes.len() {
            match ready!(Pin::new(&mut **stdin).poll_write(cx, &front.bytes[s.written..])) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => s.written += n,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        ready!(Pin::new(&mut **stdin).poll_flush(cx))?;
        s.queue.pop_front();
        s.written = 0;
        s.started = false;
        Poll::Ready(Ok(()))
    }

    /// After a failed or stalled write: nothing more goes out, and stdin
    /// is closed (half a frame may be in the pipe; nothing may follow it).
    fn fail(&self) {
        self.drop_stdin();
    }
}

/// The writer task: finishes what callers could not write at once, in
/// queue order, each frame within `stall`; a frame that cannot be written
/// in time (or at all) ends the session.
pub(super) async fn write_frames(
    outbox: Arc<Outbox>,
    triggers: mpsc::UnboundedSender<Trigger>,
    stall: Duration,
) {
    loop {
        match poll_fn(|cx| outbox.poll_turn(cx)).await {
            Turn::Close => break,
            Turn::Frame => {}
        }
        let written = tokio::time::timeout(stall, poll_fn(|cx| outbox.poll_front(cx))).await;
        let trigger = match written {
            Ok(Ok(())) => continue,
            Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                Trigger::StdinClosed(format!("writing to the Tick's stdin failed: {e}"))
            }
            Ok(Err(e)) => Trigger::Fault(EndReason::Io(format!(
                "writing to the Tick's stdin failed: {e}"
            ))),
            Err(_) => Trigger::Fault(EndReason::StdinStalled(stall)),
        };
        tracing::warn!("ending the session: the Tick's stdin cannot take a frame");
        outbox.fail();
        let _ = triggers.send(trigger);
        return;
    }
    // Between frames: a clean EOF for the Tick.
    let stdin = outbox.lock().stdin.take();
    if let Some(mut stdin) = stdin {
        let _ = stdin.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncRead, AsyncReadExt, DuplexStream};

    fn outbox(pipe: usize, caller_writes: bool) -> (Arc<Outbox>, DuplexStream) {
        let (host, tick) = tokio::io::duplex(pipe);
        (Arc::new(Outbox::new(Box::new(host), caller_writes)), tick)
    }

    fn writer(outbox: &Arc<Outbox>) -> mpsc::UnboundedReceiver<Trigger> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_frames(outbox.clone(), tx, Duration::from_secs(10)));
        rx
    }

    /// Everything the Tick can read right now, without waiting.
    fn available(tick: &mut DuplexStream) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            let mut rb = tokio::io::ReadBuf::new(&mut buf);
            match Pin::new(&mut *tick).poll_read(&mut cx, &mut rb) {
                Poll::Ready(Ok(())) if !rb.filled().is_empty() => {
                    out.extend_from_slice(rb.filled())
                }
                _ => return out,
            }
        }
    }

    #[tokio::test]
    async fn an_idle_outbox_lets_the_caller_write_the_whole_frame() {
        let (o, mut tick) = outbox(4096, true);
        // No writer task runs: the frame is in the pipe because the caller
        // wrote it.
        o.submit(1, b"one\n".to_vec()).unwrap();
        o.submit(2, b"two\n".to_vec()).unwrap();
        assert_eq!(available(&mut tick), b"one\ntwo\n");
        assert!(!o.withdraw(1), "a written frame is not withdrawn");
    }

    #[tokio::test]
    async fn without_caller_writes_only_the_writer_writes() {
        let (o, mut tick) = outbox(4096, false);
        o.submit(1, b"one\n".to_vec()).unwrap();
        assert_eq!(available(&mut tick), b"");
        let _triggers = writer(&o);
        let mut line = [0u8; 4];
        tick.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"one\n");
    }

    #[tokio::test]
    async fn a_partly_written_frame_is_finished_whole_before_the_next() {
        let (o, mut tick) = outbox(1000, true);
        let big: Vec<u8> = [vec![b'a'; 2999], vec![b'\n']].concat();
        o.submit(1, big.clone()).unwrap();
        // The pipe took the first 1000 bytes; the rest is the writer's, and
        // the frame can no longer be taken back.
        assert_eq!(available(&mut tick).len(), 1000);
        assert!(!o.withdraw(1));
        // A frame behind it is queued, not written, and can be withdrawn;
        // another one is not, and follows the first whole.
        o.submit(2, b"two\n".to_vec()).unwrap();
        o.submit(3, b"three\n".to_vec()).unwrap();
        assert_eq!(
            available(&mut tick),
            b"",
            "nothing is glued to half a frame"
        );
        assert!(o.withdraw(2));
        let _triggers = writer(&o);
        let mut rest = vec![0u8; 2000 + 6];
        tick.read_exact(&mut rest).await.unwrap();
        assert_eq!(&rest[..2000], &big[1000..]);
        assert_eq!(&rest[2000..], b"three\n");
    }

    #[tokio::test]
    async fn a_closed_outbox_takes_no_frame_and_closes_stdin() {
        let (o, mut tick) = outbox(4096, true);
        let _triggers = writer(&o);
        o.close();
        assert!(o.submit(1, b"one\n".to_vec()).is_err());
        let mut rest = Vec::new();
        tick.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"", "EOF, nothing written");
    }
}
