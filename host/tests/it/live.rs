//! Live instances through the crate's API: what publishing costs other
//! instances. A name is claimed with a link to the host's one lock file
//! (`live::claim`), never by asking the instances already published, so a
//! host publishing N Ticks makes no connection at all, where listing before
//! each claim made N(N−1)/2 of them (issue 42), and holds N + 1
//! descriptors. Connections and descriptors are counted, not timed.
//! Names are claimed by exactly one of the hosts racing for one, a peer
//! of another uid is refused, and a live call too long for the Tick's
//! line is refused before it is sent.

use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tickbox_host::backend::native::{spawn, NativeSpec};
use tickbox_host::live::wire::{ErrorKind, Request};
use tickbox_host::live::{client, publish, LiveError, PublishOptions, Published, Registry};
use tickbox_host::session::{Session, SessionConfig};
use tickbox_test_support::*;

/// Instances one host publishes in the test: enough that a listing per
/// publish would be hundreds of connections.
const PUBLISHED: usize = 24;

async fn counter_session() -> Arc<Session> {
    let mut spec = NativeSpec::new(["python3".to_string(), tick("counter.py")]);
    spec.exit_grace = Duration::from_millis(50);
    spec.term_grace = Duration::from_millis(50);
    let io = spawn(&spec).expect("spawn");
    Arc::new(
        Session::start(io, SessionConfig::default())
            .await
            .expect("initialize"),
    )
}

