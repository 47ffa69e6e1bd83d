//! Audit lines read back, as typed events: the one reading of the schema
//! the writer ([`super::Audit`]) writes, for whoever turns a record into
//! something else (`tickbox policy suggest`, the benchmarks).
//!
//! A line is untrusted input: a file a Tick could write may be handed in
//! as an audit file. So [`parse_line`] checks the walls in order (the
//! line's size, JSON, an object, the schema version, an event name) and
//! every error names the rule broken, never the line's content: a field's
//! name (ours) may appear in one, a value never does.
//!
//! Reading is lenient where the writer may grow: an event of a later
//! tickbox is [`Entry::Other`], a kind of use it adds is [`Use::Other`],
//! and fields this reader does not know are ignored. What a reader acts
//! on (a start's Tick, a use's grant, a refusal's example and count) must
//! be there.
//!
//! ```
//! use tickbox_telemetry::audit::read::{parse_line, Entry};
//! let line = r#"{"v":1,"event":"denied","session":"s-1","what":"path","attempted":"../x","detail":"leads out","count":41}"#;
//! let read = parse_line(line).unwrap();
//! assert_eq!(read.session.as_deref(), Some("s-1"));
//! let Entry::Denied(refusal) = read.entry else { panic!("a refusal") };
//! assert_eq!((refusal.what.as_str(), refusal.times()), ("path", 41));
//! ```

use super::{AUDIT_VERSION, MAX_AUDIT_LINE_BYTES};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One audit line, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The Tick session it is about (`None`: an event of no one session).
    pub session: Option<String>,
    /// When it happened (RFC 3339, to the millisecond), as written.
    pub ts: Option<String>,
    /// Events the writer dropped before this one (a full queue).
    pub lost: u64,
    /// Whether the event was shortened to fit a line.
    pub cut: bool,
    /// The event.
    pub entry: Entry,
}

/// The fields every event carries besides its name and version.
#[derive(Deserialize)]
struct Common {
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    lost: u64,
    #[serde(default)]
    cut: bool,
}

/// An event, by its name (`event`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Entry {
    /// A Tick was started.
    Start(Start),
    /// A tool call ended.
    Call(Call),
    /// Something was approved or refused by a person or a policy.
    Approval(Approval),
    /// The Tick used something it was granted (once per distinct use).
    Used(Use),
    /// The Tick was refused something (merged: see [`Refusal::times`]).
    Denied(Refusal),
    /// The Tick ran into a bound (merged like refusals).
    Limit(Limit),
    /// The session's own events passed their budget.
    Unrecorded(Unrecorded),
    /// The session ended.
    End(End),
    /// An event of a later tickbox.
    #[serde(other)]
    Other,
}

/// `start`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Start {
    /// Its path or command line.
    pub tick: String,
    /// How it runs (`wasm component`, `wasm module`, `native`).
    pub backend: String,
    /// Who started it (`cli`, `run`, `mcp`, `scenario`, …).
    #[serde(default)]
    pub origin: Option<String>,
    /// Its wasm's digest.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The client a per-client Tick's instance was started for.
    #[serde(default)]
    pub client: Option<String>,
    /// Every grant and bound in force, as its starter wrote them (the
    /// sandbox's grant table for a wasm Tick; `sandboxed: false` and the
    /// variable names for a native one).
    #[serde(default)]
    pub grants: Value,
}

/// `call`. Its fields are optional here: a record is read for what it
/// granted and used, and a call line cut to fit is still a call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Call {
    /// The tool.
    #[serde(default)]
    pub tool: Option<String>,
    /// `ok`, `error` or `unknown`.
    #[serde(default)]
    pub outcome: Option<String>,
    /// Whether the tool says it changes state.
    #[serde(default)]
    pub mutates: Option<bool>,
    /// How long it took.
    #[serde(default)]
    pub duration_ms: Option<f64>,
    /// The arguments' SHA-256 (hex).
    #[serde(default)]
    pub args_sha256: Option<String>,
}

/// `approval`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Approval {
    /// What was asked (a call, a manifest's requests).
    #[serde(default)]
    pub what: Option<String>,
    /// About what (a tool, a digest).
    #[serde(default)]
    pub subject: Option<String>,
    /// Whether it was granted.
    #[serde(default)]
    pub granted: Option<bool>,
    /// By whom.
    #[serde(default)]
    pub by: Option<String>,
}

