//! Per-Tick handle caps (`max_handles`): a guest past its cap gets its own
//! error (a component's `open-at` fails, a preview-1 module gets `mfile`),
//! the host holds no more descriptors than the cap, and the Tick and its
//! neighbour under the same limits keep answering.

use crate::guest::*;
use serde_json::{json, Value};
use std::path::Path;
use tickbox_host::{CallOutcome, Session};
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::*;

fn capped(data: &TempDir, max: &str) -> GrantSpec {
    GrantSpec {
        dir: vec![format!("{}::/data", data.0.display())],
        max_handles: Some(max.into()),
        ..Default::default()
    }
}

/// Descriptors this process holds on files under `dir`: what the host
/// opened on the guests' behalf. (All of /proc/self/fd would count the
/// other tests running in parallel in this process.)
fn fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|target| target.starts_with(dir)))
        .count()
}

/// The call must be answered: its result.
async fn answered(s: &Session, tool: &str, args: Value, what: &str) -> Value {
    match call(s, tool, args).await {
        CallOutcome::Ok(v) => v,
        other => panic!("{what}: {other:?}"),
    }
}

#[tokio::test]
async fn handle_exhaustion_is_the_guests_error_or_ends_only_that_tick() {
    let data = TempDir::new("handles");
    std::fs::write(data.path("f.txt"), "x").unwrap();
    let open_many = |wasm: String, n: u64, max: &str| {
        let grants = capped(&data, max);
        async move {
            attempt_in(
                &wasm,
                "open_many",
                json!({"path": "/data/f.txt", "n": n}),
                &grants,
            )
            .await
        }
    };
    // Positive control: 50 open files under a cap of 1024.
    let v = open_many(hostile(), 50, "1024").await;
    assert_eq!(v["opened"], 50, "{v}");
    // A component past the cap: opening fails inside the guest, an error it
    // reports (the few handles below the cap are its stdio and preopen).
    let v = open_many(hostile(), 100_000, "200").await;
    assert_eq!(v["ok"], false, "{v}");
    assert!((150..200).contains(&v["opened"].as_u64().unwrap()), "{v}");
    // A preview-1 module past the cap: errno `mfile` (33), "no file
    // descriptors available" in wasi-libc's words; the Tick answers.
    let v = open_many(hostile_p1(), 50, "1024").await;
    assert_eq!(v["opened"], 50, "{v}");
    let v = open_many(hostile_p1(), 100_000, "200").await;
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["errno"], 33, "{v}");
    assert!((150..200).contains(&v["opened"].as_u64().unwrap()), "{v}");
    // A cap of none at all is refused when the grants are read.
    let zero = capped(&data, "0").resolve();
    assert!(zero.is_err(), "{zero:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_at_its_handle_cap_leaves_a_neighbour_working() {
    let data = TempDir::new("handles-neighbour");
    std::fs::write(data.path("f.txt"), "neighbourly").unwrap();
    let grants = capped(&data, "300");
    let engine = engine();
    let start = || async {
        open_on(&engine, &hostile(), &grants, Default::default())
            .await
            .expect("the Tick starts")
    };
    let greedy = start().await;
    let neighbour = start().await;
    let fds_before = fds_under(&data.0);
    let many = json!({"path": "/data/f.txt", "n": 1_000_000});
    let v = answered(&greedy, "open_many", many, "the greedy Tick's call failed").await;
    assert_eq!(v["ok"], false, "{v}");
    let fds = fds_under(&data.0);
    assert!(fds < fds_before + 300, "{fds_before} → {fds} fds");
    // The greedy Tick itself keeps working once its call let go of them.
    let read = json!({"path": "/data/f.txt"});
    let v = answered(
        &greedy,
        "read_file",
        read.clone(),
        "the greedy Tick no longer answers",
    )
    .await;
    assert_eq!(v["value"], "neighbourly", "{v}");
    let v = answered(&neighbour, "read_file", read, "the neighbour's call failed").await;
    assert_eq!(v["value"], "neighbourly", "{v}");
    greedy.shutdown().await;
    neighbour.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview1_tick_holding_all_its_handles_gets_emfile_and_keeps_answering() {
    let data = TempDir::new("handles-p1");
    std::fs::write(data.path("f.txt"), "neighbourly").unwrap();
    let grants = capped(&data, "200");
    let engine = engine();
    let start = || async {
        open_on(&engine, &hostile_p1(), &grants, Default::default())
            .await
            .expect("the Tick starts")
    };
    let greedy = start().await;
    let neighbour = start().await;
    // Positive control: a few files open and close again.
    let few = json!({"path": "/data/f.txt", "n": 20});
    let v = answered(
        &greedy,
        "open_many",
        few,
        "the greedy Tick's first call failed",
    )
    .await;
    assert_eq!(
        (v["ok"].clone(), v["opened"].clone()),
        (json!(true), json!(20)),
        "{v}"
    );
    // Then it opens files until the cap refuses one, and keeps them all.
    let fds_before = fds_under(&data.0);
    let hold = json!({"path": "/data/f.txt", "n": 1_000_000, "hold": true});
    let v = answered(
        &greedy,
        "open_many",
        hold,
        "the greedy Tick trapped at its cap",
    )
    .await;
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["errno"], 33, "errno mfile: {v}");
    let held = v["opened"].as_u64().unwrap();
    assert!((150..200).contains(&held), "{v}");
    let fds_after = fds_under(&data.0);
    // The count is real (one host descriptor per file the guest holds) and
    // bounded by the cap, not by the million the guest asked for.
    assert!(
        fds_after >= fds_before + held as usize,
        "{fds_before} → {fds_after} fds, {held} held"
    );
    assert!(
        fds_after < fds_before + 200,
        "{fds_before} → {fds_after} fds"
    );
    // Still at its cap, it reads its stdin and answers; one more file is
    // the same error, not a trap.
    for n in 0..3 {
        let v = answered(&greedy, "echo", json!({"n": n}), "no answer at its cap").await;
        assert_eq!(v["n"], n);
    }
    let read = json!({"path": "/data/f.txt"});
    let v = answered(
        &greedy,
        "read_file",
        read.clone(),
        "trapped opening one more",
    )
    .await;
    assert_eq!(v["ok"], false, "{v}");
    // wasi-libc's text for `mfile`.
    assert!(
        v["error"].as_str().unwrap().contains("(os error 33)"),
        "{v}"
    );
    // The neighbour under the same limits is untouched.
    let v = answered(&neighbour, "read_file", read, "the neighbour's call failed").await;
    assert_eq!(v["value"], "neighbourly", "{v}");
    greedy.shutdown().await;
    neighbour.shutdown().await;
}
