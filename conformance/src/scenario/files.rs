//! Reading and writing scenario and snapshot files as untrusted input.
//!
//! A scenario file comes from a repository, maybe from a pull request: it
//! must not make `tickbox test` read or write anything but itself and its
//! snapshots. So these files are opened only as regular files, never through
//! a symbolic link (`O_NOFOLLOW` on the last component, the only one below
//! the scenario's directory: snapshot names have no `/`), never a FIFO or a
//! device (`O_NONBLOCK`, then `fstat`), and a snapshot is written to a fresh
//! file beside it and renamed over it, which replaces a link rather than
//! writing through it. Every error names the file and the rule, never the
//! file's content.

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a scenario or snapshot file was not read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The path is a symbolic link (dangling or not).
    #[error("{} is a symbolic link; scenario and snapshot files are never read or written through one", .0.display())]
    Symlink(PathBuf),
    /// The path exists but is not a regular file.
    #[error("{} is not a regular file", .0.display())]
    NotRegular(PathBuf),
    /// The file is over its size bound.
    #[error("{} is {len} bytes, over the {max}-byte limit", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{} is not UTF-8 text", .0.display())]
    NotText(PathBuf),
    /// The file does not exist.
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    /// Another I/O error.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

impl FileError {
    fn io(path: &Path, e: std::io::Error) -> FileError {
        match e.raw_os_error() {
            // O_NOFOLLOW on a link: ELOOP (Linux), EMLINK (FreeBSD).
            Some(libc::ELOOP) | Some(libc::EMLINK) => FileError::Symlink(path.to_path_buf()),
            Some(libc::ENOENT) => FileError::Missing(path.to_path_buf()),
            _ => FileError::Io {
                path: path.to_path_buf(),
                source: e,
            },
        }
    }
}

/// Reads a regular file of at most `max` bytes, refusing symbolic links,
/// FIFOs and devices without blocking on them.
pub fn read_regular(path: &Path, max: u64) -> Result<String, FileError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| FileError::io(path, e))?;
    let bytes = read_open(f, path, max)?;
    String::from_utf8(bytes).map_err(|_| FileError::NotText(path.to_path_buf()))
}

/// Reads the opened file `path` if it is a regular file of at most `max`
/// bytes.
fn read_open(mut f: std::fs::File, path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let meta = f.metadata().map_err(|e| FileError::io(path, e))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(path.to_path_buf()));
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            len: meta.len(),
            max,
        });
    }
    // Bounded again while reading: the file may grow after the fstat.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut f)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FileError::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
            max,
        });
    }
    Ok(bytes)
}

