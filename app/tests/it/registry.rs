//! Ticks from a registry (`oci://`) through [`App::open`],
//! [`App::resolve`], [`App::push`] and [`App::lock`]: a real OCI registry
//! (Debian's `docker-registry`, installed by tests/setup.sh) started on
//! loopback for each test and stopped at its end, and a fake registry for
//! what a real one never sends. The signers policy, the lock and consent
//! for pulled Ticks are the application layer's; what only the binary
//! does (`pull`'s and `verify`'s JSON, `cache clean`, `tickbox test` and
//! `tickbox mcp` taking a reference, the working directory's lock, the
//! live instance) stays in `cli/tests/it/registry.rs`.

use crate::{call, read, settings, Ran, Said};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tickbox_app::consent::approval;
use tickbox_app::registry::{files_report, verdicts, Push};
use tickbox_app::{App, Backend, Notice, RegistrySettings, Request, Settings, Target};
use tickbox_registry::policy::{Origin, Source};
use tickbox_sandbox::consent::TrustStore;
use tickbox_sandbox::limits::DEFAULT_MAX_WASM;
use tickbox_test_support::registry::{
    digest, fake_content, fake_with_plain_http_realm, free_port, policy_file, signers_policy,
    ssh_key, Fake, FakeContent, Registry, Secure, MANIFEST, WASM_CONFIG,
};
use tickbox_test_support::{build_wasm, http, loopback_pki, TempDir};

fn counter() -> PathBuf {
    build_wasm("examples", "counter", "wasm32-wasip2")
}

/// Settings with pulled Ticks kept in `store`'s `store` and approvals in
/// its `trust` (no signers policy at any default path).
fn settings_in(store: &TempDir) -> Settings {
    Settings {
        store_dir: Some(store.path("store")),
        ..settings(Some(store.path("trust")))
    }
}

/// A fresh App over `store`, as one `tickbox` command makes one.
fn app_in(store: &TempDir) -> App {
    App::new(settings_in(store))
}

/// A fresh App over `store` whose notices are kept.
fn heard_in(settings: Settings) -> (App, Arc<Said>) {
    let said = Arc::new(Said::default());
    (App::with_notices(settings, said.clone()), said)
}

fn oci(reference: &str) -> Request {
    Request::new(Target::Oci(reference.into()))
}

/// A request for `reference` under the registry settings `registry`.
fn oci_with(reference: &str, registry: &RegistrySettings) -> Request {
    let mut r = oci(reference);
    r.registry = registry.clone();
    r
}

fn none() -> RegistrySettings {
    RegistrySettings::default()
}

/// A file named as by a flag of the caller (`--signers`, `--lock`).
fn by_flag(path: impl Into<PathBuf>, flag: &str) -> Source {
    Source {
        path: path.into(),
        origin: Origin::Flag(flag.into()),
    }
}

/// A file named as by an environment variable (`$TICKBOX_SIGNERS`).
fn by_env(path: impl Into<PathBuf>, var: &str) -> Source {
    Source {
        path: path.into(),
        origin: Origin::Environment(var.into()),
    }
}

/// Asserts a start that failed as the CLI reports it: `code` (2 usage, 3
/// the Tick or registry), one escaped line holding `needle`.
fn refused(ran: &Ran, code: i32, needle: &str) {
    let (got, line) = ran;
    assert_eq!(*got, code, "{line}");
    assert!(line.contains(needle), "{needle} in: {line}");
    assert!(
        !line.contains('\n') && !line.contains('\u{1b}'),
        "one escaped line: {line:?}"
    );
}

fn value(n: u64) -> Ran {
    (0, json!({ "value": n }).to_string())
}

