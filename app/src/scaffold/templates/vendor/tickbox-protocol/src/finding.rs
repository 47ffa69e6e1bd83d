//! Findings: one broken rule, named by its stable id, with what was seen.
//!
//! Every validator of this crate reports [`Finding`]s. The host turns a
//! finding of a MUST rule into a refusal or a session-ending violation; the
//! checker turns the findings into verdicts per rule. Both read the same
//! findings, so they cannot disagree about what a rule says.

use crate::rules::Rule;
use std::fmt;

/// A rule a Tick broke, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule, with its stable id and section.
    pub rule: &'static Rule,
    /// What was wrong, in one line (no trailing period).
    pub message: String,
}

impl Finding {
    /// A finding of `rule`.
    pub fn new(rule: &'static Rule, message: impl Into<String>) -> Finding {
        Finding {
            rule,
            message: message.into(),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (§{}, {})",
            self.message, self.rule.section, self.rule.id
        )
    }
}

impl std::error::Error for Finding {}
