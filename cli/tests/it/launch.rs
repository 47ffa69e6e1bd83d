//! The library's `Launcher`: a Tick opened by what it is (a wasm file with
//! its grants, or a native command line), and each way it cannot start
//! reported as its own `LaunchError` variant.

use crate::util::*;
use serde_json::json;
use tickbox_runtime::backend::native::SpawnError;
use tickbox_runtime::{
    CallOutcome, Grants, LaunchError, Launcher, NativeSpec, SessionConfig, WasmEngine,
};

/// The crate docs' example, run: open the counter example as wasm with
/// nothing granted, call a tool, read the state.
#[tokio::test]
async fn a_wasm_tick_opens_through_the_launcher() {
    let path = build_wasm("examples", "counter", "wasm32-wasip2");
    let engine = WasmEngine::new(None).expect("engine");
    let launcher = Launcher::wasm(engine, path, Grants::default()).expect("launcher");
    let session = launcher.open(SessionConfig::default()).await.expect("open");
    let call = session
        .descriptor()
        .expect("initialized")
        .prepare("increment", json!({"amount": 2}))
        .expect("valid call");
    match session.call(&call).await {
        CallOutcome::Ok(result) => assert_eq!(result, json!({"value": 2})),
        other => panic!("increment: {other:?}"),
    }
    let state = session.read().await.expect("read");
    assert_eq!(state.data.wire()["value"], 2, "{state:?}");
    session.shutdown().await;

    // The same launcher starts a fresh instance each time.
    let again = launcher.open(SessionConfig::default()).await.expect("open");
    assert_eq!(again.read().await.expect("read").data.wire()["value"], 0);
    again.shutdown().await;
}

#[tokio::test]
async fn a_native_tick_opens_through_the_launcher() {
    let launcher = Launcher::native(NativeSpec::new(faulty("ok")));
    let session = launcher.open(SessionConfig::default()).await.expect("open");
    assert_eq!(
        session.descriptor().expect("initialized").kind.wire(),
        "test.faulty"
    );
    session.shutdown().await;
}

#[test]
fn a_file_without_a_wasm_header_is_not_wasm() {
    let dir = TempDir::new("launch-not-wasm");
    let path = dir.path("fake.wasm");
    std::fs::write(&path, b"#!/bin/sh\n").expect("write");
    let engine = WasmEngine::new(None).expect("engine");
    match Launcher::wasm(engine, path.clone(), Grants::default()) {
        Err(e @ LaunchError::NotWasm { .. }) => {
            assert!(e.to_string().contains(&path.display().to_string()), "{e}")
        }
        Err(e) => panic!("expected NotWasm, got {e:?}"),
        Ok(_) => panic!("a shell script launched as wasm"),
    }
}

/// A manifest is read by whoever reads files (the CLI; the sandbox takes
/// grants as values): a malformed one is a usage error that names it, found
/// before anything starts, and a well-formed one, once approved (see
/// `consent`), is shown by `info`.
#[test]
fn a_malformed_manifest_is_its_own_error() {
    let dir = TempDir::new("launch-manifest");
    let path = dir.path("counter.wasm");
    std::fs::copy(build_wasm("examples", "counter", "wasm32-wasip2"), &path).expect("copy");
    let w = path.display().to_string();
    std::fs::write(dir.path("counter.tick.toml"), "dir = [\"/data\"]\n").expect("write");
    let trust = dir.path("trust");
    let env = [("TICKBOX_TRUST_DIR", trust.to_str().unwrap())];
    assert_eq!(tickbox_env(&["trust", w.as_str()], &env).code, 0);
    let info = tickbox_env(&["info", w.as_str()], &env);
    assert_eq!(info.code, 0, "{info:#?}");
    assert_eq!(
        info.json()["requested"]["dir"],
        json!(["/data"]),
        "{info:#?}"
    );
    std::fs::write(dir.path("counter.tick.toml"), "dir = 7\n").expect("write");
    tickbox(&["info", w.as_str()]).expect(2, "counter.tick.toml");
    tickbox(&["read", w.as_str()]).expect(2, "counter.tick.toml");
}

#[tokio::test]
async fn a_missing_program_and_a_failed_initialization_are_told_apart() {
    let missing = Launcher::native(NativeSpec::new(["/nonexistent/tick"]));
    match missing.spawn().await {
        Err(LaunchError::Native(SpawnError::NotFound(p))) => assert!(p.contains("nonexistent")),
        Err(e) => panic!("expected Native(NotFound), got {e:?}"),
        Ok(_) => panic!("a missing program started"),
    }
    // It starts, but answers describe with a broken frame (§3.6).
    let broken = Launcher::native(NativeSpec::new(faulty("invalid_json")));
    match broken.open(SessionConfig::default()).await {
        Err(LaunchError::Init(e)) => assert!(e.reason.contains("JSON"), "{e}"),
        Err(e) => panic!("expected Init, got {e:?}"),
        Ok(_) => panic!("a Tick answering garbage initialized"),
    }
}
