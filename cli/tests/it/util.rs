//! Test harness shared by every module.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The workspace root.
/// The host's library crates' sources, from the repository root (the
/// layers the CLI builds on; the SDKs are apart).
pub const LIBRARY_SOURCES: &[&str] = &[
    "protocol/src",
    "trust/src",
    "host/src",
    "sandbox/src",
    "registry/src",
    "mcp/src",
    "conformance/src",
];

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// A test Tick script under tests/ticks.
pub fn tick(name: &str) -> String {
    root()
        .join("tests/ticks")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// argv for the faulty Tick in one mode.
pub fn faulty(mode: &str) -> Vec<String> {
    vec!["python3".into(), tick("faulty.py"), mode.into()]
}

/// A fresh temp dir for one test, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tickbox-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    /// A new 0700 directory `name` inside: a runtime directory
    /// (`XDG_RUNTIME_DIR`) tickbox accepts for its live instances.
    pub fn private_dir(&self, name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.path(name);
        std::fs::create_dir_all(&dir).expect("create private dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .expect("make it private");
        dir
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one `tickbox` run produced.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Asserts the exit code and that stderr mentions `needle`.
    pub fn expect(&self, code: i32, needle: &str) -> &Self {
        assert_eq!(self.code, code, "exit code; {self:#?}");
        assert!(
            self.stderr.contains(needle),
            "stderr should mention {needle:?}; {self:#?}"
        );
        self
    }
}

/// Runs `tickbox` with these args (and env), failing the test after 60 s.
pub fn tickbox_env<S: AsRef<str>>(args: &[S], env: &[(&str, &str)]) -> Output {
    tickbox_within(args, env, Duration::from_secs(60))
}

/// Runs `tickbox` with these args and environment, killing it (and failing
/// the test) after `limit`: for the few tests whose tickbox may take long
/// on a loaded machine without that being the failure.
pub fn tickbox_within<S: AsRef<str>>(args: &[S], env: &[(&str, &str)], limit: Duration) -> Output {
    tickbox_at(None, args, env, limit)
}

/// [`tickbox_env`] in the working directory `dir` (for what tickbox finds
/// there, such as `./tickbox.lock`).
pub fn tickbox_in<S: AsRef<str>>(dir: &Path, args: &[S], env: &[(&str, &str)]) -> Output {
    tickbox_at(Some(dir), args, env, Duration::from_secs(60))
}

fn tickbox_at<S: AsRef<str>>(
    dir: Option<&Path>,
    args: &[S],
    env: &[(&str, &str)],
    limit: Duration,
) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tickbox"));
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    cmd.args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("RUST_LOG")
        // `CI` changes what `tickbox test` runs (only sandboxed Ticks): the
        // tests that need it set it themselves, whatever CI runs them.
        .env_remove("CI")
        // Compiled wasm goes to the build's own cache, not the user's home.
        .env("TICKBOX_CACHE_DIR", target_dir().join("test-wasm-cache"))
        // Pulled Ticks too (the registry tests give each test its own).
        .env("TICKBOX_STORE_DIR", target_dir().join("test-oci-store"))
        // Approvals are never read from or written to the user's home: a
        // store no test writes (the consent tests pass a private one each).
        .env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let shown = format!(
        "tickbox {:?}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>()
    );
    finish_within(cmd, &shown, limit)
}

/// Starts `cmd` (stdout and stderr piped), collects both, and waits for it
/// to end; after `limit` it is killed and the test fails naming `shown`.
pub fn finish_within(cmd: Command, shown: &str, limit: Duration) -> Output {
    finish_within_guarded(cmd, shown, limit, |_| ())
}

/// [`finish_within`], holding `guard(pid)` from the start until it returns
/// or the test fails: for a child whose own children must go with it (a
/// guard that kills its process group on drop).
pub fn finish_within_guarded<G>(
    mut cmd: Command,
    shown: &str,
    limit: Duration,
    guard: impl FnOnce(u32) -> G,
) -> Output {
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let _guard = guard(child.id());
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{shown} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        code: status.code().unwrap_or(-1),
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

/// Runs `tickbox` with these args.
pub fn tickbox<S: AsRef<str>>(args: &[S]) -> Output {
    tickbox_env(args, &[])
}

/// `tickbox <cmd> [extra...] -- <argv...>`
pub fn with_command(cmd: &[&str], argv: &[String]) -> Vec<String> {
    let mut v: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    v.push("--".into());
    v.extend(argv.iter().cloned());
    v
}

/// Whether a process still exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            state != Some('Z') && state != Some('X')
        }
    }
}

