//! The sessions the checker runs, and how each turns into verdicts.
//!
//! Each session starts a fresh Tick through the [`super::Launch`]er:
//!
//! 1. **main** — initialization (describe, read) with every descriptor rule;
//!    a quiet period to learn whether the Tick changes state on its own;
//!    repeated describes and reads (side effects, latency, revision
//!    stability); calls that must not execute (stale revision, unknown tool,
//!    invalid args, unknown method); a terminal resize; each query tool (the
//!    mutates heuristic); mutating tools with `allow_mutations`; garbage
//!    lines last, since a Tick may not survive them;
//! 2. **concurrent** — 8 requests in one write;
//! 3. **eof** — requests in flight, then stdin closed;
//! 4. **sigterm** — SIGTERM to the process group (native only).
//!
//! After each session its whole transcript is examined once more for the
//! rules that hold of every line (framing, ids, update sequence, read floor):
//! that is `transcript`; the descriptor's own rules are in `descriptor`.
//!
//! "No effect" is judged from what the Tick shows: no tick/update in the
//! window and the same seq and data on the next read. A Tick whose state
//! changes by itself during the quiet period makes those judgments
//! impossible; they are then reported as not applicable rather than guessed.

mod descriptor;
mod transcript;

use crate::check::args::{invalid_args, valid_args};
use crate::check::driver::{Driver, Exchange, Parsed, CALL, DESCRIBE, READ};
use crate::check::report::{Evidence, Measurements, Status, Verdict};
use crate::check::rules::{self, Rule};
use crate::check::{CheckError, Launch, Options};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tickbox_protocol::codes;
use tickbox_protocol::limits::{INIT_TIMEOUT, MAX_IN_FLIGHT, REQUEST_TIMEOUT};
use tickbox_protocol::message::encoded_len;
use tickbox_protocol::state::parse_state;
use tickbox_protocol::{Descriptor, Incoming, ResponseBody, Tool, Violation};

/// tick/describe and tick/read slower than this (median) get an advisory.
pub const PROMPT_ADVISORY: Duration = Duration::from_millis(100);
/// How many times describe and read are repeated.
const REPEATS: usize = 5;
/// At most this many tools are called per probe.
const MAX_TOOLS_PROBED: usize = 8;

/// Verdicts collected across sessions, then folded into one per rule.
#[derive(Default)]
pub struct Tally {
    fails: HashMap<&'static str, Vec<Evidence>>,
    passes: HashMap<&'static str, Vec<String>>,
    na: HashMap<&'static str, String>,
}

impl Tally {
    fn pass(&mut self, rule: &Rule, note: impl Into<String>) {
        self.passes.entry(rule.id).or_default().push(note.into());
    }
    fn fail(
        &mut self,
        rule: &Rule,
        why: impl Into<String>,
        sent: Vec<String>,
        received: Vec<String>,
    ) {
        let list = self.fails.entry(rule.id).or_default();
        // Keep reports readable: the first few instances carry the evidence.
        if list.len() < 5 {
            list.push(Evidence {
                why: why.into(),
                sent,
                received,
            });
        }
    }
    fn na(&mut self, rule: &Rule, why: impl Into<String>) {
        self.na.entry(rule.id).or_insert_with(|| why.into());
    }

    /// One verdict per selected rule: any failure fails it; otherwise a pass
    /// passes it; otherwise it is not applicable, with the first reason given.
    pub fn verdicts(mut self, selected: &[&'static Rule]) -> Vec<Verdict> {
        selected
            .iter()
            .map(|rule| {
                if let Some(evidence) = self.fails.remove(rule.id) {
                    let detail = evidence.first().map(|e| e.why.clone()).unwrap_or_default();
                    Verdict {
                        rule,
                        status: Status::Fail,
                        detail,
                        evidence,
                    }
                } else if let Some(passes) = self.passes.remove(rule.id) {
                    let mut notes: Vec<String> = Vec::new();
                    for p in passes {
                        if !p.is_empty() && !notes.contains(&p) {
                            notes.push(p);
                        }
                    }
                    Verdict {
                        rule,
                        status: Status::Pass,
                        detail: notes.join("; "),
                        evidence: vec![],
                    }
                } else {
                    let detail = self
                        .na
                        .remove(rule.id)
                        .unwrap_or_else(|| "nothing in the run exercised this rule".into());
                    Verdict {
                        rule,
                        status: Status::NotApplicable,
                        detail,
                        evidence: vec![],
                    }
                }
            })
            .collect()
    }
}

/// What the sessions share: options, the catalog and measurements.
pub struct Suite<'a> {
    launch: &'a dyn Launch,
    opts: &'a Options,
    pub tally: Tally,
    pub measurements: Measurements,
    catalogs: BTreeMap<String, Value>,
    catalog: Option<Descriptor>,
    sample_error: Option<CheckError>,
    state_sizes: Vec<usize>,
    any_update: bool,
}

