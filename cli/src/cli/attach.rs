//! `tickbox attach ID|NAME`: the current terminal becomes a view of a live
//! Tick.
//!
//! The view runs on the alternate screen (the shell's screen comes back on
//! detach). Everything it shows is drawn by the host from the Tick's screen
//! model (see `tickbox_runtime::render`): a repaint first, so nothing waits
//! for the Tick to redraw, then the changes, and a status bar on the last
//! row unless `--no-status`. No byte the Tick wrote reaches this terminal.
//! Keys go to the Tick (Ctrl-C included, as a key), except the detach key
//! (`--detach-key`, Ctrl-] by default), which ends the view; a SIGWINCH of
//! this terminal resizes the view. Detaching never touches the Tick or its
//! protocol session. `tickbox run` ends in the same loop ([`view`]).

use super::exit::{self, Exit};
use super::terminal::{self, RawMode};
use clap::Args;
use std::process::ExitCode;
use tickbox_runtime::live::wire::{read_frame, write_frame, write_json, Frame, Reply, Request};
use tickbox_runtime::live::{client, InstanceInfo, LiveError, Registry};
use tickbox_runtime::protocol::TickText;
use tokio::io::AsyncWriteExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// Help text naming the detach key and a view's exit codes.
pub const DETACH_HELP: &str = "\
Press Ctrl-] (or the --detach-key) to detach: the view closes, the Tick keeps running
(`tickbox ls` lists it, `tickbox attach NAME` returns to it, `tickbox stop NAME` ends it).
Under `tickbox run --record FILE` the detach key is a prefix: then `m` sets a mark (the
screen becomes a snapshot in the recorded scenario), any other key, or none for 1 s, detaches.

What a view shows is drawn by tickbox from the Tick's screen (text, colors, cursor);
titles, clipboard writes, hyperlinks, queries, mouse and keyboard modes and screen
switches the Tick sends never reach this terminal. All other keys, Ctrl-C included,
go to the Tick. The Tick's terminal is as large as the smallest attached view.

Exit codes:
  0    detached, or the Tick ended
  2    usage error (e.g. a --name that is taken)
  3    the Tick could not start or initialize, or the live instance cannot be reached
  130  SIGTERM, SIGHUP or SIGINT closed the view; the Tick keeps running";

#[derive(Args)]
#[command(after_help = DETACH_HELP)]
pub struct AttachArgs {
    /// The live instance: its id or name (as `tickbox ls` shows), `@` optional
    #[arg(value_name = "ID|NAME")]
    pub target: String,
    #[command(flatten)]
    pub view: ViewOpts,
}

/// How a view looks and how it is left.
#[derive(Args, Clone)]
pub struct ViewOpts {
    /// The key that detaches (never sent to the Tick; Ctrl-] by default, as in telnet): ctrl-a … ctrl-z, ctrl-\\, ctrl-], ctrl-^ or ctrl-_ (not ctrl-[, which is Escape)
    #[arg(long, value_name = "KEY", default_value = "ctrl-]", value_parser = parse_detach_key)]
    pub detach_key: DetachKey,
    /// Hide the status bar (name, backend, size, detach key) on the last row
    #[arg(long)]
    pub no_status: bool,
    /// The mark chord is on (`tickbox run --record`): the detach key becomes
    /// a prefix, and the detach key then `m` sets a mark.
    #[arg(skip)]
    pub marks: bool,
}

/// With marks on: the key after the detach key that sets a mark.
pub const MARK_KEY: u8 = b'm';
/// With marks on: how long after the detach key another key may come
/// before the view detaches anyway.
pub const CHORD_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// A detach key: its byte and how it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct DetachKey {
    pub byte: u8,
    pub label: String,
}

