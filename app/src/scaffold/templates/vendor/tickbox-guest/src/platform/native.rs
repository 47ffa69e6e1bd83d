//! The native event loop: a Tick started by tickbox on a PTY, or by a
//! person in their own terminal.
//!
//! Threads turn each blocking source into messages on one channel: stdin
//! lines, key bytes from the controlling terminal, and signals. The main
//! thread waits on that channel with the next timer as its timeout, so
//! protocol input, keys, resizes and timers are all handled by one thread in
//! arrival order.
//!
//! What can go wrong, and what is done about it:
//! - a stray `println!` would corrupt the protocol: stdout's descriptor is
//!   duplicated for the SDK and fd 1 is pointed at stderr before any author
//!   code runs;
//! - the terminal must not stay in cbreak mode after the Tick ends, however
//!   it ends: the original settings are kept in a static and restored on
//!   exit, on SIGTERM/SIGINT/SIGHUP and by the panic hook;
//! - no controlling terminal (a pipe, CI): the Tick runs without a view;
//! - started by a person straight from a shell (stdin is a terminal): no
//!   host is listening, so the Tick shows its view and takes keys, and
//!   speaks no protocol; Ctrl-C ends it.

use crate::dispatch::Runtime;
use crate::Tick;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Instant;

/// The size a Tick assumes when it cannot ask its terminal (§4.1).
const DEFAULT_SIZE: (u16, u16) = (120, 30);

enum Event {
    Line(Vec<u8>),
    Eof,
    Keys(Vec<u8>),
    Resize,
}

/// The terminal settings to restore: (tty fd, original termios).
static SAVED: Mutex<Option<(RawFd, libc::termios)>> = Mutex::new(None);

/// The protocol's stdout, claimed before author code runs.
pub struct Io {
    proto: Option<File>,
}

impl Io {
    /// Duplicates stdout for the protocol and points fd 1 at stderr.
    pub fn take() -> Io {
        // SAFETY: dup/dup2 on the process's own standard descriptors; the
        // new descriptor is owned by the File from here on.
        unsafe {
            let fd = libc::dup(1);
            if fd < 0 {
                return Io { proto: None };
            }
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            // If this fails, stdout stays where it was and still works.
            libc::dup2(2, 1);
            Io {
                proto: Some(File::from_raw_fd(fd)),
            }
        }
    }
}

/// Puts the terminal back as it was found; idempotent.
pub fn restore_terminal() {
    let saved = SAVED.lock().map(|mut s| s.take()).unwrap_or(None);
    if let Some((fd, termios)) = saved {
        // SAFETY: fd is the tty opened in `open_tty`, kept open for the
        // life of the process; termios is what tcgetattr returned for it.
        unsafe {
            libc::tcsetattr(fd, libc::TCSANOW, &termios);
            let show = b"\x1b[0m\x1b[?25h\r\n";
            libc::write(fd, show.as_ptr().cast(), show.len());
        }
    }
}

/// The controlling terminal in cbreak mode (no line buffering, no echo;
/// Ctrl-C still raises SIGINT), or None when there is none.
fn open_tty() -> Option<File> {
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .ok()?;
    let fd = tty.as_raw_fd();
    // SAFETY: plain termios calls on a descriptor we own.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(fd, &mut t) != 0 {
            return None;
        }
        if let Ok(mut s) = SAVED.lock() {
            *s = Some((fd, t));
        }
        let mut raw = t;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        libc::tcsetattr(fd, libc::TCSANOW, &raw);
    }
    Some(tty)
}

fn tty_size(fd: RawFd) -> (u16, u16) {
    // SAFETY: TIOCGWINSZ fills a winsize we own.
    unsafe {
        let mut ws: libc::winsize = std::mem::zeroed();
        if libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0 {
            (ws.ws_col, ws.ws_row)
        } else {
            DEFAULT_SIZE
        }
    }
}

