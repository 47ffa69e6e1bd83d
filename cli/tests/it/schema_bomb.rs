//! The catalog schema bomb: a wasm Tick with no grants whose catalog's
//! input schemas are costly to compile (`tests/guests/schemabomb`: a
//! Unicode class repeated in a `pattern`, per tool) and which changes its
//! revision on every describe. The wall: each pattern and each catalog's
//! patterns are bounded (`MAX_PATTERN_BYTES`, `MAX_CATALOG_PATTERN_BYTES`,
//! a `describe.schemas` finding past either), compilation runs off the
//! async workers and is cached by content, and new revisions are taken at
//! a bounded rate (`REVISION_BURST`, `REVISION_INTERVAL`).

use crate::mcp_wire::Raw;
use crate::util::*;
use serde_json::json;
use std::time::{Duration, Instant};

fn bomb() -> String {
    build_wasm("tests/guests", "schemabomb", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

fn counter() -> String {
    build_wasm("examples", "counter", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_catalog_past_the_pattern_bound_is_refused_naming_it() {
    let wasm = bomb();
    let out = tickbox(&[
        "describe",
        &wasm,
        "--env",
        "BOMB_REP=5000",
        "--env",
        "BOMB_TOOLS=80",
    ]);
    out.expect(3, "describe.schemas");
    assert!(out.stderr.contains("MAX_PATTERN_BYTES"), "{out:#?}");
    assert!(
        !out.stderr.contains("did not finish"),
        "not the start deadline: {out:#?}"
    );
    eprintln!("refused in {:?}", out.elapsed);
    // The positive control: the same Tick with small patterns starts.
    let ok = tickbox(&[
        "describe",
        &wasm,
        "--env",
        "BOMB_REP=1",
        "--env",
        "BOMB_TOOLS=80",
    ]);
    assert_eq!(ok.code, 0, "{ok:#?}");
    assert_eq!(ok.json()["tools"].as_array().unwrap().len(), 81);
}

#[test]
fn a_catalogs_compiled_patterns_are_charged_to_the_ticks_memory_bound() {
    let wasm = bomb();
    // Forty patterns of about 190 KiB each do not fit a 6 MiB bound beside
    // the guest's own memory.
    let out = tickbox(&[
        "describe",
        &wasm,
        "--max-memory",
        "6MiB",
        "--env",
        "BOMB_REP=4",
        "--env",
        "BOMB_TOOLS=40",
    ]);
    out.expect(3, "--max-memory");
    assert!(out.stderr.contains("compiled patterns take"), "{out:#?}");
    // Positive controls: ten of them fit the same bound, and forty fit a
    // larger one.
    let ten = tickbox(&[
        "describe",
        &wasm,
        "--max-memory",
        "6MiB",
        "--env",
        "BOMB_REP=4",
        "--env",
        "BOMB_TOOLS=10",
    ]);
    assert_eq!(ten.code, 0, "{ten:#?}");
    let roomy = tickbox(&[
        "describe",
        &wasm,
        "--max-memory",
        "64MiB",
        "--env",
        "BOMB_REP=4",
        "--env",
        "BOMB_TOOLS=40",
    ]);
    assert_eq!(roomy.code, 0, "{roomy:#?}");
    assert_eq!(roomy.json()["tools"].as_array().unwrap().len(), 41);
}

/// The host's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Latencies of the neighbour's read-only calls over `span`, and the
/// host's peak RSS over the same time (KiB).
fn neighbour_calls(mcp: &mut Raw, tool: &str, span: Duration) -> (Vec<Duration>, u64) {
    let mut lat = Vec::new();
    let mut peak = 0;
    let end = Instant::now() + span;
    let mut id = 1000;
    while Instant::now() < end {
        id += 1;
        let t0 = Instant::now();
        let r = mcp.request(id, "tools/call", json!({"name": tool, "arguments": {}}));
        lat.push(t0.elapsed());
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        peak = peak.max(rss_kib(mcp.pid()));
        std::thread::sleep(Duration::from_millis(20));
    }
    lat.sort();
    (lat, peak)
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
    let (bomb, counter) = (bomb(), counter());
    let dir = TempDir::new("schema-bomb");
    let run = |rep: &str| {
        let config = dir.0.join(format!("ticks-{rep}.toml"));
        std::fs::write(
            &config,
            format!(
                "[[tick]]\nname = \"bomb\"\npath = {bomb:?}\n[tick.grants]\n\
                 env = [\"BOMB_REP={rep}\", \"BOMB_TOOLS=40\"]\nmax_memory = \"32MiB\"\n\n\
                 [[tick]]\nname = \"counter\"\npath = {counter:?}\n"
            ),
        )
        .unwrap();
        let mut mcp = Raw::start(&["--config".into(), config.to_string_lossy().into_owned()]);
        mcp.initialize("2025-06-18");
        let before = rss_kib(mcp.pid());
        // The facade re-describes every second: twelve seconds cover the
        // burst of revisions and the throttled rate after it.
        let (lat, peak) = neighbour_calls(&mut mcp, "counter_tick_state", Duration::from_secs(12));
        let (code, stderr) = mcp.close();
        assert_eq!(code, 0, "{stderr}");
        (lat, before, peak)
    };
    // The positive control: the same two Ticks, the bomb's patterns tiny.
    let (calm, calm_before, calm_peak) = run("2");
    let (hot, hot_before, hot_peak) = run(NEAR_BOUND_REP);
    eprintln!(
        "neighbour p50/p99: calm {:?}/{:?}, under the bomb {:?}/{:?}; host RSS KiB: \
         calm {calm_before}->{calm_peak}, under the bomb {hot_before}->{hot_peak}",
        calm[calm.len() / 2],
        p99(&calm),
        hot[hot.len() / 2],
        p99(&hot)
    );
    // Under 50 ms at the 99th percentile, or within three times what the
    // same calls take without the bomb on this machine right now (a
    // loaded CI machine is slow for both).
    let bound = Duration::from_millis(50).max(p99(&calm) * 3);
    assert!(p99(&hot) <= bound, "p99 {:?} over {bound:?}", p99(&hot));
    // The attacker's 32 MiB memory bound, plus the documented overhead of
    // its catalog's patterns (kept once in the catalog and once in the
    // cache: 2 x MAX_CATALOG_PATTERN_BYTES), plus 32 MiB of slack for the
    // allocator and the other Tick's growth in the same twelve seconds.
    let bound_kib = calm_peak.max(hot_before) + (32 + 2 * 8 + 32) * 1024;
    assert!(
        hot_peak <= bound_kib,
        "host RSS {hot_peak} KiB over {bound_kib} KiB"
    );
}
