//! CPU among Ticks: a wasm Tick spinning inside a call takes its share of
//! a core, and its neighbour's calls through the same facade stay fast,
//! on one thread and on two workers, against the way guests yielded before
//! (`GuestYield::Immediate`) as the measurement's anchor.

use crate::raw::Raw;
use crate::{alone, engine, wasm_on, Hosting, Setup};
use serde_json::json;
use std::time::{Duration, Instant};
use tickbox_mcp::Grants;
use tickbox_sandbox::GuestYield;
use tickbox_test_support::{cpu_seconds, eventually, hostile};

/// `n` read-only calls of `tool`, one at a time and `gap` apart (so they
/// arrive at any point of a neighbour's slice), ids from `first`: each
/// one's latency, sorted.
fn neighbour_latencies(
    mcp: &mut Raw,
    first: u64,
    n: u64,
    tool: &str,
    gap: Duration,
) -> Vec<Duration> {
    let mut out: Vec<Duration> = (first..first + n)
        .map(|id| {
            // Fixed sleep: the gap is this measurement's input (calls
            // that arrive apart, as an agent's do), not a wait for anything.
            std::thread::sleep(gap);
            let t = Instant::now();
            let r = mcp.call(id, tool, json!({"n": id}));
            let took = t.elapsed();
            assert_eq!(r["isError"], false, "{r}");
            took
        })
        .collect();
    out.sort();
    out
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[test]
fn a_spinning_tick_adds_little_to_a_neighbours_calls_on_one_thread_and_on_two() {
    // It measures this process's CPU time: nothing else may run in it.
    if !alone(
        "fairness::a_spinning_tick_adds_little_to_a_neighbours_calls_on_one_thread_and_on_two",
    ) {
        return;
    }
    // Absolute latencies depend on the machine (BENCHMARKS.md has them,
    // beside their anchor); what must hold on any machine, however busy,
    // is the comparison in one run: beside a spinner, the neighbour's calls
    // are several times faster than with the way guests yielded before
    // (`GuestYield::Immediate`, which held each call ~300 ms on one
    // thread), on one thread and on two.
    const CALLS: u64 = 60;
    const GAP: Duration = Duration::from_millis(7);
    let measure = |workers: Option<usize>, guest_yield: GuestYield| {
        let engine = engine(guest_yield);
        let tick = |name| {
            let launcher = wasm_on(&engine, &hostile(), &Grants::default());
            Hosting::shared(Some(name), launcher)
        };
        let setup = Setup::of(vec![tick("spinner"), tick("calm")]);
        let mut mcp = Raw::start_on(setup, workers);
        mcp.initialize("2025-11-25");
        neighbour_latencies(&mut mcp, 1, 10, "calm_echo", GAP);
        // Positive control: the same calls with nothing spinning.
        let control = neighbour_latencies(&mut mcp, 100, CALLS, "calm_echo", GAP);
        // The spinner's call never ends; it takes a whole core meanwhile.
        let before_spin = cpu_seconds(std::process::id());
        mcp.send(json!({"jsonrpc": "2.0", "id": 999, "method": "tools/call",
                        "params": {"name": "spinner_spin", "arguments": {}}}));
        assert!(
            eventually(Duration::from_secs(60), || cpu_seconds(std::process::id())
                - before_spin
                > 0.05),
            "the spinner never started"
        );
        let (cpu0, wall0) = (cpu_seconds(std::process::id()), Instant::now());
        let spun = neighbour_latencies(&mut mcp, 200, CALLS, "calm_echo", GAP);
        let (cpu, wall) = (
            cpu_seconds(std::process::id()) - cpu0,
            wall0.elapsed().as_secs_f64(),
        );
        eprintln!(
            "workers {workers:?}, {guest_yield:?}: neighbour call p50/p99 {:?}/{:?} alone, {:?}/{:?} beside a spinner (CPU {:.0}% of wall)",
            pct(&control, 0.5),
            pct(&control, 0.99),
            pct(&spun, 0.5),
            pct(&spun, 0.99),
            cpu / wall * 100.0
        );
        // The spinner really ran through the measurement (a twentieth of a
        // core at least, even on a machine busy with other builds).
        assert!(
            cpu >= 0.05 * wall,
            "the spinner did not spin: {cpu:.2} s CPU in {wall:.2} s"
        );
        // Leaving ends the serve loop and its Ticks, the spinner with them.
        drop(mcp);
        (control, spun)
    };
    let (_, before) = measure(None, GuestYield::Immediate);
    let (control, one) = measure(None, GuestYield::Deferred);
    let (_, two) = measure(Some(2), GuestYield::Deferred);
    // The positive control: with nothing spinning, calls are faster than
    // the old way beside a spinner (else the comparison shows nothing).
    assert!(
        pct(&control, 0.5) * 4 < pct(&before, 0.5),
        "positive control: {control:?} alone against {before:?} the old way"
    );
    for (name, spun) in [("one thread", &one), ("two workers", &two)] {
        assert!(
            pct(spun, 0.5) * 4 < pct(&before, 0.5),
            "{name}: a spinning Tick held its neighbour's calls: {spun:?}, against {before:?} the old way"
        );
    }
}