/// A state as read: seq, data, and the exchange it came from.
struct Read {
    seq: u64,
    data: Value,
}

/// Seconds as a person writes them: `2`, `0.5`.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", d.as_secs())
    } else {
        format!("{s}")
    }
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0
}

fn rpc_summary(ex: &Exchange) -> String {
    match &ex.answer {
        None => "no response".into(),
        Some((ResponseBody::Result(_), _, _)) => "a result".into(),
        Some((ResponseBody::Error(e), _, _)) => format!("error {}", e.code),
        Some((ResponseBody::Malformed(m), _, _)) => format!("a malformed response ({m})"),
    }
}

impl<'a> Suite<'a> {
    pub fn new(launch: &'a dyn Launch, opts: &'a Options) -> Self {
        Suite {
            launch,
            opts,
            tally: Tally::default(),
            measurements: Measurements::default(),
            catalogs: BTreeMap::new(),
            catalog: None,
            sample_error: None,
            state_sizes: Vec::new(),
            any_update: false,
        }
    }

    fn wants(&self, rules: &[&Rule]) -> bool {
        rules.iter().any(|r| self.opts.rules.contains(r))
    }

    async fn start(&mut self) -> Result<Driver, CheckError> {
        let io = self
            .launch
            .launch(tickbox_sandbox::LaunchOptions::default())
            .await
            .map_err(CheckError::Start)?;
        self.measurements.sessions += 1;
        Ok(Driver::new(io))
    }

    /// Runs every session.
    pub async fn run(&mut self) -> Result<(), CheckError> {
        let mut d = self.start().await?;
        let initialized = self.main_session(&mut d).await;
        d.finish().await;
        if let Some(e) = self.sample_error.take() {
            return Err(e);
        }
        self.analyze(&d, true);
        if let Err(why) = initialized {
            for r in rules::ALL {
                self.tally.na(r, why.clone());
            }
            self.finish_state_rules();
            return Ok(());
        }
        if self.wants(&[rules::FRAMING_NO_INTERLEAVE, rules::CALL_CONCURRENT]) {
            let mut d = self.start().await?;
            self.concurrent_session(&mut d).await;
            d.finish().await;
            self.analyze(&d, true);
        }
        if self.wants(&[rules::LIFECYCLE_STDIN_EOF]) {
            let mut d = self.start().await?;
            self.eof_session(&mut d).await;
            d.finish().await;
            // Requests left unanswered at EOF are judged by lifecycle.stdin_eof.
            self.analyze(&d, false);
        }
        if self.wants(&[rules::LIFECYCLE_SIGTERM]) {
            let mut d = self.start().await?;
            self.sigterm_session(&mut d).await;
            d.finish().await;
            self.analyze(&d, true);
        }
        self.finish_state_rules();
        Ok(())
    }

    // ----- initialization and the descriptor -----

    /// describe then read, as a host initializes; returns the catalog.
    async fn init(&mut self, d: &mut Driver, judge: bool) -> Result<Descriptor, String> {
        let describe = d.roundtrip(DESCRIBE, json!({}), REQUEST_TIMEOUT).await;
        let raw = match &describe.answer {
            Some((ResponseBody::Result(v), latency, _)) => {
                if judge {
                    // The first answer includes the Tick's own startup; it is
                    // reported, but "prompt" is judged on the later ones.
                    self.measurements.startup_describe_ms = Some(ms(*latency));
                }
                v.clone()
            }
            other => {
                let why = match other {
                    None => no_answer(d, DESCRIBE).await,
                    Some(_) => {
                        format!("tick/describe was answered with {}", rpc_summary(&describe))
                    }
                };
                if judge {
                    self.tally.fail(
                        rules::INIT_TIMELY,
                        why.clone(),
                        vec![describe.sent.clone()],
                        vec![describe.received()],
                    );
                    self.tally.fail(
                        rules::DESCRIBE_VALID,
                        why.clone(),
                        vec![describe.sent.clone()],
                        vec![describe.received()],
                    );
                }
                return Err(format!("initialization failed: {why}"));
            }
        };
        if judge {
            self.judge_descriptor(&raw, &describe);
        }
        self.remember_catalog(&raw, &describe);
        let catalog = match Descriptor::parse(raw) {
            Ok(c) => {
                if judge {
                    self.tally.pass(
                        rules::DESCRIBE_VALID,
                        format!("revision {:?}, {} tools", c.revision, c.tools.len()),
                    );
                }
                c
            }
            Err(e) => {
                if judge {
                    self.tally.fail(
                        rules::DESCRIBE_VALID,
                        format!("a host rejects this descriptor: {e}"),
                        vec![describe.sent.clone()],
                        vec![describe.received()],
                    );
                }
                return Err(format!(
                    "the descriptor is invalid ({e}), so the Tick cannot be initialized"
                ));
            }
        };
        let read = d.roundtrip(READ, json!({}), REQUEST_TIMEOUT).await;
        let Some(_) = self.read_state(&read, judge) else {
            let why = match read.answer {
                None => no_answer(d, READ).await,
                Some(_) => format!("tick/read was answered with {}", rpc_summary(&read)),
            };
            if judge {
                self.tally.fail(
                    rules::INIT_TIMELY,
                    why.clone(),
                    vec![read.sent.clone()],
                    vec![read.received()],
                );
            }
            return Err(format!("initialization failed: {why}"));
        };
        if judge {
            let total = d.now();
            if total > INIT_TIMEOUT {
                self.tally.fail(
                    rules::INIT_TIMELY,
                    format!(
                        "initialization took {} ms, over {}s",
                        ms(total),
                        INIT_TIMEOUT.as_secs()
                    ),
                    vec![],
                    vec![],
                );
            } else {
                self.tally.pass(
                    rules::INIT_TIMELY,
                    format!("initialized in {} ms", ms(total)),
                );
            }
        }
        Ok(catalog)
    }

