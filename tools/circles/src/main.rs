//! `tickbox-circles [WORKSPACE]`: fails when two files of one crate import
//! each other, directly or around a longer circle (issue 40).
//!
//! A circle between files means neither can be read, tested or moved
//! without the other; breaking it (the shared piece in a module both
//! import, a callback instead of a back-reference) keeps each file a layer.
//! What counts as an edge is written once, in `graph.rs`.
//!
//! It reads the workspace's `Cargo.toml` (its `members`, or the package
//! itself when there is no `[workspace]`) and every crate root under each
//! member's `src/` (`lib.rs`, `main.rs`, `bin/*.rs`, `bin/*/main.rs`).
//! Tests, examples and benches outside `src/` are not read.
//!
//! Exit 0: no circle. Exit 1: one line per circle on stdout,
//! `crate: src/a.rs -> src/b.rs -> src/a.rs` (and on stderr, before it, a
//! path written in each file that makes its step). Exit 2: a usage error or a
//! tree it cannot read. `--edges` lists every edge instead (exit 0), to see
//! what holds a circle together.

mod graph;
mod scan;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str =
    "usage: tickbox-circles [--edges] [WORKSPACE_DIR]   (default: the current directory)
  --edges  print every edge (`crate: a.rs -> b.rs (path)`) instead of checking";

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let list_edges = args.first().is_some_and(|a| a == "--edges");
    if list_edges {
        args.remove(0);
    }
    let root = match args.as_slice() {
        [] => PathBuf::from("."),
        [h] if h == "-h" || h == "--help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&root, list_edges) {
        Ok(lines) if lines.is_empty() => ExitCode::SUCCESS,
        Ok(lines) => {
            for line in &lines {
                println!("{line}");
            }
            eprintln!(
                "tickbox-circles: {} import circle(s) between files; move what both sides need \
                 into a module both import (the rule: tools/circles/src/graph.rs)",
                lines.len()
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("tickbox-circles: {e}");
            ExitCode::from(2)
        }
    }
}

/// Every circle of every crate under `root`, one line each.
/// With `list_edges`, every edge goes to stdout and no circle is returned.
fn run(root: &Path, list_edges: bool) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for dir in packages(root)? {
        let name = package_name(&dir)?;
        for crate_root in crate_roots(&dir.join("src")) {
            let krate = graph::load(&crate_root)?;
            let show = |f: usize| {
                let p = &krate.files[f];
                p.strip_prefix(&dir).unwrap_or(p).display().to_string()
            };
            let edges = krate.edges();
            if list_edges {
                for (from, tos) in edges.iter().enumerate() {
                    for (to, path) in tos {
                        println!("{name}: {} -> {} ({path})", show(from), show(*to));
                    }
                }
                continue;
            }
            for cycle in graph::circles(&edges) {
                let files: Vec<String> = cycle.iter().map(|&f| show(f)).collect();
                let line = format!("{name}: {}", files.join(" -> "));
                if lines.contains(&line) {
                    continue;
                }
                // Why each step is an edge, for whoever breaks the circle.
                for pair in cycle.windows(2) {
                    let path = &edges[pair[0]][&pair[1]];
                    eprintln!("  {} names {path}", show(pair[0]));
                }
                lines.push(line);
            }
        }
    }
    Ok(lines)
}

/// The package directories: the workspace's members, or `root` itself.
fn packages(root: &Path) -> Result<Vec<PathBuf>, String> {
    let manifest = root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let mut dirs = Vec::new();
    if let Some(members) = array_after(&text, "[workspace]", "members") {
        for m in members {
            if m.contains('*') {
                return Err(format!(
                    "{}: member globs are not supported ({m})",
                    manifest.display()
                ));
            }
            dirs.push(root.join(m));
        }
    }
    if section(&text, "[package]").is_some() {
        dirs.insert(0, root.to_path_buf());
    }
    if dirs.is_empty() {
        return Err(format!(
            "{}: neither [workspace] members nor [package]",
            manifest.display()
        ));
    }
    Ok(dirs)
}

fn package_name(dir: &Path) -> Result<String, String> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    section(&text, "[package]")
        .and_then(|body| {
            body.lines().find_map(|l| {
                let (key, value) = l.split_once('=')?;
                (key.trim() == "name").then(|| value.trim().trim_matches('"').to_string())
            })
        })
        .ok_or_else(|| format!("{}: no [package] name", manifest.display()))
}

/// The text of a TOML table, up to the next table header. Enough TOML for
/// the manifests this reads (no dependency for a real parser).
fn section<'a>(text: &'a str, header: &str) -> Option<&'a str> {
    let start = text.lines().position(|l| l.trim() == header)?;
    let body_start: usize = text.lines().take(start + 1).map(|l| l.len() + 1).sum();
    let body = text.get(body_start..)?;
    let end = body
        .lines()
        .position(|l| l.trim_start().starts_with('['))
        .map(|n| body.lines().take(n).map(|l| l.len() + 1).sum())
        .unwrap_or(body.len());
    Some(&body[..end])
}

/// The strings of `key = [ … ]` in a table (the array may span lines).
fn array_after(text: &str, header: &str, key: &str) -> Option<Vec<String>> {
    let body = section(text, header)?;
    let at = body
        .lines()
        .find(|l| l.split('=').next().is_some_and(|k| k.trim() == key))?;
    let from = body.find(at)? + at.find('[')?;
    let close = body[from..].find(']')? + from;
    Some(
        body[from + 1..close]
            .split(',')
            .map(|s| s.trim().trim_matches('"').to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// The crate roots under `src`, as Cargo finds them by default.
fn crate_roots(src: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                if p.extension().is_some_and(|x| x == "rs") {
                    Some(p)
                } else {
                    let main = p.join("main.rs");
                    main.is_file().then_some(main)
                }
            })
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}
