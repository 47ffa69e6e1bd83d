//! A raw protocol driver: the host side of one session with no rules enforced.
//!
//! [`tickbox_host::session::Session`] ends a session at the first violation, which
//! is right for a host and useless for a checker. The [`Driver`] writes exactly
//! the bytes it is told to (valid requests, and garbage on purpose), and keeps
//! a transcript of everything the Tick wrote: every line with its arrival time,
//! classified by [`parse_line`] but never acted upon, plus an unterminated tail
//! or an over-long line if there was one. The checks in [`super::suite`] read
//! verdicts out of that transcript.
//!
//! What can go wrong: a Tick that stops reading its stdin would block a write
//! forever, so every write is bounded by [`WRITE_TIMEOUT`]; a Tick that never
//! closes stdout (a grandchild holding it) would keep the reader alive, so
//! [`Driver::finish`] gives up waiting for EOF after [`DRAIN_TIMEOUT`].
//!
//! Memory is bounded whatever the Tick writes: lines are split by the host's
//! own [`LineReader`] (never more than the line limit buffered, no rescans),
//! parsed in the reader task and handed over on a bounded queue
//! ([`QUEUE_LINES`]), and the transcript keeps at most
//! [`MAX_TRANSCRIPT_LINES`] lines and [`MAX_TRANSCRIPT_BYTES`] bytes of
//! them; lines past that are counted in [`Driver::dropped_lines`], not kept.

use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_host::framing::{FrameError, LineReader};
use tickbox_host::session::{TickIo, TickProcess};
use tickbox_host::view::View;
use tickbox_protocol::message::{encode_request, method, parse_line};
use tickbox_protocol::{Incoming, ResponseBody, Violation};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Lines parsed ahead of the driver; a Tick that writes faster waits. Their
/// bytes count toward [`MAX_TRANSCRIPT_BYTES`] already, so a deep queue
/// costs no more memory and keeps a flooding Tick from blocking on its
/// stdout while the driver writes.
pub const QUEUE_LINES: usize = 1024;
/// Lines a transcript keeps; later ones are only counted.
pub const MAX_TRANSCRIPT_LINES: usize = 100_000;
/// Bytes of lines (as the Tick wrote them) a transcript keeps parsed.
pub const MAX_TRANSCRIPT_BYTES: usize = 32 * 1024 * 1024;

/// How long one write to the Tick's stdin may block.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Driver::finish`] waits for the end of the Tick's output.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes of each received line kept in the transcript (after parsing).
pub const RAW_KEPT: usize = 4 * EXCERPT_CHARS;
/// Characters of a line kept in report excerpts.
pub const EXCERPT_CHARS: usize = 240;

/// One line the Tick wrote, classified but not judged.
#[derive(Debug, Clone)]
pub struct Line {
    /// When it arrived, from the start of the session.
    pub at: Duration,
    /// Its first [`RAW_KEPT`] bytes, without the newline.
    pub raw: Vec<u8>,
    /// What it is.
    pub parsed: Parsed,
}

impl Line {
    /// A one-line excerpt for reports.
    pub fn excerpt(&self) -> String {
        excerpt(&self.raw)
    }

    /// The response id, if this is a response.
    pub fn response_id(&self) -> Option<i64> {
        match &self.parsed {
            Parsed::Message(Incoming::Response { id, .. }) => Some(*id),
            _ => None,
        }
    }

    /// The update params, if this is a tick/update.
    pub fn update(&self) -> Option<&Value> {
        match &self.parsed {
            Parsed::Message(Incoming::Update(v)) => Some(v),
            _ => None,
        }
    }
}

/// A line as [`parse_line`] classified it.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// A well-formed message.
    Message(Incoming),
    /// A line that breaks a framing rule.
    Bad(Violation),
}

/// A one-line, bounded excerpt of what a Tick wrote, for reports: invalid
/// UTF-8 replaced, control characters escaped (so a Tick cannot forge report
/// lines or drive a terminal), quotes left alone so JSON stays readable.
pub fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == EXCERPT_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A request the driver wrote.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Its id.
    pub id: u64,
    /// Its method.
    pub method: String,
    /// When it was written, from the start of the session.
    pub at: Duration,
    /// The line, without the newline.
    pub line: String,
}

/// How the Tick's output ended, if it has.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputEnd {
    /// EOF after a newline.
    Clean,
    /// EOF after bytes without a newline.
    Unterminated(Vec<u8>),
    /// A line longer than the protocol's line limit; the driver stopped reading.
    TooLong,
    /// Reading failed.
    Io(String),
}

