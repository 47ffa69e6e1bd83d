//! The JSON-RPC envelope: requests the host writes, and the classification of
//! every line a Tick writes.
//!
//! Reading is strict in the places §3.6 makes violations and lenient where the
//! spec asks the host to ignore things (unknown fields, notifications other
//! than tick/update). A parsed line becomes an [`Incoming`]; a line that breaks
//! a session-ending rule becomes a [`Violation`].

use crate::finding::Finding;
use crate::rules::{self, Rule};
use crate::text::TickText;
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// The method names of protocol 3.
pub mod method {
    /// Host → Tick: the tool catalog.
    pub const DESCRIBE: &str = "tick/describe";
    /// Host → Tick: the current state.
    pub const READ: &str = "tick/read";
    /// Host → Tick: run a tool.
    pub const CALL: &str = "tick/call";
    /// Tick → host notification: the state changed.
    pub const UPDATE: &str = "tick/update";
}

/// A request id assigned by the host; unique among requests in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Serialize)]
struct RequestFrame<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: RequestId,
    method: &'a str,
    params: &'a P,
}

/// Encodes one request as a complete line, newline included.
pub fn encode_request<P: Serialize>(id: RequestId, method: &str, params: &P) -> Vec<u8> {
    let frame = RequestFrame {
        jsonrpc: "2.0",
        id,
        method,
        params,
    };
    // Serialising a struct of strings, integers and already-parsed JSON values
    // cannot fail: serde_json only errors on non-string map keys and I/O.
    let mut line = serde_json::to_vec(&frame).unwrap_or_default();
    line.push(b'\n');
    line
}

/// A JSON-RPC error object as a Tick sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    /// The error code (§3.4).
    pub code: i64,
    /// Human-readable explanation (the Tick's text).
    pub message: TickText,
    /// Optional structured details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The body of a response, before the request it answers has judged it.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseBody {
    /// A `result` member, and no `error`.
    Result(Value),
    /// An `error` member, and no `result`.
    Error(RpcError),
    /// Both or neither of `result` and `error`, or an ill-formed `error`: this
    /// fails only the request it answers (§3.6).
    Malformed(String),
}

/// One line from a Tick's standard output, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A response to the request with this id (which may no longer be in flight).
    Response { id: i64, body: ResponseBody },
    /// A tick/update notification with its raw params (checked by the session).
    Update(Value),
    /// Any other notification, with its method name: ignored (§3.2).
    OtherNotification(TickText),
    /// A request from the Tick, with its method name. Ticks must not send
    /// requests (§3.2); the host ignores them rather than answer.
    Request(TickText),
}

/// A session-ending protocol violation (§3.6 and §8.2).
///
/// Displays as `protocol violation (§S, RULE): what`, naming the stable rule
/// id of [`Violation::rule`] and that rule's section.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Violation {
    /// A line is not valid JSON.
    InvalidJson {
        /// The parser's reason.
        detail: String,
        /// The start of the line, escaped.
        excerpt: String,
    },
    /// `jsonrpc` is missing or not "2.0".
    WrongJsonrpc {
        /// What was there instead.
        found: String,
    },
    /// Neither an integer id nor a method, including null and string ids.
    NoIdNorMethod {
        /// The id as sent, or why there is none.
        id: String,
    },
    /// Output ended without a final newline.
    Unterminated {
        /// How many bytes followed the last newline.
        bytes: usize,
    },
    /// A line longer than the limit.
    LineTooLong {
        /// The limit, newline excluded.
        limit: usize,
    },
    /// A tick/update that breaks §8.2 (the finding names the rule).
    BadUpdate(Finding),
}

