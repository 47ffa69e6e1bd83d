//! Outgoing HTTP for wasm Ticks: `wasi:http/outgoing-handler` under origin
//! grants.
//!
//! Every component gets `wasi:http/types` and `wasi:http/outgoing-handler`
//! (wasmtime-wasi-http 48), so a component built with the defaults of
//! componentize-js starts; what a request may reach is decided here, per
//! request, by [`HttpPolicy`]:
//!
//! - **origins**: a request goes out only when its scheme, host and port
//!   (the port defaults to 80 or 443 by scheme) equal an origin granted
//!   in `allow_http` ([`Origin`]). The check reads the scheme and
//!   authority the guest gave, not an address the name resolves to, so
//!   `http://localhost:8080` and `http://127.0.0.1:8080` are different
//!   origins; an authority with user info is refused. Everything else
//!   (no grant, another port, host or scheme) fails with the guest-visible
//!   error code `HTTP-request-denied`, never a host error.
//! - **redirects** are the guest's business: the host sends exactly one
//!   request and hands back a 3xx as it came, so a redirect to an origin
//!   that is not granted goes nowhere unless the guest asks for it, and
//!   then that request is checked like any other.
//! - **bounds** (named constants, the same for every Tick): the request
//!   body ([`MAX_REQUEST_BODY`], buffered before sending, refused with
//!   `HTTP-request-body-size`), the response body ([`MAX_RESPONSE_BODY`]:
//!   a declared `content-length` over it fails the request with
//!   `HTTP-response-body-size`, a body that grows past it is cut and its
//!   stream fails; wasmtime-wasi-http 48 hands a body error to the guest
//!   without a code, as an `io-error` whose text names the bound), the connect time including the TLS handshake
//!   ([`CONNECT_TIMEOUT`], `connection-timeout`), the time to the response
//!   head ([`FIRST_BYTE_TIMEOUT`]) and between body chunks
//!   ([`BETWEEN_BYTES_TIMEOUT`]), both `connection-read-timeout`, and the
//!   requests in flight per Tick ([`MAX_CONCURRENT_REQUESTS`],
//!   `connection-limit-reached`). A guest may ask for shorter timeouts with
//!   `request-options`; longer ones are cut to the bounds.
//! - **TLS** is the host's: rustls with the webpki roots (Mozilla's), plus
//!   the PEM certificates of the `http_ca` file for private CAs and tests.
//!   A certificate that does not verify is `TLS-certificate-error`.
//!
//! Only HTTP/1.1 is spoken; there is no proxy support and no connection
//! reuse (each request opens its own connection).
//!
//! **Fixtures** ([`HttpFixtures`], `tickbox test`'s `[[http]]` entries):
//! a start given fixtures ([`crate::launch::LaunchOptions`]) answers every
//! request from them *instead of* the network: no name is looked up and no
//! socket is opened, whatever origins are granted. A request a fixture
//! answers gets that answer as if its origin were granted (the fixture is
//! the grant of a fake answer); one no fixture answers fails with
//! `HTTP-request-denied`, as an ungranted origin would. The request body is
//! still read under [`MAX_REQUEST_BODY`], the requests in flight still
//! count against [`MAX_CONCURRENT_REQUESTS`], and a fixture's body is cut
//! at [`MAX_RESPONSE_BODY`] like a server's.

pub use crate::limits::{
    BETWEEN_BYTES_TIMEOUT, CONNECT_TIMEOUT, FIRST_BYTE_TIMEOUT, MAX_CA_FILE,
    MAX_CONCURRENT_REQUESTS, MAX_REQUEST_BODY, MAX_RESPONSE_BODY,
};
use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use std::future::Future;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HttpScheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS (verified by the host).
    Https,
}

impl HttpScheme {
    fn parse(s: &str) -> Option<HttpScheme> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(HttpScheme::Http),
            "https" => Some(HttpScheme::Https),
            _ => None,
        }
    }

    fn default_port(self) -> u16 {
        match self {
            HttpScheme::Http => 80,
            HttpScheme::Https => 443,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            HttpScheme::Http => "http",
            HttpScheme::Https => "https",
        }
    }
}