/// Polls `cond` for up to `limit`.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// [`eventually`] for async tests: polls `cond` for up to `limit`, pausing
/// without holding a worker thread.
pub async fn eventually_async(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// The target dir of this build (honours CARGO_TARGET_DIR).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// The source trees a guest workspace is built from: its own directory and
/// the path dependencies guests use (the SDK and the protocol crate it
/// depends on). Over-inclusive on purpose: a change anywhere here rebuilds.
fn guest_sources(workspace: &str) -> [PathBuf; 3] {
    let root = root();
    [
        root.join(workspace),
        root.join("guest-sdk"),
        root.join("protocol"),
    ]
}

/// Every `.rs` file under `dir` with its text, in a stable order.
pub fn rust_sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read source");
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

/// The newest modification time of any file under `dir` (skipping `target`
/// directories), or `None` when one cannot be read.
fn newest_under(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = std::time::SystemTime::UNIX_EPOCH;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()? {
            let entry = entry.ok()?;
            let meta = entry.metadata().ok()?;
            if meta.is_dir() {
                if entry.file_name() != "target" {
                    stack.push(entry.path());
                }
            } else {
                newest = newest.max(meta.modified().ok()?);
            }
        }
    }
    Some(newest)
}

/// Whether the stamp of an earlier successful build is newer than every
/// source file of the workspace: then cargo would find nothing to do, and
/// it is not run (a nested cargo costs about half a second, and a whole
/// rebuild when only the environment differs, e.g. a build script that
/// watches an environment variable).
fn stamp_is_fresh(stamp: &Path, workspace: &str) -> bool {
    let Some(built) = std::fs::metadata(stamp).and_then(|m| m.modified()).ok() else {
        return false;
    };
    guest_sources(workspace)
        .iter()
        .all(|dir| newest_under(dir).is_some_and(|t| t < built))
}

