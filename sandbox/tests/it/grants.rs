//! What a wasm Tick can reach is exactly its grants: the hostile guest
//! tries one escape per tool (files, sockets, name lookups, environment,
//! symbolic links, tickbox's own state), each contained and reported as
//! the guest's error, beside a positive control under the same grants.

use crate::guest::*;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tickbox_sandbox::{EngineOptions, GrantSpec, WasmEngine};
use tickbox_test_support::wasm::{p1_symlinker, write_wasm};
use tickbox_test_support::*;

#[tokio::test]
async fn no_file_is_reachable_without_a_grant() {
    let none = GrantSpec::default();
    let v = attempt("read_file", json!({"path": "/etc/passwd"}), &none).await;
    assert!(denied(&v), "{v}");
    let v = attempt("list_dir", json!({"path": "/"}), &none).await;
    assert!(denied(&v), "{v}");
    let v = attempt("read_file", json!({"path": "etc/passwd"}), &none).await;
    assert!(denied(&v), "{v}");
}

#[tokio::test]
async fn a_granted_dir_is_readable_and_nothing_beyond_it() {
    let dir = data_dir();
    let grants = dirs(&[&format!("{}::/data", dir.0.display())]);
    let v = attempt("read_file", json!({"path": "/data/hello.txt"}), &grants).await;
    assert_eq!(
        v,
        json!({"ok": true, "value": "hello from the host"}),
        "positive control"
    );
    for path in [
        "/data/../../../../etc/passwd",
        "/data/sub/../../etc/passwd",
        "/etc/passwd",
        "/data/passwd-link",
        "/data/up/hello.txt",
    ] {
        let v = attempt("read_file", json!({"path": path}), &grants).await;
        assert!(denied(&v), "{path} must not be readable: {v}");
    }
    let v = attempt("list_dir", json!({"path": "/data"}), &grants).await;
    let mut names: Vec<String> = v["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["hello.txt", "passwd-link", "sub", "up"]);
    // Writes are allowed in a read-write grant, and land in the host dir.
    let v = attempt(
        "write_file",
        json!({"path": "/data/new.txt", "text": "hi"}),
        &grants,
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(std::fs::read_to_string(dir.path("new.txt")).unwrap(), "hi");
}

#[tokio::test]
async fn a_read_only_grant_refuses_writes() {
    let dir = data_dir();
    let grants = dirs(&[&format!("{}::/data:ro", dir.0.display())]);
    let v = attempt("read_file", json!({"path": "/data/hello.txt"}), &grants).await;
    assert_eq!(v["value"], "hello from the host", "positive control: {v}");
    for path in ["/data/hello.txt", "/data/new.txt", "/data/sub/new.txt"] {
        let v = attempt(
            "write_file",
            json!({"path": path, "text": "overwrite"}),
            &grants,
        )
        .await;
        assert!(denied(&v), "{path}: {v}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path("hello.txt")).unwrap(),
        "hello from the host"
    );
    assert!(!dir.path("new.txt").exists());
}

#[tokio::test]
async fn a_single_file_can_be_granted_without_its_directory() {
    let dir = data_dir();
    std::fs::write(dir.path("secret.txt"), "not for the guest").unwrap();
    let grants = dirs(&[&format!(
        "{}::/cfg/hello.txt:ro",
        dir.path("hello.txt").display()
    )]);
    let v = attempt("read_file", json!({"path": "/cfg/hello.txt"}), &grants).await;
    assert_eq!(v["value"], "hello from the host", "{v}");
    let v = attempt("read_file", json!({"path": "/cfg/secret.txt"}), &grants).await;
    assert!(denied(&v), "{v}");
    let v = attempt("list_dir", json!({"path": "/cfg"}), &grants).await;
    assert_eq!(v["value"], json!(["hello.txt"]), "{v}");
}

#[tokio::test]
async fn a_writable_single_file_grant_is_that_file_and_nothing_beside_it() {
    let dir = data_dir();
    let grants = dirs(&[&format!(
        "{}::/cfg/hello.txt",
        dir.path("hello.txt").display()
    )]);
    // Nothing else is made, moved or linked in its private directory.
    for (tool, args) in [
        ("write_file", json!({"path": "/cfg/other.txt", "text": "x"})),
        ("create_many", json!({"path": "/cfg", "n": 1, "dirs": true})),
        (
            "rename",
            json!({"from": "/cfg/hello.txt", "to": "/cfg/moved.txt"}),
        ),
        (
            "hard_link",
            json!({"from": "/cfg/hello.txt", "to": "/cfg/again.txt"}),
        ),
    ] {
        let v = attempt(tool, args, &grants).await;
        assert!(denied(&v), "{tool}: {v}");
    }
    // Positive control: the granted file itself is written, on the host.
    let v = attempt(
        "write_file",
        json!({"path": "/cfg/hello.txt", "text": "new"}),
        &grants,
    )
    .await;
    assert_eq!(v["value"], "written", "{v}");
    assert_eq!(
        std::fs::read_to_string(dir.path("hello.txt")).unwrap(),
        "new"
    );
}

/// A loopback server that answers each connection with a greeting.
fn greeter() -> (u16, std::thread::JoinHandle<()>, Arc<AtomicBool>) {
    // Blocking: the thread sleeps in accept until a client comes, and the
    // test wakes it to stop with one last connection (`wake_listener`).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut c, _)) => {
                    let _ = c.write_all(b"greetings");
                }
                Err(_) => break,
            }
        }
    });
    (port, h, stop)
}