fn stored_blobs(store: &TempDir) -> usize {
    std::fs::read_dir(store.path("store"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Pushes a blob with the distribution API, as any plain client does.
fn raw_push_blob(port: u16, repo: &str, bytes: &[u8]) -> Value {
    let (status, headers, _) = http(
        port,
        "POST",
        &format!("/v2/{repo}/blobs/uploads/"),
        &[],
        b"",
    );
    assert_eq!(status, 202);
    let location = headers
        .iter()
        .find(|(k, _)| k == "location")
        .unwrap()
        .1
        .clone();
    let path = location
        .trim_start_matches(&format!("http://127.0.0.1:{port}"))
        .to_string();
    let sep = if path.contains('?') { '&' } else { '?' };
    let d = digest(bytes);
    let (status, _, body) = http(
        port,
        "PUT",
        &format!("{path}{sep}digest={}", d.replace(':', "%3A")),
        &[("Content-Type", "application/octet-stream")],
        bytes,
    );
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    json!({"digest": d, "size": bytes.len()})
}

/// Pushes `wasm` to `reference` (its manifest, if any, and key to sign).
fn push(
    app: &App,
    reference: &str,
    wasm: &Path,
    manifest: Option<&Path>,
    sign: Option<&Path>,
) -> tickbox_app::registry::Pushed {
    let push = Push {
        reference: reference.into(),
        wasm: wasm.to_path_buf(),
        manifest: manifest.map(Path::to_path_buf),
        sign: sign.map(Path::to_path_buf),
    };
    app.push(&push, &none())
        .unwrap_or_else(|e| panic!("push {reference}: {e}"))
}

/// What `tickbox trust REF` does: the pulled Tick's subject approved.
fn trust(app: &App, reference: &str) {
    let (_, _, subject) = app
        .pulled_subject(reference, DEFAULT_MAX_WASM, &none())
        .unwrap();
    let subject = subject.expect("asks for something");
    TrustStore::approve(
        app.settings().trust_dir.as_ref().unwrap(),
        approval(&subject, false),
    )
    .unwrap();
}

/// A recording pins the reference it ran however the registry was spelled:
/// resolutions are kept by the registry's identity, and looked up so.
#[test]
fn a_recording_pins_a_reference_under_any_spelling_of_its_registry() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-record");
    let app = app_in(&store);
    push(
        &app,
        &registry.reference("t/counter:v1"),
        &counter(),
        None,
        None,
    );
    let spelled = format!("oci://LOCALHOST:{}/t/counter:v1", registry.port);
    let pulled = app.resolve(&spelled, &none(), DEFAULT_MAX_WASM).unwrap();
    let kind = tickbox_host::TickKind::WasmComponent;
    let record = app.record_tick(&oci(&spelled), kind, (80, 24));
    assert_eq!(
        record.path,
        Some(PathBuf::from(pulled.reference.to_string())),
        "pinned to the digest it ran"
    );
    assert!(pulled.reference.to_string().contains("@sha256:"));
    // Control: a reference this App never resolved is recorded as written.
    let other = format!("oci://localhost:{}/t/counter:v2", registry.port);
    let record = app.record_tick(&oci(&other), kind, (80, 24));
    assert_eq!(record.path, Some(PathBuf::from(&other)));
}

#[tokio::test]
async fn a_component_pushed_by_a_plain_http_client_runs_by_tag_by_digest_and_offline_once_pinned() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let wasm = std::fs::read(counter()).unwrap();
    // The CNCF Wasm OCI layout, as another tool writes it (its config has
    // fields tickbox does not write).
    let layer = raw_push_blob(registry.port, "other/counter", &wasm);
    let config = serde_json::to_vec(&json!({"created": "2026-01-01T00:00:00Z", "architecture": "wasm", "os": "wasip2", "layerDigests": [layer["digest"]], "component": {"exports": [], "imports": []}})).unwrap();
    let config_d = raw_push_blob(registry.port, "other/counter", &config);
    let mut layer_d = layer.clone();
    layer_d["mediaType"] = json!("application/wasm");
    let mut cfg = config_d.clone();
    cfg["mediaType"] = json!(WASM_CONFIG);
    let manifest = serde_json::to_vec(
        &json!({"schemaVersion": 2, "mediaType": MANIFEST, "config": cfg, "layers": [layer_d]}),
    )
    .unwrap();
    let (status, _, _) = http(
        registry.port,
        "PUT",
        "/v2/other/counter/manifests/v1",
        &[("Content-Type", MANIFEST)],
        &manifest,
    );
    assert_eq!(status, 201);

    let by_tag = registry.reference("other/counter:v1");
    let ran = call(
        &app_in(&store),
        &oci(&by_tag),
        "increment",
        json!({"amount": 2}),
    )
    .await;
    assert_eq!(ran, value(2));
    let p = app_in(&store)
        .resolve(&by_tag, &none(), DEFAULT_MAX_WASM)
        .unwrap();
    let pinned = format!(
        "oci://127.0.0.1:{}/other/counter@{}",
        registry.port,
        digest(&manifest)
    );
    assert_eq!(p.reference.to_string(), pinned);
    assert_eq!(json!(p.wasm_digest.to_string()), layer["digest"]);
    assert!(p.fetched, "a tag is resolved by the registry");
    let again = app_in(&store)
        .resolve(&pinned, &none(), DEFAULT_MAX_WASM)
        .unwrap();
    assert!(!again.fetched, "pinned and in the store");
    // How it runs (`tickbox info`): the pulled Tick, pinned to its layer.
    let tick = app_in(&store).open(&oci(&pinned)).await.unwrap();
    match &tick.backend {
        Backend::Wasm {
            pulled: Some(p), ..
        } => assert_eq!(json!(p.wasm_digest.to_string()), layer["digest"]),
        _ => panic!("not a pulled wasm Tick"),
    }
    tick.close().await;

    // The store's copy changed behind tickbox's back (same size): the
    // sandbox, which checks the bytes it compiles against the pin, refuses.
    let mut bytes = std::fs::read(&p.wasm).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&p.wasm, &bytes).unwrap();
    refused(&read(&app_in(&store), &oci(&pinned)).await, 3, "pinned to");
    bytes[last] ^= 1;
    std::fs::write(&p.wasm, &bytes).unwrap();

    // With the registry gone, the pinned reference starts from the store;
    // the tag, which must be resolved, cannot.
    drop(registry);
    let ran = call(
        &app_in(&store),
        &oci(&pinned),
        "increment",
        json!({"amount": 3}),
    )
    .await;
    assert_eq!(ran, value(3));
    refused(
        &read(&app_in(&store), &oci(&by_tag)).await,
        3,
        "cannot reach the registry",
    );
}

