//! `tickbox watch TICK|@ID [--interval DURATION]`: one JSON line per
//! delivery of the Tick's state.
//!
//! Each line is a [`Delivery`]: the latest state only, `merged` (how many
//! tick/update notifications it stands for since the previous line; the
//! first line counts those since the Tick started, or since watching began
//! for a live instance), `recover_with`, and `trimmed` (what was cut to keep
//! the line within 16 KiB, §6.4). At most one line per interval. A Tick
//! started by watch is watched until it ends; a live instance until its
//! session ends or watch is interrupted.

use super::attach::exit_of;
use super::emit;
use super::exit::{self, Exit};
use super::open::{self, TickOpts, TickSpec};
use clap::Args;
use std::time::Duration;
use tickbox_runtime::delivery::{item_budget, Delivery, Subscription};
use tickbox_runtime::live::wire::{Frame, Reply, Request};
use tickbox_runtime::live::{client, Registry};
use tickbox_runtime::session::EndReason;
use tickbox_runtime::text::escape;
use tokio::signal::unix::{signal, SignalKind};

#[derive(Args)]
pub struct WatchArgs {
    /// The Tick: a path, or a live instance as @ID or @NAME
    #[arg(value_name = "TICK|@ID")]
    pub tick: Option<String>,
    /// At most one delivery per interval: 500ms, 2s, 1.5s, 1m (a bare number is seconds)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    #[command(flatten)]
    pub opts: TickOpts,
}

/// Parses `500ms`, `2s`, `1.5s`, `1m` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let secs = num
        .trim()
        .parse::<f64>()
        .ok()
        .map(|n| n * scale)
        .filter(|n| n.is_finite() && *n >= 0.0 && *n < 86_400.0 * 365.0)
        .ok_or_else(|| format!("`{s}` is not a duration like 500ms, 2s or 1m"))?;
    Ok(Duration::from_secs_f64(secs))
}

impl WatchArgs {
    /// Whether this watches a live instance (`@ID|@NAME`).
    pub fn is_live(&self) -> bool {
        matches!(self.opts.spec(self.tick.clone()), Ok(TickSpec::Live(_)))
    }
}

/// Runs the watch.
pub async fn run(args: WatchArgs, app: &tickbox_app::App) -> Result<(), Exit> {
    match args.opts.spec(args.tick.clone())? {
        TickSpec::Live(target) => watch_live(&target, args.interval, args.opts.pretty).await,
        spec => {
            let t = open::open(app, spec, &args.opts).await?;
            let session = &t.session;
            let mut sub = Subscription::new(session, args.interval, true);
            let mut stopped = None;
            let gone = stdout_gone();
            tokio::pin!(gone);
            loop {
                let next = tokio::select! {
                    next = sub.next(session) => next,
                    () = &mut gone => {
                        stopped = Some(Exit::stdout_closed());
                        break;
                    }
                };
                let Some((state, merged)) = next else { break };
                let Some(catalog) = session.descriptor() else {
                    break;
                };
                let delivery = Delivery::build(state, merged, catalog, item_budget(1)).await;
                let emitted = serde_json::to_value(&delivery)
                    .map_err(|e| Exit::session(e.to_string()))
                    .and_then(|v| emit(&v, args.opts.pretty));
                if let Err(e) = emitted {
                    // Stdout closed (or broken): stop watching, stop the Tick.
                    stopped = Some(e);
                    break;
                }
            }
            let reason = session.end_reason();
            t.close().await;
            if let Some(e) = stopped {
                return if e.is_stdout_closed() { Ok(()) } else { Err(e) };
            }
            match reason {
                Some(EndReason::Exited(how)) => {
                    eprintln!("tickbox: the Tick ended: {}", escape(&how));
                    Ok(())
                }
                Some(other) => Err(Exit::session(other)),
                None => Ok(()),
            }
        }
    }
}

async fn watch_live(target: &str, interval: Duration, pretty: bool) -> Result<(), Exit> {
    let registry = Registry::open().map_err(exit_of)?;
    let mut conn = client::connect(&registry, target).await.map_err(exit_of)?;
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    conn.start(Request::Watch { interval_ms })
        .await
        .map_err(exit_of)?;
    let interrupted = |sig| {
        Exit::new(
            exit::INTERRUPTED,
            format!("interrupted by {sig}; the Tick keeps running"),
        )
    };
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return Err(Exit::session("cannot handle signals"));
    };
    let gone = stdout_gone();
    tokio::pin!(gone);
    loop {
        let next = tokio::select! {
            next = conn.next() => next.map_err(exit_of)?,
            () = &mut gone => return Err(Exit::stdout_closed()),
            _ = int.recv() => return Err(interrupted("SIGINT")),
            _ = term.recv() => return Err(interrupted("SIGTERM")),
        };
        match next {
            Some(Frame::Json(v)) => match serde_json::from_value::<Reply>(v) {
                Ok(Reply::Delivery(d)) => emit(&d, pretty)?,
                Ok(Reply::Ended { reason, .. }) => {
                    eprintln!("tickbox: {}", escape(&reason));
                    return Ok(());
                }
                Ok(Reply::Error { message, .. }) => return Err(Exit::session(message)),
                _ => {}
            },
            Some(_) => {}
            None => {
                return Err(Exit::new(
                    exit::SESSION,
                    "the live instance's host closed the connection",
                ))
            }
        }
    }
}

/// Resolves when stdout's reader has gone (a pipe whose read end closed
/// reports an error condition), so `watch … | head -1` ends right after
/// its line even when no further delivery comes to fail with EPIPE. Never
/// resolves for a stdout that cannot be polled (a regular file).
async fn stdout_gone() {
    use std::os::fd::{AsRawFd, RawFd};
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    /// fd 1, borrowed: never closed by us.
    struct Stdout;
    impl AsRawFd for Stdout {
        fn as_raw_fd(&self) -> RawFd {
            1
        }
    }
    // SAFETY: fd 1 stays open, and refers to the same file, for the whole
    // life of the process: nothing in tickbox closes or replaces it.
    match unsafe { AsyncFd::register_with_interest(Stdout, Interest::ERROR) } {
        Ok(fd) => {
            let _ = fd.ready(Interest::ERROR).await;
        }
        Err(_) => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
