//! A small blocking HTTP client for tools: [`get`] and [`post`].
//!
//! In `wasm32-wasip2` it speaks `wasi:http/outgoing-handler`: the host
//! (tickbox) sends the request, does TLS, and lets it through only to
//! origins the user granted with `--allow-http https://api.example.com`;
//! anything else comes back as [`Error::Code`] with the wasi:http error code
//! (`HTTP-request-denied` without a grant). The host follows no redirects:
//! a 3xx is a [`Response`] like any other. Natively (where a Tick runs with
//! the user's permissions) it sends plain `http://` requests over a TCP
//! connection; `https://` needs the wasm build.
//!
//! The call blocks the Tick until the response is read: fine for a quick
//! request from a tool. Keep [`Request::max_body`] small, since the body is
//! kept in memory.
//!
//! ```no_run
//! # fn demo() -> Result<(), tickbox_guest::http::Error> {
//! let r = tickbox_guest::http::get("https://api.example.com/v1/status")?;
//! println!("{} {}", r.status, String::from_utf8_lossy(&r.body));
//! # Ok(()) }
//! ```

use std::time::Duration;

/// Body bytes read by default; the rest of a longer body is an error.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;
/// Time to the response head by default (the host may cut it shorter).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The URL is not `http[s]://host[:port][/path]`.
    Url(String),
    /// The host (or the network) refused or failed the request; the
    /// wasi:http error code in its WIT spelling, e.g. `HTTP-request-denied`,
    /// `connection-refused`, `connection-read-timeout`.
    Code(String),
    /// The body is longer than [`Request::max_body`].
    TooLarge(usize),
    /// Anything else (I/O, a malformed response), in words.
    Other(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Url(u) => write!(f, "not an http(s) URL: {u}"),
            Error::Code(c) if c == "HTTP-request-denied" => write!(
                f,
                "HTTP-request-denied: the origin is not granted (the user grants one with --allow-http)"
            ),
            Error::Code(c) => write!(f, "{c}"),
            Error::TooLarge(n) => write!(f, "the response body is longer than {n} bytes"),
            Error::Other(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

/// A request to send.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// `http[s]://host[:port][/path[?query]]`.
    pub url: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
    /// Longest response body read.
    pub max_body: usize,
    /// Time to the response head.
    pub timeout: Duration,
}

impl Request {
    /// A request with the defaults.
    pub fn new(method: &str, url: &str) -> Request {
        Request {
            method: method.to_string(),
            url: url.to_string(),
            headers: Vec::new(),
            body: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Sends it and reads the whole response.
    pub fn send(&self) -> Result<Response, Error> {
        let url = Url::parse(&self.url)?;
        imp::send(self, &url)
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, Error> {
    Request::new("GET", url).send()
}

/// `POST url` with a body and its content type.
pub fn post(url: &str, content_type: &str, body: &[u8]) -> Result<Response, Error> {
    let mut r = Request::new("POST", url);
    r.headers
        .push(("content-type".to_string(), content_type.to_string()));
    r.body = body.to_vec();
    r.send()
}

/// A URL split the way a request needs it.
#[derive(Debug, PartialEq, Eq)]
struct Url {
    https: bool,
    /// `host[:port]`, as given.
    authority: String,
    /// `/path?query`, at least `/`.
    path: String,
}

impl Url {
    fn parse(url: &str) -> Result<Url, Error> {
        let bad = || Error::Url(url.to_string());
        let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
        let https = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return Err(bad()),
        };
        let rest = rest.split('#').next().unwrap_or("");
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty()
            || authority.contains(['@', ' '])
            || path.contains(char::is_whitespace)
        {
            return Err(bad());
        }
        Ok(Url {
            https,
            authority: authority.to_string(),
            path,
        })
    }
}

#[cfg(all(target_os = "wasi", target_env = "p2"))]
mod imp {
    use super::{Error, Request, Response, Url};
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
    };
    use wasip2::io::streams::StreamError;

    /// The WIT spelling of an error code (`HTTP-request-denied`).
    fn code(e: &ErrorCode) -> Error {
        let name = match e {
            ErrorCode::DnsTimeout => "DNS-timeout",
            ErrorCode::DnsError(_) => "DNS-error",
            ErrorCode::DestinationNotFound => "destination-not-found",
            ErrorCode::DestinationUnavailable => "destination-unavailable",
            ErrorCode::DestinationIpProhibited => "destination-IP-prohibited",
            ErrorCode::DestinationIpUnroutable => "destination-IP-unroutable",
            ErrorCode::ConnectionRefused => "connection-refused",
            ErrorCode::ConnectionTerminated => "connection-terminated",
            ErrorCode::ConnectionTimeout => "connection-timeout",
            ErrorCode::ConnectionReadTimeout => "connection-read-timeout",
            ErrorCode::ConnectionWriteTimeout => "connection-write-timeout",
            ErrorCode::ConnectionLimitReached => "connection-limit-reached",
            ErrorCode::TlsProtocolError => "TLS-protocol-error",
            ErrorCode::TlsCertificateError => "TLS-certificate-error",
            ErrorCode::TlsAlertReceived(_) => "TLS-alert-received",
            ErrorCode::HttpRequestDenied => "HTTP-request-denied",
            ErrorCode::HttpRequestBodySize(_) => "HTTP-request-body-size",
            ErrorCode::HttpResponseBodySize(_) => "HTTP-response-body-size",
            ErrorCode::HttpResponseTimeout => "HTTP-response-timeout",
            ErrorCode::HttpResponseIncomplete => "HTTP-response-incomplete",
            ErrorCode::HttpProtocolError => "HTTP-protocol-error",
            other => return Error::Code(format!("{other:?}")),
        };
        Error::Code(name.to_string())
    }

    pub(super) fn send(r: &Request, url: &Url) -> Result<Response, Error> {
        let other = |what: &str| Error::Other(format!("{what} refused by wasi:http"));
        let headers = Fields::new();
        for (k, v) in &r.headers {
            headers
                .append(k, v.as_bytes())
                .map_err(|e| Error::Other(format!("header {k}: {e:?}")))?;
        }
        let req = OutgoingRequest::new(headers);
        let method = match r.method.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            m => Method::Other(m.to_string()),
        };
        req.set_method(&method).map_err(|_| other("the method"))?;
        let scheme = if url.https {
            Scheme::Https
        } else {
            Scheme::Http
        };
        req.set_scheme(Some(&scheme))
            .map_err(|_| other("the scheme"))?;
        req.set_authority(Some(&url.authority))
            .map_err(|_| Error::Url(r.url.clone()))?;
        req.set_path_with_query(Some(&url.path))
            .map_err(|_| Error::Url(r.url.clone()))?;
        let body = req.body().map_err(|_| other("the body"))?;
        let options = RequestOptions::new();
        let _ = options.set_first_byte_timeout(Some(r.timeout.as_nanos() as u64));
        let future = outgoing_handler::handle(req, Some(options)).map_err(|e| code(&e))?;
        if !r.body.is_empty() {
            let out = body.write().map_err(|_| other("the body stream"))?;
            for chunk in r.body.chunks(4096) {
                // A failed write means the request failed: the response
                // below says why.
                if out.blocking_write_and_flush(chunk).is_err() {
                    break;
                }
            }
        }
        let _ = OutgoingBody::finish(body, None);
        let response = loop {
            if let Some(r) = future.get() {
                break r;
            }
            future.subscribe().block();
        };
        let response = match response {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(code(&e)),
            Err(()) => return Err(Error::Other("the response was taken twice".into())),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let incoming = response.consume().map_err(|_| other("the response body"))?;
        let stream = incoming.stream().map_err(|_| other("the body stream"))?;
        let mut body = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(bytes) if body.len() + bytes.len() > r.max_body => {
                    return Err(Error::TooLarge(r.max_body))
                }
                Ok(bytes) => body.extend_from_slice(&bytes),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(match wasip2::http::types::http_error_code(&e) {
                        Some(c) => code(&c),
                        None => Error::Other(e.to_debug_string()),
                    })
                }
            }
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

#[cfg(not(all(target_os = "wasi", target_env = "p2")))]
mod imp {
    //! Natively: plain HTTP/1.1 over `std::net`, one request per connection.
    use super::{Error, Request, Response, Url};
    use std::io::{Read, Write};
    use std::net::TcpStream;

    pub(super) fn send(r: &Request, url: &Url) -> Result<Response, Error> {
        if url.https {
            return Err(Error::Other(
                "https needs the wasm32-wasip2 build, where the host does TLS".into(),
            ));
        }
        let io = |e: std::io::Error| Error::Other(e.to_string());
        let addr = if url.authority.contains(':') {
            url.authority.clone()
        } else {
            format!("{}:80", url.authority)
        };
        let mut conn = TcpStream::connect(&addr).map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Error::Code("connection-refused".into()),
            _ => io(e),
        })?;
        conn.set_read_timeout(Some(r.timeout)).map_err(io)?;
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            r.method,
            url.path,
            url.authority,
            r.body.len()
        );
        for (k, v) in &r.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        conn.write_all(head.as_bytes()).map_err(io)?;
        conn.write_all(&r.body).map_err(io)?;
        let mut raw = Vec::new();
        conn.take((r.max_body + 64 * 1024) as u64)
            .read_to_end(&mut raw)
            .map_err(io)?;
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| Error::Other("the server did not answer with HTTP".into()))?;
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let body = raw[split + 4..].to_vec();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Other("the server did not answer with HTTP".into()))?;
        let headers: Vec<(String, Vec<u8>)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().as_bytes().to_vec()))
            .collect();
        if headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case(b"chunked"))
        {
            return Err(Error::Other(
                "chunked responses are not read natively; use the wasm build".into(),
            ));
        }
        if body.len() > r.max_body {
            return Err(Error::TooLarge(r.max_body));
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        let u = Url::parse("https://api.example.com:8443/v1/x?y=1#frag").unwrap();
        assert_eq!(
            u,
            Url {
                https: true,
                authority: "api.example.com:8443".into(),
                path: "/v1/x?y=1".into()
            }
        );
        assert_eq!(Url::parse("http://h").unwrap().path, "/");
        assert_eq!(Url::parse("http://h?q").unwrap().path, "/?q");
        for bad in [
            "ftp://h/",
            "h/x",
            "http:///x",
            "http://u@h/",
            "http://h/a b",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }
}
