//! tick/describe results: the tool catalog, checked against every rule of §5.3.
//!
//! A [`Descriptor`] only exists once it has passed validation, and each tool
//! carries its compiled input schema, so preparing a call never re-parses a
//! schema and never sends args the schema rejects.

use super::limits::{MAX_DESCRIPTOR_BYTES, PROTOCOL_VERSION};
use super::message::encoded_len;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;

/// Why a descriptor was rejected. Each message names the §5.3 rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DescriptorError {
    /// The Tick speaks another protocol version (§4.3).
    #[error("unsupported Tick protocol version {found}; this host speaks Tick protocol {PROTOCOL_VERSION}")]
    UnsupportedVersion { found: String },
    /// Any other §5.3 rule.
    #[error("invalid tick/describe result (§5.3): {0}")]
    Invalid(String),
}

fn invalid(msg: impl Into<String>) -> DescriptorError {
    DescriptorError::Invalid(msg.into())
}

/// One tool of the catalog.
#[derive(Debug, Clone)]
pub struct Tool {
    /// Unique name within the catalog.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of its args, as the Tick declared it.
    pub input_schema: Value,
    /// Whether a call can change anything beyond its own result (§5.6).
    pub mutates: bool,
    validator: Arc<jsonschema::Validator>,
}

impl Tool {
    /// Checks args against the tool's schema, naming the first failing place.
    pub fn check_args(&self, args: &Value) -> Result<(), String> {
        match self.validator.iter_errors(args).next() {
            None => Ok(()),
            Some(e) => {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() {
                    "args".to_string()
                } else {
                    format!("args{at}")
                };
                Err(format!("{at}: {e}"))
            }
        }
    }
}

/// Where a time-ordered array lives in state data (§5.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// JSON Pointer into `data`; "" is `data` itself.
    pub path: String,
    /// Whether the newest element is at the end (`true`) or the start.
    pub newest_last: bool,
}

/// A validated tick/describe result.
#[derive(Debug, Clone)]
pub struct Descriptor {
    /// The result exactly as received (unknown fields kept, for display).
    pub raw: Value,
    /// What the program is, e.g. `example.counter`.
    pub kind: String,
    /// Short name for people and models.
    pub title: String,
    /// What the Tick shows and does.
    pub description: String,
    /// Names this catalog; compared only for equality.
    pub revision: String,
    /// The tools, in the Tick's order.
    pub tools: Vec<Tool>,
    /// The non-mutating query tool that recovers merged updates.
    pub recover_with: Option<String>,
    /// Declared time series in state data.
    pub series: Vec<Series>,
}

/// A call checked against one catalog revision, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedCall {
    /// Tool name.
    pub tool: String,
    /// Args, already valid against the tool's schema.
    pub args: Value,
    /// The revision the call was prepared (and approved) against.
    pub revision: String,
    /// Whether the tool mutates; decides approval and retry.
    pub mutates: bool,
}

/// Why a call could not be prepared; nothing was sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrepareError {
    /// No such tool in the catalog.
    #[error("unknown tool `{tool}`; the catalog has: {available}")]
    UnknownTool { tool: String, available: String },
    /// The args break the tool's input schema.
    #[error("args for `{tool}` do not match its input schema: {reason}")]
    InvalidArgs { tool: String, reason: String },
}

impl Descriptor {
    /// Validates a tick/describe result (§5.3).
    pub fn parse(raw: Value) -> Result<Descriptor, DescriptorError> {
        let Value::Object(obj) = &raw else {
            return Err(invalid("the result is not an object"));
        };
        // The version comes first: a Tick of another version fails with the
        // version message, not with whatever field it happens to lack.
        match obj.get("protocol") {
            Some(v) if v.as_u64() == Some(PROTOCOL_VERSION) => {}
            Some(v) => {
                return Err(DescriptorError::UnsupportedVersion {
                    found: v.to_string(),
                })
            }
            None => return Err(invalid("protocol is missing")),
        }
        let size = encoded_len(&raw);
        if size > MAX_DESCRIPTOR_BYTES {
            return Err(invalid(format!(
                "the encoded result is {size} bytes, over the {MAX_DESCRIPTOR_BYTES}-byte limit"
            )));
        }
        let kind = nonempty(obj, "kind")?;
        let title = nonempty(obj, "title")?;
        let description = string(obj, "description")?;
        let revision = string(obj, "revision")?;
        if revision.is_empty() {
            return Err(invalid("revision is an empty string"));
        }
        let tools = parse_tools(obj)?;
        let recover_with = match obj.get("recover_with") {
            None => None,
            Some(Value::String(name)) => match tools.iter().find(|t| &t.name == name) {
                None => {
                    return Err(invalid(format!(
                        "recover_with names `{name}`, which is not in the catalog"
                    )))
                }
                Some(t) if t.mutates => {
                    return Err(invalid(format!(
                        "recover_with names `{name}`, which mutates; it must be a query tool"
                    )))
                }
                Some(_) => Some(name.clone()),
            },
            Some(_) => return Err(invalid("recover_with is not a string")),
        };
        let series = parse_series(obj)?;
        Ok(Descriptor {
            kind,
            title,
            description,
            revision,
            tools,
            recover_with,
            series,
            raw,
        })
    }

