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
//! [`is_unsafe`] is the one character policy, taken from Unicode's own
//! data rather than a hand list: every control (general category Cc: C0,
//! DEL, C1), every format character (Cf: bidi marks, embeddings,
//! overrides and isolates, zero-width characters, the BOM, soft hyphen,
//! interlinear annotation, tag characters, ...), the line and paragraph
//! separators (Zl, Zp), and every other default-ignorable code point
//! (Unicode's `Other_Default_Ignorable_Code_Point` and `Variation_Selector`
//! properties: Hangul fillers, the combining grapheme joiner, variation
//! selectors, the reserved tag block). The general categories come from
//! the `unicode-general-category` crate (Unicode's data tables); the two
//! small property lists are below, with the Unicode version they follow.
//!
//! [`TickText`] carries a string a Tick controls so that the only ways to
//! get it out are escaped for their sink: a terminal or log line
//! (`Display`, [`TickText::line`]), several lines ([`TickText::lines`]),
//! XML ([`TickText::xml`]), JSON text ([`json_safe`]) or a JSON value an
//! agent reads ([`inert_value`]). The raw string is there only for the
//! Tick's own protocol ([`TickText::wire`]).
//!
//! ```
//! use tickbox_protocol::text::{escape, json_safe};
//! assert_eq!(escape("title\x1b]0;pwned\x07"), "title\\x1b]0;pwned\\x07");
//! assert_eq!(escape("abc\u{202e}exe"), "abc\\u{202e}exe");
//! assert_eq!(json_safe("{\"t\":\"a\u{9b}b\"}"), "{\"t\":\"a\\u009bb\"}");
//! ```

use std::fmt::{self, Write};
use unicode_general_category::{get_general_category, GeneralCategory};

