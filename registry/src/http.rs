//! The distribution API over HTTP/1.1: one connection per request (pulls
//! are a few requests; keeping connections would buy little and cost
//! state), every wait and every body bounded ([`crate::limits`]).
//!
//! Plain HTTP only to a loopback registry or one the person named insecure
//! ([`crate::RegistryConfig::insecure`]), and even there HTTPS is tried first (as Docker
//! does), falling back to plain HTTP when the TLS handshake fails;
//! elsewhere HTTPS only, verified against the webpki roots plus a CA file
//! when one is given. Credentials never follow a redirect to another host.

use crate::error::RegistryError;
use crate::limits::{CONNECT_TIMEOUT, MAX_ERROR_BYTES, RESPONSE_TIMEOUT, STALL_TIMEOUT};
use crate::reference::is_loopback_host;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::sync::Arc;

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
    /// `Host:` header value.
    pub fn authority(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
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

/// The connection policy: which hosts may be plain HTTP, which roots TLS
/// trusts.
pub struct Transport {
    insecure: Vec<String>,
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
}

impl Transport {
    /// `insecure`: hosts (`HOST` or `HOST:PORT`) allowed plain HTTP besides
    /// loopback; `extra_roots`: PEM certificates trusted besides the webpki
    /// roots.
    pub fn new(
        insecure: Vec<String>,
        extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    ) -> Result<Transport, String> {
        let config = tickbox_trust::tls::client_config(extra_roots).map_err(|e| e.to_string())?;
        Ok(Transport {
            insecure,
            tls: Arc::new(config),
            plain: Default::default(),
        })
    }

    /// The endpoint for a registry written `HOST[:PORT]`: plain HTTP where
    /// allowed, HTTPS otherwise.
    pub fn endpoint(&self, host: &str, port: Option<u16>) -> Endpoint {
        let registry = match port {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let plain_ok =
            is_loopback_host(host) || self.insecure.iter().any(|h| *h == registry || *h == host);
        Endpoint {
            https: true,
            plain_ok,
            host: host.to_string(),
            port: port.unwrap_or(443),
        }
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
            .to_string();
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
        let registry = format!("{host}:{port}");
        let plain_ok =
            is_loopback_host(&host) || self.insecure.iter().any(|h| *h == registry || *h == host);
        if !https && !plain_ok {
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
    ) -> Result<Answer, RegistryError> {
        let key = (to.host.clone(), to.port);
        let known_plain = to.plain_ok && lock(&self.plain).contains(&key);
        if to.https && !known_plain {
            match self
                .send_once(to, method.clone(), path, headers, body.clone())
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
        self.send_once(&plain, method, path, headers, body).await
    }

    async fn send_once(
        &self,
        to: &Endpoint,
        method: Method,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Answer, RegistryError> {
        let connect = |why: String| RegistryError::Connect {
            host: to.authority(),
            why,
        };
        let timeout = |what| RegistryError::Timeout {
            host: to.authority(),
            secs: CONNECT_TIMEOUT.as_secs(),
            what,
        };
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let tcp = tokio::time::timeout_at(
            deadline,
            tokio::net::TcpStream::connect((to.host.as_str(), to.port)),
        )
        .await
        .map_err(|_| timeout("connect"))?
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
            let tls = tokio::time::timeout_at(
                deadline,
                tokio_rustls::TlsConnector::from(self.tls.clone()).connect(name, tcp),
            )
            .await
            .map_err(|_| timeout("TLS handshake"))?
            .map_err(|e| connect(format!("TLS: {e}")))?;
            exchange(to, hyper_util::rt::TokioIo::new(tls), request, deadline).await?
        } else {
            exchange(to, hyper_util::rt::TokioIo::new(tcp), request, deadline).await?
        };
        let (parts, body) = answer.into_parts();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
            host: to.authority(),
        })
    }
}

async fn exchange<T>(
    to: &Endpoint,
    io: T,
    request: http::Request<Full<Bytes>>,
    deadline: tokio::time::Instant,
) -> Result<http::Response<Incoming>, RegistryError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let connect = |why: String| RegistryError::Connect {
        host: to.authority(),
        why,
    };
    let (mut sender, conn) =
        tokio::time::timeout_at(deadline, hyper::client::conn::http1::handshake(io))
            .await
            .map_err(|_| RegistryError::Timeout {
                host: to.authority(),
                secs: CONNECT_TIMEOUT.as_secs(),
                what: "handshake",
            })?
            .map_err(|e| connect(e.to_string()))?;
    // The connection is driven by its own task; it ends with the body.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    tokio::time::timeout(RESPONSE_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| RegistryError::Timeout {
            host: to.authority(),
            secs: RESPONSE_TIMEOUT.as_secs(),
            what: "the answer",
        })?
        .map_err(|e| connect(e.to_string()))
}

impl Answer {
    /// The next piece of the body (`None` at its end), waiting at most
    /// [`STALL_TIMEOUT`].
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, RegistryError> {
        loop {
            let frame = tokio::time::timeout(STALL_TIMEOUT, self.body.frame())
                .await
                .map_err(|_| RegistryError::Timeout {
                    host: self.host.clone(),
                    secs: STALL_TIMEOUT.as_secs(),
                    what: "the body stalled",
                })?;
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
