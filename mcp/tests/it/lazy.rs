//! `start = "on-first-use"` (issue 42): a shared wasm Tick whose catalog
//! is in the catalog cache is listed without being started, started by
//! its first call, and stopped again when idle unless subscribed to (a
//! `resources/subscribe`, or a 2026-07-28 `subscriptions/listen`); the
//! cache keyed by the Tick's bytes and grants, refused when tampered with
//! or oversized, and written again when the started Tick's catalog
//! differs; a file changed after the host started refused at first use;
//! a per-client Tick's template left unstarted.
//! Each test keeps its own compile cache (the catalog cache lives in it),
//! so a first host start in it has nothing cached: the positive control
//! that starts the Tick with the host.

use crate::client::{serve_ticks, soon};
use crate::per_client::{increment, request, start_clients, starts_and_ends, starts_within};
use crate::server::HttpServer;
use crate::{logs, wasm_on, AuditLines, Hosting, Setup, PATIENCE};
use rmcp::model::{ProtocolVersion, SubscriptionFilter};
use rmcp::service::ClientLifecycleMode;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tickbox_host::SessionConfig;
use tickbox_mcp::limits::MAX_CACHED_CATALOG_BYTES;
use tickbox_mcp::{Grants, HostedTick};
use tickbox_sandbox::{EngineOptions, WasmEngine};
use tickbox_telemetry::audit::{Audit, AuditSink, Origin};
use tickbox_test_support::mcp_clients::counter_wasm;
use tickbox_test_support::mcp_http::initialize_http;
use tickbox_test_support::{cache_entries, eventually, eventually_await, TempDir};

/// An engine compiling into (and keeping catalogs in) `cache`.
fn engine_in(cache: &Path) -> Arc<WasmEngine> {
    WasmEngine::with_options(EngineOptions {
        cache_dir: Some(cache.to_path_buf()),
        ..EngineOptions::default()
    })
    .expect("the wasm engine")
}

/// The counter as `counter`, started on first use and stopped after
/// `idle`, compiled into (and its catalog cached in) `cache`.
fn lazy_counter(cache: &Path, grants: &Grants, idle: Duration) -> Hosting {
    lazy_counter_at(&counter_wasm(), cache, grants, idle)
}

/// [`lazy_counter`] from the file `wasm`.
fn lazy_counter_at(wasm: &str, cache: &Path, grants: &Grants, idle: Duration) -> Hosting {
    let engine = engine_in(cache);
    Hosting {
        on_first_use: Some(idle),
        ..Hosting::shared(Some("counter"), wasm_on(&engine, wasm, grants))
    }
}

/// Serves `tick` over HTTP, its audit kept.
fn serve(tick: Hosting) -> (HttpServer, Arc<AuditLines>) {
    serve_all(vec![tick])
}

/// Serves `ticks` over HTTP, their audit kept in one stream.
fn serve_all(ticks: Vec<Hosting>) -> (HttpServer, Arc<AuditLines>) {
    let lines = Arc::new(AuditLines::default());
    let setup = Setup {
        audit: Some(lines.clone()),
        ..Setup::of(ticks)
    };
    (HttpServer::start_setup(setup, |_| {}), lines)
}

/// The `field` of each item of the `list` (`tools`, `resources`) that
/// `LIST/list` gives `session`.
fn listed(server: &HttpServer, session: &str, list: &str, field: &str) -> Vec<Value> {
    let m = request(server, session, &format!("{list}/list"), json!({}));
    let items = m["result"][list]
        .as_array()
        .unwrap_or_else(|| panic!("{m}"));
    items.iter().map(|i| i[field].clone()).collect()
}

/// The names `tools/list` gives `session`.
fn tools(server: &HttpServer, session: &str) -> Vec<String> {
    let names = listed(server, session, "tools", "name");
    names
        .iter()
        .map(|n| n.as_str().unwrap_or_default().to_string())
        .collect()
}

/// A host start of `tick` that starts it with the host (nothing usable
/// cached): one audit `start` before any client came, its tools listed.
/// The host stops when this returns, its catalog cached.
fn starts_with_the_host(tick: Hosting) {
    let (server, audit) = serve(tick);
    let starts = starts_and_ends(&audit.events()).0;
    assert_eq!(
        starts.len(),
        1,
        "started with the host: {:?}",
        audit.events()
    );
    let s = initialize_http(&server, &[]);
    assert!(tools(&server, &s).contains(&"increment".to_string()));
}

/// A test's own directory and compile cache in it, the counter's catalog
/// cached there by a first host start (which starts it with the host:
/// the positive control of every lazy start after it).
fn warmed(tag: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let cache = dir.path("cache");
    starts_with_the_host(lazy_counter(&cache, &Grants::default(), PATIENCE));
    (dir, cache)
}

