//! tickbox-conformance: whether a Tick keeps the protocol, and whether it
//! does what its author says.
//!
//! - [`check`] — `tickbox check`: starts fresh instances of a Tick and
//!   examines it against every Tick-side rule of the protocol, with a verdict
//!   per rule id (text and JUnit reports);
//! - [`scenario`] — `tickbox test`: scenario files (calls, keys, virtual
//!   time, state and screen expectations) run against fresh instances, with
//!   snapshots, reports and traces;
//! - [`limits`] — the bounds of traces, in one table.
//!
//! Both start their Ticks through `tickbox-sandbox`'s launcher and drive
//! them through `tickbox-host`'s session engine; scenario files are
//! untrusted input (see `docs/SECURITY.md`).

pub mod check;
pub mod limits;
pub mod scenario;
