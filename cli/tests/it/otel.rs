//! OpenTelemetry through the real binary: the `OTEL_*` variables `tickbox`
//! reads turn the exporter on, into a real OTLP receiver on loopback
//! (`tickbox_test_support::otel`). A one-shot `tickbox call` exports its
//! spans and metrics before it exits, with `OTEL_SERVICE_NAME` as its
//! `service.name`; without the variables nothing is sent and no exporter
//! thread runs (the positive control: the same run with them). What the
//! facade sends (the MCP spans and metrics, a stalled or stopped
//! receiver) is tested in this process in tickbox-mcp's `tests/it/otel.rs`.

use crate::mcp_wire::Raw;
use crate::util::*;
use serde_json::json;
use std::path::Path;
use tickbox_telemetry::otel::THREAD_NAME;
use tickbox_test_support::otel::{attr, named, string_attr, Receiver};

/// The environment that turns telemetry on, sending to `endpoint` soon
/// (a short batch delay and metric interval, so a test waits little).
fn otel_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.to_string()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".into()),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200".into()),
        ("OTEL_SERVICE_NAME", "tickbox-under-test".into()),
    ]
}

fn shifty_args() -> Vec<String> {
    ["--name", "shifty", "--", "python3", &tick("shifty.py")]
        .map(String::from)
        .to_vec()
}

/// Not only MCP: a one-shot `tickbox call` exports its session and its
/// call (an internal span, `execute_tool TOOL`, the GenAI convention)
/// before it exits, under the service name `OTEL_SERVICE_NAME` gives.
#[test]
fn a_one_shot_call_exports_its_spans_before_it_exits() {
    let receiver = Receiver::start();
    let env = otel_env(&receiver.endpoint());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let shifty = vec!["python3".to_string(), tick("shifty.py")];
    let out = tickbox_env(
        &with_command(&["call", "echo", r#"{"x":1}"#], &shifty),
        &env,
    );
    assert_eq!(out.code, 0, "{out:#?}");
    let spans = receiver.spans();
    let call = named(&spans, "execute_tool echo");
    assert_eq!(call.len(), 1, "{spans:#?}");
    assert_eq!(call[0]["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(attr(call[0], "mcp.method.name"), None, "not an MCP call");
    let session = named(&spans, "tick session");
    assert_eq!(session.len(), 1, "{spans:#?}");
    assert_eq!(string_attr(session[0], "tickbox.origin"), Some("cli"));
    assert_eq!(call[0]["parentSpanId"], session[0]["spanId"]);
    let requests = receiver.requests();
    assert!(
        requests.iter().any(|r| r["path"] == "/v1/metrics"),
        "the metrics are sent at exit too"
    );
    let resource = &requests[0]["message"];
    assert!(
        resource.to_string().contains("tickbox-under-test"),
        "OTEL_SERVICE_NAME is the service.name: {resource}"
    );
}

/// Without the variables nothing is sent and no exporter thread runs;
/// the positive control is the same run with them (the thread is there
/// and the receiver gets requests).
#[test]
fn without_the_variables_nothing_is_sent_and_no_thread_runs() {
    for (k, _) in std::env::vars() {
        assert!(
            !k.starts_with("OTEL_EXPORTER_OTLP"),
            "the test's own environment sets {k}: this test needs it unset"
        );
    }
    let receiver = Receiver::start();
    let run = |env: &[(&str, &Path)]| -> Vec<String> {
        let mut mcp = Raw::start_env(&shifty_args(), env);
        mcp.initialize("2025-11-25");
        for id in 1..=3 {
            let r = mcp.call(id, "echo", json!({"id": id}));
            assert_eq!(r["isError"], false, "{r}");
        }
        let threads = threads(mcp.pid());
        let (code, stderr) = mcp.close();
        assert_eq!(code, 0, "{stderr}");
        threads
    };
    let unset_threads = run(&[]);
    assert!(
        !unset_threads.iter().any(|t| t == THREAD_NAME),
        "{unset_threads:?}"
    );
    assert!(!unset_threads.is_empty(), "the threads were read");
    assert_eq!(receiver.requests().len(), 0, "nothing was sent");

    let endpoint = receiver.endpoint();
    let set_threads = run(&[("OTEL_EXPORTER_OTLP_ENDPOINT", Path::new(&endpoint))]);
    assert!(
        set_threads.iter().any(|t| t == THREAD_NAME),
        "{set_threads:?}"
    );
    receiver.spans_until("the positive control's spans", |s| {
        named(s, "tools/call echo").len() == 3
    });
}
