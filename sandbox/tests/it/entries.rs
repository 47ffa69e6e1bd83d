//! Write quotas count what a Tick creates, not only the bytes it writes:
//! every file, directory or hard link a component creates costs
//! `ENTRY_COST` (4 KiB) against `max_write` and its grant's `max=`, and a
//! file cannot be moved into or out of a grant with its own quota from
//! another grant (`cross-device`, so a program copies it instead, and the
//! copy is metered). Each through a fresh hostile guest per step, the
//! host's directory checked after.

use crate::guest::*;
use serde_json::{json, Value};
use std::path::Path;
use tickbox_sandbox::GrantSpec;
use tickbox_test_support::*;

/// What one entry costs against a write quota (the runtime's `ENTRY_COST`).
const ENTRY_COST: usize = 4096;

/// One call of a fresh hostile guest under these `dir` grants and this
/// `max_write` quota; its result.
async fn call(tool: &str, args: Value, grants: &[&str], max_write: Option<&str>) -> Value {
    let spec = GrantSpec {
        max_write: max_write.map(str::to_string),
        ..dirs(grants)
    };
    attempt(tool, args, &spec).await
}

/// How many entries `dir` holds on the host.
fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// The guest saw its quota refuse it (`quota`, EDQUOT in wasi-libc).
fn assert_quota(v: &Value) {
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["kind"], "QuotaExceeded", "refused by the quota: {v}");
}

/// The guest saw `cross-device` (EXDEV).
fn assert_cross_device(v: &Value) {
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["kind"], "CrossesDevices", "refused as cross-device: {v}");
}

#[tokio::test]
async fn files_and_directories_a_tick_creates_count_against_its_write_quota() {
    let data = TempDir::new("entries");
    let grant = format!("{}::/q", data.0.display());
    // Twenty files or directories made under `data/KIND` with this quota;
    // what the guest counted must be what the host holds.
    let make = |kind: &'static str, dirs: bool, max_write: Option<&'static str>| {
        let sub = data.path(kind);
        std::fs::create_dir(&sub).unwrap();
        let grant = grant.clone();
        async move {
            let v = call(
                "create_many",
                json!({"path": format!("/q/{kind}"), "n": 20, "dirs": dirs}),
                &[&grant],
                max_write,
            )
            .await;
            assert_eq!(
                v["created"].as_u64().unwrap_or(20) as usize,
                count(&sub),
                "what the guest counted is what the host holds: {v}"
            );
            v
        }
    };
    // 40 KiB: ten entries of 4 KiB, files or directories; the eleventh is
    // the guest's `quota` error.
    for (kind, dirs) in [("files", false), ("dirs", true)] {
        let v = make(kind, dirs, Some("40KiB")).await;
        assert_quota(&v);
        assert_eq!(v["created"], 40 * 1024 / ENTRY_COST, "{v}");
    }
    // 1 KiB: not one entry.
    let v = make("none", false, Some("1KiB")).await;
    assert_quota(&v);
    assert_eq!(v["created"], 0, "{v}");
    // A grant's own quota counts entries too.
    let own = format!("{}::/q:rw,max=8KiB", data.0.display());
    std::fs::create_dir(data.path("own")).unwrap();
    let v = call(
        "create_many",
        json!({"path": "/q/own", "n": 20}),
        &[&own],
        None,
    )
    .await;
    assert_quota(&v);
    assert_eq!(v["created"], 2, "{v}");
    assert_eq!(count(&data.path("own")), 2);

    // Positive controls: without a quota all twenty are made; and under
    // 1 KiB a file that exists is still written (opening it with `create`
    // creates nothing, so costs nothing), within the byte quota.
    let v = make("free", false, None).await;
    assert_eq!(v, json!({"ok": true, "created": 20}));
    std::fs::write(data.path("none/exists.txt"), "").unwrap();
    let v = call(
        "write_file",
        json!({"path": "/q/none/exists.txt", "text": "x".repeat(100)}),
        &[&grant],
        Some("1KiB"),
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::read_to_string(data.path("none/exists.txt")).unwrap(),
        "x".repeat(100)
    );
    // And a new file's bytes and its entry share one quota: 5000 bytes
    // fit 8 KiB alone, not with the entry's 4 KiB.
    let v = call(
        "write_file",
        json!({"path": "/q/new.txt", "text": "x".repeat(5000)}),
        &[&grant],
        Some("8KiB"),
    )
    .await;
    assert_eq!(v["ok"], false, "{v}");
    let v = call(
        "write_file",
        json!({"path": "/q/new2.txt", "text": "x".repeat(4000)}),
        &[&grant],
        Some("8KiB"),
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        std::fs::metadata(data.path("new2.txt")).unwrap().len(),
        4000
    );
}

#[tokio::test]
async fn a_file_cannot_be_moved_or_linked_into_a_metered_grant_from_another() {
    let q = TempDir::new("move-metered");
    let free = TempDir::new("move-free");
    let free2 = TempDir::new("move-free2");
    let metered = format!("{}::/q:rw,max=64KiB", q.0.display());
    let open = format!("{}::/free", free.0.display());
    let open2 = format!("{}::/free2", free2.0.display());
    let grants = [metered.as_str(), open.as_str(), open2.as_str()];
    let call = |tool: &'static str, args: Value| call(tool, args, &grants, None);
    // 100,000 bytes where no quota applies, then moved into the grant
    // whose quota is 64 KiB: refused, and nothing moved.
    let v = call(
        "write_file",
        json!({"path": "/free/big.txt", "text": "x".repeat(100_000)}),
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    let v = call(
        "rename",
        json!({"from": "/free/big.txt", "to": "/q/big.txt"}),
    )
    .await;
    assert_cross_device(&v);
    assert!(!q.path("big.txt").exists());
    assert_eq!(
        std::fs::metadata(free.path("big.txt")).unwrap().len(),
        100_000
    );
    // A hard link is the same move without the removal: refused too.
    let v = call(
        "hard_link",
        json!({"from": "/free/big.txt", "to": "/q/big.txt"}),
    )
    .await;
    assert_cross_device(&v);
    assert!(!q.path("big.txt").exists());
    // Out of the metered grant as well (either side metered).
    std::fs::write(q.path("small.txt"), "s").unwrap();
    let v = call(
        "rename",
        json!({"from": "/q/small.txt", "to": "/free/small.txt"}),
    )
    .await;
    assert_cross_device(&v);
    assert!(q.path("small.txt").exists());

    // Positive controls: a rename within the metered grant, a hard link
    // within it (one entry's cost), and a move between two grants without
    // quotas all work.
    let v = call(
        "rename",
        json!({"from": "/q/small.txt", "to": "/q/moved.txt"}),
    )
    .await;
    assert_eq!(v, json!({"ok": true}));
    assert!(q.path("moved.txt").exists() && !q.path("small.txt").exists());
    let v = call(
        "hard_link",
        json!({"from": "/q/moved.txt", "to": "/q/linked.txt"}),
    )
    .await;
    assert_eq!(v, json!({"ok": true}));
    assert_eq!(std::fs::read_to_string(q.path("linked.txt")).unwrap(), "s");
    let v = call(
        "rename",
        json!({"from": "/free/big.txt", "to": "/free2/big.txt"}),
    )
    .await;
    assert_eq!(v, json!({"ok": true}));
    assert_eq!(
        std::fs::metadata(free2.path("big.txt")).unwrap().len(),
        100_000
    );
}
