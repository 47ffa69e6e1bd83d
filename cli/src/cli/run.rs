//! `tickbox run [OPTS] [--name N] TICK`: host one Tick with this terminal as
//! its view.
//!
//! The process splits in two before anything else starts (no runtime, no
//! threads, so `fork` is safe):
//!
//! - the **host** (the child) leaves the terminal's session (`setsid`),
//!   starts and initializes the Tick, publishes it as a live instance, tells
//!   the parent it is ready over a pipe, and serves it until the Tick ends or
//!   someone stops it (`tickbox stop`, or SIGTERM/SIGINT/SIGHUP to the host);
//! - the **view** (the parent) waits for that message, then attaches this
//!   terminal exactly as `tickbox attach` does.
//!
//! So detaching (Ctrl-]) gives the shell back while the Tick keeps running,
//! and `tickbox attach NAME` brings it back. Until the host is ready, it dies
//! with the parent (`PR_SET_PDEATHSIG`), so an interrupted start leaves
//! nothing behind. The host's stderr goes to /dev/null, or with `-v` to
//! `host-<pid>.log` in the live-instance directory.

use super::attach::{self, exit_of, DETACH_HELP};
use super::exit::{self, Exit};
use super::open::{self, TickOpts, TickSpec};
use clap::Args;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tickbox_runtime::backend::native::Hygiene;
use tickbox_runtime::live::{publish, PublishOptions, Registry};
use tickbox_runtime::scenario::{RecordTick, RecordTime, Recorder};
use tickbox_runtime::TickKind;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Args)]
#[command(after_help = DETACH_HELP)]
pub struct RunArgs {
    /// Name of the live instance (default: the last part of the Tick's kind)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The Tick: a path to an executable or a .wasm file
    #[arg(value_name = "TICK")]
    pub tick: Option<String>,
    #[command(flatten)]
    pub opts: TickOpts,
    #[command(flatten)]
    pub view: attach::ViewOpts,
    /// Record this session as a scenario file for `tickbox test`: keys, resizes, `tickbox call @NAME` calls, and a snapshot at each mark (the detach key, then `m`); written when a view leaves and when the session ends
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// Entry point; see the module docs. Must run before any thread exists.
pub fn main(mut args: RunArgs, verbose: u8, native: Hygiene) -> ExitCode {
    if let Some(file) = args.record.take() {
        match record_target(&file) {
            Ok(f) => args.record = Some(f),
            Err(e) => return super::fail(e),
        }
        args.view.marks = true;
    }
    let spec = match args.opts.spec(args.tick.clone()) {
        Ok(TickSpec::Live(t)) => {
            return super::fail(Exit::usage(format!(
                "`@{t}` is already live: `tickbox attach {t}` views it"
            )))
        }
        Ok(spec) => spec,
        Err(e) => return super::fail(e),
    };
    // The host loses the terminal (setsid, stdio to /dev/null): what a
    // manifest asks for is decided here, on this terminal, before the fork
    // and before anything of the Tick runs; the host starts under that
    // decision (pinned to the content decided on) and asks nobody.
    // One context for the view and the host it forks: what is resolved
    // and decided here is what the host starts.
    let notices = Arc::new(open::Stderr::default());
    let app = open::app_with(notices.clone(), native);
    if let TickSpec::Path(p) = &spec {
        if tickbox_registry::is_reference(p) {
            let decided = args
                .opts
                .grant_spec()
                .and_then(|g| {
                    g.resolve()
                        .map_err(|e| Exit::usage(super::open::grant_error_line(&e)))
                })
                .and_then(|g| {
                    let request = open::unaudited(spec.clone(), &args.opts)?;
                    Ok(app.pull_and_decide(
                        p,
                        g.limits.max_wasm_size,
                        &request.registry(),
                        &request.asking,
                    )?)
                });
            match decided {
                Ok((_, _, decided)) => {
                    args.opts.asking = Some(super::consent::Asking::Decided(decided.map(Box::new)))
                }
                Err(e) => return super::fail(e),
            }
        } else if tickbox_runtime::backend::wasm::is_wasm_path(Path::new(p)) {
            let asking = args
                .opts
                .asking
                .clone()
                .unwrap_or_else(super::consent::Terminal::asking);
            match app.decide_file(Path::new(p), &asking) {
                Ok(decided) => {
                    args.opts.asking = Some(super::consent::Asking::Decided(decided.map(Box::new)))
                }
                Err(e) => return super::fail(e.into()),
            }
        }
    }
    let registry = match Registry::open() {
        Ok(r) => r,
        Err(e) => return super::fail(exit_of(e)),
    };
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two fds into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = std::io::Error::last_os_error();
        return super::fail(Exit::session(format!("cannot create a pipe: {e}")));
    }
    let parent = std::process::id() as i32;
    // SAFETY: no other thread exists yet (clap parsing and logging setup
    // start none), so the child is a faithful single-threaded copy.
    match unsafe { libc::fork() } {
        -1 => {
            let e = std::io::Error::last_os_error();
            super::fail(Exit::session(format!("cannot start the host process: {e}")))
        }
        0 => {
            // SAFETY: closing our copy of the pipe's read end.
            unsafe { libc::close(fds[0]) };
            // SAFETY: the write end is ours alone from here on.
            let ready = unsafe { File::from_raw_fd(fds[1]) };
            // The subreaper setting is not inherited across fork; the
            // bookkeeping in the App's settings is.
            let reaper = app.settings().native.reaper.clone();
            reaper.iter().for_each(|r| r.renew());
            let code = host(&app, &notices, spec, args, registry, ready, parent, verbose);
            // What a native Tick left behind outside its group goes too.
            let _swept = reaper.as_ref().map(|r| r.sweep());
            std::process::exit(code)
        }
        _ => {
            // SAFETY: closing our copy of the write end, so EOF comes when the host's goes.
            unsafe { libc::close(fds[1]) };
            // SAFETY: the read end is ours alone.
            let pipe = unsafe { File::from_raw_fd(fds[0]) };
            // Notices while the host starts the Tick, then its one answer.
            let mut text = String::new();
            for line in std::io::BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) if v["note"].is_string() => {
                        notices.say(v["note"].as_str().unwrap_or_default())
                    }
                    _ => {
                        text = line;
                        break;
                    }
                }
            }
            let id = match serde_json::from_str::<Value>(text.trim()) {
                Ok(v) if v["ok"]["id"].is_string() => {
                    v["ok"]["id"].as_str().unwrap_or_default().to_string()
                }
                Ok(v) => {
                    let code = v["error"]["code"].as_u64().unwrap_or(exit::SESSION as u64);
                    let message = v["error"]["message"].as_str().unwrap_or("the host failed");
                    let last_words = serde_json::from_value(v["error"]["last_words"].clone())
                        .unwrap_or_default();
                    return super::fail(
                        Exit::new(u8::try_from(code).unwrap_or(exit::SESSION), message)
                            .with_last_words(last_words),
                    );
                }
                Err(_) => {
                    return super::fail(Exit::session(
                        "the host process ended before the Tick was ready",
                    ))
                }
            };
            let view = args.view.clone();
            attach::runtime_main(async move {
                let ending = attach::view(&registry, &id, &view).await?;
                attach::finish(ending)
            })
        }
    }
}

