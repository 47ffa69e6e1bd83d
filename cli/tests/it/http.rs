//! Outgoing `wasi:http` grants as the binary takes them: `--allow-http`
//! origins and `--http-ca` files checked (exit 2 with the reason), refused
//! for native Ticks, and shown by `tickbox info` in their normal form.
//! What a guest reaches under them is tested in tickbox-sandbox's
//! `tests/it/http.rs`.

use crate::util::*;
use serde_json::json;

fn guest() -> String {
    build_wasm("tests/guests", "httpget", "wasm32-wasip2")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn grants_are_checked_and_shown() {
    let wasm = guest();
    for (bad, why) in [
        ("api.example.com", "expected http://"),
        ("https://example.com/path", "without path"),
        ("https://*.example.com", "wildcards"),
    ] {
        tickbox(&["info", wasm.as_str(), "--allow-http", bad]).expect(2, why);
    }
    let dir = TempDir::new("http-ca-bad");
    let not_pem = dir.path("ca.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    tickbox(&[
        "info",
        wasm.as_str(),
        "--allow-http",
        "https://127.0.0.1:9",
        "--http-ca",
        not_pem.to_str().unwrap(),
    ])
    .expect(2, "no PEM certificate");
    // Native Ticks are not sandboxed: the grant is refused for them.
    let native = with_command(
        &["info", "--allow-http", "http://127.0.0.1:9"],
        &[tick("counter.py")],
    );
    tickbox(&native).expect(2, "--allow-http");
    // `info` lists the granted origins in their normal form.
    let out = tickbox(&[
        "info",
        wasm.as_str(),
        "--allow-http",
        "HTTP://LocalHost:8080/",
        "--allow-http",
        "https://api.example.com",
    ]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.json()["granted"]["http"],
        json!(["http://localhost:8080", "https://api.example.com:443"]),
        "{}",
        out.stdout
    );
}
