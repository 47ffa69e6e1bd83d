package tick

// Tests of the helpers authors use for their state and tools (state.go,
// named timers, bound keys, ToolNoArgs), of argument decoding and of the
// rules of tick tags (schema.go): each case names the value it expects, so
// a wrong boundary fails it.

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
	if v := h.Newest(); v != 0 {
		t.Fatalf("Newest before any change: %d, want 0", v)
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
	if h.Newest() != 14 {
		t.Fatalf("Newest %d, want 14", h.Newest())
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

func TestNamedTimersReplaceStopAndSayTheirPeriod(t *testing.T) {
	now := time.Duration(0)
	var ran []string
	d := NewDispatcher(Info{Kind: "t", Title: "T"}, nothing{}, func() time.Duration { return now }, 80, 24)
	ctx := d.ctx
	tick := func(name string) func(*Ctx) { return func(*Ctx) { ran = append(ran, name) } }
	ctx.Every("auto", time.Second, tick("first"))
	ctx.Every("auto", 50*time.Millisecond, tick("auto")) // replaces the first
	if p := ctx.Period("auto"); p != 50*time.Millisecond || len(ctx.timers) != 1 {
		t.Fatalf("Period %v, %d timers", p, len(ctx.timers))
	}
	ctx.After("once", 50*time.Millisecond, tick("once"))
	if p := ctx.Period("once"); p != 0 {
		t.Fatalf("a one-shot timer has period %v", p)
	}
	ctx.Every("fast", time.Millisecond, tick("fast")) // at least 10 ms
	if p := ctx.Period("fast"); p != minPeriod {
		t.Fatalf("a 1 ms period runs every %v", p)
	}
	ctx.Stop("fast")
	ctx.Stop("never set")
	now = 49 * time.Millisecond
	d.Timers()
	if len(ran) != 0 {
		t.Fatalf("ran before due: %v", ran)
	}
	now = 130 * time.Millisecond // two periods late: one call, not a burst
	d.Timers()
	if !reflect.DeepEqual(ran, []string{"auto", "once"}) {
		t.Fatalf("ran %v, want auto then once (set first, same due)", ran)
	}
	if due, ok := d.NextDeadline(); !ok || due != 150*time.Millisecond {
		t.Fatalf("next due %v %v, want 150ms (the missed periods skipped)", due, ok)
	}
	if _, live := ctx.timers["once"]; live {
		t.Fatal("a one-shot timer still set after it ran")
	}
	ctx.Every("auto", 0, tick("auto")) // 0 stops
	if p := ctx.Period("auto"); p != 0 || len(ctx.timers) != 0 {
		t.Fatalf("Every 0 left period %v, %d timers", p, len(ctx.timers))
	}
	// A timer with no fn only redraws.
	d.View()
	ctx.After("redraw", 0, nil)
	if out := d.Timers(); len(out) != 0 {
		t.Fatalf("a timer that changed nothing sent %s", out)
	}
	if _, redraw := d.View(); !redraw {
		t.Fatal("a timer with no fn did not redraw")
	}
	// A timer's fn that replaces another due one: the replaced one does not run.
	ran = nil
	ctx.After("a", 0, func(c *Ctx) { c.After("b", time.Hour, tick("b2")); ran = append(ran, "a") })
	ctx.After("b", 0, tick("b"))
	d.Timers()
	if !reflect.DeepEqual(ran, []string{"a"}) || ctx.Period("b") != 0 || ctx.timers["b"] == nil {
		t.Fatalf("ran %v, timers %v", ran, ctx.timers)
	}
}

type keyed struct{ got []string }

func (k *keyed) State() any               { return len(k.got) }
func (k *keyed) OnKey(_ *Ctx, key string) { k.got = append(k.got, "OnKey "+key) }
func (k *keyed) View(ctx *Ctx) []string   { return []string{ctx.KeyHelp()} }

func TestBoundKeysRunTheirFnAndWriteTheFooter(t *testing.T) {
	k := &keyed{}
	d := NewDispatcher(Info{Kind: "t", Title: "T"}, k, func() time.Duration { return 0 }, 80, 24,
		Key("+", "add one", func(*Ctx) { k.got = append(k.got, "plus") }),
		Tool("x", "X.", ReadOnly, func(*Ctx, NoArgs) (any, error) { return nil, nil }),
		Key("ctrl-a", "all", func(*Ctx) { panic("boom") }),
		Key("ctrl-z", "", func(*Ctx) {}))
	var reports []string
	d.Report = func(p string) { reports = append(reports, p) }
	out := d.Keys([]byte("+-\x01"))
	if !reflect.DeepEqual(k.got, []string{"plus", "OnKey -"}) {
		t.Fatalf("got %v: a bound key runs its fn, another goes to OnKey", k.got)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "ctrl-a failed: boom") {
		t.Fatalf("reports %v", reports)
	}
	if !bytes.Contains(out, []byte(`"params":{"seq":1,"data":2}`)) {
		t.Fatalf("one update for the read: %s", out)
	}
	if lines, _ := d.View(); !reflect.DeepEqual(lines, []string{"[+] add one  [ctrl-a] all"}) {
		t.Fatalf("footer %q", lines)
	}
	if p := d.declarationProblem(); p != "" {
		t.Fatal(p)
	}
	twice := NewDispatcher(Info{Kind: "t", Title: "T"}, k, func() time.Duration { return 0 }, 80, 24,
		Key("+", "a", func(*Ctx) {}), Key("+", "b", func(*Ctx) {}))
	if p := twice.declarationProblem(); !strings.Contains(p, `the key "+" is bound twice`) {
		t.Fatalf("problem %q", p)
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

func TestTickTagsBecomeSchemaRulesAndRefusals(t *testing.T) {
	type args struct {
		EveryMs int64   `tick:"min=20,max=60000,or=0"`
		Mode    string  `json:"mode,omitempty" tick:"minLength=2,maxLength=5,or=x,desc=How, in short."`
		Ratio   float64 `json:"ratio,omitempty" tick:"min=0,max=1,or=-1"`
		Tags    []int   `json:"tags,omitempty" tick:"maxItems=2"`
	}
	schema, bad := schemaOf(reflect.TypeOf(args{}))
	if bad != "" {
		t.Fatal(bad)
	}
	got, _ := json.Marshal(schema["properties"])
	want := `{"every_ms":{"anyOf":[{"const":0},{"maximum":60000,"minimum":20}],"maximum":60000,"minimum":0,"type":"integer"},` +
		`"mode":{"anyOf":[{"const":"x"},{"maxLength":5,"minLength":2}],"description":"How, in short.","type":"string"},` +
		`"ratio":{"anyOf":[{"const":-1},{"maximum":1,"minimum":0}],"maximum":1,"minimum":-1,"type":"number"},` +
		`"tags":{"items":{"type":"integer"},"maxItems":2,"type":"array"}}`
	if string(got) != want {
		t.Fatalf("schema\n%s\nwant\n%s", got, want)
	}
	d := NewDispatcher(Info{Kind: "t", Title: "T"}, nothing{}, func() time.Duration { return 0 }, 80, 24,
		Tool("set", "Set.", Mutates, func(_ *Ctx, a args) (any, error) { return a.EveryMs, nil }))
	for in, want := range map[string]string{
		`{"every_ms":0}`:                "",
		`{"every_ms":20}`:               "",
		`{"every_ms":60000}`:            "",
		`{"every_ms":19}`:               "args.every_ms must be 0 or from 20 to 60000",
		`{"every_ms":1}`:                "args.every_ms must be 0 or from 20 to 60000",
		`{"every_ms":-1}`:               "args.every_ms must be at least 0",
		`{"every_ms":60001}`:            "args.every_ms must be at most 60000",
		`{"every_ms":0,"mode":"x"}`:     "",
		`{"every_ms":0,"mode":"ab"}`:    "",
		`{"every_ms":0,"mode":"y"}`:     `args.mode must be "x" or within minLength 2, maxLength 5`,
		`{"every_ms":0,"ratio":-1}`:     "",
		`{"every_ms":0,"ratio":0.5}`:    "",
		`{"every_ms":0,"ratio":-0.5}`:   "args.ratio must be -1 or from 0 to 1",
		`{"every_ms":0,"ratio":2}`:      "args.ratio must be at most 1",
		`{"every_ms":0,"ratio":-2}`:     "args.ratio must be at least -1",
		`{"every_ms":0,"tags":[1,2,3]}`: "args.tags breaks maxItems 2",
	} {
		frame := call(t, d, "set", in)
		e, _ := frame["error"].(map[string]any)
		if want == "" && e != nil {
			t.Errorf("%s: refused: %v", in, e)
		}
		if want != "" && (e == nil || e["code"] != float64(InvalidParams) || e["message"] != want) {
			t.Errorf("%s: %v, want -32602 %q", in, frame, want)
		}
	}
	for tag, why := range map[string]string{
		`tick:"min=x"`:        "min=x is not a bound",
		`tick:"minimum=1"`:    `"minimum" is not a rule`,
		`tick:"minLength=1"`:  "minLength is for a string, not an integer",
		`tick:"or=1.5"`:       "or=1.5 is not an integer",
		`tick:"min"`:          `"min" is not key=value`,
		`tick:"min=1,,max=2"`: `"" is not key=value`,
	} {
		typ := reflect.StructOf([]reflect.StructField{{Name: "N", Type: reflect.TypeOf(0), Tag: reflect.StructTag(tag)}})
		if _, bad := schemaOf(typ); !strings.Contains(bad, why) || !strings.Contains(bad, "the tick tag of") {
			t.Errorf("%s: %q, want %q", tag, bad, why)
		}
	}
	broken := NewDispatcher(Info{Kind: "t", Title: "T"}, nothing{}, func() time.Duration { return 0 }, 80, 24,
		Tool("bad", "Bad.", Mutates, func(_ *Ctx, a struct {
			N int `tick:"max=ten"`
		}) (any, error) {
			return nil, nil
		}))
	out := broken.Feed([]byte(`{"jsonrpc":"2.0","id":1,"method":"tick/describe"}` + "\n"))
	if !bytes.Contains(out, []byte(`"code":-32603`)) || !bytes.Contains(out, []byte("tool bad: the tick tag of struct { N int")) {
		t.Fatalf("describe with a bad tag: %s", out)
	}
}

func TestMillisIsAnIntegerOfMilliseconds(t *testing.T) {
	var got Millis
	d := NewDispatcher(Info{Kind: "t", Title: "T"}, nothing{}, func() time.Duration { return 0 }, 80, 24,
		Tool("wait", "Wait.", Mutates, func(_ *Ctx, a struct {
			ForMs Millis `tick:"max=60000"`
		}) (any, error) {
			got = a.ForMs
			return M{"for_ms": a.ForMs}, nil
		}))
	if s, _ := json.Marshal(d.tools["wait"].schema["properties"]); string(s) != `{"for_ms":{"maximum":60000,"type":"integer"}}` {
		t.Fatalf("schema %s", s)
	}
	if frame := call(t, d, "wait", `{"for_ms":1500}`); frame["result"].(map[string]any)["for_ms"] != float64(1500) {
		t.Fatalf("%v", frame)
	}
	if got != 1500 || got.Duration() != 1500*time.Millisecond {
		t.Fatalf("decoded %d, Duration %v", got, got.Duration())
	}
	if frame := call(t, d, "wait", `{"for_ms":1.5}`); frame["error"] == nil {
		t.Fatalf("a fraction of a millisecond: %v", frame)
	}
}
