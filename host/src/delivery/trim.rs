//! The trimming engine behind [`super::trim`] and [`super::fit`]: linear in
//! the size of the data.
//!
//! The data is copied once into an arena of nodes whose encoded sizes are
//! computed once, bottom-up. Cuts then take the largest shortenable value
//! from a max-heap (entries that went stale are re-queued with their current
//! size when popped), shorten it, and subtract the bytes saved from the
//! value and each of its ancestors: a step costs the bytes it drops plus the
//! depth of the value, never a re-encoding of the whole document, which is
//! what made the first version quadratic (a 131 KB state cost 11 s).
//!
//! Two phases keep the result as full as the budget allows:
//!
//! 1. arrays, long strings and objects of plain values (nothing below them
//!    to shorten), largest first, each step cutting at most half of one
//!    value (so no value is wiped out while others stay whole); a cut is only
//!    started where it saves more than the note that lists it costs, so
//!    thousands of small cuts never fill the budget with notes;
//! 2. if that is not enough, objects too (they keep their first members),
//!    and every array and string without the saving rule.
//!
//! Only when even `{}`/`[]`/a 16-byte string does not fit does the data
//! become `null`. Every cut is listed; the paths are computed at the end, so
//! they point into the data as delivered (indices after earlier cuts), and a
//! cut inside a value that was later dropped whole is not listed (the
//! enclosing cut covers it).
//!
//! A CPU budget ([`TRIM_CPU_BUDGET`]) bounds a pathological input: past it
//! the trimmer stops cutting finely and returns `null` with a `nothing` note.

use super::{Cut, Trimmed};
use serde_json::Value;
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};
use tickbox_protocol::descriptor::Series;

/// Strings are never cut below this many bytes.
pub(super) const MIN_STRING: usize = 16;

/// CPU time one trim may take before it gives up on fine cuts. The linear
/// trimmer needs a few milliseconds for a 512 KiB state; this is a guard
/// against what nobody foresaw, not a working limit.
pub const TRIM_CPU_BUDGET: Duration = Duration::from_millis(500);

const NONE: u32 = u32::MAX;

enum Kind {
    Scalar(Value),
    Str(String),
    Arr(Vec<u32>),
    Obj(Vec<(String, u32)>),
}

struct Node {
    parent: u32,
    /// Index in the parent array as first seen (an upper bound of the
    /// current one: indices only shrink as elements are dropped).
    index: u32,
    size: usize,
    alive: bool,
    /// No array and no long string below: an object of plain values, which
    /// can only shrink by losing members.
    plain: bool,
    kind: Kind,
}

/// Encoded length of a string as JSON (quotes and escapes included).
fn str_len(s: &str) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Counter(0);
    let _ = serde_json::to_writer(&mut c, s);
    c.0
}

struct Note {
    cut: Cut,
    /// Its encoded size as estimated when recorded (paths may only shrink).
    len: usize,
}

pub(super) struct Trimmer {
    nodes: Vec<Node>,
    /// Series direction by node, resolved once.
    series_of: HashMap<u32, bool>,
    notes: HashMap<u32, Note>,
    order: Vec<u32>,
    /// Encoded size of the cut list, brackets and commas included.
    notes_len: usize,
    count_notes: bool,
    started: Instant,
}

impl Trimmer {
    /// Copies `data` into the arena and sizes every node.
    pub(super) fn new(data: &Value, series: &[Series], count_notes: bool) -> Trimmer {
        let mut t = Trimmer {
            nodes: Vec::new(),
            series_of: HashMap::new(),
            notes: HashMap::new(),
            order: Vec::new(),
            notes_len: 2,
            count_notes,
            started: Instant::now(),
        };
        t.build(data, NONE, 0);
        // Resolve declared series paths against the original shape.
        for s in series {
            if let Some(id) = t.resolve(&s.path) {
                if matches!(t.nodes[id as usize].kind, Kind::Arr(_)) {
                    t.series_of.insert(id, s.newest_last);
                }
            }
        }
        t
    }