/// The one catalog entry in the cache `dir`.
fn catalog_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = cache_entries(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with("-catalog.cwasm"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries[0].clone()
}

#[test]
fn a_tick_whose_catalog_is_cached_is_listed_unstarted_and_its_first_call_starts_it() {
    // Positive control: nothing cached yet, so it starts with the host.
    let (_dir, cache) = warmed("lazy-cached");
    catalog_entry(&cache);
    let (server, audit) = serve(lazy_counter(&cache, &Grants::default(), PATIENCE));
    let s = initialize_http(&server, &[]);
    let names = tools(&server, &s);
    for tool in ["increment", "tick_state", "tick_screen"] {
        assert!(names.contains(&tool.to_string()), "{tool} in {names:?}");
    }
    assert_eq!(
        listed(&server, &s, "resources", "uri"),
        [json!("tick://counter/state")]
    );
    assert!(
        starts_and_ends(&audit.events()).0.is_empty(),
        "listings start nothing: {:?}",
        audit.events()
    );
    // The first call starts it, waits for it, and is answered.
    assert_eq!(increment(&server, &s, 2), Ok(2));
    starts_within(&audit, 1);
    // One shared instance: the next call goes to the same one.
    assert_eq!(increment(&server, &s, 3), Ok(5));
    starts_within(&audit, 1);
}

#[test]
fn an_idle_tick_started_on_first_use_is_stopped_and_the_next_call_starts_it_afresh() {
    let (_dir, cache) = warmed("lazy-idle");
    let idle = Duration::from_secs(1);
    let (server, audit) = serve(lazy_counter(&cache, &Grants::default(), idle));
    let s = initialize_http(&server, &[]);
    assert!(starts_and_ends(&audit.events()).0.is_empty());
    assert_eq!(increment(&server, &s, 3), Ok(3));
    let first = starts_within(&audit, 1)[0].clone();
    let stopped = eventually(PATIENCE, || {
        starts_and_ends(&audit.events()).1.contains(&first)
    });
    assert!(stopped, "the idle instance ended: {:?}", audit.events());
    // Its state went with it: the next call starts from zero.
    assert_eq!(increment(&server, &s, 1), Ok(1));
    let starts = starts_within(&audit, 2);
    assert_ne!(starts[1], first);
}

#[test]
fn a_tampered_or_oversized_cached_catalog_is_ignored_and_the_tick_starts_with_the_host() {
    let (_dir, cache) = warmed("lazy-tampered");
    let tick = || lazy_counter(&cache, &Grants::default(), PATIENCE);
    let entry = catalog_entry(&cache);
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x20;
    std::fs::write(&entry, &bytes).unwrap();
    starts_with_the_host(tick());
    assert!(logs().text().contains("fails its MAC"), "{}", logs().text());
    // The eager start wrote a good entry again: the next start is lazy.
    let (server, audit) = serve(tick());
    let s = initialize_http(&server, &[]);
    assert!(tools(&server, &s).contains(&"increment".to_string()));
    assert!(starts_and_ends(&audit.events()).0.is_empty());
    drop(server);
    // Oversized: refused before it is read, whatever it holds.
    let entry = catalog_entry(&cache);
    let mut big = std::fs::read(&entry).unwrap();
    big.resize(MAX_CACHED_CATALOG_BYTES as usize + 4096, b' ');
    std::fs::write(&entry, &big).unwrap();
    starts_with_the_host(tick());
    assert!(
        logs().text().contains("over its size bound"),
        "{}",
        logs().text()
    );
}

#[test]
fn a_changed_grant_misses_the_cached_catalog() {
    let (_dir, cache) = warmed("lazy-grant");
    let tz = Grants {
        env: vec!["TZ=UTC".into()],
        ..Grants::default()
    };
    starts_with_the_host(lazy_counter(&cache, &tz, PATIENCE));
    // Positive control: each grant set now has its own entry, and the
    // first one is still lazy.
    let (server, audit) = serve(lazy_counter(&cache, &Grants::default(), PATIENCE));
    let s = initialize_http(&server, &[]);
    assert!(tools(&server, &s).contains(&"increment".to_string()));
    assert!(starts_and_ends(&audit.events()).0.is_empty());
}

#[test]
fn a_started_tick_whose_catalog_differs_from_the_cached_one_refuses_the_stale_call_and_recaches() {
    let (_dir, cache) = warmed("lazy-stale");
    // An entry tickbox itself wrote (under its MAC key) for another
    // revision of the same catalog: what a Tick rebuilt with the same
    // bytes could never give, but a changed catalog looks like this.
    let entry = catalog_entry(&cache);
    let key = entry.file_stem().unwrap().to_string_lossy().into_owned();
    let engine = engine_in(&cache);
    let store = engine.cache().expect("the cache opens");
    let cached = || -> Value {
        let entry = store.get_within(&key, MAX_CACHED_CATALOG_BYTES);
        serde_json::from_slice(entry.expect("the entry").code()).unwrap()
    };
    let real = cached();
    let mut stale = real.clone();
    stale["revision"] = json!("cached-stale");
    store.put(&key, &serde_json::to_vec(&stale).unwrap());
    let (server, audit) = serve(lazy_counter(&cache, &Grants::default(), PATIENCE));
    let s = initialize_http(&server, &[]);
    assert!(tools(&server, &s).contains(&"increment".to_string()));
    assert!(starts_and_ends(&audit.events()).0.is_empty());
    // The call bound to the cached revision starts the Tick, which has
    // another: refused, never sent.
    let m = request(
        &server,
        &s,
        "tools/call",
        json!({"name": "increment", "arguments": {"amount": 2}}),
    );
    let error = &m["result"]["structuredContent"]["error"];
    assert_eq!(error["kind"], "catalog_changed", "{m}");
    assert_eq!(error["executed"], false, "{m}");
    starts_within(&audit, 1);
    // The cache holds the started Tick's catalog again (written off the
    // async workers, so soon after the answer rather than before it).
    assert!(eventually(PATIENCE, || cached() == real), "{}", cached());
    // Listed again, the call runs (once: the refused one did not).
    tools(&server, &s);
    assert_eq!(increment(&server, &s, 2), Ok(2));
}

#[test]
fn a_tick_whose_file_changed_after_the_host_started_is_refused_at_its_first_use() {
    let dir = TempDir::new("lazy-changed");
    let cache = dir.path("cache");
    let wasm = dir.path("counter.wasm");
    std::fs::copy(counter_wasm(), &wasm).unwrap();
    let wasm = wasm.display().to_string();
    let tick = || lazy_counter_at(&wasm, &cache, &Grants::default(), PATIENCE);
    starts_with_the_host(tick());
    let (server, audit) = serve(tick());
    let s = initialize_http(&server, &[]);
    // Positive control: the listing is the cached catalog's.
    assert!(tools(&server, &s).contains(&"increment".to_string()));
    // Other bytes under the same name: not the Tick the clients listed.
    let mut bytes = std::fs::read(&wasm).unwrap();
    bytes.extend_from_slice(b"\0\x08appended\0");
    std::fs::write(&wasm, &bytes).unwrap();
    let m = request(
        &server,
        &s,
        "tools/call",
        json!({"name": "increment", "arguments": {"amount": 1}}),
    );
    let message = m["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{m}"));
    assert!(
        message.contains("the Tick `counter` (start = \"on-first-use\") could not start"),
        "{message}"
    );
    assert!(
        message.contains("sha256"),
        "names the digest rule: {message}"
    );
    let calls = audit.events().into_iter().filter(|e| e["event"] == "call");
    assert_eq!(calls.count(), 0, "no call reached a Tick");
}