/// `used`, by its kind (`what`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Use {
    /// A directory grant reached.
    Dir {
        /// The grant's host path.
        host: String,
        /// Where the guest sees it.
        guest: String,
        /// Read only, or something was changed through it.
        access: Access,
    },
    /// A granted address connected to.
    Socket {
        /// The `allow_net` grant that covers it.
        allow_net: String,
    },
    /// A granted name looked up.
    Lookup {
        /// The name.
        name: String,
        /// The `allow_net` grant that covers it.
        allow_net: String,
    },
    /// A granted origin requested.
    HttpOrigin {
        /// The origin.
        origin: String,
        /// Answered by a scenario's HTTP fixture, not the network.
        #[serde(default)]
        fixture: bool,
    },
    /// Past the bound of distinct uses: the record is incomplete.
    Unrecorded,
    /// A kind of use a later tickbox records.
    #[serde(other)]
    Other,
}

/// How a directory grant was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Only read.
    Read,
    /// Something was changed through it.
    Write,
}

/// How many events a merged line stands for, and when the first and the
/// last of them was: absent on the first line of a kind, which stands for
/// itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Merged {
    /// The events this line stands for.
    #[serde(default)]
    pub count: Option<u64>,
    /// When the first of them was.
    #[serde(default)]
    pub first: Option<String>,
    /// When the last of them was.
    #[serde(default)]
    pub last: Option<String>,
}

/// `denied`: one refusal, or the example of a merged run of them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Refusal {
    /// The kind (`path`, `socket`, `lookup`, `http_origin`, `quota`, …).
    pub what: String,
    /// What was attempted (the Tick's text, escaped when written).
    pub attempted: String,
    /// Where or why.
    pub detail: String,
    /// What a merged line adds.
    #[serde(flatten)]
    pub merged: Merged,
}

impl Refusal {
    /// How many refusals the line stands for.
    pub fn times(&self) -> u64 {
        self.merged.count.unwrap_or(1)
    }
}

/// `limit`: one bound run into, or the example of a merged run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Limit {
    /// The bound's key.
    pub bound: String,
    /// Its value.
    pub value: u64,
    /// What the Tick asked for.
    pub detail: String,
    /// What a merged line adds.
    #[serde(flatten)]
    pub merged: Merged,
}

impl Limit {
    /// How many times the bound was met that the line stands for.
    pub fn times(&self) -> u64 {
        self.merged.count.unwrap_or(1)
    }
}

/// `unrecorded`: what a session's budget dropped.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Unrecorded {
    /// The budget, in bytes.
    #[serde(default)]
    pub bound: Option<u64>,
    /// By event (`used`, `denied`, `limit`), by kind, how many.
    #[serde(default)]
    pub dropped: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Unrecorded {
    /// How many events were dropped in all (at least one: the event says
    /// something was).
    pub fn total(&self) -> u64 {
        let n: u64 = self.dropped.values().flat_map(|kinds| kinds.values()).sum();
        n.max(1)
    }
}

/// `end`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct End {
    /// Why (`exited`, `violation`, `shutdown`, `start_failed`, …).
    #[serde(default)]
    pub reason: Option<String>,
    /// The reason in words.
    #[serde(default)]
    pub detail: Option<String>,
    /// The Tick's exit status, when it exited with one.
    #[serde(default)]
    pub exit_code: Option<i64>,
}

/// Why a line is not an audit event this reader takes. No variant carries
/// any of the line's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Longer than any line the writer writes.
    #[error("a line of {0} bytes is not an audit line (at most {MAX_AUDIT_LINE_BYTES}, MAX_AUDIT_LINE_BYTES)")]
    TooLong(usize),
    /// Not JSON.
    #[error("not an audit line: not JSON (column {0})")]
    NotJson(usize),
    /// JSON, but not an object.
    #[error("not an audit line: not a JSON object")]
    NotObject,
    /// No schema version.
    #[error("not an audit event: no schema version (v)")]
    NoVersion,
    /// A schema version this reader does not know.
    #[error("audit schema version {0}; this tickbox reads version {AUDIT_VERSION}")]
    Version(u64),
    /// No event name.
    #[error("not an audit event: no event name")]
    NoEvent,
    /// A known event without a field it must have.
    #[error("{event} event without its field {field}")]
    Missing {
        /// The event (one this reader knows).
        event: &'static str,
        /// The field (one of the schema's names).
        field: String,
    },
    /// A known event with a field of the wrong type or value.
    #[error("{event} event with a field of the wrong type or value")]
    Malformed {
        /// The event (one this reader knows).
        event: &'static str,
    },
}

