//! Fake Ticks for the checker's tests: the conforming Tick of
//! `tests/ticks/broken/base.py` written in Rust over the in-memory transport
//! ([`tickbox_host::backend::memory`]), and one [`Fault`] for each of its broken
//! siblings, breaking the same rule the same way. The checker sees real
//! framing and real timing, with no process to start; the Python files stay
//! as fixtures of the CLI's own tests and as examples for readers.
//!
//! Like `base.py` the fake has three tools: `peek` (query, no args), `echo`
//! (query, `{text: string}`) and `add` (mutating, `{amount: integer}`, emits
//! a `tick/update`), and handles requests one at a time, in order.

use crate::check::{Launch, LaunchError};
use serde_json::{json, Map, Value};
use tickbox_host::backend::memory::{self, MemoryTick};
use tickbox_host::session::{BoxFuture, TickIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::watch;

/// One way to break the base Tick; each is the Python file of the same name
/// in `tests/ticks/broken/` ([`Fault::file`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `base.py`: conforming.
    None,
    /// Keeps about 6 KiB in its state (§6.4 guidance).
    BigState,
    /// Answers unknown methods with both result and error (§3.2).
    BothResultError,
    /// Counts tick/describe calls in its state (§4.4).
    DescribeSideEffect,
    /// Answers every tick/read twice (§3.2).
    DuplicateResponse,
    /// Answers unparseable lines with an error under a made-up id 0 (§3.2).
    GarbageReply,
    /// Keeps running after stdin EOF (§4.5 SHOULD).
    IgnoresEof,
    /// Ignores SIGTERM (§4.5 guidance).
    IgnoresSigterm,
    /// Answers a burst of requests with their bytes interleaved (§3.1).
    Interleaved,
    /// A kind that is not a lowercase dotted name (§5.4 SHOULD).
    KindNaming,
    /// Starts by writing a 9 MiB line (§3.6).
    LongLine,
    /// `peek` is declared `mutates: false` but changes the state (§5.6).
    MutatesDishonest,
    /// Never checks args against the schema (§7.2).
    NoArgCheck,
    /// Answers unparseable lines with a parse error carrying `id: null` (§3.2).
    NullIdReply,
    /// `add` emits a tick/update with null data (§8.2).
    NullUpdate,
    /// Declares protocol 2 (§4.3).
    ProtocolTwo,
    /// tick/read serves a stale cache below the last update's seq (§6.3).
    ReadBelowUpdate,
    /// Names a mutating tool as `recover_with` (§5.3 / §9).
    RecoverMutating,
    /// `add` changes the state, then answers -32602 (§3.4).
    RefusesAfterActing,
    /// Emits a tick/update when its terminal is resized (§8.3).
    ResizeUpdate,
    /// Sends a request to the host at startup (§3.2).
    SendsRequest,
    /// Prints a banner on stdout before speaking the protocol (§3.1).
    StrayStdout,
    /// Answers unknown methods with -32600 instead of -32601 (§3.4).
    UnknownMethod,
    /// Answers a call to an unknown tool with -32000, "executed" (§7.2).
    UnknownTool,
    /// Writes a final message without its newline at stdin EOF (§3.1).
    Unterminated,
    /// `add` emits two updates whose seq goes backwards (§8.2).
    UpdateSeqBackwards,
    /// Executes calls whatever their revision (§7.2).
    WrongRevision,
}

