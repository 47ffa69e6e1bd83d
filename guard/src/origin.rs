//! Who a request says it is for (`Host`) and where it comes from
//! (`Origin`): the two checks that keep a web page in a person's browser
//! from using a server on their loopback.
//!
//! - **`Host`** must name the listening address: `127.0.0.1:PORT`,
//!   `localhost:PORT` or `[::1]:PORT` on loopback, the address itself
//!   otherwise, and any IP literal with the port when listening on every
//!   address (an address cannot be rebound; a name can). A page that
//!   rebinds its own name to 127.0.0.1 sends its own name, and is refused
//!   (DNS rebinding).
//! - **`Origin`**, when a browser sends one, must be the server's own
//!   (`http://` and the `Host` it sent): a page on another port is the
//!   same site, but not the same origin.
//!
//! That is the rule of a server whose pages are its own (the inspector:
//! [`Hosts`], [`same_origin`]). A server that programs call and that a
//! page on this machine may use as well (MCP over HTTP, which browser-based
//! clients reach from a page of their own) takes the wider rule of
//! [`Loopback`]: a loopback name or the listening address in `Host` at any
//! port, and an `Origin`, when sent, of a loopback page at any port. Both
//! refuse a name that could be rebound and a page from elsewhere, with the
//! same two answers ([`wrong_host`], [`wrong_origin`]).

use crate::door::{plain, Body};
use hyper::{Response, StatusCode};
use std::net::SocketAddr;

/// The `Host` values a server answers to.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// Exact `HOST:PORT` values, compared without regard to case.
    names: Vec<String>,
    /// Any IP literal with our port (listening on every address).
    any_ip: bool,
    port: u16,
}

impl Hosts {
    /// The `Host` values of a server listening on `local`.
    pub fn of(local: SocketAddr) -> Hosts {
        let port = local.port();
        let mut names = Vec::new();
        if local.ip().is_loopback() || local.ip().is_unspecified() {
            for name in ["127.0.0.1", "localhost", "[::1]"] {
                names.push(format!("{name}:{port}"));
            }
        }
        if !local.ip().is_unspecified() {
            names.push(local.to_string());
        }
        Hosts {
            names,
            any_ip: local.ip().is_unspecified(),
            port,
        }
    }

    /// Whether `host` (a request's `Host` header) names this server.
    pub fn allows(&self, host: &str) -> bool {
        if self.names.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return true;
        }
        self.any_ip
            && host
                .parse::<SocketAddr>()
                .is_ok_and(|a| a.port() == self.port)
    }
}

/// Whether a request's `Origin` (`None`: it sent none, as clients other
/// than browsers do) is the server's own, the one a page it served has:
/// `http://` and the `host` the request named.
pub fn same_origin(origin: Option<&str>, host: &str) -> bool {
    origin.is_none_or(|o| o.eq_ignore_ascii_case(&format!("http://{host}")))
}

