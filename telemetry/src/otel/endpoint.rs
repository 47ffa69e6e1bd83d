//! Where telemetry goes and how it is sent: the endpoints and headers
//! the CLI reads from the standard `OTEL_*` variables, and the one seam
//! through which a request leaves ([`OtlpPost`], which the CLI implements
//! with hyper's client, so this crate needs no HTTP stack).

use crate::limits::{OTEL_DEFAULT_METRIC_INTERVAL, OTEL_DEFAULT_SPAN_DELAY, OTEL_DEFAULT_TIMEOUT};
use std::time::Duration;

/// Where one signal is sent: an `http://` URL, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as configured (for messages).
    pub url: String,
    /// The host to connect to.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The request target (`/v1/traces`).
    pub path: String,
}

impl Endpoint {
    /// Parses `http://HOST[:PORT][/PATH]`; other schemes are refused with
    /// a one-line reason (the exporter speaks plain HTTP: TLS belongs to a
    /// collector beside the host).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            if url.starts_with("https://") {
                "an https:// endpoint: tickbox exports over plain http:// only (send to a local \
                 OpenTelemetry Collector, which can forward over TLS)"
                    .to_string()
            } else {
                "not an http:// URL".to_string()
            }
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err("no host, or credentials in the URL (give them as headers)".into());
        }
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (h, after) = v6.split_once(']').ok_or("an unclosed [IPv6] host")?;
                let port = match after.strip_prefix(':') {
                    Some(p) => p.parse().map_err(|_| "a bad port")?,
                    None if after.is_empty() => 80,
                    None => return Err("a bad port".into()),
                };
                (h.to_string(), port)
            }
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| "a bad port")?),
                None => (authority.to_string(), 80),
            },
        };
        if !path.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("a path with spaces or non-ASCII characters".into());
        }
        Ok(Endpoint {
            url: url.to_string(),
            host,
            port,
            path: path.to_string(),
        })
    }

    /// `base` (`OTEL_EXPORTER_OTLP_ENDPOINT`) with a signal's path
    /// (`v1/traces`) appended, as the OTLP exporter specification says.
    pub fn with_signal(base: &str, signal: &str) -> Result<Endpoint, String> {
        let sep = if base.ends_with('/') { "" } else { "/" };
        Endpoint::parse(&format!("{base}{sep}{signal}"))
    }
}

/// What to export and where: made by the CLI from the standard variables.
#[derive(Debug, Clone)]
pub struct OtelConfig {
    /// Where spans go (none: no traces).
    pub traces: Option<Endpoint>,
    /// Where metrics go (none: no metrics).
    pub metrics: Option<Endpoint>,
    /// Headers sent with traces (`OTEL_EXPORTER_OTLP_HEADERS` and the
    /// signal's own).
    pub trace_headers: Vec<(String, String)>,
    /// Headers sent with metrics.
    pub metric_headers: Vec<(String, String)>,
    /// Resource attributes (`service.name` among them).
    pub resource: Vec<(String, String)>,
    /// The longest one export request may take.
    pub timeout: Duration,
    /// How long spans wait to be sent in a batch.
    pub span_delay: Duration,
    /// How often metrics are exported.
    pub metric_interval: Duration,
}

impl OtelConfig {
    /// A config sending both signals to `traces` and `metrics` with the
    /// defaults (tests, the bench).
    pub fn new(traces: Option<Endpoint>, metrics: Option<Endpoint>) -> OtelConfig {
        OtelConfig {
            traces,
            metrics,
            trace_headers: Vec::new(),
            metric_headers: Vec::new(),
            resource: vec![("service.name".into(), "tickbox".into())],
            timeout: OTEL_DEFAULT_TIMEOUT,
            span_delay: OTEL_DEFAULT_SPAN_DELAY,
            metric_interval: OTEL_DEFAULT_METRIC_INTERVAL,
        }
    }
}

/// Sends one OTLP request. Runs on the exporter's thread only, so it may
/// block, within `timeout`.
pub trait OtlpPost: Send {
    /// POSTs `body` (OTLP JSON) to `to` with `headers`; `Err` with a
    /// one-line reason when the receiver did not accept it.
    fn post(
        &mut self,
        to: &Endpoint,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<(), String>;
}
