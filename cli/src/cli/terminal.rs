//! The person's terminal while it is a view: raw mode, its size, and putting
//! everything back.
//!
//! [`RawMode::enter`] saves the terminal settings, switches to raw mode (keys
//! arrive byte by byte, Ctrl-C is a key for the Tick rather than SIGINT),
//! switches to the alternate screen ([`ENTER`]) and points fd 2 at
//! /dev/null, so no log line lands in the middle of the Tick's screen. Keys
//! typed before (while the Tick starts) stay queued for the view. Everything
//! is restored when the guard drops ([`LEAVE`]: attributes, cursor, the
//! shell's screen), and by a panic hook (a panic must not leave the shell
//! unusable); the view loop turns SIGTERM, SIGHUP and SIGINT into a normal
//! return, so those paths go through the guard too. The view itself only
//! ever writes the renderer's sequences (positions, colors, erase, cursor
//! visibility), so no other mode can be left behind.

use std::sync::Mutex;
use tickbox_runtime::util::lock;

/// What a view writes on entering: the alternate screen, cleared.
pub const ENTER: &[u8] = b"\x1b[?1049h\x1b[H\x1b[2J";
/// What it writes on leaving: default attributes, a visible cursor, the
/// shell's screen back.
pub const LEAVE: &[u8] = b"\x1b[0m\x1b[?25h\x1b[?1049l";

/// What must be put back: the terminal settings of fd 0, the real fd 2,
/// and whether fd 1 is on the alternate screen.
struct Saved {
    termios: libc::termios,
    stderr: Option<i32>,
    alternate: bool,
}

/// Writes all of `bytes` to fd 1 with plain write(2) (usable in a panic hook).
fn write_stdout(bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: writes from a buffer we own, of its length.
        let n = unsafe { libc::write(1, rest.as_ptr().cast(), rest.len()) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// The terminal's settings before this process changed them. Process-wide
/// because the terminal is: the panic hook and the signal path that put it
/// back run where no value can be handed to them.
static SAVED: Mutex<Option<Saved>> = Mutex::new(None);

/// Puts the terminal back, once; safe to call from a panic hook.
fn restore() {
    let mut slot = lock(&SAVED);
    if let Some(saved) = slot.take() {
        // SAFETY: plain syscalls on fds this process owns; the termios value
        // came from tcgetattr on the same fd.
        if saved.alternate {
            write_stdout(LEAVE);
        }
        unsafe {
            libc::tcsetattr(0, libc::TCSADRAIN, &saved.termios);
            if let Some(fd) = saved.stderr {
                libc::dup2(fd, 2);
                libc::close(fd);
            }
        }
    }
}

/// Raw mode on the controlling terminal for as long as it lives.
pub struct RawMode(());

impl RawMode {
    /// Enters raw mode; `None` when stdin is not a terminal (nothing to do).
    pub fn enter() -> std::io::Result<Option<RawMode>> {
        // SAFETY: isatty/tcgetattr/tcsetattr/dup/dup2/open are plain syscalls
        // on fds 0 and 2; the termios struct is fully written by tcgetattr.
        unsafe {
            if libc::isatty(0) != 1 {
                return Ok(None);
            }
            let mut termios: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut termios) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut raw = termios;
            libc::cfmakeraw(&mut raw);
            let stderr = if libc::isatty(2) == 1 {
                let saved = libc::dup(2);
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if saved >= 0 && null >= 0 {
                    libc::dup2(null, 2);
                    libc::close(null);
                    Some(saved)
                } else {
                    None
                }
            } else {
                None
            };
            let alternate = libc::isatty(1) == 1;
            *lock(&SAVED) = Some(Saved {
                termios,
                stderr,
                alternate,
            });
            install_panic_hook();
            // TCSANOW, not TCSAFLUSH: keys typed while the Tick started are
            // kept for it.
            if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
                let e = std::io::Error::last_os_error();
                restore();
                return Err(e);
            }
            if alternate {
                write_stdout(ENTER);
            }
        }
        Ok(Some(RawMode(())))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        restore();
    }
}

fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The terminal's size as (cols, rows), from stdout or stdin.
pub fn size() -> Option<(u16, u16)> {
    for fd in [1, 0] {
        // SAFETY: TIOCGWINSZ writes a winsize into the struct we pass.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        if unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0 && ws.ws_col > 0 {
            return Some((ws.ws_col, ws.ws_row));
        }
    }
    None
}
