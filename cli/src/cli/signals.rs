//! SIGINT and SIGTERM, heard once for the whole command line.
//!
//! Most commands end at the first signal: `main` drops the command's
//! future (its Tick is stopped on drop) and exits 130. A command that can
//! end gracefully (`tickbox mcp --http`, which drains) says so with
//! [`Signals::drain_on_first`]; from then on `main` waits for a second
//! signal to stop it at once, and the command acts on the first itself.
//! One listener counts every signal, so the first and the second are never
//! confused, whoever waits for them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// The signals seen so far: how many, and the name of the last.
#[derive(Clone, Copy)]
struct Seen {
    count: u32,
    last: &'static str,
}

/// A handle on the signals the process has received (cheap to clone).
#[derive(Clone)]
pub struct Signals {
    seen: watch::Receiver<Seen>,
    drains: Arc<AtomicBool>,
}

impl Signals {
    /// Starts listening; call it inside the runtime, before the command
    /// runs. If the handlers cannot be installed, no signal is ever seen
    /// here (the process then ends as the default action says).
    pub fn listen() -> Signals {
        let (tx, seen) = watch::channel(Seen { count: 0, last: "" });
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut int), Ok(mut term)) => {
                tokio::spawn(async move {
                    loop {
                        let last = tokio::select! {
                            _ = int.recv() => "SIGINT",
                            _ = term.recv() => "SIGTERM",
                        };
                        tx.send_modify(|s| {
                            s.count += 1;
                            s.last = last;
                        });
                    }
                });
            }
            _ => tracing::warn!("cannot handle SIGINT and SIGTERM"),
        }
        Signals {
            seen,
            drains: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The command handles the first signal itself (it drains); `main`
    /// stops it only at the second.
    pub fn drain_on_first(&self) {
        self.drains.store(true, Ordering::SeqCst);
    }

    /// Resolves with the name of the `n`th signal (1 is the first) once it
    /// has arrived; at once if it already has.
    pub async fn nth(&self, n: u32) -> &'static str {
        let mut seen = self.seen.clone();
        let last = seen.wait_for(|s| s.count >= n).await.map(|s| s.last);
        match last {
            Ok(last) => last,
            // The listener is gone (the runtime shuts down): no more signals.
            Err(_) => std::future::pending().await,
        }
    }

    /// What `main` waits for before it stops a command: the first signal,
    /// or the second when the command drains on the first.
    pub async fn stopping(&self) -> &'static str {
        let first = self.nth(1).await;
        if !self.drains.load(Ordering::SeqCst) {
            return first;
        }
        self.nth(2).await
    }
}
