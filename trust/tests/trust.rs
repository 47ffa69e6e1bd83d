//! tickbox-trust through its public API, as the sandbox, the registry
//! client and the stores use it: a digest pinned, then checked while
//! content streams; a private directory opened, made, or refused.

use std::os::unix::fs::PermissionsExt;
use tickbox_test_support::TempDir;
use tickbox_trust::digest::Hasher;
use tickbox_trust::private_dir::{self, OpenError};
use tickbox_trust::{Digest, NotPrivate};

#[test]
fn content_streamed_in_pieces_has_the_digest_it_was_pinned_to() {
    let content: Vec<u8> = (0..100_000u32).map(|n| (n % 251) as u8).collect();
    let pinned = Digest::of(&content);
    let mut streamed = Hasher::default();
    for piece in content.chunks(4096) {
        streamed.update(piece);
    }
    assert_eq!(streamed.finish(), pinned);

    // Written and read back as every store and lock file does.
    let written = pinned.to_string();
    assert_eq!(written, format!("sha256:{}", pinned.hex()));
    assert_eq!(written.parse::<Digest>(), Ok(pinned));
    assert_eq!(pinned.tag_form(), format!("sha256-{}", pinned.hex()));

    // Control: one byte changed is another digest.
    let mut changed = content.clone();
    changed[50_000] ^= 1;
    assert_ne!(Digest::of(&changed), pinned);
}

#[test]
fn only_the_one_spelling_of_a_digest_is_read() {
    let hex = Digest::of(b"tick").hex();
    assert!(format!("sha256:{hex}").parse::<Digest>().is_ok());
    for other in [
        format!("sha256:{}", hex.to_uppercase()),
        format!("SHA256:{hex}"),
        format!("sha512:{hex}"),
        format!("sha256:{}", &hex[1..]),
        format!("sha256:{hex}0"),
        hex.clone(),
        format!(" sha256:{hex}"),
    ] {
        assert!(other.parse::<Digest>().is_err(), "{other} was read");
    }
}

#[test]
fn a_private_directory_is_made_when_asked_and_missing_otherwise() {
    let tmp = TempDir::new("trust-private");
    let dir = tmp.path("a/b/store");
    assert!(matches!(private_dir::open(&dir, false), Ok(None)));
    assert!(!dir.exists(), "nothing made without create");
    let opened = private_dir::open(&dir, true)
        .expect("made")
        .expect("opened");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, private_dir::CREATE_MODE);
    assert!(private_dir::check(&opened.metadata().unwrap()).is_ok());
}

#[test]
fn a_directory_others_can_write_or_a_symlink_is_refused() {
    let tmp = TempDir::new("trust-refused");
    let good = tmp.private_dir("good");
    // Positive control: the private directory opens.
    assert!(private_dir::open(&good, false).unwrap().is_some());

    let shared = tmp.private_dir("shared");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o770)).unwrap();
    match private_dir::open(&shared, false) {
        Err(OpenError::NotPrivate(NotPrivate::Writable { mode })) => {
            assert_eq!(mode & 0o777, 0o770)
        }
        other => panic!("a group-writable directory: {other:?}"),
    }
    // Creating does not change what is there.
    assert!(private_dir::open(&shared, true).is_err());

    let link = tmp.path("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    match private_dir::open(&link, true) {
        Err(OpenError::NotPrivate(NotPrivate::NotADirectory)) => {}
        other => panic!("a symlink to a private directory: {other:?}"),
    }
    let e = private_dir::open(&link, false).unwrap_err();
    assert_eq!(e.to_string(), "it is a symlink or not a directory");
}