/// One granted origin: scheme, host and port, compared exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The scheme.
    pub scheme: HttpScheme,
    /// A lowercase DNS name, or an IP address in its canonical text form
    /// (IPv6 without brackets).
    pub host: String,
    /// The port (the scheme's default when the grant gave none).
    pub port: u16,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(
                f,
                "{}://[{}]:{}",
                self.scheme.as_str(),
                self.host,
                self.port
            )
        } else {
            write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
        }
    }
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Normalizes a host as a request or a grant names it: brackets off, IP
/// addresses in canonical form, names lowercase. None for anything that is
/// neither an IP address nor a DNS name.
fn normal_host(host: &str) -> Option<String> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ip.to_canonical().to_string());
    }
    let name_like = !bare.is_empty()
        && bare.len() <= 253
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    name_like.then(|| bare.to_ascii_lowercase())
}

/// Parses an `allow_http` origin: `http[s]://HOST[:PORT]`, with at most a
/// trailing `/`; no path, query, user info or wildcard.
pub fn parse_origin(spec: &str) -> Result<Origin, String> {
    let (scheme, rest) = spec
        .split_once("://")
        .ok_or("expected http://HOST[:PORT] or https://HOST[:PORT]")?;
    let scheme = HttpScheme::parse(scheme).ok_or("the scheme must be http or https")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#', '@']) {
        return Err("an origin is scheme://host[:port], without path, query or user".into());
    }
    if rest.contains('*') {
        return Err("grant origins one at a time: wildcards are not accepted".into());
    }
    // `[v6]:port`, `[v6]`, `host:port`, `host`.
    let (host, port) = if let Some(after) = rest.strip_prefix('[') {
        let (h, tail) = after
            .split_once(']')
            .ok_or("an IPv6 address is written [ADDRESS]")?;
        match tail {
            "" => (h, None),
            t => (
                h,
                Some(
                    t.strip_prefix(':')
                        .ok_or("expected :PORT after [ADDRESS]")?,
                ),
            ),
        }
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        }
    };
    let port = match port {
        None => scheme.default_port(),
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or("the port must be 1-65535")?,
    };
    let host = normal_host(host).ok_or("the host is neither an IP address nor a DNS name")?;
    if host
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified() || ip.is_multicast())
    {
        return Err("the unspecified or a multicast address is not a host".into());
    }
    Ok(Origin { scheme, host, port })
}

/// The origin a request is addressed to, read from the scheme and
/// authority the guest gave; None when it cannot be an allowed one
/// (another scheme, user info, no host).
fn origin_of(uri: &http::Uri) -> Option<Origin> {
    let scheme = HttpScheme::parse(uri.scheme_str()?)?;
    let authority = uri.authority()?;
    if authority.as_str().contains('@') {
        return None;
    }
    let host = normal_host(authority.host())?;
    let port = match authority.port() {
        Some(p) => p.as_u16(),
        None => scheme.default_port(),
    };
    Some(Origin { scheme, host, port })
}

/// Reads the PEM certificates of an `http_ca` file (at most
/// [`MAX_CA_FILE`] bytes, at least one certificate).
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    use std::io::Read;
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CA_FILE + 1).read_to_end(&mut pem))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if pem.len() as u64 > MAX_CA_FILE {
        return Err(format!(
            "{} is larger than {MAX_CA_FILE} bytes",
            path.display()
        ));
    }
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// The TLS client configuration (`tickbox_trust::tls`): webpki roots plus
/// `extra` CAs, a refused CA named as the `http_ca` grant's.
fn tls_config(extra: Vec<CertificateDer<'static>>) -> Result<rustls::ClientConfig, String> {
    tickbox_trust::tls::client_config(extra).map_err(|e| match e {
        tickbox_trust::tls::TlsError::Ca(_) => format!("http_ca: {e}"),
        _ => e.to_string(),
    })
}

/// A request as a fixture sees it: what the guest asked for, parsed the
/// way the origin check parses it.
#[derive(Debug, Clone, Copy)]
pub struct FixtureRequest<'a> {
    /// The method, as sent (`GET`, `POST`, ...).
    pub method: &'a str,
    /// The whole URL the guest gave (scheme, authority, path and query).
    /// The guest chose it: escape it before showing it to anyone.
    pub url: &'a str,
    /// Its origin, normalized as for `allow_http` (default port filled
    /// in, host lowercase); `None` when it cannot be one (another scheme,
    /// user info, no host).
    pub origin: Option<&'a Origin>,
    /// The path and query (`/` when the guest gave none).
    pub path_and_query: &'a str,
}