    /// Finds a tool by name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Checks a call against this catalog and binds it to this revision.
    pub fn prepare(&self, tool: &str, args: Value) -> Result<PreparedCall, PrepareError> {
        let Some(t) = self.tool(tool) else {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(PrepareError::UnknownTool {
                tool: tool.into(),
                available: names.join(", "),
            });
        };
        t.check_args(&args)
            .map_err(|reason| PrepareError::InvalidArgs {
                tool: tool.into(),
                reason,
            })?;
        Ok(PreparedCall {
            tool: tool.into(),
            args,
            revision: self.revision.clone(),
            mutates: t.mutates,
        })
    }
}

fn string(obj: &Map<String, Value>, field: &str) -> Result<String, DescriptorError> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(invalid(format!("{field} is not a string"))),
        None => Err(invalid(format!("{field} is missing"))),
    }
}

fn nonempty(obj: &Map<String, Value>, field: &str) -> Result<String, DescriptorError> {
    let s = string(obj, field)?;
    if s.trim().is_empty() {
        return Err(invalid(format!(
            "{field} is empty after trimming whitespace"
        )));
    }
    Ok(s)
}

fn parse_tools(obj: &Map<String, Value>) -> Result<Vec<Tool>, DescriptorError> {
    let Some(Value::Array(list)) = obj.get("tools") else {
        return Err(invalid("tools is missing or not an array"));
    };
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let Value::Object(t) = t else {
            return Err(invalid(format!("tools[{i}] is not an object")));
        };
        let name = nonempty(t, "name").map_err(|e| invalid(format!("tools[{i}]: {}", strip(e))))?;
        if !seen.insert(name.clone()) {
            return Err(invalid(format!("tool name `{name}` is not unique")));
        }
        let description = string(t, "description")
            .map_err(|e| invalid(format!("tool `{name}`: {}", strip(e))))?;
        let mutates = match t.get("mutates") {
            Some(Value::Bool(b)) => *b,
            _ => {
                return Err(invalid(format!(
                    "tool `{name}`: mutates is missing or not a boolean"
                )))
            }
        };
        let input_schema = match t.get("input_schema") {
            Some(s @ Value::Object(_)) => s.clone(),
            _ => {
                return Err(invalid(format!(
                    "tool `{name}`: input_schema is missing or not an object"
                )))
            }
        };
        let validator = jsonschema::validator_for(&input_schema).map_err(|e| {
            invalid(format!(
                "tool `{name}`: input_schema is not a valid JSON Schema: {e}"
            ))
        })?;
        tools.push(Tool {
            name,
            description,
            input_schema,
            mutates,
            validator: Arc::new(validator),
        });
    }
    Ok(tools)
}

fn strip(e: DescriptorError) -> String {
    match e {
        DescriptorError::Invalid(s) => s,
        other => other.to_string(),
    }
}

