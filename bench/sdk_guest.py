#!/usr/bin/env python3
"""Guest-side answer cost of two wasip1 counter modules, without tickbox's
host in the measurement (BENCHMARKS.md, "Guest SDKs against the
hand-written counters").

    pip install wasmtime        # wasmtime's Python embedding, from PyPI
    python3 bench/sdk_guest.py hand=hand/counter.wasm sdk=examples/go/build/counter.wasm

bench/sdk_counters.py measures a whole answer through `tickbox mcp`, where
the host's share (the same for both Ticks) and a loaded machine's swings
hide a difference of a few percent. This runs each module's `_start` in
wasmtime directly, protocol lines from a file on stdin, frames to a file:
per block and module, one session of WARM `increment` calls (the history
full, as in a long-running counter) and the same followed by K more calls
of one tool; the difference of the process's CPU time over K is the cost of
one answer (parse, tool, state compare, `tick/update`, response, and the
view each change redraws on stderr). Blocks alternate the modules' order,
and the ratio is taken per block (sdk / hand) before its median, so a noisy
neighbour in one block cancels in that block's ratio. Prints one JSON
object per tool.

The session is one file, so a module reads up to 64 KB of requests at a
time: what a loop does once per read (an SDK's redraw, its timers' check)
is paid here once per many requests, and through a host once per request.
A loop's cost per request is measured by bench/sdk_counters.py only.
"""

import json
import os
import statistics
import sys
import tempfile
import time

import wasmtime

WARM = 300  # more than the counters' 256-change history
K = {"increment": 2000, "history": 1000}
BLOCKS = int(os.environ.get("TICKBOX_SDK_GUEST_BLOCKS", "40"))


def call(i, tool, args):
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tick/call",
                       "params": {"tool": tool, "args": args, "revision": "1"}}) + "\n"


def session(path, tool, k):
    lines = ['{"jsonrpc":"2.0","id":0,"method":"tick/describe"}\n']
    lines += [call(1 + i, "increment", {"amount": 1}) for i in range(WARM)]
    args = {"amount": 1} if tool == "increment" else {}
    lines += [call(1 + WARM + i, tool, args) for i in range(k)]
    with open(path, "w") as f:
        f.write("".join(lines))
    return 1 + WARM + k  # requests, each answered once


def run(engine, module, stdin, scratch, expect):
    store = wasmtime.Store(engine)
    wasi = wasmtime.WasiConfig()
    wasi.stdin_file = stdin
    wasi.stdout_file = os.path.join(scratch, "out")
    wasi.stderr_file = os.path.join(scratch, "err")
    store.set_wasi(wasi)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    instance = linker.instantiate(store, module)
    cpu = time.process_time()
    try:
        instance.exports(store)["_start"](store)
    except wasmtime.ExitTrap as e:
        if e.code != 0:
            raise
    cpu = time.process_time() - cpu
    # Every request answered, so the time is of real answers.
    with open(os.path.join(scratch, "out")) as f:
        answered = sum('"id":' in line for line in f)
    if answered != expect:
        sys.exit(f"{stdin}: {answered} answers, {expect} requests")
    return cpu


def main():
    ticks = [a.split("=", 1) for a in sys.argv[1:]]
    if len(ticks) != 2:
        sys.exit(__doc__)
    engine = wasmtime.Engine()
    modules = {label: wasmtime.Module.from_file(engine, path) for label, path in ticks}
    scratch = tempfile.mkdtemp(prefix="sdk-guest-")
    base = os.path.join(scratch, "base")
    base_n = session(base, "increment", 0)
    sessions = {}
    for tool, k in K.items():
        path = os.path.join(scratch, tool)
        sessions[tool] = (path, session(path, tool, k), k)
    cost = {(label, tool): [] for label, _ in ticks for tool in K}
    labels = [label for label, _ in ticks]
    for block in range(BLOCKS):
        for label in labels if block % 2 == 0 else labels[::-1]:
            m = modules[label]
            start = run(engine, m, base, scratch, base_n)
            for tool, (path, n, k) in sessions.items():
                cost[(label, tool)].append((run(engine, m, path, scratch, n) - start) / k * 1e6)
    (hand, _), (sdk, _) = ticks
    for tool in K:
        ratios = [s / h for s, h in zip(cost[(sdk, tool)], cost[(hand, tool)])]
        q = statistics.quantiles(ratios, n=4)
        print(json.dumps({"tool": tool, "blocks": BLOCKS,
                          f"{hand}_us": round(statistics.median(cost[(hand, tool)]), 1),
                          f"{sdk}_us": round(statistics.median(cost[(sdk, tool)]), 1),
                          "ratio_median": round(statistics.median(ratios), 3),
                          "ratio_quartiles": [round(q[0], 3), round(q[2], 3)],
                          "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)]}))


if __name__ == "__main__":
    main()
