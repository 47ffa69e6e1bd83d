//! The compile cache through the engine's options: used when its directory
//! is private, never trusted blindly (an entry failing its MAC is
//! recompiled, a directory others can write is not used at all), and kept
//! under its size cap. Each engine here stands for one host process: a
//! fresh one finds in the cache only what an earlier one left there.

use crate::guest::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use tickbox_sandbox::{CompilePolicy, EngineOptions, GrantSpec, WasmEngine};
use tickbox_test_support::*;

/// An engine caching in `dir` (under `max_bytes` when given), compiling
/// with Cranelift only: one compile, one entry (tiering is not the subject).
fn cached_engine(dir: Option<&Path>, max_bytes: Option<u64>) -> Arc<WasmEngine> {
    let mut options = EngineOptions {
        cache_dir: dir.map(Path::to_path_buf),
        ..Default::default()
    };
    if let Some(m) = max_bytes {
        options.cache_max_bytes = m;
    }
    let engine = WasmEngine::with_options(options).expect("engine");
    engine.set_compile_policy(CompilePolicy::Cranelift);
    engine
}

/// Starts `wasm` once on a fresh engine caching in `dir` and ends it; the
/// engine, to ask how many compiles the start took.
async fn start_once(dir: &Path, wasm: &str) -> Arc<WasmEngine> {
    start_on(cached_engine(Some(dir), None), wasm).await
}

async fn start_on(engine: Arc<WasmEngine>, wasm: &str) -> Arc<WasmEngine> {
    let s = open_on(&engine, wasm, &GrantSpec::default(), Default::default())
        .await
        .expect("the Tick starts");
    assert!(s.descriptor().is_some(), "the Tick runs");
    s.shutdown().await;
    engine
}

