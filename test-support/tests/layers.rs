//! The floor plan holds: each layer's dependency tree has only what that
//! layer is for (ARCHITECTURE.md, "Layers"), and only the CLI knows flags
//! and `TICKBOX_*` variables. Read from `cargo tree` (offline: the lock file
//! and the registry cache the build already has) and from the sources.

use std::collections::BTreeSet;
use std::process::Command;
use tickbox_test_support::root;

/// The package names in `krate`'s tree of normal dependencies (`extra`:
/// more `cargo tree` options, e.g. `--depth 1` for its own dependencies).
fn tree(krate: &str, extra: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-f",
            "{p}",
        ])
        .args(["-p", krate])
        .args(extra)
        .current_dir(root())
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {krate}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The features `krate` itself asks of its dependency `dep` (its manifest,
/// as cargo reads it), or None when it does not depend on it.
fn own_features(krate: &str, dep: &str) -> Option<Vec<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--offline",
            "--no-deps",
            "--format-version",
            "1",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let package = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == krate)
        .unwrap_or_else(|| panic!("{krate} is not in the workspace"));
    package["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .find(|d| d["name"] == dep && d["kind"].is_null())
        .map(|d| {
            d["features"]
                .as_array()
                .expect("features")
                .iter()
                .map(|f| f.as_str().unwrap_or_default().to_string())
                .collect()
        })
}

