//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF
//! distribution registry, installed by tests/setup.sh), started on a free
//! loopback port and killed when dropped; SSH keys to sign with; signers
//! policy files; and a fake registry serving what a real one never sends.

use crate::{eventually, TempDir};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A loopback port nobody listens on now (another process may take it
/// before the caller binds it: callers that start a server retry).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a loopback port")
        .local_addr()
        .expect("its address")
        .port()
}

/// TLS and basic auth for a registry: certificate and key files, an
/// htpasswd file.
pub struct Secure {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub htpasswd: PathBuf,
}

/// A running `docker-registry`, killed on drop.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: TempDir,
}

impl Registry {
    /// Starts a registry with its storage in a temporary directory, over
    /// plain HTTP, or TLS with basic auth when `secure` says so.
    pub fn start(secure: Option<&Secure>) -> Registry {
        let dir = TempDir::new("registry");
        for _ in 0..5 {
            let port = free_port();
            let mut config = format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path("data").display()
            );
            if let Some(s) = secure {
                config.push_str(&format!(
                    "  tls:\n    certificate: {}\n    key: {}\nauth:\n  htpasswd:\n    realm: tickbox-test\n    path: {}\n",
                    s.cert.display(),
                    s.key.display(),
                    s.htpasswd.display()
                ));
            }
            let file = dir.path("config.yml");
            std::fs::write(&file, config).expect("write the registry's config");
            let mut child = Command::new("docker-registry")
                .arg("serve")
                .arg(&file)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect(
                    "docker-registry (Debian package docker-registry; tests/setup.sh installs it)",
                );
            // Ready once it accepts connections; a port taken meanwhile
            // makes it exit, and another port is tried.
            let listening = eventually(Duration::from_secs(30), || {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
                    || child.try_wait().ok().flatten().is_some()
            });
            if listening && child.try_wait().ok().flatten().is_none() {
                return Registry {
                    child,
                    port,
                    _dir: dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("docker-registry did not start");
    }

    /// `oci://127.0.0.1:PORT/REPO_TAG`.
    pub fn reference(&self, repo_tag: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo_tag}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A new ed25519 key `name` in `dir` (no passphrase): its private key
/// file, and its line for an allowed-signers file under `principal`.
pub fn ssh_key(dir: &TempDir, name: &str, principal: &str) -> (PathBuf, String) {
    let key = dir.path(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .expect("ssh-keygen (OpenSSH)");
    assert!(out.status.success(), "{out:?}");
    let public = std::fs::read_to_string(key.with_extension("pub")).expect("the public key");
    (key, format!("{principal} {}", public.trim()))
}

/// The config media type of a wasm artifact (the CNCF Wasm OCI layout).
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// An OCI image manifest's media type.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// A content digest as a registry names it (`sha256:HEX`), computed apart
/// from tickbox's own code.
pub fn digest(bytes: &[u8]) -> String {
    let h = Sha256::digest(bytes);
    format!(
        "sha256:{}",
        h.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// A registry that serves one repository's manifest and blobs as told,
/// counting blob requests.
pub struct Fake {
    pub port: u16,
    /// How many blob requests it answered.
    pub blob_gets: Arc<AtomicUsize>,
}

#[derive(Clone)]
pub struct FakeContent {
    pub manifest: Vec<u8>,
    pub manifest_type: String,
    /// Blobs by digest: the bytes served (maybe not the digest's).
    pub blobs: Vec<(String, Vec<u8>)>,
    /// A 401 challenge instead of the manifest.
    pub challenge: Option<String>,
    /// A registry error body (for its message) instead of the manifest.
    pub error: Option<String>,
    /// Blobs sent chunked, without a length up front.
    pub chunked: bool,
}

impl Fake {
    pub fn start(content: FakeContent) -> Fake {
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
                    let Some(head) = crate::read_request_head(&mut s) else {
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
pub fn fake_content(wasm: &[u8], served: &[u8], declared: Option<u64>) -> FakeContent {
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

/// A signers policy `NAME.toml` in `dir`: `top` (settings), then one rule
/// per pattern, each requiring the signers in `allowed` (allowed-signers
/// lines, written to `NAME.allowed` beside it).
pub fn policy_file(
    dir: &TempDir,
    name: &str,
    top: &str,
    patterns: &[&str],
    allowed: &[&str],
) -> PathBuf {
    std::fs::write(
        dir.path(&format!("{name}.allowed")),
        allowed.join("\n") + "\n",
    )
    .expect("write the allowed signers");
    let policy = dir.path(&format!("{name}.toml"));
    let rules: String = patterns
        .iter()
        .map(|p| {
            format!("[[require]]\nreferences = \"{p}\"\nallowed_signers = \"{name}.allowed\"\n")
        })
        .collect();
    std::fs::write(&policy, format!("{top}{rules}")).expect("write the signers policy");
    policy
}

/// A signers policy requiring the signers in `allowed` (lines) for every
/// repository under `prefix` (`oci://HOST/REPO/`).
pub fn signers_policy(dir: &TempDir, name: &str, prefix: &str, allowed: &[&str]) -> PathBuf {
    policy_file(dir, name, "", &[&format!("{prefix}*")], allowed)
}

/// A fake registry serving `wasm` whose challenge names a token service
/// over plain HTTP on another host (`10.255.255.1`, never dialled: the
/// refusal comes first).
pub fn fake_with_plain_http_realm(wasm: &[u8]) -> Fake {
    let mut content = fake_content(wasm, wasm, None);
    content.challenge = Some(r#"Bearer realm="http://10.255.255.1/token",service="fake""#.into());
    Fake::start(content)
}
