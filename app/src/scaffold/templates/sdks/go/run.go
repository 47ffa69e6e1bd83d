package tick

import (
	"os"
	"time"
)

// Run starts t with its tools and keys (Tool, ToolNoArgs, Key) and serves
// it until stdin ends: the same source runs as a GOOS=wasip1 module
// (loop_wasip1.go) and natively (loop_native.go).
func Run(info Info, t Tick, decls ...Decl) {
	start := time.Now()
	clock := func() time.Duration { return time.Since(start) }
	cols, rows := size()
	d := NewDispatcher(info, t, clock, cols, rows, decls...)
	d.Report = func(problem string) { os.Stderr.WriteString(problem + "\n") }
	if p := d.declarationProblem(); p != "" {
		d.Report(p)
	}
	loop(d, clock)
}

// writeAll writes frames to stdout (os.File.Write writes everything or fails).
func writeAll(frames []byte) {
	if len(frames) > 0 {
		os.Stdout.Write(frames)
	}
}