/// Reads `rel` (plain names, checked by the caller) below the directory
/// `base` as bytes, at most `max`: each directory on the way is opened
/// with `O_NOFOLLOW` relative to the one before (`openat`), so no symbolic
/// link at any level below `base` is followed, and the file itself must be
/// a regular file. An error names the path up to the part refused.
pub fn read_beside(base: &Path, rel: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    use std::ffi::CString;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
    let Some((last, dirs)) = parts.split_last() else {
        return Err(FileError::NotRegular(base.to_path_buf()));
    };
    // The scenario's own directory is opened as named: the walls are below it.
    let mut dir: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(base)
        .map_err(|e| FileError::io(base, e))?
        .into();
    let mut at = base.to_path_buf();
    let open_at = |dir: &OwnedFd, name: &std::ffi::OsStr, flags: libc::c_int, at: &Path| {
        let c = CString::new(name.as_bytes()).map_err(|_| FileError::NotRegular(at.into()))?;
        // SAFETY: openat on a directory descriptor we own and a
        // NUL-terminated name; the result is checked before use.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) };
        if fd < 0 {
            return Err(FileError::io(at, std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    for d in dirs {
        at.push(d);
        dir = open_at(
            &dir,
            d,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            &at,
        )
        .map_err(|e| match e {
            // O_NOFOLLOW with O_DIRECTORY on a link: ELOOP, or ENOTDIR on
            // some systems; either way, say what it is.
            FileError::Io { .. } if is_link(&at) => FileError::Symlink(at.clone()),
            e => e,
        })?;
    }
    at.push(last);
    let f = open_at(
        &dir,
        last,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        &at,
    )?;
    read_open(std::fs::File::from(f), &at, max)
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `path` is there but not a regular file we may replace: a
/// symbolic link (even dangling) or anything else that is not a file.
fn refuse_existing(path: &Path) -> Result<(), FileError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(FileError::Symlink(path.to_path_buf())),
        Ok(m) if !m.is_file() => Err(FileError::NotRegular(path.to_path_buf())),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FileError::io(path, e)),
    }
}

/// Removes the regular file `path` if it is one (a link or anything else is
/// left alone and refused); a missing file is fine.
pub fn remove_regular(path: &Path) -> Result<(), FileError> {
    refuse_existing(path)?;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(FileError::io(path, e)),
        _ => Ok(()),
    }
}

/// Replaces (or creates) the regular file `path` with `text`: written to a
/// new file in the same directory, then renamed over it. A symbolic link or
/// a non-file at `path` is refused and left as it is.
pub fn write_regular(path: &Path, text: &str) -> Result<(), FileError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Process-wide because the scratch names it numbers share a directory
    // whoever writes there: two writers in this process must never pick
    // the same name.
    static N: AtomicU64 = AtomicU64::new(0);
    refuse_existing(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        // create_new is O_EXCL: it never follows or reuses what is there.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| FileError::io(&tmp, e))?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(|e| FileError::io(&tmp, e))?;
        // Checked again just before the rename; rename itself never follows
        // a link at its target, it replaces the link.
        refuse_existing(path)?;
        std::fs::rename(&tmp, path).map_err(|e| FileError::io(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_fifos_and_big_files_are_refused_and_regular_files_work() {
        let dir = std::env::temp_dir().join(format!("tickbox-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let outside = dir.join("outside.txt");
        std::fs::write(&outside, "secret").unwrap();
        let link = dir.join("link.snap");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let dangling = dir.join("dangling.snap");
        std::os::unix::fs::symlink(dir.join("nowhere"), &dangling).unwrap();

        assert!(matches!(
            read_regular(&link, 100),
            Err(FileError::Symlink(_))
        ));
        let e = read_regular(&link, 100).unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
        assert!(matches!(
            write_regular(&link, "x"),
            Err(FileError::Symlink(_))
        ));
        assert!(matches!(
            write_regular(&dangling, "x"),
            Err(FileError::Symlink(_))
        ));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
        assert!(!dir.join("nowhere").exists());

        let fifo = dir.join("fifo.snap");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_regular(&fifo, 100),
            Err(FileError::NotRegular(_))
        ));

        // Positive control: a regular file is written, replaced and read.
        let ok = dir.join("ok.snap");
        assert!(matches!(read_regular(&ok, 100), Err(FileError::Missing(_))));
        write_regular(&ok, "one").unwrap();
        write_regular(&ok, "two").unwrap();
        assert_eq!(read_regular(&ok, 3).unwrap(), "two");
        assert!(matches!(
            read_regular(&ok, 2),
            Err(FileError::TooLarge { len: 3, max: 2, .. })
        ));
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        assert!(left.is_empty(), "no temporary file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `read_beside` follows no link at any level below the base, and
    /// reads regular files there (the positive control).
    #[test]
    fn reading_beside_refuses_links_at_every_level() {
        let root = std::env::temp_dir().join(format!("tickbox-beside-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (base, outside) = (root.join("base"), root.join("outside"));
        std::fs::create_dir_all(base.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "secret").unwrap();
        std::fs::write(base.join("sub/ok.txt"), b"\xffok").unwrap();
        std::os::unix::fs::symlink(&outside, base.join("linkdir")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), base.join("sub/link")).unwrap();
        assert_eq!(
            read_beside(&base, Path::new("sub/ok.txt"), 100).unwrap(),
            b"\xffok"
        );
        for rel in ["linkdir/secret", "sub/link"] {
            let e = read_beside(&base, Path::new(rel), 100).unwrap_err();
            assert!(matches!(e, FileError::Symlink(_)), "{rel}: {e}");
            assert!(!e.to_string().contains("secret\n"), "{e}");
        }
        assert!(matches!(
            read_beside(&base, Path::new("sub"), 100),
            Err(FileError::NotRegular(_))
        ));
        assert!(matches!(
            read_beside(&base, Path::new("sub/ok.txt"), 2),
            Err(FileError::TooLarge { len: 3, max: 2, .. })
        ));
        assert!(matches!(
            read_beside(&base, Path::new("sub/none"), 2),
            Err(FileError::Missing(_))
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
