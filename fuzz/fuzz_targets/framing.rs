//! The line framer and the message parser: every byte a Tick writes to its
//! stdout goes through `LineReader` and `parse_line` (and updates through
//! `check_update`). Checks that lines are exactly the input split on
//! newlines, never over the limit, and that nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tickbox_fuzz::{run, Chunked};
use tickbox_runtime::framing::{FrameError, LineReader};
use tickbox_runtime::protocol::message::parse_line;
use tickbox_runtime::protocol::state::check_update;
use tickbox_runtime::protocol::{Incoming, Violation};

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, input)) = data.split_first() else {
        return;
    };
    // A small limit so the fuzzer reaches it; chunks of 1 to 16 bytes.
    let limit = 64 + usize::from(knobs & 0xf0) * 4;
    let chunk = usize::from(knobs & 0x0f) + 1;
    let mut reader = LineReader::with_limit(Chunked::new(input, chunk), limit);
    let mut consumed = 0;
    loop {
        let Some(next) = run(reader.next_line()) else {
            panic!("the framer waited on in-memory input")
        };
        match next {
            Ok(Some(line)) => {
                assert!(line.len() <= limit, "a line over the limit");
                assert!(!line.contains(&b'\n'));
                assert_eq!(&input[consumed..consumed + line.len()], &line[..]);
                assert_eq!(input[consumed + line.len()], b'\n');
                consumed += line.len() + 1;
                if let Ok(Incoming::Update(params)) = parse_line(&line) {
                    let _ = check_update(&params, None);
                    let _ = check_update(&params, Some(3));
                }
            }
            Ok(None) => {
                assert_eq!(consumed, input.len(), "a clean end after every byte");
                break;
            }
            Err(FrameError::Violation(Violation::Unterminated { bytes })) => {
                assert_eq!(consumed + bytes, input.len());
                assert_eq!(reader.rest(), &input[consumed..]);
                break;
            }
            Err(FrameError::Violation(Violation::LineTooLong { .. })) => {
                let rest = &input[consumed..];
                let line = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                assert!(line > limit, "refused a line within the limit");
                break;
            }
            Err(e) => panic!("unexpected framing error: {e}"),
        }
    }
});
