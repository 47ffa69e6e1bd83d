#!/usr/bin/env python3
"""A conforming test Tick for the MCP facade whose catalog changes on request.

Tools: `echo` (query: returns its args), `reshape` (mutating: the next
revision offers the tools named in args.tools and takes args.title as its
title), `fail_big` (fails with a message of args.bytes bytes), `sleep`
(mutating: answers after args.seconds, or once the file args.until exists
(at most 120 s), with how many calls it finished so far), `count` (query: how many `sleep` calls finished). It draws a short
screen on its terminal (stderr) at start. With SHIFTY_LOG set, each
`sleep` call appends a line to that file as it starts, so a test knows the
calls reached the Tick.
"""
import json, os, sys, threading, time

OBJ = {"type": "object"}
revision = 1
title = "Shifty"
extra = []
finished = 0
lock = threading.Lock()


def tools():
    base = [
        {"name": "echo", "description": "Return the args.", "input_schema": OBJ, "mutates": False},
        {"name": "reshape", "description": "Change the catalog.", "input_schema": OBJ, "mutates": True},
        {"name": "fail_big", "description": "Fail with a long message.", "input_schema": OBJ, "mutates": False},
        {"name": "sleep", "description": "Answer after a while.", "input_schema": OBJ, "mutates": True},
        {"name": "count", "description": "Finished sleeps.", "input_schema": OBJ, "mutates": False},
    ]
    return base + [{"name": n, "description": "Extra " + n + ".", "input_schema": OBJ, "mutates": False}
                   for n in extra]


def descriptor():
    return {"protocol": 3, "kind": "test.shifty", "title": title, "description": "Changes shape.",
            "revision": "r%d" % revision, "tools": tools()}


def send(frame):
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}) + "\n")
        sys.stdout.flush()


def sleeper(rid, seconds, until=None):
    global finished
    if until:
        # A test holds the call in flight for as long as it needs, then
        # lets it end by creating the file: no guess at how slow the host is.
        deadline = time.monotonic() + 120
        while not os.path.exists(until) and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(seconds)
    finished += 1
    send({"id": rid, "result": {"slept": seconds, "finished": finished}})


sys.stderr.write("\x1b[2J\x1b[HShifty screen\r\nsecond row   \r\n")
sys.stderr.flush()
for line in sys.stdin:
    try:
        req = json.loads(line)
        rid, method, params = req["id"], req["method"], req.get("params", {})
    except (ValueError, KeyError, TypeError):
        continue
    if method == "tick/describe":
        send({"id": rid, "result": descriptor()})
    elif method == "tick/read":
        send({"id": rid, "result": {"seq": 0, "data": {"revision": revision}}})
    elif method != "tick/call":
        send({"id": rid, "error": {"code": -32601, "message": "no such method"}})
    elif params.get("revision") != "r%d" % revision:
        send({"id": rid, "error": {"code": -32004, "message": "catalog changed"}})
    else:
        tool, args = params.get("tool"), params.get("args", {})
        if tool == "reshape":
            revision += 1
            extra = list(args.get("tools", []))
            title = args.get("title", title)
            send({"id": rid, "result": {"revision": "r%d" % revision}})
        elif tool == "fail_big":
            send({"id": rid, "error": {"code": -32000, "message": "e" * int(args.get("bytes", 10)),
                                       "data": {"why": "asked to"}}})
        elif tool == "sleep":
            if os.environ.get("SHIFTY_LOG"):
                with open(os.environ["SHIFTY_LOG"], "a") as f:
                    f.write("sleep %s\n" % rid)
            threading.Thread(target=sleeper, args=(rid, float(args.get("seconds", 1)), args.get("until")),
                             daemon=True).start()
        elif tool == "count":
            send({"id": rid, "result": {"finished": finished}})
        elif tool in ("echo",) or tool in extra:
            send({"id": rid, "result": args})
        else:
            send({"id": rid, "error": {"code": -32602, "message": "unknown tool"}})
