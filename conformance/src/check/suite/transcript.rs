//! The rules that hold of every line of a session (framing, ids, the update
//! sequence, the read floor), judged on its whole transcript, and the rules
//! judged once at the end over everything seen (sizes, latency).

use super::{ms, suffix, Suite, PROMPT_ADVISORY};
use crate::check::driver::{Driver, Line, OutputEnd, Parsed, READ};
use crate::check::rules;
use serde_json::Value;
use std::collections::HashMap;
use tickbox_protocol::limits::{DELIVERY_ITEM_BUDGET_BYTES, MAX_UINTEGER};
use tickbox_protocol::message::encoded_len;
use tickbox_protocol::state::{check_read_floor, update_findings, UPDATE_RULES};
use tickbox_protocol::{Incoming, ResponseBody};

impl Suite<'_> {
    // ----- whole-transcript rules -----

    /// The rules that hold of every line of a session.
    pub(super) fn analyze(&mut self, d: &Driver, missing_is_failure: bool) {
        let t = &mut self.tally;
        let mut bad = [0usize; 5];
        for l in &d.lines {
            match &l.parsed {
                Parsed::Bad(v) => {
                    // The rule comes from the protocol crate, as the host
                    // would end the session over this line.
                    let rule = v.rule();
                    let slot = [
                        rules::FRAMING_PROTOCOL_ONLY,
                        rules::FRAMING_JSONRPC,
                        rules::FRAMING_NO_NULL_ID,
                    ]
                    .iter()
                    .position(|r| r.id == rule.id)
                    .unwrap_or(1);
                    bad[slot] += 1;
                    // A null id is a response to something sent: show what.
                    let sent = if slot == 2 {
                        d.sent_raw.clone()
                    } else {
                        vec![]
                    };
                    t.fail(rule, v.to_string(), sent, vec![l.excerpt()]);
                }
                Parsed::Message(Incoming::Request(m)) => {
                    bad[3] += 1;
                    t.fail(
                        rules::FRAMING_NO_REQUESTS,
                        format!("the Tick sent a {m} request"),
                        vec![],
                        vec![l.excerpt()],
                    );
                }
                Parsed::Message(Incoming::OtherNotification(m)) => {
                    bad[4] += 1;
                    t.fail(
                        rules::FRAMING_NOTIFICATIONS,
                        format!("the Tick sent a {m} notification"),
                        vec![],
                        vec![l.excerpt()],
                    );
                }
                Parsed::Message(Incoming::Response {
                    body: ResponseBody::Malformed(why),
                    ..
                }) => {
                    t.fail(
                        rules::FRAMING_RESPONSE_SHAPE,
                        why.clone(),
                        vec![],
                        vec![l.excerpt()],
                    );
                }
                Parsed::Message(_) => {}
            }
        }
        let lines = d.lines.len();
        for (i, rule) in [
            rules::FRAMING_PROTOCOL_ONLY,
            rules::FRAMING_JSONRPC,
            rules::FRAMING_NO_NULL_ID,
            rules::FRAMING_NO_REQUESTS,
            rules::FRAMING_NOTIFICATIONS,
        ]
        .into_iter()
        .enumerate()
        {
            if bad[i] == 0 && lines > 0 {
                t.pass(rule, "");
            }
        }
        if d.lines.iter().any(|l| l.response_id().is_some()) {
            t.pass(rules::FRAMING_RESPONSE_SHAPE, "");
        }
        match &d.end {
            Some(OutputEnd::Unterminated(rest)) => t.fail(
                rules::FRAMING_NEWLINE,
                format!("output ended with {} bytes and no newline", rest.len()),
                vec![],
                vec![crate::check::driver::excerpt(rest)],
            ),
            Some(OutputEnd::TooLong) => t.fail(
                rules::FRAMING_LINE_LIMIT,
                format!(
                    "a line exceeds {} bytes",
                    tickbox_protocol::limits::MAX_LINE_BYTES
                ),
                vec![],
                vec![],
            ),
            Some(OutputEnd::Clean) => {
                t.pass(rules::FRAMING_NEWLINE, "");
                t.pass(rules::FRAMING_LINE_LIMIT, "");
            }
            Some(OutputEnd::Io(_)) | None => t.pass(rules::FRAMING_LINE_LIMIT, ""),
        }

        // Exactly one response per request, with its id.
        let mut counts: HashMap<i64, usize> = HashMap::new();
        for l in &d.lines {
            if let Some(id) = l.response_id() {
                *counts.entry(id).or_default() += 1;
            }
        }
        let mut ok = true;
        for s in &d.sent {
            match counts.remove(&(s.id as i64)).unwrap_or(0) {
                1 => {}
                0 if !missing_is_failure => {}
                0 => {
                    ok = false;
                    t.fail(
                        rules::FRAMING_ONE_RESPONSE,
                        format!(
                            "request {} ({}) was never answered{}",
                            s.id,
                            s.method,
                            suffix(&d.ending())
                        ),
                        vec![s.line.clone()],
                        vec!["(no response)".into()],
                    );
                }
                n => {
                    ok = false;
                    let got = d
                        .lines
                        .iter()
                        .filter(|l| l.response_id() == Some(s.id as i64))
                        .map(|l| l.excerpt())
                        .collect();
                    t.fail(
                        rules::FRAMING_ONE_RESPONSE,
                        format!("request {} ({}) was answered {n} times", s.id, s.method),
                        vec![s.line.clone()],
                        got,
                    );
                }
            }
        }
        for (id, _) in counts {
            ok = false;
            let got = d
                .lines
                .iter()
                .filter(|l| l.response_id() == Some(id))
                .map(|l| l.excerpt())
                .collect();
            t.fail(
                rules::FRAMING_ONE_RESPONSE,
                format!("a response carries id {id}, which no request had"),
                d.sent_raw.clone(),
                got,
            );
        }
        if ok && !d.sent.is_empty() {
            t.pass(rules::FRAMING_ONE_RESPONSE, "");
        }

        // Updates: §8.2, and the read floor of §6.3, in arrival order.
        let mut last_update: Option<u64> = None;
        for l in &d.lines {
            let Some(params) = l.update() else { continue };
            self.any_update = true;
            let t = &mut self.tally;
            // The host's own §8.2 validator, every finding of it.
            let (state, findings) = update_findings(params, last_update);
            for &rule in UPDATE_RULES {
                let problems: Vec<String> = findings
                    .iter()
                    .filter(|f| f.rule.id == rule.id)
                    .map(|f| format!("tick/update {}", f.message))
                    .collect();
                if problems.is_empty() {
                    // A seq rule needs a seq; an invalid shape has none.
                    if state.is_some() || rule.id != rules::STATE_UPDATE_SEQ.id {
                        t.pass(rule, "");
                    }
                } else {
                    t.fail(rule, problems.join("; "), vec![], vec![l.excerpt()]);
                }
            }
            let Some(state) = state else { continue };
            if !state.data.is_null() {
                self.state_sizes.push(encoded_len(state.data.wire()));
            }
            last_update = Some(last_update.map_or(state.seq, |p| p.max(state.seq)));
        }
        let t = &mut self.tally;
        // Read floor: for each read, the greater of the previous read's seq
        // and the last update's, both as received before the read was sent.
        for s in d.sent.iter().filter(|s| s.method == READ) {
            let Some(resp) = d.response(s.id) else {
                continue;
            };
            let Some(seq) = read_seq(resp) else { continue };
            let mut floor: Option<(u64, String)> = None;
            let mut raise = |v: u64, why: String| {
                if floor.as_ref().is_none_or(|(f, _)| v > *f) {
                    floor = Some((v, why));
                }
            };
            for l in d.lines.iter().filter(|l| l.at < s.at) {
                if let Some(u) = l
                    .update()
                    .and_then(|p| p.get("seq"))
                    .and_then(Value::as_u64)
                {
                    raise(u, format!("tick/update seq {u}"));
                }
            }
            for prev in d.sent.iter().filter(|p| p.method == READ && p.id != s.id) {
                if let Some(r) = d.response(prev.id).filter(|r| r.at < s.at) {
                    if let Some(v) = read_seq(r) {
                        raise(v, format!("the previous read's seq {v}"));
                    }
                }
            }
            let Some((f, why)) = floor else { continue };
            match check_read_floor(seq, Some(f)) {
                Err(finding) => t.fail(
                    finding.rule,
                    format!("{}: {why} received before it was sent", finding.message),
                    vec![s.line.clone()],
                    vec![resp.excerpt()],
                ),
                Ok(()) => t.pass(rules::STATE_READ_FLOOR, ""),
            }
        }
    }

    pub(super) fn finish_state_rules(&mut self) {
        if !self.any_update {
            let why = if self.opts.allow_mutations {
                "the Tick sent no tick/update"
            } else {
                "the Tick sent no tick/update (mutating tools are called only with allow_mutations)"
            };
            for r in [
                rules::STATE_UPDATE_SEQ,
                rules::STATE_UPDATE_VALID,
                rules::STATE_UPDATE_SIZE,
            ] {
                self.tally.na(r, why);
            }
        }
        self.tally.na(
            rules::CALL_NOT_EXECUTED_NO_EFFECT,
            "no tool call outside the probes above was refused with a \"not executed\" code",
        );
        self.tally.na(
            rules::STATE_READ_FLOOR,
            "no tick/read followed another read or an update",
        );
        if self.state_sizes.is_empty() {
            self.tally
                .na(rules::STATE_TYPICAL_SIZE, "no non-null state was seen");
        } else {
            let mut sizes = self.state_sizes.clone();
            sizes.sort_unstable();
            let median = sizes[sizes.len() / 2];
            let largest = sizes[sizes.len() - 1];
            self.measurements.state_bytes_median = Some(median);
            self.measurements.state_bytes_max = Some(largest);
            let note = format!("state data is {median} bytes typically, {largest} at most");
            if median > DELIVERY_ITEM_BUDGET_BYTES {
                self.tally.fail(rules::STATE_TYPICAL_SIZE, format!("{note}, over the {DELIVERY_ITEM_BUDGET_BYTES}-byte guidance; expose large content through query tools"), vec![], vec![]);
            } else {
                self.tally.pass(rules::STATE_TYPICAL_SIZE, note);
            }
        }
        // Latency: reported, and advisory against "a few milliseconds".
        for (rule, list) in [
            (
                rules::DESCRIBE_PROMPT,
                self.measurements.describe_ms.clone(),
            ),
            (rules::READ_PROMPT, self.measurements.read_ms.clone()),
        ] {
            if list.is_empty() {
                self.tally
                    .na(rule, "no answer after initialization to measure");
                continue;
            }
            let mut sorted = list.clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            let max = sorted[sorted.len() - 1];
            let note = format!(
                "median {median} ms, max {max} ms over {} requests",
                sorted.len()
            );
            if median > ms(PROMPT_ADVISORY) {
                self.tally.fail(
                    rule,
                    format!("{note}; a few milliseconds is expected"),
                    vec![],
                    vec![],
                );
            } else {
                self.tally.pass(rule, note);
            }
        }
        if self.catalogs.len() == 1
            && !self
                .tally
                .passes
                .contains_key(rules::DESCRIBE_REVISION_STABLE.id)
        {
            self.tally.na(
                rules::DESCRIBE_REVISION_STABLE,
                "only one describe was answered",
            );
        }
    }
}

fn read_seq(l: &Line) -> Option<u64> {
    match &l.parsed {
        Parsed::Message(Incoming::Response {
            body: ResponseBody::Result(v),
            ..
        }) => v
            .get("seq")
            .and_then(Value::as_u64)
            .filter(|s| *s <= MAX_UINTEGER),
        _ => None,
    }
}
