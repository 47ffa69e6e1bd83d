//! Consent through the binary: what needs `tickbox` itself. The decision
//! (approvals per content digest, updates, revocation, the trust store's
//! walls, requested directories, malformed manifests) is tickbox-app's
//! and tested through its API in `app/tests/it/consent.rs`; here, the
//! terminal half: `tickbox trust`'s command line, one refusal line and
//! exit 2 where nobody can answer (no terminal, `tickbox mcp`, `tickbox
//! test`), and the prompt on a terminal, inert to the manifest's text and
//! deaf to keys typed before it. Every test has its own trust store.

use crate::live::World;
use crate::util::*;
use serde_json::{json, Value};
use std::path::PathBuf;

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
        let wasm = asker_in(&dir, manifest);
        let trust = dir.path("trust");
        Asker { dir, wasm, trust }
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

/// `tickbox trust`'s command line: without a terminal a start is refused
/// in one line naming the approving command (exit 2); `tickbox trust
/// PATH` approves and prints the record, `ls` lists it, `revoke` removes
/// it, and revoking what is not there is exit 2.
#[test]
fn trust_approves_lists_and_revokes_and_without_a_terminal_a_start_is_refused() {
    let a = Asker::new("consent-cli", "env = [\"CONSENT_GREETING=granted\"]\n");
    let out = a.env_call("CONSENT_GREETING");
    refused(&out, "asks for grants nobody approved");
    assert!(out.stderr.contains("stdin is not a terminal"), "{out:#?}");
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
    assert_eq!(list[0]["digest"], digest);
    let out = a.tickbox(&["trust", "revoke", &digest]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.json()["revoked"][0]["digest"], digest);
    assert!(a.approvals().is_empty());
    a.tickbox(&["trust", "revoke", a.path()])
        .expect(2, "no approval matches");
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
