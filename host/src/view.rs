//! The view side of a Tick: its terminal output, a screen model, key input
//! and resizing.
//!
//! Every backend feeds what the Tick draws (PTY output for native Ticks, the
//! terminal interface and stderr for wasm Ticks) into one [`View`]. The view
//! keeps a `vt100` screen model, so the host can report the screen as text
//! and viewers are drawn from it (see [`crate::render`]): **no byte the Tick
//! draws is ever passed on to a person's terminal**; the model is the only
//! thing its bytes reach.
//!
//! Parsing is expensive for some sequences (a full reset, `ESC c`, costs
//! microseconds per two bytes), so it never runs on an async worker: each
//! view has its own parser thread, fed through a queue of at most
//! [`VIEW_QUEUE_BYTES`]. The thread exists only while the Tick draws: the
//! first bytes queued start it, and it ends once nothing more came for
//! [`VIEW_PARSER_LINGER`], so a host of thousands of idle Ticks holds no
//! thread per Tick. A Tick that draws faster than its view parses is
//! held back (a native Tick's PTY writes block, a wasm Tick's `draw` waits),
//! and the parser spends at most [`PARSE_CPU_BUDGET`] of every
//! [`PARSE_CPU_WINDOW`], so one flooding Tick cannot starve the host's other
//! Ticks. The screen lock is held for one slice of [`PARSE_SLICE_BYTES`] at a
//! time, so readers (a repaint, `screen`) wait at most that long.
//!
//! The queries a Tick sends its terminal are answered from the model (cursor
//! position, status, device attributes, text-area size) and nothing else is
//! answered, since no person's terminal ever sees them.
//!
//! Memory stays bounded whatever a Tick draws: the queue has a fixed size,
//! the screen model a bounded size ([`MAX_VIEW_COLS`] × [`MAX_VIEW_ROWS`]) and
//! no scrollback; viewers get a change counter, not the bytes.
//!
//! **Invariant:** nothing here touches the protocol session; views come and go
//! without the Tick's stdin or stdout noticing (§1.2).

use crate::limits::{LAST_DRAW_WAIT, VIEW_PARSER_LINGER};
use crate::util::lock;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tickbox_protocol::limits::{INITIAL_COLS, INITIAL_ROWS};
use tickbox_protocol::TickText;
use tokio::sync::watch;

/// Bytes a Tick may have drawn that its view has not parsed yet; past this
/// the Tick waits (backpressure, like a real terminal's).
pub const VIEW_QUEUE_BYTES: usize = 64 * 1024;
/// Bytes parsed per hold of the screen lock: it bounds how long a reader of
/// the screen waits behind the parser, whatever the input.
pub const PARSE_SLICE_BYTES: usize = 1024;
/// The window over which a view's parser CPU time is budgeted.
pub const PARSE_CPU_WINDOW: Duration = Duration::from_millis(100);
/// Parser CPU time a view may use per [`PARSE_CPU_WINDOW`] (half a core);
/// past it the parser sleeps until the window ends.
pub const PARSE_CPU_BUDGET: Duration = Duration::from_millis(50);
// A parser thread that ends and a new one that starts keep the budget: the
// old one was idle for a whole window before it ended.
const _: () = assert!(VIEW_PARSER_LINGER.as_nanos() >= PARSE_CPU_WINDOW.as_nanos());
/// Widest view terminal (columns) a viewer may ask for.
pub const MAX_VIEW_COLS: u16 = 1000;
/// Tallest view terminal (rows) a viewer may ask for.
pub const MAX_VIEW_ROWS: u16 = 500;

/// How often [`View::settle_for_keys`] asks whether the terminal takes keys.
const KEYS_READY_POLL: Duration = Duration::from_millis(2);

/// Lines of a Tick's screen kept as its last words when it fails to start
/// or ends mid-call.
pub const LAST_WORDS_LINES: usize = 8;

