//! What the sandbox's tests share: a test guest opened through the
//! library's `Launcher` under a `GrantSpec` (the value a policy file or a
//! flag becomes), and its tools called.

use serde_json::Value;
use std::sync::Arc;
use tickbox_host::{CallOutcome, Session, SessionConfig};
use tickbox_sandbox::{GrantSpec, LaunchError, Launcher, WasmEngine};
use tickbox_test_support::*;

/// An engine compiling in-process into the build's own compile cache (as
/// the other crates' tests keep it), so a guest is compiled once per run,
/// not once per start: what these tests prove is the sandbox around a
/// running guest, the same whether its code was compiled or loaded. The
/// cache's own behaviour is tested in `cache` and `sharing`, on caches of
/// their own.
pub fn engine() -> Arc<WasmEngine> {
    WasmEngine::new(Some(wasm_cache())).expect("engine")
}

/// Starts and initializes `path` on `engine` under `grants`; a grant that
/// does not resolve is a test error, a start that fails is returned.
pub async fn open_on(
    engine: &Arc<WasmEngine>,
    path: &str,
    grants: &GrantSpec,
    config: SessionConfig,
) -> Result<Session, LaunchError> {
    let grants = grants.resolve().expect("grants resolve");
    Launcher::wasm(engine.clone(), path.into(), grants)?
        .open(config)
        .await
}

/// Starts `path` under `grants` on an engine of its own; the Tick must start.
pub async fn open(path: &str, grants: &GrantSpec) -> Session {
    open_on(&engine(), path, grants, SessionConfig::default())
        .await
        .expect("the Tick starts")
}

/// Why `path` under `grants` did not start (the start must fail).
pub async fn refused(path: &str, grants: &GrantSpec) -> String {
    match open_on(&engine(), path, grants, SessionConfig::default()).await {
        Err(e) => e.to_string(),
        Ok(s) => {
            s.shutdown().await;
            panic!("{path} started under {grants:?}")
        }
    }
}

/// Calls `tool` with `args` through the host (the call validated against
/// the Tick's catalog first, as every client's is).
pub async fn call(s: &Session, tool: &str, args: Value) -> CallOutcome {
    let c = s.descriptor().unwrap().prepare(tool, args).unwrap();
    s.call(&c).await
}

/// A fresh hostile guest (wasm32-wasip2) under `grants` calls `tool` once,
/// and the call must be answered: its result.
pub async fn attempt(tool: &str, args: Value, grants: &GrantSpec) -> Value {
    attempt_in(&hostile(), tool, args, grants).await
}

/// [`attempt`] with another guest file.
pub async fn attempt_in(path: &str, tool: &str, args: Value, grants: &GrantSpec) -> Value {
    let s = open(path, grants).await;
    let out = call(&s, tool, args).await;
    s.shutdown().await;
    match out {
        CallOutcome::Ok(v) => v,
        other => panic!("{tool} was not answered: {other:?}"),
    }
}

/// A fresh hostile guest under `grants` calls `tool`, and the call must
/// not be answered: why, as the host words it.
pub async fn attempt_fails(tool: &str, args: Value, grants: &GrantSpec) -> String {
    let s = open(&hostile(), grants).await;
    let out = call(&s, tool, args).await;
    s.shutdown().await;
    match out {
        CallOutcome::Ok(v) => panic!("{tool} was answered: {v}"),
        CallOutcome::Unknown(why) => why.to_string(),
        other => format!("{other:?}"),
    }
}

/// Whether the guest's tool reports the host refused what it tried.
pub fn denied(v: &Value) -> bool {
    v["ok"] == serde_json::json!(false)
}

/// `dir` grants, as a policy file or `--dir` flags list them.
pub fn dirs(grants: &[&str]) -> GrantSpec {
    GrantSpec {
        dir: grants.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}
