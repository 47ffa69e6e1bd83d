//! An in-memory Tick transport: the host's [`TickIo`] and the Tick's end of
//! the same pipes in one process, with no subprocess and no wasm — the
//! counterpart of `lsp-server`'s `Connection::memory`.
//!
//! Tests of the session engine, the checker and the MCP facade use it where
//! the process is not the point: the Tick is a task of the test, reading
//! requests from [`MemoryTick::stdin`] and writing frames to
//! [`MemoryTick::stdout`] (both with the real framing on the host side), and
//! ending with [`TickControl::exit`] or by being dropped. Like a process it
//! sees its terminal resized ([`MemoryTick::size`], SIGWINCH's counterpart)
//! and may be sent SIGTERM ([`TickControl::sigterm`]): uncaught, that ends
//! it as the signal's default action would; [`TickControl::catch_sigterm`]
//! takes it over.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use tickbox_host::backend::memory;
//! use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
//! let (io, tick) = memory::pair();
//! let memory::MemoryTick { stdin, mut stdout, control, .. } = tick;
//! // A Tick that answers one request with an error, then ends.
//! tokio::spawn(async move {
//!     let mut lines = BufReader::new(stdin).lines();
//!     let _request = lines.next_line().await;
//!     let _ = stdout
//!         .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"no\"}}\n")
//!         .await;
//!     drop(control); // the Tick exits
//! });
//! let err = tickbox_host::session::Session::start(io, Default::default()).await;
//! assert!(err.is_err());
//! # }
//! ```

use super::{BoxFuture, TickIo, TickProcess};
use crate::view::{Terminal, View};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tickbox_protocol::limits::{INITIAL_COLS, INITIAL_ROWS};
use tokio::io::DuplexStream;
use tokio::sync::watch;

/// Bytes each direction buffers before a writer waits (like a pipe's buffer).
pub const PIPE_BUFFER: usize = 64 * 1024;

/// The Tick's end of an in-memory transport. Destructure it freely; the
/// Tick counts as running while its [`TickControl`] lives.
pub struct MemoryTick {
    /// What the host writes to the Tick: request frames. Read from it; it
    /// reads as EOF once the host has closed the Tick's stdin.
    pub stdin: DuplexStream,
    /// Where the Tick writes its frames for the host; dropping it closes
    /// the Tick's stdout.
    pub stdout: DuplexStream,
    /// The Tick's view; write drawing with [`View::feed`].
    pub view: Arc<View>,
    /// The Tick's terminal size (cols, rows); it changes when the host
    /// resizes the view, as a native Tick gets SIGWINCH.
    pub size: watch::Receiver<(u16, u16)>,
    /// Ends the Tick, and tells it when the host terminated it. Dropping it
    /// is the Tick exiting.
    pub control: TickControl,
}

/// The process side of an in-memory Tick.
pub struct TickControl {
    exit: watch::Sender<Option<String>>,
    terminated: watch::Receiver<bool>,
    sigterm: watch::Receiver<bool>,
    caught: Arc<AtomicBool>,
}

impl TickControl {
    /// Ends the Tick with an exit description (what the session reports).
    pub fn exit(&self, status: impl Into<String>) {
        let _ = self.exit.send(Some(status.into()));
    }

    /// Resolves when the host has terminated the Tick (session end).
    pub async fn terminated(&self) {
        let _ = self.terminated.clone().wait_for(|t| *t).await;
    }

    /// Takes SIGTERM over from its default action: from now on the host's
    /// SIGTERM only makes [`TickControl::sigterm`] resolve, and the Tick
    /// decides whether to exit.
    pub fn catch_sigterm(&self) {
        self.caught.store(true, Ordering::SeqCst);
    }

    /// Resolves when the host has sent SIGTERM ([`TickProcess::sigterm`]).
    /// Uncaught, SIGTERM has already ended the Tick by then (its exit reads
    /// `signal 15 (SIGTERM)`); the Tick should stop and drop its ends.
    pub async fn sigterm(&self) {
        let _ = self.sigterm.clone().wait_for(|t| *t).await;
    }
}

/// The in-memory Tick's terminal: resizes reach [`MemoryTick::size`]; keys
/// go nowhere.
struct MemoryTerminal {
    size: watch::Sender<(u16, u16)>,
}

impl Terminal for MemoryTerminal {
    fn send_input(&self, _: &[u8]) {}
    fn resize(&self, cols: u16, rows: u16) {
        self.size.send_replace((cols, rows));
    }
}

