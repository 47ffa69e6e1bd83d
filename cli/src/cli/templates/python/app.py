"""The counter of the Tick protocol's Appendix A, as a Python component.

Built by componentize-py against the `tick` world of `wit/` (see build.sh):
a WASI 0.2 command whose view is `tickbox:terminal`, so it draws on the
view, takes keys (`+` and `-`) and follows resizes.

The event loop is one `wasi:io/poll` call over four pollables: stdin (the
protocol), the view's keys, the next resize, and (while `auto` runs) a
monotonic-clock instant. Nothing blocks anywhere else, so the timer keeps
working while the Tick waits for requests.

Protocol duties, and where they are met:
  - stdout carries only protocol lines, each written whole (send());
  - every request with an unsigned integer id gets exactly one response;
    lines that do not parse, or have no usable id or method, are dropped
    without a reply (handle_line());
  - a call with another revision gets -32004, an unknown tool or bad
    arguments -32602, both before anything changes (call());
  - every change is exactly one tick/update with the next seq (change()).

Everything the host sends is bounded: a line longer than MAX_LINE is
discarded up to its newline; JSON too deeply nested fails to parse and the
line is dropped.
"""

import json

from wit_world import exports
from componentize_py_types import Err
from wit_world.imports import monotonic_clock, poll, stdin, stdout, terminal

# Longest request line kept; longer lines are discarded.
MAX_LINE = 1 << 20
# Changes `history` keeps, and how many of them the state carries.
HISTORY = 256
IN_STATE = 32
# Bounds of the `auto` period, in milliseconds.
AUTO_MIN_MS = 20
AUTO_MAX_MS = 60000
# Largest id a client can send exactly (2^53 - 1).
MAX_ID = 9007199254740991
# The counter stays within a signed 64-bit integer, like the other examples.
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1

REVISION = "1"
KIND = "example.counter"

DESCRIPTOR = {
    "protocol": 3,
    "kind": KIND,
    "title": "Counter",
    "description": "Keyboard and tool calls share one value.",
    "revision": REVISION,
    "tools": [
        {
            "name": "increment",
            "description": "Add an integer to the counter.",
            "input_schema": {
                "type": "object",
                "properties": {"amount": {"type": "integer"}},
                "required": ["amount"],
                "additionalProperties": False,
            },
            "mutates": True,
        },
        {
            "name": "history",
            "description": "Read the last 256 changes.",
            "input_schema": {"type": "object", "additionalProperties": False},
            "mutates": False,
        },
        {
            "name": "auto",
            "description": "Add one every every_ms milliseconds (20 to 60000); 0 stops.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "every_ms": {"type": "integer", "minimum": 0, "maximum": 60000}
                },
                "required": ["every_ms"],
                "additionalProperties": False,
            },
            "mutates": True,
        },
    ],
    "recover_with": "history",
    "state": {"series": [{"path": "/recent", "newest": "last"}]},
}


