//! Async line reading over [`tickbox_protocol::framing::LineFramer`].
//!
//! The framing rule itself (the limit, the unterminated tail) lives in the
//! protocol crate; this is only the tokio wrapper the session and the checker
//! read a Tick's stdout with, so both frame exactly alike.

use tickbox_protocol::framing::LineFramer;
use tickbox_protocol::Violation;
use tokio::io::{AsyncRead, AsyncReadExt};

/// What went wrong reading a line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    framer: LineFramer,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Wraps a stream with the protocol's line limit.
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            framer: LineFramer::new(),
        }
    }

    /// Wraps a stream with another limit (tests use small ones).
    pub fn with_limit(inner: R, limit: usize) -> Self {
        LineReader {
            inner,
            framer: LineFramer::with_limit(limit),
        }
    }

    /// The bytes read but not yet returned as a line: after an
    /// [`Violation::Unterminated`], the unterminated tail.
    pub fn rest(&self) -> &[u8] {
        self.framer.tail()
    }

    /// The next line without its newline; `Ok(None)` at a clean end of stream.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, FrameError> {
        loop {
            if let Some(line) = self.framer.next_line()? {
                return Ok(Some(line));
            }
            let n = self.inner.read_buf(self.framer.read_buffer()).await?;
            if n == 0 {
                self.framer.finish()?;
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
    async fn reads_lines_and_reports_the_tail() {
        assert_eq!(
            lines(b"a\nbb\n\n", 10).await.unwrap(),
            vec![b"a".to_vec(), b"bb".to_vec(), vec![]]
        );
        let e = lines(b"a\nbb", 10).await.unwrap_err();
        assert!(
            matches!(
                e,
                FrameError::Violation(Violation::Unterminated { bytes: 2 })
            ),
            "{e}"
        );
        let flood = vec![b'x'; 300 * 1024];
        let e = lines(&flood, 64 * 1024).await.unwrap_err();
        assert!(matches!(
            e,
            FrameError::Violation(Violation::LineTooLong { .. })
        ));
    }
}
