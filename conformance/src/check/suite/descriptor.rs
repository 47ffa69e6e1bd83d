//! The descriptor rules (§5.3, §5.4, §5.5), each judged on its own so that
//! one broken field does not hide another.

use super::Suite;
use crate::check::driver::Exchange;
use serde_json::Value;
use tickbox_protocol::descriptor;
use tickbox_protocol::rules::{self, Rule};

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

    /// Each descriptor rule on its own, so one broken field does not hide
    /// another: the protocol crate's validator (the one the host refuses a
    /// catalog with) gives the findings, this turns them into verdicts.
    pub(super) fn judge_descriptor(&mut self, raw: &Value, ex: &Exchange) {
        let v = descriptor::validate(raw);
        self.measurements.descriptor_bytes = Some(v.encoded_bytes);
        if !raw.is_object() {
            // Nothing else can be judged of a result that is not an object.
            let problems = v
                .of(rules::DESCRIBE_FIELDS)
                .map(|f| f.message.clone())
                .collect();
            self.verdict_list(rules::DESCRIBE_FIELDS, problems, ex);
            return;
        }
        for &rule in descriptor::RULES {
            let problems: Vec<String> = v.of(rule).map(|f| f.message.clone()).collect();
            if rule.id == rules::DESCRIBE_KIND_NAMING.id
                && raw.get("kind").and_then(Value::as_str).is_none()
            {
                // Judged under describe.fields; naming needs a kind.
                continue;
            }
            let not_applicable = if !problems.is_empty() {
                None
            } else if rule.id == rules::DESCRIBE_RECOVER_WITH.id && !v.has_recover_with {
                Some("the descriptor has no recover_with")
            } else if rule.id == rules::DESCRIBE_SERIES.id && v.series_declared == 0 {
                Some("the descriptor declares no state.series")
            } else {
                None
            };
            if let Some(why) = not_applicable {
                self.tally.na(rule, why);
                continue;
            }
            if problems.is_empty() {
                let detail = match rule.id {
                    id if id == rules::DESCRIBE_SIZE.id => format!("{} bytes", v.encoded_bytes),
                    id if id == rules::DESCRIBE_RECOVER_WITH.id
                        || id == rules::DESCRIBE_KIND_NAMING.id =>
                    {
                        let field = if id == rules::DESCRIBE_RECOVER_WITH.id {
                            "recover_with"
                        } else {
                            "kind"
                        };
                        raw.get(field)
                            .and_then(Value::as_str)
                            .map(|s| format!("{s:?}"))
                            .unwrap_or_default()
                    }
                    _ => String::new(),
                };
                self.tally.pass(rule, detail);
            } else {
                self.verdict_list(rule, problems, ex);
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