#[tokio::test]
async fn tickbox_push_writes_the_wasm_artifact_layout_with_the_requested_grants() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-push");
    let wasm = dir.path("counter.wasm");
    std::fs::copy(counter(), &wasm).unwrap();
    std::fs::write(dir.path("counter.tick.toml"), "env = [\"HOME\"]\n").unwrap();
    let reference = registry.reference("ticks/counter:1.0");
    // The manifest beside the wasm is the one pushed.
    let pushed = push(&app_in(&store), &reference, &wasm, None, None);
    assert!(pushed.requested);
    // What a plain client sees: the CNCF layout plus tickbox's grants layer.
    let (status, headers, body) = http(
        registry.port,
        "GET",
        "/v2/ticks/counter/manifests/1.0",
        &[("Accept", MANIFEST)],
        b"",
    );
    assert_eq!(status, 200);
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "content-type" && v == MANIFEST),
        "{headers:?}"
    );
    assert_eq!(pushed.manifest.to_string(), digest(&body));
    let m: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(m["config"]["mediaType"], json!(WASM_CONFIG));
    assert_eq!(m["layers"][0]["mediaType"], json!("application/wasm"));
    assert_eq!(
        m["layers"][0]["digest"],
        json!(digest(&std::fs::read(&wasm).unwrap()))
    );
    assert_eq!(
        m["layers"][1]["mediaType"],
        json!("application/vnd.tickbox.manifest.v1+toml")
    );
    assert_eq!(m["layers"].as_array().unwrap().len(), 2);
    let (_, _, config) = http(
        registry.port,
        "GET",
        &format!(
            "/v2/ticks/counter/blobs/{}",
            m["config"]["digest"].as_str().unwrap()
        ),
        &[],
        b"",
    );
    let config: Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(
        (config["architecture"].as_str(), config["os"].as_str()),
        (Some("wasm"), Some("wasip2"))
    );

    // What it asks for needs an approval (no one to ask here), then runs.
    refused(
        &read(&app_in(&store), &oci(&reference)).await,
        2,
        "tickbox trust",
    );
    let pinned = pushed.reference.to_string();
    trust(&app_in(&store), &pinned);
    let tick = app_in(&store).open(&oci(&reference)).await.unwrap();
    let title = tick
        .session
        .descriptor()
        .expect("initialized")
        .title
        .wire()
        .to_string();
    tick.close().await;
    assert_eq!(title, "Counter");
    // The checker (`tickbox check`) passes it, by its pinned reference.
    let app = app_in(&store);
    let launcher = app.launcher(&oci(&pinned)).unwrap();
    let report = tickbox_conformance::check::run(&launcher, &pinned, &Default::default())
        .await
        .unwrap();
    assert!(report.passed(), "{}", report.to_text());
}

#[tokio::test]
async fn unknown_tags_a_registry_that_is_down_and_bad_references_are_one_line_each() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let app = app_in(&store);
    let ran = read(&app, &oci(&registry.reference("ticks/none:v1"))).await;
    refused(&ran, 3, "not found in the registry");
    let port = free_port();
    let ran = read(&app, &oci(&format!("oci://127.0.0.1:{port}/ticks/none:v1"))).await;
    refused(&ran, 3, "cannot reach the registry");
    refused(
        &read(&app, &oci("oci://127.0.0.1/ticks/none")).await,
        2,
        "no implicit latest",
    );
    let e = app
        .resolve("oci://127.0.0.1/Ticks/x:v1", &none(), DEFAULT_MAX_WASM)
        .unwrap_err();
    refused(
        &(if e.is_usage() { 2 } else { 3 }, e.to_string()),
        2,
        "lowercase",
    );
    let e = app
        .push(
            &Push {
                reference: "oci://127.0.0.1/ticks/x@sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
                wasm: "x.wasm".into(),
                manifest: None,
                sign: None,
            },
            &none(),
        )
        .unwrap_err();
    refused(
        &(if e.is_usage() { 2 } else { 3 }, e.to_string()),
        2,
        "push to a tag",
    );
    assert_eq!(stored_blobs(&store), 0);
}

#[tokio::test]
async fn what_a_registry_sends_that_does_not_match_is_refused_before_anything_starts_and_nothing_is_stored(
) {
    let wasm = std::fs::read(counter()).unwrap();
    let mut tampered = wasm.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    // Positive control: the same fake serving the right bytes runs.
    {
        let store = TempDir::new("oci-store");
        let fake = Fake::start(fake_content(&wasm, &wasm, None));
        let reference = format!("oci://127.0.0.1:{}/t/c:v1", fake.port);
        let ran = call(
            &app_in(&store),
            &oci(&reference),
            "increment",
            json!({"amount": 2}),
        )
        .await;
        assert_eq!(ran, value(2));
    }
    let mut docker = fake_content(&wasm, &wasm, None);
    let mut m: Value = serde_json::from_slice(&docker.manifest).unwrap();
    m["config"]["mediaType"] = json!("application/vnd.oci.image.config.v1+json");
    docker.manifest = serde_json::to_vec(&m).unwrap();
    let mut index = fake_content(&wasm, &wasm, None);
    index.manifest = serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []})).unwrap();
    let mut huge = fake_content(&wasm, &wasm, None);
    huge.manifest = vec![b' '; 5 << 20];
    let mut hostile = fake_content(&wasm, &wasm, None);
    hostile.error = Some(r#"{"errors":[{"code":"DENIED","message":"\u001b]52;c;ZXZpbA==\u0007\u001b]2;owned\u0007\nforged line"}]}"#.into());
    // Without a length up front: the stream itself is cut at the bound.
    let mut endless = fake_content(&wasm, &[wasm.clone(), vec![0; 1 << 20]].concat(), None);
    endless.chunked = true;
    let mut small = fake_content(&wasm, &wasm, Some(1000));
    small.chunked = true;
    // (what, content, max_wasm_size, needle, whether the blob is fetched)
    let cases: Vec<(&str, FakeContent, Option<&str>, &str, bool)> = vec![
        (
            "a stream longer than declared",
            endless,
            None,
            "sent more than the",
            true,
        ),
        (
            "a stream past a small declared size",
            small,
            None,
            "sent more than the 1000 bytes",
            true,
        ),
        (
            "tampered bytes",
            fake_content(&wasm, &tampered, None),
            None,
            "nothing was stored",
            true,
        ),
        (
            "more bytes than declared",
            fake_content(&wasm, &[wasm.clone(), b"x".to_vec()].concat(), None),
            None,
            "which the manifest says is",
            true,
        ),
        (
            "a declared size over max_wasm_size",
            fake_content(&wasm, &wasm, None),
            Some("64KiB"),
            "larger than max_wasm_size",
            false,
        ),
        (
            "a container image",
            docker,
            None,
            "not a wasm Tick artifact",
            false,
        ),
        ("an image index", index, None, "image index", false),
        (
            "a manifest over its bound",
            huge,
            None,
            "larger than the manifest bound",
            false,
        ),
        ("a hostile error message", hostile, None, "DENIED", false),
    ];
    for (what, content, max_wasm_size, needle, fetches) in cases {
        let store = TempDir::new("oci-store");
        let fake = Fake::start(content);
        let mut request = oci(&format!("oci://127.0.0.1:{}/t/c:v1", fake.port));
        request.grants.max_wasm_size = max_wasm_size.map(String::from);
        let ran = call(&app_in(&store), &request, "increment", json!({"amount": 2})).await;
        refused(&ran, 3, needle);
        assert_eq!(stored_blobs(&store), 0, "{what}: nothing stored");
        assert_eq!(
            fake.blob_gets.load(Ordering::SeqCst) > 0,
            fetches,
            "{what}: blob fetched?"
        );
    }
    // A pinned reference whose manifest is not what the digest names.
    let store = TempDir::new("oci-store");
    let other = digest(b"another manifest");
    let fake = Fake::start(fake_content(&wasm, &wasm, None));
    let reference = format!("oci://127.0.0.1:{}/t/c@{other}", fake.port);
    refused(
        &read(&app_in(&store), &oci(&reference)).await,
        3,
        "not sha256:",
    );
    assert_eq!(stored_blobs(&store), 0);
}

