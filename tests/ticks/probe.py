#!/usr/bin/env python3
"""A conforming test Tick that reports how the host started it.

Tools: `env` (instance id, TERM, argv[0], cwd, terminal facts), `winch`
(SIGWINCH count and the terminal size now). Both are queries.
"""
import json, os, signal, sys, threading

winches = 0
lock = threading.Lock()


def on_winch(signum, frame):
    global winches
    winches += 1


signal.signal(signal.SIGWINCH, on_winch)
OBJ = {"type": "object"}
DESC = {"protocol": 3, "kind": "test.probe", "title": "Probe", "description": "Reports its start.",
        "revision": "1", "tools": [
            {"name": "env", "description": "How I was started.", "input_schema": OBJ, "mutates": False},
            {"name": "winch", "description": "SIGWINCH count.", "input_schema": OBJ, "mutates": False}]}


def tty_size():
    try:
        s = os.get_terminal_size(2)
        return [s.columns, s.lines]
    except OSError:
        return None


def env():
    try:
        fd = os.open("/dev/tty", os.O_RDWR)
        os.close(fd)
        has_ctty = True
    except OSError:
        has_ctty = False
    return {"instance_id": os.environ.get("TICKLOOP_INSTANCE_ID"), "term": os.environ.get("TERM"),
            "argv0": sys.argv[0], "executable": sys.executable, "cwd": os.getcwd(),
            "stderr_isatty": os.isatty(2), "stdin_isatty": os.isatty(0), "stdout_isatty": os.isatty(1),
            "controlling_tty": has_ctty, "session_leader": os.getsid(0) == os.getpid(),
            "foreground": os.tcgetpgrp(2) == os.getpgrp() if os.isatty(2) else False,
            "size": tty_size()}


sys.stderr.write("probe ready\r\n")
sys.stderr.flush()
for line in sys.stdin:
    req = json.loads(line)
    m, rid = req["method"], req["id"]
    if m == "tick/describe":
        res = DESC
    elif m == "tick/read":
        res = {"seq": 0, "data": {"ok": True}}
    elif req["params"]["tool"] == "env":
        res = env()
    else:
        res = {"winches": winches, "size": tty_size()}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": res}) + "\n")
    sys.stdout.flush()
