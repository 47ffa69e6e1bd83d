package tick

// Fuzz tests of the dispatcher and the key decoder (Go's native fuzzing),
// seeded from the fuzz corpus the Rust SDK's fuzz targets use
// (fuzz/corpus/dispatch and keys: sessions recorded from the test Ticks).
//
//	go test .                                  the seeds (and testdata/fuzz), must pass
//	go test -fuzz=FuzzDispatcher -fuzztime=10s  more inputs, must pass
//	TICKBOX_SDK_BROKEN=seq go test .           must fail
//
// The last is the positive control: the same checks on a dispatcher whose
// updates repeat one seq. cli/tests/it/sdks.rs runs the second and third.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"testing"
	"time"
	"unicode/utf8"
)

type fuzzed struct {
	Value int64   `json:"value"`
	Log   []int64 `json:"log"`
}

func (f *fuzzed) State() any { return f }

func (f *fuzzed) OnKey(_ *Ctx, key string) {
	if key == "+" {
		f.Value++
	}
}

func (f *fuzzed) increment(_ *Ctx, a struct {
	Amount int64 `json:"amount"`
}) (any, error) {
	f.Value += a.Amount
	f.Log = append(f.Log, f.Value)
	return map[string]any{"value": f.Value}, nil
}

// newFuzzed: the fixtures' tool names (tests/ticks), so their sessions reach tools.
func newFuzzed() *Dispatcher {
	f := &fuzzed{Log: []int64{}}
	return NewDispatcher(Info{Kind: "fuzz.dispatch", Title: "Fuzzed", RecoverWith: "history",
		Series: map[string]string{"/log": "last"}}, f, func() time.Duration { return 0 }, 40, 10,
		Tool("increment", "Add to the value.", Mutates, f.increment),
		Tool("bump", "Add one.", Mutates, func(c *Ctx, _ NoArgs) (any, error) {
			return f.increment(c, struct {
				Amount int64 `json:"amount"`
			}{1})
		}),
		Tool("history", "The log.", ReadOnly, func(*Ctx, NoArgs) (any, error) { return f.Log, nil }),
		Tool("echo", "Args back.", ReadOnly, func(_ *Ctx, a struct {
			Text string `json:"text,omitempty"`
			N    *int64 `json:"n"`
		}) (any, error) {
			return a, nil
		}),
		Tool("fail", "Fails after starting.", Mutates, func(*Ctx, NoArgs) (any, error) { panic("boom") }),
		Tool("refuse", "Refuses.", Mutates, func(_ *Ctx, a struct {
			Why string `json:"why"`
		}) (any, error) {
			return nil, Rejected("%s", a.Why)
		}))
}

var updateSeq = regexp.MustCompile(`"method":"tick/update","params":\{"seq":\d+`)

// run feeds a session (protocol lines, then key bytes after 0xff), cut in
// reads at cuts; the frames written.
func run(session []byte, cuts []int) (lines, out []byte) {
	lines, keys, _ := bytes.Cut(session, []byte{0xff})
	d := newFuzzed()
	at := 0
	sort.Ints(cuts)
	for _, cut := range append(cuts, len(lines)) {
		// Within the lines: a slice may reach past its length into its
		// capacity, which would feed the key bytes as protocol lines.
		cut = min(max(cut, at), len(lines))
		out = append(out, d.Feed(lines[at:cut])...)
		at = cut
	}
	out = append(out, d.Keys(keys)...)
	if os.Getenv("TICKBOX_SDK_BROKEN") == "seq" {
		// The deliberate bug: every update carries seq 1.
		out = updateSeq.ReplaceAll(out, []byte(`"method":"tick/update","params":{"seq":1`))
	}
	return lines, out
}

func usableID(line []byte) (int64, bool) {
	if !utf8.Valid(line) {
		return 0, false // not UTF-8 is not JSON, whatever Go's decoder accepts
	}
	var msg map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if dec.Decode(&msg) != nil || dec.More() || msg == nil {
		return 0, false
	}
	if _, ok := msg["method"].(string); !ok {
		return 0, false
	}
	n, ok := msg["id"].(json.Number)
	if !ok {
		return 0, false
	}
	id, err := n.Int64()
	return id, err == nil && id >= 0 && id <= maxInteger && !bytes.ContainsAny([]byte(n), ".eE")
}

