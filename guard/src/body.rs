//! Request bodies, read whole within bounds: bytes (the server's own
//! bound, checked against `Content-Length` before anything is read),
//! time ([`BODY_TIMEOUT`](crate::limits::BODY_TIMEOUT) is the usual
//! one), and for JSON its nesting ([`MAX_BODY_DEPTH`]) and its count of
//! values ([`MAX_BODY_VALUES`]), both counted by a scan of the bytes as
//! they arrive, before anything is built from them: a parsed JSON value
//! costs tens of bytes however short its text, so the value cap, not the
//! byte size, is what bounds the memory a body costs its parser.

use crate::limits::{MAX_BODY_DEPTH, MAX_BODY_VALUES, MAX_DRAIN_BYTES};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use std::time::Duration;

/// Why a request body is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// Over the byte bound given to [`read_body`].
    #[error("request body too large: over {0} bytes (the limit)")]
    TooLarge(usize),
    /// Nested deeper than [`MAX_BODY_DEPTH`].
    #[error(
        "request body too deep: arrays and objects nest over {MAX_BODY_DEPTH} levels (the limit)"
    )]
    TooDeep,
    /// More than [`MAX_BODY_VALUES`] JSON values.
    #[error("request body too large: over {MAX_BODY_VALUES} JSON values (the limit)")]
    TooManyValues,
    /// The connection failed while the body was read.
    #[error("cannot read the request body: {0}")]
    Read(String),
    /// Not all there within the time given to [`read_body`].
    #[error("request body too slow: not all there {0:?} after its head (the limit)")]
    Slow(Duration),
}

/// A scan of JSON text that counts values and nesting without building
/// anything, fed chunk by chunk as the body arrives.
#[derive(Default)]
struct Shape {
    depth: usize,
    values: usize,
    in_string: bool,
    escaped: bool,
}

impl Shape {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), BodyError> {
        for &b in bytes {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'[' | b'{' => {
                    self.depth += 1;
                    if self.depth > MAX_BODY_DEPTH {
                        return Err(BodyError::TooDeep);
                    }
                    self.count()?;
                }
                b']' | b'}' => self.depth = self.depth.saturating_sub(1),
                b',' | b':' => self.count()?,
                _ => {}
            }
        }
        Ok(())
    }

    fn count(&mut self) -> Result<(), BodyError> {
        self.values += 1;
        if self.values > MAX_BODY_VALUES {
            return Err(BodyError::TooManyValues);
        }
        Ok(())
    }
}

/// The whole body, within `max` bytes, [`MAX_BODY_DEPTH`] and
/// [`MAX_BODY_VALUES`], all there within `within`; refused as soon as a
/// bound is passed. Every server behind the door that takes JSON bodies
/// reads them here (MCP's, `tickbox inspect`'s actions).
pub async fn read_body<B>(
    headers: &hyper::HeaderMap,
    mut body: B,
    within: Duration,
    max: usize,
) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let deadline = tokio::time::Instant::now() + within;
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge(max));
    }
    let mut collected = BytesMut::with_capacity(declared.unwrap_or(0) as usize);
    let mut shape = Shape::default();
    loop {
        let Ok(frame) = tokio::time::timeout_at(deadline, body.frame()).await else {
            return Err(BodyError::Slow(within));
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.len() > max - collected.len() {
            return Err(BodyError::TooLarge(max));
        }
        if let Err(e) = shape.feed(&data) {
            let _ =
                tokio::time::timeout_at(deadline, drain(body, collected.len() + data.len())).await;
            return Err(e);
        }
        collected.extend_from_slice(&data);
    }
    Ok(collected.freeze())
}

/// Reads and drops the rest of a refused body, up to [`MAX_DRAIN_BYTES`]
/// in all: closing a socket with unread data resets it, and the client
/// could lose the answer that says why.
async fn drain<B>(mut body: B, mut seen: usize)
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            seen += data.len();
            if seen > MAX_DRAIN_BYTES {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use hyper::body::Frame;
    use hyper::header::{HeaderValue, CONTENT_LENGTH};
    use std::convert::Infallible;

    fn read(text: &str, max: usize) -> Result<Bytes, BodyError> {
        let body = Full::new(Bytes::from(text.to_string()));
        let none = hyper::HeaderMap::new();
        let run = read_body(&none, body, BODY_WAIT, max);
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime")
            .block_on(run)
    }

    const BODY_WAIT: Duration = Duration::from_secs(5);

    #[test]
    fn a_body_over_its_bytes_is_refused_and_one_within_is_read() {
        assert!(matches!(
            read(&"1".repeat(11), 10),
            Err(BodyError::TooLarge(10))
        ));
        assert_eq!(read(&"1".repeat(10), 10).unwrap().len(), 10);
    }

    #[test]
    fn a_declared_length_over_the_bound_is_refused_before_reading() {
        let mut headers = hyper::HeaderMap::new();
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("11"));
        // A body that would fail if read: the refusal comes first.
        let never = Never;
        let run = read_body(&headers, never, BODY_WAIT, 10);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        assert!(matches!(rt.block_on(run), Err(BodyError::TooLarge(10))));
        // Positive control: the same header within the bound is believed.
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("2"));
        let body = Full::new(Bytes::from_static(b"{}"));
        assert_eq!(
            rt.block_on(read_body(&headers, body, BODY_WAIT, 10))
                .unwrap(),
            "{}"
        );
    }

    /// A body that never sends a frame and never ends.
    struct Never;
    impl hyper::body::Body for Never {
        type Data = Bytes;
        type Error = Infallible;
        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            std::task::Poll::Pending
        }
    }

    #[test]
    fn nesting_past_the_depth_is_refused_and_at_it_is_read() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let max = MAX_DRAIN_BYTES;
        assert!(matches!(
            read(&deep(MAX_BODY_DEPTH + 1), max),
            Err(BodyError::TooDeep)
        ));
        assert!(read(&deep(MAX_BODY_DEPTH), max).is_ok());
        // Brackets inside a string are text, not nesting.
        let quoted = format!("[\"{}\"]", "[".repeat(MAX_BODY_DEPTH * 2));
        assert!(read(&quoted, max).is_ok());
    }

    #[test]
    fn values_past_the_count_are_refused_and_at_it_are_read() {
        let list = |n: usize| format!("[{}]", vec!["1"; n].join(","));
        let max = MAX_DRAIN_BYTES;
        // `[` counts one value and each comma one more.
        assert!(matches!(
            read(&list(MAX_BODY_VALUES + 1), max),
            Err(BodyError::TooManyValues)
        ));
        assert!(read(&list(MAX_BODY_VALUES), max).is_ok());
    }

    #[test]
    fn a_body_slower_than_its_time_is_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        let within = Duration::from_secs(1);
        let none = hyper::HeaderMap::new();
        let run = read_body(&none, Never, within, 10);
        assert!(matches!(rt.block_on(run), Err(BodyError::Slow(w)) if w == within));
        // Positive control: a whole body within the same time is read.
        let body = Full::new(Bytes::from_static(b"[]"));
        let run = read_body(&none, body, within, 10);
        assert!(rt.block_on(run).is_ok());
    }
}
