//! The session engine through its library API, against real Tick processes:
//! per-request faults leave the session running, concurrency is bounded,
//! state and catalog changes arrive as events.

use serde_json::json;
use std::time::Duration;
use tickbox_host::backend::native::{spawn, NativeSpec};
use tickbox_host::session::{
    CallOutcome, EndReason, RequestError, Session, SessionConfig, SessionEvent, UnknownReason,
};
use tickbox_protocol::PreparedCall;
use tickbox_test_support::*;

async fn start(argv: Vec<String>) -> Session {
    start_with(argv, SessionConfig::default()).await
}

/// The shutdown graces are shortened: a Tick stuck in a slow call would
/// otherwise cost the default 500 ms before SIGTERM, and shutdown is not
/// what these tests are about (`native.rs` tests it).
async fn start_with(argv: Vec<String>, config: SessionConfig) -> Session {
    let mut spec = NativeSpec::new(argv);
    spec.exit_grace = Duration::from_millis(50);
    spec.term_grace = Duration::from_millis(50);
    let io = spawn(&spec).expect("spawn");
    Session::start(io, config).await.expect("initialize")
}

fn prepared(s: &Session, tool: &str) -> PreparedCall {
    s.descriptor().unwrap().prepare(tool, json!({})).unwrap()
}

#[tokio::test]
async fn both_result_and_error_fails_only_that_call() {
    let s = start(faulty("both")).await;
    match s.call(&prepared(&s, "misbehave")).await {
        CallOutcome::Unknown(UnknownReason::Malformed(why)) => {
            assert!(why.contains("both result and error"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.call(&prepared(&s, "echo")).await,
        CallOutcome::Ok(json!({}))
    );
    assert!(s.end_reason().is_none());
    s.shutdown().await;
}

#[tokio::test]
async fn a_read_below_the_floor_fails_only_that_read() {
    let s = start(faulty("read_floor")).await;
    assert!(matches!(
        s.call(&prepared(&s, "misbehave")).await,
        CallOutcome::Ok(_)
    ));
    match s.read().await {
        Err(RequestError::Invalid { reason, .. }) => {
            assert!(reason.contains("below the read floor 5"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(s.describe().await.is_ok(), "the session goes on");
    assert_eq!(
        s.state().state.unwrap().seq,
        5,
        "the update is the latest state"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn updates_become_events_and_the_latest_state() {
    let s = start(faulty("ok")).await;
    let mut events = s.events();
    let bump = prepared(&s, "bump");
    assert_eq!(s.call(&bump).await, CallOutcome::Ok(json!({"seq": 1})));
    assert_eq!(s.call(&bump).await, CallOutcome::Ok(json!({"seq": 2})));
    // The host reads the Tick's output in order, and each update came
    // before its call's answer: both events are queued already.
    let mut seqs = Vec::new();
    while let Ok(ev) = events.try_recv() {
        if let SessionEvent::Updated(st) = ev {
            seqs.push(st.seq);
        }
    }
    assert_eq!(seqs, vec![1, 2]);
    let snap = s.state();
    assert_eq!((snap.state.unwrap().seq, snap.updates), (2, 2));
    assert_eq!(s.read().await.unwrap().seq, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn at_most_eight_requests_are_in_flight() {
    let s = start(faulty("hold")).await;
    let call = prepared(&s, "misbehave");
    let calls = (0..20).map(|_| s.call(&call));
    let results = futures_join_all(calls).await;
    let most: Vec<u64> = results
        .iter()
        .map(|r| match r {
            CallOutcome::Ok(v) => v["max_outstanding"].as_u64().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(most.iter().all(|&m| m <= 8), "{most:?}");
    assert!(
        most.contains(&8),
        "the host should use all 8 slots: {most:?}"
    );
    s.shutdown().await;
}

async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    // A tiny join_all on tokio's JoinSet would need 'static futures; polling
    // them together through a select loop keeps them borrowed.
    let mut futs: Vec<_> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futs.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => out[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("ready")).collect()
}

#[tokio::test]
async fn a_stale_revision_is_not_executed_and_catalog_changes_are_events() {
    let s = start(faulty("catalog_change")).await;
    let mut events = s.events();
    let stale = prepared(&s, "echo");
    assert!(matches!(
        s.call(&prepared(&s, "misbehave")).await,
        CallOutcome::Ok(_)
    ));
    match s.call(&stale).await {
        CallOutcome::Failed { error, executed } => {
            assert_eq!((error.code, executed), (-32004, false))
        }
        other => panic!("{other:?}"),
    }
    let d = s.describe().await.unwrap();
    assert_eq!(d.revision, "r2");
    // Sent before `describe` returned; the bound is only reached on failure.
    let ev = tokio::time::timeout(PATIENCE, events.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(ev, SessionEvent::CatalogChanged(d) if d.revision == "r2"));
    s.shutdown().await;
}

#[tokio::test]
async fn calls_time_out_as_unknown_and_late_answers_are_dropped() {
    let config = SessionConfig {
        call_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let s = start_with(faulty("slow"), config).await;
    let out = s.call(&prepared(&s, "misbehave")).await;
    assert_eq!(
        out,
        CallOutcome::Unknown(UnknownReason::TimedOut(Duration::from_millis(500)))
    );
    assert!(
        s.end_reason().is_none(),
        "a timeout does not end the session"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn session_end_marks_in_flight_calls_unknown() {
    let s = start(faulty("exit_mid_call")).await;
    match s.call(&prepared(&s, "misbehave")).await {
        CallOutcome::Unknown(UnknownReason::SessionEnded(EndReason::Exited(how))) => {
            assert!(how.contains("exit status 7"), "{how}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(s.ended().await, EndReason::Exited(_)));
    // Requests after the end fail at once rather than hang.
    assert!(matches!(s.read().await, Err(RequestError::Ended(_))));
}

/// The MCP facade polls every Tick's catalog each second; a repeat
/// describe must not validate and compile the schemas again.
#[tokio::test]
async fn a_repeat_describe_reuses_the_compiled_catalog() {
    use std::sync::Arc;
    let s = start(vec!["python3".to_string(), tick("shifty.py")]).await;
    let first = s.descriptor().unwrap();
    let again = s.describe().await.unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "same bytes, same compiled catalog"
    );
    let call = first.prepare("reshape", json!({"tools": ["x"]})).unwrap();
    assert!(matches!(s.call(&call).await, CallOutcome::Ok(_)));
    let changed = s.describe().await.unwrap();
    assert!(!Arc::ptr_eq(&first, &changed), "a new catalog is parsed");
    assert_eq!(changed.revision, "r2");
    assert!(changed.tool("x").is_some());
    let again = s.describe().await.unwrap();
    assert!(Arc::ptr_eq(&changed, &again));
    s.shutdown().await;
}
