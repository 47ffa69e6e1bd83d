//! OTLP requests for the OpenTelemetry exporter of `tickbox-telemetry`
//! ([`OtlpPost`]): hyper's own HTTP/1.1 client connection over tokio, no
//! other HTTP stack and no gRPC. Where the requests go and what they carry
//! is the caller's (the CLI reads the standard `OTEL_*` variables); this is
//! only how they are sent, and nothing a receiver answers is shown.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_TYPE, HOST};
use std::time::Duration;
use tickbox_telemetry::otel::{Endpoint, OtlpPost, MAX_OTEL_RESPONSE_BYTES};

/// OTLP requests over HTTP/1.1 with hyper, on a runtime of the exporter
/// thread's own (made at its first request): one connection per request,
/// which at one request per signal per interval costs nothing worth
/// keeping a connection for.
#[derive(Default)]
pub struct HyperPost {
    runtime: Option<tokio::runtime::Runtime>,
}

impl OtlpPost for HyperPost {
    fn post(
        &mut self,
        to: &Endpoint,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<(), String> {
        if self.runtime.is_none() {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot make the exporter's runtime: {e}"))?;
            self.runtime = Some(rt);
        }
        let Some(rt) = &self.runtime else {
            return Err("no runtime".into());
        };
        rt.block_on(async {
            match tokio::time::timeout(timeout, send(to, headers, body)).await {
                Ok(r) => r,
                Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
            }
        })
    }
}

async fn send(to: &Endpoint, headers: &[(String, String)], body: Vec<u8>) -> Result<(), String> {
    let stream = tokio::net::TcpStream::connect((to.host.as_str(), to.port))
        .await
        .map_err(|e| format!("cannot connect to {}:{}: {e}", to.host, to.port))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    let driver = tokio::spawn(connection);
    let authority = if to.host.contains(':') {
        format!("[{}]:{}", to.host, to.port)
    } else {
        format!("{}:{}", to.host, to.port)
    };
    let mut request = hyper::Request::post(to.path.as_str())
        .header(HOST, authority)
        .header(CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        request = request.header(k.as_str(), v.as_str());
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| format!("cannot make the request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("the request failed: {e}"))?;
    let status = response.status();
    // Read (a bounded part of) the answer, and nothing of it is shown: a
    // receiver's text is not the host's to print.
    let _ = Limited::new(response.into_body(), MAX_OTEL_RESPONSE_BYTES)
        .collect()
        .await;
    driver.abort();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered HTTP {}", status.as_u16()))
    }
}
