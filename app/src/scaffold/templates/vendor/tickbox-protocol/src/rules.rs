//! The table of Tick-side rules `tickbox check` examines.
//!
//! Every rule has a stable id (`group.name`, used to select rules ([`select`]) and
//! in every report format), the section of the protocol text it comes from, and a
//! severity: [`Severity::Must`] for the spec's MUST / MUST NOT (a failure makes
//! the check fail), [`Severity::Advisory`] for SHOULDs, the informative
//! guidance and heuristics (reported, never fatal).
//!
//! **Invariant:** ids are never renamed or reused; a rule that goes away is
//! removed, and a new rule gets a new id. CI configurations name them.

use serde::Serialize;

/// How much a failure of a rule matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A MUST of the spec: failing it fails the check (exit code 1).
    Must,
    /// A SHOULD, informative guidance or a heuristic: reported only.
    Advisory,
}

impl Severity {
    /// The lowercase name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Must => "must",
            Severity::Advisory => "advisory",
        }
    }
}

/// One Tick-side rule.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable id, `group.name`.
    pub id: &'static str,
    /// Section of the protocol text, e.g. `5.3`.
    pub section: &'static str,
    /// Whether a failure fails the check.
    pub severity: Severity,
    /// What a conforming Tick does, in one line.
    pub title: &'static str,
}

impl Rule {
    /// The group (the part of the id before the dot).
    pub fn group(&self) -> &'static str {
        self.id.split('.').next().unwrap_or(self.id)
    }
}

macro_rules! rules {
    ($($name:ident = $id:literal, $section:literal, $sev:ident, $title:literal;)*) => {
        $(
            #[doc = $title]
            pub const $name: &Rule = &Rule {
                id: $id,
                section: $section,
                severity: Severity::$sev,
                title: $title,
            };
        )*
        /// Every rule, in report order.
        pub const ALL: &[&Rule] = &[$($name),*];
    };
}

