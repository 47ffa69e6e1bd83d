//! tick/describe results: the tool catalog, checked against every rule of
//! §5.3 (and §4.3, §5.4, §9) by one validator.
//!
//! [`validate`] examines a result field by field and returns every
//! [`Finding`], so one broken field does not hide another: `tickbox check`
//! turns them into verdicts per rule. [`Descriptor::parse`] runs the same
//! validator and refuses the catalog on the first finding of a MUST rule:
//! the host turns it into an initialization failure. A [`Descriptor`] only
//! exists once it has passed, and each tool carries its compiled input
//! schema, so preparing a call never re-parses a schema and never sends args
//! the schema rejects.

use crate::finding::Finding;
use crate::limits::{MAX_DESCRIPTOR_BYTES, PROTOCOL_VERSION};
use crate::message::encoded_len;
use crate::rules::{self, Rule, Severity};
use crate::schema::SchemaCache;
use crate::text::TickText;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

/// The rules [`validate`] judges, in the order it reports them.
pub const RULES: &[&Rule] = &[
    rules::DESCRIBE_PROTOCOL,
    rules::DESCRIBE_SIZE,
    rules::DESCRIBE_FIELDS,
    rules::DESCRIBE_REVISION,
    rules::DESCRIBE_SCHEMAS,
    rules::DESCRIBE_RECOVER_WITH,
    rules::DESCRIBE_SERIES,
    rules::DESCRIBE_KIND_NAMING,
];

/// Why a descriptor was rejected. Each message names the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorError {
    /// The Tick speaks another protocol version (§4.3).
    #[error("unsupported Tick protocol version {found}; this host speaks Tick protocol {PROTOCOL_VERSION}")]
    UnsupportedVersion {
        /// The `protocol` value the Tick sent.
        found: String,
    },
    /// Any other MUST rule of the descriptor (all are §5.3 host checks; the
    /// finding names the rule and its own section).
    #[error("invalid tick/describe result (§5.3, {}): {}", .0.rule.id, .0.message)]
    Invalid(Finding),
}

impl DescriptorError {
    /// The rule the descriptor broke.
    pub fn rule(&self) -> &'static Rule {
        match self {
            DescriptorError::UnsupportedVersion { .. } => rules::DESCRIBE_PROTOCOL,
            DescriptorError::Invalid(f) => f.rule,
        }
    }
}

/// Why a tool's args were rejected: the first failing place and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {reason}")]
pub struct ArgsError {
    /// Where in the args, e.g. `args/amount`.
    pub at: String,
    /// What the schema says is wrong there.
    pub reason: String,
}

/// One tool of the catalog.
#[derive(Debug, Clone)]
pub struct Tool {
    /// Unique name within the catalog.
    pub name: TickText,
    /// What the tool does.
    pub description: TickText,
    /// JSON Schema of its args, as the Tick declared it.
    pub input_schema: Value,
    /// Whether a call can change anything beyond its own result (§5.6).
    pub mutates: bool,
    validator: Arc<jsonschema::Validator>,
}

