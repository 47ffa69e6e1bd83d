//! Native Ticks: a subprocess on a real PTY.
//!
//! The Tick gets pipes for stdin and stdout (the protocol) and a PTY slave as
//! stderr and controlling terminal (the view). Before exec the child calls
//! `setsid()` and `TIOCSCTTY`, so it leads its own session and process group
//! and is the terminal's foreground group: resizing the PTY makes the kernel
//! send it SIGWINCH, and signals to the group reach everything it started.
//!
//! Shutdown ([`TickProcess::terminate`]): the session closes stdin; a Tick that
//! exits within [`EXIT_GRACE`] costs nothing more. Otherwise the whole group
//! gets SIGTERM, then SIGKILL after [`TERM_GRACE`] (both defaults of
//! [`NativeSpec`], which may set others). Leftover group members are
//! killed in every case, and dropping the handle kills the group too, so no
//! Tick process outlives its session. Processes that left the group (a
//! double fork with `setsid`) are re-parented to the host, when it is a
//! child subreaper, and killed by [`Reaper::sweep`] when the session ends
//! and when tickbox exits. `PR_SET_PDEATHSIG` covers the host itself dying
//! by SIGKILL (for the direct child only). Where cgroup v2 allows it, each
//! Tick also runs in a cgroup of its own ([`cgroup`]), killed whole when the
//! session ends, and at the next start if the host was SIGKILLed. What the
//! hosting process decided about all this (its reaper, cgroups on or off,
//! the open-file limit Ticks start with) reaches each start by value, as
//! the spec's [`Hygiene`].
//!
//! [`cgroup`]: super::cgroup
//!
//! [`Reaper::sweep`]: super::reaper::Reaper::sweep

use super::cgroup::Cgroups;
use super::reaper::Reaper;
use crate::session::{BoxFuture, TickIo, TickProcess};
use crate::util::lock;
use crate::view::{Terminal, View};
use portable_pty::{MasterPty, PtySize};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;
use tickbox_protocol::limits::{INITIAL_COLS, INITIAL_ROWS, INSTANCE_ID_VAR, TERM_VALUE};

use crate::limits::KEY_QUEUE;
/// The defaults of [`NativeSpec::exit_grace`] and [`NativeSpec::term_grace`]
/// (the host's limits table).
pub use crate::limits::{EXIT_GRACE, TERM_GRACE};

/// What to run.
#[derive(Debug, Clone)]
pub struct NativeSpec {
    /// The command and its arguments; `argv[0]` is resolved to an absolute path.
    pub argv: Vec<String>,
    /// Working directory; the host's own when absent.
    pub cwd: Option<PathBuf>,
    /// Extra environment variables (the host's environment is inherited:
    /// native Ticks run with the user's own permissions, §10).
    pub env: Vec<(String, String)>,
    /// `TICKLOOP_INSTANCE_ID`; a fresh one when absent.
    pub instance_id: Option<String>,
    /// How long the Tick may take to exit by itself once its stdin is
    /// closed, before SIGTERM ([`EXIT_GRACE`]).
    pub exit_grace: Duration,
    /// How long after SIGTERM before SIGKILL ([`TERM_GRACE`]).
    pub term_grace: Duration,
    /// The audit stream its starts are recorded in, by whoever starts it
    /// (`tickbox_sandbox::Launcher` records them); [`spawn`] itself
    /// records nothing.
    pub audit: Option<tickbox_telemetry::audit::Audit>,
    /// What the hosting process decided once about the native Ticks it
    /// starts (default: no subreaper, a cgroup each where possible, the
    /// process's own open-file limit).
    pub hygiene: Hygiene,
}

/// What a process that hosts native Ticks decided once about them, carried
/// by value into every [`NativeSpec`] (the sandbox's `ProcessHygiene`
/// makes it for the `tickbox` command).
#[derive(Debug, Clone, Default)]
pub struct Hygiene {
    /// The process's subreaper bookkeeping, when it is one: each Tick's
    /// leader is registered in it and its session's end sweeps orphans.
    /// None: nothing is registered and nothing sweeps.
    pub reaper: Option<Reaper>,
    /// Whether each Tick gets a cgroup of its own.
    pub cgroups: Cgroups,
    /// The soft open-file limit a Tick starts with, when the process raised
    /// its own ([`raise_fd_limit`] returns it); None: the process's own.
    pub nofile: Option<u64>,
}

