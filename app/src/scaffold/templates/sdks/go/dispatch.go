// Package tick writes a Tick in Go. Dispatcher is its sans-IO heart:
// protocol bytes, keys, resizes and the clock go in; frames and the view
// come out. The loops that wait and feed are loop_wasip1.go (GOOS=wasip1,
// poll_oneoff) and loop_native.go (a native build of the same source, for
// debugging). The rules kept, as the Rust SDK's dispatcher keeps them:
//
//   - every request with a usable id (an integer 0..2^53-1) gets exactly
//     one response; a line that is not a JSON object, or has no usable id
//     or no method, is dropped without a reply, never answered with id null
//     (§3.2);
//   - after every key, timer and mutating call the state is encoded and
//     compared with the last; only a difference bumps seq and sends one
//     tick/update (§8.2, §8.3), before the response of the call that
//     caused it;
//   - another revision gets -32004, an unknown tool or bad args -32602,
//     both before the tool runs (§7.2);
//   - a read-only tool promised to change nothing (§5.6): after it the state
//     is not encoded and the view is redrawn only when the tool asks
//     (ctx.Redraw). A read-only tool that changed the state anyway breaks
//     the protocol; the change goes out with the next event's update.
package tick

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// §3.4 codes.
const (
	InvalidRequest   = -32600
	MethodNotFound   = -32601
	InvalidParams    = -32602
	RevisionMismatch = -32004
	ToolFailed       = -32000
	InternalError    = -32603
)

const (
	protocol = 3
	revision = "1"
	// MaxLineBytes (§3.5): longer lines are discarded up to their newline.
	MaxLineBytes = 8 << 20
	// §5.3, §8.2: 512 KiB encoded, less 16 KiB of headroom because the host
	// measures after re-encoding (§2.3).
	safeEncoded = 512<<10 - 16<<10
	// Timers never fire more often than this: a zero period cannot spin.
	minPeriod = 10 * time.Millisecond
)

// Error is a tool's failure with its protocol code.
type Error struct {
	Code    int
	Message string
	Data    any
}

func (e *Error) Error() string { return e.Message }

// Failed: the tool failed after it started (-32000).
func Failed(format string, a ...any) error { return &Error{ToolFailed, fmt.Sprintf(format, a...), nil} }

// Rejected: refused before anything changed (-32602, "not executed", §3.4).
func Rejected(format string, a ...any) error {
	return &Error{InvalidParams, fmt.Sprintf(format, a...), nil}
}

// Effect says whether a tool can change anything besides its result (§5.6).
type Effect bool

const (
	ReadOnly Effect = false
	Mutates  Effect = true
)

// ToolDef is one tool of the catalog, made by Tool.
type ToolDef struct {
	name, description string
	mutates           bool
	schema            map[string]any
	problem           string // what in A's tick tags cannot be read
	run               func(ctx *Ctx, args any) (any, error)
}

// Tool declares a tool whose arguments are A (a struct: schema.go); fn runs it.
func Tool[A any](name, description string, effect Effect, fn func(ctx *Ctx, args A) (any, error)) ToolDef {
	schema, problem := schemaOf(reflect.TypeOf((*A)(nil)).Elem())
	return ToolDef{name, description, bool(effect), schema, problem,
		func(ctx *Ctx, decoded any) (any, error) {
			var args A
			if err := decode(decoded, reflect.ValueOf(&args).Elem()); err != nil {
				return nil, Rejected("args: %v", err)
			}
			return fn(ctx, args)
		}}
}

// ToolNoArgs declares a tool that takes no arguments (its schema is an
// object with no properties, so any argument is refused before fn runs).
func ToolNoArgs(name, description string, effect Effect, fn func(ctx *Ctx) (any, error)) ToolDef {
	return Tool(name, description, effect, func(ctx *Ctx, _ NoArgs) (any, error) { return fn(ctx) })
}

// Info describes the Tick in tick/describe. Series maps a JSON Pointer to
// "first" or "last" (which end is newest).
type Info struct {
	Kind, Title, Description, RecoverWith string
	Series                                map[string]string
}