rules! {
    INIT_TIMELY = "init.timely", "4.2", Must,
        "tick/describe and tick/read each answer within 10 s, initialization within 10 s of start";

    DESCRIBE_VALID = "describe.valid", "5.3", Must,
        "the tick/describe result passes every validation rule a host applies";
    DESCRIBE_PROTOCOL = "describe.protocol", "4.3", Must,
        "protocol is 3, the version this host implements";
    DESCRIBE_FIELDS = "describe.fields", "5.3", Must,
        "kind and title nonempty; tool names nonempty and unique; descriptions strings; mutates booleans";
    DESCRIBE_REVISION = "describe.revision", "5.3", Must,
        "revision is a nonempty string";
    DESCRIBE_SCHEMAS = "describe.schemas", "5.3", Must,
        "each input_schema is an object and a valid JSON Schema";
    DESCRIBE_RECOVER_WITH = "describe.recover_with", "9", Must,
        "recover_with, if present, names a catalog tool declared mutates: false";
    DESCRIBE_SERIES = "describe.series", "5.3", Must,
        "state.series paths are \"\" or start with /, are unique, and newest is first or last";
    DESCRIBE_SIZE = "describe.size", "5.3", Must,
        "the encoded tick/describe result is at most 512 KiB";
    DESCRIBE_REVISION_STABLE = "describe.revision_stable", "5.5", Must,
        "the same revision always describes the same tool catalog";
    DESCRIBE_KIND_NAMING = "describe.kind_naming", "5.4", Advisory,
        "kind is a lowercase dot-separated name whose first part names the publisher";
    DESCRIBE_NO_SIDE_EFFECTS = "describe.no_side_effects", "4.4", Must,
        "repeated tick/describe changes no state and emits no update";
    DESCRIBE_PROMPT = "describe.prompt", "4.4", Advisory,
        "tick/describe answers within a few milliseconds (latency reported)";

    READ_VALID = "read.valid", "6.2", Must,
        "the tick/read result has a uinteger seq, data, and an RFC 3339 at if present";
    READ_NO_SIDE_EFFECTS = "read.no_side_effects", "4.4", Must,
        "repeated tick/read changes no state and emits no update";
    READ_PROMPT = "read.prompt", "4.4", Advisory,
        "tick/read answers within a few milliseconds (latency reported)";

    FRAMING_PROTOCOL_ONLY = "framing.protocol_only", "3.1", Must,
        "stdout carries only protocol messages: every line is JSON";
    FRAMING_JSONRPC = "framing.jsonrpc", "3.2", Must,
        "every message has \"jsonrpc\": \"2.0\" and an integer id or a method";
    FRAMING_NEWLINE = "framing.newline", "3.1", Must,
        "every message, the final one included, ends with a newline";
    FRAMING_LINE_LIMIT = "framing.line_limit", "3.6", Must,
        "no line exceeds 8 MiB";
    FRAMING_NO_INTERLEAVE = "framing.no_interleave", "3.1", Must,
        "under 8 concurrent requests every line is one complete message";
    FRAMING_ONE_RESPONSE = "framing.one_response", "3.2", Must,
        "each request gets exactly one response, with its id; no response to an id never sent";
    FRAMING_RESPONSE_SHAPE = "framing.response_shape", "3.2", Must,
        "a response has exactly one of result and error; an error has an integer code and a message";
    FRAMING_NO_NULL_ID = "framing.no_null_id", "3.2", Must,
        "no response carries id: null";
    FRAMING_GARBAGE_IGNORED = "framing.garbage_ignored", "3.2", Must,
        "unparseable lines and requests without a usable id are discarded without a reply";
    FRAMING_SURVIVES_GARBAGE = "framing.survives_garbage", "3.2", Advisory,
        "after discarding such lines the Tick keeps answering";
    FRAMING_NO_REQUESTS = "framing.no_requests", "3.2", Must,
        "the Tick sends no requests to the host";
    FRAMING_NOTIFICATIONS = "framing.notifications", "3.2", Advisory,
        "tick/update is the only notification the Tick sends";

    CALL_WRONG_REVISION = "call.wrong_revision", "7.2", Must,
        "a call with a stale revision gets -32004 and has no effect";
    CALL_UNKNOWN_TOOL = "call.unknown_tool", "7.2", Must,
        "a call to an unknown tool gets -32602 and has no effect";
    CALL_INVALID_ARGS = "call.invalid_args", "7.2", Must,
        "a call whose args break the input schema gets -32602 and has no effect";
    CALL_UNKNOWN_METHOD = "call.unknown_method", "3.4", Must,
        "a request with an unknown method gets -32601";
    CALL_NOT_EXECUTED_NO_EFFECT = "call.not_executed_no_effect", "3.4", Must,
        "a tool call answered with a \"not executed\" error code had no effect";
    CALL_CONCURRENT = "call.concurrent", "3.3", Must,
        "8 requests in flight at once are all answered";

    STATE_READ_FLOOR = "state.read_floor", "6.3", Must,
        "a read's seq is never below the previous read's nor the last update's";
    STATE_UPDATE_SEQ = "state.update_seq", "8.2", Must,
        "each tick/update seq is greater than every earlier one";
    STATE_UPDATE_VALID = "state.update_valid", "8.2", Must,
        "tick/update params are a state with non-null data and an RFC 3339 at if present";
    STATE_UPDATE_SIZE = "state.update_size", "8.2", Must,
        "each encoded tick/update is at most 512 KiB";
    STATE_NO_PRESENTATION_UPDATES = "state.no_presentation_updates", "8.3", Must,
        "resizing the terminal emits no tick/update";
    STATE_TYPICAL_SIZE = "state.typical_size", "6.4", Advisory,
        "typical state fits within about 4 KiB";

    TOOLS_MUTATES_HONEST = "tools.mutates_honest", "5.6", Advisory,
        "a tool declared mutates: false changes no state when called (heuristic)";

    LIFECYCLE_STDIN_EOF = "lifecycle.stdin_eof", "4.5", Advisory,
        "on stdin EOF the Tick answers in-flight requests, then exits promptly";
    LIFECYCLE_SIGTERM = "lifecycle.sigterm", "4.5", Advisory,
        "on SIGTERM to its process group the Tick exits promptly";
}

/// Finds a rule by id.
pub fn lookup(id: &str) -> Option<&'static Rule> {
    ALL.iter().copied().find(|r| r.id == id)
}

/// The rules a selection (`only`) picks: each entry is a rule id or a group
/// (`framing` selects every `framing.*` rule). Empty selects all.
pub fn select(only: &[String]) -> Result<Vec<&'static Rule>, String> {
    if only.is_empty() {
        return Ok(ALL.to_vec());
    }
    for o in only {
        if !ALL.iter().any(|r| r.id == o || r.group() == o) {
            return Err(format!(
                "unknown rule `{o}`; rules are: {}",
                ALL.iter().map(|r| r.id).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(ALL
        .iter()
        .copied()
        .filter(|r| only.iter().any(|o| r.id == o || r.group() == o))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for r in ALL {
            assert!(seen.insert(r.id), "duplicate id {}", r.id);
            let (group, name) = r.id.split_once('.').expect("group.name");
            assert!(!group.is_empty() && !name.is_empty() && !name.contains('.'));
            assert!(r
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_'));
        }
    }

    #[test]
    fn only_selects_ids_and_groups() {
        let s = select(&["framing".into(), "call.unknown_tool".into()]).unwrap();
        assert!(s
            .iter()
            .all(|r| r.group() == "framing" || r.id == "call.unknown_tool"));
        assert!(s.contains(&CALL_UNKNOWN_TOOL) && s.contains(&FRAMING_NEWLINE));
        assert!(select(&["nope".into()])
            .unwrap_err()
            .contains("unknown rule"));
        assert_eq!(select(&[]).unwrap().len(), ALL.len());
    }
}