#[tokio::test]
async fn plain_http_elsewhere_than_loopback_is_refused_unless_named() {
    let fake = fake_with_plain_http_realm(&std::fs::read(counter()).unwrap());
    let store = TempDir::new("oci-store");
    let reference = format!("oci://127.0.0.1:{}/t/c:v1", fake.port);
    let ran = read(&app_in(&store), &oci(&reference)).await;
    refused(&ran, 3, "10.255.255.1 is not a loopback registry");
}

/// A CA, a certificate for 127.0.0.1 signed by it, and an htpasswd file.
fn secure(dir: &TempDir, user: &str, password: &str) -> (Secure, PathBuf) {
    let (ca, leaf, key) = loopback_pki("tickbox registry test CA");
    std::fs::write(dir.path("ca.pem"), ca).unwrap();
    std::fs::write(dir.path("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), key.serialize_pem()).unwrap();
    // bcrypt, which the registry's htpasswd wants, from the C library.
    let hash = Command::new("python3")
        .args(["-W", "ignore", "-c", "import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))", password])
        .output()
        .unwrap();
    let hash = String::from_utf8(hash.stdout).unwrap();
    assert!(
        hash.starts_with("$2"),
        "bcrypt from python3's crypt: {hash:?}"
    );
    std::fs::write(dir.path("htpasswd"), format!("{user}:{}", hash.trim())).unwrap();
    (
        Secure {
            cert: dir.path("cert.pem"),
            key: dir.path("key.pem"),
            htpasswd: dir.path("htpasswd"),
        },
        dir.path("ca.pem"),
    )
}

/// A Docker config directory holding `user`'s credentials for `registry`.
fn docker_config(dir: &Path, registry: &str, user: &str, password: &str) -> PathBuf {
    use base64::Engine as _;
    std::fs::create_dir_all(dir).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    std::fs::write(
        dir.join("config.json"),
        json!({"auths": {registry: {"auth": auth}}}).to_string(),
    )
    .unwrap();
    dir.to_path_buf()
}

#[tokio::test]
async fn a_tls_registry_with_basic_auth_takes_credentials_from_the_docker_config() {
    let dir = TempDir::new("oci-tls");
    let (secure, ca) = secure(&dir, "ci", "s3cret-pw");
    let registry = Registry::start(Some(&secure));
    let host = format!("127.0.0.1:{}", registry.port);
    let store = TempDir::new("oci-store");
    let good = docker_config(&dir.path("good"), &host, "ci", "s3cret-pw");
    let bad = docker_config(&dir.path("bad"), &host, "ci", "wrong");
    let reference = registry.reference("private/counter:v1");
    let with_ca = RegistrySettings {
        ca_file: Some(ca),
        ..none()
    };
    // An App whose Docker config is `config`, over `store`.
    let app = |store: &TempDir, config: &Path| {
        App::new(Settings {
            docker_config: Some(config.join("config.json")),
            ..settings_in(store)
        })
    };
    let push = Push {
        reference: reference.clone(),
        wasm: counter(),
        manifest: None,
        sign: None,
    };
    app(&store, &good).push(&push, &with_ca).unwrap();
    let ran = call(
        &app(&store, &good),
        &oci_with(&reference, &with_ca),
        "increment",
        json!({"amount": 5}),
    )
    .await;
    assert_eq!(ran, value(5));
    // No credentials, wrong ones, or a CA that is not trusted: one line each.
    let fresh = TempDir::new("oci-store");
    let request = oci_with(&reference, &with_ca);
    let ran = read(&app(&fresh, &dir.path("none")), &request).await;
    refused(&ran, 3, "no credentials for");
    let ran = read(&app(&fresh, &bad), &request).await;
    refused(&ran, 3, "credentials were refused");
    assert!(!ran.1.contains("wrong"), "{ran:?}");
    let ran = read(&app(&fresh, &good), &oci(&reference)).await;
    assert_eq!(ran.0, 3, "{ran:?}");
    assert!(!ran.1.contains("s3cret-pw"), "{ran:?}");
    assert_eq!(stored_blobs(&fresh), 0);
}

/// Settings over `store` with `policy` as `$TICKBOX_SIGNERS` names it.
fn signers_in(store: &TempDir, policy: &Path) -> Settings {
    Settings {
        signers: Some(by_env(policy, "TICKBOX_SIGNERS")),
        ..settings_in(store)
    }
}

#[tokio::test]
async fn only_ticks_signed_by_the_pinned_signers_over_their_own_digest_run_where_the_policy_asks() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-sign");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let (mallory, _) = ssh_key(&dir, "mallory", "mallory@example.com");
    let prefix = registry.reference("signed/");
    let policy = signers_policy(&dir, "signers", &prefix, &[&alice_line]);
    let app = || App::new(signers_in(&store, &policy));
    let wasm = counter();

    // Positive control: alice's signature over the digest.
    let good = registry.reference("signed/counter:v1");
    let pushed = push(&app(), &good, &wasm, None, Some(&alice));
    assert!(pushed.signature.is_some());
    let ran = call(&app(), &oci(&good), "increment", json!({"amount": 2})).await;
    assert_eq!(ran, value(2));
    // What `tickbox verify` shows: each signature's verdict, in words.
    let allowed = dir.path("signers.allowed");
    let verdicts_of = |reference: &str| {
        let app = app();
        let (pulled, _) = app.fetch(reference, &none(), DEFAULT_MAX_WASM).unwrap();
        verdicts(&pulled, &none(), app.settings(), &allowed).unwrap()
    };
    let v = verdicts_of(&good);
    assert_eq!(
        (json!(v[0]), v[0].explain()),
        (
            json!({"verdict": "valid", "signer": "alice@example.com"}),
            "signed by alice@example.com, an allowed signer, over this manifest".to_string()
        )
    );
    let pulled = app().resolve(&good, &none(), DEFAULT_MAX_WASM).unwrap();
    assert_eq!(pulled.signer.as_deref(), Some("alice@example.com"));

    // Unsigned, and signed by another key: refused before anything runs.
    let unsigned = registry.reference("signed/unsigned:v1");
    push(&app(), &unsigned, &wasm, None, None);
    let ran = call(&app(), &oci(&unsigned), "increment", json!({"amount": 2})).await;
    refused(&ran, 3, "it is unsigned");
    let other = registry.reference("signed/other:v1");
    push(&app(), &other, &wasm, None, Some(&mallory));
    refused(&read(&app(), &oci(&other)).await, 3, "does not list");
    let v = verdicts_of(&other);
    assert_eq!(json!(v[0])["verdict"], json!("other_key"));
    assert_eq!(
        v[0].explain(),
        "signed by a key the allowed-signers file does not list"
    );

    // Alice's real signature, but over another manifest, attached to this
    // one: the referrer says "subject: this manifest", the signature does not.
    let moved = registry.reference("signed/moved:v1");
    let target = push(&app(), &moved, &wasm, Some(Path::new("/dev/null")), None);
    let subject_digest = target.manifest.to_string();
    let (_, _, subject) = http(
        registry.port,
        "GET",
        &format!("/v2/signed/moved/manifests/{subject_digest}"),
        &[("Accept", MANIFEST)],
        b"",
    );
    let signature = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-q", "-n", "tickbox", "-f"])
        .arg(&alice)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(pushed.manifest.to_string().as_bytes())?;
            c.wait_with_output()
        })
        .unwrap()
        .stdout;
    let config = raw_push_blob(registry.port, "signed/moved", b"{}");
    let layer = raw_push_blob(registry.port, "signed/moved", &signature);
    let sig_type = "application/vnd.tickbox.signature.v1+sshsig";
    let sig_manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": MANIFEST, "artifactType": sig_type,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config["digest"], "size": 2},
        "layers": [{"mediaType": sig_type, "digest": layer["digest"], "size": layer["size"]}],
        "subject": {"mediaType": MANIFEST, "digest": subject_digest, "size": subject.len()},
    }))
    .unwrap();
    let (status, _, _) = http(
        registry.port,
        "PUT",
        &format!("/v2/signed/moved/manifests/{}", digest(&sig_manifest)),
        &[("Content-Type", MANIFEST)],
        &sig_manifest,
    );
    assert_eq!(status, 201);
    let index = serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": MANIFEST, "digest": digest(&sig_manifest), "size": sig_manifest.len(), "artifactType": sig_type}
    ]}))
    .unwrap();
    let (status, _, _) = http(
        registry.port,
        "PUT",
        &format!(
            "/v2/signed/moved/manifests/{}",
            subject_digest.replace(':', "-")
        ),
        &[("Content-Type", "application/vnd.oci.image.index.v1+json")],
        &index,
    );
    assert_eq!(status, 201);
    refused(&read(&app(), &oci(&moved)).await, 3, "not over this digest");

    // Outside the policy's prefix no rule applies, and the policy's
    // no_match (deny by default) decides: refused. (Before no_match it ran.)
    let free = registry.reference("free/counter:v1");
    push(&app(), &free, &wasm, None, None);
    refused(
        &read(&app(), &oci(&free)).await,
        3,
        "no rule of the signers policy",
    );
}

