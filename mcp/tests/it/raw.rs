//! A raw-lines client of the stdio serve loop: the facade serves one end
//! of a Unix socket pair on a runtime of its own thread (one thread, as
//! `tickbox mcp` runs over stdio, unless given workers), the test writes
//! and reads JSON-RPC lines on the other ([`LineClient`]).

use crate::{logs, Hosting, Setup, PATIENCE};
use std::ops::{Deref, DerefMut};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tickbox_mcp::{Facade, FacadeError};
use tickbox_sandbox::Launcher;
use tickbox_test_support::mcp_lines::LineClient;

/// The facade over one client's stdio, driven with raw JSON-RPC lines.
pub struct Raw {
    client: LineClient,
    /// The test's end, kept to end the facade's input (another clone of it
    /// reads, so dropping the writer alone would not).
    end: UnixStream,
    served: Option<JoinHandle<Result<(), FacadeError>>>,
}

impl Deref for Raw {
    type Target = LineClient;

    fn deref(&self) -> &LineClient {
        &self.client
    }
}

impl DerefMut for Raw {
    fn deref_mut(&mut self) -> &mut LineClient {
        &mut self.client
    }
}

impl Raw {
    /// Serves `launcher`'s Tick under its default name.
    pub fn start(launcher: Launcher) -> Raw {
        Raw::start_setup(Setup::of(vec![Hosting::shared(None, launcher)]))
    }

    /// Serves what `setup` hosts.
    pub fn start_setup(setup: Setup) -> Raw {
        Raw::start_on(setup, None)
    }

    /// Serves what `setup` hosts on a runtime of `workers` threads (none:
    /// one thread, as over stdio by default; `tickbox mcp --workers N`).
    pub fn start_on(setup: Setup, workers: Option<usize>) -> Raw {
        logs();
        let (ours, theirs) = UnixStream::pair().expect("a socket pair");
        let (ready, started) = mpsc::channel();
        let served = std::thread::spawn(move || {
            let mut builder = match workers {
                None => tokio::runtime::Builder::new_current_thread(),
                Some(n) => {
                    let mut b = tokio::runtime::Builder::new_multi_thread();
                    b.worker_threads(n);
                    b
                }
            };
            let rt = builder.enable_all().build().expect("a runtime");
            rt.block_on(async move {
                let options = setup.facade;
                let (ticks, _) = setup.host().await;
                let facade = Facade::with_options(ticks, options).await?;
                theirs.set_nonblocking(true).expect("nonblocking");
                let stream = tokio::net::UnixStream::from_std(theirs).expect("a tokio stream");
                let (read, write) = stream.into_split();
                let _ = ready.send(());
                facade.serve(read, write).await
            })
        });
        // A start that fails shows as the thread's panic or error below.
        if started.recv_timeout(PATIENCE).is_err() {
            let outcome = served.join();
            panic!("the facade did not start: {outcome:?}");
        }
        let to = ours.try_clone().expect("clone the socket");
        let from = ours.try_clone().expect("clone the socket");
        Raw {
            client: LineClient::new(to, from),
            end: ours,
            served: Some(served),
        }
    }

    /// Ends the client's input (EOF, as a client that leaves) and waits
    /// for the serve loop to return; its outcome and what was logged.
    pub fn close(mut self) -> (Result<(), FacadeError>, String) {
        let _ = self.end.shutdown(std::net::Shutdown::Write);
        let served = self.served.take().expect("served once");
        assert!(
            tickbox_test_support::eventually(PATIENCE, || served.is_finished()),
            "the serve loop did not return within {PATIENCE:?} of the client leaving"
        );
        let outcome = served.join().expect("the serve loop did not panic");
        (outcome, logs().text())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // The serve loop ends with the client's input; the Ticks with it.
        let _ = self.end.shutdown(std::net::Shutdown::Both);
    }
}
