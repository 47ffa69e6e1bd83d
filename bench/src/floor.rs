//! The round-trip floor: what a request costs with no engine at all.
//!
//! A minimal blocking host loop over pipes to the same native benchtick the
//! engine rows use: write one request line, block on the answer line, parse
//! it (a host has to), repeat. No tokio, no tasks, no validation, no PTY
//! (the Tick's stderr goes nowhere). Every engine round trip is reported as
//! a multiple of it, measured in the same run.

use crate::Stat;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Per-request latency of `n` sequential `tick/call get` (or `tick/read`)
/// requests over plain pipes, in µs, after `n / 10` warm-up requests.
pub fn floor(native: &Path, n: usize, read: bool) -> Result<Stat> {
    let mut child = Command::new(native)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", native.display()))?;
    let result = (|| {
        let mut stdin = child.stdin.take().context("no stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut line = String::new();
        let mut samples = Vec::with_capacity(n);
        for i in 0..n + n / 10 {
            let req = if read {
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tick/read\"}}\n")
            } else {
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"tick/call\",\"params\":{{\"tool\":\"get\",\"args\":{{}},\"revision\":\"1\"}}}}\n"
                )
            };
            let t = Instant::now();
            stdin.write_all(req.as_bytes())?;
            line.clear();
            if stdout.read_line(&mut line)? == 0 {
                bail!("the bench Tick closed its stdout");
            }
            let v: Value = serde_json::from_str(&line)?;
            if v["id"] != i || v.get("result").is_none() {
                bail!("unexpected answer: {line}");
            }
            if i >= n / 10 {
                samples.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        Ok(Stat::new("µs", samples))
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}
