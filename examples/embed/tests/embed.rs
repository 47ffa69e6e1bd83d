//! The embedding example, run as its users run it: a program that opens
//! an `oci://` Tick through tickbox-app alone. The Tick is pushed, signed
//! and locked through the same library (no `tickbox` binary), into a real
//! registry started for the test.

use std::process::Command;
use tickbox_app::registry::{Push, RegistrySettings};
use tickbox_app::{App, Settings};
use tickbox_test_support::registry::{ssh_key, Registry};
use tickbox_test_support::{build_wasm, TempDir};

/// A program embedding tickbox-app opens a signed `oci://` Tick under a
/// signers policy and a lock, calls a tool and prints the result; the same
/// program refuses an unsigned Tick under the same policy (the control:
/// the policy is what it checks).
#[test]
fn an_embedding_program_opens_a_signed_tick_and_refuses_an_unsigned_one() {
    let registry = Registry::start(None);
    let dir = TempDir::new("embed");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    std::fs::write(dir.path("signers.allowed"), format!("{alice_line}\n")).unwrap();
    let policy = dir.path("signers.toml");
    std::fs::write(
        &policy,
        format!(
            "[[require]]\nreferences = \"{}*\"\nallowed_signers = \"signers.allowed\"\n",
            registry.reference("embed/")
        ),
    )
    .unwrap();
    let lock = dir.path("tickbox.lock");
    let wasm = build_wasm("examples", "counter", "wasm32-wasip2");

    // Pushed, signed and locked by a second embedder: tickbox-app again.
    let app = App::new(Settings {
        store_dir: Some(dir.path("publisher-store")),
        ..Settings::default()
    });
    let settings = RegistrySettings {
        signers: Some(tickbox_app::source(policy.clone())),
        lock: Some(tickbox_app::source(lock.clone())),
        ..RegistrySettings::default()
    };
    let signed = registry.reference("embed/counter:v1");
    let push = |reference: &str, sign: Option<std::path::PathBuf>| {
        let push = Push {
            reference: reference.to_string(),
            wasm: wasm.clone(),
            manifest: None,
            sign,
        };
        app.push(&push, &settings).expect("push")
    };
    let pushed = push(&signed, Some(alice.clone()));
    assert!(pushed.signature.is_some(), "{pushed:?}");
    let unsigned = registry.reference("embed/unsigned:v1");
    assert!(push(&unsigned, None).signature.is_none());
    let (written, entries) = app
        .lock(std::slice::from_ref(&signed), &settings)
        .expect("lock");
    assert_eq!(written, lock);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].manifest, pushed.manifest);
    assert_eq!(entries[0].signer.as_deref(), Some("alice@example.com"));

    let embed = |reference: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tickbox-embed"))
            .arg(reference)
            .arg(&policy)
            .arg(&lock)
            .arg(dir.path("embed-store"))
            .args(["increment", r#"{"amount":2}"#])
            // Nothing from the environment reaches the app layer.
            .env("TICKBOX_SIGNERS", "/nonexistent")
            .output()
            .expect("run the embedding example");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, stderr) = embed(&signed);
    assert_eq!(
        (code, stdout.as_str()),
        (Some(0), r#"{"value":2}"#),
        "{stderr}"
    );
    let (code, stdout, stderr) = embed(&unsigned);
    assert_ne!(code, Some(0), "{stdout}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("it is unsigned"), "{stderr}");
}
