//! The timeline: the frames the inspector can see, kept in a bounded ring.
//!
//! For a Tick the inspector started, that is every frame between the host
//! and the Tick, seen by taps on the Tick's stdin and stdout. For a live
//! instance it is the frames of the live socket between the inspector and
//! the instance's host ([`Timeline::record`], from `live`): the host↔Tick
//! protocol belongs to the other process and is not visible here.
//!
//! A tap (the host's [`FrameTap`], handing [`Frames`] each whole line)
//! changes nothing it carries: it copies each whole line's head (at most
//! [`super::FRAME_HOLD_BYTES`]) and counts the rest, so a Tick's huge
//! frame costs the timeline a bounded amount. What is kept of a frame is
//! its direction, method, id, size, time, the latency of a response (from
//! the request with its id) and a preview escaped by the one character
//! policy; the ring holds [`super::MAX_TIMELINE_FRAMES`] and counts what it
//! dropped.

use serde::Serialize;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tickbox_host::tap::{FrameSink, FrameTap};
use tickbox_host::text;
use tickbox_host::util::lock;
use tokio::sync::broadcast;

/// Which way a frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Dir {
    /// Host → Tick (its stdin).
    #[serde(rename = "to tick")]
    ToTick,
    /// Tick → host (its stdout).
    #[serde(rename = "from tick")]
    FromTick,
    /// Inspector → a live instance's host (its socket).
    #[serde(rename = "to host")]
    ToHost,
    /// A live instance's host → inspector.
    #[serde(rename = "from host")]
    FromHost,
}

impl Dir {
    /// The way an answer to a request sent this way comes back.
    fn back(self) -> Dir {
        match self {
            Dir::ToTick => Dir::FromTick,
            Dir::FromTick => Dir::ToTick,
            Dir::ToHost => Dir::FromHost,
            Dir::FromHost => Dir::ToHost,
        }
    }
}

/// What a frame is to the pairing of requests and responses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// It asks and waits for an answer with its id.
    Request,
    /// It answers the request with its id, which went the other way.
    Response,
    /// Neither (a notification, a frame of a stream).
    Other,
}

/// One frame as the page shows it. Every string is the Tick's and escaped.
#[derive(Debug, Clone, Serialize)]
pub struct FrameRecord {
    /// Its number since the start (the first is 1).
    pub n: u64,
    pub dir: Dir,
    /// `method` of a request or notification; empty for a response.
    pub method: String,
    /// `id`, as JSON text, when it has one.
    pub id: Option<String>,
    /// The line's size in bytes, newline excluded.
    pub size: usize,
    /// Milliseconds since the inspector started.
    pub t_ms: u64,
    /// For a response: milliseconds since the request with its id.
    pub latency_ms: Option<u64>,
    /// The start of the line, escaped.
    pub preview: String,
}

/// The ring of frames and the stream of new ones.
pub struct Timeline {
    started: Instant,
    /// Held by a tap on stdin from before its write until the frame is
    /// recorded, and by a tap on stdout before it records: the Tick cannot
    /// answer a request before the request is written, so its response is
    /// never recorded before the request (which would lose its latency).
    order: Mutex<()>,
    inner: Mutex<Ring>,
    events: broadcast::Sender<FrameRecord>,
}

#[derive(Default)]
struct Ring {
    next: u64,
    frames: VecDeque<FrameRecord>,
    dropped: u64,
    /// Requests waiting for a response, by direction and id text, with
    /// when they were sent (bounded like the ring).
    pending: HashMap<(Dir, String), Instant>,
}

impl Timeline {
    pub fn new() -> Arc<Timeline> {
        Arc::new(Timeline {
            started: Instant::now(),
            order: Mutex::new(()),
            inner: Mutex::new(Ring::default()),
            events: broadcast::channel(super::EVENT_QUEUE).0,
        })
    }

    /// Frames kept now (oldest first) and how many were dropped before them.
    pub fn snapshot(&self) -> (Vec<FrameRecord>, u64) {
        let ring = lock(&self.inner);
        (ring.frames.iter().cloned().collect(), ring.dropped)
    }

    /// New frames as they pass.
    pub fn subscribe(&self) -> broadcast::Receiver<FrameRecord> {
        self.events.subscribe()
    }

    /// One whole protocol line of `len` bytes whose head is `head`: its
    /// method and id are read from the JSON, if it is JSON.
    fn frame(&self, dir: Dir, head: &[u8], len: usize) {
        #[derive(serde::Deserialize)]
        struct Head {
            method: Option<String>,
            id: Option<Value>,
        }
        let parsed = serde_json::from_slice::<Head>(head).ok();
        let method = parsed
            .as_ref()
            .and_then(|h| h.method.as_deref())
            .unwrap_or_default();
        let id = parsed
            .as_ref()
            .and_then(|h| h.id.as_ref())
            .map(Value::to_string);
        let kind = match (method.is_empty(), &id) {
            (false, Some(_)) => Kind::Request,
            (true, Some(_)) => Kind::Response,
            _ => Kind::Other,
        };
        self.record(
            dir,
            kind,
            method,
            id.as_deref(),
            len,
            &String::from_utf8_lossy(head),
        );
    }