#[tokio::test]
async fn the_lock_pins_tags_and_locked_refuses_drift() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-lock");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let prefix = registry.reference("locked/");
    let policy = signers_policy(&dir, "signers", &prefix, &[&alice_line]);
    let app = |policy: &Path| App::new(signers_in(&store, policy));
    let wasm = counter();
    let reference = registry.reference("locked/counter:v1");
    let first = push(&app(&policy), &reference, &wasm, None, Some(&alice)).manifest;
    let lock = dir.path("tickbox.lock");
    let with_lock = RegistrySettings {
        lock: Some(by_flag(&lock, "--lock")),
        ..none()
    };
    let locked = RegistrySettings {
        locked: true,
        ..with_lock.clone()
    };
    let (path, _) = app(&policy)
        .lock(std::slice::from_ref(&reference), &with_lock)
        .unwrap();
    assert_eq!(path, lock);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.contains(&first.to_string()) && text.contains("alice@example.com"),
        "{text}"
    );
    let ran = read(&app(&policy), &oci_with(&reference, &locked)).await;
    assert_eq!(ran.0, 0, "{ran:?}");

    // The tag moves (a new push, signed too).
    let second = push(
        &app(&policy),
        &reference,
        &wasm,
        Some(Path::new("/dev/null")),
        Some(&alice),
    );
    assert_ne!(second.manifest, first);
    // With the lock, the locked digest is what runs.
    let pulled = app(&policy)
        .resolve(&reference, &with_lock, DEFAULT_MAX_WASM)
        .unwrap();
    assert_eq!(pulled.manifest, first);
    // `locked` refuses the moved tag, and a reference the lock lacks.
    refused(
        &read(&app(&policy), &oci_with(&reference, &locked)).await,
        3,
        "moved",
    );
    let missing = registry.reference("locked/other:v1");
    refused(
        &read(&app(&policy), &oci_with(&missing, &locked)).await,
        2,
        "is not in",
    );
    // Another signer for the same digest (the policy now names alice's key
    // under another principal): `locked` refuses.
    let renamed = signers_policy(
        &dir,
        "renamed",
        &prefix,
        &[&alice_line.replacen("alice@example.com", "bob@example.com", 1)],
    );
    // Accept the moved tag first, so only the signer differs.
    app(&policy)
        .lock(std::slice::from_ref(&reference), &with_lock)
        .unwrap();
    let ran = read(&app(&renamed), &oci_with(&reference, &locked)).await;
    refused(&ran, 3, "lock records signer");
    let ran = read(&app(&policy), &oci_with(&reference, &locked)).await;
    assert_eq!(ran.0, 0, "{ran:?}");
}

