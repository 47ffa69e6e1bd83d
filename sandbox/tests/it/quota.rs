//! Write quotas: a Tick's (`max_write`) and a grant's own (`max=`). A write
//! past either is the guest's error and no more than the quota lands; a
//! preview-1 module, which cannot be metered, is refused a quota at start.

use crate::guest::*;
use serde_json::{json, Value};
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::*;

async fn write(path: &str, bytes: usize, grants: &GrantSpec) -> Value {
    let args = json!({"path": path, "text": "x".repeat(bytes)});
    attempt("write_file", args, grants).await
}

#[tokio::test]
async fn writes_past_the_quota_are_the_guests_error() {
    let data = TempDir::new("quota");
    let grants = GrantSpec {
        max_write: Some("64KiB".into()),
        ..dirs(&[&format!("{}::/q", data.0.display())])
    };
    // Positive control: within the quota.
    let v = write("/q/small.txt", 10_000, &grants).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(data.path("small.txt")).unwrap().len(),
        10_000
    );
    // Past it: the guest's write fails, and no more than the quota landed.
    let v = write("/q/big.txt", 100_000, &grants).await;
    assert_eq!(v["ok"], false, "{v}");
    let written = std::fs::metadata(data.path("big.txt")).unwrap().len();
    assert!(written <= 64 * 1024, "{written} bytes landed");
    // A preview-1 module cannot be metered: the quota is refused for it.
    let p1 = GrantSpec {
        max_write: Some("1MiB".into()),
        ..Default::default()
    };
    let why = refused(&hostile_p1(), &p1).await;
    assert!(why.contains("max_write needs a component"), "{why}");
    let much = GrantSpec {
        max_write: Some("much".into()),
        ..Default::default()
    };
    assert!(much.resolve().is_err(), "a size is required");
}

#[tokio::test]
async fn writes_past_a_grants_own_quota_are_the_guests_error() {
    let q = TempDir::new("grant-quota");
    let free = TempDir::new("grant-quota-free");
    let quota_grant = format!("{}::/q:rw,max=64KiB", q.0.display());
    let free_grant = format!("{}::/free", free.0.display());
    let both = dirs(&[&quota_grant, &free_grant]);
    // Positive controls: within the grant's quota, and past it in a grant
    // without one.
    let v = write("/q/small.txt", 10_000, &both).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(q.path("small.txt")).unwrap().len(),
        10_000
    );
    let v = write("/free/big.txt", 100_000, &both).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(free.path("big.txt")).unwrap().len(),
        100_000
    );
    // Past it: the guest's write fails, and no more than the quota landed.
    let v = write("/q/big.txt", 100_000, &both).await;
    assert_eq!(v["ok"], false, "{v}");
    // (wasi-libc writes files through a stream, and reports a stream's
    // failure as EIO whatever its cause.)
    let landed = std::fs::metadata(q.path("big.txt")).unwrap().len();
    assert!(landed <= 64 * 1024, "{landed} bytes landed");
    // Beside a larger Tick-wide quota, the grant's own quota still holds.
    let larger = GrantSpec {
        max_write: Some("1MiB".into()),
        ..dirs(&[&quota_grant])
    };
    let v = write("/q/big2.txt", 100_000, &larger).await;
    assert_eq!(v["ok"], false, "{v}");
    // A preview-1 module cannot be metered: refused at start.
    let why = refused(&hostile_p1(), &dirs(&[&quota_grant])).await;
    assert!(
        why.contains("a dir write quota (max=) needs a component"),
        "{why}"
    );
    let bad = format!("{}::/q:rw,max=lots", q.0.display());
    let e = dirs(&[&bad]).resolve().expect_err("max=lots");
    assert!(e.to_string().contains("max= expects a size"), "{e}");
    let ro = format!("{}::/q:ro,max=1MiB", q.0.display());
    let e = dirs(&[&ro])
        .resolve()
        .expect_err("a quota on a read-only grant");
    assert!(
        e.to_string()
            .contains("a read-only grant takes no write quota"),
        "{e}"
    );
}
