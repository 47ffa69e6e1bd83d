//! Consent bound to content: what a wasm Tick's manifest asks for is
//! granted only under an approval of its exact bytes, kept in a private
//! trust store; the prompt is tickbox's own, inert to the manifest's text
//! and deaf to keys typed before it; where no one can answer (no terminal,
//! `tickbox mcp`, `tickbox test`) the start is refused with one line naming
//! `tickbox trust`. Every test has its own trust store.

use crate::live::World;
use crate::util::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A Tick (the hostile guest: its `env` tool reads a variable) copied
/// beside its manifest, with a private trust store.
struct Asker {
    dir: TempDir,
    wasm: PathBuf,
    trust: PathBuf,
}

impl Asker {
    fn new(tag: &str, manifest: &str) -> Asker {
        let dir = TempDir::new(tag);
        let wasm = dir.path("asker.wasm");
        std::fs::copy(hostile(), &wasm).unwrap();
        let trust = dir.path("trust");
        let a = Asker { dir, wasm, trust };
        a.manifest(manifest);
        a
    }

    fn manifest(&self, text: &str) {
        std::fs::write(self.dir.path("asker.tick.toml"), text).unwrap();
    }

    fn path(&self) -> &str {
        self.wasm.to_str().unwrap()
    }

    fn env(&self) -> [(&'static str, &str); 1] {
        [("TICKBOX_TRUST_DIR", self.trust.to_str().unwrap())]
    }

    fn tickbox(&self, args: &[&str]) -> Output {
        tickbox_env(args, &self.env())
    }

    /// `tickbox call ASKER env {"name": NAME}`.
    fn env_call(&self, name: &str) -> Output {
        let args = json!({ "name": name }).to_string();
        self.tickbox(&["call", self.path(), "env", &args])
    }

    fn approvals(&self) -> Vec<Value> {
        let out = self.tickbox(&["trust", "ls"]);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()["approvals"].as_array().unwrap().clone()
    }

    /// Replaces the Tick's bytes with another build of the same guest
    /// (preview 1): new content at the same path.
    fn swap_bytes(&self) {
        std::fs::copy(hostile_p1(), &self.wasm).unwrap();
    }
}

fn sha256_of(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    let text = String::from_utf8_lossy(&out.stdout);
    format!("sha256:{}", text.split_whitespace().next().unwrap())
}

/// Asserts a refusal: exit 2, one line, naming the approving command.
fn refused(out: &Output, needle: &str) {
    out.expect(2, needle);
    assert!(out.stderr.contains("tickbox trust "), "{out:#?}");
    // `tickbox mcp` first logs which signers policy, lock and trust store
    // apply (`tickbox::files`, one line each); the refusal is one line.
    let refusal: Vec<&str> = out
        .stderr
        .trim_end()
        .lines()
        .filter(|l| !l.contains(" INFO tickbox::files: "))
        .collect();
    assert_eq!(refusal.len(), 1, "one line: {out:#?}");
    assert_eq!(out.stdout, "", "nothing ran: {out:#?}");
}

#[test]
fn an_approved_manifest_is_granted_and_new_bytes_at_the_path_are_asked_again() {
    let a = Asker::new("consent-grant", "env = [\"CONSENT_GREETING=granted\"]\n");
    // Nobody can answer here (stdin is not a terminal): refused, nothing stored.
    refused(
        &a.env_call("CONSENT_GREETING"),
        "asks for grants nobody approved",
    );
    assert!(a.approvals().is_empty());
    // The person approves by typing the command; the grant is then in force.
    let out = a.tickbox(&["trust", a.path()]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr.contains("env CONSENT_GREETING=granted"),
        "{out:#?}"
    );
    let digest = sha256_of(&a.wasm);
    assert_eq!(out.json()["approved"]["digest"], digest);
    let out = a.env_call("CONSENT_GREETING");
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["value"], "granted");
    let list = a.approvals();
    assert_eq!(list.len(), 1);
    let canonical = std::fs::canonicalize(&a.wasm).unwrap();
    assert_eq!(list[0]["name"], canonical.to_str().unwrap());
    assert_eq!(list[0]["digest"], digest);
    assert_eq!(list[0]["signer"], Value::Null);
    assert_eq!(list[0]["updates"], false);
    assert_eq!(
        list[0]["requested"]["env"],
        json!(["CONSENT_GREETING=granted"])
    );
    // Other bytes at the same path: the approval was for the old content.
    a.swap_bytes();
    refused(&a.env_call("CONSENT_GREETING"), "not kept for updates");
}