func corpus(t testing.TB, target string) [][]byte {
	dir := filepath.Join("..", "..", "fuzz", "corpus", target)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("no seeds in %s: %v", dir, err)
	}
	var seeds [][]byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// Also with the revision this SDK serves, so the seeds reach the tools.
		seeds = append(seeds, b, bytes.ReplaceAll(b, []byte(`"revision":"r1"`), []byte(`"revision":"1"`)))
	}
	return seeds
}

func FuzzDispatcher(f *testing.F) {
	for _, s := range corpus(f, "dispatch") {
		f.Add(s, uint16(0))
	}
	two := `{"jsonrpc":"2.0","id":1,"method":"tick/call","params":{"tool":"increment","args":{"amount":2},"revision":"1"}}` + "\n"
	f.Add([]byte(two+two+`{"jsonrpc":"2.0","id":2,"method":"tick/read"}`+"\n"), uint16(7))
	f.Fuzz(func(t *testing.T, session []byte, cut uint16) {
		lines, out := run(session, []int{int(cut) % (len(session) + 1)})
		if len(out) > 0 && out[len(out)-1] != '\n' {
			t.Fatal("a partial line")
		}
		var expected, answered []int64
		all := bytes.Split(lines, []byte("\n"))
		for _, l := range all[:len(all)-1] {
			if id, ok := usableID(bytes.TrimSuffix(l, []byte("\r"))); ok {
				expected = append(expected, id)
			}
		}
		var lastSeq int64
		frames := bytes.Split(out, []byte("\n"))
		for _, frame := range frames[:len(frames)-1] {
			var msg map[string]json.RawMessage
			if err := json.Unmarshal(frame, &msg); err != nil {
				t.Fatalf("not JSON: %s", frame)
			}
			if string(msg["jsonrpc"]) != `"2.0"` {
				t.Fatalf("%s", frame)
			}
			if raw, has := msg["id"]; has {
				var id int64
				if json.Unmarshal(raw, &id) != nil {
					t.Fatalf("id not an integer: %s", frame)
				}
				answered = append(answered, id)
				_, r := msg["result"]
				_, e := msg["error"]
				if r == e {
					t.Fatalf("result xor error: %s", frame)
				}
				var read struct {
					Seq  *int64          `json:"seq"`
					Data json.RawMessage `json:"data"`
				}
				if r && json.Unmarshal(msg["result"], &read) == nil && read.Seq != nil && read.Data != nil && *read.Seq < lastSeq {
					t.Fatalf("a read below the last update: %s", frame)
				}
			} else {
				var u struct {
					Seq  int64           `json:"seq"`
					Data json.RawMessage `json:"data"`
				}
				if string(msg["method"]) != `"tick/update"` || json.Unmarshal(msg["params"], &u) != nil || string(u.Data) == "null" {
					t.Fatalf("%s", frame)
				}
				if u.Seq <= lastSeq {
					t.Fatalf("update seq %d after %d", u.Seq, lastSeq)
				}
				lastSeq = u.Seq
			}
		}
		if !reflect.DeepEqual(answered, expected) {
			t.Fatalf("answered %v, expected %v: one response per request, in order", answered, expected)
		}
		if _, whole := run(session, nil); !bytes.Equal(whole, out) {
			t.Fatal("how the input was cut changed the output")
		}
	})
}

func FuzzKeys(f *testing.F) {
	for _, s := range corpus(f, "keys") {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		var whole KeyDecoder
		expected := whole.Feed(data)
		c := int(cut) % (len(data) + 1)
		// Except right after an ESC: a read that ends with a lone ESC is
		// the Escape key (keys.go, as the Rust SDK decides).
		if c > 0 && data[c-1] == 0x1b {
			c = 0
		}
		var split KeyDecoder
		got := append(split.Feed(data[:c]), split.Feed(data[c:])...)
		if len(split.pending) > maxPending || len(whole.pending) > maxPending {
			t.Fatalf("kept %d and %d bytes, over the bound %d", len(split.pending), len(whole.pending), maxPending)
		}
		// Input longer than the bound may be given up at a different point
		// when cut (keys.go, as the Rust SDK's fuzz target allows): only the
		// bound holds for it.
		if len(data) > maxPending {
			return
		}
		if len(got) == 0 && len(expected) == 0 {
			return
		}
		if !reflect.DeepEqual(got, expected) || !bytes.Equal(split.pending, whole.pending) {
			t.Fatalf("keys differ: %q vs %q", got, expected)
		}
	})
}
