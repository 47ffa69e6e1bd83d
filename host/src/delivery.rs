//! Subscription delivery: latest state only, merged counts, and trimming to
//! the §6.4 budget.
//!
//! A Tick may emit updates far faster than anyone wants to read them. The
//! host keeps only the latest state (the session's [`StateSnapshot`]); a
//! [`Subscription`] hands out that latest state at most once per interval,
//! with the number of updates merged into it since the previous delivery, so
//! the merged counts of all deliveries add up to the updates the session
//! accepted. Each [`Delivery`] also names the Tick's `recover_with` tool
//! (§9), which rebuilds what the merging dropped.
//!
//! Before a delivery leaves the host it is trimmed to the budget
//! ([`DELIVERY_BUDGET_BYTES`] for a lone delivery, [`DELIVERY_ITEM_BUDGET_BYTES`]
//! each when several are delivered together, see [`item_budget`]). Trimming
//! ([`trim`]) shortens arrays and strings, largest first, until the encoded
//! delivery fits:
//!
//! - a declared series (`state.series`) keeps its newest end;
//! - any other array keeps its beginning and its end, losing the middle;
//! - a long string keeps its beginning;
//! - an object with nothing else to shorten below it keeps its first
//!   members (key order);
//! - a cut is only made where it saves more than the note listing it costs,
//!   so the list of cuts never crowds out the data;
//! - if that is not enough, any object keeps its first members and every
//!   array and string is cut regardless of the note's cost;
//! - only if not even the emptied shapes fit does `data` become `null`.
//!
//! Every cut is listed in [`Delivery::trimmed`], so a reader knows the data
//! is partial and can call a query tool (or tick/read) for the rest.
//!
//! Trimming is linear in the size of the state (see `delivery/trim.rs`: sizes
//! are computed once, bottom-up, and each cut updates only its ancestors),
//! bounded by [`TRIM_CPU_BUDGET`], and async callers run it on the blocking
//! pool ([`Delivery::build`], [`fit_blocking`]) so a large state never stalls
//! the workers that answer requests and signals.
//!
//! `tickbox watch` prints deliveries as JSON lines; the MCP facade uses the
//! same types for its resource subscriptions.
//!
//! ```
//! use serde_json::json;
//! use tickbox_host::delivery::trim;
//! use tickbox_protocol::descriptor::Series;
//! let data = json!({"recent": (0..1000).collect::<Vec<_>>()});
//! let series = [Series { path: "/recent".into(), newest_last: true }];
//! let (kept, cuts) = trim(&data, &series, 1024);
//! assert!(serde_json::to_string(&kept).unwrap().len() <= 1024);
//! assert_eq!(kept["recent"].as_array().unwrap().last(), Some(&json!(999)));
//! assert_eq!(cuts[0].path, "/recent");
//! ```

mod trim;

pub use trim::TRIM_CPU_BUDGET;

use crate::session::{Session, StateSnapshot};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tickbox_protocol::descriptor::{Descriptor, Series};
use tickbox_protocol::limits::{DELIVERY_BUDGET_BYTES, DELIVERY_ITEM_BUDGET_BYTES};
use tickbox_protocol::message::encoded_len;
use tickbox_protocol::{TickData, TickState};
use tokio::sync::watch;
use tokio::time::Instant;

/// One delivery of a Tick's state to a subscriber.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// The seq of the delivered state.
    pub seq: u64,
    /// When the state was observed, if the Tick said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// tick/update notifications merged into this delivery since the previous one.
    pub merged: u64,
    /// The query tool that rebuilds what merging dropped (§9), if the Tick has one.
    pub recover_with: Option<String>,
    /// What trimming cut from `data`; empty when `data` is whole.
    pub trimmed: Vec<Trimmed>,
    /// The state data, trimmed to the budget (the Tick's: out through
    /// [`TickData`]'s escaped ways only).
    pub data: TickData,
}