#[test]
fn updates_keep_an_approval_only_where_the_person_said_so_and_never_for_more() {
    let manifest = "env = [\"CONSENT_GREETING=granted\"]\n";
    // Approved with --updates: new content asking for no more keeps it.
    let kept = Asker::new("consent-updates", manifest);
    assert_eq!(kept.tickbox(&["trust", "--updates", kept.path()]).code, 0);
    kept.swap_bytes();
    let out = kept.env_call("CONSENT_GREETING");
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["value"], "granted");
    // Asking for more: refused, the line names the difference only.
    kept.manifest("env = [\"CONSENT_GREETING=granted\", \"HOME\"]\n");
    let out = kept.env_call("HOME");
    refused(&out, "asks for more than was approved");
    assert!(out.stderr.contains(": env HOME;"), "{out:#?}");
    assert!(
        !out.stderr.contains("CONSENT_GREETING"),
        "only the difference: {out:#?}"
    );
    // Approving the new request makes it work (positive control).
    assert_eq!(kept.tickbox(&["trust", kept.path()]).code, 0);
    let out = kept.env_call("HOME");
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.json()["value"].is_string(), "{out:#?}");
    // Approved without --updates: new content is asked about again.
    let once = Asker::new("consent-once", manifest);
    assert_eq!(once.tickbox(&["trust", once.path()]).code, 0);
    assert_eq!(once.env_call("CONSENT_GREETING").code, 0);
    once.swap_bytes();
    refused(&once.env_call("CONSENT_GREETING"), "not kept for updates");
}

#[test]
fn revoking_by_digest_or_path_takes_the_grant_away() {
    let a = Asker::new("consent-revoke", "env = [\"CONSENT_GREETING=granted\"]\n");
    let digest = sha256_of(&a.wasm);
    assert_eq!(a.tickbox(&["trust", a.path()]).code, 0);
    assert_eq!(a.env_call("CONSENT_GREETING").code, 0);
    let out = a.tickbox(&["trust", "revoke", &digest]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["revoked"][0]["digest"], digest);
    refused(&a.env_call("CONSENT_GREETING"), "nobody approved");
    assert_eq!(a.tickbox(&["trust", a.path()]).code, 0);
    assert_eq!(a.env_call("CONSENT_GREETING").code, 0);
    assert_eq!(a.tickbox(&["trust", "revoke", a.path()]).code, 0);
    refused(&a.env_call("CONSENT_GREETING"), "nobody approved");
    a.tickbox(&["trust", "revoke", &digest])
        .expect(2, "no approval matches");
}

