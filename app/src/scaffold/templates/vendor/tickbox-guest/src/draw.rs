//! A ratatui backend that turns cells into xterm escape sequences and hands
//! them to the platform's terminal (the `terminal.draw` import of a wasm
//! Tick, the controlling tty of a native one).
//!
//! One backend serves every target, so a Tick's view looks the same in the
//! sandbox and natively, and no terminal library that assumes a real tty
//! (crossterm) has to build for wasm. Output is buffered and handed over in
//! one piece per frame so a view never shows half a frame.
//!
//! A frame that changes nothing hands over nothing. ratatui redraws after
//! every event and calls `draw` with an empty diff, `hide_cursor` or
//! `show_cursor` and `set_cursor_position` each time; the backend writes a
//! cursor's visibility or position only when it differs from what it last
//! wrote, so a read-only call costs the host no `terminal.draw` (each one
//! is a host call and a wake-up of the view's parser thread). What it last
//! wrote is forgotten after a resize, a clear and any [`crate::log!`] line
//! (which moves the cursor behind the backend's back), so those are written
//! again.

use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bumped by every [`crate::log!`] line: the view's cursor moved without the
/// backend knowing.
static LOGGED: AtomicU64 = AtomicU64::new(0);

/// Tells every backend that something else wrote to the view.
pub(crate) fn note_foreign_write() {
    LOGGED.fetch_add(1, Ordering::Relaxed);
}

/// Where a finished frame goes.
pub(crate) type Sink = Box<dyn FnMut(&[u8])>;

/// The SDK's ratatui backend.
pub struct AnsiBackend {
    buf: String,
    size: Size,
    cursor: Position,
    sink: Sink,
    /// The cursor visibility last written, if known.
    shown: Option<bool>,
    /// Where the last cursor move left the view's cursor, if it is known to
    /// be there still (no cell, clear or log line written since).
    placed: Option<Position>,
    /// [`LOGGED`] when `shown` and `placed` were last confirmed.
    logged: u64,
}

impl AnsiBackend {
    pub(crate) fn new(cols: u16, rows: u16, sink: Sink) -> AnsiBackend {
        AnsiBackend {
            buf: String::new(),
            size: Size::new(cols.max(1), rows.max(1)),
            cursor: Position::ORIGIN,
            sink,
            shown: None,
            placed: None,
            logged: LOGGED.load(Ordering::Relaxed),
        }
    }

    /// Records a new terminal size; the next draw repaints at that size.
    pub(crate) fn set_size(&mut self, cols: u16, rows: u16) {
        self.size = Size::new(cols.max(1), rows.max(1));
        self.forget();
    }

    /// Forgets what the view's cursor looks like: the next frame writes it.
    fn forget(&mut self) {
        self.shown = None;
        self.placed = None;
    }

    /// Forgets the cursor if a log line was written since the last check.
    fn check_foreign(&mut self) {
        let logged = LOGGED.load(Ordering::Relaxed);
        if logged != self.logged {
            self.logged = logged;
            self.forget();
        }
    }

    fn cursor_visibility(&mut self, shown: bool) {
        self.check_foreign();
        if self.shown != Some(shown) {
            self.buf
                .push_str(if shown { "\x1b[?25h" } else { "\x1b[?25l" });
            self.shown = Some(shown);
        }
    }

    fn move_to(&mut self, x: u16, y: u16) {
        let _ = write!(self.buf, "\x1b[{};{}H", y + 1, x + 1);
    }
}

fn color(buf: &mut String, c: Color, base: u8) {
    // `base` is 30 for foreground and 40 for background.
    let _ = match c {
        Color::Reset => write!(buf, ";{}", base + 9),
        Color::Black => write!(buf, ";{}", base),
        Color::Red => write!(buf, ";{}", base + 1),
        Color::Green => write!(buf, ";{}", base + 2),
        Color::Yellow => write!(buf, ";{}", base + 3),
        Color::Blue => write!(buf, ";{}", base + 4),
        Color::Magenta => write!(buf, ";{}", base + 5),
        Color::Cyan => write!(buf, ";{}", base + 6),
        Color::Gray => write!(buf, ";{}", base + 7),
        Color::DarkGray => write!(buf, ";{}", base + 60),
        Color::LightRed => write!(buf, ";{}", base + 61),
        Color::LightGreen => write!(buf, ";{}", base + 62),
        Color::LightYellow => write!(buf, ";{}", base + 63),
        Color::LightBlue => write!(buf, ";{}", base + 64),
        Color::LightMagenta => write!(buf, ";{}", base + 65),
        Color::LightCyan => write!(buf, ";{}", base + 66),
        Color::White => write!(buf, ";{}", base + 67),
        Color::Indexed(i) => write!(buf, ";{};5;{i}", base + 8),
        Color::Rgb(r, g, b) => write!(buf, ";{};2;{r};{g};{b}", base + 8),
    };
}

