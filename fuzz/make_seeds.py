#!/usr/bin/env python3
"""Builds fuzz/corpus/ from the test fixtures: runs the native test Ticks in
tests/ticks/ through a scripted session and keeps what they wrote (lines,
descriptors, states, updates), plus the frames and keys tickbox itself sends.

Run from anywhere: python3 fuzz/make_seeds.py. The output is committed; run
it again when the fixtures change.
"""
import json, os, struct, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
TICKS = os.path.join(ROOT, "tests", "ticks")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def request(i, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params},
                      separators=(",", ":"))


def session(argv, calls):
    """Runs a Tick with describe, read and `calls`; returns its stdout lines."""
    lines = [request(1, "tick/describe", {}), request(2, "tick/read", {})]
    for n, (tool, args) in enumerate(calls):
        lines.append(request(3 + n, "tick/call", {"tool": tool, "args": args, "revision": "r1"}))
    p = subprocess.run(argv, input=("\n".join(lines) + "\n").encode(), capture_output=True,
                       timeout=30)
    return lines, p.stdout.decode(errors="replace").splitlines()


def main():
    # (faulty.py's `wide` state is left out: 480 KB seeds slow every run.)
    transcripts = [
        ("counter", ["python3", os.path.join(TICKS, "counter.py")],
         [("increment", {"amount": 2}), ("history", {})]),
        ("faulty_ok", ["python3", os.path.join(TICKS, "faulty.py"), "ok"],
         [("bump", {}), ("echo", {"a": [1, "x"]}), ("fail", {}), ("reject", {})]),
        ("faulty_change", ["python3", os.path.join(TICKS, "faulty.py"), "catalog_change"],
         [("misbehave", {})]),
    ]
    for name, argv, calls in transcripts:
        sent, got = session(argv, calls)
        # framing: a knob byte (limit and chunk size) then the raw output.
        put("framing", name, bytes([0x37]) + ("\n".join(got) + "\n").encode())
        # dispatch: what the host sends, as an SDK Tick reads it.
        put("dispatch", name, "\n".join(sent) + "\n\xff+-\x1b[A")
        # batched: a read-size byte, then the same lines (here reads of 7 bytes).
        put("batched", name, bytes([7]) + ("\n".join(sent) + "\n").encode())
        for i, line in enumerate(got):
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            result = msg.get("result")
            if isinstance(result, dict) and "tools" in result:
                put("descriptor", "%s_%d" % (name, i), json.dumps(result))
            if isinstance(result, dict) and "seq" in result and "data" in result:
                put("state", "%s_read_%d" % (name, i), json.dumps(result))
                put("trim", "%s_%d" % (name, i), bytes([200]) + json.dumps(result["data"]).encode())
            if msg.get("method") == "tick/update":
                put("state", "%s_update_%d" % (name, i), json.dumps(msg["params"]))
    # live_wire: a chunk-size byte, then frames as client and host send them.
    def frame(tag, body):
        return tag + struct.pack(">I", len(body)) + body
    reqs = [{"op": "info"}, {"op": "describe"}, {"op": "read"}, {"op": "screen"},
            {"op": "call", "tool": "increment", "args": {"amount": 1}, "revision": "r1",
             "timeout_ms": 2000},
            {"op": "attach", "cols": 80, "rows": 24}, {"op": "watch", "interval_ms": 500},
            {"op": "stop"}]
    for i, r in enumerate(reqs):
        put("live_wire", "request_%d" % i, bytes([7]) + frame(b"J", json.dumps(r).encode()))
    put("live_wire", "stream", bytes([3]) + frame(b"J", b'{"ok":{"id":"3f9a1c"}}')
        + frame(b"O", b"\x1b[H\x1b[JCounter: 2") + frame(b"K", b"+")
        + frame(b"J", b'{"resize":{"cols":100,"rows":40}}')
        + frame(b"J", b'{"ended":{"reason":"x"}}'))
    # keys: a split byte, then what terminals send.
    for i, k in enumerate([b"+-a\r\x7f\x03", b"\x1b[A\x1b[B\x1bOC\x1b[3~\x1b",
                           "é€😀".encode(), b"\x1b[5~\x1b[6~\x1b[1~\x1b[4~\x1b[Z\t",
                           b"\x1b[1;5C\x1b[200~paste\x1b[201~"]):
        put("keys", "keys_%d" % i, bytes([i * 3]) + k)


main()
