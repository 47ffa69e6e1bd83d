//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF
//! distribution registry, installed by tests/setup.sh), started on a free
//! loopback port and killed when dropped; and SSH keys to sign with.

use crate::{eventually, TempDir};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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
