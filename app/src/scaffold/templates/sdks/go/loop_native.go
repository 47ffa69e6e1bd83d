//go:build !wasip1

package tick

// The native loop, for debugging the same source: stdin, the controlling
// terminal's keys (raw mode where term_linux.go can set it) and resizes,
// and the timers, all funnelled into one goroutine that owns the Dispatcher.

import (
	"os"
	"os/signal"
	"syscall"
	"time"
)

func loop(d *Dispatcher, clock func() time.Duration) {
	view := os.Stderr
	requests, typed := make(chan []byte), make(chan []byte)
	go pump(os.Stdin, requests)
	if tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err == nil {
		restore := rawMode(tty)
		defer restore()
		view = tty
		go pump(tty, typed)
	}
	resized := make(chan os.Signal, 1)
	signal.Notify(resized, syscall.SIGWINCH)
	timer := time.NewTimer(time.Hour)
	for !d.Done() {
		if lines, redraw := d.View(); redraw {
			view.Write(Paint(lines))
		}
		timer.Stop()
		wake := (<-chan time.Time)(nil)
		if due, ok := d.NextDeadline(); ok {
			timer.Reset(max(due-clock(), 0))
			wake = timer.C
		}
		select {
		case chunk, open := <-requests:
			if !open {
				return // stdin closed: every request was answered
			}
			writeAll(d.Feed(chunk))
		case chunk := <-typed:
			writeAll(d.Keys(chunk))
		case <-resized:
			writeAll(d.Resize(size()))
		case <-wake:
		}
		writeAll(d.Timers())
	}
}

func pump(f *os.File, to chan<- []byte) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			to <- append([]byte(nil), buf[:n]...)
		}
		if err != nil {
			close(to)
			return
		}
	}
}
