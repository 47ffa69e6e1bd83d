//! The sandbox's outer walls: the compile cache trusts nothing it does not
//! own, one memory budget per Tick, bounded compilation, per-Tick handle
//! caps, write quotas, native process hygiene (a cgroup per Tick where
//! cgroup v2 allows, the subreaper otherwise). Each wall has a test that
//! hits it and a positive control under the same limits.

use crate::util::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{spawn, WasmEngine, WasmSpec};
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig};
use wasm_encoder::{
    BlockType, CodeSection, ExportKind, ExportSection, Function, FunctionSection, MemorySection,
    MemoryType, Module, RefType, TableSection, TableType, TypeSection, ValType,
};

// --- generated wasm -------------------------------------------------------

fn memory(pages: u64) -> MemoryType {
    MemoryType {
        minimum: pages,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    }
}

fn table(elements: u64) -> TableType {
    TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: elements,
        maximum: None,
        shared: false,
    }
}

/// A core module with `memories` memories and `tables` tables (all empty at
/// first) whose `_start` grows each memory by `grow_mib` and fills it (so
/// the pages are really resident), then grows each table by
/// `grow_elements` and fills it with a function reference (not null, so
/// its pages are written too). It imports nothing and answers no protocol:
/// a Tick that gets through `_start` simply exits.
fn grower(memories: u32, tables: u32, grow_mib: i32, grow_elements: i32) -> Vec<u8> {
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    m.section(&funcs);
    let mut ts = TableSection::new();
    for _ in 0..tables {
        ts.table(table(0));
    }
    m.section(&ts);
    let mut ms = MemorySection::new();
    for _ in 0..memories {
        ms.memory(memory(0));
    }
    m.section(&ms);
    let mut exports = ExportSection::new();
    exports.export("_start", ExportKind::Func, 0);
    m.section(&exports);
    // `ref.func 0` needs the function declared.
    let mut elems = wasm_encoder::ElementSection::new();
    elems.declared(wasm_encoder::Elements::Functions(
        std::borrow::Cow::Borrowed(&[0]),
    ));
    m.section(&elems);
    let mut f = Function::new([]);
    let mut ins = f.instructions();
    for i in 0..memories {
        ins.i32_const(grow_mib * 16).memory_grow(i).drop();
        ins.i32_const(0)
            .i32_const(1)
            .i32_const(grow_mib << 20)
            .memory_fill(i);
    }
    for t in 0..tables {
        ins.ref_func(0)
            .i32_const(grow_elements)
            .table_grow(t)
            .drop();
        ins.i32_const(0)
            .ref_func(0)
            .i32_const(grow_elements)
            .table_fill(t);
    }
    ins.end();
    let mut code = CodeSection::new();
    code.function(&f);
    m.section(&code);
    m.finish()
}

/// A valid 23 KB module that is slow for Cranelift: one function with
/// 2000 locals inside 500 nested loops, so SSA construction gives every loop
/// header a parameter per live local. On a 2-core machine it takes about
/// 18 s and 900 MB to compile, unbounded.
pub fn compile_bomb() -> Vec<u8> {
    let (locals, depth) = (2000u32, 500u32);
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    types.ty().function([], []);
    m.section(&types);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    funcs.function(1);
    m.section(&funcs);
    // A command's entry point, so the module passes the checks before compiling.
    let mut exports = ExportSection::new();
    exports.export("_start", ExportKind::Func, 1);
    m.section(&exports);
    let mut code = CodeSection::new();
    let mut f = Function::new([(locals, ValType::I32)]);
    let mut ins = f.instructions();
    for d in 0..depth {
        ins.loop_(BlockType::Empty);
        for k in 0..4 {
            let a = (d * 7 + k * 13) % locals + 1;
            let c = (d * 11 + k * 17) % locals + 1;
            ins.local_get(a).local_get(c).i32_add().local_set(c);
        }
    }
    for d in 0..depth {
        ins.local_get((d * 5) % locals + 1).br_if(0).end();
    }
    ins.local_get(0).end();
    code.function(&f);
    let mut start = Function::new([]);
    start.instructions().end();
    code.function(&start);
    m.section(&code);
    m.finish()
}

pub fn write_wasm(dir: &TempDir, name: &str, bytes: &[u8]) -> String {
    let p = dir.path(name);
    std::fs::write(&p, bytes).unwrap();
    p.to_string_lossy().into_owned()
}

/// Runs `tickbox ARGS` under a Python parent and returns the output and
/// the peak RSS of tickbox itself, in KiB (`ru_maxrss` of the waited-for
/// child; a cached compile keeps the worker out of the figure).
fn tickbox_rss(args: &[&str], cache: &Path) -> (Output, u64) {
    let script = "import resource,subprocess,sys\n\
        p=subprocess.run(sys.argv[1:],capture_output=True,text=True)\n\
        sys.stderr.write(p.stderr)\n\
        print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)";
    let mut argv = vec![
        "-c".to_string(),
        script.to_string(),
        env!("CARGO_BIN_EXE_tickbox").to_string(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    let out = std::process::Command::new("python3")
        .args(&argv)
        .env("TICKBOX_CACHE_DIR", cache)
        .env_remove("RUST_LOG")
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut it = stdout.split_whitespace();
    let code: i32 = it.next().and_then(|s| s.parse().ok()).expect("code");
    let rss: u64 = it.next().and_then(|s| s.parse().ok()).expect("rss");
    (
        Output {
            code,
            stdout: String::new(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed: Duration::ZERO,
        },
        rss,
    )
}

// --- the compile cache ----------------------------------------------------

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "cwasm"));
    v.sort();
    v
}