/// Where keys typed in a view go, and how a resize reaches the Tick.
pub trait Terminal: Send + Sync {
    /// Delivers key bytes to the Tick (PTY master, or the wasm key stream).
    fn send_input(&self, bytes: &[u8]);
    /// Resizes the Tick's terminal (PTY resize and SIGWINCH, or a wasm resize event).
    fn resize(&self, cols: u16, rows: u16);
    /// Whether the Tick has drawn bytes the view has not read yet (a PTY's
    /// buffer); backends that feed the view directly have none.
    fn output_pending(&self) -> bool {
        false
    }
    /// Whether nothing more can arrive from the Tick's terminal once the
    /// Tick has ended: a PTY's reader has read its end (every slave fd is
    /// closed), so all the Tick drew is in the view's queue. Backends that
    /// feed the view from the Tick's own calls are done when it is.
    fn output_ended(&self) -> bool {
        true
    }
    /// Whether the Tick's terminal takes keys as they are typed: `Some(true)`
    /// once a PTY's line discipline has left canonical mode (the Tick set
    /// raw or cbreak mode, so a key is neither held for a line nor echoed),
    /// `Some(false)` while it is canonical, `None` where there is no line
    /// discipline to ask (a wasm key stream, which queues keys until read).
    fn takes_keys_as_typed(&self) -> Option<bool> {
        None
    }
}

/// A terminal that goes nowhere: for backends without input.
pub struct NoInput;

impl Terminal for NoInput {
    fn send_input(&self, _: &[u8]) {}
    fn resize(&self, _: u16, _: u16) {}
}

fn nz(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).unwrap_or(std::num::NonZeroU16::MIN)
}

/// Most bytes of answers to a Tick's queries sent per parsed batch; more
/// queries go unanswered.
pub const MAX_REPLY_BYTES: usize = 4096;

/// Answers to the queries a Tick may send its terminal, from the model:
/// cursor position (CPR), status (DSR), device attributes (DA1/DA2) and the
/// text area size. Nothing else is ever answered (no clipboard, colors,
/// DECRQSS or title reports), and no query reaches a person's terminal.
#[derive(Default)]
struct Replies {
    out: Vec<u8>,
}

impl Replies {
    fn answer(&mut self, reply: std::fmt::Arguments<'_>) {
        use std::io::Write;
        let mut buf = Vec::new();
        let _ = buf.write_fmt(reply);
        if self.out.len() + buf.len() <= MAX_REPLY_BYTES {
            self.out.extend_from_slice(&buf);
        }
    }
}

impl vt100::Callbacks for Replies {
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (i1, i2, c, first) {
            (None, None, 'n', 6) => {
                let (row, col) = screen.cursor_position();
                self.answer(format_args!("\x1b[{};{}R", row + 1, col + 1));
            }
            (None, None, 'n', 5) => self.answer(format_args!("\x1b[0n")),
            (None, None, 'c', 0) => self.answer(format_args!("\x1b[?1;2c")),
            (Some(b'>'), None, 'c', 0) => self.answer(format_args!("\x1b[>0;0;0c")),
            (None, None, 't', 18) => {
                let (rows, cols) = screen.size();
                self.answer(format_args!("\x1b[8;{rows};{cols}t"));
            }
            _ => {}
        }
    }
}

struct Screen {
    parser: vt100::Parser<Replies>,
    last_output: Instant,
    bytes: u64,
}

/// Bytes on their way from the Tick to the parser thread.
struct Queue {
    bytes: VecDeque<u8>,
    /// The parser is working on bytes it took out of the queue.
    busy: bool,
    /// The view is gone: the parser thread ends, feeds are dropped.
    closed: bool,
    /// A parser thread is running (it clears this, under the lock, only
    /// when it ends with the queue empty, so bytes never wait unparsed).
    parser: bool,
    /// Parser threads started over the view's life.
    started: u64,
    /// Async feeders waiting for room.
    wakers: Vec<Waker>,
}

struct Shared {
    screen: Mutex<Screen>,
    /// Where keys (and answers to the Tick's queries) go.
    terminal: Box<dyn Terminal>,
    queue: Mutex<Queue>,
    /// Signalled when bytes arrive (or the view closes).
    work: Condvar,
    /// Signalled when room is made or the queue runs empty.
    room: Condvar,
    /// Bumped after every parsed batch: viewers redraw when it moves.
    changes: watch::Sender<u64>,
}

impl Shared {
    /// Moves as much of `bytes` as fits into the queue; how much it took.
    /// Starts the parser thread when none runs.
    fn push(self: &Arc<Self>, bytes: &[u8]) -> Option<usize> {
        let mut q = lock(&self.queue);
        if q.closed {
            return Some(bytes.len());
        }
        let room = VIEW_QUEUE_BYTES.saturating_sub(q.bytes.len());
        if room == 0 {
            return None;
        }
        let n = room.min(bytes.len());
        q.bytes.extend(&bytes[..n]);
        let start = !std::mem::replace(&mut q.parser, true);
        q.started += u64::from(start);
        drop(q);
        if start {
            self.start_parser();
        } else {
            self.work.notify_one();
        }
        Some(n)
    }

