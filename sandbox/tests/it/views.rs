//! Live views of a wasm Tick through the host's live API: the sizes a
//! viewer may ask for are bounded (refused naming the bound, the largest
//! allowed one drawn), and a drawing flood stalls no neighbour's calls, no
//! other viewer and no shutdown.

use crate::guest::*;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_host::live::wire::{Frame, Reply, Request};
use tickbox_host::live::{client, publish, LiveError, PublishOptions, Registry};
use tickbox_host::view::VIEW_QUEUE_BYTES;
use tickbox_host::{CallOutcome, Session};
use tickbox_sandbox::{GrantSpec, WasmEngine};
use tickbox_test_support::*;

async fn hostile_session(engine: &Arc<WasmEngine>) -> Session {
    open_on(
        engine,
        &hostile(),
        &GrantSpec::default(),
        Default::default(),
    )
    .await
    .expect("the Tick starts")
}

#[tokio::test]
async fn attach_sizes_are_bounded() {
    let dir = TempDir::new("views-sizes");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let engine = engine();
    let session = Arc::new(hostile_session(&engine).await);
    let mut opts = PublishOptions::new("wasm");
    opts.registry = Some(registry.clone());
    let published = publish(session.clone(), opts).await.unwrap();
    let socket = published.socket().to_path_buf();
    let attach = |cols, rows| {
        let socket = socket.clone();
        async move { attach_at(&socket, cols, rows).await }
    };
    async fn attach_at(
        socket: &std::path::Path,
        cols: u16,
        rows: u16,
    ) -> (client::Connection, Result<Value, LiveError>) {
        let mut c = client::Connection::open(socket, "hostile").await.unwrap();
        let hello = c
            .start(Request::Attach {
                cols,
                rows,
                status: None,
            })
            .await;
        (c, hello)
    }
    for (cols, rows) in [(65535, 65535), (1001, 10), (10, 501), (0, 24)] {
        let (_, hello) = attach(cols, rows).await;
        match hello {
            Err(LiveError::Remote { message, .. }) => assert!(
                message.contains(&format!("{cols}x{rows}")) && message.contains("1..=1000"),
                "{message}"
            ),
            other => panic!("{cols}x{rows} was not refused: {other:?}"),
        }
    }
    assert_eq!(
        session.view().size(),
        (120, 30),
        "a refused view sizes nothing"
    );
    // The largest allowed view works, draws, and sizes the Tick.
    let (mut c, hello) = attach(1000, 500).await;
    hello.unwrap();
    match c.next().await.unwrap() {
        Some(Frame::Output(bytes)) => assert!(bytes.starts_with(b"\x1b[?25l\x1b[0m\x1b[H\x1b[2J")),
        other => panic!("{other:?}"),
    }
    assert_eq!(session.view().size(), (1000, 500));
    assert_eq!(
        call(&session, "term", json!({})).await,
        CallOutcome::Ok(json!({"cols": 1000, "rows": 500, "generation": 1}))
    );
    // A resize beyond the bounds ends that view with the reason.
    c.send(&Frame::Json(
        serde_json::to_value(Reply::Resize {
            cols: 2000,
            rows: 2000,
        })
        .unwrap(),
    ))
    .await
    .unwrap();
    let mut refused = None;
    while let Ok(Some(frame)) = c.next().await {
        if let Frame::Json(v) = frame {
            refused = Some(v);
            break;
        }
    }
    let refused = refused.expect("an error reply");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2000x2000"),
        "{refused}"
    );
    drop(published);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drawing_flood_stalls_no_neighbour_viewer_or_shutdown() {
    let dir = TempDir::new("views-flood");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let engine = engine();
    let flooder = Arc::new(hostile_session(&engine).await);
    let neighbour = hostile_session(&engine).await;
    let mut opts = PublishOptions::new("wasm");
    opts.registry = Some(registry.clone());
    opts.name = Some("flood".into());
    let published = publish(flooder.clone(), opts).await.unwrap();
    let viewer = |cols, rows| {
        let socket = published.socket().to_path_buf();
        async move {
            let mut c = client::Connection::open(&socket, "flood").await.unwrap();
            c.start(Request::Attach {
                cols,
                rows,
                status: Some("x".into()),
            })
            .await
            .unwrap();
            c
        }
    };
    // One viewer never reads a byte; another reads everything.
    let _stalled = viewer(200, 60).await;
    let mut reader = viewer(80, 24).await;
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut frames = 0u64;
        while let Ok(Some(frame)) = reader.next().await {
            match frame {
                Frame::Output(_) => frames += 1,
                Frame::Json(v) if v.get("ended").is_some() => {
                    let _ = ended_tx.send(frames);
                    return;
                }
                _ => {}
            }
        }
    });

    let mut calm = Duration::ZERO;
    for i in 0..20 {
        let t = Instant::now();
        assert_eq!(
            call(&neighbour, "echo", json!({"i": i})).await,
            CallOutcome::Ok(json!({"i": i}))
        );
        calm = calm.max(t.elapsed());
    }
    let f = flooder.clone();
    let before = flooder.view().bytes_drawn();
    let flood = tokio::spawn(async move { call(&f, "draw_flood", json!({"mb": 10})).await });
    // Measured once the flood is being parsed: more than a full queue of it.
    assert!(
        eventually_async(PATIENCE, || flooder.view().bytes_drawn()
            > before + VIEW_QUEUE_BYTES as u64)
        .await,
        "the flood never reached the view"
    );
    let drawn = flooder.view().bytes_drawn();
    let mut worst = Duration::ZERO;
    // At least 40 calls, and on until the view has parsed more of the
    // flood (so the calls overlap its parsing), paced by their own round
    // trips; bounded by PATIENCE.
    let calling = Instant::now();
    let mut i = 0;
    while i < 40 || (flooder.view().bytes_drawn() <= drawn && calling.elapsed() < PATIENCE) {
        let t = Instant::now();
        assert_eq!(
            call(&neighbour, "echo", json!({"i": i})).await,
            CallOutcome::Ok(json!({"i": i}))
        );
        worst = worst.max(t.elapsed());
        i += 1;
    }
    assert!(
        !flood.is_finished(),
        "10 MB of resets take longer than this"
    );
    assert!(
        flooder.view().bytes_drawn() > drawn,
        "the flood is being parsed"
    );
    eprintln!("neighbour call latency: {calm:?} worst calm, {worst:?} worst during a flood");
    // What this guards: with the parser on the async workers a neighbour's
    // call waited behind the flood, tens of seconds (10 MB of resets take
    // about a minute to parse, CPU-budgeted). 3 s, or 20 times the slowest calm call when this
    // machine is slower than that, is far from both that and the
    // milliseconds a call takes beside a flood on a loaded 2-core machine.
    let bound = Duration::from_secs(3).max(calm * 20);
    assert!(worst < bound, "{worst:?} over {bound:?}");

    let t = Instant::now();
    flooder.shutdown().await;
    let took = t.elapsed();
    let frames = tokio::time::timeout(PATIENCE, ended_rx)
        .await
        .expect("the reading viewer was told the session ended")
        .unwrap();
    assert!(frames >= 1, "the reading viewer got its repaint");
    drop(published);
    // The anchor: the same shutdown without a flood, on this machine now.
    let t = Instant::now();
    neighbour.shutdown().await;
    let calm_shutdown = t.elapsed();
    eprintln!("shutdown took {took:?} during a flood, {calm_shutdown:?} without one");
    // What this guards: a shutdown that waits for the flood to be parsed
    // (the rest of its minute) or forever. A few seconds more than a calm
    // shutdown is far from that.
    let bound = calm_shutdown * 3 + Duration::from_secs(3);
    assert!(took < bound, "{took:?} over {bound:?}");
}