// Tick is the author's program: its business state. It may also implement
// Viewer and KeyHandler, and OnStart(ctx).
type Tick interface{ State() any }

type Viewer interface{ View(ctx *Ctx) []string }

// KeyHandler gets every key that no Key declaration binds.
type KeyHandler interface{ OnKey(ctx *Ctx, key string) }

// Decl is what NewDispatcher and Run take after the Tick: a Tool or a Key.
type Decl interface{ declare(d *Dispatcher) }

// KeyDef binds one key, made by Key.
type KeyDef struct {
	key, help string
	fn        func(ctx *Ctx)
}

// Key binds key (a name as KeyDecoder gives it: "+", "enter", "ctrl-a") to
// fn; help says what it does in ctx.KeyHelp, the footer of a view. A bound
// key runs fn instead of OnKey. Like OnKey, fn is followed by one state
// comparison per read of keys and a redraw.
func Key(key, help string, fn func(ctx *Ctx)) KeyDef { return KeyDef{key, help, fn} }

func (k KeyDef) declare(d *Dispatcher) {
	if _, twice := d.keys[k.key]; twice {
		d.declaredTwice = fmt.Sprintf("tick: the key %q is bound twice", k.key)
	}
	d.keys[k.key] = k
	// The footer is written once here, not on every redraw that shows it.
	if k.help != "" {
		if d.ctx.keyHelp != "" {
			d.ctx.keyHelp += "  "
		}
		d.ctx.keyHelp += "[" + k.key + "] " + k.help
	}
}

func (t ToolDef) declare(d *Dispatcher) {
	if _, twice := d.tools[t.name]; twice {
		d.declaredTwice = "tick: a tool is declared twice (§5.3)"
	} else {
		d.order = append(d.order, t.name)
	}
	d.tools[t.name] = t
}

type timer struct {
	due    time.Duration
	period time.Duration // 0: once
	fn     func(ctx *Ctx)
	set    uint64 // when it was set, among timers: the tie-break of equal dues
}

// Ctx is what a handler may ask: timers, the view size, a redraw, quitting.
type Ctx struct {
	Cols, Rows   int
	clock        func() time.Duration
	timers       map[string]*timer
	sets         uint64
	keyHelp      string
	quit, redraw bool
}

// Every runs fn every period (at least 10 ms) as the timer called name,
// replacing any timer of that name; a period of 0 or less stops it instead
// (the "0 stops" of a tool that sets a rate). A Tick that falls behind gets
// one call, not a burst. After fn the state is compared (one tick/update
// if it changed) and the view redrawn, as after a key; fn may be nil, for
// a timer that only redraws (a clock in the view).
func (c *Ctx) Every(name string, period time.Duration, fn func(ctx *Ctx)) {
	if period <= 0 {
		c.Stop(name)
		return
	}
	period = max(period, minPeriod)
	c.set(name, period, period, fn)
}

// After runs fn once after delay (at the next turn when delay is 0 or
// less) as the timer called name, replacing any timer of that name.
func (c *Ctx) After(name string, delay time.Duration, fn func(ctx *Ctx)) {
	c.set(name, max(delay, 0), 0, fn)
}

func (c *Ctx) set(name string, delay, period time.Duration, fn func(ctx *Ctx)) {
	c.sets++
	c.timers[name] = &timer{c.clock() + delay, period, fn, c.sets}
}

// Stop stops the timer called name; no such timer (or one that finished) is
// ignored.
func (c *Ctx) Stop(name string) { delete(c.timers, name) }

// Period is how often the timer called name runs: 0 when it is not a
// running Every (none, stopped, or a one-shot After), so a view can say
// what runs without a field of its own.
func (c *Ctx) Period(name string) time.Duration {
	if t, live := c.timers[name]; live {
		return t.period
	}
	return 0
}

// KeyHelp is the keys bound with Key, in their order, as a view's footer:
// "[+] add one  [-] subtract one" (a key bound with no help is left out).
func (c *Ctx) KeyHelp() string { return c.keyHelp }