impl Fault {
    /// Every fault, the conforming base first.
    pub const ALL: &'static [Fault] = &[
        Fault::None,
        Fault::BigState,
        Fault::BothResultError,
        Fault::DescribeSideEffect,
        Fault::DuplicateResponse,
        Fault::GarbageReply,
        Fault::IgnoresEof,
        Fault::IgnoresSigterm,
        Fault::Interleaved,
        Fault::KindNaming,
        Fault::LongLine,
        Fault::MutatesDishonest,
        Fault::NoArgCheck,
        Fault::NullIdReply,
        Fault::NullUpdate,
        Fault::ProtocolTwo,
        Fault::ReadBelowUpdate,
        Fault::RecoverMutating,
        Fault::RefusesAfterActing,
        Fault::ResizeUpdate,
        Fault::SendsRequest,
        Fault::StrayStdout,
        Fault::UnknownMethod,
        Fault::UnknownTool,
        Fault::Unterminated,
        Fault::UpdateSeqBackwards,
        Fault::WrongRevision,
    ];

    /// The Python fixture in `tests/ticks/broken/` that breaks the same rule.
    pub fn file(self) -> &'static str {
        match self {
            Fault::None => "base.py",
            Fault::BigState => "big_state.py",
            Fault::BothResultError => "both_result_error.py",
            Fault::DescribeSideEffect => "describe_side_effect.py",
            Fault::DuplicateResponse => "duplicate_response.py",
            Fault::GarbageReply => "garbage_reply.py",
            Fault::IgnoresEof => "ignores_eof.py",
            Fault::IgnoresSigterm => "ignores_sigterm.py",
            Fault::Interleaved => "interleaved.py",
            Fault::KindNaming => "kind_naming.py",
            Fault::LongLine => "long_line.py",
            Fault::MutatesDishonest => "mutates_dishonest.py",
            Fault::NoArgCheck => "no_arg_check.py",
            Fault::NullIdReply => "null_id_reply.py",
            Fault::NullUpdate => "null_update.py",
            Fault::ProtocolTwo => "protocol_two.py",
            Fault::ReadBelowUpdate => "read_below_update.py",
            Fault::RecoverMutating => "recover_mutating.py",
            Fault::RefusesAfterActing => "refuses_after_acting.py",
            Fault::ResizeUpdate => "resize_update.py",
            Fault::SendsRequest => "sends_request.py",
            Fault::StrayStdout => "stray_stdout.py",
            Fault::UnknownMethod => "unknown_method.py",
            Fault::UnknownTool => "unknown_tool.py",
            Fault::Unterminated => "unterminated.py",
            Fault::UpdateSeqBackwards => "update_seq_backwards.py",
            Fault::WrongRevision => "wrong_revision.py",
        }
    }
}

/// A [`Launch`] that starts a fresh fake Tick, as a task, for each session.
pub struct FakeLaunch(pub Fault);

impl Launch for FakeLaunch {
    fn launch(
        &self,
        _opts: tickbox_sandbox::LaunchOptions,
    ) -> BoxFuture<'_, Result<TickIo, LaunchError>> {
        let fault = self.0;
        Box::pin(async move { Ok(start(fault)) })
    }
}

/// Starts one fake Tick; returns the host's end.
pub fn start(fault: Fault) -> TickIo {
    let (io, tick) = memory::pair();
    tokio::spawn(serve(fault, tick));
    io
}

/// A tool's required args and its one property with its type check.
type ArgCheck = (
    &'static [&'static str],
    Option<(&'static str, fn(&Value) -> bool)>,
);

