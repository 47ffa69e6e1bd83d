"""The sans-IO heart of the SDK: protocol bytes, keys, resizes and the
clock go in; protocol frames and the view come out. The platform loops
(platform.py) only wait and feed. The rules it keeps, as the Rust SDK's
dispatcher does:

- every request with a usable id (an integer 0..2^53-1) gets exactly one
  response; a line that is not a JSON object, or has no usable id or no
  method, is dropped without a reply, never answered with `id: null` (§3.2);
- after every key, timer and mutating call the state is encoded and
  compared with the last one; only a difference bumps `seq` and sends one
  `tick/update` (§8.2, §8.3), so reads, redraws and resizes never do; the
  update goes out before the response of the call that caused it;
- a call against another revision gets -32004, an unknown tool or bad
  arguments -32602, both before the tool runs (§7.2);
- a read-only tool promised to change nothing (§5.6): after it the state is
  not encoded and the view is redrawn only when the tool asks (`ctx.redraw()`). A
  read-only tool that changed the state anyway breaks the protocol; the
  change goes out with the next event's update.
"""

import json

from . import schema as schemas
from .keys import Decoder

PROTOCOL = 3
# §3.4 codes.
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND = -32700, -32600, -32601
INVALID_PARAMS, REVISION_MISMATCH, TOOL_FAILED, INTERNAL_ERROR = -32602, -32004, -32000, -32603
# §3.5: longest line; longer ones are discarded up to their newline.
MAX_LINE_BYTES = 8 << 20
# §5.3, §8.2: both encoded bounds are 512 KiB; the SDK keeps 16 KiB of
# headroom because the host measures after re-encoding (§2.3).
SAFE_ENCODED = (512 << 10) - (16 << 10)
MAX_ID = (1 << 53) - 1
# Timers never fire more often than this, so a zero period cannot spin.
MIN_PERIOD_MS = 10


class ToolError(Exception):
    """A tool failed after it started: -32000 unless another code is given."""

    def __init__(self, message, code=TOOL_FAILED, data=None):
        super().__init__(message)
        self.code, self.data = code, data


class Rejected(ToolError):
    """Refused before anything changed: -32602, "not executed" (§3.4)."""

    def __init__(self, message, data=None):
        super().__init__(message, INVALID_PARAMS, data)


def tool(description, mutates=False, name=None):
    """Declares a method `(self, ctx, arg: hint, ...)` a tool of the catalog;
    the argument schema comes from the hints (schema.py)."""

    def mark(fn):
        fn.__tickbox_tool__ = (name or fn.__name__, description, bool(mutates))
        return fn

    return mark


class Tick:
    """Subclass it; set kind/title/description, decorate tools with @tool,
    override what you need. `series` maps a JSON Pointer to "first"/"last"."""

    kind = title = description = ""
    recover_with = None
    series = {}

    def state(self):
        return None

    def view(self, ctx):
        return ""

    def on_key(self, ctx, key):
        pass

    def on_timer(self, ctx, timer):
        pass


class Ctx:
    """What a handler may ask: timers, the view size, a redraw, quitting."""

    def __init__(self, clock, cols, rows):
        self.clock, self.cols, self.rows = clock, cols, rows
        self.timers = {}  # id -> [due_ms, period_ms or None]
        self.next_id, self.quit_asked, self.redraw_asked = 1, False, False

    def _add(self, delay, period):
        tid, self.next_id = self.next_id, self.next_id + 1
        self.timers[tid] = [self.clock() + delay, period]
        return tid

    def every(self, ms):
        """Calls on_timer every `ms` (at least 10) until cancelled; a Tick
        that falls behind gets one call, not a burst. Returns the timer id."""
        ms = max(ms, MIN_PERIOD_MS)
        return self._add(ms, ms)

    def after(self, ms):
        return self._add(max(ms, 0), None)

    def cancel(self, timer):
        self.timers.pop(timer, None)

    def redraw(self):
        self.redraw_asked = True

    def quit(self):
        self.quit_asked = True


def _catalog(tick):
    """The tools of `tick`'s class, in the order they are defined (base
    classes first), as name -> (bound method, schema, description, mutates,
    the schema's compiled test)."""
    tools = {}
    for klass in reversed(type(tick).__mro__):
        for attr, fn in vars(klass).items():
            mark = getattr(fn, "__tickbox_tool__", None)
            if mark:
                name, description, mutates = mark
                schema = schemas.of_function(fn, 2)
                tools[name] = (getattr(tick, attr), schema, description, mutates, schemas.validator(schema))
    return tools


