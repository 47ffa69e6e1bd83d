//! The audit stream (`--audit`, docs/AUDIT.md) as the binary writes it:
//! the approvals `--yes` gives or withholds; the bounds its variables
//! set; `--audit -` on stderr and
//! never on stdout; the live host's own file rotated at its bound; the MCP
//! config's and a policy's `audit` keys; SIGKILL under `--audit-sync`;
//! a destination that cannot be used is one line and exit 2; a signal
//! ends a command blocked on a FIFO. What a start records (through
//! `tickbox_app::App::open`) is tested in `app/tests/it/audit.rs`, the
//! facade's Ticks' streams in tickbox-mcp's `tests/it/audit.rs`.

use crate::live::World;
use crate::mcp_wire::Raw;
use crate::util::*;
use serde_json::{json, Value};
use tickbox_test_support::audit::{events, of};

/// `--yes` approves a mutating call on the command line and the stream
/// says so (granted, by `--yes`; its arguments recorded with
/// `--audit-args`); without it the call is refused (exit 2), the refusal
/// recorded and the call never sent. What a start records besides (its
/// grants, calls, denials, limits and end) is tickbox-app's to test
/// (`app/tests/it/audit.rs`).
#[test]
fn a_mutating_calls_approval_by_yes_and_its_refusal_are_recorded() {
    let dir = TempDir::new("audit-approval");
    let data = TempDir::new("audit-approval-data");
    let file = dir.path("audit.jsonl");
    let audit = file.to_str().unwrap();
    let wasm = hostile();
    let grant = format!("{}::/data", data.0.display());
    let write = |text: &str, extra: &[&str]| {
        let args = json!({"path": "/data/new.txt", "text": text}).to_string();
        let mut argv = vec!["call", wasm.as_str(), "write_file", &args, "--dir", &grant];
        argv.extend_from_slice(&["--audit", audit]);
        argv.extend_from_slice(extra);
        tickbox(&argv)
    };
    let out = write("written", &["--yes", "--audit-args"]);
    assert_eq!(out.json()["ok"], true, "{out:#?}");
    write("refused", &[]).expect(2, "approval required");

    let all = events(&file);
    assert_eq!(of(&all, "start", None).len(), 2, "{all:#?}");
    assert_eq!(of(&all, "end", None).len(), 2, "{all:#?}");
    let approvals = of(&all, "approval", None);
    assert_eq!(approvals.len(), 2, "{approvals:#?}");
    assert!(approvals.iter().all(|a| a["subject"] == "write_file"));
    assert_eq!(approvals[0]["granted"], true);
    assert!(approvals[0]["by"].as_str().unwrap().contains("--yes"));
    assert_eq!(approvals[1]["granted"], false);
    let calls = of(&all, "call", None);
    assert_eq!(
        calls.len(),
        1,
        "the refused call was never sent: {calls:#?}"
    );
    assert_eq!(calls[0]["mutates"], true);
    assert_eq!(calls[0]["args"]["text"], "written");
}

/// The binary reads the audit bounds from its variables: a session past
/// `TICKBOX_AUDIT_SESSION_MAX_SIZE` says what was dropped, and a file is
/// rotated at `TICKBOX_AUDIT_MAX_SIZE`. What the bounds do is tickbox-app's
/// to test (`app/tests/it/audit.rs`).
#[test]
fn the_audit_size_variables_bound_a_session_and_a_file() {
    let dir = TempDir::new("audit-sizes");
    let file = dir.path("audit.jsonl");
    let audit = file.to_str().unwrap();
    let wasm = hostile();
    let grant = format!("{}::/data", dir.0.display());
    let args = json!({"path": "/data/../x", "n": 100}).to_string();
    let argv = ["call", &wasm, "refuse_loop", &args, "--dir", &grant];
    let out = tickbox_env(
        &[&argv[..], &["--audit", audit]].concat(),
        &[("TICKBOX_AUDIT_SESSION_MAX_SIZE", "400")],
    );
    assert_eq!(out.json()["refused"], 100, "{out:#?}");
    assert_eq!(of(&events(&file), "unrecorded", None).len(), 1);
    for i in 0..6 {
        let args = json!({"i": i}).to_string();
        let argv = [
            "call",
            &wasm,
            "echo",
            &args,
            "--audit",
            audit,
            "--audit-args",
        ];
        let out = tickbox_env(&argv, &[("TICKBOX_AUDIT_MAX_SIZE", "2KiB")]);
        assert_eq!(out.code, 0, "{out:#?}");
    }
    assert!(dir.path("audit.jsonl.1").exists(), "rotated at 2 KiB");
}

