//! The per-user directory of live-instance sockets, and who may connect.
//!
//! The directory is `$XDG_RUNTIME_DIR/tickbox/` when `XDG_RUNTIME_DIR` is set
//! (systemd makes that directory per user, 0700), otherwise
//! `<temp dir>/tickbox-<uid>/`. Either way tickbox creates it 0700, and
//! before using it checks that it is a real directory (not a symlink) owned
//! by the current user; a group- or world-accessible one of ours is tightened
//! to 0700, one owned by someone else is refused. That matters most for the
//! shared temp dir, where another user could create the directory first: so
//! in the temp dir, a refused `tickbox-<uid>` is never a denial of service.
//! tickbox then uses a private directory `tickbox-<uid>-XXXXXX` made by
//! `mkdtemp` (0700) beside it, and every client finds the same one again by
//! looking for a directory of that prefix that is ours, a real directory and
//! 0700: nobody else can make a directory owned by us, so the owner check is
//! what makes the search safe. The first such directory (by name) wins.
//!
//! Each instance is one socket, `<id>.sock`, mode 0600. A socket nobody
//! listens on any more (its host was killed) is stale; `tickbox ls` and name
//! resolution remove those.

use super::claim::HostLock;
use super::LiveError;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// File name suffix of instance sockets.
const SOCKET_SUFFIX: &str = ".sock";
/// Temp-dir entries looked at when searching for our private fallback
/// directory (another user may fill the temp dir with names).
const MAX_TEMP_SCAN: usize = 100_000;

/// The current effective uid.
pub fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The peer check every connection goes through: only the owner may talk to
/// an instance. `owner` is the hosting process's uid (injectable so tests
/// can play a second user).
pub fn authorize(peer_uid: u32, owner: u32) -> Result<(), LiveError> {
    if peer_uid == owner {
        Ok(())
    } else {
        Err(LiveError::Refused(format!(
            "this Tick belongs to uid {owner}; a process of uid {peer_uid} may not attach to it or call it"
        )))
    }
}

/// The live-instance directory of one user.
#[derive(Debug, Clone)]
pub struct Registry {
    dir: PathBuf,
    /// This process's lock here while it publishes anything through this
    /// handle or its clones: one descriptor for all of its names.
    host: Arc<Mutex<Weak<HostLock>>>,
    /// Records of ended instances written through this handle or its
    /// clones (`live::ended`).
    ended: Arc<AtomicUsize>,
}

impl Registry {
    /// Where the current user's instances usually live; [`Registry::open`]
    /// may use a private fallback instead (see the module docs).
    pub fn default_dir() -> PathBuf {
        match crate::places::runtime_dir() {
            Some(d) => d.join("tickbox"),
            None => std::env::temp_dir().join(format!("tickbox-{}", current_uid())),
        }
    }

    /// The current user's registry, created and checked; in the shared temp
    /// dir, a private fallback when the usual name is taken (module docs).
    pub fn open() -> Result<Registry, LiveError> {
        match crate::places::runtime_dir() {
            Some(d) => Registry::at(d.join("tickbox")),
            None => Registry::in_temp(&std::env::temp_dir(), current_uid()),
        }
    }

    /// The registry of user `uid` in the shared directory `base`:
    /// `base/tickbox-<uid>`, or when that is refused (someone else's, a
    /// symlink, a file), our private `base/tickbox-<uid>-XXXXXX`.
    pub fn in_temp(base: &Path, uid: u32) -> Result<Registry, LiveError> {
        let preferred = base.join(format!("tickbox-{uid}"));
        let why = match Registry::at(&preferred) {
            Ok(r) => return Ok(r),
            Err(LiveError::UnsafeDir { why, .. }) => why,
            Err(e) => return Err(e),
        };
        let prefix = format!("tickbox-{uid}-");
        if let Some(dir) = find_private(base, &prefix, uid) {
            return Ok(Registry::new(dir));
        }
        let template = base.join(format!("{prefix}XXXXXX"));
        let c = std::ffi::CString::new(template.as_os_str().as_encoded_bytes()).map_err(|_| {
            LiveError::UnsafeDir {
                path: template.clone(),
                why: "the path contains a NUL byte".into(),
            }
        })?;
        let raw = c.into_raw();
        // SAFETY: `raw` is a writable NUL-terminated template that mkdtemp
        // fills in place; it is turned back into a CString right after.
        let made = unsafe { libc::mkdtemp(raw) };
        // SAFETY: `raw` came from `CString::into_raw` above.
        let filled = unsafe { std::ffi::CString::from_raw(raw) };
        if made.is_null() {
            return Err(LiveError::Dir {
                path: template,
                source: std::io::Error::last_os_error(),
            });
        }
        let dir = PathBuf::from(std::ffi::OsStr::from_bytes(filled.as_bytes()));
        tracing::warn!(refused = %preferred.display(), %why, using = %dir.display(), "the usual live-instance directory is unusable; using a private one");
        Ok(Registry::new(dir))
    }

