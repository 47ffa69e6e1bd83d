package tick

// Helpers for what most Ticks keep in their state: a numbered history of a
// value's changes, and integer sums that must not wrap. Each is something
// every Go author would otherwise write again (the Python and JavaScript
// SDKs get both from their languages: Python's integers do not wrap, and a
// list slice keeps the last n).

import (
	"encoding/json"
	"time"
)

// Integer is every Go integer type.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uintptr
}

// CheckedAdd is a+b and true, or a unchanged and false when the sum would
// overflow T. Go's integers wrap silently, so a tool that adds an argument
// to its state checks here and refuses (Rejected) instead.
func CheckedAdd[T Integer](a, b T) (T, bool) {
	sum := a + b
	// Wrapping is defined in Go: a positive b that made the sum smaller,
	// or a negative one that made it larger, went round.
	if (b > 0 && sum < a) || (b < 0 && sum > a) {
		return a, false
	}
	return sum, true
}

// Change is one entry of a History: the value after the Seq-th change.
type Change[T any] struct {
	Seq   int64 `json:"seq"`
	Value T     `json:"value"`
}

// History numbers a value's changes from 1 and keeps the newest few.
// Subscribers see only the newest state, so changes between two
// deliveries are merged away; a Tick gives them back from a read-only tool
// it names in Info.RecoverWith (§9), and usually puts the newest few in its
// state as a series (Info.Series, newest "last"). Make one with NewHistory.
type History[T any] struct {
	keep    int
	seq     int64
	entries []Change[T]
}

// NewHistory keeps the last keep changes (at least one).
func NewHistory[T any](keep int) *History[T] {
	return &History[T]{keep: max(keep, 1), entries: []Change[T]{}}
}

// Record adds v as the next change and forgets the oldest past the limit.
func (h *History[T]) Record(v T) {
	h.seq++
	h.entries = append(h.entries, Change[T]{h.seq, v})
	if over := len(h.entries) - max(h.keep, 1); over > 0 {
		// append copies only the kept window when it grows the array, so
		// the memory stays about twice the limit.
		h.entries = h.entries[over:]
	}
}

// Last is the newest n changes kept (all when fewer), oldest first. It is
// never nil, so it encodes as [] before the first change, not null. The
// slice shares the history's memory: encode it, do not keep it.
func (h *History[T]) Last(n int) []Change[T] {
	if h.entries == nil {
		return []Change[T]{}
	}
	return h.entries[max(0, len(h.entries)-max(n, 0)):]
}

// Newest is the value of the last change recorded, or T's zero value before
// the first: a Tick whose value starts at zero can keep it here alone, so
// the value and its history never disagree.
func (h *History[T]) Newest() (v T) {
	if n := len(h.entries); n > 0 {
		v = h.entries[n-1].Value
	}
	return v
}

// Seq is how many changes were recorded (the last one's Seq).
func (h *History[T]) Seq() int64 { return h.seq }

// MarshalJSON encodes every change kept, as Last does.
func (h *History[T]) MarshalJSON() ([]byte, error) {
	return json.Marshal(h.Last(len(h.entries)))
}

// M is a JSON object, for a tool's result or a Tick's state:
// tick.M{"value": 3} encodes as {"value":3}.
type M = map[string]any

// Millis is a whole number of milliseconds, the way a tool's argument or
// result usually carries a duration: an integer in the schema and in JSON
// (`EveryMs tick.Millis` is the argument every_ms), and a time.Duration for
// ctx.Every and ctx.After through Duration.
type Millis int64

// Duration is m as a time.Duration.
func (m Millis) Duration() time.Duration { return time.Duration(m) * time.Millisecond }
