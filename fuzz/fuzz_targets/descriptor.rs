//! Descriptor validation with schema compilation (§5.3): a Tick's
//! tick/describe result, then preparing calls against what it declares.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use tickbox_runtime::protocol::Descriptor;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(d) = Descriptor::parse(v.clone()) else {
        return;
    };
    // Every declared tool can be prepared against (valid or not), with args
    // taken from the input itself.
    let args = v.get("fuzz_args").cloned().unwrap_or_else(|| json!({}));
    for tool in &d.tools {
        let _ = d.prepare(tool.name.wire(), args.clone());
        let _ = d.prepare(tool.name.wire(), json!({}));
    }
    let _ = d.prepare("no such tool", json!({}));
});
