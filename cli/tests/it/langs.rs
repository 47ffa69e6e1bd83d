//! Ticks written without the Rust SDK, and what tickbox refuses to load:
//!
//! - the C counter (`examples/c`), built by its own `build.sh` for
//!   wasm32-wasip1 (clang + wasi-libc) and natively, checked with
//!   `tickbox check`, called, and its `poll()`-timeout timer and (natively)
//!   its keys driven through a session;
//! - a component importing what tickbox does not provide (here the
//!   server side of `wasi:http`) is refused before anything is compiled,
//!   naming the import; outgoing `wasi:http` passes the check;
//! - `tickbox new` projects (Rust and C) build, named after the project
//!   (`NAME.wasm`), and pass `tickbox check` and their own scenario
//!   (`scenarios/NAME.scenario.toml`) as generated, written outside the
//!   repository with nothing in them pointing back at it: the Rust one
//!   carries the SDK (`vendor/`) and builds offline from its lock;
//! - what `tickbox new` prints: every command after one `cd`, and
//!   `tickbox --help` naming every language.
//! - docs/guide/first-tick.md, run as written: its `console` blocks in
//!   order in one folder out of the checkout's reach, and its Rust and
//!   scenario blocks written where it says.
//!
//! The C toolchain is not optional here: `.ci/run` installs it, and a
//! missing one fails the test with the command that installs it.

use crate::util::*;
use serde_json::json;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tickbox_runtime::backend::native::{self, NativeSpec};
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{self, WasmEngine, WasmSpec};
use tickbox_runtime::session::{Session, SessionConfig};

/// Builds `examples/c` into `$CARGO_TARGET_DIR/guests/c` once per test
/// run (`once_per_run`; build.sh itself skips outputs newer than the
/// source); the paths of the wasm module and the native binary.
pub(crate) fn c_counter() -> (PathBuf, PathBuf) {
    let out = target_dir().join("guests").join("c");
    once_per_run("examples/c", || {
        let script = root().join("examples/c/build.sh");
        let result = std::process::Command::new("sh")
            .arg(&script)
            .arg(&out)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !result.status.success() {
            return Err(format!(
                "building examples/c failed; the C toolchain is needed (Debian: apt-get install \
                 clang-14 lld-14 wasi-libc libclang-rt-14-dev-wasm32; .ci/run installs it):\n{}",
                String::from_utf8_lossy(&result.stderr)
            ));
        }
        Ok(())
    });
    (out.join("counter.wasm"), out.join("counter"))
}

fn s(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn the_c_counter_passes_tickbox_check_as_a_wasip1_module_and_natively() {
    let (module, native) = c_counter();
    let head = std::fs::read(&module).expect("read counter.wasm");
    assert_eq!(&head[..8], b"\0asm\x01\0\0\0", "a wasip1 core module");
    for argv in [
        vec!["check".to_string(), s(&module), "--allow-mutations".into()],
        vec![
            "check".to_string(),
            "--allow-mutations".into(),
            "--".into(),
            s(&native),
        ],
    ] {
        let out = tickbox(&argv);
        assert_eq!(out.code, 0, "{argv:?}:\n{}\n{}", out.stdout, out.stderr);
        assert!(out.stdout.contains("PASSED"), "{argv:?}: {}", out.stdout);
    }
}

#[test]
fn the_c_counter_answers_as_in_appendix_a() {
    let (module, _) = c_counter();
    let m = s(&module);
    let out = tickbox(&["read", m.as_str()]);
    assert_eq!(
        out.json(),
        json!({"seq": 0, "data": {"value": 0, "recent": []}}),
        "{out:#?}"
    );
    let out = tickbox(&["call", m.as_str(), "increment", r#"{"amount":2}"#, "--yes"]);
    assert_eq!(out.json(), json!({"value": 2}), "{out:#?}");
    let out = tickbox(&["describe", m.as_str()]);
    let d = out.json();
    assert_counter_catalog(&d);
}

fn engine() -> Arc<WasmEngine> {
    static ENGINE: OnceLock<Arc<WasmEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| WasmEngine::new(None).expect("engine"))
        .clone()
}

async fn open_wasm(path: PathBuf) -> Session {
    open_wasm_session(&engine(), path, GrantSpec::default()).await
}

/// The wasip1 module's timer fires while it waits in `poll()` on stdin:
/// updates keep coming with no request in flight, and stop when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_c_counter_runs_timers_while_waiting_for_requests() {
    let (module, _) = c_counter();
    let s = open_wasm(module).await;
    screen_shows(&s, "Counter: 0").await;
    timer_runs_between_requests(&s).await;
    s.shutdown().await;
}

/// Natively the same source takes keys from its terminal (the view).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_native_c_counter_takes_keys_from_the_view() {
    let (_, native) = c_counter();
    let io = native::spawn(&NativeSpec::new([s(&native)])).expect("spawn native");
    let s = Session::start(io, SessionConfig::default())
        .await
        .expect("initialize");
    screen_shows(&s, "Counter: 0").await;
    let mut events = s.events();
    s.view().send_input(b"+");
    assert_eq!(value_reaches(&mut events, 1).await, 1);
    screen_shows(&s, "Counter: 1").await;
    assert_eq!(
        call_ok(&s, "increment", json!({"amount": 2})).await,
        json!({"value": 3})
    );
    s.shutdown().await;
}

