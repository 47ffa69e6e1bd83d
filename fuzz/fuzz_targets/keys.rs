//! The SDK's key decoder: bytes typed in a view, split into reads anywhere.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tickbox_guest::fuzzing::keys(data);
});
