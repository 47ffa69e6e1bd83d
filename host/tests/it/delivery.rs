//! Subscription delivery through the host's API, against real Tick
//! processes: a burst of updates arrives as a handful of latest-state
//! deliveries whose merged counts add up, and a state wider than the
//! budget is trimmed to it, keeping what fits and listing every cut. Each
//! delivery is measured as the one JSON line `tickbox watch` prints.

use serde_json::{json, Value};
use std::time::Duration;
use tickbox_host::backend::native::{spawn, NativeSpec};
use tickbox_host::delivery::{item_budget, Delivery, Subscription};
use tickbox_host::session::{Session, SessionConfig};
use tickbox_test_support::*;

async fn start(argv: Vec<String>) -> Session {
    let io = spawn(&NativeSpec::new(argv)).expect("spawn");
    Session::start(io, SessionConfig::default())
        .await
        .expect("initialize")
}

/// The next delivery of `sub`, as a JSON line, or None once the session
/// ended and everything was delivered.
async fn next_line(sub: &mut Subscription, session: &Session) -> Option<String> {
    let (state, merged) = sub.next(session).await?;
    let catalog = session.descriptor().expect("initialized");
    let delivery = Delivery::build(state, merged, catalog, item_budget(1)).await;
    Some(serde_json::to_string(&delivery).expect("a delivery encodes"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_delivers_a_burst_as_a_handful_of_merged_deliveries_within_budget() {
    let session = start(vec!["python3".into(), tick("burst.py"), "10000".into()]).await;
    let mut sub = Subscription::new(&session, Duration::from_millis(200), true);
    let mut lines = Vec::new();
    while let Some(line) = tokio::time::timeout(PATIENCE, next_line(&mut sub, &session))
        .await
        .expect("the next delivery, or the end")
    {
        lines.push(line);
    }
    let deliveries: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Latest only: far fewer deliveries than updates, merged counts add up.
    assert!(
        (1..=100).contains(&deliveries.len()),
        "{} deliveries",
        deliveries.len()
    );
    let merged: u64 = deliveries
        .iter()
        .map(|d| d["merged"].as_u64().unwrap())
        .sum();
    assert_eq!(merged, 10_000);
    for (line, d) in lines.iter().zip(&deliveries) {
        assert!(line.len() <= 16 * 1024, "{} bytes", line.len());
        assert_eq!(d["recover_with"], "items");
    }
    // The last state (2,000 items) was trimmed to its newest end, and says so.
    let last = deliveries.last().unwrap();
    assert_eq!(last["seq"], 10_000);
    let items = last["data"]["items"].as_array().unwrap();
    assert_eq!(items.last().unwrap()["i"], 1999);
    assert_eq!(
        last["trimmed"],
        json!([{"path": "/items", "kept": "newest", "count": items.len(), "of": 2000}])
    );
    session.shutdown().await;
}

#[tokio::test]
async fn watch_trims_a_wide_state_to_the_budget_and_keeps_what_fits() {
    let session = start(faulty("wide")).await;
    let mut sub = Subscription::new(&session, Duration::from_millis(200), true);
    let line = next_line(&mut sub, &session)
        .await
        .expect("a first delivery");
    session.shutdown().await;
    assert!(line.len() <= 16 * 1024, "{} bytes", line.len());
    assert!(
        line.len() > 12 * 1024,
        "as much as fits: {} bytes",
        line.len()
    );
    let d: Value = serde_json::from_str(&line).unwrap();
    let data = &d["data"];
    assert!(data.is_object(), "not null: {d}");
    // The declared series keeps its newest end, the object its first members.
    let log = data["log"].as_array().unwrap();
    assert_eq!(log.last().unwrap(), "entry number 14999 of the log");
    let trimmed = d["trimmed"].as_array().unwrap();
    assert!(!trimmed.is_empty());
    for cut in trimmed {
        let path = cut["path"].as_str().unwrap();
        assert!(data.pointer(path).is_some(), "{path} is in the data");
    }
    assert!(trimmed
        .iter()
        .any(|c| c["path"] == "/log" && c["kept"] == "newest"));
}
