//! Ticks from a registry (`oci://`), through the wire: a real OCI registry
//! (Debian's `docker-registry`, the CNCF distribution registry, installed
//! by tests/setup.sh) started on loopback for each test and stopped at its
//! end, and a fake registry for what a real one never sends.

use crate::util::{build_wasm, tickbox_env, tickbox_in, Output, TempDir};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
pub(crate) use tickbox_test_support::http;
pub(crate) use tickbox_test_support::registry::{free_port, ssh_key, Registry, Secure};

/// `tickbox` in the working directory `dir` (for what it finds there, such
/// as `./tickbox.lock`), failing the test after 60 s.
fn tickbox_here<S: AsRef<str>>(dir: &Path, args: &[S], env: &[(&str, &str)]) -> Output {
    tickbox_in(dir, args, env, Duration::from_secs(60))
}

const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn digest(bytes: &[u8]) -> String {
    let h = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

fn counter() -> PathBuf {
    build_wasm("examples", "counter", "wasm32-wasip2")
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

/// The environment of one test: its own store, and a config directory of
/// its own (so no signers policy at the user's default path applies).
fn env(store: &TempDir) -> Vec<(&'static str, String)> {
    vec![
        (
            "TICKBOX_STORE_DIR",
            store.path("store").display().to_string(),
        ),
        (
            "XDG_CONFIG_HOME",
            store.path("config").display().to_string(),
        ),
    ]
}

fn run(args: &[&str], env: &[(&'static str, String)]) -> crate::util::Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    tickbox_env(args, &env)
}

fn stored_blobs(store: &TempDir) -> usize {
    std::fs::read_dir(store.path("store"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn a_component_pushed_by_a_plain_http_client_runs_by_tag_by_digest_and_offline_once_pinned() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let env = env(&store);
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
    let out = run(
        &["call", &by_tag, "increment", r#"{"amount":2}"#, "--yes"],
        &env,
    );
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, r#"{"value":2}"#),
        "{out:#?}"
    );
    let pulled = run(&["pull", &by_tag], &env);
    assert_eq!(pulled.code, 0, "{pulled:#?}");
    let p = pulled.json();
    let pinned = format!(
        "oci://127.0.0.1:{}/other/counter@{}",
        registry.port,
        digest(&manifest)
    );
    assert_eq!(p["reference"], json!(pinned));
    assert_eq!(p["wasm"]["digest"], layer["digest"]);
    assert_eq!(
        p["fetched"],
        json!(true),
        "a tag is resolved by the registry"
    );
    let again = run(&["pull", &pinned], &env);
    assert_eq!(
        again.json()["fetched"],
        json!(false),
        "pinned and in the store: {again:#?}"
    );
    let info = run(&["info", &pinned], &env);
    assert_eq!(info.json()["digest"], layer["digest"], "{info:#?}");

    // A scenario names the Tick by reference too (sandboxed: it runs with
    // CI's default --sandboxed-only).
    let dir = TempDir::new("oci-scenario");
    let scenario = dir.path("counter.scenario.toml");
    std::fs::write(
        &scenario,
        format!("name = \"from a registry\"\n\n[tick]\npath = \"{pinned}\"\n\n[[step]]\ncall = \"increment\"\nargs = {{ amount = 4 }}\nresult = {{ value = 4 }}\n"),
    )
    .unwrap();
    let mut ci = env.clone();
    ci.push(("CI", "1".into()));
    let tested = run(&["test", &scenario.display().to_string()], &ci);
    assert_eq!(tested.code, 0, "{tested:#?}");

    // The store's copy changed behind tickbox's back (same size): the
    // sandbox, which checks the bytes it compiles against the pin, refuses.
    let path = PathBuf::from(p["wasm"]["path"].as_str().unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    run(&["read", &pinned], &env).expect(3, "pinned to");
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();

    // With the registry gone, the pinned reference starts from the store;
    // the tag, which must be resolved, cannot.
    drop(registry);
    let out = run(
        &["call", &pinned, "increment", r#"{"amount":3}"#, "--yes"],
        &env,
    );
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, r#"{"value":3}"#),
        "{out:#?}"
    );
    run(&["read", &by_tag], &env).expect(3, "cannot reach the registry");
    // And `cache clean` empties the store: then the pinned one needs the network too.
    let clean = run(&["cache", "clean"], &env);
    assert_eq!(clean.code, 0, "{clean:#?}");
    assert_eq!(stored_blobs(&store), 0);
    run(&["read", &pinned], &env).expect(3, "cannot reach the registry");
}

#[test]
fn tickbox_push_writes_the_wasm_artifact_layout_with_the_requested_grants() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let env = env(&store);
    let dir = TempDir::new("oci-push");
    let wasm = dir.path("counter.wasm");
    std::fs::copy(counter(), &wasm).unwrap();
    std::fs::write(dir.path("counter.tick.toml"), "env = [\"HOME\"]\n").unwrap();
    let reference = registry.reference("ticks/counter:1.0");
    let out = run(&["push", &reference, &wasm.display().to_string()], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let pushed = out.json();
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
    assert_eq!(pushed["manifest"], json!(digest(&body)));
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
    let mut env = env;
    env.push(("TICKBOX_TRUST_DIR", dir.path("trust").display().to_string()));
    run(&["describe", &reference], &env).expect(2, "tickbox trust");
    let pinned = pushed["reference"].as_str().unwrap();
    assert_eq!(run(&["trust", pinned], &env).code, 0);
    let described = run(&["describe", &reference], &env);
    assert_eq!(described.code, 0, "{described:#?}");
    assert_eq!(described.json()["title"], json!("Counter"));
    let checked = run(&["check", pushed["reference"].as_str().unwrap()], &env);
    assert_eq!(checked.code, 0, "{checked:#?}");
}

#[test]
fn unknown_tags_a_registry_that_is_down_and_bad_references_are_one_line_each() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let env = env(&store);
    run(&["read", &registry.reference("ticks/none:v1")], &env)
        .expect(3, "not found in the registry");
    let port = free_port();
    run(
        &["read", &format!("oci://127.0.0.1:{port}/ticks/none:v1")],
        &env,
    )
    .expect(3, "cannot reach the registry");
    run(&["read", "oci://127.0.0.1/ticks/none"], &env).expect(2, "no implicit latest");
    run(&["pull", "oci://127.0.0.1/Ticks/x:v1"], &env).expect(2, "lowercase");
    run(&["push", "oci://127.0.0.1/ticks/x@sha256:0000000000000000000000000000000000000000000000000000000000000000", "x.wasm"], &env).expect(2, "push to a tag");
    assert_eq!(stored_blobs(&store), 0);
}

/// A registry that serves one repository's manifest and blobs as told,
/// counting blob requests.
struct Fake {
    port: u16,
    blob_gets: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct FakeContent {
    manifest: Vec<u8>,
    manifest_type: String,
    /// Blobs by digest: the bytes served (maybe not the digest's).
    blobs: Vec<(String, Vec<u8>)>,
    /// A 401 challenge instead of the manifest.
    challenge: Option<String>,
    /// A registry error body (for its message) instead of the manifest.
    error: Option<String>,
    /// Blobs sent chunked, without a length up front.
    chunked: bool,
}

impl Fake {
    fn start(content: FakeContent) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let blob_gets = Arc::new(AtomicUsize::new(0));
        let gets = blob_gets.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                let content = content.clone();
                let gets = gets.clone();
                std::thread::spawn(move || {
                    let Some(head) = crate::util::read_request_head(&mut s) else {
                        return;
                    };
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let reply = |s: &mut TcpStream, status: &str, headers: &str, body: &[u8]| {
                        let _ = s.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n", body.len()).as_bytes());
                        let _ = s.write_all(body);
                    };
                    if head.starts_with("GET ") && path.contains("/manifests/") {
                        if let Some(c) = &content.challenge {
                            reply(
                                &mut s,
                                "401 Unauthorized",
                                &format!("WWW-Authenticate: {c}\r\n"),
                                b"",
                            );
                        } else if let Some(e) = &content.error {
                            reply(
                                &mut s,
                                "500 Oops",
                                "Content-Type: application/json\r\n",
                                e.as_bytes(),
                            );
                        } else {
                            reply(
                                &mut s,
                                "200 OK",
                                &format!("Content-Type: {}\r\n", content.manifest_type),
                                &content.manifest,
                            );
                        }
                    } else if let Some((_, bytes)) = content
                        .blobs
                        .iter()
                        .find(|(d, _)| path.ends_with(d.as_str()))
                    {
                        gets.fetch_add(1, Ordering::SeqCst);
                        if content.chunked {
                            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
                            for piece in bytes.chunks(64 << 10) {
                                let _ = s.write_all(format!("{:x}\r\n", piece.len()).as_bytes());
                                let _ = s.write_all(piece);
                                let _ = s.write_all(b"\r\n");
                            }
                            let _ = s.write_all(b"0\r\n\r\n");
                        } else {
                            reply(&mut s, "200 OK", "", bytes);
                        }
                    } else {
                        reply(&mut s, "404 Not Found", "", b"");
                    }
                });
            }
        });
        Fake { port, blob_gets }
    }
}

/// A manifest for `wasm` (its declared size may be overridden), and the
/// content serving `served` as that layer.
fn fake_content(wasm: &[u8], served: &[u8], declared: Option<u64>) -> FakeContent {
    let layer = json!({"mediaType": "application/wasm", "digest": digest(wasm), "size": declared.unwrap_or(wasm.len() as u64)});
    let config = br#"{"architecture":"wasm","os":"wasip2"}"#;
    let manifest = serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": MANIFEST, "config": {"mediaType": WASM_CONFIG, "digest": digest(config), "size": config.len()}, "layers": [layer]})).unwrap();
    FakeContent {
        manifest,
        manifest_type: MANIFEST.into(),
        blobs: vec![(digest(wasm), served.to_vec())],
        challenge: None,
        error: None,
        chunked: false,
    }
}

#[test]
fn what_a_registry_sends_that_does_not_match_is_refused_before_anything_starts_and_nothing_is_stored(
) {
    let wasm = std::fs::read(counter()).unwrap();
    let mut tampered = wasm.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    // Positive control: the same fake serving the right bytes runs.
    {
        let store = TempDir::new("oci-store");
        let fake = Fake::start(fake_content(&wasm, &wasm, None));
        let out = run(
            &[
                "call",
                &format!("oci://127.0.0.1:{}/t/c:v1", fake.port),
                "increment",
                r#"{"amount":2}"#,
                "--yes",
            ],
            &env(&store),
        );
        assert_eq!(
            (out.code, out.stdout.trim()),
            (0, r#"{"value":2}"#),
            "{out:#?}"
        );
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
    let cases: Vec<(&str, FakeContent, Vec<&str>, &str, bool)> = vec![
        (
            "a stream longer than declared",
            endless,
            vec![],
            "sent more than the",
            true,
        ),
        (
            "a stream past a small declared size",
            small,
            vec![],
            "sent more than the 1000 bytes",
            true,
        ),
        (
            "tampered bytes",
            fake_content(&wasm, &tampered, None),
            vec![],
            "nothing was stored",
            true,
        ),
        (
            "more bytes than declared",
            fake_content(&wasm, &[wasm.clone(), b"x".to_vec()].concat(), None),
            vec![],
            "which the manifest says is",
            true,
        ),
        (
            "a declared size over --max-wasm-size",
            fake_content(&wasm, &wasm, None),
            vec!["--max-wasm-size", "64KiB"],
            "larger than max_wasm_size",
            false,
        ),
        (
            "a container image",
            docker,
            vec![],
            "not a wasm Tick artifact",
            false,
        ),
        ("an image index", index, vec![], "image index", false),
        (
            "a manifest over its bound",
            huge,
            vec![],
            "larger than the manifest bound",
            false,
        ),
        ("a hostile error message", hostile, vec![], "DENIED", false),
    ];
    for (what, content, extra, needle, fetches) in cases {
        let store = TempDir::new("oci-store");
        let fake = Fake::start(content);
        let reference = format!("oci://127.0.0.1:{}/t/c:v1", fake.port);
        let mut args = vec![
            "call",
            reference.as_str(),
            "increment",
            r#"{"amount":2}"#,
            "--yes",
        ];
        args.extend(extra);
        let out = run(&args, &env(&store));
        out.expect(3, needle);
        assert!(out.stdout.is_empty(), "{what}: {out:#?}");
        assert!(
            !out.stderr.contains('\u{1b}') && out.stderr.trim().lines().count() == 1,
            "{what}: one escaped line: {out:#?}"
        );
        assert_eq!(stored_blobs(&store), 0, "{what}: nothing stored");
        assert_eq!(
            fake.blob_gets.load(Ordering::SeqCst) > 0,
            fetches,
            "{what}: blob fetched?"
        );
    }
    // A pinned reference whose manifest is not what the digest names.
    let store = TempDir::new("oci-store");
    let content = fake_content(&wasm, &wasm, None);
    let other = digest(b"another manifest");
    let fake = Fake::start(content);
    run(
        &[
            "read",
            &format!("oci://127.0.0.1:{}/t/c@{other}", fake.port),
        ],
        &env(&store),
    )
    .expect(3, "not sha256:");
    assert_eq!(stored_blobs(&store), 0);
}

#[test]
fn plain_http_elsewhere_than_loopback_is_refused_unless_named() {
    let wasm = std::fs::read(counter()).unwrap();
    let mut content = fake_content(&wasm, &wasm, None);
    // The token service the registry names is plain HTTP on another host.
    content.challenge = Some(r#"Bearer realm="http://10.255.255.1/token",service="fake""#.into());
    let fake = Fake::start(content);
    let store = TempDir::new("oci-store");
    let reference = format!("oci://127.0.0.1:{}/t/c:v1", fake.port);
    run(&["read", &reference], &env(&store)).expect(3, "--insecure-registry 10.255.255.1");
}

/// A CA, a certificate for 127.0.0.1 signed by it, and an htpasswd file.
fn secure(dir: &TempDir, user: &str, password: &str) -> (Secure, PathBuf) {
    let (ca, leaf, key) = crate::util::loopback_pki("tickbox registry test CA");
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

fn docker_config(dir: &Path, registry: &str, user: &str, password: &str) {
    use base64::Engine as _;
    std::fs::create_dir_all(dir).unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    std::fs::write(
        dir.join("config.json"),
        json!({"auths": {registry: {"auth": auth}}}).to_string(),
    )
    .unwrap();
}

#[test]
fn a_tls_registry_with_basic_auth_takes_credentials_from_the_docker_config() {
    let dir = TempDir::new("oci-tls");
    let (secure, ca) = secure(&dir, "ci", "s3cret-pw");
    let registry = Registry::start(Some(&secure));
    let host = format!("127.0.0.1:{}", registry.port);
    let store = TempDir::new("oci-store");
    let good = dir.path("good");
    docker_config(&good, &host, "ci", "s3cret-pw");
    let bad = dir.path("bad");
    docker_config(&bad, &host, "ci", "wrong");
    let ca = ca.display().to_string();
    let reference = registry.reference("private/counter:v1");
    let wasm = counter().display().to_string();
    let with = |config: &Path| {
        let mut e = env(&store);
        e.push(("DOCKER_CONFIG", config.display().to_string()));
        e
    };
    let pushed = run(
        &["push", &reference, &wasm, "--registry-ca", &ca],
        &with(&good),
    );
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    assert!(!pushed.stderr.contains("s3cret-pw"));
    let out = run(
        &[
            "call",
            &reference,
            "increment",
            r#"{"amount":5}"#,
            "--yes",
            "--registry-ca",
            &ca,
        ],
        &with(&good),
    );
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, r#"{"value":5}"#),
        "{out:#?}"
    );
    // No credentials, wrong ones, or a CA that is not trusted: one line each.
    let fresh = TempDir::new("oci-store");
    let mut none = env(&fresh);
    none.push(("DOCKER_CONFIG", dir.path("none").display().to_string()));
    run(&["read", &reference, "--registry-ca", &ca], &none).expect(3, "no credentials for");
    let mut wrong = env(&fresh);
    wrong.push(("DOCKER_CONFIG", bad.display().to_string()));
    let out = run(&["read", &reference, "--registry-ca", &ca], &wrong);
    out.expect(3, "credentials were refused");
    assert!(!out.stderr.contains("wrong"), "{out:#?}");
    let out = run(&["read", &reference], &with(&good));
    assert_eq!(out.code, 3, "{out:#?}");
    assert_eq!(stored_blobs(&fresh), 0);
}

/// A signers policy requiring the signers in `allowed` (lines) for every
/// repository under `prefix`.
fn signers_policy(dir: &TempDir, name: &str, prefix: &str, allowed: &[&str]) -> String {
    policy_file(dir, name, "", &[&format!("{prefix}*")], allowed)
}

/// A signers policy: `top` (settings), then one rule per pattern, each
/// requiring the signers in `allowed` (lines).
fn policy_file(
    dir: &TempDir,
    name: &str,
    top: &str,
    patterns: &[&str],
    allowed: &[&str],
) -> String {
    std::fs::write(
        dir.path(&format!("{name}.allowed")),
        allowed.join("\n") + "\n",
    )
    .unwrap();
    let policy = dir.path(&format!("{name}.toml"));
    let rules: String = patterns
        .iter()
        .map(|p| {
            format!("[[require]]\nreferences = \"{p}\"\nallowed_signers = \"{name}.allowed\"\n")
        })
        .collect();
    std::fs::write(&policy, format!("{top}{rules}")).unwrap();
    policy.display().to_string()
}

#[test]
fn only_ticks_signed_by_the_pinned_signers_over_their_own_digest_run_where_the_policy_asks() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-sign");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let (mallory, _) = ssh_key(&dir, "mallory", "mallory@example.com");
    let prefix = registry.reference("signed/");
    let policy = signers_policy(&dir, "signers", &prefix, &[&alice_line]);
    let mut env = env(&store);
    env.push(("TICKBOX_SIGNERS", policy.clone()));
    let wasm = counter().display().to_string();
    let push = |r: &str, extra: &[&str]| {
        let mut args = vec!["push", r, wasm.as_str()];
        args.extend(extra);
        let out = run(&args, &env);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    };
    let alice_s = alice.display().to_string();
    let mallory_s = mallory.display().to_string();

    // Positive control: alice's signature over the digest.
    let good = registry.reference("signed/counter:v1");
    let pushed = push(&good, &["--sign", &alice_s]);
    assert!(pushed["signature"].is_string(), "{pushed}");
    let out = run(
        &["call", &good, "increment", r#"{"amount":2}"#, "--yes"],
        &env,
    );
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, r#"{"value":2}"#),
        "{out:#?}"
    );
    let verified = run(&["verify", &good], &env);
    assert_eq!(verified.code, 0, "{verified:#?}");
    assert_eq!(
        verified.json()["signatures"][0],
        json!({"verdict": "valid", "signer": "alice@example.com", "why": "signed by alice@example.com, an allowed signer, over this manifest"})
    );
    assert_eq!(
        run(&["pull", &good], &env).json()["signer"],
        json!("alice@example.com")
    );

    // Unsigned, and signed by another key: refused before anything runs.
    let unsigned = registry.reference("signed/unsigned:v1");
    push(&unsigned, &[]);
    let out = run(
        &["call", &unsigned, "increment", r#"{"amount":2}"#, "--yes"],
        &env,
    );
    out.expect(3, "it is unsigned");
    assert!(out.stdout.is_empty());
    let other = registry.reference("signed/other:v1");
    push(&other, &["--sign", &mallory_s]);
    run(&["read", &other], &env).expect(3, "does not list");
    let v = run(&["verify", &other], &env);
    assert_eq!(
        (v.code, &v.json()["signatures"][0]["verdict"]),
        (3, &json!("other_key")),
        "{v:#?}"
    );
    assert_eq!(
        v.json()["signatures"][0]["why"],
        "signed by a key the allowed-signers file does not list"
    );

    // Alice's real signature, but over another manifest, attached to this
    // one: the referrer says "subject: this manifest", the signature does not.
    let moved = registry.reference("signed/moved:v1");
    let target = push(&moved, &["--manifest", "/dev/null"]);
    let subject_digest = target["manifest"].as_str().unwrap().to_string();
    let (_, _, subject) = http(
        registry.port,
        "GET",
        &format!("/v2/signed/moved/manifests/{subject_digest}"),
        &[("Accept", MANIFEST)],
        b"",
    );
    let signature = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-q", "-n", "tickbox", "-f", &alice_s])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(pushed["manifest"].as_str().unwrap().as_bytes())?;
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
    run(&["read", &moved], &env).expect(3, "not over this digest");

    // Outside the policy's prefix no rule applies, and the policy's
    // no_match (deny by default) decides: refused. (Before no_match it ran.)
    let free = registry.reference("free/counter:v1");
    push(&free, &[]);
    run(&["read", &free], &env).expect(3, "no rule of the signers policy");
}

#[test]
fn the_lock_pins_tags_and_locked_refuses_drift() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-lock");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let prefix = registry.reference("locked/");
    let policy = signers_policy(&dir, "signers", &prefix, &[&alice_line]);
    let mut env = env(&store);
    env.push(("TICKBOX_SIGNERS", policy));
    let wasm = counter().display().to_string();
    let alice_s = alice.display().to_string();
    let reference = registry.reference("locked/counter:v1");
    let first = run(&["push", &reference, &wasm, "--sign", &alice_s], &env);
    assert_eq!(first.code, 0, "{first:#?}");
    let first = first.json()["manifest"].clone();
    let lock = dir.path("tickbox.lock").display().to_string();
    let locked = run(&["lock", &reference, "--lock", &lock], &env);
    assert_eq!(locked.code, 0, "{locked:#?}");
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.contains(first.as_str().unwrap()) && text.contains("alice@example.com"),
        "{text}"
    );
    let ok = run(&["read", &reference, "--lock", &lock, "--locked"], &env);
    assert_eq!(ok.code, 0, "{ok:#?}");

    // The tag moves (a new push, signed too).
    let second = run(
        &[
            "push",
            &reference,
            &wasm,
            "--manifest",
            "/dev/null",
            "--sign",
            &alice_s,
        ],
        &env,
    );
    assert_eq!(second.code, 0, "{second:#?}");
    assert_ne!(second.json()["manifest"], first);
    // With the lock, the locked digest is what runs.
    let pulled = run(&["pull", &reference, "--lock", &lock], &env);
    assert_eq!(pulled.json()["manifest"], first, "{pulled:#?}");
    // --locked refuses the moved tag, and a reference the lock lacks.
    run(&["read", &reference, "--lock", &lock, "--locked"], &env).expect(3, "moved");
    run(
        &[
            "read",
            &registry.reference("locked/other:v1"),
            "--lock",
            &lock,
            "--locked",
        ],
        &env,
    )
    .expect(2, "is not in");
    // Another signer for the same digest (the policy now names alice's key
    // under another principal): --locked refuses.
    let renamed = signers_policy(
        &dir,
        "renamed",
        &prefix,
        &[&alice_line.replacen("alice@example.com", "bob@example.com", 1)],
    );
    let mut env2 = env.clone();
    env2.retain(|(k, _)| *k != "TICKBOX_SIGNERS");
    env2.push(("TICKBOX_SIGNERS", renamed));
    // Accept the moved tag first, so only the signer differs.
    let relock = run(&["lock", &reference, "--lock", &lock], &env);
    assert_eq!(relock.code, 0, "{relock:#?}");
    run(&["read", &reference, "--lock", &lock, "--locked"], &env2).expect(3, "lock records signer");
    let out = run(&["read", &reference, "--lock", &lock, "--locked"], &env);
    assert_eq!(out.code, 0, "{out:#?}");
}

/// Consent for a pulled Tick: what its requested-grants layer asks for is
/// granted only under an approval of that content (and signer); with no one
/// to ask the start is refused naming the `tickbox trust` that approves it;
/// new content under the same name asks again.
#[test]
fn a_pulled_ticks_requests_need_an_approval_of_its_content() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-consent");
    let mut env = env(&store);
    env.push(("TICKBOX_TRUST_DIR", dir.path("trust").display().to_string()));
    std::fs::write(dir.path("req.toml"), "env = [\"HOME\"]\n").unwrap();
    let req = dir.path("req.toml").display().to_string();
    let reference = registry.reference("asks/counter:v1");
    let pushed = run(
        &[
            "push",
            &reference,
            &counter().display().to_string(),
            "--manifest",
            &req,
        ],
        &env,
    );
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let pinned = pushed.json()["reference"].as_str().unwrap().to_string();
    let refused = run(&["read", &reference], &env);
    refused.expect(2, &format!("approve it with `tickbox trust {pinned}`"));
    assert!(refused.stderr.contains("env HOME"), "{refused:#?}");
    let trusted = run(&["trust", &pinned], &env);
    assert_eq!(trusted.code, 0, "{trusted:#?}");
    let info = run(&["info", &reference], &env);
    assert_eq!(info.code, 0, "{info:#?}");
    assert_eq!(info.json()["granted"]["env"], json!(["HOME"]), "{info:#?}");
    // Revoked by another spelling of the reference (a tag, not the digest
    // it was approved under, and `localhost`), it asks again; and again
    // approved.
    let spelled = reference.replace("127.0.0.1", "localhost");
    let revoked = run(&["trust", "revoke", &spelled], &env);
    assert_eq!(revoked.code, 0, "{revoked:#?}");
    assert_eq!(revoked.json()["revoked"].as_array().map(Vec::len), Some(1));
    run(&["read", &reference], &env).expect(2, "tickbox trust");
    let none = run(&["trust", "revoke", &spelled], &env);
    none.expect(2, "no approval matches");
    assert_eq!(run(&["trust", &pinned], &env).code, 0);
    // Other content under the same name (the ticker) asks again.
    let other = build_wasm("examples", "ticker", "wasm32-wasip2")
        .display()
        .to_string();
    let moved = run(&["push", &reference, &other, "--manifest", &req], &env);
    assert_eq!(moved.code, 0, "{moved:#?}");
    run(&["read", &reference], &env).expect(2, "tickbox trust");
    // An MCP client can never approve: the config's Tick is refused.
    let config = dir.path("mcp.toml");
    std::fs::write(
        &config,
        format!("[[tick]]\nname = \"t\"\npath = \"{reference}\"\n"),
    )
    .unwrap();
    let out = run(&["mcp", "--config", &config.display().to_string()], &env);
    assert_ne!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr.contains("an MCP client cannot approve"),
        "{out:#?}"
    );
}

/// `tickbox run` takes a reference too: the live instance runs the pulled,
/// pinned Tick and answers the shell.
#[test]
fn a_reference_runs_as_a_live_instance() {
    let registry = Registry::start(None);
    let w = crate::live::World::new("oci-run");
    let store = w.dir.path("store").display().to_string();
    let env = [("TICKBOX_STORE_DIR", store.as_str())];
    let reference = registry.reference("live/counter:v1");
    let pushed = tickbox_env(
        &["push", &reference, &counter().display().to_string()],
        &env,
    );
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let mut host = w.pty_env(&["run", "--name", "oc", &reference], 80, 24, &env);
    w.wait_for("oc");
    let out = w.tickbox(&["call", "@oc", "increment", r#"{"amount":3}"#, "--yes"]);
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, r#"{"value":3}"#),
        "{out:#?}"
    );
    assert_eq!(w.tickbox(&["stop", "oc"]).code, 0);
    assert_eq!(host.wait(), 0, "{}", host.text());
}

/// The red team's bypass, end to end: an unsigned Tick pushed to the test
/// registry is refused under a rule written in another spelling of that
/// registry (case, leading zeros, another loopback name), the reference
/// in yet another, whether `--signers` or `$TICKBOX_SIGNERS` names the
/// policy. Positive control: the same Tick signed by the pinned signer
/// runs under every spelling.
#[test]
fn an_unsigned_tick_is_refused_under_a_rule_written_in_another_spelling() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-spelling");
    let (alice, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let env = env(&store);
    let wasm = counter().display().to_string();
    let port = registry.port;
    let unsigned = format!("oci://127.0.0.1:{port}/spell/unsigned:v1");
    let signed = format!("oci://127.0.0.1:{port}/spell/signed:v1");
    let pushed = run(&["push", &unsigned, &wasm], &env);
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let pushed = run(
        &[
            "push",
            &signed,
            &wasm,
            "--sign",
            &alice.display().to_string(),
        ],
        &env,
    );
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    // Without a policy the unsigned Tick runs, with one warning line.
    let out = run(&["read", &unsigned], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.stderr.matches("no signers policy is in force").count(),
        1,
        "{out:#?}"
    );
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
        let by_env = {
            let mut e = env.clone();
            e.push(("TICKBOX_SIGNERS", policy.clone()));
            e
        };
        for reference in spellings("spell/unsigned:v1") {
            let out = run(&["read", &reference, "--signers", &policy], &env);
            out.expect(3, "it is unsigned");
            assert!(out.stdout.is_empty(), "{rule} / {reference}: {out:#?}");
            run(&["read", &reference], &by_env).expect(3, "it is unsigned");
        }
        for reference in spellings("spell/signed:v1") {
            let out = run(&["read", &reference, "--signers", &policy], &env);
            assert_eq!(out.code, 0, "{rule} / {reference}: {out:#?}");
            let out = run(&["pull", &reference], &by_env);
            assert_eq!(out.json()["signer"], json!("alice@example.com"), "{out:#?}");
        }
    }
}

/// Where a policy is in force, a Tick no rule covers is refused unless the
/// policy says otherwise (`no_match`); an impossible rule is refused when
/// read (exit 2, naming it); a policy `$TICKBOX_SIGNERS` names must exist.
#[test]
fn a_tick_no_rule_covers_is_refused_unless_the_policy_says_otherwise() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-nomatch");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let env = env(&store);
    let covered = registry.reference("ruled/");
    let free = registry.reference("free/counter:v1");
    let pushed = run(&["push", &free, &counter().display().to_string()], &env);
    assert_eq!(pushed.code, 0, "{pushed:#?}");
    let with = |policy: &str| {
        let mut e = env.clone();
        e.push(("TICKBOX_SIGNERS", policy.to_string()));
        e
    };
    let rule = format!("{covered}*");
    let deny = policy_file(&dir, "deny", "", &[&rule], &[&alice_line]);
    let out = run(&["read", &free], &with(&deny));
    out.expect(3, "no rule of the signers policy")
        .expect(3, "and no_match is deny")
        .expect(3, "the environment variable TICKBOX_SIGNERS");
    assert!(out.stdout.is_empty(), "{out:#?}");
    let warn = policy_file(
        &dir,
        "warn",
        "no_match = \"warn\"\n",
        &[&rule],
        &[&alice_line],
    );
    let out = run(&["read", &free], &with(&warn));
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stderr.contains("no_match = \"warn\"") && out.stderr.trim().lines().count() == 1,
        "one warning line: {out:#?}"
    );
    let allow = policy_file(
        &dir,
        "allow",
        "no_match = \"allow\"\n",
        &[&rule],
        &[&alice_line],
    );
    let out = run(&["read", &free], &with(&allow));
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{out:#?}");
    // An impossible rule (a tag in the pattern) is refused when read.
    let tagged = format!("{covered}counter:v1");
    let bad = policy_file(
        &dir,
        "bad",
        "no_match = \"allow\"\n",
        &[&rule, &tagged],
        &[&alice_line],
    );
    let out = run(&["read", &free], &with(&bad));
    out.expect(2, &format!("rule 2 (references = \"{tagged}\")"))
        .expect(2, "not a tag");
    assert!(out.stdout.is_empty());
    // A policy the variable names that is not there is not "no policy".
    run(
        &["read", &free],
        &with(&dir.path("none.toml").display().to_string()),
    )
    .expect(2, "is not a readable file");
}

/// `tickbox policy show [REF]`: which signers policy, lock file and trust
/// store apply and how each was found, and for REF the decision.
#[test]
fn policy_show_says_which_files_apply_and_how_they_were_found() {
    let dir = TempDir::new("oci-show");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let work = dir.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let config_home = dir.path("config");
    let base = [("XDG_CONFIG_HOME", config_home.display().to_string())];
    let show = |args: &[&str], extra: &[(&'static str, String)]| {
        let env: Vec<(&str, &str)> = base
            .iter()
            .chain(extra)
            .map(|(k, v)| (*k, v.as_str()))
            .collect();
        let mut a = vec!["policy", "show"];
        a.extend(args);
        let out = tickbox_here(&work, &a, &env);
        assert_eq!(out.code, 0, "{out:#?}");
        out.json()
    };
    // Nothing anywhere: no policy, no lock; the trust store the tests set.
    let v = show(&["oci://localhost:5000/t/c:v1"], &[]);
    assert_eq!(v["signers"]["found"], json!("none"), "{v}");
    assert_eq!(
        v["signers"]["default"],
        json!(config_home.join("tickbox/signers.toml"))
    );
    assert_eq!(v["lock"]["found"], json!("none"), "{v}");
    assert_eq!(v["lock"]["default"], json!("tickbox.lock"), "{v}");
    assert_eq!(
        (&v["trust"]["found"], &v["trust"]["by"]),
        (&json!("environment"), &json!("TICKBOX_TRUST_DIR")),
        "{v}"
    );
    assert_eq!(v["reference"]["decision"], json!({"outcome": "no_policy"}));
    // The same policy by flag, by variable and at the default path.
    let policy = policy_file(
        &dir,
        "signers",
        "no_match = \"warn\"\n",
        &["oci://127.0.0.1:5000/t/*", "oci://LOCALHOST:5000/t/c"],
        &[&alice_line],
    );
    std::fs::create_dir_all(config_home.join("tickbox")).unwrap();
    std::fs::copy(&policy, config_home.join("tickbox/signers.toml")).unwrap();
    std::fs::copy(
        dir.path("signers.allowed"),
        config_home.join("tickbox/signers.allowed"),
    )
    .unwrap();
    for (args, extra, found, by) in [
        (
            vec!["--signers", policy.as_str()],
            vec![],
            "flag",
            json!("--signers"),
        ),
        (
            vec![],
            vec![("TICKBOX_SIGNERS", policy.clone())],
            "environment",
            json!("TICKBOX_SIGNERS"),
        ),
        (vec![], vec![], "default", Value::Null),
    ] {
        let mut a = vec!["oci://localhost:5000/t/c:v1"];
        a.extend(args.iter().copied());
        let v = show(&a, &extra);
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
    let v = show(&["oci://[::1]:5000/t/other:v1"], &[]);
    assert_eq!(v["reference"]["decision"]["rule"], json!(1), "{v}");
    let v = show(&["oci://localhost:5001/t/c:v1"], &[]);
    assert_eq!(
        v["reference"]["decision"],
        json!({"outcome": "no_match", "no_match": "warn"}),
        "{v}"
    );
    // The lock: at the default path once there, by flag, beside --config.
    std::fs::write(work.join("tickbox.lock"), "version = 1\n").unwrap();
    let v = show(&[], &[]);
    assert_eq!(
        (&v["lock"]["found"], &v["lock"]["path"]),
        (&json!("default"), &json!("tickbox.lock")),
        "{v}"
    );
    let other = dir.path("other.lock").display().to_string();
    let v = show(&["--lock", &other], &[]);
    assert_eq!(
        (&v["lock"]["found"], &v["lock"]["by"]),
        (&json!("flag"), &json!("--lock")),
        "{v}"
    );
    let config = dir.path("mcp.toml").display().to_string();
    let v = show(&["--config", &config, "--locked"], &[]);
    assert_eq!(v["lock"]["path"], json!(dir.path("tickbox.lock")), "{v}");
    // An impossible rule is refused naming it, here too.
    let bad = policy_file(&dir, "bad", "", &["oci://localhost/t/"], &[&alice_line]);
    let out = tickbox_here(&work, &["policy", "show", "--signers", &bad], &[]);
    out.expect(2, "rule 1").expect(2, "ends in /");
}

/// `tickbox lock` writes where `--locked` reads when no flag names a file:
/// `./tickbox.lock`.
#[test]
fn lock_writes_where_locked_reads_without_a_flag() {
    let registry = Registry::start(None);
    let store = TempDir::new("oci-store");
    let dir = TempDir::new("oci-lock-default");
    let env = env(&store);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let project = dir.path("project");
    std::fs::create_dir_all(&project).unwrap();
    let wasm = counter().display().to_string();
    let reference = registry.reference("pinned/counter:v1");
    let first = tickbox_here(&project, &["push", &reference, &wasm], &env);
    assert_eq!(first.code, 0, "{first:#?}");
    let first = first.json()["manifest"].clone();
    let locked = tickbox_here(&project, &["lock", &reference], &env);
    assert_eq!(locked.code, 0, "{locked:#?}");
    assert_eq!(locked.json()["lock"], json!("tickbox.lock"));
    let text = std::fs::read_to_string(project.join("tickbox.lock")).unwrap();
    assert!(text.contains(first.as_str().unwrap()), "{text}");
    // Positive control: --locked with no --lock reads it, in any spelling.
    let out = tickbox_here(&project, &["read", &reference, "--locked"], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    let other_spelling = format!("oci://LOCALHOST:0{}/pinned/counter:v1", registry.port);
    let out = tickbox_here(&project, &["read", &other_spelling, "--locked"], &env);
    assert_eq!(out.code, 0, "{out:#?}");
    // The tag moves: the lock still runs its digest, --locked refuses.
    let second = tickbox_here(
        &project,
        &["push", &reference, &wasm, "--manifest", "/dev/null"],
        &env,
    );
    assert_eq!(second.code, 0, "{second:#?}");
    let pulled = tickbox_here(&project, &["pull", &reference], &env);
    assert_eq!(pulled.json()["manifest"], first, "{pulled:#?}");
    tickbox_here(&project, &["read", &reference, "--locked"], &env).expect(3, "moved");
    tickbox_here(
        &project,
        &["read", &registry.reference("pinned/other:v1"), "--locked"],
        &env,
    )
    .expect(2, "is not in the lock file");
    // Elsewhere, with no lock there, --locked refuses what it cannot check.
    tickbox_here(dir.0.as_path(), &["read", &reference, "--locked"], &env)
        .expect(2, "is not in the lock file");
}

/// `tickbox mcp` says at start which signers policy, lock file and trust
/// store apply (one log line each): a client that starts it without
/// `$TICKBOX_SIGNERS` shows as "none".
#[test]
fn mcp_logs_which_policy_lock_and_trust_store_apply() {
    let dir = TempDir::new("oci-mcp-files");
    let (_, alice_line) = ssh_key(&dir, "alice", "alice@example.com");
    let policy = signers_policy(&dir, "signers", "oci://localhost/t/", &[&alice_line]);
    let counter = crate::util::tick("counter.py");
    let config = ("XDG_CONFIG_HOME", dir.path("config").display().to_string());
    let serve = |extra: &[(&str, &str)]| {
        let mut env = vec![(config.0, config.1.as_str())];
        env.extend_from_slice(extra);
        let out = tickbox_here(&dir.0, &["mcp", "--", "python3", &counter], &env);
        assert_eq!(out.code, 0, "{out:#?}");
        out.stderr
    };
    let full = serve(&[("TICKBOX_SIGNERS", &policy)]);
    let line = |text: &str, what: &str| {
        let found: Vec<&str> = text.lines().filter(|l| l.contains(what)).collect();
        assert_eq!(found.len(), 1, "one line for {what}: {text}");
        found[0].to_string()
    };
    let signers = line(&full, "signers policy:");
    assert!(
        signers.contains(&policy) && signers.contains("the environment variable TICKBOX_SIGNERS"),
        "{signers}"
    );
    assert!(line(&full, "lock file:").contains("none"), "{full}");
    assert!(
        line(&full, "trust store:").contains("the environment variable TICKBOX_TRUST_DIR"),
        "{full}"
    );
    // The reduced environment an MCP client may give: no policy, said so.
    let reduced = serve(&[]);
    let signers = line(&reduced, "signers policy:");
    assert!(
        signers.contains("none") && signers.contains("TICKBOX_SIGNERS"),
        "{signers}"
    );
}
