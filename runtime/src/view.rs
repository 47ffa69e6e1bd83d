//! The view side of a Tick: its terminal output, a screen model, key input
//! and resizing.
//!
//! Every backend feeds what the Tick draws (PTY output for native Ticks, the
//! terminal interface and stderr for wasm Ticks) into one [`View`]. The view
//! keeps a `vt100` screen model, so the host can report the screen as text
//! and a newly attached person sees the current screen at once, and fans the
//! raw bytes out to attached viewers. Memory stays bounded whatever a Tick
//! draws: the screen model has a fixed size and no scrollback, and the live
//! channel drops old chunks for viewers that fall behind.
//!
//! **Invariant:** nothing here touches the protocol session; views come and go
//! without the Tick's stdin or stdout noticing (§1.2).

use crate::protocol::limits::{INITIAL_COLS, INITIAL_ROWS};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Chunks buffered for each live viewer before the oldest are dropped.
const LIVE_CHUNKS: usize = 256;

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

struct Screen {
    parser: vt100::Parser,
    last_output: Instant,
    bytes: u64,
}

/// One Tick's view terminal.
pub struct View {
    screen: Mutex<Screen>,
    live: broadcast::Sender<Arc<[u8]>>,
    terminal: Box<dyn Terminal>,
}

impl View {
    /// A view at the initial size (§4.1) delivering input to `terminal`.
    pub fn new(terminal: Box<dyn Terminal>) -> Arc<View> {
        let (live, _) = broadcast::channel(LIVE_CHUNKS);
        Arc::new(View {
            screen: Mutex::new(Screen {
                parser: vt100::Parser::new(nz(INITIAL_ROWS), nz(INITIAL_COLS), 0),
                last_output: Instant::now(),
                bytes: 0,
            }),
            live,
            terminal,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Screen> {
        // A panic while holding the lock cannot leave the screen model in a
        // state worse than slightly stale, so poisoning is ignored.
        self.screen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feeds bytes the Tick drew.
    pub fn feed(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut s = self.lock();
        s.parser.process(bytes);
        s.last_output = Instant::now();
        s.bytes += bytes.len() as u64;
        // Sent under the lock (a broadcast send never blocks), so `attach`
        // sees every chunk either in its repaint or on its receiver, never both.
        let _ = self.live.send(Arc::from(bytes));
    }

    /// The screen as plain text, rows separated by newlines.
    pub fn screen_text(&self) -> String {
        self.lock().parser.screen().contents()
    }

    /// The screen's rows as text, `width` cells from column `start` each
    /// (empty cells as spaces; cut or padded by the caller).
    pub fn screen_rows(&self, start: u16, width: u16) -> Vec<String> {
        self.lock().parser.screen().rows(start, width).collect()
    }

    /// Total bytes the Tick has drawn.
    pub fn bytes_drawn(&self) -> u64 {
        self.lock().bytes
    }

    /// Current size as (cols, rows).
    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.lock().parser.screen().size();
        (cols.get(), rows.get())
    }

    /// Becomes a viewer: bytes that repaint the current screen (contents,
    /// cursor and input modes) on an empty terminal, and live output from
    /// exactly that point on.
    pub fn attach(&self) -> (Vec<u8>, broadcast::Receiver<Arc<[u8]>>) {
        let s = self.lock();
        (
            s.parser.screen().state_formatted().into(),
            self.live.subscribe(),
        )
    }

    /// Subscribes to live output.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<[u8]>> {
        self.live.subscribe()
    }

    /// Sends keys to the Tick.
    pub fn send_input(&self, bytes: &[u8]) {
        self.terminal.send_input(bytes);
    }

    /// Resizes the Tick's terminal and the screen model.
    pub fn resize(&self, cols: u16, rows: u16) {
        let (cols, rows) = (nz(cols), nz(rows));
        self.lock().parser.set_size(rows, cols);
        self.terminal.resize(cols.get(), rows.get());
    }

    /// Waits until nothing was drawn for `quiet` (counted from the call at
    /// the earliest) and nothing drawn is still on its way, at most `max`.
    pub async fn settle(&self, quiet: Duration, max: Duration) {
        let start = Instant::now();
        let deadline = start + max;
        loop {
            let since = self.lock().last_output.max(start).elapsed();
            let now = Instant::now();
            if now >= deadline || (since >= quiet && !self.terminal.output_pending()) {
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

    /// The first `n` characters of the screen with blank runs folded, for one-line reports.
    pub fn excerpt(&self, n: usize) -> String {
        let text = self.screen_text();
        let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
        folded.chars().take(n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_screen_model_follows_escape_sequences() {
        let v = View::new(Box::new(NoInput));
        v.feed(b"hello\r\nworld\x1b[1;1Hj");
        assert_eq!(v.screen_text(), "jello\nworld");
        assert_eq!(v.size(), (120, 30));
        v.resize(40, 10);
        assert_eq!(v.size(), (40, 10));
    }

    #[test]
    fn a_flood_keeps_memory_bounded() {
        let v = View::new(Box::new(NoInput));
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..64 {
            v.feed(&chunk);
        }
        assert_eq!(v.bytes_drawn(), 64 * 64 * 1024);
        assert!(v.screen_text().len() <= 30 * 121);
    }
}