/// A component whose imports are `names` (each an empty instance type),
/// followed by a nested core module that does not compile, and (with `run`)
/// exporting `wasi:cli/run`: a refusal that names the import proves nothing
/// was compiled first.
fn component_importing(names: &[&str], run: bool) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    fn section(id: u8, content: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(content.len(), out);
        out.extend_from_slice(content);
    }
    let mut c = b"\0asm\x0d\0\x01\0".to_vec();
    section(7, &[1, 0x42, 0], &mut c); // type 0: (instance)
    let mut imports = Vec::new();
    leb(names.len(), &mut imports);
    for n in names {
        imports.push(0);
        leb(n.len(), &mut imports);
        imports.extend_from_slice(n.as_bytes());
        imports.extend_from_slice(&[0x05, 0]); // (instance (type 0))
    }
    section(10, &imports, &mut c);
    // A core module with a function section and no code section.
    let mut broken = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut broken);
    section(3, &[1, 0], &mut broken);
    section(1, &broken, &mut c);
    if run {
        // (export "wasi:cli/run@0.2.0" (instance 0))
        let name = b"wasi:cli/run@0.2.0";
        let mut export = vec![1, 0, name.len() as u8];
        export.extend_from_slice(name);
        export.extend_from_slice(&[0x05, 0, 0]);
        section(11, &export, &mut c);
    }
    c
}

#[test]
fn unsupported_imports_are_refused_before_compiling() {
    let dir = TempDir::new("imports");
    let path = dir.path("http.wasm");
    std::fs::write(
        &path,
        component_importing(
            &["wasi:io/poll@0.2.3", "wasi:http/incoming-handler@0.2.3"],
            true,
        ),
    )
    .expect("write");
    let p = s(&path);
    let out = tickbox(&["describe", p.as_str(), "--no-cache"]);
    out.expect(
        3,
        "imports `wasi:http/incoming-handler@0.2.3`, which tickbox does not provide",
    );
    assert!(out.stderr.contains("only outgoing requests"), "{out:#?}");
    assert_eq!(out.stderr.trim().lines().count(), 1, "one line: {out:#?}");
    eprintln!("refused in {:?} (process start included)", out.elapsed);

    // Without the entry point a Tick is started by, the same: refused
    // before compiling, naming the export.
    std::fs::write(&path, component_importing(&["wasi:io/poll@0.2.3"], false)).expect("write");
    let out = tickbox(&["describe", p.as_str(), "--no-cache"]);
    out.expect(3, "it exports no `wasi:cli/run@0.2.x`");

    // Positive control: with supported imports (outgoing wasi:http, which
    // componentize-js imports by default, among them) and the entry point
    // the same file reaches the compiler, which refuses the broken module.
    for imports in [
        &["wasi:io/poll@0.2.3"][..],
        &["wasi:http/types@0.2.3", "wasi:http/outgoing-handler@0.2.3"],
    ] {
        std::fs::write(&path, component_importing(imports, true)).expect("write");
        let out = tickbox(&["describe", p.as_str(), "--no-cache"]);
        assert_eq!(out.code, 3, "{out:#?}");
        assert!(!out.stderr.contains("does not provide"), "{out:#?}");
        assert!(!out.stderr.contains("exports no"), "{out:#?}");
    }
}

