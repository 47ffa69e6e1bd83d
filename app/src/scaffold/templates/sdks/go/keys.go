package tick

import "unicode/utf8"

// KeyDecoder turns key bytes typed in a view into key names: a printable
// key is its character ("+", "é"), the others "enter", "tab", "backtab",
// "backspace", "esc", "up", "down", "left", "right", "home", "end",
// "pageup", "pagedown", "insert", "delete", "ctrl-a".."ctrl-z", or
// "unknown". A sequence cut by the end of a read waits for the next one.
type KeyDecoder struct{ pending []byte }

// maxPending: a longer unfinished sequence is not a key; it is dropped.
const maxPending = 64

var finals = map[byte]string{'A': "up", 'B': "down", 'C': "right", 'D': "left", 'H': "home", 'F': "end", 'Z': "backtab"}
var tildes = map[string]string{"1": "home", "7": "home", "4": "end", "8": "end", "2": "insert", "3": "delete", "5": "pageup", "6": "pagedown"}

// Feed decodes what it can of the bytes so far.
func (k *KeyDecoder) Feed(data []byte) []string {
	s := append(k.pending, data...)
	var keys []string
	i := 0
scan:
	for i < len(s) {
		b := s[i]
		switch {
		case b == 0x1b:
			if i+1 >= len(s) {
				keys, i = append(keys, "esc"), i+1
				continue
			}
			switch s[i+1] {
			case '[', 'O':
				j := i + 2
				for j < len(s) && !(s[j] >= 0x40 && s[j] <= 0x7e) {
					j++
				}
				if j >= len(s) {
					break scan
				}
				name := finals[s[j]]
				if s[j] == '~' {
					name = tildes[string(s[i+2:j])]
				}
				if name == "" {
					name = "unknown"
				}
				keys, i = append(keys, name), j+1
			case 0x1b:
				keys, i = append(keys, "esc"), i+1
			default:
				keys, i = append(keys, "unknown"), i+2
			}
			continue
		case b == '\r' || b == '\n':
			keys = append(keys, "enter")
		case b == '\t':
			keys = append(keys, "tab")
		case b == 0x7f || b == 0x08:
			keys = append(keys, "backspace")
		case b >= 0x01 && b <= 0x1a:
			keys = append(keys, "ctrl-"+string(rune('a'+b-1)))
		case b < 0x20:
			keys = append(keys, "unknown")
		default:
			if !utf8.FullRune(s[i:]) {
				break scan // a character cut by the end of the read
			}
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n <= 1 {
				keys, i = append(keys, "unknown"), i+1
				continue
			}
			keys, i = append(keys, string(r)), i+n
			continue
		}
		i++
	}
	k.pending = append([]byte(nil), s[i:]...)
	if len(k.pending) > maxPending {
		keys, k.pending = append(keys, "unknown"), nil
	}
	return keys
}
