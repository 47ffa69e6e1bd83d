//! The sandbox's outer walls as the `tickbox` binary shows them: the cache
//! variables and commands, the host process's own memory while a Tick
//! fills its budget, compilation bounded in the `tickbox` compile worker,
//! native process hygiene (a cgroup per Tick where cgroup v2 allows, the
//! subreaper otherwise, and the sweep at the next start), and a file
//! grant beside the grant area that the runtime directory variables place
//! (the live registry's directory in a shared temp dir is tickbox-host's
//! `live` test). Each wall has a test that hits it
//! and a positive control under the same limits. The walls the library
//! keeps on its own (grants, handle caps, write quotas, the cache's
//! trust, what a Tick may define) are tested in tickbox-sandbox's tests.

use crate::util::*;
use serde_json::{json, Value};
use std::{os::unix::fs::PermissionsExt, path::Path, sync::Arc, time::Duration, time::Instant};
use tickbox_runtime::backend::wasm::grants::GrantSpec;
use tickbox_runtime::backend::wasm::{spawn, WasmEngine, WasmSpec};
use tickbox_runtime::session::{CallOutcome, Session, SessionConfig};
use tickbox_test_support::wasm::{compile_bomb, grower, write_wasm};

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
//
// The cache's own rules (private directory, MAC, cap) are the sandbox's,
// tested in its crate; here is what the binary adds: the variables that
// place and cap it, `--no-cache`, the warning for a refused directory and
// `tickbox cache ls|clean`.

#[test]
fn the_cache_variables_flag_and_commands_reach_the_cache() {
    let cache = TempDir::new("cache-cli");
    let c = cache.0.to_str().unwrap();
    let env = [
        ("TICKBOX_CACHE_DIR", c),
        ("RUST_LOG", "tickbox_sandbox=info"),
        // One compile, one entry (tiering is `tiers`' subject).
        ("TICKBOX_COMPILER", "cranelift"),
    ];
    let describe = |wasm: &str, extra: &[(&str, &str)]| {
        let mut all = env.to_vec();
        all.extend_from_slice(extra);
        tickbox_env(&["describe", wasm], &all)
    };
    assert_eq!(
        tickbox_env(&["describe", &hostile(), "--no-cache"], &env).code,
        0
    );
    assert!(
        cache_entries(&cache.0).is_empty(),
        "--no-cache writes nothing"
    );
    assert_eq!(describe(&hostile(), &[]).code, 0);
    let first = cache_entries(&cache.0);
    assert_eq!(first.len(), 1);
    let out = describe(&hostile(), &[]);
    assert!(out.stderr.contains("compile cache hit"), "{out:#?}");
    // Under a 1 KiB cap only the entry just written stays.
    let out = describe(&hostile_p1(), &[("TICKBOX_CACHE_MAX_SIZE", "1KiB")]);
    assert_eq!(out.code, 0, "{out:#?}");
    let second = cache_entries(&cache.0);
    assert_eq!(second.len(), 1);
    assert_ne!(first, second, "the older entry was evicted");

    // Without the cap both stay; `cache ls` shows them, `clean` empties it.
    assert_eq!(describe(&hostile(), &[]).code, 0);
    let ls = tickbox_env(&["cache", "ls"], &env);
    assert_eq!(ls.code, 0, "{ls:#?}");
    let v = ls.json();
    assert_eq!(v["entries"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["total_bytes"].as_u64().unwrap() > 0);
    let clean = tickbox_env(&["cache", "clean"], &env);
    assert_eq!(clean.json()["removed"], 2, "{clean:#?}");
    assert!(cache_entries(&cache.0).is_empty());

    // A directory others can write: the Tick runs without the cache, with
    // a warning saying why, and the subcommands refuse it.
    std::fs::set_permissions(&cache.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = describe(&hostile(), &[]);
    out.expect(0, "group or others can write to it");
    assert!(
        out.stderr.contains("running without the compile cache"),
        "{out:#?}"
    );
    assert!(out.json()["tools"].is_array(), "the Tick still runs");
    assert!(cache_entries(&cache.0).is_empty(), "nothing written there");
    tickbox_env(&["cache", "ls"], &env).expect(3, "group or others can write");
}

// --- one memory budget per Tick --------------------------------------------

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
