package tick

// Tests of the helpers authors use for their state and tools (state.go,
// Ctx.Reset and Period, ToolNoArgs) and of argument decoding (schema.go):
// each case names the value it expects, so a wrong boundary fails it.

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheckedAddRefusesExactlyTheSumsThatWrap(t *testing.T) {
	for _, c := range []struct {
		a, b, sum int64
		ok        bool
	}{
		{math.MaxInt64 - 1, 1, math.MaxInt64, true},
		{math.MaxInt64, 1, math.MaxInt64, false},
		{math.MinInt64 + 1, -1, math.MinInt64, true},
		{math.MinInt64, -1, math.MinInt64, false},
		{math.MaxInt64, math.MinInt64, -1, true},
		{-5, 3, -2, true},
	} {
		if sum, ok := CheckedAdd(c.a, c.b); sum != c.sum || ok != c.ok {
			t.Errorf("CheckedAdd(%d, %d) = %d, %v; want %d, %v", c.a, c.b, sum, ok, c.sum, c.ok)
		}
	}
	if sum, ok := CheckedAdd[uint8](250, 6); sum != 250 || ok {
		t.Errorf("uint8 250+6 = %d, %v; want 250, false", sum, ok)
	}
	if sum, ok := CheckedAdd[int8](-100, -28); sum != -128 || !ok {
		t.Errorf("int8 -100-28 = %d, %v; want -128, true", sum, ok)
	}
}

func TestHistoryNumbersChangesAndKeepsTheNewest(t *testing.T) {
	h := NewHistory[int](3)
	if b, _ := json.Marshal(h.Last(10)); string(b) != "[]" {
		t.Fatalf("empty: %s, want []", b)
	}
	for v := 10; v <= 14; v++ {
		h.Record(v)
	}
	want := []Change[int]{{3, 12}, {4, 13}, {5, 14}}
	if got := h.Last(10); !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
	if got := h.Last(1); !reflect.DeepEqual(got, want[2:]) {
		t.Fatalf("Last(1) %v", got)
	}
	if got := h.Last(-1); len(got) != 0 || got == nil {
		t.Fatalf("Last(-1) %#v, want an empty slice", got)
	}
	if h.Seq() != 5 {
		t.Fatalf("Seq %d", h.Seq())
	}
	b, _ := json.Marshal(map[string]any{"h": h})
	if string(b) != `{"h":[{"seq":3,"value":12},{"seq":4,"value":13},{"seq":5,"value":14}]}` {
		t.Fatalf("encoded %s", b)
	}
	var zero History[string]
	if b, _ := json.Marshal(zero.Last(5)); string(b) != "[]" {
		t.Fatalf("zero history: %s", b)
	}
	zero.Record("a")
	zero.Record("b")
	if got := zero.Last(5); !reflect.DeepEqual(got, []Change[string]{{2, "b"}}) {
		t.Fatalf("a zero History keeps one: %v", got)
	}
}

func TestResetReplacesTheTimerAndPeriodSaysWhatRuns(t *testing.T) {
	now := time.Duration(0)
	ctx := &Ctx{clock: func() time.Duration { return now }, timers: map[TimerID]*timer{}}
	first := ctx.Every(time.Second)
	second := ctx.Reset(first, 50*time.Millisecond)
	if second == 0 || second == first {
		t.Fatalf("Reset gave %d after %d", second, first)
	}
	if _, live := ctx.timers[first]; live || len(ctx.timers) != 1 {
		t.Fatalf("the old timer still runs: %v", ctx.timers)
	}
	if p := ctx.Period(second); p != 50*time.Millisecond {
		t.Fatalf("Period %v", p)
	}
	if p := ctx.Period(ctx.After(time.Second)); p != 0 {
		t.Fatalf("a one-shot timer has period %v", p)
	}
	if id := ctx.Reset(second, 0); id != 0 || ctx.Period(second) != 0 {
		t.Fatalf("Reset to 0 gave %d, period %v", id, ctx.Period(second))
	}
}

func TestUntaggedFieldsAreSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"Amount": "amount", "EveryMs": "every_ms", "UserID": "user_id", "URL": "url",
		"HTTPServer": "http_server", "Page2Size": "page2_size", "X": "x",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

type decoded struct {
	EveryMs int64
	Small   int8
	Named   string `json:"other,omitempty"`
	Ratio   float64
	Tags    []string
	Inner   *struct{ On bool }
	Seen    map[string]uint
	skipped int
}

// call runs one tick/call of tool on a dispatcher and returns its frame.
func call(t *testing.T, d *Dispatcher, tool, args string) map[string]any {
	t.Helper()
	out := d.Feed([]byte(`{"jsonrpc":"2.0","id":1,"method":"tick/call","params":{"tool":"` + tool +
		`","revision":"1","args":` + args + "}}\n"))
	var frame map[string]any
	if err := json.Unmarshal(out[bytes.LastIndexByte(out[:len(out)-1], '\n')+1:], &frame); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return frame
}

type nothing struct{}

func (nothing) State() any { return nil }

func TestArgumentsDecodeByTheirSchemaNames(t *testing.T) {
	var got decoded
	d := NewDispatcher(Info{Kind: "t", Title: "T"}, nothing{}, func() time.Duration { return 0 }, 80, 24,
		Tool("set", "Set.", Mutates, func(_ *Ctx, a decoded) (any, error) { got = a; return nil, nil }),
		ToolNoArgs("none", "None.", ReadOnly, func(*Ctx) (any, error) { return "ran", nil }))
	frame := call(t, d, "set", `{"every_ms":20,"small":-128,"other":"x","ratio":0.5,"tags":["a"],"inner":{"on":true},"seen":{"k":3}}`)
	if _, failed := frame["error"]; failed {
		t.Fatalf("%v", frame)
	}
	want := decoded{EveryMs: 20, Small: -128, Named: "x", Ratio: 0.5, Tags: []string{"a"},
		Inner: &struct{ On bool }{true}, Seen: map[string]uint{"k": 3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
	// Required, because neither omitempty nor a pointer: every_ms, small, ratio, tags, seen.
	for args, why := range map[string]string{
		`{"every_ms":1,"small":128,"ratio":0,"tags":[],"seen":{}}`:           "does not fit int8",
		`{"every_ms":1,"small":1,"ratio":0,"tags":[],"seen":{"k":-1}}`:       "does not fit uint",
		`{"every_ms":1,"EveryMs":1,"small":1,"ratio":0,"tags":[],"seen":{}}`: "not an argument",
		`{"small":1,"ratio":0,"tags":[],"seen":{}}`:                          "every_ms is required",
	} {
		frame := call(t, d, "set", args)
		e, _ := frame["error"].(map[string]any)
		if e == nil || e["code"] != float64(InvalidParams) || !strings.Contains(e["message"].(string), why) {
			t.Errorf("%s: %v, want -32602 saying %q", args, frame, why)
		}
	}
	if frame := call(t, d, "none", `{}`); frame["result"] != "ran" {
		t.Fatalf("%v", frame)
	}
	if frame := call(t, d, "none", `{"x":1}`); frame["error"] == nil {
		t.Fatalf("an argument to a tool that takes none: %v", frame)
	}
}
