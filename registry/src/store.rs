//! The content-addressed store: every blob pulled (manifests, wasm,
//! requested-grants layers, signatures) under its SHA-256, in a directory
//! only its owner can write.
//!
//! The trust rules are the compile cache's: the directory is created 0700
//! and refused (one line, [`RegistryError::NotPrivate`]) when it breaks the
//! private-directory rule of `tickbox_trust::private_dir` (a symlink, not the
//! user's, or writable by group or others); blobs are written to a fresh `O_EXCL|O_NOFOLLOW`
//! file, checked against their digest as they stream, and renamed into
//! place only when they match, so the store never holds a blob under the
//! wrong name, nor half a blob. Reads use `O_NOFOLLOW` and check the digest
//! again; the wasm itself is checked a last time by the sandbox on the
//! bytes it compiles (`Launcher::pinned`).

use crate::error::RegistryError;
use crate::limits::MAX_STORE_BYTES;
use crate::reference::{Digest, Hasher};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use tickbox_trust::private_dir;

/// Where pulled Ticks are kept.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    /// Blob bytes kept in all ([`MAX_STORE_BYTES`] unless set).
    max_bytes: u64,
}

/// One blob in the store, for `tickbox cache ls`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Entry {
    pub digest: Digest,
    pub bytes: u64,
}

impl Store {
    /// Opens (creating) the store at `dir`, refusing a directory others
    /// could write.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Store, RegistryError> {
        let dir = dir.into();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(private_dir::CREATE_MODE)
            .create(&dir)
            .map_err(|e| RegistryError::store(&dir, e))?;
        // The path's own metadata (lstat): a symlink is refused, not followed.
        let meta = std::fs::symlink_metadata(&dir).map_err(|e| RegistryError::store(&dir, e))?;
        private_dir::check(&meta).map_err(|rule| RegistryError::NotPrivate {
            path: dir.clone(),
            rule,
        })?;
        Ok(Store {
            dir,
            max_bytes: MAX_STORE_BYTES,
        })
    }

    /// This store keeping at most `max` bytes of blobs.
    pub fn with_max_bytes(mut self, max: u64) -> Store {
        self.max_bytes = max;
        self
    }

    /// Removes the least recently used blobs (and what was remembered of
    /// their signatures) until the rest fit the bound, never `kept`.
    fn evict(&self, kept: &Path) {
        let mut blobs: Vec<(std::time::SystemTime, u64, PathBuf, String)> =
            std::fs::read_dir(&self.dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    format!("sha256:{name}").parse::<Digest>().ok()?;
                    let meta = std::fs::symlink_metadata(e.path()).ok()?;
                    let used = meta.modified().ok()?;
                    meta.is_file().then(|| (used, meta.len(), e.path(), name))
                })
                .collect();
        let mut total: u64 = blobs.iter().map(|b| b.1).sum();
        if total <= self.max_bytes {
            return;
        }
        blobs.sort();
        for (_, bytes, path, hex) in blobs {
            if total <= self.max_bytes {
                break;
            }
            if path == kept || std::fs::remove_file(&path).is_err() {
                continue;
            }
            let _ = std::fs::remove_file(self.dir.join(format!(".signatures-{hex}")));
            total -= bytes;
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a blob is (or would be).
    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.hex())
    }

    /// Whether the blob is present as a regular file of `size` bytes (its
    /// content is checked when read).
    pub fn has(&self, digest: &Digest, size: u64) -> bool {
        std::fs::symlink_metadata(self.path(digest))
            .is_ok_and(|m| m.file_type().is_file() && m.len() == size)
    }

    /// Reads a blob of at most `max` bytes and checks its digest; a blob
    /// that fails is removed (it will be pulled again).
    pub fn read(&self, digest: &Digest, max: u64) -> Result<Vec<u8>, RegistryError> {
        let path = self.path(digest);
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| RegistryError::store(&path, e))?;
        // A read is a use: the least recently used go first.
        let _ = file.set_modified(std::time::SystemTime::now());
        let mut bytes = Vec::new();
        file.take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| RegistryError::store(&path, e))?;
        if bytes.len() as u64 > max || Digest::of(&bytes) != *digest {
            let _ = std::fs::remove_file(&path);
            return Err(RegistryError::store(
                &path,
                "its content does not match its digest (removed; pull again)",
            ));
        }
        Ok(bytes)
    }

    /// Stores `bytes` under their digest.
    pub fn put(&self, bytes: &[u8]) -> Result<Digest, RegistryError> {
        let digest = Digest::of(bytes);
        if self.has(&digest, bytes.len() as u64) {
            // Written again is used again.
            let _ = File::open(self.path(&digest))
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            return Ok(digest);
        }
        let mut w = self.writer()?;
        w.write(bytes)?;
        w.finish(&digest, bytes.len() as u64, "a blob")?;
        Ok(digest)
    }

    /// A new blob being written.
    pub fn writer(&self) -> Result<BlobWriter, RegistryError> {
        // Process-wide because the scratch names it numbers share the
        // store's directory: two `Store` values in this process must never
        // pick the same name.
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".partial-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| RegistryError::store(&tmp, e))?;
        Ok(BlobWriter {
            store: self.clone(),
            tmp,
            file: Some(std::io::BufWriter::with_capacity(256 << 10, file)),
            hasher: Hasher::default(),
            len: 0,
        })
    }

    /// Every blob, largest first.
    pub fn entries(&self) -> Vec<Entry> {
        let mut out: Vec<Entry> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let digest = format!("sha256:{name}").parse().ok()?;
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                Some(Entry {
                    digest,
                    bytes: meta.len(),
                })
            })
            .collect();
        out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.digest.cmp(&b.digest)));
        out
    }

    /// Removes every blob and every partial download; returns how many
    /// files and bytes went.
    pub fn clean(&self) -> (usize, u64) {
        let mut removed = (0, 0);
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let ours = name.starts_with(".partial-")
                || name.starts_with(".signatures-")
                || format!("sha256:{name}").parse::<Digest>().is_ok();
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if ours && !meta.is_dir() && std::fs::remove_file(e.path()).is_ok() {
                removed.0 += 1;
                removed.1 += meta.len();
            }
        }
        removed
    }
}

