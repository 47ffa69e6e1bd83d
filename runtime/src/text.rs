//! Tick-supplied text made safe for a person's terminal: the one home of
//! the rule "nothing from a Tick reaches a terminal unfiltered".
//!
//! A Tick controls many strings tickbox prints: titles, tool names and
//! descriptions, error messages, the screen text, whatever ends up in a
//! JSON result. Printed raw, a string can carry escape sequences (set the
//! window title, write the clipboard with OSC 52, erase the line it is on),
//! or bidi and format characters that make text read differently from what
//! it is (U+202E turns `txt.exe` around). Everything printed goes through one
//! of these functions:
//!
//! - [`escape`]: one line of text; every unsafe character, newlines
//!   included, becomes a visible escape (`\x1b`, `\n`, `\u{202e}`);
//! - [`escape_lines`]: the same, but newlines stay (multi-line reports and
//!   the screen text);
//! - [`json_safe`]: a JSON document (as serde_json writes it) with every
//!   unsafe character inside strings written as a `\uXXXX` escape, so it is
//!   the same JSON value, valid, and inert on a terminal.
//!
//! [`is_unsafe`] decides what counts: C0 controls, DEL, C1 controls, and the
//! invisible format characters that steer layout (bidi marks, embeddings,
//! overrides and isolates, zero-width characters, line and paragraph
//! separators, the BOM, interlinear annotation, tag characters).
//!
//! ```
//! use tickbox_runtime::text::{escape, json_safe};
//! assert_eq!(escape("title\x1b]0;pwned\x07"), "title\\x1b]0;pwned\\x07");
//! assert_eq!(escape("abc\u{202e}exe"), "abc\\u{202e}exe");
//! assert_eq!(json_safe("{\"t\":\"a\u{9b}b\"}"), "{\"t\":\"a\\u009bb\"}");
//! ```

use std::fmt::Write;

/// Whether `c` must never reach a terminal as it is.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        // C0 controls, DEL, C1 controls.
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Arabic letter mark; Mongolian vowel separator.
        | '\u{61c}' | '\u{180e}'
        // Zero-width space/non-joiner/joiner, LRM, RLM.
        | '\u{200b}'..='\u{200f}'
        // Line and paragraph separators, LRE, RLE, PDF, LRO, RLO.
        | '\u{2028}'..='\u{202e}'
        // Word joiner, invisible operators, LRI, RLI, FSI, PDI, deprecated format controls.
        | '\u{2060}'..='\u{206f}'
        // Byte order mark / zero-width no-break space.
        | '\u{feff}'
        // Interlinear annotation controls.
        | '\u{fff9}'..='\u{fffb}'
        // Tag characters (invisible; can smuggle text).
        | '\u{e0000}'..='\u{e007f}'
    )
}

fn push_escaped(out: &mut String, c: char) {
    let _ = match c {
        '\n' => write!(out, "\\n"),
        '\r' => write!(out, "\\r"),
        '\t' => write!(out, "\\t"),
        c if (c as u32) < 0x100 => write!(out, "\\x{:02x}", c as u32),
        c => write!(out, "\\u{{{:x}}}", c as u32),
    };
}

/// One line for a terminal: every unsafe character, newlines included,
/// written as a visible escape.
pub fn escape(s: &str) -> String {
    if !s.chars().any(is_unsafe) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Text for a terminal that may span lines: like [`escape`], but `\n`
/// stays a line break.
pub fn escape_lines(s: &str) -> String {
    s.split('\n').map(escape).collect::<Vec<_>>().join("\n")
}

/// A JSON document safe for a terminal and still the same JSON value.
///
/// `json` must be serde_json output: it escapes C0 controls itself and
/// writes every other character as is, so unsafe characters can only occur
/// inside strings, where `\uXXXX` (a surrogate pair beyond the BMP) stands
/// for the same character.
pub fn json_safe(json: &str) -> String {
    if !json.chars().any(is_unsafe) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) && !matches!(c, '\n' | ' ' | '\t' | '\r') {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", u);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` cut to at most `max` characters (for bounded labels).
pub fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_format_characters_are_escaped() {
        assert_eq!(escape("plain ünïcode ✓ 漢字"), "plain ünïcode ✓ 漢字");
        assert_eq!(escape("a\x1b[2Kb\x07"), "a\\x1b[2Kb\\x07");
        assert_eq!(escape("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(escape("\u{7f}\u{85}\u{9b}"), "\\x7f\\x85\\x9b");
        for c in [
            '\u{200e}',
            '\u{200f}',
            '\u{202a}',
            '\u{202e}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{e0041}',
        ] {
            let e = escape(&c.to_string());
            assert!(e.starts_with("\\u{"), "{c:?} → {e}");
            assert!(!e.chars().any(is_unsafe));
        }
        assert_eq!(escape_lines("one\x1b\ntwo"), "one\\x1b\ntwo");
    }

    #[test]
    fn json_stays_the_same_value_and_valid() {
        let v = serde_json::json!({
            "t": "a\u{1b}]52;c;aGk=\u{7}\u{9b}31m\u{202e}\u{e0041}\u{7f}",
            "plain": "✓",
        });
        let raw = serde_json::to_string(&v).unwrap();
        let safe = json_safe(&raw);
        assert!(!safe.chars().any(is_unsafe), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&json_safe(&pretty)).unwrap(),
            v
        );
        assert!(json_safe(&pretty).contains('\n'), "layout whitespace stays");
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("héllo", 2), "hé");
        assert_eq!(truncate("hi", 5), "hi");
    }
}
