//! The person's terminal while it is a view: raw mode, its size, and putting
//! everything back.
//!
//! [`RawMode::enter`] saves the terminal settings, switches to raw mode (keys
//! arrive byte by byte, Ctrl-C is a key for the Tick rather than SIGINT) and
//! points fd 2 at /dev/null, so no log line lands in the middle of the
//! Tick's screen. Everything is restored when the guard drops, and by a
//! panic hook (a panic must not leave the shell unusable); the view loop
//! turns SIGTERM, SIGHUP and SIGINT into a normal return, so those paths go
//! through the guard too.

use std::sync::Mutex;

/// What must be put back: the terminal settings of fd 0 and the real fd 2.
struct Saved {
    termios: libc::termios,
    stderr: Option<i32>,
}

static SAVED: Mutex<Option<Saved>> = Mutex::new(None);

/// Puts the terminal back, once; safe to call from a panic hook.
fn restore() {
    let mut slot = SAVED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(saved) = slot.take() {
        // SAFETY: plain syscalls on fds this process owns; the termios value
        // came from tcgetattr on the same fd.
        unsafe {
            libc::tcsetattr(0, libc::TCSAFLUSH, &saved.termios);
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
            *SAVED.lock().unwrap_or_else(|p| p.into_inner()) = Some(Saved { termios, stderr });
            install_panic_hook();
            if libc::tcsetattr(0, libc::TCSAFLUSH, &raw) != 0 {
                let e = std::io::Error::last_os_error();
                restore();
                return Err(e);
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