/// A canned answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureResponse {
    /// The status code (100-999, else the guest gets an internal error).
    pub status: u16,
    /// Header names and values, in order (an invalid one fails the request
    /// with an internal error rather than being dropped silently).
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Bytes,
}

/// Answers a wasm Tick's `wasi:http` requests in place of the network (see
/// the module docs). Whoever supplies it decides the matching and keeps
/// note of requests it did not answer (`tickbox test` fails the step that
/// made one).
pub trait HttpFixtures: Send + Sync {
    /// The answer to `request`, or `None`: the guest then gets
    /// `HTTP-request-denied` and nothing is sent anywhere.
    fn answer(&self, request: &FixtureRequest<'_>) -> Option<FixtureResponse>;
}

/// What one Tick's requests may reach and how many may be in flight.
pub struct HttpPolicy {
    origins: Vec<Origin>,
    tls: Option<Arc<rustls::ClientConfig>>,
    permits: Arc<Semaphore>,
    /// When set, the only source of answers: see the module docs.
    fixtures: Option<Arc<dyn HttpFixtures>>,
}

impl HttpPolicy {
    /// The policy for these origins; `ca` is the `http_ca` file, if any.
    /// The TLS configuration is built only when an `https` origin is granted.
    pub fn new(origins: Vec<Origin>, ca: Option<&Path>) -> Result<HttpPolicy, String> {
        let tls = if origins.iter().any(|o| o.scheme == HttpScheme::Https) {
            let extra = match ca {
                Some(p) => read_ca_file(p)?,
                None => Vec::new(),
            };
            Some(Arc::new(tls_config(extra)?))
        } else {
            None
        };
        Ok(HttpPolicy {
            origins,
            tls,
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT_REQUESTS)),
            fixtures: None,
        })
    }

    /// The policy that answers every request from `fixtures` and sends
    /// nothing to the network (no origin is reached, no TLS is set up).
    pub fn fixtures_only(fixtures: Arc<dyn HttpFixtures>) -> HttpPolicy {
        HttpPolicy {
            origins: Vec::new(),
            tls: None,
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT_REQUESTS)),
            fixtures: Some(fixtures),
        }
    }

    /// The granted origin this URI addresses, if any.
    pub fn allowed(&self, uri: &http::Uri) -> Option<Origin> {
        origin_of(uri).filter(|o| self.origins.contains(o))
    }
}

/// The `wasi:http` hooks of one Tick: every request goes through
/// [`HttpPolicy`].
pub struct Hooks {
    policy: Arc<HttpPolicy>,
    /// Where a request to an origin not granted is recorded.
    audit: Option<tickbox_telemetry::audit::Audit>,
}

impl Hooks {
    /// Hooks enforcing `policy`.
    pub fn new(policy: HttpPolicy) -> Hooks {
        Hooks {
            policy: Arc::new(policy),
            audit: None,
        }
    }

    /// Records each request refused for its origin in `audit`.
    pub fn audited(mut self, audit: Option<tickbox_telemetry::audit::Audit>) -> Hooks {
        self.audit = audit;
        self
    }
}

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;
type SendFuture =
    Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), Error>> + Send>;

