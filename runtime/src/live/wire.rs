//! The live-instance socket protocol.
//!
//! Both directions carry frames: a one-byte tag, a 4-byte big-endian length
//! and that many bytes of payload (at most [`MAX_FRAME`]).
//!
//! | tag | payload | direction |
//! |---|---|---|
//! | `J` | one JSON value | both |
//! | `O` | terminal output bytes | host → view |
//! | `K` | key bytes | view → host |
//!
//! A connection starts with one `J` [`Request`] from the client. One-shot
//! requests (`info`, `describe`, `read`, `screen`, `call`, `stop`) get one
//! [`Reply`] and the connection closes. A stream request gets a first reply,
//! then:
//!
//! - `attach`: `O` frames, starting with a repaint of the current screen
//!   (from the screen model) followed by live output; the client sends `K`
//!   frames and `J` [`Reply::Resize`]; the host ends with [`Reply::Ended`]
//!   when the Tick's session is over;
//! - `watch`: `J` [`Reply::Delivery`] frames, then [`Reply::Ended`].
//!
//! ```text
//! client → J {"op":"attach","cols":80,"rows":24}
//! host   → J {"ok":{"id":"3f9a1c","name":"counter",...}}
//! host   → O "\x1b[H\x1b[J...Counter: 2..."      (the repaint)
//! client → K "+"
//! host   → O "...Counter: 3..."                   (live output)
//! client → J {"resize":{"cols":100,"rows":40}}
//! host   → J {"ended":{"reason":"the Tick ended: exit status 0"}}
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest frame either side accepts: a call result (8 MiB) plus room.
pub const MAX_FRAME: usize = 9 * 1024 * 1024;

/// The longest call timeout a client may ask the host for (one day).
pub const MAX_CALL_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// One frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A JSON value.
    Json(Value),
    /// Terminal output.
    Output(Vec<u8>),
    /// Keys.
    Keys(Vec<u8>),
}

/// What a client asks for, in its first frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// The instance's [`super::InstanceInfo`].
    Info,
    /// A fresh tick/describe: the raw descriptor.
    Describe,
    /// A fresh tick/read: the state.
    Read,
    /// The view's screen as text.
    Screen,
    /// A tick/call, prepared and approved by the client against `revision`.
    Call {
        tool: String,
        args: Value,
        revision: String,
        /// The client's call timeout (at most [`MAX_CALL_TIMEOUT_MS`]); the
        /// host's own when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    /// Become a view; the size is the client's terminal's.
    Attach { cols: u16, rows: u16 },
    /// Stream deliveries at most once per `interval_ms`.
    Watch { interval_ms: u64 },
    /// End the Tick's session (the Tick is terminated).
    Stop,
}

/// Why the host refused or failed a request; decides the client's exit code.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request itself was wrong (unknown tool, bad args).
    Usage,
    /// The session failed or has ended.
    Session,
    /// The peer check refused the connection.
    Refused,
}

/// How a call ended, as the host classified it (see [`crate::session::CallOutcome`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CallReply {
    /// The tool's result.
    Ok { result: Value },
    /// The tool's error; `executed` says whether it may have had effects.
    Failed {
        code: i64,
        message: String,
        data: Option<Value>,
        executed: bool,
    },
    /// Nobody knows whether it took effect; it was not resent.
    Unknown { reason: String },
}

impl From<crate::session::CallOutcome> for CallReply {
    fn from(outcome: crate::session::CallOutcome) -> CallReply {
        use crate::session::CallOutcome;
        match outcome {
            CallOutcome::Ok(result) => CallReply::Ok { result },
            CallOutcome::Failed { error, executed } => CallReply::Failed {
                code: error.code,
                message: error.message,
                data: error.data,
                executed,
            },
            CallOutcome::Unknown(reason) => CallReply::Unknown {
                reason: reason.to_string(),
            },
        }
    }
}

