//! What the host writes to a Tick: every request inside its deadline, whole
//! frames only (a cancelled caller never leaves half a frame), slots held
//! until the answer, and nothing over the line limit. Real Ticks where a
//! process matters (a Tick that stops reading), an in-memory Tick where the
//! test must see every byte the host wrote.

use serde_json::{json, Value};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tickbox_host::backend::native::{spawn, NativeSpec};
use tickbox_host::session::{
    BoxFuture, CallOutcome, EndReason, RequestError, Session, SessionConfig, TickIo, TickProcess,
    UnknownReason, NOT_SENT,
};
use tickbox_host::view::{NoInput, View};
use tickbox_protocol::limits::MAX_LINE_BYTES;
use tickbox_protocol::PreparedCall;
use tickbox_test_support::*;
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::Semaphore;

async fn start_with(argv: Vec<String>, config: SessionConfig) -> Session {
    let io = spawn(&NativeSpec::new(argv)).expect("spawn");
    Session::start(io, config).await.expect("initialize")
}

fn prepared(s: &Session, tool: &str, args: Value) -> PreparedCall {
    s.descriptor().unwrap().prepare(tool, args).unwrap()
}

#[tokio::test]
async fn a_tick_that_stops_reading_stdin_never_hangs_the_host() {
    let config = SessionConfig {
        call_timeout: Duration::from_secs(20),
        write_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let s = Arc::new(start_with(faulty("slow"), config).await);
    // `misbehave` makes this Tick sleep 30 s without reading its stdin.
    let stuck = {
        let s = s.clone();
        tokio::spawn(async move { s.call(&prepared(&s, "misbehave", json!({}))).await })
    };
    // Once the Tick says it has the call it sleeps without reading.
    shows(
        || s.view().screen_text().wire().to_string(),
        "misbehave call 1 received",
    )
    .await;
    // Far more than a pipe holds: this frame cannot be written.
    let big = prepared(&s, "echo", json!({"blob": "x".repeat(1 << 20)}));
    let t = Instant::now();
    let out = s.call(&big).await;
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t.elapsed()
    );
    assert!(
        matches!(
            out,
            CallOutcome::Unknown(UnknownReason::SessionEnded(EndReason::StdinStalled(_)))
        ),
        "{out:?}"
    );
    assert!(matches!(
        s.end_reason(),
        Some(EndReason::StdinStalled(d)) if d == Duration::from_secs(1)
    ));
    // Everything else resolves at once instead of queueing behind the write.
    assert!(matches!(
        stuck.await.unwrap(),
        CallOutcome::Unknown(UnknownReason::SessionEnded(_))
    ));
    assert!(matches!(s.read().await, Err(RequestError::Ended(_))));
    s.shutdown().await;
}

#[tokio::test]
async fn a_timed_out_call_keeps_its_slot_until_the_tick_answers() {
    let config = SessionConfig {
        call_timeout: Duration::from_millis(300),
        // Also initialization's bound: python3 must start and answer
        // describe within it on a loaded machine (0.6 s, then 3 s, were
        // not always enough at a load average of 12). The ninth request
        // waits this long for a slot; the slots stay busy for 30 s.
        request_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let s = Arc::new(start_with(faulty("slow"), config).await);
    // Eight calls the Tick has been sent but will not answer for 30 s.
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let s = s.clone();
            tokio::spawn(async move { s.call(&prepared(&s, "misbehave", json!({}))).await })
        })
        .collect();
    for c in calls {
        assert!(matches!(
            c.await.unwrap(),
            CallOutcome::Unknown(UnknownReason::TimedOut(_))
        ));
    }
    // Their callers are gone, but they are still in flight at the Tick: a
    // ninth request must not be sent (§3.3), and says it was not.
    match s.read().await {
        Err(RequestError::NotSent { method, .. }) => assert_eq!(method, "tick/read"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        s.call(&prepared(&s, "echo", json!({}))).await,
        CallOutcome::Failed {
            error: tickbox_protocol::RpcError {
                code: NOT_SENT,
                message: "tick/call: not sent: all 8 request slots stayed busy for 0.3s".into(),
                data: None
            },
            executed: false
        }
    );
    assert!(s.end_reason().is_none(), "the session goes on");
    s.shutdown().await;
}