/// The absolute path of a `--record FILE`, checked writable before anything
/// starts (the host writes it later, with nowhere to report a failure but
/// its log).
fn record_target(file: &Path) -> Result<PathBuf, Exit> {
    let abs = std::path::absolute(file)
        .map_err(|e| Exit::usage(format!("--record {}: {e}", file.display())))?;
    if abs.is_dir() {
        return Err(Exit::usage(format!(
            "--record {}: is a directory; name a file such as demo.scenario.toml",
            file.display()
        )));
    }
    let dir = abs.parent().unwrap_or(Path::new("/"));
    let probe = dir.join(format!(".tickbox-record-probe-{}", std::process::id()));
    std::fs::File::create(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| {
            Exit::usage(format!(
                "--record {}: cannot write in {}: {e}",
                file.display(),
                dir.display()
            ))
        })?;
    Ok(abs)
}

/// The `[tick]` table of a recording: the Tick as this command started it
/// (`tickbox_app::App::record_tick`; a live instance records nothing).
pub(super) fn record_tick(
    app: &tickbox_app::App,
    spec: &TickSpec,
    opts: &open::TickOpts,
    kind: TickKind,
    size: (u16, u16),
) -> RecordTick {
    match open::unaudited(spec.clone(), opts) {
        Ok(request) => app.record_tick(&request, kind, size),
        Err(_) => RecordTick {
            path: None,
            cwd: None,
            command: Vec::new(),
            grants: Default::default(),
            size,
            time: RecordTime::Native,
        },
    }
}

fn send_ready(ready: &mut File, message: Value) {
    let _ = writeln!(ready, "{message}").and_then(|_| ready.flush());
}

/// Tells the waiting view why the host failed; returns the exit code.
fn ready_failed(ready: &mut File, e: &Exit) -> i32 {
    send_ready(
        ready,
        json!({"error": {"code": e.code, "message": e.message, "last_words": e.last_words}}),
    );
    i32::from(e.code)
}

/// Points fds 0 and 1 at /dev/null and fd 2 at `log` (or /dev/null).
fn detach_stdio(log: Option<std::path::PathBuf>) {
    let open = |path: &std::path::Path, flags| {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: open on a NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
        (fd >= 0).then_some(fd)
    };
    let null = std::path::Path::new("/dev/null");
    let err = log
        .and_then(|p| open(&p, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND))
        .or_else(|| open(null, libc::O_WRONLY));
    // SAFETY: dup2 onto the standard fds; the sources are fds we just opened.
    unsafe {
        if let Some(fd) = open(null, libc::O_RDWR) {
            libc::dup2(fd, 0);
            libc::dup2(fd, 1);
            libc::close(fd);
        }
        if let Some(fd) = err {
            libc::dup2(fd, 2);
            libc::close(fd);
        }
    }
}

