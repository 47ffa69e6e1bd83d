//! Comparing what a Tick showed with what a scenario expects, and saying
//! how they differ in a few readable, bounded lines.
//!
//! Everything here may come from a Tick, so every rendering is escaped (no
//! control characters reach a terminal or a report) and bounded.

use serde_json::Value;
use std::fmt::Write;

/// Most differences listed for one state comparison.
pub const MAX_DIFFS: usize = 20;
/// Longest rendering of one JSON value in a report, in characters.
pub const MAX_VALUE_CHARS: usize = 2000;
/// Most lines of a screen diff.
pub const MAX_DIFF_LINES: usize = 200;
/// Longest screen line shown, in characters.
pub const MAX_LINE_CHARS: usize = 400;
/// Lines of each screen compared by [`screen_diff`] (a screen has at most
/// 500 rows; a longer snapshot file differs anyway).
pub const MAX_DIFF_INPUT_LINES: usize = 1000;

/// Whether two JSON values are equal, numbers compared by value (`1` == `1.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => match (x.as_u64(), y.as_u64()) {
                (Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            },
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Differences between `expected` and `found` as `(path, expected, found)`
/// lines; with `subset`, keys absent from an expected object are ignored.
pub fn differences(expected: &Value, found: &Value, subset: bool) -> Vec<String> {
    let mut out = Vec::new();
    walk(expected, found, subset, &mut String::new(), &mut out);
    out
}

fn walk(e: &Value, f: &Value, subset: bool, path: &mut String, out: &mut Vec<String>) {
    if out.len() > MAX_DIFFS {
        return;
    }
    match (e, f) {
        (Value::Object(eo), Value::Object(fo)) => {
            for (k, ev) in eo {
                let len = path.len();
                path.push('/');
                path.push_str(&k.replace('~', "~0").replace('/', "~1"));
                match fo.get(k) {
                    Some(fv) => walk(ev, fv, subset, path, out),
                    None => push(out, path, &render(ev), "(absent)"),
                }
                path.truncate(len);
            }
            if !subset {
                for k in fo.keys().filter(|k| !eo.contains_key(*k)) {
                    let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                    push(out, &p, "(absent)", &render(&fo[k]));
                }
            }
        }
        (Value::Array(ea), Value::Array(fa)) if ea.len() == fa.len() => {
            for (i, (ev, fv)) in ea.iter().zip(fa).enumerate() {
                let len = path.len();
                let _ = write!(path, "/{i}");
                walk(ev, fv, subset, path, out);
                path.truncate(len);
            }
        }
        (Value::Array(ea), Value::Array(fa)) => push(
            out,
            path,
            &format!("{} items: {}", ea.len(), render(e)),
            &format!("{} items: {}", fa.len(), render(f)),
        ),
        _ if json_eq(e, f) => {}
        _ => push(out, path, &render(e), &render(f)),
    }
}

fn push(out: &mut Vec<String>, path: &str, e: &str, f: &str) {
    if out.len() > MAX_DIFFS {
        return;
    }
    if out.len() == MAX_DIFFS {
        out.push(format!("… more differences (first {MAX_DIFFS} shown)"));
        return;
    }
    let at = if path.is_empty() { "(root)" } else { path };
    out.push(format!("{at}: expected {e}, found {f}"));
}

/// One JSON value on one bounded line, safe for a terminal (see [`tickbox_host::text`]).
pub fn render(v: &Value) -> String {
    clip(
        &tickbox_host::text::json_safe(&v.to_string()),
        MAX_VALUE_CHARS,
    )
}

/// The first `n` characters, with a marker when cut.
pub fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        None => s.to_string(),
        Some((i, _)) => format!("{}… ({} bytes in all)", &s[..i], s.len()),
    }
}

/// A screen line safe to print: unsafe characters escaped ([`tickbox_host::text::escape`]), length bounded.
pub fn printable(line: &str) -> String {
    clip(&tickbox_host::text::escape(line), MAX_LINE_CHARS)
}