    /// Builds the subtree for `v`; returns its id. Recursive: state comes
    /// from parsed lines, and serde_json caps nesting at 128 when parsing.
    fn build(&mut self, v: &Value, parent: u32, index: u32) -> u32 {
        let id = self.nodes.len() as u32;
        let (kind, size) = match v {
            Value::Array(_) => (Kind::Arr(Vec::new()), 0),
            Value::Object(_) => (Kind::Obj(Vec::new()), 0),
            Value::String(s) => (Kind::Str(s.clone()), str_len(s)),
            other => (Kind::Scalar(other.clone()), super::encoded_len(other)),
        };
        let plain = match &kind {
            Kind::Str(s) => s.len() <= MIN_STRING,
            Kind::Arr(_) => false,
            _ => true,
        };
        self.nodes.push(Node {
            parent,
            index,
            size,
            alive: true,
            plain,
            kind,
        });
        match v {
            Value::Array(items) => {
                let mut kids = Vec::with_capacity(items.len());
                let mut size = 2 + items.len().saturating_sub(1);
                for (i, item) in items.iter().enumerate() {
                    let k = self.build(item, id, i as u32);
                    size += self.nodes[k as usize].size;
                    kids.push(k);
                }
                self.nodes[id as usize].kind = Kind::Arr(kids);
                self.nodes[id as usize].size = size;
            }
            Value::Object(map) => {
                let mut kids = Vec::with_capacity(map.len());
                let mut size = 2 + map.len().saturating_sub(1);
                let mut plain = true;
                for (i, (k, item)) in map.iter().enumerate() {
                    // Members only ever leave from the back, so a member's
                    // position is stable and names its key.
                    let c = self.build(item, id, i as u32);
                    size += str_len(k) + 1 + self.nodes[c as usize].size;
                    plain &= self.nodes[c as usize].plain;
                    kids.push((k.clone(), c));
                }
                let node = &mut self.nodes[id as usize];
                node.kind = Kind::Obj(kids);
                node.size = size;
                node.plain = plain;
            }
            _ => {}
        }
        id
    }

    /// The node a JSON Pointer names in the original data.
    fn resolve(&self, pointer: &str) -> Option<u32> {
        let mut id = 0u32;
        if pointer.is_empty() {
            return Some(0);
        }
        for raw in pointer.strip_prefix('/')?.split('/') {
            let part = raw.replace("~1", "/").replace("~0", "~");
            id = match &self.nodes[id as usize].kind {
                Kind::Arr(kids) => *kids.get(part.parse::<usize>().ok()?)?,
                Kind::Obj(kids) => kids.iter().find(|(k, _)| *k == part)?.1,
                _ => return None,
            };
        }
        Some(id)
    }

    fn total(&self) -> usize {
        self.nodes[0].size + if self.count_notes { self.notes_len } else { 0 }
    }

    /// The pointer of a node, using first-seen indices (for estimates).
    fn pointer_estimate(&self, mut id: u32) -> String {
        let mut parts = Vec::new();
        while self.nodes[id as usize].parent != NONE {
            let n = &self.nodes[id as usize];
            parts.push(match &self.nodes[n.parent as usize].kind {
                Kind::Obj(kids) => kids
                    .get(n.index as usize)
                    .map_or_else(String::new, |(k, _)| escape(k)),
                _ => n.index.to_string(),
            });
            id = n.parent;
        }
        parts.iter().rev().map(|p| format!("/{p}")).collect()
    }

    fn note_len(path: &str, cut: &Cut) -> usize {
        serde_json::to_vec(&Trimmed {
            path: path.to_string(),
            cut: cut.clone(),
        })
        .map_or(64, |v| v.len())
    }

    /// What a new note on `id` would add to the cut list.
    fn note_cost(&self, id: u32, cut: &Cut) -> usize {
        if !self.count_notes {
            return 0;
        }
        match self.notes.get(&id) {
            Some(old) => Self::note_len(&self.pointer_estimate(id), cut).saturating_sub(old.len),
            None => {
                Self::note_len(&self.pointer_estimate(id), cut)
                    + usize::from(!self.order.is_empty())
            }
        }
    }

    fn record(&mut self, id: u32, cut: Cut) {
        let cut = match (self.notes.get(&id).map(|n| &n.cut), cut) {
            (Some(Cut::Newest { of, .. }), Cut::Newest { count, .. }) => {
                Cut::Newest { count, of: *of }
            }
            (Some(Cut::Ends { of, .. }), Cut::Ends { first, last, .. }) => Cut::Ends {
                first,
                last,
                of: *of,
            },
            (Some(Cut::Prefix { of, .. }), Cut::Prefix { bytes, .. }) => {
                Cut::Prefix { bytes, of: *of }
            }
            (Some(Cut::Members { of, .. }), Cut::Members { count, .. }) => {
                Cut::Members { count, of: *of }
            }
            (_, other) => other,
        };
        let len = Self::note_len(&self.pointer_estimate(id), &cut);
        match self.notes.get_mut(&id) {
            Some(old) => {
                self.notes_len = self.notes_len - old.len + len;
                old.len = len;
                old.cut = cut;
            }
            None => {
                self.notes_len += len + usize::from(!self.order.is_empty());
                self.order.push(id);
                self.notes.insert(id, Note { cut, len });
            }
        }
    }

