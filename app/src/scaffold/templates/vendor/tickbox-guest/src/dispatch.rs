//! The platform-independent heart of the SDK: one Tick, its protocol duties
//! and its timers, driven by events.
//!
//! The platform loops (`platform::native`, `platform::wasm`) only wait for
//! events and feed them in: a protocol line, key bytes, a resize, the clock.
//! Everything the protocol requires happens here, in one thread:
//!
//! - every request with a usable id gets exactly one response; lines that do
//!   not parse, or have no unsigned integer id, are dropped without a reply
//!   (never `id: null`, §3.2);
//! - after every event the author's state is serialized and compared with the
//!   last one; only a difference bumps `seq` and emits `tick/update` (§8.3),
//!   so redraws, resizes and reads never do. `tick/read` returns the current
//!   `seq`, which is never below the last update's (§6.3);
//! - after every event the catalog is rebuilt from `Tick::tools`; any change
//!   gets a new revision (§5.5), and calls against another revision get
//!   -32004 without running (§7.2);
//! - each frame is handed to the output sink whole, newline included, so
//!   frames never interleave or end without a newline (§3.1). In wasm the
//!   frames answering the lines of one read ([`Runtime::input`]) go out
//!   together in one call after the last of those lines, in the order they
//!   were made; a batch that reaches [`MAX_HELD`] bytes goes out at that
//!   frame boundary. With several requests in flight that is one WASI
//!   write per read instead of one per frame, which saves the host's CPU
//!   (the guest runs in its process); a lone request is answered as soon as
//!   it is handled. The native loop writes each frame at once: there the
//!   host and the Tick run in parallel, so the host reads one answer while
//!   the Tick makes the next, and a held batch would only make it wait;
//! - the view is redrawn after every key, timer, resize and mutating call.
//!   After a read-only call ([`crate::Effect::ReadOnly`], which promises to
//!   change nothing) it is redrawn only when the state or the catalog
//!   changed anyway, or the tool asked for it with [`Ctx::redraw`]: a
//!   ratatui redraw renders and compares every cell of the view, which was
//!   most of a read-only call's cost (BENCHMARKS.md, MCP section).
//!
//! Because handlers run on this one thread, `tick/describe` and `tick/read`
//! wait for at most the event being handled; handlers must stay short, and
//! longer work is split into timer steps that report through updates (§7.3).

use crate::catalog::{ToolError, Tools};
use crate::ctx::Ctx;
use crate::draw::AnsiBackend;
use crate::key;
use crate::{Newest, Tick};
use serde_json::{json, Map, Value};
use std::rc::Rc;
use std::time::Instant;

/// The protocol version this SDK implements.
pub const PROTOCOL: u64 = tickbox_protocol::limits::PROTOCOL_VERSION;
/// `tick/update` params and the `tick/describe` result may not exceed this
/// when encoded (§5.3, §8.2); the protocol crate holds both limits.
pub const MAX_ENCODED: usize = {
    use tickbox_protocol::limits::{MAX_DESCRIPTOR_BYTES, MAX_UPDATE_BYTES};
    if MAX_DESCRIPTOR_BYTES < MAX_UPDATE_BYTES {
        MAX_DESCRIPTOR_BYTES
    } else {
        MAX_UPDATE_BYTES
    }
};
/// What the SDK actually allows: the host measures after re-encoding, and
/// numbers can grow in the process (§3.5), so keep some headroom.
pub const SAFE_ENCODED: usize = MAX_ENCODED - 16 * 1024;
/// The most bytes of frames held back while the lines of one read are
/// handled (see [`Runtime::hold`]): a batch that reaches it is written out at
/// once, at a frame boundary, so holding never costs more memory than this
/// beyond the frame being made.
pub const MAX_HELD: usize = 64 * 1024;
/// Error codes the SDK sends (docs/PROTOCOL.md lists them), from the protocol crate.
pub mod codes {
    pub use tickbox_protocol::codes::{
        INTERNAL_ERROR as INTERNAL, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
        REVISION_MISMATCH as REVISION_CHANGED,
    };
}