impl Default for NativeSpec {
    fn default() -> Self {
        NativeSpec {
            argv: Vec::new(),
            cwd: None,
            env: Vec::new(),
            instance_id: None,
            exit_grace: EXIT_GRACE,
            term_grace: TERM_GRACE,
            audit: None,
            hygiene: Hygiene::default(),
        }
    }
}

impl NativeSpec {
    /// A spec for this command line.
    pub fn new<S: Into<String>>(argv: impl IntoIterator<Item = S>) -> Self {
        NativeSpec {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }
}

/// Why a native Tick could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// No command was given.
    #[error("no command given for the native Tick")]
    NoCommand,
    /// The program is not a file, or not on PATH.
    #[error("cannot start the Tick: `{0}` not found")]
    NotFound(String),
    /// The program exists but is not executable.
    #[error("cannot start the Tick: `{0}` is not executable")]
    NotExecutable(PathBuf),
    /// The PTY could not be opened.
    #[error("cannot open a PTY for the Tick: {0}")]
    Pty(String),
    /// The OS refused to start it.
    #[error("cannot start the Tick `{program}`: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
}

/// Raises this process's soft open-file limit to the hard one: every wasm
/// Tick is capped by its `max_handles` bound, and the host's own sockets and files
/// should not be what runs out first when several Ticks share the process.
/// Returns the limit as it was when it was raised, for
/// [`Hygiene::nofile`]: native Ticks still start with it.
pub fn raise_fd_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            let original = lim.rlim_cur;
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                return Some(original);
            }
        }
    }
    None
}

/// Resolves `argv[0]` the way a shell would, to an absolute path (§4.1).
pub fn resolve_program(program: &str, cwd: Option<&Path>) -> Result<PathBuf, SpawnError> {
    let check = |p: PathBuf| -> Result<PathBuf, SpawnError> {
        let meta = std::fs::metadata(&p).map_err(|_| SpawnError::NotFound(program.to_string()))?;
        if !meta.is_file() {
            return Err(SpawnError::NotFound(program.to_string()));
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(SpawnError::NotExecutable(p));
        }
        Ok(p)
    };
    if program.contains('/') {
        let p = Path::new(program);
        let joined = match cwd {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p.to_path_buf(),
        };
        let abs =
            std::path::absolute(&joined).map_err(|_| SpawnError::NotFound(program.to_string()))?;
        return check(abs);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(program);
        if let Ok(p) = check(std::path::absolute(&candidate).unwrap_or(candidate)) {
            return Ok(p);
        }
    }
    Err(SpawnError::NotFound(program.to_string()))
}

struct PtyTerminal {
    master: Mutex<Box<dyn MasterPty + Send>>,
    keys: std_mpsc::SyncSender<Vec<u8>>,
    /// Set by the reader thread once it has fed the last byte: every slave
    /// fd is closed, so nothing more can be drawn.
    reader_done: Arc<AtomicBool>,
    /// Keys dropped (the Tick's own terminal queries answered by the view
    /// too, which a Tick can ask in a loop): logged, not a line each.
    dropped: crate::throttle::Throttle,
}

impl Terminal for PtyTerminal {
    fn send_input(&self, bytes: &[u8]) {
        // A Tick that never reads its terminal must not block the caller:
        // keys beyond the queue are dropped.
        if self.keys.try_send(bytes.to_vec()).is_err() {
            if let Some(more) = self.dropped.hit() {
                tracing::warn!(more, "dropping keys: the Tick is not reading its terminal");
            }
        }
    }