    /// Keeps the first catalog seen for each revision, and flags a revision
    /// that comes back with different tools (§5.5).
    /// Parses a read answer; judges read.valid when `judge`.
    fn read_state(&mut self, ex: &Exchange, judge: bool) -> Option<Read> {
        let result = ex.result()?;
        match parse_state(result) {
            Ok(s) => {
                if judge {
                    self.tally.pass(rules::READ_VALID, "");
                }
                if !s.data.is_null() {
                    self.state_sizes.push(encoded_len(s.data.wire()));
                }
                Some(Read {
                    seq: s.seq,
                    data: s.data.into_wire(),
                })
            }
            Err(why) => {
                self.tally.fail(
                    rules::READ_VALID,
                    format!("tick/read result: {why}"),
                    vec![ex.sent.clone()],
                    vec![ex.received()],
                );
                None
            }
        }
    }

    async fn read(&mut self, d: &mut Driver) -> (Exchange, Option<Read>) {
        let ex = d.roundtrip(READ, json!({}), REQUEST_TIMEOUT).await;
        if let Some(l) = ex.latency() {
            self.measurements.read_ms.push(ms(l));
        }
        let r = self.read_state(&ex, false);
        (ex, r)
    }

    // ----- session 1 -----

    async fn main_session(&mut self, d: &mut Driver) -> Result<(), String> {
        let catalog = self.init(d, true).await?;
        self.catalog = Some(catalog.clone());
        if let Err(e) = self.check_samples(&catalog) {
            self.sample_error = Some(e);
            return Err("the sample args do not fit the catalog".into());
        }

        // Quiet period: does the state change by itself?
        let (_, before) = self.read(d).await;
        let mark = d.mark();
        d.settle(self.opts.timings.quiet_period).await;
        let (_, after) = self.read(d).await;
        let spontaneous = match (&before, &after) {
            (Some(b), Some(a)) => {
                let n = d.updates_since(mark).len();
                if n > 0 || a.seq != b.seq || a.data != b.data {
                    Some(format!(
                        "the Tick's state changes by itself ({n} updates in {} ms of quiet), so effects cannot be attributed",
                        self.opts.timings.quiet_period.as_millis()
                    ))
                } else {
                    None
                }
            }
            _ => Some("tick/read did not answer, so effects cannot be observed".into()),
        };
        self.measurements.spontaneous_updates = spontaneous.is_some();
        let base = after;

        // Repeated describe.
        let mark = d.mark();
        let mut sent = Vec::new();
        for _ in 0..REPEATS {
            let ex = d.roundtrip(DESCRIBE, json!({}), REQUEST_TIMEOUT).await;
            if let Some(l) = ex.latency() {
                self.measurements.describe_ms.push(ms(l));
            }
            if let Some(raw) = ex.result().cloned() {
                self.remember_catalog(&raw, &ex);
            }
            sent.push(ex.sent.clone());
        }
        let (_, now) = self.read(d).await;
        self.judge_no_effect(
            rules::DESCRIBE_NO_SIDE_EFFECTS,
            d,
            mark,
            &base,
            &now,
            &spontaneous,
            sent,
            &format!("{REPEATS} tick/describe"),
        );
        let base = now;

        // Repeated read.
        let mark = d.mark();
        let mut last = None;
        let mut seqs = Vec::new();
        let mut changed = false;
        for _ in 0..REPEATS {
            let (_, r) = self.read(d).await;
            if let (Some(b), Some(r)) = (&base, &r) {
                changed |= r.seq != b.seq || r.data != b.data;
            }
            if let Some(r) = &r {
                seqs.push(r.seq);
            }
            last = r;
        }
        if let Some(why) = &spontaneous {
            self.tally.na(rules::READ_NO_SIDE_EFFECTS, why.clone());
        } else if changed || !d.updates_since(mark).is_empty() {
            let received: Vec<String> = d.updates_since(mark).iter().map(|l| l.excerpt()).collect();
            self.tally.fail(
                rules::READ_NO_SIDE_EFFECTS,
                format!(
                    "{REPEATS} tick/read changed the state (seqs {seqs:?}, {} updates)",
                    received.len()
                ),
                vec![r#"{"jsonrpc":"2.0","id":…,"method":"tick/read","params":{}}"#.into()],
                received,
            );
        } else if last.is_some() {
            self.tally.pass(
                rules::READ_NO_SIDE_EFFECTS,
                format!(
                    "{REPEATS} reads, seq stayed {}",
                    seqs.first().copied().unwrap_or_default()
                ),
            );
        }

        // Calls that must not execute.
        self.call_probes(d, &catalog, &spontaneous).await;

        // Terminal resize: presentation, not business state (§8.3).
        let mark = d.mark();
        let (cols, rows) = d.view().size();
        d.view().resize(cols.saturating_sub(20).max(20), rows + 10);
        d.settle(self.opts.timings.settle * 2).await;
        d.view().resize(cols, rows);
        d.settle(self.opts.timings.settle).await;
        if let Some(why) = &spontaneous {
            self.tally
                .na(rules::STATE_NO_PRESENTATION_UPDATES, why.clone());
        } else {
            let ups: Vec<String> = d.updates_since(mark).iter().map(|l| l.excerpt()).collect();
            if ups.is_empty() {
                self.tally.pass(
                    rules::STATE_NO_PRESENTATION_UPDATES,
                    "two resizes, no update",
                );
            } else {
                self.tally.fail(
                    rules::STATE_NO_PRESENTATION_UPDATES,
                    format!("resizing the terminal emitted {} tick/update", ups.len()),
                    vec!["(resized the view terminal twice)".into()],
                    ups,
                );
            }
        }

        self.query_tools(d, &catalog, &spontaneous).await;
        if self.opts.allow_mutations {
            self.mutating_tools(d, &catalog, &spontaneous).await;
        }
        self.garbage(d).await;
        Ok(())
    }

    /// Sample args must name catalog tools and match their schemas; a typo
    /// there would silently leave tools unexercised.
    fn check_samples(&self, catalog: &Descriptor) -> Result<(), CheckError> {
        for (name, args) in &self.opts.sample_args {
            let tool = catalog.tool(name).ok_or_else(|| {
                CheckError::SampleArgs(format!("`{name}` is not a tool of this Tick"))
            })?;
            tool.check_args(args).map_err(|why| {
                CheckError::SampleArgs(format!(
                    "args for `{name}` do not match its input schema: {why}"
                ))
            })?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn judge_no_effect(
        &mut self,
        rule: &Rule,
        d: &Driver,
        mark: usize,
        before: &Option<Read>,
        after: &Option<Read>,
        spontaneous: &Option<String>,
        sent: Vec<String>,
        what: &str,
    ) {
        if let Some(why) = spontaneous {
            self.tally.na(rule, why.clone());
            return;
        }
        let ups: Vec<String> = d.updates_since(mark).iter().map(|l| l.excerpt()).collect();
        let (Some(b), Some(a)) = (before, after) else {
            self.tally.na(
                rule,
                format!(
                    "tick/read did not answer around {what}{}",
                    suffix(&d.ending())
                ),
            );
            return;
        };
        if !ups.is_empty() || a.seq != b.seq || a.data != b.data {
            self.tally.fail(
                rule,
                format!(
                    "{what} had an effect: {} tick/update, seq {} → {}{}",
                    ups.len(),
                    b.seq,
                    a.seq,
                    if a.data != b.data {
                        ", data changed"
                    } else {
                        ""
                    }
                ),
                sent,
                ups,
            );
        } else {
            self.tally
                .pass(rule, format!("{what}: no update, seq stayed {}", a.seq));
        }
    }

    /// A call that must be refused with `code` and have no effect.
    #[allow(clippy::too_many_arguments)]
    async fn refused_call(
        &mut self,
        d: &mut Driver,
        rule: &Rule,
        params: Value,
        code: i64,
        what: &str,
        spontaneous: &Option<String>,
    ) {
        let (_, before) = self.read(d).await;
        let mark = d.mark();
        let ex = d.roundtrip(CALL, params, REQUEST_TIMEOUT).await;
        d.settle(self.opts.timings.settle).await;
        let (_, after) = self.read(d).await;
        if ex.error_code() != Some(code) {
            let why = format!(
                "{what} was answered with {}, not error {code}{}",
                rpc_summary(&ex),
                if ex.answer.is_none() {
                    suffix(&d.ending())
                } else {
                    String::new()
                }
            );
            let mut received = vec![ex.received()];
            received.extend(d.updates_since(mark).iter().map(|l| l.excerpt()));
            self.tally.fail(rule, why, vec![ex.sent.clone()], received);
            return;
        }
        self.judge_no_effect(
            rule,
            d,
            mark,
            &before,
            &after,
            spontaneous,
            vec![ex.sent.clone()],
            what,
        );
    }

    /// Tools the checker may call: queries always, mutating tools only with
    /// `allow_mutations`; each with args its schema accepts, if any are known.
    fn callable<'c>(
        &self,
        catalog: &'c Descriptor,
        mutating: bool,
    ) -> Vec<(&'c Tool, Option<Value>)> {
        catalog
            .tools
            .iter()
            .filter(|t| t.mutates == mutating)
            .map(|t| (t, valid_args(t, &self.opts.sample_args)))
            .collect()
    }

    async fn call_probes(
        &mut self,
        d: &mut Driver,
        catalog: &Descriptor,
        spontaneous: &Option<String>,
    ) {
        let rev = catalog.revision.clone();
        // Unknown method.
        let ex = d
            .roundtrip("tickbox-check/no-such-method", json!({}), REQUEST_TIMEOUT)
            .await;
        if ex.error_code() == Some(codes::METHOD_NOT_FOUND) {
            self.tally.pass(rules::CALL_UNKNOWN_METHOD, "");
        } else {
            self.tally.fail(
                rules::CALL_UNKNOWN_METHOD,
                format!(
                    "an unknown method was answered with {}, not error {}",
                    rpc_summary(&ex),
                    codes::METHOD_NOT_FOUND
                ),
                vec![ex.sent.clone()],
                vec![ex.received()],
            );
        }

        // Unknown tool.
        let mut name = "tickbox_check_no_such_tool".to_string();
        while catalog.tool(&name).is_some() {
            name.push('_');
        }
        self.refused_call(
            d,
            rules::CALL_UNKNOWN_TOOL,
            json!({"tool": name, "args": {}, "revision": rev}),
            codes::INVALID_PARAMS,
            "a call to an unknown tool",
            spontaneous,
        )
        .await;

        // Stale revision: a query with valid args if there is one.
        let mut eligible = self.callable(catalog, false);
        if self.opts.allow_mutations {
            eligible.extend(self.callable(catalog, true));
        }
        eligible.sort_by_key(|(_, args)| args.is_none());
        match eligible.first() {
            None => self.tally.na(
                rules::CALL_WRONG_REVISION,
                if catalog.tools.is_empty() {
                    "the catalog has no tools".to_string()
                } else {
                    "every tool mutates, and allow_mutations is off".to_string()
                },
            ),
            Some((tool, args)) => {
                let stale = format!("{rev}-stale-tickbox-check");
                let params = json!({"tool": tool.name, "args": args.clone().unwrap_or(json!({})), "revision": stale});
                let what = format!("a call to `{}` with stale revision {stale:?}", tool.name);
                self.refused_call(
                    d,
                    rules::CALL_WRONG_REVISION,
                    params,
                    codes::REVISION_MISMATCH,
                    &what,
                    spontaneous,
                )
                .await;
            }
        }

        // Args the schema rejects.
        let mut probed = 0;
        let mut skipped = Vec::new();
        for (tool, args) in eligible.iter().take(MAX_TOOLS_PROBED) {
            match invalid_args(tool, args.as_ref()) {
                Some((bad, how)) => {
                    probed += 1;
                    let params = json!({"tool": tool.name, "args": bad, "revision": rev});
                    let what = format!("a call to `{}` with {how}", tool.name);
                    self.refused_call(
                        d,
                        rules::CALL_INVALID_ARGS,
                        params,
                        codes::INVALID_PARAMS,
                        &what,
                        spontaneous,
                    )
                    .await;
                }
                None => skipped.push(tool.name.line()),
            }
        }
        if probed == 0 {
            self.tally.na(
                rules::CALL_INVALID_ARGS,
                if eligible.is_empty() {
                    "no tool may be called (mutating tools need allow_mutations)".to_string()
                } else {
                    format!(
                        "no schema rejects any args the checker can build ({})",
                        skipped.join(", ")
                    )
                },
            );
        }
    }

    async fn query_tools(
        &mut self,
        d: &mut Driver,
        catalog: &Descriptor,
        spontaneous: &Option<String>,
    ) {
        let tools = self.callable(catalog, false);
        let mut called = 0;
        let mut skipped = Vec::new();
        for (tool, args) in tools.into_iter().take(MAX_TOOLS_PROBED) {
            let Some(args) = args else {
                skipped.push(tool.name.line());
                continue;
            };
            called += 1;
            let (_, before) = self.read(d).await;
            let mark = d.mark();
            let params = json!({"tool": tool.name, "args": args, "revision": catalog.revision});
            let ex = d.roundtrip(CALL, params, self.opts.call_timeout).await;
            d.settle(self.opts.timings.settle).await;
            let (_, after) = self.read(d).await;
            let what = format!("calling `{}` (mutates: false)", tool.name);
            self.judge_refusal(d, &ex, mark, &before, &after, spontaneous);
            self.judge_no_effect(
                rules::TOOLS_MUTATES_HONEST,
                d,
                mark,
                &before,
                &after,
                spontaneous,
                vec![ex.sent.clone()],
                &what,
            );
        }
        if called == 0 {
            self.tally.na(
                rules::TOOLS_MUTATES_HONEST,
                if skipped.is_empty() {
                    "the catalog has no query tools".to_string()
                } else {
                    format!(
                        "no args known for {} (give them in sample_args)",
                        skipped.join(", ")
                    )
                },
            );
        }
    }

    /// §3.4: when an ordinary call is refused with a "not executed" code,
    /// nothing may have happened.
    fn judge_refusal(
        &mut self,
        d: &Driver,
        ex: &Exchange,
        mark: usize,
        before: &Option<Read>,
        after: &Option<Read>,
        spontaneous: &Option<String>,
    ) {
        if let Some(code) = ex.error_code().filter(|c| !codes::executed(*c)) {
            let what = format!("a call answered with error {code} (not executed)");
            self.judge_no_effect(
                rules::CALL_NOT_EXECUTED_NO_EFFECT,
                d,
                mark,
                before,
                after,
                spontaneous,
                vec![ex.sent.clone()],
                &what,
            );
        }
    }

    async fn mutating_tools(
        &mut self,
        d: &mut Driver,
        catalog: &Descriptor,
        spontaneous: &Option<String>,
    ) {
        for (tool, args) in self
            .callable(catalog, true)
            .into_iter()
            .take(MAX_TOOLS_PROBED)
        {
            let Some(args) = args else {
                self.measurements.notes.push(format!(
                    "`{}` was not called: no args known (give them in sample_args)",
                    tool.name
                ));
                continue;
            };
            let (_, before) = self.read(d).await;
            let mark = d.mark();
            let params = json!({"tool": tool.name, "args": args, "revision": catalog.revision});
            let ex = d.roundtrip(CALL, params, self.opts.call_timeout).await;
            d.settle(self.opts.timings.settle).await;
            // A read right after the call: the read floor now includes the
            // call's updates (§6.3), which the transcript analysis checks.
            let (_, after) = self.read(d).await;
            self.judge_refusal(d, &ex, mark, &before, &after, spontaneous);
            self.measurements.notes.push(format!(
                "called mutating tool `{}`: {}",
                tool.name,
                rpc_summary(&ex)
            ));
        }
    }

    async fn garbage(&mut self, d: &mut Driver) {
        const LINES: &[&str] = &[
            "this is not JSON",
            "",
            r#"{"jsonrpc":"2.0","id":9001,"method":"tick/read","params":{"#,
            r#"{"jsonrpc":"2.0","method":"tick/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tick/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"9002","method":"tick/read","params":{}}"#,
            r#"[1,2,3]"#,
        ];
        let mark = d.mark();
        for l in LINES {
            d.send_raw(l).await;
        }
        let ex = d.roundtrip(READ, json!({}), REQUEST_TIMEOUT).await;
        d.settle(self.opts.timings.settle).await;
        let sent: Vec<String> = LINES
            .iter()
            .map(|s| {
                if s.is_empty() {
                    "(an empty line)".to_string()
                } else {
                    s.to_string()
                }
            })
            .collect();
        let replies: Vec<String> = d.lines[mark..]
            .iter()
            .filter(|l| match &l.parsed {
                // A reply to an id never sent; a second answer to a real
                // request is framing.one_response's to judge.
                Parsed::Message(Incoming::Response { id, .. }) => {
                    !d.sent.iter().any(|s| s.id as i64 == *id)
                }
                Parsed::Bad(Violation::NoIdNorMethod { .. }) => true,
                _ => false,
            })
            .map(|l| l.excerpt())
            .collect();
        if replies.is_empty() {
            self.tally.pass(
                rules::FRAMING_GARBAGE_IGNORED,
                format!("{} lines, no reply", LINES.len()),
            );
        } else {
            self.tally.fail(
                rules::FRAMING_GARBAGE_IGNORED,
                format!(
                    "{} replies to lines that are unparseable or have no usable id",
                    replies.len()
                ),
                sent.clone(),
                replies,
            );
        }
        if ex.answer.is_some() {
            self.tally.pass(rules::FRAMING_SURVIVES_GARBAGE, "");
        } else {
            self.tally.fail(
                rules::FRAMING_SURVIVES_GARBAGE,
                format!(
                    "tick/read after the garbage lines got no response{}",
                    suffix(&d.ending())
                ),
                sent,
                vec![ex.received()],
            );
        }
    }

    // ----- sessions 2 to 4 -----

    async fn concurrent_session(&mut self, d: &mut Driver) {
        let catalog = match self.init(d, false).await {
            Ok(c) => c,
            Err(why) => {
                self.tally
                    .fail(rules::CALL_CONCURRENT, why.clone(), vec![], vec![]);
                return;
            }
        };
        let queries: Vec<(String, Value)> = self
            .callable(&catalog, false)
            .into_iter()
            .filter_map(|(t, a)| Some((t.name.wire().to_string(), a?)))
            .collect();
        let mut batch = Vec::new();
        let mut quick_flags = Vec::new();
        let mut has_call = false;
        for i in 0..MAX_IN_FLIGHT {
            let (method, params) = match i % 4 {
                0 => (DESCRIBE, json!({})),
                1 => (READ, json!({})),
                2 if !queries.is_empty() => {
                    has_call = true;
                    let (tool, args) = &queries[i / 4 % queries.len()];
                    (
                        CALL,
                        json!({"tool": tool, "args": args, "revision": catalog.revision}),
                    )
                }
                _ => (
                    CALL,
                    json!({"tool": "tickbox_check_no_such_tool", "args": {}, "revision": catalog.revision}),
                ),
            };
            // Only real tool calls may take the call timeout.
            quick_flags.push(!(method == CALL && params["tool"] != "tickbox_check_no_such_tool"));
            let (id, line) = d.prepare(method, &params);
            batch.push((id, method, line));
        }
        let ids: Vec<u64> = batch.iter().map(|b| b.0).collect();
        let batch_ids_quick: Vec<u64> = batch
            .iter()
            .zip(&quick_flags)
            .filter(|(_, quick)| **quick)
            .map(|(b, _)| b.0)
            .collect();
        let mark = d.mark();
        d.send_batch(&batch).await;
        let started = d.now();
        // Two phases: the requests a host gives 10 s (describe, read, and the
        // unknown-tool call, which executes nothing) first; only if those all
        // came back is it worth waiting the call timeout for tool calls. A
        // Tick that garbled its answers would otherwise cost a full minute.
        let quick: Vec<u64> = batch_ids_quick;
        d.wait_until(REQUEST_TIMEOUT, |d| {
            quick.iter().all(|id| d.response(*id).is_some())
        })
        .await;
        if has_call && quick.iter().all(|id| d.response(*id).is_some()) {
            d.wait_until(self.opts.call_timeout, |d| {
                ids.iter().all(|id| d.response(*id).is_some())
            })
            .await;
        }
        let sent: Vec<String> = d
            .sent
            .iter()
            .rev()
            .take(ids.len())
            .rev()
            .map(|s| s.line.clone())
            .collect();
        let missing: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| d.response(*id).is_none())
            .collect();
        if missing.is_empty() {
            let took = d
                .lines
                .iter()
                .filter_map(|l| {
                    l.response_id()
                        .filter(|id| ids.contains(&(*id as u64)))
                        .map(|_| l.at)
                })
                .max()
                .unwrap_or(started);
            self.tally.pass(
                rules::CALL_CONCURRENT,
                format!(
                    "{} requests answered in {} ms",
                    ids.len(),
                    ms(took.saturating_sub(started))
                ),
            );
        } else {
            let received = d.lines[mark..].iter().map(|l| l.excerpt()).collect();
            self.tally.fail(
                rules::CALL_CONCURRENT,
                format!(
                    "{} of {} concurrent requests were not answered (ids {missing:?}){}",
                    missing.len(),
                    ids.len(),
                    suffix(&d.ending())
                ),
                sent.clone(),
                received,
            );
        }
        d.settle(self.opts.timings.settle).await;
        let broken: Vec<String> = d.lines[mark..]
            .iter()
            .filter(|l| matches!(l.parsed, Parsed::Bad(_)))
            .map(|l| l.excerpt())
            .collect();
        if broken.is_empty() {
            self.tally.pass(
                rules::FRAMING_NO_INTERLEAVE,
                format!("{} concurrent requests, every line complete", ids.len()),
            );
        } else {
            self.tally.fail(
                rules::FRAMING_NO_INTERLEAVE,
                format!(
                    "{} lines written under {} concurrent requests are not complete messages",
                    broken.len(),
                    ids.len()
                ),
                sent,
                broken,
            );
        }
    }

    async fn eof_session(&mut self, d: &mut Driver) {
        let catalog = match self.init(d, false).await {
            Ok(c) => c,
            Err(why) => {
                self.tally
                    .fail(rules::LIFECYCLE_STDIN_EOF, why, vec![], vec![]);
                return;
            }
        };
        let mut batch = Vec::new();
        let (id, line) = d.prepare(READ, &json!({}));
        batch.push((id, READ, line));
        let mut limit = REQUEST_TIMEOUT;
        if let Some((tool, Some(args))) = self.callable(&catalog, false).into_iter().next() {
            let (id, line) = d.prepare(
                CALL,
                &json!({"tool": tool.name, "args": args, "revision": catalog.revision}),
            );
            batch.push((id, CALL, line));
            limit = self.opts.call_timeout;
        }
        let ids: Vec<u64> = batch.iter().map(|b| b.0).collect();
        d.send_batch(&batch).await;
        d.close_stdin();
        let closed = d.now();
        d.wait_until(limit, |d| ids.iter().all(|id| d.response(*id).is_some()))
            .await;
        let exit = d.wait_exit(self.opts.timings.exit_wait).await;
        let sent: Vec<String> = d
            .sent
            .iter()
            .rev()
            .take(ids.len())
            .rev()
            .map(|s| s.line.clone())
            .chain(["(stdin closed)".to_string()])
            .collect();
        let missing: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| d.response(*id).is_none())
            .collect();
        match exit {
            None => self.tally.fail(
                rules::LIFECYCLE_STDIN_EOF,
                format!(
                    "the Tick was still running {}s after stdin EOF{}",
                    secs(self.opts.timings.exit_wait),
                    if missing.is_empty() {
                        " and its in-flight requests were answered".to_string()
                    } else {
                        String::new()
                    }
                ),
                sent,
                vec!["(no exit)".into()],
            ),
            Some(how) if !missing.is_empty() => self.tally.fail(
                rules::LIFECYCLE_STDIN_EOF,
                format!("the Tick exited ({how}) without answering in-flight requests {missing:?}"),
                sent,
                vec![format!("(exited: {how})")],
            ),
            Some(how) => {
                let after = d.now().saturating_sub(closed);
                self.measurements.exit_after_eof_ms = Some(ms(after));
                self.tally.pass(
                    rules::LIFECYCLE_STDIN_EOF,
                    format!(
                        "answered {} in-flight requests, exited ({how}) {} ms after EOF",
                        ids.len(),
                        ms(after)
                    ),
                );
            }
        }
    }

