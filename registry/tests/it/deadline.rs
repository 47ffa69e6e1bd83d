//! Every request has a total deadline: a registry on loopback that sends
//! its answer one byte every 2 s (inside every per-read bound) fails the
//! pull with one line naming the deadline; the same registry answering at
//! once succeeds under the same short deadlines.

use crate::TempDir;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tickbox_registry::layout::{self, Descriptor, Manifest};
use tickbox_registry::{Deadlines, Reference, Registry, RegistryConfig, RegistryError};

/// How the test registry answers one kind of request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pace {
    /// All at once.
    Prompt,
    /// One byte every [`DRIP`], from the status line on.
    Drip,
    /// The head at once, then the body one byte every [`DRIP`].
    DripBody,
}

/// The slow registry's pace: well inside `STALL_TIMEOUT` and
/// `RESPONSE_TIMEOUT` (30 s), so only a total deadline stops it.
const DRIP: Duration = Duration::from_secs(2);
/// The deadlines the tests give the client (through its typed config).
const SHORT: Duration = Duration::from_secs(3);

/// A registry on loopback serving one Tick (plain HTTP; the client's TLS
/// attempt is hung up on, as an HTTP server does), stopped and joined on
/// drop.
struct Server {
    port: u16,
    stop: Arc<(Mutex<bool>, Condvar)>,
    accept: Option<JoinHandle<()>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

struct Content {
    manifest: Vec<u8>,
    blobs: Vec<(String, Vec<u8>)>,
}

impl Server {
    fn start(content: Content, manifest_pace: Pace, blob_pace: Pace) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Default::default();
        let content = Arc::new(content);
        let (s, c) = (stop.clone(), connections.clone());
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if *s.0.lock().unwrap() {
                    return;
                }
                let Ok(stream) = stream else { return };
                let (content, stop) = (content.clone(), s.clone());
                c.lock().unwrap().push(std::thread::spawn(move || {
                    serve(stream, &content, manifest_pace, blob_pace, &stop)
                }));
            }
        });
        Server {
            port,
            stop,
            accept: Some(accept),
            connections,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap() = true;
        self.stop.1.notify_all();
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for c in self.connections.lock().unwrap().drain(..) {
            let _ = c.join();
        }
    }
}

fn serve(
    mut s: TcpStream,
    content: &Content,
    manifest_pace: Pace,
    blob_pace: Pace,
    stop: &(Mutex<bool>, Condvar),
) {
    let Some(head) = tickbox_test_support::read_request_head(&mut s) else {
        return;
    };
    let path = head.split(' ').nth(1).unwrap_or("").to_string();
    let (pace, status, body, kind) = if path.contains("/manifests/") {
        (
            manifest_pace,
            "200 OK",
            content.manifest.clone(),
            layout::MANIFEST_MEDIA_TYPE,
        )
    } else if let Some((_, b)) = content
        .blobs
        .iter()
        .find(|(d, _)| path.ends_with(d.as_str()))
    {
        (blob_pace, "200 OK", b.clone(), "application/octet-stream")
    } else {
        (Pace::Prompt, "404 Not Found", Vec::new(), "text/plain")
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let drip = |s: &mut TcpStream, bytes: &[u8]| {
        for b in bytes {
            if s.write_all(&[*b]).is_err() {
                return false;
            }
            // The attacker's pace; a stopping server wakes at once.
            let (lock, cvar) = stop;
            let stopped = cvar
                .wait_timeout_while(lock.lock().unwrap(), DRIP, |stopped| !*stopped)
                .unwrap();
            if *stopped.0 {
                return false;
            }
        }
        true
    };
    match pace {
        Pace::Prompt => {
            let _ = s.write_all(head.as_bytes());
            let _ = s.write_all(&body);
        }
        Pace::Drip => {
            drip(&mut s, &[head.as_bytes(), &body].concat());
        }
        Pace::DripBody => {
            if s.write_all(head.as_bytes()).is_ok() {
                drip(&mut s, &body);
            }
        }
    }
}

/// A Tick artifact: a manifest and its blobs.
fn tick() -> Content {
    let wasm = b"\0asm\x01\0\0\0".to_vec();
    let wasm_d = Descriptor::of(layout::WASM_LAYER_MEDIA_TYPE, &wasm);
    let config = layout::wasm_config(&wasm_d, true);
    let config_d = Descriptor::of(layout::WASM_CONFIG_MEDIA_TYPE, &config);
    let manifest = serde_json::to_vec(&Manifest::for_tick(&config_d, &wasm_d, None)).unwrap();
    Content {
        manifest,
        blobs: vec![
            (wasm_d.digest.to_string(), wasm),
            (config_d.digest.to_string(), config),
        ],
    }
}

fn registry(store: &TempDir) -> Registry {
    Registry::new(RegistryConfig {
        store: store.path("store"),
        deadlines: Deadlines {
            token: SHORT,
            manifest: SHORT,
            blob: SHORT,
        },
        ..Default::default()
    })
    .unwrap()
}

/// Pulls the server's Tick into a fresh store (returned: the pull's
/// files live as long as it).
async fn pull(
    server: &Server,
) -> (
    Result<tickbox_registry::Pulled, RegistryError>,
    Duration,
    TempDir,
) {
    let store = TempDir::new("deadline");
    let registry = registry(&store);
    let reference: Reference = format!("oci://127.0.0.1:{}/t/c:v1", server.port)
        .parse()
        .unwrap();
    let started = Instant::now();
    let out = registry.pull(&reference, 1 << 20, true).await;
    (out, started.elapsed(), store)
}

#[tokio::test]
async fn a_prompt_registry_is_pulled_within_short_deadlines() {
    let server = Server::start(tick(), Pace::Prompt, Pace::Prompt);
    let (pulled, _, _store) = pull(&server).await;
    let pulled = pulled.unwrap();
    assert!(pulled.fetched);
    assert_eq!(std::fs::read(&pulled.wasm).unwrap(), b"\0asm\x01\0\0\0");
}

#[tokio::test]
async fn a_registry_dripping_its_manifest_fails_at_the_manifest_deadline() {
    let server = Server::start(tick(), Pace::Drip, Pace::Prompt);
    let (e, took, _) = pull(&server).await;
    let e = e.unwrap_err();
    assert!(
        matches!(
            e,
            RegistryError::Deadline {
                bound: "MANIFEST_DEADLINE",
                ..
            }
        ),
        "{e:?}"
    );
    let line = e.to_string();
    assert!(
        line.contains("within 3 s (MANIFEST_DEADLINE)") && line.contains("a manifest request"),
        "{line}"
    );
    assert!(!line.contains('\n'));
    // The deadline stopped it, not a per-read bound (30 s) and not luck.
    assert!(took >= SHORT && took < Duration::from_secs(20), "{took:?}");
}

#[tokio::test]
async fn a_registry_dripping_a_blob_body_fails_at_the_blob_deadline() {
    let server = Server::start(tick(), Pace::Prompt, Pace::DripBody);
    let (e, took, _) = pull(&server).await;
    let e = e.unwrap_err();
    assert!(
        matches!(
            e,
            RegistryError::Deadline {
                bound: "BLOB_DEADLINE",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("(BLOB_DEADLINE)"), "{e}");
    assert!(took >= SHORT && took < Duration::from_secs(20), "{took:?}");
}
