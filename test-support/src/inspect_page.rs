//! A client of the inspector's page server (`tickbox inspect`, and
//! `tickbox_app::inspect::server` in process): raw HTTP/1.1 over loopback,
//! so a test writes exactly the headers an attacker would, and the page
//! driven in headless Chromium (Debian's chromium and chromedriver through
//! Selenium, `tests/browser/inspect_page.py`).

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Generous: the machine may be loaded (two busy cores).
pub const PAGE_PATIENCE: Duration = Duration::from_secs(90);

/// An inspector's page server: where it listens and its token.
pub struct Page {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub token: String,
}

impl Page {
    /// The URL printed at start: the token in its fragment.
    pub fn url(&self) -> String {
        format!("http://{}/#token={}", self.addr, self.token)
    }

    pub fn port(&self) -> &str {
        self.addr.rsplit(':').next().unwrap()
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// One raw HTTP/1.1 request with these extra header lines (and `Host`
    /// unless one is given); the status, the head and the body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[String],
        body: &str,
    ) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(PAGE_PATIENCE)).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        if !headers
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("host:"))
        {
            head.push_str(&format!("Host: {}\r\n", self.addr));
        }
        for h in headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
        (status, head.to_string(), body.to_string())
    }

    pub fn bearer(&self) -> String {
        format!("Authorization: Bearer {}", self.token)
    }

    /// `GET /api/snapshot` with the token: everything the page is shown.
    pub fn snapshot(&self) -> Value {
        let (status, _, body) = self.request("GET", "/api/snapshot", &[self.bearer()], "");
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).expect("snapshot JSON")
    }

    /// A POST action as the page sends it (token, own Origin, JSON).
    pub fn act(&self, path: &str, body: &str) -> (u16, String) {
        let (status, _, body) = self.request(
            "POST",
            path,
            &[
                self.bearer(),
                format!("Origin: {}", self.origin()),
                "Content-Type: application/json".into(),
            ],
            body,
        );
        (status, body)
    }

    /// An event stream opened by hand: the status, the connection (open,
    /// with the whole `hello` event read when the status is 200) and what
    /// was read.
    pub fn open_events(&self) -> (u16, TcpStream, String) {
        let mut s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(PAGE_PATIENCE)).unwrap();
        write!(
            s,
            "GET /events HTTP/1.1\r\nHost: {}\r\n{}\r\n\r\n",
            self.addr,
            self.bearer()
        )
        .unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let text = String::from_utf8_lossy(&seen).to_string();
            if let Some(status) = text
                .split_once("\r\n")
                .and_then(|(line, _)| line.split(' ').nth(1))
                .and_then(|c| c.parse::<u16>().ok())
            {
                let hello = text.split_once("event: hello").map(|(_, rest)| rest);
                if status != 200 || hello.is_some_and(|rest| rest.contains("\n\n")) {
                    return (status, s, text);
                }
            }
            let n = s.read(&mut buf).expect("the event stream");
            assert!(n > 0, "the stream ended: {text}");
            seen.extend_from_slice(&buf[..n]);
        }
    }
}

/// The value of the header `name` in a response's head.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The browser test's Python, or why it cannot run.
fn browser_python() -> std::path::PathBuf {
    let py = crate::root().join("tests/browser/.venv/bin/python3");
    assert!(
        py.exists()
            && std::path::Path::new("/usr/bin/chromium").exists()
            && std::path::Path::new("/usr/bin/chromedriver").exists(),
        "the browser tests need tests/setup.sh (chromium, chromium-driver, tests/browser/.venv)"
    );
    py
}

/// Runs the page driver (`tests/browser/inspect_page.py` with `args`,
/// and more environment) in its own process group, killed whole (driver,
/// chromedriver, chromium) when it ends or outlives its deadline; what it
/// saw.
pub fn drive(args: &[String], env: &[(&str, &str)]) -> Value {
    struct Group(i32);
    impl Drop for Group {
        fn drop(&mut self) {
            // SAFETY: kill(2) on the process group this test created.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
    // The driver's temporary files (Chromium's profile, its downloads) go
    // in a folder of this call's own, removed when it returns even if the
    // group had to be killed before the script could clean up.
    let scratch = crate::TempDir::new("page-driver");
    let mut cmd = Command::new(browser_python());
    cmd.arg(crate::root().join("tests/browser/inspect_page.py"))
        .args(args)
        .envs(env.iter().copied())
        .env("TMPDIR", &scratch.0)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out =
        crate::finish_within_guarded(cmd, "the page driver", Duration::from_secs(400), |pid| {
            Group(pid as i32)
        });
    assert_eq!(
        out.code, 0,
        "the page driver failed: {}\n{}",
        out.stdout, out.stderr
    );
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}