    /// Subtracts `saved` bytes from `id` and its ancestors.
    fn shrink_up(&mut self, mut id: u32, saved: usize) {
        loop {
            let n = &mut self.nodes[id as usize];
            n.size -= saved;
            if n.parent == NONE {
                break;
            }
            id = n.parent;
        }
    }

    /// Marks a dropped subtree dead; its notes stop counting.
    fn kill(&mut self, root: u32) {
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let n = &mut self.nodes[id as usize];
            n.alive = false;
            match &n.kind {
                Kind::Arr(kids) => stack.extend(kids.iter().copied()),
                Kind::Obj(kids) => stack.extend(kids.iter().map(|(_, k)| *k)),
                _ => {}
            }
            if let Some(note) = self.notes.remove(&id) {
                // The list shrinks by the note and its comma (the first
                // note has none, so this may undercount by one: safe).
                self.notes_len = self.notes_len.saturating_sub(note.len + 1).max(2);
            }
        }
    }

    fn eligible(&self, id: u32, last_resort: bool) -> bool {
        let n = &self.nodes[id as usize];
        if !n.alive {
            return false;
        }
        match &n.kind {
            Kind::Arr(kids) => !kids.is_empty(),
            Kind::Str(s) => s.len() > MIN_STRING,
            // An object is cut like the arrays beside it when nothing below
            // it can be (so it shares the budget instead of crowding out the
            // rest); any object only as a last resort.
            Kind::Obj(kids) => (last_resort || n.plain) && !kids.is_empty(),
            Kind::Scalar(_) => false,
        }
    }

    /// Cuts until the data (and, when counted, the cut list) fits `budget`.
    /// Returns false when the CPU budget ran out first.
    pub(super) fn run(&mut self, budget: usize) -> bool {
        for last_resort in [false, true] {
            if self.total() <= budget {
                return true;
            }
            let mut heap: BinaryHeap<(usize, u32)> = (0..self.nodes.len() as u32)
                .filter(|&id| self.eligible(id, last_resort))
                .map(|id| (self.nodes[id as usize].size, id))
                .collect();
            let mut steps = 0u32;
            while let Some((size, id)) = heap.pop() {
                let total = self.total();
                if total <= budget {
                    return true;
                }
                steps = steps.wrapping_add(1);
                if steps.is_multiple_of(256) && self.started.elapsed() > TRIM_CPU_BUDGET {
                    return false;
                }
                if !self.eligible(id, last_resort) {
                    continue;
                }
                let current = self.nodes[id as usize].size;
                if current != size {
                    heap.push((current, id));
                    continue;
                }
                // The parent may now be smaller than another candidate; its
                // stale entry is re-queued when popped.
                if self.shorten(id, total - budget, last_resort) && self.eligible(id, last_resort) {
                    heap.push((self.nodes[id as usize].size, id));
                }
            }
        }
        self.total() <= budget
    }

    /// Shortens one value by about `excess` bytes (at most half of it per
    /// step). Returns false when the cut was not worth its note.
    fn shorten(&mut self, id: u32, excess: usize, last_resort: bool) -> bool {
        let (saved, cut, dropped) = match &self.nodes[id as usize].kind {
            Kind::Arr(kids) => {
                let order = match self.series_of.get(&id) {
                    Some(true) => Order::Front,
                    Some(false) => Order::Back,
                    None => Order::Middle,
                };
                let sizes = |pos: usize| self.nodes[kids[pos] as usize].size + 1;
                let (drop, saved) = plan_drop(kids.len(), order, excess, sizes);
                let (n, keep) = (kids.len(), kids.len() - drop);
                // The range `middle_out` dropped: exactly the elements
                // whose bytes `plan_drop` counted.
                let lo = n / 2 - drop / 2;
                let hi = lo + drop;
                let cut = match order {
                    Order::Front | Order::Back => Cut::Newest { count: keep, of: n },
                    Order::Middle => Cut::Ends {
                        first: lo,
                        last: n - hi,
                        of: n,
                    },
                };
                if !last_resort && self.note_cost(id, &cut) >= saved {
                    return false;
                }
                let Kind::Arr(kids) = &mut self.nodes[id as usize].kind else {
                    return false;
                };
                let removed: Vec<u32> = match order {
                    Order::Front => kids.drain(..drop).collect(),
                    Order::Back => kids.drain(keep..).collect(),
                    Order::Middle => kids.drain(lo..hi).collect(),
                };
                (saved, cut, removed)
            }
            Kind::Obj(kids) => {
                let sizes = |pos: usize| {
                    let (k, c) = &kids[pos];
                    str_len(k) + 1 + self.nodes[*c as usize].size + 1
                };
                let (drop, saved) = plan_drop(kids.len(), Order::Back, excess, sizes);
                let (n, keep) = (kids.len(), kids.len() - drop);
                let cut = Cut::Members { count: keep, of: n };
                if !last_resort && self.note_cost(id, &cut) >= saved {
                    return false;
                }
                let Kind::Obj(kids) = &mut self.nodes[id as usize].kind else {
                    return false;
                };
                let removed = kids.drain(keep..).map(|(_, k)| k).collect();
                (saved, cut, removed)
            }
            Kind::Str(s) => {
                let of = s.len();
                let before = str_len(s);
                let target = of.saturating_sub(excess).max(of / 2).max(MIN_STRING);
                let mut end = target.min(of);
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                let saved = before - str_len(&s[..end]);
                let cut = Cut::Prefix { bytes: end, of };
                if !last_resort && self.note_cost(id, &cut) >= saved {
                    return false;
                }
                if let Kind::Str(s) = &mut self.nodes[id as usize].kind {
                    s.truncate(end);
                }
                (saved, cut, Vec::new())
            }
            Kind::Scalar(_) => return false,
        };
        for d in dropped {
            self.kill(d);
        }
        self.shrink_up(id, saved);
        self.record(id, cut);
        true
    }

    /// The data as trimmed, and the cuts with their final paths.
    pub(super) fn finish(mut self) -> (Value, Vec<Trimmed>) {
        let mut paths: HashMap<u32, String> = HashMap::with_capacity(self.order.len());
        let wanted: std::collections::HashSet<u32> = self.notes.keys().copied().collect();
        let value = self.render(0, String::new(), &wanted, &mut paths);
        let cuts = self
            .order
            .iter()
            .filter_map(|id| {
                let note = self.notes.remove(id)?;
                Some(Trimmed {
                    path: paths.remove(id)?,
                    cut: note.cut,
                })
            })
            .collect();
        (value, cuts)
    }

    fn render(
        &mut self,
        id: u32,
        path: String,
        wanted: &std::collections::HashSet<u32>,
        paths: &mut HashMap<u32, String>,
    ) -> Value {
        let kind = std::mem::replace(&mut self.nodes[id as usize].kind, Kind::Scalar(Value::Null));
        let v = match kind {
            Kind::Scalar(v) => v,
            Kind::Str(s) => Value::String(s),
            Kind::Arr(kids) => Value::Array(
                kids.into_iter()
                    .enumerate()
                    .map(|(i, k)| self.render(k, format!("{path}/{i}"), wanted, paths))
                    .collect(),
            ),
            Kind::Obj(kids) => Value::Object(
                kids.into_iter()
                    .map(|(key, k)| {
                        let p = format!("{path}/{}", escape(&key));
                        let v = self.render(k, p, wanted, paths);
                        (key, v)
                    })
                    .collect(),
            ),
        };
        if wanted.contains(&id) {
            paths.insert(id, path);
        }
        v
    }
}

