//! Signature checking's scratch directory has a name nobody can predict:
//! another local user who creates the names tickbox once used (its pid and
//! a counter, in the shared temp directory) changes nothing.

use crate::TempDir;
use std::path::{Path, PathBuf};
use tickbox_registry::signature::{sign, verify, Verdict};
use tickbox_registry::Digest;

/// An ed25519 key (the harness's), and an allowed-signers file naming it
/// for `principal`.
fn key(dir: &TempDir, name: &str, principal: &str) -> (PathBuf, PathBuf) {
    let (key, line) = tickbox_test_support::registry::ssh_key(dir, name, principal);
    let allowed = dir.path(&format!("{name}.allowed"));
    std::fs::write(&allowed, line).unwrap();
    (key, allowed)
}

/// What another user could have created at the names tickbox used to take:
/// `tickbox-sig-PID-N` as a file, a directory anyone can write with a
/// planted signature in it, and a symlink elsewhere.
fn squat(planted: &[u8]) -> Vec<PathBuf> {
    let tmp = std::env::temp_dir();
    let elsewhere = tmp.join(format!("tickbox-sig-elsewhere-{}", std::process::id()));
    let _ = std::fs::create_dir(&elsewhere);
    let mut made = vec![elsewhere.clone()];
    for n in 0..24u32 {
        let p = tmp.join(format!("tickbox-sig-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        let _ = std::fs::remove_file(&p);
        match n % 3 {
            0 => std::fs::write(&p, b"squatted").unwrap(),
            1 => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::create_dir(&p).unwrap();
                std::fs::write(p.join("tick.sig"), planted).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
            }
            _ => std::os::unix::fs::symlink(&elsewhere, &p).unwrap(),
        }
        made.push(p);
    }
    made
}

fn unsquat(made: &[PathBuf]) {
    for p in made.iter().rev() {
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir_all(p);
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn unchanged(made: &[PathBuf], planted: &[u8]) {
    for (i, p) in made.iter().skip(1).enumerate() {
        let m = std::fs::symlink_metadata(p).unwrap();
        match i % 3 {
            0 => assert_eq!(std::fs::read(p).unwrap(), b"squatted"),
            1 => assert_eq!(std::fs::read(p.join("tick.sig")).unwrap(), planted),
            _ => assert!(m.file_type().is_symlink()),
        }
    }
    assert_eq!(
        std::fs::read_dir(&made[0]).unwrap().count(),
        0,
        "nothing written through the link"
    );
}

#[test]
fn verification_is_unmoved_by_squatted_scratch_names() {
    let dir = TempDir::new("scratch");
    let (alice, allowed) = key(&dir, "alice", "alice@example.com");
    let (mallory, _) = key(&dir, "mallory", "mallory@example.com");
    let digest = Digest::of(b"a manifest");
    let good = sign(&alice, &digest).unwrap();
    let planted = sign(&mallory, &digest).unwrap();
    let check = |sig: &[u8]| verify(Path::new(&allowed), &digest, sig).unwrap();

    // Positive control, before anyone squats.
    assert_eq!(
        check(&good),
        Verdict::Valid {
            signer: "alice@example.com".into()
        }
    );
    let made = squat(&planted);
    let outcome = std::panic::catch_unwind(|| {
        for _ in 0..3 {
            assert_eq!(
                check(&good),
                Verdict::Valid {
                    signer: "alice@example.com".into()
                },
                "a squatted name must change nothing"
            );
        }
        // The check still discriminates: mallory's signature is not alice's,
        // and alice's over another digest is not over this one.
        assert_eq!(check(&planted), Verdict::OtherKey);
        let other = sign(&alice, &Digest::of(b"another manifest")).unwrap();
        assert_eq!(
            check(&other),
            Verdict::OtherDigest {
                signer: "alice@example.com".into()
            }
        );
        unchanged(&made, &planted);
    });
    unsquat(&made);
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}
