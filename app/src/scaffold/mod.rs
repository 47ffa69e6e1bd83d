//! Tick projects, as `tickbox new` writes them: a language's counter
//! that builds and passes `tickbox check` as generated, with the SDK it
//! needs. The library makes the files ([`files`]); the caller writes them
//! and tells a person what to run.
//!
//! - `rust`: a Cargo package on the `tickbox-guest` SDK (one trait, one
//!   macro), built with `cargo build --release --target wasm32-wasip2`; the
//!   counter the other languages' examples are (`increment`, `history`,
//!   `auto`). The project carries the SDK in `vendor/tickbox-guest` (and
//!   `vendor/tickbox-protocol`, which it uses; their manifests with what
//!   they inherit from the workspace written out) as a path dependency,
//!   and a `Cargo.lock` cut from `examples/Cargo.lock`, so it builds with
//!   nothing published and, once the registry cache holds the examples'
//!   crates, offline. `--sdk-path DIR` depends on the SDK at DIR instead;
//! - `c`: the C counter of `examples/c` (libc only: a JSON reader, a
//!   `poll()` loop with timers), built by `build.sh` for wasm32-wasip1 with
//!   clang + wasi-libc, and natively;
//! - `python`: the Python counter of `examples/python`, on the Python SDK
//!   (`tickbox_tick/`), a WASI 0.2 component built by `build.sh` with
//!   componentize-py against the `tick` world (keys, resize, drawing through
//!   `tickbox:terminal`);
//! - `js`: the JavaScript counter of `examples/js`, on the JavaScript SDK
//!   (`tickbox.js`, `tickbox.d.ts`, `component.js`, `native.js`), the same
//!   with componentize-js (pinned by `package.json` and `package-lock.json`);
//! - `go`: the Go counter of `examples/go`, on the Go SDK (the module
//!   `tickbox.dev/tick` in `tick/`, which `go.mod` replaces to), a WASI
//!   preview-1 module built by `build.sh` with `GOOS=wasip1`.
//!
//! The templates live in `templates/` (the crate is published with `src/`
//! only); the C, Python, JavaScript and Go ones are copies of `examples/`,
//! the SDKs of `sdks/`, `guest-sdk/` and `protocol/`, kept in step by
//! `tools/sync` (CI runs `tools/sync --check`). The Rust counter
//! (`main.rs.tmpl`) is the template's own: `examples/counter` has no
//! `auto`. Each project carries its SDK, so it builds from a
//! fresh directory. Python and JavaScript projects also get the WIT package
//! of the `tick` world in `wit/` (from the sandbox's copy).
//!
//! A project is named after its directory: the build makes `NAME.wasm`
//! (the Cargo package is NAME; each `build.sh` has a `name=` line, which
//! the examples set to `counter`), the C source is `NAME.c`, and
//! `scenarios/NAME.scenario.toml` (from `templates/scenarios/`, which has
//! no example twin) drives the built Tick: `tickbox test scenarios`. The
//! entry files keep the names their toolchains expect (`src/main.rs`,
//! `main.go`, `app.py`, which `build.sh` gives componentize-py as the
//! module `app`, and `app.js`, which the SDK's `component.js` imports). The names `valid_name` accepts (lowercase letters,
//! digits, `-` and `_`, starting with a letter) are already valid file,
//! Cargo package, npm package and Go module names and shell words, so file
//! names take the name as it is (only the `kind` turns `-` and `_` into
//! `.`).

/// Longest project name accepted.
pub const MAX_NAME: usize = 64;