/// How many of `n` elements to drop, in `order`, to save `excess` bytes
/// (at most half of them, at least one), and the bytes that saves.
/// `size(pos)` is an element's encoded size with its comma.
fn plan_drop(
    n: usize,
    order: Order,
    excess: usize,
    size: impl Fn(usize) -> usize,
) -> (usize, usize) {
    let max_drop = (n / 2).max(1);
    let (mut drop, mut saved) = (0, 0);
    for pos in order.iter(n).take(max_drop) {
        saved += size(pos);
        drop += 1;
        if saved >= excess {
            break;
        }
    }
    // The last element has no comma.
    if drop == n {
        saved -= 1;
    }
    (drop, saved)
}

#[derive(Clone, Copy)]
enum Order {
    /// Oldest-first series: elements leave from the front.
    Front,
    /// Newest-first series and objects: elements leave from the back.
    Back,
    /// Undeclared arrays: from the middle outwards, keeping both ends.
    Middle,
}

impl Order {
    fn iter(self, n: usize) -> Box<dyn Iterator<Item = usize>> {
        match self {
            Order::Front => Box::new(0..n),
            Order::Back => Box::new((0..n).rev()),
            Order::Middle => Box::new(super::middle_out(n)),
        }
    }
}

/// Escapes one JSON Pointer segment.
pub(super) fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}
