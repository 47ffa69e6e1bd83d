package tick

import (
	"strings"
	"unicode/utf8"
)

// Paint is the bytes that replace the screen with lines: home, clear, then
// the lines (a terminal needs \r\n). One allocation: it runs on every
// redraw, and a module's allocations are its garbage collector's work.
func Paint(lines []string) []byte {
	const home = "\x1b[H\x1b[2J"
	n := len(home)
	for _, l := range lines {
		n += len(l) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, home...)
	for i, l := range lines {
		if i > 0 {
			out = append(out, "\r\n"...)
		}
		out = append(out, l...)
	}
	return out
}

// Box frames lines under title, with footer below (if any); the frame is
// as wide as the widest line, or width.
func Box(title string, lines []string, footer string, width int) []string {
	inner := max(width, utf8.RuneCountInString(title)+4)
	for _, l := range lines {
		inner = max(inner, utf8.RuneCountInString(l))
	}
	// Sized once, and lines concatenated rather than formatted (Sprintf
	// boxes its arguments): this runs on every redraw.
	out := make([]string, 0, len(lines)+3)
	out = append(out, "+-- "+title+" "+strings.Repeat("-", inner-utf8.RuneCountInString(title)-3)+"+")
	for _, l := range lines {
		out = append(out, "| "+l+strings.Repeat(" ", inner-utf8.RuneCountInString(l))+" |")
	}
	out = append(out, "+"+strings.Repeat("-", inner+2)+"+")
	if footer != "" {
		out = append(out, footer)
	}
	return out
}
