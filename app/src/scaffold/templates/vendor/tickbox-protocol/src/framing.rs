//! Newline framing with a hard line limit, as a synchronous core.
//!
//! [`LineFramer`] owns a buffer: a reader (blocking, async, or a fuzzer)
//! appends bytes with [`LineFramer::push`] or reads straight into
//! [`LineFramer::read_buffer`], then takes complete lines with
//! [`LineFramer::next_line`] until it returns `Ok(None)`, and calls
//! [`LineFramer::finish`] at end of stream.
//!
//! The framer gives up on an unfinished line as soon as it is longer than
//! its limit, so its buffer stays within about twice the limit (it grows by
//! doubling) plus one read, and a peer that writes forever without a newline
//! costs bounded memory and ends its session instead of the host's. Bytes
//! already scanned are never scanned again, so a line arriving one byte at a
//! time costs linear work, not quadratic.
//!
//! ```
//! use tickbox_protocol::framing::LineFramer;
//! let mut f = LineFramer::with_limit(16);
//! f.push(b"{\"a\":1}\n{\"b\"");
//! assert_eq!(f.next_line().unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
//! assert_eq!(f.next_line().unwrap(), None); // waiting for the rest
//! f.push(b":2}\n");
//! assert_eq!(f.next_line().unwrap().as_deref(), Some(&b"{\"b\":2}"[..]));
//! assert!(f.finish().is_ok());
//! ```

use crate::limits::MAX_LINE_BYTES;
use crate::message::Violation;

/// How much spare room [`LineFramer::read_buffer`] makes before each read.
pub const READ_CHUNK: usize = 64 * 1024;

/// Splits a byte stream into lines, enforcing a line limit.
#[derive(Debug)]
pub struct LineFramer {
    buf: Vec<u8>,
    /// Start of the unconsumed part of `buf`.
    start: usize,
    /// How far past `start` we already know there is no newline.
    scanned: usize,
    limit: usize,
    /// Set once a line broke the limit: the stream cannot be resynchronised.
    failed: bool,
}

impl Default for LineFramer {
    fn default() -> Self {
        Self::new()
    }
}

impl LineFramer {
    /// A framer with the protocol's line limit ([`MAX_LINE_BYTES`]).
    pub fn new() -> Self {
        Self::with_limit(MAX_LINE_BYTES)
    }

    /// A framer with another limit (tests and the checker use small ones).
    pub fn with_limit(limit: usize) -> Self {
        LineFramer {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            limit,
            failed: false,
        }
    }

    /// The line limit, newline excluded.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes received and not yet returned as a line.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The unterminated tail: bytes received after the last newline.
    pub fn tail(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// The buffer to read into: compacted, with at least [`READ_CHUNK`] bytes
    /// of spare capacity. Append only (e.g. with `read_buf`); reading into
    /// spare capacity avoids zeroing a fresh chunk per read.
    pub fn read_buffer(&mut self) -> &mut Vec<u8> {
        self.compact();
        self.buf.reserve(READ_CHUNK);
        &mut self.buf
    }

    /// The next complete line without its newline, `Ok(None)` if more bytes
    /// are needed, or the violation if the pending line is over the limit.
    pub fn next_line(&mut self) -> Result<Option<Vec<u8>>, Violation> {
        if self.failed {
            return Err(Violation::LineTooLong { limit: self.limit });
        }
        let pending = &self.buf[self.start..];
        match pending[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(pos) => {
                let len = self.scanned + pos;
                if len > self.limit {
                    self.failed = true;
                    return Err(Violation::LineTooLong { limit: self.limit });
                }
                let line = pending[..len].to_vec();
                self.start += len + 1;
                self.scanned = 0;
                Ok(Some(line))
            }
            None => {
                self.scanned = pending.len();
                if self.scanned > self.limit {
                    self.failed = true;
                    return Err(Violation::LineTooLong { limit: self.limit });
                }
                Ok(None)
            }
        }
    }

    /// At end of stream: a clean end, or the unterminated tail (§3.6).
    pub fn finish(&self) -> Result<(), Violation> {
        match self.pending() {
            0 => Ok(()),
            bytes => Err(Violation::Unterminated { bytes }),
        }
    }

    /// Drops consumed bytes so a long session of short lines reuses one
    /// buffer instead of creeping upward.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize, step: usize) -> Result<Vec<Vec<u8>>, Violation> {
        let mut f = LineFramer::with_limit(limit);
        let mut out = Vec::new();
        for chunk in input.chunks(step.max(1)) {
            f.push(chunk);
            while let Some(l) = f.next_line()? {
                out.push(l);
            }
        }
        f.finish()?;
        Ok(out)
    }

    #[test]
    fn splits_on_newlines_whatever_the_chunking() {
        for step in [1, 2, 3, 100] {
            assert_eq!(
                lines(b"a\nbb\n\n", 10, step).unwrap(),
                vec![b"a".to_vec(), b"bb".to_vec(), vec![]]
            );
        }
    }

    #[test]
    fn missing_final_newline_is_a_violation() {
        let e = lines(b"a\nbb", 10, 100).unwrap_err();
        assert_eq!(e, Violation::Unterminated { bytes: 2 });
    }

    #[test]
    fn the_limit_excludes_the_newline() {
        assert!(lines(b"12345\n", 5, 1).is_ok());
        assert!(matches!(
            lines(b"123456\n", 5, 100),
            Err(Violation::LineTooLong { limit: 5 })
        ));
        // Without any newline the framer gives up once past the limit rather
        // than buffering the whole stream.
        let mut f = LineFramer::with_limit(READ_CHUNK);
        let mut fed = 0;
        loop {
            f.push(&[b'x'; 4096]);
            fed += 4096;
            if f.next_line().is_err() {
                break;
            }
            assert!(fed <= 2 * READ_CHUNK, "kept buffering past the limit");
        }
        assert!(f.pending() <= READ_CHUNK + 4096);
        // And it stays failed: the stream cannot be resynchronised.
        f.push(b"\n{}\n");
        assert!(f.next_line().is_err());
    }
}
