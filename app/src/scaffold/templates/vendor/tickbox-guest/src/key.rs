//! Keys typed in a view, decoded from the bytes a terminal sends.
//!
//! Views are xterm-compatible (`TERM=xterm-256color`), so only the common
//! xterm sequences are decoded. Anything unrecognised becomes
//! [`Key::Unknown`] rather than being split into misleading characters.
//!
//! A [`Decoder`] keeps an escape sequence or a UTF-8 character that a read
//! cut in two until the next read completes it (a view's bytes cross a
//! socket and a pipe, and nothing promises that one terminal write arrives
//! as one read). What it keeps is bounded by [`MAX_PENDING`]; a lone `ESC`
//! at the end of a read is still the Escape key, as terminals send it alone.

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

/// Bytes of an unfinished sequence a [`Decoder`] keeps at most; a longer
/// "sequence" is no key this decoder knows and becomes [`Key::Unknown`].
pub const MAX_PENDING: usize = 32;

/// Decodes terminal input read in chunks, keeping an unfinished escape
/// sequence or UTF-8 character until the next chunk.
#[derive(Debug, Default, Clone)]
pub struct Decoder {
    pending: Vec<u8>,
}

impl Decoder {
    /// A decoder with nothing pending.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// Decodes one chunk, together with what the previous one left unfinished.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        let mut input = std::mem::take(&mut self.pending);
        input.extend_from_slice(bytes);
        let (keys, used) = decode_prefix(&input);
        let rest = &input[used..];
        if rest.len() > MAX_PENDING {
            // Not a sequence anyone sends: give it up as one unknown key.
            let mut keys = keys;
            keys.push(Key::Unknown(rest.to_vec()));
            return keys;
        }
        self.pending = rest.to_vec();
        keys
    }

    /// Bytes kept from an unfinished sequence.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }
}

/// Decodes a chunk of terminal input into keys, on its own: an unfinished
/// sequence at the end becomes [`Key::Unknown`] (a [`Decoder`] would keep
/// it for the next chunk). A lone `ESC` at the end is the Escape key.
pub fn decode(bytes: &[u8]) -> Vec<Key> {
    let (mut keys, used) = decode_prefix(bytes);
    if used < bytes.len() {
        keys.push(Key::Unknown(bytes[used..].to_vec()));
    }
    keys
}

/// Decodes the complete keys at the start of `bytes`; returns them and how
/// many bytes they used. What is left is an unfinished escape sequence or
/// UTF-8 character (never a lone `ESC`, which is the Escape key).
fn decode_prefix(bytes: &[u8]) -> (Vec<Key>, usize) {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            0x1b => {
                let Some((key, used)) = escape(&bytes[i..]) else {
                    return (keys, i);
                };
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
                // UTF-8: take the whole character; an invalid sequence is
                // one unknown key of exactly its invalid bytes, so how the
                // input was split into reads never changes the keys.
                let len = match b {
                    0xc0..=0xdf => 2,
                    0xe0..=0xef => 3,
                    0xf0..=0xf7 => 4,
                    _ => 1,
                };
                let end = (i + len).min(bytes.len());
                match std::str::from_utf8(&bytes[i..end]) {
                    Ok(s) => {
                        let c = s.chars().next().unwrap_or(char::REPLACEMENT_CHARACTER);
                        keys.push(Key::Char(c));
                        i += c.len_utf8().max(1);
                    }
                    Err(e) => match e.error_len() {
                        // A character cut by the end of the chunk.
                        None if e.valid_up_to() == 0 => return (keys, i),
                        // (A valid prefix cannot happen: `len` is one character.)
                        None => i += e.valid_up_to(),
                        Some(n) => {
                            let n = n.clamp(1, end - i);
                            keys.push(Key::Unknown(bytes[i..i + n].to_vec()));
                            i += n;
                        }
                    },
                }
                continue;
            }
        }
        i += 1;
    }
    (keys, i)
}

/// Decodes an escape sequence at the start of `s`; returns the key and how
/// many bytes it used, or `None` when `s` ends inside the sequence.
fn escape(s: &[u8]) -> Option<(Key, usize)> {
    Some(match s.get(1) {
        None => (Key::Esc, 1),
        Some(b'[') | Some(b'O') => {
            // CSI/SS3: parameters then one final byte in 0x40..=0x7e.
            let end = s[2..].iter().position(|b| (0x40..=0x7e).contains(b))?;
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
    })
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
        assert_eq!(
            decode(b"a\x1b[1"),
            vec![Key::Char('a'), Key::Unknown(b"\x1b[1".to_vec())]
        );
    }

    #[test]
    fn sequences_split_across_reads_are_kept() {
        let mut d = Decoder::new();
        assert_eq!(d.feed(b"a\x1b["), vec![Key::Char('a')]);
        assert_eq!(d.pending(), b"\x1b[");
        assert_eq!(d.feed(b"3"), vec![]);
        assert_eq!(d.feed(b"~b"), vec![Key::Delete, Key::Char('b')]);
        let e = "é".as_bytes();
        assert_eq!(d.feed(&e[..1]), vec![]);
        assert_eq!(d.feed(&e[1..]), vec![Key::Char('é')]);
        // Every split of a mixed input decodes to the same keys.
        let input = "x\x1b[A€\x1bOD\x1b[5~\r".as_bytes();
        let whole = decode(input);
        for cut in 0..=input.len() {
            let mut d = Decoder::new();
            let mut keys = d.feed(&input[..cut]);
            keys.extend(d.feed(&input[cut..]));
            // (A read that ends in a lone ESC is the Escape key by design.)
            if cut == 0 || input[cut - 1] != 0x1b {
                assert_eq!(keys, whole, "split at {cut}");
            }
        }
        // A lone ESC at the end of a read is the Escape key.
        assert_eq!(Decoder::new().feed(b"\x1b"), vec![Key::Esc]);
        // What is kept is bounded.
        let mut d = Decoder::new();
        let mut junk = b"\x1b[".to_vec();
        junk.extend(std::iter::repeat_n(b'1', 100));
        assert_eq!(d.feed(&junk), vec![Key::Unknown(junk.clone())]);
        assert!(d.pending().is_empty());
    }
}
