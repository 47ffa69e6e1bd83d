//! How a tool call's outcome becomes an MCP `CallToolResult`.
//!
//! Success: the tool's JSON as `structuredContent` (an object as is; any
//! other value as `{"result": value}`, since MCP wants an object there) and
//! the same JSON as text. Failure: `isError: true` with
//! `structuredContent = {"error": {kind, message, executed, ...}}` and a text
//! sentence saying what happened and whether the call had an effect.
//! `executed` is `true` (it ran, and may have had effects), `false` (it had
//! no effect) or `null` (unknown: it may or may not have had effects).
//!
//! **Invariant:** a result whose encoding exceeds [`MAX_RESULT_BYTES`] is
//! replaced whole by a `response_too_large` error; it is never clipped. The
//! same holds for error results: a Tick error whose message or data is over
//! the bound becomes `response_too_large` with its code and `executed` kept.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{json, Map, Value};
use tickbox_protocol::message::encoded_len;
use tickbox_protocol::TickText;

/// The largest `tools/call` result the facade sends, encoded (text and
/// structured content together).
pub const MAX_RESULT_BYTES: usize = 512 * 1024;

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The tool returned an error.
    #[error("`{tool}` failed with error {code}{}: {message}", effect(*.executed))]
    Tool {
        tool: String,
        code: i64,
        message: TickText,
        data: Option<Value>,
        executed: bool,
    },
    /// The catalog changed since the client listed it; nothing was sent, or
    /// the Tick refused the call unexecuted (-32004).
    #[error("the tool catalog of Tick `{tick}` changed since you listed it (revision {listed} → {current}); `{tool}` was not executed; list the tools again, then decide whether to call it")]
    CatalogChanged {
        tick: String,
        tool: String,
        listed: String,
        current: String,
    },
    /// The arguments do not match the tool's input schema; nothing was sent.
    #[error("`{tool}` was not executed: {reason}")]
    InvalidArguments { tool: String, reason: String },
    /// The client cancelled the call while it waited for its turn at the
    /// Tick; nothing was sent.
    #[error("`{tool}` was not executed: you cancelled it before tickbox sent it to the Tick")]
    Cancelled { tool: String },
    /// The Tick's session is over; nothing was sent.
    #[error("`{tool}` was not executed: the Tick `{tick}` is no longer running ({reason}); restart the MCP server to use it again")]
    TickEnded {
        tick: String,
        tool: String,
        reason: String,
    },
    /// The call was sent and its outcome is unknown.
    #[error("unknown outcome: `{tool}` was sent to the Tick but {reason}; it may or may not have taken effect. tickbox did not retry it{}", retry_advice(*.mutates))]
    Unknown {
        tool: String,
        reason: String,
        mutates: bool,
    },
    /// The tool ran, but its result is over the bound; it was dropped whole.
    #[error("response_too_large: `{tool}` ran, but its result is {observed} bytes encoded, over the {limit}-byte limit; it was dropped whole, not clipped")]
    TooLarge {
        tool: String,
        observed: usize,
        limit: usize,
    },
    /// The tool failed, but its error (message and data) is over the bound;
    /// it was dropped whole, its code and effect kept.
    #[error("response_too_large: `{tool}` failed with error {code}{}, but its error is {observed} bytes encoded, over the {limit}-byte limit; it was dropped whole, not clipped", effect(*.executed))]
    ErrorTooLarge {
        tool: String,
        code: i64,
        executed: bool,
        observed: usize,
        limit: usize,
    },
}

fn effect(executed: bool) -> &'static str {
    if executed {
        " (it ran and may have had effects)"
    } else {
        " (it was not executed)"
    }
}

fn retry_advice(mutates: bool) -> &'static str {
    if mutates {
        "; read the Tick's state before deciding whether to call it again"
    } else {
        ""
    }
}