    /// Starts a parser thread. If it cannot start, the next feed tries
    /// again; meanwhile feeds queue up to the bound and then wait (the
    /// session works, its screen lags).
    fn start_parser(self: &Arc<Self>) {
        let worker = self.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("tick-view".into())
            .spawn(move || parse_loop(&worker))
        {
            tracing::error!(error = %e, "cannot start a view's parser thread");
            lock(&self.queue).parser = false;
        }
    }
}

/// One Tick's view terminal.
pub struct View {
    shared: Arc<Shared>,
}

impl View {
    /// A view at the initial size (§4.1) delivering input to `terminal`; its
    /// parser thread runs while there is drawing to parse (module docs).
    pub fn new(terminal: Box<dyn Terminal>) -> Arc<View> {
        let (changes, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            screen: Mutex::new(Screen {
                parser: vt100::Parser::new_with_callbacks(
                    nz(INITIAL_ROWS),
                    nz(INITIAL_COLS),
                    0,
                    Replies::default(),
                ),
                last_output: Instant::now(),
                bytes: 0,
            }),
            terminal,
            queue: Mutex::new(Queue {
                bytes: VecDeque::new(),
                busy: false,
                closed: false,
                parser: false,
                started: 0,
                wakers: Vec::new(),
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            changes,
        });
        Arc::new(View { shared })
    }

    fn lock(&self) -> MutexGuard<'_, Screen> {
        lock(&self.shared.screen)
    }