fn net(allow: &[&str]) -> GrantSpec {
    GrantSpec {
        allow_net: allow.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

#[tokio::test]
async fn sockets_reach_only_granted_addresses() {
    let (port, h, stop) = greeter();
    let (other, h2, stop2) = greeter();
    let addr = format!("127.0.0.1:{port}");
    let v = attempt("connect", json!({"addr": addr}), &net(&[])).await;
    assert!(denied(&v), "no grant, no socket: {v}");
    let v = attempt("connect", json!({"addr": addr}), &net(&[&addr])).await;
    assert_eq!(
        v,
        json!({"ok": true, "value": "greetings"}),
        "positive control"
    );
    // A grant is per address: the same host on another port stays closed.
    let elsewhere = json!({"addr": format!("127.0.0.1:{other}")});
    let v = attempt("connect", elsewhere.clone(), &net(&[&addr])).await;
    assert!(denied(&v), "{v}");
    let v = attempt("udp_send", elsewhere, &net(&[&addr])).await;
    assert!(denied(&v), "{v}");
    // A granted name resolves, and connects to what it resolves to.
    let named = format!("localhost:{port}");
    let v = attempt("connect", json!({"addr": named}), &net(&[&named])).await;
    assert_eq!(v["value"], "greetings", "{v}");
    stop.store(true, Ordering::Relaxed);
    stop2.store(true, Ordering::Relaxed);
    wake_listener(port);
    wake_listener(other);
    h.join().unwrap();
    h2.join().unwrap();
}

#[tokio::test]
async fn name_lookup_is_only_for_granted_names() {
    let lookup = json!({"name": "localhost"});
    let v = attempt("lookup", lookup.clone(), &net(&[])).await;
    assert!(denied(&v), "{v}");
    let v = attempt("lookup", lookup.clone(), &net(&["127.0.0.1:80"])).await;
    assert!(denied(&v), "an IP grant allows no lookups: {v}");
    let v = attempt("lookup", lookup, &net(&["localhost:80"])).await;
    assert_eq!(v["ok"], true, "{v}");
}

#[tokio::test]
async fn only_named_environment_variables_pass() {
    // PATH is set in every test process, and its value is the host's: a
    // variable the guest must not see unless it is named.
    let host_path = std::env::var("PATH").expect("PATH is set");
    let read = |env: &[&str]| {
        let grants = GrantSpec {
            env: env.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        };
        async move { attempt("env", json!({"name": "PATH"}), &grants).await }
    };
    let v = read(&[]).await;
    assert_eq!(v["value"], Value::Null, "{v}");
    let mut all: Vec<&str> = v["all"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, vec!["TERM", "TICKLOOP_INSTANCE_ID"]);
    assert_eq!(read(&["PATH"]).await["value"], json!(host_path));
    assert_eq!(read(&["PATH=other"]).await["value"], "other");
}

#[tokio::test]
async fn symlinks_cannot_be_created_in_a_writable_grant() {
    let data = TempDir::new("symlink-grant");
    let grants = dirs(&[&format!("{}::/data", data.0.display())]);
    let target = "../../../etc/shadow";
    // A component: the guest gets `not-permitted`.
    let v = attempt("symlink", json!({"target": target}), &grants).await;
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("not-permitted"),
        "{v}"
    );
    assert!(
        std::fs::symlink_metadata(data.path("link")).is_err(),
        "no link was made"
    );
    // Positive control: the same grant is writable.
    let v = attempt(
        "write_file",
        json!({"path": "/data/w.txt", "text": "ok"}),
        &grants,
    )
    .await;
    assert_eq!(v["ok"], true, "{v}");

    // A preview-1 module: errno 63 (`perm`), which it returns as its status.
    let dir = TempDir::new("symlink-p1");
    let wasm = write_wasm(&dir, "sym.wasm", &p1_symlinker(target));
    let why = refused(&wasm, &grants).await;
    assert!(why.contains("exit status 63"), "{why}");
    assert!(
        std::fs::symlink_metadata(data.path("link")).is_err(),
        "no link was made"
    );
}

#[tokio::test]
async fn tickboxs_own_state_is_never_granted() {
    let cache = TempDir::new("own-state");
    let engine = WasmEngine::with_options(EngineOptions {
        cache_dir: Some(cache.0.clone()),
        ..Default::default()
    })
    .expect("engine");
    let start = |grants: GrantSpec| {
        let engine = engine.clone();
        async move {
            open_on(&engine, &hostile(), &grants, Default::default())
                .await
                .map(|s| async move { s.shutdown().await })
        }
    };
    // Make the cache (and its key) exist.
    start(GrantSpec::default()).await.expect("starts").await;
    let key = format!("{}::/k:ro", cache.path("mac.key").display());
    let whole = format!("{}::/c", cache.0.display());
    let parent = format!("{}::/p", cache.0.parent().unwrap().display());
    for grant in [&key, &whole, &parent] {
        match start(dirs(&[grant])).await {
            Err(e) => assert!(
                e.to_string().contains("overlaps tickbox's own state"),
                "{grant}: {e}"
            ),
            Ok(end) => {
                end.await;
                panic!("{grant} was granted")
            }
        }
    }
    // Positive control: a sibling directory is fine.
    let sibling = TempDir::new("own-state-sibling");
    let grant = format!("{}::/s", sibling.0.display());
    start(dirs(&[&grant])).await.expect("a sibling").await;
}