fn describe_with_cache(cache: &Path, wasm: &str, extra: &[(&str, &str)]) -> Output {
    let mut env = vec![
        ("TICKBOX_CACHE_DIR", cache.to_str().unwrap()),
        ("RUST_LOG", "tickbox_sandbox=info"),
        // One compile, one entry (tiering is `tiers`' subject).
        ("TICKBOX_COMPILER", "cranelift"),
    ];
    env.extend_from_slice(extra);
    tickbox_env(&["describe", wasm], &env)
}

#[test]
fn a_cache_dir_others_can_write_is_refused_and_nothing_in_it_is_loaded() {
    let wasm = hostile();
    let good = TempDir::new("cache-good");
    // Positive control: a private directory caches and hits.
    assert_eq!(describe_with_cache(&good.0, &wasm, &[]).code, 0);
    assert_eq!(entries(&good.0).len(), 1);
    let out = describe_with_cache(&good.0, &wasm, &[]);
    assert!(out.stderr.contains("compile cache hit"), "{out:#?}");

    // The same directory, entry and key made world-writable: a planted
    // entry could be there now, so nothing in it is read, nothing written.
    std::fs::set_permissions(&good.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = std::fs::read(&entries(&good.0)[0]).unwrap();
    let out = describe_with_cache(&good.0, &wasm, &[]);
    out.expect(0, "group or others can write to it");
    assert!(
        out.stderr.contains("running without the compile cache"),
        "{out:#?}"
    );
    assert!(!out.stderr.contains("compile cache hit"), "{out:#?}");
    assert_eq!(std::fs::read(&entries(&good.0)[0]).unwrap(), before);
    assert!(out.json()["tools"].is_array(), "the Tick still runs");

    // Owned by another user (root can set that up; others skip this part).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let foreign = TempDir::new("cache-foreign");
        std::os::unix::fs::chown(&foreign.0, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&foreign.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = describe_with_cache(&foreign.0, &wasm, &[]);
        out.expect(0, "owned by uid 65534");
        assert!(entries(&foreign.0).is_empty(), "nothing written there");
    }
}

#[test]
fn a_tampered_entry_is_refused_and_recompiled() {
    let wasm = hostile();
    let cache = TempDir::new("cache-tamper");
    assert_eq!(describe_with_cache(&cache.0, &wasm, &[]).code, 0);
    let blob = entries(&cache.0).remove(0);
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    let out = describe_with_cache(&cache.0, &wasm, &[]);
    out.expect(0, "fails its MAC");
    assert_ne!(
        std::fs::read(&blob).unwrap(),
        bytes,
        "replaced by a fresh compile"
    );
    let out = describe_with_cache(&cache.0, &wasm, &[]);
    assert!(out.stderr.contains("compile cache hit"), "{out:#?}");
}

#[test]
fn the_cache_is_evicted_listed_and_cleaned() {
    let cache = TempDir::new("cache-evict");
    let c = cache.0.to_str().unwrap();
    let env = [
        ("TICKBOX_CACHE_DIR", c),
        ("TICKBOX_CACHE_MAX_SIZE", "1KiB"),
        ("TICKBOX_COMPILER", "cranelift"),
    ];
    // Under a 1 KiB cap only the entry just written stays.
    assert_eq!(tickbox_env(&["describe", &hostile()], &env).code, 0);
    let first = entries(&cache.0);
    assert_eq!(first.len(), 1);
    assert_eq!(tickbox_env(&["describe", &hostile_p1()], &env).code, 0);
    let second = entries(&cache.0);
    assert_eq!(second.len(), 1);
    assert_ne!(first, second, "the older entry was evicted");

    // Without the cap both stay; `cache ls` shows them, `clean` empties it.
    let env = [("TICKBOX_CACHE_DIR", c), ("TICKBOX_COMPILER", "cranelift")];
    assert_eq!(tickbox_env(&["describe", &hostile()], &env).code, 0);
    let ls = tickbox_env(&["cache", "ls"], &env);
    assert_eq!(ls.code, 0, "{ls:#?}");
    let v = ls.json();
    assert_eq!(v["entries"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["total_bytes"].as_u64().unwrap() > 0);
    let clean = tickbox_env(&["cache", "clean"], &env);
    assert_eq!(clean.json()["removed"], 2, "{clean:#?}");
    assert!(entries(&cache.0).is_empty());
    // An unsafe directory is refused by the subcommands too.
    std::fs::set_permissions(&cache.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    tickbox_env(&["cache", "ls"], &env).expect(3, "group or others can write");
}

// --- one memory budget per Tick --------------------------------------------

#[test]
fn more_memories_or_tables_than_a_tick_may_have_are_refused_at_load() {
    let dir = TempDir::new("declares");
    let eight = write_wasm(&dir, "eight.wasm", &grower(8, 0, 0, 0));
    tickbox(&["describe", &eight, "--no-cache"])
        .expect(3, "defines 8 linear memories; a Tick may define at most 4");
    let many = write_wasm(&dir, "tables.wasm", &grower(0, 32, 0, 0));
    tickbox(&["describe", &many, "--no-cache"])
        .expect(3, "defines 32 tables; a Tick may define at most 16");
    // Positive control: within the counts it loads and runs (and, answering
    // no protocol, ends at initialization for another reason).
    let four = write_wasm(&dir, "four.wasm", &grower(4, 16, 0, 0));
    let out = tickbox(&["describe", &four, "--no-cache"]);
    assert_eq!(out.code, 3, "{out:#?}");
    assert!(!out.stderr.contains("defines"), "{out:#?}");
}

#[test]
fn memories_and_tables_share_one_budget_and_rss_stays_bounded() {
    let dir = TempDir::new("budget");
    let cache = TempDir::new("budget-cache");
    // Four memories of 16 MiB each, every page touched: 64 MiB in all.
    let mems = write_wasm(&dir, "mems.wasm", &grower(4, 0, 16, 0));
    let idle = write_wasm(&dir, "idle.wasm", &grower(1, 0, 0, 0));
    // Warm the cache so no compile worker runs in the measured runs.
    tickbox_rss(&["describe", &mems], &cache.0);
    tickbox_rss(&["describe", &idle], &cache.0);

    let (base, base_rss) = tickbox_rss(&["describe", &idle], &cache.0);
    assert_eq!(base.code, 3, "{base:#?}");
    // Positive control: under 256 MiB all four fill (the guest then exits).
    let (ok, ok_rss) = tickbox_rss(&["describe", &mems, "--max-memory", "256MiB"], &cache.0);
    assert!(!ok.stderr.contains("memory limit"), "{ok:#?}");
    // Under 40 MiB the third memory's growth would pass the sum: trap.
    let (hit, hit_rss) = tickbox_rss(&["describe", &mems, "--max-memory", "40MiB"], &cache.0);
    hit.expect(3, "memory limit exceeded");
    assert!(
        hit.stderr.contains("max_memory is 41943040 bytes"),
        "{hit:#?}"
    );
    eprintln!(
        "peak RSS: idle {base_rss} KiB, 64 MiB guest {ok_rss} KiB, trapped at 40 MiB {hit_rss} KiB"
    );
    assert!(
        ok_rss >= base_rss + 48 * 1024,
        "the measurement sees guest memory: {base_rss} → {ok_rss} KiB"
    );
    assert!(
        hit_rss <= base_rss + 40 * 1024 + 16 * 1024,
        "RSS stays within --max-memory plus slack: {base_rss} → {hit_rss} KiB"
    );

    // Tables count against the same budget: 16 tables × 1M elements × 8 B.
    let tables = write_wasm(&dir, "tables.wasm", &grower(0, 16, 0, 1 << 20));
    let out = tickbox(&["describe", &tables, "--max-memory", "32MiB", "--no-cache"]);
    out.expect(3, "grow a table");
    assert!(
        out.stderr.contains("max_memory is 33554432 bytes"),
        "{out:#?}"
    );
    let out = tickbox(&["describe", &tables, "--max-memory", "256MiB", "--no-cache"]);
    assert!(!out.stderr.contains("memory limit"), "{out:#?}");
}

#[test]
fn every_memory_and_table_at_once_keeps_host_rss_within_the_bound() {
    // The issue's attack within the counts a Tick may define: all 4
    // memories and all 16 tables, each grown and written. 4 × 8 MiB of
    // memory, then 16 tables × 1M elements × 8 B = 128 MiB of tables.
    let dir = TempDir::new("rss-walls");
    let cache = TempDir::new("rss-walls-cache");
    let walls = write_wasm(&dir, "walls.wasm", &grower(4, 16, 8, 1 << 20));
    let idle = write_wasm(&dir, "idle.wasm", &grower(1, 0, 0, 0));
    // Warm the cache so no compile worker runs in the measured runs.
    tickbox_rss(&["describe", &walls], &cache.0);
    tickbox_rss(&["describe", &idle], &cache.0);
    let (base, base_rss) = tickbox_rss(&["describe", &idle], &cache.0);
    assert_eq!(base.code, 3, "{base:#?}");

    // Positive control: under 1 GiB all of it is allocated, and the
    // measurement sees it (tables included: memories alone are 32 MiB).
    let (ok, ok_rss) = tickbox_rss(&["describe", &walls, "--max-memory", "1GiB"], &cache.0);
    assert!(!ok.stderr.contains("memory limit"), "{ok:#?}");
    // Under 64 MiB: the memories (32 MiB) and four tables (32 MiB) fit,
    // the fifth table's growth traps.
    let (hit, hit_rss) = tickbox_rss(&["describe", &walls, "--max-memory", "64MiB"], &cache.0);
    hit.expect(3, "grow a table from 0 to 1048576 elements");
    assert!(
        hit.stderr.contains("max_memory is 67108864 bytes"),
        "{hit:#?}"
    );
    let overhead_kib = tickbox_runtime::backend::wasm::limits::HOST_OVERHEAD / 1024;
    eprintln!(
        "peak RSS: idle {base_rss} KiB, 160 MiB of memories and tables {ok_rss} KiB, \
         trapped at 64 MiB {hit_rss} KiB (bound: idle + 65536 + {overhead_kib} KiB)"
    );
    assert!(
        ok_rss >= base_rss + 140 * 1024,
        "the measurement sees memories and tables: {base_rss} → {ok_rss} KiB"
    );
    assert!(
        hit_rss <= base_rss + 64 * 1024 + overhead_kib,
        "RSS stays within --max-memory plus HOST_OVERHEAD: {base_rss} → {hit_rss} KiB"
    );
}

// --- bounded compilation ----------------------------------------------------

#[test]
fn a_wasm_larger_than_the_size_bound_is_refused_before_reading() {
    tickbox(&["describe", &hostile(), "--max-wasm-size", "1KiB"])
        .expect(3, "larger than max_wasm_size (1024 bytes)");
    assert_eq!(
        tickbox(&["describe", &hostile(), "--max-wasm-size", "64MiB"]).code,
        0
    );
    tickbox(&["describe", &hostile(), "--max-wasm-size", "lots"]).expect(2, "--max-wasm-size lots");
}

#[test]
fn a_compile_bomb_ends_at_the_compile_timeout() {
    let dir = TempDir::new("bomb");
    let bomb = write_wasm(&dir, "bomb.wasm", &compile_bomb());
    let start = Instant::now();
    let out = tickbox(&["describe", &bomb, "--no-cache", "--compile-timeout", "0.5"]);
    let took = start.elapsed();
    out.expect(3, "compiling took longer than compile_timeout (0.5 s)");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(
        took < Duration::from_secs(20),
        "it ended at the bound: {took:?}"
    );
    tickbox(&["describe", &bomb, "--compile-timeout", "0"]).expect(2, "--compile-timeout 0");
}

#[test]
fn a_compile_past_the_memory_bound_ends_naming_it() {
    let dir = TempDir::new("bomb-mem");
    let bomb = write_wasm(&dir, "bomb.wasm", &compile_bomb());
    // Only the memory bound may end these compiles: on a loaded machine
    // the default 60 s deadline (and the harness's own 60 s) could come
    // first, the worker getting a fraction of a CPU. The wall-clock bound
    // has its own test above; here the deadlines are out of the way.
    let unhurried = ["--compile-timeout", "3600"];
    let tickbox = |args: &[&str]| tickbox_within(args, &[], Duration::from_secs(1800));
    let out = tickbox(
        &[
            &["describe", &bomb, "--no-cache", "--compile-memory", "64MiB"][..],
            &unhurried,
        ]
        .concat(),
    );
    out.expect(
        3,
        "compiling needed more than compile_memory (67108864 bytes)",
    );
    // One line for the failure; a compile slow enough for the progress
    // notice (over a second, likely on a loaded machine) adds that notice.
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !l.starts_with("tickbox: compiling "))
        .collect();
    assert_eq!(lines.len(), 1, "{out:#?}");
    // Positive control: a real Tick compiles within the same bound.
    let ok = tickbox(
        &[
            &[
                "describe",
                &hostile(),
                "--no-cache",
                "--compile-memory",
                "64MiB",
            ][..],
            &unhurried,
        ]
        .concat(),
    );
    assert_eq!(ok.code, 0, "{ok:#?}");
}

fn engine_with_worker() -> Arc<WasmEngine> {
    WasmEngine::with_worker(None, Some(env!("CARGO_BIN_EXE_tickbox").into())).expect("engine")
}

fn spec(path: &str, grants: GrantSpec) -> WasmSpec {
    WasmSpec {
        path: path.into(),
        args: vec![],
        grants: grants.resolve().unwrap(),
        instance_id: None,
        exit_grace: tickbox_runtime::backend::wasm::EXIT_GRACE,
        pin: None,
        audit: None,
    }
}

async fn call(s: &Session, tool: &str, args: Value) -> CallOutcome {
    let c = s.descriptor().unwrap().prepare(tool, args).unwrap();
    s.call(&c).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_bomb_costs_only_its_own_start() {
    let dir = TempDir::new("bomb-host");
    let bomb = write_wasm(&dir, "bomb.wasm", &compile_bomb());
    let engine = engine_with_worker();
    let neighbour = Session::start(
        spawn(&engine, &spec(&hostile(), GrantSpec::default()))
            .await
            .expect("spawn"),
        SessionConfig::default(),
    )
    .await
    .expect("initialize");
    let bounded = GrantSpec {
        compile_timeout: Some("3".into()),
        ..Default::default()
    };
    let bomb_start = {
        let engine = engine.clone();
        let s = spec(&bomb, bounded);
        tokio::spawn(async move { spawn(&engine, &s).await.map(|_| ()) })
    };
    // While the worker compiles, the neighbour answers promptly.
    let mut answered = 0;
    while !bomb_start.is_finished() {
        let t = Instant::now();
        match call(&neighbour, "echo", json!({"n": answered})).await {
            CallOutcome::Ok(v) => assert_eq!(v["n"], answered),
            other => panic!("the neighbour failed: {other:?}"),
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "a call took {:?}",
            t.elapsed()
        );
        answered += 1;
    }
    let err = bomb_start
        .await
        .unwrap()
        .expect_err("the bomb must not start");
    assert!(err.to_string().contains("compile_timeout (3 s)"), "{err}");
    assert!(
        answered > 5,
        "the neighbour was served meanwhile ({answered} calls)"
    );
    neighbour.shutdown().await;
}

// --- handles ---------------------------------------------------------------

fn open_many(wasm: &str, grant: &str, n: u64, max: &str) -> Output {
    tickbox(&[
        "call",
        wasm,
        "open_many",
        &json!({"path": "/data/f.txt", "n": n}).to_string(),
        "--dir",
        grant,
        "--max-handles",
        max,
    ])
}

#[test]
fn handle_exhaustion_is_the_guests_error_or_ends_only_that_tick() {
    let data = TempDir::new("handles");
    std::fs::write(data.path("f.txt"), "x").unwrap();
    let grant = format!("{}::/data", data.0.display());
    // Positive control: 50 open files under a cap of 1024.
    let out = open_many(&hostile(), &grant, 50, "1024");
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["opened"], 50, "{out:#?}");
    // A component past the cap: opening fails inside the guest, an error it
    // reports (the few handles below the cap are its stdio and preopen).
    let out = open_many(&hostile(), &grant, 100_000, "200");
    assert_eq!(out.code, 0, "{out:#?}");
    let v = out.json();
    assert_eq!(v["ok"], false, "{v}");
    assert!((150..200).contains(&v["opened"].as_u64().unwrap()), "{v}");
    // A preview-1 module past the cap: errno `mfile` (33), "no file
    // descriptors available" in wasi-libc's words; the Tick answers.
    let out = open_many(&hostile_p1(), &grant, 50, "1024");
    assert_eq!(out.json()["opened"], 50, "{out:#?}");
    let out = open_many(&hostile_p1(), &grant, 100_000, "200");
    assert_eq!(out.code, 0, "{out:#?}");
    let v = out.json();
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["errno"], 33, "{v}");
    assert!((150..200).contains(&v["opened"].as_u64().unwrap()), "{v}");
    tickbox(&["describe", &hostile(), "--max-handles", "0"]).expect(2, "--max-handles 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_at_its_handle_cap_leaves_a_neighbour_working() {
    let data = TempDir::new("handles-neighbour");
    std::fs::write(data.path("f.txt"), "neighbourly").unwrap();
    let grants = GrantSpec {
        dir: vec![format!("{}::/data", data.0.display())],
        max_handles: Some("300".into()),
        ..Default::default()
    };
    let engine = WasmEngine::new(None).expect("engine");
    let start = |g: GrantSpec| {
        let engine = engine.clone();
        async move {
            Session::start(
                spawn(&engine, &spec(&hostile(), g)).await.expect("spawn"),
                SessionConfig::default(),
            )
            .await
            .expect("initialize")
        }
    };
    let greedy = start(grants.clone()).await;
    let neighbour = start(grants).await;
    // Descriptors this process holds on files under the granted dir: what
    // the host opened on the guests' behalf. (All of /proc/self/fd would
    // count the other tests running in parallel in this process.)
    let fds = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                std::fs::read_link(e.path()).is_ok_and(|target| target.starts_with(&data.0))
            })
            .count()
    };
    let fds_before = fds();
    let CallOutcome::Ok(v) = call(
        &greedy,
        "open_many",
        json!({"path": "/data/f.txt", "n": 1_000_000}),
    )
    .await
    else {
        panic!("the greedy Tick's call failed");
    };
    assert_eq!(v["ok"], false, "{v}");
    assert!(fds() < fds_before + 300, "{fds_before} → {} fds", fds());
    // The greedy Tick itself keeps working once its call let go of them.
    let CallOutcome::Ok(v) = call(&greedy, "read_file", json!({"path": "/data/f.txt"})).await
    else {
        panic!("the greedy Tick no longer answers");
    };
    assert_eq!(v["value"], "neighbourly", "{v}");
    let CallOutcome::Ok(v) = call(&neighbour, "read_file", json!({"path": "/data/f.txt"})).await
    else {
        panic!("the neighbour's call failed");
    };
    assert_eq!(v["value"], "neighbourly", "{v}");
    greedy.shutdown().await;
    neighbour.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preview1_tick_holding_all_its_handles_gets_emfile_and_keeps_answering() {
    let data = TempDir::new("handles-p1");
    std::fs::write(data.path("f.txt"), "neighbourly").unwrap();
    let grants = GrantSpec {
        dir: vec![format!("{}::/data", data.0.display())],
        max_handles: Some("200".into()),
        ..Default::default()
    };
    let engine = WasmEngine::new(None).expect("engine");
    let start = |g: GrantSpec| {
        let engine = engine.clone();
        async move {
            Session::start(
                spawn(&engine, &spec(&hostile_p1(), g))
                    .await
                    .expect("spawn"),
                SessionConfig::default(),
            )
            .await
            .expect("initialize")
        }
    };
    let greedy = start(grants.clone()).await;
    let neighbour = start(grants).await;
    // Positive control: a few files open and close again.
    let CallOutcome::Ok(v) = call(
        &greedy,
        "open_many",
        json!({"path": "/data/f.txt", "n": 20}),
    )
    .await
    else {
        panic!("the greedy Tick's first call failed");
    };
    assert_eq!(
        (v["ok"].clone(), v["opened"].clone()),
        (json!(true), json!(20)),
        "{v}"
    );
    // Then it opens files until the cap refuses one, and keeps them all.
    // Descriptors this process holds on files under the granted dir: what
    // the host opened on the guests' behalf. (All of /proc/self/fd would
    // count the other tests running in parallel in this process.)
    let fds = || {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                std::fs::read_link(e.path()).is_ok_and(|target| target.starts_with(&data.0))
            })
            .count()
    };
    let fds_before = fds();
    let CallOutcome::Ok(v) = call(
        &greedy,
        "open_many",
        json!({"path": "/data/f.txt", "n": 1_000_000, "hold": true}),
    )
    .await
    else {
        panic!("the greedy Tick trapped at its handle cap");
    };
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["errno"], 33, "errno mfile: {v}");
    let held = v["opened"].as_u64().unwrap();
    assert!((150..200).contains(&held), "{v}");
    let fds_after = fds();
    // The count is real (one host descriptor per file the guest holds) and
    // bounded by the cap, not by the million the guest asked for.
    assert!(
        fds_after >= fds_before + held as usize,
        "{fds_before} → {fds_after} fds, {held} held"
    );
    assert!(
        fds_after < fds_before + 200,
        "{fds_before} → {fds_after} fds"
    );
    // Still at its cap, it reads its stdin and answers; one more file is
    // the same error, not a trap.
    for n in 0..3 {
        let CallOutcome::Ok(v) = call(&greedy, "echo", json!({"n": n})).await else {
            panic!("the greedy Tick no longer answers at its cap");
        };
        assert_eq!(v["n"], n);
    }
    let CallOutcome::Ok(v) = call(&greedy, "read_file", json!({"path": "/data/f.txt"})).await
    else {
        panic!("the greedy Tick trapped opening one more file");
    };
    assert_eq!(v["ok"], false, "{v}");
    // wasi-libc's text for `mfile`.
    assert!(
        v["error"].as_str().unwrap().contains("(os error 33)"),
        "{v}"
    );
    // The neighbour under the same limits is untouched.
    let CallOutcome::Ok(v) = call(&neighbour, "read_file", json!({"path": "/data/f.txt"})).await
    else {
        panic!("the neighbour's call failed");
    };
    assert_eq!(v["value"], "neighbourly", "{v}");
    greedy.shutdown().await;
    neighbour.shutdown().await;
}