enum Chunk {
    Line(Line),
    /// Lines past the transcript bounds, not kept.
    Dropped(usize),
    End(OutputEnd),
}

/// One raw session with one Tick.
pub struct Driver {
    stdin: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    rx: mpsc::Receiver<Chunk>,
    process: Box<dyn TickProcess>,
    view: Arc<View>,
    started: Instant,
    next_id: u64,
    /// Everything the Tick wrote, in arrival order.
    pub lines: Vec<Line>,
    /// Every request written, in order.
    pub sent: Vec<Sent>,
    /// Raw lines written that were not requests (garbage on purpose).
    pub sent_raw: Vec<String>,
    /// How the output ended, once it has.
    pub end: Option<OutputEnd>,
    /// How the process ended, once known.
    pub exit: Option<String>,
    /// Why a write failed, if one did.
    pub write_error: Option<String>,
    /// Lines the Tick wrote past the transcript bounds (counted, not kept).
    pub dropped_lines: usize,
}

impl Driver {
    /// Takes over a freshly started Tick.
    pub fn new(io: TickIo) -> Driver {
        let started = Instant::now();
        let (tx, rx) = mpsc::channel(QUEUE_LINES);
        tokio::spawn(read_lines(io.stdout, started, tx));
        Driver {
            stdin: Some(io.stdin),
            rx,
            process: io.process,
            view: io.view,
            started,
            next_id: 1,
            lines: Vec::new(),
            sent: Vec::new(),
            sent_raw: Vec::new(),
            end: None,
            exit: None,
            write_error: None,
            dropped_lines: 0,
        }
    }

    /// The Tick's view.
    pub fn view(&self) -> &Arc<View> {
        &self.view
    }

    /// Time since the session started.
    pub fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// The Tick's process, for signals.
    pub fn process(&mut self) -> &mut dyn TickProcess {
        self.process.as_mut()
    }