const RUST_MAIN: &str = include_str!("templates/main.rs.tmpl");
const RUST_CARGO: &str = include_str!("templates/Cargo.toml.tmpl");
const C_SOURCE: &str = include_str!("templates/counter.c");
const C_BUILD: &str = include_str!("templates/build.sh");
/// The line of every `build.sh` that names its outputs (and the C
/// source); a project's has its own name there.
const BUILD_NAME: &str = "\nname=counter\n";
/// A project's scenario, by the kind of Tick it drives: the Rust counter
/// (keys; the Tick where cargo puts it), a component with keys (Python,
/// JavaScript), a preview-1 module without keys (C, Go). `{{name}}` is the
/// project's name.
const SCENARIO_RUST: &str = include_str!("templates/scenarios/rust.scenario.toml.tmpl");
const SCENARIO_COMPONENT: &str = include_str!("templates/scenarios/component.scenario.toml.tmpl");
const SCENARIO_MODULE: &str = include_str!("templates/scenarios/module.scenario.toml.tmpl");
const PY_APP: &str = include_str!("templates/python/app.py");
const PY_BUILD: &str = include_str!("templates/python/build.sh");
const PY_REQUIREMENTS: &str = include_str!("templates/python/requirements.txt");
const JS_APP: &str = include_str!("templates/js/app.js");
const JS_BUILD: &str = include_str!("templates/js/build.sh");
const JS_PACKAGE: &str = include_str!("templates/js/package.json");
const JS_LOCK: &str = include_str!("templates/js/package-lock.json");
const GO_MAIN: &str = include_str!("templates/go/main.go");
const GO_BUILD: &str = include_str!("templates/go/build.sh");
const GO_MOD: &str = include_str!("templates/go/go.mod");
const GO_REQUIREMENTS: &str = include_str!("templates/go/requirements.txt");
/// Where `examples/go/go.mod` finds the SDK, and where a project's does.
const GO_SDK_REPLACE: (&str, &str) = ("=> ../../sdks/go", "=> ./tick");
/// The module path of `examples/go`, replaced by `local/<name>`.
const GO_MODULE: &str = "module tickbox.example/counter";

/// Each language's SDK, which every project of that language carries, as
/// (language, path in the project, contents, path in the repository). The
/// template of `sdks/X` is `templates/sdks/X`. Written as `Lang: project
/// prefix <= repository prefix [files]`.
macro_rules! sdk_files {
    ($($lang:ident: $proj:literal <= $repo:literal [$($file:literal),* $(,)?]),* $(,)?) => {
        [$($((
            Lang::$lang,
            concat!($proj, $file),
            include_str!(concat!("templates/", $repo, $file)),
            concat!($repo, $file),
        )),*),*]
    };
}

const SDK_FILES: &[(Lang, &str, &str, &str)] = &sdk_files![
    Python: "tickbox_tick/" <= "sdks/python/tickbox_tick/" [
        "__init__.py", "dispatch.py", "draw.py", "keys.py", "platform.py", "schema.py",
    ],
    Js: "" <= "sdks/js/" ["tickbox.js", "tickbox.d.ts", "component.js", "native.js"],
    Go: "tick/" <= "sdks/go/" [
        "go.mod", "dispatch.go", "draw.go", "keys.go", "loop_native.go", "loop_wasip1.go",
        "run.go", "schema.go", "state.go", "term_linux.go", "term_other.go",
    ],
];

/// The Rust SDK a project carries in `vendor/`, so that it builds with
/// nothing published: `tickbox-guest` and `tickbox-protocol` (which it
/// uses), as (crate, path under `src/`, contents). The templates under
/// `templates/vendor/` are copies of `guest-sdk/` and `protocol/` (kept in
/// step by `tools/sync`); a unit test checks this list names every file
/// there.
macro_rules! vendor_sources {
    ($($krate:literal [$($file:literal),* $(,)?]),* $(,)?) => {
        [$($((
            $krate,
            $file,
            include_str!(concat!("templates/vendor/", $krate, "/src/", $file)),
        )),*),*]
    };
}

const VENDOR_SOURCES: &[(&str, &str, &str)] = &vendor_sources![
    "tickbox-guest" [
        "catalog.rs", "ctx.rs", "dispatch.rs", "draw.rs", "fuzzing.rs", "http.rs", "key.rs", "lib.rs",
        "platform/mod.rs", "platform/native.rs", "platform/wasm.rs", "tests.rs",
    ],
    "tickbox-protocol" [
        "codes.rs", "descriptor.rs", "finding.rs", "framing.rs", "lib.rs", "limits.rs",
        "message.rs", "rules.rs", "schema.rs", "state.rs", "text.rs",
    ],
];

