//! Live instances through the library: a Tick started by [`App::open`]
//! and published as `tickbox run --name NAME` publishes it, driven through
//! its socket as `tickbox attach`, `call @NAME` and `read @NAME` drive it:
//! the Tick's terminal as large as its smallest view (SIGWINCH for a
//! native Tick, its terminal interface for a wasm one), keys from a view
//! reaching it (one huge draw split without dropping a viewer is
//! `views`), and [`call`]'s outcome against a fake host: its deadline sent,
//! a silent host or an oversized reply an unknown outcome.
//!
//! What needs the binary (real terminals, `attach`'s status bar and detach
//! key, exit codes, `watch`'s lines) is `cli/tests/it/live.rs` and
//! `views.rs`.

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use tickbox_app::live::{call, Called};
use tickbox_app::{App, Request, Session, Target};
use tickbox_host::live::wire::{read_frame, write_frame, Frame, Reply, Request as LiveRequest};
use tickbox_host::live::{client, publish, PublishOptions, Published, Registry};
use tickbox_test_support::*;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

/// Generous: the machine may be loaded (two busy cores).
const WAIT: std::time::Duration = std::time::Duration::from_secs(90);

/// A runtime of a test's own (dropped, it ends every task on it).
pub(crate) fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A view's size as the screen model takes it.
fn nonzero(n: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(n).expect("a size of at least 1")
}

/// A native Tick's request.
pub(crate) fn command(argv: Vec<String>) -> Request {
    Request::new(Target::Command(argv))
}

/// The native counter's request.
pub(crate) fn native_counter() -> Request {
    command(vec!["python3".into(), tick("counter.py")])
}

/// A Tick published as a live instance named `name`, in a registry of
/// its own, on a runtime of its own; stopped and unpublished on drop.
pub(crate) struct Hosted {
    _app: App,
    pub(crate) registry: Registry,
    name: String,
    session: Arc<Session>,
    published: Option<Published>,
    rt: Option<Runtime>,
    _dir: TempDir,
}

impl Hosted {
    /// `request`'s Tick, started and published.
    pub(crate) fn start(tag: &str, name: &str, request: Request) -> Hosted {
        let dir = TempDir::new(tag);
        let registry = Registry::at(dir.path("tickbox")).expect("a registry");
        let rt = runtime();
        let app = App::new(crate::settings(None));
        let (session, published) = rt.block_on(async {
            let tick = app.open(&request).await.expect("the Tick starts");
            let mut opts = PublishOptions::new(tick.kind.label());
            let session = Arc::new(tick.session);
            opts.name = Some(name.to_string());
            opts.registry = Some(registry.clone());
            let published = publish(session.clone(), opts).await.expect("published");
            (session, published)
        });
        Hosted {
            _app: app,
            registry,
            name: name.to_string(),
            session,
            published: Some(published),
            rt: Some(rt),
            _dir: dir,
        }
    }

    /// The native counter, published.
    pub(crate) fn counter(tag: &str, name: &str) -> Hosted {
        Hosted::start(tag, name, native_counter())
    }

    pub(crate) fn rt(&self) -> &Runtime {
        self.rt.as_ref().expect("running")
    }

    /// Views attached now, as `tickbox ls` lists them.
    pub(crate) fn views(&self) -> usize {
        self.published.as_ref().expect("published").info().views
    }

    /// The counter's value, as `tickbox read @NAME` reads it.
    pub(crate) fn value(&self) -> Value {
        self.rt().block_on(async {
            let c = client::connect(&self.registry, &self.name)
                .await
                .expect("connect");
            c.request(LiveRequest::Read).await.expect("a read")["data"]["value"].clone()
        })
    }

    /// The result of `tool` with `args`, called through the socket against
    /// the catalog's revision, as `tickbox call @NAME --yes` calls it.
    pub(crate) fn query(&self, tool: &str, args: Value) -> Value {
        self.rt().block_on(async {
            let connect = || client::connect(&self.registry, &self.name);
            let d = connect()
                .await
                .expect("connect")
                .request(LiveRequest::Describe)
                .await
                .expect("a catalog");
            let call = LiveRequest::Call {
                tool: tool.to_string(),
                args,
                revision: d["revision"].as_str().expect("a revision").to_string(),
                timeout_ms: None,
            };
            let reply = connect()
                .await
                .expect("connect")
                .request(call)
                .await
                .unwrap_or_else(|e| panic!("{tool}: {e}"));
            assert_eq!(reply["outcome"], "ok", "{tool}: {reply}");
            reply["result"].clone()
        })
    }

    /// Stops it through its socket, as `tickbox stop NAME` does.
    pub(crate) fn stop(&self) {
        self.rt().block_on(async {
            let c = client::connect(&self.registry, &self.name)
                .await
                .expect("connect");
            c.request(LiveRequest::Stop).await.expect("stopped");
        });
    }

