#!/usr/bin/env python3
"""A small OTLP/HTTP receiver for the OpenTelemetry tests (cli/tests/it/otel.rs).

Listens on 127.0.0.1 (port 0 unless --port), prints `listening PORT` on
stdout once it accepts, and for each POST to /v1/traces or /v1/metrics
decodes the body with the official OTLP classes (opentelemetry-proto):
OTLP/JSON with protobuf's JSON parser in strict mode (an unknown field is
an error), after turning the hex trace and span ids OTLP/JSON uses into
the base64 protobuf's JSON mapping expects; or binary protobuf. Each
request becomes one JSON line in --out: the path, the raw body (text),
and the decoded message (ids as hex again), or the decoding error (then
the answer is 400).
"""
import argparse, base64, json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)

KINDS = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}
ID_KEYS = ("traceId", "spanId", "parentSpanId")
lock = threading.Lock()


def ids(value, convert):
    """Applies `convert` to every trace or span id in a decoded JSON tree."""
    if isinstance(value, dict):
        return {k: (convert(v) if k in ID_KEYS and isinstance(v, str) else ids(v, convert))
                for k, v in value.items()}
    if isinstance(value, list):
        return [ids(v, convert) for v in value]
    return value


def hex_to_b64(s):
    return base64.b64encode(bytes.fromhex(s)).decode()


def b64_to_hex(s):
    return base64.b64decode(s).hex()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        kind = KINDS.get(self.path)
        record = {"path": self.path, "content_type": self.headers.get("Content-Type"),
                  "headers": {k.lower(): v for k, v in self.headers.items()},
                  "raw": body.decode("utf-8", "replace")}
        status = 200
        if kind is None:
            status, record["error"] = 404, "no such path"
        else:
            request, response = kind
            try:
                message = request()
                if (self.headers.get("Content-Type") or "").startswith("application/json"):
                    tree = ids(json.loads(body), hex_to_b64)
                    json_format.ParseDict(tree, message, ignore_unknown_fields=False)
                else:
                    message.ParseFromString(body)
                record["message"] = ids(json_format.MessageToDict(message), b64_to_hex)
            except Exception as e:  # noqa: BLE001 - the test reads the reason
                status, record["error"] = 400, "%s: %s" % (type(e).__name__, e)
        with lock:
            with open(self.server.out, "a") as f:
                f.write(json.dumps(record) + "\n")
        answer = b"{}" if status == 200 else json.dumps({"error": record.get("error")}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.out = args.out
    print("listening %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
