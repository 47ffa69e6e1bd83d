//! The on-disk cache of compiled wasm, which trusts nothing it does not own.
//!
//! Loading compiled code is `unsafe` in wasmtime: it is machine code that
//! runs as tickbox. So an entry is loaded only if tickbox itself wrote it,
//! and the cache refuses to work in a place someone else could write to:
//!
//! - **The directory** must be a real directory (not a symlink) owned by the
//!   current user and not writable by group or others. It is created 0700
//!   when missing; an existing one that fails the check is refused with a
//!   one-line reason ([`CacheError::NotPrivate`], the rule of
//!   `tickbox_trust::private_dir`, which the trust store and the store of
//!   pulled Ticks share) and tickbox runs **without the
//!   cache** (compiling every time) rather than failing: the cache is an
//!   optimisation, and refusing it keeps every guarantee. The directory is
//!   opened once and every later operation is relative to that handle
//!   (`openat`, `renameat`, `unlinkat`), so renaming or replacing the path
//!   afterwards redirects nothing.
//! - **Integrity is a keyed MAC**, HMAC-SHA256 with a per-user secret key
//!   (`mac.key`, 32 random bytes, created 0600 and refused if anyone else can
//!   read it or if it is not ours). Each entry is one file: a magic header,
//!   the MAC, then wasmtime's serialized code; the MAC covers the entry's
//!   name (its cache key) and the code. Why a MAC rather than a digest kept
//!   in a second file: whoever can write an entry can also write a digest
//!   beside it, but cannot compute a MAC without the key, and binding the
//!   name means an entry cannot be moved under another Tick's key either. The
//!   check reads the entry into memory and hands wasmtime exactly the bytes
//!   that were checked, so nothing can change between check and load.
//! - **Writes** go to a fresh temporary name opened with
//!   `O_CREAT|O_EXCL|O_NOFOLLOW` (mode 0600) inside the directory, then are
//!   renamed over the entry: a planted file or symlink at the temporary name
//!   makes the write fail instead of following it, and a reader never sees
//!   half an entry. Entries are read with `O_NOFOLLOW` too.
//! - **Eviction**: after each write, the least recently used entries (by
//!   modification time, which a hit refreshes) are removed until the cache
//!   holds at most its size cap ([`DEFAULT_CACHE_MAX_BYTES`], or
//!   `$TICKBOX_CACHE_MAX_SIZE`); leftover temporary files older than
//!   [`STALE_TMP`] go too. `tickbox cache ls|clean` show and empty it.
//!
//! An entry is named by a SHA-256 of the wasm bytes, tickbox's version,
//! wasmtime's compatibility hash and the compiler, followed by the
//! compiler's name (`<sha256>-cranelift`, `<sha256>-winch`), so a changed
//! Tick, a new tickbox or a different engine configuration never hits an
//! old entry, and Winch's code is never taken for Cranelift's. Entries
//! that are not code (a hosted Tick's catalog, kept so that it can start
//! on first use) are keyed by [`Cache::key_of`], named by what they hold
//! (`<sha256>-catalog`), under the same MAC and writes, and read with a
//! bound of their own ([`Cache::get_within`]).

pub use crate::limits::{DEFAULT_CACHE_MAX_BYTES, MAX_CACHE_ENTRY_BYTES};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tickbox_trust::private_dir::{self, euid, OpenError};
use tickbox_trust::NotPrivate;

use crate::compiler::Compiler;

/// Temporary files older than this are leftovers of a crashed writer.
pub const STALE_TMP: Duration = Duration::from_secs(3600);
/// The secret key's file name inside the cache directory.
pub const KEY_FILE: &str = "mac.key";

const ENTRY_SUFFIX: &str = ".cwasm";
const TMP_PREFIX: &str = ".tmp-";
const MAGIC: &[u8; 8] = b"TBXCWv1\0";
const MAC_LEN: usize = 32;
const HEADER_LEN: usize = MAGIC.len() + MAC_LEN;
const KEY_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// Why the cache cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory breaks the private-directory rule: someone else could
    /// plant code in it.
    #[error("compile cache {path} refused: {rule}")]
    NotPrivate { path: PathBuf, rule: NotPrivate },
    /// The key file could be read or written by someone else, or is not a
    /// key.
    #[error("compile cache {path} refused: {why}")]
    Unsafe { path: PathBuf, why: String },
    /// The directory or key file could not be created or read.
    #[error("compile cache {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Where compiled code is kept by default, following the XDG base