fn parse_series(obj: &Map<String, Value>) -> Result<Vec<Series>, DescriptorError> {
    let list = match obj.get("state") {
        None => return Ok(Vec::new()),
        Some(Value::Object(state)) => match state.get("series") {
            None => return Ok(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(invalid("state.series is not an array")),
        },
        Some(_) => return Err(invalid("state is not an object")),
    };
    let mut seen = HashSet::new();
    let mut series = Vec::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let path = s
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("state.series[{i}].path is missing or not a string")))?;
        if !(path.is_empty() || path.starts_with('/')) {
            return Err(invalid(format!(
                "state.series path `{path}` must be empty or start with /"
            )));
        }
        if !seen.insert(path.to_string()) {
            return Err(invalid(format!("state.series path `{path}` is not unique")));
        }
        let newest_last = match s.get("newest").and_then(Value::as_str) {
            Some("last") => true,
            Some("first") => false,
            _ => {
                return Err(invalid(format!(
                    "state.series[{i}].newest must be \"first\" or \"last\""
                )))
            }
        };
        series.push(Series {
            path: path.to_string(),
            newest_last,
        });
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counter() -> Value {
        json!({"protocol":3,"kind":"example.counter","title":"Counter",
            "description":"Keyboard and tool calls share one value.","revision":"1",
            "tools":[{"name":"increment","description":"Add an integer to the counter.",
                      "input_schema":{"type":"object","properties":{"amount":{"type":"integer"}},
                                      "required":["amount"],"additionalProperties":false},
                      "mutates":true},
                     {"name":"history","description":"Read the last 256 changes.",
                      "input_schema":{"type":"object","additionalProperties":false},"mutates":false}],
            "recover_with":"history","state":{"series":[{"path":"/recent","newest":"last"}]}})
    }

    fn with(patch: impl FnOnce(&mut Value)) -> Result<Descriptor, DescriptorError> {
        let mut v = counter();
        patch(&mut v);
        Descriptor::parse(v)
    }

    #[test]
    fn appendix_a_descriptor_is_valid() {
        let d = Descriptor::parse(counter()).unwrap();
        assert_eq!(d.revision, "1");
        assert_eq!(d.recover_with.as_deref(), Some("history"));
        assert_eq!(
            d.series,
            vec![Series {
                path: "/recent".into(),
                newest_last: true
            }]
        );
    }

    #[test]
    fn version_mismatch_names_both_versions() {
        let e = with(|v| v["protocol"] = json!(2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unsupported Tick protocol version 2; this host speaks Tick protocol 3"
        );
    }

    #[test]
    fn each_rule_of_5_3_rejects() {
        type Patch = Box<dyn FnOnce(&mut Value)>;
        let cases: Vec<(&str, Patch)> = vec![
            ("kind", Box::new(|v| v["kind"] = json!("  "))),
            ("title", Box::new(|v| v["title"] = json!(""))),
            ("revision", Box::new(|v| v["revision"] = json!(""))),
            ("name", Box::new(|v| v["tools"][0]["name"] = json!(" "))),
            (
                "not unique",
                Box::new(|v| v["tools"][1]["name"] = json!("increment")),
            ),
            (
                "input_schema",
                Box::new(|v| v["tools"][0]["input_schema"] = json!(true)),
            ),
            (
                "valid JSON Schema",
                Box::new(|v| v["tools"][0]["input_schema"] = json!({"type": 5})),
            ),
            (
                "mutates",
                Box::new(|v| v["recover_with"] = json!("increment")),
            ),
            (
                "not in the catalog",
                Box::new(|v| v["recover_with"] = json!("nope")),
            ),
            (
                "start with /",
                Box::new(|v| v["state"]["series"][0]["path"] = json!("recent")),
            ),
            (
                "not unique",
                Box::new(|v| {
                    v["state"]["series"] =
                        json!([{"path":"","newest":"last"},{"path":"","newest":"first"}])
                }),
            ),
            (
                "limit",
                Box::new(|v| v["description"] = json!("x".repeat(MAX_DESCRIPTOR_BYTES))),
            ),
            (
                "mutates",
                Box::new(|v| {
                    v["tools"][0].as_object_mut().unwrap().remove("mutates");
                }),
            ),
        ];
        for (needle, patch) in cases {
            let e = with(patch).unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains("§5.3"),
                "expected `{needle}` in: {e}"
            );
        }
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert!(with(|v| v["future"] = json!({"x": 1})).is_ok());
    }

    #[test]
    fn prepare_checks_args_and_binds_the_revision() {
        let d = Descriptor::parse(counter()).unwrap();
        let call = d.prepare("increment", json!({"amount": 2})).unwrap();
        assert_eq!((call.revision.as_str(), call.mutates), ("1", true));
        assert!(matches!(
            d.prepare("increment", json!({"amount": "2"})),
            Err(PrepareError::InvalidArgs { .. })
        ));
        assert!(matches!(
            d.prepare("nope", json!({})),
            Err(PrepareError::UnknownTool { .. })
        ));
    }
}