    /// A view of `cols` × `rows`, as `tickbox attach --no-status` opens one.
    pub(crate) fn view(&self, cols: u16, rows: u16) -> Viewer {
        let (mut r, mut w) = self.rt().block_on(async {
            let mut c = client::connect(&self.registry, &self.name)
                .await
                .expect("connect");
            c.start(LiveRequest::Attach {
                cols,
                rows,
                status: None,
            })
            .await
            .expect("attached");
            c.into_split()
        });
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            nonzero(rows),
            nonzero(cols),
            0,
        )));
        let reading = self.rt().spawn({
            let screen = screen.clone();
            async move {
                while let Ok(Some(frame)) = read_frame(&mut r).await {
                    if let Frame::Output(bytes) = frame {
                        screen.lock().unwrap().process(&bytes);
                    }
                }
            }
        });
        let (to_host, mut outgoing) = mpsc::unbounded_channel::<Frame>();
        let writing = self.rt().spawn(async move {
            while let Some(frame) = outgoing.recv().await {
                if write_frame(&mut w, &frame).await.is_err() {
                    break;
                }
            }
        });
        Viewer {
            screen,
            to_host,
            tasks: [reading, writing],
        }
    }
}

impl Drop for Hosted {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.block_on(async {
                self.session.shutdown().await;
                drop(self.published.take());
            });
            rt.shutdown_timeout(WAIT);
        }
    }
}

/// One view of a live instance: what the host drew, in a screen model of
/// the test's own; keys and resizes up. Dropped, it leaves (its
/// connection closes).
pub(crate) struct Viewer {
    screen: Arc<Mutex<vt100::Parser>>,
    to_host: mpsc::UnboundedSender<Frame>,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Viewer {
    /// The screen as text.
    pub(crate) fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// Waits until the screen shows `needle`.
    pub(crate) fn shows(&self, needle: &str) {
        assert!(
            eventually(WAIT, || self.text().contains(needle)),
            "{needle:?} never appeared: {}",
            self.text()
        );
    }

    pub(crate) fn type_keys(&self, keys: &[u8]) {
        self.to_host
            .send(Frame::Keys(keys.to_vec()))
            .expect("the view is open");
    }

    pub(crate) fn resize(&self, cols: u16, rows: u16) {
        self.screen
            .lock()
            .unwrap()
            .set_size(nonzero(rows), nonzero(cols));
        let resize = serde_json::to_value(Reply::Resize { cols, rows }).unwrap();
        self.to_host
            .send(Frame::Json(resize))
            .expect("the view is open");
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[test]
fn resizing_a_view_reaches_a_native_tick_as_sigwinch() {
    let w = Hosted::start(
        "live-winch",
        "p",
        command(vec!["python3".into(), tick("probe.py")]),
    );
    let winch = || w.query("winch", json!({}));
    // The first view sets the size when it attaches.
    let _first = w.view(100, 29);
    assert!(
        eventually(WAIT, || winch()["size"] == json!([100, 29])),
        "{}",
        winch()
    );
    let before = winch()["winches"].as_u64().unwrap();
    // The smallest view decides, in each dimension.
    let view = w.view(80, 23);
    assert!(eventually(WAIT, || winch()["size"] == json!([80, 23])));
    view.resize(91, 20);
    assert!(
        eventually(WAIT, || winch()["size"] == json!([91, 20])),
        "{}",
        winch()
    );
    view.resize(120, 39);
    assert!(
        eventually(WAIT, || winch()["size"] == json!([100, 29])),
        "{}",
        winch()
    );
    assert!(
        winch()["winches"].as_u64().unwrap() >= before + 3,
        "{}",
        winch()
    );
    // When the small view leaves, the Tick grows back to the one left.
    view.resize(60, 9);
    assert!(eventually(WAIT, || winch()["size"] == json!([60, 9])));
    drop(view);
    assert!(
        eventually(WAIT, || winch()["size"] == json!([100, 29])),
        "{}",
        winch()
    );
}

#[test]
fn a_wasm_tick_gets_view_keys_and_resizes_through_its_terminal_interface() {
    let w = Hosted::start(
        "live-wasm",
        "h",
        Request::new(Target::File(hostile().into())),
    );
    assert_eq!(
        w.published.as_ref().unwrap().info().backend,
        "wasm",
        "published as a wasm Tick"
    );
    let term = || w.query("term", json!({}));
    let _first = w.view(100, 29);
    assert!(eventually(WAIT, || term()["cols"] == 100), "{}", term());
    let before = term()["generation"].as_u64().unwrap();
    let view = w.view(80, 24);
    view.shows("hostile ready");
    view.resize(91, 20);
    assert!(
        eventually(WAIT, || term()["cols"] == 91 && term()["rows"] == 20),
        "{}",
        term()
    );
    assert!(
        term()["generation"].as_u64().unwrap() >= before + 2,
        "{}",
        term()
    );
    view.type_keys(b"+-q");
    let mut keys = String::new();
    assert!(
        eventually(WAIT, || {
            keys += w.query("read_keys", json!({}))["keys"].as_str().unwrap();
            keys == "+-q"
        }),
        "{keys:?}"
    );
}

/// A fake host on a registry's socket: answers `info` and `describe` like
/// a real one, and handles `call` as the test asks; records the requests.
/// It serves on the test's runtime, and goes with it.
struct FakeHost {
    requests: Arc<Mutex<Vec<LiveRequest>>>,
}

#[derive(Clone, Copy)]
enum FakeCall {
    /// Never answers (a wedged or stopped host).
    Hang,
    /// Announces a reply larger than any frame may be.
    Oversized,
}

impl FakeHost {
    fn start(rt: &Runtime, registry: &Registry, name: &str, on_call: FakeCall) -> FakeHost {
        use tickbox_host::live::wire::{write_json, MAX_FRAME};
        let socket = registry.socket("fake01");
        let listener = rt
            .block_on(async { tokio::net::UnixListener::bind(&socket) })
            .expect("bind");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let name = name.to_string();
        rt.spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let seen = seen.clone();
                let name = name.clone();
                tokio::spawn(async move {
                    let Ok(Some(Frame::Json(v))) = read_frame(&mut conn).await else {
                        return;
                    };
                    let Ok(request) = serde_json::from_value::<LiveRequest>(v) else {
                        return;
                    };
                    seen.lock().unwrap().push(request.clone());
                    let reply = match request {
                        LiveRequest::Info => Reply::Ok(json!({
                            "id": "fake01", "name": name, "kind": "test.fake",
                            "title": "Fake", "backend": "native", "pid": 1,
                            "started": "2026-01-01T00:00:00Z", "views": 0, "seq": 0})),
                        LiveRequest::Call { .. } => match on_call {
                            FakeCall::Hang => {
                                // Never answers; the task ends with the test's runtime.
                                std::future::pending::<()>().await;
                                return;
                            }
                            FakeCall::Oversized => {
                                use tokio::io::AsyncWriteExt;
                                let mut head = vec![b'J'];
                                head.extend(((MAX_FRAME + 1) as u32).to_be_bytes());
                                let _ = conn.write_all(&head).await;
                                let _ = conn.write_all(&[b' '; 4096]).await;
                                return;
                            }
                        },
                        _ => return,
                    };
                    let _ = write_json(&mut conn, &reply).await;
                });
            }
        });
        FakeHost { requests }
    }

