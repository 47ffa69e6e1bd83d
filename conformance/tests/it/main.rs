//! tickbox-conformance's integration tests, through the crate's public
//! API: the checker against real Tick processes, and a scenario file
//! loaded, run against a real wasm guest (the counter example, built once
//! per run by the shared harness) started by the sandbox's launcher on
//! virtual time, and judged.
//!
//! - `check` — the checker against real processes (Python Ticks started
//!   by the sandbox's native launcher): the text, JSON and JUnit reports,
//!   a selection of rules, sample args, real signals, and the host and the
//!   checker naming the same rule for each broken start;
//! - `scenario` — a scenario that holds passes, one that does not fails at
//!   its step with what was found; virtual time makes runs alike (clocks,
//!   randomness, snapshots), `advance` and `wait_for` move it within their
//!   bounds, idle and busy guests, style expectations, native Ticks on
//!   real time. What only `tickbox test` does (its flags, reports, exit
//!   codes, review) stays in `cli/tests/it/scenario.rs`;
//! - `scenario_walls` — scenario files as untrusted input: dir grants
//!   under the grant roots, the host's variables only when allowed, no
//!   symbolic links for scenario and snapshot files, names that forge no
//!   report line, a scenario's time budget;
//! - `traces` — a hand-edited trace read back escaped, as `show-trace`
//!   prints it.

mod check;
mod scenario;
mod scenario_walls;
mod traces;
