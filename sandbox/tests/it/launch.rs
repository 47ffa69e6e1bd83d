//! The library's `Launcher`: a Tick opened by what it is (a wasm file with
//! its grants, or a native command line), and each way it cannot start
//! reported as its own `LaunchError` variant.

use serde_json::json;
use tickbox_host::backend::native::SpawnError;
use tickbox_host::{CallOutcome, NativeSpec, SessionConfig};
use tickbox_sandbox::{Grants, LaunchError, Launcher, WasmEngine};
use tickbox_test_support::*;

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

#[test]
fn a_wasm_file_that_cannot_be_read_says_why_and_names_the_open_file_bound() {
    let dir = TempDir::new("launch-unreadable");
    let engine = WasmEngine::new(None).expect("engine");
    for (path, says) in [
        (dir.path("missing.wasm"), "No such file"),
        (dir.0.clone(), "Is a directory"),
    ] {
        match Launcher::wasm(engine.clone(), path.clone(), Grants::default()) {
            Err(e @ LaunchError::Unreadable { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains(&format!("cannot read {}", path.display())),
                    "{text}"
                );
                assert!(text.contains(says), "{text}");
            }
            Err(e) => panic!("{}: expected Unreadable, got {e:?}", path.display()),
            Ok(_) => panic!("{} launched", path.display()),
        }
    }
    // Out of descriptors, the message names the bound and how to raise it;
    // any other error is told as it came.
    let emfile = LaunchError::Unreadable {
        path: "t.wasm".into(),
        source: std::io::Error::from_raw_os_error(24),
    };
    let text = emfile.to_string();
    assert!(
        text.contains("RLIMIT_NOFILE") && text.contains("ulimit -n"),
        "{text}"
    );
    let other = LaunchError::Unreadable {
        path: "t.wasm".into(),
        source: std::io::Error::from_raw_os_error(13),
    };
    assert!(!other.to_string().contains("RLIMIT_NOFILE"), "{other}");
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