/// The vendored crates' manifests as they are in the repository (they
/// inherit from the workspace's, which `vendored_manifest` writes out).
const VENDOR_MANIFESTS: &[(&str, &str)] = &[
    (
        "tickbox-guest",
        include_str!("templates/vendor/tickbox-guest/manifest.toml"),
    ),
    (
        "tickbox-protocol",
        include_str!("templates/vendor/tickbox-protocol/manifest.toml"),
    ),
];
const WORKSPACE_MANIFEST: &str = include_str!("templates/vendor/workspace.toml");
/// The examples' lock file, which the test suite builds the examples (and
/// so the SDK's dependencies) with: a project's `Cargo.lock` is cut from
/// it, so its build finds every crate in the registry cache.
const EXAMPLES_LOCK: &str = include_str!("templates/vendor/examples.lock");
/// The package of `examples/Cargo.lock` that depends on what a project
/// does (tickbox-guest, serde, schemars) and on nothing else.
const LOCK_TEMPLATE_PACKAGE: &str = "counter";
/// The license of both vendored crates (and of every crate here).
const LICENSE: &str = include_str!("../../LICENSE");
/// Where a Rust project depends on the SDK it carries.
const VENDORED_SDK: &str = "\
# The Rust SDK, tickbox-guest {{version}}, comes with this project in
# vendor/ (with tickbox-protocol, which it uses): `tickbox new` wrote it
# there from the tickbox binary, so the project builds with nothing
# published. Once tickbox-guest is on crates.io, depend on it there instead
# and delete vendor/:
#   tickbox-guest = \"{{version}}\"
tickbox-guest = { path = \"vendor/tickbox-guest\" }";

/// The npm package name of `examples/js`, replaced by the project's name.
const JS_PACKAGE_NAME: &str = "tickbox-counter-js";

/// A project's language.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lang {
    Rust,
    C,
    Python,
    Js,
    Go,
}

impl Lang {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::C => "c",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::Go => "go",
        }
    }

    /// The command that builds a project, run in its directory.
    pub fn build_command(self) -> &'static str {
        match self {
            Lang::Rust => "cargo build --release --target wasm32-wasip2",
            Lang::C => "./build.sh",
            Lang::Python | Lang::Go => "pip install -r requirements.txt && ./build.sh",
            Lang::Js => "npm ci && ./build.sh",
        }
    }
}

/// Checks a project name: the rule is strict so that the name is a valid
/// Cargo package, file name and `kind` component without escaping.
pub fn valid_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("a project name has 1 to {MAX_NAME} characters"));
    }
    let mut chars = name.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase())
        || !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Err(format!(
            "project name {name:?}: use lowercase letters, digits, '-' and '_', starting with a letter"
        ));
    }
    Ok(())
}

/// A project's `build.sh`: the example's, naming its outputs after `name`.
fn build_script(example: &str, name: &str) -> String {
    example.replacen(BUILD_NAME, &format!("\nname={name}\n"), 1)
}

/// Where `lang`'s build puts the Tick, relative to the project (Rust: with
/// cargo's default target directory).
pub fn wasm_path(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Rust => format!("target/wasm32-wasip2/release/{name}.wasm"),
        _ => format!("build/{name}.wasm"),
    }
}

/// Where a Rust project finds the SDK.
pub enum Sdk {
    /// In its own `vendor/`, written with it.
    Vendored,
    /// At a directory (`--sdk-path`), as the inside of a TOML basic string.
    Path(String),
}

