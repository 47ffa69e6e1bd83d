//! The catalog schema bomb (`tests/guests/schemabomb`: a wasm Tick with no
//! grants whose tools' input schemas hold a Unicode class repeated in a
//! `pattern`) refused at its start: each pattern and each catalog's
//! patterns are bounded (`MAX_PATTERN_BYTES`, `MAX_CATALOG_PATTERN_BYTES`,
//! a `describe.schemas` finding past either), and the compiled patterns
//! are charged to the Tick's memory bound. (A neighbour's latency while
//! the bomb churns revisions is measured through `tickbox mcp`, in the
//! binary's tests.)

use crate::guest::*;
use tickbox_host::Session;
use tickbox_sandbox::{GrantSpec, LaunchError};
use tickbox_test_support::*;

fn bomb() -> String {
    build_wasm("tests/guests", "schemabomb", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// Starts the bomb with `rep` repetitions in each of `tools` patterns,
/// under `max_memory` when one is given.
async fn start_bomb(
    rep: u32,
    tools: u32,
    max_memory: Option<&str>,
) -> Result<Session, LaunchError> {
    let grants = GrantSpec {
        env: vec![format!("BOMB_REP={rep}"), format!("BOMB_TOOLS={tools}")],
        max_memory: max_memory.map(str::to_string),
        ..Default::default()
    };
    open_on(&engine(), &bomb(), &grants, Default::default()).await
}

/// The number of tools of a Tick that started, which is then ended.
async fn tools(started: Result<Session, LaunchError>) -> usize {
    let s = started.expect("the Tick starts");
    let n = s.descriptor().expect("initialized").tools.len();
    s.shutdown().await;
    n
}

/// Why a start failed (it must fail).
fn why(started: Result<Session, LaunchError>) -> String {
    match started {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the bomb started"),
    }
}

#[tokio::test]
async fn a_catalog_past_the_pattern_bound_is_refused_naming_it() {
    // The positive control first: the same Tick with small patterns starts.
    assert_eq!(tools(start_bomb(1, 80, None).await).await, 81);
    let refused = why(start_bomb(5000, 80, None).await);
    assert!(refused.contains("describe.schemas"), "{refused}");
    assert!(refused.contains("MAX_PATTERN_BYTES"), "{refused}");
    assert!(
        !refused.contains("did not finish"),
        "not the start deadline: {refused}"
    );
}

#[tokio::test]
async fn a_catalogs_compiled_patterns_are_charged_to_the_ticks_memory_bound() {
    // Forty patterns of about 190 KiB each do not fit a 6 MiB bound beside
    // the guest's own memory.
    let refused = why(start_bomb(4, 40, Some("6MiB")).await);
    assert!(refused.contains("memory bound (max_memory"), "{refused}");
    assert!(refused.contains("compiled patterns take"), "{refused}");
    // Positive controls: ten of them fit the same bound, and forty fit a
    // larger one.
    assert_eq!(tools(start_bomb(4, 10, Some("6MiB")).await).await, 11);
    assert_eq!(tools(start_bomb(4, 40, Some("64MiB")).await).await, 41);
}
