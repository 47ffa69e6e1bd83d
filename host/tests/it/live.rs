//! Live instances through the crate's API: what publishing costs other
//! instances. A name is claimed with a lock file (`live::claim`), never by
//! asking the instances already published, so a host publishing N Ticks
//! makes no connection at all, where listing before each claim made
//! N(N−1)/2 of them (issue 42). Connections are counted, not timed.

use std::sync::Arc;
use std::time::Duration;
use tickbox_host::backend::native::{spawn, NativeSpec};
use tickbox_host::live::{client, publish, PublishOptions, Published, Registry};
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
    let mut held: Vec<Published> = Vec::new();
    for _ in 0..PUBLISHED {
        let mut opts = PublishOptions::new("native");
        opts.registry = Some(registry.clone());
        held.push(publish(session.clone(), opts).await.unwrap());
    }
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
