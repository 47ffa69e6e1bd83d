//! Tick state (§6.2) and the rules updates and reads must keep (§6.3, §8.2).
//!
//! [`update_findings`] judges one tick/update against every §8.2 rule and
//! [`check_update`] refuses it on the first; [`parse_state`] checks a
//! tick/read result (§6.2) and [`check_read_floor`] its seq (§6.3). The
//! session and the checker both call these.

use crate::finding::Finding;
use crate::limits::{MAX_UINTEGER, MAX_UPDATE_BYTES};
use crate::message::encoded_len;
use crate::rules::{self, Rule};
use crate::text::TickData;
use serde::Serialize;
use serde_json::Value;

/// One snapshot of a Tick's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TickState {
    /// Sequence number; grows with every update.
    pub seq: u64,
    /// The complete business state, or null while there is none yet
    /// (the Tick's: out through [`TickData`]'s escaped ways only).
    pub data: TickData,
    /// When the state was observed (RFC 3339), if the Tick said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// Whether a string is an RFC 3339 timestamp.
pub fn is_rfc3339(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// Parses a TickState shape: seq a uinteger, data present, at RFC 3339 if
/// present. The reason names what is wrong; the rule is the caller's
/// ([`rules::READ_VALID`] for a read, [`rules::STATE_UPDATE_VALID`] for an update).
pub fn parse_state(v: &Value) -> Result<TickState, String> {
    let Value::Object(obj) = v else {
        return Err("params are not an object".into());
    };
    let seq = match obj.get("seq").and_then(Value::as_u64) {
        Some(s) if s <= MAX_UINTEGER => s,
        _ => return Err("seq is missing or not an unsigned integer".into()),
    };
    let Some(data) = obj.get("data") else {
        return Err("data is missing".into());
    };
    let at = match obj.get("at") {
        None => None,
        Some(Value::String(s)) if is_rfc3339(s) => Some(s.clone()),
        Some(other) => return Err(format!("at {other} is not an RFC 3339 timestamp")),
    };
    Ok(TickState {
        seq,
        data: TickData::new(data.clone()),
        at,
    })
}

/// The rules [`update_findings`] judges.
pub const UPDATE_RULES: &[&Rule] = &[
    rules::STATE_UPDATE_VALID,
    rules::STATE_UPDATE_SEQ,
    rules::STATE_UPDATE_SIZE,
];

/// Judges a tick/update's params against every §8.2 rule, given the seq of
/// the previous update: the state if its shape is valid, and every finding.
pub fn update_findings(
    params: &Value,
    last_update_seq: Option<u64>,
) -> (Option<TickState>, Vec<Finding>) {
    let mut findings = Vec::new();
    let state = match parse_state(params) {
        Ok(s) if s.data.is_null() => {
            findings.push(Finding::new(rules::STATE_UPDATE_VALID, "data is null"));
            Some(s)
        }
        Ok(s) => Some(s),
        Err(why) => {
            findings.push(Finding::new(rules::STATE_UPDATE_VALID, why));
            None
        }
    };
    if let (Some(s), Some(last)) = (&state, last_update_seq) {
        if s.seq <= last {
            findings.push(Finding::new(
                rules::STATE_UPDATE_SEQ,
                format!("seq {} is not greater than {last}", s.seq),
            ));
        }
    }
    let size = encoded_len(params);
    if size > MAX_UPDATE_BYTES {
        findings.push(Finding::new(
            rules::STATE_UPDATE_SIZE,
            format!("is {size} bytes encoded, over the {MAX_UPDATE_BYTES}-byte limit"),
        ));
    }
    (state, findings)
}

/// Checks a tick/update against §8.2 given the seq of the previous update;
/// the first finding refuses it.
pub fn check_update(params: &Value, last_update_seq: Option<u64>) -> Result<TickState, Finding> {
    match update_findings(params, last_update_seq) {
        (Some(state), findings) if findings.is_empty() => Ok(state),
        (_, mut findings) => Err(findings.remove(0)),
    }
}

/// §6.3: a read's seq is never below the floor (the highest seq of any
/// earlier read or update).
pub fn check_read_floor(seq: u64, floor: Option<u64>) -> Result<(), Finding> {
    match floor {
        Some(floor) if seq < floor => Err(Finding::new(
            rules::STATE_READ_FLOOR,
            format!("read seq {seq} is below the read floor {floor}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn updates_follow_8_2() {
        assert!(check_update(&json!({"seq":1,"data":{}}), None).is_ok());
        assert!(check_update(
            &json!({"seq":2,"data":1,"at":"2026-11-29T10:00:00Z"}),
            Some(1)
        )
        .is_ok());
        assert!(check_update(&json!({"seq":1,"data":null}), None)
            .unwrap_err()
            .message
            .contains("null"));
        assert!(check_update(&json!({"seq":1,"data":1}), Some(1))
            .unwrap_err()
            .message
            .contains("not greater"));
        assert!(
            check_update(&json!({"seq":2,"data":1,"at":"yesterday"}), Some(1))
                .unwrap_err()
                .message
                .contains("RFC 3339")
        );
        assert!(check_update(&json!({"seq":-1,"data":1}), None).is_err());
        assert!(check_update(&json!({"seq":1.5,"data":1}), None).is_err());
        let big = json!({"seq":1,"data":"x".repeat(MAX_UPDATE_BYTES)});
        assert!(check_update(&big, None)
            .unwrap_err()
            .message
            .contains("limit"));
        assert_eq!(
            check_update(&big, None).unwrap_err().rule,
            rules::STATE_UPDATE_SIZE
        );
        assert_eq!(
            check_update(&json!({"seq":1,"data":1}), Some(3))
                .unwrap_err()
                .rule,
            rules::STATE_UPDATE_SEQ
        );
    }

    #[test]
    fn the_read_floor_holds() {
        assert!(check_read_floor(3, Some(3)).is_ok());
        assert!(check_read_floor(3, None).is_ok());
        assert_eq!(
            check_read_floor(2, Some(3)).unwrap_err().rule,
            rules::STATE_READ_FLOOR
        );
    }

    #[test]
    fn reads_may_carry_null_data() {
        assert_eq!(
            parse_state(&json!({"seq":0,"data":null}))
                .unwrap()
                .data
                .into_wire(),
            Value::Null
        );
        assert!(parse_state(&json!({"seq":0})).is_err());
    }
}
