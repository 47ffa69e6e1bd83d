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
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| FileError::io(path, e))?;
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
    String::from_utf8(bytes).map_err(|_| FileError::NotText(path.to_path_buf()))
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
}