// Redraw: a read-only tool that changed only what the view shows asks for one.
func (c *Ctx) Redraw() { c.redraw = true }

// Quit ends the Tick after the current event.
func (c *Ctx) Quit() { c.quit = true }

// Dispatcher is one running Tick. Each event method returns the frames to
// write (whole lines); View gives the screen when it must be redrawn. The
// clock is monotonic time since any fixed start.
type Dispatcher struct {
	info          Info
	tick          Tick
	tools         map[string]ToolDef
	order         []string
	ctx           *Ctx
	seq           uint64
	data          json.RawMessage
	out, line     bytes.Buffer
	discarding    bool
	declaredTwice string // the problem of a tool or key declared twice
	keys          map[string]KeyDef
	decoder       KeyDecoder
	dirty         bool
	Report        func(problem string)
}

// NewDispatcher starts tick with its tools and keys; nothing is sent until
// asked.
func NewDispatcher(info Info, tick Tick, clock func() time.Duration, cols, rows int, decls ...Decl) *Dispatcher {
	d := &Dispatcher{info: info, tick: tick, tools: map[string]ToolDef{}, keys: map[string]KeyDef{}, dirty: true,
		ctx:    &Ctx{Cols: cols, Rows: rows, clock: clock, timers: map[string]*timer{}},
		Report: func(string) {}}
	for _, decl := range decls {
		decl.declare(d)
	}
	if s, ok := tick.(interface{ OnStart(*Ctx) }); ok {
		s.OnStart(d.ctx)
	}
	d.data = d.state()
	return d
}

// Done: the Tick asked to quit.
func (d *Dispatcher) Done() bool { return d.ctx.quit }

// NextDeadline is when the next timer is due (ok false: none).
func (d *Dispatcher) NextDeadline() (due time.Duration, ok bool) {
	for _, t := range d.ctx.timers {
		if !ok || t.due < due {
			due, ok = t.due, true
		}
	}
	return due, ok
}

// Feed handles protocol bytes from stdin: each complete line.
func (d *Dispatcher) Feed(data []byte) []byte {
	for {
		end := bytes.IndexByte(data, '\n')
		piece := data
		if end >= 0 {
			piece = data[:end]
		}
		if !d.discarding {
			if d.line.Len()+len(piece) > MaxLineBytes {
				d.discarding = true
				d.line.Reset()
			} else {
				d.line.Write(piece)
			}
		}
		if end < 0 {
			break
		}
		if !d.discarding {
			d.HandleLine(d.line.Bytes())
		}
		d.line.Reset()
		d.discarding = false
		data = data[end+1:]
	}
	return d.flush()
}

// Keys handles key bytes typed in a view.
func (d *Dispatcher) Keys(data []byte) []byte {
	keys := d.decoder.Feed(data)
	h, _ := d.tick.(KeyHandler)
	for _, k := range keys {
		if b, bound := d.keys[k]; bound {
			d.guarded("the key "+k, func() { b.fn(d.ctx) })
		} else if h != nil {
			d.guarded("OnKey", func() { h.OnKey(d.ctx, k) })
		}
	}
	if len(keys) > 0 {
		d.sync()
		d.dirty = true
	}
	return d.flush()
}

// Resize is a repaint, never an update (§8.3).
func (d *Dispatcher) Resize(cols, rows int) []byte {
	d.ctx.Cols, d.ctx.Rows, d.dirty = max(cols, 1), max(rows, 1), true
	return d.flush()
}

// Timers runs every timer due now, the earliest due first.
func (d *Dispatcher) Timers() []byte {
	if len(d.ctx.timers) == 0 {
		// The loop asks after every event: without a timer, no clock read
		// (a host call in a module) and no sort.
		return d.flush()
	}
	now := d.ctx.clock()
	type named struct {
		name string
		t    *timer
	}
	var due []named
	for name, t := range d.ctx.timers {
		if t.due <= now {
			due = append(due, named{name, t})
		}
	}
	sort.Slice(due, func(i, j int) bool {
		a, b := due[i].t, due[j].t
		return a.due < b.due || (a.due == b.due && a.set < b.set)
	})
	for _, n := range due {
		if d.ctx.timers[n.name] != n.t {
			continue // stopped or replaced by an earlier one's fn
		}
		if n.t.period == 0 {
			delete(d.ctx.timers, n.name)
		} else {
			for n.t.due <= now { // skip missed periods: no burst
				n.t.due += n.t.period
			}
		}
		if n.t.fn != nil {
			d.guarded("the timer "+n.name, func() { n.t.fn(d.ctx) })
		}
		d.sync()
		d.dirty = true
	}
	return d.flush()
}