/// One cut made by trimming. Paths are JSON Pointers into the delivered data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trimmed {
    /// Where the cut value is ("" is `data` itself).
    pub path: String,
    /// What was done to it.
    #[serde(flatten)]
    pub cut: Cut,
}

/// What trimming did to one value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kept", rename_all = "snake_case")]
pub enum Cut {
    /// A declared series kept its newest `count` of `of` elements.
    Newest { count: usize, of: usize },
    /// An undeclared array kept its first `first` and last `last` of `of` elements.
    Ends {
        first: usize,
        last: usize,
        of: usize,
    },
    /// A string kept its first `bytes` of `of` bytes.
    Prefix { bytes: usize, of: usize },
    /// An object kept its first `count` of `of` members (in key order).
    Members { count: usize, of: usize },
    /// Nothing fit; `data` was replaced by null. `bytes` is what it encoded to.
    Nothing { bytes: usize },
}

/// The per-item budget when `items` deliveries go out together (§6.4): the
/// whole budget for one, otherwise 4 KiB each (less if even that would
/// overflow the whole budget).
pub fn item_budget(items: usize) -> usize {
    match items {
        0 | 1 => DELIVERY_BUDGET_BYTES,
        n => DELIVERY_ITEM_BUDGET_BYTES.min(DELIVERY_BUDGET_BYTES / n),
    }
}

impl Delivery {
    /// A delivery of `state` fitting `budget` bytes encoded (the whole
    /// delivery, envelope included), trimmed with the Tick's declared series.
    /// Trimming is linear but not free: async code calls [`Delivery::build`].
    pub fn new(state: &TickState, merged: u64, descriptor: &Descriptor, budget: usize) -> Delivery {
        let mut d = Delivery::envelope(state, merged, descriptor);
        let envelope = d.encoded_len();
        let (data, trimmed) = fit(
            state.data.wire(),
            &descriptor.series,
            budget,
            |data, cuts| {
                // The envelope was measured with `"data":null` and `"trimmed":[]`.
                envelope - "null".len() - "[]".len() + encoded_len(data) + cuts_len(cuts)
            },
        );
        d.data = TickData::new(data);
        d.trimmed = trimmed;
        d
    }

    /// [`Delivery::new`] on the blocking pool, off the async workers.
    pub async fn build(
        state: Arc<TickState>,
        merged: u64,
        descriptor: Arc<Descriptor>,
        budget: usize,
    ) -> Delivery {
        let fallback = Delivery {
            trimmed: vec![nothing(encoded_len(state.data.wire()))],
            ..Delivery::envelope(&state, merged, &descriptor)
        };
        tokio::task::spawn_blocking(move || Delivery::new(&state, merged, &descriptor, budget))
            .await
            .unwrap_or(fallback)
    }

    fn envelope(state: &TickState, merged: u64, descriptor: &Descriptor) -> Delivery {
        Delivery {
            seq: state.seq,
            at: state.at.clone(),
            merged,
            recover_with: descriptor.recover_with.clone(),
            trimmed: Vec::new(),
            data: TickData::default(),
        }
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        serde_json::to_value(self).map_or(0, |v| encoded_len(&v))
    }
}

/// Encoded size of a list of cuts, as `"trimmed"` carries it (`[]` when empty).
fn cuts_len(cuts: &[Trimmed]) -> usize {
    serde_json::to_vec(cuts).map_or(2, |v| v.len())
}

/// Rounds [`fit`] may take when the envelope does not grow by exactly the
/// bytes of the data and the cut list (an envelope that escapes them, say).
const FIT_ROUNDS: usize = 4;

