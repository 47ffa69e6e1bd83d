//! The SDK's request dispatcher: whatever arrives on a Tick's stdin, it
//! answers with whole JSON-RPC lines, one response per request, never id null.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tickbox_guest::fuzzing::dispatch(data);
});
