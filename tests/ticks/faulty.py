#!/usr/bin/env python3
"""A test Tick that breaks exactly one rule, chosen by its first argument.

Apart from the chosen fault it behaves like a conforming Tick with tools
`echo` (query), `bump` (mutating: emits an update) and a few that misbehave
on purpose. Each mode is one host rule the tests check; see the `MODE ==`
tests below.
"""
import json, os, signal, subprocess, sys, threading, time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
seq = 0
REVISION = "r1"
MISBEHAVING = 0
OBJ = {"type": "object"}
# Requests sent by `request_flood` before its catalog.
REQUEST_FLOOD = 20000


def descriptor():
    d = {
        "protocol": 3, "kind": "test.faulty", "title": "Faulty",
        "description": "Breaks one rule: " + MODE, "revision": REVISION,
        "tools": [
            {"name": "echo", "description": "Return args.", "input_schema": OBJ, "mutates": False},
            {"name": "bump", "description": "Emit an update.", "input_schema": OBJ, "mutates": True},
            {"name": "fail", "description": "Fail after starting.", "input_schema": OBJ, "mutates": True},
            {"name": "reject", "description": "Refuse without executing.", "input_schema": OBJ, "mutates": False},
            {"name": "misbehave", "description": "The mode's call fault.", "input_schema": OBJ, "mutates": False},
        ],
        "recover_with": "echo",
        "state": {"series": [{"path": "/log", "newest": "last"}]},
    }
    t = d["tools"]
    faults = {
        "protocol2": lambda: d.update(protocol=2),
        "desc_kind": lambda: d.update(kind="   "),
        "desc_title": lambda: d.update(title=""),
        "desc_revision": lambda: d.update(revision=""),
        "desc_tool_name": lambda: t[0].update(name=" "),
        "desc_tool_dup": lambda: t[1].update(name="echo"),
        "desc_schema_type": lambda: t[0].update(input_schema=["not", "an", "object"]),
        "desc_schema_invalid": lambda: t[0].update(input_schema={"type": 12}),
        "desc_recover_mutating": lambda: d.update(recover_with="bump"),
        "desc_recover_missing": lambda: d.update(recover_with="nope"),
        "desc_series_path": lambda: d.update(state={"series": [{"path": "log", "newest": "last"}]}),
        "desc_series_dup": lambda: d.update(state={"series": [{"path": "/log", "newest": "last"},
                                                               {"path": "/log", "newest": "first"}]}),
        "desc_too_big": lambda: d.update(description="x" * (512 * 1024)),
    }
    if MODE in faults:
        faults[MODE]()
    return d


WRITING = threading.Lock()


def write(raw):
    with WRITING:
        sys.stdout.write(raw)
        sys.stdout.flush()


def send(frame):
    write(json.dumps({"jsonrpc": "2.0", **frame}, separators=(",", ":")) + "\n")


def update(data, s=None, **extra):
    global seq
    seq = seq + 1 if s is None else s
    send({"method": "tick/update", "params": {"seq": seq, "data": data, **extra}})


def answer_read(rid):
    if MODE == "slow_init":
        time.sleep(6)
    if MODE == "update_null":
        update(None)
    elif MODE == "update_seq":
        update({"n": 1}, 4)
        update({"n": 2}, 4)
    elif MODE == "update_big":
        update({"blob": "x" * (512 * 1024)})
    elif MODE == "update_at":
        update({"n": 1}, at="yesterday")
    elif MODE == "no_newline":
        write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"seq": seq, "data": None}}))
        sys.exit(0)
    elif MODE == "long_line":
        write("[" + "1," * (4 * 1024 * 1024 + 8) + "1]\n")
    elif MODE == "wide":
        # A legal state of about 480 KB: 15,000 short strings and a wide
        # object, which the first trimmer took seconds over and made null.
        log = ["entry number %05d of the log" % i for i in range(15000)]
        names = {"k%04d" % i: "value %d" % i for i in range(2000)}
        return send({"id": rid, "result": {"seq": seq, "data": {"log": log, "names": names}}})
    send({"id": rid, "result": {"seq": seq, "data": {"log": []}}})


DESCRIBED = [0]


def answer_describe(rid):
    if MODE == "describe_silent":
        return
    # Initializes, then never answers tick/describe again.
    DESCRIBED[0] += 1
    if MODE == "describe_once" and DESCRIBED[0] > 1:
        return
    if MODE == "slow_init":
        # Each answer is within the 10 s per-request limit; together they are not.
        time.sleep(6)
    if MODE == "invalid_json":
        write("{this is not json\n")
        return
    if MODE == "jsonrpc_1":
        write(json.dumps({"jsonrpc": "1.0", "id": rid, "result": descriptor()}) + "\n")
        return
    if MODE == "null_id":
        write(json.dumps({"jsonrpc": "2.0", "id": None, "result": descriptor()}) + "\n")
        return
    if MODE == "string_id":
        write(json.dumps({"jsonrpc": "2.0", "id": str(rid), "result": descriptor()}) + "\n")
        return
    if MODE == "protocol2":
        sys.stderr.write("this Tick needs a protocol 2 host\r\n")
        sys.stderr.flush()
    if MODE == "request_flood":
        # Requests the host never answers (§3.2), far more than log lines.
        for i in range(REQUEST_FLOOD):
            send({"id": 1000 + i, "method": "host/please"})
    if MODE == "noise":
        # Notifications other than tick/update and requests from the Tick are ignored.
        send({"method": "x/log", "params": {"hello": 1}})
        send({"id": 77, "method": "host/please"})
    send({"id": rid, "result": descriptor()})