// View is the screen when it must be redrawn.
func (d *Dispatcher) View() (lines []string, redraw bool) {
	if !d.dirty && !d.ctx.redraw {
		return nil, false
	}
	d.dirty, d.ctx.redraw = false, false
	if v, ok := d.tick.(Viewer); ok {
		d.guarded("View", func() { lines = v.View(d.ctx) })
	}
	return lines, true
}

// HandleLine handles one protocol line (without its newline).
func (d *Dispatcher) HandleLine(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if !utf8.Valid(line) {
		return // not UTF-8, not JSON: no reply (§3.2)
	}
	var msg map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if dec.Decode(&msg) != nil || dec.More() || msg == nil {
		return
	}
	num, isNum := msg["id"].(json.Number)
	method, isStr := msg["method"].(string)
	if !isNum || !isStr {
		return
	}
	id, err := num.Int64()
	if err != nil || id < 0 || id > maxInteger || strings.ContainsAny(string(num), ".eE") {
		return
	}
	if method == "tick/read" && msg["jsonrpc"] == "2.0" {
		// The state as encoded when it last changed: no re-encoding.
		d.out.WriteString(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"result":{"seq":` +
			strconv.FormatUint(d.seq, 10) + `,"data":`)
		d.out.Write(d.data)
		d.out.WriteString("}}\n")
		return
	}
	result, err := d.request(msg, method)
	if err == nil {
		if b, bad := json.Marshal(result); bad == nil {
			// The bytes json.Marshal makes of the map {"jsonrpc", "id",
			// "result"} (its keys sorted), without building and sorting
			// that map for every answer.
			d.out.WriteString(`{"id":` + strconv.FormatInt(id, 10) + `,"jsonrpc":"2.0","result":`)
			d.out.Write(b)
			d.out.WriteString("}\n")
			return
		}
		err = Failed("the result is not JSON")
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{ToolFailed, err.Error(), nil}
	}
	errObj := map[string]any{"code": e.Code, "message": e.Message}
	if e.Data != nil {
		errObj["data"] = e.Data
	}
	d.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": errObj})
}

func (d *Dispatcher) request(msg map[string]any, method string) (any, error) {
	if msg["jsonrpc"] != "2.0" {
		return nil, &Error{InvalidRequest, `invalid request: jsonrpc must be "2.0"`, nil}
	}
	switch method {
	case "tick/describe":
		return d.describe()
	case "tick/call":
		return d.call(msg["params"])
	}
	return nil, &Error{MethodNotFound, "unknown method " + method, nil}
}

func (d *Dispatcher) call(params any) (result any, err error) {
	p, ok := params.(map[string]any)
	if !ok {
		return nil, Rejected("tick/call params must be an object")
	}
	if p["revision"] != revision {
		return nil, &Error{RevisionMismatch, "the Tick Tool catalog changed; describe the Tick and prepare the call again", nil}
	}
	name, _ := p["tool"].(string)
	t, known := d.tools[name]
	if !known {
		return nil, Rejected("unknown tool `%s`", name)
	}
	args, present := p["args"]
	if !present {
		args = map[string]any{}
	}
	if why := problem(t.schema, args, "args"); why != "" {
		return nil, Rejected("%s", why)
	}
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, Failed("%s failed: %v", name, r)
		}
		if t.mutates { // a read-only tool promised to change nothing (package doc)
			d.sync()
			d.dirty = true
		}
	}()
	return t.run(d.ctx, args)
}

func (d *Dispatcher) describe() (any, error) {
	if p := d.declarationProblem(); p != "" {
		return nil, &Error{InternalError, p, nil}
	}
	tools := []any{}
	for _, name := range d.order {
		t := d.tools[name]
		tools = append(tools, map[string]any{"name": name, "description": t.description,
			"input_schema": t.schema, "mutates": t.mutates})
	}
	desc := map[string]any{"protocol": protocol, "kind": d.info.Kind, "title": d.info.Title,
		"description": d.info.Description, "revision": revision, "tools": tools}
	if d.info.RecoverWith != "" {
		desc["recover_with"] = d.info.RecoverWith
	}
	if len(d.info.Series) > 0 {
		paths := make([]string, 0, len(d.info.Series))
		for p := range d.info.Series {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		series := []any{}
		for _, p := range paths {
			series = append(series, map[string]any{"path": p, "newest": d.info.Series[p]})
		}
		desc["state"] = map[string]any{"series": series}
	}
	if b, _ := json.Marshal(desc); len(b) > safeEncoded {
		return nil, &Error{InternalError, "the descriptor is too big for tick/describe (§5.3)", nil}
	}
	return desc, nil
}

// declarationProblem: the §5.3 rules that depend on the author's declarations.
func (d *Dispatcher) declarationProblem() string {
	if strings.TrimSpace(d.info.Kind) == "" || strings.TrimSpace(d.info.Title) == "" {
		return "tick: Info.Kind and Info.Title must not be empty (§5.3)"
	}
	if d.declaredTwice != "" {
		return d.declaredTwice
	}
	for _, name := range d.order {
		if strings.TrimSpace(name) == "" {
			return "tick: a tool has an empty name (§5.3)"
		}
		if p := d.tools[name].problem; p != "" {
			return fmt.Sprintf("tick: tool %s: %s", name, p)
		}
	}
	if r := d.info.RecoverWith; r != "" && (d.tools[r].run == nil || d.tools[r].mutates) {
		return fmt.Sprintf("tick: RecoverWith names %q, which is not a read-only tool (§9)", r)
	}
	for p, newest := range d.info.Series {
		if !(p == "" || strings.HasPrefix(p, "/")) || (newest != "first" && newest != "last") {
			return fmt.Sprintf("tick: Series %q: a JSON Pointer, and \"first\" or \"last\" (§5.3)", p)
		}
	}
	return ""
}

func (d *Dispatcher) state() json.RawMessage {
	b, err := json.Marshal(d.tick.State())
	if err != nil {
		d.Report(fmt.Sprintf("tick: State() cannot be encoded as JSON: %v; no update was sent", err))
		return d.data
	}
	return b
}

// sync sends one update when the state changed; whether it did.
func (d *Dispatcher) sync() bool {
	data := d.state()
	if bytes.Equal(data, d.data) {
		return false
	}
	if len(data)+40 > safeEncoded {
		// Sending it would end the session (§8.2): keep the old state.
		d.Report("tick: the state is too big for tick/update (§8.2); no update was sent")
		return false
	}
	d.seq++
	d.data = data
	if string(data) != "null" { // null is "nothing yet": readable, never an update
		// Written, not formatted: fmt copied the state into a string
		// (json.RawMessage's String method) on every update.
		d.out.WriteString(`{"jsonrpc":"2.0","method":"tick/update","params":{"seq":` + strconv.FormatUint(d.seq, 10) + `,"data":`)
		d.out.Write(data)
		d.out.WriteString("}}\n")
	}
	return true
}

func (d *Dispatcher) guarded(what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			d.Report(fmt.Sprintf("tick: %s failed: %v", what, r))
		}
	}()
	fn()
}

// send writes one frame; nothing when it is not JSON (never half a frame).
func (d *Dispatcher) send(frame map[string]any) {
	if b, err := json.Marshal(frame); err == nil {
		d.out.Write(b)
		d.out.WriteByte('\n')
	}
}

func (d *Dispatcher) flush() []byte {
	out := bytes.Clone(d.out.Bytes())
	d.out.Reset()
	return out
}
