//! A ratatui backend that turns cells into xterm escape sequences and hands
//! them to the platform's terminal (the `terminal.draw` import of a wasm
//! Tick, the controlling tty of a native one).
//!
//! One backend serves every target, so a Tick's view looks the same in the
//! sandbox and natively, and no terminal library that assumes a real tty
//! (crossterm) has to build for wasm. Output is buffered and handed over in
//! one piece per frame so a view never shows half a frame.

use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};
use std::fmt::Write as _;

/// Where a finished frame goes.
pub(crate) type Sink = Box<dyn FnMut(&[u8])>;

/// The SDK's ratatui backend.
pub struct AnsiBackend {
    buf: String,
    size: Size,
    cursor: Position,
    sink: Sink,
}

impl AnsiBackend {
    pub(crate) fn new(cols: u16, rows: u16, sink: Sink) -> AnsiBackend {
        AnsiBackend {
            buf: String::new(),
            size: Size::new(cols.max(1), rows.max(1)),
            cursor: Position::ORIGIN,
            sink,
        }
    }

    /// Records a new terminal size; the next draw repaints at that size.
    pub(crate) fn set_size(&mut self, cols: u16, rows: u16) {
        self.size = Size::new(cols.max(1), rows.max(1));
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
        self.buf.push_str("\x1b[?25l");
        Ok(())
    }

    fn show_cursor(&mut self) -> std::io::Result<()> {
        self.buf.push_str("\x1b[?25h");
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
        self.move_to(p.x, p.y);
        Ok(())
    }

    fn clear(&mut self) -> std::io::Result<()> {
        self.buf.push_str("\x1b[0m\x1b[2J\x1b[H");
        Ok(())
    }

    fn clear_region(&mut self, clear_type: ClearType) -> std::io::Result<()> {
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
}
