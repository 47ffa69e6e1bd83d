#!/usr/bin/env python3
"""Answer latency of counter Ticks through `tickbox mcp` (BENCHMARKS.md,
"Guest SDKs against hand-written counters").

    python3 bench/sdk_counters.py TICKBOX LABEL=counter.wasm ...

For each Tick: one warm-up start into a fresh compile cache, then a wait
until the cache holds every Tick's optimized (Cranelift) code, so that no
round runs on the baseline compiler's code; then
`tickbox mcp TICK` over stdio with N calls of each tool measured one at a
time (send, wait for the answer), in rounds that alternate between the
Ticks so that a noisy neighbour hits all of them alike. Prints one JSON
object per Tick and tool: median and 90th percentile in microseconds.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

# Calls of each tool per session, the first WARM of them not counted (the
# interpreters inside the components warm up), in ROUNDS sessions per Tick.
N, WARM, ROUNDS = 300, 50, 6
CALLS = {"history": {}, "increment": {"amount": 1}}


class Mcp:
    def __init__(self, tickbox, wasm):
        self.p = subprocess.Popen([tickbox, "mcp", wasm, "--compile-timeout", "600"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.notify("notifications/initialized")
        self.tools = {t["name"] for t in self.request("tools/list", {})["tools"]}

    def notify(self, method):
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.next += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method,
                                       "params": params}).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            msg = json.loads(self.p.stdout.readline())
            if msg.get("id") == self.next:
                if "error" in msg:
                    raise RuntimeError(msg["error"])
                return msg["result"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def tool_name(tools, short):
    return next(t for t in sorted(tools) if t == short or t.endswith("_" + short))


def main():
    tickbox, ticks = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    os.environ["TICKBOX_CACHE_DIR"] = tempfile.mkdtemp(prefix="sdk-bench-cache-")
    for _, wasm in ticks:
        subprocess.run([tickbox, "read", wasm, "--compile-timeout", "600"], check=True,
                       stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        ls = json.loads(subprocess.run([tickbox, "cache", "ls"], capture_output=True, check=True).stdout)
        if sum(e["compiler"] == "cranelift" for e in ls["entries"]) >= len(ticks):
            break
        time.sleep(1)
    else:
        sys.exit("the optimized code never reached the cache")
    samples = {(label, tool): [] for label, _ in ticks for tool in CALLS}
    for r in range(ROUNDS):
        for label, wasm in ticks if r % 2 == 0 else reversed(ticks):
            m = Mcp(tickbox, wasm)
            for tool, args in CALLS.items():
                name = tool_name(m.tools, tool)
                for i in range(N):
                    t0 = time.perf_counter()
                    result = m.request("tools/call", {"name": name, "arguments": args})
                    if i >= WARM:
                        samples[(label, tool)].append(time.perf_counter() - t0)
                    assert not result.get("isError"), result
            m.close()
    for (label, tool), xs in samples.items():
        xs.sort()
        print(json.dumps({"tick": label, "tool": tool, "n": len(xs),
                          "median_us": round(xs[len(xs) // 2] * 1e6),
                          "p90_us": round(xs[len(xs) * 9 // 10] * 1e6)}))


if __name__ == "__main__":
    main()
