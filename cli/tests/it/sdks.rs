//! The guest SDKs for Python, JavaScript and Go (`sdks/`, issue 30), held
//! to one bar:
//!
//! - each SDK's dispatcher keeps the protocol's promises under generated
//!   input seeded from `fuzz/corpus` (hypothesis, fast-check, Go's native
//!   fuzzing), and each of those tests fails on a dispatcher with a
//!   deliberate bug (`TICKBOX_SDK_BROKEN=seq`: updates that repeat a seq),
//!   so it can fail;
//! - the three SDK counters (`examples/<lang>`, built as `toolchains.rs`
//!   builds them) pass one shared scenario, `tests/scenarios/sdk`;
//! - the same sources run natively (CPython, Node, a native Go build) and
//!   pass `tickbox check` with the same rules as the wasm builds.
//!
//! A missing toolchain or test library fails its test with one line naming
//! what installs it (`tests/setup.sh` installs all of them).

use crate::toolchains;
use crate::util::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A property run, a fuzz run or a native `check` may take this long on a
/// loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(600);

/// Runs `program args` in `dir` with `env` and the pip scripts on PATH.
fn run_in(dir: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .env(
            "PATH",
            toolchains::with_pip_scripts(std::env::var("PATH").unwrap_or_default()),
        )
        .env_remove("TICKBOX_SDK_BROKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    finish_within(
        cmd,
        &format!("{program} {args:?} in {}", dir.display()),
        PATIENCE,
    )
}

/// Runs a property test as it is and against the broken dispatcher: the
/// first must pass, the second must fail, and say why (`broken_says`).
fn properties_hold_and_catch_a_broken_dispatcher(
    dir: &Path,
    program: &str,
    args: &[&str],
    install: &str,
    broken_says: &str,
) {
    let out = run_in(dir, program, args, &[]);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        !said.contains("No module named") && !said.contains("Cannot find package"),
        "the test library is missing: `{install}` (tests/setup.sh does): {said}"
    );
    assert_eq!(out.code, 0, "{program} {args:?}: {said}");
    let broken = run_in(dir, program, args, &[("TICKBOX_SDK_BROKEN", "seq")]);
    let said = format!("{}{}", broken.stdout, broken.stderr);
    assert_ne!(broken.code, 0, "the positive control passed: {said}");
    assert!(
        said.contains(broken_says),
        "failed, but not on the broken seq: {said}"
    );
}

#[test]
fn the_python_sdk_keeps_the_protocol_under_hypothesis() {
    properties_hold_and_catch_a_broken_dispatcher(
        &root(),
        "python3",
        &["sdks/python/tests/properties.py"],
        "pip install -r sdks/python/requirements-test.txt",
        "update seq 0 after 0",
    );
}

#[test]
fn the_js_sdk_keeps_the_protocol_under_fast_check() {
    properties_hold_and_catch_a_broken_dispatcher(
        &root(),
        "node",
        &["sdks/js/test/properties.js"],
        "cd sdks/js && npm ci",
        "update seq 1 after 1",
    );
}

/// `tickbox.d.ts` types a Tick written in TypeScript: `sdks/js/test/types.ts`
/// compiles under `tsc --strict`, and the same file with its one expected
/// type error corrected does not (the error was expected, so tsc fails):
/// `Args<…>` really is the declared schema's type.
#[test]
fn the_js_sdk_declarations_type_the_declared_args() {
    let js = root().join("sdks/js");
    let tsc = js.join("node_modules/.bin/tsc");
    assert!(
        tsc.exists(),
        "typescript is not installed: `cd sdks/js && npm ci` (tests/setup.sh does)"
    );
    let flags = [
        "--noEmit",
        "--strict",
        "--target",
        "es2022",
        "--module",
        "es2022",
        "--moduleResolution",
        "bundler",
    ];
    let compile = |dir: &Path| {
        let mut args = flags.to_vec();
        args.push("test/types.ts");
        run_in(dir, &s(&tsc), &args, &[])
    };
    let out = compile(&js);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let t = TempDir::new("sdk-ts-control");
    std::fs::create_dir_all(t.path("test")).unwrap();
    for f in ["tickbox.js", "tickbox.d.ts"] {
        std::fs::copy(js.join(f), t.path(f)).unwrap();
    }
    let source = std::fs::read_to_string(js.join("test/types.ts")).unwrap();
    let wrong = r#"{ amount: "1" }"#;
    assert!(source.contains(wrong), "the control's line moved");
    std::fs::write(
        t.path("test/types.ts"),
        source.replace(wrong, "{ amount: 1 }"),
    )
    .unwrap();
    let out = compile(&t.0);
    assert_ne!(out.code, 0, "the control compiled: {}", out.stdout);
    assert!(
        out.stdout.contains("TS2578"),
        "{}{}",
        out.stdout,
        out.stderr
    );
}