/// Trims `data` so that the item carrying it fits `budget` bytes, where
/// `size(data, cuts)` is the encoded size of the whole item holding that
/// data and that list of cuts (the list grows the item too). Used for a
/// [`Delivery`], and for any other envelope around state data (the MCP
/// facade's state resource).
///
/// Linear in the size of `data` per round, at most `FIT_ROUNDS` rounds,
/// and bounded by [`TRIM_CPU_BUDGET`]; it runs on whatever thread calls it,
/// so async callers use [`fit_blocking`] or [`Delivery::build`].
pub fn fit(
    data: &Value,
    series: &[Series],
    budget: usize,
    mut size: impl FnMut(&Value, &[Trimmed]) -> usize,
) -> (Value, Vec<Trimmed>) {
    // What the item costs besides its data and its cut list.
    let envelope = size(&Value::Null, &[]).saturating_sub("null".len() + "[]".len());
    let mut inner = budget.saturating_sub(envelope);
    for _ in 0..FIT_ROUNDS {
        let mut trimmer = trim::Trimmer::new(data, series, true);
        if !trimmer.run(inner) {
            break;
        }
        let fitted = trimmer.finish();
        let total = size(&fitted.0, &fitted.1);
        if total <= budget {
            return fitted;
        }
        // The envelope grew by more than the data did: trim deeper by the
        // overshoot.
        inner = inner.saturating_sub(total - budget);
    }
    (Value::Null, vec![nothing(encoded_len(data))])
}

/// [`fit`] on the blocking pool, so a large state never holds up the async
/// workers that serve everything else.
pub async fn fit_blocking<F>(
    data: Arc<TickState>,
    series: Vec<Series>,
    budget: usize,
    size: F,
) -> (Value, Vec<Trimmed>)
where
    F: FnMut(&Value, &[Trimmed]) -> usize + Send + 'static,
{
    let bytes = encoded_len(data.data.wire());
    tokio::task::spawn_blocking(move || fit(data.data.wire(), &series, budget, size))
        .await
        .unwrap_or_else(|_| (Value::Null, vec![nothing(bytes)]))
}

/// Trims `data` until it encodes to at most `budget` bytes (the cut list
/// not counted); returns the trimmed data and the cuts made. See the module
/// docs for the rules.
pub fn trim(data: &Value, series: &[Series], budget: usize) -> (Value, Vec<Trimmed>) {
    let mut trimmer = trim::Trimmer::new(data, series, false);
    if trimmer.run(budget) {
        trimmer.finish()
    } else {
        (Value::Null, vec![nothing(encoded_len(data))])
    }
}

fn nothing(bytes: usize) -> Trimmed {
    Trimmed {
        path: String::new(),
        cut: Cut::Nothing { bytes },
    }
}

/// Indices from the middle outwards, so dropping a prefix of this order keeps
/// both ends of the array.
pub(crate) fn middle_out(n: usize) -> impl Iterator<Item = usize> {
    let mid = n / 2;
    (0..n).map(move |k| {
        if k % 2 == 0 {
            mid + k / 2
        } else {
            mid - 1 - k / 2
        }
    })
}

/// Latest-only deliveries of one session's state, at most one per interval.
pub struct Subscription {
    state: watch::Receiver<StateSnapshot>,
    /// Updates accounted for by earlier deliveries (or before subscribing).
    delivered_updates: u64,
    /// The seq last delivered, so a state that did not change is not resent.
    delivered_seq: Option<u64>,
    interval: Duration,
    last: Option<Instant>,
}

impl Subscription {
    /// Subscribes to `session`. With `from_start`, the first delivery counts
    /// every update the session has accepted; otherwise only those after now.
    pub fn new(session: &Session, interval: Duration, from_start: bool) -> Subscription {
        let state = session.watch_state();
        let delivered_updates = if from_start {
            0
        } else {
            state.borrow().updates
        };
        Subscription {
            state,
            delivered_updates,
            delivered_seq: None,
            interval,
            last: None,
        }
    }

