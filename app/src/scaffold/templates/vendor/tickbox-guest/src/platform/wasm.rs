//! The wasm32-wasip2 event loop: one `wasi:io/poll` call over stdin, the
//! view's keys, its resize events and a monotonic-clock timer.
//!
//! The terminal comes from tickbox's `wit/terminal.wit`, bound with
//! wit-bindgen onto the `wasip2` crate's stream and pollable types, so its
//! pollables sit in the same `poll` list as stdin's.
//!
//! What can go wrong, and what is done about it:
//! - pollables are children of their streams and must be dropped first:
//!   they are created and dropped within each loop iteration;
//! - `blocking-write-and-flush` takes at most 4096 bytes a call: frames are
//!   written in chunks, which cannot interleave because this is the only
//!   thread and the only writer of stdout;
//! - a resize between reading the size and waiting is not lost: the wait is
//!   on "generation greater than the one last seen".

use crate::dispatch::Runtime;
use crate::Tick;
use std::time::Instant;
use wasip2::io::streams::StreamError;

mod bindings {
    wit_bindgen::generate!({
        world: "tick-terminal",
        path: "wit",
        with: {
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
        },
    });
}

use bindings::tickbox::terminal::terminal;

/// Largest write `blocking-write-and-flush` accepts.
const WRITE_CHUNK: usize = 4096;
/// Most bytes read from stdin per wakeup.
const READ_CHUNK: u64 = 64 * 1024;

/// Nothing to claim: a wasm Tick's stdout is only reachable through WASI.
pub struct Io;

impl Io {
    pub fn take() -> Io {
        Io
    }
}

/// The host's view has no modes to restore.
pub fn restore_terminal() {}

/// Runs the Tick until stdin ends or it quits.
pub fn run<T: Tick>(tick: T, _io: Io) {
    let stdin = wasip2::cli::stdin::get_stdin();
    let stdout = wasip2::cli::stdout::get_stdout();
    let keys = terminal::keys();
    let mut size = terminal::get_size();

    let out: crate::dispatch::Output = Box::new(move |frame: &[u8]| {
        for chunk in frame.chunks(WRITE_CHUNK) {
            stdout
                .blocking_write_and_flush(chunk)
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        }
        Ok(())
    });
    let report: crate::dispatch::Report = Box::new(|msg: &str| crate::log!("{msg}"));
    let draw: crate::draw::Sink = Box::new(|bytes: &[u8]| terminal::draw(bytes));
    let mut rt = Runtime::new(tick, (size.cols, size.rows), out, report, Some(draw));

    // The protocol crate's framer: the host's line limit, linear scanning.
    let mut framer = tickbox_protocol::framing::LineFramer::new();
    let mut eof = false;
    while !rt.done() && !eof {
        let ready = {
            let on_stdin = stdin.subscribe();
            let on_keys = keys.subscribe();
            let on_resize = terminal::subscribe_resize(size.generation);
            let on_timer = rt.next_deadline().map(|due| {
                let wait = due.saturating_duration_since(Instant::now());
                wasip2::clocks::monotonic_clock::subscribe_duration(
                    u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX),
                )
            });
            let mut list = vec![&on_stdin, &on_keys, &on_resize];
            if let Some(t) = &on_timer {
                list.push(t);
            }
            wasip2::io::poll::poll(&list)
            // The pollables drop here, before their streams can.
        };
        for i in ready {
            match i {
                0 => match stdin.read(READ_CHUNK) {
                    // The answers to this read's lines go out in one write.
                    Ok(bytes) => {
                        if let Err(e) = rt.input(&mut framer, &bytes) {
                            // A host never sends a line this long (§3.6);
                            // the stream cannot be resynchronised, so it is
                            // treated as the end of input.
                            crate::log!("{}: {e}", T::KIND);
                            eof = true;
                        }
                    }
                    // §4.5: the host closed stdin; calls finish before their
                    // response, so nothing is in flight.
                    Err(StreamError::Closed) | Err(StreamError::LastOperationFailed(_)) => {
                        eof = true
                    }
                },
                1 => {
                    if let Ok(bytes) = keys.read(4096) {
                        if !bytes.is_empty() {
                            rt.keys(&bytes);
                        }
                    }
                }
                2 => {
                    size = terminal::get_size();
                    rt.resize(size.cols, size.rows);
                }
                _ => {}
            }
        }
        rt.timers(Instant::now());
    }
    std::process::exit(0);
}
