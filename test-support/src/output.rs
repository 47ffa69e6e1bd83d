//! A program run to its end under a time bound: its exit code, stdout and
//! stderr, read by threads of their own so a chatty child never blocks on
//! a full pipe.

use crate::exits_within;
use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

/// What one run produced.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Output {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// Asserts the exit code and that stderr mentions `needle`.
    pub fn expect(&self, code: i32, needle: &str) -> &Self {
        assert_eq!(self.code, code, "exit code; {self:#?}");
        assert!(
            self.stderr.contains(needle),
            "stderr should mention {needle:?}; {self:#?}"
        );
        self
    }
}

/// Starts `cmd` (stdout and stderr piped), collects both, and waits for it
/// to end; after `limit` it is killed and the test fails naming `shown`.
pub fn finish_within(cmd: Command, shown: &str, limit: Duration) -> Output {
    finish_within_guarded(cmd, shown, limit, |_| ())
}

/// [`finish_within`], holding `guard(pid)` from the start until it returns
/// or the test fails: for a child whose own children must go with it (a
/// guard that kills its process group on drop).
pub fn finish_within_guarded<G>(
    mut cmd: Command,
    shown: &str,
    limit: Duration,
    guard: impl FnOnce(u32) -> G,
) -> Output {
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let _guard = guard(child.id());
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    if !exits_within(child.id(), limit.saturating_sub(start.elapsed())) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{shown} did not finish within {limit:?}");
    }
    let status = child.wait().expect("wait");
    Output {
        code: status.code().unwrap_or(-1),
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}
