// The counter of the Tick protocol's Appendix A, in Go with the standard
// library only, built for GOOS=wasip1 (see build.sh).
//
// A wasip1 module gets a stderr-only view: what it writes to stderr is its
// screen, and it receives no keys and no resize events (the keys and
// resizes of tickbox:terminal need a component; see examples/python and
// examples/js).
//
// The event loop is the C example's: one wait on stdin with a timeout for
// the next `auto` step, so the timer keeps working while the Tick waits for
// requests. Go's own timers cannot do that here: Go's wasip1 port runs every
// goroutine on one thread, and a read of stdin (which a wasip1 host does not
// let a module make non-blocking) stops them all, timers included, until a
// line arrives. So the loop asks the host itself: waitStdin calls WASI's
// poll_oneoff with a read subscription on stdin and a clock subscription,
// and stdin is read only once it has bytes.
//
// Protocol duties, and where they are met:
//   - stdout carries only protocol lines, each written whole (send);
//   - every request with an unsigned integer id gets exactly one response;
//     lines that do not parse, or have no usable id or method, are dropped
//     without a reply (handleLine);
//   - a call with another revision gets -32004, an unknown tool or bad
//     arguments -32602, both before anything changes (call);
//   - every change is exactly one tick/update with the next seq (change).
//
// Everything the host sends is bounded: a line longer than maxLine is
// discarded up to its newline (readLines); encoding/json bounds nesting.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"
	"unsafe"
)

const (
	// Longest request line kept; longer lines are discarded.
	maxLine = 1 << 20
	// Changes `history` keeps, and how many of them the state carries.
	historyLen = 256
	inState    = 32
	// Bounds of the `auto` period, in milliseconds.
	autoMinMs = 20
	autoMaxMs = 60000
	// Largest id a client can send exactly (2^53 - 1).
	maxID    = 1<<53 - 1
	revision = "1"
)

const descriptor = `{"protocol":3,"kind":"example.counter","title":"Counter",` +
	`"description":"Keyboard and tool calls share one value.","revision":"` + revision + `",` +
	`"tools":[` +
	`{"name":"increment","description":"Add an integer to the counter.",` +
	`"input_schema":{"type":"object","properties":{"amount":{"type":"integer"}},` +
	`"required":["amount"],"additionalProperties":false},"mutates":true},` +
	`{"name":"history","description":"Read the last 256 changes.",` +
	`"input_schema":{"type":"object","additionalProperties":false},"mutates":false},` +
	`{"name":"auto","description":"Add one every every_ms milliseconds (20 to 60000); 0 stops.",` +
	`"input_schema":{"type":"object","properties":{"every_ms":{"type":"integer","minimum":0,"maximum":60000}},` +
	`"required":["every_ms"],"additionalProperties":false},"mutates":true}],` +
	`"recover_with":"history","state":{"series":[{"path":"/recent","newest":"last"}]}}`

type change struct {
	Seq   uint64 `json:"seq"`
	Value int64  `json:"value"`
}

type counter struct {
	value   int64
	seq     uint64
	history []change
	autoMs  int64     // 0: off
	nextAt  time.Time // when the next automatic step is due
	out     *bufio.Writer
}

// rpcError is a call refused before anything changed.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// send writes one frame and its newline, whole, then flushes.
func (c *counter) send(frame map[string]any) {
	frame["jsonrpc"] = "2.0"
	line, err := json.Marshal(frame)
	if err != nil {
		os.Exit(70)
	}
	c.out.Write(line)
	c.out.WriteByte('\n')
	if c.out.Flush() != nil {
		os.Exit(0) // the host is gone
	}
}

func (c *counter) recent(keep int) []change {
	start := max(len(c.history)-keep, 0)
	return append([]change{}, c.history[start:]...)
}

func (c *counter) state() map[string]any {
	return map[string]any{"seq": c.seq, "data": map[string]any{"value": c.value, "recent": c.recent(inState)}}
}

// draw paints the view: whatever goes to stderr is the Tick's screen.
func (c *counter) draw() {
	auto := "off"
	if c.autoMs > 0 {
		auto = fmt.Sprintf("+1 every %d ms", c.autoMs)
	}
	fmt.Fprintf(os.Stderr, "\x1b[H\x1b[2J"+
		"+-- Counter (Go) -------------------+\r\n"+
		"| Counter: %-24d |\r\n"+
		"| auto: %-27s |\r\n"+
		"+-----------------------------------+\r\n"+
		"(a wasip1 module's view shows stderr; it gets no keys)\r\n", c.value, auto)
}

// change is the one place the value changes: one change, one update.
func (c *counter) change(by int64) {
	c.value += by
	c.seq++
	c.history = append(c.history, change{c.seq, c.value})
	if len(c.history) > historyLen {
		c.history = c.history[len(c.history)-historyLen:]
	}
	c.send(map[string]any{"method": "tick/update", "params": c.state()})
	c.draw()
}