/// `--audit -`: the stream is on stderr; stdout carries only the result.
#[test]
fn audit_to_dash_goes_to_stderr_and_never_stdout() {
    let wasm = hostile();
    let out = tickbox(&["call", &wasm, "echo", r#"{"a":1}"#, "--audit", "-"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json(), json!({"a": 1}), "stdout is the result alone");
    assert!(!out.stdout.contains("\"event\""), "{out:#?}");
    let lines: Vec<Value> = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let kinds: Vec<&str> = lines.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["start", "call", "end"], "{out:#?}");
}

/// A live host writes its own audit file in the state directory, rotated
/// at its bound (set low for the test), older files kept beside it.
#[test]
fn the_live_hosts_audit_file_rotates_at_its_bound() {
    let w = World::new("audit-live");
    let counter = tick("counter.py");
    let bound: u64 = 2048;
    let _host = w.pty_env(
        &["run", "--name", "au", "--", "python3", &counter],
        80,
        24,
        &[("TICKBOX_LIVE_AUDIT_MAX_SIZE", "2KiB")],
    );
    w.wait_for("au");
    let calls = 12;
    for _ in 0..calls {
        let out = w.tickbox(&["call", "@au", "history"]);
        assert_eq!(out.code, 0, "{out:#?}");
    }
    let audit_dir = w.dir.path("tickbox/audit");
    let files = || -> Vec<std::path::PathBuf> {
        let mut f: Vec<_> = std::fs::read_dir(&audit_dir)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        f.sort();
        f
    };
    // The host writes from its own thread: wait for every call to land.
    let count_calls = || -> usize {
        files()
            .iter()
            .flat_map(|p| events(p))
            .filter(|e| e["event"] == "call")
            .count()
    };
    assert!(
        eventually(std::time::Duration::from_secs(30), || count_calls()
            == calls),
        "{} calls recorded in {:?}",
        count_calls(),
        files()
    );
    let found = files();
    let current: Vec<_> = found
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(current.len(), 1, "one file per host: {found:?}");
    let rotated = current[0].with_extension("jsonl.1");
    assert!(rotated.exists(), "rotated at the bound: {found:?}");
    for f in &found {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(
            size <= bound,
            "{} is {size} bytes, over {bound}",
            f.display()
        );
    }
    let all: Vec<Value> = found.iter().flat_map(|p| events(p)).collect();
    let start = all
        .iter()
        .find(|e| e["event"] == "start")
        .expect("the start kept");
    assert_eq!(start["origin"], "live_host");
}

/// `tickbox mcp --config` with `audit` (relative to the config) and
/// `audit_args`: every hosted Tick's start, calls and end, from MCP.
#[test]
fn an_mcp_configs_audit_key_records_its_ticks() {
    let dir = TempDir::new("audit-mcp");
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!(
            "audit = \"audit.jsonl\"\naudit_args = true\n\n[[tick]]\nname = \"c\"\ncommand = [\"python3\", \"{}\"]\n",
            tick("counter.py")
        ),
    )
    .unwrap();
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    let r = mcp.call(2, "history", json!({}));
    assert_ne!(r["isError"], true, "{r}");
    let (code, stderr) = mcp.close();
    assert_eq!(code, 0, "{stderr}");
    let all = events(&dir.path("audit.jsonl"));
    let kinds: Vec<&str> = all.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["start", "call", "end"], "{all:#?}");
    assert_eq!(all[0]["origin"], "mcp");
    assert_eq!(all[1]["tool"], "history");
    assert_eq!(all[1]["args"], json!({}), "audit_args = true");
    // Positive control of the key: without it, no file.
    std::fs::write(
        &config,
        format!(
            "[[tick]]\nname = \"c\"\ncommand = [\"python3\", \"{}\"]\n",
            tick("counter.py")
        ),
    )
    .unwrap();
    std::fs::remove_file(dir.path("audit.jsonl")).unwrap();
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    mcp.call(2, "history", json!({}));
    let (code, _) = mcp.close();
    assert_eq!(code, 0);
    assert!(!dir.path("audit.jsonl").exists());
}

/// A destination that cannot be opened is one line and exit 2; a link
/// planted where the file goes is not followed. (A policy's `audit` key is
/// tickbox-app's: `app/tests/it/audit.rs`.)
#[test]
fn a_bad_audit_destination_is_one_line_and_exit_2() {
    let dir = TempDir::new("audit-policy");
    let wasm = hostile();
    let link = dir.path("link.jsonl");
    std::os::unix::fs::symlink(dir.path("elsewhere"), &link).unwrap();
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        link.to_str().unwrap(),
    ]);
    out.expect(2, "--audit");
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    assert!(!dir.path("elsewhere").exists());
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        "/nonexistent/dir/a.jsonl",
    ]);
    out.expect(2, "cannot open");
}

