//! Ticks of one component share its compiled code: starting many of them,
//! one after the other or all at once, compiles it once and keeps one
//! cache entry, with the compile cache and without it. Counted through
//! `WasmEngine::compiles` and the cache's entries, never timed.

use std::path::Path;
use tickbox_host::SessionConfig;
use tickbox_sandbox::{Grants, Launcher, WasmEngine};
use tickbox_test_support::*;

/// Ticks of the component started at once.
const TOGETHER: usize = 6;

/// Opens `n` Ticks of `path` at once on `engine` and shuts them down.
async fn start_together(engine: &std::sync::Arc<WasmEngine>, path: &Path, n: usize) {
    let launcher =
        Launcher::wasm(engine.clone(), path.to_path_buf(), Grants::default()).expect("launcher");
    let starts: Vec<_> = (0..n)
        .map(|_| {
            let l = launcher.clone();
            tokio::spawn(async move { l.open(SessionConfig::default()).await })
        })
        .collect();
    let mut sessions = Vec::new();
    for s in starts {
        sessions.push(s.await.expect("task").expect("open"));
    }
    for s in sessions {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_of_one_component_share_one_compile() {
    let counter = build_wasm("examples", "counter", "wasm32-wasip2");
    let dir = TempDir::new("share-compile");
    // Another component with the same behaviour: the counter's bytes and
    // one custom section more (id 0, 4 bytes: a 3-byte name).
    let other = dir.path("other.wasm");
    let mut bytes = std::fs::read(&counter).expect("read the counter");
    bytes.extend([0, 4, 3, b't', b'b', b'x']);
    std::fs::write(&other, bytes).expect("write");
    for cache in [None, Some(dir.path("cache"))] {
        let engine = WasmEngine::new(cache.clone()).expect("engine");
        // Compiles so far, and cache entries (None: no cache) with them.
        let counted = |compiles: u64| {
            let entries = engine.cache().map(|c| c.entries().len() as u64);
            assert_eq!(
                (engine.compiles(), entries),
                (compiles, cache.as_ref().map(|_| compiles)),
                "cache {cache:?}"
            );
        };
        start_together(&engine, &counter, TOGETHER).await;
        start_together(&engine, &counter, 2).await;
        counted(1);
        // The control: a component of its own is a compile of its own.
        start_together(&engine, &other, 2).await;
        counted(2);
    }
}
