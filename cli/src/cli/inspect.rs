//! `tickbox inspect`: its flags, and starting or reaching the Tick the
//! page shows (the page, its server and timeline are
//! `tickbox_app::inspect`'s).

use super::exit::Exit;
use super::open::{self, TickOpts, TickSpec};
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;
use tickbox_app::inspect::{self, server, AuditRing};
use tickbox_runtime::live::Registry;
use tickbox_runtime::text;

pub const HELP: &str = "\
Serves one page on loopback that shows the Tick live and drives it: its screen
(keys typed there go to the Tick; the panel's size is its terminal's), its state
(as a subscriber gets it: fields changed by the last update highlighted, what
trimming cut named), a form per tool (mutating tools ask to confirm, naming the
tool and the catalog revision), the frames, and exports of the session as a
`tickbox test` scenario and as the audit stream.

TICK is started here, as the one-shot commands start it, and the timeline shows
the host<->Tick protocol. @NAME (or @ID) is a live instance another tickbox
process hosts (`tickbox run --name NAME`), reached through the per-user socket
as `tickbox attach`, `watch` and `call @NAME` reach it: the inspector is one
more view of it (the Tick's terminal is as large as the smallest view), the
timeline shows the frames of that socket (the host<->Tick protocol belongs to
the other process), and there is no audit export (the hosting process writes
the audit stream; give it --audit). Ending the inspector leaves it running.

The URL is printed on stderr, with a random token after its # that every request
for the Tick needs. The browser sends what follows # to no server: the page takes
the token out of the address bar, keeps it in the tab (for this port only) and
sends it as a header, never as a cookie (a cookie for 127.0.0.1 goes to every
port there, whoever listens on it). Requests whose Host is not the listen
address, or whose Origin is another site, are refused. --listen names another
address (the token is still required). Ctrl-C stops the server (and a Tick
started here).

Exit codes:
  130  stopped by SIGINT or SIGTERM (the usual way to end it)
  2    usage error (a bad --listen, no Tick named)
  3    the Tick could not start or initialize, the live instance cannot be
       reached, or the address cannot be bound";

#[derive(Args)]
#[command(after_help = HELP)]
pub struct InspectArgs {
    /// The Tick: a path, a .wasm file, an oci:// reference, a live instance as @NAME or @ID, or a command after --
    #[arg(value_name = "TICK|@NAME")]
    pub tick: Option<String>,
    /// Where to listen: HOST:PORT (default 127.0.0.1 on a random port)
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Open the page in the default browser (xdg-open), through a 0600 file so the token is on no command line
    #[arg(long)]
    pub open: bool,
    #[command(flatten)]
    pub opts: TickOpts,
}

/// Runs the command until a signal.
pub async fn run(mut args: InspectArgs, app: &tickbox_app::App) -> Result<(), Exit> {
    let spec = args.opts.spec(args.tick.clone())?;
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        Exit::usage(format!(
            "--listen {}: not an address like 127.0.0.1:0 or [::1]:8080",
            text::escape(&args.listen)
        ))
    })?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "tickbox inspect: warning: listening on {addr}, reachable from other machines; every request still needs the token"
        );
    }
    let (inspector, session) = match &spec {
        TickSpec::Live(target) => {
            let call_timeout = open::call_timeout(args.opts.call_timeout)?;
            let registry = Registry::open().map_err(tickbox_app::live::exit_of)?;
            (
                inspect::connect_live(&registry, target, call_timeout).await?,
                None,
            )
        }
        _ => {
            let audit = Arc::new(AuditRing::default());
            app.also_audit_into(audit.clone());
            args.opts.audit_origin = tickbox_telemetry::audit::Origin::Cli;
            let launcher = open::launcher(app, spec.clone(), &args.opts)?;
            let record = |kind, size| super::run::record_tick(app, &spec, &args.opts, kind, size);
            let (inspector, session) =
                inspect::start_local(&launcher, args.opts.config()?, audit, record).await?;
            (inspector, Some(session))
        }
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Exit::session(format!("cannot listen on {addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| Exit::session(format!("cannot read the bound address: {e}")))?;
    let token = server::new_token()?;
    // In the fragment: a browser sends it to no server (nor in a Referer);
    // the page reads it from there.
    let url = format!("http://{local}/#token={token}");
    // The URL (with the token) is printed once, here, and never logged.
    eprintln!("tickbox inspect: serving the page on {url}");
    let _opened = if args.open {
        server::open_in_browser(&url, local.port())
    } else {
        None
    };
    // SIGINT and SIGTERM end the command from `main` (exit 130), which
    // drops this future: the server's tasks go with the runtime, a Tick
    // started here is stopped (a live instance is only detached from: its
    // socket connections close), and the `--open` file is removed.
    server::serve(inspector, listener, token, std::future::pending()).await;
    if let Some(session) = session {
        session.shutdown().await;
    }
    Ok(())
}
