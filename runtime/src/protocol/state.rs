//! Tick state (§6.2) and the rules updates and reads must keep (§6.3, §8.2).

use super::limits::{MAX_UINTEGER, MAX_UPDATE_BYTES};
use super::message::encoded_len;
use serde::Serialize;
use serde_json::Value;

/// One snapshot of a Tick's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TickState {
    /// Sequence number; grows with every update.
    pub seq: u64,
    /// The complete business state, or null while there is none yet.
    pub data: Value,
    /// When the state was observed (RFC 3339), if the Tick said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// Whether a string is an RFC 3339 timestamp.
pub fn is_rfc3339(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
}

/// Parses a TickState shape: seq a uinteger, data present, at RFC 3339 if present.
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
        data: data.clone(),
        at,
    })
}

/// Checks a tick/update against §8.2 given the seq of the previous update.
pub fn check_update(params: &Value, last_update_seq: Option<u64>) -> Result<TickState, String> {
    let state = parse_state(params)?;
    if state.data.is_null() {
        return Err("data is null".into());
    }
    if let Some(last) = last_update_seq {
        if state.seq <= last {
            return Err(format!("seq {} is not greater than {last}", state.seq));
        }
    }
    let size = encoded_len(params);
    if size > MAX_UPDATE_BYTES {
        return Err(format!(
            "is {size} bytes encoded, over the {MAX_UPDATE_BYTES}-byte limit"
        ));
    }
    Ok(state)
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
            .contains("null"));
        assert!(check_update(&json!({"seq":1,"data":1}), Some(1))
            .unwrap_err()
            .contains("not greater"));
        assert!(
            check_update(&json!({"seq":2,"data":1,"at":"yesterday"}), Some(1))
                .unwrap_err()
                .contains("RFC 3339")
        );
        assert!(check_update(&json!({"seq":-1,"data":1}), None).is_err());
        assert!(check_update(&json!({"seq":1.5,"data":1}), None).is_err());
        let big = json!({"seq":1,"data":"x".repeat(MAX_UPDATE_BYTES)});
        assert!(check_update(&big, None).unwrap_err().contains("limit"));
    }

    #[test]
    fn reads_may_carry_null_data() {
        assert_eq!(
            parse_state(&json!({"seq":0,"data":null})).unwrap().data,
            Value::Null
        );
        assert!(parse_state(&json!({"seq":0})).is_err());
    }
}
