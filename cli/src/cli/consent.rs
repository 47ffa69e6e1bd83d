//! Consent: what a wasm Tick's manifest (`NAME.tick.toml`) asks for is
//! granted only under a person's approval of that exact content.
//!
//! Before a Tick with a manifest starts, [`for_file`] hashes its bytes once
//! and asks the trust store ([`consent`]) about that digest. Covered: the
//! requests are granted (merged with the flags) and the start is pinned to
//! the digest, so a file swapped after the decision cannot run under it.
//! Not covered: on a terminal, tickbox draws its own prompt on `/dev/tty`
//! before anything of the Tick runs, throws away whatever was typed before
//! it appeared (`tcflush`, just before drawing it), and reads y/u/N; with nobody to ask (no
//! terminal, `tickbox mcp`, `tickbox test`) it refuses with one line that
//! names `tickbox trust PATH` (exit 2). Every string from the manifest is
//! printed through the one text policy (`text::escape`).
//!
//! A Tick without a manifest (or one asking for nothing) runs as before:
//! no prompt, no trust store.
//!
//! The decision itself is `tickbox_app::consent`'s; this module is the
//! terminal half: [`Terminal`], the [`Approver`] the app calls when a
//! person may answer.

use super::exit::Exit;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
pub use tickbox_app::consent::{approval, Answer, Approver, Asking, Subject, Unanswered};
use tickbox_runtime::backend::wasm::consent::{request_lines, Verdict};
use tickbox_runtime::text;

/// Why `tickbox mcp` never asks.
pub const NOBODY_MCP: &str = "tickbox mcp never asks: an MCP client cannot approve grants";
/// Why `tickbox test` never asks.
pub const NOBODY_TEST: &str = "tickbox test never asks";

/// Most bytes of an answer read from the terminal (`y`, `u`, `no`...).
const MAX_ANSWER_BYTES: usize = 64;

/// Asks the person on the controlling terminal (`/dev/tty`), when stdin
/// and stderr are one; the prompt's outcome is said there too.
#[derive(Default)]
pub struct Terminal {
    /// The terminal the last question was asked on, for the line that
    /// says what became of the answer.
    tty: Mutex<Option<File>>,
}

impl Terminal {
    /// Who approves for a command a person runs.
    pub fn asking() -> Asking {
        Asking::Person(Arc::new(Terminal::default()))
    }
}

impl Approver for Terminal {
    fn ask(&self, subject: &Subject, verdict: &Verdict) -> Result<Answer, Unanswered> {
        let tty = terminal().map_err(Unanswered::Nobody)?;
        let answer = ask(&tty, subject, verdict)?;
        *tickbox_runtime::util::lock(&self.tty) = Some(tty);
        Ok(answer)
    }

    fn kept(&self, approved_in: Option<&Path>) {
        let Some(tty) = tickbox_runtime::util::lock(&self.tty).take() else {
            return;
        };
        let mut tty = &tty;
        let _ = match approved_in {
            None => writeln!(tty, "tickbox: not approved; nothing was started or stored"),
            Some(dir) => writeln!(
                tty,
                "tickbox: approved; kept in {} (`tickbox trust ls`, `tickbox trust revoke`)",
                text::escape(&dir.display().to_string())
            ),
        };
    }
}

/// The trust store's directory.
pub fn trust_dir() -> Result<PathBuf, Exit> {
    super::env::trust_dir().ok_or_else(|| {
        Exit::usage(format!(
            "no trust store: set {} or HOME",
            super::env::TRUST_DIR
        ))
    })
}

fn signer(subject: &Subject) -> &str {
    subject.signer.as_deref().unwrap_or("unsigned")
}

/// The controlling terminal, when a person can answer on it.
fn terminal() -> Result<File, String> {
    // SAFETY: isatty has no preconditions.
    if unsafe { libc::isatty(0) } != 1 {
        return Err("no one can answer: stdin is not a terminal".into());
    }
    // SAFETY: as above.
    if unsafe { libc::isatty(2) } != 1 {
        return Err("no one can answer: stderr is not a terminal".into());
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open("/dev/tty")
        .map_err(|e| format!("no one can answer: cannot open /dev/tty: {e}"))
}

/// What the prompt shows: tickbox's own words, the manifest's values one
/// per line, each escaped (a value cannot end a line, move the cursor or
/// turn text around).
pub fn prompt_text(subject: &Subject, verdict: &Verdict) -> String {
    let e = |s: &str| text::escape(s);
    let mut out = String::from("\ntickbox: this Tick asks for grants before it starts\n");
    out.push_str(&format!("  tick:    {}\n", e(&subject.name)));
    out.push_str(&format!("  digest:  {}\n", subject.digest));
    out.push_str(&format!("  signer:  {}\n", e(signer(subject))));
    match verdict {
        Verdict::Again { earlier, more } if more.is_empty() => out.push_str(&format!(
            "  approved on {} for other content ({}), not kept for updates\n",
            e(&earlier.approved_at),
            earlier.digest
        )),
        Verdict::Again { earlier, more } => {
            out.push_str(&format!(
                "  approved on {} for {}; it now asks for more:\n",
                e(&earlier.approved_at),
                earlier.digest
            ));
            for m in more {
                out.push_str(&format!("    + {}\n", e(m)));
            }
        }
        _ => {}
    }
    out.push_str("  it asks for (the manifest's words, one per line):\n");
    for line in request_lines(&subject.requested) {
        out.push_str(&format!("    {}\n", e(&line)));
    }
    if !subject.requested.dir.is_empty() {
        out.push_str(
            "  a dir is a path inside the Tick: it sees a host directory there only where you map one with --dir HOST::GUEST\n",
        );
    }
    out.push_str(
        "Grant these? y = yes, u = yes and for later versions of this Tick asking for no more, N = no [y/u/N]: ",
    );
    out
}

/// Draws the prompt on the terminal, discards what was typed before it
/// appeared, and reads one line.
fn ask(tty: &File, subject: &Subject, verdict: &Verdict) -> Result<Answer, Unanswered> {
    let cannot = |e: std::io::Error| Unanswered::Failed(e.to_string());
    // From before the prompt is drawn until it is answered, Ctrl-C ends it.
    let interrupt = Interrupt::catch().map_err(cannot)?;
    // Keys typed before the prompt was drawn (a `y` meant for something
    // else, or typed ahead by a script) must not answer it. The flush comes
    // before the drawing: flushing after it would also throw away an answer
    // typed the moment the prompt appeared, and the prompt would then wait
    // for a second answer nobody knows to give.
    // SAFETY: tcflush on a terminal fd we hold.
    if unsafe { libc::tcflush(tty.as_raw_fd(), libc::TCIFLUSH) } != 0 {
        return Err(cannot(std::io::Error::last_os_error()));
    }
    let mut w = tty;
    w.write_all(prompt_text(subject, verdict).as_bytes())
        .and_then(|()| w.flush())
        .map_err(cannot)?;
    let line = read_line(tty, &interrupt).map_err(|e| {
        if e.kind() == std::io::ErrorKind::Interrupted {
            Unanswered::Interrupted
        } else {
            cannot(e)
        }
    })?;
    Ok(match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Answer::Yes { updates: false },
        "u" | "updates" => Answer::Yes { updates: true },
        _ => Answer::No,
    })
}