    /// A registry in `dir`, created 0700 if missing, and checked.
    pub fn at(dir: impl Into<PathBuf>) -> Result<Registry, LiveError> {
        let dir = dir.into();
        let io = |source| LiveError::Dir {
            path: dir.clone(),
            source,
        };
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        // lstat: a symlink planted in the temp dir must not redirect us.
        let meta = std::fs::symlink_metadata(&dir).map_err(io)?;
        let unsafe_dir = |why: String| LiveError::UnsafeDir {
            path: dir.clone(),
            why,
        };
        if !meta.file_type().is_dir() {
            return Err(unsafe_dir("it is not a directory".into()));
        }
        let uid = current_uid();
        if meta.uid() != uid {
            return Err(unsafe_dir(format!(
                "it is owned by uid {}, not by you (uid {uid})",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        }
        Ok(Registry::new(dir))
    }

    fn new(dir: PathBuf) -> Registry {
        Registry {
            dir,
            host: Arc::default(),
            ended: Arc::default(),
        }
    }

    /// Counts one more ended record written through this handle or its
    /// clones; the count so far.
    pub(crate) fn ended_one(&self) -> usize {
        self.ended.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// This process's host lock here, taken on first use and shared until
    /// the last instance published with it goes.
    pub(crate) fn host_lock(&self) -> std::io::Result<Arc<HostLock>> {
        let mut slot = self.host.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = slot.upgrade() {
            return Ok(held);
        }
        let held = Arc::new(HostLock::take(&self.dir)?);
        *slot = Arc::downgrade(&held);
        Ok(held)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The socket path of instance `id`.
    pub fn socket(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}{SOCKET_SUFFIX}"))
    }

    /// Every instance socket present, as (id, path), sorted by id.
    pub fn sockets(&self) -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut found: Vec<(String, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let id = name.strip_suffix(SOCKET_SUFFIX)?.to_string();
                Some((id, e.path()))
            })
            .collect();
        found.sort();
        found
    }
}

/// The first (by name) directory in `base` named `prefix…` that is ours, a
/// real directory and 0700.
fn find_private(base: &Path, prefix: &str, uid: u32) -> Option<PathBuf> {
    let entries = std::fs::read_dir(base).ok()?;
    let mut found: Vec<PathBuf> = entries
        .take(MAX_TEMP_SCAN)
        .flatten()
        .filter(|e| e.file_name().as_bytes().starts_with(prefix.as_bytes()))
        .map(|e| e.path())
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| {
                m.file_type().is_dir() && m.uid() == uid && m.mode() & 0o777 == 0o700
            })
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// Whether `name` can name an instance: 1 to 64 of `[A-Za-z0-9._-]`, not
/// starting with `.` or `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickbox-reg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn only_the_owner_is_authorized() {
        assert!(authorize(1000, 1000).is_ok());
        let e = authorize(1001, 1000).unwrap_err().to_string();
        assert!(e.contains("refused") && e.contains("uid 1001"), "{e}");
    }

    #[test]
    fn the_directory_is_created_private_and_loose_modes_are_tightened() {
        let base = temp("mode");
        std::fs::create_dir_all(&base).unwrap();
        let dir = base.join("tickbox");
        Registry::at(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        Registry::at(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_symlink_or_file_is_refused() {
        let base = temp("link");
        std::fs::create_dir_all(base.join("real")).unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("link")).unwrap();
        let e = Registry::at(base.join("link")).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        std::fs::write(base.join("file"), "").unwrap();
        assert!(Registry::at(base.join("file")).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_taken_temp_dir_name_falls_back_to_a_private_directory() {
        let base = temp("fallback");
        std::fs::create_dir_all(&base).unwrap();
        let uid = current_uid();
        // Positive control: the usual name when it is free.
        let r = Registry::in_temp(&base, uid).unwrap();
        assert_eq!(r.dir(), base.join(format!("tickbox-{uid}")));
        std::fs::remove_dir(r.dir()).unwrap();
        // Taken by a symlink (another user's, pointing at their directory).
        std::fs::create_dir(base.join("theirs")).unwrap();
        std::os::unix::fs::symlink(base.join("theirs"), base.join(format!("tickbox-{uid}")))
            .unwrap();
        let r = Registry::in_temp(&base, uid).unwrap();
        let name = r.dir().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(&format!("tickbox-{uid}-")), "{name}");
        assert_eq!(std::fs::metadata(r.dir()).unwrap().mode() & 0o777, 0o700);
        // Every later open (a client) finds the same directory.
        assert_eq!(Registry::in_temp(&base, uid).unwrap().dir(), r.dir());
        // A decoy with the prefix that is not private is never chosen.
        let decoy = base.join(format!("tickbox-{uid}-0000"));
        std::fs::create_dir(&decoy).unwrap();
        std::fs::set_permissions(&decoy, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(Registry::in_temp(&base, uid).unwrap().dir(), r.dir());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_foreign_owned_temp_dir_is_not_a_denial_of_service() {
        if current_uid() != 0 {
            return; // making a directory owned by another user needs root
        }
        let base = temp("foreign");
        let taken = base.join("tickbox-0");
        std::fs::create_dir_all(&taken).unwrap();
        std::os::unix::fs::chown(&taken, Some(65534), Some(65534)).unwrap();
        let e = Registry::at(&taken).unwrap_err().to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
        let r = Registry::in_temp(&base, 0).unwrap();
        assert_ne!(r.dir(), taken);
        assert_eq!(std::fs::metadata(r.dir()).unwrap().uid(), 0);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn names() {
        assert!(valid_name("counter") && valid_name("a.b_c-2"));
        for bad in ["", "-x", ".x", "a/b", "a b", "@x", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
