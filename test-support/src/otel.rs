//! A real OTLP receiver on loopback: `tests/otel/receiver.py`, which
//! decodes every request with the official OTLP classes (PyPI's
//! `opentelemetry-proto`, pinned in `tests/otel/requirements.txt`,
//! installed by `tests/setup.sh` into `tests/otel/.venv`), strictly (an
//! unknown field fails), and writes what it got as JSON lines; and the
//! readers of what it got (spans, the latest metrics, attributes).
//!
//! The CLI's tests point `tickbox` at it through `OTEL_*` variables,
//! tickbox-mcp's point the facade's exporter at [`Receiver::endpoint`].

use crate::{eventually, root, TempDir};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long to wait for telemetry to arrive: generous, since the machine
/// may be loaded; only reached when a test is failing.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// The receiver's Python (the venv `tests/setup.sh` makes).
fn python() -> PathBuf {
    let p = root().join("tests/otel/.venv/bin/python3");
    assert!(
        p.exists(),
        "{} is missing: run tests/setup.sh (it installs tests/otel/requirements.txt)",
        p.display()
    );
    p
}

/// A running `tests/otel/receiver.py`; killed on drop.
pub struct Receiver {
    child: Child,
    /// The loopback port it listens on.
    pub port: u16,
    out: PathBuf,
    _dir: TempDir,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::start_on(0)
    }

    /// On `port` (0: any free one).
    pub fn start_on(port: u16) -> Receiver {
        let dir = TempDir::new("otel-receiver");
        let out = dir.path("got.jsonl");
        let mut child = Command::new(python())
            .arg(root().join("tests/otel/receiver.py"))
            .arg("--out")
            .arg(&out)
            .arg("--port")
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the receiver's first line");
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the receiver did not start: {line:?}"));
        Receiver {
            child,
            port,
            out,
            _dir: dir,
        }
    }

    /// Its base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far: the complete lines (the receiver may be
    /// writing the next one as this reads).
    pub fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// Every span of every trace request so far.
    pub fn spans(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for r in self.requests() {
            assert_eq!(r.get("error"), None, "the receiver refused a request: {r}");
            for rs in r["message"]["resourceSpans"]
                .as_array()
                .into_iter()
                .flatten()
            {
                for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                    out.extend(ss["spans"].as_array().cloned().unwrap_or_default());
                }
            }
        }
        out
    }

    /// Every metric of the latest metrics request.
    pub fn latest_metrics(&self) -> Vec<Value> {
        let requests = self.requests();
        let Some(last) = requests.iter().rev().find(|r| r["path"] == "/v1/metrics") else {
            return Vec::new();
        };
        assert_eq!(
            last.get("error"),
            None,
            "the receiver refused a request: {last}"
        );
        let mut out = Vec::new();
        for rm in last["message"]["resourceMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                out.extend(sm["metrics"].as_array().cloned().unwrap_or_default());
            }
        }
        out
    }

    /// Waits until the spans satisfy `ok`; returns them.
    pub fn spans_until(&self, what: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut last = Vec::new();
        let found = eventually(PATIENCE, || {
            last = self.spans();
            ok(&last)
        });
        assert!(found, "{what}: not within {PATIENCE:?}; spans: {last:#?}");
        last
    }

    /// Waits for a metrics request whose histogram `name` satisfies `ok`;
    /// returns that request's metrics.
    pub fn metrics_until(
        &self,
        what: &str,
        name: &str,
        ok: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let mut last = Vec::new();
        let found = eventually(PATIENCE, || {
            last = self.latest_metrics();
            ok(&histogram_points(&last, name))
        });
        assert!(found, "{what}: not within {PATIENCE:?}; metrics: {last:#?}");
        last
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An attribute's value (as the receiver decoded it: `{"stringValue": …}`).
pub fn attr<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
}

/// A string attribute's value.
pub fn string_attr<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    attr(span, key)?["stringValue"].as_str()
}

/// The spans named `name`.
pub fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// The data points of the histogram `name` in one metrics request.
pub fn histogram_points(metrics: &[Value], name: &str) -> Vec<Value> {
    metrics
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["histogram"]["dataPoints"].as_array())
        .cloned()
        .unwrap_or_default()
}

/// A point whose attribute `key` is `value`.
pub fn point_with<'a>(points: &'a [Value], key: &str, value: &str) -> Option<&'a Value> {
    points.iter().find(|p| string_attr(p, key) == Some(value))
}