/// The names a loopback page or client goes by.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A host as compared: lowercase, an IPv6 literal without its brackets.
fn normalized(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// The `Host` and `Origin` rule of a server that programs call and a page
/// on this machine may use (see the module docs).
#[derive(Debug, Clone)]
pub struct Loopback {
    /// Host names (no port) a request may name.
    names: Vec<String>,
}

impl Loopback {
    /// The rule for a server listening on `local`: the loopback names, and
    /// the listening address itself unless it is every address.
    pub fn of(local: SocketAddr) -> Loopback {
        let mut names: Vec<String> = LOOPBACK_NAMES.iter().map(|n| n.to_string()).collect();
        if !local.ip().is_unspecified() {
            names.push(normalized(&local.ip().to_string()));
        }
        Loopback { names }
    }

    /// Whether `host` (a request's `Host` header) names this server, at
    /// any port. A header that is not an authority is refused.
    pub fn allows_host(&self, host: &str) -> bool {
        host.parse::<hyper::http::uri::Authority>()
            .is_ok_and(|a| self.names.contains(&normalized(a.host())))
    }

    /// Whether a request's `Origin` (`None`: it sent none, as clients
    /// other than browsers do) is a loopback page's, `http` or `https`, at
    /// any port. `null` and anything that is not an origin are refused.
    pub fn allows_origin(origin: Option<&str>) -> bool {
        let Some(origin) = origin else {
            return true;
        };
        let Ok(uri) = origin.trim().parse::<hyper::Uri>() else {
            return false;
        };
        let web = matches!(uri.scheme_str(), Some(s) if s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"));
        let host = uri.authority().map(|a| normalized(a.host()));
        web && host.is_some_and(|h| LOOPBACK_NAMES.contains(&h.as_str()))
    }
}

/// 403 for a `Host` that does not name the server.
pub fn wrong_host() -> Response<Body> {
    plain(
        StatusCode::FORBIDDEN,
        "forbidden: the Host header does not name this server (DNS rebinding?)",
    )
}

/// 403 for a page of another origin.
pub fn wrong_origin() -> Response<Body> {
    plain(
        StatusCode::FORBIDDEN,
        "forbidden: a request from another origin",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_does_not_name_the_listener_is_refused() {
        let loopback = Hosts::of("127.0.0.1:4000".parse().unwrap());
        // Positive controls: every loopback spelling with the port.
        for ok in ["127.0.0.1:4000", "LOCALHOST:4000", "[::1]:4000"] {
            assert!(loopback.allows(ok), "{ok}");
        }
        // A rebound name, another port, no port, an empty header.
        for bad in ["evil.example:4000", "127.0.0.1:4001", "localhost", ""] {
            assert!(!loopback.allows(bad), "{bad}");
        }
    }

    #[test]
    fn on_every_address_any_ip_with_the_port_passes_and_no_name_does() {
        let every = Hosts::of("0.0.0.0:4000".parse().unwrap());
        assert!(every.allows("192.0.2.7:4000"));
        assert!(every.allows("localhost:4000"));
        assert!(!every.allows("192.0.2.7:4001"));
        assert!(!every.allows("evil.example:4000"));
        let one = Hosts::of("192.0.2.7:4000".parse().unwrap());
        assert!(one.allows("192.0.2.7:4000"));
        assert!(!one.allows("192.0.2.8:4000") && !one.allows("localhost:4000"));
    }

    #[test]
    fn another_origin_is_refused_and_none_or_our_own_passes() {
        let host = "127.0.0.1:4000";
        assert!(!same_origin(Some("http://127.0.0.1:4001"), host));
        assert!(!same_origin(Some("https://127.0.0.1:4000"), host));
        assert!(!same_origin(Some("http://evil.example"), host));
        assert!(!same_origin(Some("null"), host));
        // Positive controls.
        assert!(same_origin(None, host));
        assert!(same_origin(Some("HTTP://127.0.0.1:4000"), host));
    }

    #[test]
    fn a_loopback_server_refuses_other_names_at_any_port_and_takes_its_own() {
        let rule = Loopback::of("127.0.0.1:4000".parse().unwrap());
        // Positive controls: every loopback spelling, any port or none.
        for ok in [
            "localhost:4000",
            "127.0.0.1:9",
            "[::1]:4000",
            "LOCALHOST",
            "127.0.0.1",
        ] {
            assert!(rule.allows_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:4000",
            "localhost.evil.example",
            "",
            "a b",
            "192.0.2.7:4000",
        ] {
            assert!(!rule.allows_host(bad), "{bad}");
        }
        // Listening on one address: that address too; on every address,
        // no address beyond the loopback names (a name is never taken).
        let one = Loopback::of("192.0.2.7:4000".parse().unwrap());
        assert!(one.allows_host("192.0.2.7:4000"));
        let every = Loopback::of("0.0.0.0:4000".parse().unwrap());
        assert!(!every.allows_host("192.0.2.7:4000") && every.allows_host("localhost:1"));
    }

    #[test]
    fn a_loopback_server_refuses_pages_from_elsewhere_and_takes_loopback_ones() {
        for ok in [
            None,
            Some("http://localhost:3000"),
            Some("https://127.0.0.1:8443"),
            Some("http://[::1]:1"),
            Some("HTTP://LOCALHOST"),
        ] {
            assert!(Loopback::allows_origin(ok), "{ok:?}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example:3000",
            "null",
            "file://localhost",
            "",
            "not an origin",
        ] {
            assert!(!Loopback::allows_origin(Some(bad)), "{bad}");
        }
        assert_eq!(wrong_host().status(), StatusCode::FORBIDDEN);
        assert_eq!(wrong_origin().status(), StatusCode::FORBIDDEN);
    }
}
