//! Ticks from a registry (`oci://`) as only the binary takes them: `pull`'s,
//! `push`'s and `verify`'s JSON and exit codes, `cache clean`, `tickbox
//! test`, `tickbox trust`, `tickbox mcp` and `tickbox run` given a
//! reference, the lock in the working directory, the files `policy show`
//! and `tickbox mcp` find from flags, variables and default paths, and the
//! flag a refusal names. A real OCI registry (Debian's `docker-registry`,
//! installed by tests/setup.sh) is started on loopback for each test and
//! stopped at its end. Pulls, pushes, the signers policy, the lock and
//! consent themselves are the application layer's, tested in
//! `app/tests/it/registry.rs`.

use crate::util::{tickbox_env, tickbox_in, Output, TempDir};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tickbox_test_support::build_wasm;
use tickbox_test_support::registry::{fake_with_plain_http_realm, ssh_key, Registry};

/// A signers policy file's path as an argument (see `tickbox_test_support::registry::policy_file`).
fn policy_file(
    dir: &TempDir,
    name: &str,
    top: &str,
    patterns: &[&str],
    allowed: &[&str],
) -> String {
    tickbox_test_support::registry::policy_file(dir, name, top, patterns, allowed)
        .display()
        .to_string()
}

/// A signers policy for every repository under `prefix`, as an argument.
fn signers_policy(dir: &TempDir, name: &str, prefix: &str, allowed: &[&str]) -> String {
    tickbox_test_support::registry::signers_policy(dir, name, prefix, allowed)
        .display()
        .to_string()
}

/// `tickbox` in the working directory `dir` (for what it finds there, such
/// as `./tickbox.lock`), failing the test after 60 s.
fn tickbox_here<S: AsRef<str>>(dir: &Path, args: &[S], env: &[(&str, &str)]) -> Output {
    tickbox_in(dir, args, env, Duration::from_secs(60))
}

fn counter() -> PathBuf {
    build_wasm("examples", "counter", "wasm32-wasip2")
}

/// The environment of one test: its own store, and a config directory of
/// its own (so no signers policy at the user's default path applies).
fn env(store: &TempDir) -> Vec<(&'static str, String)> {
    vec![
        (
            "TICKBOX_STORE_DIR",
            store.path("store").display().to_string(),
        ),
        (
            "XDG_CONFIG_HOME",
            store.path("config").display().to_string(),
        ),
    ]
}