// integer reads a JSON number without fraction or exponent that fits in
// an int64 (not a string: json.Number would take "12" too).
func integer(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

func (c *counter) call(params map[string]json.RawMessage) (any, *rpcError) {
	var rev, tool string
	if json.Unmarshal(params["revision"], &rev) != nil || rev != revision {
		return nil, &rpcError{-32004, "the Tick Tool catalog changed; describe the Tick and prepare the call again"}
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(params["args"], &args) != nil || args == nil {
		return nil, &rpcError{-32602, "args must be an object"}
	}
	json.Unmarshal(params["tool"], &tool)
	switch tool {
	case "increment":
		amount, ok := integer(args["amount"])
		if len(args) != 1 || !ok {
			return nil, &rpcError{-32602, `increment takes {"amount": integer} and nothing else`}
		}
		if (amount > 0 && c.value > math.MaxInt64-amount) || (amount < 0 && c.value < math.MinInt64-amount) {
			return nil, &rpcError{-32602, "the counter would overflow"}
		}
		c.change(amount)
		return map[string]any{"value": c.value}, nil
	case "history":
		if len(args) != 0 {
			return nil, &rpcError{-32602, "history takes no arguments"}
		}
		return map[string]any{"recent": c.recent(historyLen)}, nil
	case "auto":
		ms, ok := integer(args["every_ms"])
		if len(args) != 1 || !ok || ms < 0 || ms > autoMaxMs || (ms > 0 && ms < autoMinMs) {
			return nil, &rpcError{-32602, `auto takes {"every_ms": 0 or 20..60000}`}
		}
		c.autoMs = ms
		c.nextAt = time.Now().Add(time.Duration(ms) * time.Millisecond)
		c.draw()
		return map[string]any{"every_ms": ms}, nil
	}
	return nil, &rpcError{-32602, "unknown tool"}
}

// handleLine answers one line from the host.
func (c *counter) handleLine(line []byte) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil {
		return
	}
	id, ok := integer(msg["id"])
	var method string
	if !ok || id < 0 || id > maxID || json.Unmarshal(msg["method"], &method) != nil {
		return // no usable id or method: no reply
	}
	var result any
	var fail *rpcError
	switch method {
	case "tick/describe":
		result = json.RawMessage(descriptor)
	case "tick/read":
		result = c.state()
	case "tick/call":
		var params map[string]json.RawMessage
		if json.Unmarshal(msg["params"], &params) != nil || params == nil {
			fail = &rpcError{-32602, "tick/call needs params"}
		} else {
			result, fail = c.call(params)
		}
	default:
		fail = &rpcError{-32601, "unknown method"}
	}
	if fail != nil {
		c.send(map[string]any{"id": id, "error": fail})
	} else {
		c.send(map[string]any{"id": id, "result": result})
	}
}

//go:wasmimport wasi_snapshot_preview1 poll_oneoff
func pollOneoff(in, out unsafe.Pointer, nsubscriptions uint32, nevents unsafe.Pointer) uint32

// waitStdin waits until stdin has bytes (or its end) or timeout passes
// (negative: no timeout), with WASI's poll_oneoff; whether stdin is ready.
// The subscription and event layouts are preview 1's: 48 and 32 bytes,
// little-endian, the type tag at offset 8 and the union at 16.
func waitStdin(timeout time.Duration) bool {
	var subs [2 * 48]byte
	var events [2 * 32]byte
	le := binary.LittleEndian
	// 0: read on fd 0 (userdata 1).
	le.PutUint64(subs[0:], 1)
	subs[8] = 1 // eventtype fd_read
	le.PutUint32(subs[16:], 0)
	n := uint32(1)
	if timeout >= 0 {
		// 1: a relative timeout on the monotonic clock (userdata 2).
		le.PutUint64(subs[48:], 2)
		subs[48+8] = 0                              // eventtype clock
		le.PutUint32(subs[48+16:], 1)               // clock id: monotonic
		le.PutUint64(subs[48+24:], uint64(timeout)) // nanoseconds
		le.PutUint64(subs[48+32:], 1000)            // precision
		n = 2
	}
	var got uint32
	if pollOneoff(unsafe.Pointer(&subs[0]), unsafe.Pointer(&events[0]), n, unsafe.Pointer(&got)) != 0 {
		return true // let the read report what is wrong
	}
	for i := uint32(0); i < got && i < 2; i++ {
		if le.Uint64(events[i*32:]) == 1 {
			return true
		}
	}
	return false
}

// lineReader splits stdin into lines (without their newline), dropping
// lines longer than maxLine.
type lineReader struct {
	line       []byte
	discarding bool // inside a line longer than maxLine
}

// feed hands every complete line of chunk to handle.
func (r *lineReader) feed(chunk []byte, handle func([]byte)) {
	for len(chunk) > 0 {
		end := bytes.IndexByte(chunk, '\n')
		piece := chunk
		if end >= 0 {
			piece = chunk[:end]
		}
		if !r.discarding {
			if len(r.line)+len(piece) > maxLine {
				r.discarding, r.line = true, nil
			} else {
				r.line = append(r.line, piece...)
			}
		}
		if end < 0 {
			return
		}
		if !r.discarding {
			handle(r.line)
		}
		r.line, r.discarding = r.line[:0], false
		chunk = chunk[end+1:]
	}
}

func main() {
	c := &counter{out: bufio.NewWriterSize(os.Stdout, 64*1024)}
	var lines lineReader
	buf := make([]byte, 64*1024)
	c.draw()
	for {
		timeout := time.Duration(-1)
		if c.autoMs > 0 {
			timeout = max(time.Until(c.nextAt), 0)
		}
		ready := waitStdin(timeout)
		if c.autoMs > 0 && !time.Now().Before(c.nextAt) {
			step := time.Duration(c.autoMs) * time.Millisecond
			c.nextAt = c.nextAt.Add(step)
			// After a stall, do not replay every missed step at once.
			if c.nextAt.Before(time.Now()) {
				c.nextAt = time.Now().Add(step)
			}
			if c.value < math.MaxInt64 {
				c.change(1)
			}
		}
		if !ready {
			continue
		}
		n, err := syscall.Read(0, buf)
		if err == syscall.EINTR || err == syscall.EAGAIN {
			continue
		}
		if n <= 0 {
			return // stdin closed: nothing is in flight, so exit
		}
		lines.feed(buf[:n], c.handleLine)
	}
}