class BadCall(Exception):
    """A call refused before anything changed."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


class Counter:
    def __init__(self):
        self.out = stdout.get_stdout()
        self.value = 0
        self.seq = 0
        self.history = []  # (seq, value), oldest first, at most HISTORY
        self.auto_ms = 0  # 0: off
        self.next_auto_ns = 0  # monotonic time of the next automatic step
        self.size = terminal.get_size()

    # ---- output: each frame is one complete line ----

    def send(self, frame):
        frame["jsonrpc"] = "2.0"
        data = (json.dumps(frame, separators=(",", ":")) + "\n").encode()
        # blocking-write-and-flush takes at most 4096 bytes a call.
        for i in range(0, len(data), 4096):
            self.out.blocking_write_and_flush(data[i : i + 4096])

    def recent(self, keep):
        return [{"seq": s, "value": v} for s, v in self.history[-keep:]]

    def state(self):
        return {"seq": self.seq, "data": {"value": self.value, "recent": self.recent(IN_STATE)}}

    def draw(self):
        auto = f"+1 every {self.auto_ms} ms" if self.auto_ms else "off"
        view = (
            "\x1b[H\x1b[2J"
            "+-- Counter (Python) ---------------+\r\n"
            f"| Counter: {self.value:<24} |\r\n"
            f"| auto: {auto:<27} |\r\n"
            f"| view: {f'{self.size.cols}x{self.size.rows}':<27} |\r\n"
            "+-----------------------------------+\r\n"
            "[+] add one  [-] subtract one\r\n"
        )
        terminal.draw(view.encode())

    # ---- the counter ----

    def change(self, by):
        """The one place the value changes: one change, one update."""
        self.value += by
        self.seq += 1
        self.history.append((self.seq, self.value))
        del self.history[:-HISTORY]
        self.send({"method": "tick/update", "params": self.state()})
        self.draw()

    def call(self, params):
        if params.get("revision") != REVISION:
            raise BadCall(
                -32004,
                "the Tick Tool catalog changed; describe the Tick and prepare the call again",
            )
        tool, args = params.get("tool"), params.get("args")
        if not isinstance(args, dict):
            raise BadCall(-32602, "args must be an object")
        if tool == "increment":
            amount = args.get("amount")
            if len(args) != 1 or not is_int(amount):
                raise BadCall(-32602, 'increment takes {"amount": integer} and nothing else')
            if not INT_MIN <= self.value + amount <= INT_MAX:
                raise BadCall(-32602, "the counter would overflow")
            self.change(amount)
            return {"value": self.value}
        if tool == "history":
            if args:
                raise BadCall(-32602, "history takes no arguments")
            return {"recent": self.recent(HISTORY)}
        if tool == "auto":
            ms = args.get("every_ms")
            if (
                len(args) != 1
                or not is_int(ms)
                or not (ms == 0 or AUTO_MIN_MS <= ms <= AUTO_MAX_MS)
            ):
                raise BadCall(-32602, 'auto takes {"every_ms": 0 or 20..60000}')
            self.auto_ms = ms
            self.next_auto_ns = monotonic_clock.now() + ms * 1_000_000
            self.draw()
            return {"every_ms": ms}
        raise BadCall(-32602, "unknown tool")

    def handle_line(self, line):
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return  # not JSON (or nested too deep): no usable id, no reply
        if not isinstance(msg, dict):
            return
        rid, method = msg.get("id"), msg.get("method")
        if not is_int(rid) or not 0 <= rid <= MAX_ID or not isinstance(method, str):
            return
        params = msg.get("params")
        try:
            if method == "tick/describe":
                result = DESCRIPTOR
            elif method == "tick/read":
                result = self.state()
            elif method == "tick/call":
                if not isinstance(params, dict):
                    raise BadCall(-32602, "tick/call needs params")
                result = self.call(params)
            else:
                raise BadCall(-32601, "unknown method")
        except BadCall as e:
            self.send({"id": rid, "error": {"code": e.code, "message": str(e)}})
            return
        self.send({"id": rid, "result": result})

    def key(self, byte):
        if byte == ord("+") and self.value < INT_MAX:
            self.change(1)
        elif byte == ord("-") and self.value > INT_MIN:
            self.change(-1)

    def tick_auto(self):
        now = monotonic_clock.now()
        if not self.auto_ms or now < self.next_auto_ns:
            return
        step = self.auto_ms * 1_000_000
        self.next_auto_ns += step
        # After a stall, do not replay every missed step at once.
        if self.next_auto_ns < now:
            self.next_auto_ns = now + step
        if self.value < INT_MAX:
            self.change(1)

    def run(self):
        requests = stdin.get_stdin()
        keys = terminal.keys()
        # Pollables are children of their streams: they are kept for the
        # whole loop and polled again and again.
        requests_ready = requests.subscribe()
        keys_ready = keys.subscribe()
        resized = terminal.subscribe_resize(self.size.generation)
        line = bytearray()
        discarding = False  # inside a line longer than MAX_LINE
        self.draw()
        while True:
            waiting = [requests_ready, keys_ready, resized]
            clock = None
            if self.auto_ms:
                clock = monotonic_clock.subscribe_instant(self.next_auto_ns)
                waiting.append(clock)
            ready = poll.poll(waiting)
            # A pollable made for one wait is released at once (`__exit__`),
            # so handles never pile up while a fast timer runs.
            if clock is not None:
                clock.__exit__(None, None, None)
            if 3 in ready:
                self.tick_auto()
            if 2 in ready:
                self.size = terminal.get_size()
                resized.__exit__(None, None, None)
                resized = terminal.subscribe_resize(self.size.generation)
                self.draw()
            if 1 in ready:
                try:
                    typed = keys.read(64)
                except Err:
                    typed = b""  # the key stream never closes while the Tick runs
                for b in typed:
                    self.key(b)
            if 0 in ready:
                try:
                    chunk = requests.read(64 * 1024)
                except Err:
                    return  # stdin closed: nothing is in flight, so exit
                start = 0
                while True:
                    end = chunk.find(b"\n", start)
                    piece = chunk[start:] if end < 0 else chunk[start:end]
                    if not discarding:
                        if len(line) + len(piece) > MAX_LINE:
                            discarding = True
                            line.clear()
                        else:
                            line += piece
                    if end < 0:
                        break
                    if not discarding:
                        self.handle_line(bytes(line))
                    line.clear()
                    discarding = False
                    start = end + 1


class Run(exports.Run):
    """The component's entry point, `wasi:cli/run`."""

    def run(self) -> None:
        Counter().run()