/// `tickbox new` for Rust, as on a machine with only the tickbox binary:
/// the project is written outside the repository and names nothing in it
/// (it carries the SDK in `vendor/`, and a `Cargo.lock`), builds with the
/// printed command in the printed directory, offline and locked (its
/// crates come from the registry cache, where the examples' build put
/// them), into a target directory of its own; then it passes `tickbox
/// check`, answers as every language's counter does and passes its own
/// scenario.
#[test]
fn tickbox_new_rust_builds_with_only_the_binary() {
    let dir = TempDir::new("new-rust");
    let project = dir.path("my-tick");
    let p = s(&project);
    let out = tickbox(&["new", p.as_str()]);
    assert_eq!(out.code, 0, "{out:#?}");
    let created = out.json();
    assert_eq!(created["lang"], "rust");
    assert_eq!(created["cd"], format!("cd {p}"), "{created}");
    assert!(project.join("vendor/tickbox-guest/src/lib.rs").is_file());
    assert!(project
        .join("vendor/tickbox-guest/wit/terminal.wit")
        .is_file());
    assert!(project.join("vendor/tickbox-protocol/Cargo.toml").is_file());
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains("tickbox-guest = { path = \"vendor/tickbox-guest\" }")
            && manifest.contains("#   tickbox-guest = \""),
        "a path dependency, and what to write once it is published: {manifest}"
    );
    out_of_the_checkouts_reach(&project);

    // The printed build, where it is printed to run (after `cd`); the
    // crates the examples' build fetched are all it needs.
    build_wasm("examples", "counter", "wasm32-wasip2");
    let build = created["build"].as_str().expect("build");
    assert_eq!(build, "cargo build --release --target wasm32-wasip2");
    let target = new_rust_target();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let result = std::process::Command::new(cargo)
        .args(build.split(' ').skip(1))
        .args(["--offline", "--locked", "--quiet"])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(&project)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_BOOTSTRAP")
        .output()
        .expect("run cargo");
    assert!(
        result.status.success(),
        "the generated Rust project does not build offline with its lock (cut from \
         examples/Cargo.lock by new.rs's project_lock: after a change to the examples' \
         dependencies, run tools/sync):\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    // The printed check, with the Tick where this build put it.
    let check = created["check"].as_str().expect("check");
    let wasm = target.join("wasm32-wasip2/release/my-tick.wasm");
    assert_eq!(
        check,
        "tickbox check target/wasm32-wasip2/release/my-tick.wasm --allow-mutations"
    );
    let w = s(&wasm);
    let out = tickbox(&["check", w.as_str(), "--allow-mutations"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);

    // The counter of every language: the same tools, answers and refusals.
    let out = tickbox(&["describe", w.as_str()]);
    let d = out.json();
    assert_eq!(d["kind"], "local.my.tick");
    assert_counter_tools(&d);
    let call = |tool: &str, args: &str| tickbox(&["call", w.as_str(), tool, args, "--yes"]);
    assert_eq!(
        call("increment", r#"{"amount":5}"#).json(),
        json!({"value": 5})
    );
    assert_eq!(call("history", "{}").json(), json!({"recent": []}));
    assert_eq!(
        call("auto", r#"{"every_ms":0}"#).json(),
        json!({"every_ms": 0})
    );
    call("auto", r#"{"every_ms":5}"#).expect(1, "every_ms is 0 or 20..60000");
    call("auto", r#"{"every_ms":60001}"#).expect(2, "every_ms");

    // The printed scenario command finds the build where cargo put it:
    // CARGO_TARGET_DIR, which the scenario reads only because the command
    // line allows it.
    assert_eq!(created["test"], "tickbox test scenarios");
    let t = s(&target);
    project_scenario_passes(
        &project,
        "my-tick",
        &["--allow-env", "CARGO_TARGET_DIR"],
        &[("CARGO_TARGET_DIR", t.as_str())],
    );

    // It never overwrites: the same path again is a usage error.
    let out = tickbox(&["new", p.as_str()]);
    out.expect(2, "exists");
}

/// Where the `tickbox new` Rust projects of these tests build: kept
/// between runs, so only the project's own crates build again.
fn new_rust_target() -> PathBuf {
    target_dir().join("guests").join("new-rust")
}

/// docs/guide/first-tick.md as a newcomer follows it, every block as
/// written and its output checked: `tickbox new` and the commands it
/// prints, the guide's Tick written over `src/main.rs` and its scenario,
/// the build, `describe`, `call`, `screen`, the scenario and the native
/// build, in a folder out of the checkout's reach.
#[test]
fn the_first_tick_guide_runs_as_written() {
    let dir = TempDir::new("first-tick");
    // The crates the project's lock pins are those this build fetched.
    build_wasm("examples", "counter", "wasm32-wasip2");
    let target = new_rust_target();
    let cache = wasm_cache();
    let steps = crate::doc_examples::run_as_written(
        "docs/guide/first-tick.md",
        "langs::the_first_tick_guide_runs_as_written",
        &dir.0,
        // A bound for a hang: the first build of the SDK's crates takes
        // minutes on a loaded machine.
        900,
        |cwd, cmd| {
            // The project, once made: its `target` is a link to the build
            // directory kept between runs, and cargo stays offline.
            if cwd.join("Cargo.toml").is_file() && cwd.join("target").symlink_metadata().is_err() {
                out_of_the_checkouts_reach(cwd);
                // Made here when this test runs first (a fresh clone).
                std::fs::create_dir_all(&target).expect("the kept build directory");
                std::os::unix::fs::symlink(&target, cwd.join("target")).expect("link target");
            }
            cmd.env("CARGO_NET_OFFLINE", "true")
                .env("TICKBOX_CACHE_DIR", &cache)
                .env_remove("CARGO_TARGET_DIR")
                .env_remove("RUSTFLAGS")
                .env_remove("RUSTC_BOOTSTRAP");
        },
    )
    .unwrap_or_else(|why| panic!("docs/guide/first-tick.md: {why}"));
    assert!(steps >= 12, "the guide's steps were read: {steps}");
    assert!(dir.path("hello-tick/src/main.rs").is_file());
}

/// `--sdk-path DIR` depends on the SDK at DIR instead of carrying one.
#[test]
fn tickbox_new_rust_with_sdk_path_depends_on_that_sdk() {
    let dir = TempDir::new("new-rust-sdk-path");
    let project = dir.path("sdk-tick");
    let sdk = root().join("guest-sdk");
    let out = tickbox(&["new", s(&project).as_str(), "--sdk-path", s(&sdk).as_str()]);
    assert_eq!(out.code, 0, "{out:#?}");
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        manifest.contains(&format!("tickbox-guest = {{ path = \"{}\" }}", s(&sdk))),
        "{manifest}"
    );
    assert!(!project.join("vendor").exists());
    let nowhere = dir.path("nowhere");
    tickbox(&[
        "new",
        s(&dir.path("x")).as_str(),
        "--sdk-path",
        s(&nowhere).as_str(),
    ])
    .expect(2, "no Cargo.toml there");
}

/// `tickbox new --lang c`: the project's own build.sh builds `c-tick.c`
/// into `build/c-tick.wasm` (and the native `build/c-tick`), which passes
/// `tickbox check` and the project's scenario as generated.
#[test]
fn tickbox_new_c_builds_and_passes_check() {
    let dir = TempDir::new("new-c");
    let project = dir.path("c-tick");
    let p = s(&project);
    let out = tickbox(&["new", p.as_str(), "--lang", "c"]);
    assert_eq!(out.code, 0, "{out:#?}");
    out_of_the_checkouts_reach(&project);
    let result = std::process::Command::new(project.join("build.sh"))
        .current_dir(&project)
        .output()
        .expect("run build.sh");
    assert!(
        result.status.success(),
        "the generated C project does not build (Debian: apt-get install clang-14 lld-14 \
         wasi-libc libclang-rt-14-dev-wasm32):\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert!(project.join("c-tick.c").is_file());
    assert!(!project.join("counter.c").exists());
    assert!(project.join("build/c-tick").is_file(), "the native build");
    let wasm = s(&project.join("build/c-tick.wasm"));
    let out = tickbox(&["check", wasm.as_str(), "--allow-mutations"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    assert_eq!(
        tickbox(&["describe", wasm.as_str()]).json()["kind"],
        "local.c.tick"
    );
    project_scenario_passes(&project, "c-tick", &[], &[]);
}

/// `tickbox --help` names every language `new` writes, and `new --help`
/// shows an example of each.
#[test]
fn tickbox_help_lists_every_language_of_new() {
    let out = tickbox(&["--help"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout
            .contains("tickbox new PATH [--lang rust|c|python|js|go]"),
        "{}",
        out.stdout
    );
    let out = tickbox(&["new", "--help"]);
    for lang in ["c", "python", "js", "go"] {
        assert!(
            out.stdout
                .contains(&format!("tickbox new my-tick --lang {lang} ")),
            "{lang}: {}",
            out.stdout
        );
    }
}

/// A path that needs quoting in a shell is quoted in the printed `cd`.
#[test]
fn tickbox_new_quotes_the_directory_it_prints() {
    let dir = TempDir::new("new-quote");
    let parent = dir.path("it's here");
    std::fs::create_dir_all(&parent).expect("mkdir");
    let project = parent.join("q-tick");
    let out = tickbox(&["new", s(&project).as_str(), "--lang", "c"]);
    assert_eq!(out.code, 0, "{out:#?}");
    let quoted = format!("'{}'", s(&project).replace('\'', "'\\''"));
    assert_eq!(out.json()["cd"], format!("cd {quoted}"));
    let shell = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("{} && ls", out.json()["cd"].as_str().unwrap()),
        ])
        .output()
        .expect("sh");
    assert!(
        String::from_utf8_lossy(&shell.stdout).contains("q-tick.c"),
        "{shell:?}"
    );
}

#[test]
fn tickbox_new_refuses_bad_names_and_writes_nothing() {
    let dir = TempDir::new("new-bad");
    for name in ["My-Tick", "9lives", "a b", "x\"y"] {
        let p = s(&dir.path(name));
        tickbox(&["new", p.as_str()]).expect(2, "project name");
        assert!(!dir.path(name).exists(), "{name}: nothing written");
    }
}

/// A compile that takes a while is announced (the CLI prints a line after
/// `SLOW_COMPILE`; here the threshold is zero so any compile is slow), and
/// a cached start compiles nothing, so nothing is announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_compiles_are_announced_once() {
    let (module, _) = c_counter();
    let cache = TempDir::new("slow-compile");
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    for _ in 0..2 {
        // A fresh engine each time: only the disk cache is shared.
        let engine = WasmEngine::new(Some(cache.0.clone())).expect("engine");
        let t = told.clone();
        engine.on_slow_compile(Duration::ZERO, move |path, size| {
            t.lock().unwrap().push((path.to_path_buf(), size));
        });
        let spec = WasmSpec {
            path: module.clone(),
            args: vec![],
            grants: GrantSpec::default().resolve().expect("grants"),
            instance_id: None,
            exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
            pin: None,
            audit: None,
        };
        let io = wasm::spawn(&engine, &spec).await.expect("spawn wasm");
        let s = Session::start(io, SessionConfig::default())
            .await
            .expect("initialize");
        s.shutdown().await;
    }
    let size = std::fs::metadata(&module).expect("stat").len() as usize;
    assert_eq!(*told.lock().unwrap(), vec![(module.clone(), size)]);
}

/// `tickbox new` at a terminal prints sentences (what was made, how to
/// build and check it); piped, or with --json, the JSON object.
#[test]
fn tickbox_new_speaks_to_a_person_on_a_terminal_and_json_to_a_pipe() {
    let w = crate::live::World::new("new-tty");
    let project = w.dir.path("tty-tick");
    let p = s(&project);
    let mut pty = w.pty(&["new", p.as_str(), "--lang", "c"], 100, 24);
    assert_eq!(pty.wait(), 0, "{}", pty.text());
    let text = pty.text();
    assert!(text.contains("Created a c Tick in"), "{text}");
    // Every command runs in the project's directory, after one `cd`.
    let steps: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .map(str::trim_end)
        .collect();
    assert_eq!(
        steps,
        [
            format!("cd {p}").as_str(),
            "./build.sh",
            "tickbox check build/tty-tick.wasm --allow-mutations",
            "tickbox test scenarios",
        ],
        "{text}"
    );
    for heading in ["Go to it:", "Build it:", "Check it:", "Run its scenario:"] {
        assert!(text.contains(heading), "{heading}: {text}");
    }
    assert!(!text.contains("{\""), "no JSON on a terminal: {text}");
    let piped = w.dir.path("piped-tick");
    let out = tickbox(&["new", s(&piped).as_str(), "--lang", "c"]);
    assert_eq!(out.json()["lang"], "c", "{out:#?}");
    assert_eq!(
        out.json()["wasm"],
        format!("{}/build/piped-tick.wasm", s(&piped)),
        "{out:#?}"
    );
    assert_eq!(out.json()["cd"], format!("cd {}", s(&piped)));
    assert_eq!(out.json()["test"], "tickbox test scenarios");
    let json = w.dir.path("json-tick");
    let mut pty = w.pty(
        &["new", s(&json).as_str(), "--lang", "c", "--json"],
        100,
        24,
    );
    assert_eq!(pty.wait(), 0);
    assert!(pty.text().contains("\"lang\":\"c\""), "{}", pty.text());
    // The title is the project's own.
    let source = std::fs::read_to_string(project.join("tty-tick.c")).unwrap();
    assert!(source.contains("\\\"title\\\":\\\"tty-tick\\\""), "title");
}
