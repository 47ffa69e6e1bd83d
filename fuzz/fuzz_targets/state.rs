//! State and update validation (§6.2, §8.2): tick/read results and
//! tick/update params as a Tick sends them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tickbox_runtime::protocol::state::{check_update, parse_state};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let _ = parse_state(&v);
    for last in [None, Some(0), Some(1), Some(u64::MAX)] {
        if let Ok(state) = check_update(&v, last) {
            if let Some(last) = last {
                assert!(state.seq > last, "an update not newer than the last");
            }
        }
    }
});