/// A Tick in memory: it reads the host's frames only while `gate` has
/// permits, records every line it reads, and answers each request with the
/// length of its line.
struct MemoryTick {
    lines: Arc<Mutex<Vec<String>>>,
    gate: Arc<Semaphore>,
    /// Bytes the host has put into the Tick's stdin pipe.
    written: Arc<AtomicUsize>,
    pipe: usize,
}

/// The host's end of the Tick's stdin, counting what goes in.
struct Counted {
    inner: DuplexStream,
    written: Arc<AtomicUsize>,
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.written.fetch_add(n, Ordering::SeqCst);
        }
        polled
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

struct Idle;

impl TickProcess for Idle {
    fn exited(&mut self) -> BoxFuture<'_, String> {
        Box::pin(std::future::pending())
    }
    fn terminate(&mut self, _graceful: bool) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl MemoryTick {
    /// A session on a memory Tick whose stdin pipe holds `pipe` bytes.
    fn start(pipe: usize, config: SessionConfig) -> (Session, MemoryTick) {
        let (host_stdin, tick_stdin) = tokio::io::duplex(pipe);
        let (tick_stdout, host_stdout) = tokio::io::duplex(1 << 16);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(Semaphore::new(0));
        let written = Arc::new(AtomicUsize::new(0));
        tokio::spawn(serve(tick_stdin, tick_stdout, lines.clone(), gate.clone()));
        let io = TickIo {
            stdin: Box::new(Counted {
                inner: host_stdin,
                written: written.clone(),
            }),
            stdout: Box::new(host_stdout),
            view: View::new(Box::new(NoInput)),
            process: Box::new(Idle),
        };
        let tick = MemoryTick {
            lines,
            gate,
            written,
            pipe,
        };
        (Session::spawn(io, config), tick)
    }

    /// Waits until the host has filled the Tick's stdin pipe (the gate is
    /// closed, so nothing is read): its writer is stuck mid-frame.
    async fn pipe_filled(&self) {
        let written = || self.written.load(Ordering::SeqCst);
        assert!(
            eventually_async(PATIENCE, || written() >= self.pipe).await,
            "the host never filled the pipe: {} of {} bytes",
            written(),
            self.pipe
        );
    }

    fn open(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

async fn serve(
    stdin: DuplexStream,
    mut stdout: DuplexStream,
    lines: Arc<Mutex<Vec<String>>>,
    gate: Arc<Semaphore>,
) {
    let mut reader = BufReader::with_capacity(1024, stdin);
    loop {
        // Reads nothing until the gate opens: the pipe fills up.
        let Ok(permit) = gate.acquire().await else {
            return;
        };
        permit.forget();
        let mut line = String::new();
        match reader.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        lines.lock().unwrap().push(line.clone());
        let id = serde_json::from_str::<Value>(&line)
            .ok()
            .and_then(|v| v["id"].as_u64());
        if let Some(id) = id {
            let reply = json!({"jsonrpc": "2.0", "id": id, "result": {"len": line.len()}});
            let mut bytes = serde_json::to_vec(&reply).unwrap();
            bytes.push(b'\n');
            if stdout.write_all(&bytes).await.is_err() {
                return;
            }
        }
    }
}

fn call(tool: &str, args: Value) -> PreparedCall {
    PreparedCall {
        tool: tool.into(),
        args,
        revision: "r1".into(),
        mutates: false,
    }
}

#[tokio::test]
async fn a_caller_cancelled_mid_write_never_leaves_half_a_frame() {
    let (s, tick) = MemoryTick::start(4096, SessionConfig::default());
    let s = Arc::new(s);
    // The writer starts on this 200 KB frame and blocks on the full pipe;
    // then its caller gives up.
    let big = call("a", json!({"blob": "x".repeat(200_000)}));
    tokio::select! {
        out = s.call(&big) => panic!("answered by a Tick that reads nothing: {out:?}"),
        () = tick.pipe_filled() => {}
    }
    // Queued behind the rest of the cancelled frame: this single-threaded
    // runtime runs it (up to its wait for the writer) before the Tick reads.
    let next = {
        let s = s.clone();
        tokio::spawn(async move { s.call(&call("b", json!({"n": 1}))).await })
    };
    tokio::task::yield_now().await;
    tick.open();
    let out = tokio::time::timeout(Duration::from_secs(10), next)
        .await
        .expect("the next call is answered")
        .unwrap();
    assert!(matches!(out, CallOutcome::Ok(_)), "{out:?}");
    // Two whole frames, in order: the cancelled one was finished, not cut.
    let lines = tick.lines();
    assert_eq!(lines.len(), 2, "{} lines", lines.len());
    let first: Value = serde_json::from_str(&lines[0]).expect("a whole first frame");
    let second: Value = serde_json::from_str(&lines[1]).expect("a whole second frame");
    assert_eq!(
        first["params"]["args"]["blob"].as_str().unwrap().len(),
        200_000
    );
    assert_eq!(second["params"]["tool"], "b");
    s.shutdown().await;
}

#[tokio::test]
async fn a_caller_cancelled_before_its_turn_is_never_written() {
    let config = SessionConfig {
        call_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let (s, tick) = MemoryTick::start(4096, config);
    let s = Arc::new(s);
    let big = {
        let s = s.clone();
        tokio::spawn(async move {
            s.call(&call("a", json!({"blob": "x".repeat(100_000)})))
                .await
        })
    };
    // The big frame has the writer, stuck on the full pipe.
    tick.pipe_filled().await;
    // Queued behind the blocked frame: its deadline passes before its turn,
    // so it provably never reached the Tick.
    let late = s
        .call_within(&call("b", json!({})), Duration::from_millis(200))
        .await;
    assert!(
        matches!(&late, CallOutcome::Failed { error, executed: false } if error.code == NOT_SENT),
        "{late:?}"
    );
    // And one whose future is simply dropped while queued.
    let c = call("c", json!({}));
    let dropped = tokio::time::timeout(Duration::from_millis(100), s.call(&c));
    assert!(dropped.await.is_err());
    tick.open();
    assert!(matches!(big.await.unwrap(), CallOutcome::Ok(_)));
    let d = s.call(&call("d", json!({}))).await;
    assert!(matches!(d, CallOutcome::Ok(_)), "{d:?}");
    let tools: Vec<String> = tick
        .lines()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["params"]["tool"].to_string())
        .collect();
    assert_eq!(tools, ["\"a\"", "\"d\""]);
    s.shutdown().await;
}

#[tokio::test]
async fn args_over_the_line_limit_are_refused_before_sending() {
    let (s, tick) = MemoryTick::start(1 << 16, SessionConfig::default());
    tick.open();
    let too_big = call("a", json!({"blob": "x".repeat(MAX_LINE_BYTES)}));
    match s.call(&too_big).await {
        CallOutcome::Failed {
            error,
            executed: false,
        } => {
            assert_eq!(error.code, -32602);
            assert!(
                error.message.wire().contains("line limit"),
                "{}",
                error.message
            );
            assert!(
                error.message.wire().contains("nothing was sent"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(tickbox_host::session::call_line_len(&too_big) > MAX_LINE_BYTES);
    // Positive control: just under the limit goes through, whole.
    let fits = call("a", json!({"blob": "x".repeat(MAX_LINE_BYTES - 200)}));
    assert!(tickbox_host::session::call_line_len(&fits) <= MAX_LINE_BYTES);
    let out = s.call(&fits).await;
    assert!(matches!(out, CallOutcome::Ok(_)), "{out:?}");
    let lines = tick.lines();
    assert_eq!(lines.len(), 1, "only the call that fits was written");
    assert!(lines[0].len() <= MAX_LINE_BYTES + 1);
    s.shutdown().await;
}
