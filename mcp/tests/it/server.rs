//! The facade over Streamable HTTP in this process: [`http::serve`] on a
//! loopback port the test binds, on a runtime of its own thread (two
//! workers, as `tickbox mcp --http` runs), until the test starts the
//! drain. Tests talk to it over raw TCP (`tickbox_test_support::mcp_http`).

use crate::{hosted, logs, PATIENCE};
use std::ops::Deref;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tickbox_mcp::http::{self, Drained, HttpOptions};
use tickbox_mcp::{Facade, Grants};
use tickbox_sandbox::Launcher;
use tickbox_test_support::mcp_http::Endpoint;
use tokio::sync::oneshot;

/// The token every server here wants: the CLI always has one too.
const TOKEN: &str = "test-token-0123456789abcdef0123456789abcdef";

/// A facade served over HTTP; drained when dropped.
pub struct HttpServer {
    endpoint: Endpoint,
    stop: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<std::io::Result<Drained>>>,
    /// How the drain ended, once a test has waited for it.
    exited: Option<Drained>,
}

impl Deref for HttpServer {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl HttpServer {
    /// shifty.py under the default options.
    pub fn start() -> HttpServer {
        HttpServer::start_with(crate::shifty(&[]), |_| {})
    }

    /// `launcher`'s Tick under the default options changed by `options`.
    pub fn start_with(launcher: Launcher, options: impl FnOnce(&mut HttpOptions)) -> HttpServer {
        logs();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("its address").to_string();
        let mut opts = HttpOptions::new(TOKEN);
        options(&mut opts);
        let token = opts.token.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready, started) = mpsc::channel();
        let served = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async move {
                let tick = hosted(&launcher, None, Grants::default()).await;
                let facade = Facade::new(vec![tick])
                    .await
                    .map_err(std::io::Error::other)?;
                listener.set_nonblocking(true)?;
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let _ = ready.send(());
                let stop = async {
                    let _ = stopped.await;
                };
                let drained = http::serve(facade.clone(), listener, opts, stop).await;
                facade.shutdown().await;
                drained
            })
        });
        if started.recv_timeout(PATIENCE).is_err() {
            let outcome = served.join();
            panic!("the facade did not start: {outcome:?}");
        }
        HttpServer {
            endpoint: Endpoint {
                addr,
                token: Some(token),
            },
            stop: Some(stop),
            served: Some(served),
            exited: None,
        }
    }

    /// The MCP URL with the token in its query, as `tickbox mcp --http`
    /// prints it for a client.
    pub fn url(&self) -> String {
        let token = self.token.as_deref().unwrap_or_default();
        format!("http://{}/mcp?token={token}", self.addr)
    }

    /// Starts the drain (what the CLI does on SIGTERM or SIGINT).
    pub fn drain(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Whether the server has returned (without waiting).
    pub fn has_exited(&self) -> bool {
        self.served.as_ref().is_none_or(|s| s.is_finished())
    }

    /// Waits for the server to return (it must, within the tests'
    /// patience) and says how its drain ended.
    pub fn wait_exit(&mut self) -> Drained {
        if let Some(drained) = self.exited {
            return drained;
        }
        let served = self.served.take().expect("served once");
        assert!(
            tickbox_test_support::eventually(PATIENCE, || served.is_finished()),
            "the server did not return within {PATIENCE:?}"
        );
        let drained = served
            .join()
            .expect("the server did not panic")
            .expect("the server ran");
        self.exited = Some(drained);
        drained
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // A call a test left running is cut off at the drain timeout; the
        // process ends with the test anyway, so nothing waits for it.
        self.drain();
    }
}
