//! Trimming a state to a delivery budget (§6.4): the result fits, is `null`
//! only when nothing fits, and every cut names a place in the result.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use tickbox_runtime::delivery::fit;
use tickbox_runtime::protocol::descriptor::Series;
use tickbox_runtime::protocol::message::encoded_len;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, input)) = data.split_first() else {
        return;
    };
    let Ok(state) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    let budget = 40 + usize::from(knob) * 8;
    // The first array member of an object, if any, is a declared series.
    let series: Vec<Series> = state
        .as_object()
        .and_then(|m| m.iter().find(|(_, v)| v.is_array()))
        .map(|(k, _)| Series {
            path: format!("/{}", k.replace('~', "~0").replace('/', "~1")),
            newest_last: knob & 1 == 0,
        })
        .into_iter()
        .collect();
    let mut item = json!({"seq": 1, "data": null, "trimmed": []});
    let (kept, cuts) = fit(&state, &series, budget, |d, c| {
        item["data"] = d.clone();
        item["trimmed"] = serde_json::to_value(c).unwrap_or_default();
        encoded_len(&item)
    });
    let cuts_value = serde_json::to_value(&cuts).unwrap();
    let total = encoded_len(&json!({"seq": 1, "data": kept, "trimmed": cuts_value}));
    let smallest = encoded_len(
        &json!({"seq": 1, "data": null, "trimmed": [{"path": "", "kept": "nothing", "bytes": encoded_len(&state)}]}),
    );
    if kept.is_null() && !state.is_null() {
        // Null only when not even an emptied shape would fit.
        let empty = match &state {
            Value::Object(_) => json!({}),
            Value::Array(_) => json!([]),
            _ => Value::Null,
        };
        if !empty.is_null() {
            let with_note = encoded_len(
                &json!({"seq": 1, "data": empty, "trimmed": [{"path": "", "kept": "members", "count": 0, "of": 1_000_000_000}]}),
            );
            assert!(with_note > budget, "null although {with_note} <= {budget}");
        }
    } else {
        assert!(total <= budget, "{total} > {budget}");
    }
    assert!(total <= budget.max(smallest));
    if cuts.is_empty() {
        assert_eq!(kept, state, "changed without a cut listed");
    }
    for c in &cuts {
        assert!(
            kept.pointer(&c.path).is_some() || kept.is_null(),
            "{} not in the result",
            c.path
        );
    }
});
