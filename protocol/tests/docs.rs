//! docs/PROTOCOL.md stays in step with the code: every rule id, every limit
//! constant and every section the sources cite is on the page, each rule
//! under the heading of its own section.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tickbox_protocol::rules;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn protocol_md() -> String {
    std::fs::read_to_string(repo().join("docs/PROTOCOL.md")).expect("docs/PROTOCOL.md")
}

/// The page cut at its section headings (`## §N` / `### §N.M`): section
/// number → the text under that heading up to the next one.
fn sections(page: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in page.lines() {
        let heading = line.trim_start_matches('#');
        if line.starts_with('#') && heading.trim_start().starts_with('§') {
            let number: String = heading
                .trim_start()
                .trim_start_matches('§')
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            out.push((number, String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

#[test]
fn every_rule_is_documented_under_its_own_section() {
    let page = protocol_md();
    let sections = sections(&page);
    let mut missing = Vec::new();
    for rule in rules::ALL {
        let needle = format!("`{}`", rule.id);
        let under_its_section = sections
            .iter()
            .any(|(number, body)| number == rule.section && body.contains(&needle));
        if !under_its_section {
            missing.push(format!("{} (§{})", rule.id, rule.section));
        }
    }
    assert!(
        missing.is_empty(),
        "rules not documented under their section in docs/PROTOCOL.md: {missing:?}"
    );
}

#[test]
fn every_limit_and_code_constant_is_on_the_page() {
    let page = protocol_md();
    let mut missing = Vec::new();
    for file in ["protocol/src/limits.rs", "protocol/src/codes.rs"] {
        let source = std::fs::read_to_string(repo().join(file)).unwrap();
        for line in source.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub const ") else {
                continue;
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !page.contains(&format!("`{name}`")) {
                missing.push(name);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "constants missing from docs/PROTOCOL.md: {missing:?}"
    );
}

/// Every `§N` / `§N.M` in the Rust sources of the crates that print them.
fn cited_sections() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for krate in tickbox_test_support::LIBRARY_SOURCES
        .iter()
        .chain(&["cli/src", "guest-sdk/src"])
    {
        for (_, text) in tickbox_test_support::rust_sources(&repo().join(krate)) {
            for (i, _) in text.match_indices('§') {
                let number: String = text[i + '§'.len_utf8()..]
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let number = number.trim_end_matches('.').to_string();
                if !number.is_empty() {
                    found.insert(number);
                }
            }
        }
    }
    found
}

#[test]
fn every_section_the_sources_cite_has_a_heading() {
    let page = protocol_md();
    let headings: BTreeSet<String> = sections(&page).into_iter().map(|(n, _)| n).collect();
    let cited = cited_sections();
    // A positive control: the scan does find the sections errors print.
    assert!(
        cited.contains("8.2") && cited.contains("5.3"),
        "scan found {cited:?}"
    );
    let missing: Vec<_> = cited.difference(&headings).collect();
    assert!(
        missing.is_empty(),
        "sections cited in the sources without a heading in docs/PROTOCOL.md: {missing:?}"
    );
}

/// The files kept in more than one place (the WIT package in each crate
/// that packages it, the `tickbox new` templates from the examples) are in
/// step with their sources: `tools/sync --check`, the one table of them.
/// Positive control: the same check on a copy of the tree with one copy
/// changed fails and names that copy.
#[test]
fn the_copies_are_in_sync_with_their_sources() {
    let out = std::process::Command::new(repo().join("tools/sync"))
        .arg("--check")
        .output()
        .expect("run tools/sync");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let copy = tickbox_test_support::TempDir::new("sync-check");
    let tree = &copy.0;
    for part in [
        "tools",
        "wit",
        "sandbox/wit",
        "guest-sdk/wit",
        "guest-sdk/src",
        "guest-sdk/Cargo.toml",
        "protocol/src",
        "protocol/Cargo.toml",
        "Cargo.toml",
        "examples/Cargo.lock",
        "examples/c",
        "examples/python",
        "examples/go",
        "sdks/python/tickbox_tick",
        "sdks/go",
        "app/src/scaffold/templates",
    ] {
        let status = std::process::Command::new("cp")
            .args(["-R", "--parents", part])
            .arg(tree)
            .current_dir(repo())
            .status()
            .expect("cp");
        assert!(status.success(), "copy {part}");
    }
    std::fs::create_dir_all(tree.join("examples/js")).unwrap();
    for f in ["app.js", "build.sh", "package.json", "package-lock.json"] {
        std::fs::copy(
            repo().join("examples/js").join(f),
            tree.join("examples/js").join(f),
        )
        .unwrap();
    }
    std::fs::create_dir_all(tree.join("sdks/js")).unwrap();
    for f in ["tickbox.js", "tickbox.d.ts", "component.js", "native.js"] {
        std::fs::copy(repo().join("sdks/js").join(f), tree.join("sdks/js").join(f)).unwrap();
    }
    let unchanged = std::process::Command::new(tree.join("tools/sync"))
        .arg("--check")
        .output()
        .expect("run the copy's tools/sync");
    assert!(unchanged.status.success(), "{unchanged:?}");
    let wit = tree.join("guest-sdk/wit/terminal.wit");
    let mut text = std::fs::read_to_string(&wit).unwrap();
    text.push_str("// drift\n");
    std::fs::write(&wit, text).unwrap();
    let drifted = std::process::Command::new(tree.join("tools/sync"))
        .arg("--check")
        .output()
        .expect("run the copy's tools/sync");
    assert!(!drifted.status.success());
    assert!(
        String::from_utf8_lossy(&drifted.stderr).contains("guest-sdk/wit differs"),
        "{drifted:?}"
    );
}
