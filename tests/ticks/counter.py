#!/usr/bin/env python3
"""The Appendix A counter as a native test Tick.

Conforming: keyboard + and - (on the controlling terminal) and the
`increment` tool share one value; `history` is the recover_with tool and
/recent is a series. With TICK_LOG set, every line received on stdin is
appended to that file, so tests can prove what was (not) sent.
"""
import json, os, sys, threading

REVISION = os.environ.get("COUNTER_REVISION", "1")
lock = threading.Lock()
value, seq, recent = 0, 0, []
log_path = os.environ.get("TICK_LOG")

DESCRIPTOR = {
    "protocol": 3, "kind": "example.counter", "title": "Counter",
    "description": "Keyboard and tool calls share one value.", "revision": REVISION,
    "tools": [
        {"name": "increment", "description": "Add an integer to the counter.",
         "input_schema": {"type": "object", "properties": {"amount": {"type": "integer"}},
                          "required": ["amount"], "additionalProperties": False},
         "mutates": True},
        {"name": "history", "description": "Read the last 256 changes.",
         "input_schema": {"type": "object", "additionalProperties": False}, "mutates": False},
    ],
    "recover_with": "history", "state": {"series": [{"path": "/recent", "newest": "last"}]},
}


def send(frame):
    line = json.dumps({"jsonrpc": "2.0", **frame}, separators=(",", ":")) + "\n"
    with lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def draw():
    sys.stderr.write("\x1b[2J\x1b[HCounter: %d\r\n[+] add one  [-] subtract one\r\n" % value)
    sys.stderr.flush()


def change(delta):
    """Apply a change and emit its update; the caller holds no lock."""
    global value, seq
    with lock:
        value += delta
        seq += 1
        recent.append({"seq": seq, "value": value})
        del recent[:-256]
        update = {"seq": seq, "data": {"value": value, "recent": list(recent)}}
    send({"method": "tick/update", "params": update})
    draw()
    return value


def open_keys():
    """Open the controlling terminal in cbreak mode, first thing at start.

    TCSANOW, not tty's default TCSAFLUSH: a flush would discard keys typed
    before this point (a view types as soon as it is attached, while this
    process may still be starting), and canonical-mode input waiting for a
    newline becomes readable as it is once the mode changes.
    """
    try:
        fd = os.open("/dev/tty", os.O_RDONLY)
        import termios, tty
        tty.setcbreak(fd, termios.TCSANOW)
    except (OSError, ImportError):
        return None
    return fd


def keys(fd):
    if fd is None:
        return
    while True:
        try:
            b = os.read(fd, 64)
        except OSError:
            return
        if not b:
            return
        for ch in b.decode(errors="ignore"):
            if ch == "+":
                change(1)
            elif ch == "-":
                change(-1)


class RpcError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def handle(method, params):
    if method == "tick/describe":
        return DESCRIPTOR
    if method == "tick/read":
        with lock:
            return {"seq": seq, "data": {"value": value, "recent": list(recent)}}
    if method == "tick/call":
        if params.get("revision") != REVISION:
            raise RpcError(-32004, "the Tick Tool catalog changed; describe the Tick and prepare the call again")
        tool, args = params.get("tool"), params.get("args", {})
        if tool == "increment":
            if not isinstance(args.get("amount"), int) or set(args) != {"amount"}:
                raise RpcError(-32602, "increment takes an integer amount")
            return {"value": change(args["amount"])}
        if tool == "history":
            if args != {}:
                raise RpcError(-32602, "history takes no args")
            with lock:
                return {"recent": list(recent)}
        raise RpcError(-32602, "unknown tool %r" % tool)
    raise RpcError(-32601, "unknown method %s" % method)


def main():
    # Before the first draw and before answering anything: no key the host
    # sends once the Tick is up can arrive before the terminal is in cbreak.
    fd = open_keys()
    draw()
    threading.Thread(target=keys, args=(fd,), daemon=True).start()
    for line in sys.stdin:
        if log_path:
            with open(log_path, "a") as f:
                f.write(line)
        try:
            request = json.loads(line)
            rid = request["id"]
        except (ValueError, KeyError, TypeError):
            continue
        # No usable id (null, a string, a float): discard without replying (§3.2).
        if not isinstance(rid, int) or isinstance(rid, bool) or rid < 0:
            continue
        try:
            send({"id": rid, "result": handle(request.get("method"), request.get("params", {}))})
        except RpcError as e:
            send({"id": rid, "error": {"code": e.code, "message": str(e)}})


main()