    fn call_timeout_ms(&self) -> Option<u64> {
        self.requests.lock().unwrap().iter().find_map(|r| match r {
            LiveRequest::Call { timeout_ms, .. } => *timeout_ms,
            _ => None,
        })
    }
}

/// `echo` of the fake host's catalog, as a client prepares it.
fn echo() -> tickbox_protocol::PreparedCall {
    tickbox_protocol::PreparedCall {
        tool: "echo".into(),
        args: json!({}),
        revision: "r1".into(),
        mutates: false,
    }
}

#[test]
fn a_live_call_sends_its_timeout_and_a_silent_host_is_an_unknown_outcome() {
    use std::time::{Duration, Instant};
    let dir = TempDir::new("live-silent");
    let registry = Registry::at(dir.path("tickbox")).expect("a registry");
    let rt = runtime();
    let fake = FakeHost::start(&rt, &registry, "fake", FakeCall::Hang);
    let t = Instant::now();
    let called = rt
        .block_on(call(&registry, "fake", echo(), Duration::from_secs(1)))
        .expect("sent");
    let elapsed = t.elapsed();
    let Called::Unknown(why) = called else {
        panic!("an outcome from a silent host: {called:?}")
    };
    assert!(why.contains("no reply within"), "{why}");
    // The host's deadline is ours; the client waits only a little longer.
    assert_eq!(fake.call_timeout_ms(), Some(1000));
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(15),
        "{elapsed:?}"
    );
}

#[test]
fn an_oversized_live_reply_is_an_unknown_outcome_not_a_session_error() {
    let dir = TempDir::new("live-oversized");
    let registry = Registry::at(dir.path("tickbox")).expect("a registry");
    let rt = runtime();
    let _fake = FakeHost::start(&rt, &registry, "fake", FakeCall::Oversized);
    let called = rt
        .block_on(call(
            &registry,
            "fake",
            echo(),
            tickbox_protocol::limits::CALL_TIMEOUT,
        ))
        .expect("sent");
    let Called::Unknown(why) = called else {
        panic!("an outcome from an oversized reply: {called:?}")
    };
    assert!(
        why.contains("the host did not deliver the outcome"),
        "{why}"
    );
    assert!(why.contains("limit"), "{why}");
}
