//! Atomic name claims: two hosts publishing the same name at the same
//! instant cannot both get it, and a claim costs no descriptor of its own.
//!
//! Listing the live instances and then binding is a check-then-act race
//! (two Ticks published together under the same name both got it), and
//! costs a connection to every published instance. A name is therefore
//! claimed, and the claim is the only check publishing makes.
//!
//! Each publishing process holds one [`HostLock`]: `host-<pid>-<id>.host` in
//! the registry directory (0700, ours), created 0600 and locked with
//! `flock(LOCK_EX | LOCK_NB)` for as long as it publishes anything. A name
//! is the symlink `<name>.name` pointing at its holder's lock file, made
//! with `symlink(2)`, which fails when the name exists: of two racers,
//! exactly one creates it. A name is held while the lock it points at is
//! held. The kernel drops that lock when its process dies, however it dies,
//! so a crashed host never keeps a name: its links stay behind, and the
//! next claimer that can take the lock they point at owns them.
//!
//! Taking over such a stale name happens with the dead host's lock held:
//! any other claimer of it then fails to take that lock and counts the
//! name as taken, and nobody can create the link since it exists, so the
//! replacement (a `rename(2)` over the link) has no racer. A name costs a
//! link, never a descriptor: a host publishing 10,000 Ticks holds one lock,
//! where a locked file per name took a descriptor per Tick, as many as its
//! sockets, and stopped at half the open-file limit.
//!
//! A regular `<name>.name` file is an older tickbox's claim: it is its own
//! lock, taken over the same way when nobody holds it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

/// File name suffix of name claims.
pub const CLAIM_SUFFIX: &str = ".name";
/// File name suffix of host locks.
pub const HOST_SUFFIX: &str = ".host";

/// Retries of a claim whose state changed under it. Bounded: each retry
/// means a holder let go in between, which a handful of racers cannot keep
/// doing forever.
const MAX_RETRIES: usize = 100;

/// A file locked with `flock`; dropping it unlinks the file (if the path
/// still names it), then unlocks.
#[derive(Debug)]
struct Lock {
    file: File,
    path: PathBuf,
}

impl Lock {
    /// Locks the file at `path`, creating it if missing (a missing host
    /// lock is a dead host's); `Ok(None)` when a live process holds it.
    fn try_take(path: &Path) -> std::io::Result<Option<Lock>> {
        Lock::open(path, false)
    }

    /// Creates and locks a new file at `path`; `Ok(None)` when it exists.
    fn create_new(path: &Path) -> std::io::Result<Option<Lock>> {
        match Lock::open(path, true) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
            other => other,
        }
    }

    fn open(path: &Path, new: bool) -> std::io::Result<Option<Lock>> {
        for _ in 0..MAX_RETRIES {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(!new)
                .create_new(new)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
                .open(path)?;
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    return Ok(None);
                }
                return Err(e);
            }
            // The previous holder unlinks the file when it lets go; a racer
            // that opened it just before would hold a lock on an unlinked
            // file. So the path must still name the very file locked.
            let lock = Lock {
                file,
                path: path.to_path_buf(),
            };
            if lock.still_named()? {
                return Ok(Some(lock));
            }
            drop(lock);
            if new {
                return Ok(None);
            }
        }
        Err(std::io::Error::other(format!(
            "could not lock {}: it kept changing",
            path.display()
        )))
    }

    /// Whether the path still names the locked file.
    fn still_named(&self) -> std::io::Result<bool> {
        let locked = self.file.metadata()?;
        Ok(std::fs::symlink_metadata(&self.path)
            .is_ok_and(|now| now.dev() == locked.dev() && now.ino() == locked.ino()))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Unlink while still holding the lock, then close (which unlocks):
        // a racer that opened the old file sees it is gone and starts over.
        // Only the file locked: a taken-over claim's path names a link now.
        if self.still_named().unwrap_or(false) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// This process's lock in one registry, which its names point at. Shared
/// by every instance it publishes there; the last one to go lets it go.
#[derive(Debug)]
pub struct HostLock {
    /// Held, never read: the lock is the point.
    _lock: Lock,
    file_name: String,
}

impl HostLock {
    /// A new host lock in `dir`.
    pub fn take(dir: &Path) -> std::io::Result<HostLock> {
        for _ in 0..MAX_RETRIES {
            let file_name = format!("host-{}-{}{HOST_SUFFIX}", std::process::id(), new_id());
            if let Some(lock) = Lock::create_new(&dir.join(&file_name))? {
                return Ok(HostLock {
                    _lock: lock,
                    file_name,
                });
            }
        }
        Err(std::io::Error::other(format!(
            "could not create a host lock in {}",
            dir.display()
        )))
    }
}

/// A short random hex id.
pub(crate) fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded per process from the OS; mixing in time and a
    // counter keeps ids apart within one process, so the counter is the
    // process's, whoever asks.
    static N: AtomicUsize = AtomicUsize::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(N.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:06x}", h.finish() & 0xff_ffff)
}

