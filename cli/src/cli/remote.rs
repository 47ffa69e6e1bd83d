//! `tickbox describe|read|screen|call @ID|@NAME …` and `tickbox stop`: the
//! one-shot commands against a live instance instead of a Tick of their own.
//!
//! Output and exit codes are those of the one-shot commands. `call` is
//! prepared and approved here, against the catalog the live Tick reports
//! now, and sent bound to that revision: if the catalog changes before it
//! arrives, the Tick refuses it with -32004 (nothing runs twice, nothing
//! runs unapproved).

use super::attach::exit_of;
use super::exit::Exit;
use super::open::TickSpec;
use super::{approve, emit, emit_text, report_call, Command};
use clap::Args;
use serde_json::Value;
use tickbox_runtime::live::wire::{CallReply, Request};
use tickbox_runtime::live::{client, Registry};
use tickbox_runtime::protocol::Descriptor;

#[derive(Args)]
pub struct StopArgs {
    /// The live instance: its id or name, `@` optional
    #[arg(value_name = "ID|NAME")]
    pub target: String,
}

async fn request(target: &str, request: Request) -> Result<Value, Exit> {
    let registry = Registry::open().map_err(exit_of)?;
    let conn = client::connect(&registry, target).await.map_err(exit_of)?;
    conn.request(request).await.map_err(exit_of)
}

/// Runs `command` against a live instance when it names one (`@ID|@NAME`);
/// `None` when it starts a Tick of its own.
pub async fn try_run(command: &Command) -> Option<Result<(), Exit>> {
    let live = |spec: Result<TickSpec, Exit>| match spec {
        Ok(TickSpec::Live(target)) => Some(target),
        _ => None,
    };
    Some(match command {
        Command::Describe(a) => {
            let target = live(a.spec())?;
            match request(&target, Request::Describe).await {
                Ok(v) => emit(&v, a.opts.pretty),
                Err(e) => Err(e),
            }
        }
        Command::Read(a) => {
            let target = live(a.spec())?;
            match request(&target, Request::Read).await {
                Ok(v) => emit(&v, a.opts.pretty),
                Err(e) => Err(e),
            }
        }
        Command::Screen(a) => {
            let target = live(a.spec())?;
            match request(&target, Request::Screen).await {
                Ok(v) => emit_text(v.as_str().unwrap_or_default()),
                Err(e) => Err(e),
            }
        }
        Command::Call(a) if a.tick.command.is_empty() => {
            let target = live(a.tick.spec(a.positionals.first().cloned()))?;
            call(&target, &a.positionals[1..], a.yes, a.tick.pretty).await
        }
        Command::Stop(a) => {
            let target = a.target.trim_start_matches('@');
            request(target, Request::Stop).await.map(|_| ())
        }
        _ => return None,
    })
}

async fn call(target: &str, rest: &[String], yes: bool, pretty: bool) -> Result<(), Exit> {
    let tool = rest
        .first()
        .ok_or_else(|| Exit::usage("call needs a TOOL"))?;
    let args = super::parse_call_args(rest.get(1))?;
    let raw = request(target, Request::Describe).await?;
    let catalog = Descriptor::parse(raw)
        .map_err(|e| Exit::session(format!("the live Tick's catalog is invalid: {e}")))?;
    let prepared = approve(&catalog, tool, args, yes)?;
    let reply = request(
        target,
        Request::Call {
            tool: prepared.tool,
            args: prepared.args,
            revision: prepared.revision,
        },
    )
    .await?;
    let reply: CallReply = serde_json::from_value(reply)
        .map_err(|e| Exit::session(format!("unreadable call reply from the host: {e}")))?;
    report_call(tool, reply, pretty)
}
