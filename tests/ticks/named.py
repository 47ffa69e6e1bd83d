#!/usr/bin/env python3
"""A conforming test Tick whose tools are named by its arguments.

Each argument becomes a query tool that echoes its args (`echo` when none is
given), so tests can build catalogs whose names are awkward for MCP. A tool
named `garbage` breaks the protocol instead: it writes a line that is not JSON. With
TICK_PIDFILE set, it writes its pid there at start, so tests can check that
the host stopped it.
"""
import json, os, sys

NAMES = sys.argv[1:] or ["echo"]
OBJ = {"type": "object"}
DESC = {"protocol": 3, "kind": "test.named", "title": "Named", "description": "Tools named by argv.",
        "revision": "1",
        "tools": [{"name": n, "description": "Echo the args.", "input_schema": OBJ, "mutates": False}
                  for n in NAMES]}

if os.environ.get("TICK_PIDFILE"):
    with open(os.environ["TICK_PIDFILE"], "w") as f:
        f.write(str(os.getpid()))


def send(frame):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}) + "\n")
    sys.stdout.flush()


sys.stderr.write("named ready\r\n")
sys.stderr.flush()
for line in sys.stdin:
    try:
        req = json.loads(line)
        rid, method, params = req["id"], req["method"], req.get("params", {})
    except (ValueError, KeyError, TypeError):
        continue
    if method == "tick/describe":
        send({"id": rid, "result": DESC})
    elif method == "tick/read":
        send({"id": rid, "result": {"seq": 0, "data": {"names": NAMES}}})
    elif method == "tick/call" and params.get("tool") == "garbage" and "garbage" in NAMES:
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
    elif method == "tick/call" and params.get("tool") in NAMES:
        send({"id": rid, "result": params.get("args", {})})
    else:
        send({"id": rid, "error": {"code": -32602, "message": "unknown tool"}})