/// One line from the terminal, at most [`MAX_ANSWER_BYTES`]; Ctrl-C
/// (SIGINT), SIGTERM or SIGHUP caught by `interrupt` ends the wait with
/// `Interrupted`.
fn read_line(tty: &File, interrupt: &Interrupt) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut tty = tty;
    while line.len() < MAX_ANSWER_BYTES {
        let mut fds = [
            libc::pollfd {
                fd: tty.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: interrupt.read_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: poll on two pollfds we own.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue; // the pipe says whether it was one of ours
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        let mut buf = [0u8; MAX_ANSWER_BYTES];
        let n = tty.read(&mut buf)?;
        if n == 0 {
            break;
        }
        line.extend_from_slice(&buf[..n]);
        if line.contains(&b'\n') || line.contains(&b'\r') {
            break;
        }
    }
    let end = line
        .iter()
        .position(|b| *b == b'\n' || *b == b'\r')
        .unwrap_or(line.len());
    Ok(String::from_utf8_lossy(&line[..end]).into_owned())
}

/// The write end of [`Interrupt`]'s pipe, for its signal handler.
/// Process-wide because signal handlers are: a handler receives no value,
/// so what it writes to must be found in a static.
static INTERRUPT_FD: AtomicI32 = AtomicI32::new(-1);

/// The signals that end a prompt.
const PROMPT_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// While a prompt waits, these signals write a byte to a pipe the wait
/// polls, whichever thread takes them (the self-pipe trick). Waiting on
/// the terminal alone would race: a signal handled between drawing the
/// prompt and entering `poll` (tokio's handler records it for a task that
/// cannot run while the prompt blocks) leaves `poll` waiting for Enter.
/// Dropping it puts the previous handlers back, exactly as they were.
struct Interrupt {
    read: File,
    _write: File,
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

extern "C" fn on_prompt_signal(_: libc::c_int) {
    let fd = INTERRUPT_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write is async-signal-safe; the fd is a non-blocking pipe
        // kept open until the handlers are restored.
        unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
    }
}

impl Interrupt {
    fn catch() -> std::io::Result<Interrupt> {
        use std::os::fd::FromRawFd;
        let mut fds = [0i32; 2];
        // SAFETY: pipe2 writes two fds into the array we pass.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both fds are fresh and owned by these Files alone.
        let (read, write) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        INTERRUPT_FD.store(write.as_raw_fd(), Ordering::SeqCst);
        let mut previous = Vec::new();
        for sig in PROMPT_SIGNALS {
            // SAFETY: a zeroed sigaction is a valid value to fill in; the
            // handler only calls write.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_prompt_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut old) == 0 {
                    previous.push((sig, old));
                }
            }
        }
        Ok(Interrupt {
            read,
            _write: write,
            previous,
        })
    }

    fn read_fd(&self) -> i32 {
        self.read.as_raw_fd()
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: puts back the action sigaction returned for this signal.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
        // After the handlers are back: none can write to a closed fd.
        INTERRUPT_FD.store(-1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickbox_runtime::backend::wasm::{GrantSpec, WasmDigest};

    #[test]
    fn manifest_text_is_inert_on_the_prompt() {
        let mut requested = GrantSpec::default();
        requested
            .env
            .push("GREETING=hi\x1b]0;pwned\x07\u{202e}txt.exe\ntickbox: approved".into());
        requested.dir.push("/data\r\x1b[2K:ro".into());
        let subject = Subject {
            name: "/t/a\x1b[31m.wasm".into(),
            digest: WasmDigest::of(b"x"),
            signer: None,
            requested,
            approve_as: None,
        };
        let shown = prompt_text(&subject, &Verdict::New);
        assert!(!shown
            .chars()
            .any(|c| c == '\x1b' || c == '\u{202e}' || c == '\r' || c == '\x07'));
        assert!(
            !shown.lines().any(|l| l.starts_with("tickbox: approved")),
            "{shown}"
        );
        assert!(
            shown.contains("\\x1b]0;pwned\\x07\\u{202e}txt.exe\\ntickbox: approved"),
            "{shown}"
        );
        assert!(shown.contains("unsigned"));
    }
}