/// The files of a project, as (relative path, contents, executable).
pub fn files(lang: Lang, name: &str, sdk: &Sdk) -> Result<Vec<(String, String, bool)>, String> {
    let kind = name.replace(['-', '_'], ".");
    let local_kind = format!("\"local.{kind}\"");
    let sdk_files = SDK_FILES
        .iter()
        .filter(|(l, ..)| *l == lang)
        .map(|(_, rel, text, _)| (rel.to_string(), text.to_string(), false));
    let scenario = match lang {
        Lang::Rust => SCENARIO_RUST,
        Lang::Python | Lang::Js => SCENARIO_COMPONENT,
        Lang::C | Lang::Go => SCENARIO_MODULE,
    };
    let scenario = (
        format!("scenarios/{name}.scenario.toml"),
        scenario.replace("{{name}}", name),
        false,
    );
    let project: Vec<(String, String, bool)> = match lang {
        Lang::Rust => [
            (
                "Cargo.toml".into(),
                RUST_CARGO.replace("{{name}}", name).replace(
                    "{{sdk}}",
                    &match sdk {
                        Sdk::Vendored => {
                            VENDORED_SDK.replace("{{version}}", env!("CARGO_PKG_VERSION"))
                        }
                        Sdk::Path(dir) => format!(
                            "# The Rust SDK at the directory `tickbox new --sdk-path` named.\n\
                             tickbox-guest = {{ path = \"{dir}\" }}"
                        ),
                    },
                ),
                false,
            ),
            (
                "src/main.rs".into(),
                RUST_MAIN
                    .replace("{{name}}", name)
                    .replace("{{kind}}", &kind)
                    .replace("{{title}}", name),
                false,
            ),
            (".gitignore".into(), "/target\n".into(), false),
        ]
        .into_iter()
        .chain(match sdk {
            Sdk::Vendored => vendor_files(name)?,
            Sdk::Path(_) => vec![("Cargo.lock".into(), project_lock(name)?, false)],
        })
        .collect(),
        Lang::C => vec![
            (
                format!("{name}.c"),
                C_SOURCE
                    .replace("example.counter", &format!("local.{kind}"))
                    .replace(C_TITLE, &format!("\\\"title\\\":\\\"{name}\\\"")),
                false,
            ),
            ("build.sh".into(), build_script(C_BUILD, name), true),
            (".gitignore".into(), "/build\n".into(), false),
        ],
        Lang::Python => with_wit(vec![
            (
                "app.py".into(),
                PY_APP
                    .replace(PY_TITLE, &format!("title = {local_kind}, \"{name}\""))
                    .replace(EXAMPLE_KIND, &local_kind),
                false,
            ),
            ("build.sh".into(), build_script(PY_BUILD, name), true),
            (
                "requirements.txt".into(),
                PY_REQUIREMENTS.to_string(),
                false,
            ),
            (".gitignore".into(), "/build\n__pycache__/\n".into(), false),
        ]),
        Lang::Js => with_wit(vec![
            (
                "app.js".into(),
                JS_APP
                    .replace(EXAMPLE_KIND, &local_kind)
                    .replace(JS_TITLE, &format!("static title = \"{name}\";")),
                false,
            ),
            ("build.sh".into(), build_script(JS_BUILD, name), true),
            (
                "package.json".into(),
                JS_PACKAGE.replace(JS_PACKAGE_NAME, name),
                false,
            ),
            (
                "package-lock.json".into(),
                JS_LOCK.replace(JS_PACKAGE_NAME, name),
                false,
            ),
            (".gitignore".into(), "/build\n/node_modules\n".into(), false),
        ]),
        Lang::Go => vec![
            (
                "main.go".into(),
                GO_MAIN
                    .replace(EXAMPLE_KIND, &local_kind)
                    .replace(GO_TITLE, &format!("Title: \"{name}\"")),
                false,
            ),
            ("build.sh".into(), build_script(GO_BUILD, name), true),
            (
                "go.mod".into(),
                GO_MOD
                    .replace(GO_SDK_REPLACE.0, GO_SDK_REPLACE.1)
                    .replace(GO_MODULE, &format!("module local/{name}")),
                false,
            ),
            (
                "requirements.txt".into(),
                GO_REQUIREMENTS.to_string(),
                false,
            ),
            (".gitignore".into(), "/build\n".into(), false),
        ],
    };
    Ok(project
        .into_iter()
        .chain(std::iter::once(scenario))
        .chain(sdk_files)
        .collect())
}