/// Which of these calls (by the `nonce` in their recorded arguments) are
/// not in the audit file: the detector of the SIGKILL test.
fn missing_calls(file: &std::path::Path, nonces: &[String]) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let recorded: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| e["event"] == "call")
        .collect();
    nonces
        .iter()
        .filter(|n| !recorded.iter().any(|e| e["args"]["nonce"] == n.as_str()))
        .cloned()
        .collect()
}

/// Rounds of: a fresh `tickbox mcp` (wasm Tick, audit arguments recorded,
/// `extra` flags), one `tools/call` answered, SIGKILL at once. The nonces
/// of the calls whose answer came, each round's file.
fn answered_then_killed(
    dir: &TempDir,
    tag: &str,
    rounds: usize,
    extra: &[&str],
) -> Vec<(String, std::path::PathBuf)> {
    let wasm = hostile();
    (0..rounds)
        .map(|round| {
            let file = dir.path(&format!("{tag}-{round}.jsonl"));
            let mut args: Vec<String> = vec![
                "--audit".into(),
                file.display().to_string(),
                "--audit-args".into(),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            args.push(wasm.clone());
            let mut mcp = Raw::start(&args);
            mcp.initialize("2025-06-18");
            let nonce = format!("{tag}-{round}-{}", std::process::id());
            let r = mcp.call(1, "echo", json!({"nonce": nonce}));
            // The answer is here: the host dies now, before anything else.
            mcp.kill_now();
            assert_eq!(r["structuredContent"]["nonce"], nonce.as_str(), "{r}");
            (nonce, file)
        })
        .collect()
}

/// `--audit-sync`: a call's answer is released only once its line is
/// written and fdatasync'ed, so SIGKILL right after the answer never
/// loses it: many rounds, nothing missing. Positive controls of the
/// detector: without `--audit-sync` the batching (25 ms) loses the line
/// of a call killed right after its answer in some rounds, and a line
/// removed by hand from a synced file is reported missing.
#[test]
fn an_answered_call_survives_sigkill_under_audit_sync() {
    let dir = TempDir::new("audit-sync");
    let synced = answered_then_killed(&dir, "synced", 20, &["--audit-sync"]);
    for (nonce, file) in &synced {
        assert_eq!(
            missing_calls(file, std::slice::from_ref(nonce)),
            Vec::<String>::new(),
            "an answered call is not on record: {}",
            std::fs::read_to_string(file).unwrap_or_default()
        );
    }
    // Positive control: batched (25 ms), the detector sees a line missing
    // within a few rounds (each round's kill comes well within the batch
    // wait; up to 20 rounds, so a loaded machine's stall in one is not the
    // test's failure).
    let lost = (0..20).find(|round| {
        let (n, f) = answered_then_killed(&dir, &format!("batched{round}"), 1, &[]).remove(0);
        !missing_calls(&f, std::slice::from_ref(&n)).is_empty()
    });
    assert!(lost.is_some(), "no batched round lost its call line");
    // Positive control: a line removed by hand is reported.
    let (nonce, file) = &synced[0];
    let text = std::fs::read_to_string(file).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.contains(nonce.as_str()))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(file, kept).unwrap();
    let reported = missing_calls(file, std::slice::from_ref(nonce));
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(&reported[0], nonce);
}

