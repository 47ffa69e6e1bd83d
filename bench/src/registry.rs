//! Ticks from a registry: a pull against `curl` fetching the same blob, and
//! the start of a pinned, already-pulled reference against the same file by
//! path. A real `docker-registry` on loopback (tests/setup.sh installs it).

use super::{Anchored, Stat};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The size the issue measures pulls at (a componentize-py Tick's size).
const PULL_BYTES: usize = 18_000_000;

struct Registry {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_registry() -> Result<Registry> {
    let dir = std::env::temp_dir().join(format!("tickbox-bench-registry-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config = dir.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("data").display()
        ),
    )?;
    let child = Command::new("docker-registry")
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("docker-registry (Debian package docker-registry; tests/setup.sh installs it)")?;
    let r = Registry { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("docker-registry did not start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(r)
}

fn tickbox_json(tickbox: &Path, store: &Path, args: &[&str]) -> Result<serde_json::Value> {
    let out = Command::new(tickbox)
        .args(args)
        .env("TICKBOX_STORE_DIR", store)
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        bail!("tickbox {args:?} failed");
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn timed(mut cmd: Command) -> Result<f64> {
    let t = Instant::now();
    let s = cmd.stdout(Stdio::null()).status()?;
    if !s.success() {
        bail!("{cmd:?} failed");
    }
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

/// The two rows, each beside its anchor from the same run.
pub(crate) fn rows(tickbox: &Path, wasm: &Path, n: usize) -> Result<Vec<Anchored>> {
    if Command::new("curl").arg("--version").output().is_err() {
        bail!("curl is the pull's anchor and is not on PATH");
    }
    let registry = start_registry()?;
    let scratch = registry.dir.join("scratch");
    std::fs::create_dir_all(&scratch)?;
    // An 18 MB "component": a component header, then bytes that do not
    // compress, pushed as a Tick (a pull checks digests, not the wasm).
    let big = scratch.join("big.wasm");
    let mut bytes = b"\0asm\x0d\x00\x01\x00".to_vec();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while bytes.len() < PULL_BYTES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(&big, &bytes)?;
    let store = scratch.join("store");
    let big_ref = format!("oci://127.0.0.1:{}/bench/big:v1", registry.port);
    let pushed = tickbox_json(
        tickbox,
        &store,
        &["push", &big_ref, &big.display().to_string()],
    )?;
    let layer = format!("sha256:{}", hex_sha256(&bytes));
    let url = format!(
        "http://127.0.0.1:{}/v2/bench/big/blobs/{layer}",
        registry.port
    );
    let (mut pulls, mut curls) = (Vec::new(), Vec::new());
    for i in 0..n {
        // Interleaved; every pull into an empty store.
        let fresh = scratch.join(format!("pull-{i}"));
        let mut pull = Command::new(tickbox);
        pull.args(["pull", &big_ref])
            .env("TICKBOX_STORE_DIR", &fresh);
        pulls.push(timed(pull)?);
        let _ = std::fs::remove_dir_all(&fresh);
        let mut curl = Command::new("curl");
        curl.args(["-sf", "-o", "/dev/null", &url]);
        curls.push(timed(curl)?);
    }
    let _ = pushed;

    // A real Tick, pulled once, then started pinned and by path.
    let guest_ref = format!("oci://127.0.0.1:{}/bench/guest:v1", registry.port);
    tickbox_json(
        tickbox,
        &store,
        &["push", &guest_ref, &wasm.display().to_string()],
    )?;
    let pulled = tickbox_json(tickbox, &store, &["pull", &guest_ref])?;
    let pinned = pulled["reference"]
        .as_str()
        .context("a pinned reference")?
        .to_string();
    let path = pulled["wasm"]["path"]
        .as_str()
        .context("a store path")?
        .to_string();
    let (mut by_ref, mut by_path) = (Vec::new(), Vec::new());
    for _ in 0..n + 1 {
        // The first of each warms the compile cache.
        let mut a = Command::new(tickbox);
        a.args(["read", &pinned]).env("TICKBOX_STORE_DIR", &store);
        by_ref.push(timed(a)?);
        let mut b = Command::new(tickbox);
        b.args(["read", &path]).env("TICKBOX_STORE_DIR", &store);
        by_path.push(timed(b)?);
    }
    by_ref.remove(0);
    by_path.remove(0);
    let pull = Stat::new("ms", pulls);
    let curl = Stat::new("ms", curls);
    let r = pull.median() / curl.median();
    let start = Stat::new("ms", by_ref);
    let file = Stat::new("ms", by_path);
    let s = start.median() / file.median();
    Ok(vec![
        Anchored {
            name: format!(
                "tickbox pull, {} MB from a loopback registry, empty store ({n} interleaved runs)",
                PULL_BYTES / 1_000_000
            ),
            value: pull,
            anchor: Some(("curl of the same blob", curl)),
            target: Some((format!("≤ 1.5× (got {r:.2}×)"), r <= 1.5)),
        },
        Anchored {
            name: "whole process: tickbox read of a pinned, pulled reference".into(),
            value: start,
            anchor: Some(("the same file by path", file)),
            target: Some((format!("≤ 1.05× (got {s:.2}×)"), s <= 1.05)),
        },
    ])
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
