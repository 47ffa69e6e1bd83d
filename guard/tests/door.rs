//! The door's checks through the crate's public API, each refusing what it
//! is for beside a request it lets in: the bearer token (never a cookie),
//! a loopback server's `Host` and `Origin`, and a page's own origin.

use hyper::Request;
use tickbox_guard::door::{authorized, TokenIn};
use tickbox_guard::origin::{same_origin, Hosts, Loopback};

const TOKEN: &str = "9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9c";

fn request(uri: &str, headers: &[(&str, &str)]) -> Request<()> {
    let mut r = Request::builder().uri(uri);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(()).unwrap()
}

#[test]
fn the_token_is_taken_from_the_header_or_where_allowed_the_query_never_a_cookie() {
    let bearer = format!("Bearer {TOKEN}");
    let header = request("/mcp", &[("authorization", bearer.as_str())]);
    assert!(authorized(&header, TOKEN, TokenIn::Header));
    let query = request(&format!("/mcp?x=1&token={TOKEN}"), &[]);
    assert!(authorized(&query, TOKEN, TokenIn::HeaderOrQuery));
    assert!(!authorized(&query, TOKEN, TokenIn::Header));
    let cookie = format!("token={TOKEN}");
    let in_cookie = request("/mcp", &[("cookie", cookie.as_str())]);
    assert!(!authorized(&in_cookie, TOKEN, TokenIn::HeaderOrQuery));
    let wrong = request(
        "/mcp",
        &[("authorization", "Bearer 9f2c4e6a8b0d1f3e5a7c9b1d3f5e7a9d")],
    );
    assert!(!authorized(&wrong, TOKEN, TokenIn::HeaderOrQuery));
    let prefix = request(&format!("/mcp?token={}", &TOKEN[..10]), &[]);
    assert!(!authorized(&prefix, TOKEN, TokenIn::HeaderOrQuery));
}

#[test]
fn a_loopback_server_answers_only_loopback_hosts_and_pages() {
    let rule = Loopback::of("127.0.0.1:8765".parse().unwrap());
    for host in [
        "localhost:8765",
        "127.0.0.1:8765",
        "LOCALHOST:1",
        "[::1]:8765",
    ] {
        assert!(rule.allows_host(host), "{host}");
    }
    for host in [
        "evil.example:8765",
        "127.0.0.1.evil.example:8765",
        "localhost.evil.example",
        "",
    ] {
        assert!(!rule.allows_host(host), "{host}");
    }
    assert!(Loopback::allows_origin(None), "programs send no Origin");
    assert!(Loopback::allows_origin(Some("http://localhost:3000")));
    for origin in [
        "http://evil.example",
        "null",
        "http://127.0.0.1.evil.example",
    ] {
        assert!(!Loopback::allows_origin(Some(origin)), "{origin}");
    }
}

#[test]
fn a_page_server_answers_its_own_host_and_origin_only() {
    let hosts = Hosts::of("127.0.0.1:41837".parse().unwrap());
    assert!(hosts.allows("127.0.0.1:41837"));
    assert!(
        !hosts.allows("127.0.0.1:41838"),
        "another port is another server"
    );
    assert!(!hosts.allows("evil.example:41837"));
    assert!(same_origin(
        Some("http://127.0.0.1:41837"),
        "127.0.0.1:41837"
    ));
    assert!(same_origin(None, "127.0.0.1:41837"));
    assert!(!same_origin(
        Some("http://127.0.0.1:9999"),
        "127.0.0.1:41837"
    ));
}