impl Tool {
    /// Checks args against the tool's schema, naming the first failing place.
    pub fn check_args(&self, args: &Value) -> Result<(), ArgsError> {
        match self.validator.iter_errors(args).next() {
            None => Ok(()),
            Some(e) => {
                let at = e.instance_path().to_string();
                Err(ArgsError {
                    at: format!("args{at}"),
                    reason: e.to_string(),
                })
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
    pub kind: TickText,
    /// Short name for people and models.
    pub title: TickText,
    /// What the Tick shows and does.
    pub description: TickText,
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
#[non_exhaustive]
pub enum PrepareError {
    /// No such tool in the catalog.
    #[error("unknown tool `{tool}`; the catalog has: {available}")]
    UnknownTool {
        /// The name asked for.
        tool: String,
        /// The catalog's tool names, comma-separated.
        available: String,
    },
    /// The args break the tool's input schema.
    #[error("args for `{tool}` do not match its input schema: {reason}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// The first failing place and why.
        reason: ArgsError,
    },
}

/// What [`validate`] found, and what it built on the way.
#[derive(Debug)]
pub struct Validation {
    /// Every broken rule, MUST and advisory, in [`RULES`] order.
    pub findings: Vec<Finding>,
    /// The encoded size of the result (§5.3 measures after re-encoding).
    pub encoded_bytes: usize,
    /// Whether `recover_with` was present (the checker reports "not applicable" otherwise).
    pub has_recover_with: bool,
    /// How many `state.series` entries were declared.
    pub series_declared: usize,
    tools: Vec<Tool>,
    series: Vec<Series>,
}

impl Validation {
    /// The first finding of a MUST rule, if any: what makes a host refuse.
    pub fn first_violation(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .find(|f| f.rule.severity == Severity::Must)
    }

    /// The findings of one rule.
    pub fn of(&self, rule: &Rule) -> impl Iterator<Item = &Finding> + '_ {
        let id = rule.id;
        self.findings.iter().filter(move |f| f.rule.id == id)
    }
}

/// Examines a tick/describe result against every descriptor rule ([`RULES`]).
///
/// Each input schema is compiled (jsonschema, no remote references), so a
/// descriptor this accepts can serve calls without compiling again.
pub fn validate(raw: &Value) -> Validation {
    validate_with(raw, &mut SchemaCache::new())
}

/// [`validate`], compiling input schemas through `schemas`: a schema
/// compiled before is taken from it (a host keeps one per Tick, so a new
/// revision recompiles only the schemas that changed).
pub fn validate_with(raw: &Value, schemas: &mut SchemaCache) -> Validation {
    schemas.begin_catalog();
    let mut v = Validation {
        findings: Vec::new(),
        encoded_bytes: encoded_len(raw),
        has_recover_with: false,
        series_declared: 0,
        tools: Vec::new(),
        series: Vec::new(),
    };
    let Value::Object(obj) = raw else {
        v.findings.push(Finding::new(
            rules::DESCRIBE_FIELDS,
            "the result is not an object",
        ));
        return v;
    };
    let mut out: Vec<Finding> = Vec::new();
    let mut fail = |rule: &'static Rule, message: String| out.push(Finding::new(rule, message));

    // §4.3: the version comes first, so a Tick of another version is told so
    // rather than about whatever field it happens to lack.
    match obj.get("protocol") {
        Some(p) if p.as_u64() == Some(PROTOCOL_VERSION) => {}
        Some(p) => fail(
            rules::DESCRIBE_PROTOCOL,
            format!("protocol is {p}; this host speaks Tick protocol {PROTOCOL_VERSION}"),
        ),
        None => fail(rules::DESCRIBE_PROTOCOL, "protocol is missing".into()),
    }
    if v.encoded_bytes > MAX_DESCRIPTOR_BYTES {
        fail(
            rules::DESCRIBE_SIZE,
            format!(
                "the encoded result is {} bytes, over the {MAX_DESCRIPTOR_BYTES}-byte limit",
                v.encoded_bytes
            ),
        );
    }
    for field in ["kind", "title"] {
        match obj.get(field) {
            Some(Value::String(s)) if !s.trim().is_empty() => {}
            Some(Value::String(_)) => fail(
                rules::DESCRIBE_FIELDS,
                format!("{field} is empty after trimming whitespace"),
            ),
            Some(_) => fail(rules::DESCRIBE_FIELDS, format!("{field} is not a string")),
            None => fail(rules::DESCRIBE_FIELDS, format!("{field} is missing")),
        }
    }
    if !matches!(obj.get("description"), Some(Value::String(_))) {
        fail(
            rules::DESCRIBE_FIELDS,
            "description is missing or not a string".into(),
        );
    }
    match obj.get("revision") {
        Some(Value::String(r)) if !r.is_empty() => {}
        Some(Value::String(_)) => fail(
            rules::DESCRIBE_REVISION,
            "revision is an empty string".into(),
        ),
        _ => fail(
            rules::DESCRIBE_REVISION,
            "revision is missing or not a string".into(),
        ),
    }

    // Tools: fields (§5.3) and schemas, each tool on its own.
    let mut names = HashSet::new();
    let mut mutating = HashSet::new();
    match obj.get("tools") {
        Some(Value::Array(list)) => {
            for (i, t) in list.iter().enumerate() {
                let Value::Object(t) = t else {
                    fail(
                        rules::DESCRIBE_FIELDS,
                        format!("tools[{i}] is not an object"),
                    );
                    continue;
                };
                let name = match t.get("name") {
                    Some(Value::String(n)) if !n.trim().is_empty() => n.clone(),
                    other => {
                        let why = if matches!(other, Some(Value::String(_))) {
                            "is empty after trimming whitespace"
                        } else {
                            "is missing or not a string"
                        };
                        fail(rules::DESCRIBE_FIELDS, format!("tools[{i}]: name {why}"));
                        format!("tools[{i}]")
                    }
                };
                if !names.insert(name.clone()) {
                    fail(
                        rules::DESCRIBE_FIELDS,
                        format!("tool name `{name}` is not unique"),
                    );
                }
                let description = match t.get("description") {
                    Some(Value::String(d)) => d.clone(),
                    _ => {
                        fail(
                            rules::DESCRIBE_FIELDS,
                            format!("tool `{name}`: description is missing or not a string"),
                        );
                        String::new()
                    }
                };
                let mutates = match t.get("mutates") {
                    Some(Value::Bool(b)) => *b,
                    _ => {
                        fail(
                            rules::DESCRIBE_FIELDS,
                            format!("tool `{name}`: mutates is missing or not a boolean"),
                        );
                        false
                    }
                };
                if mutates {
                    mutating.insert(name.clone());
                }
                let input_schema = match t.get("input_schema") {
                    Some(s @ Value::Object(_)) => s,
                    _ => {
                        fail(
                            rules::DESCRIBE_SCHEMAS,
                            format!("tool `{name}`: input_schema is missing or not an object"),
                        );
                        continue;
                    }
                };
                match schemas.compile(input_schema) {
                    Ok(compiled) => v.tools.push(Tool {
                        name: name.into(),
                        description: description.into(),
                        input_schema: input_schema.clone(),
                        mutates,
                        validator: compiled,
                    }),
                    Err(e) => fail(
                        rules::DESCRIBE_SCHEMAS,
                        format!("tool `{}`: {e}", TickText::new(name.as_str())),
                    ),
                }
            }
        }
        _ => fail(
            rules::DESCRIBE_FIELDS,
            "tools is missing or not an array".into(),
        ),
    }

    // §9: recover_with names a query tool of this catalog.
    match obj.get("recover_with") {
        None => {}
        Some(r) => {
            v.has_recover_with = true;
            match r {
                Value::String(n) if !names.contains(n) => fail(
                    rules::DESCRIBE_RECOVER_WITH,
                    format!("recover_with names `{n}`, which is not in the catalog"),
                ),
                Value::String(n) if mutating.contains(n) => fail(
                    rules::DESCRIBE_RECOVER_WITH,
                    format!("recover_with names `{n}`, which mutates; it must be a query tool"),
                ),
                Value::String(_) => {}
                _ => fail(
                    rules::DESCRIBE_RECOVER_WITH,
                    "recover_with is not a string".into(),
                ),
            }
        }
    }

    // §5.3: declared series.
    match obj.get("state") {
        None => {}
        Some(Value::Object(state)) => match state.get("series") {
            None => {}
            Some(Value::Array(list)) => {
                let mut paths = HashSet::new();
                for (i, s) in list.iter().enumerate() {
                    v.series_declared += 1;
                    let path = match s.get("path") {
                        Some(Value::String(p)) if p.is_empty() || p.starts_with('/') => {
                            if !paths.insert(p.clone()) {
                                fail(
                                    rules::DESCRIBE_SERIES,
                                    format!("state.series path `{p}` is not unique"),
                                );
                            }
                            Some(p.clone())
                        }
                        Some(Value::String(p)) => {
                            fail(
                                rules::DESCRIBE_SERIES,
                                format!(
                                    "state.series[{i}].path {p:?} must be empty or start with /"
                                ),
                            );
                            None
                        }
                        _ => {
                            fail(
                                rules::DESCRIBE_SERIES,
                                format!("state.series[{i}].path is missing or not a string"),
                            );
                            None
                        }
                    };
                    let newest_last = match s.get("newest").and_then(Value::as_str) {
                        Some("last") => Some(true),
                        Some("first") => Some(false),
                        _ => {
                            fail(
                                rules::DESCRIBE_SERIES,
                                format!("state.series[{i}].newest must be \"first\" or \"last\""),
                            );
                            None
                        }
                    };
                    if let (Some(path), Some(newest_last)) = (path, newest_last) {
                        v.series.push(Series { path, newest_last });
                    }
                }
            }
            Some(_) => fail(
                rules::DESCRIBE_SERIES,
                "state.series is not an array".into(),
            ),
        },
        Some(_) => fail(rules::DESCRIBE_SERIES, "state is not an object".into()),
    }

    // §5.4 (advisory): the kind's naming convention.
    if let Some(kind) = obj.get("kind").and_then(Value::as_str) {
        if !kind_is_conventional(kind) {
            fail(
                rules::DESCRIBE_KIND_NAMING,
                format!("kind {kind:?} is not a lowercase dot-separated name such as \"example.counter\""),
            );
        }
    }

    // Report in RULES order (stable sort keeps each rule's own order).
    out.sort_by_key(|f| {
        RULES
            .iter()
            .position(|r| r.id == f.rule.id)
            .unwrap_or(RULES.len())
    });
    v.findings = out;
    v
}

/// §5.4: lowercase, dot-separated, at least two nonempty components.
pub fn kind_is_conventional(kind: &str) -> bool {
    let parts: Vec<&str> = kind.split('.').collect();
    parts.len() >= 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        })
}