impl Violation {
    /// The rule this violation breaks, by its stable id (the checker's table).
    pub fn rule(&self) -> &'static Rule {
        match self {
            Violation::InvalidJson { .. } => rules::FRAMING_PROTOCOL_ONLY,
            Violation::WrongJsonrpc { .. } => rules::FRAMING_JSONRPC,
            Violation::NoIdNorMethod { id } if id == "null" => rules::FRAMING_NO_NULL_ID,
            Violation::NoIdNorMethod { .. } => rules::FRAMING_JSONRPC,
            Violation::Unterminated { .. } => rules::FRAMING_NEWLINE,
            Violation::LineTooLong { .. } => rules::FRAMING_LINE_LIMIT,
            Violation::BadUpdate(f) => f.rule,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The section is the rule's own, the one `tickbox check` shows beside
        // the same id: one rule, one section, wherever it is named.
        let rule = self.rule();
        write!(f, "protocol violation (§{}, {}): ", rule.section, rule.id)?;
        match self {
            Violation::InvalidJson { detail, excerpt } => {
                write!(
                    f,
                    "a line on stdout is not valid JSON ({detail}): {excerpt}"
                )
            }
            Violation::WrongJsonrpc { found } => {
                write!(f, "jsonrpc must be \"2.0\", got {found}")
            }
            Violation::NoIdNorMethod { id } => {
                write!(
                    f,
                    "a message has neither an integer id nor a method (id {id})"
                )
            }
            Violation::Unterminated { bytes } => write!(
                f,
                "output ended without a final newline ({bytes} bytes unterminated)"
            ),
            Violation::LineTooLong { limit } => write!(f, "a line exceeds {limit} bytes"),
            Violation::BadUpdate(finding) => write!(f, "tick/update {}", finding.message),
        }
    }
}

impl std::error::Error for Violation {}

/// Keeps error messages one line and short whatever a Tick wrote.
pub fn excerpt(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text
        .chars()
        .take(max_chars)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().count() > max_chars {
        out.push('…');
    }
    out
}

fn describe_json(v: Option<&Value>) -> String {
    match v {
        None => "missing".to_string(),
        Some(v) => excerpt(v.to_string().as_bytes(), 40),
    }
}

/// Classifies one line (without its newline).
pub fn parse_line(line: &[u8]) -> Result<Incoming, Violation> {
    let value: Value = serde_json::from_slice(line).map_err(|e| Violation::InvalidJson {
        detail: e.to_string(),
        excerpt: excerpt(line, 80),
    })?;
    let Value::Object(mut obj) = value else {
        return Err(Violation::NoIdNorMethod {
            id: "missing (not an object)".into(),
        });
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Violation::WrongJsonrpc {
            found: describe_json(obj.get("jsonrpc")),
        });
    }
    if let Some(Value::String(method)) = obj.get("method") {
        if obj.contains_key("id") {
            return Ok(Incoming::Request(TickText::new(method.as_str())));
        }
        if method == method::UPDATE {
            return Ok(Incoming::Update(
                obj.remove("params").unwrap_or(Value::Null),
            ));
        }
        return Ok(Incoming::OtherNotification(TickText::new(method.as_str())));
    }
    let id = match obj.get("id") {
        // A float such as 3.0 is not an integer id, and neither is 2^64: both
        // come out of serde_json without an i64 value.
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().unwrap_or_default(),
        other => {
            return Err(Violation::NoIdNorMethod {
                id: describe_json(other),
            })
        }
    };
    Ok(Incoming::Response {
        id,
        body: response_body(&mut obj),
    })
}

fn response_body(obj: &mut Map<String, Value>) -> ResponseBody {
    match (obj.remove("result"), obj.remove("error")) {
        (Some(_), Some(_)) => {
            ResponseBody::Malformed("the response has both result and error".into())
        }
        (None, None) => ResponseBody::Malformed("the response has neither result nor error".into()),
        (Some(result), None) => ResponseBody::Result(result),
        (None, Some(error)) => match parse_error(error) {
            Ok(e) => ResponseBody::Error(e),
            Err(why) => ResponseBody::Malformed(why),
        },
    }
}

fn parse_error(error: Value) -> Result<RpcError, String> {
    let Value::Object(mut e) = error else {
        return Err("the error member is not an object".into());
    };
    let code = e
        .get("code")
        .and_then(Value::as_i64)
        .ok_or("the error has no integer code")?;
    let message = match e.remove("message") {
        Some(Value::String(m)) => m,
        _ => return Err("the error has no string message".into()),
    };
    Ok(RpcError {
        code,
        message: message.into(),
        data: e.remove("data"),
    })
}

