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
	"time"

	"tickbox.dev/tick"
)

const history, inState = 256, 32 // changes kept; changes the state carries (§6.4)

type counter struct {
	value int64
	log   *tick.History[int64]
	timer tick.TimerID // auto's; 0 when off
}

// add is the one place the value changes; false (and no change) when the
// sum would leave int64.
func (c *counter) add(by int64) (ok bool) {
	if c.value, ok = tick.CheckedAdd(c.value, by); ok {
		c.log.Record(c.value)
	}
	return ok
}

func (c *counter) State() any { return tick.M{"value": c.value, "recent": c.log.Last(inState)} }

// Argument structs need no tags: Amount is the argument "amount".
func (c *counter) increment(_ *tick.Ctx, a struct{ Amount int64 }) (any, error) {
	if !c.add(a.Amount) {
		return nil, tick.Rejected("the counter would overflow")
	}
	return tick.M{"value": c.value}, nil
}

func (c *counter) recent(*tick.Ctx) (any, error) { return tick.M{"recent": c.log.Last(history)}, nil }

func (c *counter) auto(ctx *tick.Ctx, a struct {
	EveryMs int64 `tick:"min=0,max=60000"`
}) (any, error) {
	if a.EveryMs > 0 && a.EveryMs < 20 {
		return nil, tick.Rejected("every_ms is 0 or 20..60000")
	}
	c.timer = ctx.Reset(c.timer, time.Duration(a.EveryMs)*time.Millisecond) // 0 stops
	return tick.M{"every_ms": a.EveryMs}, nil
}

func (c *counter) OnTimer(*tick.Ctx, tick.TimerID) { c.add(1) }

func (c *counter) OnKey(_ *tick.Ctx, key string) {
	if by, ok := map[string]int64{"+": 1, "-": -1}[key]; ok {
		c.add(by)
	}
}

func (c *counter) View(ctx *tick.Ctx) []string {
	auto := "off"
	if every := ctx.Period(c.timer); every > 0 {
		auto = fmt.Sprintf("+1 every %d ms", every.Milliseconds())
	}
	rows := []string{fmt.Sprint("Counter: ", c.value), "auto: " + auto, fmt.Sprintf("view: %dx%d", ctx.Cols, ctx.Rows)}
	return tick.Box("Counter (Go)", rows, "[+] add one  [-] subtract one", 33)
}

func main() {
	c := &counter{log: tick.NewHistory[int64](history)}
	tick.Run(tick.Info{Kind: "example.counter", Title: "Counter", Description: "Keyboard and tool calls share one value.",
		RecoverWith: "history", Series: map[string]string{"/recent": "last"}}, c,
		tick.Tool("increment", "Add an integer to the counter.", tick.Mutates, c.increment),
		tick.ToolNoArgs("history", "Read the last 256 changes.", tick.ReadOnly, c.recent),
		tick.Tool("auto", "Add one every every_ms milliseconds (20 to 60000); 0 stops.", tick.Mutates, c.auto))
}
