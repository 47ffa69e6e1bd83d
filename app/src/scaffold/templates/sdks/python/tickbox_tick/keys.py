"""Key bytes typed in a view, decoded into key names.

A printable key is its character ("+", "a", "é"); the others are names:
"enter", "tab", "backtab", "backspace", "esc", "up", "down", "left",
"right", "home", "end", "pageup", "pagedown", "insert", "delete",
"ctrl-a".."ctrl-z"; anything else is "unknown". A sequence cut by the end
of a read is kept for the next one, so how input is split never changes
the keys (the Rust SDK's `key.rs` rules).
"""

_FINAL = {"A": "up", "B": "down", "C": "right", "D": "left", "H": "home", "F": "end", "Z": "backtab"}
_TILDE = {"1": "home", "7": "home", "4": "end", "8": "end", "2": "insert", "3": "delete",
          "5": "pageup", "6": "pagedown"}
# A pending sequence longer than this is not a key: it is dropped as unknown.
MAX_PENDING = 64


def _escape(s, i):
    """The key of the escape sequence at s[i], and where it ends; None when cut."""
    if i + 1 >= len(s):
        return "esc", i + 1
    nxt = s[i + 1]
    if nxt in (0x5B, 0x4F):  # CSI or SS3: parameters, then a final byte
        for j in range(i + 2, len(s)):
            if 0x40 <= s[j] <= 0x7E:
                final, params = chr(s[j]), s[i + 2:j].decode("latin-1")
                if final == "~":
                    return _TILDE.get(params, "unknown"), j + 1
                return _FINAL.get(final, "unknown"), j + 1
        return None
    if nxt == 0x1B:
        return "esc", i + 1
    return "unknown", i + 2


class Decoder:
    def __init__(self):
        self.pending = b""

    def feed(self, data):
        s, keys, i = self.pending + bytes(data), [], 0
        self.pending = b""
        while i < len(s):
            b = s[i]
            if b == 0x1B:
                got = _escape(s, i)
                if got is None:
                    break
                key, i = got
                keys.append(key)
                continue
            if b in (0x0D, 0x0A):
                keys.append("enter")
            elif b == 0x09:
                keys.append("tab")
            elif b in (0x7F, 0x08):
                keys.append("backspace")
            elif 0x01 <= b <= 0x1A:
                keys.append("ctrl-" + chr(0x60 + b))
            elif b < 0x20:
                keys.append("unknown")
            else:
                n = 2 if 0xC0 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF7 else 1
                if i + n > len(s):
                    break  # a character cut by the end of the read
                try:
                    keys.append(s[i:i + n].decode())
                except UnicodeDecodeError:
                    keys.append("unknown")
                    n = 1
                i += n
                continue
            i += 1
        self.pending = s[i:]
        if len(self.pending) > MAX_PENDING:
            keys.append("unknown")
            self.pending = b""
        return keys
