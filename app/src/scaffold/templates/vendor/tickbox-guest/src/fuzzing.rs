//! Entry points for the fuzz targets in `fuzz/` (not part of the SDK's API,
//! hidden from its docs): the request dispatcher and the key decoder, fed
//! arbitrary bytes, with the promises they keep checked.

use crate::dispatch::Runtime;
use crate::key::{decode, Decoder, MAX_PENDING};
use crate::prelude::*;
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Default)]
struct Fuzzed {
    value: i64,
    log: Vec<i64>,
}

#[derive(Deserialize, JsonSchema)]
struct Set {
    value: i64,
}

impl Tick for Fuzzed {
    const KIND: &'static str = "fuzz.dispatch";
    const TITLE: &'static str = "Fuzzed";
    const DESCRIPTION: &'static str = "The dispatcher under arbitrary input.";
    const RECOVER_WITH: Option<&'static str> = Some("history");
    const SERIES: &'static [Series] = &[Series::newest_last("/log")];

    fn state(&self) -> impl Serialize {
        json!({"value": self.value, "log": self.log})
    }

    fn tools(&self, t: &mut Tools<Self>) {
        t.add(
            "set",
            "Set the value.",
            Effect::Mutates,
            |f: &mut Fuzzed, a: Set, _: &mut Ctx| {
                f.value = a.value;
                f.log.push(a.value);
                if f.log.len() > 64 {
                    f.log.remove(0);
                }
                Ok(json!({"value": f.value}))
            },
        );
        t.add(
            "history",
            "The log.",
            Effect::ReadOnly,
            |f: &mut Fuzzed, _: NoArgs, _: &mut Ctx| Ok(json!({"log": f.log})),
        );
        t.add(
            "echo",
            "Any args back.",
            Effect::ReadOnly,
            |_: &mut Fuzzed, a: Value, _: &mut Ctx| Ok(a),
        );
    }

    fn on_key(&mut self, key: Key, _: &mut Ctx) {
        if key == Key::Char('+') {
            self.value += 1;
        }
    }
}

/// Feeds `input`'s lines to a dispatcher (and any key bytes after a 0xff
/// byte as view input), and checks what it wrote: whole lines of JSON-RPC
/// 2.0, never an `id` of null, at most one response per line read, each
/// either a result or an error.
/// Panics when a promise is broken, which is what the fuzzer looks for.
pub fn dispatch(input: &[u8]) {
    let out = Rc::new(RefCell::new(Vec::new()));
    let o = out.clone();
    let mut rt = Runtime::new(
        Fuzzed::default(),
        (40, 10),
        Box::new(move |b: &[u8]| {
            o.borrow_mut().extend_from_slice(b);
            Ok(())
        }),
        Box::new(|_: &str| {}),
        // No view: drawing is not what this target is about, and it is slow.
        None,
    );
    let (lines, keys) = match input.iter().position(|&b| b == 0xff) {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (input, &[][..]),
    };
    let mut read = 0;
    for line in lines.split(|&b| b == b'\n') {
        rt.line(&String::from_utf8_lossy(line));
        read += 1;
    }
    rt.keys(keys);
    let bytes = std::mem::take(&mut *out.borrow_mut());
    let text = String::from_utf8(bytes).expect("the dispatcher writes UTF-8");
    assert!(text.is_empty() || text.ends_with('\n'), "a partial line");
    let mut responses = 0;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("every frame is JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if let Some(id) = v.get("id") {
            assert!(!id.is_null(), "id null: {line}");
            responses += 1;
            assert!(responses <= read, "more responses than lines read");
            assert!(
                v.get("result").is_some() != v.get("error").is_some(),
                "{line}"
            );
        }
    }
}

/// What a dispatcher wrote, and in how many (non-empty) writes.
type Written = Rc<RefCell<(Vec<u8>, usize)>>;

/// A dispatcher over the fuzzed Tick that records its writes.
fn recording_runtime() -> (Runtime<Fuzzed>, Written) {
    let out = Rc::new(RefCell::new((Vec::new(), 0)));
    let o = out.clone();
    let rt = Runtime::new(
        Fuzzed::default(),
        (40, 10),
        Box::new(move |b: &[u8]| {
            let mut o = o.borrow_mut();
            o.0.extend_from_slice(b);
            o.1 += 1;
            Ok(())
        }),
        Box::new(|_: &str| {}),
        None,
    );
    (rt, out)
}

/// The wasm read loop's path (`Runtime::input`: the frames of one read
/// held and written together) against the same lines handled one at a
/// time: the first byte of `input` picks the size of the reads the rest is
/// cut into. Whatever the cut, the bytes written are the same, in the same
/// order, and one read makes at most one write per `dispatch::MAX_HELD`
/// bytes it produces (plus one).
pub fn batched(input: &[u8]) {
    use tickbox_protocol::framing::LineFramer;
    let Some((&cut, input)) = input.split_first() else {
        return;
    };
    let chunk = usize::from(cut).max(1);

    // One line at a time, framed as the read path frames them and stopped
    // at an over-long line.
    let (mut one, one_out) = recording_runtime();
    let mut framer = LineFramer::new();
    framer.push(input);
    while let Ok(Some(line)) = framer.next_line() {
        one.framed_line(&line);
    }

    let (mut many, many_out) = recording_runtime();
    let before = many_out.borrow().1;
    let mut framer = LineFramer::new();
    let mut reads = 0;
    for piece in input.chunks(chunk) {
        reads += 1;
        let made = many_out.borrow().0.len();
        let writes = many_out.borrow().1;
        let stop = many.input(&mut framer, piece).is_err();
        let (bytes, after) = {
            let o = many_out.borrow();
            (o.0.len() - made, o.1 - writes)
        };
        assert!(
            after <= bytes / crate::dispatch::MAX_HELD + 1,
            "one read made {after} writes for {bytes} bytes"
        );
        if stop {
            break;
        }
    }
    let (a, b) = (&one_out.borrow().0, &many_out.borrow().0);
    assert!(
        a == b,
        "reads of {chunk} bytes wrote differently from one line at a time \
         ({} vs {} bytes, {reads} reads, {} writes)",
        b.len(),
        a.len(),
        many_out.borrow().1 - before
    );
}

/// Decodes `input` whole and split in two at a point its first byte picks,
/// and checks that the split changes nothing (unless the first part ends in
/// a lone ESC, which is the Escape key by design) and that the decoder
/// keeps no more than its bound.
pub fn keys(input: &[u8]) {
    let Some((&cut, input)) = input.split_first() else {
        return;
    };
    let cut = usize::from(cut).min(input.len());
    let mut d = Decoder::new();
    let mut keys = d.feed(&input[..cut]);
    assert!(d.pending().len() <= MAX_PENDING);
    keys.extend(d.feed(&input[cut..]));
    assert!(d.pending().len() <= MAX_PENDING);
    let mut whole_decoder = Decoder::new();
    let whole = whole_decoder.feed(input);
    let _ = decode(input);
    // Splitting may change the keys only where a read ends in a lone ESC
    // (the Escape key, by design) or the input outgrows the pending bound.
    if (cut == 0 || input[cut - 1] != 0x1b) && input.len() <= MAX_PENDING {
        assert_eq!(keys, whole, "split at {cut} changed the keys");
        assert_eq!(d.pending(), whole_decoder.pending());
    }
}
