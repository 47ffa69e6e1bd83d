//! Key names in scenarios, encoded as the bytes an xterm sends.
//!
//! A single character is itself (`"+"`, `"q"`, `"é"`); anything longer is a
//! name: `enter`, `tab`, `backtab`, `backspace`, `esc`, `space`, `up`,
//! `down`, `left`, `right`, `home`, `end`, `pageup`, `pagedown`, `insert`,
//! `delete`, `f1`..`f12`, `ctrl-a`..`ctrl-z`, and `alt-` before any other key.
//! Names are case-insensitive.

/// Most keys in one `keys` step.
pub const MAX_KEYS: usize = 1024;
/// Longest `text` step, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;

/// The bytes for one key.
pub fn encode(key: &str) -> Result<Vec<u8>, String> {
    let mut chars = key.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Ok(c.to_string().into_bytes());
    }
    let lower = key.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("alt-") {
        // Keep the case of a single character after alt-.
        let inner = &key[4..];
        let mut v = vec![0x1b];
        v.extend(encode(if rest.chars().count() == 1 {
            inner
        } else {
            rest
        })?);
        return Ok(v);
    }
    if let Some(rest) = lower.strip_prefix("ctrl-") {
        let b = rest.as_bytes();
        if b.len() == 1 && b[0].is_ascii_lowercase() {
            return Ok(vec![b[0] - b'a' + 1]);
        }
        return Err(format!("unknown key {key:?}: ctrl- takes a letter a-z"));
    }
    let seq: &[u8] = match lower.as_str() {
        "enter" | "return" => b"\r",
        "tab" => b"\t",
        "backtab" | "shift-tab" => b"\x1b[Z",
        "backspace" => b"\x7f",
        "esc" | "escape" => b"\x1b",
        "space" => b" ",
        "up" => b"\x1b[A",
        "down" => b"\x1b[B",
        "right" => b"\x1b[C",
        "left" => b"\x1b[D",
        "home" => b"\x1b[H",
        "end" => b"\x1b[F",
        "pageup" => b"\x1b[5~",
        "pagedown" => b"\x1b[6~",
        "insert" => b"\x1b[2~",
        "delete" => b"\x1b[3~",
        "f1" => b"\x1bOP",
        "f2" => b"\x1bOQ",
        "f3" => b"\x1bOR",
        "f4" => b"\x1bOS",
        "f5" => b"\x1b[15~",
        "f6" => b"\x1b[17~",
        "f7" => b"\x1b[18~",
        "f8" => b"\x1b[19~",
        "f9" => b"\x1b[20~",
        "f10" => b"\x1b[21~",
        "f11" => b"\x1b[23~",
        "f12" => b"\x1b[24~",
        _ => {
            return Err(format!(
                "unknown key {key:?}: a single character, or a name such as enter, esc, up, ctrl-c, alt-x, f5 (use `text` for a string)"
            ))
        }
    };
    Ok(seq.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_characters() {
        assert_eq!(encode("+").unwrap(), b"+");
        assert_eq!(encode("é").unwrap(), "é".as_bytes());
        assert_eq!(encode("ctrl-c").unwrap(), b"\x03");
        assert_eq!(encode("Ctrl-A").unwrap(), b"\x01");
        assert_eq!(encode("UP").unwrap(), b"\x1b[A");
        assert_eq!(encode("alt-X").unwrap(), b"\x1bX");
        assert_eq!(encode("alt-enter").unwrap(), b"\x1b\r");
        assert_eq!(encode("f12").unwrap(), b"\x1b[24~");
        assert!(encode("ctrl-1")
            .unwrap_err()
            .contains("ctrl- takes a letter"));
        assert!(encode("").is_err());
        assert!(encode("hello").unwrap_err().contains("use `text`"));
    }
}
