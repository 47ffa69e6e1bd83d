//! The distribution API over HTTP/1.1: one connection per request (pulls
//! are a few requests; keeping connections would buy little and cost
//! state), every wait and every body bounded ([`crate::limits`]).
//!
//! Plain HTTP only to a loopback registry or one the person named insecure
//! ([`crate::RegistryConfig::insecure`]), and even there HTTPS is tried first (as Docker
//! does), falling back to plain HTTP when the TLS handshake fails;
//! elsewhere HTTPS only, verified against the webpki roots plus a CA file
//! when one is given. Credentials never follow a redirect to another host.
//!
//! Each wait has its own bound (connect, the answer's head, each piece of
//! a body), and every request also has a total [`Deadline`] by its kind
//! (token, manifest, blob): a registry that sends one byte just inside
//! each per-read bound still cannot keep a pull waiting past it.

use crate::error::RegistryError;
use crate::limits::{CONNECT_TIMEOUT, MAX_ERROR_BYTES, RESPONSE_TIMEOUT, STALL_TIMEOUT};
use crate::reference::{is_loopback_host, Authority, Host};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What a request is for, which picks its total deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A bearer token from the registry's token service.
    Token,
    /// A manifest, an index or a referrers list (GET or PUT).
    Manifest,
    /// A blob (GET with its redirects, or an upload's HEAD, POST and PUT).
    Blob,
}

impl Kind {
    /// The constant in [`crate::limits`] that bounds it by default.
    pub fn bound(self) -> &'static str {
        match self {
            Kind::Token => "TOKEN_DEADLINE",
            Kind::Manifest => "MANIFEST_DEADLINE",
            Kind::Blob => "BLOB_DEADLINE",
        }
    }

    /// What it is, in a message.
    pub fn what(self) -> &'static str {
        match self {
            Kind::Token => "a token request",
            Kind::Manifest => "a manifest request",
            Kind::Blob => "a blob request",
        }
    }
}

/// When a request must be over, from its first connect to the last byte
/// of its answer.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
    kind: Kind,
}

impl Deadline {
    /// `limit` from now, for a request of `kind`.
    pub fn new(kind: Kind, limit: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + limit,
            limit,
            kind,
        }
    }

    /// The earlier of the two (a token fetched inside a manifest request
    /// ends by both deadlines).
    pub fn min(self, other: Deadline) -> Deadline {
        if other.at < self.at {
            other
        } else {
            self
        }
    }

    /// The error when it has passed.
    pub fn passed(&self, host: &str) -> RegistryError {
        RegistryError::Deadline {
            host: host.to_string(),
            what: self.kind.what(),
            limit: self.limit,
            bound: self.kind.bound(),
        }
    }
}

/// Waits for `fut` until `step_at` (the bound of this one wait, named
/// `step` in its error) and never past `deadline`; the error names
/// whichever bound ran out.
async fn within<F: Future>(
    fut: F,
    step_at: Instant,
    step: (Duration, &'static str),
    deadline: &Deadline,
    host: &str,
) -> Result<F::Output, RegistryError> {
    if deadline.at <= step_at {
        tokio::time::timeout_at(deadline.at, fut)
            .await
            .map_err(|_| deadline.passed(host))
    } else {
        tokio::time::timeout_at(step_at, fut)
            .await
            .map_err(|_| RegistryError::Timeout {
                host: host.to_string(),
                secs: step.0.as_secs(),
                what: step.1,
            })
    }
}

/// Where a request goes: scheme, host, port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub https: bool,
    /// Plain HTTP is allowed (loopback or named insecure): HTTPS is tried
    /// first, plain HTTP when TLS fails.
    pub plain_ok: bool,
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// `Host:` header value (an IPv6 address in brackets).
    pub fn authority(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// An absolute URL of this endpoint: `http(s)://host[:port]`.
    pub fn origin(&self) -> String {
        format!(
            "{}://{}",
            if self.https { "https" } else { "http" },
            self.authority()
        )
    }
}

/// A registry named insecure: a host (any port) or a host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Insecure {
    Host(Host),
    At(Authority),
    /// Not a host tickbox parses: compared as written (lowercase).
    Raw(String),
}