/// Whether `c` must never reach a person or a log as it is.
pub fn is_unsafe(c: char) -> bool {
    // Printable ASCII is by far the most common case: decide it at once.
    if (' '..='~').contains(&c) {
        return false;
    }
    matches!(
        get_general_category(c),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || is_other_default_ignorable(c)
}

/// Default-ignorable code points that are not format characters (Unicode
/// 16's `Other_Default_Ignorable_Code_Point` and `Variation_Selector`):
/// rendered as nothing, so they can hide or split text a person reads.
fn is_other_default_ignorable(c: char) -> bool {
    matches!(c,
        // Other_Default_Ignorable_Code_Point.
        '\u{34f}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}' | '\u{2065}'
        | '\u{3164}' | '\u{ffa0}' | '\u{fff0}'..='\u{fff8}' | '\u{e0000}'
        | '\u{e0002}'..='\u{e001f}' | '\u{e0080}'..='\u{e00ff}' | '\u{e01f0}'..='\u{e0fff}'
        // Variation_Selector.
        | '\u{180b}'..='\u{180d}' | '\u{180f}' | '\u{fe00}'..='\u{fe0f}'
        | '\u{e0100}'..='\u{e01ef}'
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

/// Characters that render as blank but are neither whitespace nor
/// default-ignorable, so [`is_unsafe`] keeps them for screens (a braille
/// drawing uses U+2800 as its empty cell): in a name they are escaped.
fn renders_blank_in_a_name(c: char) -> bool {
    matches!(c, '\u{2800}')
}

/// Whether `s` would show a person nothing to read: not empty, and made
/// only of whitespace (Unicode `White_Space`: spaces of every width,
/// no-break spaces, the ideographic space) and characters that render as
/// blank (U+2800 BRAILLE PATTERN BLANK, the Hangul fillers, which
/// [`is_unsafe`] already names).
pub fn renders_blank(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| {
            c.is_whitespace() || renders_blank_in_a_name(c) || is_other_default_ignorable(c)
        })
}

/// A name, kind or title a person tells a Tick by, as one line: escaped as
/// [`escape`] does, with U+2800 BRAILLE PATTERN BLANK escaped too, and,
/// when the whole text would render blank ([`renders_blank`]), every
/// character escaped, so a Tick cannot pass for a nameless or an
/// identically shown one.
pub fn name(s: &str) -> String {
    let blank = renders_blank(s);
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if blank || is_unsafe(c) || renders_blank_in_a_name(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// One line for a terminal: every unsafe character, newlines included,
/// written as a visible escape.
pub fn escape(s: &str) -> String {
    escape_except(s, |_| false)
}

/// `s` with every unsafe character that `keep` does not keep written as a
/// visible escape: the one loop behind [`escape`] and [`escape_data`].
fn escape_except(s: &str, keep: fn(char) -> bool) -> String {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
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

/// A TOML basic string holding `s`: quotes and backslashes escaped, line
/// breaks and tabs as `\n`, `\r`, `\t`, and every other unsafe character
/// as `\uXXXX` or `\UXXXXXXXX` (the same value when read back, and nothing
/// in the file that moves a terminal's cursor or reorders a line). The one
/// form for every TOML file tickbox writes (a suggested policy, a recorded
/// scenario).
pub fn toml_string(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || is_unsafe(c) => {
                let n = u32::from(c);
                if n <= 0xFFFF {
                    let _ = write!(out, "\\u{n:04X}");
                } else {
                    let _ = write!(out, "\\U{n:08X}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    // No more bytes than `max`, so no more characters.
    if s.len() <= max {
        return s;
    }
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `s` with every unsafe character written as a visible escape except
/// `\n` and `\t`, which stay: the policy for strings inside a JSON value
/// an agent reads, where a line break is data and cannot end a frame.
pub fn escape_data(s: &str) -> String {
    escape_except(s, is_data_break)
}

/// Line breaks and tabs: data inside a JSON string, kept by [`escape_data`].
fn is_data_break(c: char) -> bool {
    matches!(c, '\n' | '\t')
}

/// Whether [`escape_data`] would leave `s` as it is.
pub fn is_inert_data(s: &str) -> bool {
    !s.chars().any(|c| is_unsafe(c) && !is_data_break(c))
}

/// Makes a JSON value inert for a person or a model that reads it: every
/// string and object key goes through [`escape_data`]. Unlike
/// [`json_safe`] (same value, escaped encoding) this changes the value,
/// which is the point where the reader decodes JSON before showing it (an
/// MCP client, a model's context). Returns whether anything changed.
pub fn inert_value(v: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match v {
        // A clean string (nearly all of them) is only read, never copied:
        // every MCP result passes here on the call path.
        Value::String(s) if is_inert_data(s) => false,
        Value::String(s) => {
            *s = escape_data(s);
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| inert_value(i) | c),
        Value::Object(map) => {
            let mut changed = false;
            if map.keys().any(|k| k.chars().any(is_unsafe)) {
                let old = std::mem::take(map);
                for (k, v) in old {
                    map.insert(escape_data(&k), v);
                }
                changed = true;
            }
            map.values_mut().fold(changed, |c, i| inert_value(i) | c)
        }
        _ => false,
    }
}

/// Text a Tick controls: a method name or id it sent, a tool name, title,
/// description, error message, screen text, log line, or a name read from
/// a scenario file.
///
/// There is no `Deref` to `str`: the ways out are escaped for their sink.
/// `Display` (and so `%` in a `tracing` field or `{}` in a message) writes
/// one escaped line; `Debug` the same in quotes. [`wire`](Self::wire) is
/// the raw text, for the protocol back to the Tick and for comparisons.
///
/// It serializes as the raw string (a JSON sink escapes the encoded text:
/// [`json_safe`]), so a wire format can carry it on.
#[derive(
    Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct TickText(Box<str>);

impl TickText {
    /// Wraps text that came from a Tick (or a file tickbox did not write).
    pub fn new(s: impl Into<Box<str>>) -> TickText {
        TickText(s.into())
    }

    /// The raw text, only for the protocol (sending it back to the Tick),
    /// comparisons and lookups; never for a person or a log.
    pub fn wire(&self) -> &str {
        &self.0
    }

    /// One line for a terminal, a log line or a text report.
    pub fn line(&self) -> String {
        escape(&self.0)
    }

    /// Several lines for a terminal: like [`line`](Self::line), but line
    /// breaks stay.
    pub fn lines(&self) -> String {
        escape_lines(&self.0)
    }

    /// One line for XML text or an attribute value (JUnit): escaped for a
    /// terminal first, then `&`, `<`, `>`, `"` and `'` as entities.
    pub fn xml(&self) -> String {
        xml(&self.0)
    }

    /// A JSON string for a reader that decodes it (an MCP result).
    pub fn data(&self) -> String {
        escape_data(&self.0)
    }

    /// The length of the raw text in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&str> for TickText {
    fn from(s: &str) -> TickText {
        TickText::new(s)
    }
}

impl From<String> for TickText {
    fn from(s: String) -> TickText {
        TickText::new(s)
    }
}

impl fmt::Display for TickText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if is_unsafe(c) {
                let mut buf = String::new();
                push_escaped(&mut buf, c);
                f.write_str(&buf)?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for TickText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// A JSON value a Tick controls: its state (`tick/update`, `tick/read`),
/// the part of it a delivery carries, an error's `data`.
///
/// The value counterpart of [`TickText`]: no `Deref` to the value, and
/// every way out is made for its sink. [`json`](Self::json) is JSON text
/// for a terminal or a file (the same value, unsafe characters written as
/// `\uXXXX`: [`json_safe`]); `Display` is that text on one line;
/// [`inert`](Self::inert) is a copy for a reader that decodes JSON before
/// showing it (an MCP client, a model's context: [`inert_value`]).
/// [`wire`](Self::wire) is the raw value, for the protocol, trimming,
/// comparisons and assertions, never for a person.
#[derive(Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TickData(serde_json::Value);

impl TickData {
    /// Wraps a value that came from a Tick.
    pub fn new(v: serde_json::Value) -> TickData {
        TickData(v)
    }

    /// The raw value: protocol, trimming, comparisons; never a person.
    pub fn wire(&self) -> &serde_json::Value {
        &self.0
    }

    /// The raw value, taken out (for the protocol, as [`wire`](Self::wire)).
    pub fn into_wire(self) -> serde_json::Value {
        self.0
    }

    /// JSON text for a terminal, a file or a log: the same value, encoded
    /// inert ([`json_safe`]).
    pub fn json(&self) -> String {
        json_safe(&self.0.to_string())
    }

    /// Indented JSON text, inert as [`json`](Self::json).
    pub fn json_pretty(&self) -> String {
        json_safe(&serde_json::to_string_pretty(&self.0).unwrap_or_default())
    }

    /// A copy for a reader that decodes JSON before showing it: every
    /// string and key through [`escape_data`].
    pub fn inert(&self) -> serde_json::Value {
        let mut v = self.0.clone();
        inert_value(&mut v);
        v
    }

    /// Whether the value is JSON `null` (no state yet).
    pub fn is_null(&self) -> bool {
        self.0.is_null()
    }
}

impl From<serde_json::Value> for TickData {
    fn from(v: serde_json::Value) -> TickData {
        TickData(v)
    }
}

impl fmt::Display for TickData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json())
    }
}

impl fmt::Debug for TickData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json())
    }
}

/// One line for XML text or an attribute value: [`escape`] first (XML 1.0
/// cannot carry most controls at all), then [`xml_markup`].
pub fn xml(s: &str) -> String {
    xml_markup(&escape(s))
}

/// Escapes text for XML content and attribute values: the markup
/// characters and line breaks as entities, characters XML 1.0 cannot
/// represent at all (most C0 controls, U+FFFE, U+FFFF) as U+FFFD.
pub fn xml_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Whether a whole string is safe for a terminal as it is.
pub fn is_inert(s: &str) -> bool {
    !s.chars().any(is_unsafe)
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
    fn a_name_that_renders_blank_is_escaped_whole() {
        for blank in [
            "\u{2800}",
            "\u{3164}\u{3164}",
            " ",
            "\u{a0}\u{3000}",
            "\u{2800} \u{115f}",
        ] {
            let shown = name(blank);
            assert!(
                !shown.is_empty() && !renders_blank(&shown),
                "{blank:?} -> {shown:?}"
            );
            assert!(shown.chars().all(|c| c.is_ascii_graphic()), "{shown:?}");
        }
        // The braille blank is escaped inside a name too (it would pass
        // for a space), but kept on screens (escape) where braille art uses it.
        assert_eq!(name("Counter\u{2800}"), "Counter\\u{2800}");
        assert_eq!(escape("\u{2800}\u{2801}"), "\u{2800}\u{2801}");
        // Positive controls: an ordinary name, spaces inside it, and the
        // empty name are as they were.
        assert_eq!(name("Counter — ünïcode"), "Counter — ünïcode");
        assert_eq!(name("two words"), "two words");
        assert_eq!(name(""), "");
        assert_eq!(name("a\u{1b}]0;x"), escape("a\u{1b}]0;x"));
    }

    #[test]
    fn a_toml_string_escapes_what_toml_and_a_terminal_need() {
        assert_eq!(toml_string("plain"), "\"plain\"");
        assert_eq!(
            toml_string("a\"b\\c\nd\te\u{1b}[2J\u{202e}"),
            "\"a\\\"b\\\\c\\nd\\te\\u001B[2J\\u202E\""
        );
        assert!(!toml_string("\u{7f}\u{85}\u{e0001}").chars().any(is_unsafe));
        assert_eq!(toml_string("\u{e0001}"), "\"\\U000E0001\"");
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("héllo", 2), "hé");
        assert_eq!(truncate("hi", 5), "hi");
    }

    #[test]
    fn the_policy_follows_unicode_categories_and_default_ignorables() {
        // Hangul fillers, soft hyphen, combining grapheme joiner, variation
        // selectors, tag characters, Mongolian vowel separator, bidi marks.
        for c in [
            '\u{115f}',
            '\u{1160}',
            '\u{3164}',
            '\u{ffa0}',
            '\u{ad}',
            '\u{34f}',
            '\u{fe0f}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{e0100}',
            '\u{180e}',
            '\u{2028}',
            '\u{2029}',
            '\u{600}',
            '\u{110bd}',
            '\u{1d173}',
            '\u{13430}',
            '\u{85}',
            '\u{9b}',
        ] {
            assert!(is_unsafe(c), "{:x}", c as u32);
        }
        for c in [
            'a',
            ' ',
            '~',
            'é',
            '漢',
            '✓',
            '\u{301}',
            '\u{a0}',
            '\u{1f600}',
            '\u{3000}',
        ] {
            assert!(!is_unsafe(c), "{:x}", c as u32);
        }
    }

    #[test]
    fn tick_text_leaves_only_through_escaped_ways() {
        let t = TickText::new("x\x1b]52;c;aGk=\x07\ny\u{202e}\u{e0041}");
        assert_eq!(t.to_string(), t.line());
        assert!(is_inert(&t.to_string()));
        assert!(!t.to_string().contains('\n'));
        assert_eq!(format!("{t:?}"), format!("\"{}\"", t.line()));
        assert_eq!(t.lines().lines().count(), 2);
        assert_eq!(
            TickText::new("<a href='x'>&").xml(),
            "&lt;a href=&apos;x&apos;&gt;&amp;"
        );
        assert!(t.data().contains('\n'));
        assert!(is_inert(&t.data().replace('\n', "")));
        assert_eq!(t.wire().len(), t.len());
    }

    #[test]
    fn inert_values_escape_every_string_and_key() {
        let mut v = serde_json::json!({"k\u{202e}": ["a\u{200b}", {"n": "two\nlines"}], "x": 1});
        assert!(inert_value(&mut v));
        let s = serde_json::to_string(&v).unwrap();
        let back: serde_json::Value = serde_json::from_str(&s).unwrap();
        let mut all = String::new();
        fn walk(v: &serde_json::Value, out: &mut String) {
            match v {
                serde_json::Value::String(s) => out.push_str(s),
                serde_json::Value::Array(a) => a.iter().for_each(|i| walk(i, out)),
                serde_json::Value::Object(m) => m.iter().for_each(|(k, i)| {
                    out.push_str(k);
                    walk(i, out)
                }),
                _ => {}
            }
        }
        walk(&back, &mut all);
        assert!(is_inert(&all.replace('\n', "")), "{all}");
        assert_eq!(
            back["k\\u{202e}"][1]["n"], "two\nlines",
            "line breaks are data"
        );
        let mut plain = serde_json::json!({"a": ["b", 1]});
        assert!(!inert_value(&mut plain));
    }
}