/// The events this reader knows, as `&'static str` for errors: a name
/// from the line never reaches a message.
const KNOWN: [&str; 8] = [
    "start",
    "call",
    "approval",
    "used",
    "denied",
    "limit",
    "unrecorded",
    "end",
];

/// Reads one line (no newline) of an audit file.
pub fn parse_line(line: &str) -> Result<Line, ReadError> {
    if line.len() > MAX_AUDIT_LINE_BYTES {
        return Err(ReadError::TooLong(line.len()));
    }
    let value: Value =
        serde_json::from_str(line).map_err(|err| ReadError::NotJson(err.column()))?;
    let Value::Object(fields) = &value else {
        return Err(ReadError::NotObject);
    };
    match fields.get("v").and_then(Value::as_u64) {
        Some(AUDIT_VERSION) => {}
        Some(v) => return Err(ReadError::Version(v)),
        None => return Err(ReadError::NoVersion),
    }
    let name = fields
        .get("event")
        .and_then(Value::as_str)
        .ok_or(ReadError::NoEvent)?;
    let known = KNOWN.iter().find(|k| **k == name).copied();
    let malformed = |err: serde_json::Error| match known {
        Some(event) => missing_field(&err)
            .map(|field| ReadError::Missing { event, field })
            .unwrap_or(ReadError::Malformed { event }),
        // Only a known event's fields are read.
        None => ReadError::Malformed { event: "an" },
    };
    let common = Common::deserialize(&value).map_err(|_| ReadError::Malformed {
        event: known.unwrap_or("an"),
    })?;
    let entry = Entry::deserialize(&value).map_err(malformed)?;
    Ok(Line {
        session: common.session,
        ts: common.ts,
        lost: common.lost,
        cut: common.cut,
        entry,
    })
}