/// Writes one complete frame (newline included) to the protocol output.
pub(crate) type Output = Box<dyn FnMut(&[u8]) -> std::io::Result<()>>;
/// Shows an author-facing problem (stderr, which is the view).
pub(crate) type Report = Box<dyn FnMut(&str)>;

/// One running Tick.
pub(crate) struct Runtime<T: Tick> {
    tick: T,
    ctx: Ctx,
    tools: Tools<T>,
    catalog: Vec<Value>,
    revision: u64,
    seq: u64,
    data: Value,
    encoded: String,
    out: Output,
    /// Frames made while holding (between [`Runtime::hold`] and
    /// [`Runtime::release`]), not yet written; `None` writes through.
    held: Option<Vec<u8>>,
    report: Report,
    terminal: Option<ratatui::Terminal<AnsiBackend>>,
    closed: bool,
    /// Keeps a key sequence split across two reads of the view's input.
    keys: key::Decoder,
}

impl<T: Tick> Runtime<T> {
    /// Starts `tick`: runs `on_start`, then takes its state as seq 0 and its
    /// catalog as revision "1". Nothing is sent until the host asks.
    pub fn new(
        tick: T,
        size: (u16, u16),
        out: Output,
        report: Report,
        draw: Option<crate::draw::Sink>,
    ) -> Runtime<T> {
        let terminal = draw.and_then(|sink| {
            let backend = AnsiBackend::new(size.0, size.1, sink);
            ratatui::Terminal::new(backend).ok()
        });
        let mut rt = Runtime {
            tick,
            ctx: Ctx::new(size),
            tools: Tools::default(),
            catalog: Vec::new(),
            revision: 1,
            seq: 0,
            data: Value::Null,
            encoded: "null".into(),
            out,
            held: None,
            report,
            terminal,
            closed: false,
            keys: key::Decoder::new(),
        };
        rt.tick.on_start(&mut rt.ctx);
        rt.refresh_catalog();
        rt.revision = 1;
        rt.data = rt.encode_state().unwrap_or(Value::Null);
        rt.encoded = rt.data.to_string();
        if let Err(problem) = rt.check_declarations() {
            (rt.report)(&problem);
        }
        if let Some(t) = rt.terminal.as_mut() {
            let _ = t.clear();
        }
        rt.redraw();
        rt
    }

    /// Whether the loop should stop: the Tick quit, or stdout is gone.
    pub fn done(&self) -> bool {
        self.ctx.quit || self.closed
    }

