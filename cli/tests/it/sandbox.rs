//! The wasm sandbox as the `tickbox` binary drives it: each grant flag
//! and a policy file reach the sandbox, bad grants are usage errors, a trap
//! is one line and the Tick's last words, `tickbox info` shows what was
//! granted and requested. What a hostile guest can and cannot reach under
//! its grants, and every limit's wall, are tested in tickbox-sandbox's own
//! tests through its library API.

use crate::util::*;
use serde_json::{json, Value};

/// `tickbox call <hostile> TOOL ARGS [flags...]`, expecting a JSON result.
fn attempt(tool: &str, args: Value, flags: &[&str]) -> Value {
    let out = attempt_raw(tool, args, flags);
    assert_eq!(out.code, 0, "{out:#?}");
    out.json()
}

fn attempt_raw(tool: &str, args: Value, flags: &[&str]) -> Output {
    let wasm = hostile();
    let mut argv = vec![
        "call".to_string(),
        wasm,
        tool.to_string(),
        args.to_string(),
        "--yes".into(),
    ];
    argv.extend(flags.iter().map(|s| s.to_string()));
    tickbox(&argv)
}

fn denied(v: &Value) -> bool {
    v["ok"] == json!(false)
}

#[test]
fn traps_end_the_session_with_one_line() {
    let out = attempt_raw("recurse", json!({}), &[]);
    out.expect(4, "the guest trapped");
    // One error line (no backtrace), then the Tick's last words; first, a
    // compile notice when compiling took over a second (a loaded machine).
    let notice = |l: &&str| l.starts_with("tickbox: compiling ");
    let lines: Vec<&str> = out.stderr.lines().filter(|l| !notice(l)).collect();
    assert!(lines[0].starts_with("tickbox: "), "{out:#?}");
    assert_eq!(
        &lines[1..],
        [
            "  the Tick's last words (the end of its screen):",
            "  | hostile ready"
        ],
        "{out:#?}"
    );
}

#[test]
fn each_grant_flag_reaches_the_sandbox() {
    let dir = data_dir();
    let ro = format!("{}::/data:ro", dir.0.display());
    // --dir: the grant, read-only as written.
    let v = attempt(
        "read_file",
        json!({"path": "/data/hello.txt"}),
        &["--dir", &ro],
    );
    assert_eq!(v["value"], "hello from the host", "{v}");
    let v = attempt(
        "write_file",
        json!({"path": "/data/new.txt", "text": "x"}),
        &["--dir", &ro],
    );
    assert!(denied(&v), "{v}");
    // --allow-net: a granted name may be looked up; without it, none.
    let lookup = json!({"name": "localhost"});
    assert!(denied(&attempt("lookup", lookup.clone(), &[])));
    let v = attempt("lookup", lookup, &["--allow-net", "localhost:80"]);
    assert_eq!(v["ok"], true, "{v}");
    // --env: a variable of tickbox's own environment by name, or a value.
    let wasm = hostile();
    let secret = [("TICKBOX_TEST_SECRET", "hunter2")];
    let env = |flags: &[&str]| {
        let mut argv = vec![
            "call",
            wasm.as_str(),
            "env",
            r#"{"name":"TICKBOX_TEST_SECRET"}"#,
        ];
        argv.extend(flags);
        tickbox_env(&argv, &secret).json()["value"].clone()
    };
    assert_eq!(env(&[]), Value::Null);
    assert_eq!(env(&["--env", "TICKBOX_TEST_SECRET"]), "hunter2");
    assert_eq!(env(&["--env", "TICKBOX_TEST_SECRET=other"]), "other");
    // --max-memory: past it the session ends, exit 4.
    attempt_raw("grow", json!({"mb": 100}), &["--max-memory", "32MiB"])
        .expect(4, "max_memory is 33554432 bytes");
    // --max-handles: past it opening is the guest's error.
    let data = format!("{}::/data", dir.0.display());
    let many = json!({"path": "/data/hello.txt", "n": 100_000});
    let v = attempt("open_many", many, &["--dir", &data, "--max-handles", "200"]);
    assert_eq!(v["ok"], false, "{v}");
    // --max-write: past it writing is the guest's error.
    let big = json!({"path": "/data/big.txt", "text": "x".repeat(100_000)});
    let v = attempt("write_file", big, &["--dir", &data, "--max-write", "64KiB"]);
    assert_eq!(v["ok"], false, "{v}");
    // --max-wasm-size: a file past it is refused, exit 3.
    tickbox(&["describe", &hostile(), "--max-wasm-size", "1KiB"])
        .expect(3, "larger than max_wasm_size (1024 bytes)");
    // A grant's own quota (max=) from a policy file.
    let policy = dir.path("quota.toml");
    std::fs::write(
        &policy,
        format!(
            "dir = [{:?}]\n",
            format!("{}::/q:rw,max=64KiB", dir.0.display())
        ),
    )
    .unwrap();
    let p = policy.to_string_lossy().into_owned();
    let big = json!({"path": "/q/big.txt", "text": "x".repeat(100_000)});
    assert_eq!(attempt("write_file", big, &["--policy", &p])["ok"], false);
    // Positive control for all of the above: the same Tick, its defaults.
    let small = json!({"path": "/data/small.txt", "text": "ok"});
    let v = attempt("write_file", small, &["--dir", &data]);
    assert_eq!(v["ok"], true, "{v}");
}