    fn output_pending(&self) -> bool {
        let master = lock(&self.master);
        let Some(fd) = master.as_raw_fd() else {
            return false;
        };
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer we pass.
        let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) } == 0;
        ok && n > 0
    }

    fn output_ended(&self) -> bool {
        self.reader_done.load(Ordering::Acquire)
    }

    fn takes_keys_as_typed(&self) -> Option<bool> {
        let master = lock(&self.master);
        let fd = master.as_raw_fd()?;
        // SAFETY: a zeroed termios is a valid value for tcgetattr to fill.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // On Linux a PTY master's terminal ioctls act on its slave, whose
        // modes are the ones the Tick set.
        // SAFETY: tcgetattr writes one termios through the pointer we pass.
        if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
            return None;
        }
        Some(t.c_lflag & libc::ICANON == 0)
    }

    fn resize(&self, cols: u16, rows: u16) {
        let size = PtySize {
            rows,
            cols,
            pixel_width: 0,
            pixel_height: 0,
        };
        let master = lock(&self.master);
        if let Err(e) = master.resize(size) {
            tracing::warn!(error = %e, "resizing the PTY failed");
        }
    }
}

/// Starts a native Tick.
pub fn spawn(spec: &NativeSpec) -> Result<TickIo, SpawnError> {
    let program_name = spec.argv.first().ok_or(SpawnError::NoCommand)?;
    let program = resolve_program(program_name, spec.cwd.as_deref())?;
    let size = PtySize {
        rows: INITIAL_ROWS,
        cols: INITIAL_COLS,
        pixel_width: 0,
        pixel_height: 0,
    };
    let pair = portable_pty::native_pty_system()
        .openpty(size)
        .map_err(|e| SpawnError::Pty(e.to_string()))?;
    let tty = pair
        .master
        .tty_name()
        .ok_or_else(|| SpawnError::Pty("the PTY has no name".into()))?;
    // O_NOCTTY: opening the slave must not make it the *host's* terminal.
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&tty)
        .map_err(|e| SpawnError::Pty(format!("{}: {e}", tty.display())))?;
    drop(pair.slave);

    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&spec.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(slave))
        .env(
            INSTANCE_ID_VAR,
            spec.instance_id
                .clone()
                .unwrap_or_else(crate::util::new_instance_id),
        )
        .env("TERM", TERM_VALUE);
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let nofile = spec.hygiene.nofile.unwrap_or(0);
    let cgroup = spec.hygiene.cgroups.for_tick();
    let procs = cgroup.as_ref().map(|c| c.procs_path().clone());
    // SAFETY: the closure runs between fork and exec and only calls
    // async-signal-safe functions (setsid, ioctl, prctl, get/setrlimit,
    // open/write/close) without allocating.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(procs) = &procs {
                super::cgroup::enter(procs);
            }
            if nofile != 0 {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                    lim.rlim_cur = nofile as libc::rlim_t;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                }
            }
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // fd 2 is the PTY slave: make it this new session's controlling terminal.
            if libc::ioctl(2, libc::TIOCSCTTY as _, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    // Registered as ours, so a sweep (see `reaper`) never takes it for an orphan.
    let reaper = spec.hygiene.reaper.clone();
    let mut child = {
        let mut known = reaper.as_ref().map(Reaper::known);
        let child = cmd.spawn().map_err(|source| SpawnError::Spawn {
            program: program.clone(),
            source,
        })?;
        if let (Some(known), Some(pid)) = (&mut known, child.id()) {
            known.insert(pid);
        }
        child
    };
    // The parent's copy of the slave lives in `cmd`; dropping it lets the
    // master see EOF once the Tick and its children have exited.
    drop(cmd);
    let pid = child.id().unwrap_or(0) as i32;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| SpawnError::Pty("no stdin pipe".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| SpawnError::Pty("no stdout pipe".into()))?;

    let mut reader = pair
        .master
        .try_clone_reader()
        .map_err(|e| SpawnError::Pty(e.to_string()))?;
    let mut writer = pair
        .master
        .take_writer()
        .map_err(|e| SpawnError::Pty(e.to_string()))?;
    let (keys, keys_rx) = std_mpsc::sync_channel::<Vec<u8>>(KEY_QUEUE);
    let reader_done = Arc::new(AtomicBool::new(false));
    let view = View::new(Box::new(PtyTerminal {
        master: Mutex::new(pair.master),
        keys,
        reader_done: reader_done.clone(),
        dropped: Default::default(),
    }));

    // Plain threads: PTY reads and writes block, and must not hold a tokio
    // worker. The reader ends when every slave fd is closed (EIO), the
    // writer when the view (and so the key sender) is dropped.
    let feed: Arc<View> = view.clone();
    std::thread::Builder::new()
        .name(format!("tick-pty-{pid}"))
        .spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                feed.feed(&buf[..n]);
            }
            reader_done.store(true, Ordering::Release);
        })
        .map_err(|e| SpawnError::Pty(e.to_string()))?;
    std::thread::Builder::new()
        .name(format!("tick-keys-{pid}"))
        .spawn(move || {
            while let Ok(bytes) = keys_rx.recv() {
                if writer
                    .write_all(&bytes)
                    .and_then(|_| writer.flush())
                    .is_err()
                {
                    break;
                }
            }
        })
        .map_err(|e| SpawnError::Pty(e.to_string()))?;

    tracing::info!(pid, program = %program.display(), "started native Tick");
    Ok(TickIo {
        stdin: Box::new(stdin),
        stdout: Box::new(stdout),
        view,
        process: Box::new(NativeProcess {
            child,
            pgid: pid,
            status: None,
            exit_grace: spec.exit_grace,
            term_grace: spec.term_grace,
            reaper,
            cgroup,
        }),
    })
}