    async fn sigterm_session(&mut self, d: &mut Driver) {
        if let Err(why) = self.init(d, false).await {
            self.tally
                .fail(rules::LIFECYCLE_SIGTERM, why, vec![], vec![]);
            return;
        }
        let sent_at = d.now();
        if !d.process().sigterm() {
            self.tally.na(
                rules::LIFECYCLE_SIGTERM,
                "this backend has no process signals",
            );
            return;
        }
        match d.wait_exit(self.opts.timings.exit_wait).await {
            Some(how) => {
                let after = d.now().saturating_sub(sent_at);
                self.measurements.exit_after_sigterm_ms = Some(ms(after));
                self.tally.pass(
                    rules::LIFECYCLE_SIGTERM,
                    format!("exited ({how}) {} ms after SIGTERM", ms(after)),
                );
            }
            None => self.tally.fail(
                rules::LIFECYCLE_SIGTERM,
                format!(
                    "the Tick was still running {}s after SIGTERM to its process group",
                    secs(self.opts.timings.exit_wait)
                ),
                vec!["(SIGTERM to the process group)".into()],
                vec!["(no exit)".into()],
            ),
        }
    }
}

/// Why a request got no answer: the Tick ended (and how), or it was silent.
async fn no_answer(d: &mut Driver, method: &str) -> String {
    if d.end.is_some() {
        // The output closed: the process is gone or going; say how it ended.
        d.wait_exit(Duration::from_millis(500)).await;
        format!(
            "the Tick's output ended before it answered {method}{}",
            suffix(&d.ending())
        )
    } else {
        format!(
            "no response to {method} within {}s{}",
            REQUEST_TIMEOUT.as_secs(),
            suffix(&d.ending())
        )
    }
}

pub(super) fn suffix(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" ({s})")
    }
}
