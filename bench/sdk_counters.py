#!/usr/bin/env python3
"""Answer latency of counter Ticks through `tickbox mcp` (BENCHMARKS.md,
"Guest SDKs against the hand-written counters").

    python3 bench/sdk_counters.py TICKBOX LABEL=counter.wasm ...

For each Tick: one warm-up start into a fresh compile cache, then a wait
until the cache holds every Tick's optimized (Cranelift) code, so that no
round runs on the baseline compiler's code; then rounds of one
`tickbox mcp TICK` session per Tick over stdio, all open at once, with N
calls of each tool measured one at a time (send, wait for the answer),
BLOCK calls of one Tick, then BLOCK of the next (the order turned round
every round), so that a noisy neighbour hits all of them alike. Prints one JSON
object per Tick and tool: median and 90th percentile in microseconds, and
the CPU time the `tickbox mcp` process (host and Tick, every thread) spent
per call, from /proc's schedstat; for each sdk-X beside a hand-X, the
median over rounds of the two ratios and their range.

Sessions one after the other (each Tick's 250 calls, then the next Tick's)
saw different neighbours: on the shared 2-core machine single rounds'
ratios of the same two builds ranged from 0.3 to 5.7, and the medians of
20 rounds moved by a third between runs minutes apart. Alternating single
calls is no better: every call then starts with the caches another
process left, which doubled a call's CPU time and pulled the ratios
toward 1 (a pair measured 1.09 call by call and 1.13 to 1.20 in blocks).
Blocks of 25 keep most calls warm and the neighbours alike.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

# Calls of each tool per session, the first WARM of them not counted (the
# interpreters inside the components warm up), in blocks of BLOCK (WARM is
# a whole number of blocks), in ROUNDS sessions per Tick
# (TICKBOX_SDK_BENCH_ROUNDS: more rounds, a steadier median of ratios).
N, WARM, BLOCK = 250, 50, 25
ROUNDS = int(os.environ.get("TICKBOX_SDK_BENCH_ROUNDS", "10"))
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


def cpu_ns(pid):
    """CPU time of every thread of `pid` so far (schedstat: nanoseconds)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # a thread that ended meanwhile
    return total


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def tool_name(tools, short):
    return next(t for t in sorted(tools) if t == short or t.endswith("_" + short))


def main():
    tickbox, ticks = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    # A fresh cache unless one is given (a cache kept from an earlier run
    # saves the wait for the optimized code).
    os.environ.setdefault("TICKBOX_CACHE_DIR", tempfile.mkdtemp(prefix="sdk-bench-cache-"))
    for _, wasm in ticks:
        subprocess.run([tickbox, "read", wasm, "--compile-timeout", "600"], check=True,
                       stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        ls = json.loads(subprocess.run([tickbox, "cache", "ls"], capture_output=True, check=True).stdout)
        # One entry per module: the same file under two labels is one.
        if sum(e["compiler"] == "cranelift" for e in ls["entries"]) >= len({w for _, w in ticks}):
            break
        time.sleep(1)
    else:
        sys.exit("the optimized code never reached the cache")
    samples = {(label, tool): [] for label, _ in ticks for tool in CALLS}
    # Per round, each Tick's median wall time and CPU per call; a hand-X's
    # and an sdk-X's blocks alternate, so their ratio in one round sees the
    # same neighbours.
    rounds = {(label, tool): [] for label, _ in ticks for tool in CALLS}
    cpu = {(label, tool): [] for label, _ in ticks for tool in CALLS}
    for r in range(ROUNDS):
        sessions = [(label, Mcp(tickbox, wasm)) for label, wasm in (ticks if r % 2 == 0 else ticks[::-1])]
        for tool, args in CALLS.items():
            names = [tool_name(m.tools, tool) for _, m in sessions]
            walls = [[] for _ in sessions]
            for block in range(0, N, BLOCK):
                if block == WARM:
                    cpu0 = [cpu_ns(m.p.pid) for _, m in sessions]
                for (_, m), name, wall in zip(sessions, names, walls):
                    for i in range(block, block + BLOCK):
                        t0 = time.perf_counter()
                        result = m.request("tools/call", {"name": name, "arguments": args})
                        if i >= WARM:
                            wall.append(time.perf_counter() - t0)
                        assert not result.get("isError"), result
            for (label, m), c0, wall in zip(sessions, cpu0, walls):
                cpu[(label, tool)].append((cpu_ns(m.p.pid) - c0) / (N - WARM))
                samples[(label, tool)] += wall
                rounds[(label, tool)].append(median(wall))
        for _, m in sessions:
            m.close()
    for (label, tool), xs in samples.items():
        xs.sort()
        row = {"tick": label, "tool": tool, "n": len(xs), "median_us": round(xs[len(xs) // 2] * 1e6),
               "p90_us": round(xs[len(xs) * 9 // 10] * 1e6)}
        row["cpu_us_per_call"] = round(median(cpu[(label, tool)]) / 1e3, 1)
        hand = label.replace("sdk-", "hand-", 1)
        if label.startswith("sdk-") and (hand, tool) in rounds:
            ratios = [a / b for a, b in zip(rounds[(label, tool)], rounds[(hand, tool)])]
            row["wall_ratio_to_hand"] = round(median(ratios), 3)
            row["wall_ratio_range"] = [round(min(ratios), 3), round(max(ratios), 3)]
            ratios = [a / b for a, b in zip(cpu[(label, tool)], cpu[(hand, tool)])]
            row["cpu_ratio_to_hand"] = round(median(ratios), 3)
            row["cpu_ratio_range"] = [round(min(ratios), 3), round(max(ratios), 3)]
        print(json.dumps(row))


if __name__ == "__main__":
    main()
