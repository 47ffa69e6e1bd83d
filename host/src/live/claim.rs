//! Atomic name claims: two hosts publishing the same name at the same
//! instant cannot both get it.
//!
//! Listing the live instances and then binding is a check-then-act race
//! (two Ticks published together under the same name both got it), and
//! costs a connection to every published instance. A name is therefore
//! claimed, and the claim is the only check publishing makes: `<name>.name`
//! in the registry directory (0700, ours), opened 0600 and locked with
//! `flock(LOCK_EX | LOCK_NB)`. One claim costs an `open` and an `flock`
//! whatever the number of live instances, so a host publishing N Ticks does
//! N claims and never contacts another instance.
//!
//! The kernel holds the lock for as long as the claiming process keeps the
//! file open, and drops it when that process dies, however it dies, so a
//! crashed host never keeps a name: its claim file stays behind unlocked,
//! and the next claimer locks it and owns the name. `flock` locks belong to
//! an open file description, so two claims of one name in the same process
//! exclude each other as two processes' do. The file descriptor is
//! close-on-exec, so a Tick never inherits it.
//!
//! What can go wrong: the holder unlinks the file when it lets the name go,
//! and a racer may have opened the old file just before; its lock would then
//! be on an unlinked file. So after locking, a claimer checks that the path
//! still names the very file it locked, and starts over if not.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// File name suffix of name claims.
pub const CLAIM_SUFFIX: &str = ".name";

/// A held name; dropping it lets the name go.
#[derive(Debug)]
pub struct NameClaim {
    file: File,
    path: PathBuf,
}

/// Claims `name` in `dir`: `Ok(None)` when another live process holds it.
/// `name` must already be a valid instance name (no `/`).
pub fn claim(dir: &Path, name: &str) -> std::io::Result<Option<NameClaim>> {
    let path = dir.join(format!("{name}{CLAIM_SUFFIX}"));
    // Bounded: each retry means a holder let go in between, which a
    // handful of racers cannot keep doing forever.
    for _ in 0..100 {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&path)?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Ok(None);
            }
            return Err(e);
        }
        let locked = file.metadata()?;
        match std::fs::symlink_metadata(&path) {
            Ok(now) if now.dev() == locked.dev() && now.ino() == locked.ino() => {
                return Ok(Some(NameClaim { file, path }));
            }
            // Unlinked (or replaced) by the previous holder: try again.
            _ => continue,
        }
    }
    Err(std::io::Error::other(format!(
        "could not claim the name `{name}`: its claim file kept changing"
    )))
}

impl Drop for NameClaim {
    fn drop(&mut self) {
        // Unlink while still holding the lock, then close (which unlocks):
        // a racer that opened the old file sees it is gone and starts over.
        let _ = std::fs::remove_file(&self.path);
        let _ = &self.file;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_held_once_and_freed_on_drop() {
        let dir = std::env::temp_dir().join(format!("tickbox-claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = claim(&dir, "same").unwrap().expect("free");
        assert!(claim(&dir, "same").unwrap().is_none(), "held");
        assert!(
            claim(&dir, "other").unwrap().is_some(),
            "names are independent"
        );
        drop(first);
        assert!(
            !dir.join("same.name").exists(),
            "the file goes with the claim"
        );
        assert!(claim(&dir, "same").unwrap().is_some(), "free again");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || claim(&dir, "raced").unwrap())
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
}
