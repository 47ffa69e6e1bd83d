//! One file read as tokens, with comments and literals gone, and what the
//! graph needs from it: the modules it declares, the items it defines, its
//! `use` declarations and the paths written in its code.
//!
//! A token-level scan, not a parser: it knows only as much Rust as that
//! needs (nested block comments, raw strings, char literals versus
//! lifetimes, `r#` identifiers), so that a module named in a comment or a
//! string never becomes an edge.

/// A token as the scan sees it. Literals (strings, chars, numbers,
/// lifetimes) keep no text: nothing in them may name a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
    Lit,
}

/// The tokens of `src`, comments and the insides of literals dropped.
pub fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string(&c, i) {
            out.push(Tok::Lit);
            i = end;
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && at(i + 1) == '"') {
            i += if ch == '"' { 1 } else { 2 };
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            out.push(Tok::Lit);
            i += 1;
        } else if ch == '\'' || (ch == 'b' && at(i + 1) == '\'') {
            let q = if ch == '\'' { i } else { i + 1 };
            if at(q + 1) == '\\' {
                // An escaped char literal: up to the closing quote.
                i = q + 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                // A lifetime or label: its name is not a path.
                i = q + 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
            }
            out.push(Tok::Lit);
        } else if ch == 'r' && at(i + 1) == '#' && is_ident_start(at(i + 2)) {
            let start = i + 2;
            i = start;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if is_ident_start(ch) {
            let start = i;
            while i < c.len() && is_ident_char(c[i]) {
                i += 1;
            }
            out.push(Tok::Ident(c[start..i].iter().collect()));
        } else if ch.is_ascii_digit() {
            while i < c.len()
                && (is_ident_char(c[i]) || (c[i] == '.' && at(i + 1).is_ascii_digit()))
            {
                i += 1;
            }
            out.push(Tok::Lit);
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Tok::Sep);
            i += 2;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

/// Where a raw string starting at `i` (`r"…"`, `r#"…"#`, `br…`, `cr…`)
/// ends, if one starts there.
fn raw_string(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(c.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if c.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(c.len())
}

fn is_ident_start(ch: char) -> bool {
    ch == '_' || ch.is_alphabetic()
}

fn is_ident_char(ch: char) -> bool {
    ch == '_' || ch.is_alphanumeric()
}

/// A path as written, in the module it was written in (file module plus
/// inline `mod x { … }` nesting), before it is made absolute.
#[derive(Debug, Clone)]
pub struct RawPath {
    /// The module it was written in, relative to the file's module.
    pub inline: Vec<String>,
    pub segments: Vec<String>,
}

/// One name a `use` declaration brings into scope.
#[derive(Debug, Clone)]
pub struct UseEntry {
    pub path: RawPath,
    /// The name bound (`None` for a glob or `as _`).
    pub binding: Option<String>,
    pub glob: bool,
    /// `pub use` or `pub(…) use`: a re-export.
    pub public: bool,
}

/// What the graph needs from one file.
#[derive(Debug, Default)]
pub struct Facts {
    /// `mod x;` declarations: (inline module path within the file, x).
    pub child_files: Vec<(Vec<String>, String)>,
    /// `mod x { … }`: (inline module path of the parent, x).
    pub inline_modules: Vec<(Vec<String>, String)>,
    /// Items defined at module level (not in a body or an `impl`), by
    /// inline module path: fn, struct, enum, trait, type, const, static,
    /// union, mod, macro_rules.
    pub items: Vec<(Vec<String>, String)>,
    pub uses: Vec<UseEntry>,
    /// Paths with at least one `::` written outside `use` declarations.
    pub paths: Vec<RawPath>,
    /// How often each identifier occurs outside `use` declarations (so a
    /// re-export that the file also uses itself still counts).
    pub idents_outside_use: std::collections::HashMap<String, usize>,
    /// A `#[path = …]` attribute: the scan cannot follow it.
    pub path_attribute: bool,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];

pub fn facts(src: &str) -> Facts {
    let t = tokens(src);
    let ident = |i: usize| match t.get(i) {
        Some(Tok::Ident(s)) => Some(s.as_str()),
        _ => None,
    };
    let mut f = Facts::default();
    // Inline modules open at a brace depth; they close with that brace.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        let here: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
        let module_level = depth == inline.last().map_or(0, |(_, d)| *d);
        match &t[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Punct('#')
                if t.get(i + 1) == Some(&Tok::Punct('['))
                    && ident(i + 2) == Some("path")
                    && t.get(i + 3) == Some(&Tok::Punct('=')) =>
            {
                f.path_attribute = true;
            }
            Tok::Ident(kw) if kw == "use" && t.get(i.wrapping_sub(1)) != Some(&Tok::Sep) => {
                let public = is_public(&t, i);
                let mut j = i + 1;
                let mut entries = Vec::new();
                use_tree(&t, &mut j, Vec::new(), &mut entries);
                for (segments, binding, glob) in entries {
                    f.uses.push(UseEntry {
                        path: RawPath {
                            inline: here.clone(),
                            segments,
                        },
                        binding,
                        glob,
                        public,
                    });
                }
                while j < t.len() && t[j] != Tok::Punct(';') {
                    j += 1;
                }
                i = j + 1;
                continue;
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(name) = ident(i + 1) {
                    match t.get(i + 2) {
                        Some(Tok::Punct(';')) => f.child_files.push((here.clone(), name.into())),
                        Some(Tok::Punct('{')) => {
                            f.inline_modules.push((here.clone(), name.into()));
                            f.items.push((here.clone(), name.into()));
                            depth += 1;
                            inline.push((name.into(), depth));
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                    f.items.push((here.clone(), name.into()));
                }
            }
            Tok::Ident(kw) if module_level && ITEM_KEYWORDS.contains(&kw.as_str()) => {
                if let Some(name) = ident(i + 1) {
                    f.items.push((here.clone(), name.into()));
                }
            }
            Tok::Ident(kw) if module_level && kw == "macro_rules" => {
                if let (Some(Tok::Punct('!')), Some(name)) = (t.get(i + 1), ident(i + 2)) {
                    f.items.push((here.clone(), name.into()));
                }
            }
            _ => {}
        }
        if let Tok::Ident(s) = &t[i] {
            *f.idents_outside_use.entry(s.clone()).or_default() += 1;
            // The start of a path with `::` (not `$crate::`, which names
            // wherever the macro is used, not this file's crate).
            let starts = i == 0 || !matches!(t[i - 1], Tok::Sep | Tok::Punct('$'));
            if starts && t.get(i + 1) == Some(&Tok::Sep) {
                let mut segments = vec![s.clone()];
                let mut j = i + 1;
                while t.get(j) == Some(&Tok::Sep) {
                    match ident(j + 1) {
                        Some(n) => segments.push(n.into()),
                        None => break,
                    }
                    j += 2;
                }
                f.paths.push(RawPath {
                    inline: here.clone(),
                    segments,
                });
            }
        }
        i += 1;
    }
    f
}

/// Whether the `use` at `i` is preceded by `pub` or `pub(…)`.
fn is_public(t: &[Tok], i: usize) -> bool {
    let pub_at = |k: usize| matches!(t.get(k), Some(Tok::Ident(s)) if s == "pub");
    if i > 0 && pub_at(i - 1) {
        return true;
    }
    if i > 0 && t[i - 1] == Tok::Punct(')') {
        let mut k = i - 1;
        while k > 0 && t[k] != Tok::Punct('(') {
            k -= 1;
        }
        return k > 0 && pub_at(k - 1);
    }
    false
}

/// Parses one use tree at `*j`, adding (path, bound name, glob) entries.
fn use_tree(
    t: &[Tok],
    j: &mut usize,
    mut segs: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>, bool)>,
) {
    loop {
        match t.get(*j) {
            Some(Tok::Sep) => *j += 1,
            Some(Tok::Punct('*')) => {
                *j += 1;
                out.push((segs, None, true));
                return;
            }
            Some(Tok::Punct('{')) => {
                *j += 1;
                while *j < t.len() {
                    match &t[*j] {
                        Tok::Punct('}') => {
                            *j += 1;
                            return;
                        }
                        Tok::Punct(',') => *j += 1,
                        _ => {
                            let before = *j;
                            use_tree(t, j, segs.clone(), out);
                            if *j == before {
                                *j += 1;
                            }
                        }
                    }
                }
                return;
            }
            Some(Tok::Ident(name)) => {
                *j += 1;
                // `a::{self, …}` binds `a` itself.
                if name != "self" || segs.is_empty() {
                    segs.push(name.clone());
                }
                if t.get(*j) == Some(&Tok::Sep) {
                    *j += 1;
                    continue;
                }
                let mut binding = segs.last().cloned();
                if matches!(t.get(*j), Some(Tok::Ident(a)) if a == "as") {
                    binding = match t.get(*j + 1) {
                        Some(Tok::Ident(alias)) if alias != "_" => Some(alias.clone()),
                        _ => None,
                    };
                    *j += 2;
                }
                out.push((segs, binding, false));
                return;
            }
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_literals_leave_no_identifiers() {
        let src = r####"
            // crate::alpha::X
            /* outer /* crate::beta */ crate::gamma */
            let s = "crate::delta::Y"; let r = r#"crate::epsilon "quoted" "#;
            let c = '"'; let d = '\''; let b = b'"'; fn f<'a>(x: &'a str) {}
            let z = br##"crate::zeta"##;
        "####;
        let names: Vec<_> = tokens(src)
            .into_iter()
            .filter_map(|t| match t {
                Tok::Ident(s) => Some(s),
                _ => None,
            })
            .collect();
        for gone in [
            "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "quoted", "a",
        ] {
            assert!(!names.contains(&gone.to_string()), "{gone} in {names:?}");
        }
        assert!(names.contains(&"str".to_string()), "{names:?}");
    }

    #[test]
    fn use_trees_bind_their_last_segment_or_alias() {
        let f = facts("pub use crate::a::{self, b::{C, D as E}, f::*};\nuse super::x as _;");
        let got: Vec<_> = f
            .uses
            .iter()
            .map(|u| {
                (
                    u.path.segments.join("::"),
                    u.binding.clone(),
                    u.glob,
                    u.public,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("crate::a".into(), Some("a".into()), false, true),
                ("crate::a::b::C".into(), Some("C".into()), false, true),
                ("crate::a::b::D".into(), Some("E".into()), false, true),
                ("crate::a::f".into(), None, true, true),
                ("super::x".into(), None, false, false),
            ]
        );
    }

    #[test]
    fn inline_modules_scope_their_paths() {
        let f = facts("fn a() { crate::x::y(); }\nmod tests { fn t() { super::z::w(); } }\nmod c;");
        let got: Vec<_> = f
            .paths
            .iter()
            .map(|p| (p.inline.join("::"), p.segments.join("::")))
            .collect();
        assert_eq!(
            got,
            vec![
                (String::new(), "crate::x::y".into()),
                ("tests".into(), "super::z::w".into())
            ]
        );
        assert_eq!(f.child_files, vec![(vec![], "c".to_string())]);
    }
}