/// A `J` frame after the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Success, with the result.
    Ok(Value),
    /// Failure.
    Error { kind: ErrorKind, message: String },
    /// The session is over.
    Ended { reason: String },
    /// One watch delivery ([`crate::delivery::Delivery`]).
    Delivery(Value),
    /// The view's terminal changed size (client → host).
    Resize { cols: u16, rows: u16 },
}

/// Why reading a frame failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The connection failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer broke the frame format.
    #[error("{0}")]
    Bad(String),
}

/// Reads one frame; `Ok(None)` on a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<Frame>, WireError> {
    let mut head = [0u8; 5];
    match r.read_exact(&mut head[..1]).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    r.read_exact(&mut head[1..]).await?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(WireError::Bad(format!(
            "a frame of {len} bytes is over the {MAX_FRAME}-byte limit"
        )));
    }
    // Grown as bytes arrive, not allocated from the header: a peer that
    // announces 9 MiB and sends 5 bytes costs 5 bytes.
    let mut body = Vec::with_capacity(len.min(64 * 1024));
    (&mut *r).take(len as u64).read_to_end(&mut body).await?;
    if body.len() < len {
        return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
    }
    match head[0] {
        b'J' => serde_json::from_slice(&body)
            .map(|v| Some(Frame::Json(v)))
            .map_err(|e| WireError::Bad(format!("a J frame is not JSON: {e}"))),
        b'O' => Ok(Some(Frame::Output(body))),
        b'K' => Ok(Some(Frame::Keys(body))),
        t => Err(WireError::Bad(format!("unknown frame tag {t:#04x}"))),
    }
}

/// Writes one frame and flushes.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &Frame) -> std::io::Result<()> {
    let (tag, body): (u8, std::borrow::Cow<[u8]>) = match frame {
        Frame::Json(v) => (b'J', serde_json::to_vec(v).unwrap_or_default().into()),
        Frame::Output(b) => (b'O', b.as_slice().into()),
        Frame::Keys(b) => (b'K', b.as_slice().into()),
    };
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_FRAME)
        .ok_or_else(|| std::io::Error::other("frame too large"))?;
    let mut buf = Vec::with_capacity(5 + body.len());
    buf.push(tag);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf).await?;
    w.flush().await
}

/// Writes a serializable value as a `J` frame.
pub async fn write_json<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    v: &T,
) -> std::io::Result<()> {
    let v = serde_json::to_value(v).map_err(std::io::Error::other)?;
    write_frame(w, &Frame::Json(v)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn frames_round_trip_and_bad_ones_are_errors() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        for f in [
            Frame::Json(json!({"op": "info"})),
            Frame::Output(b"\x1b[Hhi".to_vec()),
            Frame::Keys(vec![]),
        ] {
            write_frame(&mut a, &f).await.unwrap();
            assert_eq!(read_frame(&mut b).await.unwrap(), Some(f));
        }
        a.write_all(b"X\0\0\0\0").await.unwrap();
        assert!(read_frame(&mut b).await.is_err());
        a.write_all(b"J\xff\xff\xff\xff").await.unwrap();
        let e = read_frame(&mut b).await.unwrap_err().to_string();
        assert!(e.contains("limit"), "{e}");
        drop(a);
        let mut rest = Vec::new();
        let _ = b.read_to_end(&mut rest).await;
    }

    #[test]
    fn requests_and_replies_have_a_stable_shape() {
        let r: Request =
            serde_json::from_value(json!({"op":"attach","cols":80,"rows":24})).unwrap();
        assert_eq!(r, Request::Attach { cols: 80, rows: 24 });
        assert_eq!(
            serde_json::to_value(Reply::Ended { reason: "x".into() }).unwrap(),
            json!({"ended": {"reason": "x"}})
        );
        assert_eq!(
            serde_json::to_value(CallReply::Unknown { reason: "t".into() }).unwrap(),
            json!({"outcome": "unknown", "reason": "t"})
        );
    }
}