/// A vendored crate's manifest standing alone: what it inherits from the
/// workspace (`KEY.workspace = true`) written out, its path dependencies
/// pointed at their vendored siblings (`../NAME`), without
/// dev-dependencies (a path dependency's are never built) and not to be
/// published from there. Comments do not survive; a first line says where
/// it came from.
fn vendored_manifest(manifest: &str, workspace: &str) -> Result<String, String> {
    use toml::{Table, Value};
    let bad = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    let mut m: Table = manifest
        .parse()
        .map_err(|e| bad("a vendored manifest", &e))?;
    let ws: Table = workspace
        .parse()
        .map_err(|e| bad("the workspace manifest", &e))?;
    let section = |key: &str| -> Table {
        ws.get("workspace")
            .and_then(|w| w.get(key))
            .and_then(Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let (ws_package, ws_deps) = (section("package"), section("dependencies"));
    let inherits = |v: &Value| v.get("workspace").and_then(Value::as_bool) == Some(true);
    let package = m
        .get_mut("package")
        .and_then(Value::as_table_mut)
        .ok_or("a vendored manifest has no [package]")?;
    for (key, value) in package.iter_mut() {
        if inherits(value) {
            *value = ws_package
                .get(key)
                .cloned()
                .ok_or_else(|| format!("the workspace has no package.{key}"))?;
        }
    }
    package.insert("publish".into(), Value::Boolean(false));
    m.remove("dev-dependencies");
    let vendored = |name: &str| VENDOR_MANIFESTS.iter().any(|(k, _)| *k == name);
    let resolve = |deps: &mut Table| -> Result<(), String> {
        for (name, dep) in deps.iter_mut() {
            if inherits(dep) {
                let mut own = dep.as_table().cloned().unwrap_or_default();
                own.remove("workspace");
                let mut full = match ws_deps.get(name) {
                    Some(Value::String(v)) => {
                        Table::from_iter([("version".into(), v.clone().into())])
                    }
                    Some(Value::Table(t)) => t.clone(),
                    _ => return Err(format!("the workspace has no dependency {name}")),
                };
                // Features add to the workspace's; the rest is the crate's.
                if let Some(Value::Array(extra)) = own.remove("features") {
                    let features = full
                        .entry("features")
                        .or_insert_with(|| Value::Array(vec![]));
                    if let Value::Array(f) = features {
                        for x in extra {
                            if !f.contains(&x) {
                                f.push(x);
                            }
                        }
                    }
                }
                full.extend(own);
                *dep = Value::Table(full);
            }
            if let Some(t) = dep.as_table_mut().filter(|t| t.contains_key("path")) {
                if !vendored(name) {
                    return Err(format!("path dependency {name} is not vendored"));
                }
                t.insert("path".into(), format!("../{name}").into());
            }
        }
        Ok(())
    };
    for key in ["dependencies", "build-dependencies"] {
        if let Some(deps) = m.get_mut(key).and_then(Value::as_table_mut) {
            resolve(deps)?;
        }
    }
    if let Some(targets) = m.get_mut("target").and_then(Value::as_table_mut) {
        for (_, target) in targets.iter_mut() {
            if let Some(t) = target.as_table_mut() {
                t.remove("dev-dependencies");
            }
            for key in ["dependencies", "build-dependencies"] {
                if let Some(deps) = target.get_mut(key).and_then(Value::as_table_mut) {
                    resolve(deps)?;
                }
            }
        }
    }
    if m.get("lints").is_some_and(inherits) {
        m.remove("lints");
    }
    // [package] first, as people write it (the tables are sorted by name).
    let package = m
        .remove("package")
        .ok_or("a vendored manifest has no [package]")?;
    let head = Table::from_iter([("package".to_string(), package)]);
    let show = |t: &Table| toml::to_string(t).map_err(|e| bad("a vendored manifest", &e));
    let text = format!("{}\n{}", show(&head)?, show(&m)?);
    if text.contains("workspace") {
        return Err("a vendored manifest still names the workspace".into());
    }
    Ok(format!(
        "# Written by `tickbox new` from tickbox {}: this crate's manifest,\n\
         # standing alone (what it inherits from tickbox's root manifest written\n\
         # out).\n{text}",
        env!("CARGO_PKG_VERSION")
    ))
}

/// A Rust project's `Cargo.lock`: the examples' cut to what a project
/// depends on (the counter example's dependencies, and theirs), with the
/// project in the counter's place, in the order and form cargo writes.
fn project_lock(name: &str) -> Result<String, String> {
    const SEP: &str = "\n[[package]]\n";
    let mut blocks = EXAMPLES_LOCK.split(SEP);
    let head = blocks.next().unwrap_or_default();
    let parsed: Vec<(&str, String, String, Vec<String>)> = blocks
        .map(|text| {
            let t: toml::Table = text
                .parse()
                .map_err(|e| format!("the examples' lock: {e}"))?;
            let field = |k: &str| {
                t.get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let deps = t
                .get("dependencies")
                .and_then(|d| d.as_array())
                .map(|d| {
                    d.iter()
                        .filter_map(|x| x.as_str())
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            Ok((text, field("name"), field("version"), deps))
        })
        .collect::<Result<_, String>>()?;
    let root = parsed
        .iter()
        .position(|p| p.1 == LOCK_TEMPLATE_PACKAGE)
        .ok_or("the examples' lock has no counter")?;
    // A dependency is "NAME" or "NAME VERSION" (when the lock has two).
    let find = |dep: &str| {
        let mut words = dep.split(' ');
        let (n, v) = (words.next().unwrap_or_default(), words.next());
        parsed
            .iter()
            .position(|p| p.1 == n && v.is_none_or(|v| p.2 == v))
    };
    let mut keep = vec![false; parsed.len()];
    let mut todo = parsed[root].3.clone();
    while let Some(dep) = todo.pop() {
        let i = find(&dep).ok_or_else(|| format!("the examples' lock lacks {dep}"))?;
        if !std::mem::replace(&mut keep[i], true) {
            todo.extend(parsed[i].3.iter().cloned());
        }
    }
    let own = parsed[root].0.replacen(
        &format!("name = \"{LOCK_TEMPLATE_PACKAGE}\"\n"),
        &format!("name = \"{name}\"\n"),
        1,
    );
    let mut out: Vec<&str> = vec![head];
    let mut placed = false;
    for (i, p) in parsed.iter().enumerate() {
        if !placed && p.1.as_str() > name {
            out.push(&own);
            placed = true;
        }
        if keep[i] {
            out.push(p.0);
        }
    }
    if !placed {
        out.push(&own);
    }
    let mut lock = out.join(SEP);
    if !lock.ends_with('\n') {
        lock.push('\n');
    }
    Ok(lock)
}

/// The files of the SDK a Rust project carries: each vendored crate's
/// sources, manifest and license (and `tickbox-guest`'s WIT package, the
/// `tick` world, from the sandbox's copy, the same files), and the lock.
fn vendor_files(name: &str) -> Result<Vec<(String, String, bool)>, String> {
    use tickbox_sandbox::wit_files::TICK_WORLD;
    let mut files = vec![("Cargo.lock".to_string(), project_lock(name)?, false)];
    for (krate, manifest) in VENDOR_MANIFESTS {
        let dir = format!("vendor/{krate}");
        files.push((
            format!("{dir}/Cargo.toml"),
            vendored_manifest(manifest, WORKSPACE_MANIFEST)?,
            false,
        ));
        files.push((format!("{dir}/LICENSE"), LICENSE.to_string(), false));
        files.extend(
            VENDOR_SOURCES
                .iter()
                .filter(|(k, ..)| k == krate)
                .map(|(_, rel, text)| (format!("{dir}/src/{rel}"), text.to_string(), false)),
        );
    }
    files.extend(TICK_WORLD.iter().map(|(rel, text)| {
        (
            format!("vendor/tickbox-guest/{rel}"),
            text.to_string(),
            false,
        )
    }));
    Ok(files)
}

/// The `kind` string of the examples, replaced by `local.<name>`.
const EXAMPLE_KIND: &str = "\"example.counter\"";
/// The examples' titles, replaced by the project's name (the Python one
/// with its kind, on the same line).
const C_TITLE: &str = "\\\"title\\\":\\\"Counter\\\"";
const PY_TITLE: &str = "title = \"example.counter\", \"Counter\"";
const JS_TITLE: &str = "static title = \"Counter\";";
const GO_TITLE: &str = "Title: \"Counter\"";

/// A component project's files plus the `tick` world's WIT under `wit/`.
fn with_wit(mut files: Vec<(String, String, bool)>) -> Vec<(String, String, bool)> {
    use tickbox_sandbox::wit_files::TICK_WORLD;
    files.extend(
        TICK_WORLD
            .iter()
            .map(|(rel, text)| (rel.to_string(), text.to_string(), false)),
    );
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_are_checked() {
        assert!(valid_name("my-tick_2").is_ok());
        for bad in [
            "",
            "My",
            "2x",
            "a b",
            "a/b",
            "a\"b",
            "ü",
            &"a".repeat(MAX_NAME + 1),
        ] {
            assert!(valid_name(bad).is_err(), "{bad:?}");
        }
        assert!(valid_name(&"a".repeat(MAX_NAME)).is_ok());
    }

    #[test]
    fn every_template_takes_the_projects_name_as_its_title() {
        for (template, title) in [(C_SOURCE, C_TITLE), (JS_APP, JS_TITLE), (GO_MAIN, GO_TITLE)] {
            assert!(template.contains(title), "{title} moved in its template");
        }
        assert!(
            PY_APP.contains(PY_TITLE),
            "{PY_TITLE} moved in its template"
        );
        for lang in [Lang::C, Lang::Python, Lang::Js, Lang::Go] {
            let main = &files(lang, "my-tick", &Sdk::Vendored).unwrap()[0];
            assert!(main.1.contains("my-tick"), "{lang:?}: {}", main.0);
            assert!(
                !main.1.contains("\"Counter\"") && !main.1.contains("\\\"Counter\\\""),
                "{lang:?}"
            );
        }
    }

    #[test]
    fn files_and_outputs_are_named_after_the_project() {
        for build in [C_BUILD, PY_BUILD, JS_BUILD, GO_BUILD] {
            assert_eq!(build.matches(BUILD_NAME).count(), 1, "{build}");
        }
        for lang in [Lang::Rust, Lang::C, Lang::Python, Lang::Js, Lang::Go] {
            let files = files(lang, "my-tick", &Sdk::Vendored).unwrap();
            let get = |rel: &str| {
                files
                    .iter()
                    .find(|(r, _, _)| r == rel)
                    .map(|(_, text, _)| text.clone())
                    .unwrap_or_else(|| panic!("{lang:?}: no {rel}"))
            };
            let scenario = get("scenarios/my-tick.scenario.toml");
            assert!(!scenario.contains("{{"), "{lang:?}: {scenario}");
            // The scenario's Tick is the build's output, seen from scenarios/.
            let wasm = wasm_path(lang, "my-tick");
            let from_scenarios = match lang {
                Lang::Rust => wasm.replacen("target/", "${CARGO_TARGET_DIR:-../target}/", 1),
                _ => format!("../{wasm}"),
            };
            assert!(
                scenario.contains(&format!("path = \"{from_scenarios}\"")),
                "{lang:?}: {scenario}"
            );
            if lang != Lang::Rust {
                let build = get("build.sh");
                assert!(build.contains("\nname=my-tick\n"), "{lang:?}");
                // No file of the example's name is left (the comments may
                // still call the Tick a counter: it is one).
                assert!(!build.contains("counter."), "{lang:?}: {build}");
                assert_eq!(wasm, "build/my-tick.wasm");
            }
            assert!(
                files.iter().all(|(rel, _, _)| !rel.contains("counter")),
                "{lang:?}"
            );
        }
        assert!(files(Lang::C, "my-tick", &Sdk::Vendored)
            .unwrap()
            .iter()
            .any(|(rel, _, _)| rel == "my-tick.c"));
    }

    #[test]
    fn placeholders_are_all_filled() {
        for (rel, text, _) in files(Lang::Rust, "my-tick", &Sdk::Vendored).unwrap() {
            // The vendored SDK's sources are Rust, where `{{` is a brace.
            if !rel.starts_with("vendor/") {
                assert!(!text.contains("{{"), "{rel} keeps a placeholder");
            }
        }
        let c = files(Lang::C, "my-tick", &Sdk::Vendored).unwrap();
        assert!(
            c[0].1.contains("\\\"kind\\\":\\\"local.my.tick\\\""),
            "{}",
            &c[0].1[..200]
        );
        assert!(!c[0].1.contains("example.counter"));
        for lang in [Lang::Python, Lang::Js, Lang::Go] {
            let files = files(lang, "my-tick", &Sdk::Vendored).unwrap();
            let app = &files[0].1;
            assert!(app.contains("\"local.my.tick\""), "{lang:?}");
            assert!(!app.contains("example.counter"), "{lang:?}");
            assert_eq!(
                files.iter().any(|(rel, _, _)| *rel == "wit/terminal.wit"),
                lang != Lang::Go,
                "components get the tick world's WIT, a wasip1 module none"
            );
            assert!(files
                .iter()
                .any(|(rel, _, exec)| *rel == "build.sh" && *exec));
            let sdk = SDK_FILES.iter().filter(|(l, ..)| *l == lang).count();
            assert!(sdk > 0 && files.len() > sdk, "{lang:?} carries its SDK");
        }
        let go = files(Lang::Go, "my-tick", &Sdk::Vendored).unwrap();
        let go_mod = &go.iter().find(|(rel, _, _)| *rel == "go.mod").unwrap().1;
        assert!(go_mod.contains("module local/my-tick\n"), "{go_mod}");
        assert!(
            go_mod.contains(GO_SDK_REPLACE.1) && !go_mod.contains(GO_SDK_REPLACE.0),
            "{go_mod}"
        );
        let js = files(Lang::Js, "my-tick", &Sdk::Vendored).unwrap();
        for (rel, text, _) in &js[2..4] {
            assert!(text.contains("\"name\": \"my-tick\""), "{rel}");
            assert!(!text.contains(JS_PACKAGE_NAME), "{rel}");
        }
    }

    /// Every file of the vendored crates' sources (as `tools/sync` copies
    /// them) is in `VENDOR_SOURCES`, and nothing else.
    #[test]
    fn the_vendored_sources_are_every_file_of_their_templates() {
        fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).expect("read templates") {
                let entry = entry.unwrap();
                let name = entry.file_name().to_string_lossy().into_owned();
                let rel = format!("{rel}{name}");
                if entry.path().is_dir() {
                    walk(&entry.path(), &format!("{rel}/"), out);
                } else {
                    out.push(rel);
                }
            }
        }
        let templates = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scaffold/templates/vendor");
        for (krate, _) in VENDOR_MANIFESTS {
            let mut on_disk = Vec::new();
            walk(&templates.join(krate).join("src"), "", &mut on_disk);
            on_disk.sort();
            let mut listed: Vec<String> = VENDOR_SOURCES
                .iter()
                .filter(|(k, ..)| k == krate)
                .map(|(_, rel, _)| rel.to_string())
                .collect();
            listed.sort();
            assert_eq!(listed, on_disk, "{krate}: VENDOR_SOURCES lists other files");
        }
    }

    /// The vendored manifests stand alone: no workspace inheritance left,
    /// the SDK finds the protocol crate beside it, without its validators.
    #[test]
    fn vendored_manifests_stand_alone() {
        let text = |krate: &str| {
            let (_, m) = VENDOR_MANIFESTS.iter().find(|(k, _)| *k == krate).unwrap();
            let text = vendored_manifest(m, WORKSPACE_MANIFEST).unwrap();
            assert!(!text.contains("workspace"), "{text}");
            text.parse::<toml::Table>().unwrap()
        };
        let guest = text("tickbox-guest");
        assert_eq!(guest["package"]["name"].as_str(), Some("tickbox-guest"));
        assert_eq!(
            guest["package"]["version"].as_str(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(guest["package"]["edition"].as_str(), Some("2021"));
        assert_eq!(guest["package"]["publish"].as_bool(), Some(false));
        assert!(guest.get("dev-dependencies").is_none());
        let protocol = &guest["dependencies"]["tickbox-protocol"];
        assert_eq!(protocol["path"].as_str(), Some("../tickbox-protocol"));
        assert_eq!(protocol["default-features"].as_bool(), Some(false));
        let protocol = text("tickbox-protocol");
        let serde = &protocol["dependencies"]["serde"];
        assert!(serde["version"].as_str().is_some(), "{serde}");
        assert!(
            serde["features"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f.as_str() == Some("derive")),
            "{serde}"
        );
        assert!(protocol["dependencies"]["thiserror"]["version"].is_str());
    }

    /// A project's lock: the project in the counter's place with its
    /// dependencies, and every package they reach, and nothing of the
    /// other examples.
    #[test]
    fn the_projects_lock_is_the_sdks_part_of_the_examples() {
        let lock: toml::Table = project_lock("my-tick").unwrap().parse().unwrap();
        let packages = lock["package"].as_array().unwrap();
        let names: Vec<&str> = packages
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "in cargo's order");
        let own = packages
            .iter()
            .find(|p| p["name"].as_str() == Some("my-tick"))
            .unwrap();
        assert_eq!(
            own["dependencies"].as_array().unwrap().len(),
            3,
            "tickbox-guest, serde, schemars: {own}"
        );
        for name in [
            "tickbox-guest",
            "tickbox-protocol",
            "ratatui",
            "wit-bindgen",
            "libc",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        for example in ["counter", "notes", "ticker", "fetch", "dashboard"] {
            assert!(!names.contains(&example), "{example}");
        }
        assert_eq!(lock["version"].as_integer(), Some(4));
    }
}
