//! SIGINT and SIGTERM, heard once for the whole command line.
//!
//! Most commands end at the first signal: `main` drops the command's
//! future (its Tick is stopped on drop) and exits 130. A command that can
//! end gracefully (`tickbox mcp --http`, which drains) says so with
//! [`Signals::drain_on_first`]; from then on `main` waits for a second
//! signal to stop it at once, and the command acts on the first itself.
//! One listener counts every signal, so the first and the second are never
//! confused, whoever waits for them.
//!
//! **A signal is never left unheard.** All of that runs on the async
//! runtime, and a command whose thread is blocked cannot act on it: an
//! open of a FIFO no one writes (a `--policy`, an MCP `--config`, a Tick's
//! path, a CA file; before the Tick starts, where a one-shot command runs
//! on one thread) would leave SIGTERM and SIGINT unheard for ever. So a
//! [`watchdog`] thread, woken by its own action on both signals, waits
//! [`SIGNAL_HEARD_WAIT`] for someone to take each one ([`Signals::nth`]);
//! a signal nobody took by then ends the process at once, exit 130, with
//! one line. A command that acts on its signal (almost always) never
//! meets it; one whose drain is under way meets it only at a further
//! signal nobody waits for, which stops it at once, as a second signal
//! does.
//!
//! | constant | value | bounds |
//! |---|---|---|
//! | [`SIGNAL_HEARD_WAIT`] | 2 s | how long a SIGINT or SIGTERM may go untaken before the watchdog ends the process |

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
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
    /// has arrived; at once if it already has. Whoever gets it has taken
    /// it: the [`watchdog`] leaves it to them.
    pub async fn nth(&self, n: u32) -> &'static str {
        let mut seen = self.seen.clone();
        let last = seen.wait_for(|s| s.count >= n).await.map(|s| s.last);
        match last {
            Ok(last) => {
                taken(n);
                last
            }
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

/// How long a SIGINT or SIGTERM may go untaken ([`Signals::nth`]) before
/// the [`watchdog`] ends the process. Long enough for a loaded runtime to
/// get to it; short enough that a person's Ctrl-C is seen to work.
pub const SIGNAL_HEARD_WAIT: Duration = Duration::from_secs(2);

// These four are process-wide because signal dispositions are: a signal
// action runs outside any context a value could be handed to, and may only
// touch atomics (and the pipe they name); the waiters' lock is the
// process's because the signals it counts are.

/// Signals the watchdog's action has seen.
static RECEIVED: AtomicU32 = AtomicU32::new(0);
/// The last of them (its number).
static LAST: AtomicI32 = AtomicI32::new(0);
/// The highest `n` whose [`Signals::nth`] resolved, and its waiters.
static TAKEN: (Mutex<u32>, Condvar) = (Mutex::new(0), Condvar::new());
/// The watchdog's pipe: the action writes a byte, the thread reads it.
static WAKE: AtomicI32 = AtomicI32::new(-1);

fn taken(n: u32) {
    let (lock, cvar) = &TAKEN;
    let mut t = tickbox_runtime::util::lock(lock);
    *t = (*t).max(n);
    cvar.notify_all();
}

/// Starts the watchdog (once, before the command runs): a thread that
/// ends the process if a SIGINT or SIGTERM is not taken within
/// [`SIGNAL_HEARD_WAIT`] (see the module's docs). Without it (a pipe or
/// a handler that cannot be made) signals are as before.
pub fn watchdog() {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        tracing::warn!("no signal watchdog: cannot make its pipe");
        return;
    }
    WAKE.store(fds[1], Ordering::SeqCst);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the action is async-signal-safe: atomics and write(2).
        let made = unsafe {
            signal_hook_registry::register(signal, move || {
                RECEIVED.fetch_add(1, Ordering::SeqCst);
                LAST.store(signal, Ordering::SeqCst);
                let fd = WAKE.load(Ordering::SeqCst);
                if fd >= 0 {
                    // One byte from a valid buffer (this closure is already
                    // the unsafe registration's promise).
                    let _ = libc::write(fd, [0u8].as_ptr().cast(), 1);
                }
            })
        };
        if made.is_err() {
            tracing::warn!("no signal watchdog: cannot handle the signal");
            return;
        }
    }
    let read = fds[0];
    let spawned = std::thread::Builder::new()
        .name("tickbox-signals".into())
        .spawn(move || loop {
            let mut byte = [0u8; 1];
            // SAFETY: reads one byte into a valid buffer.
            let n = unsafe { libc::read(read, byte.as_mut_ptr().cast(), 1) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n <= 0 {
                return;
            }
            let k = RECEIVED.load(Ordering::SeqCst);
            let deadline = Instant::now() + SIGNAL_HEARD_WAIT;
            let (lock, cvar) = &TAKEN;
            let mut t = tickbox_runtime::util::lock(lock);
            while *t < k {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let name = match LAST.load(Ordering::SeqCst) {
                        libc::SIGINT => "SIGINT",
                        _ => "SIGTERM",
                    };
                    eprintln!(
                        "tickbox: interrupted by {name}; stopped at once: the command could not act on it within {} s (blocked, as in an open of a FIFO nobody writes)",
                        SIGNAL_HEARD_WAIT.as_secs()
                    );
                    // SAFETY: ends the process without running anything
                    // more: the command's thread is stuck and may hold
                    // what exit handlers would wait for.
                    unsafe { libc::_exit(i32::from(super::exit::INTERRUPTED)) };
                }
                t = cvar
                    .wait_timeout(t, left)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        });
    if spawned.is_err() {
        tracing::warn!("no signal watchdog: cannot start its thread");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module docs' table states the value.
    #[test]
    fn the_table_states_the_wait() {
        let doc = include_str!("signals.rs");
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("//! | [`")).collect();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].contains(&format!(
            "[`SIGNAL_HEARD_WAIT`] | {} s |",
            SIGNAL_HEARD_WAIT.as_secs()
        )));
    }
}
