//! The on-disk cache of compiled wasm.
//!
//! An entry is named by a hash of the wasm bytes, the wasmtime version and
//! the engine's configuration (wasmtime's compatibility hash), so a changed
//! Tick, a new tickbox or a different config never hits an old entry. The
//! key is a SHA-256: a crafted wasm must not be able to collide with another
//! Tick's entry and run under that Tick's grants. Each entry stores an XXH3
//! checksum of its compiled bytes beside it; an entry whose checksum does not
//! match, or that wasmtime refuses, is deleted and rebuilt. Loading compiled
//! code is `unsafe` in wasmtime because it is trusted machine code: the
//! checksum makes sure we load exactly what we wrote (the directory is the
//! user's own, 0700, so the threat is corruption, not forgery, and a fast
//! checksum keeps a warm start cheap).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where compiled code is kept: `$TICKBOX_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/tickbox/wasm`, else `~/.cache/tickbox/wasm`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TICKBOX_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tickbox").join("wasm"))
}

fn checksum(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One cache directory for one engine configuration.
pub struct Cache {
    dir: PathBuf,
    engine_hash: String,
}

impl Cache {
    /// A cache under `dir` for an engine with this compatibility hash.
    pub fn new(dir: PathBuf, engine_hash: u64) -> Cache {
        Cache {
            dir,
            engine_hash: format!("{engine_hash:016x}"),
        }
    }

    /// The key of some wasm bytes.
    pub fn key(&self, wasm: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(wasm);
        h.update(env!("CARGO_PKG_VERSION").as_bytes());
        h.update(self.engine_hash.as_bytes());
        hex(&h.finalize())
    }

    fn paths(&self, key: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{key}.cwasm")),
            self.dir.join(format!("{key}.xxh3")),
        )
    }

    /// The path of an entry whose checksum matches, if there is one. The
    /// caller maps the file (no copy of the code); the check reads it once
    /// through the page cache.
    pub fn get(&self, key: &str) -> Option<PathBuf> {
        let (blob, sum) = self.paths(key);
        let bytes = std::fs::read(&blob).ok()?;
        let expected = std::fs::read_to_string(&sum).ok()?;
        if checksum(&bytes) == expected.trim() {
            Some(blob)
        } else {
            tracing::warn!(entry = %blob.display(), "compile cache entry is corrupt; rebuilding");
            self.remove(key);
            None
        }
    }

    /// Drops an entry (corrupt, or refused by wasmtime).
    pub fn remove(&self, key: &str) {
        let (blob, sum) = self.paths(key);
        let _ = std::fs::remove_file(blob);
        let _ = std::fs::remove_file(sum);
    }

    /// Stores compiled bytes. Failures only cost the next start a compile.
    pub fn put(&self, key: &str, bytes: &[u8]) {
        if let Err(e) = self.try_put(key, bytes) {
            tracing::warn!(error = %e, dir = %self.dir.display(), "cannot write the compile cache");
        }
    }

    fn try_put(&self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let (blob, sum) = self.paths(key);
        // Write under temporary names and rename: a reader never sees half an entry.
        let tmp = |p: &Path| {
            let mut name = p.as_os_str().to_owned();
            name.push(format!(".tmp{}", std::process::id()));
            PathBuf::from(name)
        };
        std::fs::write(tmp(&blob), bytes)?;
        std::fs::write(tmp(&sum), checksum(bytes))?;
        std::fs::rename(tmp(&blob), &blob)?;
        std::fs::rename(tmp(&sum), &sum)
    }
}