    async fn write(&mut self, bytes: &[u8]) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        let r = tokio::time::timeout(WRITE_TIMEOUT, async {
            stdin.write_all(bytes).await?;
            stdin.flush().await
        })
        .await;
        let err = match r {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "the Tick did not read its stdin for {}s",
                WRITE_TIMEOUT.as_secs()
            ),
        };
        tracing::debug!(error = %err, "writing to the Tick failed");
        self.write_error.get_or_insert(err);
        false
    }

    /// Builds a request line with the next id, without sending it.
    pub fn prepare(&mut self, method: &str, params: &Value) -> (u64, Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        (
            id,
            encode_request(tickbox_protocol::RequestId(id), method, params),
        )
    }

    /// Sends prepared request lines in one write (so a Tick reads them as one
    /// burst), recording each.
    pub async fn send_batch(&mut self, batch: &[(u64, &str, Vec<u8>)]) {
        let at = self.now();
        let mut bytes = Vec::new();
        for (id, method, line) in batch {
            self.sent.push(Sent {
                id: *id,
                method: method.to_string(),
                at,
                line: String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line))
                    .into_owned(),
            });
            bytes.extend_from_slice(line);
        }
        self.write(&bytes).await;
    }

    /// Sends one request; returns its id.
    pub async fn send(&mut self, method: &str, params: Value) -> u64 {
        let (id, line) = self.prepare(method, &params);
        let m: &str = method;
        self.send_batch(&[(id, m, line)]).await;
        id
    }

    /// Writes a raw line (a newline is added).
    pub async fn send_raw(&mut self, line: &str) {
        self.sent_raw.push(line.to_string());
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.write(&bytes).await;
    }

    /// Closes the Tick's stdin (EOF).
    pub fn close_stdin(&mut self) {
        // Dropping the writer closes the pipe; nothing is buffered in it
        // because every write was flushed.
        self.stdin = None;
    }

    fn absorb(&mut self, chunk: Chunk) {
        match chunk {
            Chunk::Line(line) => self.lines.push(line),
            Chunk::Dropped(n) => self.dropped_lines += n,
            Chunk::End(end) => self.end = Some(end),
        }
    }

    /// Takes in whatever has arrived, without waiting.
    pub fn poll(&mut self) {
        while let Ok(c) = self.rx.try_recv() {
            self.absorb(c);
        }
    }

    /// Waits until `done` holds, the output ends, or `limit` passes.
    /// Returns whether `done` held.
    pub async fn wait_until(&mut self, limit: Duration, done: impl Fn(&Driver) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            self.poll();
            if done(self) {
                return true;
            }
            if self.end.is_some() {
                return false;
            }
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(c)) => self.absorb(c),
                Ok(None) => {
                    self.end.get_or_insert(OutputEnd::Clean);
                }
                Err(_) => return done(self),
            }
        }
    }

    /// Collects output for a while (to see what a Tick does unprompted).
    pub async fn settle(&mut self, period: Duration) {
        self.wait_until(period, |_| false).await;
    }

    /// The first response to `id`, if one arrived.
    pub fn response(&self, id: u64) -> Option<&Line> {
        self.lines
            .iter()
            .find(|l| l.response_id() == Some(id as i64))
    }

    /// Waits for the response to `id`; returns its body and the latency.
    pub async fn wait_response(
        &mut self,
        id: u64,
        limit: Duration,
    ) -> Option<(ResponseBody, Duration, String)> {
        self.wait_until(limit, |d| d.response(id).is_some()).await;
        let line = self.response(id)?;
        let sent_at = self
            .sent
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.at)
            .unwrap_or_default();
        match &line.parsed {
            Parsed::Message(Incoming::Response { body, .. }) => Some((
                body.clone(),
                line.at.saturating_sub(sent_at),
                line.excerpt(),
            )),
            _ => None,
        }
    }

    /// Sends a request and waits for its answer.
    pub async fn roundtrip(&mut self, method: &str, params: Value, limit: Duration) -> Exchange {
        let id = self.send(method, params).await;
        let sent = self.sent.last().map(|s| s.line.clone()).unwrap_or_default();
        let answer = self.wait_response(id, limit).await;
        Exchange { sent, answer }
    }

    /// The index of the next line to arrive (for "what came after" windows).
    pub fn mark(&self) -> usize {
        self.lines.len()
    }

    /// The tick/update params that arrived since `mark`.
    pub fn updates_since(&self, mark: usize) -> Vec<&Line> {
        self.lines[mark.min(self.lines.len())..]
            .iter()
            .filter(|l| l.update().is_some())
            .collect()
    }

    /// Waits for the process to end by itself; returns how it ended.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<String> {
        if self.exit.is_some() {
            return self.exit.clone();
        }
        let r = tokio::time::timeout(limit, self.process.exited())
            .await
            .ok();
        if r.is_some() {
            self.exit = r.clone();
        }
        r
    }

    /// Ends the session: closes stdin, stops the Tick, and collects the rest
    /// of its output.
    pub async fn finish(&mut self) {
        self.close_stdin();
        // Graceful: stdin is closed, so a Tick that exits on EOF leaves by
        // itself (and writes its last words, which the framing rules judge);
        // the rest get SIGTERM, then SIGKILL. The whole group goes either way.
        self.process.terminate(self.exit.is_none()).await;
        self.wait_until(DRAIN_TIMEOUT, |d| d.end.is_some()).await;
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(Duration::from_secs(1), self.process.exited())
                .await
                .ok();
        }
    }

    /// A short description of how the session ended, for reports.
    pub fn ending(&self) -> String {
        let mut parts = Vec::new();
        if let Some(e) = &self.exit {
            parts.push(format!("the Tick ended ({e})"));
        }
        if let Some(e) = &self.write_error {
            parts.push(format!("writing to it failed ({e})"));
        }
        if self.dropped_lines > 0 {
            parts.push(format!(
                "{} further lines were not kept (the transcript keeps {MAX_TRANSCRIPT_LINES} lines, {MAX_TRANSCRIPT_BYTES} bytes)",
                self.dropped_lines
            ));
        }
        parts.join("; ")
    }
}

/// A request and its answer, if one came.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request line.
    pub sent: String,
    /// The response body, its latency and its line excerpt.
    pub answer: Option<(ResponseBody, Duration, String)>,
}

impl Exchange {
    /// The result, if the answer was a success.
    pub fn result(&self) -> Option<&Value> {
        match &self.answer {
            Some((ResponseBody::Result(v), _, _)) => Some(v),
            _ => None,
        }
    }

    /// The error code, if the answer was an error.
    pub fn error_code(&self) -> Option<i64> {
        match &self.answer {
            Some((ResponseBody::Error(e), _, _)) => Some(e.code),
            _ => None,
        }
    }

    /// The response excerpt, or what happened instead.
    pub fn received(&self) -> String {
        match &self.answer {
            Some((_, _, line)) => line.clone(),
            None => "(no response)".into(),
        }
    }