/// Parses `ctrl-X` (also `C-X` and `^X`) into the control byte it types.
pub fn parse_detach_key(s: &str) -> Result<DetachKey, String> {
    let lower = s.trim().to_ascii_lowercase();
    let key = ["ctrl-", "ctrl+", "c-", "^"]
        .iter()
        .find_map(|p| lower.strip_prefix(p))
        .filter(|k| k.chars().count() == 1)
        .and_then(|k| k.chars().next());
    let byte = match key {
        Some(c @ 'a'..='z') => c as u8 - b'a' + 1,
        Some(c @ ('\\' | ']' | '^' | '_')) => c as u8 - b'@',
        _ => {
            return Err(format!(
                "`{s}` is not a detach key: use ctrl-a … ctrl-z, ctrl-\\, ctrl-], ctrl-^ or ctrl-_"
            ))
        }
    };
    let label = format!("Ctrl-{}", (byte + b'@').to_ascii_uppercase() as char);
    Ok(DetachKey { byte, label })
}

/// How a view ended.
pub enum Ending {
    /// The person pressed the detach key.
    Detached,
    /// The Tick's session ended, for this reason, with its last words.
    Ended(String, Vec<TickText>),
    /// A signal asked this view to stop.
    Signal(&'static str),
}

/// Maps a live-instance error to the documented exit codes.
pub fn exit_of(e: LiveError) -> Exit {
    super::open::exit_of(tickbox_app::live::exit_of(e))
}

/// Entry point of `tickbox attach`: its own runtime, so its signal handling
/// (restore the terminal, then exit) is not the one-shot commands'.
pub fn main(args: AttachArgs) -> ExitCode {
    let target = args.target.trim_start_matches('@').to_string();
    runtime_main(async move {
        let registry = Registry::open().map_err(exit_of)?;
        let ending = view(&registry, &target, &args.view).await?;
        finish(ending)
    })
}

/// Runs `fut` on a fresh runtime and maps its result to an exit code.
pub fn runtime_main(fut: impl std::future::Future<Output = Result<(), Exit>>) -> ExitCode {
    let runtime = match super::new_runtime(2) {
        Ok(rt) => rt,
        Err(e) => return super::fail(e),
    };
    let code = match runtime.block_on(fut) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => super::fail(e),
    };
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    code
}

/// Prints how the view ended and picks the exit code.
pub fn finish(ending: Ending) -> Result<(), Exit> {
    match ending {
        Ending::Detached => {
            eprintln!("tickbox: detached; the Tick keeps running (`tickbox ls` lists it)");
            Ok(())
        }
        Ending::Ended(reason, last_words) => {
            use tickbox_runtime::text::escape;
            eprintln!("tickbox: {}", escape(&reason));
            // The alternate screen is gone: show how the Tick's ended.
            if !last_words.is_empty() {
                eprintln!("  the Tick's last words (the end of its screen):");
                for line in &last_words {
                    eprintln!("  | {line}");
                }
            }
            Ok(())
        }
        Ending::Signal(sig) => Err(Exit::new(
            exit::INTERRUPTED,
            format!("interrupted by {sig}; the view closed, the Tick keeps running"),
        )),
    }
}

/// Attaches this terminal to the instance `target` until detach, the end of
/// the Tick, or a signal.
pub async fn view(registry: &Registry, target: &str, opts: &ViewOpts) -> Result<Ending, Exit> {
    // Signals first: a resize after the size below is read is then a
    // pending SIGWINCH the pump answers, never lost (its default action
    // is to be ignored); and none slips past the raw-mode guard.
    let mut sigs = Signals::new()?;
    let mut conn = client::connect(registry, target).await.map_err(exit_of)?;
    let (cols, rows) = view_size();
    let label = &opts.detach_key.label;
    let status = (!opts.no_status).then(|| match opts.marks {
        true => format!("{label} m mark | {label} detach"),
        false => format!("{label} detach"),
    });
    let hello = conn
        .start(Request::Attach { cols, rows, status })
        .await
        .map_err(exit_of)?;
    let info: Option<InstanceInfo> = serde_json::from_value(hello).ok();
    tracing::info!(?info, "attached");
    let raw =
        RawMode::enter().map_err(|e| Exit::session(format!("cannot set up the terminal: {e}")))?;
    let ending = pump(conn, &mut sigs, opts.detach_key.byte, opts.marks).await;
    // Raw mode off, the alternate screen left, attributes and cursor back.
    drop(raw);
    ending
}