/// Consent for a pulled Tick: what its requested-grants layer asks for is
/// granted only under an approval of that content (and signer); with no one
/// to ask the start is refused naming the `tickbox trust` that approves it;
/// new content under the same name asks again.
#[tokio::test]
async fn a_pulled_ticks_requests_need_an_approval_of_its_content() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-consent");
    std::fs::write(dir.path("req.toml"), "env = [\"HOME\"]\n").unwrap();
    let req = dir.path("req.toml");
    let reference = registry.reference("asks/counter:v1");
    let pushed = push(&app_in(&store), &reference, &counter(), Some(&req), None);
    let pinned = pushed.reference.to_string();
    let ran = read(&app_in(&store), &oci(&reference)).await;
    refused(
        &ran,
        2,
        &format!("approve it with `tickbox trust {pinned}`"),
    );
    assert!(ran.1.contains("env HOME"), "{ran:?}");
    trust(&app_in(&store), &pinned);
    // What it was granted (`tickbox info`): what it asked for.
    let tick = app_in(&store).open(&oci(&reference)).await.unwrap();
    let Backend::Wasm { grants, .. } = &tick.backend else {
        panic!("not a wasm Tick")
    };
    assert_eq!(
        serde_json::to_value(grants).unwrap()["env"],
        json!(["HOME"])
    );
    tick.close().await;
    // Revoked by another spelling of the reference (a tag, not the digest
    // it was approved under, and `localhost`), it asks again; and again
    // approved.
    let trust_dir = store.path("trust");
    let spelled = reference.replace("127.0.0.1", "localhost");
    let revoked = tickbox_app::consent::revoke(&trust_dir, &spelled).unwrap();
    assert_eq!(revoked.len(), 1);
    refused(
        &read(&app_in(&store), &oci(&reference)).await,
        2,
        "tickbox trust",
    );
    let again = tickbox_app::consent::revoke(&trust_dir, &spelled).unwrap();
    assert!(again.is_empty(), "no approval matches: {again:?}");
    trust(&app_in(&store), &pinned);
    assert_eq!(read(&app_in(&store), &oci(&reference)).await.0, 0);
    // Other content under the same name (the ticker) asks again.
    let ticker = build_wasm("examples", "ticker", "wasm32-wasip2");
    push(&app_in(&store), &reference, &ticker, Some(&req), None);
    refused(
        &read(&app_in(&store), &oci(&reference)).await,
        2,
        "tickbox trust",
    );
}

