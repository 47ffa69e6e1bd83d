#!/usr/bin/env python3
"""Answers a burst of requests with their bytes interleaved (breaks §3.1: complete lines)."""
import os
from base import Tick


class T(Tick):
    def run(self):
        buf = b""
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            buf += chunk
            lines = buf.split(b"\n")
            buf = lines.pop()
            frames = []
            for line in lines:
                req = self.parse(line)
                if req is not None:
                    frames.append(self.line(self.answer(*req)))
            if len(frames) < 2:
                for f in frames:
                    self.write(f)
                continue
            # Several threads writing without a lock: first halves, then second halves.
            halves = [(f[: len(f) // 2], f[len(f) // 2:]) for f in frames]
            self.write("".join(h[0] for h in halves) + "".join(h[1] for h in halves))


T().run()
