//! tickbox-telemetry: what tickbox records of the Ticks it runs.
//!
//! Three outputs of one input. The layers that run a Tick (the sandbox,
//! the host's session, the MCP facade, the application layer) are handed
//! an [`audit::Audit`] value and report typed events to it; they know no
//! file, exporter or flag. What the events become is decided by whoever
//! made the handle:
//!
//! - [`audit`] — the audit stream: typed events (start, call, approval,
//!   used, denied, limit, unrecorded, end) as escaped JSON lines, the
//!   bounded queue and thread that write them to appended or rotating
//!   files ([`audit::QueuedWriter`]), and the typed reading of those lines
//!   back ([`audit::read`]);
//! - [`metrics`] — the same events counted for Prometheus (calls and
//!   durations per Tick and tool, refusals, limits, live Ticks, host RSS)
//!   and the text exposition format they are written in;
//! - [`otel`] — the same events as OpenTelemetry spans (one per Tick
//!   session and per call, MCP's conventions for MCP calls) and metrics,
//!   encoded as OTLP/JSON and exported through a bounded queue by a thread
//!   that is handed its HTTP client;
//! - [`outcome`] — how a session and a call end, the values the host's
//!   session returns and every recorder reads;
//! - [`limits`] — every bound of the above, in one table.
//!
//! The dependency runs one way: `tickbox-host` depends on this crate for
//! the event types and the [`audit::Audit`] handle it records into;
//! nothing here knows the host. Start reading at [`audit::Audit`].

pub mod audit;
pub mod limits;
pub mod metrics;
pub mod otel;
pub mod outcome;
mod util;
