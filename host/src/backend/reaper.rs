//! Process hygiene: nothing a native Tick started outlives tickbox.
//!
//! A native Tick leads its own process group, and the group is killed when
//! its session ends. A process that leaves the group (`setsid`, a
//! double fork) is beyond `killpg`, and its parent's exit would hand it to
//! init. So the `tickbox` command makes itself a **child subreaper**
//! ([`become_subreaper`], `PR_SET_CHILD_SUBREAPER`): every orphan among its
//! descendants is re-parented to it instead of init. The [`Reaper`] that
//! call returns knows the process's legitimate children (native Tick
//! leaders and compile workers are started through
//! [`Reaper::spawn_known`] / [`KnownGuard`]), and [`Reaper::sweep`] kills
//! and reaps every other child, which can only be such an orphan.
//!
//! Being a subreaper is opt-in, per process: an embedder of the library
//! that starts children of its own (a test harness, an editor) must not
//! call [`become_subreaper`] unless every child it starts goes through
//! its [`Reaper`], since a sweep would take its other children for
//! orphans. Whoever starts native Ticks and compile workers is handed the
//! `Reaper` by value (`native::Hygiene`, the sandbox's `EngineOptions`);
//! without one, nothing is registered and nothing sweeps.
//!
//! A sweep runs when a native Tick's session ends (in a host of several
//! Ticks it also ends orphans another still-running Tick left behind: an
//! orphan has no owner left to ask) and when the `tickbox` command exits.
//! Not covered here: a host killed by SIGKILL cannot sweep; its direct
//! children die by `PR_SET_PDEATHSIG`, orphans go to init. Where cgroup v2
//! allows, [`super::cgroup`] covers that case.

use crate::util::lock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Rounds of kill-and-reap before giving up (each round catches the
/// orphans the previous round's victims left).
const SWEEP_ROUNDS: usize = 20;
/// How long one round waits for its victims to be reapable.
const ROUND_WAIT: Duration = Duration::from_millis(500);

/// A subreaper's bookkeeping: the children it started itself. Cloning it
/// shares the one set (every clone speaks for the same process). Make one
/// per process ([`become_subreaper`]) and hand clones to everything that
/// starts children: a sweep through one handle takes a child registered
/// only in another for an orphan. (`Default` makes an empty set without
/// touching the process, for tests of what registers.)
#[derive(Clone, Debug, Default)]
pub struct Reaper(Arc<Children>);

#[derive(Debug, Default)]
struct Children {
    known: Mutex<HashSet<u32>>,
    /// Whether a child that may start processes of its own (a native
    /// Tick) was ever started: only then can an orphan be adopted, and
    /// only then does a sweep read `/proc` (a file per process on the
    /// machine, at every exit of the command: a measurable part of a wasm
    /// Tick's whole run otherwise).
    may_adopt: AtomicBool,
}

/// The lock on the set of legitimate children; hold it across a spawn and
/// [`KnownGuard::insert`] so a concurrent sweep never sees the new child
/// unregistered.
pub struct KnownGuard<'a> {
    set: MutexGuard<'a, HashSet<u32>>,
    may_adopt: &'a AtomicBool,
}

impl KnownGuard<'_> {
    /// Records a child started by tickbox itself.
    pub fn insert(&mut self, pid: u32) {
        self.may_adopt.store(true, Ordering::SeqCst);
        self.set.insert(pid);
    }
}

impl Reaper {
    /// Locks the set of legitimate children.
    pub fn known(&self) -> KnownGuard<'_> {
        KnownGuard {
            set: lock(&self.0.known),
            may_adopt: &self.0.may_adopt,
        }
    }

    /// Whether `pid` is registered as a child started through this handle
    /// (or a clone of it).
    pub fn knows(&self, pid: u32) -> bool {
        lock(&self.0.known).contains(&pid)
    }

    /// Forgets a child that has been waited for.
    pub fn forget(&self, pid: u32) {
        lock(&self.0.known).remove(&pid);
    }

    /// Spawns a command as a known child.
    pub fn spawn_known(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        let mut k = self.known();
        let child = cmd.spawn()?;
        k.insert(child.id());
        Ok(child)
    }

    /// Spawns a known child that starts no processes of its own (tickbox's
    /// compile worker): no orphan can come of it, so it alone never makes
    /// [`Reaper::sweep`] look for one.
    pub fn spawn_leaf(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        let mut k = lock(&self.0.known);
        let child = cmd.spawn()?;
        k.insert(child.id());
        Ok(child)
    }

    /// Makes this process a subreaper again, keeping this bookkeeping: the
    /// setting is not inherited across `fork`, the memory holding the
    /// handle is, so a forked host calls this.
    pub fn renew(&self) {
        set_subreaper();
    }
}

/// Spawns `cmd` as a leaf child of `reaper` ([`Reaper::spawn_leaf`]), or
/// plainly where the process keeps no subreaper bookkeeping.
pub fn spawn_leaf(
    reaper: Option<&Reaper>,
    cmd: &mut std::process::Command,
) -> std::io::Result<std::process::Child> {
    match reaper {
        Some(r) => r.spawn_leaf(cmd),
        None => cmd.spawn(),
    }
}

/// Forgets `pid` in `reaper`, if there is one.
pub fn forget(reaper: Option<&Reaper>, pid: u32) {
    if let Some(r) = reaper {
        r.forget(pid);
    }
}

/// Makes this process the reaper of its orphaned descendants, and returns
/// the handle that keeps its bookkeeping (see the module docs). Not
/// inherited across `fork`: a forked host calls [`Reaper::renew`].
pub fn become_subreaper() -> Reaper {
    set_subreaper();
    Reaper::default()
}

/// `PR_SET_CHILD_SUBREAPER`; idempotent.
fn set_subreaper() {
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

/// This process's children not in `known`.
fn adopted(known: &HashSet<u32>) -> Vec<i32> {
    let me = std::process::id() as i32;
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

impl Reaper {
    /// Kills and reaps every adopted orphan (see the module docs); returns
    /// how many. Does nothing unless this process is a subreaper that
    /// started a child other than a compile worker ([`Reaper::spawn_leaf`]).
    pub fn sweep(&self) -> usize {
        if !self.0.may_adopt.load(Ordering::SeqCst) || !is_subreaper() {
            return 0;
        }
        sweep_except(&self.0.known)
    }
}

/// Kills and reaps every child of this process that `known` does not hold.
fn sweep_except(known: &Mutex<HashSet<u32>>) -> usize {
    let mut total = 0;
    for _ in 0..SWEEP_ROUNDS {
        let victims = adopted(&lock(known).clone());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reaper_knows_the_children_started_through_it_and_no_others() {
        let reaper = Reaper::default();
        let other = Reaper::default();
        let mut child = reaper
            .spawn_leaf(&mut std::process::Command::new("true"))
            .expect("spawn true");
        let pid = child.id();
        // A clone speaks for the same process; another handle is apart.
        assert!(reaper.clone().knows(pid));
        assert!(!other.knows(pid));
        child.wait().expect("wait");
        reaper.forget(pid);
        assert!(!reaper.knows(pid));
    }
}