#[test]
fn a_subscribed_tick_started_on_first_use_is_not_stopped_when_idle_until_unsubscribed() {
    let (_dir, cache) = warmed("lazy-subscribed");
    let idle = Duration::from_secs(1);
    // Two copies of the counter (one cached catalog), both lazy.
    let (server, audit) = serve_all(vec![
        Hosting {
            name: Some("kept"),
            ..lazy_counter(&cache, &Grants::default(), idle)
        },
        Hosting {
            name: Some("idle"),
            ..lazy_counter(&cache, &Grants::default(), idle)
        },
    ]);
    let s = initialize_http(&server, &[]);
    let uri = json!({"uri": "tick://kept/state"});
    let m = request(&server, &s, "resources/subscribe", uri.clone());
    assert!(m.get("error").is_none(), "{m}");
    let kept = starts_within(&audit, 1)[0].clone();
    // The control: `idle`, used after `kept` was and not subscribed to,
    // is stopped when idle; by then `kept` has been idle longer.
    let m = request(
        &server,
        &s,
        "tools/call",
        json!({"name": "idle_increment", "arguments": {"amount": 1}}),
    );
    assert_eq!(m["result"]["structuredContent"]["value"], 1, "{m}");
    let other = starts_within(&audit, 2)[1].clone();
    let stopped = eventually(PATIENCE, || {
        starts_and_ends(&audit.events()).1.contains(&other)
    });
    assert!(
        stopped,
        "the unsubscribed one stopped: {:?}",
        audit.events()
    );
    let ends = starts_and_ends(&audit.events()).1;
    assert!(!ends.contains(&kept), "the subscribed one runs: {ends:?}");
    // Unsubscribed, it is idle like any other.
    let m = request(&server, &s, "resources/unsubscribe", uri);
    assert!(m.get("error").is_none(), "{m}");
    let stopped = eventually(PATIENCE, || {
        starts_and_ends(&audit.events()).1.contains(&kept)
    });
    assert!(stopped, "then it stopped: {:?}", audit.events());
}

