//! Keys typed in a view, decoded from the bytes a terminal sends.
//!
//! Views are xterm-compatible (`TERM=xterm-256color`), so only the common
//! xterm sequences are decoded. Anything unrecognised becomes
//! [`Key::Unknown`] rather than being split into misleading characters.

/// One key press.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// A printable character (including space).
    Char(char),
    /// Ctrl plus a letter, as the lowercase letter (`Ctrl('c')`).
    Ctrl(char),
    Enter,
    Tab,
    BackTab,
    Backspace,
    Esc,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Insert,
    Delete,
    /// A sequence this decoder does not know, as raw bytes.
    Unknown(Vec<u8>),
}

/// Decodes a chunk of terminal input into keys.
///
/// A chunk is what one read returned; terminals send each escape sequence in
/// one write, so sequences are not carried across chunks. A lone `ESC` at the
/// end of a chunk is the Escape key.
pub fn decode(bytes: &[u8]) -> Vec<Key> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            0x1b => {
                let (key, used) = escape(&bytes[i..]);
                keys.push(key);
                i += used;
                continue;
            }
            b'\r' | b'\n' => keys.push(Key::Enter),
            b'\t' => keys.push(Key::Tab),
            0x7f | 0x08 => keys.push(Key::Backspace),
            0x01..=0x1a => keys.push(Key::Ctrl((b'a' + b - 1) as char)),
            0x00..=0x1f => keys.push(Key::Unknown(vec![b])),
            _ => {
                // UTF-8: take the whole character.
                let len = match b {
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    0xf0..=0xf7 => 4,
                    _ => 1,
                };
                let end = (i + len).min(bytes.len());
                match std::str::from_utf8(&bytes[i..end])
                    .ok()
                    .and_then(|s| s.chars().next())
                {
                    Some(c) => keys.push(Key::Char(c)),
                    None => keys.push(Key::Unknown(bytes[i..end].to_vec())),
                }
                i = end;
                continue;
            }
        }
        i += 1;
    }
    keys
}

/// Decodes an escape sequence at the start of `s`; returns the key and how
/// many bytes it used.
fn escape(s: &[u8]) -> (Key, usize) {
    match s.get(1) {
        None => (Key::Esc, 1),
        Some(b'[') | Some(b'O') => {
            // CSI/SS3: parameters then one final byte in 0x40..=0x7e.
            let Some(end) = s[2..].iter().position(|b| (0x40..=0x7e).contains(b)) else {
                return (Key::Unknown(s.to_vec()), s.len());
            };
            let used = 2 + end + 1;
            let params = &s[2..2 + end];
            let key = match (s[2 + end], params) {
                (b'A', _) => Key::Up,
                (b'B', _) => Key::Down,
                (b'C', _) => Key::Right,
                (b'D', _) => Key::Left,
                (b'H', _) => Key::Home,
                (b'F', _) => Key::End,
                (b'Z', _) => Key::BackTab,
                (b'~', b"1") | (b'~', b"7") => Key::Home,
                (b'~', b"4") | (b'~', b"8") => Key::End,
                (b'~', b"2") => Key::Insert,
                (b'~', b"3") => Key::Delete,
                (b'~', b"5") => Key::PageUp,
                (b'~', b"6") => Key::PageDown,
                _ => Key::Unknown(s[..used].to_vec()),
            };
            (key, used)
        }
        Some(0x1b) => (Key::Esc, 1),
        Some(_) => (Key::Unknown(s[..2].to_vec()), 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_keys_decode() {
        assert_eq!(
            decode(b"+-a\r\x7f\x03"),
            vec![
                Key::Char('+'),
                Key::Char('-'),
                Key::Char('a'),
                Key::Enter,
                Key::Backspace,
                Key::Ctrl('c')
            ]
        );
        assert_eq!(
            decode(b"\x1b[A\x1b[B\x1bOC\x1b[3~\x1b"),
            vec![Key::Up, Key::Down, Key::Right, Key::Delete, Key::Esc]
        );
        assert_eq!(decode("é".as_bytes()), vec![Key::Char('é')]);
        assert_eq!(
            decode(b"\x1b[99q"),
            vec![Key::Unknown(b"\x1b[99q".to_vec())]
        );
    }
}
