//! Deterministic by construction: under a `VirtualClock` nothing a wasm
//! guest can read differs from one start to the next, not its
//! `TICKLOOP_INSTANCE_ID` (the seed's, not the host's pid and clock), not
//! the timestamps of its files (the virtual epoch, not the host's clock),
//! not the order of a directory's entries (by name, not the host file
//! system's order). Each start gets a fresh directory granted as `/data`,
//! as a scenario's scratch directory is. (That whole `tickbox test` runs,
//! each its own process, give the same reports is the binary's test.)

use crate::guest::*;
use serde_json::{json, Value};
use std::time::Duration;
use tickbox_host::{CallOutcome, Session, SessionConfig};
use tickbox_sandbox::virtual_time::VirtualClock;
use tickbox_sandbox::{LaunchOptions, Launcher};
use tickbox_test_support::*;

/// 2000-01-01T00:00:00Z: the virtual clock's start and every file time a
/// guest reads under virtual time.
const EPOCH: u64 = 946_684_800;

/// The nine names the guests create (`f` first, then eight in an order
/// that is neither this one nor its reverse), by name.
const SORTED: [&str; 9] = ["a", "c", "e", "f", "h", "m", "q", "x", "z"];

/// Starts `wasm` with a fresh directory granted as `/data`, on virtual time
/// with `seed` (5 s advanced first, so the epoch cannot be mistaken for
/// "now") or, without one, on the host's time; makes the calls in turn and
/// returns the last one's result. The directory lives as long as the
/// calls.
async fn on_time(wasm: &str, seed: Option<u64>, calls: &[(&str, Value)]) -> Value {
    let scratch = TempDir::new("virtual-time-scratch");
    let grants = dirs(&[&format!("{}::/data", scratch.0.display())]);
    let launcher = Launcher::wasm(engine(), wasm.into(), grants.resolve().unwrap()).unwrap();
    let clock = seed.map(VirtualClock::new);
    let io = launcher
        .start(&LaunchOptions::clock(clock.clone()))
        .await
        .expect("the Tick starts");
    let s = Session::start(io, SessionConfig::default())
        .await
        .expect("initialize");
    if let Some(clock) = &clock {
        clock
            .advance(Duration::from_secs(5))
            .await
            .expect("advance");
    }
    let mut last = Value::Null;
    for (tool, args) in calls {
        last = answered(&s, tool, args.clone()).await;
    }
    s.shutdown().await;
    last
}

async fn answered(s: &Session, tool: &str, args: Value) -> Value {
    match call(s, tool, args).await {
        CallOutcome::Ok(v) => v,
        other => panic!("{tool}: {other:?}"),
    }
}

/// The clockwork guest writes a file in `/data` and reports its instance
/// id, the file's and the directory's times, and the directory's names.
async fn clockwork_files(seed: Option<u64>) -> Value {
    let wasm = build_wasm("tests/guests", "clockwork", "wasm32-wasip2");
    let files = ("files", json!({"dir": "/data"}));
    on_time(&wasm.to_string_lossy(), seed, &[files]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_id_and_file_times_are_the_same_in_every_run() {
    let r = clockwork_files(Some(7)).await;
    assert_eq!(
        r["instance"], "tickbox-virtual-0000000000000007",
        "the instance id is the seed's: {r}"
    );
    assert_eq!(r["write_error"], Value::Null, "{r}");
    let epoch = json!([EPOCH, 0]);
    for time in ["modified", "accessed"] {
        assert_eq!(r["file"][time], epoch, "the file's {time} time: {r}");
        assert_eq!(r["dir"][time], epoch, "the directory's {time} time: {r}");
        assert_eq!(r["after_set"][time], epoch, "after set-times: {r}");
    }
    assert_eq!(r["set_error"], Value::Null, "{r}");
    assert_eq!(r["file"]["len"], 4, "sizes stay real: {r}");
    assert_eq!(
        r["names"],
        json!(SORTED),
        "entries by name, not as the host's file system keeps them: {r}"
    );
    // Another start (another real time, another directory): the same reading.
    assert_eq!(clockwork_files(Some(7)).await, r);
    // The seed decides the id.
    let other = clockwork_files(Some(8)).await;
    assert_eq!(other["instance"], "tickbox-virtual-0000000000000008");

    // Positive control: on the host's time the same guest reads the host's
    // pid-and-clock id and real file times, and two starts differ: the
    // comparison above can fail.
    let a = clockwork_files(None).await;
    let b = clockwork_files(None).await;
    let id = a["instance"].as_str().unwrap();
    assert!(
        id.starts_with("tickbox-") && !id.starts_with("tickbox-virtual-"),
        "{a}"
    );
    assert_ne!(a["instance"], b["instance"], "real ids differ per start");
    assert!(
        a["file"]["modified"][0].as_u64().unwrap() > 1_700_000_000,
        "real file times: {a}"
    );
    assert_host_order(&a["names"]);
}

/// Positive control for the entry order: on the host's time a listing
/// holds the same names in the host file system's own order, which is not
/// by name (ext4 keeps a hash order, tmpfs and others creation order; the
/// guests create in neither the names' order nor its reverse), so the
/// check of the sorted order above can fail.
fn assert_host_order(names: &Value) {
    let names: Vec<&str> = names
        .as_array()
        .unwrap_or_else(|| panic!("a listing: {names}"))
        .iter()
        .map(|n| n.as_str().expect("a name"))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, SORTED, "the same names: {names:?}");
    assert_ne!(names, SORTED, "the host's order is not by name: {names:?}");
}

/// The hostile guest built for preview 1 writes `/data/f`, then (with
/// `list`) eight more files in an order that is not their names'; what
/// `stat` of the file, or (with `list`) `list_dir` of the directory, reads.
async fn preview1_reads(seed: Option<u64>, list: bool) -> Value {
    let write = |name: &str| {
        (
            "write_file",
            json!({"path": format!("/data/{name}"), "text": "x"}),
        )
    };
    let mut calls = vec![write("f")];
    if list {
        calls.extend(["m", "c", "x", "a", "q", "h", "z", "e"].map(write));
        calls.push(("list_dir", json!({"path": "/data"})));
    } else {
        calls.push(("stat", json!({"path": "/data/f"})));
    }
    on_time(&hostile_p1(), seed, &calls).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview1_modules_file_times_are_virtual_too() {
    let virt = preview1_reads(Some(0), false).await;
    assert_eq!(virt["ok"], true, "{virt}");
    assert_eq!(virt["modified"], EPOCH, "{virt}");
    assert_eq!(virt["accessed"], EPOCH, "{virt}");
    assert_eq!(virt["len"], 1, "{virt}");
    // Positive control: the host's time shows the host's clock.
    let real = preview1_reads(None, false).await;
    assert!(real["modified"].as_u64().unwrap() > 1_700_000_000, "{real}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview1_modules_directory_lists_by_name_too() {
    let virt = preview1_reads(Some(0), true).await;
    assert_eq!(virt["ok"], true, "{virt}");
    assert_eq!(virt["value"], json!(SORTED), "{virt}");
    // Positive control: the host's time lists in the host file system's order.
    let real = preview1_reads(None, true).await;
    assert_host_order(&real["value"]);
}
