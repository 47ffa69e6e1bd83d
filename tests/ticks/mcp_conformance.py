#!/usr/bin/env python3
"""A Tick with the two tools the MCP conformance suite's tool scenarios call
by name (`test_simple_text`, `test_error_handling`), so those scenarios can
run against the facade over HTTP (mcp/tests/it/sdks.rs). Conforming,
no view beyond one line, no state changes.
"""
import json, sys

DESCRIPTOR = {
    "protocol": 3, "kind": "test.mcp-conformance", "title": "MCP conformance tools",
    "description": "Tools the MCP conformance suite calls by name.", "revision": "1",
    "tools": [
        {"name": "test_simple_text", "description": "Returns a simple text.",
         "input_schema": {"type": "object", "additionalProperties": False}, "mutates": False},
        {"name": "test_error_handling", "description": "Always fails.",
         "input_schema": {"type": "object", "additionalProperties": False}, "mutates": False},
    ],
}


def send(frame):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def handle(rid, method, params):
    if method == "tick/describe":
        return send({"id": rid, "result": DESCRIPTOR})
    if method == "tick/read":
        return send({"id": rid, "result": {"seq": 0, "data": {}}})
    if method == "tick/call" and params.get("revision") == "1":
        if params.get("tool") == "test_simple_text":
            return send({"id": rid, "result": {"text": "This is a simple text response for testing."}})
        if params.get("tool") == "test_error_handling":
            return send({"id": rid, "error": {"code": -32000,
                         "message": "This tool intentionally returns an error for testing"}})
    send({"id": rid, "error": {"code": -32602, "message": "unknown call"}})


sys.stderr.write("MCP conformance tools\r\n")
sys.stderr.flush()
for line in sys.stdin:
    try:
        request = json.loads(line)
        rid = request["id"]
    except (ValueError, KeyError, TypeError):
        continue
    if isinstance(rid, int) and not isinstance(rid, bool) and rid >= 0:
        handle(rid, request.get("method"), request.get("params", {}))