#[test]
fn a_trust_store_others_can_write_or_a_symlink_is_refused() {
    let a = Asker::new("consent-store", "env = [\"CONSENT_GREETING=granted\"]\n");
    assert_eq!(a.tickbox(&["trust", a.path()]).code, 0);
    assert_eq!(a.env_call("CONSENT_GREETING").code, 0, "positive control");
    let mode = |m| std::fs::set_permissions(&a.trust, std::fs::Permissions::from_mode(m));
    mode(0o770).unwrap();
    let out = a.env_call("CONSENT_GREETING");
    out.expect(2, "group or others can write to it");
    assert_eq!(out.stderr.trim_end().lines().count(), 1, "{out:#?}");
    a.tickbox(&["trust", "ls"]).expect(2, "refused");
    mode(0o700).unwrap();
    let file = a.trust.join("approvals.json");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    a.env_call("CONSENT_GREETING")
        .expect(2, "group or others can write to it");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(a.env_call("CONSENT_GREETING").code, 0);
    // A store reached through a symlink.
    let link = a.dir.path("trust-link");
    std::os::unix::fs::symlink(&a.trust, &link).unwrap();
    let out = tickbox_env(
        &["call", a.path(), "env", r#"{"name":"CONSENT_GREETING"}"#],
        &[("TICKBOX_TRUST_DIR", link.to_str().unwrap())],
    );
    out.expect(2, "symlink");
}

#[test]
fn a_tick_without_a_manifest_runs_as_before_and_never_touches_the_store() {
    let dir = TempDir::new("consent-none");
    let wasm = dir.path("plain.wasm");
    std::fs::copy(hostile(), &wasm).unwrap();
    // A store that would be refused: never read for a Tick asking nothing.
    let trust = dir.path("trust");
    std::fs::create_dir(&trust).unwrap();
    std::fs::set_permissions(&trust, std::fs::Permissions::from_mode(0o777)).unwrap();
    let env = [("TICKBOX_TRUST_DIR", trust.to_str().unwrap())];
    let out = tickbox_env(
        &["call", wasm.to_str().unwrap(), "echo", r#"{"x":1}"#],
        &env,
    );
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(std::fs::read_dir(&trust).unwrap().count(), 0);
    // The same Tick with a manifest does read it, and refuses it.
    std::fs::write(dir.path("plain.tick.toml"), "env = [\"A=b\"]\n").unwrap();
    tickbox_env(&["read", wasm.to_str().unwrap()], &env).expect(2, "trust store");
}

#[test]
fn a_requested_dir_is_granted_only_where_the_person_maps_it() {
    let a = Asker::new("consent-dir", "dir = [\"/data:ro\"]\n");
    assert_eq!(a.tickbox(&["trust", a.path()]).code, 0);
    let host = a.dir.path("hostdata");
    std::fs::create_dir(&host).unwrap();
    std::fs::write(host.join("hello.txt"), "mapped by the person").unwrap();
    let read = r#"{"path":"/data/hello.txt"}"#;
    let out = a.tickbox(&["call", a.path(), "read_file", read]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stderr.contains("--dir HOST::/data"), "{out:#?}");
    assert!(out.json()["value"].is_null(), "{out:#?}");
    let map = format!("{}::/data:ro", host.display());
    let out = a.tickbox(&["call", a.path(), "read_file", read, "--dir", &map]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["value"], "mapped by the person");
    assert!(!out.stderr.contains("not granted"), "{out:#?}");
    // And no grant may reach the trust store itself, or a Tick could
    // approve itself.
    let store = format!("{}::/data", a.trust.display());
    let out = a.tickbox(&["call", a.path(), "read_file", read, "--dir", &store]);
    out.expect(3, "tickbox's own state");
}

#[test]
fn mcp_and_scenarios_never_ask_and_refuse_an_unapproved_manifest() {
    let a = Asker::new("consent-mcp", "env = [\"CONSENT_GREETING=granted\"]\n");
    let config = a.dir.path("ticks.toml");
    std::fs::write(
        &config,
        format!("[[tick]]\nname = \"asker\"\npath = \"{}\"\n", a.path()),
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let out = a.tickbox(&["mcp", "--config", c]);
    refused(&out, "tickbox mcp never asks");
    assert!(out.stderr.contains("Tick `asker`"), "{out:#?}");
    // Even on a terminal, where a person could answer, MCP asks nobody.
    let w = World::new("consent-mcp-pty");
    let mut pty = w.pty_env(&["mcp", a.path()], 100, 30, &a.env());
    assert_eq!(pty.wait(), 2, "{}", pty.text());
    assert!(pty.text().contains("never asks"), "{}", pty.text());
    assert!(!pty.text().contains("[y/u/N]"), "{}", pty.text());
    // A scenario's Tick neither.
    let scenario = a.dir.path("asker.scenario.toml");
    std::fs::write(
        &scenario,
        format!("[tick]\npath = \"{}\"\n\n[[step]]\nkey = \"x\"\n", a.path()),
    )
    .unwrap();
    let out = a.tickbox(&["test", scenario.to_str().unwrap()]);
    assert!(out.stdout.contains("tickbox test never asks"), "{out:#?}");
    assert_eq!(out.code, 2, "{out:#?}");
    // Approved once, the same entry is served (the client leaves at once).
    assert_eq!(a.tickbox(&["trust", a.path()]).code, 0);
    let out = a.tickbox(&["mcp", "--config", c]);
    assert_eq!(out.code, 0, "{out:#?}");
}

/// The manifest's values are the Tick author's: escape sequences, bidi
/// controls and line breaks in them reach the terminal only as visible
/// escapes, and `n` refuses and stores nothing.
#[test]
fn the_prompt_shows_hostile_manifest_text_inert_and_no_stores_nothing() {
    let a = Asker::new(
        "consent-prompt",
        "env = [\"GREETING=hi\\u001b]0;pwned\\u0007\\u202etxt.exe\\ntickbox: approved\\u001b[2J\"]\n",
    );
    let w = World::new("consent-prompt-pty");
    let args = ["call", a.path(), "env", r#"{"name":"GREETING"}"#];
    let mut pty = w.pty_env(&args, 200, 40, &a.env());
    pty.expect_since(0, "[y/u/N]");
    let shown = pty.text();
    assert!(shown.contains(&sha256_of(&a.wasm)), "{shown:?}");
    assert!(shown.contains("unsigned"), "{shown:?}");
    assert!(
        shown.contains("\\x1b]0;pwned\\x07\\u{202e}txt.exe\\ntickbox: approved\\x1b[2J"),
        "the value, escaped: {shown:?}"
    );
    pty.type_keys(b"n\r");
    assert_eq!(pty.wait(), 2, "{:?}", pty.text());
    let all = pty.seen.lock().unwrap().clone();
    let text = String::from_utf8_lossy(&all);
    for bad in ['\x1b', '\x07', '\u{202e}'] {
        assert!(
            !text.contains(bad),
            "{bad:?} reached the terminal: {text:?}"
        );
    }
    assert!(
        !text.lines().any(|l| l.starts_with("tickbox: approved")),
        "{text:?}"
    );
    assert!(text.contains("not approved"), "{text:?}");
    assert!(a.approvals().is_empty(), "a no stores nothing");
}

/// A `y` typed before the prompt appeared (a script's, or a key meant for
/// something else) is thrown away: the prompt waits for an answer typed
/// after it. Then `y` typed after it approves and stores (positive control).
#[test]
fn keys_typed_before_the_prompt_do_not_answer_it() {
    let a = Asker::new(
        "consent-typeahead",
        "env = [\"CONSENT_GREETING=granted\"]\n",
    );
    let w = World::new("consent-typeahead-pty");
    let args = ["call", a.path(), "env", r#"{"name":"CONSENT_GREETING"}"#];
    let mut pty = w.pty_typed_ahead(&args, 200, 40, &a.env(), b"y\r");
    pty.expect_since(0, "[y/u/N]");
    pty.type_keys(b"n\r");
    assert_eq!(
        pty.wait(),
        2,
        "the typed-ahead y answered: {:?}",
        pty.text()
    );
    assert!(a.approvals().is_empty(), "{:?}", pty.text());
    // Answered after it appeared: approved, stored, and the grant in force.
    let mut pty = w.pty_env(&args, 200, 40, &a.env());
    pty.expect_since(0, "[y/u/N]");
    pty.type_keys(b"y\r");
    assert_eq!(pty.wait(), 0, "{:?}", pty.text());
    assert!(pty.text().contains("\"granted\""), "{:?}", pty.text());
    let list = a.approvals();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["updates"], false);
    // Approved once: the next start asks nothing.
    let mut pty = w.pty_env(&args, 200, 40, &a.env());
    assert_eq!(pty.wait(), 0, "{:?}", pty.text());
    assert!(!pty.text().contains("[y/u/N]"), "{:?}", pty.text());
}

/// `tickbox run` asks on its terminal before it forks the host that loses
/// it; the host starts under that decision. `n` starts nothing.
#[test]
fn run_asks_before_its_host_starts_and_the_host_keeps_the_answer() {
    let a = Asker::new("consent-run", "env = [\"CONSENT_GREETING=granted\"]\n");
    let w = World::new("consent-run-pty");
    let mut pty = w.pty_env(&["run", "--name", "asker", a.path()], 120, 40, &a.env());
    pty.expect_since(0, "[y/u/N]");
    pty.type_keys(b"n\r");
    assert_eq!(pty.wait(), 2, "{:?}", pty.text());
    assert!(w.ls().is_empty(), "nothing was started");
    assert!(a.approvals().is_empty());
    let mut view = w.pty_env(&["run", "--name", "asker", a.path()], 120, 40, &a.env());
    view.expect_since(0, "[y/u/N]");
    view.type_keys(b"y\r");
    w.wait_for("asker");
    let out = w.tickbox(&["call", "@asker", "env", r#"{"name":"CONSENT_GREETING"}"#]);
    assert_eq!(out.json()["value"], "granted", "{out:#?}");
    assert_eq!(a.approvals().len(), 1);
    assert_eq!(w.tickbox(&["stop", "asker"]).code, 0);
}

/// Ctrl-C at the prompt ends it, however the signal lands (the prompt
/// catches it into a pipe its wait polls): exit 130, nothing started or
/// stored. Several rounds, since a lost signal used to depend on timing.
#[test]
fn an_interrupt_at_the_prompt_ends_it_and_stores_nothing() {
    let a = Asker::new(
        "consent-interrupt",
        "env = [\"CONSENT_GREETING=granted\"]\n",
    );
    let w = World::new("consent-interrupt-pty");
    let args = ["call", a.path(), "env", r#"{"name":"CONSENT_GREETING"}"#];
    for _ in 0..5 {
        let mut pty = w.pty_env(&args, 200, 40, &a.env());
        pty.expect_since(0, "[y/u/N]");
        pty.signal(libc::SIGINT);
        assert_eq!(pty.wait(), 130, "{:?}", pty.text());
        assert!(pty.text().contains("interrupted at the approval prompt"));
        assert!(a.approvals().is_empty());
    }
}

/// A manifest is read by whoever reads files (the CLI; the sandbox takes
/// grants as values): a malformed one is a usage error that names it, found
/// before anything starts, and a well-formed one, once approved (see
/// `consent`), is shown by `info`.
#[test]
fn a_malformed_manifest_is_its_own_error() {
    let dir = TempDir::new("launch-manifest");
    let path = dir.path("counter.wasm");
    std::fs::copy(build_wasm("examples", "counter", "wasm32-wasip2"), &path).expect("copy");
    let w = path.display().to_string();
    std::fs::write(dir.path("counter.tick.toml"), "dir = [\"/data\"]\n").expect("write");
    let trust = dir.path("trust");
    let env = [("TICKBOX_TRUST_DIR", trust.to_str().unwrap())];
    assert_eq!(tickbox_env(&["trust", w.as_str()], &env).code, 0);
    let info = tickbox_env(&["info", w.as_str()], &env);
    assert_eq!(info.code, 0, "{info:#?}");
    assert_eq!(
        info.json()["requested"]["dir"],
        json!(["/data"]),
        "{info:#?}"
    );
    std::fs::write(dir.path("counter.tick.toml"), "dir = 7\n").expect("write");
    tickbox(&["info", w.as_str()]).expect(2, "counter.tick.toml");
    tickbox(&["read", w.as_str()]).expect(2, "counter.tick.toml");
}
