//! `tickbox describe|read|screen|info|call @ID|@NAME …` and `tickbox stop`: the
//! one-shot commands against a live instance instead of a Tick of their own.
//!
//! Output and exit codes are those of the one-shot commands. `call` is
//! prepared and approved here, against the catalog the live Tick reports
//! now, and sent bound to that revision: if the catalog changes before it
//! arrives, the Tick refuses it with -32004 (nothing runs twice, nothing
//! runs unapproved).
//!
//! Every request has a deadline of its own, so a stopped or wedged host
//! never hangs the client: one-shot requests get [`REQUEST_TIMEOUT`] plus
//! [`REPLY_GRACE`] (exit 3 past it); a call is `tickbox_app::live::call`,
//! whose unknown outcome (the Tick may have had the call) is exit 4.

use super::attach::exit_of;
use super::exit::{self, Exit};
use super::open::TickSpec;
use super::{approve, emit, emit_tick_text, report_call, Command};
use clap::Args;
use serde_json::Value;
use std::time::Duration;
use tickbox_app::live::Called;
use tickbox_runtime::live::wire::Request;
use tickbox_runtime::live::{client, Registry};
use tickbox_runtime::protocol::limits::REQUEST_TIMEOUT;
use tickbox_runtime::protocol::{Descriptor, TickText};

/// How much longer than the host's own deadline a client waits for its
/// reply: the host answers a timeout itself, so this only runs out when the
/// host is stopped, wedged or gone.
pub use tickbox_app::live::REPLY_GRACE;

#[derive(Args)]
pub struct StopArgs {
    /// The live instance: its id or name, `@` optional
    #[arg(value_name = "ID|NAME")]
    pub target: String,
}

async fn request(target: &str, request: Request) -> Result<Value, Exit> {
    let limit = REQUEST_TIMEOUT + REPLY_GRACE;
    let answer = async {
        let registry = Registry::open().map_err(exit_of)?;
        let conn = client::connect(&registry, target).await.map_err(exit_of)?;
        conn.request(request).await.map_err(exit_of)
    };
    tokio::time::timeout(limit, answer)
        .await
        .unwrap_or_else(|_| {
            Err(Exit::session(format!(
                "the live instance `{target}` did not answer within {}s",
                limit.as_secs()
            )))
        })
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
        Command::Info(a) => {
            let target = live(a.spec())?;
            match request(&target, Request::Describe).await {
                Ok(d) => {
                    // What the live host reports; its grants stay with the
                    // host that started it (`tickbox ls` names it).
                    let tools: Vec<Value> = d["tools"]
                        .as_array()
                        .map(|t| {
                            t.iter()
                                .map(|t| serde_json::json!({"name": t["name"], "mutates": t["mutates"]}))
                                .collect()
                        })
                        .unwrap_or_default();
                    let v = serde_json::json!({
                        "backend": "live",
                        "instance": target,
                        "kind": d["kind"],
                        "title": d["title"],
                        "revision": d["revision"],
                        "tools": tools,
                    });
                    emit(&v, a.opts.pretty)
                }
                Err(e) => Err(e),
            }
        }
        Command::Screen(a) => {
            let target = live(a.spec())?;
            match request(&target, Request::Screen).await {
                // The live host's screen text: the Tick's, so typed again here.
                Ok(v) => emit_tick_text(&TickText::from(v.as_str().unwrap_or_default())),
                Err(e) => Err(e),
            }
        }
        Command::Call(a) if a.tick.command.is_empty() => {
            let target = live(a.tick.spec(a.positionals.first().cloned()))?;
            match super::open::call_timeout(a.tick.call_timeout) {
                Ok(timeout) => {
                    call(&target, &a.positionals[1..], a.yes, a.tick.pretty, timeout).await
                }
                Err(e) => Err(e),
            }
        }
        Command::Stop(a) => stop(a.target.trim_start_matches('@')).await,
        _ => return None,
    })
}

/// How long `tickbox stop` waits for the instance to be gone from `ls`
/// (its Tick has the session's own shutdown grace within this).
pub const STOP_WAIT: Duration = Duration::from_secs(15);

/// Stops an instance and returns once `tickbox ls` no longer lists it, so
/// a script that stops and then lists sees it gone.
async fn stop(target: &str) -> Result<(), Exit> {
    let registry = Registry::open().map_err(exit_of)?;
    let id = client::resolve(&registry, target)
        .await
        .map_err(exit_of)?
        .id;
    request(&id, Request::Stop).await?;
    let deadline = tokio::time::Instant::now() + STOP_WAIT;
    while client::resolve(&registry, &id).await.is_ok() {
        if tokio::time::Instant::now() > deadline {
            return Err(Exit::session(format!(
                "`{target}` was asked to stop but is still listed after {} s",
                STOP_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn call(
    target: &str,
    rest: &[String],
    yes: bool,
    pretty: bool,
    timeout: Duration,
) -> Result<(), Exit> {
    let tool = rest
        .first()
        .ok_or_else(|| Exit::usage("call needs a TOOL"))?;
    let args = super::parse_call_args(rest.get(1))?;
    let raw = request(target, Request::Describe).await?;
    let catalog = Descriptor::parse(raw)
        .map_err(|e| Exit::session(format!("the live Tick's catalog is invalid: {e}")))?;
    // The live host records the call in its own audit stream.
    let prepared = approve(&catalog, tool, args, yes, None)?;
    let registry = Registry::open().map_err(exit_of)?;
    let reply = match tickbox_app::live::call(&registry, target, prepared, timeout).await? {
        Called::Replied(reply) => reply,
        Called::Unknown(why) => {
            return Err(Exit::new(
                exit::UNKNOWN_OUTCOME,
                format!("unknown outcome for `{tool}`: {why}; it was not resent"),
            ))
        }
    };
    report_call(tool, reply, pretty)
}