impl CallError {
    /// The short, stable name of this kind of failure.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Tool { .. } => "tool_error",
            CallError::CatalogChanged { .. } => "catalog_changed",
            CallError::InvalidArguments { .. } => "invalid_arguments",
            CallError::Cancelled { .. } => "cancelled",
            CallError::TickEnded { .. } => "tick_ended",
            CallError::Unknown { .. } => "unknown_outcome",
            CallError::TooLarge { .. } | CallError::ErrorTooLarge { .. } => "response_too_large",
        }
    }

    /// Whether the call ran: `Some(true)` it may have had effects,
    /// `Some(false)` it had none, `None` nobody knows.
    pub fn executed(&self) -> Option<bool> {
        match self {
            CallError::Tool { executed, .. } => Some(*executed),
            CallError::CatalogChanged { .. }
            | CallError::InvalidArguments { .. }
            | CallError::Cancelled { .. }
            | CallError::TickEnded { .. } => Some(false),
            CallError::Unknown { .. } => None,
            CallError::TooLarge { .. } => Some(true),
            CallError::ErrorTooLarge { executed, .. } => Some(*executed),
        }
    }

    /// The `{"error": {...}}` object of the result.
    pub fn to_json(&self) -> Value {
        let mut e = Map::new();
        e.insert("kind".into(), json!(self.kind()));
        e.insert("message".into(), json!(self.to_string()));
        e.insert("executed".into(), json!(self.executed()));
        match self {
            CallError::Tool {
                code,
                message,
                data,
                ..
            } => {
                e.insert("code".into(), json!(code));
                e.insert("tick_message".into(), json!(message.data()));
                if let Some(d) = data {
                    e.insert("data".into(), d.clone());
                }
            }
            CallError::CatalogChanged {
                listed, current, ..
            } => {
                e.insert("listed_revision".into(), json!(listed));
                e.insert("current_revision".into(), json!(current));
            }
            CallError::TooLarge {
                observed, limit, ..
            } => {
                e.insert("observed_bytes".into(), json!(observed));
                e.insert("limit_bytes".into(), json!(limit));
            }
            CallError::ErrorTooLarge {
                code,
                observed,
                limit,
                ..
            } => {
                e.insert("code".into(), json!(code));
                e.insert("observed_bytes".into(), json!(observed));
                e.insert("limit_bytes".into(), json!(limit));
            }
            _ => {}
        }
        json!({ "error": e })
    }

    /// The MCP result: `isError`, the error object and its sentence; an
    /// error over [`MAX_RESULT_BYTES`] is replaced whole (see the module docs).
    pub fn into_result(self) -> CallToolResult {
        // Measured before anything is built from it: a Tick may send an
        // 8 MiB message, and the result carries it three times (the text,
        // the error's sentence and `tick_message`) and its data twice.
        if let CallError::Tool {
            tool,
            code,
            message,
            data,
            executed,
        } = &self
        {
            let observed = 3 * message.len() + 2 * data.as_ref().map_or(0, encoded_len);
            if observed > MAX_RESULT_BYTES {
                return CallError::ErrorTooLarge {
                    tool: tool.clone(),
                    code: *code,
                    executed: *executed,
                    observed,
                    limit: MAX_RESULT_BYTES,
                }
                .into_result();
            }
        }
        let mut text = self.to_string();
        if let CallError::Tool { data: Some(d), .. } = &self {
            text.push_str(&format!(" (data: {d})"));
        }
        let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
        r.structured_content = Some(self.to_json());
        let observed = result_len(&r);
        match self {
            // Our own sentences are short; only a Tick's words can be long.
            CallError::Tool {
                tool,
                code,
                executed,
                ..
            } if observed > MAX_RESULT_BYTES => CallError::ErrorTooLarge {
                tool,
                code,
                executed,
                observed,
                limit: MAX_RESULT_BYTES,
            }
            .into_result(),
            _ => r,
        }
    }
}

/// A successful tool result as an MCP result, or `response_too_large`.
pub fn success(tool: &str, mut value: Value) -> CallToolResult {
    // Inert before the text is made from it, so the text stays valid JSON.
    tickbox_host::text::inert_value(&mut value);
    let text = match &value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let structured = match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    };
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    bounded(tool, r)
}

/// A facade tool's result: structured JSON plus a text of its choosing.
pub fn facade(tool: &str, structured: Value, text: String) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(structured);
    bounded(tool, r)
}

/// The kind of a failed result (`invalid_arguments`, …: the
/// [`CallError::kind`] it was made from) and its sentence; `(None, None)`
/// for a success. What telemetry records of a call the facade answered.
pub fn failure_of(result: &CallToolResult) -> (Option<&'static str>, Option<&str>) {
    if result.is_error != Some(true) {
        return (None, None);
    }
    let error = result.structured_content.as_ref().map(|v| &v["error"]);
    let kind = error.and_then(|e| e["kind"].as_str());
    const KINDS: [&str; 7] = [
        "tool_error",
        "catalog_changed",
        "invalid_arguments",
        "cancelled",
        "tick_ended",
        "unknown_outcome",
        "response_too_large",
    ];
    let kind = KINDS
        .into_iter()
        .find(|k| Some(*k) == kind)
        .unwrap_or("tool_error");
    let message = error.and_then(|e| e["message"].as_str());
    (Some(kind), message)
}

/// The encoded size of a result, without encoding it into memory.
pub fn result_len(result: &CallToolResult) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, result);
    counter.0
}