/// A held name; dropping it lets the name go.
#[derive(Debug)]
pub struct NameClaim {
    path: PathBuf,
    host: Arc<HostLock>,
}

/// What a `<name>.name` entry found in the directory is locked by.
fn holder(dir: &Path, path: &Path) -> std::io::Result<Option<PathBuf>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if meta.file_type().is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    let target = match std::fs::read_link(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // Only a plain file name: a link is resolved in this directory alone.
    let plain = target
        .to_str()
        .is_some_and(|t| t.ends_with(HOST_SUFFIX) && !t.contains('/') && !t.starts_with('.'));
    if !plain {
        return Err(std::io::Error::other(format!(
            "{} is not a name claim (it points at {})",
            path.display(),
            target.display()
        )));
    }
    Ok(Some(dir.join(target)))
}

/// Claims `name` in `dir` for `host`: `Ok(None)` when a live process holds
/// it (this one included). `name` must already be a valid instance name
/// (no `/`).
pub fn claim(dir: &Path, name: &str, host: &Arc<HostLock>) -> std::io::Result<Option<NameClaim>> {
    let path = dir.join(format!("{name}{CLAIM_SUFFIX}"));
    let ours = dir.join(&host.file_name);
    for _ in 0..MAX_RETRIES {
        match std::os::unix::fs::symlink(&host.file_name, &path) {
            Ok(()) => {
                return Ok(Some(NameClaim {
                    path,
                    host: host.clone(),
                }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let Some(lock_path) = holder(dir, &path)? else {
            continue; // let go meanwhile: try again
        };
        if lock_path == ours {
            return Ok(None);
        }
        let Some(dead) = Lock::try_take(&lock_path)? else {
            return Ok(None);
        };
        // Stale. With its lock held, nobody else takes it over; but it may
        // have been let go and claimed again before the lock was taken.
        if holder(dir, &path)?.as_ref() != Some(&lock_path) {
            continue;
        }
        let pending = dir.join(format!("{name}{CLAIM_SUFFIX}.{}", host.file_name));
        let _ = std::fs::remove_file(&pending);
        std::os::unix::fs::symlink(&host.file_name, &pending)?;
        if let Err(e) = std::fs::rename(&pending, &path) {
            let _ = std::fs::remove_file(&pending);
            return Err(e);
        }
        tracing::info!(name, "took over the name of a host that is gone");
        drop(dead);
        return Ok(Some(NameClaim {
            path,
            host: host.clone(),
        }));
    }
    Err(std::io::Error::other(format!(
        "could not claim the name `{name}`: its claim kept changing"
    )))
}

/// Removes what hosts that died left in `dir`: each name whose lock
/// nobody holds, then each host lock nobody holds. Every lock is taken
/// before anything of its goes, so a live host (which holds its lock from
/// before its first name to after its last) loses nothing; a claimer that
/// races this finds such a name taken for that instant, as it would while
/// another claimer took it over. Returns how many entries went.
pub fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let (mut names, mut hosts) = (Vec::new(), Vec::new());
    for e in entries.flatten() {
        let file_name = e.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let scratch = n.ends_with(".sock.new") || n.ends_with(".ended.tmp");
        if n.ends_with(CLAIM_SUFFIX) {
            names.push(e.path());
        } else if n.starts_with("host-") && n.ends_with(HOST_SUFFIX) {
            hosts.push(e.path());
        } else if scratch && stale(&e) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    let mut removed = 0;
    for name in names {
        let Ok(Some(lock_path)) = holder(dir, &name) else {
            continue;
        };
        let Ok(Some(dead)) = Lock::try_take(&lock_path) else {
            continue;
        };
        // Still that lock's name (not claimed anew before it was taken).
        let same = holder(dir, &name).ok().flatten().as_ref() == Some(&lock_path);
        if same && std::fs::remove_file(&name).is_ok() {
            removed += 1;
        }
        // Dropping it unlinks the dead lock file (one it created included).
        drop(dead);
    }
    for host in hosts {
        // Gone with its names already; taking it now would create it.
        if std::fs::symlink_metadata(&host).is_err() {
            removed += 1;
            continue;
        }
        if let Ok(Some(dead)) = Lock::try_take(&host) {
            drop(dead);
            removed += usize::from(std::fs::symlink_metadata(&host).is_err());
        }
    }
    removed
}

/// Whether a socket or record being written is older than
/// [`LIVE_SCRATCH_STALE`](crate::limits::LIVE_SCRATCH_STALE): what a host
/// that died while writing it left.
fn stale(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().unwrap_or_default() >= crate::limits::LIVE_SCRATCH_STALE)
}

impl Drop for NameClaim {
    fn drop(&mut self) {
        // Only a link to our own lock is ours to remove; nobody else can
        // replace it while that lock is held, which it is until `host` goes.
        let ours = std::fs::read_link(&self.path)
            .is_ok_and(|t| t.as_os_str() == self.host.file_name.as_str());
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tickbox-claim-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_name_is_held_once_and_freed_on_drop() {
        let dir = dir("once");
        let host = Arc::new(HostLock::take(&dir).unwrap());
        let other = Arc::new(HostLock::take(&dir).unwrap());
        let first = claim(&dir, "same", &host).unwrap().expect("free");
        assert!(claim(&dir, "same", &host).unwrap().is_none(), "held by us");
        assert!(claim(&dir, "same", &other).unwrap().is_none(), "held");
        assert!(
            claim(&dir, "other", &other).unwrap().is_some(),
            "names are independent"
        );
        drop(first);
        assert!(
            std::fs::symlink_metadata(dir.join("same.name")).is_err(),
            "the link goes with the claim"
        );
        assert!(claim(&dir, "same", &other).unwrap().is_some(), "free again");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let host = Arc::new(HostLock::take(&dir).unwrap());
                    claim(&dir, "raced", &host).unwrap()
                })
            })
            .collect();
        let held: Vec<NameClaim> = threads
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(held.len(), 1, "exactly one of eight racers");
        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_sweep_removes_what_dead_hosts_left_and_nothing_of_a_live_one() {
        let dir = dir("sweep");
        // Dead hosts: a lock with its names, a name whose lock is gone, an
        // older tickbox's claim file, a lock that named nothing.
        std::fs::write(dir.join("host-2-dead.host"), "").unwrap();
        for n in ["a", "b"] {
            std::os::unix::fs::symlink("host-2-dead.host", dir.join(format!("{n}.name"))).unwrap();
        }
        std::os::unix::fs::symlink("host-1-dead.host", dir.join("gone.name")).unwrap();
        std::fs::write(dir.join("old.name"), "").unwrap();
        std::fs::write(dir.join("host-3-dead.host"), "").unwrap();
        // What a host that died while writing left; and a fresh one, being
        // written now, which stays.
        let long_ago = SystemTime::now() - crate::limits::LIVE_SCRATCH_STALE * 2;
        for old in ["a1.sock.new", "b2.ended.tmp"] {
            let f = File::create(dir.join(old)).unwrap();
            f.set_modified(long_ago).unwrap();
        }
        std::fs::write(dir.join("c3.ended.tmp"), "").unwrap();
        // Positive control: a live host's lock and name stay, and hold.
        let live = Arc::new(HostLock::take(&dir).unwrap());
        let held = claim(&dir, "live", &live).unwrap().expect("free");
        assert_eq!(sweep(&dir), 6);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let kept = [
            "c3.ended.tmp".into(),
            live.file_name.clone(),
            "live.name".into(),
        ];
        assert_eq!(left, kept);
        let other = Arc::new(HostLock::take(&dir).unwrap());
        assert!(claim(&dir, "live", &other).unwrap().is_none(), "still held");
        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_dead_hosts_names_are_taken_over_by_exactly_one_claimer() {
        let dir = dir("stale");
        // A host that died: its link stays, its lock file is unlocked (or
        // gone), and a regular file from an older tickbox nobody locks.
        std::os::unix::fs::symlink("host-1-dead.host", dir.join("gone.name")).unwrap();
        std::fs::write(dir.join("host-2-dead.host"), "").unwrap();
        std::os::unix::fs::symlink("host-2-dead.host", dir.join("left.name")).unwrap();
        std::fs::write(dir.join("old.name"), "").unwrap();
        let threads: Vec<_> = (0..6)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let host = Arc::new(HostLock::take(&dir).unwrap());
                    ["gone", "left", "old"]
                        .map(|n| claim(&dir, n, &host).unwrap().map(|c| (c, host.clone())))
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        for (i, name) in ["gone", "left", "old"].iter().enumerate() {
            let won = results.iter().filter(|r| r[i].is_some()).count();
            assert_eq!(won, 1, "`{name}` taken over by {won} claimers");
        }
        // Positive control: a live host's name is not taken over.
        let live = Arc::new(HostLock::take(&dir).unwrap());
        let _held = claim(&dir, "live", &live).unwrap().unwrap();
        let other = Arc::new(HostLock::take(&dir).unwrap());
        assert!(claim(&dir, "live", &other).unwrap().is_none());
        // A link pointing anywhere else is refused, not followed.
        std::os::unix::fs::symlink("/etc/passwd", dir.join("odd.name")).unwrap();
        let err = claim(&dir, "odd", &other).unwrap_err();
        assert!(err.to_string().contains("is not a name claim"), "{err}");
        drop(results);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
