#!/usr/bin/env python3
"""A test Tick that emits a burst of updates, then exits.

`burst.py N`: right after answering its first tick/read, emits N tick/update
notifications (seq 1..N) as fast as it can and exits. The last update carries
a large declared series (/items, newest last) so its delivery must be trimmed
to the 16 KiB budget.
"""
import json, os, sys

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
DESC = {"protocol": 3, "kind": "test.burst", "title": "Burst", "description": "Emits a burst of updates.",
        "revision": "1", "recover_with": "items",
        "tools": [{"name": "items", "description": "All items.", "input_schema": {"type": "object"}, "mutates": False}],
        "state": {"series": [{"path": "/items", "newest": "last"}]}}


def send(frame):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}, separators=(",", ":")) + "\n")


for line in sys.stdin:
    req = json.loads(line)
    if req["method"] == "tick/describe":
        send({"id": req["id"], "result": DESC})
    elif req["method"] == "tick/read":
        send({"id": req["id"], "result": {"seq": 0, "data": {"n": 0, "items": []}}})
        sys.stdout.flush()
        for i in range(1, N + 1):
            items = [{"i": k, "pad": "x" * 20} for k in range(2000)] if i == N else [{"i": i}]
            send({"method": "tick/update", "params": {"seq": i, "data": {"n": i, "items": items}}})
        sys.stdout.flush()
        os._exit(0)
    else:
        send({"id": req["id"], "result": {"items": []}})
    sys.stdout.flush()
