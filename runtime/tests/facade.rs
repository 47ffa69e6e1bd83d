//! The façade's own promise, as its crate doc shows it: one dependency
//! opens a sandboxed wasm Tick, calls a tool and reads the state, under the
//! paths the single crate had.

use tickbox_runtime::{CallOutcome, Grants, Launcher, SessionConfig, WasmEngine};
use tickbox_test_support::build_wasm;

#[tokio::test]
async fn the_crate_docs_example_opens_calls_and_reads_a_sandboxed_tick() {
    let counter = build_wasm("examples", "counter", "wasm32-wasip2");
    let engine = WasmEngine::new(None).expect("an engine without a compile cache");
    let launcher = Launcher::wasm(engine, counter, Grants::default()).expect("a launcher");
    let session = launcher
        .open(SessionConfig::default())
        .await
        .expect("the counter starts");
    let catalog = session.descriptor().expect("initialized");

    // Control: a tool the catalog does not have is refused before sending.
    assert!(catalog
        .prepare("no_such_tool", serde_json::json!({}))
        .is_err());

    let call = catalog
        .prepare("increment", serde_json::json!({"amount": 2}))
        .expect("increment takes an amount");
    match session.call(&call).await {
        CallOutcome::Ok(result) => assert_eq!(result, serde_json::json!({"value": 2})),
        other => panic!("increment: {other:?}"),
    }
    let state = session.read().await.expect("the state");
    assert_eq!(state.data.wire()["value"], 2, "{}", state.data.json());
    session.shutdown().await;
}
