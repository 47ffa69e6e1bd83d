//! The manual's reference pages that the code is the truth for are
//! generated from it, and this test keeps them so:
//!
//! - `docs/reference/commands.md`: `tickbox help` for every command and
//!   subcommand, as the binary prints it;
//! - `docs/reference/limits.md`: the limits tables, one per crate, taken
//!   from the module documentation of each `*/src/limits.rs` (where every
//!   bound is a named constant), each constant of the module in its table.
//!
//! A page that differs fails the test, naming the command that rewrites
//! it: `TICKBOX_BLESS=1 cargo nextest run -p tickbox --test it reference`.

use crate::util::root;
use std::process::Command;

const BLESS: &str = "TICKBOX_BLESS";

fn help(path: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tickbox"))
        .arg("help")
        .args(path)
        .env_remove("COLUMNS")
        .output()
        .expect("run tickbox help");
    assert!(out.status.success(), "tickbox help {path:?}: {out:?}");
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

fn commands_page() -> String {
    let mut page = String::from(
        "<!-- Generated from `tickbox help` by cli/tests/it/reference.rs; do not edit. -->\n\n\
         # Command reference\n\n\
         Every command's help, as `tickbox help COMMAND` prints it. The guides\n\
         say when to use which: [Commands and exit codes](../guide/commands.md).\n",
    );
    let mut queue: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = queue.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let text = help(&args);
        let title = std::iter::once("tickbox")
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        page.push_str(&format!(
            "\n## `{title}`\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
        // Depth first, in the order the help lists them.
        for sub in subcommands(&text).into_iter().rev() {
            let mut p = path.clone();
            p.push(sub);
            queue.push(p);
        }
    }
    page
}

/// The `//!` documentation of a limits module, its intra-doc links made
/// plain code.
fn module_doc(text: &str) -> String {
    let doc: Vec<&str> = text
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .map(|l| {
            l.strip_prefix("//! ")
                .unwrap_or(l.trim_start_matches("//!"))
        })
        .collect();
    let mut out = doc.join("\n");
    // [`NAME`] and [`path::NAME`] are links in rustdoc, code here.
    while let Some(start) = out.find("[`") {
        let Some(len) = out[start..].find("`]") else {
            break;
        };
        let inner = out[start + 2..start + len].to_string();
        let mut end = start + len + 2;
        // A link with its target in parentheses: drop the target.
        if out[end..].starts_with('(') {
            if let Some(close) = out[end..].find(')') {
                end += close + 1;
            }
        }
        out.replace_range(start..end, &format!("`{inner}`"));
    }
    out
}

/// The names of a module's public constants.
fn constants(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("pub const "))
        .filter_map(|l| l.split(':').next())
        .map(|n| n.trim().to_string())
        .collect()
}

fn limits_page() -> (String, Vec<String>) {
    let mut page = String::from(
        "<!-- Generated from each crate's src/limits.rs by cli/tests/it/reference.rs; do not edit. -->\n\n\
         # Limits\n\n\
         Every bound tickbox holds is a named constant in its crate's `limits`\n\
         module, whose documentation is the table below; a grant key in a\n\
         heading is the key a policy file, a manifest or a scenario sets (its\n\
         flag is the key with dashes).\n",
    );
    let mut missing = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(root())
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src/limits.rs"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let krate = file.parent().and_then(|p| p.parent()).unwrap();
        let name = krate.file_name().unwrap().to_string_lossy();
        let doc = module_doc(&text);
        for c in constants(&text) {
            if !doc.contains(&format!("`{c}`")) {
                missing.push(format!("{name}/src/limits.rs: {c}"));
            }
        }
        page.push_str(&format!("\n## `{name}/src/limits.rs`\n\n{doc}\n"));
    }
    (page, missing)
}

/// Compares a generated page with the file, or writes it under BLESS.
fn keep(relative: &str, generated: &str) {
    let path = root().join(relative);
    if std::env::var_os(BLESS).is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "{relative} is not what the code says; rewrite it with `{BLESS}=1 cargo nextest run -p tickbox --test it reference`"
    );
}

#[test]
fn the_command_reference_is_tickbox_help() {
    // Positive control for the reading of a help text.
    let sample = "Usage: x\n\nCommands:\n  ls     List\n         more\n  clean  Empty\n  help   Help\n\nOptions:\n  -h\n";
    assert_eq!(subcommands(sample), ["ls", "clean"]);
    let page = commands_page();
    assert!(
        page.contains("## `tickbox cache ls`"),
        "nested commands are listed"
    );
    keep("docs/reference/commands.md", &page);
}

#[test]
fn the_limits_reference_is_the_limits_modules_tables() {
    // Positive controls: links become code, a constant missing from its
    // table is found.
    let sample = "//! | [`A`] | 1 |\n//! | [`B`](crate::B) | 2 |\n\npub const A: u32 = 1;\npub const C: u32 = 3;\n";
    assert_eq!(module_doc(sample), "| `A` | 1 |\n| `B` | 2 |");
    assert_eq!(constants(sample), ["A", "C"]);
    let (page, missing) = limits_page();
    assert!(
        missing.is_empty(),
        "constants of a limits module missing from its table: {missing:?}"
    );
    keep("docs/reference/limits.md", &page);
}