/// Runs the Tick until stdin ends, it quits, or a signal ends it.
pub fn run<T: Tick>(tick: T, io: Io) {
    let (tx, rx) = mpsc::channel::<Event>();

    // Started by a person in their terminal (stdin is that terminal): there
    // is no host, and the terminal's input is keys, not protocol. Reading it
    // as protocol too would race the key reader for every keystroke, and
    // protocol output would scribble over the view, so both are off.
    // SAFETY: isatty only inspects the descriptor.
    let standalone = unsafe { libc::isatty(0) } == 1;
    if !standalone {
        let stdin_tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("tick-stdin".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                let mut input = stdin.lock();
                // The protocol crate's framer: the host's line limit, and a
                // line over it ends input (the stream cannot resynchronise).
                let mut framer = tickbox_protocol::framing::LineFramer::new();
                let mut chunk = vec![0u8; tickbox_protocol::framing::READ_CHUNK];
                'read: loop {
                    let n = match input.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    framer.push(&chunk[..n]);
                    loop {
                        match framer.next_line() {
                            Ok(Some(mut line)) => {
                                line.push(b'\n');
                                if stdin_tx.send(Event::Line(line)).is_err() {
                                    return;
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                crate::log!("{}: {e}", T::KIND);
                                break 'read;
                            }
                        }
                    }
                }
                let _ = stdin_tx.send(Event::Eof);
            });
        if spawned.is_err() {
            crate::log!("{}: cannot start the stdin reader", T::KIND);
            std::process::exit(1);
        }
    }

    let tty = open_tty();
    let size = tty
        .as_ref()
        .map(|t| tty_size(t.as_raw_fd()))
        .unwrap_or(DEFAULT_SIZE);
    let tty_fd = tty.as_ref().map(|t| t.as_raw_fd());
    let mut draw_sink: Option<crate::draw::Sink> = None;
    if let Some(tty) = tty {
        if let Ok(mut reader) = tty.try_clone() {
            let keys_tx = tx.clone();
            let _ = std::thread::Builder::new()
                .name("tick-keys".into())
                .spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = reader.read(&mut buf) {
                        if n == 0 || keys_tx.send(Event::Keys(buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                });
        }
        let mut writer = tty;
        draw_sink = Some(Box::new(move |bytes: &[u8]| {
            let _ = writer.write_all(bytes);
        }));
    }

    match signal_hook::iterator::Signals::new([
        libc::SIGWINCH,
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
    ]) {
        Ok(mut signals) => {
            let sig_tx = tx.clone();
            let _ = std::thread::Builder::new()
                .name("tick-signals".into())
                .spawn(move || {
                    for sig in signals.forever() {
                        if sig == libc::SIGWINCH {
                            let _ = sig_tx.send(Event::Resize);
                        } else {
                            // §4.5: exit promptly; important data was saved
                            // when it changed, not here.
                            restore_terminal();
                            std::process::exit(128 + sig);
                        }
                    }
                });
        }
        Err(e) => crate::log!("{}: signals unavailable: {e}", T::KIND),
    }
    drop(tx);

    let out: crate::dispatch::Output = match io.proto {
        _ if standalone => Box::new(|_: &[u8]| Ok(())),
        Some(mut f) => Box::new(move |frame: &[u8]| f.write_all(frame)),
        None => Box::new(|frame: &[u8]| {
            let mut out = std::io::stdout().lock();
            out.write_all(frame)?;
            out.flush()
        }),
    };
    let report: crate::dispatch::Report = Box::new(|msg: &str| crate::log!("{msg}"));
    let mut rt = Runtime::new(tick, size, out, report, draw_sink);

    while !rt.done() {
        let event = match rt.next_deadline() {
            Some(due) => match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(e) => Some(e),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(e) => Some(e),
                Err(_) => break,
            },
        };
        match event {
            Some(Event::Line(bytes)) => rt.framed_line(&bytes),
            // §4.5: stdin EOF means the host is done with us. Calls run to
            // completion before their response, so none is in flight here.
            Some(Event::Eof) => break,
            Some(Event::Keys(bytes)) => rt.keys(&bytes),
            Some(Event::Resize) => {
                let (cols, rows) = tty_fd.map(tty_size).unwrap_or(DEFAULT_SIZE);
                rt.resize(cols, rows);
            }
            None => {}
        }
        rt.timers(Instant::now());
    }
    restore_terminal();
    std::process::exit(0);
}
