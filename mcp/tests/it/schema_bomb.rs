//! The catalog schema bomb beside a neighbour: a wasm Tick with no grants
//! whose catalog's input schemas are costly to compile
//! (`tests/guests/schemabomb`: a Unicode class repeated in a `pattern`,
//! per tool) and which changes its revision on every describe. The wall
//! measured here is the host's: compilation runs off the async workers and
//! is cached by content, new revisions are taken at a bounded rate
//! (`REVISION_BURST`, `REVISION_INTERVAL`), so a neighbour stays fast and
//! the host's memory bounded. The bounds on one catalog's patterns are
//! tested at a start through the library, in tickbox-sandbox's tests.

use crate::raw::Raw;
use crate::{alone, engine, wasm_on, Hosting, Setup};
use serde_json::json;
use std::time::{Duration, Instant};
use tickbox_mcp::Grants;
use tickbox_sandbox::GuestYield;
use tickbox_test_support::{build_wasm, status_kib};

fn guest(workspace: &str, krate: &str) -> String {
    build_wasm(workspace, krate, "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// The neighbour's read-only call on each facade in turn for `span`, so
/// both see the same machine; the latencies of each, and this process's
/// peak RSS (KiB) over the run.
fn neighbour_calls(
    servers: &mut [&mut Raw],
    tool: &str,
    span: Duration,
) -> (Vec<Vec<Duration>>, u64) {
    let mut out: Vec<Vec<Duration>> = servers.iter().map(|_| Vec::new()).collect();
    let mut peak = 0;
    let end = Instant::now() + span;
    let mut id = 1000;
    while Instant::now() < end {
        for (server, lat) in servers.iter_mut().zip(out.iter_mut()) {
            id += 1;
            let t0 = Instant::now();
            let r = server.request(id, "tools/call", json!({"name": tool, "arguments": {}}));
            lat.push(t0.elapsed());
            assert_eq!(r["result"]["isError"], json!(false), "{r}");
            peak = peak.max(status_kib(std::process::id(), "VmRSS"));
        }
    }
    for lat in &mut out {
        lat.sort();
    }
    (out, peak)
}

fn p99(lat: &[Duration]) -> Duration {
    lat[(lat.len() * 99 / 100).min(lat.len() - 1)]
}

/// `BOMB_REP` for patterns that pass every bound but cost the most a
/// catalog may hold: `\p{L}{4}` compiles to about 190 KiB, so forty of
/// them (all different, and different again in every revision) come just
/// under `MAX_CATALOG_PATTERN_BYTES`.
const NEAR_BOUND_REP: &str = "4";

#[test]
fn a_neighbour_stays_fast_and_the_host_bounded_while_a_tick_churns_costly_catalogs() {
    // It measures this process's memory: nothing else may run in it.
    if !alone("schema_bomb::a_neighbour_stays_fast_and_the_host_bounded_while_a_tick_churns_costly_catalogs") {
        return;
    }
    let (bomb, counter) = (
        guest("tests/guests", "schemabomb"),
        guest("examples", "counter"),
    );
    // Two facades, each hosting the bomb (its patterns `\p{L}` repeated
    // `rep` times, in 32 MiB) and the counter on an engine of its own.
    let start = |rep: &str| {
        let engine = engine(GuestYield::default());
        let grants = Grants {
            env: vec![format!("BOMB_REP={rep}"), "BOMB_TOOLS=40".into()],
            max_memory: Some("32MiB".into()),
            ..Grants::default()
        };
        let mut mcp = Raw::start_setup(Setup::of(vec![
            Hosting::shared(Some("bomb"), wasm_on(&engine, &bomb, &grants)),
            Hosting::shared(
                Some("counter"),
                wasm_on(&engine, &counter, &Grants::default()),
            ),
        ]));
        mcp.initialize("2025-06-18");
        mcp
    };
    // The positive control beside the attack, in the same seconds: the same
    // two Ticks under a second facade, the bomb's patterns tiny.
    let mut calm = start("2");
    let mut hot = start(NEAR_BOUND_REP);
    let before = status_kib(std::process::id(), "VmRSS");
    // The facade re-describes every second: twelve seconds cover the
    // burst of revisions and the throttled rate after it.
    let (mut measured, peak) = neighbour_calls(
        &mut [&mut calm, &mut hot],
        "counter_tick_state",
        Duration::from_secs(12),
    );
    let hot_lat = measured.pop().unwrap();
    let calm_lat = measured.pop().unwrap();
    for mcp in [calm, hot] {
        let (served, log) = mcp.close();
        assert!(served.is_ok(), "{served:?}: {log}");
    }
    eprintln!(
        "neighbour p50/p99: calm {:?}/{:?}, under the bomb {:?}/{:?}; RSS KiB {before}->{peak}",
        calm_lat[calm_lat.len() / 2],
        p99(&calm_lat),
        hot_lat[hot_lat.len() / 2],
        p99(&hot_lat)
    );
    // Under 250 ms at the 99th percentile, or within a few times what the
    // same calls take beside it without the bomb (a loaded machine is slow
    // for both). What this guards: before the wall these calls took 4-7 s,
    // sixteen times the floor; the floor leaves a loaded 2-core debug build
    // room for the bomb host's own re-describes (CPU the calm host does not
    // spend) on top of the machine's load.
    let bound = Duration::from_millis(250).max(p99(&calm_lat) * 4 + Duration::from_millis(10));
    assert!(
        p99(&hot_lat) <= bound,
        "p99 {:?} over {bound:?}",
        p99(&hot_lat)
    );
    // The attacker's 32 MiB memory bound (its compiled patterns are
    // charged to it), plus 32 MiB of slack for the allocator and the
    // other Ticks' growth in the same twelve seconds.
    let bound_kib = before + (32 + 32) * 1024;
    assert!(peak <= bound_kib, "RSS {peak} KiB over {bound_kib} KiB");
}
