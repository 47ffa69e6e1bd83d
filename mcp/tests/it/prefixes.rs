//! Several Ticks behind one facade, as a ticks file hosts them: each
//! Tick's tools and its state resource under its name, a network grant
//! making its tools open-world, and the state's `recover_with` and the
//! resource's description naming tools as the MCP client calls them.

use crate::raw::Raw;
use crate::{native, wasm, Hosting, Setup};
use serde_json::json;
use tickbox_mcp::Grants;
use tickbox_test_support::mcp_lines::{tool_hint, tool_names};
use tickbox_test_support::{hostile, tick};

#[test]
fn several_ticks_are_served_under_their_names_as_prefixes() {
    let net = Grants {
        allow_net: vec!["127.0.0.1:9".into()],
        ..Grants::default()
    };
    let counter = native(vec!["python3".into(), tick("counter.py")], &[]);
    let mut mcp = Raw::start_setup(Setup::of(vec![
        Hosting::shared(Some("counter"), counter),
        Hosting {
            grants: net.clone(),
            ..Hosting::shared(Some("web"), wasm(&hostile(), &net))
        },
    ]));
    mcp.initialize("2025-11-25");
    let list = mcp.request(1, "tools/list", json!({}));
    let names = tool_names(&list);
    assert_eq!(
        names[..4],
        [
            "counter_increment",
            "counter_history",
            "counter_tick_state",
            "counter_tick_screen",
        ]
    );
    for n in [
        "web_echo",
        "web_read_file",
        "web_tick_state",
        "web_tick_screen",
    ] {
        assert!(names.iter().any(|m| m == n), "{n} in {names:?}");
    }
    let open_world = |n: &str| tool_hint(&list, n, "openWorldHint");
    assert_eq!(open_world("web_echo"), Some(true), "a network grant");
    assert_eq!(open_world("counter_increment"), Some(false));
    let r = mcp.call(2, "counter_increment", json!({"amount": 1}));
    assert_eq!(r["structuredContent"], json!({"value": 1}));
    let r = mcp.call(3, "counter_tick_state", json!({}));
    assert_eq!(
        r["structuredContent"]["recover_with"], "counter_history",
        "named as the MCP client calls it"
    );
    let r = mcp.call(4, "web_echo", json!({"u": 1}));
    assert_eq!(r["structuredContent"], json!({"u": 1}));
    let listed = mcp.request(5, "resources/list", json!({}));
    let resources = listed["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        resources
            .iter()
            .filter_map(|r| r["uri"].as_str())
            .collect::<Vec<_>>(),
        ["tick://counter/state", "tick://web/state"]
    );
    assert!(
        resources[0]["description"]
            .as_str()
            .is_some_and(|d| d.contains("`counter_history`")),
        "{listed}"
    );
    let (served, log) = mcp.close();
    assert!(served.is_ok(), "{served:?}: {log}");
}