impl WasiHttpHooks for Hooks {
    /// Every scheme reaches the origin check, so a scheme that is not
    /// granted is refused like any other origin (`HTTP-request-denied`).
    fn is_supported_scheme(&mut self, _scheme: &http::uri::Scheme) -> bool {
        true
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> SendFuture {
        let policy = self.policy.clone();
        if policy.fixtures.is_some() {
            // Whether a fixture answers is known once `send` has asked
            // them: recorded then, with the URI taken now.
            let audited = self.audit.clone().map(|a| (a, request.uri().clone()));
            return Box::new(async move {
                let sent = send(policy, request, options).await;
                if let Some((audit, uri)) = audited {
                    audit_fixture(&audit, &uri, &sent);
                }
                sent
            });
        }
        // The same check `send` makes, here where the audit handle is: the
        // refusal is recorded with the URI the guest asked for, a use with
        // the granted origin (never the guest's spelling of it).
        if let Some(audit) = &self.audit {
            match policy.allowed(request.uri()) {
                Some(origin) => audit.used(tickbox_telemetry::audit::Use::HttpOrigin {
                    origin: &origin.to_string(),
                    fixture: false,
                }),
                None => {
                    let denied = tickbox_telemetry::audit::DenialKind::HttpOrigin;
                    audit.denied(
                        denied,
                        &request.uri().to_string(),
                        "no allow_http grant names its origin",
                    );
                }
            }
        }
        Box::new(async move { send(policy, request, options).await })
    }

    fn p2_error_from_tls(&mut self, err: &std::io::Error) -> ErrorCode {
        let invalid_cert = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
            .is_some_and(|e| matches!(e, rustls::Error::InvalidCertificate(_)));
        tracing::info!(error = %err, "a TLS handshake failed");
        if invalid_cert {
            ErrorCode::TlsCertificateError
        } else {
            ErrorCode::TlsProtocolError
        }
    }
}

/// Records a request sent to fixtures: a use of its origin when one
/// answered it, a refusal when none did (nothing is granted beside
/// fixtures, so that is the only refusal there is).
fn audit_fixture<T>(
    audit: &tickbox_telemetry::audit::Audit,
    uri: &http::Uri,
    sent: &Result<T, Error>,
) {
    match sent {
        Ok(_) => {
            if let Some(origin) = origin_of(uri) {
                audit.used(tickbox_telemetry::audit::Use::HttpOrigin {
                    origin: &origin.to_string(),
                    fixture: true,
                });
            }
        }
        Err(Error::HttpRequestDenied) => audit.denied(
            tickbox_telemetry::audit::DenialKind::HttpOrigin,
            &uri.to_string(),
            "no HTTP fixture answers it",
        ),
        Err(_) => {}
    }
}

/// The timeouts of one request: the guest's `request-options`, cut to the
/// host's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connect and TLS handshake.
    pub connect: Duration,
    /// To the response head.
    pub first_byte: Duration,
    /// Between body chunks.
    pub between_bytes: Duration,
}

impl Timeouts {
    /// The bounds, or the guest's shorter wishes.
    pub fn of(options: Option<RequestOptions>) -> Timeouts {
        let o = options.unwrap_or_default();
        let cut = |asked: Option<Duration>, bound: Duration| {
            // Zero would make tokio's interval panic; a nanosecond is as good.
            asked
                .map_or(bound, |a| a.min(bound))
                .max(Duration::from_nanos(1))
        };
        Timeouts {
            connect: cut(o.connect_timeout, CONNECT_TIMEOUT),
            first_byte: cut(o.first_byte_timeout, FIRST_BYTE_TIMEOUT),
            between_bytes: cut(o.between_bytes_timeout, BETWEEN_BYTES_TIMEOUT),
        }
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Reads a request body under [`MAX_REQUEST_BODY`] (a declared length over
/// it is refused without reading a byte).
async fn bounded_body(headers: &http::HeaderMap, body: WasiBody) -> Result<Bytes, Error> {
    if let Some(n) = declared_length(headers).filter(|&n| n > MAX_REQUEST_BODY) {
        tracing::info!(n, "refused an HTTP request body over the bound");
        return Err(Error::HttpRequestBodySize(Some(MAX_REQUEST_BODY)));
    }
    Ok(
        http_body_util::Limited::new(body, MAX_REQUEST_BODY as usize)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    Error::HttpRequestBodySize(Some(MAX_REQUEST_BODY))
                } else {
                    match e.downcast::<Error>() {
                        Ok(e) => *e,
                        Err(e) => Error::InternalError(Some(e.to_string())),
                    }
                }
            })?
            .to_bytes(),
    )
}