/// directories ([`tickbox_host::places`]): `$XDG_CACHE_HOME/tickbox/wasm`, else
/// `~/.cache/tickbox/wasm` (the CLI lets `$TICKBOX_CACHE_DIR` override it).
pub fn default_dir() -> Option<PathBuf> {
    Some(
        tickbox_host::places::cache_home()?
            .join("tickbox")
            .join("wasm"),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut buf = [0u8; N];
    let mut filled = 0;
    while filled < N {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe {
            libc::getrandom(
                buf[filled..].as_mut_ptr().cast(),
                N - filled,
                0 as libc::c_uint,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else {
            filled += n as usize;
        }
    }
    Ok(buf)
}

/// One entry, as `tickbox cache ls` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EntryInfo {
    /// The cache key (file name without `.cwasm`).
    pub key: String,
    /// The compiler that made the code (from the key; None for an entry
    /// of an older tickbox, which is never loaded again).
    pub compiler: Option<Compiler>,
    /// Size on disk.
    pub bytes: u64,
    /// Last use (write or hit), seconds since the Unix epoch.
    pub last_used: u64,
}

impl EntryInfo {
    /// What the entry holds, as `cache ls` names it: the compiler of
    /// compiled code, what the key's suffix names for an entry that is not
    /// code (`catalog`, see [`Cache::key_of`]), `old` for an older
    /// tickbox's code.
    pub fn holds(&self) -> &str {
        match (self.compiler, self.key.rsplit_once('-')) {
            (Some(c), _) => c.name(),
            (None, Some((_, kind))) => kind,
            (None, None) => "old",
        }
    }
}

/// Compiled code read back from an entry whose MAC matched.
pub struct Verified(Vec<u8>);

impl Verified {
    /// The serialized code, exactly the bytes the MAC covered.
    pub fn code(&self) -> &[u8] {
        &self.0[HEADER_LEN..]
    }
}

/// One cache directory for one engine configuration.
pub struct Cache {
    dir: PathBuf,
    handle: File,
    key: [u8; KEY_LEN],
    engine_hash: String,
    max_bytes: u64,
}

impl Cache {
    /// Opens (creating if missing) a cache under `dir` for an engine with
    /// this compatibility hash, after the ownership and mode checks.
    pub fn open(dir: PathBuf, engine_hash: u64) -> Result<Cache, CacheError> {
        let handle = open_private_dir(&dir)?;
        let mut cache = Cache {
            dir,
            handle,
            key: [0; KEY_LEN],
            engine_hash: format!("{engine_hash:016x}"),
            max_bytes: DEFAULT_CACHE_MAX_BYTES,
        };
        cache.key = cache.load_or_make_key()?;
        Ok(cache)
    }

    /// The same cache with another size cap.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Cache {
        self.max_bytes = max_bytes;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The size cap.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// The key of some wasm bytes' Cranelift code.
    pub fn key(&self, wasm: &[u8]) -> String {
        self.key_for(wasm, Compiler::Cranelift)
    }

    /// The key of some wasm bytes' code made by `compiler`: a SHA-256 of
    /// the wasm, tickbox's version, the engine hash and the compiler, then
    /// `-` and the compiler's name (which `cache ls` shows; the MAC binds
    /// the whole name, so it cannot be changed either).
    pub fn key_for(&self, wasm: &[u8], compiler: Compiler) -> String {
        let mut h = Sha256::new();
        h.update(wasm);
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.update(self.engine_hash.as_bytes());
        h.update(compiler.name().as_bytes());
        format!("{}-{compiler}", hex(&h.finalize()))
    }

    /// The key of an entry that is not compiled code: a SHA-256 of
    /// `parts` (each length-prefixed, so no two lists of parts collide)
    /// and tickbox's version, then `-` and `kind`, which names what the
    /// entry holds (`catalog`) and keeps it apart from every code entry,
    /// whose keys end in a compiler's name.
    pub fn key_of(&self, kind: &str, parts: &[&[u8]]) -> String {
        let mut h = Sha256::new();
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        for part in parts {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        format!("{}-{kind}", hex(&h.finalize()))
    }

    /// Whether an entry exists under `key` (not checked: [`Cache::get`]
    /// checks before anything is loaded).
    pub fn contains(&self, key: &str) -> bool {
        self.stat_at(&Self::entry_name(key))
            .is_some_and(|m| m.file_type().is_file())
    }

    /// Releases a lock taken with [`Cache::try_lock`] and removes its file
    /// (while still holding it: a worker that opened the old file fails its
    /// non-blocking lock and leaves, one that comes later finds the entry).
    pub fn unlock(&self, key: &str, lock: File) {
        let _ = self.unlink_at(&format!("{TMP_PREFIX}lock-{key}"));
        drop(lock);
    }

    /// Takes the compile lock of `key` without waiting: None when another
    /// process holds it (it is compiling that code). The lock is an `flock`
    /// on a temporary-named file, released when the returned file closes or
    /// its process dies ([`Cache::unlock`] also removes the file; a crash
    /// leaves an unlocked stale file that eviction removes after an hour).
    pub fn try_lock(&self, key: &str) -> Option<File> {
        let name = format!("{TMP_PREFIX}lock-{key}");
        let f = self
            .open_at(&name, libc::O_RDWR | libc::O_CREAT, 0o600)
            .ok()?;
        // SAFETY: flock on a descriptor we own.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        (r == 0).then_some(f)
    }

    fn mac(&self, key: &str, code: &[u8]) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        m.update(b"tickbox compile cache v1\0");
        m.update(key.as_bytes());
        m.update(b"\0");
        m.update(code);
        m
    }

    fn entry_name(key: &str) -> String {
        format!("{key}{ENTRY_SUFFIX}")
    }

    /// The entry for `key`, if there is one that tickbox wrote: read with
    /// `O_NOFOLLOW`, a regular file of ours, under the size bound, with a
    /// matching MAC. A hit refreshes the entry's time (LRU). A bad entry is
    /// removed, so the caller's compile replaces it.
    pub fn get(&self, key: &str) -> Option<Verified> {
        self.get_within(key, MAX_CACHE_ENTRY_BYTES)
    }

    /// [`Cache::get`] of an entry whose payload is at most `max` bytes: a
    /// larger one is refused (and removed) before it is read.
    pub fn get_within(&self, key: &str, max: u64) -> Option<Verified> {
        let name = Self::entry_name(key);
        let limit = max.min(MAX_CACHE_ENTRY_BYTES) + HEADER_LEN as u64;
        let mut file = match self.open_at(&name, libc::O_RDONLY, 0) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(entry = %name, error = %e, "cache entry refused (unreadable); ignored and made again");
                self.remove(key);
                return None;
            }
        };
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.uid() != euid() {
            tracing::warn!(entry = %name, "cache entry refused (not a regular file of ours); ignored and made again");
            self.remove(key);
            return None;
        }
        if meta.len() > limit {
            tracing::warn!(
                entry = %name,
                bytes = meta.len(),
                "cache entry refused (over its size bound, {limit} bytes with its header); ignored and made again"
            );
            self.remove(key);
            return None;
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        if (&mut file).take(limit + 1).read_to_end(&mut bytes).is_err() {
            return None;
        }
        let ok = bytes.len() >= HEADER_LEN
            && bytes.len() as u64 <= limit
            && bytes[..MAGIC.len()] == MAGIC[..]
            && self
                .mac(key, &bytes[HEADER_LEN..])
                .verify_slice(&bytes[MAGIC.len()..HEADER_LEN])
                .is_ok();
        if !ok {
            tracing::warn!(entry = %name, "cache entry refused (fails its MAC: not written by tickbox for this key); ignored and made again");
            self.remove(key);
            return None;
        }
        // LRU: a hit counts as a use. SAFETY: `file` is an open descriptor;
        // a null `times` means "now".
        unsafe { libc::futimens(file.as_raw_fd(), std::ptr::null()) };
        tracing::info!(entry = %name, "compile cache hit");
        Some(Verified(bytes))
    }

    /// Drops an entry (bad, or refused by wasmtime).
    pub fn remove(&self, key: &str) {
        let _ = self.unlink_at(&Self::entry_name(key));
    }

    /// Stores compiled code, then evicts down to the size cap. Failures
    /// only cost the next start a compile.
    pub fn put(&self, key: &str, code: &[u8]) {
        let tmp = match random_bytes::<8>() {
            Ok(r) => format!("{TMP_PREFIX}{}-{}", std::process::id(), hex(&r)),
            Err(e) => {
                tracing::warn!(error = %e, "no randomness for a temporary name");
                return;
            }
        };
        if let Err(e) = self.write_entry(key, code, &tmp) {
            tracing::warn!(error = %e, dir = %self.dir.display(), "cannot write the compile cache");
            let _ = self.unlink_at(&tmp);
            return;
        }
        self.evict(Some(key));
    }

    fn write_entry(&self, key: &str, code: &[u8], tmp: &str) -> std::io::Result<()> {
        // O_EXCL|O_NOFOLLOW (added by open_at): whatever already sits at
        // the temporary name, file or symlink, makes this fail.
        let mut f = self.open_at(tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600)?;
        let mac = self.mac(key, code).finalize().into_bytes();
        f.write_all(MAGIC)?;
        f.write_all(&mac)?;
        f.write_all(code)?;
        drop(f);
        self.rename_at(tmp, &Self::entry_name(key))
    }

    /// Every entry, oldest use first.
    pub fn entries(&self) -> Vec<EntryInfo> {
        let mut out: Vec<EntryInfo> = self
            .names()
            .into_iter()
            .filter_map(|name| {
                let key = name.strip_suffix(ENTRY_SUFFIX)?.to_string();
                let meta = self.stat_at(&name)?;
                meta.file_type().is_file().then(|| EntryInfo {
                    compiler: key.rsplit_once('-').and_then(|(_, c)| Compiler::parse(c)),
                    key,
                    bytes: meta.len(),
                    last_used: meta.mtime().max(0) as u64,
                })
            })
            .collect();
        out.sort_by(|a, b| (a.last_used, &a.key).cmp(&(b.last_used, &b.key)));
        out
    }

    /// Removes least recently used entries until the total is at most the
    /// cap (never `keep`, the entry just written), and stale temporary files.
    /// Returns (entries removed, bytes freed).
    pub fn evict(&self, keep: Option<&str>) -> (usize, u64) {
        self.evict_to(self.max_bytes, keep)
    }

    /// Like [`Cache::evict`] with an explicit cap (a cap the person chose).
    pub fn evict_to(&self, cap: u64, keep: Option<&str>) -> (usize, u64) {
        let now = SystemTime::now();
        for name in self.names() {
            if name.starts_with(TMP_PREFIX) {
                let stale = self
                    .stat_at(&name)
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| now.duration_since(t).ok())
                    .is_some_and(|age| age > STALE_TMP);
                if stale {
                    let _ = self.unlink_at(&name);
                }
            }
        }
        let entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let (mut removed, mut freed) = (0, 0);
        for e in entries {
            if total <= cap {
                break;
            }
            if Some(e.key.as_str()) == keep {
                continue;
            }
            if self.unlink_at(&Self::entry_name(&e.key)).is_ok() {
                total -= e.bytes;
                removed += 1;
                freed += e.bytes;
            }
        }
        (removed, freed)
    }

    /// Removes every entry and temporary file (the key stays).
    pub fn clean(&self) -> (usize, u64) {
        let mut removed = 0;
        let mut freed = 0;
        for name in self.names() {
            if name.ends_with(ENTRY_SUFFIX) || name.starts_with(TMP_PREFIX) {
                let bytes = self.stat_at(&name).map(|m| m.len()).unwrap_or(0);
                if self.unlink_at(&name).is_ok() && name.ends_with(ENTRY_SUFFIX) {
                    removed += 1;
                    freed += bytes;
                }
            }
        }
        (removed, freed)
    }

    /// The secret key: read (and checked) or made once per user.
    fn load_or_make_key(&self) -> Result<[u8; KEY_LEN], CacheError> {
        let path = self.dir.join(KEY_FILE);
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let unsafe_key = |why: String| CacheError::Unsafe {
            path: path.clone(),
            why,
        };
        for _ in 0..3 {
            match self.open_at(KEY_FILE, libc::O_RDONLY, 0) {
                Ok(mut f) => {
                    let meta = f.metadata().map_err(io)?;
                    if !meta.is_file() {
                        return Err(unsafe_key("the key is not a regular file".into()));
                    }
                    if meta.uid() != euid() {
                        return Err(unsafe_key(format!(
                            "the key is owned by uid {}, not by you (uid {})",
                            meta.uid(),
                            euid()
                        )));
                    }
                    if meta.mode() & 0o077 != 0 {
                        return Err(unsafe_key(format!(
                            "the key has mode {:o}; it must be readable by you alone (0600)",
                            meta.mode() & 0o777
                        )));
                    }
                    let mut key = [0u8; KEY_LEN];
                    let mut extra = [0u8; 1];
                    f.read_exact(&mut key).map_err(io)?;
                    if f.read(&mut extra).map_err(io)? != 0 {
                        return Err(unsafe_key("the key file has the wrong size".into()));
                    }
                    return Ok(key);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e)),
            }
            // Make one: write a temporary file, then link it into place;
            // `linkat` fails if another process made the key first, and
            // then the loop reads theirs.
            let key = random_bytes::<KEY_LEN>().map_err(io)?;
            let tmp = format!("{TMP_PREFIX}key-{}", hex(&random_bytes::<8>().map_err(io)?));
            let written = (|| {
                let mut f =
                    self.open_at(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o600)?;
                f.write_all(&key)?;
                f.sync_all()?;
                self.link_at(&tmp, KEY_FILE)
            })();
            let _ = self.unlink_at(&tmp);
            match written {
                Ok(()) => return Ok(key),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
        }
        Err(unsafe_key("the key keeps changing under us".into()))
    }

    // --- operations relative to the checked directory handle ---

    fn cname(name: &str) -> std::io::Result<CString> {
        if name.contains('/') {
            return Err(std::io::Error::other("a cache name has no slash"));
        }
        CString::new(name).map_err(std::io::Error::other)
    }

    fn open_at(&self, name: &str, flags: i32, mode: libc::mode_t) -> std::io::Result<File> {
        let c = Self::cname(name)?;
        // SAFETY: `c` is a valid C string and the directory fd is open.
        let fd = unsafe {
            libc::openat(
                self.handle.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    fn unlink_at(&self, name: &str) -> std::io::Result<()> {
        let c = Self::cname(name)?;
        // SAFETY: as for open_at.
        let r = unsafe { libc::unlinkat(self.handle.as_raw_fd(), c.as_ptr(), 0) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn rename_at(&self, from: &str, to: &str) -> std::io::Result<()> {
        let (f, t) = (Self::cname(from)?, Self::cname(to)?);
        let fd = self.handle.as_raw_fd();
        // SAFETY: as for open_at.
        let r = unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn link_at(&self, from: &str, to: &str) -> std::io::Result<()> {
        let (f, t) = (Self::cname(from)?, Self::cname(to)?);
        let fd = self.handle.as_raw_fd();
        // SAFETY: as for open_at; flags 0 never follows a symlink at `from`.
        let r = unsafe { libc::linkat(fd, f.as_ptr(), fd, t.as_ptr(), 0) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn stat_at(&self, name: &str) -> Option<std::fs::Metadata> {
        std::fs::symlink_metadata(self.fd_path().join(name)).ok()
    }

    /// The directory as `/proc/self/fd/N`: the handle, not the path.
    fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.handle.as_raw_fd()))
    }

    fn names(&self) -> Vec<String> {
        let Ok(rd) = std::fs::read_dir(self.fd_path()) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect()
    }
}

/// Creates `dir` 0700 if missing, opens it without following a symlink,
/// and checks it by the private-directory rule (`tickbox_trust::private_dir`).
fn open_private_dir(dir: &Path) -> Result<File, CacheError> {
    let io = |source| CacheError::Io {
        path: dir.to_path_buf(),
        source,
    };
    match private_dir::open(dir, true) {
        Ok(Some(handle)) => Ok(handle),
        // With `create`, a missing directory is made, not reported missing.
        Ok(None) => Err(io(std::io::ErrorKind::NotFound.into())),
        Err(OpenError::NotPrivate(rule)) => Err(CacheError::NotPrivate {
            path: dir.to_path_buf(),
            rule,
        }),
        Err(OpenError::Io(e)) => Err(io(e)),
        Err(e) => Err(io(std::io::Error::other(e))),
    }
}

/// Reads a file path's bytes only if it exists; used by tests of the format.
#[cfg(test)]
fn entry_path(cache: &Cache, key: &str) -> PathBuf {
    cache.dir.join(Cache::entry_name(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickbox-cache-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2 of RFC 4231.
        let mut m = HmacSha256::new_from_slice(b"Jefe").unwrap();
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn entries_round_trip_and_tampering_is_refused() {
        let dir = temp("mac");
        let cache = Cache::open(dir.clone(), 1).unwrap();
        let key_mode = std::fs::metadata(dir.join(KEY_FILE)).unwrap().mode() & 0o777;
        assert_eq!(key_mode, 0o600);
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let k = cache.key(b"wasm");
        assert!(cache.get(&k).is_none());
        cache.put(&k, b"compiled code");
        assert_eq!(cache.get(&k).unwrap().code(), b"compiled code");

        // One flipped bit in the code: refused and removed.
        let path = entry_path(&cache, &k);
        let mut bytes = std::fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache.get(&k).is_none());
        assert!(!path.exists(), "a bad entry is removed");

        // A good entry moved under another key: the MAC binds the name.
        cache.put(&k, b"compiled code");
        let other = cache.key(b"other wasm");
        std::fs::copy(&path, entry_path(&cache, &other)).unwrap();
        assert!(cache.get(&other).is_none());
        assert!(cache.get(&k).is_some(), "positive control");

        // A second process (same user) shares the key and the entries.
        let again = Cache::open(dir.clone(), 1).unwrap();
        assert_eq!(again.get(&k).unwrap().code(), b"compiled code");
        // Another user's key (a different secret) cannot vouch for them.
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        let rekeyed = Cache::open(dir.clone(), 1).unwrap();
        assert!(rekeyed.get(&k).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unsafe_directories_and_keys_are_refused() {
        let base = temp("unsafe");
        std::fs::create_dir_all(&base).unwrap();
        // World-writable.
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Cache::open(open.clone(), 1).err().unwrap().to_string();
        assert!(e.contains("group or others can write"), "{e}");
        // A symlink to a good directory.
        let good = base.join("good");
        Cache::open(good.clone(), 1).unwrap();
        std::os::unix::fs::symlink(&good, base.join("link")).unwrap();
        let e = Cache::open(base.join("link"), 1).err().unwrap().to_string();
        assert!(e.contains("symlink"), "{e}");
        // A readable key.
        std::fs::set_permissions(good.join(KEY_FILE), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        let e = Cache::open(good.clone(), 1).err().unwrap().to_string();
        assert!(e.contains("readable by you alone"), "{e}");
        // Owned by someone else (needs root to set up).
        if euid() == 0 {
            let foreign = base.join("foreign");
            std::fs::create_dir(&foreign).unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
            std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o700)).unwrap();
            let e = Cache::open(foreign, 1).err().unwrap().to_string();
            assert!(e.contains("owned by uid 65534"), "{e}");
        }
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_symlink_at_the_temporary_or_entry_name_is_not_followed() {
        let dir = temp("symlink");
        let cache = Cache::open(dir.clone(), 1).unwrap();
        let victim = temp("victim");
        std::fs::write(&victim, "precious").unwrap();
        let k = cache.key(b"w");
        std::os::unix::fs::symlink(&victim, dir.join(".tmp-planted")).unwrap();
        let e = cache.write_entry(&k, b"code", ".tmp-planted").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // An entry that is a symlink is not read through.
        std::os::unix::fs::symlink(&victim, entry_path(&cache, &k)).unwrap();
        assert!(cache.get(&k).is_none());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A normal write replaces the link itself.
        cache.put(&k, b"code");
        assert_eq!(cache.get(&k).unwrap().code(), b"code");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(&victim);
    }

    #[test]
    fn eviction_keeps_the_cache_under_its_cap_least_recently_used_first() {
        let dir = temp("evict");
        let cache = Cache::open(dir.clone(), 1)
            .unwrap()
            .with_max_bytes(3 * 1100);
        let set_age = |key: &str, secs_ago: u64| {
            let t = SystemTime::now() - Duration::from_secs(secs_ago);
            File::options()
                .write(true)
                .open(entry_path(&cache, key))
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        let keys: Vec<String> = (0..3).map(|i| cache.key(&[i])).collect();
        for (i, k) in keys.iter().enumerate() {
            cache.put(k, &[7u8; 1000]);
            set_age(k, 100 - i as u64 * 10);
        }
        assert_eq!(cache.entries().len(), 3, "under the cap: nothing evicted");
        // Use the oldest: it becomes the most recent.
        assert!(cache.get(&keys[0]).is_some());
        let fourth = cache.key(&[9]);
        cache.put(&fourth, &[7u8; 1000]);
        let left: Vec<String> = cache.entries().into_iter().map(|e| e.key).collect();
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(!left.contains(&keys[1]), "the least recently used went");
        assert!(left.contains(&keys[0]) && left.contains(&fourth));
        // A stale temporary file is swept; a fresh one stays.
        std::fs::write(dir.join(".tmp-old"), "x").unwrap();
        File::options()
            .write(true)
            .open(dir.join(".tmp-old"))
            .unwrap()
            .set_modified(SystemTime::now() - STALE_TMP * 2)
            .unwrap();
        std::fs::write(dir.join(".tmp-new"), "x").unwrap();
        cache.evict(None);
        assert!(!dir.join(".tmp-old").exists() && dir.join(".tmp-new").exists());
        assert_eq!(cache.clean().0, 3);
        assert!(cache.entries().is_empty());
        assert!(dir.join(KEY_FILE).exists(), "clean keeps the key");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
