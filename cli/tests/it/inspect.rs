//! `tickbox inspect` as the binary: the URL it prints (loopback, a token
//! in its fragment), `--open` handing the browser a 0600 file that forwards
//! to it (and removing it on SIGTERM), a browser that used the page sending
//! nothing with the token to another user's server on another loopback
//! port (headless Chromium, `tests/browser/witness.py`), and an absent
//! live instance's exit code.
//!
//! The page server itself (its door, bounds, calls, exports, a hostile
//! Tick's markup, trimming, a live instance to its end, the page in
//! headless Chromium) is tickbox-app's `tests/it/inspect.rs`.

use crate::live::World;
use crate::util::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use tickbox_test_support::inspect_page::{drive, Page, PAGE_PATIENCE};

/// `tickbox inspect` on a random loopback port, killed (with its Tick) on
/// drop; its page server as the URL it printed names it.
struct Inspect {
    child: Child,
    page: Page,
}

impl Inspect {
    /// Starts it with these args and more environment.
    fn start_env(args: &[String], env: &[(&str, &str)]) -> Inspect {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tickbox"))
            .arg("inspect")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("RUST_LOG")
            .env("TICKBOX_CACHE_DIR", wasm_cache())
            .env("TICKBOX_TRUST_DIR", target_dir().join("test-trust-none"))
            .spawn()
            .expect("spawn tickbox inspect");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("stderr ended before the URL")
                .expect("stderr");
            if let Some(url) = line.strip_prefix("tickbox inspect: serving the page on ") {
                break url.to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        let rest = url.strip_prefix("http://").expect("an http URL");
        let (addr, token) = rest
            .split_once("/#token=")
            .expect("a token in the URL's fragment");
        assert!(addr.starts_with("127.0.0.1:"), "loopback by default: {url}");
        assert_eq!(token.len(), 64, "32 random bytes as hex: {url}");
        Inspect {
            child,
            page: Page {
                addr: addr.to_string(),
                token: token.to_string(),
            },
        }
    }
}

impl Drop for Inspect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn native_counter() -> Vec<String> {
    vec!["--".into(), "python3".into(), tick("counter.py")]
}

#[test]
fn an_absent_live_instance_is_refused_at_once_with_exit_3() {
    let w = World::new("inspect-live-none");
    let out = tickbox_within(&["inspect", "@c"], &w.env(), PAGE_PATIENCE);
    assert_eq!(out.code, 3, "{out:#?}");
    assert!(out.stderr.contains("no live instance"), "{out:#?}");
    assert!(
        !out.stderr.contains("serving the page"),
        "no page served: {out:#?}"
    );
}

/// Another user's web server on another loopback port
/// (`tests/browser/witness.py`, which becomes `nobody` before it listens):
/// every request it got, read off its stdout on a thread.
struct Witness {
    child: Child,
    port: u16,
    uid: u64,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Witness {
    fn start() -> Witness {
        let mut child = Command::new("python3")
            .arg(root().join("tests/browser/witness.py"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the witness");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let Ok(first) = lines.recv_timeout(PAGE_PATIENCE) else {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            let _ = child.wait();
            panic!("the witness never listened: {err}");
        };
        let hello: Value = serde_json::from_str(&first).expect("the witness's first line");
        Witness {
            child,
            port: hello["port"].as_u64().expect("its port") as u16,
            uid: hello["uid"].as_u64().expect("its uid"),
            lines,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops it; every request it recorded.
    fn requests(mut self) -> Vec<Value> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut seen = Vec::new();
        loop {
            match self.lines.recv_timeout(PAGE_PATIENCE) {
                Ok(line) => seen.push(serde_json::from_str(&line).expect("a request's line")),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return seen,
                Err(e) => panic!("the witness's output never ended: {e}"),
            }
        }
    }
}

impl Drop for Witness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The values of the request's headers named `name`.
fn witnessed<'a>(request: &'a Value, name: &str) -> Vec<&'a str> {
    request["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| h[0].as_str().is_some_and(|k| k.eq_ignore_ascii_case(name)))
        .filter_map(|h| h[1].as_str())
        .collect()
}

/// The attack the cookie let through: a browser that used the page visits
/// a server another local user runs on another loopback port. Opened the
/// way `--open` opens it (the 0600 file a stand-in xdg-open is handed),
/// the page uses the token (its event stream, a key, a reload), then goes
/// to the witness twice (navigated to by the page, and typed). The witness
/// gets nothing with the token in it; the control is a cookie set on the
/// inspector's origin, which it does get: cookies cross ports.
#[test]
fn the_token_reaches_no_other_loopback_port_in_headless_chromium() {
    use std::os::unix::fs::PermissionsExt;
    let witness = Witness::start();
    // SAFETY: geteuid(2) reads the process's effective uid and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        assert_ne!(witness.uid, 0, "the witness is another user (nobody)");
    }
    // `--open` with a stand-in for xdg-open that says which file it got.
    let dir = TempDir::new("inspect-crossport");
    let bin = dir.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = dir.path("opened");
    let xdg_open = bin.join("xdg-open");
    std::fs::write(
        &xdg_open,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > '{0}.part' && mv '{0}.part' '{0}'\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&xdg_open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let xdg = dir.private_dir("xdg");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut args = vec!["--open".to_string()];
    args.extend(native_counter());
    let inspect = Inspect::start_env(
        &args,
        &[("XDG_RUNTIME_DIR", xdg.to_str().unwrap()), ("PATH", &path)],
    );
    let i = &inspect.page;
    assert!(
        eventually(PAGE_PATIENCE, || record.exists()),
        "xdg-open was never run"
    );
    let opened = std::path::PathBuf::from(std::fs::read_to_string(&record).unwrap());
    let mode = std::fs::metadata(&opened).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", opened.display());
    let forward = std::fs::read_to_string(&opened).unwrap();
    assert!(
        forward.contains(&format!("url={}\"", i.url())),
        "the file forwards to the printed URL: {forward}"
    );

    let control = format!("tickbox-control=c{}x{}", std::process::id(), witness.port);
    let seen = drive(
        &[
            "crossport".into(),
            opened.to_string_lossy().into_owned(),
            witness.url(),
            control.clone(),
        ],
        &[],
    );
    let s = |k: &str| seen[k].as_str().unwrap_or_default().to_string();
    // The page got in and used the token, through a reload too.
    assert!(s("first_screen").contains("Counter: 0"), "{seen}");
    assert!(s("screen_after_key").contains("Counter: 1"), "{seen}");
    assert!(s("screen_after_reload").contains("Counter: 1"), "{seen}");
    assert!(
        s("screen_after_reload_and_key").contains("Counter: 2"),
        "{seen}"
    );
    assert_eq!(i.snapshot()["state"]["data"]["value"], 2);
    assert_eq!(
        s("address_bar"),
        format!("{}/", i.origin()),
        "the token left the address bar: {seen}"
    );
    assert!(!s("page_cookies").contains(&i.token[..16]), "{seen}");
    assert!(s("page_cookies_with_control").contains(&control), "{seen}");

    let requests = witness.requests();
    let visit = |path: &str| {
        requests
            .iter()
            .find(|r| r["path"] == path)
            .unwrap_or_else(|| panic!("the witness never saw {path}: {requests:?}"))
    };
    // The control: the cookie the inspector's origin holds reached the
    // other port, on both visits ...
    for path in ["/from-the-page", "/typed"] {
        let cookies = witnessed(visit(path), "cookie");
        assert!(
            cookies.iter().any(|c| c.contains(&control)),
            "{path}: the control cookie crossed ports: {cookies:?}"
        );
    }
    // ... and nothing with the token did: no cookie, header, path or body
    // (nor half of it), and no credentials at all.
    let all = serde_json::to_string(&requests).unwrap();
    for part in [&i.token[..], &i.token[..32], &i.token[32..]] {
        assert!(
            !all.contains(part),
            "the witness saw the token: {requests:#?}"
        );
    }
    for r in &requests {
        assert!(witnessed(r, "authorization").is_empty(), "{r}");
    }

    // The `--open` file goes when the inspector ends (SIGTERM).
    // SAFETY: kill(2) on the inspector this test started.
    unsafe { libc::kill(inspect.child.id() as i32, libc::SIGTERM) };
    assert!(
        eventually(PAGE_PATIENCE, || !opened.exists()),
        "--open's file outlived the inspector: {}",
        opened.display()
    );
}