    /// When the next timer is due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.ctx.timers.iter().map(|t| t.due).min()
    }

    /// Holds the frames made from now on until [`Runtime::release`], so the
    /// answers to the lines of one read go out in one write.
    #[cfg_attr(not(any(test, target_os = "wasi")), allow(dead_code))]
    pub fn hold(&mut self) {
        if self.held.is_none() {
            self.held = Some(Vec::new());
        }
    }

    /// Writes the frames held since [`Runtime::hold`] in one call, in the
    /// order they were made, and writes through again.
    #[cfg_attr(not(any(test, target_os = "wasi")), allow(dead_code))]
    pub fn release(&mut self) {
        if let Some(held) = self.held.take() {
            self.write(&held);
        }
    }

    /// Handles one read of protocol input: `bytes` go into `framer`, each
    /// complete line is handled, and the frames they make go out together
    /// after the last one. A line cut by the end of the read stays in the
    /// framer for the next read. Not UTF-8 means not JSON: such a line is
    /// dropped unanswered. Err: a line passed the protocol's line limit
    /// (§3.6); the stream cannot be resynchronised, so the caller treats it
    /// as the end of input (the frames made before it are written).
    // Used by the wasm loop; the native loop writes each frame at once.
    #[cfg_attr(not(any(test, target_os = "wasi")), allow(dead_code))]
    pub fn input(
        &mut self,
        framer: &mut tickbox_protocol::framing::LineFramer,
        bytes: &[u8],
    ) -> Result<(), tickbox_protocol::message::Violation> {
        framer.push(bytes);
        self.hold();
        let outcome = loop {
            match framer.next_line() {
                Ok(Some(line)) => self.framed_line(&line),
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.release();
        outcome
    }

    /// Handles one line as framed from stdin, its line ending (`\n`, `\r\n`)
    /// still on or not: the read loops' one rule for raw lines. A line that
    /// is not UTF-8 is not JSON: dropped unanswered.
    pub fn framed_line(&mut self, line: &[u8]) {
        if let Ok(text) = std::str::from_utf8(line) {
            self.line(text.trim_end_matches(['\n', '\r']));
        }
    }

    /// Handles one line of protocol input (without its newline).
    pub fn line(&mut self, line: &str) {
        let Ok(Value::Object(msg)) = serde_json::from_str::<Value>(line) else {
            // Not a JSON object: no usable id, so no reply at all (§3.2).
            return;
        };
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            return;
        };
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            // An id without a method is not a request (maybe a stray
            // response); answering it would be answering nothing.
            return;
        };
        let reply = if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            Err(ToolError::code(
                codes::INVALID_REQUEST,
                "invalid request: jsonrpc must be \"2.0\"",
            ))
        } else {
            let params = msg.get("params").cloned().unwrap_or(json!({}));
            match method {
                "tick/describe" => self.describe(),
                "tick/read" => Ok(json!({"seq": self.seq, "data": self.data})),
                "tick/call" => self.call(params),
                other => Err(ToolError::code(
                    codes::METHOD_NOT_FOUND,
                    format!("unknown method {other}"),
                )),
            }
        };
        let frame = match reply {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => {
                let mut error = json!({"code": e.code, "message": e.message});
                if let Some(data) = e.data {
                    error["data"] = data;
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
        };
        self.send(&frame);
    }

    /// Handles key bytes typed in a view.
    pub fn keys(&mut self, bytes: &[u8]) {
        // The keys of one read are one event: the state and the catalog are
        // looked at once after all of them, so a paste of N keys costs N
        // handler calls and one state encoding, not N encodings. Keys in separate reads
        // still give one update each.
        let keys = self.keys.feed(bytes);
        if keys.is_empty() {
            return;
        }
        for k in keys {
            self.tick.on_key(k, &mut self.ctx);
        }
        self.after_event();
        self.redraw();
    }

    /// Handles a resize of the view: a repaint, never an update (§8.3).
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.ctx.size = (cols.max(1), rows.max(1));
        if let Some(t) = self.terminal.as_mut() {
            t.backend_mut().set_size(cols, rows);
            let _ = t.autoresize();
        }
        self.redraw();
    }

    /// Runs every timer due at `now`.
    pub fn timers(&mut self, now: Instant) {
        let mut fired = false;
        // Fire in due order; a handler may add or cancel timers, so look
        // the next one up afresh each time and stop at ones added now.
        let mut budget = self.ctx.timers.len();
        while budget > 0 {
            budget -= 1;
            let Some(idx) = (0..self.ctx.timers.len())
                .filter(|&i| self.ctx.timers[i].due <= now)
                .min_by_key(|&i| self.ctx.timers[i].due)
            else {
                break;
            };
            let timer = &mut self.ctx.timers[idx];
            let id = timer.id;
            match timer.period {
                // Skip missed periods rather than firing a burst.
                Some(p) => {
                    while timer.due <= now {
                        timer.due += p;
                    }
                }
                None => {
                    self.ctx.timers.remove(idx);
                }
            }
            self.tick.on_timer(id, &mut self.ctx);
            self.after_event();
            fired = true;
        }
        if fired {
            self.redraw();
        }
    }

    fn call(&mut self, params: Value) -> Result<Value, ToolError> {
        let Value::Object(params) = params else {
            return Err(ToolError::rejected("tick/call params must be an object"));
        };
        let current = self.revision.to_string();
        if params.get("revision").and_then(Value::as_str) != Some(current.as_str()) {
            return Err(ToolError::code(
                codes::REVISION_CHANGED,
                "the Tick Tool catalog changed; describe the Tick and prepare the call again",
            ));
        }
        let name = params.get("tool").and_then(Value::as_str).unwrap_or("");
        let Some(tool) = self.tools.get(name) else {
            return Err(ToolError::code(
                codes::INVALID_PARAMS,
                format!("unknown tool `{name}`"),
            ));
        };
        let args = params
            .get("args")
            .cloned()
            .unwrap_or(Value::Object(Map::new()));
        let mutates = tool.mutates;
        let result = (tool.run)(&mut self.tick, args, &mut self.ctx);
        // The update goes out before the response, as in Appendix A, so a
        // client that sees the result can already read the new state.
        let changed = self.after_event();
        // A read-only tool promised to change nothing (module docs).
        if mutates || changed || self.ctx.redraw {
            self.redraw();
        }
        result
    }

    fn describe(&mut self) -> Result<Value, ToolError> {
        if let Err(problem) = self.check_declarations() {
            return Err(ToolError::code(codes::INTERNAL, problem));
        }
        let mut d = json!({
            "protocol": PROTOCOL,
            "kind": T::KIND,
            "title": T::TITLE,
            "description": T::DESCRIPTION,
            "revision": self.revision.to_string(),
            "tools": self.catalog,
        });
        if let Some(r) = T::RECOVER_WITH {
            d["recover_with"] = json!(r);
        }
        if !T::SERIES.is_empty() {
            let series: Vec<Value> = T::SERIES
                .iter()
                .map(|s| {
                    let newest = match s.newest {
                        Newest::First => "first",
                        Newest::Last => "last",
                    };
                    json!({"path": s.path, "newest": newest})
                })
                .collect();
            d["state"] = json!({ "series": series });
        }
        let size = d.to_string().len();
        if size > SAFE_ENCODED {
            let problem = format!(
                "tickbox-guest: the descriptor is {size} bytes encoded; tick/describe allows {MAX_ENCODED} (§5.3) and the SDK keeps {} bytes of headroom: shorten tool descriptions or schemas",
                MAX_ENCODED - SAFE_ENCODED
            );
            (self.report)(&problem);
            return Err(ToolError::code(codes::INTERNAL, problem));
        }
        Ok(d)
    }

    /// The rules of §5.3 that depend on the author's declarations, checked
    /// here so the author reads which rule broke instead of a host refusal.
    fn check_declarations(&self) -> Result<(), String> {
        let bad = |why: String| Err(format!("tickbox-guest: {why}"));
        if T::KIND.trim().is_empty() || T::TITLE.trim().is_empty() {
            return bad("Tick::KIND and Tick::TITLE must not be empty (§5.3)".into());
        }
        let mut names: Vec<&str> = Vec::new();
        for t in &self.tools.list {
            if t.name.trim().is_empty() {
                return bad("a tool has an empty name (§5.3)".into());
            }
            if names.contains(&t.name.as_str()) {
                return bad(format!("the tool `{}` is declared twice (§5.3)", t.name));
            }
            names.push(&t.name);
        }
        if let Some(r) = T::RECOVER_WITH {
            match self.tools.get(r) {
                None => {
                    return bad(format!(
                        "RECOVER_WITH names `{r}`, which is not a tool (§9)"
                    ))
                }
                Some(t) if t.mutates => {
                    return bad(format!(
                    "RECOVER_WITH names `{r}`, which is Effect::Mutates; it must be ReadOnly (§9)"
                ))
                }
                _ => {}
            }
        }
        let mut paths: Vec<&str> = Vec::new();
        for s in T::SERIES {
            if !(s.path.is_empty() || s.path.starts_with('/')) || paths.contains(&s.path) {
                return bad(format!(
                    "SERIES path {:?} must be \"\" or start with '/', and be unique (§5.3)",
                    s.path
                ));
            }
            paths.push(s.path);
        }
        Ok(())
    }

    /// What follows every event: a changed catalog gets a new revision and
    /// a changed state gets an update. Whether either changed.
    fn after_event(&mut self) -> bool {
        let (revision, seq) = (self.revision, self.seq);
        self.refresh_catalog();
        self.sync_state();
        revision != self.revision || seq != self.seq
    }

    fn refresh_catalog(&mut self) {
        let mut tools = Tools::default();
        self.tick.tools(&mut tools);
        // Compared field by field before any entry is built: this runs after
        // every key and call, and the catalog almost never changes.
        let same = tools.list.len() == self.tools.list.len()
            && tools.list.iter().zip(&self.tools.list).all(|(new, old)| {
                new.name == old.name
                    && new.description == old.description
                    && new.mutates == old.mutates
                    && (Rc::ptr_eq(&new.schema, &old.schema) || new.schema == old.schema)
            });
        if !same || self.catalog.len() != tools.list.len() {
            let entries: Vec<Value> = tools.list.iter().map(|t| t.entry()).collect();
            if entries != self.catalog {
                self.revision += 1;
                self.catalog = entries;
            }
        }
        self.tools = tools;
    }

    fn encode_state(&mut self) -> Option<Value> {
        match serde_json::to_value(self.tick.state()) {
            Ok(v) => Some(v),
            Err(e) => {
                (self.report)(&format!(
                    "tickbox-guest: Tick::state cannot be encoded as JSON: {e}; no update was sent"
                ));
                None
            }
        }
    }

    fn sync_state(&mut self) {
        let Some(data) = self.encode_state() else {
            return;
        };
        let encoded = data.to_string();
        if encoded == self.encoded {
            return;
        }
        let params_size = encoded.len() + 40;
        if params_size > SAFE_ENCODED {
            // Sending it would be a protocol violation that ends the session
            // (§8.2). The state is kept as it was, so a read stays consistent
            // with the updates the host has seen.
            (self.report)(&format!(
                "tickbox-guest: the state is {} bytes encoded; tick/update allows {MAX_ENCODED} (§8.2) and the SDK keeps {} bytes of headroom; no update was sent. Keep state small and serve large content through query tools (§6.4)",
                encoded.len(),
                MAX_ENCODED - SAFE_ENCODED
            ));
            return;
        }
        self.seq += 1;
        self.encoded = encoded;
        self.data = data;
        if self.data.is_null() {
            // Null means "no content yet": readable, but never an update.
            return;
        }
        let frame = json!({
            "jsonrpc": "2.0",
            "method": "tick/update",
            "params": {"seq": self.seq, "data": self.data},
        });
        self.send(&frame);
    }

    fn send(&mut self, frame: &Value) {
        if let Some(held) = self.held.as_mut() {
            // Serialized straight into the batch: one allocation per batch,
            // not per frame.
            let before = held.len();
            match serde_json::to_writer(&mut *held, frame) {
                Ok(()) => held.push(b'\n'),
                // Never half a frame: a frame that cannot be encoded (no
                // `Value` fails, but the writer's contract allows it) is
                // left out whole, as `to_string` would have done.
                Err(_) => held.truncate(before),
            }
            if held.len() >= MAX_HELD {
                let full = std::mem::take(held);
                self.write(&full);
            }
            return;
        }
        let mut line = frame.to_string();
        line.push('\n');
        self.write(line.as_bytes());
    }

    /// Writes whole frames to the output.
    fn write(&mut self, frames: &[u8]) {
        if frames.is_empty() || self.closed {
            return;
        }
        if (self.out)(frames).is_err() {
            // The host closed our stdout: nobody is listening any more.
            self.closed = true;
        }
    }

    fn redraw(&mut self) {
        self.ctx.redraw = false;
        let Some(t) = self.terminal.as_mut() else {
            return;
        };
        let tick = &self.tick;
        let _ = t.draw(|f| tick.view(f));
    }

    #[cfg(test)]
    pub fn tick(&self) -> &T {
        &self.tick
    }
}