/// The wall every tool result passes on its way to a client: each text
/// block and the structured content go through the one character policy
/// ([`tickbox_host::text::escape_data`], [`tickbox_host::text::inert_value`]). Values
/// made inert earlier pass unchanged.
pub fn inert(mut result: CallToolResult) -> CallToolResult {
    for block in &mut result.content {
        if let Some(t) = block.as_text() {
            if !tickbox_host::text::is_inert_data(&t.text) {
                let escaped = tickbox_host::text::escape_data(&t.text);
                *block = ContentBlock::text(escaped);
            }
        }
    }
    if let Some(v) = result.structured_content.as_mut() {
        tickbox_host::text::inert_value(v);
    }
    result
}

/// Replaces a result over [`MAX_RESULT_BYTES`] by `response_too_large`.
pub fn bounded(tool: &str, result: CallToolResult) -> CallToolResult {
    let observed = result_len(&result);
    if observed <= MAX_RESULT_BYTES {
        return result;
    }
    CallError::TooLarge {
        tool: tool.into(),
        observed,
        limit: MAX_RESULT_BYTES,
    }
    .into_result()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &CallToolResult) -> String {
        r.content[0].as_text().unwrap().text.clone()
    }

    #[test]
    fn objects_are_structured_as_is_and_other_values_wrapped() {
        let r = success("t", json!({"value": 2}));
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(json!({"value": 2})));
        assert_eq!(text(&r), r#"{"value":2}"#);
        let r = success("t", json!([1, 2]));
        assert_eq!(r.structured_content, Some(json!({"result": [1, 2]})));
        let r = success("t", json!("plain"));
        assert_eq!(text(&r), "plain");
    }

    #[test]
    fn a_result_over_the_bound_is_replaced_whole() {
        let r = success("big", json!({"blob": "x".repeat(MAX_RESULT_BYTES)}));
        assert_eq!(r.is_error, Some(true));
        let e = &r.structured_content.as_ref().unwrap()["error"];
        assert_eq!(e["kind"], "response_too_large");
        assert_eq!(e["limit_bytes"], MAX_RESULT_BYTES);
        assert!(e["observed_bytes"].as_u64().unwrap() > MAX_RESULT_BYTES as u64);
        assert!(!text(&r).contains("xxxx"), "nothing of the result is kept");
    }

    #[test]
    fn an_error_over_the_bound_is_replaced_whole_with_its_code_and_effect() {
        for (message, data) in [
            ("m".repeat(8 * 1024 * 1024), None),
            (
                "short".to_string(),
                Some(json!({"blob": "d".repeat(MAX_RESULT_BYTES)})),
            ),
        ] {
            let r = CallError::Tool {
                tool: "bump".into(),
                code: -32000,
                message: message.into(),
                data,
                executed: false,
            }
            .into_result();
            assert!(result_len(&r) < 4096, "{} bytes", result_len(&r));
            let e = &r.structured_content.as_ref().unwrap()["error"];
            assert_eq!(e["kind"], "response_too_large");
            assert_eq!(
                (e["code"].as_i64(), e["executed"].as_bool()),
                (Some(-32000), Some(false))
            );
            assert!(e["observed_bytes"].as_u64().unwrap() > MAX_RESULT_BYTES as u64);
            assert!(!text(&r).contains("mmmm") && !text(&r).contains("dddd"));
        }
        // Just under the bound: the error itself, whole (positive control).
        let message = "k".repeat(MAX_RESULT_BYTES / 3 - 1024);
        let r = CallError::Tool {
            tool: "bump".into(),
            code: -32000,
            message: message.as_str().into(),
            data: None,
            executed: true,
        }
        .into_result();
        let e = &r.structured_content.as_ref().unwrap()["error"];
        assert_eq!(e["kind"], "tool_error");
        assert_eq!(e["tick_message"].as_str(), Some(message.as_str()));
        assert!(result_len(&r) <= MAX_RESULT_BYTES);
    }

    #[test]
    fn errors_say_whether_the_call_ran() {
        let e = CallError::Tool {
            tool: "bump".into(),
            code: -32000,
            message: "failed half-way".into(),
            data: Some(json!({"step": 2})),
            executed: true,
        };
        let r = e.into_result();
        let j = &r.structured_content.as_ref().unwrap()["error"];
        assert_eq!(
            (
                j["kind"].as_str(),
                j["code"].as_i64(),
                j["executed"].as_bool()
            ),
            (Some("tool_error"), Some(-32000), Some(true))
        );
        assert!(text(&r).contains("may have had effects"), "{}", text(&r));
        let u = CallError::Unknown {
            tool: "bump".into(),
            reason: "no response came within 60s".into(),
            mutates: true,
        };
        assert_eq!(u.to_json()["error"]["executed"], Value::Null);
        assert!(u.to_string().contains("did not retry"));
    }
}