#[test]
fn each_layer_depends_only_on_what_it_is_for() {
    let none = |t: &BTreeSet<String>, krate: &str, banned: &[&str]| {
        for b in banned {
            assert!(!t.contains(*b), "{krate} depends on {b}");
        }
    };
    // Positive controls: the scan sees a dependency where there is one.
    let mcp = tree("tickbox-mcp", &[]);
    assert!(mcp.contains("rmcp") && mcp.contains("toml") && mcp.contains("tickbox-sandbox"));
    let cli = tree("tickbox", &[]);
    assert!(cli.contains("clap"));
    assert!(own_features("tickbox-mcp", "hyper").is_some_and(|f| f.contains(&"server".to_string())));

    let protocol = tree("tickbox-protocol", &["--no-default-features"]);
    none(
        &protocol,
        "tickbox-protocol (no features)",
        &["jsonschema", "regex-automata", "chrono", "tokio"],
    );
    let host = tree("tickbox-host", &[]);
    none(
        &host,
        "tickbox-host",
        &[
            "wasmtime",
            "rmcp",
            "hyper",
            "toml",
            "clap",
            "tickbox-sandbox",
        ],
    );
    // Telemetry is below the host: the host records into it and no
    // exporter, HTTP stack or MCP reaches the engine through it.
    let telemetry = tree("tickbox-telemetry", &[]);
    assert!(
        tree("tickbox-host", &["--depth", "1"]).contains("tickbox-telemetry")
            && telemetry.contains("tickbox-protocol"),
        "positive control: the host records into tickbox-telemetry"
    );
    none(
        &telemetry,
        "tickbox-telemetry",
        &[
            "tickbox-host",
            "tickbox-sandbox",
            "tickbox-mcp",
            "hyper",
            "rmcp",
            "wasmtime",
            "toml",
            "clap",
        ],
    );
    // The HTTP door is a leaf the MCP server and the inspector share: no
    // tickbox crate, no MCP, no engine.
    let guard = tree("tickbox-guard", &[]);
    assert!(
        guard.contains("hyper"),
        "positive control: the door's server is hyper's"
    );
    none(
        &guard,
        "tickbox-guard",
        &[
            "tickbox-protocol",
            "tickbox-telemetry",
            "tickbox-host",
            "tickbox-mcp",
            "rmcp",
            "wasmtime",
            "toml",
        ],
    );
    for user in ["tickbox-mcp", "tickbox-app"] {
        assert!(
            tree(user, &["--depth", "1"]).contains("tickbox-guard"),
            "{user} serves HTTP through tickbox-guard's door"
        );
    }
    let sandbox = tree("tickbox-sandbox", &[]);
    none(
        &sandbox,
        "tickbox-sandbox",
        &[
            "rmcp",
            "toml",
            "clap",
            "tickbox-mcp",
            "tickbox-conformance",
            "tickbox-registry",
        ],
    );
    // The registry client is network and disk work before a start: no
    // engine, no session, and no general HTTP client stack of its own.
    let registry = tree("tickbox-registry", &[]);
    assert!(registry.contains("hyper") && registry.contains("rustls"));
    none(
        &registry,
        "tickbox-registry",
        &[
            "wasmtime",
            "tickbox-host",
            "tickbox-sandbox",
            "rmcp",
            "toml",
            "clap",
            "reqwest",
        ],
    );
    // The trust checks the sandbox and the registry share are a leaf: no
    // other tickbox crate, no runtime, no HTTP stack, so neither user
    // gains an arrow up or a dependency through it.
    let trust = tree("tickbox-trust", &[]);
    assert!(
        trust.contains("rustls"),
        "positive control: the leaf's own dependency is seen"
    );
    none(
        &trust,
        "tickbox-trust",
        &[
            "tickbox-protocol",
            "tickbox-host",
            "tickbox-sandbox",
            "tickbox-registry",
            "tokio",
            "hyper",
            "serde",
        ],
    );
    for user in ["tickbox-sandbox", "tickbox-registry"] {
        assert!(
            tree(user, &["--depth", "1"]).contains("tickbox-trust"),
            "{user} checks directories and TLS servers through tickbox-trust"
        );
    }
    // Regular expressions reach the host and the sandbox only inside the
    // protocol's schema validation (jsonschema, bounded there); neither
    // has a regex engine of its own.
    for krate in ["tickbox-host", "tickbox-sandbox"] {
        let own = tree(krate, &["--depth", "1"]);
        none(&own, krate, &["regex", "fancy-regex", "regex-automata"]);
    }
    assert!(
        tree("tickbox-conformance", &["--depth", "1"]).contains("regex"),
        "positive control: the scenario runner's own regex is seen"
    );
    // wasi:http sends with hyper's client; the sandbox asks for no HTTP
    // server (wasmtime-wasi-http itself builds hyper whole).
    let sandbox_hyper = own_features("tickbox-sandbox", "hyper").expect("the sandbox uses hyper");
    assert!(
        sandbox_hyper.contains(&"client".to_string()),
        "{sandbox_hyper:?}"
    );
    assert!(
        !sandbox_hyper.contains(&"server".to_string()),
        "{sandbox_hyper:?}"
    );
    let conformance = tree("tickbox-conformance", &[]);
    none(
        &conformance,
        "tickbox-conformance",
        &["rmcp", "clap", "tickbox-mcp"],
    );
    none(&mcp, "tickbox-mcp", &["clap", "tickbox-conformance"]);
    // OpenTelemetry is OTLP/JSON over hyper's client (ARCHITECTURE.md; the
    // app layer's `otlp`): no gRPC stack, no protobuf code generator, no
    // second HTTP client anywhere under the binary.
    none(
        &cli,
        "tickbox",
        &[
            "tonic",
            "prost",
            "reqwest",
            "opentelemetry",
            "opentelemetry_sdk",
        ],
    );
    assert!(
        own_features("tickbox-app", "hyper").is_some_and(|f| f.contains(&"client".to_string())),
        "positive control: the OTLP client is hyper's, the app layer's (the CLI's tree holds it)"
    );
    // The application layer: from a request to a running Tick, for every
    // user (the CLI, `tickbox mcp`, `tickbox test`, embedders), and the
    // inspector's server (behind the shared HTTP door, not the MCP
    // crate's). It takes typed values: no argument parser, and no arrow up
    // to the CLI.
    let app = tree("tickbox-app", &[]);
    assert!(
        app.contains("tickbox-registry") && app.contains("tickbox-sandbox") && app.contains("toml"),
        "positive control: the app layer's own dependencies are seen"
    );
    none(
        &app,
        "tickbox-app",
        &[
            "clap",
            "tracing-subscriber",
            "tickbox",
            "tickbox-runtime",
            "tickbox-mcp",
            "rmcp",
        ],
    );
    assert!(
        tree("tickbox", &["--depth", "1"]).contains("tickbox-app"),
        "the CLI opens Ticks through the app layer"
    );
    let facade = tree("tickbox-runtime", &["--no-default-features"]);
    none(
        &facade,
        "tickbox-runtime (no features)",
        &["wasmtime", "rmcp", "tickbox-sandbox"],
    );
}

/// `TICKBOX_*` variables are read in one file of the CLI: no library source
/// names one outside its tests and docs.
#[test]
fn only_the_cli_reads_tickbox_variables() {
    fn walk(dir: &std::path::Path, hits: &mut Vec<String>) {
        for (p, text) in tickbox_test_support::rust_sources(dir) {
            // Unit tests sit at the end of a file, after `#[cfg(test)]`.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (n, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("//") {
                    continue;
                }
                if line.contains("\"TICKBOX_")
                    || (line.contains("env::var") && line.contains("TICKBOX"))
                {
                    hits.push(format!("{}:{}: {line}", p.display(), n + 1));
                }
            }
        }
    }
    let mut control = Vec::new();
    walk(&root().join("cli/src"), &mut control);
    assert!(
        control.iter().any(|h| h.contains("cli/env.rs")),
        "the scan finds the CLI's own reads: {control:?}"
    );
    let mut hits = Vec::new();
    for krate in tickbox_test_support::LIBRARY_SOURCES {
        walk(&root().join(krate), &mut hits);
    }
    assert!(
        hits.is_empty(),
        "library code naming TICKBOX_ variables:\n{}",
        hits.join("\n")
    );
}
