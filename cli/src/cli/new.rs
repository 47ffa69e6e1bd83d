//! `tickbox new PATH [--lang rust|c|python|js|go]`: a Tick project that
//! builds and passes `tickbox check` as generated.
//!
//! - `rust`: a Cargo package on the `tickbox-guest` SDK (one trait, one
//!   macro), built with `cargo build --release --target wasm32-wasip2`;
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
//! only); the C, Python, JavaScript and Go ones are copies of `examples/`
//! and the SDKs of `sdks/`, kept in step by `tools/sync` (CI runs
//! `tools/sync --check`). Each project carries its SDK, so it builds from a
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

use super::exit::Exit;
use clap::{Args, ValueEnum};
use serde_json::json;
use std::path::{Path, PathBuf};

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
/// (`add`, `/count`), a component with keys (Python, JavaScript), a
/// preview-1 module without keys (C, Go). `{{name}}` is the project's name.
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

/// The npm package name of `examples/js`, replaced by the project's name.
const JS_PACKAGE_NAME: &str = "tickbox-counter-js";

#[derive(Args)]
pub struct NewArgs {
    /// The directory to create; its last component names the project
    /// (lowercase letters, digits, `-`, `_`; starting with a letter)
    #[arg(value_name = "PATH")]
    path: PathBuf,
    /// The language of the project
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Rust: depend on the tickbox-guest SDK at this directory (a checkout's
    /// `guest-sdk/`) [default: the guest-sdk/ of the checkout tickbox was built from, when it is there; else the crates.io release]
    #[arg(long, value_name = "DIR")]
    sdk_path: Option<PathBuf>,
    /// Print the result as JSON also on a terminal (it is JSON when stdout is not one)
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Debug)]
enum Lang {
    Rust,
    C,
    Python,
    Js,
    Go,
}

pub const HELP: &str = "\
Examples:
  tickbox new my-tick                 Rust, on the tickbox-guest SDK
  tickbox new my-tick --lang c        C, wasm32-wasip1 via clang + wasi-libc
  tickbox new my-tick --lang python   Python, a component via componentize-py
  tickbox new my-tick --lang js       JavaScript, a component via componentize-js
  tickbox new my-tick --lang go       Go, a wasip1 module via GOOS=wasip1

Files and outputs take the project's name: the build makes NAME.wasm, and
scenarios/NAME.scenario.toml runs it (`tickbox test scenarios`). Prints what
was made and the commands that build, check and test it: sentences on a
terminal, a JSON object otherwise or with --json. Exit codes: 0 created, 2 bad name or PATH exists (nothing
written), 1 a file could not be written.";

/// Checks a project name: the rule is strict so that the name is a valid
/// Cargo package, file name and `kind` component without escaping.
fn valid_name(name: &str) -> Result<(), String> {
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
fn wasm_path(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Rust => format!("target/wasm32-wasip2/release/{name}.wasm"),
        _ => format!("build/{name}.wasm"),
    }
}

