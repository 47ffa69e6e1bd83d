//! A cgroup v2 per native Tick, where the host may make one.
//!
//! The subreaper ([`super::reaper`]) catches a native Tick's double-forked
//! processes as long as tickbox lives to sweep them; a tickbox killed by
//! SIGKILL cannot. A cgroup can: every process a Tick starts stays in the
//! Tick's cgroup whatever it does with its process group or session, and
//! `cgroup.kill` ends them all at once. So where a cgroup v2 hierarchy is
//! mounted and tickbox may create a child of its own cgroup (root, or a
//! delegated subtree), each native Tick runs in its own cgroup:
//!
//! - [`TickCgroup::create`] makes `<own cgroup>/tickbox-<pid>-<start>-<n>`
//!   (the host's pid and start time, so a reused pid is not taken for it);
//!   the Tick's child process moves itself in before `exec`
//!   ([`TickCgroup::procs_path`], written `0` in `pre_exec`);
//! - when the session ends (and when the handle drops) [`TickCgroup::kill`]
//!   writes `cgroup.kill` (or, on kernels before 5.14, kills every pid in
//!   `cgroup.procs`) and the directory is removed;
//! - at every start, [`sweep_stale`] kills and removes the cgroups of
//!   tickbox hosts that are gone: what a SIGKILLed host left behind dies at
//!   the next start.
//!
//! Where no cgroup can be made (no cgroup2 mount, no write permission, a
//! cgroup that is not ours to divide), or the embedder turned them off
//! ([`Cgroups::off`]; the CLI does for `TICKBOX_NO_CGROUP`), tickbox says
//! so once in its log and relies on the subreaper alone. The sweep at
//! start only reaches cgroups under the cgroup the new tickbox runs in.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Whether native Ticks get a cgroup each: a setting the embedder decides
/// once and hands to every native start by value (`native::Hygiene`).
/// The default makes one wherever the host can. Clones share whether the
/// log has said that none could be made, so a host of many Ticks says it
/// once.
#[derive(Clone, Debug, Default)]
pub struct Cgroups {
    /// Why the embedder turned them off.
    off: Option<Arc<str>>,
    said: Arc<AtomicBool>,
}

impl Cgroups {
    /// No cgroup for any native Tick started with this setting (the
    /// subreaper alone keeps what they leave behind); `why` is what the log
    /// says.
    pub fn off(why: &str) -> Cgroups {
        Cgroups {
            off: Some(why.into()),
            said: Arc::default(),
        }
    }

    /// Why Ticks get no cgroup, when the embedder said so.
    pub fn off_because(&self) -> Option<&str> {
        self.off.as_deref()
    }

    /// A cgroup for a new Tick, or None where this setting or this host
    /// allows none (said once in the log, per setting and its clones).
    pub fn for_tick(&self) -> Option<TickCgroup> {
        let made = match &self.off {
            Some(why) => Err(why.to_string()),
            None => TickCgroup::create(),
        };
        match made {
            Ok(c) => Some(c),
            Err(why) => {
                if !self.said.swap(true, Ordering::Relaxed) {
                    tracing::info!(%why, "no cgroup v2 for native Ticks; relying on the subreaper");
                }
                None
            }
        }
    }
}
/// The prefix of every cgroup tickbox makes.
const PREFIX: &str = "tickbox-";
/// How long removing a killed cgroup may wait for its processes to exit.
const REMOVE_WAIT: Duration = Duration::from_secs(2);
/// The first pause between attempts to remove it; each next one doubles,
/// up to [`REMOVE_MAX_WAIT`].
const REMOVE_FIRST_WAIT: Duration = Duration::from_micros(200);
const REMOVE_MAX_WAIT: Duration = Duration::from_millis(10);

/// This process's cgroup v2 directory: the cgroup2 mount point joined with
/// the `0::` line of `/proc/self/cgroup`; Err says why there is none.
pub fn own_dir() -> Result<PathBuf, String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let rel = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2 hierarchy")?;
    if let Some(mount) = well_known_mount() {
        return Ok(mount.join(rel.trim_start_matches('/')));
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    // Fields: id parent major:minor root mount-point options ... - fstype ...
    let mount = mounts
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .ok_or("no cgroup2 file system is mounted")?;
    Ok(mount.join(rel.trim_start_matches('/')))
}

/// Where cgroup v2 is usually mounted: `/sys/fs/cgroup` (the unified
/// layout) or `/sys/fs/cgroup/unified` (the hybrid one).
const USUAL_MOUNTS: [&str; 2] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];

