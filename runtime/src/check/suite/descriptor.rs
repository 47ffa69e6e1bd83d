//! The descriptor rules (§5.3, §5.4, §5.5), each judged on its own so that
//! one broken field does not hide another.

use super::Suite;
use crate::check::driver::Exchange;
use crate::check::rules::{self, Rule};
use crate::check::suite::Tally;
use crate::protocol::limits::{MAX_DESCRIPTOR_BYTES, PROTOCOL_VERSION};
use crate::protocol::message::encoded_len;
use serde_json::Value;
use std::collections::HashSet;

impl Suite<'_> {
    pub(super) fn remember_catalog(&mut self, raw: &Value, ex: &Exchange) {
        let (Some(rev), Some(tools)) = (
            raw.get("revision").and_then(Value::as_str),
            raw.get("tools"),
        ) else {
            return;
        };
        match self.catalogs.get(rev) {
            None => {
                self.catalogs.insert(rev.to_string(), tools.clone());
            }
            Some(first) if first == tools => {
                self.tally.pass(rules::DESCRIBE_REVISION_STABLE, "");
            }
            Some(_) => self.tally.fail(
                rules::DESCRIBE_REVISION_STABLE,
                format!("revision {rev:?} was described with a different tool catalog than before"),
                vec![ex.sent.clone()],
                vec![ex.received()],
            ),
        }
    }

    /// Each §5.3 rule on its own, so one broken field does not hide another.
    pub(super) fn judge_descriptor(&mut self, raw: &Value, ex: &Exchange) {
        let Some(obj) = raw.as_object() else {
            self.tally.fail(
                rules::DESCRIBE_FIELDS,
                "the result is not an object",
                vec![ex.sent.clone()],
                vec![ex.received()],
            );
            return;
        };
        let fail = |t: &mut Tally, rule: &Rule, why: String| {
            t.fail(rule, why, vec![ex.sent.clone()], vec![ex.received()]);
        };
        // protocol
        match obj.get("protocol") {
            Some(v) if v.as_u64() == Some(PROTOCOL_VERSION) => {
                self.tally.pass(rules::DESCRIBE_PROTOCOL, "")
            }
            Some(v) => fail(
                &mut self.tally,
                rules::DESCRIBE_PROTOCOL,
                format!("protocol is {v}; this host speaks Tick protocol {PROTOCOL_VERSION}"),
            ),
            None => fail(
                &mut self.tally,
                rules::DESCRIBE_PROTOCOL,
                "protocol is missing".into(),
            ),
        }
        // fields
        let mut problems = Vec::new();
        for f in ["kind", "title"] {
            match obj.get(f) {
                Some(Value::String(s)) if !s.trim().is_empty() => {}
                Some(Value::String(_)) => {
                    problems.push(format!("{f} is empty after trimming whitespace"))
                }
                Some(_) => problems.push(format!("{f} is not a string")),
                None => problems.push(format!("{f} is missing")),
            }
        }
        if !matches!(obj.get("description"), Some(Value::String(_))) {
            problems.push("description is missing or not a string".into());
        }
        let tools = obj.get("tools").and_then(Value::as_array);
        if tools.is_none() {
            problems.push("tools is missing or not an array".into());
        }
        let mut names = HashSet::new();
        let mut mutating = HashSet::new();
        let mut schema_problems = Vec::new();
        for (i, t) in tools.into_iter().flatten().enumerate() {
            let Some(t) = t.as_object() else {
                problems.push(format!("tools[{i}] is not an object"));
                continue;
            };
            let name = match t.get("name") {
                Some(Value::String(n)) if !n.trim().is_empty() => n.clone(),
                _ => {
                    problems.push(format!(
                        "tools[{i}].name is missing or empty after trimming"
                    ));
                    format!("tools[{i}]")
                }
            };
            if !names.insert(name.clone()) {
                problems.push(format!("tool name `{name}` is not unique"));
            }
            if !matches!(t.get("description"), Some(Value::String(_))) {
                problems.push(format!(
                    "tool `{name}`: description is missing or not a string"
                ));
            }
            match t.get("mutates") {
                Some(Value::Bool(true)) => {
                    mutating.insert(name.clone());
                }
                Some(Value::Bool(false)) => {}
                _ => problems.push(format!(
                    "tool `{name}`: mutates is missing or not a boolean"
                )),
            }
            match t.get("input_schema") {
                Some(s @ Value::Object(_)) => {
                    if let Err(e) = jsonschema::validator_for(s) {
                        schema_problems.push(format!(
                            "tool `{name}`: input_schema is not a valid JSON Schema: {e}"
                        ));
                    }
                }
                _ => schema_problems.push(format!(
                    "tool `{name}`: input_schema is missing or not an object"
                )),
            }
        }
        self.verdict_list(rules::DESCRIBE_FIELDS, problems, ex);
        self.verdict_list(rules::DESCRIBE_SCHEMAS, schema_problems, ex);
        // revision
        match obj.get("revision") {
            Some(Value::String(r)) if !r.is_empty() => {
                self.tally.pass(rules::DESCRIBE_REVISION, "")
            }
            Some(Value::String(_)) => fail(
                &mut self.tally,
                rules::DESCRIBE_REVISION,
                "revision is an empty string".into(),
            ),
            _ => fail(
                &mut self.tally,
                rules::DESCRIBE_REVISION,
                "revision is missing or not a string".into(),
            ),
        }
        // recover_with
        match obj.get("recover_with") {
            None => self.tally.na(
                rules::DESCRIBE_RECOVER_WITH,
                "the descriptor has no recover_with",
            ),
            Some(Value::String(n)) if !names.contains(n) => fail(
                &mut self.tally,
                rules::DESCRIBE_RECOVER_WITH,
                format!("recover_with names `{n}`, which is not in the catalog"),
            ),
            Some(Value::String(n)) if mutating.contains(n) => fail(
                &mut self.tally,
                rules::DESCRIBE_RECOVER_WITH,
                format!("recover_with names `{n}`, which is declared mutates: true"),
            ),
            Some(Value::String(n)) => self
                .tally
                .pass(rules::DESCRIBE_RECOVER_WITH, format!("`{n}`")),
            Some(_) => fail(
                &mut self.tally,
                rules::DESCRIBE_RECOVER_WITH,
                "recover_with is not a string".into(),
            ),
        }
        // series
        let mut series_problems = Vec::new();
        let mut series_count = 0;
        match obj.get("state") {
            None => {}
            Some(Value::Object(state)) => match state.get("series") {
                None => {}
                Some(Value::Array(list)) => {
                    let mut paths = HashSet::new();
                    for (i, s) in list.iter().enumerate() {
                        series_count += 1;
                        match s.get("path") {
                            Some(Value::String(p)) if p.is_empty() || p.starts_with('/') => {
                                if !paths.insert(p.clone()) {
                                    series_problems
                                        .push(format!("state.series path {p:?} is not unique"));
                                }
                            }
                            Some(Value::String(p)) => series_problems.push(format!(
                                "state.series[{i}].path {p:?} must be empty or start with /"
                            )),
                            _ => series_problems
                                .push(format!("state.series[{i}].path is missing or not a string")),
                        }
                        if !matches!(
                            s.get("newest").and_then(Value::as_str),
                            Some("first" | "last")
                        ) {
                            series_problems.push(format!(
                                "state.series[{i}].newest must be \"first\" or \"last\""
                            ));
                        }
                    }
                }
                Some(_) => series_problems.push("state.series is not an array".into()),
            },
            Some(_) => series_problems.push("state is not an object".into()),
        }
        if series_count == 0 && series_problems.is_empty() {
            self.tally.na(
                rules::DESCRIBE_SERIES,
                "the descriptor declares no state.series",
            );
        } else {
            self.verdict_list(rules::DESCRIBE_SERIES, series_problems, ex);
        }
        // size
        let size = encoded_len(raw);
        self.measurements.descriptor_bytes = Some(size);
        if size > MAX_DESCRIPTOR_BYTES {
            fail(&mut self.tally, rules::DESCRIBE_SIZE, format!("the encoded result is {size} bytes, over the {MAX_DESCRIPTOR_BYTES}-byte limit"));
        } else {
            self.tally
                .pass(rules::DESCRIBE_SIZE, format!("{size} bytes"));
        }
        // kind naming (advisory)
        if let Some(kind) = obj.get("kind").and_then(Value::as_str) {
            if kind_is_conventional(kind) {
                self.tally
                    .pass(rules::DESCRIBE_KIND_NAMING, format!("{kind:?}"));
            } else {
                fail(&mut self.tally, rules::DESCRIBE_KIND_NAMING, format!("kind {kind:?} is not a lowercase dot-separated name such as \"example.counter\""));
            }
        }
    }

    pub(super) fn verdict_list(&mut self, rule: &Rule, problems: Vec<String>, ex: &Exchange) {
        if problems.is_empty() {
            self.tally.pass(rule, "");
        } else {
            self.tally.fail(
                rule,
                problems.join("; "),
                vec![ex.sent.clone()],
                vec![ex.received()],
            );
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_naming() {
        assert!(kind_is_conventional("example.counter"));
        assert!(kind_is_conventional("acme.order-book"));
        assert!(!kind_is_conventional("Counter"));
        assert!(!kind_is_conventional("counter"));
        assert!(!kind_is_conventional("Acme.Counter"));
        assert!(!kind_is_conventional("acme..counter"));
    }
}