impl Insecure {
    fn parse(s: &str) -> Insecure {
        // `HOST` and `[V6]` name every port; `HOST:PORT` and `[V6]:PORT` one.
        let has_port = match s.rfind(']') {
            Some(end) => s[end..].contains(':'),
            None => s.contains(':'),
        };
        let parsed = if has_port {
            Authority::parse(s).map(Insecure::At)
        } else {
            Host::parse(s).map(Insecure::Host)
        };
        parsed.unwrap_or_else(|_| Insecure::Raw(s.to_ascii_lowercase()))
    }

    fn covers(&self, host: &str, port: u16) -> bool {
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        match self {
            Insecure::Host(h) => Host::parse(&bracketed).is_ok_and(|x| x == *h),
            Insecure::At(a) => {
                Authority::parse(&format!("{bracketed}:{port}")).is_ok_and(|x| x == *a)
            }
            Insecure::Raw(r) => {
                let host = host.to_ascii_lowercase();
                *r == host || *r == format!("{host}:{port}")
            }
        }
    }
}

/// The connection policy: which hosts may be plain HTTP, which roots TLS
/// trusts.
pub struct Transport {
    insecure: Vec<Insecure>,
    tls: Arc<rustls::ClientConfig>,
    /// Hosts allowed plain HTTP that turned out to speak it.
    plain: std::sync::Mutex<std::collections::HashSet<(String, u16)>>,
}

/// An answer whose body has not been read yet.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: Incoming,
    host: String,
    deadline: Deadline,
}

impl Transport {
    /// `insecure`: hosts (`HOST` or `HOST:PORT`, any spelling of them)
    /// allowed plain HTTP besides loopback; `extra_roots`: PEM certificates
    /// trusted besides the webpki roots.
    pub fn new(
        insecure: Vec<String>,
        extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    ) -> Result<Transport, String> {
        let config = tickbox_trust::tls::client_config(extra_roots).map_err(|e| e.to_string())?;
        Ok(Transport {
            insecure: insecure.iter().map(|s| Insecure::parse(s)).collect(),
            tls: Arc::new(config),
            plain: Default::default(),
        })
    }

    /// The endpoint of a registry: plain HTTP where allowed, HTTPS
    /// otherwise.
    pub fn endpoint(&self, registry: &Authority) -> Endpoint {
        let host = registry.host().dial();
        let port = registry.port();
        Endpoint {
            https: true,
            plain_ok: self.plain_ok(&host, port),
            host,
            port,
        }
    }

    fn plain_ok(&self, host: &str, port: u16) -> bool {
        is_loopback_host(host) || self.insecure.iter().any(|i| i.covers(host, port))
    }

