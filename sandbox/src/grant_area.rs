//! Single-file grants, and the directories no Tick may be granted.
//!
//! WASI preopens directories, so granting one file means preopening a
//! directory that holds only that file. That directory lives in tickbox's
//! own **grant area**, `grants/` inside the user's live-instance directory
//! (`$XDG_RUNTIME_DIR/tickbox/grants`, else the private temp directory of
//! [`tickbox_host::live::Registry`]), never in a shared temp dir: one directory per
//! Tick, `<host pid>-<instance id>`, created 0700 and holding a hard link
//! to the file (so writes of a read-write grant reach it). If the file is on
//! another filesystem a hard link is impossible: a read-only grant then gets
//! a private copy (a snapshot taken at start), a read-write grant is refused
//! with a hint to grant the directory instead.
//!
//! The directory is removed when the guest ends (every exit path drops its
//! [`GrantDir`]); a host killed before that leaves it behind, and the next
//! host to grant a file removes every directory whose pid is no longer
//! running ([`recover`]).
//!
//! **Invariant:** no Tick can be granted tickbox's own state: a `dir` grant
//! that contains, or lies inside, the grant area, the live-instance
//! directory or the compile cache is refused ([`check_not_own_state`]). So
//! no Tick can reach another Tick's granted file through its own grant, nor
//! the cache's secret key, nor the instance sockets.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The grant directory of one Tick; removed on drop.
pub struct GrantDir(PathBuf);

impl GrantDir {
    /// The directory to preopen.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for GrantDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The grant area: created 0700 if missing, checked to be our own directory.
pub fn area() -> Result<PathBuf, String> {
    let registry = tickbox_host::live::Registry::open().map_err(|e| e.to_string())?;
    let dir = registry.dir().join("grants");
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.file_type().is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{}: the grant area must be a private directory of yours",
            dir.display()
        ));
    }
    Ok(dir)
}

/// Removes grant directories of hosts that are gone (`<pid>-…` with no
/// process `pid`). Returns how many.
pub fn recover(area: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(area) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, _)| p.parse::<i32>().ok())
        else {
            continue;
        };
        // A name that parses is a PID, never negative (the `-` splits it).
        let gone = !tickbox_host::util::process_exists(pid.unsigned_abs());
        if gone && std::fs::remove_dir_all(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Exposes `file` alone: a fresh directory in the grant area holding it
/// under its own name. Returns the directory and the guest directory to
/// preopen it at (the guest path's parent).
pub fn for_file(
    file: &Path,
    guest: &str,
    read_only: bool,
    instance: &str,
) -> Result<(GrantDir, String), String> {
    let guest_path = Path::new(guest);
    let (Some(parent), Some(fname)) = (guest_path.parent(), guest_path.file_name()) else {
        return Err(format!(
            "{guest}: a file grant needs a guest path with a file name"
        ));
    };
    let area = area()?;
    recover(&area);
    let safe_instance: String = instance
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = area.join(format!("{}-{safe_instance}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = GrantDir(dir);
    let target = dir.0.join(fname);
    // A hard link shares the file itself: writes through it reach the
    // original, and nothing else of its directory is exposed.
    match std::fs::hard_link(file, &target) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) && read_only => {
            std::fs::copy(file, &target)
                .map_err(|e| format!("{}: cannot copy it for the grant: {e}", file.display()))?;
        }
        Err(e) => {
            return Err(format!(
                "{}: cannot grant a single file here ({e}); grant its directory instead",
                file.display()
            ))
        }
    }
    let parent = parent.to_string_lossy();
    let parent = if parent.is_empty() {
        ".".to_string()
    } else {
        parent.into_owned()
    };
    Ok((dir, parent))
}

/// Where `path` is once it exists, as the kernel will resolve it: made
/// absolute, its longest existing ancestor canonicalized (links followed)
/// and the rest appended, `..` taking away the part before it (a part not
/// created yet is no link). A state directory not created yet (the trust
/// store before its first approval) is so compared by the place it will
/// be, not by how its path happens to be spelled.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    let mut out = loop {
        if let Ok(found) = existing.canonicalize() {
            break found;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(_)) => {
                missing.push(existing.components().next_back());
                existing = parent;
            }
            // Nothing of it exists, not even the root: as written.
            _ => return absolute,
        }
    };
    for part in missing.into_iter().rev().flatten() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

/// Refuses a grant (directory or file) that contains or lies inside one of `own`
/// (tickbox's state directories; see the module docs).
pub fn check_not_own_state(grant: &Path, own: &[PathBuf]) -> Result<(), String> {
    let Ok(grant) = grant.canonicalize() else {
        return Ok(()); // the grant itself will fail to open with a better error
    };
    for dir in own {
        let dir = resolved(dir);
        if dir.starts_with(&grant) || grant.starts_with(&dir) {
            return Err(format!(
                "{}: it overlaps tickbox's own state ({}); grant a directory that does not contain it",
                grant.display(),
                dir.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_directories_are_never_granted() {
        let base = std::env::temp_dir().join(format!("tickbox-area-{}", std::process::id()));
        let state = base.join("state").join("cache");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(base.join("other")).unwrap();
        let own = [state.clone()];
        assert!(check_not_own_state(&base, &own).is_err(), "a parent");
        assert!(check_not_own_state(&state, &own).is_err(), "itself");
        std::fs::create_dir_all(state.join("in")).unwrap();
        assert!(
            check_not_own_state(&state.join("in"), &own).is_err(),
            "inside"
        );
        assert!(check_not_own_state(&base.join("other"), &own).is_ok());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_state_directory_not_created_yet_is_judged_where_it_will_be() {
        let base = std::env::temp_dir().join(format!("tickbox-area-later-{}", std::process::id()));
        let real = base.join("real");
        std::fs::create_dir_all(real.join("other")).unwrap();
        // The home reached through a link, the trust store not made yet.
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let own = [link.join(".config/tickbox/trust")];
        assert!(
            check_not_own_state(&real, &own).is_err(),
            "its parent, linked"
        );
        let spelled = [link.join("other/../.config/./tickbox/trust")];
        assert!(
            check_not_own_state(&real, &spelled).is_err(),
            "spelled otherwise"
        );
        // Positive control: a sibling is no parent of it.
        assert!(check_not_own_state(&real.join("other"), &own).is_ok());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn grant_dirs_of_dead_hosts_are_recovered() {
        let area = std::env::temp_dir().join(format!("tickbox-recover-{}", std::process::id()));
        // pid 0x7ffffff0 does not exist (above pid_max); ours does.
        let dead = area.join("2147483632-x");
        let live = area.join(format!("{}-y", std::process::id()));
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::create_dir_all(&live).unwrap();
        assert_eq!(recover(&area), 1);
        assert!(!dead.exists() && live.exists());
        let _ = std::fs::remove_dir_all(&area);
    }
}