    /// The latency, if answered.
    pub fn latency(&self) -> Option<Duration> {
        self.answer.as_ref().map(|a| a.1)
    }
}

/// Reads the Tick's stdout into parsed lines with arrival times, with the
/// host's framing (so at most one line's worth is ever buffered and nothing
/// is rescanned) and the transcript bounds (see the module docs).
async fn read_lines(
    stdout: Box<dyn AsyncRead + Send + Unpin>,
    started: Instant,
    tx: mpsc::Sender<Chunk>,
) {
    let mut reader = LineReader::new(stdout);
    let (mut kept, mut kept_bytes) = (0usize, 0usize);
    let end = loop {
        let mut raw = match reader.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break OutputEnd::Clean,
            Err(FrameError::Violation(tickbox_protocol::Violation::Unterminated { .. })) => {
                break OutputEnd::Unterminated(reader.rest().to_vec())
            }
            Err(FrameError::Violation(_)) => break OutputEnd::TooLong,
            Err(FrameError::Io(e)) => break OutputEnd::Io(e.to_string()),
            // `FrameError` may grow; any other failure ends the output as a read error.
            Err(e) => break OutputEnd::Io(e.to_string()),
        };
        let at = started.elapsed();
        let chunk = if kept < MAX_TRANSCRIPT_LINES && kept_bytes + raw.len() <= MAX_TRANSCRIPT_BYTES
        {
            kept += 1;
            kept_bytes += raw.len();
            let parsed = match parse_line(&raw) {
                Ok(m) => Parsed::Message(m),
                Err(v) => Parsed::Bad(v),
            };
            // Only excerpts of the bytes are ever shown; a Tick writing
            // megabyte lines must not make the transcript hold them all.
            raw.truncate(RAW_KEPT);
            Chunk::Line(Line { at, raw, parsed })
        } else {
            Chunk::Dropped(1)
        };
        // Bounded: a Tick that writes faster than the checker reads waits.
        if tx.send(chunk).await.is_err() {
            return;
        }
    };
    let _ = tx.send(Chunk::End(end)).await;
}

/// The method names, re-exported for the suite.
pub use method::{CALL, DESCRIBE, READ};

#[cfg(test)]
mod tests {
    use super::*;
    use tickbox_host::session::BoxFuture;
    use tickbox_host::view::NoInput;

    struct Gone;

    impl TickProcess for Gone {
        fn exited(&mut self) -> BoxFuture<'_, String> {
            Box::pin(async { "exit status 0".to_string() })
        }
        fn terminate(&mut self, _: bool) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    /// A driver whose Tick wrote `output` and closed its stdout.
    fn driver_over(output: Vec<u8>) -> Driver {
        let (host_stdin, _tick_stdin) = tokio::io::duplex(1024);
        Driver::new(TickIo {
            stdin: Box::new(host_stdin),
            stdout: Box::new(std::io::Cursor::new(output)),
            view: View::new(Box::new(NoInput)),
            process: Box::new(Gone),
        })
    }

    #[tokio::test]
    async fn a_flooding_tick_costs_a_bounded_transcript() {
        let line = b"{\"jsonrpc\":\"2.0\",\"method\":\"x/noise\"}\n";
        let extra = 1000;
        let output = line.repeat(MAX_TRANSCRIPT_LINES + extra);
        let mut d = driver_over(output);
        assert!(!d.wait_until(Duration::from_secs(60), |_| false).await);
        assert_eq!(d.end, Some(OutputEnd::Clean));
        assert_eq!(d.lines.len(), MAX_TRANSCRIPT_LINES);
        assert_eq!(d.dropped_lines, extra);
        assert!(d.ending().contains("1000 further lines were not kept"));
    }

    #[tokio::test]
    async fn lines_keep_excerpts_and_the_ends_are_reported() {
        let mut out = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".to_vec();
        out.extend(std::iter::repeat_n(b'x', 3 * RAW_KEPT));
        out.extend(b"\nunterminated");
        let mut d = driver_over(out);
        d.wait_until(Duration::from_secs(10), |_| false).await;
        assert_eq!(d.lines.len(), 2);
        assert_eq!(d.lines[0].response_id(), Some(1));
        assert_eq!(d.lines[1].raw.len(), RAW_KEPT, "only an excerpt is kept");
        assert_eq!(
            d.end,
            Some(OutputEnd::Unterminated(b"unterminated".to_vec()))
        );
    }
}