def answer_call(rid, params):
    tool, args = params.get("tool"), params.get("args", {})
    global REVISION, MISBEHAVING
    if params.get("revision") != REVISION:
        return send({"id": rid, "error": {"code": -32004, "message": "catalog changed"}})
    if tool == "echo":
        return send({"id": rid, "result": args})
    if tool == "bump":
        update({"log": [seq + 1]})
        return send({"id": rid, "result": {"seq": seq}})
    if tool == "fail":
        return send({"id": rid, "error": {"code": -32000, "message": "failed half-way", "data": {"step": 2}}})
    if tool == "reject":
        return send({"id": rid, "error": {"code": -32602, "message": "bad args"}})
    if tool != "misbehave":
        return send({"id": rid, "error": {"code": -32602, "message": "unknown tool"}})
    if MODE == "catalog_change":
        REVISION = "r2"
        return send({"id": rid, "result": {"revision": REVISION}})
    if MODE == "both":
        return send({"id": rid, "result": 1, "error": {"code": -32000, "message": "x"}})
    if MODE == "neither":
        return send({"id": rid})
    if MODE == "unknown_id":
        send({"id": 9999, "result": {"stale": True}})
        return send({"id": rid, "result": {"fine": True}})
    if MODE == "exit_mid_call":
        os._exit(7)
    if MODE in ("slow", "slow_async"):
        # Says so on its terminal: tests wait for it before they act on a
        # call that is in flight at the Tick.
        MISBEHAVING += 1
        sys.stderr.write("misbehave call %d received\r\n" % MISBEHAVING)
        sys.stderr.flush()
    if MODE == "slow":
        time.sleep(30)
        return send({"id": rid, "result": "late"})
    if MODE == "slow_async":
        # Answers in 30 s, reading and answering everything else meanwhile.
        t = threading.Timer(30, lambda: send({"id": rid, "result": "late"}))
        t.daemon = True
        return t.start()
    if MODE == "big_result":
        # About 5 MB on the wire, about 19 MB once re-encoded (1e15 -> 1000000000000000.0).
        return write('{"jsonrpc":"2.0","id":%d,"result":[%s1e15]}\n' % (rid, "1e15," * 1000000))
    if MODE == "read_floor":
        # The next read answers with seq 0, below the update just sent.
        update({"log": [1]}, 5)
        return send({"id": rid, "result": {"seq": 5}})
    return send({"id": rid, "result": {"mode": MODE}})


def hold_loop():
    """Queue misbehave calls until stdin is quiet, then answer them all with
    the largest number of requests that were ever outstanding at once."""
    import select
    queued, most, buf = [], 0, b""
    fd = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], 0.3 if queued else None)
        if not ready:
            for rid in queued:
                send({"id": rid, "result": {"max_outstanding": most}})
            queued = []
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            rid, method = req["id"], req["method"]
            if method == "tick/call" and req["params"]["tool"] == "misbehave":
                queued.append(rid)
                most = max(most, len(queued))
            elif method == "tick/describe":
                answer_describe(rid)
            elif method == "tick/read":
                answer_read(rid)
            else:
                answer_call(rid, req.get("params", {}))


def main():
    if MODE == "hold":
        return hold_loop()
    if MODE == "stray_stdout":
        write("Starting up...\n")
    if MODE == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # A helper in the same process group must not survive either.
        helper = subprocess.Popen(["sleep", "300"])
        pidfile = os.environ.get("TICK_PIDS")
        if pidfile:
            with open(pidfile, "w") as f:
                f.write("%d %d\n" % (os.getpid(), helper.pid))
    read_seq = 0
    for line in sys.stdin:
        try:
            req = json.loads(line)
            rid, method = req["id"], req["method"]
        except (ValueError, KeyError, TypeError):
            continue
        if method == "tick/describe":
            answer_describe(rid)
        elif method == "tick/read":
            if MODE == "read_floor" and seq == 5:
                send({"id": rid, "result": {"seq": 0, "data": {"log": []}}})
            else:
                answer_read(rid)
        elif method == "tick/call":
            answer_call(rid, req.get("params", {}))
        else:
            send({"id": rid, "error": {"code": -32601, "message": "unknown method"}})
    if MODE == "stubborn":
        while True:
            time.sleep(1)


main()