/// A blob streaming into the store: hashed and counted as it is written,
/// renamed into place only when it has the expected digest and size.
pub struct BlobWriter {
    store: Store,
    tmp: PathBuf,
    file: Option<std::io::BufWriter<File>>,
    hasher: Hasher,
    len: u64,
}

impl BlobWriter {
    /// Appends bytes.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), RegistryError> {
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
        let file = self.file.as_mut().expect("written before finish");
        file.write_all(bytes)
            .map_err(|e| RegistryError::store(&self.tmp, e))
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks size and digest, then moves the blob into place. On any
    /// difference nothing is stored.
    pub fn finish(
        mut self,
        expected: &Digest,
        size: u64,
        what: &str,
    ) -> Result<PathBuf, RegistryError> {
        let file = self.file.take().expect("finished once");
        let hasher = std::mem::take(&mut self.hasher);
        let actual = hasher.finish();
        if actual != *expected || self.len != size {
            return Err(RegistryError::DigestMismatch {
                what: format!("{what} ({} bytes, {size} declared)", self.len),
                expected: *expected,
                actual,
            });
        }
        // No fsync: a blob torn by a crash is caught by the digest check on
        // every read (and the sandbox's pin), and pulled again.
        file.into_inner()
            .map_err(|e| RegistryError::store(&self.tmp, e.into_error()))?;
        let to = self.store.path(expected);
        std::fs::rename(&self.tmp, &to).map_err(|e| RegistryError::store(&to, e))?;
        self.store.evict(&to);
        Ok(to)
    }
}

impl Drop for BlobWriter {
    fn drop(&mut self) {
        // Unfinished or refused: the partial file goes.
        if self.file.is_some() || self.tmp.exists() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn past_its_bound_the_least_recently_used_blobs_go_and_the_new_one_stays() {
        let dir = temp("evict");
        let store = Store::open(&dir).unwrap().with_max_bytes(3000);
        let blob = |n: u8| vec![n; 1000];
        // Each written an hour apart, long ago: uses are told apart
        // however coarse the file system's times are.
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
        let put = |n: u8| {
            let d = store.put(&blob(n)).unwrap();
            let at = long_ago + std::time::Duration::from_secs(3600 * u64::from(n));
            File::open(store.path(&d))
                .unwrap()
                .set_modified(at)
                .unwrap();
            d
        };
        let (a, b, c) = (put(1), put(2), put(3));
        // Positive control: within the bound, everything is kept.
        assert_eq!(store.entries().len(), 3);
        // `a` is read (a use, now), so `b` is the least recently used.
        store.read(&a, 1000).unwrap();
        let d = store.put(&blob(4)).unwrap();
        let kept: Vec<Digest> = store.entries().into_iter().map(|e| e.digest).collect();
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(!kept.contains(&b), "the least recently used went");
        assert!([a, c, d].iter().all(|x| kept.contains(x)), "{kept:?}");
        // A blob larger than the bound alone is still kept, alone.
        let big = store.put(&vec![9; 5000]).unwrap();
        let kept: Vec<Digest> = store.entries().into_iter().map(|e| e.digest).collect();
        assert_eq!(kept, [big]);
        let _ = std::fs::remove_dir_all(&dir);
    }
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickbox-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn blobs_are_stored_only_under_their_own_digest() {
        let dir = temp("digest");
        let store = Store::open(&dir).unwrap();
        let d = store.put(b"hello").unwrap();
        assert_eq!(store.read(&d, 100).unwrap(), b"hello");
        // A writer fed other bytes than the digest names stores nothing.
        let mut w = store.writer().unwrap();
        w.write(b"evil").unwrap();
        let e = w.finish(&Digest::of(b"good"), 4, "a layer").unwrap_err();
        assert!(e.to_string().contains("nothing was stored"), "{e}");
        assert_eq!(store.entries().len(), 1);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no partial file left"
        );
        // A blob changed on disk is refused and removed.
        std::fs::write(store.path(&d), b"HELLO").unwrap();
        assert!(store.read(&d, 100).is_err());
        assert!(!store.path(&d).exists());
        assert_eq!(store.clean().0, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_store_others_can_write_or_a_symlink_is_refused() {
        let dir = temp("mode");
        Store::open(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Store::open(&dir).unwrap_err().to_string();
        assert!(e.contains("group or others can write"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = temp("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = Store::open(&link).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
