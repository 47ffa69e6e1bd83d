//! OpenTelemetry: the CLI's half of [`tickbox_telemetry::otel`] (the spans,
//! metrics and exporter thread are the host crate's). This module reads the
//! standard OpenTelemetry variables, the only place that does; requests go
//! out through the app layer's client ([`tickbox_app::otlp::HyperPost`]).
//!
//! Telemetry is on when an OTLP endpoint is set
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`, or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! / `_METRICS_ENDPOINT` for one signal) and `OTEL_SDK_DISABLED` is not
//! `true`; `OTEL_TRACES_EXPORTER=none` or `OTEL_METRICS_EXPORTER=none`
//! turns one signal off. Then every command that runs a Tick adds one
//! observer to its audit handles, started the first time a Tick's handle
//! is made; otherwise nothing is started, no thread runs and nothing is
//! added to any call. Also read: `OTEL_EXPORTER_OTLP_PROTOCOL` (and the
//! per-signal ones; only `http/json` is spoken, and an unset protocol
//! means it), `OTEL_EXPORTER_OTLP_HEADERS` (and per signal),
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME`,
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_SCHEDULE_DELAY` and
//! `OTEL_METRIC_EXPORT_INTERVAL`. A value that cannot be used is a usage
//! error (exit 2) naming the variable, before any Tick starts.

use super::exit::Exit;
use hyper::header::{HeaderName, HeaderValue};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tickbox_runtime::util::lock;
use tickbox_telemetry::otel::{
    Endpoint, Otel, OtelConfig, OTEL_DEFAULT_METRIC_INTERVAL, OTEL_DEFAULT_SPAN_DELAY,
    OTEL_DEFAULT_TIMEOUT,
};

/// The variables read here.
const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
const METRICS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";
const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
const TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
const METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
const TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
const METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
const SPAN_DELAY: &str = "OTEL_BSP_SCHEDULE_DELAY";
const METRIC_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";

/// The one protocol spoken.
const HTTP_JSON: &str = "http/json";

/// A variable's value; empty counts as unset, as the specification says.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn bad(name: &str, why: impl std::fmt::Display) -> Exit {
    Exit::usage(format!(
        "{name}: {}",
        tickbox_runtime::text::escape(&why.to_string())
    ))
}

/// The configuration the variables ask for; `None` when no endpoint is
/// set (telemetry off).
pub fn config() -> Result<Option<OtelConfig>, Exit> {
    if var(SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let base = var(ENDPOINT);
    let signal = |own: &str,
                  exporter: &str,
                  path: &str,
                  protocol: &str|
     -> Result<Option<Endpoint>, Exit> {
        if var(exporter).is_some_and(|v| v.trim() == "none") {
            return Ok(None);
        }
        let endpoint = match (var(own), &base) {
            (Some(url), _) => Endpoint::parse(url.trim()).map_err(|e| bad(own, e))?,
            (None, Some(b)) => {
                Endpoint::with_signal(b.trim(), path).map_err(|e| bad(ENDPOINT, e))?
            }
            (None, None) => return Ok(None),
        };
        for name in [protocol, PROTOCOL] {
            if let Some(p) = var(name) {
                if p.trim() != HTTP_JSON {
                    return Err(bad(
                        name,
                        format!("`{}`: tickbox exports OTLP over HTTP with JSON only; set it to {HTTP_JSON} (or unset it)", p.trim()),
                    ));
                }
                break;
            }
        }
        Ok(Some(endpoint))
    };
    let traces = signal(
        TRACES_ENDPOINT,
        TRACES_EXPORTER,
        "v1/traces",
        TRACES_PROTOCOL,
    )?;
    let metrics = signal(
        METRICS_ENDPOINT,
        METRICS_EXPORTER,
        "v1/metrics",
        METRICS_PROTOCOL,
    )?;
    if traces.is_none() && metrics.is_none() {
        return Ok(None);
    }
    let mut config = OtelConfig::new(traces, metrics);
    let common = headers(HEADERS)?;
    config.trace_headers = merged(&common, headers(TRACES_HEADERS)?);
    config.metric_headers = merged(&common, headers(METRICS_HEADERS)?);
    config.timeout = millis(TIMEOUT, OTEL_DEFAULT_TIMEOUT)?;
    config.span_delay = millis(SPAN_DELAY, OTEL_DEFAULT_SPAN_DELAY)?;
    config.metric_interval = millis(METRIC_INTERVAL, OTEL_DEFAULT_METRIC_INTERVAL)?;
    let mut resource = match var(RESOURCE_ATTRIBUTES) {
        Some(v) => pairs(&v).map_err(|e| bad(RESOURCE_ATTRIBUTES, e))?,
        None => Vec::new(),
    };
    let service = var(SERVICE_NAME)
        .map(|s| s.trim().to_string())
        .or_else(|| {
            resource
                .iter()
                .find(|(k, _)| k == "service.name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or_else(|| "tickbox".into());
    resource.retain(|(k, _)| k != "service.name" && k != "service.version");
    resource.insert(0, ("service.name".into(), service));
    resource.insert(
        1,
        ("service.version".into(), env!("CARGO_PKG_VERSION").into()),
    );
    config.resource = resource;
    Ok(Some(config))
}

/// `KEY=VALUE,…` with percent-encoded values (the headers' and resource
/// attributes' format).
fn pairs(v: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (n, item) in v.split(',').filter(|i| !i.trim().is_empty()).enumerate() {
        // Named by its place, not echoed: a header item is often a
        // credential (`Authorization: Bearer …`, written with a colon).
        let (k, val) = item
            .split_once('=')
            .ok_or_else(|| format!("item {} is not KEY=VALUE", n + 1))?;
        out.push((k.trim().to_string(), percent_decoded(val.trim())?));
    }
    Ok(out)
}

fn percent_decoded(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a bad %-escape")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a value that is not UTF-8".to_string())
}

/// The headers `name` gives, each checked as an HTTP header now (so a bad
/// one is a usage error, not a failed export later).
fn headers(name: &str) -> Result<Vec<(String, String)>, Exit> {
    let Some(v) = var(name) else {
        return Ok(Vec::new());
    };
    let list = pairs(&v).map_err(|e| bad(name, e))?;
    for (k, val) in &list {
        HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| bad(name, format!("`{k}` is not a header name")))?;
        // The value is a credential, often: never echoed.
        HeaderValue::from_str(val)
            .map_err(|_| bad(name, format!("the value of `{k}` cannot be a header value")))?;
    }
    Ok(list)
}

/// `common` with `own`'s headers replacing those of the same name.
fn merged(common: &[(String, String)], own: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = common
        .iter()
        .filter(|(k, _)| !own.iter().any(|(o, _)| o.eq_ignore_ascii_case(k)))
        .cloned()
        .collect();
    out.extend(own);
    out
}

/// A duration in milliseconds from `name` (over 0), else `default`.
fn millis(name: &str, default: Duration) -> Result<Duration, Exit> {
    match var(name) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(bad(
                name,
                format!("`{v}` is not a number of milliseconds over 0"),
            )),
        },
    }
}

/// The OpenTelemetry observer of one application context: started the
/// first time an audit stream is made, when the variables set an endpoint.
#[derive(Default)]
pub struct Telemetry {
    /// `Some(None)` once the variables were read and asked for nothing.
    started: Mutex<Option<Option<Arc<Otel>>>>,
}

impl Telemetry {
    fn observer(&self) -> Result<Option<Arc<Otel>>, Exit> {
        let mut started = lock(&self.started);
        if let Some(o) = &*started {
            return Ok(o.clone());
        }
        let otel = match config()? {
            None => None,
            Some(config) => {
                // Failed exports are warnings; make sure they are seen even
                // when the command logs nothing else (a no-op when -v or
                // RUST_LOG set logging up already).
                super::logging::init(tracing_subscriber::EnvFilter::new(
                    "tickbox_telemetry::otel=warn",
                ));
                let otel = Otel::start(config, Box::new(tickbox_app::otlp::HyperPost::default()))
                    .map_err(|e| {
                    Exit::session(format!("cannot start the OTLP exporter: {e}"))
                })?;
                Some(otel)
            }
        };
        *started = Some(otel.clone());
        Ok(otel)
    }
}

impl tickbox_app::Observers for Telemetry {
    fn observers(
        &self,
    ) -> Result<Vec<Arc<dyn tickbox_telemetry::audit::AuditObserver>>, tickbox_app::AppError> {
        match self.observer() {
            Ok(o) => Ok(o
                .into_iter()
                .map(|o| o as Arc<dyn tickbox_telemetry::audit::AuditObserver>)
                .collect()),
            // Worded here, with its exit code kept by the kind.
            Err(e) if e.code == super::exit::USAGE => Err(tickbox_app::AppError::Usage(e.message)),
            Err(e) => Err(tickbox_app::AppError::Session(e.message)),
        }
    }

    /// Gives the exporter its bounded time to send what is left, after
    /// the Ticks have ended.
    fn finish(&self) {
        if let Some(o) = lock(&self.started).clone().flatten() {
            o.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_split_and_percent_decoded() {
        assert_eq!(
            pairs("a=1, b = x%20y ,").unwrap(),
            [
                ("a".to_string(), "1".to_string()),
                ("b".into(), "x y".into())
            ]
        );
        assert!(pairs("novalue").is_err());
        assert!(pairs("a=%zz").is_err());
        // A malformed item is named by its place: it may be a credential.
        let e = pairs("a=1,Authorization: Bearer s3cret").unwrap_err();
        assert_eq!(e, "item 2 is not KEY=VALUE");
    }

    #[test]
    fn a_signal_header_replaces_the_common_one() {
        let common = vec![
            ("Authorization".to_string(), "a".to_string()),
            ("x".into(), "1".into()),
        ];
        let m = merged(&common, vec![("authorization".into(), "b".into())]);
        assert_eq!(
            m,
            [
                ("x".to_string(), "1".to_string()),
                ("authorization".into(), "b".into())
            ]
        );
    }
}
