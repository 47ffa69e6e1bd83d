//! The harness every tickbox test binary shares: where the workspace is,
//! a temporary directory per test, the test guests built once per run
//! (whatever the number of test processes: cargo-nextest runs each test in
//! a process of its own), and bounded waits for events.
//!
//! Start with [`build_wasm`] (a guest workspace's crate as a `.wasm`),
//! [`TempDir`], [`exits_within`] and [`eventually`]. It depends on no
//! tickbox crate, so every crate's tests can use it without a cycle.
//! [`registry`] starts a real OCI registry and makes SSH keys; [`wasm`]
//! generates the modules that hit the sandbox's walls; [`mcp_http`] is a
//! raw-TCP client of an MCP HTTP server, [`mcp_lines`] a raw-lines one of
//! an MCP server on a byte stream, [`mcp_process`] an MCP server as a
//! process (raw lines or HTTP), [`pty`] a process on a terminal of its
//! own; [`inspect_page`] a raw-HTTP client of
//! the inspector's page server and its headless-Chromium driver; [`otel`]
//! runs a real OTLP receiver; [`audit`] reads audit files; [`traces`]
//! reads a scenario trace; [`doc_pages`] reads the examples of README and
//! the manual.

pub mod audit;
pub mod doc_pages;
pub mod inspect_page;
pub mod mcp_clients;
pub mod mcp_http;
pub mod mcp_lines;
pub mod mcp_process;
pub mod otel;
mod output;
pub mod pty;
pub mod registry;
pub mod traces;
pub mod wasm;

pub use output::{finish_within, finish_within_guarded, Output};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The host's library crates' sources, from the repository root (the
/// layers the CLI builds on; the SDKs are apart).
pub const LIBRARY_SOURCES: &[&str] = &[
    "protocol/src",
    "trust/src",
    "telemetry/src",
    "guard/src",
    "host/src",
    "sandbox/src",
    "registry/src",
    "mcp/src",
    "conformance/src",
    "app/src",
];

/// How long a test waits for something that should happen within
/// milliseconds; only reached when the test is failing.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// The workspace root.
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

/// A directory to grant a Tick: `hello.txt` (its text "hello from the
/// host"), an empty `sub/`, and two symbolic links that point out of it
/// (`passwd-link` to /etc/passwd, `up` to its parent).
pub fn data_dir() -> TempDir {
    let dir = TempDir::new("sandbox-data");
    std::fs::write(dir.path("hello.txt"), "hello from the host").unwrap();
    std::fs::create_dir(dir.path("sub")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path("passwd-link")).unwrap();
    std::os::unix::fs::symlink("../", dir.path("up")).unwrap();
    dir
}

/// The compile cache's entries (`*.cwasm`) in `dir`, sorted; none when
/// it does not exist.
pub fn cache_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "cwasm"));
    v.sort();
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

/// Wakes a test server's thread blocked in `accept` on `port`, after its
/// stop flag is set, with one connection it closes at once.
pub fn wake_listener(port: u16) {
    let _ = std::net::TcpStream::connect(("127.0.0.1", port));
}

/// Whether process `pid`, a child of this one, exits within `limit`,
/// without reaping it (its `Child::wait` still gets the status): a wait on
/// a pidfd, which becomes readable when the process ends, so the test
/// wakes at the exit rather than at the next look of a polling loop. A
/// process already reaped counts as exited.
pub fn exits_within(pid: u32, limit: Duration) -> bool {
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) } as i32;
    if fd < 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    let deadline = Instant::now() + limit;
    let ready = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        break n > 0;
    };
    // SAFETY: the fd was opened above and is closed once.
    unsafe { libc::close(fd) };
    ready
}

/// The pause between two looks of [`eventually`] and [`eventually_async`],
/// the suite's one way to wait for a condition that has no event to wait
/// on (a file's contents, a process's state in /proc, a screen's text).
pub const POLL: Duration = Duration::from_millis(20);

/// Polls `cond` every [`POLL`] for up to `limit`.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(POLL);
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
        tokio::time::sleep(POLL).await;
    }
    cond()
}

/// [`eventually_async`] for a condition that must itself be awaited (a
/// read through a session, an MCP request): polls it every [`POLL`] for
/// up to `limit`.
pub async fn eventually_await<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond().await {
            return true;
        }
        tokio::time::sleep(POLL).await;
    }
    cond().await
}

