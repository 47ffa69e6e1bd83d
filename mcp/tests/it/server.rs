//! The facade over Streamable HTTP in this process: [`http::serve`] on a
//! loopback port the test binds, on a runtime of its own thread (two
//! workers, as `tickbox mcp --http` runs), until the test starts the
//! drain, with `/metrics` beside it when asked ([`HttpServer::start_metered`],
//! the Ticks' audit streams counted as `tickbox mcp --metrics` counts
//! them). Tests talk to it over raw TCP (`tickbox_test_support::mcp_http`).

use crate::{logs, Hosting, Setup, PATIENCE};
use std::ops::Deref;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use tickbox_host::session::Session;
use tickbox_mcp::http::metrics::MetricsEndpoint;
use tickbox_mcp::http::{self, Drained, HttpOptions};
use tickbox_mcp::Facade;
use tickbox_sandbox::Launcher;
use tickbox_test_support::mcp_http::Endpoint;
use tokio::sync::oneshot;

/// The token every server here wants: the CLI always has one too.
const TOKEN: &str = "test-token-0123456789abcdef0123456789abcdef";

/// The token `/metrics` wants (not MCP's, as in the CLI).
pub const METRICS_TOKEN: &str = "metrics-token-0123456789abcdef0123456789";

/// Where `/metrics` is served beside MCP.
pub struct Page {
    /// Its loopback port.
    pub port: u16,
    /// The token a scraper sends as `Authorization: Bearer`.
    pub token: String,
}

/// A facade served over HTTP; drained when dropped.
pub struct HttpServer {
    endpoint: Endpoint,
    /// `/metrics`, when served ([`HttpServer::start_metered`]).
    pub page: Option<Page>,
    /// The sessions the host started, in the Ticks' order (a live client
    /// calls through them, by the Tick's own tool names); a Tick left to
    /// its first use has none.
    pub sessions: Vec<Arc<Session>>,
    /// The runtime serving them, to call through a session on.
    pub runtime: tokio::runtime::Handle,
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
        HttpServer::start_setup(Setup::of(vec![Hosting::shared(None, launcher)]), options)
    }

    /// These Ticks, each under its name (none: its default), with
    /// `/metrics` on a port of its own counting them, as `tickbox mcp
    /// --http … --metrics 0` serves them.
    pub fn start_metered(ticks: Vec<(Option<&'static str>, Launcher)>) -> HttpServer {
        let ticks = ticks
            .into_iter()
            .map(|(name, l)| Hosting::shared(name, l))
            .collect();
        let setup = Setup {
            metered: true,
            ..Setup::of(ticks)
        };
        HttpServer::start_setup(setup, |_| {})
    }

    /// What `setup` hosts (with `/metrics` when metered) under the default
    /// options changed by `options`.
    pub fn start_setup(setup: Setup, options: impl FnOnce(&mut HttpOptions)) -> HttpServer {
        logs();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("its address").to_string();
        let page_listener = setup
            .metered
            .then(|| std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback"));
        let page = page_listener.as_ref().map(|l| Page {
            port: l.local_addr().expect("its address").port(),
            token: METRICS_TOKEN.to_string(),
        });
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
                let facade_options = setup.facade;
                let (hosted_ticks, registry) = setup.host().await;
                let sessions: Vec<Arc<Session>> = hosted_ticks
                    .iter()
                    .filter_map(|t| t.session.clone())
                    .collect();
                if let Some(l) = page_listener {
                    l.set_nonblocking(true)?;
                    opts.metrics = Some(MetricsEndpoint {
                        listener: tokio::net::TcpListener::from_std(l)?,
                        token: METRICS_TOKEN.to_string(),
                        metrics: registry,
                    });
                }
                let facade = Facade::with_options(hosted_ticks, facade_options)
                    .await
                    .map_err(std::io::Error::other)?;
                listener.set_nonblocking(true)?;
                let listener = tokio::net::TcpListener::from_std(listener)?;
                let _ = ready.send((sessions, tokio::runtime::Handle::current()));
                let stop = async {
                    let _ = stopped.await;
                };
                let drained = http::serve(facade.clone(), listener, opts, stop).await;
                facade.shutdown().await;
                drained
            })
        });
        let Ok((sessions, runtime)) = started.recv_timeout(PATIENCE) else {
            let outcome = served.join();
            panic!("the facade did not start: {outcome:?}");
        };
        HttpServer {
            endpoint: Endpoint {
                addr,
                token: Some(token),
            },
            page,
            sessions,
            runtime,
            stop: Some(stop),
            served: Some(served),
            exited: None,
        }
    }

    /// Calls `tool` of the `n`th hosted Tick straight through its
    /// session, as a live client (`tickbox call @NAME`) does: by the
    /// Tick's own name, its catalog read afresh first. The result, or
    /// why the call failed.
    pub fn call_through(
        &self,
        n: usize,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let session = self.sessions[n].clone();
        self.runtime.block_on(async move {
            let catalog = session.describe().await.map_err(|e| e.to_string())?;
            let call = catalog.prepare(tool, args).map_err(|e| e.to_string())?;
            match session.call(&call).await {
                tickbox_telemetry::outcome::CallOutcome::Ok(v) => Ok(v),
                other => Err(format!("{other:?}")),
            }
        })
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
