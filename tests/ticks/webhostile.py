#!/usr/bin/env python3
"""A conforming Tick that aims at a web page showing it (`tickbox inspect`):
every string it controls carries markup that would run script if a page
parsed it as HTML (a <script> element, an <img> and an <svg> with event
handlers that set window.__pwned and document.title), next to terminal
escape sequences (an OSC 2 title, OSC 52 clipboard, a bidi override). The
strings: its title and description, tool descriptions, schema titles,
property descriptions and enum values, state keys and values, its screen,
tool results and error messages.
"""
import json, sys

ESC = "\x1b"
PAYLOAD = ("<script>window.__pwned='script';document.title='pwned'</script>"
           "<img src=x onerror=\"window.__pwned='img';document.title='pwned'\">"
           "<svg onload=\"window.__pwned='svg'\"></svg>"
           + ESC + "]2;pwned-title\x07" + ESC + "]52;c;cm0gLXJmIH4=\x07\u202e")


def send(frame):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def descriptor():
    schema = {"type": "object", "title": PAYLOAD, "description": PAYLOAD,
              "properties": {
                  "x": {"type": "string", "description": PAYLOAD},
                  "pick": {"enum": [PAYLOAD, "plain"], "description": PAYLOAD},
              }}
    return {
        "protocol": 3, "kind": "test.webhostile", "title": "Web " + PAYLOAD,
        "description": PAYLOAD, "revision": "1" ,
        "tools": [
            {"name": "echo", "description": "Echo " + PAYLOAD, "input_schema": schema, "mutates": False},
            {"name": "fail", "description": "Fail " + PAYLOAD, "input_schema": {"type": "object"}, "mutates": False},
        ],
    }


def main():
    sys.stderr.write("SCREEN " + PAYLOAD + "\r\n")
    sys.stderr.flush()
    for line in sys.stdin:
        req = json.loads(line)
        rid, method, params = req.get("id"), req.get("method"), req.get("params", {})
        if method == "tick/describe":
            send({"id": rid, "result": descriptor()})
        elif method == "tick/read":
            send({"id": rid, "result": {"seq": 0, "data": {"note": PAYLOAD, PAYLOAD: [PAYLOAD]}}})
        elif method == "tick/call":
            if params.get("tool") == "echo":
                send({"id": rid, "result": {"said": PAYLOAD, PAYLOAD: 1}})
            else:
                send({"id": rid, "error": {"code": -32000, "message": PAYLOAD, "data": {"why": PAYLOAD}}})
        else:
            send({"id": rid, "error": {"code": -32601, "message": "unknown method"}})


main()
