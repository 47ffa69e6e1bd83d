"""The counter of the Tick protocol's Appendix A, on the tickbox_tick SDK.

A person presses `+` or `-` in the view; a client calls `increment`; `auto`
adds one on a timer. All change one value, and the SDK turns every change
into one `tick/update`. Build: ./build.sh; debug natively: python3 app.py.
"""

from typing import Annotated

from tickbox_tick import Range, Rejected, Tick, box, main, tool

HISTORY, IN_STATE = 256, 32  # changes kept; changes the state carries (§6.4)
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1  # a signed 64-bit value, like the other examples


class Counter(Tick):
    kind, title = "example.counter", "Counter"
    description = "Keyboard and tool calls share one value."
    recover_with, series = "history", {"/recent": "last"}

    def __init__(self):
        self.value, self.changes, self.log, self.auto_ms, self.timer = 0, 0, [], 0, None

    def change(self, by):
        """The one place the value changes, for keys, tools and the timer."""
        if INT_MIN <= self.value + by <= INT_MAX:
            self.value, self.changes = self.value + by, self.changes + 1
            self.log.append({"seq": self.changes, "value": self.value})
            del self.log[:-HISTORY]
        return self.value

    def state(self):
        return {"value": self.value, "recent": self.log[-IN_STATE:]}

    @tool("Add an integer to the counter.", mutates=True)
    def increment(self, ctx, amount: int):
        if not INT_MIN <= self.value + amount <= INT_MAX:
            raise Rejected("the counter would overflow")
        return {"value": self.change(amount)}

    @tool("Read the last 256 changes.")
    def history(self, ctx):
        return {"recent": self.log}

    @tool("Add one every every_ms milliseconds (20 to 60000); 0 stops.", mutates=True)
    def auto(self, ctx, every_ms: Annotated[int, Range(0, 60000)]):
        if 0 < every_ms < 20:
            raise Rejected("every_ms is 0 or 20..60000")
        ctx.cancel(self.timer)
        self.auto_ms, self.timer = every_ms, ctx.every(every_ms) if every_ms else None
        return {"every_ms": every_ms}

    def on_timer(self, ctx, timer):
        self.change(1)

    def on_key(self, ctx, key):
        if key in ("+", "-"):
            self.change(1 if key == "+" else -1)

    def view(self, ctx):
        auto = f"+1 every {self.auto_ms} ms" if self.auto_ms else "off"
        rows = [f"Counter: {self.value}", f"auto: {auto}", f"view: {ctx.cols}x{ctx.rows}"]
        return box("Counter (Python)", rows, "[+] add one  [-] subtract one", width=33)


Run = main(Counter, __name__)