/// The native Tick's process group.
pub struct NativeProcess {
    child: tokio::process::Child,
    pgid: i32,
    status: Option<ExitStatus>,
    exit_grace: Duration,
    term_grace: Duration,
    /// The subreaper bookkeeping it is registered in, if any.
    reaper: Option<Reaper>,
    /// Killed and removed when this drops (declared last: after the child).
    cgroup: Option<super::cgroup::TickCgroup>,
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "exited".into(),
    }
}

impl NativeProcess {
    fn signal_group(&self, sig: i32) {
        if self.pgid > 0 {
            // SAFETY: killpg has no memory-safety preconditions; ESRCH (the
            // group is already empty) is the expected, ignored failure.
            unsafe { libc::killpg(self.pgid, sig) };
        }
    }

    async fn wait_for(&mut self, limit: Duration) -> bool {
        if self.status.is_some() {
            return true;
        }
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(Ok(status)) => {
                self.status = Some(status);
                true
            }
            Ok(Err(_)) => true,
            Err(_) => false,
        }
    }
}

impl TickProcess for NativeProcess {
    fn sigterm(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        self.signal_group(libc::SIGTERM);
        true
    }

    fn exited(&mut self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            if let Some(s) = self.status {
                return describe(s);
            }
            match self.child.wait().await {
                Ok(s) => {
                    self.status = Some(s);
                    describe(s)
                }
                Err(e) => format!("unknown exit ({e})"),
            }
        })
    }

    fn terminate(&mut self, graceful: bool) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if !(graceful && self.wait_for(self.exit_grace).await) {
                self.signal_group(libc::SIGTERM);
                if !self.wait_for(self.term_grace).await {
                    self.signal_group(libc::SIGKILL);
                    self.wait_for(Duration::from_secs(5)).await;
                }
            }
            // Whatever else the Tick started in its group goes too, all of
            // its cgroup, and what left the group and was orphaned to us.
            self.signal_group(libc::SIGKILL);
            if let Some(c) = &self.cgroup {
                c.kill();
            }
            if let Some(reaper) = self.reaper.clone() {
                let _ = tokio::task::spawn_blocking(move || reaper.sweep()).await;
            }
        })
    }
}

impl Drop for NativeProcess {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.signal_group(libc::SIGKILL);
        } else if self.pgid > 0 {
            // Reaped: the pid may now be reused by anyone.
            super::reaper::forget(self.reaper.as_ref(), self.pgid as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PTY says when its Tick leaves canonical mode: canonical at start
    /// (the control), then, once the Tick ran `stty -icanon` on its
    /// terminal, keys are taken as typed.
    #[tokio::test]
    async fn the_pty_says_when_the_tick_takes_keys_as_typed() {
        let mut io = spawn(&NativeSpec::new([
            "sh",
            "-c",
            "read go < /dev/tty; stty -icanon < /dev/tty; exec sleep 60",
        ]))
        .expect("sh starts");
        assert_eq!(io.view.takes_keys_as_typed(), Some(false));
        io.view.send_input(b"go\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while io.view.takes_keys_as_typed() != Some(true) {
            assert!(
                std::time::Instant::now() < deadline,
                "never left canonical mode"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        io.process.terminate(false).await;
    }
}