/// The field serde found missing: its message names it between
/// backquotes, and the name is the schema's (a struct field), never the
/// line's. Any other message may quote a value, so it is not used.
fn missing_field(err: &serde_json::Error) -> Option<String> {
    let message = err.to_string();
    let rest = message.strip_prefix("missing field `")?;
    let name = &rest[..rest.find('`')?];
    name.chars()
        .all(|c| c.is_ascii_lowercase() || c == '_')
        .then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Audit, AuditLine, AuditSink, DenialKind, Origin, Use as Used};
    use crate::outcome::{CallOutcome, EndReason, UnknownReason};
    use serde_json::json;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A sink keeping every line as the writer encodes it.
    #[derive(Default)]
    struct Kept(Mutex<Vec<String>>);
    impl AuditSink for Kept {
        fn offer(&self, event: AuditLine) -> bool {
            crate::util::lock(&self.0).push(event.into_line());
            true
        }
    }

    fn read_all(kept: &Kept) -> Vec<Line> {
        crate::util::lock(&kept.0)
            .iter()
            .map(|l| parse_line(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// Every event the writer writes reads back as its typed entry, with
    /// the values it was given.
    #[test]
    fn every_event_the_writer_writes_reads_back_typed() {
        let kept = Arc::new(Kept::default());
        let root = Audit::new(Origin::Mcp, vec![kept.clone()]);
        let audit = root.for_session();
        let grants = json!({"dirs": [{"host": "/d", "guest": "/data"}], "net": []});
        audit.start(
            "notes.wasm",
            "wasm component",
            Some("sha256:ab".into()),
            grants.clone(),
        );
        let args = json!({"k": 1});
        let took = Duration::from_millis(3);
        audit.call("add", true, &args, &CallOutcome::Ok(json!(1)), took);
        let unknown = CallOutcome::Unknown(UnknownReason::TimedOut(took));
        audit.call("slow", false, &args, &unknown, took);
        audit.approval("call", "add", true, "policy");
        audit.used(Used::Dir {
            host: "/d",
            guest: "/data",
            write: true,
        });
        audit.used(Used::Socket {
            address: "127.0.0.1:80",
            allow_net: "127.0.0.1:80",
        });
        audit.used(Used::Lookup {
            name: "example.com",
            allow_net: "example.com:443",
        });
        audit.used(Used::HttpOrigin {
            origin: "http://127.0.0.1:8080",
            fixture: true,
        });
        audit.denied(DenialKind::Path, "../x", "leads out");
        audit.limit("max_memory", 1024, "asked for 2048");
        audit.end(&EndReason::Shutdown);
        let read = read_all(&kept);
        let session = audit.session().map(str::to_string);
        assert!(read.iter().all(|l| l.session == session && l.ts.is_some()));
        let entries: Vec<Entry> = read.into_iter().map(|l| l.entry).collect();
        let [start, ok, unknown, approval, dir, socket, lookup, http, denied, limit, end] =
            entries.try_into().expect("eleven lines");
        assert_eq!(
            start,
            Entry::Start(Start {
                tick: "notes.wasm".into(),
                backend: "wasm component".into(),
                origin: Some("mcp".into()),
                sha256: Some("sha256:ab".into()),
                client: None,
                grants,
            })
        );
        let Entry::Call(ok) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(
            (ok.tool.as_deref(), ok.outcome.as_deref(), ok.mutates),
            (Some("add"), Some("ok"), Some(true))
        );
        assert_eq!(
            ok.args_sha256,
            Some(crate::audit::sha256_hex(args.to_string().as_bytes()))
        );
        assert!(matches!(unknown, Entry::Call(Call { outcome: Some(o), .. }) if o == "unknown"));
        assert_eq!(
            approval,
            Entry::Approval(Approval {
                what: Some("call".into()),
                subject: Some("add".into()),
                granted: Some(true),
                by: Some("policy".into()),
            })
        );
        let dir_use = Use::Dir {
            host: "/d".into(),
            guest: "/data".into(),
            access: Access::Write,
        };
        assert_eq!(dir, Entry::Used(dir_use));
        assert_eq!(
            socket,
            Entry::Used(Use::Socket {
                allow_net: "127.0.0.1:80".into()
            })
        );
        let name = "example.com".into();
        let lookup_use = Use::Lookup {
            name,
            allow_net: "example.com:443".into(),
        };
        assert_eq!(lookup, Entry::Used(lookup_use));
        let origin = "http://127.0.0.1:8080".into();
        assert_eq!(
            http,
            Entry::Used(Use::HttpOrigin {
                origin,
                fixture: true
            })
        );
        let Entry::Denied(denied) = denied else {
            panic!("{denied:?}")
        };
        assert_eq!((denied.attempted.as_str(), denied.times()), ("../x", 1));
        let Entry::Limit(limit) = limit else {
            panic!("{limit:?}")
        };
        assert_eq!(
            (limit.bound.as_str(), limit.value, limit.times()),
            ("max_memory", 1024, 1)
        );
        let Entry::End(end) = end else {
            panic!("{end:?}")
        };
        assert_eq!(end.reason.as_deref(), Some("shutdown"));
    }

    /// A merged run of refusals reads back as its example with how many
    /// it stands for; what a budget dropped reads back by kind.
    #[test]
    fn merged_refusals_and_unrecorded_events_read_back_with_their_counts() {
        let kept = Arc::new(Kept::default());
        let root = Audit::new(Origin::Cli, vec![kept.clone()])
            .with_merge_window(Duration::ZERO)
            .with_session_budget(700);
        let audit = root.for_session();
        // The first is written alone; each later one (the window is zero)
        // goes out as a merged line of one, until the budget is spent.
        for i in 0..40 {
            audit.denied(DenialKind::Socket, &format!("10.0.0.{i}:80"), "no grant");
        }
        audit.end(&EndReason::Shutdown);
        let read = read_all(&kept);
        let refusals: Vec<&Refusal> = read
            .iter()
            .filter_map(|l| match &l.entry {
                Entry::Denied(r) => Some(r),
                _ => None,
            })
            .collect();
        assert!(refusals.len() > 1 && refusals.len() < 40, "{read:?}");
        assert_eq!(refusals[0].merged, Merged::default(), "the first is alone");
        assert!(refusals[1].merged.count.is_some() && refusals[1].merged.first.is_some());
        let unrecorded = read
            .iter()
            .find_map(|l| match &l.entry {
                Entry::Unrecorded(u) => Some(u),
                _ => None,
            })
            .expect("the budget was passed");
        assert_eq!(unrecorded.bound, Some(700));
        let written: u64 = refusals.iter().map(|r| r.times()).sum();
        assert_eq!(
            written + unrecorded.total(),
            40,
            "every refusal is written or counted"
        );
        assert_eq!(unrecorded.dropped["denied"]["socket"], unrecorded.total());
        // Positive control: with room and time, one line and no unrecorded.
        let kept = Arc::new(Kept::default());
        let audit = Audit::new(Origin::Cli, vec![kept.clone()]).for_session();
        for _ in 0..40 {
            audit.denied(DenialKind::Socket, "10.0.0.1:80", "no grant");
        }
        audit.end(&EndReason::Shutdown);
        let read = read_all(&kept);
        let times: Vec<u64> = read
            .iter()
            .filter_map(|l| match &l.entry {
                Entry::Denied(r) => Some(r.times()),
                _ => None,
            })
            .collect();
        assert_eq!(
            times,
            [1, 39],
            "the first alone, the rest merged at the end"
        );
        assert!(!read.iter().any(|l| matches!(l.entry, Entry::Unrecorded(_))));
    }

    /// Past the bound of distinct uses, the use that says so reads back.
    #[test]
    fn a_use_record_past_its_bound_reads_back_as_unrecorded() {
        let kept = Arc::new(Kept::default());
        let audit = Audit::new(Origin::Cli, vec![kept.clone()]).for_session();
        for port in 0..=crate::limits::MAX_AUDIT_USES {
            let grant = format!("127.0.0.1:{port}");
            audit.used(Used::Socket {
                address: &grant,
                allow_net: &grant,
            });
        }
        let read = read_all(&kept);
        let last = read.last().map(|l| &l.entry);
        assert_eq!(last, Some(&Entry::Used(Use::Unrecorded)));
        // Positive control: within the bound, every use is a socket.
        let first = read.first().map(|l| &l.entry);
        assert!(matches!(first, Some(Entry::Used(Use::Socket { .. }))));
    }

    /// Each wall refuses with the rule and never the content; a later
    /// tickbox's event and kind of use pass.
    #[test]
    fn each_wall_refuses_by_its_rule_and_never_quotes_the_line() {
        let secret = "SECRET";
        let err = |line: &str| parse_line(line).unwrap_err();
        assert_eq!(err(secret), ReadError::NotJson(1));
        assert_eq!(err("[1]"), ReadError::NotObject);
        assert_eq!(err(r#"{"event":"start"}"#), ReadError::NoVersion);
        assert_eq!(err(r#"{"v":2,"event":"start"}"#), ReadError::Version(2));
        assert_eq!(err(r#"{"v":1}"#), ReadError::NoEvent);
        let long = format!("{{\"v\":1,\"x\":\"{}\"}}", "a".repeat(MAX_AUDIT_LINE_BYTES));
        assert_eq!(err(&long), ReadError::TooLong(long.len()));
        let missing = err(r#"{"v":1,"event":"used","what":"dir"}"#);
        assert_eq!(missing.to_string(), "used event without its field host");
        let wrong = err(r#"{"v":1,"event":"limit","bound":"b","detail":"d","value":"SECRET"}"#);
        assert_eq!(wrong, ReadError::Malformed { event: "limit" });
        let access =
            r#"{"v":1,"event":"used","what":"dir","host":"h","guest":"g","access":"SECRET"}"#;
        assert!(!err(access).to_string().contains(secret));
        // Positive controls: the same lines made whole, and what a later
        // tickbox adds.
        let limit = r#"{"v":1,"event":"limit","bound":"b","detail":"d","value":3}"#;
        assert!(matches!(parse_line(limit).unwrap().entry, Entry::Limit(_)));
        let future = parse_line(r#"{"v":1,"event":"future","session":"a","x":1}"#).unwrap();
        assert_eq!(
            (future.entry, future.session.as_deref()),
            (Entry::Other, Some("a"))
        );
        let kind = parse_line(r#"{"v":1,"event":"used","what":"gpu"}"#).unwrap();
        assert_eq!(kind.entry, Entry::Used(Use::Other));
        let lost = parse_line(r#"{"v":1,"event":"end","lost":3,"cut":true}"#).unwrap();
        assert_eq!((lost.lost, lost.cut), (3, true));
    }
}
