//! Where the audit stream goes: the CLI's half of
//! [`tickbox_telemetry::audit`] (the events and writers are the host
//! crate's, `docs/AUDIT.md` the schema).
//!
//! The CLI owns every way of asking for one: `--audit FILE` (appended,
//! rotated at `AUDIT_FILE_MAX_BYTES` or `TICKBOX_AUDIT_MAX_SIZE`; `-` for
//! stderr), `--audit-args` and `--audit-sync` on every command that runs a
//! Tick, the `audit`, `audit_args` and `audit_sync` keys of a `--policy`
//! file and of a `tickbox mcp --config` file, and the live host's own
//! file, which `tickbox run` always keeps in the state directory
//! (`$XDG_RUNTIME_DIR/tickbox/audit/host-PID.jsonl`), rotated at
//! `LIVE_AUDIT_MAX_BYTES` (or `TICKBOX_LIVE_AUDIT_MAX_SIZE`). Each
//! destination is opened once per process, so Ticks of one `tickbox mcp`
//! share a file and its writer; [`finish`] gives every writer its bounded
//! time to empty its queue on the way out.
//!
//! `--audit-sync` makes the `--audit` file's writer a synced one
//! (`QueuedWriter::synced`: each batch written and `fdatasync`ed, no
//! gathering) and the handle synced, so a call's answer waits for its
//! line. Only a file can be synced: with `-` or no destination it is a
//! usage error. The live host's own file stays batched.

use super::exit::Exit;
use std::sync::Arc;
use tickbox_app::App;
use tickbox_telemetry::audit::{Audit, AuditObserver, Origin};

/// Where an audit stream should go: the application layer's type.
pub use tickbox_app::AuditWish as Wanted;

/// The audit handle for Ticks started by `origin`: written where `wanted`
/// says (through `app`'s writers), observed by `observers` and, when the
/// standard variables ask for it, by OpenTelemetry.
pub fn handle(
    app: &App,
    origin: Origin,
    wanted: &Wanted,
    observers: &[Arc<dyn AuditObserver>],
) -> Result<Option<Audit>, Exit> {
    // OpenTelemetry, when the standard variables ask for it, is one more
    // observer the app adds (`otel::Telemetry`).
    Ok(app.audit(origin, wanted, observers)?)
}
