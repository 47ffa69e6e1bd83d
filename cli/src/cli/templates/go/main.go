// The counter of the Tick protocol's Appendix A, on the Go SDK
// (tickbox.dev/tick, sdks/go), as a GOOS=wasip1 module.
//
// A client calls `increment`; `auto` adds one on a timer (the SDK's
// poll_oneoff loop keeps it running between requests); a native build of
// the same source also takes `+` and `-` from its terminal. Every change
// becomes one `tick/update`. Build: ./build.sh; debug natively: go run .
package main

import (
	"fmt"
	"math"
	"time"

	"tickbox.dev/tick"
)

const history, inState = 256, 32 // changes kept; changes the state carries (§6.4)

type change struct {
	Seq   int64 `json:"seq"`
	Value int64 `json:"value"`
}

type counter struct {
	value, changes, autoMs int64
	log                    []change
	timer                  tick.TimerID
}

type incrementArgs struct {
	Amount int64 `json:"amount"`
}
type autoArgs struct {
	EveryMs int64 `json:"every_ms" tick:"min=0,max=60000"`
}

// add is the one place the value changes; false when it would leave int64.
func (c *counter) add(by int64) bool {
	if (by > 0 && c.value > math.MaxInt64-by) || (by < 0 && c.value < math.MinInt64-by) {
		return false
	}
	c.value, c.changes = c.value+by, c.changes+1
	c.log = append(c.log, change{c.changes, c.value})[max(0, len(c.log)+1-history):]
	return true
}

func (c *counter) State() any {
	return map[string]any{"value": c.value, "recent": c.log[max(0, len(c.log)-inState):]}
}

func (c *counter) increment(_ *tick.Ctx, a incrementArgs) (any, error) {
	if !c.add(a.Amount) {
		return nil, tick.Rejected("the counter would overflow")
	}
	return map[string]any{"value": c.value}, nil
}

func (c *counter) recent(*tick.Ctx, tick.NoArgs) (any, error) {
	return map[string]any{"recent": c.log}, nil
}

func (c *counter) auto(ctx *tick.Ctx, a autoArgs) (any, error) {
	if a.EveryMs > 0 && a.EveryMs < 20 {
		return nil, tick.Rejected("every_ms is 0 or 20..60000")
	}
	ctx.Cancel(c.timer)
	c.autoMs, c.timer = a.EveryMs, 0
	if a.EveryMs > 0 {
		c.timer = ctx.Every(time.Duration(a.EveryMs) * time.Millisecond)
	}
	return map[string]any{"every_ms": a.EveryMs}, nil
}

func (c *counter) OnTimer(*tick.Ctx, tick.TimerID) { c.add(1) }

func (c *counter) OnKey(_ *tick.Ctx, key string) {
	if by, ok := map[string]int64{"+": 1, "-": -1}[key]; ok {
		c.add(by)
	}
}

func (c *counter) View(ctx *tick.Ctx) []string {
	auto := "off"
	if c.autoMs > 0 {
		auto = fmt.Sprintf("+1 every %d ms", c.autoMs)
	}
	return tick.Box("Counter (Go)", []string{fmt.Sprint("Counter: ", c.value), "auto: " + auto,
		fmt.Sprintf("view: %dx%d", ctx.Cols, ctx.Rows)}, "[+] add one  [-] subtract one", 33)
}

func main() {
	c := &counter{log: []change{}}
	tick.Run(tick.Info{Kind: "example.counter", Title: "Counter", Description: "Keyboard and tool calls share one value.",
		RecoverWith: "history", Series: map[string]string{"/recent": "last"}}, c,
		tick.Tool("increment", "Add an integer to the counter.", tick.Mutates, c.increment),
		tick.Tool("history", "Read the last 256 changes.", tick.ReadOnly, c.recent),
		tick.Tool("auto", "Add one every every_ms milliseconds (20 to 60000); 0 stops.", tick.Mutates, c.auto))
}
