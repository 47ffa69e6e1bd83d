//! The lock file, kept by canonical reference, at one default path.

use crate::{parse_lock, read_lock, write_lock, TempDir};
use std::path::{Path, PathBuf};
use tickbox_registry::lock::{default_path, Entry, FILE_NAME};
use tickbox_registry::{Digest, Reference};

fn r(s: &str) -> Reference {
    s.parse().unwrap()
}

#[test]
fn an_entry_is_found_by_any_spelling_of_its_reference() {
    let d = Digest::of(b"manifest");
    let text = format!(
        "version = 1\n[[tick]]\nreference = \"oci://127.0.0.1:5000/t/c:v1\"\nmanifest = \"{d}\"\nsigner = \"alice@example.com\"\n"
    );
    let lock = parse_lock(&text, Path::new("tickbox.lock")).unwrap();
    for s in [
        "oci://127.0.0.1:5000/t/c:v1",
        "oci://LOCALHOST:05000/t/c:v1",
        "oci://[::1]:5000/t/c:v1",
    ] {
        let e = lock.get(&r(s)).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(
            (e.manifest, e.signer.as_deref()),
            (d, Some("alice@example.com"))
        );
    }
    // Controls: another port, another tag, another repository.
    for s in [
        "oci://localhost:5001/t/c:v1",
        "oci://localhost:5000/t/c:v2",
        "oci://localhost:5000/t/cc:v1",
    ] {
        assert!(lock.get(&r(s)).is_none(), "{s}");
    }
}

/// A digest reference names its manifest: a lock entry cannot send it to
/// another one (the lock is a file a checkout can carry).
#[test]
fn an_entry_cannot_map_a_digest_reference_to_another_manifest() {
    let (a, b) = (Digest::of(b"v1"), Digest::of(b"v2"));
    let entry = |manifest: Digest| {
        format!("version = 1\n[[tick]]\nreference = \"oci://localhost:5000/t/c@{a}\"\nmanifest = \"{manifest}\"\n")
    };
    let e = parse_lock(&entry(b), Path::new("x.lock"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("entry 1")
            && e.contains(&format!("pinned to {a}"))
            && e.contains(&b.to_string()),
        "{e}"
    );
    // Control: the same entry with the digest it names is kept.
    let lock = parse_lock(&entry(a), Path::new("x.lock")).unwrap();
    assert_eq!(lock.entries()[0].manifest, a);
}

#[test]
fn one_reference_twice_or_a_bad_entry_is_refused_naming_it() {
    let d = Digest::of(b"m");
    let entry =
        |reference: &str| format!("[[tick]]\nreference = \"{reference}\"\nmanifest = \"{d}\"\n");
    let twice = format!(
        "version = 1\n{}{}",
        entry("oci://localhost:5000/t/c:v1"),
        entry("oci://127.0.0.1:5000/t/c:v1")
    );
    let e = parse_lock(&twice, Path::new("x.lock"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("entry 2") && e.contains("again (entry 1)"),
        "{e}"
    );
    let bad = format!("version = 1\n{}", entry("oci://127.000.000.001/t/c:v1"));
    let e = parse_lock(&bad, Path::new("x.lock"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("entry 1") && e.contains("IPv4"), "{e}");
    let e = parse_lock("version = 2\n", Path::new("x.lock"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("version 2"), "{e}");
    let e = parse_lock(
        "version = 1\n[[tick]]\nreference = \"oci://h/t:v1\"\nmanifest = \"sha256:00\"\n",
        Path::new("x.lock"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("digest"), "{e}");
    // Control: one entry reads.
    assert_eq!(
        parse_lock(
            &format!("version = 1\n{}", entry("oci://localhost:5000/t/c:v1")),
            Path::new("x.lock")
        )
        .unwrap()
        .entries()
        .len(),
        1
    );
}

#[test]
fn set_replaces_by_identity_and_the_file_reads_back() {
    let dir = TempDir::new("lock");
    let path = dir.path("tickbox.lock");
    let mut lock = read_lock(&path).unwrap();
    assert!(lock.entries().is_empty(), "a missing lock is empty");
    lock.set(Entry {
        reference: r("oci://LOCALHOST:5000/t/c:v1"),
        manifest: Digest::of(b"one"),
        signer: None,
    });
    lock.set(Entry {
        reference: r("oci://127.0.0.1:5000/t/c:v1"),
        manifest: Digest::of(b"two"),
        signer: Some("bob@example.com".into()),
    });
    lock.set(Entry {
        reference: r("oci://localhost:5000/t/a:v1"),
        manifest: Digest::of(b"three"),
        signer: None,
    });
    assert_eq!(lock.entries().len(), 2, "one entry per reference");
    write_lock(&lock, &path).unwrap();
    let back = read_lock(&path).unwrap();
    assert_eq!(back, lock);
    let e = back.get(&r("oci://[::1]:5000/t/c:v1")).unwrap();
    assert_eq!(e.manifest, Digest::of(b"two"));
    // Written in the canonical spelling of what was given last.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("reference = \"oci://127.0.0.1:5000/t/c:v1\""),
        "{text}"
    );
    // Nothing else left beside it.
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);
}

#[test]
fn the_default_path_is_beside_the_file_given_else_the_working_directory() {
    assert_eq!(default_path(None), PathBuf::from(FILE_NAME));
    assert_eq!(
        default_path(Some(Path::new("/etc/tickbox/mcp.toml"))),
        PathBuf::from("/etc/tickbox/tickbox.lock")
    );
    assert_eq!(
        default_path(Some(Path::new("mcp.toml"))),
        Path::new(".").join(FILE_NAME)
    );
}