// --- native process hygiene -------------------------------------------------

#[test]
fn a_double_forking_native_tick_leaves_nothing_behind() {
    double_fork_leaves_nothing(&[]);
}

#[test]
fn a_double_forking_native_tick_leaves_nothing_behind_by_the_subreaper_fallback_without_cgroups() {
    double_fork_leaves_nothing(&[("TICKBOX_NO_CGROUP", "1")]);
}

/// Runs the double-forking Tick under `tickbox describe` with `env`, and
/// checks its daemon is gone once tickbox has exited.
fn double_fork_leaves_nothing(env: &[(&str, &str)]) {
    let dir = TempDir::new("doublefork");
    let pidfile = dir.path("daemon.pid");
    let cgroupfile = dir.path("daemon.cgroup");
    // The Tick records its daemon's cgroup too (`cat` runs in the Tick's).
    let script = format!(
        "cat /proc/self/cgroup > {}; exec python3 {} {}",
        cgroupfile.display(),
        tick("doublefork.py"),
        pidfile.display()
    );
    let argv = vec!["sh".to_string(), "-c".to_string(), script];
    let out = tickbox_env(&with_command(&["describe"], &argv), env);
    assert_eq!(out.code, 0, "{out:#?}");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("the daemon was started")
        .trim()
        .parse()
        .unwrap();
    let cgroup = std::fs::read_to_string(&cgroupfile).unwrap_or_default();
    let in_cgroup = cgroup.contains("/tickbox-");
    let gone = eventually(PATIENCE, || !alive(pid));
    if !gone {
        // SAFETY: cleaning up the daemon this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(gone, "the daemon {pid} outlived tickbox");
    // Which wall did it: the fallback test must not have had a cgroup; the
    // other one has whatever this machine offers.
    if !env.is_empty() {
        assert!(!in_cgroup, "a cgroup was used: {cgroup}");
    } else {
        assert_eq!(
            in_cgroup,
            tickbox_runtime::backend::cgroup::available().is_ok(),
            "{cgroup}"
        );
    }
}

/// The signals pending for a process (thread and process-wide), as the
/// bits of `/proc/PID/status`; 0 for one that is gone.
fn signals_pending(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    ["SigPnd:", "ShdPnd:"]
        .iter()
        .filter_map(|field| {
            let line = status.lines().find_map(|l| l.strip_prefix(field))?;
            u64::from_str_radix(line.trim(), 16).ok()
        })
        .fold(0, |all, bits| all | bits)
}

#[test]
fn with_cgroup_v2_what_a_sigkilled_host_left_dies_at_the_next_start() {
    use std::os::unix::process::CommandExt;
    use tickbox_runtime::backend::cgroup;
    // This machine must let tickbox make cgroups: the subreaper alone
    // cannot cover a SIGKILLed host, so there is no fallback to test here.
    let own = cgroup::available()
        .unwrap_or_else(|why| panic!("no usable cgroup v2 here ({why}); this test needs one"));
    // The hosts of this test run in a cgroup of their own, so the start-up
    // sweep of tickboxes that other tests start meanwhile (in the parent
    // cgroup) cannot reach what this test leaves for its own next start.
    let arena = own.join(format!("walls-test-{}", std::process::id()));
    std::fs::create_dir(&arena).expect("a cgroup for this test");
    let procs = std::ffi::CString::new(arena.join("cgroup.procs").to_str().unwrap()).unwrap();
    let in_arena = |cmd: &mut std::process::Command| {
        let procs = procs.clone();
        // SAFETY: `enter` only opens, writes and closes.
        unsafe {
            cmd.pre_exec(move || {
                cgroup::enter(&procs);
                Ok(())
            });
        }
    };
    let dir = TempDir::new("cgroup-sigkill");
    let pidfile = dir.path("daemon.pid");
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"));
    host.args(["mcp", "--", "python3", &tick("doublefork.py")])
        .arg(&pidfile)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .env_remove("RUST_LOG");
    in_arena(&mut host);
    let mut host = host.spawn().expect("spawn tickbox mcp");
    let host_pid = host.id();
    let started = eventually(Duration::from_secs(20), || pidfile.exists());
    let daemon: i32 = if started {
        std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    } else {
        let _ = host.kill();
        panic!("the daemon was not started");
    };
    let kill_daemon = || {
        // SAFETY: cleaning up the daemon this test started.
        unsafe { libc::kill(daemon, libc::SIGKILL) };
    };
    // It is in its Tick's cgroup, under the host's name.
    let its = std::fs::read_to_string(format!("/proc/{daemon}/cgroup")).unwrap();
    if !its.contains(&format!("/tickbox-{host_pid}-")) {
        kill_daemon();
        let _ = host.kill();
        panic!("the daemon is not in a Tick cgroup: {its}");
    }
    // The host dies without a chance to sweep. Positive control: what it
    // left behind outlives it (its subreaper died with it).
    host.kill().unwrap();
    host.wait().unwrap();
    // The host is reaped, so whatever its death sends the daemon (a
    // parent-death signal, a hangup) was sent: the daemon is gone, dying,
    // or has it pending. Fixed sleep: it shows that nothing happens to the
    // daemon (an absence has no event). The pause gives a signal time to act; one still
    // pending after it (a slow machine) fails the check all the same.
    std::thread::sleep(Duration::from_millis(500));
    let pending = signals_pending(daemon);
    if !alive(daemon) || pending != 0 {
        kill_daemon();
        panic!(
            "the daemon died with its host (signals pending: {pending:#x}); the next start has \
             nothing to prove"
        );
    }
    // The next tickbox start (any command) kills it.
    let mut next = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"));
    next.args(["ls", "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    in_arena(&mut next);
    let status = next.status().expect("tickbox ls");
    let gone = eventually(PATIENCE, || !alive(daemon));
    if !gone {
        kill_daemon();
    }
    let leftovers: Vec<_> = std::fs::read_dir(&arena)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("tickbox-"))
        .map(|e| e.file_name())
        .collect();
    let _ = std::fs::remove_dir(&arena);
    assert!(status.success(), "{status}");
    assert!(gone, "the daemon {daemon} outlived the next start");
    assert!(leftovers.is_empty(), "cgroups left: {leftovers:?}");
}

// --- the live registry -------------------------------------------------------

#[test]
fn a_taken_registry_dir_in_tmp_is_not_a_denial_of_service() {
    let tmp = TempDir::new("registry-tmp");
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    // Someone else's file where our directory would go.
    std::fs::write(tmp.path(&format!("tickbox-{uid}")), "taken").unwrap();
    let env = [("XDG_RUNTIME_DIR", ""), ("TMPDIR", tmp.0.to_str().unwrap())];
    let out = tickbox_env(&["ls", "--json"], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let private: Vec<_> = std::fs::read_dir(&tmp.0)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("tickbox-{uid}-"))
        })
        .collect();
    assert_eq!(private.len(), 1, "one private directory was made");
}

