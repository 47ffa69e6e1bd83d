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

	"tickbox.dev/tick"
)

const history, inState = 256, 32 // changes kept; changes the state carries (§6.4)

// The counter's value is the newest of its changes (0 before the first).
type counter struct{ log *tick.History[int64] }

// add is the one place the value changes; false (and no change) when the
// sum would leave int64.
func (c *counter) add(by int64) bool {
	if sum, ok := tick.CheckedAdd(c.log.Newest(), by); ok {
		c.log.Record(sum)
		return true
	}
	return false
}

func (c *counter) State() any { return tick.M{"value": c.log.Newest(), "recent": c.log.Last(inState)} }

// Argument structs need no tags: Amount is the argument "amount".
func (c *counter) increment(_ *tick.Ctx, a struct{ Amount int64 }) (any, error) {
	if !c.add(a.Amount) {
		return nil, tick.Rejected("the counter would overflow")
	}
	return tick.M{"value": c.log.Newest()}, nil
}

func (c *counter) recent(*tick.Ctx) (any, error) { return tick.M{"recent": c.log.Last(history)}, nil }

// The tag is the rule, 0 or 20 to 60000: the schema says it, and the SDK
// refuses the rest before auto runs.
func (c *counter) auto(ctx *tick.Ctx, a struct {
	EveryMs tick.Millis `tick:"min=20,max=60000,or=0"`
}) (any, error) {
	ctx.Every("auto", a.EveryMs.Duration(), func(*tick.Ctx) { c.add(1) }) // 0 stops it
	return tick.M{"every_ms": a.EveryMs}, nil
}

func (c *counter) View(ctx *tick.Ctx) []string {
	auto := "off"
	if every := ctx.Period("auto"); every > 0 {
		auto = fmt.Sprintf("+1 every %d ms", every.Milliseconds())
	}
	rows := []string{fmt.Sprint("Counter: ", c.log.Newest()), "auto: " + auto, fmt.Sprintf("view: %dx%d", ctx.Cols, ctx.Rows)}
	return tick.Box("Counter (Go)", rows, ctx.KeyHelp(), 33)
}

func main() {
	c := &counter{log: tick.NewHistory[int64](history)}
	tick.Run(tick.Info{Kind: "example.counter", Title: "Counter", Description: "Keyboard and tool calls share one value.",
		RecoverWith: "history", Series: map[string]string{"/recent": "last"}}, c,
		tick.Tool("increment", "Add an integer to the counter.", tick.Mutates, c.increment),
		tick.ToolNoArgs("history", "Read the last 256 changes.", tick.ReadOnly, c.recent),
		tick.Tool("auto", "Add one every every_ms milliseconds (20 to 60000); 0 stops.", tick.Mutates, c.auto),
		tick.Key("+", "add one", func(*tick.Ctx) { c.add(1) }),
		tick.Key("-", "subtract one", func(*tick.Ctx) { c.add(-1) }))
}