/// A JSON-RPC error the fake answers with.
struct RpcError(i64, &'static str);

struct Fake {
    fault: Fault,
    stdout: DuplexStream,
    seq: u64,
    value: i64,
}

/// Runs the fake until it exits by itself, the host terminates it, or an
/// uncaught SIGTERM ends it.
async fn serve(fault: Fault, tick: MemoryTick) {
    let MemoryTick {
        stdin,
        stdout,
        size,
        control,
        ..
    } = tick;
    let caught = fault == Fault::IgnoresSigterm;
    if caught {
        control.catch_sigterm();
    }
    let mut fake = Fake {
        fault,
        stdout,
        seq: 0,
        value: 0,
    };
    let uncaught_sigterm = async {
        if caught {
            std::future::pending::<()>().await
        } else {
            control.sigterm().await
        }
    };
    let status = tokio::select! {
        status = fake.run(stdin, size) => status,
        _ = control.terminated() => return,
        _ = uncaught_sigterm => return,
    };
    // Exiting closes stdout first, as a process's end does.
    drop(fake);
    control.exit(status);
}

fn line(frame: Value) -> String {
    let mut f = json!({"jsonrpc": "2.0"});
    if let (Some(out), Value::Object(body)) = (f.as_object_mut(), frame) {
        out.extend(body);
    }
    format!("{f}\n")
}

impl Fake {
    async fn write(&mut self, raw: &str) {
        // A host that stopped reading is the host's business; like a
        // process blocked on a full pipe, the fake then waits to be ended.
        let _ = self.stdout.write_all(raw.as_bytes()).await;
        let _ = self.stdout.flush().await;
    }

    async fn send(&mut self, frame: Value) {
        self.write(&line(frame)).await;
    }

    fn data(&self) -> Value {
        if self.fault == Fault::BigState {
            let log: Vec<String> = (0..500).map(|i| format!("entry {i:04}")).collect();
            json!({"value": self.value, "log": log})
        } else {
            json!({"value": self.value})
        }
    }

    fn state(&self) -> Value {
        json!({"seq": self.seq, "data": self.data()})
    }

    async fn change(&mut self, delta: i64) {
        self.value += delta;
        match self.fault {
            Fault::NullUpdate => {
                self.seq += 1;
                let params = json!({"seq": self.seq, "data": null});
                self.send(json!({"method": "tick/update", "params": params}))
                    .await;
            }
            Fault::UpdateSeqBackwards => {
                // As if two threads raced: the newer state goes out first.
                self.seq += 2;
                let newer = self.state();
                let older = json!({"seq": self.seq - 1, "data": self.data()});
                self.send(json!({"method": "tick/update", "params": newer}))
                    .await;
                self.send(json!({"method": "tick/update", "params": older}))
                    .await;
            }
            _ => {
                self.seq += 1;
                let params = self.state();
                self.send(json!({"method": "tick/update", "params": params}))
                    .await;
            }
        }
    }

    fn descriptor(&self) -> Value {
        let no_args = json!({"type": "object", "additionalProperties": false});
        json!({
            "protocol": if self.fault == Fault::ProtocolTwo { 2 } else { 3 },
            "kind": if self.fault == Fault::KindNaming { "BaseTick" } else { "test.base" },
            "title": "Base",
            "description": "A conforming Tick for checker tests.",
            "revision": "1",
            "tools": [
                {"name": "peek", "description": "Return the value.", "input_schema": no_args,
                 "mutates": false},
                {"name": "echo", "description": "Return the text.", "mutates": false,
                 "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                                  "required": ["text"], "additionalProperties": false}},
                {"name": "add", "description": "Add an integer to the value.", "mutates": true,
                 "input_schema": {"type": "object", "properties": {"amount": {"type": "integer"}},
                                  "required": ["amount"], "additionalProperties": false}},
            ],
            "recover_with": if self.fault == Fault::RecoverMutating { "add" } else { "peek" },
        })
    }

    /// The hand-written args check equivalent to the schemas.
    fn validate(&self, tool: &str, args: &Value) -> Result<(), RpcError> {
        let known = matches!(tool, "peek" | "echo" | "add");
        match self.fault {
            Fault::NoArgCheck => {
                return if known {
                    Ok(())
                } else {
                    Err(RpcError(-32602, "unknown tool"))
                };
            }
            Fault::UnknownTool if !known => return Err(RpcError(-32000, "no such tool")),
            _ => {}
        }
        let (required, prop): ArgCheck = match tool {
            "peek" => (&[], None),
            "echo" => (&["text"], Some(("text", Value::is_string))),
            "add" => (&["amount"], Some(("amount", |v| v.is_i64() || v.is_u64()))),
            _ => return Err(RpcError(-32602, "unknown tool")),
        };
        let Some(args) = args.as_object() else {
            return Err(RpcError(-32602, "bad args"));
        };
        let fits = required.iter().all(|k| args.contains_key(*k))
            && args.iter().all(|(k, v)| match prop {
                Some((name, ok)) => k == name && ok(v),
                None => false,
            });
        if fits {
            Ok(())
        } else {
            Err(RpcError(-32602, "bad args"))
        }
    }

    async fn call(&mut self, params: &Value) -> Result<Value, RpcError> {
        if self.fault != Fault::WrongRevision && params.get("revision") != Some(&json!("1")) {
            return Err(RpcError(-32004, "the tool catalog changed"));
        }
        let tool = params.get("tool").and_then(Value::as_str).unwrap_or("");
        let args = params.get("args").cloned().unwrap_or_else(|| json!({}));
        self.validate(tool, &args)?;
        match tool {
            "peek" => {
                if self.fault == Fault::MutatesDishonest {
                    self.change(1).await;
                }
                Ok(json!({"value": self.value}))
            }
            "echo" => Ok(json!({"text": args.get("text")})),
            _ => {
                let amount = args.get("amount").and_then(Value::as_i64).unwrap_or(0);
                self.change(amount).await;
                if self.fault == Fault::RefusesAfterActing {
                    return Err(RpcError(-32602, "amount out of range"));
                }
                Ok(json!({"value": self.value}))
            }
        }
    }

    async fn handle(&mut self, method: &str, params: &Value) -> Result<Value, RpcError> {
        match method {
            "tick/describe" => {
                if self.fault == Fault::DescribeSideEffect {
                    self.change(0).await;
                }
                Ok(self.descriptor())
            }
            "tick/read" if self.fault == Fault::ReadBelowUpdate => {
                Ok(json!({"seq": 0, "data": {"value": 0}}))
            }
            "tick/read" => Ok(self.state()),
            "tick/call" => self.call(params).await,
            _ if self.fault == Fault::UnknownMethod => Err(RpcError(-32600, "invalid request")),
            _ => Err(RpcError(-32601, "unknown method")),
        }
    }

    /// The response frame for one request.
    async fn answer(&mut self, id: u64, method: &str, params: &Value) -> Value {
        let mut frame = match self.handle(method, params).await {
            Ok(result) => json!({"id": id, "result": result}),
            Err(RpcError(code, message)) => {
                json!({"id": id, "error": {"code": code, "message": message}})
            }
        };
        if self.fault == Fault::BothResultError && !method.starts_with("tick/") {
            frame["result"] = Value::Null;
        }
        frame
    }

    /// `(id, method, params)`, or `None` for a line to discard (§3.2).
    fn parse(line: &[u8]) -> Option<(u64, String, Value)> {
        let req: Value = serde_json::from_slice(line).ok()?;
        let id = req.get("id")?.as_u64()?;
        let method = req.get("method")?.as_str()?.to_string();
        let params = match req.get("params") {
            Some(p @ Value::Object(_)) => p.clone(),
            _ => Value::Object(Map::new()),
        };
        Some((id, method, params))
    }

    async fn on_garbage(&mut self) {
        let error = json!({"code": -32700, "message": "parse error"});
        match self.fault {
            Fault::GarbageReply => self.send(json!({"id": 0, "error": error})).await,
            Fault::NullIdReply => self.send(json!({"id": null, "error": error})).await,
            _ => {}
        }
    }

    /// Handles the complete lines of one read, like base.py (one at a time)
    /// or interleaved.py (a burst's answers with their halves interleaved).
    async fn on_lines(&mut self, lines: Vec<Vec<u8>>) {
        if self.fault == Fault::Interleaved {
            let mut frames = Vec::new();
            for l in &lines {
                if let Some((id, method, params)) = Self::parse(l) {
                    let answer = self.answer(id, &method, &params).await;
                    frames.push(line(answer));
                }
            }
            if frames.len() < 2 {
                for f in frames {
                    self.write(&f).await;
                }
                return;
            }
            // Several threads writing without a lock: first halves, then
            // second halves (the frames are ASCII, so any split is valid).
            let (firsts, seconds): (String, String) = frames
                .iter()
                .map(|f| f.split_at(f.len() / 2))
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .unzip();
            self.write(&(firsts + &seconds)).await;
            return;
        }
        for l in lines {
            let Some((id, method, params)) = Self::parse(&l) else {
                self.on_garbage().await;
                continue;
            };
            let answer = self.answer(id, &method, &params).await;
            self.send(answer.clone()).await;
            if self.fault == Fault::DuplicateResponse && method == "tick/read" {
                self.send(answer).await;
            }
        }
    }

    async fn start(&mut self) {
        match self.fault {
            Fault::LongLine => {
                let mut l = String::with_capacity(9 * 1024 * 1024 + 8);
                l.push('[');
                for _ in 0..9 * 512 * 1024 {
                    l.push_str("1,");
                }
                l.push_str("1]\n");
                self.write(&l).await;
            }
            Fault::SendsRequest => {
                self.send(json!({"id": 1, "method": "host/ping", "params": {}}))
                    .await
            }
            Fault::StrayStdout => self.write("Starting up...\n").await,
            _ => {}
        }
    }

    /// Stdin closed: every request has been answered.
    async fn on_eof(&mut self) {
        match self.fault {
            Fault::IgnoresEof => std::future::pending().await,
            Fault::Unterminated => {
                let params = json!({"seq": self.seq + 1, "data": self.data()});
                let l = line(json!({"method": "tick/update", "params": params}));
                self.write(l.trim_end_matches('\n')).await;
            }
            _ => {}
        }
    }

    /// Reads stdin to its end; returns the exit status.
    async fn run(
        &mut self,
        mut stdin: DuplexStream,
        mut size: watch::Receiver<(u16, u16)>,
    ) -> String {
        self.start().await;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let watch_size = self.fault == Fault::ResizeUpdate;
        loop {
            tokio::select! {
                n = stdin.read(&mut chunk) => {
                    let n = match n {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let mut lines = Vec::new();
                    while let Some(at) = buf.iter().position(|b| *b == b'\n') {
                        let rest = buf.split_off(at + 1);
                        buf.pop();
                        lines.push(std::mem::replace(&mut buf, rest));
                    }
                    self.on_lines(lines).await;
                }
                Ok(()) = size.changed(), if watch_size => self.change(0).await,
            }
        }
        self.on_eof().await;
        "exit status 0".into()
    }
}