struct MemoryProcess {
    exit: watch::Receiver<Option<String>>,
    terminated: watch::Sender<bool>,
    sigterm: watch::Sender<bool>,
    caught: Arc<AtomicBool>,
    /// Set when an uncaught SIGTERM ended the Tick.
    killed: Option<String>,
}

impl TickProcess for MemoryProcess {
    fn exited(&mut self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            if let Some(how) = &self.killed {
                return how.clone();
            }
            match self.exit.wait_for(Option::is_some).await {
                Ok(status) => status.clone().unwrap_or_default(),
                // The control was dropped: the Tick is gone.
                Err(_) => "the in-memory Tick ended".into(),
            }
        })
    }

    fn terminate(&mut self, _graceful: bool) -> BoxFuture<'_, ()> {
        let _ = self.terminated.send(true);
        Box::pin(async {})
    }

    fn sigterm(&mut self) -> bool {
        if self.killed.is_some() || self.exit.borrow().is_some() {
            return false;
        }
        if !self.caught.load(Ordering::SeqCst) {
            // The default action: the Tick is gone at once.
            self.killed = Some("signal 15 (SIGTERM)".into());
        }
        self.sigterm.send_replace(true);
        true
    }
}

/// A connected pair: the host's [`TickIo`] and the Tick's [`MemoryTick`].
pub fn pair() -> (TickIo, MemoryTick) {
    // A pipe each way, like a process's stdin and stdout (each used in one
    // direction only). Unlike the halves of a split stream, dropping one
    // end is EOF at the other, as closing a pipe is.
    let (tick_stdin, host_stdin) = tokio::io::duplex(PIPE_BUFFER);
    let (host_stdout, tick_stdout) = tokio::io::duplex(PIPE_BUFFER);
    let (size_tx, size_rx) = watch::channel((INITIAL_COLS, INITIAL_ROWS));
    let view = View::new(Box::new(MemoryTerminal { size: size_tx }));
    let (exit_tx, exit_rx) = watch::channel(None);
    let (term_tx, term_rx) = watch::channel(false);
    let (sigterm_tx, sigterm_rx) = watch::channel(false);
    let caught = Arc::new(AtomicBool::new(false));
    let io = TickIo {
        stdin: Box::new(host_stdin),
        stdout: Box::new(host_stdout),
        view: view.clone(),
        process: Box::new(MemoryProcess {
            exit: exit_rx,
            terminated: term_tx,
            sigterm: sigterm_tx,
            caught: caught.clone(),
            killed: None,
        }),
    };
    let tick = MemoryTick {
        stdin: tick_stdin,
        stdout: tick_stdout,
        view,
        size: size_rx,
        control: TickControl {
            exit: exit_tx,
            terminated: term_rx,
            sigterm: sigterm_rx,
            caught,
        },
    };
    (io, tick)
}

#[cfg(test)]
mod tests {
    //! The engine over the in-memory transport: no process, real framing,
    //! real validators, and timings short enough to be exact.
    use super::*;
    use crate::session::{CallOutcome, EndReason, Session, SessionConfig, UnknownReason};
    use serde_json::{json, Value};
    use std::time::Duration;
    use tickbox_protocol::rules;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// What the scripted Tick does after a normal initialization.
    #[derive(Clone, Copy)]
    enum Script {
        /// Answers calls with their args.
        Echo,
        /// Never answers a call.
        SilentCalls,
        /// Writes a non-JSON line when called.
        GarbageOnCall,
        /// Sends an update whose seq goes backwards when called.
        BackwardsUpdate,
    }

    fn descriptor() -> Value {
        json!({"protocol":3,"kind":"test.memory","title":"Memory","description":"in memory",
               "revision":"1","tools":[{"name":"echo","description":"echo",
               "input_schema":{"type":"object"},"mutates":false}]})
    }