    /// The endpoint of an absolute URL a registry sent (a redirect, a token
    /// realm, an upload location), if its scheme is allowed for its host.
    pub fn endpoint_of(&self, uri: &http::Uri) -> Result<(Endpoint, String), RegistryError> {
        let host = uri
            .host()
            .ok_or_else(|| {
                RegistryError::Reference(format!(
                    "a registry sent a URL without a host: {}",
                    tickbox_protocol::text::escape(&uri.to_string())
                ))
            })?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(RegistryError::Reference(format!(
                    "a registry sent a URL that is neither http nor https: {}",
                    tickbox_protocol::text::escape(&uri.to_string())
                )))
            }
        };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        if !https && !self.plain_ok(&host, port) {
            return Err(RegistryError::Insecure { host });
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        // A URL the registry wrote says its scheme: no fallback.
        Ok((
            Endpoint {
                https,
                plain_ok: false,
                host,
                port,
            },
            path,
        ))
    }

    /// Sends one request and waits for the head of its answer; where plain
    /// HTTP is allowed and TLS fails, sends it again in plain HTTP and
    /// remembers that for the host.
    pub async fn send(
        &self,
        to: &Endpoint,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
        deadline: &Deadline,
    ) -> Result<Answer, RegistryError> {
        let key = (to.host.clone(), to.port);
        let known_plain = to.plain_ok && lock(&self.plain).contains(&key);
        if to.https && !known_plain {
            match self
                .send_once(to, method.clone(), path, headers, body.clone(), deadline)
                .await
            {
                Err(RegistryError::Connect { why, .. })
                    if to.plain_ok && why.starts_with("TLS") =>
                {
                    tracing::debug!(host = %to.authority(), "TLS failed; plain HTTP to a loopback or insecure registry");
                    lock(&self.plain).insert(key);
                }
                other => return other,
            }
        }
        let plain = Endpoint {
            https: false,
            ..to.clone()
        };
        self.send_once(&plain, method, path, headers, body, deadline)
            .await
    }

    async fn send_once(
        &self,
        to: &Endpoint,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
        deadline: &Deadline,
    ) -> Result<Answer, RegistryError> {
        let host = to.authority();
        let connect = |why: String| RegistryError::Connect {
            host: host.clone(),
            why,
        };
        // Connect, TLS and the HTTP handshake together.
        let connected_by = Instant::now() + CONNECT_TIMEOUT;
        let tcp = within(
            tokio::net::TcpStream::connect((to.host.as_str(), to.port)),
            connected_by,
            (CONNECT_TIMEOUT, "connect"),
            deadline,
            &host,
        )
        .await?
        .map_err(|e| connect(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let request = {
            let mut b = http::Request::builder()
                .method(method)
                .uri(path)
                .header(http::header::HOST, to.authority())
                .header(
                    http::header::USER_AGENT,
                    concat!("tickbox/", env!("CARGO_PKG_VERSION")),
                );
            for (k, v) in headers {
                b = b.header(k, v);
            }
            if !body.is_empty() {
                b = b.header(http::header::CONTENT_LENGTH, body.len());
            }
            b.body(Full::new(body))
                .map_err(|e| connect(format!("bad request: {e}")))?
        };
        let answer = if to.https {
            let name = rustls::pki_types::ServerName::try_from(to.host.clone())
                .map_err(|e| connect(e.to_string()))?;
            let tls = within(
                tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp),
                connected_by,
                (CONNECT_TIMEOUT, "TLS handshake"),
                deadline,
                &host,
            )
            .await?
            .map_err(|e| connect(format!("TLS: {e}")))?;
            let io = hyper_util::rt::TokioIo::new(tls);
            exchange(&host, io, request, connected_by, deadline).await?
        } else {
            let io = hyper_util::rt::TokioIo::new(tcp);
            exchange(&host, io, request, connected_by, deadline).await?
        };
        let (parts, body) = answer.into_parts();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            host,
            deadline: *deadline,
        })
    }
}

async fn exchange<T>(
    host: &str,
    io: T,
    request: http::Request<Full<Bytes>>,
    connected_by: Instant,
    deadline: &Deadline,
) -> Result<http::Response<Incoming>, RegistryError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let connect = |why: String| RegistryError::Connect {
        host: host.to_string(),
        why,
    };
    let (mut sender, conn) = within(
        hyper::client::conn::http1::handshake(io),
        connected_by,
        (CONNECT_TIMEOUT, "handshake"),
        deadline,
        host,
    )
    .await?
    .map_err(|e| connect(e.to_string()))?;
    // The connection is driven by its own task; it ends with the body (or
    // when the answer is dropped, at a deadline).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    within(
        sender.send_request(request),
        Instant::now() + RESPONSE_TIMEOUT,
        (RESPONSE_TIMEOUT, "the answer"),
        deadline,
        host,
    )
    .await?
    .map_err(|e| connect(e.to_string()))
}

