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

use super::exit::{self, Exit};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use tickbox_runtime::backend::wasm::consent::{
    self, asks_nothing, check_manifest, request_lines, requested_guest, Approval, TrustStore,
    Verdict,
};
use tickbox_runtime::backend::wasm::{GrantSpec, WasmDigest};
use tickbox_runtime::text;

/// Why `tickbox mcp` never asks.
pub const NOBODY_MCP: &str = "tickbox mcp never asks: an MCP client cannot approve grants";
/// Why `tickbox test` never asks.
pub const NOBODY_TEST: &str = "tickbox test never asks";

/// Most bytes of an answer read from the terminal (`y`, `u`, `no`...).
const MAX_ANSWER_BYTES: usize = 64;

/// Who can answer for a command's Tick.
#[derive(Clone, Debug, Default)]
pub enum Asking {
    /// A person at this terminal, if there is one: stdin and stderr are
    /// terminals and `/dev/tty` opens.
    #[default]
    Terminal,
    /// No one: the command serves a program (why, for the refusal line).
    Nobody(&'static str),
    /// Decided already, before this process lost its terminal (`tickbox
    /// run` decides before it forks its host); `None`: nothing asked.
    Decided(Option<Box<Decided>>),
}

/// What a decision granted: the content it was about and the requests.
#[derive(Clone, Debug)]
pub struct Decided {
    /// The bytes approved; the start is pinned to them.
    pub digest: WasmDigest,
    /// What the manifest asked for (all of it covered by an approval).
    pub requested: GrantSpec,
}

/// The Tick a decision is about.
pub struct Subject {
    /// What it is called: a local file's absolute path (a registry
    /// reference for a pulled one).
    pub name: String,
    /// Its content.
    pub digest: WasmDigest,
    /// Who vouched for the content; `None` is unsigned.
    pub signer: Option<String>,
    /// What its manifest asks for.
    pub requested: GrantSpec,
    /// What to give `tickbox trust` for it, when not `name` (a pulled
    /// Tick's pinned reference: its name has no tag or digest).
    pub approve_as: Option<String>,
}

/// What the manifest beside a wasm file may add to its grants: `None` when
/// it asks for nothing; otherwise approved now or before (or refused).
pub fn for_file(path: &Path, asking: &Asking) -> Result<Option<Decided>, Exit> {
    if let Asking::Decided(d) = asking {
        return Ok(d.as_deref().cloned());
    }
    let Some(subject) = subject_of(path, None)? else {
        return Ok(None);
    };
    decide(&subject, asking)?;
    Ok(Some(Decided {
        digest: subject.digest,
        requested: subject.requested,
    }))
}

/// The manifest beside `path`, checked, and the file's digest (`None`:
/// no manifest, or one asking for nothing). `signer`: who vouched for it.
pub fn subject_of(path: &Path, signer: Option<String>) -> Result<Option<Subject>, Exit> {
    let Some(requested) = super::open::manifest_of(path).map_err(Exit::usage)? else {
        return Ok(None);
    };
    if asks_nothing(&requested) {
        return Ok(None);
    }
    let manifest = path.with_extension("tick.toml");
    checked(&requested, &manifest.display().to_string())?;
    let name =
        std::fs::canonicalize(path).map_err(|e| Exit::usage(format!("{}: {e}", path.display())))?;
    let digest = consent::digest_file(&name)
        .map_err(|e| Exit::session(format!("cannot read {}: {e}", path.display())))?;
    Ok(Some(Subject {
        name: name.display().to_string(),
        digest,
        signer,
        requested,
        approve_as: None,
    }))
}

/// A manifest fit to be shown and approved: `origin` names it in errors.
fn checked(requested: &GrantSpec, origin: &str) -> Result<(), Exit> {
    let bad = |e: &dyn std::fmt::Display| Exit::usage(format!("{origin}: {e}"));
    check_manifest(requested).map_err(|e| bad(&e))?;
    // Everything but the directories must be grantable as written (an
    // `env NAME` that is unset here, a malformed address): said before
    // anyone is asked to approve it.
    let mut rest = requested.clone();
    rest.dir.clear();
    rest.resolve().map_err(|e| bad(&e))?;
    Ok(())
}

/// A Tick pulled from a registry: named by its reference without tag or
/// digest (the name its versions share), its wasm digest, its signer, and
/// what its requested-grants layer asks for (`None`: asks for nothing).
pub fn subject_of_pulled(
    name: String,
    pinned: String,
    digest: WasmDigest,
    signer: Option<String>,
    requested: GrantSpec,
) -> Result<Option<Subject>, Exit> {
    if asks_nothing(&requested) {
        return Ok(None);
    }
    checked(&requested, &format!("{name} (its requested grants)"))?;
    Ok(Some(Subject {
        name,
        digest,
        signer,
        requested,
        approve_as: Some(pinned),
    }))
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

/// Decides whether `subject`'s requests may be granted: `Ok` when an
/// approval covers them or the person approves them now (then stored).
pub fn decide(subject: &Subject, asking: &Asking) -> Result<(), Exit> {
    let dir = trust_dir()?;
    let store = TrustStore::open(&dir).map_err(Exit::usage)?;
    let verdict = store.verdict(
        &subject.name,
        &subject.digest,
        subject.signer.as_deref(),
        &subject.requested,
    );
    match &verdict {
        Verdict::Approved(a) | Verdict::Kept(a) => {
            tracing::info!(tick = %subject.name, digest = %subject.digest, approved_at = %a.approved_at, "requested grants approved");
            return Ok(());
        }
        Verdict::Again { .. } | Verdict::New => {}
    }
    let tty = match asking {
        Asking::Decided(_) => return Ok(()),
        Asking::Nobody(why) => return Err(refusal(subject, &verdict, why)),
        Asking::Terminal => match terminal() {
            Ok(tty) => tty,
            Err(why) => return Err(refusal(subject, &verdict, &why)),
        },
    };
    let answer = ask(&tty, subject, &verdict)?;
    let mut tty = &tty;
    match answer {
        Answer::No => {
            let _ = writeln!(tty, "tickbox: not approved; nothing was started or stored");
            Err(Exit::usage(format!(
                "{} was not approved; nothing was started or stored",
                subject.name
            )))
        }
        Answer::Yes { updates } => {
            TrustStore::approve(&dir, approval(subject, updates)).map_err(Exit::usage)?;
            let _ = writeln!(
                tty,
                "tickbox: approved; kept in {} (`tickbox trust ls`, `tickbox trust revoke`)",
                text::escape(&dir.display().to_string())
            );
            Ok(())
        }
    }
}

/// The record of a person's approval of `subject` now.
pub fn approval(subject: &Subject, updates: bool) -> Approval {
    Approval {
        name: subject.name.clone(),
        digest: subject.digest,
        signer: subject.signer.clone(),
        requested: subject.requested.clone(),
        approved_at: tickbox_runtime::util::rfc3339(std::time::SystemTime::now()),
        updates,
    }
}

/// The one line when nobody can approve: what is asked and the command
/// that approves. Manifest text in it is escaped where the line is printed.
fn refusal(subject: &Subject, verdict: &Verdict, why: &str) -> Exit {
    let what = match verdict {
        Verdict::Again { earlier, more } if more.is_empty() => format!(
            "changed since it was approved on {} ({} is now {}), and that approval was not kept for updates",
            earlier.approved_at, earlier.digest, subject.digest
        ),
        Verdict::Again { earlier, more } => format!(
            "({}) asks for more than was approved on {} for {}: {}",
            subject.digest,
            earlier.approved_at,
            earlier.digest,
            more.join(", ")
        ),
        _ => format!(
            "({}, {}) asks for grants nobody approved: {}",
            subject.digest,
            signer(subject),
            request_lines(&subject.requested).join(", ")
        ),
    };
    Exit::usage(format!(
        "{} {what}; not started: {why}; approve it with `tickbox trust {}`",
        subject.name,
        subject.approve_as.as_deref().unwrap_or(&subject.name)
    ))
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

/// A person's answer.
enum Answer {
    No,
    Yes { updates: bool },
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
fn ask(tty: &File, subject: &Subject, verdict: &Verdict) -> Result<Answer, Exit> {
    let cannot = |e: std::io::Error| Exit::usage(format!("cannot ask on the terminal: {e}"));
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
            Exit::new(
                exit::INTERRUPTED,
                "interrupted at the approval prompt; nothing was started or stored",
            )
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

/// The notices for directories a decision asked for that no `--dir`
/// maps: the host directory always comes from the person.
pub fn unmapped_dirs(requested: &GrantSpec, granted_guests: &[String]) -> Vec<String> {
    requested
        .dir
        .iter()
        .map(|d| requested_guest(d))
        .filter(|g| !granted_guests.iter().any(|have| have == g))
        .map(|g| {
            format!("the Tick asks for the directory {g}; it is not granted until you map one with --dir HOST::{g}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn unmapped_guest_dirs_are_named() {
        let requested = GrantSpec {
            dir: vec!["/data:ro".into(), "/out".into()],
            ..GrantSpec::default()
        };
        let notes = unmapped_dirs(&requested, &["/data".to_string()]);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("--dir HOST::/out"), "{notes:?}");
    }
}
