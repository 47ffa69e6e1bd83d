"""Turning what `Tick.view` returns into bytes for the view terminal."""


def paint(view):
    """The bytes that replace the screen with `view` (a string or a list of
    lines): home, clear, then the lines (a terminal needs \\r\\n)."""
    lines = view.split("\n") if isinstance(view, str) else list(view)
    return ("\x1b[H\x1b[2J" + "\r\n".join(lines)).encode()


def box(title, lines, footer=None, width=None):
    """`lines` in a frame titled `title`, `footer` under it, as a list of
    lines: the frame is as wide as the widest line unless `width` says."""
    inner = max([width or 0, len(title) + 4] + [len(s) for s in lines])
    out = [f"+-- {title} " + "-" * (inner - len(title) - 3) + "+"]
    out += [f"| {s:<{inner}} |" for s in lines]
    out.append("+" + "-" * (inner + 2) + "+")
    if footer:
        out.append(footer)
    return out
