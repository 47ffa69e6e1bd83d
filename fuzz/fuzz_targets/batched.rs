//! The SDK's wasm read path: the frames made from one read are held and
//! written together; whatever size the reads are, the bytes written are
//! those of handling the same lines one at a time.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tickbox_guest::fuzzing::batched(data);
});
