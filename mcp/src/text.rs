//! Text a Tick controls, made safe for an MCP client and a model's context.
//!
//! A Tick's title and its tools' descriptions end up in tool and resource
//! descriptions that clients show to people and hand to models. Control
//! characters and every invisible or default-ignorable character (the one
//! policy, [`tickbox_host::text::is_unsafe`]) are escaped as `\u{XXXX}`, so
//! nothing can reorder, hide or drive what a person or a model reads; and each text is length-bounded
//! ([`MAX_TITLE_CHARS`], [`MAX_DESCRIPTION_CHARS`]) with the cut said
//! in the text itself.

/// The longest Tick title the facade puts into a description, in characters.
pub const MAX_TITLE_CHARS: usize = 120;

/// The longest tool description the facade passes on, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 4096;

/// Escapes what the one policy names ([`tickbox_host::text::escape`]); keeps
/// `\n` (and `\t` as a space) when `multiline`, else escapes them too.
/// Cuts to `max` characters first and says so.
pub fn sanitize(text: &str, max: usize, multiline: bool) -> String {
    let kept = tickbox_host::text::truncate(text, max);
    let mut out = if multiline {
        tickbox_host::text::escape_lines(&kept.replace('\t', " "))
    } else {
        tickbox_host::text::escape(kept)
    };
    if kept.len() < text.len() {
        let cut = text[kept.len()..].chars().count();
        out.push_str(&format!(" … [{cut} more characters cut]"));
    }
    out
}

/// A Tick title: one line, at most [`MAX_TITLE_CHARS`], shown as a name
/// is ([`tickbox_host::text::name`]: a title that renders blank is
/// escaped whole).
pub fn title(text: &str) -> String {
    let kept = tickbox_host::text::truncate(text, MAX_TITLE_CHARS);
    let mut out = tickbox_host::text::name(kept);
    if kept.len() < text.len() {
        let cut = text[kept.len()..].chars().count();
        out.push_str(&format!(" … [{cut} more characters cut]"));
    }
    out
}

/// A tool description: lines kept, at most [`MAX_DESCRIPTION_CHARS`].
pub fn description(text: &str) -> String {
    sanitize(text, MAX_DESCRIPTION_CHARS, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blank_title_is_escaped_whole() {
        assert_eq!(title("\u{2800}\u{3164}"), "\\u{2800}\\u{3164}");
        assert_eq!(title("Counter"), "Counter");
    }

    #[test]
    fn plain_text_is_kept() {
        assert_eq!(title("Counter — ünïcode ok"), "Counter — ünïcode ok");
        assert_eq!(description("two\nlines\tand a tab"), "two\nlines and a tab");
    }

    #[test]
    fn controls_and_bidi_are_escaped() {
        assert_eq!(
            title("a\u{1b}[31mred\u{7}\nx\u{202E}evil\u{2066}"),
            "a\\x1b[31mred\\x07\\nx\\u{202e}evil\\u{2066}"
        );
        assert_eq!(description("\u{85}\u{200B}"), "\\x85\\u{200b}");
    }

    #[test]
    fn long_text_is_cut_and_says_so() {
        let t = title(&"x".repeat(MAX_TITLE_CHARS + 5));
        assert!(t.starts_with(&"x".repeat(MAX_TITLE_CHARS)));
        assert!(t.ends_with(" … [5 more characters cut]"), "{t}");
        let exact = "y".repeat(MAX_TITLE_CHARS);
        assert_eq!(title(&exact), exact, "at the bound nothing is cut");
        let d = description(&"é".repeat(MAX_DESCRIPTION_CHARS * 2));
        assert_eq!(
            d.chars().filter(|c| *c == 'é').count(),
            MAX_DESCRIPTION_CHARS
        );
    }
}