// --- single-file grants ------------------------------------------------------

#[test]
fn a_granted_file_is_not_reachable_through_a_temp_dir_grant() {
    let runtime = TempDir::new("grant-runtime");
    std::fs::set_permissions(&runtime.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let tmp = TempDir::new("grant-tmp");
    let secret = TempDir::new("grant-secret");
    std::fs::write(secret.path("f.txt"), "read-only secret").unwrap();
    let env = [
        ("XDG_RUNTIME_DIR", runtime.0.to_str().unwrap()),
        ("TMPDIR", tmp.0.to_str().unwrap()),
    ];
    let file_grant = format!("{}::/secret/f.txt:ro", secret.path("f.txt").display());
    let tmp_grant = format!("{}::/scratch", tmp.0.display());
    let call = |tool: &str, args: Value| {
        let out = tickbox_env(
            &[
                "call",
                &hostile(),
                tool,
                &args.to_string(),
                "--yes",
                "--dir",
                &file_grant,
                "--dir",
                &tmp_grant,
            ],
            &env,
        );
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    };
    // Positive control: the file is readable where it was granted.
    let v = call("read_file", json!({"path": "/secret/f.txt"}));
    assert_eq!(v["value"], "read-only secret", "{v}");
    // The scratch grant (the temp dir) holds no trace of it.
    let v = call("list_dir", json!({"path": "/scratch"}));
    assert_eq!(v["value"], json!([]), "{v}");
    // Nor can a write through the scratch grant reach it.
    let v = call(
        "write_file",
        json!({"path": "/secret/f.txt", "text": "overwritten"}),
    );
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(
        std::fs::read_to_string(secret.path("f.txt")).unwrap(),
        "read-only secret"
    );
    // Each Tick's grant directory is gone when it ends.
    let area = runtime.0.join("tickbox").join("grants");
    assert_eq!(std::fs::read_dir(&area).unwrap().count(), 0, "{area:?}");

    // Without XDG_RUNTIME_DIR the grant area is in the temp dir, so the
    // temp dir itself can no longer be granted: refused, naming why.
    let env = [("XDG_RUNTIME_DIR", ""), ("TMPDIR", tmp.0.to_str().unwrap())];
    let out = tickbox_env(
        &[
            "call",
            &hostile(),
            "list_dir",
            r#"{"path":"/scratch"}"#,
            "--dir",
            &tmp_grant,
        ],
        &env,
    );
    out.expect(3, "overlaps tickbox's own state");
}

// --- symlinks in writable grants -------------------------------------------

/// A preview-1 module that asks for a symlink `link` → `target` in its first
/// preopen (fd 3) and exits with the errno it got.
fn p1_symlinker(target: &str) -> Vec<u8> {
    use wasm_encoder::{ConstExpr, DataSection, EntityType, ImportSection};
    let mut m = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32; 5], [ValType::I32]);
    types.ty().function([ValType::I32], []);
    types.ty().function([], []);
    m.section(&types);
    let mut imports = ImportSection::new();
    imports.import(
        "wasi_snapshot_preview1",
        "path_symlink",
        EntityType::Function(0),
    );
    imports.import(
        "wasi_snapshot_preview1",
        "proc_exit",
        EntityType::Function(1),
    );
    m.section(&imports);
    let mut funcs = FunctionSection::new();
    funcs.function(2);
    m.section(&funcs);
    let mut ms = MemorySection::new();
    ms.memory(memory(1));
    m.section(&ms);
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("_start", ExportKind::Func, 2);
    m.section(&exports);
    let mut f = Function::new([]);
    f.instructions()
        .i32_const(0)
        .i32_const(target.len() as i32)
        .i32_const(3)
        .i32_const(1024)
        .i32_const(4)
        .call(0)
        .call(1)
        .end();
    let mut code = CodeSection::new();
    code.function(&f);
    m.section(&code);
    let mut data = DataSection::new();
    data.active(0, &ConstExpr::i32_const(0), target.bytes());
    data.active(0, &ConstExpr::i32_const(1024), b"link".iter().copied());
    m.section(&data);
    m.finish()
}