/// This terminal's size, within the bounds a host accepts (a larger
/// terminal shows the view in its top-left corner); 0 × 0 when unknown.
fn view_size() -> (u16, u16) {
    use tickbox_runtime::view::{MAX_VIEW_COLS, MAX_VIEW_ROWS};
    terminal::size()
        .map(|(c, r)| (c.clamp(1, MAX_VIEW_COLS), r.clamp(1, MAX_VIEW_ROWS)))
        .unwrap_or((0, 0))
}

struct Signals {
    winch: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals, Exit> {
        let s =
            |kind| signal(kind).map_err(|e| Exit::session(format!("cannot handle signals: {e}")));
        Ok(Signals {
            winch: s(SignalKind::window_change())?,
            term: s(SignalKind::terminate())?,
            hup: s(SignalKind::hangup())?,
            int: s(SignalKind::interrupt())?,
        })
    }
}

/// Reads stdin on a plain thread: a blocking read must not hold a tokio
/// worker. The thread stays blocked in read(2) after the view ends; the
/// process exits right after, which ends it.
fn keys() -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel(64);
    let _ = std::thread::Builder::new()
        .name("view-keys".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                // SAFETY: reads into a buffer we own, of its length.
                let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                if n <= 0 || tx.blocking_send(buf[..n as usize].to_vec()).is_err() {
                    break;
                }
            }
        });
    rx
}

/// What the keys of one read do: bytes for the Tick and marks, in order,
/// then possibly a detach.
#[derive(Debug, PartialEq)]
enum KeyAction {
    Send(Vec<u8>),
    Mark,
    Detach,
}

/// Splits keys at the detach key. Without marks it detaches at once; with
/// marks it is a prefix (`prefixed` carries it across reads): the detach
/// key then [`MARK_KEY`] is a mark, then any other key detaches (that key
/// is not sent), and the caller detaches after [`CHORD_WAIT`] without one.
fn split_keys(bytes: &[u8], detach_key: u8, marks: bool, prefixed: &mut bool) -> Vec<KeyAction> {
    let mut out = Vec::new();
    let mut send = Vec::new();
    for &b in bytes {
        if *prefixed {
            *prefixed = false;
            if !send.is_empty() {
                out.push(KeyAction::Send(std::mem::take(&mut send)));
            }
            if b == MARK_KEY {
                out.push(KeyAction::Mark);
                continue;
            }
            out.push(KeyAction::Detach);
            return out;
        }
        if b != detach_key {
            send.push(b);
        } else if marks {
            *prefixed = true;
        } else {
            if !send.is_empty() {
                out.push(KeyAction::Send(std::mem::take(&mut send)));
            }
            out.push(KeyAction::Detach);
            return out;
        }
    }
    if !send.is_empty() {
        out.push(KeyAction::Send(send));
    }
    out
}