#[test]
fn a_per_client_tick_on_first_use_starts_no_template_and_each_client_its_own_instance() {
    let dir = TempDir::new("lazy-per-client");
    let cache = dir.path("cache");
    let per_client = || Hosting {
        per_client: Some((None, None)),
        ..lazy_counter(&cache, &Grants::default(), PATIENCE)
    };
    // Nothing cached: the template starts with the host (the control).
    starts_with_the_host(per_client());
    let (server, audit) = serve(per_client());
    let (a, b) = (initialize_http(&server, &[]), initialize_http(&server, &[]));
    assert!(tools(&server, &a).contains(&"increment".to_string()));
    assert!(starts_and_ends(&audit.events()).0.is_empty());
    assert_eq!(increment(&server, &a, 2), Ok(2));
    assert_eq!(increment(&server, &b, 1), Ok(1));
    starts_within(&audit, 2);
    let clients = start_clients(&audit);
    assert_eq!(clients, [json!(a), json!(b)], "no template: {clients:?}");
}

/// `kept` and `idle`, two copies of the counter started on first use and
/// stopped after a second idle, their catalog cached in `cache`, their
/// starts and ends in `audit`.
async fn two_lazy_counters(cache: &Path, audit: &Arc<AuditLines>) -> Vec<HostedTick> {
    let sink: Arc<dyn AuditSink> = audit.clone();
    let mut ticks = Vec::new();
    for name in ["kept", "idle"] {
        let launcher = wasm_on(&engine_in(cache), &counter_wasm(), &Grants::default())
            .audited(Some(Audit::new(Origin::Mcp, vec![sink.clone()])));
        let config = SessionConfig::default();
        let idle = Duration::from_secs(1);
        let tick =
            HostedTick::on_first_use(name.into(), &launcher, Grants::default(), config, idle);
        ticks.push(tick.await.expect("the facade is given its Tick"));
    }
    ticks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_listen_starts_a_tick_on_first_use_and_keeps_it_from_its_idle_stop() {
    let (_dir, cache) = tokio::task::spawn_blocking(|| warmed("lazy-listen"))
        .await
        .unwrap();
    let audit = Arc::new(AuditLines::default());
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let mcp = serve_ticks(two_lazy_counters(&cache, &audit).await, lifecycle).await;
    assert!(mcp.tools().await.iter().any(|t| t.name == "kept_increment"));
    assert!(
        starts_and_ends(&audit.events()).0.is_empty(),
        "listed, not started"
    );
    let uri = "tick://kept/state";
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions([uri])
        .build();
    let stream = soon("subscriptions/listen", mcp.client.peer().listen(filter))
        .await
        .expect("listen");
    let started = |n: usize| starts_and_ends(&audit.events()).0.len() >= n;
    assert!(
        eventually_await(PATIENCE, || async { started(1) }).await,
        "listening starts it"
    );
    let kept = starts_and_ends(&audit.events()).0[0].clone();
    // The control: `idle`, used after `kept` was and not listened to, is
    // stopped when idle; by then `kept` has been idle longer.
    let r = mcp.call("idle_increment", json!({"amount": 1})).await;
    assert_eq!(r.structured_content, Some(json!({"value": 1})), "{r:?}");
    assert!(eventually_await(PATIENCE, || async { started(2) }).await);
    let other = starts_and_ends(&audit.events()).0[1].clone();
    let ended = |session: &str| {
        starts_and_ends(&audit.events())
            .1
            .contains(&session.to_string())
    };
    assert!(
        eventually_await(PATIENCE, || async { ended(&other) }).await,
        "the control stopped"
    );
    assert!(
        !ended(&kept),
        "the listened-to one runs: {:?}",
        audit.events()
    );
    // The stream closed, it is idle like any other.
    drop(stream);
    assert!(
        eventually_await(PATIENCE, || async { ended(&kept) }).await,
        "then it stopped"
    );
    let (served, logged) = mcp.close().await;
    assert!(served.is_ok(), "{served:?}: {logged}");
}