/// The target dir of this build (honours CARGO_TARGET_DIR).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// The build's own compile cache, which every test that does not test the
/// cache itself compiles into, so a guest is compiled once per run (and
/// kept between runs), never in the user's home. Entries are written
/// atomically, so tests running at once share it safely.
pub fn wasm_cache() -> PathBuf {
    target_dir().join("test-wasm-cache")
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

/// The hostile guest copied into `dir` as `asker.wasm` (a file of the
/// test's own, whose bytes it may replace) with `manifest` beside it as
/// `asker.tick.toml`, the grants it asks for; its path.
pub fn asker_in(dir: &TempDir, manifest: &str) -> PathBuf {
    let wasm = dir.path("asker.wasm");
    std::fs::copy(hostile(), &wasm).expect("copy the hostile guest");
    std::fs::write(dir.path("asker.tick.toml"), manifest).expect("write its manifest");
    wasm
}

/// Builds a guest workspace natively and returns the path of one of its
/// binaries. The native twin of [`build_wasm`].
pub fn build_native(workspace: &str, krate: &str) -> PathBuf {
    build_guests(workspace, None).join(krate)
}

/// A file's SHA-256 as tickbox writes a content digest (`sha256:HEX`),
/// computed by `sha256sum`, apart from tickbox's own code.
pub fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    let text = String::from_utf8_lossy(&out.stdout);
    format!(
        "sha256:{}",
        text.split_whitespace().next().expect("a digest")
    )
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

/// CPU seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after `state`.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Two presses of `+` and the state they make: steps that pass on the
/// counter example.
pub const PRESS_TWICE: &str =
    "[[step]]\nkeys = [\"+\", \"+\"]\n\n[[step]]\nexpect_state = { pointer = \"/value\", equals = 2 }\n";

/// Writes a scenario on the wasm counter example (40x8) to `file`: `tick`'s
/// lines added to its `[tick]` table, then `steps`.
pub fn counter_scenario_at(file: &Path, tick: &str, steps: &str) {
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");
    let body = format!("[tick]\npath = {wasm:?}\nsize = [40, 8]\n{tick}\n{steps}");
    std::fs::write(file, body).expect("write the scenario");
}

/// Writes to `file` a scenario on the native counter (`tests/ticks`) that
/// waits (real time, up to its 10 minute step timeout) for a value that
/// never comes: only a time budget stops it.
pub fn forever_scenario_at(file: &Path) {
    let text = format!(
        "[tick]\ncommand = [\"python3\", {:?}]\n[[step]]\nwait_for = {{ pointer = \"/value\", equals = 99 }}\ntimeout = \"10m\"\n",
        tick("counter.py")
    );
    std::fs::write(file, text).expect("write the scenario");
}

/// Waits (up to [`PATIENCE`]) for the first event on `events` that `pick`
/// maps to `Ok(Some(_))`, and returns what it made of it; `Err(why)` (an
/// event that ends the wait, e.g. a session's end), a closed channel or
/// the time running out fails the test, naming `what` was awaited.
pub async fn event_where<E: Clone, T>(
    events: &mut tokio::sync::broadcast::Receiver<E>,
    what: &str,
    mut pick: impl FnMut(E) -> Result<Option<T>, String>,
) -> T {
    let wait = async {
        loop {
            match events.recv().await.map(&mut pick) {
                Ok(Ok(Some(found))) => return found,
                Ok(Ok(None)) => {}
                Ok(Err(why)) => panic!("{why}, waiting for {what}"),
                Err(e) => panic!("events closed waiting for {what}: {e}"),
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .unwrap_or_else(|_| panic!("no {what} within {PATIENCE:?}"))
}

/// Waits (up to [`PATIENCE`]) until the text `read` returns contains
/// `needle` (a view's screen, a log), and returns that text; fails the
/// test with the last text read otherwise.
pub async fn shows(mut read: impl FnMut() -> String, needle: &str) -> String {
    let mut text = String::new();
    if eventually_async(PATIENCE, || {
        text = read();
        text.contains(needle)
    })
    .await
    {
        return text;
    }
    panic!("never showed {needle:?}:\n{text}");
}

/// Reads an HTTP request's head (through the blank line) from a test
/// server's connection, a byte at a time so nothing of the body is taken;
/// `None` when the peer hangs up first or opens with a TLS ClientHello
/// (not HTTP: the server hangs up, as a plain HTTP server would, so a
/// client that tries TLS first falls back).
pub fn read_request_head(s: &mut impl std::io::Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap_or(0) == 0 {
            return None;
        }
        if head.is_empty() && byte[0] == 0x16 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A loopback HTTP server answering every request with one body,
/// [`HelloServer::BODY`]; stopped when dropped.
pub struct HelloServer {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HelloServer {
    /// What it answers.
    pub const BODY: &'static str = "hello from the test server";

    pub fn start() -> HelloServer {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};
        // Blocking: the thread sleeps in accept, and drop wakes it with one
        // last connection (`wake_listener`).
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("local address").port();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut c, _)) => {
                        let _ = c.set_nonblocking(false);
                        let mut buf = [0u8; 1024];
                        let _ = c.read(&mut buf);
                        let head = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n";
                        let _ = c.write_all(format!("{head}{}", Self::BODY).as_bytes());
                    }
                    Err(_) => break,
                }
            }
        });
        HelloServer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for HelloServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        wake_listener(self.port);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Holds a `limits.rs` module's doc table to its constants: for each
/// `(NAME, value)` the row that links `NAME` (`//! | [`NAME`] | … |`) says
/// `value`, and no row goes unchecked. `doc` is the module's source
/// (`include_str!("limits.rs")`).
pub fn check_limits_table(doc: &str, checks: &[(&str, String)]) {
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("//! | [`")).collect();
    for (name, value) in checks {
        let link = format!("[`{name}`]");
        let row = rows
            .iter()
            .find(|l| l.contains(&link))
            .unwrap_or_else(|| panic!("{name} has no row"));
        assert!(
            row.contains(value.as_str()),
            "{name}'s row should say {value}: {row}"
        );
    }
    assert_eq!(rows.len(), checks.len(), "a row without a check");
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

/// One plain HTTP/1.1 exchange with a server on loopback `port`
/// (`Connection: close`): (status, headers lowercased, body, unchunked).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    response(&raw)
}