/// A `Write` that only counts, so sizes can be measured without allocating.
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

/// The size of a value after re-encoding (§2.3), without building the bytes.
pub fn encoded_len(value: &Value) -> usize {
    let mut counter = Counter(0);
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Result<Incoming, Violation> {
        parse_line(s.as_bytes())
    }

    #[test]
    fn requests_are_one_line_with_jsonrpc() {
        let line = encode_request(RequestId(7), method::READ, &json!({}));
        assert_eq!(
            line,
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tick/read\",\"params\":{}}\n"
        );
    }

    #[test]
    fn classifies_responses_and_notifications() {
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":3,"result":{"a":1}}"#).unwrap(),
            Incoming::Response {
                id: 3,
                body: ResponseBody::Result(json!({"a":1}))
            }
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"tick/update","params":{"seq":1,"data":1}}"#)
                .unwrap(),
            Incoming::Update(json!({"seq":1,"data":1}))
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":"x/log"}"#).unwrap(),
            Incoming::OtherNotification("x/log".into())
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"host/do"}"#).unwrap(),
            Incoming::Request("host/do".into())
        );
    }

    #[test]
    fn session_ending_faults() {
        assert!(matches!(parse("hello"), Err(Violation::InvalidJson { .. })));
        assert!(matches!(
            parse(r#"{"jsonrpc":"1.0","id":1,"result":1}"#),
            Err(Violation::WrongJsonrpc { .. })
        ));
        assert!(matches!(
            parse(r#"{"id":1,"result":1}"#),
            Err(Violation::WrongJsonrpc { .. })
        ));
        for id in ["null", "\"1\"", "1.5", "3.0", "18446744073709551616"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":1}}"#);
            assert!(
                matches!(parse(&line), Err(Violation::NoIdNorMethod { .. })),
                "{line}"
            );
        }
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0"}"#),
            Err(Violation::NoIdNorMethod { .. })
        ));
        assert!(matches!(parse("[1]"), Err(Violation::NoIdNorMethod { .. })));
    }

    /// `tickbox check` shows a rule beside its section; a violation of the
    /// same rule must name the same section, or a reader sees two (§3.1 in
    /// the table, §3.6 in the why).
    #[test]
    fn a_violation_names_its_rules_own_section() {
        let faults = [
            parse("hello").unwrap_err(),
            parse(r#"{"jsonrpc":"1.0","id":1,"result":1}"#).unwrap_err(),
            parse(r#"{"jsonrpc":"2.0","id":null,"result":1}"#).unwrap_err(),
            parse(r#"{"jsonrpc":"2.0"}"#).unwrap_err(),
            Violation::Unterminated { bytes: 3 },
            Violation::LineTooLong { limit: 8 },
        ];
        let mut sections = std::collections::BTreeSet::new();
        for v in faults {
            let rule = v.rule();
            let text = v.to_string();
            assert!(
                text.starts_with(&format!(
                    "protocol violation (§{}, {}): ",
                    rule.section, rule.id
                )),
                "{text}"
            );
            sections.insert(rule.section);
        }
        // Control: the faults span rules of more than one section, so one
        // fixed section for every violation would fail above.
        assert!(sections.len() > 1, "{sections:?}");
    }

    #[test]
    fn per_request_faults_are_malformed_bodies() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#,
        ] {
            match parse(line).unwrap() {
                Incoming::Response {
                    body: ResponseBody::Malformed(_),
                    ..
                } => {}
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn sizes_are_measured_after_reencoding() {
        let v: Value = serde_json::from_str("[1e15]").unwrap();
        assert_eq!(encoded_len(&v), "[1000000000000000.0]".len());
        assert_eq!(encoded_len(&json!({"a":"é"})), r#"{"a":"é"}"#.len());
    }
}