/// One SGR sequence that sets exactly this style from scratch.
fn sgr(buf: &mut String, cell: &Cell) {
    buf.push_str("\x1b[0");
    const MODS: [(Modifier, &str); 9] = [
        (Modifier::BOLD, ";1"),
        (Modifier::DIM, ";2"),
        (Modifier::ITALIC, ";3"),
        (Modifier::UNDERLINED, ";4"),
        (Modifier::SLOW_BLINK, ";5"),
        (Modifier::RAPID_BLINK, ";6"),
        (Modifier::REVERSED, ";7"),
        (Modifier::HIDDEN, ";8"),
        (Modifier::CROSSED_OUT, ";9"),
    ];
    for (m, code) in MODS {
        if cell.modifier.contains(m) {
            buf.push_str(code);
        }
    }
    color(buf, cell.fg, 30);
    color(buf, cell.bg, 40);
    buf.push('m');
}

impl Backend for AnsiBackend {
    type Error = std::io::Error;

    fn draw<'a, I>(&mut self, content: I) -> std::io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let mut last: Option<(u16, u16)> = None;
        let mut style: Option<(Color, Color, Modifier)> = None;
        let mut content = content.peekable();
        if content.peek().is_none() {
            // Nothing changed: nothing to write, not even a style reset.
            return Ok(());
        }
        // Writing cells moves the view's cursor.
        self.placed = None;
        for (x, y, cell) in content {
            if last != Some((x.wrapping_sub(1), y)) || x == 0 {
                self.move_to(x, y);
            }
            last = Some((x, y));
            let this = (cell.fg, cell.bg, cell.modifier);
            if style != Some(this) {
                sgr(&mut self.buf, cell);
                style = Some(this);
            }
            self.buf.push_str(cell.symbol());
        }
        self.buf.push_str("\x1b[0m");
        Ok(())
    }

    fn hide_cursor(&mut self) -> std::io::Result<()> {
        self.cursor_visibility(false);
        Ok(())
    }

    fn show_cursor(&mut self) -> std::io::Result<()> {
        self.cursor_visibility(true);
        Ok(())
    }

    fn get_cursor_position(&mut self) -> std::io::Result<Position> {
        // Asking the terminal would need a round trip through the key
        // stream; the last position set is what ratatui needs.
        Ok(self.cursor)
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> std::io::Result<()> {
        let p = position.into();
        self.cursor = p;
        self.check_foreign();
        if self.placed != Some(p) {
            self.move_to(p.x, p.y);
            self.placed = Some(p);
        }
        Ok(())
    }

    fn clear(&mut self) -> std::io::Result<()> {
        self.buf.push_str("\x1b[0m\x1b[2J\x1b[H");
        self.forget();
        Ok(())
    }

    fn clear_region(&mut self, clear_type: ClearType) -> std::io::Result<()> {
        self.forget();
        self.buf.push_str(match clear_type {
            ClearType::All => "\x1b[2J",
            ClearType::AfterCursor => "\x1b[J",
            ClearType::BeforeCursor => "\x1b[1J",
            ClearType::CurrentLine => "\x1b[2K",
            ClearType::UntilNewLine => "\x1b[K",
        });
        Ok(())
    }

    fn size(&self) -> std::io::Result<Size> {
        Ok(self.size)
    }

    fn window_size(&mut self) -> std::io::Result<WindowSize> {
        Ok(WindowSize {
            columns_rows: self.size,
            pixels: Size::new(0, 0),
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            (self.sink)(self.buf.as_bytes());
            self.buf.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::widgets::Paragraph;
    use std::sync::{Arc, Mutex};

    #[test]
    fn frames_become_escape_sequences_in_one_piece() {
        let out = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
        let o = out.clone();
        let backend =
            AnsiBackend::new(10, 2, Box::new(move |b| o.lock().unwrap().push(b.to_vec())));
        let mut term = ratatui::Terminal::new(backend).unwrap();
        term.draw(|f| f.render_widget(Paragraph::new("hi"), f.area()))
            .unwrap();
        let chunks = out.lock().unwrap().clone();
        assert_eq!(chunks.len(), 1, "one write per frame: {chunks:?}");
        let text = String::from_utf8(chunks[0].clone()).unwrap();
        assert!(text.contains("\x1b[1;1H"), "{text:?}");
        assert!(text.contains("hi"), "{text:?}");
    }

    fn recording(
        cols: u16,
        rows: u16,
    ) -> (ratatui::Terminal<AnsiBackend>, Arc<Mutex<Vec<String>>>) {
        let out = Arc::new(Mutex::new(Vec::<String>::new()));
        let o = out.clone();
        let backend = AnsiBackend::new(
            cols,
            rows,
            Box::new(move |b| {
                o.lock()
                    .unwrap()
                    .push(String::from_utf8(b.to_vec()).unwrap())
            }),
        );
        (ratatui::Terminal::new(backend).unwrap(), out)
    }

    #[test]
    fn an_unchanged_frame_hands_over_nothing_and_a_change_is_written() {
        let (mut term, out) = recording(10, 2);
        let draw = |term: &mut ratatui::Terminal<AnsiBackend>, text: &str| {
            term.draw(|f| f.render_widget(Paragraph::new(text.to_string()), f.area()))
                .unwrap();
        };
        draw(&mut term, "hi");
        assert_eq!(out.lock().unwrap().len(), 1);
        // The same view again: no write at all (not even a style reset).
        draw(&mut term, "hi");
        draw(&mut term, "hi");
        assert_eq!(out.lock().unwrap().len(), 1, "{:?}", out.lock().unwrap());
        // Positive control: a change is written, and only the change.
        draw(&mut term, "ho");
        let chunks = out.lock().unwrap().clone();
        assert_eq!(chunks.len(), 2, "{chunks:?}");
        assert!(
            chunks[1].contains('o') && !chunks[1].contains('h'),
            "{chunks:?}"
        );
        assert!(
            !chunks[1].contains("?25l"),
            "visibility is written once: {chunks:?}"
        );

        // The cursor is written when it changes or may have moved. (In the
        // same test: the log counter is process-wide, and another test
        // bumping it would make the first half's "nothing" a write.)
        let (mut term, out) = recording(10, 2);
        let draw = |term: &mut ratatui::Terminal<AnsiBackend>, at: (u16, u16)| {
            term.draw(|f| {
                f.render_widget(Paragraph::new("x"), f.area());
                f.set_cursor_position(at);
            })
            .unwrap();
        };
        draw(&mut term, (3, 1));
        let first = out.lock().unwrap().clone();
        assert!(
            first[0].contains("\x1b[?25h") && first[0].ends_with("\x1b[2;4H"),
            "{first:?}"
        );
        draw(&mut term, (3, 1));
        assert_eq!(
            out.lock().unwrap().len(),
            1,
            "same cursor, same cells: nothing"
        );
        draw(&mut term, (5, 0));
        assert_eq!(out.lock().unwrap().last().unwrap(), "\x1b[1;6H");
        // A log line moves the view's cursor behind the backend's back.
        crate::draw::note_foreign_write();
        draw(&mut term, (5, 0));
        let last = out.lock().unwrap().last().unwrap().clone();
        assert_eq!(last, "\x1b[?25h\x1b[1;6H");
        // A resize forgets too (and ratatui repaints every cell).
        term.backend_mut().set_size(12, 3);
        draw(&mut term, (5, 0));
        let last = out.lock().unwrap().last().unwrap().clone();
        assert!(
            last.contains('x') && last.ends_with("\x1b[?25h\x1b[1;6H"),
            "{last:?}"
        );
    }
}