/// The red team's bypass, end to end: an unsigned Tick pushed to the test
/// registry is refused under a rule written in another spelling of that
/// registry (case, leading zeros, another loopback name), the reference
/// in yet another, whether the request (`--signers`) or the settings
/// (`$TICKBOX_SIGNERS`) name the policy. Positive control: the same Tick
/// signed by the pinned signer runs under every spelling.
#[tokio::test]
async fn an_unsigned_tick_is_refused_under_a_rule_written_in_another_spelling() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-spelling");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let wasm = counter();
    let port = registry.port;
    let unsigned = format!("oci://127.0.0.1:{port}/spell/unsigned:v1");
    let signed = format!("oci://127.0.0.1:{port}/spell/signed:v1");
    push(&app_in(&store), &unsigned, &wasm, None, None);
    push(&app_in(&store), &signed, &wasm, None, Some(&alice));
    // Without a policy the unsigned Tick runs, with one notice.
    let (app, said) = heard_in(settings_in(&store));
    assert_eq!(read(&app, &oci(&unsigned)).await.0, 0);
    assert_eq!(read(&app, &oci(&signed)).await.0, 0);
    let no_policy = said
        .take()
        .into_iter()
        .filter(|n| matches!(n, Notice::NoSignersPolicy { .. }))
        .count();
    assert_eq!(no_policy, 1, "said once per App");
    let rules = [
        format!("oci://localhost:{port}/spell/*"),
        format!("oci://LOCALHOST:0{port}/spell/*"),
        format!("oci://[::1]:{port}/spell/*"),
    ];
    // The registry listens on 127.0.0.1: these spellings all dial it.
    let spellings = |repo_tag: &str| {
        [
            format!("oci://127.0.0.1:{port}/{repo_tag}"),
            format!("oci://LOCALHOST:{port}/{repo_tag}"),
            format!("oci://localhost:00{port}/{repo_tag}"),
        ]
    };
    for (i, rule) in rules.iter().enumerate() {
        let policy = policy_file(&dir, &format!("p{i}"), "", &[rule], &[&alice_line]);
        let flagged = RegistrySettings {
            signers: Some(by_flag(&policy, "--signers")),
            ..none()
        };
        let by_settings = || App::new(signers_in(&store, &policy));
        for reference in spellings("spell/unsigned:v1") {
            let ran = read(&app_in(&store), &oci_with(&reference, &flagged)).await;
            refused(&ran, 3, "it is unsigned");
            refused(
                &read(&by_settings(), &oci(&reference)).await,
                3,
                "it is unsigned",
            );
        }
        for reference in spellings("spell/signed:v1") {
            let ran = read(&app_in(&store), &oci_with(&reference, &flagged)).await;
            assert_eq!(ran.0, 0, "{rule} / {reference}: {ran:?}");
            let pulled = by_settings()
                .resolve(&reference, &none(), DEFAULT_MAX_WASM)
                .unwrap();
            assert_eq!(pulled.signer.as_deref(), Some("alice@example.com"));
        }
    }
}

/// Where a policy is in force, a Tick no rule covers is refused unless the
/// policy says otherwise (`no_match`); an impossible rule is refused when
/// read (a usage error, naming it); a policy the settings name must exist.
#[tokio::test]
async fn a_tick_no_rule_covers_is_refused_unless_the_policy_says_otherwise() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-nomatch");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let covered = registry.reference("ruled/");
    let free = registry.reference("free/counter:v1");
    push(&app_in(&store), &free, &counter(), None, None);
    let with = |policy: &Path| heard_in(signers_in(&store, policy));
    let rule = format!("{covered}*");
    let deny = policy_file(&dir, "deny", "", &[&rule], &[&alice_line]);
    let ran = read(&with(&deny).0, &oci(&free)).await;
    refused(&ran, 3, "no rule of the signers policy");
    refused(&ran, 3, "and no_match is deny");
    refused(&ran, 3, "the environment variable TICKBOX_SIGNERS");
    let warn = policy_file(
        &dir,
        "warn",
        "no_match = \"warn\"\n",
        &[&rule],
        &[&alice_line],
    );
    let (app, said) = with(&warn);
    assert_eq!(read(&app, &oci(&free)).await.0, 0);
    let notices = said.take();
    assert!(
        matches!(&notices[..], [Notice::NoRuleCovers { .. }]),
        "one warning: {notices:?}"
    );
    let allow = policy_file(
        &dir,
        "allow",
        "no_match = \"allow\"\n",
        &[&rule],
        &[&alice_line],
    );
    let (app, said) = with(&allow);
    assert_eq!(read(&app, &oci(&free)).await.0, 0);
    assert_eq!(said.take(), vec![], "nothing said");
    // An impossible rule (a tag in the pattern) is refused when read.
    let tagged = format!("{covered}counter:v1");
    let bad = policy_file(
        &dir,
        "bad",
        "no_match = \"allow\"\n",
        &[&rule, &tagged],
        &[&alice_line],
    );
    let ran = read(&with(&bad).0, &oci(&free)).await;
    refused(&ran, 2, &format!("rule 2 (references = \"{tagged}\")"));
    refused(&ran, 2, "not a tag");
    // A policy the variable names that is not there is not "no policy".
    let ran = read(&with(&dir.path("none.toml")).0, &oci(&free)).await;
    refused(&ran, 2, "is not a readable file");
}

/// A default signers policy or lock that cannot be looked at is an error,
/// never "no policy": only a path with nothing at all there is absent.
#[test]
fn a_default_policy_or_lock_that_cannot_be_read_is_not_taken_for_none() {
    let dir = TempDir::new("oci-dangling");
    let default_signers = dir.path("config/tickbox/signers.toml");
    let settings = Settings {
        default_signers_file: Some(default_signers.clone()),
        ..settings(None)
    };
    let here = RegistrySettings {
        beside: Some(dir.path("work/policy.toml")),
        ..none()
    };
    // Controls: nothing at either path is no policy and no lock.
    assert!(matches!(here.signers_policy(&settings), Ok(None)));
    assert!(here.lock_source().is_none());
    // Links to nowhere (an unmounted disk, a moved home) at both.
    std::fs::create_dir_all(dir.path("config/tickbox")).unwrap();
    std::fs::create_dir_all(dir.path("work")).unwrap();
    std::os::unix::fs::symlink(dir.path("gone/signers.toml"), &default_signers).unwrap();
    std::os::unix::fs::symlink(dir.path("gone/tickbox.lock"), dir.path("work/tickbox.lock"))
        .unwrap();
    let e = here.signers_policy(&settings).unwrap_err().to_string();
    assert!(e.contains("signers.toml"), "{e}");
    let lock = here.lock_source().expect("the default lock is in force");
    let e = tickbox_app::registry::read_lock(&lock.path)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tickbox.lock"), "{e}");
}