/// A screen in snapshot form: trailing spaces trimmed from every line,
/// trailing empty lines dropped, one final newline.
pub fn normalize_screen(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end()).collect();
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    let mut out = lines[..end].join("\n");
    out.push('\n');
    out
}

/// A line diff of two screens, `-` expected and `+` found, with one line of
/// context around each change; empty when they are equal.
pub fn screen_diff(expected: &str, found: &str) -> Vec<String> {
    let e: Vec<&str> = expected.lines().take(MAX_DIFF_INPUT_LINES).collect();
    let f: Vec<&str> = found.lines().take(MAX_DIFF_INPUT_LINES).collect();
    // Longest common subsequence over lines; screens are at most a few
    // hundred rows (the scenario's size is bounded), so the table is small.
    let (n, m) = (e.len(), f.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if e[i] == f[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // (tag, line number in its screen, text)
    let mut ops: Vec<(char, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && e[i] == f[j] {
            ops.push((' ', j + 1, f[j]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', i + 1, e[i]));
            i += 1;
        } else {
            ops.push(('+', j + 1, f[j]));
            j += 1;
        }
    }
    if ops.iter().all(|o| o.0 == ' ') {
        return Vec::new();
    }
    let near_change = |k: usize| {
        let lo = k.saturating_sub(1);
        let hi = (k + 1).min(ops.len() - 1);
        (lo..=hi).any(|x| ops[x].0 != ' ')
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (k, (tag, line, text)) in ops.iter().enumerate() {
        if *tag == ' ' && !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped {
            out.push("  …".to_string());
            skipped = false;
        }
        if out.len() >= MAX_DIFF_LINES {
            out.push(format!("  … (diff cut at {MAX_DIFF_LINES} lines)"));
            break;
        }
        out.push(format!("{tag}{line:>4} |{}", printable(text)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_and_equality() {
        let found = json!({"count": 2, "history": [1, 2], "extra": "x"});
        assert!(differences(&json!({"count": 2.0}), &found, true).is_empty());
        let d = differences(&json!({"count": 3, "history": [1]}), &found, true);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0], "/count: expected 3, found 2");
        assert!(d[1].starts_with("/history: expected 1 items"), "{d:?}");
        let d = differences(&json!({"count": 2, "history": [1, 2]}), &found, false);
        assert_eq!(d, vec!["/extra: expected (absent), found \"x\""]);
        assert!(json_eq(&json!([1, {"a": 1.0}]), &json!([1.0, {"a": 1}])));
    }

    #[test]
    fn differences_are_bounded_and_escaped() {
        let e: Value = (0..100)
            .map(|i| (format!("k{i}"), json!(i)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        let d = differences(&e, &json!({}), true);
        assert_eq!(d.len(), MAX_DIFFS + 1);
        assert!(d.last().unwrap().contains("more differences"));
        let long = json!("x".repeat(10_000));
        assert!(render(&long).len() < MAX_VALUE_CHARS + 40);
        assert_eq!(printable("a\u{1b}[2Jb\u{202e}"), "a\\x1b[2Jb\\u{202e}");
        assert_eq!(render(&json!("\u{9b}")), "\"\\u009b\"");
    }

    #[test]
    fn screens() {
        assert_eq!(normalize_screen("a  \nb\n\n  \n"), "a\nb\n");
        assert_eq!(normalize_screen(""), "\n");
        assert!(screen_diff("a\nb\nc\n", "a\nb\nc\n").is_empty());
        let d = screen_diff("Counter: 2\nq quit\n", "Counter: 1\nq quit\n");
        assert_eq!(
            d,
            vec!["-   1 |Counter: 2", "+   1 |Counter: 1", "    2 |q quit"]
        );
        let big_e: String = (0..1000).map(|i| format!("e{i}\n")).collect();
        let big_f: String = (0..1000).map(|i| format!("f{i}\n")).collect();
        let d = screen_diff(&big_e, &big_f);
        assert_eq!(d.len(), MAX_DIFF_LINES + 1);
    }
}