/// The files of a project, as (relative path, contents, executable).
fn files(lang: Lang, name: &str, sdk: &str) -> Vec<(String, String, bool)> {
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
        Lang::Rust => vec![
            (
                "Cargo.toml".into(),
                RUST_CARGO.replace("{{name}}", name).replace("{{sdk}}", sdk),
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
        ],
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
    project
        .into_iter()
        .chain(std::iter::once(scenario))
        .chain(sdk_files)
        .collect()
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
    use tickbox_runtime::backend::wasm::wit_files::TICK_WORLD;
    files.extend(
        TICK_WORLD
            .iter()
            .map(|(rel, text)| (rel.to_string(), text.to_string(), false)),
    );
    files
}

/// Writes the project and prints what to do next.
pub fn run(args: NewArgs) -> Result<(), Exit> {
    let name = args
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    valid_name(&name).map_err(Exit::usage)?;
    if args.path.exists() {
        return Err(Exit::usage(format!(
            "{} exists; tickbox new writes only a new directory",
            args.path.display()
        )));
    }
    // Without --sdk-path: the SDK of the checkout this tickbox was built
    // from, when it is still there (a `cargo install --path cli` or a
    // `cargo run`), so the project builds with nothing published; else the
    // crates.io release of the same version.
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(|r| r.join("guest-sdk"))
        .filter(|d| d.join("Cargo.toml").is_file() && d.join("src/lib.rs").is_file());
    let sdk_path = args.sdk_path.clone().or(checkout);
    let sdk = match &sdk_path {
        None => format!("\"{}\"", env!("CARGO_PKG_VERSION")),
        Some(dir) => {
            let dir = std::path::absolute(dir)
                .map_err(|e| Exit::usage(format!("--sdk-path {}: {e}", dir.display())))?;
            if !dir.join("Cargo.toml").is_file() {
                return Err(Exit::usage(format!(
                    "--sdk-path {}: no Cargo.toml there (expected tickbox's guest-sdk/)",
                    dir.display()
                )));
            }
            // A TOML basic string: escape what could end it.
            let s = dir
                .to_string_lossy()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            format!("{{ path = \"{s}\" }}")
        }
    };
    let files = files(args.lang, &name, &sdk);
    let io = |p: &Path, e: std::io::Error| {
        Exit::new(
            super::exit::TOOL_ERROR,
            format!("cannot write {}: {e}", p.display()),
        )
    };
    for (rel, text, exec) in &files {
        let p = args.path.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        std::fs::write(&p, text).map_err(|e| io(&p, e))?;
        if *exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| io(&p, e))?;
        }
    }
    let dir = args.path.display().to_string();
    let build = match args.lang {
        Lang::Rust => "cargo build --release --target wasm32-wasip2",
        Lang::C => "./build.sh",
        Lang::Python | Lang::Go => "pip install -r requirements.txt && ./build.sh",
        Lang::Js => "npm ci && ./build.sh",
    };
    let wasm = wasm_path(args.lang, &name);
    let result = json!({
        "created": dir,
        "lang": format!("{:?}", args.lang).to_lowercase(),
        "files": files.iter().map(|(rel, _, _)| rel).collect::<Vec<_>>(),
        "build": format!("cd {dir} && {build}"),
        "wasm": format!("{dir}/{wasm}"),
        "check": format!("tickbox check {dir}/{wasm} --allow-mutations"),
        "test": format!("tickbox test {dir}/scenarios"),
    });
    // A person at a terminal gets sentences; a script (or --json) JSON.
    use std::io::IsTerminal;
    if args.json || !std::io::stdout().is_terminal() {
        return super::emit(&result, false);
    }
    let text = format!(
        "Created a {} Tick in {dir} ({} files).\n\nBuild it:\n  {}\nCheck it:\n  {}\nRun its scenario:\n  {}",
        result["lang"].as_str().unwrap_or_default(),
        files.len(),
        result["build"].as_str().unwrap_or_default(),
        result["check"].as_str().unwrap_or_default(),
        result["test"].as_str().unwrap_or_default(),
    );
    super::emit_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let main = &files(lang, "my-tick", "")[0];
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
            let files = files(lang, "my-tick", "\"0.1.0\"");
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
        assert!(files(Lang::C, "my-tick", "")
            .iter()
            .any(|(rel, _, _)| rel == "my-tick.c"));
    }

    #[test]
    fn placeholders_are_all_filled() {
        for (rel, text, _) in files(Lang::Rust, "my-tick", "\"0.1.0\"") {
            assert!(!text.contains("{{"), "{rel} keeps a placeholder");
        }
        let c = files(Lang::C, "my-tick", "");
        assert!(
            c[0].1.contains("\\\"kind\\\":\\\"local.my.tick\\\""),
            "{}",
            &c[0].1[..200]
        );
        assert!(!c[0].1.contains("example.counter"));
        for lang in [Lang::Python, Lang::Js, Lang::Go] {
            let files = files(lang, "my-tick", "");
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
        let go = files(Lang::Go, "my-tick", "");
        let go_mod = &go.iter().find(|(rel, _, _)| *rel == "go.mod").unwrap().1;
        assert!(go_mod.contains("module local/my-tick\n"), "{go_mod}");
        assert!(
            go_mod.contains(GO_SDK_REPLACE.1) && !go_mod.contains(GO_SDK_REPLACE.0),
            "{go_mod}"
        );
        let js = files(Lang::Js, "my-tick", "");
        for (rel, text, _) in &js[2..4] {
            assert!(text.contains("\"name\": \"my-tick\""), "{rel}");
            assert!(!text.contains(JS_PACKAGE_NAME), "{rel}");
        }
    }
}
