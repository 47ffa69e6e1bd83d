//! One memory budget per Tick, checked before and while it runs: a wasm
//! defining more memories or tables than a Tick may have is refused at
//! load, a file past the size bound before it is read. (That the host's
//! own memory stays within the budget is measured on the `tickbox` binary,
//! in its tests.)

use crate::guest::*;
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::wasm::{grower, write_wasm};
use tickbox_test_support::*;

#[tokio::test]
async fn more_memories_or_tables_than_a_tick_may_have_are_refused_at_load() {
    let dir = TempDir::new("declares");
    let none = GrantSpec::default();
    let eight = write_wasm(&dir, "eight.wasm", &grower(8, 0, 0, 0));
    let why = refused(&eight, &none).await;
    assert!(
        why.contains("defines 8 linear memories; a Tick may define at most 4"),
        "{why}"
    );
    let many = write_wasm(&dir, "tables.wasm", &grower(0, 32, 0, 0));
    let why = refused(&many, &none).await;
    assert!(
        why.contains("defines 32 tables; a Tick may define at most 16"),
        "{why}"
    );
    // Positive control: within the counts it loads and runs (and, answering
    // no protocol, ends at initialization for another reason).
    let four = write_wasm(&dir, "four.wasm", &grower(4, 16, 0, 0));
    let why = refused(&four, &none).await;
    assert!(!why.contains("defines"), "{why}");
}

#[tokio::test]
async fn a_wasm_larger_than_the_size_bound_is_refused_before_reading() {
    let bound = |size: &str| GrantSpec {
        max_wasm_size: Some(size.into()),
        ..Default::default()
    };
    let why = refused(&hostile(), &bound("1KiB")).await;
    assert!(
        why.contains("larger than max_wasm_size (1024 bytes)"),
        "{why}"
    );
    open(&hostile(), &bound("64MiB")).await.shutdown().await;
    assert!(bound("lots").resolve().is_err(), "a size is required");
}
