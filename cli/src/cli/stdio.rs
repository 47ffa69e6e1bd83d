//! `tickbox mcp`'s stdin and stdout as reactor-driven async streams.
//!
//! `tokio::io::stdin()` and a `tokio::fs::File` on stdout do every read and
//! write on tokio's blocking pool: each MCP request and each answer crossed
//! one more thread hand-off (a pool thread woken, then the worker woken
//! back). When stdin or stdout is a pipe or a socket — what every MCP
//! client gives a server it spawns (Python and Rust use pipes, Node a
//! socket pair) — it is set non-blocking and registered with tokio's
//! reactor instead, so a read or write happens on the worker that wants it
//! and readiness comes from epoll. Anything else (a terminal, a file) keeps
//! the blocking-pool stream.
//!
//! Setting `O_NONBLOCK` changes the open file description, which a pipe or
//! socket end shares only with processes that inherited this very fd; the
//! MCP client holds the other end, and tickbox passes neither fd to a Tick
//! (a Tick's stdio is its own pipes, and the stdout duplicate is
//! close-on-exec), so nobody else sees the change.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::{AsyncRead, AsyncWrite};

/// What kind of file an fd is, as far as this module cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Fifo,
    Socket,
    Other,
}

fn kind(fd: &impl AsRawFd) -> Kind {
    // SAFETY: fstat only writes into the zeroed struct it is given.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Kind::Other;
    }
    match st.st_mode & libc::S_IFMT {
        libc::S_IFIFO => Kind::Fifo,
        libc::S_IFSOCK => Kind::Socket,
        _ => Kind::Other,
    }
}

/// A socket end as a tokio stream (only read or write is used on it).
fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}

type Reader = Box<dyn AsyncRead + Send + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// A duplicate of `fd` (close-on-exec) that the caller owns.
fn duplicate(fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain fd syscall; the duplicate is owned by the OwnedFd alone.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` is a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

/// Clears `O_NONBLOCK` (a failed registration may have set it; the blocking
/// pool wants blocking reads and writes).
fn set_blocking(fd: i32) {
    // SAFETY: F_GETFL/F_SETFL on an open fd.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
}

/// The MCP client's requests: stdin, on the reactor when it is a pipe or a
/// socket (through a duplicate, so fd 0 itself stays open and unowned).
/// Must run inside the tokio runtime.
pub fn input() -> Reader {
    let registered = duplicate(0).and_then(|fd| -> io::Result<Option<Reader>> {
        Ok(match kind(&fd) {
            Kind::Fifo => Some(Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(
                fd,
            )?)),
            Kind::Socket => Some(Box::new(socket(fd)?)),
            Kind::Other => None,
        })
    });
    match registered {
        Ok(Some(r)) => r,
        Ok(None) => Box::new(tokio::io::stdin()),
        Err(e) => {
            tracing::debug!("stdin stays on the blocking pool: {e}");
            set_blocking(0);
            Box::new(tokio::io::stdin())
        }
    }
}

/// The MCP client's answers: `file` (the reserved duplicate of stdout), on
/// the reactor when it is a pipe or a socket. Must run inside the runtime.
pub fn output(file: File) -> io::Result<Writer> {
    let k = kind(&file);
    if k == Kind::Other {
        return Ok(Box::new(tokio::fs::File::from_std(file)));
    }
    // The stream takes `file`; a second duplicate is the way back.
    let spare = file.try_clone()?;
    let fd = OwnedFd::from(file);
    let registered: io::Result<Writer> = if k == Kind::Fifo {
        tokio::net::unix::pipe::Sender::from_owned_fd(fd).map(|s| Box::new(s) as Writer)
    } else {
        socket(fd).map(|s| Box::new(s) as Writer)
    };
    Ok(registered.unwrap_or_else(|e| {
        tracing::debug!("stdout stays on the blocking pool: {e}");
        set_blocking(spare.as_raw_fd());
        Box::new(tokio::fs::File::from_std(spare))
    }))
}