    /// Waits for the next delivery: the latest state and the number of
    /// updates merged into it. The first call returns the current state at
    /// once. Returns `None` once the session has ended and everything it
    /// accepted has been delivered.
    pub async fn next(&mut self, session: &Session) -> Option<(Arc<TickState>, u64)> {
        let mut ended = false;
        loop {
            if let Some(d) = self.take() {
                if !ended {
                    if let Some(last) = self.last {
                        // Latest-only: anything arriving while we wait is
                        // merged into this delivery.
                        // An interval past the clock's range waits for the end.
                        let due = last.checked_add(self.interval);
                        let wait = async {
                            match due {
                                Some(at) => tokio::time::sleep_until(at).await,
                                None => std::future::pending().await,
                            }
                        };
                        tokio::select! {
                            _ = wait => {}
                            _ = session.ended() => {}
                        }
                    }
                }
                // Re-read after the wait: the newest state wins.
                let d = self.take().unwrap_or(d);
                self.commit(&d);
                return Some(d);
            }
            if ended {
                return None;
            }
            tokio::select! {
                changed = self.state.changed() => if changed.is_err() { ended = true },
                _ = session.ended() => ended = true,
            }
        }
    }

    /// The delivery due now, if the state or the update count moved.
    fn take(&mut self) -> Option<(Arc<TickState>, u64)> {
        let snap = self.state.borrow_and_update().clone();
        let state = snap.state?;
        let merged = snap.updates.saturating_sub(self.delivered_updates);
        if merged == 0 && self.delivered_seq == Some(state.seq) {
            return None;
        }
        Some((state, merged))
    }

