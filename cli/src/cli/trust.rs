//! `tickbox trust PATH [--updates] | ls | revoke DIGEST|PATH|REF`: the
//! approvals of what wasm Ticks' manifests ask for, kept by content.
//!
//! `tickbox trust PATH` is the consent: the person typed it. It shows what
//! the Tick asks for (on stderr, escaped) and records the approval for the
//! file's current digest; the record is printed as JSON on stdout.

use super::consent::{self, approval};
use super::exit::Exit;
use clap::{Args, Subcommand};
use serde_json::json;
use std::path::{Path, PathBuf};
use tickbox_runtime::backend::wasm;
use tickbox_runtime::backend::wasm::consent::{request_lines, TrustStore};
use tickbox_runtime::text;

/// Where approvals live, and the exit codes.
pub const HELP: &str = "\
A wasm Tick may ship NAME.tick.toml beside NAME.wasm listing the grants it asks
for (the keys of a policy file; a dir names a guest path only, and the host
directory is yours to map with --dir HOST::GUEST). Those grants are given only
under an approval of the Tick's exact content (its sha256 digest, and its
signer). On a terminal tickbox asks before the first start; where no one can
answer (no terminal, tickbox mcp, tickbox test, CI) it refuses and names this
command. A Tick with new content keeps its approval only if it asks for no more
and the approval was made with --updates (or answered `u`).

Approvals are kept in $TICKBOX_TRUST_DIR, else $XDG_CONFIG_HOME/tickbox/trust,
else ~/.config/tickbox/trust: a 0700 directory and a 0600 file, refused if they
are not yours, group or others can write them, or they are symbolic links.

Exit codes:
  0    success (stdout: one JSON document)
  2    usage error: no manifest or one asking for nothing, a manifest naming a host
       path, nothing to revoke, or a trust store that is not yours alone
  3    the Tick's file cannot be read";

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct TrustArgs {
    #[command(subcommand)]
    pub command: Option<TrustCommand>,
    /// The wasm Tick to approve (NAME.wasm, whose NAME.tick.toml says what it asks for; or an oci:// reference, whose requested-grants layer does)
    #[arg(value_name = "PATH|REF")]
    pub path: Option<PathBuf>,
    /// Keep the approval for later versions of this Tick (same path, or same registry repository) that ask for no more
    #[arg(long)]
    pub updates: bool,
    #[command(flatten)]
    pub registry: super::registry_flags::RegistryOpts,
    /// Pretty-print JSON output
    #[arg(long, global = true)]
    pub pretty: bool,
}

#[derive(Subcommand)]
pub enum TrustCommand {
    /// List the approvals, oldest first
    Ls,
    /// Remove the approvals of a content digest (sha256:…), a Tick's path, or a registry reference (every approval under its name)
    Revoke {
        #[arg(value_name = "DIGEST|PATH|REF")]
        target: String,
    },
}

pub fn run(args: TrustArgs) -> Result<(), Exit> {
    let dir = consent::trust_dir()?;
    let v = match (args.command, args.path) {
        (Some(TrustCommand::Ls), _) => {
            let store = TrustStore::open(&dir).map_err(Exit::usage)?;
            json!({"dir": store.dir(), "approvals": store.approvals()})
        }
        (Some(TrustCommand::Revoke { target }), _) => {
            let gone = tickbox_app::consent::revoke(&dir, &target)?;
            if gone.is_empty() {
                return Err(Exit::usage(format!("no approval matches {target}")));
            }
            json!({"dir": dir, "revoked": gone})
        }
        (None, Some(path)) if path.to_str().is_some_and(tickbox_registry::is_reference) => {
            let reference = path.to_string_lossy().into_owned();
            let max = tickbox_runtime::backend::wasm::limits::DEFAULT_MAX_WASM;
            let (pulled, _, subject) =
                super::open::app().pulled_subject(&reference, max, &args.registry.settings())?;
            let subject = subject.ok_or_else(|| {
                    Exit::usage(format!(
                        "{} asks for nothing (no requested-grants layer, or an empty one): nothing to approve",
                        pulled.reference
                    ))
                })?;
            record(&dir, &subject, args.updates)?
        }
        (None, Some(path)) => approve(&dir, &path, args.updates)?,
        (None, None) => return Err(Exit::usage(
            "name a wasm Tick to approve (tickbox trust PATH), or ls, or revoke DIGEST|PATH|REF",
        )),
    };
    super::emit(&v, args.pretty)
}

fn approve(dir: &Path, path: &Path, updates: bool) -> Result<serde_json::Value, Exit> {
    if !wasm::is_wasm_path(path) {
        return Err(Exit::usage(format!(
            "{}: only wasm Ticks have manifests to approve (a native Tick runs with your own permissions)",
            path.display()
        )));
    }
    if wasm::detect_file(path).is_none() {
        return Err(Exit::session(format!(
            "{} is not a readable wasm component or module",
            path.display()
        )));
    }
    let subject = tickbox_app::consent::subject_of(path, None)?.ok_or_else(|| {
        Exit::usage(format!(
            "{} has no manifest asking for anything ({}): it runs with the flags' grants alone, with nothing to approve",
            path.display(),
            path.with_extension("tick.toml").display()
        ))
    })?;
    record(dir, &subject, updates)
}

/// Shows what is approved (the manifest's words, escaped) and records it.
fn record(
    dir: &Path,
    subject: &consent::Subject,
    updates: bool,
) -> Result<serde_json::Value, Exit> {
    // What is approved, shown before it is recorded (the manifest's words, escaped).
    eprintln!(
        "tickbox: approving {} ({}, {}){}:",
        text::escape(&subject.name),
        subject.digest,
        subject
            .signer
            .as_deref()
            .map_or("unsigned".into(), text::escape),
        if updates {
            " and its later versions asking for no more"
        } else {
            ""
        }
    );
    for line in request_lines(&subject.requested) {
        eprintln!("  {}", text::escape(&line));
    }
    let record = approval(subject, updates);
    TrustStore::approve(dir, record.clone()).map_err(Exit::usage)?;
    Ok(json!({"dir": dir, "approved": record}))
}