/// The seeds (the corpus) run in the positive control; the fuzzing itself
/// runs a few seconds per target on top of them.
#[test]
fn the_go_sdk_keeps_the_protocol_under_fuzzing() {
    let dir = root().join("sdks/go");
    let go = ["GOTOOLCHAIN", "local"];
    for target in ["FuzzDispatcher", "FuzzKeys"] {
        let out = run_in(
            &dir,
            "go",
            &[
                "test",
                "-run",
                "^$",
                "-fuzz",
                &format!("^{target}$"),
                "-fuzztime",
                "5s",
                ".",
            ],
            &[(go[0], go[1])],
        );
        assert_eq!(
            out.code,
            0,
            "{target} (is go installed? `{}`, tests/setup.sh does): {}{}",
            toolchains::GO.install,
            out.stdout,
            out.stderr
        );
    }
    properties_hold_and_catch_a_broken_dispatcher(
        &dir,
        "go",
        &["test", "-count=1", "."],
        toolchains::GO.install,
        "update seq 1 after 1",
    );
}

/// The three SDK counters pass the one scenario they share.
#[test]
fn every_sdk_counter_passes_the_shared_scenario() {
    for lang in [toolchains::PYTHON, toolchains::JS, toolchains::GO] {
        let wasm = toolchains::example(lang);
        let w = wasm.to_string_lossy().into_owned();
        let out = tickbox_within(
            &[
                "test",
                &root().join("tests/scenarios/sdk").to_string_lossy(),
                "--format",
                "json",
                "--allow-env",
                "TICKBOX_SDK_COUNTER",
            ],
            &[("TICKBOX_SDK_COUNTER", w.as_str())],
            PATIENCE,
        );
        assert_eq!(out.code, 0, "{}: {out:#?}", lang.dir);
        let report = out.json();
        assert_eq!(report["passed"], true, "{}: {report}", lang.dir);
        assert!(
            report["scenarios"]
                .as_array()
                .is_some_and(|s| !s.is_empty()),
            "{}: {report}",
            lang.dir
        );
    }
}

/// `tickbox check` on a native run of an SDK counter's own source.
fn native_check(argv: &[&str]) {
    let out = tickbox_within(
        &with_command(
            &["check", "--allow-mutations"],
            &argv.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        ),
        &[(
            "PATH",
            &toolchains::with_pip_scripts(std::env::var("PATH").unwrap_or_default()),
        )],
        PATIENCE,
    );
    assert_eq!(out.code, 0, "{argv:?}: {}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
}

#[test]
fn the_python_counter_runs_natively_with_cpython_and_passes_check() {
    native_check(&["python3", &s(&root().join("examples/python/app.py"))]);
}

#[test]
fn the_js_counter_runs_natively_with_node_and_passes_check() {
    let js = root().join("examples/js");
    native_check(&["node", &s(&js.join("native.js")), &s(&js.join("app.js"))]);
}

#[test]
fn the_go_counter_runs_as_a_native_build_and_passes_check() {
    let bin = target_dir().join("guests/go-native/counter");
    let out = run_in(
        &root().join("examples/go"),
        "go",
        &["build", "-o", &s(&bin), "."],
        &[("GOTOOLCHAIN", "local")],
    );
    assert_eq!(
        out.code,
        0,
        "go build (is go installed? `{}`): {}",
        toolchains::GO.install,
        out.stderr
    );
    native_check(&[&s(&bin)]);
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}