impl Answer {
    /// The next piece of the body (`None` at its end), waiting at most
    /// [`STALL_TIMEOUT`] and never past the request's deadline.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, RegistryError> {
        loop {
            let frame = within(
                self.body.frame(),
                Instant::now() + STALL_TIMEOUT,
                (STALL_TIMEOUT, "the body stalled"),
                &self.deadline,
                &self.host,
            )
            .await?;
            match frame {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(RegistryError::Connect {
                        host: self.host.clone(),
                        why: e.to_string(),
                    })
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The whole body, refused past `max` bytes (declared or sent).
    pub async fn bytes(
        mut self,
        max: u64,
        what: &str,
        bound: &'static str,
    ) -> Result<Vec<u8>, RegistryError> {
        let too_large = || RegistryError::TooLarge {
            what: what.to_string(),
            bound,
            max,
        };
        if self.declared_length().is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let mut out = Vec::new();
        while let Some(c) = self.chunk().await? {
            if (out.len() + c.len()) as u64 > max {
                return Err(too_large());
            }
            out.extend_from_slice(&c);
        }
        Ok(out)
    }

    /// `Content-Length`, when sent.
    pub fn declared_length(&self) -> Option<u64> {
        self.headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    }

    /// A header as text.
    pub fn header(&self, name: http::header::HeaderName) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_string)
    }

    /// The error this answer is, for `what` (the registry's own message,
    /// from the distribution spec's error body, escaped and bounded).
    pub async fn into_error(self, what: String) -> RegistryError {
        let host = self.host.clone();
        let status = self.status.as_u16();
        let body = self
            .bytes(MAX_ERROR_BYTES, "an error answer", "the error bound")
            .await
            .unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let e = v.get("errors")?.get(0)?;
                let code = e.get("code").and_then(|c| c.as_str()).unwrap_or("");
                let msg = e.get("message").and_then(|c| c.as_str()).unwrap_or("");
                Some(format!("{code} {msg}").trim().to_string())
            })
            .filter(|m| !m.is_empty())
            .map(|m| {
                format!(
                    ": {}",
                    tickbox_protocol::text::escape(tickbox_protocol::text::truncate(&m, 300))
                )
            })
            .unwrap_or_default();
        RegistryError::Status {
            host,
            status,
            what,
            message,
        }
    }
}

/// A mutex's guard, also after a panic elsewhere poisoned it (the guarded
/// maps are caches: any state they hold is usable). The host's
/// `util::lock` in two lines: the registry may not depend on the host, and
/// the one crate both reach besides the protocol, `tickbox-trust`, holds
/// trust checks, not helpers.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insecure_registries_are_compared_canonically() {
        let t = Transport::new(
            vec![
                "Registry.Example:05000".into(),
                "10.0.0.1".into(),
                "[2001:DB8::1]:8080".into(),
            ],
            Vec::new(),
        )
        .unwrap();
        let plain = |host: &str, port| t.plain_ok(host, port);
        assert!(plain("registry.example", 5000));
        assert!(plain("10.0.0.1", 443) && plain("10.0.0.1", 5000));
        assert!(plain("2001:db8::1", 8080));
        // Loopback needs no naming, in any spelling.
        assert!(plain("127.0.0.1", 5000) && plain("LOCALHOST", 5000) && plain("::1", 1));
        // Controls: another port, another host, a look-alike.
        assert!(!plain("registry.example", 5001));
        assert!(!plain("registry.example.evil", 5000));
        assert!(!plain("10.0.0.10", 443));
        assert!(!plain("registry.localhost", 80));
        let e = Endpoint {
            https: true,
            plain_ok: false,
            host: "::1".into(),
            port: 5000,
        };
        assert_eq!(e.authority(), "[::1]:5000");
    }
}
