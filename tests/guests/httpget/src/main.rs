//! A Tick that sends `wasi:http` requests, for the origin-grant tests
//! (`cli/tests/it/http.rs`).
//!
//! Tool `get` (mutates: it reaches out) with `url` (`scheme://host[:port]/path`,
//! any scheme), optional `body_bytes` (a body of that many `x`, sent with
//! POST), `first_byte_timeout_ms` (a `request-options` wish) and `count`
//! (that many requests at once, all started before any is awaited). The
//! result is `{status, headers, body_len, body, error}` for one request, or
//! `{results: [...]}` for several; `error` is the wasi:http error code
//! (`HttpRequestDenied`, ...) or, for a failed body stream whose error
//! carries no code, the stream error's text. It follows no redirects.
//!
//! Built for wasm32-wasip2 only in earnest; other targets get a stub that
//! reports so (the guest workspace is built for every target).

use serde_json::{json, Value};
use std::io::Write;

fn descriptor() -> Value {
    json!({"protocol": 3, "kind": "tickbox.httpget", "title": "HTTP get",
           "description": "Sends wasi:http requests.", "revision": "1",
           "tools": [
               {"name": "get", "description": "Send requests and report what came back.",
                "input_schema": {"type": "object", "required": ["url"], "properties": {
                    "url": {"type": "string"},
                    "body_bytes": {"type": "integer", "minimum": 0},
                    "first_byte_timeout_ms": {"type": "integer", "minimum": 0},
                    "count": {"type": "integer", "minimum": 1, "maximum": 64}}},
                "mutates": true}]})
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod client {
    use serde_json::{json, Value};
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, FutureIncomingResponse, Method, OutgoingBody, OutgoingRequest,
        RequestOptions, Scheme,
    };
    use wasip2::io::streams::StreamError;

    /// Body bytes kept in the result.
    const SHOWN: usize = 2048;

    pub struct Args {
        pub url: String,
        pub body_bytes: u64,
        pub first_byte_timeout_ms: Option<u64>,
    }

    fn code(e: &ErrorCode) -> String {
        // `HttpRequestDenied`, `ConnectionReadTimeout`, `HttpResponseBodySize(Some(..))`...
        let s = format!("{e:?}");
        let s = s.strip_prefix("ErrorCode::").unwrap_or(&s);
        s.split('(').next().unwrap_or(s).to_string()
    }

    fn failed(e: String) -> Value {
        json!({"status": null, "body_len": 0, "body": "", "error": e})
    }

    /// Starts one request; Err is the result to report.
    pub fn start(a: &Args) -> Result<FutureIncomingResponse, Value> {
        let (scheme, rest) = a
            .url
            .split_once("://")
            .ok_or_else(|| failed("bad url".into()))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let req = OutgoingRequest::new(Fields::new());
        let scheme = match scheme {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => Scheme::Other(other.to_string()),
        };
        let method = if a.body_bytes > 0 {
            Method::Post
        } else {
            Method::Get
        };
        let ok = req.set_method(&method).is_ok()
            && req.set_scheme(Some(&scheme)).is_ok()
            && req.set_authority(Some(authority)).is_ok()
            && req.set_path_with_query(Some(path)).is_ok();
        if !ok {
            return Err(failed("the request was refused by its setters".into()));
        }
        let body = req.body().map_err(|_| failed("no body".into()))?;
        let options = a.first_byte_timeout_ms.map(|ms| {
            let o = RequestOptions::new();
            let _ = o.set_first_byte_timeout(Some(ms * 1_000_000));
            o
        });
        let future = outgoing_handler::handle(req, options).map_err(|e| failed(code(&e)))?;
        if a.body_bytes > 0 {
            if let Ok(out) = body.write() {
                let chunk = [b'x'; 4096];
                let mut left = a.body_bytes;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    // The host stops taking the body at its bound: the
                    // stream then fails, and the response says why.
                    if out.blocking_write_and_flush(&chunk[..n]).is_err() {
                        break;
                    }
                    left -= n as u64;
                }
            }
        }
        let _ = OutgoingBody::finish(body, None);
        Ok(future)
    }

    /// Waits for one response and reads its body.
    pub fn finish(future: FutureIncomingResponse) -> Value {
        let response = loop {
            if let Some(r) = future.get() {
                break r;
            }
            future.subscribe().block();
        };
        let response = match response {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return failed(code(&e)),
            Err(()) => return failed("the response was taken twice".into()),
        };
        let status = response.status();
        // Response headers, name to value (the last of repeated names).
        let headers: serde_json::Map<String, Value> = response
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| (k, json!(String::from_utf8_lossy(&v))))
            .collect();
        let mut body = Vec::new();
        let mut error = Value::Null;
        if let Ok(incoming) = response.consume() {
            if let Ok(stream) = incoming.stream() {
                loop {
                    match stream.blocking_read(64 * 1024) {
                        Ok(bytes) => body.extend_from_slice(&bytes),
                        Err(StreamError::Closed) => break,
                        Err(StreamError::LastOperationFailed(e)) => {
                            error = json!(match wasip2::http::types::http_error_code(&e) {
                                Some(c) => code(&c),
                                None => e.to_debug_string(),
                            });
                            break;
                        }
                    }
                }
            }
        }
        let shown = String::from_utf8_lossy(&body[..body.len().min(SHOWN)]).into_owned();
        json!({"status": status, "headers": headers, "body_len": body.len(), "body": shown, "error": error})
    }
}

fn get(params: &Value) -> Value {
    #[cfg(all(target_os = "wasi", target_env = "p2"))]
    {
        let args = client::Args {
            url: params["url"].as_str().unwrap_or("").to_string(),
            body_bytes: params["body_bytes"].as_u64().unwrap_or(0),
            first_byte_timeout_ms: params["first_byte_timeout_ms"].as_u64(),
        };
        let count = params["count"].as_u64().unwrap_or(1).clamp(1, 64);
        // All started before any is awaited: they are in flight together.
        let started: Vec<_> = (0..count).map(|_| client::start(&args)).collect();
        let mut results: Vec<Value> = started
            .into_iter()
            .map(|s| match s {
                Ok(f) => client::finish(f),
                Err(v) => v,
            })
            .collect();
        if count == 1 {
            results.remove(0)
        } else {
            json!({ "results": results })
        }
    }
    #[cfg(not(all(target_os = "wasi", target_env = "p2")))]
    {
        let _ = params;
        json!({"error": "httpget needs wasm32-wasip2"})
    }
}

fn main() {
    use std::io::BufRead;
    eprint!("httpget ready\r\n");
    // Blocking reads are fine: this Tick has no timers.
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let Ok(req) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = req.get("id").and_then(Value::as_u64) else {
            continue;
        };
        let params = req.get("params").cloned().unwrap_or(Value::Null);
        let result = match req.get("method").and_then(Value::as_str).unwrap_or("") {
            "tick/describe" => descriptor(),
            "tick/read" => json!({"seq": 0, "data": {}}),
            "tick/call" => get(&params["args"]),
            _ => json!(null),
        };
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        );
        let _ = out.flush();
    }
}
