#!/usr/bin/env python3
"""A conforming Tick that every other Tick in this directory breaks in one way.

`tickbox check` passes on this file; each sibling subclasses `Tick`, overrides
one hook, and must fail exactly the rule it names. Tools: `peek` (query, no
args), `echo` (query, {text: string}) and `add` (mutating, {amount: integer},
emits a tick/update). Requests are handled one at a time, in order.
"""
import json, sys, threading

OBJ_NO_ARGS = {"type": "object", "additionalProperties": False}
TOOLS = [
    {"name": "peek", "description": "Return the value.", "input_schema": OBJ_NO_ARGS, "mutates": False},
    {"name": "echo", "description": "Return the text.", "mutates": False,
     "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                      "required": ["text"], "additionalProperties": False}},
    {"name": "add", "description": "Add an integer to the value.", "mutates": True,
     "input_schema": {"type": "object", "properties": {"amount": {"type": "integer"}},
                      "required": ["amount"], "additionalProperties": False}},
]
# Hand-written checks equivalent to the schemas above: {tool: (required, {prop: type})}.
ARGS = {"peek": (set(), {}), "echo": ({"text"}, {"text": str}), "add": ({"amount"}, {"amount": int})}


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Tick:
    kind = "test.base"
    revision = "1"

    def __init__(self):
        # Re-entrant: signal handlers run on the main thread, maybe mid-write.
        self.lock = threading.RLock()
        self.seq = 0
        self.value = 0

    # --- output ---
    def write(self, raw):
        with self.lock:
            sys.stdout.write(raw)
            sys.stdout.flush()

    def line(self, frame):
        return json.dumps({"jsonrpc": "2.0", **frame}, separators=(",", ":")) + "\n"

    def send(self, frame):
        self.write(self.line(frame))

    # --- state ---
    def data(self):
        return {"value": self.value}

    def state(self):
        return {"seq": self.seq, "data": self.data()}

    def change(self, delta):
        with self.lock:
            self.value += delta
            self.seq += 1
            self.send({"method": "tick/update", "params": self.state()})

    # --- methods ---
    def descriptor(self):
        return {"protocol": 3, "kind": self.kind, "title": "Base",
                "description": "A conforming Tick for checker tests.", "revision": self.revision,
                "tools": TOOLS, "recover_with": "peek"}

    def describe(self):
        return self.descriptor()

    def read(self):
        return self.state()

    def check_revision(self, params):
        if params.get("revision") != self.revision:
            raise RpcError(-32004, "the tool catalog changed")

    def validate(self, tool, args):
        if tool not in ARGS:
            raise RpcError(-32602, "unknown tool %r" % (tool,))
        required, props = ARGS[tool]
        if not isinstance(args, dict) or not required <= set(args) or not set(args) <= set(props):
            raise RpcError(-32602, "bad args for %s" % tool)
        for k, ty in props.items():
            if k in args and (not isinstance(args[k], ty) or isinstance(args[k], bool)):
                raise RpcError(-32602, "%s must be %s" % (k, ty.__name__))

    def call(self, params):
        self.check_revision(params)
        tool, args = params.get("tool"), params.get("args", {})
        self.validate(tool, args)
        return getattr(self, "tool_" + tool)(args)

    def tool_peek(self, args):
        return {"value": self.value}

    def tool_echo(self, args):
        return {"text": args["text"]}

    def tool_add(self, args):
        self.change(args["amount"])
        return {"value": self.value}

    def unknown_method(self, method):
        raise RpcError(-32601, "unknown method %s" % method)

    def handle(self, method, params):
        if method == "tick/describe":
            return self.describe()
        if method == "tick/read":
            return self.read()
        if method == "tick/call":
            return self.call(params)
        return self.unknown_method(method)

    def answer(self, rid, method, params):
        """The response frame for one request."""
        try:
            return {"id": rid, "result": self.handle(method, params)}
        except RpcError as e:
            return {"id": rid, "error": {"code": e.code, "message": str(e)}}

    def respond(self, rid, method, params):
        self.send(self.answer(rid, method, params))

    # --- input ---
    def on_garbage(self, line):
        """A line that cannot be parsed or has no usable id: discard it (§3.2)."""

    def parse(self, line):
        """(id, method, params), or None for a line to discard."""
        try:
            req = json.loads(line)
            rid, method = req["id"], req["method"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(rid, int) or isinstance(rid, bool) or rid < 0 or not isinstance(method, str):
            return None
        params = req.get("params", {})
        return rid, method, params if isinstance(params, dict) else {}

    def on_line(self, line):
        req = self.parse(line)
        if req is None:
            self.on_garbage(line)
        else:
            self.respond(*req)

    def on_eof(self):
        """Stdin closed: every request has been answered; exit."""

    def start(self):
        """Before reading stdin."""

    def run(self):
        self.start()
        for line in sys.stdin:
            self.on_line(line)
        self.on_eof()


if __name__ == "__main__":
    Tick().run()
