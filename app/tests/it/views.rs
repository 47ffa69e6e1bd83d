//! What a hostile Tick's drawing does to the views of a live instance
//! (published and viewed in process, `live`'s harness): one huge draw
//! reaches every viewer in pieces and drops none. What reaches a person's
//! terminal through `tickbox run` and `attach` is `cli/tests/it/views.rs`.

use crate::live::Hosted;
use serde_json::json;
use tickbox_app::{Request, Target};
use tickbox_test_support::*;

#[test]
fn a_huge_single_draw_is_split_and_keeps_its_viewers() {
    use tickbox_host::live::wire::MAX_FRAME;
    use tickbox_host::view::VIEW_QUEUE_BYTES;
    let w = Hosted::start(
        "views-big",
        "b",
        Request::new(Target::File(hostile().into())),
    );
    let first = w.view(80, 24);
    let second = w.view(100, 40);
    assert!(eventually(PATIENCE, || w.views() == 2));
    // One draw larger than the largest frame of the live protocol and 190
    // times the view's queue: it reaches the model only in pieces, and no
    // viewer may be dropped for it. Not more: every byte goes through the
    // screen model at most half a core, and the call must end well within
    // a minute on a loaded machine (20 MiB took 4.5 s idle).
    const BIG_MIB: usize = 12;
    const _: () = assert!(BIG_MIB << 20 > MAX_FRAME && BIG_MIB << 20 >= 190 * VIEW_QUEUE_BYTES);
    let drawn = w.query("draw_big", json!({ "mb": BIG_MIB }));
    assert!(drawn["bytes"].as_u64().unwrap() > (BIG_MIB as u64) << 20);
    first.shows("BIG-DONE");
    second.shows("BIG-DONE");
    assert_eq!(w.views(), 2, "no viewer was disconnected");
}