/// The first of [`USUAL_MOUNTS`] that is a cgroup2 file system, by
/// `statfs`: two system calls where `/proc/self/mountinfo` (which every
/// start reads for [`sweep_stale`] otherwise) costs the kernel a walk of
/// every mount's path.
fn well_known_mount() -> Option<PathBuf> {
    USUAL_MOUNTS.iter().find_map(|m| {
        let c = CString::new(*m).ok()?;
        // SAFETY: a valid C string and a statfs struct for the kernel to fill.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0;
        // The two types differ between targets (i64 and c_long here).
        #[allow(clippy::unnecessary_cast)]
        let cgroup2 = st.f_type as i64 == libc::CGROUP2_SUPER_MAGIC as i64;
        (ok && cgroup2).then(|| PathBuf::from(m))
    })
}

/// Whether native Ticks get a cgroup here; Err says why not.
pub fn available() -> Result<PathBuf, String> {
    let dir = own_dir()?;
    // A probe: creating (and removing) a child is the only real test of
    // permission and delegation.
    let probe = dir.join(format!("{PREFIX}probe-{}", std::process::id()));
    std::fs::create_dir(&probe)
        .map_err(|e| format!("cannot create a cgroup in {}: {e}", dir.display()))?;
    let _ = std::fs::remove_dir(&probe);
    Ok(dir)
}

/// The start time of a process (field 22 of its stat), to tell a live host
/// from a later process with the same pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    // After the command: state is field 3, start time field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The cgroup of one native Tick; killed and removed when dropped.
pub struct TickCgroup {
    dir: PathBuf,
    procs: CString,
}

impl TickCgroup {
    /// Makes a cgroup for a new Tick of this host; Err says why not (the
    /// caller then relies on the subreaper).
    pub fn create() -> Result<TickCgroup, String> {
        // Process-wide because the names it numbers are: every cgroup this
        // process makes shares the `<pid>-<start>` prefix, whoever made it.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let parent = own_dir()?;
        let me = std::process::id();
        let name = format!(
            "{PREFIX}{me}-{}-{}",
            start_time(me).unwrap_or(0),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        std::fs::create_dir(&dir)
            .map_err(|e| format!("cannot create a cgroup in {}: {e}", parent.display()))?;
        let procs = CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
            .map_err(|_| "a cgroup path with a NUL byte".to_string())?;
        Ok(TickCgroup { dir, procs })
    }

    /// `cgroup.procs` of this cgroup, for the child to write `0` into
    /// before `exec` (open and write are async-signal-safe; the string is
    /// made here, so the child allocates nothing).
    pub fn procs_path(&self) -> &CString {
        &self.procs
    }

    /// The directory, for logs and tests.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills every process in the cgroup.
    pub fn kill(&self) {
        kill_dir(&self.dir);
    }
}

impl Drop for TickCgroup {
    fn drop(&mut self) {
        kill_dir(&self.dir);
        remove_dir(&self.dir);
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is
/// `procs`; for `pre_exec`. Failure leaves it where it is (the subreaper
/// still covers it).
///
/// # Safety
/// Only async-signal-safe calls; meant for the child between fork and exec.
pub unsafe fn enter(procs: &CString) {
    // SAFETY: open/write/close on a valid NUL-terminated path and a static
    // buffer; all three are async-signal-safe.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

fn kill_dir(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    // Before Linux 5.14: kill what is listed until nothing is (a process
    // may fork while we read).
    for _ in 0..20 {
        let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
            return;
        };
        let pids: Vec<i32> = procs.lines().filter_map(|l| l.parse().ok()).collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes a killed cgroup once its processes have exited.
fn remove_dir(dir: &Path) {
    let start = std::time::Instant::now();
    // Killed processes leave within a millisecond or so: waits start short
    // and double, so a Tick's end waits about as long as its processes
    // take to leave, never a fixed sleep.
    let mut wait = REMOVE_FIRST_WAIT;
    while std::fs::remove_dir(dir).is_err() && dir.exists() && start.elapsed() < REMOVE_WAIT {
        std::thread::sleep(wait);
        wait = (wait * 2).min(REMOVE_MAX_WAIT);
    }
}

/// Kills and removes the cgroups of tickbox hosts that no longer run
/// (under this process's cgroup); returns how many. Silent where there is
/// no cgroup v2.
pub fn sweep_stale() -> usize {
    let Ok(parent) = own_dir() else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return 0;
    };
    let mut swept = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let mut parts = rest.split('-');
        let (Some(pid), Some(start)) = (
            parts.next().and_then(|p| p.parse::<u32>().ok()),
            parts.next().and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if start_time(pid) == Some(start) {
            continue; // its host still runs
        }
        let dir = e.path();
        kill_dir(&dir);
        remove_dir(&dir);
        swept += 1;
    }
    if swept > 0 {
        tracing::info!(
            count = swept,
            "killed what tickbox hosts that died left in their cgroups"
        );
    }
    swept
}