impl Descriptor {
    /// Validates a tick/describe result ([`validate`]) and refuses it on the
    /// first MUST finding.
    pub fn parse(raw: Value) -> Result<Descriptor, DescriptorError> {
        Descriptor::parse_with(raw, &mut SchemaCache::new())
    }

    /// [`parse`](Self::parse), compiling input schemas through `schemas`
    /// ([`validate_with`]).
    pub fn parse_with(
        raw: Value,
        schemas: &mut SchemaCache,
    ) -> Result<Descriptor, DescriptorError> {
        let v = validate_with(&raw, schemas);
        if let Some(f) = v.first_violation() {
            if f.rule.id == rules::DESCRIBE_PROTOCOL.id {
                if let Some(p) = raw.get("protocol") {
                    return Err(DescriptorError::UnsupportedVersion {
                        found: p.to_string(),
                    });
                }
            }
            return Err(DescriptorError::Invalid(f.clone()));
        }
        // Every field below was checked by `validate`.
        let text = |field: &str| {
            raw.get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(Descriptor {
            kind: TickText::new(text("kind")),
            title: TickText::new(text("title")),
            description: TickText::new(text("description")),
            revision: text("revision"),
            recover_with: raw
                .get("recover_with")
                .and_then(Value::as_str)
                .map(str::to_string),
            tools: v.tools,
            series: v.series,
            raw,
        })
    }

    /// Finds a tool by name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name.wire() == name)
    }

    /// Checks a call against this catalog and binds it to this revision.
    pub fn prepare(&self, tool: &str, args: Value) -> Result<PreparedCall, PrepareError> {
        let Some(t) = self.tool(tool) else {
            // The names are the Tick's text: escaped into the message.
            let names: Vec<String> = self.tools.iter().map(|t| t.name.line()).collect();
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
