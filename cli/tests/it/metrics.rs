//! `tickbox mcp --http … --metrics ADDR` through the binary: where the
//! page is said to be (one stderr line, loopback for a bare port), its
//! generated token in a private file that is never printed and is removed
//! at exit, and the flags' rules (`--metrics` needs `--http`; a metrics
//! token that is the MCP token, or a token file others may read, is
//! refused before anything starts). The page itself (its counts scraped
//! by a real Prometheus, its door, its bounds, hostile names) is tested
//! in this process in tickbox-mcp's `tests/it/metrics.rs`.

use crate::mcp_wire::HttpServer;
use crate::util::*;
use std::path::PathBuf;
use tickbox_test_support::http;

/// Where `tickbox mcp` said it serves `/metrics`: the port, and the file
/// holding the token a scraper sends.
pub(crate) struct Page {
    port: u16,
    token_file: PathBuf,
}

impl Page {
    /// From the `serving metrics on http://ADDR/metrics (token in FILE, …`
    /// line of the server's stderr.
    pub(crate) fn of(server: &HttpServer) -> Page {
        let line = server
            .banner
            .iter()
            .find_map(|l| l.strip_prefix("tickbox mcp: serving metrics on http://"))
            .unwrap_or_else(|| panic!("no metrics line: {:?}", server.banner));
        let (addr, rest) = line.split_once("/metrics").expect("the path");
        let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
        assert_eq!(host, "127.0.0.1", "loopback unless told otherwise: {line}");
        let file = rest
            .strip_prefix(" (token in ")
            .and_then(|r| r.split([',', ';']).next())
            .unwrap_or_else(|| panic!("no token file in {line:?}"));
        Page {
            port: port.parse().expect("a port"),
            token_file: PathBuf::from(file),
        }
    }

    fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap_or_else(|e| panic!("{}: {e}", self.token_file.display()))
            .trim()
            .to_string()
    }

    /// The page, scraped with the token from its file.
    pub(crate) fn scrape(&self) -> String {
        let bearer = format!("Bearer {}", self.token());
        let (status, _, body) = http(
            self.port,
            "GET",
            "/metrics",
            &[("Authorization", &bearer)],
            b"",
        );
        let body = String::from_utf8(body).expect("UTF-8");
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// `--metrics PORT` is loopback; the generated token is in a 0600 file,
/// never printed, not the MCP token, and opens the page (the positive
/// control: the Tick is counted there); the file is removed at exit.
/// `--metrics` needs `--http`; a metrics token that is the MCP token, or
/// a file others may read, is refused (exit 2) before anything starts.
#[test]
fn the_metrics_token_is_a_private_file_removed_at_exit_and_bad_flags_exit_2() {
    let server = HttpServer::start(&["--metrics", "0"]);
    let page = Page::of(&server);
    let token = page.token();
    assert_ne!(Some(&token), server.token.as_ref(), "not the MCP token");
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(&page.token_file)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode, 0o600);
    assert!(
        !server.banner.iter().any(|l| l.contains(&token)),
        "the metrics token is never printed: {:?}",
        server.banner
    );
    assert_eq!(
        sample(&page.scrape(), r#"tickbox_ticks_live{tick="shifty"}"#),
        Some(1.0)
    );
    drop(server);
    assert!(
        !page.token_file.exists(),
        "the generated metrics token file is removed at exit"
    );

    let shifty = tick("shifty.py");
    tickbox(&["mcp", "--metrics", "0", "--", "python3", &shifty]).expect(2, "--http");
    let dir = TempDir::new("metrics-token");
    let same = dir.path("same");
    std::fs::write(&same, "the-same-token-0123456789\n").unwrap();
    let open = dir.path("open");
    std::fs::write(&open, "a-token-others-may-read-0123\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&same, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (same, open) = (same.to_str().unwrap(), open.to_str().unwrap());
    let base = ["mcp", "--http", "127.0.0.1:0", "--metrics", "0"];
    let with = |extra: &[&str]| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        args.extend(["--", "python3", &shifty]);
        tickbox(&args)
    };
    with(&["--token-file", same, "--metrics-token-file", same]).expect(2, "holds the MCP token");
    with(&["--metrics-token-file", open]).expect(2, "--metrics-token-file");
}