    async fn serve(tick: MemoryTick, script: Script) {
        let MemoryTick {
            stdin,
            mut stdout,
            control: _alive,
            ..
        } = tick;
        let mut lines = BufReader::new(stdin).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let req: Value = serde_json::from_str(&line).expect("the host writes JSON");
            let id = req["id"].clone();
            let frame = |body: Value| {
                let mut f = json!({"jsonrpc":"2.0","id":id});
                f.as_object_mut()
                    .unwrap()
                    .extend(body.as_object().unwrap().clone());
                format!("{f}\n")
            };
            let out = match req["method"].as_str() {
                Some("tick/describe") => frame(json!({"result": descriptor()})),
                Some("tick/read") => frame(json!({"result": {"seq": 5, "data": {"n": 1}}})),
                Some("tick/call") => match script {
                    Script::Echo => frame(json!({"result": req["params"]["args"]})),
                    Script::SilentCalls => continue,
                    Script::GarbageOnCall => "this is not json\n".to_string(),
                    Script::BackwardsUpdate => {
                        let update = |seq: u64| {
                            format!(
                                "{}\n",
                                json!({"jsonrpc":"2.0","method":"tick/update",
                                                   "params":{"seq":seq,"data":1}})
                            )
                        };
                        update(7) + &update(6)
                    }
                },
                _ => frame(json!({"error": {"code": -32601, "message": "no such method"}})),
            };
            if stdout.write_all(out.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    async fn start(script: Script, config: SessionConfig) -> Session {
        let (io, tick) = pair();
        tokio::spawn(serve(tick, script));
        Session::start(io, config).await.expect("initializes")
    }

    fn config() -> SessionConfig {
        SessionConfig {
            call_timeout: Duration::from_millis(200),
            ..SessionConfig::default()
        }
    }

    #[tokio::test]
    async fn a_conforming_tick_initializes_and_answers() {
        let s = start(Script::Echo, config()).await;
        assert_eq!(s.read().await.unwrap().seq, 5);
        let call = s
            .descriptor()
            .unwrap()
            .prepare("echo", json!({"x": 1}))
            .unwrap();
        assert_eq!(s.call(&call).await, CallOutcome::Ok(json!({"x": 1})));
        s.shutdown().await;
    }

    #[tokio::test]
    async fn an_unanswered_call_is_an_unknown_outcome_at_the_injected_timeout() {
        let s = start(Script::SilentCalls, config()).await;
        let call = s.descriptor().unwrap().prepare("echo", json!({})).unwrap();
        let t = std::time::Instant::now();
        match s.call(&call).await {
            CallOutcome::Unknown(UnknownReason::TimedOut(_)) => {}
            other => panic!("expected a timed-out unknown outcome, got {other:?}"),
        }
        assert!(t.elapsed() >= Duration::from_millis(200));
        s.shutdown().await;
    }

    #[tokio::test]
    async fn pipes_resizes_and_sigterm_behave_as_a_process_sees_them() {
        use tokio::io::AsyncReadExt;
        // Closing the host's end of stdin is EOF for the Tick, and the
        // Tick dropping its stdout is EOF for the host.
        let (mut io, tick) = pair();
        let MemoryTick {
            mut stdin,
            stdout,
            mut size,
            control,
            ..
        } = tick;
        io.stdin.write_all(b"x\n").await.unwrap();
        drop(io.stdin);
        let mut got = Vec::new();
        stdin.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"x\n");
        drop(stdout);
        let mut rest = Vec::new();
        io.stdout.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        // A resize reaches the Tick's size.
        assert_eq!(*size.borrow(), (INITIAL_COLS, INITIAL_ROWS));
        io.view.resize(80, 24);
        size.changed().await.unwrap();
        assert_eq!(*size.borrow_and_update(), (80, 24));
        // Uncaught, SIGTERM ends the Tick at once; a second one finds it gone.
        assert!(io.process.sigterm());
        control.sigterm().await;
        assert_eq!(io.process.exited().await, "signal 15 (SIGTERM)");
        assert!(!io.process.sigterm());

        // Caught, SIGTERM only tells the Tick, which decides.
        let (mut io, tick) = pair();
        tick.control.catch_sigterm();
        assert!(io.process.sigterm());
        tick.control.sigterm().await;
        let still_running =
            tokio::time::timeout(Duration::from_millis(50), io.process.exited()).await;
        assert!(still_running.is_err(), "a caught SIGTERM ended the Tick");
        tick.control.exit("exit status 3");
        assert_eq!(io.process.exited().await, "exit status 3");
    }

    #[tokio::test]
    async fn violations_end_the_session_naming_the_rule() {
        for (script, rule) in [
            (Script::GarbageOnCall, rules::FRAMING_PROTOCOL_ONLY),
            (Script::BackwardsUpdate, rules::STATE_UPDATE_SEQ),
        ] {
            let s = start(script, config()).await;
            let call = s.descriptor().unwrap().prepare("echo", json!({})).unwrap();
            assert!(matches!(s.call(&call).await, CallOutcome::Unknown(_)));
            match s.ended().await {
                EndReason::Violation(v) => {
                    assert_eq!(v.rule(), rule, "{v}");
                    assert!(v.to_string().contains(rule.id), "{v}");
                }
                other => panic!("expected a violation of {}, got {other}", rule.id),
            }
        }
    }
}