#[test]
fn symlinks_cannot_be_created_in_a_writable_grant() {
    let data = TempDir::new("symlink-grant");
    let grant = format!("{}::/data", data.0.display());
    let target = "../../../etc/shadow";
    // A component: the guest gets `not-permitted`.
    let out = tickbox(&[
        "call",
        &hostile(),
        "symlink",
        &json!({"target": target}).to_string(),
        "--yes",
        "--dir",
        &grant,
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    let v = out.json();
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("not-permitted"),
        "{v}"
    );
    assert!(
        std::fs::symlink_metadata(data.path("link")).is_err(),
        "no link was made"
    );
    // Positive control: the same grant is writable.
    let out = tickbox(&[
        "call",
        &hostile(),
        "write_file",
        r#"{"path":"/data/w.txt","text":"ok"}"#,
        "--yes",
        "--dir",
        &grant,
    ]);
    assert_eq!(out.json()["ok"], true, "{out:#?}");

    // A preview-1 module: errno 63 (`perm`), which it returns as its status.
    let dir = TempDir::new("symlink-p1");
    let wasm = write_wasm(&dir, "sym.wasm", &p1_symlinker(target));
    tickbox(&["describe", &wasm, "--dir", &grant, "--no-cache"]).expect(3, "exit status 63");
    assert!(
        std::fs::symlink_metadata(data.path("link")).is_err(),
        "no link was made"
    );
}

#[test]
fn tickboxs_own_state_is_never_granted() {
    let cache = TempDir::new("own-state");
    let c = cache.0.to_str().unwrap();
    let env = [("TICKBOX_CACHE_DIR", c)];
    // Make the cache (and its key) exist.
    assert_eq!(tickbox_env(&["describe", &hostile()], &env).code, 0);
    let key = format!("{}::/k:ro", cache.path("mac.key").display());
    let whole = format!("{}::/c", cache.0.display());
    let parent = format!("{}::/p", cache.0.parent().unwrap().display());
    for grant in [&key, &whole, &parent] {
        tickbox_env(&["describe", &hostile(), "--dir", grant], &env)
            .expect(3, "overlaps tickbox's own state");
    }
    // Positive control: a sibling directory is fine.
    let sibling = TempDir::new("own-state-sibling");
    let grant = format!("{}::/s", sibling.0.display());
    assert_eq!(
        tickbox_env(&["describe", &hostile(), "--dir", &grant], &env).code,
        0
    );
}

// --- the write quota -----------------------------------------------------------

#[test]
fn writes_past_the_quota_are_the_guests_error() {
    let data = TempDir::new("quota");
    let grant = format!("{}::/q", data.0.display());
    let write = |name: &str, bytes: usize| {
        let out = tickbox(&[
            "call",
            &hostile(),
            "write_file",
            &json!({"path": format!("/q/{name}"), "text": "x".repeat(bytes)}).to_string(),
            "--yes",
            "--dir",
            &grant,
            "--max-write",
            "64KiB",
        ]);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    };
    // Positive control: within the quota.
    let v = write("small.txt", 10_000);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(data.path("small.txt")).unwrap().len(),
        10_000
    );
    // Past it: the guest's write fails, and no more than the quota landed.
    let v = write("big.txt", 100_000);
    assert_eq!(v["ok"], false, "{v}");
    let written = std::fs::metadata(data.path("big.txt")).unwrap().len();
    assert!(written <= 64 * 1024, "{written} bytes landed");
    // A preview-1 module cannot be metered: the quota is refused for it.
    tickbox(&["describe", &hostile_p1(), "--max-write", "1MiB"])
        .expect(3, "max_write needs a component");
    tickbox(&["describe", &hostile(), "--max-write", "much"]).expect(2, "--max-write much");
}

