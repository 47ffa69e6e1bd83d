//! The live socket's frame decoder and its requests and replies: what a
//! client (or a host) of the same user sends over `<id>.sock`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickbox_fuzz::{run, Chunked};
use tickbox_runtime::live::wire::{read_frame, Frame, Reply, Request, MAX_FRAME};

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, input)) = data.split_first() else {
        return;
    };
    let mut r = Chunked::new(input, usize::from(chunk) + 1);
    // Each frame takes at least its 5-byte head: a bounded loop.
    for _ in 0..=input.len() / 5 {
        let Some(next) = run(read_frame(&mut r)) else {
            panic!("the decoder waited on in-memory input")
        };
        match next {
            Ok(Some(Frame::Json(v))) => {
                let _ = serde_json::from_value::<Request>(v.clone());
                let _ = serde_json::from_value::<Reply>(v);
            }
            Ok(Some(Frame::Output(b) | Frame::Keys(b))) => assert!(b.len() <= MAX_FRAME),
            Ok(None) | Err(_) => break,
        }
    }
});
