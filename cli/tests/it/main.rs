//! tickbox's integration tests: real Tick processes and real wasm guests,
//! driven through the wire.
//!
//! - `util` — the harness: running `tickbox`, locating test Ticks, temp dirs;
//! - `check` — `tickbox check`'s exit codes, the format asked and
//!   `--list-rules` (the checker itself is tickbox-conformance's `check`
//!   tests);
//! - `docs` — docs/PROTOCOL.md names every rule, limit and cited section;
//! - `cli` — the one-shot commands and their exit codes, one test per host rule;
//! - `consent` — a manifest's requests granted only under an approval of the
//!   Tick's exact bytes: `tickbox trust`, updates, revoking, the trust store's
//!   walls, the prompt on a real terminal (inert text, typed-ahead keys), and
//!   refusals where no one can answer (MCP, scenarios);
//! - `sandbox` — wasm Ticks as the binary drives them: each grant flag and a
//!   policy file reach the sandbox, bad grants are usage errors, a trap's
//!   one line, `info`'s grants (the escapes and limits themselves are
//!   tickbox-sandbox's tests);
//! - `live` — live instances: `run`/`attach` through real PTYs, `@NAME`
//!   clients, `ls`, `watch`, and the socket's guards (views sizing the
//!   Tick's terminal are tickbox-app's `live` tests);
//! - `mcp` — `tickbox mcp` as the process a client spawns, driven with raw
//!   lines: a config of several Ticks, bad starts and their exit codes,
//!   stdout carrying only MCP frames;
//! - `walls` — the outer walls the binary adds or measures: the cache's
//!   variables and commands, host RSS with every memory and table at once,
//!   compilation in the `tickbox` worker, process hygiene (cgroup v2 and
//!   the subreaper fallback), the grant area's place;
//! - `mcp_wire` — the `tickbox mcp` process driven with raw lines or over
//!   `--http` (the harnesses other modules share): the token a non-loopback
//!   bind generates, `--workers` (a spinning Tick's neighbours are
//!   tickbox-mcp's `fairness` test);
//! - `inspect` — `tickbox inspect`'s printed URL, `--open`'s 0600 file,
//!   the token reaching no other loopback port in headless Chromium, and
//!   an absent `@NAME`'s exit code (the page server itself is
//!   tickbox-app's `inspect` tests);
//! - `mcp_http` — `tickbox mcp --http`'s token: always one, generated into
//!   a private file, and token files others may read refused;
//! - `mcp_clients` — real MCP clients (Python SDK, TypeScript SDK, MCP
//!   Inspector) starting `tickbox mcp` as their stdio server (over
//!   Streamable HTTP, and the conformance suite, they are tickbox-mcp's
//!   `sdks` tests);
//! - `per_client` — `instances = "per-client"`: two Python SDK clients
//!   that do not see each other's counter (a shared one as the control),
//!   the instance caps, idle expiry, a hostile client opening sessions in a
//!   loop;
//! - `lazy` — `start = "on-first-use"` in a ticks file: with the host
//!   until its catalog is cached, on first use after;
//! - `langs` — Ticks without the Rust SDK (the C counter in `examples/c`),
//!   and imports refused before compiling;
//! - `sdks` — the Python, JavaScript and Go SDKs: their property and fuzz
//!   tests (with positive controls), the shared scenario of their counters,
//!   and the counters' native runs under `tickbox check`;
//! - `toolchains` — the Go, Python and JavaScript examples built by their
//!   registries' toolchains: check, keys through `tickbox:terminal`, timers,
//!   `tickbox new --lang python|js`, keys kept through a first compile;
//! - `record` — `tickbox run --record`: a session on a PTY recorded as a
//!   scenario that replays green (wasm on virtual time, native on real time);
//! - `scenario` — `tickbox test`: the example scenarios, failure output,
//!   identical screens under virtual time, exit codes;
//! - `scenario_walls` — what `tickbox test` decides about scenario files
//!   as untrusted input: native Ticks only when allowed, `--grant-root`,
//!   `--allow-env`, the time budgets' flags (the walls are the runner's);
//! - `fixtures` — `--retries` starting each attempt from the seeded
//!   scratch directory (the fixtures themselves are tickbox-app's);
//! - `views` — what reaches a person's terminal from a hostile Tick: views
//!   drawn from the screen model only, escaped text in every command, a
//!   `run` host ended during a flood (a huge draw split is tickbox-app's
//!   `views` test; bounded view sizes and floods stalling nothing are
//!   tickbox-sandbox's `views` tests);
//! - `http` — `--allow-http` and `--http-ca` checked, refused for native
//!   Ticks and shown by `tickbox info` (what a guest reaches under them is
//!   tickbox-sandbox's test);
//! - `tiers` — compilers: a first start on Winch, Cranelift's code from the
//!   cache after it, the detached optimizing compile's bounds, `tickbox compile`;
//! - `determinism` — every example scenario's report and screens are the
//!   same in every `tickbox test` process (what a guest reads under virtual
//!   time is tickbox-sandbox's `virtual_time` tests);
//! - `layers` — each crate's dependency tree has only what its layer is
//!   for, and only the CLI reads `TICKBOX_*` variables;
//! - `traces` — `tickbox test --trace` and `show-trace`: which scenarios
//!   get a trace, asciinema plays it, frames, states and outcomes in it,
//!   the same file on every run, a hostile Tick's trace inert, the size
//!   bound, and trace files as untrusted input;
//! - `audit` — the audit stream (`--audit`): each start, call, approval,
//!   denial, limit and end once with what was attempted, a hostile Tick's
//!   names only escaped, `-` on stderr only, the live host's rotating
//!   file, the policy and MCP-config keys;
//! - `policy` — `tickbox policy suggest`: the notes and fetch examples
//!   rerun the same under only the suggested policy (and fail with a line
//!   of it taken out), read-only and one-port narrowing, a hostile Tick's
//!   strings only in comments, bad audit files as one line.
//! - `metrics` — `tickbox mcp --metrics`: a real Prometheus server scrapes
//!   calls, durations, refusals, limits, live Ticks, sessions and memory;
//!   the page's own token; tool names past the cap fold into `(other)`.
//! - `suite` — the suite's own rules: no tracked binary, and tests that wait
//!   for events (at most five fixed sleeps, each saying why);
//! - `drain` — `tickbox mcp --http` on SIGTERM or SIGINT: the signal drains,
//!   a call in flight is answered, exit 0; the drain timeout (130), a
//!   second signal (130).
//!
//! The MCP facade's own behaviour (the wire frame by frame, a real client
//! in process, Streamable HTTP and its door, the drain, HAProxy in front
//! of two hosts) is tested in tickbox-mcp's `tests/it`.

mod audit;
mod check;
mod cli;
mod consent;
mod determinism;
mod doc_examples;
mod drain;
mod fixtures;
mod http;
mod inspect;
mod langs;
mod lazy;
mod live;
mod mcp;
mod mcp_clients;
mod mcp_http;
mod mcp_wire;
mod metrics;
mod otel;
mod per_client;
mod policy;
mod record;
mod reference;
mod registry;
mod sandbox;
mod scenario;
mod scenario_walls;
mod sdks;
mod tick_text;
mod tiers;
mod toolchains;
mod traces;
mod util;
mod views;
mod walls;
