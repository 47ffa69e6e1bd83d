//! Naming and starting a Tick: a path as the first positional, or
//! `-- COMMAND [ARGS...]` at the end for a native Tick.

use super::exit::Exit;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tickbox_runtime::backend::native::{self, NativeSpec};
use tickbox_runtime::protocol::limits::CALL_TIMEOUT;
use tickbox_runtime::session::{Session, SessionConfig};

/// A command that takes the Tick as its only positional.
#[derive(Args)]
pub struct TickArgs {
    /// The Tick: a path to an executable or a .wasm file, or a live instance as @ID or @NAME
    #[arg(value_name = "TICK")]
    pub tick: Option<String>,
    #[command(flatten)]
    pub opts: TickOpts,
}

/// How a command starts its Tick.
#[derive(Args)]
pub struct TickOpts {
    /// Working directory for a native Tick
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Seconds before a call's outcome is reported unknown
    #[arg(long, value_name = "SECONDS", default_value_t = CALL_TIMEOUT.as_secs_f64())]
    pub call_timeout: f64,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
    /// A native Tick's command line, after `--`
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Which Tick to start.
pub enum TickSpec {
    /// A path given as the first positional.
    Path(String),
    /// `-- COMMAND [ARGS...]`.
    Command(Vec<String>),
    /// `@ID` or `@NAME`: a live instance (see `tickbox ls`), without the `@`.
    Live(String),
}

impl TickSpec {
    /// Classifies a TICK positional: `@…` names a live instance.
    pub fn parse(tick: &str) -> TickSpec {
        match tick.strip_prefix('@') {
            Some(target) => TickSpec::Live(target.to_string()),
            None => TickSpec::Path(tick.to_string()),
        }
    }
}

impl TickArgs {
    /// Resolves the Tick named on the command line.
    pub fn spec(&self) -> Result<TickSpec, Exit> {
        self.opts.spec(self.tick.clone())
    }
}

impl TickOpts {
    /// Resolves the Tick given its path positional, if any, and `-- COMMAND`.
    pub fn spec(&self, path: Option<String>) -> Result<TickSpec, Exit> {
        match (path, self.command.is_empty()) {
            (Some(p), true) => Ok(TickSpec::parse(&p)),
            (None, false) => Ok(TickSpec::Command(self.command.clone())),
            (Some(p), false) => Err(Exit::usage(format!(
                "name the Tick once: either `{p}` or `-- {}`",
                self.command.join(" ")
            ))),
            (None, true) => Err(Exit::usage(
                "no Tick given: pass a path, or `-- COMMAND [ARGS...]` at the end",
            )),
        }
    }

    fn config(&self) -> Result<SessionConfig, Exit> {
        if !(self.call_timeout.is_finite() && self.call_timeout > 0.0) {
            return Err(Exit::usage(
                "--call-timeout must be a positive number of seconds",
            ));
        }
        Ok(SessionConfig {
            call_timeout: Duration::from_secs_f64(self.call_timeout),
            ..SessionConfig::default()
        })
    }
}

/// An initialized Tick.
pub struct Opened {
    pub session: Session,
}

impl Opened {
    /// Shuts the Tick down and waits until it is gone.
    pub async fn close(self) {
        self.session.shutdown().await;
    }
}

/// Starts and initializes a Tick.
pub async fn open(spec: TickSpec, args: &TickOpts) -> Result<Opened, Exit> {
    let config = args.config()?;
    let argv = match spec {
        TickSpec::Path(p) => vec![p],
        TickSpec::Command(argv) => argv,
        TickSpec::Live(t) => {
            return Err(Exit::usage(format!(
                "`@{t}` names a live instance, which this command cannot use"
            )))
        }
    };
    let native = NativeSpec {
        argv,
        cwd: args.cwd.clone(),
        ..Default::default()
    };
    let io = native::spawn(&native).map_err(Exit::session)?;
    let session = Session::start(io, config).await.map_err(Exit::session)?;
    Ok(Opened { session })
}
