package tick

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Paint is the bytes that replace the screen with lines: home, clear, then
// the lines (a terminal needs \r\n).
func Paint(lines []string) []byte {
	return []byte("\x1b[H\x1b[2J" + strings.Join(lines, "\r\n"))
}

// Box frames lines under title, with footer below (if any); the frame is
// as wide as the widest line, or width.
func Box(title string, lines []string, footer string, width int) []string {
	inner := max(width, utf8.RuneCountInString(title)+4)
	for _, l := range lines {
		inner = max(inner, utf8.RuneCountInString(l))
	}
	out := []string{"+-- " + title + " " + strings.Repeat("-", inner-utf8.RuneCountInString(title)-3) + "+"}
	for _, l := range lines {
		out = append(out, fmt.Sprintf("| %s%s |", l, strings.Repeat(" ", inner-utf8.RuneCountInString(l))))
	}
	out = append(out, "+"+strings.Repeat("-", inner+2)+"+")
	if footer != "" {
		out = append(out, footer)
	}
	return out
}