    /// Feeds bytes the Tick drew, waiting while the queue is full. Blocks:
    /// for plain threads (a PTY reader), never an async worker.
    pub fn feed(&self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match self.shared.push(bytes) {
                Some(n) => bytes = &bytes[n..],
                None => {
                    let q = lock(&self.shared.queue);
                    if q.bytes.len() >= VIEW_QUEUE_BYTES && !q.closed {
                        let _ = self.shared.room.wait_timeout(q, Duration::from_millis(100));
                    }
                }
            }
        }
    }

    /// Queues what fits of `bytes` (how much, or `Pending` until room is
    /// made): for `AsyncWrite` implementations.
    pub fn poll_feed(&self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<usize> {
        if bytes.is_empty() {
            return Poll::Ready(0);
        }
        if let Some(n) = self.shared.push(bytes) {
            return Poll::Ready(n);
        }
        let mut q = lock(&self.shared.queue);
        // Room may have been made between the push and this lock.
        if q.bytes.len() < VIEW_QUEUE_BYTES || q.closed {
            drop(q);
            cx.waker().wake_by_ref();
        } else {
            q.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Feeds all of `bytes`, waiting (asynchronously) while the queue is full.
    pub async fn draw(&self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_feed(cx, bytes)).await;
            bytes = &bytes[n..];
        }
    }

    /// The screen as plain text, rows separated by newlines: the Tick's
    /// text, so out only through [`TickText`]'s escaped ways.
    pub fn screen_text(&self) -> TickText {
        TickText::new(self.lock().parser.screen().contents())
    }

    /// The screen's rows as text, `width` cells from column `start` each
    /// (empty cells as spaces; cut or padded by the caller).
    pub fn screen_rows(&self, start: u16, width: u16) -> Vec<String> {
        self.lock().parser.screen().rows(start, width).collect()
    }

    /// A copy of the screen model, to render from without holding the lock.
    pub fn snapshot(&self) -> vt100::Screen {
        self.lock().parser.screen().clone()
    }

    /// A counter that moves whenever the screen may have changed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// Total bytes the Tick has drawn and the view has parsed.
    pub fn bytes_drawn(&self) -> u64 {
        self.lock().bytes
    }

    /// Parser threads this view has started: one per stretch of drawing
    /// (an idle view holds none).
    pub fn parser_threads_started(&self) -> u64 {
        lock(&self.shared.queue).started
    }

    /// Current size as (cols, rows).
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.lock().parser.screen().size();
        (cols.get(), rows.get())
    }

    /// Sends keys to the Tick.
    pub fn send_input(&self, bytes: &[u8]) {
        self.shared.terminal.send_input(bytes);
    }

    /// Resizes the Tick's terminal and the screen model, within
    /// 1..=[`MAX_VIEW_COLS`] × 1..=[`MAX_VIEW_ROWS`].
    pub fn resize(&self, cols: u16, rows: u16) {
        let (cols, rows) = (nz(cols.min(MAX_VIEW_COLS)), nz(rows.min(MAX_VIEW_ROWS)));
        self.lock().parser.set_size(rows, cols);
        self.shared.terminal.resize(cols.get(), rows.get());
        self.shared.changes.send_modify(|n| *n += 1);
    }

    /// Whether drawn bytes are still queued or being parsed.
    fn parsing(&self) -> bool {
        let q = lock(&self.shared.queue);
        q.busy || !q.bytes.is_empty()
    }

    /// Waits until nothing was drawn for `quiet` (counted from the call at
    /// the earliest) and nothing drawn is still on its way, at most `max`.
    pub async fn settle(&self, quiet: Duration, max: Duration) {
        let start = Instant::now();
        let deadline = start + max;
        loop {
            let since = self.lock().last_output.max(start).elapsed();
            let now = Instant::now();
            let pending = self.parsing() || self.shared.terminal.output_pending();
            if now >= deadline || (since >= quiet && !pending) {
                return;
            }
            let wait = if since >= quiet {
                Duration::from_millis(10)
            } else {
                quiet - since
            };
            tokio::time::sleep(wait.min(deadline - now)).await;
        }
    }

    /// Whether the Tick's terminal takes keys as typed ([`Terminal::takes_keys_as_typed`]).
    pub fn takes_keys_as_typed(&self) -> Option<bool> {
        self.shared.terminal.takes_keys_as_typed()
    }

    /// [`View::settle`] for a Tick that has ended: waits until its terminal's
    /// output has ended ([`Terminal::output_ended`]) and all of it is parsed,
    /// at most [`LAST_DRAW_WAIT`]. Unlike a quiet period, this does not
    /// depend on how soon the PTY's reader thread is scheduled: the Tick's
    /// last words are on the screen however busy the machine is. A process
    /// the Tick left holding its terminal keeps the end from coming; then
    /// the bound ends the wait.
    pub async fn settle_after_end(&self) {
        let deadline = Instant::now() + LAST_DRAW_WAIT;
        // Done once no byte can come and every byte came through the parser.
        while (!self.shared.terminal.output_ended() || self.parsing()) && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// [`View::settle`] for a Tick about to be sent keys on real time: ends
    /// as soon as its terminal takes keys as typed and nothing drawn is on
    /// its way; where the terminal cannot say (or stays canonical), once
    /// nothing was drawn for `quiet`, as `settle` does. So a Tick that puts
    /// its PTY in raw mode first thing is not waited for a quiet period.
    pub async fn settle_for_keys(&self, quiet: Duration, max: Duration) {
        let start = Instant::now();
        let deadline = start + max;
        loop {
            let since = self.lock().last_output.max(start).elapsed();
            let now = Instant::now();
            let pending = self.parsing() || self.shared.terminal.output_pending();
            let ready = self.takes_keys_as_typed() == Some(true);
            if now >= deadline || (!pending && (ready || since >= quiet)) {
                return;
            }
            // Short steps: the mode can change at any moment, and asking
            // costs one ioctl.
            tokio::time::sleep(KEYS_READY_POLL.min(deadline - now)).await;
        }
    }

    /// The first `n` characters of the screen with blank runs folded, for one-line reports.
    pub fn excerpt(&self, n: usize) -> TickText {
        let text = self.screen_text();
        let folded = text.wire().split_whitespace().collect::<Vec<_>>().join(" ");
        TickText::new(folded.chars().take(n).collect::<String>())
    }

    /// The last `n` non-blank lines of the screen, for a Tick's last words.
    pub fn last_lines(&self, n: usize) -> Vec<TickText> {
        let text = self.screen_text();
        let lines: Vec<&str> = text
            .wire()
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(n)..]
            .iter()
            .map(|l| TickText::from(*l))
            .collect()
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let mut q = lock(&self.shared.queue);
        q.closed = true;
        q.bytes.clear();
        let wakers = std::mem::take(&mut q.wakers);
        drop(q);
        self.shared.work.notify_all();
        self.shared.room.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// The CPU budget of one parser thread.
struct Budget {
    window: Instant,
    spent: Duration,
}

impl Budget {
    fn spend(&mut self, t: Duration) {
        self.spent += t;
        let elapsed = self.window.elapsed();
        if elapsed >= PARSE_CPU_WINDOW {
            self.window = Instant::now();
            self.spent = Duration::ZERO;
        } else if self.spent >= PARSE_CPU_BUDGET {
            std::thread::sleep(PARSE_CPU_WINDOW - elapsed);
            self.window = Instant::now();
            self.spent = Duration::ZERO;
        }
    }
}

/// The parser thread: takes queued bytes, parses them a slice at a time
/// under the screen lock, within its CPU budget, and tells viewers; ends
/// when the view closes or nothing was drawn for [`VIEW_PARSER_LINGER`].
/// The budget is per thread: a thread that ended had been idle for longer
/// than [`PARSE_CPU_WINDOW`], so its window had ended anyway.
fn parse_loop(shared: &Shared) {
    let mut budget = Budget {
        window: Instant::now(),
        spent: Duration::ZERO,
    };
    loop {
        let batch: Vec<u8> = {
            let mut q = lock(&shared.queue);
            let idle_since = Instant::now();
            while q.bytes.is_empty() && !q.closed {
                q.busy = false;
                shared.room.notify_all();
                let waited = idle_since.elapsed();
                if waited >= VIEW_PARSER_LINGER {
                    // Under the lock with the queue empty: the next push
                    // sees `parser` false and starts another thread.
                    q.parser = false;
                    return;
                }
                q = shared
                    .work
                    .wait_timeout(q, VIEW_PARSER_LINGER - waited)
                    .map_or_else(|p| p.into_inner().0, |(q, _)| q);
            }
            if q.closed {
                q.parser = false;
                return;
            }
            q.busy = true;
            let n = q.bytes.len().min(PARSE_SLICE_BYTES * 16);
            let batch = q.bytes.drain(..n).collect();
            for w in q.wakers.drain(..) {
                w.wake();
            }
            batch
        };
        shared.room.notify_all();
        for slice in batch.chunks(PARSE_SLICE_BYTES) {
            let t = Instant::now();
            let replies = {
                let mut s = lock(&shared.screen);
                s.parser.process(slice);
                s.bytes += slice.len() as u64;
                s.last_output = Instant::now();
                std::mem::take(&mut s.parser.callbacks_mut().out)
            };
            // Outside the lock; never blocks (backends drop keys when full).
            if !replies.is_empty() {
                shared.terminal.send_input(&replies);
            }
            budget.spend(t.elapsed());
        }
        shared.changes.send_modify(|n| *n += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (a bounded time) until everything fed was parsed.
    fn parsed(v: &View) {
        let t = Instant::now();
        while v.parsing() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn the_screen_model_follows_escape_sequences() {
        let v = View::new(Box::new(NoInput));
        v.feed(b"hello\r\nworld\x1b[1;1Hj");
        parsed(&v);
        assert_eq!(v.screen_text().wire(), "jello\nworld");
        assert_eq!(v.last_lines(1), vec![TickText::from("world")]);
        assert_eq!(v.size(), (120, 30));
        v.resize(40, 10);
        assert_eq!(v.size(), (40, 10));
        v.resize(u16::MAX, 0);
        assert_eq!(v.size(), (MAX_VIEW_COLS, 1), "sizes are bounded");
    }

    /// A terminal whose line discipline answers as given.
    struct Mode(Option<bool>);

    impl Terminal for Mode {
        fn send_input(&self, _: &[u8]) {}
        fn resize(&self, _: u16, _: u16) {}
        fn takes_keys_as_typed(&self) -> Option<bool> {
            self.0
        }
    }

    /// A terminal in raw mode ends the wait at once; a canonical one, or one
    /// that cannot say, waits for the quiet period (the control).
    #[tokio::test]
    async fn settling_for_keys_ends_when_the_terminal_takes_keys_as_typed() {
        let quiet = Duration::from_millis(300);
        let ready = View::new(Box::new(Mode(Some(true))));
        ready.feed(b"drawn");
        let t = Instant::now();
        ready
            .settle_for_keys(Duration::from_secs(30), Duration::from_secs(60))
            .await;
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        assert!(!ready.parsing(), "what was drawn is parsed first");
        for mode in [Some(false), None] {
            let v = View::new(Box::new(Mode(mode)));
            let t = Instant::now();
            v.settle_for_keys(quiet, Duration::from_secs(60)).await;
            assert!(t.elapsed() >= quiet, "{mode:?}: {:?}", t.elapsed());
        }
    }

    /// A terminal whose output ends when the test says so.
    struct Ending(Arc<std::sync::atomic::AtomicBool>);

    impl Terminal for Ending {
        fn send_input(&self, _: &[u8]) {}
        fn resize(&self, _: u16, _: u16) {}
        fn output_ended(&self) -> bool {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    /// After a Tick's end, the last words wait for its terminal's end, not
    /// for a quiet period: bytes that arrive well after the screen went
    /// quiet (a reader thread the machine did not schedule for a while)
    /// still make it, and the wait ends as soon as the end is seen. The
    /// control: a terminal whose end never comes is waited for no longer
    /// than the bound.
    #[tokio::test]
    async fn last_words_wait_for_the_end_of_output_not_for_quiet() {
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let v = View::new(Box::new(Ending(ended.clone())));
        v.feed(b"starting\r\n");
        let late = {
            let (v, ended) = (v.clone(), ended.clone());
            std::thread::spawn(move || {
                // Later than the quiet period the old rule waited for.
                std::thread::sleep(Duration::from_millis(150));
                v.feed(b"fatal: late last words\r\n");
                ended.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        };
        let t = Instant::now();
        v.settle_after_end().await;
        let took = t.elapsed();
        late.join().unwrap();
        assert_eq!(
            v.last_lines(1),
            vec![TickText::from("fatal: late last words")],
            "waited {took:?}"
        );
        assert!(
            took < LAST_DRAW_WAIT,
            "ends at the end, not the bound: {took:?}"
        );

        let never = View::new(Box::new(Ending(Arc::new(false.into()))));
        let t = Instant::now();
        never.settle_after_end().await;
        assert!(t.elapsed() >= LAST_DRAW_WAIT, "{:?}", t.elapsed());
        assert!(t.elapsed() < LAST_DRAW_WAIT * 10, "{:?}", t.elapsed());
    }

    /// Whether a parser thread runs for `v`.
    fn parser_runs(v: &View) -> bool {
        lock(&v.shared.queue).parser
    }

    /// An idle view holds no thread: the parser thread drawing started
    /// ends once nothing more is drawn, and the next draw starts another
    /// that parses it. Before any draw there is none (the control for
    /// "ends": the flag does go up while there is drawing).
    #[test]
    fn a_parser_thread_runs_only_while_the_tick_draws() {
        let v = View::new(Box::new(NoInput));
        assert!(!parser_runs(&v), "no thread before anything is drawn");
        assert_eq!(v.parser_threads_started(), 0);
        v.feed(b"first");
        // Counted, not sampled: on a slow machine the thread may have
        // parsed, lingered and ended before the flag is looked at.
        assert_eq!(v.parser_threads_started(), 1, "drawing starts one");
        parsed(&v);
        assert!(
            tickbox_test_support::eventually(tickbox_test_support::PATIENCE, || !parser_runs(&v)),
            "the thread of an idle view ended"
        );
        v.feed(b"\r\nsecond");
        assert_eq!(
            v.parser_threads_started(),
            2,
            "the next draw starts another"
        );
        parsed(&v);
        assert_eq!(v.screen_text().wire(), "first\nsecond");
    }

    #[test]
    fn a_flood_keeps_memory_bounded() {
        let v = View::new(Box::new(NoInput));
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            v.feed(&chunk);
            assert!(lock(&v.shared.queue).bytes.len() <= VIEW_QUEUE_BYTES);
        }
        parsed(&v);
        assert_eq!(v.bytes_drawn(), 64 * 64 * 1024);
        assert!(v.screen_text().len() <= 30 * 121);
    }

    #[tokio::test]
    async fn async_draws_wait_for_room_instead_of_growing_the_queue() {
        let v = View::new(Box::new(NoInput));
        let big = vec![b'y'; 4 * VIEW_QUEUE_BYTES + 7];
        v.draw(&big).await;
        v.settle(Duration::from_millis(10), Duration::from_secs(10))
            .await;
        assert_eq!(v.bytes_drawn(), big.len() as u64);
    }
}