async fn pump(
    conn: client::Connection,
    sigs: &mut Signals,
    detach_key: u8,
    marks: bool,
) -> Result<Ending, Exit> {
    let (mut r, mut w) = conn.into_split();
    let (frames_tx, mut frames) = mpsc::channel(64);
    // Frames are read on their own task: reading one is not cancel-safe.
    let reader = tokio::spawn(async move {
        loop {
            let frame = read_frame(&mut r).await;
            let done = !matches!(frame, Ok(Some(_)));
            if frames_tx.send(frame).await.is_err() || done {
                break;
            }
        }
    });
    let mut keys = keys();
    let mut out = tokio::io::stdout();
    let mut prefixed = false;
    let mut chord_deadline = tokio::time::Instant::now();
    let lost =
        |why: String| Exit::session(format!("the connection to the Tick's host was lost: {why}"));
    let ending = loop {
        tokio::select! {
            frame = frames.recv() => match frame {
                // Generated by the host's renderer from the screen model.
                Some(Ok(Some(Frame::Output(bytes)))) => {
                    if out.write_all(&bytes).await.is_err() || out.flush().await.is_err() {
                        break Ok(Ending::Detached);
                    }
                }
                Some(Ok(Some(Frame::Json(v)))) => match serde_json::from_value::<Reply>(v) {
                    Ok(Reply::Ended { reason, last_words }) => break Ok(Ending::Ended(reason, last_words)),
                    Ok(Reply::Error { message, .. }) => break Err(Exit::session(message)),
                    _ => {}
                },
                Some(Ok(Some(Frame::Keys(_)))) => {}
                Some(Ok(None)) | None => break Err(lost("it closed the connection".into())),
                Some(Err(e)) => break Err(lost(e.to_string())),
            },
            k = keys.recv() => {
                let Some(bytes) = k else { break Ok(Ending::Detached) };
                let mut outcome = None;
                for action in split_keys(&bytes, detach_key, marks, &mut prefixed) {
                    let sent = match action {
                        KeyAction::Send(b) => write_frame(&mut w, &Frame::Keys(b)).await,
                        KeyAction::Mark => write_json(&mut w, &Reply::Mark).await,
                        KeyAction::Detach => {
                            outcome = Some(Ok(Ending::Detached));
                            break;
                        }
                    };
                    if sent.is_err() {
                        outcome = Some(Err(lost("cannot send keys".into())));
                        break;
                    }
                }
                if let Some(o) = outcome {
                    break o;
                }
                chord_deadline = tokio::time::Instant::now() + CHORD_WAIT;
            }
            _ = tokio::time::sleep_until(chord_deadline), if prefixed => break Ok(Ending::Detached),
            _ = sigs.winch.recv() => {
                let (cols, rows) = view_size();
                if cols > 0 {
                    let _ = write_json(&mut w, &Reply::Resize { cols, rows }).await;
                }
            }
            _ = sigs.term.recv() => break Ok(Ending::Signal("SIGTERM")),
            _ = sigs.hup.recv() => break Ok(Ending::Signal("SIGHUP")),
            _ = sigs.int.recv() => break Ok(Ending::Signal("SIGINT")),
        }
    };
    reader.abort();
    ending
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detach_keys() {
        let k = parse_detach_key("ctrl-]").unwrap();
        assert_eq!((k.byte, k.label.as_str()), (0x1d, "Ctrl-]"));
        assert_eq!(parse_detach_key("C-a").unwrap().byte, 1);
        assert_eq!(parse_detach_key("^Z").unwrap().byte, 26);
        assert_eq!(parse_detach_key("ctrl-_").unwrap().byte, 0x1f);
        assert_eq!(parse_detach_key("ctrl-\\").unwrap().byte, 0x1c);
        for bad in ["ctrl-[", "x", "ctrl-ab", "", "ctrl-1"] {
            assert!(parse_detach_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_detach_key_is_a_prefix_only_with_marks() {
        use KeyAction::*;
        let d = 0x1d;
        let mut p = false;
        assert_eq!(
            split_keys(b"ab\x1dm", d, false, &mut p),
            [Send(b"ab".to_vec()), Detach]
        );
        assert_eq!(
            split_keys(b"ab\x1dmc", d, true, &mut p),
            [Send(b"ab".to_vec()), Mark, Send(b"c".to_vec())]
        );
        assert!(!p);
        // Split across reads: the prefix waits for the next key.
        assert_eq!(split_keys(b"+\x1d", d, true, &mut p), [Send(b"+".to_vec())]);
        assert!(p);
        assert_eq!(split_keys(b"m", d, true, &mut p), [Mark]);
        assert_eq!(
            split_keys(b"\x1dq+", d, true, &mut p),
            [Detach],
            "q is not sent"
        );
        assert_eq!(split_keys(b"\x1d\x1d", d, true, &mut p), [Detach]);
    }
}