#[test]
fn bad_grants_are_usage_errors() {
    let wasm = hostile();
    tickbox(&["read", &wasm, "--dir", "/no/such/dir"]).expect(2, "--dir /no/such/dir");
    tickbox(&["read", &wasm, "--allow-net", "*:80"]).expect(2, "wildcards");
    tickbox(&["read", &wasm, "--env", "TICKBOX_SURELY_UNSET_VAR"]).expect(2, "not set");
    tickbox(&["read", &wasm, "--max-memory", "lots"]).expect(2, "--max-memory lots");
    tickbox(&["read", &wasm, "--max-wasm-size", "lots"]).expect(2, "--max-wasm-size lots");
    tickbox(&["read", &wasm, "--max-handles", "0"]).expect(2, "--max-handles 0");
    tickbox(&["read", &wasm, "--max-write", "much"]).expect(2, "--max-write much");
    let q = TempDir::new("bad-quota");
    let bad = format!("{}::/q:rw,max=lots", q.0.display());
    tickbox(&["read", &wasm, "--dir", &bad]).expect(2, "max= expects a size");
    let ro = format!("{}::/q:ro,max=1MiB", q.0.display());
    tickbox(&["read", &wasm, "--dir", &ro]).expect(2, "a read-only grant takes no write quota");
    tickbox(&[
        "read",
        "--dir",
        "/tmp",
        "--",
        "python3",
        &tick("counter.py"),
    ])
    .expect(2, "wasm Ticks only");
    let dir = TempDir::new("notwasm");
    std::fs::write(dir.path("x.wasm"), "not wasm").unwrap();
    tickbox(&["read", dir.path("x.wasm").to_str().unwrap()]).expect(3, "not a readable wasm");
}

#[test]
fn policy_files_grant_and_info_shows_grants_and_requests() {
    let dir = data_dir();
    let policy = dir.path("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "dir = [\"{}::/data:ro\"]\nallow_net = [\"127.0.0.1:9\"]\nmax_memory = \"64MiB\"\n",
            dir.0.display()
        ),
    )
    .unwrap();
    let p = policy.to_str().unwrap();
    let v = attempt(
        "read_file",
        json!({"path": "/data/hello.txt"}),
        &["--policy", p],
    );
    assert_eq!(v["value"], "hello from the host");
    // A manifest may not name a host path: refused before anything starts.
    let copy = dir.path("asker.wasm");
    std::fs::copy(hostile(), &copy).unwrap();
    let c = copy.to_str().unwrap();
    std::fs::write(
        dir.path("asker.tick.toml"),
        "dir = [\"/etc::/etc\"]\nenv = [\"HOME\"]\n",
    )
    .unwrap();
    tickbox(&["info", c, "--policy", p]).expect(2, "guest paths only");
    // A guest path is what it may ask for; granted only once approved
    // (`consent` tests the rest), and even then the host directory is the
    // person's to map: /etc stays out of reach.
    std::fs::write(
        dir.path("asker.tick.toml"),
        "dir = [\"/etc\"]\nenv = [\"HOME\"]\n",
    )
    .unwrap();
    tickbox(&["info", c, "--policy", p]).expect(2, "tickbox trust");
    // Apart from the granted directory: no grant may contain the store.
    let trust = TempDir::new("sandbox-trust");
    let env = [("TICKBOX_TRUST_DIR", trust.0.to_str().unwrap())];
    assert_eq!(tickbox_env(&["trust", c], &env).code, 0);
    let out = tickbox_env(&["info", c, "--policy", p], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let info = out.json();
    assert_eq!(info["backend"], "wasm");
    assert_eq!(info["wasm"], "component");
    assert_eq!(info["granted"]["max_memory"], 64 << 20);
    assert_eq!(info["granted"]["dirs"][0]["guest"], "/data");
    assert_eq!(info["granted"]["dirs"][0]["read_only"], true);
    assert_eq!(info["granted"]["dirs"].as_array().unwrap().len(), 1);
    assert_eq!(info["granted"]["env"], json!(["HOME"]));
    assert_eq!(
        info["granted"]["net"][0],
        json!({"host": "127.0.0.1", "port": 9})
    );
    assert_eq!(info["requested"]["dir"], json!(["/etc"]));
    let out = tickbox_env(&["call", c, "read_file", r#"{"path":"/etc/passwd"}"#], &env);
    assert!(out.stderr.contains("--dir HOST::/etc"), "{out:#?}");
    let v = out.json();
    assert!(denied(&v), "the manifest's dir was not mapped: {v}");
}
