//! Streamable HTTP: one session per client over the shared Ticks, only
//! the MCP path served, a browser Origin from elsewhere refused, and the
//! bearer token required.

use crate::server::HttpServer;
use serde_json::{json, Value};
use tickbox_mcp::http::HttpOptions;
use tickbox_test_support::mcp_http::{call_tool, header, initialize_http};
use tickbox_test_support::mcp_lines::tool_names;

#[test]
fn streamable_http_serves_sessions_over_the_shared_ticks() {
    let server = HttpServer::start();
    let a = initialize_http(&server, &[]);
    let b = initialize_http(&server, &[]);
    assert_ne!(a, b, "one session per client");
    let (status, _, m) = server.post(
        "/mcp",
        &[("Mcp-Session-Id", &a)],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(status, 200);
    assert_eq!(tool_names(&m[0]).len(), 7, "{m:?}");
    let call = |session: &str, id: u64, name: &str, args: Value| {
        call_tool(&server, session, id, name, args)
    };
    let r = call(&a, 2, "echo", json!({"from": "a"}));
    assert_eq!(r["structuredContent"], json!({"from": "a"}), "{r}");
    // Session b calls the same Tick: it sees a's finished call.
    call(&a, 3, "sleep", json!({"seconds": 0.1}));
    let r = call(&b, 4, "count", json!({}));
    assert_eq!(r["structuredContent"], json!({"finished": 1}), "{r}");
    // Only /mcp is served.
    let (status, _, _) = server.post("/other", &[], &json!({}));
    assert_eq!(status, 404);
    // A browser page from elsewhere is refused; a loopback one is fine.
    let (status, _, _) = server.post(
        "/mcp",
        &[("Origin", "http://evil.example")],
        &json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    );
    assert_eq!(status, 403);
    initialize_http(&server, &[("Origin", "http://localhost:3000")]);
}

#[test]
fn streamable_http_requires_the_bearer_token_it_was_given() {
    let token = "s3cret-token-0123456789abcdef";
    let server = HttpServer::start_with(crate::shifty(&[]), |o: &mut HttpOptions| {
        o.token = token.to_string()
    });
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, headers, _) = server.post_as(None, "/mcp", &[], &ping);
    assert_eq!(status, 401);
    assert_eq!(header(&headers, "www-authenticate"), Some("Bearer"));
    let (status, _, _) = server.post("/mcp", &[("Authorization", "Bearer wrong")], &ping);
    assert_eq!(status, 401);
    let auth = format!("Bearer {token}");
    initialize_http(&server, &[("Authorization", &auth)]);
}

/// A request id still being served in a session is refused for another
/// request of that session (rmcp routes an answer by its id alone); other
/// ids pass meanwhile, and once answered the id is free again.
#[test]
fn an_id_in_use_in_a_session_is_refused_until_its_request_is_answered() {
    use tickbox_test_support::{eventually, TempDir};
    let dir = TempDir::new("http-ids");
    let (log, until) = (dir.path("log"), dir.path("go"));
    let log_var = log.to_str().unwrap().to_string();
    let server = HttpServer::start_with(crate::shifty(&[("SHIFTY_LOG", &log_var)]), |_| {});
    let session = initialize_http(&server, &[]);
    let with = [("Mcp-Session-Id", session.as_str())];
    let ping = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "ping"});
    let sleep = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"until": until.to_str().unwrap()}}});
    std::thread::scope(|s| {
        let first = s.spawn(|| server.post("/mcp", &with, &sleep));
        let started = || std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty());
        assert!(
            eventually(crate::PATIENCE, started),
            "the call reached the Tick"
        );
        let (status, _, m) = server.post("/mcp", &with, &ping(7));
        assert_eq!(status, 400, "{m:?}");
        assert_eq!(server.post("/mcp", &with, &ping(8)).0, 200, "another id");
        std::fs::write(&until, "").unwrap();
        let (status, _, m) = first.join().unwrap();
        assert_eq!(status, 200);
        let answered = |m: &Value| m["id"] == 7 && m.get("result").is_some();
        assert!(m.iter().any(answered), "{m:?}");
    });
    assert_eq!(server.post("/mcp", &with, &ping(7)).0, 200, "free again");
}
