//! OTLP's JSON encoding: spans and the aggregated metrics as the
//! `Export*ServiceRequest` bodies a collector takes. Every string in
//! them was cut and escaped when its span or series was made; the whole
//! body passes [`text::json_safe`] once more here.

use super::endpoint::OtelConfig;
use super::{now_nanos, Capped, Hist, Inner, SpanRecord, MCP_SESSION_SECONDS_BUCKETS};
use crate::metrics::CALL_SECONDS_BUCKETS;
use crate::util::lock;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use tickbox_protocol::text;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// OTLP/JSON attributes (`KeyValue`s).
fn attributes(attrs: &[(&str, Value)]) -> Value {
    Value::Array(
        attrs
            .iter()
            .map(|(k, v)| {
                let value = match v {
                    Value::Bool(b) => json!({"boolValue": b}),
                    Value::Number(n) if n.is_i64() || n.is_u64() => {
                        json!({"intValue": n.to_string()})
                    }
                    Value::Number(n) => json!({"doubleValue": n.as_f64()}),
                    Value::String(s) => json!({"stringValue": s}),
                    other => json!({"stringValue": other.to_string()}),
                };
                json!({"key": k, "value": value})
            })
            .collect(),
    )
}

/// The resource and scope every request carries.
fn resource(config: &OtelConfig) -> Value {
    let attrs: Vec<(&str, Value)> = config
        .resource
        .iter()
        .map(|(k, v)| (k.as_str(), json!(v)))
        .collect();
    json!({"attributes": attributes(&attrs)})
}

fn scope() -> Value {
    json!({"name": "tickbox", "version": env!("CARGO_PKG_VERSION")})
}

/// An `ExportTraceServiceRequest` for `spans`, as OTLP/JSON.
pub(super) fn traces_body(config: &OtelConfig, spans: &[SpanRecord]) -> Vec<u8> {
    let spans: Vec<Value> = spans
        .iter()
        .map(|s| {
            let mut v = json!({
                "traceId": hex(&s.trace),
                "spanId": hex(&s.id),
                "name": s.name,
                "kind": s.kind,
                "startTimeUnixNano": s.start.to_string(),
                "endTimeUnixNano": s.end.to_string(),
                "attributes": attributes(&s.attrs),
                "status": match &s.error {
                    Some(m) => json!({"code": 2, "message": m}),
                    None => json!({"code": 0}),
                },
            });
            if let Some(p) = s.parent {
                v["parentSpanId"] = json!(hex(&p));
            }
            if let Some((t, p)) = s.link {
                v["links"] = json!([{"traceId": hex(&t), "spanId": hex(&p)}]);
            }
            v
        })
        .collect();
    let body = json!({"resourceSpans": [{
        "resource": resource(config),
        "scopeSpans": [{"scope": scope(), "spans": spans}],
    }]});
    // Every string was escaped already; the wall runs once more on the
    // whole body, so nothing unsafe can reach a collector's UI raw.
    text::json_safe(&body.to_string()).into_bytes()
}

/// An `ExportMetricsServiceRequest` of everything aggregated so far
/// (cumulative), as OTLP/JSON.
pub(super) fn metrics_body(inner: &Inner) -> Vec<u8> {
    let now = now_nanos().to_string();
    let since = inner.since.to_string();
    let point = |attrs: Vec<(&'static str, Value)>| json!({"attributes": attributes(&attrs), "startTimeUnixNano": since, "timeUnixNano": now});
    let hist_points = |c: &Capped<Hist>, bounds: &[f64]| -> Vec<Value> {
        c.each()
            .map(|(attrs, h)| {
                let mut p = point(attrs);
                p["count"] = json!(h.count.to_string());
                p["sum"] = json!(h.sum);
                p["min"] = json!(h.min);
                p["max"] = json!(h.max);
                p["bucketCounts"] = json!(h.buckets.iter().map(u64::to_string).collect::<Vec<_>>());
                p["explicitBounds"] = json!(bounds);
                p
            })
            .collect()
    };
    let int_points = |c: &Capped<u64>| -> Vec<Value> {
        c.each()
            .map(|(attrs, n)| {
                let mut p = point(attrs);
                p["asInt"] = json!(n.to_string());
                p
            })
            .collect()
    };
    let histogram = |name: &str, description: &str, points: Vec<Value>| {
        json!({"name": name, "unit": "s", "description": description,
               "histogram": {"aggregationTemporality": 2, "dataPoints": points}})
    };
    let sum = |name: &str, unit: &str, description: &str, monotonic: bool, points: Vec<Value>| {
        json!({"name": name, "unit": unit, "description": description,
               "sum": {"aggregationTemporality": 2, "isMonotonic": monotonic, "dataPoints": points}})
    };
    let mut metrics = Vec::new();
    {
        let a = lock(&inner.aggregates);
        metrics.push(histogram(
            "mcp.server.operation.duration",
            "MCP request duration as observed on the server, for every tools/call request.",
            hist_points(&a.mcp, &CALL_SECONDS_BUCKETS),
        ));
        metrics.push(histogram(
            "mcp.server.session.duration",
            "The duration of the MCP session as observed on the MCP server, recorded when it ends.",
            hist_points(&a.mcp_sessions, &MCP_SESSION_SECONDS_BUCKETS),
        ));
        metrics.push(histogram(
            "tickbox.call.duration",
            "How long tool calls took, from sending to the outcome, by tool and outcome.",
            hist_points(&a.calls, &CALL_SECONDS_BUCKETS),
        ));
        metrics.push(sum(
            "tickbox.refusals",
            "{refusal}",
            "What Ticks attempted and the host refused, by kind.",
            true,
            int_points(&a.refusals),
        ));
        metrics.push(sum(
            "tickbox.limits",
            "{limit}",
            "Times a Tick ran into a bound, by bound.",
            true,
            int_points(&a.limits),
        ));
        let live: Vec<Value> = a
            .live
            .each()
            .map(|(attrs, n)| {
                let mut p = point(attrs);
                p["asInt"] = json!((*n).to_string());
                p
            })
            .collect();
        metrics.push(sum(
            "tickbox.ticks.live",
            "{tick}",
            "Tick sessions running.",
            false,
            live,
        ));
    }
    let mut dropped = point(vec![("tickbox.telemetry.signal", json!("spans"))]);
    dropped["asInt"] = json!(inner.dropped.load(Ordering::Relaxed).to_string());
    metrics.push(sum(
        "tickbox.telemetry.dropped",
        "{span}",
        "Spans dropped because the export queue was full (a slow or stopped receiver).",
        true,
        vec![dropped],
    ));
    let body = json!({"resourceMetrics": [{
        "resource": resource(&inner.config),
        "scopeMetrics": [{"scope": scope(), "metrics": metrics}],
    }]});
    text::json_safe(&body.to_string()).into_bytes()
}
