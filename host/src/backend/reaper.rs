//! Process hygiene: nothing a native Tick started outlives tickbox.
//!
//! A native Tick leads its own process group, and the group is killed when
//! its session ends. A process that leaves the group (`setsid`, a
//! double fork) is beyond `killpg`, and its parent's exit would hand it to
//! init. So the `tickbox` command makes itself a **child subreaper**
//! ([`become_subreaper`], `PR_SET_CHILD_SUBREAPER`): every orphan among its
//! descendants is re-parented to it instead of init. It knows its
//! legitimate children (native Tick leaders and compile workers are started
//! through [`spawn_known`] / [`KnownGuard`]), and [`sweep`] kills and reaps
//! every other child, which can only be such an orphan.
//!
//! Being a subreaper is opt-in, per process: an embedder of the library
//! that starts children of its own (a test harness, an editor) must not
//! call [`become_subreaper`] unless every child it starts goes through
//! [`spawn_known`], since a sweep would take its other children for
//! orphans. Without it, [`sweep`] does nothing.
//!
//! `sweep` runs when a native Tick's session ends (in a host of several
//! Ticks it also ends orphans another still-running Tick left behind: an
//! orphan has no owner left to ask) and when the `tickbox` command exits.
//! Not covered here: a host killed by SIGKILL cannot sweep; its direct
//! children die by `PR_SET_PDEATHSIG`, orphans go to init. Where cgroup v2
//! allows, [`super::cgroup`] covers that case.

use crate::util::lock;
use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Rounds of kill-and-reap before giving up (each round catches the
/// orphans the previous round's victims left).
const SWEEP_ROUNDS: usize = 20;
/// How long one round waits for its victims to be reapable.
const ROUND_WAIT: Duration = Duration::from_millis(500);

static KNOWN: Mutex<Option<HashSet<u32>>> = Mutex::new(None);
/// Whether a child that may start processes of its own (a native Tick)
/// was ever started: only then can an orphan be adopted, and only then
/// does [`sweep`] read `/proc` (a file per process on the machine, at
/// every exit of the command: a measurable part of a wasm Tick's whole
/// run otherwise).
static MAY_ADOPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The lock on the set of legitimate children; hold it across a spawn and
/// [`KnownGuard::insert`] so a concurrent sweep never sees the new child
/// unregistered.
pub struct KnownGuard(MutexGuard<'static, Option<HashSet<u32>>>);

impl KnownGuard {
    /// Records a child started by tickbox itself.
    pub fn insert(&mut self, pid: u32) {
        MAY_ADOPT.store(true, std::sync::atomic::Ordering::SeqCst);
        self.0.get_or_insert_with(HashSet::new).insert(pid);
    }
}

/// Locks the set of legitimate children.
pub fn known() -> KnownGuard {
    KnownGuard(lock(&KNOWN))
}

/// Forgets a child that has been waited for.
pub fn forget(pid: u32) {
    if let Some(set) = known().0.as_mut() {
        set.remove(&pid);
    }
}

/// Spawns a command as a known child.
pub fn spawn_known(cmd: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    let mut k = known();
    let child = cmd.spawn()?;
    k.insert(child.id());
    Ok(child)
}

/// Spawns a known child that starts no processes of its own (tickbox's
/// compile worker): no orphan can come of it, so it alone never makes
/// [`sweep`] look for one.
pub fn spawn_leaf(cmd: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    let mut k = known();
    let child = cmd.spawn()?;
    k.0.get_or_insert_with(HashSet::new).insert(child.id());
    Ok(child)
}

/// Makes this process the reaper of its orphaned descendants. Idempotent;
/// not inherited across `fork`, so a forked host calls it again.
pub fn become_subreaper() {
    // SAFETY: prctl with these arguments only sets a process attribute.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if r != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot become a child subreaper; orphans of native Ticks may outlive tickbox");
    }
}

/// Whether this process is a child subreaper.
pub fn is_subreaper() -> bool {
    let mut v: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
    unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut v as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    v != 0
}

/// This process's children that tickbox did not start itself.
fn adopted() -> Vec<i32> {
    let me = std::process::id() as i32;
    let known: HashSet<u32> = known().0.clone().unwrap_or_default();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| !known.contains(&(pid as u32)))
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the command (which may contain spaces): state ppid ...
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            rest.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<i32>().ok())
                == Some(me)
        })
        .collect()
}

/// Kills and reaps every adopted orphan (see the module docs); returns how
/// many. Does nothing unless this process is a subreaper that started a
/// child other than a compile worker ([`spawn_leaf`]).
pub fn sweep() -> usize {
    if !MAY_ADOPT.load(std::sync::atomic::Ordering::SeqCst) || !is_subreaper() {
        return 0;
    }
    let mut total = 0;
    for _ in 0..SWEEP_ROUNDS {
        let victims = adopted();
        if victims.is_empty() {
            break;
        }
        for &pid in &victims {
            // SAFETY: kill has no memory-safety preconditions; the pid is a
            // child of ours (alive or a zombie), so it cannot be reused
            // before we reap it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let start = std::time::Instant::now();
        let mut pending = victims.clone();
        while !pending.is_empty() && start.elapsed() < ROUND_WAIT {
            pending.retain(|&pid| {
                let mut status = 0;
                // SAFETY: waitpid on our own child with a valid pointer.
                let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                r == 0
            });
            if !pending.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        total += victims.len() - pending.len();
    }
    if total > 0 {
        tracing::info!(count = total, "killed processes native Ticks left behind");
    }
    total
}