/// Answers one request from fixtures: nothing leaves the host.
async fn answer_from(
    fixtures: &dyn HttpFixtures,
    permits: &Arc<Semaphore>,
    request: http::Request<WasiBody>,
) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
    let Ok(permit) = permits.clone().try_acquire_owned() else {
        return Err(Error::ConnectionLimitReached);
    };
    let (parts, body) = request.into_parts();
    // Read (and bound) the body as a server would, so a guest that writes
    // one behaves as it does against the network; the fixture ignores it.
    bounded_body(&parts.headers, body).await?;
    let url = parts.uri.to_string();
    let origin = origin_of(&parts.uri);
    let asked = FixtureRequest {
        method: parts.method.as_str(),
        url: &url,
        origin: origin.as_ref(),
        path_and_query: parts.uri.path_and_query().map_or("/", |p| p.as_str()),
    };
    let Some(fixed) = fixtures.answer(&asked) else {
        tracing::info!(method = %parts.method, url = %url, "no HTTP fixture answers a request; refused");
        return Err(Error::HttpRequestDenied);
    };
    let bad = |what: String| Error::InternalError(Some(format!("HTTP fixture: {what}")));
    let mut response = http::Response::builder().status(
        http::StatusCode::from_u16(fixed.status)
            .map_err(|_| bad(format!("status {}", fixed.status)))?,
    );
    for (name, value) in &fixed.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad(format!("header name {name:?}")))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| bad(format!("the value of header {name}")))?;
        response = response.header(name, value);
    }
    let mut body = fixed.body;
    if body.len() as u64 > MAX_RESPONSE_BODY {
        tracing::info!("cut an HTTP fixture's body at the bound");
        body.truncate(MAX_RESPONSE_BODY as usize);
    }
    let body = http_body_util::Full::new(body)
        .map_err(|never: std::convert::Infallible| -> Error { match never {} })
        .boxed_unsync();
    let response = response.body(body).map_err(|e| bad(e.to_string()))?;
    let io: IoFuture = Box::new(async move {
        let _slot: OwnedSemaphorePermit = permit;
        Ok(())
    });
    Ok((response, io))
}

/// Sends one request under the policy. Errors are what the guest sees.
async fn send(
    policy: Arc<HttpPolicy>,
    request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
    if let Some(fixtures) = &policy.fixtures {
        return answer_from(fixtures.as_ref(), &policy.permits, request).await;
    }
    let Some(origin) = policy.allowed(request.uri()) else {
        tracing::info!(uri = %request.uri(), "refused an HTTP request to an origin that was not granted");
        return Err(Error::HttpRequestDenied);
    };
    let Ok(permit) = policy.permits.clone().try_acquire_owned() else {
        tracing::info!(%origin, "refused an HTTP request: {MAX_CONCURRENT_REQUESTS} in flight");
        return Err(Error::ConnectionLimitReached);
    };
    let timeouts = Timeouts::of(options);

    // The body, bounded, before connecting: a declared length over the
    // bound is refused without reading a byte.
    let (mut parts, body) = request.into_parts();
    let body = bounded_body(&parts.headers, body).await?;
    // The request line carries only the path: the authority went into
    // `Host` (wasmtime-wasi-http sets it from the guest's authority).
    parts.uri = http::Uri::builder()
        .path_and_query(
            parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string(),
        )
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    let request = http::Request::from_parts(parts, http_body_util::Full::new(body));

    // Connect, and shake hands, within one deadline.
    let deadline = tokio::time::Instant::now() + timeouts.connect;
    let stream = tokio::time::timeout_at(
        deadline,
        tokio::net::TcpStream::connect((origin.host.as_str(), origin.port)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)?
    .map_err(Error::Connect)?;
    let stream: Box<dyn Stream> = match origin.scheme {
        HttpScheme::Http => Box::new(stream),
        HttpScheme::Https => {
            let config = policy
                .tls
                .clone()
                .ok_or_else(|| Error::InternalError(Some("no TLS configuration".into())))?;
            let name = ServerName::try_from(origin.host.as_str())
                .map_err(|_| Error::HttpRequestUriInvalid)?
                .to_owned();
            let tls = tokio::time::timeout_at(
                deadline,
                tokio_rustls::TlsConnector::from(config).connect(name, stream),
            )
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, conn) = tokio::time::timeout_at(
        deadline,
        hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // Wait for the response head while driving the connection.
    let mut conn = Some(conn);
    type Sent = Result<
        Result<http::Response<hyper::body::Incoming>, hyper::Error>,
        tokio::time::error::Elapsed,
    >;
    let head = |sent: Sent| -> Result<http::Response<hyper::body::Incoming>, Error> {
        sent.map_err(|_| Error::ConnectionReadTimeout)?
            .map_err(Error::from)
    };
    let response = {
        let send = tokio::time::timeout(timeouts.first_byte, sender.send_request(request));
        let mut send = std::pin::pin!(send);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(sent) = send.as_mut().poll(cx) {
                return Poll::Ready(head(sent));
            }
            if let Some(c) = conn.as_mut() {
                if let Poll::Ready(done) = Pin::new(c).poll(cx) {
                    conn = None;
                    // The connection ended: the response is ready now or
                    // never will be.
                    if let Err(e) = done {
                        return Poll::Ready(Err(Error::from(e)));
                    }
                    return match send.as_mut().poll(cx) {
                        Poll::Ready(sent) => Poll::Ready(head(sent)),
                        Poll::Pending => Poll::Ready(Err(Error::HttpResponseIncomplete)),
                    };
                }
            }
            Poll::Pending
        })
        .await?
    };
    drop(sender);
    if let Some(n) = declared_length(response.headers()).filter(|&n| n > MAX_RESPONSE_BODY) {
        tracing::info!(%origin, n, "refused an HTTP response body over the bound");
        return Err(Error::HttpResponseBodySize(Some(n)));
    }
    let response = response.map(|incoming| {
        BoundedBody {
            incoming,
            read: 0,
            between_bytes: timeouts.between_bytes,
            idle: Box::pin(tokio::time::sleep(timeouts.between_bytes)),
        }
        .boxed_unsync()
    });
    // The connection (and the Tick's slot) lives until the body is done or
    // dropped; wasmtime-wasi-http keeps this future with the body.
    let io: IoFuture = Box::new(async move {
        let _slot: OwnedSemaphorePermit = permit;
        match conn {
            Some(c) => c.await.map_err(Error::from),
            None => Ok(()),
        }
    });
    Ok((response, io))
}

/// A `content-length` header's value, if there is exactly one valid one.
fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(http::header::CONTENT_LENGTH).iter();
    let v = values.next()?;
    if values.next().is_some() {
        return None;
    }
    v.to_str().ok()?.parse().ok()
}

