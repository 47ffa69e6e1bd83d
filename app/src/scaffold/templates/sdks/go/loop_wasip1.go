//go:build wasip1

package tick

// The GOOS=wasip1 loop. Go's wasip1 port runs every goroutine on one
// thread, and a goroutine blocked reading stdin stops them all (tickbox's
// preview-1 host cannot make stdin non-blocking), so no Go timer would
// fire while the Tick waits for a request. The loop therefore waits itself,
// with poll_oneoff on stdin and the monotonic clock, and reads stdin only
// once it is ready. A preview-1 module's view is stderr: no keys, no resize.

import (
	"encoding/binary"
	"os"
	"time"
	"unsafe"
)

//go:wasmimport wasi_snapshot_preview1 poll_oneoff
func pollOneoff(in, out unsafe.Pointer, nsubscriptions uint32, nevents unsafe.Pointer) uint32

// waitStdin waits until stdin is ready or timeout passes (negative: no
// timeout); whether stdin is ready. Preview 1's layouts: a subscription is
// 48 bytes, an event 32, little-endian, the tag at 8 and the union at 16.
func waitStdin(timeout time.Duration) bool {
	var subs [2 * 48]byte
	var events [2 * 32]byte
	le := binary.LittleEndian
	le.PutUint64(subs[0:], 1) // userdata 1: fd_read on fd 0
	subs[8] = 1
	n := uint32(1)
	if timeout >= 0 {
		le.PutUint64(subs[48:], 2)                  // userdata 2
		subs[48+8] = 0                              // clock
		le.PutUint32(subs[48+16:], 1)               // monotonic
		le.PutUint64(subs[48+24:], uint64(timeout)) // relative, in ns
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

func loop(d *Dispatcher, clock func() time.Duration) {
	buf := make([]byte, 64<<10)
	for !d.Done() {
		if lines, redraw := d.View(); redraw {
			os.Stderr.Write(Paint(lines))
		}
		timeout := time.Duration(-1)
		if due, ok := d.NextDeadline(); ok {
			timeout = max(due-clock(), 0)
		}
		if waitStdin(timeout) {
			n, err := os.Stdin.Read(buf)
			writeAll(d.Feed(buf[:n]))
			if err != nil {
				return // stdin closed: every request was answered
			}
		}
		writeAll(d.Timers())
	}
}

func size() (int, int) { return 120, 30 }