/// Descriptors this process has open.
fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Whether someone connected to `listener` (a connection waits in its
/// backlog until accepted; accepting it closes it at once).
fn connected(listener: &std::os::unix::net::UnixListener) -> bool {
    match listener.accept() {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(e) => panic!("accept: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_claims_names_without_connecting_to_any_instance() {
    let dir = TempDir::new("live-claims");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    // Another host's instance: a socket nobody answers on, where any
    // connection waits to be seen.
    let other = std::os::unix::net::UnixListener::bind(registry.socket("0ther")).unwrap();
    other.set_nonblocking(true).unwrap();
    let session = counter_session().await;
    let before = descriptors();
    let mut held: Vec<Published> = Vec::new();
    for _ in 0..PUBLISHED {
        let mut opts = PublishOptions::new("native");
        opts.registry = Some(registry.clone());
        held.push(publish(session.clone(), opts).await.unwrap());
    }
    // Each instance is its socket, and the names all point at one lock:
    // a descriptor per published Tick (plus the lock), so a host stops at
    // the open-file limit, not at half of it.
    let opened = descriptors() - before;
    assert!(
        (PUBLISHED..=PUBLISHED + 2).contains(&opened),
        "publishing {PUBLISHED} instances opened {opened} descriptors"
    );
    let mut names: Vec<&str> = held.iter().map(Published::name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), PUBLISHED, "names are unique: {names:?}");

    assert!(
        !connected(&other),
        "publishing connected to another host's instance"
    );
    let asked: Vec<u64> = held.iter().map(Published::connections_accepted).collect();
    assert!(
        asked.iter().all(|&n| n == 0),
        "publishing connected to instances: {asked:?}"
    );

    // Positive control: a listing (what publishing did before) connects to
    // every instance, and both counters see it.
    let lister = tokio::spawn({
        let registry = registry.clone();
        async move { client::list(&registry).await }
    });
    assert!(
        eventually(PATIENCE, || connected(&other)),
        "the other host's socket never saw the listing"
    );
    let listed = lister.await.unwrap();
    assert_eq!(
        listed.len(),
        PUBLISHED,
        "the other host never answered, so it is not listed"
    );
    assert!(
        held.iter().all(|p| p.connections_accepted() == 1),
        "{:?}",
        held.iter()
            .map(Published::connections_accepted)
            .collect::<Vec<_>>()
    );
    drop(held);
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_of_many_ticks_leaves_a_bounded_number_of_ended_records() {
    use tickbox_host::live::ended::MAX_ENDED_RECORDS;
    let dir = TempDir::new("live-ended");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let session = counter_session().await;
    let records = || {
        std::fs::read_dir(registry.dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".ended.json"))
            .count()
    };
    // Two and a half times the bound, published and unpublished one by
    // one, as a host of that many Ticks does when it stops.
    let total = MAX_ENDED_RECORDS * 5 / 2;
    for _ in 0..total {
        let mut opts = PublishOptions::new("native");
        opts.registry = Some(registry.clone());
        drop(publish(session.clone(), opts).await.unwrap());
    }
    let left = records();
    assert!(
        (MAX_ENDED_RECORDS..2 * MAX_ENDED_RECORDS).contains(&left),
        "{total} instances ended; {left} records are left (bound {MAX_ENDED_RECORDS})"
    );
    // Listing keeps the bound itself.
    assert_eq!(
        tickbox_host::live::ended::list(&registry).len(),
        MAX_ENDED_RECORDS
    );
    session.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_hosts_one_after_another_leave_a_bounded_number_of_ended_records() {
    use tickbox_host::live::ended::MAX_ENDED_RECORDS;
    let dir = TempDir::new("live-one-shot");
    let dir = dir.path("tickbox");
    let session = counter_session().await;
    let records = || {
        std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".ended.json"))
            .count()
    };
    // Each handle is a host of its own (a `tickbox call` in a script): it
    // publishes one instance and ends it.
    let total = MAX_ENDED_RECORDS * 5 / 2;
    for done in 1..=total {
        let mut opts = PublishOptions::new("native");
        opts.registry = Some(Registry::at(&dir).unwrap());
        drop(publish(session.clone(), opts).await.unwrap());
        // Positive control: below the bound, every record is kept.
        if done == MAX_ENDED_RECORDS {
            assert_eq!(records(), MAX_ENDED_RECORDS);
        }
    }
    assert_eq!(
        records(),
        MAX_ENDED_RECORDS,
        "{total} one-shot hosts ended an instance each"
    );
    session.shutdown().await;
}

#[tokio::test]
async fn a_peer_of_another_uid_is_refused() {
    let dir = TempDir::new("live-peer");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let session = counter_session().await;
    let mut opts = PublishOptions::new("native");
    opts.registry = Some(registry.clone());
    opts.name = Some("mine".into());
    // The host believes it belongs to another user: we are that "other" peer.
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    opts.owner_uid = Some(me + 1);
    let published = publish(session.clone(), opts).await.unwrap();
    let conn = client::Connection::open(published.socket(), "mine")
        .await
        .unwrap();
    let err = conn.request(Request::Read).await.unwrap_err();
    assert!(
        matches!(&err, LiveError::Refused(m) if m.contains(&format!("uid {me}"))),
        "{err}"
    );
    drop(published);
    session.shutdown().await;
}

#[tokio::test]
async fn publishing_names_instances_and_unpublishing_removes_the_socket() {
    let dir = TempDir::new("live-names");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let a = counter_session().await;
    let b = counter_session().await;
    let mut opts = PublishOptions::new("native");
    opts.registry = Some(registry.clone());
    let pa = publish(a.clone(), opts.clone()).await.unwrap();
    let pb = publish(b.clone(), opts).await.unwrap();
    assert_eq!((pa.name(), pb.name()), ("counter", "counter-2"));
    let mut taken = PublishOptions::new("native");
    taken.registry = Some(registry.clone());
    taken.name = Some("counter-2".into());
    assert!(matches!(
        publish(a.clone(), taken).await,
        Err(LiveError::NameTaken(n)) if n == "counter-2"
    ));
    let listed: Vec<String> = client::list(&registry)
        .await
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(listed.len(), 2);
    let by_id = client::resolve(&registry, &format!("@{}", pb.id()))
        .await
        .unwrap();
    assert_eq!(by_id.name, "counter-2");
    let socket = pa.socket().to_path_buf();
    drop(pa);
    assert!(!socket.exists());
    assert_eq!(client::list(&registry).await.len(), 1);
    drop(pb);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_hosts_publishing_one_name_together_exactly_one_gets_it() {
    let dir = TempDir::new("live-race");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(counter_session().await);
    }
    let racers: Vec<_> = sessions
        .iter()
        .map(|s| {
            let mut opts = PublishOptions::new("native");
            opts.registry = Some(registry.clone());
            opts.name = Some("same".into());
            tokio::spawn(publish(s.clone(), opts))
        })
        .collect();
    let mut won = Vec::new();
    let mut lost = 0;
    for r in racers {
        match r.await.unwrap() {
            Ok(p) => won.push(p),
            Err(LiveError::NameTaken(n)) => {
                assert_eq!(n, "same");
                lost += 1
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((won.len(), lost), (1, 5));
    // Default names are claimed the same way: all distinct.
    let defaults: Vec<_> = sessions[1..]
        .iter()
        .map(|s| {
            let mut opts = PublishOptions::new("native");
            opts.registry = Some(registry.clone());
            tokio::spawn(publish(s.clone(), opts))
        })
        .collect();
    let mut names = Vec::new();
    let mut held = Vec::new();
    for r in defaults {
        let p = r.await.unwrap().unwrap();
        names.push(p.name().to_string());
        held.push(p);
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 5, "{names:?}");
    // Unpublishing lets the name go.
    drop(won);
    let mut again = PublishOptions::new("native");
    again.registry = Some(registry.clone());
    again.name = Some("same".into());
    let p = publish(sessions[0].clone(), again).await.unwrap();
    assert_eq!(p.name(), "same");
    drop((p, held));
    for s in sessions {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn a_live_call_over_the_line_limit_is_refused_before_sending() {
    let dir = TempDir::new("live-bigargs");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let session = counter_session().await;
    let mut opts = PublishOptions::new("native");
    opts.registry = Some(registry.clone());
    let published = publish(session.clone(), opts).await.unwrap();
    // Bound to another revision, so the host sends it unvalidated (the
    // Tick would refuse it with -32004): only the size check stands between.
    let revision = "not-the-current-one".to_string();
    let tool = session.descriptor().unwrap().tools[0]
        .name
        .wire()
        .to_string();
    let limit = tickbox_protocol::limits::MAX_LINE_BYTES;
    // Fits the socket's 9 MiB frame, not the Tick's 8 MiB line.
    let args = json!({"blob": "x".repeat(limit + 1)});
    let conn = client::Connection::open(published.socket(), "counter")
        .await
        .unwrap();
    let err = conn
        .request(Request::Call {
            tool,
            args,
            revision,
            timeout_ms: None,
        })
        .await
        .unwrap_err();
    match err {
        LiveError::Remote { kind, message } => {
            assert_eq!(kind, ErrorKind::Usage);
            assert!(message.contains("line limit"), "{message}");
        }
        other => panic!("{other}"),
    }
    assert!(session.end_reason().is_none(), "the Tick never saw it");
    drop(published);
    session.shutdown().await;
}

#[tokio::test]
async fn a_watch_interval_past_its_bound_is_refused_not_a_panic() {
    use tickbox_host::live::wire::MAX_WATCH_INTERVAL_MS;
    let dir = TempDir::new("live-watch-interval");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let session = counter_session().await;
    let mut opts = PublishOptions::new("native");
    opts.registry = Some(registry.clone());
    let published = publish(session.clone(), opts).await.unwrap();
    let open = || client::Connection::open(published.socket(), "counter");
    let watch = |interval_ms| Request::Watch { interval_ms };
    let err = open().await.unwrap().request(watch(u64::MAX)).await;
    match err {
        Err(LiveError::Remote { kind, message }) => {
            assert_eq!(kind, ErrorKind::Usage);
            assert!(message.contains("watch interval"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Positive control: at the bound, the watch streams its first state.
    let mut conn = open().await.unwrap();
    let first = conn.start(watch(MAX_WATCH_INTERVAL_MS)).await;
    assert!(first.is_ok(), "{first:?}");
    drop((conn, published));
    session.shutdown().await;
}

/// A socket whose host is gone (nobody listens) is taken out of the
/// registry by the next listing (`tickbox ls`, a client resolving a name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_socket_is_removed_by_ls() {
    let dir = TempDir::new("live-stale");
    let registry = Registry::at(dir.path("tickbox")).unwrap();
    let stale = registry.socket("dead01");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    assert!(client::list(&registry).await.is_empty());
    assert!(!stale.exists(), "the stale socket is gone");
}

/// Without `XDG_RUNTIME_DIR` the registry is in the shared temp dir:
/// someone else's file where ours would go makes a private directory of
/// our own instead of a denial of service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_registry_dir_in_tmp_is_not_a_denial_of_service() {
    let tmp = TempDir::new("registry-tmp");
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::fs::write(tmp.path(&format!("tickbox-{uid}")), "taken").unwrap();
    let registry = Registry::in_temp(&tmp.0, uid).expect("a registry");
    assert!(client::list(&registry).await.is_empty());
    let private: Vec<_> = std::fs::read_dir(&tmp.0)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("tickbox-{uid}-"))
        })
        .map(|e| e.path())
        .collect();
    assert_eq!(private.len(), 1, "one private directory was made");
    assert_eq!(registry.dir(), private[0]);
    // The next start finds it again rather than making another.
    let again = Registry::in_temp(&tmp.0, uid).expect("a registry");
    assert_eq!(again.dir(), registry.dir());
}
