//go:build linux

package tick

import (
	"os"
	"syscall"
	"unsafe"
)

func ioctl(fd uintptr, req uintptr, arg unsafe.Pointer) bool {
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	return errno == 0
}

// rawMode gives keys to the Tick one by one, unechoed; the returned
// function puts the terminal back.
func rawMode(tty *os.File) func() {
	var saved syscall.Termios
	if !ioctl(tty.Fd(), syscall.TCGETS, unsafe.Pointer(&saved)) {
		return func() {}
	}
	raw := saved
	raw.Iflag &^= syscall.ICRNL | syscall.IXON
	raw.Lflag &^= syscall.ECHO | syscall.ICANON | syscall.ISIG | syscall.IEXTEN
	raw.Cc[syscall.VMIN], raw.Cc[syscall.VTIME] = 1, 0
	ioctl(tty.Fd(), syscall.TCSETS, unsafe.Pointer(&raw))
	return func() { ioctl(tty.Fd(), syscall.TCSETS, unsafe.Pointer(&saved)) }
}

// size is the controlling terminal's size (120x30 without one).
func size() (int, int) {
	var ws struct{ Row, Col, X, Y uint16 }
	if f, err := os.Open("/dev/tty"); err == nil {
		defer f.Close()
		if ioctl(f.Fd(), syscall.TIOCGWINSZ, unsafe.Pointer(&ws)) && ws.Col > 0 {
			return int(ws.Col), int(ws.Row)
		}
	}
	return 120, 30
}
