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
}
