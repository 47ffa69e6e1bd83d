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

/// The keys of a struct as serde reads them: (key, type, documentation).
fn struct_keys(file: &str, name: &str) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| {
            l.trim_start()
                .trim_start_matches("pub ")
                .starts_with(&format!("struct {name} {{"))
        })
        .unwrap_or_else(|| panic!("struct {name} in {file}"));
    let mut out = Vec::new();
    let (mut doc, mut rename) = (Vec::new(), None);
    for line in &lines[start + 1..] {
        let l = line.trim();
        if l == "}" {
            break;
        }
        if let Some(d) = l.strip_prefix("///") {
            doc.push(d.trim().to_string());
        } else if l.starts_with("#[serde(") {
            if let Some(r) = l.split("rename = \"").nth(1) {
                rename = r.split('"').next().map(str::to_string);
            }
        } else if let Some((field, ty)) = l.trim_start_matches("pub ").split_once(':') {
            if !l.starts_with("//") {
                let key = rename.take().unwrap_or_else(|| field.trim().to_string());
                let ty = toml_type(ty.trim().trim_end_matches(','));
                let doc = std::mem::take(&mut doc).join(" ");
                out.push((key, ty, plain_links(&doc)));
            }
        }
    }
    out
}

/// How a Rust field's type is written in a TOML file.
fn toml_type(rust: &str) -> String {
    let inner = |s: &str, outer: &str| {
        s.strip_prefix(outer)
            .and_then(|r| r.strip_suffix('>'))
            .map(str::to_string)
    };
    if let Some(t) = inner(rust, "Option<") {
        return toml_type(&t);
    }
    if let Some(t) = inner(rust, "Vec<") {
        return format!("list of {}", toml_type(&t));
    }
    match rust {
        "String" => "string".into(),
        "PathBuf" => "path".into(),
        "bool" => "boolean".into(),
        "f64" => "number".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" | "i64" => "integer".into(),
        "Digest" => "digest (`sha256:…`)".into(),
        "NoMatch" => "string".into(),
        _ => "table".into(),
    }
}

/// Rustdoc's links as plain code.
fn plain_links(doc: &str) -> String {
    module_doc(&format!("//! {doc}"))
}

/// The properties of a JSON Schema object: (key, type, description).
fn schema_keys(object: &serde_json::Value) -> Vec<(String, String, String)> {
    let Some(props) = object["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(k, v)| {
            let ty = match (&v["type"], v["$ref"].as_str()) {
                (serde_json::Value::String(t), _) => t.clone(),
                (serde_json::Value::Array(ts), _) => ts
                    .iter()
                    .filter_map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
                (_, Some(r)) => r.rsplit('/').next().unwrap_or(r).to_string(),
                _ => "any".into(),
            };
            let description = v["description"].as_str().unwrap_or("").to_string();
            (k.clone(), ty, description)
        })
        .collect()
}

fn key_table(keys: &[(String, String, String)], missing: &mut Vec<String>, what: &str) -> String {
    let mut t = String::from("| key | type | meaning |\n|---|---|---|\n");
    for (k, ty, doc) in keys {
        if doc.is_empty() {
            missing.push(format!("{what}: {k}"));
        }
        let cell = |s: &str| s.replace('|', "\\|");
        t.push_str(&format!("| `{k}` | `{}` | {} |\n", cell(ty), cell(doc)));
    }
    t
}

fn config_page() -> (String, Vec<String>) {
    let mut missing = Vec::new();
    let mut page = String::from(
        "<!-- Generated from the code by cli/tests/it/reference.rs; do not edit. -->\n\n\
         # Configuration files\n\n\
         Every key of every file tickbox reads, as the code reads it: an unknown\n\
         key is refused, naming it. The guides show them in use.\n",
    );
    let grants = struct_keys("sandbox/src/grants.rs", "GrantSpec");
    page.push_str(
        "\n## Grant keys\n\nThe same keys in a policy file (`--policy`), a Tick's manifest\n\
         (`NAME.tick.toml`), an entry of a ticks file and a scenario's `[tick]`\n\
         table; on the command line each is a flag, the key with dashes\n\
         ([the sandbox](../guide/sandbox.md)).\n\n",
    );
    page.push_str(&key_table(
        &grants,
        &mut missing,
        "sandbox/src/grants.rs GrantSpec",
    ));
    let sections: [(&str, &str, &str, &str); 6] = [
        (
            "Ticks file (`tickbox mcp --ticks`)",
            "mcp/src/config.rs",
            "RawConfig",
            "the top level",
        ),
        (
            "Ticks file (`tickbox mcp --ticks`)",
            "mcp/src/config.rs",
            "RawEntry",
            "each `[[tick]]`, with the grant keys",
        ),
        (
            "Signers policy (`--signers`)",
            "registry/src/policy.rs",
            "PolicyFile",
            "the top level",
        ),
        (
            "Signers policy (`--signers`)",
            "registry/src/policy.rs",
            "RequireRule",
            "each `[[require]]`",
        ),
        (
            "Lock file (`tickbox lock`, `--lock`)",
            "registry/src/lock.rs",
            "LockFile",
            "the top level",
        ),
        (
            "Lock file (`tickbox lock`, `--lock`)",
            "registry/src/lock.rs",
            "LockEntry",
            "each `[[tick]]`",
        ),
    ];
    let mut last = "";
    for (title, file, name, part) in sections {
        if title != last {
            page.push_str(&format!("\n## {title}\n"));
            last = title;
        }
        let keys = struct_keys(file, name);
        page.push_str(&format!("\n{part}:\n\n"));
        page.push_str(&key_table(&keys, &mut missing, &format!("{file} {name}")));
    }
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("conformance/src/scenario/scenario.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let defs = &schema["$defs"];
    page.push_str(
        "\n## Scenario files (`tickbox test`)\n\nFrom `conformance/src/scenario/scenario.schema.json`, the schema the\n\
         parser is tested against ([testing your Tick in CI](../guide/testing.md)).\n",
    );
    let objects = [
        ("the top level", &schema),
        (
            "`[tick]`, with the grant keys",
            &schema["properties"]["tick"],
        ),
        ("each `[[step]]`", &defs["step"]),
        (
            "`expect_state` and `wait_for` on state",
            &defs["state_check"],
        ),
        (
            "`expect_screen` and `wait_for` on the screen",
            &defs["screen_check"],
        ),
        (
            "a screen check's `style`",
            &defs["screen_check"]["properties"]["style"],
        ),
        ("each `[[http]]` fixture", &defs["http_fixture"]),
    ];
    for (part, object) in objects {
        let keys = schema_keys(object);
        assert!(!keys.is_empty(), "the schema lost {part}");
        page.push_str(&format!("\n{part}:\n\n"));
        page.push_str(&key_table(
            &keys,
            &mut missing,
            &format!("scenario schema, {part}"),
        ));
    }
    (page, missing)
}

#[test]
fn the_configuration_reference_is_the_code() {
    // Positive control: a field's documentation, its serde name, and an
    // undocumented key found.
    let keys = struct_keys("registry/src/lock.rs", "LockFile");
    assert_eq!(keys[0].0, "version");
    assert!(!keys[0].2.is_empty());
    let mut missing = Vec::new();
    key_table(
        &[("k".into(), "u8".into(), String::new())],
        &mut missing,
        "x",
    );
    assert_eq!(missing, ["x: k"]);

    let (page, missing) = config_page();
    assert!(
        missing.is_empty(),
        "keys without documentation: {missing:?}"
    );
    keep("docs/reference/config.md", &page);
}