fn run(args: &[&str], env: &[(&'static str, String)]) -> Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    tickbox_env(args, &env)
}

fn stored_blobs(store: &TempDir) -> usize {
    std::fs::read_dir(store.path("store"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// `pull` prints the pinned reference and whether the registry was asked;
/// `tickbox test` takes a scenario naming the Tick by reference; `cache
/// clean` empties the store, so a pinned reference needs the registry again.
#[test]
fn pull_test_and_cache_clean_take_a_pushed_tick_by_reference() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let env = env(&store);
    let by_tag = registry.reference("other/counter:v1");
    let pushed = run(&["push", &by_tag, &counter().display().to_string()], &env);
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let pushed = pushed.json();
    let pulled = run(&["pull", &by_tag], &env);
    assert_eq!(pulled.code, 0, "{pulled:#?}");
    let p = pulled.json();
    assert_eq!(p["reference"], pushed["reference"]);
    assert_eq!(p["wasm"]["digest"], pushed["wasm"]);
    assert_eq!(
        p["fetched"],
        json!(true),
        "a tag is resolved by the registry"
    );
    let pinned = p["reference"].as_str().unwrap().to_string();
    let again = run(&["pull", &pinned], &env);
    assert_eq!(
        again.json()["fetched"],
        json!(false),
        "pinned and in the store: {again:#?}"
    );
    let info = run(&["info", &pinned], &env);
    assert_eq!(info.json()["digest"], pushed["wasm"], "{info:#?}");

    // A scenario names the Tick by reference too (sandboxed: it runs with
    // CI's default --sandboxed-only).
    let dir = TempDir::new("oci-scenario");
    let scenario = dir.path("counter.scenario.toml");
    std::fs::write(
        &scenario,
        format!("name = \"from a registry\"\n\n[tick]\npath = \"{pinned}\"\n\n[[step]]\ncall = \"increment\"\nargs = {{ amount = 4 }}\nresult = {{ value = 4 }}\n"),
    )
    .unwrap();
    let mut ci = env.clone();
    ci.push(("CI", "1".into()));
    let tested = run(&["test", &scenario.display().to_string()], &ci);
    assert_eq!(tested.code, 0, "{tested:#?}");

    // With the registry gone and the store emptied, the pinned one needs
    // the network: one line, exit 3.
    drop(registry);
    let clean = run(&["cache", "clean"], &env);
    assert_eq!(clean.code, 0, "{clean:#?}");
    assert_eq!(stored_blobs(&store), 0);
    run(&["read", &pinned], &env).expect(3, "cannot reach the registry");
}

/// The refusal of plain HTTP to another host names the flag that allows it.
#[test]
fn plain_http_elsewhere_than_loopback_is_refused_unless_named() {
    let fake = fake_with_plain_http_realm(&std::fs::read(counter()).unwrap());
    let store = TempDir::new("oci-store");
    let reference = format!("oci://127.0.0.1:{}/t/c:v1", fake.port);
    let out = run(&["read", &reference], &env(&store));
    out.expect(3, "--insecure-registry 10.255.255.1");
    assert!(out.stdout.is_empty(), "{out:#?}");
}

/// `tickbox verify` prints each signature's verdict in words, and fails
/// (exit 3, the verdicts still on stdout) without a valid one.
#[test]
fn verify_prints_each_signatures_verdict_and_fails_without_a_valid_one() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-verify");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let (mallory, _) = ssh_key(&dir, "mallory", "mallory@example.com");
    let policy = signers_policy(
        &dir,
        "signers",
        &registry.reference("signed/"),
        &[&alice_line],
    );
    let mut env = env(&store);
    env.push(("TICKBOX_SIGNERS", policy));
    let wasm = counter().display().to_string();
    for (repo, key) in [("signed/counter:v1", &alice), ("signed/other:v1", &mallory)] {
        let reference = registry.reference(repo);
        let args = [
            "push",
            &reference,
            &wasm,
            "--sign",
            &key.display().to_string(),
        ];
        let out = run(&args, &env);
        assert_eq!(out.code, 0, "{out:#?}");
        assert!(out.json()["signature"].is_string(), "{out:#?}");
    }
    let verified = run(&["verify", &registry.reference("signed/counter:v1")], &env);
    assert_eq!(verified.code, 0, "{verified:#?}");
    assert_eq!(
        verified.json()["signatures"][0],
        json!({"verdict": "valid", "signer": "alice@example.com", "why": "signed by alice@example.com, an allowed signer, over this manifest"})
    );
    let v = run(&["verify", &registry.reference("signed/other:v1")], &env);
    assert_eq!(
        (v.code, &v.json()["signatures"][0]["verdict"]),
        (3, &json!("other_key")),
        "{v:#?}"
    );
    assert_eq!(
        v.json()["signatures"][0]["why"],
        "signed by a key the allowed-signers file does not list"
    );
}

/// `tickbox trust REF` approves a pulled Tick's requests and `trust revoke`
/// takes another spelling of its reference (exit 2 when nothing matches);
/// an MCP client can never approve, so `tickbox mcp` refuses a config's
/// Tick nobody approved.
#[test]
fn trust_approves_and_revokes_a_pulled_tick_that_an_mcp_client_cannot_approve() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-consent");
    let mut env = env(&store);
    env.push(("TICKBOX_TRUST_DIR", dir.path("trust").display().to_string()));
    std::fs::write(dir.path("req.toml"), "env = [\"HOME\"]\n").unwrap();
    let req = dir.path("req.toml").display().to_string();
    let reference = registry.reference("asks/counter:v1");
    let wasm = counter().display().to_string();
    let pushed = run(&["push", &reference, &wasm, "--manifest", &req], &env);
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let pinned = pushed.json()["reference"].as_str().unwrap().to_string();
    let refused = run(&["read", &reference], &env);
    refused.expect(2, &format!("approve it with `tickbox trust {pinned}`"));
    assert!(refused.stderr.contains("env HOME"), "{refused:#?}");
    let trusted = run(&["trust", &pinned], &env);
    assert_eq!(trusted.code, 0, "{trusted:#?}");
    let info = run(&["info", &reference], &env);
    assert_eq!(info.json()["granted"]["env"], json!(["HOME"]), "{info:#?}");
    let spelled = reference.replace("127.0.0.1", "localhost");
    let revoked = run(&["trust", "revoke", &spelled], &env);
    assert_eq!(revoked.code, 0, "{revoked:#?}");
    assert_eq!(revoked.json()["revoked"].as_array().map(Vec::len), Some(1));
    run(&["trust", "revoke", &spelled], &env).expect(2, "no approval matches");
    // An MCP client can never approve: the config's Tick is refused.
    let config = dir.path("mcp.toml");
    std::fs::write(
        &config,
        format!("[[tick]]\nname = \"t\"\npath = \"{reference}\"\n"),
    )
    .unwrap();
    let out = run(&["mcp", "--config", &config.display().to_string()], &env);
    assert_ne!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr.contains("an MCP client cannot approve"),
        "{out:#?}"
    );
}

/// `tickbox policy show`: the signers policy found by `--signers`, by
/// `$TICKBOX_SIGNERS` or at `$XDG_CONFIG_HOME/tickbox/signers.toml`; the
/// lock at `./tickbox.lock`, by `--lock` or beside `--config`; the trust
/// store by `$TICKBOX_TRUST_DIR`; an impossible rule is exit 2, naming it.
#[test]
fn policy_show_finds_each_file_by_flag_variable_or_default_path() {
    let dir = TempDir::new("oci-show");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let work = dir.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let config_home = dir.path("config");
    let base = [("XDG_CONFIG_HOME", config_home.display().to_string())];
    let show = |args: &[&str], extra: &[(&'static str, String)]| {
        let env: Vec<(&str, &str)> = base
            .iter()
            .chain(extra)
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        let mut a = vec!["policy", "show"];
        a.extend(args);
        let out = tickbox_here(&work, &a, &env);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    };
    let v = show(&["oci://localhost:5000/t/c:v1"], &[]);
    assert_eq!(v["signers"]["found"], json!("none"), "{v}");
    assert_eq!(
        v["signers"]["default"],
        json!(config_home.join("tickbox/signers.toml"))
    );
    assert_eq!(v["lock"]["default"], json!("tickbox.lock"), "{v}");
    assert_eq!(
        (&v["trust"]["found"], &v["trust"]["by"]),
        (&json!("environment"), &json!("TICKBOX_TRUST_DIR")),
        "{v}"
    );
    let policy = policy_file(
        &dir,
        "signers",
        "",
        &["oci://localhost:5000/t/*"],
        &[&alice_line],
    );
    std::fs::create_dir_all(config_home.join("tickbox")).unwrap();
    std::fs::copy(&policy, config_home.join("tickbox/signers.toml")).unwrap();
    std::fs::copy(
        dir.path("signers.allowed"),
        config_home.join("tickbox/signers.allowed"),
    )
    .unwrap();
    for (args, extra, found, by) in [
        (
            vec!["--signers", policy.as_str()],
            vec![],
            "flag",
            json!("--signers"),
        ),
        (
            vec![],
            vec![("TICKBOX_SIGNERS", policy.clone())],
            "environment",
            json!("TICKBOX_SIGNERS"),
        ),
        (vec![], vec![], "default", serde_json::Value::Null),
    ] {
        let v = show(&args, &extra);
        assert_eq!(
            (&v["signers"]["found"], &v["signers"]["by"]),
            (&json!(found), &by),
            "{v}"
        );
    }
    // An empty XDG_CONFIG_HOME is unset (never the working directory, where
    // a clone could plant a policy); a relative one is refused.
    std::fs::create_dir_all(work.join("tickbox")).unwrap();
    std::fs::copy(&policy, work.join("tickbox/signers.toml")).unwrap();
    let env = [("XDG_CONFIG_HOME", ""), ("HOME", dir.0.to_str().unwrap())];
    let v = tickbox_here(&work, &["policy", "show"], &env).json();
    let default = json!(dir.path(".config/tickbox/signers.toml"));
    assert_eq!(v["signers"]["found"], json!("none"), "{v}");
    assert_eq!(v["signers"]["default"], default, "{v}");
    let env = [("XDG_CONFIG_HOME", "tickbox/..")];
    let out = tickbox_here(&work, &["policy", "show"], &env);
    out.expect(2, "XDG_CONFIG_HOME=tickbox/..: must be an absolute path");
    std::fs::write(work.join("tickbox.lock"), "version = 1\n").unwrap();
    let v = show(&[], &[]);
    assert_eq!(
        (&v["lock"]["found"], &v["lock"]["path"]),
        (&json!("default"), &json!("tickbox.lock")),
        "{v}"
    );
    let other = dir.path("other.lock").display().to_string();
    let v = show(&["--lock", &other], &[]);
    assert_eq!(
        (&v["lock"]["found"], &v["lock"]["by"]),
        (&json!("flag"), &json!("--lock")),
        "{v}"
    );
    let config = dir.path("mcp.toml").display().to_string();
    let v = show(&["--config", &config, "--locked"], &[]);
    assert_eq!(v["lock"]["path"], json!(dir.path("tickbox.lock")), "{v}");
    let bad = policy_file(&dir, "bad", "", &["oci://localhost/t/"], &[&alice_line]);
    let out = tickbox_here(&work, &["policy", "show", "--signers", &bad], &[]);
    out.expect(2, "rule 1").expect(2, "ends in /");
}

/// `tickbox run` takes a reference too: the live instance runs the pulled,
/// pinned Tick and answers the shell.
#[test]
fn a_reference_runs_as_a_live_instance() {
    let registry = Registry::start(None);
    let w = crate::live::World::new("oci-run");
    let store = w.dir.path("store").display().to_string();
    let env = [("TICKBOX_STORE_DIR", store.as_str())];
    let reference = registry.reference("live/counter:v1");
    let pushed = tickbox_env(
        &["push", &reference, &counter().display().to_string()],
        &env,
    );
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let mut host = w.pty_env(&["run", "--name", "oc", &reference], 80, 24, &env);
    w.wait_for("oc");
    let out = w.tickbox(&["call", "@oc", "increment", r#"{"amount":3}"#, "--yes"]);
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, r#"{"value":3}"#),
        "{out:#?}"
    );
    assert_eq!(w.tickbox(&["stop", "oc"]).code, 0);
    assert_eq!(host.wait(), 0, "{}", host.text());
}

/// `tickbox lock` writes where `--locked` reads when no flag names a file:
/// `./tickbox.lock`.
#[test]
fn lock_writes_where_locked_reads_without_a_flag() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-lock-default");
    let env = env(&store);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let project = dir.path("project");
    std::fs::create_dir_all(&project).unwrap();
    let wasm = counter().display().to_string();
    let reference = registry.reference("pinned/counter:v1");
    let first = tickbox_here(&project, &["push", &reference, &wasm], &env);
    assert_eq!(first.code, 0, "{first:#?}");
    let first = first.json()["manifest"].clone();
    let locked = tickbox_here(&project, &["lock", &reference], &env);
    assert_eq!(locked.code, 0, "{locked:#?}");
    assert_eq!(locked.json()["lock"], json!("tickbox.lock"));
    let text = std::fs::read_to_string(project.join("tickbox.lock")).unwrap();
    assert!(text.contains(first.as_str().unwrap()), "{text}");
    // Positive control: --locked with no --lock reads it, in any spelling.
    let out = tickbox_here(&project, &["read", &reference, "--locked"], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let other_spelling = format!("oci://LOCALHOST:0{}/pinned/counter:v1", registry.port);
    let out = tickbox_here(&project, &["read", &other_spelling, "--locked"], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    // The tag moves: the lock still runs its digest, --locked refuses.
    let second = tickbox_here(
        &project,
        &["push", &reference, &wasm, "--manifest", "/dev/null"],
        &env,
    );
    assert_eq!(second.code, 0, "{second:#?}");
    let pulled = tickbox_here(&project, &["pull", &reference], &env);
    assert_eq!(pulled.json()["manifest"], first, "{pulled:#?}");
    tickbox_here(&project, &["read", &reference, "--locked"], &env).expect(3, "moved");
    tickbox_here(
        &project,
        &["read", &registry.reference("pinned/other:v1"), "--locked"],
        &env,
    )
    .expect(2, "is not in the lock file");
    // Elsewhere, with no lock there, --locked refuses what it cannot check.
    tickbox_here(dir.0.as_path(), &["read", &reference, "--locked"], &env)
        .expect(2, "is not in the lock file");
}

/// `tickbox mcp` says at start which signers policy, lock file and trust
/// store apply (one log line each): a client that starts it without
/// `$TICKBOX_SIGNERS` shows as "none".
#[test]
fn mcp_logs_which_policy_lock_and_trust_store_apply() {
    let dir = TempDir::new("oci-mcp-files");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let policy = signers_policy(&dir, "signers", "oci://localhost/t/", &[&alice_line]);
    let counter = crate::util::tick("counter.py");
    let config = ("XDG_CONFIG_HOME", dir.path("config").display().to_string());
    let serve = |extra: &[(&str, &str)]| {
        let mut env = vec![(config.0, config.1.as_str())];
        env.extend_from_slice(extra);
        let out = tickbox_here(&dir.0, &["mcp", "--", "python3", &counter], &env);
        assert_eq!(out.code, 0, "{out:#?}");
        out.stderr
    };
    let full = serve(&[("TICKBOX_SIGNERS", &policy)]);
    let line = |text: &str, what: &str| {
        let found: Vec<&str> = text.lines().filter(|l| l.contains(what)).collect();
        assert_eq!(found.len(), 1, "one line for {what}: {text}");
        found[0].to_string()
    };
    let signers = line(&full, "signers policy:");
    assert!(
        signers.contains(&policy) && signers.contains("the environment variable TICKBOX_SIGNERS"),
        "{signers}"
    );
    assert!(line(&full, "lock file:").contains("none"), "{full}");
    assert!(
        line(&full, "trust store:").contains("the environment variable TICKBOX_TRUST_DIR"),
        "{full}"
    );
    // The reduced environment an MCP client may give: no policy, said so.
    let reduced = serve(&[]);
    let signers = line(&reduced, "signers policy:");
    assert!(
        signers.contains("none") && signers.contains("TICKBOX_SIGNERS"),
        "{signers}"
    );
}