/// `policy show [REF]` (the report): which signers policy, lock file and
/// trust store apply and how each was found, and for REF the decision.
#[test]
fn policy_show_says_which_files_apply_and_how_they_were_found() {
    let dir = TempDir::new("oci-show");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let default_signers = dir.path("config/tickbox/signers.toml");
    let base = Settings {
        default_signers_file: Some(default_signers.clone()),
        ..settings(None)
    };
    let trust = by_env(dir.path("trust"), "TICKBOX_TRUST_DIR");
    let beside = dir.path("work/policy.toml");
    let here = RegistrySettings {
        beside: Some(beside.clone()),
        ..none()
    };
    let show = |registry: &RegistrySettings, settings: &Settings, reference: Option<&str>| {
        files_report(registry, settings, Some(trust.clone()), reference).unwrap()
    };
    // Nothing anywhere: no policy, no lock; the trust store given.
    let v = show(&here, &base, Some("oci://localhost:5000/t/c:v1"));
    assert_eq!(v["signers"]["found"], json!("none"), "{v}");
    assert_eq!(v["signers"]["default"], json!(default_signers));
    assert_eq!(v["lock"]["found"], json!("none"), "{v}");
    assert_eq!(
        v["lock"]["default"],
        json!(dir.path("work/tickbox.lock")),
        "{v}"
    );
    assert_eq!(
        (&v["trust"]["found"], &v["trust"]["by"]),
        (&json!("environment"), &json!("TICKBOX_TRUST_DIR")),
        "{v}"
    );
    assert_eq!(v["reference"]["decision"], json!({"outcome": "no_policy"}));
    // The same policy by the request, by the settings and at the default path.
    let policy = policy_file(
        &dir,
        "signers",
        "no_match = \"warn\"\n",
        &["oci://127.0.0.1:5000/t/*", "oci://LOCALHOST:5000/t/c"],
        &[&alice_line],
    );
    std::fs::create_dir_all(dir.path("config/tickbox")).unwrap();
    std::fs::copy(&policy, &default_signers).unwrap();
    std::fs::copy(
        dir.path("signers.allowed"),
        dir.path("config/tickbox/signers.allowed"),
    )
    .unwrap();
    let flagged = RegistrySettings {
        signers: Some(by_flag(&policy, "--signers")),
        ..here.clone()
    };
    let from_env = Settings {
        signers: Some(by_env(&policy, "TICKBOX_SIGNERS")),
        ..base.clone()
    };
    for (registry, settings, found, by) in [
        (&flagged, &base, "flag", json!("--signers")),
        (&here, &from_env, "environment", json!("TICKBOX_SIGNERS")),
        (&here, &base, "default", Value::Null),
    ] {
        let v = show(registry, settings, Some("oci://localhost:5000/t/c:v1"));
        assert_eq!(v["signers"]["found"], json!(found), "{v}");
        assert_eq!(v["signers"]["by"], by, "{v}");
        assert_eq!(v["signers"]["no_match"], json!("warn"), "{v}");
        assert_eq!(
            v["signers"]["rules"][1]["pattern"],
            json!("oci://localhost:5000/t/c"),
            "{v}"
        );
        let d = &v["reference"]["decision"];
        assert_eq!(
            (&d["outcome"], &d["rule"]),
            (&json!("require"), &json!(2)),
            "{v}"
        );
        assert!(
            d["allowed_signers"]
                .as_str()
                .unwrap()
                .ends_with("signers.allowed"),
            "{v}"
        );
        assert_eq!(v["reference"]["name"], json!("oci://localhost:5000/t/c"));
    }
    // Another spelling of the registry, another repository: rule 1; another
    // registry: no_match with its setting.
    let v = show(&here, &base, Some("oci://[::1]:5000/t/other:v1"));
    assert_eq!(v["reference"]["decision"]["rule"], json!(1), "{v}");
    let v = show(&here, &base, Some("oci://localhost:5001/t/c:v1"));
    assert_eq!(
        v["reference"]["decision"],
        json!({"outcome": "no_match", "no_match": "warn"}),
        "{v}"
    );
    // The lock: at the default path once there, or as named.
    std::fs::create_dir_all(dir.path("work")).unwrap();
    std::fs::write(dir.path("work/tickbox.lock"), "version = 1\n").unwrap();
    let v = show(&here, &base, None);
    assert_eq!(
        (&v["lock"]["found"], &v["lock"]["path"]),
        (&json!("default"), &json!(dir.path("work/tickbox.lock"))),
        "{v}"
    );
    let named = RegistrySettings {
        lock: Some(by_flag(dir.path("other.lock"), "--lock")),
        ..here.clone()
    };
    let v = show(&named, &base, None);
    assert_eq!(
        (&v["lock"]["found"], &v["lock"]["by"]),
        (&json!("flag"), &json!("--lock")),
        "{v}"
    );
    // `locked` names the default lock even where none is yet.
    let elsewhere = RegistrySettings {
        beside: Some(dir.path("mcp.toml")),
        locked: true,
        ..none()
    };
    let v = show(&elsewhere, &base, None);
    assert_eq!(v["lock"]["path"], json!(dir.path("tickbox.lock")), "{v}");
    // An impossible rule is refused naming it, here too.
    let bad = policy_file(&dir, "bad", "", &["oci://localhost/t/"], &[&alice_line]);
    let flagged = RegistrySettings {
        signers: Some(by_flag(&bad, "--signers")),
        ..none()
    };
    let e = files_report(&flagged, &base, None, None).unwrap_err();
    assert!(e.is_usage(), "{e}");
    let line = e.to_string();
    assert!(
        line.contains("rule 1") && line.contains("ends in /"),
        "{line}"
    );
}
