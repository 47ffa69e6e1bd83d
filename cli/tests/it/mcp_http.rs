//! `tickbox mcp --http`'s token as the binary handles it, through the wire
//! (a real server process): one is always there, generated into a private
//! file when none is given, and a token file others may read is refused.
//! The door's other walls (half-sent heads, slots per peer, sessions,
//! bounded bodies, the probes) are the facade's, tested in tickbox-mcp's
//! `tests/it`; the raw-TCP client they and this binary's tests share is
//! `tickbox_test_support::mcp_http`.

use crate::mcp_wire::{initialize_http, HttpServer};
use crate::util::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use tickbox_test_support::mcp_http::{echo, ping};

#[test]
fn loopback_http_requires_a_token_generated_into_a_private_file() {
    let server = HttpServer::start(&[]);
    let token = server
        .token
        .clone()
        .unwrap_or_else(|| panic!("no token in the URL line: {:?}", server.banner));
    assert_eq!(token.len(), 64, "32 random bytes in hex: {token}");
    assert!(
        !server.banner.iter().any(|l| l.contains(&token)),
        "the token is printed once, in the URL: {:?}",
        server.banner
    );
    let file = server
        .banner
        .iter()
        .find_map(|l| l.split("it is in ").nth(1))
        .and_then(|r| r.split(" (mode").next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no token file on stderr: {:?}", server.banner));
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", file.display());
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), token);
    // No token, or a wrong one: 401 (what kept another local user out).
    let (status, headers, _) = server.post_as(None, "/mcp", &[], &ping());
    assert_eq!(status, 401, "{headers:?}");
    let (status, _, _) = server.post_as(Some("0123456789abcdef"), "/mcp", &[], &ping());
    assert_eq!(status, 401);
    let (status, _, _) = server.post_as(None, "/mcp?token=wrong", &[], &ping());
    assert_eq!(status, 401);
    // The token as a header, and as the query of the printed URL.
    let session = initialize_http(&server, &[]);
    let r = echo(&server, &session, json!({"ok": true}));
    assert_eq!(r["structuredContent"], json!({"ok": true}), "{r}");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "query", "version": "0"}}});
    let (status, _, m) = server.post_as(None, &format!("/mcp?token={token}"), &[], &init);
    assert_eq!(status, 200, "{m:?}");
    drop(server);
    assert!(!file.exists(), "{} is removed at exit", file.display());
}

#[test]
fn a_token_file_group_or_others_may_read_is_refused_and_a_private_one_works() {
    let dir = TempDir::new("mcp-token-mode");
    let file = dir.path("token");
    let token = "private-token-0123456789abcdef";
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let shifty = tick("shifty.py");
    let args = [
        "mcp",
        "--http",
        "127.0.0.1:0",
        "--token-file",
        file.to_str().unwrap(),
        "--",
        "python3",
        &shifty,
    ];
    for mode in [0o644, 0o640, 0o604, 0o660, 0o602] {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = tickbox(&args);
        out.expect(2, &format!("has mode {mode:03o}"))
            .expect(2, "chmod 600");
        assert_eq!(
            out.stderr.lines().filter(|l| !l.trim().is_empty()).count(),
            1,
            "one line: {}",
            out.stderr
        );
    }
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = HttpServer::start(&["--token-file", file.to_str().unwrap()]);
    let (status, _, _) = server.post("/mcp", &[], &ping());
    assert_eq!(status, 401, "the file's token is required");
    let auth = format!("Bearer {token}");
    initialize_http(&server, &[("Authorization", &auth)]);
}
