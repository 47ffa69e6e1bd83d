//! `tickbox policy suggest AUDIT…`: the least-privilege policy file that
//! would have allowed exactly what the Ticks in these audit files used,
//! printed on stdout as the TOML `--policy` reads, with what they were
//! refused listed as comments.
//!
//! **What it reads.** Audit files (`--audit FILE`, a policy's `audit`
//! key, a live host's `host-PID.jsonl` and its rotated `.1`…), any number,
//! merged: sessions from several files and several runs are one union.
//! A recorded scenario (`tickbox run --record`) is run with `tickbox test
//! FILE --audit AUDIT` and its audit read like any other; the recording
//! itself holds the grants in force, not what was used, so it is not read
//! here. Each file is read as untrusted input: a
//! regular file, never through a symbolic link, at most
//! `MAX_AUDIT_READ_BYTES`, each line one JSON object of schema version 1
//! and at most `MAX_AUDIT_LINE_BYTES`; anything else is one line naming
//! the file, the line and the rule (exit 2), never the line's content.
//! Events it does not know (a later tickbox's) are skipped, as the
//! schema's versioning promises they may be added.
//!
//! **What it suggests.** From each wasm session whose `start` is in the
//! files (what was in force), the `used` events (docs/AUDIT.md):
//!
//! - `dir`: each grant that was used, mapped as it was (`HOST::GUEST`),
//!   `:ro` where nothing was written through it in any session, `:rw`
//!   otherwise, with its `max=` kept when every session that had it had
//!   one (the largest); grants never used are left out;
//! - `allow_net`: the narrowest grant of each address used (the granted
//!   host, the port used), and for a name only looked up the grant that
//!   named it;
//! - `allow_http`: each origin requested; `http_ca` kept when an `https`
//!   origin was used under one. In a scenario run with HTTP fixtures no
//!   origin is granted and none is reached: the origins the fixtures
//!   answered are what the Tick needs for real, and are suggested (and
//!   said to be fixtures') even though no grant was in force;
//! - `env`: every name the Tick was given. WASI hands a Tick its whole
//!   environment at start (`wasi:cli/environment` returns every variable
//!   at once), so the host cannot see which ones it reads: given counts as
//!   used, and leaving one out could change what the Tick does. The
//!   values are not in the audit (they may be secrets): each name takes
//!   its value from tickbox's environment when the policy is used;
//! - bounds (`max_memory`, `max_handles`, …, `max_write`): only those set
//!   to other than their default in a recorded run, at the largest value
//!   in force, since the runs showed the Tick works under it;
//! - a preview-1 module's file calls are not seen by the host, so its
//!   directory grants are kept as they were in force.
//!
//! A use counts only if the session's `start` granted it (a write only
//! through a writable grant), or, for an origin, if a scenario run's
//! fixture answered it: the suggestion is never more than the runs had,
//! whatever else a file says. A session whose `start` is not in the
//! files, a native Tick (not sandboxed, so no policy applies) and a
//! record cut short (`unrecorded`, `lost`) are said in comments.
//!
//! **Comments never carry TOML.** Every string from a file that reaches a
//! comment (a path a Tick attempted, a refusal's detail, a Tick's name)
//! goes through the one character policy (`text::escape`): no line break
//! or control character survives, so nothing can end a comment line and
//! start a key. Values are written as TOML strings with every unsafe
//! character as a `\uXXXX` escape, and checked to read back as the grant
//! they stand for.

use super::exit::Exit;
use clap::{Args, Subcommand};
use std::path::PathBuf;

pub const HELP: &str = "\
`tickbox policy suggest AUDIT...` reads audit files (--audit FILE, a live host's
host-PID.jsonl and its rotated .1 ...), merges every session in them, and prints
the least policy that allows what the wasm Ticks used: the directories they
reached (:ro where they asked to change nothing), the addresses, names and HTTP
origins they used, the environment variables they were given, and bounds set in
the runs. What they were refused is listed as comments. Use it with --policy FILE,
after reading it: a run that takes another path may need more.

A recorded scenario: `tickbox test REC.scenario.toml --audit A`, then suggest
from A.

Exit codes:
  0    the policy was printed
  2    an argument or an input file is not a readable audit file (one line names
       the file, the line and the rule; never the line's content)";

/// `tickbox policy …`.
#[derive(Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// What `tickbox policy` does.
#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Print the least policy that allows what the Ticks in these audit files used, refusals as comments: tickbox policy suggest AUDIT...
    #[command(after_help = HELP)]
    Suggest(SuggestArgs),
    /// Print as JSON which signers policy, lock file and trust store apply and where each was found; for REF, which rule covers it: tickbox policy show [REF]
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),
}

pub const SHOW_HELP: &str = "\
`tickbox policy show [REF]` prints one JSON document: for the signers policy
(--signers, else $TICKBOX_SIGNERS, else ~/.config/tickbox/signers.toml when it
exists), the lock file (--lock, else tickbox.lock beside --config, else
./tickbox.lock when it exists) and the trust store ($TICKBOX_TRUST_DIR, else
~/.config/tickbox/trust), each one's path and how it was found (\"found\": flag,
environment, default or none); the policy's rules and no_match setting. With
REF, the decision for it: the rule that covers it and its allowed-signers file,
no_match with the setting, or no_policy; and the lock's entry for it.

Exit codes:
  0    printed
  2    a malformed REF, or a policy or lock file that cannot be used (one line
       names the file and the rule)";

/// `tickbox policy show`.
#[derive(Args)]
pub struct ShowArgs {
    /// A reference to decide for: oci://HOST[:PORT]/REPO:TAG or …@sha256:DIGEST
    #[arg(value_name = "REF")]
    pub reference: Option<String>,
    /// An MCP config or --policy file: report the lock file beside it, as those commands read it
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub registry: super::registry_flags::RegistryOpts,
    /// Pretty-print JSON output
    #[arg(long)]
    pub pretty: bool,
}

/// `tickbox policy suggest`.
#[derive(Args)]
pub struct SuggestArgs {
    /// Audit files (JSON lines written by --audit or a live host), merged
    #[arg(value_name = "AUDIT", required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs `tickbox policy`.
pub fn run(args: PolicyArgs) -> Result<(), Exit> {
    match args.command {
        PolicyCommand::Show(a) => {
            let opts = a.registry.lock_beside(a.config.as_deref());
            let report = super::oci::files_report(&opts, a.reference.as_deref())?;
            super::emit(&report, a.pretty)
        }
        PolicyCommand::Suggest(a) => {
            let record = tickbox_app::policy::record_of(&a.files).map_err(Exit::usage)?;
            let suggestion = record.suggest();
            for why in &suggestion.incomplete {
                tracing::warn!(why = %why, "the audit record is incomplete");
            }
            super::emit_text(suggestion.render(&record).trim_end())
        }
    }
}
