//! The private-directory rule: a directory whose contents tickbox trusts
//! must be a real directory (not a symlink), owned by the effective user,
//! with no write bit for group or others.
//!
//! Whoever can write a directory can plant what tickbox would then load,
//! grant or run: compiled machine code in the compile cache, approvals in
//! the trust store, pulled Ticks in the store. So each of those refuses a
//! directory that breaks this rule, with [`NotPrivate`] naming the part it
//! breaks, and creates a missing one 0700.
//!
//! [`open`] opens the directory once, without following a symlink, and
//! checks what it opened (`fstat` on the handle), so a caller that does
//! everything else relative to the handle (`openat`, `renameat`) cannot be
//! redirected by the path being replaced after the check. [`check`] is the
//! rule on metadata a caller already has (an `lstat`).

use std::fs::{File, Metadata};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The mode a missing private directory is created with.
pub const CREATE_MODE: u32 = 0o700;

/// Which part of the private-directory rule a directory (or a file kept in
/// one) breaks. The messages are one clause about "it", for the caller to
/// put after the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotPrivate {
    /// It is a symlink (never followed) or not a directory at all.
    #[error("it is a symlink or not a directory")]
    NotADirectory,
    /// Another user owns it: they could write to it whatever its mode.
    #[error("it is owned by uid {owner}, not by you (uid {you})")]
    NotOurs { owner: u32, you: u32 },
    /// Group or others may write to it.
    #[error("it has mode {mode:o}: group or others can write to it")]
    Writable { mode: u32 },
}

/// Why [`open`] gave no directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// It breaks the rule.
    #[error(transparent)]
    NotPrivate(#[from] NotPrivate),
    /// Creating, opening or reading it failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The effective uid: whose files tickbox trusts.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The rule on a directory's metadata, from `lstat` or from an open handle.
pub fn check(meta: &Metadata) -> Result<(), NotPrivate> {
    if !meta.is_dir() {
        return Err(NotPrivate::NotADirectory);
    }
    check_owned(meta)
}

/// The owner and mode part of the rule alone, for a file kept in a private
/// directory (the caller checks it is a regular file).
pub fn check_owned(meta: &Metadata) -> Result<(), NotPrivate> {
    let you = euid();
    if meta.uid() != you {
        return Err(NotPrivate::NotOurs {
            owner: meta.uid(),
            you,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(NotPrivate::Writable {
            mode: meta.mode() & 0o777,
        });
    }
    Ok(())
}

/// Opens `dir` without following a symlink and checks it by the rule.
/// With `create`, a missing directory (and missing parents) is made
/// [`CREATE_MODE`] first; without, a missing one is `Ok(None)`.
pub fn open(dir: &Path, create: bool) -> Result<Option<File>, OpenError> {
    if create {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(CREATE_MODE)
            .create(dir)?;
    }
    let handle = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
    {
        Ok(h) => h,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
        // O_NOFOLLOW on a symlink is ELOOP; O_DIRECTORY on anything else
        // is ENOTDIR.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            return Err(NotPrivate::NotADirectory.into())
        }
        Err(e) => return Err(e.into()),
    };
    check(&handle.metadata()?)?;
    Ok(Some(handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickbox-trust-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_file(&d);
        d
    }

    fn refused(dir: &Path) -> NotPrivate {
        match open(dir, false) {
            Err(OpenError::NotPrivate(why)) => why,
            other => panic!("{} not refused: {other:?}", dir.display()),
        }
    }

    #[test]
    fn a_private_directory_is_made_0700_and_opened() {
        let base = temp("made");
        let dir = base.join("a/b");
        assert!(open(&dir, false).unwrap().is_none(), "missing, not made");
        let handle = open(&dir, true).unwrap().expect("made");
        assert_eq!(handle.metadata().unwrap().mode() & 0o777, CREATE_MODE);
        assert!(open(&dir, false).unwrap().is_some(), "opened again");
        check(&std::fs::symlink_metadata(&dir).unwrap()).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn each_part_of_the_rule_is_named() {
        let base = temp("rule");
        let dir = base.join("dir");
        open(&dir, true).unwrap();
        // Writable by group, then by others: refused, mode named.
        for mode in [0o770, 0o702] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(refused(&dir), NotPrivate::Writable { mode });
            assert!(refused(&dir)
                .to_string()
                .contains("group or others can write to it"));
        }
        // Readable by others is not writable: the positive control.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(open(&dir, false).unwrap().is_some());
        // A symlink to it, and a file: neither is a directory of ours.
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert_eq!(refused(&link), NotPrivate::NotADirectory);
        assert_eq!(
            check(&std::fs::symlink_metadata(&link).unwrap()),
            Err(NotPrivate::NotADirectory)
        );
        let file = base.join("file");
        std::fs::write(&file, b"").unwrap();
        assert_eq!(refused(&file), NotPrivate::NotADirectory);
        // `create` does not turn a symlink into a directory either.
        assert!(matches!(
            open(&link, true),
            Err(OpenError::NotPrivate(NotPrivate::NotADirectory))
        ));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn another_users_directory_is_refused_by_owner() {
        // Making another user's directory needs root (chown); as anyone
        // else, `/` is root's and so someone else's.
        let base = temp("owner");
        let foreign = base.join("foreign");
        let owner = if euid() == 0 {
            open(&foreign, true).unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
            65534
        } else {
            std::fs::create_dir_all(&base).unwrap();
            std::os::unix::fs::symlink("/", &foreign).unwrap();
            std::fs::metadata("/").unwrap().uid()
        };
        let meta = std::fs::metadata(&foreign).unwrap();
        let why = check(&meta).unwrap_err();
        assert_eq!(why, NotPrivate::NotOurs { owner, you: euid() });
        assert!(why.to_string().contains(&format!(
            "owned by uid {owner}, not by you (uid {})",
            euid()
        )));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