    fn commit(&mut self, (state, merged): &(Arc<TickState>, u64)) {
        self.delivered_updates += merged;
        self.delivered_seq = Some(state.seq);
        self.last = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn series(path: &str, newest_last: bool) -> Series {
        Series {
            path: path.into(),
            newest_last,
        }
    }

    #[test]
    fn small_data_is_untouched() {
        let data = json!({"value": 3, "recent": [1, 2, 3]});
        assert_eq!(trim(&data, &[], 1024), (data, vec![]));
    }

    #[test]
    fn a_series_keeps_its_newest_end() {
        let data = json!({"value": 3, "recent": (0..2000).collect::<Vec<_>>()});
        let (kept, cuts) = trim(&data, &[series("/recent", true)], 1000);
        assert!(encoded_len(&kept) <= 1000);
        let arr = kept["recent"].as_array().unwrap();
        assert_eq!(arr.last(), Some(&json!(1999)));
        let n = arr.len();
        assert_eq!(arr[0], json!(2000 - n), "a contiguous newest run");
        assert_eq!(kept["value"], 3);
        assert_eq!(
            cuts,
            vec![Trimmed {
                path: "/recent".into(),
                cut: Cut::Newest { count: n, of: 2000 }
            }]
        );

        let (kept, _) = trim(&data, &[series("/recent", false)], 1000);
        assert_eq!(kept["recent"][0], json!(0), "newest first keeps the front");
    }

    #[test]
    fn an_undeclared_array_keeps_both_ends() {
        let data = json!((0..2000).collect::<Vec<_>>());
        let (kept, cuts) = trim(&data, &[], 1000);
        assert!(encoded_len(&kept) <= 1000);
        let arr = kept.as_array().unwrap();
        assert_eq!(arr.first(), Some(&json!(0)));
        assert_eq!(arr.last(), Some(&json!(1999)));
        let Cut::Ends { first, last, of } = cuts[0].cut else {
            panic!("{cuts:?}")
        };
        assert_eq!((first + last, of), (arr.len(), 2000));
        assert_eq!(arr[first - 1], json!(first - 1));
        assert_eq!(arr[first], json!(2000 - last));
        assert_eq!(cuts[0].path, "");
    }

    #[test]
    fn the_largest_value_is_cut_first_and_strings_keep_their_start() {
        let data = json!({"log": "x".repeat(5000), "small": [1, 2, 3], "name": "ok"});
        let (kept, cuts) = trim(&data, &[], 2000);
        assert!(encoded_len(&kept) <= 2000);
        assert_eq!(kept["small"], json!([1, 2, 3]));
        assert!(kept["log"].as_str().unwrap().starts_with("xxx"));
        assert_eq!(cuts.len(), 1);
        assert_eq!(cuts[0].path, "/log");
        assert!(matches!(cuts[0].cut, Cut::Prefix { of: 5000, .. }));
    }

    #[test]
    fn pointers_escape_keys_and_strings_cut_on_char_boundaries() {
        let data = json!({"a/b~c": "é".repeat(3000)});
        let (kept, cuts) = trim(&data, &[], 500);
        assert!(encoded_len(&kept) <= 500);
        assert_eq!(cuts[0].path, "/a~1b~0c");
    }

    #[test]
    fn an_object_of_scalars_keeps_its_first_members() {
        let data: serde_json::Map<String, Value> =
            (0..500).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let (kept, cuts) = trim(&Value::Object(data), &[], 200);
        assert!(encoded_len(&kept) <= 200);
        let kept = kept.as_object().unwrap();
        assert!(kept.len() > 10, "as much as fits: {}", kept.len());
        assert_eq!(kept.keys().next().map(String::as_str), Some("k000"));
        assert_eq!(
            cuts,
            vec![Trimmed {
                path: String::new(),
                cut: Cut::Members {
                    count: kept.len(),
                    of: 500
                }
            }]
        );
    }

    #[test]
    fn only_what_cannot_fit_at_all_becomes_null() {
        let (kept, cuts) = trim(&json!(123456789), &[], 3);
        assert_eq!(kept, Value::Null);
        assert!(matches!(
            cuts[..],
            [Trimmed {
                cut: Cut::Nothing { bytes: 9 },
                ..
            }]
        ));
        // Anything with room for an emptied shape is not null.
        let (kept, _) = trim(&json!({"a": [1, 2, 3], "b": "x".repeat(100)}), &[], 2);
        assert_eq!(kept, json!({}));
    }

    /// Tens of thousands of short strings: the shape whose trim must stay
    /// linear and keep what fits.
    fn many_small_items(n: usize) -> Value {
        json!({
            "items": (0..n).map(|i| json!({"id": i, "name": format!("item number {i}")})).collect::<Vec<_>>(),
            "tags": (0..n / 4).map(|i| format!("tag-{i}-xxxxxxxxxxxxxxxx")).collect::<Vec<_>>(),
            "title": "t".repeat(2000),
            "count": n,
        })
    }

    #[test]
    fn a_large_state_keeps_as_much_as_fits_and_lists_every_cut() {
        let data = many_small_items(20_000);
        assert!(encoded_len(&data) > 512 * 1024 / 2);
        let budget = item_budget(1);
        let mut item = json!({"data": null, "trimmed": []});
        let (kept, cuts) = fit(&data, &[], budget, |d, c| {
            item["data"] = d.clone();
            item["trimmed"] = serde_json::to_value(c).unwrap();
            encoded_len(&item)
        });
        let len = encoded_len(&json!({"data": kept, "trimmed": cuts}));
        assert!(len <= budget, "{len}");
        assert!(
            len > budget * 3 / 4,
            "as much data as fits: {len} of {budget}"
        );
        assert_ne!(kept, Value::Null);
        assert_eq!(kept["count"], 20_000);
        // Both ends of each undeclared array survive.
        let items = kept["items"].as_array().unwrap();
        assert_eq!(items[0]["id"], 0);
        assert_eq!(items.last().unwrap()["id"], 19_999);
        // Every value that differs from the original is covered by a cut.
        let paths: Vec<&str> = cuts.iter().map(|c| c.path.as_str()).collect();
        for (key, v) in kept.as_object().unwrap() {
            if *v != data[key] {
                assert!(
                    paths.contains(&format!("/{key}").as_str()),
                    "{key} cut silently: {paths:?}"
                );
            }
        }
        for c in &cuts {
            assert!(
                kept.pointer(&c.path).is_some(),
                "{} points into the data",
                c.path
            );
        }
    }

    #[test]
    fn cut_paths_point_into_the_delivered_data() {
        // A string inside an element is cut first; then the enclosing array
        // loses its middle, which moves the element: the note must follow.
        let mut items: Vec<Value> = (0..40).map(|i| json!(i)).collect();
        items.push(json!("y".repeat(3000)));
        items.extend((0..400).map(|i| json!(i)));
        let data = json!({ "a": items });
        let (kept, cuts) = trim(&data, &[], 1200);
        assert!(encoded_len(&kept) <= 1200);
        for c in &cuts {
            let target = kept.pointer(&c.path);
            assert!(target.is_some(), "{} missing from {kept}", c.path);
            if let Cut::Prefix { bytes, .. } = c.cut {
                assert_eq!(target.unwrap().as_str().map(str::len), Some(bytes));
            }
        }
    }

    #[test]
    fn a_delivery_fits_the_budget_envelope_included() {
        let d = Descriptor::parse(json!({"protocol":3,"kind":"k","title":"t","description":"",
            "revision":"1","tools":[{"name":"history","description":"","mutates":false,
            "input_schema":{"type":"object"}}],"recover_with":"history",
            "state":{"series":[{"path":"/recent","newest":"last"}]}}))
        .unwrap();
        let recent: Vec<Value> = (0..5000)
            .map(|i| json!({"seq": i, "note": "n".repeat(i % 40)}))
            .collect();
        let undeclared: Vec<Value> = (0..3000).map(|i| json!(i)).collect();
        let state = TickState {
            seq: 9,
            data: TickData::new(json!({"recent": recent, "other": undeclared})),
            at: None,
        };
        for items in [1, 2, 4, 10] {
            let budget = item_budget(items);
            let delivery = Delivery::new(&state, 7, &d, budget);
            let len = delivery.encoded_len();
            assert!(len <= budget, "{len} > {budget}");
            assert!(len > budget / 2, "not cut needlessly deep: {len}");
            assert_eq!(delivery.merged, 7);
            assert_eq!(delivery.recover_with.as_deref(), Some("history"));
            let paths: Vec<&str> = delivery.trimmed.iter().map(|t| t.path.as_str()).collect();
            assert!(paths.contains(&"/recent"), "{paths:?}");
            assert_eq!(
                delivery.data.wire()["recent"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()["seq"],
                4999
            );
        }
        assert_eq!(item_budget(1), 16 * 1024);
        assert_eq!(item_budget(3), 4 * 1024);
        assert_eq!(item_budget(8), 2 * 1024);
    }

    #[test]
    fn fit_counts_any_envelope_and_the_cut_list() {
        let data = json!({"log": (0..3000).map(|i| format!("line {i}")).collect::<Vec<_>>()});
        let mut item = json!({"tick": "t", "seq": 1, "data": null, "trimmed": []});
        let (kept, cuts) = fit(&data, &[], 4096, |d, c| {
            item["data"] = d.clone();
            item["trimmed"] = serde_json::to_value(c).unwrap();
            encoded_len(&item)
        });
        item["data"] = kept;
        item["trimmed"] = serde_json::to_value(&cuts).unwrap();
        let len = encoded_len(&item);
        assert!((3000..=4096).contains(&len), "{len}");
        assert_eq!(item["data"]["log"][0], "line 0");
        assert_eq!(cuts[0].path, "/log");
    }

    #[test]
    fn middle_out_covers_every_index_once() {
        for n in 0..9 {
            let mut o: Vec<usize> = middle_out(n).collect();
            o.sort();
            assert_eq!(o, (0..n).collect::<Vec<_>>());
        }
    }
}