/// Runs `build` at most once per test run for `name`, across every test
/// process and binary: cargo-nextest runs each test in a process of its
/// own, so an in-process cell alone would build once per test. The first
/// process to need `name` takes an exclusive lock on a file in
/// `$CARGO_TARGET_DIR/guests` and builds; the others wait on the lock,
/// then find the result already there (`build` is expected to skip work
/// that is fresh, by a stamp or its build script's own check). Within a
/// process the outcome is remembered, so the lock is taken once.
pub fn once_per_run(name: &str, build: impl FnOnce() -> Result<(), String>) {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static DONE: OnceLock<Mutex<HashMap<String, Result<(), String>>>> = OnceLock::new();
    let map = DONE.get_or_init(Default::default);
    let mut done = map.lock().unwrap_or_else(|p| p.into_inner());
    let result = done.entry(name.to_string()).or_insert_with(|| {
        let dir = target_dir().join("guests");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join(format!(".lock-{}", name.replace('/', "_")));
        let lock = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        // Released when `lock` is dropped at the end of this closure, or
        // by the kernel if this process dies while building.
        lock.lock()
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
        build()
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Builds a guest workspace for `target` (None: natively), release, with a
/// nested cargo into `$CARGO_TARGET_DIR/guests`, at most once per test
/// run ([`once_per_run`]), and not at all when a stamp shows that an
/// earlier run built it from the same sources
/// (`TICKBOX_TEST_REBUILD_GUESTS=1` runs cargo anyway); the directory its
/// artifacts land in.
fn build_guests(workspace: &str, target: Option<&str>) -> PathBuf {
    let out = target_dir().join("guests");
    let stamp = out.join(format!(
        ".built-{}-{}",
        workspace.replace('/', "_"),
        target.unwrap_or("native")
    ));
    let name = format!("{workspace}-{}", target.unwrap_or("native"));
    once_per_run(&name, || {
        if std::env::var_os("TICKBOX_TEST_REBUILD_GUESTS").is_none()
            && stamp_is_fresh(&stamp, workspace)
        {
            return Ok(());
        }
        // A source edited during the build makes the stamp older than it,
        // so the next run builds again.
        let started = std::time::SystemTime::now();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--release", "--quiet", "--manifest-path"])
            .arg(root().join(workspace).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&out)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            // Build scripts of the guests' dependencies (proc-macro2,
            // anyhow) rerun when it changes, so a test run under
            // `RUSTC_BOOTSTRAP=1` (for `--report-time`) would rebuild them all.
            .env_remove("RUSTC_BOOTSTRAP");
        if let Some(t) = target {
            cmd.args(["--target", t]);
        }
        let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
        match (status.success(), target) {
            (true, _) => {
                let _ = std::fs::File::create(&stamp).and_then(|f| f.set_modified(started));
                Ok(())
            }
            (false, Some(t)) => Err(format!(
                "building {workspace} for {t} failed (is the target installed? `rustup target add {t}`)"
            )),
            (false, None) => Err(format!("building {workspace} natively failed")),
        }
    });
    match target {
        Some(t) => out.join(t).join("release"),
        None => out.join("release"),
    }
}

/// Builds a crate of a guest workspace for a wasm target and returns the
/// `.wasm` path. `workspace` is relative to the repository root (e.g.
/// `tests/guests`).
pub fn build_wasm(workspace: &str, krate: &str, target: &str) -> PathBuf {
    build_guests(workspace, Some(target)).join(format!("{krate}.wasm"))
}

/// The hostile test guest as a wasm32-wasip2 component.
pub fn hostile() -> String {
    build_wasm("tests/guests", "hostile", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// The hostile test guest as a wasm32-wasip1 core module.
pub fn hostile_p1() -> String {
    build_wasm("tests/guests", "hostile", "wasm32-wasip1")
        .to_string_lossy()
        .into_owned()
}

/// Builds a guest workspace natively and returns the path of one of its
/// binaries. The native twin of [`build_wasm`].
pub fn build_native(workspace: &str, krate: &str) -> PathBuf {
    build_guests(workspace, None).join(krate)
}

// ----- sessions through the library (langs.rs, toolchains.rs) -----

use serde_json::Value;
use std::sync::Arc;
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{self, WasmEngine, WasmSpec};
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig, SessionEvent};

/// How long a test waits for something that should happen within
/// milliseconds; only reached when the test is failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// An initialized session on a wasm Tick, in real time, through the library.
pub async fn open_wasm_session(
    engine: &Arc<WasmEngine>,
    path: PathBuf,
    grants: GrantSpec,
) -> Session {
    let spec = WasmSpec {
        path,
        args: vec![],
        grants: grants.resolve().expect("grants"),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    };
    let io = wasm::spawn(engine, &spec).await.expect("spawn wasm");
    Session::start(io, SessionConfig::default())
        .await
        .expect("initialize")
}

/// The Appendix A counter's catalog, as every language's counter describes it.
pub fn assert_counter_catalog(d: &Value) {
    assert_eq!(d["kind"], "example.counter");
    assert_eq!(d["recover_with"], "history");
    let names: Vec<&str> = d["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["increment", "history", "auto"]);
}

/// How long `tickbox test` may take on a `tickbox new` project's scenario:
/// a big component (Python, JavaScript) that is not in the compile cache
/// yet compiles for minutes on a loaded 2-core machine.
pub const PROJECT_SCENARIO_LIMIT: Duration = Duration::from_secs(600);

/// `tickbox test PROJECT/scenarios` (plus `extra` args, with `env`) on a
/// `tickbox new` project named `name` that was built: its one scenario,
/// `scenarios/NAME.scenario.toml`, runs the build's `NAME.wasm` and passes
/// every step.
pub fn project_scenario_passes(project: &Path, name: &str, extra: &[&str], env: &[(&str, &str)]) {
    let scenarios = project.join("scenarios");
    let file = scenarios.join(format!("{name}.scenario.toml"));
    assert!(file.is_file(), "no {}", file.display());
    let dir = scenarios.to_string_lossy().into_owned();
    let mut args = vec!["test", dir.as_str(), "--format", "json"];
    args.extend(extra);
    let out = tickbox_within(&args, env, PROJECT_SCENARIO_LIMIT);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let report = out.json();
    let ran = report["scenarios"].as_array().expect("scenarios");
    assert_eq!(ran.len(), 1, "{report}");
    assert_eq!(ran[0]["status"], "passed", "{report}");
    assert!(
        ran[0]["name"]
            .as_str()
            .unwrap_or("")
            .starts_with(&format!("{name}: ")),
        "the scenario is named after the project: {report}"
    );
    assert_eq!(ran[0]["steps"], ran[0]["passed_steps"], "{report}");
    assert!(ran[0]["steps"].as_u64() > Some(3), "{report}");
}

/// Calls `tool` and returns its result; any other outcome fails the test.
pub async fn call_ok(s: &Session, tool: &str, args: Value) -> Value {
    let c = s.descriptor().unwrap().prepare(tool, args).unwrap();
    match s.call(&c).await {
        CallOutcome::Ok(v) => v,
        other => panic!("{tool}: expected a result, got {other:?}"),
    }
}

/// Waits for the next `tick/update` whose data satisfies `want`; its seq
/// and data.
pub async fn update_where(
    events: &mut tokio::sync::broadcast::Receiver<SessionEvent>,
    what: &str,
    want: impl Fn(&Value) -> bool,
) -> (u64, Value) {
    let wait = async {
        loop {
            match events.recv().await {
                Ok(SessionEvent::Updated(st)) if want(st.data.wire()) => {
                    return (st.seq, st.data.wire().clone())
                }
                Ok(SessionEvent::Ended(why)) => panic!("session ended waiting for {what}: {why:?}"),
                Ok(_) => {}
                Err(e) => panic!("events closed waiting for {what}: {e}"),
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .unwrap_or_else(|_| panic!("no update with {what}"))
}

/// Waits for an update whose value is at least `value`; its seq.
pub async fn value_reaches(
    events: &mut tokio::sync::broadcast::Receiver<SessionEvent>,
    value: i64,
) -> u64 {
    let what = format!("a value of at least {value}");
    update_where(events, &what, |d| d["value"].as_i64() >= Some(value))
        .await
        .0
}

/// The Appendix A counter's `auto` timer fires while the Tick waits for
/// requests (five steps with no request in flight, one update each), and
/// `auto 0` stops it.
pub async fn timer_runs_between_requests(s: &Session) {
    let mut events = s.events();
    let first = s.read().await.unwrap();
    let start = first.data.wire()["value"].as_i64().unwrap();
    assert_eq!(
        call_ok(s, "auto", serde_json::json!({"every_ms": 20})).await,
        serde_json::json!({"every_ms": 20})
    );
    let running = Instant::now();
    let seq = value_reaches(&mut events, start + 5).await;
    // What five steps take on this machine now (100 ms when idle).
    let five_steps = running.elapsed();
    assert!(seq >= first.seq + 5, "one update per step: seq {seq}");
    screen_shows(s, "every 20 ms").await;
    call_ok(s, "auto", serde_json::json!({"every_ms": 0})).await;
    // Stopped: over twice the time five steps just took, at most the one
    // step that was under way lands, where a timer still running would add
    // about ten (it just did five in half the time). A slower machine
    // stretches the wait with the steps, so it cannot fail for being slow.
    let stopped = s.read().await.unwrap().seq;
    let quiet = (five_steps * 2).max(Duration::from_millis(300));
    tokio::time::sleep(quiet).await;
    let after = s.read().await.unwrap().seq;
    assert!(
        after <= stopped + 1,
        "auto 0 stops the timer: seq {stopped} when stopped, {after} {quiet:?} later"
    );
}

/// Waits until the view's screen shows `needle`.
pub async fn screen_shows(s: &Session, needle: &str) -> String {
    for _ in 0..(PATIENCE.as_millis() / 20) {
        let text = s.view().screen_text().wire().to_string();
        if text.contains(needle) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "the view never showed {needle:?}:\n{}",
        s.view().screen_text()
    );
}

/// A `kB` field of a live process's `/proc/PID/status` (`VmRSS`, `VmHWM`,
/// ...), in KiB.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// A test CA and a certificate it signs for 127.0.0.1 (for loopback TLS
/// servers): the CA as PEM, the leaf certificate and its key.
pub fn loopback_pki(ca_name: &str) -> (String, rcgen::Certificate, rcgen::KeyPair) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (ca.pem(), leaf, key)
}