/// An HTTP/1.1 response read to its end: its status, its headers (names
/// lower-cased) and its body (unchunked when sent in chunks).
pub(crate) fn response(raw: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a whole response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {head:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = unchunk(&body);
    }
    (status, headers, body)
}

/// A chunked body's data, up to its last chunk (or the first malformed one).
fn unchunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..end]).ok();
        let Some(n) = size.and_then(|s| usize::from_str_radix(s.trim(), 16).ok()) else {
            break;
        };
        let tail = &rest[end + 2..];
        if n == 0 || tail.len() < n {
            break;
        }
        out.extend_from_slice(&tail[..n]);
        rest = tail[n..].strip_prefix(b"\r\n").unwrap_or(&tail[n..]);
    }
    out
}

/// Panics naming the sink and the first character `is_unsafe` (tickbox's
/// one text policy, `tickbox_protocol::text::is_unsafe`, passed in: this
/// crate depends on no tickbox crate) finds raw in `s`, if any; line
/// breaks between lines are the sink's own.
pub fn assert_inert_by(sink: &str, s: &str, is_unsafe: impl Fn(char) -> bool) {
    if let Some((i, c)) = s.char_indices().find(|(_, c)| is_unsafe(*c) && *c != '\n') {
        let from = s[..i].char_indices().rev().nth(40).map_or(0, |(j, _)| j);
        panic!(
            "{sink}: raw U+{:04X} at byte {i}, after {:?}",
            c as u32,
            &s[from..i]
        );
    }
}

/// The hostile corpus's bidi override, escaped visibly: the text got
/// through (the positive control of [`assert_inert_by`]).
pub fn shows_escaped(s: &str) -> bool {
    s.contains("\\u{202e}") || s.contains("\\u202e") || s.contains("\\u{202E}")
}

/// The value of the sample whose name and labels are exactly `series` in a
/// page of the Prometheus text format.
pub fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().expect("a number"))
}

/// The names of the threads of process `pid`.
pub fn threads(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
    {
        let Ok(t) = t else { continue };
        if let Ok(name) = std::fs::read_to_string(t.path().join("comm")) {
            out.push(name.trim().to_string());
        }
    }
    out
}
