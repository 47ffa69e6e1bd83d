//! Compilers: a first start on Winch's code, Cranelift's code in the cache
//! for every start after it (compiled by a detached worker that keeps the
//! compile bounds), and `tickbox compile` ahead of time.

use crate::util::*;
use serde_json::Value;
use std::time::Duration;
use tickbox_test_support::wasm::{compile_bomb, write_wasm};

fn counter() -> String {
    build_wasm("examples", "counter", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

/// The compilers of the cache's code entries, as `tickbox cache ls` lists
/// them (what it holds besides code, such as a record of an optimizing
/// compile, has none).
fn compilers(cache: &TempDir) -> Vec<String> {
    let ls = tickbox_env(
        &["cache", "ls"],
        &[("TICKBOX_CACHE_DIR", cache.0.to_str().unwrap())],
    );
    assert_eq!(ls.code, 0, "{ls:#?}");
    let mut v: Vec<String> = ls.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["compiler"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

/// The pid in the `pid=N` log field of the line with `marker` (log lines
/// carry color codes, which go first).
fn logged_pid(stderr: &str, marker: &str) -> Option<i32> {
    let mut plain = String::new();
    let mut chars = stderr.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then a final byte in @..~.
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let line = plain.lines().find(|l| l.contains(marker))?;
    let rest = line.split("pid=").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn tickbox_compile_puts_optimized_code_in_the_cache_and_a_start_loads_it() {
    let cache = TempDir::new("precompile");
    let env = [
        ("TICKBOX_CACHE_DIR", cache.0.to_str().unwrap()),
        ("TICKBOX_COMPILER", "tiered"),
    ];
    let wasm = counter();
    let out = tickbox_env(&["compile", &wasm], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let tick = &out.json()["ticks"][0];
    assert_eq!(tick["compiler"], "cranelift", "{out:#?}");
    assert_eq!(tick["kind"], "component");
    assert_eq!(tick["cached"], false);
    assert_eq!(compilers(&cache), ["cranelift"]);

    // A start loads it: no compile, no background work.
    let read = tickbox_env(&["-v", "read", &wasm], &env);
    assert_eq!(read.code, 0, "{read:#?}");
    assert!(
        read.stderr.contains("loaded cranelift code from the cache"),
        "{read:#?}"
    );
    assert!(
        !read.stderr.contains("optimizing compile started"),
        "{read:#?}"
    );
    assert!(!read.stderr.contains("compiling with"), "{read:#?}");

    // Compiling again finds it there.
    let again = tickbox_env(&["compile", &wasm], &env);
    assert_eq!(again.json()["ticks"][0]["cached"], true, "{again:#?}");
    assert_eq!(compilers(&cache), ["cranelift"]);

    // Every failure names the Tick; exit 3 (2 for a bad bound).
    let dir = TempDir::new("precompile-bad");
    let junk = write_wasm(&dir, "junk.wasm", b"not wasm at all");
    tickbox_env(&["compile", &junk], &env).expect(3, "not a wasm component or module");
    tickbox_env(&["compile", "/nonexistent/x.wasm"], &env).expect(3, "cannot read");
    tickbox_env(&["compile", &wasm, "--max-wasm-size", "1KiB"], &env)
        .expect(3, "larger than max_wasm_size (1024 bytes)");
    tickbox_env(&["compile", &wasm, "--compile-timeout", "0"], &env)
        .expect(2, "--compile-timeout 0");
}

#[test]
fn a_first_start_runs_on_winch_and_later_starts_on_cranelift() {
    let cache = TempDir::new("tiers");
    let env = [
        ("TICKBOX_CACHE_DIR", cache.0.to_str().unwrap()),
        ("TICKBOX_COMPILER", "tiered"),
    ];
    let wasm = counter();
    let first = tickbox_env(&["-v", "read", &wasm], &env);
    assert_eq!(first.code, 0, "{first:#?}");
    assert!(first.stderr.contains("compiling with winch"), "{first:#?}");
    assert!(
        first.stderr.contains("optimizing compile started"),
        "{first:#?}"
    );

    // Winch's code is stored off the start's path, and the command waits
    // for that before it exits: one of the two is in the cache now.
    let now = compilers(&cache);
    assert!(
        now == ["winch"] || now == ["cranelift"],
        "entries right after the first start: {now:?}"
    );
    // The detached worker lands the optimized code and drops Winch's.
    assert!(
        eventually(Duration::from_secs(120), || compilers(&cache)
            == ["cranelift"]),
        "entries: {:?}",
        compilers(&cache)
    );
    let later = tickbox_env(&["-v", "read", &wasm], &env);
    assert_eq!(later.code, 0, "{later:#?}");
    assert!(
        later
            .stderr
            .contains("loaded cranelift code from the cache"),
        "{later:#?}"
    );
    assert!(
        !later.stderr.contains("optimizing compile started"),
        "{later:#?}"
    );
    // The same Tick either way.
    let state = |o: &Output| -> Value { o.json()["data"].clone() };
    assert_eq!(state(&first), state(&later));
    assert!(!state(&first).is_null(), "{first:#?}");

    // `cranelift` compiles before the start; `winch` never upgrades.
    let fresh = TempDir::new("tiers-winch");
    let winch_env = [
        ("TICKBOX_CACHE_DIR", fresh.0.to_str().unwrap()),
        ("TICKBOX_COMPILER", "winch"),
    ];
    let only = tickbox_env(&["-v", "read", &wasm], &winch_env);
    assert_eq!(only.code, 0, "{only:#?}");
    assert!(
        !only.stderr.contains("optimizing compile started"),
        "{only:#?}"
    );
    assert_eq!(compilers(&fresh), ["winch"]);
    assert_eq!(state(&only), state(&first));
}

#[test]
fn the_detached_optimizing_compile_ends_at_the_compile_timeout() {
    let cache = TempDir::new("tiers-bomb");
    let env = [
        ("TICKBOX_CACHE_DIR", cache.0.to_str().unwrap()),
        ("TICKBOX_COMPILER", "tiered"),
    ];
    // Winch compiles it at once; Cranelift takes many seconds, unbounded.
    let dir = TempDir::new("tiers-bomb-wasm");
    let bomb = write_wasm(&dir, "bomb.wasm", &compile_bomb());
    let started = std::time::Instant::now();
    // 3 s: the worker's bounds are 3 s × the CPUs of CPU time and 12 s of
    // wall time (BACKGROUND_WALL_FACTOR), far less than the ~18 s of CPU
    // the bomb needs, so it can never finish; and it lives at least the
    // CPU time of one thread, well past the command's own end (about a
    // second after its start: the Tick fails initialization), so it is
    // checked alive below however slow the machine.
    let out = tickbox_env(&["-v", "describe", &bomb, "--compile-timeout", "3"], &env);
    // It answers no protocol, so the start itself fails at initialization.
    assert_eq!(out.code, 3, "{out:#?}");
    let pid =
        logged_pid(&out.stderr, "optimizing compile started").unwrap_or_else(|| panic!("{out:#?}"));
    // It outlives the command (and is compiling, not failing early), at
    // the background priority (nice 10: the Tick it optimizes goes first)...
    assert!(
        alive(pid),
        "the detached worker {pid} ended within {:?}, before its 3 s bound",
        started.elapsed()
    );
    let nice = nice_of(pid).unwrap_or_else(|| panic!("no /proc/{pid}/stat"));
    assert!(nice >= 10, "the detached worker runs at nice {nice}");
    // ...until its bounds end it, long before it could finish, so it never
    // writes an entry: the CPU backstop (the timeout × the CPUs, as in the
    // foreground) or the alarm (the timeout × BACKGROUND_WALL_FACTOR, for a
    // worker that runs at a lower priority), whichever comes first.
    assert!(
        eventually(Duration::from_secs(90), || !alive(pid)),
        "the detached worker {pid} outlived its --compile-timeout"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "it ended before its bound"
    );
    assert_eq!(compilers(&cache), ["winch"]);
}

#[test]
fn the_baseline_worker_started_ahead_of_its_engine_keeps_the_bounds() {
    // A first start compiles with Winch in a worker started before Winch's
    // engine is built in the host (so the two overlap); the worker is under
    // the same bounds as any other.
    let cache = TempDir::new("tiers-early");
    let env = [
        ("TICKBOX_CACHE_DIR", cache.0.to_str().unwrap()),
        ("TICKBOX_COMPILER", "winch"),
    ];
    let wasm = counter();
    // No worker reads, compiles and writes a component within a millisecond.
    let out = tickbox_env(&["describe", &wasm, "--compile-timeout", "0.001"], &env);
    out.expect(3, "compiling took longer than compile_timeout (0.001 s)");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert_eq!(compilers(&cache), Vec::<String>::new());
    // Positive control: the same start within the default bounds.
    let ok = tickbox_env(&["-v", "describe", &wasm], &env);
    assert_eq!(ok.code, 0, "{ok:#?}");
    assert!(ok.stderr.contains("compiling with winch"), "{ok:#?}");
    assert_eq!(compilers(&cache), ["winch"]);
}

/// The nice value of a running process (field 19 of `/proc/PID/stat`).
fn nice_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from its closing ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(16)?.parse().ok()
}