/// A response body cut at [`MAX_RESPONSE_BODY`] and at the between-bytes
/// timeout.
struct BoundedBody {
    incoming: hyper::body::Incoming,
    read: u64,
    between_bytes: Duration,
    idle: Pin<Box<tokio::time::Sleep>>,
}

impl Body for BoundedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.read = self.read.saturating_add(data.len() as u64);
                    if self.read > MAX_RESPONSE_BODY {
                        tracing::info!("cut an HTTP response body at the bound");
                        return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(
                            MAX_RESPONSE_BODY,
                        )))));
                    }
                }
                let next = tokio::time::Instant::now() + self.between_bytes;
                self.idle.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.idle.as_mut().poll(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn origins_parse_with_default_ports() {
        let o = parse_origin("https://API.Example.com").unwrap();
        assert_eq!(o.to_string(), "https://api.example.com:443");
        assert_eq!(
            parse_origin("http://127.0.0.1:8080/").unwrap().to_string(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            parse_origin("http://[::1]:9").unwrap().to_string(),
            "http://[::1]:9"
        );
        assert_eq!(parse_origin("http://[::1]").unwrap().port, 80);
        for bad in [
            "api.example.com",
            "ftp://example.com",
            "https://example.com/path",
            "https://user@example.com",
            "https://example.com?q",
            "https://*.example.com",
            "https://example.com:0",
            "https://example.com:99999",
            "https://",
            "http://0.0.0.0:80",
            "http://a b:1",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn requests_match_scheme_host_and_port_exactly() {
        let p = HttpPolicy::new(
            vec![
                parse_origin("http://127.0.0.1:8080").unwrap(),
                parse_origin("https://api.example.com").unwrap(),
            ],
            None,
        )
        .unwrap();
        let ok = |s: &str| p.allowed(&uri(s)).is_some();
        assert!(ok("http://127.0.0.1:8080/x?y"));
        assert!(ok("https://API.example.com/"));
        assert!(ok("https://api.example.com:443/"));
        assert!(!ok("http://127.0.0.1:8081/"), "another port");
        assert!(
            !ok("http://localhost:8080/"),
            "another spelling of the host"
        );
        assert!(!ok("https://127.0.0.1:8080/"), "another scheme");
        assert!(!ok("http://api.example.com:443/"), "another scheme");
        assert!(!ok("https://api.example.com.evil.org/"));
        assert!(!ok("http://user@127.0.0.1:8080/"), "user info");
    }

    /// The host's own first-byte bound (no guest option), under paused time:
    /// a loopback server that accepts and never answers.
    #[tokio::test(start_paused = true)]
    async fn a_silent_server_hits_the_first_byte_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let (conn, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
            drop(conn);
        });
        let origin = format!("http://127.0.0.1:{port}");
        let policy = Arc::new(HttpPolicy::new(vec![parse_origin(&origin).unwrap()], None).unwrap());
        let request = http::Request::get(format!("{origin}/"))
            .body(
                http_body_util::Empty::<Bytes>::new()
                    .map_err(|never: std::convert::Infallible| -> Error { match never {} })
                    .boxed_unsync(),
            )
            .unwrap();
        let start = tokio::time::Instant::now();
        let err = send(policy.clone(), request, None).await.err().unwrap();
        assert!(matches!(err, Error::ConnectionReadTimeout), "{err}");
        let waited = start.elapsed();
        assert!(
            waited >= FIRST_BYTE_TIMEOUT && waited < FIRST_BYTE_TIMEOUT + CONNECT_TIMEOUT,
            "{waited:?}"
        );
        // Its slot came back.
        assert_eq!(policy.permits.available_permits(), MAX_CONCURRENT_REQUESTS);
        hold.abort();
    }

    struct OneFixture;

    impl HttpFixtures for OneFixture {
        fn answer(&self, r: &FixtureRequest<'_>) -> Option<FixtureResponse> {
            (r.method == "GET" && r.path_and_query == "/hello").then(|| FixtureResponse {
                status: 203,
                headers: vec![("x-fixture".into(), "yes".into())],
                body: Bytes::from_static(b"canned"),
            })
        }
    }

    fn empty_get(url: &str) -> http::Request<WasiBody> {
        http::Request::get(url)
            .body(
                http_body_util::Empty::<Bytes>::new()
                    .map_err(|never: std::convert::Infallible| -> Error { match never {} })
                    .boxed_unsync(),
            )
            .unwrap()
    }

    /// With fixtures, a request to a granted-looking loopback origin is
    /// answered without a connection; an unmatched one is denied. The
    /// listener is the witness: it must see no connection.
    #[tokio::test]
    async fn fixtures_answer_without_a_connection_and_deny_the_rest() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let policy = Arc::new(HttpPolicy::fixtures_only(Arc::new(OneFixture)));
        let (response, io) = send(
            policy.clone(),
            empty_get(&format!("http://127.0.0.1:{port}/hello")),
            None,
        )
        .await
        .unwrap();
        assert_eq!(response.status(), 203);
        assert_eq!(response.headers()["x-fixture"], "yes");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"canned");
        Pin::from(io).await.unwrap();
        let err = send(
            policy.clone(),
            empty_get(&format!("http://127.0.0.1:{port}/other")),
            None,
        )
        .await
        .err()
        .unwrap();
        assert!(matches!(err, Error::HttpRequestDenied), "{err}");
        assert_eq!(policy.permits.available_permits(), MAX_CONCURRENT_REQUESTS);
        let accepted = listener.accept();
        assert!(
            accepted
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
            "a connection reached the listener: {accepted:?}"
        );
        // Positive control: without fixtures, the granted origin is reached.
        let origin = format!("http://127.0.0.1:{port}");
        let real = Arc::new(HttpPolicy::new(vec![parse_origin(&origin).unwrap()], None).unwrap());
        let sent = tokio::spawn(send(real, empty_get(&format!("{origin}/hello")), None));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            match listener.accept() {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < deadline, "no connection came");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
        sent.abort();
    }

    #[test]
    fn guest_timeouts_are_cut_to_the_bounds() {
        assert_eq!(
            Timeouts::of(None),
            Timeouts {
                connect: CONNECT_TIMEOUT,
                first_byte: FIRST_BYTE_TIMEOUT,
                between_bytes: BETWEEN_BYTES_TIMEOUT
            }
        );
        let t = Timeouts::of(Some(RequestOptions {
            connect_timeout: Some(Duration::from_secs(3600)),
            first_byte_timeout: Some(Duration::from_millis(5)),
            between_bytes_timeout: Some(Duration::ZERO),
        }));
        assert_eq!(t.connect, CONNECT_TIMEOUT);
        assert_eq!(t.first_byte, Duration::from_millis(5));
        assert_eq!(t.between_bytes, Duration::from_nanos(1));
    }
}
