//! Newline framing of a Tick's stdout with a hard line limit.
//!
//! [`LineReader`] gives up on an unfinished line as soon as it is longer than
//! [`MAX_LINE_BYTES`], so its buffer stays within about twice that limit (the
//! buffer grows by doubling) and a Tick that writes forever without a newline
//! costs bounded host memory and ends its session instead of the host's.

use crate::protocol::limits::MAX_LINE_BYTES;
use crate::protocol::Violation;
use tokio::io::{AsyncRead, AsyncReadExt};

const CHUNK: usize = 64 * 1024;

/// What went wrong reading a line.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The Tick broke a framing rule (§3.6).
    #[error(transparent)]
    Violation(#[from] Violation),
    /// Reading the stream failed.
    #[error("reading the Tick's stdout failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Splits a byte stream into lines, enforcing the line limit.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Start of the unconsumed part of `buf`.
    start: usize,
    /// How far past `start` we already know there is no newline.
    scanned: usize,
    limit: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Wraps a stream with the protocol's line limit.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_LINE_BYTES)
    }

    /// Wraps a stream with another limit (tests use small ones).
    pub fn with_limit(inner: R, limit: usize) -> Self {
        LineReader {
            inner,
            buf: Vec::with_capacity(CHUNK),
            start: 0,
            scanned: 0,
            limit,
        }
    }

    /// The bytes read but not yet returned as a line: after an
    /// [`Violation::Unterminated`], the unterminated tail.
    pub fn rest(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// The next line without its newline; `Ok(None)` at a clean end of stream.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            let pending = &self.buf[self.start..];
            if let Some(pos) = pending[self.scanned..].iter().position(|&b| b == b'\n') {
                let end = self.start + self.scanned + pos;
                if end - self.start > self.limit {
                    return Err(Violation::LineTooLong { limit: self.limit }.into());
                }
                let line = self.buf[self.start..end].to_vec();
                self.start = end + 1;
                self.scanned = 0;
                return Ok(Some(line));
            }
            self.scanned = pending.len();
            if self.scanned > self.limit {
                return Err(Violation::LineTooLong { limit: self.limit }.into());
            }
            // Compact before growing so a long session of short lines reuses
            // one buffer instead of creeping upward.
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            // Read into spare capacity: no zeroing of a fresh chunk per read,
            // which matters when a Tick sends many short lines.
            self.buf.reserve(CHUNK);
            let n = self.inner.read_buf(&mut self.buf).await?;
            if n == 0 {
                let rest = self.buf.len() - self.start;
                if rest > 0 {
                    return Err(Violation::Unterminated { bytes: rest }.into());
                }
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut r = LineReader::with_limit(input, limit);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().await? {
            out.push(l);
        }
        Ok(out)
    }

    #[tokio::test]
    async fn splits_on_newlines() {
        assert_eq!(
            lines(b"a\nbb\n\n", 10).await.unwrap(),
            vec![b"a".to_vec(), b"bb".to_vec(), vec![]]
        );
    }

    #[tokio::test]
    async fn missing_final_newline_is_a_violation() {
        let e = lines(b"a\nbb", 10).await.unwrap_err();
        assert!(
            matches!(
                e,
                FrameError::Violation(Violation::Unterminated { bytes: 2 })
            ),
            "{e}"
        );
    }

    #[tokio::test]
    async fn the_limit_excludes_the_newline() {
        assert!(lines(b"12345\n", 5).await.is_ok());
        let e = lines(b"123456\n", 5).await.unwrap_err();
        assert!(matches!(
            e,
            FrameError::Violation(Violation::LineTooLong { .. })
        ));
        // Without any newline the reader gives up once past the limit rather
        // than buffering the whole stream.
        let flood = vec![b'x'; 3 * CHUNK];
        let e = lines(&flood, CHUNK).await.unwrap_err();
        assert!(matches!(
            e,
            FrameError::Violation(Violation::LineTooLong { .. })
        ));
    }
}