#[test]
fn writes_past_a_grants_own_quota_are_the_guests_error() {
    let q = TempDir::new("grant-quota");
    let free = TempDir::new("grant-quota-free");
    let quota_grant = format!("{}::/q:rw,max=64KiB", q.0.display());
    let free_grant = format!("{}::/free", free.0.display());
    let policy = TempDir::new("grant-quota-policy");
    let policy_file = policy.path("p.toml");
    std::fs::write(
        &policy_file,
        format!("dir = [{:?}, {:?}]\n", quota_grant, free_grant),
    )
    .unwrap();
    let write = |path: &str, bytes: usize, grants: &[&str]| {
        let args = json!({"path": path, "text": "x".repeat(bytes)}).to_string();
        let wasm = hostile();
        let mut argv = vec!["call", &wasm, "write_file", &args, "--yes"];
        argv.extend_from_slice(grants);
        let out = tickbox(&argv);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    };
    let flags = ["--dir", &quota_grant, "--dir", &free_grant];
    // Positive controls: within the grant's quota, and past it in a grant
    // without one.
    let v = write("/q/small.txt", 10_000, &flags);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(q.path("small.txt")).unwrap().len(),
        10_000
    );
    let v = write("/free/big.txt", 100_000, &flags);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(free.path("big.txt")).unwrap().len(),
        100_000
    );
    // Past it: the guest's write fails, and no more than the quota landed.
    let v = write("/q/big.txt", 100_000, &flags);
    assert_eq!(v["ok"], false, "{v}");
    // (wasi-libc writes files through a stream, and reports a stream's
    // failure as EIO whatever its cause.)
    let landed = std::fs::metadata(q.path("big.txt")).unwrap().len();
    assert!(landed <= 64 * 1024, "{landed} bytes landed");
    // Beside a larger --max-write, the grant's own quota still holds.
    let v = write(
        "/q/big2.txt",
        100_000,
        &["--dir", &quota_grant, "--max-write", "1MiB"],
    );
    assert_eq!(v["ok"], false, "{v}");
    // The same grant from a policy file.
    let p = policy_file.to_string_lossy().into_owned();
    let v = write("/q/big3.txt", 100_000, &["--policy", &p]);
    assert_eq!(v["ok"], false, "{v}");
    let v = write("/free/big3.txt", 100_000, &["--policy", &p]);
    assert_eq!(v["ok"], true, "{v}");
    // A preview-1 module cannot be metered: refused at start.
    tickbox(&["describe", &hostile_p1(), "--dir", &quota_grant])
        .expect(3, "a dir write quota (max=) needs a component");
    let bad = format!("{}::/q:rw,max=lots", q.0.display());
    tickbox(&["describe", &hostile(), "--dir", &bad]).expect(2, "max= expects a size");
    let ro = format!("{}::/q:ro,max=1MiB", q.0.display());
    tickbox(&["describe", &hostile(), "--dir", &ro])
        .expect(2, "a read-only grant takes no write quota");
}