#[tokio::test]
async fn a_cache_dir_others_can_write_is_refused_and_nothing_in_it_is_loaded() {
    let wasm = hostile();
    let good = TempDir::new("cache-good");
    // Positive control: a private directory caches and hits.
    assert_eq!(start_once(&good.0, &wasm).await.compiles(), 1);
    assert_eq!(cache_entries(&good.0).len(), 1);
    assert_eq!(start_once(&good.0, &wasm).await.compiles(), 0, "a hit");

    // The same directory, entry and key made world-writable: a planted
    // entry could be there now, so nothing in it is read, nothing written.
    std::fs::set_permissions(&good.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = std::fs::read(&cache_entries(&good.0)[0]).unwrap();
    let engine = cached_engine(Some(&good.0), None);
    let refused = engine.cache_refused().expect("the cache is refused");
    assert!(refused.contains("group or others can write"), "{refused}");
    assert!(engine.cache().is_none());
    let engine = start_on(engine, &wasm).await;
    assert_eq!(engine.compiles(), 1, "no hit: compiled afresh");
    assert_eq!(std::fs::read(&cache_entries(&good.0)[0]).unwrap(), before);

    // Owned by another user (root can set that up; others skip this part).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let foreign = TempDir::new("cache-foreign");
        std::os::unix::fs::chown(&foreign.0, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&foreign.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let engine = cached_engine(Some(&foreign.0), None);
        let refused = engine.cache_refused().expect("the cache is refused");
        assert!(refused.contains("owned by uid 65534"), "{refused}");
        start_on(engine, &wasm).await;
        assert!(
            cache_entries(&foreign.0).is_empty(),
            "nothing written there"
        );
    }
}

#[tokio::test]
async fn a_tampered_entry_is_refused_and_recompiled() {
    let wasm = hostile();
    let cache = TempDir::new("cache-tamper");
    start_once(&cache.0, &wasm).await;
    let blob = cache_entries(&cache.0).remove(0);
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    // It fails its MAC: compiled again, and the entry replaced.
    assert_eq!(start_once(&cache.0, &wasm).await.compiles(), 1);
    assert_ne!(
        std::fs::read(&blob).unwrap(),
        bytes,
        "replaced by a fresh compile"
    );
    assert_eq!(start_once(&cache.0, &wasm).await.compiles(), 0, "a hit");
}

#[tokio::test]
async fn the_cache_is_evicted_listed_and_cleaned() {
    let cache = TempDir::new("cache-evict");
    // Under a 1 KiB cap only the entry just written stays.
    start_on(cached_engine(Some(&cache.0), Some(1024)), &hostile()).await;
    let first = cache_entries(&cache.0);
    assert_eq!(first.len(), 1);
    start_on(cached_engine(Some(&cache.0), Some(1024)), &hostile_p1()).await;
    let second = cache_entries(&cache.0);
    assert_eq!(second.len(), 1);
    assert_ne!(first, second, "the older entry was evicted");

    // Without the cap both stay; the cache lists them, and cleaning empties it.
    let engine = start_once(&cache.0, &hostile()).await;
    let c = engine.cache().expect("a cache");
    let listed = c.entries();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().map(|e| e.bytes).sum::<u64>() > 0);
    assert_eq!(c.clean().0, 2);
    assert!(cache_entries(&cache.0).is_empty());
    // An unsafe directory is refused when opened again.
    std::fs::set_permissions(&cache.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let refused = cached_engine(Some(&cache.0), None);
    assert!(
        refused
            .cache_refused()
            .is_some_and(|why| why.contains("group or others can write")),
        "{:?}",
        refused.cache_refused()
    );
}

#[tokio::test]
async fn the_compile_cache_is_used_and_never_trusted_blindly() {
    let cache = TempDir::new("cache");
    let wasm = hostile();
    let files = || {
        let mut v: Vec<_> = std::fs::read_dir(&cache.0)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    // An engine without a cache directory writes nothing.
    start_on(cached_engine(None, None), &wasm).await;
    assert!(files().is_empty(), "no cache, nothing written");
    start_once(&cache.0, &wasm).await;
    let written = files();
    assert_eq!(written.len(), 2, "the entry and the MAC key: {written:?}");
    let blob = cache_entries(&cache.0).remove(0);
    // A hit refreshes the entry's time (LRU) but never rewrites it.
    let before = std::fs::read(&blob).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&blob).unwrap());
    assert_eq!(start_once(&cache.0, &wasm).await.compiles(), 0);
    assert_eq!(
        std::fs::read(&blob).unwrap(),
        before,
        "a warm start reuses the entry"
    );
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&blob).unwrap()),
        ino,
        "a warm start reuses the entry"
    );
    // Corrupt the entry: it is detected, ignored and rebuilt.
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    start_once(&cache.0, &wasm).await;
    assert_ne!(
        std::fs::read(&blob).unwrap(),
        bytes,
        "the corrupt entry was replaced"
    );
}

/// An entry that is not compiled code (a catalog, `key_of`): its key
/// names what it holds and depends on every part and where each ends, and
/// a read bounded below the entry's size refuses and removes it.
#[test]
fn an_entry_of_another_kind_is_keyed_by_its_parts_and_read_within_its_bound() {
    let dir = TempDir::new("cache-kind");
    let engine = cached_engine(Some(&dir.0), None);
    let cache = engine.cache().expect("a private cache");
    let key = cache.key_of("catalog", &[b"ab", b"c"]);
    assert!(key.ends_with("-catalog"), "{key}");
    assert_ne!(
        key,
        cache.key_of("catalog", &[b"a", b"bc"]),
        "parts end where they end"
    );
    assert_ne!(key, cache.key_of("catalog", &[b"ab", b"d"]));
    cache.put(&key, &[b'x'; 100]);
    let entry = cache.entries().remove(0);
    assert_eq!(entry.holds(), "catalog");
    // Within the bound: read back, exactly.
    let read = cache.get_within(&key, 100).expect("within its bound");
    assert_eq!(read.code(), &[b'x'; 100]);
    // Over it: refused before it is read, and removed.
    assert!(cache.get_within(&key, 99).is_none());
    assert!(!cache.contains(&key), "the oversized entry is gone");
}