    /// Records one frame. `method`, `id` and `preview` may be the Tick's
    /// (or carry its text): they are cut and escaped here, so every caller
    /// gets the same policy.
    pub fn record(
        &self,
        dir: Dir,
        kind: Kind,
        method: &str,
        id: Option<&str>,
        size: usize,
        preview: &str,
    ) {
        let now = Instant::now();
        let method = text::escape(text::truncate(method, super::FRAME_PREVIEW_CHARS));
        let id = id.map(|id| text::escape(text::truncate(id, 64)));
        let preview = text::escape(text::truncate(preview, super::FRAME_PREVIEW_CHARS));
        let mut ring = lock(&self.inner);
        let mut latency_ms = None;
        if let Some(id) = &id {
            match kind {
                Kind::Response => {
                    latency_ms = ring
                        .pending
                        .remove(&(dir.back(), id.clone()))
                        .map(|t| now.duration_since(t).as_millis() as u64);
                }
                Kind::Request => {
                    if ring.pending.len() >= super::MAX_TIMELINE_FRAMES {
                        ring.pending.clear();
                    }
                    ring.pending.insert((dir, id.clone()), now);
                }
                Kind::Other => {}
            }
        }
        ring.next += 1;
        let record = FrameRecord {
            n: ring.next,
            dir,
            method,
            id,
            size,
            t_ms: now.duration_since(self.started).as_millis() as u64,
            latency_ms,
            preview,
        };
        if ring.frames.len() >= super::MAX_TIMELINE_FRAMES {
            ring.frames.pop_front();
            ring.dropped += 1;
        }
        ring.frames.push_back(record.clone());
        drop(ring);
        // No subscriber (no page open) is not an error.
        let _ = self.events.send(record);
    }
}

/// The timeline's end of a tap on one of a Tick's streams: each whole
/// frame that passes one way ([`Timeline::tap`]).
pub struct Frames {
    timeline: Arc<Timeline>,
    dir: Dir,
}

impl FrameSink for Frames {
    const HOLD_BYTES: usize = super::FRAME_HOLD_BYTES;

    fn frame(&self, head: &[u8], len: usize) {
        self.timeline.frame(self.dir, head, len);
    }

    /// Under the timeline's order lock (see [`Timeline`]'s `order`): a
    /// response is never recorded before its request.
    fn in_order<R>(&self, f: impl FnOnce() -> R) -> R {
        let _order = lock(&self.timeline.order);
        f()
    }
}

impl Timeline {
    /// A Tick's stdin or stdout with each whole line it carries recorded
    /// here as going `dir`; the bytes pass unchanged.
    pub fn tap<T>(self: &Arc<Timeline>, inner: T, dir: Dir) -> FrameTap<T, Frames> {
        FrameTap::new(
            inner,
            Frames {
                timeline: self.clone(),
                dir,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_kept_with_latency_escaped_and_bounded() {
        let t = Timeline::new();
        let mut to = t.tap(Vec::<u8>::new(), Dir::ToTick);
        let mut from = t.tap(Vec::<u8>::new(), Dir::FromTick);
        to.see(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tick/read\"}\n");
        from.see(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"res");
        from.see(b"ult\":{\"seq\":0,\"data\":\"x\"}}\n");
        // Not JSON, with raw controls: kept, escaped, with no method or id.
        from.see(b"\x1b]2;title\x07\xe2\x80\xae\n");
        let (frames, dropped) = t.snapshot();
        assert_eq!((frames.len(), dropped), (3, 0));
        assert_eq!(frames[0].method, "tick/read");
        assert_eq!(frames[1].id.as_deref(), Some("1"));
        assert!(frames[1].latency_ms.is_some(), "{frames:?}");
        assert_eq!(
            (frames[2].method.as_str(), frames[2].id.as_deref()),
            ("", None)
        );
        assert!(
            !frames[2].preview.contains(['\x1b', '\x07', '\u{202e}']),
            "{frames:?}"
        );
        assert!(frames[2].preview.contains("title"), "{frames:?}");
        for _ in 0..super::super::MAX_TIMELINE_FRAMES {
            from.see(b"{\"method\":\"tick/update\"}\n");
        }
        let (frames, dropped) = t.snapshot();
        assert_eq!(frames.len(), super::super::MAX_TIMELINE_FRAMES);
        assert_eq!(dropped, 3);
    }
}