def _no_constants(word):
    raise ValueError(word)  # NaN and Infinity are not JSON


# One encoder and one decoder for the life of the Tick: json.dumps and
# json.loads with options build a new one per call, which showed in the
# answer time of a component. ensure_ascii (the default) keeps a lone
# surrogate, a valid JSON escape but not UTF-8, escaped.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_DECODER = json.JSONDecoder(parse_constant=_no_constants)
encode = _ENCODER.encode


class Dispatcher:
    """One running Tick. Each event method returns the frames to write, as
    bytes (whole lines, in order); `view()` gives the screen when it must be
    redrawn. `clock` is monotonic milliseconds."""

    def __init__(self, tick, clock, cols=120, rows=30, report=lambda s: None):
        self.tick, self.report = tick, report
        self.ctx = Ctx(clock, cols, rows)
        self.tools = _catalog(tick)
        self.seq, self.out, self.line, self.discarding = 0, [], bytearray(), False
        self.keys_decoder = Decoder()
        self.dirty = True
        start = getattr(tick, "on_start", None)
        if start:
            start(self.ctx)
        self.encoded = self._encoded_state() or "null"
        problem = self.declaration_problem()
        if problem:
            report(problem)

    @property
    def done(self):
        return self.ctx.quit_asked

    def next_deadline(self):
        if not self.ctx.timers:
            return None  # no generator to build on every wait of a Tick without timers
        return min(t[0] for t in self.ctx.timers.values())

    # ---- events ----

    def feed(self, data):
        """Protocol bytes from stdin; complete lines are handled."""
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end >= 0 and not self.line and not self.discarding and end - start <= MAX_LINE_BYTES:
                # A whole line in this read (the usual case): handled in
                # place, not copied through self.line.
                self.handle_line(data[start:end])
                start = end + 1
                continue
            piece = data[start:] if end < 0 else data[start:end]
            if not self.discarding:
                if len(self.line) + len(piece) > MAX_LINE_BYTES:
                    self.discarding, self.line = True, bytearray()
                else:
                    self.line += piece
            if end < 0:
                break
            if not self.discarding:
                self.handle_line(bytes(self.line))
            self.line, self.discarding, start = bytearray(), False, end + 1
        return self._flush()

    def keys(self, data):
        keys = self.keys_decoder.feed(data)
        for key in keys:
            self._guarded(self.tick.on_key, key)
        if keys:
            self._sync()
            self.dirty = True
        return self._flush()

    def resize(self, cols, rows):
        """A repaint, never an update (§8.3)."""
        self.ctx.cols, self.ctx.rows, self.dirty = max(cols, 1), max(rows, 1), True
        return self._flush()

    def timers(self):
        if not self.ctx.timers:
            return b""
        now = self.ctx.clock()
        due = sorted((t[0], tid) for tid, t in self.ctx.timers.items() if t[0] <= now)
        for _, tid in due:
            timer = self.ctx.timers.get(tid)
            if timer is None:
                continue  # cancelled by an earlier handler
            if timer[1] is None:
                del self.ctx.timers[tid]
            else:
                while timer[0] <= now:  # skip missed periods: no burst
                    timer[0] += timer[1]
            self._guarded(self.tick.on_timer, tid)
            self._sync()
            self.dirty = True
        return self._flush()

    def view(self):
        """The screen text when it must be redrawn, else None."""
        if not (self.dirty or self.ctx.redraw_asked):
            return None
        self.dirty = self.ctx.redraw_asked = False
        try:
            return self.tick.view(self.ctx)
        except Exception as e:  # the author's bug: shown, never fatal
            return f"view failed: {e!r}"

    # ---- requests ----

    def handle_line(self, line):
        try:
            msg = _DECODER.decode(line.decode("utf-8").rstrip("\r"))
        except (ValueError, RecursionError):
            return  # not JSON: no usable id, no reply (§3.2)
        if not isinstance(msg, dict):
            return
        rid, method = msg.get("id"), msg.get("method")
        if type(rid) is not int or not 0 <= rid <= MAX_ID or not isinstance(method, str):
            return
        try:
            if msg.get("jsonrpc") != "2.0":
                raise ToolError('invalid request: jsonrpc must be "2.0"', INVALID_REQUEST)
            params = msg.get("params", {})
            if method == "tick/read":
                # The state as encoded when it last changed: no re-encoding.
                self.out.append(b'{"jsonrpc":"2.0","id":%d,"result":{"seq":%d,"data":%s}}\n'
                                % (rid, self.seq, self.encoded.encode()))
                return
            if method == "tick/describe":
                result = self.describe()
            elif method == "tick/call":
                result = self.call(params)
            else:
                raise ToolError(f"unknown method {method}", METHOD_NOT_FOUND)
            self._send({"jsonrpc": "2.0", "id": rid, "result": result})
        except Exception as e:  # one response per request, whatever broke
            if not isinstance(e, ToolError):
                e = ToolError(f"tickbox_tick: internal error: {e!r}", INTERNAL_ERROR)
            error = {"code": e.code, "message": str(e)}
            if e.data is not None:
                error["data"] = e.data
            self._send({"jsonrpc": "2.0", "id": rid, "error": error})

    def call(self, params):
        if not isinstance(params, dict):
            raise Rejected("tick/call params must be an object")
        if params.get("revision") != "1":
            raise ToolError("the Tick Tool catalog changed; describe the Tick and prepare the call again",
                            REVISION_MISMATCH)
        name, args = params.get("tool"), params.get("args", {})
        entry = self.tools.get(name) if isinstance(name, str) else None
        if entry is None:
            raise Rejected(f"unknown tool `{name}`")
        fn, schema, _, mutates, valid = entry
        if not valid(args):
            raise Rejected(schemas.problem(schema, args) or "args break the tool's schema")
        try:
            result = fn(self.ctx, **args)
        except ToolError:
            raise
        except Exception as e:
            raise ToolError(f"{name} failed: {e!r}")
        finally:
            if mutates:  # a read-only tool promised to change nothing (module docs)
                self._sync()
                self.dirty = True
        # A result that is not JSON fails in _send, before anything is
        # written; handle_line then answers with an error instead.
        return result

    def describe(self):
        problem = self.declaration_problem()
        if problem:
            raise ToolError(problem, INTERNAL_ERROR)
        t = self.tick
        d = {"protocol": PROTOCOL, "kind": t.kind, "title": t.title, "description": t.description,
             "revision": "1",
             "tools": [{"name": n, "description": desc, "input_schema": s, "mutates": m}
                       for n, (_, s, desc, m, _) in self.tools.items()]}
        if t.recover_with:
            d["recover_with"] = t.recover_with
        if t.series:
            d["state"] = {"series": [{"path": p, "newest": n} for p, n in t.series.items()]}
        if len(encode(d)) > SAFE_ENCODED:
            raise ToolError("the descriptor is too big for tick/describe (§5.3)", INTERNAL_ERROR)
        return d

    def declaration_problem(self):
        """The §5.3 rules that depend on the author's declarations."""
        t = self.tick
        if not str(t.kind).strip() or not str(t.title).strip():
            return "tickbox_tick: kind and title must not be empty (§5.3)"
        if any(not n.strip() for n in self.tools):
            return "tickbox_tick: a tool has an empty name (§5.3)"
        if t.recover_with and (t.recover_with not in self.tools or self.tools[t.recover_with][3]):
            return f"tickbox_tick: recover_with names {t.recover_with!r}, which is not a read-only tool (§9)"
        for path, newest in t.series.items():
            if not (path == "" or path.startswith("/")) or newest not in ("first", "last"):
                return f"tickbox_tick: series {path!r}: {newest!r} must be a JSON Pointer and 'first' or 'last' (§5.3)"
        return None

    # ---- state and output ----

    def _encoded_state(self):
        """state() as JSON, or None when it cannot be encoded."""
        try:
            return encode(self.tick.state())
        except (TypeError, ValueError, RecursionError) as e:
            self.report(f"tickbox_tick: state() cannot be encoded as JSON: {e}; no update was sent")
            return None

    def _sync(self):
        """Sends one update when the state changed; whether it did."""
        encoded = self._encoded_state()
        if encoded is None or encoded == self.encoded:
            return False
        if len(encoded) + 40 > SAFE_ENCODED:
            # Sending it would end the session (§8.2): keep the old state.
            self.report("tickbox_tick: the state is too big for tick/update (§8.2); no update was sent")
            return False
        self.seq, self.encoded = self.seq + 1, encoded
        if encoded != "null":  # null is "nothing yet": readable, never an update
            self.out.append(b'{"jsonrpc":"2.0","method":"tick/update","params":{"seq":%d,"data":%s}}\n'
                            % (self.seq, encoded.encode()))
        return True

    def _guarded(self, handler, arg):
        try:
            handler(self.ctx, arg)
        except Exception as e:
            self.report(f"tickbox_tick: {handler.__name__} failed: {e!r}")

    def _send(self, frame):
        self.out.append(encode(frame).encode() + b"\n")

    def _flush(self):
        if not self.out:
            return b""
        out, self.out = b"".join(self.out), []
        return out