/// Writes the recording, if any, off the async workers; a failure goes to
/// the host's log (`-v`).
async fn save(recorder: Option<&Recorder>) {
    let Some(r) = recorder else { return };
    let file = r.file().to_path_buf();
    let result = tokio::task::block_in_place(|| r.save());
    match result {
        Ok(files) => tracing::info!(?files, "recording saved"),
        Err(e) => tracing::error!(file = %file.display(), "{e}"),
    }
}

/// The host process: start, publish, serve. Returns its exit code.
// One call site: the arguments are the forked host's whole world.
#[allow(clippy::too_many_arguments)]
fn host(
    app: &tickbox_app::App,
    notices: &open::Stderr,
    spec: TickSpec,
    mut args: RunArgs,
    registry: Registry,
    mut ready: File,
    parent: i32,
    verbose: u8,
) -> i32 {
    // SAFETY: plain syscalls; until the Tick is published, the host dies
    // with the view that is waiting for it.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() != parent {
            return i32::from(exit::INTERRUPTED);
        }
    }
    let log = (verbose > 0).then(|| {
        registry
            .dir()
            .join(format!("host-{}.log", std::process::id()))
    });
    detach_stdio(log);
    // A live host always keeps its own audit stream, in the state
    // directory (rotated at its bound), besides any --audit.
    args.opts.audit_origin = tickbox_telemetry::audit::Origin::LiveHost;
    match app.live_host_sink(registry.dir(), super::env::live_audit_max_bytes()) {
        Ok(sink) => app.also_audit_into(sink),
        Err(e) => return ready_failed(&mut ready, &open::exit_of(e)),
    }
    let runtime = match super::new_runtime(2) {
        Ok(rt) => rt,
        Err(e) => return ready_failed(&mut ready, &e),
    };
    let code = runtime.block_on(async move {
        // Signals first: from here on SIGTERM ends the Tick cleanly.
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return ready_failed(&mut ready, &Exit::session("cannot handle signals"));
        };
        // Until the Tick is ready the person watches the view's terminal,
        // not this process's stderr: a notice (a long first compile) goes
        // to the view over the ready pipe, which prints it there.
        if let Ok(pipe) = ready.try_clone() {
            let pipe = std::sync::Mutex::new(pipe);
            notices.redirect(Some(Box::new(move |text: &str| {
                send_ready(&mut tickbox_runtime::util::lock(&pipe), json!({"note": text}));
            })));
        }
        let opened = open::open(app, spec.clone(), &args.opts).await;
        notices.redirect(None);
        let opened = match opened {
            Ok(t) => t,
            Err(e) => return ready_failed(&mut ready, &e),
        };
        let recorder = args
            .record
            .clone()
            .map(|f| Arc::new(Recorder::new(f, &record_tick(app, &spec, &args.opts, opened.kind, opened.session.view().size()))));
        let session = Arc::new(opened.session);
        let mut options = PublishOptions::new(opened.kind.label());
        options.name = args.name;
        options.registry = Some(registry);
        options.observer = recorder.clone().map(|r| r as _);
        let published = match publish(session.clone(), options).await {
            Ok(p) => p,
            Err(e) => {
                session.shutdown().await;
                return ready_failed(&mut ready, &exit_of(e));
            }
        };
        send_ready(&mut ready, json!({"ok": published.info()}));
        drop(ready);
        // SAFETY: from now on the host outlives its first view.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0) };
        let (why, signalled) = loop {
            break tokio::select! {
                r = session.ended() => (r.to_string(), false),
                _ = term.recv() => ("SIGTERM".to_string(), true),
                _ = int.recv() => ("SIGINT".to_string(), true),
                _ = hup.recv() => ("SIGHUP".to_string(), true),
                // A view left (a detach): save what is recorded so far; the
                // recording goes on while the Tick runs.
                _ = async { recorder.as_ref()?.save_wanted().await; Some(()) }, if recorder.is_some() => {
                    save(recorder.as_deref()).await;
                    continue;
                }
            };
        };
        tracing::info!(%why, "the host is ending");
        // The session ends first (on a signal it is still running), so views
        // are told at once by their own tasks, and a `stop` is answered by
        // its own; give them a moment before the runtime goes.
        session.shutdown().await;
        // The recording is complete before the instance is unpublished, so
        // once `tickbox ls` no longer lists it, the file is final.
        save(recorder.as_deref()).await;
        published.drain(std::time::Duration::from_secs(1)).await;
        // Dropping it records the instance as ended, with its last words:
        // unless a signal asked for a prompt exit, let what the Tick drew
        // on its way out reach the screen first.
        if !signalled {
            session.view().settle_after_end().await;
        }
        drop(published);
        0
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    app.finish_audit();
    code
}