/// The `audit_sync` key of an MCP config (SIGKILL after the answer loses
/// no line), and `--audit-sync` with no file to sync (one line, exit 2).
/// A policy's audit keys are tickbox-app's to read (`app/tests/it/audit.rs`).
#[test]
fn audit_sync_keys_and_a_stream_that_cannot_be_synced() {
    let dir = TempDir::new("audit-sync-keys");
    let wasm = hostile();
    let config = dir.path("ticks.toml");
    let keys = "audit = \"audit.jsonl\"\naudit_sync = true\naudit_args = true";
    let tick = format!("[[tick]]\nname = \"calm\"\npath = \"{wasm}\"\n");
    std::fs::write(&config, format!("{keys}\n\n{tick}")).unwrap();
    let mut mcp = Raw::start(&["--config".into(), config.display().to_string()]);
    mcp.initialize("2025-06-18");
    let r = mcp.call(1, "echo", json!({"nonce": "keyed"}));
    mcp.kill_now();
    assert_eq!(r["structuredContent"]["nonce"], "keyed");
    let nonce = ["keyed".to_string()];
    assert!(missing_calls(&dir.path("audit.jsonl"), &nonce).is_empty());

    for argv in [
        vec!["call", wasm.as_str(), "echo", "{}", "--audit-sync"],
        vec![
            "call",
            wasm.as_str(),
            "echo",
            "{}",
            "--audit",
            "-",
            "--audit-sync",
        ],
    ] {
        let out = tickbox(&argv);
        out.expect(2, "only an audit file can be synced");
        assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    }
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// An audit path that is not a regular file (a FIFO with or without a
/// reader, a directory, a device), from the flag, a policy's key or an MCP
/// config's, is one line and exit 2 at once: opening a FIFO used to wait
/// for a reader for ever. A regular file is the positive control.
#[test]
fn an_audit_path_that_is_not_a_regular_file_is_one_line_and_exit_2_at_once() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = TempDir::new("audit-fifo");
    let fifo = dir.path("audit.fifo");
    mkfifo(&fifo);
    let wasm = hostile();
    let quick = std::time::Duration::from_secs(30);
    let refused = |argv: &[&str]| {
        let out = tickbox_within(argv, &[], quick);
        out.expect(2, "not a regular file");
        assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    };
    let f = fifo.to_str().unwrap();
    refused(&["call", &wasm, "echo", "{}", "--audit", f]);
    // With a reader on it, where an open for writing succeeds at once.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    refused(&["call", &wasm, "echo", "{}", "--audit", f, "--audit-sync"]);
    drop(reader);
    refused(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        dir.0.to_str().unwrap(),
    ]);
    refused(&["call", &wasm, "echo", "{}", "--audit", "/dev/null"]);
    let policy = dir.path("policy.toml");
    std::fs::write(&policy, "audit = \"audit.fifo\"\n").unwrap();
    refused(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let config = dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!("audit = \"audit.fifo\"\n\n[[tick]]\nname = \"h\"\npath = \"{wasm}\"\n"),
    )
    .unwrap();
    let out = tickbox_within(&["mcp", "--config", config.to_str().unwrap()], &[], quick);
    out.expect(2, "not a regular file");
    // Positive control: a regular file.
    let plain = dir.path("plain.jsonl");
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--audit",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(events(&plain)[0]["event"], "start");
}

/// SIGTERM and SIGINT reach a command blocked in an open before its Tick
/// starts: a `--policy` that is a FIFO whose writer never writes (a read
/// that waits for ever) and a Tick path that is a FIFO with no writer.
/// Each used to ignore both signals; now it ends with exit 130 and one
/// line. The positive control: the same command with a regular policy
/// file runs.
#[test]
fn a_signal_ends_a_command_blocked_opening_a_fifo() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = TempDir::new("audit-fifo-signal");
    let wasm = hostile();
    let policy = dir.path("policy.fifo");
    mkfifo(&policy);
    let tick_fifo = dir.path("tick.wasm");
    mkfifo(&tick_fifo);
    let cases: [(&[&str], i32); 2] = [
        (
            &[
                "call",
                &wasm,
                "echo",
                "{}",
                "--policy",
                policy.to_str().unwrap(),
            ],
            libc::SIGTERM,
        ),
        (
            &["call", tick_fifo.to_str().unwrap(), "echo", "{}"],
            libc::SIGINT,
        ),
    ];
    for (argv, signal) in cases {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .args(argv)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .env("TICKBOX_CACHE_DIR", wasm_cache())
            .env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"))
            .spawn()
            .unwrap();
        // Blocked once it holds the FIFO's other end: an open for writing
        // that does not block succeeds only when a reader is there.
        let fifo = if argv.contains(&"--policy") {
            &policy
        } else {
            &tick_fifo
        };
        let mut writer = None;
        assert!(
            eventually(std::time::Duration::from_secs(60), || {
                writer = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(fifo)
                    .ok();
                writer.is_some()
            }),
            "tickbox never opened the FIFO"
        );
        // SAFETY: kill(2) of the child this test started.
        unsafe { libc::kill(child.id() as i32, signal) };
        let ended = exits_within(child.id(), std::time::Duration::from_secs(30));
        if !ended {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        assert!(ended, "{argv:?} ignored the signal");
        let mut stderr = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert_eq!(status.code(), Some(130), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("interrupted"), "{stderr}");
        drop(writer);
    }
    // Positive control: a regular policy file.
    let plain = dir.path("policy.toml");
    std::fs::write(&plain, "max_memory = \"64MiB\"\n").unwrap();
    let out = tickbox(&[
        "call",
        &wasm,
        "echo",
        "{}",
        "--policy",
        plain.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
}
